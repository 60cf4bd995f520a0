"""Bad input, fuzz-style: every case ends in exit code 2 with one line on stderr that names the
culprit, no traceback, nothing on stdout, no file written or changed, and no work started (the
greedy, solver, search and training entry points are replaced by tripwires)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cardinal.verify.cli import main

from tests.conftest import DESIGN_NETWORK

Build = Callable[[Path], list[str]]  # writes the files of a case under tmp, returns the argv


# ---------------------------------------------------------------------------- files
def _write(tmp: Path, name: str, content: str | bytes) -> str:
    path = tmp / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return str(path)


def _net(tmp: Path, document: object = DESIGN_NETWORK, text: str | bytes | None = None) -> str:
    return _write(tmp, "net.json", json.dumps(document) if text is None else text)


def _layer(**changes: object) -> dict:
    """The DESIGN network with its first layer changed."""
    first = {**DESIGN_NETWORK["layers"][0], **changes}
    return {**DESIGN_NETWORK, "layers": [first, DESIGN_NETWORK["layers"][1]]}


def _inputs(tmp: Path, text: str | bytes = "1,1,1\n") -> str:
    return _write(tmp, "x.csv", text)


def _explain(tmp: Path, *extra: str, network: str | None = None, inputs: str | None = None) -> list[str]:
    return ["explain", network or _net(tmp), "--inputs", inputs or _inputs(tmp), *extra]


def _certify(tmp: Path, *extra: str) -> list[str]:
    return ["certify", _net(tmp), "--inputs", _inputs(tmp), "--solvers", "enumerate", *extra]


def _judge(tmp: Path, *extra: str) -> list[str]:
    claims = _write(tmp, "claims.jsonl", '{"row": 0, "kind": "contrastive", "features": [0, 2]}\n')
    return ["check", _net(tmp), "--inputs", _inputs(tmp), "--explanations", claims, "--kind", "contrastive", *extra]


def _folder(tmp: Path, name: str) -> str:
    (tmp / name).mkdir()
    return str(tmp / name)


def _beside_a_file(tmp: Path, existing: str, name: str) -> str:
    """The path `tmp/name`, after writing a file `tmp/existing`."""
    _write(tmp, existing, "")
    return str(tmp / name)


def _domain(tmp: Path, document: object) -> list[str]:
    return _explain(tmp, "--domain", _write(tmp, "domain.json", json.dumps(document)))


CASE = {
    "format": "cardinal.case/1",
    "network": DESIGN_NETWORK,
    "domain": {"lower": [0.0, 0.0, 0.0], "upper": [1.0, 1.0, 1.0]},
    "threshold": 0.5,
    "input": [1.0, 1.0, 1.0],
    "kind": "contrastive",
    "greedy": [0, 1, 2],
    "minimum": [0, 2],
    "solvers": {},
    "verdict": "greedy_suboptimal",
}


def _replay(tmp: Path, **changes: object) -> list[str]:
    return ["replay", _write(tmp, "case.json", json.dumps({**CASE, **changes}))]


RECORD = {  # a whole campaign record, as `Record.to_json` writes it
    "key": "design:0:contrastive",
    "instance": "design",
    "family": "hand-built",
    "activation": "relu",
    "network_hash": "0123456789abcdef",
    "n": 3,
    "widths": [2, 1],
    "row": 0,
    "kind": "contrastive",
    "threshold": 0.5,
    "prediction": 1,
    "output": 1.6,
    "greedy": {"features": [0, 1, 2], "size": 3, "seconds": 0.001},
    "greedy_exists": True,
    "greedy_check": "exact",
    "solvers": {"enumerate": {"status": "optimal", "features": [2], "size": 1, "seconds": 0.002}},
    "verdict": "greedy_suboptimal",
    "certified": True,
    "minimum": [2],
    "minimum_proved": True,
    "gap": 1,
}

def _campaign(tmp: Path, *lines: str | bytes, cases_file: bool = False) -> list[str]:
    """A campaign folder whose records.jsonl holds these lines (and, if `cases_file`, a file where
    the cases folder goes); crosscheck --resume on it."""
    folder = tmp / "campaign"
    folder.mkdir()
    data = b"".join((line if isinstance(line, bytes) else line.encode()) + b"\n" for line in lines)
    (folder / "records.jsonl").write_bytes(data)
    if cases_file:
        (folder / "cases").write_text("")
    return ["crosscheck", "--out", str(folder), "--solvers", "enumerate", "--resume"]


def _paper(tmp: Path, data_dir: str, report: str | None = None) -> list[str]:
    """crosscheck --suite paper into a new folder, with this data folder."""
    report = report or str(tmp / "paper.md")
    return ["crosscheck", "--suite", "paper", "--out", str(tmp / "c"), "--data-dir", data_dir, "--paper-report", report]


def _deep(depth: int = 100_000) -> str:
    return "[" * depth + "]" * depth


def read_only_folder() -> str:
    """A folder in which this user cannot create files, also as root: a chmod 555 folder does for
    others; for root, /sys (sysfs refuses new files) or /proc."""
    candidates = []
    if os.geteuid() != 0:
        folder = Path(tempfile.mkdtemp(prefix="cardinal-read-only-"))
        folder.chmod(0o555)
        candidates.append(str(folder))
    candidates += ["/sys/kernel", "/sys", "/proc"]
    for candidate in candidates:
        try:
            with tempfile.TemporaryFile(dir=candidate):
                pass
        except OSError:
            return candidate
    pytest.skip("no folder here refuses new files")


READ_ONLY = read_only_folder()


# ---------------------------------------------------------------------------- the table
CASES: list[tuple[str, Build, str]] = [
    # numbers on the command line
    ("threshold-nan", lambda t: _explain(t, "--threshold", "nan"), r"argument --threshold: 'nan' is not a finite number"),
    ("threshold-inf", lambda t: _explain(t, "--threshold", "inf"), r"argument --threshold: 'inf' is not a finite number"),
    ("threshold-minus-inf", lambda t: _explain(t, "--threshold=-inf"), r"argument --threshold: '-inf' is not a finite"),
    ("threshold-minus-inf-spaced", lambda t: _explain(t, "--threshold", "-inf"), r"argument --threshold: expected one"),
    ("threshold-1e400", lambda t: _explain(t, "--threshold", "1e400"), r"argument --threshold: '1e400' is not a finite"),
    ("threshold-word", lambda t: _explain(t, "--threshold", "half"), r"argument --threshold: 'half' is not a number"),
    ("lower-nan", lambda t: _explain(t, "--lower", "nan"), r"argument --lower: 'nan' is not a finite number"),
    ("upper-list-1e400", lambda t: _explain(t, "--upper", "1,1e400,1"), r"argument --upper: '1,1e400,1', value 1: .*finite"),
    ("time-limit-nan", lambda t: _certify(t, "--time-limit", "nan"), r"argument --time-limit: 'nan' is not a finite"),
    ("time-limit-inf", lambda t: _certify(t, "--time-limit", "inf"), r"argument --time-limit: 'inf' is not a finite"),
    ("time-limit-zero", lambda t: _certify(t, "--time-limit", "0"), r"argument --time-limit: '0' is not positive"),
    ("time-limit-absurd", lambda t: _certify(t, "--time-limit", "1e300"), r"argument --time-limit: '1e300' seconds is more"),
    ("epsilon-nan", lambda t: _certify(t, "--epsilon", "nan"), r"argument --epsilon: 'nan' is not a finite number"),
    ("epsilon-zero", lambda t: _certify(t, "--epsilon", "0"), r"argument --epsilon: '0' is not positive"),
    ("workers-zero", lambda t: ["crosscheck", "--out", str(t / "c"), "--workers", "0"], r"argument --workers: '0' is not"),
    ("workers-absurd", lambda t: ["crosscheck", "--out", str(t / "c"), "--workers", "100000"], r"--workers: '100000' is not"),
    ("crosscheck-solvers-empty", lambda t: ["crosscheck", "--out", str(t / "c"), "--solvers", ","], r"--solvers needs at least"),
    ("crosscheck-time-inf", lambda t: ["crosscheck", "--out", str(t / "c"), "--time-limit", "inf"], r"--time-limit: 'inf'"),
    ("hunt-seconds-nan", lambda t: ["hunt", "--out", str(t / "h"), "--seconds", "nan"], r"argument --seconds: 'nan' is not"),
    ("hunt-seed-negative", lambda t: ["hunt", "--out", str(t / "h"), "--seed", "-1"], r"argument --seed: '-1' is not ≥ 0"),
    ("hunt-features-absurd", lambda t: ["hunt", "--out", str(t / "h"), "--max-features", "10000"], r"--max-features: '10000'"),
    ("train-lr-nan", lambda t: ["train", "--dataset", "diabetes", "--out", str(t / "n.json"), "--lr", "nan"], r"--lr: 'nan'"),
    ("train-epochs-zero", lambda t: ["train", "--dataset", "diabetes", "--out", str(t / "n.json"), "--epochs", "0"], r"--epochs"),
    ("unknown-flag", lambda t: _explain(t, "--thresold", "1"), r"cardinal: error: unrecognized arguments: --thresold"),
    ("check-time-limit-nan", lambda t: _judge(t, "--time-limit", "nan"), r"argument --time-limit: 'nan' is not a finite"),
    ("check-epsilon-negative", lambda t: _judge(t, "--epsilon=-1"), r"argument --epsilon: '-1' is not positive"),
    # output paths
    ("check-out-is-dir", lambda t: _judge(t, "--out", str(t)), r"--out .* is a directory, not a file"),
    ("convert-out-is-dir", lambda t: ["convert", _net(t), _folder(t, "model.json")], r"OUT .*model.json is a directory"),
    ("convert-out-read-only", lambda t: ["convert", _net(t), f"{READ_ONLY}/m.json"], r"OUT .*: cannot create files in"),
    ("explain-out-is-dir", lambda t: _explain(t, "--out", str(t)), r"--out .* is a directory, not a file"),
    ("explain-out-read-only", lambda t: _explain(t, "--out", f"{READ_ONLY}/out.jsonl"), r"--out .*: cannot create files in"),
    ("explain-out-under-file", lambda t: _explain(t, "--out", _inputs(t) + "/out.jsonl"), r"--out .*x.csv is a file, not a dir"),
    ("explain-out-device", lambda t: _explain(t, "--out", "/dev/null"), r"--out /dev/null exists and is not a regular file"),
    ("certify-out-is-dir", lambda t: _certify(t, "--out", str(t)), r"--out .* is a directory, not a file"),
    ("certify-cases-is-file", lambda t: _certify(t, "--cases", _inputs(t)), r"--cases .*x.csv is a file, not a directory"),
    ("certify-cases-read-only", lambda t: _certify(t, "--cases", f"{READ_ONLY}/cases"), r"--cases .*: cannot create files in"),
    ("certify-cases-under-file", lambda t: _certify(t, "--cases", _inputs(t) + "/cases"), r"--cases .*x.csv is a file"),
    (
        "certify-default-cases-is-file",
        lambda t: _certify(t, "--out", _beside_a_file(t, "o.cases", "o.jsonl")),
        r"case folder .*o.cases is a file, not a directory",
    ),
    ("crosscheck-out-is-file", lambda t: ["crosscheck", "--out", _inputs(t)], r"--out .*x.csv is a file, not a directory"),
    ("crosscheck-out-read-only", lambda t: ["crosscheck", "--out", f"{READ_ONLY}/c"], r"--out .*: cannot create files in"),
    ("crosscheck-out-under-file", lambda t: ["crosscheck", "--out", _inputs(t) + "/c"], r"--out .*x.csv is a file, not a dir"),
    ("hunt-out-is-file", lambda t: ["hunt", "--out", _inputs(t), "--seconds", "1"], r"--out .*x.csv is a file, not a directory"),
    ("hunt-out-read-only", lambda t: ["hunt", "--out", f"{READ_ONLY}/h", "--seconds", "1"], r"--out .*: cannot create files"),
    ("train-out-is-dir", lambda t: ["train", "--dataset", "diabetes", "--out", str(t)], r"--out .* is a directory, not a file"),
    (
        "train-export-read-only",
        lambda t: ["train", "--dataset", "diabetes", "--out", str(t / "n.json"), "--export-test", f"{READ_ONLY}/x.csv"],
        r"--export-test .*: cannot create files in",
    ),
    # network files
    ("network-missing", lambda t: _explain(t, network=str(t / "none.json")), r"network file .*none.json not found"),
    ("network-is-dir", lambda t: _explain(t, network=str(t)), r"cannot read network file .*: Is a directory"),
    (
        "network-binary",
        lambda t: _explain(t, network=_net(t, text=b"\x80\xff\x00PK\x03\x04")),
        r"network file .*net.json is not text \(JSON expected; byte 0",
    ),
    ("network-deep", lambda t: _explain(t, network=_net(t, text=_deep())), r"net.json: malformed JSON: nested too deeply"),
    ("network-nan-literal", lambda t: _explain(t, network=_net(t, text='{"a": NaN}')), r"net.json: malformed JSON: NaN is not"),
    ("network-top-list", lambda t: _explain(t, network=_net(t, [1])), r"net.json: expected a JSON object .*got a list of 1"),
    ("network-format", lambda t: _explain(t, network=_net(t, {**DESIGN_NETWORK, "format": [0]})), r"'format' must be .*a list"),
    ("network-layers-object", lambda t: _explain(t, network=_net(t, {**DESIGN_NETWORK, "layers": {}})), r"'layers' must be a"),
    ("network-layer-string", lambda t: _explain(t, network=_net(t, {**DESIGN_NETWORK, "layers": ["x"]})), r"layer 1: needs"),
    (
        "weight-huge-int",
        lambda t: _explain(t, network=_net(t, text=json.dumps(DESIGN_NETWORK).replace("1.0", "1" + "0" * 400, 1))),
        r"layer 1: weight\[0\]\[0\]: an integer of 401 digits is too large for a double",
    ),
    (
        "weight-1e400",
        lambda t: _explain(t, network=_net(t, text=json.dumps(DESIGN_NETWORK).replace("1.0", "1e400", 1))),
        r"layer 1: weight\[0\]\[0\]: inf is not finite",
    ),
    ("weight-string", lambda t: _explain(t, network=_net(t, _layer(weight="abc"))), r"layer 1: weight must be a non-empty list"),
    ("weight-ragged", lambda t: _explain(t, network=_net(t, _layer(weight=[[1.0], [1.0, 1.0]]))), r"layer 1: weight is ragged"),
    (
        "weight-null",
        lambda t: _explain(t, network=_net(t, _layer(weight=[[1.0, None, 0.0], [0, 0, 1]]))),
        r"weight\[0\]\[1\]: null",
    ),
    ("bias-bool", lambda t: _explain(t, network=_net(t, _layer(bias=[True, 0.0]))), r"layer 1: bias\[0\]: true is not a number"),
    ("bias-object", lambda t: _explain(t, network=_net(t, _layer(bias={"0": 1}))), r"layer 1: bias must be a list of numbers"),
    ("activation-number", lambda t: _explain(t, network=_net(t, _layer(activation=5))), r"layer 1: activation must be a name"),
    ("activation-list", lambda t: _explain(t, network=_net(t, _layer(activation=["relu"]))), r"layer 1: activation must be"),
    (
        "activation-param-string",
        lambda t: _explain(t, network=_net(t, _layer(activation={"name": "hardtanh", "min": "0"}))),
        r"layer 1: activation 'hardtanh': parameter 'min': '0' is not a number",
    ),
    (
        "activation-param-huge",
        lambda t: _explain(t, network=_net(t, _layer(activation={"name": "step", "at": 10**400}))),
        r"parameter 'at': an integer of 401 digits is too large",
    ),
    # domain files
    (
        "domain-binary-file",
        lambda t: _explain(t, "--domain", _write(t, "d.json", b"\xff\xfe\x00\x01")),
        r"domain file .*d.json is not text",
    ),
    (
        "domain-binary-no",
        lambda t: _domain(t, {"lower": [0, 0, 0], "upper": [1, 1, 1], "binary": "no"}),
        r"domain.json: binary must be true or false, got 'no'",
    ),
    ("domain-binary-1", lambda t: _domain(t, {"lower": [0, 0, 0], "upper": [1, 1, 1], "binary": 1}), r"binary must be true or"),
    (
        "domain-lower-string",
        lambda t: _domain(t, {"lower": "0", "upper": [1, 1, 1]}),
        r"lower must be a list of numbers, got '0'",
    ),
    ("domain-lower-bool", lambda t: _domain(t, {"lower": [True, 0, 0], "upper": [1, 1, 1]}), r"lower\[0\]: true is not a number"),
    ("domain-lower-nested", lambda t: _domain(t, {"lower": [[0], 0, 0], "upper": [1, 1, 1]}), r"lower\[0\]: a list of 1 is not"),
    ("domain-lengths", lambda t: _domain(t, {"lower": [0, 0, 0], "upper": [1, 1]}), r"upper has 2 entries, expected 3"),
    ("domain-huge", lambda t: _domain(t, {"lower": [0, 0, 0], "upper": [1, 1, 10**400]}), r"upper\[2\]: an integer of 401"),
    ("domain-deep", lambda t: _explain(t, "--domain", _write(t, "d.json", _deep())), r"d.json: malformed JSON: nested too"),
    # input CSVs
    ("csv-typo-first-row", lambda t: _explain(t, inputs=_inputs(t, "1,1,l\n0,0,0\n")), r"row 0 \(line 1\), column 2: 'l' is not"),
    ("csv-only-row-bad", lambda t: _explain(t, inputs=_inputs(t, "1,abc,1\n")), r"row 0 \(line 1\), column 1: 'abc' is not a"),
    ("csv-empty-cell", lambda t: _explain(t, inputs=_inputs(t, "1,,1\n")), r"row 0 \(line 1\), column 1: '' is not a number"),
    ("csv-header-width", lambda t: _explain(t, inputs=_inputs(t, "a,b\n1,1,1\n")), r"the header \(line 1\) has 2 columns"),
    ("csv-header-only", lambda t: _explain(t, inputs=_inputs(t, "a,b,c\n")), r"x.csv: no input rows"),
    ("csv-no-header-flag", lambda t: _explain(t, "--no-header", inputs=_inputs(t, "a,b,c\n1,1,1\n")), r"row 0 .*column 0: 'a'"),
    ("csv-1e400", lambda t: _explain(t, inputs=_inputs(t, "1,1e400,1\n")), r"row 0 \(line 1\), column 1 is inf"),
    ("csv-binary", lambda t: _explain(t, inputs=_inputs(t, b"\x89PNG\r\n\x1a\n\xff\xff")), r"x.csv: not a text file"),
    (
        "csv-nul",
        lambda t: _explain(t, inputs=_inputs(t, b"1,1,\x001\n")),
        r"x.csv: row 0 \(line 1\), column 2: '\\x001' is not a number",
    ),
    ("csv-is-dir", lambda t: _explain(t, inputs=str(t)), r"cannot read inputs file .*: Is a directory"),
    # case files (replay)
    ("case-threshold-string", lambda t: _replay(t, threshold="0.5"), r"case.json: threshold: '0.5' is not a number"),
    ("case-threshold-list", lambda t: _replay(t, threshold=[0.5]), r"case.json: threshold: a list of 1 is not a number"),
    ("case-input-string", lambda t: _replay(t, input="1,1,1"), r"case.json: input must be a list of numbers"),
    ("case-input-length", lambda t: _replay(t, input=[1.0, 1.0]), r"case.json: input has 2 entries, expected 3"),
    ("case-witness-strings", lambda t: _replay(t, minimum_witness=["a", "b", "c"]), r"minimum_witness\[0\]: 'a' is not a number"),
    ("case-witness-length", lambda t: _replay(t, minimum_witness=[1.0]), r"minimum_witness has 1 entries, expected 3"),
    ("case-solvers-number", lambda t: _replay(t, solvers=5), r"case.json: solvers must be an object, got 5"),
    ("case-verdict-number", lambda t: _replay(t, verdict=5), r"case.json: verdict must be a string, got 5"),
    ("case-verdict-unknown", lambda t: _replay(t, verdict="great"), r"verdict: 'great' is not one of"),
    ("case-kind-list", lambda t: _replay(t, kind=["contrastive"]), r"case.json: kind must be a string"),
    ("case-greedy-string", lambda t: _replay(t, greedy="0,1,2"), r"greedy must be a list of feature indices or null"),
    ("case-minimum-bools", lambda t: _replay(t, minimum=[True]), r"minimum must be a list of feature indices"),
    ("case-note-list", lambda t: _replay(t, note=["x"]), r"case.json: note must be a string"),
    ("case-domain-binary-no", lambda t: _replay(t, domain={**CASE["domain"], "binary": "no"}), r"domain: binary must be true"),
    ("case-network-huge", lambda t: _replay(t, network=_layer(bias=[10**400, 0.0])), r"network: layer 1: bias\[0\]: an integer"),
    ("case-binary", lambda t: ["replay", _write(t, "case.json", b"\x00\x9f\x92\x96")], r"case file .*case.json is not text"),
    ("case-deep", lambda t: ["replay", _write(t, "case.json", _deep())], r"case.json: malformed JSON: nested too deeply"),
    ("case-not-object", lambda t: ["replay", _write(t, "case.json", "[]")], r"case.json: not a case file"),
    # campaign folders (crosscheck --resume)
    (
        "resume-corrupt-middle-line",
        lambda t: _campaign(t, json.dumps(RECORD), '{"key": "x", "verd', json.dumps(RECORD)),
        r"records.jsonl line 2: not a JSON record",
    ),
    ("resume-binary-line", lambda t: _campaign(t, json.dumps(RECORD), b"\xff\xfe\x00"), r"line 2: not a JSON record \(not UTF-8"),
    ("resume-line-not-object", lambda t: _campaign(t, "[1, 2]"), r"records.jsonl line 1: not a JSON object"),
    ("resume-key-missing", lambda t: _campaign(t, json.dumps({**RECORD, "key": None})), r"line 1: field 'key' is null"),
    ("resume-verdict-wrong", lambda t: _campaign(t, json.dumps({**RECORD, "verdict": 5})), r"line 1: field 'verdict' is 5"),
    ("resume-solvers-wrong", lambda t: _campaign(t, json.dumps({**RECORD, "solvers": {"z3": 5}})), r"line 1: solvers.z3 must"),
    ("resume-seconds-string", lambda t: _campaign(t, json.dumps({**RECORD, "greedy": {"seconds": "1"}})), r"field 'greedy'"),
    ("resume-nan", lambda t: _campaign(t, '{"key": NaN}'), r"records.jsonl line 1: not a JSON record \(NaN is not allowed\)"),
    (
        "campaign-cases-is-file",
        lambda t: _campaign(t, json.dumps(RECORD), cases_file=True),
        r"campaign folder: .*campaign/cases is a file, not a directory",
    ),
    ("paper-data-missing", lambda t: _paper(t, str(t)), r"7 data file\(s\) missing under .*: BlogFeedback.zip, loan_data.csv"),
    ("paper-data-dir-is-file", lambda t: _paper(t, _inputs(t)), r"--data-dir .*x.csv is not a directory"),
    ("paper-report-is-dir", lambda t: _paper(t, str(t), report=str(t)), r"--paper-report .* is a directory, not a file"),
    (
        "campaign-without-resume",
        lambda t: _campaign(t, json.dumps(RECORD))[:-1],
        r"campaign already holds 1 records: pass --resume",
    ),
]


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tripwires on every entry point of real work: bad input must be refused before it."""

    def tripwire(*args: object, **kwargs: object) -> None:
        raise AssertionError("work started before the input was checked")

    for target in (
        "cardinal.verify.greedy.explain",
        "cardinal.verify.certify.certify_row",
        "cardinal.verify.campaign._execute",
        "cardinal.verify.hunt.hunt",
        "cardinal.verify.train.train_monotone",
        "cardinal.verify.train.load_dataset",
        "cardinal.verify.cases.replay",
        "cardinal.verify.check.check_explanations",
    ):
        monkeypatch.setattr(target, tripwire)
    saved = os.environ.get("CARDINAL_DATA")  # crosscheck --data-dir sets it: restored afterwards
    yield
    if saved is None:
        os.environ.pop("CARDINAL_DATA", None)
    else:
        os.environ["CARDINAL_DATA"] = saved


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every path under `folder` with its size and modification time."""
    return {str(path.relative_to(folder)): (path.stat().st_size, path.stat().st_mtime_ns) for path in folder.rglob("*")}


def _check(code: int, out: str, err: str, message: str) -> None:
    assert code == 2, err
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert re.match(r"cardinal( [a-z]+)?: error: ", lines[0]), lines[0]
    assert re.search(message, lines[0]), lines[0]


@pytest.mark.parametrize(("build", "message"), [pytest.param(b, m, id=i) for i, b, m in CASES])
@pytest.mark.usefixtures("no_work")
def test_bad_input_is_refused_in_one_line(build: Build, message: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    argv = build(tmp_path)
    before = _snapshot(tmp_path)
    code = main(argv)
    captured = capsys.readouterr()
    _check(code, captured.out, captured.err, message)
    assert _snapshot(tmp_path) == before  # nothing written, nothing changed


def test_the_table_covers_every_command(tmp_path: Path) -> None:
    commands = set()
    for number, (_, build, _) in enumerate(CASES):
        (tmp_path / str(number)).mkdir()
        commands.add(build(tmp_path / str(number))[0])
    assert commands == {"explain", "certify", "check", "convert", "crosscheck", "hunt", "train", "replay"}
    assert len(CASES) >= 43


@pytest.mark.parametrize(
    "case_id", ["threshold-nan", "network-binary", "weight-huge-int", "case-solvers-number", "resume-corrupt-middle-line"]
)
def test_bad_input_through_the_console_entry(case_id: str, tmp_path: Path) -> None:
    """The same refusals from a real process (`python -m cardinal.verify.cli`)."""
    [(build, message)] = [(b, m) for i, b, m in CASES if i == case_id]
    argv = build(tmp_path)
    before = _snapshot(tmp_path)
    done = subprocess.run([sys.executable, "-m", "cardinal.verify.cli", *argv], capture_output=True, text=True, timeout=120)
    _check(done.returncode, done.stdout, done.stderr, message)
    assert _snapshot(tmp_path) == before


def test_header_is_taken_only_when_no_cell_is_a_number(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A named header is skipped; --header skips even a numeric first row; --no-header reads it."""
    net = _net(tmp_path)
    for text, flags, rows in [
        ("a,b,c\n1,1,1\n0,0,0\n", [], 2),
        ("1,1,1\n0,0,0\n", [], 2),
        ("1,1,1\n0,0,0\n", ["--header"], 1),
        ("1,1,1\n0,0,0\n", ["--no-header"], 2),
    ]:
        assert main(["explain", net, "--inputs", _inputs(tmp_path, text), "--kind", "contrastive", *flags]) == 0
        assert len(capsys.readouterr().out.splitlines()) == rows, (text, flags)


def test_negative_values_are_values_not_options(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`--lower -1,-1,-1` and `--threshold -1e-3` are numbers (argparse alone took them for options)."""
    argv = ["explain", _net(tmp_path), "--inputs", _inputs(tmp_path, "0,0,0\n"), "--kind", "contrastive"]
    assert main([*argv, "--lower", "-1,-1,-1", "--threshold", "-1e-3"]) == 0
    [line] = [json.loads(text) for text in capsys.readouterr().out.splitlines()]
    assert line["prediction"] == 1 and line["output"] == 0.0  # f(0) = 0 > -0.001

"""What commands write stays where the user said: nothing is written through a symbolic link
planted inside an output folder (a link the user names is followed), a campaign.lock that is not a
regular file is refused, a name over the file system's limit is refused before any work, a full
disk is reported in one line with nothing half-written, and a campaign removes its lock file when
it ends."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch  # noqa: F401 (the [all] extras promise it: missing fails, not skips)
from cardinal.verify import campaign
from cardinal.verify.campaign import LOCK_FILE, CampaignSettings, run_campaign
from cardinal.verify.cases import Case
from cardinal.verify.cli import main
from cardinal.verify.paper import write_paper_report
from cardinal.verify.suites import SUITES

from cardinal.errors import InputError
from cardinal.io import JsonLines, write_atomic
from cardinal.network import Network
from tests.application.test_bad_input import CASE, read_only_folder
from tests.application.test_campaign import tiny_instances
from tests.conftest import DESIGN_NETWORK


# ---------------------------------------------------------------------------- helpers
def _files(tmp: Path) -> tuple[str, str]:
    """The DESIGN network and one input row under tmp: (network, inputs)."""
    (tmp / "net.json").write_text(json.dumps(DESIGN_NETWORK))
    (tmp / "x.csv").write_text("1,1,1\n")
    return str(tmp / "net.json"), str(tmp / "x.csv")


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under `folder` with its content (None for anything but a regular file)."""
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))}


def _refused(capsys: pytest.CaptureFixture, code: int, pattern: str, last_only: bool = False) -> None:
    """Exit code 2 and one line matching `pattern` on stderr, no traceback (`last_only`: other
    lines, such as progress, may come before it)."""
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    lines = err.splitlines()
    assert (last_only or len(lines) == 1) and re.search(pattern, lines[-1]), err


@pytest.fixture
def design_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    """`crosscheck --suite quick` runs the DESIGN network alone (2 explanations, one a case file)."""
    monkeypatch.setitem(SUITES, "quick", lambda out: tiny_instances()[2:])


def _plant(path: Path, target: Path, kind: str) -> None:
    """Make `path` a link to `target` (a file or a folder, made if missing), a FIFO or a folder."""
    if kind == "link-to-file":
        if not target.exists():
            target.write_text("")
        path.symlink_to(target)
    elif kind == "link-to-folder":
        target.mkdir(exist_ok=True)
        path.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()


# ---------------------------------------------------------------------------- links inside a campaign folder
PLANTED = [
    ("campaign.lock", "link-to-file", r"campaign.lock is a symbolic link"),
    ("records.jsonl", "link-to-file", r"records.jsonl is a symbolic link"),
    ("summary.md", "link-to-file", r"summary.md is a symbolic link"),
    ("cases", "link-to-folder", r"cases is a symbolic link"),
    ("figures", "link-to-folder", r"figures is a symbolic link"),
    ("campaign.lock", "fifo", r"campaign.lock exists and is not a regular file"),
    ("campaign.lock", "folder", r"campaign.lock is a directory"),
]


@pytest.mark.parametrize(("name", "kind", "message"), PLANTED)
@pytest.mark.usefixtures("design_suite")
def test_a_campaign_folder_with_a_planted_link_is_refused_before_any_work(
    name: str, kind: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out, elsewhere = tmp_path / "campaign", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    _plant(out / name, elsewhere / name, kind)
    before, outside = _snapshot(out), _snapshot(elsewhere)
    code = main(["crosscheck", "--out", str(out), "--solvers", "enumerate"])
    _refused(capsys, code, message)
    assert _snapshot(out) == before and _snapshot(elsewhere) == outside


@pytest.mark.parametrize(("name", "kind", "message"), PLANTED)
def test_a_link_planted_after_the_checks_is_not_written_through(
    name: str, kind: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same things planted once the folder has been checked (a race, or a library caller):
    the writes themselves refuse them, and the lock file is still removed on the way out."""
    out, elsewhere = tmp_path / "campaign", tmp_path / "elsewhere"
    elsewhere.mkdir()
    checked = campaign._refuse_if_in_use
    planted: list[dict[str, bytes | None]] = []

    def check_then_plant(folder: Path) -> None:
        checked(folder)
        out.mkdir(exist_ok=True)
        _plant(out / name, elsewhere / name, kind)
        planted.append(_snapshot(elsewhere))

    monkeypatch.setattr(campaign, "_refuse_if_in_use", check_then_plant)
    with pytest.raises(InputError, match=message):
        run_campaign("tiny", out, CampaignSettings(("enumerate",), 30.0), instances=tiny_instances()[2:])
    assert _snapshot(elsewhere) == planted[0]  # nothing written there
    if name != LOCK_FILE:
        assert not os.path.lexists(out / LOCK_FILE)


# ---------------------------------------------------------------------------- the lock
def test_the_lock_is_held_while_a_campaign_runs_and_removed_when_it_is_interrupted(tmp_path: Path) -> None:
    out = tmp_path / "campaign"
    instances = tiny_instances()[2:]
    during: list[str] = []

    def stop_after_one(done: int, total: int, key: str) -> None:
        during.append((out / LOCK_FILE).read_text())
        with pytest.raises(InputError, match=r"is in use by another campaign \(pid \d+\)"):
            run_campaign("tiny", out, CampaignSettings(("enumerate",), 30.0), resume=True, instances=instances)
        raise KeyboardInterrupt  # Ctrl-C (SIGTERM is turned into the same)

    result = run_campaign("tiny", out, CampaignSettings(("enumerate",), 30.0), instances=instances, progress=stop_after_one)
    assert result.interrupted and during == [f"{os.getpid()}\n"]
    assert not os.path.lexists(out / LOCK_FILE)
    again = run_campaign("tiny", out, CampaignSettings(("enumerate",), 30.0), resume=True, instances=instances)
    assert again.records == 2 and again.new == 1 and not os.path.lexists(out / LOCK_FILE)


SIGTERM_BEFORE_THE_SOLVERS = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {root!r})
from tests.application.test_campaign import tiny_instances
from cardinal.verify.campaign import CampaignSettings, run_campaign
try:
    run_campaign("tiny", Path({out!r}), CampaignSettings(("enumerate",), 30.0), instances=tiny_instances()[2:], announce=lambda count: os.kill(os.getpid(), signal.SIGTERM))
except KeyboardInterrupt:
    sys.exit(130)
"""


def test_sigterm_before_the_solvers_start_ends_the_run_in_order_and_removes_the_lock(tmp_path: Path) -> None:
    """SIGTERM once greedy has run (the lock held, no solver started yet) is an interruption, as
    Ctrl-C is, not the default death: the lock file goes with the run."""
    out = tmp_path / "campaign"
    script = SIGTERM_BEFORE_THE_SOLVERS.format(root=str(Path(__file__).resolve().parents[2]), out=str(out))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 130, done.stderr
    assert out.is_dir() and not os.path.lexists(out / LOCK_FILE)


def test_a_lock_taken_on_a_lock_file_its_holder_removed_is_taken_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that opened the lock file just before its holder removed it (and let go) gets the
    lock of a file no longer in the folder: it must let go and lock the folder's file."""
    (tmp_path / LOCK_FILE).write_text("")
    removed = tmp_path / "removed"
    removed.write_text("")
    opened = campaign.open_regular

    def first_the_removed_one(folder: int, path: Path, flags: int) -> int:
        monkeypatch.setattr(campaign, "open_regular", opened)
        return os.open(removed, os.O_RDWR)

    monkeypatch.setattr(campaign, "open_regular", first_the_removed_one)
    with campaign._locked(tmp_path):
        assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n" and removed.read_text() == ""
        other = os.open(tmp_path / LOCK_FILE, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(other)
    assert not os.path.lexists(tmp_path / LOCK_FILE)


# ---------------------------------------------------------------------------- names cardinal makes in a folder the user named
def _certify(tmp: Path, cases: Path) -> list[str]:
    network, inputs = _files(tmp)
    return ["certify", network, "--inputs", inputs, "--threshold", "0.5", "--kind", "contrastive", "--cases", str(cases)]


def _found() -> SimpleNamespace:
    """What `verify.hunt.hunt` reports: one counterexample, the DESIGN case."""
    found = SimpleNamespace(kind="contrastive", source="random", tie_decided=False, greedy=(0, 1, 2), minimum=(0, 2))
    found.net, found.case = Network.from_json(DESIGN_NETWORK), lambda: Case.from_json(CASE)
    return SimpleNamespace(tried=1, seconds=0.0, raw_finds=1, smallest=[found])


def test_a_link_at_a_case_file_name_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """certify --cases and hunt --out name a folder; the case files in it are cardinal's names."""
    assert main(_certify(tmp_path, tmp_path / "first")) == 0
    [name] = [path.name for path in (tmp_path / "first").iterdir()]
    capsys.readouterr()
    cases, precious = tmp_path / "cases", tmp_path / "precious.json"
    cases.mkdir()
    precious.write_text("precious\n")
    (cases / name).symlink_to(precious)
    _refused(capsys, main(_certify(tmp_path, cases)), rf"cases/{name} is a symbolic link")
    monkeypatch.setattr("cardinal.verify.hunt.hunt", lambda *args, **kwargs: _found())
    hunted = tmp_path / "hunted"
    hunted.mkdir()
    (hunted / Case.from_json(CASE).name).symlink_to(precious)
    _refused(capsys, main(["hunt", "--out", str(hunted)]), r"hunted/greedy_suboptimal-.*\.json is a symbolic link")
    assert precious.read_text() == "precious\n"


@pytest.mark.parametrize("planted", ["paper.md", "models"])
def test_the_paper_report_and_models_are_not_written_through_a_planted_link(
    planted: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out, elsewhere = tmp_path / "campaign", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    _plant(out / planted, elsewhere / planted, "link-to-file" if planted == "paper.md" else "link-to-folder")
    code = main(["crosscheck", "--suite", "paper", "--out", str(out), "--solvers", "enumerate", "--data-dir", str(tmp_path)])
    _refused(capsys, code, rf"campaign/{planted} is a symbolic link")
    with pytest.raises(InputError, match=rf"campaign/{planted} is a symbolic link"):  # the writes refuse it too
        if planted == "paper.md":
            write_paper_report(out / "paper.md", [], [], [], root=out)
        else:
            write_atomic(out / "models" / "heart.json", "{}", root=out)
    assert _snapshot(elsewhere) == {planted: b""} if planted == "paper.md" else _snapshot(elsewhere) == {planted: None}


def test_a_link_the_user_names_is_followed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """--out naming a link: the file it points to gets the output (the link stays); a campaign
    folder given as a link is the folder it points to."""
    network, inputs = _files(tmp_path)
    (tmp_path / "real").mkdir()
    link = tmp_path / "out.jsonl"
    link.symlink_to(tmp_path / "real" / "out.jsonl")
    assert main(["explain", network, "--inputs", inputs, "--threshold", "0.5", "--out", str(link)]) == 0
    assert link.is_symlink() and len((tmp_path / "real" / "out.jsonl").read_text().splitlines()) == 2
    folder = tmp_path / "campaign"
    folder.symlink_to(tmp_path / "real", target_is_directory=True)
    result = run_campaign("tiny", folder, CampaignSettings(("enumerate",), 30.0), instances=tiny_instances()[2:])
    assert result.records == 2 and (tmp_path / "real" / "records.jsonl").is_file() and folder.is_symlink()


# ---------------------------------------------------------------------------- long names
@pytest.mark.parametrize("length", [251, 255])
def test_a_legal_long_name_is_written_with_a_temporary_that_fits(length: int, tmp_path: Path) -> None:
    network, inputs = _files(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    target = out / ("o" * (length - len(".jsonl")) + ".jsonl")
    assert main(["explain", network, "--inputs", inputs, "--threshold", "0.5", "--out", str(target)]) == 0
    assert [path.name for path in out.iterdir()] == [target.name] and target.read_text().count("\n") == 2


@pytest.mark.parametrize("command", ["explain", "convert", "crosscheck", "hunt", "certify-cases"])
def test_a_name_over_the_limit_is_refused_before_any_work(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def tripwire(*args: object, **kwargs: object) -> None:
        raise AssertionError("work started before the name was checked")

    for target in ("cardinal.greedy.explain", "cardinal.verify.campaign.execute", "cardinal.verify.hunt.hunt"):
        monkeypatch.setattr(target, tripwire)
    network, inputs = _files(tmp_path)
    long = str(tmp_path / ("n" * 256))
    argv = {
        "explain": ["explain", network, "--inputs", inputs, "--out", long + ".jsonl"],
        "convert": ["convert", network, long + ".onnx"],
        "crosscheck": ["crosscheck", "--out", long],
        "hunt": ["hunt", "--out", long],
        "certify-cases": ["certify", network, "--inputs", inputs, "--cases", f"{long}/cases"],
    }[command]
    before = _snapshot(tmp_path)
    _refused(capsys, main(argv), r"a name of 2\d\d bytes, longer than the 255 this file system allows")
    assert _snapshot(tmp_path) == before


# ---------------------------------------------------------------------------- a full disk
@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """`fill(folder, allowed=0)`: from now on `os.write` to a file under `folder` writes at most
    `allowed` bytes in all, then fails with ENOSPC, as on a full disk."""
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc/self/fd")
    real = os.write

    def fill(folder: Path, allowed: int = 0) -> None:
        left = [allowed]

        def write(descriptor: int, data: bytes) -> int:
            try:
                where = os.readlink(f"/proc/self/fd/{descriptor}")
            except OSError:
                where = ""
            if not where.startswith(f"{folder.resolve()}{os.sep}"):
                return real(descriptor, data)
            if left[0] <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            written = real(descriptor, bytes(data[: left[0]]))
            left[0] -= written
            return written

        monkeypatch.setattr(os, "write", write)

    yield fill


def _full_disk_commands(tmp: Path, full: Path) -> dict[str, list[str]]:
    network, inputs = _files(tmp)
    claims, other = tmp / "claims.jsonl", tmp / "other.jsonl"
    claims.write_text('{"row": 0, "kind": "contrastive", "features": [0, 2]}\n')
    other.write_text('{"row": 0, "kind": "contrastive", "features": [0, 1, 2]}\n')
    check = ["check", network, "--inputs", inputs, "--threshold", "0.5", "--kind", "contrastive"]
    assert main([*check, "--explanations", str(claims), "--out", str(tmp / "baseline.jsonl")]) == 0
    (tmp / "d.csv").write_text("a,b,label\n" + "".join(f"{i},{i % 7},{int(i > 14)}\n" for i in range(30)))
    train = ["train", "--dataset", f"csv:{tmp / 'd.csv'}", "--target", "label", "--hidden", "none", "--epochs", "1", "--quiet"]
    return {
        "explain --out": ["explain", network, "--inputs", inputs, "--out", str(full / "out.jsonl")],
        "certify --out": [*_certify(tmp, tmp / "cases"), "--out", str(full / "out.jsonl")],
        "certify --cases": _certify(tmp, full / "cases"),
        "check --out": [*check, "--explanations", str(claims), "--out", str(full / "out.jsonl")],
        "check --diff-out": [
            *[*check, "--explanations", str(other), "--baseline", str(tmp / "baseline.jsonl")],
            *["--diff-out", str(full / "diff.jsonl")],
        ],
        "convert": ["convert", network, str(full / "net.onnx")],
        "train --out": [*train, "--out", str(full / "m.json")],
        "train --export-test": [*train, "--out", str(tmp / "m.json"), "--export-test", str(full / "test.csv")],
        "hunt --out": ["hunt", "--out", str(full)],
    }


FULL_DISK = ["explain --out", "certify --out", "certify --cases", "check --out", "check --diff-out", "convert", "train --out"]


@pytest.mark.parametrize("command", [*FULL_DISK, "train --export-test", "hunt --out"])
def test_a_full_disk_is_one_line_and_leaves_no_half_written_file(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, full_disk: Callable[..., None]
) -> None:
    full = tmp_path / "full"
    full.mkdir()
    argv = _full_disk_commands(tmp_path, full)[command]
    monkeypatch.setattr("cardinal.verify.hunt.hunt", lambda *args, **kwargs: _found())
    capsys.readouterr()
    full_disk(full)
    pattern = rf"^cardinal [a-z]+: error: no space left on device writing {re.escape(str(full.resolve()))}/"
    _refused(capsys, main(argv), pattern, last_only=True)
    assert [path for path in full.rglob("*") if path.is_file()] == []  # no temporary, no partial file


def test_a_full_disk_cuts_the_log_back_to_its_whole_records(tmp_path: Path, full_disk: Callable[..., None]) -> None:
    log = JsonLines(tmp_path / "campaign" / "records.jsonl")
    log.append({"key": "a"})
    log.append({"key": "b"})
    before = log.path.read_bytes()
    full_disk(tmp_path / "campaign", allowed=5)  # part of the next line fits, then the disk is full
    with pytest.raises(InputError, match=r"no space left on device writing .*records.jsonl"):
        log.append_many([{"key": "c" * 100}])
    assert log.path.read_bytes() == before


def test_a_torn_line_longer_than_a_read_block_is_cut_before_the_next_append(tmp_path: Path) -> None:
    """The torn last line is found by reading backwards in blocks of 64 KiB: one of 100 kB too."""
    log = JsonLines(tmp_path / "records.jsonl")
    log.path.write_bytes(b'{"key": "a"}\n{"key": "' + b"b" * 100_000)
    log.append({"key": "c"})
    assert log.path.read_bytes() == b'{"key": "a"}\n{"key": "c"}\n'
    log.path.write_bytes(b'{"key": "' + b"b" * 100_000)  # no whole line at all
    log.append({"key": "d"})
    assert log.read() == [{"key": "d"}]


def test_a_full_disk_stops_a_campaign_in_one_line_and_resume_finishes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, full_disk: Callable[..., None]
) -> None:
    """The disk fills when the first case file is written (that of the step network's row 0, after
    its three contrastive records): one line, no case file half-written, the finished records
    intact; --resume then finishes the campaign."""
    instances = tiny_instances()
    monkeypatch.setitem(SUITES, "quick", lambda out: instances[1:])
    out = tmp_path / "campaign"
    full_disk(out / "cases")
    code = main(["crosscheck", "--out", str(out), "--solvers", "enumerate"])
    _refused(capsys, code, r"no space left on device writing .*campaign/cases/greedy_suboptimal-.*\.json$", last_only=True)
    assert not [path for path in (out / "cases").iterdir()]
    finished = JsonLines(out / "records.jsonl").read()
    assert len(finished) == 3 and (out / "records.jsonl").read_text().count("\n") == 3
    monkeypatch.undo()  # space again
    monkeypatch.setitem(SUITES, "quick", lambda out: instances[1:])
    assert main(["crosscheck", "--out", str(out), "--solvers", "enumerate", "--resume"]) == 0
    keys = [record["key"] for record in JsonLines(out / "records.jsonl").read()]
    assert len(keys) == len(set(keys)) == 8 and len(list((out / "cases").iterdir())) >= 1


# ---------------------------------------------------------------------------- bench
def test_bench_errors_are_one_line_without_the_usage_block(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import importlib

    def bench(name: str, *argv: str) -> None:  # `python -m bench.NAME ARGV...`
        importlib.import_module(f"bench.{name}").main(list(argv))

    for argv, message in [
        (["greedy", "--out", f"{read_only_folder()}/greedy.md"], r"--out .*: cannot create files in"),
        (["solvers", "--jobs", "0", "--out", str(tmp_path / "s.md")], r"--jobs must be at least 1, got 0"),
        (["greedy", "--rows", "0"], r"argument --rows: '0' is not ≥ 1"),
    ]:
        with pytest.raises(SystemExit) as stop:
            bench(*argv)
        err = capsys.readouterr().err
        assert stop.value.code == 2 and "usage" not in err, err
        assert len(err.splitlines()) == 1 and re.search(message, err), err
    precious = tmp_path / "precious.png"
    precious.write_text("")
    (tmp_path / "s.png").symlink_to(precious)  # a figure beside --out is a name of cardinal's
    with pytest.raises(SystemExit):
        bench("solvers", "--out", str(tmp_path / "s.md"))
    assert "s.png is a symbolic link" in capsys.readouterr().err and precious.read_text() == ""


# ---------------------------------------------------------------------------- folders cardinal makes inside --out
EXPORT_PLANTED = [
    ("campaign", "link-to-folder"),  # the default campaign folder
    ("campaign/records.jsonl", "link-to-file"),
    ("campaign/cases", "link-to-folder"),
    ("design", "link-to-folder"),  # an instance's folder
    ("design/network.onnx", "link-to-file"),
    ("design/row0-contrastive.mps", "link-to-file"),
    ("design/row0-contrastive-set1.vnnlib", "link-to-file"),
    ("index.csv", "link-to-file"),
]


@pytest.mark.parametrize(("name", "kind"), EXPORT_PLANTED)
@pytest.mark.usefixtures("design_suite")
def test_export_suite_writes_nothing_through_a_link_planted_in_out(
    name: str, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`export --suite --out K` with K/campaign -> ../outside (or a link at any folder or file it
    makes in K): one line, exit 2, before any work; nothing written in K or outside."""

    def tripwire(*args: object, **kwargs: object) -> None:
        raise AssertionError("the campaign started before the folders were checked")

    monkeypatch.setattr("cardinal.verify.campaign.execute", tripwire)
    out, outside = tmp_path / "K", tmp_path / "outside"
    for folder in ("campaign", "design"):  # `design`: the DESIGN instance's folder, named after its id
        if folder != name:
            (out / folder).mkdir(parents=True)
    outside.mkdir()
    _plant(out / name, outside / Path(name).name, kind)
    before, elsewhere = _snapshot(out), _snapshot(outside)
    code = main(["export", "--suite", "quick", "--out", str(out), "--solvers", "enumerate"])
    _refused(capsys, code, rf"K/{re.escape(name)} is a symbolic link")
    assert _snapshot(out) == before and _snapshot(outside) == elsewhere


def test_a_campaign_made_inside_a_folder_refuses_a_link_planted_after_the_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_campaign with `root` (as export runs OUT/campaign): the campaign folder itself planted
    as a link once checked is refused by the lock's opening; nothing is written outside."""
    out, outside = tmp_path / "K", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    checked = campaign._refuse_if_in_use

    def check_then_plant(folder: Path) -> None:
        checked(folder)
        (out / "campaign").symlink_to(outside, target_is_directory=True)

    monkeypatch.setattr(campaign, "_refuse_if_in_use", check_then_plant)
    with pytest.raises(InputError, match=r"K/campaign is a symbolic link"):
        run_campaign("tiny", out / "campaign", CampaignSettings(("enumerate",), 30.0), instances=tiny_instances()[2:], root=out)
    assert _snapshot(outside) == {}


@pytest.mark.parametrize("planted", ["row2-contrastive.mps", "index.csv"])
def test_export_rows_writes_nothing_when_one_name_is_a_link(planted: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A link at one of the names export writes: refused before the first file is written."""
    (tmp_path / "net.json").write_text(json.dumps(DESIGN_NETWORK))
    (tmp_path / "x.csv").write_text("0,0,0\n1,0,1\n1,1,1\n")
    out, precious = tmp_path / "out", tmp_path / "precious"
    out.mkdir()
    precious.write_text("precious\n")
    (out / planted).symlink_to(precious)
    argv = ["export", str(tmp_path / "net.json"), "--inputs", str(tmp_path / "x.csv"), "--threshold", "0.5"]
    code = main([*argv, "--kind", "contrastive", "--format", "mps", "--rows", "1,2", "--out", str(out)])
    _refused(capsys, code, rf"out/{re.escape(planted)} is a symbolic link")
    assert [path.name for path in out.iterdir()] == [planted] and precious.read_text() == "precious\n"


@pytest.mark.parametrize("command", ["certify", "crosscheck"])
@pytest.mark.usefixtures("design_suite")
def test_a_link_at_the_proof_folders_networks_is_refused_before_any_work(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """`--proof DIR` keeps the networks in DIR/networks/, a name of cardinal's: a link there is
    refused before a certificate is written."""
    proof, outside = tmp_path / "proof", tmp_path / "outside"
    proof.mkdir()
    outside.mkdir()
    (proof / "networks").symlink_to(outside, target_is_directory=True)
    argv = {
        "certify": [*_certify(tmp_path, tmp_path / "cases"), "--proof", str(proof)],
        "crosscheck": ["crosscheck", "--out", str(tmp_path / "campaign"), "--solvers", "enumerate", "--proof", str(proof)],
    }[command]
    _refused(capsys, main(argv), r"proof/networks is a symbolic link")
    assert _snapshot(proof) == {"networks": None} and _snapshot(outside) == {}
    assert not (tmp_path / "campaign").exists() and not (tmp_path / "cases").exists()

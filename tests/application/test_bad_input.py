"""Bad input, fuzz-style: every case ends in exit code 2 with one line on stderr that names the
culprit, no traceback, nothing on stdout, no file written or changed, and no work started (the
greedy, solver, search and training entry points are replaced by tripwires)."""

from __future__ import annotations

import importlib
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


def _claims(tmp: Path, text: str) -> list[str]:
    """check with this explanations file."""
    claims = _write(tmp, "claims.jsonl", text + "\n")
    return ["check", _net(tmp), "--inputs", _inputs(tmp), "--explanations", claims, "--kind", "contrastive"]


CLAIM = {"row": 0, "kind": "contrastive", "features": [0, 2]}
CHECKED = {**CLAIM, "verdict": "valid"}  # a check record, as a baseline line


def _baseline(tmp: Path, text: str) -> list[str]:
    """check with a valid explanations file and this baseline."""
    return [*_claims(tmp, json.dumps(CLAIM)), "--baseline", _write(tmp, "before.jsonl", text + "\n")]


def _huge(digits: int = 5000) -> str:
    return "9" * digits


def _onnx_model(tmp: Path, *, alpha: float = 0.01, beta: float = 1.0, weight: object = None, metadata: str | None = None) -> str:
    """An ONNX file: Gemm (W [1, 3], beta) → LeakyRelu (alpha) → output; `weight` replaces W's
    TensorProto, `metadata` is the cardinal.metadata text."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    W = weight if weight is not None else numpy_helper.from_array(np.ones((1, 3), np.float32), "W")
    B = numpy_helper.from_array(np.zeros(1, np.float32), "B")
    nodes = [
        helper.make_node("Gemm", ["input", "W", "B"], ["h"], name="dense", transB=1, beta=beta),
        helper.make_node("LeakyRelu", ["h"], ["output"], name="leaky", alpha=alpha),
    ]
    io_info = [
        helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", width]) for name, width in (("input", 3), ("output", 1))
    ]
    graph = helper.make_graph(nodes, "g", io_info[:1], io_info[1:], [W, B])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    if metadata is not None:
        helper.set_model_props(model, {"cardinal.metadata": metadata})
    return _write(tmp, "net.onnx", model.SerializeToString())


def _tensor(dims: list[int], values: list[float]) -> object:
    """A float tensor W whose declared dims need not fit its values."""
    from onnx import TensorProto

    tensor = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=dims)
    tensor.float_data.extend(values)
    return tensor


def _external() -> object:
    """W with its data in an external file (here /dev/zero, 1e12 bytes)."""
    from onnx import TensorProto

    tensor = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[1, 3], data_location=TensorProto.EXTERNAL)
    for key, value in (("location", "/dev/zero"), ("length", str(10**12))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def _identity_onnx(tmp: Path) -> str:
    """An ONNX graph with no layer at all: input → Identity → output."""
    from onnx import TensorProto, helper

    node = helper.make_node("Identity", ["input"], ["output"], name="same")
    io_info = [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", 3]) for name in ("input", "output")]
    graph = helper.make_graph([node], "g", io_info[:1], io_info[1:])
    return _write(tmp, "net.onnx", helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())


def _state_dict(tmp: Path, layouts: dict[str, str]) -> str:
    """A torch.save'd state_dict of Linear(3, 1) weights in the given layouts (sparse, meta)."""
    import io

    import torch

    tensors = {"sparse": torch.ones(1, 3).to_sparse(), "meta": torch.empty(1, 3, device="meta")}
    buffer = io.BytesIO()
    torch.save({name: tensors[layout] for name, layout in layouts.items()}, buffer)
    return _write(tmp, "net.pt", buffer.getvalue())


def _expanded(tmp: Path, form: str) -> str:
    """A 2 KB torch.save file whose Linear weight [1, 10^9] is a stride-0 view of one stored
    number (torch.save writes the view as it is): a state_dict in the zip format, one in the
    legacy format (`_use_new_zipfile_serialization=False`), or a whole nn.Sequential."""
    import io

    import torch

    weight = torch.ones(1, 1).expand(1, 10**9)
    buffer = io.BytesIO()
    if form == "module":
        layer = torch.nn.Linear(1, 1)
        layer.weight = torch.nn.Parameter(weight, requires_grad=False)
        torch.save(torch.nn.Sequential(layer), buffer)
    else:
        torch.save({"0.weight": weight, "0.bias": torch.zeros(1)}, buffer, _use_new_zipfile_serialization=form == "zip")
    return _write(tmp, "net.pt", buffer.getvalue())


def _torch_archive(tmp: Path, declared: int | None = None, packed: int | None = None) -> str:
    """A torch.save file of a Linear(3, 1) whose weight record declares `declared` bytes unpacked
    (the zip's size fields patched, the data left small), or is replaced by `packed` zero bytes,
    deflated."""
    import io
    import struct
    import zipfile

    import torch

    buffer = io.BytesIO()
    torch.save(torch.nn.Sequential(torch.nn.Linear(3, 1)), buffer)
    source = zipfile.ZipFile(io.BytesIO(buffer.getvalue()))
    target = io.BytesIO()
    record = next(name for name in source.namelist() if name.endswith("data/0"))
    with zipfile.ZipFile(target, "w") as archive:
        for name in source.namelist():
            data = b"\0" * packed if packed and name == record else source.read(name)
            archive.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED if packed and name == record else zipfile.ZIP_STORED)
    data = bytearray(target.getvalue())
    if declared is not None:  # the record's uncompressed size, in its local (PK 3 4) and central (PK 1 2) header
        for signature, size_at, name_length_at, name_at in ((b"PK\x03\x04", 22, 26, 30), (b"PK\x01\x02", 24, 28, 46)):
            at = data.find(signature)
            while at >= 0:
                length = struct.unpack_from("<H", data, at + name_length_at)[0]
                if data[at + name_at : at + name_at + length] == record.encode():
                    struct.pack_into("<I", data, at + size_at, declared)
                at = data.find(signature, at + 4)
    return _write(tmp, "net.pt", bytes(data))


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
    ("network-is-dir", lambda t: _explain(t, network=str(t)), r"network file .* is a directory, not a regular file"),
    (
        "network-binary",
        lambda t: _explain(t, network=_net(t, text=b"\x80\xff\x00PK\x03\x04")),
        r"network file .*net.json is not text \(byte 0 is not UTF-8\)",
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
    (
        "csv-binary",
        lambda t: _explain(t, inputs=_inputs(t, b"\x89PNG\r\n\x1a\n\xff\xff")),
        r"inputs file .*x.csv is not text \(byte 0 is not UTF-8\)",
    ),
    (
        "csv-nul",
        lambda t: _explain(t, inputs=_inputs(t, b"1,1,\x001\n")),
        r"x.csv: row 0 \(line 1\), column 2: '\\x001' is not a number",
    ),
    ("csv-is-dir", lambda t: _explain(t, inputs=str(t)), r"inputs file .* is a directory, not a regular file"),
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
    ("case-minimum-bools", lambda t: _replay(t, minimum=[True]), r"case.json: minimum: true is not a feature index"),
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
        r"records.jsonl line 2: malformed JSON at column 14: Unterminated string",
    ),
    (
        "resume-binary-line",
        lambda t: _campaign(t, json.dumps(RECORD), b"\xff\xfe\x00"),
        r"records.jsonl line 2: not text \(byte 0 of the line is not UTF-8\)",
    ),
    ("resume-line-not-object", lambda t: _campaign(t, "[1, 2]"), r"records.jsonl line 1: not a JSON object"),
    ("resume-key-missing", lambda t: _campaign(t, json.dumps({**RECORD, "key": None})), r"line 1: field 'key' is null"),
    ("resume-verdict-wrong", lambda t: _campaign(t, json.dumps({**RECORD, "verdict": 5})), r"line 1: field 'verdict' is 5"),
    ("resume-solvers-wrong", lambda t: _campaign(t, json.dumps({**RECORD, "solvers": {"z3": 5}})), r"line 1: solvers.z3 must"),
    ("resume-seconds-string", lambda t: _campaign(t, json.dumps({**RECORD, "greedy": {"seconds": "1"}})), r"field 'greedy'"),
    ("resume-nan", lambda t: _campaign(t, '{"key": NaN}'), r"records.jsonl line 1: malformed JSON: NaN is not allowed"),
    (
        "campaign-cases-is-file",
        lambda t: _campaign(t, json.dumps(RECORD), cases_file=True),
        r"campaign folder: .*campaign/cases is a file, not a directory",
    ),
    ("paper-data-missing", lambda t: _paper(t, str(t)), r"7 data file\(s\) missing under .*: BlogFeedback.zip, loan_data.csv"),
    ("paper-data-dir-is-file", lambda t: _paper(t, _inputs(t)), r"--data-dir .*x.csv is not a directory"),
    ("paper-report-is-dir", lambda t: _paper(t, str(t), report=str(t)), r"--paper-report .* is a directory, not a file"),
    # network files, by type (issue 24)
    ("network-empty", lambda t: _explain(t, network=_net(t, text="")), r"network file .*net.json is empty"),
    ("onnx-empty", lambda t: _explain(t, network=_write(t, "net.onnx", b"")), r"network file .*net.onnx is empty"),
    (
        "onnx-truncated",
        lambda t: _explain(t, network=_write(t, "n.onnx", Path(_onnx_model(t)).read_bytes()[:150])),
        r"n.onnx: not a readable ONNX model",
    ),
    (
        "onnx-alpha-nan",
        lambda t: _explain(t, network=_onnx_model(t, alpha=float("nan"))),
        r"node leaky \(LeakyRelu\): attribute alpha is nan",
    ),
    (
        "onnx-alpha-inf",
        lambda t: _explain(t, network=_onnx_model(t, alpha=float("inf"))),
        r"node leaky \(LeakyRelu\): attribute alpha is inf",
    ),
    (
        "onnx-beta-inf",
        lambda t: _explain(t, network=_onnx_model(t, beta=float("inf"))),
        r"node dense \(Gemm\): attribute beta is inf",
    ),
    (
        "onnx-initializer-1e9-wide",
        lambda t: _explain(t, network=_onnx_model(t, weight=_tensor([1, 10**9], []))),
        r"net.onnx: initializer W declares dims \[1, 1000000000\] \(1000000000 values\) but holds 0",
    ),
    (
        "onnx-dims-disagree",
        lambda t: _explain(t, network=_onnx_model(t, weight=_tensor([2, 3], [1.0, 1.0, 1.0]))),
        r"initializer W declares dims \[2, 3\] \(6 values\) but holds 3",
    ),
    (
        "onnx-weight-nan",
        lambda t: _explain(t, network=_onnx_model(t, beta=2.0, weight=_tensor([1, 3], [1.0, float("nan"), 1.0]))),
        r"initializer W holds nan at flat index 1: values must be finite",
    ),
    (
        "onnx-external-data",
        lambda t: _explain(t, network=_onnx_model(t, weight=_external())),
        r"initializer W keeps its data in ./dev/zero., not a file beside the model",
    ),
    (
        "onnx-metadata-deep",
        lambda t: _explain(t, network=_onnx_model(t, metadata=_deep())),
        r"net.onnx: metadata_props cardinal.metadata: malformed JSON: nested too deeply",
    ),
    (
        "onnx-metadata-huge-int",
        lambda t: _explain(t, network=_onnx_model(t, metadata='{"threshold": ' + _huge() + "}")),
        r"metadata_props cardinal.metadata: malformed JSON: an integer of 5000 digits",
    ),
    (
        "torch-record-1GiB",
        lambda t: _explain(t, network=_torch_archive(t, declared=1 << 30)),
        r"network file .*net.pt unpacks to 1 GiB, over the limit of 512 MiB",
    ),
    (
        "torch-record-bomb",
        lambda t: _explain(t, network=_torch_archive(t, packed=4 << 20)),
        r"net.pt: record .*data/0 unpacks \d+-fold: a zip bomb",
    ),
    *[
        (
            f"torch-stride-0-{form}",
            lambda t, form=form, flags=flags: _explain(t, *flags, network=_expanded(t, form)),
            r"network file .*net.pt unpacks to 3.725 GiB, over the limit of 512 MiB",
        )
        for form, flags in (("zip", ("--activations", "identity")), ("legacy", ("--activations", "identity")), ("module", ()))
    ],
    ("onnx-no-layer", lambda t: _explain(t, network=_identity_onnx(t)), r"net.onnx: network has no layers"),
    (
        "torch-sparse-weight",
        lambda t: _explain(t, "--activations", "identity", network=_state_dict(t, {"0.weight": "sparse"})),
        r"net.pt: layer 1 \(0\): weight and bias must be dense tensors",
    ),
    (
        "torch-meta-weight",
        lambda t: _explain(t, "--activations", "identity", network=_state_dict(t, {"0.weight": "meta"})),
        r"net.pt: layer 1 \(0\): weight and bias must be dense tensors",
    ),
    # explanations files (check --explanations)
    ("claims-deep", lambda t: _claims(t, _deep()), r"claims.jsonl: line 1: malformed JSON: nested too deeply"),
    (
        "claims-huge-int",
        lambda t: _claims(t, json.dumps(CLAIM).replace("2]", _huge() + "]")),
        r"line 1: malformed JSON: an integer of",
    ),
    (
        "claims-1e999",
        lambda t: _claims(t, json.dumps(CLAIM).replace("2]", "1e999]")),
        r"line 1: 'features': inf is not a feature",
    ),
    (
        "claims-float",
        lambda t: _claims(t, json.dumps({**CLAIM, "features": [0.0, 2]})),
        r"line 1: 'features': 0.0 is not a feature",
    ),
    (
        "claims-negative",
        lambda t: _claims(t, json.dumps({**CLAIM, "features": [-1]})),
        r"line 1: 'features': -1 is not a feature",
    ),
    (
        "claims-bool",
        lambda t: _claims(t, json.dumps({**CLAIM, "features": [True]})),
        r"line 1: 'features': true is not a feature",
    ),
    (
        "claims-kind",
        lambda t: _claims(t, json.dumps({**CLAIM, "kind": "both"})),
        r"line 1: 'kind' must be contrastive or abductive",
    ),
    # baselines (--baseline)
    ("baseline-deep", lambda t: _baseline(t, _deep()), r"before.jsonl: line 1: malformed JSON: nested too deeply"),
    (
        "baseline-huge-int",
        lambda t: _baseline(t, json.dumps(CHECKED).replace("2]", _huge() + "]")),
        r"before.jsonl: line 1: malformed JSON: an integer of 5000 digits",
    ),
    ("baseline-1e999", lambda t: _baseline(t, json.dumps(CHECKED).replace("2]", "1e999]")), r"line 1: 'features': inf is not a"),
    ("baseline-float", lambda t: _baseline(t, json.dumps({**CHECKED, "features": [0.5]})), r"line 1: 'features': 0.5 is not a"),
    ("baseline-negative", lambda t: _baseline(t, json.dumps({**CHECKED, "features": [-1]})), r"line 1: 'features': -1 is not a"),
    ("baseline-bool", lambda t: _baseline(t, json.dumps({**CHECKED, "features": [True]})), r"line 1: 'features': true is not a"),
    (
        "baseline-twice",
        lambda t: _baseline(t, json.dumps({**CHECKED, "features": [2, 2]})),
        r"line 1: 'features' lists feature 2",
    ),
    ("baseline-kind", lambda t: _baseline(t, json.dumps({**CHECKED, "kind": "both"})), r"line 1: 'kind': 'both' is not one of"),
    (
        "baseline-verdict",
        lambda t: _baseline(t, json.dumps({**CHECKED, "verdict": "great"})),
        r"line 1: 'verdict': 'great' is not",
    ),
    ("baseline-row", lambda t: _baseline(t, json.dumps({**CHECKED, "row": -1})), r"line 1: 'row' must be a row number .*got -1"),
    (
        "baseline-greedy-list",
        lambda t: _baseline(t, json.dumps({**CHECKED, "greedy": [0], "verdict": "greedy_minimal"})),
        r"line 1: a certify record; compare check output with check output",
    ),
    # campaign records, deeper
    (
        "resume-kind-list",
        lambda t: _campaign(t, json.dumps({**RECORD, "kind": []})),
        r"line 1: field 'kind' is a list of 0, expected",
    ),
    (
        "resume-status-object",
        lambda t: _campaign(t, json.dumps({**RECORD, "solvers": {"z3": {"status": {}, "seconds": 1}}})),
        r"line 1: solvers.z3 must be an object with a known 'status'",
    ),
    (
        "resume-exact-string",
        lambda t: _campaign(t, json.dumps({**RECORD, "solvers": {"z3": {"status": "optimal", "seconds": 1, "exact": "false"}}})),
        r"line 1: solvers.z3.exact must be true or false, got 'false'",
    ),
    (
        "resume-deep",
        lambda t: _campaign(t, json.dumps(RECORD), _deep()),
        r"records.jsonl line 2: malformed JSON: nested too deeply",
    ),
    (
        "resume-huge-int",
        lambda t: _campaign(t, '{"key": ' + _huge() + "}"),
        r"records.jsonl line 1: malformed JSON: an integer of",
    ),
    (
        "campaign-without-resume",
        lambda t: _campaign(t, json.dumps(RECORD))[:-1],
        r"campaign already holds 1 records: pass --resume",
    ),
]


WORK = (  # the entry points of real work, which bad input must never reach
    "cardinal.greedy.explain",
    "cardinal.verify.certify.certify_row",
    "cardinal.verify.campaign.execute",
    "cardinal.verify.hunt.hunt",
    "cardinal.verify.train.train_monotone",
    "cardinal.verify.cases.replay",
    "cardinal.verify.check.check_explanations",
)


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tripwires on every entry point of real work: bad input must be refused before it."""

    def tripwire(*args: object, **kwargs: object) -> None:
        raise AssertionError("work started before the input was checked")

    for module in ("certify", "check", "campaign", "cases", "hunt", "train"):  # modules that import work functions by
        importlib.import_module(f"cardinal.verify.{module}")  # name bind the real ones, not a tripwire, whatever runs next
    for target in (*WORK, "cardinal.verify.train.load_dataset"):
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
    done = subprocess.run([sys.executable, "-m", "cardinal.verify.cli", *argv], capture_output=True, text=True, timeout=1800)  # a hang guard only
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


# ---------------------------------------------------------------------------- files that are not regular
# Every reader, given a FIFO, a link to a device, or a file over the size limit: refused before
# anything is read (issue 24: such files hung the command or were read until memory ran out).
# The commands run in one child process, under a timeout and a 4 GiB address-space cap, so that
# a hang or a runaway read fails these tests instead of blocking or exhausting the machine.
SPECIAL: dict[str, tuple[Callable[[Path], object], str]] = {  # kind: (make it at a path, message)
    "fifo": (os.mkfifo, r"is a FIFO \(named pipe\), not a regular file"),
    "zero-link": (
        lambda path: path.symlink_to("/dev/zero"),
        r"\(a link to /dev/zero\) is a character device, not a regular file",
    ),
    "urandom-link": (lambda path: path.symlink_to("/dev/urandom"), r"\(a link to /dev/urandom\) is a character device"),
    "sparse-2GiB": (lambda path: os.truncate(_write(path.parent, path.name, b""), 2 << 30), r"holds 2 GiB, over the limit of"),
}


def _heart(tmp: Path) -> Path:
    """A data folder whose Heart test file is regular; returns where the train file goes."""
    folder = tmp / "data" / "COMET" / "Heart"
    folder.mkdir(parents=True)
    _write(folder, "test_data.csv", "age,target\n1,0\n")
    return folder / "train_data.csv"


def _records(tmp: Path) -> Path:
    (tmp / "campaign").mkdir()
    return tmp / "campaign" / "records.jsonl"


READERS: dict[str, tuple[Callable[[Path], Path], Callable[[Path, str], list[str]], str]] = {
    # reader: (where the file goes, the command, how the message names the file)
    "network": (lambda t: t / "net.json", lambda t, f: _explain(t, network=f), r"network file"),
    "convert": (lambda t: t / "net.onnx", lambda t, f: ["convert", f, str(t / "out.json")], r"network file"),
    "inputs": (lambda t: t / "x.csv", lambda t, f: _explain(t, inputs=f), r"inputs file"),
    "domain": (lambda t: t / "domain.json", lambda t, f: _explain(t, "--domain", f), r"domain file"),
    "case": (lambda t: t / "case.json", lambda t, f: ["replay", f], r"case file"),
    "explanations": (
        lambda t: t / "claims.jsonl",
        lambda t, f: ["check", _net(t), "--inputs", _inputs(t), "--explanations", f],
        r"explanations file",
    ),
    "baseline": (lambda t: t / "before.jsonl", lambda t, f: [*_claims(t, json.dumps(CLAIM)), "--baseline", f], r"baseline"),
    "training-csv": (
        lambda t: t / "train.csv",
        lambda t, f: ["train", "--dataset", f"csv:{f}", "--target", "y", "--out", str(t / "n.json")],
        r"CSV file",
    ),
    "data-file": (
        _heart,
        lambda t, f: ["train", "--dataset", "heart", "--data-dir", str(t / "data"), "--out", str(t / "n.json")],
        r"data file",
    ),
    "records": (  # a link or FIFO is refused by the campaign folder's own check, a large file by the reader
        _records,
        lambda t, f: ["crosscheck", "--out", str(Path(f).parent), "--solvers", "enumerate", "--resume"],
        r"(campaign folder: .*records.jsonl (exists and is not a regular file|is a symbolic link|is a FIFO)|JSON-lines file .*records.jsonl)",
    ),
}
DRIVER = """
import contextlib, io, json, sys, traceback
from unittest import mock
cases, results = json.load(open(sys.argv[1])), open(sys.argv[2], "w")
def tripwire(*args, **kwargs):
    raise AssertionError("work started before the input was checked")
for target in json.load(open(sys.argv[3])):
    mock.patch(target, tripwire).start()
from cardinal.verify.cli import main
for case in cases:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(case["argv"])
        except BaseException:
            code = None
            err.write(traceback.format_exc())
    results.write(json.dumps({"id": case["id"], "code": code, "out": out.getvalue(), "err": err.getvalue()}) + "\\n")
    results.flush()
"""
SPECIAL_CASES = [f"{reader}-{kind}" for reader in READERS for kind in SPECIAL]


def _cap_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


@pytest.fixture(scope="module")
def special_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict, dict]]:
    """Every (reader, kind) case run once in one child process: id → (folder, snapshot before, result)."""
    root = tmp_path_factory.mktemp("special")
    cases, prepared = [], {}
    for reader, (place, command, _) in READERS.items():
        for kind, (make, _) in SPECIAL.items():
            folder = root / f"{reader}-{kind}"
            folder.mkdir()
            path = place(folder)
            make(path)
            cases.append({"id": folder.name, "argv": command(folder, str(path))})
            prepared[folder.name] = (folder, _snapshot(folder))
    (root / "cases.json").write_text(json.dumps(cases))
    (root / "work.json").write_text(json.dumps(WORK))
    results = root / "results.jsonl"
    try:
        subprocess.run(
            [sys.executable, "-c", DRIVER, str(root / "cases.json"), str(results), str(root / "work.json")],
            capture_output=True, timeout=1800, cwd=root, preexec_fn=_cap_memory,  # a hang guard only
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pass  # the cases without a result hung: their tests fail below
    done = {record["id"]: record for record in map(json.loads, results.read_text().splitlines())} if results.exists() else {}
    return {name: (folder, before, done.get(name)) for name, (folder, before) in prepared.items()}


@pytest.mark.parametrize("case_id", SPECIAL_CASES)
def test_files_that_are_not_regular_or_too_large_are_refused_before_reading(
    case_id: str, special_runs: dict[str, tuple[Path, dict, dict]]
) -> None:
    folder, before, result = special_runs[case_id]
    assert result is not None, f"{case_id}: no answer (the command hung, or the process died)"
    reader, kind = next((r, k) for r in READERS for k in SPECIAL if f"{r}-{k}" == case_id)
    message = READERS[reader][2] if reader == "records" else f"{READERS[reader][2]} .*{SPECIAL[kind][1]}"
    _check(result["code"], result["out"], result["err"], message)
    assert _snapshot(folder) == before  # nothing written, nothing changed

"""Network files by type: torch (state_dict, whole module), ONNX, conversion; no pickled code runs."""

from __future__ import annotations

import importlib
import itertools
import json
import pickle
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from cardinal.verify.cli import main
from torch import nn

from cardinal.activations import Activation, Step
from cardinal.errors import InputError
from cardinal.formats.loaders import detect_format
from cardinal.greedy import explain
from cardinal.network import Layer, Network
from tests.conftest import DESIGN_NETWORK


class MonoNet(nn.Module):
    """A user's own monotone model class: forward is a chain written by hand."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(6, 8)
        self.drop = nn.Dropout(0.1)
        self.middle = nn.Linear(8, 4)
        self.out = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.hidden(torch.flatten(x, 1)))
        h = nn.functional.relu(self.middle(self.drop(h)))
        return self.out(h)


def _monotone(model: nn.Module, seed: int) -> nn.Module:
    """Non-negative weights, biases that keep units active near the middle of the box."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear):
                module.weight.copy_(torch.rand(module.weight.shape, generator=generator) * 0.6)
                module.bias.copy_(-torch.rand(module.bias.shape, generator=generator) * module.weight.sum(1) * 0.6)
    return model.eval()


def _export_onnx(model: nn.Module, path: Path, n: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(model, (torch.zeros(1, n),), str(path), dynamo=False)


def _explanations(net: Network, X: np.ndarray, threshold: float) -> list[tuple]:
    rows = []
    for kind in ("contrastive", "abductive"):
        result = explain(net, X, kind=kind, threshold=threshold, device="cpu", verify=True)
        rows += [(kind, row, result.features(row)) for row in range(len(X))]
    return rows


def _cli_explanations(path: Path, inputs: Path, threshold: float, capsys: pytest.CaptureFixture, *flags: str) -> list[tuple]:
    """`cardinal explain FILE` as (kind, row, features) in the order of `_explanations`."""
    args = ["explain", str(path), "--inputs", str(inputs), "--threshold", repr(threshold), *flags]
    assert main(args) == 0, capsys.readouterr().err
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    found = [(line["kind"], line["row"], None if line["features"] is None else tuple(line["features"])) for line in lines]
    return sorted(found, key=lambda item: (item[0] == "abductive", item[1]))


def test_state_dict_whole_module_and_onnx_explain_like_from_torch(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A float32 monotone model saved three ways gives, from each file through the CLI, the same
    explanations row by row as `Network.from_torch` on the model in memory."""
    importlib.import_module("onnx")
    custom = _monotone(MonoNet(), seed=3)
    sequential = _monotone(
        nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, 4), nn.ReLU(), nn.Flatten(), nn.Linear(4, 1)),
        seed=3,
    )
    X = np.random.default_rng(0).random((40, 6)).round(3)
    inputs = tmp_path / "x.csv"
    np.savetxt(inputs, X, delimiter=",")
    for model in (custom, sequential):
        reference = Network.from_torch(model)  # traced with torch.fx for MonoNet
        X_t = torch.tensor(X, dtype=torch.float32)
        assert torch.allclose(reference.forward(X_t).float(), model(X_t)[:, 0].detach(), atol=1e-6)  # the same function
        threshold = float(np.median(reference.forward(X).numpy()))
        expected = _explanations(reference, X, threshold)
        assert len({features for _, _, features in expected}) > 4  # the rows differ: a wrong load would show
        torch.save(model.state_dict(), tmp_path / "state.pt")
        _export_onnx(model, tmp_path / "model.onnx", 6)
        files = [(tmp_path / "state.pt", ["--activations", "relu,relu,identity"]), (tmp_path / "model.onnx", [])]
        if isinstance(model, nn.Sequential):
            torch.save(model, tmp_path / "whole.pt")
            files.append((tmp_path / "whole.pt", []))
        for path, flags in files:
            assert _cli_explanations(path, inputs, threshold, capsys, *flags) == expected, path.name
            assert Network.load(path, activations=flags[1] if flags else None).hash == reference.hash, path.name


def test_from_torch_skips_inference_no_ops_and_traces_custom_modules() -> None:
    model = nn.Sequential(nn.Flatten(), nn.Linear(3, 2), nn.Dropout(0.5), nn.LeakyReLU(0.25), nn.Identity(), nn.Linear(2, 1))
    net = Network.from_torch(model)
    assert net.widths == (2, 1) and net.activation_names == ("leaky_relu", "identity")

    class Chain(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(3, 2), nn.Linear(2, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.sigmoid(self.b(nn.functional.hardtanh(self.a(x), 0.0, 2.0)))

    traced = Network.from_torch(Chain())
    assert traced.activation_names == ("hardtanh", "sigmoid") and traced.layers[0].activation.param("max") == 2.0

    class Residual(Chain):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.a(x)
            return self.b(h + torch.relu(h))

    with pytest.raises(InputError, match=r"Residual node relu .*feeds more than one step"):
        Network.from_torch(Residual())
    with pytest.raises(InputError, match=r"module 1 \(Flatten\): a flatten from axis 0 merges the batch axis"):
        Network.from_torch(nn.Sequential(nn.Linear(3, 1), nn.Flatten(0)))


class Evil:
    """Unpickling it creates a file: the proof that pickled code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


@pytest.mark.parametrize("container", ["torch.save", "pickle"])
def test_malicious_pickle_is_refused_not_run(tmp_path: Path, capsys: pytest.CaptureFixture, container: str) -> None:
    marker = tmp_path / "pwned"
    payload = {"0.weight": torch.ones(1, 3), "evil": Evil(marker)}
    path = tmp_path / "model.pt"
    if container == "torch.save":
        torch.save(payload, path)
    else:
        path.write_bytes(pickle.dumps(payload, protocol=4))
    inputs = tmp_path / "x.csv"
    inputs.write_text("0.5,0.5,0.5\n")
    assert main(["explain", str(path), "--inputs", str(inputs)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "refused" in err, err
    assert not marker.exists()
    # Loaded naively, the same file does run code: the test above could fail.
    if container == "torch.save":
        torch.load(path, weights_only=False)
    else:
        pickle.loads(path.read_bytes())
    assert marker.exists()


def test_custom_class_pickle_is_refused_with_advice(tmp_path: Path) -> None:
    torch.save(MonoNet(), tmp_path / "whole.pt")
    with pytest.raises(InputError, match=r"refused: unpickling it would import .*MonoNet.*state_dict"):
        Network.load(tmp_path / "whole.pt")


@pytest.mark.parametrize(
    ("activations", "message"),
    [
        (None, r"state\.pt is a state_dict with 3 Linear layer\(s\) \(hidden \[8, 6\], middle \[4, 8\], out \[1, 4\]\)"),
        ("relu,identity", r"2 activation\(s\) given for 3 Linear layer\(s\)"),
        ("relu,gelu,identity", r"unknown activation 'gelu'"),
        ("relu,leaky_relu:a,identity", r"parameters must be numbers"),
    ],
)
def test_state_dict_activations(tmp_path: Path, activations: str | None, message: str) -> None:
    torch.save(MonoNet().state_dict(), tmp_path / "state.pt")
    with pytest.raises(InputError, match=message):
        Network.load(tmp_path / "state.pt", activations=activations)


def test_state_dict_with_other_tensors_is_rejected(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
    torch.save(model.state_dict(), tmp_path / "bn.pt")
    with pytest.raises(InputError, match=r"entry '1.weight' \(shape \[4\]\) is not the weight"):
        Network.load(tmp_path / "bn.pt", activations="relu,identity")


def _onnx_model(nodes: list, initializers: dict[str, np.ndarray], n: int, output: str) -> bytes:
    onnx = importlib.import_module("onnx")
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        nodes,
        "test",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, [1, 1])],
        [numpy_helper.from_array(value.astype(np.float32), name) for name, value in initializers.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def test_unsupported_onnx_node_is_named(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    helper = importlib.import_module("onnx.helper")

    weights = {"W": np.ones((3, 2)), "b": np.zeros(2), "s": np.array(2.0), "W2": np.ones((2, 1))}
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="first"),
        helper.make_node("Add", ["h", "b"], ["hb"], name="first_bias"),
        helper.make_node("Mul", ["hb", "s"], ["scaled"], name="scale_by_two"),
        helper.make_node("MatMul", ["scaled", "W2"], ["y"], name="last"),
    ]
    path = tmp_path / "model.onnx"
    path.write_bytes(_onnx_model(nodes, weights, 3, "y"))
    inputs = tmp_path / "x.csv"
    inputs.write_text("0.5,0.5,0.5\n")
    assert main(["explain", str(path), "--inputs", str(inputs)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "node scale_by_two (Mul) is not supported" in err, err
    # A graph that branches is named too.
    branching = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="first"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "h"], ["sum"], name="skip_connection"),
        helper.make_node("MatMul", ["sum", "W2"], ["y"], name="last"),
    ]
    path.write_bytes(_onnx_model(branching, weights, 3, "y"))
    with pytest.raises(InputError, match=r"node skip_connection \(Add\) does not continue the single chain"):
        Network.load(path)


def test_onnx_import_matches_onnxruntime(tmp_path: Path) -> None:
    """Every supported op, from torch's exporter and from hand-built graphs, evaluated by
    onnxruntime and by cardinal's network."""
    ort = importlib.import_module("onnxruntime")
    helper = importlib.import_module("onnx.helper")
    X = np.random.default_rng(1).random((25, 4))
    model = nn.Sequential(
        nn.Linear(4, 5), nn.LeakyReLU(0.125), nn.Linear(5, 5), nn.Hardtanh(-0.5, 0.75), nn.Linear(5, 4), nn.ReLU6(),
        nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 3), nn.Softplus(), nn.Linear(3, 1), nn.Sigmoid(),
    ).eval()  # fmt: skip
    _export_onnx(model, tmp_path / "torch.onnx", 4)
    weights = {"W": np.array([[0.5, -1.0], [2.0, 0.25], [1.0, 1.0], [-0.5, 0.5]]), "b": np.array([0.1, -0.2])}
    weights |= {"W2": np.array([[1.5], [0.75]]), "at": np.array(0.3), "lo": np.array(0.0)}
    hand = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
        helper.make_node("Add", ["b", "h"], ["hb"], name="bias"),  # constant first: still the bias
        helper.make_node("Clip", ["hb", "lo"], ["r"], name="clip_as_relu"),
        helper.make_node("Flatten", ["r"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "W2"], ["g"], name="gemm", alpha=2.0),
        helper.make_node("GreaterOrEqual", ["g", "at"], ["ge"], name="ge"),
        helper.make_node("Cast", ["ge"], ["y"], name="step", to=1),
    ]
    (tmp_path / "hand.onnx").write_bytes(_onnx_model(hand, weights, 4, "y"))
    for name, activations in [("torch.onnx", None), ("hand.onnx", ("relu", "step"))]:
        net = Network.load(tmp_path / name)
        if activations:
            assert net.activation_names == activations and net.layers[1].activation.param("at") == np.float32(0.3)
        session = ort.InferenceSession(str(tmp_path / name))
        feed = session.get_inputs()[0].name
        expected = np.concatenate([session.run(None, {feed: row[None, :].astype(np.float32)})[0][:, 0] for row in X])
        assert np.allclose(net.forward(X.astype(np.float32)).numpy(), expected, rtol=1e-5, atol=1e-6), name


def test_convert_round_trips_exactly(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    importlib.import_module("onnx")
    rng = np.random.default_rng(2)
    net = Network(
        [
            Layer(rng.normal(size=(4, 3)) / 3, rng.normal(size=4), Activation.make("leaky_relu", slope=0.1)),
            Layer(rng.normal(size=(3, 4)), rng.normal(size=3), Activation.make("step", at=0.1)),
            Layer(rng.normal(size=(2, 3)), rng.normal(size=2), Activation.make("hardtanh", min=0.0, max=1.0 / 3)),
            Layer(rng.normal(size=(1, 2)), [0.5], Activation.make("softplus")),
        ]
    )
    net.save(tmp_path / "a.json")
    chain = ["a.json", "b.onnx", "c.pt", "d.json", "e.pth"]
    for source, target in itertools.pairwise(chain):
        assert main(["convert", str(tmp_path / source), str(tmp_path / target)]) == 0
        assert Network.load(tmp_path / target).hash == net.hash, target
    assert [detect_format(tmp_path / name) for name in chain] == ["json", "onnx", "torch", "json", "torch"]
    capsys.readouterr()
    assert main(["convert", str(tmp_path / "a.json"), str(tmp_path / "s.pt"), "--state-dict"]) == 0
    flag = capsys.readouterr().err.split("--activations ")[1].strip()
    assert Network.load(tmp_path / "s.pt", activations=flag).hash == net.hash
    assert main(["convert", str(tmp_path / "a.json"), str(tmp_path / "f.onnx"), "--float32"]) == 0
    assert "float32 rounded" in capsys.readouterr().err
    assert main(["convert", str(tmp_path / "a.json"), str(tmp_path / "x.txt")]) == 2
    assert not (tmp_path / "x.txt").exists()


def test_onnxruntime_runs_cardinal_exports(tmp_path: Path) -> None:
    """cardinal's float64 ONNX computes what the network does (other verifiers read it)."""
    ort = importlib.import_module("onnxruntime")
    net = Network.from_json(DESIGN_NETWORK)
    net.save(tmp_path / "design.onnx")
    X = np.random.default_rng(3).random((10, 3))
    session = ort.InferenceSession(str(tmp_path / "design.onnx"))
    assert np.allclose(session.run(None, {"input": X})[0][:, 0], net.forward(X).numpy(), rtol=1e-14, atol=0)


@pytest.mark.parametrize(
    ("content", "name", "message"),
    [
        (b"\x00\x01binary", "model.dat", r"model\.dat: not a network file cardinal reads"),
        (b"\x00\x01binary", "model.pt", r"model\.pt: (refused by|torch\.load)"),
        (b"PK\x03\x04broken zip", "model.pt", r"model\.pt: (not a file written by torch.save|torch.load)"),
        (b"\x08\x07garbage", "model.onnx", r"model\.onnx: not a readable ONNX model"),
        (b"{\xff\xfe", "model.json", r"is not text"),
    ],
)
def test_bad_files_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture, content: bytes, name: str, message: str
) -> None:
    if name.endswith(".onnx"):
        importlib.import_module("onnx")
    (tmp_path / name).write_bytes(content)
    inputs = tmp_path / "x.csv"
    inputs.write_text("0.5,0.5,0.5\n")
    assert main(["explain", str(tmp_path / name), "--inputs", str(inputs)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert re.search(message, err), err


def test_activations_only_for_state_dicts(design_network_file: Path) -> None:
    with pytest.raises(InputError, match=r"names its own activations"):
        Network.load(design_network_file, "relu,identity")
    assert Network.from_torch(nn.Sequential(nn.Linear(2, 1), Step(0.5))).activation_names == ("step",)


def test_onnx_float_attributes_are_read_as_their_float32_value(tmp_path: Path) -> None:
    """An ONNX float attribute is a float32: an alpha of 1/3 becomes the double equal to
    float32(1/3), exactly, in the slope and in Gemm's alpha·B (docs/formats.md, ONNX)."""
    from onnx import TensorProto, helper, numpy_helper

    third = float(np.float32(1 / 3))
    assert third == 0.3333333432674408
    weight = numpy_helper.from_array(np.array([[1.0, 2.0, 3.0]], np.float32), "W")
    nodes = [
        helper.make_node("Gemm", ["input", "W"], ["h"], name="dense", transB=1, alpha=1 / 3),
        helper.make_node("LeakyRelu", ["h"], ["output"], name="leaky", alpha=1 / 3),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 1])],
        [weight],
    )
    path = tmp_path / "third.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    [layer] = Network.load(path).layers
    assert layer.activation.param("slope") == third
    assert layer.weight.tolist() == [[third, 2 * third, 3 * third]]  # exact: 24-bit by 24-bit significands


def _legacy_claiming(elements: int) -> bytes:
    """A torch.save file in the legacy (pre-zip) format of {"0.weight": ones(1, 3), "0.bias"}
    whose weight storage declares `elements` float32 elements, in the pickle and in the header
    of its data (which stays 3 numbers long): what torch's legacy reader allocates before reading."""
    import io
    import pickletools
    import struct

    buffer = io.BytesIO()
    torch.save({"0.weight": torch.ones(1, 3), "0.bias": torch.zeros(1)}, buffer, _use_new_zipfile_serialization=False)
    data = buffer.getvalue()
    stream, ends = io.BytesIO(data), []
    for _ in range(5):  # magic number, protocol, system info, the object, the storage keys
        ends.append(max(pos for _, _, pos in pickletools.genops(stream)) + 1)
    main = [(op.name, arg, pos) for op, arg, pos in pickletools.genops(io.BytesIO(data[ends[2] :]))]
    # the weight's persistent id: ('storage', FloatStorage, key, 'cpu', 3, None); its 3 is a BININT1
    (numel,) = [ends[2] + pos for (name, arg, pos), (after, _, _) in itertools.pairwise(main) if name == "BININT1" and arg == 3 and after == "NONE"]
    patched = data[:numel] + b"J" + struct.pack("<i", elements) + data[numel + 2 :]
    at = ends[4] + 3  # after the keys (moved by the 3 bytes added): per storage an 8-byte count, then the numbers
    while struct.unpack("<q", patched[at : at + 8])[0] != 3:
        at += 8 + 4 * struct.unpack("<q", patched[at : at + 8])[0]
    return patched[:at] + struct.pack("<q", elements) + patched[at + 8 :]


def test_legacy_torch_file_claiming_8_gib_is_refused_within_bounded_memory(tmp_path: Path) -> None:
    """The legacy format has no zip to check before unpickling: torch allocates each storage at
    its declared size, then fills it from the file, so only what the file holds is ever touched
    (docs/formats.md, Limits). A 0.5 KB file declaring 8 GiB is refused in one line, and the
    reading process's peak memory stays far below the declared size (measured: under 0.3 GiB)."""
    import subprocess
    import sys

    path = tmp_path / "legacy.pt"
    path.write_bytes(_legacy_claiming(2**31 - 1))
    script = (
        "import resource, sys\n"
        "from cardinal.network import Network\n"
        "from cardinal.errors import InputError\n"
        "try:\n"
        "    Network.load(sys.argv[1], activations='identity')\n"
        "except InputError as error:\n"
        "    print(error)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    result = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=300, check=True)
    message, peak_kib = result.stdout.strip().splitlines()
    assert "legacy.pt: torch.load(weights_only=True) cannot read it: unexpected EOF" in message, message
    assert int(peak_kib) < 2 * 1024 * 1024, peak_kib  # 2 GiB: a quarter of what the file declares

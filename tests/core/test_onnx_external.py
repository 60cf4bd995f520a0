"""ONNX models whose weights live in an external data file beside them (`torch.onnx.export`'s
default for larger models): read from the model's folder only, cross-checked with onnxruntime."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from onnx import helper, numpy_helper

from cardinal import InputError, Network


def _model(seed: int = 0) -> onnx.ModelProto:
    """Gemm → Relu → Gemm, 6 → 5 → 1, float32 weights."""
    rng = np.random.default_rng(seed)
    w1, b1 = rng.normal(size=(5, 6)).astype(np.float32), rng.normal(size=5).astype(np.float32)
    w2, b2 = rng.normal(size=(1, 5)).astype(np.float32), rng.normal(size=1).astype(np.float32)
    inits = [numpy_helper.from_array(a, name) for a, name in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))]
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 6])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 1])], inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _save_external(model: onnx.ModelProto, path: Path, location: str) -> None:
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=location,
                    size_threshold=0)


def test_external_data_beside_the_model_is_read(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    _save_external(_model(), path, "m.onnx.data")
    assert (tmp_path / "m.onnx.data").stat().st_size > 0
    net = Network.load(path)
    X = np.random.default_rng(1).uniform(0, 1, (8, 6)).astype(np.float32)
    session = onnxruntime.InferenceSession(str(path))
    expected = session.run(None, {"x": X})[0]
    assert np.allclose(net.forward(X.astype(np.float64)).numpy().reshape(-1), expected.reshape(-1), atol=1e-5)
    inline = tmp_path / "inline.onnx"
    onnx.save_model(_model(), str(inline))
    assert [layer.weight.tolist() for layer in Network.load(inline).layers] == [layer.weight.tolist() for layer in net.layers]


def test_torch_onnx_export_defaults_load(tmp_path: Path) -> None:
    """A model exported with torch 2.13's default exporter (weights in `.onnx.data`) loads."""
    pytest.importorskip("onnxscript")
    module = torch.nn.Sequential(torch.nn.Linear(64, 300), torch.nn.ReLU(), torch.nn.Linear(300, 10))
    path = tmp_path / "model.onnx"
    script = f"import torch; m = torch.load({str(tmp_path / 'm.pt')!r}, weights_only=False); torch.onnx.export(m, (torch.zeros(1, 64),), {str(path)!r})"
    torch.save(module, tmp_path / "m.pt")
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, timeout=300)
    assert (tmp_path / "model.onnx.data").is_file()
    net = Network.load(path)
    x = np.random.default_rng(2).uniform(0, 1, (1, 64))
    with torch.no_grad():
        expected = module(torch.tensor(x, dtype=torch.float32)).numpy()
    assert net.n_inputs == 64 and net.n_outputs == 10
    assert np.allclose(net.forward(x).numpy(), expected, atol=1e-4)


@pytest.mark.parametrize(
    ("location", "plant", "message"),
    [
        ("gone.data", None, "gone.data, which is missing"),
        ("../outside.data", "outside", "not a file beside the model"),
        ("/tmp/abs.data", None, "not a file beside the model"),
        ("link.data", "link", "a link out of the model's folder"),
    ],
)
def test_external_data_elsewhere_is_refused(tmp_path: Path, location: str, plant: str | None, message: str) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    path = folder / "m.onnx"
    _save_external(_model(), path, "m.onnx.data")
    model = onnx.load_model(str(path), load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    onnx.save_model(model, str(path))
    if plant == "outside":
        (tmp_path / "outside.data").write_bytes((folder / "m.onnx.data").read_bytes())
    if plant == "link":
        (tmp_path / "elsewhere.data").write_bytes((folder / "m.onnx.data").read_bytes())
        os.symlink(tmp_path / "elsewhere.data", folder / "link.data")
    with pytest.raises(InputError, match=message) as caught:
        Network.load(path)
    assert "\n" not in str(caught.value) and "initializer" in str(caught.value)


def test_a_range_past_the_data_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    _save_external(_model(), path, "m.onnx.data")
    data = tmp_path / "m.onnx.data"
    data.write_bytes(data.read_bytes()[:-4])  # the last tensor's bytes cut short
    with pytest.raises(InputError, match="lie outside"):
        Network.load(path)

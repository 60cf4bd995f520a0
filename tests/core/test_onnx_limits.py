"""ONNX models that cardinal would misread or that would fill memory: each is refused before
anything large is allocated, from the real CLI (exit 2, one stderr line naming the node or the
graph input, no traceback, nothing under --out); the honest neighbours of each refusal are read
as onnxruntime runs them."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from cardinal.verify.cli import main

from cardinal.network import Network

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

F32 = TensorProto.FLOAT
W = np.array([[1.0, -2.0, 0.5], [0.25, 1.0, -1.0], [-1.5, 0.5, 2.0]])  # x @ W: [batch, 3] scores


def _model(nodes: list, weights: dict[str, np.ndarray], shape: list | None, outputs: list[str], opset: int = 17) -> bytes:
    """A float32 model: input `x` of `shape` (None: undeclared), the graph outputs `outputs`."""
    initializers = [
        numpy_helper.from_array(value if value.dtype.kind in "ib" else value.astype(np.float32), name)
        for name, value in weights.items()
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", F32, shape)],
        [helper.make_tensor_value_info(name, F32 if name != "label" else TensorProto.INT64, None) for name in outputs],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model.SerializeToString()


def _softmax(op: str = "Softmax", opset: int = 17, **axis: int) -> bytes:
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"), helper.make_node(op, ["h"], ["y"], name="sm", **axis)]
    return _model(nodes, {"W": W}, ["batch", 3], ["y"], opset)


def _head(argmax: dict | None = None, concat: list[str] | None = None) -> bytes:
    """A binary classifier as skl2onnx writes it (Sigmoid, Concat([1 − p, p]), ArgMax), or a
    three-class one (MatMul, Softmax) with an ArgMax of the attributes `argmax` reading the scores."""
    if concat is not None:
        nodes = [
            helper.make_node("MatMul", ["x", "V"], ["h"], name="mm"),
            helper.make_node("Sigmoid", ["h"], ["p"], name="sigmoid"),
            helper.make_node("Sub", ["one", "p"], ["q"], name="sub"),
            helper.make_node("Concat", concat, ["y"], name="concat", axis=1),
            helper.make_node("ArgMax", ["y"], ["label"], name="argmax", axis=1),
        ]
        return _model(nodes, {"V": W[:, :1], "one": np.array([1.0])}, ["batch", 3], ["label", "y"])
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
        helper.make_node("Softmax", ["h"], ["y"], name="sm", axis=-1),
        helper.make_node("ArgMax", ["y"], ["label"], name="argmax", **({"axis": 1} if argmax is None else argmax)),
    ]
    return _model(nodes, {"W": W}, ["batch", 3], ["label", "y"])


def _conv_bomb() -> bytes:
    """A 1×1 input, a 64×64 kernel padded by 2000 on each side: a dense matrix of 3938² × 1
    entries (under 2^24) whose unrolling visits 3938² × 4096 products."""
    conv = helper.make_node("Conv", ["x", "K"], ["y"], name="big_pad", pads=[2000, 2000, 2000, 2000])
    return _model([conv], {"K": np.ones((1, 1, 64, 64))}, [1, 1, 1, 1], ["y"])


def _reshape(shape: list[int], input_shape: list | None) -> bytes:
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], name="to_huge")]
    return _model(nodes, {"s": np.array(shape, dtype=np.int64)}, input_shape, ["y"])


BAD = {
    "softmax-over-batch": (
        _softmax(axis=0),
        r"node sm \(Softmax\): axis 0 of a tensor of shape \[batch, 3\] is not the class axis",
    ),
    "logsoftmax-over-batch-opset11": (
        _softmax("LogSoftmax", 11, axis=0),
        r"node sm \(LogSoftmax\): axis 0 .* not the class axis",
    ),
    "logsoftmax-over-batch-negative": (_softmax("LogSoftmax", axis=-2), r"node sm \(LogSoftmax\): axis -2 .* not the class axis"),
    "softmax-over-image": (
        _model(
            [
                helper.make_node("Softmax", ["x"], ["y"], name="pixels", axis=-1),
            ],
            {},
            ["batch", 2, 3],
            ["y"],
            11,
        ),
        r"node pixels \(Softmax\): axis -1 of a tensor of shape \[batch, 2, 3\] is not the class axis",
    ),
    "argmax-over-batch": (_head({"axis": 0}), r"node argmax \(ArgMax\): axis 0 is not the class axis"),
    "argmax-default-axis": (_head({}), r"node argmax \(ArgMax\): axis 0 is not the class axis"),
    "argmax-last-tie": (_head({"axis": 1, "select_last_index": 1}), r"node argmax \(ArgMax\): select_last_index = 1"),
    "concat-swapped": (
        _head(concat=["p", "q"]),
        r"node concat \(Concat\): a Concat in a classifier head is read only as \[1 − p, p\]",
    ),
    "input-1000-cubed": (
        _model([helper.make_node("Relu", ["x"], ["y"], name="r")], {}, ["batch", 1000, 1000, 1000], ["y"]),
        r"the graph input x: a tensor of shape \[batch, 1000, 1000, 1000\] has 1,000,000,000 elements, over cardinal's cap "
        r"of 16,777,216",
    ),
    "reshape-to-1e9": (
        _reshape([-1, 10**9], ["batch", "n"]),
        r"node to_huge \(Reshape\): a tensor of shape \[batch, 1000000000\]",
    ),
    "conv-products": (_conv_bomb(), r"node big_pad \(Conv\): unrolling it visits 15,507,844 outputs × 4,096 kernel weights"),
    "matmul-batched": (
        _model([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], {"W": W}, ["batch", "a", "b"], ["y"]),
        r"node mm \(MatMul\): its input has 3 axes whose dims the graph does not declare",
    ),
    "flatten-last-axis-of-4": (
        _model([helper.make_node("Flatten", ["x"], ["y"], name="flat", axis=-1)], {}, ["batch", "c", "h", "w"], ["y"]),
        r"node flat \(Flatten\): axis -1 merges the batch axis",
    ),
    "step-threshold-broadcasts": (
        _model(
            [
                helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
                helper.make_node("GreaterOrEqual", ["h", "at"], ["ge"], name="ge"),
                helper.make_node("Cast", ["ge"], ["y"], name="step", to=F32),
            ],
            {"W": W, "at": np.zeros((2, 1, 1))},
            ["batch", 3],
            ["y"],
        ),
        r"node ge \(GreaterOrEqual\): operand 1 of shape \[2, 1, 1\] does not broadcast to \[batch, 3\]",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_misread_or_oversized_models_are_refused_in_one_line(case: str, tmp_path: Path, capsys) -> None:
    data, message = BAD[case]
    model = tmp_path / "model.onnx"
    model.write_bytes(data)
    (tmp_path / "x.csv").write_text("1,0,1\n")
    out = tmp_path / "out"
    code = main(["explain", str(model), "--inputs", str(tmp_path / "x.csv"), "--out", str(out / "e.jsonl")])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.out == "" and "Traceback" not in captured.err
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"cardinal explain: error: {model}: ")
    assert re.search(message, lines[0]), lines[0]
    assert not out.exists()


X = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [2.0, -1.0, 0.5]])


def _ort(data: bytes, output: str, X: np.ndarray = X) -> np.ndarray:
    session = ort.InferenceSession(data)
    return session.run([output], {"x": X.astype(np.float32)})[0]


def _load(data: bytes, tmp_path: Path) -> Network:
    (tmp_path / "model.onnx").write_bytes(data)
    return Network.load(tmp_path / "model.onnx")


@pytest.mark.parametrize(
    ("op", "opset", "axis"),
    [
        ("Softmax", 17, {}),
        ("Softmax", 11, {}),
        ("Softmax", 17, {"axis": 1}),
        ("LogSoftmax", 12, {"axis": -1}),
        ("LogSoftmax", 17, {}),
    ],
)
def test_a_softmax_over_the_classes_is_dropped_as_onnxruntime_predicts(op: str, opset: int, axis: dict, tmp_path: Path) -> None:
    data = _softmax(op, opset, **axis)
    net = _load(data, tmp_path)
    assert net.metadata.dropped == ("node sm (" + op + "): dropped, argmax unchanged",)
    assert np.array_equal(net.forward(X).numpy().argmax(axis=1), _ort(data, "y").argmax(axis=1))


def test_classifier_heads_over_the_classes_predict_as_onnxruntime(tmp_path: Path) -> None:
    data = _head({"axis": -1, "keepdims": 0})
    assert np.array_equal(_load(data, tmp_path).forward(X).numpy().argmax(axis=1), _ort(data, "label").reshape(-1))
    data = _head(concat=["q", "p"])
    net = _load(data, tmp_path)
    assert net.metadata.threshold == 0.0
    assert np.array_equal((net.forward(X).numpy().reshape(-1) > 0).astype(int), _ort(data, "label").reshape(-1))


def test_gemm_attributes_and_an_unrolled_conv_compute_as_onnxruntime(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    B, C = rng.integers(-4, 5, size=(3, 3)) / 4, rng.integers(-4, 5, size=3) / 4
    gemm = helper.make_node("Gemm", ["x", "B", "C"], ["y"], name="g", transB=1, alpha=0.5, beta=2.0)
    data = _model([gemm], {"B": B, "C": C}, ["batch", 3], ["y"])
    assert np.allclose(_load(data, tmp_path).forward(X).numpy(), _ort(data, "y"), rtol=1e-6, atol=1e-6)
    kernel = rng.integers(-4, 5, size=(2, 2, 3, 2)) / 4
    conv = helper.make_node("Conv", ["x", "K"], ["c"], name="conv", strides=[2, 1], dilations=[1, 2], pads=[1, 0, 2, 3])
    nodes = [conv, helper.make_node("Flatten", ["c"], ["y"], name="flat")]
    data = _model(nodes, {"K": kernel}, ["batch", 2, 5, 4], ["y"])
    images = rng.integers(-4, 5, size=(4, 2, 5, 4)) / 4
    expected = _ort(data, "y", images)
    assert np.allclose(_load(data, tmp_path).forward(images.reshape(4, -1)).numpy(), expected, rtol=1e-6, atol=1e-6)

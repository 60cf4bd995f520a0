"""The model files users have (issue 27 "Models", issue 26 item 1): image-shaped ONNX inputs,
Conv layers unrolled exactly, Softmax and classifier heads dropped with a note, scikit-learn MLPs
exported with skl2onnx, torch Conv2d/Flatten/Softmax; each checked against onnxruntime (or torch)
on the ONNX graph's own logit tensor. Keras/TensorFlow is too heavy to install here: the tf2onnx
export patterns (Reshape of [N, 28, 28, 1], MatMul + Add, Transpose to NCHW and back, Conv, Cast,
a last Softmax) are built with onnx.helper instead."""

from __future__ import annotations

import importlib
import itertools
import json
import re
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from cardinal.verify.cli import main
from onnx import TensorProto, helper, numpy_helper
from torch import nn

from cardinal.activations import Activation
from cardinal.errors import InputError
from cardinal.formats.chain import MAX_UNROLLED_ENTRIES
from cardinal.network import Layer, Metadata, Network

F32, F64 = TensorProto.FLOAT, TensorProto.DOUBLE


# ---------------------------------------------------------------------------- helpers
def _model(nodes: list, weights: dict[str, np.ndarray], shape: list, output: str, element: int = F32, opset: int = 17):
    """An ONNX model: input `x` of `shape` (batch axis first), output `output` (onnxruntime checks the good ones)."""
    dtype = np.float32 if element == F32 else np.float64
    initializers = [
        numpy_helper.from_array(value if value.dtype.kind == "i" else value.astype(dtype), name)
        for name, value in weights.items()
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", element, shape)],
        [helper.make_tensor_value_info(output, element, None)],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _ort(model, X: np.ndarray, tensor: str) -> np.ndarray:
    """onnxruntime's value of `tensor` (e.g. the logits before a Softmax) on the batch X; for a
    float64 graph with a Conv, which onnxruntime's CPU kernels lack, onnx's reference evaluator."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    element = model.graph.input[0].type.tensor_type.elem_type
    if tensor not in [value.name for value in model.graph.output]:
        model.graph.output.append(helper.make_tensor_value_info(tensor, element, None))
    if element == F64 and any(node.op_type == "Conv" for node in model.graph.node):
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(model).run([tensor], {"x": X})[0]
    session = ort.InferenceSession(model.SerializeToString())
    return session.run([tensor], {session.get_inputs()[0].name: X})[0]


def _load(model, tmp_path: Path, name: str = "model.onnx") -> Network:
    path = tmp_path / name
    path.write_bytes(model.SerializeToString())
    return Network.load(path)


def _logits(net: Network, X: np.ndarray) -> np.ndarray:
    """All K outputs in float64, X [B, ...] flattened row-major per input."""
    z = torch.tensor(np.asarray(X, dtype=np.float64).reshape(len(X), -1))
    for weight, bias, activation in net.torch_layers():
        z = activation(z @ weight.T + bias)
    return z.numpy()


def _close(net: Network, model, X: np.ndarray, tensor: str, float32: bool) -> None:
    """cardinal's outputs against onnxruntime's `tensor`: within float32 rounding for a float32
    graph (cardinal computes with its float32 weights exactly, in float64), else to 1e-12; the
    argmax agrees on every row."""
    expected = _ort(model, X.astype(np.float32 if float32 else np.float64), tensor).reshape(len(X), -1)
    found = _logits(net, X)
    tolerance = 2e-5 if float32 else 1e-12
    assert np.allclose(found, expected, rtol=tolerance, atol=tolerance * np.abs(expected).max()), np.abs(found - expected).max()
    if found.shape[1] > 1:
        assert (found.argmax(1) == expected.argmax(1)).all()


def _dense(rng: np.random.Generator, sizes: list[int], prefix: str, data: str) -> tuple[list, dict[str, np.ndarray], str]:
    """tf2onnx's Dense layers: MatMul + Add (bias first in every other layer), Relu between."""
    nodes, weights = [], {}
    for number, (m, k) in enumerate(itertools.pairwise(sizes)):
        name = f"{prefix}{number}"
        weights |= {f"{name}/W": rng.normal(size=(m, k)) / np.sqrt(m), f"{name}/b": rng.normal(size=k) * 0.1}
        nodes.append(helper.make_node("MatMul", [data, f"{name}/W"], [f"{name}/mm"], name=f"{name}/MatMul"))
        operands = [f"{name}/b", f"{name}/mm"] if number % 2 else [f"{name}/mm", f"{name}/b"]
        nodes.append(helper.make_node("Add", operands, [f"{name}/h"], name=f"{name}/BiasAdd"))
        data = f"{name}/h"
        if number < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [data], [f"{name}/z"], name=f"{name}/Relu"))
            data = f"{name}/z"
    return nodes, weights, data


# ---------------------------------------------------------------------------- tf2onnx patterns
@pytest.mark.parametrize(("image", "element"), [((28, 28, 1), F32), ((32, 32, 3), F32), ((28, 28, 1), F64)])
def test_dense_classifier_on_an_image_input(tmp_path: Path, image: tuple, element: int) -> None:
    """VeriX's MNIST classifier shape (784 → 10 → 10 → 10 from tf2onnx): Reshape of [N, 28, 28, 1],
    Dense layers, a last Softmax; the 32 × 32 × 3 traffic-sign shape behind a Keras 3 Cast."""
    rng = np.random.default_rng(sum(image))
    n = int(np.prod(image))
    start = [helper.make_node("Cast", ["x"], ["x_float"], name="input_cast", to=element)] if image[2] == 3 else []
    reshape = helper.make_node("Reshape", [start[0].output[0] if start else "x", "shape"], ["flat"], name="flatten/Reshape")
    nodes, weights, logits = _dense(rng, [n, 10, 10, 10], "dense", "flat")
    softmax = helper.make_node("Softmax", [logits], ["probabilities"], name="softmax", axis=-1)
    weights["shape"] = np.array([-1, n], dtype=np.int64)
    model = _model([*start, reshape, *nodes, softmax], weights, ["unk__6", *image], "probabilities", element)
    net = _load(model, tmp_path)
    assert net.widths == (10, 10, 10) and net.metadata.input_shape == image
    assert net.metadata.dropped == ("node softmax (Softmax): dropped, argmax unchanged",)
    X = rng.random((64, *image))
    _close(net, model, X, logits, float32=element == F32)
    assert net.feature_coordinates(n - 1) == tuple(size - 1 for size in image)
    assert net.feature_coordinates(image[1] * image[2] + 2) == (1, 0, 2) if image[2] == 3 else True


def _cnn(rng: np.random.Generator, element: int, bias_add: bool) -> tuple:
    """VeriX's MNIST CNN shape from tf2onnx: NHWC input, Transpose to NCHW, two Conv (explicit
    pads; stride 2 with SAME_UPPER, bias as a separate Add), Transpose back, Reshape, Dense."""
    kernel1 = rng.normal(size=(4, 1, 3, 3))
    kernel2 = rng.normal(size=(3, 4, 3, 3)) / 3
    weights = {"k1": kernel1, "b1": rng.normal(size=4) * 0.1, "k2": kernel2, "b2": rng.normal(size=(1, 3, 1, 1)) * 0.1}
    weights["shape"] = np.array([-1, 7 * 7 * 3], dtype=np.int64)
    nodes = [
        helper.make_node("Transpose", ["x"], ["nchw"], name="to_nchw", perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["nchw", "k1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "k2"], ["c2"], name="conv2", auto_pad="SAME_UPPER", strides=[2, 2], dilations=[1, 1]),
    ]
    data = "c2"
    if bias_add:
        nodes.append(helper.make_node("Add", ["c2", "b2"], ["c2b"], name="conv2/BiasAdd"))
        data = "c2b"
    nodes += [
        helper.make_node("Relu", [data], ["r2"], name="relu2"),
        helper.make_node("Transpose", ["r2"], ["nhwc"], name="to_nhwc", perm=[0, 2, 3, 1]),
        helper.make_node("Reshape", ["nhwc", "shape"], ["flat"], name="flatten/Reshape"),
    ]
    dense, dense_weights, logits = _dense(rng, [7 * 7 * 3, 10, 10], "dense", "flat")
    nodes += [*dense, helper.make_node("Softmax", [logits], ["probabilities"], name="softmax")]
    return _model(nodes, weights | dense_weights, ["N", 28, 28, 1], "probabilities", element), logits


@pytest.mark.parametrize("element", [F32, F64])
def test_cnn_with_transposes_loads_exactly(tmp_path: Path, element: int) -> None:
    rng = np.random.default_rng(5)
    model, logits = _cnn(rng, element, bias_add=True)
    net = _load(model, tmp_path)
    # conv1 [4, 14, 14] from 784 inputs, conv2 [3, 7, 7], then the dense layers.
    assert net.widths == (784, 147, 10, 10) and net.activation_names == ("relu", "relu", "relu", "identity")
    assert net.metadata.input_shape == (28, 28, 1)
    X = rng.random((32, 28, 28, 1))
    _close(net, model, X, logits, float32=element == F32)
    # The unrolled matrices hold the kernels' own doubles and zeros, nothing else.
    kernels = [numpy_helper.to_array(init).astype(np.float64) for init in model.graph.initializer if init.name in ("k1", "k2")]
    for layer, kernel in zip(net.layers[:2], kernels, strict=True):
        assert set(layer.weight[layer.weight != 0]) <= set(kernel.ravel())


def test_conv_unrolling_is_exact_on_integers(tmp_path: Path) -> None:
    """Integer kernels and inputs in float64: every sum is exact, so cardinal's outputs equal
    onnx's reference evaluator's bit for bit — any misplaced weight would show. Pads, strides, dilations,
    no bias; Conv then Flatten then Gemm with no activation between (kept as two layers)."""
    rng = np.random.default_rng(7)
    weights = {
        "k": rng.integers(-3, 4, size=(2, 3, 3, 2)).astype(np.float64),
        "b": rng.integers(-2, 3, size=2).astype(np.float64),
    }
    weights["W"] = rng.integers(-2, 3, size=(5, 2 * 4 * 7)).astype(np.float64)
    nodes = [
        helper.make_node("Conv", ["x", "k", "b"], ["c"], name="conv", pads=[2, 1, 0, 1], strides=[2, 1], dilations=[2, 3]),
        helper.make_node("Flatten", ["c"], ["f"], name="flat", axis=1),
        helper.make_node("Gemm", ["f", "W"], ["y"], name="gemm", transB=1),
    ]
    model = _model(nodes, weights, [1, 3, 9, 8], "y", F64)
    net = _load(model, tmp_path)
    assert net.widths == (56, 5) and net.activation_names == ("identity", "identity")
    assert net.metadata.input_shape == (3, 9, 8)
    X = rng.integers(-4, 5, size=(20, 3, 9, 8)).astype(np.float64)
    expected = np.concatenate([_ort(model, row[None], "y") for row in X])
    assert np.array_equal(_logits(net, X), expected)


# ---------------------------------------------------------------------------- scikit-learn
def _sklearn_cases() -> list:
    return [
        pytest.param("digits", {}, np.float32, id="digits-zipmap-float32"),
        pytest.param("digits", {"zipmap": False}, np.float64, id="digits-nozipmap-float64"),
        pytest.param("cancer", {}, np.float32, id="binary-sigmoid-zipmap"),
        pytest.param("cancer", {"zipmap": False}, np.float64, id="binary-sigmoid-float64"),
        pytest.param("regressor", {}, np.float32, id="regressor"),
    ]


@pytest.mark.parametrize(("task", "options", "dtype"), _sklearn_cases())
def test_sklearn_mlp_exports_load_as_their_logits(tmp_path: Path, task: str, options: dict, dtype: type) -> None:
    """skl2onnx exports (Cast of the input, MatMul + Add, Softmax or Sigmoid, ArgMax, ZipMap, the
    label): the network is the logits, the weights are sklearn's own (exactly, or their float32
    rounding), the outputs agree with onnxruntime's logit tensor and the predictions with sklearn."""
    importlib.import_module("skl2onnx")
    from skl2onnx import to_onnx
    from sklearn.datasets import load_breast_cancer, load_digits
    from sklearn.neural_network import MLPClassifier, MLPRegressor

    X, y = load_digits(return_X_y=True) if task == "digits" else load_breast_cancer(return_X_y=True)
    X = (X - X.min(0)) / np.maximum(X.max(0) - X.min(0), 1)
    if task == "regressor":
        model = MLPRegressor(hidden_layer_sizes=(6,), max_iter=300, random_state=0)
    else:
        model = MLPClassifier((8,), activation="logistic" if task == "cancer" else "relu", max_iter=300, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn's ConvergenceWarning: a tiny model on purpose
        model.fit(X, y)
        exported = to_onnx(model, X[:1].astype(dtype), options={id(model): options} if options else None)
    net = _load(exported, tmp_path)
    for layer, coefficients, intercepts in zip(net.layers, model.coefs_, model.intercepts_, strict=True):
        assert np.array_equal(layer.weight, coefficients.T.astype(dtype)) and np.array_equal(layer.bias, intercepts.astype(dtype))
    logits = "add_result1"  # skl2onnx's name for the last MatMul + Add
    outputs = _logits(net, X)
    _close(net, exported, X, logits if task != "regressor" else "variable", float32=dtype == np.float32)
    dropped = net.metadata.dropped or ()
    if task == "digits":
        assert net.n_outputs == 10 and (outputs.argmax(1) == model.predict(X.astype(dtype))).all()
        assert "node Relu1 (Softmax): dropped, argmax unchanged" in dropped
    elif task == "cancer":
        assert net.n_outputs == 1 and net.metadata.threshold == 0.0
        assert ((outputs[:, 0] > 0) == model.predict(X.astype(dtype))).all()
        assert any("(Sigmoid): dropped, class 1 iff the logit > 0" in note for note in dropped)
    else:
        assert net.n_outputs == 1 and net.metadata.threshold is None and not dropped
    if task != "regressor":
        assert any(note.startswith("classifier head (") and "ArgMax" in note for note in dropped)


# ---------------------------------------------------------------------------- torch
class _Convolutional(nn.Module):
    """A traced (torch.fx) classifier: Conv2d, reshape to [-1, 36], Linear, a last log_softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 3, kernel_size=3, stride=2, padding=1, bias=False)
        self.out = nn.Linear(3 * 4 * 3, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv(x))
        return nn.functional.log_softmax(self.out(h.reshape(-1, 36)), dim=1)


def test_torch_conv_flatten_softmax(tmp_path: Path) -> None:
    """nn.Sequential and fx-traced modules with Conv2d, Flatten and a last Softmax: the same
    function as torch computes (float64), the same network as their ONNX export, and a whole
    torch file loads given the input shape."""
    torch.manual_seed(0)
    sequential = nn.Sequential(
        nn.Conv2d(1, 2, (2, 3), padding="same", dilation=(1, 2)), nn.ReLU(), nn.Conv2d(2, 2, 2, stride=(2, 1)), nn.Flatten(),
        nn.Linear(2 * 3 * 5, 3), nn.Softmax(dim=-1),
    ).double()  # fmt: skip
    for model, shape in [(sequential, (1, 6, 6)), (_Convolutional().double(), (2, 7, 5))]:
        net = Network.from_torch(model, input_shape=shape)
        assert net.metadata.input_shape == shape and len(net.metadata.dropped) == 1
        assert "argmax unchanged" in net.metadata.dropped[0]
        X = torch.rand(16, *shape, dtype=torch.float64)
        with torch.no_grad():
            scores = model[:-1](X) if isinstance(model, nn.Sequential) else model.out(torch.flatten(torch.relu(model.conv(X)), 1))
        assert np.allclose(_logits(net, X.numpy()), scores.numpy(), rtol=1e-12, atol=1e-12)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
            torch.onnx.export(model, (X[:1],), str(tmp_path / "m.onnx"), dynamo=False)
        exported = Network.load(tmp_path / "m.onnx")
        assert exported.hash == net.hash and exported.metadata.input_shape == shape
    torch.save(sequential, tmp_path / "whole.pt")
    with pytest.raises(InputError, match=r"module 0 \(Conv2d\): a Conv needs the input's shape.*input_shape"):
        Network.load(tmp_path / "whole.pt")
    assert Network.load(tmp_path / "whole.pt", input_shape=(1, 6, 6)).hash == Network.from_torch(sequential, (1, 6, 6)).hash

    class FlattensTheBatch(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.flatten(x)  # start_dim 0, unlike nn.Flatten

    with pytest.raises(InputError, match=r"node flatten \(call_function flatten\): a flatten from axis 0 merges the batch"):
        Network.from_torch(FlattensTheBatch(), (2, 2))
    with pytest.raises(InputError, match=r"module 1 \(MaxPool2d\) is not supported: replace pooling with a strided Conv"):
        Network.from_torch(nn.Sequential(nn.Conv2d(1, 1, 2), nn.MaxPool2d(2)), input_shape=(1, 4, 4))
    torch.save(nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)), tmp_path / "bn.pt")
    with pytest.raises(InputError, match=r"holds a BatchNorm1d, which cardinal does not read: fold BatchNormalization"):
        Network.load(tmp_path / "bn.pt")


# ---------------------------------------------------------------------------- refusals
def _bad(case: str) -> tuple:
    """(nodes, weights, input shape, output) of a graph cardinal refuses."""
    W = {"W": np.ones((16, 2))}
    flat = helper.make_node("Flatten", ["x"], ["f"], name="flat")
    if case == "maxpool":
        return [helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2])], {}, [1, 1, 4, 4], "y"
    if case == "batchnorm":
        bn = {name: np.ones(1) for name in ("s", "b", "m", "v")}
        return [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn")], bn, [1, 1, 4, 4], "y"
    if case == "conv-too-large":
        return (
            [helper.make_node("Conv", ["x", "k"], ["y"], name="big_conv", pads=[1, 1, 1, 1])],
            {"k": np.ones((16, 1, 3, 3))},
            [1, 1, 64, 64],
            "y",
        )
    if case == "reshape-drops-batch":
        return [helper.make_node("Reshape", ["x", "s"], ["y"], name="to_vector")], {"s": np.array([16], np.int64)}, [1, 4, 4], "y"
    if case == "reshape-size":
        return (
            [helper.make_node("Reshape", ["x", "s"], ["y"], name="bad_size")],
            {"s": np.array([-1, 10], np.int64)},
            [1, 4, 4],
            "y",
        )
    if case == "dims-mismatch":
        return [flat, helper.make_node("MatMul", ["f", "W"], ["y"], name="dense")], {"W": np.ones((12, 2))}, [1, 4, 4], "y"
    if case == "matmul-image":
        return [helper.make_node("MatMul", ["x", "W"], ["y"], name="dense")], {"W": np.ones((4, 2))}, [1, 4, 4], "y"
    if case == "transpose-batch":
        return [helper.make_node("Transpose", ["x"], ["y"], name="swap", perm=[1, 0, 2])], {}, [1, 4, 4], "y"
    if case == "softmax-hidden":
        nodes = [flat, helper.make_node("MatMul", ["f", "W"], ["h"], name="dense")]
        nodes += [
            helper.make_node("Softmax", ["h"], ["p"], name="sm"),
            helper.make_node("MatMul", ["p", "V"], ["y"], name="after"),
        ]
        return nodes, W | {"V": np.ones((2, 2))}, [1, 4, 4], "y"
    if case == "softmax-one":
        nodes = [
            flat,
            helper.make_node("MatMul", ["f", "W"], ["h"], name="dense"),
            helper.make_node("Softmax", ["h"], ["y"], name="sm"),
        ]
        return nodes, {"W": np.ones((16, 1))}, [1, 4, 4], "y"
    if case == "cast-int":
        nodes = [
            flat,
            helper.make_node("MatMul", ["f", "W"], ["h"], name="dense"),
            helper.make_node("Cast", ["h"], ["y"], name="to_int", to=7),
        ]
        return nodes, W, [1, 4, 4], "y"
    if case == "grouped-conv":
        return (
            [helper.make_node("Conv", ["x", "k"], ["y"], name="depthwise", group=2)],
            {"k": np.ones((2, 1, 2, 2))},
            [1, 2, 4, 4],
            "y",
        )
    raise AssertionError(case)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("maxpool", r"node pool \(MaxPool\) is not supported: replace pooling with a strided Conv"),
        ("batchnorm", r"node bn \(BatchNormalization\) is not supported: fold BatchNormalization into the preceding Conv or Gemm"),
        ("conv-too-large", r"node big_conv \(Conv\): unrolled into a dense layer it would hold 65536 × 4096 = 268,435,456 entries, over cardinal's cap of 16,777,216 \(2\^24\): use fewer channels"),
        ("reshape-drops-batch", r"node to_vector \(Reshape\): a reshape to \[16\] does not keep the batch axis first"),
        ("reshape-size", r"node bad_size \(Reshape\): cannot reshape a tensor of shape \[4, 4\] \(16 elements\) to \[10\]"),
        ("dims-mismatch", r"node dense \(MatMul\): takes 12 inputs but its input has 16 elements"),
        ("matmul-image", r"node dense \(MatMul\): takes a vector but its input has shape \[4, 4\]: flatten it first"),
        ("transpose-batch", r"node swap \(Transpose\): perm \[1, 0, 2\] moves the batch axis"),
        ("softmax-hidden", r"node after \(MatMul\) follows node sm \(Softmax\): a Softmax is read only as the network's last operation.*export the logits"),
        ("softmax-one", r"node sm \(Softmax\): a Softmax over one output is the constant 1; export the logit"),
        ("cast-int", r"node to_int \(Cast\): a Cast to INT64 of a FLOAT tensor is read only between float types.*export the model's scores"),
        ("grouped-conv", r"node depthwise \(Conv\): group = 2 \(a grouped or depthwise convolution\) is not read"),
    ],
)  # fmt: skip
def test_refusals_name_the_node_and_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture, case: str, message: str) -> None:
    nodes, weights, shape, output = _bad(case)
    path = tmp_path / "bad.onnx"
    path.write_bytes(_model(nodes, weights, shape, output).SerializeToString())
    assert main(["convert", str(path), str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "bad.onnx: " in err and re.search(message, err), err
    assert not (tmp_path / "out.json").exists()


def test_conv_cap_is_2_to_the_24() -> None:
    assert MAX_UNROLLED_ENTRIES == 16_777_216


def test_integer_input_and_runtime_shapes_are_refused_with_advice(tmp_path: Path) -> None:
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"], name="dense")]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.INT64, [1, 2])],
        [helper.make_tensor_value_info("y", F32, None)],
        [numpy_helper.from_array(np.ones((2, 1), np.float32), "W")],
    )
    with pytest.raises(InputError, match=r"graph input x has element type INT64; .*export with a float input"):
        _load(helper.make_model(graph), tmp_path)
    shape_of = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
        helper.make_node("MatMul", ["r", "W"], ["y"], name="dense"),
    ]
    with pytest.raises(
        InputError, match=r"node reshape \(Reshape\) does not continue the single chain .*'x' feeds 2 nodes.*onnxsim"
    ):
        _load(_model(shape_of, {"W": np.ones((2, 1))}, [1, 2], "y"), tmp_path)


# ---------------------------------------------------------------------------- writing and metadata
def test_k_output_image_network_round_trips_through_every_format(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """JSON → ONNX → torch → JSON keeps a K = 3 network exactly; JSON ↔ ONNX keeps its input shape
    and notes, and the ONNX cardinal writes takes the image-shaped input (onnxruntime agrees)."""
    rng = np.random.default_rng(11)
    layers = [Layer(rng.normal(size=(5, 12)), rng.normal(size=5), Activation.make("relu"))]
    layers.append(Layer(rng.normal(size=(3, 5)), rng.normal(size=3), Activation.make("identity")))
    metadata = Metadata(input_shape=(2, 3, 2), dropped=("node sm (Softmax): dropped, argmax unchanged",))
    net = Network(layers, metadata)
    net.save(tmp_path / "a.json")
    for source, target in [("a.json", "b.onnx"), ("b.onnx", "c.pt"), ("c.pt", "d.json"), ("b.onnx", "e.json")]:
        assert main(["convert", str(tmp_path / source), str(tmp_path / target)]) == 0
        assert Network.load(tmp_path / target).hash == net.hash, target
        noted = "note: node sm (Softmax): dropped, argmax unchanged" in capsys.readouterr().err
        assert noted == (source != "c.pt"), source
    assert Network.load(tmp_path / "b.onnx").metadata == metadata == Network.load(tmp_path / "e.json").metadata
    assert "dropped" not in json.loads((tmp_path / "d.json").read_text())  # torch files carry no metadata
    session = ort.InferenceSession(str(tmp_path / "b.onnx"))
    X = rng.random((7, 2, 3, 2))
    assert np.allclose(session.run(None, {"input": X})[0], _logits(net, X), rtol=1e-14, atol=0)
    assert net.n_outputs == 3 and net.feature_coordinates(7) == (1, 0, 1)
    with pytest.raises(InputError, match=r"feature 12 is out of range: the network has 12 inputs"):
        net.feature_coordinates(12)
    assert Network(layers).feature_coordinates(7) == (7,)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("input_shape", [2, 5], r"metadata.input_shape must be a list of two or more positive integers whose product is 12"),
        ("input_shape", [12], r"input_shape must be a list of two or more"),
        ("input_shape", [3, True, 4], r"input_shape must be a list"),
        ("input_shape", "3x4", r"input_shape must be a list"),
        ("dropped", "softmax", r"metadata.dropped must be a list of strings"),
        ("dropped", [1], r"metadata.dropped must be a list of strings"),
    ],
)
def test_metadata_input_shape_and_dropped_are_checked(tmp_path: Path, field: str, value: object, message: str) -> None:
    document = {
        "format": "cardinal.network/1",
        "layers": [{"weight": [[1.0] * 12], "bias": [0.0], "activation": "identity"}],
        "metadata": {field: value},
    }
    (tmp_path / "n.json").write_text(json.dumps(document))
    with pytest.raises(InputError, match=message):
        Network.load(tmp_path / "n.json")


def test_graph_and_metadata_props_must_agree_on_the_input_shape(tmp_path: Path) -> None:
    net = Network([Layer(np.ones((1, 6)), np.zeros(1), Activation.make("identity"))], Metadata(input_shape=(2, 3)))
    net.save(tmp_path / "n.onnx")
    model = onnx.load(str(tmp_path / "n.onnx"))
    helper.set_model_props(model, {"cardinal.metadata": json.dumps({"input_shape": [3, 2]})})
    with pytest.raises(
        InputError, match=r"metadata_props cardinal.metadata: input_shape is \[3, 2\] but the graph gives \[2, 3\]"
    ):
        _load(model, tmp_path, "m.onnx")

"""ONNX models read as chains (`cardinal.formats.chain`), and written (needs the `onnx` package: `cardinal[onnx]`).

Reading accepts one kind of graph: a single input vector flowing through one chain of
* affine maps: `Gemm` (transA = 0, any transB, alpha, beta; C optional) or `MatMul` by a constant,
  optionally followed by `Add` of a constant;
* activations: `Relu`, `LeakyRelu`, `PRelu` with one slope ≥ 0, `Sigmoid`, `Tanh`, `Softplus`,
  `Clip` with both bounds (hardtanh; `Clip(min=0)` alone is relu), and `GreaterOrEqual` by a
  constant followed by `Cast` (cardinal's `step`);
* inference no-ops: `Identity`, `Dropout`, `Flatten` (axis 1) and `Reshape` of a vector;
ending in the single graph output (width 1). Constants are initializers or `Constant` nodes.
Anything else is rejected with the node's name and op type. Weights are read exactly as doubles;
alpha·B and beta·C must be exact in float64 (always so for float32 models). A float attribute
(alpha, beta, Clip's bounds in old opsets) is a float32 in ONNX and is read as the double equal
to it: an alpha of 1/3 is 0.3333333432674408, the float32 nearest 1/3, exactly. Every constant
and attribute must be finite; a tensor must hold as many values as its dims declare, inside the
file (external data is refused), in a numeric element type.

Writing produces that form (Gemm with transB = 1, opset 17), in float64 by default so that every
weight survives the round trip exactly; float32 rounds them, for tools that read only float32.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from ..activations import Activation
from ..errors import InputError, interrupted_import
from ..io import parse_json
from .chain import ChainStep

OPSET = 17
_ACTIVATIONS = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Softplus": "softplus"}
_NO_OPS = ("Identity", "Dropout", "Flatten", "Reshape")
SUPPORTED = ("Gemm", "MatMul", "Add", "LeakyRelu", "PRelu", "Clip", "GreaterOrEqual", "Cast", *_ACTIVATIONS, *_NO_OPS)


def _onnx() -> Any:
    try:
        import onnx
    except ImportError as error:
        interrupted_import(error)
        raise InputError("reading or writing ONNX needs the onnx package: pip install 'cardinal[onnx]'") from None
    return onnx


METADATA_KEY = "cardinal.metadata"  # metadata_props entry: the network's metadata as JSON text
_NUMERIC = ("FLOAT", "DOUBLE", "FLOAT16", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64", "BOOL")


def load_onnx(data: bytes, path: Path) -> tuple[list[ChainStep], Any]:
    """The chain of an ONNX model (the bytes `data` of the file `path`) and its cardinal metadata
    document (None if it has none); `InputError` names the node, initializer or attribute that
    cardinal cannot represent."""
    onnx = _onnx()
    try:
        model = onnx.load_model_from_string(data)
    except Exception as error:  # protobuf's DecodeError (truncated or foreign bytes), nested too deeply
        reason = " ".join(str(error).split()) or type(error).__name__
        raise InputError(f"{path}: not a readable ONNX model ({reason})") from None
    try:
        chain = _GraphReader(model.graph).chain()
    except InputError as error:
        raise InputError(f"{path}: {error}") from None
    props = {prop.key: prop.value for prop in model.metadata_props}
    if METADATA_KEY not in props:
        return chain, None
    return chain, parse_json(props[METADATA_KEY], f"{path}: metadata_props {METADATA_KEY}")


class _GraphReader:
    """Walks a graph's nodes (ONNX keeps them in topological order) along the one data path."""

    def __init__(self, graph: Any) -> None:
        from onnx import numpy_helper

        self.graph = graph
        self.to_array = numpy_helper.to_array
        self.constants: dict[str, np.ndarray] = {
            init.name: self._array(init, f"initializer {init.name}") for init in graph.initializer
        }

    def _array(self, tensor: Any, where: str) -> np.ndarray:
        """A tensor as float64, checked before it is unpacked: data inside the file, a numeric
        element type, as many values as its dims declare; then every value finite and, for
        integers, exact in a double."""
        from onnx import TensorProto, helper

        if tensor.data_location == TensorProto.EXTERNAL:
            raise InputError(f"{where} keeps its data in an external file; cardinal reads weights stored inside the model file")
        if tensor.data_type not in {TensorProto.DataType.Value(name) for name in _NUMERIC}:
            known = tensor.data_type in TensorProto.DataType.values()
            name = TensorProto.DataType.Name(tensor.data_type) if known else f"#{tensor.data_type}"
            raise InputError(f"{where} has element type {name}, not one of {', '.join(_NUMERIC)}")
        dims = list(tensor.dims)
        if any(size < 0 for size in dims):
            raise InputError(f"{where} declares dims {dims}")
        size = helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
        raw = tensor.HasField("raw_data")
        held = len(tensor.raw_data) / size if raw else len(getattr(tensor, helper.tensor_dtype_to_field(tensor.data_type)))
        if held != math.prod(dims):
            unit = f" ({len(tensor.raw_data)} bytes of raw data)" if raw else ""
            raise InputError(f"{where} declares dims {dims} ({math.prod(dims)} values) but holds {held:g}{unit}")
        array = np.asarray(self.to_array(tensor))
        as_float = array.astype(np.float64)
        if array.dtype.kind != "f" and not np.array_equal(as_float.astype(array.dtype), array):
            raise InputError(f"{where} holds integers that a double cannot represent exactly")
        return _finite(as_float, where)

    def chain(self) -> list[ChainStep]:
        inputs = [value.name for value in self.graph.input if value.name not in self.constants]
        if len(inputs) != 1:
            raise InputError(f"the graph has {len(inputs)} data inputs ({', '.join(inputs)}); cardinal reads one input vector")
        current, width = inputs[0], None  # the data path's value, and its width once a layer fixed it
        steps: list[ChainStep] = []
        matmul_open = False  # the last step is a MatMul whose bias an Add may still set
        step_pending: tuple[str, float] | None = None  # a GreaterOrEqual awaiting its Cast
        for index, node in enumerate(self.graph.node):
            where = f"node {node.name or f'#{index}'} ({node.op_type})"
            if not node.output or not node.output[0]:
                raise InputError(f"{where} has no output")
            if node.domain not in ("", "ai.onnx"):
                raise InputError(f"{where}: operator domain {node.domain!r} is not supported")
            if node.op_type == "Constant":
                self.constants[node.output[0]] = self._constant(node, where)
                continue
            if node.op_type not in SUPPORTED:
                raise InputError(f"{where} is not supported (supported: {', '.join(SUPPORTED)})")
            data = [name for name in node.input if name and name not in self.constants]
            if data != [current] or (node.input[0] != current and node.op_type != "Add"):  # Add commutes
                raise InputError(f"{where} does not continue the single chain from the graph input (only chains are supported)")
            if step_pending is not None and node.op_type != "Cast":
                raise InputError(f"{where}: a GreaterOrEqual must be followed by Cast (cardinal's step)")
            op = node.op_type
            if op == "Gemm":
                steps.append(self._gemm(node, where))
                width = steps[-1].weight.shape[0]
            elif op == "MatMul":
                weight = self._const(node, 1, where)
                if weight.ndim != 2:
                    raise InputError(f"{where}: the constant operand must be a matrix, got shape {list(weight.shape)}")
                steps.append(ChainStep(where, weight=weight.T.copy(), bias=np.zeros(weight.shape[1])))
                width = weight.shape[1]
            elif op == "Add":
                if not matmul_open:
                    raise InputError(f"{where}: an Add is supported only right after a MatMul (as its bias)")
                other = node.input[1] if node.input[0] == current else node.input[0]
                steps[-1] = ChainStep(steps[-1].where, weight=steps[-1].weight, bias=self._bias(other, width, where))
            elif op == "GreaterOrEqual":
                at = np.unique(self._const(node, 1, where))
                if at.size != 1:
                    raise InputError(f"{where}: the step's threshold must be one number")
                step_pending = (where, float(at[0]))  # finite: constants are checked when read
            elif op == "Cast":
                if step_pending is None:
                    raise InputError(f"{where}: a Cast is supported only after GreaterOrEqual (cardinal's step)")
                steps.append(ChainStep(step_pending[0], activation=Activation.make("step", at=step_pending[1])))
                step_pending = None
            elif op in _NO_OPS:
                self._check_no_op(node, width, where)
            else:
                steps.append(ChainStep(where, activation=self._activation(node, where)))
            matmul_open = op == "MatMul"
            current = node.output[0]
        if step_pending is not None:
            raise InputError(f"{step_pending[0]}: a GreaterOrEqual must be followed by Cast (cardinal's step)")
        outputs = [value.name for value in self.graph.output]
        if outputs != [current]:
            raise InputError(f"the graph's outputs {outputs} are not the single end {current!r} of its chain")
        return steps

    # -------------------------------------------------------------- one node each
    def _constant(self, node: Any, where: str) -> np.ndarray:
        from onnx import helper

        for attribute in node.attribute:
            value = helper.get_attribute_value(attribute)
            if attribute.name == "value":
                return self._array(value, where)
            if attribute.name in ("value_float", "value_floats", "value_int", "value_ints"):
                return _finite(np.asarray(value, dtype=np.float64), f"{where}: {attribute.name}")
        raise InputError(f"{where}: unsupported Constant form")

    def _const(self, node: Any, position: int, where: str) -> np.ndarray:
        if len(node.input) <= position or node.input[position] not in self.constants:
            raise InputError(f"{where}: operand {position} must be a constant")
        return self.constants[node.input[position]]

    def _attributes(self, node: Any) -> dict[str, Any]:
        from onnx import helper

        return {attribute.name: helper.get_attribute_value(attribute) for attribute in node.attribute}

    def _gemm(self, node: Any, where: str) -> ChainStep:
        attributes = self._attributes(node)
        if attributes.get("transA", 0):
            raise InputError(f"{where}: transA = 1 is not supported (the input must be the left operand)")
        matrix = self._const(node, 1, where)
        if matrix.ndim != 2:
            raise InputError(f"{where}: B must be a matrix, got shape {list(matrix.shape)}")
        weight = matrix if attributes.get("transB", 0) else matrix.T
        weight = _scaled(weight, _number(attributes, "alpha", 1.0, where), f"{where}: alpha·B")
        if len(node.input) < 3 or not node.input[2]:
            return ChainStep(where, weight=weight, bias=np.zeros(weight.shape[0]))
        beta = _number(attributes, "beta", 1.0, where)
        bias = _scaled(self._bias(node.input[2], weight.shape[0], where), beta, f"{where}: beta·C")
        return ChainStep(where, weight=weight, bias=bias)

    def _bias(self, name: str, width: int | None, where: str) -> np.ndarray:
        if name not in self.constants:
            raise InputError(f"{where}: the bias operand must be a constant")
        value = self.constants[name]
        shape = list(value.shape)
        while shape and shape[0] == 1 and len(shape) > 1:
            shape.pop(0)  # leading axes of length 1 broadcast over the batch
        if width is None or shape not in ([], [1], [width]):
            raise InputError(f"{where}: bias of shape {list(value.shape)} does not fit a layer of width {width}")
        return np.broadcast_to(value.reshape(-1), (width,)).copy()

    def _activation(self, node: Any, where: str) -> Activation:
        op, attributes = node.op_type, self._attributes(node)
        if op in _ACTIVATIONS:
            return Activation.make(_ACTIVATIONS[op])
        if op == "LeakyRelu":
            name, params = "leaky_relu", {"slope": _number(attributes, "alpha", 0.01, where)}
        elif op == "PRelu":
            slopes = np.unique(self._const(node, 1, where))
            if slopes.size != 1:
                raise InputError(f"{where}: one slope for every unit is supported")
            name, params = "leaky_relu", {"slope": float(slopes[0])}
        else:  # Clip: bounds as operands 1, 2 (opset ≥ 11) or attributes (older opsets)
            low = self._optional(node, 1, where, _number(attributes, "min", None, where))
            high = self._optional(node, 2, where, _number(attributes, "max", None, where))
            if low is not None and high is not None:
                name, params = "hardtanh", {"min": low, "max": high}
            elif low == 0.0 and high is None:
                name, params = "relu", {}
            else:
                raise InputError(f"{where}: a Clip needs both bounds (hardtanh), or min = 0 alone (relu)")
        try:
            return Activation.make(name, **params)
        except InputError as error:
            raise InputError(f"{where}: {error}") from None

    def _optional(self, node: Any, position: int, where: str, attribute: float | None) -> float | None:
        if len(node.input) > position and node.input[position]:
            value = self._const(node, position, where)
            if value.size != 1:
                raise InputError(f"{where}: operand {position} must be a scalar")
            return float(value.reshape(-1)[0])
        return None if attribute is None else float(attribute)

    def _check_no_op(self, node: Any, width: int | None, where: str) -> None:
        attributes = self._attributes(node)
        if node.op_type == "Flatten" and attributes.get("axis", 1) != 1:
            raise InputError(f"{where}: only a Flatten of a vector (axis 1) is supported")
        if node.op_type == "Reshape":
            shape = self._const(node, 1, where).astype(np.int64).tolist()
            if len(shape) != 2 or shape[0] not in (-1, 0, 1) or shape[1] not in (-1, width):
                raise InputError(f"{where}: only a Reshape of a vector to [batch, width] is supported, got shape {shape}")
        if node.op_type == "Dropout" and len(node.input) > 2 and node.input[2] and self._const(node, 2, where).any():
            raise InputError(f"{where}: training_mode is on, so it is not a no-op")
        if node.op_type == "Dropout" and len(node.output) > 1 and node.output[1]:
            consumers = [other.name for other in self.graph.node if node.output[1] in other.input]
            if consumers:
                raise InputError(f"{where}: its mask output is used")


def _scaled(values: np.ndarray, factor: float, where: str) -> np.ndarray:
    """factor·values, which must be exact in float64."""
    if factor == 1.0:
        return values
    scaled = values * factor
    if any(Fraction(a) * Fraction(factor) != Fraction(b) for a, b in zip(values.ravel(), scaled.ravel(), strict=True)):
        raise InputError(f"{where} is not exactly representable in float64")
    return scaled


def _finite(values: np.ndarray, where: str) -> np.ndarray:
    """`values`, which must all be finite."""
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise InputError(f"{where} holds {values.reshape(-1)[bad[0]]} at flat index {bad[0]}: values must be finite")
    return values


def _number(attributes: dict[str, Any], name: str, default: float | None, where: str) -> float | None:
    """A numeric attribute as a double (an ONNX float attribute is a float32, widened exactly),
    `default` when absent; it must be a finite number."""
    value = attributes.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: attribute {name} must be a number")
    if not math.isfinite(value):
        raise InputError(f"{where}: attribute {name} is {value}, not a finite number")
    return float(value)


# ---------------------------------------------------------------------------- writing
def onnx_bytes(chain: Sequence[ChainStep], n_inputs: int, float32: bool = False, metadata: dict[str, Any] | None = None) -> bytes:
    """A network's chain (`Network.chain()`) as a serialized ONNX model: input `input` [batch, n]
    → output `output` [batch, 1], float64 unless `float32`; `metadata` (`Metadata.to_json()`) as
    JSON text in the model's metadata_props under `cardinal.metadata`."""
    onnx = _onnx()
    from onnx import TensorProto, helper, numpy_helper

    dtype, element = (np.float32, TensorProto.FLOAT) if float32 else (np.float64, TensorProto.DOUBLE)
    nodes, initializers = [], []

    def constant(name: str, value: Any) -> str:
        initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    current, number = "input", 0
    for step in chain:
        activation = step.activation
        if activation is None:  # an affine map starts the next layer
            number += 1
            prefix = f"layer{number}"
            inputs = [current, constant(f"{prefix}.weight", step.weight), constant(f"{prefix}.bias", step.bias)]
            current = f"{prefix}/h"
            nodes.append(helper.make_node("Gemm", inputs, [current], name=f"{prefix}/Gemm", transB=1))
            continue
        name, output = activation.name, f"{prefix}/z"
        if name == "identity":
            continue
        if name in ("relu", "sigmoid", "tanh", "softplus"):
            op = {value: key for key, value in _ACTIVATIONS.items()}[name]
            nodes.append(helper.make_node(op, [current], [output], name=f"{prefix}/{op}"))
        elif name == "leaky_relu":
            slope = constant(f"{prefix}.slope", activation.param("slope"))
            nodes.append(helper.make_node("PRelu", [current, slope], [output], name=f"{prefix}/PRelu"))
        elif name == "hardtanh":
            bounds = [constant(f"{prefix}.{key}", activation.param(key)) for key in ("min", "max")]
            nodes.append(helper.make_node("Clip", [current, *bounds], [output], name=f"{prefix}/Clip"))
        else:  # step: 1 where h ≥ at, else 0
            at = constant(f"{prefix}.at", activation.param("at"))
            nodes.append(helper.make_node("GreaterOrEqual", [current, at], [f"{prefix}/ge"], name=f"{prefix}/GreaterOrEqual"))
            nodes.append(helper.make_node("Cast", [f"{prefix}/ge"], [output], name=f"{prefix}/Cast", to=element))
        current = output
    nodes.append(helper.make_node("Identity", [current], ["output"], name="output"))
    graph = helper.make_graph(
        nodes,
        "cardinal",
        [helper.make_tensor_value_info("input", element, ["batch", n_inputs])],
        [helper.make_tensor_value_info("output", element, ["batch", 1])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="cardinal")
    model.ir_version = 8  # the oldest IR for opset 17: readable by the widest range of tools
    if metadata:
        helper.set_model_props(model, {METADATA_KEY: json.dumps(metadata)})
    onnx.checker.check_model(model)
    return model.SerializeToString()

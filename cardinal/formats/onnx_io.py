"""ONNX models read as chains (`cardinal.formats.chain`), and written (needs the `onnx` package: `cardinal[onnx]`).

Reading follows the graph's one data path from its single input (a float tensor [batch, ...]):
* affine maps: `Gemm` (transA = 0, any transB, alpha, beta; C optional), `MatMul` by a constant
  matrix, and `Conv` (2-D, group 1, any strides, pads, dilations, auto_pad; bias optional),
  unrolled exactly into a dense layer; a bias-free one may be followed by `Add` of a constant
  (its bias);
* activations: `Relu`, `LeakyRelu`, `PRelu` with one slope ≥ 0, `Sigmoid`, `Tanh`, `Softplus`,
  `Clip` with both bounds (hardtanh; `Clip(min=0)` alone is relu), and `GreaterOrEqual` by a
  constant followed by `Cast` (cardinal's step);
* shape operations, which relabel elements without arithmetic: `Flatten` (axis 1), `Reshape` by a
  constant shape that keeps the batch axis, `Transpose` that keeps the batch axis first,
  `Squeeze`/`Unsqueeze` of other axes (see `ChainBuilder`: a feature is one element of the input
  tensor, row-major, and a relabelling becomes a permutation of the next layer's columns);
* inference no-ops: `Identity`, `Dropout`, a `Cast` between float types;
* the end: the graph output; a last `Softmax`/`LogSoftmax` over the class axis of [batch, classes]
  is dropped (argmax unchanged; over another axis it is refused), and a classifier head (`ArgMax`,
  `ZipMap`, `ArrayFeatureExtractor`, the label output, as skl2onnx writes it) is dropped with the
  `Sigmoid` or `Softmax` before it when it picks the class cardinal's rule picks (`_check_head`):
  the network's outputs are the logits. Each drop is noted in the metadata (`dropped`).
Every attribute that changes what an op computes is honoured or refused; a constant operand of an
elementwise op must broadcast to the data tensor's shape. Sizes are checked before anything is
allocated (`cardinal.formats.chain`: MAX_TENSOR_ELEMENTS, MAX_UNROLLED_ENTRIES, MAX_CONV_PRODUCTS).
Anything else is refused with the node's name and op type and what to do instead. Constants are
initializers or `Constant` nodes, read when used. Weights are read exactly as doubles; alpha·B and
beta·C must be exact in float64 (always so for float32 models). A float attribute (alpha, beta,
Clip's bounds in old opsets) is a float32 in ONNX and is read as the double equal to it: an alpha
of 1/3 is 0.3333333432674408, the float32 nearest 1/3, exactly. Every constant and attribute must
be finite; a tensor must hold as many values as its dims declare, inside the file (external data
is refused), in a numeric element type.

Writing produces Gemm layers (transB = 1, opset 17) from an input [batch, *input_shape] (a Flatten
first when the network records an image-shaped input), in float64 by default so that every weight
survives the round trip exactly; float32 rounds them, for tools that read only float32.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from cardinal.activations import Activation
from cardinal.errors import BackendUnavailable, InputError, interrupted_import
from cardinal.io import MAX_NETWORK_BYTES, parse_json

from .chain import ADVICE, RUNTIME_SHAPE, ChainBuilder, ChainStep

OPSET = 17
_ACTIVATIONS = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Softplus": "softplus"}
_SHAPING = ("Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze")
SUPPORTED = (
    "Gemm", "MatMul", "Conv", "Add", "LeakyRelu", "PRelu", "Clip", "GreaterOrEqual", "Cast", *_ACTIVATIONS,
    "Identity", "Dropout", *_SHAPING, "Softmax", "LogSoftmax",
)  # fmt: skip
_CLASSIFIER = ("ArgMax", "ZipMap", "ArrayFeatureExtractor")  # a classifier head starts with one of these
_HEAD = (*_CLASSIFIER, "Softmax", "LogSoftmax", "Sigmoid", "Sub", "Concat", "Cast", "Identity", *_SHAPING)
_FLOATS = ("FLOAT", "DOUBLE", "FLOAT16", "BFLOAT16")


def _advice(op: str) -> str:
    """What to do about an op cardinal does not read."""
    return ADVICE.get(op, f"re-export the model with the ops cardinal reads ({', '.join(SUPPORTED)})")


def _onnx() -> Any:
    try:
        import onnx
    except ImportError as error:
        interrupted_import(error)
        raise BackendUnavailable("reading or writing ONNX needs the onnx package: pip install 'cardinal[onnx]'") from None
    return onnx


METADATA_KEY = "cardinal.metadata"  # metadata_props entry: the network's metadata as JSON text
_NUMERIC = ("FLOAT", "DOUBLE", "FLOAT16", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64", "BOOL")


def load_onnx(data: bytes, path: Path) -> tuple[list[ChainStep], Any]:
    """The chain of an ONNX model (the bytes `data` of the file `path`) and its metadata document:
    the cardinal metadata in its metadata_props (if any) with what the graph itself says
    (`Chain.metadata()`: input_shape, dropped, threshold); None if neither says anything.
    `InputError` names the node, initializer or attribute that cardinal cannot represent."""
    onnx = _onnx()
    try:
        model = onnx.load_model_from_string(data)
    except Exception as error:  # protobuf's DecodeError (truncated or foreign bytes), nested too deeply
        reason = " ".join(str(error).split()) or type(error).__name__
        raise InputError(f"{path}: not a readable ONNX model ({reason})") from None
    _inline_external_data(model, path)
    opset = max((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), default=OPSET)
    try:
        chain = _GraphReader(model.graph, opset).chain()
    except InputError as error:
        raise InputError(f"{path}: {error}") from None
    found = chain.metadata()
    props = {prop.key: prop.value for prop in model.metadata_props}
    if METADATA_KEY not in props:
        return chain.steps, found or None
    where = f"{path}: metadata_props {METADATA_KEY}"
    document = parse_json(props[METADATA_KEY], where)
    return chain.steps, _merged(document, found, where)


def _inline_external_data(model: Any, path: Path) -> None:
    """Read the external data of the model's initializers into them (`torch.onnx.export` writes
    the weights of a larger model to `MODEL.onnx.data` beside it): only from files inside the
    model's folder (a location that is absolute, climbs out with `..`, or is a link leading out is
    refused), each range inside its file, `MAX_NETWORK_BYTES` in all."""
    from onnx import TensorProto

    folder = path.resolve().parent
    total = 0
    for tensor in model.graph.initializer:
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        where = f"{path}: initializer {tensor.name}"
        info = {entry.key: entry.value for entry in tensor.external_data}
        location = info.get("location", "")
        relative = Path(location)
        if not location or relative.is_absolute() or ".." in relative.parts:
            raise InputError(f"{where} keeps its data in {location!r}, not a file beside the model; cardinal reads external "
                             "data only from the model's folder")
        file = path.parent / relative
        if not file.is_file():
            raise InputError(f"{where} keeps its data in {file}, which is missing: copy it beside the model, as "
                             "torch.onnx.export wrote it")
        if not file.resolve().is_relative_to(folder):
            raise InputError(f"{where} keeps its data in {file}, a link out of the model's folder; copy the file there")
        size = file.stat().st_size
        try:
            offset = int(info.get("offset", 0))
            length = int(info["length"]) if "length" in info else size - offset
        except ValueError:
            raise InputError(f"{where}: external data offset {info.get('offset')!r} or length {info.get('length')!r} "
                             "is not an integer") from None
        if offset < 0 or length < 0 or offset + length > size:
            raise InputError(f"{where}: external data bytes {offset}..{offset + length} lie outside {file} ({size} bytes)")
        total += length
        if total > MAX_NETWORK_BYTES:
            raise InputError(f"{where}: external data past {MAX_NETWORK_BYTES // 2**20} MiB in all")
        with open(file, "rb") as handle:
            handle.seek(offset)
            tensor.raw_data = handle.read(length)
        del tensor.external_data[:]
        tensor.data_location = TensorProto.DEFAULT


def _merged(document: Any, found: dict[str, Any], where: str) -> Any:
    """The metadata document of a file with the fields its graph sets (`found`); a field both set
    must agree. Notes of drops are joined (a cardinal-written file has none in its graph)."""
    if not isinstance(document, dict):
        return document  # Metadata.from_json names what is wrong with it
    merged = dict(document)
    for key, value in found.items():
        if key == "dropped":
            earlier = merged.get("dropped") if isinstance(merged.get("dropped"), list) else []
            merged[key] = earlier + [note for note in value if note not in earlier]
        elif key in merged and merged[key] != value:
            raise InputError(f"{where}: {key} is {merged[key]!r} but the graph gives {value!r}")
        else:
            merged[key] = value
    return merged


class _GraphReader:
    """Follows a graph's one data path from its input (ONNX keeps nodes in topological order)."""

    def __init__(self, graph: Any, opset: int) -> None:
        from onnx import numpy_helper

        self.graph, self.opset = graph, opset
        self.to_array = numpy_helper.to_array
        # Constants by name, read when used: initializers and Constant nodes' outputs.
        self.sources: dict[str, Any] = {init.name: init for init in graph.initializer}
        for node in graph.node:  # Constant nodes, and Identity of a constant (exporters write it for shared weights)
            if node.op_type == "Constant" and node.output:
                self.sources[node.output[0]] = node
            elif node.op_type == "Identity" and node.input and node.input[0] in self.sources and node.output:
                self.sources[node.output[0]] = self.sources[node.input[0]]
        self.arrays: dict[str, np.ndarray] = {}
        self.consumers: dict[str, list[int]] = {}
        for index, node in enumerate(graph.node):
            for name in dict.fromkeys(node.input):
                if name:
                    self.consumers.setdefault(name, []).append(index)

    # -------------------------------------------------------------- constants
    def constant(self, name: str) -> np.ndarray:
        """The value of a constant (an initializer or a Constant node's output) as float64."""
        if name not in self.arrays:
            source = self.sources[name]
            if hasattr(source, "op_type"):
                self.arrays[name] = self._constant_node(source, self._where(source))
            else:
                self.arrays[name] = self._array(source, f"initializer {name}")
        return self.arrays[name]

    def _array(self, tensor: Any, where: str) -> np.ndarray:
        """A tensor as float64, checked before it is unpacked: data inside the file, a numeric
        element type, as many values as its dims declare; then every value finite and, for
        integers, exact in a double."""
        from onnx import TensorProto, helper

        if tensor.data_location == TensorProto.EXTERNAL:
            raise InputError(f"{where} keeps its data in an external file; cardinal reads weights stored inside the model file")
        if tensor.data_type not in {TensorProto.DataType.Value(name) for name in _NUMERIC}:
            raise InputError(f"{where} has element type {_type_name(tensor.data_type)}, not one of {', '.join(_NUMERIC)}")
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

    def _constant_node(self, node: Any, where: str) -> np.ndarray:
        from onnx import helper

        for attribute in node.attribute:
            value = helper.get_attribute_value(attribute)
            if attribute.name == "value":
                return self._array(value, where)
            if attribute.name in ("value_float", "value_floats", "value_int", "value_ints"):
                return _finite(np.asarray(value, dtype=np.float64), f"{where}: {attribute.name}")
        raise InputError(f"{where}: unsupported Constant form")

    def _const(self, node: Any, position: int, where: str) -> np.ndarray:
        if len(node.input) <= position or node.input[position] not in self.sources:
            raise InputError(f"{where}: operand {position} must be a constant")
        return self.constant(node.input[position])

    def _operand(self, node: Any, position: int, where: str) -> np.ndarray:
        """A constant operand of an elementwise op, which must broadcast to the data tensor's own
        shape (a larger one would add axes or repeat the batch; onnxruntime would compute another tensor)."""
        value = self._const(node, position, where)
        shape = self.builder.shape
        if shape is None:
            fits = value.size == 1 and value.ndim <= 2
        else:
            try:
                fits = np.broadcast_shapes((1, *shape), value.shape) == (1, *shape)
            except ValueError:
                fits = False
        if not fits:
            data = "?" if shape is None else ", ".join(map(str, shape))
            raise InputError(f"{where}: operand {position} of shape {list(value.shape)} does not broadcast to [batch, {data}]")
        return value

    def _ints(self, node: Any, position: int, where: str) -> list[int]:
        """A constant operand of integers, e.g. a Reshape's shape."""
        value = self._const(node, position, where)
        if value.ndim > 1 or not np.array_equal(value, np.round(value)):
            raise InputError(f"{where}: operand {position} must be a list of integers")
        return [int(item) for item in value.reshape(-1)]

    # -------------------------------------------------------------- the data path
    def chain(self) -> Any:
        """The `Chain` of the graph: its data path from the input to the output (or to a
        classifier head, which is dropped)."""
        inputs = [value for value in self.graph.input if value.name not in self.sources]
        if len(inputs) != 1:
            names = ", ".join(value.name for value in inputs)
            raise InputError(f"the graph has {len(inputs)} data inputs ({names}); cardinal reads one input tensor")
        start = inputs[0]
        self.element = start.type.tensor_type.elem_type  # of the data path's current value; 0: not declared
        if self.element and _type_name(self.element) not in _FLOATS:
            raise InputError(
                f"the graph input {start.name} has element type {_type_name(self.element)}; cardinal's inputs are real "
                "numbers: export with a float input (e.g. skl2onnx's to_onnx(model, X.astype(np.float32)))"
            )
        self.builder = ChainBuilder(self._input_shape(start), source=f"the graph input {start.name}")
        self.pending: tuple[str, float] | None = None  # a GreaterOrEqual awaiting its Cast
        self.current = start.name
        on_path = {start.name}
        outputs = [value.name for value in self.graph.output]
        walked: set[int] = set()
        while self.current not in outputs:
            users = self.consumers.get(self.current, [])
            if len(users) != 1 or self.graph.node[users[0]].op_type in _CLASSIFIER:
                break
            node = self.graph.node[users[0]]
            self._read(node, self._where(node, users[0]))
            walked.add(users[0])
            self.current = node.output[0]
            on_path.add(self.current)
        if self.pending is not None:
            raise InputError(f"{self.pending[0]}: a GreaterOrEqual must be followed by Cast (cardinal's step)")
        head = self._head(walked, on_path, outputs)
        if head:
            self.builder.classifier_head(head)
        return self.builder.finish(f"the graph's output {self.current!r}")

    def _input_shape(self, value: Any) -> tuple[int, ...] | None:
        """The input's shape, batch axis aside; None when its dims are not all declared (then
        `loose_rank` is its number of axes, batch axis included; None when not declared either)."""
        tensor = value.type.tensor_type
        self.loose_rank: int | None = None
        if not tensor.HasField("shape"):
            return None
        dims = [dim.dim_value if dim.HasField("dim_value") else None for dim in tensor.shape.dim]
        self.loose_rank = len(dims)
        if len(dims) < 2:
            raise InputError(
                f"the graph input {value.name} has {len(dims)} axes; cardinal reads a batch axis first ([batch, ...])"
            )
        if any(size is None or size <= 0 for size in dims[1:]):
            return None
        return tuple(dims[1:])

    def _where(self, node: Any, index: int | None = None) -> str:
        if index is None:
            index = list(self.graph.node).index(node)
        return f"node {node.name or f'#{index}'} ({node.op_type})"

    def _head(self, walked: set[int], on_path: set[str], outputs: list[str]) -> list[str]:
        """The op types of the nodes past the data path's end (a classifier head), which must read
        only the end and what it computes; [] when the end is the graph's output alone."""
        end = self.current
        past, head = {end}, []
        for index, node in enumerate(self.graph.node):
            if index in walked or (node.output and node.output[0] in self.sources):
                continue  # on the path, or a constant
            data = [name for name in node.input if name and name not in self.sources]
            inside = [name for name in data if name in on_path and name != end]
            if inside or not any(name in past for name in data):
                reads = inside[0] if inside else (data[0] if data else "only constants")
                raise InputError(
                    f"{self._where(node, index)} does not continue the single chain from the graph input (it reads "
                    f"{reads!r}); only chains are supported"
                )
            past.update(name for name in node.output if name)
            head.append((index, node))
        ops = [node.op_type for _, node in head]
        if head and (not set(ops) <= set(_HEAD) or not set(ops) & set(_CLASSIFIER)):
            users = self.consumers.get(end, [])
            index, node = (users[-1], self.graph.node[users[-1]]) if len(users) > 1 else head[0]
            fed = f"{end!r} feeds {len(users)} nodes" if len(users) > 1 else f"it reads the chain's end {end!r}"
            advice = f"; {RUNTIME_SHAPE}" if "Shape" in ops else ""
            raise InputError(
                f"{self._where(node, index)} does not continue the single chain from the graph input ({fed}); only chains "
                f"are supported, ending in the graph output or a classifier head (ArgMax, ZipMap){advice}"
            )
        if end not in outputs and not head:
            raise InputError(f"the graph's data path ends at {end!r}, which is not a graph output")
        if head:
            self._check_head(head)
        stray = [name for name in outputs if name not in past]
        if stray:
            raise InputError(f"the graph's output {stray[0]!r} is not the end {end!r} of its chain or of its classifier head")
        return ops

    def _check_head(self, head: list[tuple[int, Any]]) -> None:
        """A classifier head picks the class cardinal's prediction rule picks: it reads a vector of
        scores [batch, K]; each Softmax, LogSoftmax, Concat and ArgMax in it acts on the class axis
        (1 or -1), the ArgMax takes the first of tied scores (as cardinal does), and what lies
        between the chain's end and the ArgMax keeps the order of the scores: Softmax, LogSoftmax,
        Sigmoid, Identity, a Cast between float types, or, for one score that is a sigmoid's
        probability p, skl2onnx's Concat([1 − p, p]) (class 1 iff p > 1/2 iff the logit > 0)."""
        shape = self.builder.shape
        if shape is not None and len(shape) != 1:
            index, node = head[0]
            raise InputError(
                f"{self._where(node, index)}: a classifier head reads a vector of class scores, not a tensor of shape "
                f"[batch, {', '.join(map(str, shape))}]; export the logits"
            )
        producers = {name: (index, node) for index, node in head for name in node.output if name}
        for index, node in head:
            where, attributes = self._where(node, index), self._attributes(node)
            default = {"ArgMax": 0, "Softmax": 1 if self.opset < 13 else -1, "LogSoftmax": 1 if self.opset < 13 else -1}
            if node.op_type in (*default, "Concat") and attributes.get("axis", default.get(node.op_type)) not in (1, -1):
                raise InputError(
                    f"{where}: axis {attributes.get('axis', default.get(node.op_type))} is not the class axis of "
                    "[batch, classes] (1 or -1); cardinal reads a classifier head over the classes"
                )
            if node.op_type == "ArgMax":
                if attributes.get("select_last_index", 0):
                    raise InputError(f"{where}: select_last_index = 1 breaks ties to the last class; cardinal's to the first")
                self._scores_kept(node.input[0] if node.input else "", producers, where)

    def _scores_kept(self, name: str, producers: dict[str, tuple[int, Any]], argmax: str) -> None:
        """Check that the tensor `name` an ArgMax (`argmax`) reads is the chain's end through
        order-keeping steps only (`_check_head`)."""
        end = self.current
        while name != end:
            if name not in producers:
                raise InputError(f"{argmax} does not read the chain's end {end!r}")
            index, node = producers[name]
            where, op = self._where(node, index), node.op_type
            if op == "Concat" and self._probability_pair(node):
                return
            if op == "Cast" and _type_name(self._attributes(node).get("to", 0)) not in _FLOATS:
                raise InputError(f"{where}: a Cast to {_type_name(self._attributes(node).get('to', 0))} before {argmax}")
            if op not in ("Softmax", "LogSoftmax", "Sigmoid", "Identity", "Cast"):
                raise InputError(
                    f"{where} lies between the chain's end {end!r} and {argmax} and may change the class it picks; "
                    "export the logits"
                )
            name = node.input[0] if node.input else ""
        if self.builder.size == 1:
            raise InputError(f"{argmax} over one score always picks class 0; export the logit")

    def _probability_pair(self, node: Any) -> bool:
        """Whether `node` is Concat([Sub(1, p), p]) with p the chain's end, a sigmoid's probability
        (as skl2onnx writes a binary classifier); refused when it is a Concat of another form."""
        where, end = self._where(node), self.current
        last = self.builder.steps[-1] if self.builder.steps else None
        inputs = list(node.input)
        subtract = next((other for other in self.graph.node if inputs[:1] and other.output[:1] == inputs[:1]), None)
        if (
            len(inputs) == 2 and inputs[1] == end and self.builder.size == 1
            and last is not None and last.activation is not None and last.activation.name == "sigmoid"
            and subtract is not None and subtract.op_type == "Sub" and list(subtract.input)[1:] == [end]
            and subtract.input[0] in self.sources and np.array_equal(self.constant(subtract.input[0]).reshape(-1), [1.0])
        ):  # fmt: skip
            return True
        raise InputError(
            f"{where}: a Concat in a classifier head is read only as [1 − p, p] of one sigmoid probability p (skl2onnx's "
            "binary classifier); export the logits"
        )

    def _read(self, node: Any, where: str) -> None:
        """One node on the data path, given to the builder."""
        if not node.output or not node.output[0]:
            raise InputError(f"{where} has no output")
        if node.domain not in ("", "ai.onnx"):
            raise InputError(f"{where}: operator domain {node.domain!r} is not supported; {_advice(node.op_type)}")
        op = node.op_type
        if op not in SUPPORTED:
            raise InputError(f"{where} is not supported: {_advice(op)}")
        data = [name for name in node.input if name and name not in self.sources]
        if data != [self.current] or (node.input[0] != self.current and op != "Add"):  # Add commutes
            raise InputError(f"{where} does not continue the single chain from the graph input (only chains are supported)")
        if self.pending is not None and op != "Cast":
            raise InputError(f"{where}: a GreaterOrEqual must be followed by Cast (cardinal's step)")
        builder, attributes = self.builder, self._attributes(node)
        if op in ("Gemm", "MatMul") and builder.shape is None and self.loose_rank != 2:
            axes = "an undeclared number of" if self.loose_rank is None else str(self.loose_rank)
            raise InputError(
                f"{where}: its input has {axes} axes whose dims the graph does not declare (a MatMul over more than two "
                "axes is batched); declare the graph input's shape, or Flatten it first"
            )
        if op == "Gemm":
            weight, bias = self._gemm(node, attributes, where)
            builder.affine(weight, bias, where)
        elif op == "MatMul":
            weight = self._const(node, 1, where)
            if weight.ndim != 2:
                raise InputError(f"{where}: the constant operand must be a matrix, got shape {list(weight.shape)}")
            builder.affine(weight.T.copy(), None, where)
        elif op == "Conv":
            self._conv(node, attributes, where)
        elif op == "Add":
            builder.add_bias(self.constant(node.input[1] if node.input[0] == self.current else node.input[0]), where)
        elif op == "GreaterOrEqual":
            at = np.unique(self._operand(node, 1, where))
            if at.size != 1:
                raise InputError(f"{where}: the step's threshold must be one number")
            self.pending = (where, float(at[0]))  # finite: constants are checked when read
        elif op == "Cast":
            self._cast(attributes, where)
        elif op in ("Identity", "Dropout"):
            if op == "Dropout":
                self._check_dropout(node, where)
            builder.no_op()
        elif op in _SHAPING:
            self._shaping(node, attributes, where)
            self.loose_rank = 2 if builder.shape is None else None  # a Flatten or Reshape to [batch, -1] of unknown width
        elif op in ("Softmax", "LogSoftmax"):
            builder.softmax(where, self._class_axis(attributes.get("axis", 1 if self.opset < 13 else -1), where) - 1)
        else:
            builder.activation(self._activation(node, attributes, where), where)
        self.element = attributes["to"] if op == "Cast" else self.element

    def _attributes(self, node: Any) -> dict[str, Any]:
        from onnx import helper

        return {attribute.name: helper.get_attribute_value(attribute) for attribute in node.attribute}

    def _gemm(self, node: Any, attributes: dict[str, Any], where: str) -> tuple[np.ndarray, np.ndarray | None]:
        if attributes.get("transA", 0):
            raise InputError(f"{where}: transA = 1 is not supported (the input must be the left operand)")
        matrix = self._const(node, 1, where)
        if matrix.ndim != 2:
            raise InputError(f"{where}: B must be a matrix, got shape {list(matrix.shape)}")
        weight = matrix if attributes.get("transB", 0) else matrix.T
        weight = _scaled(weight, _number(attributes, "alpha", 1.0, where), f"{where}: alpha·B")
        if len(node.input) < 3 or not node.input[2]:
            return weight, None
        bias = _scaled(
            self._bias(node.input[2], weight.shape[0], where), _number(attributes, "beta", 1.0, where), f"{where}: beta·C"
        )
        return weight, bias

    def _bias(self, name: str, width: int, where: str) -> np.ndarray:
        if name not in self.sources:
            raise InputError(f"{where}: the bias operand must be a constant")
        value = self.constant(name)
        shape = list(value.shape)
        while shape and shape[0] == 1 and len(shape) > 1:
            shape.pop(0)  # leading axes of length 1 broadcast over the batch
        if shape not in ([], [1], [width]):
            raise InputError(f"{where}: bias of shape {list(value.shape)} does not fit a layer of width {width}")
        return np.broadcast_to(value.reshape(-1), (width,)).copy()

    def _conv(self, node: Any, attributes: dict[str, Any], where: str) -> None:
        kernel = self._const(node, 1, where)
        if kernel.ndim != 4:
            raise InputError(
                f"{where}: only 2-D convolutions are read (kernel [M, C, kh, kw]), got a kernel of shape {list(kernel.shape)}"
            )
        if attributes.get("group", 1) != 1:
            raise InputError(
                f"{where}: group = {attributes['group']} (a grouped or depthwise convolution) is not read; cardinal "
                "unrolls Conv with group = 1"
            )
        size = tuple(kernel.shape[2:])
        if list(attributes.get("kernel_shape", size)) != list(size):
            raise InputError(
                f"{where}: kernel_shape {attributes['kernel_shape']} disagrees with the kernel's shape {list(kernel.shape)}"
            )
        strides = list(attributes.get("strides", [1, 1]))
        dilations = list(attributes.get("dilations", [1, 1]))
        pads = list(attributes.get("pads", [0, 0, 0, 0]))
        if len(strides) != 2 or len(dilations) != 2 or len(pads) != 4:
            raise InputError(f"{where}: strides, dilations and pads must have 2, 2 and 4 entries")
        auto_pad = attributes.get("auto_pad", b"NOTSET")
        auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
        if auto_pad == "VALID":
            pads = [0, 0, 0, 0]
        elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            shape = self.builder.known_shape(where, "a Conv")
            pads = [0, 0, 0, 0]
            for axis in (0, 1):
                extent = shape[axis + 1] if len(shape) == 3 else 1
                out = -(-extent // max(strides[axis], 1))
                total = max((out - 1) * strides[axis] + dilations[axis] * (size[axis] - 1) + 1 - extent, 0)
                small, large = total // 2, total - total // 2
                pads[axis], pads[axis + 2] = (small, large) if auto_pad == "SAME_UPPER" else (large, small)
        elif auto_pad != "NOTSET":
            raise InputError(f"{where}: unknown auto_pad {auto_pad!r}")
        bias = None
        if len(node.input) > 2 and node.input[2]:
            bias = self._const(node, 2, where)
        self.builder.conv(kernel, bias, strides, pads, dilations, where)

    def _cast(self, attributes: dict[str, Any], where: str) -> None:
        if self.pending is not None:
            self.builder.activation(Activation.make("step", at=self.pending[1]), self.pending[0])
            self.pending = None
            return
        target = attributes.get("to", 0)
        if _type_name(target) in _FLOATS and (not self.element or _type_name(self.element) in _FLOATS):
            self.builder.no_op()  # cardinal computes with the weights' exact values in any case
            return
        source = _type_name(self.element) if self.element else "undeclared"
        raise InputError(
            f"{where}: a Cast to {_type_name(target)} of a {source} tensor is read only between float types (a no-op) or "
            "after GreaterOrEqual (cardinal's step); export the model's scores (logits) without it"
        )

    def _axis(self, axis: int, where: str) -> int:
        """An axis of the current tensor, batch axis included (0), as a non-negative number. While
        the tensor's dims are unknown its rank may be unknown too: then only axis 1 is read."""
        rank = len(self.builder.shape) + 1 if self.builder.shape is not None else self.loose_rank
        if rank is None:
            if axis != 1:
                raise InputError(f"{where}: axis {axis} of a tensor whose axes the graph does not declare; declare its shape")
            return 1
        if not -rank <= axis < rank:
            raise InputError(f"{where}: axis {axis} is out of range for a tensor of {rank} axes")
        return axis % rank

    def _class_axis(self, axis: int, where: str) -> int:
        """The axis of a Softmax or LogSoftmax, which must be the class axis: the last of a tensor
        [batch, classes] (in every opset: before 13 the tensor is coerced to 2-D at the axis, so
        only the last axis of a 2-D tensor means the same)."""
        shape = self.builder.known_shape(where, "a Softmax")
        if len(shape) != 1 or self._axis(axis, where) != 1:
            raise InputError(
                f"{where}: axis {axis} of a tensor of shape [batch, {', '.join(map(str, shape))}] is not the class axis; "
                "cardinal reads a Softmax over the last axis of [batch, classes] (axis 1 or -1)"
            )
        return 1

    def _shaping(self, node: Any, attributes: dict[str, Any], where: str) -> None:
        """Flatten, Reshape, Transpose, Squeeze, Unsqueeze: the batch axis must stay first, alone."""
        builder, op = self.builder, node.op_type
        if op == "Flatten":  # to [batch, rest] from axis 1; another axis would merge the batch axis
            if self._axis(attributes.get("axis", 1), where) != 1:
                raise InputError(
                    f"{where}: axis {attributes['axis']} merges the batch axis; cardinal reads a Flatten with axis 1"
                )
            builder.flatten(1, -1, where)
        elif op == "Reshape":
            shape = self._ints(node, 1, where)
            if attributes.get("allowzero", 0) and 0 in shape:
                raise InputError(f"{where}: allowzero with a 0 in the shape {shape} makes an empty tensor")
            if 0 in shape[1:]:  # a 0 copies the input's dim
                current = builder.known_shape(where, "a Reshape that copies dims (0)")
                shape[1:] = [current[axis] if size == 0 and axis < len(current) else size for axis, size in enumerate(shape[1:])]
            builder.reshape_batched([1 if shape[:1] == [0] else shape[0], *shape[1:]] if shape else shape, where)
        elif op == "Transpose":
            rank = len(builder.known_shape(where, "a Transpose")) + 1
            perm = list(attributes.get("perm", range(rank - 1, -1, -1)))
            if len(perm) != rank or not perm or perm[0] != 0:
                raise InputError(f"{where}: perm {perm} moves the batch axis; cardinal reads a Transpose that keeps it first")
            builder.transpose([axis - 1 for axis in perm[1:]], where)
        else:  # Squeeze, Unsqueeze: axes as an operand (opset ≥ 13) or an attribute
            axes = self._ints(node, 1, where) if len(node.input) > 1 and node.input[1] else list(attributes.get("axes", []))
            if not axes:
                raise InputError(f"{where}: give the axes to {op.lower()} (it would act on the batch axis too)")
            shape = list(builder.known_shape(where, f"a {op}"))
            rank = len(shape) + 1 + (len(axes) if op == "Unsqueeze" else 0)
            if any(not -rank <= axis < rank for axis in axes):
                raise InputError(f"{where}: axes {axes} out of range for a tensor of {rank} axes")
            axes = sorted({axis % rank for axis in axes})
            if 0 in axes:
                raise InputError(f"{where}: axes {axes} include the batch axis")
            if op == "Squeeze":
                if any(shape[axis - 1] != 1 for axis in axes):
                    raise InputError(
                        f"{where}: axes {axes} of a tensor of shape [batch, {', '.join(map(str, shape))}] are not all 1"
                    )
                shape = [size for axis, size in enumerate(shape, start=1) if axis not in axes]
            else:
                for axis in axes:
                    shape.insert(axis - 1, 1)
            builder.reshape(shape, where)

    def _activation(self, node: Any, attributes: dict[str, Any], where: str) -> Activation:
        op = node.op_type
        if op in _ACTIVATIONS:
            return Activation.make(_ACTIVATIONS[op])
        if op == "LeakyRelu":
            name, params = "leaky_relu", {"slope": _number(attributes, "alpha", 0.01, where)}
        elif op == "PRelu":
            slopes = np.unique(self._operand(node, 1, where))
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
            value = self._operand(node, position, where)
            if value.size != 1:
                raise InputError(f"{where}: operand {position} must be a scalar")
            return float(value.reshape(-1)[0])
        return None if attribute is None else float(attribute)

    def _check_dropout(self, node: Any, where: str) -> None:
        if self._attributes(node).get("is_test", 1) == 0:  # opsets 1 and 6
            raise InputError(f"{where}: is_test = 0 (training mode), so it is not a no-op")
        if len(node.input) > 2 and node.input[2] and self._const(node, 2, where).any():
            raise InputError(f"{where}: training_mode is on, so it is not a no-op")
        if len(node.output) > 1 and node.output[1] and self.consumers.get(node.output[1]):
            raise InputError(f"{where}: its mask output is used")


def _type_name(element: int) -> str:
    from onnx import TensorProto

    return TensorProto.DataType.Name(element) if element in TensorProto.DataType.values() else f"#{element}"


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
def onnx_bytes(
    chain: Sequence[ChainStep],
    input_shape: Sequence[int],
    n_outputs: int,
    float32: bool = False,
    metadata: dict[str, Any] | None = None,
) -> bytes:
    """A network's chain (`Network.chain()`) as a serialized ONNX model: input `input` [batch,
    *input_shape] (flattened first when it has several axes) → output `output` [batch, n_outputs],
    float64 unless `float32`; `metadata` (`Metadata.to_json()`) as JSON text in the model's
    metadata_props under `cardinal.metadata`."""
    onnx = _onnx()
    from onnx import TensorProto, helper, numpy_helper

    dtype, element = (np.float32, TensorProto.FLOAT) if float32 else (np.float64, TensorProto.DOUBLE)
    nodes, initializers = [], []

    def constant(name: str, value: Any) -> str:
        initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    current, number = "input", 0
    if len(input_shape) > 1:
        nodes.append(helper.make_node("Flatten", [current], ["input/flat"], name="input/Flatten", axis=1))
        current = "input/flat"
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
        [helper.make_tensor_value_info("input", element, ["batch", *input_shape])],
        [helper.make_tensor_value_info("output", element, ["batch", n_outputs])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="cardinal")
    model.ir_version = 8  # the oldest IR for opset 17: readable by the widest range of tools
    if metadata:
        helper.set_model_props(model, {METADATA_KEY: json.dumps(metadata)})
    onnx.checker.check_model(model)
    return model.SerializeToString()

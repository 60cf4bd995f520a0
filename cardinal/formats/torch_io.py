"""torch models and files read as chains (`cardinal.formats.chain`), without running pickled code.

* A module: an `nn.Sequential` (nested ones too) is read module by module; any other module is
  traced with `torch.fx` and read node by node. Either way the model must be a chain of `Linear`
  and `Conv2d` layers (groups 1, zero padding: unrolled exactly into a dense layer, given the
  input's shape), activations, `Flatten` and `view`/`reshape` to [batch, ...]; Dropout and
  Identity are inference no-ops; a last Softmax/LogSoftmax is dropped (argmax unchanged) with a
  note (`cardinal.formats.chain.ChainBuilder`).
* A file written by `torch.save` is read with `torch.load(weights_only=True)`, which refuses every
  class and function outside an allowlist, so no pickled code runs. cardinal widens that
  allowlist, for the duration of one load, by the torch.nn classes a whole `nn.Sequential` of
  supported layers is made of (`SAFE_MODULES`); their unpickling only fills attribute
  dictionaries. A whole module of a user-defined class cannot be loaded that way: save its
  `state_dict()` and name the activations, or export ONNX.
* A state_dict holds only weights: the activations come from the caller, one per Linear layer in
  the dictionary's order (the order the layers were registered in).
"""

from __future__ import annotations

import io
import itertools
import re
import warnings
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from cardinal.activations import Activation, Step
from cardinal.errors import InputError
from cardinal.io import MAX_NETWORK_BYTES, check_size

from .chain import ADVICE, Chain, ChainBuilder, ChainStep

# Classes a whole `nn.Sequential` file may hold (besides what weights_only always allows).
SAFE_MODULES: tuple[type, ...] = (
    nn.Sequential,
    nn.Linear,
    nn.Conv2d,
    nn.Identity,
    nn.Dropout,
    nn.Flatten,
    nn.ReLU,
    nn.ReLU6,
    nn.LeakyReLU,
    nn.Hardtanh,
    nn.Sigmoid,
    nn.Tanh,
    nn.Softplus,
    nn.Softmax,
    nn.LogSoftmax,
    Step,
)
_SKIPPED = (nn.Dropout, nn.Identity)
MAX_PACKING = 100  # the most a record of a torch archive may be compressed (torch.save does not compress)
# torch modules cardinal does not read, by the ONNX op whose advice (`chain.ADVICE`) applies.
_AS_ONNX = {
    **dict.fromkeys(("MaxPool1d", "MaxPool2d", "AdaptiveMaxPool2d"), "MaxPool"),
    **dict.fromkeys(("AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d"), "AveragePool"),
    **dict.fromkeys(("BatchNorm1d", "BatchNorm2d"), "BatchNormalization"),
    **dict.fromkeys(("LayerNorm", "GroupNorm", "InstanceNorm2d"), "LayerNormalization"),
    "MultiheadAttention": "Attention",
    **dict.fromkeys(("ELU", "SELU", "GELU", "CELU", "SiLU", "Mish", "Hardswish", "Hardsigmoid", "Softsign"), "Elu"),
}

# torch.fx call_function / call_method targets: (module equivalent, its parameter names in order,
# defaults that differ from the module's).
_FUNCTIONS: dict[Any, tuple[type[nn.Module], tuple[str, ...], dict[str, Any]]] = {
    torch.relu: (nn.ReLU, (), {}),
    functional.relu: (nn.ReLU, (), {}),
    functional.relu6: (nn.ReLU6, (), {}),
    torch.sigmoid: (nn.Sigmoid, (), {}),
    functional.sigmoid: (nn.Sigmoid, (), {}),
    torch.tanh: (nn.Tanh, (), {}),
    functional.tanh: (nn.Tanh, (), {}),
    functional.leaky_relu: (nn.LeakyReLU, ("negative_slope",), {}),
    functional.hardtanh: (nn.Hardtanh, ("min_val", "max_val"), {}),
    functional.softplus: (nn.Softplus, ("beta", "threshold"), {}),
    functional.dropout: (nn.Dropout, ("p",), {}),
    torch.flatten: (nn.Flatten, ("start_dim", "end_dim"), {"start_dim": 0}),
    torch.softmax: (nn.Softmax, ("dim",), {}),
    functional.softmax: (nn.Softmax, ("dim",), {}),
    torch.log_softmax: (nn.LogSoftmax, ("dim",), {}),
    functional.log_softmax: (nn.LogSoftmax, ("dim",), {}),
}
_METHODS: dict[str, tuple[type[nn.Module], tuple[str, ...], dict[str, Any]]] = {
    "relu": (nn.ReLU, (), {}),
    "sigmoid": (nn.Sigmoid, (), {}),
    "tanh": (nn.Tanh, (), {}),
    "flatten": (nn.Flatten, ("start_dim", "end_dim"), {"start_dim": 0}),
    "softmax": (nn.Softmax, ("dim",), {}),
    "log_softmax": (nn.LogSoftmax, ("dim",), {}),
}
_IGNORED = ("inplace", "training", "dtype", "_stacklevel")  # arguments that change nothing cardinal reads


# ---------------------------------------------------------------------------- modules
def chain_of_module(model: nn.Module, input_shape: tuple[int, ...] | None = None) -> Chain:
    """The chain of a module: `nn.Sequential` and single layers directly, anything else by
    tracing. `input_shape` (batch axis aside) fixes the numbering of the features; a `Conv2d`
    needs it."""
    builder = ChainBuilder(input_shape)
    if isinstance(model, SAFE_MODULES):
        for position, module in _flattened(model):
            _read_module(builder, module, f"module {position} ({type(module).__name__})")
    else:
        _read_trace(builder, model)
    return builder.finish()


def _flattened(model: nn.Module, prefix: str = "") -> list[tuple[str, nn.Module]]:
    """(position label, module) for the leaves of nested `nn.Sequential`s."""
    if not isinstance(model, nn.Sequential):
        return [(prefix or "0", model)]
    leaves = []
    for position, module in enumerate(model):
        leaves += _flattened(module, f"{prefix}.{position}" if prefix else str(position))
    return leaves


def _read_module(builder: ChainBuilder, module: nn.Module, where: str) -> None:
    """One module of the chain, given to `builder`."""
    if isinstance(module, nn.Linear):
        weight, bias = _parameters(module.weight, module.bias, where)
        builder.affine(weight, bias, where)
    elif isinstance(module, nn.Conv2d):
        _read_conv(builder, module, where)
    elif isinstance(module, _SKIPPED):
        builder.no_op()
    elif isinstance(module, nn.Flatten):
        builder.flatten(module.start_dim, module.end_dim, where)
    elif isinstance(module, (nn.Softmax, nn.LogSoftmax)):
        builder.softmax(where, _batch_aside(1 if module.dim is None else module.dim, builder, where))
    elif type(module).__name__ in _AS_ONNX:
        raise InputError(f"{where} is not supported: {ADVICE[_AS_ONNX[type(module).__name__]]}")
    else:
        try:
            activation = Activation.from_module(module)
        except InputError as error:
            raise InputError(
                f"{where.split(' (')[0]}: {error}; cardinal reads Linear, Conv2d, Flatten, Dropout, Identity, these "
                "activations and a last Softmax"
            ) from None
        builder.activation(activation, where)


def _batch_aside(dim: int, builder: ChainBuilder, where: str) -> int:
    """A torch dim (the batch axis is 0) as an axis of the tensor without its batch axis."""
    rank = 2 if builder.shape is None else len(builder.shape) + 1
    if not -rank <= dim < rank or dim % rank == 0:
        raise InputError(f"{where}: dim {dim} is the batch axis or out of range for a tensor of {rank} axes")
    return dim % rank - 1


def _read_conv(builder: ChainBuilder, module: nn.Conv2d, where: str) -> None:
    if module.groups != 1 or module.padding_mode != "zeros":
        raise InputError(
            f"{where}: groups = {module.groups}, padding_mode = {module.padding_mode!r}; cardinal unrolls a Conv2d with "
            "groups = 1 and zero padding"
        )
    kernel, bias = _parameters(module.weight, module.bias, where)
    size, dilation = module.kernel_size, module.dilation
    if module.padding == "valid":
        pads = [0, 0, 0, 0]
    elif module.padding == "same":  # torch pads the extra row or column at the end
        totals = [dilation[axis] * (size[axis] - 1) for axis in (0, 1)]
        pads = [totals[0] // 2, totals[1] // 2, totals[0] - totals[0] // 2, totals[1] - totals[1] // 2]
    else:
        pads = [module.padding[0], module.padding[1], module.padding[0], module.padding[1]]
    builder.conv(kernel, bias, module.stride, pads, dilation, where)


def _parameters(weight: Any, bias: Any, where: str) -> tuple[np.ndarray, np.ndarray]:
    """A layer's weight and bias (zeros when it has none) as float64 arrays, each value exactly."""
    tensors = [weight] if bias is None else [weight, bias]
    if not all(isinstance(tensor, torch.Tensor) and tensor.is_floating_point() for tensor in tensors):
        raise InputError(f"{where}: weight and bias must be real floating-point tensors")
    if any(tensor.layout != torch.strided or tensor.is_meta for tensor in tensors):
        raise InputError(f"{where}: weight and bias must be dense tensors that hold their values (not sparse or meta)")
    array = weight.detach().cpu().double().numpy()
    vector = np.zeros(array.shape[0]) if bias is None else bias.detach().cpu().double().numpy()
    return array, vector


def _read_trace(builder: ChainBuilder, model: nn.Module) -> None:
    """Trace `model.forward` with torch.fx and read the graph, which must be one chain from the
    input to the output."""
    name = type(model).__name__
    try:
        traced = torch.fx.symbolic_trace(model)
    except Exception as error:  # tracing runs the user's forward on proxies: any failure is theirs
        raise InputError(f"{name}: torch.fx cannot trace its forward ({type(error).__name__}: {error})") from None
    current: torch.fx.Node | None = None
    for node in traced.graph.nodes:
        where = f"{name} node {node.name} ({node.op} {_target_name(node.target)})"
        if node.op == "placeholder":
            if current is not None:
                raise InputError(f"{where}: the model takes more than one input")
            current = node
            continue
        data = [arg for arg in (*node.args, *node.kwargs.values()) if isinstance(arg, torch.fx.Node)]
        if node.op == "output":
            if data != [current]:
                raise InputError(f"{where}: the output is not the end of one chain of layers")
            break
        if current is None or data != [current] or not node.args or node.args[0] is not current:
            raise InputError(f"{where}: not a chain of layers (each step must take the previous step's output alone)")
        if len(current.users) != 1:
            hint = " (for a flatten, write torch.flatten(x, 1) or nn.Flatten())" if _reads_shape(current) else ""
            raise InputError(f"{where}: {current.name} feeds more than one step; only chains are supported{hint}")
        _read_node(builder, traced, node, where)
        current = node


def _reads_shape(node: torch.fx.Node) -> bool:
    return any(user.target in ("size", "shape") or (user.op == "call_function" and user.target is getattr) for user in node.users)


def _target_name(target: Any) -> str:
    return target if isinstance(target, str) else getattr(target, "__name__", repr(target))


def _read_node(builder: ChainBuilder, traced: torch.fx.GraphModule, node: torch.fx.Node, where: str) -> None:
    if node.op == "call_module":
        return _read_module(builder, traced.get_submodule(node.target), where)
    if node.op == "call_method" and node.target in ("view", "reshape"):
        shape = node.args[1] if len(node.args) == 2 and isinstance(node.args[1], (tuple, list)) else node.args[1:]
        if node.kwargs or not all(isinstance(size, int) for size in shape):
            raise InputError(f"{where}: the shape must be constant integers (for a flatten, write torch.flatten(x, 1))")
        return builder.reshape_batched(list(shape), where)
    if node.op == "call_function" and node.target in _FUNCTIONS:
        module_type, names, defaults = _FUNCTIONS[node.target]
    elif node.op == "call_method" and node.target in _METHODS:
        module_type, names, defaults = _METHODS[node.target]
    else:
        raise InputError(
            f"{where}: unsupported step (supported: Linear and Conv2d modules, activations, Dropout, Flatten, view/reshape "
            "to [batch, ...], a last softmax)"
        )
    # Positional arguments past the parameters (inplace, training) and those keywords change nothing at inference.
    extra = dict(zip(names, node.args[1:], strict=False)) | {
        key: value for key, value in node.kwargs.items() if key not in _IGNORED
    }
    if set(extra) - set(names):
        raise InputError(f"{where}: unexpected argument(s) {sorted(set(extra) - set(names))}")
    return _read_module(builder, module_type(**(defaults | extra)), where)


# ---------------------------------------------------------------------------- state_dicts
def chain_of_state_dict(state: Mapping[str, Any], activations: Sequence[Activation], source: str) -> list[ChainStep]:
    """Linear layers from a state_dict (`P.weight` [out, in] with optional `P.bias` [out], in the
    dictionary's order), each followed by its activation."""
    prefixes: list[str] = []
    for key, value in state.items():
        if not isinstance(key, str) or not isinstance(value, torch.Tensor):
            raise InputError(f"{source}: entry {key!r} is not a named tensor; a state_dict maps names to tensors")
        prefix, _, leaf = key.rpartition(".")
        if leaf == "weight" and value.ndim == 2:
            prefixes.append(prefix)
        elif not (leaf == "bias" and value.ndim == 1 and f"{prefix}.weight" in state):
            raise InputError(
                f"{source}: entry {key!r} (shape {list(value.shape)}) is not the weight [out, in] or bias [out] of a "
                "Linear layer; only chains of Linear layers and activations are supported"
            )
    if not prefixes:
        raise InputError(f"{source}: the state_dict holds no Linear layer")
    shapes = ", ".join(f"{prefix or 'weight'} {list(state[_key(prefix, 'weight')].shape)}" for prefix in prefixes)
    if not activations:
        raise InputError(
            f"{source} is a state_dict with {len(prefixes)} Linear layer(s) ({shapes}): give their activations, "
            f"one per layer (--activations, e.g. {','.join(['relu'] * (len(prefixes) - 1) + ['identity'])})"
        )
    if len(activations) != len(prefixes):
        raise InputError(f"{source}: {len(activations)} activation(s) given for {len(prefixes)} Linear layer(s) ({shapes})")
    steps = []
    for number, (prefix, activation) in enumerate(zip(prefixes, activations, strict=True), start=1):
        where = f"{source}: layer {number} ({prefix or 'weight'})"
        weight, bias = _parameters(state[_key(prefix, "weight")], state.get(_key(prefix, "bias")), where)
        steps.append(ChainStep(where, weight=weight, bias=bias))
        steps.append(ChainStep(where, activation=activation))
    return steps


def _key(prefix: str, leaf: str) -> str:
    return f"{prefix}.{leaf}" if prefix else leaf


# ---------------------------------------------------------------------------- files
def load_torch(data: bytes, path: Path, activations: Sequence[Activation], input_shape: tuple[int, ...] | None = None) -> Chain:
    """The chain of a `torch.save` file (its bytes `data`, read from `path`): a whole
    `nn.Sequential` (or a single supported layer; `input_shape` as in `chain_of_module`) or a
    state_dict with `activations`. Raises `InputError` for anything else, a pickle that would run
    code included."""
    obj = _safe_load(data, path)
    if isinstance(obj, nn.Module):
        if activations:
            raise InputError(f"{path} holds a whole module, which names its own activations: drop --activations")
        try:
            _check_values(itertools.chain(obj.parameters(), obj.buffers()), path)
            return chain_of_module(obj, input_shape)
        except (AttributeError, TypeError, ValueError, RuntimeError) as error:  # attributes not as torch writes them
            raise InputError(f"{path}: not a well-formed module ({type(error).__name__}: {error})") from None
    if isinstance(obj, Mapping):
        if input_shape is not None:
            raise InputError(f"{path} is a state_dict of Linear layers: drop input_shape")
        _check_values(obj.values(), path)
        return Chain(chain_of_state_dict(obj, activations, str(path)))
    raise InputError(f"{path} holds a {type(obj).__name__}, not a module or a state_dict")


def _safe_load(data: bytes, path: Path) -> Any:
    """`torch.load(weights_only=True)` with `SAFE_MODULES` allowed; refusals become InputError.
    An archive (torch.save's format) is checked first: its records, unpacked, must fit in
    `MAX_NETWORK_BYTES`, and nothing it would import may lie outside the allowlist."""
    if zipfile.is_zipfile(io.BytesIO(data)):
        _check_archive(data, path)
        try:
            unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data))
        except Exception as error:
            raise InputError(f"{path}: not a file written by torch.save ({_first_line(error)})") from None
        allowed = {f"{cls.__module__}.{cls.__qualname__}" for cls in SAFE_MODULES}
        refused = [name for name in unsafe if name not in allowed]
        if refused:
            raise InputError(_refusal(path, refused[0]))
    try:
        with torch.serialization.safe_globals(list(SAFE_MODULES)), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "Detected pickle protocol 4": the refusal below says what matters
            return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises UnpicklingError, RuntimeError, EOFError, ... for foreign files
        text = str(error)
        match = re.search(r"GLOBAL ([\w.]+)", text)
        if match:
            raise InputError(_refusal(path, match.group(1))) from None
        if "WeightsUnpickler error:" in text:  # torch's own reason, between its boilerplate
            reason = " ".join(text.split("WeightsUnpickler error:")[1].split("Check the documentation")[0].split())
            raise InputError(f"{path}: refused by torch.load(weights_only=True), so no pickled code ran: {reason}") from None
        raise InputError(f"{path}: torch.load(weights_only=True) cannot read it: {_first_line(error)}") from None


def _check_values(values: Iterable[Any], path: Path) -> None:
    """The tensors among `values`, as the dense arrays reading them makes, must fit in
    `MAX_NETWORK_BYTES` (their elements counted, not their storages: a view with stride 0 over
    one stored number, which torch.save writes as it is, would unpack to every element)."""
    total = sum(value.numel() * value.element_size() for value in values if isinstance(value, torch.Tensor))
    check_size(path, "network file", total, MAX_NETWORK_BYTES, unpacked=True)


def _check_archive(data: bytes, path: Path) -> None:
    """The sizes a torch archive declares for its records (what unpacking them allocates: torch's
    reader stops at a record's declared size), summed, must fit in `MAX_NETWORK_BYTES`; a record
    packed more than `MAX_PACKING`-fold is refused as a zip bomb (torch.save stores records
    unpacked)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            records = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as error:
        raise InputError(f"{path}: not a readable zip archive ({_first_line(error)})") from None
    check_size(path, "network file", sum(record.file_size for record in records), MAX_NETWORK_BYTES, unpacked=True)
    for record in records:
        if record.file_size > MAX_PACKING * max(record.compress_size, 1) and record.file_size > 1 << 20:
            ratio = record.file_size / max(record.compress_size, 1)
            raise InputError(f"{path}: record {record.filename} unpacks {ratio:.0f}-fold: a zip bomb, not a torch.save file")


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _refusal(path: Path, name: str) -> str:
    leaf = name.rsplit(".", 1)[-1]
    if name.startswith("torch.nn.modules.") and leaf in _AS_ONNX:
        return f"{path}: holds a {leaf}, which cardinal does not read: {ADVICE[_AS_ONNX[leaf]]}"
    return (
        f"{path}: refused: unpickling it would import {name}, and cardinal never runs pickled code (torch.load with "
        "weights_only=True, torch.nn Sequential/Linear/activation classes allowed). For a model of your own class, "
        "save model.state_dict() and pass --activations, or export ONNX"
    )


def torch_bytes(module: nn.Module, state_dict: bool = False) -> bytes:
    """The bytes of a `torch.save` file of `module` (an `nn.Sequential` of `SAFE_MODULES`,
    loadable with `torch.load(weights_only=True)` inside `torch.serialization.safe_globals`), or
    of its state_dict when `state_dict` (then the activations must be given when loading)."""
    buffer = io.BytesIO()
    torch.save(module.state_dict() if state_dict else module, buffer)
    return buffer.getvalue()

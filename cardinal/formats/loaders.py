"""Network files by type: cardinal's JSON, ONNX and torch (`Network.load`, `Network.save`).

The file is read once, through the reading gate (`cardinal.io.read_input`: a regular file of at most
`MAX_NETWORK_BYTES`). The type is told by content where content tells it (a JSON object starts with
`{`, `torch.save` writes a zip archive or a pickle), else by the extension; a file that is none of
these is an `InputError`. Reading returns the JSON document or the model's chain (`cardinal.formats.chain`),
which `Network` assembles. Nothing here runs pickled code (see `cardinal.formats.torch_io`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from cardinal.activations import Activation
from cardinal.errors import InputError
from cardinal.io import MAX_NETWORK_BYTES, decode_text, open_input, parse_json, read_input

from .chain import ChainStep

_EXTENSIONS = {".json": "json", ".onnx": "onnx", ".pt": "torch", ".pth": "torch", ".bin": "torch"}
_PICKLE_PROTOCOLS = tuple(bytes([0x80, version]) for version in range(2, 6))


def detect_format(path: str | Path) -> str:
    """`json`, `onnx` or `torch`, from the first bytes of the file, else from its extension."""
    with open_input(path, "network file", MAX_NETWORK_BYTES) as stream:
        return _format_of(stream.read(64), Path(path))


def _format_of(head: bytes, path: Path) -> str:
    """The format told by a file's first bytes `head`, else by the extension of `path`."""
    if head.lstrip()[:1] == b"{":
        return "json"
    if head[:4] == b"PK\x03\x04" or head[:2] in _PICKLE_PROTOCOLS:
        return "torch"
    if path.suffix.lower() in _EXTENSIONS:
        return _EXTENSIONS[path.suffix.lower()]
    if head[:1] == b"\x08":  # an ONNX ModelProto begins with field 1, ir_version (a varint)
        return "onnx"
    raise InputError(f"{path}: not a network file cardinal reads (JSON cardinal.network/1, ONNX, or a torch.save file)")


def parse_activations(specs: str | Sequence[str | Activation] | None) -> list[Activation]:
    """Activations for a state_dict: a comma-separated string or a list of `Activation`s or specs
    (`relu`, `leaky_relu:0.1`, `hardtanh:0:1`, `step:0.5`)."""
    if specs is None:
        return []
    items = specs.split(",") if isinstance(specs, str) else list(specs)
    return [item if isinstance(item, Activation) else parse_activation(item) for item in items]


def read_model(
    path: str | Path,
    activations: str | Sequence[str | Activation] | None = None,
    input_shape: Sequence[int] | None = None,
) -> tuple[Any, list[ChainStep], Any]:
    """(the parsed JSON document of a cardinal network file, or None; the chain of an ONNX or
    torch model, or []; the metadata document of an ONNX or torch model — its cardinal metadata
    and what the model itself says, `Chain.metadata()` — or None); `activations` only for a
    torch state_dict; `input_shape` is applied here only to a whole torch module (`Network.load`
    records it for a JSON or ONNX file that declares none)."""
    path = Path(path)
    data = read_input(path, "network file", MAX_NETWORK_BYTES)
    if not data or data.isspace():
        raise InputError(f"network file {path} is empty")
    kind = _format_of(data[:64], path)
    parsed = parse_activations(activations)
    if parsed and kind != "torch":
        raise InputError(f"{path} is a {kind.upper()} network, which names its own activations: drop --activations")
    if kind == "json":
        return parse_json(decode_text(data, path, "network file"), str(path)), [], None
    if kind == "onnx":
        from .onnx_io import load_onnx

        return None, *load_onnx(data, path)
    from .torch_io import load_torch

    chain = load_torch(data, path, parsed, None if input_shape is None else tuple(input_shape))
    return None, chain.steps, chain.metadata() or None


def format_for_output(path: str | Path, strict: bool = True) -> str:
    """The format a path's extension asks for: .onnx, .pt/.pth/.bin (torch), .json, or (unless
    `strict`, which raises InputError) JSON for any other extension."""
    suffix = Path(path).suffix.lower()
    if suffix not in _EXTENSIONS and strict:
        raise InputError(f"{path}: cannot tell the output format from the extension (use .json, .onnx, .pt or .pth)")
    return _EXTENSIONS.get(suffix, "json")


def activation_flag(activations: Iterable[Activation]) -> str:
    """The `--activations` value that reloads a state_dict with these layer activations."""
    return ",".join(format_activation(activation) for activation in activations)


def format_activation(activation: Activation) -> str:
    """`relu`, `leaky_relu:0.1`, `hardtanh:0.0:1.0`, `step:0.5`: the inverse of `parse_activation`."""
    return ":".join([activation.name, *(repr(value) for _, value in activation.params)])


def parse_activation(spec: str) -> Activation:
    """`name` or `name:p1[:p2]` with the parameters in the order of `Activation.params`."""
    name, *values = spec.strip().split(":")
    defaults = Activation.make(name).params if name else ()
    if len(values) > len(defaults):
        raise InputError(f"activation {spec!r}: {name} takes {len(defaults)} parameter(s)")
    try:
        numbers = [float(value) for value in values]
    except ValueError:
        raise InputError(f"activation {spec!r}: parameters must be numbers") from None
    return Activation.make(name, **{key: value for (key, _), value in zip(defaults, numbers, strict=False)})

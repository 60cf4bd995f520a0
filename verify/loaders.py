"""Network files by type: cardinal's JSON, ONNX and torch, read and written.

The type is told by content where content tells it (a JSON object starts with `{`, `torch.save`
writes a zip archive or a pickle), else by the extension (`.onnx`); a file that is none of these
is an `InputError`. Nothing here runs pickled code (see `verify.torch_io`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from .activations import Activation
from .errors import InputError
from .io import read_json, write_atomic
from .network import Network

FORMATS = ("json", "onnx", "torch")
_EXTENSIONS = {".json": "json", ".onnx": "onnx", ".pt": "torch", ".pth": "torch", ".bin": "torch"}
_PICKLE_PROTOCOLS = tuple(bytes([0x80, version]) for version in range(2, 6))


def detect_format(path: str | Path) -> str:
    """`json`, `onnx` or `torch`, from the first bytes of the file, else from its extension."""
    path = Path(path)
    try:
        with path.open("rb") as stream:
            head = stream.read(64)
    except FileNotFoundError:
        raise InputError(f"network file {path} not found") from None
    except OSError as error:
        raise InputError(f"cannot read network file {path}: {error.strerror}") from None
    if head.lstrip()[:1] == b"{":
        return "json"
    if head[:4] == b"PK\x03\x04" or head[:2] in _PICKLE_PROTOCOLS:
        return "torch"
    if path.suffix.lower() in _EXTENSIONS:
        return _EXTENSIONS[path.suffix.lower()]
    if _looks_like_onnx(head):
        return "onnx"
    raise InputError(f"{path}: not a network file cardinal reads (JSON cardinal.network/1, ONNX, or a torch.save file)")


def _looks_like_onnx(head: bytes) -> bool:
    """An ONNX ModelProto begins with field 1 (ir_version, a varint: byte 0x08)."""
    return head[:1] == b"\x08"


def parse_activations(specs: str | Sequence[str | Activation] | None) -> list[Activation]:
    """Activations for a state_dict: a comma-separated string or a list of `Activation`s or specs
    (`relu`, `leaky_relu:0.1`, `hardtanh:0:1`, `step:0.5`)."""
    from .torch_io import parse_activation

    if specs is None:
        return []
    items = specs.split(",") if isinstance(specs, str) else list(specs)
    return [item if isinstance(item, Activation) else parse_activation(item) for item in items]


def load_network(path: str | Path, activations: str | Sequence[str | Activation] | None = None) -> Network:
    """Read any supported network file; `activations` only for a torch state_dict."""
    path = Path(path)
    kind = detect_format(path)
    parsed = parse_activations(activations)
    if parsed and kind != "torch":
        raise InputError(f"{path} is a {kind.upper()} network, which names its own activations: drop --activations")
    if kind == "json":
        return Network.from_json(read_json(path, "network file"), source=str(path))
    if kind == "onnx":
        from .onnx_io import load_onnx

        return load_onnx(path)
    from .torch_io import load_torch

    return load_torch(path, parsed)


def format_for_output(path: str | Path) -> str:
    """The format a path's extension asks for: .json, .onnx, or .pt/.pth/.bin (torch)."""
    suffix = Path(path).suffix.lower()
    if suffix not in _EXTENSIONS:
        raise InputError(f"{path}: cannot tell the output format from the extension (use .json, .onnx, .pt or .pth)")
    return _EXTENSIONS[suffix]


def save_network(net: Network, path: str | Path, float32: bool = False, state_dict: bool = False) -> None:
    """Write `net` in the format of the path's extension, whole or not at all. ONNX and torch
    files hold float64 weights unless `float32` (which rounds them); a torch file holds the
    whole `nn.Sequential` unless `state_dict`."""
    kind = format_for_output(path)
    if state_dict and kind != "torch":
        raise InputError(f"{path}: a state_dict is a torch file (.pt or .pth)")
    if float32 and kind == "json":
        raise InputError(f"{path}: JSON keeps every double; float32 applies to ONNX and torch files")
    if kind == "json":
        net.save(path)
    elif kind == "onnx":
        from .onnx_io import onnx_bytes

        write_atomic(path, onnx_bytes(net, np.float32 if float32 else np.float64))
    else:
        from .torch_io import torch_bytes

        write_atomic(path, torch_bytes(net, state_dict, torch.float32 if float32 else torch.float64))


def float32_changes(net: Network) -> int:
    """How many weights and biases float32 would round (0: the float32 file is the same network)."""
    return sum(
        int(np.count_nonzero(array.astype(np.float32).astype(np.float64) != array))
        for layer in net.layers
        for array in (layer.weight, layer.bias)
    )

"""The Python API's arguments (`cardinal.explain`, `cardinal.Explainer`), checked before any work
by the rules the command line's flags follow (`cardinal.validate`'s number rules): the same
one-line `InputError`, its message beginning with the argument's name."""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .domain import Domain
from .errors import InputError
from .validate import _dims, _finite, _positive, _seconds, describe, output_directory

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class ApiArguments:
    """The settings of `cardinal.explain` and `cardinal.Explainer`, checked (`api_arguments`):
    `threshold` a float or None, `domain` a Domain or None, `radius` a float or float64 [m] or
    None, `proof_dir` a Path or None, `time_limit` seconds, `input_shape` a tuple or None."""

    threshold: float | None
    domain: Any
    radius: float | np.ndarray | None
    proof_dir: Path | None
    time_limit: float
    input_shape: tuple[int, ...] | None


def _shown(value: Any) -> str:
    """`value` for a message: a JSON-like value as `describe` writes it, a numpy scalar as its
    Python value, an array by its shape."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return f"an array of shape {list(value.shape)}"
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, bool):
        return repr(value)  # Python's words (None, True), not JSON's
    return describe(value)


def _real(value: Any, name: str) -> float:
    """A real number (int, float, numpy scalar; not a Boolean or a string) as a float."""
    import numpy as np

    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise InputError(f"{name}: {_shown(value)} is not a number")
    try:
        return float(value)
    except OverflowError:
        raise InputError(f"{name}: {_shown(value)} is too large for a double") from None


def api_arguments(
    *,
    threshold: Any,
    domain: Any,
    radius: Any,
    proof_dir: Any,
    time_limit: Any,
    input_shape: Any,
    default_time_limit: float,
) -> ApiArguments:
    """Check the settings a Python caller gave `cardinal.explain` or `cardinal.Explainer` before
    any work, by the rules the command line's flags follow (the same words after the argument's
    name): `threshold` a finite number; `domain` a `cardinal.Domain`; `radius` a finite number > 0
    or a 1-D sequence of them; `proof_dir` a path (str or os.PathLike, not empty) of a folder that
    exists and takes files or can be made; `time_limit` seconds, 0 < s ≤ MAX_SECONDS
    (None: `default_time_limit`); `input_shape` a sequence of positive integers. None leaves a
    setting to its default. InputError (one line, naming the argument) otherwise."""
    if threshold is not None:
        threshold = _finite(_real(threshold, "threshold"), f"threshold: {_shown(threshold)}")
    if domain is not None and not isinstance(domain, Domain):
        raise InputError(f"domain: a cardinal.Domain (such as Domain.unit(n)), not {_shown(domain)}")
    if radius is not None:
        radius = _radius(radius)
    if proof_dir is not None:
        if not isinstance(proof_dir, (str, os.PathLike)):
            raise InputError(f"proof_dir: a folder's path (str or os.PathLike), not {_shown(proof_dir)}")
        if os.fspath(proof_dir) in ("", b""):
            raise InputError("proof_dir: '' names no folder (give '.' for the current one)")
        proof_dir = output_directory(Path(os.fsdecode(proof_dir)), "proof_dir")
    if time_limit is None:
        time_limit = default_time_limit
    else:
        time_limit = _seconds(_real(time_limit, "time_limit"), f"time_limit: {_shown(time_limit)}")
    if input_shape is not None:
        input_shape = _shape(input_shape)
    return ApiArguments(threshold, domain, radius, proof_dir, time_limit, input_shape)


def _radius(value: Any) -> float | np.ndarray:
    """`radius=`: one finite number > 0, or a 1-D sequence of them (float64 [m]); its length is
    checked against the network's inputs where the box is made (`Domain.radius`)."""
    import numpy as np

    from .lazy import is_tensor

    if is_tensor(value):
        value = value.detach().cpu().numpy()
    if isinstance(value, (list, tuple, np.ndarray)):
        array = np.asarray(value, dtype=object)
        if array.ndim != 1:
            raise InputError(f"radius: {_shown(array)}: give one number or one per feature")
        return np.array([_positive(_real(r, f"radius[{i}]"), f"radius[{i}]: {_shown(r)}") for i, r in enumerate(array)])
    return _positive(_real(value, "radius"), f"radius: {_shown(value)}")


def _shape(value: Any) -> tuple[int, ...]:
    """`input_shape=`: a sequence (list, tuple) of positive integers."""
    import numpy as np

    if not isinstance(value, (list, tuple)):
        raise InputError(f"input_shape: a tuple of dims such as (1, 28, 28), not {_shown(value)}")
    for dim in value:
        if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, numbers.Integral):
            raise InputError(f"input_shape: {_shown(dim)} is not an integer dim")
    dims = tuple(int(dim) for dim in value)
    return _dims(dims, f"input_shape: {dims}")


def api_inputs(x: Any, name: str = "x") -> np.ndarray:
    """A Python caller's input `x` as float64: one input [n] or a batch [B, n] (a sequence, a
    numpy array or a torch tensor of real numbers). Refused with a one-line InputError naming
    `name`: a string, a set or another non-sequence, ragged rows, complex or non-numeric values,
    or another number of axes. Its length, finiteness and bounds are the domain's to check
    (`Domain.check`)."""
    import numpy as np

    from .lazy import is_tensor

    if is_tensor(x):
        x = x.detach().cpu().numpy()
    if isinstance(x, (str, bytes)) or not (isinstance(x, (list, tuple, np.ndarray)) or hasattr(x, "__array__")):
        raise InputError(f"{name}: one input (a sequence of numbers) or a batch [B, n], not {_shown(x)}")
    try:
        array = np.asarray(x)
    except ValueError:
        raise InputError(f"{name} is ragged: its rows have different lengths") from None
    if array.dtype == object:  # numbers of several types, or something else (None: not nan)
        for item in array.flat:
            if isinstance(item, (list, tuple, np.ndarray)):
                raise InputError(f"{name} is ragged: its rows have different lengths")
            if isinstance(item, (bool, np.bool_, complex)) or not isinstance(item, numbers.Real):
                raise InputError(f"{name} holds {_shown(item)}, not a number")
        array = array.astype(np.float64)
    if array.dtype.kind == "c":
        raise InputError(f"{name} holds complex numbers: an input is real")
    if array.dtype.kind not in "biuf":
        raise InputError(f"{name} holds {array.dtype.name} values, not numbers")
    if array.ndim not in (1, 2):
        raise InputError(f"{name} has shape {list(array.shape)}: give one input [n] or a batch [B, n]")
    return array.astype(np.float64)

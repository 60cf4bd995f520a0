"""Checks of user input made before any work starts, shared by every command: numbers given on the
command line, output paths, and the typed fields of JSON documents.

Each check raises `InputError` (command-line values: `argparse.ArgumentTypeError`) with a message
that names the culprit: the flag, the path, the file and the field. Nothing here writes a file;
an output folder is tested by creating an unnamed temporary file in it, which leaves no trace and,
unlike a permission-bit test, is right for root and for read-only file systems alike.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import InputError
from .io import link_refused

if TYPE_CHECKING:
    import numpy as np  # imported where used: `cardinal --help` builds its parser without numpy

MAX_SECONDS = 1e7  # about 116 days: a longer time limit is a typo
MAX_INPUT_VALUES = 2**24  # --input-shape: values in one input, as the Conv unrolling caps it


# ---------------------------------------------------------------------------- numbers, both doors
# One definition of each rule, raising InputError with a message that begins with the value as
# the caller wrote it (`shown`); the command line's argparse types and the Python API's checks
# (`cardinal.arguments`) both call them, so `--time-limit 0` and `time_limit=0` are refused in the same words.
def _finite(value: float, shown: str) -> float:
    if not math.isfinite(value):
        raise InputError(f"{shown} is not a finite number")
    return value


def _positive(value: float, shown: str) -> float:
    if not _finite(value, shown) > 0:
        raise InputError(f"{shown} is not positive")
    return value


def _seconds(value: float, shown: str) -> float:
    if _positive(value, shown) > MAX_SECONDS:
        raise InputError(f"{shown} seconds is more than the {MAX_SECONDS:.0e} allowed")
    return value


def _dims(dims: tuple[int, ...], shown: str) -> tuple[int, ...]:
    if not dims or any(d < 1 for d in dims) or math.prod(dims) > MAX_INPUT_VALUES:
        raise InputError(f"{shown}: dims must be positive, at most {MAX_INPUT_VALUES:,} values in all")
    return dims


def _argument(rule: Callable[[Any, str], Any], value: Any, text: str) -> Any:
    """`rule(value, repr(text))` as an argparse type: its InputError becomes ArgumentTypeError."""
    try:
        return rule(value, repr(text))
    except InputError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


# ---------------------------------------------------------------------------- command-line values
def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def finite_number(text: str) -> float:
    """argparse type: a finite float (not nan, inf, or a literal that overflows, such as 1e400)."""
    return _argument(_finite, _float(text), text)


def positive_number(text: str) -> float:
    """argparse type: a finite float > 0."""
    return _argument(_positive, _float(text), text)


def seconds(text: str) -> float:
    """argparse type: a duration in seconds, 0 < s ≤ MAX_SECONDS."""
    return _argument(_seconds, _float(text), text)


def input_shape(text: str) -> tuple[int, ...]:
    """argparse type of `--input-shape`: the model input's dims without the batch axis, comma- or
    x-separated (`1,28,28` or `1x28x28`), each a positive integer."""
    parts = text.replace("x", ",").split(",")
    try:
        dims = tuple(int(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of dims such as 1,28,28") from None
    return _argument(_dims, dims, text)


def number_list(text: str) -> float | list[float]:
    """argparse type: one finite number or a comma-separated list of them."""
    parts = text.split(",")
    if len(parts) == 1:
        return finite_number(text)
    values = []
    for index, part in enumerate(parts):
        try:
            values.append(finite_number(part))
        except argparse.ArgumentTypeError as error:
            raise argparse.ArgumentTypeError(f"{text!r}, value {index}: {error}") from None
    return values


def row_selection(text: str) -> tuple[tuple[int, int], ...]:
    """argparse type of `--rows`: row numbers (from 0) and inclusive ranges, e.g. `3,5-9` →
    ((3, 3), (5, 9)): the ranges as given, never expanded here (`rows_chosen` checks them against
    the file's rows and lists them)."""
    ranges = []
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first, last = int(low), int(high if dash else low)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: {part.strip()!r} is not a row number (from 0) or a range A-B") from None
        if first < 0 or last < first:
            raise argparse.ArgumentTypeError(f"{text!r}: {part.strip()!r} is not a range A-B with 0 ≤ A ≤ B")
        ranges.append((first, last))
    return tuple(ranges)


def rows_chosen(ranges: tuple[tuple[int, int], ...], count: int, source: str) -> tuple[int, ...]:
    """The rows `ranges` (from `row_selection`) choose, sorted, each once; every one must be
    below `count` (the rows of the file `source`), checked before any list is made."""
    if any(last >= count for _, last in ranges):
        first = min(max(first, count) for first, last in ranges if last >= count)  # the first row beyond
        raise InputError(f"--rows {first}: {source} has {count} input row(s), numbered 0 to {count - 1}")
    import numpy as np

    chosen = np.zeros(count, dtype=bool)
    for first, last in ranges:
        chosen[first : last + 1] = True
    return tuple(int(row) for row in np.flatnonzero(chosen))


def count(low: int, high: int | None = None) -> Callable[[str], int]:
    """argparse type: an integer in [low, high] (no upper bound if `high` is None)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low or (high is not None and value > high):
            allowed = f"≥ {low}" if high is None else f"between {low} and {high}"
            raise argparse.ArgumentTypeError(f"{text!r} is not {allowed}")
        return value

    return parse


# ---------------------------------------------------------------------------- output paths
def output_file(path: str | Path, flag: str, root: str | Path | None = None) -> Path:
    """A file that `io.write_atomic` can create or replace: not a directory or a device, with a
    name the file system takes, in a folder that exists (or can be made) and takes new files.
    `root`: the folder the user named when `path` is a name of cardinal's inside it (as in
    `io.write_atomic`): nothing below `root` may be a symbolic link."""
    path = Path(path)
    _fits(path, flag)
    _no_link_below(path, root, flag)
    if path.is_dir():
        raise InputError(f"{flag} {path} is a directory, not a file")
    if path.exists() and not path.is_file():
        raise InputError(f"{flag} {path} exists and is not a regular file")
    _creatable(path, path.parent, flag)
    return path


def output_directory(path: str | Path, flag: str, root: str | Path | None = None) -> Path:
    """A folder that exists and takes new files, or can be created (`root` as in `output_file`)."""
    path = Path(path)
    _fits(path, flag)
    _no_link_below(path, root, flag)
    if path.exists() and not path.is_dir():
        raise InputError(f"{flag} {path} is a file, not a directory")
    _creatable(path, path, flag)
    return path


def _no_link_below(path: Path, root: str | Path | None, flag: str) -> None:
    """No folder or file on the way from `root` (exclusive) to `path` is a symbolic link."""
    if root is None:
        return
    current = Path(root)
    for name in path.relative_to(root).parts:
        current = current / name
        if current.is_symlink():
            raise InputError(f"{flag} {link_refused(current)}")


def _fits(path: Path, flag: str) -> None:
    """Every name in `path` still to be made, and the whole path, fit the file system's limits
    (`io.write_atomic` makes its temporary's name fit whatever the length of `path`'s)."""
    existing = path
    while True:
        with contextlib.suppress(OSError):  # a name too long to look up
            if existing.exists() or existing == existing.parent:
                break
        existing = existing.parent
    for name in path.relative_to(existing).parts:
        size, limit = len(os.fsencode(name)), os.pathconf(existing, "PC_NAME_MAX")
        if size > limit:
            raise InputError(f"{flag} {path}: a name of {size} bytes, longer than the {limit} this file system allows")
    size, limit = len(os.fsencode(str(path))), os.pathconf(existing, "PC_PATH_MAX")
    if size >= limit:
        raise InputError(f"{flag} {path}: a path of {size} bytes, longer than the {limit - 1} this file system allows")


def _creatable(path: Path, folder: Path, flag: str) -> None:
    """`folder` takes new files, or its nearest existing ancestor does (the rest can be made)."""
    existing = folder
    while not existing.exists():
        if existing.is_symlink():
            raise InputError(f"{flag} {path}: {existing} is a broken symbolic link")
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"{flag} {path}: {existing} is a file, not a directory")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        raise InputError(f"{flag} {path}: cannot create files in {existing} ({error.strerror})") from None


# ---------------------------------------------------------------------------- JSON fields
def describe(value: Any) -> str:
    """A short description of a JSON value for messages (never a huge or deep repr)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:40]) + "…"
    if isinstance(value, int):
        text = str(value) if value.bit_length() < 128 else f"an integer of {len(str(abs(value)))} digits"
        return text
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def json_number(value: Any, where: str) -> float:
    """A JSON number (not a Boolean) that is a finite double."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: {describe(value)} is not a number")
    try:
        result = float(value)
    except OverflowError:
        raise InputError(f"{where}: {describe(value)} is too large for a double") from None
    if not math.isfinite(result):
        raise InputError(f"{where}: {describe(value)} is not finite")
    return result


def json_vector(value: Any, where: str, length: int | None = None) -> np.ndarray:
    """A JSON list of numbers → float64 [m] (m = `length` when given)."""
    import numpy as np

    if not isinstance(value, list):
        raise InputError(f"{where} must be a list of numbers, got {describe(value)}")
    if length is not None and len(value) != length:
        raise InputError(f"{where} has {len(value)} entries, expected {length}")
    return np.array([json_number(v, f"{where}[{i}]") for i, v in enumerate(value)], dtype=np.float64)


def json_matrix(value: Any, where: str) -> np.ndarray:
    """A non-empty JSON list of equally long lists of numbers → float64 [rows, columns]."""
    import numpy as np

    if not isinstance(value, list) or not value or not all(isinstance(row, list) for row in value):
        raise InputError(f"{where} must be a non-empty list of rows (lists of numbers), got {describe(value)}")
    rows = [json_vector(row, f"{where}[{i}]") for i, row in enumerate(value)]
    lengths = {len(row) for row in rows}
    if len(lengths) != 1:
        raise InputError(f"{where} is ragged: rows have lengths {sorted(lengths)}")
    return np.stack(rows)


def json_bool(value: Any, where: str) -> bool:
    """A JSON Boolean: `true` or `false`, nothing else ("no", 0 and null are errors)."""
    if not isinstance(value, bool):
        raise InputError(f"{where} must be true or false, got {describe(value)}")
    return value


def json_string(value: Any, where: str, choices: Iterable[str] | None = None) -> str:
    """A JSON string, one of `choices` when given."""
    if not isinstance(value, str):
        raise InputError(f"{where} must be a string, got {describe(value)}")
    if choices is not None and value not in (allowed := tuple(choices)):
        raise InputError(f"{where}: {describe(value)} is not one of {', '.join(allowed)}")
    return value


def json_feature_set(value: Any, where: str, n: int | None = None) -> tuple[int, ...] | None:
    """A JSON list of distinct feature indices (integers ≥ 0, and < n when `n` is given) → the
    sorted tuple; null → None."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise InputError(f"{where} must be a list of feature indices or null, got {describe(value)}")
    for index in value:
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise InputError(f"{where}: {describe(index)} is not a feature index (an integer ≥ 0)")
        if n is not None and index >= n:
            raise InputError(f"{where}: feature {describe(index)} is not an input of the network (0 to {n - 1})")
    twice = [index for index, times in Counter(value).items() if times > 1]
    if twice:
        raise InputError(f"{where} lists feature {twice[0]} twice")
    return tuple(sorted(value))


def json_object(value: Any, where: str) -> dict[str, Any]:
    """A JSON object."""
    if not isinstance(value, dict):
        raise InputError(f"{where} must be an object, got {describe(value)}")
    return value

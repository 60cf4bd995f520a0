"""File input and output shared by every command: JSON, input CSVs, atomic writes, JSON lines.

Every reader raises `InputError` naming the file (and the row, where there is one); every writer
either leaves a complete file or none (`write_atomic`), or appends whole lines (`JsonLines`).
"""

from __future__ import annotations

import csv
import json
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InputError


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not allowed")


def read_json(path: str | Path, what: str = "file") -> Any:
    """Parse a JSON file; NaN and Infinity literals are rejected."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputError(f"{what} {path} not found") from None
    except OSError as error:
        raise InputError(f"cannot read {what} {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"{what} {path} is not text (JSON expected)") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: malformed JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    except ValueError as error:
        raise InputError(f"{path}: malformed JSON: {error}") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write text or bytes to `path` so that readers see either the old file or the whole new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb" if isinstance(data, bytes) else "w") as stream:
            stream.write(data)
        os.chmod(temporary, 0o666 & ~_UMASK)  # mkstemp makes the file private; give it the usual mode
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_inputs(path: str | Path, n_features: int | None = None) -> np.ndarray:
    """Read a numeric CSV, one input per row, optional header: returns float64 [B, n].

    Rows are numbered from 0 in messages, as in the output records (`row`).
    """
    path = Path(path)
    try:
        with path.open(newline="") as stream:
            lines = [row for row in csv.reader(stream) if row and any(cell.strip() for cell in row)]
    except FileNotFoundError:
        raise InputError(f"inputs file {path} not found") from None
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise InputError(f"cannot read inputs file {path}: {error}") from None
    if lines and not _is_numeric_row(lines[0]):
        lines = lines[1:]  # a header row
    if not lines:
        raise InputError(f"{path}: no input rows")
    width = n_features if n_features is not None else len(lines[0])
    values = np.empty((len(lines), width), dtype=np.float64)
    for row, cells in enumerate(lines):
        if len(cells) != width:
            expected = f"{width} (the network's inputs)" if n_features is not None else f"{width} (as row 0)"
            raise InputError(f"{path}: row {row} has {len(cells)} values, expected {expected}")
        for feature, cell in enumerate(cells):
            try:
                value = float(cell)
            except ValueError:
                raise InputError(f"{path}: row {row}, feature {feature}: {cell.strip()!r} is not a number") from None
            if not math.isfinite(value):
                raise InputError(f"{path}: row {row}, feature {feature} is {value}")
            values[row, feature] = value
    return values


def _is_numeric_row(cells: list[str]) -> bool:
    try:
        for cell in cells:
            float(cell)
    except ValueError:
        return False
    return True


class JsonLines:
    """Append-only JSON-lines log: each record is written whole and flushed to disk at once, so
    an interrupted run loses no finished record. A torn last line (a kill mid-write) is dropped
    on reading and truncated before the next append."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def read(self) -> list[dict[str, Any]]:
        return list(self._records())

    def _records(self) -> Iterator[dict[str, Any]]:
        if not self.path.exists():
            return
        with self.path.open() as stream:
            for line in stream:
                if not line.endswith("\n"):
                    return  # torn final line
                yield json.loads(line)

    def _repair(self) -> None:
        """Cut a torn final line so the next append starts on a fresh line."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with self.path.open("r+b") as stream:
            stream.seek(-1, os.SEEK_END)
            if stream.read(1) == b"\n":
                return
            data = self.path.read_bytes()
            stream.truncate(data.rfind(b"\n") + 1)

    def append(self, record: dict[str, Any]) -> None:
        self.append_many([record])

    def append_many(self, records: list[dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair()
        text = "".join(json.dumps(record) + "\n" for record in records)
        with self.path.open("a") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())

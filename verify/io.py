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
    """Parse a JSON file; NaN and Infinity literals are rejected, and so are files that are not
    UTF-8 text or nest too deeply for Python's parser."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"{what} {path} not found") from None
    except OSError as error:
        raise InputError(f"cannot read {what} {path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise InputError(f"{what} {path} is not text (JSON expected; byte {error.start} is not UTF-8)") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: malformed JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    except RecursionError:
        raise InputError(f"{path}: malformed JSON: nested too deeply") from None
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


def read_inputs(path: str | Path, n_features: int | None = None, header: bool | None = None) -> np.ndarray:
    """Read a numeric CSV, one input per row: returns float64 [B, n].

    `header`: True skips the first row, False reads it as data, None (the default) takes it as a
    header only when none of its cells is a number, so a typo in a first data row is an error,
    never a silently dropped row. Rows are numbered from 0 after any header, as in the output
    records (`row`); messages give the file's line too.
    """
    path = Path(path)
    rows: list[tuple[int, list[str]]] = []  # (line number, cells)
    try:
        with path.open(newline="", encoding="utf-8-sig") as stream:
            reader = csv.reader(stream)
            for cells in reader:
                if any(cell.strip() for cell in cells):
                    rows.append((reader.line_num, cells))
    except FileNotFoundError:
        raise InputError(f"inputs file {path} not found") from None
    except UnicodeDecodeError as error:
        raise InputError(f"inputs file {path}: not a text file (byte {error.start} is not UTF-8)") from None
    except (OSError, csv.Error) as error:
        raise InputError(f"cannot read inputs file {path}: {getattr(error, 'strerror', None) or error}") from None
    if rows and (header or (header is None and not any(_is_number(cell) for cell in rows[0][1]))):
        line, names = rows.pop(0)
        expected = n_features if n_features is not None else (len(rows[0][1]) if rows else len(names))
        if len(names) != expected:
            raise InputError(f"{path}: the header (line {line}) has {len(names)} columns, the rows need {expected}")
    if not rows:
        raise InputError(f"{path}: no input rows")
    width = n_features if n_features is not None else len(rows[0][1])
    values = np.empty((len(rows), width), dtype=np.float64)
    for row, (line, cells) in enumerate(rows):
        where = f"{path}: row {row} (line {line})"
        if len(cells) != width:
            expected = f"{width} (the network's inputs)" if n_features is not None else f"{width} (as row 0)"
            raise InputError(f"{where} has {len(cells)} values, expected {expected}")
        for column, cell in enumerate(cells):
            try:
                value = float(cell)
            except ValueError:
                shown = cell.strip() if len(cell.strip()) <= 40 else cell.strip()[:40] + "…"
                raise InputError(f"{where}, column {column}: {shown!r} is not a number") from None
            if not math.isfinite(value):
                raise InputError(f"{where}, column {column} is {value} (inputs must be finite)")
            values[row, column] = value
    return values


def _is_number(cell: str) -> bool:
    try:
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
        """The records in order; a line that is not a JSON object (other than a torn last line)
        raises `InputError` naming the file and the line."""
        try:
            with self.path.open("rb") as stream:
                for number, line in enumerate(stream, start=1):
                    if not line.endswith(b"\n"):
                        return  # torn final line
                    yield self._parse(line, number)
        except FileNotFoundError:
            return
        except OSError as error:
            raise InputError(f"cannot read {self.path}: {error.strerror}") from None

    def _parse(self, line: bytes, number: int) -> dict[str, Any]:
        try:
            record = json.loads(line.decode("utf-8"), parse_constant=_reject_constant)
        except (RecursionError, ValueError) as error:
            if isinstance(error, UnicodeDecodeError):
                reason = "not UTF-8 text"
            elif isinstance(error, json.JSONDecodeError):
                reason = f"{error.msg} at column {error.colno}"
            else:
                reason = "nested too deeply" if isinstance(error, RecursionError) else str(error)
            raise InputError(f"{self.path} line {number}: not a JSON record ({reason})") from None
        if not isinstance(record, dict):
            raise InputError(f"{self.path} line {number}: not a JSON object")
        return record

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

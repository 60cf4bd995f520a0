"""File input and output shared by every command: the reading gate, JSON, input CSVs, atomic
writes, JSON lines.

Every reader of a user's file goes through one gate (`open_input`, `read_input`): the file must be
a regular file (a FIFO, a device or a directory is refused before anything is read, also behind a
link) of at most a stated size (`MAX_NETWORK_BYTES`, `MAX_DATA_BYTES`; docs/formats.md,
"Limits"). Every reader raises `InputError` naming the file (and the row or line, where there is
one); every writer either leaves a complete file or none (`write_atomic`), or appends whole lines
(`JsonLines`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from .errors import InputError

# ---------------------------------------------------------------------------- the reading gate
MiB = 1 << 20
MAX_NETWORK_BYTES = 512 * MiB  # a network file (JSON, ONNX, torch), a case file, a torch archive's records unpacked
MAX_DATA_BYTES = 1024 * MiB  # every other file: inputs, domains, JSON lines, training data (a zip's members unpacked)
MAX_INTEGER_DIGITS = 4300  # a longer integer literal in JSON is refused (Python's own limit for int())
_NOT_REGULAR = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def size_text(size: int) -> str:
    """A byte count for messages: `512 MiB`, `1.5 GiB`, `17 bytes`."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.4g} {unit}"
    return f"{size} bytes"


def check_size(path: str | Path, what: str, size: int, limit: int, unpacked: bool = False) -> None:
    """Raise `InputError` if `size` bytes (of `path`, or `unpacked` from it) exceed `limit`."""
    if size > limit:
        holds = f"{'unpacks to' if unpacked else 'holds'} {size_text(size)}"
        raise InputError(f"{what} {path} {holds}, over the limit of {size_text(limit)} (docs/formats.md, Limits)")


def _require_regular(path: Path, what: str, status: os.stat_result) -> None:
    if stat.S_ISREG(status.st_mode):
        return
    kind = next((name for test, name in _NOT_REGULAR if test(status.st_mode)), "not a plain file")
    link = f" (a link to {os.path.realpath(path)})" if path.is_symlink() else ""
    raise InputError(f"{what} {path}{link} is {kind}, not a regular file")


@contextmanager
def open_input(path: str | Path, what: str, limit: int) -> Iterator[BinaryIO]:
    """`path` opened for binary reading after the checks every reader of a user's file makes: it
    exists, it is a regular file once links are followed (a FIFO, a device, a directory or a link
    to one is refused: a device is never opened, a FIFO never waited on), and it holds at most
    `limit` bytes. The checks are repeated on the opened descriptor, so a file swapped for
    another kind in between is not read either. `what` names the file in messages ("inputs file").
    """
    path = Path(path)
    try:
        _require_regular(path, what, os.stat(path))
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(f"{what} {path} not found") from None
    except OSError as error:
        raise InputError(f"cannot read {what} {path}: {error.strerror}") from None
    with os.fdopen(descriptor, "rb") as stream:
        status = os.fstat(descriptor)
        _require_regular(path, what, status)
        check_size(path, what, status.st_size, limit)
        os.set_blocking(descriptor, True)
        yield stream


def read_input(path: str | Path, what: str, limit: int) -> bytes:
    """The bytes of a user's file, through `open_input`'s checks. Reading stops past `limit` bytes,
    so a file that grows while it is read (or a kernel file that reports size 0) is refused too."""
    with open_input(path, what, limit) as stream:
        expected = os.fstat(stream.fileno()).st_size
        parts: list[bytes] = []
        total = 0
        try:
            while total <= limit and (part := stream.read(max(expected - total, 0) + (1 << 16))):
                parts.append(part)
                total += len(part)
        except OSError as error:
            raise InputError(f"cannot read {what} {path}: {error.strerror}") from None
    check_size(path, what, total, limit)
    return b"".join(parts)


# ---------------------------------------------------------------------------- JSON
def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not allowed")


def _integer(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INTEGER_DIGITS:
        raise ValueError(f"an integer of {digits} digits (at most {MAX_INTEGER_DIGITS} are read)")
    return int(text)


def parse_json(text: str, where: str, one_line: bool = False) -> Any:
    """Parse JSON text; `InputError` "`where`: malformed JSON ..." for malformed text, the NaN and
    Infinity literals, an integer longer than `MAX_INTEGER_DIGITS` digits, and nesting deeper than
    Python's parser takes. A number literal too large for a double (1e999) parses as inf: the
    typed readers (`verify.validate`) refuse it, naming the field. `one_line`: `where` names the
    line (JSON lines), so messages give the column alone."""
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_int=_integer)
    except json.JSONDecodeError as error:
        at = f"column {error.colno}" if one_line else f"line {error.lineno} column {error.colno}"
        raise InputError(f"{where}: malformed JSON at {at}: {error.msg}") from None
    except RecursionError:
        raise InputError(f"{where}: malformed JSON: nested too deeply") from None
    except ValueError as error:
        raise InputError(f"{where}: malformed JSON: {error}") from None


def decode_text(data: bytes, path: str | Path, what: str) -> str:
    """UTF-8 text (a leading byte-order mark dropped); `InputError` naming the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(f"{what} {path} is not text (byte {error.start} is not UTF-8)") from None


def read_json(path: str | Path, what: str = "file", limit: int = MAX_DATA_BYTES) -> Any:
    """Parse a JSON file of at most `limit` bytes, through the reading gate (`parse_json` says what
    else is refused)."""
    return parse_json(decode_text(read_input(path, what, limit), path, what), str(path))


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
    text = decode_text(read_input(path, "inputs file", MAX_DATA_BYTES), path, "inputs file")
    rows: list[tuple[int, list[str]]] = []  # (line number, cells)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        for cells in reader:
            if any(cell.strip() for cell in cells):
                rows.append((reader.line_num, cells))
    except csv.Error as error:
        raise InputError(f"{path}: line {reader.line_num}: not CSV ({error})") from None
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


def json_lines(data: bytes, where: Callable[[int], str], torn_end: bool = False) -> Iterator[tuple[int, Any]]:
    """(line number from 1, parsed value) of each non-blank line of JSON-lines bytes. Lines end at
    a line feed only (a carriage return before it is whitespace; a byte-order mark may open the
    first line). With `torn_end`, a last line without its line feed is a write cut short and is
    dropped. Errors name `where(number)` (`parse_json` says what else is refused)."""
    lines = data.split(b"\n")
    if torn_end or not lines[-1].strip():
        lines.pop()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as error:
            raise InputError(f"{where(number)}: not text (byte {error.start} of the line is not UTF-8)") from None
        yield number, parse_json(text, where(number), one_line=True)


class JsonLines:
    """Append-only JSON-lines log: each record is written whole and flushed to disk at once, so
    an interrupted run loses no finished record. A torn last line (a kill mid-write) is dropped
    on reading and truncated before the next append."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def read(self) -> list[dict[str, Any]]:
        return list(self._records())

    def _records(self) -> Iterator[dict[str, Any]]:
        """The records in order (none if the file does not exist); a line that is not a JSON
        object (other than a torn last line) raises `InputError` naming the file and the line."""
        if not os.path.lexists(self.path):
            return
        data = read_input(self.path, "JSON-lines file", MAX_DATA_BYTES)
        for number, record in json_lines(data, lambda number: f"{self.path} line {number}", torn_end=True):
            if not isinstance(record, dict):
                raise InputError(f"{self.path} line {number}: not a JSON object")
            yield record

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

"""File input and output shared by every command: the reading gate, JSON, input CSVs, atomic
writes, JSON lines.

Every reader of a user's file goes through one gate (`open_input`, `read_input`): the file must be
a regular file (a FIFO, a device or a directory is refused before anything is read, also behind a
link) of at most a stated size (`MAX_NETWORK_BYTES`, `MAX_DATA_BYTES`; docs/formats.md,
"Limits"). Every reader raises `InputError` naming the file (and the row or line, where there is
one); every writer either leaves a complete file or none (`write_atomic`), or appends whole lines
(`JsonLines`), never writes through a symbolic link inside the folder the user named
(`open_folder`), and says in one `InputError` line why a write failed ("no space left on device
writing FILE").
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import math
import os
import secrets
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from .errors import InputError

if TYPE_CHECKING:
    import numpy as np  # imported where used: `cardinal --help` loads no numpy

# ---------------------------------------------------------------------------- the reading gate
MiB = 1 << 20
MAX_NETWORK_BYTES = 512 * MiB  # a network file (JSON, ONNX, torch), a case file, a torch archive's records unpacked
MAX_DATA_BYTES = 1024 * MiB  # every other file: inputs, domains, JSON lines, training data (a zip's members unpacked)
STDIN = "-"  # the file name that means standard input (`--inputs -`)
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


def read_stdin(what: str, limit: int) -> bytes:
    """The bytes of standard input (`-` in place of a file name), which must be text: refused in
    one line, before or while reading, when it is closed, a device other than a terminal
    (`< /dev/zero`), a regular file over `limit` bytes, holds a NUL byte (`cat /dev/zero |`: at
    its first block), or passes `limit` bytes."""
    where = "standard input"
    stream = sys.stdin
    closed = InputError(f"cannot read {what} from {where}: it is closed")
    if stream is None:  # Python found descriptor 0 closed at startup (`<&-`)
        raise closed
    try:
        descriptor = stream.fileno()
    except io.UnsupportedOperation:
        descriptor = None  # a stream in memory (a test's): nothing to check before reading
    except ValueError:
        raise closed from None
    if descriptor is not None:
        try:
            status = os.fstat(descriptor)
        except OSError:
            raise closed from None
        if stat.S_ISREG(status.st_mode):
            check_size(Path(f"<{where}>"), what, status.st_size, limit)
        elif not (stat.S_ISFIFO(status.st_mode) or stat.S_ISSOCK(status.st_mode) or os.isatty(descriptor)):
            kind = next((name for test, name in _NOT_REGULAR if test(status.st_mode)), "not a plain file")
            raise InputError(f"{what} on {where}: it is {kind}, not a file, a pipe or a terminal")
    data = bytearray()
    while len(data) <= limit:
        try:
            part = stream.buffer.read(1 << 16)
        except OSError as error:
            raise InputError(f"cannot read {what} from {where}: {error.strerror}") from None
        except ValueError:  # closed meanwhile
            raise closed from None
        if b"\0" in part:
            raise InputError(f"{what} on {where} holds a NUL byte at offset {len(data) + part.index(0)}: not text")
        if not part:
            break
        data += part
    check_size(Path(f"<{where}>"), what, len(data), limit)
    return bytes(data)


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
    typed readers (`cardinal.validate`) refuse it, naming the field. `one_line`: `where` names the
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


# ---------------------------------------------------------------------------- writing
# What a command writes goes into a folder the user named (`--out`, `--cases`, the folder of an
# output file): links in that path are followed, as by any program. What cardinal names inside it
# (campaign files, case files, figures, temporaries) is made and opened relative to an open
# descriptor of that folder and never through a symbolic link: a link planted there is refused,
# so nothing is written outside the folder the user chose.


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """Turn an `OSError` met while writing `path` into a one-line `InputError`, e.g. "no space
    left on device writing PATH"."""
    try:
        yield
    except OSError as error:
        reason = error.strerror or str(error)
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise InputError(f"{reason[0].lower()}{reason[1:]} writing {path}") from None
        raise InputError(f"cannot write {path}: {reason}") from None


def link_refused(path: Path) -> InputError:
    """The refusal of a symbolic link found where cardinal writes a file or folder of its own."""
    return InputError(f"{path} is a symbolic link: cardinal writes nothing through a link inside its output folder")


def open_folder(path: str | Path, root: str | Path | None = None) -> int:
    """An open descriptor (`O_DIRECTORY`) of the folder `path`, made with its parents where
    missing; the caller closes it. `root` is the folder the user named, `path` itself or an
    ancestor: links on the way to `root` are followed, and each folder below it is opened without
    following a link (a symbolic link or a file there raises `InputError`)."""
    path = Path(path)
    root = path if root is None else Path(root)
    with writing(root):
        try:
            os.makedirs(root, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise InputError(f"{root} is not a directory") from None
        descriptor = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    current = root
    try:
        for name in path.relative_to(root).parts:
            current = current / name
            with writing(current):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=descriptor)
                try:
                    inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=descriptor)
                except NotADirectoryError:
                    if stat.S_ISLNK(os.stat(name, dir_fd=descriptor, follow_symlinks=False).st_mode):
                        raise link_refused(current) from None
                    raise InputError(f"{current} is a file, not a directory") from None
            os.close(descriptor)
            descriptor = inner
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def open_regular(folder: int, path: Path, flags: int) -> int:
    """Open `path.name` inside the open `folder` without following a link (`O_NOFOLLOW`; and
    `O_NONBLOCK`, so that a FIFO cannot hang the call); a new file gets the usual permissions. A
    link, a folder or anything else that is not a regular file raises `InputError`; `path` names
    the file in messages."""
    with writing(path):
        try:
            descriptor = os.open(path.name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666, dir_fd=folder)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise link_refused(path) from None
            if error.errno == errno.EISDIR:
                raise InputError(f"{path} is a directory, not a file") from None
            raise
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            os.close(descriptor)
            raise InputError(f"{path} exists and is not a regular file")
    return descriptor


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def _temporary(folder: int, path: Path) -> tuple[int, str]:
    """A new file `.NAME.XXXXXXXX.tmp` beside `path` (`O_EXCL`, never through a link), with NAME
    cut so that the whole name fits the file system's limit: (descriptor, its name)."""
    limit = os.fpathconf(folder, "PC_NAME_MAX") - len("..XXXXXXXX.tmp")
    stem = os.fsencode(path.name)[:limit].decode("utf-8", "ignore")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        name = f".{stem}.{secrets.token_hex(4)}.tmp"
        with contextlib.suppress(FileExistsError):  # 2^32 names: taken by chance only
            return os.open(name, flags, 0o666, dir_fd=folder), name


def write_atomic(path: str | Path, data: str | bytes, *, root: str | Path | None = None) -> None:
    """Write text (UTF-8) or bytes to `path` so that readers see either the old file or the whole
    new one: a temporary beside it, flushed to disk, then renamed over it. On failure nothing is
    left behind and `InputError` says why in one line ("no space left on device writing PATH").

    Without `root`, the user named `path`: a symbolic link there is followed (the file it points
    to is replaced), as are links in its folders. With `root` (the folder the user named, an
    ancestor of `path`), `path` is a name of cardinal's: a link below `root` is refused.
    The file gets the usual permissions (0o666 less the umask)."""
    path = Path(path)
    if root is None:
        path = Path(os.path.realpath(path))
    data = data.encode() if isinstance(data, str) else data
    folder = open_folder(path.parent, root)
    try:
        with writing(path):
            try:
                kind = os.stat(path.name, dir_fd=folder, follow_symlinks=False).st_mode
            except FileNotFoundError:
                kind = stat.S_IFREG
            if stat.S_ISLNK(kind):
                raise link_refused(path)
            if not stat.S_ISREG(kind):
                raise InputError(f"{path} exists and is not a regular file")
            descriptor, temporary = _temporary(folder, path)
            try:
                try:
                    _write_all(descriptor, data)
                    os.fsync(descriptor)
                finally:
                    os.close(descriptor)
                os.replace(temporary, path.name, src_dir_fd=folder, dst_dir_fd=folder)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=folder)
                raise
    finally:
        os.close(folder)


def write_figure(path: str | Path, figure: Any, dpi: int, *, root: str | Path | None = None) -> None:
    """A matplotlib figure as a PNG file, written as `write_atomic` writes (`root` alike)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    write_atomic(path, buffer.getvalue(), root=root)


def read_inputs(path: str | Path, n_features: int | None = None, header: bool | None = None) -> np.ndarray:
    """Read a numeric CSV, one input per row: returns float64 [B, n].

    `header`: True skips the first row, False reads it as data, None (the default) takes it as a
    header only when none of its cells is a number, so a typo in a first data row is an error,
    never a silently dropped row. Rows are numbered from 0 after any header, as in the output
    records (`row`); messages give the file's line too. `path` "-" reads standard input.
    """

    if str(path) == STDIN:
        where = Path("<standard input>")
        text = decode_text(read_stdin("inputs", MAX_DATA_BYTES), where, "inputs")
        return _parse_inputs(where, io.StringIO(text, newline=""), n_features, header)
    path = Path(path)
    with open_input(path, "inputs file", MAX_DATA_BYTES) as stream:
        return _parse_inputs(path, _text_lines(stream, path, "inputs file", MAX_DATA_BYTES), n_features, header)


def _text_lines(stream: BinaryIO, path: Path, what: str, limit: int) -> Iterator[str]:
    """The lines of an opened file as text, read one at a time (a leading byte-order mark
    dropped): `decode_text`'s message for a byte that is not UTF-8 (its offset in the file), and
    `check_size`'s once more than `limit` bytes have been read."""
    offset = 0
    try:
        for raw in stream:
            check_size(path, what, offset + len(raw), limit)
            try:
                yield raw.decode("utf-8-sig" if offset == 0 else "utf-8")
            except UnicodeDecodeError as error:
                raise InputError(f"{what} {path} is not text (byte {offset + error.start} is not UTF-8)") from None
            offset += len(raw)
    except OSError as error:
        raise InputError(f"cannot read {what} {path}: {error.strerror}") from None


def _parse_inputs(path: Path, lines: Iterable[str], n_features: int | None, header: bool | None) -> np.ndarray:
    """`read_inputs` on the text `lines` of `path` (a file's, read as parsed, or standard input's)."""
    import numpy as np

    reader = csv.reader(lines)
    blocks: list[np.ndarray] = []
    block: np.ndarray | None = None
    filled, count, width = 0, 0, n_features
    pending: tuple[int, list[str]] | None = None  # a header row, checked once the width is known
    first = True
    try:
        for cells in reader:
            if not any(cell.strip() for cell in cells):
                continue
            line = reader.line_num
            if first:
                first = False
                if header or (header is None and not any(_is_number(cell) for cell in cells)):
                    pending = (line, cells)
                    continue
            if width is None:
                width = len(cells)
            if pending is not None:
                _check_header(path, pending, width)
                pending = None
            if block is None or filled == len(block):
                block, filled = np.empty((max(1, min(_ROW_BLOCK, _BLOCK_VALUES // max(1, width))), width)), 0
                blocks.append(block)
            _parse_row(path, count, line, cells, width, n_features, block[filled])
            filled, count = filled + 1, count + 1
    except csv.Error as error:
        raise InputError(f"{path}: line {reader.line_num}: not CSV ({error})") from None
    if pending is not None:
        _check_header(path, pending, n_features if n_features is not None else len(pending[1]))
    if count == 0:
        raise InputError(f"{path}: no input rows")
    if len(blocks) == 1:
        return blocks[0][:count].copy()
    return np.concatenate(blocks)[:count]


_ROW_BLOCK = 4096  # rows of doubles allocated at once by `read_inputs`...
_BLOCK_VALUES = 1 << 20  # ...and at most this many values (wide rows: fewer rows per block)


def _check_header(path: Path, header: tuple[int, list[str]], expected: int) -> None:
    line, names = header
    if len(names) != expected:
        raise InputError(f"{path}: the header (line {line}) has {len(names)} columns, the rows need {expected}")


def _parse_row(path: Path, row: int, line: int, cells: list[str], width: int, n_features: int | None,
               out: np.ndarray) -> None:
    """Row `row` (file line `line`) of an inputs CSV into `out` [width], with read_inputs' messages."""
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
        out[column] = value


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

    def __init__(self, path: str | Path, root: str | Path | None = None) -> None:
        """`root`: the folder the user named, an ancestor of the log's folder, below which no
        link is followed (`open_folder`); None: the log's folder itself."""
        self.path = Path(path)
        self.root = root

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

    def append(self, record: dict[str, Any]) -> None:
        self.append_many([record])

    def append_many(self, records: list[dict[str, Any]]) -> None:
        """Append whole lines, flushed to disk. The folder is made if missing (links on the way
        to `root` followed, none below it); the log itself is never opened through a link. If the disk fills, the log is
        cut back to where it was and `InputError` says so: the records before stay intact."""
        text = "".join(json.dumps(record, allow_nan=False) + "\n" for record in records).encode()  # JSON, never Infinity
        folder = open_folder(self.path.parent, self.root)
        try:
            descriptor = open_regular(folder, self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
            try:
                with writing(self.path):
                    end = _whole_lines(descriptor)
                    try:
                        _write_all(descriptor, text)
                        os.fsync(descriptor)
                    except OSError:
                        with contextlib.suppress(OSError):
                            os.ftruncate(descriptor, end)
                        raise
            finally:
                os.close(descriptor)
        finally:
            os.close(folder)


def _whole_lines(descriptor: int, block: int = 1 << 16) -> int:
    """Cut a torn final line (a kill mid-write) from the open log, so that the next append starts
    on a fresh line; returns the new length."""
    size = os.fstat(descriptor).st_size
    if size == 0 or os.pread(descriptor, 1, size - 1) == b"\n":
        return size
    end = size
    while end > 0:
        start = max(0, end - block)
        cut = os.pread(descriptor, end - start, start).rfind(b"\n")
        if cut >= 0:
            end = start + cut + 1
            break
        end = start
    os.ftruncate(descriptor, end)
    return end

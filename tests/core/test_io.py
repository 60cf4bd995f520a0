"""`cardinal.io`: atomic writes leave whole files with the usual permissions; reads are bounded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cardinal.errors import InputError
from cardinal.io import read_input, write_atomic


def test_write_atomic_replaces_whole_and_uses_the_umask(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "out.json"
    write_atomic(target, "first\n")
    write_atomic(target, "second\n")
    assert target.read_text() == "second\n"
    assert [p.name for p in target.parent.iterdir()] == ["out.json"]  # no temporary left behind
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask


def test_read_input_stops_at_the_limit_even_where_the_size_is_not_told(tmp_path: Path) -> None:
    """The limit holds for the size the file reports and for what reading returns: a kernel file
    reports size 0 but has content (issue 24: /dev/zero and the like were read until memory ran out)."""
    path = tmp_path / "x.csv"
    path.write_bytes(b"1" * 100)
    assert read_input(path, "inputs file", 100) == b"1" * 100
    with pytest.raises(InputError, match=r"inputs file .*x.csv holds 100 bytes, over the limit of 99 bytes"):
        read_input(path, "inputs file", 99)
    kernel = Path("/proc/self/status")
    if not kernel.is_file() or kernel.stat().st_size != 0:
        pytest.skip("no /proc file that reports size 0 here")
    with pytest.raises(InputError, match=r"status holds [\d.]+ (bytes|KiB), over the limit of 10 bytes"):
        read_input(kernel, "file", 10)

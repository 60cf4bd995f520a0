"""`verify.io`: atomic writes leave whole files with the usual permissions."""

from __future__ import annotations

import os
from pathlib import Path

from cardinal.verify.io import write_atomic


def test_write_atomic_replaces_whole_and_uses_the_umask(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "out.json"
    write_atomic(target, "first\n")
    write_atomic(target, "second\n")
    assert target.read_text() == "second\n"
    assert [p.name for p in target.parent.iterdir()] == ["out.json"]  # no temporary left behind
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask

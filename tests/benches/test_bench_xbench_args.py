"""`python -m bench.xbench build`: a bad --out, --rows or --time-limit is refused (exit 2, one
line naming the flag) before any network is made or question asked: the steps that do the work
are tripwires here, and the file or folder named stays as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import xbench


def _tripwire(*args: object, **kwargs: object) -> None:
    raise AssertionError("xbench started work before its arguments were checked")


@pytest.fixture(autouse=True)
def _no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(xbench, "family_parts", _tripwire)
    monkeypatch.setattr(xbench, "write_folder", _tripwire)


def _refused(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    with pytest.raises(SystemExit) as exited:
        xbench.main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    return err.strip().splitlines()[-1]


def test_an_out_that_is_a_file_is_refused_first(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    target = tmp_path / "taken"
    target.write_text("mine")
    line = _refused(["build", "--out", str(target), "--families", "suites"], capsys)
    assert line == f"xbench: error: --out {target} is a file, not a directory"
    assert target.read_text() == "mine"


def test_an_out_that_holds_files_is_refused_first(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "old.txt").write_text("kept")
    line = _refused(["build", "--out", str(tmp_path)], capsys)
    assert line.startswith(f"xbench: error: --out {tmp_path} exists and is not empty")
    assert [p.name for p in tmp_path.iterdir()] == ["old.txt"]


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--rows", "-1"], "argument --rows: '-1' is not ≥ 1"),
        (["--rows", "0"], "argument --rows: '0' is not ≥ 1"),
        (["--rows", "two"], "argument --rows: 'two' is not an integer"),
        (["--time-limit", "0"], "argument --time-limit: '0' is not positive"),
        (["--time-limit", "nan"], "argument --time-limit: 'nan' is not a finite number"),
    ],
)
def test_a_bad_count_is_refused_before_any_work(flags: list[str], words: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    line = _refused(["build", "--out", str(tmp_path / "new"), *flags], capsys)
    assert line.endswith(words), line
    assert not (tmp_path / "new").exists()

"""`read_inputs` turns each CSV row into doubles as it reads it: the same array as numpy's own
reader, the same messages, and a peak (tracemalloc, deterministic) under twice the file's size: the
file is read line by line, and no list of every row's cells is kept."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from cardinal.errors import InputError
from cardinal.io import read_inputs


@pytest.mark.parametrize(("rows", "header"), [(1, False), (5, True), (4096, False), (4097, True), (9000, False)])
def test_the_rows_read_are_numpys(rows: int, header: bool, tmp_path: Path) -> None:
    X = np.round(np.random.default_rng(rows).uniform(-3, 3, (rows, 7)), 5)
    path = tmp_path / "x.csv"
    np.savetxt(path, X, delimiter=",", fmt="%.5f", header="a,b,c,d,e,f,g" if header else "", comments="")
    expected = np.loadtxt(path, delimiter=",", skiprows=1 if header else 0, ndmin=2)
    got = read_inputs(path, 7)
    assert got.dtype == np.float64 and got.shape == (rows, 7)
    assert np.array_equal(got, expected)
    assert np.array_equal(read_inputs(path), expected)  # the width taken from the first row


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a,b\n1,2\n", r"the header \(line 1\) has 2 columns, the rows need 3$"),
        ("1,2,3\n\n4,5\n", r"row 1 \(line 3\) has 2 values, expected 3 \(the network's inputs\)$"),
        ("1,2,3\n4,x,6\n", r"row 1 \(line 2\), column 1: 'x' is not a number$"),
        ("a,b,c\n", r"no input rows$"),
        ("1,2,inf\n", r"row 0 \(line 1\), column 2 is inf \(inputs must be finite\)$"),
    ],
)
def test_bad_rows_are_named_as_before(text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        read_inputs(path, 3)


def test_the_peak_is_a_small_multiple_of_the_file(tmp_path: Path) -> None:
    """20,000 rows × 50 values (9 MB of text): the peak stays under twice the file's size and near 16
    bytes per value (the blocks, then the array they are joined into) — the file's text is never held whole (holding it took the peak past 6 times the
    file's size, and the list of every row's cells the reader once kept past 13 times)."""
    X = np.round(np.random.default_rng(0).uniform(0, 1, (20_000, 50)), 6)
    path = tmp_path / "m.csv"
    np.savetxt(path, X, delimiter=",", fmt="%.6f")
    tracemalloc.start()
    try:
        got = read_inputs(path, 50)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert np.array_equal(got, X)
    assert peak < 2 * path.stat().st_size, (peak, path.stat().st_size)
    assert peak < 20 * X.size, (peak, X.size)

"""bench/traversals.py: the MNIST rows it reads, and its table against deletion run directly."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from cardinal.solvers.deletion import deletion
from cardinal.solvers.oracle import SetOracle
from cardinal.verify.generate import random_network

from bench import traversals
from cardinal.domain import Domain
from cardinal.problem import Problem


def test_mnist_rows_are_label_then_pixels_over_255() -> None:
    """The first rows of ERAN's file, read with the csv module: the label, then 784 pixels / 255."""
    path = traversals.DATA / "eran" / "mnist_test.csv"
    if not path.exists():
        pytest.skip("the shared MNIST file is not on this machine")
    images, labels = traversals.mnist_images(2, path)
    with path.open() as handle:
        rows = [row for _, row in zip(range(2), csv.reader(handle), strict=False)]
    assert images.shape == (2, 784) and labels.tolist() == [int(float(row[0])) for row in rows]
    for image, row in zip(images, rows, strict=True):
        assert image.tolist() == [int(v) / 255 for v in row[1:]]  # each a correctly rounded quotient
        assert image.min() >= 0 and image.max() <= 1 and image.max() > 0.9


def test_the_table_gives_each_traversals_questions_and_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On small random networks (in place of the models), each row's questions, sizes and "same
    set" are those of deletion called directly with a fresh oracle."""
    rng = np.random.default_rng(3)
    net = random_network(rng, 5, (6,), "relu", monotone=False, outputs=3)
    cases = [
        ("tiny", f"image {i}, {kind}", Problem.make(net, x, kind, Domain.unit(5).ball(x, 0.3)))
        for i, x in enumerate(rng.random((2, 5)))
        for kind in ("abductive", "contrastive")
    ]
    monkeypatch.setattr(traversals, "problems", lambda args: iter(cases))
    out = tmp_path / "traversals.md"
    traversals.main(["--models", "digits-mlp", "--time-limit", "20", "--out", str(out)])
    rows = [line.split(" | ") for line in out.read_text().splitlines() if line.startswith("| tiny")]
    assert len(rows) == len(cases)
    with SetOracle() as oracle:
        for row, (_, _, problem) in zip(rows, cases, strict=True):
            answers = [deletion(problem, oracle, 20.0, t) for t in ("sensitivity", "quickxplain")]
            sizes = ["—" if a.features is None else str(len(a.features)) for a in answers]
            assert row[3:5] == [f"{a.status}, {size}" for a, size in zip(answers, sizes, strict=True)]
            assert [cell.split(" (")[0] for cell in row[5:7]] == [str(a.queries) for a in answers]
            same = answers[0].features == answers[1].features and answers[0].status == answers[1].status
            assert row[7].rstrip(" |") == ("yes" if same else "no")

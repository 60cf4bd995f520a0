"""bench/subset_minimal.py on one small model: its records against brute force (exact outcomes only)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.subset_minimal import EXPLAINERS, cases, main
from cardinal.problem import Problem
from tests.bruteforce import DECREASING, Reference, monotone_minimum


def _valid(problem: Problem, features: list[int]) -> bool:
    """Whether `features` is an explanation of the sign-monotone problem, by the shortcut on the
    brute-force reference (nothing of cardinal's exact code): CXp — x with the set at the
    counterpoint flips; AXp — the counterpoint with the set at x keeps p(x)."""
    reference = Reference(problem.net)
    p = reference.prediction(problem.x, problem.threshold)
    counterpoint = np.where((p == 1) != (reference.directions == DECREASING), problem.domain.lower, problem.domain.upper)
    inside = np.isin(np.arange(problem.n), features)
    if problem.kind == "contrastive":
        return int(reference.predictions(np.where(inside, counterpoint, problem.x)[None, :], problem.threshold)[0]) != p
    return int(reference.predictions(np.where(inside, problem.x, counterpoint)[None, :], problem.threshold)[0]) == p


def test_credit_signs_row_against_brute_force(tmp_path: Path) -> None:
    """credit-signs (8 features, sign-monotone), row 0, its three balls, both kinds: the minimum is
    proved and equals brute force's (or no CXp exists for both); the minimum's set and every
    explainer's set are exactly valid, none smaller than the minimum; greedy and the three
    traversals all ran; the table and the figure were written."""
    work, out = tmp_path / "work", tmp_path / "out"
    main(["--rows", "1", "--models", "credit-signs", "--time-limit", "20", "--work", str(work), "--out", str(out)])
    records = [json.loads(line) for line in (out / "subset_minimal.jsonl").read_text().splitlines()]
    problems = [Problem.make(c.net, c.x, c.kind, c.domain, c.threshold) for c in cases("credit-signs", work, 1)]
    assert len(records) == len(problems) == 6
    for record, problem in zip(records, problems, strict=True):
        assert (record["kind"], record["n"]) == (problem.kind, 8)
        truth = monotone_minimum(problem)
        minimum = record["minimum"]
        assert set(record["explainers"]) == set(EXPLAINERS)
        if truth is None:
            assert minimum["none_exists"] and not minimum["proved"]
            assert all(answer["features"] is None for answer in record["explainers"].values())
            continue
        assert minimum["proved"] and minimum["size"] == truth and not minimum["conflict"]
        if minimum["features"] is not None:
            assert len(minimum["features"]) == truth and _valid(problem, minimum["features"])
        for name, answer in record["explainers"].items():
            assert answer["features"] is not None, name
            assert len(answer["features"]) >= truth and _valid(problem, answer["features"]), name
    table = (out / "subset_minimal.md").read_text()
    assert "| credit-signs | abductive   | deletion-quickxplain |" in table
    assert (out / "subset_minimal.png").read_bytes()[:4] == b"\x89PNG"


def test_an_unknown_model_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--models", "credit-signs,mnist", "--out", str(tmp_path)])
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "unknown model 'mnist'" in error
    assert not any(tmp_path.iterdir())

"""`cardinal hunt`: finds, shrinks and saves counterexamples that replay; tie analysis."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cardinal.verify.cases import Case, replay
from cardinal.verify.cli import main
from cardinal.verify.hunt import hunt, tie_decided

from cardinal.activations import Activation
from cardinal.network import Layer, Network
from cardinal.problem import Problem


def test_design_network_is_a_tie_independent_counterexample(design_network: Network) -> None:
    """Scores 0.6, 0.6, 1.0 tie, but every order of the tied pair gives the same size 3 > 2."""
    problem = Problem.make(design_network, np.ones(3), "contrastive", threshold=0.5)
    assert tie_decided(problem, (0, 1, 2)) is False


def test_flat_relu_counterexample_is_decided_by_ties() -> None:
    net = Network([Layer(np.array([[1.0, 1.0, 2.0]]), np.array([-2.2]), Activation.make("relu"))])
    problem = Problem.make(net, np.zeros(3), "contrastive", threshold=0.5)
    assert tie_decided(problem, (0, 1, 2)) is True  # taking 2 first (a tie at 0) gives {0, 2}


@pytest.mark.parametrize(("weights", "bias", "rescued"), [([1.0, 1.0, 2.0], -2.2, True), ([1.0, 1.0, 1.0], -2.5, False)])
def test_tie_analysis_decides_large_tie_groups(weights: list[float], bias: float, rescued: bool) -> None:
    """30 zero-weight features join the tie at score 0 (30! orders); checking subsets of the tied
    group still decides: {0, 2} rescues greedy in the first network, nothing smaller than 3 exists
    in the second."""
    net = Network([Layer(np.array([weights + [0.0] * 30]), np.array([bias]), Activation.make("relu"))])
    problem = Problem.make(net, np.zeros(33), "contrastive", threshold=0.4)
    assert tie_decided(problem, (0, 1, 2)) is rescued
    assert tie_decided(problem, (0, 1, 2), limit=100) is None  # C(33, 2) = 528 sets: over the limit


@pytest.mark.parametrize("activation", ["relu", "hardtanh"])
def test_hunt_finds_shrinks_and_saves_replayable_cases(activation: str, tmp_path: Path) -> None:
    report = hunt(activation, max_features=6, seconds=6, seed=1)
    assert report.raw_finds >= 1 and report.smallest
    for found in report.smallest:
        assert len(found.minimum) < len(found.greedy)
        assert found.net.is_monotone and (found.net.is_admissible or activation == "step")
        path = found.case().save(tmp_path)
        assert replay(Case.load(path)).holds
    assert any(found.net.n_inputs <= 4 for found in report.smallest)  # shrinking got somewhere


def test_hunt_command(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["hunt", "--activation", "step", "--seconds", "4", "--max-features", "5", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "counterexample(s) found" in out and "set-cover" in out
    saved = list(tmp_path.glob("greedy_suboptimal-*.json"))
    # how many were kept, and why (issue 26: "287 found" above 4 files said neither)
    assert f"kept {len(saved)} of " in out and "per kind, source and tie rescue, the smallest after shrinking" in out
    assert main(["hunt", "--activation", "step", "--seconds", "0", "--out", str(tmp_path)]) == 2

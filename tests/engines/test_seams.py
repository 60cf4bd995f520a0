"""Exactness at the seams, held to an oracle of Python Fractions (issue 24).

Each problem (`tests.seam_probe`: exact thresholds, non-dyadic weights, 1e±300 magnitudes, 2^53
cancellation, leaky slopes 0 and 1, hardtanh min = max, steps at reachable points, width-1 chains,
−0.0, custom and binary boxes, non-monotone networks, sigmoid and tanh units read by steps at
sigmoid(0) = 1/2 and tanh(0) = 0) goes through `explain`, `certify`, `solve_minimum` on every
installed backend and `check`, and every claim is compared with `tests.fraction_oracle`, which
shares no code with `cardinal.exact`: no false certified verdict, no replayed set that is no
explanation, no wrong `minimum_proved`, no `refuted` valid set, no false `none_exists`, no
`repaired` or `exact` greedy answer that is not Algorithm 1's, no backend `error`. The default
test runs the issue's example and one problem per family; the `slow` one runs many per family.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from tests.fraction_oracle import Oracle
from tests.seam_probe import FAMILIES, Probe, cases, issue_example

# The limit of a call whose answer a test asserts: none that a run here comes near, so that no
# answer depends on the machine's speed (a limit of seconds ended calls undecided on a loaded machine).
UNBOUNDED = 3600.0


def test_the_oracle_decides_the_issue_example() -> None:
    """The oracle itself on issue 24's example: the step network on h, scores all 2 exactly,
    Algorithm 1 takes {0, 1, 2}, the minimum has size 2."""
    case = issue_example()
    oracle = case.oracle()
    assert oracle.p == 0
    assert oracle.algorithm1("contrastive") == {(0, 1, 2)}
    assert oracle.sizes("contrastive") == (2, 2)
    assert oracle.valid("contrastive", (0, 2)) and not oracle.valid("contrastive", (0, 1))


def test_the_oracle_encloses_smooth_values_beyond_double_precision() -> None:
    """sigmoid(−3/2) to 2^-250, not rounded to a double: a threshold at the double nearest to
    f = 3/4·sigmoid(−3/2) − 1/4 is decided (f is 6.4e-18 below it)."""
    from cardinal.activations import Activation
    from cardinal.network import Layer, Network

    net = Network(
        [
            Layer(np.array([[0.0, -0.5, -1.0], [0.5, 1.0, 0.0]]), np.array([-1.0, -1.0]), Activation.make("sigmoid")),
            Layer(np.array([[0.75, -0.5]]), np.zeros(1), Activation.make("identity")),
        ]
    )
    oracle = Oracle(net, [0.0, 1.0, 0.0], -0.11318085714523274, [0.0] * 3, [1.0] * 3)
    low, high = oracle.net.value(oracle.x)
    assert 0 < high - low < Fraction(1, 2**250)
    assert oracle.p == 0 and float(Fraction(-0.11318085714523274) - high) > 6e-18


def test_seams_fast_slice() -> None:
    """The issue's example and one problem of every family, seed fixed (`check` asked for the
    minimum only: the slow test asks valid and subset too)."""
    probe = Probe(time_limit=UNBOUNDED, requires=("minimum",))
    probe.run(issue_example())
    rng = np.random.default_rng(2024)
    for family in FAMILIES:
        for case in cases(rng, family):
            probe.run(case)
    assert not probe.findings, "\n".join(probe.findings)
    assert probe.counts["problems"] >= len(FAMILIES) + 1
    assert probe.counts["certify greedy_suboptimal"] >= 1  # the issue's example at least


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_seams_randomized(family: str) -> None:
    """Twelve random problems of one family (more for the smooth-into-step family)."""
    probe = Probe(time_limit=20.0)
    rng = np.random.default_rng(sum(map(ord, family)))
    for _ in range(40 if family == "smooth_step" else 12):
        for case in cases(rng, family):
            probe.run(case)
    assert not probe.findings, "\n".join(probe.findings[:20])
    assert probe.counts["problems"] >= 12

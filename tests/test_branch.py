"""Branch and bound over feature sets (`solvers.branch`) and its node bounds against brute force."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from bruteforce import random_network
from cardinal.solvers.branch import NODE_LIMIT, SubsetSearch
from cardinal.solvers.subsets import SubsetBounds
from cardinal.verify.activations import Activation
from cardinal.verify.exact import ExactNetwork


def _setting(seed: int, n: int, below: bool = False):
    """A random monotone ReLU network, base and target [n] (target ≥ base, or ≤ with `below`),
    every set S [2^n, n] and g(S) exactly."""
    rng = np.random.default_rng(seed)
    net = random_network(rng, n, (int(rng.integers(3, 9)), 5), Activation.make("relu"), grain=3 if seed % 2 else 0)
    base, target = rng.uniform(size=n) * 0.5, 0.5 + rng.uniform(size=n) * 0.5
    unmoved = rng.uniform(size=n) < 0.15
    target[unmoved] = base[unmoved]
    if below:
        base, target = target, base
    S = np.array(list(itertools.product([False, True], repeat=n)))
    g = np.array([enclosure.lower for enclosure in ExactNetwork(net).outputs(np.where(S, target, base))], dtype=object)
    return net, base, target, S, g


def _judge(net, base: np.ndarray, target: np.ndarray, threshold: float, below: bool = False):
    """Exact validity: 1 where g > t (g ≤ t with `below`), else 0."""
    exact = ExactNetwork(net)

    def judge(masks: np.ndarray) -> np.ndarray:
        above = exact.predictions(np.where(masks, target, base), threshold).astype(np.int8)
        return 1 - above if below else above

    return judge


def _reference(judge, n: int) -> np.ndarray:
    """A maximal invalid set grown from ∅ in index order, as a point of [0,1]^n."""
    chosen = np.zeros(n, dtype=bool)
    for i in range(n):
        chosen[i] = True
        chosen[i] = judge(chosen[None, :])[0] == 0
    return chosen.astype(np.float64)


@pytest.mark.parametrize("minimum", [False, True], ids=["upper", "lower"])
def test_node_bounds_cover_every_set_of_the_node(minimum: bool) -> None:
    """With features fixed in and a budget per node, the upper (lower) bound is ≥ (≤) g(fixed ∪ s)
    for every s ⊆ allowed \\ fixed within the budget, at any tangent point for the lower one."""
    closed = 0
    for seed in range(6):
        n = 7
        net, base, target, S, g = _setting(seed + 500, n, below=minimum)
        threshold = float(sorted(g)[len(g) // 3 if minimum else len(g) * 2 // 3])
        bounds = SubsetBounds(net, base, target, threshold)
        rng = np.random.default_rng(seed)
        allowed = rng.uniform(size=(16, n)) < 0.7
        fixed = allowed & (rng.uniform(size=(16, n)) < 0.3)
        budget = rng.integers(0, n + 1, size=16)
        reference = rng.uniform(size=(16, n)) if minimum and seed % 2 else None
        value, radius, shares = bounds.bound_and_form(budget, allowed, fixed=fixed, minimum=minimum, reference=reference)
        assert shares.shape == (16, n) and not shares[~(allowed & ~fixed)].any()
        for row in range(16):
            inside = [
                v
                for s, v in zip(S, g, strict=True)
                if not (s & ~allowed[row]).any() and not (fixed[row] & ~s).any() and (s & ~fixed[row]).sum() <= budget[row]
            ]
            if minimum:
                bottom = Fraction(value[row]) - Fraction(radius[row])
                assert bottom <= min(inside)
                closed += bottom > Fraction(threshold)
            else:
                top = Fraction(value[row]) + Fraction(radius[row])
                assert top >= max(inside)
                closed += top <= Fraction(threshold)
    assert closed > 0


@pytest.mark.parametrize("below", [False, True], ids=["above", "below"])
def test_search_agrees_with_brute_force_for_every_bound(below: bool) -> None:
    """ "sat" iff some set within k is valid (g > t, or g ≤ t `below`), the set returned being one;
    "unsat" otherwise; with a node limit, either that or NODE_LIMIT."""
    answers = set()
    for seed in range(10):
        n = 9 if seed % 3 else 12
        net, base, target, S, g = _setting(seed + 700, n, below)
        for quantile in (0.05, 0.3, 0.7) if below else (0.3, 0.7, 0.95):
            threshold = float(sorted(g)[int(len(g) * quantile)])
            judge = _judge(net, base, target, threshold, below)
            reference = _reference(judge, n) if below and seed % 2 else None
            bounds = SubsetBounds(net, base, target, threshold)
            search = SubsetSearch(bounds, judge, lambda m, j=judge: j(m) == 1, below, reference)
            sizes = S.sum(axis=1)
            valid = np.array([(v <= Fraction(threshold)) if below else (v > Fraction(threshold)) for v in g])
            for k in range(n + 1):
                limited, _ = search.search(k, nodes=2)
                assert limited in (NODE_LIMIT, "sat" if (valid & (sizes <= k)).any() else "unsat")
                raw, found = search.search(k)
                exists = bool((valid & (sizes <= k)).any())
                answers.add((raw, exists))
                assert raw == ("sat" if exists else "unsat"), (seed, quantile, k)
                if exists:
                    assert found.sum() <= k and judge(found[None, :])[0] == 1
    assert answers == {("sat", True), ("unsat", False)}


@pytest.mark.parametrize("below", [False, True], ids=["above", "below"])
def test_search_never_refutes_a_set_valid_by_less_than_an_ulp(below: bool) -> None:
    """t is the double next to the best g within k (below it for g > t; the best g itself, a
    double here, for g ≤ t): the search must find that set, not prune it."""
    for seed in range(6):
        n = 8
        net, base, target, S, g = _setting(seed + 900, n, below)
        for k in (1, 3, 5):
            values = [v for s, v in zip(S, g, strict=True) if s.sum() <= k]
            if below:
                best = min(values)
                threshold = float(best) if Fraction(float(best)) >= best else float(np.nextafter(float(best), np.inf))
            else:
                best = max(values)
                threshold = float(best) if Fraction(float(best)) < best else float(np.nextafter(float(best), -np.inf))
            judge = _judge(net, base, target, threshold, below)
            bounds = SubsetBounds(net, base, target, threshold)
            search = SubsetSearch(bounds, judge, lambda m, j=judge: j(m) == 1, below, _reference(judge, n) if below else None)
            raw, found = search.search(k)
            assert raw == "sat" and found.sum() <= k and judge(found[None, :])[0] == 1

"""Branch and bound over feature sets (`solvers.branch`) and its node bounds against brute force."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
from bruteforce import random_network
from cardinal.solvers.branch import SubsetSearch
from cardinal.solvers.subsets import SubsetBounds
from cardinal.verify.activations import Activation
from cardinal.verify.exact import ExactNetwork


def _setting(seed: int, n: int):
    """A random monotone ReLU network, base and target [n], every set S [2^n, n] and g(S) exactly."""
    rng = np.random.default_rng(seed)
    net = random_network(rng, n, (int(rng.integers(3, 9)), 5), Activation.make("relu"), grain=3 if seed % 2 else 0)
    base, target = rng.uniform(size=n) * 0.5, 0.5 + rng.uniform(size=n) * 0.5
    unmoved = rng.uniform(size=n) < 0.15
    target[unmoved] = base[unmoved]
    S = np.array(list(itertools.product([False, True], repeat=n)))
    g = np.array([enclosure.lower for enclosure in ExactNetwork(net).outputs(np.where(S, target, base))], dtype=object)
    return net, base, target, S, g


def _judge(net, base: np.ndarray, target: np.ndarray, threshold: float):
    exact = ExactNetwork(net)

    def judge(masks: np.ndarray) -> np.ndarray:
        return exact.predictions(np.where(masks, target, base), threshold).astype(np.int8)

    return judge


def test_node_bounds_cover_every_set_of_the_node() -> None:
    """With features fixed in and a budget per node, the bound is ≥ g(fixed ∪ s) for every
    s ⊆ allowed \\ fixed within the budget, and never refutes a node holding a valid set."""
    closed = 0
    for seed in range(6):
        n = 7
        net, base, target, S, g = _setting(seed + 500, n)
        threshold = float(sorted(g)[len(g) * 2 // 3])
        bounds = SubsetBounds(net, base, target, threshold)
        rng = np.random.default_rng(seed)
        allowed = rng.uniform(size=(16, n)) < 0.7
        fixed = allowed & (rng.uniform(size=(16, n)) < 0.3)
        budget = rng.integers(0, n + 1, size=16)
        value, radius, shares = bounds.bound_and_form(budget, allowed, fixed=fixed)
        assert shares.shape == (16, n) and not shares[~(allowed & ~fixed)].any()
        for row in range(16):
            inside = [
                v
                for s, v in zip(S, g, strict=True)
                if not (s & ~allowed[row]).any() and not (fixed[row] & ~s).any() and (s & ~fixed[row]).sum() <= budget[row]
            ]
            top = Fraction(value[row]) + Fraction(radius[row])
            assert top >= max(inside)
            if top <= Fraction(threshold):
                closed += 1
    assert closed > 0


def test_search_agrees_with_brute_force_for_every_bound() -> None:
    """"sat" iff some set within k has g > t, the set returned being one; "unsat" otherwise."""
    answers = set()
    for seed in range(10):
        n = 9 if seed % 3 else 12
        net, base, target, S, g = _setting(seed + 700, n)
        for quantile in (0.3, 0.7, 0.95):
            threshold = float(sorted(g)[int(len(g) * quantile)])
            judge = _judge(net, base, target, threshold)
            search = SubsetSearch(SubsetBounds(net, base, target, threshold), judge, lambda m, j=judge: j(m) == 1)
            sizes = S.sum(axis=1)
            valid = np.array([v > Fraction(threshold) for v in g])
            for k in range(n + 1):
                raw, found = search.search(k)
                exists = bool((valid & (sizes <= k)).any())
                answers.add((raw, exists))
                assert raw == ("sat" if exists else "unsat"), (seed, quantile, k)
                if exists:
                    assert found.sum() <= k and judge(found[None, :])[0] == 1
    assert answers == {("sat", True), ("unsat", False)}


def test_search_never_refutes_a_threshold_just_below_the_best_set() -> None:
    """One set within k is valid by less than an ulp: the search must find it, not prune it."""
    for seed in range(6):
        n = 8
        net, base, target, S, g = _setting(seed + 900, n)
        for k in (1, 3, 5):
            best = max(v for s, v in zip(S, g, strict=True) if s.sum() <= k)
            below = float(best) if Fraction(float(best)) < best else float(np.nextafter(float(best), -np.inf))
            judge = _judge(net, base, target, below)
            search = SubsetSearch(SubsetBounds(net, base, target, below), judge, lambda m, j=judge: j(m) == 1)
            raw, found = search.search(k)
            assert raw == "sat" and found.sum() <= k and judge(found[None, :])[0] == 1

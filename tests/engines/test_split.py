"""Flip questions by input splitting (`solvers.split`) and minimum CXps level by level
(`solvers.levels`): the splitting search's answers against z3's exact full encoding on tiny
continuous boxes (one output and K = 3 classes), its points in the box and flipping exactly; a
shuffled split order (the one float hint it follows) changes no answer; levels against the exact
minimum, and a gradient search that claims points that do not flip gives no wrong level."""

from __future__ import annotations

import itertools
import math
import time

import cardinal.solvers.smt as smt
import numpy as np
import pytest
import z3
from cardinal.solvers import levels
from cardinal.solvers.split import BoxSplitter, OutOfNodes, applies
from cardinal.verify.generate import median_threshold, random_network

from cardinal.domain import Domain
from cardinal.exact import ExactNetwork
from cardinal.problem import Problem

# z3's limit in a reference answer: none that a run here comes near (its timeout would be an error,
# not an answer), so that no answer depends on the machine's speed
UNBOUNDED = 3600.0


def _problem(seed: int, classes: int = 1, n: int = 5, radius: float = 0.3) -> Problem:
    """A small non-monotone ReLU network and a ball around one of its inputs, clipped to [0, 1]^n."""
    rng = np.random.default_rng(seed)
    net = random_network(rng, n, (6, 5), "relu", monotone=False, outputs=classes)
    X = rng.random((8, n))
    x = X[seed % 8]
    domain = Domain.unit(n).ball(x, radius)
    if classes == 1:
        return Problem.make(net, x, "contrastive", domain, median_threshold(net, X))
    assert ExactNetwork(net).predictions(x[None, :], None)[0] >= 0
    return Problem.make(net, x, "contrastive", domain)


def _z3_flips(problem: Problem, free: frozenset[int]) -> bool:
    return smt._Encoding(problem, z3.Context()).find_flip(free, time.perf_counter() + UNBOUNDED) is not None


def _check_point(problem: Problem, free: frozenset[int], y: np.ndarray) -> None:
    domain = problem.domain
    assert ((domain.lower <= y) & (y <= domain.upper)).all()
    assert (y[[i for i in range(problem.n) if i not in free]] == problem.x[[i for i in range(problem.n) if i not in free]]).all()
    assert problem.flips(y)


@pytest.mark.parametrize("classes", [1, 3])
def test_splitting_agrees_with_z3_on_tiny_boxes(classes: int) -> None:
    """Every free set of one to three features and the whole box: the same answer as z3's exact
    encoding; both answers occur."""
    answers = set()
    for seed in range(5):
        problem = _problem(seed, classes)
        assert applies(problem)
        splitter = BoxSplitter(problem)
        sets = [frozenset(c) for j in (1, 2, 3) for c in itertools.combinations(range(problem.n), j)][::4]
        for free in [*sets, frozenset(range(problem.n))]:
            y = splitter.flip(free, math.inf)
            if y is not None:
                _check_point(problem, free, y)
            assert (y is not None) == _z3_flips(problem, free), (seed, sorted(free))
            answers.add(y is not None)
    assert answers == {True, False}


def test_a_shuffled_split_order_changes_no_answer() -> None:
    """The shares that pick the feature to cut are a float hint: random ones cost boxes, never an answer."""
    rng = np.random.default_rng(0)
    for seed in range(4):
        problem = _problem(seed, radius=0.3)
        splitter, shuffled = BoxSplitter(problem), BoxSplitter(problem)
        shuffled.shares = rng.random(problem.n) * 10.0 ** rng.integers(-3, 3, size=problem.n)
        for j in (1, 2):
            for free in map(frozenset, itertools.combinations(range(problem.n), j)):
                assert (splitter.flip(free, math.inf) is None) == (shuffled.flip(free, math.inf) is None), (seed, sorted(free))


def test_a_node_budget_ends_in_out_of_nodes_not_an_answer() -> None:
    """A question that takes more than one box, asked with a budget of one."""
    for seed in range(8):
        problem = _problem(seed, radius=0.5)
        splitter = BoxSplitter(problem)
        for free in map(frozenset, itertools.combinations(range(problem.n), 3)):
            before = splitter.nodes
            if splitter.flip(free, math.inf) is None and splitter.nodes - before > 1:
                with pytest.raises(OutOfNodes):
                    splitter.flip(free, math.inf, nodes=1)
                return
    raise AssertionError("no question took more than one box")


def _minimum_by_z3(problem: Problem) -> int | None:
    for j in range(1, problem.n + 1):
        if any(_z3_flips(problem, frozenset(c)) for c in itertools.combinations(range(problem.n), j)):
            return j
    return None


def _no_oracle(free: frozenset[int], deadline: float) -> np.ndarray | None:
    raise AssertionError("the splitting search decides every subset here")


def test_levels_find_the_minimum_of_z3s_full_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Levels below the minimum are proved, the minimum's level gives a shrunk point of that size
    (every level asked here: 5 features)."""
    monkeypatch.setattr(levels, "LEVEL_MOST", 5)
    for seed in range(4):
        problem = _problem(seed, 1 + 2 * (seed % 2), n=5, radius=0.25)
        minimum = _minimum_by_z3(problem)
        below = problem.n + 1
        result = levels.by_levels(problem, _no_oracle, below, math.inf)
        if minimum is None:
            assert result.point is None and result.proved == problem.n, (seed, result)
        else:
            assert result.point is not None and result.proved == minimum - 1, (seed, result)
            moved = frozenset(np.flatnonzero(result.point != problem.x).tolist())
            assert len(moved) == minimum and problem.flips(result.point)


def test_levels_start_above_the_levels_already_proved(monkeypatch: pytest.MonkeyPatch) -> None:
    """`by_levels(..., proved=k)` asks no subset of k features or fewer (the splitting search is
    watched) and ends where asking from level 1 ends."""
    monkeypatch.setattr(levels, "LEVEL_MOST", 5)
    sizes: list[int] = []  # the sizes of the free sets the splitting search is asked about
    flips = levels.BoxSplitter.flips
    started_above = 0
    for seed in range(4):
        problem = _problem(seed, 1 + 2 * (seed % 2), n=5, radius=0.25)
        whole = levels.by_levels(problem, _no_oracle, problem.n + 1, math.inf)
        known = min(whole.proved, 2)
        sizes.clear()
        with monkeypatch.context() as watched:
            watched.setattr(levels.BoxSplitter, "flips", lambda self, sets, *a, **k: sizes.extend(map(len, sets)) or flips(self, sets, *a, **k))
            later = levels.by_levels(problem, _no_oracle, problem.n + 1, math.inf, proved=known)
        assert later.proved == whole.proved and (later.point is None) == (whole.point is None), seed
        assert sizes and min(sizes) > known, (seed, sizes)
        started_above += known > 0
    assert started_above >= 2


def _z3_oracle(problem: Problem):
    def find_flip(free: frozenset[int], deadline: float) -> np.ndarray | None:
        return smt._Encoding(problem, z3.Context()).find_flip(free, time.perf_counter() + UNBOUNDED)

    return find_flip


def test_subsets_the_splitting_leaves_go_to_the_oracle_and_a_wrong_point_gives_no_level(monkeypatch: pytest.MonkeyPatch) -> None:
    """One box per subset: the exact oracle decides the rest (the same minimum); an oracle whose
    point does not flip (x itself) or moves a feature outside its subset ends in `Unproved`."""
    monkeypatch.setattr(levels, "SPLIT_NODES", 1)
    monkeypatch.setattr(levels, "LEVEL_MOST", 5)
    asked = refused = 0
    for seed in range(4):
        problem = _problem(seed, n=5, radius=0.25)
        oracle = _z3_oracle(problem)

        def counting(free: frozenset[int], deadline: float, oracle=oracle) -> np.ndarray | None:
            nonlocal asked
            asked += 1
            return oracle(free, deadline)

        result = levels.by_levels(problem, counting, problem.n + 1, math.inf)
        minimum = _minimum_by_z3(problem)
        assert result.proved == (problem.n if minimum is None else minimum - 1), (seed, result)
        for wrong in (
            lambda free, deadline, p=problem: p.x.copy(),
            lambda free, deadline, p=problem: np.where(np.isin(np.arange(p.n), sorted(free)), p.x, p.domain.upper),
        ):
            try:
                misled = levels.by_levels(problem, wrong, problem.n + 1, math.inf)
            except levels.Unproved:
                refused += 1
                continue
            assert misled.proved == result.proved  # the splitting search decided every subset the oracle was not asked
    assert asked and refused


def test_levels_are_asked_only_where_they_decide() -> None:
    """Up to level 3 (an incumbent of at most 4 features), and only where each level is small."""
    assert levels.fits(28, 4) and not levels.fits(28, 5) and not levels.fits(16, 6)
    assert levels.fits(3, 4) and not levels.fits(200, 4)  # C(200, 3) > LEVEL_SETS


def test_a_level_answered_in_full_is_proved_even_when_the_clock_has_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every subset answered "none" (here by a splitting that ignores the clock) proves the level,
    whenever the answers came: the deadline stops questions, not what they proved."""

    class Answered:
        def __init__(self, problem: Problem) -> None:
            pass

        def flips(self, sets, deadline, nodes=None, first=False, record=None):
            return [None] * len(sets)

    monkeypatch.setattr(levels, "BoxSplitter", Answered)
    result = levels.by_levels(_problem(0), _no_oracle, 3, time.perf_counter() - 1.0)
    assert result.proved == 2 and result.point is None

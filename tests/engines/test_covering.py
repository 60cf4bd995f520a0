"""Minimum AXps by covering the free sets (`solvers.covering`): the bits of the sets that contain
a D (the k-subsets left clear, their count, the test of a few sets), against itertools, folded
at once or D by D; the minimum against brute force on Boolean cubes (an exact vertex oracle), by
covering and by the implicit hitting-set loop (past `COVER_FEATURES`); `at_most`; an oracle point that does not flip gives no
verdict; questions put off (out of their share of time) are asked again; the batched gradient
search and shrinking agree with their one-point forms."""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import pytest
from cardinal.solvers import covering
from cardinal.solvers.attack import flipping_point, flipping_points
from cardinal.solvers.covering import _Supersets, minimum_by_covering
from cardinal.solvers.hitting import OracleCalls, OracleTimeout, shrink_points, shrink_witness
from cardinal.verify.generate import median_threshold, random_network

from cardinal.domain import Domain
from cardinal.problem import Outcome, Problem, Status


@pytest.mark.parametrize("fold", [1, 1024], ids=["each-folded", "kept-aside"])
def test_clear_subsets_are_exactly_those_containing_no_d(fold: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every n up to 11 (less than a word, a word, several), every level: the k-subsets listed
    clear and their count equal itertools', with the D's folded into the bits or kept aside; a
    set tested after more D's came is judged by all of them."""
    monkeypatch.setattr(covering, "FOLD", fold)
    rng = np.random.default_rng(3)
    for n in range(0, 12):
        for _ in range(3):
            sets = _Supersets(n)
            found = [int(m) for m in rng.integers(0, 1 << n, size=int(rng.integers(0, 6)))] if n else []
            sets.add(np.array(found[:2], dtype=np.int64))
            stamp = sets.stamp()
            sets.add(np.array(found[2:], dtype=np.int64))
            for k in range(n + 2):
                subsets = [sum(1 << i for i in c) for c in itertools.combinations(range(n), k)]
                expected = [m for m in subsets if not any(m & d == d for d in found)]
                assert sorted(int(m) for chunk in sets.clear(k) for m in chunk) == sorted(expected), (n, k, found)
                assert sets.count(k) == len(expected)
                before = [m for m in subsets if not any(m & d == d for d in found[:2])]
                clear = sets.clear_of(np.array(before, dtype=np.int64), stamp)
                assert [m for m, c in zip(before, clear.tolist(), strict=True) if c] == expected


def test_clear_lists_each_chunk_as_it_stands_when_d_come_between_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """One word per chunk and a D added after each chunk (folded at once or kept aside): every
    listed subset was clear when listed, in increasing order, and every subset still clear at the
    end was listed (covering's lower bound rests on that)."""
    monkeypatch.setattr(covering, "CHUNK_WORDS", 1)
    rng = np.random.default_rng(5)
    for fold in (1, 1024):
        monkeypatch.setattr(covering, "FOLD", fold)
        for n in (6, 8, 10, 12):
            sets, found = _Supersets(n), []
            k = n // 2
            listed: list[int] = []
            for chunk in sets.clear(k):
                assert all(not any(m & d == d for d in found) for m in chunk.tolist())
                listed.extend(chunk.tolist())
                d = int(rng.choice([sum(1 << int(i) for i in rng.choice(n, 3, replace=False)), int(rng.integers(1, 1 << n))]))
                found.append(d)
                sets.add(np.array([d], dtype=np.int64))
            assert listed == sorted(listed) and len(found) >= (1 if n == 6 else 2)  # D's came between chunks
            still = [sum(1 << i for i in c) for c in itertools.combinations(range(n), k)]
            assert set(m for m in still if not any(m & d == d for d in found)) <= set(listed), (fold, n)


def _cube(seed: int, n: int) -> Problem:
    rng = np.random.default_rng(seed)
    net = random_network(rng, n, (8, 6), "relu", monotone=False)
    X = (rng.random((8, n)) < 0.5).astype(float)
    return Problem.make(net, X[seed % 8], "abductive", Domain.boolean(n), median_threshold(net, X))


def _vertices(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Every vertex [2^n, n] of the cube and whether it flips exactly [2^n]."""
    vertices = np.array(list(itertools.product((0.0, 1.0), repeat=problem.n)))
    return vertices, problem.predictions(vertices) != problem.prediction


def _vertex_oracle(problem: Problem):
    """The exact flip oracle by brute force: a flipping vertex that moves only free features."""
    vertices, flips = _vertices(problem)
    moved = vertices != problem.x

    def find_flip(free: frozenset[int], deadline: float) -> np.ndarray | None:
        fixed = np.array([i not in free for i in range(problem.n)])
        inside = flips & ~(moved & fixed).any(axis=1)
        return vertices[int(np.argmax(inside))] if inside.any() else None

    return find_flip


def _brute_minimum(problem: Problem) -> int:
    vertices, flips = _vertices(problem)
    changed = [frozenset(np.flatnonzero(v != problem.x).tolist()) for v in vertices[flips]]
    return next(k for k in range(problem.n + 1) for s in itertools.combinations(range(problem.n), k) if all(c & set(s) for c in changed))


@pytest.mark.parametrize("cover", [True, False], ids=["covered", "loop"])
def test_minimum_by_covering_equals_brute_force_on_cubes(cover: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """By covering, and by the loop (past `COVER_FEATURES`)."""
    if not cover:
        monkeypatch.setattr(covering, "COVER_FEATURES", 0)
    for seed in range(12):
        problem = _cube(seed, 6 + seed % 4)
        result = minimum_by_covering(problem, _vertex_oracle(problem), None, math.inf)
        assert isinstance(result, Outcome) and result.status == Status.OPTIMAL, result  # the one result type
        assert result.lower == len(result.solution) and not result.exact, result  # the backend stamps exactness
        minimum = _brute_minimum(problem)
        assert result.solution is not None and len(result.solution) == minimum, (seed, result)
        assert _vertex_oracle(problem)(frozenset(range(problem.n)) - set(result.solution), math.inf) is None  # an AXp
        if minimum > 0:
            below = minimum_by_covering(problem, _vertex_oracle(problem), minimum - 1, math.inf)
            assert below.status == Status.NONE_WITHIN, (seed, below)


def _slow_on_0(problem: Problem, deadline: float, asked: list[tuple[bool, bool]]):
    """The vertex oracle, except that any question about a set holding feature 0 runs out of a
    share of time shorter than the whole (`until` < `deadline`)."""
    exact = _vertex_oracle(problem)

    def find_flip(free: frozenset[int], until: float) -> np.ndarray | None:
        asked.append((0 in free, until < deadline))
        if 0 in free and until < deadline:
            raise OracleTimeout
        return exact(free, until)

    return find_flip


def test_questions_put_off_are_asked_again_and_the_minimum_holds() -> None:
    """Growing leaves feature 0 out; covering asks the subsets holding it again, without a limit."""
    for seed in range(6):
        problem, asked = _cube(seed, 7), []
        deadline = time.perf_counter() + 3600.0
        calls = OracleCalls()
        result = minimum_by_covering(problem, _slow_on_0(problem, deadline, asked), None, deadline, calls=calls)
        assert result.status == Status.OPTIMAL and len(result.solution) == _brute_minimum(problem), (seed, result)
        assert (True, True) in asked  # some question was put off
        assert calls.count == len(asked)  # every question counted, those put off too


def test_an_oracle_point_that_does_not_flip_gives_no_verdict() -> None:
    problem = _cube(1, 6)
    result = minimum_by_covering(problem, lambda free, deadline: problem.x.copy(), None, math.inf)
    assert result.status == Status.ERROR and result.solution is None, result


def test_batched_search_and_shrinking_agree_with_one_point() -> None:
    problem = Problem.make(*_box(5))
    rng = np.random.default_rng(9)
    movable = rng.random((40, problem.n)) < 0.5
    points, found = flipping_points(problem, movable, 16)
    assert found.any() and not found.all()
    for row, free in enumerate(movable):
        assert ((points[row] == problem.x) | free).all()
        assert bool(problem.flips(points[row])) == bool(found[row])
    first = flipping_point(problem, frozenset(np.flatnonzero(movable[0]).tolist()))  # the same random starts
    assert (first is None and not found[0]) or (first == points[0]).all()
    shrunk = shrink_points(problem, points[found])
    for y, small in zip(points[found], shrunk, strict=True):
        assert frozenset(np.flatnonzero(small != problem.x).tolist()) == shrink_witness(problem, y)
        assert problem.flips(small)


def _box(seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    net = random_network(rng, 10, (16, 16), "relu", monotone=False)
    X = rng.random((8, 10))
    x = X[0]
    return net, x, "abductive", Domain.unit(10).ball(x, 0.2), median_threshold(net, X)


def test_an_oracle_point_that_moves_a_fixed_feature_gives_no_verdict() -> None:
    """An oracle that answers with a flipping vertex moving features outside the free set (a
    broken contract) ends in ERROR, never in a level covered by that point."""
    problem = _cube(2, 6)
    vertices, flips = _vertices(problem)
    anywhere = vertices[int(np.argmax(flips & ((vertices != problem.x).sum(axis=1) == problem.n)))]
    assert problem.flips(anywhere)
    result = minimum_by_covering(problem, lambda free, deadline: anywhere.copy(), None, math.inf)
    assert result.status == Status.ERROR and result.solution is None, result

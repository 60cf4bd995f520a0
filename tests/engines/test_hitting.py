"""The hitting-set step of the implicit-hitting-set loop (`solvers.hitting.HittingSets`): grown one
set at a time, its minimum hitting sets equal brute force with PySAT's RC2 and without it (the
branch and bound), and its greedy hitting set hits every set. The loop's supply of contrastive
sets (`Supply`) and its minima and exact lower bounds against brute force on Boolean cubes."""

from __future__ import annotations

import importlib
import itertools
import math
import time

import numpy as np
import pytest
from cardinal.solvers import hitting, relaxed_axp
from cardinal.solvers.base import solve_minimum
from cardinal.solvers.hitting import HittingSets
from cardinal.verify.generate import median_threshold, random_network

from cardinal.domain import Domain
from cardinal.errors import InputError
from cardinal.problem import Outcome, Problem, Status


def _smallest(sets: list[frozenset[int]], universe: int) -> int:
    return next(
        k for k in range(universe + 1) for c in itertools.combinations(range(universe), k) if all(set(c) & s for s in sets)
    )


@pytest.mark.parametrize("maxsat", [True, False])
def test_minimum_and_greedy_hitting_sets_as_sets_arrive(maxsat: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if maxsat:
        importlib.import_module("pysat")
    else:
        monkeypatch.setattr(hitting, "_maxsat", lambda n: None)
    rng = np.random.default_rng(5)
    for _ in range(30):
        universe = int(rng.integers(3, 9))
        sets: list[frozenset[int]] = []
        with HittingSets(universe) as family:
            assert (family.maxsat is not None) == maxsat
            assert family.minimum(None) == frozenset() and family.minimum(-1) is None  # nothing to hit yet
            for _ in range(int(rng.integers(1, 8))):
                found = frozenset(np.flatnonzero(rng.random(universe) < 0.4).tolist()) or frozenset({int(rng.integers(universe))})
                sets.append(found)
                family.add(found)
                assert family.sets() == sets and len(family) == len(sets)
                smallest = _smallest(sets, universe)
                minimum = family.minimum(None)
                assert minimum is not None and len(minimum) == smallest and all(minimum & s for s in sets)
                assert family.minimum(smallest) is not None and family.minimum(smallest - 1) is None
                assert all(family.greedy() & s for s in sets)


def _cube(seed: int, n: int, outputs: int) -> Problem:
    """An abductive problem on the Boolean cube of a random non-monotone ReLU network (K = 1 with
    a median threshold, or K = `outputs` ≥ 2 classes)."""
    rng = np.random.default_rng(seed)
    net = random_network(rng, n, (8, 6), "relu", monotone=False, outputs=outputs)
    X = (rng.random((8, n)) < 0.5).astype(float)
    threshold = median_threshold(net, X) if outputs == 1 else None
    return Problem.make(net, X[seed % 8], "abductive", Domain.boolean(n), threshold)


def _minimum_hitting(n: int, supports: list[frozenset[int]]) -> int:
    """The size of the smallest set of the n features that meets every support, by enumeration."""
    return next(k for k in range(n + 1) for c in itertools.combinations(range(n), k) if all(set(c) & s for s in supports))


def _flipping_supports(problem: Problem) -> list[frozenset[int]]:
    """The features moved by each vertex of the cube that flips the prediction exactly (brute force)."""
    vertices = np.array(list(itertools.product((0.0, 1.0), repeat=problem.n)))
    flips = problem.predictions(vertices) != problem.prediction
    return [frozenset(np.flatnonzero(v != problem.x).tolist()) for v in vertices[flips]]


def _vertex_oracle(problem: Problem, supports: list[frozenset[int]], asked: list[frozenset[int]] | None = None):
    """The exact flip oracle by brute force: a flipping vertex moving only free features, or None
    (each free set it is asked for goes to `asked`)."""

    def find_flip(free: frozenset[int], deadline: float) -> np.ndarray | None:
        if asked is not None:
            asked.append(free)
        inside = [s for s in supports if s <= free]
        if not inside:
            return None
        return np.where(np.isin(np.arange(problem.n), sorted(inside[0])), 1.0 - problem.x, problem.x)

    return find_flip


@pytest.mark.parametrize("outputs", [1, 3])
def test_supply_gives_disjoint_contrastive_sets_inside_the_free_set(outputs: int) -> None:
    """Every point `Supply.sets` returns flips exactly, and its set (where it leaves x) lies
    inside the free set, shares no feature with the others, and contains the support of a vertex
    that flips (brute force): a genuine contrastive set."""
    rng = np.random.default_rng(11)
    checked = 0
    for seed in range(10):
        problem = _cube(seed, 8, outputs)
        supports = _flipping_supports(problem)
        supply = hitting.Supply(problem)
        assert supply.applies
        for _ in range(6):
            free = frozenset(np.flatnonzero(rng.random(problem.n) < 0.7).tolist())
            points = supply.sets(free)
            assert all(problem.flips(y) for y in points)
            found = [hitting.support(problem, y) for y in points]
            for index, contrastive in enumerate(found):
                assert contrastive and contrastive <= free, (seed, free, contrastive)
                assert all(not contrastive & other for other in found[:index]), (seed, found)
                assert any(s <= contrastive for s in supports), (seed, contrastive)  # it flips
                checked += 1
    assert checked > 20  # the sets were many, so the checks above ran


@pytest.mark.parametrize("supply", [True, False])
@pytest.mark.parametrize("outputs", [1, 3])
def test_loop_minimum_and_lower_bounds_equal_brute_force(outputs: int, supply: bool) -> None:
    """The loop (its supply, or the exact oracle alone with `supply=False`) ends OPTIMAL with the
    brute-force minimum and says it as its lower bound; stopped at the oracle's first question,
    its lower bound is exact: at most the minimum, and said in the message (with the supply off,
    nothing is known then: 0)."""
    for seed in range(10):
        problem = _cube(seed, 7 + seed % 3, outputs)
        supports = _flipping_supports(problem)
        minimum = _minimum_hitting(problem.n, supports)
        asked: list[frozenset[int]] = []
        calls = hitting.OracleCalls()
        result = hitting.minimum_abductive(problem, _vertex_oracle(problem, supports, asked), None, math.inf, supply=supply, calls=calls)
        assert isinstance(result, Outcome) and result.solver == hitting.LOOP  # the one result type
        assert result.status == Status.OPTIMAL and result.solution is not None, (seed, result)
        assert len(result.solution) == minimum == result.lower, (seed, result)
        assert not any(s.isdisjoint(result.solution) for s in supports)  # an AXp: no flip with the rest free
        assert calls.count == len(asked) and (supply or len(asked) > minimum)  # off: every set from the oracle

        def timing_out(free: frozenset[int], deadline: float) -> np.ndarray | None:
            raise hitting.OracleTimeout

        stopped_calls = hitting.OracleCalls()
        stopped = hitting.minimum_abductive(problem, timing_out, None, math.inf, supply=supply, calls=stopped_calls)
        if not supply:
            assert stopped.status == Status.TIMEOUT and stopped.lower == 0 and stopped_calls.count == 1, (seed, stopped)
        elif stopped.status == Status.OPTIMAL:  # the supply alone refuted every smaller candidate, and x stays put with all fixed
            assert stopped.solution is not None and len(stopped.solution) == minimum == problem.n
        else:
            assert stopped.status == Status.TIMEOUT and stopped.solution is None, (seed, stopped)
            assert stopped.lower <= minimum and f"exact lower bound {stopped.lower}" in stopped.message, (seed, stopped)


def test_supply_off_is_refused_for_a_guarded_call() -> None:
    """`solve_minimum(..., supply=False)` sets the option on the backend in this process
    (`tests/application/test_replay.py` shows its effect); a guarded call, whose backend runs in a child
    process, refuses it with a one-line InputError."""
    problem = _cube(0, 6, 1)
    with pytest.raises(InputError, match="supply=False needs guarded=False"):
        solve_minimum(problem.net, problem.x, "abductive", problem.domain, problem.threshold, solver="z3", supply=False)


def _shallow(seed: int, n: int, outputs: int) -> Problem:
    """`_cube` with one hidden ReLU layer (the form `relaxed_axp` takes)."""
    rng = np.random.default_rng(100 + seed)
    net = random_network(rng, n, (6,), "relu", monotone=False, outputs=outputs)
    X = (rng.random((8, n)) < 0.5).astype(float)
    threshold = median_threshold(net, X) if outputs == 1 else None
    return Problem.make(net, X[seed % 8], "abductive", Domain.boolean(n), threshold)


@pytest.mark.parametrize("outputs", [1, 3])
def test_relaxed_sets_hit_every_flipping_vertex(outputs: int) -> None:
    """A set the relaxation certifies (`relaxed_axp`) meets the support of every vertex of the cube
    that flips (brute force): an AXp of the box, hence of its vertices. Found on most networks."""
    found = 0
    for seed in range(12):
        problem = _shallow(seed, 7, outputs)
        assert relaxed_axp.applies(problem)
        chosen = relaxed_axp.relaxed_axp(problem, 30.0)
        if chosen is not None:
            found += 1
            assert all(chosen & s for s in _flipping_supports(problem)), (seed, chosen)
    assert found >= 6
    assert not relaxed_axp.applies(_cube(0, 7, outputs))  # two hidden layers


@pytest.mark.parametrize("outputs", [1, 3])
def test_loop_seeded_by_the_relaxation_equals_brute_force(outputs: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """On one-hidden-layer networks the loop asked at once (`seed_after=0`), where deletion gives
    no AXp (turned off here), asks the oracle about the set the relaxation certifies first, and
    still ends OPTIMAL with the brute-force minimum."""
    monkeypatch.setattr(hitting, "_deletion_seed", lambda *args: (None, None, 0))
    for seed in range(8):
        problem = _shallow(seed, 7, outputs)
        supports = _flipping_supports(problem)
        minimum = _minimum_hitting(problem.n, supports)
        asked: list[frozenset[int]] = []
        result = hitting.minimum_abductive(problem, _vertex_oracle(problem, supports, asked), None, math.inf, seed_after=0.0)
        assert result.status == Status.OPTIMAL and result.solution is not None and len(result.solution) == minimum, (seed, result)
        seed_set = relaxed_axp.relaxed_axp(problem, 30.0)
        if seed_set is not None and len(seed_set) < problem.n:
            assert asked[0] == frozenset(range(problem.n)) - seed_set, (seed, asked[:1], seed_set)  # asked first


@pytest.mark.parametrize("outputs", [1, 3])
def test_loop_seeded_by_deletion_answers_with_its_axp(outputs: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop asked at once (`seed_after=0`) runs deletion on its own oracle first: it still ends
    OPTIMAL with the brute-force minimum; and where every minimum hitting set is then interrupted,
    it answers FEASIBLE with deletion's set: an AXp (it hits every flipping support), no smaller
    than the minimum."""
    for seed in range(8):
        problem = _cube(seed, 8, outputs)
        supports = _flipping_supports(problem)
        minimum = _minimum_hitting(problem.n, supports)
        result = hitting.minimum_abductive(problem, _vertex_oracle(problem, supports), None, math.inf, seed_after=0.0)
        assert result.status == Status.OPTIMAL and result.solution is not None and len(result.solution) == minimum, (seed, result)
    stopped = 0
    with monkeypatch.context() as patched:
        patched.setattr(HittingSets, "minimum", lambda self, limit, deadline=math.inf: (_ for _ in ()).throw(hitting.OracleTimeout()))
        patched.setattr(hitting, "_by_reset", lambda problem, flip, best, supply, deadline: (-1, best, False))  # deletion's alone
        for seed in range(8):
            problem = _cube(seed, 8, outputs)
            supports = _flipping_supports(problem)
            result = hitting.minimum_abductive(problem, _vertex_oracle(problem, supports), None, math.inf, seed_after=0.0)
            if result.status == Status.OPTIMAL:  # the hitting sets were never asked: nothing to stop
                continue
            assert result.status == Status.FEASIBLE and result.solution is not None, (seed, result)
            chosen = frozenset(result.solution)
            assert all(chosen & s for s in supports), (seed, result)
            assert len(chosen) >= _minimum_hitting(problem.n, supports)
            stopped += 1
    assert stopped >= 4


def _stopping_after(find_flip, asked: int):
    """`find_flip` for its first `asked` questions; every later one runs out of its time (OracleTimeout)."""
    calls = 0

    def stopping(free: frozenset[int], deadline: float) -> np.ndarray | None:
        nonlocal calls
        calls += 1
        if calls > asked:
            raise hitting.OracleTimeout
        return find_flip(free, deadline)

    return stopping


@pytest.mark.parametrize("outputs", [1, 3])
def test_a_deletion_seed_stopped_undecided_still_gives_the_loop_its_axp(outputs: int) -> None:
    """Where the oracle stops deciding (every question from the fifth on runs out its time, as on
    the full-box CNN of `bench.digits`), the deletion seed ends undecided; the loop then answers
    FEASIBLE with the features deletion did not remove: an AXp (it hits every flipping support,
    brute force), of fewer than all features where deletion removed some."""
    answered = 0
    for seed in range(8):
        problem = _cube(seed, 8, outputs)
        supports = _flipping_supports(problem)
        find_flip = _stopping_after(_vertex_oracle(problem, supports), 4)
        result = hitting.minimum_abductive(problem, find_flip, None, math.inf, seed_after=0.0, supply=False)
        if result.status == Status.OPTIMAL:  # decided within four questions
            continue
        assert result.status == Status.FEASIBLE and result.solution is not None, (seed, result)
        chosen = frozenset(result.solution)
        assert all(chosen & s for s in supports), (seed, result)
        assert len(chosen) < problem.n
        answered += 1
    assert answered >= 4


def test_rc2_stops_at_its_deadline() -> None:
    """A minimum hitting set asked past its deadline raises OracleTimeout without asking RC2, and
    one asked of a hard family (3,000 random sets of 3–9 of 64 elements: seconds of RC2) with a
    deadline 0.05 s away is interrupted there (RC2 cannot finish it in that time)."""
    importlib.import_module("pysat")
    rng = np.random.default_rng(1)
    with HittingSets(64) as family:
        for _ in range(3000):
            family.add(frozenset(rng.choice(64, size=int(rng.integers(3, 10)), replace=False).tolist()))
        with pytest.raises(hitting.OracleTimeout):
            family.minimum(None, deadline=0.0)
        with pytest.raises(hitting.OracleTimeout):
            family.minimum(None, deadline=time.perf_counter() + 0.05)


@pytest.mark.parametrize("outputs", [1, 3])
def test_loop_stopped_inside_the_hitting_step_keeps_its_bound(outputs: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The regression of issue 40 (a call stopped at its deadline while RC2 ran answered nothing):
    a loop whose minimum hitting set is interrupted (OracleTimeout on its second call) ends TIMEOUT
    or FEASIBLE with the exact lower bound of the minima before it (≥ the first's size, ≤ the
    brute-force minimum, said in its message), and any AXp it keeps hits every flipping support."""
    original = HittingSets.minimum
    stopped = 0
    for seed in range(10):
        problem = _cube(seed, 8, outputs)
        supports = _flipping_supports(problem)
        minimum = _smallest(supports, problem.n)
        sizes: list[int] = []

        def interrupted(
            self: HittingSets, limit: int | None, deadline: float = math.inf, sizes: list[int] = sizes
        ) -> frozenset[int] | None:
            if len(sizes) == 1:
                raise hitting.OracleTimeout
            found = original(self, limit, deadline)
            sizes.append(-1 if found is None else len(found))
            return found

        monkeypatch.setattr(HittingSets, "minimum", interrupted)
        result = hitting.minimum_abductive(problem, _vertex_oracle(problem, supports), None, math.inf, seed_after=math.inf)
        if result.status == Status.OPTIMAL:  # decided by its first minimum hitting set
            assert result.solution is not None and len(result.solution) == minimum, (seed, result)
            continue
        stopped += 1
        assert result.status in (Status.TIMEOUT, Status.FEASIBLE), (seed, result)
        assert sizes[-1] <= result.lower <= minimum and f"exact lower bound {result.lower}" in result.message, (seed, result)
        if result.solution is not None:
            assert all(set(result.solution) & s for s in supports), (seed, result)
    assert stopped >= 3  # the interruption was met, so the checks above ran


@pytest.mark.parametrize("outputs", [1, 3])
def test_screened_oracle_agrees_with_brute_force(outputs: int) -> None:
    """`Screened` answers None only where no flipping support lies inside the free set, and a point
    only where it flips exactly and agrees with x off the free set; it decides some questions
    itself (no-flip proofs of the exact bound), and the loop with it ends with the brute-force
    minimum."""
    rng = np.random.default_rng(3)
    proved = 0
    for seed in range(8):
        problem = _cube(seed, 8, outputs)
        supports = _flipping_supports(problem)
        oracle = hitting.Screened(problem, _vertex_oracle(problem, supports))
        assert oracle.applies
        for _ in range(12):
            free = frozenset(np.flatnonzero(rng.random(problem.n) < rng.random()).tolist())
            y = oracle(free, math.inf)
            if y is None:
                assert not any(s <= free for s in supports), (seed, free)
            else:
                assert problem.flips(y) and all(y[i] == problem.x[i] for i in range(problem.n) if i not in free), (seed, free)
        proved += oracle.proved
        result = hitting.minimum_abductive(problem, hitting.Screened(problem, _vertex_oracle(problem, supports)), None, math.inf)
        assert result.status == Status.OPTIMAL and result.solution is not None, (seed, result)
        assert len(result.solution) == _smallest(supports, problem.n), (seed, result)
    assert proved > 0

"""`Outcome.lower` (issue 51): the exact lower bound on the minimum explanation's size that an exact
engine proved during a call, whatever its status. Engines stopped early by a budget of oracle
questions or levels (never a clock) report bounds at most the brute-force minimum (`bruteforce`,
sharing no code with the engines; `fraction_oracle` in Fractions on continuous boxes), equal to it
where they finished; a message's "exact lower bound N" is the field's N; the guard carries the
field across its process boundary, a call killed there included; `Outcome.proves` returns it for
exact outcomes only, and certify's `judge` takes a stopped call's bound as the record's."""

from __future__ import annotations

import itertools
import re
import time
from fractions import Fraction

import cardinal.solvers.covering as covering
import cardinal.solvers.enumerate as enumerate_
import cardinal.solvers.exact_milp as exact_milp
import numpy as np
import pytest
from bruteforce import monotone_minimum, vertex_minimum
from cardinal.solvers.base import BaseSolver, get_solver, solve_problem
from cardinal.solvers.guard import GuardedSolver, report_lower
from cardinal.solvers.hitting import OracleTimeout
from cardinal.verify.certify import judge
from cardinal.verify.generate import median_threshold, random_network
from fraction_oracle import Oracle

from cardinal.domain import Domain
from cardinal.network import Network
from cardinal.problem import Evidence, Outcome, Problem, Proved, Status, Verdict
from tests.conftest import DESIGN_NETWORK

UNBOUNDED = 3600.0  # no run here comes near it: every stop below is a budget of questions


def _problem(seed: int, monotone: bool, kind: str, outputs: int = 1, binary: bool = True, n: int | None = None) -> Problem:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 9)) if n is None else n
    net = random_network(rng, n, (int(rng.integers(3, 6)), int(rng.integers(2, 4))), "relu", monotone=monotone, outputs=outputs)
    X = (rng.random((16, n)) < 0.5).astype(float) if binary else rng.random((16, n))
    threshold = median_threshold(net, X) if outputs == 1 else None
    domain = Domain.boolean(n) if binary else Domain.unit(n)
    return Problem.make(net, X[seed % 16], kind, domain, threshold)


def _said(outcome: Outcome) -> None:
    """Every "exact lower bound N" of the message is the field's N."""
    for said in re.findall(r"exact lower bound (\d+)", outcome.message):
        assert int(said) == outcome.lower, outcome


def _budgeted(monkeypatch: pytest.MonkeyPatch, questions: int) -> None:
    """The exact MILP's flip search answers `questions` questions, then stops as at a deadline."""
    asked = [0]
    original = exact_milp.flip_point

    def flip_point(problem: Problem, free: frozenset[int], deadline: float, split: bool = True) -> np.ndarray | None:
        asked[0] += 1
        if asked[0] > questions:
            raise OracleTimeout
        return original(problem, free, deadline, split)

    monkeypatch.setattr(exact_milp, "flip_point", flip_point)


@pytest.mark.parametrize("loop", ["covering", "hitting"])
@pytest.mark.parametrize("outputs", [1, 3])
def test_abductive_bounds_of_stopped_loops_are_at_most_the_brute_force_minimum(
    loop: str, outputs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Non-monotone AXps on Boolean cubes by the exact MILP (covering, or the implicit hitting-set
    loop), its flip search stopped after 0, 1, 3 or no questions: each bound reported is at most
    the brute-force minimum, equal to it where the call finished, and said in the message."""
    if loop == "hitting":
        monkeypatch.setattr(covering, "COVER_FEATURES", 0)
    reported = stopped = 0
    for seed in range(6):
        problem = _problem(seed, False, "abductive", outputs)
        minimum = vertex_minimum(problem)
        for questions in (0, 1, 3, None):
            with monkeypatch.context() as budget:
                if questions is not None:
                    _budgeted(budget, questions)
                outcome = solve_problem(exact_milp.ExactMilpSolver(), problem, None, UNBOUNDED)
            _said(outcome)
            assert outcome.status != Status.REFUTED, outcome
            if outcome.status == Status.OPTIMAL:
                assert outcome.lower == outcome.size == minimum, (seed, questions, outcome)
                continue
            assert outcome.status in (Status.FEASIBLE, Status.TIMEOUT), (seed, questions, outcome)
            stopped += 1
            if outcome.lower is not None:
                assert outcome.lower <= minimum, (seed, questions, minimum, outcome)
                assert outcome.proves(problem.n, None) == Proved(lower=outcome.lower)
                reported += outcome.lower > 0
    assert stopped and reported  # calls were stopped, and some knew a bound then


def test_monotone_level_scans_stopped_report_the_levels_proved(monkeypatch: pytest.MonkeyPatch) -> None:
    """enumerate on monotone networks (both kinds), its level scan stopped at the j-th level it
    asks: the bound is the lowest level not proved clear, at most the brute-force minimum; with
    no stop it answers the minimum."""
    original = enumerate_._Search._scan
    reported = 0
    for seed, kind in itertools.product(range(6), ("contrastive", "abductive")):
        problem = _problem(seed, True, kind, binary=False)
        minimum = monotone_minimum(problem)
        for scans in (1, 2, 3):
            asked = [0]

            def scan(self, base, target, k, asked=asked, scans=scans):
                asked[0] += 1
                if asked[0] > scans:
                    raise enumerate_._OutOfTime
                return original(self, base, target, k)

            with monkeypatch.context() as budget:
                budget.setattr(enumerate_._Search, "_scan", scan)
                outcome = solve_problem(get_solver("enumerate"), problem, None, UNBOUNDED)
            assert outcome.status in (Status.OPTIMAL, Status.FEASIBLE, Status.TIMEOUT, Status.NONE_EXISTS), outcome
            if outcome.status == Status.OPTIMAL:
                assert outcome.size == minimum, (seed, kind, outcome)
            if outcome.lower is not None:
                assert minimum is not None and 2 <= outcome.lower <= minimum, (seed, kind, scans, minimum, outcome)
                reported += 1
    assert reported


@pytest.mark.parametrize("outputs", [1, 3])
def test_ascending_vertex_levels_stopped_report_the_levels_proved(outputs: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """enumerate's ascending levels (non-monotone CXps on Boolean cubes) stopped at level j: the
    bound j is at most the brute-force minimum."""
    original = enumerate_._Search._scan
    reported = 0
    for seed in range(6):
        problem = _problem(seed, False, "contrastive", outputs)
        minimum = vertex_minimum(problem)
        for stop in (2, 3):

            def scan(self, base, target, k, stop=stop):
                if k >= stop:
                    raise enumerate_._OutOfTime
                return original(self, base, target, k)

            with monkeypatch.context() as budget:
                budget.setattr(enumerate_._Search, "_scan", scan)
                outcome = solve_problem(get_solver("enumerate"), problem, None, UNBOUNDED)
            if outcome.status == Status.TIMEOUT:
                assert outcome.lower == stop and (minimum is None or stop <= minimum), (seed, stop, minimum, outcome)
                reported += 1
            else:
                assert outcome.status in (Status.OPTIMAL, Status.NONE_EXISTS) and outcome.lower is None, outcome
    assert reported


def test_levels_proved_by_splitting_are_the_stopped_searchs_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Non-monotone CXps on continuous boxes whose levels stop after level 1 and whose branch and
    bound is stopped at once (set-by-set questions off): the levels proved by splitting are the
    bound, and no set below it flips in Fractions (`fraction_oracle`)."""
    original = exact_milp.by_levels
    monkeypatch.setattr(exact_milp, "SET_QUESTIONS", 0)
    monkeypatch.setattr(exact_milp, "by_levels", lambda problem, ask, below, deadline, proved: original(problem, ask, 2, deadline, proved))
    monkeypatch.setattr(exact_milp, "_by_class", lambda search: False)
    reported = 0
    for seed in range(8):  # seed 6: level 1 proved, the minimum larger
        rng = np.random.default_rng(50 + seed)
        net = random_network(rng, 8, (6, 4), "relu", monotone=False)
        X = rng.random((6, 8))
        problem = Problem.make(net, X[int(rng.integers(0, 6))], "contrastive", Domain.unit(8), median_threshold(net, X))
        outcome = solve_problem(exact_milp.ExactMilpSolver(), problem, None, UNBOUNDED)
        if outcome.lower is None:
            continue
        assert outcome.status in (Status.FEASIBLE, Status.TIMEOUT, Status.OPTIMAL), outcome
        assert f"levels 1 to {outcome.lower - 1} proved" in outcome.message, outcome
        oracle = Oracle(problem.net, problem.x, problem.threshold, problem.domain.lower, problem.domain.upper)
        assert not any(oracle.flips(s) is not False for s in itertools.combinations(range(8), outcome.lower - 1)), seed
        reported += 1
    assert reported


def test_proves_reads_lower_from_exact_unrefuted_outcomes_only() -> None:
    def outcome(status: Status, exact: bool = True, **fields) -> Outcome:
        return Outcome(status, "engine", 1.0, exact=exact, lower=5, **fields)

    for status in (Status.TIMEOUT, Status.FEASIBLE, Status.UNCONFIRMED, Status.SIZE_LIMIT):
        assert outcome(status).proves(10, None) == Proved(lower=5)
        assert outcome(status, exact=False).proves(10, None) == Proved()
    assert outcome(Status.REFUTED, claimed=Status.NONE_WITHIN).proves(10, 2) == Proved()
    assert outcome(Status.NONE_WITHIN).proves(10, 2) == Proved(lower=5)  # the larger of 3 and 5
    assert outcome(Status.NONE_WITHIN).proves(10, 7) == Proved(lower=8)
    assert outcome(Status.OPTIMAL, solution=(1, 2, 3, 4, 5), replayed=True).proves(10, None) == Proved(lower=5)
    # a bound alone claims nothing: not `proved`, and what a limit's answer is worth stays unchanged
    stopped = outcome(Status.TIMEOUT)
    assert not stopped.proved and stopped.evidence == Evidence.NONE
    assert stopped.to_json()["lower"] == 5 and "lower" not in Outcome(Status.TIMEOUT, "engine", 1.0).to_json()


def test_a_float_backend_reports_no_bound() -> None:
    """`BaseSolver.outcome` keeps `lower` from exact backends only."""

    class Float(BaseSolver):
        name, exact = "float", False

    class Exact(BaseSolver):
        name, exact = "exact", True

    started = time.perf_counter()
    assert Float().outcome(Status.TIMEOUT, started, lower=4).lower is None
    assert Exact().outcome(Status.TIMEOUT, started, lower=4).lower == 4


class BoundThenStops(BaseSolver):
    """Reports an exact lower bound of 2 for the DESIGN network's CXp (its minimum, {0, 2}), then
    stops: at once in its own process, or after `overrun` seconds (the guard kills it first)."""

    name, exact = "bound-then-stops", True

    def __init__(self, overrun: float = 0.0) -> None:
        self.overrun = overrun

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        started = time.perf_counter()
        report_lower(1)
        report_lower(2)
        time.sleep(self.overrun)
        return self.outcome(Status.TIMEOUT, started, lower=2, message="exact lower bound 2")


@pytest.mark.parametrize("overrun", [0.0, 60.0])
def test_the_guard_carries_the_bound(overrun: float) -> None:
    """In this process, guarded and answering, guarded and killed at its limit: the same bound."""
    problem = Problem.make(Network.from_json(DESIGN_NETWORK), np.ones(3), "contrastive", threshold=0.5)
    in_process = solve_problem(BoundThenStops(), problem, None, 1.0)
    with GuardedSolver("bound-then-stops", BoundThenStops, {"overrun": overrun}) as backend:
        assert backend.wait_started(time.perf_counter() + 300), "the solver process did not start"
        guarded = solve_problem(backend, problem, None, 1.0)
    assert (guarded.raw_status == "killed") == (overrun > 0), guarded
    assert in_process.lower == guarded.lower == 2, (in_process, guarded)
    assert guarded.status == Status.TIMEOUT and guarded.exact
    _said(guarded)
    _said(in_process)


def test_judge_takes_a_stopped_calls_bound() -> None:
    """certify's `judge`: an exact call stopped at its limit with a bound gives the record's lower
    bound, certifying nothing; a float one's gives none."""
    problem = Problem.make(Network.from_json(DESIGN_NETWORK), np.ones(3), "contrastive", threshold=0.5)
    exact = Outcome(Status.TIMEOUT, "exact-milp", 1.0, exact=True, lower=2)
    decision = judge(problem, None, {"exact-milp": exact}, None)
    assert decision.lower == 2 and not decision.certified and decision.verdict == Verdict.EXACT_ONLY
    floated = Outcome(Status.TIMEOUT, "highs", 1.0, lower=2)
    assert judge(problem, None, {"highs": floated}, None).lower == 1  # the definition's alone
    assert Fraction(decision.lower) <= 2  # the DESIGN network's minimum CXp, {0, 2}

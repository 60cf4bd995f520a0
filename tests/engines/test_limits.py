"""One meaning for a limit, on every backend: a call stopped by its limit that holds a valid set
within the bound answers FEASIBLE (and decides "greedy is not minimal", certified by the replay);
one that holds none answers TIMEOUT, with no set. Each backend is forced to its limit here."""

from __future__ import annotations

import math

import numpy as np
import pytest
import z3  # noqa: F401 (the [all] extras promise it: missing fails, not skips)
from cardinal.solvers import enumerate as enumeration
from cardinal.solvers import smt
from cardinal.solvers.base import available_solvers, get_solver, solve_problem
from cardinal.solvers.milp import MilpRun, RunState
from cardinal.verify.certify import GreedyAnswer, judge

from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.network import Layer, Network
from cardinal.problem import Problem, Status, Verdict

INSTALLED = available_solvers()


def sum_problem() -> Problem:
    """f = Σ y_i over [0,1]^6 at x = 0, t = 1.5: any two features make a CXp (the minimum)."""
    net = Network([Layer(np.ones((1, 6)), np.zeros(1), Activation.make("identity"))])
    return Problem.make(net, np.zeros(6), "contrastive", Domain.unit(6), 1.5)


def force_milp_limit(monkeypatch: pytest.MonkeyPatch, backend, keep_incumbent: bool) -> None:
    """Every run of `backend` ends at its time limit, with its solution as the incumbent (or none)."""
    real = backend._optimize

    def limited(model, time_limit):
        run = real(model, time_limit)
        return MilpRun(RunState.TIME_LIMIT, "TIME_LIMIT (forced)", run.values if keep_incumbent else None)

    monkeypatch.setattr(backend, "_optimize", limited)


def force_enumerate_limit(monkeypatch: pytest.MonkeyPatch, after: int) -> None:
    """The deadline passes after `after` level scans."""
    real = enumeration._Search._scan
    calls = [0]

    def limited(self, base, target, k):
        calls[0] += 1
        if calls[0] > after:
            raise enumeration._OutOfTime
        return real(self, base, target, k)

    monkeypatch.setattr(enumeration._Search, "_scan", limited)


def force_z3_limit(monkeypatch: pytest.MonkeyPatch, after: int) -> None:
    """z3 (or the lazy strategy's branch and bound, `solvers.branch`) answers "unknown" (its
    limit) from the `after`+1-th check on."""
    real, real_search = smt._run, smt.SubsetSearch.search
    calls = [0]

    def limited(solver, assumptions, deadline):
        calls[0] += 1
        return real(solver, assumptions, deadline) if calls[0] <= after else "unknown (forced limit)"

    def limited_search(search, k, deadline, nodes=None):
        calls[0] += 1
        return real_search(search, k, deadline, nodes) if calls[0] <= after else ("unknown (forced limit)", None)

    monkeypatch.setattr(smt, "_run", limited)
    monkeypatch.setattr(smt.SubsetSearch, "search", limited_search)


def force_oracle_limit(monkeypatch: pytest.MonkeyPatch, owner: type, method: str, after: int, stop: object) -> None:
    """`owner.method` (a cvc5 check, a Marabou flip query) answers `stop()` from its `after`+1-th call on."""
    real = getattr(owner, method)
    calls = [0]

    def limited(self, *args):
        calls[0] += 1
        return real(self, *args) if calls[0] <= after else stop()

    monkeypatch.setattr(owner, method, limited)
def force_exact_milp_limit(monkeypatch: pytest.MonkeyPatch, keep_incumbent: bool) -> None:
    """Every LP of the exact MILP's branch and bound ends at the deadline; its float MILP seed
    offers its incumbent (or nothing)."""
    from cardinal.solvers import exact_milp

    monkeypatch.setattr(exact_milp._Relaxation, "solve", lambda self, deadline: exact_milp._Lp(-math.inf, None, stopped=True))
    if not keep_incumbent:
        monkeypatch.setattr(exact_milp._Minimum, "seed", lambda self, seconds: None)


def _stopped_with(name: str, monkeypatch: pytest.MonkeyPatch, incumbent: bool, problem: Problem, at_most: int):
    backend = get_solver(name, **({"strategy": "encode"} if name == "z3" else {}))
    after = 1 if incumbent else 0
    if name in ("gurobi", "highs", "scip"):
        force_milp_limit(monkeypatch, backend, incumbent)
    elif name == "exact-milp":
        force_exact_milp_limit(monkeypatch, incumbent)
    elif name == "enumerate":
        force_enumerate_limit(monkeypatch, after=after)
    elif name == "cvc5":
        from cardinal.solvers import cvc

        force_oracle_limit(monkeypatch, cvc._Query, "_check", after, lambda: None)
    elif name == "marabou":
        from cardinal.solvers import hitting, marabou

        def timeout() -> None:
            raise hitting.OracleTimeout("forced limit")

        force_oracle_limit(monkeypatch, marabou._Query, "find_flip", after, timeout)
    else:
        force_z3_limit(monkeypatch, after=after)
    with backend:
        return solve_problem(backend, problem, at_most, 10.0)


@pytest.mark.parametrize("name", INSTALLED)
def test_a_limit_with_an_incumbent_is_feasible(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    problem = sum_problem()
    outcome = _stopped_with(name, monkeypatch, True, problem, at_most=4)
    assert outcome.status == Status.FEASIBLE, outcome
    assert outcome.replayed and 2 <= outcome.size <= 4
    # the verdict it gives: greedy (size 5 here, say) is not minimal, certified by the replay;
    # the minimum is the replayed set, unproved
    greedy = GreedyAnswer((0, 1, 2, 3, 4), 0.0)
    judgement = judge(problem, greedy, {name: outcome}, at_most=4)
    assert judgement.verdict == Verdict.GREEDY_SUBOPTIMAL and judgement.certified
    assert judgement.minimum == outcome.features and not judgement.minimum_proved


@pytest.mark.parametrize("name", INSTALLED)
def test_a_limit_without_an_incumbent_is_timeout_with_no_set(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    problem = sum_problem()
    outcome = _stopped_with(name, monkeypatch, False, problem, at_most=4)
    assert outcome.status == Status.TIMEOUT and not outcome.has_solution, outcome
    judgement = judge(problem, GreedyAnswer((0, 1, 2, 3, 4), 0.0), {name: outcome}, at_most=4)
    assert judgement.verdict == Verdict.UNKNOWN and not judgement.certified and not judgement.minimum_proved
    assert judgement.minimum == (0, 1, 2, 3, 4)  # the best set known: the explainer's, never a timeout's "nothing smaller"


def test_z3_lazy_strategy_keeps_its_first_set_at_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    force_z3_limit(monkeypatch, after=0)
    with get_solver("z3") as backend:  # the lazy strategy shrinks the full set before any z3 call
        outcome = solve_problem(backend, sum_problem(), 4, 10.0)
    assert outcome.status == Status.FEASIBLE and outcome.replayed and outcome.size == 2

"""The driver the MILP backends share: what to encode for a problem, how a backend's run becomes
an `Outcome`, and the flip oracle of the hitting-set loop for AXps of non-monotone networks.

A backend subclasses `MilpSolver` and implements only `_optimize(model, time_limit) → MilpRun`.
Monotone networks are answered by the bound-vector MILP after the exact monotone shortcut:
p(x') = p(x) means no CXp at all and the empty set as the minimum AXp. The answers are not
replayed here; `solvers.base.solve_problem` does that.

Witnesses on a continuous box. The models reach class 0 with `f ≤ t` (`solvers.encode`: the ε
sits on the strict side only), so a witness y may sit on the boundary f = t, where rounding
decides whether it flips in exact arithmetic. A witness that does not flip exactly (of a CXp
answer, or of the flip oracle) is asked for once more from the model with margins
(`encode(..., margin=True)`), whose points keep ε off that boundary; only the first model's
infeasibility is ever read as "no flip".
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

import numpy as np

from cardinal.errors import Stopped
from cardinal.exact import modified_inputs
from cardinal.problem import Outcome, Problem, Status, stopped

from .base import BaseSolver
from .encode import MilpModel, encode, refusing_unencodable
from .hitting import OracleCalls, OracleTimeout, Screened, minimum_abductive


class RunState(StrEnum):
    """How one MILP run ended, in backend-neutral terms."""

    OPTIMAL = "optimal"  # proved optimal (for a feasibility model: a feasible point)
    INFEASIBLE = "infeasible"
    TIME_LIMIT = "time_limit"  # `values` holds the incumbent if there is one
    SIZE_LIMIT = "size_limit"  # licence or memory cap
    OTHER = "other"  # numerical trouble, interruption, …: no verdict


@dataclass(frozen=True)
class MilpRun:
    """The result of one MILP run: its state, the backend's own status string, and the values of
    all V variables at the best point found ([V], or None when there is none)."""

    state: RunState
    raw_status: str
    values: np.ndarray | None = None


class _Stopped(Stopped):
    """A flip-oracle run ended without a verdict (size limit or other trouble)."""

    def __init__(self, run: MilpRun) -> None:
        super().__init__(run.raw_status)
        self.run = run


class MilpSolver(BaseSolver):
    """A float-MILP backend: the shared front of `GurobiSolver` and `HighsSolver`."""

    exact = False

    def _optimize(self, model: MilpModel, time_limit: float) -> MilpRun:
        """Solve `model` within `time_limit` seconds (> 0)."""
        raise NotImplementedError

    @refusing_unencodable
    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        started = time.perf_counter()
        deadline = started + time_limit
        if not problem.net.is_piecewise_linear:
            message = f"a MILP encodes piecewise-linear activations only; not so {problem.net.smooth_layers()}"
            return self.outcome(Status.UNSUPPORTED, started, message=message)
        if problem.monotone:
            early = self._monotone_shortcut(problem, started)
            if early is not None:
                return early
        elif problem.kind == "abductive":
            return self._hitting_sets(problem, at_most, started, deadline)
        model = encode(problem, at_most)
        run = self._optimize(model, max(deadline - time.perf_counter(), 1e-3))
        return self._outcome(problem, model, run, at_most, started, deadline)

    def _monotone_shortcut(self, problem: Problem, started: float) -> Outcome | None:
        """The exact answers a monotone network gives without a MILP, or None."""
        if (unmoved := self.unmoved(problem, started)) is not None:
            return unmoved
        # every set reaches at most the output of the full set's point; class 1 needs f ≥ t + ε
        reach = problem.exact.outputs(problem.target[None, :])[0][0].upper
        if problem.goal == 1 and reach < problem.exact_threshold + Fraction(problem.epsilon):
            return self.outcome(
                Status.UNSUPPORTED, started, message=f"f reaches class 1 only within ε = {problem.epsilon} of the threshold"
            )
        return None

    def _outcome(
        self, problem: Problem, model: MilpModel, run: MilpRun, at_most: int | None, started: float, deadline: float
    ) -> Outcome:
        """Map a run of the minimization model to an Outcome (a witness that does not flip exactly
        is asked for again with margins, within the deadline: module docstring)."""
        solution = witness = None
        if run.values is not None and run.state in (RunState.OPTIMAL, RunState.TIME_LIMIT):
            solution = tuple(int(i) for i in np.flatnonzero(run.values[model.selectors] > 0.5))
            if problem.kind == "contrastive":
                y = _witness(problem, model, run.values, solution)
                if not problem.monotone and not problem.flips(y):
                    y = _first(self._margin_witness(problem, frozenset(solution), deadline), y)
                witness = tuple(y.tolist())
        if run.state is RunState.OPTIMAL and solution is not None:
            return self.outcome(Status.OPTIMAL, started, solution=solution, witness=witness, raw_status=run.raw_status)
        if run.state is RunState.INFEASIBLE:
            if at_most is not None:
                status = Status.NONE_WITHIN
            elif problem.kind == "contrastive" and not problem.monotone:
                status = Status.NONE_EXISTS
            else:  # the full set is an explanation here, so the float MILP is wrong
                return self.outcome(
                    Status.ERROR, started, raw_status=run.raw_status, message="MILP infeasible though an explanation exists"
                )
            return self.outcome(status, started, raw_status=run.raw_status)
        if run.state is RunState.TIME_LIMIT:
            status, kept = stopped(solution, at_most)
            return self.outcome(status, started, solution=kept, witness=witness if kept else None, raw_status=run.raw_status)
        if run.state is RunState.SIZE_LIMIT:
            return self.outcome(Status.SIZE_LIMIT, started, raw_status=run.raw_status)
        return self.outcome(Status.ERROR, started, raw_status=run.raw_status, message="no verdict from the MILP")

    def _hitting_sets(self, problem: Problem, at_most: int | None, started: float, deadline: float) -> Outcome:
        """Minimum AXp of a non-monotone network by implicit hitting sets, this backend as oracle
        behind the exact screens (`hitting.Screened`)."""
        last = [""]

        def find_flip(free: frozenset[int], until: float) -> np.ndarray | None:
            remaining = until - time.perf_counter()
            if remaining <= 0:
                raise OracleTimeout
            model = encode(problem, free=free)
            run = self._optimize(model, remaining)
            last[0] = run.raw_status
            if run.state is RunState.OPTIMAL and run.values is not None:
                y = _witness(problem, model, run.values, tuple(sorted(free)))
                # a y that does not flip exactly ends the loop with no verdict (`hitting`), unless the
                # model with margins gives one that does
                return y if problem.flips(y) else _first(self._margin_witness(problem, free, until), y)
            if run.state is RunState.INFEASIBLE:
                return None
            if run.state is RunState.TIME_LIMIT:
                raise OracleTimeout
            raise _Stopped(run)

        oracle = Screened(problem, find_flip, self.supply)  # the exact screens before the MILP
        calls = OracleCalls()
        try:
            result = minimum_abductive(problem, oracle, at_most, deadline, self.supply, calls=calls)
        except _Stopped as stop:
            status = Status.SIZE_LIMIT if stop.run.state is RunState.SIZE_LIMIT else Status.ERROR
            return self.outcome(status, started, raw_status=stop.run.raw_status, message="flip oracle stopped")
        message = f"{calls.count} oracle calls ({oracle.summary()})" + (f"; {result.message}" if result.message else "")
        fields = {"solution": result.solution, "raw_status": last[0], "message": message, "lemmas": result.lemmas}
        return self.outcome(result.status, started, **fields)

    def _margin_witness(self, problem: Problem, free: frozenset[int], deadline: float) -> np.ndarray | None:
        """A point y [n] that agrees with x off `free` and flips the prediction in exact arithmetic,
        from the flip model with margins (`encode(..., margin=True)`); None when there is no time
        left, on a binary box (where margins change nothing), or when that model gives no such y."""
        remaining = deadline - time.perf_counter()
        if remaining <= 0 or problem.domain.binary:
            return None
        model = encode(problem, free=free, margin=True)
        run = self._optimize(model, remaining)
        if run.state is not RunState.OPTIMAL or run.values is None:
            return None
        y = _witness(problem, model, run.values, tuple(sorted(free)))
        return y if problem.flips(y) else None


def _first(preferred: np.ndarray | None, fallback: np.ndarray) -> np.ndarray:
    return fallback if preferred is None else preferred


def _witness(problem: Problem, model: MilpModel, values: np.ndarray, features: tuple[int, ...]) -> np.ndarray:
    """A point y [n] equal to x outside `features`, from the MILP's y there: the exact
    counterpoint on monotone networks, else snapped into the box (to an end point on a binary
    domain)."""
    if problem.monotone:
        return modified_inputs(problem.x, features, problem.counterpoint)
    lower, upper = problem.domain.lower, problem.domain.upper
    raw = np.clip(values[model.inputs], lower, upper)
    if problem.domain.binary:
        raw = np.where(raw - lower < upper - raw, lower, upper)
    return modified_inputs(problem.x, features, raw)

"""The one front over every exact backend: the `Solver` protocol, the registry, the exact
replay, and `solve_minimum` (the problem and outcome types live in `verify.problem`).

A backend answers "what is a minimum explanation?" or, with `at_most=k`, "is there one of size
≤ k?". Whatever it claims about a concrete set or witness is replayed in exact arithmetic here
before it is returned; a claim the replay refutes comes back as `Status.REFUTED`, never silently
corrected. A timeout or a licence limit is never read as "no smaller explanation".
"""

from __future__ import annotations

import importlib
import time
from dataclasses import replace
from types import TracebackType
from typing import Any, Protocol

import numpy as np

from ..verify.domain import Domain
from ..verify.errors import InputError
from ..verify.network import Network
from ..verify.problem import DEFAULT_EPSILON, Outcome, Problem, Status
from .guard import GuardedSolver, lent


class Solver(Protocol):
    """What every backend provides. Backends are context managers that free their resources."""

    name: str
    exact: bool

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome: ...

    def close(self) -> None: ...

    def __enter__(self) -> Solver: ...

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None: ...


class BaseSolver:
    """Context-manager plumbing shared by the backends."""

    name = "base"
    exact = False

    def close(self) -> None:
        """Free solver resources (environments, models); the default holds none."""

    def __enter__(self) -> BaseSolver:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()

    def outcome(self, status: Status, started: float, **fields: Any) -> Outcome:
        """An Outcome stamped with this backend's name, exactness and the seconds since `started`."""
        return Outcome(status, self.name, time.perf_counter() - started, exact=self.exact, **fields)


# name → (module, class, pip extra that installs its library)
_REGISTRY: dict[str, tuple[str, str, str | None]] = {
    "gurobi": ("cardinal.solvers.gurobi", "GurobiSolver", "gurobi"),
    "highs": ("cardinal.solvers.highs", "HighsSolver", "highs"),
    "z3": ("cardinal.solvers.smt", "Z3Solver", "z3"),
    "enumerate": ("cardinal.solvers.enumerate", "EnumerateSolver", None),
}
SOLVER_NAMES = tuple(_REGISTRY)


def get_solver(name: str, guarded: bool = False, **options: Any) -> Solver:
    """A fresh backend by name; raises `InputError` for an unknown or uninstalled backend.

    `guarded`: run it in a child process that is killed when a call overruns its time limit
    (`solvers.guard`): what certify and crosscheck use, so that every limit holds.
    """
    if name not in _REGISTRY:
        raise InputError(f"unknown solver {name!r} (known: {', '.join(SOLVER_NAMES)})")
    module_name, class_name, extra = _REGISTRY[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        hint = f"pip install 'cardinal[{extra}]'" if extra else "reinstall cardinal"
        raise InputError(f"solver {name!r} is not installed ({error.name} missing): {hint}") from None
    factory = getattr(module, class_name)
    return GuardedSolver(name, factory, options) if guarded else factory(**options)


def available_solvers() -> tuple[str, ...]:
    """Names of the backends whose libraries import here."""
    found = []
    for name in SOLVER_NAMES:
        try:
            get_solver(name).close()
        except InputError:
            continue
        found.append(name)
    return tuple(found)


def replay(problem: Problem, outcome: Outcome) -> Outcome:
    """Re-check in exact arithmetic what the outcome claims about concrete sets and points.

    Checked: a returned set is an explanation (monotone networks: the shortcut; otherwise the
    contrastive witness); a NONE_EXISTS claim (p(x') = p(x) on a monotone network). A failed
    check turns the outcome into REFUTED (`Outcome.refuted`: the claim kept in `claimed`, the reason
    in `message`). Lower bounds (OPTIMAL's minimality,
    NONE_WITHIN) cannot be replayed; `Outcome.exact` says whether an exact backend made them.
    """
    if outcome.status == Status.NONE_EXISTS:
        return _replay_none_exists(problem, outcome)
    if outcome.solution is None:
        return outcome
    features = outcome.solution
    if outcome.status in (Status.FEASIBLE, Status.OPTIMAL) and problem.kind == "contrastive" and not features:
        return replace(outcome.refuted("an empty set is never a contrastive explanation"), replayed=True)
    if problem.monotone:
        valid = problem.is_explanation(features)
        reason = f"exact check: {set(features)} is not a {problem.kind} explanation"
    elif problem.kind == "contrastive":
        valid, reason = _check_witness(problem, features, outcome.witness)
    else:
        # A non-monotone AXp is a universal claim: its proof is the backend's final oracle call.
        return replace(outcome, replayed=outcome.exact)
    if valid is None:
        return replace(
            outcome, message=(outcome.message + "; " if outcome.message else "") + "exact replay undecided (smooth margin)"
        )
    if not valid:
        return replace(outcome.refuted(reason), replayed=True)
    return replace(outcome, replayed=True)


def _replay_none_exists(problem: Problem, outcome: Outcome) -> Outcome:
    if problem.kind == "abductive":
        return replace(outcome.refuted("the full feature set is always an AXp"), replayed=True)
    if not problem.monotone:
        return outcome  # a universal claim on a non-monotone network: only the backend's proof stands
    flips = problem.flips(problem.counterpoint)
    if flips is None:
        return outcome
    if flips:
        return replace(outcome.refuted("exact check: x' flips the prediction, so a CXp exists"), replayed=True)
    return replace(outcome, replayed=True)


def _check_witness(problem: Problem, features: tuple[int, ...], witness: tuple[float, ...] | None) -> tuple[bool | None, str]:
    if witness is None:
        return False, "no witness point given for a contrastive set"
    y = np.asarray(witness, dtype=np.float64)
    outside = [i for i in range(problem.n) if i not in set(features) and y[i] != problem.x[i]]
    if outside:
        return False, f"witness changes feature {outside[0]}, which is not in the set"
    try:
        problem.domain.check(y[None, :], source="witness")
    except InputError as error:
        return False, str(error)
    flips = problem.flips(y)
    return flips, "exact check: the witness does not flip the prediction"


def solve_minimum(
    net: Network,
    x: np.ndarray,
    kind: str = "contrastive",
    domain: Domain | None = None,
    threshold: float = 0.0,
    solver: str = "enumerate",
    time_limit: float = 60.0,
    at_most: int | None = None,
    epsilon: float = DEFAULT_EPSILON,
    guarded: bool = True,
) -> Outcome:
    """A minimum explanation of `kind` for x [n] by the named backend, replayed exactly.

    With `at_most=k` only "is there one of size ≤ k?" is asked: certifying a greedy answer of
    size g is one call with k = g − 1 (NONE_WITHIN means greedy is minimal). `guarded`: the call
    runs in a child process stopped at the time limit plus `solvers.guard.allowed_overrun`, so
    the limit holds whatever the backend does (the process of an earlier guarded call on the
    same backend serves it, `solvers.guard.lent`); False runs it in this process.
    """
    problem = Problem.make(net, x, kind, domain, threshold, epsilon)
    if at_most is not None and at_most < 0:
        raise InputError(f"at_most must be ≥ 0, got {at_most}")
    if not time_limit > 0:
        raise InputError(f"time limit must be positive, got {time_limit}")
    if not guarded:
        with get_solver(solver) as backend:
            return solve_problem(backend, problem, at_most, time_limit)
    with lent(solver, lambda: get_solver(solver, guarded=True)) as backend:  # an earlier call's started process
        return solve_problem(backend, problem, at_most, time_limit)


def solve_problem(backend: Solver, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
    """Run an open backend on a problem and replay its answer; backend crashes become ERROR."""
    started = time.perf_counter()
    try:
        outcome = backend.solve(problem, at_most, time_limit)
    except (InputError, KeyboardInterrupt):
        raise
    except Exception as error:  # a backend failure is a result to log, not a crash of the campaign
        return Outcome(
            Status.ERROR,
            backend.name,
            time.perf_counter() - started,
            exact=backend.exact,
            message=f"{type(error).__name__}: {error}",
        )
    return replay(problem, outcome)

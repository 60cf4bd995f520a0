"""The one front over every exact backend: `Problem`, `Status`, `Outcome`, the registry, the
exact replay, and `solve_minimum`.

A backend answers "what is a minimum explanation?" or, with `at_most=k`, "is there one of size
≤ k?". Whatever it claims about a concrete set or witness is replayed in exact arithmetic here
before it is returned; a claim the replay refutes comes back as `Status.REFUTED`, never silently
corrected. A timeout or a licence limit is never read as "no smaller explanation".
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field, replace
from enum import StrEnum
from fractions import Fraction
from functools import cached_property
from types import TracebackType
from typing import Any, Protocol

import numpy as np

from ..verify.domain import Domain
from ..verify.errors import InputError
from ..verify.exact import ExactNetwork, check_monotone_explanation
from ..verify.network import Network

KINDS = ("contrastive", "abductive")
DEFAULT_EPSILON = 1e-6


class Status(StrEnum):
    """How a backend's call ended. Only OPTIMAL, NONE_WITHIN and NONE_EXISTS are verdicts."""

    OPTIMAL = "optimal"  # `features` is a minimum explanation
    FEASIBLE = "feasible"  # `features` is an explanation of size ≤ at_most; minimality not proved
    NONE_WITHIN = "none_within"  # no explanation of size ≤ at_most
    NONE_EXISTS = "none_exists"  # no explanation of this kind at all
    TIMEOUT = "timeout"  # time limit reached; `features` may hold the best found so far
    SIZE_LIMIT = "size_limit"  # a licence or memory cap
    UNSUPPORTED = "unsupported"  # e.g. a smooth activation in MILP or SMT
    REFUTED = "refuted"  # the backend's claim failed the exact replay
    ERROR = "error"

    @property
    def is_verdict(self) -> bool:
        return self in (Status.OPTIMAL, Status.NONE_WITHIN, Status.NONE_EXISTS)


class MissingSolutionError(LookupError):
    """Asked for the explanation of an outcome that has none."""


@dataclass(frozen=True)
class Outcome:
    """The answer of one backend call.

    `solution`: the explanation found (sorted feature indices), or the best one at a timeout.
    `witness`: for a contrastive answer, a point y of the box that agrees with x outside the set
    and flips the prediction. `exact`: the verdict was reached in exact arithmetic (z3,
    enumerate) rather than by a float MILP. `replayed`: the returned set (or the none-exists
    claim) was confirmed in exact arithmetic.
    """

    status: Status
    solver: str
    seconds: float
    solution: tuple[int, ...] | None = None
    witness: tuple[float, ...] | None = None
    raw_status: str = ""
    exact: bool = False
    replayed: bool = False
    message: str = ""

    @property
    def has_solution(self) -> bool:
        return self.solution is not None

    @property
    def features(self) -> tuple[int, ...]:
        if self.solution is None:
            raise MissingSolutionError(f"{self.solver}: status {self.status.value} carries no explanation")
        return self.solution

    @property
    def size(self) -> int:
        return len(self.features)

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "status": self.status.value,
            "features": None if self.solution is None else list(self.solution),
            "size": None if self.solution is None else len(self.solution),
            "seconds": round(self.seconds, 6),
            "exact": self.exact,
            "replayed": self.replayed,
        }
        if self.witness is not None:
            document["witness"] = list(self.witness)
        if self.raw_status:
            document["raw_status"] = self.raw_status
        if self.message:
            document["message"] = self.message
        return document


@dataclass(frozen=True, eq=False)
class Problem:
    """One explanation problem: network, input x [n], kind, domain, threshold, and ε (the margin
    a float MILP demands to reach class 1: f ≥ t + ε). `prediction` is p(x), decided exactly."""

    net: Network
    x: np.ndarray
    kind: str
    domain: Domain
    threshold: float
    epsilon: float = DEFAULT_EPSILON
    prediction: int = field(default=-1)

    @classmethod
    def make(
        cls,
        net: Network,
        x: np.ndarray,
        kind: str = "contrastive",
        domain: Domain | None = None,
        threshold: float = 0.0,
        epsilon: float = DEFAULT_EPSILON,
    ) -> Problem:
        if kind not in KINDS:
            raise InputError(f"unknown kind {kind!r} (use contrastive or abductive)")
        if not epsilon > 0:
            raise InputError(f"epsilon must be positive, got {epsilon}")
        domain = domain if domain is not None else Domain.unit(net.n_inputs)
        if domain.n != net.n_inputs:
            raise InputError(f"domain has {domain.n} features, the network has {net.n_inputs} inputs")
        checked = domain.check(np.asarray(x, dtype=np.float64).reshape(1, -1))[0]
        problem = cls(net, checked, kind, domain, float(threshold), float(epsilon))
        prediction = int(problem.exact.predictions(checked[None, :], threshold)[0])
        if prediction < 0:
            raise InputError("the prediction of x is undecided: f(x) lies within the stated margin of the threshold")
        object.__setattr__(problem, "prediction", prediction)
        return problem

    @cached_property
    def exact(self) -> ExactNetwork:
        return ExactNetwork(self.net)

    @property
    def n(self) -> int:
        return self.net.n_inputs

    @property
    def monotone(self) -> bool:
        return self.net.is_monotone

    @property
    def counterpoint(self) -> np.ndarray:
        """x' of the monotone shortcut: the lower corner if p(x) = 1, else the upper one [n]."""
        return self.domain.counterpoint(np.array([self.prediction]))[0]

    @property
    def exact_threshold(self) -> Fraction:
        return Fraction(self.threshold)

    def flips(self, y: np.ndarray) -> bool | None:
        """Exactly: does p(y) differ from p(x)? None if a smooth enclosure leaves it undecided."""
        predicted = int(self.exact.predictions(np.asarray(y, dtype=np.float64)[None, :], self.threshold)[0])
        return None if predicted < 0 else predicted != self.prediction


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


def get_solver(name: str, **options: Any) -> Solver:
    """A fresh backend by name; raises `InputError` for an unknown or uninstalled backend."""
    if name not in _REGISTRY:
        raise InputError(f"unknown solver {name!r} (known: {', '.join(SOLVER_NAMES)})")
    module_name, class_name, extra = _REGISTRY[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        hint = f"pip install 'cardinal[{extra}]'" if extra else "reinstall cardinal"
        raise InputError(f"solver {name!r} is not installed ({error.name} missing): {hint}") from None
    return getattr(module, class_name)(**options)


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
    check turns the outcome into REFUTED with the reason. Lower bounds (OPTIMAL's minimality,
    NONE_WITHIN) cannot be replayed; `Outcome.exact` says whether an exact backend made them.
    """
    if outcome.status == Status.NONE_EXISTS:
        return _replay_none_exists(problem, outcome)
    if outcome.solution is None:
        return outcome
    features = outcome.solution
    if outcome.status in (Status.FEASIBLE, Status.OPTIMAL) and problem.kind == "contrastive" and not features:
        return replace(outcome, status=Status.REFUTED, message="an empty set is never a contrastive explanation")
    if problem.monotone:
        valid = check_monotone_explanation(problem.exact, problem.x, features, problem.kind, problem.domain, problem.threshold)
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
        return replace(outcome, status=Status.REFUTED, replayed=True, message=f"{reason} (backend said {outcome.status.value})")
    return replace(outcome, replayed=True)


def _replay_none_exists(problem: Problem, outcome: Outcome) -> Outcome:
    if problem.kind == "abductive":
        return replace(outcome, status=Status.REFUTED, replayed=True, message="the full feature set is always an AXp")
    if not problem.monotone:
        return outcome  # a universal claim on a non-monotone network: only the backend's proof stands
    flips = problem.flips(problem.counterpoint)
    if flips is None:
        return outcome
    if flips:
        return replace(
            outcome, status=Status.REFUTED, replayed=True, message="exact check: x' flips the prediction, so a CXp exists"
        )
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
) -> Outcome:
    """A minimum explanation of `kind` for x [n] by the named backend, replayed exactly.

    With `at_most=k` only "is there one of size ≤ k?" is asked: certifying a greedy answer of
    size g is one call with k = g − 1 (NONE_WITHIN means greedy is minimal).
    """
    problem = Problem.make(net, x, kind, domain, threshold, epsilon)
    if at_most is not None and at_most < 0:
        raise InputError(f"at_most must be ≥ 0, got {at_most}")
    if not time_limit > 0:
        raise InputError(f"time limit must be positive, got {time_limit}")
    with get_solver(solver) as backend:
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

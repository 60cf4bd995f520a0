"""Greedy vs exact solvers: one `Certificate` per input and kind, with a verdict.

For a monotone network the greedy answer (size g, re-checked exactly) is certified by one call
per solver asking "is there an explanation of size ≤ g − 1?". The verdicts:

* `greedy_minimal`     — solvers say no smaller one exists, none found one;
* `greedy_suboptimal`  — a solver found a smaller explanation and it holds in exact arithmetic;
* `none_exists`        — there is no contrastive explanation at all (greedy and solvers agree);
* `solver_disagreement`— solvers contradict each other (or one's claim failed the exact replay);
* `unknown`            — no solver reached a verdict (timeouts, limits, unsupported);
* `exact_only`         — the network is not monotone: no greedy, solvers give the minimum.

`certified` is true when the verdict rests on exact arithmetic: a smaller set or a none-exists
claim replayed exactly, a "no smaller" claim by an exact backend (z3, enumerate), or, for a
greedy answer of size 1, an exact check that the empty set is no explanation. A float MILP's
"no smaller" alone gives the verdict but not the certificate.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..solvers.base import Solver, get_solver, solve_problem
from .cases import Case
from .domain import Domain
from .exact import check_monotone_explanation, modified_inputs
from .greedy import ExplainResult, explain
from .network import Network
from .problem import Outcome, Problem, Status

VERDICTS = ("greedy_minimal", "greedy_suboptimal", "none_exists", "solver_disagreement", "unknown", "exact_only")


@dataclass(frozen=True)
class GreedyAnswer:
    features: tuple[int, ...] | None  # None: no explanation of this kind exists
    seconds: float  # the batched run's time divided by its rows
    check: str = "exact"  # from `explain(..., verify=True)`: exact, repaired or undecided

    @property
    def size(self) -> int | None:
        return None if self.features is None else len(self.features)

    def to_json(self) -> dict[str, Any] | None:
        if self.features is None:
            return None
        return {"features": list(self.features), "size": len(self.features), "seconds": round(self.seconds, 6)}


@dataclass(frozen=True)
class Certificate:
    """Greedy vs solvers for one input and kind."""

    row: int
    kind: str
    prediction: int
    greedy: GreedyAnswer | None  # None when the network is not monotone
    solvers: dict[str, Outcome]
    verdict: str
    certified: bool
    minimum: tuple[int, ...] | None = None  # the smallest explanation known (exactly replayed)
    notes: tuple[str, ...] = field(default=())
    minimum_proved: bool = False  # a solver proved no smaller one exists (else `minimum` is an upper bound)

    def to_json(self) -> dict[str, Any]:
        greedy = None if self.greedy is None else self.greedy.to_json()
        return {
            "row": self.row,
            "kind": self.kind,
            "prediction": self.prediction,
            "greedy": greedy,
            "greedy_exists": None if self.greedy is None else self.greedy.features is not None,
            "solvers": {name: outcome.to_json() for name, outcome in self.solvers.items()},
            "verdict": self.verdict,
            "certified": self.certified,
            "minimum": None if self.minimum is None else list(self.minimum),
            "minimum_proved": self.minimum_proved,
            "notes": list(self.notes),
        }


class SolverPool:
    """Open backends by name, reused across calls and closed together; runs HiGHS in place of
    Gurobi when Gurobi's licence is too small for a model (`fallback=True`). Each backend runs
    guarded (`solvers.guard`): its time limit holds even where the backend ignores it."""

    def __init__(self, names: Iterable[str], fallback: bool = True) -> None:
        self.names = tuple(dict.fromkeys(names))
        self.backends: dict[str, Solver] = {name: get_solver(name, guarded=True) for name in self.names}
        self.fallback = fallback and "gurobi" in self.backends and "highs" not in self.backends
        self._highs: Solver | None = None

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> tuple[dict[str, Outcome], list[str]]:
        outcomes: dict[str, Outcome] = {}
        notes: list[str] = []
        for name, backend in self.backends.items():
            outcomes[name] = solve_problem(backend, problem, at_most, time_limit)
            if name == "gurobi" and outcomes[name].status == Status.SIZE_LIMIT and self.fallback:
                self._highs = self._highs or get_solver("highs", guarded=True)
                outcomes["highs"] = solve_problem(self._highs, problem, at_most, time_limit)
                notes.append("gurobi hit its licence size limit; highs ran in its place")
        return outcomes, notes

    def close(self) -> None:
        for backend in [*self.backends.values(), *([self._highs] if self._highs else [])]:
            backend.close()

    def __enter__(self) -> SolverPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def greedy_answers(
    net: Network, X: np.ndarray, kind: str, domain: Domain, threshold: float
) -> tuple[ExplainResult, list[GreedyAnswer]]:
    """Greedy explanations for X [B, n], re-checked exactly (`explain(..., verify=True)`)."""
    started = time.perf_counter()
    result = explain(net, X, kind=kind, domain=domain, threshold=threshold, device="cpu", verify=True)
    per_row = (time.perf_counter() - started) / max(1, len(X))
    checks = result.checks or ("exact",) * len(X)
    return result, [GreedyAnswer(result.features(row), per_row, checks[row]) for row in range(len(X))]


def certify_row(
    pool: SolverPool,
    problem: Problem,
    greedy: GreedyAnswer | None,
    time_limit: float,
    row: int = 0,
) -> Certificate:
    """Run every solver on one problem and judge the greedy answer (None: not monotone)."""
    if greedy is None:
        outcomes, notes = pool.solve(problem, None, time_limit)
        verdict, certified, minimum = _judge_exact_only(outcomes)
    elif greedy.features == ():  # an empty AXp: nothing can be smaller
        outcomes, notes = {}, ["empty abductive explanation: minimal by definition"]
        verdict, certified, minimum = "greedy_minimal", True, ()
    elif greedy.features is None:
        outcomes, notes = pool.solve(problem, None, time_limit)
        verdict, certified, minimum = _judge_none_exists(outcomes)
    else:
        outcomes, notes = pool.solve(problem, len(greedy.features) - 1, time_limit)
        verdict, certified, minimum = _judge_greedy(outcomes, greedy.features)
    notes += [f"{name}: {outcome.message}" for name, outcome in outcomes.items() if outcome.message]
    if verdict == "greedy_minimal" and not certified and greedy is not None and len(greedy.features or ()) == 1:
        # Size 1 is minimal iff the empty set is no explanation: one exact evaluation decides it.
        empty = check_monotone_explanation(problem.exact, problem.x, (), problem.kind, problem.domain, problem.threshold)
        if empty is False:
            certified = True
            notes.append("size 1: the empty set is not an explanation (exact check)")
    if greedy is not None and greedy.check == "undecided":
        certified = False
        notes.append("greedy answer undecided in exact arithmetic (smooth network within its margin)")
    proved = minimum is not None and (
        verdict == "greedy_minimal"
        or any(o.status == Status.OPTIMAL and o.replayed and o.size == len(minimum) for o in outcomes.values())
    )
    return Certificate(row, problem.kind, problem.prediction, greedy, outcomes, verdict, certified, minimum, tuple(notes), proved)


def certify(
    net: Network,
    X: np.ndarray,
    kind: str,
    domain: Domain | None = None,
    threshold: float = 0.0,
    solvers: Iterable[str] = ("enumerate",),
    time_limit: float = 60.0,
    epsilon: float = 1e-6,
) -> list[Certificate]:
    """Certificates for every row of X [B, n] (or [n]) and one kind."""
    domain = domain if domain is not None else Domain.unit(net.n_inputs)
    X = domain.check(X)
    answers: list[GreedyAnswer | None] = [None] * len(X)
    if net.is_monotone:
        _, answers = greedy_answers(net, X, kind, domain, threshold)  # type: ignore[assignment]
    with SolverPool(solvers) as pool:
        return [
            certify_row(pool, Problem.make(net, x, kind, domain, threshold, epsilon), answer, time_limit, row)
            for row, (x, answer) in enumerate(zip(X, answers, strict=True))
        ]


def _smallest(outcomes: dict[str, Outcome]) -> tuple[int, ...] | None:
    found = [o.solution for o in outcomes.values() if o.solution is not None and o.replayed and o.status != Status.TIMEOUT]
    return min(found, key=lambda s: (len(s), s)) if found else None


def _judge_greedy(outcomes: dict[str, Outcome], greedy: tuple[int, ...]) -> tuple[str, bool, tuple[int, ...] | None]:
    smaller = {name for name, o in outcomes.items() if o.status in (Status.OPTIMAL, Status.FEASIBLE) and o.replayed}
    no_smaller = {name for name, o in outcomes.items() if o.status == Status.NONE_WITHIN}
    refuted = {name for name, o in outcomes.items() if o.status == Status.REFUTED}
    if refuted or (smaller and no_smaller):
        return "solver_disagreement", bool(smaller), _smallest(outcomes) or greedy
    if smaller:
        return "greedy_suboptimal", True, _smallest(outcomes)
    if no_smaller:
        return "greedy_minimal", any(outcomes[name].exact for name in no_smaller), greedy
    return "unknown", False, None


def _judge_none_exists(outcomes: dict[str, Outcome]) -> tuple[str, bool, tuple[int, ...] | None]:
    found = {name for name, o in outcomes.items() if o.status in (Status.OPTIMAL, Status.FEASIBLE) and o.replayed}
    if found or any(o.status == Status.REFUTED for o in outcomes.values()):
        return "solver_disagreement", False, _smallest(outcomes)
    # Greedy's none-exists was re-checked exactly (p(x') = p(x)): on a monotone network that is the proof.
    return "none_exists", True, None


def _judge_exact_only(outcomes: dict[str, Outcome]) -> tuple[str, bool, tuple[int, ...] | None]:
    sizes = {name: o.size for name, o in outcomes.items() if o.status == Status.OPTIMAL}
    none = {name for name, o in outcomes.items() if o.status == Status.NONE_EXISTS}
    if len(set(sizes.values())) > 1 or (sizes and none) or any(o.status == Status.REFUTED for o in outcomes.values()):
        return "solver_disagreement", False, _smallest(outcomes)
    exact = any(outcomes[name].exact for name in [*sizes, *none])
    return "exact_only", exact, _smallest(outcomes)


def case_of(problem: Problem, certificate: Certificate, note: str = "") -> Case:
    """The case file for a certificate (its minimum: the smallest exactly replayed set)."""
    witness = None
    for outcome in certificate.solvers.values():
        if outcome.solution == certificate.minimum and outcome.witness is not None:
            witness = outcome.witness
            break
    return Case(
        problem.net,
        problem.domain,
        problem.threshold,
        problem.x,
        problem.kind,
        None if certificate.greedy is None else certificate.greedy.features,
        certificate.minimum,
        {name: outcome.to_json() for name, outcome in certificate.solvers.items()},
        certificate.verdict,
        note or "; ".join(certificate.notes),
        witness,
    )


_TIE_CHUNK = 256  # candidate sets evaluated exactly in one batch by `tie_decided`


def tie_decided(problem: Problem, greedy: tuple[int, ...], limit: int = 200_000) -> bool | None:
    """Whether another way of breaking exact ties in the scores gives greedy a smaller answer:
    True (an order that does was found), False (no order does), None (more than `limit` sets to
    check: undetermined).

    The paper breaks ties "arbitrarily"; cardinal by lower index. An order that sorts the scores
    the same way (exact values for PWL networks, enclosure midpoints for smooth ones) takes whole
    groups of tied features and then part of one group. On a monotone network the prefix sets
    that reach the goal are closed upwards, so greedy can stop below size g in some order iff, for
    some group G with the groups before it B, `B ∪ T` reaches the goal for a subset T of G of size
    min(|G|, g − 1 − |B|); each candidate is checked exactly.
    """
    base, target, goal = problem.base, problem.target, problem.goal
    variants = np.stack([modified_inputs(base, [j], target) for j in range(problem.n)])
    scores = [(e.lower + e.upper) / 2 for e in problem.exact.outputs(variants)]
    ascending = (problem.prediction == 1) == (problem.kind == "contrastive")
    groups: dict[object, list[int]] = {}
    for j in sorted(range(problem.n), key=lambda j: scores[j] if ascending else -scores[j]):
        groups.setdefault(scores[j], []).append(j)
    before: list[int] = []
    undetermined = False
    for group in groups.values():
        budget = len(greedy) - 1 - len(before)
        if budget <= 0:
            break
        take = min(budget, len(group))
        if math.comb(len(group), take) > limit:
            undetermined = True
        else:
            subsets = itertools.combinations(group, take)
            while chunk := list(itertools.islice(subsets, _TIE_CHUNK)):  # one exact batch per chunk
                Y = np.stack([modified_inputs(base, [*before, *subset], target) for subset in chunk])
                if bool((problem.exact.predictions(Y, problem.threshold) == goal).any()):
                    return True
        before += group
    return None if undetermined else False

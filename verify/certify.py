"""Greedy vs exact solvers: one `Certificate` per input and kind, with a verdict.

For a monotone network the greedy answer (Algorithm 1 in exact arithmetic, `explain(...,
verify=True)`) of size g is certified by one call per solver asking "is there an explanation of
size ≤ g − 1?". `judge` then answers two separate questions:

* **The greedy verdict**, from exact evidence alone: sets replayed in exact arithmetic (greedy's
  and the solvers'), "nothing smaller" proofs of the exact backends (z3, enumerate), exact
  none-exists checks. `greedy_suboptimal`: a smaller set holds exactly. `greedy_minimal`: an exact
  proof that nothing smaller exists (`certified`), or only a float MILP's "nothing smaller"
  (verdict kept, `certified` false). `none_exists`: no contrastive explanation (greedy's exact
  check). `unknown`: nothing decided. `exact_only`: the network is not monotone, the solvers give
  the minimum. `solver_disagreement`: exact evidence conflicts — a bug, never a float error.
* **Solver agreement**: a claim that fails the exact check is REFUTED under its solver
  (`Outcome.refuted`, its claim kept): a set that is no explanation (the replay, `solvers.base`),
  or a "nothing smaller" (none_within, none_exists, optimal's minimality) contradicted by a
  smaller set replayed exactly. A refuted float claim changes no verdict; a refuted claim of an
  exact backend is a conflict.

`minimum` is the canonical smallest exactly valid set known (fewest features, then the
lexicographically smallest sorted tuple, so runs that find the same sets agree); `minimum_proved`
says an exact proof that nothing smaller exists backs it.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from ..solvers.base import Solver, get_solver, solve_problem
from ..solvers.guard import GuardedSolver
from .cases import Case
from .domain import Domain
from .exact import modified_inputs
from .greedy import ExplainResult, explain
from .network import Network
from .problem import Outcome, Problem, Status, Verdict
from .record import GreedyAnswer, refuted_solvers, verdict_fields


@dataclass(frozen=True)
class Judgement:
    """What the evidence of one row decides (see the module docstring). `outcomes`: the solvers'
    outcomes with the claims that exact evidence contradicts marked REFUTED."""

    verdict: Verdict
    certified: bool
    minimum: tuple[int, ...] | None
    minimum_proved: bool
    outcomes: dict[str, Outcome]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Certificate:
    """Greedy vs solvers for one input and kind."""

    row: int
    kind: str
    prediction: int
    greedy: GreedyAnswer | None  # None when the network is not monotone
    solvers: dict[str, Outcome]
    verdict: Verdict
    certified: bool
    minimum: tuple[int, ...] | None = None  # the canonical smallest exactly valid set known
    notes: tuple[str, ...] = field(default=())
    minimum_proved: bool = False  # an exact proof that nothing smaller exists (else `minimum` is an upper bound)

    @property
    def gap(self) -> int | None:
        """Greedy size − minimum size (a lower bound on the true gap unless `minimum_proved`)."""
        if self.greedy is None or self.greedy.size is None or self.minimum is None:
            return None
        return self.greedy.size - len(self.minimum)

    @property
    def refuted(self) -> tuple[str, ...]:
        """The solvers whose claims exact evidence refuted."""
        return refuted_solvers(self.solvers)

    def to_json(self) -> dict[str, Any]:
        return {
            "row": self.row,
            "kind": self.kind,
            "prediction": self.prediction,
            **verdict_fields(self),
            "notes": list(self.notes),
        }


STARTUP_WAIT = 60.0  # seconds a SolverPool waits, before its first call, for its solver processes to start


class SolverPool:
    """Open backends by name, reused across calls and closed together; runs HiGHS in place of
    Gurobi when Gurobi's licence is too small for a model (`fallback=True`). Each backend runs
    guarded (`solvers.guard`): its time limit holds even where the backend ignores it. Their
    solver processes start when the pool is made; its first call waits for them (up to
    `STARTUP_WAIT` s), so that no verdict depends on how long they took to start."""

    def __init__(self, names: Iterable[str], fallback: bool = True) -> None:
        self.names = tuple(dict.fromkeys(names))
        self.backends = {name: cast(GuardedSolver, get_solver(name, guarded=True)) for name in self.names}
        self.fallback = fallback and "gurobi" in self.backends and "highs" not in self.backends
        self._highs: Solver | None = None
        self._started = False

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> tuple[dict[str, Outcome], list[str]]:
        if not self._started:
            self._started = True
            until = time.perf_counter() + STARTUP_WAIT
            for backend in self.backends.values():
                with contextlib.suppress(ChildProcessError):  # the calls answer `error` with the reason
                    backend.wait_started(until)
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
    at_most = None if greedy is None or greedy.features is None else len(greedy.features) - 1
    if at_most == -1:  # an empty AXp: nothing can be smaller
        outcomes, notes = {}, ["empty abductive explanation: minimal by definition"]
    else:
        outcomes, notes = pool.solve(problem, at_most, time_limit)
    judgement = judge(problem, greedy, outcomes, at_most)
    notes += [f"{name}: {outcome.message}" for name, outcome in judgement.outcomes.items() if outcome.message]
    return Certificate(
        row,
        problem.kind,
        problem.prediction,
        greedy,
        judgement.outcomes,
        judgement.verdict,
        judgement.certified,
        judgement.minimum,
        (*notes, *judgement.notes),
        judgement.minimum_proved,
    )


def judge(problem: Problem, greedy: GreedyAnswer | None, outcomes: dict[str, Outcome], at_most: int | None) -> Judgement:
    """The greedy verdict and the solvers' agreement for one row (module docstring). `greedy`:
    None on a non-monotone network, its `features` None when no CXp exists; `at_most`: the bound
    the solvers were asked (None: the minimum)."""
    notes: list[str] = []
    trusted = greedy is not None and greedy.check != "undecided"
    valid = {name: o.solution for name, o in outcomes.items() if o.status in (Status.OPTIMAL, Status.FEASIBLE) and o.replayed}
    sets = [s for s in valid.values() if s is not None]
    if trusted and greedy.features is not None:
        sets.append(greedy.features)
    smallest = min(sets, key=lambda s: (len(s), s)) if sets else None
    # Exact lower bounds: "no explanation has fewer than L features", by source.
    lower: dict[str, int] = {"definition": 1 if problem.kind == "contrastive" else 0}
    if trusted and greedy.features:
        lower["greedy"] = 1  # its exact check found p(x') ≠ p(x): the empty set is no explanation
    impossible = ["greedy"] if trusted and greedy.features is None else []  # exact: no explanation exists
    # an exact backend's claim that failed the exact check is a bug, not a float error
    conflicts = [f"{name} refuted: {o.message}" for name, o in outcomes.items() if o.exact and o.status == Status.REFUTED]
    for name, o in outcomes.items():
        if o.status == Status.NONE_EXISTS and (o.exact or o.replayed):
            impossible.append(name)
        elif o.exact and o.status == Status.NONE_WITHIN:
            lower[name] = (problem.n if at_most is None else at_most) + 1
        elif o.exact and o.status == Status.OPTIMAL and o.solution is not None and o.replayed:
            lower[name] = len(o.solution)
    if smallest is not None:
        conflicts += [
            f"{name} proves none of size < {bound}, but {list(smallest)} holds"
            for name, bound in lower.items()
            if bound > len(smallest)
        ]
        conflicts += [f"{name} proves no explanation exists, but {list(smallest)} holds" for name in impossible]
    outcomes = {name: _contradicted(o, smallest, at_most) for name, o in outcomes.items()}
    floor = max(lower.values())
    if conflicts:
        return Judgement(
            Verdict.SOLVER_DISAGREEMENT,
            False,
            smallest,
            False,
            outcomes,
            tuple(["exact evidence conflicts: " + "; ".join(conflicts)]),
        )
    proved = smallest is not None and floor >= len(smallest)
    if greedy is None:
        if smallest is None and any(o.status == Status.OPTIMAL for o in outcomes.values()):
            notes.append("the minimum rests on a float claim that no exact check confirmed")
        return Judgement(
            Verdict.EXACT_ONLY, proved or (smallest is None and bool(impossible)), smallest, proved, outcomes, tuple(notes)
        )
    if greedy.features == ():
        return Judgement(Verdict.GREEDY_MINIMAL, trusted, (), trusted, outcomes, tuple(notes))
    if greedy.features is None:
        return Judgement(Verdict.NONE_EXISTS, trusted, None, False, outcomes, tuple(notes))
    size = len(greedy.features)
    if smallest is not None and len(smallest) < size:
        verdict, certified = Verdict.GREEDY_SUBOPTIMAL, trusted
    elif floor >= size:
        verdict, certified = Verdict.GREEDY_MINIMAL, trusted
    elif any(o.status == Status.NONE_WITHIN for o in outcomes.values()):
        verdict, certified = Verdict.GREEDY_MINIMAL, False
        notes.append("only a float MILP says nothing smaller exists: not certified")
    else:
        return Judgement(Verdict.UNKNOWN, False, None, False, outcomes, tuple(notes))
    if not trusted:
        notes.append("greedy answer undecided in exact arithmetic (smooth network within its margin)")
    return Judgement(verdict, certified, smallest, proved and trusted, outcomes, tuple(notes))


def _contradicted(outcome: Outcome, smallest: tuple[int, ...] | None, at_most: int | None) -> Outcome:
    """The outcome, REFUTED when a set replayed exactly contradicts its "nothing smaller"."""
    if smallest is None or outcome.status == Status.REFUTED:
        return outcome
    shown = f"contradicted: {list(smallest)} (size {len(smallest)}) holds in exact arithmetic"
    if outcome.status == Status.NONE_WITHIN and (at_most is None or len(smallest) <= at_most):
        return outcome.refuted(shown)
    if outcome.status == Status.NONE_EXISTS:
        return outcome.refuted(shown)
    if outcome.status == Status.OPTIMAL and outcome.solution is not None and len(smallest) < len(outcome.solution):
        return outcome.refuted(f"not minimum, {shown}")
    return outcome


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
    with SolverPool(solvers) as pool:  # made first: its solver processes start while greedy runs
        if net.is_monotone:
            _, answers = greedy_answers(net, X, kind, domain, threshold)  # type: ignore[assignment]
        return [
            certify_row(pool, Problem.make(net, x, kind, domain, threshold, epsilon), answer, time_limit, row)
            for row, (x, answer) in enumerate(zip(X, answers, strict=True))
        ]


def case_of(problem: Problem, certificate: Certificate, note: str = "") -> Case:
    """The case file for a certificate (its minimum: the canonical smallest exactly valid set)."""
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
        certificate.minimum_proved,
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

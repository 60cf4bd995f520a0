"""Greedy vs exact solvers: one `Certificate` per input and kind, with a verdict.

For a monotone network the greedy answer (Algorithm 1 in exact arithmetic, `explain(...,
verify=True)`) of size g is certified by one call per solver asking "is there an explanation of
size ≤ g − 1?". `judge` then answers two separate questions:

* **The greedy verdict**, from exact evidence alone: sets replayed in exact arithmetic (greedy's
  and the solvers'), "nothing smaller" proofs of the exact backends (z3, enumerate), exact
  none-exists checks. `greedy_suboptimal`: a smaller set holds exactly. `greedy_minimal`: an exact
  proof that nothing smaller exists (`certified`), or only a float MILP's "nothing smaller"
  (verdict kept, `certified` false). `none_exists`: no contrastive explanation (greedy's exact
  check). `unknown`: nothing decided. `exact_only`: the network is not monotone (a network of
  K ≥ 2 outputs never is), the solvers give the minimum. `undecided`: exact arithmetic cannot
  decide p(x) (`certify_input`: no solver runs) or greedy's answer (its check is undecided: it is
  no evidence, and the solvers are asked for the minimum). `solver_disagreement`: exact evidence
  conflicts — a bug, never a float error.
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

from ..domain import Domain, Radius
from ..errors import UndecidedPrediction
from ..exact import exact_blocks, modified_inputs
from ..greedy import ExplainResult, explain
from ..network import Network
from ..problem import DEFAULT_EPSILON, Outcome, Problem, Status, Verdict
from ..solvers.base import Solver, get_solver, solve_problem
from ..solvers.guard import STARTUP_WAIT, GuardedSolver
from ..solvers.oracle import SetOracle
from .cases import Case
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
    greedy: GreedyAnswer | None  # None when the network is not monotone (K ≥ 2 outputs included)
    solvers: dict[str, Outcome]
    verdict: Verdict
    certified: bool
    minimum: tuple[int, ...] | None = None  # the canonical smallest exactly valid set known
    notes: tuple[str, ...] = field(default=())
    minimum_proved: bool = False  # an exact proof that nothing smaller exists (else `minimum` is an upper bound)
    classes: int = 1  # K, the network's outputs (the prediction is a class index when K ≥ 2)

    @property
    def gap(self) -> int | None:
        """Greedy size − minimum size (a lower bound on the true gap unless `minimum_proved`);
        None without a greedy answer decided in exact arithmetic."""
        if self.greedy is None or self.greedy.size is None or self.minimum is None or self.verdict == Verdict.UNDECIDED:
            return None
        return self.greedy.size - len(self.minimum)

    @property
    def refuted(self) -> tuple[str, ...]:
        """The solvers whose claims exact evidence refuted."""
        return refuted_solvers(self.solvers)

    @property
    def minimum_witness(self) -> tuple[float, ...] | None:
        """For a contrastive minimum, the point y [n] that shows it: the replayed witness of a
        solver's answer with that set, else greedy's (`GreedyAnswer.witness`); None for an AXp."""
        if self.kind != "contrastive" or self.minimum is None:
            return None
        for outcome in self.solvers.values():
            answered = outcome.status in (Status.OPTIMAL, Status.FEASIBLE) and outcome.replayed
            if answered and outcome.solution == self.minimum and outcome.witness is not None:
                return outcome.witness
        if self.greedy is not None and self.greedy.features == self.minimum:
            return self.greedy.witness
        return None

    def to_json(self) -> dict[str, Any]:
        """The `certify` line ("classes": K only for a network of K ≥ 2 outputs)."""
        return {
            "row": self.row,
            "kind": self.kind,
            "prediction": self.prediction,
            **({"classes": self.classes} if self.classes > 1 else {}),
            **verdict_fields(self),
            "notes": list(self.notes),
        }


class SolverPool:
    """Open backends by name, reused across calls and closed together; runs HiGHS in place of
    Gurobi when Gurobi's licence is too small for a model (`fallback=True`). Each backend runs
    guarded (`solvers.guard`): its time limit holds even where the backend ignores it. Their
    solver processes start when the pool is made; its first call waits for them (up to
    `STARTUP_WAIT` s), so that no verdict depends on how long they took to start. One exact set
    oracle (`solvers.oracle`) serves the replay of every answer."""

    def __init__(self, names: Iterable[str], fallback: bool = True) -> None:
        self.names = tuple(dict.fromkeys(names))
        self.backends = {name: cast(GuardedSolver, get_solver(name, guarded=True)) for name in self.names}
        self.fallback = fallback and "gurobi" in self.backends and "highs" not in self.backends
        self._highs: Solver | None = None
        self.oracle = SetOracle()
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
            outcomes[name] = solve_problem(backend, problem, at_most, time_limit, self.oracle)
            if name == "gurobi" and outcomes[name].status == Status.SIZE_LIMIT and self.fallback:
                self._highs = self._highs or get_solver("highs", guarded=True)
                outcomes["highs"] = solve_problem(self._highs, problem, at_most, time_limit, self.oracle)
                notes.append("gurobi hit its licence size limit; highs ran in its place")
        return outcomes, notes

    def close(self) -> None:
        for backend in [*self.backends.values(), *([self._highs] if self._highs else [])]:
            backend.close()
        self.oracle.close()

    def __enter__(self) -> SolverPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def greedy_answers(
    net: Network, X: np.ndarray, kind: str, domain: Domain, threshold: float | None, radius: Radius | None = None
) -> tuple[ExplainResult | None, list[GreedyAnswer]]:
    """Greedy explanations for X [B, n], re-checked exactly (`explain(..., verify=True)`): batched
    over the rows, or with `radius` one row at a time over its own ball (no batched result: None)."""
    if radius is not None:
        return None, [
            greedy_answers(net, x[None, :], kind, domain.ball(x, radius), threshold)[1][0] for x in np.atleast_2d(X)
        ]
    started = time.perf_counter()
    result = explain(net, X, kind=kind, domain=domain, threshold=threshold, device="cpu", verify=True)
    per_row = (time.perf_counter() - started) / max(1, len(X))
    checks = result.checks or ("exact",) * len(X)
    return result, [
        GreedyAnswer(result.features(row), per_row, checks[row], result.witness(row, X[row], domain)) for row in range(len(X))
    ]


def certify_row(
    pool: SolverPool,
    problem: Problem,
    greedy: GreedyAnswer | None,
    time_limit: float,
    row: int = 0,
) -> Certificate:
    """Run every solver on one problem and judge the greedy answer (None: not monotone, or K ≥ 2
    outputs). The
    solvers are asked for a set smaller than greedy's, or for the minimum when there is no
    greedy answer decided in exact arithmetic."""
    decided = greedy is not None and greedy.check != "undecided" and greedy.features is not None
    at_most = len(greedy.features) - 1 if decided else None
    if at_most == -1:  # an empty AXp: nothing can be smaller
        outcomes, notes = {}, ["empty abductive explanation: minimal by definition"]
    else:
        outcomes, notes = pool.solve(problem, at_most, time_limit)
    judgement = judge(problem, greedy, outcomes, at_most)
    notes += [f"{name}: {outcome.message}" for name, outcome in judgement.outcomes.items() if outcome.message]
    undecided = judgement.verdict in (Verdict.UNKNOWN, Verdict.UNDECIDED, Verdict.EXACT_ONLY)
    if undecided and not judgement.certified and not judgement.minimum_proved:
        notes.append(left_open(problem.kind, at_most, judgement.outcomes, time_limit))
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
        problem.classes,
    )


def left_open(kind: str, at_most: int | None, outcomes: dict[str, Outcome], time_limit: float) -> str:
    """Why a row stays undecided: the question the solvers were asked and how each call ended
    (no measured time, so that two runs give the same note)."""
    asked = f"is there a {kind} explanation of size ≤ {at_most}" if at_most is not None else f"the minimum {kind} explanation"
    ended = []
    for name, outcome in outcomes.items():
        status = outcome.status
        if status == Status.TIMEOUT:
            ended.append(f"{name} stopped at its time limit of {time_limit:g} s")
        elif status in (Status.NONE_WITHIN, Status.NONE_EXISTS, Status.OPTIMAL) and not outcome.exact:
            ended.append(f"{name} says {status.value}, a float MILP's claim, no exact proof")
        elif status in (Status.REFUTED, Status.UNCONFIRMED):
            ended.append(f"{name} claimed {(outcome.claimed or status).value}, {status.value} by the exact replay")
        else:
            ended.append(f"{name} {status.value}")
    return f"left open: {asked}? ({'; '.join(ended) or 'no solver ran'})"


def certify_input(
    pool: SolverPool,
    net: Network,
    x: np.ndarray,
    kind: str,
    domain: Domain,
    threshold: float | None,
    greedy: GreedyAnswer | None,
    time_limit: float,
    row: int = 0,
    epsilon: float = DEFAULT_EPSILON,
) -> tuple[Problem | None, Certificate]:
    """`certify_row` for the input x [n]: its problem and certificate. An input whose prediction
    exact arithmetic cannot decide is valid input, not an error: it gets the verdict `undecided`
    (prediction −1, no solver run) and the problem None."""
    try:
        problem = Problem.make(net, x, kind, domain, threshold, epsilon)
    except UndecidedPrediction as reason:
        return None, Certificate(
            row, kind, -1, greedy, {}, Verdict.UNDECIDED, False, notes=(str(reason),), classes=net.n_outputs
        )
    return problem, certify_row(pool, problem, greedy, time_limit, row)


def judge(problem: Problem, greedy: GreedyAnswer | None, outcomes: dict[str, Outcome], at_most: int | None) -> Judgement:
    """The greedy verdict and the solvers' agreement for one row (module docstring). `greedy`:
    None on a non-monotone network, its `features` None when no CXp exists; `at_most`: the bound
    the solvers were asked (None: the minimum). A greedy answer that exact arithmetic left
    undecided (`check` undecided) is no evidence: the verdict is `undecided`, never certified,
    and `minimum` comes from the solvers alone."""
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
    if greedy is None or not trusted:
        if smallest is None and any(o.status == Status.OPTIMAL for o in outcomes.values()):
            notes.append("no minimum: no optimal claim passed the exact replay")
        if greedy is not None:
            notes.append(
                "greedy's answer (Algorithm 1) is undecided in exact arithmetic: a smooth network's enclosures "
                "leave a score order or a prediction open; the solvers give the minimum alone"
            )
            return Judgement(Verdict.UNDECIDED, False, smallest, proved, outcomes, tuple(notes))
        return Judgement(
            Verdict.EXACT_ONLY, proved or (smallest is None and bool(impossible)), smallest, proved, outcomes, tuple(notes)
        )
    if greedy.features == ():
        return Judgement(Verdict.GREEDY_MINIMAL, True, (), True, outcomes, tuple(notes))
    if greedy.features is None:
        return Judgement(Verdict.NONE_EXISTS, True, None, False, outcomes, tuple(notes))
    size = len(greedy.features)
    if smallest is not None and len(smallest) < size:
        verdict, certified = Verdict.GREEDY_SUBOPTIMAL, True
    elif floor >= size:
        verdict, certified = Verdict.GREEDY_MINIMAL, True
    elif any(o.status == Status.NONE_WITHIN for o in outcomes.values()):
        verdict, certified = Verdict.GREEDY_MINIMAL, False
        notes.append("only a float MILP says nothing smaller exists: not certified")
    else:
        return Judgement(Verdict.UNKNOWN, False, None, False, outcomes, tuple(notes))
    return Judgement(verdict, certified, smallest, proved, outcomes, tuple(notes))


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
    threshold: float | None = None,
    solvers: Iterable[str] = ("enumerate",),
    time_limit: float = 60.0,
    epsilon: float = 1e-6,
    radius: Radius | None = None,
) -> list[Certificate]:
    """Certificates for every row of X [B, n] (or [n]) and one kind; with `radius`, each row over
    its own ball `domain.ball(x, radius)`."""
    domain = domain if domain is not None else Domain.unit(net.n_inputs)
    X = domain.check(X)
    answers: list[GreedyAnswer | None] = [None] * len(X)
    with SolverPool(solvers) as pool:  # made first: its solver processes start while greedy runs
        if net.is_monotone:
            _, answers = greedy_answers(net, X, kind, domain, threshold, radius)  # type: ignore[assignment]
        return [
            certify_input(pool, net, x, kind, box, threshold, answer, time_limit, row, epsilon)[1]
            for row, (x, answer) in enumerate(zip(X, answers, strict=True))
            for box in [domain if radius is None else domain.ball(x, radius)]
        ]


def case_of(problem: Problem, certificate: Certificate, note: str = "") -> Case:
    """The case file for a certificate (its minimum: the canonical smallest exactly valid set)."""
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
        certificate.minimum_witness,
        certificate.minimum_proved,
    )


_TIE_CHUNK = 256  # candidate sets evaluated exactly in one batch by `tie_decided`


def tie_decided(problem: Problem, greedy: tuple[int, ...], limit: int = 200_000) -> bool | None:
    """Whether another way of breaking exact ties in the scores gives greedy a smaller answer:
    True (an order that does was found), False (no order does), None (undetermined: more than
    `limit` sets to check, or scores whose order exact arithmetic leaves open).

    The paper breaks ties "arbitrarily"; cardinal by lower index. The scores are sorted in exact
    arithmetic (`cardinal.exact.exact_blocks`: exact values for PWL networks; for smooth ones,
    enclosures ordered only when disjoint, equal only when provably equal), so the tied features
    form groups. An order that sorts the scores the same way takes whole groups and then part of
    one group. On a monotone network the prefix sets that reach the goal are closed upwards, so
    greedy can stop below size g in some order iff, for some group G with the groups before it B,
    `B ∪ T` reaches the goal for a subset T of G of size min(|G|, g − 1 − |B|); each candidate is
    checked exactly (an undecided check leaves the answer undetermined). In a block of scores whose
    order is undecided the same subsets are checked: none reaching means no order of the block
    rescues greedy; one reaching leaves the answer undetermined (it may need an order that does not
    sort the scores). Every feature of a block precedes the groups after it.
    """
    base, target = problem.base, problem.target
    variants = np.stack([modified_inputs(base, [j], target) for j in range(problem.n)])
    ascending = (problem.prediction == 1) == (problem.kind == "contrastive")
    blocks = exact_blocks(dict(enumerate(problem.exact.scores(variants))), ascending)
    before: list[int] = []
    undetermined = False
    for block in blocks:
        group = [j for features in block for j in features]
        budget = len(greedy) - 1 - len(before)
        if budget <= 0:
            break
        take = min(budget, len(group))
        if math.comb(len(group), take) > limit:
            undetermined = True
        else:
            reached, undecided = _some_subset_reaches(problem, before, group, take)
            if reached and len(block) == 1:
                return True
            undetermined |= reached or undecided  # in an undecided block, that subset may not be a prefix of any order
        before += group
    return None if undetermined else False


def _some_subset_reaches(problem: Problem, before: list[int], group: list[int], take: int) -> tuple[bool, bool]:
    """Whether `before` plus some `take` features of `group`, moved from base to target, reaches
    the goal exactly, and whether some such check was undecided."""
    subsets = itertools.combinations(group, take)
    undecided = False
    while chunk := list(itertools.islice(subsets, _TIE_CHUNK)):  # one exact batch per chunk
        Y = np.stack([modified_inputs(problem.base, [*before, *subset], problem.target) for subset in chunk])
        reached = problem.exact.predictions(Y, problem.threshold)
        if bool((reached == problem.goal).any()):
            return True, undecided
        undecided |= bool((reached < 0).any())
    return False, undecided

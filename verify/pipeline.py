"""One certification pipeline: explainer → exact solvers → verdict → certificate → record.

Every driver adapts it, and only it: `cardinal.explain` and `Explainer.explain(prove=True)`
(`verify.explanation`), `certify` (Python, below), `cardinal certify` (`verify.commands.certify`),
and a campaign's units (`campaign.certify_unit`, which judges several explainers' answers on one
solver run with `certify_input`). Inside, results are typed — an `Answered` per input and kind —
and JSON is made at the edge, once, by `record_of`: the same question gives the same record
through every driver, and a setting added to `Plan` reaches all of them.

A question's settings are a `Plan`, defined once:

* `method`: "auto" (greedy on a sign-monotone network, deletion on any other), "greedy" (where
  greedy does not apply, no explainer runs: the solvers alone, `exact_only`), "deletion", or
  "minimum" (no explainer: the solvers alone);
* `traversal`: the order of deletion's questions (`solvers.deletion.TRAVERSALS`), named in the
  record (`traversal`) wherever deletion ran;
* `time_limit`: the call's budget, per input (`DEFAULT_TIME_LIMIT`): a `cardinal.deadline.Deadline`
  is computed once when an input's work starts (greedy's batch: that row's share counted) and
  passed down; each stage gets its own cap or the time left, whichever is less — deletion's
  questions, each solver call (its solver process's start included), then the certificate search
  (none left: "no certificate: the call's time limit"). Deletion stops at the deadline with its
  best exactly valid set (`solvers.deletion`, stopped), a solver left no time is not asked, and
  the record holds the best answer and exact bounds known at that moment, with a note; nothing
  is ever concluded from a timeout. The input's work ends within the budget plus one stage's
  overrun (half of `solvers.guard.allowed_overrun` of the time left, where a guarded call ends). A
  campaign's units (`certify_input` without a deadline) keep the per-call meaning: each solver
  call and deletion question gets `time_limit` s;
* `epsilon`: the MILP margin (`DEFAULT_EPSILON`);
* `proofs`: where certificates go (`proofs.ProofFolder`: a folder, or held in memory), None: no
  certificates. With `proofs`, every record carries a `proof` entry (`{"file": null, "reason"}`
  where none was made).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from cardinal.deadline import SPENT, Deadline
from cardinal.domain import Domain, Radius
from cardinal.errors import UndecidedPrediction
from cardinal.network import Network
from cardinal.problem import DEFAULT_EPSILON, DEFAULT_TIME_LIMIT, DEFAULT_TRAVERSAL, Method, Problem, Verdict

from .certify import RowVerdict, SolverPool, certify_answers, deletion_answer, greedy_answers, proving_solvers
from .proofs import ProofFolder, Written
from .record import GreedyAnswer, annotated
from .settings import Settings

METHODS = ("auto", "greedy", "deletion", "minimum")


@dataclass(frozen=True)
class Plan:
    """The settings of a question (module docstring), the same for every driver."""

    method: str = "auto"
    traversal: str = DEFAULT_TRAVERSAL
    time_limit: float = DEFAULT_TIME_LIMIT
    epsilon: float = DEFAULT_EPSILON
    proofs: ProofFolder | None = None
    deadline: Deadline | None = None  # the input's budget, set per input by `answered` (None: each call its `time_limit`)

    def explainer(self, net: Network) -> str | None:
        """The explainer `method` runs on `net` (`explainer_of`)."""
        return explainer_of(self.method, net)


def explainer_of(method: str, net: Network) -> str | None:
    """The explainer a method runs on a network: "greedy" or "deletion", None where none runs
    (method "minimum", or "greedy" on a network that is not sign-monotone)."""
    if method == "auto":
        return Method.GREEDY.value if net.is_sign_monotone else Method.DELETION.value
    if method == Method.DELETION:
        return Method.DELETION.value
    if method == Method.GREEDY and net.is_sign_monotone:
        return Method.GREEDY.value
    return None


@dataclass(frozen=True)
class Answered:
    """One input and kind through the pipeline: the explainer's `answer` (None: none ran), the
    `problem` (None where exact arithmetic cannot decide p(x)), the judged `verdict` (its `proof`
    entry set where certificates were asked for), the certificate `written` (None without
    `Plan.proofs`) and the seconds of each stage (`timings`: explain, solve, certificate)."""

    row: int
    kind: str
    answer: GreedyAnswer | None
    problem: Problem | None
    verdict: RowVerdict
    written: Written | None = None
    timings: dict[str, float] = field(default_factory=dict)


def explainer_answers(
    pool: SolverPool, net: Network, settings: Settings, X: np.ndarray, kind: str, plan: Plan
) -> Iterator[tuple[GreedyAnswer | None, Deadline]]:
    """The explainer's answer for each row of X [B, n], with that input's deadline (`Plan.time_limit`
    from when its work started): greedy's batched (re-checked exactly; the row's share of the
    batch counted in its budget), deletion's one row at a time as they are asked for (its
    questions to the pool's oracle, within the deadline), None per row where no explainer runs.
    The pool's solver processes that the questions may need start first, in the background
    (`SolverPool.start`)."""
    pool.start(net, settings.domain)
    explainer = plan.explainer(net)
    if explainer == Method.GREEDY:
        for answer in greedy_answers(net, X, kind, settings.domain, settings.threshold, settings.radius)[1]:
            yield answer, Deadline.after(plan.time_limit - answer.seconds)
    elif explainer == Method.DELETION:
        for x in X:
            deadline = Deadline.after(plan.time_limit)
            box = settings.box(x)
            with pool.oracle.within(deadline):
                answer = deletion_answer(net, x, kind, box, settings.threshold, pool.oracle, plan.time_limit, plan.traversal)
            yield answer[1], deadline
    else:
        for _ in X:
            yield None, Deadline.after(plan.time_limit)


def answered(
    pool: SolverPool, net: Network, settings: Settings, X: np.ndarray, rows: Sequence[int], kind: str, plan: Plan
) -> Iterator[Answered]:
    """The pipeline on X [B, n] (its row numbers `rows` [B]) for one kind: one `Answered` per row,
    yielded as soon as that row is decided."""
    for row, x, (answer, deadline) in zip(rows, X, explainer_answers(pool, net, settings, X, kind, plan), strict=True):
        yield decide(pool, net, settings, x, kind, answer, replace(plan, deadline=deadline), row)


def decide(
    pool: SolverPool, net: Network, settings: Settings, x: np.ndarray, kind: str, answer: GreedyAnswer | None,
    plan: Plan, row: int = 0,
) -> Answered:
    """One row x [n] with the explainer's answer: the solvers, the verdict, the certificate, each
    within the input's deadline (`plan.deadline`; None: `plan.time_limit` from now). Where the
    budget ran out before every stage finished, the verdict says so in a note."""
    deadline = plan.deadline or Deadline.after(plan.time_limit)
    plan = replace(plan, deadline=deadline)
    started = time.perf_counter()
    problem, (verdict,) = certify_input(pool, net, settings, x, kind, (answer,), plan, row)
    solved = time.perf_counter() - started
    cut = deadline.passed() or (answer is not None and answer.check == "stopped")  # the explainer or the solvers
    written = None
    if plan.proofs is not None:
        written = plan.proofs.certify(problem, verdict, f"row{row}-{kind}", deadline)
        verdict = replace(verdict, proof=written.entry)
        cut = cut or SPENT in str(written.entry.get("reason", ""))  # the certificate
    if cut:
        note = f"{SPENT} ({plan.time_limit:g} s) ended the work: the best answer and exact bounds known then"
        verdict = replace(verdict, notes=(*verdict.notes, note))
    timings = {"explain": 0.0 if answer is None else answer.seconds, "solve": solved,
               "certificate": time.perf_counter() - started - solved}
    return Answered(row, kind, answer, problem, verdict, written, timings)


def certify_input(
    pool: SolverPool, net: Network, settings: Settings, x: np.ndarray, kind: str,
    answers: Sequence[GreedyAnswer | None], plan: Plan, row: int = 0,
) -> tuple[Problem | None, list[RowVerdict]]:
    """`certify.certify_answers` for the input x [n] over its box (`settings.box`): its problem and
    one verdict per answer, all judged on one run of the pool's solvers, within `plan.deadline`
    (None: each solver call gets `plan.time_limit`, a campaign's per-call meaning). An input whose prediction
    exact arithmetic cannot decide is valid input, not an error: each answer gets the verdict
    `undecided` (prediction −1, no solver run) and the problem is None."""
    try:
        problem = Problem.make(net, x, kind, settings.box(x), settings.threshold, plan.epsilon)
    except UndecidedPrediction as reason:
        return None, [
            RowVerdict(row, kind, -1, answer, {}, Verdict.UNDECIDED, False, notes=(str(reason),), classes=net.n_outputs)
            for answer in answers
        ]
    return problem, certify_answers(pool, problem, answers, plan.time_limit, row, plan.deadline)


def record_of(answered: Answered, net: Network, settings: Settings) -> dict[str, Any]:
    """The record (JSON) of one answer: certify's line, `Explanation.to_dict()`; the verdict's
    fields (`certify.RowVerdict.to_json`) with the settings and names (`record.annotated`)."""
    return annotated([answered.verdict.to_json()], net, settings)[0]


def given(net: Network, domain: Domain | None, threshold: float | None, radius: Radius | None = None) -> Settings:
    """The settings of a Python caller's arguments, taken as given (no metadata, no notes):
    `domain` None is [0, 1]^n."""
    domain = domain if domain is not None else Domain.unit(net.n_inputs)
    radii = None if radius is None else domain.radius(radius, "radius")
    return Settings(threshold, domain, "argument", "argument", radius=radii, radius_from="argument")  # type: ignore[arg-type]


def certify(
    net: Network,
    X: np.ndarray,
    kind: str,
    domain: Domain | None = None,
    threshold: float | None = None,
    solvers: Iterable[str] | None = None,
    radius: Radius | None = None,
    plan: Plan | None = None,
) -> list[RowVerdict]:
    """The verdicts for every row of X [B, n] (or [n]) and one kind, through the pipeline under
    `plan` (default `Plan()`: method auto), by `solvers` (None: the default, `proving_solvers`,
    until the first exact proof); with `radius`, each row over its own ball `domain.ball(x, radius)`."""
    plan = plan or Plan()
    settings = given(net, domain, threshold, radius)
    X = settings.domain.check(X)
    default = solvers is None
    names = proving_solvers(net, settings.domain) if solvers is None else solvers
    with SolverPool(names, first_proof=default) as pool:  # `answered` starts what its questions may need, before the explainer
        return [done.verdict for done in answered(pool, net, settings, X, range(len(X)), kind, plan)]

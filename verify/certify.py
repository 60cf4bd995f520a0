"""An explainer vs exact solvers: one `RowVerdict` per input and kind, with a verdict.

The explainer (`method`) is greedy — for a monotone network, Algorithm 1 in exact arithmetic,
`explain(..., verify=True)` — or sequential deletion (`solvers.deletion`, any network: a
subset-minimal answer, each step decided by the exact set oracle). Its answer of size g is
certified by one call per solver asking "is there an explanation of size ≤ g − 1?". `judge`
then answers two separate questions (the verdicts below are greedy's; a deletion answer gets
`deletion_minimal` and `deletion_suboptimal` in their place, by the same rules):

* **The greedy verdict**, from exact evidence alone: sets replayed in exact arithmetic (greedy's
  and the solvers'), "nothing smaller" proofs of the exact backends (exact-milp, z3, enumerate), exact
  none-exists checks. `greedy_suboptimal`: a smaller set holds exactly. `greedy_minimal`: an exact
  proof that nothing smaller exists (always `certified`). `none_exists`: no contrastive
  explanation (greedy's exact check). `unknown`: nothing decided — also where only a float
  MILP says "nothing smaller" (a note names it; its claim stays in its outcome). `exact_only`:
  the network is not monotone (a network of K ≥ 2 outputs never is), the solvers give the
  minimum. `undecided`: exact arithmetic cannot decide p(x) (`certify_input`: no solver runs)
  or greedy's answer (its check is undecided: it is no evidence, and the solvers are asked for
  the minimum). `solver_disagreement`: exact evidence conflicts — a bug, never a float error.
* **Solver agreement**: a claim that fails the exact check is REFUTED under its solver
  (`Outcome.refuted`, its claim kept): a set that is no explanation (the replay, `solvers.base`),
  or a "nothing smaller" (none_within, none_exists, optimal's minimality) contradicted by a
  smaller set replayed exactly. A refuted float claim changes no verdict; a refuted claim of an
  exact backend is a conflict.

`minimum` is the canonical smallest exactly valid set known (fewest features, then the
lexicographically smallest sorted tuple, so runs that find the same sets agree), whatever the
verdict — an `unknown` row's is the explainer's answer (or another set of its size), and an AXp
row always has one (all n features at worst); `minimum_proved` says an exact proof that nothing
smaller exists backs it, and `minimum_lower` is the best exact lower bound any engine proved.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from cardinal.solvers.base import Solver, auto_solver, available_solvers, get_solver, solve_problem
from cardinal.solvers.deletion import STOPPED, UNKNOWN, Deletion, deletion
from cardinal.solvers.guard import STARTUP_WAIT, GuardedSolver
from cardinal.solvers.oracle import SetOracle
from cardinal.solvers.registry import BACKENDS, BENCHMARK_ONLY, enumerate_first, in_process

from cardinal.deadline import SPENT, Deadline
from cardinal.domain import Domain, Radius
from cardinal.errors import UndecidedPrediction
from cardinal.exact import exact_blocks, modified_inputs
from cardinal.greedy import ExplainResult, explain
from cardinal.network import Network
from cardinal.problem import Method, Outcome, Problem, Status, Verdict

from .cases import Case
from .record import GreedyAnswer, Judged, verdict_fields


@dataclass(frozen=True)
class Decision:
    """What the evidence of one row decides (see the module docstring). `outcomes`: the solvers'
    outcomes with the claims that exact evidence contradicts marked REFUTED."""

    verdict: Verdict
    certified: bool
    minimum: tuple[int, ...] | None
    minimum_proved: bool
    outcomes: dict[str, Outcome]
    notes: tuple[str, ...] = ()
    lower: int | None = None  # an exact lower bound on the minimum's size (None: none may exist, or conflicting evidence)


@dataclass(frozen=True)
class RowVerdict(Judged):
    """Greedy vs solvers for one input and kind: the verdict record `certify` writes (a
    certificate, in cardinal's words, is only the proof file of `verify.proofs`). A campaign's
    `record.Record` is the same verdict with the campaign's context, kept a type of its own (its
    docstring says why); `Judged` and `record.verdict_fields` are what the two share."""

    row: int
    kind: str
    prediction: int
    greedy: GreedyAnswer | None  # the explainer's answer (its `method`); None: no explainer ran (greedy, not monotone)
    solvers: dict[str, Outcome]
    verdict: Verdict
    certified: bool
    minimum: tuple[int, ...] | None = None  # the canonical smallest exactly valid set known
    notes: tuple[str, ...] = field(default=())
    minimum_proved: bool = False  # an exact proof that nothing smaller exists (else `minimum` is an upper bound)
    classes: int = 1  # K, the network's outputs (the prediction is a class index when K ≥ 2)
    proof: dict[str, Any] | None = None  # with `--proof`: the certificate's entry (`verify.proofs`)
    minimum_lower: int | None = None  # an exact lower bound on the minimum's size (= its size when `minimum_proved`)

    @property
    def gap(self) -> int | None:
        """Greedy size − minimum size (a lower bound on the true gap unless `minimum_proved`);
        None without a greedy answer decided in exact arithmetic, or where the verdict left it
        open (`unknown`: the minimum known is the answer's size, nothing decided)."""
        if self.greedy is None or self.greedy.size is None or self.minimum is None:
            return None
        if self.verdict in (Verdict.UNDECIDED, Verdict.UNKNOWN):
            return None
        return self.greedy.size - len(self.minimum)

    @property
    def minimum_witness(self) -> tuple[float, ...] | None:
        """For a contrastive minimum, the point y [n] that shows it: the replayed witness of a
        solver's answer with that set, else the explainer's (`GreedyAnswer.witness`, or
        `found_witness` for the set its run showed before it stopped); None for an AXp."""
        if self.kind != "contrastive" or self.minimum is None:
            return None
        for outcome in self.solvers.values():
            answered = outcome.status in (Status.OPTIMAL, Status.FEASIBLE) and outcome.replayed
            if answered and outcome.solution == self.minimum and outcome.witness is not None:
                return outcome.witness
        if self.greedy is not None and self.greedy.check != "undecided" and self.greedy.features == self.minimum:
            return self.greedy.witness
        if self.greedy is not None and self.greedy.found == self.minimum:
            return self.greedy.found_witness
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
            **({} if self.proof is None else {"proof": self.proof}),
        }


def proving_solvers(net: Network, domain: Domain) -> tuple[str, ...]:
    """`certify`'s default backends for a network: every installed exact backend (its "nothing
    smaller" is a proof) that the registry (`solvers.registry`) offers for it (`Backend.offered`:
    it declares it handles the network and box, within its `max_features`), benchmark backends
    left out. enumerate on monotone networks and binary boxes, up to 20 features; z3 on monotone
    networks (its lazy strategy, at any size), and on other piecewise-linear ones only where the
    exact MILP is not installed (its full encoding is far slower than the exact MILP there;
    docs/results.md), up to its 40 features, or at any size for K ≥ 2 classes (the one exact
    engine there, which may end at its limit); the exact MILP on piecewise-linear networks, K ≥ 2
    classes included. The float MILPs (gurobi, highs) prove nothing, and the benchmark backends
    (`BENCHMARK_ONLY`) would lengthen every call, so they are left out: `--solvers all` adds them."""
    installed = [name for name in available_solvers(exact=True) if name not in BENCHMARK_ONLY]
    milp = "exact-milp" in installed

    def applies(name: str) -> bool:
        entry = BACKENDS.get(name)
        if entry is None:  # an exact backend added beside the registry (tests): piecewise-linear networks
            return net.is_piecewise_linear
        if name == "z3" and not net.has_monotone_shortcut:  # its full encoding: only without the exact MILP
            return not milp and entry.handles(net, domain) and (entry.offered(net, domain) or net.n_outputs > 1)
        if name == "z3":
            return entry.handles(net, domain)  # the lazy strategy: any size
        return entry.offered(net, domain)

    return tuple(name for name in installed if applies(name))


class SolverPool:
    """Open backends by name, reused across calls and closed together; runs HiGHS in place of
    Gurobi when Gurobi's licence is too small for a model (`fallback=True`). Each backend runs
    guarded (`solvers.guard`): its time limit holds even where the backend ignores it; a backend
    whose own limit is reliable answers small problems in this process instead
    (`solvers.registry.IN_PROCESS_FEATURES`: enumerate up to 16 features), no process started.
    Making the pool starts nothing (an unknown or missing backend fails here all the same): a
    backend's solver process starts when `start` says a question may need it (in the
    background, while the explainer runs) or at its first call, which waits for it (up to
    `STARTUP_WAIT` s, or until the call's deadline), so that without a budget no verdict depends
    on how long it took to start. One exact set oracle (`solvers.oracle`) serves the replay of
    every answer.

    `first_proof` (`certify`'s default set, `proving_solvers`): the backends take turns, the one
    that `solvers.base.auto_solver` picks for the problem first, until one gives an exact proof
    (`Outcome.proved`); named backends (`first_proof` False) all run, so that they cross-check."""

    def __init__(self, names: Iterable[str], fallback: bool = True, first_proof: bool = False) -> None:
        self.names = tuple(dict.fromkeys(names))
        self.first_proof = first_proof
        for name in self.names:
            get_solver(name).close()  # an unknown or missing backend fails here, no process started
        self.backends: dict[str, GuardedSolver] = {}  # the guarded backends started so far, by name
        self._local: dict[str, Solver] = {}  # those answered in this process (`in_process`)
        self._waited: set[str] = set()
        self.fallback = fallback and "gurobi" in self.names and "highs" not in self.names
        self._highs: Solver | None = None
        self.oracle = SetOracle()

    def start(self, net: Network, domain: Domain) -> None:
        """Start, in the background, the solver processes that questions on `net` over `domain`
        may need: none where the first backend asked (`first_proof`: enumerate, on a problem it
        suits) answers in this process and proves; else each backend not answered in this process."""
        n = net.n_inputs
        first_here = "enumerate" in self.names and enumerate_first(net, domain)
        if self.first_proof and first_here and in_process("enumerate", n):
            return
        for name in self.names:
            if not in_process(name, n):
                self._guarded(name)

    def _guarded(self, name: str) -> GuardedSolver:
        """The backend's guarded solver, its process asked for on first use (it starts in the background)."""
        if name not in self.backends:
            self.backends[name] = cast(GuardedSolver, get_solver(name, guarded=True))
        return self.backends[name]

    def _backend(self, name: str, n: int, deadline: Deadline) -> Solver:
        """The backend that answers a problem of n features: in this process (`in_process`), or
        guarded, its first call waiting for its process to start (up to `STARTUP_WAIT` s, or the deadline)."""
        if in_process(name, n):
            if name not in self._local:
                self._local[name] = get_solver(name)
            return self._local[name]
        backend = self._guarded(name)
        if name not in self._waited:
            self._waited.add(name)
            with contextlib.suppress(ChildProcessError):  # the calls answer `error` with the reason
                backend.wait_started(min(time.perf_counter() + STARTUP_WAIT, deadline.perf_counter()))
        return backend

    def solve(
        self, problem: Problem, at_most: int | None, time_limit: float, deadline: Deadline | None = None
    ) -> tuple[dict[str, Outcome], list[str]]:
        """Each backend's outcome on the problem (`first_proof`: until one proves), each call
        limited to `time_limit` s or the time left before `deadline` (the call's budget) when that
        is less; a backend left no time is not asked (TIMEOUT, raw status "not asked")."""
        deadline = deadline or Deadline.never()
        outcomes: dict[str, Outcome] = {}
        notes: list[str] = []
        order = list(self.names)
        if self.first_proof:  # the explainer's answer has at_most + 1 features: greedy does not run again to choose
            first = auto_solver(problem, problem.n if at_most is None else at_most + 1)
            order.sort(key=lambda name: name != first)
        for name in order:
            if self.first_proof and any(outcome.proved for outcome in outcomes.values()):
                break
            outcomes[name] = self._call(name, problem, at_most, time_limit, deadline)
            if name == "gurobi" and outcomes[name].status == Status.SIZE_LIMIT and self.fallback:
                outcomes["highs"] = self._call("highs", problem, at_most, time_limit, deadline)
                notes.append("gurobi hit its licence size limit; highs ran in its place")
        return outcomes, notes

    def _call(self, name: str, problem: Problem, at_most: int | None, time_limit: float, deadline: Deadline) -> Outcome:
        """One backend's call, replayed, within the deadline (none left: not asked)."""
        if deadline.limit(time_limit) <= 0:
            exact = BACKENDS[name].exact if name in BACKENDS else False
            return Outcome(Status.TIMEOUT, name, 0.0, raw_status="not asked", exact=exact, message=f"not asked: {SPENT}")
        backend = self._backend(name, problem.n, deadline)
        with self.oracle.within(deadline):
            return solve_problem(backend, problem, at_most, deadline.limit(time_limit), self.oracle)

    def close(self) -> None:
        for backend in [*self.backends.values(), *self._local.values()]:
            backend.close()
        self.backends, self._local = {}, {}
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


def deletion_answer(
    net: Network,
    x: np.ndarray,
    kind: str,
    box: Domain,
    threshold: float | None,
    oracle: SetOracle,
    time_limit: float,
    traversal: str = "sensitivity",
) -> tuple[Deletion | None, GreedyAnswer]:
    """The deletion explainer (`solvers.deletion`, in `traversal`) on the input x [n] over `box`;
    every oracle question gets `time_limit` s, or the time left before the oracle's deadline (the
    call's budget, `SetOracle.within`) when that is less, and the run stops at it. Returns the
    run (None where exact arithmetic cannot decide p(x)) and the answer as certify judges it
    (check "undecided" where a step was undecided: no set, no evidence; "stopped" where the
    deadline stopped the run: its best exactly valid set, not shown subset-minimal; where a step
    was undecided, the set the run showed by then in `found`)."""
    started = time.perf_counter()
    try:
        problem = Problem.make(net, x, kind, box, threshold)
        run: Deletion | None = deletion(problem, oracle, time_limit, traversal, oracle.deadline)
    except UndecidedPrediction:
        run = None
    seconds = time.perf_counter() - started
    check = "undecided" if run is None or run.status == UNKNOWN else "stopped" if run.status == STOPPED else "exact"
    features, witness = (None, None) if run is None else (run.features, run.witness)
    found, found_witness = (None, None) if run is None else (run.found, run.found_witness)
    return run, GreedyAnswer(features, seconds, check, witness, Method.DELETION.value, traversal, found, found_witness)


def certify_row(
    pool: SolverPool,
    problem: Problem,
    greedy: GreedyAnswer | None,
    time_limit: float,
    row: int = 0,
) -> RowVerdict:
    """`certify_answers` for one explainer's answer (None: no explainer ran, e.g. greedy on a
    non-monotone network)."""
    return certify_answers(pool, problem, (greedy,), time_limit, row)[0]


def certify_answers(
    pool: SolverPool,
    problem: Problem,
    answers: Sequence[GreedyAnswer | None],
    time_limit: float,
    row: int = 0,
    deadline: Deadline | None = None,
) -> list[RowVerdict]:
    """Run every solver on one problem once and judge each of `answers` (one per explainer; None:
    no explainer ran) against the same evidence: one certificate per answer, in order. Each
    solver call gets `time_limit` s, or the time left before `deadline` (the call's budget) when
    that is less. The
    solvers are asked for a set smaller than the smallest answer decided in exact arithmetic, or
    for the minimum when there is none (a set a run showed before it stopped undecided is no
    answer: `judge` takes it as a bound on the minimum); each answer is judged with the other
    answers' exactly checked sets as evidence too (`judge`'s `others`), since the minimum does not
    depend on the explainer."""
    sizes = [len(a.features) for a in answers if a is not None and a.check != "undecided" and a.features is not None]
    at_most = min(sizes) - 1 if sizes else None  # a run stopped undecided: the minimum is asked (its set bounds it)
    if at_most == -1:  # an empty AXp: nothing can be smaller
        outcomes, shared = {}, ["empty abductive explanation: minimal by definition"]
    else:
        budget = () if deadline is None else (deadline,)  # stand-in pools (tests) take no deadline
        outcomes, shared = pool.solve(problem, at_most, time_limit, *budget)
    certificates = []
    for index, greedy in enumerate(answers):
        others = [a for j, a in enumerate(answers) if j != index and a is not None]
        judgement = judge(problem, greedy, outcomes, at_most, others)
        notes = [*shared, *(f"{name}: {o.message}" for name, o in judgement.outcomes.items() if o.message)]
        undecided = judgement.verdict in (Verdict.UNKNOWN, Verdict.UNDECIDED, Verdict.EXACT_ONLY)
        if undecided and not judgement.certified and not judgement.minimum_proved:
            notes.append(left_open(problem.kind, judgement.minimum, judgement.lower, judgement.outcomes, time_limit))
        certificates.append(
            RowVerdict(
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
                minimum_lower=judgement.lower,
            )
        )
    return certificates


def shown_sets(answers: Iterable[GreedyAnswer | None]) -> list[tuple[int, ...]]:
    """The exactly valid sets the explainers' answers show: each answer decided in exact
    arithmetic, and each set a run showed before it stopped undecided (`GreedyAnswer.found`)."""
    shown = [a.features for a in answers if a is not None and a.check != "undecided" and a.features is not None]
    return shown + [a.found for a in answers if a is not None and a.found is not None]


def left_open(
    kind: str, smallest: tuple[int, ...] | None, lower: int | None, outcomes: dict[str, Outcome], time_limit: float
) -> str:
    """Why a row stays undecided: the question left open — a set smaller than `smallest`, the
    smallest exactly valid set known (the record's `minimum`), or the minimum where none is
    known — the exact lower bound `lower` (the record's `minimum_lower`; not said where None),
    and how each call ended (no measured time, so that two runs give the same note)."""
    if smallest is not None:
        asked = f"is there a {kind} explanation of size ≤ {len(smallest) - 1}"
    else:
        asked = f"the minimum {kind} explanation"
    ended = []
    for name, outcome in outcomes.items():
        status = outcome.status
        if status == Status.TIMEOUT and outcome.raw_status == "not asked":
            ended.append(f"{name} not asked: {SPENT}")
        elif status == Status.TIMEOUT:
            ended.append(f"{name} stopped at its time limit of {time_limit:g} s")
        elif status in (Status.NONE_WITHIN, Status.NONE_EXISTS, Status.OPTIMAL) and not outcome.exact:
            ended.append(f"{name} says {status.value}, a float MILP's claim, no exact proof")
        elif status in (Status.REFUTED, Status.UNCONFIRMED):
            ended.append(f"{name} claimed {(outcome.claimed or status).value}, {status.value} by the exact replay")
        else:
            ended.append(f"{name} {status.value}")
    bound = [] if lower is None else [f"exact lower bound {lower}"]
    return f"left open: {asked}? ({'; '.join([*bound, *ended]) or 'no solver ran'})"


def judge(
    problem: Problem,
    greedy: GreedyAnswer | None,
    outcomes: dict[str, Outcome],
    at_most: int | None,
    others: Sequence[GreedyAnswer] = (),
) -> Decision:
    """The greedy verdict and the solvers' agreement for one row (module docstring). `greedy`:
    None on a non-monotone network, its `features` None when no CXp exists; `at_most`: the bound
    the solvers were asked (None: the minimum); `others`: the answers of the other explainers
    judged on the same calls (`certify_answers`), whose exactly checked sets and "no CXp" are
    evidence as the solvers' are. A greedy answer that exact arithmetic left
    undecided (`check` undecided) is no evidence about itself: the verdict is `undecided`, never
    certified. `minimum` is the canonical smallest (`canonical`) of every exactly valid set known,
    whatever the verdict: the solvers' replayed sets, the explainers' decided answers, the sets
    their runs showed before they stopped (`shown_sets`), and for an AXp all n features (p(x) is
    decided) — so an AXp row always has one; `minimum_proved` where the exact lower bound
    (`Decision.lower`, from `Outcome.proves` of each outcome) reaches its size."""
    notes: list[str] = []
    trusted = greedy is not None and greedy.check != "undecided"
    evidence = [a for a in (greedy, *others) if a is not None and a.check != "undecided"]
    valid = {name: o.solution for name, o in outcomes.items() if o.status in (Status.OPTIMAL, Status.FEASIBLE) and o.replayed}
    sets = [s for s in valid.values() if s is not None] + shown_sets((greedy, *others))
    if problem.kind == "abductive":  # p(x) is decided: fixing every feature keeps it
        sets.append(tuple(range(problem.n)))
    smallest = canonical(sets)
    # Exact lower bounds: "no explanation has fewer than L features", by source.
    lower: dict[str, int] = {"definition": 1 if problem.kind == "contrastive" else 0}
    for answer in evidence:
        if answer.features and answer.check != "stopped":  # a stopped deletion's set is valid, not subset-minimal
            lower[answer.method] = 1  # exact: the empty set is no explanation (greedy: p(x') ≠ p(x); deletion: subset-minimal)
    impossible = [a.method for a in evidence if a.features is None]  # exact: no explanation exists
    # an exact backend's claim that failed the exact check is a bug, not a float error
    conflicts = [f"{name} refuted: {o.message}" for name, o in outcomes.items() if o.exact and o.status == Status.REFUTED]
    for name, o in outcomes.items():
        proved = o.proves(problem.n, at_most)
        if proved.none_exists:
            impossible.append(name)
        elif proved.lower is not None:
            lower[name] = proved.lower
    if smallest is not None:
        conflicts += [
            f"{name} proves none of size < {bound}, but {list(smallest)} holds"
            for name, bound in lower.items()
            if bound > len(smallest)
        ]
        conflicts += [f"{name} proves no explanation exists, but {list(smallest)} holds" for name in impossible]
    outcomes = {name: _contradicted(o, smallest, at_most) for name, o in outcomes.items()}
    floor = max(lower.values())
    bound = floor if smallest is not None or (not impossible and floor <= problem.n) else None
    if conflicts:
        return Decision(
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
                if greedy.method == Method.GREEDY
                else "the deletion explainer gave no answer: a step was undecided (a limit, or a network its exact "
                "engines cannot decide); the minimum known comes from the solvers and the set its run had shown"
            )
            return Decision(Verdict.UNDECIDED, False, smallest, proved, outcomes, tuple(notes), bound)
        certified = proved or (smallest is None and bool(impossible))
        return Decision(Verdict.EXACT_ONLY, certified, smallest, proved, outcomes, tuple(notes), bound)
    minimal, suboptimal = _VERDICTS[Method(greedy.method)]
    if greedy.features == ():
        return Decision(minimal, True, (), True, outcomes, tuple(notes), 0)
    if greedy.features is None:
        return Decision(Verdict.NONE_EXISTS, True, None, False, outcomes, tuple(notes))
    size = len(greedy.features)
    if smallest is not None and len(smallest) < size:
        verdict, certified = suboptimal, True
    elif floor >= size:
        verdict, certified = minimal, True
    else:  # a float MILP's "nothing smaller" is a claim to replay, never a verdict (its status stays in `outcomes`)
        claimed = [name for name, o in outcomes.items() if o.status == Status.NONE_WITHIN]
        if claimed:
            notes.append(f"only a float MILP ({', '.join(claimed)}) says nothing smaller exists: a claim, not proved")
        return Decision(Verdict.UNKNOWN, False, smallest, False, outcomes, tuple(notes), bound)
    return Decision(verdict, certified, smallest, proved, outcomes, tuple(notes), bound)


def canonical(sets: Iterable[tuple[int, ...]]) -> tuple[int, ...] | None:
    """The canonical smallest of `sets` (sorted feature tuples): fewest features, then the
    lexicographically smallest — so that runs that find the same sets, in any order, agree.
    None where there is none."""
    return min(sets, key=lambda s: (len(s), s), default=None)


_VERDICTS = {  # method → its (minimal, suboptimal) verdicts
    Method.GREEDY: (Verdict.GREEDY_MINIMAL, Verdict.GREEDY_SUBOPTIMAL),
    Method.DELETION: (Verdict.DELETION_MINIMAL, Verdict.DELETION_SUBOPTIMAL),
}


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


def case_of(problem: Problem, certificate: RowVerdict, note: str = "") -> Case:
    """The case file for a certificate (its minimum: the canonical smallest exactly valid set).
    Its `greedy` is greedy's answer only: a deletion answer is named in the note (replay re-runs
    Algorithm 1 on the case's `greedy`)."""
    greedy = certificate.greedy
    note = note or "; ".join(certificate.notes)
    if greedy is not None and greedy.method != Method.GREEDY:
        answer = "none" if greedy.features is None else list(greedy.features)
        note = f"{greedy.method} answer: {answer}" + (f"; {note}" if note else "")
    return Case(
        problem.net,
        problem.domain,
        problem.threshold,
        problem.x,
        problem.kind,
        None if greedy is None or greedy.method != Method.GREEDY else greedy.features,
        certificate.minimum,
        {name: outcome.to_json() for name, outcome in certificate.solvers.items()},
        certificate.verdict,
        note,
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

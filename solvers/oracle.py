"""The exact set oracle of the replay (`solvers.base.replay`): one exact question about a set,

    flip(problem, free, time_limit): is there a y in the box, equal to x off `free`, with p(y) ≠ p(x)?

answered True (with a point y [n] that flips, re-checked exactly here), False (an exact engine
proved that none exists) or None (undecided: no engine installed or able, a limit, a smooth
network). It decides what no single point can show: S is an AXp iff flip(free = the features
outside S) is False; S is a CXp iff flip(free = S) is True, which the replay asks when a claim's
own witness fails; no CXp exists iff flip(free = every feature) is False.

**Engines.** Any exact backend (a `Solver` with `exact` true) can be an engine (the registry's
`Backend.flip_search`, `solvers.registry`): it is asked the
contrastive problem on the box pinned to x off `free` (l_i = u_i = x_i there), and its answer
counts when it is a set with a witness that passes `check_witness` here (True), or NONE_EXISTS
(False). Engines are tried in order, each where it applies, until one decides. `ENGINES`,
after a first exact test that needs no engine — interval arithmetic over the pinned box
(`ExactNetwork.box_keeps`) that proves every y there keeps p(x), answering False (the cheap
"no flip within the ε-ball" claims of small classifiers). Then, in this process (`screens`,
issue 40: a solver process's round trip and the MILP's setup would dominate a cheap question),
the exact linear-relaxation bound (`solvers.linear_bound`, False
where it proves the pinned box keeps p(x)), and the box's corners where its linear bounds are
least, points that may flip, each replayed exactly (True); the gradient search is left to the
exact MILP's engine, which starts with it (asked here as well, it would repeat the same search).
Then enumerate on binary boxes of at most its `max_features` (`solvers.registry`; every vertex,
decided exactly, cheaper than any solver there), then the exact MILP's flip search
(`exact_milp.ExactMilpFlipSearch`: a gradient search, then a branch and bound with safe bounds;
piecewise-linear networks), then z3's (`smt.Z3FlipSearch`: one exact satisfiability check of the
whole network, no minimisation), which decides what the MILP leaves open (a region whose only
points lie on a strict boundary). An engine whose library is not installed is skipped (and said
so in the answer's note).

**Time.** z3 does not always stop at its timeout (its exact rational arithmetic checks no clock),
so every engine runs guarded (`solvers.guard`): in a child process stopped at the limit plus its
allowed overrun, whatever it does. The guard rather than the claiming solver's own child process,
because the replay judges the claims of every backend, guarded or not (`solve_minimum(...,
guarded=False)`, the benchmarks), including float backends whose processes hold no z3, and
because the check must not share a process, a limit or a failure with the claim it checks. The
oracle forks one child per engine on its first question (nothing before: an oracle that is never
asked costs nothing), waits for it to start (up to `guard.STARTUP_WAIT` s, counted in no
question's limit), and reuses it; `close` ends it.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import numpy as np

from cardinal.deadline import SPENT, Deadline
from cardinal.domain import Domain
from cardinal.errors import InputError, interrupted_import
from cardinal.problem import Problem, Status

from . import linear_bound
from .guard import STARTUP_WAIT, GuardedSolver
from .registry import BACKENDS, Backend, in_process


@dataclass(frozen=True)
class Engine:
    """An exact backend as an engine of the oracle: its name, the module and class that make it,
    and the problems it is asked about."""

    name: str
    module: str
    factory: str
    applies: Callable[[Problem], bool]


def _engine(entry: Backend) -> Engine:
    """The registry's backend as an engine: asked where it declares it handles the question on
    the general path (`Backend.handles`, general: a pinned box is asked as a search for a point),
    within its `max_features`."""

    def applies(problem: Problem) -> bool:
        within = entry.max_features is None or problem.n <= entry.max_features
        return within and entry.handles(problem.net, problem.domain, "contrastive", general=True)

    assert entry.flip_search is not None
    return Engine(entry.name, entry.module, entry.flip_search, applies)


# enumerate (binary boxes: every vertex), the exact MILP's flip search, z3's (`Backend.flip_order`)
ENGINES: tuple[Engine, ...] = tuple(
    _engine(entry) for entry in sorted(BACKENDS.values(), key=lambda entry: entry.flip_order) if entry.flip_search is not None
)


@dataclass(frozen=True)
class Flip:
    """The oracle's answer. `answer`: True (`witness` [n] flips, checked exactly), False (no y
    flips: proved by the engine named in `note`), None (undecided: `note` says why)."""

    answer: bool | None
    witness: tuple[float, ...] | None = None
    note: str = ""


def check_witness(problem: Problem, free: frozenset[int], witness: tuple[float, ...] | None) -> tuple[bool | None, str]:
    """Exactly: does the point `witness` [n] agree with x off `free`, lie in the box and flip the
    prediction? (True / False / None when a smooth enclosure leaves the flip undecided, and what
    is wrong with it, phrased to follow "the witness ...".)"""
    if witness is None:
        return False, "is missing"
    y = np.asarray(witness, dtype=np.float64)
    outside = [i for i in range(problem.n) if i not in free and y[i] != problem.x[i]]
    if outside:
        return False, f"changes feature {outside[0]}, which is not in the set"
    try:
        problem.domain.check(y[None, :], source="witness")
    except InputError as error:
        return False, f"is no point of the box ({error})"
    flips = problem.flips(y)
    if flips is None:
        return None, "is undecided (smooth margin)"
    return flips, "" if flips else "does not flip the prediction in exact arithmetic"


def pinned(problem: Problem, free: frozenset[int]) -> Problem:
    """The contrastive problem of x on the box pinned to x off `free`: a CXp of it exists iff some
    y in the box, equal to x off `free`, flips the prediction."""
    mask = np.isin(np.arange(problem.n), sorted(free))
    domain = problem.domain
    box = Domain(np.where(mask, domain.lower, problem.x), np.where(mask, domain.upper, problem.x), domain.binary)
    return Problem.make(problem.net, problem.x, "contrastive", box, problem.threshold, problem.epsilon)


def _screened(problem: Problem, free: frozenset[int], box: Domain) -> Flip | None:
    """The question decided in this process where it is cheap: False where the exact
    linear-relaxation bound (`solvers.linear_bound`) proves that the box `box` (pinned to x off
    `free`) keeps p(x); True where a corner that minimizes one of its linear bounds gives a point
    that flips, replayed exactly; None otherwise (the engines decide)."""
    if not problem.net.is_piecewise_linear:
        return None
    keeps, corners = linear_bound.screen(problem, box.lower, box.upper)
    if keeps:
        return Flip(False, None, "exact linear-relaxation bound over the box")
    predictions = problem.predictions(corners)
    for corner in corners[(predictions >= 0) & (predictions != problem.prediction)]:
        if check_witness(problem, free, witness := tuple(float(v) for v in corner))[0]:
            return Flip(True, witness, "a corner of the linear bound (replayed exactly)")
    return None


class SetOracle:
    """The exact set oracle (module docstring) over `engines`; a context manager that ends the
    engines' processes."""

    def __init__(self, engines: tuple[Engine, ...] = ENGINES, intervals: bool = True, screens: bool | None = None) -> None:
        """`intervals`: the interval test before the engines (False: the engines alone decide);
        `screens`: the linear-relaxation bound and the points replayed exactly, in this process,
        after it (False: the interval test and the engines alone, as before issue 40). By default
        they run where `intervals` is on and there are engines: they answer only what the engines
        would, faster, and an oracle built with fewer tests stays as limited as it was asked to be."""
        self.engines, self.intervals = engines, intervals
        self.screens = intervals and bool(engines) if screens is None else screens
        self._started: dict[str, GuardedSolver | str] = {}  # name → its guarded engine, or why it is missing
        self._local: dict[str, Any] = {}  # name → its engine in this process (`registry.IN_PROCESS_FEATURES`)
        self.deadline = Deadline.never()  # the call's budget (`within`)

    @contextlib.contextmanager
    def within(self, deadline: Deadline | None) -> Iterator[SetOracle]:
        """Questions asked inside it end by `deadline` (None: no budget), the earlier one restored after."""
        earlier, self.deadline = self.deadline, deadline or Deadline.never()
        try:
            yield self
        finally:
            self.deadline = earlier

    def flip(self, problem: Problem, free: frozenset[int], time_limit: float) -> Flip:
        """Is there a y in the box, equal to x off `free`, with p(y) ≠ p(x)? Each engine gets
        `time_limit` seconds (> 0), or the time left before `deadline` when that is less."""
        question = pinned(problem, free)
        box = question.domain
        if self.intervals and problem.exact.box_keeps(box.lower, box.upper, problem.prediction, problem.threshold):
            return Flip(False, None, "exact interval bounds over the box")
        if self.screens and (screened := _screened(problem, free, box)) is not None:
            return screened
        notes = []
        for entry in (e for e in self.engines if e.applies(problem)):
            name, limit = entry.name, self.deadline.limit(time_limit)
            if limit <= 0:
                notes.append(f"{name}: not asked, {SPENT}")
                continue
            engine = self._in_process(entry) if in_process(name, problem.n) else self._engine(entry)
            if isinstance(engine, str):
                notes.append(engine)
                continue
            outcome = engine.solve(question, None, self.deadline.limit(time_limit))
            if outcome.solution is not None and outcome.status in (Status.OPTIMAL, Status.FEASIBLE):
                valid, reason = check_witness(problem, free, outcome.witness)
                if valid:
                    return Flip(True, outcome.witness, name)
                notes.append(f"{name}: its point {reason}")
            elif outcome.status == Status.NONE_EXISTS and outcome.exact:
                return Flip(False, None, name)
            else:
                notes.append(f"{name}: {outcome.status.value}" + (f" ({outcome.message})" if outcome.message else ""))
        return Flip(None, None, "; ".join(notes) or "no exact engine applies")

    def _engine(self, engine: Engine) -> GuardedSolver | str:
        """The engine's guarded backend, started on first use, or why there is none."""
        if engine.name not in self._started:
            try:
                factory = getattr(importlib.import_module(engine.module), engine.factory)
            except ImportError as error:
                interrupted_import(error)
                self._started[engine.name] = f"{engine.name} is not installed ({error.name} missing)"
            else:
                guarded = GuardedSolver(engine.name, factory, {})
                # its first question must not count the process's start (seconds, importing torch),
                # unless the call's budget is what is left
                until = min(time.perf_counter() + STARTUP_WAIT, self.deadline.perf_counter())
                with contextlib.suppress(ChildProcessError):  # the questions answer `error` with the reason
                    guarded.wait_started(until)
                self._started[engine.name] = guarded
        return self._started[engine.name]

    def _in_process(self, engine: Engine) -> Any:
        """The engine's backend in this process, made on first use, or why there is none."""
        if engine.name not in self._local:
            try:
                self._local[engine.name] = getattr(importlib.import_module(engine.module), engine.factory)()
            except ImportError as error:
                interrupted_import(error)
                return f"{engine.name} is not installed ({error.name} missing)"
        return self._local[engine.name]

    def close(self) -> None:
        """End every engine's process; a later question starts them again."""
        for local in self._local.values():
            local.close()
        self._local.clear()
        for engine in self._started.values():
            if isinstance(engine, GuardedSolver):
                engine.close()
        self._started.clear()

    def __enter__(self) -> SetOracle:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()

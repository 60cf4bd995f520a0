"""Minimum abductive explanations of any network by implicit hitting sets (docs/design.md §4).

Every AXp hits every CXp. The loop keeps the contrastive sets found so far, takes a hitting set
S of them, and asks the backend's *flip oracle* for a point y of the box that agrees with x on S
and flips the prediction. A point → the features where y differs from x form a new contrastive
set, shrunk in exact arithmetic, and the loop goes on. None → S is an AXp; when S is a *minimum*
hitting set, no AXp is smaller, since every AXp hits every set found.

On piecewise-linear networks most candidates are refuted without the oracle: `Supply` finds
small, pairwise disjoint contrastive sets inside the free set by cheap exact point checks and the
gradient search, and the oracle is asked only when it finds none. There every candidate is a
minimum hitting set (PySAT's RC2: milliseconds), whose size is an exact lower bound at each
step; a call stopped at its limit says its bound (`Outcome.lower`, and "exact lower bound
L" in the message: the largest minimum hitting set's size, or a packing of disjoint sets found;
there the supply and minimum candidates raise the bound where the oracle's shrunk witnesses and
greedy candidates leave it near 1). Elsewhere minimum hitting sets were costly (an
exact branch and bound) and most candidates are refuted, so the loop proposes a greedy hitting set (most sets hit first)
while greedy ones keep being refuted, and asks for a minimum one only when a greedy candidate
holds: that AXp is then the best known, and a minimum hitting set no smaller proves it minimum.

On networks with one hidden ReLU layer the loop, not done after `SEED_AFTER` seconds, asks the
oracle once about the fewest features that a sound linear relaxation certifies (`relaxed_axp`):
an AXp from the upper side, which bounds every later candidate and is the answer of a call
stopped at its deadline.

The oracle's witnesses are replayed exactly before use, so every contrastive set in the loop is
genuine and every lower bound the hitting sets give is sound; a witness that fails ends the loop
with ERROR (no set, no verdict). A hitting set of every feature leaves nothing free and is an
AXp without asking: a float oracle asked it may answer with x itself when f(x) lies within its
tolerance of t (f(x) = 0.140625·0.01 as doubles, t = 0.00140625: f(x) > t exactly, f(x) = t in
floating point).

`minimum_contrastive` is the dual loop, for backends that answer only fixed-set questions (the
Marabou verifier): it keeps abductive sets and asks whether a minimum hitting set of them, set
free, flips the prediction.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cardinal.errors import OutOfTime
from cardinal.problem import Outcome, Problem, Status, stopped

from . import linear_bound, relaxed_axp, reset_bound
from .attack import first_order_moves, flipping_points, scores
from .deletion import SUBSET_MINIMAL, UNKNOWN, deletion
from .guard import report_incumbent, report_lower
from .oracle import Flip, check_witness

SEED_AFTER = 5.0  # seconds of the loop before it asks about `_seed`'s set (most small problems end sooner)
SEED_SHARE, SEED_SECONDS = 0.2, 15.0  # the time `_seed` may take: a share of the time left, at most this
SEED_QUARTER = 0.25  # a short call seeds itself after this share of its time, if sooner than `SEED_AFTER`
DELETION_SHARE = 0.5  # the share of the time left that `_deletion_seed` may take
RESET_SHARE = 0.25  # and `_by_reset`, after it


class OracleTimeout(OutOfTime):
    """The flip oracle ran out of time."""


# The points behind contrastive sets, each the (feature, value) pairs where a point of the box that
# flips the prediction (exactly) differs from x: the lemmas of a "witness-hitting" certificate.
Lemmas = tuple[tuple[tuple[int, float], ...], ...]

# free features (those allowed to differ from x), deadline (time.perf_counter() value) →
# a flipping point y [n], or None when none exists. Raises OracleTimeout.
FlipOracle = Callable[[frozenset[int], float], np.ndarray | None]


LOOP = "hitting"  # the `Outcome.solver` of the loops' own outcomes; the backend that calls a loop stamps its own


@dataclass
class OracleCalls:
    """The flip-oracle calls that the loops made (`minimum_abductive`, `minimum_contrastive`,
    `solvers.covering.minimum_by_covering`): pass one as `calls`, and each call adds the oracle
    calls it made to `count` (those of its own steps and seeding, not the reset bound's).
    `Outcome` holds no count: the engines say it in their messages."""

    count: int = 0


def loop_outcome(status: Status, started: float, solution: tuple[int, ...] | None = None, **fields: Any) -> Outcome:
    """How a loop ended, as the one result type: an `Outcome` with `status`, `solution` and
    `fields` (`message`, `witness`, `lower`, `lemmas`), solver `LOOP`, the seconds since `started`
    (a `time.perf_counter()` value) and `exact` False: the backend that called the loop reads
    these fields into its own outcome (`solvers.base.BaseSolver.outcome`: its name, time,
    exactness).

    The loops' outcomes: OPTIMAL (`solution` a minimum AXp, or for `minimum_contrastive` a minimum
    CXp with its flipping point [n] in `witness`), NONE_WITHIN, NONE_EXISTS (`minimum_contrastive`),
    FEASIBLE (stopped with a set within `at_most`), TIMEOUT or ERROR (the reason in `message`).
    `lower` (`minimum_abductive`, `solvers.covering`): no AXp has fewer features, from exact
    evidence alone (contrastive sets replayed exactly; the set's size where OPTIMAL); None: no
    bound. `lemmas` (`minimum_abductive`, OPTIMAL or NONE_WITHIN): the points behind its sets
    (`HittingSets`)."""
    return Outcome(status, LOOP, time.perf_counter() - started, solution, **fields)


def minimum_abductive(
    problem: Problem,
    find_flip: FlipOracle,
    at_most: int | None,
    deadline: float,
    supply: bool = True,
    seed_after: float = SEED_AFTER,
    calls: OracleCalls | None = None,
) -> Outcome:
    """Run the implicit-hitting-set loop until a minimum AXp, a bound, or the deadline; its answer
    is an `Outcome` (`loop_outcome`), the oracle calls it made added to `calls`. `supply`:
    False turns `Supply` off, so that every contrastive set comes from `find_flip` (what an
    oracle's answers alone give: its tests). `seed_after`: the loop's seconds before it seeds
    itself (deletion, else the set a relaxation certifies: `_deletion_seed`, `_seed`), once; a
    call of T < 4 · `seed_after` seconds seeds itself after T / 4, leaving deletion half of the
    rest; infinite: never."""
    tally = OracleCalls() if calls is None else calls
    with HittingSets(problem.n) as contrastive_sets:
        supplier = Supply(problem, supply)
        return _abductive_loop(problem, find_flip, at_most, deadline, contrastive_sets, supplier, seed_after, tally)


def _abductive_loop(
    problem: Problem,
    find_flip: FlipOracle,
    at_most: int | None,
    deadline: float,
    contrastive_sets: HittingSets,
    supply: Supply,
    seed_after: float,
    calls: OracleCalls,
) -> Outcome:
    features = frozenset(range(problem.n))
    best: frozenset[int] | None = None  # the smallest AXp found
    exact = False  # whether the next candidate must be a minimum hitting set
    lower = 0  # the largest minimum hitting set's size so far: no AXp is smaller
    started = time.perf_counter()
    now = started  # when the loop, not done yet, seeds itself: after `seed_after` s, or a quarter of its time
    seed_at = now + (seed_after if math.isinf(seed_after) else min(seed_after, SEED_QUARTER * (deadline - now)))

    def stop() -> Outcome:  # at the deadline: the best AXp and the exact lower bound so far
        return _stopped(best, at_most, started, max(lower, contrastive_sets.disjoint()))

    while True:
        if time.perf_counter() > deadline:
            return stop()
        if time.perf_counter() >= seed_at:
            seed_at = math.inf
            limit = at_most if best is None else len(best) - 1
            found, seed_calls, timed_out = _seeded(problem, find_flip, contrastive_sets, supply, limit, deadline)
            calls.count += seed_calls
            if found is not None:
                best, exact = found, True
                report_incumbent(sorted(best))
            if timed_out:
                return stop()
            floor, best, proved = _by_reset(problem, find_flip, best, supply, deadline)
            if floor + 1 > lower:
                lower = floor + 1
                report_lower(lower)  # a guarded call stopped from outside keeps it
            lemmas = tuple(contrastive_sets.lemmas)
            if best is not None and (proved or len(best) <= lower):
                return loop_outcome(Status.OPTIMAL, started, tuple(sorted(best)), lower=len(best), lemmas=lemmas)
            if best is None and at_most is not None and floor >= at_most:
                return loop_outcome(Status.NONE_WITHIN, started, lower=floor + 1, lemmas=lemmas)
            continue
        candidate = contrastive_sets.greedy()
        limit = at_most if best is None else len(best) - 1  # a candidate must beat these
        if exact or supply.applies or (limit is not None and len(candidate) > limit):
            try:
                candidate = contrastive_sets.minimum(limit, deadline)
            except OracleTimeout:
                return stop()
            if candidate is None:  # every AXp has more than `limit` features
                lemmas = tuple(contrastive_sets.lemmas)
                if best is None:
                    return loop_outcome(Status.NONE_WITHIN, started, lower=(limit or 0) + 1, lemmas=lemmas)
                return loop_outcome(Status.OPTIMAL, started, tuple(sorted(best)), lower=len(best), lemmas=lemmas)
            if len(candidate) > lower:
                lower = len(candidate)
                report_lower(lower)
            exact = True
        if candidate == features:  # nothing free: y = x, which cannot flip (no float oracle asked)
            y = None
        elif found := supply.sets(features - candidate, deadline):  # small sets by the gradient search: no oracle asked
            for point in found:
                add_point(problem, contrastive_sets, point)
            exact = False
            continue
        else:
            calls.count += 1
            try:
                y = find_flip(features - candidate, deadline)
            except OracleTimeout:
                return stop()
        if y is None:
            if exact:
                lemmas = tuple(contrastive_sets.lemmas)
                return loop_outcome(Status.OPTIMAL, started, tuple(sorted(candidate)), lower=len(candidate), lemmas=lemmas)
            best, exact = candidate, True
            report_incumbent(sorted(best))
            continue
        flipped = problem.flips(y)
        if not flipped:  # the oracle says S is no AXp, but its point does not show it: no verdict
            reason = "is undecided (smooth margin)" if flipped is None else "does not flip the prediction"
            return loop_outcome(Status.ERROR, started, message=f"the flip oracle's point {reason} in exact arithmetic")
        _add_shrunk(problem, contrastive_sets, y, supply)
        exact = False


class Screened:
    """A flip oracle behind the exact screens that `solvers.oracle` runs before its engines (issue
    40), for the loops here and in `solvers.covering`: over the box pinned to x off `free`, the
    interval test (`ExactNetwork.box_keeps`), then the exact linear-relaxation bound
    (`solvers.linear_bound`), each a proof that no y flips (None, with no engine asked); then the
    corners where the bound's linear functions are least, each replayed exactly (one that flips
    is the answer); the rest go to `find_flip`. Only where the bound applies (ReLU or identity
    hidden layers) and when `enabled` (the backend's `supply` option: off, every answer is
    `find_flip`'s own, as its tests ask); elsewhere every question goes to `find_flip`. Counts
    what each decided (`summary`, in the engines' messages)."""

    def __init__(self, problem: Problem, find_flip: FlipOracle, enabled: bool = True) -> None:
        self.problem, self.find_flip = problem, find_flip
        self.applies = enabled and problem.net.is_piecewise_linear and linear_bound.applies(problem.net)
        self.proved = self.flipped = self.passed = 0

    def __call__(self, free: frozenset[int], deadline: float) -> np.ndarray | None:
        problem = self.problem
        if self.applies and time.perf_counter() < deadline:
            pinned = np.isin(np.arange(problem.n), sorted(free))
            lower = np.where(pinned, problem.domain.lower, problem.x)
            upper = np.where(pinned, problem.domain.upper, problem.x)
            if problem.exact.box_keeps(lower, upper, problem.prediction, problem.threshold):
                self.proved += 1
                return None
            keeps, corners = linear_bound.screen(problem, lower, upper)
            if keeps:
                self.proved += 1
                return None
            predictions = problem.predictions(corners)
            for corner in corners[(predictions >= 0) & (predictions != problem.prediction)]:
                if check_witness(problem, free, tuple(corner.tolist()))[0]:
                    self.flipped += 1
                    return corner
        self.passed += 1
        return self.find_flip(free, deadline)

    def summary(self) -> str:
        """What the screens decided, for an engine's message."""
        return f"screens: {self.proved} no-flip proofs, {self.flipped} flipping corners, {self.passed} questions passed on"


def _seeded(
    problem: Problem, find_flip: FlipOracle, contrastive_sets: HittingSets, supply: Supply, at_most: int | None, deadline: float
) -> tuple[frozenset[int] | None, int, bool]:
    """The loop's one seeding: deletion's AXp (`_deletion_seed`); where deletion did not finish,
    the smaller of the AXp its removals proved (if any) and the set a relaxation certifies
    (`_seed`) if the oracle finds no flip with the rest free (a flip it finds instead is a
    contrastive set like any other). Returns the AXp or None, the oracle calls made, and whether
    the oracle stopped at the deadline."""
    found, partial, calls = _deletion_seed(problem, find_flip, contrastive_sets, supply, at_most, deadline)
    if found is not None:
        return found, calls, False
    limit = at_most if partial is None else len(partial) - 1
    seed = _seed(problem, supply, limit, deadline)
    if seed is None:
        return partial, calls, False
    try:
        y = find_flip(frozenset(range(problem.n)) - seed, deadline)
    except OracleTimeout:
        return partial, calls + 1, True
    if y is None:
        return seed, calls + 1, False
    if problem.flips(y):  # the floats were wrong
        _add_shrunk(problem, contrastive_sets, y, supply)
    return partial, calls + 1, False


def _by_reset(
    problem: Problem, find_flip: FlipOracle, best: frozenset[int] | None, supply: Supply, deadline: float
) -> tuple[int, frozenset[int] | None, bool]:
    """After the seeding, for `RESET_SHARE` of the time left: the reset bound's floor
    (`reset_bound.reset_floor`: no AXp has at most that many features; −1: none), raised one
    claim at a time by reset-bound trees (`reset_bound.search_reset`, asking the loop's oracle
    where gradient ascent finds no flip: an AXp that oracle finds instead is smaller, and the
    best known) until it meets the best AXp known. Returns the floor, the smallest AXp known, and
    whether it is proved minimum. Only with the supply on (the backends' own answers alone
    otherwise)."""
    if not supply.applies or not reset_bound.applies(problem):
        return -1, best, False
    until = time.perf_counter() + RESET_SHARE * (deadline - time.perf_counter())
    floor = reset_bound.reset_floor(problem, until)
    try:
        while best is not None and floor < len(best) - 1 and time.perf_counter() < until:
            found = reset_bound.search_reset(problem, floor + 1, until, find_flip, floor)
            if found.proof is not None:
                floor += 1
            elif found.counterexample is not None:
                best = frozenset(found.counterexample)
                report_incumbent(sorted(best))
            else:
                break
    except OracleTimeout:
        pass
    return floor, best, best is not None and floor >= len(best) - 1


def _deletion_seed(
    problem: Problem, find_flip: FlipOracle, contrastive_sets: HittingSets, supply: Supply, at_most: int | None, deadline: float
) -> tuple[frozenset[int] | None, frozenset[int] | None, int]:
    """A subset-minimal AXp by deletion (`solvers.deletion`, the sensitivity traversal), each
    question asked of the loop's own oracle, for at most `DELETION_SHARE` of the time left: an
    AXp from the upper side (the oracle proved its free set keeps p(x)), which bounds every later
    candidate and is the answer of a call stopped at its deadline. Every point that flips on the
    way gives the loop a contrastive set (its support, not shrunk). Returns the AXp (None when deletion did not finish or
    it has more than `at_most` features), where deletion did not finish the AXp its removals
    proved (`Deletion.removed`: the features never removed; None when none was removed or it has
    more than `at_most` features), and the oracle calls made. Deletion's AXp is usually smaller
    than the set a relaxation certifies (docs/results.md). Where deletion stops at a flip question
    no engine decides in its time (the 2-Conv CNN of `bench.digits`), the AXp its removals proved
    is the loop's answer, where it would have none."""
    until = time.perf_counter() + DELETION_SHARE * (deadline - time.perf_counter())
    asker = _LoopAsker(find_flip, until, contrastive_sets, supply)
    found = deletion(problem, asker, max(until - time.perf_counter(), 1e-3), traversal="sensitivity")  # type: ignore[arg-type]
    calls = asker.calls

    def within(features: frozenset[int]) -> frozenset[int] | None:
        return features if at_most is None or len(features) <= at_most else None

    if found.status == SUBSET_MINIMAL and found.features is not None:
        return within(frozenset(found.features)), None, calls
    if found.status != UNKNOWN or not found.removed:
        return None, None, calls
    return None, within(frozenset(range(problem.n)) - found.removed), calls


class _LoopAsker:
    """The loop's flip oracle in the shape deletion asks (`flip(problem, free, time_limit)` →
    `oracle.Flip`), stopped at `until`; each flipping point's support joins the loop's sets."""

    def __init__(self, find_flip: FlipOracle, until: float, contrastive_sets: HittingSets, supply: Supply) -> None:
        self.find_flip, self.until, self.sets, self.supply = find_flip, until, contrastive_sets, supply
        self.calls = 0

    def flip(self, problem: Problem, free: frozenset[int], time_limit: float) -> Flip:
        self.calls += 1
        try:
            y = self.find_flip(free, min(self.until, time.perf_counter() + time_limit))
        except OracleTimeout:
            return Flip(None, None, "the loop's share of time for deletion ran out")
        if y is None:
            return Flip(False, None, "the loop's flip oracle")
        if not problem.flips(y):
            return Flip(None, None, "the loop's flip oracle gave a point that does not flip exactly")
        add_point(problem, self.sets, y)  # not shrunk: 72 s, not 55, on MNIST-FC
        return Flip(True, tuple(float(v) for v in y), "the loop's flip oracle")


def _seed(problem: Problem, supply: Supply, at_most: int | None, deadline: float) -> frozenset[int] | None:
    """A set that a sound relaxation says is an AXp (`relaxed_axp`, networks with one hidden ReLU
    layer), for the oracle to judge: an AXp of s features bounds every candidate by s − 1, and the
    loop stopped at its deadline answers with it. Sought for `SEED_SHARE` of the time left, at
    most `SEED_SECONDS`, with the supply on; None when no set smaller than every feature (and of
    at most `at_most`) was found. Floats: the oracle's answer decides."""
    if not supply.applies or not relaxed_axp.applies(problem):
        return None
    found = relaxed_axp.relaxed_axp(problem, min(SEED_SECONDS, SEED_SHARE * (deadline - time.perf_counter())))
    if found is None or len(found) == problem.n or (at_most is not None and len(found) > at_most):
        return None
    return found


class Supply:
    """Small contrastive sets inside a free set F without the oracle, for the loop: every AXp hits
    every contrastive set, and a small one constrains the hitting sets most. The features of F go
    by their first-order effect at x (`attack.first_order_moves`), largest first. The points that
    move the first k of them to the end of the box that raises the score (k = 1, …, |F|) are
    judged exactly (`Problem.predictions`), and where none flips, the gradient search
    (`attack.flipping_points`, `STARTS` starts) runs on prefixes of the lengths in `PREFIXES`, all
    at once. The first point that flips is shrunk exactly, the features of least effect reset
    first (`shrink_points`). Its features then leave F and the next set is sought, up to `MOST`
    pairwise disjoint sets. Floats only choose: every set is the support of a point that flips in
    exact arithmetic. Finding none proves nothing (the oracle is asked). Piecewise-linear networks
    only (none on others, nor when turned off).

    The gradient search after each prefix point that fails gives fewer sets but more diverse
    ones, and diverse sets raise the loop's bound more than many similar ones; `MOST` sets per
    free set raised it further than fewer (docs/results.md)."""

    STARTS = 4
    MOST = 32
    SHRINK_SLACK = 1e-6  # the float score a shrinking step must keep (then one exact check)
    PREFIXES = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64)  # then every doubling

    def __init__(self, problem: Problem, enabled: bool = True) -> None:
        self.problem = problem
        self.applies = enabled and problem.net.is_piecewise_linear
        effects, self.ends = first_order_moves(problem) if self.applies else (np.zeros(problem.n), problem.x)
        self.order = tuple(int(i) for i in np.lexsort((np.arange(problem.n), -effects)))  # largest effect first

    def sets(self, free: frozenset[int], deadline: float = math.inf) -> list[np.ndarray]:
        """The points [n] behind up to `MOST` pairwise disjoint contrastive sets inside `free`
        (class docstring; each set: where its point differs from x), fewer when the `deadline` (a
        time.perf_counter() value) passes."""
        found: list[np.ndarray] = []
        left = [i for i in self.order if i in free]
        while self.applies and left and len(found) < self.MOST and time.perf_counter() < deadline:
            y = self._corner(left)
            if y is None:
                y = self._searched(left, seed=len(found))
            if y is None:
                break
            point = self._shrunk(y)
            found.append(point)
            left = [i for i in left if point[i] == self.problem.x[i]]
        return found

    def _corner(self, left: list[int]) -> np.ndarray | None:
        """The first point [n] that moves a prefix of `left` to `ends` and flips exactly, or None."""
        problem = self.problem
        moved = np.arange(len(left))[:, None] >= np.arange(len(left))[None, :]  # row k: the first k + 1
        Y = np.repeat(problem.x[None, :], len(left), axis=0)
        Y[:, left] = np.where(moved, self.ends[left], problem.x[left])
        predicted = problem.predictions(Y)
        flips = (predicted >= 0) & (predicted != problem.prediction)
        return Y[int(np.argmax(flips))] if flips.any() else None

    def _shrunk(self, y: np.ndarray) -> np.ndarray:
        """A point that flips exactly, y [n], with each changed feature, least effect first, reset
        to x while the float score stays above `SHRINK_SLACK`, if that point flips exactly; else
        `shrink_points`' (exact at every step)."""
        problem, z = self.problem, np.array(y, dtype=np.float64)
        for i in self.order[::-1]:
            if z[i] != problem.x[i]:
                trial = z.copy()
                trial[i] = problem.x[i]
                if scores(problem, trial[None, :])[0] > self.SHRINK_SLACK:
                    z = trial
        if problem.flips(z):
            return z
        return shrink_points(problem, np.asarray(y, dtype=np.float64)[None, :], self.order[::-1])[0]

    def _searched(self, left: list[int], seed: int) -> np.ndarray | None:
        """The gradient search's first flipping point [n] on prefixes of `left`, or None."""
        lengths = _lengths(len(left))
        movable = np.zeros((len(lengths), self.problem.n), dtype=bool)
        for row, k in enumerate(lengths):
            movable[row, left[:k]] = True
        points, flips = flipping_points(self.problem, movable, self.STARTS, seed=seed)
        return points[int(np.argmax(flips))] if flips.any() else None


def _lengths(size: int) -> list[int]:
    """Prefix lengths up to `size`: `Supply.PREFIXES`, then doublings, then `size` itself."""
    lengths = [k for k in Supply.PREFIXES if k < size]
    while lengths and lengths[-1] * 2 < size:
        lengths.append(lengths[-1] * 2)
    return [*lengths, size]


class HittingSets:
    """The contrastive sets the loop has found, kept for its two questions: a greedy hitting set
    (on a [sets, n] bool matrix grown in place: the loop makes thousands of candidates, and
    rebuilding the matrix for each was a large share of a call; docs/results.md) and a minimum
    one. The minimum comes from PySAT's RC2 (an exact MaxSAT solver on integers: one hard clause
    per set, a soft clause ¬e per element), kept between calls so that each new set is one more
    clause; every answer is checked to hit every set. Without PySAT, `minimum_hitting_set`.
    `lemmas`: the points behind the sets added with one (`add`), for a certificate."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.lemmas: list[tuple[tuple[int, float], ...]] = []
        self.matrix = np.zeros((64, n), dtype=bool)  # [capacity, n]; the first `count` rows are the sets
        self.count = 0
        self.maxsat = _maxsat(n)

    def __enter__(self) -> HittingSets:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.maxsat is not None:
            self.maxsat.delete()
            self.maxsat = None

    def __len__(self) -> int:
        return self.count

    def sets(self) -> list[frozenset[int]]:
        return [frozenset(int(i) for i in np.flatnonzero(row)) for row in self.matrix[: self.count]]

    def add(self, found: frozenset[int], point: np.ndarray | None = None) -> None:
        """One more set; `point` [n]: a point that flips exactly and differs from x on `found`
        alone, kept in `lemmas`."""
        if point is not None:
            self.lemmas.append(tuple((i, float(point[i])) for i in sorted(found)))
        if self.count == len(self.matrix):
            self.matrix = np.concatenate([self.matrix, np.zeros_like(self.matrix)])
        self.matrix[self.count, list(found)] = True
        self.count += 1
        if self.maxsat is not None:
            self.maxsat.add_clause([i + 1 for i in sorted(found)])

    def greedy(self) -> frozenset[int]:
        """A hitting set built by taking the element that hits the most sets not hit yet (the lowest
        index among equals)."""
        pending = self.matrix[: self.count]
        chosen: set[int] = set()
        while len(pending):
            element = int(np.argmax(pending.sum(axis=0)))  # the first of the most frequent
            chosen.add(element)
            pending = pending[~pending[:, element]]
        return frozenset(chosen)

    def disjoint(self) -> int:
        """A lower bound on every hitting set's size: sets picked greedily, smallest first, that
        share no element."""
        return _disjoint_count(self.sets())

    def minimum(self, limit: int | None, deadline: float = math.inf) -> frozenset[int] | None:
        """A smallest hitting set; None if every one has more than `limit` elements. RC2 is
        interrupted at the `deadline` (a time.perf_counter() value): then OracleTimeout, and this
        object is done (RC2's state after an interruption is not trusted). Its calls grow with the
        bound and the sets (docs/results.md), hence the deadline: a call that ran past a loop's
        deadline left a guarded call killed with no bound."""
        if self.maxsat is None:
            return minimum_hitting_set(self.sets(), limit)
        if time.perf_counter() >= deadline:
            raise OracleTimeout
        interrupted = threading.Event()
        timer = None
        if math.isfinite(deadline):
            maxsat = self.maxsat
            timer = threading.Timer(max(deadline - time.perf_counter(), 0.0), lambda: (interrupted.set(), maxsat.interrupt()))
            timer.start()
        try:
            model = self.maxsat.compute(expect_interrupt=timer is not None)
        finally:
            if timer is not None:
                timer.cancel()
                timer.join()  # an interruption under way ends before RC2 is used or deleted
        if interrupted.is_set():
            raise OracleTimeout
        if model is None:  # no hard clause is empty, so this cannot happen: say so loudly
            raise RuntimeError("RC2 found no hitting set of non-empty sets")
        chosen = frozenset(v - 1 for v in model if 0 < v <= self.n)
        if self.count and not self.matrix[: self.count, sorted(chosen)].any(axis=1).all():
            raise RuntimeError("RC2's answer misses a set")
        if len(chosen) != self.maxsat.cost:
            raise RuntimeError("RC2's cost differs from its answer's size")
        return None if limit is not None and len(chosen) > limit else chosen


def _maxsat(n: int) -> Any:
    """An RC2 MaxSAT solver with the soft clauses ¬e_i (i < n, variable i + 1), or None without PySAT."""
    try:
        from pysat.examples.rc2 import RC2
        from pysat.formula import WCNF
    except ImportError:
        return None
    formula = WCNF()
    for i in range(n):
        formula.append([-(i + 1)], weight=1)
    return RC2(formula)


def _stopped(best: frozenset[int] | None, at_most: int | None, started: float, lower: int) -> Outcome:
    """At the deadline: the best AXp found, as any backend reports a call stopped by its limit, and
    the exact lower bound (said in the message too), the loop having started at `started`."""
    status, kept = stopped(None if best is None else tuple(sorted(best)), at_most)
    return loop_outcome(status, started, kept, message=f"exact lower bound {lower}", lower=lower)


def support(problem: Problem, y: np.ndarray) -> frozenset[int]:
    """The features where y [n] differs from x."""
    return frozenset(int(i) for i in np.flatnonzero(np.asarray(y) != problem.x))


def add_point(problem: Problem, contrastive_sets: HittingSets, point: np.ndarray) -> None:
    """A point [n] that flips exactly: its set (`support`) joins the sets, the point their lemmas."""
    contrastive_sets.add(support(problem, point), point)


def _add_shrunk(problem: Problem, contrastive_sets: HittingSets, y: np.ndarray, supply: Supply) -> None:
    """The flipping point y [n] shrunk exactly (least effect first), added with its set."""
    add_point(problem, contrastive_sets, shrink_points(problem, np.asarray(y, dtype=np.float64)[None, :], supply.order[::-1])[0])


def shrink_witness(problem: Problem, y: np.ndarray, order: Sequence[int] | None = None) -> frozenset[int]:
    """Reset changed features of a flipping point y back to x while it still flips (exactly), in
    `order` (default: index order); returns the features where the result differs from x."""
    shrunk = shrink_points(problem, np.asarray(y, dtype=np.float64)[None, :], order)[0]
    return frozenset(int(i) for i in np.flatnonzero(shrunk != problem.x))


def shrink_points(problem: Problem, Y: np.ndarray, order: Sequence[int] | None = None) -> np.ndarray:
    """`shrink_witness` for many flipping points Y [B, n] at once: feature by feature in `order`
    (default: index order), each reset to x in every row where the row still flips with it reset
    (exactly). Returns the shrunk points [B, n]."""
    Y = np.array(Y, dtype=np.float64)
    for i in range(problem.n) if order is None else order:
        rows = np.flatnonzero(Y[:, i] != problem.x[i])
        if not len(rows):
            continue
        trial = Y[rows].copy()
        trial[:, i] = problem.x[i]
        predicted = problem.predictions(trial)
        still = rows[(predicted >= 0) & (predicted != problem.prediction)]
        Y[still, i] = problem.x[i]
    return Y


def minimum_hitting_set(sets: list[frozenset[int]], limit: int | None = None) -> frozenset[int] | None:
    """A smallest set meeting every set in `sets` (branch and bound); None if all are larger than
    `limit`. The empty list is hit by the empty set."""
    best: list[frozenset[int] | None] = [None]
    bound = [len(set().union(*sets)) + 1 if limit is None else limit + 1]

    def search(chosen: frozenset[int], pending: list[frozenset[int]]) -> None:
        if len(chosen) >= bound[0]:
            return
        unhit = [s for s in pending if not s & chosen]
        if not unhit:
            best[0], bound[0] = chosen, len(chosen)
            return
        if len(chosen) + _disjoint_count(unhit) >= bound[0]:
            return
        smallest = min(unhit, key=len)
        counts = {e: sum(e in s for s in unhit) for e in smallest}
        for element in sorted(smallest, key=lambda e: (-counts[e], e)):
            search(chosen | {element}, unhit)

    search(frozenset(), sets)
    return best[0]


def _disjoint_count(sets: list[frozenset[int]]) -> int:
    """A lower bound on any hitting set's size: sets picked greedily that share no element."""
    used: set[int] = set()
    count = 0
    for s in sorted(sets, key=len):
        if not s & used:
            used |= s
            count += 1
    return count


def minimum_contrastive(
    problem: Problem, find_flip: FlipOracle, at_most: int | None, deadline: float, calls: OracleCalls | None = None
) -> Outcome:
    """Minimum CXp by implicit hitting sets, the dual of `minimum_abductive`: every CXp hits every
    AXp. Take a minimum hitting set S of the abductive sets found so far and ask the oracle for a
    flip with S free: a point → S is a minimum CXp (the point is the result's `witness`; the exact
    replay judges it); none → grow the free set from S, feature by feature in index order, while
    no flip appears: the features left fixed form a new abductive set. One call first, with every
    feature free, decides whether any CXp exists. Every point met that flips in exact arithmetic
    gives a contrastive set (`shrink_witness`); the smallest is the incumbent: it ends the search
    as soon as no hitting set is smaller, and a search stopped by the deadline answers with it
    (`stopped`). The lower bounds rest on the oracle's "no flip" answers: exact only when the
    oracle is. Its answer is an `Outcome` (`loop_outcome`), the oracle calls it made added to
    `calls`."""
    started = time.perf_counter()
    everything = frozenset(range(problem.n))
    best: tuple[tuple[int, ...], np.ndarray] | None = None
    tally = OracleCalls() if calls is None else calls

    def flip(free: frozenset[int]) -> np.ndarray | None:
        nonlocal best
        tally.count += 1
        y = find_flip(free, deadline)
        if y is not None and problem.flips(y):
            found = tuple(sorted(shrink_witness(problem, y)))
            if best is None or len(found) < len(best[0]):
                best = (found, np.where(np.isin(np.arange(problem.n), found), y, problem.x))
                report_incumbent(*best)
        return y

    def answer(status: Status, chosen: tuple[int, ...] | None = None, y: np.ndarray | None = None) -> Outcome:
        return loop_outcome(status, started, chosen, witness=None if y is None else tuple(map(float, y)))

    try:
        if flip(everything) is None:
            return answer(Status.NONE_EXISTS)
        abductive_sets: list[frozenset[int]] = []
        while True:
            if time.perf_counter() > deadline:
                raise OracleTimeout
            candidate = minimum_hitting_set(abductive_sets, limit=at_most)
            if candidate is None:
                return answer(Status.NONE_WITHIN)
            if best is not None and len(best[0]) <= len(candidate):
                return answer(Status.OPTIMAL, *best)
            if candidate and (y := flip(candidate)) is not None:  # the empty set never flips
                return answer(Status.OPTIMAL, tuple(sorted(candidate)), y)
            free = set(candidate)
            for i in sorted(everything - candidate):
                if flip(frozenset(free | {i})) is None:
                    free.add(i)
            abductive_sets.append(everything - free)
    except OracleTimeout:
        status, kept = stopped(None if best is None else best[0], at_most)
        return answer(status, kept, best[1] if kept else None)

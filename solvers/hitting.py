"""Minimum abductive explanations of any network by implicit hitting sets (docs/design.md §4).

Every AXp hits every CXp. The loop keeps the contrastive sets found so far, takes a hitting set
S of them, and asks the backend's *flip oracle* for a point y of the box that agrees with x on S
and flips the prediction. A point → the features where y differs from x form a new contrastive
set, shrunk in exact arithmetic, and the loop goes on. None → S is an AXp; when S is a *minimum*
hitting set, no AXp is smaller, since every AXp hits every set found.

Minimum hitting sets are costly (an exact branch and bound) and most candidates are refuted, so
the loop proposes a greedy hitting set (most sets hit first) while greedy ones keep being refuted,
and asks for a minimum one only when a greedy candidate holds: that AXp is then the best known,
and a minimum hitting set no smaller proves it minimum (measured on a 28-feature 32 × 32 ReLU
network over a box of radius 0.05: 709 minimum hitting sets took 27 of a call's 40 s).

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

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..problem import Problem, Status, stopped
from .guard import report_incumbent


class OracleTimeout(Exception):
    """The flip oracle ran out of time."""


# free features (those allowed to differ from x), deadline (time.perf_counter() value) →
# a flipping point y [n], or None when none exists. Raises OracleTimeout.
FlipOracle = Callable[[frozenset[int], float], np.ndarray | None]


@dataclass(frozen=True)
class HittingResult:
    """How the loop ended: OPTIMAL (`solution` a minimum AXp), NONE_WITHIN, FEASIBLE (stopped with
    an AXp within `at_most`), TIMEOUT or ERROR; with the number of oracle calls."""

    status: Status
    solution: tuple[int, ...] | None
    oracle_calls: int
    message: str = ""
    witness: tuple[float, ...] | None = None  # `minimum_contrastive`: the point that flips [n]


def minimum_abductive(
    problem: Problem,
    find_flip: FlipOracle,
    at_most: int | None,
    deadline: float,
) -> HittingResult:
    """Run the implicit-hitting-set loop until a minimum AXp, a bound, or the deadline."""
    with HittingSets(problem.n) as contrastive_sets:
        return _abductive_loop(problem, find_flip, at_most, deadline, contrastive_sets)


def _abductive_loop(
    problem: Problem,
    find_flip: FlipOracle,
    at_most: int | None,
    deadline: float,
    contrastive_sets: HittingSets,
) -> HittingResult:
    features = frozenset(range(problem.n))
    best: frozenset[int] | None = None  # the smallest AXp found
    exact = False  # whether the next candidate must be a minimum hitting set
    calls = 0
    while True:
        if time.perf_counter() > deadline:
            return _stopped(best, at_most, calls)
        candidate = contrastive_sets.greedy()
        limit = at_most if best is None else len(best) - 1  # a candidate must beat these
        if exact or (limit is not None and len(candidate) > limit):
            candidate = contrastive_sets.minimum(limit)
            if candidate is None:  # every AXp has more than `limit` features
                if best is None:
                    return HittingResult(Status.NONE_WITHIN, None, calls)
                return HittingResult(Status.OPTIMAL, tuple(sorted(best)), calls)
            exact = True
        if candidate == features:  # nothing free: y = x, which cannot flip (no float oracle asked)
            y = None
        else:
            calls += 1
            try:
                y = find_flip(features - candidate, deadline)
            except OracleTimeout:
                return _stopped(best, at_most, calls)
        if y is None:
            if exact:
                return HittingResult(Status.OPTIMAL, tuple(sorted(candidate)), calls)
            best, exact = candidate, True
            continue
        flipped = problem.flips(y)
        if not flipped:  # the oracle says S is no AXp, but its point does not show it: no verdict
            reason = "is undecided (smooth margin)" if flipped is None else "does not flip the prediction"
            return HittingResult(Status.ERROR, None, calls, f"the flip oracle's point {reason} in exact arithmetic")
        contrastive_sets.add(shrink_witness(problem, y))
        exact = False


class HittingSets:
    """The contrastive sets the loop has found, kept for its two questions: a greedy hitting set
    (on a [sets, n] bool matrix grown in place: the loop makes thousands of candidates, and
    rebuilding the matrix for each took 26 of 60 s on a 28-feature ReLU network) and a minimum
    one. The minimum comes from PySAT's RC2 (an exact MaxSAT solver on integers: one hard clause
    per set, a soft clause ¬e per element), kept between calls so that each new set is one more
    clause; every answer is checked to hit every set. Without PySAT, `minimum_hitting_set`."""

    def __init__(self, n: int) -> None:
        self.n = n
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

    def add(self, found: frozenset[int]) -> None:
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

    def minimum(self, limit: int | None) -> frozenset[int] | None:
        """A smallest hitting set; None if every one has more than `limit` elements."""
        if self.maxsat is None:
            return minimum_hitting_set(self.sets(), limit)
        model = self.maxsat.compute()
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


def _stopped(best: frozenset[int] | None, at_most: int | None, calls: int) -> HittingResult:
    """At the deadline: the best AXp found, as any backend reports a call stopped by its limit."""
    status, kept = stopped(None if best is None else tuple(sorted(best)), at_most)
    return HittingResult(status, kept, calls)


def shrink_witness(problem: Problem, y: np.ndarray) -> frozenset[int]:
    """Reset changed features of a flipping point y back to x while it still flips (exactly);
    returns the features where the result differs from x."""
    shrunk = shrink_points(problem, np.asarray(y, dtype=np.float64)[None, :])[0]
    return frozenset(int(i) for i in np.flatnonzero(shrunk != problem.x))


def shrink_points(problem: Problem, Y: np.ndarray) -> np.ndarray:
    """`shrink_witness` for many flipping points Y [B, n] at once: feature by feature in index
    order, each reset to x in every row where the row still flips with it reset (exactly).
    Returns the shrunk points [B, n]."""
    Y = np.array(Y, dtype=np.float64)
    for i in range(problem.n):
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


def minimum_contrastive(problem: Problem, find_flip: FlipOracle, at_most: int | None, deadline: float) -> HittingResult:
    """Minimum CXp by implicit hitting sets, the dual of `minimum_abductive`: every CXp hits every
    AXp. Take a minimum hitting set S of the abductive sets found so far and ask the oracle for a
    flip with S free: a point → S is a minimum CXp (the point is the result's `witness`; the exact
    replay judges it); none → grow the free set from S, feature by feature in index order, while
    no flip appears: the features left fixed form a new abductive set. One call first, with every
    feature free, decides whether any CXp exists. Every point met that flips in exact arithmetic
    gives a contrastive set (`shrink_witness`); the smallest is the incumbent: it ends the search
    as soon as no hitting set is smaller, and a search stopped by the deadline answers with it
    (`stopped`). The lower bounds rest on the oracle's "no flip" answers: exact only when the
    oracle is."""
    everything = frozenset(range(problem.n))
    best: tuple[tuple[int, ...], np.ndarray] | None = None
    calls = 0

    def flip(free: frozenset[int]) -> np.ndarray | None:
        nonlocal best, calls
        calls += 1
        y = find_flip(free, deadline)
        if y is not None and problem.flips(y):
            found = tuple(sorted(shrink_witness(problem, y)))
            if best is None or len(found) < len(best[0]):
                best = (found, np.where(np.isin(np.arange(problem.n), found), y, problem.x))
                report_incumbent(*best)
        return y

    def answer(status: Status, chosen: tuple[int, ...] | None = None, y: np.ndarray | None = None) -> HittingResult:
        return HittingResult(status, chosen, calls, witness=None if y is None else tuple(map(float, y)))

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

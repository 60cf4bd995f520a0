"""Minimum abductive explanations of any network by implicit hitting sets (DESIGN §4).

Every AXp hits every CXp. The loop keeps the contrastive sets found so far, takes a minimum
hitting set S of them, and asks the backend's *flip oracle* for a point y of the box that agrees
with x on S and flips the prediction. None → S is a minimum AXp. Otherwise the features where y
differs from x form a new contrastive set; it is shrunk in exact arithmetic and the loop goes on.

The oracle's witnesses are replayed exactly before use, so every contrastive set in the loop is
genuine and every lower bound the hitting sets give is sound; a witness that fails ends the loop
with ERROR (no set, no verdict). A hitting set of every feature leaves nothing free and is an
AXp without asking: a float oracle asked it may answer with x itself when f(x) lies within its
tolerance of t (f(x) = 0.140625·0.01 as doubles, t = 0.00140625: f(x) > t exactly, f(x) = t in
floating point).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..problem import Problem, Status


class OracleTimeout(Exception):
    """The flip oracle ran out of time."""


# free features (those allowed to differ from x), deadline (time.perf_counter() value) →
# a flipping point y [n], or None when none exists. Raises OracleTimeout.
FlipOracle = Callable[[frozenset[int], float], np.ndarray | None]


@dataclass(frozen=True)
class HittingResult:
    status: Status
    solution: tuple[int, ...] | None
    oracle_calls: int
    message: str = ""


def minimum_abductive(problem: Problem, find_flip: FlipOracle, at_most: int | None, deadline: float) -> HittingResult:
    """Run the implicit-hitting-set loop until a minimum AXp, a bound, or the deadline."""
    features = frozenset(range(problem.n))
    contrastive_sets: list[frozenset[int]] = []
    calls = 0
    while True:  # at a limit no set was found (the full set, always an AXp, is not reported)
        if time.perf_counter() > deadline:
            return HittingResult(Status.TIMEOUT, None, calls)
        candidate = minimum_hitting_set(contrastive_sets, limit=at_most)
        if candidate is None:
            return HittingResult(Status.NONE_WITHIN, None, calls)
        if candidate == features:  # nothing free: y = x, which cannot flip (no float oracle asked)
            return HittingResult(Status.OPTIMAL, tuple(sorted(candidate)), calls)
        calls += 1
        try:
            y = find_flip(features - candidate, deadline)
        except OracleTimeout:
            return HittingResult(Status.TIMEOUT, None, calls)
        if y is None:
            return HittingResult(Status.OPTIMAL, tuple(sorted(candidate)), calls)
        flipped = problem.flips(y)
        if not flipped:  # the oracle says S is no AXp, but its point does not show it: no verdict
            reason = "is undecided (smooth margin)" if flipped is None else "does not flip the prediction"
            return HittingResult(Status.ERROR, None, calls, f"the flip oracle's point {reason} in exact arithmetic")
        contrastive_sets.append(shrink_witness(problem, y))


def shrink_witness(problem: Problem, y: np.ndarray) -> frozenset[int]:
    """Reset changed features of a flipping point y back to x while it still flips (exactly);
    returns the features where the result differs from x."""
    y = np.array(y, dtype=np.float64)
    for i in np.flatnonzero(y != problem.x):
        trial = y.copy()
        trial[i] = problem.x[i]
        if problem.flips(trial):
            y = trial
    return frozenset(int(i) for i in np.flatnonzero(y != problem.x))


def minimum_hitting_set(sets: list[frozenset[int]], limit: int | None = None) -> frozenset[int] | None:
    """A smallest set meeting every set in `sets` (branch and bound); None if all are larger than
    `limit`. The empty list is hit by the empty set."""
    best: list[frozenset[int] | None] = [None]
    bound = [len(set().union(*sets)) + 1 if limit is None else limit + 1]

    def search(chosen: frozenset[int], pending: list[frozenset[int]]) -> None:
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

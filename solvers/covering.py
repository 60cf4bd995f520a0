"""Minimum abductive explanations by covering the free sets level by level (issue 28).

A free set F (the features allowed to differ from x) *flips* when some y of the box, equal to x
off F, changes the prediction; supersets of a flipping set flip. S is an AXp iff its complement
does not flip, so the minimum AXp has n − k* features, k* the size of the largest set that does
not flip. Two kinds of exact evidence decide it:

- a set F of k − 1 features that does not flip (the flip oracle's "none", exact): an AXp of
  n − k + 1 features, the upper bound;
- *level k covered*: every k-subset of the features contains a contrastive set D found so far
  (each D the support of a point that flips in exact arithmetic, shrunk), so every k-subset
  flips and no AXp has n − k features or fewer, the lower bound.

Once a non-flipping set is grown (`_Covering.grow`: features added while the oracle finds no
flip), the level above it is covered: one flag per k-subset, by colex rank (`rank`, `unrank`);
each D found clears the flags of every k-subset that contains it; the subsets left are attacked
in batches by the gradient search (`attack.flipping_points`, `STARTS` starts, then
`RETRY_STARTS` for those it left), whose flipping points are judged exactly and shrunk
(`hitting.shrink_points`) into new D's; a subset still left goes to the exact oracle: a flip
gives a D, none a larger non-flipping set, grown, and the next level. A question that runs past
its share of the time (`QUESTION_SHARE`) is put off: while growing, the feature is left out (the
set stays proved, maybe not maximal); while covering, the subset is asked again, without a
limit, when the rest of the level is covered.

This is the implicit hitting-set loop's lower bound (`solvers.hitting`) with its minimum hitting
set replaced by an exhaustive list: level k covered ⟺ every hitting set of the D's has more than
n − k elements. Any proof that no AXp has n − k features needs a flipping point for each of those
C(n, k) subsets, and a point whose support is D serves C(n − |D|, k − |D|) of them: the D's that
count are small ones found inside the subsets left, not the large ones that the loop shrinks inside
a large free set (on the 28-feature 32 × 32 ReLU networks of `bench.exact_milp` the loop's lower
bounds stayed at 5–6 with thousands of sets; covering proves minima of 6 to 24 features there).
Levels of more than `COVER_SETS` subsets go to the loop (`minimum_abductive`) with the D's and the
AXp found.
"""

from __future__ import annotations

import math
import time
from functools import lru_cache

import numpy as np

from ..problem import Problem, Status, stopped
from .attack import flipping_points
from .hitting import FlipOracle, HittingResult, OracleTimeout, minimum_abductive, shrink_points

COVER_SETS = 64_000_000  # the most subsets a level may have (a byte each); larger levels go to the loop
COVER_FEATURES = 62  # masks are int64
BATCH = 256  # subsets attacked at once
STARTS = 4  # gradient-search starts per subset (x, the centre, random points)
RETRY_STARTS = 32  # and for the subsets that the first search left, before the exact questions
QUESTION_SHARE = 0.1  # the share of the time left that one exact question gets before it is put off
QUESTION_SECONDS = 1.0  # and at least this


def minimum_by_covering(problem: Problem, find_flip: FlipOracle, at_most: int | None, deadline: float) -> HittingResult:
    """The minimum AXp of a problem of at most `COVER_FEATURES` features by covering (module
    docstring), `find_flip` the exact flip oracle; a level too large for covering goes on in
    the implicit hitting-set loop."""
    cover = _Covering(problem, find_flip, deadline)
    try:
        free = cover.grow(frozenset())
        while True:
            k = len(free) + 1
            if math.comb(problem.n, k) > COVER_SETS:
                known = [frozenset(int(i) for i in range(problem.n) if d >> i & 1) for d in cover.found]
                best: frozenset[int] | None = frozenset(range(problem.n)) - free
                if at_most is not None and len(best) > at_most:  # the loop's incumbents are within at_most
                    best = None
                result = minimum_abductive(problem, find_flip, at_most, deadline, known=known, best=best)
                return HittingResult(result.status, result.solution, result.oracle_calls + cover.calls, result.message)
            larger = cover.cover_level(k)
            if larger is None:
                axp = tuple(i for i in range(problem.n) if i not in free)
                if at_most is not None and len(axp) > at_most:
                    return HittingResult(Status.NONE_WITHIN, None, cover.calls, cover.summary())
                return HittingResult(Status.OPTIMAL, axp, cover.calls, cover.summary())
            free = cover.grow(larger)
    except _Unproved as error:
        return HittingResult(Status.ERROR, None, cover.calls, str(error))
    except OracleTimeout:
        status, kept = stopped(tuple(i for i in range(problem.n) if i not in cover.free), at_most)
        return HittingResult(status, kept, cover.calls, cover.summary())


class _PutOff(Exception):
    """A question ran out of its share of the time."""


class _Unproved(Exception):
    """An oracle's point failed the exact check: no verdict."""


class _Covering:
    """The state of one covering run: the D's found (bit masks), the largest non-flipping set."""

    def __init__(self, problem: Problem, find_flip: FlipOracle, deadline: float) -> None:
        self.problem, self.find_flip, self.deadline = problem, find_flip, deadline
        self.found: list[int] = []  # the D's, as masks
        self.free: frozenset[int] = frozenset()  # the largest set proved not to flip
        self.calls = 0  # exact oracle calls
        self.batches = 0
        self.level: _Level | None = None  # the level being covered

    def summary(self) -> str:
        """How far it got: the D's, the level and how much of it is left, the batches."""
        level = self.level
        left = "" if level is None else f"; level {level.k}: {int(level.open.sum())} of {len(level.open)} subsets left"
        return f"{len(self.found)} contrastive sets, {self.batches} batches{left}"

    def flip(self, free: frozenset[int], patient: bool = False) -> np.ndarray | None:
        """The exact oracle (a point [n] that flips, or None). Unless `patient`, a question gets
        `QUESTION_SHARE` of the time left (at least `QUESTION_SECONDS`) and raises `_PutOff` when
        it runs out; `OracleTimeout` at the deadline."""
        now = time.perf_counter()
        if now > self.deadline:
            raise OracleTimeout
        share = max(QUESTION_SECONDS, QUESTION_SHARE * (self.deadline - now))
        until = self.deadline if patient else min(self.deadline, now + share)
        self.calls += 1
        try:
            y = self.find_flip(free, until)
        except OracleTimeout:
            if until < self.deadline:
                raise _PutOff from None
            raise
        if y is not None and not self.problem.flips(y):
            raise _Unproved("the flip oracle's point does not flip the prediction in exact arithmetic")
        return y

    def add(self, Y: np.ndarray) -> list[int]:
        """Shrink flipping points Y [B, n] into D's, keep them; returns their masks."""
        moved = shrink_points(self.problem, Y) != self.problem.x
        masks = (moved.astype(np.int64) << np.arange(self.problem.n, dtype=np.int64)).sum(axis=1)
        new = [int(m) for m in dict.fromkeys(masks.tolist())]
        self.found.extend(new)
        return new

    def grow(self, free: frozenset[int]) -> frozenset[int]:
        """Grow a non-flipping set feature by feature (those in the fewest D's first) while the
        exact oracle finds no flip; keeps every flip's D. Returns the maximal set."""
        counts = np.zeros(self.problem.n, dtype=np.int64)
        for d in self.found:
            counts += (d >> np.arange(self.problem.n)) & 1
        self.free = free
        for i in sorted(set(range(self.problem.n)) - free, key=lambda i: (counts[i], i)):
            try:
                y = self.flip(self.free | {i})
            except _PutOff:  # a hard question: the set stays without i (proved, maybe not maximal)
                continue
            if y is None:
                self.free = self.free | {i}
            else:
                self.add(y[None, :])
        return self.free

    def cover_level(self, k: int) -> frozenset[int] | None:
        """Cover level k: None when every k-subset flips, else a k-subset proved not to flip."""
        n = self.problem.n
        level = self.level = _Level(n, k)
        for d in _minimal(self.found):
            level.mark(d)
        put_off: list[int] = []  # subsets whose question ran out of its share: asked again at the end
        while len(pending := level.pending(BATCH)):
            if time.perf_counter() > self.deadline:
                raise OracleTimeout
            for starts in (STARTS, RETRY_STARTS):  # the subsets that resist the first search get a longer one
                movable = ((pending[:, None] >> np.arange(n)) & 1).astype(bool)
                Y, ok = flipping_points(self.problem, movable, starts, seed=self.batches)
                self.batches += 1
                for d in self.add(Y[ok]):
                    level.mark(d)
                pending = np.array([mask for mask in pending[~ok].tolist() if not level.covered(mask)], dtype=np.int64)
                if not len(pending):
                    break
            for mask in pending.tolist():
                try:
                    if (larger := self._decide(level, mask, patient=False)) is not None:
                        return larger
                except _PutOff:
                    put_off.append(mask)
        for mask in put_off:
            if (larger := self._decide(level, mask, patient=True)) is not None:
                return larger
        return None

    def _decide(self, level: _Level, mask: int, patient: bool) -> frozenset[int] | None:
        """Ask the exact oracle about a subset not yet covered: a flip marks its D; none returns
        the subset (it does not flip)."""
        if level.covered(mask):
            return None
        free = frozenset(i for i in range(self.problem.n) if mask >> i & 1)
        y = self.flip(free, patient)
        if y is None:
            return free
        for d in self.add(y[None, :]):
            level.mark(d)
        return None


def _minimal(masks: list[int]) -> list[int]:
    """The sets among `masks` that contain no other (a superset covers only what its subset covers)."""
    kept = np.zeros(0, dtype=np.int64)
    for d in sorted(set(masks), key=lambda d: (d.bit_count(), d)):
        if not ((kept & d) == kept).any():
            kept = np.append(kept, np.int64(d))
    return kept.tolist()


class _Level:
    """The k-subsets of n features, each by its colex rank [C(n, k)]: which are not yet known to
    flip (contain no D). Every rank below `cursor` is known to flip."""

    def __init__(self, n: int, k: int) -> None:
        self.n, self.k = n, k
        self.open = np.ones(math.comb(n, k), dtype=bool)
        self.cursor = 0

    def pending(self, count: int) -> np.ndarray:
        """Up to `count` masks [≤ count] not yet covered, the lowest ranks first; the cursor moves
        past them (the caller covers each or ends the level)."""
        found: list[np.ndarray] = []
        total = 0
        while total < count and self.cursor < len(self.open):
            chunk = self.open[self.cursor : self.cursor + _CHUNK]
            ranks = self.cursor + np.flatnonzero(chunk)[: count - total]
            found.append(ranks)
            total += len(ranks)
            self.cursor = int(ranks[-1]) + 1 if total == count else self.cursor + len(chunk)
        return unrank(np.concatenate(found) if found else np.zeros(0, dtype=np.int64), self.n, self.k)

    def covered(self, mask: int) -> bool:
        return not self.open[rank(np.array([mask], dtype=np.int64), self.n, self.k)[0]]

    def mark(self, d: int) -> None:
        """Every k-subset that contains the D `d` flips: d joined with each (k − |d|)-subset of
        the other features, their bits placed byte by byte (in chunks: a D of one feature among 28
        is in C(27, k − 1) of them)."""
        inside = [i for i in range(self.n) if d >> i & 1]
        if len(inside) > self.k:
            return
        outside = [i for i in range(self.n) if not d >> i & 1]
        deposit = _deposit(outside).astype(_mask_type(self.n))  # [bytes, 256]: one byte of an extension, placed
        count = math.comb(len(outside), self.k - len(inside))
        for first in range(0, count, _CHUNK):
            extra = _extensions(len(outside), self.k - len(inside), first)
            masks = np.full(len(extra), d, dtype=deposit.dtype)
            for byte, table in enumerate(deposit):
                masks |= table[(extra >> (8 * byte)) & 255]
            self.open[rank(masks, self.n, self.k)] = False


_CHUNK = 1 << 18  # ranks handled at once


def _deposit(positions: list[int]) -> np.ndarray:
    """[⌈m / 8⌉, 256] int64: for each byte of an m-bit mask and each of its values, that byte's bits
    moved to `positions` (bit j of the mask → bit positions[j])."""
    tables = np.zeros(((len(positions) + 7) // 8, 256), dtype=np.int64)
    values = np.arange(256, dtype=np.int64)
    for j, position in enumerate(positions):
        tables[j // 8] |= ((values >> (j % 8)) & 1) << position
    return tables


@lru_cache(maxsize=256)
def _extensions(m: int, j: int, first: int) -> np.ndarray:
    """The j-subsets of range(m) of colex ranks first, first + 1, … (at most `_CHUNK`) as masks."""
    return unrank(np.arange(first, min(math.comb(m, j), first + _CHUNK), dtype=np.int64), m, j).astype(_mask_type(m))


def rank(masks: np.ndarray, n: int, k: int) -> np.ndarray:
    """The colex ranks [B] of k-subsets of range(n) given as bit masks [B]: Σ_i C(c_i, i + 1) over
    their elements c_0 < c_1 < …, summed byte by byte from tables (`_rank_tables`)."""
    tables = _rank_tables(n, k)
    masks = masks.astype(tables.dtype, copy=False)
    result = np.zeros(len(masks), dtype=tables.dtype)
    below = np.zeros(len(masks), dtype=tables.dtype)  # the elements in lower bytes (≤ k)
    for byte, table in enumerate(tables):
        value = (masks >> (8 * byte)) & 255
        result += table[value * (k + 1) + below]
        below += _POPCOUNT[value]
    return result


_POPCOUNT = np.array([bin(v).count("1") for v in range(256)], dtype=np.int32)


def _mask_type(n: int) -> type[np.signedinteger]:
    """The integer type of masks and ranks over n features."""
    return np.int32 if n <= 31 else np.int64


@lru_cache(maxsize=16)
def _rank_tables(n: int, k: int) -> np.ndarray:
    """[⌈n / 8⌉, 256 · (k + 1)]: a byte's share of `rank`, at value · (k + 1) + the number of
    elements below it; int32 up to 31 features (ranks below C(31, 15) < 2^31: measured 2.5 times
    faster than int64), else int64."""
    tables = np.zeros(((n + 7) // 8, 256, k + 1), dtype=np.int64)
    for byte in range(len(tables)):
        for value in range(256):
            bits = [8 * byte + j for j in range(8) if value >> j & 1]
            for below in range(k + 1):
                tables[byte, value, below] = sum(math.comb(c, below + i + 1) for i, c in enumerate(bits))
    return tables.reshape(len(tables), 256 * (k + 1)).astype(_mask_type(n))


def unrank(ranks: np.ndarray, n: int, k: int) -> np.ndarray:
    """The k-subsets of range(n) [B] (bit masks) of the colex ranks [B] (`rank`'s inverse): the
    largest element c with C(c, k) ≤ r, then the rest of r with k − 1."""
    table = _binomials(n, k)
    left = np.array(ranks, dtype=np.int64)
    masks = np.zeros(len(left), dtype=np.int64)
    for i in range(k, 0, -1):
        c = np.searchsorted(table[:, i], left, side="right") - 1
        masks |= np.int64(1) << c
        left -= table[c, i]
    return masks


@lru_cache(maxsize=64)
def _binomials(n: int, k: int) -> np.ndarray:
    """C(c, j) [n, k + 1] for c < n, j ≤ k."""
    return np.array([[math.comb(c, j) for j in range(k + 1)] for c in range(n)], dtype=np.int64).reshape(n, k + 1)

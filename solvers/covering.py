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
flip), the level above it is covered. Which sets contain a D is kept for all 2^n sets at once, a
bit per set (`_Supersets`, n ≤ `COVER_FEATURES`): the D's set their own bits, and the closure
under supersets (one pass per feature over the words) sets the rest. The k-subsets still clear
are attacked in batches by the gradient search (`attack.flipping_points`, `STARTS` starts, then
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
a large free set (docs/results.md compares the two bounds on `bench.exact_milp`'s networks).

The bits cost nothing per D: a closure costs one pass per feature over 2^n bits however many D's
it folds in, where marking each D's supersets among the level's C(n, k) ranks costs per D. D's
found since the last closure (at most `FOLD`) are tested against the subsets directly until those
tests have cost about a closure (2^n set–D pairs). Problems of
more than `COVER_FEATURES` features go to the loop
(`hitting.minimum_abductive`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import numpy as np

from cardinal.errors import OutOfTime, Unproved
from cardinal.problem import Outcome, Problem, Status, stopped

from .attack import flipping_points
from .hitting import FlipOracle, OracleCalls, OracleTimeout, loop_outcome, minimum_abductive, shrink_points
from .oracle import check_witness

COVER_FEATURES = 30  # a bit for each of the 2^n free sets: 128 MB at 30 features (a closure 1.35 s)
FOLD = 4096  # D's kept aside (tested set by set) before they are folded into the bits
CHUNK_WORDS = 1 << 12  # words (64 sets each) whose clear k-subsets are listed at once
BATCH = 256  # subsets attacked at once
STARTS = 4  # gradient-search starts per subset (x, the centre, random points)
RETRY_STARTS = 32  # and for the subsets that the first search left, before the exact questions
QUESTION_SHARE = 0.1  # the share of the time left that one exact question gets before it is put off
QUESTION_SECONDS = 1.0  # and at least this


def minimum_by_covering(
    problem: Problem,
    find_flip: FlipOracle,
    at_most: int | None,
    deadline: float,
    supply: bool = True,
    calls: OracleCalls | None = None,
) -> Outcome:
    """The minimum AXp by covering (module docstring), `find_flip` the exact flip oracle; past
    `COVER_FEATURES` features, the implicit hitting-set loop (`supply` as there). Its answer is an
    `Outcome` as the loop's (`hitting.loop_outcome`: status, set, message, `lower`), the oracle
    calls it made added to `calls`."""
    if problem.n > COVER_FEATURES:
        return minimum_abductive(problem, find_flip, at_most, deadline, supply, calls=calls)
    started = time.perf_counter()
    cover = _Covering(problem, find_flip, deadline)
    try:
        free = cover.grow(frozenset())
        while (larger := cover.cover_level(len(free) + 1)) is not None:
            free = cover.grow(larger)
    except _Unproved as error:
        return loop_outcome(Status.ERROR, started, message=str(error))
    except OracleTimeout:
        status, kept = stopped(tuple(i for i in range(problem.n) if i not in cover.free), at_most)
        lower = cover.disjoint()
        return loop_outcome(status, started, kept, message=f"{cover.summary()}; exact lower bound {lower}", lower=lower)
    finally:
        if calls is not None:
            calls.count += cover.calls
    axp = tuple(i for i in range(problem.n) if i not in free)
    if at_most is not None and len(axp) > at_most:
        return loop_outcome(Status.NONE_WITHIN, started, message=cover.summary(), lower=len(axp))
    return loop_outcome(Status.OPTIMAL, started, axp, message=cover.summary(), lower=len(axp))


class _PutOff(OutOfTime):
    """A question ran out of its share of the time."""


class _Unproved(Unproved):
    """An oracle's point failed the exact check: no verdict."""


class _Covering:
    """The state of one covering run: the D's found (bit masks, and as `_Supersets`), the largest
    non-flipping set."""

    def __init__(self, problem: Problem, find_flip: FlipOracle, deadline: float) -> None:
        self.problem, self.find_flip, self.deadline = problem, find_flip, deadline
        self.found: list[int] = []  # the D's, as masks
        self.sets = _Supersets(problem.n)
        self.free: frozenset[int] = frozenset()  # the largest set proved not to flip
        self.calls = 0  # exact oracle calls
        self.batches = 0
        self.level = 0  # the level being covered (0: none yet)

    def summary(self) -> str:
        """How far it got: the D's, the level and how much of it is left, the batches."""
        left = ""
        if self.level:
            left = f"; level {self.level}: {self.sets.count(self.level)} of {math.comb(self.problem.n, self.level)} subsets left"
        return f"{len(self.found)} contrastive sets, {self.batches} batches{left}"

    def disjoint(self) -> int:
        """A lower bound on every AXp's size: D's picked greedily, smallest first, that share no
        feature (every AXp hits every D)."""
        used = count = 0
        for mask in sorted(self.found, key=int.bit_count):
            if not mask & used:
                used, count = used | mask, count + 1
        return count

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
        if y is not None:
            valid, reason = check_witness(self.problem, free, tuple(y.tolist()))
            if not valid:
                raise _Unproved(f"the flip oracle's point {reason}")
        return y

    def add(self, Y: np.ndarray) -> None:
        """Shrink flipping points Y [B, n] into D's and keep them."""
        moved = shrink_points(self.problem, Y) != self.problem.x
        masks = (moved.astype(np.int64) << np.arange(self.problem.n, dtype=np.int64)).sum(axis=1)
        new = list(dict.fromkeys(masks.tolist()))
        self.found.extend(new)
        self.sets.add(np.array(new, dtype=np.int64))

    def grow(self, free: frozenset[int]) -> frozenset[int]:
        """Grow a non-flipping set feature by feature (those in the fewest D's first) while the
        exact oracle finds no flip; keeps every flip's D. Returns the maximal set."""
        counts = ((np.array(self.found, dtype=np.int64)[:, None] >> np.arange(self.problem.n)) & 1).sum(axis=0)
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
        n, sets = self.problem.n, self.sets
        self.level = k
        put_off: list[int] = []  # subsets whose question ran out of its share: asked again at the end
        for candidates in sets.clear(k):
            while len(candidates):
                if time.perf_counter() > self.deadline:
                    raise OracleTimeout
                stamp = sets.stamp()
                pending, candidates = candidates[:BATCH], candidates[BATCH:]
                for starts in (STARTS, RETRY_STARTS):  # the subsets that resist the first search get a longer one
                    movable = ((pending[:, None] >> np.arange(n)) & 1).astype(bool)
                    Y, ok = flipping_points(self.problem, movable, starts, seed=self.batches)
                    self.batches += 1
                    self.add(Y[ok])
                    pending = pending[~ok]
                    pending = pending[sets.clear_of(pending, stamp)]
                    if not len(pending):
                        break
                for mask in pending.tolist():
                    try:
                        if (larger := self._decide(mask, patient=False)) is not None:
                            return larger
                    except _PutOff:
                        put_off.append(mask)
                candidates = candidates[sets.clear_of(candidates, stamp)]
        for mask in put_off:
            if (larger := self._decide(mask, patient=True)) is not None:
                return larger
        return None

    def _decide(self, mask: int, patient: bool) -> frozenset[int] | None:
        """Ask the exact oracle about a subset not yet covered: a flip keeps its D; none returns
        the subset (it does not flip)."""
        if not self.sets.clear_of(np.array([mask], dtype=np.int64), 0)[0]:
            return None
        free = frozenset(i for i in range(self.problem.n) if mask >> i & 1)
        y = self.flip(free, patient)
        if y is None:
            return free
        self.add(y[None, :])
        return None


class _Supersets:
    """Which of the 2^n sets of n features contain a D: bit m % 64 of word m // 64 for the set of
    mask m [2^n bits, at least one word], closed under supersets, and the D's added since the last
    closure (`recent`, at most `FOLD`), which `clear_of` tests directly. Every D added gets a stamp
    (0, 1, …)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.words = np.zeros(max(1, 1 << max(n - 6, 0)), dtype=np.uint64)
        self.recent = np.zeros(0, dtype=np.int64)
        self.folded = 0  # the stamp of the first D not folded into the bits
        self.tested = 0  # (set, recent D) pairs tested since the last closure: it folds when they reach 2^n
        valid = np.uint64((1 << (1 << n)) - 1) if n < 6 else np.uint64(2**64 - 1)  # bits of real sets in a word
        self.low = np.zeros(7, dtype=np.uint64)  # the bits of a word whose sets have j elements in the low 6 bits
        for bit in range(64):
            self.low[bin(bit).count("1")] |= np.uint64(1 << bit)
        self.low &= valid

    def stamp(self) -> int:
        """The stamp the next D will get."""
        return self.folded + len(self.recent)

    def add(self, masks: np.ndarray) -> None:
        """Add D's (masks [B]); fold them in when more than `FOLD` are kept aside."""
        self.recent = np.concatenate([self.recent, np.asarray(masks, dtype=np.int64)])
        if len(self.recent) > FOLD:
            self._fold()

    def _fold(self) -> None:
        """Set the recent D's bits and close the bits under supersets: for each feature i, every
        set without i passes its bit to the set with i (within a word for the low 6 features,
        word to word above)."""
        if not len(self.recent):
            return
        np.bitwise_or.at(self.words, self.recent >> 6, np.uint64(1) << (self.recent & 63).astype(np.uint64))
        for i in range(min(self.n, 6)):
            without = np.uint64(sum(1 << bit for bit in range(64) if not bit >> i & 1))
            self.words |= (self.words & without) << np.uint64(1 << i)
        for i in range(self.n - 6):
            pairs = self.words.reshape(-1, 2, 1 << i)
            pairs[:, 1, :] |= pairs[:, 0, :]
        self.folded += len(self.recent)
        self.recent = np.zeros(0, dtype=np.int64)
        self.tested = 0

    def clear_of(self, masks: np.ndarray, stamp: int) -> np.ndarray:
        """[B] bool: which sets (masks [B], known to contain no D stamped before `stamp`) contain no D."""
        masks = np.asarray(masks, dtype=np.int64)
        clear = np.ones(len(masks), dtype=bool)
        if self.tested + len(masks) * len(self.recent) > 1 << self.n:  # the tests would cost more than a closure
            self._fold()
        if stamp < self.folded:  # D's folded since: read the bits
            clear = (self.words[masks >> 6] >> (masks & 63).astype(np.uint64)) & np.uint64(1) == 0
        recent = self.recent[max(stamp - self.folded, 0) :]
        self.tested += len(masks) * len(recent)
        for start in range(0, len(recent), 64):  # [B, 64] at a time
            block = recent[start : start + 64]
            clear &= ~((masks[:, None] & block[None, :]) == block[None, :]).any(axis=1)
        return clear

    def clear(self, k: int) -> Iterator[np.ndarray]:
        """The k-subsets that contain no D, as masks [≤ 64 · CHUNK_WORDS], chunk by chunk in
        increasing order; each chunk is listed when it is reached (D's added meanwhile count)."""
        for start in range(0, len(self.words), CHUNK_WORDS):
            open_bits = ~self.words[start : start + CHUNK_WORDS] & self._allowed(k, start)
            rows = np.flatnonzero(open_bits)
            if not len(rows):
                continue
            bits = np.unpackbits(open_bits[rows].astype("<u8").view(np.uint8), bitorder="little").reshape(len(rows), 64)
            row, bit = np.nonzero(bits)
            masks = ((start + rows[row]).astype(np.int64) << 6) | bit
            masks = masks[self.clear_of(masks, self.folded)]
            if len(masks):
                yield masks

    def count(self, k: int) -> int:
        """How many k-subsets contain no D (folds the recent D's in)."""
        self._fold()
        total = 0
        for start in range(0, len(self.words), CHUNK_WORDS):
            total += int(np.bitwise_count(~self.words[start : start + CHUNK_WORDS] & self._allowed(k, start)).sum())
        return total

    def _allowed(self, k: int, start: int) -> np.ndarray:
        """The bits of the words start, start + 1, … (at most `CHUNK_WORDS`) whose sets have k
        elements [≤ CHUNK_WORDS] uint64."""
        index = np.arange(start, min(start + CHUNK_WORDS, len(self.words)), dtype=np.uint64)
        wanted = k - np.bitwise_count(index).astype(np.int64)  # elements each word's sets need in the low 6 bits
        return np.where((wanted >= 0) & (wanted <= 6), self.low[np.clip(wanted, 0, 6)], np.uint64(0))

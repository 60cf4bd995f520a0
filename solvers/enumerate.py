"""Exhaustive exact backend: batched torch forward passes over every candidate set.

**Monotone networks** (any activation, smooth included). A set S is judged by one forward pass
of `base with S set to target` (the monotone shortcut): CXp base = x, target = x'; AXp base = x',
target = x. Validity is upward closed (moving more features towards `target` only helps), so
"is there one of size ≤ k?" is decided by the subsets of size exactly k, and the minimum is found
by scanning whole levels (all subsets of one size) from both ends, cheapest level first: a level
with no valid set bounds the minimum from below, a level with one bounds it from above.

**Non-monotone networks on a binary domain** (networks of K ≥ 2 outputs among them: a flip is
any other class, decided exactly by `cardinal.prediction`'s rule). A CXp is a set S such that toggling some subset of
S (each feature to its other end point) flips the prediction, so the minimum CXp is the smallest
flipping toggle set: levels are scanned upwards. S is an AXp iff no toggle set disjoint from S
flips; the backend evaluates all 2^n toggle sets once, closes the table under supersets (a
subset-OR transform) and reads off the smallest S whose complement holds no flip. Non-monotone
networks on a real box need continuous y and are UNSUPPORTED.

**Soundness of float decisions** (`Evaluator`). Rows run in float64 with a rigorous per-row
bound on the forward error (`cardinal.bounds.BoundedForward`); a row within its bound of the
threshold is re-decided by `cardinal.exact`. An enclosure that straddles t leaves the row
undecided, and a verdict that depends on an undecided row is reported as ERROR (never guessed).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator

import numpy as np
import torch

from cardinal.bounds import BoundedForward
from cardinal.errors import InputError, OutOfTime
from cardinal.problem import Outcome, Problem, Status, stopped

from .base import BaseSolver

_BATCH_ELEMENTS = 1 << 22  # rows × (inputs + all layer widths) per forward pass
MAX_TABLE_FEATURES = 24  # the non-monotone AXp table holds 2^n rows


class _OutOfTime(OutOfTime):
    """The deadline passed between two batches."""


class Evaluator:
    """Exact predictions for batches of points, at float64 speed (`cardinal.bounds.BoundedForward`)."""

    def __init__(self, problem: Problem, device: str | torch.device = "cpu") -> None:
        self.problem = problem
        self.device = torch.device(device)
        self.forward = problem.decider if self.device.type == "cpu" else BoundedForward(problem.net, self.device, problem.exact)

    def predictions(self, Y: torch.Tensor) -> torch.Tensor:
        """Y [B, n] float64 on the device → [B] on the device: p(y) (a class: 0/1 for K = 1), or −1
        where an exact enclosure leaves it open."""
        return self.forward.predictions(Y, self.problem.threshold)

    def flips(self, Y: torch.Tensor) -> torch.Tensor:
        """Y [B, n] → [B] int8: 1 where p(y) ≠ p(x) exactly, 0 where equal, −1 undecided."""
        predicted = self.predictions(Y)
        return torch.where(predicted < 0, -1, (predicted != self.problem.prediction).to(torch.int8)).to(torch.int8)


def combinations(n: int, k: int, rows: int) -> Iterator[np.ndarray]:
    """All k-subsets of range(n) in lexicographic order, as index arrays [≤ rows, k]."""
    if k == 0:
        yield np.zeros((1, 0), dtype=np.int64)
        return
    subsets = itertools.combinations(range(n), k)
    while True:
        chunk = np.fromiter(itertools.chain.from_iterable(itertools.islice(subsets, rows)), dtype=np.int64)
        if not chunk.size:
            return
        yield chunk.reshape(-1, k)


class EnumerateSolver(BaseSolver):
    """Exhaustive search with exact decisions; `device` is where the forward passes run."""

    name = "enumerate"
    exact = True

    def __init__(self, device: str = "cpu") -> None:
        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise InputError("device 'cuda' requested but torch sees no CUDA device")

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        started = time.perf_counter()
        fields = self._search(problem, at_most, _Search(problem, self.device, started + time_limit))
        return self.outcome(fields.pop("status"), started, **fields)

    @staticmethod
    def _search(problem: Problem, at_most: int | None, search: _Search) -> dict:
        if problem.monotone:
            counterpoint = problem.counterpoint
            flips = problem.flips(counterpoint)
            if flips is None:
                return {"status": Status.ERROR, "message": "p(x') is undecided (smooth margin)"}
            if problem.kind == "contrastive":
                return search.monotone(problem.x, counterpoint, at_most) if flips else {"status": Status.NONE_EXISTS}
            return search.monotone(counterpoint, problem.x, at_most) if flips else {"status": Status.OPTIMAL, "solution": ()}
        if not problem.domain.binary:
            return {"status": Status.UNSUPPORTED, "message": "non-monotone network on a real box: y is continuous"}
        toggled = np.where(problem.x == problem.domain.lower, problem.domain.upper, problem.domain.lower)
        if problem.kind == "contrastive":
            return search.ascending(toggled, at_most)
        if problem.n > MAX_TABLE_FEATURES:
            return {"status": Status.SIZE_LIMIT, "message": f"the AXp table would need 2^{problem.n} rows"}
        return search.abductive_table(toggled, at_most)


class _Search:
    """The level scans of one problem; each method returns Outcome fields (status, solution, ...)."""

    def __init__(self, problem: Problem, device: torch.device, deadline: float) -> None:
        self.problem = problem
        self.evaluator = Evaluator(problem, device)
        self.device = device
        self.deadline = deadline
        self.rows = max(1, _BATCH_ELEMENTS // (problem.n + sum(problem.net.widths)))
        # a row is valid when it flips (CXp) or keeps (AXp) the prediction
        self.valid_when = 1 if problem.kind == "contrastive" else 0

    def _scan(self, base: np.ndarray, target: np.ndarray, k: int) -> tuple[tuple[int, ...] | None, bool]:
        """First k-subset S (lexicographic) with `base with S set to target` valid, and whether some
        row of the level stayed undecided. Raises _OutOfTime between batches."""
        base_t = torch.as_tensor(base, dtype=torch.float64, device=self.device)
        target_t = torch.as_tensor(target, dtype=torch.float64, device=self.device)
        undecided = False
        for subsets in combinations(self.problem.n, k, self.rows):
            if time.perf_counter() > self.deadline:
                raise _OutOfTime
            index = torch.as_tensor(subsets, device=self.device)
            mask = torch.zeros(len(subsets), self.problem.n, dtype=torch.bool, device=self.device).scatter_(1, index, True)
            flips = self.evaluator.flips(torch.where(mask, target_t, base_t))
            hits = torch.nonzero(flips == self.valid_when).flatten()
            if len(hits):
                return tuple(int(i) for i in subsets[int(hits[0])]), undecided
            undecided |= bool((flips < 0).any())
        return None, undecided

    def _fields(self, status: Status, solution: tuple[int, ...] | None, base: np.ndarray, target: np.ndarray, **extra) -> dict:
        fields = {"status": status, "solution": solution, **extra}
        if solution is not None and self.problem.kind == "contrastive":
            y = np.array(base, dtype=np.float64)
            y[list(solution)] = target[list(solution)]
            fields["witness"] = tuple(float(v) for v in y)
        return fields

    def monotone(self, base: np.ndarray, target: np.ndarray, at_most: int | None) -> dict:
        """Validity is upward closed and the full set is valid. With `at_most=k` < n level k alone
        answers "is there one of size ≤ k?"; it is scanned first, or levels 1..k upwards when they
        cost no more. A yes is then minimized like a search without `at_most` (`_minimum`); a
        timeout or undecided rows there leave the answer FEASIBLE."""
        n = self.problem.n
        # the full set is valid: it answers a bound ≥ n, but is no find of a search for the minimum
        high, best = n, tuple(range(n)) if at_most is not None else None
        if at_most is not None and at_most < n:
            upwards = sum(math.comb(n, j) for j in range(1, at_most)) <= math.comb(n, at_most)
            clear_below = True  # every level scanned so far certainly holds no valid set
            for level in range(1, at_most + 1) if upwards else [at_most]:
                try:
                    found, undecided = self._scan(base, target, level)
                except _OutOfTime:
                    return {"status": Status.TIMEOUT, **_proved_below(level if upwards and clear_below else 1)}
                if found is not None and (level == 1 or (upwards and clear_below)):
                    return self._fields(Status.OPTIMAL, found, base, target)
                if found is not None:
                    high, best = level, found
                    break
                clear_below &= not undecided
            else:
                if not clear_below:
                    return {"status": Status.ERROR, "message": f"undecided rows of size ≤ {at_most} (smooth margin)"}
                return {"status": Status.NONE_WITHIN}
        return self._minimum(base, target, high, best)

    def _minimum(self, base: np.ndarray, target: np.ndarray, high: int, best: tuple[int, ...] | None) -> dict:
        """Two-ended level scan, cheaper level first. Invariant: the levels below `low` hold no
        valid set; `best`, of size `high`, is valid (None: the full set). A limit or undecided rows
        leave the best set found FEASIBLE (`cardinal.problem.stopped`)."""
        n, low = self.problem.n, 1
        while low < high:
            level = low if math.comb(n, low) <= math.comb(n, high - 1) else high - 1
            try:
                found, undecided = self._scan(base, target, level)
            except _OutOfTime:
                status, kept = stopped(best, None)
                return self._fields(status, kept, base, target, **_proved_below(low))
            if found is not None and level == low:
                return self._fields(Status.OPTIMAL, found, base, target)
            if found is not None:
                high, best = level, found
            elif undecided:
                message = f"undecided rows of size {level} (smooth margin)"
                if best is None:
                    return {"status": Status.ERROR, "message": message}
                return self._fields(Status.FEASIBLE, best, base, target, message=message, **_proved_below(low))
            elif level == low:
                low += 1
            else:
                break
        return self._fields(Status.OPTIMAL, best if best is not None else tuple(range(n)), base, target)

    def ascending(self, toggled: np.ndarray, at_most: int | None) -> dict:
        """Smallest flipping toggle set, level by level (non-monotone CXp on a binary domain)."""
        x = self.problem.x
        top = self.problem.n if at_most is None else min(at_most, self.problem.n)
        for k in range(1, top + 1):
            try:
                found, undecided = self._scan(x, toggled, k)
            except _OutOfTime:
                return {"status": Status.TIMEOUT, **_proved_below(k)}
            if found is not None:
                return self._fields(Status.OPTIMAL, found, x, toggled)
            if undecided:
                return {"status": Status.ERROR, "message": f"undecided rows of size {k} (smooth margin)"}
        return {"status": Status.NONE_EXISTS if top == self.problem.n else Status.NONE_WITHIN}

    def abductive_table(self, toggled: np.ndarray, at_most: int | None) -> dict:
        """Non-monotone AXp on a binary domain from the flips of all 2^n toggle sets."""
        n, size = self.problem.n, 1 << self.problem.n
        bits = 1 << torch.arange(n, device=self.device)
        x_t = torch.as_tensor(self.problem.x, dtype=torch.float64, device=self.device)
        toggled_t = torch.as_tensor(toggled, dtype=torch.float64, device=self.device)
        table = torch.empty(size, dtype=torch.int8, device=self.device)
        for start in range(0, size, self.rows):
            if time.perf_counter() > self.deadline:
                return {"status": Status.TIMEOUT}
            masks = torch.arange(start, min(size, start + self.rows), device=self.device)
            table[masks] = self.evaluator.flips(torch.where((masks[:, None] & bits) != 0, toggled_t, x_t))
        popcount = ((torch.arange(size, device=self.device)[:, None] & bits) != 0).sum(dim=1)
        # complement of S holds a flipping toggle set: surely (certain flips) / possibly (undecided too)
        surely_broken = _subset_or(table == 1, n).flip(0)
        possibly_broken = _subset_or(table != 0, n).flip(0)
        limit = n if at_most is None else at_most
        lower = int(popcount[~surely_broken].min())  # no smaller set can be an AXp
        upper = int(popcount[~possibly_broken].min())  # a set of this size surely is one (the full set is)
        if lower > limit:
            return {"status": Status.NONE_WITHIN}
        chosen = int(torch.nonzero(~possibly_broken & (popcount == upper))[0])
        solution = tuple(i for i in range(n) if chosen >> i & 1)
        if upper == lower:
            return {"status": Status.OPTIMAL, "solution": solution}
        if upper <= limit and at_most is not None:
            message = "undecided rows (smooth margin)"
            return {"status": Status.FEASIBLE, "solution": solution, "message": message, **_proved_below(lower)}
        message = f"minimum between {lower} and {upper}: undecided rows (smooth margin)"
        return {"status": Status.ERROR, "message": message, **_proved_below(lower)}


def _proved_below(low: int) -> dict:
    """The outcome field `lower` where the levels below `low` hold no explanation (at least level 1
    proved), else none."""
    return {"lower": low} if low > 1 else {}


def _subset_or(values: torch.Tensor, n: int) -> torch.Tensor:
    """g[m] = OR of values[s] over all submasks s of m, for values [2^n] bool."""
    result = values.clone()
    for i in range(n):
        view = result.view(-1, 2, 1 << i)
        view[:, 1, :] |= view[:, 0, :]
    return result

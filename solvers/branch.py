"""Branch and bound over feature sets on monotone networks.

For the lazy z3 strategy (`solvers.smt`): "is there a set s with Σ s ≤ k that is valid?", where
g(s) = f(base + (target − base)⊙s) and validity is g > t (g non-decreasing in s) or, `below`,
g ≤ t (g non-increasing in s): upward closed either way. It is the hard question of a
certification whose greedy answer is minimal or nearly so: the SAT loop must learn enough
clauses to exclude every set within k, while here one test excludes a whole subtree.

A node fixes some features in (`fixed`) and leaves others open (`allowed ⊇ fixed`); its sets are
`fixed ∪ s`, s ⊆ allowed \\ fixed, Σ s ≤ k − |fixed|, and by upward closure those with Σ s =
min(k − |fixed|, |allowed \\ fixed|) are the ones that matter. Per node, in batches:

- *probes* (`_probe`), exact judgements: `allowed` invalid closes the node (every set in it is a
  subset); a free feature without which `allowed` is invalid is in every valid set of the node,
  so it is fixed in (nodes with at most `_PROBE_FREE` free features); a node whose fixed features
  exceed k closes, and one whose `allowed` fits within k holds one set that matters, `allowed`;
- a node with at most `_LEAF_SETS` sets of its size is enumerated: every set judged exactly;
- otherwise the node bound (`bound_and_form` of `solvers.subsets.SubsetBounds` on ReLU networks,
  of `solvers.smooth.SmoothBounds` on every other continuous one), with `fixed` moved into the
  first layer's constant and the budget k − |fixed|, bounds g over the node's sets rigorously,
  from above (g > t) or below (g ≤ t): a bound on the wrong side of t closes the node;
- otherwise the node's likely best set (fixed plus the open features of largest share, up to the
  budget) is judged exactly; a valid one ends the search;
- otherwise it branches on the open feature of largest share: in (if the budget allows) or out.
  A share is the feature's coefficient in the bound's output form, or without a bound how far g
  moves in float64 when the feature leaves `allowed`.

"none within k" (`unsat`) therefore rests on exact judgements (probes, leaves) and on the
rigorous bounds (midpoint-radius error analysis, compared with t in exact rationals); a set is
returned only after an exact judgement, and an undecided judgement (a smooth enclosure straddling
t) that could matter ends the search with `UNDECIDED_SET`, never with a guess. Depth first, in
include first order, so that the stack stays at most n deep per batch. What it bought:
bench/results/engine_notes.md.
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from .smooth import SmoothBounds
from .subsets import SubsetBounds

# Nodes bounded together: larger batches amortise numpy's overhead per call, smaller ones keep
# the search depth first (measured on 64–276-feature 32×32 networks, 64 is near the best).
_BATCH = 64
# A node with at most this many sets of its size (C(free, budget)) is enumerated: all judged exactly
# in one batch, where bounding would cost as much and prove less.
_LEAF_SETS = 1024
# With node bounds, nodes with at most this many free features are probed without each of them
# (`_probe`): the probes cost a forward pass each, which the node bounds of wide inputs do not
# repay (measured on the 128- and 276-feature 32×32 ReLU benchmark nets).
_PROBE_FREE = 64
NODE_LIMIT = "unknown (node limit)"
UNDECIDED_SET = "unknown (undecided set)"


class SubsetSearch:
    """The branch and bound of the module docstring for one problem over n features.

    `evaluate(masks [B, n] bool) -> (verdicts [B] int8, values [B] float64)`: validity exactly
    (1 valid, 0 invalid, −1 undecided), and g in float64 (a hint, never a proof).
    `below`: valid means g ≤ t (else g > t). `bounds`: the node bounds (`bound_and_form` of
    `SubsetBounds` or `solvers.smooth.SmoothBounds`), or None to branch on the probes alone;
    `reference` [n] in [0,1]^n: with `below`, the point where the lower lines of `SubsetBounds`
    touch, best an invalid set near the boundary such as a maximal one."""

    def __init__(
        self,
        n: int,
        threshold: float,
        evaluate: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
        below: bool = False,
        bounds: SubsetBounds | SmoothBounds | None = None,
        reference: np.ndarray | None = None,
    ) -> None:
        self.n, self.evaluate, self.below = n, evaluate, below
        self.bounds, self.reference = bounds, reference
        self.threshold = Fraction(threshold)
        self.nodes = 0  # bounded so far (over every search)

    def search(self, k: int, deadline: float = math.inf, nodes: int | None = None) -> tuple[str, np.ndarray | None]:
        """("sat", a valid set [n] bool within k), ("unsat", None): none within k, or
        ("unknown (…)", None) at the deadline, after `nodes` nodes (`NODE_LIMIT`), or on an
        undecided judgement."""
        stack_fixed = [np.zeros(self.n, dtype=bool)]
        stack_allowed = [np.ones(self.n, dtype=bool)]
        limit = math.inf if nodes is None else self.nodes + nodes
        while stack_fixed:
            if time.perf_counter() > deadline:
                return "unknown (deadline)", None
            if self.nodes >= limit:
                return NODE_LIMIT, None
            take = min(_BATCH, len(stack_fixed))
            fixed, allowed = np.array(stack_fixed[-take:]), np.array(stack_allowed[-take:])
            del stack_fixed[-take:], stack_allowed[-take:]
            found, open_rows, shares = self._step(k, fixed, allowed)
            if isinstance(found, str):
                return found, None
            if found is not None:
                return "sat", found
            # children of the rows still open, pushed so that the first row's include child is on top
            rows = np.flatnonzero(open_rows)[::-1]
            for fixed_row, allowed_row, share in zip(fixed[rows], allowed[rows], shares[rows], strict=True):
                free = np.flatnonzero(allowed_row & ~fixed_row)
                feature = free[np.argmax(share[free])]
                out = allowed_row.copy()
                out[feature] = False
                stack_fixed.append(fixed_row)
                stack_allowed.append(out)
                if fixed_row.sum() < k:
                    inside = fixed_row.copy()
                    inside[feature] = True
                    stack_fixed.append(inside)
                    stack_allowed.append(allowed_row)
        return "unsat", None

    def _step(self, k: int, fixed: np.ndarray, allowed: np.ndarray) -> tuple[np.ndarray | str | None, np.ndarray, np.ndarray]:
        """One batch of nodes (fixed, allowed [B, n] bool; `fixed` gains the features forced in, in
        place) → (a valid set [n], an "unknown" reason, or None; the rows [B] bool left open to
        branch on; their features' shares [open, n], the larger the more promising)."""
        self.nodes += len(fixed)
        found, open_rows, shares = self._probe(k, fixed, allowed)
        if found is not None:
            return found, open_rows, shares
        free = allowed & ~fixed
        sizes = np.clip(k - fixed.sum(axis=1), 0, free.sum(axis=1))  # upward closure: sets of this many free features
        counts = np.array([math.comb(m, b) for m, b in zip(free.sum(axis=1).tolist(), sizes.tolist(), strict=True)])
        small = open_rows & (counts <= _LEAF_SETS)
        if small.any():
            sets = np.concatenate([_subsets(f, int(b)) for f, b in zip(free[small], sizes[small], strict=True)])
            sets |= np.repeat(fixed[small], counts[small], axis=0)
            verdicts, _ = self.evaluate(sets)
            if (verdicts == 1).any():
                return sets[np.argmax(verdicts == 1)], open_rows, shares
            if (verdicts < 0).any():
                return UNDECIDED_SET, open_rows, shares
            open_rows &= ~small
        rows = np.flatnonzero(open_rows)
        if len(rows) and self.bounds is not None:
            budget = k - fixed[rows].sum(axis=1)
            reference = None
            if self.below and self.reference is not None:  # the tangent point, with the node's fixed features
                reference = np.maximum(self.reference[None, :], fixed[rows])
            value, radius, form = self.bounds.bound_and_form(
                budget, allowed[rows], fixed=fixed[rows], minimum=self.below, reference=reference
            )
            # a bound that overflowed (inf or NaN: magnitudes near the double range) closes nothing
            sure = np.isfinite(value) & np.isfinite(radius)
            pairs = zip(value.tolist(), radius.tolist(), sure.tolist(), strict=True)
            if self.below:  # every set of the node has g ≥ ĝ − r > t
                closed = np.array([ok and Fraction(v) - Fraction(r) > self.threshold for v, r, ok in pairs], dtype=bool)
            else:  # every set of the node has g ≤ ĝ + r ≤ t
                closed = np.array([ok and Fraction(v) + Fraction(r) <= self.threshold for v, r, ok in pairs], dtype=bool)
            shares[rows] = -form if self.below else form
            open_rows[rows[closed]] = False
            rows = rows[~closed]
        if len(rows):
            best = _likely_best(fixed[rows], allowed[rows], shares[rows], k)
            verdicts, _ = self.evaluate(best)
            if (verdicts == 1).any():
                return best[np.argmax(verdicts == 1)], open_rows, shares
        return None, open_rows, shares

    def _probe(self, k: int, fixed: np.ndarray, allowed: np.ndarray) -> tuple[np.ndarray | str | None, np.ndarray, np.ndarray]:
        """What one batch of exact judgements of `allowed` and of `allowed` minus each free feature
        decides (validity being upward closed): a node whose `allowed` is invalid holds no valid set;
        a free feature without which `allowed` is invalid is in every valid set of the node, so it is
        fixed in (in place); a node whose fixed features then exceed k closes, and one whose
        `allowed` fits within k holds one set that matters, `allowed`. → (a valid set [n], an
        "unknown" reason, or None; the rows [B] bool still open; the shares [B, n]: how far g
        moves in float64 when a free feature leaves `allowed`)."""
        free = allowed & ~fixed
        if self.bounds is not None:  # without node bounds the probes are all the search has
            free &= (free.sum(axis=1) <= _PROBE_FREE)[:, None]
        rows, features = np.nonzero(free)
        probes = np.concatenate([allowed, allowed[rows]])
        probes[len(allowed) + np.arange(len(rows)), features] = False
        verdicts, values = self.evaluate(probes)
        shares = np.zeros(allowed.shape)
        with np.errstate(invalid="ignore"):  # inf − inf where f overflows float64: no share
            shares[rows, features] = np.nan_to_num(np.abs(values[len(allowed) :] - values[rows]), nan=0.0)
        whole, without = verdicts[: len(allowed)], verdicts[len(allowed) :]
        fixed[rows[without == 0], features[without == 0]] = True
        open_rows = (whole != 0) & (fixed.sum(axis=1) <= k)
        fits = open_rows & (allowed.sum(axis=1) <= k)
        if (fits & (whole == 1)).any():
            return allowed[np.argmax(fits & (whole == 1))], open_rows, shares
        if fits.any():
            return UNDECIDED_SET, open_rows, shares
        return None, open_rows, shares


def _likely_best(fixed: np.ndarray, allowed: np.ndarray, shares: np.ndarray, k: int) -> np.ndarray:
    """[B, n] bool: each node's fixed features plus its open ones of largest share, up to k."""
    ranked = np.argsort(-np.where(allowed & ~fixed, shares, -np.inf), axis=1, kind="stable")  # [B, n]
    budget = k - fixed.sum(axis=1)
    free = (allowed & ~fixed).sum(axis=1)
    best = fixed.copy()
    taken = np.arange(fixed.shape[1])[None, :] < np.minimum(budget, free)[:, None]
    np.put_along_axis(best, ranked, np.take_along_axis(best, ranked, axis=1) | taken, axis=1)
    return best


@functools.lru_cache(maxsize=1024)
def _choices(m: int, b: int) -> np.ndarray:
    """[C(m, b), b] int: every b-subset of range(m), as indices."""
    return np.array(list(itertools.combinations(range(m), b)), dtype=np.int64).reshape(math.comb(m, b), b)


def _subsets(free: np.ndarray, b: int) -> np.ndarray:
    """free [n] bool → [C(|free|, b), n] bool: every b-subset of the free features."""
    choices = np.flatnonzero(free)[_choices(int(free.sum()), b)]
    sets = np.zeros((len(choices), len(free)), dtype=bool)
    sets[np.arange(len(choices))[:, None], choices] = True
    return sets

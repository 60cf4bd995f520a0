"""Branch and bound over feature sets on monotone ReLU networks.

For the lazy z3 strategy (`solvers.smt`): "is there a set s with Σ s ≤ k that is valid?", where
g(s) = f(base + (target − base)⊙s) and validity is g > t (g non-decreasing in s) or, `below`,
g ≤ t (g non-increasing in s): upward closed either way. It is the hard question of a
certification whose greedy answer is minimal or nearly so: the SAT loop must learn enough
clauses to exclude every set within k, while here one rigorous bound excludes a whole subtree.

A node fixes some features in (`fixed`) and leaves others open (`allowed ⊇ fixed`); its sets are
`fixed ∪ s`, s ⊆ allowed \\ fixed, Σ s ≤ k − |fixed|. Per node, in batches:

- a node with |allowed| ≤ k holds one set that matters, `allowed` itself (validity is upward
  closed): it is judged exactly and the node closes either way;
- otherwise `SubsetBounds.bound_and_form` with `fixed` (the fixed features moved into the first
  layer's constant, the budget k − |fixed|) bounds g over the node's sets rigorously, from above
  (g > t) or below (g ≤ t): a bound on the wrong side of t closes the node — no valid set inside;
- otherwise the node's likely best set (fixed plus the open features of largest share in the
  bound's output form, up to the budget) is screened in float and, if it passes, judged
  exactly; a valid one ends the search;
- otherwise it branches on the open feature of largest share: in (if the budget allows) or out.

"none within k" (`unsat`) therefore rests on the exact judgements of the closed leaves and on
the rigorous bounds of `solvers.subsets` (midpoint-radius error analysis, compared with t in
exact rationals); a set is returned only after an exact judgement. Depth first, in include
first order, so that the stack stays at most n deep per batch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from .subsets import SubsetBounds

# Nodes bounded together: larger batches amortise numpy's overhead per call, smaller ones keep
# the search depth first (measured on 64–276-feature 32×32 networks, 64 is near the best).
_BATCH = 64
NODE_LIMIT = "unknown (node limit)"


class SubsetSearch:
    """The branch and bound of the module docstring for one problem.

    `judge(masks [B, n] bool) -> [B] int8`: 1 valid (g > t), 0 invalid, −1 undecided, exactly.
    `screen(masks [B, n] bool) -> [B] bool`: valid in plain float64 (a hint, never a proof).
    `below`: valid means g ≤ t (else g > t); `reference` [n] in [0,1]^n: with `below`, the point
    where the lower lines touch (`SubsetBounds.bound_and_form`), best an invalid set near the
    boundary such as a maximal one."""

    def __init__(
        self,
        bounds: SubsetBounds,
        judge: Callable[[np.ndarray], np.ndarray],
        screen: Callable[[np.ndarray], np.ndarray],
        below: bool = False,
        reference: np.ndarray | None = None,
    ) -> None:
        self.bounds, self.judge, self.screen, self.below = bounds, judge, screen, below
        self.reference = reference
        self.n = len(bounds.base)
        self.threshold = Fraction(bounds.threshold)
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
            for fixed_row, allowed_row, share in zip(fixed[open_rows][::-1], allowed[open_rows][::-1], shares[::-1], strict=True):
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
        """One batch of nodes (fixed, allowed [B, n] bool) → (a valid set [n], an "unknown" reason,
        or None; the rows [B] bool left open to branch on; their features' shares [open, n] in
        the bound, the larger the more promising)."""
        self.nodes += len(fixed)
        whole = allowed.sum(axis=1) <= k
        open_rows = ~whole
        no_shares = np.zeros((0, self.n))
        if whole.any():
            verdicts = self.judge(allowed[whole])
            if (verdicts < 0).any():
                return "unknown (undecided set)", open_rows, no_shares
            if (verdicts == 1).any():
                return allowed[whole][np.argmax(verdicts == 1)], open_rows, no_shares
        rows = np.flatnonzero(open_rows)
        if not len(rows):
            return None, open_rows, no_shares
        budget = k - fixed[rows].sum(axis=1)
        reference = None
        if self.below and self.reference is not None:  # the tangent point, with the node's fixed features
            reference = np.maximum(self.reference[None, :], fixed[rows])
        value, radius, form = self.bounds.bound_and_form(
            budget, allowed[rows], fixed=fixed[rows], minimum=self.below, reference=reference
        )
        pairs = zip(value.tolist(), radius.tolist(), strict=True)
        if self.below:  # every set of the node has g ≥ ĝ − r > t
            closed = np.array([Fraction(v) - Fraction(r) > self.threshold for v, r in pairs])
        else:  # every set of the node has g ≤ ĝ + r ≤ t
            closed = np.array([Fraction(v) + Fraction(r) <= self.threshold for v, r in pairs])
        shares = -form if self.below else form
        open_rows[rows[closed]] = False
        rows, shares = rows[~closed], shares[~closed]
        if len(rows):
            best = _likely_best(fixed[rows], allowed[rows], shares, k)
            hopeful = self.screen(best)
            if hopeful.any():
                verdicts = self.judge(best[hopeful])
                if (verdicts == 1).any():
                    return best[hopeful][np.argmax(verdicts == 1)], open_rows, shares
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

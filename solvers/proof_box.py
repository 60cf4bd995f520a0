"""Certificates of "no CXp within k" on any network without the monotone shortcut (method
"box-tree" of `cardinal.proof/1`, docs/proofs.md): step, sigmoid, tanh, softplus, leaky_relu of
slope ≥ 1 — what neither the shortcut nor LP bounds cover — any K.

A depth-first search over nodes (in, out, ranges): the CXp points y whose moved features
{i : y_i ≠ x_i} hold `in`, avoid `out`, number at most k, and lie in the node's range on each
moved feature. A node is a leaf when the checker's own interval evaluation
(`cardinal.checker.BoxTree.closes`, exact arithmetic, outward-rounded smooth enclosures) shows
that p(x) holds at all its points; a float64 interval pass screens the node first, so that the
exact evaluation runs only where it is likely to close. Else, while the budget r = k − |in| is
positive and an open feature is left, it splits that feature's selection (the open feature of
largest share: its first-layer weights, through |W_L|···|W_2|, times its range; in first), and
once |in| = k it cuts the range of the feature in of largest share at its midpoint. At every node
the points with the features in at their ranges' midpoint and ends (binary: at their other end)
are judged exactly (`Problem.predictions`): one predicted otherwise is a CXp of at most k
features, and ends the search (the claim is false). So does the deadline, or a node that no cut
can narrow (a binary node whose one point is undecided, or a range no double splits).

A leaf costs the checker one exact interval evaluation, and this search one more: on smooth
networks certificates cost about as much to make as to check.
"""

from __future__ import annotations

import itertools
import time
from fractions import Fraction
from typing import Any

import numpy as np
import torch

from cardinal import checker
from cardinal.problem import Problem

from .proof_stop import Searched
from .proof_stop import Stopped as _Stop

_SLACK = 2.0**-30  # the float screen passes a node its float enclosure misses by this (relative): the exact one decides
_FEW_STEPS = 2  # a node with at most this many step units across their breakpoint splits on one before cutting a range


def search_box(problem: Problem, k: int, deadline: float) -> Searched:
    """The `proof` object of a "box-tree" certificate that no CXp of `problem` has at most k
    features, or None and why."""
    search = _Search(problem, k, deadline)
    everything = frozenset[int]()
    try:
        root = search.node(checker.BoxNode(everything, everything, problem.domain.lower.copy(), problem.domain.upper.copy(), {}))
    except _Stop as stop:
        return Searched(None, str(stop), search.nodes, stop.counterexample)
    except RecursionError:
        return Searched(None, "the tree is too deep for this generator", search.nodes)
    return Searched({"method": "box-tree", "root": root}, "proved", search.nodes)


class _Search:
    """The depth-first search of the module docstring for one problem and k."""

    def __init__(self, problem: Problem, k: int, deadline: float) -> None:
        self.problem, self.k, self.deadline = problem, k, deadline
        self.nodes = 0
        domain = problem.domain
        box = (domain.lower.tolist(), domain.upper.tolist(), bool(domain.binary))
        threshold = None if problem.threshold is None else float(problem.threshold)
        self.tree = checker.BoxTree.of(problem.net.to_json(), problem.x.tolist(), box, threshold, k)
        x = problem.x
        # binary: a moved feature takes its other end (x_i itself when both ends agree)
        self.other = np.where(x == domain.lower, domain.upper, domain.lower) if domain.binary else None
        sensitivity = np.ones(problem.classes)
        for layer in reversed(problem.net.layers[1:]):
            sensitivity = sensitivity @ np.abs(layer.weight)
        self.shares = sensitivity @ np.abs(problem.net.layers[0].weight)  # [n]

    def node(self, node: checker.BoxNode) -> dict[str, Any]:
        """The subtree of a node (its ranges lo, hi as float arrays [n])."""
        self.nodes += 1
        if time.perf_counter() > self.deadline:
            raise _Stop("deadline")
        chosen, excluded, lo, hi, phases = node
        self._judge(chosen, lo, hi)
        near, straddling = self._screen(node)
        if near and self.tree.closes(node._replace(lo=[Fraction(v) for v in lo], hi=[Fraction(v) for v in hi])):
            return {"leaf": "bound"}
        free = [i for i in range(self.problem.n) if i not in chosen and i not in excluded]
        widths = np.abs(self.other - self.problem.x) if self.other is not None else hi - lo
        if self.k > len(chosen) and free:
            i = max(free, key=lambda f: self.shares[f] * widths[f])
            inside, outside = node._replace(chosen=chosen | {i}), node._replace(excluded=excluded | {i})
            return {"feature": i, "in": self.node(inside), "out": self.node(outside)}
        cuttable = [i for i in chosen if lo[i] < (lo[i] + hi[i]) / 2 < hi[i]] if self.other is None else []
        if straddling and (len(straddling) <= _FEW_STEPS or not cuttable):
            unit = straddling[0]
            on, off = node._replace(phases={**phases, unit: True}), node._replace(phases={**phases, unit: False})
            return {"step": list(unit), "on": self.node(on), "off": self.node(off)}
        if not cuttable:
            self._judge(chosen, lo, hi, corners=True)
            raise _Stop("open: a node whose enclosure does not close and whose ranges cannot be cut further")
        i = max(cuttable, key=lambda f: self.shares[f] * widths[f])
        at = (lo[i] + hi[i]) / 2
        below, above = hi.copy(), lo.copy()
        below[i] = above[i] = at
        return {
            "cut": i,
            "at": float(at),
            "below": self.node(node._replace(hi=below)),
            "above": self.node(node._replace(lo=above)),
        }

    def _judge(self, chosen: frozenset[int], lo: np.ndarray, hi: np.ndarray, corners: bool = False) -> None:
        """The node's candidate points (the features in at their ranges' midpoints and ends; with
        `corners`, also every corner of their ranges when they are at most 8), judged exactly: one
        predicted otherwise ends the search."""
        if not chosen:
            return
        problem, moved = self.problem, sorted(chosen)
        points = np.repeat(problem.x[None, :], 3, axis=0)
        if self.other is not None:
            points[:, moved] = self.other[moved]
        else:
            points[0, moved], points[1, moved], points[2, moved] = (lo[moved] + hi[moved]) / 2, lo[moved], hi[moved]
        if corners and self.other is None and len(moved) <= 8:
            picks = np.array(list(itertools.product((False, True), repeat=len(moved))))  # [2^m, m]
            ends = np.repeat(problem.x[None, :], len(picks), axis=0)
            ends[:, moved] = np.where(picks, hi[moved][None, :], lo[moved][None, :])
            points = np.concatenate([points, ends])
        predicted = problem.predictions(points)
        for y, p in zip(points, predicted, strict=True):
            if p >= 0 and p != problem.prediction:
                found = tuple(int(i) for i in np.flatnonzero(y != problem.x))
                raise _Stop(f"the claim is false: {list(found)} is a contrastive explanation", found)

    def _screen(self, node: checker.BoxNode) -> tuple[bool, list[tuple[int, int]]]:
        """The checker's enclosure (`BoxTree.enclosure`) in float64, not rounded outwards: whether
        it keeps p(x) or nearly (`_SLACK`) — a hint of whether the exact one does — and the step
        units not in `phases` whose pre-activation range holds their breakpoint."""
        problem, x = self.problem, self.problem.x
        chosen, excluded, lo, hi, phases = node
        if self.other is not None:
            lo = hi = self.other
        inside = np.zeros(problem.n, dtype=bool)
        inside[list(chosen)] = True
        free = ~inside
        free[list(excluded)] = False
        first = problem.net.layers[0]
        low = _affine(first.weight, first.bias, np.where(inside, lo, x), np.where(inside, hi, x))
        high = _affine(first.weight, first.bias, np.where(inside, hi, x), np.where(inside, lo, x))
        budget = self.k - len(chosen)
        if budget > 0 and free.any():
            ends = np.stack([first.weight[:, free] * (lo - x)[free], first.weight[:, free] * (hi - x)[free]])
            falls, rises = np.minimum(ends.min(axis=0), 0.0), np.maximum(ends.max(axis=0), 0.0)  # [w0, open]
            r = min(budget, falls.shape[1])
            low = low + np.sort(falls, axis=1)[:, :r].sum(axis=1)
            high = high + (-np.sort(-rises, axis=1))[:, :r].sum(axis=1)
        straddling = []
        for number, layer in enumerate(problem.net.layers):
            if number:
                low, high = _affine(layer.weight, layer.bias, low, high), _affine(layer.weight, layer.bias, high, low)
            if layer.activation.name == "step":
                at = dict(layer.activation.params)["at"]
                fixed = {j: on for (index, j), on in phases.items() if index == number}
                if any(high[j] < at if on else low[j] >= at for j, on in fixed.items()):
                    return True, []  # no point of the node has these phases
                straddling += [(number, j) for j in np.flatnonzero((low < at) & (at <= high)).tolist() if j not in fixed]
            low = layer.activation.apply_(torch.from_numpy(low.copy())).numpy()
            high = layer.activation.apply_(torch.from_numpy(high.copy())).numpy()
            for (index, j), on in phases.items():
                if index == number:
                    low[j] = high[j] = float(on)
        c, slack = problem.prediction, _SLACK * (1 + np.abs(low) + np.abs(high))  # a near miss may close exactly
        low, high = low + slack, high - slack
        if problem.threshold is None:
            near = all(low[c] > high[j] if j < c else low[c] >= high[j] for j in range(problem.classes) if j != c)
        else:
            near = bool(low[0] > problem.threshold) if c == 1 else bool(high[0] <= problem.threshold)
        return near, straddling


def _affine(weight: np.ndarray, bias: np.ndarray, toward: np.ndarray, away: np.ndarray) -> np.ndarray:
    """W⁺·toward + W⁻·away + b: the low end of W·z + b over [toward, away] (the high end with the
    two swapped)."""
    return np.maximum(weight, 0.0) @ toward + np.minimum(weight, 0.0) @ away + bias

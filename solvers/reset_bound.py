"""Lower bounds on the minimum AXp from one point: method "reset-bound" of `cardinal.proof/1`
(docs/proofs.md, checked by `cardinal.checker.reset`).

A point y of the box predicted otherwise than x proves, with a budgeted linear bound, that y with
any k of its changed features reset to x's values is still predicted otherwise: then no AXp has
at most k features (an AXp S fixes S to x, and y reset on S agrees with x there). Where the
contrastive sets of the hitting-set dual are large — small AXps inside ε-balls, where a flip
needs most features — the dual's bound grows by one per many sets, while one point with a wide
margin settles every small set at once (docs/results.md compares the two bounds on the digits MLP).

The point: for each rival class r (K ≥ 2; K = 1: the flip), projected gradient ascent on the
margin (f_r − f_c, or the distance of f past t) from x, the box's centre and random starts. Every
leaf is judged by the checker's own code before it is written (`checker.Resets`: the generator and
the checker cannot disagree); floats only choose points and branches. `reset_floor` is the
largest k one point proves (bisection); `search_reset` proves a given k by a tree (`_Tree`) that
branches on features — in S, or never reset — where one point is not enough.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch

from cardinal import checker
from cardinal.problem import Problem

from .attack import scores
from .proof_stop import Searched
from .proof_stop import Stopped as _Stop

# free features, deadline (a time.perf_counter() value) → a point [n] that flips, or None (exact)
Flipper = Callable[[frozenset[int], float], "np.ndarray | None"]

STARTS = 4  # gradient-ascent starts per rival: x, the box's centre, random points
STEPS = 60


RESET_GAP = 8  # `search_reset` builds a tree only for claims at most this far above the root's bound


def applies(problem: Problem) -> bool:
    """AXps of networks of the checker's linear-leaf activations; for K ≥ 2 the last layer the identity."""
    layers = problem.net.layers
    return (
        problem.kind == "abductive"
        and all(layer.activation.name in checker.LINEAR_LAYERS for layer in layers)
        and (problem.classes == 1 or layers[-1].activation.name == "identity")
    )


def reset_floor(problem: Problem, deadline: float, tree: _Tree | None = None) -> int:
    """The largest k that one point proves (a tree of one leaf): no AXp has at most k features;
    −1 where no point proves anything (or the method does not apply). `tree`: the search whose
    root points to use (they are computed once per tree)."""
    if not applies(problem):
        return -1
    tree = _Tree(problem, 0, deadline) if tree is None else tree
    best = -1
    for leaf in tree.leaves_at(frozenset()):
        if time.perf_counter() > deadline:
            break
        if not tree.checks.holds(leaf, frozenset(), frozenset(), best + 1):
            continue
        low, high = best + 1, problem.n  # holds at low; the largest k that holds
        while low < high and time.perf_counter() < deadline:
            middle = (low + high + 1) // 2
            if tree.checks.holds(leaf, frozenset(), frozenset(), middle):
                low = middle
            else:
                high = middle - 1
        best = low
    return best


def search_reset(problem: Problem, k: int, deadline: float, flip: Flipper | None = None, floor: int | None = None) -> Searched:
    """The `proof` object of a "reset-bound" certificate that no AXp has at most k features, or
    None and why: the tree of `_Tree`, tried where the root's best point proves at least
    k − `RESET_GAP` (`reset_floor`). `flip`: an exact flip oracle (free features, deadline → a
    flipping point [n] or None; `hitting.FlipOracle`; what it raises, such as its timeout, ends
    the search and reaches the caller), asked where gradient ascent finds no point that flips
    with a node's in fixed: its None makes in an AXp of at most k features, the claim false
    (`Searched.counterexample`). `floor`: `reset_floor`'s answer, when known."""
    if not applies(problem):
        return Searched(None, "the reset bound does not apply", 0)
    tree = _Tree(problem, k, deadline, flip)
    floor = reset_floor(problem, deadline, tree) if floor is None else floor
    if floor < k - RESET_GAP:
        return Searched(None, f"the reset bound's root proves {floor}, too far below {k}", 1)
    try:
        root = tree.node(frozenset(), frozenset())
    except _Stop as stop:
        return Searched(None, str(stop), tree.count, stop.counterexample)
    return Searched({"method": "reset-bound", "root": root}, "proved", tree.count)


class _Tree:
    """The depth-first search of a reset-bound tree for "no AXp within k" (docs/proofs.md): at a
    node (in, out) the first point, of one per rival found with the features of in fixed at x,
    whose leaf the checker accepts (`checker.Resets`) closes it; else it branches on the open
    feature whose reset costs the best point's float margin most (in first)."""

    def __init__(self, problem: Problem, k: int, deadline: float, flip: Flipper | None = None) -> None:
        self.problem, self.deadline, self.count, self.flip = problem, deadline, 0, flip
        domain = problem.domain
        box = (domain.lower.tolist(), domain.upper.tolist(), bool(domain.binary))
        self.checks = checker.Resets(problem.net.to_json(), problem.x.tolist(), box, problem.threshold, k)
        self._leaves: dict[frozenset[int], list[dict]] = {}  # in → its candidate leaves

    def leaves_at(self, chosen: frozenset[int]) -> list[dict]:
        """Candidate leaves "point" for nodes whose in is `chosen`, widest float margin first
        (gradient ascent once per in)."""
        if chosen not in self._leaves:
            self._leaves[chosen] = [_leaf(self.problem, y, rival) for y, rival in _points(self.problem, chosen)]
        return self._leaves[chosen]

    def node(self, chosen: frozenset[int], out: frozenset[int]) -> dict:
        if time.perf_counter() > self.deadline:
            raise _Stop("deadline")
        self.count += 1
        if len(chosen) > self.checks.k:
            return {"size": True}
        leaves = self.leaves_at(chosen)
        if not leaves:
            leaves = self._asked(chosen)
        for leaf in leaves:
            if self.checks.holds(leaf, chosen, out):
                return leaf
        i = _costliest(self.problem, leaves[0], chosen | out)
        if i is None:
            raise _Stop("the bound fails on a leaf with nothing left to branch on")
        return {"branch": i, "children": [self.node(chosen | {i}, out), self.node(chosen, out | {i})]}

    def _asked(self, chosen: frozenset[int]) -> list[dict]:
        """The leaf of the point that the exact oracle finds with `chosen` fixed at x; `_Stop` when
        there is no oracle or it finds none (then `chosen` is an AXp: the counterexample)."""
        if self.flip is None:
            raise _Stop(f"no point found that flips with {sorted(chosen)} fixed at x")
        y = self.flip(frozenset(range(self.problem.n)) - chosen, self.deadline)  # what it raises ends the search
        if y is None:
            raise _Stop(f"the claim is false: {sorted(chosen)} is an abductive explanation", tuple(sorted(chosen)))
        if not self.problem.flips(y):
            raise _Stop("the flip oracle's point does not flip exactly")
        rival = None if self.problem.classes == 1 else int(self.problem.predictions(y[None, :])[0])  # the class y takes
        return [_leaf(self.problem, y, rival)]


def _leaf(problem: Problem, y: np.ndarray, rival: int | None) -> dict:
    """The leaf "point" of y [n] (the pairs where it differs from x) and its rival."""
    return {"point": [[int(i), float(y[i])] for i in np.flatnonzero(y != problem.x)], "rival": rival}


def _costliest(problem: Problem, leaf: dict, decided: frozenset[int]) -> int | None:
    """The feature of the leaf's point, not in `decided`, whose reset to x lowers the float
    score most (None: none is left)."""
    features = [i for i, _ in leaf["point"] if i not in decided]
    if not features:
        return None
    y = problem.x.copy()
    for i, value in leaf["point"]:
        y[i] = value
    Y = np.repeat(y[None, :], len(features), axis=0)
    Y[np.arange(len(features)), features] = problem.x[features]
    return features[int(np.argmin(scores(problem, Y)))]


def _points(problem: Problem, fixed: frozenset[int] = frozenset()) -> list[tuple[np.ndarray, int | None]]:
    """Per rival (K = 1: the flip), the point of greatest float margin that projected gradient
    ascent found with the features of `fixed` at x, rivals of widest margin first (those of a
    positive margin only); on a binary box each feature snapped to its nearer end."""
    c, x = problem.prediction, problem.x
    pinned = np.isin(np.arange(problem.n), sorted(fixed))
    lower, upper = np.where(pinned, x, problem.domain.lower), np.where(pinned, x, problem.domain.upper)
    rivals: list[int | None] = [None] if problem.classes == 1 else [j for j in range(problem.classes) if j != c]
    model = problem.net.to_torch(dtype=torch.float64)
    generator = np.random.default_rng(0)
    starts = np.stack([x, (lower + upper) / 2, *(lower + generator.random((STARTS - 2, problem.n)) * (upper - lower))])
    low, high = torch.tensor(lower), torch.tensor(upper)
    y = torch.tensor(np.repeat(starts[None], len(rivals), axis=0).reshape(-1, problem.n), requires_grad=True)
    which = torch.tensor([j if j is not None else 0 for j in rivals]).repeat_interleave(len(starts))
    width = high - low

    def margins(points: torch.Tensor) -> torch.Tensor:
        out = model(points)
        if problem.classes == 1:
            return (out[:, 0] - problem.threshold) * (1.0 if c == 0 else -1.0)
        return out.gather(1, which[:, None])[:, 0] - out[:, c]

    for step in range(STEPS):
        (gradient,) = torch.autograd.grad(margins(y).sum(), y)
        with torch.no_grad():
            y = torch.minimum(torch.maximum(y + 0.25 * (1 - step / STEPS) * width * torch.sign(gradient), low), high)
        y.requires_grad_(True)
    points = y.detach().numpy()
    if problem.domain.binary:
        points = np.where(points - lower < upper - points, lower, upper)
    points = np.where(pinned, x, points)
    with torch.no_grad():
        scored = margins(torch.tensor(points)).numpy().reshape(len(rivals), len(starts))
    chosen = scored.argmax(axis=1)
    grouped = points.reshape(len(rivals), len(starts), -1)
    found = [(grouped[r, chosen[r]], rivals[r], scored[r, chosen[r]]) for r in range(len(rivals))]
    found.sort(key=lambda item: -item[2])
    return [(point, rival) for point, rival, margin in found if margin > 0]

"""Flip questions over low-dimensional boxes, decided by input splitting (issue 28).

The question of `hitting.FlipOracle`: is there a y in the box, equal to x off the free features
F, with p(y) ≠ p(x)? For a ReLU network (every hidden layer ReLU, the last the identity) and a
few free features, a depth-first search over sub-boxes of the free features' ranges decides it
exactly:

- *Interval pass* (float64, every bound rounded outwards with a rigorous error term, the
  convention of `cardinal.bounds`): each unit's pre-activation h over the box lies in [h_lo,
  h_hi], and each *keep score* s_r (below) is at most s_hi. A box whose every s_hi is on the keep
  side holds no flip: closed.
- *Affine boxes*: where every hidden unit is stable (h_lo ≥ 0 or h_hi ≤ 0), the network is one
  affine map on the box, so each score is affine there and is largest at the vertex that the
  signs of its gradient pick (the gradient computed in float64 with a rigorous error bound; a
  coordinate whose sign that bound leaves open takes both ends). Those vertices are judged in
  exact arithmetic (`Problem.predictions`): one that flips is the answer; none closes the box.
- Otherwise the box is cut in two at the midpoint of the free feature of largest width × share
  (its first-layer weights through |W_L|···|W_2|, a float hint that orders the search); the
  centre of each box left open is judged exactly first.

The keep scores say what p(y) = p(x) = c means: K = 1, c = 0: f − t ≤ 0; c = 1: t − f < 0;
K ≥ 2: f_j − f_c < 0 for j < c and ≤ 0 for j > c (ties go to the lowest index), one row per
rival j.

So "no flip" rests on rigorous bounds and exact judgements of vertices, and a flip on an exact
judgement of its point; the one float hint, the shares, only orders the search. The work grows
with the number of linear regions the box meets, exponentially with the free features: made for
the 1–4 features of a small CXp's subsets (`solvers.levels`), searched together; with more free
features the boxes multiply past what the exact MILP's flip search costs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from cardinal.errors import Stopped
from cardinal.problem import Problem
from cardinal.rounding import SAFETY, TINY, UNIT_ROUNDOFF, gamma

from .hitting import OracleTimeout

BATCH = 256  # boxes bounded at once
UNSURE_ENDS = 6  # an affine box whose gradient leaves more signs open than this is cut instead


class OutOfNodes(Stopped):
    """The search reached its node budget (or a box that no double cuts) without an answer."""


def applies(problem: Problem) -> bool:
    """Whether the splitting search takes the problem: hidden layers ReLU, the last the identity,
    a continuous box (binary boxes are decided at their vertices elsewhere)."""
    layers = problem.net.layers
    hidden_relu = all(layer.activation.name == "relu" for layer in layers[:-1])
    return hidden_relu and layers[-1].activation.name == "identity" and not problem.domain.binary


class BoxSplitter:
    """The search of the module docstring for one problem (its network's arrays prepared once)."""

    def __init__(self, problem: Problem) -> None:
        if not applies(problem):
            raise ValueError("the splitting search needs a ReLU network with an identity output on a continuous box")
        self.problem = problem
        layers = problem.net.layers
        self.hidden = [  # per hidden layer: W^T [in, out], W+^T, W−^T, |W|^T, b [out], |b|, γ
            (
                np.ascontiguousarray(layer.weight.T),
                np.maximum(layer.weight.T, 0.0),
                np.minimum(layer.weight.T, 0.0),
                np.abs(layer.weight.T),
                layer.bias.astype(np.float64),
                np.abs(layer.bias),
                gamma(2 * layer.weight.shape[1] + 2),
            )
            for layer in layers[:-1]
        ]
        self.scores, self.offsets, self.strict = _keep_scores(problem)  # [R, w], [R], [R]
        last_width = self.scores.shape[1]
        self.score_gamma = gamma(2 * last_width + 2) + 4 * UNIT_ROUNDOFF  # the scores' own rounding (differences)
        self.gradient_gamma = gamma(sum(sum(layer.weight.shape) for layer in layers) + 4) + 4 * UNIT_ROUNDOFF
        sensitivity = np.abs(self.scores).sum(axis=0)
        for layer in reversed(layers[:-1]):
            sensitivity = sensitivity @ np.abs(layer.weight)
        self.shares = sensitivity  # [n]
        self.nodes = 0

    def flip(self, free: frozenset[int], deadline: float, nodes: int | None = None) -> np.ndarray | None:
        """A point y [n] of the box, equal to x off `free`, that flips the prediction in exact
        arithmetic, or None: proved that none does. Raises `OracleTimeout` at the deadline and
        `OutOfNodes` after `nodes` boxes (None: no budget) or at a box no double cuts."""
        answer = self.flips([free], deadline, nodes)[0]
        if isinstance(answer, OutOfNodes):
            raise answer
        return answer

    def flips(
        self,
        sets: Sequence[frozenset[int]],
        deadline: float,
        nodes: int | None = None,
        first: bool = False,
        record: list[dict[bytes, tuple]] | None = None,
    ) -> list[np.ndarray | OutOfNodes | None]:
        """`flip` for many free sets in one search (their boxes bounded in common batches), each
        with its own budget of `nodes` boxes: per set a flipping point [n], None (none flips) or
        `OutOfNodes` (undecided). `first`: stop at the first flip (the sets not decided by then
        are `OutOfNodes` too). Raises `OracleTimeout` at the deadline.

        `record`: a list that gets, per set, the search's tree as {box key: ("cut", feature, at)
        or ("leaf", "interval" / "affine")}, the key `box_key(lo, hi)` (`tree` writes a set's
        tree from it): where a set's answer is None, its tree's every leaf is closed."""
        problem = self.problem
        trees: list[dict[bytes, tuple]] = [{} for _ in sets]
        if record is not None:
            record.extend(trees)
        answers: list[np.ndarray | OutOfNodes | None] = [None] * len(sets)
        pending = np.ones(len(sets), dtype=bool)
        used = np.zeros(len(sets), dtype=np.int64)
        movable = np.zeros((len(sets), problem.n), dtype=bool)
        for row, free in enumerate(sets):
            movable[row, sorted(free)] = True
        lows = list(np.where(movable, problem.domain.lower, problem.x))[::-1]  # the first set's box on top
        highs = list(np.where(movable, problem.domain.upper, problem.x))[::-1]
        owners = list(range(len(sets)))[::-1]
        while lows:
            if time.perf_counter() > deadline:
                raise OracleTimeout
            take = min(BATCH, len(lows))
            lo, hi, owner = np.array(lows[-take:]), np.array(highs[-take:]), np.array(owners[-take:])
            del lows[-take:], highs[-take:], owners[-take:]
            live = pending[owner]
            lo, hi, owner = lo[live], hi[live], owner[live]
            if not len(owner):
                continue
            self.nodes += len(owner)
            np.add.at(used, owner, 1)
            points, flipped, open_rows, how = self._step(lo, hi)
            if record is not None:
                for row in np.flatnonzero(how > 0).tolist():
                    trees[owner[row]][box_key(lo[row], hi[row])] = ("leaf", _CLOSED_BY[how[row]])
            for row in np.flatnonzero(flipped).tolist():
                if pending[owner[row]]:
                    answers[owner[row]], pending[owner[row]] = points[row], False
                    if first:
                        stop = OutOfNodes("stopped at the first flip")
                        return [stop if waiting else answer for answer, waiting in zip(answers, pending, strict=True)]
            for row in np.flatnonzero(open_rows & pending[owner])[::-1].tolist():
                who = int(owner[row])
                if nodes is not None and used[who] >= nodes:
                    answers[who], pending[who] = OutOfNodes(f"{nodes} boxes"), False
                    continue
                halves = self._halves(lo[row], hi[row])
                if halves is None:
                    answers[who], pending[who] = OutOfNodes("a box that no double cuts"), False
                    continue
                lows.extend(halves[0])
                highs.extend(halves[1])
                if record is not None:
                    feature = int(np.flatnonzero(halves[0][0] != lo[row])[0])
                    trees[who][box_key(lo[row], hi[row])] = ("cut", feature, float(halves[0][0][feature]))
                owners.extend((who, who))
        return answers

    def _step(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Bound boxes [B, n] → (points [B, n], flipped [B]: the row's point flips in exact
        arithmetic, open [B]: neither closed nor flipped, how each row closed [B]: 0 not,
        1 by the interval pass, 2 as an affine box)."""
        with np.errstate(all="ignore"):
            stable, actives, s_hi = self._interval(lo, hi)
        keeps = np.where(self.strict, s_hi < 0, s_hi <= 0).all(axis=1)  # NaN keeps nothing
        open_rows = ~keeps
        points = lo.copy()
        flipped = np.zeros(len(lo), dtype=bool)
        how = np.where(keeps, 1, 0)
        affine = np.flatnonzero(open_rows & stable)
        if len(affine):
            vertices, hits, closed = self._affine(lo[affine], hi[affine], [a[affine] for a in actives])
            points[affine[hits]], flipped[affine[hits]] = vertices[hits], True
            open_rows[affine[closed | hits]] = False
            how[affine[closed]] = 2
        rows = np.flatnonzero(open_rows)
        if len(rows):  # the centres of the boxes left open, judged exactly: a flip found early
            centres = np.clip(lo[rows] + (hi[rows] - lo[rows]) / 2, lo[rows], hi[rows])
            predicted = self.problem.predictions(centres)
            at = (predicted >= 0) & (predicted != self.problem.prediction)
            points[rows[at]], flipped[rows[at]], open_rows[rows[at]] = centres[at], True, False
        return points, flipped, open_rows, how

    def _interval(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
        """The interval pass over boxes [B, n]: whether every hidden unit is stable [B], each hidden
        layer's units with h_lo ≥ 0 [B, w], and the keep scores' upper bounds s_hi [B, R]."""
        z_lo, z_hi = lo, hi
        stable = np.ones(len(lo), dtype=bool)
        actives = []
        for _, positive, negative, absolute, bias, abs_bias, term_gamma in self.hidden:
            h_lo = z_lo @ positive + z_hi @ negative + bias
            h_hi = z_hi @ positive + z_lo @ negative + bias
            error = term_gamma * (np.maximum(np.abs(z_lo), np.abs(z_hi)) @ absolute + abs_bias) * SAFETY + TINY
            h_lo = np.nextafter(h_lo - error, -np.inf)
            h_hi = np.nextafter(h_hi + error, np.inf)
            stable &= ((h_lo >= 0) | (h_hi <= 0)).all(axis=1)
            actives.append(h_lo >= 0)
            z_lo, z_hi = np.maximum(h_lo, 0.0), np.maximum(h_hi, 0.0)
        scores = self.scores
        s_hi = z_hi @ np.maximum(scores, 0.0).T + z_lo @ np.minimum(scores, 0.0).T + self.offsets
        reach = np.maximum(np.abs(z_lo), np.abs(z_hi))
        error = self.score_gamma * (reach @ np.abs(scores).T + np.abs(self.offsets)) * SAFETY + TINY
        return stable, actives, np.nextafter(s_hi + error, np.inf)

    def _affine(self, lo: np.ndarray, hi: np.ndarray, actives: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Boxes [B, n] on which the network is affine (each hidden layer's active units [B, w]):
        judge each score's largest vertex exactly → (a flipping vertex per box [B, n], whether
        one flips [B], closed: none flips [B])."""
        B, R = len(lo), len(self.offsets)
        gradient = np.broadcast_to(self.scores, (B, R, self.scores.shape[1])).copy()  # [B, R, w]
        magnitude = np.abs(gradient)
        for (weight_t, _, _, absolute, *_), active in zip(reversed(self.hidden), reversed(actives), strict=True):
            gradient = (gradient * active[:, None, :]) @ weight_t.T
            magnitude = (magnitude * active[:, None, :]) @ absolute.T
        error = self.gradient_gamma * magnitude * SAFETY + TINY  # [B, R, n]
        wide = (hi > lo)[:, None, :]
        up, down = wide & (gradient > error), wide & (gradient < -error)
        unsure = wide & ~up & ~down
        counts = unsure.sum(axis=2)  # [B, R]
        closed = np.zeros(B, dtype=bool)
        fits = (counts <= UNSURE_ENDS).all(axis=1)
        vertices, owners = [], []
        for b in np.flatnonzero(fits).tolist():
            for r in range(R):
                base = np.where(up[b, r], hi[b], lo[b])
                ends = np.flatnonzero(unsure[b, r])
                bits = (np.arange(1 << len(ends))[:, None] >> np.arange(len(ends))) & 1
                corner = np.repeat(base[None, :], len(bits), axis=0)
                corner[:, ends] = np.where(bits == 1, hi[b, ends], lo[b, ends])
                vertices.append(corner)
                owners.extend([b] * len(corner))
        found = np.zeros((B, lo.shape[1]))
        hits = np.zeros(B, dtype=bool)
        if not vertices:
            return found, hits, closed
        V, owner = np.concatenate(vertices), np.array(owners)
        predicted = self.problem.predictions(V)
        flipped = (predicted >= 0) & (predicted != self.problem.prediction)
        hits[owner[flipped]] = True
        found[owner[flipped]] = V[flipped]  # a flipping vertex of each box that has one
        kept = np.bincount(owner[predicted == self.problem.prediction], minlength=B)
        closed[fits] = kept[fits] == np.bincount(owner, minlength=B)[fits]
        return found, hits, closed & ~hits

    def _halves(self, lo: np.ndarray, hi: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]] | None:
        """Cut a box [n] at the midpoint of its free feature of largest width × share: the two
        halves' lower and upper ends, the lower half last (searched first); None when no double
        lies strictly between the ends."""
        width = hi - lo
        feature = int(np.argmax(np.where(width > 0, width * self.shares + width, -1.0)))
        middle = lo[feature] + width[feature] / 2
        if not lo[feature] < middle < hi[feature]:
            return None
        upper_half_lo, lower_half_hi = lo.copy(), hi.copy()
        upper_half_lo[feature] = middle
        lower_half_hi[feature] = middle
        return [upper_half_lo, lo], [hi, lower_half_hi]


_CLOSED_BY = {1: "interval", 2: "affine"}  # `_step`'s how → the leaf of method subset-split


def box_key(lo: np.ndarray, hi: np.ndarray) -> bytes:
    """A box's key in a recorded tree (`BoxSplitter.flips`)."""
    return np.concatenate([lo, hi]).astype(np.float64).tobytes()


def tree(recorded: dict[bytes, tuple], lo: np.ndarray, hi: np.ndarray) -> dict[str, Any] | None:
    """The subset-split tree (docs/proofs.md) of one set's recorded search from its box [n] (lo,
    hi), or None where a box of it was never closed."""
    entry = recorded.get(box_key(lo, hi))
    if entry is None:
        return None
    if entry[0] == "leaf":
        return {"leaf": entry[1]}
    _, feature, at = entry
    below_hi, above_lo = hi.copy(), lo.copy()
    below_hi[feature], above_lo[feature] = at, at
    below, above = tree(recorded, lo, below_hi), tree(recorded, above_lo, hi)
    return None if below is None or above is None else {"cut": feature, "at": at, "below": below, "above": above}


def _keep_scores(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The keep scores of the module docstring as rows over the last hidden layer's activations:
    coefficients [R, w], offsets [R] (float64: their rounding is in `score_gamma`) and whether
    each must be < 0 (else ≤ 0) [R]."""
    last = problem.net.layers[-1]
    c = problem.prediction
    if problem.classes == 1:
        t = float(problem.threshold)
        if c == 0:  # keep: f − t ≤ 0
            return last.weight[:1].astype(np.float64), np.array([last.bias[0] - t]), np.array([False])
        return -last.weight[:1].astype(np.float64), np.array([t - last.bias[0]]), np.array([True])
    rivals = [j for j in range(problem.classes) if j != c]
    coefficients = np.array([last.weight[j] - last.weight[c] for j in rivals])
    offsets = np.array([last.bias[j] - last.bias[c] for j in rivals])
    return coefficients, offsets, np.array([j < c for j in rivals])

"""Flipping points by projected gradient: a float search for a y in the box, equal to x off the
free features, with p(y) ≠ p(x). What it finds is judged in exact arithmetic (`Problem.predictions`)
before it is returned, so it is evidence like any exact point; what it does not find proves
nothing. `solvers.exact_milp` asks it before each flip search's branch and bound: on the
non-monotone benchmark networks it finds most flipping points of the hitting-set loop in
milliseconds.

From `STARTS` points (x itself, the box's centre and random ones, seeded) it takes `STEPS` signed
gradient steps of f (up when p(x) = 0, down otherwise), each a shrinking fraction of the box's
width, projected back into the box; on a binary box the points are then rounded to its corners.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..problem import Problem

STARTS = 16
STEPS = 24


def flipping_point(problem: Problem, free: frozenset[int], seed: int = 0) -> np.ndarray | None:
    """A point y [n] of the box, equal to x off `free`, whose prediction differs from p(x) in
    exact arithmetic, or None when the search found none (piecewise-linear networks)."""
    x, domain = problem.x, problem.domain
    movable = np.isin(np.arange(problem.n), sorted(free))
    if not movable.any():
        return None
    lower, upper = np.where(movable, domain.lower, x), np.where(movable, domain.upper, x)
    width = upper - lower
    y = np.random.default_rng(seed).random((STARTS, problem.n)) * width + lower
    y[0], y[1] = x, (lower + upper) / 2
    layers = [(layer.weight, layer.bias, *layer.activation.pieces()) for layer in problem.net.layers]
    direction = 1.0 if problem.prediction == 0 else -1.0  # raise f above t, or lower it to ≤ t
    points = [y]
    for step in range(STEPS):
        size = 0.5 * (1 - step / STEPS) * width
        y = np.minimum(np.maximum(y + size * np.sign(direction * _gradient(layers, y)), lower), upper)
        points.append(y)
    candidates = np.concatenate(points)
    if domain.binary:
        candidates = np.where(candidates - domain.lower < domain.upper - candidates, domain.lower, domain.upper)
    candidates = np.where(movable, candidates, x)
    flipped = np.flatnonzero(problem.predictions(candidates) == 1 - problem.prediction)
    return candidates[flipped[0]] if len(flipped) else None


Pieces = tuple[np.ndarray, np.ndarray, list[Fraction], list[tuple[Fraction, Fraction]]]


def _gradient(layers: list[Pieces], y: np.ndarray) -> np.ndarray:
    """The gradient [B, n] of f at the points y [B, n] (a PWL network; at a breakpoint, the slope
    of the piece to its right)."""
    z, slopes = y, []
    for weight, bias, breaks, pieces in layers:
        h = z @ weight.T + bias
        piece = np.searchsorted(np.array([float(c) for c in breaks]), h, side="right")
        offsets = np.array([float(o) for _, o in pieces])
        slope = np.array([float(a) for a, _ in pieces])[piece]
        slopes.append(slope)
        z = slope * h + offsets[piece]
    grad = np.ones((len(y), 1))
    for (weight, _, _, _), slope in zip(reversed(layers), reversed(slopes), strict=True):
        grad = (grad * slope) @ weight
    return grad

"""Flipping points by projected gradient: a float search for a y in the box, equal to x off the
free features, with p(y) ≠ p(x). What it finds is judged in exact arithmetic (`Problem.predictions`)
before it is returned, so it is evidence like any exact point; what it does not find proves
nothing. `solvers.exact_milp` asks it before each flip search's branch and bound: on the
non-monotone benchmark networks it finds most flipping points of the hitting-set loop in
milliseconds.

From `STARTS` points (x itself, the box's centre and random ones, seeded) it takes `STEPS` signed
gradient steps of a score that rises as y leaves p(x) — K = 1: f (up when p(x) = 0, down
otherwise); K ≥ 2 classes: f_r − f_c, c = p(x) and r the strongest rival at each point — each a
shrinking fraction of the box's width, projected back into the box; on a binary box the points
are then rounded to its corners.
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
    points = [y]
    for step in range(STEPS):
        size = 0.5 * (1 - step / STEPS) * width
        y = np.minimum(np.maximum(y + size * np.sign(_gradient(layers, y, problem.prediction)), lower), upper)
        points.append(y)
    candidates = np.concatenate(points)
    if domain.binary:
        candidates = np.where(candidates - domain.lower < domain.upper - candidates, domain.lower, domain.upper)
    candidates = np.where(movable, candidates, x)
    predicted = problem.predictions(candidates)
    flipped = np.flatnonzero((predicted >= 0) & (predicted != problem.prediction))
    return candidates[flipped[0]] if len(flipped) else None


Pieces = tuple[np.ndarray, np.ndarray, list[Fraction], list[tuple[Fraction, Fraction]]]


def _gradient(layers: list[Pieces], y: np.ndarray, c: int) -> np.ndarray:
    """The gradient [B, n] at the points y [B, n] of the score that rises as y leaves class c
    (module docstring) of a PWL network (at a breakpoint, the slope of the piece to its right)."""
    z, slopes = y, []
    for weight, bias, breaks, pieces in layers:
        h = z @ weight.T + bias
        piece = np.searchsorted(np.array([float(b) for b in breaks]), h, side="right")
        offsets = np.array([float(o) for _, o in pieces])
        slope = np.array([float(a) for a, _ in pieces])[piece]
        slopes.append(slope)
        z = slope * h + offsets[piece]
    if z.shape[1] == 1:
        grad = np.full((len(y), 1), 1.0 if c == 0 else -1.0)  # raise f above t, or lower it to ≤ t
    else:
        rivals = np.where(np.arange(z.shape[1]) == c, -np.inf, z)
        grad = np.zeros_like(z)
        grad[np.arange(len(y)), rivals.argmax(axis=1)] = 1.0
        grad[:, c] -= 1.0
    for (weight, _, _, _), slope in zip(reversed(layers), reversed(slopes), strict=True):
        grad = (grad * slope) @ weight
    return grad

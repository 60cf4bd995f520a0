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
are then rounded to its corners. `flipping_points` runs the same search for many free sets at once
(the covering of `solvers.covering`).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from cardinal.problem import Problem

STARTS = 16
STEPS = 24

Pieces = tuple[np.ndarray, np.ndarray, list[Fraction], list[tuple[Fraction, Fraction]]]


def flipping_point(problem: Problem, free: frozenset[int], seed: int = 0) -> np.ndarray | None:
    """A point y [n] of the box, equal to x off `free`, whose prediction differs from p(x) in
    exact arithmetic, or None when the search found none (piecewise-linear networks)."""
    movable = np.isin(np.arange(problem.n), sorted(free))[None, :]
    points, found = flipping_points(problem, movable, STARTS, seed)
    return points[0] if found[0] else None


def flipping_points(problem: Problem, movable: np.ndarray, starts: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The search for many free sets at once: `movable` [B, n] bool (row b: the features free in
    the b-th search), `starts` points per row (x, the centre, random ones). Returns points [B, n]
    and found [B]: where found, the row's point differs from x only on its free features and flips
    the prediction in exact arithmetic (else it is x). Of each row's candidates (step by step, start
    by start) the first whose float score says it flips is judged exactly."""
    x, domain = problem.x, problem.domain
    rows = len(movable)
    lower = np.where(movable, domain.lower, x)[:, None, :]  # [B, 1, n]
    upper = np.where(movable, domain.upper, x)[:, None, :]
    width = upper - lower
    y = np.random.default_rng(seed).random((rows, starts, problem.n)) * width + lower  # [B, S, n]
    y[:, 0] = x
    if starts > 1:
        y[:, 1] = (lower[:, 0] + upper[:, 0]) / 2
    layers = [(layer.weight, layer.bias, *layer.activation.pieces()) for layer in problem.net.layers]
    points = [y]
    for step in range(STEPS):
        size = 0.5 * (1 - step / STEPS) * width
        gradient = _gradient(layers, y.reshape(-1, problem.n), problem.prediction).reshape(y.shape)
        y = np.minimum(np.maximum(y + size * np.sign(gradient), lower), upper)
        points.append(y)
    candidates = np.stack(points, axis=1).reshape(rows, -1, problem.n)  # [B, (STEPS + 1)·S, n], step-major
    if domain.binary:
        candidates = np.where(candidates - domain.lower < domain.upper - candidates, domain.lower, domain.upper)
    candidates = np.where(movable[:, None, :], candidates, x)
    likely = _score(layers, candidates.reshape(-1, problem.n), problem).reshape(rows, -1) >= -_SCORE_SLACK
    chosen = np.where(likely.any(axis=1), likely.argmax(axis=1), 0)
    result = candidates[np.arange(rows), chosen]
    predicted = problem.predictions(result)
    found = likely.any(axis=1) & (predicted >= 0) & (predicted != problem.prediction)
    return np.where(found[:, None], result, x), found


def scores(problem: Problem, Y: np.ndarray) -> np.ndarray:
    """The search's float scores [B] of points Y [B, n]: positive where a point leaves p(x)."""
    layers = [(layer.weight, layer.bias, *layer.activation.pieces()) for layer in problem.net.layers]
    return _score(layers, np.asarray(Y, dtype=np.float64), problem)


def first_order_moves(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Each feature's first-order effect [n] on the search's score at x (module docstring), ≥ 0:
    the gradient there times the move to the end of the box that raises the score, and that end
    [n] (floats: they only choose which points to judge)."""
    layers = [(layer.weight, layer.bias, *layer.activation.pieces()) for layer in problem.net.layers]
    gradient = _gradient(layers, problem.x[None, :], problem.prediction)[0]
    domain = problem.domain
    up, down = gradient * (domain.upper - problem.x), gradient * (domain.lower - problem.x)
    return np.maximum(np.maximum(up, down), 0.0), np.where(up >= down, domain.upper, domain.lower)


_SCORE_SLACK = 1e-9  # a candidate whose float score is within this of flipping is judged exactly


def _score(layers: list[Pieces], y: np.ndarray, problem: Problem) -> np.ndarray:
    """Float scores [B] of the points y [B, n], positive where y leaves p(x) (K = 1: f − t when
    p(x) = 0, t − f otherwise; K ≥ 2: the strongest rival minus f_c)."""
    z = y
    for weight, bias, breaks, pieces in layers:
        h = z @ weight.T + bias
        piece = np.searchsorted(np.array([float(b) for b in breaks]), h, side="right")
        z = np.array([float(a) for a, _ in pieces])[piece] * h + np.array([float(o) for _, o in pieces])[piece]
    c = problem.prediction
    if z.shape[1] == 1:
        return (z[:, 0] - problem.threshold) if c == 0 else (problem.threshold - z[:, 0])
    rivals = np.where(np.arange(z.shape[1]) == c, -np.inf, z)
    return rivals.max(axis=1) - z[:, c]


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

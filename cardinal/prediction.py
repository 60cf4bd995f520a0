"""The prediction rule, defined once: p(x) from a network's K outputs f_0 … f_{K−1}.

* K = 1: p(x) = 1 iff f(x) > t, else 0, with the threshold t (default 0).
* K ≥ 2: p(x) is the index of the largest output, ties going to the lowest index:
  p(x) = c iff f_c(x) > f_j(x) for every j < c and f_c(x) ≥ f_j(x) for every j > c. No threshold
  applies (one given for such a network is refused: `threshold_for`).

Every comparison is exact. The outputs are exact rationals (piecewise-linear networks) or
rigorous enclosures [lower, upper] (smooth ones); a prediction is decided only when every value
inside the enclosures gives it, and is −1 (*undecided*) otherwise. `decide` takes the enclosures
of a batch, [B, K] each, to predictions [B] (`PREDICTION_DTYPE`); `cardinal.exact`,
`cardinal.bounds` (whose float64 pass decides only rows its error bound leaves no doubt about),
`Problem.predictions`, and so every engine, predict through it.

*Leaving* class c (the prediction changes, a "flip") means that some output j ≠ c takes it:
f_j ≥ f_c for j < c, f_j > f_c for j > c (`overtakes_strictly` says which). The exact engines
encode this disjunction: one Boolean (MILP: one binary) per j.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from .errors import InputError

PREDICTION_DTYPE = np.int32  # a class index, or −1 (undecided)


def threshold_for(classes: int, threshold: float | None, where: str = "") -> float | None:
    """The threshold of a network with `classes` outputs: K = 1 the given one, else 0; K ≥ 2
    None, and a threshold given for it is refused with `InputError` (`where`: what gave it,
    e.g. "--threshold", to name in the message)."""
    if classes == 1:
        return 0.0 if threshold is None else float(threshold)
    if threshold is not None:
        given = f"{where} " if where else "a threshold "
        raise InputError(
            f"{given}applies to networks with one output; this one has {classes} outputs, and its prediction "
            "is the class with the largest output (ties to the lowest index), with no threshold"
        )
    return None


def overtakes_strictly(c: int, j: int) -> bool:
    """Whether output j must exceed f_c strictly to take the prediction from class c (j > c);
    for j < c, f_j ≥ f_c suffices (ties go to the lower index)."""
    return j > c


def threshold_rule(lower: Any, upper: Any, threshold: Fraction) -> int:
    """K = 1 on an exact enclosure lower ≤ f ≤ upper: 1 if f > t surely, 0 if f ≤ t surely, −1."""
    if lower > threshold:
        return 1
    if upper <= threshold:
        return 0
    return -1


def decide(lower: np.ndarray, upper: np.ndarray, threshold: float | None) -> np.ndarray:
    """Exact predictions from exact enclosures lower ≤ f ≤ upper [B, K] (Fractions, or any exact
    numbers; lower is upper for point values) → [B] `PREDICTION_DTYPE`, −1 where undecided.
    `threshold`: t for K = 1, None for K ≥ 2.

    K ≥ 2: class c is decided when its lower end beats every other output's upper end (strictly
    for j < c); at most one class can be. Otherwise some value inside the enclosures gives
    another class (or a tie that the enclosures cannot resolve), and the row is undecided."""
    lower, upper = np.asarray(lower, dtype=object), np.asarray(upper, dtype=object)
    classes = lower.shape[1]
    if classes == 1:
        t = Fraction(threshold)
        decided = [threshold_rule(lo, hi, t) for lo, hi in zip(lower[:, 0], upper[:, 0], strict=True)]
        return np.array(decided, dtype=PREDICTION_DTYPE)
    if threshold is not None:
        raise ValueError(f"a network with {classes} outputs predicts by argmax: no threshold applies")
    index = np.arange(classes)
    strict = index[None, :] < index[:, None]  # [c, j]: j < c must be beaten strictly
    beats = np.where(strict[None], lower[:, :, None] > upper[:, None, :], lower[:, :, None] >= upper[:, None, :]).astype(bool)
    beats[:, index, index] = True
    wins = beats.all(axis=2)  # [B, K]: at most one per row
    return np.where(wins.any(axis=1), wins.argmax(axis=1), -1).astype(PREDICTION_DTYPE)

"""Monotonicity per feature, by sign analysis through the layers.

Every activation cardinal accepts is non-decreasing (`cardinal.activations`), so the sign of a
path from input i to a unit is the product of the signs of its weights, and a unit is
non-decreasing in input i when every path from i to it is positive (a weighted sum of
non-decreasing terms, then a non-decreasing activation), non-increasing when every path is
negative, and independent of i when there is no path (a zero weight is no path). Paths of both
signs leave the direction unknown (*mixed*), even where they would cancel: the analysis is sound,
not complete. Each unit carries two Boolean matrices over the inputs, `positive` (a positive path
exists) and `negative`, propagated layer by layer by Boolean products with the weights' signs.

A direction is one of `INCREASING` (+1), `DECREASING` (−1), `CONSTANT` (0) or `MIXED` (2), the
same codes as the independent checker's (`cardinal.checker`).

What the prediction is monotone in (`decision_directions`):
* K = 1: the directions of f; p(x) = [f(x) > t] moves with f.
* K = 2: the directions of the logit difference f_1 − f_0 (a path reaching f_0 counts with its
  sign flipped); p(x) = 1 iff f_1 − f_0 > 0 is exactly argmax with ties to class 0.
* K ≥ 3: none. Each output has its directions (`output_directions` [K, n]), but the argmax is
  monotone in a feature only through all the differences f_c − f_j at once, so no single
  direction per feature is reported and no monotone shortcut is used.

A network is *sign-monotone* when K ≤ 2 and no feature is mixed, *partially monotone* when K ≤ 2
and some, not all, features are mixed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

INCREASING, DECREASING, CONSTANT, MIXED = 1, -1, 0, 2
SYMBOLS = {INCREASING: "+", DECREASING: "-", CONSTANT: "0", MIXED: "mixed"}  # as counted in reports


class _Weighted(Protocol):
    weight: np.ndarray


def _paths(layers: Sequence[_Weighted]) -> tuple[np.ndarray, np.ndarray]:
    """(positive [K, n], negative [K, n]) bool: whether some path of that sign leads from input i
    to output k. float32 products of 0/1 matrices: a sum of non-negative terms is 0 only when
    every term is, so `> 0` is exact whatever the rounding. The first layer's paths are its
    weights' signs, so the matrices are [width, n] throughout: memory linear in n (never the
    n × n identity the first product would start from)."""
    first = layers[0].weight
    positive, negative = (first > 0).astype(np.float32), (first < 0).astype(np.float32)
    for layer in layers[1:]:
        up, down = (layer.weight > 0).astype(np.float32), (layer.weight < 0).astype(np.float32)
        positive, negative = (
            ((up @ positive + down @ negative) > 0).astype(np.float32),
            ((up @ negative + down @ positive) > 0).astype(np.float32),
        )
    return positive > 0, negative > 0


def _codes(positive: np.ndarray, negative: np.ndarray) -> np.ndarray:
    """Direction codes (int8, same shape) from the path signs."""
    codes = np.full(positive.shape, CONSTANT, dtype=np.int8)
    codes[positive & ~negative] = INCREASING
    codes[negative & ~positive] = DECREASING
    codes[positive & negative] = MIXED
    return codes


def output_directions(layers: Sequence[_Weighted]) -> np.ndarray:
    """[K, n] int8: the direction of every output f_k in every input."""
    return _codes(*_paths(layers))


def decision_directions(layers: Sequence[_Weighted]) -> np.ndarray | None:
    """[n] int8: the direction of the prediction's score in every input (f for K = 1, f_1 − f_0
    for K = 2; module docstring), or None for K ≥ 3."""
    positive, negative = _paths(layers)
    if positive.shape[0] == 1:
        return _codes(positive[0], negative[0])
    if positive.shape[0] == 2:
        return _codes(positive[1] | negative[0], negative[1] | positive[0])
    return None


CHARACTERS = {INCREASING: "+", DECREASING: "-", CONSTANT: "0", MIXED: "?"}


def counts(directions: np.ndarray) -> dict[str, int]:
    """How many features have each direction: {"+", "-", "0", "mixed"}."""
    return {symbol: int(np.sum(directions == code)) for code, symbol in SYMBOLS.items()}


def describe(directions: np.ndarray) -> str:
    """A compact summary, e.g. `3 +, 1 -, 0 0, 2 mixed`."""
    return ", ".join(f"{count} {symbol}" for symbol, count in counts(directions).items())


def as_string(directions: np.ndarray) -> str:
    """One character per feature: "+", "-", "0", or "?" for mixed, e.g. `++-0?`."""
    return "".join(CHARACTERS[int(code)] for code in directions)


def to_json(net_directions: np.ndarray | None, outputs: np.ndarray) -> dict[str, object]:
    """The directions of a network for output records (docs/formats.md): for K ≤ 2 the counts
    {"+", "-", "0", "mixed"} and "each" (`as_string`) of the prediction's directions
    (`decision_directions`); for K ≥ 3 (None) "outputs", one `as_string` per output of
    `output_directions` [K, n]."""
    if net_directions is None:
        return {"outputs": [as_string(row) for row in outputs]}
    return {**counts(net_directions), "each": as_string(net_directions)}

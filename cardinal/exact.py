"""Exact evaluation: every double is a dyadic rational `m · 2^e`, and so is every value a
piecewise-linear network computes from dyadic inputs. This module evaluates such networks exactly
with Python integers, and smooth networks (sigmoid, tanh, softplus) as rigorous enclosures.

Smooth activations are evaluated at `SMOOTH_PRECISION` bits with mpmath and each result is
widened outwards by `2^-SMOOTH_GUARD` (relative) plus the same absolute amount, far more than
mpmath's few-ulp error; linear layers on the enclosures are exact. The *stated margin* of a smooth
evaluation is the width of the final enclosure: a prediction is decided only when the threshold
lies outside it. Piecewise-linear networks give point enclosures (width 0), and so does a smooth
unit wherever its value is rational (sigmoid(0) = 1/2, tanh(0) = 0: `Activation.rational`, which
also says why these are the only such points), so a step fed by sigmoid(0) is decided exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

import mpmath
import numpy as np

from .activations import Activation
from .domain import Domain
from .network import Network
from .prediction import decide, threshold_rule

SMOOTH_PRECISION = 256
SMOOTH_GUARD = 240


@dataclass(frozen=True)
class Dyadic:
    """A batch of dyadic rationals `ints · 2^exp`: `ints` is an object array of Python ints."""

    ints: np.ndarray
    exp: int

    @classmethod
    def from_floats(cls, values: np.ndarray) -> Dyadic:
        """Exact conversion of a float64 array of any shape."""
        values = np.asarray(values, dtype=np.float64)
        mantissa, exponent = np.frexp(values)
        ints = (mantissa * 2.0**53).astype(np.int64)  # exact: |mantissa| < 1 has 53 bits
        exponent = exponent.astype(np.int64) - 53
        nonzero = ints != 0
        base = int(exponent[nonzero].min()) if nonzero.any() else 0
        shifted = ints.astype(object) * (2 ** (np.where(nonzero, exponent - base, 0)).astype(object))
        return cls(shifted, base)

    @classmethod
    def scalar(cls, value: float) -> Dyadic:
        return cls.from_floats(np.array(value))

    def at_exp(self, exp: int) -> np.ndarray:
        """The integers of this batch expressed at a lower exponent `exp ≤ self.exp`."""
        return self.ints * (2 ** (self.exp - exp)) if self.exp != exp else self.ints

    @classmethod
    def from_fractions(cls, values: np.ndarray | list[Fraction]) -> Dyadic:
        """Exact conversion of dyadic `Fraction`s (denominators powers of 2) of any shape."""
        values = np.asarray(values, dtype=object)
        shifts = [value.denominator.bit_length() - 1 for value in values.ravel()]
        if any(value.denominator != 1 << shift for value, shift in zip(values.ravel(), shifts, strict=True)):
            raise ValueError("not a dyadic rational")
        top = max(shifts, default=0)
        ints = np.empty(values.size, dtype=object)
        ints[:] = [value.numerator << (top - shift) for value, shift in zip(values.ravel(), shifts, strict=True)]
        return cls(ints.reshape(values.shape), -top)

    def fractions(self) -> np.ndarray:
        """The values as an object array of `Fraction`."""
        scale = Fraction(2) ** self.exp
        return np.vectorize(lambda i: Fraction(i) * scale, otypes=[object])(self.ints)

    def __getitem__(self, index: Any) -> Dyadic:
        return Dyadic(self.ints[index], self.exp)

    def __add__(self, other: Dyadic) -> Dyadic:
        exp, (x, y) = _aligned(self, other)
        return Dyadic(x + y, exp)

    def __sub__(self, other: Dyadic) -> Dyadic:
        return self + Dyadic(-other.ints, other.exp)

    def __mul__(self, other: Dyadic) -> Dyadic:
        """Elementwise, with numpy broadcasting."""
        return Dyadic(self.ints * other.ints, self.exp + other.exp)

    def __matmul__(self, other: Dyadic) -> Dyadic:
        return Dyadic(self.ints.dot(other.ints), self.exp + other.exp)

    def floor(self, exp: int) -> np.ndarray:
        """⌊value / 2^exp⌋ elementwise, as an object array of Python ints."""
        return self.ints >> (exp - self.exp) if exp >= self.exp else self.ints << (self.exp - exp)


def _aligned(*values: Dyadic) -> tuple[int, list[np.ndarray]]:
    exp = min(value.exp for value in values)
    return exp, [value.at_exp(exp) for value in values]


@dataclass(frozen=True)
class Enclosure:
    """An exact enclosure `lower ≤ f(x) ≤ upper` of a network output (equal for PWL networks)."""

    lower: Fraction
    upper: Fraction

    @property
    def width(self) -> Fraction:
        return self.upper - self.lower

    def predict(self, threshold: Fraction) -> int | None:
        """K = 1: 1 if f(x) > t for sure, 0 if f(x) ≤ t for sure, None if the enclosure straddles t
        (`cardinal.prediction.threshold_rule`)."""
        decided = threshold_rule(self.lower, self.upper, threshold)
        return None if decided < 0 else decided


@dataclass(frozen=True)
class Score:
    """f at one point y as greedy compares it: an exact enclosure of f(y), and `key`, y's exact
    first-layer pre-activation h1 [d1] (layer 2 on depends on y only through h1, so equal keys
    mean equal f, whatever the enclosures' widths); the key is empty for a point enclosure, whose
    value itself proves equalities."""

    enclosure: Enclosure
    key: tuple[Fraction, ...]

    @property
    def point(self) -> bool:
        return self.enclosure.lower == self.enclosure.upper


def exact_blocks(scores: Mapping[int, Score], ascending: bool) -> list[list[list[int]]]:
    """The exact order of Algorithm 1 on features with the given scores, as far as exact
    arithmetic decides it — never by midpoints.

    Two scores are *provably equal* when their enclosures are the same point, or their keys are
    equal; those form one class (its features sorted: ties go by lower index). Two classes are
    *ordered* when their enclosures are disjoint. Returns the blocks in order (ascending or
    descending scores), each a list of classes: a block of one class is decided; in a block of
    several, each class overlaps a neighbour and their order is undecided (listed by their
    enclosures' ends, a hint only). Every feature of a block precedes, in exact arithmetic,
    every feature of the blocks after it."""
    classes: dict[tuple[Any, ...], tuple[Enclosure, list[int]]] = {}
    for feature in sorted(scores):
        score = scores[feature]
        name = ("point", score.enclosure.lower) if score.point else ("key", score.key)
        classes.setdefault(name, (score.enclosure, []))[1].append(feature)

    def ends(enclosure: Enclosure) -> tuple[Fraction, Fraction]:  # (first, last) in the order's direction
        return (enclosure.lower, enclosure.upper) if ascending else (-enclosure.upper, -enclosure.lower)

    blocks: list[list[list[int]]] = []
    reach: Fraction | None = None  # the farthest end of the current block
    for enclosure, features in sorted(classes.values(), key=lambda item: (*ends(item[0]), item[1][0])):
        first, last = ends(enclosure)
        if reach is None or first > reach:
            blocks.append([])
            reach = last
        blocks[-1].append(features)
        reach = max(reach, last)
    return blocks


class ExactNetwork:
    """A network's weights in dyadic form, ready for exact batched forward passes."""

    def __init__(self, net: Network) -> None:
        self.net = net

    @cached_property
    def _layers(self) -> list[tuple[Dyadic, Dyadic, Dyadic, Dyadic, Activation]]:
        layers = []
        for layer in self.net.layers:
            positive = Dyadic.from_floats(np.maximum(layer.weight, 0.0))
            negative = Dyadic.from_floats(np.minimum(layer.weight, 0.0))
            layers.append(
                (Dyadic.from_floats(layer.weight), positive, negative, Dyadic.from_floats(layer.bias), layer.activation)
            )
        return layers

    def _propagate(
        self, low: Dyadic, high: Dyadic | None, depth: int | None = None
    ) -> tuple[list[tuple[Dyadic, Dyadic]], Dyadic, Dyadic | None]:
        """Interval forward pass from [low, high] (high None: a point) through the first `depth`
        layers (None: all). Returns the pre-activation enclosure of every layer passed and the
        enclosure of the last one's activations (high None when it is a point)."""
        pre_activations = []
        for weight, positive, negative, bias, activation in self._layers[:depth]:
            if high is None:
                low = _affine(low, weight, bias)
            else:
                low, high = (
                    _affine(low, positive, bias) + _matmul(high, negative),
                    _affine(high, positive, bias) + _matmul(low, negative),
                )
            pre_activations.append((low, low if high is None else high))
            if activation.is_piecewise_linear:
                low = _piecewise_linear(low, activation)
                high = None if high is None else _piecewise_linear(high, activation)
            else:
                low, high = _smooth(low, activation, outward=-1), _smooth(low if high is None else high, activation, outward=+1)
        return pre_activations, low, high

    def _enclosures(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The output enclosures of inputs X [B, n] as `Fraction` object arrays (lower, upper) [B, K]."""
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        _, low, high = self._propagate(Dyadic.from_floats(X), None)
        lows = low.fractions()
        return lows, lows if high is None else high.fractions()

    def outputs(self, X: np.ndarray) -> list[tuple[Enclosure, ...]]:
        """Enclosures of the K outputs for inputs X [B, n] (float64, read exactly) → B tuples of K
        enclosures (`outputs(X)[b][0]` is f(x_b) of a single-output network)."""
        lows, highs = self._enclosures(X)
        return [
            tuple(Enclosure(lo, hi) for lo, hi in zip(row_low, row_high, strict=True))
            for row_low, row_high in zip(lows, highs, strict=True)
        ]

    def scores(self, X: np.ndarray) -> list[Score]:
        """Scores (enclosure and first-layer key) of f for inputs X [B, n] → B scores (K = 1)."""
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        pre_activations, low, high = self._propagate(Dyadic.from_floats(X), None)
        lows = low.fractions()[:, 0]
        highs = lows if high is None else high.fractions()[:, 0]
        first = pre_activations[0][0]
        return [
            Score(Enclosure(lo, hi), () if lo == hi else tuple(first[row].fractions()))
            for row, (lo, hi) in enumerate(zip(lows, highs, strict=True))
        ]

    def layer_bounds(self, lower: np.ndarray, upper: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Exact interval bounds of every layer's pre-activation h over the box [lower, upper] [n]:
        one (low [width], high [width]) pair of `Fraction` object arrays per layer. Sound for
        every network (negative weights included); tight only as interval arithmetic is."""
        low = Dyadic.from_floats(np.asarray(lower, dtype=np.float64)[None, :])
        high = Dyadic.from_floats(np.asarray(upper, dtype=np.float64)[None, :])
        pre_activations, _, _ = self._propagate(low, high)
        return [(lo.fractions()[0], hi.fractions()[0]) for lo, hi in pre_activations]

    def output_range(self, lower: np.ndarray, upper: np.ndarray) -> Enclosure:
        """An exact enclosure of f over the whole box [lower, upper] [n] (a one-output network):
        every f(y) with y in the box lies in it. Interval arithmetic, so sound for every network
        but not tight (on a monotone network it is exactly [f(lower), f(upper)] up to the smooth
        units' margin)."""
        low = Dyadic.from_floats(np.asarray(lower, dtype=np.float64)[None, :])
        high = Dyadic.from_floats(np.asarray(upper, dtype=np.float64)[None, :])
        _, low, high = self._propagate(low, high)
        assert high is not None
        return Enclosure(low.fractions()[0, 0], high.fractions()[0, 0])

    def box_keeps(self, lower: np.ndarray, upper: np.ndarray, c: int, threshold: float | None) -> bool:
        """Whether exact interval arithmetic proves that every input of the box [lower, upper] [n]
        is predicted class c (`threshold`: t for K = 1, None for K ≥ 2). K = 1, or a last layer
        that is not the identity: the output enclosures decide (`cardinal.prediction.decide`).
        K ≥ 2 with an identity last layer: the margins f_c − f_j = (W_c − W_j)·z + b_c − b_j,
        in rationals over the enclosure of the last hidden activations z, must be > 0 for j < c
        and ≥ 0 for j > c — tighter than comparing the outputs' enclosures, which forget that
        every f_j moves with the same z. False proves nothing (the intervals may be too wide)."""
        low = Dyadic.from_floats(np.asarray(lower, dtype=np.float64)[None, :])
        high = Dyadic.from_floats(np.asarray(upper, dtype=np.float64)[None, :])
        last = self.net.layers[-1]
        if self.net.n_outputs == 1 or last.activation.name != "identity":
            _, out_low, out_high = self._propagate(low, high)
            assert out_high is not None
            return int(decide(out_low.fractions(), out_high.fractions(), threshold)[0]) == c
        _, z_low, z_high = self._propagate(low, high, depth=len(self.net.layers) - 1)
        assert z_high is not None
        z = list(zip(z_low.fractions()[0], z_high.fractions()[0], strict=True))
        weights = [[Fraction(w) for w in row] for row in last.weight.tolist()]
        biases = [Fraction(b) for b in last.bias.tolist()]
        for j in range(len(biases)):
            if j == c:
                continue
            margin = biases[c] - biases[j]
            for a, b, (z_lo, z_hi) in zip(weights[c], weights[j], z, strict=True):
                w = a - b
                margin += w * z_lo if w > 0 else w * z_hi
            if margin < 0 or (margin == 0 and j < c):
                return False
        return True

    def predictions(self, X: np.ndarray, threshold: float | None) -> np.ndarray:
        """Exact predictions [B] (`cardinal.prediction.decide`; `threshold` None for K ≥ 2): the
        class, or −1 where a smooth enclosure leaves it open."""
        return decide(*self._enclosures(X), threshold)


def _matmul(z: Dyadic, weight: Dyadic) -> Dyadic:
    """z [B, in] times weight [out, in] transposed → [B, out]."""
    return Dyadic(z.ints.dot(weight.ints.T), z.exp + weight.exp)


def _affine(z: Dyadic, weight: Dyadic, bias: Dyadic) -> Dyadic:
    return _matmul(z, weight) + bias[None, :]


def _piecewise_linear(h: Dyadic, activation: Activation) -> Dyadic:
    """σ(h) exactly, from the activation's pieces: ℓ_j applies from breakpoint c_j on."""
    breaks, pieces = activation.pieces()
    out = _piece(h, pieces[0])
    for at, piece in zip(breaks, pieces[1:], strict=True):
        exp, (ints, at_ints) = _aligned(h, Dyadic.from_fractions([at]))
        value = _piece(h, piece)
        exp, (new, old) = _aligned(value, out)
        out = Dyadic(np.where(ints >= at_ints, new, old), exp)
    return out


def _piece(h: Dyadic, piece: tuple[Fraction, Fraction]) -> Dyadic:
    """slope·h + offset for an exact dyadic piece."""
    slope, offset = piece
    if slope == 1 and offset == 0:
        return h
    value = Dyadic(np.full(h.ints.shape, 0, dtype=object), h.exp) if slope == 0 else h * Dyadic.from_fractions([slope])[0]
    return value if offset == 0 else value + Dyadic.from_fractions([offset])[0]


def _smooth(h: Dyadic, activation: Activation, outward: int) -> Dyadic:
    """σ(h) rounded outwards (down for outward=-1, up for +1), as dyadics; exact where σ(h) is a
    dyadic rational (`Activation.rational`: sigmoid(0) = 1/2, tanh(0) = 0)."""
    scale = Fraction(2) ** h.exp
    with mpmath.workprec(SMOOTH_PRECISION):
        guard = mpmath.ldexp(1, -SMOOTH_GUARD)
        mantissas = []
        for value in h.ints.ravel():
            exact = activation.rational(Fraction(value) * scale)
            if exact is not None and exact.denominator & (exact.denominator - 1) == 0:
                mantissas.append((exact.numerator, 1 - exact.denominator.bit_length()))
                continue
            y = activation.real(mpmath.ldexp(value, h.exp))
            mantissas.append(_man_exp(y + outward * (abs(y) * guard + guard)))
    base = min(exp for _, exp in mantissas)
    ints = np.array([man * 2 ** (exp - base) for man, exp in mantissas], dtype=object).reshape(h.ints.shape)
    return Dyadic(ints, base)


def _man_exp(y: mpmath.mpf) -> tuple[int, int]:
    man, exp = y.man_exp  # mpmath keeps the sign apart: man_exp is of |y|
    return (-int(man) if y < 0 else int(man)), int(exp)


def modified_inputs(x: np.ndarray, features: tuple[int, ...] | list[int], values: np.ndarray) -> np.ndarray:
    """Copy of x [n] with `features` set to values[features]."""
    y = np.array(x, dtype=np.float64)
    index = list(features)
    y[index] = np.asarray(values, dtype=np.float64)[index]
    return y


def check_monotone_explanation(
    exact: ExactNetwork, x: np.ndarray, features: tuple[int, ...] | list[int], kind: str, domain: Domain, threshold: float
) -> bool | None:
    """Exact validity of an explanation on a *sign-monotone* single-output network, via the
    monotone shortcut (the counterpoint at each feature's own end, `Network.directions`).

    CXp: p(x with S set to x') ≠ p(x). AXp: p(x' with S set to x) = p(x). Returns None when a
    smooth enclosure leaves the answer undecided.
    """
    prediction = exact.predictions(x[None, :], threshold)[0]
    if prediction < 0:
        return None
    counterpoint = domain.counterpoint(np.array([prediction]), exact.net.directions)[0]
    if kind == "contrastive":
        probe = modified_inputs(x, features, counterpoint)
    else:
        probe = modified_inputs(counterpoint, features, x)
    changed = exact.predictions(probe[None, :], threshold)[0]
    if changed < 0:
        return None
    return bool(changed != prediction) if kind == "contrastive" else bool(changed == prediction)

"""Pseudo-Boolean cuts for the lazy z3 strategy, from exact linear bounds on monotone networks.

Setting (the monotone shortcut): s ∈ {0,1}^n marks the features moved from `base` to `target`,
and g(s) = f(base + (target − base)⊙s). Every weight is ≥ 0 and every activation is
non-decreasing, so lines ℓ_lo(h) ≤ σ(h) ≤ ℓ_hi(h), each valid over its unit's pre-activation
bounds, compose into linear bounds of g: substituting them layer by layer from the output down
(back-substitution, as in CROWN) multiplies every line by a coefficient ≥ 0, which keeps its
direction. The result is a linear form a·s + c.

`tangent_cut(s0)`, for the goal g ≤ t: a lower bound A ≤ g on all of [0,1]^n whose lines are the
pieces of σ at the pre-activations of s0 wherever σ is convex on the unit's bounds (relu,
leaky_relu with slope ≤ 1, hardtanh with only its lower corner inside), so that A(s0) = g(s0) on
ReLU networks; a non-convex unit takes the constant σ(low). Every valid s has A(s) ≤ g(s) ≤ t:
Kelley's cutting plane for a convex g, and from an invalid s0 it excludes every subset of s0 at
once where the clause of the lazy loop excludes only those. The units' bounds come from the same
back-substitution with upper lines (an unstable unit takes the line through (low, σ(low)) just
steep enough to stay above σ up to `high`, a relu's chord).

Arithmetic is exact (`cardinal.exact.Dyadic`; chord slopes are rounded up to dyadics). A cut is
rounded to integer coefficients one-sidedly — floors for `≤`, ceilings for `>` — so that every s
that satisfies the exact inequality satisfies the integer one (`solvers.smooth` rounds its float
bounds into cuts the same way).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

import numpy as np

from cardinal.activations import Activation
from cardinal.exact import Dyadic
from cardinal.network import Network

_SLOPE_BITS = 40  # chord slopes are rounded up at this relative precision
_COEFFICIENT_BITS = 16  # the largest cut coefficient is below 2^this


@dataclass(frozen=True)
class Cut:
    """Σ coefficients[i]·s_i ≤ bound, over integers."""

    coefficients: tuple[int, ...]
    bound: int

    @property
    def trivial(self) -> bool:
        return sum(c for c in self.coefficients if c > 0) <= self.bound

    def within(self, k: int) -> Cut:
        """The cut plus λ·(Σ s − k) ≤ 0, implied by it for sets within k: Σ (c_i + λ) s_i ≤ b + λk
        with λ = −(the (k+1)-th most negative coefficient), the multiplier of the cardinality row in
        the relaxation min {c·s : Σ s ≤ k, 0 ≤ s ≤ 1}. Where few sets within k meet the cut, its
        coefficients and slack shrink to the differences that matter, which z3's pseudo-Boolean
        propagation can use (on the plain cut next to `AtMost(s, k)` it stalls for seconds); where
        none does, even its negative coefficients together fall short of the bound."""
        ordered = sorted(self.coefficients)
        multiplier = -ordered[k] if k < len(ordered) and ordered[k] < 0 else 0
        return Cut(tuple(c + multiplier for c in self.coefficients), self.bound + multiplier * k)


@dataclass(frozen=True)
class _Lines:
    """Lines of one layer's units over given pre-activation bounds [width].

    Lower lines are chosen per point: column j < P of the tables is piece j of σ, column P the
    constant σ(low); a unit may take the columns `first[u]..last[u]`, the piece holding its
    pre-activation (clipped), so stable units have first = last."""

    breaks: np.ndarray  # [P − 1] float breakpoints of σ
    lower_slopes: Dyadic  # [width, P + 1]
    lower_offsets: Dyadic  # [width, P + 1]
    first: np.ndarray  # [width] int
    last: np.ndarray  # [width] int
    upper_slopes: Dyadic  # [width]
    upper_offsets: Dyadic  # [width]
    midpoints: np.ndarray  # [width] float, (low + high) / 2

    @classmethod
    def make(cls, activation: Activation, low: np.ndarray, high: np.ndarray) -> _Lines:
        """`low`, `high` [width]: exact `Fraction` bounds of the layer's pre-activations."""
        breaks, pieces = activation.pieces()
        step = not activation.is_continuous
        offsets, first, last, upper = [], [], [], []
        for lo, hi in zip(low, high, strict=True):
            start, inside = activation.pieces_over(lo, hi)
            slopes = [a for a, _ in pieces[start : start + len(inside) + 1]]
            value_low = _value(pieces, breaks, lo)
            offsets.append([b for _, b in pieces] + [value_low])
            if not inside:
                first.append(start), last.append(start), upper.append(pieces[start])
                continue
            if not step and slopes == sorted(slopes):
                first.append(start), last.append(start + len(inside))
            else:
                first.append(len(pieces)), last.append(len(pieces))
            steepest = max((_value(pieces, breaks, h) - value_low) / (h - lo) for h in [*inside, hi])
            slope = _round_up(steepest)
            upper.append((slope, value_low - slope * lo))
        width = len(offsets)
        slope_row = [a for a, _ in pieces] + [Fraction(0)]
        return cls(
            breaks=np.array([float(c) for c in breaks]),
            lower_slopes=Dyadic.from_fractions(np.array([slope_row] * width, dtype=object).reshape(width, -1)),
            lower_offsets=Dyadic.from_fractions(np.array(offsets, dtype=object).reshape(width, -1)),
            first=np.array(first, dtype=np.int64),
            last=np.array(last, dtype=np.int64),
            upper_slopes=Dyadic.from_fractions(np.array([a for a, _ in upper], dtype=object)),
            upper_offsets=Dyadic.from_fractions(np.array([b for _, b in upper], dtype=object)),
            midpoints=np.array([float((lo + hi) / 2) for lo, hi in zip(low, high, strict=True)]),
        )

    def lower(self, h: np.ndarray) -> tuple[Dyadic, Dyadic]:
        """Lower lines (slopes [width], offsets [width]) touching σ at pre-activations h [width]."""
        column = np.clip(np.searchsorted(self.breaks, h, side="right"), self.first, self.last)
        rows = np.arange(len(column))
        return self.lower_slopes[rows, column], self.lower_offsets[rows, column]


def _value(pieces: list[tuple[Fraction, Fraction]], breaks: list[Fraction], h: Fraction) -> Fraction:
    """σ(h) exactly (right-continuous at a step)."""
    slope, offset = pieces[sum(c <= h for c in breaks)]
    return slope * h + offset


def _round_up(value: Fraction) -> Fraction:
    """The least multiple of 2^(⌊log2 value⌋ − _SLOPE_BITS) that is ≥ value ≥ 0 (a dyadic)."""
    if value <= 0:
        return Fraction(0)
    unit = Fraction(2) ** (math.floor(math.log2(value)) - _SLOPE_BITS)
    return math.ceil(value / unit) * unit


class LinearBounds:
    """Exact linear bounds of g(s) = f(base + (target − base)⊙s) for a monotone piecewise-linear
    network, and the cuts they give (module docstring). `base`, `target` [n] float64."""

    def __init__(self, net: Network, base: np.ndarray, target: np.ndarray, threshold: float) -> None:
        self.n = net.n_inputs
        self.threshold = Dyadic.scalar(threshold)
        self.layers = [
            (Dyadic.from_floats(layer.weight), Dyadic.from_floats(layer.bias), layer.activation) for layer in net.layers
        ]
        self.float_layers = []  # (weight [out, in], bias [out], piece slopes [P], piece offsets [P]) as floats
        for layer in net.layers:
            pieces = layer.activation.pieces()[1]
            slopes, offsets = (np.array([float(piece[i]) for piece in pieces]) for i in (0, 1))
            self.float_layers.append((layer.weight, layer.bias, slopes, offsets))
        weight, bias, _ = self.layers[0]
        start = Dyadic.from_floats(base)
        move = Dyadic.from_floats(target) - start
        self.first = weight * move[None, :], weight @ start + bias  # h_0 = coefficients [w0, n]·s + constant [w0]
        self.base, self.move = np.asarray(base, dtype=np.float64), np.asarray(target, dtype=np.float64) - base

    @cached_property
    def region(self) -> list[_Lines]:
        """Every layer's lines over all of [0,1]^n (what `tangent_form` needs)."""
        return self._lines(self.n)

    def tangent_form(self, chosen: np.ndarray) -> tuple[Dyadic, Dyadic]:
        """chosen [n] bool (s0) → (a [n], c): g(s) ≥ a·s + c on [0,1]^n, tight at s0 where σ is convex."""
        z = self.base + self.move * chosen
        lines = []
        for (weight, bias, slopes, offsets), layer in zip(self.float_layers, self.region, strict=True):
            h = weight @ z + bias  # floats: they only choose the pieces
            piece = np.searchsorted(layer.breaks, h, side="right")
            z = slopes[piece] * h + offsets[piece]
            lines.append(layer.lower(h))
        return self._output_form(lines)

    def tangent_cut(self, chosen: np.ndarray) -> Cut:
        """The cut a·s + c ≤ t (`tangent_form` at chosen [n] bool) that every s with g(s) ≤ t satisfies."""
        coefficients, constant = self.tangent_form(chosen)
        return _integer_cut(coefficients, self.threshold - constant, self.n)

    def _lines(self, k: int) -> list[_Lines]:
        """Every layer's lines over its bounds on {s ∈ [0,1]^n : Σ s ≤ k}."""
        lines: list[_Lines] = []
        for depth, (weight, bias, activation) in enumerate(self.layers):
            if depth == 0:
                upper = lower = self.first
            else:
                upper = self._substitute(weight, bias, [(layer.upper_slopes, layer.upper_offsets) for layer in lines])
                lower = self._substitute(weight, bias, [layer.lower(layer.midpoints) for layer in lines])
            high = upper[1] + Dyadic(_extreme_sums(upper[0].ints, k, largest=True), upper[0].exp)
            low = lower[1] + Dyadic(_extreme_sums(lower[0].ints, k, largest=False), lower[0].exp)
            lines.append(_Lines.make(activation, low.fractions(), high.fractions()))
        return lines

    def _output_form(self, lines: list[tuple[Dyadic, Dyadic]]) -> tuple[Dyadic, Dyadic]:
        """g ≥ (or ≤) a·s + c with the given lower (or upper) lines of every layer, the output's
        included: (a [n], c)."""
        identity = Dyadic(np.array([[1]], dtype=object), 0)
        coefficients, constant = self._substitute(identity, Dyadic(np.array([0], dtype=object), 0), lines)
        return coefficients[0], constant[0]

    def _substitute(self, coefficients: Dyadic, constant: Dyadic, lines: list[tuple[Dyadic, Dyadic]]) -> tuple[Dyadic, Dyadic]:
        """coefficients [r, w] · z + constant [r], z the activations of layer len(lines) − 1, with
        z ≥ or ≤ slope·h + offset per layer (lines[j]: slopes [w_j], offsets [w_j]) down to s:
        (coefficients [r, n], constant [r])."""
        for depth in range(len(lines) - 1, -1, -1):
            slopes, offsets = lines[depth]
            constant = constant + coefficients @ offsets
            coefficients = coefficients * slopes[None, :]
            weight, bias = self.first if depth == 0 else self.layers[depth][:2]
            constant = constant + coefficients @ bias
            coefficients = coefficients @ weight
        return coefficients, constant


def _extreme_sums(coefficients: np.ndarray, k: int, largest: bool) -> np.ndarray:
    """coefficients [r, n] object ints → [r]: the max (largest) or min of the row over s ∈ {0,1}^n with Σ s ≤ k."""
    signed = np.where(coefficients > 0, coefficients, 0) if largest else np.where(coefficients < 0, coefficients, 0)
    ordered = np.sort(signed, axis=1)
    picked = ordered[:, ::-1][:, :k] if largest else ordered[:, :k]
    return picked.sum(axis=1) if k else np.zeros(len(coefficients), dtype=object)


def _integer_cut(coefficients: Dyadic, bound: Dyadic, n: int, strict: bool = False) -> Cut:
    """Σ a_i s_i ≤ bound (< bound when `strict`), a [n] exact, as an integer cut that it implies."""
    largest = max((abs(int(c)) for c in coefficients.ints), default=0)
    bits = min(_COEFFICIENT_BITS, 30 - n.bit_length())
    exp = coefficients.exp + largest.bit_length() - bits
    if strict:  # Σ a s < R ⇒ Σ ⌊a⌋ s < R ⇒ Σ ⌊a⌋ s ≤ ⌈R⌉ − 1
        limit = -int(Dyadic(-bound.ints, bound.exp).floor(exp)) - 1
    else:
        limit = int(bound.floor(exp))
    integer = tuple(int(c) for c in coefficients.floor(exp))
    low, high = sum(c for c in integer if c < 0), sum(c for c in integer if c > 0)
    return Cut(integer, min(max(limit, low - 1), high))  # clamped to the range of the left side

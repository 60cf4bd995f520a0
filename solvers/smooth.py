"""Rigorous float64 bounds of a monotone network's output over the sets within a size bound, for
networks with smooth units (sigmoid, tanh, softplus, and mixes with continuous piecewise-linear
units): the cuts and widened clauses of the lazy z3 loop where `solvers.cuts` and
`solvers.subsets` (piecewise linear, ReLU) do not reach.

Setting (the monotone shortcut): s ∈ {0,1}^n moves features from `base` to `target`, g(s) =
f(base + (target − base)⊙s). Every move has one sign, so every pre-activation h_j(s) is monotone
in s in that direction: *upward* (target ≥ base) the smallest value of h_j is h_j(0), and the
question that needs a bound is "can a set within k reach g > t?"; *downward* (target ≤ base) it
is "can one reach g ≤ t?". So only one side of each unit needs a line:

- upward, an upper line σ(h) ≤ m·h + β over [h_j(0), hi_j], hi_j being the maximum of the upper
  form of h_j over {s ⊆ allowed, Σ s ≤ k} (back-substitution as in `solvers.subsets`);
- downward, a lower line σ(h) ≥ m·h + β over [lo_j, h_j(0)], lo_j the minimum of the lower form.

Slopes m ≥ 0 keep every substitution in its direction (weights ≥ 0). A slope is chosen in floats
by the usual relaxations (chords where σ is convex and the line is an upper one, tangents where
it is concave, the tangent through an end point across the inflection of sigmoid and tanh); it
needs no rigour, because the offset is then made rigorous: β ≥ max (upward) or ≤ min (downward)
of φ(h) = σ(h) − m·h over the interval. φ is extreme at the interval's ends, at a breakpoint of a
piecewise-linear σ, or inside a part where σ is concave (for a max) or convex (for a min); on
such a part [a, b] any point c gives max φ ≤ φ(c) + |σ'(c) − m|·max(b − c, c − a) (the tangent of
a concave function lies above it), and c is taken near the root of σ'(c) = m so that the term is
tiny. Sigmoid and tanh are convex below 0 and concave above; softplus is convex.

Floats are made rigorous as in `solvers.subsets` (midpoint-radius arithmetic for the forms).
Values of σ come from the activation's torch op (trusted to 1e-15 relative by `cardinal.activations`),
those of σ' from numpy's exp and cosh, correct to a few ulps; both are taken within a relative
`_REL` = 2^-40 (thousands of ulps) plus 2^-1000, and every offset is then
moved outwards by 2^-44 of the magnitudes that entered it (far more than its own rounding). h_j(0)
comes from an interval forward pass at `base` with the same error bounds.
"""

from __future__ import annotations

import numpy as np
import torch

from cardinal.activations import Activation
from cardinal.exact import Dyadic
from cardinal.network import Network
from cardinal.rounding import SAFETY, TINY, UNIT_ROUNDOFF, gamma

from .cuts import Cut, _integer_cut
from .subsets import SetForms, _Form, _outwards

SUPPORTED = ("identity", "relu", "leaky_relu", "hardtanh", "sigmoid", "tanh", "softplus")
_REL = 2.0**-40  # relative error allowed to each float value of σ or σ'
_SLACK = 2.0**-44  # an offset moves outwards by this much of the magnitudes that entered it
_GRID_FRACTIONS = np.linspace(0.0, 1.0, 17)[1:]  # for `_tangent_through`


def _sigma(activation: Activation, h: np.ndarray) -> np.ndarray:
    """σ(h) in float64 (any shape), by the activation's own torch op."""
    return activation.apply_(torch.tensor(h, dtype=torch.float64)).numpy()


def _derivative(activation: Activation, h: np.ndarray) -> np.ndarray:
    """σ'(h) in float64 for the smooth activations (few-ulp formulas: no cancellation)."""
    with np.errstate(over="ignore", under="ignore"):
        if activation.name == "sigmoid":
            return _sigma(activation, h) * _sigma(activation, -h)
        if activation.name == "tanh":
            return 1.0 / np.cosh(h) ** 2
        return 1.0 / (1.0 + np.exp(-h))  # softplus' = sigmoid


def _enclose(activation: Activation, h: np.ndarray, outward: int) -> np.ndarray:
    """σ(h) rounded outwards: a float below (outward −1) or above (+1) the exact σ(h)."""
    value = _sigma(activation, h)
    return value + outward * (np.abs(value) * _REL + TINY)


def _root(activation: Activation, m: np.ndarray, positive: bool) -> np.ndarray:
    """An approximation of the h with σ'(h) = m (the positive or negative one for sigmoid and
    tanh; clipped to ±inf or 0 where none exists). Only tightness depends on it."""
    with np.errstate(all="ignore"):
        if activation.name == "softplus":
            return np.log(m) - np.log1p(-m)  # logit: −inf at m ≤ 0, +inf at m ≥ 1, nan beyond
        if activation.name == "sigmoid":
            p = (1.0 + np.sqrt(np.clip(1.0 - 4.0 * m, 0.0, 1.0))) / 2.0
            root = np.log(p) - np.log1p(-p)
        else:
            root = np.arctanh(np.sqrt(np.clip(1.0 - m, 0.0, 1.0)))
    root = np.where(m <= 0, np.inf, root)
    return root if positive else -root


class _Phi:
    """φ(h) = σ(h) − m·h for one line's slopes m [..]: rigorous bounds at points and over parts."""

    def __init__(self, activation: Activation, slopes: np.ndarray, upper: bool) -> None:
        self.activation, self.m, self.upper = activation, slopes, upper
        self.sign = 1 if upper else -1

    def at(self, h: np.ndarray) -> np.ndarray:
        """A bound on φ(h) on the side of the line (above for an upper line, below for a lower)."""
        sigma = _enclose(self.activation, h, self.sign)
        moved = self.m * h
        return sigma - moved + self.sign * (_SLACK * (np.abs(sigma) + np.abs(moved)) + TINY)

    def across(self, low: np.ndarray, high: np.ndarray, centre: np.ndarray) -> np.ndarray:
        """A bound on φ over [low, high], where σ is concave (upper) or convex (lower) there:
        the tangent of φ at c = clip(centre) bounds φ on that side."""
        c = np.clip(centre, low, high)
        slope = _derivative(self.activation, c) - self.m
        reach = np.maximum(high - c, c - low)
        spread = (np.abs(slope) + _derivative(self.activation, c) * _REL + TINY) * reach
        return self.at(c) + self.sign * (spread + _SLACK * spread + TINY)


def _lines(activation: Activation, low: np.ndarray, high: np.ndarray, upper: bool) -> tuple[np.ndarray, np.ndarray]:
    """Lines m·h + β [same shape as low] with σ(h) ≤ (upper) or ≥ (lower) m·h + β for every h in
    [low, high] exactly, m ≥ 0 (module docstring)."""
    name = activation.name
    if name == "identity":
        return np.ones_like(low), np.zeros_like(low)
    high = np.maximum(high, low)
    slopes = np.nan_to_num(_slopes(activation, low, high, upper), nan=0.0, posinf=0.0, neginf=0.0).clip(0.0, None)
    phi = _Phi(activation, slopes, upper)
    extreme = np.maximum if upper else np.minimum
    offsets = extreme(phi.at(low), phi.at(high))
    if not activation.is_piecewise_linear and name != "softplus":  # sigmoid, tanh: convex < 0 < concave
        curved = (high > 0) if upper else (low < 0)  # the part where the line needs the tangent bound
        part_low, part_high = (np.maximum(low, 0.0), high) if upper else (low, np.minimum(high, 0.0))
        inside = phi.across(part_low, part_high, _root(activation, slopes, positive=upper))
        offsets = np.where(curved, extreme(offsets, inside), offsets)
        offsets = extreme(offsets, np.where((low < 0) & (high > 0), phi.at(np.zeros_like(low)), offsets))
    elif name == "softplus" and not upper:  # convex: the minimum of φ may lie inside
        offsets = extreme(offsets, phi.across(low, high, _root(activation, slopes, positive=True)))
    elif activation.is_piecewise_linear:
        breaks, _ = activation.pieces()
        for point in (float(c) for c in breaks):
            offsets = np.where((low < point) & (point < high), extreme(offsets, phi.at(np.full_like(low, point))), offsets)
    return slopes, offsets


def _slopes(activation: Activation, low: np.ndarray, high: np.ndarray, upper: bool) -> np.ndarray:
    """Heuristic slopes (floats, any accuracy): upper lines take chords where σ is convex and
    tangents where concave, lower lines the reverse; across the inflection of sigmoid and tanh,
    the line through the outer end point tangent to σ beyond the inflection."""
    width = high - low
    with np.errstate(all="ignore"):
        chord = np.where(width > 0, (_sigma(activation, high) - _sigma(activation, low)) / width, 0.0)
        if activation.is_piecewise_linear:
            if upper:
                return chord
            middle = (low + high) / 2  # the slope of the piece at the middle (CROWN's adaptive relu line)
            step = np.maximum(np.abs(middle) * 2.0**-30, 2.0**-60)
            return (_sigma(activation, middle + step) - _sigma(activation, middle - step)) / (2 * step)
        tangent = _derivative(activation, (low + high) / 2)
        if activation.name == "softplus":
            return chord if upper else tangent
        if not upper:  # sigmoid and tanh are odd about (0, σ(0)): a lower line on [lo, hi] mirrors an upper one on [−hi, −lo]
            return _slopes(activation, -high, -low, upper=True)
        across = _tangent_through(activation, low, high)
        return np.where(high <= 0, chord, np.where(low >= 0, tangent, across))


def _tangent_through(activation: Activation, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """For low < 0 < high (sigmoid, tanh): about the largest secant slope from (low, σ(low)) to a
    point of (low, high], the best upper line through that end point: the largest over
    `_GRID` points of [0, high] (the secant is flat near its maximum, so a coarse grid is close)."""
    points = np.maximum(high, 0.0)[..., None] * _GRID_FRACTIONS
    with np.errstate(all="ignore"):
        secants = (_sigma(activation, points) - _sigma(activation, low)[..., None]) / (points - low[..., None])
    return np.nan_to_num(secants, nan=0.0).max(axis=-1)


def _exactly(form: _Form, sizes: np.ndarray, allowed: np.ndarray, largest: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """[B, r] max (largest) or min of each row of the form over the s ⊆ allowed [B, n] with
    Σ s = sizes [B] exactly, as (value, radius or None): the sizes[b] largest (smallest) allowed
    coefficients plus the constant; every coefficient's radius counts."""
    masked = np.where(allowed[:, None, :], form.coefficients, -np.inf if largest else np.inf)
    ordered = np.sort(masked, axis=-1)
    if largest:
        ordered = ordered[..., ::-1]
    finite = np.where(np.isfinite(ordered), ordered, 0.0)  # entries past |allowed| are never picked
    index = np.broadcast_to(sizes[:, None, None], (*ordered.shape[:-1], 1))
    picked = np.take_along_axis(_prefix_sums(finite), index, axis=-1)[..., 0]
    value = form.constant + picked
    if form.coefficients_radius is None:
        return value, None
    magnitude = np.take_along_axis(_prefix_sums(np.abs(finite)), index, axis=-1)[..., 0] + np.abs(form.constant)
    radius = form.constant_radius + form.coefficients_radius.sum(axis=-1) + gamma(int(sizes.max()) + 1) * magnitude
    return value, _outwards(radius)


def _prefix_sums(values: np.ndarray) -> np.ndarray:
    """[..., m] → [..., m + 1]: the sums of the first 0, 1, …, m entries."""
    return np.concatenate([np.zeros((*values.shape[:-1], 1)), np.cumsum(values, axis=-1)], axis=-1)


class SmoothBounds(SetForms):
    """g(s) on a monotone network whose activations are all in `SUPPORTED`, with `base`, `target`
    [n] float64 such that every move target − base has one sign (else `supported` is False);
    valid means g > threshold upward, g ≤ threshold downward.

    Validity is upward closed, so "no valid s ⊆ C with Σ s ≤ k" holds as soon as no s ⊆ C with
    Σ s = min(k, |C|) is valid: the bounds range over those sets only. Every unit's pre-activation
    then lies between the minimum of a lower form and the maximum of an upper form over them, a
    far narrower range than over all sets within k when k is large. And h_j is monotone in s, so
    it lies between its rigorous values at the smallest and the largest set that holds them all
    (∅, or a node's fixed features, and C): an interval bound that is exact at its ends, and the
    bound of the output that closes a node of `solvers.branch` whose C is itself invalid."""

    def __init__(self, net: Network, base: np.ndarray, target: np.ndarray, threshold: float) -> None:
        super().__init__(net, base, target, threshold)
        self.activations = [layer.activation for layer in net.layers]
        move = target - base
        self.upward = bool((move >= 0).all())
        self.supported = (
            net.is_monotone
            and all(activation.name in SUPPORTED for activation in self.activations)
            and (self.upward or bool((move <= 0).all()))
        )
        self.anchor = self._interval_pass(np.asarray(base, dtype=np.float64)[None, :])

    def _interval_pass(self, points: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Rigorous (low [B, w], high [B, w]) of every layer's pre-activation at `points` [B, n]."""
        low = high = points
        bounds = []
        for (weight, bias), activation in zip(self.layers, self.activations, strict=True):
            error = gamma(weight.shape[1] + 1)
            h_low = low @ weight.T + bias - (error * (np.abs(low) @ weight.T + np.abs(bias)) * SAFETY + TINY)
            h_high = high @ weight.T + bias + (error * (np.abs(high) @ weight.T + np.abs(bias)) * SAFETY + TINY)
            bounds.append((h_low, h_high))
            low, high = _enclose(activation, h_low, -1), _enclose(activation, h_high, +1)
        return bounds

    def _output_layer(
        self, k: int | np.ndarray, allowed: np.ndarray, rigorous: bool, fixed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, _Form, _Form]:
        """The output layer's pre-activation over the s ⊆ allowed [B, n] with Σ s = min(k, |allowed|)
        (with `fixed` [B, n] and k [B]: over the sets `fixed ∪ s`, s ⊆ allowed \\ fixed, Σ s =
        min(k, |allowed \\ fixed|)): bounds low [B, 1] ≤ h ≤ high [B, 1] (rigorous only if
        `rigorous`), and its lower and upper forms."""
        free = allowed if fixed is None else allowed & ~fixed
        sizes = np.minimum(k, free.sum(axis=1))
        first = self.first_form(allowed, rigorous, fixed)
        # h is monotone in s and every set lies between `fixed` (or ∅) and `allowed`: h there bounds h on the sets
        anchors = self.anchor if fixed is None else self._interval_pass(np.where(fixed, self.target, self.base))
        ceilings = self._interval_pass(np.where(allowed, self.target, self.base))
        lower_lines: list[tuple[np.ndarray, np.ndarray]] = []
        upper_lines: list[tuple[np.ndarray, np.ndarray]] = []
        for depth, activation in enumerate(self.activations):
            lower = first if depth == 0 else self.substitute(depth, lower_lines, first)
            upper = first if depth == 0 else self.substitute(depth, upper_lines, first)
            low, low_radius = _exactly(lower, sizes, free, largest=False)
            high, high_radius = _exactly(upper, sizes, free, largest=True)
            if rigorous:
                low, high = low - low_radius, high + high_radius
            (anchor_low, anchor_high), (ceiling_low, ceiling_high) = anchors[depth], ceilings[depth]
            if self.upward:
                low, high = np.maximum(low, anchor_low), np.minimum(high, ceiling_high)
            else:
                low, high = np.maximum(low, ceiling_low), np.minimum(high, anchor_high)
            high = np.maximum(high, low)
            if depth == len(self.activations) - 1:
                return low, high, lower, upper
            lower_lines.append(_lines(activation, low, high, upper=False))
            upper_lines.append(_lines(activation, low, high, upper=True))
        raise AssertionError("unreachable: the loop returns at the output layer")

    def bound_and_form(
        self,
        k: np.ndarray,
        allowed: np.ndarray,
        fixed: np.ndarray,
        minimum: bool,
        reference: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The node bound of `solvers.branch`: over the sets `fixed ∪ s`, s ⊆ allowed \\ fixed, Σ s ≤ k
        (fixed, allowed [B, n] bool, k [B]), (ĝ [B], r [B], shares [B, n]) with ĝ + r ≥ g(s) upward,
        ĝ − r ≤ g(s) downward (`minimum`, which must be the direction's side; r is 0: ĝ is rigorous
        itself), and the coefficients of the output's upper (lower) form over s. Upward closure
        makes the sets with Σ s = min(k, |allowed \\ fixed|) enough. `reference` is not used."""
        if minimum == self.upward:
            raise ValueError("the bound's side is fixed by the direction of the moves")
        low, high, lower, upper = self._output_layer(k, allowed, rigorous=True, fixed=fixed)
        output = self.activations[-1]
        value = _enclose(output, low, -1)[:, 0] if minimum else _enclose(output, high, +1)[:, 0]
        form = lower if minimum else upper
        return value, np.zeros_like(value), np.broadcast_to(form.coefficients[:, 0, :], allowed.shape)

    def extreme_output(self, k: int, allowed: np.ndarray, rigorous: bool = True) -> np.ndarray:
        """allowed [B, n] bool → [B]: upward ≥ g(s), downward ≤ g(s), for every s ⊆ allowed with
        Σ s = min(k, |allowed|) (not rigorous unless `rigorous`: a screen)."""
        low, high, _, _ = self._output_layer(k, allowed, rigorous)
        output = self.activations[-1]
        if rigorous:
            return _enclose(output, high, +1)[:, 0] if self.upward else _enclose(output, low, -1)[:, 0]
        return _sigma(output, high if self.upward else low)[:, 0]

    def refutes(self, k: int, allowed: np.ndarray) -> np.ndarray:
        """allowed [B, n] bool → [B] bool, True only where no s ⊆ allowed with Σ s ≤ k is valid."""
        value = self.extreme_output(k, allowed)
        return value <= self.threshold if self.upward else value > self.threshold

    def likely_refutes(self, k: int, allowed: np.ndarray) -> np.ndarray:
        """The same test without error bounds: a screen to be confirmed by `refutes`."""
        value = self.extreme_output(k, allowed, rigorous=False)
        return value <= self.threshold if self.upward else value > self.threshold

    def size_cut(self, k: int) -> Cut:
        """A cut that every valid s with Σ s = k exactly satisfies (1 ≤ k ≤ n): upward a·s + c > t
        from an upper form a·s + c ≥ g(s), downward a·s + c ≤ t from a lower form ≤ g(s)."""
        n = self.move.shape[0]
        low, high, lower, upper = self._output_layer(k, np.ones((1, n), dtype=bool), rigorous=True)
        form = upper if self.upward else lower
        slopes, offsets = _lines(self.activations[-1], low, high, upper=self.upward)
        slope, offset = float(slopes[0, 0]), float(offsets[0, 0])  # σ_L(h) vs slope·h + offset, slope ≥ 0
        coefficients = form.coefficients[0, 0] * slope
        coefficients_radius = _outwards(form.coefficients_radius[0, 0] * slope + UNIT_ROUNDOFF * np.abs(coefficients))
        scaled = float(np.ravel(form.constant)[0]) * slope
        constant = scaled + offset
        rounding = UNIT_ROUNDOFF * (abs(scaled) + abs(constant))
        constant_radius = _outwards(float(np.ravel(form.constant_radius)[0]) * slope + rounding)
        side = 1.0 if self.upward else -1.0
        with np.errstate(over="ignore", invalid="ignore"):
            a = np.nextafter(coefficients + side * coefficients_radius, side * np.inf)
            c = float(np.nextafter(constant + side * constant_radius, side * np.inf))
        if not (np.isfinite(a).all() and np.isfinite(c)):
            return Cut((0,) * n, 0)  # no usable bound: a trivial cut
        t = Dyadic.scalar(self.threshold)
        if self.upward:  # a·s + c > t  ⇔  Σ (−a) s < c − t
            return _integer_cut(Dyadic.from_floats(-a), Dyadic.scalar(c) - t, n, strict=True)
        return _integer_cut(Dyadic.from_floats(a), t - Dyadic.scalar(c), n)

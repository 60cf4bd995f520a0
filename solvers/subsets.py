"""Rigorous float64 bounds of a monotone ReLU network's output over the sets of a node of the
branch and bound (`solvers.branch`): the sets `fixed ∪ s`, s ⊆ allowed \\ fixed, Σ s ≤ k.

`SubsetBounds.bound_and_form` bounds g over them from above (back-substitution as in CROWN,
chords of the unstable units, every layer's bounds maximised over the sets by their k largest
coefficients, the moves outside `allowed` set to zero and the fixed features moved into the
first layer's constant, which makes every layer's bounds tighter), or from below (lower lines
z ≥ α·h tangent at a reference point). It runs for every node, so it runs in float64, not in
exact arithmetic, and carries a rigorous error bound instead.

Error bound (midpoint-radius arithmetic). Every computed array q̂ comes with a radius r ≥ 0 such
that the exact value q of the same formula with the same inputs lies in [q̂ − r, q̂ + r]. With
u = 2^-53 and γ_m = m·u/(1 − m·u): a product or sum of m terms, rounded in any order (FMA
included), is within γ_m·Σ|terms| of the exact one; so a matrix product of (Â ± r_A)(B̂ ± r_B)
gets the radius r_A·|B̂| + |Â|·r_B + r_A·r_B + γ_{m+1}·|Â|·|B̂|, and a sum a + b the radius
r_a + r_b + u·|a + b|. Radii are computed in float64 too and then scaled by 1 + 2^-20 and raised
by 2^-300 (`_FLOOR`), far more than the rounding and underflow of their own computation — and
high enough that products of radii and weights never fall into the subnormal range, where
float64 arithmetic is many times slower. The lines of the
unstable units are doubles chosen outwards from the rigorous bounds: a chord slope
fl(hi / (hi − lo))·(1 + 2^-50) ≥ hi / (hi − lo) exactly, and its offset −slope·lo rounded up the
same way, so each line is a valid upper line in exact arithmetic. The final upper bound ĝ + r
is then ≥ the exact bound of these lines, itself ≥ every g(s) in the set.

Magnitudes near the double range overflow to an infinite or NaN bound, silently (`_quiet`): such a
bound closes no node (`solvers.branch`), and the sets are judged exactly.

Networks: all weights ≥ 0 (`Network.is_monotone`), hidden layers relu, output identity
(`supported`); `solvers.smooth` bounds the other monotone ones. Sign-monotone networks with
negative weights get no node bounds: the branch and bound decides them by its exact probes.
`SetForms` (the forms over s with their radii) serves both.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from cardinal.network import Network
from cardinal.rounding import SAFETY, UNIT_ROUNDOFF, gamma

_SLOPE_UP = 1.0 + 2.0**-50
_FLOOR = 2.0**-300  # every radius is raised by this (module docstring); ≥ `cardinal.rounding.TINY`: still rigorous


def _quiet(method: Callable[..., T]) -> Callable[..., T]:
    """`method` with float overflow silent: it gives inf or NaN bounds (module docstring)."""

    @functools.wraps(method)
    def quiet(*args: Any, **kwargs: Any) -> T:
        with np.errstate(over="ignore", invalid="ignore"):
            return method(*args, **kwargs)

    return quiet


T = TypeVar("T")
Radius = np.ndarray | None  # None: not tracked (a screening estimate, not a bound)


class _Form:
    """coefficients [B, r, w] and constant [B, r], each with its radius (or None): B linear forms
    of r rows over z or s (B, the batch, may be broadcast from 1)."""

    def __init__(self, coefficients: np.ndarray, coefficients_radius: Radius, constant: np.ndarray, constant_radius: Radius):
        self.coefficients, self.coefficients_radius = coefficients, coefficients_radius
        self.constant, self.constant_radius = constant, constant_radius

    @_quiet
    def extreme(self, k: int | np.ndarray, largest: bool) -> tuple[np.ndarray, Radius]:
        """[B, r] max (largest) or min of each row over s ∈ {0,1}^n with Σ s ≤ k, as (value,
        radius): the k largest positive (or most negative) coefficients plus the constant; every
        coefficient's radius counts, whether picked or not. `k` is one bound or one per form [B]."""
        signed = np.maximum(self.coefficients, 0.0) if largest else np.minimum(self.coefficients, 0.0)
        n = signed.shape[-1]
        if isinstance(k, np.ndarray):  # a bound per form: the top max(k) sorted, masked by rank
            most = min(int(k.max(initial=0)), n)
            if largest:
                top = np.partition(signed, n - most, axis=-1)[..., n - most :] if 0 < most < n else signed[..., n - most :]
                ordered = -np.sort(-top, axis=-1)
            else:
                top = np.partition(signed, most - 1, axis=-1)[..., :most] if 0 < most < n else signed[..., :most]
                ordered = np.sort(top, axis=-1)
            picked = ordered * (np.arange(most) < k[:, None, None])
            k = most
        elif k >= n or k == 0:
            picked = signed[..., : n if k else 0]
        elif largest:
            picked = np.partition(signed, n - k, axis=-1)[..., n - k :]
        else:
            picked = np.partition(signed, k - 1, axis=-1)[..., :k]
        value = self.constant + picked.sum(axis=-1)
        if self.coefficients_radius is None:
            return value, None
        sizes = np.abs(picked).sum(axis=-1) + np.abs(self.constant)
        radius = self.constant_radius + self.coefficients_radius.sum(axis=-1) + gamma(k + 1) * sizes
        return value, _outwards(radius)


def _outwards(radius: np.ndarray) -> np.ndarray:
    return radius * SAFETY + _FLOOR


def _product(
    a: np.ndarray, a_radius: Radius, b: np.ndarray, b_radius: Radius = None, vector: bool = False
) -> tuple[np.ndarray, Radius]:
    """(Â ± r_A)(B̂ ± r_B), a [B, r, w] times a matrix b [w, m] or [B, w, m], or with `vector` a
    vector b [w] or [B, w]: (product, radius); b_radius None means b is exact."""

    def times(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        return (left @ right[..., None])[..., 0] if vector else left @ right

    if a_radius is None:
        return times(a, b), None
    # r_A·|B̂| + γ·|Â|·|B̂| as one product (equal in exact arithmetic; the rounding of either form
    # is far below the radius's outward scaling, module docstring)
    radius = times(a_radius + gamma(a.shape[-1] + 1) * np.abs(a), np.abs(b))
    if b_radius is not None:
        radius = radius + times(np.abs(a) + a_radius, b_radius)
    return times(a, b), _outwards(radius)


def _sum(a: np.ndarray, a_radius: Radius, b: np.ndarray, b_radius: Radius) -> tuple[np.ndarray, Radius]:
    total = a + b
    return total, None if a_radius is None else _outwards(a_radius + b_radius + UNIT_ROUNDOFF * np.abs(total))


class SetForms:
    """Linear forms over s ⊆ allowed of g(s) = f(base + (target − base)⊙s) on a monotone network,
    with rigorous radii: the first layer's, and back-substitution through given lines. Shared by
    `SubsetBounds` and `solvers.smooth.SmoothBounds`. `base`, `target` [n] float64."""

    @_quiet
    def __init__(self, net: Network, base: np.ndarray, target: np.ndarray, threshold: float) -> None:
        self.layers = [(layer.weight, layer.bias) for layer in net.layers]
        self.threshold = threshold
        self.base, self.target = base, target
        weight, bias = self.layers[0]
        self.move = target - base  # radius u·|target − base| (one rounding)
        self.move_radius = _outwards(UNIT_ROUNDOFF * np.abs(self.move))
        constant, constant_radius = _product(weight, np.zeros_like(weight), base, vector=True)
        self.first_constant = constant + bias
        self.first_constant_radius = _outwards(constant_radius + UNIT_ROUNDOFF * np.abs(self.first_constant))

    @_quiet
    def first_form(self, allowed: np.ndarray, rigorous: bool, fixed: np.ndarray | None = None) -> _Form:
        """The first layer's pre-activations over s ⊆ allowed [B, n] bool: coefficients [B, w0, n].
        With `fixed` [B, n] bool, over the sets `fixed ∪ s`, s ⊆ allowed \\ fixed: the fixed
        features sit at `target` in the constant [B, w0] (exact doubles: a selection)."""
        weight, bias = self.layers[0]
        constant, constant_radius = self.first_constant, self.first_constant_radius
        if fixed is not None:
            allowed = allowed & ~fixed
            start = np.where(fixed, self.target, self.base)
            constant = start @ weight.T + bias
            terms = np.abs(start) @ np.abs(weight).T
            constant_radius = _outwards(gamma(weight.shape[1] + 1) * (terms + np.abs(bias)))
        move = self.move * allowed
        coefficients = weight[None, :, :] * move[:, None, :]
        first = _Form(coefficients, None, constant, None)
        if rigorous:
            first.coefficients_radius = _outwards(
                weight[None, :, :] * (self.move_radius * allowed)[:, None, :] + UNIT_ROUNDOFF * np.abs(coefficients)
            )
            first.constant_radius = constant_radius
        return first

    @_quiet
    def substitute(self, depth: int, lines: list[tuple[np.ndarray, np.ndarray]], first: _Form) -> _Form:
        """Layer `depth`'s pre-activation as a form over s, through `lines` (per layer below: slopes
        [B, w], offsets [B, w], exact doubles, slopes ≥ 0) down to the `first` form."""
        weight, bias = self.layers[depth]
        rigorous = first.coefficients_radius is not None
        coefficients, constant = weight[None, :, :], bias[None, :]
        coefficients_radius = np.zeros((1, *weight.shape)) if rigorous else None
        constant_radius = np.zeros((1, len(bias))) if rigorous else None
        for below in range(depth - 1, -1, -1):
            slopes, offsets = lines[below]
            added, added_radius = _product(coefficients, coefficients_radius, offsets, vector=True)
            constant, constant_radius = _sum(constant, constant_radius, added, added_radius)
            coefficients = coefficients * slopes[:, None, :]
            if rigorous:
                coefficients_radius = _outwards(coefficients_radius * slopes[:, None, :] + UNIT_ROUNDOFF * np.abs(coefficients))
            if below == 0:
                added, added_radius = _product(
                    coefficients, coefficients_radius, first.constant, first.constant_radius, vector=True
                )
                coefficients, coefficients_radius = _product(
                    coefficients, coefficients_radius, first.coefficients, first.coefficients_radius
                )
            else:
                next_weight, next_bias = self.layers[below]
                added, added_radius = _product(coefficients, coefficients_radius, next_bias, vector=True)
                coefficients, coefficients_radius = _product(coefficients, coefficients_radius, next_weight)
            constant, constant_radius = _sum(constant, constant_radius, added, added_radius)
        return _Form(coefficients, coefficients_radius, constant, constant_radius)


class SubsetBounds(SetForms):
    """g(s) on a monotone network with relu hidden layers and an identity output, class 1 when
    f > threshold: bounds over the sets of branch-and-bound nodes (module docstring)."""

    def __init__(self, net: Network, base: np.ndarray, target: np.ndarray, threshold: float) -> None:
        super().__init__(net, base, target, threshold)
        names = [layer.activation.name for layer in net.layers]
        # the chords and tangent lines bound g only when every weight is ≥ 0 (a sign-monotone
        # network with negative hidden weights needs lower lines where a coefficient is negative)
        self.supported = net.is_monotone and all(name == "relu" for name in names[:-1]) and names[-1] == "identity"

    @_quiet
    def bound_and_form(
        self,
        k: int | np.ndarray,
        allowed: np.ndarray,
        fixed: np.ndarray | None = None,
        minimum: bool = False,
        reference: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """allowed [B, n] bool → (ĝ [B], r [B], coefficients [B, n]): ĝ + r ≥ g(s) for every
        s ⊆ allowed with Σ s ≤ k (one bound, or one per row [B]); with `fixed` [B, n] bool, for
        every `fixed ∪ s`, s ⊆ allowed \\ fixed, Σ s ≤ k (`first_form`). The coefficients are those
        of the output's upper form over s (a feature's share in the bound: what `solvers.branch`
        branches on). With `minimum`: ĝ − r ≤ g(s) over the same sets instead, by the lower lines
        z ≥ α·h (α ∈ {0, 1}, exact, valid for relu everywhere), and the lower form's coefficients;
        α = 1 where the unit is active at `reference` [B, n] (points of [0,1]^n: the lines are
        then the tangents of the convex g there, Kelley's), else where its bounds lie mostly above 0."""
        first = self.first_form(allowed, True, fixed)
        actives = self._actives(reference) if reference is not None else None
        uppers: list[tuple[np.ndarray, np.ndarray]] = []  # per hidden layer: chord (slopes, offsets)
        lowers: list[tuple[np.ndarray, np.ndarray]] = []
        for depth in range(len(self.layers)):
            last = depth == len(self.layers) - 1
            if depth == 0:
                upper = lower = first
            else:
                upper = first if last and minimum else self.substitute(depth, uppers, first)
                lower = self.substitute(depth, lowers, first)
            if not (last and minimum):
                high, high_radius = upper.extreme(k, largest=True)
            if last and not minimum:
                return high[:, 0], high_radius[:, 0], upper.coefficients[:, 0, :]
            low, low_radius = lower.extreme(k, largest=False)
            if last:
                return low[:, 0], low_radius[:, 0], lower.coefficients[:, 0, :]
            uppers.append(_chords(low - low_radius, high + high_radius))
            active = (low + high > 0) if actives is None else actives[depth]
            lowers.append((active.astype(np.float64), np.zeros_like(low)))
        raise AssertionError("unreachable: the loop returns at the output layer")

    def _actives(self, reference: np.ndarray) -> list[np.ndarray]:
        """reference [B, n] in [0,1]^n → per hidden layer [B, w] bool: the units active there
        (plain float64: they only choose among valid lines)."""
        z = self.base + self.move * reference
        actives = []
        for weight, bias in self.layers[:-1]:
            h = z @ weight.T + bias
            actives.append(h > 0)
            z = np.maximum(h, 0.0)
        return actives


def _chords(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Upper lines of relu over [low, high] [B, w] (rigorous bounds) as exact doubles (slopes, offsets):
    the unit itself where stable, else a chord rounded outwards (module docstring)."""
    unstable = (low < 0) & (high > 0)
    safe_low = np.where(unstable, low, -1.0)
    slopes = np.where(
        unstable, (np.where(unstable, high, 1.0) / (np.where(unstable, high, 1.0) - safe_low)) * _SLOPE_UP, (low >= 0) * 1.0
    )
    offsets = np.where(unstable, (-slopes * safe_low) * _SLOPE_UP, 0.0)
    return slopes, offsets

"""The rigorous float bounds of `solvers.smooth` against high-precision and brute-force truth:
every line bounds its activation over its interval, every bound holds for every set it covers,
and every cut keeps every valid set."""

from __future__ import annotations

import itertools
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from cardinal.solvers.smooth import SmoothBounds, _lines, _root

from cardinal import Layer, Network
from cardinal.activations import Activation
from cardinal.exact import ExactNetwork

ACTIVATIONS = [
    Activation.make("sigmoid"),
    Activation.make("tanh"),
    Activation.make("softplus"),
    Activation.make("relu"),
    Activation.make("leaky_relu", slope=0.1),
    Activation.make("hardtanh", min=-0.5, max=0.5),
    Activation.make("identity"),
]
EXACT_ROOTS = ("sigmoid", "tanh", "softplus")
EXACT = {
    "sigmoid": lambda h: 1 / (1 + mpmath.exp(-h)),
    "tanh": mpmath.tanh,
    "softplus": lambda h: mpmath.log1p(mpmath.exp(h)),
    "relu": lambda h: max(h, 0),
    "leaky_relu": lambda h: h if h > 0 else h / 10,  # slope 0.1 read as the double 0.1 below
    "hardtanh": lambda h: min(max(h, mpmath.mpf(-0.5)), mpmath.mpf(0.5)),
    "identity": lambda h: h,
}


@pytest.mark.parametrize("activation", ACTIVATIONS, ids=lambda a: a.name)
@pytest.mark.parametrize("upper", [True, False], ids=["upper", "lower"])
def test_lines_bound_the_activation_over_their_interval(activation: Activation, upper: bool) -> None:
    """At 100 digits, on a dense grid of each interval (its ends and the slopes' tangent points
    included): σ(h) ≤ m·h + β (upper) or ≥ (lower), and m ≥ 0."""
    rng = np.random.default_rng(len(activation.name) + upper)
    centres, widths = rng.normal(scale=3.0, size=60), rng.exponential(2.0, size=60)
    low, high = centres - widths / 2, centres + widths / 2
    low[:5], high[:5] = -1e-3, 1e-3  # narrow intervals across the inflection
    low[5:8], high[5:8] = 0.25, 0.25  # points
    slopes, offsets = _lines(activation, low, high, upper)
    assert (slopes >= 0).all() and np.isfinite(offsets).all()
    exact = EXACT[activation.name]
    with mpmath.workdps(100):
        for lo, hi, m, b in zip(low, high, slopes, offsets, strict=True):
            # where φ = σ − m·h can peak: the ends, breakpoints, and near σ'(h) = m (both roots)
            roots = (
                [float(_root(activation, np.array(m), side)) for side in (True, False)] if activation.name in EXACT_ROOTS else []
            )
            near = [r + d for r in roots for d in (-1e-6, 0.0, 1e-6)]
            points = [*np.linspace(lo, hi, 201), *(p for p in (0.0, -0.5, 0.5, *near) if lo <= p <= hi)]
            for h in map(mpmath.mpf, points):
                value = exact(h) if activation.name != "leaky_relu" else (h if h > 0 else h * mpmath.mpf(0.1))
                line = mpmath.mpf(m) * h + mpmath.mpf(b)
                assert (value <= line) if upper else (value >= line), (activation.name, lo, hi, float(h))


def _network(rng: np.random.Generator, n: int, names: tuple[str, ...]) -> Network:
    layers, fan_in = [], n
    for width, name in zip((5, 4, 1), (*names, "identity"), strict=True):
        weight = np.abs(rng.normal(size=(width, fan_in))) / np.sqrt(fan_in)
        bias = rng.normal(size=width) * 0.5 - 0.5 * weight.sum(axis=1)
        layers.append(Layer(weight, bias, Activation.make(name)))
        fan_in = width
    return Network(layers)


@pytest.mark.parametrize("names", [("sigmoid", "sigmoid"), ("tanh", "softplus"), ("relu", "tanh")], ids="+".join)
def test_bounds_refutations_and_cuts_hold_for_every_set(names: tuple[str, ...]) -> None:
    """Brute force over all 2^6 sets, both directions: `extreme_output` bounds g over the sets of
    size min(k, |C|) inside each C; `refutes` never clears a C holding a valid set within k;
    `size_cut(k)` keeps every valid set of size k. And the bounds are not vacuous."""
    n = 6
    rng = np.random.default_rng(len("".join(names)))
    S = np.array(list(itertools.product([False, True], repeat=n)))
    sizes = S.sum(axis=1)
    refuted = 0
    for trial in range(6):
        net = _network(rng, n, names)
        x = rng.uniform(size=n)
        upward = trial % 2 == 0
        base, target = x, (np.ones(n) if upward else np.zeros(n))
        enclosures = [row[0] for row in ExactNetwork(net).outputs(np.where(S, target, base))]
        for k in range(1, n):
            values = [e.upper if upward else e.lower for e, size in zip(enclosures, sizes, strict=True) if size <= k]
            threshold = float(np.median([float(v) for v in values]))
            t = Fraction(threshold)
            valid = np.array([(e.lower > t) if upward else (e.upper <= t) for e in enclosures])
            bounds = SmoothBounds(net, base, target, threshold)
            assert bounds.supported and bounds.upward == upward
            allowed = rng.uniform(size=(10, n)) < 0.75
            allowed[0] = True
            extreme = bounds.extreme_output(k, allowed)
            refutes = bounds.refutes(k, allowed)
            for row, inside in enumerate(allowed):
                covered = ~(S & ~inside).any(axis=1)
                exact = [enclosures[i] for i in np.flatnonzero(covered & (sizes == min(k, inside.sum())))]
                if upward:
                    assert all(Fraction(extreme[row]) >= e.upper for e in exact)
                else:
                    assert all(Fraction(extreme[row]) <= e.lower for e in exact)
                if refutes[row]:
                    assert not (valid & covered & (sizes <= k)).any()
                    refuted += 1
            cut = bounds.size_cut(k)
            for s in S[valid & (sizes == k)]:
                assert sum(c for c, chosen in zip(cut.coefficients, s, strict=True) if chosen) <= cut.bound
    assert refuted > 0


@pytest.mark.parametrize("activation", ACTIVATIONS[:3], ids=lambda a: a.name)
def test_lines_stay_valid_with_badly_placed_tangent_points(activation: Activation, monkeypatch: pytest.MonkeyPatch) -> None:
    """The offsets are rigorous whatever point the slope's tangent is taken at: with the roots of
    σ'(h) = m moved off, every line still bounds σ (only its tightness suffers)."""
    import cardinal.solvers.smooth as smooth

    root = smooth._root
    monkeypatch.setattr(smooth, "_root", lambda a, m, positive: 0.6 * root(a, m, positive) + 0.3)
    rng = np.random.default_rng(7)
    low = rng.normal(scale=3.0, size=40)
    high = low + rng.exponential(3.0, size=40)
    exact = EXACT[activation.name]
    for upper in (True, False):
        slopes, offsets = smooth._lines(activation, low, high, upper)
        with mpmath.workdps(60):
            for lo, hi, m, b in zip(low, high, slopes, offsets, strict=True):
                true_roots = [float(root(activation, np.array(m), side)) for side in (True, False)]
                points = [*np.linspace(lo, hi, 101), *(r for r in true_roots if lo <= r <= hi)]
                for h in map(mpmath.mpf, points):
                    line = mpmath.mpf(m) * h + mpmath.mpf(b)
                    assert (exact(h) <= line) if upper else (exact(h) >= line), (lo, hi, float(h))

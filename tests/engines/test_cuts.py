"""Linear bounds and cuts of the lazy z3 strategy against brute force over every s ∈ {0,1}^n."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from bruteforce import random_network
from cardinal.solvers.cuts import Cut, LinearBounds
from cardinal.solvers.subsets import SubsetBounds

from cardinal.activations import Activation
from cardinal.exact import Dyadic, ExactNetwork

FAMILIES = [
    Activation.make("relu"),
    Activation.make("leaky_relu", slope=0.1),
    Activation.make("leaky_relu", slope=2.0),
    Activation.make("hardtanh", min=0.0, max=1.0),
    Activation.make("hardtanh", min=-0.5, max=0.5),
    Activation.make("step", at=0.0),
    Activation.make("identity"),
]
IDS = [f"{a.name}{dict(a.params)}" for a in FAMILIES]


def _value(form: tuple[Dyadic, Dyadic], s: np.ndarray) -> Fraction:
    coefficients, constant = form
    return sum((v for v, chosen in zip(coefficients.fractions(), s, strict=True) if chosen), Fraction(0)) + constant.fractions()


def _lhs(cut: Cut, s: np.ndarray) -> int:
    return sum(c for c, chosen in zip(cut.coefficients, s, strict=True) if chosen)


def _setting(activation: Activation, seed: int, n: int = 6):
    """A random monotone network, a base and a target point [n], every s [2^n, n] and g(s) exactly."""
    rng = np.random.default_rng(seed)
    net = random_network(rng, n, (int(rng.integers(3, 6)), 4), activation, grain=3 if seed % 2 else 0)
    base, target = rng.uniform(size=n), rng.uniform(size=n)
    unmoved = rng.uniform(size=n) < 0.2
    target[unmoved] = base[unmoved]
    S = np.array(list(itertools.product([False, True], repeat=n)))
    g = [enclosure.lower for (enclosure,) in ExactNetwork(net).outputs(np.where(S, target, base))]
    return net, base, target, S, g


@pytest.mark.parametrize("activation", FAMILIES, ids=IDS)
def test_tangent_form_is_a_lower_bound_tight_where_convex(activation: Activation) -> None:
    for seed in range(4):
        net, base, target, S, g = _setting(activation, seed)
        bounds = LinearBounds(net, base, target, 0.0)
        for index in np.random.default_rng(seed).choice(len(S), 6, replace=False):
            form = bounds.tangent_form(S[index])
            assert all(_value(form, s) <= value for s, value in zip(S, g, strict=True))
            if activation.name in ("relu", "identity") or (activation.name == "leaky_relu" and activation.param("slope") <= 1):
                assert _value(form, S[index]) == g[index]  # σ convex everywhere: the tangent touches


@pytest.mark.parametrize("activation", FAMILIES, ids=IDS)
def test_integer_cuts_keep_every_valid_set(activation: Activation) -> None:
    """Rounded to integers, a tangent cut keeps every s with g(s) ≤ t, also when combined with
    the size row within each k; and the cuts exclude invalid sets (they are not empty)."""
    excluded = 0
    for seed in range(4):
        net, base, target, S, g = _setting(activation, seed + 100, n=7)
        threshold = float(sorted(g)[len(g) // 2])
        t = Fraction(threshold)
        bounds = LinearBounds(net, base, target, threshold)
        for index in np.random.default_rng(seed).choice(len(S), 4, replace=False):
            cut = bounds.tangent_cut(S[index])
            for s, value in zip(S, g, strict=True):
                kept = _lhs(cut, s) <= cut.bound
                assert kept or value > t
                excluded += not kept
            for k in range(8):
                combined = cut.within(k)
                assert all(_lhs(combined, s) <= combined.bound for s, value in zip(S, g, strict=True) if s.sum() <= k and value <= t)
    assert excluded > 0


def test_cut_combined_with_the_size_row() -> None:
    """−3·s0 − 2·s1 + s2 ≤ −4 has no solution with one feature: combined with the size row
    (λ = 2) the left side cannot reach the bound, which one glance at the signs shows."""
    cut = Cut((-3, -2, 1), -4)
    assert cut.within(1) == Cut((-1, 0, 3), -2)
    assert sum(c for c in cut.within(1).coefficients if c < 0) > cut.within(1).bound
    assert cut.within(2) == cut  # the third smallest coefficient is ≥ 0: λ = 0
    assert Cut((1, 2), 3).trivial and not Cut((1, 2), 2).trivial


def test_subset_bounds_cover_every_set_inside_and_within_k() -> None:
    """The rigorous float bound of `SubsetBounds` is ≥ g(s) for every s ⊆ C with Σ s ≤ k, its
    radius is tiny, and it closes some C (ĝ + r ≤ t) only where no set inside is valid."""
    closed = 0
    for seed in range(6):
        net, base, target, S, g = _setting(Activation.make("relu"), seed + 200, n=7)
        threshold = float(sorted(g)[len(g) // 2])
        bounds = SubsetBounds(net, base, target, threshold)
        assert bounds.supported
        rng = np.random.default_rng(seed)
        allowed = rng.uniform(size=(12, 7)) < 0.6
        for k in range(8):
            value, radius, _ = bounds.bound_and_form(k, allowed)
            assert np.all(radius < 1e-9)
            for row, mask in enumerate(allowed):
                inside = [v for s, v in zip(S, g, strict=True) if s.sum() <= k and not (s & ~mask).any()]
                top = Fraction(value[row]) + Fraction(radius[row])
                assert top >= max(inside)
                if top <= Fraction(threshold):
                    closed += 1
                    assert max(inside) <= Fraction(threshold)
    assert closed > 0


def test_subset_bounds_need_relu_hidden_layers() -> None:
    net, base, target, _, _ = _setting(Activation.make("hardtanh", min=0.0, max=1.0), 0)
    assert not SubsetBounds(net, base, target, 0.0).supported


def test_subset_bounds_never_close_at_a_threshold_just_below_the_maximum() -> None:
    """With t the largest double below max g over the sets (so one set is valid by less than an
    ulp), the bound must stay above t, whatever the float rounding."""
    for seed in range(6):
        net, base, target, S, g = _setting(Activation.make("relu"), seed + 300, n=6)
        for k in (1, 3, 6):
            best = max(v for s, v in zip(S, g, strict=True) if s.sum() <= k)
            below = float(best) if Fraction(float(best)) < best else float(np.nextafter(float(best), -np.inf))
            value, radius, _ = SubsetBounds(net, base, target, below).bound_and_form(k, np.ones((1, 6), dtype=bool))
            assert Fraction(value[0]) + Fraction(radius[0]) > Fraction(below)

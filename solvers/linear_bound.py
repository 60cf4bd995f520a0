"""An exact linear-relaxation bound (the back-substitution of DeepPoly / CROWN, made rigorous):
does every y of a box [lower, upper] [n] keep p(x)? True is a proof; False proves nothing.

Each hidden unit's activation z = σ(h) is bounded by two lines over the exact bounds [lo, hi] of
its pre-activation h on the box: an identity unit, or a ReLU unit that is stable (hi ≤ 0: z = 0;
lo ≥ 0: z = h), by itself; an unstable ReLU unit (lo < 0 < hi) by z ≥ α·h (α = 1 when hi > −lo,
else 0) and z ≤ a·(h − lo) for any a ≥ hi / (hi − lo). A linear objective g = A·z_L + c of the
last hidden activations [d_L] is pushed back layer by layer — each coefficient through the lower
line where it is ≥ 0, the upper one where it is < 0, then through the affine layer — down to a
linear function of y, whose minimum over the box bounds g from below. The bounds [lo, hi] of
each layer come the same way (g = ±h), from the first layer up: tighter than interval
arithmetic, which forgets that every unit moves with the same y.

**Exactness.** Every number is a dyadic rational (`cardinal.exact.Dyadic`: Python integers),
every product and sum exact; the layer bounds are rounded outwards (lo down, hi up) and the
slopes a up to multiples of 2^-`PRECISION`, which keeps the lines valid (a larger a or a wider
[lo, hi] only loosens them) and the integers short. The objective: g = f_c − f_j for each rival
j of c = p(x) (K ≥ 2, argmax with ties to the lowest index: > 0 for j < c, ≥ 0 for j > c), or
f − t (> 0) for p(x) = 1 and t − f (≥ 0) for p(x) = 0 (K = 1: p = 1 iff f > t).

It applies to networks whose hidden activations are ReLU or the identity and whose last layer is
the identity (`applies`); elsewhere `box_keeps` answers False.
"""

from __future__ import annotations

import weakref

import numpy as np

from cardinal.exact import Dyadic
from cardinal.network import Network
from cardinal.problem import Problem

PRECISION = 40  # layer bounds and slopes are rounded outwards to multiples of 2^-PRECISION
FLOAT_MARGIN = 1e-6  # a float estimate of the bound below minus this skips the exact bound (`_float_estimate`)

_Relaxation = tuple[Dyadic, Dyadic, Dyadic]  # per unit [d]: lower slope α, upper slope a, upper intercept −a·lo
_WEIGHTS: weakref.WeakKeyDictionary[Network, list[tuple[Dyadic, Dyadic]]] = weakref.WeakKeyDictionary()


def applies(net: Network) -> bool:
    """Hidden activations ReLU or identity, the last layer the identity."""
    *hidden, last = net.layers
    return last.activation.name == "identity" and all(layer.activation.name in ("relu", "identity") for layer in hidden)


def box_keeps(problem: Problem, lower: np.ndarray, upper: np.ndarray) -> bool:
    """Whether the bound proves that every y with lower ≤ y ≤ upper [n] is predicted p(x)
    (module docstring); False where it proves nothing or does not apply."""
    return screen(problem, lower, upper)[0]


def screen(problem: Problem, lower: np.ndarray, upper: np.ndarray) -> tuple[bool, np.ndarray]:
    """`box_keeps`'s answer, and the corners of the box [m, n] where the linear functions bounding
    the m objectives from below take their minima (each feature at the end its coefficient
    points to): points likely to flip where the bound proves nothing, to be judged exactly (none,
    [0, n], where the bound does not apply)."""
    net = problem.net
    if not applies(net):
        return False, np.empty((0, problem.n))
    lower, upper = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
    estimate, signs = _float_estimate(problem, lower, upper)
    if estimate.min() < -FLOAT_MARGIN:  # the exact bound would prove nothing either: not computed
        return False, np.where(signs > 0, lower, upper)
    free = lower != upper
    weights = _pinned_folded(_weights(net), Dyadic.from_floats(lower[~free]), free)
    low, high = _aligned(Dyadic.from_floats(lower[free]), Dyadic.from_floats(upper[free]))
    relaxations: list[_Relaxation] = []
    for layer, (weight, bias) in zip(net.layers[:-1], weights[:-1], strict=True):
        both, _ = _lower_bounds(_stack(weight, _negated(weight)), _stack(bias, _negated(bias)), relaxations, weights, low, high)
        d = layer.width
        lo = both[:d].floor(-PRECISION)  # ints at exponent −PRECISION: lo rounded down, hi up
        hi = -both[d:].floor(-PRECISION)
        if (lo > hi).any():  # no y at all: never on a non-empty box
            return False, np.empty((0, problem.n))
        relaxations.append(_relaxation(lo, hi, layer.activation.name))
    objective, constant, strict = _objective(problem, weights[-1])
    bounds, coefficients = _lower_bounds(objective, constant, relaxations, weights, low, high)
    corners = np.tile(lower, (len(coefficients.ints), 1))
    corners[:, free] = np.where(coefficients.ints > 0, lower[free], upper[free])
    return bool(np.all(np.where(strict, bounds.ints > 0, bounds.ints >= 0))), corners


def _float_estimate(problem: Problem, lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same bound computed in float64, only to skip the exact one where it cannot prove
    anything (a float estimate below −`FLOAT_MARGIN`; where the floats err the cost is one proof
    missed, never a wrong one): the estimates [m] and the coefficients [m, n] of the linear
    functions of y. The exact bound fails on many questions (docs/results.md), each failure an
    exact evaluation spent for nothing, which the float estimate avoids."""
    layers = problem.net.layers
    relaxations: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def bound(objective: np.ndarray, constant: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        for (alpha, slope, intercept), layer in zip(reversed(relaxations), reversed(layers[: len(relaxations)]), strict=True):
            positive = objective >= 0
            constant = constant + np.where(positive, 0.0, objective * intercept).sum(axis=1)
            objective = np.where(positive, objective * alpha, objective * slope)
            constant = constant + objective @ layer.bias
            objective = objective @ layer.weight
        return constant + np.minimum(objective * lower, objective * upper).sum(axis=1), objective

    for layer in layers[:-1]:
        both, _ = bound(np.concatenate([layer.weight, -layer.weight]), np.concatenate([layer.bias, -layer.bias]))
        lo, hi = both[: layer.width], -both[layer.width :]
        if layer.activation.name == "identity":
            ones = np.ones(layer.width)
            relaxations.append((ones, ones, np.zeros(layer.width)))
            continue
        unstable = (lo < 0) & (hi > 0)
        slope = np.where(hi <= 0, 0.0, np.where(lo >= 0, 1.0, hi / np.where(unstable, hi - lo, 1.0)))
        alpha = np.where(unstable, (hi > -lo).astype(np.float64), slope)
        relaxations.append((alpha, slope, np.where(unstable, -slope * lo, 0.0)))
    objective, constant, _ = _objective(problem, _weights(problem.net)[-1])  # the exact objectives, read as floats
    return bound(_floats(objective), _floats(constant))


def _floats(value: Dyadic) -> np.ndarray:
    """The nearest float64s of a batch of dyadics."""
    return np.ldexp(value.ints.astype(np.float64), value.exp)


def _pinned_folded(weights: list[tuple[Dyadic, Dyadic]], pinned: Dyadic, free: np.ndarray) -> list[tuple[Dyadic, Dyadic]]:
    """The layers with the first one over the free features alone: its weight's columns where
    `free` [n] (bool), and its bias plus the pinned features' exact contribution W[:, ~free]·pinned
    ([n − f] values): the same function of the free features, exactly, so the same bound, at a
    cost that grows with the free features only (most deletion questions pin most of them)."""
    (weight, bias), *rest = weights
    if free.all():
        return weights
    folded = bias + Dyadic(weight.ints[:, ~free].dot(pinned.ints), weight.exp + pinned.exp)
    return [(Dyadic(weight.ints[:, free], weight.exp), folded), *rest]


def _weights(net: Network) -> list[tuple[Dyadic, Dyadic]]:
    """Each layer's (weight [out, in], bias [out]) as dyadics, built once per network."""
    if net not in _WEIGHTS:
        _WEIGHTS[net] = [(Dyadic.from_floats(layer.weight), Dyadic.from_floats(layer.bias)) for layer in net.layers]
    return _WEIGHTS[net]


def _objective(problem: Problem, last: tuple[Dyadic, Dyadic]) -> tuple[Dyadic, Dyadic, np.ndarray]:
    """The objectives g = A·z_L + c that must stay positive (module docstring): A [m, d_L], c [m],
    and whether each must be > 0 (else ≥ 0) [m]."""
    weight, bias = last
    c = problem.prediction
    if problem.classes == 1:
        threshold = Dyadic.from_floats(np.array([problem.threshold], dtype=np.float64))
        if c == 1:
            return weight, bias - threshold, np.array([True])
        return _negated(weight), threshold - bias, np.array([False])
    rivals = [j for j in range(problem.classes) if j != c]
    return weight[[c] * len(rivals)] - weight[rivals], bias[[c] * len(rivals)] - bias[rivals], np.array([j < c for j in rivals])


def _lower_bounds(
    objective: Dyadic,
    constant: Dyadic,
    relaxations: list[_Relaxation],
    weights: list[tuple[Dyadic, Dyadic]],
    low: Dyadic,
    high: Dyadic,
) -> tuple[Dyadic, Dyadic]:
    """Exact lower bounds [m] over the box [low, high] [n] of g = objective·z_k + constant
    ([m, d_k], [m]), where z_k is the activation of hidden layer k = len(relaxations) (z_0 = y),
    pushed back through the relaxations of layers k, ..., 1 and their affine maps; and the
    coefficients [m, n] of the linear functions of y that bound g from below."""
    for (alpha, slope, intercept), (weight, bias) in zip(
        reversed(relaxations), reversed(weights[: len(relaxations)]), strict=True
    ):
        positive = objective.ints >= 0
        through = _where(
            positive, objective * Dyadic(alpha.ints[None, :], alpha.exp), objective * Dyadic(slope.ints[None, :], slope.exp)
        )
        lifted = objective * Dyadic(intercept.ints[None, :], intercept.exp)
        offsets = Dyadic(np.where(positive, 0, lifted.ints).sum(axis=1), lifted.exp)
        constant = constant + offsets + Dyadic(through.ints.dot(bias.ints), through.exp + bias.exp)
        objective = Dyadic(through.ints.dot(weight.ints), through.exp + weight.exp)
    at_low = objective * Dyadic(low.ints[None, :], low.exp)
    at_high = objective * Dyadic(high.ints[None, :], high.exp)
    return constant + Dyadic(np.minimum(at_low.ints, at_high.ints).sum(axis=1), at_low.exp), objective


def _relaxation(lo: np.ndarray, hi: np.ndarray, activation: str) -> _Relaxation:
    """The two lines of each unit (module docstring) from its bounds lo ≤ h ≤ hi [d] (ints at
    exponent −PRECISION)."""
    one = 1 << PRECISION
    if activation == "identity":
        ones = np.array([one] * len(lo), dtype=object)
        return Dyadic(ones, -PRECISION), Dyadic(ones.copy(), -PRECISION), Dyadic(np.zeros(len(lo), dtype=object), 0)
    alpha, slope, intercept = [], [], []
    for low, high in zip(lo.tolist(), hi.tolist(), strict=True):
        if high <= 0:
            alpha.append(0), slope.append(0), intercept.append(0)
        elif low >= 0:
            alpha.append(one), slope.append(one), intercept.append(0)
        else:
            a = -((-high << PRECISION) // (high - low))  # ⌈hi / (hi − lo) · 2^P⌉
            alpha.append(one if high > -low else 0), slope.append(a), intercept.append(-a * low)
    return (
        Dyadic(np.array(alpha, dtype=object), -PRECISION),
        Dyadic(np.array(slope, dtype=object), -PRECISION),
        Dyadic(np.array(intercept, dtype=object), -2 * PRECISION),
    )


def _aligned(first: Dyadic, second: Dyadic) -> tuple[Dyadic, Dyadic]:
    """The two at their common (lower) exponent."""
    exp = min(first.exp, second.exp)
    return Dyadic(first.at_exp(exp), exp), Dyadic(second.at_exp(exp), exp)


def _where(condition: np.ndarray, first: Dyadic, second: Dyadic) -> Dyadic:
    first, second = _aligned(first, second)
    return Dyadic(np.where(condition, first.ints, second.ints), first.exp)


def _stack(first: Dyadic, second: Dyadic) -> Dyadic:
    first, second = _aligned(first, second)
    return Dyadic(np.concatenate([first.ints, second.ints]), first.exp)


def _negated(value: Dyadic) -> Dyadic:
    return Dyadic(-value.ints, value.exp)

"""Brute-force references for the backend tests: every subset or vertex, decided exactly.

Kept deliberately naive (one exact evaluation per point, no shortcuts beyond the definitions) so
that the backends are checked against something independent of their own code.
"""

from __future__ import annotations

import itertools

import numpy as np

from cardinal.activations import Activation
from cardinal.network import Layer, Network
from cardinal.problem import Problem


def random_network(
    rng: np.random.Generator, n: int, widths: tuple[int, ...], activation: Activation, monotone: bool = True, grain: int = 0
) -> Network:
    """Random weights (|N(0,1)| when monotone, else N(0,1)) scaled by 1/sqrt(fan-in), negative-ish
    biases, identity output. `grain` > 0 rounds every number to a multiple of 2^-grain."""
    layers, fan_in = [], n
    for width in (*widths, 1):
        weight = rng.normal(size=(width, fan_in)) / np.sqrt(fan_in)
        weight = np.abs(weight) if monotone else weight
        bias = rng.normal(size=width) * 0.5 - (0.3 if monotone else 0.0)
        if grain:
            weight, bias = np.round(weight * 2**grain) / 2**grain, np.round(bias * 2**grain) / 2**grain
        layers.append(Layer(weight, bias, activation if width != 1 else Activation.make("identity")))
        fan_in = width
    return Network(layers)


def _masks(n: int) -> np.ndarray:
    """All 2^n subsets as bool rows [2^n, n], row m holding the bits of m."""
    return (np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1 == 1


def _flips(problem: Problem, points: np.ndarray, bounded: bool = False) -> np.ndarray:
    if bounded:
        predicted = problem.predictions(points)
    else:
        predicted = problem.exact.predictions(points, problem.threshold)
    assert (predicted >= 0).all(), "brute force met an undecided point"
    return predicted != problem.prediction


def monotone_minimum(problem: Problem, bounded: bool = False) -> int | None:
    """Minimum explanation size on a monotone network by the shortcut over all 2^n subsets (None: no CXp).

    Every point is decided exactly: by `cardinal.exact` alone, or with `bounded`, by a float64 pass
    with a rigorous error bound and `cardinal.exact` where the bound leaves it open
    (`Problem.predictions`, checked against `cardinal.exact` in test_bounds): what makes 16 smooth
    features (2^16 points) take a second instead of minutes of 256-bit enclosures."""
    masks = _masks(problem.n)
    x, counterpoint = problem.x, problem.counterpoint
    if problem.kind == "contrastive":
        valid = _flips(problem, np.where(masks, counterpoint, x), bounded)
    else:
        valid = ~_flips(problem, np.where(masks, x, counterpoint), bounded)
    sizes = masks.sum(axis=1)[valid]
    return int(sizes.min()) if len(sizes) else None


def vertex_minimum(problem: Problem) -> int | None:
    """Minimum explanation size over the binary domain (vertices of the box), any network."""
    masks = _masks(problem.n)
    x, lower, upper = problem.x, problem.domain.lower, problem.domain.upper
    toggled = np.where(x == lower, upper, lower)
    flipping = _flips(problem, np.where(masks, toggled, x))
    sizes = masks.sum(axis=1)
    if problem.kind == "contrastive":
        return int(sizes[flipping].min()) if flipping.any() else None
    flipping_sets = masks[flipping]  # S is an AXp iff it meets every flipping toggle set
    for size in range(problem.n + 1):
        for chosen in itertools.combinations(range(problem.n), size):
            if flipping_sets[:, list(chosen)].any(axis=1).all():
                return size
    raise AssertionError("the full set is always an AXp")


def vertex_valid(problem: Problem, features: tuple[int, ...]) -> bool:
    """Whether `features` is an explanation over the binary domain (vertices of the box), any network."""
    masks = _masks(problem.n)
    x, lower, upper = problem.x, problem.domain.lower, problem.domain.upper
    toggled = np.where(x == lower, upper, lower)
    inside = ~masks[:, [i for i in range(problem.n) if i not in features]].any(axis=1)  # toggle sets within S
    flipping = _flips(problem, np.where(masks, toggled, x))
    if problem.kind == "contrastive":  # some toggle set within S flips
        return bool((flipping & inside).any())
    outside = ~masks[:, list(features)].any(axis=1)  # toggle sets disjoint from S
    return not bool((flipping & outside).any())


def mixed(net: Network) -> Network:
    """The same function exactly, with every feature of mixed sign (`cardinal.signs`), so that no
    monotone shortcut applies: two equal units σ(Σ y) join the first layer and reach f with
    weights +1 and −1, which cancel exactly. For a network of one layer (f = W·y + b, identity:
    it becomes two identity layers) or two (hidden σ, identity output)."""
    identity = Activation.make("identity")
    layers = net.layers if len(net.layers) == 2 else (Layer(net.layers[0].weight, net.layers[0].bias, identity), None)
    hidden, out = layers
    n = net.n_inputs
    assert out is None or out.activation.name == "identity", "mixed() takes an identity output layer"
    first = Layer(np.vstack([hidden.weight, np.ones((2, n))]), np.concatenate([hidden.bias, np.zeros(2)]), hidden.activation)
    if out is None:
        second = Layer(np.array([[1.0, 1.0, -1.0]]), np.zeros(1), identity)
    else:
        second = Layer(np.hstack([out.weight, [[1.0, -1.0]]]), out.bias, identity)
    result = Network([first, second], net.metadata)
    assert result.directions is not None and (result.directions == 2).all()
    return result

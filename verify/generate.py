"""Random networks and inputs for tests, benchmarks and campaigns, reproducible from a seed, and
the SET-COVER networks of the paper's Theorems 1–2.

Weights are drawn so that predictions vary over the unit box: |N(0, 1)|/√fan_in for monotone
networks (signed for the others), hidden biases centred so that units switch inside the box,
and optionally sparse weights and short decimals (which make ties and exact values common).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from cardinal.activations import Activation
from cardinal.network import Layer, Network

# Activation parameters that make each family behave over the unit box.
_FAMILY_ACTIVATIONS = {
    "relu": Activation.make("relu"),
    "leaky_relu": Activation.make("leaky_relu", slope=0.1),
    "hardtanh": Activation.make("hardtanh", min=0.0, max=1.0),
    "step": Activation.make("step", at=0.0),
    "sigmoid": Activation.make("sigmoid"),
    "tanh": Activation.make("tanh"),
    "softplus": Activation.make("softplus"),
    "identity": Activation.make("identity"),
}


def random_network(
    rng: np.random.Generator,
    n_inputs: int,
    hidden: Sequence[int],
    activation: str = "relu",
    monotone: bool = True,
    density: float = 1.0,
    decimals: int | None = None,
    outputs: int = 1,
) -> Network:
    """A network n_inputs → hidden... → `outputs` with `activation` on hidden layers and identity
    output (K = `outputs` classes when > 1).

    `density` < 1 zeroes weights at random (each unit keeps at least one input); `decimals`
    rounds weights and biases to that many decimal places.
    """
    act = _FAMILY_ACTIVATIONS[activation]
    widths = [*hidden, outputs]
    layers = []
    fan_in = n_inputs
    for position, width in enumerate(widths):
        weight = rng.normal(size=(width, fan_in)) / np.sqrt(fan_in)
        if monotone:
            weight = np.abs(weight)
        if density < 1.0:
            keep = rng.random((width, fan_in)) < density
            keep[np.arange(width), rng.integers(0, fan_in, size=width)] = True
            weight = weight * keep
        last = position == len(widths) - 1
        # Centre hidden units on their mean input over the box (inputs ~ 0.5, activations ~ 0.5).
        bias = -weight.sum(axis=1) * 0.5 + rng.normal(scale=0.3, size=width) if not last else rng.normal(scale=0.1, size=width)
        if decimals is not None:
            weight, bias = np.round(weight, decimals), np.round(bias, decimals)
            if monotone:
                weight = np.abs(weight)  # rounding keeps signs, but -0.0 → 0.0
        layers.append(Layer(weight, bias, Activation.make("identity") if last else act))
        fan_in = width
    return Network(layers)


def median_threshold(net: Network, X: np.ndarray) -> float:
    """A threshold that splits the predictions on X [B, n] roughly in half: midway between the
    lower median of f(X) and the next larger output, so that no row sits on the threshold (an
    output equal to t up to rounding makes float and exact arithmetic disagree)."""
    values = np.sort(net.forward(X).numpy())
    median = values[(len(values) - 1) // 2]
    above = values[values > median]
    return float((median + above[0]) / 2) if above.size else float(median) + 0.5


# ---------------------------------------------------------------------------- SET-COVER
def set_cover_network(sets: list[frozenset[int]], universe: int, activation: str = "step") -> Network:
    """Theorem 1's network: input i is set E_i; hidden unit j fires iff some chosen set covers
    element j; the output fires iff all u elements are covered. Threshold 0.5 separates 0 and 1.

    `step`: σ1 = step(at 0.5) (the paper's z > 0 on integer sums), σ2 = step(at u − 0.5).
    `hardtanh`: σ1 = clip(z, 0, 1), σ2 = clip(z − (u − 1), 0, 1): equal on the Boolean cube.
    """
    weight = np.array([[1.0 if j in s else 0.0 for s in sets] for j in range(universe)])
    if activation == "step":
        hidden, output = Activation.make("step", at=0.5), Activation.make("step", at=universe - 0.5)
        output_bias = 0.0
    elif activation == "hardtanh":
        hidden = output = Activation.make("hardtanh", min=0.0, max=1.0)
        output_bias = -(universe - 1.0)
    else:
        raise ValueError(f"SET-COVER networks use step or hardtanh, not {activation}")
    return Network([Layer(weight, np.zeros(universe), hidden), Layer(np.ones((1, universe)), np.array([output_bias]), output)])


def random_set_cover(rng: np.random.Generator, universe: int, n_sets: int, density: float = 0.35) -> list[frozenset[int]]:
    """n_sets random subsets of {0..universe−1} whose union is everything."""
    sets = [frozenset(int(j) for j in np.flatnonzero(rng.random(universe) < density)) for _ in range(n_sets)]
    covered = frozenset().union(*sets)
    for j in set(range(universe)) - covered:
        index = int(rng.integers(n_sets))
        sets[index] = sets[index] | {j}
    return sets


def minimum_set_cover(sets: list[frozenset[int]], universe: int) -> int:
    """Size of a smallest cover, by brute force (for tests and small instances)."""
    for size in range(len(sets) + 1):
        for chosen in itertools.combinations(sets, size):
            if len(frozenset().union(*chosen)) == universe:
                return size
    raise ValueError("the sets do not cover the universe")


def set_cover_problem(
    sets: list[frozenset[int]], universe: int, kind: str, activation: str = "step"
) -> tuple[Network, np.ndarray]:
    """Network and input of Theorem 1 (CXp of x = 0) or Theorem 2 (AXp of x = 1)."""
    x = np.zeros(len(sets)) if kind == "contrastive" else np.ones(len(sets))
    return set_cover_network(sets, universe, activation), x

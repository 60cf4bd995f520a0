"""The brute-force oracle (tests/bruteforce.py) against itself: its float64 interval pass never
decides a point against exact arithmetic, not even at thresholds one ulp from f(y), and its integer
evaluation of piecewise-linear networks is the Fraction evaluation of `fraction_oracle`."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from bruteforce import MIXED, Reference, _decide, directions, random_network
from fraction_oracle import ExactLayers

from cardinal.activations import Activation
from cardinal.network import Layer, Network

PARAMS = {"leaky_relu": {"slope": 0.1}, "hardtanh": {"min": -0.25, "max": 0.5}, "step": {"at": 0.125}}
NAMES = ("identity", "relu", "leaky_relu", "hardtanh", "step", "sigmoid", "tanh", "softplus")


def _grid(values: np.ndarray) -> np.ndarray:
    return np.round(values * 8) / 8


def _exact(net: Network, y: np.ndarray, t: Fraction | None) -> int:
    low, high = ExactLayers(net).outputs([Fraction(float(v)) for v in y])
    return int(_decide(np.array([low], dtype=object), np.array([high], dtype=object), t)[0])


@pytest.mark.parametrize("name", NAMES)
def test_the_float_pass_decides_only_what_exact_arithmetic_decides(name: str) -> None:
    rng = np.random.default_rng(sum(map(ord, name)))
    decided = 0
    for trial in range(3):
        n = 3 + trial
        net = random_network(rng, n, (6, 4), Activation.make(name, **PARAMS.get(name, {})), monotone=bool(trial % 2))
        reference = Reference(net)
        for y in rng.uniform(-3, 3, size=(8, n)):
            low, high = ExactLayers(net).value([Fraction(float(v)) for v in y])
            middle = float((low + high) / 2)
            for t in (middle, np.nextafter(middle, np.inf), np.nextafter(middle, -np.inf), middle + 1e-9, middle - 1e-9):
                predicted = int(_decide(*reference.enclose(y[None, :]), float(t))[0])
                if predicted >= 0:
                    decided += 1
                    assert predicted == _exact(net, y, Fraction(float(t))), (name, y.tolist(), t)
    assert decided >= 20  # the pass decides the points 1e-9 away


@pytest.mark.parametrize("name", NAMES[:5])
@pytest.mark.parametrize("classes", [1, 3])
def test_integer_evaluation_is_the_fraction_evaluation(name: str, classes: int) -> None:
    """Dyadic weights and inputs (ties at the step, at hardtanh's ends, at the threshold), K = 1 and 3."""
    rng = np.random.default_rng(len(name) + classes)
    first = Layer(_grid(rng.normal(size=(5, 4))), _grid(rng.normal(size=5)), Activation.make(name, **PARAMS.get(name, {})))
    net = Network(
        [first, Layer(_grid(rng.normal(size=(classes, 5))), _grid(rng.normal(size=classes)), Activation.make("identity"))]
    )
    reference = Reference(net)
    Y = np.round(rng.uniform(-2, 2, size=(40, 4)) * 4) / 4
    for y, row in zip(Y, reference.outputs(Y), strict=True):
        low, high = ExactLayers(net).outputs([Fraction(float(v)) for v in y])
        assert list(row) == low == high
    t = None if classes > 1 else float(reference.outputs(Y[:1])[0, 0])  # f(Y[0]) = t exactly: p = 0
    predicted = reference.predictions(Y, t)
    assert [int(p) for p in predicted] == [_exact(net, y, None if t is None else Fraction(t)) for y in Y]
    assert classes > 1 or predicted[0] == 0


def test_directions_follow_the_signs_of_every_path() -> None:
    """x0 reaches f through + · + and − · −, x1 through + · − only, x2 not at all, x3 both ways."""
    hidden = np.array([[1.0, 0.0, 0.0, 1.0], [-1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, -2.0]])
    net = Network(
        [
            Layer(hidden, np.zeros(3), Activation.make("relu")),
            Layer(np.array([[1.0, -1.0, 1.0]]), np.zeros(1), Activation.make("identity")),
        ]
    )
    assert directions(net).tolist() == [1, -1, 0, MIXED]
    two = Network([Layer(np.array([[-1.0, 0.0], [0.0, 1.0]]), np.zeros(2), Activation.make("identity"))])
    assert directions(two).tolist() == [1, 1]  # K = 2: the directions of f_1 − f_0 = x1 + x0
    same = Network([Layer(np.array([[1.0, 0.0], [1.0, 0.0]]), np.zeros(2), Activation.make("identity"))])
    assert directions(same).tolist() == [MIXED, 0]  # x0 in both outputs: sound, not complete

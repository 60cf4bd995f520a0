"""`cardinal.bounds.BoundedForward`: the float64 pass with a rigorous error bound, in torch and in
numpy (one code path for both), against exact arithmetic."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
from bruteforce import random_network

from cardinal.activations import Activation
from cardinal.bounds import BoundedForward
from cardinal.exact import ExactNetwork

FAMILIES = [
    Activation.make("relu"),
    Activation.make("leaky_relu", slope=0.1),
    Activation.make("hardtanh", min=0.0, max=1.0),
    Activation.make("step", at=0.0),
    Activation.make("sigmoid"),
    Activation.make("tanh"),
    Activation.make("softplus"),
    Activation.make("identity"),
]


@pytest.mark.parametrize("activation", FAMILIES, ids=lambda a: a.name)
def test_numpy_and_torch_passes_bound_the_exact_output_and_decide_alike(activation: Activation) -> None:
    """For both array kinds: the exact output lies within the bound of f on every row not unsure
    (enclosures for smooth units); f agrees between the two within the bounds; and the decisions
    equal exact arithmetic's, thresholds at some rows' own outputs included (the exact fallback)."""
    rng = np.random.default_rng(len(activation.name))
    net = random_network(rng, 6, (7, 5), activation, grain=4 if activation.name == "step" else 0)
    forward, exact = BoundedForward(net), ExactNetwork(net)
    Y = rng.uniform(size=(40, 6))
    Y[:8] = np.round(Y[:8] * 4) / 4  # short dyadics: exact ties at the step's breakpoint happen
    enclosures = [row[0] for row in exact.outputs(Y)]
    f_numpy, bound_numpy, unsure_numpy = forward(Y)
    f_torch, bound_torch, unsure_torch = (a.numpy() for a in forward(torch.as_tensor(Y)))
    assert isinstance(f_numpy, np.ndarray) and f_numpy.shape == bound_numpy.shape == unsure_numpy.shape == (40,)
    for f, bound, unsure in ((f_numpy, bound_numpy, unsure_numpy), (f_torch, bound_torch, unsure_torch)):
        for row, enclosure in enumerate(enclosures):
            if not unsure[row]:
                assert Fraction(f[row]) - Fraction(bound[row]) <= enclosure.lower, (activation.name, row)
                assert enclosure.upper <= Fraction(f[row]) + Fraction(bound[row]), (activation.name, row)
    both = ~unsure_numpy & ~unsure_torch
    assert (np.abs(f_numpy - f_torch)[both] <= (bound_numpy + bound_torch)[both]).all()
    assert both.sum() >= 30  # the bound is not vacuous: most rows are decided in float
    for threshold in (float(np.median(f_numpy)), float(f_numpy[3]), float(f_numpy[9])):
        truth = exact.predictions(Y, threshold)
        assert (forward.predictions(Y, threshold) == truth).all()
        assert (forward.predictions(torch.as_tensor(Y), threshold).numpy() == truth).all()
        predicted, f = forward.decide(Y, threshold)
        assert (predicted == truth).all() and (f == f_numpy).all()

"""Network: JSON round trip, torch conversion, properties, exact evaluation, bad networks."""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
from cardinal.verify.generate import random_network
from torch import nn

from cardinal.activations import Activation, Step
from cardinal.errors import InputError
from cardinal.exact import Dyadic, ExactNetwork
from cardinal.network import Layer, Network
from tests.conftest import DESIGN_NETWORK

ODD_DOUBLES = [0.1, -0.0, 5e-324, 1e-300, 1.7976931348623157e308, 2.0**-1074 * 3, 1 / 3, -123456.789]


def test_json_round_trip_keeps_every_double(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    weight = rng.normal(size=(3, 4)) * 10.0 ** rng.integers(-20, 20, size=(3, 4))
    weight.flat[: len(ODD_DOUBLES)] = ODD_DOUBLES
    net = Network(
        [
            Layer(weight, rng.normal(size=3), Activation.make("step", at=0.1)),
            Layer(rng.normal(size=(1, 3)), [0.3], Activation.make("identity")),
        ]
    )
    net.save(tmp_path / "net.json")
    loaded = Network.load(tmp_path / "net.json")
    for a, b in zip(net.layers, loaded.layers, strict=True):
        assert a.weight.tobytes() == b.weight.tobytes() and a.bias.tobytes() == b.bias.tobytes()
        assert a.activation == b.activation
    assert loaded.hash == net.hash


def test_torch_round_trip_and_outputs() -> None:
    model = nn.Sequential(
        nn.Linear(4, 5),
        nn.LeakyReLU(0.2),
        nn.Linear(5, 3),
        nn.Hardtanh(0.0, 1.0),
        nn.Linear(3, 2),
        Step(0.25),
        nn.Linear(2, 2),
        nn.Sigmoid(),
        nn.Linear(2, 1),
    ).double()
    net = Network.from_torch(model)
    assert net.activation_names == ("leaky_relu", "hardtanh", "step", "sigmoid", "identity")
    X = torch.rand(10, 4, dtype=torch.float64)
    assert torch.equal(net.forward(X), model(X)[:, 0])
    assert torch.equal(net.to_torch()(X), model(X))
    assert Network.from_torch(net.to_torch()).hash == net.hash


def test_from_torch_rejects_unknown_modules() -> None:
    with pytest.raises(InputError, match=r"module 1 \(GELU\) is not supported: cardinal.s activations are relu"):
        Network.from_torch(nn.Sequential(nn.Linear(2, 1), nn.GELU()))
    with pytest.raises(InputError, match="beta=2"):
        Network.from_torch(nn.Sequential(nn.Linear(2, 1), nn.Softplus(beta=2.0)))
    with pytest.raises(InputError, match="not preceded by a Linear"):
        Network.from_torch(nn.Sequential(nn.ReLU(), nn.Linear(2, 1)))


def test_properties() -> None:
    rng = np.random.default_rng(1)
    assert random_network(rng, 3, (4,), "relu").is_admissible
    step = random_network(rng, 3, (4,), "step")
    assert step.is_monotone and not step.is_admissible and step.is_piecewise_linear
    sigmoid = random_network(rng, 3, (4,), "sigmoid")
    assert sigmoid.is_admissible and not sigmoid.is_piecewise_linear
    signed = random_network(rng, 3, (4,), "relu", monotone=False)
    assert not signed.is_monotone and not signed.is_admissible
    assert signed.monotonicity_problems()[0].startswith("layer 1 has")


@pytest.mark.parametrize("family", ["relu", "leaky_relu", "hardtanh", "step", "sigmoid", "tanh", "softplus"])
def test_exact_forward_agrees_with_float(family: str) -> None:
    rng = np.random.default_rng(2)
    net = random_network(rng, 5, (6, 4), family, monotone=False)
    X = rng.random((8, 5))
    floats = net.forward(X).numpy()
    for value, enclosure in zip(floats, [row[0] for row in ExactNetwork(net).outputs(X)], strict=True):
        assert float(enclosure.lower) == pytest.approx(value, rel=1e-12, abs=1e-12)
        assert 0 <= enclosure.width < Fraction(1, 10**60)
        if net.is_piecewise_linear:
            assert enclosure.width == 0


def test_dyadic_conversion_is_exact() -> None:
    values = np.array(ODD_DOUBLES)
    assert [Fraction(v) for v in values] == list(Dyadic.from_floats(values).fractions())


def test_exact_arithmetic_sees_what_floats_round_away() -> None:
    net = Network([Layer(np.array([[1.0, 1e-17]]), np.array([0.0]), Activation.make("identity"))])
    assert float(net.forward(np.ones(2))) == 1.0
    assert ExactNetwork(net).outputs(np.ones((1, 2)))[0][0].lower == 1 + Fraction(1e-17)


# ------------------------------------------------------------------ bad networks
def _broken(mutate) -> dict:
    document = copy.deepcopy(DESIGN_NETWORK)
    mutate(document)
    return document


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["layers"][1].update(weight=[[1.0, 0.6, 0.2]]), r"layer 2: weight has 3 columns but layer 1 has 2 outputs"),
        (lambda d: d["layers"][0].update(bias=[0.0]), r"layer 1: bias has 1 entries but weight has 2 rows"),
        (lambda d: d["layers"][0].update(activation="gelu"), r"layer 1: unknown activation 'gelu'"),
        (
            lambda d: d["layers"][0].update(activation={"name": "leaky_relu", "slope": -0.1}),
            r"layer 1: leaky_relu slope -0.1 is negative",
        ),
        (
            lambda d: d["layers"][0].update(activation={"name": "hardtanh", "min": 1, "max": 0}),
            r"layer 1: hardtanh min 1.0 exceeds max",
        ),
        (
            lambda d: d["layers"][0].update(activation={"name": "step", "height": 2}),
            r"layer 1: activation 'step' takes no parameter 'height'",
        ),
        (lambda d: d["layers"][0]["weight"][1].append(3.0), r"layer 1: weight is ragged"),
        (lambda d: d["layers"][0]["weight"][0].__setitem__(1, "x"), r"layer 1: weight\[0\]\[1\]: 'x' is not a number"),
        (lambda d: d["layers"][1]["weight"][0].__setitem__(0, float("inf")), r"layer 2: weight\[0\]\[0\]: inf is not finite"),
        (lambda d: d["layers"][1].update(bias=[float("nan")]), r"layer 2: bias\[0\]: nan is not finite"),
        (lambda d: d.update(layers=[]), r"'layers' must be a non-empty list"),
        (lambda d: d.update(format="onnx"), r"'format' must be 'cardinal.network/1'"),
        (lambda d: d["layers"][0].pop("bias"), r"layer 1: needs 'weight', 'bias' and 'activation'"),
    ],
)
def test_bad_networks_name_layer_and_problem(mutate, message: str) -> None:
    with pytest.raises(InputError, match=message):
        Network.from_json(_broken(mutate))


def test_bad_network_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"network file .*missing.json not found"):
        Network.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text('{"format": "cardinal.network/1", "layers": [')
    with pytest.raises(InputError, match=r"bad.json: malformed JSON at line 1 column \d+: "):
        Network.load(tmp_path / "bad.json")
    (tmp_path / "nan.json").write_text(json.dumps(DESIGN_NETWORK).replace("0.6", "NaN"))
    with pytest.raises(InputError, match=r"nan.json: malformed JSON: NaN is not allowed"):
        Network.load(tmp_path / "nan.json")


def test_direct_construction_checks_non_finite() -> None:
    with pytest.raises(InputError, match=r"layer 1: weight has a non-finite value nan at \[0, 1\]"):
        Network([Layer(np.array([[1.0, np.nan]]), np.array([0.0]), Activation.make("relu"))])

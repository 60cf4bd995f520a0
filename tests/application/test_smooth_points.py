"""Smooth units at their exact points, and scores ordered only where exact arithmetic decides.

sigmoid(0) = 1/2 and tanh(0) = 0 are evaluated exactly, so a step at that point is decided; two
scores are ordered only when their enclosures are disjoint or they are provably equal — never by
midpoints (issue 24: a certified false verdict came from sorting by the midpoints of enclosures
that straddled a step's point).
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from cardinal.verify.cases import Case, replay
from cardinal.verify.certify import tie_decided
from cardinal.verify.cli import main
from cardinal.verify.pipeline import certify

from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.errors import Undecided
from cardinal.exact import Enclosure, ExactNetwork, Score, exact_blocks
from cardinal.greedy import explain, explain_reference
from cardinal.network import Layer, Network
from cardinal.problem import Problem


def _issue_network() -> Network:
    """Issue 24's example: sigmoid units h = W·x − 1/2, each read by a step at 1/2 (through the
    identity), output weights [1.5, 1.5, 2, 0.5]: exactly the step network on h (step(sigmoid(h))
    = [h ≥ 0])."""
    return Network(
        [
            Layer(np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0.5, 1, 0]], dtype=float), np.full(4, -0.5), Activation.make("sigmoid")),
            Layer(np.eye(4), np.zeros(4), Activation.make("step", at=0.5)),
            Layer(np.array([[1.5, 1.5, 2.0, 0.5]]), np.zeros(1), Activation.make("identity")),
        ]
    )


def test_sigmoid_and_tanh_at_zero_are_exact_points_and_softplus_is_not() -> None:
    assert Activation.make("sigmoid").rational(Fraction(0)) == Fraction(1, 2)
    assert Activation.make("tanh").rational(Fraction(0)) == 0
    assert Activation.make("sigmoid").rational(Fraction(1, 2)) is None
    assert Activation.make("softplus").rational(Fraction(0)) is None  # ln 2
    for name, value in (("sigmoid", Fraction(1, 2)), ("tanh", Fraction(0))):
        net = Network([Layer(np.ones((1, 1)), np.array([-0.25]), Activation.make(name))])
        assert ExactNetwork(net).outputs(np.array([[0.25]]))[0] == (Enclosure(value, value),)
    softplus = Network([Layer(np.ones((1, 1)), np.zeros(1), Activation.make("softplus"))])
    (enclosure,) = ExactNetwork(softplus).outputs(np.zeros((1, 1)))[0]
    assert 0 < enclosure.width < Fraction(1, 2**200) and abs(float(enclosure.lower) - np.log(2.0)) < 1e-15  # ln 2, irrational


def test_issue_example_in_python() -> None:
    """Scores: every single feature moved to 1 gives f = 2 exactly (ties by index), Algorithm 1
    returns {0, 1, 2}; {0, 2} and {1, 2} reach f = 4 > 3.625: greedy is not minimal."""
    net, x, t = _issue_network(), np.zeros((1, 3)), 3.625
    exact = ExactNetwork(net)
    scores = exact.outputs(np.eye(3))
    assert all(score == (Enclosure(Fraction(2), Fraction(2)),) for score in scores)
    checked = explain(net, x, "contrastive", threshold=t, verify=True)
    assert checked.features(0) == (0, 1, 2) and checked.checks == ("exact",)
    assert explain_reference(net, x, "contrastive", threshold=t, exact=True).features(0) == (0, 1, 2)
    (certificate,) = certify(net, x, "contrastive", threshold=t, solvers=("enumerate",))
    assert certificate.greedy.features == (0, 1, 2) and certificate.greedy.check == "exact"
    assert certificate.verdict == "greedy_suboptimal" and certificate.certified
    assert certificate.minimum == (0, 2) and certificate.minimum_proved and certificate.gap == 1
    assert tie_decided(Problem.make(net, x[0], "contrastive", threshold=t), (0, 1, 2)) is True  # {1, 2} is another tie order


def test_issue_example_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    network, inputs = tmp_path / "net.json", tmp_path / "x.csv"
    _issue_network().save(network)
    inputs.write_text("0,0,0\n")
    flags = ["--inputs", str(inputs), "--threshold", "3.625", "--kind", "contrastive"]
    code = main(["certify", str(network), *flags, "--solvers", "z3,enumerate", "--cases", str(tmp_path / "cases")])
    (line,) = [json.loads(text) for text in capsys.readouterr().out.splitlines()]
    assert code == 0
    assert line["greedy"]["features"] == [0, 1, 2] and line["greedy_check"] == "exact"
    assert line["verdict"] == "greedy_suboptimal" and line["certified"] is True
    assert len(line["minimum"]) == 2 and line["minimum_proved"] is True


def _score(low: float, high: float, key: tuple[int, ...] = ()) -> Score:
    return Score(Enclosure(Fraction(low), Fraction(high)), tuple(Fraction(k) for k in key))


def test_exact_blocks_order_only_disjoint_or_provably_equal_scores() -> None:
    scores = {
        0: _score(3, 3),  # a point
        1: _score(1, 2, (1,)),  # overlaps 3? no: below it
        2: _score(3, 3),  # equal point: one class with 0
        3: _score(1.5, 2.5, (2,)),  # overlaps 1: undecided against it
        4: _score(5, 6, (7,)),
        5: _score(5, 6, (7,)),  # the same key as 4: provably equal, though not a point
        6: _score(5, 6, (8,)),  # the same enclosure, another key: undecided against 4 and 5
    }
    assert exact_blocks(scores, ascending=True) == [[[1], [3]], [[0, 2]], [[4, 5], [6]]]
    assert exact_blocks(scores, ascending=False) == [[[4, 5], [6]], [[0, 2]], [[3], [1]]]


def _tie_network() -> Network:
    """f(y) = sigmoid(y0 − 1/2) + sigmoid(y1 − 1/2): moving either feature of x = (0, 0) to 1 gives
    f = sigmoid(1/2) + sigmoid(−1/2) = 1 exactly, a tie no enclosure proves (the keys differ)."""
    return Network(
        [
            Layer(np.eye(2), np.full(2, -0.5), Activation.make("sigmoid")),
            Layer(np.ones((1, 2)), np.zeros(1), Activation.make("identity")),
        ]
    )


def test_overlapping_scores_are_never_ordered_by_midpoints() -> None:
    """At t = 0.99 a single feature reaches the goal, and which one Algorithm 1 takes depends on an
    order exact arithmetic cannot decide: undecided, not `exact` or `repaired`. At t = 1.2 only both
    features reach it, so the answer is {0, 1} whatever the order."""
    net, x = _tie_network(), np.zeros((1, 2))
    undecided = explain(net, x, "contrastive", threshold=0.99, verify=True)
    assert undecided.checks == ("undecided",) and int(undecided.predictions[0]) == 0
    with pytest.raises(Undecided):
        explain_reference(net, x, "contrastive", threshold=0.99, exact=True)
    whole = explain(net, x, "contrastive", threshold=1.2, verify=True)
    assert whole.features(0) == (0, 1) and whole.checks == ("exact",)
    (certificate,) = certify(net, x, "contrastive", threshold=0.99, solvers=("enumerate",))
    assert certificate.verdict == "undecided" and not certificate.certified and certificate.gap is None
    assert certificate.minimum == (0,) and certificate.minimum_proved  # the solvers' minimum, exactly
    problem = Problem.make(net, x[0], "contrastive", threshold=0.99)
    assert tie_decided(problem, (0, 1)) is None  # {0} reaches, but maybe by no order that sorts the scores
    assert tie_decided(Problem.make(net, x[0], "contrastive", threshold=1.2), (0, 1)) is False
    case = Case(net, Domain.unit(2), 0.99, x[0], "contrastive", (0,), (0,), minimum_proved=False)
    report = replay(case)  # a case claiming greedy's answer there does not hold, and says why
    assert not report.holds and "undecided" in report.reason


# ---------------------------------------------------------------------------- randomized
def _random_step_network(rng: np.random.Generator) -> Network:
    """Smooth units (sigmoid or tanh) each read by a step at the unit's value at 0, then possibly
    a piecewise-linear layer, then a width-1 output: dyadic weights, so many scores tie exactly."""
    n, width = int(rng.integers(2, 6)), int(rng.integers(2, 6))
    smooth = str(rng.choice(["sigmoid", "tanh"]))
    at = 0.5 if smooth == "sigmoid" else 0.0
    first = Layer(rng.choice([0.0, 0.5, 1.0, 2.0], size=(width, n)), rng.choice([-1.5, -1.0, -0.5, 0.0], size=width), Activation.make(smooth))
    layers = [first, Layer(np.eye(width), np.zeros(width), Activation.make("step", at=at))]
    if rng.random() < 0.5:
        hidden = int(rng.integers(1, 4))
        activation = Activation.make(str(rng.choice(["relu", "hardtanh", "identity"])))
        layers.append(Layer(rng.choice([0.0, 0.5, 1.0, 1.5], size=(hidden, width)), rng.choice([-1.0, -0.5, 0.0], size=hidden), activation))
        width = hidden
    layers.append(Layer(rng.choice([0.5, 1.0, 1.5, 2.0], size=(1, width)), np.zeros(1), Activation.make("identity")))
    return Network(layers)


def _f(net: Network, y: np.ndarray) -> Fraction:
    """f(y) in exact rational arithmetic, independently of `cardinal.exact`: step(σ(h)) at σ(0) is
    [h ≥ 0] (σ strictly increasing), the piecewise-linear layers in Fractions."""
    z = [Fraction(v) for v in y]
    for number, layer in enumerate(net.layers):
        h = [sum((Fraction(w) * v for w, v in zip(row, z, strict=True)), Fraction(b)) for row, b in zip(layer.weight, layer.bias, strict=True)]
        name = layer.activation.name
        if number == 0:
            z = h  # the step of the next layer reads σ(h) only through h ≥ 0
        elif name == "step":
            z = [Fraction(int(v >= 0)) for v in h]
        elif name == "relu":
            z = [max(v, Fraction(0)) for v in h]
        elif name == "hardtanh":
            z = [min(max(v, Fraction(-1)), Fraction(1)) for v in h]
        else:
            z = h
    return z[0]


def _algorithm_one(net: Network, x: np.ndarray, kind: str, t: Fraction) -> tuple[int, tuple[int, ...] | None]:
    """Algorithm 1 (and its dual) by brute force in exact arithmetic on the unit box: (p(x), answer)."""
    n = len(x)
    prediction = int(_f(net, x) > t)
    counterpoint = np.zeros(n) if prediction == 1 else np.ones(n)
    base, target, goal = (x, counterpoint, 1 - prediction) if kind == "contrastive" else (counterpoint, x, prediction)

    def moved(features: list[int]) -> np.ndarray:
        y = base.copy()
        y[features] = target[features]
        return y

    scores = [_f(net, moved([j])) for j in range(n)]
    ascending = (prediction == 1) == (kind == "contrastive")
    order = sorted(range(n), key=lambda j: (scores[j] if ascending else -scores[j], j))
    if kind == "abductive" and int(_f(net, counterpoint) > t) == prediction:
        return prediction, ()
    for size in range(1, n + 1):
        if int(_f(net, moved(order[:size])) > t) == goal:
            return prediction, tuple(sorted(order[:size]))
    return prediction, None


def _compare_with_algorithm_one(seed: int, networks: int) -> tuple[int, int]:
    """explain(verify=True) against `_algorithm_one` on random networks: every decided row equals
    it. Returns (rows compared, rows whose float answer was repaired)."""
    rng = np.random.default_rng(seed)
    compared = repaired = 0
    for _ in range(networks):
        net = _random_step_network(rng)
        X = rng.choice([0.0, 0.5, 1.0], size=(4, net.n_inputs))
        values = sorted({_f(net, y) for y in [*X, np.zeros(net.n_inputs), np.ones(net.n_inputs)]})
        t = float(values[int(rng.integers(len(values)))]) + float(rng.choice([0.0, 0.25]))
        for kind in ("contrastive", "abductive"):
            result = explain(net, X, kind, Domain.unit(net.n_inputs), t, device="cpu", verify=True)
            for row, x in enumerate(X):
                prediction, answer = _algorithm_one(net, x, kind, Fraction(t))
                assert result.checks[row] != "undecided", (net.to_json(), x, kind, t)  # all values here are exact points
                assert (int(result.predictions[row]), result.features(row)) == (prediction, answer), (net.to_json(), x, kind, t)
                compared += 1
                repaired += result.checks[row] == "repaired"
    return compared, repaired


def test_steps_at_smooth_points_equal_algorithm_one_in_exact_arithmetic() -> None:
    compared, _ = _compare_with_algorithm_one(seed=24, networks=40)
    assert compared == 40 * 4 * 2


@pytest.mark.slow
def test_steps_at_smooth_points_equal_algorithm_one_many_networks() -> None:
    compared, _ = _compare_with_algorithm_one(seed=2024, networks=400)
    assert compared == 400 * 4 * 2

"""Certificates of CXp claims on ReLU networks without the monotone shortcut (method "lp-tree",
`cardinal.solvers.proof_lp`): a branch and bound over the checker's own LP relaxation. Accepted
exactly where brute force over the Boolean cube (or the exact MILP on a real box) says the claim
is true, never made where it is false, and every tampering rejected."""

from __future__ import annotations

import copy
import itertools
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cardinal.solvers.base import solve_minimum
from cardinal.solvers.proof import problem_json, search
from cardinal.verify.cli import main

from cardinal import checker
from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.network import Layer, Network
from cardinal.problem import Problem
from tests.bruteforce import vertex_minimum, vertex_valid


def _network(rng: np.random.Generator, n: int, hidden: tuple[int, ...], classes: int = 1, activation: Any = "relu") -> Network:
    """Weights of both signs (multiples of 1/64), hidden layers of `activation` (JSON form),
    `classes` identity outputs."""
    layers, fan_in = [], n
    widths = (*hidden, classes)
    for number, width in enumerate(widths):
        weight = np.round(rng.normal(size=(width, fan_in)) / np.sqrt(fan_in) * 64) / 64
        bias = np.round(rng.normal(size=width) * 0.3 * 64) / 64
        layers.append(Layer(weight, bias, Activation.from_json(activation if number < len(hidden) else "identity")))
        fan_in = width
    return Network(layers)


def _cube(seed: int, classes: int = 1, activation: Any = "relu", hidden: tuple[int, ...] = (10,)) -> Problem:
    rng = np.random.default_rng(seed)
    net = _network(rng, 7, hidden, classes, activation)
    x = (rng.random(7) < 0.5).astype(float)
    return Problem.make(net, x, "contrastive", Domain.boolean(7), 0.0 if classes == 1 else None)


def _check(certificate: dict[str, Any], problem: Problem) -> checker.Report:
    return checker.check(certificate, problem.net.to_json())


@pytest.mark.parametrize("classes", [1, 3], ids=["K=1", "K=3"])
def test_cxp_claims_on_boolean_cubes_agree_with_brute_force(classes: int) -> None:
    kinds, splits = set(), set()
    for seed in range(10 if classes == 1 else 30):
        problem = _cube(seed, classes)
        assert not problem.monotone
        m = vertex_minimum(problem)
        k = problem.n if m is None else m - 1
        if k >= 0:
            found = search(problem, k)
            assert found.certificate is not None, found.reason
            assert found.certificate["proof"]["method"] == "lp-tree"
            assert found.certificate["claim"] == ({"none_exists": True} if m is None else {"no_explanation_within": k})
            report = _check(found.certificate, problem)
            assert report.accepted, report.message
            kinds.add("none" if m is None else "within")
            splits |= {kind for kind in ("feature", "unit") if f'"{kind}"' in json.dumps(found.certificate)}
        if m is not None:
            false = search(problem, m)  # a CXp of m features exists: no certificate, and one that shows it
            assert false.certificate is None and false.counterexample is not None, false.reason
            assert len(false.counterexample) <= m and vertex_valid(problem, false.counterexample)
    assert kinds == {"none", "within"} and splits == {"feature", "unit"}


PIECEWISE = [{"name": "leaky_relu", "slope": 0.25}, {"name": "hardtanh", "min": -0.5, "max": 0.75}]


def _splits(node: Any) -> list[tuple[int, ...]]:
    """The breakpoints a tree (or a root of rivals) splits on."""
    if not isinstance(node, dict) or "multipliers" in node:
        return []
    if "rivals" in node:
        return [key for tree in node["rivals"] for key in _splits(tree)]
    own = [tuple(node["unit"])] if "unit" in node else []
    first, second = ("in", "out") if "feature" in node else ("active", "inactive")
    return own + _splits(node[first]) + _splits(node[second])


@pytest.mark.parametrize("classes", [1, 3], ids=["K=1", "K=3"])
@pytest.mark.parametrize("activation", PIECEWISE, ids=["leaky_relu", "hardtanh"])
def test_leaky_relu_and_hardtanh_cxp_claims_on_boolean_cubes_agree_with_brute_force(activation: Any, classes: int) -> None:
    """Two hidden layers: claims at the minimum − 1 accepted, at the minimum a counterexample; the
    trees split on breakpoints (a hardtanh unit's min and max, [layer, j, 0] and [layer, j, 1])."""
    keys: set[tuple[int, ...]] = set()
    for seed in range(6):
        problem = _cube(seed, classes, activation, (10, 6))
        m = vertex_minimum(problem)
        k = problem.n if m is None else m - 1
        if k >= 0:
            found = search(problem, k)
            assert found.certificate is not None, found.reason
            report = _check(found.certificate, problem)
            assert report.accepted, report.message
            keys |= set(_splits(found.certificate["proof"]["root"]))
        if m is not None:
            false = search(problem, m)
            assert false.certificate is None and false.counterexample is not None, false.reason
            assert len(false.counterexample) <= m and vertex_valid(problem, false.counterexample)
    assert {len(key) for key in keys} == ({2} if activation["name"] == "leaky_relu" else {3})
    assert activation["name"] == "leaky_relu" or {key[2] for key in keys} == {0, 1}


def test_a_piecewise_certificate_held_against_other_activations_or_breakpoints_is_rejected() -> None:
    """A hardtanh certificate that splits on both breakpoints: another min/max or a leaky_relu of
    slope 1 or more in its place (with the matching SHA-256), or a split on a breakpoint that is
    not there, is rejected."""
    for seed in range(6):
        problem = _cube(seed, 1, PIECEWISE[1], (10, 6))
        m = vertex_minimum(problem)
        certificate = search(problem, problem.n if m is None else m - 1).certificate
        assert certificate is not None and _check(certificate, problem).accepted
        keys = _splits(certificate["proof"]["root"])
        if {key[2] for key in keys} == {0, 1}:
            break
    else:
        raise AssertionError("no tree splits on both breakpoints")

    def rejected(layer: Any, root: Any = None) -> bool:
        other = problem.net.to_json()
        other["layers"][0]["activation"] = layer
        tampered = copy.deepcopy(certificate)
        tampered["problem"]["network_sha256"] = checker.network_sha256(other)[0]
        if root is not None:
            tampered["proof"]["root"] = root
        try:
            return not checker.check(tampered, other).accepted
        except checker.CertificateError:
            return True

    assert not rejected(PIECEWISE[1])  # the same network: accepted
    assert rejected({"name": "hardtanh", "min": -0.5, "max": 0.5})
    assert rejected({"name": "hardtanh", "min": -0.25, "max": 0.75})
    assert rejected({"name": "leaky_relu", "slope": 1.5})
    root = certificate["proof"]["root"]
    layer, j = keys[0][:2]
    assert rejected(PIECEWISE[1], {"unit": [layer, j, 2], "active": root, "inactive": root})
    assert rejected(PIECEWISE[1], {"unit": [layer, j], "active": root, "inactive": root})
    assert rejected(PIECEWISE[1], {"unit": [[layer], j, 0], "active": root, "inactive": root})  # not a TypeError


def _sigma(activation: Any, h: Fraction) -> Fraction:
    """The activation at h, exactly (the test's own)."""
    name = activation if isinstance(activation, str) else activation["name"]
    if name == "relu":
        return max(h, Fraction(0))
    if name == "leaky_relu":
        return h if h >= 0 else Fraction(activation["slope"]) * h
    return min(max(h, Fraction(activation["min"])), Fraction(activation["max"]))


@pytest.mark.parametrize("activation", ["relu", *PIECEWISE], ids=["relu", "leaky_relu", "hardtanh"])
def test_every_point_satisfies_the_checkers_relaxation_in_its_phases(activation: Any) -> None:
    """Soundness of the reference encoding: at points of a real box moved off x on random
    features (inside or at an end), the network's exact values (computed here) satisfy every
    variable bound and row of the node whose selectors and phases the point picks."""
    rng = np.random.default_rng(5)
    net = _network(rng, 5, (6, 4), 3, activation)
    x = rng.uniform(0, 1, 5).round(3)
    box = ((x - 0.5).tolist(), (x + 0.5).tolist(), False)
    relaxation = checker.LpRelaxation.of(net.to_json(), x.tolist(), box, None, 5)
    assert relaxation.units
    for _ in range(300):
        moved = rng.random(5) < 0.5
        ends = np.where(rng.random(5) < 0.5, box[0], box[1])
        y = np.where(moved, np.where(rng.random(5) < 0.3, ends, rng.uniform(box[0], box[1])), x)
        values = [Fraction(int(v)) for v in moved] + [Fraction(v) for v in y]
        previous = values[5:]
        for layer in net.layers:
            spec = layer.activation.to_json()
            h = [
                sum((Fraction(w) * v for w, v in zip(row, previous, strict=True)), Fraction(b))
                for row, b in zip(layer.weight.tolist(), layer.bias.tolist(), strict=True)
            ]
            current = []
            for value in h:
                values.append(value)
                if spec != "identity":
                    values.append(_sigma(spec, value))
                current.append(values[-1])
            previous = current
        phases = {key: values[point.h] >= point.at for key, point in relaxation.units.items()}
        lo, hi, sides = relaxation.node({i: int(m) for i, m in enumerate(moved)}, phases)
        assert len(values) == len(lo) and all(a <= v <= b for a, v, b in zip(lo, values, hi, strict=True))
        for row, (coefficients, low, high) in enumerate(relaxation.rows):
            low, high = sides.get(row, (low, high))
            total = sum(a * values[v] for v, a in coefficients.items())
            assert (low is None or low <= total) and (high is None or total <= high), (row, phases)


def _real_box(seed: int, activation: Any = "relu") -> Problem:
    rng = np.random.default_rng(seed)
    net = _network(rng, 8, (8, 6), 1, activation)
    x = rng.uniform(0, 1, 8).round(3)
    threshold = float(net.forward(x)) + (0.1 if seed % 2 else -0.1)
    return Problem.make(net, x, "contrastive", Domain.broadcast(list(x - 0.3), list(x + 0.3), 8), threshold)


@pytest.mark.parametrize(
    ("seed", "activation"), [(0, "relu"), (1, "relu"), (2, "relu"), (2, PIECEWISE[0]), (2, PIECEWISE[1])],
    ids=["relu-0", "relu-1", "relu-2", "leaky_relu-2", "hardtanh-2"],
)  # fmt: skip
def test_a_real_box_minimum_of_the_exact_milp_is_certified(seed: int, activation: Any) -> None:
    """Two hidden layers on an ε-ball; the claim is the exact MILP's (an exact backend)."""
    problem = _real_box(seed, activation)
    outcome = solve_minimum(problem.net, problem.x, "contrastive", problem.domain, problem.threshold, solver="exact-milp")
    assert outcome.status in ("optimal", "none_exists") and outcome.exact
    k = problem.n if outcome.status == "none_exists" else outcome.size - 1
    found = search(problem, k)
    assert found.certificate is not None, found.reason
    report = _check(found.certificate, problem)
    assert report.accepted, report.message
    if outcome.status == "optimal":
        assert search(problem, outcome.size).certificate is None


def _ball(seed: int) -> Problem:
    """A K = 3 ReLU classifier with two hidden layers on an ε-ball of radius 0.5."""
    rng = np.random.default_rng(seed)
    net = _network(rng, 8, (8, 6), 3)
    x = rng.uniform(0, 1, 8).round(3)
    return Problem.make(net, x, "contrastive", Domain.broadcast(-1.0, 2.0, 8).ball(x, 0.5))


@pytest.mark.parametrize("seed", [0, 1])
def test_a_k3_real_box_minimum_of_z3_is_certified(seed: int) -> None:
    """K = 3 on an ε-ball: the claim is z3's exact minimum (seed 0: no CXp, with rivals on both
    sides of p(x) = 1; seed 1: a minimum of 4), and one more feature gets a counterexample."""
    problem = _ball(seed)
    outcome = solve_minimum(problem.net, problem.x, "contrastive", problem.domain, None, solver="z3")
    assert outcome.status == ("none_exists" if seed == 0 else "optimal") and outcome.exact
    k = problem.n if outcome.status == "none_exists" else outcome.size - 1
    found = search(problem, k)
    assert found.certificate is not None, found.reason
    rivals = found.certificate["proof"]["root"]["rivals"]
    assert len(rivals) == 3 and rivals[problem.prediction] is None
    report = _check(found.certificate, problem)
    assert report.accepted, report.message
    if outcome.status == "optimal":
        false = search(problem, outcome.size)
        assert false.certificate is None and false.counterexample is not None
        assert len(false.counterexample) <= outcome.size and problem.flips(_moved(problem, false.counterexample))


def _moved(problem: Problem, features: tuple[int, ...]) -> np.ndarray:
    """x with `features` moved to ends of the box that flip it (brute force over the ends; x when
    none does — seed 1's counterexample flips at an end)."""
    for ends in itertools.product(*[(problem.domain.lower[i], problem.domain.upper[i]) for i in features]):
        y = problem.x.copy()
        y[list(features)] = ends
        if problem.flips(y):
            return y
    return problem.x


def _tie(prediction: int) -> Problem:
    """K = 2 on one Boolean feature y, x = 0: outputs (y, 1) when p(x) = 1, (1, y) when p(x) = 0.
    At y = 1 the two outputs tie and the tie goes to class 0: a CXp when p(x) = 1, none when 0."""
    weight, bias = (
        (np.array([[1.0], [0.0]]), np.array([0.0, 1.0])) if prediction == 1 else (np.array([[0.0], [1.0]]), np.array([1.0, 0.0]))
    )
    problem = Problem.make(
        Network([Layer(weight, bias, Activation.make("identity"))]), np.zeros(1), "contrastive", Domain.boolean(1)
    )
    assert problem.prediction == prediction
    return problem


def test_argmax_ties_go_to_the_lowest_index() -> None:
    """A rival below p(x) wins a tie (its leaves need B > 0), one above does not (B ≥ 0 closes).
    Multipliers ∓1 on rows 3 and 4 (the two outputs' rows) bound f_c − f_j by exactly 0."""
    below = _tie(1)
    found = search(below, 1)
    assert found.certificate is None and found.counterexample == (0,)
    above = _tie(0)
    found = search(above, 1)
    assert found.certificate is not None and _check(found.certificate, above).accepted
    for problem, sign in ((below, -1.0), (above, 1.0)):
        c = problem.prediction
        rivals: list[Any] = [None, None]
        rivals[1 - c] = {"multipliers": [[3, sign], [4, -sign]]}
        certificate = {
            **found.certificate,
            "problem": problem_json(problem),
            "proof": {"method": "lp-tree", "root": {"rivals": rivals}},
        }
        report = _check(certificate, problem)
        assert report.accepted == (problem is above), report.message
        assert problem is above or "does not pass 0.0" in report.message


def _leaves(node: dict[str, Any]) -> list[dict[str, Any]]:
    if "multipliers" in node:
        return [node]
    first, second = ("in", "out") if "feature" in node else ("active", "inactive")
    return _leaves(node[first]) + _leaves(node[second])


def _rich() -> tuple[Problem, dict[str, Any]]:
    problem = _real_box(2)
    certificate = search(problem, 3).certificate
    assert certificate is not None
    return problem, certificate


def test_every_tampering_of_an_lp_certificate_is_rejected() -> None:
    problem, certificate = _rich()
    document = problem.net.to_json()
    root = certificate["proof"]["root"]
    assert "unit" in root and len(_leaves(root)) >= 3
    assert _check(certificate, problem).accepted

    def rejected(change, network: dict[str, Any] | None = None) -> bool:
        tampered = copy.deepcopy(certificate)
        change(tampered)
        try:
            return not checker.check(tampered, network or document).accepted
        except checker.CertificateError:
            return True

    def first_leaf(c: dict[str, Any]) -> dict[str, Any]:
        return _leaves(c["proof"]["root"])[0]

    assert rejected(lambda c: c["claim"].update(no_explanation_within=4))  # a claim raised by one
    # a multiplier changed: every multiplier of a leaf halved, one multiplier's sign flipped, one dropped
    assert rejected(lambda c: first_leaf(c).update(multipliers=[[r, v / 2] for r, v in first_leaf(c)["multipliers"]]))
    assert rejected(lambda c: first_leaf(c)["multipliers"][0].__setitem__(1, -first_leaf(c)["multipliers"][0][1]))
    assert rejected(lambda c: first_leaf(c).update(multipliers=[]))
    # a step removed: the root replaced by one of its children
    for child in ("in", "out", "active", "inactive"):
        if child in root:
            assert rejected(lambda c, child=child: c["proof"].update(root=c["proof"]["root"][child]))
    assert rejected(lambda c: c["proof"].update(method="witness-hitting"))
    # held against another input, threshold, box or network
    f = float(problem.net.forward(problem.x))  # a threshold at f(x): the same prediction, moves flip it easily
    assert rejected(lambda c: c["problem"].update(threshold=f - 2.0**-20 if problem.prediction else f))
    assert rejected(lambda c: c["problem"].update(lower=[v - 1.0 for v in c["problem"]["lower"]]))
    assert rejected(lambda c: c["problem"].update(kind="abductive"))
    other = copy.deepcopy(document)
    other["layers"][0]["weight"][0][0] += 0.5
    assert rejected(lambda c: None, other)
    assert rejected(lambda c: c["problem"].update(network_sha256=checker.network_sha256(other)[0]), other)


def test_every_tampering_of_a_k3_lp_certificate_is_rejected() -> None:
    problem = _ball(1)
    certificate = search(problem, 3).certificate
    assert certificate is not None and _check(certificate, problem).accepted
    document, c = problem.net.to_json(), problem.prediction
    trees = certificate["proof"]["root"]["rivals"]
    rivals = [j for j in range(3) if j != c]
    assert any("unit" in trees[j] or "feature" in trees[j] for j in rivals)  # a split below the rival split

    def rejected(change, network: dict[str, Any] | None = None) -> bool:
        tampered = copy.deepcopy(certificate)
        change(tampered)
        try:
            return not checker.check(tampered, network or document).accepted
        except checker.CertificateError:
            return True

    def tree(t: dict[str, Any], j: int) -> dict[str, Any]:
        return t["proof"]["root"]["rivals"][j]

    assert rejected(lambda t: t["claim"].update(no_explanation_within=4))  # a claim raised by one
    for j in rivals:  # a rival's tree removed or replaced by the other's; a leaf's multipliers negated or dropped
        assert rejected(lambda t, j=j: t["proof"]["root"]["rivals"].__setitem__(j, None))
        assert rejected(lambda t, j=j: t["proof"]["root"]["rivals"].__setitem__(j, tree(t, 3 - c - j)))
        for leaf in range(len(_leaves(trees[j]))):
            negated = [[r, -v] for r, v in _leaves(trees[j])[leaf]["multipliers"]]
            assert rejected(lambda t, j=j, leaf=leaf, negated=negated: _leaves(tree(t, j))[leaf].update(multipliers=negated))
            assert rejected(lambda t, j=j, leaf=leaf: _leaves(tree(t, j))[leaf].update(multipliers=[]))
    assert rejected(lambda t: t["proof"]["root"]["rivals"].pop())  # K − 1 entries
    assert rejected(lambda t: t["proof"]["root"]["rivals"].__setitem__(c, tree(t, rivals[0])))  # a tree at p(x)
    assert rejected(lambda t: t["proof"].update(root=tree(t, rivals[0])))  # one rival's tree as the root
    assert rejected(lambda t: t["problem"].update(x=[v + 0.25 for v in t["problem"]["x"]]))
    assert rejected(lambda t: t["problem"].update(threshold=0.0))
    other = copy.deepcopy(document)  # another network: the first rival's output raised
    other["layers"][-1]["bias"][rivals[0]] += 0.125
    assert problem.net.from_json(other).forward(problem.x).argmax() == c
    assert rejected(lambda t: t["problem"].update(network_sha256=checker.network_sha256(other)[0]), other)


def test_a_binary_box_whose_x_is_no_vertex_is_refused() -> None:
    """On a binary box the rows move a feature to the end x is not: an x between the ends would
    leave the other end out of the relaxation, so the checker refuses it."""
    problem = _cube(0)
    certificate = search(problem, vertex_minimum(problem) - 1).certificate
    assert certificate is not None and _check(certificate, problem).accepted
    certificate["problem"]["x"][0] = 0.5
    report = _check(certificate, problem)
    assert not report.accepted and "no vertex" in report.message


def test_a_split_on_a_stable_unit_or_a_smooth_network_is_refused() -> None:
    problem, certificate = _rich()
    relaxation = checker.LpRelaxation.of(
        problem.net.to_json(), problem.x.tolist(), (problem.domain.lower.tolist(), problem.domain.upper.tolist(), False),
        problem.threshold, 3,
    )  # fmt: skip
    stable = next([layer, j] for layer in range(2) for j in range(8) if (layer, j) not in relaxation.units)
    tampered = copy.deepcopy(certificate)
    tampered["proof"]["root"] = {"unit": stable, "active": certificate["proof"]["root"], "inactive": certificate["proof"]["root"]}
    with pytest.raises(checker.CertificateError):
        checker.check(tampered, problem.net.to_json())
    smooth = problem.net.to_json()
    smooth["layers"][0]["activation"] = "sigmoid"
    tampered = copy.deepcopy(certificate)
    tampered["problem"]["network_sha256"] = checker.network_sha256(smooth)[0]
    report = checker.check(tampered, smooth)
    assert not report.accepted and "method lp-tree takes" in report.message and "sigmoid" in report.message


def test_solve_minimum_and_certify_write_lp_certificates(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    problem = _real_box(0)
    outcome = solve_minimum(
        problem.net, problem.x, "contrastive", problem.domain, problem.threshold, solver="exact-milp", proof=tmp_path / "one.json"
    )
    assert outcome.status == "optimal" and "certificate:" in outcome.message
    # the exact MILP's levels proved it: the certificate is written from their trees (issue 51)
    assert json.loads((tmp_path / "one.json").read_text())["proof"]["method"] == "subset-split"
    assert main(["proof", "check", str(tmp_path / "one.json")]) == 0
    cube = _cube(0)
    network, inputs, folder = tmp_path / "net.json", tmp_path / "x.csv", tmp_path / "proofs"
    network.write_text(json.dumps(cube.net.to_json()))
    inputs.write_text(",".join(map(str, cube.x)) + "\n")
    code = main(["certify", str(network), "--inputs", str(inputs), "--binary", "--threshold", "0",
                 "--proof", str(folder), "--out", str(tmp_path / "out.jsonl")])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    lines = [json.loads(text) for text in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert {line["kind"] for line in lines} == {"contrastive", "abductive"}
    for line in lines:  # both kinds proved on this non-monotone network, each with an accepted certificate
        assert line["minimum_proved"] and line["proof"]["accepted"], line
        method = json.loads((folder / line["proof"]["file"]).read_text())["proof"]["method"]
        assert method in ({"lp-tree"} if line["kind"] == "contrastive" else {"reset-bound", "witness-hitting"})

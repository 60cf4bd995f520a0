"""The independent proof checker (`cardinal.checker`): it accepts what is true, rejects every
tampering, and shares no code with cardinal.

Certificates here are built by a brute-force tree builder of the test's own (every set judged by
`cardinal.exact`, independently of the checker), so that the checker is tested against ground
truth rather than against cardinal's proof generator.
"""

from __future__ import annotations

import ast
import copy
import itertools
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import mpmath
import numpy as np
import pytest

from cardinal import checker
from cardinal.activations import Activation
from cardinal.checker import exact
from cardinal.domain import Domain
from cardinal.network import Layer, Network
from cardinal.problem import Problem

ROOT = Path(__file__).resolve().parents[2]


def _net(weights: list[list[list[float]]], biases: list[list[float]], activation: str | dict = "relu") -> Network:
    layers = [
        Layer(np.array(w, dtype=float), np.array(b, dtype=float), Activation.from_json(activation if i < len(weights) - 1 else "identity"))
        for i, (w, b) in enumerate(zip(weights, biases, strict=True))
    ]
    return Network(layers)


def _valid_sets(problem: Problem) -> set[frozenset[int]]:
    """Every explanation, by brute force over all 2^n sets (the shortcut, exact)."""
    return {frozenset(s) for r in range(problem.n + 1) for s in itertools.combinations(range(problem.n), r) if problem.is_explanation(s)}


def _tree(problem: Problem, k: int, valid: set[frozenset[int]]) -> dict[str, Any]:
    """A proof tree of "no explanation within k" from brute-force truth: invalid supersets, sizes,
    and splits on the lowest open feature."""

    def build(chosen: frozenset[int], excluded: frozenset[int]) -> dict[str, Any]:
        if len(chosen) > k:
            return {"leaf": "size"}
        allowed = frozenset(range(problem.n)) - excluded
        if allowed not in valid:
            return {"leaf": "invalid", "set": sorted(allowed)}
        feature = min(allowed - chosen)
        return {"split": feature, "in": build(chosen | {feature}, excluded), "out": build(chosen, excluded | {feature})}

    return build(frozenset(), frozenset())


def _certificate(net: Network, problem: Problem, k: int, root: dict[str, Any]) -> dict[str, Any]:
    return {
        "format": "cardinal.proof/1",
        "problem": {
            "network_sha256": checker.network_sha256(net.to_json())[0],
            "x": problem.x.tolist(),
            "kind": problem.kind,
            "lower": problem.domain.lower.tolist(),
            "upper": problem.domain.upper.tolist(),
            "binary": problem.domain.binary,
            "threshold": problem.threshold,
        },
        "claim": {"no_explanation_within": k},
        "network": net.to_json(),
        "proof": {"method": "shortcut-tree", "root": root},
    }


def _random_case(seed: int, activation: str | dict = "relu") -> tuple[Network, Problem, int]:
    """A small monotone network, an input, a kind, and the true minimum size minus one."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 7))
    net = _net(
        [rng.uniform(0, 1, (4, n)).round(3).tolist(), rng.uniform(0, 1, (1, 4)).round(3).tolist()],
        [rng.uniform(-1, 0, 4).round(3).tolist(), [0.0]],
        activation,
    )
    return _case(net, rng, seed, 0.05)


def _case(net: Network, rng: np.random.Generator, seed: int, margin: float) -> tuple[Network, Problem, int]:
    """`net`, an input drawn from `rng`, a kind (by `seed`'s parity), a threshold `margin` below or
    above the output, and the true minimum size minus one (brute force)."""
    n = net.n_inputs
    x = rng.uniform(0, 1, n).round(3)
    output = float(net.forward(x))
    kind = "contrastive" if seed % 2 else "abductive"
    problem = Problem.make(net, x, kind, Domain.unit(n), output - margin if seed % 3 else output + margin)
    sizes = [len(s) for s in _valid_sets(problem)]
    return net, problem, (min(sizes) if sizes else n + 1) - 1


@pytest.mark.parametrize("seed", range(12))
def test_true_claims_are_accepted_and_a_raised_claim_is_rejected(seed: int) -> None:
    net, problem, k = _random_case(seed)
    valid = _valid_sets(problem)
    if k < 0:
        pytest.skip("the empty set is an explanation: nothing to prove")
    certificate = _certificate(net, problem, k, _tree(problem, k, valid))
    report = checker.check(certificate)
    assert report.accepted, report.message
    if k + 1 <= problem.n:
        raised = copy.deepcopy(certificate)
        raised["claim"] = {"no_explanation_within": k + 1}  # a true minimum has k + 1 features
        assert not checker.check(raised).accepted


def _leaves(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node] if "leaf" in node else _leaves(node["in"]) + _leaves(node["out"])


def test_every_tampering_is_rejected() -> None:
    net = _net([[[1.0, 1.0, 0.5, 1.0], [0.0, 1.0, 1.0, 0.25]], [[1.0, 0.5]]], [[-1.0, 0.0], [0.0]])
    problem = Problem.make(net, np.ones(4), "contrastive", Domain.unit(4), 1.5)  # f(x) = 3.5
    k = min(len(s) for s in _valid_sets(problem)) - 1
    assert k == 1
    certificate = _certificate(net, problem, k, _tree(problem, k, _valid_sets(problem)))
    assert checker.check(certificate).accepted

    def rejected(change) -> bool:
        tampered = copy.deepcopy(certificate)
        change(tampered)
        try:
            return not checker.check(tampered).accepted
        except checker.CertificateError:
            return True

    invalid = [leaf for leaf in _leaves(certificate["proof"]["root"]) if leaf["leaf"] == "invalid"]
    assert invalid
    assert rejected(lambda c: c["claim"].update(no_explanation_within=k + 1))
    # a lemma's set changed: a feature dropped from it no longer covers its node
    assert rejected(lambda c: next(leaf for leaf in _leaves(c["proof"]["root"]) if leaf["leaf"] == "invalid")["set"].pop())
    # a step removed: a split replaced by one of its children
    assert rejected(lambda c: c["proof"].update(root=c["proof"]["root"]["in"]))
    # a leaf turned into a claim the checker must verify itself
    assert rejected(lambda c: c["proof"].update(root={"leaf": "invalid", "set": list(range(problem.n))}))
    # held against another input, another threshold, another box, another network
    assert rejected(lambda c: c["problem"].update(x=[0.0, 1.0, 1.0, 1.0]))  # there {1} is a CXp
    assert rejected(lambda c: c["problem"].update(threshold=2.5))  # there {1} is a CXp
    assert rejected(lambda c: c["problem"].update(lower=[-5.0] * problem.n))
    other = copy.deepcopy(net.to_json())
    other["layers"][0]["weight"][0][0] += 0.5
    assert rejected(lambda c: c.update(network=other))
    assert rejected(lambda c: c["problem"].update(network_sha256="0" * 64))
    assert rejected(lambda c: (c["problem"].update(kind="abductive"), c["claim"].update(no_explanation_within=2)))  # {1, 3} is an AXp


def test_a_network_of_mixed_signs_is_rejected() -> None:
    net = _net([[[1.0, -1.0], [1.0, 1.0]], [[1.0, -1.0]]], [[0.0, 0.0], [0.0]])
    problem = Problem.make(net, np.array([0.5, 0.5]), "contrastive", Domain.unit(2), -1.0)
    report = checker.check(_certificate(net, problem, 0, {"leaf": "size"}))
    assert not report.accepted and "not sign-monotone" in report.message


def test_sign_monotone_networks_use_each_features_own_end() -> None:
    """f = relu(x0 − x1): x0 increasing, x1 decreasing. At x = (1, 0), f = 1 > 0.5: a CXp moves
    x0 to 0 or x1 to 1; each alone flips, so none of size 0 exists and {0} is one of size 1."""
    net = _net([[[1.0, -1.0]], [[1.0]]], [[0.0], [0.0]])
    doc = net.to_json()
    digest = checker.network_sha256(doc)[0]
    problem = {"network_sha256": digest, "x": [1.0, 0.0], "kind": "contrastive", "lower": [0.0, 0.0], "upper": [1.0, 1.0], "binary": False, "threshold": 0.5}
    certificate = {"format": "cardinal.proof/1", "problem": problem, "claim": {"no_explanation_within": 0}, "proof": {"method": "shortcut-tree", "root": {"leaf": "all"}}}
    assert checker.check(certificate, doc).accepted
    certificate["claim"] = {"no_explanation_within": 1}
    report = checker.check(certificate, doc)
    assert not report.accepted and "is an explanation" in report.message


def test_the_bound_leaf_closes_what_interval_arithmetic_proves() -> None:
    """f = x0 + x1 + x2 (identity), x = 1, t = 0.5, CXp: moving any two features leaves f = 1 > t,
    so no CXp within 2; the budgeted bound sees it at the root."""
    net = _net([[[1.0, 1.0, 1.0]]], [[0.0]])
    doc = net.to_json()
    problem = {"network_sha256": checker.network_sha256(doc)[0], "x": [1.0] * 3, "kind": "contrastive", "lower": [0.0] * 3, "upper": [1.0] * 3, "binary": False, "threshold": 0.5}
    certificate = {"format": "cardinal.proof/1", "problem": problem, "claim": {"no_explanation_within": 2}, "proof": {"method": "shortcut-tree", "root": {"leaf": "bound"}}}
    assert checker.check(certificate, doc).accepted
    certificate["claim"] = {"no_explanation_within": 3}
    assert not checker.check(certificate, doc).accepted


@pytest.mark.parametrize("activation", ["sigmoid", "tanh", "softplus", {"name": "step", "at": 0.3}, {"name": "hardtanh", "min": 0.0, "max": 0.4}, {"name": "leaky_relu", "slope": 0.25}])
def test_other_activations(activation: str | dict) -> None:
    for seed in range(6):
        net, problem, k = _random_case(seed, activation)
        if k < 0:
            continue
        report = checker.check(_certificate(net, problem, k, _tree(problem, k, _valid_sets(problem))))
        assert report.accepted, report.message


@pytest.mark.parametrize("q", ["-63.5", "-1", "-0.001", "0.3", "1", "7.25", "40"])
def test_smooth_enclosures_contain_the_true_value(q: str) -> None:
    value = Fraction(q)
    with mpmath.workprec(400):
        for name, function in (("sigmoid", lambda v: 1 / (1 + mpmath.exp(-v))), ("tanh", mpmath.tanh), ("softplus", lambda v: mpmath.log1p(mpmath.exp(v)))):
            low, high = exact._smooth(name, value)
            truth = function(mpmath.mpf(value.numerator) / value.denominator)
            assert mpmath.mpf(low.numerator) / low.denominator <= truth <= mpmath.mpf(high.numerator) / high.denominator
            assert high - low < Fraction(1, 2**30) * (1 + abs(high))


def test_exp_encloses_e_to_the_q_on_long_dyadics_and_the_ends() -> None:
    """The integer Taylor series of `_exp` (rounded down for lo, up for hi) on hidden values as the
    checker meets them: dyadics of 200 bits, both signs, up to |q| = 64."""
    rng = np.random.default_rng(7)
    values = [Fraction(64), Fraction(-64), Fraction(1, 2), Fraction(-1, 2), Fraction(1, 2**70)]
    values += [Fraction(int(rng.integers(-2**62, 2**62)) * 2**138 + int(rng.integers(0, 2**62)), 2**200) * int(scale)
               for scale in rng.choice([1, 9, 63], size=60)]  # fmt: skip
    with mpmath.workprec(600):
        for q in values:
            low, high = exact._exp(q)
            truth = mpmath.exp(mpmath.mpf(q.numerator) / q.denominator) * mpmath.mpf(2) ** exact._WORK
            assert low <= truth <= high, q
            assert high - low <= 2**-100 * truth + 2**10, q


def test_the_checker_imports_only_the_standard_library() -> None:
    """cardinal/checker/ imports the standard library and its own files (one level: `from .exact
    import ...`), nothing else of cardinal."""
    files = sorted((ROOT / "cardinal" / "checker").glob("*.py"))
    assert {path.stem for path in files} >= {"__init__", "exact"}
    own = {path.stem for path in files}
    for path in files:
        tree = ast.parse(path.read_text())
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        relative = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
        imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and not node.level}
        assert all(node.level == 1 and node.module in own for node in relative), f"{path.name}: only its own files, one level up"
        assert imported <= {"__future__", "hashlib", "itertools", "json", "math", "dataclasses", "fractions", "typing"}, path.name


@pytest.mark.parametrize("method, root", [("shortcut-tree", {"leaf": "invalid", "set": [0]}), ("box-tree", {"leaf": "bound"})])
def test_a_leaky_relu_of_negative_slope_is_not_a_network(method: str, root: dict) -> None:
    """Interval arithmetic and the sign analysis need non-decreasing units. A hand-made network
    with a negative leaky_relu slope (cardinal refuses to load one) made the checker accept a false
    shortcut-tree certificate: f(y) = leaky(y) is 0 at x = 0 (predicted 0 at t = 0.5), and y = −1
    gives f = 1, a CXp of one feature; the sign analysis took the unit for increasing."""
    network = {"format": "cardinal.network/1", "layers": [
        {"weight": [[1.0]], "bias": [0.0], "activation": {"name": "leaky_relu", "slope": -1.0}},
        {"weight": [[1.0]], "bias": [0.0], "activation": "identity"}]}  # fmt: skip
    with pytest.raises(checker.CertificateError, match="negative slope"):
        checker.network_sha256(network)
    good = copy.deepcopy(network)
    good["layers"][0]["activation"]["slope"] = 0.5
    problem = {"network_sha256": checker.network_sha256(good)[0], "x": [0.0], "kind": "contrastive", "lower": [-1.0],
               "upper": [0.0], "binary": False, "threshold": 0.5}  # fmt: skip
    certificate = {"format": "cardinal.proof/1", "problem": problem, "claim": {"none_exists": True},
                   "proof": {"method": method, "root": root}}  # fmt: skip
    assert checker.check(certificate, good).accepted  # slope 0.5: f ≤ 0 on the box, so no CXp: true
    with pytest.raises(checker.CertificateError, match="negative slope"):
        checker.check(certificate, network)


def test_malformed_certificates_are_errors_not_rejections() -> None:
    net = _net([[[1.0]]], [[0.0]])
    for bad in ({}, {"format": "cardinal.proof/1"}, {"format": "cardinal.proof/1", "problem": {}, "claim": {}, "proof": {}}):
        with pytest.raises(checker.CertificateError):
            checker.check(bad, net.to_json())
    good = json.loads(json.dumps({"format": "x"}))
    with pytest.raises(checker.CertificateError):
        checker.check(good)


def _sign_monotone_case(seed: int, activation: str | dict) -> tuple[Network, Problem, int]:
    """A sign-monotone network of 7 features (two hidden layers, 5 and 4 units; the first two
    features decreasing), an input, a kind, and the true minimum size minus one (brute force)."""
    rng = np.random.default_rng(seed)
    n = 7
    first = rng.uniform(0, 1, (5, n)) * np.where(np.arange(n) < 2, -1.0, 1.0)
    net = _net(
        [first.round(3).tolist(), rng.uniform(0, 1, (4, 5)).round(3).tolist(), rng.uniform(0, 1, (1, 4)).round(3).tolist()],
        [rng.uniform(-1, 0.5, 5).round(3).tolist(), rng.uniform(-1, 0.5, 4).round(3).tolist(), [0.0]],
        activation,
    )
    return _case(net, rng, seed, 0.2)


LINEAR_ACTIVATIONS = ["relu", {"name": "leaky_relu", "slope": 0.25}, {"name": "hardtanh", "min": -1.0, "max": 0.75}]


@pytest.mark.parametrize("activation", LINEAR_ACTIVATIONS, ids=["relu", "leaky_relu", "hardtanh"])
def test_the_linear_bound_closes_no_node_that_holds_an_explanation(activation: str | dict) -> None:
    """Against brute force (every set of at most k features judged by `cardinal.exact`): on random
    nodes of sign-monotone networks, the leaf "linear" closes only nodes without an explanation,
    and it closes many of the others, more than the interval bound."""
    closed = interval = 0
    for seed in range(6):
        net, problem, _ = _sign_monotone_case(seed, activation)
        valid = _valid_sets(problem)
        rng = np.random.default_rng(seed)
        for k in range(problem.n):
            shortcut = checker.Shortcut.of(net.to_json(), problem.base.tolist(), problem.target.tolist(), problem.goal, problem.threshold, k)
            for _ in range(4):
                order = rng.permutation(problem.n).tolist()
                cut, stop = int(rng.integers(0, min(k, 2) + 1)), int(rng.integers(0, 3))
                chosen, excluded = order[:cut], order[cut : cut + stop]
                allowed = frozenset(range(problem.n)) - set(excluded)
                holds = any(s >= set(chosen) and s <= allowed and len(s) <= k for s in valid)
                open_ = sorted(allowed - set(chosen))
                if shortcut.linear_closes(frozenset(chosen), open_):
                    assert not holds, (seed, k, chosen, excluded)
                    closed += 1
                    interval += shortcut.bound_closes(frozenset(chosen), open_)
    assert closed >= 40 and interval < closed, (closed, interval)


@pytest.mark.parametrize("activation", LINEAR_ACTIVATIONS, ids=["relu", "leaky_relu", "hardtanh"])
def test_a_linear_leaf_proves_true_claims_and_a_raised_claim_is_rejected_naming_the_node(activation: str | dict) -> None:
    """A certificate whose tree is one leaf "linear": accepted only for true claims (brute force),
    for some of them at least; with the claim raised to the true minimum, rejected at that leaf."""
    accepted = 0
    for seed in range(12):
        net, problem, k = _sign_monotone_case(seed, activation)
        if k < 0:
            continue
        certificate = _certificate(net, problem, k, {"leaf": "linear"})
        accepted += checker.check(certificate).accepted  # true claims: may be accepted (the bound is not complete)
        if k + 1 <= problem.n:
            certificate["claim"] = {"no_explanation_within": k + 1}
            report = checker.check(certificate)
            assert not report.accepted and "the node with in [], out []: leaf 'linear'" in report.message, report.message
    assert accepted >= 3

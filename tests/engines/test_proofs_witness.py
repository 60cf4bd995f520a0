"""Certificates of AXp claims without the monotone shortcut (method "witness-hitting",
`cardinal.solvers.proof_hitting`): non-monotone ReLU networks and K = 3 classifiers. Accepted by
the independent checker exactly where brute force over the Boolean cube says the claim is true,
never made where it is false, and every tampering rejected.

Ground truth: `tests.bruteforce.vertex_minimum` (every vertex predicted exactly, every set tried),
and for the combinatorial end alone, minimum hitting sets by brute force over all subsets."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cardinal.solvers import reset_bound
from cardinal.solvers.base import solve_minimum
from cardinal.solvers.proof import search
from cardinal.solvers.proof_hitting import hitting_tree
from cardinal.verify.cli import main

from cardinal import checker
from cardinal.activations import Activation
from cardinal.checker import exact, hitting
from cardinal.domain import Domain
from cardinal.network import Layer, Network
from cardinal.problem import Problem
from tests.bruteforce import vertex_minimum, vertex_valid


@pytest.fixture(autouse=True)
def _witness_hitting_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """This file tests method "witness-hitting": the reset bound, which `proof.search` and the
    hitting-set loop try first where it applies, is off (tests/engines/test_proofs_reset.py has it)."""
    monkeypatch.setattr(reset_bound, "applies", lambda problem: False)


def _network(rng: np.random.Generator, n: int, hidden: int, classes: int) -> Network:
    """Weights of both signs (multiples of 1/64), one ReLU layer, `classes` identity outputs."""
    layers, fan_in = [], n
    for width in (hidden, classes):
        weight = np.round(rng.normal(size=(width, fan_in)) / np.sqrt(fan_in) * 64) / 64
        bias = np.round(rng.normal(size=width) * 0.3 * 64) / 64
        layers.append(Layer(weight, bias, Activation.make("relu" if width == hidden else "identity")))
        fan_in = width
    return Network(layers)


def _cube(seed: int, classes: int) -> Problem:
    rng = np.random.default_rng(seed)
    n = 7
    net = _network(rng, n, 10, classes)
    assert classes > 1 or net.directions is None or (net.directions == 2).any()  # no monotone shortcut
    x = (rng.random(n) < 0.5).astype(float)
    return Problem.make(net, x, "abductive", Domain.boolean(n), 0.0 if classes == 1 else None)


def _check(certificate: dict[str, Any], problem: Problem) -> checker.Report:
    return checker.check(certificate, problem.net.to_json())


@pytest.mark.parametrize("classes", [1, 3], ids=["K=1", "K=3"])
def test_axp_claims_on_boolean_cubes_agree_with_brute_force(classes: int) -> None:
    proved = 0
    for seed in range(10):
        problem = _cube(seed, classes)
        assert not problem.monotone
        m = vertex_minimum(problem)
        if m >= 1:
            found = search(problem, m - 1)
            assert found.certificate is not None, found.reason
            assert found.certificate["proof"]["method"] == "witness-hitting"
            assert found.certificate["claim"] == {"no_explanation_within": m - 1}
            report = _check(found.certificate, problem)
            assert report.accepted, report.message
            proved += m >= 2
        false = search(problem, m)  # an AXp of m features exists: no certificate, and the set that shows it
        assert false.certificate is None and false.counterexample is not None
        assert len(false.counterexample) <= m and vertex_valid(problem, false.counterexample)
    assert proved >= 3  # trees deeper than one lemma


def _real_box_case() -> tuple[Problem, int]:
    """A non-monotone network on an ε-ball (real box): the largest k the generator proves, found by
    raising k until it finds an AXp of k features instead."""
    rng = np.random.default_rng(3)
    net = _network(rng, 6, 8, 1)
    x = rng.uniform(0, 1, 6).round(3)
    problem = Problem.make(net, x, "abductive", Domain.broadcast(-1.0, 2.0, 6).ball(x, 0.4), float(net.forward(x)) - 0.05)
    for k in range(problem.n + 1):
        found = search(problem, k)
        if found.certificate is None:
            assert found.counterexample is not None and len(found.counterexample) <= k, found.reason
            return problem, k - 1
    raise AssertionError("the full set is always an AXp")


def test_a_real_box_claim_is_proved_up_to_the_first_axp_found() -> None:
    problem, k = _real_box_case()
    assert k >= 1
    certificate = search(problem, k).certificate
    assert certificate is not None
    report = _check(certificate, problem)
    assert report.accepted, report.message
    assert all(lo <= v <= hi for lemma in certificate["proof"]["lemmas"] for i, v in lemma
               for lo, hi in [(problem.domain.lower[i], problem.domain.upper[i])])  # fmt: skip


def _rich(classes: int) -> tuple[Problem, dict[str, Any]]:
    """A certificate with several lemmas, branches and disjoint leaves (the first seed with m ≥ 3)."""
    for seed in range(40):
        problem = _cube(seed, classes)
        m = vertex_minimum(problem)
        if m >= 3:
            certificate = search(problem, m - 1).certificate
            assert certificate is not None
            return problem, certificate
    raise AssertionError("no rich case")


def _nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node, *(n for child in node.get("children", []) for n in _nodes(child))]


@pytest.mark.parametrize("classes", [1, 3], ids=["K=1", "K=3"])
def test_every_tampering_of_a_witness_certificate_is_rejected(classes: int) -> None:
    problem, certificate = _rich(classes)
    document = problem.net.to_json()
    assert _check(certificate, problem).accepted

    def rejected(change, network: dict[str, Any] | None = None) -> bool:
        tampered = copy.deepcopy(certificate)
        change(tampered)
        try:
            return not checker.check(tampered, network or document).accepted
        except checker.CertificateError:
            return True

    lemmas = certificate["proof"]["lemmas"]
    x = certificate["problem"]["x"]
    branches = [node for node in _nodes(certificate["proof"]["root"]) if "branch" in node]
    assert len(lemmas) >= 2 and branches
    assert rejected(lambda c: c["claim"].update(no_explanation_within=c["claim"]["no_explanation_within"] + 1))
    # a witness moved back to x on one feature, so that it no longer flips (its set then shrinks:
    # the shrunk witnesses are minimal) — on the first lemma and on the last
    for w in (0, len(lemmas) - 1):
        assert rejected(lambda c, w=w: c["proof"]["lemmas"][w][0].__setitem__(1, x[c["proof"]["lemmas"][w][0][0]]))
    assert rejected(lambda c: c["proof"]["lemmas"][0][0].__setitem__(1, 0.5))  # off the Boolean cube
    assert rejected(lambda c: c["proof"]["lemmas"].pop())  # a lemma removed
    assert rejected(lambda c: c["proof"]["lemmas"].pop(0))  # ... and the others renumbered
    assert rejected(lambda c: c["proof"]["lemmas"][0].append(c["proof"]["lemmas"][0][0]))  # a feature twice
    # a step removed: a branch loses a child, a root replaced by its first child, a leaf emptied
    assert rejected(lambda c: c["proof"]["root"]["children"].pop())
    assert rejected(lambda c: c["proof"].update(root=c["proof"]["root"]["children"][0]))
    assert rejected(lambda c: next(n for n in _nodes(c["proof"]["root"]) if "disjoint" in n)["disjoint"].pop())
    assert rejected(lambda c: c["proof"]["root"].update(branch=(c["proof"]["root"]["branch"] + 1) % len(lemmas)))
    assert rejected(lambda c: c["proof"].update(method="shortcut-tree"))
    # held against another input, box, kind or network
    assert rejected(lambda c: c["problem"].update(x=[1.0 - v for v in x]))
    assert rejected(lambda c: c["problem"].update(upper=[0.0] * problem.n))
    assert rejected(lambda c: c["problem"].update(kind="contrastive"))
    other = copy.deepcopy(document)  # a constant network: no witness flips there
    other["layers"][-1]["weight"] = [[0.0] * len(row) for row in other["layers"][-1]["weight"]]
    assert rejected(lambda c: None, other)
    assert rejected(lambda c: c["problem"].update(network_sha256=checker.network_sha256(other)[0]), other)
    if classes == 1:
        assert rejected(lambda c: c["problem"].update(threshold=c["problem"]["threshold"] + 100.0))
    else:
        assert rejected(lambda c: c["problem"].update(threshold=0.0))  # argmax networks take none


def _minimum_hitting(sets: list[frozenset[int]], n: int) -> int:
    for size in range(n + 1):
        if any(all(s & set(chosen) for s in sets) for chosen in itertools.combinations(range(n), size)):
            return size
    raise AssertionError("an empty set cannot be hit")


def test_the_hitting_tree_proves_exactly_the_brute_force_bound() -> None:
    """The combinatorial end alone: random set families over 8 elements; the tree for k = h − 1
    (h the minimum hitting set, by brute force) is accepted by the checker's walk, none exists
    for k = h, and a tree checked against a larger k is rejected."""
    rng = np.random.default_rng(0)
    for _ in range(60):
        n = 8
        sets = [frozenset(np.flatnonzero(rng.random(n) < rng.uniform(0.15, 0.5)).tolist()) for _ in range(rng.integers(1, 12))]
        sets = [s for s in sets if s] or [frozenset({0})]
        h = _minimum_hitting(sets, n)
        tree = hitting_tree(sets, h - 1)
        assert hitting._walk_hitting(sets, tree, h - 1) >= 1
        with pytest.raises(exact._Rejected):
            hitting._walk_hitting(sets, tree, h)
        with pytest.raises(ValueError):
            hitting_tree(sets, h)


def test_solve_minimum_certifies_a_k3_classifiers_minimum_axp(tmp_path: Path) -> None:
    problem, _ = _rich(3)
    outcome = solve_minimum(problem.net, problem.x, "abductive", problem.domain, solver="z3", proof=tmp_path / "p")
    assert outcome.status == "optimal" and outcome.size == vertex_minimum(problem)
    (path,) = (tmp_path / "p").glob("*.proof.json")
    document = json.loads(path.read_text())
    assert document["proof"]["method"] == "witness-hitting" and document["problem"]["threshold"] is None
    assert document["claim"] == {"no_explanation_within": outcome.size - 1}
    assert main(["proof", "check", str(path)]) == 0


def test_certify_writes_witness_certificates_for_a_non_monotone_network(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    problem, _ = _rich(1)
    network, inputs, folder = tmp_path / "net.json", tmp_path / "x.csv", tmp_path / "proofs"
    network.write_text(json.dumps(problem.net.to_json()))
    inputs.write_text(",".join(map(str, problem.x)) + "\n")
    code = main(["certify", str(network), "--inputs", str(inputs), "--kind", "abductive", "--binary",
                 "--proof", str(folder), "--out", str(tmp_path / "out.jsonl")])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    (line,) = [json.loads(text) for text in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert line["minimum_proved"] and len(line["minimum"]) == vertex_minimum(problem)
    assert line["proof"]["accepted"] and (folder / line["proof"]["file"]).is_file()
    capsys.readouterr()
    assert main(["proof", "check", str(folder / line["proof"]["file"])]) == 0
    assert "accepted" in capsys.readouterr().out


def test_a_witness_search_past_its_deadline_gives_none_and_a_k3_cxp_gets_lp_bounds() -> None:
    problem, _ = _rich(1)
    stopped = search(problem, 1, deadline=0.0)
    assert stopped.certificate is None and stopped.reason == "deadline"
    classifier, _ = _rich(3)
    contrastive = Problem.make(classifier.net, classifier.x, "contrastive", classifier.domain)
    found = search(contrastive, 0)  # CXps of K ≥ 2 ReLU networks: method lp-tree, a tree per rival class
    assert found.certificate is not None and found.certificate["proof"]["method"] == "lp-tree", found.reason
    assert _check(found.certificate, contrastive).accepted


class _NeverAsked:
    """An exact set oracle that must not be asked: the lemmas given settle the claim."""

    def flip(self, *args: object) -> None:
        raise AssertionError("the oracle was asked, though the run's lemmas settle the claim")


@pytest.mark.parametrize("classes", [1, 3], ids=["K=1", "K=3"])
def test_the_certificate_of_a_proved_minimum_reuses_the_runs_lemmas(classes: int) -> None:
    """The implicit hitting-set loop that proved a minimum AXp carries the points behind its sets
    (`Outcome.lemmas`); a certificate built from them alone, no oracle asked, is accepted, names
    only lemmas its tree uses, and hints that are no lemmas (a point that keeps p(x), one outside the
    box) are dropped, not written."""
    problem, _ = _rich(classes)
    m = vertex_minimum(problem)
    outcome = solve_minimum(problem.net, problem.x, "abductive", problem.domain, solver="z3", guarded=False)
    assert outcome.status == "optimal" and outcome.size == m and outcome.lemmas
    for lemma in outcome.lemmas:  # each a point of the box that flips, differing from x where it says
        y = problem.x.copy()
        for i, value in lemma:
            assert value != problem.x[i]
            y[i] = value
        assert problem.flips(y)
    keeps = tuple((i, float(problem.x[i])) for i in range(problem.n))  # y = x: keeps p(x)
    outside = ((0, 2.0),)
    found = search(problem, m - 1, oracle=_NeverAsked(), hints=(keeps, outside, *outcome.lemmas))  # type: ignore[arg-type]
    assert found.certificate is not None, found.reason
    report = _check(found.certificate, problem)
    assert report.accepted, report.message
    lemmas = found.certificate["proof"]["lemmas"]
    assert [[0, 2.0]] not in lemmas and 0 < len(lemmas) <= len(outcome.lemmas)
    named = {w for node in _nodes(found.certificate["proof"]["root"]) for w in node.get("disjoint", [node.get("branch")])}
    assert named == set(range(len(lemmas)))

"""Certificates written from the exact MILP's own proof (method "subset-split", issue 51): where
its levels prove a CXp minimum by splitting, `Outcome.subset_trees` holds the trees and
`solvers.proof.search` writes them without searching again; the checker accepts them, and
rejects every tampering."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import numpy as np
import pytest
from cardinal.solvers import proof as proof_module
from cardinal.solvers.base import exact_claim, solve_minimum
from cardinal.solvers.proof import search

from cardinal import checker
from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.network import Layer, Network
from cardinal.problem import Problem, Status


def _problem(seed: int, classes: int) -> Problem:
    """A random ReLU network (weights multiples of 1/64, both signs) 6 → 8 → classes on [0, 1]^6."""
    rng = np.random.default_rng(seed)
    layers, fan_in = [], 6
    for number, width in enumerate((8, classes)):
        weight = np.round(rng.normal(size=(width, fan_in)) / np.sqrt(fan_in) * 64) / 64
        bias = np.round(rng.normal(size=width) * 0.3 * 64) / 64
        layers.append(Layer(weight, bias, Activation.from_json("relu" if number == 0 else "identity")))
        fan_in = width
    x = np.round(rng.random(6) * 64) / 64
    return Problem.make(Network(layers), x, "contrastive", Domain.unit(6), 0.0 if classes == 1 else None)


def _proved(classes: int) -> list[tuple[Problem, int, Any]]:
    """Problems whose CXp minimum the exact MILP proves with its levels: (problem, k, outcome)."""
    found = []
    for seed in range(40):
        problem = _problem(seed, classes)
        outcome = solve_minimum(problem.net, problem.x, "contrastive", problem.domain, problem.threshold,
                                solver="exact-milp", time_limit=30, guarded=False)  # fmt: skip
        k = exact_claim(problem, outcome, None)
        if outcome.status == Status.OPTIMAL and k is not None and k >= 1 and k in outcome.subset_trees:
            found.append((problem, k, outcome))
        if len(found) == 4:
            break
    return found


def _no_search(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the generic certificate search ran")


@pytest.fixture(scope="module", params=[1, 3], ids=["K=1", "K=3"])
def proved(request: pytest.FixtureRequest) -> list[tuple[Problem, int, Any]]:
    cases = _proved(request.param)
    assert len(cases) >= 2, "too few minima proved by the levels"
    return cases


def test_certificates_from_the_engine_are_accepted_without_a_search(proved: list, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("shortcut_tree", "shortcut_lp", "search_box", "search_abductive"):
        monkeypatch.setattr(proof_module, name, _no_search)
    monkeypatch.setattr(proof_module.proof_lp, "search_lp", _no_search)
    for problem, k, outcome in proved:
        found = search(problem, k, trees=outcome.subset_trees)
        assert found.certificate is not None and found.certificate["proof"]["method"] == "subset-split"
        document = json.loads(json.dumps(found.certificate))
        report = checker.check(document, problem.net.to_json())
        assert report.accepted, report.message


def _certificate(case: tuple[Problem, int, Any]) -> dict[str, Any]:
    problem, k, outcome = case
    found = proof_module.from_record(problem, k, outcome.subset_trees)
    assert found is not None
    return json.loads(json.dumps(found.certificate))


def _rejects(document: dict[str, Any], problem: Problem) -> None:
    try:
        report = checker.check(document, problem.net.to_json())
    except checker.CertificateError:
        return
    assert not report.accepted


def test_tampered_certificates_are_rejected(proved: list) -> None:
    problem, k, _ = proved[0]
    good = _certificate(proved[0])
    tampered = copy.deepcopy(good)  # a subset (and its tree) removed
    del tampered["proof"]["subsets"][0]
    _rejects(tampered, problem)
    tampered = copy.deepcopy(good)  # a subset listed twice in place of another
    tampered["proof"]["subsets"][0] = tampered["proof"]["subsets"][1]
    _rejects(tampered, problem)
    tampered = copy.deepcopy(good)  # a larger claim on the same subsets
    tampered["claim"] = {"no_explanation_within": k + 1}
    _rejects(tampered, problem)
    # a false claim: at the proved minimum m = k + 1 some m-subset flips, so no leaf of either kind closes it
    false = copy.deepcopy(good)
    false["claim"] = {"no_explanation_within": k + 1}
    for leaf in ("interval", "affine"):
        subsets = itertools.combinations(range(problem.n), k + 1)
        false["proof"]["subsets"] = [{"free": list(s), "root": {"leaf": leaf}} for s in subsets]
        _rejects(false, problem)


def test_a_tree_cut_short_or_a_cut_moved_is_rejected(proved: list) -> None:
    """Where the splitting needed cuts, a leaf in place of the cut (its children removed) or a
    cut outside its range is rejected."""
    cut = [(case, entry["free"]) for case in proved for entry in _certificate(case)["proof"]["subsets"] if "cut" in entry["root"]]
    assert cut, "no subset needed a cut"
    for case, free in cut[:3]:
        for change in ({"leaf": "interval"}, {"leaf": "affine"}, "moved"):
            document = _certificate(case)
            (target,) = [entry for entry in document["proof"]["subsets"] if entry["free"] == free]
            if change == "moved":
                target["root"]["at"] = 2.0
            else:
                target["root"] = change
            _rejects(document, case[0])


@pytest.mark.parametrize("seed", range(4))
def test_the_checkers_first_layer_at_x_is_its_interval_range_over_the_box(seed: int) -> None:
    """`SubsetSplit._first` (the first layer's value at x, once, plus each free feature's range)
    equals the checker's plain interval affine map over the whole box, on random boxes equal to x
    outside a random subset; a box that moves a feature outside its subset is refused."""
    from fractions import Fraction

    from cardinal.checker.exact import _Net, network_sha256
    from cardinal.checker.split import SubsetSplit

    problem = _problem(seed, 3)
    net = _Net(network_sha256(problem.net.to_json())[1])
    x = [Fraction(v) for v in problem.x]
    box = ([Fraction(0)] * 6, [Fraction(1)] * 6)
    split = SubsetSplit(net, x, box, None, problem.prediction, 2)
    rng = np.random.default_rng(seed)
    for _ in range(20):
        free = sorted(rng.choice(6, size=int(rng.integers(1, 4)), replace=False).tolist())
        lo, hi = list(x), list(x)
        for i in free:
            a, b = sorted(Fraction(int(v), 64) for v in rng.integers(0, 65, size=2))
            lo[i], hi[i] = a, b
        assert split._first(free, lo, hi) == net.affine(0, lo, hi)
    moved = list(x)
    moved[0] = x[0] + Fraction(1, 128)
    with pytest.raises(Exception, match="outside its subset"):
        split._first([1], moved, moved)

"""Method "reset-bound" (`cardinal.solvers.reset_bound`, checked by `cardinal.checker.reset`):
points whose resets all keep the prediction changed prove that no AXp is small. Against brute
force over the Boolean cube (`tests.bruteforce.vertex_minimum`): every accepted claim is true,
every false claim is rejected, and the loop that uses the bound still ends at the minimum."""

from __future__ import annotations

import copy
import math

import pytest
from cardinal.solvers import hitting, reset_bound
from cardinal.solvers.proof import search
from cardinal.solvers.proof_stop import document

from cardinal import checker
from cardinal.problem import Problem, Status
from tests.bruteforce import vertex_minimum
from tests.engines.test_hitting import _cube, _flipping_supports, _vertex_oracle


def _problem(seed: int, outputs: int) -> Problem:
    """A non-monotone ReLU network (two hidden layers) on the Boolean cube of 8 features (K = 1 or 3)."""
    return _cube(seed, 8, outputs)


@pytest.mark.parametrize("outputs", [1, 3], ids=["K=1", "K=3"])
def test_reset_bounds_never_claim_more_than_brute_force(outputs: int) -> None:
    """The root's floor is below the minimum; the tree proves k = minimum − 1 where it proves it,
    the checker accepting; no claim k ≥ minimum gets a certificate (the tree, given the brute-force
    oracle, finds the counterexample: an AXp of at most k features), and the checker rejects the
    proof of a true claim when it is asked of k = minimum."""
    proved = floors = 0
    for seed in range(12):
        problem = _problem(seed, outputs)
        m = vertex_minimum(problem)
        floor = reset_bound.reset_floor(problem, math.inf)
        assert floor < m, (seed, floor, m)
        floors += floor >= 1
        oracle = _vertex_oracle(problem, _flipping_supports(problem))
        if m >= 1:
            found = reset_bound.search_reset(problem, m - 1, math.inf, oracle)
            if found.proof is not None:
                report = checker.check(document(problem, m - 1, found.proof), problem.net.to_json())
                assert report.accepted, report.message
                false = checker.check(document(problem, m, found.proof), problem.net.to_json())
                assert not false.accepted, seed
                proved += 1
        false = reset_bound.search_reset(problem, m, math.inf, oracle, floor=m - reset_bound.RESET_GAP)
        assert false.proof is None and false.counterexample is not None and len(false.counterexample) <= m, (seed, false)
        assert all(set(false.counterexample) & s for s in _flipping_supports(problem))  # an AXp: it meets every flip
    assert proved >= 3 and floors >= 3  # the checks above ran on trees and on floors of substance


def test_tampered_reset_certificates_are_rejected() -> None:
    """A leaf's point moved to x (no change), a point outside the box, the wrong rival, a branch on
    a feature already decided, a leaf 'size' too early: each rejected or refused."""
    for seed in range(40):
        problem = _problem(seed, 3)
        m = vertex_minimum(problem)
        found = reset_bound.search_reset(problem, m - 1, math.inf) if m >= 2 else None
        if found is not None and found.proof is not None:
            break
    else:
        raise AssertionError("no case")
    network = problem.net.to_json()
    assert checker.check(document(problem, m - 1, found.proof), network).accepted

    def leaf(proof: dict) -> dict:
        node = proof["root"]
        while "branch" in node:
            node = node["children"][0] if "point" in node["children"][0] or "branch" in node["children"][0] else node["children"][1]
        return node

    cases = []
    keeps = copy.deepcopy(found.proof)
    leaf(keeps)["point"] = []
    cases.append(keeps)
    outside = copy.deepcopy(found.proof)
    leaf(outside)["point"] = [[0, 0.5]]
    cases.append(outside)
    rival = copy.deepcopy(found.proof)
    target = leaf(rival)
    target["rival"] = next(j for j in range(3) if j not in (problem.prediction, target["rival"]))
    cases.append(rival)
    early = copy.deepcopy(found.proof)
    early["root"] = {"size": True}
    cases.append(early)
    again = {"method": "reset-bound", "root": {"branch": 0, "children": [{"branch": 0, "children": [{"size": True}] * 2}] * 2}}
    cases.append(again)
    for proof in cases:
        try:
            report = checker.check(document(problem, m - 1, proof), network)
        except checker.CertificateError:  # not well formed: refused
            continue
        assert not report.accepted, proof


@pytest.mark.parametrize("outputs", [1, 3], ids=["K=1", "K=3"])
def test_the_loop_with_reset_bounds_ends_at_the_brute_force_minimum(outputs: int) -> None:
    """The implicit hitting-set loop asked at once (`seed_after=0`) runs deletion, then the reset
    bound (`hitting._by_reset`): it still ends OPTIMAL with the brute-force minimum, and the
    certificate of that minimum (`proof.search`: the reset bound first) is accepted."""
    for seed in range(8):
        problem = _problem(seed, outputs)
        supports = _flipping_supports(problem)
        m = vertex_minimum(problem)
        result = hitting.minimum_abductive(problem, _vertex_oracle(problem, supports), None, math.inf, seed_after=0.0)
        assert result.status == Status.OPTIMAL and result.solution is not None and len(result.solution) == m, (seed, result)
        if m >= 1:
            found = search(problem, m - 1, hints=result.lemmas)
            assert found.certificate is not None, (seed, found.reason)
            assert checker.check(found.certificate, problem.net.to_json()).accepted

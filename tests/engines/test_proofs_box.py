"""Certificates of CXp claims on networks neither the monotone shortcut nor LP bounds cover (method
"box-tree", `cardinal.solvers.proof_box`): step, sigmoid, tanh, softplus and leaky_relu of slope
≥ 1 units, K = 1 and K = 3. Accepted where brute force over the Boolean cube (or the exact set
search on a real box) says the claim is true, never made where it is false, and every tampering
rejected."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cardinal.solvers.base import solve_minimum
from cardinal.solvers.proof import search
from cardinal.verify.cli import main

from cardinal import checker
from cardinal.domain import Domain
from cardinal.problem import Problem
from tests.bruteforce import vertex_minimum, vertex_valid
from tests.engines.test_proofs_lp import _check, _cube, _network

# The limit of a call whose answer a test asserts: none that a run here comes near, so that no
# answer depends on the machine's speed (a limit of seconds ended calls undecided on a loaded machine).
UNBOUNDED = 3600.0

UNCOVERED = ["sigmoid", "tanh", "softplus", {"name": "step", "at": 0.0}, {"name": "leaky_relu", "slope": 1.5}]


@pytest.mark.parametrize("classes", [1, 3], ids=["K=1", "K=3"])
@pytest.mark.parametrize("activation", UNCOVERED, ids=lambda a: a if isinstance(a, str) else a["name"])
def test_cxp_claims_on_boolean_cubes_agree_with_brute_force(activation: Any, classes: int) -> None:
    """Claims at the minimum − 1 (or "none exists") get an accepted box-tree certificate; at the
    minimum, no certificate and a counterexample that brute force confirms."""
    for seed in range(3):
        problem = _cube(seed, classes, activation, (6,))
        assert not problem.monotone
        m = vertex_minimum(problem)
        k = problem.n if m is None else m - 1
        if k >= 0:
            found = search(problem, k)
            assert found.certificate is not None, found.reason
            assert found.certificate["proof"]["method"] == "box-tree"
            report = _check(found.certificate, problem)
            assert report.accepted and report.leaves >= 1, report.message
        if m is not None:
            false = search(problem, m)
            assert false.certificate is None and false.counterexample is not None, false.reason
            assert len(false.counterexample) <= m and vertex_valid(problem, false.counterexample)


def _ball(seed: int, classes: int, activation: Any) -> Problem:
    """A 5-feature network over the ε-ball of radius 0.3 around a random x (a real box)."""
    rng = np.random.default_rng(seed)
    net = _network(rng, 5, (6,), classes, activation)
    x = rng.random(5).round(3)
    return Problem.make(net, x, "contrastive", Domain.unit(5).ball(x, 0.3), 0.0 if classes == 1 else None)


@pytest.mark.parametrize("classes", [1, 3], ids=["K=1", "K=3"])
def test_step_claims_on_a_real_box_agree_with_the_exact_set_search(classes: int) -> None:
    """Step units on a real box: the exact engine's minimum m (or none) — the claim at m − 1 is
    certified, the claim at m gets none (a false claim's search may end without the
    counterexample: a box across several steps' hyperplanes can stay open to the end). K = 3
    trees split on steps' phases."""
    answers, keys = set(), set()
    threshold = 0.0 if classes == 1 else None
    for seed in range(3):
        problem = _ball(seed, classes, {"name": "step", "at": 0.0})
        outcome = solve_minimum(problem.net, problem.x, "contrastive", problem.domain, threshold, time_limit=UNBOUNDED, guarded=False)
        assert outcome.status in ("optimal", "none_exists"), outcome.message
        m = outcome.size if outcome.has_solution else None
        found = search(problem, problem.n if m is None else m - 1)
        assert found.certificate is not None and _check(found.certificate, problem).accepted, found.reason
        keys |= {key for key in ("feature", "cut", "step") if f'"{key}"' in json.dumps(found.certificate)}
        if m is not None:
            false = search(problem, m)  # no certificate (and a counterexample of at most m features, if one was met)
            assert false.certificate is None and len(false.counterexample or ()) <= m, false.reason
        answers.add(outcome.status)
    assert answers == {"optimal", "none_exists"}
    assert classes == 1 or keys == {"feature", "cut", "step"}


def test_a_step_split_on_another_unit_or_dropped_is_rejected() -> None:
    problem = _ball(0, 3, {"name": "step", "at": 0.0})
    certificate = search(problem, 2).certificate
    assert certificate is not None
    network = problem.net.to_json()
    for unit in ([1, 0], [0, 6], [0], "0", [0, -1]):  # the identity output layer, past the width, malformed
        tampered = copy.deepcopy(certificate)
        _first(tampered["proof"]["root"], "step")["step"] = unit
        assert _rejected(tampered, network)
    removed = copy.deepcopy(certificate)  # the split dropped: its node made one leaf
    node = _first(removed["proof"]["root"], "step")
    node.clear()
    node["leaf"] = "bound"
    assert _rejected(removed, network)


def _with_cuts() -> tuple[Problem, dict[str, Any]]:
    """A K = 3 tanh network on a real box whose certificate cuts ranges: no CXp of 1 feature (the
    search finds one of 2)."""
    problem = _ball(0, 3, "tanh")
    assert search(problem, 2).counterexample is not None
    certificate = search(problem, 1).certificate
    assert certificate is not None and '"cut"' in json.dumps(certificate)
    return problem, certificate


def _first(node: dict[str, Any], key: str) -> dict[str, Any]:
    """The first node of a tree (depth first) that has `key`."""
    stack = [node]
    while stack:
        node = stack.pop()
        if key in node:
            return node
        stack += [child for child in node.values() if isinstance(child, dict)]
    raise AssertionError(f"no node with {key!r}")


def _rejected(certificate: dict[str, Any], network: Any) -> bool:
    try:
        return not checker.check(certificate, network).accepted
    except checker.CertificateError:
        return True


def test_smooth_certificates_on_a_real_box_are_accepted_and_every_tampering_is_rejected() -> None:
    problem, certificate = _with_cuts()
    network = problem.net.to_json()
    assert checker.check(certificate, network).accepted
    # a cut moved outside its range, or moved inside it so that a leaf no longer closes
    cut = _first(certificate["proof"]["root"], "cut")
    moved = copy.deepcopy(certificate)
    _first(moved["proof"]["root"], "cut")["at"] = 2.0
    assert _rejected(moved, network)
    shifted = 0
    for delta in (0.5, 0.25, -0.25, -0.5):
        moved = copy.deepcopy(certificate)
        node = _first(moved["proof"]["root"], "cut")
        low, high = problem.domain.lower[cut["cut"]], problem.domain.upper[cut["cut"]]
        node["at"] = float(np.clip(cut["at"] + delta * (high - low), low + 1e-3, high - 1e-3))
        shifted += _rejected(moved, network)
    assert shifted
    # a leaf removed: a split with a child missing, or a split replaced by one of its leaves
    removed = copy.deepcopy(certificate)
    del _first(removed["proof"]["root"], "cut")["below"]
    assert _rejected(removed, network)
    collapsed = copy.deepcopy(certificate)
    collapsed["proof"]["root"] = {"leaf": "bound"}
    assert _rejected(collapsed, network)
    # the claim raised to 2, which is false, or to "none exists"
    for claim in ({"no_explanation_within": 2}, {"none_exists": True}):
        raised = copy.deepcopy(certificate)
        raised["claim"] = claim
        assert _rejected(raised, network)
    # another network (its own SHA-256), another input, another kind
    other = copy.deepcopy(network)
    other["layers"][0]["weight"][0][0] += 1.0
    held = copy.deepcopy(certificate)
    held["problem"]["network_sha256"] = checker.network_sha256(other)[0]
    assert _rejected(held, other) and _rejected(certificate, other)
    points = np.random.default_rng(0).uniform(problem.domain.lower, problem.domain.upper, (200, problem.n))
    predicted = problem.predictions(points)
    assert ((predicted >= 0) & (predicted != problem.prediction)).any()
    elsewhere = copy.deepcopy(certificate)
    elsewhere["problem"]["x"] = points[np.argmax((predicted >= 0) & (predicted != problem.prediction))].tolist()
    assert _rejected(elsewhere, network)  # an input predicted otherwise
    abductive = copy.deepcopy(certificate)
    abductive["problem"]["kind"] = "abductive"
    assert _rejected(abductive, network)


def _certify_cube(cube: Problem, tmp_path: Path, folder: Path, capsys: pytest.CaptureFixture) -> dict:
    """`cardinal certify --binary --kind contrastive --method greedy --proof FOLDER` on the cube
    problem's network and its one input (greedy: on a network without the shortcut no explainer
    runs, the solvers alone answer); the result line (the command must exit 0)."""
    network, inputs, out = tmp_path / "net.json", tmp_path / "x.csv", tmp_path / "out.jsonl"
    network.write_text(json.dumps(cube.net.to_json()))
    inputs.write_text(",".join(map(str, cube.x)) + "\n")
    code = main(["certify", str(network), "--inputs", str(inputs), "--binary", "--kind", "contrastive",
                 "--method", "greedy", "--proof", str(folder), "--out", str(out)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    (line,) = [json.loads(text) for text in out.read_text().splitlines()]
    return line


def test_solve_minimum_and_certify_write_box_certificates(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """End to end: the exact engine's minimum of a K = 3 step network on a real box, and
    `cardinal certify --proof` on a tanh network's Boolean cube (minimum 2), carry box-tree certificates
    that `cardinal proof check` accepts."""
    problem = _ball(0, 3, {"name": "step", "at": 0.0})
    outcome = solve_minimum(problem.net, problem.x, "contrastive", problem.domain, None, proof=tmp_path / "one.json")
    assert outcome.status == "optimal" and "certificate:" in outcome.message, outcome.message
    assert json.loads((tmp_path / "one.json").read_text())["proof"]["method"] == "box-tree"
    assert main(["proof", "check", str(tmp_path / "one.json")]) == 0
    folder = tmp_path / "proofs"
    line = _certify_cube(_cube(0, 3, "tanh", (6,)), tmp_path, folder, capsys)
    assert line["minimum_proved"] and line["proof"]["accepted"], line
    assert json.loads((folder / line["proof"]["file"]).read_text())["proof"]["method"] == "box-tree"
    assert main(["proof", "check", str(folder / line["proof"]["file"])]) == 0


def test_certify_proves_none_exists_on_a_network_without_the_shortcut(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Greedy does not run on a network without the shortcut (verdict exact_only): an exact
    backend's "no CXp at all" is still a claim, and gets its certificate (it got "no exact
    'nothing smaller' claim" before)."""
    cube = _cube(2, 3, "sigmoid", (6,))
    assert vertex_minimum(cube) is None
    line = _certify_cube(cube, tmp_path, tmp_path / "proofs", capsys)
    assert line["verdict"] == "exact_only" and line["certified"] and line["minimum"] is None
    assert line["proof"]["claim"] == {"none_exists": True} and line["proof"]["accepted"], line
    assert "1 certificate file(s)" in capsys.readouterr().err

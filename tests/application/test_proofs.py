"""The certificate generator (`cardinal.solvers.proof`) and its wiring (`--proof`, `proof=`,
`cardinal proof check`): certificates for true claims only, every one accepted by the independent
checker (`cardinal.checker`), every tampering of a generated one rejected.

Ground truth here is brute force over all 2^n sets (exact predictions, `Problem.predictions`),
not the generator's own search."""

from __future__ import annotations

import collections
import copy
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cardinal.solvers.base import solve_minimum
from cardinal.solvers.proof import ALL_SETS, IntervalBound, prove, search, shortcut_lp, shortcut_tree
from cardinal.verify.cli import main
from cardinal.verify.record import Record, read_records

from cardinal import checker
from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.errors import InputError
from cardinal.network import Layer, Metadata, Network
from cardinal.problem import Problem
from tests.conftest import DESIGN_NETWORK

ACTIVATIONS = ["relu", {"name": "leaky_relu", "slope": 0.2}, {"name": "hardtanh", "min": 0.0, "max": 0.8},
               {"name": "step", "at": 0.1}, "sigmoid", "tanh", "softplus"]  # fmt: skip


def _network(rng: np.random.Generator, n: int, hidden: tuple[int, ...], activation: Any) -> Network:
    """A random monotone network (weights ≥ 0, some zero), `activation` in its hidden layers."""
    sizes = [n, *hidden, 1]
    layers = []
    for index, (fan_in, width) in enumerate(itertools.pairwise(sizes)):
        weight = rng.uniform(0, 1, (width, fan_in)).round(3)
        weight[rng.random((width, fan_in)) < 0.3] = 0.0
        bias = rng.uniform(-1, 0.2, width).round(3)
        layers.append(Layer(weight, bias, Activation.from_json(activation if index < len(hidden) else "identity")))
    return Network(layers)


def _minimum(problem: Problem) -> int | None:
    """The size of a minimum explanation, by brute force (None: there is none)."""
    n = problem.n
    masks = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(bool)
    reached = problem.predictions(np.where(masks, problem.target, problem.base))
    assert (reached >= 0).all()
    sizes = masks.sum(axis=1)[reached == problem.goal]
    return int(sizes.min()) if len(sizes) else None


def _case(seed: int, activation: Any, binary: bool) -> Problem:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 9))
    net = _network(rng, n, (5, 4), activation)
    if binary:
        domain = Domain(np.full(n, -1.0), np.full(n, 2.0), binary=True)
        x = np.where(rng.random(n) < 0.5, -1.0, 2.0)
    else:
        lower, upper = rng.uniform(-2, 0, n).round(2), rng.uniform(0.5, 2, n).round(2)
        domain = Domain(lower, upper)
        x = rng.uniform(lower, upper).round(3)
    f = float(net.forward(x))
    threshold = round(f - 0.2 if seed % 3 else f + 0.2, 3)
    return Problem.make(net, x, "contrastive" if seed % 2 else "abductive", domain, threshold)


def _leaves(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node] if "leaf" in node else _leaves(node["in"]) + _leaves(node["out"])


GENERATORS = {"search": search, "shortcut-tree": shortcut_tree, "shortcut-lp": shortcut_lp}


@pytest.mark.parametrize("generator", GENERATORS)
@pytest.mark.parametrize("binary", [False, True], ids=["real-box", "boolean-box"])
@pytest.mark.parametrize("activation", ACTIVATIONS, ids=lambda a: a if isinstance(a, str) else a["name"])
def test_true_claims_get_accepted_certificates_and_false_ones_none(activation: Any, binary: bool, generator: str) -> None:
    make = GENERATORS[generator]
    if generator == "shortcut-lp" and Activation.from_json(activation).name not in ("relu", "leaky_relu", "hardtanh"):
        assert "do not apply" in make(_case(0, activation, binary), 0).reason
        return
    for seed in range(8):
        problem = _case(seed, activation, binary)
        document = problem.net.to_json()
        m = _minimum(problem)
        if m is None:  # no CXp: "none exists" is the claim
            certificate = make(problem, problem.n).certificate
            assert certificate is not None and certificate["claim"] == {"none_exists": True}
            assert checker.check(certificate, document).accepted
            continue
        if m >= 1:
            found = make(problem, m - 1)
            assert found.certificate is not None, found.reason
            assert generator == "search" or found.certificate["proof"]["method"] == generator
            report = checker.check(found.certificate, document)
            assert report.accepted, report.message
            assert found.certificate["claim"] == {"no_explanation_within": m - 1}
        false = make(problem, m)  # an explanation of m features exists: no certificate, ever
        assert false.certificate is None and false.counterexample is not None and len(false.counterexample) <= m
        assert problem.is_explanation(false.counterexample)
        if problem.kind == "abductive":
            assert make(problem, problem.n).certificate is None  # the full set is always an AXp


def _rich() -> tuple[Problem, dict[str, Any]]:
    """A generated certificate with splits (its seed found by a search over networks built as
    `_network` builds them, then fixed; relu units: every method applies)."""
    rng = np.random.default_rng(95)
    net = _network(rng, 10, (6, 4), "relu")
    problem = Problem.make(net, rng.uniform(0, 1, 10).round(3), "abductive", Domain.unit(10), 0.489)
    certificate = shortcut_tree(problem, 6).certificate
    assert certificate is not None
    return problem, certificate


def _rich_tree() -> tuple[Problem, dict[str, Any]]:
    """A generated certificate with splits and every kind of leaf but "linear" (sigmoid units,
    which it does not take; found as `_rich` was): no CXp within 6, minimum 7."""
    rng = np.random.default_rng(137)
    net = _network(rng, 10, (6, 4), "sigmoid")
    x = rng.uniform(0, 1, 10).round(3)
    problem = Problem.make(net, x, "contrastive", Domain.unit(10), round(float(rng.uniform(0.2, 0.8)), 3))
    certificate = shortcut_tree(problem, 6).certificate
    assert certificate is not None
    return problem, certificate


def test_the_generated_trees_use_every_kind_of_step() -> None:
    problem, certificate = _rich_tree()
    assert _minimum(problem) == 7
    kinds = collections.Counter(leaf["leaf"] for leaf in _leaves(certificate["proof"]["root"]))
    assert set(kinds) == {"size", "invalid", "bound", "all"}
    assert checker.check(certificate, problem.net.to_json()).accepted


def _splits(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [] if "leaf" in node else [node, *_splits(node["in"]), *_splits(node["out"])]


def test_every_tampering_of_a_generated_certificate_is_rejected() -> None:
    problem, certificate = _rich_tree()
    document = problem.net.to_json()

    def rejected(change, network: dict[str, Any] | None = None) -> bool:
        tampered = copy.deepcopy(certificate)
        change(tampered)
        try:
            return not checker.check(tampered, network or document).accepted
        except checker.CertificateError:
            return True

    def leaf(c: dict[str, Any], kind: str) -> dict[str, Any]:
        return next(node for node in _leaves(c["proof"]["root"]) if node["leaf"] == kind)

    assert rejected(lambda c: c["claim"].update(no_explanation_within=7))  # a claim raised by one
    assert rejected(lambda c: leaf(c, "invalid")["set"].pop())  # a lemma's set changed
    assert rejected(lambda c: leaf(c, "invalid")["set"].__setitem__(slice(None), list(range(problem.n))))
    assert rejected(lambda c: _splits(c["proof"]["root"])[1].update(split=_splits(c["proof"]["root"])[0]["split"]))
    root = certificate["proof"]["root"]
    assert rejected(lambda c: c["proof"].update(root=c["proof"]["root"]["in"]))  # a step removed
    assert rejected(lambda c: c["proof"].update(root=c["proof"]["root"]["out"]))
    assert rejected(lambda c: c["proof"]["root"].update({"in": root["out"], "out": root["in"]}))
    for kind in ("size", "bound"):  # a leaf claimed where it does not hold (a root "all" would be a proof: 210 sets)
        assert rejected(lambda c, kind=kind: c["proof"].update(root={"leaf": kind}))
    # the same certificate held against another input, threshold, box or network
    assert rejected(lambda c: c["problem"].update(x=[max(0.0, v - 0.3) for v in c["problem"]["x"]]))
    assert rejected(lambda c: c["problem"].update(threshold=0.55))
    assert rejected(lambda c: c["problem"].update(upper=[0.5] * problem.n))
    other = copy.deepcopy(document)
    other["layers"][-1]["bias"][0] -= 0.1
    assert rejected(lambda c: None, other)  # its SHA-256 differs
    assert rejected(lambda c: c["problem"].update(network_sha256=checker.network_sha256(other)[0]), other)


def test_every_tampering_of_a_shortcut_lp_certificate_is_rejected() -> None:
    """The lp-tree over the shortcut's box for `_rich`'s claim (no AXp within 6, minimum 7)."""
    problem, _ = _rich()
    certificate = shortcut_lp(problem, 6).certificate
    assert certificate is not None and certificate["proof"]["method"] == "shortcut-lp"
    document = problem.net.to_json()
    assert checker.check(certificate, document).accepted

    def rejected(change, network: dict[str, Any] | None = None) -> bool:
        tampered = copy.deepcopy(certificate)
        change(tampered)
        try:
            return not checker.check(tampered, network or document).accepted
        except checker.CertificateError:
            return True

    def leaf(node: dict[str, Any]) -> dict[str, Any]:
        return node if "multipliers" in node else leaf(node.get("in", node.get("active")))

    assert rejected(lambda c: c["claim"].update(no_explanation_within=7))  # a claim raised by one
    assert rejected(lambda c: leaf(c["proof"]["root"])["multipliers"].clear())  # a bound's multipliers removed
    assert rejected(lambda c: c["proof"].update(method="lp-tree"))  # the real box, and an AXp
    assert rejected(lambda c: c["problem"].update(x=[min(1.0, v + 0.3) for v in c["problem"]["x"]]))
    other = copy.deepcopy(document)
    other["layers"][0]["weight"][0][0] += 0.5
    assert rejected(lambda c: c["problem"].update(network_sha256=checker.network_sha256(other)[0]), other)
    # the empty set is an explanation (the shortcut's base reaches the goal): no tree proves anything
    empty = next(p for p in (_case(seed, "relu", False) for seed in range(40)) if _minimum(p) == 0)
    claim = {**_header(empty, 0), "proof": {"method": "shortcut-lp", "root": {"multipliers": []}}}
    report = checker.check(claim, empty.net.to_json())
    assert not report.accepted and "the empty set is an explanation" in report.message
    assert shortcut_lp(empty, 0).counterexample == ()


def _minimum_set(problem: Problem) -> list[int]:
    """A minimum explanation (sorted features), by brute force."""
    n = problem.n
    for size in range(n + 1):
        for subset in itertools.combinations(range(n), size):
            if problem.is_explanation(subset):
                return list(subset)
    raise AssertionError("no explanation")


def test_the_float_bound_closes_only_what_the_checkers_exact_bound_closes() -> None:
    """Whenever `IntervalBound` closes the root of a claim, a certificate made of that one leaf is
    accepted; across these networks it closes many (it is not vacuous)."""
    closed = 0
    for seed in range(10):
        for activation in ACTIVATIONS:
            problem = _case(seed, activation, seed % 4 == 0)
            bound = IntervalBound(problem)
            for k in range(problem.n + 1):
                if bound.closes(np.zeros(problem.n, dtype=bool), np.ones(problem.n, dtype=bool), k):
                    closed += 1
                    root = {"method": "shortcut-tree", "root": {"leaf": "bound"}}
                    certificate = {**_header(problem, k), "proof": root}
                    assert checker.check(certificate, problem.net.to_json()).accepted, (seed, activation, k)
    assert closed > 100


def _header(problem: Problem, k: int) -> dict[str, Any]:
    from cardinal.solvers.proof import claim_json, problem_json

    return {"format": "cardinal.proof/1", "problem": problem_json(problem), "claim": claim_json(problem, k)}


def test_an_exact_tie_at_the_bound_is_left_to_other_steps() -> None:
    """f = x0 + x1 + x2 at x = 1: moving two features leaves f = 1. With t = 1 − 2^-52 no CXp of
    two features exists, by a margin below float64's rounding: the float bound must not close
    the root, and the certificate closes it by other steps."""
    net = Network([Layer(np.ones((1, 3)), np.zeros(1), Activation.from_json("identity"))])
    problem = Problem.make(net, np.ones(3), "contrastive", Domain.unit(3), 1 - 2.0**-52)
    assert not IntervalBound(problem).closes(np.zeros(3, dtype=bool), np.ones(3, dtype=bool), 2)
    certificate = shortcut_tree(problem, 2).certificate
    assert certificate is not None and certificate["proof"]["root"] != {"leaf": "bound"}
    assert checker.check(certificate, net.to_json()).accepted
    assert prove(Problem.make(net, np.ones(3), "contrastive", Domain.unit(3), 1.0), 2) is None  # {0, 1} flips: f = 1 ≤ 1


def test_a_search_past_its_deadline_gives_none_and_a_cxp_of_any_leaky_relu_a_certificate() -> None:
    problem, _ = _rich()
    stopped = search(problem, 6, deadline=0.0)
    assert stopped.certificate is None
    assert stopped.reason == "shortcut-tree: deadline"
    for slope in (0.5, 1.5):  # mixed signs: no shortcut; LP bounds below slope 1 (convex), interval boxes from 1 on
        leaky, identity = Activation.from_json({"name": "leaky_relu", "slope": slope}), Activation.from_json("identity")
        layers = [Layer(np.array([[1.0, -1.0], [-1.0, 1.0]]), np.zeros(2), leaky), Layer(np.ones((1, 2)), np.zeros(1), identity)]
        mixed = Problem.make(Network(layers), np.array([1.0, 0.0]), "contrastive", Domain.unit(2), 0.5)
        found = search(mixed, 0)
        method = "lp-tree" if slope < 1 else "box-tree"
        assert found.certificate is not None and found.certificate["proof"]["method"] == method, found.reason
        assert checker.check(found.certificate, mixed.net.to_json()).accepted


def test_sign_monotone_networks_get_certificates_the_checker_accepts() -> None:
    """f = y0 − y1 (a decreasing feature): the shortcut's tree and LP bounds, with each feature's
    counterpoint at its own end, prove 'no CXp within 1' where the minimum is 2."""
    layers = [Layer(np.array([[1.0, -1.0]]), np.zeros(1), Activation.from_json("identity"))]
    net = Network(layers)
    problem = Problem.make(net, np.array([1.0, 0.0]), "contrastive", Domain.unit(2), -0.5)  # f(x) = 1: one move is not enough
    for make in (shortcut_tree, shortcut_lp):
        found = make(problem, 1)
        assert found.certificate is not None, found.reason
        assert checker.check(found.certificate, net.to_json()).accepted
    assert search(problem, 2).certificate is None  # {0, 1} is a CXp: nothing to prove within 2


@pytest.mark.parametrize("activation", ACTIVATIONS, ids=lambda a: a if isinstance(a, str) else a["name"])
def test_network_sha256_is_the_checkers(activation: Any) -> None:
    net = _network(np.random.default_rng(1), 5, (3,), activation)
    assert net.sha256 == checker.network_sha256(net.to_json())[0]
    assert net.hash == net.sha256[:16]
    with_metadata = net.with_metadata(Metadata(threshold=0.5))  # metadata is not hashed
    assert with_metadata.sha256 == net.sha256 == checker.network_sha256(with_metadata.to_json())[0]


def test_all_sets_stays_within_the_checkers_limit() -> None:
    assert ALL_SETS <= checker.MAX_ALL_SETS


# ---------------------------------------------------------------------------- command line
def _design(tmp_path: Path) -> tuple[Path, Path]:
    network, inputs = tmp_path / "net.json", tmp_path / "x.csv"
    network.write_text(json.dumps(DESIGN_NETWORK))
    inputs.write_text("1,1,1\n0.2,0.9,0.4\n1,0,1\n")
    return network, inputs


def test_certify_writes_one_accepted_certificate_per_exact_claim(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    network, inputs = _design(tmp_path)
    folder, out = tmp_path / "proofs", tmp_path / "out.jsonl"
    code = main(["certify", str(network), "--inputs", str(inputs), "--threshold", "0.5", "--solvers", "enumerate",
                 "--proof", str(folder), "--out", str(out)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    claims = [line for line in lines if line["verdict"] == "none_exists" or (line["minimum_proved"] and line["minimum"])]
    assert claims and all(line["proof"]["file"] and line["proof"]["accepted"] for line in claims)
    assert all(line["proof"]["file"] is None and line["proof"]["reason"] for line in lines if line not in claims)
    files = sorted(path.name for path in folder.glob("*.proof.json"))
    assert files == sorted(line["proof"]["file"] for line in claims)
    assert [path.name for path in (folder / "networks").iterdir()] == [f"{Network.from_json(DESIGN_NETWORK).sha256}.json"]
    for line in claims:
        document = json.loads((folder / line["proof"]["file"]).read_text())
        k = len(line["minimum"]) - 1 if line["minimum"] else None
        assert document["claim"] == ({"none_exists": True} if k is None else {"no_explanation_within": k})
        assert "network" not in document
    capsys.readouterr()
    assert main(["proof", "check", *map(str, folder.glob("*.proof.json"))]) == 0  # networks/ beside them
    assert "accepted" in capsys.readouterr().out


def test_proof_check_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    network, inputs = _design(tmp_path)
    folder = tmp_path / "proofs"
    assert main(["certify", str(network), "--inputs", str(inputs), "--threshold", "0.5", "--proof", str(folder),
                 "--proof-embed", "--kind", "contrastive"]) == 0  # fmt: skip
    (good,) = folder.glob("row0-contrastive-*.proof.json")  # the name holds the certificate's SHA-256
    document = json.loads(good.read_text())
    assert "network" in document and not (folder / "networks").exists()  # embedded: self-contained
    onnx = tmp_path / "net.onnx"
    assert main(["convert", str(network), str(onnx)]) == 0
    capsys.readouterr()
    assert main(["proof", "check", str(good)]) == 0
    assert main(["proof", "check", str(good), "--network", str(onnx)]) == 0  # converted by cardinal's readers
    raised = tmp_path / "raised.json"
    document["claim"]["no_explanation_within"] += 1  # {0, 2} has two features
    raised.write_text(json.dumps(document))
    assert main(["proof", "check", str(raised)]) == 1
    assert "REJECTED" in capsys.readouterr().out
    other = copy.deepcopy(DESIGN_NETWORK)
    other["layers"][1]["weight"][0][1] = 0.7
    (tmp_path / "other.json").write_text(json.dumps(other))
    assert main(["proof", "check", str(good), "--network", str(tmp_path / "other.json")]) == 1  # another network
    capsys.readouterr()
    (tmp_path / "torn.json").write_text('{"format": "cardinal.proof/1", ')
    del document["network"]
    (tmp_path / "bare.json").write_text(json.dumps(document))
    (tmp_path / "bad.json").write_text(json.dumps({**document, "claim": {"no_explanation_within": -1}}))
    for bad in ("torn.json", "bare.json", "missing.json", "bad.json"):
        assert main(["proof", "check", str(tmp_path / bad), *(["--network", str(network)] if bad == "bad.json" else [])]) == 2
        err = capsys.readouterr().err
        assert err.startswith("cardinal proof: error:") and err.count("\n") == 1, err
    assert main(["proof", "check", str(good), "--network", str(tmp_path / "missing.onnx")]) == 2


def test_check_require_minimum_writes_certificates(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    network, inputs = _design(tmp_path)
    explanations = tmp_path / "e.jsonl"
    explanations.write_text(
        '{"row": 0, "kind": "contrastive", "features": [0, 2]}\n{"row": 1, "kind": "abductive", "features": [1]}\n'
    )
    folder, out = tmp_path / "proofs", tmp_path / "out.jsonl"
    base = ["check", str(network), "--inputs", str(inputs), "--threshold", "0.5", "--explanations", str(explanations)]
    assert main([*base, "--proof", str(folder)]) == 2  # --require valid: nothing to certify
    assert "--require minimum" in capsys.readouterr().err
    main([*base, "--require", "minimum", "--proof", str(folder), "--out", str(out)])
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    minimum = [line for line in lines if line["verdict"] == "minimum"]
    assert minimum and all(line["proof"]["accepted"] for line in minimum)
    for line in minimum:
        assert main(["proof", "check", str(folder / line["proof"]["file"])]) == 0


def test_crosscheck_records_carry_their_certificates(tmp_path: Path) -> None:
    from cardinal.verify.campaign import CampaignSettings, run_campaign

    from tests.application.test_campaign import tiny_instances

    folder = tmp_path / "proofs"
    result = run_campaign("tiny", tmp_path / "run", CampaignSettings(("enumerate",), 30.0, proof=folder), instances=tiny_instances())
    assert result.rejected_proofs == 0
    records = read_records(tmp_path / "run" / "records.jsonl")
    claims = [r for r in records if r.verdict == "none_exists" or (r.minimum_proved and r.minimum)]
    assert claims and all(r.proof is not None for r in records)
    for record in claims:
        entry = record.proof
        assert entry["accepted"] and entry["bytes"] == (folder / entry["file"]).stat().st_size
        assert entry["seconds"] >= 0 and entry["check_seconds"] >= 0
        assert main(["proof", "check", str(folder / entry["file"])]) == 0
    assert len(list((folder / "networks").iterdir())) == 3  # one per network
    summary = (tmp_path / "run" / "summary.md").read_text()
    assert "## Certificates" in summary and f"{len(claims)} records hold an exact 'nothing smaller' claim" in summary
    assert "(100.0%) carry a certificate the independent checker accepts" in summary


def test_a_records_proof_field_round_trips_and_is_checked() -> None:
    record = Record.from_json(_record_document({"file": "a.proof.json", "claim": {"no_explanation_within": 1}, "bytes": 10,
                                                "seconds": 0.1, "check_seconds": 0.2, "accepted": True}))  # fmt: skip
    assert Record.from_json(record.to_json()) == record and record.proof["file"] == "a.proof.json"
    assert Record.from_json(_record_document({"file": None, "reason": "deadline"})).proof == {"file": None, "reason": "deadline"}
    assert "proof" not in Record.from_json(_record_document(None)).to_json()
    for bad in ({"file": None}, {"file": "a", "bytes": -1, "seconds": 0, "check_seconds": 0, "accepted": True}, [1]):
        with pytest.raises(InputError, match="proof"):
            Record.from_json(_record_document(bad))


def _record_document(proof: Any) -> dict[str, Any]:
    document = {"key": "i:0:contrastive", "instance": "i", "family": "f", "activation": "relu", "network_hash": "0" * 16,
                "n": 2, "widths": [1], "row": 0, "kind": "contrastive", "threshold": 0.0, "prediction": 1, "output": 1.0,
                "greedy": None, "solvers": {}, "verdict": "unknown", "certified": False, "minimum": None,
                "minimum_proved": False, "gap": None}  # fmt: skip
    return document if proof is None else {**document, "proof": proof}


def test_solve_minimum_writes_the_certificate_of_an_exact_claim(tmp_path: Path) -> None:
    net = Network.from_json(DESIGN_NETWORK)
    outcome = solve_minimum(net, np.ones(3), "contrastive", threshold=0.5, solver="enumerate", proof=tmp_path / "p")
    assert outcome.status == "optimal" and outcome.size == 2
    (path,) = (tmp_path / "p").glob("*.proof.json")
    assert f"certificate: {path}" in outcome.message
    assert json.loads(path.read_text())["claim"] == {"no_explanation_within": 1}
    assert main(["proof", "check", str(path)]) == 0
    outcome = solve_minimum(
        net, np.ones(3), "contrastive", threshold=0.5, solver="enumerate", at_most=1, proof=tmp_path / "one.json"
    )
    assert outcome.status == "none_within" and main(["proof", "check", str(tmp_path / "one.json")]) == 0
    outcome = solve_minimum(net, np.ones(3), "contrastive", threshold=9.0, solver="enumerate", proof=tmp_path / "none.json")
    assert outcome.status == "none_exists"
    assert json.loads((tmp_path / "none.json").read_text())["claim"] == {"none_exists": True}
    # a float MILP's "nothing smaller" is no exact claim: nothing to certify
    outcome = solve_minimum(net, np.ones(3), "contrastive", threshold=0.5, solver="highs", at_most=1, proof=tmp_path / "q")
    assert outcome.status == "none_within" and not outcome.exact
    assert "no certificate: no exact" in outcome.message and not list((tmp_path / "q").glob("*.json"))


def test_proof_time_limit_bounds_each_certificate_search(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """--proof-time-limit is the certificate search's own limit, apart from --time-limit: with a
    limit no search can meet, every claim that needs a search is recorded without a file, the
    deadline its reason. "No CXp of 0 features" needs none (the one subset, empty, leaves x where
    it is: a `subset-split` certificate written at once), and its files are accepted."""
    network, inputs = _design(tmp_path)
    folder, out = tmp_path / "proofs", tmp_path / "out.jsonl"
    code = main(["certify", str(network), "--inputs", str(inputs), "--threshold", "0.5", "--solvers", "enumerate",
                 "--proof", str(folder), "--proof-time-limit", "1e-9", "--out", str(out)])  # fmt: skip
    capsys.readouterr()
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    claims = [line for line in lines if line["verdict"] == "none_exists" or (line["minimum_proved"] and line["minimum"])]
    searched = [line for line in claims if line["proof"].get("claim") != {"no_explanation_within": 0}]
    assert searched and all(line["proof"]["file"] is None and "deadline" in line["proof"]["reason"] for line in searched), claims
    written = [line["proof"]["file"] for line in claims if line["proof"]["file"] is not None]
    assert code == 0 and sorted(path.name for path in folder.glob("*.proof.json")) == sorted(set(written))
    assert all(main(["proof", "check", str(folder / name)]) == 0 for name in written)
    assert main(["certify", str(network), "--inputs", str(inputs), "--proof", str(folder), "--proof-time-limit", "0"]) == 2
    assert "--proof-time-limit" in capsys.readouterr().err


def test_a_generator_that_lies_about_linear_leaves_gets_no_false_certificate_past_the_checker(monkeypatch: pytest.MonkeyPatch) -> None:
    """A generator whose every node claims the leaf "linear" (a deliberately wrong decision): on
    false claims (an explanation of at most k features exists, brute force) it writes certificates,
    and the checker rejects every one, at a leaf "linear"; on true ones it accepts only what holds."""
    from cardinal.solvers import proof

    monkeypatch.setattr(proof._Tree, "closes", lambda self, chosen, open_, budget: ({"leaf": "linear"}, self.shares))
    written = 0
    for seed in range(8):
        for activation in ("relu", {"name": "leaky_relu", "slope": 0.2}, {"name": "hardtanh", "min": 0.0, "max": 0.8}):
            problem = _case(seed, activation, seed % 2 == 0)
            m = _minimum(problem)
            for k in range(problem.n + 1):
                certificate = shortcut_tree(problem, k).certificate
                if certificate is None:
                    continue
                written += 1
                report = checker.check(certificate, problem.net.to_json())
                if m is not None and k >= m:  # false: rejected, at a leaf "linear"
                    assert not report.accepted and "leaf 'linear'" in report.message, report.message
    assert written > 50


def test_every_tampering_of_a_certificate_with_linear_leaves_is_rejected() -> None:
    """A relu network's tree with leaves "linear" (no CXp within 3, minimum 4; found as `_rich`)."""
    rng = np.random.default_rng(0)
    net = _network(rng, 10, (6, 4), "relu")
    x = rng.uniform(0, 1, 10).round(3)
    problem = Problem.make(net, x, "contrastive", Domain.unit(10), round(float(rng.uniform(0.2, 0.8)), 3))
    assert _minimum(problem) == 4
    certificate = shortcut_tree(problem, 3).certificate
    assert certificate is not None
    document = net.to_json()
    assert checker.check(certificate, document).accepted
    linear = [leaf for leaf in _leaves(certificate["proof"]["root"]) if leaf["leaf"] == "linear"]
    assert linear and "split" in certificate["proof"]["root"]

    def rejection(change, network: dict[str, Any] | None = None) -> str:
        tampered = copy.deepcopy(certificate)
        change(tampered)
        report = checker.check(tampered, network or document)
        assert not report.accepted
        return report.message

    assert "the node with in" in rejection(lambda c: c["claim"].update(no_explanation_within=4))  # raised by one
    assert "the node with in [], out []: leaf 'linear'" in rejection(lambda c: c["proof"].update(root={"leaf": "linear"}))
    first = next(i for i, leaf in enumerate(_leaves(certificate["proof"]["root"])) if leaf["leaf"] == "linear")
    assert "leaf 'bound'" in rejection(lambda c: _leaves(c["proof"]["root"])[first].update(leaf="bound"))  # the interval bound does not close it
    other = copy.deepcopy(document)
    other["layers"][-1]["bias"][0] -= 0.2  # f lower: a CXp of fewer features
    assert "the node with in" in rejection(lambda c: c["problem"].update(network_sha256=checker.network_sha256(other)[0]), other)

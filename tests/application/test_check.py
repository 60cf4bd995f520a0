"""`cardinal check`: explanations from any source judged exactly, against brute force."""

from __future__ import annotations

import importlib
import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest
from cardinal.verify.check import Claim, check_explanations
from cardinal.verify.cli import main
from cardinal.verify.generate import random_network
from cardinal.verify.pipeline import given

from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.exact import ExactNetwork, check_monotone_explanation
from cardinal.network import Layer, Network


def _check(network: Path, tmp_path: Path, capsys: pytest.CaptureFixture, claims: list[dict], *flags: str):
    """`cardinal check NETWORK --inputs (1,1,1) --threshold 0.5 --explanations CLAIMS FLAGS…`."""
    inputs = tmp_path / "x.csv"
    inputs.write_text("1,1,1\n")
    explanations = tmp_path / "e.jsonl"
    explanations.write_text("".join(json.dumps(claim) + "\n" for claim in claims))
    args = ["check", str(network), "--inputs", str(inputs), "--threshold", "0.5", "--explanations", str(explanations), *flags]
    code = main(args)
    captured = capsys.readouterr()
    return code, [json.loads(line) for line in captured.out.splitlines()], captured.err


def test_invalid_sets_are_rejected_with_an_exactly_verified_witness(
    design_network: Network, design_network_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """f = relu(x0 + x1 − 1) + 0.6·x2 at x = (1, 1, 1), t = 0.5, p(x) = 1."""
    claims = [{"row": 0, "kind": "abductive", "features": [0]}, {"row": 0, "kind": "contrastive", "features": [0]}]
    code, (axp, cxp), err = _check(design_network_file, tmp_path, capsys, claims)
    assert code == 1
    assert axp["verdict"] == cxp["verdict"] == "invalid" and not axp["passed"] and not cxp["valid"]
    exact, x = ExactNetwork(design_network), np.ones(3)
    # AXp {0}: the witness keeps x0 and flips the prediction, in exact arithmetic.
    y = np.array(axp["witness"])
    assert y[0] == x[0] and ((0 <= y) & (y <= 1)).all()
    assert exact.predictions(y[None, :], 0.5)[0] == axp["witness_prediction"] == 0
    # CXp {0}: the most favourable y (x0 moved to 0) still predicts 1, so by monotonicity none flips.
    y = np.array(cxp["witness"])
    assert (y == [0, 1, 1]).all() and exact.predictions(y[None, :], 0.5)[0] == cxp["witness_prediction"] == 1
    assert "witness y = [1.0, 0.0, 0.0], p(y) = 0" in err  # printed for people too


def test_non_minimal_sets_are_rejected_and_minimum_ones_accepted(
    design_network_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    not_subset = {"row": 0, "kind": "contrastive", "features": [0, 1, 2]}  # greedy's answer; {1, 2} suffices
    not_minimum = {"row": 0, "kind": "abductive", "features": [0, 1]}  # subset-minimal, but {2} is smaller
    code, (cxp, axp), err = _check(design_network_file, tmp_path, capsys, [not_subset, not_minimum], "--require", "minimum")
    assert code == 1
    assert cxp["verdict"] == "not_subset_minimal" and cxp["valid"] and cxp["smaller"] == [1, 2]
    assert axp["verdict"] == "not_minimum" and axp["subset_minimal"] and axp["smaller"] == [2] and axp["certified"]
    assert "FAIL row 0 (abductive) {0, 1}: not_minimum; smaller explanation [2]" in err
    code, lines, _ = _check(design_network_file, tmp_path, capsys, [not_subset, not_minimum], "--require", "valid")
    assert code == 0 and [line["verdict"] for line in lines] == ["valid", "valid"]
    minimum = [{"row": 0, "kind": "contrastive", "features": [2, 0]}, {"row": 0, "kind": "abductive", "features": [2]}]
    code, lines, _ = _check(design_network_file, tmp_path, capsys, minimum, "--require", "minimum", "--solvers", "enumerate")
    assert code == 0 and [line["verdict"] for line in lines] == ["minimum", "minimum"]
    assert [line["features"] for line in lines] == [[0, 2], [2]] and all(line["certified"] for line in lines)


def test_none_exists_claims(design_network_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    claims = [{"row": 0, "kind": "contrastive", "features": None}]
    code, [line], _ = _check(design_network_file, tmp_path, capsys, claims)  # x' = 0 flips: a CXp exists
    assert code == 1 and line["verdict"] == "invalid" and line["witness"] == [0.0, 0.0, 0.0]
    code, [line], _ = _check(design_network_file, tmp_path, capsys, claims, "--upper", "1", "--lower", "0.9")
    assert code == 0 and line["verdict"] == "none_exists"  # f ≥ 0.54 + 0.8 on [0.9, 1]^3: nothing flips


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"row": 3, "kind": "contrastive", "features": [0]}',
            r"e\.jsonl: line 1: 'row' must be a row number of the inputs \(0 to 0\)",
        ),
        ('{"row": 0, "kind": "both", "features": [0]}', r"line 1: 'kind' must be contrastive or abductive"),
        ('{"row": 0, "kind": "abductive", "features": [7]}', r"line 1: 'features': feature 7 is not an input of the network"),
        ('{"row": 0, "kind": "abductive", "features": [1, 1]}', r"line 1: 'features' lists feature 1 twice"),
        ('{"row": 0, "kind": "abductive"}', r"line 1: 'features' is missing"),
        ("{nope", r"line 1: malformed JSON"),
        (
            '{"row": 0, "kind": "abductive", "features": [1]}\n{"row": 0, "kind": "abductive", "features": [2]}',
            r"line 2: .*already given on line 1",
        ),
    ],
)
def test_bad_explanation_files_exit_2(
    design_network_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture, text: str, message: str
) -> None:
    inputs = tmp_path / "x.csv"
    inputs.write_text("1,1,1\n")
    (tmp_path / "e.jsonl").write_text(text + "\n")
    out = tmp_path / "out.jsonl"
    args = [
        "check",
        str(design_network_file),
        "--inputs",
        str(inputs),
        "--explanations",
        str(tmp_path / "e.jsonl"),
        "--out",
        str(out),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(message, err), err
    assert not out.exists()


def _brute_force(net: Network, x: np.ndarray, kind: str, domain: Domain, threshold: float) -> dict[tuple[int, ...], bool]:
    exact = ExactNetwork(net)
    return {
        subset: bool(check_monotone_explanation(exact, x, subset, kind, domain, threshold))
        for size in range(net.n_inputs + 1)
        for subset in itertools.combinations(range(net.n_inputs), size)
    }


def test_verdicts_equal_brute_force_on_random_monotone_networks() -> None:
    rng = np.random.default_rng(7)
    checked = {"invalid": 0, "not_subset_minimal": 0, "not_minimum": 0, "minimum": 0}
    for trial in range(6):
        net = random_network(rng, 5, (4, 3), ("relu", "hardtanh", "step")[trial % 3])
        X = rng.random((3, 5)).round(2)
        domain = Domain.unit(5)
        threshold = float(np.median(net.forward(X).numpy()))
        for row, x in enumerate(X):
            for kind in ("contrastive", "abductive"):
                valid = _brute_force(net, x, kind, domain, threshold)
                sizes = [len(s) for s, ok in valid.items() if ok]
                subsets = list(valid)
                smallest = next((s for s in subsets if valid[s]), None)  # subsets come in order of size; None: no CXp
                claims = [Claim(row, kind, subsets[i]) for i in rng.permutation(len(subsets))[:6]] + [Claim(row, kind, smallest)]
                for judgement in check_explanations(net, X, claims, given(net, domain, threshold), "minimum", ("enumerate",)):
                    subset = judgement.claim.features
                    if subset is None:
                        assert judgement.verdict == "none_exists" and not sizes, (trial, row, kind)
                        continue
                    smaller_valid = any(valid[s] for s in itertools.combinations(subset, len(subset) - 1)) if subset else False
                    expected = (
                        "invalid"
                        if not valid[subset]
                        else "not_subset_minimal"
                        if smaller_valid
                        else "not_minimum"
                        if len(subset) > min(sizes)
                        else "minimum"
                    )
                    assert judgement.verdict == expected, (trial, row, kind, subset)
                    if judgement.smaller is not None:
                        assert valid[judgement.smaller] and len(judgement.smaller) < len(subset)
                    checked[expected] += 1
    assert all(count > 0 for count in checked.values()), checked  # every verdict was exercised


@pytest.mark.parametrize(("binary", "solver"), [(True, "enumerate"), (False, "z3")])
def test_non_monotone_validity_by_exact_search(binary: bool, solver: str) -> None:
    """f = relu(x0 − x1 + 0.5·x2) − 0.25, x = (0, 1, 0): p(x) = 0. The argument of relu is linear,
    so on the box [0, 1]^3 the corners decide, as on the Boolean cube."""
    if solver == "z3":
        importlib.import_module("z3")
    net = Network(
        [
            Layer(np.array([[1.0, -1.0, 0.5]]), np.zeros(1), Activation.make("relu")),
            Layer(np.array([[1.0]]), np.array([-0.25]), Activation.make("identity")),
        ]
    )
    X = np.array([[0.0, 1.0, 0.0]])
    domain = Domain.boolean(3) if binary else Domain.unit(3)
    cube = [np.array(y, dtype=float) for y in itertools.product([0.0, 1.0], repeat=3)]
    flips = [y for y in cube if net.forward(y).item() > 0]

    def truth(kind: str, subset: tuple[int, ...]) -> bool:
        inside = set(subset)
        if kind == "contrastive":  # some flipping y agrees with x outside the set
            return any(all(y[i] == X[0, i] for i in range(3) if i not in inside) for y in flips)
        return not any(all(y[i] == X[0, i] for i in inside) for y in flips)

    claims = [
        Claim(0, kind, s) for kind in ("contrastive", "abductive") for n in range(4) for s in itertools.combinations(range(3), n)
    ]
    judgements = check_explanations(net, X, claims, given(net, domain, 0.0), "subset", (solver,))
    for judgement in judgements:
        claim = judgement.claim
        assert judgement.valid == truth(claim.kind, claim.features), claim
        if judgement.valid is False and claim.kind == "abductive":
            y = np.array(judgement.witness)  # a flipping point that keeps the set at x
            assert ExactNetwork(net).predictions(y[None, :], 0.0)[0] == 1 and all(y[i] == X[0, i] for i in claim.features)
    verdicts = {(j.claim.kind, j.claim.features): j.verdict for j in judgements}
    assert verdicts[("contrastive", (1, 2))] == "subset_minimal" and verdicts[("abductive", (0, 1))] == "subset_minimal"


def test_progress_shows_only_when_a_run_lasts(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """Off a terminal (as here), a line every 10 s that says what it counts (judged so far, not
    passed: issue 26 saw `check: 2/4` above a table where 3 of 4 passed); nothing for a run
    shorter than that."""
    from cardinal.verify.commands import common

    clock = [0.0]
    monkeypatch.setattr(common.time, "monotonic", lambda: clock[0])
    with common._Progress(3, "check", "judged") as progress:
        for now in (0.5, 12.0, 12.5):
            clock[0] = now
            progress.update()
    assert capsys.readouterr().err == "cardinal check: judged 2 of 3 explanation(s)\n"


def test_unknown_solver_exit_2(design_network_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code, lines, err = _check(
        design_network_file, tmp_path, capsys, [{"row": 0, "kind": "abductive", "features": [2]}], "--solvers", "cplex"
    )
    assert code == 2 and lines == [] and "unknown solver 'cplex'" in err

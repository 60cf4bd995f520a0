"""`cardinal certify`: verdicts per input and kind, disagreements loud and saved, bad input."""

from __future__ import annotations

import importlib
import json
import re
import time
from pathlib import Path

import cardinal.solvers.base as base
import pytest
from cardinal.solvers import registry
from cardinal.solvers.base import BaseSolver
from cardinal.verify.cli import main

from cardinal.problem import Outcome, Problem, Status


def _run(args: list[str], capsys: pytest.CaptureFixture) -> tuple[int, list[dict], str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, [json.loads(line) for line in captured.out.splitlines()], captured.err


def _certify_design(network: Path, tmp_path: Path, capsys: pytest.CaptureFixture, *flags: str) -> tuple[int, list[dict], str]:
    """`cardinal certify NETWORK --inputs (1,1,1) FLAGS…`."""
    inputs = tmp_path / "x.csv"
    inputs.write_text("1,1,1\n")
    return _run(["certify", str(network), "--inputs", str(inputs), *flags], capsys)


def test_design_network_all_solvers(design_network_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    names = ",".join(base.available_solvers())
    code, lines, err = _certify_design(
        design_network_file, tmp_path, capsys, "--threshold", "0.5", "--solvers", names, "--cases", str(tmp_path / "cases")
    )
    assert code == 0
    by_kind = {line["kind"]: line for line in lines}
    cxp, axp = by_kind["contrastive"], by_kind["abductive"]
    assert cxp["greedy"]["features"] == [0, 1, 2] and cxp["verdict"] == "greedy_suboptimal" and cxp["certified"]
    assert len(cxp["minimum"]) == 2
    assert set(cxp["solvers"]) == set(base.available_solvers())
    assert all(o["status"] == "optimal" and o["size"] == 2 for o in cxp["solvers"].values())
    assert axp["greedy"]["features"] == [2] and axp["verdict"] == "greedy_minimal"
    assert all(o["status"] == "none_within" for o in axp["solvers"].values())
    assert len(list((tmp_path / "cases").glob("greedy_suboptimal-*.json"))) == 1
    assert "greedy_suboptimal" in err  # the verdict table


def test_non_monotone_network_is_exact_only(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    network = tmp_path / "net.json"
    layers = [
        {"weight": [[1.0, -1.0, 0.5], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], "bias": [0.0, 0.0, 0.0], "activation": "relu"},
        {"weight": [[1.0, 1.0, -1.0]], "bias": [-0.25], "activation": "identity"},
    ]
    network.write_text(json.dumps({"format": "cardinal.network/1", "layers": layers}))
    inputs = tmp_path / "x.csv"
    inputs.write_text("0,1,0\n")
    code, lines, _ = _run(["certify", str(network), "--inputs", str(inputs), "--binary", "--solvers", "enumerate"], capsys)
    assert code == 0
    # f = relu(x0 − x1 + 0.5·x2) − 0.25 (+ two equal units that cancel, making every feature of
    # mixed sign, so no greedy) is −0.25 at (0,1,0): class 0. Each single change keeps
    # relu(·) = 0; {x1, x2} (y = (0,0,1)) gives 0.25 > 0: the minimum CXp has size 2.
    cxp = next(line for line in lines if line["kind"] == "contrastive")
    assert cxp["greedy"] is None and cxp["verdict"] == "exact_only" and cxp["solvers"]["enumerate"]["size"] == 2


class LiarSolver(BaseSolver):
    """A float backend that claims nothing smaller than greedy exists, whatever the question."""

    name = "liar"

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        return self.outcome(Status.NONE_WITHIN, time.perf_counter())


class ExactLiarSolver(LiarSolver):
    """The same lie from a backend that calls itself exact: a bug, so a disagreement."""

    name = "exact_liar"
    exact = True


def test_refuted_float_claim_is_logged_not_a_verdict(
    design_network_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(registry.BACKENDS, "liar", registry.Backend("liar", __name__, "LiarSolver", exact=False))
    flags = ["--threshold", "0.5", "--kind", "contrastive", "--solvers", "enumerate,liar", "--cases", str(tmp_path / "c")]
    code, [line], err = _certify_design(design_network_file, tmp_path, capsys, *flags)
    assert code == 0
    assert line["verdict"] == "greedy_suboptimal" and line["certified"] and line["minimum_proved"]
    assert line["solvers"]["liar"]["status"] == "refuted" and line["solvers"]["liar"]["claimed"] == "none_within"
    assert line["refuted"] == ["liar"] and "contradicted" in line["solvers"]["liar"]["message"]
    assert "claims refuted by exact replay" in err and re.search(r"liar\s+none_within\s+1", err)
    assert "DISAGREEMENT" not in err


def test_disagreement_is_loud_and_saved(
    design_network_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(registry.BACKENDS, "exact_liar", registry.Backend("exact_liar", __name__, "ExactLiarSolver", exact=True))
    out = tmp_path / "certified.jsonl"
    flags = ["--threshold", "0.5", "--kind", "contrastive", "--solvers", "enumerate,exact_liar", "--out", str(out)]
    code, _, err = _certify_design(design_network_file, tmp_path, capsys, *flags)
    assert code == 1  # exact evidence conflicts
    [line] = [json.loads(text) for text in out.read_text().splitlines()]
    assert line["verdict"] == "solver_disagreement" and not line["certified"] and not line["minimum_proved"]
    assert "!!! SOLVER DISAGREEMENT on row 0 (contrastive)" in err
    [case] = (tmp_path / "certified.cases").glob("solver_disagreement-*.json")
    assert main(["replay", str(case)]) == 0  # the exactly replayed minimum {0,2} (or {1,2}) stands


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--solvers", "cplex"], r"unknown solver 'cplex'"),
        (["--solvers", ""], r"--solvers needs at least one solver"),
        (["--time-limit", "0"], r"argument --time-limit: .0. is not positive"),
    ],
)
def test_bad_solver_flags(
    design_network_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture, extra: list[str], message: str
) -> None:
    code, lines, err = _certify_design(design_network_file, tmp_path, capsys, *extra)
    assert code == 2 and lines == []
    assert re.search(message, err), err


def test_missing_backend_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.BACKENDS, "ghost", registry.Backend("ghost", "cardinal.solvers.no_such_module", "Ghost", exact=False, extra="ghost"))
    with pytest.raises(ValueError, match=r"solver 'ghost' is not installed .*pip install 'cardinal\[ghost\]'"):
        base.get_solver("ghost")


def test_float_solver_alone_certifies_only_size_one() -> None:
    """HiGHS's "no smaller" is a float claim: it certifies nothing. A greedy answer of size 1 is
    minimal by exact evidence alone (the empty set is no CXp); one of size 2 is `unknown` (never
    `greedy_minimal` on a float claim), uncertified, with no proved minimum."""
    importlib.import_module("highspy")
    import numpy as np
    from cardinal.verify.certify import certify

    from cardinal.activations import Activation
    from cardinal.network import Layer, Network

    single = Network([Layer(np.array([[1.0, 1.0]]), np.array([-0.5]), Activation.make("relu"))])
    (size_one,) = certify(single, np.ones(2), "contrastive", threshold=0.6, solvers=("highs",))
    assert size_one.verdict == "greedy_minimal" and size_one.greedy.size == 1 and size_one.certified
    assert size_one.minimum_proved and size_one.minimum == size_one.greedy.features
    both = Network([Layer(np.array([[1.0, 1.0]]), np.array([0.0]), Activation.make("identity"))])
    (size_two,) = certify(both, np.ones(2), "contrastive", threshold=0.5, solvers=("highs",))
    assert size_two.verdict == "unknown" and size_two.greedy.size == 2 and not size_two.certified
    assert size_two.solvers["highs"].status == "none_within"
    assert not size_two.minimum_proved and any("only a float MILP (highs)" in note for note in size_two.notes)
    (by_enumeration,) = certify(both, np.ones(2), "contrastive", threshold=0.5, solvers=("highs", "enumerate"))
    assert by_enumeration.certified and by_enumeration.minimum_proved


def test_progress_counts_what_happened(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """certify's progress line counts the outcomes: 4 done, 2 of them certified and 2 unknown, is
    never 'certified 4 of 4'."""
    from cardinal.verify.commands import common

    clock = [0.0]
    monkeypatch.setattr(common.time, "monotonic", lambda: clock[0])
    with common._Progress(4, "certify", "done") as progress:
        for now, outcome in ((1.0, "certified"), (2.0, "unknown"), (3.0, "unknown"), (12.0, "certified")):
            clock[0] = now
            progress.update(outcome)
    assert capsys.readouterr().err == "cardinal certify: 4 of 4 explanation(s) done: 2 certified, 2 unknown\n"

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

from cardinal.errors import BackendUnavailable, InputError
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
    code, lines, _ = _run(["certify", str(network), "--inputs", str(inputs), "--binary", "--solvers", "enumerate", "--method", "greedy"], capsys)
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
    """A backend whose library is missing is `BackendUnavailable` (an ImportError, no InputError),
    naming the extra that installs it; `available_solvers` leaves it out."""
    monkeypatch.setitem(registry.BACKENDS, "ghost", registry.Backend("ghost", "cardinal.solvers.no_such_module", "Ghost", exact=False, extra="ghost"))
    with pytest.raises(BackendUnavailable, match=r"solver 'ghost' is not installed .*pip install 'cardinal\[ghost\]'") as caught:
        base.get_solver("ghost")
    assert isinstance(caught.value, ImportError) and not isinstance(caught.value, InputError)
    assert "ghost" not in base.available_solvers() and "enumerate" in base.available_solvers()


def test_missing_backend_on_the_command_line_is_one_line_exit_2(
    design_network_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--solvers` naming a backend that is not installed: one line on stderr, exit code 2, no output."""
    monkeypatch.setitem(registry.BACKENDS, "ghost", registry.Backend("ghost", "cardinal.solvers.no_such_module", "Ghost", exact=False, extra="ghost"))
    out = tmp_path / "certified.jsonl"
    code, lines, err = _certify_design(design_network_file, tmp_path, capsys, "--solvers", "enumerate,ghost", "--out", str(out))
    assert code == 2 and lines == [] and not out.exists()
    assert err.count("\n") == 1 and re.fullmatch(r"cardinal certify: error: solver 'ghost' is not installed .*\n", err), err


def test_float_solver_alone_certifies_only_size_one() -> None:
    """HiGHS's "no smaller" is a float claim: it certifies nothing. A greedy answer of size 1 is
    minimal by exact evidence alone (the empty set is no CXp); one of size 2 is `unknown` (never
    `greedy_minimal` on a float claim), uncertified, with no proved minimum."""
    importlib.import_module("highspy")
    import numpy as np
    from cardinal.verify.pipeline import certify

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


# ---------------------------------------------------------------------------- stopped runs and --resume
# `cardinal certify ARGS` through its entry point, whose row {stop} (counted over kinds) waits for a signal:
# a run stopped mid-solve, however fast or slow the machine.
STOPPED_CERTIFY = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as in a terminal, whatever this process inherited
import cardinal.verify.pipeline as pipeline
decide, calls = pipeline.certify_input, []
def certify_input(*arguments, **options):
    calls.append(1)
    if len(calls) > {stop}:
        time.sleep(300)
    return decide(*arguments, **options)
pipeline.certify_input = certify_input
from cardinal.verify.launch import entry
sys.argv[0] = "cardinal"
entry()
"""


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _untimed(line: dict) -> dict:
    """A certify line without what a second run measures anew (seconds) or names by its --out."""
    line = json.loads(json.dumps(line))
    for part in (line.get("greedy"), *line["solvers"].values(), line.get("proof")):
        if isinstance(part, dict):
            part.pop("seconds", None)
            part.pop("check_seconds", None)
    return line


@pytest.mark.parametrize("signum", [2, 15, 9], ids=["SIGINT", "SIGTERM", "SIGKILL"])
def test_a_stopped_certify_keeps_its_lines_and_resume_finishes_each_row_once(
    tmp_path: Path, design_network_file: Path, capsys: pytest.CaptureFixture, signum: int
) -> None:
    """A certify stopped mid-run (Ctrl-C, SIGTERM: exit code 128 + the signal, one line, no
    traceback; SIGKILL) keeps the lines of the rows it finished, whole, in order; --resume
    certifies the rest, each row and kind once, and the file then equals an uninterrupted run's
    (timings aside); the temporary files a killed run leaves are removed."""
    import os
    import signal
    import subprocess
    import sys

    inputs = tmp_path / "x.csv"
    inputs.write_text("1,1,1\n0.2,0.9,1\n0,1,0\n1,0,1\n0.5,0.5,0.5\n")
    flags = [str(design_network_file), "--inputs", str(inputs), "--threshold", "0.5", "--solvers", "enumerate"]
    whole, stopped = tmp_path / "whole.jsonl", tmp_path / "stopped.jsonl"
    assert main(["certify", *flags, "--out", str(whole)]) == 0
    expected = [_untimed(line) for line in _lines(whole)]
    assert len(expected) == 10
    stop = 4
    script = STOPPED_CERTIFY.format(stop=stop)
    process = subprocess.Popen(
        [sys.executable, "-c", script, "certify", *flags, "--out", str(stopped)], stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 300  # generous: a loaded machine starts Python and torch slowly
        while not (stopped.exists() and stopped.read_text().count("\n") == stop):
            assert process.poll() is None and time.monotonic() < deadline, "certify did not reach its stop"
            time.sleep(0.05)
        os.kill(process.pid, signum)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    if signum == signal.SIGKILL:
        assert process.returncode == -signal.SIGKILL
        left = [tmp_path / ".stopped.jsonl.0123abcd.tmp", tmp_path / "stopped.proofs" / ".row4-abductive.proof.json.89abcdef.tmp"]
        for path in left:  # what a kill between a temporary's write and its rename leaves
            path.write_text("torn")
    else:
        assert process.returncode == 128 + signum and err.splitlines()[-1:] == ["cardinal certify: interrupted"], err
        assert "Traceback" not in err
        left = []
    kept = _lines(stopped)
    assert [_untimed(line) for line in kept] == expected[:stop]  # whole lines, the first rows, in order
    capsys.readouterr()
    assert main(["certify", *flags, "--out", str(stopped), "--resume"]) == 0
    assert f"{stop} line(s) kept from {stopped}, {len(expected) - stop} new" in capsys.readouterr().err
    assert [_untimed(line) for line in _lines(stopped)] == expected
    assert not [path for path in left if path.exists()]
    assert main(["certify", *flags, "--out", str(stopped), "--resume"]) == 0  # nothing left to do: nothing added
    assert [_untimed(line) for line in _lines(stopped)] == expected


def test_resume_refuses_a_file_of_another_run(tmp_path: Path, design_network_file: Path, capsys: pytest.CaptureFixture) -> None:
    """--resume keeps only lines of the same run: another threshold (or a row twice) is refused
    with one line naming the file and line, exit code 2, and the file is left as it was."""
    inputs = tmp_path / "x.csv"
    inputs.write_text("1,1,1\n0.2,0.9,1\n")
    flags = [str(design_network_file), "--inputs", str(inputs), "--solvers", "enumerate"]
    out = tmp_path / "o.jsonl"
    assert main(["certify", *flags, "--threshold", "0.5", "--out", str(out)]) == 0
    before = out.read_bytes()
    capsys.readouterr()
    assert main(["certify", *flags, "--threshold", "0.25", "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and f"{out} line 1: 'threshold' is 0.5, this run's is 0.25" in err[0]
    assert out.read_bytes() == before
    out.write_bytes(before + before.splitlines(keepends=True)[0])
    assert main(["certify", *flags, "--threshold", "0.5", "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].endswith(f"{out} line 5: row 0 (contrastive) appears twice"), err

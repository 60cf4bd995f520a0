"""Verdicts rest on exact evidence alone (issue 10).

A float MILP's claim is evidence to replay: when the exact check refutes it, it is listed under
its solver and changes no verdict, no `minimum` and no certificate. The greedy verdict is checked
against brute force (tests/bruteforce.py) on hand-built step networks where the MILPs fail, on
random step networks over the Boolean cube with 6-decimal weights and rounded thresholds (where
float claims fail often), and on random monotone PWL networks of every kind; non-monotone
networks on a binary box against the brute-force minimum over the cube.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from cardinal.solvers.base import available_solvers
from cardinal.verify.certify import RowVerdict, SolverPool, certify_row, greedy_answers
from cardinal.verify.cli import main
from cardinal.verify.generate import random_network
from cardinal.verify.pipeline import certify

from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.exact import check_monotone_explanation
from cardinal.network import Layer, Network
from cardinal.problem import Problem, Status, Verdict
from tests.bruteforce import monotone_minimum, vertex_minimum, vertex_valid

INSTALLED = available_solvers()
MILPS = tuple(name for name in ("gurobi", "highs") if name in INSTALLED)
EXACT = tuple(name for name in ("z3", "enumerate") if name in INSTALLED)
STEP = Activation.make("step", at=0.0)
IDENTITY = Activation.make("identity")


def _problem(net: Network, x: np.ndarray, kind: str, domain: Domain, threshold: float) -> Problem:
    return Problem.make(net, x, kind, domain, threshold)


def check_against_brute_force(problem: Problem, certificate: RowVerdict) -> None:
    """The record's verdict, `minimum` and flags agree with brute force over all subsets."""
    where = json.dumps(certificate.to_json())
    exact_answered = any(
        o.exact and o.status in (Status.OPTIMAL, Status.FEASIBLE, Status.NONE_WITHIN, Status.NONE_EXISTS)
        for o in certificate.solvers.values()
    )
    assert certificate.verdict != Verdict.SOLVER_DISAGREEMENT, where
    if certificate.minimum is not None:  # exactly valid, whatever the verdict
        assert check_monotone_explanation(
            problem.exact, problem.x, certificate.minimum, problem.kind, problem.domain, problem.threshold
        ), where
    for name, outcome in certificate.solvers.items():
        if outcome.status == Status.REFUTED:
            assert name in certificate.refuted and not outcome.exact, where
            assert outcome.claimed in (Status.OPTIMAL, Status.FEASIBLE, Status.NONE_WITHIN, Status.NONE_EXISTS), where
    greedy = certificate.greedy.features
    truth = monotone_minimum(problem)
    if greedy is None:
        assert truth is None and certificate.verdict == Verdict.NONE_EXISTS and certificate.certified, where
        return
    if certificate.verdict == Verdict.GREEDY_SUBOPTIMAL:
        assert len(greedy) > truth and certificate.certified, where
    elif certificate.verdict == Verdict.GREEDY_MINIMAL:
        assert len(greedy) == truth, where
        assert certificate.certified == certificate.minimum_proved, where
    else:
        assert certificate.verdict == Verdict.UNKNOWN and not certificate.certified, where
    if exact_answered:  # an exact backend answered: the verdict is decided and certified
        assert certificate.verdict in (Verdict.GREEDY_MINIMAL, Verdict.GREEDY_SUBOPTIMAL), where
        assert certificate.certified, where
    if certificate.minimum_proved:
        assert len(certificate.minimum) == truth, where
    assert not (certificate.certified and certificate.verdict == Verdict.UNKNOWN), where


# ---------------------------------------------------------------------------- hand-built cases
def breakpoint_network() -> Network:
    """f = step((1 − 2^-40)·y0 + 0.5·y1 − 1) on {0,1}^2: at y = (1, 0) the pre-activation is
    −2^-40, just below the breakpoint, within the MILPs' feasibility tolerance of it."""
    return Network([Layer(np.array([[1 - 2**-40, 0.5]]), np.array([-1.0]), STEP), Layer(np.ones((1, 1)), np.zeros(1), IDENTITY)])


def within_epsilon_network() -> Network:
    """f = (1 + 2^-30)·[y0 ∧ y1] + 0.6·y2 on {0,1}^3 with t = 1: {0, 1} reaches f = 1 + 2^-30 > t,
    below the MILPs' class-1 margin t + ε; greedy takes y2 first and needs all three."""
    hidden = Layer(np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]), np.array([-2.0, -1.0]), STEP)
    return Network([hidden, Layer(np.array([[1 + 2**-30, 0.6]]), np.zeros(1), IDENTITY)])


@pytest.mark.skipif(not MILPS or not EXACT, reason="needs a float MILP and an exact backend")
def test_refuted_milp_set_on_a_step_breakpoint() -> None:
    """The MILPs claim {0} (the step counted as on); exact evidence says greedy's {0, 1} is minimal."""
    net, domain = breakpoint_network(), Domain.boolean(2)
    (certificate,) = certify(net, np.zeros(2), "contrastive", domain, 0.5, solvers=(*MILPS, *EXACT))
    problem = _problem(net, np.zeros(2), "contrastive", domain, 0.5)
    check_against_brute_force(problem, certificate)
    assert certificate.greedy.features == (0, 1) and monotone_minimum(problem) == 2
    assert certificate.verdict == Verdict.GREEDY_MINIMAL and certificate.certified and certificate.minimum == (0, 1)
    for name in MILPS:
        outcome = certificate.solvers[name]
        assert outcome.status == Status.REFUTED and outcome.claimed == Status.OPTIMAL and outcome.solution == (0,)
    # the MILPs alone: their only claims are refuted, so nothing is decided
    (alone,) = certify(net, np.zeros(2), "contrastive", domain, 0.5, solvers=MILPS)
    assert alone.verdict == Verdict.UNKNOWN and not alone.certified and not alone.minimum_proved
    assert alone.minimum == (0, 1) and alone.gap is None  # the best set known (greedy's), not proved minimum


@pytest.mark.skipif(not MILPS or not EXACT, reason="needs a float MILP and an exact backend")
def test_milp_none_within_contradicted_by_a_replayed_set() -> None:
    net, domain = within_epsilon_network(), Domain.boolean(3)
    problem = _problem(net, np.zeros(3), "contrastive", domain, 1.0)
    (certificate,) = certify(net, np.zeros(3), "contrastive", domain, 1.0, solvers=(*MILPS, *EXACT))
    check_against_brute_force(problem, certificate)
    assert certificate.verdict == Verdict.GREEDY_SUBOPTIMAL and certificate.certified and certificate.minimum_proved
    assert certificate.minimum == (0, 1) and certificate.gap == 1
    for name in MILPS:
        outcome = certificate.solvers[name]
        assert outcome.status == Status.REFUTED and outcome.claimed == Status.NONE_WITHIN
        assert "contradicted" in outcome.message
    (alone,) = certify(net, np.zeros(3), "contrastive", domain, 1.0, solvers=MILPS)
    # the MILPs' "nothing smaller" alone is no evidence: unknown, never greedy_minimal, the claim kept in its outcome
    assert alone.verdict == Verdict.UNKNOWN and not alone.certified and not alone.minimum_proved
    assert alone.minimum == (0, 1, 2) and alone.gap is None and not alone.refuted  # greedy's: the best set known
    assert all(alone.solvers[name].status == Status.NONE_WITHIN for name in MILPS)
    assert any("only a float MILP" in note and "not proved" in note for note in alone.notes)


@pytest.mark.skipif(len(MILPS) < 2, reason="needs Gurobi and HiGHS")
def test_design_network_within_epsilon_is_not_proved(design_network_file: Path, tmp_path: Path, capsys) -> None:
    """Issue 10, item 7: at x = 0, t = 0.99999999 the MILPs miss {0, 1} (f = 1 > t, below t + ε)."""
    inputs = tmp_path / "x.csv"
    inputs.write_text("0,0,0\n")
    flags = ["--inputs", str(inputs), "--threshold", "0.99999999", "--kind", "contrastive"]
    assert main(["certify", str(design_network_file), *flags, "--solvers", "gurobi,highs"]) == 0
    (line,) = [json.loads(text) for text in capsys.readouterr().out.splitlines()]
    assert line["greedy"]["features"] == [0, 1, 2]
    assert line["verdict"] == "unknown" and not line["minimum_proved"] and not line["certified"]  # the MILPs alone prove nothing
    assert main(["certify", str(design_network_file), *flags, "--solvers", "gurobi,highs,enumerate"]) == 0
    (line,) = [json.loads(text) for text in capsys.readouterr().out.splitlines()]
    assert line["verdict"] == "greedy_suboptimal" and line["certified"] and line["minimum"] == [0, 1]
    assert line["minimum_proved"] and sorted(line["refuted"]) == ["gurobi", "highs"]


# ---------------------------------------------------------------------------- random step networks
def _step_instances(seed: int, count: int):
    """Monotone step networks over {0,1}^n, 6-decimal weights, the threshold a rounded median of f
    over the cube (the held-out setting where float claims fail)."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(4, 8))
        net = random_network(rng, n, (int(rng.integers(3, 7)),), "step", decimals=6)
        cube = np.array(list(itertools.product((0.0, 1.0), repeat=n)))
        threshold = float(np.round(np.median(net.forward(cube).numpy()), 6))
        yield net, (rng.random((3, n)) > 0.5).astype(float), threshold, Domain.boolean(n)


def _certify_all(instances, solvers: tuple[str, ...], kinds=("contrastive", "abductive")) -> tuple[int, int]:
    """Certify every row and kind, check each against brute force; (records, refuted claims)."""
    records = refuted = 0
    with SolverPool(solvers) as pool:
        for net, X, threshold, domain in instances:
            for kind in kinds:
                _, answers = greedy_answers(net, X, kind, domain, threshold)
                for row, answer in enumerate(answers):
                    problem = _problem(net, X[row], kind, domain, threshold)
                    certificate = certify_row(pool, problem, answer, 30.0, row)
                    check_against_brute_force(problem, certificate)
                    records += 1
                    refuted += len(certificate.refuted)
    return records, refuted


@pytest.mark.skipif(not MILPS or "enumerate" not in INSTALLED, reason="needs a float MILP and enumerate")
def test_random_step_networks_refuted_claims_change_no_verdict() -> None:
    records, refuted = _certify_all(_step_instances(0, 6), (*MILPS, "enumerate"))
    assert records == 36 and refuted >= 1  # the float MILPs did fail here, and nothing followed them


@pytest.mark.slow
@pytest.mark.skipif(not MILPS or not EXACT, reason="needs a float MILP and an exact backend")
def test_random_step_networks_refuted_claims_change_no_verdict_more() -> None:
    records, refuted = _certify_all(_step_instances(1, 40), INSTALLED)
    assert records == 240 and refuted >= 5


# ---------------------------------------------------------------------------- held-out property test
ACTIVATIONS = ("relu", "hardtanh", "leaky_relu", "step")


def _pwl_instances(seed: int, count: int):
    """Random monotone PWL networks, Boolean and real boxes, thresholds near an output."""
    rng = np.random.default_rng(seed)
    for index in range(count):
        activation = ACTIVATIONS[index % len(ACTIVATIONS)]
        binary = index % 3 == 0
        n = int(rng.integers(3, 7))
        hidden = (int(rng.integers(2, 5)),) * int(rng.integers(1, 3))
        net = random_network(rng, n, hidden, activation, decimals=int(rng.integers(1, 7)))
        X = (rng.random((3, n)) > 0.5).astype(float) if binary else np.round(rng.random((3, n)), 2)
        outputs = net.forward(X).numpy()
        threshold = float(np.round(outputs[int(rng.integers(0, 3))] + rng.choice([0.0, 1e-9, -1e-9, 0.01]), 6))
        if np.any(outputs == threshold):  # x itself must have a decided prediction
            threshold += 1e-3
        yield net, X, threshold, Domain.boolean(n) if binary else Domain.unit(n)


@pytest.mark.skipif(not EXACT, reason="needs an exact backend")
def test_held_out_pwl_networks_verdicts_equal_brute_force() -> None:
    records, _ = _certify_all(_pwl_instances(3, 8), INSTALLED)
    assert records == 48


@pytest.mark.slow
@pytest.mark.skipif(not EXACT, reason="needs an exact backend")
def test_held_out_pwl_networks_verdicts_equal_brute_force_more() -> None:
    records, _ = _certify_all(_pwl_instances(4, 60), INSTALLED)
    assert records == 360


# ---------------------------------------------------------------------------- non-monotone, binary box
@pytest.mark.parametrize("kind", ["contrastive", "abductive"])
@pytest.mark.skipif("enumerate" not in INSTALLED, reason="needs enumerate")
def test_non_monotone_exact_only_minimum_equals_the_cube(kind: str) -> None:
    rng = np.random.default_rng(21)
    checked = 0
    with SolverPool(INSTALLED) as pool:
        for index in range(10):
            n = int(rng.integers(3, 7))
            net = random_network(rng, n, (int(rng.integers(2, 5)),), ACTIVATIONS[index % 4], monotone=False, decimals=2)
            x = (rng.random(n) > 0.5).astype(float)
            cube = np.array(list(itertools.product((0.0, 1.0), repeat=n)))
            threshold = float(np.round(np.median(net.forward(cube).numpy()), 2)) + 1e-3
            problem = _problem(net, x, kind, Domain.boolean(n), threshold)
            certificate = certify_row(pool, problem, None, 30.0)
            where = json.dumps(certificate.to_json())
            truth = vertex_minimum(problem)
            assert certificate.verdict == Verdict.EXACT_ONLY and certificate.certified, where
            if truth is None:
                assert certificate.minimum is None, where
            else:
                assert len(certificate.minimum) == truth and certificate.minimum_proved, where
                assert vertex_valid(problem, certificate.minimum), where
            checked += 1
    assert checked == 10

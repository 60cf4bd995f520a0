"""The exact replay of claims that no single point shows, and float claims judged both ways (issue 24).

- Non-monotone AXps and "no CXp exists" are universal claims: the exact set oracle
  (`solvers.oracle`) replays them; undecided, they stay unreplayed and out of `minimum`.
- The MILPs reach class 0 with f ≤ t: the ε sits on the strict side only, so it cuts off no
  valid set.
- `refuted` means the set is no explanation (or its "nothing smaller" is contradicted): a failed
  witness alone makes the oracle decide the set, and `unconfirmed` is what stays undecided.
- `solve_minimum`, guarded or not, returns what the replay says.
Checked against brute force over Boolean cubes on random non-monotone ReLU networks.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import gurobipy  # noqa: F401 (the [all] extras promise it: missing fails, not skips)
import highspy  # noqa: F401
import numpy as np
import pytest
import z3  # noqa: F401
from cardinal.solvers.base import available_solvers, replay, solve_minimum
from cardinal.solvers.oracle import SetOracle
from cardinal.verify.certify import SolverPool, certify_row, judge
from cardinal.verify.cli import main
from cardinal.verify.pipeline import Plan, certify

from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.network import Layer, Network
from cardinal.problem import Outcome, Problem, Status, Verdict
from tests.bruteforce import mixed, random_network, vertex_minimum, vertex_valid

INSTALLED = available_solvers()
MILPS = ("gurobi", "highs")
RELU, IDENTITY = Activation.make("relu"), Activation.make("identity")
CUBE_THRESHOLD = 1 - 2**-40


def difference_network() -> Network:
    """f = y0 − y1, with every feature of mixed sign (`mixed`): no monotone shortcut."""
    return mixed(Network([Layer(np.array([[1.0, -1.0]]), np.zeros(1), IDENTITY)]))


def ramp_network(weight: float, offset: float) -> Network:
    """f = relu(offset − weight·y1) (y0 unused): class 0 from y1 ≥ offset / weight on; every
    feature of mixed sign (`mixed`)."""
    return mixed(
        Network([Layer(np.array([[0.0, -weight]]), np.array([offset]), RELU), Layer(np.ones((1, 1)), np.zeros(1), IDENTITY)])
    )


# ---------------------------------------------------------------------------- non-monotone AXps
@pytest.mark.parametrize("guarded", [True, False])
def test_milp_axp_on_the_cube_near_the_threshold(guarded: bool) -> None:
    """f = y0 − y1 on {0,1}^2, x = (0, 1), t = 1 − 2^-40: f(1, 0) = 1 > t, within the MILPs' ε of
    t. The hitting-set loop's own exact points (`hitting.Supply`) find that flip, so the float
    MILPs answer the true minimum, replayed, as z3 and enumerate do."""
    net, domain = difference_network(), Domain.boolean(2)
    for name in (*MILPS, "z3", "enumerate"):
        found = solve_minimum(net, np.array([0.0, 1.0]), "abductive", domain, CUBE_THRESHOLD, solver=name, guarded=guarded)
        assert found.status == Status.OPTIMAL and found.size == 1 and found.replayed, found


def test_milp_empty_axp_on_the_cube_is_refuted() -> None:
    """The same with the loop's exact supply off (`supply=False`): the MILPs' flip oracle finds no
    flip within ε and they claim the empty AXp; y = (1, 0) refutes it."""
    net, domain = difference_network(), Domain.boolean(2)
    for name in MILPS:
        found = solve_minimum(
            net, np.array([0.0, 1.0]), "abductive", domain, CUBE_THRESHOLD, solver=name, guarded=False, supply=False
        )
        assert found.status == Status.REFUTED and found.claimed == Status.OPTIMAL and found.solution == (), found
        assert found.witness == (1.0, 0.0) and found.replayed and "flips" in found.message


def test_cube_axp_certificate_is_exact_only_with_the_minimum_proved() -> None:
    net, domain, x = difference_network(), Domain.boolean(2), np.array([[0.0, 1.0]])
    (certificate,) = certify(
        net, x, "abductive", domain, CUBE_THRESHOLD, solvers=(*MILPS, "z3", "enumerate"), plan=Plan(method="greedy")
    )
    assert certificate.verdict == Verdict.EXACT_ONLY and certificate.certified and certificate.minimum_proved
    assert certificate.minimum == (0,) and not certificate.refuted  # the MILPs' loops find the flip exactly
    assert all(certificate.solvers[name].replayed for name in (*MILPS, "z3", "enumerate"))


def test_cube_axp_in_certify_output(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    network, inputs = tmp_path / "net.json", tmp_path / "x.csv"
    network.write_text(json.dumps(difference_network().to_json()))
    inputs.write_text("0,1\n")
    solvers = ",".join((*MILPS, "z3", "enumerate"))
    flags = ["--inputs", str(inputs), "--binary", "--threshold", repr(CUBE_THRESHOLD), "--kind", "abductive"]
    assert main(["certify", str(network), *flags, "--solvers", solvers, "--cases", str(tmp_path / "cases"), "--method", "greedy"]) == 0
    captured = capsys.readouterr()
    (line,) = [json.loads(text) for text in captured.out.splitlines()]
    assert line["verdict"] == "exact_only" and line["certified"] and line["minimum_proved"] and line["minimum"] == [0]
    assert line["refuted"] == []  # the MILPs' loops find the near-threshold flip exactly
    for name in MILPS:
        claim = line["solvers"][name]
        assert claim["status"] == "optimal" and claim["size"] == 1 and claim["replayed"]
    assert "claims refuted by exact replay" not in captured.err and "unconfirmed" not in captured.err


def test_exact_backend_axp_is_replayed_and_undecided_stays_out_of_minimum() -> None:
    """z3's own AXp is replayed by the oracle; with no engine to ask, it stays unreplayed and out of
    the certificate's minimum (all features, the AXp known without it)."""
    net, domain = difference_network(), Domain.boolean(2)
    problem = Problem.make(net, np.array([0.0, 1.0]), "abductive", domain, CUBE_THRESHOLD)
    claim = Outcome(Status.OPTIMAL, "z3", 0.0, solution=(1,), exact=True)
    assert replay(problem, claim).replayed
    with SetOracle(engines=(), intervals=False) as oracle:
        open_claim = replay(problem, claim, oracle=oracle)
    assert open_claim.status == Status.OPTIMAL and not open_claim.replayed and "undecided" in open_claim.message
    judgement = judge(problem, None, {"z3": open_claim}, None)
    assert judgement.minimum == (0, 1) and not judgement.certified and not judgement.minimum_proved  # every feature, not (1,)
    wrong = Outcome(Status.OPTIMAL, "z3", 0.0, solution=(), exact=True)  # a wrong "empty AXp" from an exact backend
    refuted = replay(problem, wrong)
    assert refuted.status == Status.REFUTED and refuted.witness == (1.0, 0.0)
    assert judge(problem, None, {"z3": refuted}, None).verdict == Verdict.SOLVER_DISAGREEMENT


def test_false_none_exists_on_a_non_monotone_box_is_refuted() -> None:
    problem = Problem.make(ramp_network(1.0, 0.5), np.zeros(2), "contrastive", Domain.unit(2), 0.0)
    refuted = replay(problem, Outcome(Status.NONE_EXISTS, "gurobi", 0.0))
    assert refuted.status == Status.REFUTED and refuted.claimed == Status.NONE_EXISTS
    assert problem.flips(np.array(refuted.witness))
    flat = Problem.make(ramp_network(0.0, 0.5), np.zeros(2), "contrastive", Domain.unit(2), 0.0)  # f = 0.5 everywhere
    assert replay(flat, Outcome(Status.NONE_EXISTS, "gurobi", 0.0)).replayed


# ---------------------------------------------------------------------------- ε on the strict side only
@pytest.mark.parametrize("guarded", [True, False])
def test_class_zero_is_f_at_most_t(guarded: bool) -> None:
    """f = relu(0.5 − y0), x = 0, t = 0: p(x) = 1, and y0 = 1 gives f = 0 ≤ t, so {0} is both the
    minimum CXp and the minimum AXp; a margin f ≤ t − ε left no point of class 0 at all. (Of mixed
    sign, `mixed`: the free box, not the shortcut's bound vectors.)"""
    net = mixed(Network([Layer(np.array([[-1.0]]), np.array([0.5]), RELU), Layer(np.ones((1, 1)), np.zeros(1), IDENTITY)]))
    for name, kind in itertools.product(MILPS, ("contrastive", "abductive")):
        found = solve_minimum(net, np.zeros(1), kind, threshold=0.0, solver=name, guarded=guarded)
        assert found.status == Status.OPTIMAL and found.features == (0,) and found.replayed, (name, kind, found)


def test_a_step_reaches_one_at_its_point() -> None:
    """f = 0.5 − step(y0 ≥ 0.5) on [0, 0.5]: only y0 = 0.5 turns the step on (f = −0.5 ≤ 0), so
    a margin h ≥ at + ε on the step's 1 left no flip."""
    step = Activation.make("step", at=0.5)
    net = Network([Layer(np.ones((1, 1)), np.zeros(1), step), Layer(-np.ones((1, 1)), np.array([0.5]), IDENTITY)])
    domain = Domain(np.zeros(1), np.full(1, 0.5))
    for name, kind in itertools.product(MILPS, ("contrastive", "abductive")):
        found = solve_minimum(net, np.zeros(1), kind, domain, 0.0, solver=name, guarded=False)
        assert found.status == Status.OPTIMAL and found.features == (0,) and found.replayed, (name, kind, found)


# ---------------------------------------------------------------------------- failed witnesses
def test_a_failed_witness_of_a_valid_set_is_replaced_not_refuted() -> None:
    """f = relu(0.9 − 3·y1), x = 0, t = 0: y1 = 0.3 (the double) keeps f > 0 in exact arithmetic,
    y1 = 0.30000000000000004 reaches f ≤ 0. A claim {1} with the first as witness is valid."""
    problem = Problem.make(ramp_network(3.0, 0.9), np.zeros(2), "contrastive", Domain.unit(2), 0.0)
    assert not problem.flips(np.array([0.0, 0.3])) and problem.flips(np.array([0.0, 0.30000000000000004]))
    claim = Outcome(Status.OPTIMAL, "gurobi", 0.0, solution=(1,), witness=(0.0, 0.3))
    kept = replay(problem, claim)
    assert kept.status == Status.OPTIMAL and kept.replayed and kept.claimed is None, kept
    assert problem.flips(np.array(kept.witness)) and kept.witness[0] == 0.0
    assert "its witness does not flip" in kept.message
    invalid = replay(problem, Outcome(Status.OPTIMAL, "gurobi", 0.0, solution=(0,), witness=(1.0, 0.0)))
    assert invalid.status == Status.REFUTED and invalid.claimed == Status.OPTIMAL and invalid.solution == (0,)
    with SetOracle(engines=(), intervals=False) as oracle:
        open_claim = replay(problem, claim, oracle=oracle)
    assert open_claim.status == Status.UNCONFIRMED and open_claim.claimed == Status.OPTIMAL and not open_claim.replayed
    assert open_claim.solution == (1,) and "no exact check decided the set" in open_claim.message
    judgement = judge(problem, None, {"gurobi": open_claim}, None)
    assert judgement.minimum is None and judgement.outcomes["gurobi"].status == Status.UNCONFIRMED


@pytest.mark.parametrize("guarded", [True, False])
def test_milp_witness_off_by_rounding_keeps_its_set(guarded: bool) -> None:
    """The same network through the MILPs: their y1 may be the double 0.3 (it was for both when
    written), which fails; the oracle's point stands in and the set is the minimum."""
    problem = Problem.make(ramp_network(3.0, 0.9), np.zeros(2), "contrastive", Domain.unit(2), 0.0)
    for name in MILPS:
        found = solve_minimum(problem.net, problem.x, "contrastive", problem.domain, 0.0, solver=name, guarded=guarded)
        assert found.status == Status.OPTIMAL and found.features == (1,) and found.replayed, found
        assert problem.flips(np.array(found.witness))


def test_unconfirmed_claims_are_counted_apart(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """f = |0.7·y1 − 0.017|, x = (0, 1), t = 0: class 0 needs 0.7·y1 = 0.017 exactly, which a
    rational y1 meets and no double does. The MILPs' witness fails, z3 finds no double point:
    their claim {1} is unconfirmed, neither refuted nor an answer."""
    layers = [
        Layer(np.array([[0.0, 0.7], [0.0, -0.7]]), np.array([-0.017, 0.017]), RELU),
        Layer(np.ones((1, 2)), np.zeros(1), IDENTITY),
    ]
    network, inputs = tmp_path / "net.json", tmp_path / "x.csv"
    network.write_text(json.dumps(Network(layers).to_json()))
    inputs.write_text("0,1\n")
    flags = ["--inputs", str(inputs), "--kind", "contrastive", "--solvers", ",".join(MILPS), "--cases", str(tmp_path / "c")]
    assert main(["certify", str(network), *flags, "--method", "greedy"]) == 0
    captured = capsys.readouterr()
    (line,) = [json.loads(text) for text in captured.out.splitlines()]
    assert line["verdict"] == "exact_only" and line["minimum"] is None and line["refuted"] == []
    for name in MILPS:
        assert line["solvers"][name]["status"] == "unconfirmed" and line["solvers"][name]["claimed"] == "optimal"
        assert re.search(rf"{name}\s+optimal\s+1", captured.err)
    assert "claims unconfirmed" in captured.err and "claims refuted" not in captured.err


# ---------------------------------------------------------------------------- brute force
def _cube_instances(seed: int, count: int):
    """Random non-monotone ReLU networks over {0,1}^n (n ≤ 6, weights on a 2^-6 grain), x a
    vertex, the threshold just below f at a random vertex (within the MILPs' ε) or at a median."""
    rng = np.random.default_rng(seed)
    for index in range(count):
        n = int(rng.integers(2, 7))
        net = random_network(rng, n, (int(rng.integers(2, 6)),), RELU, monotone=False, grain=6)
        cube = np.array(list(itertools.product((0.0, 1.0), repeat=n)))
        values = net.forward(cube).numpy().reshape(-1)
        threshold = float(values[int(rng.integers(len(values)))]) - 2**-40 if index % 2 else float(np.median(values)) + 2**-8
        x = cube[int(rng.integers(len(cube)))]
        if np.any(values == threshold):
            continue
        yield net, x, threshold


@pytest.mark.parametrize("kind", ["contrastive", "abductive"])
def test_cube_claims_against_brute_force(kind: str) -> None:
    """Every replayed set is an explanation by brute force over the cube; every refuted claim is
    no explanation, or claims a "nothing smaller" that the brute-force minimum contradicts."""
    replayed = refuted = 0
    with SolverPool(INSTALLED) as pool:
        for net, x, threshold in _cube_instances(7, 30):
            problem = Problem.make(net, x, kind, Domain.boolean(net.n_inputs), threshold)
            certificate = certify_row(pool, problem, None, 30.0)
            truth = vertex_minimum(problem)
            where = json.dumps(certificate.to_json())
            assert certificate.verdict == Verdict.EXACT_ONLY, where
            for outcome in certificate.solvers.values():
                if outcome.status in (Status.OPTIMAL, Status.FEASIBLE) and outcome.replayed:
                    assert vertex_valid(problem, outcome.solution), where
                    replayed += 1
                if outcome.status == Status.REFUTED:
                    refuted += 1
                    claimed = outcome.claimed
                    invalid = outcome.solution is not None and not vertex_valid(problem, outcome.solution)
                    contradicted = (claimed == Status.NONE_EXISTS and truth is not None) or (
                        claimed == Status.OPTIMAL and truth is not None and truth < len(outcome.solution)
                    )
                    assert invalid or contradicted, where
                assert outcome.status != Status.UNCONFIRMED, where  # on a cube enumerate decides every set
            if certificate.minimum is not None:
                assert vertex_valid(problem, certificate.minimum), where
            if certificate.minimum_proved:
                assert len(certificate.minimum) == truth, where
    assert replayed > 0  # every refuted claim (the MILPs' misses, where any) was checked above

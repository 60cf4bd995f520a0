"""The backends for solver benchmarks — cvc5, SCIP, Marabou — against brute force: the minimum
from scratch and certify's question "≤ k?" on both sides of the minimum, on monotone ReLU
networks (the monotone shortcut over all subsets) and non-monotone ones on the Boolean cube
(every vertex), each answer through `solve_problem`, so replayed exactly. A missing library fails
(the [all] extras promise each). (`tests/engines/test_solvers_agree.py` runs every
installed backend on its shared set too.)"""

from __future__ import annotations

import cvc5  # noqa: F401 (the [all] extras promise it: missing fails, not skips)
import maraboupy  # noqa: F401
import numpy as np
import pyscipopt  # noqa: F401
import pytest
from bruteforce import monotone_minimum, random_network, vertex_minimum
from cardinal.solvers.base import get_solver, solve_minimum, solve_problem
from cardinal.solvers.hitting import OracleCalls, minimum_contrastive

from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.problem import Outcome, Problem, Status

# The limit of a call whose answer a test asserts: none that a run here comes near, so that no
# answer depends on the machine's speed (a limit of seconds ended calls undecided on a loaded machine).
UNBOUNDED = 3600.0

BACKENDS = ["cvc5", "scip", "marabou"]  # their libraries are imported above: the [all] extras promise them
RELU = Activation.make("relu")


def _monotone_problems(kind: str):
    rng = np.random.default_rng(30)
    for _ in range(6):
        n = int(rng.integers(4, 8))
        net = random_network(rng, n, (int(rng.integers(3, 6)), 3), RELU)
        X = rng.random((4, n))
        threshold = float(np.median(net.forward(X).numpy()))
        for x in X:
            yield Problem.make(net, x, kind, Domain.unit(n), threshold)


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("kind", ["contrastive", "abductive"])
def test_monotone_relu_minimum_and_certify_question_equal_brute_force(name: str, kind: str) -> None:
    checked = 0
    with get_solver(name) as backend:
        for problem in _monotone_problems(kind):
            minimum = monotone_minimum(problem)
            where = f"{name} {kind} x={problem.x.tolist()}"
            outcome = solve_problem(backend, problem, None, UNBOUNDED)
            if minimum is None:
                assert outcome.status == Status.NONE_EXISTS and outcome.replayed, where
                continue
            assert outcome.status == Status.OPTIMAL and outcome.replayed and outcome.size == minimum, (where, outcome)
            if minimum == 0:
                continue
            below = solve_problem(backend, problem, minimum - 1, UNBOUNDED)
            assert below.status == Status.NONE_WITHIN, (where, below)
            within = solve_problem(backend, problem, minimum, UNBOUNDED)
            assert within.status in (Status.OPTIMAL, Status.FEASIBLE) and within.replayed and within.size == minimum, where
            checked += 1
    assert checked >= 8


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("kind", ["contrastive", "abductive"])
def test_non_monotone_minimum_equals_the_cube_or_is_unsupported(name: str, kind: str) -> None:
    """On the Boolean cube: cvc5 and SCIP answer; Marabou (no discrete inputs) says unsupported."""
    rng = np.random.default_rng(31)
    checked = 0
    with get_solver(name) as backend:
        for _ in range(6):
            n = int(rng.integers(3, 6))
            net = random_network(rng, n, (4, 3), RELU, monotone=False)
            x = (rng.random(n) < 0.5).astype(float)
            threshold = float(net.forward(x)) + float(rng.choice([-0.05, 0.05]))  # either prediction
            problem = Problem.make(net, x, kind, Domain.boolean(n), threshold)
            outcome = solve_problem(backend, problem, None, UNBOUNDED)
            if name == "marabou":
                assert outcome.status == Status.UNSUPPORTED and "binary" in outcome.message
                continue
            minimum = vertex_minimum(problem)
            if minimum is None:
                assert outcome.status == Status.NONE_EXISTS, outcome
            else:
                assert outcome.status == Status.OPTIMAL and outcome.size == minimum and outcome.replayed, outcome
            checked += 1
    assert checked == 6 or name == "marabou"


@pytest.mark.parametrize("name", BACKENDS)
def test_non_monotone_real_box_agrees_with_z3(name: str) -> None:
    """On [0, 1]^n (no brute force): the same minimum size as z3, both kinds."""
    rng = np.random.default_rng(32)
    for _ in range(3):
        net = random_network(rng, 4, (4, 3), RELU, monotone=False)
        x = rng.random(4)
        threshold = float(net.forward(x)) + 0.1
        for kind in ("contrastive", "abductive"):
            problem = Problem.make(net, x, kind, Domain.unit(4), threshold)
            with get_solver("z3") as z3, get_solver(name) as backend:
                reference, outcome = solve_problem(z3, problem, None, UNBOUNDED), solve_problem(backend, problem, None, UNBOUNDED)
            assert outcome.status == reference.status, (outcome, reference)
            if reference.status == Status.OPTIMAL:
                assert outcome.size == reference.size and outcome.replayed, (outcome, reference)


@pytest.mark.parametrize("name", BACKENDS)
def test_the_default_guarded_call_answers(name: str, design_network) -> None:
    """Through `solve_minimum` as a user calls it (guarded): a minimum CXp of the DESIGN network
    ({0, 2} or {1, 2}), replayed."""
    outcome = solve_minimum(design_network, np.ones(3), threshold=0.5, solver=name, time_limit=UNBOUNDED)
    assert outcome.status == Status.OPTIMAL and outcome.solution in ((0, 2), (1, 2)) and outcome.replayed


@pytest.mark.parametrize("name", BACKENDS)
def test_smooth_units_are_unsupported(name: str) -> None:
    net = random_network(np.random.default_rng(0), 3, (3,), Activation.make("sigmoid"))
    problem = Problem.make(net, np.full(3, 0.5), "contrastive", Domain.unit(3), float(net.forward(np.full(3, 0.5))))
    with get_solver(name) as backend:
        assert backend.solve(problem, None, 10.0).status == Status.UNSUPPORTED


def test_the_dual_hitting_set_loop_finds_the_minimum_cxp_with_an_exact_oracle() -> None:
    """`hitting.minimum_contrastive` with the monotone shortcut as its flip oracle (exact): the
    brute-force minimum CXp, a witness that flips, and NONE_WITHIN below it; an `Outcome`, its
    oracle calls counted on the `OracleCalls` passed in."""
    checked = 0
    for problem in _monotone_problems("contrastive"):
        asked: list[frozenset[int]] = []

        def oracle(
            free: frozenset[int], deadline: float, problem: Problem = problem, asked: list[frozenset[int]] = asked
        ) -> np.ndarray | None:
            asked.append(free)
            y = np.where(np.isin(np.arange(problem.n), sorted(free)), problem.counterpoint, problem.x)
            return y if problem.flips(y) else None

        minimum = monotone_minimum(problem)
        calls = OracleCalls()
        result = minimum_contrastive(problem, oracle, None, float("inf"), calls=calls)
        assert isinstance(result, Outcome) and calls.count == len(asked) >= 1, result
        if minimum is None:
            assert result.status == Status.NONE_EXISTS
            continue
        assert result.status == Status.OPTIMAL and len(result.solution) == minimum
        assert problem.flips(np.array(result.witness)) and problem.is_explanation(result.solution)
        if minimum > 1:
            assert minimum_contrastive(problem, oracle, minimum - 1, float("inf")).status == Status.NONE_WITHIN
        checked += 1
    assert checked >= 8

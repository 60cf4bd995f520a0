"""The MILP backends (Gurobi, HiGHS): minimum sizes against brute force on small networks of every
PWL activation, both encodings (with and without the dropped binaries), non-monotone CXp and AXp
(hitting sets), status mapping, the licence size limit, time limits, and quiet output."""

from __future__ import annotations

import importlib
import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from cardinal.solvers.base import get_solver, solve_problem
from cardinal.solvers.encode import MilpModel, encode
from cardinal.solvers.milp import MilpRun, MilpSolver, RunState, _witness
from cardinal.solvers.oracle import SetOracle
from cardinal.verify.generate import median_threshold, random_network

from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.greedy import explain
from cardinal.network import Layer, Network
from cardinal.problem import Outcome, Problem, Status
from tests.conftest import DESIGN_NETWORK, brute_force_minimum

# The limit of a call whose answer a test asserts: none that a run here comes near, so that no
# answer depends on the machine's speed (a limit of seconds ended calls undecided on a loaded machine).
UNBOUNDED = 3600.0

BACKENDS = ["gurobi", "highs"]
MODULES = {"gurobi": "gurobipy", "highs": "highspy"}
KINDS = ["contrastive", "abductive"]
ACTIVATIONS = {
    "relu": Activation.make("relu"),
    "leaky_relu": Activation.make("leaky_relu", slope=0.1),
    "leaky_steep": Activation.make("leaky_relu", slope=3.0),
    "hardtanh": Activation.make("hardtanh", min=0.0, max=1.0),
    "hardtanh_wide": Activation.make("hardtanh", min=-0.25, max=0.5),
    "step": Activation.make("step", at=0.0),
    "identity": Activation.make("identity"),
}


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[MilpSolver]:
    importlib.import_module(MODULES[request.param])
    with get_solver(request.param) as solver:
        yield solver


# ---------------------------------------------------------------------------- helpers
def _network(seed: int, n: int, hidden: tuple[int, ...], activation: str, monotone: bool = True) -> Network:
    """A random network with `activation` on its hidden layers; step networks get dyadic weights
    (multiples of 1/8), so that float and exact arithmetic agree on every tie."""
    base = random_network(np.random.default_rng(seed), n, hidden, "relu", monotone=monotone)
    layers = []
    for layer in base.layers[:-1]:
        weight, bias = layer.weight, layer.bias
        if activation == "step":
            weight, bias = np.round(weight * 8) / 8, np.round(bias * 8) / 8
        layers.append(Layer(weight, bias, ACTIVATIONS[activation]))
    return Network([*layers, base.layers[-1]])


def _inputs(seed: int, n: int, binary: bool, rows: int = 8) -> np.ndarray:
    rng = np.random.default_rng(1000 + seed)
    return (rng.random((rows, n)) < 0.5).astype(np.float64) if binary else rng.random((rows, n))


def _threshold(net: Network, X: np.ndarray) -> float:
    """Midway between the two middle distinct outputs on X, so no input sits near a tie."""
    values = np.unique(net.forward(X).numpy())
    if len(values) == 1:
        return float(values[0]) - 0.5
    middle = len(values) // 2
    return float((values[middle - 1] + values[middle]) / 2)


def _vertex_minimum(problem: Problem) -> int | None:
    """Brute-force minimum size on a binary domain, any network: enumerate all vertices."""
    n, domain = problem.n, problem.domain
    corners = np.array(list(itertools.product([0.0, 1.0], repeat=n)))
    Y = domain.lower + corners * (domain.upper - domain.lower)
    flips = problem.exact.predictions(Y, problem.threshold) != problem.prediction
    moved = Y != problem.x
    for size in range(n + 1):
        for subset in itertools.combinations(range(n), size):
            inside = np.zeros(n, dtype=bool)
            inside[list(subset)] = True
            if problem.kind == "contrastive" and (flips & ~moved[:, ~inside].any(axis=1)).any():
                return size
            if problem.kind == "abductive" and not (flips & ~moved[:, inside].any(axis=1)).any():
                return size
    return None


def _milp_minimum(backend: MilpSolver, problem: Problem, relax: bool, at_most: int | None = None) -> int | None:
    """Optimal objective of the minimization model itself (no shortcut), None when infeasible."""
    model = encode(problem, at_most, relax=relax)
    run = backend._optimize(model, 30.0)
    assert run.state in (RunState.OPTIMAL, RunState.INFEASIBLE), run.raw_status
    return None if run.state is RunState.INFEASIBLE else int(np.sum(run.values[model.selectors] > 0.5))


def _verdict_size(outcome: Outcome) -> int | None:
    assert outcome.status in (Status.OPTIMAL, Status.NONE_EXISTS), (outcome.status, outcome.message)
    return outcome.size if outcome.status == Status.OPTIMAL else None


# ---------------------------------------------------------------------------- known answers
def test_design_network(backend: MilpSolver) -> None:
    net = Network.from_json(DESIGN_NETWORK)
    x, domain = np.ones(3), Domain.unit(3)
    assert int(explain(net, x, "contrastive", domain, 0.5, device="cpu").sizes[0]) == 3  # greedy is not minimal here
    problem = Problem.make(net, x, "contrastive", domain, 0.5)
    best = solve_problem(backend, problem, None, UNBOUNDED)
    assert best.status == Status.OPTIMAL and best.replayed and best.size == 2
    assert best.features in {(0, 2), (1, 2)}
    assert solve_problem(backend, problem, 1, UNBOUNDED).status == Status.NONE_WITHIN
    assert solve_problem(backend, problem, 2, UNBOUNDED).size == 2
    abductive = Problem.make(net, x, "abductive", domain, 0.5)
    assert _verdict_size(solve_problem(backend, abductive, None, UNBOUNDED)) == brute_force_minimum(net, x, "abductive", domain, 0.5)


def test_trained_compas_abductive_certification(backend: MilpSolver) -> None:
    """A COMPAS model of the paper suite on which HiGHS, with feasibility tolerances of 1e-9, called
    "size ≤ 12" infeasible although the set {0, 4, 5, 12} is an AXp (margin 0.011)."""
    from cardinal.verify.cases import Case

    case = Case.load(Path(__file__).parents[1] / "data" / "highs_tight_tolerance_case.json")
    problem = Problem.make(case.network, case.x, case.kind, case.domain, case.threshold)
    certified = solve_problem(backend, problem, len(case.greedy) - 1, UNBOUNDED)
    assert certified.status == Status.OPTIMAL and certified.replayed and certified.size == 4
    assert solve_problem(backend, problem, 3, UNBOUNDED).status == Status.NONE_WITHIN


def test_monotone_shortcuts(backend: MilpSolver) -> None:
    net = Network([Layer(np.array([[1.0, 1.0]]), np.array([0.0]), Activation.make("relu"))])
    x, domain = np.array([0.8, 0.9]), Domain.unit(2)
    contrastive = solve_problem(backend, Problem.make(net, x, "contrastive", domain, -1.0), None, UNBOUNDED)
    assert contrastive.status == Status.NONE_EXISTS and contrastive.replayed
    abductive = solve_problem(backend, Problem.make(net, x, "abductive", domain, -1.0), None, UNBOUNDED)
    assert abductive.status == Status.OPTIMAL and abductive.features == () and abductive.replayed


def test_class_one_within_epsilon_is_no_verdict(backend: MilpSolver) -> None:
    net = Network([Layer(np.ones((1, 3)), np.zeros(1), Activation.make("identity"))])
    problem = Problem.make(net, np.zeros(3), "contrastive", Domain.unit(3), 3.0 - 1e-9)  # f(x') exceeds t by 1e-9 < ε
    assert solve_problem(backend, problem, None, UNBOUNDED).status == Status.UNSUPPORTED


def test_smooth_network_is_unsupported(backend: MilpSolver) -> None:
    net = Network(
        [
            Layer(np.ones((2, 2)), np.zeros(2), Activation.make("sigmoid")),
            Layer(np.ones((1, 2)), np.zeros(1), Activation.make("identity")),
        ]
    )
    outcome = solve_problem(backend, Problem.make(net, np.full(2, 0.5), "contrastive", Domain.unit(2), 1.0), None, UNBOUNDED)
    assert outcome.status == Status.UNSUPPORTED and "sigmoid" in outcome.message


# ---------------------------------------------------------------------------- brute force
@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_monotone_minimum_matches_brute_force(backend: MilpSolver, activation: str) -> None:
    n = 6
    for seed in range(3):
        net = _network(seed, n, (5, 4), activation)
        binary = seed == 2
        domain = Domain.boolean(n) if binary else Domain.unit(n)
        X = _inputs(seed, n, binary)
        t = _threshold(net, X)
        for x, kind in itertools.product(X[:2], KINDS):
            truth = brute_force_minimum(net, x, kind, domain, t)
            problem = Problem.make(net, x, kind, domain, t)
            outcome = solve_problem(backend, problem, None, UNBOUNDED)
            assert _verdict_size(outcome) == truth, (seed, kind, outcome)
            assert outcome.replayed
            if truth:
                assert _milp_minimum(backend, problem, relax=True) == truth
                assert _milp_minimum(backend, problem, relax=False) == truth
                assert solve_problem(backend, problem, truth, UNBOUNDED).size == truth
                assert solve_problem(backend, problem, truth - 1, UNBOUNDED).status == Status.NONE_WITHIN


@pytest.mark.parametrize("activation", ["relu", "hardtanh_wide", "step"])
def test_non_monotone_binary_domain_matches_vertices(backend: MilpSolver, activation: str) -> None:
    n = 6
    for seed in range(3):
        net = _network(seed, n, (6, 4), activation, monotone=False)
        X = _inputs(seed, n, binary=True)
        t = _threshold(net, X)
        for x, kind in itertools.product(X[:2], KINDS):
            problem = Problem.make(net, x, kind, Domain.boolean(n), t)
            truth = _vertex_minimum(problem)
            outcome = solve_problem(backend, problem, None, UNBOUNDED)
            assert _verdict_size(outcome) == truth, (seed, kind, outcome)
            if kind == "contrastive" and truth is not None:
                assert outcome.replayed and set(outcome.witness) <= {0.0, 1.0}
                assert solve_problem(backend, problem, truth - 1, UNBOUNDED).status == Status.NONE_WITHIN


def test_non_monotone_box_brackets_vertices(backend: MilpSolver) -> None:
    """On the box, a CXp is at most as large as on the vertices and an AXp at least as large;
    every continuous witness (CXp answers, and the flip oracle's inside the hitting-set loop)
    replays exactly: class 0 is f ≤ t in the models, and a witness on that boundary that does
    not flip exactly is asked for again with margins. The exact set oracle has no engine here, so
    no failed witness is rescued (it would be UNCONFIRMED) and the AXp sets stay unreplayed: z3's
    exact check takes 10–30 s for one of them on these networks (tests/application/test_replay.py replays
    such claims on smaller ones)."""
    n = 7
    with SetOracle(engines=(), intervals=False) as oracle:
        for seed in range(5):
            net = _network(seed, n, (8, 6), "relu", monotone=False)
            X = _inputs(seed, n, binary=True)
            t = _threshold(net, X)
            for x, kind in itertools.product(X[:2], KINDS):
                _bracket(backend, oracle, net, x, kind, t)


def _bracket(backend: MilpSolver, oracle: SetOracle, net: Network, x: np.ndarray, kind: str, t: float) -> None:
    """The minimum on the unit box against the one on the vertices, for x [n]."""
    n = net.n_inputs
    vertices = _vertex_minimum(Problem.make(net, x, kind, Domain.boolean(n), t))
    outcome = solve_problem(backend, Problem.make(net, x, kind, Domain.unit(n), t), None, 30.0, oracle)
    box = _verdict_size(outcome)
    if kind == "contrastive":
        assert vertices is None or (box is not None and box <= vertices)
        assert box is None or outcome.replayed
    else:
        assert box >= vertices and not outcome.replayed


def test_step_ties_behind_steps_stay_reachable(backend: MilpSolver) -> None:
    """Second-layer steps fed by steps alone sit exactly on `at` here (dyadic weights); the
    ε-margin that keeps continuous witnesses off the boundary must not exclude such ties."""
    n = 8
    net = _network(0, n, (8, 6), "step", monotone=False)
    X = _inputs(0, n, binary=False)
    problem = Problem.make(net, X[1], "abductive", Domain.unit(n), _threshold(net, X))
    y = problem.x.copy()
    y[[0, 3]] = [0.10756243, 0.77090127]
    assert problem.flips(y)
    second = problem.exact.layer_bounds(y, y)[1][0]
    assert 0 in second  # a unit exactly at its step
    run = backend._optimize(encode(problem, free=frozenset({0, 3})), 30.0)
    assert run.state is RunState.OPTIMAL


def _one_unit(weight: list[float], bias: float, activation: Activation, out: float) -> Network:
    return Network([Layer(np.array([weight]), np.array([bias]), activation), Layer(np.array([[out]]), np.zeros(1), Activation.make("identity"))])


def test_a_flip_on_the_strict_side_is_found_with_a_second_margin(backend: MilpSolver) -> None:
    """f = relu(y0 − y1/2 + y2/4 − 1), x = (1/4, 0, 3/4), t = 0 (f(x) = 0, class 0): the flip
    needs f > 0. Asked for f ≥ t + ε, Gurobi answered OPTIMAL with y = (3/4, 0, 1), f = 0 (a
    violation of ε at FeasibilityTol 1e-9), and so did the model with margins, whose strict side
    had the same ε: the hitting-set loop ended in ERROR (seam probe, non_monotone). The margin
    model keeps 2ε off the strict side; the minimum AXp {0} is found."""
    net = _one_unit([1.0, -0.5, 0.25], -1.0, Activation.make("relu"), 1.0)
    with SetOracle(engines=()) as oracle:
        outcome = solve_problem(backend, Problem.make(net, np.array([0.25, 0.0, 0.75]), "abductive", Domain.unit(3), 0.0), None, 30.0, oracle)
    assert outcome.status == Status.OPTIMAL and outcome.solution == (0,), outcome


def test_a_hitting_set_of_every_feature_is_an_axp_without_asking(backend: MilpSolver, monkeypatch: pytest.MonkeyPatch) -> None:
    """f = −leaky_relu(−3/4·y0 − y1/4 + y2 − 1/2)/4 with slope 0.01, x = (3/4, 1, 3/4),
    t = 0.00140625: f(x) = 0.140625·0.01 > t exactly (0.01 is a double above 1/100) but = t in
    floating point. Every singleton flips, so the loop's last hitting set is {0, 1, 2}; asked
    with nothing free, the float MILP answered y = x (f ≤ t within its tolerance), which does
    not flip exactly: ERROR (seam probe, non_monotone). With nothing free no point can flip, so
    that set is the minimum AXp without asking."""
    net = _one_unit([-0.75, -0.25, 1.0], -0.5, Activation.make("leaky_relu", slope=0.01), -0.25)
    problem = Problem.make(net, np.array([0.75, 1.0, 0.75]), "abductive", Domain.unit(3), 0.00140625)
    # f is sign-monotone (+, +, −), where the shortcut answers first; the general path (a network
    # of mixed signs) is the one under test, and `tests.bruteforce.mixed` would move f(x) off t
    monkeypatch.setattr(Problem, "monotone", property(lambda self: False))
    assert problem.prediction == 1 and float(net.forward(problem.x[None, :])[0]) == 0.00140625
    with SetOracle(engines=()) as oracle:
        outcome = solve_problem(backend, problem, None, 30.0, oracle)
    assert outcome.status == Status.OPTIMAL and outcome.solution == (0, 1, 2), outcome


def test_witness_is_snapped_into_the_domain() -> None:
    net = _network(2, 4, (3,), "relu", monotone=False)
    for domain, expected in ((Domain.boolean(4), [1.0, 0.0]), (Domain.unit(4), [1.0, 0.25])):
        problem = Problem.make(net, np.array([0.0, 1.0, 1.0, 0.0]), "contrastive", domain, 0.0)
        model = encode(problem)
        values = np.zeros(len(model.lower))
        values[model.inputs] = [1.0 + 1e-9, 0.25, 0.3, 0.7]
        if domain.binary:
            values[model.inputs[1]] = 1e-9
        witness = _witness(problem, model, values, (0, 1))
        assert witness.tolist() == [*expected, 1.0, 0.0]


# ---------------------------------------------------------------------------- encodings
def test_stable_units_and_dropped_binaries() -> None:
    net = _network(0, 6, (5, 4), "relu")
    X = _inputs(0, 6, binary=False)
    t = _threshold(net, X)
    falls = next(Problem.make(net, x, "contrastive", Domain.unit(6), t) for x in X if net.forward(x).item() > t)
    assert int(encode(falls).integer.sum()) == 6  # f must fall: only s is binary
    assert int(encode(falls, relax=False).integer.sum()) > 6
    active = Network([Layer(layer.weight, layer.bias + 10.0, layer.activation) for layer in net.layers])
    rises = Problem.make(active, X[0], "contrastive", Domain.unit(6), active.forward(X[0]).item() + 0.01)
    assert int(encode(rises, relax=False).integer.sum()) == 6  # every unit is stably active


def test_model_shape_and_flip_oracle_fixes_selectors() -> None:
    net = _network(1, 5, (4,), "relu", monotone=False)
    problem = Problem.make(net, np.full(5, 0.5), "contrastive", Domain.unit(5), 0.0)
    model: MilpModel = encode(problem, free=frozenset({1, 3}))
    assert model.matrix.shape == (len(model.row_lower), len(model.lower))
    assert np.array_equal(model.lower[model.selectors], [0, 1, 0, 1, 0])
    assert np.array_equal(model.upper[model.selectors], [0, 1, 0, 1, 0])
    assert not model.objective.any()
    equal = model.row_lower == model.row_upper
    assert np.all(equal | np.isinf(model.row_lower) | np.isinf(model.row_upper))
    with pytest.raises(ValueError, match="contrastive"):
        encode(Problem.make(net, np.full(5, 0.5), "abductive", Domain.unit(5), 0.0))


# ---------------------------------------------------------------------------- status mapping
class _Canned(MilpSolver):
    """A backend whose every run ends as told, the hitting-set loop's only source of points (its
    own exact supply of contrastive sets, `hitting.Supply`, would refute the canned "no flip")."""

    name = "canned"
    supply = False

    def __init__(self, state: RunState, with_values: bool) -> None:
        self.state, self.with_values = state, with_values

    def _optimize(self, model: MilpModel, time_limit: float) -> MilpRun:
        values = np.zeros(len(model.lower))
        values[model.selectors] = 1.0
        return MilpRun(self.state, f"RAW_{self.state.name}", values if self.with_values else None)


@pytest.mark.parametrize(
    ("state", "with_values", "at_most", "expected"),
    [
        (RunState.OPTIMAL, True, None, Status.OPTIMAL),
        (RunState.INFEASIBLE, False, 3, Status.NONE_WITHIN),
        (RunState.INFEASIBLE, False, None, Status.ERROR),  # monotone: the full set is a CXp
        (RunState.TIME_LIMIT, True, 3, Status.FEASIBLE),  # a limit with a set within the bound
        (RunState.TIME_LIMIT, True, None, Status.FEASIBLE),
        (RunState.TIME_LIMIT, True, 2, Status.TIMEOUT),  # the incumbent {0, 1, 2} is not within 2
        (RunState.TIME_LIMIT, False, 3, Status.TIMEOUT),
        (RunState.SIZE_LIMIT, False, None, Status.SIZE_LIMIT),
        (RunState.OTHER, False, None, Status.ERROR),
    ],
)
def test_run_states_map_to_statuses(state: RunState, with_values: bool, at_most: int | None, expected: Status) -> None:
    net = Network.from_json(DESIGN_NETWORK)
    problem = Problem.make(net, np.ones(3), "contrastive", Domain.unit(3), 0.5)
    outcome = _Canned(state, with_values).solve(problem, at_most, 10.0)
    assert outcome.status == expected and outcome.raw_status == f"RAW_{state.name}"
    assert outcome.has_solution == (expected in (Status.OPTIMAL, Status.FEASIBLE))
    if outcome.has_solution:
        assert outcome.features == (0, 1, 2) and outcome.witness == (0.0, 0.0, 0.0)


def test_non_monotone_infeasible_means_none_exists_and_hitting_maps() -> None:
    net = _network(1, 4, (3,), "relu", monotone=False)
    problem = Problem.make(net, np.full(4, 0.5), "contrastive", Domain.unit(4), 0.0)
    assert _Canned(RunState.INFEASIBLE, False).solve(problem, None, 10.0).status == Status.NONE_EXISTS
    abductive = Problem.make(net, np.full(4, 0.5), "abductive", Domain.unit(4), 0.0)
    empty = _Canned(RunState.INFEASIBLE, False).solve(abductive, None, 10.0)
    assert empty.status == Status.OPTIMAL and empty.features == ()
    assert _Canned(RunState.SIZE_LIMIT, False).solve(abductive, None, 10.0).status == Status.SIZE_LIMIT
    assert _Canned(RunState.OTHER, False).solve(abductive, None, 10.0).status == Status.ERROR
    late = _Canned(RunState.TIME_LIMIT, False).solve(abductive, None, 10.0)
    assert late.status == Status.TIMEOUT and not late.has_solution


def test_backend_status_tables() -> None:
    gurobi = importlib.import_module("cardinal.solvers.gurobi")
    highs = importlib.import_module("cardinal.solvers.highs")
    from gurobipy import GRB
    from highspy import HighsModelStatus

    assert gurobi.run_state(GRB.OPTIMAL) is RunState.OPTIMAL
    assert gurobi.run_state(GRB.INF_OR_UNBD) is RunState.INFEASIBLE
    assert gurobi.run_state(GRB.TIME_LIMIT) is RunState.TIME_LIMIT
    assert gurobi.run_state(GRB.NUMERIC) is RunState.OTHER
    assert highs.run_state(HighsModelStatus.kOptimal) is RunState.OPTIMAL
    assert highs.run_state(HighsModelStatus.kInfeasible) is RunState.INFEASIBLE
    assert highs.run_state(HighsModelStatus.kTimeLimit) is RunState.TIME_LIMIT
    assert highs.run_state(HighsModelStatus.kSolveError) is RunState.OTHER


# ---------------------------------------------------------------------------- limits
def test_time_limit_is_never_a_verdict(backend: MilpSolver) -> None:
    """Stopped by its limit, a MILP answers FEASIBLE with a replayed set (when it holds one) or
    TIMEOUT with none; never a verdict. (How soon it stops: `bench/limits.py`.)"""
    net = random_network(np.random.default_rng(1), 28, (32, 32), "relu")
    X = np.random.default_rng(101).random((40, 28))
    problem = Problem.make(net, X[9], "contrastive", Domain.unit(28), median_threshold(net, X))  # takes seconds
    outcome = solve_problem(backend, problem, None, 0.05)
    assert outcome.status in (Status.TIMEOUT, Status.FEASIBLE)
    assert outcome.has_solution == (outcome.status == Status.FEASIBLE) and (outcome.replayed or not outcome.has_solution)
    hitting_net = _network(3, 10, (12, 8), "relu", monotone=False)
    abductive = Problem.make(
        hitting_net, np.full(10, 0.5), "abductive", Domain.unit(10), float(hitting_net.forward(np.full(10, 0.5)))
    )
    late = solve_problem(backend, abductive, None, 0.01)
    assert late.status == Status.TIMEOUT and not late.has_solution


def test_gurobi_size_limit_is_a_status() -> None:
    gp = importlib.import_module("gurobipy")
    with gp.Env(empty=True) as env:
        env.setParam("OutputFlag", 0)
        env.start()
        with gp.Model(env=env) as model:
            model.addMVar(3000)
            try:
                model.optimize()
            except gp.GurobiError as error:
                assert error.errno == 10010
            else:
                pytest.skip("this Gurobi licence is not size-limited")
    net = _network(0, 10, (1500,), "relu", monotone=False)
    x = np.full(10, 0.5)
    t = float(net.forward(x)) + 0.01
    with get_solver("gurobi") as solver:
        for kind in KINDS:
            outcome = solve_problem(solver, Problem.make(net, x, kind, Domain.unit(10), t), None, 30.0)
            assert outcome.status == Status.SIZE_LIMIT and "10010" in outcome.raw_status


def test_gurobi_environment_is_lazy_and_closed() -> None:
    importlib.import_module("gurobipy")
    solver = get_solver("gurobi")
    assert solver._env is None
    solve_problem(
        solver, Problem.make(Network.from_json(DESIGN_NETWORK), np.ones(3), "contrastive", Domain.unit(3), 0.5), None, 10.0
    )
    assert solver._env is not None
    solver.close()
    assert solver._env is None


def test_highs_prints_nothing() -> None:
    """A HiGHS solve in a fresh process (its guard process included) writes nothing on standard
    output, and decides (size 2). Neither depends on the machine's speed: the solve's limit is
    one no run comes near, and the subprocess's timeout (30 min) only catches a hang — a loaded
    machine once took more than 120 s to import, start the guard process and solve."""
    importlib.import_module("highspy")
    script = (
        "import json, sys\n"
        "import numpy as np\n"
        "from cardinal.solvers.base import solve_minimum\n"
        "from cardinal.network import Network\n"
        "net = Network.from_json(json.loads(sys.argv[1]))\n"
        "out = solve_minimum(net, np.ones(3), threshold=0.5, solver='highs', time_limit=3600.0)\n"
        "assert out.size == 2, out\n"
    )
    root = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-c", script, json.dumps(DESIGN_NETWORK)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800, cwd=root)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""


def test_the_encodings_differences_round_as_fractions_do() -> None:
    """`encode._differences` (TwoSum's exact error, vectorised) gives the double nearest the exact
    a − b on the side asked, as the Fractions it replaced: random magnitudes, signs, equal pairs,
    and differences whose rounding is inexact."""
    from fractions import Fraction

    from cardinal.solvers.encode import _differences, _rounded

    rng = np.random.default_rng(0)
    inexact = 0
    for _ in range(300):
        a = rng.random(40) * 10.0 ** rng.integers(-8, 8)
        b = rng.random(40) * 10.0 ** rng.integers(-8, 8)
        same = rng.random(40) < 0.2
        a[same] = b[same]
        a[rng.random(40) < 0.3] *= -1.0
        exact = [Fraction(p) - Fraction(q) for p, q in zip(a.tolist(), b.tolist(), strict=True)]
        for direction in (-1, 1):
            assert (_differences(a, b, direction) == _rounded(exact, direction)).all()
        inexact += sum(Fraction(float(e)) != e for e in exact)
    assert inexact > 1000

"""The exhaustive backend against brute force, its exact fallback, limits and statuses."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from bruteforce import monotone_minimum, random_network, vertex_minimum
from cardinal.solvers.base import solve_problem
from cardinal.solvers.enumerate import MAX_TABLE_FEATURES, EnumerateSolver, Evaluator, combinations

from cardinal import Domain, Layer, Network
from cardinal.activations import Activation
from cardinal.bounds import _activate
from cardinal.errors import InputError
from cardinal.greedy import explain
from cardinal.problem import Problem, Status

MONOTONE_ACTIVATIONS = [
    Activation.make("relu"),
    Activation.make("hardtanh", min=0.0, max=1.0),
    Activation.make("step", at=0.0),
    Activation.make("leaky_relu", slope=0.1),
    Activation.make("sigmoid"),
    Activation.make("tanh"),
    Activation.make("softplus"),
]


def _check_against(problem: Problem, reference: int | None) -> None:
    """Every question about `problem` answered right: the minimum, and at_most below, at and above it."""
    with EnumerateSolver() as backend:
        found = solve_problem(backend, problem, None, 30.0)
        if reference is None:
            assert found.status == Status.NONE_EXISTS
            return
        assert found.status == Status.OPTIMAL and found.size == reference and found.replayed, found
        if reference > 0:
            assert solve_problem(backend, problem, reference - 1, 30.0).status == Status.NONE_WITHIN
        for at_most in (reference, reference + 1):
            within = solve_problem(backend, problem, at_most, 30.0)
            assert within.status in (Status.OPTIMAL, Status.FEASIBLE) and within.size <= at_most and within.replayed
            assert within.status == Status.FEASIBLE or within.size == reference  # OPTIMAL only when proved


@pytest.mark.parametrize("activation", MONOTONE_ACTIVATIONS, ids=lambda a: a.name)
@pytest.mark.parametrize("kind", ["contrastive", "abductive"])
def test_monotone_matches_brute_force(activation: Activation, kind: str) -> None:
    rng = np.random.default_rng(7)
    for _ in range(6):
        n = int(rng.integers(2, 7))
        net = random_network(rng, n, (int(rng.integers(1, 5)), 2), activation, grain=int(rng.choice([0, 3])))
        x = rng.uniform(size=n)
        problem = Problem.make(net, x, kind, Domain.unit(n), float(net.forward(x)) + 0.2 * rng.normal())
        _check_against(problem, monotone_minimum(problem))


@pytest.mark.parametrize("activation", MONOTONE_ACTIVATIONS[:4], ids=lambda a: a.name)
@pytest.mark.parametrize("kind", ["contrastive", "abductive"])
def test_non_monotone_binary_matches_vertex_brute_force(activation: Activation, kind: str) -> None:
    rng = np.random.default_rng(11)
    for _ in range(6):
        n = int(rng.integers(2, 7))
        net = random_network(rng, n, (3, 2), activation, monotone=False)
        x = rng.integers(0, 2, size=n).astype(float)
        problem = Problem.make(net, x, kind, Domain.boolean(n), float(net.forward(x)) + 0.3 * rng.normal())
        _check_against(problem, vertex_minimum(problem))


def test_design_example_beats_greedy(design_network: Network) -> None:
    """docs/design.md §3's network at x = (1, 1, 1), t = 0.5: greedy's CXp has 3 features, the minimum 2."""
    net = design_network
    x = np.ones(3)
    assert explain(net, x, kind="contrastive", threshold=0.5, device="cpu").features(0) == (0, 1, 2)
    problem = Problem.make(net, x, "contrastive", threshold=0.5)
    with EnumerateSolver() as backend:
        found = solve_problem(backend, problem, None, 10.0)
        assert found.status == Status.OPTIMAL and found.features == (0, 2) and found.replayed
        assert solve_problem(backend, problem, 1, 10.0).status == Status.NONE_WITHIN
        assert solve_problem(backend, problem, 2, 10.0).status == Status.OPTIMAL  # levels 1..2 scanned upwards


def _near_threshold_network() -> Network:
    """f = 0.1·y0 + 0.2·y1 + 2^-52·y2 − 0.3: at (1, 1, 0) float64 gives 5.6e-17, exactly 2.8e-17."""
    weight = np.array([[0.1, 0.2, 2.0**-52]])
    return Network([Layer(weight, np.array([-0.3]), Activation.make("identity"))])


def test_exact_fallback_where_floats_mislead() -> None:
    net, t = _near_threshold_network(), 4e-17
    y = np.array([1.0, 1.0, 0.0])
    assert float(net.forward(y)) > t  # float64 says class 1 ...
    problem = Problem.make(net, np.zeros(3), "contrastive", threshold=t)
    assert not problem.flips(y)  # ... but exactly f(y) ≤ t
    assert int(Evaluator(problem).predictions(torch.tensor(y)[None, :])[0]) == 0
    found = solve_problem(EnumerateSolver(), problem, None, 10.0)
    assert found.status == Status.OPTIMAL and found.features == (0, 1, 2) and found.replayed
    assert solve_problem(EnumerateSolver(), problem, 2, 10.0).status == Status.NONE_WITHIN


def test_step_unit_near_its_breakpoint_is_decided_exactly() -> None:
    """The same sum through a step at 4e-17: at (1, 1, 0) float64 says it fires, exactly it does not."""
    step = Activation.make("step", at=4e-17)
    identity = Activation.make("identity")
    net = Network(
        [Layer(_near_threshold_network().layers[0].weight, np.array([-0.3]), step), Layer(np.ones((1, 1)), np.zeros(1), identity)]
    )
    y = np.array([1.0, 1.0, 0.0])
    problem = Problem.make(net, np.zeros(3), "contrastive", threshold=0.5)
    assert float(net.forward(y)) == 1.0 and not problem.flips(y)
    assert int(Evaluator(problem).predictions(torch.tensor(y)[None, :])[0]) == 0
    found = solve_problem(EnumerateSolver(), problem, None, 10.0)
    assert found.status == Status.OPTIMAL and found.features == (0, 1, 2) and found.replayed


def test_error_bound_passes_through_smooth_units() -> None:
    """tanh(0.1 + 0.2 − 0.3): float64 feeds tanh 5.6e-17, exactly it gets 2.8e-17; t = 4e-17 between."""
    tanh = Activation.make("tanh")
    layer = _near_threshold_network().layers[0]
    net = Network([Layer(layer.weight, layer.bias, tanh), Layer(np.ones((1, 1)), np.zeros(1), Activation.make("identity"))])
    y = np.array([1.0, 1.0, 0.0])
    problem = Problem.make(net, np.zeros(3), "contrastive", threshold=4e-17)
    assert float(net.forward(y)) > 4e-17 and not problem.flips(y)
    assert int(Evaluator(problem).predictions(torch.tensor(y)[None, :])[0]) == 0
    assert solve_problem(EnumerateSolver(), problem, None, 10.0).features == (0, 1, 2)


@pytest.mark.parametrize(("name", "factor"), [("leaky_relu", 3.0), ("sigmoid", 0.25), ("tanh", 1.0), ("hardtanh", 1.0)])
def test_activation_bounds_scale_by_the_lipschitz_constant(name: str, factor: float) -> None:
    activation = Activation.make(name, **({"slope": 3.0} if name == "leaky_relu" else {}))
    _, bound, _ = _activate(activation, torch.tensor([[-0.5, 0.25]], dtype=torch.float64), torch.full((1, 2), 1e-10))
    assert (bound >= factor * 1e-10).all()


@pytest.mark.parametrize("name", ["relu", "step", "sigmoid", "tanh", "softplus", "leaky_relu"])
def test_evaluator_agrees_with_exact_arithmetic(name: str) -> None:
    rng = np.random.default_rng(3)
    activation = Activation.make(name, **({"slope": 3.0} if name == "leaky_relu" else {}))
    net = random_network(rng, 5, (6, 4), activation, monotone=False)
    points = rng.uniform(size=(40, 5))
    outputs = net.forward(points).numpy()
    for threshold in (float(np.median(outputs)), float(outputs[0]), float(np.nextafter(outputs[1], 0.0))):
        problem = Problem.make(net, points[2], "contrastive", Domain.unit(5), threshold)
        fast = Evaluator(problem).predictions(torch.tensor(points)).numpy()
        assert (fast == problem.exact.predictions(points, threshold)).all()


def test_float_overflow_falls_back_to_exact_arithmetic() -> None:
    """Two units reach 2e308 = inf in float64; f = z0 − z1 is then NaN there, exactly it is 1."""
    wide = np.array([[1e308, 1e308], [1e308, 1e308]])
    net = Network(
        [
            Layer(wide, np.array([0.0, -1.0]), Activation.make("relu")),
            Layer(np.array([[1.0, -1.0]]), np.zeros(1), Activation.make("identity")),
        ]
    )
    problem = Problem.make(net, np.ones(2), "contrastive", threshold=0.5)
    assert problem.prediction == 1 and np.isnan(float(net.forward(np.ones(2))))
    assert int(Evaluator(problem).predictions(torch.ones(1, 2, dtype=torch.float64))[0]) == 1


def test_cuda_request_without_cuda_is_an_input_error() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(InputError):
        EnumerateSolver(device="cuda")


def test_smooth_enclosure_straddling_the_threshold_is_reported() -> None:
    """f = sigmoid(s − 1/2) + sigmoid(s − 3/2), s = y0 + y1, is exactly 1 where s = 1
    (sigmoid(a) + sigmoid(−a) = 1), so at t = 1 the singletons are undecided: no guess, ERROR."""
    net = Network(
        [
            Layer(np.ones((2, 2)), np.array([-0.5, -1.5]), Activation.make("sigmoid")),
            Layer(np.ones((1, 2)), np.array([0.0]), Activation.make("identity")),
        ]
    )
    problem = Problem.make(net, np.ones(2), "contrastive", threshold=1.0)
    assert problem.flips(np.array([0.0, 1.0])) is None
    found = solve_problem(EnumerateSolver(), problem, None, 10.0)
    assert found.status == Status.ERROR and "undecided" in found.message
    assert solve_problem(EnumerateSolver(), problem, 1, 10.0).status == Status.ERROR
    within = solve_problem(EnumerateSolver(), problem, 2, 10.0)  # "≤ 2" holds (the full set); minimality is open
    assert within.status == Status.FEASIBLE and within.features == (0, 1) and within.replayed


def test_sigmoid_at_zero_is_decided_exactly() -> None:
    """sigmoid(0) = 1/2 exactly: at t = 0.5 the singletons of f = sigmoid(y0 + y1 − 1) give f = t,
    which is decided (f ≤ t flips p(x) = 1), so the minimum CXp is proved to be a singleton."""
    net = Network(
        [
            Layer(np.array([[1.0, 1.0]]), np.array([-1.0]), Activation.make("sigmoid")),
            Layer(np.array([[1.0]]), np.array([0.0]), Activation.make("identity")),
        ]
    )
    problem = Problem.make(net, np.ones(2), "contrastive", threshold=0.5)
    assert problem.flips(np.array([0.0, 1.0])) is True
    found = solve_problem(EnumerateSolver(), problem, None, 10.0)
    assert found.status == Status.OPTIMAL and found.features == (0,) and found.replayed, found


def test_none_exists_and_empty_abductive() -> None:
    net = Network([Layer(np.array([[1.0, 1.0]]), np.array([5.0]), Activation.make("relu"))])  # f > 0 everywhere
    assert solve_problem(EnumerateSolver(), Problem.make(net, np.ones(2), "contrastive"), None, 5.0).status == Status.NONE_EXISTS
    empty = solve_problem(EnumerateSolver(), Problem.make(net, np.ones(2), "abductive"), None, 5.0)
    assert empty.status == Status.OPTIMAL and empty.features == () and empty.replayed


def test_unsupported_and_size_limit() -> None:
    rng = np.random.default_rng(0)
    net = random_network(rng, 3, (3,), Activation.make("relu"), monotone=False)
    real = Problem.make(net, np.full(3, 0.5), "contrastive", Domain.unit(3))
    assert solve_problem(EnumerateSolver(), real, None, 5.0).status == Status.UNSUPPORTED
    n = MAX_TABLE_FEATURES + 1
    wide = random_network(rng, n, (2,), Activation.make("relu"), monotone=False)
    problem = Problem.make(wide, np.zeros(n), "abductive", Domain.boolean(n))
    assert solve_problem(EnumerateSolver(), problem, None, 5.0).status == Status.SIZE_LIMIT


def test_timeout_is_never_a_verdict() -> None:
    rng = np.random.default_rng(5)
    net = random_network(rng, 22, (16, 8), Activation.make("relu"))
    x = rng.uniform(size=22)
    problem = Problem.make(net, x, "abductive", Domain.unit(22), float(net.forward(x)))
    if not problem.flips(problem.counterpoint):
        pytest.skip("constant prediction: nothing to search")
    assert solve_problem(EnumerateSolver(), problem, 5, 1e-6).status == Status.TIMEOUT
    timed_out = solve_problem(EnumerateSolver(), problem, None, 1e-6)
    assert timed_out.status == Status.TIMEOUT and not timed_out.has_solution  # the full set is no find


def test_twenty_features_get_an_exact_answer() -> None:
    """Twenty features (2^20 subsets): a verdict (the 10-minute limit only guards against a hang;
    0.16 s alone, measured by `bench/limits.py`), its set a CXp by the exact monotone shortcut."""
    rng = np.random.default_rng(2)
    net = random_network(rng, 20, (16, 16), Activation.make("relu"))
    x = rng.uniform(size=20)
    problem = Problem.make(net, x, "contrastive", Domain.unit(20), float(net.forward(x)) - 0.5)
    found = solve_problem(EnumerateSolver(), problem, None, 600.0)
    assert found.status in (Status.OPTIMAL, Status.NONE_EXISTS), found
    assert (found.status == Status.NONE_EXISTS) == (problem.flips(problem.counterpoint) is False)
    if found.status == Status.OPTIMAL:
        assert problem.is_explanation(found.features) is True


def test_combinations_cover_each_subset_once() -> None:
    chunks = list(combinations(6, 3, rows=7))
    assert all(len(chunk) <= 7 for chunk in chunks)
    subsets = [tuple(row) for chunk in chunks for row in chunk]
    assert len(subsets) == len(set(subsets)) == 20 and all(len(s) == 3 for s in subsets)
    assert [chunk.shape for chunk in combinations(4, 0, rows=5)] == [(1, 0)]

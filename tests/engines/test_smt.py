"""The z3 backend against brute force: both strategies, both goal directions, witnesses, limits."""

from __future__ import annotations

import itertools
import time
from fractions import Fraction

import numpy as np
import pytest
import z3
from bruteforce import mixed, monotone_minimum, random_network, vertex_minimum
from cardinal.solvers.base import solve_problem
from cardinal.solvers.enumerate import EnumerateSolver
from cardinal.solvers.smt import _INVALID, _VALID, Z3Solver, _Encoding
from cardinal.verify import generate

from cardinal import Domain, Layer, Network
from cardinal.activations import Activation
from cardinal.errors import InputError
from cardinal.greedy import explain
from cardinal.problem import Problem, Status

PWL = [
    Activation.make("relu"),
    Activation.make("hardtanh", min=0.0, max=1.0),
    Activation.make("hardtanh", min=-0.5, max=0.5),
    Activation.make("step", at=0.0),
    Activation.make("leaky_relu", slope=0.1),
    Activation.make("leaky_relu", slope=2.0),
]


def _check_against(backend: Z3Solver, problem: Problem, reference: int | None) -> None:
    found = solve_problem(backend, problem, None, 30.0)
    if reference is None:
        assert found.status == Status.NONE_EXISTS, found
        return
    assert found.status == Status.OPTIMAL and found.size == reference and found.replayed, found
    if reference > 0:
        below = solve_problem(backend, problem, reference - 1, 30.0)
        assert below.status == Status.NONE_WITHIN, below
        # no z3 call for "≤ 0"; an AXp's hitting sets can decide without a final unsat
        assert problem.kind == "abductive" or below.raw_status == ("unsat" if reference > 1 else "")
    within = solve_problem(backend, problem, reference, 30.0)
    assert within.status in (Status.OPTIMAL, Status.FEASIBLE) and within.size <= reference and within.replayed


@pytest.mark.parametrize("strategy", ["auto", "encode"])
@pytest.mark.parametrize("activation", PWL, ids=lambda a: f"{a.name}{dict(a.params)}")
def test_monotone_matches_brute_force(strategy: str, activation: Activation) -> None:
    """Both kinds and both goal directions (thresholds on either side of f(x))."""
    rng = np.random.default_rng(17)
    with Z3Solver(strategy) as backend:
        for trial in range(8):
            n = int(rng.integers(2, 6))
            net = random_network(rng, n, (int(rng.integers(2, 4)), 2), activation, grain=3 if trial % 2 else 0)
            x = rng.uniform(size=n)
            threshold = float(net.forward(x)) + (0.25 if trial % 4 < 2 else -0.25) * rng.uniform()
            for kind in ("contrastive", "abductive"):
                problem = Problem.make(net, x, kind, Domain.unit(n), threshold)
                _check_against(backend, problem, monotone_minimum(problem))


@pytest.mark.parametrize("activation", PWL[:3], ids=lambda a: f"{a.name}{dict(a.params)}")
def test_lazy_batch_of_random_maximal_sets_keeps_answers(activation: Activation, monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch of maximal invalid sets, forced from the first round on, changes no minimum
    (with the linear cuts off, which would otherwise settle most of these instances first)."""
    import cardinal.solvers.smt as smt

    monkeypatch.setattr(smt._Lazy, "_add_cut", lambda *args, **kwargs: None)
    monkeypatch.setattr(smt._Lazy, "_branch_and_bound", lambda *args: (None, None))  # the loop alone
    monkeypatch.setattr(smt, "_ROUNDS_BEFORE_BATCH", 1)
    monkeypatch.setattr(smt, "_BATCH_SETS", 50)
    batches = []
    grow = smt._Lazy.grow_random
    monkeypatch.setattr(smt._Lazy, "grow_random", lambda self, *args: batches.append(args) or grow(self, *args))
    rng = np.random.default_rng(23)
    with Z3Solver() as backend:
        for _ in range(6):
            n = int(rng.integers(4, 8))
            net = random_network(rng, n, (int(rng.integers(2, 5)), 3), activation)
            x = rng.uniform(size=n)
            threshold = float(net.forward(x)) + 0.2 * rng.uniform(-1, 1)
            for kind in ("contrastive", "abductive"):
                problem = Problem.make(net, x, kind, Domain.unit(n), threshold)
                _check_against(backend, problem, monotone_minimum(problem))
    assert batches  # the batch really ran


def test_branch_and_bound_keeps_brute_force_minima(monkeypatch: pytest.MonkeyPatch) -> None:
    """On ReLU networks with the goal f > t the lazy strategy answers by branch and bound
    (`solvers.branch`); its minima and "none within" answers are those of brute force."""
    import cardinal.solvers.smt as smt

    searches = []
    make = smt.SubsetSearch
    monkeypatch.setattr(smt, "SubsetSearch", lambda *args: searches.append(make(*args)) or searches[-1])
    rng = np.random.default_rng(10)
    with Z3Solver() as backend:
        for _ in range(6):  # networks of the benchmark's kind
            n = 10
            net = generate.random_network(rng, n, (16, 16), "relu")
            x = rng.uniform(size=n)
            threshold = float(net.forward(x)) + 0.5 * rng.uniform()  # p(x) = 0: the CXp must raise f
            problem = Problem.make(net, x, "contrastive", Domain.unit(n), threshold)
            _check_against(backend, problem, monotone_minimum(problem))
    assert searches and sum(search.nodes for search in searches) > 0


def test_grown_random_sets_are_maximal_and_invalid() -> None:
    from cardinal.solvers.smt import _Lazy

    rng = np.random.default_rng(3)
    net = random_network(rng, 7, (4, 3), PWL[0])
    x = rng.uniform(size=7)
    problem = Problem.make(net, x, "contrastive", Domain.unit(7), float(net.forward(x)) - 0.3)
    lazy = _Lazy(problem, x, problem.counterpoint)
    grown = lazy.grow_random(40)
    assert (lazy.judge(grown) == _INVALID).all()
    for row in grown:
        for i in np.flatnonzero(~row):
            extended = row.copy()
            extended[i] = True
            assert lazy.judge(extended[None, :])[0] == _VALID  # adding any feature makes it valid


def _phases(net: Network, x: np.ndarray, kind: str, threshold: float) -> int:
    """Phase Booleans in the monotone encoding of a problem."""
    problem = Problem.make(net, x, kind, Domain.unit(net.n_inputs), threshold)
    base, target = (x, problem.counterpoint) if kind == "contrastive" else (problem.counterpoint, x)
    encoding = _Encoding(problem, z3.Context(), base, target)
    return encoding.solver.sexpr().count("(declare-fun a")


@pytest.mark.parametrize(("name", "params", "convex"), [("relu", {}, True), ("leaky_relu", {"slope": 2.0}, False)])
def test_one_sided_relaxation_drops_the_phase_booleans(name: str, params: dict, convex: bool) -> None:
    """Decreasing f (CXp of class 1) needs no phase for convex units, increasing f none for concave ones."""
    rng = np.random.default_rng(1)
    net = random_network(rng, 4, (4,), Activation.make(name, **params))
    low, high = np.zeros(4), np.ones(4)  # both regions are the whole box: the same units are unstable
    decrease = _phases(net, high, "contrastive", float(net.forward(high)) - 1e-3)
    increase = _phases(net, low, "contrastive", float(net.forward(low)) + 1e-3)
    assert (decrease == 0) == convex and (increase == 0) != convex
    assert max(decrease, increase) > 0  # some unit is unstable, so the test means something


@pytest.mark.parametrize("activation", PWL[:4], ids=lambda a: f"{a.name}{dict(a.params)}")
def test_non_monotone_binary_matches_vertex_brute_force(activation: Activation) -> None:
    rng = np.random.default_rng(23)
    with Z3Solver() as backend:
        for _ in range(5):
            n = int(rng.integers(2, 6))
            net = random_network(rng, n, (3, 2), activation, monotone=False)
            x = rng.integers(0, 2, size=n).astype(float)
            threshold = float(net.forward(x)) + 0.3 * rng.normal()
            for kind in ("contrastive", "abductive"):
                problem = Problem.make(net, x, kind, Domain.boolean(n), threshold)
                _check_against(backend, problem, vertex_minimum(problem))


def test_non_monotone_real_box_agrees_with_a_grid() -> None:
    """No brute force is exact on a real box, but a grid (vertices included) bounds the answer: a
    CXp is no larger than the change of any flipping grid point, and an AXp meets every such change."""
    rng = np.random.default_rng(29)
    grid = np.array(list(itertools.product(np.linspace(0.0, 1.0, 9), repeat=3)))
    with Z3Solver() as backend:
        for trial in range(8):
            net = random_network(rng, 3, (3, 2), PWL[trial % 4], monotone=False)
            x = rng.integers(0, 2, size=3).astype(float)
            threshold = float(net.forward(x)) + 0.3 * rng.normal()
            for kind in ("contrastive", "abductive"):
                problem = Problem.make(net, x, kind, Domain.unit(3), threshold)
                changes = (grid != x)[problem.exact.predictions(grid, threshold) != problem.prediction]
                found = solve_problem(backend, problem, None, 30.0)
                if kind == "abductive":
                    assert found.status == Status.OPTIMAL and changes[:, list(found.features)].any(axis=1).all()
                elif found.status == Status.NONE_EXISTS:
                    assert not len(changes)
                else:
                    assert found.status == Status.OPTIMAL and found.replayed
                    assert not len(changes) or found.size <= changes.sum(axis=1).min()


def _valley() -> Network:
    """f(y) = −|3·y0 − 1| (y1 unused): highest, 0, at y0 = 1/3 inside the box."""
    return Network(
        [
            Layer(np.array([[3.0, 0.0], [-3.0, 0.0]]), np.array([-1.0, 1.0]), Activation.make("relu")),
            Layer(np.array([[-1.0, -1.0]]), np.array([0.0]), Activation.make("identity")),
        ]
    )


def test_real_box_counterexample_lies_inside_the_box() -> None:
    """Only interior points (|3·y0 − 1| < 1/2) flip: a CXp on the box, none on its vertices."""
    net, x = _valley(), np.zeros(2)
    with Z3Solver() as backend:
        found = solve_problem(backend, Problem.make(net, x, "contrastive", Domain.unit(2), -0.5), None, 10.0)
        assert found.status == Status.OPTIMAL and found.features == (0,) and found.replayed
        assert 1 / 6 < found.witness[0] < 1 / 2 and found.witness[1] == 0.0
        vertices = solve_problem(backend, Problem.make(net, x, "contrastive", Domain.boolean(2), -0.5), None, 10.0)
        assert vertices.status == Status.NONE_EXISTS
        axp = solve_problem(backend, Problem.make(net, x, "abductive", Domain.unit(2), -0.5), None, 10.0)
        assert axp.status == Status.OPTIMAL and axp.features == (0,)
        empty = solve_problem(backend, Problem.make(net, x, "abductive", Domain.boolean(2), -0.5), None, 10.0)
        assert empty.status == Status.OPTIMAL and empty.features == ()


def test_witness_off_the_doubles_is_moved_onto_them() -> None:
    """f = 3·y0 − 1 − y1 > 0 (y1 ∈ [0, 0]) needs y0 > 1/3; a model at 1/3 + 2^-58 rounds to the
    double just below 1/3, so the grid query must find a double above it."""
    net = mixed(Network([Layer(np.array([[3.0, -1.0]]), np.array([-1.0]), Activation.make("identity"))]))  # y0 in the box
    problem = Problem.make(net, np.zeros(2), "contrastive", Domain(np.zeros(2), np.array([1.0, 0.0])), 0.0)
    encoding = _Encoding(problem, z3.Context())
    value = Fraction(1, 3) + Fraction(1, 2**58)
    assert not problem.flips(np.array([float(value), 0.0]))  # rounding alone fails
    encoding.solver.push()
    encoding.solver.add(encoding.points[0] == z3.RealVal(value, encoding.context))
    assert encoding.solver.check() == z3.sat
    model = encoding.solver.model()
    encoding.solver.pop()
    y = encoding._witness(model, [], time.perf_counter() + 10.0)
    assert problem.flips(y) and Fraction(float(y[0])) > Fraction(1, 3) and y[1] == 0.0


def test_no_double_witness_is_an_error_not_an_answer() -> None:
    """−|3·y0 − 1| > −2^-60 holds only within 2^-60/3 of 1/3, where no double lies."""
    problem = Problem.make(_valley(), np.zeros(2), "contrastive", Domain.unit(2), -(2.0**-60))
    found = solve_problem(Z3Solver(), problem, None, 20.0)
    assert found.status == Status.ERROR and "non-double" in found.message


def test_design_example_beats_greedy(design_network: Network) -> None:
    """docs/design.md §3's network at x = (1, 1, 1), t = 0.5: greedy's CXp has 3 features, the minimum 2."""
    net = design_network
    x = np.ones(3)
    assert len(explain(net, x, kind="contrastive", threshold=0.5, device="cpu").features(0)) == 3
    problem = Problem.make(net, x, "contrastive", threshold=0.5)
    for strategy in ("auto", "encode"):
        with Z3Solver(strategy) as backend:
            found = solve_problem(backend, problem, None, 10.0)
            assert found.status == Status.OPTIMAL and found.size == 2 and found.replayed
            assert solve_problem(backend, problem, 1, 10.0).status == Status.NONE_WITHIN


def test_exact_where_floats_mislead() -> None:
    """f = 0.1·y0 + 0.2·y1 + 2^-52·y2 − 0.3 and t = 4e-17: float64 says {0, 1} flips; exactly only {0, 1, 2}."""
    net = Network([Layer(np.array([[0.1, 0.2, 2.0**-52]]), np.array([-0.3]), Activation.make("identity"))])
    assert float(net.forward(np.array([1.0, 1.0, 0.0]))) > 4e-17
    problem = Problem.make(net, np.zeros(3), "contrastive", threshold=4e-17)
    for strategy in ("auto", "encode"):
        with Z3Solver(strategy) as backend:
            assert solve_problem(backend, problem, None, 10.0).features == (0, 1, 2)
            assert solve_problem(backend, problem, 2, 10.0).status == Status.NONE_WITHIN


def _hard_monotone_problem() -> tuple[Problem, int]:
    """A 24-feature monotone ReLU CXp with no singleton answer (checked by enumeration)."""
    rng = np.random.default_rng(4)
    net = random_network(rng, 24, (24, 24), Activation.make("relu"))
    x = rng.uniform(size=24)
    problem = Problem.make(net, x, "contrastive", Domain.unit(24), float(net.forward(x)) - 3.0)
    assert solve_problem(EnumerateSolver(), problem, 1, 10.0).status == Status.NONE_WITHIN
    return problem, 1


def test_timeouts_are_never_verdicts() -> None:
    problem, at_most = _hard_monotone_problem()
    lazy = solve_problem(Z3Solver(), problem, at_most, 1e-4)
    assert lazy.status == Status.TIMEOUT and lazy.raw_status.startswith("unknown")
    rng = np.random.default_rng(9)
    net = random_network(rng, 12, (16, 16), Activation.make("relu"), monotone=False)
    x = rng.uniform(size=12)
    mixed = Problem.make(net, x, "contrastive", Domain.unit(12), float(net.forward(x)) + 0.05)
    encoded = solve_problem(Z3Solver(), mixed, 2, 0.05)
    assert encoded.status == Status.TIMEOUT and encoded.raw_status.startswith("unknown")


def test_unsupported_and_bad_strategy() -> None:
    sigmoid, identity = Activation.make("sigmoid"), Activation.make("identity")
    # smooth, and feature 0 of mixed sign (+1·+1 and +1·−1): no monotone shortcut
    net = Network([Layer(np.array([[1.0, 1.0], [1.0, 0.0]]), np.zeros(2), sigmoid), Layer(np.array([[1.0, -1.0]]), np.zeros(1), identity)])
    assert not net.is_sign_monotone
    problem = Problem.make(net, np.ones(2), "contrastive", threshold=0.0)
    assert solve_problem(Z3Solver(), problem, None, 5.0).status == Status.UNSUPPORTED
    with pytest.raises(InputError):
        Z3Solver("fast")


def test_close_drops_the_context_and_reopens() -> None:
    """A call makes a fresh z3 context where z3 runs (not before); `close` drops it, and the
    backend answers again afterwards."""
    net = Network([Layer(np.ones((1, 2)), np.array([-1.5]), Activation.make("relu"))])
    problem = Problem.make(net, np.ones(2), "contrastive")
    backend = Z3Solver("encode")
    assert backend.context is None
    with backend:
        assert solve_problem(backend, problem, None, 5.0).size == 1
        assert backend.context is not None
    assert backend.context is None
    found = solve_problem(backend, problem, None, 5.0)
    assert found.status == Status.OPTIMAL and found.size == 1


def test_boundaries_are_exact() -> None:
    """A step fires at h = at exactly, and f = t is class 0: f > t is strict, with no ε."""
    step = Network(
        [
            Layer(np.array([[0.25, 0.25, -0.5]]), np.array([0.0]), Activation.make("step", at=0.5)),
            Layer(np.ones((1, 1)), np.zeros(1), Activation.make("identity")),
        ]
    )
    box = Domain(np.zeros(3), np.array([1.0, 1.0, 0.0]))  # y2 is pinned to 0: the net is non-monotone only on paper
    fires = Problem.make(step, np.zeros(3), "contrastive", box, 0.5)
    found = solve_problem(Z3Solver(), fires, None, 10.0)
    assert found.status == Status.OPTIMAL and found.features == (0, 1) and found.replayed
    # h1 = at exactly at x; toggling y2 turns unit 1 off and unit 2 on: f = z1 + z2 stays 1, no CXp
    both = Network(
        [
            Layer(np.array([[0.25, 0.25, -0.5], [0.0, 0.0, 1.0]]), np.zeros(2), Activation.make("step", at=0.5)),
            Layer(np.ones((1, 2)), np.zeros(1), Activation.make("identity")),
        ]
    )
    corners = Domain(np.array([1.0, 1.0, 0.0]), np.ones(3), binary=True)
    at_breakpoint = Problem.make(both, np.array([1.0, 1.0, 0.0]), "contrastive", corners, 0.5)
    assert solve_problem(Z3Solver(), at_breakpoint, None, 10.0).status == Status.NONE_EXISTS
    linear = Network([Layer(np.array([[0.25, 0.25, -0.5]]), np.zeros(1), Activation.make("identity"))])
    assert solve_problem(Z3Solver(), Problem.make(linear, np.zeros(3), "contrastive", box, 0.5), None, 10.0).status == (
        Status.NONE_EXISTS
    )
    monotone = Network([Layer(np.array([[0.25, 0.25, 0.5]]), np.zeros(1), Activation.make("identity"))])
    axp = Problem.make(monotone, np.ones(3), "abductive", Domain.unit(3), 0.5)  # {2} and {0, 1} reach f = t only
    for strategy in ("auto", "encode"):
        found = solve_problem(Z3Solver(strategy), axp, None, 10.0)
        assert found.status == Status.OPTIMAL and found.size == 2 and 2 in found.features and found.replayed

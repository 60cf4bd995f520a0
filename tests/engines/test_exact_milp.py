"""The exact MILP engine (`solvers.exact_milp`): its minima against brute force on Boolean cubes
(monotone and non-monotone networks, K = 3 classifiers, both kinds) and against z3's full encoding
on tiny continuous boxes; a float LP made deliberately wrong (duals, points, rays, statuses) costs time or
gives no proof, never a wrong one; its hitting-set step against brute force; `auto` picks it."""

from __future__ import annotations

import importlib
import itertools
import subprocess
import sys
import time
from fractions import Fraction
from types import SimpleNamespace

import cardinal.solvers.covering as covering
import cardinal.solvers.exact_milp as exact_milp
import cardinal.solvers.levels as levels
import highspy  # noqa: F401 (the [all] extras promise it: missing fails, not skips)
import numpy as np
import pytest
from cardinal.solvers.base import auto_solver, available_solvers, get_solver, solve_problem
from cardinal.solvers.hitting import minimum_hitting_set
from cardinal.verify.generate import median_threshold, random_network

from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.exact import ExactNetwork
from cardinal.network import Layer, Network
from cardinal.problem import Problem, Status
from tests.fraction_oracle import Oracle

PROOFS = (Status.OPTIMAL, Status.NONE_EXISTS, Status.NONE_WITHIN)  # what claims "nothing smaller"
# The time limit of a call whose answer a test asserts: none that a run here comes near, so that no
# answer depends on the machine's speed (a loaded machine once ended z3 at 60 s `unknown`).
UNBOUNDED = 3600.0


def _problem(seed: int, monotone: bool, binary: bool, kind: str, n: int | None = None, hidden: tuple[int, ...] | None = None):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 7)) if n is None else n
    hidden = (int(rng.integers(2, 5)), int(rng.integers(2, 4))) if hidden is None else hidden
    net = random_network(rng, n, hidden, "relu", monotone=monotone)
    X = (rng.random((6, n)) < 0.5).astype(float) if binary else rng.random((6, n))
    threshold = median_threshold(net, X)
    domain = Domain.boolean(n) if binary else Domain.unit(n)
    return Problem.make(net, X[int(rng.integers(0, 6))], kind, domain, threshold)


def _classifier_problem(seed: int, binary: bool, kind: str, n: int | None = None, hidden: tuple[int, ...] | None = None) -> Problem:
    """A K = 3 ReLU classifier (argmax, ties to the lowest index) and an input of class seed % 3
    where one of the inputs drawn has it (else of the rarest class): every class, so that rivals
    on both sides of c (closed j < c, strict j > c) are asked."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 7)) if n is None else n
    hidden = (int(rng.integers(3, 6)), int(rng.integers(2, 4))) if hidden is None else hidden
    net = random_network(rng, n, hidden, "relu", monotone=False, outputs=3)
    X = (rng.random((32, n)) < 0.5).astype(float) if binary else rng.random((32, n))
    predictions = ExactNetwork(net).predictions(X, None)
    counts = np.bincount(predictions, minlength=3)
    wanted = seed % 3 if counts[seed % 3] else min(set(predictions.tolist()), key=lambda c: (counts[c], c))
    domain = Domain.boolean(n) if binary else Domain.unit(n)
    return Problem.make(net, X[int(np.flatnonzero(predictions == wanted)[0])], kind, domain)


def _cube_minimum(problem: Problem) -> int | None:
    """The exact minimum on the Boolean cube, from the exact prediction at all 2^n vertices."""
    n, x = problem.n, problem.x
    vertices = np.array(list(itertools.product((0.0, 1.0), repeat=n)))
    predictions = ExactNetwork(problem.net).predictions(vertices, problem.threshold)
    flips = [frozenset(np.flatnonzero(v != x).tolist()) for v, q in zip(vertices, predictions, strict=True) if q != problem.prediction]
    for size in range(n + 1):
        for subset in map(frozenset, itertools.combinations(range(n), size)):
            if problem.kind == "contrastive" and any(changed <= subset for changed in flips):
                return size
            if problem.kind == "abductive" and not any(not (changed & subset) for changed in flips):
                return size
    return None


def _solve(problem: Problem, name: str = "exact-milp", at_most: int | None = None, time_limit: float = UNBOUNDED):
    with get_solver(name, **({"strategy": "encode"} if name == "z3" else {})) as backend:
        return solve_problem(backend, problem, at_most, time_limit)


def _size(outcome) -> int | None:
    assert outcome.status in (Status.OPTIMAL, Status.NONE_EXISTS), outcome
    return outcome.size if outcome.status == Status.OPTIMAL else None


def _no_gradient_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither the flip search's gradient search nor the covering's batched one finds anything."""
    monkeypatch.setattr(exact_milp, "flipping_point", lambda problem, free, seed=0: None)

    def nothing(problem: Problem, movable: np.ndarray, starts: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        return np.repeat(problem.x[None, :], len(movable), axis=0), np.zeros(len(movable), dtype=bool)

    monkeypatch.setattr(covering, "flipping_points", nothing)


@pytest.mark.parametrize("vertices", [True, False], ids=["vertices", "branch-and-bound"])
@pytest.mark.parametrize("monotone", [True, False])
@pytest.mark.parametrize("kind", ["contrastive", "abductive"])
def test_minimum_on_the_boolean_cube_equals_brute_force(monotone: bool, kind: str, vertices: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """With small questions decided at the cube's vertices, and without (the branch and bound)."""
    if not vertices:
        monkeypatch.setattr(exact_milp, "VERTEX_FEATURES", 0)
        monkeypatch.setattr(exact_milp, "SET_QUESTIONS", 0)
        monkeypatch.setattr(levels, "LEVEL_SETS", 0)  # and no levels: the branch and bound alone
    for seed in range(8):
        problem = _problem(seed, monotone, True, kind)
        outcome = _solve(problem)
        assert outcome.exact and outcome.status != Status.REFUTED, outcome
        assert _size(outcome) == _cube_minimum(problem), (seed, outcome)
        if outcome.status == Status.OPTIMAL:
            assert outcome.replayed, outcome


@pytest.mark.parametrize("vertices", [True, False], ids=["vertices", "branch-and-bound"])
@pytest.mark.parametrize("kind", ["contrastive", "abductive"])
def test_k_class_minimum_on_the_boolean_cube_equals_brute_force(kind: str, vertices: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """K = 3 classifiers: the argmax disjunction of the exact closure, with small questions decided
    at the cube's vertices, and without (the branch and bound alone: no vertices, no sets, no
    gradient search); every class of x is asked."""
    if not vertices:
        monkeypatch.setattr(exact_milp, "VERTEX_FEATURES", 0)
        monkeypatch.setattr(exact_milp, "SET_QUESTIONS", 0)
        monkeypatch.setattr(levels, "LEVEL_SETS", 0)  # and no levels: the branch and bound alone
        _no_gradient_search(monkeypatch)
    classes = set()
    for seed in range(9):
        problem = _classifier_problem(300 + seed, True, kind)
        classes.add(problem.prediction)
        outcome = _solve(problem)
        assert outcome.exact and outcome.status != Status.REFUTED, outcome
        assert _size(outcome) == _cube_minimum(problem), (seed, problem.prediction, outcome)
        if outcome.status == Status.OPTIMAL:
            assert outcome.replayed, outcome
    assert classes == {0, 1, 2}


@pytest.mark.parametrize("by_sets", [True, False], ids=["by-sets", "branch-and-bound"])
@pytest.mark.parametrize("kind", ["contrastive", "abductive"])
def test_k_class_minimum_on_a_tiny_box_equals_z3s_full_encoding(kind: str, by_sets: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """K = 3 classifiers on [0, 1]^n, n ≤ 6: the same minimum as z3's exact full encoding."""
    if not by_sets:
        monkeypatch.setattr(exact_milp, "SET_QUESTIONS", 0)
        monkeypatch.setattr(levels, "LEVEL_SETS", 0)  # and no levels: the branch and bound alone
    classes = set()
    for seed in range(6):
        problem = _classifier_problem(400 + seed, False, kind)
        classes.add(problem.prediction)
        ours, reference = _solve(problem), _solve(problem, "z3")
        assert _size(ours) == _size(reference), (seed, problem.prediction, ours, reference)
        if ours.status == Status.OPTIMAL:
            assert ours.replayed, ours
    assert classes == {0, 1, 2}


def test_the_gradient_search_leaves_any_class() -> None:
    """f = (y, 1/4, 1 − y) at x = 0.1 is class 2; y > 1/2 is class 0: the search climbs the
    strongest rival's margin, f_1 − f_2 and then f_0 − f_2 (it looked for class 1 − p(x) = −1)."""
    from cardinal.solvers.attack import flipping_point

    net = Network([Layer(np.array([[1.0], [0.0], [-1.0]]), np.array([0.0, 0.25, 1.0]), Activation.make("identity"))])
    problem = Problem.make(net, np.array([0.1]), "contrastive", Domain.unit(1))
    assert problem.prediction == 2
    y = flipping_point(problem, frozenset({0}))
    assert y is not None and problem.flips(y)


@pytest.mark.parametrize(
    ("monotone", "kind", "by_sets"),
    [(True, "contrastive", True), (True, "abductive", True), (False, "abductive", True), (False, "contrastive", True), (False, "contrastive", False)],
)
@pytest.mark.parametrize("seeds", [range(3), pytest.param(range(3, 6), marks=pytest.mark.slow)], ids=["seeds0-2", "seeds3-5"])
def test_minimum_on_a_tiny_box_equals_z3s_full_encoding(
    monotone: bool, kind: str, by_sets: bool, seeds: range, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Non-monotone CXps with small bounds decided set by set, and without (the branch and bound)."""
    if not by_sets:
        monkeypatch.setattr(exact_milp, "SET_QUESTIONS", 0)
        monkeypatch.setattr(levels, "LEVEL_SETS", 0)  # and no levels: the branch and bound alone
    for seed in seeds:
        problem = _problem(50 + seed, monotone, False, kind)
        ours, reference = _solve(problem), _solve(problem, "z3")
        assert _size(ours) == _size(reference), (seed, ours, reference)


def test_at_most_below_the_minimum_is_none_within() -> None:
    problem = _problem(3, False, True, "contrastive")
    minimum = _cube_minimum(problem)
    assert minimum is not None and minimum >= 2
    outcome = _solve(problem, at_most=minimum - 1)
    assert outcome.status == Status.NONE_WITHIN and outcome.exact, outcome


class _WrongHighs:
    """A HiGHS whose answers are wrong in every way a float LP can be: random duals and points,
    random rays, "infeasible" for feasible LPs and "optimal" for infeasible ones."""

    def __init__(self, real, rng: np.random.Generator) -> None:
        self.real, self.rng, self.lie = real, rng, False

    def __getattr__(self, name: str):
        return getattr(self.real, name)

    def run(self):
        status = self.real.run()
        self.lie = bool(self.rng.random() < 0.3)
        return status

    def getModelStatus(self):
        real = self.real.getModelStatus()
        if not self.lie:
            return real
        statuses = exact_milp._Highs
        return statuses.kInfeasible if real == statuses.kOptimal else statuses.kOptimal

    def getSolution(self):
        solution = self.real.getSolution()
        rows, columns = len(solution.row_dual), len(solution.col_value)
        scale = 10.0 ** self.rng.integers(-3, 4)
        return SimpleNamespace(
            col_value=self.rng.random(columns) * scale,
            row_dual=np.asarray(solution.row_dual) + self.rng.normal(size=rows) * scale,
            dual_valid=True,
        )

    def getDualRay(self):
        return True, True, (self.rng.normal(size=self.real.getNumRow()) * 10.0 ** self.rng.integers(-3, 4)).tolist()


@pytest.mark.parametrize("seeds", [range(3), pytest.param(range(3, 6), marks=pytest.mark.slow)], ids=["seeds0-2", "seeds3-5"])
@pytest.mark.parametrize("classes", [1, 3])
@pytest.mark.parametrize("kind", ["contrastive", "abductive"])
@pytest.mark.parametrize("binary", [True, False])
def test_a_wrong_float_lp_gives_no_wrong_proof(
    kind: str, binary: bool, classes: int, seeds: range, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every LP answer and every float MILP seed is corrupted: an answer is either right (exact
    evidence only: the safe bounds of any multipliers, exact replays) or no proof at all; on one
    output and on K = 3 classes (the argmax disjunction)."""
    monkeypatch.setattr(exact_milp, "VERTEX_FEATURES", 0)  # the branch and bound on binary boxes too
    monkeypatch.setattr(exact_milp, "SET_QUESTIONS", 0)  # and on every CXp bound
    monkeypatch.setattr(levels, "LEVEL_SETS", 0)  # the branch and bound, not levels, on real boxes
    rng = np.random.default_rng(7)
    real_new = exact_milp.new_highs
    monkeypatch.setattr(exact_milp, "new_highs", lambda: _WrongHighs(real_new(), rng))
    monkeypatch.setattr(exact_milp, "optimize", lambda model, seconds: SimpleNamespace(values=rng.random(model.shape[1])))
    _no_gradient_search(monkeypatch)
    proofs = 0
    for seed in seeds:
        if classes == 1:
            problem = _problem(200 + seed, False, binary, kind, n=4, hidden=(3, 2))
        else:
            problem = _classifier_problem(500 + seed, binary, kind, n=4, hidden=(3, 2))
        expected = _cube_minimum(problem) if binary else _size(_solve(problem, "z3")) if "z3" in available_solvers() else "?"
        outcome = _solve(problem, time_limit=UNBOUNDED)
        assert outcome.status != Status.REFUTED, outcome
        if outcome.status in PROOFS:
            proofs += 1
            if expected != "?":
                assert (outcome.size if outcome.status == Status.OPTIMAL else None) == expected, (seed, outcome)
        else:
            assert outcome.status in (Status.FEASIBLE, Status.TIMEOUT, Status.ERROR), outcome
    assert proofs >= 1  # wrong duals slow it down; the safe bounds of the rest still prove


@pytest.mark.parametrize("wrong", [False, True])
def test_the_flip_search_equals_z3s_full_encoding_on_tiny_boxes(wrong: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The flip oracle's branch and bound (no gradient search) on random free sets of small
    continuous boxes, one output and K = 3: each answer equals z3's exact one, flips and "none"
    both met; with every LP answer corrupted (`_WrongHighs`) an answer is still either z3's or
    none at all (a timeout or open regions), never a wrong "none". z3 does not decide the regions
    the branch and bound leaves open here (they end the question unanswered), so every answer
    compared is the branch and bound's own."""
    import z3
    from cardinal.solvers.hitting import OracleTimeout
    from cardinal.solvers.smt import _Encoding

    if wrong:
        rng = np.random.default_rng(11)
        real_new = exact_milp.new_highs
        monkeypatch.setattr(exact_milp, "new_highs", lambda: _WrongHighs(real_new(), rng))
    monkeypatch.setattr(exact_milp, "flipping_point", lambda problem, free, seed=0: None)

    def left_open(problem: Problem, free: frozenset[int], deadline: float, why: str) -> None:
        raise exact_milp.OpenLeaves(why)

    monkeypatch.setattr(exact_milp, "_z3_flip", left_open)
    draws = np.random.default_rng(3)
    answers, unanswered = set(), 0
    for seed in range(8):
        problem = _problem(700 + seed, False, False, "abductive", n=5) if seed % 2 else _classifier_problem(800 + seed, False, "abductive", n=5)
        for _ in range(3):
            free = frozenset(np.flatnonzero(draws.random(problem.n) < 0.5).tolist())
            reference = _Encoding(problem, z3.Context()).find_flip(free, time.perf_counter() + UNBOUNDED)
            try:
                y = exact_milp.flip_point(problem, free, time.perf_counter() + UNBOUNDED)
            except (OracleTimeout, exact_milp.OpenLeaves):
                assert wrong, (seed, sorted(free))
                unanswered += 1
                continue
            assert (y is None) == (reference is None), (seed, sorted(free), y, reference)
            if y is not None:
                assert problem.flips(y) and all(y[i] == problem.x[i] for i in range(problem.n) if i not in free)
            answers.add(y is None)
    assert answers == {True, False} or (wrong and answers), answers  # both answers met (some, when corrupted)
    assert unanswered < 24


def test_the_seed_comes_from_gurobi_where_its_licence_takes_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The float MILP that seeds the incumbent: Gurobi where installed (on the VeriX-shaped
    classifier it found the CXp HiGHS did not find in 15 s), HiGHS where Gurobi's licence refuses
    the model."""
    gurobi = importlib.import_module("cardinal.solvers.gurobi")
    from cardinal.solvers.encode import encode
    from cardinal.solvers.milp import MilpRun, RunState

    problem = _classifier_problem(1, False, "contrastive", n=5, hidden=(4,))
    model = encode(problem, margin=True)
    asked: list[str] = []
    real = gurobi.GurobiSolver._optimize
    monkeypatch.setattr(gurobi.GurobiSolver, "_optimize", lambda self, m, seconds: asked.append("gurobi") or real(self, m, seconds))
    run = exact_milp.optimize(model, UNBOUNDED)
    assert asked == ["gurobi"] and run.state == RunState.OPTIMAL and run.values is not None
    refused = MilpRun(RunState.SIZE_LIMIT, "SIZE_LIMIT (GurobiError 10010)")
    monkeypatch.setattr(gurobi.GurobiSolver, "_optimize", lambda self, m, seconds: refused)
    again = exact_milp.optimize(model, UNBOUNDED)
    assert again.state == RunState.OPTIMAL and again.values is not None  # HiGHS's: the same minimum size
    assert np.round(again.values[model.selectors]).sum() == np.round(run.values[model.selectors]).sum()


def test_the_hitting_set_step_is_a_minimum_hitting_set() -> None:
    rng = np.random.default_rng(3)
    for _ in range(40):
        universe = int(rng.integers(3, 9))
        sets = [frozenset(np.flatnonzero(rng.random(universe) < 0.4).tolist()) or frozenset({0}) for _ in range(int(rng.integers(1, 8)))]
        found = minimum_hitting_set(sets)
        assert found is not None and all(found & s for s in sets)
        smallest = next(k for k in range(universe + 1) for c in itertools.combinations(range(universe), k) if all(set(c) & s for s in sets))
        assert len(found) == smallest
        assert minimum_hitting_set(sets, limit=smallest - 1) is None
    assert minimum_hitting_set([], limit=-1) is None  # was the empty set: the loop asked its last question twice


def test_auto_picks_the_exact_milp_on_non_monotone_networks() -> None:
    non_monotone = _problem(1, False, False, "abductive", n=16, hidden=(4,))
    tiny_cube = _problem(1, False, True, "abductive", n=5, hidden=(4,))
    assert auto_solver(non_monotone) == "exact-milp"
    assert auto_solver(tiny_cube) == "enumerate"
    monotone = _problem(1, True, False, "contrastive", n=16, hidden=(4,))
    assert auto_solver(monotone) == ("z3" if "z3" in available_solvers() else "exact-milp")
    assert auto_solver(_classifier_problem(1, False, "abductive", n=16, hidden=(4,))) == "exact-milp"  # K = 3 (was z3)


def test_auto_picks_the_exact_milp_on_monotone_problems_with_large_answers_where_valid_means_below() -> None:
    """f = Σ y_i over [0, 1]^60. At x = 0 (p(x) = 0, valid means f ≤ t) an AXp keeps all but t's
    worth of features (51 for t = 9.5, 3 for t = 57.5): the large one goes to the exact MILP, the
    small one to z3's lazy strategy. At x = 1 (p(x) = 1, valid means f > t) z3's branch and bound
    takes even the large one (51 for t = 50.5), unless the network has more than 128 features."""
    net = Network([Layer(np.ones((1, 60)), np.zeros(1), Activation.make("identity"))])
    large = Problem.make(net, np.zeros(60), "abductive", Domain.unit(60), 9.5)
    small = Problem.make(net, np.zeros(60), "abductive", Domain.unit(60), 57.5)
    above = Problem.make(net, np.ones(60), "abductive", Domain.unit(60), 50.5)
    assert (large.goal, small.goal, above.goal) == (0, 0, 1)
    assert auto_solver(large) == "exact-milp"
    z3 = "z3" if "z3" in available_solvers() else "exact-milp"
    assert auto_solver(small) == z3 and auto_solver(above) == z3
    wide = Network([Layer(np.ones((1, 200)), np.zeros(1), Activation.make("identity"))])  # > WIDE_FEATURES: either goal
    assert auto_solver(Problem.make(wide, np.ones(200), "abductive", Domain.unit(200), 150.5)) == "exact-milp"
    outcome = _solve(large)
    assert outcome.status == Status.OPTIMAL and outcome.size == 51 and outcome.replayed, outcome
    with get_solver(auto_solver(above)) as backend:
        above_outcome = solve_problem(backend, above, None, UNBOUNDED)
    assert above_outcome.status == Status.OPTIMAL and above_outcome.size == 51 and above_outcome.replayed, above_outcome


def test_auto_imports_only_the_backends_it_may_pick() -> None:
    """`auto` asks whether its candidates are installed, not every backend (Marabou's import
    alone took 1.9 s of a first call); it picks as before."""
    code = (
        "import sys, numpy as np; from cardinal.solvers.base import auto_solver, available_solvers; "
        "from cardinal.verify.generate import random_network; from cardinal.problem import Problem; "
        "net = random_network(np.random.default_rng(1), 16, (4,), 'relu', monotone=False); "
        "p = Problem.make(net, np.full(16, 0.5), 'contrastive', None, float(net.forward(np.full(16, 0.5))) + 0.01); "
        "picked = auto_solver(p); late = [m for m in ('maraboupy', 'cvc5', 'pyscipopt', 'gurobipy') if m in sys.modules]; "
        "print(picked, late, picked in available_solvers(exact=True))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("[")[0].strip() == "exact-milp" and "[] True" in done.stdout, done.stdout


def test_certify_defaults_to_the_exact_backends_and_all_means_every_installed_one() -> None:
    from cardinal.verify.certify import proving_solvers
    from cardinal.verify.commands.common import _solver_names

    rng = np.random.default_rng(5)
    non_monotone = random_network(rng, 30, (4,), "relu", monotone=False)
    monotone = random_network(rng, 30, (4,), "relu", monotone=True)
    domain = Domain.unit(30)
    assert "exact-milp" in proving_solvers(non_monotone, domain)
    assert "exact-milp" in proving_solvers(monotone, domain)
    for net in (non_monotone, monotone):
        chosen = proving_solvers(net, domain)
        assert chosen and not {"gurobi", "highs"} & set(chosen)
        assert _solver_names(None, net, domain) == list(chosen)
        assert _solver_names("all", net, domain) == list(available_solvers())
    assert ("z3" in proving_solvers(monotone, domain)) == ("z3" in available_solvers())
    assert "enumerate" not in proving_solvers(non_monotone, domain)  # 30 features of a real box: no enumeration


def test_the_default_set_stops_at_the_first_exact_proof_and_named_backends_all_run() -> None:
    from cardinal.verify.certify import SolverPool

    net = Network([Layer(np.ones((1, 60)), np.zeros(1), Activation.make("identity"))])
    from cardinal.solvers.base import auto_solver

    problem = Problem.make(net, np.ones(60), "abductive", Domain.unit(60), 50.5)
    names = ["exact-milp", "z3"]
    first = auto_solver(problem)  # the backend auto picks goes first, whatever its place in the list
    assert first in names
    with SolverPool(names, first_proof=True) as pool:
        outcomes, _ = pool.solve(problem, None, UNBOUNDED)
    assert list(outcomes) == [first] and outcomes[first].status == Status.OPTIMAL and outcomes[first].proved
    with SolverPool(names) as pool:
        outcomes, _ = pool.solve(problem, None, UNBOUNDED)
    assert list(outcomes) == names


@pytest.mark.slow
@pytest.mark.parametrize("monotone", [True, False])
@pytest.mark.parametrize("kind", ["contrastive", "abductive"])
def test_larger_random_cubes_against_brute_force(monotone: bool, kind: str) -> None:
    for seed in range(10):
        problem = _problem(1000 + seed, monotone, True, kind, n=9 + seed % 3, hidden=(8, 6))
        outcome = _solve(problem)
        assert _size(outcome) == _cube_minimum(problem), (seed, outcome)


def test_numbers_beyond_what_a_float_lp_resolves_are_unsupported_not_errors() -> None:
    """A weight of 1e16 (beyond `encode.MAX_MAGNITUDE`) in a network of mixed signs: the exact
    MILP's minimum search names it and answers unsupported, as the float MILPs do, not error."""
    from cardinal.solvers.exact_milp import ExactMilpSolver

    relu, identity = Activation.make("relu"), Activation.make("identity")
    net = Network([Layer(np.array([[1e16, -1.0], [-1.0, 1.0]]), np.zeros(2), relu), Layer(np.ones((1, 2)), np.zeros(1), identity)])
    problem = Problem.make(net, np.array([0.5, 0.5]), "contrastive", Domain.unit(2), 1.0)
    assert not problem.monotone
    outcome = ExactMilpSolver().solve(problem, None, 10.0)
    assert outcome.status == Status.UNSUPPORTED and "beyond what a float MILP resolves" in outcome.message, outcome


def test_minimum_cxps_decided_by_levels_equal_the_fraction_oracles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Non-monotone CXps on tiny continuous boxes with set-by-set questions off, so that the levels
    (`solvers.levels`, input splitting) decide them: each minimum m is the exact one — its witness
    flips and moves only the set's m features, and no set of m − 1 features flips, both decided in
    Fractions by `fraction_oracle` (every vertex of the cells where the network is linear) — and
    the levels do prove some of them. No answer here depends on the machine's speed."""
    monkeypatch.setattr(exact_milp, "SET_QUESTIONS", 0)
    by_levels = 0
    for seed in range(8):  # seed 56's minimum has 2 features: level 1 proved by splitting
        problem = _problem(50 + seed, False, False, "contrastive", n=8, hidden=(6, 4))
        ours = _solve(problem)
        size = _size(ours)
        assert size is not None and size <= 2, (seed, ours)  # the oracle decides up to 3 free features
        oracle = Oracle(problem.net, problem.x, problem.threshold, problem.domain.lower, problem.domain.upper)
        witness = [Fraction(v) for v in ours.witness]
        assert oracle.prediction(witness) == 1 - oracle.p, (seed, ours)
        assert {i for i in range(8) if witness[i] != oracle.x[i]} <= set(ours.solution) and len(ours.solution) == size
        assert not any(oracle.flips(smaller) is not False for smaller in itertools.combinations(range(8), size - 1)), seed
        by_levels += "proved by splitting" in ours.message
    assert by_levels > 0


@pytest.mark.slow  # z3's full encoding takes seconds to a quarter of a minute a problem here
def test_minimum_cxps_decided_by_levels_equal_z3s_full_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """The problems of the test above: the same minima as z3's full encoding."""
    monkeypatch.setattr(exact_milp, "SET_QUESTIONS", 0)
    for seed in range(8):
        problem = _problem(50 + seed, False, False, "contrastive", n=8, hidden=(6, 4))
        ours, reference = _solve(problem), _solve(problem, "z3")
        assert _size(ours) == _size(reference), (seed, ours, reference)


def test_early_levels_decide_without_the_seed_and_equal_the_branch_and_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Non-monotone CXps of ReLU networks on continuous boxes of at most `SEED_FEATURES` features:
    the early levels are asked and the float MILP's seed is never run (it raises here); the minima
    equal those of the branch and bound alone (no levels, no set-by-set questions), and the early
    levels decide some of them."""

    def no_seed(search: exact_milp._Minimum, seconds: float) -> None:
        raise AssertionError("the seed ran")

    monkeypatch.setattr(exact_milp._Minimum, "seed", no_seed)
    assert _decided_by_levels_as_by_the_branch_and_bound(monkeypatch) > 0


def _decided_by_levels_as_by_the_branch_and_bound(monkeypatch: pytest.MonkeyPatch) -> int:
    """On eight 8-feature non-monotone CXp problems of continuous boxes: assert that each minimum
    equals the branch and bound's alone (no levels, no set-by-set questions); return how many
    the levels proved."""
    decided = 0
    for seed in range(8):
        problem = _problem(50 + seed, False, False, "contrastive", n=8, hidden=(6, 4))
        ours = _solve(problem)
        with monkeypatch.context() as alone:
            alone.setattr(exact_milp, "levels_fit", lambda n, below: False)
            alone.setattr(exact_milp, "SET_QUESTIONS", 0)
            reference = _solve(problem)
        assert "splitting" not in reference.message, reference
        assert _size(ours) == _size(reference), (seed, ours, reference)
        decided += "proved by splitting" in ours.message
    return decided


def test_levels_below_a_new_incumbent_decide_and_equal_the_branch_and_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no early levels, no seed and no set-by-set questions, the levels are asked only when
    the branch and bound's incumbent brings the levels below it within reach
    (`_Minimum.improved`): the minima equal those of the branch and bound alone, and such levels
    decide some of them."""
    by_levels = exact_milp._by_levels
    monkeypatch.setattr(exact_milp, "_by_levels", lambda problem, search, deadline, early=False: not early and by_levels(problem, search, deadline))
    monkeypatch.setattr(exact_milp, "_seeded", lambda problem: False)
    monkeypatch.setattr(exact_milp, "SET_QUESTIONS", 0)
    assert _decided_by_levels_as_by_the_branch_and_bound(monkeypatch) > 0


@pytest.mark.parametrize("case", ["binary box", "leaky_relu"])
def test_levels_are_not_asked_where_splitting_does_not_apply(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Non-monotone CXps the splitting search does not take — a binary box of more than
    `VERTEX_FEATURES` features, a leaky-ReLU network on a continuous box — decided by the branch
    and bound (no set-by-set questions): a new incumbent asks no levels there (they raised here
    once), and the minimum equals the branch and bound's with no levels at all."""
    monkeypatch.setattr(exact_milp, "SET_QUESTIONS", 0)
    if case == "binary box":
        problem = _problem(903, False, True, "contrastive", n=exact_milp.VERTEX_FEATURES + 4, hidden=(6, 4))
    else:
        rng = np.random.default_rng(10)
        net = random_network(rng, 12, (8, 6), "leaky_relu", monotone=False)
        X = rng.random((6, 12))
        problem = Problem.make(net, X[0], "contrastive", Domain.unit(12), median_threshold(net, X))
    ours = _solve(problem)
    with monkeypatch.context() as alone:
        alone.setattr(exact_milp, "levels_fit", lambda n, below: False)
        reference = _solve(problem)
    assert _size(ours) == _size(reference), (ours, reference)


def test_small_flip_questions_split_first_and_agree_with_the_branch_and_bound() -> None:
    """Flip questions over 1 to `SPLIT_FREE` free features of ReLU networks on continuous boxes:
    the splitting search first (the default) and the branch and bound alone (`split=False`) agree
    on every question; every point either returns flips in exact arithmetic, moving only the free
    features; both answers occur."""
    import time

    answers = []
    for seed in range(4):
        problem = _problem(70 + seed, False, False, "abductive", n=8, hidden=(6, 4))
        rng = np.random.default_rng(seed)
        for size in range(1, exact_milp.SPLIT_FREE + 1):
            free = frozenset(rng.choice(8, size, replace=False).tolist())
            split = exact_milp.flip_point(problem, free, time.perf_counter() + UNBOUNDED)
            alone = exact_milp.flip_point(problem, free, time.perf_counter() + UNBOUNDED, split=False)
            assert (split is None) == (alone is None), (seed, sorted(free))
            for point in (p for p in (split, alone) if p is not None):
                assert problem.flips(point) and all(point[i] == problem.x[i] for i in range(8) if i not in free)
            answers.append(split is not None)
    assert any(answers) and not all(answers)


def test_flips_to_the_closed_side_leave_no_region_open_and_equal_z3() -> None:
    """Where the flip is f ≤ t (one output, p(x) = 1), the flip search minimizes f: its LP points
    lie inside the flipping region, not on f = t where floats flip and exact arithmetic may not
    (maximizing τ, which f ≤ t does not hold, left such leaves open in one of these 12 questions).
    Every answer equals that of z3's exact flip search."""
    import time

    asked = flipped = 0
    for seed in range(3):
        rng = np.random.default_rng(seed)
        net = random_network(rng, 8, (8, 6), "relu", monotone=False)
        X = rng.random((8, 8))
        threshold = median_threshold(net, X)
        for x in X:
            problem = Problem.make(net, x, "abductive", Domain.unit(8).ball(x, 0.2), threshold)
            if problem.prediction != 1 or asked == 12:
                continue
            free = frozenset(rng.choice(8, 2 + asked % 3, replace=False).tolist())
            search = exact_milp._Flip(problem, free, time.perf_counter() + UNBOUNDED)
            assert search.run() and search.open == 0, (seed, sorted(free))
            search.close()
            z3_point = exact_milp._z3_flip(problem, free, time.perf_counter() + UNBOUNDED, "asked by the test")
            assert (search.point is None) == (z3_point is None), (seed, sorted(free))
            assert search.point is None or problem.flips(search.point)
            asked, flipped = asked + 1, flipped + (search.point is not None)
    assert asked == 12 and 0 < flipped < 12


def test_a_closed_side_flip_search_keeps_step_units_strict() -> None:
    """Where the flip is f ≤ t, τ still closes the strict rows of step units: it stays ≥ 0 (real
    points have τ > 0). Free in [−1, 1] it loosened each step's 0-side by up to 1, and the search
    left a region open on this network, where no point flips (f ≥ 1: y0 < 0.5 keeps the second
    step on, y0 > 0.6 the first)."""
    import time

    net = Network(
        [
            Layer(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([0.0, 1.1]), Activation.make("step", at=0.5)),
            Layer(np.array([[1.0, 1.0]]), np.array([0.0]), Activation.make("identity")),
        ]
    )
    problem = Problem.make(net, np.array([0.75, 0.0]), "abductive", Domain.unit(2), 0.5)
    assert problem.prediction == 1
    search = exact_milp._Flip(problem, frozenset({0}), time.perf_counter() + UNBOUNDED)
    assert search.run() and search.open == 0 and search.point is None
    search.close()


@pytest.mark.parametrize("prediction", [0, 1])
def test_k_class_flip_searches_keep_the_tie_rule_at_the_boundary(prediction: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """K ≥ 2 flips are asked class by class (`_flip_searches`): f = (y0, y1) through an identity
    ReLU layer, one feature free, its box ending exactly where the two outputs tie. A tie goes to
    the lower index, so the rival 0 of c = 1 takes the class at the tie (a flip, exactly at the
    box's end: its search finds it) and the rival 1 of c = 0 does not (no flip: the exact bounds
    leave it no search): the closed and the strict side."""
    monkeypatch.setattr(exact_milp, "flipping_point", lambda problem, free, seed=0: None)  # the searches decide
    eye = np.eye(2)
    net = Network([Layer(eye, np.zeros(2), Activation.make("relu")), Layer(eye, np.zeros(2), Activation.make("identity"))])
    x = np.array([0.75, 0.5]) if prediction == 0 else np.array([0.5, 0.75])
    domain = Domain.broadcast([0.0, 0.0], [1.0, 0.75], 2) if prediction == 0 else Domain.broadcast([0.0, 0.5], [1.0, 1.0], 2)
    problem = Problem.make(net, x, "abductive", domain)
    assert problem.prediction == prediction
    model = exact_milp.encode(problem, free=frozenset({1}), exact=True)
    relaxation = exact_milp._Relaxation(model, np.zeros(model.shape[1]))
    searches = exact_milp._flip_searches(problem, frozenset({1}), time.perf_counter() + UNBOUNDED, model, relaxation)
    assert [search.rival for search in searches] == ([] if prediction == 0 else [0])
    relaxation.close()
    y = exact_milp.flip_point(problem, frozenset({1}), time.perf_counter() + UNBOUNDED, split=False)
    if prediction == 0:
        assert y is None
    else:
        assert y is not None and y[1] == 0.5 and y[0] == 0.5 and problem.flips(y)

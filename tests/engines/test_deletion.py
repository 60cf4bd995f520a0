"""The sequential deletion explainer (`solvers.deletion`, issue 27): subset-minimal explanations
of any network, every step decided exactly — checked against brute force on Boolean cubes, by an
independent search on tiny continuous boxes, for both kinds, K = 1 and K = 3, monotone and
non-monotone networks; its order, determinism, undecided steps, and the commands' --method."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from cardinal.solvers import linear_bound
from cardinal.solvers.base import solve_minimum
from cardinal.solvers.deletion import ASKED_BEFORE, NONE_EXISTS, SUBSET_MINIMAL, TRAVERSALS, UNKNOWN, Deletion, deletion
from cardinal.solvers.oracle import Flip, SetOracle, check_witness, pinned
from cardinal.verify.certify import deletion_answer
from cardinal.verify.cli import main
from cardinal.verify.generate import random_network
from cardinal.verify.pipeline import Plan, certify

from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.exact import Dyadic, ExactNetwork
from cardinal.network import Layer, Network
from cardinal.problem import Problem, Status, Verdict
from tests.bruteforce import Reference, vertex_minimum, vertex_valid

IDENTITY = Activation.make("identity")


@pytest.fixture(scope="module")
def oracle():
    with SetOracle() as started:
        yield started


def _network(seed: int, n: int, classes: int, monotone: bool) -> Network:
    return random_network(np.random.default_rng(seed), n, (6,), "relu", monotone=monotone, outputs=classes)


def _inputs(net: Network, binary: bool, seed: int, count: int = 3, far: bool = False) -> np.ndarray:
    """`count` inputs of the cube (or the unit box) among 32 drawn, so that the explanations are
    not all trivial: of the rarest classes first, or (`far`) those farthest from the decision
    boundary first (in float64: |f − t|, or the top output minus the next)."""
    rng = np.random.default_rng(seed)
    X = (rng.random((32, net.n_inputs)) < 0.5).astype(float) if binary else rng.random((32, net.n_inputs))
    predictions = ExactNetwork(net).predictions(X, _threshold(net))
    counts = np.bincount(predictions)
    outputs = np.sort(net.forward(X).numpy().reshape(len(X), -1), axis=1)
    margins = np.abs(outputs[:, 0] - _threshold(net)) if net.n_outputs == 1 else outputs[:, -1] - outputs[:, -2]
    order = sorted(range(len(X)), key=lambda row: (-margins[row], row) if far else (counts[predictions[row]], row))
    return X[order[:count]]


def _threshold(net: Network) -> float | None:
    """K = 1: near f's value at the centre of the box (both classes then occur; an odd multiple of
    2^-7, so that no flip needs a point where f equals it exactly), else None."""
    if net.n_outputs > 1:
        return None
    centre = float(net.forward(np.full((1, net.n_inputs), 0.5)).numpy().reshape(-1)[0])
    return (2 * round(centre * 64) + 1) / 128


def _problem(net: Network, x: np.ndarray, kind: str, domain: Domain) -> Problem:
    return Problem.make(net, x, kind, domain, _threshold(net))


CASES = [(1, True), (1, False), (3, False)]  # (K, monotone): a K = 3 argmax is never monotone


@pytest.mark.parametrize("traversal", TRAVERSALS)
@pytest.mark.parametrize(("classes", "monotone"), CASES)
@pytest.mark.parametrize("kind", ["contrastive", "abductive"])
def test_boolean_cube_answers_are_valid_and_subset_minimal(
    classes: int, monotone: bool, kind: str, traversal: str, oracle
) -> None:
    """Every vertex decided exactly: the answer is an explanation, dropping any one of its
    features breaks it, and it is no smaller than the minimum; no CXp exactly when brute force
    finds none. In every traversal."""
    n = 6
    domain = Domain.boolean(n)
    seen = set()
    for seed in range(3):
        net = _network(seed, n, classes, monotone)
        for x in _inputs(net, True, seed, far=kind == "contrastive"):
            problem = _problem(net, x, kind, domain)
            answer = deletion(problem, oracle, 30.0, traversal)
            assert answer.traversal == traversal
            minimum = vertex_minimum(problem)
            if minimum is None:
                assert answer.status == NONE_EXISTS and answer.features is None
                continue
            assert answer.status == SUBSET_MINIMAL, answer.note
            features = answer.features
            assert vertex_valid(problem, features)
            assert not any(vertex_valid(problem, tuple(f for f in features if f != i)) for i in features)
            assert len(features) >= minimum
            if kind == "contrastive":
                assert check_witness(problem, frozenset(features), answer.witness)[0] is True
            assert answer.queries == len([s for s in answer.steps if s.engine not in ("definition", ASKED_BEFORE)])
            seen.add(len(features))
    assert len(seen) >= 2, seen  # not every answer of one size


def _grid(problem: Problem, free: list[int], points: int = 5) -> np.ndarray:
    """x with the features of `free` on a grid of `points` values over their box sides [points^|free|, n]."""
    lower, upper = problem.domain.lower, problem.domain.upper
    axes = [np.linspace(lower[i], upper[i], points) for i in free]
    Y = np.tile(problem.x, (points ** len(free), 1))
    if free:
        Y[:, free] = np.array(list(itertools.product(*axes)))
    return Y


def _some_grid_point_flips(problem: Problem, free: list[int]) -> bool:
    predictions = problem.exact.predictions(_grid(problem, free), problem.threshold)
    return bool((predictions != problem.prediction).any())


def _highs_finds_flip(problem: Problem, free: list[int]) -> bool:
    """An independent engine (HiGHS's MILP, its witness replayed exactly): some y equal to x off
    `free` flips the prediction."""
    box = Domain(
        np.where(np.isin(np.arange(problem.n), free), problem.domain.lower, problem.x),
        np.where(np.isin(np.arange(problem.n), free), problem.domain.upper, problem.x),
    )
    outcome = solve_minimum(problem.net, problem.x, "contrastive", box, problem.threshold, solver="highs", time_limit=30)
    return outcome.status in (Status.OPTIMAL, Status.FEASIBLE) and outcome.replayed


@pytest.mark.parametrize(
    ("traversal", "radius"), [("sensitivity", None), ("index", 0.3), ("quickxplain", None), ("quickxplain", 0.3)]
)
@pytest.mark.parametrize(("classes", "monotone"), CASES)
@pytest.mark.parametrize("kind", ["contrastive", "abductive"])
def test_tiny_box_answers_agree_with_an_independent_search(
    classes: int, monotone: bool, kind: str, traversal: str, radius: float | None, oracle
) -> None:
    """On [0, 1]^4 (continuous; with `radius`, its ball around x) no grid point refutes the
    answer, and HiGHS (a MILP, witnesses replayed exactly) finds the flip that every kept
    feature needs: the AXp without it, the CXp itself; a CXp without any one of its features has
    no flipping grid point."""
    n = 4
    for seed in range(2):
        net = _network(10 + seed, n, classes, monotone)
        for x in _inputs(net, False, seed, count=2):
            domain = Domain.unit(n) if radius is None else Domain.unit(n).ball(x, radius)
            problem = _problem(net, x, kind, domain)
            answer = deletion(problem, oracle, 30.0, traversal)
            if answer.status == NONE_EXISTS:
                assert not _some_grid_point_flips(problem, list(range(n)))
                assert not _highs_finds_flip(problem, list(range(n)))
                continue
            assert answer.status == SUBSET_MINIMAL, answer.note
            features = list(answer.features)
            outside = [i for i in range(n) if i not in features]
            if kind == "abductive":
                assert not _some_grid_point_flips(problem, outside)
                assert all(_highs_finds_flip(problem, [*outside, i]) for i in features)
            else:
                assert check_witness(problem, frozenset(features), answer.witness)[0] is True
                assert not any(_some_grid_point_flips(problem, [f for f in features if f != i]) for i in features)


def test_the_order_is_least_sensitive_first_ties_by_index(oracle) -> None:
    """f = 3·x0 + x1 − 2·x2 + x3 at x = 1/2, t = 0 (p = 1): moving one feature to either end of
    [0, 1] lowers the margin by 1.5, 0.5, 1, 0.5 at worst, so the order is 1, 3 (a tie: lower
    index first), 2, 0."""
    net = Network([Layer(np.array([[3.0, 1.0, -2.0, 1.0]]), np.zeros(1), IDENTITY)])
    problem = Problem.make(net, np.full(4, 0.5), "abductive", Domain.unit(4), 0.0)
    answer = deletion(problem, oracle, 30.0)
    assert answer.order == (1, 3, 2, 0)
    # first every feature free at once (f reaches −3.5: "split"), then one by one
    assert [step.feature for step in answer.steps] == [None, 1, 3, 2, 0]
    assert answer.steps[0].block == (1, 3, 2, 0)
    # f(x) = 1.5; free 1 and 3: f ≥ 0.5 > 0, removed; with 2 too f reaches −0.5, with 0 −1: kept
    assert [step.verdict for step in answer.steps] == ["split", "removed", "removed", "kept", "kept"]
    assert answer.features == (0, 2)


@pytest.mark.parametrize(("classes", "kind"), [(1, "abductive"), (3, "abductive"), (3, "contrastive")])
def test_quickxplain_gives_the_sequential_answer_of_its_order(classes: int, kind: str, oracle) -> None:
    """A block leaves the set only when each of its features would have left it one by one (the
    properties are closed upwards), so quickxplain's answer is the sensitivity traversal's; the
    index traversal asks feature by feature in index order."""
    n = 8
    for seed in range(2):
        net = _network(20 + seed, n, classes, False)
        for x in _inputs(net, False, seed, count=2):
            problem = _problem(net, x, kind, Domain.unit(n).ball(x, 0.25))
            sequential = deletion(problem, oracle, 30.0, "sensitivity")
            blocks = deletion(problem, oracle, 30.0, "quickxplain")
            assert sequential.status == blocks.status == SUBSET_MINIMAL
            assert blocks.features == sequential.features and blocks.order == sequential.order
            assert blocks.traversal == "quickxplain" and sequential.traversal == "sensitivity"
            judged = [step for step in blocks.steps if step.block]
            assert judged[0].block == blocks.order  # the first block is the whole order
            assert all(step.verdict == "split" for step in judged if step.verdict not in ("removed", "kept"))
            if kind == "contrastive":
                assert check_witness(problem, frozenset(blocks.features), blocks.witness)[0] is True
            by_index = deletion(problem, oracle, 30.0, "index")
            assert by_index.order == tuple(range(n))
            singles = [step.feature for step in by_index.steps if len(step.block) == 1]
            assert singles == list(range(n))  # an AXp's first question, every feature, before them


def _sequential_reference(problem: Problem, order: tuple[int, ...]) -> tuple[int, ...] | None:
    """Deletion one feature at a time in `order` as it was before the first question asked every
    feature at once, each step decided by brute force over the cube's vertices (no code shared
    with `solvers.deletion`); None where no CXp exists."""
    n = problem.n
    if problem.kind == "contrastive" and not vertex_valid(problem, tuple(range(n))):
        return None
    kept = set(range(n))
    for i in order:
        if vertex_valid(problem, tuple(sorted(kept - {i}))):
            kept.remove(i)
    return tuple(sorted(kept))


@pytest.mark.parametrize(("classes", "monotone"), CASES)
@pytest.mark.parametrize("kind", ["contrastive", "abductive"])
def test_the_cheap_question_first_changes_no_answer(classes: int, monotone: bool, kind: str, oracle) -> None:
    """Every traversal's answer is the one-by-one deletion of its order decided by brute force
    (the answers before the first question "can every feature be freed?"); where that settles it
    (AXp ∅: p constant on the cube; no CXp) the answer comes in one question, the AXp ∅ with every
    feature removed and no witness, as the traversals gave it. Each network also comes with p
    made constant on the cube (float64 over its vertices, with a margin of 1): K = 1, the threshold
    below f's least value; K = 3, class 0's bias raised above every other class."""
    n, settled, traversed = 6, 0, 0
    domain = Domain.boolean(n)
    vertices = np.array(list(itertools.product([0.0, 1.0], repeat=n)))
    for seed in range(3):
        net = _network(30 + seed, n, classes, monotone)
        outputs = net.forward(vertices).numpy().reshape(len(vertices), -1)
        if classes == 1:
            variants = [(net, _threshold(net)), (net, math.floor(float(outputs.min())) - 1.0)]
        else:
            *hidden, last = net.layers
            bias = last.bias.copy()
            bias[0] += math.ceil(float((outputs[:, 1:].max(axis=1) - outputs[:, 0]).max())) + 1.0
            variants = [(net, None), (Network([*hidden, Layer(last.weight, bias, last.activation)]), None)]
        for net, threshold in variants:
            for x in _inputs(net, True, seed, far=True):
                problem = Problem.make(net, x, kind, domain, threshold)
                answers = {traversal: deletion(problem, oracle, 30.0, traversal) for traversal in TRAVERSALS}
                assert answers["index"].order == tuple(range(n))
                assert answers["quickxplain"].order == answers["sensitivity"].order
                for traversal, answer in answers.items():
                    reference = _sequential_reference(problem, answer.order)
                    assert answer.traversal == traversal
                    if reference is None:
                        assert (answer.status, answer.features, answer.witness) == (NONE_EXISTS, None, None)
                    else:
                        assert answer.status == SUBSET_MINIMAL, answer.note
                        assert answer.features == reference, traversal
                    assert answer.queries == len([s for s in answer.steps if s.engine not in ("definition", ASKED_BEFORE)])
                    if reference is None or (reference == () and kind == "abductive"):
                        assert answer.queries == 1 and len(answer.steps) == 1, traversal
                        settled += 1
                    else:
                        assert traversal == "quickxplain" or answer.queries <= n + 1
                        traversed += 1
                    if reference == () and kind == "abductive":
                        assert answer.witness is None and answer.removed == frozenset(range(n))
                        assert answer.steps[0].verdict == "removed" and answer.steps[0].block == answer.order
    assert settled > 0 and traversed > 0, (settled, traversed)


class _UndecidedFirst(SetOracle):
    """An oracle that leaves the question with every feature free undecided, as at a time limit."""

    def flip(self, problem: Problem, free: frozenset[int], time_limit: float) -> Flip:
        if len(free) == problem.n:
            return Flip(None, None, "exact-milp: timeout")
        return super().flip(problem, free, time_limit)


@pytest.mark.parametrize("traversal", ["index", "sensitivity"])
def test_an_undecided_first_question_leaves_the_axp_traversal_to_answer(traversal: str, oracle) -> None:
    """The AXp's first question (every feature free) undecided: the sequential traversal goes on
    and gives the answer it gives when that question is decided, in one more question at most
    (the last feature's question, which a decided first question answers, is asked)."""
    n = 6
    for seed in range(2):
        net = _network(seed, n, 3, False)
        for x in _inputs(net, True, seed):
            problem = _problem(net, x, "abductive", Domain.boolean(n))
            decided = deletion(problem, oracle, 30.0, traversal)
            with _UndecidedFirst() as undecided:
                answer = deletion(problem, undecided, 30.0, traversal)
            assert answer.status == SUBSET_MINIMAL and answer.features == decided.features
            assert answer.features == _sequential_reference(problem, answer.order)
            assert answer.steps[0].verdict == "undecided" and answer.steps[0].block == answer.order
            assert decided.queries <= answer.queries <= decided.queries + 1


def test_an_unknown_traversal_is_refused(oracle) -> None:
    problem = _problem(_network(0, 3, 1, True), np.full(3, 0.5), "abductive", Domain.unit(3))
    with pytest.raises(ValueError, match="unknown traversal 'fastest'"):
        deletion(problem, oracle, 30.0, "fastest")


def _ball(seed: int, n: int, classes: int, radii: list[float]) -> tuple[np.random.Generator, Problem]:
    """The AXp problem of a random non-monotone (6, 5) ReLU network with `classes` outputs at x
    uniform in [0, 1]^n, over the unit box's ball around x of one of `radii`; and the generator,
    going on from where they were drawn."""
    rng = np.random.default_rng(seed)
    net = random_network(rng, n, (6, 5), "relu", monotone=False, outputs=classes)
    x = rng.random(n)
    return rng, _problem(net, x, "abductive", Domain.unit(n).ball(x, float(rng.choice(radii))))


@pytest.mark.parametrize("classes", [1, 3])
def test_the_linear_bound_holds_at_every_grid_point(classes: int) -> None:
    """Where the exact linear-relaxation bound says a box keeps p(x), brute force (its own exact
    arithmetic) finds no grid point of the box that flips; and it proves boxes that exact
    interval arithmetic does not."""
    n, proved, beyond_intervals = 3, 0, 0
    for seed in range(40):
        _, problem = _ball(seed, n, classes, [0.05, 0.15, 0.3])
        net, box = problem.net, problem.domain
        if not linear_bound.box_keeps(problem, box.lower, box.upper):
            continue
        proved += 1
        beyond_intervals += not problem.exact.box_keeps(box.lower, box.upper, problem.prediction, problem.threshold)
        axes = [np.linspace(box.lower[i], box.upper[i], 7) for i in range(n)]
        grid = np.array(list(itertools.product(*axes)))
        assert (Reference(net).predictions(grid, problem.threshold) == problem.prediction).all(), seed
    assert proved >= 5 and beyond_intervals >= 1, (proved, beyond_intervals)


@pytest.mark.parametrize("classes", [1, 3])
def test_the_float_estimate_skips_only_what_the_exact_bound_cannot_prove(classes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The float estimate that lets `linear_bound.screen` skip its exact bound: on random ReLU
    networks and boxes (some features pinned, as deletion asks), the bound proves exactly the
    boxes it proves with the estimate never trusted, and the estimate does skip some."""
    n, proved, skipped = 6, 0, 0
    for seed in range(60):
        rng, problem = _ball(seed, n, classes, [0.02, 0.1, 0.3])
        pinned = rng.random(n) < 0.4
        x, box = problem.x, problem.domain
        lower, upper = np.where(pinned, x, box.lower), np.where(pinned, x, box.upper)
        keeps = linear_bound.box_keeps(problem, lower, upper)
        with monkeypatch.context() as never:
            never.setattr(linear_bound, "FLOAT_MARGIN", math.inf)
            assert linear_bound.box_keeps(problem, lower, upper) == keeps, seed
        proved += keeps
        skipped += linear_bound._float_estimate(problem, lower, upper)[0].min() < -linear_bound.FLOAT_MARGIN
    assert proved >= 5 and skipped >= 5, (proved, skipped)


def test_the_screens_change_no_answer(oracle) -> None:
    """The oracle's screens (the linear bound, its corners) answer what the engines alone answer,
    on every question of a deletion run; their answers name them."""
    net = _network(11, 6, 3, False)
    x = _inputs(net, False, 11, count=1)[0]
    problem = _problem(net, x, "abductive", Domain.unit(6).ball(x, 0.5))  # each screen decides some questions here
    engines = set()
    with SetOracle(screens=False) as plain:
        for size in range(1, 7):
            for free in itertools.combinations(range(6), size):
                screened, alone = oracle.flip(problem, frozenset(free), 30.0), plain.flip(problem, frozenset(free), 30.0)
                assert screened.answer is not None and screened.answer == alone.answer, free
                engines.add(screened.note)
                if screened.answer:
                    assert check_witness(problem, frozenset(free), screened.witness)[0] is True
                    assert pinned(problem, frozenset(free)).flips(np.array(screened.witness)) is True
    assert {"exact linear-relaxation bound over the box", "a corner of the linear bound (replayed exactly)"} <= engines, engines


def test_folding_the_pinned_features_keeps_the_first_layer_exactly() -> None:
    """`linear_bound._pinned_folded`: the first layer over the free features alone, its bias
    holding the pinned features' contribution, gives exactly W·y + b at points that keep the
    pinned features at their values (exact rationals)."""
    from fractions import Fraction

    rng = np.random.default_rng(3)
    net = _network(3, 7, 3, False)
    weights = linear_bound._weights(net)
    layer = net.layers[0]
    for _ in range(5):
        free = rng.random(7) < 0.5
        y = rng.random(7)
        (weight, bias), *_ = linear_bound._pinned_folded(weights, Dyadic.from_floats(y[~free]), free)
        folded = (weight @ Dyadic.from_floats(y[free]) + bias).fractions()
        whole = [
            sum(Fraction(w) * Fraction(v) for w, v in zip(row, y, strict=True)) + Fraction(b)
            for row, b in zip(layer.weight, layer.bias, strict=True)
        ]
        assert list(folded) == whole


def test_same_input_same_answer_and_rows_alone_as_in_a_batch(oracle) -> None:
    """Deterministic: a second run gives the same answer, steps and witness, whatever rows were
    asked before it on the same oracle; certify judges the run's answer."""
    net = _network(5, 5, 3, False)
    X = _inputs(net, False, 5, count=3)
    domain = Domain.unit(5)
    for kind in ("contrastive", "abductive"):
        runs = [deletion_answer(net, x, kind, domain, _threshold(net), oracle, 30.0) for x in X]
        for (run, answer), x in zip(runs, X, strict=True):
            again = deletion(_problem(net, x, kind, domain), oracle, 30.0)
            assert run == again
            assert answer.features == run.features and answer.method == "deletion" and answer.traversal == "sensitivity"


class _Undecided(SetOracle):
    """An oracle whose `after`-th question (from 0) comes back undecided, as at a time limit."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after, self.asked = after, 0

    def flip(self, problem: Problem, free: frozenset[int], time_limit: float) -> Flip:
        self.asked += 1
        if self.asked > self.after:
            return Flip(None, None, "z3: timeout")
        return super().flip(problem, free, time_limit)


@pytest.mark.parametrize("kind", ["contrastive", "abductive"])
@pytest.mark.parametrize("after", [0, 2])
def test_an_undecided_step_gives_no_answer(kind: str, after: int) -> None:
    net = _network(2, 5, 3, False)
    x = _inputs(net, False, 2, count=1)[0]
    problem = _problem(net, x, kind, Domain.unit(5))
    with _Undecided(after) as undecided:
        answer = deletion(problem, undecided, 30.0)
    assert answer.status == UNKNOWN
    assert answer.features is None and answer.witness is None
    # an AXp's first question (every feature free) undecided: the traversal goes on to the next
    first_goes_on = kind == "abductive" and after == 0
    assert answer.steps[-1].verdict == "undecided" and len(answer.steps) == after + 1 + first_goes_on
    assert "undecided (z3: timeout)" in answer.note


def test_the_features_an_undecided_axp_run_did_not_remove_form_an_axp() -> None:
    """A run stopped undecided after k questions still proved its removals: on Boolean cubes the
    features it did not remove form an AXp (brute force over the vertices)."""
    n, checked = 6, 0
    for seed in range(3):
        net = _network(seed, n, 3, False)
        for x in _inputs(net, True, seed):
            problem = _problem(net, x, "abductive", Domain.boolean(n))
            for after in (2, 4):
                with _Undecided(after) as undecided:
                    answer = deletion(problem, undecided, 30.0)
                assert answer.status == UNKNOWN and answer.features is None
                assert vertex_valid(problem, tuple(sorted(set(range(n)) - answer.removed)))
                checked += bool(answer.removed)
    assert checked > 0  # some run removed a feature before it stopped


def test_a_network_no_engine_decides_gives_no_answer() -> None:
    """A non-monotone sigmoid network: z3 cannot encode it, so the first question is undecided."""
    rng = np.random.default_rng(0)
    net = random_network(rng, 4, (4,), "sigmoid", monotone=False)
    x = np.full(4, 0.5)
    with SetOracle() as oracle:
        answer = deletion(_problem(net, x, "abductive", Domain.unit(4)), oracle, 5.0)
    assert answer.status == UNKNOWN and answer.features is None
    assert "no exact engine" in answer.note or "z3" in answer.note


def test_certify_judges_deletion_against_the_minimum() -> None:
    """certify --method deletion: the same comparison as greedy's, with the deletion verdicts;
    on the cube the verdict agrees with brute force."""
    net = _network(1, 5, 3, False)
    X = _inputs(net, True, 1, count=3)
    domain = Domain.boolean(5)
    for kind in ("contrastive", "abductive"):
        for x, certificate in zip(X, certify(net, X, kind, domain, solvers=("enumerate",), plan=Plan(method="deletion")), strict=True):
            minimum = vertex_minimum(_problem(net, x, kind, domain))
            assert certificate.method == "deletion"
            if minimum is None:
                assert certificate.verdict == Verdict.NONE_EXISTS
                continue
            size = certificate.greedy.size
            expected = Verdict.DELETION_MINIMAL if size == minimum else Verdict.DELETION_SUBOPTIMAL
            assert certificate.verdict == expected and certificate.certified
            assert certificate.to_json()["method"] == "deletion"


def test_explain_defaults_to_deletion_off_monotone_networks(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    net = _network(3, 4, 3, False)
    network, inputs = tmp_path / "net.json", tmp_path / "x.csv"
    network.write_text(json.dumps(net.to_json()))
    X = _inputs(net, False, 3, count=2)
    np.savetxt(inputs, X, delimiter=",")
    assert main(["explain", str(network), "--inputs", str(inputs)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(line["row"], line["kind"], line["method"]) for line in lines] == [
        (0, "contrastive", "deletion"), (0, "abductive", "deletion"), (1, "contrastive", "deletion"), (1, "abductive", "deletion"),
    ]  # fmt: skip
    for line in lines:
        problem = _problem(net, X[line["row"]], line["kind"], Domain.unit(4))
        assert line["check"] == "exact" and line["prediction"] == problem.prediction
        assert isinstance(line["output"], list) and len(line["output"]) == 3
        if line["kind"] == "contrastive" and line["exists"]:
            assert check_witness(problem, frozenset(line["features"]), tuple(line["witness"]))[0] is True


def test_explain_method_deletion_on_a_monotone_network(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Greedy stays the default there; --method deletion answers by the monotone shortcut, each
    answer valid and subset-minimal by the shortcut's exact check."""
    net = _network(4, 4, 1, True)
    network, inputs = tmp_path / "net.json", tmp_path / "x.csv"
    network.write_text(json.dumps(net.to_json()))
    X = _inputs(net, False, 4, count=3)
    np.savetxt(inputs, X, delimiter=",")
    common = ["explain", str(network), "--inputs", str(inputs), "--threshold", str(_threshold(net))]
    assert main([*common, "--method", "deletion"]) == 0
    deleted = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(common) == 0
    greedy = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {line["method"] for line in deleted} == {"deletion"} and {line["method"] for line in greedy} == {"greedy"}
    for line in deleted:
        problem = _problem(net, X[line["row"]], line["kind"], Domain.unit(4))
        assert line["check"] == "exact" and line["exists"] and isinstance(line["output"], float)
        features = line["features"]
        assert problem.is_explanation(features) is True
        assert not any(problem.is_explanation([f for f in features if f != i]) for i in features)


def test_explain_traversal_is_recorded(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """explain --traversal: each line names it; quickxplain's answers are the default's (the
    same order); index's are valid and subset-minimal on the cube; a bad name is one line, exit 2."""
    net = _network(9, 5, 3, False)
    network, inputs = tmp_path / "net.json", tmp_path / "x.csv"
    network.write_text(json.dumps(net.to_json()))
    X = _inputs(net, True, 9, count=2)
    np.savetxt(inputs, X, delimiter=",")
    common = ["explain", str(network), "--inputs", str(inputs), "--binary"]
    runs = {}
    for traversal in TRAVERSALS:
        assert main([*common, "--traversal", traversal]) == 0
        runs[traversal] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert {line["traversal"] for line in runs[traversal]} == {traversal}
    assert [line["features"] for line in runs["quickxplain"]] == [line["features"] for line in runs["sensitivity"]]
    for line in runs["index"]:
        problem = _problem(net, X[line["row"]], line["kind"], Domain.boolean(5))
        features = tuple(line["features"])
        assert line["check"] == "exact" and vertex_valid(problem, features)
        assert not any(vertex_valid(problem, tuple(f for f in features if f != i)) for i in features)
    assert main([*common, "--traversal", "fastest"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert "argument --traversal: invalid choice: 'fastest'" in captured.err


def test_the_api_takes_a_traversal_to_the_record(oracle) -> None:
    """cardinal.explain and cardinal.Explainer take traversal= as explain --traversal does: the
    answer is that traversal's deletion answer and its record names it, with prove or without; a
    bad name is one InputError."""
    import cardinal

    net = _network(9, 5, 3, False)
    x = _inputs(net, False, 9, count=1)[0]
    problem = _problem(net, x, "abductive", Domain.unit(5))
    expected = {t: deletion(problem, oracle, 30.0, t).features for t in TRAVERSALS}
    for traversal in ("index", "quickxplain"):
        answer = cardinal.explain(net, x, "abductive", method="deletion", traversal=traversal, prove=False)
        assert answer.features == expected[traversal] and answer.to_dict()["traversal"] == traversal
    with cardinal.Explainer(net) as explainer:
        proved = explainer.explain(x, "abductive", method="deletion", traversal="index")
        assert proved.to_dict()["traversal"] == "index" and proved.proved
        assert proved.upper is not None and proved.upper <= len(expected["index"])
        with pytest.raises(cardinal.InputError, match="traversal 'fastest': choose one of index, sensitivity, quickxplain"):
            explainer.explain(x, "abductive", method="deletion", traversal="fastest")


@pytest.mark.parametrize("command", ["certify", "crosscheck"])
def test_a_bad_method_is_one_line_exit_2(command: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    network, inputs = tmp_path / "net.json", tmp_path / "x.csv"
    network.write_text(json.dumps(_network(0, 3, 1, True).to_json()))
    inputs.write_text("0.5,0.5,0.5\n")
    args = [str(network), "--inputs", str(inputs)] if command == "certify" else ["--out", str(tmp_path / "run")]
    assert main([command, *args, "--method", "fastest"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert "argument --method: invalid choice: 'fastest'" in captured.err
    assert not (tmp_path / "run").exists()


def test_a_deletion_answer_is_a_frozen_record() -> None:
    with pytest.raises(AttributeError):
        Deletion("abductive", 0, SUBSET_MINIMAL, (), None, (), (), 0).features = (1,)  # type: ignore[misc]


def test_a_deletion_campaign_names_its_method(tmp_path: Path) -> None:
    """crosscheck --method deletion: every record names the method and judges deletion's answer
    (its own verdicts), on a monotone and a K = 3 network alike, the same with 1 worker or 2;
    the records read back; the greedy campaign's records say "method": "greedy"."""
    from cardinal.verify.campaign import CampaignSettings, run_campaign
    from cardinal.verify.instance import Instance
    from cardinal.verify.record import read_records, without_timings

    from cardinal.io import JsonLines

    monotone, classifier = _network(6, 4, 1, True), _network(7, 4, 3, False)
    instances = [
        Instance("monotone", "random", monotone, _inputs(monotone, True, 6, count=2), _threshold(monotone), Domain.boolean(4)),
        Instance("classes", "random", classifier, _inputs(classifier, True, 7, count=2), None, Domain.boolean(4)),
    ]
    one, two = tmp_path / "one", tmp_path / "two"
    run_campaign("tiny", one, CampaignSettings(("enumerate",), 30.0, methods=("deletion",)), instances=instances)
    run_campaign("tiny", two, CampaignSettings(("enumerate",), 30.0, workers=2, methods=("deletion",)), instances=instances)
    records = read_records(one / "records.jsonl")
    assert len(records) == 8 and {r.method for r in records} == {"deletion"}
    deletion_verdicts = {Verdict.DELETION_MINIMAL, Verdict.DELETION_SUBOPTIMAL, Verdict.NONE_EXISTS}
    assert all(r.verdict in deletion_verdicts and r.certified for r in records)
    documents = JsonLines(one / "records.jsonl").read()
    assert {document["method"] for document in documents} == {"deletion"}
    assert without_timings(documents) == without_timings(JsonLines(two / "records.jsonl").read())
    run_campaign("tiny", tmp_path / "greedy", CampaignSettings(("enumerate",), 30.0), instances=instances)
    greedy = JsonLines(tmp_path / "greedy" / "records.jsonl").read()
    assert {(d["instance"], d["method"]) for d in greedy} == {("monotone", "greedy"), ("classes", None)}


def test_check_refuses_a_line_deletion_left_undecided(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """An undecided deletion line ("exists": null, "features": null) claims nothing: check must
    not read it as "no explanation exists"."""
    network, inputs, claims = tmp_path / "net.json", tmp_path / "x.csv", tmp_path / "e.jsonl"
    network.write_text(json.dumps(_network(0, 3, 3, False).to_json()))
    inputs.write_text("0.5,0.5,0.5\n")
    claims.write_text('{"row": 0, "kind": "abductive", "features": null, "exists": null, "method": "deletion"}\n')
    assert main(["check", str(network), "--inputs", str(inputs), "--explanations", str(claims)]) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1 and "e.jsonl: line 1: 'exists' is null" in error

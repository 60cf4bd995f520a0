"""Monotonicity per feature (issue 27): sign analysis, and every engine on sign-monotone and
partially monotone networks against brute force over the vertices of the box.

The reference (`_vertex_reference`) uses no direction: a CXp S is valid iff some vertex of the
sub-box (y_i ∈ {l_i, u_i} on S, x_i elsewhere) flips the prediction, an AXp iff no vertex with S
kept at x does. On a Boolean cube that is the definition; on a real box it is exact for networks
monotone in every feature (each coordinate can be pushed to an end without undoing a flip),
which `test_sign_analysis_is_sound` checks for the directions the analysis claims.
"""

from __future__ import annotations

import itertools
import json
from fractions import Fraction

import numpy as np
import pytest
from cardinal.solvers.base import available_solvers, get_solver, solve_problem
from cardinal.solvers.subsets import SubsetBounds
from cardinal.verify.cli import main

from cardinal.activations import Activation
from cardinal.algorithm1 import explain_exactly
from cardinal.domain import Domain
from cardinal.errors import InputError
from cardinal.exact import ExactNetwork
from cardinal.greedy import explain, explain_reference
from cardinal.network import Layer, Network
from cardinal.problem import Problem, Status
from cardinal.signs import DECREASING, INCREASING, MIXED

# The limit of a call whose answer a test asserts: none that a run here comes near, so that no
# answer depends on the machine's speed (a limit of seconds ended calls undecided on a loaded machine).
UNBOUNDED = 3600.0

RELU, IDENTITY = Activation.make("relu"), Activation.make("identity")
INSTALLED = available_solvers()


def _net(*layers: tuple[list, list, Activation]) -> Network:
    return Network([Layer(np.array(w, dtype=float), np.array(b, dtype=float), a) for w, b, a in layers])


# ---------------------------------------------------------------------------- the analysis
def test_negative_weights_that_compose_to_plus_are_sign_monotone_not_monotone() -> None:
    """Feature 0: −1 then −1 (+); feature 1: +1 then +1 (+); feature 2: −1 directly (−); feature 3 unused (0)."""
    net = _net(([[-1, 0, 0, 0], [0, 1, 0, 0]], [1, 0], RELU), ([[-1, 1]], [0], IDENTITY))
    assert net.directions.tolist() == [1, 1, 0, 0]
    net = _net(([[-1, 0, 0, 0], [0, 1, -1, 0]], [1, 0], RELU), ([[-1, 1]], [0], IDENTITY))
    assert net.directions.tolist() == [INCREASING, INCREASING, DECREASING, 0]
    assert net.is_sign_monotone and not net.is_monotone and not net.is_partially_monotone
    assert net.has_monotone_shortcut and net.sign_monotonicity_problem() == ""


def test_mixed_partial_and_k_outputs() -> None:
    partial = _net(([[1, 1, 0], [1, 0, 1]], [0, 0], RELU), ([[1, -1]], [0], IDENTITY))
    assert partial.directions.tolist() == [MIXED, INCREASING, DECREASING]
    assert partial.is_partially_monotone and not partial.is_sign_monotone
    assert partial.sign_monotonicity_problem().startswith("feature 0 has mixed sign")
    two = _net(([[1, 0], [0, 1]], [0, 0], RELU), ([[-1, 1], [1, 0]], [0, 0], IDENTITY))
    # f_0 = −z_0 + z_1, f_1 = z_0: f_1 − f_0 = 2 z_0 − z_1
    assert two.output_directions.tolist() == [[DECREASING, INCREASING], [INCREASING, 0]]
    assert two.directions.tolist() == [INCREASING, DECREASING] and two.is_sign_monotone and not two.has_monotone_shortcut
    three = _net(([[1, 0]], [0], RELU), ([[1], [2], [-1]], [0, 0, 0], IDENTITY))
    assert three.directions is None and not three.is_sign_monotone and not three.is_partially_monotone
    assert "3 outputs" in three.sign_monotonicity_problem()


def test_logit_difference_predicts_the_argmax_exactly() -> None:
    rng = np.random.default_rng(3)
    net = Network(
        [Layer(rng.normal(size=(4, 3)), rng.normal(size=4), RELU), Layer(rng.normal(size=(2, 4)), np.zeros(2), IDENTITY)]
    )
    X = np.vstack([rng.random((200, 3)), np.zeros((1, 3))])  # at 0 both outputs tie (bias 0, relu(b) feeds both)
    difference = net.logit_difference()
    assert difference.n_outputs == 1 and difference.depth == net.depth + 1
    assert ExactNetwork(difference).predictions(X, 0.0).tolist() == ExactNetwork(net).predictions(X, None).tolist()


def _random_signed(rng: np.random.Generator, n: int, widths: tuple[int, ...], directions: np.ndarray) -> Network:
    """A sign-monotone ReLU network with the given directions [n] and negative hidden weights: a
    monotone network whose first-layer columns are negated for decreasing features and zeroed for
    constant ones, then units whose incoming row and outgoing column are both negated (so paths
    through them keep their sign, though the function changes)."""
    layers, fan_in = [], n
    for width in (*widths, 1):
        weight = np.round(np.abs(rng.normal(size=(width, fan_in))) * 8) / 8 + 0.125
        layers.append([weight, np.round(rng.normal(size=width) * 4) / 8, RELU if width != 1 else IDENTITY])
        fan_in = width
    layers[0][0] = layers[0][0] * np.where(directions == 0, 0, directions)[None, :]
    for depth in range(len(widths)):
        flipped = rng.random(widths[depth]) < 0.5
        layers[depth][0][flipped] *= -1
        layers[depth][1][flipped] *= -1
        layers[depth + 1][0][:, flipped] *= -1
    return Network([Layer(w, b, a) for w, b, a in layers])


def test_sign_analysis_is_sound() -> None:
    """For random signed networks: f moves with every feature as its direction says, exactly."""
    rng = np.random.default_rng(11)
    for _ in range(20):
        n = 4
        net = Network(
            [
                Layer(np.round(rng.normal(size=(3, n)) * 4) / 4 * (rng.random((3, n)) < 0.6), rng.normal(size=3), RELU),
                Layer(np.round(rng.normal(size=(1, 3)) * 4) / 4, np.zeros(1), IDENTITY),
            ]
        )
        exact = ExactNetwork(net)
        Y = rng.random((30, n))
        for i, direction in enumerate(net.directions):
            if direction == MIXED:
                continue
            up = Y.copy()
            up[:, i] = np.minimum(1.0, Y[:, i] + rng.random(30))
            before, after = (exact.scores(Z) for Z in (Y, up))
            for b, a in zip(before, after, strict=True):
                change = a.enclosure.lower - b.enclosure.lower
                assert change >= 0 if direction == INCREASING else change <= 0 if direction == DECREASING else change == 0


# ---------------------------------------------------------------------------- brute force
def _vertex_reference(problem: Problem) -> dict[tuple[int, ...], bool]:
    """Every subset S → whether it is an explanation of the problem's kind, from the exact
    predictions at every vertex of the sub-boxes (module docstring)."""
    n, x = problem.n, problem.x
    lower, upper = problem.domain.lower, problem.domain.upper
    corners = np.array(list(itertools.product((0, 1), repeat=n)), dtype=bool)
    vertices = np.where(corners, upper, lower)
    valid = {}
    for size in range(n + 1):
        for S in itertools.combinations(range(n), size):
            free = np.isin(np.arange(n), S) if problem.kind == "contrastive" else ~np.isin(np.arange(n), S)
            points = np.unique(np.where(free[None, :], vertices, x[None, :]), axis=0)
            predictions = problem.exact.predictions(points, problem.threshold)
            flips = bool((predictions != problem.prediction).any())
            valid[S] = flips if problem.kind == "contrastive" else not flips
    return valid


def _minimum(valid: dict[tuple[int, ...], bool]) -> int | None:
    sizes = [len(S) for S, ok in valid.items() if ok]
    return min(sizes) if sizes else None


def _problems(rng: np.random.Generator, directions: np.ndarray, binary: bool, count: int, net_maker=None):
    """Problems on random networks with these directions, both kinds, both predictions."""
    n = len(directions)
    made = 0
    while made < count:
        net = net_maker(rng) if net_maker else _random_signed(rng, n, (3,), directions)
        if binary:
            domain, x = Domain.boolean(n), (rng.random(n) < 0.5).astype(float)
        else:
            lower = np.round(rng.random(n) * 4) / 8 - 0.25
            domain = Domain(lower, lower + 0.25 + np.round(rng.random(n) * 4) / 8)
            x = domain.lower + (domain.upper - domain.lower) * np.round(rng.random(n) * 8) / 8
        threshold = float(np.median(net.forward(domain.lower + (domain.upper - domain.lower) * rng.random((16, n))).numpy()))
        for kind in ("contrastive", "abductive"):
            problem = Problem.make(net, x, kind, domain, threshold)
            yield problem
        made += 1


def _check_engines(problem: Problem, valid: dict[tuple[int, ...], bool], where: str) -> None:
    """Every installed backend, and z3's full encoding besides its lazy loop (on a sign-monotone
    network with negative weights it keeps exact units: one-sided ones need weights ≥ 0)."""
    expected = _minimum(valid)
    engines = [(name, {}) for name in INSTALLED] + ([("z3", {"strategy": "encode"})] if "z3" in INSTALLED else [])
    for name, options in engines:
        with get_solver(name, **options) as backend:
            outcome = solve_problem(backend, problem, None, UNBOUNDED)
        if outcome.status == Status.UNSUPPORTED:
            refusals = {  # what each backend declines, and says so
                "enumerate": not problem.monotone and not problem.domain.binary,  # a continuous box of a general network
                "marabou": not problem.monotone and problem.domain.binary,  # no discrete inputs
            }
            assert refusals.get(name, False), f"{name} {where}: {outcome}"
            continue
        assert outcome.status in (Status.OPTIMAL, Status.NONE_EXISTS), f"{name} {where}: {outcome}"
        size = outcome.size if outcome.status == Status.OPTIMAL else None
        assert size == expected, f"{name} {where}: {outcome}, brute force {expected}"
        if size is not None:
            assert valid[outcome.features], f"{name} {where}: {outcome.features} is no explanation"


@pytest.mark.parametrize("binary", [True, False], ids=["cube", "box"])
def test_sign_monotone_engines_and_greedy_match_brute_force(binary: bool) -> None:
    if not INSTALLED:
        pytest.skip("no backend installed")
    rng = np.random.default_rng(27 + binary)
    directions = np.array([INCREASING, DECREASING, INCREASING, DECREASING, 0])
    seen = set()
    for number, problem in enumerate(_problems(rng, directions, binary, 6)):
        assert problem.monotone and problem.net.is_sign_monotone
        assert problem.net.directions.tolist() == directions.tolist()
        where = f"problem {number} ({problem.kind}, p(x) = {problem.prediction}, binary={binary})"
        valid = _vertex_reference(problem)
        _check_engines(problem, valid, where)
        # the counterpoint: each feature at the end that moves f against p(x)
        low_end = (directions != DECREASING) == (problem.prediction == 1)
        assert problem.counterpoint.tolist() == np.where(low_end, problem.domain.lower, problem.domain.upper).tolist()
        # greedy (batched, exactly re-checked as certify replays it) and Algorithm 1 in exact arithmetic
        result = explain(problem.net, problem.x, problem.kind, problem.domain, problem.threshold, device="cpu", verify=True)
        reference = explain_reference(problem.net, problem.x, problem.kind, problem.domain, problem.threshold, exact=True)
        assert result.checks == ("exact",) and result.features(0) == reference.features(0), where
        (alone,) = explain_exactly(problem.net, problem.x, problem.kind, problem.domain, problem.threshold)
        assert (alone.features, alone.witness) == (result.features(0), result.witness(0, problem.x, problem.domain)), where
        greedy = result.features(0)
        assert (greedy is None) == (_minimum(valid) is None), where
        if greedy is not None:
            assert valid[greedy], f"{where}: greedy {greedy} is no explanation"
            witness = result.witness(0, problem.x, problem.domain)
            if witness is not None:
                assert problem.flips(np.array(witness)), where
        seen.add((problem.kind, problem.prediction))
    assert len(seen) == 4, seen  # both kinds, both prediction values


def test_partially_monotone_engines_match_brute_force_and_greedy_refuses() -> None:
    """Feature 0 reaches f with both signs, the others with one: exact answers on the Boolean cube
    and on a tiny box, and greedy refused naming feature 0."""
    if not INSTALLED:
        pytest.skip("no backend installed")

    def maker(rng: np.random.Generator) -> Network:
        net = _random_signed(rng, 4, (3,), np.array([INCREASING, DECREASING, INCREASING, 0]))
        first = net.layers[0].weight.copy()
        first[:, 0] = np.abs(first[:, 0]) * np.array([1, -1, 1])  # units of both signs read feature 0
        second = net.layers[1].weight.copy()
        second[0] = np.abs(second[0])  # ... and feed f positively
        first[:, 1:] = np.abs(first[:, 1:]) * np.array([-1, 1, 0])  # the others keep one sign each
        return Network([Layer(first, net.layers[0].bias, RELU), Layer(second, net.layers[1].bias, IDENTITY)])

    rng = np.random.default_rng(5)
    seen = set()
    for binary in (True, False):
        for number, problem in enumerate(_problems(rng, np.zeros(4), binary, 4, maker)):
            net = problem.net
            assert net.is_partially_monotone and net.directions[0] == MIXED and not problem.monotone
            where = f"problem {number} ({problem.kind}, p(x) = {problem.prediction}, binary={binary})"
            if binary:
                _check_engines(problem, _vertex_reference(problem), where)
            else:  # a mixed feature is continuous: the reference is z3 on the same function, every feature mixed
                masked = Problem.make(_masked(net), problem.x, problem.kind, problem.domain, problem.threshold)
                assert not masked.known.any() and problem.known.tolist() == [False, True, True, True]
                with get_solver("z3") as backend:
                    reference = solve_problem(backend, masked, None, UNBOUNDED)
                assert reference.status in (Status.OPTIMAL, Status.NONE_EXISTS), reference
                for name in [name for name in INSTALLED if name != "enumerate"]:
                    with get_solver(name) as backend:
                        outcome = solve_problem(backend, problem, None, UNBOUNDED)
                    assert outcome.status == reference.status, f"{name} {where}: {outcome} vs {reference}"
                    if reference.status == Status.OPTIMAL:
                        assert outcome.size == reference.size and outcome.replayed, f"{name} {where}: {outcome} vs {reference}"
            seen.add((problem.kind, problem.prediction))
    assert len(seen) == 4, seen
    with pytest.raises(InputError, match=r"sign-monotone.*feature 0 has mixed sign"):
        explain(net, np.zeros(4))


def _masked(net: Network) -> Network:
    """The same function exactly, with every feature mixed: two copies of a hidden unit reading
    every feature with weight 1, added to f with weights +1 and −1 (they cancel exactly)."""
    hidden, out = net.layers
    n = net.n_inputs
    first = Layer(np.vstack([hidden.weight, np.ones((2, n))]), np.concatenate([hidden.bias, [0.0, 0.0]]), RELU)
    second = Layer(np.hstack([out.weight, [[1.0, -1.0]]]), out.bias, IDENTITY)
    return Network([first, second])


def test_k2_greedy_through_the_logit_difference() -> None:
    """A K = 2 network whose logit difference is sign-monotone (f_0 reads the hidden units with
    negative weights): greedy's answers equal those on `logit_difference()` and are explanations
    of the argmax problem by brute force."""
    rng = np.random.default_rng(8)
    directions = np.array([INCREASING, DECREASING, INCREASING, DECREASING])
    for _ in range(4):
        base = _random_signed(rng, 4, (3,), directions)
        hidden, out = base.layers
        top = Layer(
            np.vstack([-np.abs(rng.normal(size=(1, 3))) * np.sign(out.weight), out.weight]), np.array([0.25, 0.0]), IDENTITY
        )
        net = Network([hidden, top])
        assert net.n_outputs == 2 and net.is_sign_monotone and net.directions.tolist() == directions.tolist()
        domain = Domain.unit(4)
        X = np.round(rng.random((6, 4)) * 8) / 8
        for kind in ("contrastive", "abductive"):
            result = explain(net, X, kind, domain, device="cpu", verify=True)
            plain = explain(net.logit_difference(), X, kind, domain, threshold=0.0, device="cpu")
            alone = explain_exactly(net, X, kind, domain)
            for row, x in enumerate(X):
                assert result.features(row) == plain.features(row) == alone[row].features
                assert int(result.predictions[row]) == alone[row].prediction
                problem = Problem.make(net, x, kind, domain)
                assert int(result.predictions[row]) == problem.prediction
                if result.features(row) is not None:
                    assert _vertex_reference(problem)[result.features(row)]
    with pytest.raises(InputError, match="applies to networks with one output"):
        explain(net, X, threshold=0.5)


def test_exact_arithmetic_decides_a_decreasing_feature_at_its_own_end() -> None:
    """f = 1 − y_0 on [0, 1] with threshold 1/2 (exact rationals): x_0 = 1/4 predicts 1; the CXp
    {0} moves y_0 to the upper end, where f = 0."""
    net = _net(([[-1.0]], [1.0], IDENTITY))
    problem = Problem.make(net, np.array([0.25]), "contrastive", Domain.unit(1), 0.5)
    assert problem.prediction == 1 and problem.counterpoint.tolist() == [1.0]
    assert problem.is_explanation((0,)) and Fraction(problem.threshold) == Fraction(1, 2)
    assert explain(net, np.array([0.25]), threshold=0.5, device="cpu").features(0) == (0,)


# ---------------------------------------------------------------------------- reporting
def _save(tmp_path, layers: list, metadata: dict | None = None, name: str = "net.json") -> str:
    document = {
        "format": "cardinal.network/1",
        "layers": [{"weight": w, "bias": b, "activation": a} for w, b, a in layers],
        **({"metadata": metadata} if metadata else {}),
    }
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


SIGNED = [([[-1, 0, 0], [0, 1, -1]], [1, 0], "relu"), ([[-1, 1]], [0], "identity")]  # + + -


def test_explain_lines_carry_the_directions_and_a_witness_at_each_features_end(tmp_path, capsys) -> None:
    net = _save(tmp_path, SIGNED, {"feature_names": ["a", "b", "c"], "threshold": 0.1})
    (tmp_path / "in.csv").write_text("0.5,0.5,0.5\n")
    assert main(["explain", net, "--inputs", str(tmp_path / "in.csv"), "--kind", "contrastive"]) == 0
    line = json.loads(capsys.readouterr().out)
    assert line["directions"] == {"+": 2, "-": 1, "0": 0, "mixed": 0, "each": "++-"}
    # p(x) = 0 (f = -0.5): the increasing features go up, the decreasing one down
    assert line["prediction"] == 0 and line["features"] == [0, 1] and line["witness"] == [1.0, 1.0, 0.5]


def test_info_text_and_json(tmp_path, capsys) -> None:
    net = _save(tmp_path, SIGNED, {"feature_names": ["a", "b", "c"], "threshold": 0.1})
    assert main(["info", net]) == 0
    out = capsys.readouterr().out
    assert "inputs: 3" in out and "class 1 iff f(x) > t (t = 0.1)" in out and "layers: 2: 3 → 2 relu → 1 identity" in out
    assert "parameters: 11" in out and "monotone (all weights ≥ 0): no; sign-monotone: yes; partially monotone: no" in out
    assert "non-increasing (-): 2 c" in out and "dropped: nothing" in out
    assert main(["info", net, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["directions"]["each"] == "++-" and document["sign_monotone"] and not document["monotone"]
    assert document["parameters"] == 11 and document["outputs"] == 1 and document["threshold"] == 0.1
    partial = _save(tmp_path, [([[1, 1, 0], [1, 0, 1]], [0, 0], "relu"), ([[1, -1]], [0], "identity")], name="partial.json")
    assert main(["info", partial, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["partially_monotone"] and document["directions"]["each"] == "?+-"
    three = _save(
        tmp_path,
        [([[1, 0]], [0], "relu"), ([[1], [2], [-1]], [0, 0, 0], "identity")],
        {"class_names": ["x", "y", "z"]},
        "k3.json",
    )
    assert main(["info", three]) == 0
    out = capsys.readouterr().out
    assert "outputs: 3 classes by argmax, ties to the lowest index: x, y, z" in out
    assert "output 2: -0" in out and "sign-monotone: no" in out


@pytest.mark.parametrize(("content", "message"), [(None, "not found"), ("{", "malformed JSON")])
def test_info_bad_input_one_line_exit_2(tmp_path, capsys, content: str | None, message: str) -> None:
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    assert main(["info", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1 and message in captured.err


def test_node_bounds_need_every_weight_non_negative() -> None:
    """The branch and bound's node bounds (`SubsetBounds`: chords and tangents substituted back
    through the weights) hold only when every weight is ≥ 0: on sign-monotone networks with
    negative hidden weights they are off, and forced on they undercut some g(s)."""
    rng = np.random.default_rng(0)
    masks = np.array(list(itertools.product((0, 1), repeat=5)), dtype=bool)
    undercut = 0
    for _ in range(40):
        net = _random_signed(rng, 5, (4, 3), np.array([INCREASING, DECREASING, INCREASING, DECREASING, INCREASING]))
        x = rng.random(5)
        target = Domain.unit(5).counterpoint(np.array([1]), net.directions)[0]
        bounds = SubsetBounds(net, x, target, 0.0)
        assert bounds.supported == net.is_monotone
        bounds.supported = True
        value, radius, _ = bounds.bound_and_form(5, np.ones((1, 5), dtype=bool))
        undercut += bool(net.forward(np.where(masks, target, x)).numpy().max() > value[0] + radius[0])
    assert undercut > 0

"""Networks with K ≥ 2 outputs (issue 27): the argmax rule with ties to the lowest index, exactly,
through every layer — the rule itself, the bounded float pass, every exact backend against brute
force, the witnesses, and the commands' records."""

from __future__ import annotations

import importlib
import json
from fractions import Fraction
from pathlib import Path

import gurobipy  # noqa: F401 (the [all] extras promise it: missing fails, not skips)
import highspy  # noqa: F401
import numpy as np
import pytest
import torch
import z3  # noqa: F401
from cardinal.solvers.base import available_solvers, get_solver, solve_minimum, solve_problem
from cardinal.solvers.encode import encode
from cardinal.solvers.oracle import check_witness
from cardinal.verify.cli import main
from cardinal.verify.generate import random_network

from cardinal.activations import Activation
from cardinal.bounds import BoundedForward
from cardinal.domain import Domain
from cardinal.errors import InputError
from cardinal.exact import ExactNetwork
from cardinal.greedy import explain
from cardinal.network import Layer, Network
from cardinal.prediction import decide
from cardinal.problem import Problem, Status
from tests.bruteforce import vertex_minimum, vertex_valid

INSTALLED = available_solvers()
# the limit of a call whose answer a test asserts: none that a run here comes near, so that no answer
# depends on the machine's speed
UNBOUNDED = 3600.0
IDENTITY = Activation.make("identity")


def _classifier(seed: int, n: int, hidden: tuple[int, ...], classes: int = 3, signed: bool = True) -> Network:
    rng = np.random.default_rng(seed)
    return random_network(rng, n, hidden, "relu", monotone=not signed, outputs=classes)


def _varied_input(net: Network, binary: bool, seed: int) -> np.ndarray:
    """A random input of the cube (or the unit box) of the rarest class among 16 drawn: one with
    other classes around it, so that explanations are not trivial."""
    rng = np.random.default_rng(seed)
    X = (rng.random((16, net.n_inputs)) < 0.5).astype(float) if binary else rng.random((16, net.n_inputs))
    predictions = ExactNetwork(net).predictions(X, None)
    counts = np.bincount(predictions)
    rarest = min(set(predictions.tolist()), key=lambda c: (counts[c], c))
    return X[int(np.flatnonzero(predictions == rarest)[0])]


def _witness_holds(problem: Problem, features: tuple[int, ...], witness: tuple[float, ...] | None) -> bool:
    valid, _ = check_witness(problem, frozenset(features), witness)
    return bool(valid)


# ---------------------------------------------------------------------------- the rule
def test_argmax_rule_ties_go_to_the_lowest_index_exactly() -> None:
    third = Fraction(1, 3)
    lower = np.array([[1, 1, 0], [0, 2, 2], [third, third, third], [5, 1, 5]], dtype=object)
    assert decide(lower, lower, None).tolist() == [0, 1, 0, 0]
    # enclosures: decided only when every value inside them gives the class. Row 0: f_0 = f_1 = 1/2
    # is possible (class 0), and so is f_1 > f_0 (class 1); row 1: f_0 ≥ 1 ≥ f_1 (a tie goes to 0);
    # row 2: f_1 > 1/2 ≥ f_0; row 3: overlapping
    low = np.array([[0, Fraction(1, 2)], [1, 0], [0, Fraction(3, 5)], [1, 0]], dtype=object)
    high = np.array([[Fraction(1, 2), 1], [2, 1], [Fraction(1, 2), 1], [2, Fraction(3, 2)]], dtype=object)
    assert decide(low, high, None).tolist() == [-1, 0, 1, -1]
    with pytest.raises(ValueError):
        decide(lower, lower, 0.5)


def test_forward_and_exact_outputs_have_k_columns() -> None:
    net = _classifier(1, 4, (5,))
    X = np.random.default_rng(0).random((6, 4))
    assert net.n_outputs == 3 and net.forward(X).shape == (6, 3) and net.forward(X[0]).shape == (3,)
    enclosures = ExactNetwork(net).outputs(X)
    assert len(enclosures) == 6 and all(len(row) == 3 for row in enclosures)
    floats = net.forward(X).numpy()
    assert all(float(e.lower) == pytest.approx(floats[b, j]) for b, row in enumerate(enclosures) for j, e in enumerate(row))
    assert not net.is_monotone and not _classifier(1, 4, (5,), signed=False).is_monotone  # argmax: no shortcut


def test_ties_and_float_blind_spots_are_decided_exactly() -> None:
    """f_0 = f_1 exactly gives class 0; where float64 rounds two outputs to a tie the exact
    fallback decides (f_1 = 0.5 + 2^-60 > f_0 = 0.5, equal in float64)."""
    tiny = 2.0**-60
    net = Network([Layer(np.array([[0.0, 0.0, 1.0], [1.0, 1.0, 0.0], [0.0, 1.0, 0.0]]), np.zeros(3), IDENTITY)])
    X = np.array([[0.5, tiny, 0.5], [0.5, 0.0, 0.5], [0.25, 0.25, 0.5], [0.0, 0.75, 0.5], [0.0, 0.0, 0.0]])
    expected = [1, 0, 0, 1, 0]  # [0.5+2^-60 wins], [tie 0.5 = 0.5 → 0], [tie → 0], [f_1 = f_2 = 0.75 → 1], [all 0 → 0]
    assert float(net.forward(X[0])[1]) == float(net.forward(X[0])[0])  # float64 sees a tie in row 0
    assert ExactNetwork(net).predictions(X, None).tolist() == expected
    forward = BoundedForward(net)
    assert forward.predictions(X, None).tolist() == expected
    assert forward.predictions(torch.as_tensor(X), None).tolist() == expected
    assert Problem.make(net, X[0]).predictions(X).tolist() == expected


@pytest.mark.parametrize("activation", ["relu", "step", "sigmoid", "hardtanh"])
def test_bounded_pass_decides_like_exact_arithmetic(activation: str) -> None:
    """Quarter-grid weights and inputs make exact ties common (with step units, ties at the
    breakpoints too); the float64 pass with its error bound decides as exact arithmetic does."""
    varied = 0
    for seed in range(4):
        rng = np.random.default_rng(seed)
        weight = np.round(rng.normal(size=(4, 6)) * 4) / 4
        if activation != "sigmoid":  # two equal outputs: exact ties (a smooth pair would be undecided)
            weight[3] = weight[1]
        hidden = np.round(rng.normal(size=(6, 5)) * 4) / 4
        net = Network([Layer(hidden, -hidden.sum(1) / 2, Activation.make(activation)), Layer(weight, np.zeros(4), IDENTITY)])
        Y = np.vstack([rng.random((60, 5)), np.round(rng.random((40, 5)) * 4) / 4])
        truth = ExactNetwork(net).predictions(Y, None)
        forward = BoundedForward(net)
        assert (forward.predictions(Y, None) == truth).all()
        assert (forward.predictions(torch.as_tensor(Y), None).numpy() == truth).all()
        assert (truth >= 0).all()
        if activation != "sigmoid":
            assert 3 not in truth.tolist()  # output 3 equals output 1, and ties go to 1
        varied += len(set(truth.tolist())) >= 2
    assert varied >= 2


# ---------------------------------------------------------------------------- thresholds, metadata, greedy
def test_a_threshold_is_refused_for_k_classes() -> None:
    net = _classifier(2, 3, (4,))
    x = np.full(3, 0.5)
    for call in (
        lambda: Problem.make(net, x, threshold=0.5),
        lambda: solve_minimum(net, x, threshold=0.0, solver="enumerate"),
    ):
        with pytest.raises(InputError, match="applies to networks with one output; this one has 3 outputs"):
            call()
    assert Problem.make(net, x).threshold is None
    assert Problem.make(_classifier(2, 3, (4,), classes=1), x).threshold == 0.0


def test_explain_refuses_k_classes_and_names_what_to_use() -> None:
    with pytest.raises(InputError, match=r"sign-monotone.*it has 3 outputs.*cardinal certify.*solve_minimum.*exact minimum"):
        explain(_classifier(2, 3, (4,), signed=False), np.full((1, 3), 0.5))


def test_class_names_in_metadata_are_checked(tmp_path: Path) -> None:
    document = _classifier(3, 2, (3,)).to_json()
    good = {**document, "metadata": {"class_names": ["cat", "dog", "eel"]}}
    assert Network.from_json(good).metadata.class_names == ("cat", "dog", "eel")
    assert Network.from_json(json.loads(json.dumps(Network.from_json(good).to_json()))).metadata.class_names == ("cat", "dog", "eel")
    for metadata, message in (
        ({"class_names": ["cat", "dog"]}, r"net.json: metadata.class_names must be a list of 3 strings"),
        ({"threshold": 0.5}, r"net.json: metadata.threshold applies to networks with one output; this one has 3"),
    ):
        with pytest.raises(InputError, match=message):
            Network.from_json({**document, "metadata": metadata}, source="net.json")
    single = _classifier(3, 2, (3,), classes=1).to_json()
    with pytest.raises(InputError, match="class_names applies to networks with K ≥ 2 outputs"):
        Network.from_json({**single, "metadata": {"class_names": ["a"]}})


# ---------------------------------------------------------------------------- engines vs brute force
CUBE_SEEDS = range(10)


def _cube_instance(seed: int) -> tuple[Network, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 7))
    hidden = (int(rng.integers(3, 6)),) if seed % 2 else (3, 3)
    net = _classifier(100 + seed, n, hidden, signed=seed % 5 != 4)  # seeds 4, 9: weights ≥ 0, still no shortcut
    return net, _varied_input(net, True, seed)


@pytest.mark.parametrize("seeds", [CUBE_SEEDS[:5], pytest.param(CUBE_SEEDS[5:], marks=pytest.mark.slow)], ids=["seeds0-4", "seeds5-9"])
@pytest.mark.parametrize("kind", ["contrastive", "abductive"])
def test_every_backend_finds_the_brute_force_minimum_on_boolean_cubes(kind: str, seeds: range) -> None:
    """K = 3 random ReLU networks on cubes of 3–6 features: every installed backend returns the
    minimum size that brute force over all vertices finds, its set is valid at every vertex, and
    every CXp's witness flips the prediction exactly. Seeds 0-4 (both hidden shapes, signed and
    non-negative weights) by default, 5-9 with -m slow."""
    classes_seen = set()
    for seed in seeds:
        net, x = _cube_instance(seed)
        problem = Problem.make(net, x, kind, Domain.boolean(net.n_inputs))
        classes_seen.add(problem.prediction)
        expected = vertex_minimum(problem)
        for name in INSTALLED:
            with get_solver(name) as backend:
                outcome = solve_problem(backend, problem, None, UNBOUNDED)
            where = f"{name}, seed {seed}, {kind}, p(x) = {problem.prediction}: {outcome}"
            if name == "marabou":  # one output only (solvers/marabou.py): says so
                assert outcome.status == Status.UNSUPPORTED, where
                continue
            assert outcome.status in (Status.OPTIMAL, Status.NONE_EXISTS), where
            assert (outcome.size if outcome.status == Status.OPTIMAL else None) == expected, f"{where}; brute force {expected}"
            if outcome.status == Status.OPTIMAL:
                assert vertex_valid(problem, outcome.features), where
            if kind == "contrastive" and outcome.status == Status.OPTIMAL:
                assert outcome.replayed and _witness_holds(problem, outcome.features, outcome.witness), where
    assert len(classes_seen) >= 2  # the instances are not all of one class


@pytest.mark.parametrize("seed", [*range(3), *(pytest.param(seed, marks=pytest.mark.slow) for seed in range(3, 6))])
def test_exact_and_float_backends_agree_on_tiny_real_boxes(seed: int) -> None:
    """K = 3 on [0, 1]^n (n ≤ 4), where no brute force exists: z3's exact minimum sizes equal the
    MILPs' (each answer replayed), and every CXp's witness flips exactly."""
    available = ("z3", "gurobi", "highs")
    net = _classifier(200 + seed, 3 + seed % 2, (4,))
    x = _varied_input(net, False, seed)
    for kind in ("contrastive", "abductive"):
        problem = Problem.make(net, x, kind)
        sizes = {}
        for name in available:
            with get_solver(name) as backend:
                outcome = solve_problem(backend, problem, None, UNBOUNDED)
            where = f"{name}, seed {seed}, {kind}: {outcome}"
            assert outcome.status in (Status.OPTIMAL, Status.NONE_EXISTS), where
            sizes[name] = outcome.size if outcome.status == Status.OPTIMAL else None
            if kind == "contrastive" and outcome.status == Status.OPTIMAL:
                assert outcome.replayed and _witness_holds(problem, outcome.features, outcome.witness), where
        assert len(set(sizes.values())) == 1, (seed, kind, sizes)


def _tie_network() -> Network:
    """f_0 = 1/2 (a bias), f_1 = x_0, f_2 = x_1 − 1: class 1 iff x_0 > 1/2 (ties go to 0)."""
    return Network([Layer(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), np.array([0.5, 0.0, -1.0]), IDENTITY)])


@pytest.mark.parametrize("name", ["z3", "gurobi", "highs", "enumerate", "exact-milp"])
def test_engines_honour_ties(name: str) -> None:
    """At x_0 = 1/2 the outputs f_0, f_1 tie and the class is 0: on [0, 1/2] nothing reaches
    class 1 (f_1 > f_0 strictly is needed); from x_0 = 3/4 (class 1) the only flipping points
    have x_0 ≤ 1/2, the tie x_0 = 1/2 included, which is all a box [1/2, 1] offers."""
    net = _tie_network()
    binary = name == "enumerate"
    low = Domain(np.array([0.0, 0.0]), np.array([0.5, 1.0]), binary)
    high = Domain(np.array([0.5, 0.0]), np.array([1.0, 1.0]), binary)
    tied = solve_minimum(net, np.array([0.5, 0.0]), "contrastive", low, solver=name, time_limit=UNBOUNDED)
    assert tied.status == Status.NONE_EXISTS and tied.replayed, tied
    x = np.array([1.0 if binary else 0.75, 0.0])
    assert Problem.make(net, x, domain=high).prediction == 1
    outcome = solve_minimum(net, x, "contrastive", high, solver=name, time_limit=UNBOUNDED)
    assert outcome.status == Status.OPTIMAL and outcome.solution == (0,) and outcome.replayed, outcome
    assert outcome.witness is not None and outcome.witness[0] == 0.5  # exactly the tie
    assert Problem.make(net, np.array(outcome.witness), domain=high).prediction == 0
    axp = solve_minimum(net, x, "abductive", high, solver=name, time_limit=UNBOUNDED)
    assert axp.status == Status.OPTIMAL and axp.solution == (0,), axp


def test_the_milp_drops_outputs_that_exact_bounds_rule_out() -> None:
    """Output 2 (x_1 − 1 ≤ 0 < 1/2 = f_0) can never take class 0: its binary is fixed to 0."""
    problem = Problem.make(_tie_network(), np.array([0.25, 0.5]))
    model = encode(problem)
    binaries = np.flatnonzero(model.integer)[problem.n :]  # after the selectors: β_1, β_2
    assert model.upper[binaries].tolist() == [1.0, 0.0]


# ---------------------------------------------------------------------------- commands
def _files(tmp_path: Path, net: Network, X: np.ndarray) -> tuple[Path, Path]:
    net_path, inputs = tmp_path / "net.json", tmp_path / "X.csv"
    document = net.to_json()
    document["metadata"] = {"class_names": [f"c{j}" for j in range(net.n_outputs)]}
    net_path.write_text(json.dumps(document))
    inputs.write_text("".join(",".join(repr(float(v)) for v in row) + "\n" for row in X))
    return net_path, inputs


def test_certify_and_check_on_a_k_class_model(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """certify: exact_only verdicts with the exact minimum, "classes", class names, and a witness
    for every contrastive minimum that flips exactly; check: a list of pixel indices per input
    judged, the invalid abductive one with its witness."""
    net, _ = _cube_instance(1)
    X = np.array([_varied_input(net, True, seed) for seed in range(3)])
    net_path, inputs = _files(tmp_path, net, X)
    out = tmp_path / "certify.jsonl"
    code = main(["certify", str(net_path), "--inputs", str(inputs), "--binary", "--solvers", "enumerate,z3", "--out", str(out),
                 "--method", "greedy"])  # no explainer on K = 3: the solvers alone
    assert code == 0, capsys.readouterr().err
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 6
    for line in lines:
        problem = Problem.make(net, X[line["row"]], line["kind"], Domain.boolean(net.n_inputs))
        assert line["verdict"] == "exact_only" and line["certified"] and line["classes"] == 3
        assert line["prediction"] == problem.prediction and line["prediction_name"] == f"c{problem.prediction}"
        assert line["greedy"] is None
        if line["kind"] == "contrastive" and line["minimum"] is not None:
            assert _witness_holds(problem, tuple(line["minimum"]), tuple(line["minimum_witness"]))
        else:
            assert line["minimum_witness"] is None
    minimum = {(line["row"], line["kind"]): line["minimum"] for line in lines}
    claims = tmp_path / "claims.jsonl"
    axp = minimum[0, "abductive"]
    assert axp, "the test needs a non-empty AXp"
    claims.write_text(
        json.dumps({"row": 0, "kind": "abductive", "features": axp[:-1]})
        + "\n"
        + json.dumps({"row": 1, "kind": "abductive", "features": minimum[1, "abductive"]})
        + "\n"
    )
    checked = tmp_path / "check.jsonl"
    code = main(["check", str(net_path), "--inputs", str(inputs), "--binary", "--explanations", str(claims), "--out", str(checked)])
    judged = [json.loads(line) for line in checked.read_text().splitlines()]
    assert code == 1  # the shortened AXp fails
    assert judged[0]["verdict"] == "invalid" and judged[0]["classes"] == 3
    y = np.array(judged[0]["witness"])
    assert judged[0]["witness_prediction"] == Problem.make(net, y, domain=Domain.boolean(net.n_inputs)).prediction
    assert judged[0]["witness_prediction"] != judged[0]["prediction"]
    assert all(y[i] == X[0][i] for i in axp[:-1])
    assert judged[1]["verdict"] == "valid"


def test_threshold_flag_is_refused_for_a_k_class_model(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    net_path, inputs = _files(tmp_path, _classifier(3, 3, (4,)), np.full((1, 3), 0.5))
    claims = tmp_path / "claims.jsonl"
    claims.write_text('{"row": 0, "kind": "contrastive", "features": [0]}\n')
    for command in ("certify", "check", "explain"):
        extra = ["--explanations", str(claims)] if command == "check" else []
        assert main([command, str(net_path), "--inputs", str(inputs), "--threshold", "0.5", *extra]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "--threshold applies to networks with one output" in err, err
    assert main(["explain", str(net_path), "--inputs", str(inputs), "--method", "greedy"]) == 2
    assert "cardinal certify" in capsys.readouterr().err
    assert main(["explain", str(net_path), "--inputs", str(inputs)]) == 0  # the deletion explainer, by default
    assert {json.loads(line)["method"] for line in capsys.readouterr().out.splitlines()} == {"deletion"}


def test_explain_records_carry_a_witness_for_every_contrastive_answer(
    design_network_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """K = 1: greedy's CXp comes with the shortcut point, which flips the prediction exactly."""
    inputs = tmp_path / "X.csv"
    inputs.write_text("1,1,1\n0,1,0.5\n")
    assert main(["explain", str(design_network_file), "--inputs", str(inputs), "--threshold", "0.5"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    net = Network.load(design_network_file)
    contrastive = [line for line in lines if line["kind"] == "contrastive" and line["exists"]]
    assert contrastive and all("witness" not in line for line in lines if line["kind"] == "abductive")
    for line in contrastive:
        problem = Problem.make(net, np.array([[1, 1, 1], [0, 1, 0.5]][line["row"]], dtype=float), threshold=0.5)
        assert _witness_holds(problem, tuple(line["features"]), tuple(line["witness"]))


def test_campaign_records_of_a_k_class_instance_round_trip(tmp_path: Path) -> None:
    """A K = 3 instance through crosscheck's units, records (threshold null, the K outputs, the
    minimum's witness) and summary."""
    from cardinal.verify.campaign import certify_unit, units_of
    from cardinal.verify.certify import SolverPool
    from cardinal.verify.instance import Instance
    from cardinal.verify.record import Record
    from cardinal.verify.report import write_report

    net, _ = _cube_instance(3)
    X = np.array([_varied_input(net, True, seed) for seed in range(2)])
    instance = Instance("k3", "random", net, X, None, Domain.boolean(net.n_inputs))
    units = units_of(instance, ("enumerate",), 30.0, set())
    with SolverPool(["enumerate"]) as pool:
        records = [record for unit in units for record, _, _ in certify_unit(unit, pool)]
    for record in records:
        document = json.loads(json.dumps(record.to_json()))
        assert document["threshold"] is None and len(document["output"]) == 3 and document["verdict"] == "exact_only"
        again = Record.from_json(document)
        assert again.to_json() == document and again.margin == record.margin
        outputs = list(record.output)
        assert record.margin == outputs[record.prediction] - max(v for j, v in enumerate(outputs) if j != record.prediction)
        if record.kind == "contrastive" and record.minimum:
            problem = Problem.make(net, X[record.row], "contrastive", Domain.boolean(net.n_inputs))
            assert _witness_holds(problem, record.minimum, record.minimum_witness)
    write_report(tmp_path, records, "k3", ("enumerate",), 30.0, 1.0)
    assert "exact_only" in (tmp_path / "summary.md").read_text()


def test_a_k_class_network_converts_exactly(tmp_path: Path) -> None:
    """JSON, ONNX (declared output [batch, K]) and torch keep the K outputs exactly."""
    ort = importlib.import_module("onnxruntime")
    net = _classifier(5, 4, (5,))
    for name in ("k.json", "k.onnx", "k.pt"):
        net.save(tmp_path / name)
        assert Network.load(tmp_path / name).hash == net.hash, name
    session = ort.InferenceSession(str(tmp_path / "k.onnx"))
    assert session.get_outputs()[0].shape == ["batch", 3]
    X = np.random.default_rng(0).random((5, 4))
    assert np.allclose(session.run(None, {"input": X})[0], net.forward(X).numpy(), rtol=1e-12, atol=1e-12)


def test_a_k_class_case_file_saves_and_replays(tmp_path: Path) -> None:
    """A case of a K = 3 network keeps threshold null (a number there is refused) and replays
    exactly: the minimum's witness flips, and enumeration finds nothing smaller."""
    from cardinal.verify.cases import Case, replay
    from cardinal.verify.certify import SolverPool, case_of
    from cardinal.verify.pipeline import Plan, certify_input, given

    net, x = _cube_instance(1)
    domain = Domain.boolean(net.n_inputs)
    with SolverPool(["enumerate"]) as pool:
        problem, (certificate,) = certify_input(pool, net, given(net, domain, None), x, "contrastive", (None,), Plan(time_limit=30.0))
    assert problem is not None and certificate.minimum
    path = case_of(problem, certificate).save(tmp_path)
    case = Case.load(path)
    assert case.threshold is None and json.loads(path.read_text())["threshold"] is None
    report = replay(case)
    assert report.holds, report
    document = json.loads(path.read_text())
    with pytest.raises(InputError, match="threshold applies to networks with one output"):
        Case.from_json({**document, "threshold": 0.5}, source="case.json")


def test_certify_defaults_to_the_exact_milp_on_large_classifiers() -> None:
    """A 3-class network of 64 features on a real box: the exact MILP answers K ≥ 2 classes, so
    the default set holds it (z3's full encoding only where it is not installed, then at any
    size rather than nothing, which stopped certify with 'no exact solver applies')."""
    from cardinal.verify.certify import proving_solvers

    net = _classifier(7, 64, (4,))
    assert proving_solvers(net, Domain.unit(64)) == ("exact-milp",)

"""`cardinal export`: every file loads in a reference tool and gives cardinal's answer — HiGHS
reads the MPS and LP files and finds the brute-force minimum (and feasibility of "≤ k?" on both
sides of it), z3 reads the SMT-LIB files and says sat/unsat as brute force does, onnxruntime
runs the ONNX as the network, and the VNN-LIB properties, parsed here, hold the region and the
output condition that make SAT mean "a counterexample". Then `--suite`: the index's answers
against the same tools, and the refusals (one line, exit 2, nothing written)."""

from __future__ import annotations

import csv
import importlib
import re
from pathlib import Path

import highspy
import numpy as np
import pytest
import z3
from bruteforce import monotone_minimum, random_network, vertex_minimum
from cardinal.solvers import registry
from cardinal.solvers.smtlib import number
from cardinal.verify.cli import main
from cardinal.verify.export import ExportSettings, export_inputs, export_suite, refusal
from cardinal.verify.generate import median_threshold
from cardinal.verify.pipeline import given

from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.network import Layer, Network
from cardinal.problem import Problem

# The limit of a call whose answer a test asserts: none that a run here comes near, so that no
# answer depends on the machine's speed (a limit of seconds ended calls undecided on a loaded machine).
UNBOUNDED = 3600.0

RELU = Activation.make("relu")


def highs_answer(path: Path) -> float | None:
    """HiGHS reads the file and solves it: the optimal objective, or None when infeasible."""
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("mip_feasibility_tolerance", 1e-8)
    highs.setOptionValue("primal_feasibility_tolerance", 1e-8)
    assert highs.readModel(str(path)) != highspy.HighsStatus.kError
    highs.run()
    status = highs.getModelStatus()
    if status in (highspy.HighsModelStatus.kInfeasible, highspy.HighsModelStatus.kUnboundedOrInfeasible):
        return None
    assert status == highspy.HighsModelStatus.kOptimal, highs.modelStatusToString(status)
    return highs.getInfo().objective_function_value


def z3_answer(path: Path) -> str:
    solver = z3.Solver()
    solver.add(z3.parse_smt2_file(str(path)))
    return str(solver.check())


def _networks(monotone: bool):
    rng = np.random.default_rng(40 if monotone else 41)
    for _ in range(4):
        n = int(rng.integers(3, 6))
        net = random_network(rng, n, (4, 3), RELU, monotone=monotone)
        X = rng.random((3, n)) if monotone else (rng.random((3, n)) < 0.5).astype(float)
        yield net, X, median_threshold(net, X) if monotone else float(np.median(net.forward(X).numpy())) + 1e-3


@pytest.mark.parametrize("fmt", ["mps", "lp"])
def test_highs_reads_the_milp_files_and_finds_the_minimum(tmp_path: Path, fmt: str) -> None:
    checked = 0
    for index, (net, X, threshold) in enumerate(_networks(monotone=True)):
        domain = Domain.unit(net.n_inputs)
        for kind in ("contrastive", "abductive"):
            out = tmp_path / f"{index}-{kind}"
            entries = export_inputs(net, X, [kind], given(net, domain, threshold), out, ExportSettings(fmt))
            for entry in entries:
                minimum = monotone_minimum(Problem.make(net, X[entry.row], kind, domain, threshold))
                value = highs_answer(out / entry.file)
                assert (value is None) if minimum is None else value == pytest.approx(minimum), (entry, value, minimum)
                if minimum:
                    for bound, feasible in ((minimum - 1, False), (minimum, True)):
                        asked = export_inputs(net, X[entry.row : entry.row + 1], [kind], given(net, domain, threshold), out / str(bound), ExportSettings(fmt, at_most=bound))
                        assert (highs_answer(out / str(bound) / asked[0].file) is not None) == feasible
                    checked += 1
    assert checked >= 10


def test_highs_reads_a_non_monotone_cxp_on_the_cube(tmp_path: Path) -> None:
    checked = 0
    for index, (net, X, threshold) in enumerate(_networks(monotone=False)):
        domain = Domain.boolean(net.n_inputs)
        for entry in export_inputs(net, X, ["contrastive"], given(net, domain, threshold), tmp_path / str(index), ExportSettings("mps")):
            minimum = vertex_minimum(Problem.make(net, X[entry.row], "contrastive", domain, threshold))
            value = highs_answer(tmp_path / str(index) / entry.file)
            assert (value is None) if minimum is None else value == pytest.approx(minimum)
            checked += 1
    assert checked == 12


@pytest.mark.parametrize(
    "case",
    [
        "k3-ball",
        pytest.param("k3-box", marks=pytest.mark.slow),  # with the two below: 47 s on the loaded 2-core VM
        pytest.param("k1-ball-contrastive", marks=pytest.mark.slow),
        pytest.param("k1-ball-abductive", marks=pytest.mark.slow),
    ],
)
def test_k_class_and_ball_questions_in_mps_lp_and_smtlib_answer_as_cardinal(tmp_path: Path, case: str) -> None:
    """K = 3 classifiers (CXps; argmax, ties to the lowest index, stated in each file) over an
    ε-ball (the default run) and over the box, and a K = 1 network over ε-balls (both kinds):
    HiGHS's optimum of each MPS and LP file is cardinal's exact minimum, and z3 answers each
    SMT-LIB file asking for at most minimum − 1 features unsat and for at most the minimum sat."""
    from cardinal.solvers.base import solve_minimum
    from cardinal.verify.generate import random_network as classifier

    from cardinal.problem import Status

    rng = np.random.default_rng(5)
    three = classifier(rng, 4, (6,), "relu", monotone=False, outputs=3)
    single = random_network(rng, 4, (4, 3), RELU, monotone=True)
    X = rng.random((2, 4))
    net, threshold, kind, radius = {
        "k3-ball": (three, None, "contrastive", 0.3), "k3-box": (three, None, "contrastive", None),
        "k1-ball-contrastive": (single, median_threshold(single, X), "contrastive", 0.3),
        "k1-ball-abductive": (single, median_threshold(single, X), "abductive", 0.3),
    }[case]  # fmt: skip
    domain, asked = Domain.unit(4), 0
    for row, x in enumerate(X):
        box = domain if radius is None else domain.ball(x, radius)
        exact = solve_minimum(net, x, kind, box, threshold, time_limit=UNBOUNDED)
        assert exact.exact and exact.status in (Status.OPTIMAL, Status.NONE_EXISTS), exact
        minimum = None if exact.status == Status.NONE_EXISTS else len(exact.solution)
        for fmt in ("mps", "lp"):
            out = tmp_path / f"{row}-{fmt}"
            entry = export_inputs(net, x[None, :], [kind], given(net, domain, threshold, radius), out, ExportSettings(fmt))[0]
            text = (out / entry.file).read_text()
            assert ("ties to the lowest index" in text) == (net is three)
            value = highs_answer(out / entry.file)
            assert (value is None) if minimum is None else value == pytest.approx(minimum), (row, fmt, value, minimum)
        for bound, answer in ((minimum - 1, "unsat"), (minimum, "sat")) if minimum else ():
            out = tmp_path / f"{row}-smt2-{bound}"
            entry = export_inputs(net, x[None, :], [kind], given(net, domain, threshold, radius), out, ExportSettings("smt2", at_most=bound))[0]
            assert ("ties to the lowest index" in (out / entry.file).read_text()) == (net is three)
            assert z3_answer(out / entry.file) == answer, (row, bound)
            asked += 1
    assert asked >= 1


@pytest.mark.parametrize("monotone", [True, False])
def test_z3_reads_the_smtlib_files_and_answers_as_brute_force(tmp_path: Path, monotone: bool) -> None:
    checked = 0
    kinds = ("contrastive", "abductive") if monotone else ("contrastive",)  # a non-monotone AXp has no QF_LRA form
    for index, (net, X, threshold) in enumerate(_networks(monotone)):
        domain = Domain.unit(net.n_inputs) if monotone else Domain.boolean(net.n_inputs)
        for kind in kinds:
            for row, x in enumerate(X):
                problem = Problem.make(net, x, kind, domain, threshold)
                minimum = monotone_minimum(problem) if monotone else vertex_minimum(problem)
                if not minimum:
                    continue
                for bound, answer in ((minimum - 1, "unsat"), (minimum, "sat")):
                    out = tmp_path / f"{index}-{kind}-{row}-{bound}"
                    entry = export_inputs(net, x[None, :], [kind], given(net, domain, threshold), out, ExportSettings("smt2", at_most=bound))[0]
                    assert z3_answer(out / entry.file) == answer, (monotone, kind, row, bound)
                checked += 1
    assert checked >= 8


def test_smtlib_constants_are_exact_and_the_class_one_side_strict(tmp_path: Path, design_network: Network) -> None:
    """x = 0, t = 1.6 = f(1, 1, 1) exactly (0.6 is the double nearest 3/5, and so is 1 + 0.6 = 1.6):
    no point has f > t, so no CXp exists — unsat even with every feature allowed. A file that read
    the doubles as decimals or wrote f ≥ t would say sat."""
    assert float(design_network.forward(np.ones(3))) == 1.6
    entry = export_inputs(design_network, np.zeros((1, 3)), ["contrastive"], given(design_network, Domain.unit(3), 1.6), tmp_path, ExportSettings("smt2", at_most=3))[0]
    text = (tmp_path / entry.file).read_text()
    assert "(/ 5404319552844595 9007199254740992)" in text  # 0.6 exactly
    assert f"(assert (> f {number(1.6)}))" in text
    assert z3_answer(tmp_path / entry.file) == "unsat"
    assert number(-0.75) == "(- (/ 3 4))" and number(2.0) == "2" and number(-3) == "(- 3)"


def test_cvc5_reads_the_smtlib_file_too(tmp_path: Path, design_network: Network) -> None:
    cvc5 = importlib.import_module("cvc5")
    entry = export_inputs(design_network, np.ones((1, 3)), ["contrastive"], given(design_network, Domain.unit(3), 0.5), tmp_path, ExportSettings("smt2", at_most=1))[0]
    solver = cvc5.Solver(cvc5.TermManager())
    solver.setOption("incremental", "true")
    parser = cvc5.InputParser(solver)
    parser.setFileInput(cvc5.InputLanguage.SMT_LIB_2_6, str(tmp_path / entry.file))
    results = []
    while not (command := parser.nextCommand()).isNull():
        outcome = command.invoke(solver, parser.getSymbolManager())
        results.append(outcome)
    assert str(solver.checkSat()) == "unsat"  # the minimum CXp of x = (1, 1, 1) at t = 0.5 has 2 features


def parse_vnnlib(text: str) -> tuple[np.ndarray, np.ndarray, str, float]:
    """A small VNN-LIB reader for cardinal's properties: the input box (lower, upper [n]) and the
    output condition (relation, constant)."""
    lower: dict[int, float] = {}
    upper: dict[int, float] = {}
    output = None
    for relation, name, index, value in re.findall(r"\(assert \((<=|>=) ([XY])_(\d+) (-?[0-9.]+)\)\)", text):
        if name == "Y":
            output = (relation, float(value))
        elif relation == ">=":
            lower[int(index)] = float(value)
        else:
            upper[int(index)] = float(value)
    n = len(re.findall(r"\(declare-const X_\d+ Real\)", text))
    assert sorted(lower) == sorted(upper) == list(range(n)) and output is not None
    return np.array([lower[i] for i in range(n)]), np.array([upper[i] for i in range(n)]), *output


def test_onnx_and_vnnlib_ask_whether_the_set_is_an_explanation(tmp_path: Path) -> None:
    """onnxruntime runs network.onnx as the network; each property's region pins the features it
    should, and on these monotone networks its SAT (a point of the region meeting the output
    condition, checked at the region's extreme corner through onnxruntime) is "S is a CXp" for a
    CXp and "S is no AXp" for an AXp, as cardinal's exact check says."""
    ort = importlib.import_module("onnxruntime")
    checked = 0
    for index, (net, X, threshold) in enumerate(_networks(monotone=True)):
        n = net.n_inputs
        domain = Domain.unit(n)
        for features in ((0,), (0, n - 1), tuple(range(1, n))):
            out = tmp_path / f"{index}-{len(features)}"
            entries = export_inputs(net, X, ["contrastive", "abductive"], given(net, domain, threshold), out, ExportSettings("vnnlib", features=features))
            session = ort.InferenceSession(str(out / "network.onnx"))

            def run(y: np.ndarray, session=session) -> float:
                return float(session.run(None, {session.get_inputs()[0].name: y[None, :]})[0][0, 0])

            assert run(X[0]) == pytest.approx(float(net.forward(X[0])), abs=1e-12)
            for entry in entries:
                problem = Problem.make(net, X[entry.row], entry.kind, domain, threshold)
                lower, upper, relation, constant = parse_vnnlib((out / entry.file).read_text())
                free = np.isin(np.arange(n), features) if entry.kind == "contrastive" else ~np.isin(np.arange(n), features)
                assert np.array_equal(lower, np.where(free, 0.0, problem.x)) and np.array_equal(
                    upper, np.where(free, 1.0, problem.x)
                )
                assert constant == threshold and relation == ("<=" if problem.prediction == 1 else ">=")
                corner = np.where(free, problem.counterpoint, problem.x)
                value = run(corner)
                if abs(value - threshold) < 1e-9:
                    continue  # too close to call in floats
                sat = value <= threshold if relation == "<=" else value >= threshold
                valid = problem.is_explanation(features)
                assert sat == (valid if entry.kind == "contrastive" else not valid), entry
                checked += 1
    assert checked >= 40


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--format", "mps", "--kind", "abductive"], "no single MILP form"),
        (["--format", "smt2", "--kind", "abductive", "--at-most", "1"], "no QF_LRA form"),
        (["--format", "mps", "--set", "0"], "--set only with it"),
        (["--format", "vnnlib"], "give --set"),
        (["--format", "vnnlib", "--set", "0", "--binary"], "binary box"),
        (["--format", "smt2", "--kind", "contrastive"], "greedy needs a sign-monotone network"),
        (["--format", "xml"], "--format must be one of"),
        (["--format", "vnnlib", "--set", "0,0"], "distinct feature indices"),
    ],
)
def test_refusals_are_one_line_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture, arguments: list[str], message: str
) -> None:
    net = random_network(np.random.default_rng(0), 3, (3,), RELU, monotone=False)
    net.save(tmp_path / "net.json")
    (tmp_path / "x.csv").write_text("0,1,0\n")
    out = tmp_path / "out"
    assert main(["export", str(tmp_path / "net.json"), "--inputs", str(tmp_path / "x.csv"), "--out", str(out), *arguments]) == 2
    error = [line for line in capsys.readouterr().err.splitlines() if ": warning: " not in line]  # e.g. a constant prediction
    assert len(error) == 1 and message in error[0], error
    assert not out.exists()


def test_smooth_networks_export_only_as_vnnlib(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    net = random_network(np.random.default_rng(1), 3, (3,), Activation.make("sigmoid"))
    net.save(tmp_path / "net.json")
    (tmp_path / "x.csv").write_text("0.2,0.5,0.9\n")
    base = ["export", str(tmp_path / "net.json"), "--inputs", str(tmp_path / "x.csv"), "--threshold", "0.1"]
    assert main([*base, "--format", "mps", "--out", str(tmp_path / "a")]) == 2
    assert "not piecewise linear" in capsys.readouterr().err
    assert main([*base, "--format", "vnnlib", "--set", "1", "--out", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b" / "network.onnx").is_file() and (tmp_path / "b" / "row0-contrastive.vnnlib").is_file()


def test_a_suite_export_indexes_answers_the_tools_confirm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tiny suite (relu, step and sigmoid networks and the DESIGN network): every mps answer is
    HiGHS's minimum, every smt2 status z3's, each vnnlib answer what the region's corner gives;
    a second export reuses the campaign's records (nothing certified again)."""
    from cardinal.verify import suites
    from cardinal.verify.instance import Instance

    from tests.application.test_campaign import tiny_instances

    rng = np.random.default_rng(5)
    smooth = random_network(rng, 4, (3,), Activation.make("sigmoid"))
    X = rng.random((2, 4))
    instances = [*tiny_instances(), Instance("tiny-sigmoid", "random", smooth, X, median_threshold(smooth, X), Domain.unit(4))]
    monkeypatch.setitem(suites.SUITES, "quick", lambda folder: iter(instances))
    entries = export_suite("quick", tmp_path / "bench", solvers=("enumerate", "z3"), time_limit=UNBOUNDED)
    with open(tmp_path / "bench" / "index.csv") as handle:
        index = list(csv.DictReader(handle))
    assert len(index) == len(entries) > 20
    formats = {row["format"] for row in index}
    assert formats == {"mps", "smt2", "vnnlib"}
    assert not any(row["instance"] == "tiny-sigmoid" and row["format"] != "vnnlib" for row in index)
    answered = 0
    for row in index:
        path = tmp_path / "bench" / row["file"]
        if not row["answer"]:
            continue
        assert row["certified"] == "true"
        if row["format"] == "mps":
            value = highs_answer(path)
            assert (value is None) if row["answer"] == "infeasible" else value == pytest.approx(int(row["answer"])), row
        elif row["format"] == "smt2":
            assert z3_answer(path) == row["answer"] and f"(set-info :status {row['answer']})" in path.read_text(), row
        answered += 1
    assert answered >= 20
    assert {row["answer"] for row in index if row["format"] == "smt2"} >= {"sat", "unsat"}
    assert {row["answer"] for row in index if row["format"] == "vnnlib"} >= {"sat", "unsat"}
    records = (tmp_path / "bench" / "campaign" / "records.jsonl").read_text()
    export_suite("quick", tmp_path / "bench", solvers=("enumerate", "z3"), time_limit=UNBOUNDED)
    assert (tmp_path / "bench" / "campaign" / "records.jsonl").read_text() == records


def test_a_suite_export_on_conflicting_exact_evidence_answers_nothing_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A backend that calls itself exact and says "nothing smaller" where enumerate finds a smaller
    set (the DESIGN network): its record's smt2 and mps instances carry no answer, and exit 1."""
    from cardinal.verify import suites

    from tests.application.test_campaign import tiny_instances

    monkeypatch.setitem(registry.BACKENDS, "exact_liar", registry.Backend("exact_liar", "tests.application.test_cli_certify", "ExactLiarSolver", exact=True))
    monkeypatch.setitem(suites.SUITES, "quick", lambda folder: iter(tiny_instances()[2:]))
    out = tmp_path / "bench"
    assert main(["export", "--suite", "quick", "--out", str(out), "--solvers", "enumerate,exact_liar"]) == 1
    assert "conflicting exact evidence" in capsys.readouterr().err
    with open(out / "index.csv") as handle:
        rows = [row for row in csv.DictReader(handle) if row["kind"] == "contrastive" and row["format"] != "vnnlib"]
    assert rows and all(row["answer"] == "" and row["evidence"] == "campaign: verdict solver_disagreement" for row in rows)


def test_an_undecided_prediction_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """f = sigmoid(y0 − 1/2) + sigmoid(y1 − 1/2) is 1 exactly at (1, 0), where no enclosure decides f ≤ 1."""
    from test_undecided import UNDECIDED_ROW, _files, _tie_network

    network, inputs = _files(tmp_path, _tie_network(), [UNDECIDED_ROW])
    out = tmp_path / "out"
    arguments = ["export", network, "--inputs", inputs, "--threshold", "1", "--format", "vnnlib", "--set", "0", "--out", str(out)]
    assert main(arguments) == 2
    error = capsys.readouterr().err
    assert "row 0: the prediction of x is undecided" in error and error.count("\n") == 1
    assert not out.exists()


def test_export_rows_names_files_and_index_rows_by_their_row_in_the_file(tmp_path: Path, design_network: Network) -> None:
    """`--rows 2,5` exports rows 2 and 5 of the file: the files are row2-… and row5-…, the index
    says rows 2 and 5, and each file asks about its own input."""
    design_network.save(tmp_path / "net.json")
    X = np.array([[0, 0, 0], [1, 1, 1], [1, 0, 1], [0, 1, 0], [0, 0, 1], [1, 1, 0]], dtype=float)
    np.savetxt(tmp_path / "x.csv", X, delimiter=",", fmt="%g")
    out = tmp_path / "out"
    argv = ["export", str(tmp_path / "net.json"), "--inputs", str(tmp_path / "x.csv"), "--threshold", "0.5"]
    assert main([*argv, "--kind", "contrastive", "--format", "smt2", "--at-most", "1", "--rows", "2,5", "--out", str(out)]) == 0
    with open(out / "index.csv") as handle:
        index = list(csv.DictReader(handle))
    assert [(row["file"], row["row"]) for row in index] == [("row2-contrastive.smt2", "2"), ("row5-contrastive.smt2", "5")]
    assert sorted(path.name for path in out.iterdir()) == ["index.csv", "row2-contrastive.smt2", "row5-contrastive.smt2"]
    for row in (2, 5):
        alone = export_inputs(design_network, X[row : row + 1], ["contrastive"], given(design_network, Domain.unit(3), 0.5), tmp_path / str(row), ExportSettings("smt2", at_most=1), source="net.json")
        expected = (tmp_path / str(row) / alone[0].file).read_text().replace("row 0,", f"row {row},")
        assert (out / f"row{row}-contrastive.smt2").read_text() == expected


# ---------------------------------------------------------------------------- margins at the solvers' default tolerances
STEP, IDENTITY = Activation.make("step"), Activation.make("identity")


def _boundary_instances():
    """(name, network, x, domain, threshold, kind, the exact minimum or None: no explanation),
    each minimum derived by hand: points exactly on a strict boundary (which must not count as
    its other side) or reached exactly on a closed one (which must count)."""
    box = Domain(np.array([0.5, 0.5]), np.array([1.0, 1.0]))
    low = Domain(np.array([0.0, 0.0]), np.array([0.5, 0.5]))
    step = Network([Layer(np.array([[1.0, 1.0]]), np.array([-1.0]), STEP), Layer(np.array([[1.0]]), np.array([0.0]), IDENTITY)])
    total = Network([Layer(np.array([[1.0, 1.0]]), np.array([0.0]), IDENTITY)])
    relu = Network([Layer(np.eye(2), np.array([-0.5, -0.5]), RELU), Layer(np.array([[1.0, 1.0]]), np.array([0.0]), IDENTITY)])
    mixed = Network([Layer(np.array([[1.0, -1.0]]), np.array([0.0]), STEP), Layer(np.array([[1.0]]), np.array([0.0]), IDENTITY)])
    half = Domain(np.array([0.5, 0.0]), np.array([1.0, 0.5]))
    return [
        # h = y0 + y1 − 1 = 0 at x: the step is 1 (class 1), and nothing in the box lowers h below 0
        ("step at its breakpoint", step, np.array([0.5, 0.5]), box, 0.5, "contrastive", None),
        ("step at its breakpoint (AXp)", step, np.array([0.5, 0.5]), box, 0.5, "abductive", 0),
        # from h < 0 the step reaches 1 only at the breakpoint itself, y = (1/2, 1/2): both features
        ("step reached at its breakpoint", step, np.array([0.25, 0.25]), low, 0.5, "contrastive", 2),
        # f = y0 + y1 = t at x (class 0, a tie); no point of the box has f > t
        ("tie at x", total, np.array([0.5, 0.5]), low, 1.0, "contrastive", None),
        # from f = 1.5 the tie f = t = 1 is reached with one feature at its lower end
        ("tie reached", total, np.array([1.0, 0.5]), box, 1.0, "contrastive", 1),
        # both ReLUs at 0: f = 0 = t (class 0), and f > 0 needs a y_i > 1/2
        ("relu at 0", relu, np.array([0.5, 0.5]), low, 0.0, "contrastive", None),
        ("relu at 0 (AXp)", relu, np.array([0.5, 0.5]), low, 0.0, "abductive", 0),
        # h = y0 − y1 = 0 (step 1, class 1), a non-monotone network: y0 ≥ 1/2 ≥ y1 keeps h ≥ 0
        ("signed step at its breakpoint", mixed, np.array([0.5, 0.5]), half, 0.5, "contrastive", None),
    ]


def _random_instances():
    """Monotone ReLU and step networks with weights on a grid of 2^-2 (ties of units and of the
    output are common), their minimum by brute force over every subset, exactly."""
    for seed in range(4):
        rng = np.random.default_rng(70 + seed)
        n = 4
        activation = RELU if seed % 2 else STEP
        net = random_network(rng, n, (3,), activation, monotone=True, grain=2)
        X = np.round(rng.random((3, n)) * 4) / 4
        threshold = float(np.median(net.forward(X).numpy()))
        for row, x in enumerate(X):
            for kind in ("contrastive", "abductive"):
                problem = Problem.make(net, x, kind, Domain.unit(n), threshold)
                yield f"seed {seed} row {row}", net, x, Domain.unit(n), threshold, kind, monotone_minimum(problem)


def default_highs(path: Path) -> float | None:
    """HiGHS at its default settings: the optimal objective, or None when infeasible."""
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    assert highs.readModel(str(path)) != highspy.HighsStatus.kError
    highs.run()
    status = highs.getModelStatus()
    if status in (highspy.HighsModelStatus.kInfeasible, highspy.HighsModelStatus.kUnboundedOrInfeasible):
        return None
    assert status == highspy.HighsModelStatus.kOptimal, highs.modelStatusToString(status)
    return highs.getInfo().objective_function_value


def default_scip(path: Path) -> float | None:
    """SCIP at its default settings: the optimal objective, or None when infeasible."""
    pyscipopt = pytest.importorskip("pyscipopt")
    model = pyscipopt.Model()
    model.hideOutput()
    model.readProblem(str(path))
    model.optimize()
    status = model.getStatus()
    if status == "infeasible":
        return None
    assert status == "optimal", status
    return model.getObjVal()


@pytest.mark.parametrize("fmt", ["mps", "lp"])
def test_default_tolerances_of_highs_and_scip_decide_every_milp_file_as_certified(tmp_path: Path, fmt: str) -> None:
    """Each file asks the minimum, "≤ m − 1?" and "≤ m?" (m the exact minimum): HiGHS and SCIP at
    their default tolerances (10⁻⁶, the ε of cardinal) answer m, infeasible and feasible, and
    "infeasible" where no explanation exists — ties, steps at their breakpoints, ReLUs at 0
    included (at a margin of ε, both took the tie at x for class 1)."""
    instances = [*_boundary_instances(), *_random_instances()]
    decided = 0
    for index, (name, net, x, domain, threshold, kind, minimum) in enumerate(instances):
        problem = Problem.make(net, x, kind, domain, threshold)
        if refusal(problem, fmt) is not None:
            continue
        questions = [(None, None if minimum is None else float(minimum))]
        if minimum:
            questions += [(minimum - 1, None), (minimum, float(minimum))]
        for at_most, expected in questions:
            out = tmp_path / f"{index}-{at_most}"
            entry = export_inputs(net, x[None, :], [kind], given(net, domain, threshold), out, ExportSettings(fmt, at_most=at_most))[0]
            for solver, answer in (("highs", default_highs), ("scip", default_scip)):
                value = answer(out / entry.file)
                where = f"{name}, {kind}, at most {at_most}: {solver} {value}, certified {expected}"
                assert (value is None) if expected is None else (value is not None and round(value) == expected), where
                if at_most is not None and expected is not None:
                    assert value is not None, where
            decided += 1
    assert decided >= 30

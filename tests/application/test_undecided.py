"""Valid inputs that exact arithmetic cannot decide get an `undecided` record, never exit 2; values
beyond the double range do not crash the exact greedy.

f(y) = sigmoid(y0 − 1/2) + sigmoid(y1 − 1/2) equals 1 exactly at y = (1, 0) (sigmoid(a) +
sigmoid(−a) = 1), a tie no enclosure decides: at t = 1 the prediction of that input is undecided.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from cardinal.solvers.base import solve_minimum
from cardinal.verify.campaign import Unit, certify_unit, units_of
from cardinal.verify.certify import SolverPool, greedy_answers
from cardinal.verify.cli import main
from cardinal.verify.instance import Instance
from cardinal.verify.pipeline import certify
from cardinal.verify.record import Record, read_records
from cardinal.verify.testing import assert_explanations

from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.errors import InputError, UndecidedPrediction
from cardinal.io import JsonLines
from cardinal.network import Layer, Network
from cardinal.problem import Problem

UNDECIDED_ROW, DECIDED_ROW = [1.0, 0.0], [0.75, 0.5]  # f = 1 exactly; f = sigmoid(1/4) + 1/2


def _tie_network() -> Network:
    return Network(
        [
            Layer(np.eye(2), np.full(2, -0.5), Activation.make("sigmoid")),
            Layer(np.ones((1, 2)), np.zeros(1), Activation.make("identity")),
        ]
    )


def _files(tmp_path: Path, net: Network, rows: list[list[float]]) -> tuple[str, str]:
    network, inputs = tmp_path / "net.json", tmp_path / "x.csv"
    net.save(network)
    inputs.write_text("".join(",".join(repr(v) for v in row) + "\n" for row in rows))
    return str(network), str(inputs)


def _lines(capsys: pytest.CaptureFixture) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_an_undecided_prediction_is_not_bad_input() -> None:
    with pytest.raises(UndecidedPrediction, match="undecided") as raised:
        Problem.make(_tie_network(), np.array(UNDECIDED_ROW), threshold=1.0)
    assert not isinstance(raised.value, InputError)
    with pytest.raises(UndecidedPrediction):
        solve_minimum(_tie_network(), np.array(UNDECIDED_ROW), threshold=1.0, solver="enumerate", guarded=False)


def test_tanh_at_zero_decides_a_prediction_exactly() -> None:
    """f(y) = tanh(y0 − 1/2) + 1 is exactly 1 = t at y0 = 1/2 (tanh(0) = 0): p(x) = 0, decided."""
    net = Network(
        [
            Layer(np.array([[1.0, 0.0]]), np.array([-0.5]), Activation.make("tanh")),
            Layer(np.ones((1, 1)), np.ones(1), Activation.make("identity")),
        ]
    )
    assert Problem.make(net, np.array([0.5, 0.0]), threshold=1.0).prediction == 0
    (certificate,) = certify(net, np.array([[0.5, 0.0]]), "contrastive", threshold=1.0, solvers=("enumerate",))
    assert certificate.prediction == 0 and certificate.greedy.check == "exact" and certificate.certified


def test_certify_records_an_undecided_row_and_goes_on(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    network, inputs = _files(tmp_path, _tie_network(), [UNDECIDED_ROW, DECIDED_ROW])
    code = main(["certify", network, "--inputs", inputs, "--threshold", "1", "--kind", "contrastive", "--solvers", "enumerate"])
    undecided, decided = _lines(capsys)
    assert code == 0  # not bad input (2); an uncertified row fails only what --fail-on names
    assert undecided["verdict"] == "undecided" and undecided["prediction"] == -1 and not undecided["certified"]
    assert undecided["solvers"] == {} and undecided["gap"] is None and undecided["greedy_check"] == "undecided"
    assert decided["verdict"] == "greedy_minimal" and decided["certified"]


def test_explain_and_check_record_an_undecided_row(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    network, inputs = _files(tmp_path, _tie_network(), [UNDECIDED_ROW, DECIDED_ROW])
    out = tmp_path / "e.jsonl"
    assert main(["explain", network, "--inputs", inputs, "--threshold", "1", "--kind", "contrastive", "--out", str(out)]) == 0
    undecided, decided = (json.loads(line) for line in out.read_text().splitlines())
    assert undecided["check"] == "undecided" and undecided["prediction"] == -1
    assert decided["check"] == "exact" and decided["prediction"] == 1
    code = main(["check", network, "--inputs", inputs, "--threshold", "1", "--explanations", str(out)])
    undecided, decided = _lines(capsys)
    assert code == 1 and undecided["verdict"] == "undecided" and decided["verdict"] == "valid"


def test_testing_helper_does_not_judge_an_undecided_greedy_answer() -> None:
    """At x = (0, 0), t = 0.99, p(x) = 0 is decided, and either feature alone is a CXp (f = 1), but
    which one Algorithm 1 takes is not: the float answer is valid, yet it is no evidence about greedy."""
    with pytest.raises(AssertionError, match=r"row 0 \(contrastive\) .*undecided.*Algorithm 1"):
        assert_explanations(_tie_network(), np.zeros((1, 2)), kind="contrastive", threshold=0.99)


def test_campaign_records_an_undecided_row(tmp_path: Path) -> None:
    net = _tie_network()
    greedy = greedy_answers(net, np.array([UNDECIDED_ROW]), "contrastive", Domain.unit(2), 1.0)[1][0]
    assert greedy.check == "undecided"
    unit = Unit(
        key="tie:0:contrastive",
        instance="tie",
        family="test",
        activation="sigmoid",
        network=net.to_json(),
        network_hash=net.hash,
        widths=net.widths,
        domain=Domain.unit(2).to_json(),
        threshold=1.0,
        x=tuple(UNDECIDED_ROW),
        row=0,
        kind="contrastive",
        output=1.0,
        greedy=greedy,
        solvers=("enumerate",),
        time_limit=10.0,
    )
    with SolverPool(("enumerate",)) as pool:
        ((record, case, _),) = certify_unit(unit, pool)
    assert case is None and record.verdict == "undecided" and record.prediction == -1 and not record.certified
    read = Record.from_json(json.loads(json.dumps(record.to_json())))
    assert read.verdict == "undecided" and read.greedy.check == "undecided" and read.gap is None


# ---------------------------------------------------------------------------- beyond the double range
def _huge(tmp_path: Path) -> tuple[str, str]:
    """f = 2·y0 + y1 on [0, 1e308]², at x = (1e308, 0): f(x) = 2e308 does not fit a double."""
    return _files(tmp_path, Network([Layer(np.array([[2.0, 1.0]]), np.zeros(1), Activation.make("identity"))]), [[1e308, 0.0]])


def test_explain_beyond_the_double_range(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    network, inputs = _huge(tmp_path)
    assert main(["explain", network, "--inputs", inputs, "--upper", "1e308"]) == 0
    cxp, axp = _lines(capsys)
    assert cxp["output"] is None and cxp["prediction"] == 1  # f(x) overflows float64: no "Infinity" in the JSON
    assert cxp["features"] == [0] and cxp["check"] == "exact" and axp["features"] == [0] and axp["check"] == "exact"


def test_certify_beyond_the_double_range(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    network, inputs = _huge(tmp_path)
    assert main(["certify", network, "--inputs", inputs, "--upper", "1e308", "--solvers", "enumerate"]) == 0
    for line in _lines(capsys):
        assert line["greedy"]["features"] == [0] and line["verdict"] == "greedy_minimal" and line["certified"], line


def test_campaign_record_beyond_the_double_range_is_json_and_reads_back(tmp_path: Path) -> None:
    """f(x) = 2e308 overflows float64: the record's output and margin are null (JSON), not
    Infinity, and `--resume` reads the record back (issue 24 leftover)."""
    net = Network([Layer(np.array([[2.0, 1.0]]), np.zeros(1), Activation.make("identity"))])
    instance = Instance("huge", "test", net, np.array([[1e308, 0.0]]), 0.0, Domain(np.zeros(2), np.full(2, 1e308)), ("contrastive",))
    (unit,) = units_of(instance, ("enumerate",), 10.0, set())
    with SolverPool(("enumerate",)) as pool:
        ((record, _, _),) = certify_unit(unit, pool)
    log = JsonLines(tmp_path / "records.jsonl")
    log.append(record.to_json())
    text = (tmp_path / "records.jsonl").read_text()
    assert "Infinity" not in text and json.loads(text, parse_constant=pytest.fail)["output"] is None
    (read,) = read_records(tmp_path / "records.jsonl")
    assert read.output is None and read.margin is None and read.verdict == "greedy_minimal" and read.certified


@pytest.mark.parametrize(
    ("weights", "x", "upper", "reason"),
    [
        ([2.0, 1.0], [1e308, 0.0], 1e308, "a number of the input (1e+308)"),  # the box
        ([2.0**53, 1.0], [1.0, 0.0], 1.0, "a number of layer 1's weights (9.01e+15)"),  # 2^53: HiGHS refused the model
        ([1e10, 1.0], [1e10, 0.0], 1e10, "a unit's bound reaches 1e+20"),  # every number fits, the product does not
    ],
)
@pytest.mark.parametrize("guarded", [False, True])
def test_magnitudes_a_float_milp_cannot_carry_are_unsupported(weights: list[float], x: list[float], upper: float, reason: str, guarded: bool) -> None:
    """Gurobi and HiGHS answer `unsupported` with the reason, not `error` with a Python exception
    text ("cannot convert NaN to integer ratio", "HiGHS rejected the model"); z3 and enumerate
    answer exactly, and nothing prints a RuntimeWarning (issue 24 leftover)."""
    net = Network([Layer(np.array([weights]), np.array([-1.0]), Activation.make("relu")), Layer(np.ones((1, 1)), np.zeros(1), Activation.make("identity"))])
    domain = Domain(np.zeros(2), np.full(2, upper))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for kind in ("contrastive", "abductive"):
            for name in ("gurobi", "highs"):
                outcome = solve_minimum(net, np.array(x), kind, domain, 0.0, solver=name, time_limit=10.0, guarded=guarded)
                assert outcome.status == "unsupported" and reason in outcome.message, (name, kind, outcome)
            for name in ("z3", "enumerate"):
                outcome = solve_minimum(net, np.array(x), kind, domain, 0.0, solver=name, time_limit=10.0, guarded=guarded)
                assert outcome.status == "optimal" and outcome.solution == (0,) and outcome.replayed, (name, kind, outcome)


def test_z3_bounds_that_overflow_close_nothing_and_print_nothing() -> None:
    """f = relu(1e200·relu(1e200·(y0 + y1 + y2) − 1e200)) reaches 1e400 at x = (1, 1, 0): z3's float
    node bounds overflow to inf and NaN, which decide nothing (the sets are judged exactly); it
    answered `error` with "RuntimeWarning: invalid value encountered in subtract"."""
    relu = Activation.make("relu")
    net = Network(
        [
            Layer(np.full((1, 3), 1e200), np.array([-1e200]), relu),
            Layer(np.full((1, 1), 1e200), np.zeros(1), relu),
            Layer(np.ones((1, 1)), np.zeros(1), Activation.make("identity")),
        ]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for kind, size in (("contrastive", 1), ("abductive", 2)):
            outcome = solve_minimum(net, np.array([1.0, 1.0, 0.0]), kind, Domain.unit(3), 0.0, solver="z3", guarded=False)
            assert outcome.status == "optimal" and len(outcome.solution) == size and outcome.replayed, outcome

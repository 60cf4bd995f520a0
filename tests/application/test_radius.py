"""Each input its own box (`Domain.ball`, `--radius`): clipping, bad radii, and explanations on
ball boxes against brute force (issue 27, Domains)."""

from __future__ import annotations

import json
from pathlib import Path

import gurobipy  # noqa: F401 (the [all] extras promise it: missing fails, not skips)
import highspy  # noqa: F401
import numpy as np
import pytest
import z3  # noqa: F401
from cardinal.solvers.base import get_solver, solve_problem
from cardinal.verify.cli import main
from cardinal.verify.generate import random_network

from cardinal.domain import Domain
from cardinal.errors import InputError
from cardinal.exact import ExactNetwork
from cardinal.problem import Problem, Status
from tests.bruteforce import monotone_minimum

# The limit of a call whose answer a test asserts: none that a run here comes near, so that no
# answer depends on the machine's speed (a limit of seconds ended calls undecided on a loaded machine).
UNBOUNDED = 3600.0


def test_a_ball_is_clipped_to_the_box_feature_by_feature() -> None:
    box = Domain.broadcast([0.0, 0.0, -1.0], [1.0, 2.0, 1.0], 3)
    ball = box.ball(np.array([0.05, 1.0, 0.95]), [0.1, 0.5, 0.2])
    # 0.05 + 0.1 is exactly 0.15000000000000000832…: the largest double at most that is 0.15 (the
    # float sum rounds up to 0.15000000000000002, outside the ball)
    assert ball.lower.tolist() == [0.0, 0.5, 0.75] and ball.upper.tolist() == [0.15, 1.5, 1.0]
    assert box.ball(np.array([0.5, 0.5, 0.5]), 10.0).same_as(box)  # a radius beyond the box: the box


@pytest.mark.parametrize(
    ("radius", "message"),
    [
        (0.0, r"^radius is 0\.0: a radius must be a finite number > 0$"),
        (-0.1, r"^radius is -0\.1: a radius must be a finite number > 0$"),
        (float("nan"), r"^radius is nan: a radius must be a finite number > 0$"),
        ([0.1, float("inf"), 0.1], r"^radius of feature 1 is inf: a radius must be a finite number > 0$"),
        ([0.1, 0.2], r"^radius has 2 entries, the domain has 3 features \(give one number or 3\)$"),
    ],
)
def test_bad_radii_are_refused_naming_the_feature(radius: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        Domain.unit(3).ball(np.zeros(3), radius)


def test_a_binary_box_has_no_ball() -> None:
    with pytest.raises(InputError, match="binary domain has no ball"):
        Domain.boolean(2).ball(np.zeros(2), 0.5)


def _write(tmp_path: Path, net, X: np.ndarray) -> tuple[str, str]:
    net_path, inputs = tmp_path / "net.json", tmp_path / "X.csv"
    net_path.write_text(json.dumps(net.to_json()))
    inputs.write_text("".join(",".join(repr(float(v)) for v in row) + "\n" for row in X))
    return str(net_path), str(inputs)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("seed", range(3))
def test_explain_and_certify_on_balls_match_brute_force(tmp_path: Path, seed: int) -> None:
    """Monotone nets (n = 6), radius 0.15: each row's box is its ball, so greedy's answers and the
    certified minima equal the brute-force minimum over that ball (the shortcut over all 2^n
    subsets), which differs from the whole box's for some row; every line records the radius."""
    rng = np.random.default_rng(seed)
    net = random_network(rng, 6, (5,), "relu")
    X = rng.random((6, 6))
    threshold = float(np.median(net.forward(X).numpy()))
    net_path, inputs = _write(tmp_path, net, X)
    flags = ["--inputs", inputs, "--radius", "0.15", "--threshold", repr(threshold)]
    assert main(["explain", net_path, *flags, "--out", str(tmp_path / "e.jsonl")]) == 0
    assert main(["certify", net_path, *flags, "--solvers", "enumerate", "--out", str(tmp_path / "c.jsonl")]) == 0
    differs = False
    certificates = {(line["row"], line["kind"]): line for line in _lines(tmp_path / "c.jsonl")}
    for explained in _lines(tmp_path / "e.jsonl"):
        certified = certificates.pop((explained["row"], explained["kind"]))
        x, kind = X[explained["row"]], explained["kind"]
        problem = Problem.make(net, x, kind, Domain.unit(6).ball(x, 0.15), threshold)
        expected = monotone_minimum(problem)
        assert explained["radius"] == certified["radius"] == 0.15
        if expected is None:
            assert certified["verdict"] == "none_exists" and certified["minimum"] is None
        else:
            assert certified["minimum_proved"] and len(certified["minimum"]) == expected
        assert explained["exists"] == (expected is not None)
        if kind == "contrastive" and explained["exists"]:  # the witness lies in the ball and flips
            witness = np.array(explained["witness"])
            assert problem.domain.check(witness[None, :]) is not None
            assert ExactNetwork(net).predictions(witness[None, :], threshold)[0] != problem.prediction
        differs |= expected != monotone_minimum(Problem.make(net, x, kind, Domain.unit(6), threshold))
    assert not certificates and differs  # the radius changes some answer


@pytest.mark.parametrize("seed", range(3))
def test_exact_engines_agree_on_balls_of_k_class_networks(seed: int) -> None:
    """K = 3, n = 4, signed weights, radius 0.3: z3's exact minimum sizes equal the MILPs' on the ball
    box (each answer replayed), and every CXp's witness lies in the ball."""
    available = ("z3", "gurobi", "highs")
    rng = np.random.default_rng(300 + seed)
    net = random_network(rng, 4, (6,), "relu", monotone=False, outputs=3)
    x = rng.random(4)
    ball = Domain.unit(4).ball(x, 0.3)
    for kind in ("contrastive", "abductive"):
        problem = Problem.make(net, x, kind, ball)
        sizes = {}
        for name in available:
            with get_solver(name) as backend:
                outcome = solve_problem(backend, problem, None, UNBOUNDED)
            assert outcome.status in (Status.OPTIMAL, Status.NONE_EXISTS), (name, kind, outcome)
            sizes[name] = outcome.size if outcome.status == Status.OPTIMAL else None
            if kind == "contrastive" and outcome.status == Status.OPTIMAL:
                assert outcome.replayed and ball.check(np.array(outcome.witness)[None, :]) is not None
        assert len(set(sizes.values())) == 1, (seed, kind, sizes)


def test_check_takes_the_radius_the_explanations_record(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """explain records the radius; check judges its file over the same balls without a flag
    (all valid), and judged at another --radius it says so on stderr."""
    rng = np.random.default_rng(5)
    net = random_network(rng, 5, (4,), "relu")
    X = rng.random((4, 5))
    net_path, inputs = _write(tmp_path, net, X)
    threshold = repr(float(np.median(net.forward(X).numpy())))
    explained = tmp_path / "e.jsonl"
    assert (
        main(["explain", net_path, "--inputs", inputs, "--radius", "0.2", "--threshold", threshold, "--out", str(explained)]) == 0
    )
    checked = tmp_path / "k.jsonl"
    assert main(["check", net_path, "--inputs", inputs, "--explanations", str(explained), "--out", str(checked)]) == 0
    assert "radius 0.2 (from" in capsys.readouterr().err
    assert all(line["verdict"] == "valid" and line["radius"] == 0.2 for line in _lines(checked))
    main(["check", net_path, "--inputs", inputs, "--explanations", str(explained), "--radius", "0.5", "--out", str(checked)])
    assert "records radius 0.2" in capsys.readouterr().err
    assert all(line["radius"] == 0.5 for line in _lines(checked))


@pytest.mark.parametrize(
    ("radius", "message"),
    [
        ("0", "--radius is 0.0: a radius must be a finite number > 0"),
        ("-1", "--radius is -1.0: a radius must be a finite number > 0"),
        ("0.1,0.2", "--radius has 2 entries, the domain has 3 features"),
        ("0.1,0,0.1", "--radius of feature 1 is 0.0"),
        ("nan", "argument --radius"),
    ],
)
def test_bad_radius_flags_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture, radius: str, message: str) -> None:
    net = random_network(np.random.default_rng(0), 3, (2,), "relu")
    net_path, inputs = _write(tmp_path, net, np.full((1, 3), 0.5))
    for command in ("explain", "certify"):
        assert main([command, net_path, "--inputs", inputs, f"--radius={radius}"]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err


def test_crosscheck_radius_gives_every_row_its_ball(tmp_path: Path) -> None:
    """run_campaign with `CampaignSettings(radius=...)`: instances renamed ID@rR, records carry the radius, and the minimum
    each record certifies is the brute-force minimum over its row's ball."""
    from cardinal.verify.campaign import CampaignSettings, run_campaign
    from cardinal.verify.instance import Instance
    from cardinal.verify.record import read_records

    rng = np.random.default_rng(11)
    net = random_network(rng, 5, (4,), "relu")
    X = rng.random((3, 5))
    threshold = float(np.median(net.forward(X).numpy()))
    instance = Instance("tiny", "test", net, X, threshold, Domain.unit(5))
    run_campaign("quick", tmp_path / "c", CampaignSettings(("enumerate",), 10.0, radius=0.2), instances=[instance])
    records = read_records(tmp_path / "c" / "records.jsonl")
    assert len(records) == 6
    for record in records:
        assert record.instance == "tiny@r0.2" and record.radius == 0.2
        x = X[record.row]
        expected = monotone_minimum(Problem.make(net, x, record.kind.value, Domain.unit(5).ball(x, 0.2), threshold))
        assert (record.minimum is None) == (expected is None)
        assert expected is None or len(record.minimum) == expected


def test_interval_bounds_decide_no_flip_on_a_small_ball() -> None:
    """The exact set oracle proves "no y in the box flips" by exact interval arithmetic before any
    engine (here none at all): on a small ball around a K = 3 input whose class is robust, and not
    on the whole box, where classes change."""
    from cardinal.solvers.oracle import SetOracle

    rng = np.random.default_rng(21)
    net = random_network(rng, 4, (6,), "relu", monotone=False, outputs=3)
    x = rng.random(4)
    everything = frozenset(range(4))
    with SetOracle(engines=()) as oracle:
        small = oracle.flip(Problem.make(net, x, "contrastive", Domain.unit(4).ball(x, 1e-3)), everything, 5.0)
        whole = oracle.flip(Problem.make(net, x, "contrastive", Domain.unit(4)), everything, 5.0)
    assert small.answer is False and small.note == "exact interval bounds over the box"
    assert whole.answer is None


def test_a_float_milps_none_exists_on_a_ball_is_certified(tmp_path: Path) -> None:
    """certify with HiGHS alone on a 12-feature K = 3 net at radius 1e-3: its "no CXp exists" and
    its empty AXp are replayed exactly (interval bounds), so both records are certified."""
    from cardinal.verify.pipeline import Plan, certify

    rng = np.random.default_rng(22)
    net = random_network(rng, 12, (8,), "relu", monotone=False, outputs=3)
    X = rng.random((2, 12))
    for kind in ("contrastive", "abductive"):
        for certificate in certify(net, X, kind, solvers=("highs",), radius=1e-3, plan=Plan(time_limit=UNBOUNDED)):
            assert certificate.certified, certificate
            assert certificate.minimum == (None if kind == "contrastive" else ())


def test_class_margins_prove_what_output_intervals_cannot() -> None:
    """One hidden unit z ∈ [0, 1]; f_0 = z and f_1 = z − 1/2: class 0 everywhere. The outputs'
    enclosures overlap ([0, 1] and [−1/2, 1/2]), but the margin f_0 − f_1 = 1/2 is proved."""
    from cardinal.activations import Activation
    from cardinal.network import Layer, Network

    net = Network(
        [
            Layer(np.array([[1.0]]), np.array([0.0]), Activation.make("relu")),
            Layer(np.array([[1.0], [1.0]]), np.array([0.0, -0.5]), Activation.make("identity")),
        ]
    )
    exact = ExactNetwork(net)
    assert exact.box_keeps(np.zeros(1), np.ones(1), 0, None)
    assert not exact.box_keeps(np.zeros(1), np.ones(1), 1, None)

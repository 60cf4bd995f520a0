"""The held-out query mix of bench/solvers.py (`bench/heldout.py`): its queries, its scoring
(solved, wrong, PAR-2, the virtual best solver), the peer on its new questions against brute
force, and one tiny run of the whole report."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest
from bruteforce import monotone_minimum, random_network
from cardinal.solvers.base import get_solver, solve_problem

from bench import heldout
from bench.peer import PEER
from bench.solvers import Calls, _row, virtual_best
from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.problem import Outcome, Problem, Status

# The limit of a call whose answer a test asserts: none that a run here comes near, so that no
# answer depends on the machine's speed (a limit of seconds ended calls undecided on a loaded machine).
UNBOUNDED = 3600.0


def test_queries_sit_at_their_fractions_of_the_way_to_the_counterpoint() -> None:
    mix = heldout.queries("monotone-28", networks=1, inputs=2)
    assert {q.label.query for q in mix} == set(heldout.QUERIES)
    for query in mix:
        problem = Problem.make(query.net, query.x, query.kind, Domain.unit(28), query.threshold)
        fx, fc = (float(query.net.forward(point)) for point in (query.x, problem.counterpoint))
        assert query.threshold == pytest.approx(fx + query.label.alpha * (fc - fx))
        if query.label.query.startswith("certify"):
            assert query.at_most is not None and query.at_most >= 0
        else:
            assert query.at_most is None
    assert {Problem.make(q.net, q.x, "contrastive", Domain.unit(28), q.threshold).prediction for q in mix} == {0, 1}
    signed = heldout.queries("signed-64", networks=1, inputs=1)
    assert {q.label.query for q in signed} == {"cxp", "axp"} and not signed[0].net.is_monotone and signed[0].net.n_inputs == 64


def _outcome(
    status: Status, size: int | None = None, exact: bool = False, replayed: bool = True, seconds: float = 0.1
) -> Outcome:
    solution = None if size is None else tuple(range(size))
    return Outcome(status, "x", seconds, solution, exact=exact, replayed=replayed and size is not None)


def test_judge_marks_float_claims_that_exact_evidence_contradicts() -> None:
    label = heldout.Label("monotone-28", "cxp", 0.8)
    calls = heldout.judge(
        label,
        {
            "z3": _outcome(Status.OPTIMAL, 2, exact=True),
            "milp": _outcome(Status.OPTIMAL, 3),  # its "nothing smaller" is contradicted by z3's set of 2
            "slow": _outcome(Status.TIMEOUT, seconds=7.0),
            "lost": _outcome(Status.OPTIMAL, 2, replayed=False),
        },
        time_limit=5.0,
    )
    assert calls["z3"] == (0.1, "optimal", False) and calls["milp"][2] is True
    assert calls["slow"] == (5.0, "timeout", False) and calls["lost"][1] == "optimal-unreplayed"
    assert [heldout.solved(calls[name], "cxp") for name in ("z3", "milp", "slow", "lost")] == [True, False, False, False]
    with pytest.raises(SystemExit, match="exact evidence conflicts"):
        heldout.judge(label, {"z3": _outcome(Status.NONE_EXISTS, exact=True), "milp": _outcome(Status.OPTIMAL, 2)}, 5.0)


def test_par2_and_the_virtual_best_solver() -> None:
    labels = [heldout.Label("monotone-28", "cxp", 0.5), heldout.Label("monotone-28", "cxp", 0.8)]
    results = [
        {"a": (0.2, "optimal", False), "b": (0.1, "optimal", False), PEER: (0.01, "optimal", False)},
        {"a": (1.0, "timeout", False), "b": (0.3, "optimal", True)},
    ]
    rows = {row[2]: row for row in heldout.table(results, labels, 1.0, PEER) if row[1] == "cxp"}
    assert rows["a"][4:6] == [1, "1.100"]  # (0.2 + 2·1) / 2
    assert rows["b"][4:6] == [1, "1.050"]  # the wrong answer counts as unsolved
    assert rows["VBS"][4:6] == [1, "1.050"]  # the peer is not part of the VBS
    assert list(rows) == ["a", "b", PEER, "VBS"]
    sweep: Calls = {
        "a": [(0.2, "none_within", False), (1.0, "timeout", False)],
        "b": [(0.1, "optimal", True), (0.4, "optimal", False)],
    }
    assert virtual_best(sweep, 1.0) == [(0.2, "none_within", False), (0.4, "none_within", False)]
    assert _row("depth", 28, (32,), "a", sweep["a"], 1.0)[-1] == "1.100"


def test_the_peer_answers_minimum_questions_like_brute_force() -> None:
    importlib.import_module("gurobi_ml")
    importlib.import_module("z3")
    from bench.peer import Peer, peer_model

    rng = np.random.default_rng(7)
    relu = Activation.make("relu")
    peer = Peer()
    checked = 0
    try:
        for monotone in (True, False):
            for _ in range(4):
                net = random_network(rng, 5, (4, 3), relu, monotone=monotone)
                x = rng.random(5)
                threshold = float(net.forward(x)) + float(rng.choice([-0.1, 0.1]))
                kinds = ("contrastive", "abductive") if monotone else ("contrastive",)
                for kind in kinds:
                    problem = Problem.make(net, x, kind, Domain.unit(5), threshold)
                    outcome = peer.solve(peer_model(net), problem, None, UNBOUNDED)
                    if monotone:
                        minimum = monotone_minimum(problem)
                    else:  # a real box has no brute force: z3 (exact) is the reference
                        with get_solver("z3") as z3:
                            reference = solve_problem(z3, problem, None, UNBOUNDED)
                        minimum = reference.size if reference.status == Status.OPTIMAL else None
                    if minimum is None:
                        assert outcome.status == Status.NONE_EXISTS, outcome
                    else:
                        assert outcome.status == Status.OPTIMAL and outcome.size == minimum and outcome.replayed, outcome
                    checked += 1
        signed = random_network(rng, 4, (3,), relu, monotone=False)
        problem = Problem.make(signed, np.full(4, 0.5), "abductive", Domain.unit(4), 0.0)
        assert peer.solve(peer_model(signed), problem, None, 5.0).status == Status.UNSUPPORTED
    finally:
        peer.close()
    assert checked >= 10


def test_a_tiny_held_out_run_writes_its_tables(tmp_path: Path) -> None:
    importlib.import_module("z3")
    from bench.solvers import main

    out = tmp_path / "solvers.md"
    main(["--sweeps", "none", "--families", "monotone-28", "--networks", "1", "--inputs", "1",
          "--solvers", "z3", "--no-peer", "--time-limit", "20", "--out", str(out)])  # fmt: skip
    text = out.read_text()
    assert "## A held-out query mix" in text and "## Certification" not in text
    assert "| monotone-28 | all         | z3       |      12 |       12 |" in text
    assert (tmp_path / "solvers_heldout_cactus.png").stat().st_size > 1000


def test_a_seeded_draw_is_the_same_queries_for_the_same_seed() -> None:
    first, again = (heldout.draw(5, "axp-signed-64", networks=2, inputs=2) for _ in range(2))
    assert len(first) == len(again) == 4
    for one, other in zip(first, again, strict=True):
        assert one.label == other.label and one.kind == other.kind == "abductive" and one.threshold == other.threshold
        assert np.array_equal(one.x, other.x) and one.net.to_json() == other.net.to_json()
        assert not one.net.is_monotone and one.net.n_inputs == 64 and 0.5 <= one.label.alpha <= 0.95
    assert first[0].net is first[1].net and first[1].net is not first[2].net  # `inputs` rows per network
    other_seed = heldout.draw(6, "axp-signed-64", networks=2, inputs=2)
    assert not np.array_equal(other_seed[0].x, first[0].x)
    monotone = heldout.draw(5, "cxp-monotone-28", networks=1, inputs=1)[0]
    assert monotone.kind == "contrastive" and monotone.net.is_monotone and monotone.label.query == "cxp"


def test_the_seeded_runs_asserts_fire_on_a_corrupted_answer() -> None:
    pytest.importorskip("z3")
    from dataclasses import replace

    from cardinal.solvers.base import replay

    query = heldout.draw(3, "cxp-monotone-28", networks=1, inputs=1)[0]
    problem = Problem.make(query.net, query.x, query.kind, Domain.unit(28), query.threshold)
    with get_solver("z3") as z3:
        ours = solve_problem(z3, problem, None, UNBOUNDED)
    assert ours.status == Status.OPTIMAL and ours.exact and ours.replayed and ours.size >= 2, ours
    peer = replace(ours, solver=PEER, exact=False)
    heldout.agree(query, ours, peer)  # the same answer twice: no complaint
    heldout.agree(query, ours, None)
    dropped = replay(problem, replace(ours, solution=ours.solution[1:], witness=None, replayed=False))
    assert dropped.status == Status.REFUTED  # one feature fewer is no CXp: the exact replay says so
    with pytest.raises(heldout.Disagreement, match="without a standing set"):
        heldout.agree(query, dropped, peer)
    larger = replay(problem, replace(peer, solution=tuple(range(28)), witness=None, replayed=False))
    assert larger.status == Status.OPTIMAL and larger.replayed  # a valid set, but the peer claims it minimal
    with pytest.raises(heldout.Disagreement, match=f"cardinal optimal of size {ours.size}, peer optimal of size 28"):
        heldout.agree(query, ours, larger)
    with pytest.raises(heldout.Disagreement, match="not replayed and exact"):
        heldout.agree(query, replace(ours, exact=False), peer)
    with pytest.raises(heldout.Disagreement):
        heldout.agree(query, ours, replace(peer, status=Status.NONE_EXISTS, solution=None, witness=None))


def test_a_tiny_seeded_run_writes_its_table_and_refuses_an_unknown_mix(tmp_path: Path, capsys) -> None:
    pytest.importorskip("gurobi_ml")
    pytest.importorskip("z3")
    out = tmp_path / "heldout.md"
    heldout.main(["--seed", "3", "--mixes", "cxp-monotone-28", "--networks", "1", "--inputs", "1", "--time-limit", "30",
                  "--out", str(out)])  # fmt: skip
    text = out.read_text()
    assert "--seed 3 --networks 1 --inputs 1 --time-limit 30 --mixes cxp-monotone-28" in text and "Load (`uptime`)" in text
    row = next(line for line in text.splitlines() if line.startswith("| cxp-monotone-28"))
    assert [cell.strip() for cell in row.strip("|").split("|")][1:4] == ["1", "1", "1"]  # both answered the one query
    with pytest.raises(SystemExit) as stop:
        heldout.main(["--seed", "3", "--mixes", "cxp-nowhere", "--out", str(tmp_path / "x.md")])
    assert stop.value.code == 2 and "--mixes" in capsys.readouterr().err and not (tmp_path / "x.md").exists()

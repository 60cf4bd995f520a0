"""Campaigns end to end: records, summary, figures, cases; kill and resume; workers; replay;
the paper's SET-COVER construction."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch  # noqa: F401 (the [all] extras promise it: missing fails, not skips)
from cardinal.solvers import registry
from cardinal.verify.campaign import CampaignResult, CampaignSettings, certify_unit, run_campaign
from cardinal.verify.cases import Case, replay
from cardinal.verify.cli import main
from cardinal.verify.generate import (
    median_threshold,
    minimum_set_cover,
    random_network,
    random_set_cover,
    set_cover_network,
    set_cover_problem,
)
from cardinal.verify.instance import Instance
from cardinal.verify.record import without_timings

from cardinal.domain import Domain
from cardinal.io import JsonLines


def tiny_instances() -> list[Instance]:
    """Small random relu/step networks plus the DESIGN network (a known counterexample)."""
    rng = np.random.default_rng(3)
    instances = []
    for activation in ("relu", "step"):
        net = random_network(rng, 6, (4, 3), activation)
        X = rng.random((3, 6))
        instances.append(Instance(f"tiny-{activation}", "random", net, X, median_threshold(net, X), Domain.unit(6)))
    from cardinal.network import Network
    from tests.conftest import DESIGN_NETWORK

    design = Network.from_json(DESIGN_NETWORK)
    instances.append(Instance("design", "hand-built", design, np.array([[1.0, 1.0, 1.0]]), 0.5, Domain.unit(3)))
    return instances




@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CampaignResult]:
    """One uninterrupted campaign of the tiny instances (enumerate, one worker), shared by the
    module's tests as the reference of their interrupted, killed and two-worker runs: its folder
    (read-only) and its result."""
    folder = tmp_path_factory.mktemp("whole")
    return folder, run_campaign("tiny", folder, CampaignSettings(("enumerate",), 30.0), instances=tiny_instances())


def test_end_to_end_campaign(whole: tuple[Path, CampaignResult]) -> None:
    folder, result = whole
    records = JsonLines(folder / "records.jsonl").read()
    assert result.records == len(records) == 2 * (3 + 3 + 1)
    keys = {
        "instance",
        "family",
        "activation",
        "network_hash",
        "n",
        "kind",
        "prediction",
        "margin",
        "greedy",
        "solvers",
        "verdict",
    }
    assert all(keys <= set(record) for record in records)
    design = {r["kind"]: r for r in records if r["instance"] == "design"}
    assert design["contrastive"]["verdict"] == "greedy_suboptimal" and design["contrastive"]["gap"] == 1
    assert design["contrastive"]["certified"] is True
    assert design["abductive"]["verdict"] == "greedy_minimal"
    assert all(r["verdict"] in ("greedy_minimal", "greedy_suboptimal", "none_exists") for r in records)
    summary = (folder / "summary.md").read_text()
    assert "greedy_suboptimal" in summary and "## Solver runtimes" in summary
    for name in ("gap_distribution", "greedy_vs_minimum", "certification_cactus", "certification_time"):
        assert (folder / "figures" / f"{name}.png").stat().st_size > 0
        assert f"](figures/{name}.png)" in summary
    cases = sorted((folder / "cases").glob("*.json"))
    assert len(cases) == sum(r["verdict"] == "greedy_suboptimal" for r in records) >= 1
    assert all(replay(Case.load(path)).holds for path in cases)


def test_interrupted_then_resumed_equals_uninterrupted(tmp_path: Path, whole: tuple[Path, CampaignResult]) -> None:
    reference = whole[0]

    def stop_after_five(done: int, total: int, key: str) -> None:
        if done == 5:
            raise KeyboardInterrupt

    parts = tmp_path / "parts"
    first = run_campaign("tiny", parts, CampaignSettings(("enumerate",), 30.0), instances=tiny_instances(), progress=stop_after_five)
    assert first.interrupted and first.records == 5
    with pytest.raises(ValueError, match="pass --resume"):
        run_campaign("tiny", parts, CampaignSettings(("enumerate",), 30.0), instances=tiny_instances())
    second = run_campaign("tiny", parts, CampaignSettings(("enumerate",), 30.0), resume=True, instances=tiny_instances())
    assert second.new == second.records - 5
    assert without_timings(JsonLines(parts / "records.jsonl").read()) == without_timings(JsonLines(reference / "records.jsonl").read())


KILL_SCRIPT = """
import sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from tests.application.test_campaign import tiny_instances
from cardinal.verify.campaign import CampaignSettings, run_campaign

def slow(done, total, key):
    time.sleep(0.3)  # leave time for the kill to land mid-run

run_campaign("tiny", Path({out!r}), CampaignSettings(("enumerate",), 30.0), resume=True, instances=tiny_instances(), progress=slow)
"""


def test_killed_run_loses_no_finished_record(tmp_path: Path, whole: tuple[Path, CampaignResult]) -> None:
    out = tmp_path / "killed"
    root = str(Path(__file__).resolve().parents[2])
    script = KILL_SCRIPT.format(root=root, out=str(out))
    process = subprocess.Popen([sys.executable, "-c", script], cwd=root)
    log = out / "records.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not log.exists() or len(log.read_text().splitlines()) < 3):
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    finished = JsonLines(log).read()
    assert 3 <= len(finished) < 14  # every line whole, and the run really was cut short
    run_campaign("tiny", out, CampaignSettings(("enumerate",), 30.0), resume=True, instances=tiny_instances())
    reference = whole[0]
    assert without_timings(JsonLines(log).read()) == without_timings(JsonLines(reference / "records.jsonl").read())
    assert sorted(p.name for p in (out / "cases").glob("*.json")) == sorted(p.name for p in (reference / "cases").glob("*.json"))


def test_torn_last_line_is_dropped_and_cut_before_the_next_append(tmp_path: Path) -> None:
    log = JsonLines(tmp_path / "records.jsonl")
    log.append({"key": "a"})
    with log.path.open("a") as stream:
        stream.write('{"key": "b", "trunc')
    assert log.read() == [{"key": "a"}]
    log.append({"key": "c"})
    assert log.read() == [{"key": "a"}, {"key": "c"}]
    assert log.path.read_text() == '{"key": "a"}\n{"key": "c"}\n'


def test_two_workers_equal_one(tmp_path: Path, whole: tuple[Path, CampaignResult]) -> None:
    run_campaign("tiny", tmp_path / "two", CampaignSettings(("enumerate",), 30.0, workers=2), instances=tiny_instances())
    one = without_timings(JsonLines(whole[0] / "records.jsonl").read())
    two = without_timings(JsonLines(tmp_path / "two" / "records.jsonl").read())
    assert one == two and len(one) == 14


def test_replay_accepts_a_case_and_rejects_tampering(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run_campaign("tiny", tmp_path, CampaignSettings(("enumerate",), 30.0), instances=tiny_instances()[2:])
    [path] = (tmp_path / "cases").glob("*.json")
    assert main(["replay", str(path)]) == 0
    assert "the case holds" in capsys.readouterr().out
    document = json.loads(path.read_text())
    tampered = {
        "minimum-not-valid": {**document, "minimum": [0]},
        "bias-changed": {
            **document,
            "network": {
                **document["network"],
                "layers": [{**document["network"]["layers"][0], "bias": [0.0, 0.0]}, document["network"]["layers"][1]],
            },
        },
        "greedy-enlarged": {**document, "greedy": [0, 1, 2], "minimum": [0, 2], "threshold": 0.7},
        "greedy-not-valid": {**document, "greedy": [0, 1]},
    }
    for name, changed in tampered.items():
        target = tmp_path / f"{name}.json"
        target.write_text(json.dumps(changed))
        assert main(["replay", str(target)]) == 1, name
        assert "does NOT hold" in capsys.readouterr().out
    target = tmp_path / "broken.json"
    target.write_text("{")
    assert main(["replay", str(target)]) == 2


@pytest.mark.parametrize("activation", ["step", "hardtanh"])
def test_set_cover_network_gives_exactly_the_minimum_cover(activation: str) -> None:
    """Theorems 1 and 2: the minimum CXp of x = 0 and the minimum AXp of x = 1 are minimum covers."""
    from cardinal.solvers.base import solve_minimum

    rng = np.random.default_rng(11)
    for _ in range(4):
        sets = random_set_cover(rng, universe=5, n_sets=7)
        cover = minimum_set_cover(sets, 5)
        for kind in ("contrastive", "abductive"):
            net, x = set_cover_problem(sets, 5, kind, activation)
            outcome = solve_minimum(net, x, kind, threshold=0.5, solver="enumerate")
            assert outcome.size == cover
            chosen = [sets[i] for i in outcome.features]
            assert len(frozenset().union(*chosen)) == 5  # the explanation is a cover


def test_set_cover_network_computes_coverage_on_the_cube() -> None:
    sets = [frozenset({0, 1}), frozenset({1, 2}), frozenset({2})]
    for activation in ("step", "hardtanh"):
        net = set_cover_network(sets, 3, activation)
        for bits in np.ndindex(2, 2, 2):
            covered = frozenset().union(*(sets[i] for i in range(3) if bits[i]))
            assert float(net.forward(np.array(bits, dtype=float))) == (1.0 if len(covered) == 3 else 0.0)


@pytest.mark.parametrize(
    ("hidden", "records"), [(((8,),), 24), pytest.param(((8,), (8, 8)), 48, marks=pytest.mark.slow)], ids=["8", "8+8x8"]
)
def test_a_suite_slice_run_twice_gives_the_same_records(tmp_path: Path, hidden: tuple, records: int) -> None:
    """Reproducible runs: the quick suite's own generator (relu and step, 4 and 8 features; one
    hidden layer, with -m slow also two), the campaign's default solvers, run twice, the second time
    in reverse order (so that no answer may depend on the calls a backend served before): the same
    records apart from timings, the same case files."""
    from cardinal.verify.campaign import default_solvers
    from cardinal.verify.suites import _random

    def instances() -> list[Instance]:
        return list(_random(2026, ("relu", "step"), (4, 8), hidden, rows=3))

    solvers = default_solvers()
    run_campaign("slice", tmp_path / "a", CampaignSettings(solvers, 30.0), instances=instances())
    run_campaign("slice", tmp_path / "b", CampaignSettings(solvers, 30.0), instances=instances()[::-1])
    first = without_timings(JsonLines(tmp_path / "a" / "records.jsonl").read())
    second = without_timings(JsonLines(tmp_path / "b" / "records.jsonl").read())
    assert len(first) == records and first == second
    assert {r["verdict"] for r in first} >= {"greedy_minimal", "greedy_suboptimal"}
    assert sorted(p.name for p in (tmp_path / "a" / "cases").glob("*.json")) == sorted(
        p.name for p in (tmp_path / "b" / "cases").glob("*.json")
    )


def test_crosscheck_exits_1_on_conflicting_exact_evidence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A backend that calls itself exact and says "nothing smaller" where enumerate finds a smaller
    set: a solver_disagreement, saved as a case, listed in the summary, and exit status 1."""
    from cardinal.verify import suites

    monkeypatch.setitem(registry.BACKENDS, "exact_liar", registry.Backend("exact_liar", "tests.application.test_cli_certify", "ExactLiarSolver", exact=True))
    monkeypatch.setitem(suites.SUITES, "quick", lambda out: tiny_instances()[2:])  # the DESIGN network
    out = tmp_path / "run"
    assert main(["crosscheck", "--out", str(out), "--solvers", "enumerate,exact_liar"]) == 1
    assert "conflicting exact evidence" in capsys.readouterr().err
    records = {r["kind"]: r for r in JsonLines(out / "records.jsonl").read()}
    assert records["contrastive"]["verdict"] == "solver_disagreement" and not records["contrastive"]["certified"]
    assert list((out / "cases").glob("solver_disagreement-*.json"))
    assert "design:0:contrastive" in (out / "summary.md").read_text().split("## Conflicting exact evidence")[1]


KILL_ONCE = "CARDINAL_TEST_KILL_ONCE"  # a file: `killing_certify` kills its worker while it is absent


def killing_certify(unit, pool=None):  # the signature of campaign.certify_unit (imported before it is patched)
    """`certify_unit`, except that the DESIGN network's contrastive unit kills its own worker
    process (os._exit) the first time it runs."""
    marker = Path(os.environ[KILL_ONCE])
    if unit.instance == "design" and unit.kind == "contrastive" and not marker.exists():
        marker.touch()
        os._exit(1)
    return certify_unit(unit, pool)


def test_a_dead_pool_worker_loses_its_units_and_resume_redoes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A unit that kills its worker breaks the local pool: it and every unit not finished get no
    record, crosscheck exits 1 with one line saying how many were lost and that --resume redoes
    them; --resume then gives the records of an uninterrupted run."""
    from cardinal.verify import campaign, suites

    monkeypatch.setenv(KILL_ONCE, str(tmp_path / "killed"))
    monkeypatch.setattr(campaign, "certify_unit", killing_certify)
    monkeypatch.setitem(suites.SUITES, "quick", lambda out: tiny_instances()[2:])  # the DESIGN network
    out = tmp_path / "run"
    arguments = ["crosscheck", "--out", str(out), "--solvers", "enumerate", "--workers", "2", "--no-proof"]
    code, err = main(arguments), capsys.readouterr().err
    assert code == 1, err
    [lost] = [line for line in err.splitlines() if "lost" in line]
    finished = JsonLines(out / "records.jsonl").read()
    assert "design:0:contrastive" not in {r["key"] for r in finished}
    assert f"{2 - len(finished)} unit(s) lost" in lost and "BrokenProcessPool" in lost and "--resume" in lost
    assert main([*arguments, "--resume"]) == 0, capsys.readouterr().err
    monkeypatch.undo()
    run_campaign("design", tmp_path / "whole", CampaignSettings(("enumerate",), 30.0), instances=tiny_instances()[2:])
    resumed = sorted(without_timings(JsonLines(out / "records.jsonl").read()), key=lambda r: r["key"])
    whole = sorted(without_timings(JsonLines(tmp_path / "whole" / "records.jsonl").read()), key=lambda r: r["key"])
    assert resumed == whole and whole[1]["verdict"] == "greedy_suboptimal"

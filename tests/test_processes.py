"""Processes and limits: one campaign per folder (a lock that a killed run does not leave behind),
no process outliving a killed campaign, and time limits that hold on every backend."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cardinal.solvers.base import BaseSolver, available_solvers, get_solver, solve_problem
from cardinal.solvers.guard import allowed_overrun, report_incumbent
from cardinal.verify.campaign import run_campaign
from cardinal.verify.cli import main
from cardinal.verify.generate import median_threshold, random_network
from cardinal.verify.io import JsonLines
from cardinal.verify.problem import Outcome, Problem, Status

from tests.test_campaign import tiny_instances

ROOT = str(Path(__file__).resolve().parents[1])

# A campaign of the tiny instances through `cardinal crosscheck`, slowed down (0.3 s per record)
# so that it is still running when the test acts on it.
SLOW_CROSSCHECK = """
import sys, time
sys.path.insert(0, {root!r})
from tests.test_campaign import tiny_instances
from cardinal.verify import cli, suites
import cardinal.verify.campaign as campaign

suites.SUITES["quick"] = lambda out: tiny_instances()
original = campaign._run
def slow(suite, out, log, done, solvers, limit, workers, progress, *rest):
    def report(*state):
        time.sleep(0.3)
        progress(*state)
    return original(suite, out, log, done, solvers, limit, workers, report, *rest)
campaign._run = slow
sys.exit(cli.main(["crosscheck", "--out", {out!r}, "--solvers", "enumerate", "--workers", "{workers}"]))
"""


def _start(out: Path, workers: int) -> subprocess.Popen:
    script = SLOW_CROSSCHECK.format(root=ROOT, out=str(out), workers=workers)
    with (out.parent / "stderr.txt").open("w") as stderr:
        return subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stderr=stderr)


def _wait_for_records(out: Path, count: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    log = out / "records.jsonl"
    while not (log.exists() and len(log.read_text().splitlines()) >= count):
        assert process.poll() is None, (out.parent / "stderr.txt").read_text()
        assert time.monotonic() < deadline, "the campaign wrote no records"
        time.sleep(0.05)


def _descendants(pid: int) -> set[int]:
    """Every live process below `pid`, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    found, frontier = set(), [pid]
    while frontier:
        for child in children.get(frontier.pop(), []):
            found.add(child)
            frontier.append(child)
    return found


def _running(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _one_line_refusal(capsys: pytest.CaptureFixture, code: int, pattern: str) -> None:
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and pattern in err, err


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_killed_campaign_leaves_no_process_and_no_lock(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """SIGKILL `crosscheck --workers 2` mid-run: its workers, their solver processes and everything
    else below it are gone within seconds, and --resume then runs (the kernel dropped the lock)."""
    out = tmp_path / "campaign"
    process = _start(out, workers=2)
    _wait_for_records(out, 3, process)
    # a second run and a second --resume are refused while the first is alive
    code = main(["crosscheck", "--out", str(out), "--solvers", "enumerate"])
    _one_line_refusal(capsys, code, f"is in use by another campaign (pid {process.pid})")
    code = main(["crosscheck", "--out", str(out), "--solvers", "enumerate", "--resume"])
    _one_line_refusal(capsys, code, f"is in use by another campaign (pid {process.pid})")
    below = _descendants(process.pid)
    assert len(below) >= 4  # two workers, each with the processes its solver runs in
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 5
    while any(_running(pid) for pid in below) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in below if _running(pid)] == []
    finished = len(JsonLines(out / "records.jsonl").read())
    result = run_campaign("tiny", out, ("enumerate",), 30.0, resume=True, instances=tiny_instances())
    assert result.records == 14 and result.new == 14 - finished


def test_a_second_resume_waits_for_no_one_after_the_first_ends(tmp_path: Path) -> None:
    """The lock is released, and its file removed, at the end of a run: runs one after the other
    in a folder work, and a finished campaign leaves no campaign.lock behind."""
    out = tmp_path / "campaign"
    instances = tiny_instances()[2:]
    run_campaign("tiny", out, ("enumerate",), 30.0, instances=instances)
    assert not (out / "campaign.lock").exists()
    again = run_campaign("tiny", out, ("enumerate",), 30.0, resume=True, instances=instances)
    assert again.new == 0 and not (out / "campaign.lock").exists()


# ---------------------------------------------------------------------------- time limits
class IgnoresItsLimit(BaseSolver):
    """A backend that overruns any limit (as HiGHS's presolve does on wide networks)."""

    name = "ignores-its-limit"

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        time.sleep(60)
        return Outcome(Status.NONE_WITHIN, self.name, 60.0)


def test_a_backend_that_ignores_its_limit_is_stopped_from_outside() -> None:
    from cardinal.solvers.guard import GuardedSolver
    from cardinal.verify.network import Network

    from tests.conftest import DESIGN_NETWORK

    problem = Problem.make(Network.from_json(DESIGN_NETWORK), np.ones(3), "contrastive", threshold=0.5)
    backend = GuardedSolver("ignores-its-limit", IgnoresItsLimit, {})
    try:
        for _ in range(2):  # the second call runs in a fresh process
            started = time.perf_counter()
            outcome = backend.solve(problem, None, 1.0)
            assert time.perf_counter() - started <= 1.0 + allowed_overrun(1.0)
            assert outcome.status == Status.TIMEOUT and "stopped from outside" in outcome.message
    finally:
        backend.close()


class FindsThenHangs(BaseSolver):
    """Reports the DESIGN network's CXp {0, 2} (x = 1, t = 0.5), then overruns its limit."""

    name = "finds-then-hangs"

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        report_incumbent((0, 2))
        time.sleep(60)
        return Outcome(Status.OPTIMAL, self.name, 60.0, solution=(0, 2))


def test_a_call_stopped_from_outside_keeps_what_it_found() -> None:
    """The last set a backend reported is the answer of its stopped call, and it is replayed."""
    from cardinal.solvers.guard import GuardedSolver
    from cardinal.verify.network import Network

    from tests.conftest import DESIGN_NETWORK

    problem = Problem.make(Network.from_json(DESIGN_NETWORK), np.ones(3), "contrastive", threshold=0.5)
    with GuardedSolver("finds-then-hangs", FindsThenHangs, {}) as backend:
        within = solve_problem(backend, problem, 2, 1.0)
        beyond = solve_problem(backend, problem, 1, 1.0)
    assert within.status == Status.FEASIBLE and within.solution == (0, 2) and within.replayed
    assert beyond.status == Status.TIMEOUT and beyond.solution == (0, 2)  # found, but not within at_most = 1


class ReportsItsThreads(BaseSolver):
    """Answers ERROR with the torch and BLAS thread counts of the process it runs in."""

    name = "reports-its-threads"

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        import threadpoolctl
        import torch

        blas = max(pool["num_threads"] for pool in threadpoolctl.threadpool_info() if pool["user_api"] == "blas")
        return Outcome(Status.ERROR, self.name, 0.0, message=f"{torch.get_num_threads()} {blas}")


THREADS_OF_A_GUARDED_CALL = """
import sys
sys.path.insert(0, {root!r})
import numpy as np, torch
torch.set_num_threads({threads})  # before the zygote starts, as a campaign worker does
from cardinal.solvers.guard import GuardedSolver
from cardinal.verify.network import Network
from cardinal.verify.problem import Problem
from tests.conftest import DESIGN_NETWORK
from tests.test_processes import ReportsItsThreads

problem = Problem.make(Network.from_json(DESIGN_NETWORK), np.ones(3), "contrastive", threshold=0.5)
with GuardedSolver("reports-its-threads", ReportsItsThreads, {{}}) as backend:
    print(backend.solve(problem, None, 30.0).message)
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: every process has one thread anyway")
def test_guarded_calls_run_as_many_threads_as_their_caller() -> None:
    """A caller on one thread (a campaign worker) gets solver processes on one thread, torch's and
    BLAS's; one on two threads gets two."""
    for threads in (1, 2):
        script = THREADS_OF_A_GUARDED_CALL.format(root=ROOT, threads=threads)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
        assert done.stdout.split() == [str(threads), str(threads)], done.stderr


@pytest.fixture(scope="module")
def wide() -> list[Problem]:
    """A monotone ReLU network 28 → 512 → 512 → 512 → 1: HiGHS's presolve (42 s) and z3's exact
    cuts (30 s) overran a 2 s limit on it before the guard."""
    rng = np.random.default_rng(0)
    net = random_network(rng, 28, (512, 512, 512), "relu")
    X = rng.random((4, 28))
    threshold = median_threshold(net, X)
    return [Problem.make(net, X[0], kind, threshold=threshold) for kind in ("contrastive", "abductive")]


@pytest.mark.parametrize(
    ("name", "kind"), [("highs", "contrastive"), ("z3", "abductive"), ("enumerate", "abductive"), ("gurobi", "contrastive")]
)
def test_time_limit_holds_on_a_slow_instance(name: str, kind: str, wide: list[Problem]) -> None:
    """Each call ends within max(10%, 1 s) of its 2 s limit (its process already started)."""
    if name not in available_solvers():
        pytest.skip(f"{name} is not installed")
    problem = wide[0] if kind == "contrastive" else wide[1]
    limit = 2.0
    with get_solver(name, guarded=True) as backend:
        from cardinal.verify.network import Network

        from tests.conftest import DESIGN_NETWORK

        small = Problem.make(Network.from_json(DESIGN_NETWORK), np.ones(3), "contrastive", threshold=0.5)
        solve_problem(backend, small, None, limit)  # start the process outside the measured call
        started = time.perf_counter()
        outcome = solve_problem(backend, problem, 10, limit)
        seconds = time.perf_counter() - started
    assert seconds <= limit + allowed_overrun(limit), (outcome.status, seconds)
    assert outcome.status in (Status.TIMEOUT, Status.FEASIBLE, Status.OPTIMAL, Status.NONE_WITHIN, Status.SIZE_LIMIT)

"""Processes and limits: one campaign per folder (a lock that a killed run does not leave behind),
no process outliving a killed campaign or caller (also while it starts), none left unreaped or
printing, SIGTERM ending a command as Ctrl-C does, and a backend that overruns its time limit
stopped from outside (how soon: `bench/limits.py`; no test asserts wall time)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest
from cardinal.solvers.base import BaseSolver, available_solvers, solve_problem
from cardinal.solvers.guard import report_incumbent
from cardinal.verify.campaign import CampaignSettings, run_campaign
from cardinal.verify.cli import main

from cardinal.errors import BackendUnavailable
from cardinal.io import JsonLines
from cardinal.problem import Outcome, Problem, Status, stopped
from tests.application.test_campaign import tiny_instances

ROOT = str(Path(__file__).resolve().parents[2])
HANG_GUARD = 120.0  # seconds a test waits for what must happen (a process seen, a zombie reaped) before it calls it a hang: not a speed claim

# A campaign of the tiny instances through `cardinal crosscheck`, slowed down (0.3 s per record)
# so that it is still running when the test acts on it.
SLOW_CROSSCHECK = """
import sys, time
sys.path.insert(0, {root!r})
from tests.application.test_campaign import tiny_instances
from cardinal.verify import cli, suites
import cardinal.verify.campaign as campaign

suites.SUITES["quick"] = lambda out: tiny_instances()
original = campaign._run
def slow(*arguments, progress, **hooks):
    def report(*state):
        time.sleep(0.3)
        progress(*state)
    return original(*arguments, progress=report, **hooks)
campaign._run = slow
sys.exit(cli.main(["crosscheck", "--out", {out!r}, "--solvers", "enumerate", "--workers", "{workers}"]))
"""


def _start(out: Path, workers: int) -> subprocess.Popen:
    script = SLOW_CROSSCHECK.format(root=ROOT, out=str(out), workers=workers)
    with (out.parent / "stderr.txt").open("w") as stderr:
        return subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stderr=stderr)


def _wait_for_records(out: Path, count: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 300
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


def _identity(pid: int) -> tuple[int, str] | None:
    """(pid, start time): a process, told apart from a later one with the same pid; None if gone
    (reaped; a zombie is still there)."""
    try:
        return pid, Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _assert_gone(pids: set[int], within: float) -> None:
    """None of `pids` runs `within` seconds from now (zombies are not running)."""
    deadline = time.monotonic() + within
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in pids if _running(pid)] == []


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
    _assert_gone(below, within=30.0)
    finished = len(JsonLines(out / "records.jsonl").read())
    result = run_campaign("tiny", out, CampaignSettings(("enumerate",), 30.0), resume=True, instances=tiny_instances())
    assert result.records == 14 and result.new == 14 - finished


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_terminated_campaign_ends_in_order_and_reaps_every_process(tmp_path: Path) -> None:
    """SIGTERM `crosscheck --workers 2` mid-run: it ends as after Ctrl-C (exit code 143, its
    summary written), its workers end in order and stop their solver processes, and once it has
    exited no process it started is left, running or unreaped."""
    out = tmp_path / "campaign"
    process = _start(out, workers=2)
    _wait_for_records(out, 3, process)
    below = {identity for pid in _descendants(process.pid) if (identity := _identity(pid))}
    assert len(below) >= 4  # two workers, each with its solver processes
    os.kill(process.pid, signal.SIGTERM)
    assert process.wait(timeout=300) == 143  # 128 + SIGTERM
    assert (out / "summary.md").is_file() and "Traceback" not in (out.parent / "stderr.txt").read_text()
    assert [identity for identity in below if _identity(identity[0]) == identity] == []


def test_a_second_resume_waits_for_no_one_after_the_first_ends(tmp_path: Path) -> None:
    """The lock is released, and its file removed, at the end of a run: runs one after the other
    in a folder work, and a finished campaign leaves no campaign.lock behind."""
    out = tmp_path / "campaign"
    instances = tiny_instances()[2:]
    run_campaign("tiny", out, CampaignSettings(("enumerate",), 30.0), instances=instances)
    assert not (out / "campaign.lock").exists()
    again = run_campaign("tiny", out, CampaignSettings(("enumerate",), 30.0), resume=True, instances=instances)
    assert again.new == 0 and not (out / "campaign.lock").exists()


# A campaign whose greedy phase (its first seconds) waits, after leaving a marker file.
WAITING_GREEDY = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as in a terminal, whatever this process inherited
sys.path.insert(0, {root!r})
from pathlib import Path
from tests.application.test_campaign import tiny_instances
from cardinal.verify import cli, suites
import cardinal.verify.campaign as campaign

suites.SUITES["quick"] = lambda out: tiny_instances()
def units_of(*arguments):
    Path({marker!r}).touch()
    time.sleep(120)
campaign.units_of = units_of
sys.exit(cli.main(["crosscheck", "--out", {out!r}, "--solvers", "enumerate"]))
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_in_a_campaigns_first_seconds_ends_it_in_order(tmp_path: Path, signum: int) -> None:
    """SIGTERM while greedy runs takes Ctrl-C's way out: one line, exit code 128 + the signal, no traceback,
    and the solver process started ahead is stopped and reaped before the command ends."""
    marker = tmp_path / "greedy"
    script = WAITING_GREEDY.format(root=ROOT, marker=str(marker), out=str(tmp_path / "campaign"))
    process = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300  # generous: a loaded machine starts Python and torch slowly
    while not marker.exists():
        assert process.poll() is None and time.monotonic() < deadline, "greedy did not start"
        time.sleep(0.05)
    below = {identity for pid in _descendants(process.pid) if (identity := _identity(pid))}
    os.kill(process.pid, signum)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 128 + signum and err.splitlines()[-1:] == ["cardinal crosscheck: interrupted"], err
    assert "Traceback" not in err
    assert below and [identity for identity in below if _identity(identity[0]) == identity] == []


def _catches(pid: int, signum: int) -> bool:
    """Process `pid` has a handler of its own for `signum` (SigCgt in /proc/PID/status)."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return bool(caught >> (signum - 1) & 1)


# The `cardinal` entry point, whose import of torch (inside `cli`) first sleeps {seconds} s: a start that
# a signal surely meets while the command is still loading, however late a loaded machine lets the test act.
SLOWLY_LOADING_ENTRY = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as in a terminal, whatever this process inherited
class SlowTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            time.sleep({seconds})
        return None
sys.meta_path.insert(0, SlowTorch())
from cardinal.verify.launch import entry
sys.argv[0] = "cardinal"
entry()
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_command_loads_ends_it_in_order(tmp_path: Path, design_network_file: Path, signum: int) -> None:
    """The `cardinal` command's entry point (`cardinal.verify.launch`) catches SIGTERM from its first
    line, before torch loads (seconds): a signal then ends it as Ctrl-C does — one line, exit code
    128 + the signal — where it was the default death (SIGTERM) or a KeyboardInterrupt traceback (SIGINT). The
    signal is sent once the handler is in place, while the command imports torch (held there for
    up to 300 s, so that a loaded machine's delays cannot let the import finish first)."""
    inputs = tmp_path / "x.csv"
    inputs.write_text("1,1,1\n" * 50)
    argv = ["certify", str(design_network_file), "--inputs", str(inputs), "--solvers", "z3,enumerate", "--out", str(tmp_path / "o.jsonl")]
    command = [sys.executable, "-c", SLOWLY_LOADING_ENTRY.format(seconds=300), *argv]
    process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not _catches(process.pid, signal.SIGTERM):
            assert process.poll() is None and time.monotonic() < deadline, "the entry point did not start"
            time.sleep(0.01)
        assert "torch" not in Path(f"/proc/{process.pid}/maps").read_text()  # torch's libraries not mapped yet
        os.kill(process.pid, signum)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 128 + signum and err.splitlines() == ["cardinal certify: interrupted"], err
    assert not (tmp_path / "o.jsonl").exists()


def test_an_import_that_ctrl_c_interrupts_is_no_missing_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """A C extension whose initialization Ctrl-C (or SIGTERM, made one) interrupts raises
    ImportError('initialization failed') caused by the KeyboardInterrupt (highspy does): the
    command ends as interrupted, not with "solver 'highs' is not installed"; a library that is
    really missing still says so."""
    import importlib

    import cardinal.solvers.base as base

    def interrupted(name: str, package: str | None = None) -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as interrupt:
            raise ImportError("initialization failed") from interrupt

    monkeypatch.setattr(importlib, "import_module", interrupted)
    with pytest.raises(KeyboardInterrupt):
        base.get_solver("highs")

    def missing(name: str, package: str | None = None) -> None:
        raise ImportError("No module named 'highspy'", name="highspy")

    monkeypatch.setattr(importlib, "import_module", missing)
    with pytest.raises(BackendUnavailable, match="solver 'highs' is not installed"):
        base.get_solver("highs")


# ---------------------------------------------------------------------------- time limits
class IgnoresItsLimit(BaseSolver):
    """A backend that overruns any limit (as HiGHS's presolve does on wide networks)."""

    name = "ignores-its-limit"

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        time.sleep(60)
        return Outcome(Status.NONE_WITHIN, self.name, 60.0)


def test_a_backend_that_ignores_its_limit_is_stopped_from_outside() -> None:
    """A backend that overruns its 1 s limit by a minute is stopped from outside: the call answers
    TIMEOUT (the backend itself would answer NONE_WITHIN, after its minute), its solver process is
    killed, and the next call runs in a fresh one. How near the limit it stops: `bench/limits.py`."""
    from cardinal.solvers.guard import GuardedSolver

    from cardinal.network import Network
    from tests.conftest import DESIGN_NETWORK

    problem = Problem.make(Network.from_json(DESIGN_NETWORK), np.ones(3), "contrastive", threshold=0.5)
    backend = GuardedSolver("ignores-its-limit", IgnoresItsLimit, {})
    served_by = []
    try:
        for _ in range(2):
            assert backend.wait_started(time.perf_counter() + 300), "the solver process did not start"
            served_by.append(backend._child.pid)
            outcome = backend.solve(problem, None, 1.0)
            assert outcome.status == Status.TIMEOUT and outcome.raw_status == "killed", outcome
            assert "stopped from outside" in outcome.message and not outcome.has_solution
            _assert_gone({served_by[-1]}, within=60.0)
    finally:
        backend.close()
    assert served_by[0] != served_by[1]


# A start-up hook for the solver processes of a test's subprocess: with CARDINAL_TEST_SLOW_TORCH
# set, importing torch first sleeps that many seconds (a loaded machine's start, exaggerated). The
# subprocess puts its folder on sys.path, which a zygote inherits; the caller imports torch first.
SLOW_TORCH_HOOK = """
import os, sys, time
class SlowTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" and os.environ.get("CARDINAL_TEST_SLOW_TORCH"):
            time.sleep(float(os.environ["CARDINAL_TEST_SLOW_TORCH"]))
        return None
sys.meta_path.insert(0, SlowTorch())
"""

# A caller whose solver processes take SECONDS to start: it makes a guarded backend (or a pool),
# then runs ACTION.
SLOWLY_STARTING = """
import os, sys, time
sys.path.insert(0, {root!r})
sys.path.insert(0, {hook!r})
import numpy as np
from cardinal.solvers.guard import GuardedSolver
from cardinal.network import Network
from cardinal.problem import Problem
from tests.conftest import DESIGN_NETWORK
from tests.engines.test_processes import IgnoresItsLimit

problem = Problem.make(Network.from_json(DESIGN_NETWORK), np.ones(3), "contrastive", threshold=0.5)
os.environ["CARDINAL_TEST_SLOW_TORCH"] = "{seconds}"
{action}
"""


def _slowly_starting(tmp_path: Path, action: str, seconds: float = 60.0) -> subprocess.Popen:
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(SLOW_TORCH_HOOK)
    script = SLOWLY_STARTING.format(root=ROOT, hook=str(tmp_path / "hook"), action=action, seconds=seconds)
    return subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_first_call_counts_the_start_of_its_solver_process(tmp_path: Path) -> None:
    """A solver process that is still starting (here for 10 minutes) at a call's 1 s limit does not
    hold the call: it answers TIMEOUT, the message says why, and the caller ends without waiting
    for the start (2 minutes is a hang guard, not a speed claim: `bench/limits.py` measures it)."""
    action = """
backend = GuardedSolver("ignores-its-limit", IgnoresItsLimit, {})
outcome = backend.solve(problem, None, 1.0)
print(outcome.status.value, outcome.raw_status, outcome.message, sep="|")
"""
    process = _slowly_starting(tmp_path, action, seconds=600.0)
    try:
        out, err = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise AssertionError("the caller waited for its solver process to start") from None
    assert process.returncode == 0, err
    status, raw_status, message = out.strip().split("|")
    assert (status, raw_status) == ("timeout", "not started"), out
    assert "stopped from outside" in message and "still starting" in message


def test_a_solver_pool_waits_for_its_solver_processes_before_its_first_call(tmp_path: Path) -> None:
    """A command's pool (certify, crosscheck, check) lets its solver processes start before its
    first call is timed: a verdict does not depend on how long they took to start (10 s here,
    against a 2 s limit that the call itself keeps by far, also on a loaded machine)."""
    action = """
from cardinal.verify.certify import SolverPool
with SolverPool(["enumerate"]) as pool:
    print(pool.solve(problem, None, 2.0)[0]["enumerate"].status.value)
"""
    process = _slowly_starting(tmp_path, action, seconds=10.0)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0 and out.strip() == "optimal", (out, err)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_caller_killed_while_its_solver_processes_start_leaves_none(tmp_path: Path) -> None:
    """SIGKILL a caller whose solver process is still starting (importing torch, here for ten
    minutes): that process ends with it, not when its start is over (2 minutes is a hang guard,
    far inside the start, not a speed claim)."""
    action = 'backend = GuardedSolver("ignores-its-limit", IgnoresItsLimit, {})\nprint("asked", flush=True)\ntime.sleep(120)'
    process = _slowly_starting(tmp_path, action, seconds=600.0)
    assert process.stdout.readline().strip() == "asked", process.stderr.read()
    deadline = time.monotonic() + HANG_GUARD  # inside the 600 s start all the same
    while not (below := _descendants(process.pid)):
        assert time.monotonic() < deadline, "no solver process started"
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate()
    _assert_gone(below, within=120.0)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_certify_ends_with_every_solver_process_reaped(tmp_path: Path, design_network_file: Path) -> None:
    """`cardinal certify` reaps what it started: once it has exited, no process it started is
    left, neither running nor a zombie waiting to be reaped."""
    inputs = tmp_path / "x.csv"
    inputs.write_text("1,1,1\n0.5,0.9,1\n")
    names = ",".join(name for name in ("enumerate", "z3", "highs") if name in available_solvers())
    script = (
        f"import sys; sys.path.insert(0, {ROOT!r}); from cardinal.verify.cli import main; "
        f"sys.exit(main(['certify', {str(design_network_file)!r}, '--inputs', {str(inputs)!r}, '--threshold', '0.5', "
        f"'--solvers', {names!r}, '--out', {str(tmp_path / 'out.jsonl')!r}]))"
    )
    process = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    seen: set[tuple[int, str]] = set()
    while process.poll() is None:
        seen |= {identity for pid in _descendants(process.pid) if (identity := _identity(pid))}
        time.sleep(0.02)
    assert process.returncode == 0, process.stderr.read()
    assert seen, "no solver process was seen"
    assert [identity for identity in seen if _identity(identity[0]) == identity] == []


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_killed_child_is_reaped_at_once() -> None:
    """A child killed at its limit does not stay a zombie below this process."""
    from cardinal.solvers.guard import GuardedSolver

    from cardinal.network import Network
    from tests.conftest import DESIGN_NETWORK

    problem = Problem.make(Network.from_json(DESIGN_NETWORK), np.ones(3), "contrastive", threshold=0.5)
    with GuardedSolver("ignores-its-limit", IgnoresItsLimit, {}) as backend:
        assert backend.solve(problem, None, 0.1).status == Status.TIMEOUT
    deadline = time.monotonic() + HANG_GUARD
    while (zombies := [pid for pid in _descendants(os.getpid()) if _identity(pid) and not _running(pid)]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert zombies == []


class Noisy(BaseSolver):
    """Writes to stdout and stderr, then fails."""

    name = "noisy"

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        print("noise on stdout", flush=True)
        print("noise on stderr", file=sys.stderr, flush=True)
        os.write(2, b"noise on descriptor 2\n")
        raise ConnectionResetError("a traceback-worthy failure")


NOISY_CALLER = """
import sys
sys.path.insert(0, {root!r})
import numpy as np
from cardinal.solvers.guard import GuardedSolver
from cardinal.network import Network
from cardinal.problem import Problem
from tests.conftest import DESIGN_NETWORK
from tests.engines.test_processes import Noisy

problem = Problem.make(Network.from_json(DESIGN_NETWORK), np.ones(3), "contrastive", threshold=0.5)
with GuardedSolver("noisy", Noisy, {{}}) as backend:
    print(backend.solve(problem, None, 30.0).message)
idle = GuardedSolver("noisy", Noisy, {{}})  # a child asked for and never taken when the caller ends
"""


def test_solver_processes_write_nothing_to_their_callers_output() -> None:
    """What a backend prints, and a solver process ending with its caller, reach neither stdout
    nor stderr of the caller; the failure comes back as the call's answer."""
    done = subprocess.run(
        [sys.executable, "-c", NOISY_CALLER.format(root=ROOT)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout == "ConnectionResetError: a traceback-worthy failure\n"


class ReportsItsProcess(BaseSolver):
    """Answers ERROR with the pid of its process and the identity of the network it was given."""

    name = "reports-its-process"

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        return Outcome(Status.ERROR, self.name, 0.0, message=f"{os.getpid()} {id(problem.net)}")


def test_guarded_calls_reuse_their_process_and_its_copy_of_the_network() -> None:
    """A lent backend serves consecutive calls from one process, which keeps the network of the
    last call (its exact evaluators with it) while the caller passes the same Network object."""
    from cardinal.solvers.guard import GuardedSolver, lent

    from cardinal.network import Network
    from tests.conftest import DESIGN_NETWORK

    first, second = Network.from_json(DESIGN_NETWORK), Network.from_json(DESIGN_NETWORK)
    answers = []
    for net in (first, first, second):
        problem = Problem.make(net, np.ones(3), "contrastive", threshold=0.5)
        with lent("reports-its-process", lambda: GuardedSolver("reports-its-process", ReportsItsProcess, {})) as backend:
            answers.append(backend.solve(problem, None, 30.0).message.split())
    pids, networks = zip(*answers, strict=True)
    assert len(set(pids)) == 1 and pids[0] != str(os.getpid())
    assert networks[0] == networks[1] != networks[2]


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

    from cardinal.network import Network
    from tests.conftest import DESIGN_NETWORK

    problem = Problem.make(Network.from_json(DESIGN_NETWORK), np.ones(3), "contrastive", threshold=0.5)
    with GuardedSolver("finds-then-hangs", FindsThenHangs, {}) as backend:
        within = solve_problem(backend, problem, 2, 1.0)
        beyond = solve_problem(backend, problem, 1, 1.0)
    assert within.status == Status.FEASIBLE and within.solution == (0, 2) and within.replayed
    assert beyond.status == Status.TIMEOUT and beyond.solution is None  # found, but not within at_most = 1


class FindsThenStops(BaseSolver):
    """Reports the DESIGN network's CXp {0, 2}, then stops at its limit and answers as every
    backend does there (`cardinal.problem.stopped`). `overrun`: seconds it works past its limit
    before it looks at its clock (0: it stops at once, as a backend whose node budget is spent)."""

    name = "finds-then-stops"

    def __init__(self, overrun: float = 0.0) -> None:
        self.overrun = overrun

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        started = time.perf_counter()
        report_incumbent((0, 2))
        time.sleep(self.overrun)
        status, solution = stopped((0, 2), at_most)
        return self.outcome(status, started, solution=solution, raw_status="limit")


@pytest.mark.parametrize("at_most", [None, 2, 1])
def test_a_guarded_call_stopped_at_its_limit_answers_as_the_backend_in_process(at_most: int | None) -> None:
    """One contract for a call stopped at its limit with a set found: the backend in this process
    stops itself (its budget spent at once), the same backend guarded overruns its limit and is
    stopped from outside; both answer the same status and set: FEASIBLE with {0, 2} within the
    bound or without one, TIMEOUT with no set beyond it."""
    from cardinal.solvers.guard import GuardedSolver

    from cardinal.network import Network
    from tests.conftest import DESIGN_NETWORK

    problem = Problem.make(Network.from_json(DESIGN_NETWORK), np.ones(3), "contrastive", threshold=0.5)
    in_process = solve_problem(FindsThenStops(), problem, at_most, 1.0)
    with GuardedSolver("finds-then-stops", FindsThenStops, {"overrun": 60.0}) as backend:
        assert backend.wait_started(time.perf_counter() + 300), "the solver process did not start"
        guarded = solve_problem(backend, problem, at_most, 1.0)
    assert guarded.raw_status == "killed" and in_process.raw_status == "limit", (guarded, in_process)
    expected = (Status.TIMEOUT, None) if at_most == 1 else (Status.FEASIBLE, (0, 2))
    assert (in_process.status, in_process.solution) == expected
    assert (guarded.status, guarded.solution) == expected
    assert guarded.replayed == in_process.replayed == (expected[1] is not None)


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
from cardinal.network import Network
from cardinal.problem import Problem
from tests.conftest import DESIGN_NETWORK
from tests.engines.test_processes import ReportsItsThreads

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


def test_a_lazy_import_that_ctrl_c_interrupts_is_not_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An `import NAME` statement that runs a lazy module's load (`cardinal.lazy`, as `import torch`
    in the core does) passes on the KeyboardInterrupt of a Ctrl-C or SIGTERM that lands in it.
    CPython discards an exception raised while the statement reads `__spec__`: the load used to run
    there, so the interruption was lost and the command ran on with a half-loaded module."""
    from cardinal.lazy import lazy_import

    (tmp_path / "interrupted_module.py").write_text("loaded = True\nraise KeyboardInterrupt  # as a signal would\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "interrupted_module", raising=False)
    lazy = lazy_import("interrupted_module")
    assert lazy.__spec__.name == "interrupted_module" and type(lazy) is not types.ModuleType  # __spec__ does not load it
    import interrupted_module  # reads __spec__ only (the old load here lost the interruption)

    with pytest.raises(KeyboardInterrupt):  # the first real use loads it, in ordinary code
        assert interrupted_module.loaded
    monkeypatch.delitem(sys.modules, "interrupted_module", raising=False)

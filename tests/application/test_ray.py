"""Campaigns on Ray (`--executor ray`): the same records as the local executor, resume after a
killed driver, a worker killed mid-call, a dead raylet, a solver missing on a worker. One local Ray
instance of 2 CPUs on the loopback interface serves the module; a killed driver's own instance is
checked to die with it, agents included, and the instance's watcher to kill what is the instance's
and nothing else."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cardinal.solvers import registry
from cardinal.verify import campaign
from cardinal.verify.campaign import CampaignSettings, certify_unit, run_campaign
from cardinal.verify.cli import main
from cardinal.verify.executors import RETRIES, start_local_ray, stop_local_ray
from cardinal.verify.record import without_timings

from cardinal.io import JsonLines
from tests.application.test_campaign import tiny_instances
from tests.engines.test_processes import _descendants, _identity, _running

ROOT = str(Path(__file__).resolve().parents[2])
ATTEMPTS = "CARDINAL_TEST_ATTEMPTS"  # folder where `dying_certify` counts its tries (set before Ray starts)

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # Ray on 127.0.0.1 only (see verify/executors.py)
import ray  # noqa: E402 (after the environment variable it reads)


@pytest.fixture(scope="module")
def ray_instance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A local Ray instance of 2 CPUs for the module (its workers see `ATTEMPTS`): its address."""
    os.environ[ATTEMPTS] = str(tmp_path_factory.mktemp("attempts"))
    saved = os.environ.get("PYTHONPATH")
    # workers import `dying_certify` from this module, under the name pytest gave it (its folder), and the shared helpers (tests/)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, str(Path(__file__).parent), str(Path(__file__).parents[1]), saved]))
    before = _descendants(os.getpid())  # e.g. the solver helper process of earlier tests in this process
    context = start_local_ray(2)
    roots = {pid for pid in _descendants(os.getpid()) - before if "ray" in _command(pid)}  # GCS, raylet, ...
    try:
        yield context.address_info["gcs_address"]
    finally:
        below = roots.union(*(_descendants(pid) for pid in roots))  # with Ray's workers and their solver processes
        assert len(below) >= 3
        stop_local_ray()
        os.environ.pop(ATTEMPTS, None)
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
        deadline = time.monotonic() + 120  # a hang guard: the watcher has killed them when stop_local_ray returns
        while any(_running(pid) for pid in below) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [pid for pid in below if _running(pid)] == [], "Ray processes outlived ray.shutdown()"


def dying_certify(unit: campaign.Unit, pool: object = None) -> tuple[dict, dict | None]:
    """`certify_unit`, except that on a Ray worker it kills its own process: on each of the first
    1 + RETRIES tries of the DESIGN network's contrastive unit (so a run loses it and the next
    run certifies it), on the first try only of its abductive one."""
    if pool is None and unit.instance == "design":
        folder = Path(os.environ[ATTEMPTS])
        tries = len(list(folder.glob(f"{unit.kind}.*")))
        (folder / f"{unit.kind}.{tries}").touch()
        if tries == 0 or (unit.kind == "contrastive" and tries <= RETRIES):
            os.kill(os.getpid(), signal.SIGKILL)
    return certify_unit(unit, pool)


def test_ray_gives_the_records_of_one_local_worker(tmp_path: Path, ray_instance: str) -> None:
    """A slice of the quick suite (its own generator), the campaign's default solvers: the same records
    (apart from timings and order) and case files from Ray with 2 workers as from one local worker."""
    from cardinal.verify.campaign import default_solvers
    from cardinal.verify.suites import _random

    def instances() -> list:
        return list(_random(2026, ("relu", "step"), (4, 8), ((8,),), rows=2))

    solvers = default_solvers()
    run_campaign("slice", tmp_path / "local", CampaignSettings(solvers, 30.0, workers=1), instances=instances())
    result = run_campaign("slice", tmp_path / "ray", CampaignSettings(solvers, 30.0, workers=2, executor="ray"), instances=instances())
    local = without_timings(JsonLines(tmp_path / "local" / "records.jsonl").read())
    on_ray = without_timings(JsonLines(tmp_path / "ray" / "records.jsonl").read())
    assert len(local) == 16 and on_ray == local and result.failed == 0
    assert {r["verdict"] for r in local} >= {"greedy_minimal", "greedy_suboptimal"}
    cases = [sorted(p.name for p in (tmp_path / name / "cases").glob("*.json")) for name in ("local", "ray")]
    assert cases[0] == cases[1] != []


KILLED_DRIVER = """
import sys, time
sys.path.insert(0, {root!r})
from tests.application.test_campaign import tiny_instances
from cardinal.verify import cli, suites
import cardinal.verify.campaign as campaign

suites.SUITES["quick"] = lambda out: tiny_instances()
original = campaign._run
def slow(*arguments, progress, **hooks):
    def report(*state):
        time.sleep(0.3)  # leave time for the kill to land mid-run
        progress(*state)
    return original(*arguments, progress=report, **hooks)
campaign._run = slow
sys.exit(cli.main(["crosscheck", "--out", {out!r}, "--solvers", "enumerate", "--executor", "ray", "--workers", "2", "--no-proof"]))
"""


def _start_killed_driver(tmp_path: Path, out: Path) -> tuple[subprocess.Popen, set[int]]:
    """`crosscheck --executor ray` on the tiny suite in a subprocess that starts its own Ray
    instance, slowed down; once it has written 3 records: it and every process below it."""
    script = KILLED_DRIVER.format(root=ROOT, out=str(out))
    with (tmp_path / "stderr.txt").open("w") as stderr:
        process = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stderr=stderr)
    log = out / "records.jsonl"
    deadline = time.monotonic() + 120
    while not (log.exists() and len(log.read_text().splitlines()) >= 3):
        assert process.poll() is None, (tmp_path / "stderr.txt").read_text()
        assert time.monotonic() < deadline, "the campaign wrote no records"
        time.sleep(0.05)
    below = _descendants(process.pid)
    assert len(below) >= 6  # Ray's processes (GCS, raylet, agents, workers), the solvers' guard processes, the watcher
    assert {"ray::DashboardAgent", "ray::RuntimeEnvAgent"} <= {_command(pid).strip() for pid in below}
    return process, below


BARE_DRIVER = """
import sys, time
sys.path.insert(0, {root!r})
from cardinal.verify.executors import start_local_ray
import ray
context = start_local_ray(2)
ray.get([ray.remote(lambda: 0).remote() for _ in range(2)])  # workers up
print(context.address_info["session_dir"], flush=True)
time.sleep(600)
"""


def _holding(session: str) -> list[tuple[int, str]]:
    """The live processes (not zombies) that hold a file of the folder `session` open or name it
    in their command line, with their command lines: from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or not _running(int(entry.name)):
            continue
        try:
            paths = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:  # gone meanwhile (or a descriptor closed meanwhile: looked at again next time)
            continue
        if session in _command(int(entry.name)) or any(path.startswith(f"{session}/") for path in paths):
            found.append((int(entry.name), _command(int(entry.name)).strip()))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_killed_drivers_ray_instance_leaves_no_process(tmp_path: Path, ray_instance: str) -> None:
    """SIGKILL a driver that started its own Ray instance (beside the module's, as when a test
    session or another campaign runs one): within 30 s — Ray's agents alone would linger a
    minute or more — no process that was below the driver runs any more, the dashboard and
    runtime-env agents included, and no process on the machine holds a file of the instance's
    session folder open or names it. Decided from the OS's process table, not by the watcher's
    own search; 30 s is a bound, not a measurement: the watcher acts within a second."""
    with (tmp_path / "stderr.txt").open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-c", BARE_DRIVER.format(root=ROOT)], cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
    try:
        session = process.stdout.readline().strip()  # type: ignore[union-attr]
        assert session, (tmp_path / "stderr.txt").read_text()
        below = {_identity(pid) for pid in _descendants(process.pid)} - {None}
        assert {"ray::DashboardAgent", "ray::RuntimeEnvAgent"} <= {_command(pid).strip() for pid, _ in below}
        assert len(_holding(session)) >= 5  # the driver, GCS, raylet, agents, workers
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()

    def left() -> list[tuple[int, str]]:
        """What still runs of the instance: of `below` (the same processes), or in its folder."""
        same = [(pid, _command(pid)) for pid, start in below if _identity(pid) == (pid, start) and _running(pid)]
        return same + _holding(session)

    deadline = time.monotonic() + 30
    while left() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left() == []


def _assert_gone(below: set[int], seconds: float = 30) -> None:
    """Every process of `below` ends (or is a zombie) within `seconds`."""
    deadline = time.monotonic() + seconds
    while any(_running(pid) for pid in below) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [(pid, _command(pid)) for pid in below if _running(pid)] == []


def _resume_and_compare(tmp_path: Path, out: Path, finished: int) -> None:
    """--resume (on the module's instance) ends with the records of an uninterrupted local run,
    none lost or duplicated."""
    result = run_campaign("tiny", out, CampaignSettings(("enumerate",), 30.0, workers=2, executor="ray"), resume=True, instances=tiny_instances())
    assert result.records == 14 and result.new == 14 - finished and result.lost == 0
    run_campaign("tiny", tmp_path / "whole", CampaignSettings(("enumerate",), 30.0), instances=tiny_instances())
    records = JsonLines(out / "records.jsonl").read()
    assert len({r["key"] for r in records}) == 14
    assert without_timings(records) == without_timings(JsonLines(tmp_path / "whole" / "records.jsonl").read())


@pytest.mark.slow  # a campaign killed then resumed; the kill alone is in the default run (test_a_killed_drivers_ray_instance_leaves_no_process)
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_killed_driver_then_resume_gives_every_record_once(tmp_path: Path, ray_instance: str) -> None:
    """SIGKILL a `crosscheck --executor ray` driver that started its own Ray instance, mid-run:
    every process of that instance (GCS, raylet, Ray's dashboard and runtime-env agents, workers,
    the solvers' processes) dies with it within seconds — the agents, which would linger a minute
    trying to reach the dead GCS, killed by the instance's watcher — and --resume ends with the
    records of an uninterrupted local run."""
    out = tmp_path / "killed"
    process, below = _start_killed_driver(tmp_path, out)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    _assert_gone(below)
    finished = len(JsonLines(out / "records.jsonl").read())
    assert 3 <= finished < 14
    _resume_and_compare(tmp_path, out, finished)


@pytest.mark.slow  # about a minute: Ray notices a dead raylet only after its heartbeats time out
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_killed_raylet_loses_units_then_resume_redoes_them(tmp_path: Path, ray_instance: str) -> None:
    """SIGKILL the raylet of a `crosscheck --executor ray` run mid-run: the driver exits 1 saying
    how many units were lost (LocalRayletDiedError) and that --resume redoes them, records no unit
    as failed, leaves no process of its instance behind, and --resume ends with the records of an
    uninterrupted local run."""
    out = tmp_path / "raylet"
    process, below = _start_killed_driver(tmp_path, out)
    [raylet] = [pid for pid in below if Path(_command(pid).split(" ")[0]).name == "raylet"]
    os.kill(raylet, signal.SIGKILL)
    assert process.wait(timeout=300) == 1
    [lost] = [line for line in (tmp_path / "stderr.txt").read_text().splitlines() if "unit(s) lost" in line]
    assert "LocalRayletDiedError" in lost and "--resume" in lost
    _assert_gone(below)
    records = JsonLines(out / "records.jsonl").read()
    assert 3 <= len(records) < 14 and f"!!! {14 - len(records)} unit(s) lost" in lost
    assert all(call["status"] != "error" for r in records for call in r["solvers"].values())
    _resume_and_compare(tmp_path, out, len(records))


def test_a_dead_raylet_loses_every_unfinished_unit(
    tmp_path: Path, ray_instance: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The fast variant of the test above: `ray.get` raises LocalRayletDiedError, as when the
    raylet dies, after 3 results: those 3 are recorded and the other 11 units lost (exit 1, one
    line saying so), none recorded as failed; --resume redoes the 11 and ends with the records of a
    local run."""
    from cardinal.verify import suites

    results = 0
    get = ray.get

    def dying_get(*arguments: object, **options: object) -> object:
        nonlocal results
        if results == 3:
            raise ray.exceptions.LocalRayletDiedError()
        results += 1
        return get(*arguments, **options)

    monkeypatch.setitem(suites.SUITES, "quick", lambda out: tiny_instances())
    monkeypatch.setattr(ray, "get", dying_get)
    out = tmp_path / "run"
    arguments = ["crosscheck", "--out", str(out), "--solvers", "enumerate", "--executor", "ray", "--workers", "2", "--no-proof"]
    assert main(arguments) == 1
    [lost] = [line for line in capsys.readouterr().err.splitlines() if "lost" in line]
    assert "11 unit(s) lost" in lost and "LocalRayletDiedError" in lost and "--resume" in lost
    records = JsonLines(out / "records.jsonl").read()
    assert len(records) == 3 and all(call["status"] != "error" for r in records for call in r["solvers"].values())
    monkeypatch.setattr(ray, "get", get)
    assert main([*arguments, "--resume"]) == 0
    run_campaign("tiny", tmp_path / "whole", CampaignSettings(("enumerate",), 30.0), instances=tiny_instances())
    resumed = without_timings(JsonLines(out / "records.jsonl").read())
    assert resumed == without_timings(JsonLines(tmp_path / "whole" / "records.jsonl").read())


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.filterwarnings("ignore:Data has no positive values")  # every call of the run took 0 s
def test_a_unit_whose_worker_keeps_dying_is_lost_then_resumed(
    tmp_path: Path, ray_instance: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A unit that kills its worker process on every try is run 1 + RETRIES times, then lost: no
    record, exit 1, one line saying so and that --resume redoes it; one that kills it once is
    retried and certified as usual. --resume then certifies the lost unit: the records of a local run."""
    from cardinal.verify import suites

    monkeypatch.setattr(campaign, "certify_unit", dying_certify)
    monkeypatch.setitem(suites.SUITES, "quick", lambda out: tiny_instances()[2:])  # the DESIGN network
    out = tmp_path / "run"
    arguments = ["crosscheck", "--out", str(out), "--solvers", "enumerate", "--executor", "ray", "--workers", "2", "--no-proof"]
    assert main(arguments) == 1
    [lost] = [line for line in capsys.readouterr().err.splitlines() if "lost" in line]
    assert "1 unit(s) lost" in lost and "worker process died" in lost and "--resume" in lost
    attempts = Path(os.environ[ATTEMPTS])
    assert len(list(attempts.glob("contrastive.*"))) == 1 + RETRIES
    assert len(list(attempts.glob("abductive.*"))) == 2
    assert [r["kind"] for r in JsonLines(out / "records.jsonl").read()] == ["abductive"]
    assert main([*arguments, "--resume"]) == 0
    assert len(list(attempts.glob("contrastive.*"))) == 2 + RETRIES
    monkeypatch.undo()
    run_campaign("design", tmp_path / "local", CampaignSettings(("enumerate",), 30.0), instances=tiny_instances()[2:])
    resumed = sorted(without_timings(JsonLines(out / "records.jsonl").read()), key=lambda r: r["key"])
    local = sorted(without_timings(JsonLines(tmp_path / "local" / "records.jsonl").read()), key=lambda r: r["key"])
    assert resumed == local and local[1]["verdict"] == "greedy_suboptimal"  # design:0:contrastive


@pytest.mark.filterwarnings("ignore:Data has no positive values")
def test_a_solver_missing_on_a_worker_loses_the_units(tmp_path: Path, ray_instance: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver knows a backend that the workers do not: no unit gives a result, none is recorded,
    and the campaign ends saying why."""

    monkeypatch.setitem(registry.BACKENDS, "exact_liar", registry.Backend("exact_liar", "tests.application.test_cli_certify", "ExactLiarSolver", exact=True))
    result = run_campaign("design", tmp_path, CampaignSettings(("enumerate", "exact_liar"), 30.0, workers=2, executor="ray"), instances=tiny_instances()[2:])
    assert result.records == 0 and result.lost == 2
    assert "unknown solver 'exact_liar'" in result.lost_reason
    assert JsonLines(tmp_path / "records.jsonl").read() == []


def test_ray_flags_refused_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """--address without --executor ray, and --executor ray without Ray installed: a one-line
    message, exit 2, nothing written."""
    out = tmp_path / "run"
    assert main(["crosscheck", "--out", str(out), "--solvers", "enumerate", "--address", "auto"]) == 2
    assert "--address names a Ray cluster: use it with --executor ray" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as where it is not installed
    assert main(["crosscheck", "--out", str(out), "--solvers", "enumerate", "--executor", "ray"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "pip install 'cardinal[ray]'" in err
    assert not out.exists()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize("told", [True, False], ids=["session told by the driver", "session learned from a marked process"])
def test_the_watcher_kills_the_instances_processes_and_no_others(tmp_path: Path, told: bool) -> None:
    """The watcher of `verify/raywatch.py`, once its pipe closes, kills the processes that bear
    the instance's mark and those named `ray::...` that hold a file of the instance's session
    folder open even without the mark (Ray's setproctitle may wipe it: the agents' case), whether
    the driver told it the folder or a marked process holds a file of it; it spares a `ray::`
    process whose files are elsewhere and an unnamed one that holds a file of the folder (a
    `tail -f` of its logs). Decided from the exit status of each (SIGKILL or still running)."""
    from cardinal.verify import raywatch

    token = "0123456789abcdef"
    session = tmp_path / "ray" / "session_2026-01-01_00-00-00_000000_1"
    (session / "logs").mkdir(parents=True)
    plain = {k: v for k, v in os.environ.items() if k != raywatch.OWNER}

    def sleeper(name: str, out: Path, marked: bool = False) -> subprocess.Popen:
        environment = {**plain, raywatch.OWNER: token} if marked else plain
        with out.open("w") as stdout:
            return subprocess.Popen([name, "600"], executable="sleep", stdout=stdout, env=environment)

    agent = sleeper("ray::DashboardAgent", session / "logs" / "dashboard_agent.log")
    elsewhere = sleeper("ray::IDLE", tmp_path / "elsewhere.out")
    tail = sleeper("tail", session / "logs" / "raylet.out")
    raylet = sleeper("raylet", session / "logs" / "raylet.err" if not told else tmp_path / "raylet.err", marked=True)
    watcher = subprocess.Popen([sys.executable, "-I", raywatch.__file__, token], stdin=subprocess.PIPE)
    try:
        if told:
            watcher.stdin.write(f"{session}\n".encode())  # type: ignore[union-attr]
        watcher.stdin.close()  # type: ignore[union-attr]
        assert watcher.wait(timeout=120) == 0
        assert agent.wait(timeout=120) == raylet.wait(timeout=120) == -signal.SIGKILL
        assert elsewhere.poll() is None and tail.poll() is None
    finally:
        for process in (agent, elsewhere, tail, raylet, watcher):
            if process.poll() is None:
                process.kill()
            process.wait()

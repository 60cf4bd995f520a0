"""VNN-COMP tools as backends (`--solvers vnncomp:TOOLDIR`, issue 41), with tools written here as
shell scripts: an honest one (cardinal's exact decision of each property, as a tool would answer
it), one that lies (unsat always), and bad ones (missing scripts, a hang, garbage, a
counterexample of the wrong width or outside the box). The honest tool's minimum is the exact
one; the liar's answers are refuted by the exact replay; the bad ones end in one line or a logged
`error`/`timeout`, within the time limit kept from outside."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from cardinal.solvers.base import get_solver, solve_minimum
from cardinal.verify.cli import main
from cardinal.verify.generate import random_network
from cardinal.verify.pipeline import given
from cardinal.verify.vnncomp import export_layout

from cardinal.domain import Domain
from cardinal.errors import InputError
from cardinal.problem import Problem, Status

pytest.importorskip("z3")

HONEST = """
import re, sys
import numpy as np
from cardinal.domain import Domain
from cardinal.network import Network
from cardinal.problem import Problem
from cardinal.solvers.oracle import SetOracle
from cardinal.solvers.vnnlib import counterexample_text, decide

onnx, prop, results = sys.argv[1:4]
net, text = Network.load(onnx), open(prop).read()
low = {int(i): float(v) for i, v in re.findall(r"\\(>= X_(\\d+) (-?[0-9.]+)\\)", text)}
high = {int(i): float(v) for i, v in re.findall(r"\\(<= X_(\\d+) (-?[0-9.]+)\\)", text)}
box = Domain(np.array([low[i] for i in range(len(low))]), np.array([high[i] for i in range(len(high))]))
c = int(re.search(r"\\(>= Y_\\d+ Y_(\\d+)\\)", text).group(1))
problem = Problem.make(net, box.lower, "contrastive", box, None)
if problem.prediction != c:
    witness = box.lower
else:
    with SetOracle() as oracle:
        witness = decide(problem, np.ones(problem.n, dtype=bool), oracle, 60).witness
with open(results, "w") as handle:
    handle.write("unsat\\n" if witness is None else counterexample_text(net, witness))
"""


def _tool(folder: Path, run: str, prepare: str = "exit 0") -> str:
    """A tool folder with the two scripts (bodies `prepare`, `run`), as a backend name."""
    folder.mkdir()
    (folder / "prepare_instance.sh").write_text(f"#!/bin/bash\n{prepare}\n")
    (folder / "run_instance.sh").write_text(f"#!/bin/bash\n{run}\n")
    return f"vnncomp:{folder}"


def _case():
    rng = np.random.default_rng(100)
    net = random_network(rng, 3, (6,), "relu", monotone=False, outputs=3)
    return net, rng.random(3), Domain.unit(3)


def test_an_honest_tool_finds_the_exact_minimum(tmp_path: Path) -> None:
    net, x, domain = _case()
    (tmp_path / "honest.py").write_text(HONEST)
    name = _tool(tmp_path / "honest", f'"{sys.executable}" "{tmp_path / "honest.py"}" "$3" "$4" "$5"')
    for kind in ("contrastive", "abductive"):
        exact = solve_minimum(net, x, kind, domain, None, solver="z3", time_limit=60)
        assert exact.status == Status.OPTIMAL and exact.exact
        outcome = solve_minimum(net, x, kind, domain, None, solver=name, time_limit=300)
        assert outcome.solver == name and not outcome.exact
        assert outcome.status == Status.OPTIMAL and outcome.replayed, outcome
        assert len(outcome.solution) == len(exact.solution), (kind, outcome, exact)


def test_a_lying_tool_is_refuted_and_changes_nothing(tmp_path: Path) -> None:
    """unsat to every question: 'no CXp exists' and 'the empty set is an AXp', both refuted. (The
    hitting-set loop's own exact supply of contrastive sets is off, `supply=False`, so that the
    AXp rests on the tool's answers alone.)"""
    net, x, domain = _case()
    name = _tool(tmp_path / "liar", 'echo unsat > "$5"')
    for kind in ("contrastive", "abductive"):
        outcome = solve_minimum(net, x, kind, domain, None, solver=name, time_limit=60, guarded=False, supply=False)
        assert outcome.status == Status.REFUTED and outcome.claimed is not None, outcome
        assert not outcome.proved
        exact = solve_minimum(net, x, kind, domain, None, solver="z3", time_limit=60)
        assert exact.status == Status.OPTIMAL and exact.proved


@pytest.mark.parametrize(
    ("run", "status", "message"),
    [
        ('echo "sat" > "$5"; echo "((X_0 0.5))" >> "$5"', Status.ERROR, "the network has 3"),
        ('printf "sat\\n((X_0 9.5)\\n(X_1 9.5)\\n(X_2 9.5))\\n" > "$5"', Status.ERROR, "outside"),
        ('echo "the answer is 42" > "$5"', Status.ERROR, "not sat, unsat"),
        ('echo "sat" > "$5"; echo "((X_0 x) (X_1 1) (X_2 1))" >> "$5"', Status.ERROR, "not a number"),
        ("echo crashed >&2; exit 3", Status.ERROR, "exited with 3: crashed"),
        ("exit 0", Status.ERROR, "no results file"),
        ("sleep 1000", Status.TIMEOUT, ""),
    ],
)
def test_bad_tools_end_in_a_logged_error_or_timeout(tmp_path: Path, run: str, status: Status, message: str) -> None:
    """A tool that answers badly at once gets a limit no busy machine reaches (its error must not
    turn into a timeout); the hanging one a short limit, which ends it."""
    net, x, domain = _case()
    name = _tool(tmp_path / "bad", run)
    limit = 3 if status == Status.TIMEOUT else SETTLE
    outcome = solve_minimum(net, x, "contrastive", domain, None, solver=name, time_limit=limit, guarded=False)
    assert outcome.status == status and message in outcome.message, outcome  # a hang: killed (else 1000 s here)


def test_a_tool_folder_without_the_scripts_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"has no prepare_instance.sh or run_instance.sh") as error:
        get_solver(f"vnncomp:{tmp_path / 'empty'}")
    assert "\n" not in str(error.value)
    with pytest.raises(InputError, match="is not a folder"):
        get_solver(f"vnncomp:{tmp_path / 'nowhere'}")


MARABOU = """
import sys, warnings
warnings.simplefilter("ignore")
from maraboupy import Marabou
from cardinal.solvers.vnnlib import number

onnx, prop, results, timeout = sys.argv[1:5]
network = Marabou.read_onnx(onnx)
options = Marabou.createOptions(timeoutInSeconds=int(timeout), verbosity=0)
code, values, _ = network.solve(propertyFilename=prop, verbose=False, options=options)
with open(results, "w") as handle:
    if code == "sat":
        pairs = [(f"X_{i}", values[v]) for i, v in enumerate(network.inputVars[0].flatten())]
        pairs += [(f"Y_{j}", values[v]) for j, v in enumerate(network.outputVars[0].flatten())]
        handle.write("sat\\n(" + "\\n".join(f"({name} {number(value)})" for name, value in pairs) + ")\\n")
    else:
        handle.write({"unsat": "unsat", "TIMEOUT": "timeout"}.get(code, "error") + "\\n")
"""


@pytest.mark.slow  # about 3 minutes on 2 cores; test_vnnlib.py keeps a Marabou agreement check in the default run
def test_marabou_as_a_vnncomp_tool_agrees_with_the_certified_answers(tmp_path: Path) -> None:
    """Marabou's VNN-LIB runner (maraboupy) wrapped in VNN-COMP's scripts: on a folder that
    `export --layout vnncomp` wrote it answers every instance it decides as the folder's certified
    answer, and as a backend it finds the exact minimum."""
    pytest.importorskip("maraboupy")
    net, x, domain = _case()
    (tmp_path / "marabou.py").write_text(MARABOU)
    name = _tool(tmp_path / "marabou", f'"{sys.executable}" "{tmp_path / "marabou.py"}" "$3" "$4" "$5" "$6"')
    folder = Path(name.removeprefix("vnncomp:"))
    bench = tmp_path / "bench"
    export_layout(net, x[None, :], ("contrastive", "abductive"), given(net, domain, None), bench, 30)
    decided = set()
    for number, line in enumerate((bench / "instances.csv").read_text().splitlines()):
        onnx, prop, timeout = line.split(",")
        results = tmp_path / f"{number}.results"
        arguments = ["v1", "cardinal", str(bench / onnx), str(bench / prop), str(results), timeout]
        subprocess.run(["bash", str(folder / "run_instance.sh"), *arguments], check=True, timeout=120)
        answer = results.read_text().split()[0]
        if answer in ("sat", "unsat"):
            assert answer == (bench / prop).with_suffix(".answer").read_text().strip(), prop
            decided.add(answer)
    assert decided == {"sat", "unsat"}
    for kind in ("contrastive", "abductive"):
        exact = solve_minimum(net, x, kind, domain, None, solver="z3", time_limit=60)
        outcome = solve_minimum(net, x, kind, domain, None, solver=name, time_limit=300)
        assert outcome.status == Status.OPTIMAL and outcome.replayed and len(outcome.solution) == len(exact.solution), outcome


def test_a_lying_tool_changes_no_verdict_of_certify(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`cardinal certify --solvers z3,vnncomp:LIAR --method greedy` (no explainer runs on this
    network that is not sign-monotone: the solvers are asked for the minimum): every line's
    verdict, minimum and certification are those of z3 alone, and the liar is listed as refuted."""
    net, x, _ = _case()
    network, inputs = tmp_path / "net.json", tmp_path / "x.csv"
    net.save(network)
    np.savetxt(inputs, x[None, :], delimiter=",")
    liar = _tool(tmp_path / "liar", 'echo unsat > "$5"')
    lines = {}
    for solvers in ("z3", f"z3,{liar}"):
        certify = ["certify", str(network), "--inputs", str(inputs), "--solvers", solvers, "--method", "greedy"]
        assert main([*certify, "--time-limit", "30"]) == 0
        lines[solvers] = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    alone, together = lines["z3"], lines[f"z3,{liar}"]
    assert len(alone) == len(together) == 2
    for one, two in zip(alone, together, strict=True):
        assert (one["verdict"], one["minimum"], one["certified"]) == (two["verdict"], two["minimum"], two["certified"])
        claim = two["solvers"][liar]
        # refuted, or (an AXp, whose loop finds the flips the liar denies through its own exact
        # supply) an answer replayed exactly and of the proved minimum's size
        assert two["refuted"] == [liar] or (claim["replayed"] and claim["size"] == len(two["minimum"])), claim
        assert one["certified"]
    assert together[0]["refuted"] == [liar] or together[1]["refuted"] == [liar]


@pytest.mark.slow  # a layout and the exact oracle's start: 83 s on the loaded 2-core VM
def test_the_xbench_runner_answers_as_certified_and_lists_a_wrong_answer(tmp_path: Path) -> None:
    """bench.xbench's `cardinal` backend (the property parsed back, decided exactly) answers every
    instance of a layout as its certified answer; a backend's wrong answer is listed in the table
    under it and counted as wrong, never as correct."""
    pytest.importorskip("matplotlib")
    from bench.xbench import run, write_results

    net, x, domain = _case()
    bench = tmp_path / "bench"
    export_layout(net, x[None, :], ("contrastive", "abductive"), given(net, domain, None, 0.3), bench, 30)
    records = run(bench, ["cardinal"], 30, None, lambda line: None)
    assert records and all(r["cardinal"][0] == r["answer"] for r in records)
    lie = {"unsat": "sat", "sat": "unsat"}[records[0]["answer"]]
    records[0]["liar"] = (lie, 0.1)
    for record in records[1:]:
        record["liar"] = (record["answer"], 0.1)
    write_results(tmp_path / "results.md", records, ["cardinal", "liar"], bench, 30, ["run"])
    table = (tmp_path / "results.md").read_text()
    assert f"| liar | {len(records) - 1} | 1 |" in table and f"- liar: `{records[0]['instance']}` answered {lie}" in table
    assert f"| cardinal | {len(records)} | 0 |" in table and (tmp_path / "xbench_cactus.png").stat().st_size > 0


# ---------------------------------------------------------------------------- hostile tools (issue 49)
# Each hostile tool marks every process it starts with a token in its argv (`exec -a`, or bash's
# $0); the checks read the OS's process table (/proc/PID/cmdline), which shares no code with the
# keeper that ends them. Waits that must end are bounded generously (`SETTLE`): a loaded machine
# slows them, it cannot make them fail.
SETTLE = 120.0  # seconds a check waits for processes to go, a folder to be removed, a file to appear

HANGING = """
if [ -n "$WARM" ] && [ ! -e "{warm}" ]; then touch "{warm}"; echo unsat > "$5"; exit 0; fi
echo "$(dirname "$3")" > "{record}"
bash -c 'while :; do :; done' {mark}-spin &
setsid bash -c 'exec -a {mark}-session sleep 1000' &
( (exec -a {mark}-orphan sleep 1000) & )
echo started > "{started}"
exec -a {mark}-main sleep 1000
"""


def _marked(mark: str) -> list[int]:
    """The live processes whose command line holds `mark` (zombies have none)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def _gone(check, what: str) -> None:
    """Wait up to SETTLE s for `check()` to be falsy; fail naming `what` and what is left."""
    until = time.monotonic() + SETTLE
    while (left := check()) and time.monotonic() < until:
        time.sleep(0.1)
    assert not left, f"{what} still there after {SETTLE:g} s: {left}"


@pytest.fixture
def mark():
    """A fresh argv mark; whatever still carries it at the end is killed (a failed test leaves no spinner)."""
    token = f"cardinal-hostile-{uuid.uuid4().hex}"
    yield token
    for pid in _marked(token):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _hanging_tool(tmp_path: Path, mark: str, warm: bool = False) -> tuple[str, Path, Path]:
    """A tool whose run_instance.sh forks a spinner, a process in a session of its own and a
    double-forked orphan, then hangs (`warm`: not on its first run, which answers `unsat` at
    once); its name, the file where it records its folder, and the file it writes once all are
    started."""
    record, started, first = tmp_path / "work.txt", tmp_path / "started", tmp_path / "warm"
    run = HANGING.format(record=record, started=started, mark=mark, warm=first)
    return _tool(tmp_path / "hang", f"WARM={'1' if warm else ''}\n{run}"), record, started


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads the process table in /proc")
def test_a_hanging_tool_is_ended_whole_when_the_guard_kills_the_solver_process(tmp_path: Path, mark: str) -> None:
    """The guard kills the solver process at the limit (before the backend's own deadline plus
    GRACE): the tool's main process, its spinning child, the child in a session of its own and
    the orphan all go, and so does the call's folder. (A first call, answered at once, warms the
    solver process, so that the tool surely starts within the second call's limit.)"""
    net, x, domain = _case()
    name, record, started = _hanging_tool(tmp_path, mark, warm=True)
    problem = Problem.make(net, x, "contrastive", domain, None)
    backend = get_solver(name, guarded=True)
    try:
        assert backend.wait_started(time.perf_counter() + SETTLE)
        first = backend.solve(problem, None, SETTLE)
        assert first.status == Status.NONE_EXISTS and not started.exists(), first  # the warm-up's unsat
        outcome = backend.solve(problem, None, 8.0)  # the guard's kill at 8.5 s, the backend's own at 10 s
    finally:
        backend.close()
    assert outcome.status == Status.TIMEOUT and outcome.raw_status == "killed", outcome  # the guard's kill
    assert started.exists()  # the tool had started all its processes
    _gone(lambda: _marked(mark), "the tool's processes")
    work = Path(record.read_text().strip())
    assert work.name.startswith("cardinal-vnncomp-")
    _gone(work.exists, f"the call's folder {work}")


INTERRUPTED = """
import sys
from cardinal.domain import Domain
from cardinal.problem import Problem
from cardinal.solvers.vnncomp import VnncompSolver
from cardinal.verify.generate import random_network
import numpy as np

rng = np.random.default_rng(100)
net = random_network(rng, 3, (6,), "relu", monotone=False, outputs=3)
problem = Problem.make(net, rng.random(3), "contrastive", Domain.unit(3), None)
VnncompSolver(sys.argv[1]).solve(problem, None, 1000.0)
"""


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads the process table in /proc")
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGKILL])
def test_a_hanging_tool_is_ended_whole_when_its_caller_is_interrupted_or_killed(
    tmp_path: Path, mark: str, stop: signal.Signals
) -> None:
    """A call in this process's place (a Python process running the backend unguarded): Ctrl-C
    (KeyboardInterrupt through `solve`) or SIGKILL of that process ends the tool's processes and
    removes the call's folder."""
    name, record, started = _hanging_tool(tmp_path, mark)
    (tmp_path / "caller.py").write_text(INTERRUPTED)
    caller = subprocess.Popen([sys.executable, str(tmp_path / "caller.py"), name], stderr=subprocess.PIPE)
    try:
        _gone(lambda: caller.poll() is None and not started.exists(), "the wait for the tool to start")
        assert caller.poll() is None, caller.stderr.read().decode()
        caller.send_signal(stop)
        _, error = caller.communicate(timeout=SETTLE)
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()
    assert caller.returncode != 0
    if stop == signal.SIGINT:
        assert b"KeyboardInterrupt" in error, error.decode()
    _gone(lambda: _marked(mark), "the tool's processes")
    _gone(Path(record.read_text().strip()).exists, "the call's folder")


HOLDER = """
echo "$(dirname "$3")" > "{record}"
mktemp -d > "{temporary}"
(exec -a {mark}-holder sleep 1000) &
echo unsat > "$5"
"""


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads the process table in /proc")
def test_an_answer_is_read_when_the_tool_exits_though_its_child_holds_stdout_and_stderr(tmp_path: Path, mark: str) -> None:
    """run_instance.sh answers `unsat` at once and leaves a child that holds its standard output
    and error open: the answer counts (the liar is refuted, as when it leaves no child), not a
    timeout, and no child is left; its TMPDIR folder goes with the call's folder."""
    net, x, domain = _case()
    record, temporary = tmp_path / "work.txt", tmp_path / "tmpdir.txt"
    name = _tool(tmp_path / "holder", HOLDER.format(record=record, temporary=temporary, mark=mark))
    outcome = solve_minimum(net, x, "contrastive", domain, None, solver=name, time_limit=60, guarded=False, supply=False)
    assert outcome.status == Status.REFUTED and outcome.claimed is not None, outcome
    assert not _marked(mark)  # ended before the answer was taken, not later
    assert not Path(record.read_text().strip()).exists()
    made = Path(temporary.read_text().strip())
    assert made.is_relative_to(Path(record.read_text().strip())) and not made.exists()


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ('truncate -s 6G "$5"', "over the limit of 1048576"),  # sparse: 6 GiB read would be a MemoryError
        ('echo unsat > "$5"; truncate -s 2M "$5"', "over the limit of 1048576"),  # an answer, but too large
        ('ln -s "{secret}" "$5"', "is not a regular file"),
        ('mkfifo "$5"', "is not a regular file"),
        ('mkdir "$5"', "is not a regular file"),
    ],
)
def test_a_results_file_that_is_large_linked_or_not_a_file_is_a_logged_error(tmp_path: Path, run: str, message: str) -> None:
    """The results file is read only as a regular file of at most 1 MiB at the path cardinal
    chose: a link to a file that holds an answer (here `unsat`, and a text that must not reach
    the message), a FIFO, a folder, a 6 GiB sparse file or an answer padded past 1 MiB is an
    `error` under the tool, never a verdict, and nothing of the linked file is read."""
    net, x, domain = _case()
    secret = tmp_path / "secret.txt"
    secret.write_text("unsat\nSECRET-CONTENT\n")
    name = _tool(tmp_path / "bad", run.format(secret=secret))
    outcome = solve_minimum(net, x, "contrastive", domain, None, solver=name, time_limit=60, guarded=False)
    assert outcome.status == Status.ERROR and message in outcome.message, outcome
    assert outcome.raw_status == "error" and "SECRET" not in outcome.message


def test_cardinal_writes_no_file_through_a_link_a_script_planted(tmp_path: Path) -> None:
    """prepare_instance.sh plants a link, at the path where run_instance.sh's output will go, to
    a file of the user's: the run is refused (a logged `error`) and that file is unchanged."""
    net, x, domain = _case()
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's file\n")
    name = _tool(tmp_path / "planter", 'echo unsat > "$5"', prepare=f'ln -s "{victim}" "$(dirname "$3")/q1.run_instance.stdout"')
    outcome = solve_minimum(net, x, "contrastive", domain, None, solver=name, time_limit=60, guarded=False)
    assert outcome.status == Status.ERROR and "run_instance.sh" in outcome.message, outcome
    assert victim.read_text() == "the user's file\n" and not victim.is_symlink()

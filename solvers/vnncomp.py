"""`VnncompSolver`: any verifier that follows VNN-COMP's scripts, as the set oracle of an
implicit-hitting-set search (`--solvers vnncomp:TOOLDIR`).

A VNN-COMP tool folder holds `prepare_instance.sh` and `run_instance.sh`; a benchmark instance is
run as

    bash prepare_instance.sh v1 CATEGORY ONNX VNNLIB
    bash run_instance.sh v1 CATEGORY ONNX VNNLIB RESULTS TIMEOUT

in the tool folder, and RESULTS then starts with `sat`, `unsat`, `timeout` or `error` (`unknown`
is read as undecided), a `sat` followed by its counterexample `((X_0 v) ... (Y_j v))`. Like
Marabou (`solvers.marabou`), such a tool answers fixed-set questions only, so the search over sets
is cardinal's (`solvers.hitting`): each question "does a point with the free features F in the
box, the others at x, change the prediction?" is one instance — the network as cardinal writes
ONNX (float64, once per call) and the region's property (`solvers.vnnlib.property_text`: strict
sides written as their closures, so a point exactly on a tie may come back; it flips nothing and
the exact replay treats it so).

**Trust.** The tool's counterexample is the only evidence it gives: its inputs are read (a point
of the wrong width, outside the region, or not a counterexample at all is a logged `error`), and
the search and `solvers.base.replay` re-check in exact arithmetic whatever the answer rests on.
Its `unsat` is a float claim, never a proof (`exact` is false): an answer that rests on a false
one is refuted by the replay (status `refuted` under this backend) and changes nothing else.

**Time.** Both scripts run in their own process group, killed (SIGKILL to the group) when the
call's deadline passes (`run_instance.sh` is given the seconds left, rounded up, and `GRACE`
seconds more to write its answer): a tool that hangs ends the call with `timeout`.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

from cardinal.errors import InputError, Stopped
from cardinal.problem import Outcome, Problem, Status

from . import hitting
from .base import BaseSolver

PREFIX = "vnncomp:"
SCRIPTS = ("prepare_instance.sh", "run_instance.sh")
CATEGORY = "cardinal"
GRACE = 2.0  # seconds past the deadline before the tool's process group is killed
DETAIL = 200  # characters of a tool's own output kept in a message


def tool_folder(name: str) -> Path:
    """The tool folder of a backend name `vnncomp:TOOLDIR`; `InputError` (one line) when the
    folder or one of its scripts is missing."""
    folder = Path(name.removeprefix(PREFIX))
    if not name.startswith(PREFIX) or not str(folder):
        raise InputError(f"solver {name!r}: give a tool folder, vnncomp:TOOLDIR")
    if not folder.is_dir():
        raise InputError(f"solver {name!r}: {folder} is not a folder")
    missing = [script for script in SCRIPTS if not (folder / script).is_file()]
    if missing:
        raise InputError(f"solver {name!r}: {folder} has no {' or '.join(missing)} (VNN-COMP's scripts)")
    return folder.resolve()


class _Stopped(Stopped):
    """The tool ended a query without an answer cardinal can use (error, garbage, a bad point)."""


class VnncompSolver(BaseSolver):
    """A VNN-COMP tool as a backend (module docstring); `name`: `vnncomp:TOOLDIR` as given."""

    exact = False

    def __init__(self, name: str) -> None:
        self.name = name
        self.folder = tool_folder(name)

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        started = time.perf_counter()
        if problem.domain.binary:
            return self.outcome(Status.UNSUPPORTED, started, message="VNN-LIB has no discrete inputs (binary box)")
        from .vnnlib import onnx_data

        abductive = partial(hitting.minimum_abductive, supply=self.supply)
        search = hitting.minimum_contrastive if problem.kind == "contrastive" else abductive
        with tempfile.TemporaryDirectory(prefix="cardinal-vnncomp-") as work:
            query = _Query(self, problem, Path(work))
            query.onnx.write_bytes(onnx_data(problem.net))
            try:
                result = search(problem, query.find_flip, at_most, started + time_limit)
            except _Stopped as stop:
                return self.outcome(Status.ERROR, started, raw_status="error", message=f"{stop} ({query.calls} instances)")
        message = f"{query.calls} instances" + (f"; {result.message}" if result.message else "")
        fields = {"solution": result.solution, "witness": result.witness, "raw_status": query.raw, "message": message,
                  "lemmas": result.lemmas}
        return self.outcome(result.status, started, **fields)


class _Query:
    """One call's questions, each an instance in the folder `work`."""

    def __init__(self, solver: VnncompSolver, problem: Problem, work: Path) -> None:
        self.solver, self.problem, self.work = solver, problem, work
        self.onnx = work / "network.onnx"
        self.calls, self.raw = 0, ""

    def find_flip(self, free: frozenset[int], deadline: float) -> np.ndarray | None:
        """The tool's counterexample [n] for the region with `free` features, or None on unsat;
        raises `hitting.OracleTimeout` at the deadline (or on the tool's `timeout`), `_Stopped`
        on anything else."""
        from .vnnlib import property_text, read_counterexample

        problem = self.problem
        mask = np.isin(np.arange(problem.n), sorted(free))
        self.calls += 1
        prop = self.work / f"q{self.calls}.vnnlib"
        results = self.work / f"q{self.calls}.results"
        prop.write_text(property_text(problem, mask, [f"cardinal: is there a flip with features {sorted(free)} free?"]))
        common = ["v1", CATEGORY, str(self.onnx), str(prop)]
        self._run("prepare_instance.sh", common, deadline)
        left = deadline - time.perf_counter()
        if left <= 0:
            raise hitting.OracleTimeout("deadline")
        self._run("run_instance.sh", [*common, str(results), str(max(1, math.ceil(left)))], deadline)
        if not results.is_file():
            raise _Stopped(f"{self.solver.name}: run_instance.sh wrote no results file")
        text = results.read_text(errors="replace")
        lines = text.strip().splitlines()
        self.raw = lines[0].strip().lower() if lines else ""
        if self.raw in ("unsat", "holds"):
            return None
        if self.raw in ("timeout", "unknown"):
            raise hitting.OracleTimeout(self.raw)
        if self.raw not in ("sat", "violated"):
            raise _Stopped(f"{self.solver.name}: result {text.strip()[:DETAIL]!r}, not sat, unsat, timeout or error")
        try:
            y = read_counterexample("\n".join(lines[1:]), problem.n, f"{self.solver.name}: its counterexample")
        except InputError as error:
            raise _Stopped(str(error)) from None
        lower = np.where(mask, problem.domain.lower, problem.x)
        upper = np.where(mask, problem.domain.upper, problem.x)
        outside = np.flatnonzero(~((lower <= y) & (y <= upper)))
        if outside.size:
            i = int(outside[0])
            raise _Stopped(f"{self.solver.name}: its counterexample has X_{i} = {y[i]!r}, outside [{lower[i]!r}, {upper[i]!r}]")
        return y

    def _run(self, script: str, arguments: list[str], deadline: float) -> None:
        """Run one script in the tool folder, in its own process group, killed past the deadline
        (plus `GRACE`); a non-zero exit is `_Stopped`, the deadline `hitting.OracleTimeout`."""
        left = deadline + GRACE - time.perf_counter()
        if left <= 0:
            raise hitting.OracleTimeout("deadline")
        process = subprocess.Popen(
            ["bash", str(self.solver.folder / script), *arguments],
            cwd=self.solver.folder,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            _, error = process.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            raise hitting.OracleTimeout(f"{script} killed at the time limit") from None
        finally:
            _kill_group(process)  # whatever the tool left running
        if process.returncode != 0:
            tail = error.decode(errors="replace").strip().splitlines()[-1:] or [""]
            raise _Stopped(f"{self.solver.name}: {script} exited with {process.returncode}: {tail[0][:DETAIL]}")


def _kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the process's group (its session) and reap the process."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()

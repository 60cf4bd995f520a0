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

**Time and processes.** Each call has a keeper process (`solvers.toolkeeper`) that runs both
scripts, each in its own session and process group, standard output and error going to files of
the call's folder (so a background child that keeps them open holds up nothing: an answer is read
as soon as the script's main process exits). When a script exits, or is killed because the call's
deadline passed (`run_instance.sh` is given the seconds left, rounded up, and `GRACE` seconds more
to write its answer: a tool that hangs ends the call with `timeout`), the keeper ends its process
group, its session and every process it left (orphans included), before the call goes on. The
call's folder (`TMPDIR` of the scripts too) is removed when the call ends, however: normally, by
an exception or Ctrl-C, or when the guard (`solvers.guard`) kills the solver process — the keeper
sees its pipe close, ends the tool and removes the folder. What a tool can still do, and what
escapes: `solvers.toolkeeper`.

**Results.** RESULTS is a path cardinal chose in that folder; it is read only if it is a regular
file there (not a symbolic link: opened with O_NOFOLLOW, checked by fstat) of at most
`RESULTS_LIMIT` bytes. Anything else is a logged `error` under the tool, never read, never a
verdict.
"""

from __future__ import annotations

import math
import os
import stat
import time
from functools import partial
from pathlib import Path

import numpy as np

from cardinal.errors import InputError, Stopped
from cardinal.problem import Outcome, Problem, Status

from . import hitting
from .base import BaseSolver
from .toolkeeper import Keeper, KeeperError

PREFIX = "vnncomp:"
SCRIPTS = ("prepare_instance.sh", "run_instance.sh")
CATEGORY = "cardinal"
GRACE = 2.0  # seconds past the deadline before the tool's process group is killed
DETAIL = 200  # characters of a tool's own output kept in a message
RESULTS_LIMIT = 1 << 20  # bytes: a larger results file is a tool error, never read


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
        try:
            keeper = Keeper("cardinal-vnncomp-")
        except KeeperError as error:
            return self.outcome(Status.ERROR, started, raw_status="error", message=f"{self.name}: {error}")
        with keeper:  # at its end: the tool's processes ended, its folder removed
            query = _Query(self, problem, keeper)
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

    def __init__(self, solver: VnncompSolver, problem: Problem, keeper: Keeper) -> None:
        self.solver, self.problem, self.work, self.keeper = solver, problem, keeper.work, keeper
        self.onnx = self.work / "network.onnx"
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
        question = property_text(problem, mask, [f"cardinal: is there a flip with features {sorted(free)} free?"])
        try:  # a new file: never through a link an earlier script left in `work`
            with open(os.open(prop, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600), "w") as handle:
                handle.write(question)
        except OSError as error:
            raise _Stopped(f"{self.solver.name}: cannot write {prop.name} in its folder ({error.strerror})") from None
        common = ["v1", CATEGORY, str(self.onnx), str(prop)]
        self._run("prepare_instance.sh", common, deadline)
        left = deadline - time.perf_counter()
        if left <= 0:
            raise hitting.OracleTimeout("deadline")
        self._run("run_instance.sh", [*common, str(results), str(max(1, math.ceil(left)))], deadline)
        text = self._results(results)
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

    def _results(self, path: Path) -> str:
        """The text of the results file `path` (in `work`), if it is a regular file of at most
        `RESULTS_LIMIT` bytes; `_Stopped` if it is missing, a link, not a regular file or larger."""
        name = self.solver.name
        try:
            data = _read_regular(path, RESULTS_LIMIT)
        except FileNotFoundError:
            raise _Stopped(f"{name}: run_instance.sh wrote no results file") from None
        except OSError as error:
            raise _Stopped(f"{name}: its results file {path.name} {error.strerror}") from None
        return data.decode(errors="replace")

    def _run(self, script: str, arguments: list[str], deadline: float) -> None:
        """Run one script in the tool folder through the keeper (its own session and process
        group, all it started ended when it exits), killed past the deadline (plus `GRACE`); a
        non-zero exit is `_Stopped`, the deadline `hitting.OracleTimeout`."""
        if deadline + GRACE - time.perf_counter() <= 0:
            raise hitting.OracleTimeout("deadline")
        stem = self.work / f"q{self.calls}.{script.removesuffix('.sh')}"
        stderr = stem.with_suffix(stem.suffix + ".stderr")
        try:
            code = self.keeper.run(
                ["bash", str(self.solver.folder / script), *arguments], self.solver.folder,
                stem.with_suffix(stem.suffix + ".stdout"), stderr, deadline + GRACE,
            )  # fmt: skip
        except KeeperError as error:
            raise _Stopped(f"{self.solver.name}: {script}: {error}") from None
        if code is None:
            raise hitting.OracleTimeout(f"{script} killed at the time limit")
        if code != 0:
            tail = _tail(stderr).strip().splitlines()[-1:] or [""]
            raise _Stopped(f"{self.solver.name}: {script} exited with {code}: {tail[0][:DETAIL]}")


def _read_regular(path: Path, limit: int) -> bytes:
    """The bytes of `path` if it is a regular file, not a symbolic link, of at most `limit` bytes.
    OSError otherwise, its `strerror` saying why in words ("is not a regular file", "has N bytes,
    over the limit of L"); FileNotFoundError when there is nothing at `path`."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as error:  # ELOOP: a symbolic link; EACCES, ...
        raise OSError(error.errno, f"is not a regular file ({error.strerror})") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(0, "is not a regular file")
        chunks, size = [], 0
        while status.st_size <= limit and size <= limit and (chunk := os.read(descriptor, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        if max(status.st_size, size) > limit:
            raise OSError(0, f"has {max(status.st_size, size)} bytes, over the limit of {limit}")
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def _tail(path: Path, size: int = 4096) -> str:
    """The last `size` bytes of the regular file `path` as text ("" if it is not one)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            return ""
        os.lseek(descriptor, max(0, status.st_size - size), os.SEEK_SET)
        return os.read(descriptor, size).decode(errors="replace")
    finally:
        os.close(descriptor)

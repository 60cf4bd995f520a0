"""Time limits that hold whatever a backend does: `GuardedSolver` runs a backend in a child
process and kills the child when a call overruns its limit.

Backends are asked to stop at their limit, and mostly do, but not everywhere: on a monotone
28 × 512 × 512 × 512 ReLU network under a 2 s limit, HiGHS spent 42 s in its MIP presolve, which
checks no clock and calls no callback, and z3's lazy loop spent 30 s computing one exact tangent
cut (integer matrix products that no solver timeout reaches). So each call is bounded from
outside: the caller waits until the limit plus half the allowed overrun (`allowed_overrun`: 10%,
at least 1 s), then kills the child and answers TIMEOUT; a fresh child serves the next call.
The answer of a call that finishes is the backend's own, its seconds measured by the caller
(transfer included); `solvers.base.solve_problem` replays it in exact arithmetic as usual. A
backend may report each explanation it finds on the way (`report_incumbent`; z3 does): a call
stopped from outside then answers with the last one, as a call that stops itself at its limit
would (FEASIBLE within `at_most`, else TIMEOUT with the set), and that set is replayed too.

Children come from a *zygote*: a fresh interpreter started once per calling process, with the
backends' modules loaded and no solver ever run in it, which forks one child per backend on
request (a fork of a process that has run z3 or HiGHS can hang: their timer and scheduler threads
do not survive it). The zygote dies with its caller and each child with the zygote
(`die_with_parent`), so no solver outlives a killed command or campaign; children ignore Ctrl-C
(their caller stops them) and write nothing to stdout.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any

import torch

from ..verify.errors import InputError
from ..verify.problem import Outcome, Problem, Status

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_POLL_CHUNK = 3600.0  # seconds: poll()'s timeout is a C int of milliseconds
_PRELOAD = ("cardinal.solvers.enumerate", "cardinal.solvers.smt", "cardinal.solvers.highs", "cardinal.solvers.gurobi")


Incumbent = tuple[tuple[int, ...], tuple[float, ...] | None]  # (features, witness point [n] or None)
_incumbent_hook: Callable[[Incumbent], None] | None = None  # set in a child: sends to the caller


def report_incumbent(features: Iterable[int], witness: Iterable[float] | None = None) -> None:
    """For backends: an explanation found so far (sorted features; for a contrastive one, the
    point that flips). A guarded call stopped at its limit answers with the last one reported;
    elsewhere this does nothing."""
    if _incumbent_hook is not None:
        _incumbent_hook((tuple(int(i) for i in features), None if witness is None else tuple(float(v) for v in witness)))


def allowed_overrun(time_limit: float) -> float:
    """How far past its limit a call may end: 10% of the limit, at least 1 s."""
    return max(0.1 * time_limit, 1.0)


def die_with_parent(parent: int) -> None:
    """Have this process killed when its parent, the process `parent`, dies: Linux's parent-death
    signal (prctl PR_SET_PDEATHSIG), else a watchdog thread that polls the parent pid. Exits at
    once if the parent is already gone."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl failed")
    except (OSError, AttributeError):
        threading.Thread(target=_watch_parent, args=(parent,), name="watch-parent", daemon=True).start()
    if os.getppid() != parent:
        os._exit(1)


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


class GuardedSolver:
    """The backend `factory(**options)` served by a child process (see the module docstring); a
    `solvers.base.Solver` itself."""

    def __init__(self, name: str, factory: type, options: dict[str, Any]) -> None:
        factory(**options).close()  # bad options fail here, in the caller's process
        self.name, self.exact = name, factory.exact
        self.factory, self.options = factory, options
        self._child: tuple[int, Connection] | None = None  # (pid, connection)
        _zygote()  # start it now: it loads its modules while the caller works

    def __enter__(self) -> GuardedSolver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def outcome(self, status: Status, started: float, **fields: Any) -> Outcome:
        return Outcome(status, self.name, time.perf_counter() - started, exact=self.exact, **fields)

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        pid, connection = self._connect()
        started = time.perf_counter()
        incumbent: Incumbent | None = None
        try:
            request = (problem.net, problem.x, problem.kind, problem.domain, problem.threshold, problem.epsilon)
            connection.send((request, at_most, time_limit, started))
            while True:
                if not _wait(connection, started + time_limit + allowed_overrun(time_limit) / 2):
                    self.close()
                    return self._stopped(started, time_limit, at_most, incumbent)
                kind, payload = connection.recv()
                if kind != "incumbent":
                    break
                incumbent = payload
        except (EOFError, OSError):
            self.close()
            return self.outcome(Status.ERROR, started, message=f"the {self.name} process (pid {pid}) died")
        except BaseException:  # Ctrl-C or the like: a child still at work must not answer a later call
            self.close()
            raise
        if kind == "input":
            raise InputError(payload)
        return replace(payload, seconds=time.perf_counter() - started)

    def _stopped(self, started: float, time_limit: float, at_most: int | None, incumbent: Incumbent | None) -> Outcome:
        """The outcome of a call killed at its limit: TIMEOUT, or FEASIBLE when an explanation
        within `at_most` was reported before."""
        message = f"stopped from outside at the time limit ({time_limit:g} s)"
        if incumbent is None:
            return self.outcome(Status.TIMEOUT, started, raw_status="killed", message=message)
        features, witness = incumbent
        status = Status.FEASIBLE if at_most is not None and len(features) <= at_most else Status.TIMEOUT
        message += "; the best set found before"
        return self.outcome(status, started, solution=features, witness=witness, raw_status="killed", message=message)

    def _connect(self) -> tuple[int, Connection]:
        """The live child, forked by the zygote if there is none."""
        if self._child is None or self._child[1].closed:
            self._child = _zygote().fork(self.factory, self.options)
        return self._child

    def close(self) -> None:
        """Kill the child (idle or not); the next call gets a fresh one."""
        if self._child is not None:
            pid, connection = self._child
            self._child = None
            connection.close()
            try:
                os.kill(pid, signal.SIGKILL)  # the zygote reaps it
            except ProcessLookupError:
                pass


def _wait(connection: Connection, until: float) -> bool:
    """Whether an answer arrives before the time `until` (a time.perf_counter() value)."""
    while (left := until - time.perf_counter()) > 0:
        if connection.poll(min(left, _POLL_CHUNK)):
            return True
    return False


# ---------------------------------------------------------------------------- the zygote
class _Zygote:
    """The caller's handle on its zygote process: a control socket and the process."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        ours, theirs = socket.socketpair()
        command = [sys.executable, "-c", "from cardinal.solvers.guard import zygote_main; zygote_main()"]
        path = os.pathsep.join(entry for entry in sys.path if entry)  # the caller's modules, backends included
        # as many threads (torch's, BLAS's) as the caller has: the one thread of a campaign worker
        # holds in its solvers too, so that two workers on two cores do not run four threads
        threads = {name: str(torch.get_num_threads()) for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
        self.process = subprocess.Popen(
            [*command, str(self.owner), str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env={**os.environ, **threads, "PYTHONPATH": path},
        )
        theirs.close()
        self.control = ours

    def fork(self, factory: type, options: dict[str, Any]) -> tuple[int, Connection]:
        """A new child serving `factory(**options)`: (its pid, the connection to it)."""
        data = pickle.dumps((factory, options))
        self.control.sendall(struct.pack("!I", len(data)) + data)
        reply, fds, _, _ = socket.recv_fds(self.control, 4, 1)
        if len(reply) != 4 or len(fds) != 1:
            raise RuntimeError("the solver zygote process did not answer")
        return struct.unpack("!i", reply)[0], Connection(fds[0])

    def usable(self) -> bool:
        return self.owner == os.getpid() and self.process.poll() is None


_ZYGOTE: _Zygote | None = None
_ZYGOTE_LOCK = threading.Lock()


def _zygote() -> _Zygote:
    """This process's zygote, started if there is none (a forked process starts its own)."""
    global _ZYGOTE
    with _ZYGOTE_LOCK:
        if _ZYGOTE is None or not _ZYGOTE.usable():
            if _ZYGOTE is not None:
                _ZYGOTE.control.close()  # a copy inherited through fork, or a dead zygote's
            _ZYGOTE = _Zygote()
        return _ZYGOTE


def zygote_main() -> None:
    """The zygote process (`python -c ... OWNER_PID FD`): fork a child per request on the
    control socket FD, send back its pid and its end of a fresh socket pair; exit at EOF."""
    owner, descriptor = int(sys.argv[1]), int(sys.argv[2])
    die_with_parent(owner)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the children
    for module in _PRELOAD:
        try:
            __import__(module)
        except ImportError:
            pass  # a backend that is not installed
    control = socket.socket(fileno=descriptor)
    while True:
        try:
            request = _receive(control)
        except Exception:  # a request that cannot be unpickled here: answer without a child
            control.sendall(struct.pack("!i", -1))
            continue
        if request is None:
            return
        ours, theirs = socket.socketpair()
        zygote = os.getpid()
        pid = os.fork()
        if pid == 0:
            try:
                control.close()
                ours.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                die_with_parent(zygote)
                _serve(Connection(theirs.detach()), *request)
            finally:
                os._exit(0)
        theirs.close()
        socket.send_fds(control, [struct.pack("!i", pid)], [ours.fileno()])
        ours.close()


def _receive(control: socket.socket) -> Any:
    """One length-prefixed pickled message, or None at EOF."""
    header = _read(control, 4)
    return None if header is None else pickle.loads(_read(control, struct.unpack("!I", header)[0]) or b"")


def _read(control: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = control.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _serve(connection: Connection, factory: type, options: dict[str, Any]) -> None:
    """A child: answer (problem, at_most, time limit) requests until the connection closes."""
    global _incumbent_hook
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    backend = factory(**options)

    def send(incumbent: Incumbent) -> None:
        connection.send(("incumbent", incumbent))

    _incumbent_hook = send
    while True:
        try:
            request, at_most, time_limit, started = connection.recv()
        except EOFError:
            return
        try:
            problem = Problem.make(*request)
            left = time_limit - (time.perf_counter() - started)  # the limit counts from the caller's request
            answer: tuple[str, Any] = ("outcome", backend.solve(problem, at_most, max(left, 1e-3)))
        except InputError as error:
            answer = ("input", str(error))
        except Exception as error:  # a backend failure is a result (as in solve_problem), sent whole
            failure = Outcome(Status.ERROR, backend.name, 0.0, exact=backend.exact, message=f"{type(error).__name__}: {error}")
            answer = ("outcome", failure)
        connection.send(answer)

"""Time limits that hold whatever a backend does: `GuardedSolver` runs a backend in a child
process and kills the child when a call overruns its limit.

Backends are asked to stop at their limit, and mostly do, but not everywhere: HiGHS's MIP
presolve checks no clock and calls no callback, and z3's lazy loop computes an exact tangent cut
in integer matrix products that no solver timeout reaches; either can run many times past a
limit on a large network. So each call is bounded from
outside, and its limit counts from the moment `solve` is called: whatever the call waits for —
its solver process still starting (a fresh interpreter that must first import torch and the
backend), the backend, the transfer — ends at the limit plus half the allowed overrun
(`allowed_overrun`: a tenth of the limit, at least a second). There the call answers TIMEOUT: a child at work is killed
and a fresh one started at once for the next call; a solver process still starting is left to
start (the message says so), and the next call takes it. The answer of a call that finishes is
the backend's own, its seconds measured by the caller (waiting and transfer included);
`solvers.base.solve_problem` replays it in exact arithmetic as usual. A backend may report each
explanation it finds on the way (`report_incumbent`; z3 does): a call stopped from outside then
answers with the last one, as a call that stops itself at its limit would
(`cardinal.problem.stopped`: FEASIBLE with the set when it lies within `at_most` or there is no
bound, else TIMEOUT with no set), and that set is replayed too.

**Processes.** Children come from a *zygote*: a fresh interpreter, one per calling process,
started by its first `GuardedSolver`, which forks one child per backend on request. It loads
torch and cardinal's core, and a backend's module when a child of that backend is first asked
for; no solver ever runs in it (a fork of a process that has run z3 or HiGHS can hang: their
timer and scheduler threads do not survive it). A `GuardedSolver` asks for its child when it is
made, so both start while the caller does other work (greedy, say). Guarantees:

* Nothing outlives its caller. From its first line, before any heavy import, the zygote watches
  its control socket, which only the caller holds (a process forked from the caller closes its
  copy), and exits when the caller is gone, even while it is still starting; each child is
  killed when the zygote dies (`die_with_parent`).
* Nothing is left unreaped. The zygote reaps its children as they end, and kills and reaps those
  left when its control socket closes; a caller that exits in order (at the end of the
  interpreter, or of a `multiprocessing` worker) closes it and then reaps the zygote. (A caller
  killed outright leaves the zygote to the system's init, as any orphan.)
* Solver processes are silent: their stdout and stderr are /dev/null, they answer only through
  their connection, and one whose caller is gone exits without a word. They ignore Ctrl-C: their
  caller stops them.

**Fixed cost.** A child serves calls until it is killed. A network goes to it once: later calls
on the same `Network` object (immutable, like its cached exact evaluators) send only the input
and the problem's other fields, and the child keeps its copy's evaluators, so a call costs one
round trip. A
`GuardedSolver` serves one call at a time; `lent` keeps this process's idle ones by name, so
that `solvers.base.solve_minimum` reuses a started child from call to call.
"""

from __future__ import annotations

import ctypes
import itertools
import multiprocessing.util
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any, TypeVar

import torch

from cardinal.errors import InputError
from cardinal.network import Network
from cardinal.problem import Outcome, Problem, Status, stopped

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_POLL_CHUNK = 3600.0  # seconds: poll()'s timeout is a C int of milliseconds
_EXIT_WAIT = 5.0  # seconds the caller waits at its exit for its zygote to end, then kills it
_REQUEST = struct.Struct("!qI")  # a request to the zygote: its number, pickle bytes (factory, options)
_REPLY = struct.Struct("!qiI")  # the zygote's answer: the request's number, the child's pid (-1: none), message bytes

# The zygote's first lines (`python -c _LAUNCHER FD`): Ctrl-C is ignored, and until `zygote_main`
# reads the control socket FD, a thread ends the process as soon as the caller's end of it closes.
_LAUNCHER = """
import os, select, signal, sys, threading
signal.signal(signal.SIGINT, signal.SIG_IGN)
control, serving = int(sys.argv[1]), threading.Event()
def watch():
    poll = select.poll()
    poll.register(control, getattr(select, "POLLRDHUP", 0) | select.POLLHUP)
    while not serving.is_set():
        if poll.poll(100):
            os._exit(0)
threading.Thread(target=watch, daemon=True).start()
from cardinal.solvers.guard import zygote_main
zygote_main(control, serving)
"""


Incumbent = tuple[tuple[int, ...], tuple[float, ...] | None]  # (features, witness point [n] or None)
_incumbent_hook: Callable[[Incumbent], None] | None = None  # set in a child: sends to the caller
_lower_hook: Callable[[int], None] | None = None  # set in a child: sends to the caller


def report_incumbent(features: Iterable[int], witness: Iterable[float] | None = None) -> None:
    """For backends: an explanation found so far (sorted features; for a contrastive one, the
    point that flips). A guarded call stopped at its limit answers with the last one reported;
    elsewhere this does nothing."""
    if _incumbent_hook is not None:
        _incumbent_hook((tuple(int(i) for i in features), None if witness is None else tuple(float(v) for v in witness)))


def report_lower(lower: int) -> None:
    """For exact backends: an exact lower bound on the minimum explanation's size proved so far
    (`Outcome.lower`). A guarded call stopped at its limit answers with the largest one reported
    (kept only from an exact backend); elsewhere this does nothing."""
    if _lower_hook is not None:
        _lower_hook(int(lower))


STARTUP_WAIT = 60.0  # seconds a caller may wait, before its first call, for a solver process to start


def allowed_overrun(time_limit: float) -> float:
    """How far past its limit a call may end: 10% of the limit, at least 1 s."""
    return max(0.1 * time_limit, 1.0)


def die_with_parent(parent: int) -> None:
    """Have this process killed when its parent, the process `parent`, dies: Linux's parent-death
    signal (prctl PR_SET_PDEATHSIG; it fires when the parent's thread that forked this process
    ends), else a watchdog thread that polls the parent pid. Exits at once if the parent is
    already gone."""
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


# ---------------------------------------------------------------------------- the caller's side
@dataclass
class _Child:
    """A solver process as its caller sees it: its pid, a pidfd when the kernel gives one (a
    signal through it cannot reach another process that reuses the pid), the connection, and the
    network it holds (a weak reference to the caller's object, None before the first call)."""

    pid: int
    pidfd: int | None
    connection: Connection
    network: weakref.ref[Network] | None = None

    def idle_and_alive(self) -> bool:
        """Between calls a child sends nothing: anything to read means it has died."""
        return not self.connection.closed and not self.connection.poll(0)

    def kill(self) -> None:
        """SIGKILL it (the zygote reaps it) and close the caller's ends."""
        try:
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.release()

    def release(self) -> None:
        """Close the caller's ends without a signal (a copy inherited through fork)."""
        self.connection.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class GuardedSolver:
    """The backend `factory(**options)` served by a child process (see the module docstring); a
    `solvers.base.Solver` itself. One call at a time."""

    def __init__(self, name: str, factory: type, options: dict[str, Any]) -> None:
        factory(**options).close()  # bad options fail here, in the caller's process
        self.name, self.exact = name, factory.exact
        self.factory, self.options = factory, options
        self._owner = os.getpid()
        self._child: _Child | None = None
        self._request: tuple[_Zygote, int] | None = None  # a child asked for, not taken yet
        self._ask()  # start it now: it starts while the caller works

    def __enter__(self) -> GuardedSolver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def outcome(self, status: Status, started: float, **fields: Any) -> Outcome:
        if not self.exact:  # as `solvers.base.BaseSolver.outcome`: a bound only from an exact backend
            fields.pop("lower", None)
        return Outcome(status, self.name, time.perf_counter() - started, exact=self.exact, **fields)

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        started = time.perf_counter()
        deadline = started + time_limit + allowed_overrun(time_limit) / 2
        try:
            child = self._ready(deadline)
        except ChildProcessError as error:
            return self.outcome(Status.ERROR, started, message=str(error))
        if child is None:
            return self._stopped(started, time_limit, at_most, None, starting=True)
        incumbent: Incumbent | None = None
        lower: int | None = None  # the largest exact lower bound reported (`report_lower`)
        try:
            network = None if child.network is not None and child.network() is problem.net else problem.net
            fields = (problem.x, problem.kind, problem.domain, problem.threshold, problem.epsilon, problem.prediction)
            child.connection.send((network, fields, at_most, time_limit, started))
            child.network = weakref.ref(problem.net)
            while True:
                if not _wait(child.connection, deadline):
                    self._replace()
                    return self._stopped(started, time_limit, at_most, incumbent, lower=lower)
                kind, payload = child.connection.recv()
                if kind == "lower":
                    lower = payload if lower is None else max(lower, payload)
                    continue
                if kind != "incumbent":
                    break
                incumbent = payload
        except (EOFError, OSError):
            self._replace()
            return self.outcome(Status.ERROR, started, message=f"the {self.name} process (pid {child.pid}) died")
        except BaseException:  # Ctrl-C or the like: a child still at work must not answer a later call
            self.close()
            raise
        if kind == "input":
            raise InputError(payload)
        return replace(payload, seconds=time.perf_counter() - started)

    def wait_started(self, until: float) -> bool:
        """Wait until this backend's solver process has started, or the time `until` (a
        perf_counter value); whether it has. Raises ChildProcessError when it cannot start."""
        return self._ready(until) is not None

    def _stopped(
        self,
        started: float,
        time_limit: float,
        at_most: int | None,
        incumbent: Incumbent | None,
        starting: bool = False,
        lower: int | None = None,
    ) -> Outcome:
        """The outcome of a call stopped at its limit, as `cardinal.problem.stopped` says for every
        backend: FEASIBLE with the last explanation reported when it lies within `at_most` (any
        reported one without a bound), else TIMEOUT with no set; with `lower`, the largest exact
        lower bound reported (`report_lower`; an exact backend's only). `starting`: its solver
        process was not up yet."""
        message = f"stopped from outside at the time limit ({time_limit:g} s)"
        if starting:
            message += ": the solver process was still starting"
            return self.outcome(Status.TIMEOUT, started, raw_status="not started", message=message)
        if lower is not None and self.exact:
            message += f"; exact lower bound {lower}"
        if incumbent is None:
            return self.outcome(Status.TIMEOUT, started, raw_status="killed", message=message, lower=lower)
        status, features = stopped(incumbent[0], at_most)  # as a backend that stops itself answers
        if features is None:
            message += f"; the best set found before has {len(incumbent[0])} features, more than {at_most}"
            return self.outcome(status, started, raw_status="killed", message=message, lower=lower)
        message += "; the best set found before"
        fields = {"solution": features, "witness": incumbent[1], "raw_status": "killed", "message": message, "lower": lower}
        return self.outcome(status, started, **fields)

    def _ready(self, deadline: float) -> _Child | None:
        """The live child, once started: None if it is not by `deadline` (a perf_counter value).
        Raises ChildProcessError when the zygote is gone."""
        if self._owner != os.getpid():  # a copy made by fork: the processes are the parent's
            self._forget()
        if self._child is not None and not self._child.idle_and_alive():
            self._child.kill()
            self._child = None
        if self._child is None:
            if self._request is None or self._request[0] is not _ZYGOTE:
                self._ask()
            zygote, number = self._request
            try:
                taken = zygote.take(number, deadline)
            except ChildProcessError:
                self._request = None
                raise
            if taken is None:
                return None
            self._request, self._child = None, taken
        return self._child

    def _ask(self) -> None:
        """Ask this process's zygote for a child, without waiting for it."""
        zygote = _zygote()
        self._request = (zygote, zygote.request(self.factory, self.options))

    def _replace(self) -> None:
        """Kill the child and ask for the next one at once."""
        self.close()
        self._ask()

    def _forget(self) -> None:
        """Drop a forked copy's view of the parent's processes, signalling none of them."""
        if self._child is not None:
            self._child.release()
        self._child, self._request, self._owner = None, None, os.getpid()

    def close(self) -> None:
        """Kill the child (idle or not) and cancel a child asked for; the next call gets a fresh one."""
        if self._owner != os.getpid():
            self._forget()
        if self._child is not None:
            self._child.kill()
            self._child = None
        if self._request is not None:
            zygote, number = self._request
            self._request = None
            zygote.cancel(number)


def _wait(connection: Connection, until: float) -> bool:
    """Whether something arrives before the time `until` (a time.perf_counter() value)."""
    while (left := until - time.perf_counter()) > 0:
        if connection.poll(min(left, _POLL_CHUNK)):
            return True
    return False


_IDLE: dict[str, list[Any]] = {}  # name → idle guarded backends
_IDLE_LOCK = threading.Lock()


Backend = TypeVar("Backend")


@contextmanager
def lent(name: str, make: Callable[[], Backend]) -> Iterator[Backend]:
    """One of this process's idle guarded backends called `name` (`make()` when none is idle),
    kept idle again after use, its child still started, for the next caller."""
    with _IDLE_LOCK:
        idle = _IDLE.get(name)
        backend = idle.pop() if idle else None
    if backend is None:
        backend = make()
    try:
        yield backend
    finally:
        with _IDLE_LOCK:
            _IDLE.setdefault(name, []).append(backend)


# ---------------------------------------------------------------------------- the zygote, from the caller
class _Zygote:
    """The caller's handle on its zygote: the process, its control socket, and the children it
    forked that no caller took yet (request number → child, or why there is none)."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        ours, theirs = socket.socketpair()
        path = os.pathsep.join(entry for entry in sys.path if entry)  # the caller's modules, backends included
        # as many threads (torch's, BLAS's) as the caller has: the one thread of a campaign worker
        # holds in its solvers too, so that two workers on two cores do not run four threads
        threads = {name: str(torch.get_num_threads()) for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
        self.process = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **threads, "PYTHONPATH": path},
        )
        theirs.close()
        self.control = ours
        self.numbers = itertools.count(1)
        self.sending = threading.Lock()  # one writer of the control socket at a time
        self.reading = threading.Lock()  # one reader
        self.state = threading.Lock()  # guards `forked` and `cancelled`
        self.forked: dict[int, _Child | str] = {}
        self.cancelled: set[int] = set()
        self.gone: str | None = None

    def request(self, factory: type, options: dict[str, Any]) -> int:
        """Ask for a child serving `factory(**options)`; the request's number."""
        number = next(self.numbers)
        data = pickle.dumps((factory, options))
        try:
            with self.sending:
                self.control.sendall(_REQUEST.pack(number, len(data)) + data)
        except OSError:
            self.gone = self.gone or self._exited()
        return number

    def take(self, number: int, until: float) -> _Child | None:
        """The child of request `number`, or None if the zygote has not forked it by `until` (a
        perf_counter value). ChildProcessError when there will be none."""
        while True:
            with self.state:
                found = self.forked.pop(number, None)
            if isinstance(found, str):
                raise ChildProcessError(found)
            if found is not None:
                return found
            if self.gone is not None:
                raise ChildProcessError(self.gone)
            left = until - time.perf_counter()
            if left <= 0:
                return None
            if not self.reading.acquire(timeout=min(left, _POLL_CHUNK)):
                continue
            try:
                with self.state:
                    if number in self.forked:  # another thread read it meanwhile
                        continue
                if _readable(self.control, min(left, _POLL_CHUNK)):
                    self._read_reply()
            finally:
                self.reading.release()

    def cancel(self, number: int) -> None:
        """Give up request `number`: its child is killed whenever it comes."""
        with self.state:
            found = self.forked.pop(number, None)
            if found is None:
                self.cancelled.add(number)
        if isinstance(found, _Child):
            found.kill()

    def _read_reply(self) -> None:
        """Read one answer of the zygote and file it (`forked`), or kill its child if cancelled."""
        try:
            header, fds, _, _ = socket.recv_fds(self.control, _REPLY.size, 2, getattr(socket, "MSG_CMSG_CLOEXEC", 0))
            rest = _read(self.control, _REPLY.size - len(header)) if header else None
            header = header + rest if rest is not None else b""
        except OSError:
            header, fds = b"", []
        if len(header) < _REPLY.size:
            self.gone = self._exited()
            return
        number, pid, length = _REPLY.unpack(header)
        message = (_read(self.control, length) or b"").decode(errors="replace")
        found: _Child | str = _Child(pid, fds[1] if len(fds) > 1 else None, Connection(fds[0])) if pid > 0 else message
        with self.state:
            if number in self.cancelled:
                self.cancelled.discard(number)
            else:
                self.forked[number], found = found, ""
        if isinstance(found, _Child):
            found.kill()

    def _exited(self) -> str:
        try:
            code = self.process.wait(1.0)
        except subprocess.TimeoutExpired:
            return f"the solver zygote process (pid {self.process.pid}) stopped answering"
        return f"the solver zygote process (pid {self.process.pid}) ended (exit code {code})"

    def usable(self) -> bool:
        return self.gone is None and self.owner == os.getpid() and self.process.poll() is None

    def stop(self) -> None:
        """Close the control socket: the zygote kills its children and ends; reap it."""
        self.control.close()
        try:
            self.process.wait(_EXIT_WAIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _readable(sock: socket.socket, seconds: float) -> bool:
    """Whether `sock` has something to read (or is at its end) within `seconds`."""
    return bool(select.select([sock], [], [], min(seconds, _POLL_CHUNK))[0])


_ZYGOTE: _Zygote | None = None
_ZYGOTE_LOCK = threading.Lock()


def _zygote() -> _Zygote:
    """This process's zygote, started if there is none (or it has died)."""
    global _ZYGOTE
    with _ZYGOTE_LOCK:
        if _ZYGOTE is None or not _ZYGOTE.usable():
            if _ZYGOTE is not None:
                _ZYGOTE.stop()
            else:  # at this process's exit (a multiprocessing worker's too), stop it and reap it
                multiprocessing.util.Finalize(None, _stop_zygote, exitpriority=0)
            _ZYGOTE = _Zygote()
        return _ZYGOTE


def start_zygote() -> None:
    """Start this process's zygote now, ahead of its first guarded backend."""
    _zygote()


def _stop_zygote() -> None:
    global _ZYGOTE
    zygote, _ZYGOTE = _ZYGOTE, None
    if zygote is not None and zygote.owner == os.getpid():
        zygote.stop()


def _after_fork_in_child() -> None:
    """A forked process has no zygote and no idle backends of its own: close the copies of its
    parent's (so that the parent's zygote sees its parent go), signalling no process."""
    global _ZYGOTE, _ZYGOTE_LOCK, _IDLE_LOCK
    _ZYGOTE_LOCK, _IDLE_LOCK = threading.Lock(), threading.Lock()
    if _ZYGOTE is not None:
        _ZYGOTE.control.close()
        _ZYGOTE = None
    for backends in _IDLE.values():
        for backend in backends:
            backend._forget()
    _IDLE.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


# ---------------------------------------------------------------------------- the zygote process
def zygote_main(descriptor: int, serving: threading.Event) -> None:
    """The zygote, after `_LAUNCHER`'s first lines: fork a child per request read from the
    control socket `descriptor`, and reap the children as they end; at the socket's end (the
    caller closed it, or is gone) kill and reap the children left, then exit. Sets `serving` once
    it reads the socket."""
    torch.get_num_threads()  # load torch here, once, should the core have imported it lazily (`cardinal.lazy`)
    # SIGCHLD only wakes the loop (a byte on `wake`): children are reaped here, between requests,
    # so a pid in `children` is never reaped yet — still ours to signal, not another process's
    wake, woken = os.pipe()
    os.set_blocking(wake, False)
    os.set_blocking(woken, False)
    signal.set_wakeup_fd(woken)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    control = socket.socket(fileno=descriptor)
    children: set[int] = set()
    serving.set()
    try:
        while True:
            ready = select.select([control, wake], [], [])[0]
            if wake in ready:
                _drain(wake)
                _reap(children)
            if control not in ready:
                continue
            request = _receive(control)
            if request is None:
                return
            number, data = request
            try:
                factory, options = pickle.loads(data)
            except Exception as error:  # a backend that does not load here: no child
                _reply(control, number, -1, f"the solver process could not load its backend: {type(error).__name__}: {error}")
                continue
            _fork(control, number, factory, options, children, (wake, woken))
    except OSError:  # the caller is gone
        return
    finally:
        for pid in children:
            os.kill(pid, signal.SIGKILL)
        for pid in children:
            os.waitpid(pid, 0)
        os._exit(0)


def _drain(descriptor: int) -> None:
    try:
        while os.read(descriptor, 512):
            pass
    except BlockingIOError:
        pass


def _reap(children: set[int]) -> None:
    """Reap the zygote's children that have ended."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)


def _fork(
    control: socket.socket, number: int, factory: type, options: dict[str, Any], children: set[int], wakeup: tuple[int, int]
) -> None:
    """Fork the child of request `number` (its pid joins `children`) and send the caller its pid,
    its end of a fresh socket pair and a pidfd (where the kernel has them)."""
    ours, theirs = socket.socketpair()
    zygote = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for descriptor in wakeup:
                os.close(descriptor)
            control.close()
            ours.close()
            die_with_parent(zygote)
            _serve(Connection(theirs.detach()), factory, options)
        finally:
            os._exit(0)
    children.add(pid)
    theirs.close()
    try:
        pidfd = os.pidfd_open(pid)  # the child is not reaped before `_reap`: this is it
    except (AttributeError, OSError):  # an older kernel
        pidfd = None
    try:
        _reply(control, number, pid, "", [ours.fileno()] + ([] if pidfd is None else [pidfd]))
    finally:
        ours.close()
        if pidfd is not None:
            os.close(pidfd)


def _reply(control: socket.socket, number: int, pid: int, message: str, fds: list[int] | None = None) -> None:
    data = message.encode()
    socket.send_fds(control, [_REPLY.pack(number, pid, len(data)) + data], fds or [])


def _receive(control: socket.socket) -> tuple[int, bytes] | None:
    """One request: its number and its pickle bytes; None at EOF."""
    header = _read(control, _REQUEST.size)
    if header is None:
        return None
    number, size = _REQUEST.unpack(header)
    data = _read(control, size)
    return None if data is None else (number, data)


def _read(control: socket.socket, size: int) -> bytes | None:
    """Exactly `size` bytes, or None at EOF."""
    data = b""
    while len(data) < size:
        chunk = control.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _serve(connection: Connection, factory: type, options: dict[str, Any]) -> None:
    """A child: answer (network or None: the last one, the problem's other fields, at_most, time
    limit, start) requests until the connection closes."""
    global _incumbent_hook, _lower_hook
    backend = factory(**options)

    def send(incumbent: Incumbent) -> None:
        connection.send(("incumbent", incumbent))

    def send_lower(lower: int) -> None:
        connection.send(("lower", lower))

    _incumbent_hook, _lower_hook = send, send_lower
    net: Network | None = None
    while True:
        try:
            network, fields, at_most, time_limit, started = connection.recv()
        except (EOFError, OSError):
            return
        net = network if network is not None else net
        try:
            problem = Problem(net, *fields)  # checked by the caller (Problem.make)
            left = time_limit - (time.perf_counter() - started)  # the limit counts from the caller's call
            answer: tuple[str, Any] = ("outcome", backend.solve(problem, at_most, max(left, 1e-3)))
        except InputError as error:
            answer = ("input", str(error))
        except Exception as error:  # a backend failure is a result (as in solve_problem), sent whole
            failure = Outcome(Status.ERROR, backend.name, 0.0, exact=backend.exact, message=f"{type(error).__name__}: {error}")
            answer = ("outcome", failure)
        try:
            connection.send(answer)
        except OSError:
            return

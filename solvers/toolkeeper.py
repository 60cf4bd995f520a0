"""Running an outside tool so that nothing of it outlives its answer: the *keeper*, a small
process that starts the tool's scripts and ends everything they started (`solvers.vnncomp`).

The keeper runs this file as a script (`python -I -S toolkeeper.py PREFIX`); it imports nothing
but the standard library, so it starts in milliseconds. It makes a fresh folder WORK in the
system's temporary folder (`tempfile.mkdtemp(prefix=PREFIX)`), so that no moment exists when the
folder is there and no keeper will remove it. `Keeper` is its caller's handle on it. The two talk
through the keeper's standard input and output, one JSON object a line: the keeper first says
`{"work": WORK}`; the caller sends
`{"run": ARGV, "cwd", "stdout", "stderr", "env"}` and gets `{"pid": PID}` (or `{"failed": WHY}`),
then `{"exit": CODE}` once the tool has ended *and* everything it started is gone; `{"kill": 1}`
ends a running tool at once (the reply is its `exit`).

Contracts:

* The tool runs in its own session and process group (its pid is both ids), its standard input
  /dev/null, its standard output and error the files named, created new (an existing file or a
  link there is a `failed` start; no background child can hold a pipe of cardinal's open),
  `TMPDIR` a folder inside WORK.
* When the tool's main process exits, or at `kill`, the keeper ends the tool's whole process
  group, every process left in its session, and every descendant of the keeper itself — the
  keeper is a *child subreaper* (Linux's PR_SET_CHILD_SUBREAPER), so an orphan of the tool, one
  that made a session of its own included, becomes its child and is found. It kills (SIGKILL) pass
  after pass, each process checked through a pidfd and its start time (a pid reused meanwhile is
  never signalled), until none is left (`SWEEP_LIMIT` seconds at most: a process stuck in the
  kernel may outlast it), and reaps them. Only then does it answer `exit`. (So nothing a script
  starts outlives it: a server started by one script for the next is ended in between.)
* At the end of its standard input — the caller closed it (`Keeper.close`), or died, however,
  SIGKILL included — the keeper ends the running tool as above, removes the folder WORK, and
  exits. Ctrl-C is ignored (it is in a session of its own anyway): its caller stops it.

What escapes: a process that is neither a descendant of the keeper nor in the tool's session or
group — work the tool hands to a process that was already running (a daemon of the user's, a job
scheduler, `ssh localhost`). The tool runs as the user, with the user's rights: it can read and
write whatever the user can. Without /proc (not Linux) only the tool's process group is ended.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36  # from <linux/prctl.h>
SWEEP_LIMIT = 10.0  # seconds the keeper keeps killing a tool's processes before it answers anyway
CLOSE_WAIT = 30.0  # seconds a caller waits for its keeper to end, or to answer a kill
_POLL = 0.05  # seconds between checks of a running tool where the kernel has no pidfd


# ---------------------------------------------------------------------------- the keeper process
class _Proc:
    """One line of /proc/PID/stat: the fields the keeper uses."""

    __slots__ = ("pgrp", "ppid", "session", "start", "zombie")

    def __init__(self, stat: str) -> None:
        rest = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces and parentheses
        self.zombie = rest[0] in ("Z", "X")
        self.ppid, self.pgrp, self.session = int(rest[1]), int(rest[2]), int(rest[3])
        self.start = rest[19]  # field 22, starttime


def _table() -> dict[int, _Proc]:
    """Every process this user can see: pid → its stat fields (empty without /proc)."""
    table = {}
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError, ValueError, IndexError):  # gone meanwhile
                    with open(f"/proc/{entry}/stat") as handle:
                        table[int(entry)] = _Proc(handle.read())
    return table


def _descendants(table: dict[int, _Proc], root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, proc in table.items():
        children.setdefault(proc.ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _kill(pid: int, start: str) -> None:
    """SIGKILL the process `pid` if it is still the one that started at `start`."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        with open(f"/proc/{pid}/stat") as handle:
            if _Proc(handle.read()).start != start:
                return
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        pass
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _sweep(session: int | None, keep: int | None) -> None:
    """Kill and reap every descendant of this process and every process of the session or
    process group `session` (None: descendants only), until none is left (or `SWEEP_LIMIT`); `keep`, a child of ours, is
    left unreaped (the tool's main process: while it is a zombie, its ids name no other group)."""
    me, until = os.getpid(), time.monotonic() + SWEEP_LIMIT
    while True:
        table = _table()
        targets = _descendants(table, me)
        if session is not None:
            targets |= {p for p, proc in table.items() if session in (proc.session, proc.pgrp)}
        targets.discard(me)
        live = [p for p in targets if not table[p].zombie]
        for pid in live:
            _kill(pid, table[pid].start)
        for pid in targets:
            if pid != keep and table[pid].ppid == me:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
        if not targets - {keep} or time.monotonic() > until:
            return
        if not live:
            time.sleep(0.01)  # zombies on their way to us


def _end(pid: int) -> int:
    """End the tool whose main process is `pid` (our child, unreaped) and all it started; reap it;
    its exit code (negative: the signal that ended it)."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)  # the group of our unreaped child: no other group has its id
    _sweep(pid, keep=pid)
    _, status = os.waitpid(pid, 0)
    _sweep(None, keep=None)  # anything reparented to us meanwhile (its ids may be reused now)
    return os.waitstatus_to_exitcode(status)


def _exited(pid: int) -> bool:
    """Whether our child `pid` has ended (it is left unreaped)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _new(path: str) -> int:
    """A new file at `path`, for writing: never one that exists, nor through a link planted there."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def _start(request: dict, work: Path) -> subprocess.Popen:
    env = {**os.environ, **request["env"], "TMPDIR": str(work / "tmp")}
    with open(_new(request["stdout"]), "wb") as out, open(_new(request["stderr"]), "wb") as err:
        return subprocess.Popen(
            request["run"], cwd=request["cwd"], env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            start_new_session=True,
        )  # fmt: skip


def _say(message: dict) -> None:
    with contextlib.suppress(OSError):
        os.write(1, (json.dumps(message) + "\n").encode())


def keep(prefix: str) -> None:
    """The keeper's loop (module docstring): its folder WORK made with `prefix`, and removed at
    the end of its standard input."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    tool: subprocess.Popen | None = None
    pidfd: int | None = None
    pending = b""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        (work / "tmp").mkdir()
        _say({"work": str(work)})
        while True:
            watched = [0] + ([pidfd] if pidfd is not None else [])
            timeout = _POLL if tool is not None and pidfd is None else None
            ready = select.select(watched, [], [], timeout)[0]
            if tool is not None and _exited(tool.pid):
                tool.returncode = _end(tool.pid)
                _say({"exit": tool.returncode})
                tool, pidfd = None, _closed(pidfd)
            if 0 not in ready:
                continue
            data = os.read(0, 65536)
            if not data:
                return
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                if tool is not None:  # a kill, or a new run while one runs: end the running one first
                    tool.returncode = _end(tool.pid)
                    _say({"exit": tool.returncode})
                    tool, pidfd = None, _closed(pidfd)
                if "run" in request:
                    try:
                        tool = _start(request, work)
                    except (OSError, ValueError, subprocess.SubprocessError) as error:
                        _say({"failed": f"{type(error).__name__}: {error}"})
                        continue
                    with contextlib.suppress(AttributeError, OSError):
                        pidfd = os.pidfd_open(tool.pid)
                    _say({"pid": tool.pid})
    finally:
        if tool is not None:
            tool.returncode = _end(tool.pid)
        _sweep(None, keep=None)
        shutil.rmtree(work, ignore_errors=True)


def _closed(pidfd: int | None) -> None:
    if pidfd is not None:
        os.close(pidfd)


# ---------------------------------------------------------------------------- the caller's side
class KeeperError(Exception):
    """The keeper failed: it could not start the tool, or it ended or stopped answering."""


class Keeper:
    """A keeper process and its fresh folder `work` (named `prefix`..., in the system's temporary
    folder; removed when the keeper ends). One tool at a time; `close` (or the end of a `with`
    block) ends the keeper, whatever the tool is doing, and waits for it (`CLOSE_WAIT` at most).
    Raises KeeperError when the keeper does not start."""

    def __init__(self, prefix: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-S", str(Path(__file__).resolve()), prefix],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        self._work: Path | None = None
        self._pending = b""
        try:
            said = self._answer(time.perf_counter() + CLOSE_WAIT)
            if "work" not in said:
                raise KeeperError(f"the tool keeper (pid {self.process.pid}) did not start in {CLOSE_WAIT:g} s")
            self._work = Path(said["work"])
        except BaseException:
            self.close()
            raise

    @property
    def work(self) -> Path:
        """The keeper's folder (it exists until the keeper ends)."""
        if self._work is None:
            raise KeeperError("the tool keeper has no folder")
        return self._work

    def __enter__(self) -> Keeper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(
        self, argv: list[str], cwd: Path, stdout: Path, stderr: Path, deadline: float, env: dict[str, str] | None = None
    ) -> int | None:
        """Run `argv` in `cwd` (module docstring): its exit code once it and all it started are
        gone, or None when it was still running at `deadline` (a time.perf_counter() value) and
        was killed. Raises KeeperError."""
        request = {"run": argv, "cwd": str(cwd), "stdout": str(stdout), "stderr": str(stderr), "env": env or {}}
        self._send(request)
        started = self._answer(time.perf_counter() + CLOSE_WAIT)
        if "failed" in started:
            raise KeeperError(f"could not start {argv[:2]}: {started['failed']}")
        answer = self._answer(deadline)
        if answer:
            return int(answer["exit"])
        self._send({"kill": 1})
        if not self._answer(time.perf_counter() + CLOSE_WAIT):
            raise KeeperError(f"the tool keeper (pid {self.process.pid}) did not end the tool in {CLOSE_WAIT:g} s")
        return None

    def close(self) -> None:
        """End the keeper: it ends a running tool and removes `work`; wait for it."""
        stdin, stdout = self.process.stdin, self.process.stdout
        if stdin is not None and not stdin.closed:
            with contextlib.suppress(OSError):
                stdin.close()
        try:
            self.process.wait(CLOSE_WAIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if stdout is not None:
            stdout.close()
        if self._work is not None:
            shutil.rmtree(self._work, ignore_errors=True)  # the keeper removed it, unless it was killed

    def _send(self, message: dict) -> None:
        try:
            self.process.stdin.write((json.dumps(message) + "\n").encode())  # type: ignore[union-attr]
            self.process.stdin.flush()  # type: ignore[union-attr]
        except OSError:
            raise KeeperError(f"the tool keeper (pid {self.process.pid}) has ended") from None

    def _answer(self, until: float) -> dict:
        """The keeper's next line, or {} if none comes by `until`. Raises KeeperError at its end."""
        descriptor = self.process.stdout.fileno()  # type: ignore[union-attr]
        while b"\n" not in self._pending:
            left = until - time.perf_counter()
            if left <= 0 or not select.select([descriptor], [], [], left)[0]:
                return {}
            data = os.read(descriptor, 65536)
            if not data:
                raise KeeperError(f"the tool keeper (pid {self.process.pid}) has ended")
            self._pending += data
        line, self._pending = self._pending.split(b"\n", 1)
        return json.loads(line)


if __name__ == "__main__":
    keep(sys.argv[1])

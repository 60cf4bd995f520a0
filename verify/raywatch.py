"""The watcher of a local Ray instance (`executors.start_local_ray`), run as a script:
`python -I raywatch.py TOKEN`, its standard input a pipe from the driver.

Ray's GCS and raylet die with the driver that started them, but its dashboard and runtime-env
agents, started by the raylet, spend a minute or more trying to report the raylet's death to the
dead GCS before they exit. The watcher knows the instance's processes two ways:

- by a mark in their environment: `CARDINAL_RAY_OWNER=TOKEN`, set while the instance starts and
  passed on by Ray to every process it starts. The mark is not enough alone: a process that
  renames itself (`ray::DashboardAgent`, `ray::IDLE`: Ray's setproctitle) may overwrite the
  memory that /proc/PID/environ reads, and then the mark is gone from it (seen on the agents of
  a second instance running beside a first);
- by its session folder (`.../session_*`, where Ray writes the instance's logs): a process named
  `ray::...` that holds a file of that folder open belongs to the instance. The driver writes the
  folder on the pipe, one line, once the instance is up; the watcher also learns it from the open
  files of the marked processes (the GCS and raylet, which keep their mark), so that an instance
  whose driver died while it started is found too.

The watcher waits until its standard input closes — the driver closed it after `ray.shutdown()`,
or died, however (SIGKILL included) — then kills every process of the instance, pass after pass
until four in a row find none (a dying raylet may still start a worker), `PASSES` at most, and exits.
It never kills the driver (its parent) or itself, and no process outside the instance: a process
not marked must both bear a `ray::` name and hold a file of the instance's session folder open
(a `tail -f` of its logs does not qualify). It imports nothing of cardinal or Ray: it starts in
milliseconds, from any folder. Linux only (it reads /proc); elsewhere it is not started.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import time
from pathlib import Path

OWNER = "CARDINAL_RAY_OWNER"  # the environment variable that marks an instance's processes
PASSES = 60  # kill passes at most, PAUSE seconds apart (15 s)
PAUSE = 0.25
QUIET = 4  # passes in a row that find nothing end the watch (a dying raylet may still start a worker)
# a Ray session folder (session_DATE_TIME_MICROSECONDS_PID), from the path of a file in it
SESSION = re.compile(r"^(/.*/session_\d{4}-\d\d-\d\d_[0-9_-]+)/")


def _open_files(pid: str) -> list[str]:
    """The paths that process `pid`'s file descriptors point to (pipes and sockets included);
    empty if it is gone or another user's."""
    paths = []
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                paths.append(os.readlink(fd))
    return paths


def instance(token: str, sessions: set[str], spare: set[int]) -> list[int]:
    """The pids of the live processes of the instance (module docstring), not those of `spare`:
    those whose environment holds OWNER=token, and those named `ray::...` that hold a file of
    one of `sessions` open. Adds to `sessions` the session folders the marked processes hold
    files of."""
    mark = f"{OWNER}={token}".encode()
    marked, named = [], []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in spare:
            continue
        with contextlib.suppress(OSError):  # gone meanwhile, or another user's
            if mark in (entry / "environ").read_bytes().split(b"\0"):
                marked.append(int(entry.name))
                sessions.update(m.group(1) for m in map(SESSION.match, _open_files(entry.name)) if m)
            elif (entry / "cmdline").read_bytes().startswith(b"ray::"):
                named.append(int(entry.name))
    ours = [pid for pid in named if any(path.startswith(f"{s}/") for path in _open_files(str(pid)) for s in sessions)]
    return marked + ours


def watch(token: str) -> None:
    """Wait for the end of standard input, then kill the instance's processes (module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle; it closes the pipe
    spare = {os.getpid(), os.getppid()}
    data = b""
    with contextlib.suppress(OSError):
        data = sys.stdin.buffer.read()
    sessions = {line for line in data.decode(errors="replace").splitlines() if SESSION.match(f"{line}/")}
    quiet = 0
    for _ in range(PASSES):
        found = instance(token, sessions, spare)
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        quiet = 0 if found else quiet + 1
        if quiet >= QUIET:
            return
        time.sleep(PAUSE)


if __name__ == "__main__":
    watch(sys.argv[1])

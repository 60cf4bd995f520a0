"""The watcher of a local Ray instance (`executors.start_local_ray`), run as a script:
`python -I raywatch.py TOKEN`, its standard input a pipe from the driver.

Ray's GCS and raylet die with the driver that started them, but its dashboard and runtime-env
agents, started by the raylet, spend a minute or more trying to report the raylet's death to the
dead GCS before they exit. Every process of the instance carries `CARDINAL_RAY_OWNER=TOKEN` in
its environment (set while the instance starts; Ray passes it on to every process it starts,
workers included). The watcher waits until its standard input closes — the driver closed it
after `ray.shutdown()`, or died, however (SIGKILL included) — then kills every process whose
environment holds that mark, pass after pass until four in a row find none (a dying raylet may
still start a worker), `PASSES` at most,
and exits. It imports nothing of cardinal or Ray: it starts in milliseconds, from any folder.
Linux only (it reads /proc); elsewhere it is not started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

OWNER = "CARDINAL_RAY_OWNER"  # the environment variable that marks an instance's processes
PASSES = 60  # kill passes at most, PAUSE seconds apart (15 s)
PAUSE = 0.25
QUIET = 4  # passes in a row that find nothing end the watch (a dying raylet may still start a worker)


def marked(token: str) -> list[int]:
    """The pids of the live processes whose environment holds OWNER=token (not this one's)."""
    mark = f"{OWNER}={token}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):  # gone meanwhile, or another user's
                if mark in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


def watch(token: str) -> None:
    """Wait for the end of standard input, then kill the instance's processes (module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle; it closes the pipe
    with contextlib.suppress(OSError):
        sys.stdin.buffer.read()
    quiet = 0
    for _ in range(PASSES):
        found = marked(token)
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        quiet = 0 if found else quiet + 1
        if quiet >= QUIET:
            return
        time.sleep(PAUSE)


if __name__ == "__main__":
    watch(sys.argv[1])

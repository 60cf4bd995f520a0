"""Where a campaign's work runs: in this process, in a local process pool, or on a Ray cluster.

`execute(task, items, workers, executor, address)` runs `task(item)` for every item and yields
`(item, result)` as items finish: in order in this process (`local`, one worker), as completed
in a pool of `workers` processes (`local`), or as completed on Ray (`ray`: with no `address` a
Ray instance of `workers` CPUs on this machine, started and stopped here; `address="auto"` or
`HOST:PORT` joins a running cluster, whose CPUs then set how many calls run at once). Tasks and
items must be picklable plain data; the caller does everything else (writing files), so it stays
the only writer of its outputs.

`sigterm_interrupts` makes SIGTERM take Ctrl-C's way out (KeyboardInterrupt) in the driver; a
local pool's workers, which ignore Ctrl-C, end on SIGTERM in order (`SystemExit`: their solver
processes are stopped and reaped), and the driver stops them so when it is interrupted, waits for
them, and kills those that do not end in `WORKER_GRACE` seconds.

An item that gives no result yields `Failed` with the reason in one line instead, on every
executor: the task raised (a solver missing on a Ray worker, say), its worker process died (on
Ray after `RETRIES` retries: killed, out of memory, its node lost), or the executor itself broke.
A broken executor — a local pool whose worker died (`BrokenProcessPool`), a Ray instance whose
raylet or GCS is gone (`LocalRayletDiedError`, `RaySystemError`) — runs nothing more: every item
not finished yields `Failed` at once. A `Failed` is never a result: the caller records nothing
for it (a campaign leaves the unit for `--resume`), and a solver's own error inside a task is
the task's result, not a `Failed`.

Ray is optional (`pip install 'cardinal[ray]'`). A Ray instance started here listens on the
loopback interface only (127.0.0.1): it serves this machine alone, and none of its processes
outlives the driver (`start_local_ray`, `verify/raywatch.py`), even one killed by SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cardinal.errors import BackendUnavailable, InputError, interrupt, interrupted_import

from .raywatch import OWNER

EXECUTORS = ("local", "ray")
RETRIES = 2  # Ray: how many times a unit whose worker process died is run again
WORKER_GRACE = 5.0  # seconds an interrupted local pool's workers have to end before they are killed
_watcher: subprocess.Popen | None = None  # the watcher of the Ray instance started here (`start_local_ray`)

Item = TypeVar("Item")


@dataclass(frozen=True)
class Failed:
    """No result for an item (module docstring): the task raised, its worker process died, or
    the executor broke; why, in one line."""

    message: str


def execute(
    task: Callable[[Item], Any], items: list[Item], workers: int, executor: str = "local", address: str | None = None
) -> Iterator[tuple[Item, Any]]:
    """Yield (item, task(item) or Failed) for every item as it finishes (module docstring)."""
    if executor == "ray":
        yield from _on_ray(task, items, workers, address)
    elif executor != "local":
        raise InputError(f"unknown executor {executor!r} (use {', '.join(EXECUTORS)})")
    elif workers <= 1:
        for item in items:
            yield item, _attempt(task, item)
    else:
        yield from _in_pool(task, items, workers)


def _attempt(task: Callable[[Item], Any], item: Item) -> Any:
    """task(item), or Failed naming the exception it raised."""
    try:
        return task(item)
    except Exception as error:
        return Failed(f"{type(error).__name__}: {error}")


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """For the duration, SIGTERM raises KeyboardInterrupt as Ctrl-C does, so that a terminated
    command or campaign takes the same orderly way out. Only in the main thread (Python runs
    signal handlers there); elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


# ---------------------------------------------------------------------------- local pool
def _worker_init(parent: int) -> None:
    import torch
    from cardinal.solvers.guard import die_with_parent, start_zygote  # here: the `cardinal` command starts without torch

    die_with_parent(parent)
    torch.set_num_threads(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    signal.signal(signal.SIGTERM, _end_worker)  # not the parent's handler, inherited through fork
    start_zygote()  # the solver processes start while the first task arrives (with one torch thread)


def _end_worker(signum: int, frame: object) -> None:
    """SIGTERM in a worker: exit in order (multiprocessing's exit handlers stop and reap the
    worker's solver processes)."""
    raise SystemExit(128 + signum)


def _in_pool(task: Callable[[Item], Any], items: list[Item], workers: int) -> Iterator[tuple[Item, Any]]:
    executor = ProcessPoolExecutor(max_workers=workers, initializer=_worker_init, initargs=(os.getpid(),))
    finished_all = False
    try:
        pending: dict[Future, Item] = {}
        queue = iter(items)
        for item in queue:
            pending[executor.submit(_attempt, task, item)] = item
            if len(pending) >= 2 * workers:
                break
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                item = pending.pop(future)
                try:
                    result = future.result()
                except BrokenProcessPool:  # a worker died: the pool runs nothing more
                    yield from _broken([item, *pending.values(), *queue])
                    return
                yield item, result
                following = next(queue, None)
                if following is not None:
                    try:
                        pending[executor.submit(_attempt, task, following)] = following
                    except BrokenProcessPool:
                        yield from _broken([*pending.values(), following, *queue])
                        return
        finished_all = True
    finally:
        if finished_all:
            executor.shutdown(wait=True)
        else:  # interrupted: do not wait for solver calls in flight, stop the workers (and reap them)
            workers_running = list((executor._processes or {}).values())
            executor.shutdown(wait=False, cancel_futures=True)
            for process in workers_running:
                process.terminate()
            for process in workers_running:
                process.join(WORKER_GRACE)
                if process.is_alive():
                    process.kill()
                    process.join()


def _broken(items: list[Item]) -> Iterator[tuple[Item, Failed]]:
    """(item, Failed) for every item a broken local pool leaves unfinished."""
    reason = Failed("BrokenProcessPool: a worker process of the pool died (killed, or out of memory)")
    for item in items:
        yield item, reason


# ---------------------------------------------------------------------------- Ray
def _on_worker(task: Callable[[Item], Any], item: Item) -> Any:
    """The Ray task: `_attempt` with one torch thread (Ray gives each task one CPU)."""
    import torch

    torch.set_num_threads(1)
    return _attempt(task, item)


def _on_ray(task: Callable[[Item], Any], items: list[Item], workers: int, address: str | None) -> Iterator[tuple[Item, Any]]:
    ray = import_ray(local=address is None)
    started = not ray.is_initialized()
    pending: dict[Any, Item] = {}
    try:
        if started:
            _start_ray(ray, workers, address)
        remote = ray.remote(_on_worker).options(num_cpus=1, max_retries=RETRIES, retry_exceptions=False)
        window = 2 * max(1, int(ray.cluster_resources().get("CPU", workers)))  # calls queued at once
        queue = iter(items)
        for item in queue:
            pending[remote.remote(task, item)] = item
            if len(pending) >= window:
                break
        while pending:
            [ready], _ = ray.wait(list(pending), num_returns=1)
            item = pending.pop(ready)
            try:
                result = ray.get(ready)
            except ray.exceptions.WorkerCrashedError:
                result = Failed(f"the worker process died {RETRIES + 1} times running it (killed, or out of memory)")
            except (ray.exceptions.LocalRayletDiedError, ray.exceptions.RaySystemError) as error:  # Ray itself is gone
                reason = Failed(_last_line(error))
                for lost in [item, *pending.values(), *queue]:
                    yield lost, reason
                pending.clear()
                return
            except ray.exceptions.RayError as error:  # its node lost, its function not loadable there, ...
                result = Failed(_last_line(error))
            yield item, result
            following = next(queue, None)
            if following is not None:
                pending[remote.remote(task, following)] = following
    finally:
        for reference in pending:  # interrupted: stop the calls in flight
            with contextlib.suppress(Exception):  # Ray may be gone already
                ray.cancel(reference, force=True)
        if started and address is None:  # after a normal end, an error, an interruption or Ray's own failure
            stop_local_ray()
        elif started:
            ray.shutdown()


def _last_line(error: Exception) -> str:
    """The gist of a Ray error: the last line of its text (the exception's own, under Ray's
    traceback), without terminal colours."""
    lines = [line.strip() for line in re.sub(r"\x1b\[[0-9;]*m", "", str(error)).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[-1] if lines else 'no message'}"


def import_ray(local: bool) -> Any:
    """The `ray` module (BackendUnavailable if it is not installed); `local`: for a local instance."""
    if local:
        # Ray names a node by the address of the machine's outward interface (read when Ray is
        # imported); a local instance needs no other machine, so it is kept off that interface.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # then Ray's lookup answers 127.0.0.1
    try:
        import ray
    except ImportError as error:
        interrupted_import(error)
        raise BackendUnavailable("--executor ray needs Ray: pip install 'cardinal[ray]'") from None
    return ray


def start_local_ray(cpus: int) -> Any:
    """Start a Ray instance of `cpus` CPUs on this machine's loopback interface, never joining a
    cluster that `ray start` may have left running here; Ray's context object. Stop it with
    `stop_local_ray`.

    Its processes carry a mark of their own in their environment (`raywatch.OWNER`), and a
    watcher process (`verify/raywatch.py`, on Linux), told the instance's session folder once it
    is up, kills them all — those marked, and those named `ray::` that hold a file of that folder
    open — once this driver ends its pipe: at `stop_local_ray`, or when the driver dies, however.
    Ray's agents would outlive a killed driver by a minute or more; a failed start leaves nothing
    behind either."""
    global _watcher
    ray = import_ray(local=True)
    token = secrets.token_hex(16)
    if Path("/proc/self/environ").exists():
        script = str(Path(__file__).with_name("raywatch.py"))
        _watcher = subprocess.Popen([sys.executable, "-I", script, token], stdin=subprocess.PIPE, start_new_session=True)
    previous = os.environ.get(OWNER)
    os.environ[OWNER] = token  # inherited by every process Ray starts (its workers through the raylet)
    try:
        context = ray.init(
            address="local", num_cpus=cpus, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False
        )  # fmt: skip
        if _watcher is not None:  # the watcher also knows the instance by its session folder
            with contextlib.suppress(OSError):
                _watcher.stdin.write(f"{context.address_info['session_dir']}\n".encode())  # type: ignore[union-attr]
                _watcher.stdin.flush()  # type: ignore[union-attr]
        return context
    except BaseException:
        stop_local_ray()
        raise
    finally:
        if previous is None:
            del os.environ[OWNER]
        else:
            os.environ[OWNER] = previous


def stop_local_ray() -> None:
    """Shut down the Ray instance that `start_local_ray` started, then let its watcher kill what is
    left of it (nothing, as a rule) and wait for the watcher to end."""
    global _watcher
    ray = import_ray(local=True)
    ray.shutdown()
    watcher, _watcher = _watcher, None
    if watcher is not None:
        watcher.stdin.close()  # type: ignore[union-attr]
        watcher.wait()


def _start_ray(ray: Any, workers: int, address: str | None) -> None:
    """Start a local instance of `workers` CPUs (`start_local_ray`), or join `address`."""
    if address is None:
        start_local_ray(workers)
        return
    try:
        ray.init(address=address, log_to_driver=False)
    except (ConnectionError, ValueError) as error:
        raise InputError(f"--address {address}: no Ray cluster to join ({error})") from None

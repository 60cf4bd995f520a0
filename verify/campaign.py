"""`cardinal crosscheck`: certify greedy explanations at scale and keep every counterexample.

For each instance of a suite and each kind, greedy runs batched (answers re-checked exactly);
then each exact solver certifies every answer. One JSON record per explanation goes to
`DIR/records.jsonl` the moment it is finished (flushed and fsynced; a kill loses no finished
record), greedy-suboptimal and disagreeing instances to `DIR/cases/`, and `DIR/summary.md` plus
`DIR/figures/` are rebuilt from the records at the end. `--resume` skips finished records.

With `workers > 1` the solver calls run in worker processes; the records are the same as with
one worker (only their order in the file and the measured seconds differ).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InputError
from .instance import Instance
from .io import JsonLines
from .network import Network
from .suites import SUITES

# Backends that run only up to this many features (beyond, exhaustive enumeration is hopeless and
# z3's full encoding rarely finishes within a campaign's time limit) — except z3 on monotone
# networks, whose lazy loop (branch and bound for f > t on ReLU networks) scales with the
# features: measured on BlogFeedback's AXps (276 features), 16 of 18 sampled calls decided at
# thresholds 0.2–0.9 took 0.2–0.4 s; and with smooth units z3 alone decides beyond enumerate's cap.
MAX_FEATURES = {"enumerate": 20, "z3": 40}


def solvers_for(net: Network, solvers: tuple[str, ...]) -> tuple[str, ...]:
    """The backends of `solvers` that a campaign runs on this network (`MAX_FEATURES`)."""
    lazy = net.is_monotone or not net.is_piecewise_linear  # z3's lazy loop, or z3 alone (smooth units)
    n = net.n_inputs
    return tuple(name for name in solvers if (lazy and name == "z3") or n <= MAX_FEATURES.get(name, n))


@dataclass(frozen=True)
class Unit:
    """One explanation to certify: everything a worker process needs, in plain data."""

    key: str
    instance: str
    family: str
    activation: str
    network: dict[str, Any]
    network_hash: str
    widths: tuple[int, ...]
    domain: dict[str, Any]
    threshold: float
    x: tuple[float, ...]
    row: int
    kind: str
    output: float
    greedy: tuple[tuple[int, ...] | None, float, str] | None  # (features, seconds, check) or None
    solvers: tuple[str, ...]
    time_limit: float


def units_of(instance: Instance, solvers: tuple[str, ...], time_limit: float, done: set[str]) -> list[Unit]:
    """Greedy for every row and kind of an instance (batched, exactly re-checked), as units."""
    from .certify import greedy_answers

    names = solvers_for(instance.net, solvers)
    outputs = instance.net.forward(instance.X).numpy()
    units = []
    for kind in instance.kinds:
        keys = [f"{instance.id}:{row}:{kind}" for row in range(len(instance.X))]
        if all(key in done for key in keys):
            continue
        answers = (
            greedy_answers(instance.net, instance.X, kind, instance.domain, instance.threshold)[1]
            if instance.net.is_monotone
            else [None] * len(instance.X)
        )
        for row, (key, answer) in enumerate(zip(keys, answers, strict=True)):
            if key in done:
                continue
            greedy = None if answer is None else (answer.features, answer.seconds, answer.check)
            units.append(
                Unit(
                    key, instance.id, instance.family, instance.activation, instance.net.to_json(), instance.net.hash,
                    instance.net.widths, instance.domain.to_json(), instance.threshold,
                    tuple(float(v) for v in instance.X[row]), row, kind, float(outputs[row]), greedy, names, time_limit,
                )
            )  # fmt: skip
    return units


# ---------------------------------------------------------------------------- worker side
_POOL = None


def _worker_init() -> None:
    import torch

    torch.set_num_threads(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler, inherited through fork


def certify_unit(unit: Unit) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Certify one unit: its record, and its case file document when it is worth keeping."""
    from .certify import GreedyAnswer, SolverPool, case_of, certify_row, tie_decided
    from .domain import Domain
    from .network import Network
    from .problem import Problem

    global _POOL
    if _POOL is None or _POOL.names != unit.solvers:
        if _POOL is not None:
            _POOL.close()
        _POOL = SolverPool(unit.solvers)
    net = Network.from_json(unit.network)
    problem = Problem.make(net, np.array(unit.x), unit.kind, Domain.from_json(unit.domain), unit.threshold)
    greedy = None if unit.greedy is None else GreedyAnswer(*unit.greedy)
    certificate = certify_row(_POOL, problem, greedy, unit.time_limit, unit.row)
    body = certificate.to_json()
    gap = None
    if certificate.greedy is not None and certificate.greedy.size is not None and certificate.minimum is not None:
        gap = certificate.greedy.size - len(certificate.minimum)
    record = {
        "key": unit.key,
        "instance": unit.instance,
        "family": unit.family,
        "activation": unit.activation,
        "network_hash": unit.network_hash,
        "n": len(unit.x),
        "widths": list(unit.widths),
        "row": unit.row,
        "kind": unit.kind,
        "threshold": unit.threshold,
        "prediction": body["prediction"],
        "output": unit.output,
        "margin": unit.output - unit.threshold,
        "greedy": body["greedy"],
        "greedy_exists": body["greedy_exists"],
        "greedy_check": None if greedy is None else greedy.check,
        "solvers": body["solvers"],
        "verdict": certificate.verdict,
        "certified": certificate.certified,
        "minimum": body["minimum"],
        "minimum_proved": certificate.minimum_proved,
        "gap": gap,
        "tie_decided": tie_decided(problem, certificate.greedy.features) if certificate.verdict == "greedy_suboptimal" else None,
        "notes": body["notes"],
    }
    case = None
    if certificate.verdict in ("greedy_suboptimal", "solver_disagreement"):
        case = case_of(problem, certificate, note=f"crosscheck {unit.key}").to_json()
    return record, case


# ---------------------------------------------------------------------------- parent side
@dataclass(frozen=True)
class CampaignResult:
    directory: Path
    records: int  # finished records in the log (this run and earlier ones)
    new: int
    cases: int
    seconds: float
    interrupted: bool


def run_campaign(
    suite: str,
    out: Path,
    solvers: tuple[str, ...],
    time_limit: float,
    workers: int = 1,
    resume: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
    instances: Iterable[Instance] | None = None,
) -> CampaignResult:
    """Run a suite (or the given instances) into `out`; see the module docstring."""
    if suite not in SUITES and instances is None:
        raise InputError(f"unknown suite {suite!r} (use {', '.join(SUITES)})")
    log = JsonLines(out / "records.jsonl")
    existing = log.read()
    if existing and not resume:
        raise InputError(f"{out} already holds {len(existing)} records: pass --resume to continue, or choose another --out")
    done = {record["key"] for record in existing}
    started = time.perf_counter()
    units = [
        unit
        for instance in (instances if instances is not None else SUITES[suite](out))
        for unit in units_of(instance, solvers, time_limit, done)
    ]
    new = cases = 0
    interrupted = False
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        for record, case in _execute(units, workers):
            # The case file first: a record in the log is finished work that --resume skips.
            if case is not None:
                from .cases import Case

                Case.from_json(case).save(out / "cases")
                cases += 1
            log.append(record)
            new += 1
            if progress is not None:
                progress(new, len(units), record["key"])
    except KeyboardInterrupt:
        interrupted = True
    finally:
        signal.signal(signal.SIGTERM, previous)
    from .report import write_report

    records = log.read()
    write_report(out, records, suite=suite, solvers=solvers, time_limit=time_limit, seconds=time.perf_counter() - started)
    return CampaignResult(out, len(records), new, cases, time.perf_counter() - started, interrupted)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _execute(units: list[Unit], workers: int):
    """Yield (record, case) as units finish: in order with one worker, as completed otherwise."""
    if workers <= 1:
        for unit in units:
            yield certify_unit(unit)
        return
    executor = ProcessPoolExecutor(max_workers=workers, initializer=_worker_init)
    finished_all = False
    try:
        pending: set[Future] = set()
        queue = iter(units)
        for unit in queue:
            pending.add(executor.submit(certify_unit, unit))
            if len(pending) >= 2 * workers:
                break
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                yield future.result()
                following = next(queue, None)
                if following is not None:
                    pending.add(executor.submit(certify_unit, following))
        finished_all = True
    finally:
        if finished_all:
            executor.shutdown(wait=True)
        else:  # interrupted: do not wait for solver calls in flight, stop the workers outright
            workers_running = list((executor._processes or {}).values())
            executor.shutdown(wait=False, cancel_futures=True)
            for process in workers_running:
                process.terminate()


def default_solvers() -> tuple[str, ...]:
    from ..solvers.base import available_solvers

    return available_solvers()

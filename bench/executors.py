"""Benchmark: the quick suite's certification on 1 and 2 workers, local process pool vs Ray.

For each executor (`local`, `ray`) and worker count (1, 2) the quick suite (or its first
`--instances` instances) runs as `cardinal crosscheck` would, into a scratch folder; the time
measured is that of the solver calls, from the end of greedy to the last record (a Ray instance
of that many CPUs is started before and stopped after, its start timed apart). Scaling efficiency
is T(1 worker) / (2 × T(2 workers)). Ray's overhead per unit is measured twice: as the difference
of the 1-worker times per unit, and directly, as the round trip of a task that does nothing
(`--trivial` of them) through each executor. All four runs must give the same records apart from
timings, except where a solver call reached its time limit (where it stops depends on the load:
such records are counted in the table); any other difference stops the script.

    python -m bench.executors [--instances N] [--time-limit 10] [--out bench-results/executors.md]

(`--out bench/results/executors.md` refreshes the table kept in the repository.)
"""

from __future__ import annotations

import datetime
import os
import platform
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from cardinal.solvers.base import available_solvers
from cardinal.verify.campaign import CampaignSettings, run_campaign
from cardinal.verify.executors import execute, import_ray, start_local_ray, stop_local_ray
from cardinal.verify.record import without_timings
from cardinal.verify.suites import quick
from tabulate import tabulate

from bench import bench_parser, parse
from cardinal.io import JsonLines, write_atomic

WORKERS = (1, 2)
HEADERS = ["executor", "workers", "units", "seconds", "ms per unit", "Ray start (s)", "records ≠ 1 local worker (limit)"]


def _at_limit(record: dict) -> bool:
    """Whether a solver call of this record stopped at its time limit (`feasible` or `timeout`)."""
    return any(outcome["status"] in ("feasible", "timeout") for outcome in record["solvers"].values())


def differences(records: list[dict], reference: list[dict]) -> int:
    """Records that differ from the reference run's; raises SystemExit unless each one involves a
    call stopped at its limit in one of the two runs (the documented exception to reproducibility)."""
    if [r["key"] for r in records] != [r["key"] for r in reference]:
        raise SystemExit("the runs certified different explanations (keys differ)")
    differing = [(a, b) for a, b in zip(records, reference, strict=True) if a != b]
    unexplained = [a["key"] for a, b in differing if not (_at_limit(a) or _at_limit(b))]
    if unexplained:
        raise SystemExit(f"records differ without a call at its time limit: {', '.join(unexplained[:5])}")
    return len(differing)




def certify(executor: str, workers: int, instances: list, solvers: tuple[str, ...], time_limit: float, scratch: Path):
    """One campaign: (seconds from the end of greedy to the last record, units, comparable records)."""
    marks: dict[str, float] = {}

    def announce(count: int) -> None:
        marks["start"] = time.perf_counter()

    def progress(done: int, total: int, key: str) -> None:
        marks["end"] = time.perf_counter()

    out = scratch / f"{executor}-{workers}"
    settings = CampaignSettings(solvers, time_limit, workers, executor)
    result = run_campaign("quick", out, settings, instances=instances, announce=announce, progress=progress)
    records = JsonLines(out / "records.jsonl").read()
    if result.failed or result.lost or result.interrupted:
        raise SystemExit(
            f"{executor} with {workers} worker(s): {result.failed} failed unit(s), {result.lost} lost, "
            f"interrupted={result.interrupted}"
        )
    return marks["end"] - marks["start"], result.new, without_timings(records)


def trivial_round_trip(executor: str, workers: int, count: int) -> float:
    """Seconds per task of `count` tasks that do nothing (abs of a number)."""
    started = time.perf_counter()
    results = [result for _, result in execute(abs, list(range(-count, 0)), workers, executor)]
    assert sorted(results) == list(range(1, count + 1))
    return (time.perf_counter() - started) / count


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__file__, __doc__)
    parser.add_argument("--instances", type=int, help="only the first N instances of the quick suite (default: all)")
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds per solver call (crosscheck's default)")
    parser.add_argument("--trivial", type=int, default=500, help="tasks that do nothing, for the round trip (default 500)")
    args = parse(parser, argv)
    ray = import_ray(local=True)
    solvers = available_solvers()
    rows, seconds, reference = [], {}, None
    with tempfile.TemporaryDirectory(prefix="cardinal-bench-executors-") as folder:
        scratch = Path(folder)
        instances = list(quick(scratch / "data"))[: args.instances]
        print(" | ".join(HEADERS), flush=True)
        for executor in ("local", "ray"):
            for workers in WORKERS:
                startup = None
                if executor == "ray":
                    started = time.perf_counter()
                    start_local_ray(workers)
                    startup = time.perf_counter() - started
                try:
                    took, units, records = certify(executor, workers, instances, solvers, args.time_limit, scratch)
                finally:
                    if executor == "ray":
                        stop_local_ray()
                if reference is None:
                    reference = records
                differ = differences(records, reference)
                seconds[executor, workers] = took
                start = "–" if startup is None else f"{startup:.1f}"
                rows.append([executor, workers, units, f"{took:.1f}", f"{took / units * 1000:.0f}", start, differ])
                print(" | ".join(map(str, rows[-1])), flush=True)
        start_local_ray(1)
        try:
            list(execute(abs, [1], 1, "ray"))  # a warm worker
            round_trip = {"ray": trivial_round_trip("ray", 1, args.trivial)}
        finally:
            stop_local_ray()
        round_trip["local"] = trivial_round_trip("local", 2, args.trivial)
    efficiency = {e: seconds[e, 1] / (2 * seconds[e, 2]) for e in ("local", "ray")}
    per_unit = (seconds["ray", 1] - seconds["local", 1]) / units * 1000
    table = tabulate(rows, headers=HEADERS, tablefmt="github")
    command = "" if args.instances is None else f" --instances {args.instances}"
    command += f" --time-limit {args.time_limit:g} --out {args.out}"
    text = f"""# Executors: the quick suite on 1 and 2 workers, local pool vs Ray

{datetime.date.today()}, this machine: {os.cpu_count()} CPUs, Python {platform.python_version()},
Ray {ray.__version__}; solvers {", ".join(solvers)}, time limit {args.time_limit:g} s, {len(instances)} instances.
Seconds: from the end of greedy to the last record. The runs gave the same records (timings aside) except
those counted in the last column, each of which has a solver call stopped at its time limit in one of the runs.

{table}

Scaling efficiency, 1 → 2 workers (T1 / 2·T2): local {efficiency["local"]:.2f}, Ray {efficiency["ray"]:.2f}.

Ray's overhead per unit: {per_unit:+.0f} ms from the 1-worker runs (Ray − local, per unit); a task
that does nothing takes {round_trip["ray"] * 1000:.2f} ms on Ray (one worker, started and warm) and
{round_trip["local"] * 1000:.2f} ms in the local pool (2 processes, started with the run), over {args.trivial} tasks.

    python -m bench.executors{command}
"""
    write_atomic(args.out, text)
    print(text)


if __name__ == "__main__":
    main()

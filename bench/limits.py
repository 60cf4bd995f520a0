"""Benchmark: time limits that hold — how long a limited call takes, against its limit.

The tests assert what a limited call answers (TIMEOUT or FEASIBLE, never a verdict; a solver
process stopped from outside is gone); how soon it answers depends on the machine and its load,
so it is measured here instead. Rows (each call's wall seconds, the median of `--repeats`):

* **guard, overrun**: a backend that sleeps 60 s whatever its limit, guarded, limit 1 s (its
  solver process started before): stopped from outside;
* **guard, wide**: a monotone ReLU network 28 → 512 → 512 → 512 → 1 (seed 0), limit 2 s, each
  installed backend of highs (CXp), z3 (AXp), enumerate (AXp), gurobi (CXp), guarded, at most
  10 features (unguarded, HiGHS's presolve ran 42 s and z3's cuts 30 s on it);
* **MILP, own limit**: a 28 → 32 → 32 → 1 network's CXp (seed 1, input 9), gurobi and highs
  unguarded, limit 0.05 s: the backend's own limit;
* **enumerate, 20 features**: a 20 → 16 → 16 → 1 network's CXp (seed 2, the threshold 30% of
  the way from f(x) to f(1, ..., 1): a 6-feature minimum), limit 60 s: the time it needs.

`promised` is the limit plus the guard's `allowed_overrun` (10%, at least 1 s), which the
unguarded rows are held to as well, and `met` whether the median is within it. Timings depend
on the machine's load: rerun where it is quiet before quoting them.

    python -m bench.limits [--repeats 3] [--out bench-results/limits.md]
"""

from __future__ import annotations

import datetime
import importlib
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
from cardinal.solvers.base import BaseSolver, available_solvers, get_solver, solve_problem
from cardinal.solvers.guard import GuardedSolver, allowed_overrun
from cardinal.verify.generate import median_threshold, random_network
from tabulate import tabulate

from bench import bench_parser, parse
from bench.greedy import machine
from cardinal.domain import Domain
from cardinal.io import write_atomic
from cardinal.network import Network
from cardinal.problem import Outcome, Problem, Status
from cardinal.validate import count

DESIGN = {
    "format": "cardinal.network/1",
    "layers": [
        {"weight": [[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]], "bias": [-1.0, 0.0], "activation": "relu"},
        {"weight": [[1.0, 0.6]], "bias": [0.0], "activation": "identity"},
    ],
}
HEADERS = ["row", "backend", "status", "limit s", "promised s", "wall s (median)", "met"]


class Overruns(BaseSolver):
    """A backend that ignores any limit (as HiGHS's presolve did on wide networks): 60 s each call."""

    name = "overruns"

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        time.sleep(60)
        return Outcome(Status.NONE_WITHIN, self.name, 60.0)


def small() -> Problem:
    return Problem.make(Network.from_json(DESIGN), np.ones(3), "contrastive", threshold=0.5)


def timed(call: Callable[[], Outcome], repeats: int) -> tuple[str, float]:
    """(the statuses seen, the median wall seconds) of `repeats` calls."""
    statuses, seconds = set(), []
    for _ in range(repeats):
        started = time.perf_counter()
        statuses.add(call().status.value)
        seconds.append(time.perf_counter() - started)
    return ",".join(sorted(statuses)), statistics.median(seconds)


def rows(repeats: int) -> list[list[object]]:
    """Every row of the table (module docstring), printed as it is measured."""
    found: list[list[object]] = []

    def add(row: str, backend: str, call: Callable[[], Outcome], limit: float) -> None:
        status, seconds = timed(call, repeats)
        promised = limit + allowed_overrun(limit)
        met = "yes" if seconds <= promised else "no"
        found.append([row, backend, status, f"{limit:g}", f"{promised:g}", f"{seconds:.2f}", met])
        print(" | ".join(map(str, found[-1])), flush=True)

    # the class under its module's name: `python -m bench.limits` runs this file as __main__, which a solver process lacks
    factory = importlib.import_module("bench.limits").Overruns
    with GuardedSolver("overruns", factory, {}) as overruns:
        overruns.wait_started(time.perf_counter() + 600)
        add("guard, overrun", "overruns", partial(overruns.solve, small(), None, 1.0), 1.0)

    rng = np.random.default_rng(0)
    wide = random_network(rng, 28, (512, 512, 512), "relu")
    X = rng.random((4, 28))
    threshold = median_threshold(wide, X)
    installed = available_solvers()
    for name, kind in (("highs", "contrastive"), ("z3", "abductive"), ("enumerate", "abductive"), ("gurobi", "contrastive")):
        if name in installed:
            hard = Problem.make(wide, X[0], kind, threshold=threshold)
            with get_solver(name, guarded=True) as backend:
                solve_problem(backend, small(), None, 2.0)  # its solver process starts outside the measured calls
                add("guard, wide", f"{name} ({kind})", partial(solve_problem, backend, hard, 10, 2.0), 2.0)

    net = random_network(np.random.default_rng(1), 28, (32, 32), "relu")
    X = np.random.default_rng(101).random((40, 28))
    problem = Problem.make(net, X[9], "contrastive", Domain.unit(28), median_threshold(net, X))
    for name in ("gurobi", "highs"):
        if name in installed:
            with get_solver(name) as milp:
                add("MILP, own limit", name, partial(solve_problem, milp, problem, None, 0.05), 0.05)

    rng = np.random.default_rng(2)
    net = random_network(rng, 20, (16, 16), "relu")
    x = rng.uniform(size=20)
    fx = float(net.forward(x))
    problem = Problem.make(net, x, "contrastive", Domain.unit(20), fx + 0.3 * (float(net.forward(np.ones(20))) - fx))
    with get_solver("enumerate") as enumerate_:
        add("enumerate, 20 features", "enumerate", partial(solve_problem, enumerate_, problem, None, 60.0), 60.0)
    return found


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__file__, __doc__)
    parser.add_argument("--repeats", type=count(1), default=3, help="calls per row (default %(default)s)")
    args = parse(parser, argv)
    began = time.perf_counter()
    print(" | ".join(HEADERS), flush=True)
    table = rows(args.repeats)
    text = "\n".join(
        [
            "# Time limits that hold",
            "",
            f"Run {datetime.date.today().isoformat()} with `python -m bench.limits --repeats {args.repeats}` on {machine()}; "
            f"{time.perf_counter() - began:.0f} s in all (see `bench/limits.py`).",
            "",
            tabulate(table, headers=HEADERS, tablefmt="github"),
            "",
        ]
    )
    write_atomic(args.out, text)
    print(f"wrote {args.out}")
    if any(row[-1] == "no" for row in table):
        sys.exit(1)


if __name__ == "__main__":
    main()

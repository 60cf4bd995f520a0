"""Benchmark: the fixed cost of a guarded solver call (`solvers.guard`), against the same call
unguarded.

Each query goes to `solve_minimum` twice in a row, unguarded (the backend in this process) and
guarded (the default: the backend in a solver process of this process's, started by an earlier
call and stopped at the limit), `--repeats` times. Per backend the table gives the median call
each way and the median of the per-call differences, guarded − unguarded: the guard's fixed
cost (the problem's and the answer's round trip). Both ways must give the same answer (status
and size), else the script stops. Queries:

* **trivial**: the DESIGN network (3 features), x = (1, 1, 1), t = 0.5, the minimum CXp (the
  same query every time);
* **28 × 32 × 32**: issue 30's front door — a monotone ReLU network 28 → 32 → 32 → 1 (random,
  seed 0), a minimum CXp from scratch for each of `--inputs` inputs uniform in [0, 1]^28, at a
  threshold 80% of the way from f(x) to f(x') (x' the upper corner: p(x) = 0).

Every installed backend of z3, gurobi, highs and enumerate runs the trivial query, and z3,
gurobi and highs the 28-feature ones (enumerate is exhaustive: hopeless at 28 features), one
torch thread. Apart, `start`: this process's first guarded call, its solver processes starting.
Timings depend on the machine's load: rerun where it is quiet before quoting them.

    python -m bench.guard [--inputs 20] [--repeats 3] [--time-limit 60] [--out bench-results/guard.md]
"""

from __future__ import annotations

import datetime
import statistics
import time
from collections.abc import Sequence

import numpy as np
import torch
from cardinal.solvers.base import available_solvers, solve_minimum
from cardinal.verify.generate import random_network
from tabulate import tabulate

from bench import bench_parser, parse
from bench.greedy import machine
from cardinal.io import write_atomic
from cardinal.network import Network
from cardinal.validate import count, seconds

DESIGN = {
    "format": "cardinal.network/1",
    "layers": [
        {"weight": [[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]], "bias": [-1.0, 0.0], "activation": "relu"},
        {"weight": [[1.0, 0.6]], "bias": [0.0], "activation": "identity"},
    ],
}
Query = tuple[Network, np.ndarray, float]  # network, x [n], threshold


def trivial() -> list[Query]:
    return [(Network.from_json(DESIGN), np.ones(3), 0.5)]


def front_door(inputs: int) -> list[Query]:
    """Issue 30's held-out queries: minimum CXps from scratch on a 28 × 32 × 32 monotone ReLU net."""
    rng = np.random.default_rng(0)
    net = random_network(rng, 28, (32, 32), "relu")
    X = rng.random((inputs, 28))
    high = float(net.forward(np.ones(28)))
    queries = []
    for x in X:
        fx = float(net.forward(x))
        if fx < high:  # else x is at the ceiling: no threshold between f(x) and f(x')
            queries.append((net, x, fx + 0.8 * (high - fx)))
    return queries


def measure(name: str, queries: list[Query], repeats: int, time_limit: float) -> tuple[list[float], list[float]]:
    """Seconds per call (unguarded, guarded), the two ways of each query one after the other."""
    plain, guarded = [], []
    for _ in range(repeats):
        for net, x, threshold in queries:
            answers = []
            for mode, times in ((False, plain), (True, guarded)):
                started = time.perf_counter()
                outcome = solve_minimum(net, x, threshold=threshold, solver=name, time_limit=time_limit, guarded=mode)
                times.append(time.perf_counter() - started)
                answers.append((outcome.status, outcome.size))
            if answers[0] != answers[1]:
                raise SystemExit(f"{name}: unguarded {answers[0]} but guarded {answers[1]}")
    return plain, guarded


HEADERS = ["problem", "solver", "calls", "unguarded ms", "guarded ms", "fixed cost ms"]


def row(problem: str, name: str, plain: list[float], guarded: list[float]) -> list[object]:
    cost = statistics.median(g - p for g, p in zip(guarded, plain, strict=True))
    return [problem, name, len(plain), *(f"{1000 * statistics.median(t):.2f}" for t in (plain, guarded)), f"{1000 * cost:.2f}"]


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__file__, __doc__)
    parser.add_argument("--inputs", type=count(1), default=20, help="28-feature queries (default %(default)s)")
    parser.add_argument("--repeats", type=count(1), default=3, help="times each query runs each way (default %(default)s)")
    parser.add_argument("--time-limit", type=seconds, default=60.0, help="seconds per call (default %(default)s)")
    args = parse(parser, argv)
    torch.set_num_threads(1)
    installed = available_solvers()
    began = time.perf_counter()
    first = installed[0]
    started = time.perf_counter()
    net, x, threshold = trivial()[0]
    solve_minimum(net, x, "contrastive", threshold=threshold, solver=first, time_limit=args.time_limit)
    start = time.perf_counter() - started
    rows: list[list[object]] = []
    print(" | ".join(HEADERS), flush=True)
    interrupted = False
    try:
        for problem, queries, names in (
            ("trivial", trivial() * 10, installed),
            ("28 × 32 × 32", front_door(args.inputs), [name for name in installed if name != "enumerate"]),
        ):
            for name in names:
                rows.append(row(problem, name, *measure(name, queries, args.repeats, args.time_limit)))
                print(" | ".join(map(str, rows[-1])), flush=True)
    except KeyboardInterrupt:  # write what was measured
        interrupted = True
    command = f"python -m bench.guard --inputs {args.inputs} --repeats {args.repeats} --time-limit {args.time_limit:g}"
    state = f" Interrupted after {len(rows)} row(s)." if interrupted else ""
    text = "\n".join(
        [
            "# The fixed cost of a guarded call",
            "",
            f"Run {datetime.date.today().isoformat()} with `{command}` on {machine()}; "
            f"{time.perf_counter() - began:.0f} s in all. Medians per call through `solve_minimum`; `fixed cost`: the median "
            "of the per-call differences guarded − unguarded (see `bench/guard.py`). This process's first guarded call "
            f"({first}, trivial query, its solver process starting): {1000 * start:.0f} ms.{state}",
            "",
            tabulate(rows, headers=HEADERS, tablefmt="github"),
            "",
        ]
    )
    write_atomic(args.out, text)
    print(f"wrote {args.out}" + (f" ({len(rows)} row(s): interrupted)" if interrupted else ""))
    if interrupted:
        raise SystemExit(130)


if __name__ == "__main__":
    main()

"""Benchmark: what a command costs before it does anything — CPU seconds of short commands.

Each command runs `--repeats` times as a child process of this one; its CPU time (user + system,
`resource.getrusage(RUSAGE_CHILDREN)` before and after, so its own children are counted too) and
wall time are recorded, and the table gives the median of each with the target where there is
one (issue 26):

* `cardinal --help` — parses nothing, imports neither torch nor numpy's users: target ≤ 0.5 s CPU;
* `python -c "import cardinal"` — the public names are imported on first use (PEP 562);
* `python -c "from cardinal import Network"` — the core (torch loads on its first float
  computation: `cardinal.lazy`);
* `python -c "import torch"` — the floor under any command that computes;
* `cardinal explain` on the README's example (`examples/design.json`, t = 0.5, both kinds, exact
  re-check): target ≤ 2 s CPU. Small inputs are answered by Algorithm 1 in exact arithmetic
  (`cardinal.algorithm1`), which needs no torch; with `--no-verify` the same command runs the
  batched float greedy, on torch (no target: it shows what the exact path saves);
* `cardinal.explain` on `LOOP_ROWS` inputs of the same network, one call each (each starts the
  exact solvers' processes and ends them), against one `cardinal.Explainer` that keeps them for
  every input: the same answers; the difference is the start-up the Explainer saves.

CPU time rather than wall time, since wall time on a busy machine measures the other processes.

    python -m bench.startup [--repeats 5] [--out bench-results/startup.md]
"""

from __future__ import annotations

import datetime
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tabulate import tabulate

from bench import bench_parser, parse
from bench.greedy import machine
from cardinal.io import write_atomic
from cardinal.validate import count

CHECKOUT = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).with_name("cardinal")  # the console script beside this interpreter
CARDINAL = [str(SCRIPT)] if SCRIPT.is_file() else [sys.executable, "-m", "cardinal.verify.cli"]
EXAMPLE = ["examples/design.json", "--inputs", "examples/design_inputs.csv", "--threshold", "0.5", "--kind", "both"]
LOOP_ROWS = 20
_LOOP = f"import cardinal, numpy as np\nX = np.random.default_rng(0).uniform(0, 1, ({LOOP_ROWS}, 3))\n"
ONE_SHOT = _LOOP + "for x in X:\n    cardinal.explain('examples/design.json', x, threshold=0.5)\n"
KEPT = _LOOP + (
    "with cardinal.Explainer('examples/design.json', threshold=0.5) as explainer:\n"
    "    for x in X:\n        explainer.explain(x)\n"
)
COMMANDS: tuple[tuple[str, list[str], float | None], ...] = (  # (shown as, argv, target CPU seconds)
    ("cardinal --help", [*CARDINAL, "--help"], 0.5),
    ("python -c 'import cardinal'", [sys.executable, "-c", "import cardinal"], None),
    ("python -c 'from cardinal import Network'", [sys.executable, "-c", "from cardinal import Network"], None),
    ("python -c 'import torch'", [sys.executable, "-c", "import torch"], None),
    ("cardinal explain (README example)", [*CARDINAL, "explain", *EXAMPLE], 2.0),
    ("cardinal explain --no-verify (the same, batched float greedy)", [*CARDINAL, "explain", *EXAMPLE, "--no-verify"], None),
    (f"cardinal.explain, {LOOP_ROWS} inputs, one call each", [sys.executable, "-c", ONE_SHOT], None),
    (f"cardinal.Explainer, the same {LOOP_ROWS} inputs, solvers kept", [sys.executable, "-c", KEPT], None),
)
HEADERS = ["command", "runs", "CPU s (median)", "wall s (median)", "target CPU s", "met"]


def measure(argv: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of `argv` in the checkout; it must exit 0."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=CHECKOUT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def row(shown: str, argv: list[str], target: float | None, repeats: int) -> list[object]:
    cpu, wall = zip(*(measure(argv) for _ in range(repeats)), strict=True)
    median = statistics.median(cpu)
    met = "" if target is None else ("yes" if median <= target else "NO")
    return [shown, repeats, f"{median:.2f}", f"{statistics.median(wall):.2f}", "" if target is None else f"{target:g}", met]


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__file__, __doc__)
    parser.add_argument("--repeats", type=count(1), default=5, help="runs of each command, median taken (default 5)")
    args = parse(parser, argv)
    rows: list[list[object]] = []
    print(" | ".join(HEADERS), flush=True)
    try:
        for shown, command, target in COMMANDS:
            rows.append(row(shown, command, target, args.repeats))
            print(" | ".join(map(str, rows[-1])), flush=True)
    finally:  # an interrupted run writes the rows it finished
        state = "" if len(rows) == len(COMMANDS) else f" Interrupted: {len(rows)} of {len(COMMANDS)} commands measured."
        load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
        text = "\n".join(
            [
                "# Start-up: CPU seconds of short commands",
                "",
                f"Run {datetime.date.today().isoformat()} with `python -m bench.startup --repeats {args.repeats}` on "
                f"{machine()}; "
                f"load average {load} at the end. CPU = user + system time of the child (see `bench/startup.py`).{state}",
                "",
                tabulate(rows, headers=HEADERS, tablefmt="github"),
                "",
            ]
        )
        write_atomic(args.out, text)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""`cardinal bench`: run a benchmark script of the source checkout (bench/greedy.py, guard.py, solvers.py,
startup.py). Its flags (`_add_bench`) and its handler.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cardinal.errors import InputError


def _add_bench(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    bench = commands.add_parser(
        "bench",
        help="run a benchmark script of the source checkout (bench/greedy.py, guard.py, solvers.py, startup.py)",
        description="Run bench/NAME.py with the arguments that follow (see `cardinal bench NAME --help`); "
        "it writes its table where its --out says (default ./bench-results/; pass --out bench/results/NAME.md to refresh "
        "the tables kept in the repository).",
    )
    bench.add_argument(
        "name",
        choices=("exact_milp", "greedy", "guard", "solvers", "startup", "verix"),
        help="exact_milp: issue 28's exact MILP targets; greedy: batched vs one-call loops; guard: a guarded call's "
        "fixed cost; solvers: time per backend; startup: CPU seconds of short commands; verix: minimum CXps and AXps "
        "of a VeriX-shaped 784-input classifier",
    )
    bench.add_argument("arguments", nargs=argparse.REMAINDER, help="passed to the benchmark")
    bench.set_defaults(handler=_bench)


def _bench(args: argparse.Namespace) -> int:
    import importlib

    checkout = Path(__file__).resolve().parents[2]
    if not (checkout / "bench" / f"{args.name}.py").is_file():
        raise InputError(f"no bench/{args.name}.py beside {checkout / 'verify'}: the benchmarks run from a source checkout")
    if str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    importlib.import_module(f"bench.{args.name}").main(args.arguments)
    return 0

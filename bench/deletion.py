"""Benchmark: the deletion explainer (`solvers.deletion`, subset-minimal AXps, each step decided
exactly) per traversal, against the path before issue 40, in the same run.

Models: VeriX's MNIST-FC shape (784 → 10 → 10 → 10, as `bench.verix` trains and exports it) on
the ball of radius `--radius` around each image, and the scikit-learn digits MLP (64 → 16 → 10,
as `bench.digits` trains and exports it) on the full box [0, 1]^64; the first `--verix-images`
and `--digits-images` test images of each. Per image:

* **before**: the sensitivity traversal with the oracle as it was (`SetOracle(screens=False)`:
  the exact interval test, then the engines in their guarded child process);
* **after**, each traversal of `--traversals`, with the oracle's screens (the exact
  linear-relaxation bound, corners and the gradient search replayed exactly, in this process).

Each run gets a fresh oracle (its child's start counted) and `--time-limit` seconds per question.
The table gives each run's status, size, questions asked and seconds, whether its set is the
before run's, and before's seconds over each after run's.

    python -m bench.deletion [--verix-images 2] [--digits-images 2] [--time-limit 60]
                             [--traversals index,sensitivity,quickxplain] [--out bench-results/deletion.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from cardinal.solvers.deletion import TRAVERSALS, Deletion, deletion
from cardinal.solvers.oracle import SetOracle

from bench import Parser, check_out
from bench.digits import _commit, digits_model
from bench.greedy import machine
from bench.verix import N, digits_28, tf2onnx_bytes, train_fc
from cardinal.domain import Domain
from cardinal.network import Network
from cardinal.problem import Problem

BEFORE = "before"


def verix_model(path: Path) -> tuple[Network, np.ndarray]:
    """`bench.verix`'s MNIST-FC-shaped model, written to `path` and read back, and its test images [m, 784]."""
    X, y = digits_28()
    order = np.random.default_rng(0).permutation(len(X))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tf2onnx_bytes(train_fc(X[order[:1400]], y[order[:1400]])))
    return Network.load(path), X[order[1400:]]


def timed(problem: Problem, traversal: str, time_limit: float, screens: bool) -> tuple[Deletion, float]:
    """One deletion run with a fresh oracle, and its seconds."""
    started = time.perf_counter()
    with SetOracle(screens=screens) as oracle:
        answer = deletion(problem, oracle, time_limit, traversal)
    return answer, time.perf_counter() - started


def run_problem(problem: Problem, traversals: Sequence[str], time_limit: float) -> dict[str, tuple[Deletion, float]]:
    """The before run and each traversal's after run on one problem."""
    runs = {BEFORE: timed(problem, "sensitivity", time_limit, screens=False)}
    for traversal in traversals:
        runs[traversal] = timed(problem, traversal, time_limit, screens=True)
    return runs


def main(argv: Sequence[str] | None = None) -> None:
    parser = Parser(prog="python -m bench.deletion", description=__doc__.split("\n\n")[0])
    parser.add_argument("--verix-images", type=int, default=2, help="MNIST-FC-shaped test images (default 2)")
    parser.add_argument("--digits-images", type=int, default=2, help="digits MLP test images, full box (default 2)")
    parser.add_argument("--radius", type=float, default=0.05, help="the MNIST-FC ball's radius (default 0.05)")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per exact question (default 60)")
    parser.add_argument("--traversals", default=",".join(TRAVERSALS), help="after runs (default: every traversal)")
    parser.add_argument("--work", default="bench-results/deletion", help="where the model files go (not committed)")
    parser.add_argument("--out", default="bench-results/deletion.md", help="results table (bench/results/deletion.md to refresh)")
    args = parser.parse_args(argv)
    check_out(parser, args.out)
    traversals = [t for t in args.traversals.split(",") if t]
    if unknown := [t for t in traversals if t not in TRAVERSALS]:
        parser.error(f"unknown traversal {unknown[0]!r} (use {', '.join(TRAVERSALS)})")
    load_before = os.getloadavg()
    problems: list[tuple[str, Problem]] = []
    verix, images = verix_model(Path(args.work) / "verix_fc_digits28.onnx")
    for index, x in enumerate(images[: args.verix_images]):
        ball = Domain.unit(N).ball(x, args.radius)
        problems.append((f"MNIST-FC image {index}, ε = {args.radius}", Problem.make(verix, x, "abductive", ball)))
    digits, digit_images, _, _ = digits_model(Path(args.work) / "digits_mlp.onnx")
    for index, x in enumerate(digit_images[: args.digits_images]):
        problems.append((f"digits MLP image {index}, full box", Problem.make(digits, x, "abductive", Domain.unit(64))))
    rows = []
    for name, problem in problems:
        runs = run_problem(problem, traversals, args.time_limit)
        rows.append((name, runs))
        for label, (answer, seconds) in runs.items():
            size = "—" if answer.features is None else len(answer.features)
            line = f"{name}: {label}: {answer.status} {size} ({answer.queries} questions, {seconds:.1f} s)"
            print(line, file=sys.stderr, flush=True)
        write_table(Path(args.out), rows, args, load_before, os.getloadavg())  # after each problem: a stopped run keeps its rows


def write_table(path: Path, rows: list, args: argparse.Namespace, load_before: tuple, load_after: tuple) -> None:
    lines = [
        "# Deletion per traversal, against the path before issue 40 (`bench/deletion.py`)",
        "",
        f"- {datetime.date.today().isoformat()}, commit {_commit()}, {machine()}",
        f"- load average (1, 5, 15 min) before: {', '.join(f'{v:.2f}' for v in load_before)}; "
        f"after: {', '.join(f'{v:.2f}' for v in load_after)} (a shared machine: the seconds move with it)",
        f"- `python -m bench.deletion --verix-images {args.verix_images} --digits-images {args.digits_images} "
        f"--time-limit {args.time_limit:g} --traversals {args.traversals} --out {args.out}`",
        "- before: sensitivity traversal, `SetOracle(screens=False)` (interval test, then the engines in their child); "
        "after: `SetOracle()` (the screens in this process, then the same engines). Every answer exactly checked.",
        "",
        "| problem | run | status | size | same set as before | questions | s | before s / s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, runs in rows:
        before, before_seconds = runs[BEFORE]
        for label, (answer, seconds) in runs.items():
            size = "—" if answer.features is None else str(len(answer.features))
            same = "—" if label == BEFORE else ("yes" if answer.features == before.features else "no")
            ratio = "—" if label == BEFORE else f"{before_seconds / seconds:.1f}"
            lines.append(f"| {name} | {label} | {answer.status} | {size} | {same} | {answer.queries} | {seconds:.1f} | {ratio} |")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

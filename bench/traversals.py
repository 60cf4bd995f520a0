"""Benchmark: questions asked by deletion's sensitivity and quickxplain traversals
(`solvers.deletion`), per image and kind, and whether they return the same set.

Models and boxes:

* **mnist-fc**: VeriX's MNIST-FC (`/work/shared/data/verix/mnist-10x2.onnx`, 784 → 10 → 10 → 10
  ReLU) on the ball of radius `--radius` (default 0.05, VeriX's ε) around each of the first
  `--images` images of `eran/mnist_test.csv` from `--start` (default 0) (label, then 784 pixels 0–255, row-major; x =
  pixel / 255), clipped to [0, 1];
* **digits-mlp** / **digits-cnn**: `bench.digits`'s scikit-learn digits MLP (64 → 16 → 10) and
  2-Conv CNN, trained here (seeded), on the full box [0, 1]^64 and on the ball of radius
  `--digits-radius` (default 0.1) around each of the first `--digits-images` test images.

Each (image, box, kind) is explained by each traversal of `--traversals`, one run after another,
all with one exact set oracle (`SetOracle()`), `--time-limit` seconds per question. A row gives
each traversal's status, set size and questions (`Deletion.queries`: the questions that went to
the oracle or the monotone shortcut; a question asked again takes the earlier answer and is not
counted), how many of them reached the oracle's engines (exact MILP, z3: the expensive ones;
the rest the interval test and the in-process screens decided), and whether the sets are equal.
Questions are deterministic: the counts do not move with the machine's load. No seconds are
recorded (the machine is shared).

    python -m bench.traversals [--models mnist-fc,digits-mlp,digits-cnn] [--images 3] [--start 0]
        [--radius 0.05] [--digits-images 3] [--digits-radius 0.1] [--time-limit 30]
        [--traversals sensitivity,quickxplain] [--work bench-results/traversals]
        [--out bench-results/traversals.md]
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from cardinal.solvers.deletion import SUBSET_MINIMAL, TRAVERSALS, Deletion, deletion
from cardinal.solvers.oracle import ENGINES, SetOracle

from bench import Parser, check_out
from bench.digits import _commit, cnn_model, digits_model
from cardinal.domain import Domain
from cardinal.network import Network
from cardinal.problem import Problem

DATA = Path("/work/shared/data")
MODELS = ("mnist-fc", "digits-mlp", "digits-cnn")
ENGINE_NAMES = {engine.name for engine in ENGINES}


def mnist_images(count: int, path: Path = DATA / "eran" / "mnist_test.csv") -> tuple[np.ndarray, np.ndarray]:
    """The first `count` images of ERAN's MNIST test file: pixels / 255 [count, 784] and labels [count]."""
    rows = np.loadtxt(path, delimiter=",", max_rows=count, ndmin=2)
    return rows[:, 1:] / 255.0, rows[:, 0].astype(int)


def problems(args: argparse.Namespace) -> Iterator[tuple[str, str, Problem]]:
    """(model, box, problem) per image, box and kind, in the order measured."""
    kinds = ("abductive", "contrastive")
    for model in args.models:
        if model == "mnist-fc":
            net = Network.load(DATA / "verix" / "mnist-10x2.onnx")
            images, _ = mnist_images(args.start + args.images)
            images = images[args.start :]
            boxes = [(f"ε = {args.radius:g}", lambda x: Domain.unit(784).ball(x, args.radius))]
        else:
            build = digits_model if model == "digits-mlp" else cnn_model
            net, images, _, _ = build(Path(args.work) / f"{model}.{'onnx' if model == 'digits-mlp' else 'pt'}")
            images = images[args.start : args.start + args.digits_images]
            boxes = [
                ("full box", lambda x: Domain.unit(64)),
                (f"ε = {args.digits_radius:g}", lambda x: Domain.unit(64).ball(x, args.digits_radius)),
            ]
        for index, x in enumerate(images, start=args.start):
            for box_name, box in boxes:
                for kind in kinds:
                    yield model, f"image {index}, {box_name}", Problem.make(net, x, kind, box(x))


def engine_questions(answer: Deletion) -> int:
    """The questions of `answer` that the oracle's engines (exact MILP, z3, enumerate) decided or left undecided."""
    return sum(1 for step in answer.steps if step.engine in ENGINE_NAMES or "timeout" in step.engine)


def main(argv: Sequence[str] | None = None) -> None:
    parser = Parser(prog="python -m bench.traversals", description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--images", type=int, default=3, help="MNIST-FC images (default 3)")
    parser.add_argument("--start", type=int, default=0, help="the first image's index, MNIST-FC and digits (default 0)")
    parser.add_argument("--radius", type=float, default=0.05, help="MNIST-FC ball radius (default 0.05)")
    parser.add_argument("--digits-images", type=int, default=3, help="digits test images per model (default 3)")
    parser.add_argument("--digits-radius", type=float, default=0.1, help="digits ball radius (default 0.1)")
    parser.add_argument("--time-limit", type=float, default=30.0, help="seconds per exact question (default 30)")
    parser.add_argument("--traversals", default="sensitivity,quickxplain", help="compared (default sensitivity,quickxplain)")
    parser.add_argument("--work", default="bench-results/traversals", help="where the digits model files go (not committed)")
    parser.add_argument("--out", default="bench-results/traversals.md", help="results table (bench/results/traversals.md)")
    args = parser.parse_args(argv)
    check_out(parser, args.out)
    args.models = [m for m in args.models.split(",") if m]
    if unknown := [m for m in args.models if m not in MODELS]:
        parser.error(f"unknown model {unknown[0]!r} (use {', '.join(MODELS)})")
    args.traversals_list = [t for t in args.traversals.split(",") if t]
    if unknown := [t for t in args.traversals_list if t not in TRAVERSALS]:
        parser.error(f"unknown traversal {unknown[0]!r} (use {', '.join(TRAVERSALS)})")
    command = "python -m bench.traversals " + " ".join(argv if argv is not None else sys.argv[1:])
    rows: list[tuple[str, str, str, dict[str, Deletion]]] = []
    with SetOracle() as oracle:
        for model, case, problem in problems(args):
            answers = {t: deletion(problem, oracle, args.time_limit, t) for t in args.traversals_list}
            rows.append((model, case, problem.kind, answers))
            line = "; ".join(
                f"{t}: {a.status} {_size(a)} in {a.queries} ({engine_questions(a)} engine)" for t, a in answers.items()
            )
            print(f"{model} {case} {problem.kind}: {line}", file=sys.stderr, flush=True)
            write_table(Path(args.out), rows, args, command)  # after each case: a stopped run keeps its rows


def _size(answer: Deletion) -> str:
    return "—" if answer.features is None else str(len(answer.features))


def _same(answers: dict[str, Deletion]) -> str:
    found = list(answers.values())
    if any(a.status not in (SUBSET_MINIMAL, "none_exists") for a in found):
        return "—"
    return "yes" if all(a.status == found[0].status and a.features == found[0].features for a in found) else "no"


def write_table(path: Path, rows: list, args: argparse.Namespace, command: str) -> None:
    traversals = args.traversals_list
    head = ["model", "image, box", "kind", *(f"{t}: status, size" for t in traversals)]
    head += [*(f"{t} questions (engine)" for t in traversals), "same set"]
    lines = [
        "# Deletion's questions per traversal (`bench/traversals.py`)",
        "",
        f"- {datetime.date.today().isoformat()}, commit {_commit()}; per question {args.time_limit:g} s; one `SetOracle()`",
        f"- `{command}`",
        "- questions: `Deletion.queries` (a repeated question is answered from the first, uncounted); "
        "(engine): of them, those that reached the oracle's engines (exact MILP, z3) rather than the "
        "interval test or the in-process screens. Deterministic: no seconds recorded (shared machine).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for model, case, kind, answers in rows:
        cells = [model, case, kind, *(f"{a.status}, {_size(a)}" for a in answers.values())]
        cells += [*(f"{a.queries} ({engine_questions(a)})" for a in answers.values()), _same(answers)]
        lines.append("| " + " | ".join(cells) + " |")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

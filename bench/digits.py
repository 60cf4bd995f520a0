"""Benchmark: minimum AXps of a scikit-learn digits classifier, as a user exports it (issue 40).

The model (`--model mlp`, the default): scikit-learn's `MLPClassifier((16,), random_state=0,
max_iter=300)` (ReLU, Adam) trained on the bundled 8 × 8 digits scaled to [0, 1] (X / 16: 64
features, 10 classes) — the first 1,400 images of a seeded permutation — exported with skl2onnx
(no ZipMap) and read back with `Network.load`, as a user's file. `--model cnn`: the 2-Conv CNN of
`bench.xbench` (`digits_cnn` here: Conv2d(1, 4, 3) → ReLU → Conv2d(4, 4, 3) → ReLU → Linear(64, 10),
torch, the same split), unrolled exactly. Per test image x (the first `--images` of the held-out rest),
two boxes: the full box [0, 1]^64 and the ball of radius `--radius` (max norm) around x clipped
to it. For each:

* **minimum AXp**: `solve_minimum(net, x, "abductive", box, time_limit=T)`, the call that
  `cardinal.explain(..., method="minimum")` makes (the auto backend: the exact MILP engine, in its
  guarded child process, its answer replayed exactly). *Proved* when it answers OPTIMAL with a
  replayed set within T. Its exact bounds: lower = the size where proved, else the exact lower bound
  the engine reports in its message (`exact lower bound L`: a minimum hitting set of exactly checked
  contrastive sets), else 1 (an AXp of a box where the class can change is never empty); upper =
  the smallest exactly valid AXp known — the engine's set (its column: on a network with one
  hidden ReLU layer the loop first asks about the set a relaxation certifies, `solvers.relaxed_axp`),
  or deletion's below.
* **certificate**: where proved with at least one feature, the witness-hitting certificate of
  "no AXp of size − 1" (`solve_minimum(..., proof=…)`, written under `--work`), checked by
  `cardinal.checker.check`: "accepted", or why there is none.
* **deletion**: the subset-minimal AXp of `solvers.deletion` (sensitivity order, each step decided
  by the exact set oracle), its size and seconds (its own limit, `--deletion-limit`, default T).

    python -m bench.digits [--model mlp|cnn] [--images 20] [--time-limit 60] [--deletion-limit 60]
                           [--radius 0.1] [--out bench-results/digits.md]

(`--out bench/results/digits.md` refreshes the table kept in the repository.)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from cardinal.solvers.base import solve_minimum
from cardinal.solvers.deletion import SUBSET_MINIMAL, deletion
from cardinal.solvers.oracle import SetOracle

from bench import Parser, check_out
from bench.greedy import machine
from cardinal.checker import check
from cardinal.domain import Domain
from cardinal.io import write_atomic
from cardinal.network import Network
from cardinal.problem import Problem, Status

_LOWER = re.compile(r"exact lower bound (\d+)")
_CERTIFICATE = re.compile(r"certificate: (\S+\.json)")


def digits_model(path: Path) -> tuple[Network, np.ndarray, np.ndarray, float]:
    """Train the MLP (module docstring), write it to `path` with skl2onnx, read it back: (network,
    test images X [m, 64], their labels [m], test accuracy of the network read back)."""
    from skl2onnx import to_onnx
    from sklearn.datasets import load_digits
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier

    digits = load_digits()
    X, y = digits.data / 16.0, digits.target
    order = np.random.default_rng(0).permutation(len(X))
    train, test = order[:1400], order[1400:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = MLPClassifier((16,), random_state=0, max_iter=300).fit(X[train], y[train])
    onnx_model = to_onnx(model, X[:1].astype(np.float32), options={id(model): {"zipmap": False}})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(onnx_model.SerializeToString())
    net = Network.load(path)
    accuracy = float((net.forward(X[test]).numpy().argmax(1) == y[test]).mean())
    return net, X[test], y[test], accuracy


def digits_cnn(path: Path) -> tuple[Network, np.ndarray]:
    """The 2-Conv CNN of `bench.xbench` (Conv2d(1, 4, 3) → ReLU → Conv2d(4, 4, 3) → ReLU →
    Linear(64, 10)) trained on the first 1,400 digits of a seeded permutation (the split of
    `digits_model`), written to `path` and read back: (network, test images [m, 64])."""
    import torch
    from sklearn.datasets import load_digits
    from torch import nn

    from bench.verix import fit_rounded
    from cardinal.formats.torch_io import torch_bytes

    digits = load_digits()
    X, y = digits.data / 16.0, digits.target
    order = np.random.default_rng(0).permutation(len(X))
    train, test = order[:1400], order[1400:]
    torch.manual_seed(5)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # seeded and repeatable; the machine is shared
    try:
        layers = (nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(64, 10))
        model = nn.Sequential(*layers).double()
        fit_rounded(model, torch.tensor(X[train]).reshape(-1, 1, 8, 8), torch.tensor(y[train], dtype=torch.long))
    finally:
        torch.set_num_threads(threads)
    write_atomic(path, torch_bytes(model))
    return Network.load(path, input_shape=(1, 8, 8)), X[test]


def cnn_model(path: Path) -> tuple[Network, np.ndarray, np.ndarray, float]:
    """The 2-Conv CNN (`digits_cnn`), read back from `path` and unrolled exactly: (network, test
    images X [m, 64], their labels [m], test accuracy)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    order = np.random.default_rng(0).permutation(len(digits.data))
    net, X = digits_cnn(path)
    y = digits.target[order[1400:]]
    accuracy = float((net.forward(X).numpy().argmax(1) == y).mean())
    return net, X, y, accuracy


MODELS = {  # --model: (what the table's title says, the builder, the model file's name)
    "mlp": ("a scikit-learn digits MLP (64 → 16 → 10, skl2onnx)", digits_model, "digits_mlp16.onnx"),
    "cnn": ("a digits CNN with two Conv layers (64 → 4×6×6 → 4×4×4 → 10, unrolled)", cnn_model, "digits_cnn.pt"),
}


def run_box(net: Network, x: np.ndarray, box: Domain, time_limit: float, deletion_limit: float, proofs: Path) -> dict:
    """The minimum AXp's outcome and bounds, and deletion's answer, on one box (module docstring)."""
    problem = Problem.make(net, x, "abductive", box)
    started = time.perf_counter()
    with SetOracle() as oracle:
        found = deletion(problem, oracle, deletion_limit)
    deletion_seconds = time.perf_counter() - started
    subset_minimal = found.features if found.status == SUBSET_MINIMAL else None
    started = time.perf_counter()
    outcome = solve_minimum(net, x, "abductive", box, time_limit=time_limit, proof=proofs)
    seconds = time.perf_counter() - started
    proved = outcome.status == Status.OPTIMAL and outcome.exact and outcome.replayed and outcome.solution is not None
    valid = outcome.solution if outcome.status in (Status.OPTIMAL, Status.FEASIBLE) and outcome.replayed else None
    uppers = [len(s) for s in (valid, subset_minimal) if s is not None]
    if proved:
        lower = len(outcome.solution)
    else:
        reported = [int(m) for m in _LOWER.findall(outcome.message)]
        lower = max(reported, default=1 if subset_minimal else 0)
    return {
        "status": outcome.status.value,
        "proved": proved,
        "lower": lower,
        "upper": min(uppers, default=problem.n),
        "engine": None if valid is None else len(valid),
        "certificate": _certificate(net, outcome.message) if proved and outcome.solution else "—",
        "seconds": seconds,
        "deletion": None if subset_minimal is None else len(subset_minimal),
        "deletion_seconds": deletion_seconds,
        "message": outcome.message,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = Parser(prog="python -m bench.digits", description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", "--inputs", type=int, default=20, help="test images to explain (default 20)")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per minimum AXp (default 60)")
    parser.add_argument("--deletion-limit", type=float, help="seconds per deletion (default: the time limit)")
    parser.add_argument("--radius", type=float, default=0.1, help="radius of the ball (default 0.1)")
    parser.add_argument("--model", choices=sorted(MODELS), default="mlp", help="the MLP above (default) or the 2-Conv CNN")
    parser.add_argument("--work", default="bench-results/digits", help="where the model file goes (not committed)")
    parser.add_argument("--out", default="bench-results/digits.md", help="results table (bench/results/digits.md to refresh)")
    args = parser.parse_args(argv)
    check_out(parser, args.out)
    _, build, filename = MODELS[args.model]
    net, X, _, accuracy = build(Path(args.work) / filename)
    print(f"model: widths {net.widths}, test accuracy {accuracy:.3f}", file=sys.stderr)
    load = os.getloadavg()[0]
    rows = []
    deletion_limit = args.time_limit if args.deletion_limit is None else args.deletion_limit
    for index in range(args.images):
        x, cube = X[index], Domain.unit(net.n_inputs)
        for name, box in (("full box", cube), (f"radius {args.radius:g}", cube.ball(x, args.radius))):
            row = run_box(net, x, box, args.time_limit, deletion_limit, Path(args.work) / "proofs")
            rows.append((index, name, row))
            print(
                f"image {index}, {name}: {_bounds(row)} ({row['status']}, {row['seconds']:.1f} s, engine "
                f"{_size(row['engine'])}); deletion {_size(row['deletion'])} ({row['deletion_seconds']:.1f} s); {row['message']}",
                file=sys.stderr,
                flush=True,
            )
    write_table(Path(args.out), rows, args, deletion_limit, accuracy, (load, os.getloadavg()[0]))


def _bounds(row: dict) -> str:
    return str(row["lower"]) if row["proved"] else f"[{row['lower']}, {row['upper']}]"


def _certificate(net: Network, message: str) -> str:
    """The checker's verdict on the certificate the outcome's message names, or why there is none."""
    if (named := _CERTIFICATE.search(message)) is None:
        return message[message.find("no certificate") :] or "none"
    report = check(json.loads(Path(named.group(1)).read_text()), net.to_json())
    return "accepted" if report.accepted else f"rejected: {report.message}"


def _size(size: int | None) -> str:
    return "—" if size is None else str(size)


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_table(
    path: Path, rows: list[tuple[int, str, dict]], args: argparse.Namespace, deletion_limit: float, accuracy: float, load: tuple
) -> None:
    """The results table (one row per image and box) with the totals, the machine and the command."""
    lines = [
        f"# Minimum AXps of {MODELS[args.model][0]}",
        "",
        f"Run {datetime.date.today().isoformat()} at commit {_commit()} with `python -m bench.digits --model {args.model} "
        f"--images {args.images} "
        f"--time-limit {args.time_limit:g} --deletion-limit {deletion_limit:g} --radius {args.radius:g}` on {machine()}; load "
        f"average {load[0]:.2f} at the start, {load[1]:.2f} at the end (the machine shared: timings under load). Test accuracy "
        f"{accuracy:.3f}. A size is exact where one number is shown, else [exact lower bound, size of an exactly valid AXp]; "
        "s: the whole call, the certificate's search included; engine: the size of the engine's own AXp (replayed "
        "exactly); deletion's answer is subset-minimal (exactly checked).",
        "",
        "| image | box | min AXp | proved | s | outcome | engine | certificate | deletion | deletion s |",
        "|---:|:--|---:|:--|---:|:--|---:|:--|---:|---:|",
    ]
    for index, name, row in rows:
        lines.append(
            f"| {index} | {name} | {_bounds(row)} | {'yes' if row['proved'] else 'no'} | {row['seconds']:.1f} | "
            f"{row['status']} | {_size(row['engine'])} | {row['certificate']} | {_size(row['deletion'])} | "
            f"{row['deletion_seconds']:.1f} |"
        )
    lines.append("")
    for name in dict.fromkeys(name for _, name, _ in rows):
        chosen = [row for _, box, row in rows if box == name]
        proved = [row for row in chosen if row["proved"]]
        ratios = [row["deletion"] / row["lower"] for row in proved if row["deletion"] and row["lower"]]
        lines.append(
            f"- {name}: proved {len(proved)} of {len(chosen)} within {args.time_limit:g} s (median "
            f"{statistics.median(row['seconds'] for row in chosen):.1f} s); deletion median "
            f"{statistics.median(row['deletion_seconds'] for row in chosen):.1f} s"
            + (f"; deletion / minimum where proved: median {statistics.median(ratios):.2f}" if ratios else "")
            + "."
        )
    lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()

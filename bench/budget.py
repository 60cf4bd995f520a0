"""Benchmark: wall time of `cardinal.explain` against its `time_limit`, the call's budget (issue 51).

Each call is `cardinal.explain(net, x, "abductive", time_limit=T)` with `prove` (the default) on
a digits classifier, a fresh call each time (its solver processes start inside the budget and
end before it returns), timed on the wall clock and compared with the contract: T plus
max(2 s, 10 % of T). The models, as in the issue: scikit-learn's `MLPClassifier((32,),
random_state=0)` on `load_digits().data / 16` (64 features, 10 classes), and a torch
Conv2d(1, 4, 3) → ReLU → Flatten → Linear(144, 10) trained briefly (seed 0) on the same images;
x: the first `--images` images. The table gives each call's wall seconds, whether it met the
contract, its verdict, the explainer's set (deletion's: its size and check, "stopped" where the
budget stopped it), the answer's size and exact lower bound, and why it has no certificate.

A second table: the first answer in a fresh interpreter — `python -c` importing cardinal and
torch, then timing `cardinal.explain("examples/design.json", [1, 1, 1], "abductive")` alone (the
target: ≤ 0.5 s; a 3-feature network is answered in process, no solver process started).

    python -m bench.budget [--limits 3,10] [--images 2] [--out bench-results/budget.md]
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tabulate import tabulate

from bench import bench_parser, parse
from bench.greedy import machine
from cardinal.io import write_atomic

CHECKOUT = Path(__file__).resolve().parents[1]
FIRST = (
    "import time, torch, cardinal, cardinal.verify.explanation\n"
    "t = time.perf_counter()\n"
    "e = cardinal.explain('examples/design.json', [1, 1, 1], 'abductive')\n"
    "print(time.perf_counter() - t, e.proved)\n"
)
HEADERS = ["model", "T s", "image", "wall s", "≤ T + max(2, 10%)", "verdict", "explainer's set", "size", "lower", "proved",
           "certificate"]


def models() -> dict[str, tuple[object, np.ndarray]]:
    """The MLP and the CNN of the module docstring (as `Network`s) and the images X [B, 64]."""
    import torch
    from sklearn.datasets import load_digits
    from sklearn.neural_network import MLPClassifier

    from cardinal.network import Network

    digits = load_digits()
    X, y = digits.data / 16.0, digits.target
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mlp = MLPClassifier((32,), random_state=0).fit(X, y)
    layers = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10)).double()
    with torch.no_grad():
        for linear, weight, bias in zip((layers[0], layers[2]), mlp.coefs_, mlp.intercepts_, strict=True):
            linear.weight.copy_(torch.tensor(weight.T))
            linear.bias.copy_(torch.tensor(bias))
    torch.manual_seed(0)
    cnn = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(144, 10))
    images, labels = torch.tensor(X, dtype=torch.float32).reshape(-1, 1, 8, 8), torch.tensor(y)
    optimiser = torch.optim.Adam(cnn.parameters(), lr=0.01)
    for _ in range(60):
        optimiser.zero_grad()
        torch.nn.functional.cross_entropy(cnn(images), labels).backward()
        optimiser.step()
    return {"mlp": (Network.from_torch(layers), X), "cnn": (Network.from_torch(cnn.double(), (1, 8, 8)), X)}


def call(net: object, x: np.ndarray, limit: float) -> list[object]:
    """One budgeted call: [wall s, met, verdict, the explainer's set (size, check), size, lower, proved, certificate]."""
    import cardinal

    started = time.perf_counter()
    e = cardinal.explain(net, x, "abductive", time_limit=limit)
    wall = time.perf_counter() - started
    met = "yes" if wall <= limit + max(2.0, 0.1 * limit) else "NO"
    size = None if e.features is None else len(e.features)
    reason = "accepted" if e.certificate is not None and e.certificate.accepted else e.certificate_reason
    found = e.record.get("greedy") or {}
    explainer = f"{found.get('size')} ({e.record.get('greedy_check')})"
    return [f"{wall:.2f}", met, e.verdict, explainer, size, e.lower, e.proved, reason[:60]]


def first_answer() -> str:
    """Seconds of the first `cardinal.explain` call in a fresh interpreter, imports aside."""
    done = subprocess.run([sys.executable, "-c", FIRST], cwd=CHECKOUT, capture_output=True, text=True, check=True)
    seconds, proved = done.stdout.split()
    return f"{float(seconds):.3f} (proved: {proved})"


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__file__, __doc__)
    parser.add_argument("--limits", default="3,10", help="comma-separated time limits in seconds (default 3,10)")
    parser.add_argument("--images", type=int, default=2, help="images per model and limit (default 2)")
    args = parse(parser, argv)
    limits = [float(value) for value in args.limits.split(",")]
    firsts = [first_answer() for _ in range(3)]
    print("first answer, fresh interpreter:", firsts, flush=True)
    rows: list[list[object]] = []
    for name, (net, X) in models().items():
        for limit in limits:
            for image in range(args.images):
                rows.append([name, f"{limit:g}", image, *call(net, X[image], limit)])
                print(" | ".join(map(str, rows[-1])), flush=True)
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    text = "\n".join([
        "# The call's budget: wall time against time_limit",
        "",
        f"Run {datetime.date.today().isoformat()} with `python -m bench.budget --limits {args.limits} --images "
        f"{args.images}` on {machine()}; load average {load} at the end (a machine shared with other work).",
        "",
        tabulate(rows, headers=HEADERS, tablefmt="github"),
        "",
        "First answer in a fresh interpreter (`cardinal.explain` on examples/design.json, imports aside; target "
        f"≤ 0.5 s), three runs: {', '.join(firsts)} s.",
        "",
    ])
    write_atomic(args.out, text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""Benchmark: wall time of `cardinal.explain` against its `time_limit`, the call's budget (issue 51).

Each call is `cardinal.explain(net, x, kind, time_limit=T)` (kind: abductive and/or contrastive,
`--kinds`) with `prove` (the default) on a digits classifier, a fresh call each time (its solver
processes start inside the budget and end before it returns), timed on the wall clock and compared with the contract: T plus
max(2 s, 10 % of T). The models, as in the issue: scikit-learn's `MLPClassifier((32,),
random_state=0)` on `load_digits().data / 16` (64 features, 10 classes), and a torch
Conv2d(1, 4, 3) → ReLU → Flatten → Linear(144, 10) trained briefly (seed 0) on the same images.
Held out: both models are trained on the training part of a fixed stratified split of the 1,797
digits (`train_test_split(test_size=0.25, stratify=y, random_state=0)`: 1,347 training, 450 test
images), and x runs over `--images` test images drawn without replacement by `--seed` — images
neither model saw. The table gives each call's wall seconds, whether it met the contract, its
verdict, the explainer's set (deletion's: its size and check, "stopped" where the budget stopped
it), the answer's size (len(features)), its exact bounds lower and upper, proved, certified (a
certificate the checker accepted when it was made, `e.certificate.accepted`), the re-check
(`e.certificate.check()`: the checker run again on it, and its seconds, outside the call's wall
time), and why it has no certificate. A summary line per model and kind: calls, within the
budget, proved, proved with an accepted certificate (issue 51's target: ≥ 99 % of proved
answers), median wall / T.

A second table: the first answer in a fresh interpreter — `python -c` importing cardinal and
torch, then timing `cardinal.explain("examples/design.json", [1, 1, 1], "abductive")` alone (the
target: ≤ 0.5 s; a 3-feature network is answered in process, no solver process started).

    python -m bench.budget [--kinds abductive,contrastive] [--limits 3,10] [--images 2] [--seed 0]
                           [--out bench-results/budget.md]
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
from statistics import median

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
KINDS = ("abductive", "contrastive")
SPLIT = {"test_size": 0.25, "random_state": 0}  # the held-out split, fixed (stratified by label); --seed draws from its test part
HEADERS = ["model", "kind", "T s", "image", "wall s", "≤ T + max(2, 10%)", "verdict", "explainer's set", "size", "lower",
           "upper", "proved", "certified", "re-check (s)", "certificate"]
SUMMARY = ["model", "kind", "calls", "within T + max(2, 10%)", "proved", "proved, certificate accepted", "≥ 99 %",
           "median wall / T"]


def split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The digits (data / 16) split once, fixed: X_train, y_train, X_test, y_test, and the test
    images' indices in `load_digits()` (disjoint from the training ones)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    X, y = digits.data / 16.0, digits.target
    train, test = train_test_split(np.arange(len(y)), stratify=y, **SPLIT)
    return X[train], y[train], X[test], y[test], test


def draw(n_test: int, images: int, seed: int) -> list[int]:
    """`images` positions in the test split (of `n_test`), drawn without replacement by `seed`."""
    if not 0 < images <= n_test:
        raise ValueError(f"--images must be in 1..{n_test}, not {images}")
    return sorted(int(i) for i in np.random.default_rng(seed).choice(n_test, size=images, replace=False))


def models(X: np.ndarray, y: np.ndarray) -> dict[str, object]:
    """The MLP and the CNN of the module docstring, trained on X [B, 64], y (as `Network`s)."""
    import torch
    from sklearn.neural_network import MLPClassifier

    from cardinal.network import Network

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
    return {"mlp": Network.from_torch(layers), "cnn": Network.from_torch(cnn.double(), (1, 8, 8))}


def call(net: object, x: np.ndarray, kind: str, limit: float) -> dict[str, object]:
    """One budgeted call, its answer as the table's columns (a dict keyed by HEADERS' names from
    "wall s" on) and, for the summary, `wall`, `met`, `proved`, `certified` (accepted when made)."""
    import cardinal

    started = time.perf_counter()
    e = cardinal.explain(net, x, kind, time_limit=limit)
    wall = time.perf_counter() - started
    met = wall <= limit + max(2.0, 0.1 * limit)
    size = None if e.features is None else len(e.features)
    certified = e.certificate is not None and e.certificate.accepted
    recheck = ""
    if e.certificate is not None:
        checking = time.perf_counter()
        again = e.certificate.check()
        recheck = f"{'accepted' if again else 'REJECTED'} ({time.perf_counter() - checking:.2f})"
    reason = "" if e.certificate is not None else e.certificate_reason
    found = e.record.get("greedy") or {}
    explainer = f"{found.get('size')} ({e.record.get('greedy_check')})"
    return {
        "wall s": f"{wall:.2f}", "≤ T + max(2, 10%)": "yes" if met else "NO", "verdict": e.verdict,
        "explainer's set": explainer, "size": size, "lower": e.lower, "upper": e.upper, "proved": e.proved,
        "certified": certified, "re-check (s)": recheck, "certificate": reason[:60],
        "wall": wall, "met": met, "proved?": bool(e.proved), "certified?": certified, "T": limit,
    }


def summary(rows: Sequence[dict[str, object]]) -> list[list[object]]:
    """One line per model and kind (in the rows' order): calls, within the budget, proved, proved
    with an accepted certificate (count and share of the proved; ≥ 99 % the target), median wall / T."""
    groups: dict[tuple[object, object], list[dict[str, object]]] = {}
    for row in rows:
        groups.setdefault((row["model"], row["kind"]), []).append(row)
    lines = []
    for (model, kind), group in groups.items():
        proved = [row for row in group if row["proved?"]]
        certified = sum(1 for row in proved if row["certified?"])
        share = f"{certified}/{len(proved)} ({100 * certified / len(proved):.0f} %)" if proved else "0/0"
        target = "—" if not proved else ("yes" if certified >= 0.99 * len(proved) else "NO")
        ratio = median(float(row["wall"]) / float(row["T"]) for row in group)
        lines.append([model, kind, len(group), f"{sum(1 for row in group if row['met'])}/{len(group)}",
                      f"{len(proved)}/{len(group)}", share, target, f"{ratio:.2f}"])
    return lines


def first_answer() -> str:
    """Seconds of the first `cardinal.explain` call in a fresh interpreter, imports aside."""
    done = subprocess.run([sys.executable, "-c", FIRST], cwd=CHECKOUT, capture_output=True, text=True, check=True)
    seconds, proved = done.stdout.split()
    return f"{float(seconds):.3f} (proved: {proved})"


def kinds_of(text: str) -> list[str]:
    """--kinds: comma-separated, each abductive or contrastive."""
    kinds = [kind.strip() for kind in text.split(",") if kind.strip()]
    wrong = [kind for kind in kinds if kind not in KINDS]
    if not kinds or wrong:
        raise ValueError(f"--kinds takes {' and/or '.join(KINDS)}, comma-separated, not {text!r}")
    return kinds


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__file__, __doc__)
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated kinds (default: %(default)s)")
    parser.add_argument("--limits", default="3,10", help="comma-separated time limits in seconds (default 3,10)")
    parser.add_argument("--images", type=int, default=2, help="held-out test images per model, kind and limit (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="draws the images from the test split (default 0)")
    args = parse(parser, argv)
    try:
        kinds = kinds_of(args.kinds)
        limits = [float(value) for value in args.limits.split(",")]
        X_train, y_train, X_test, _, test_index = split()
        drawn = draw(len(X_test), args.images, args.seed)
    except ValueError as error:
        parser.error(str(error))
    firsts = [first_answer() for _ in range(3)]
    print("first answer, fresh interpreter:", firsts, flush=True)
    rows: list[dict[str, object]] = []
    for name, net in models(X_train, y_train).items():
        for kind in kinds:
            for limit in limits:
                for image in drawn:
                    answer = call(net, X_test[image], kind, limit)
                    rows.append({"model": name, "kind": kind, "T s": f"{limit:g}", "image": int(test_index[image]), **answer})
                    print(" | ".join(str(rows[-1][header]) for header in HEADERS), flush=True)
    lines = summary(rows)
    for line in lines:
        print(" | ".join(map(str, line)), flush=True)
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    text = "\n".join([
        "# The call's budget: wall time against time_limit",
        "",
        f"Run {datetime.date.today().isoformat()} with `python -m bench.budget --kinds {args.kinds} --limits {args.limits} "
        f"--images {args.images} --seed {args.seed}` on {machine()}; load average {load} at the end (a machine shared "
        "with other work).",
        "",
        f"Held out: the models are trained on {len(X_train)} of the 1,797 digits (a fixed stratified split, "
        f"`train_test_split(test_size=0.25, stratify=y, random_state=0)`); the images are {args.images} of the "
        f"{len(X_test)} test ones, drawn by seed {args.seed} (their index in `load_digits()`: "
        f"{', '.join(str(int(test_index[i])) for i in drawn)}). Re-check: `e.certificate.check()` after the call "
        "(its seconds are outside the call's wall time).",
        "",
        tabulate(lines, headers=SUMMARY, tablefmt="github"),
        "",
        tabulate([[row[header] for header in HEADERS] for row in rows], headers=HEADERS, tablefmt="github"),
        "",
        "First answer in a fresh interpreter (`cardinal.explain` on examples/design.json, imports aside; target "
        f"≤ 0.5 s), three runs: {', '.join(firsts)} s.",
        "",
    ])
    write_atomic(args.out, text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""Benchmark: certification time per exact backend vs features, width and depth.

Monotone ReLU networks (random, seeded; `verify.generate.random_network`), inputs uniform in the
unit box, threshold midway around the median output. For each input and kind, greedy's answer
(size g) is certified by one call per backend asking "is there an explanation of size ≤ g − 1?"
— the call `cardinal certify` makes. Three sweeps around the reference network (28 features, two
hidden layers of 32): features 8 → 276, width 8 → 128, depth 1 → 3.

Times are per call, replay included. A call that hits the time limit counts at the limit (so the
median and p90 are lower bounds when there are timeouts; the table shows how many). Inside the
timed loop the backends' verdicts are checked against each other: two decided backends that
disagree stop the run.

    python -m bench.solvers [--networks 3] [--inputs 4] [--time-limit 5] [--solvers gurobi,highs,z3,enumerate]
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from cardinal.solvers.base import available_solvers, get_solver, solve_problem
from cardinal.verify.domain import Domain
from cardinal.verify.generate import median_threshold, random_network
from cardinal.verify.greedy import explain
from cardinal.verify.problem import Problem, Status
from tabulate import tabulate

from bench.greedy import machine

REFERENCE = (28, (32, 32))
SWEEPS = {
    "features": [(n, (32, 32)) for n in (8, 16, 28, 64, 128, 276)],
    "width": [(28, (w, w)) for w in (8, 16, 32, 64, 128)],
    "depth": [(28, (32,) * d) for d in (1, 2, 3)],
}
MAX_FEATURES = {"enumerate": 28}  # beyond this, every call times out


def certify_config(
    n: int, hidden: tuple[int, ...], networks: int, inputs: int, solvers: list[str], time_limit: float
) -> dict[str, list[tuple[float, str]]]:
    """(seconds, status) per backend for `networks` random networks × `inputs` rows × both kinds."""
    results: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for index in range(networks):
        rng = np.random.default_rng([n, len(hidden), hidden[0], index])
        net = random_network(rng, n, hidden, "relu")
        _certify_network(net, rng.random((inputs, n)), solvers, time_limit, results)
    return results


def _certify_network(
    net, X: np.ndarray, solvers: list[str], time_limit: float, results: dict[str, list[tuple[float, str]]]
) -> None:
    n, inputs = net.n_inputs, len(X)
    threshold = median_threshold(net, X)
    domain = Domain.unit(n)
    backends = {name: get_solver(name) for name in solvers if n <= MAX_FEATURES.get(name, n)}
    try:
        for kind in ("contrastive", "abductive"):
            greedy = explain(net, X, kind=kind, domain=domain, threshold=threshold, device="cpu", verify=True)
            for row in range(inputs):
                features = greedy.features(row)
                if not features:
                    continue  # nothing to certify: no CXp at all, or an empty AXp
                problem = Problem.make(net, X[row], kind, domain, threshold)
                verdicts = {}
                for name, backend in backends.items():
                    outcome = solve_problem(backend, problem, len(features) - 1, time_limit)
                    seconds = min(outcome.seconds, time_limit) if outcome.status == Status.TIMEOUT else outcome.seconds
                    results[name].append((seconds, outcome.status.value))
                    if outcome.status == Status.NONE_WITHIN:
                        verdicts[name] = "minimal"
                    elif outcome.status in (Status.OPTIMAL, Status.FEASIBLE) and outcome.replayed:
                        verdicts[name] = "suboptimal"
                if len(set(verdicts.values())) > 1:
                    sys.exit(f"backends disagree on n={n} widths={net.widths} row={row} {kind}: {verdicts}")
    finally:
        for backend in backends.values():
            backend.close()


def _row(sweep: str, n: int, hidden: tuple[int, ...], name: str, calls: list[tuple[float, str]]) -> list:
    times = sorted(seconds for seconds, _ in calls)
    timeouts = sum(status == "timeout" for _, status in calls)
    other = sum(status not in ("none_within", "optimal", "feasible", "timeout") for _, status in calls)
    p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
    return [
        sweep, n, "×".join(map(str, hidden)), name, len(calls),
        f"{statistics.median(times) * 1e3:.1f}", f"{p90 * 1e3:.1f}", f"{times[-1] * 1e3:.1f}", timeouts, other,
    ]  # fmt: skip


def plot(rows: list[list], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(12, 3.4), sharey=True)
    for axis, sweep in zip(axes, SWEEPS, strict=True):
        by_solver: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for row in rows:
            if row[0] == sweep:
                x = {"features": row[1], "width": int(row[2].split("×")[0]), "depth": len(row[2].split("×"))}[sweep]
                by_solver[row[3]].append((x, float(row[5]) / 1e3))
        for name, points in sorted(by_solver.items()):
            points.sort()
            axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
        axis.set(xlabel=sweep, yscale="log", title=f"median certification time vs {sweep}")
        if sweep != "depth":
            axis.set_xscale("log", base=2)
    axes[0].set_ylabel("seconds per call")
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=f"cardinal bench {__name__.rsplit('.', 1)[-1]}", description=__doc__.splitlines()[0])
    parser.add_argument("--networks", type=int, default=3, help="random networks per configuration")
    parser.add_argument("--inputs", type=int, default=4, help="inputs per network (each certified for both kinds)")
    parser.add_argument("--time-limit", type=float, default=5.0)
    parser.add_argument("--solvers", help="comma-separated (default: every installed backend)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "solvers.md"))
    args = parser.parse_args(argv)
    solvers = args.solvers.split(",") if args.solvers else list(available_solvers())
    rows = []
    done: dict[tuple[int, tuple[int, ...]], dict[str, list[tuple[float, str]]]] = {}
    for sweep, configs in SWEEPS.items():
        for n, hidden in configs:
            if (n, hidden) not in done:
                done[n, hidden] = certify_config(n, hidden, args.networks, args.inputs, solvers, args.time_limit)
            for name, calls in sorted(done[n, hidden].items()):
                rows.append(_row(sweep, n, hidden, name, calls))
                print(" | ".join(map(str, rows[-1])), flush=True)
    out = Path(args.out)
    figure = out.with_suffix(".png")
    plot(rows, figure)
    headers = ["sweep", "n", "hidden", "solver", "calls", "median ms", "p90 ms", "max ms", "timeouts", "other"]
    text = "\n".join(
        [
            "# Certification time per exact backend",
            "",
            f"Run {datetime.date.today().isoformat()} with "
            f"`python -m bench.solvers --networks {args.networks} --inputs {args.inputs} --time-limit {args.time_limit:g}` "
            f"on {machine()}. Gurobi runs on one thread.",
            "",
            "Monotone ReLU networks, inputs uniform in [0,1]^n, threshold midway around the median output; each call "
            "certifies greedy's answer of size g by asking for an explanation of size ≤ g − 1 (both kinds; inputs "
            "whose greedy answer is empty or absent need no call). Timeouts count at the limit. `other` counts "
            "unsupported / size_limit / error / refuted answers. "
            + ", ".join(f"{name} runs up to n = {limit}" for name, limit in MAX_FEATURES.items())
            + ".",
            "",
            tabulate(rows, headers=headers, tablefmt="github"),
            "",
            f"![certification time]({figure.name})",
            "",
        ]
    )
    out.write_text(text)
    print(f"wrote {out} and {figure}")


if __name__ == "__main__":
    main()

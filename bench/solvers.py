"""Benchmark: the exact backends on certify's question (time vs features, width and depth) and
on a held-out query mix (`bench/heldout.py`), with PAR-2 and the virtual best solver.

**Certification sweeps.** Monotone ReLU networks (random, seeded;
`verify.generate.random_network`), inputs uniform in the unit box, threshold midway around the
median output. For each input and kind, greedy's answer (size g) is certified by one call per
backend asking "is there an explanation of size ≤ g − 1?" — the call `cardinal certify` makes.
Three sweeps around the reference network (28 features, two hidden layers of 32): features
8 → 276, width 8 → 128, depth 1 → 3.

Times are per call, replay included, every backend on one thread (torch's and numpy's BLAS too). A call that
hits the time limit counts at the limit (so the median and p90 are lower bounds when there are
timeouts; the table shows how many). Inside the timed loop the answers are checked against
the exact evidence (a set replayed exactly, an exact backend's "nothing smaller": z3, cvc5,
enumerate): exact evidence that conflicts stops the run (a bug); a float answer it contradicts
counts in the column `wrong`. PAR-2 per backend: the mean time per call, an unanswered or wrong
call at twice the limit. The virtual best solver (`VBS` rows): per call the fastest answer among
cardinal's backends (the peer apart).

**The held-out mix** (`bench/heldout.py`): minimum CXps and AXps from scratch and certify's
question, at thresholds 50/80/95% of the way to the counterpoint, on monotone and non-monotone
ReLU 32 × 32 networks of 28 and 64 features, every backend through `solve_minimum`'s defaults
(guarded, replayed): PAR-2 and the VBS per family and query, the front door of issue 30 (the
minimum CXp at 80% on 28 features against the peer), and a cactus plot.

**The peer** (column `gurobi-ml`, when `pip install 'cardinal[peer]'` has installed
gurobi-machinelearning): the same question put to the MILP a user builds with a standard encoder
library — gurobi-ml's `add_predictor_constr` on the torch `nn.Sequential`, with the library's and
Gurobi's defaults (no bounds, no tightening; one thread and the time limit, as for every backend),
plus the cardinality selector and the monotone shortcut (docs/design.md §4); on a non-monotone network a
CXp's input is free in the box where s_i = 1 (an AXp there has no single-MILP form). The library
encodes each ReLU as Gurobi's max general constraint on unbounded hidden variables; Gurobi's
presolve derives what bounds it can. Per call, timed from building to the exact replay of its
answer:

    model = gp.Model(env=env); model.Params.Threads = 1; model.Params.TimeLimit = time_limit
    s = model.addMVar(n, vtype=GRB.BINARY)
    x = model.addMVar((1, n), lb=np.minimum(base, target), ub=np.maximum(base, target))
    model.addConstr(x[0] == base + (target - base) * s)
    y = model.addMVar((1, 1), lb=-GRB.INFINITY)
    add_predictor_constr(model, torch_model, x, y)        # Linear + ReLU layers, the library's encoding
    model.addConstr(y[0, 0] >= t + 1e-6 if goal == 1 else y[0, 0] <= t)
    model.addConstr(s.sum() <= g - 1)                      # certify's question only
    model.setObjective(s.sum(), GRB.MINIMIZE)
    model.optimize()

Its statuses map as cardinal's MILPs' do (optimal, none_within or none_exists from INFEASIBLE,
feasible or timeout at the limit); its sets are replayed exactly (`refuted` when they fail), and a
verdict that contradicts an exact backend's is counted in the column `wrong` instead of stopping
the run. Gurobi's pip licence caps the model size: such a call is `size_limit` (the library
builds Gurobi models only, so there is no fallback).

Besides the tables and the median plot, cactus plots (`*_cactus.png`, `*_heldout_cactus.png`):
for each backend, its calls that answered the question sorted by time, the k-th at the time of
the k-th fastest — instances solved within a time budget.

Configurations (and held-out families) run one at a time by default, so that each call is timed
alone on the machine (the sweeps took about 21 minutes on the lead's 2-core VM with four
backends); `--jobs 2` runs two at once, one process each, in about half the time, with timings
that contend for the machine's caches and memory.

    python -m bench.solvers [--networks 3] [--inputs 4] [--time-limit 5] [--solvers gurobi,highs,z3,enumerate]
                            [--no-peer] [--sweeps features,width,depth|none]
                            [--families monotone-28,monotone-64,signed-28,signed-64|none] [--jobs 1]
                            [--out bench-results/solvers.md]

(`--out bench/results/solvers.md` refreshes the tables and figures kept in the repository.)
"""

from __future__ import annotations

import dataclasses
import datetime
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch
from cardinal.solvers.base import Solver, available_solvers, get_solver, solve_problem
from cardinal.verify.generate import median_threshold, random_network
from tabulate import tabulate
from threadpoolctl import threadpool_limits

from bench import Parser
from bench.greedy import machine
from bench.peer import PEER, Peer, peer_available, peer_model
from cardinal.domain import Domain
from cardinal.errors import InputError
from cardinal.greedy import explain
from cardinal.io import write_atomic, write_figure
from cardinal.network import Network
from cardinal.problem import Outcome, Problem, Status
from cardinal.validate import output_file

REFERENCE = (28, (32, 32))
SWEEPS = {
    "features": [(n, (32, 32)) for n in (8, 16, 28, 64, 128, 276)],
    "width": [(28, (w, w)) for w in (8, 16, 32, 64, 128)],
    "depth": [(28, (32,) * d) for d in (1, 2, 3)],
}
MAX_FEATURES = {"enumerate": 20}  # as in campaigns: at 28 features half its calls timed out (and took 11 of the run's 38 min)
ANSWERED = ("none_within", "optimal", "feasible")  # the question is decided (a feasible set was replayed)
Calls = dict[str, list[tuple[float, str, bool]]]  # backend → (seconds, status, wrong) per call


def run_config(
    config: tuple[int, tuple[int, ...]], networks: int, inputs: int, solvers: list[str], with_peer: bool, time_limit: float
) -> Calls:
    """`certify_config` in a worker process: one thread (torch's and numpy's BLAS), its own peer environment."""
    torch.set_num_threads(1)  # every backend on one thread, as Gurobi (and campaign workers) run
    peer = Peer() if with_peer else None
    try:
        with threadpool_limits(1):
            return dict(certify_config(*config, networks, inputs, solvers, peer, time_limit))
    finally:
        if peer is not None:
            peer.close()


def certify_config(
    n: int, hidden: tuple[int, ...], networks: int, inputs: int, solvers: list[str], peer: Peer | None, time_limit: float
) -> Calls:
    """(seconds, status, wrong) per backend (and the peer) for `networks` random networks ×
    `inputs` rows × both kinds."""
    results: Calls = defaultdict(list)
    for index in range(networks):
        rng = np.random.default_rng([n, len(hidden), hidden[0], index])
        net = random_network(rng, n, hidden, "relu")
        _certify_network(net, rng.random((inputs, n)), solvers, peer, time_limit, results)
    return results


def _certify_network(
    net: Network, X: np.ndarray, solvers: list[str], peer: Peer | None, time_limit: float, results: Calls
) -> None:
    n, inputs = net.n_inputs, len(X)
    threshold = median_threshold(net, X)
    domain = Domain.unit(n)
    backends = {name: get_solver(name) for name in solvers if n <= MAX_FEATURES.get(name, n)}
    torch_model = peer_model(net) if peer is not None else None
    try:
        for kind in ("contrastive", "abductive"):
            greedy = explain(net, X, kind=kind, domain=domain, threshold=threshold, device="cpu", verify=True)
            for row in range(inputs):
                features = greedy.features(row)
                if not features:
                    continue  # nothing to certify: no CXp at all, or an empty AXp
                problem = Problem.make(net, X[row], kind, domain, threshold)
                at_most = len(features) - 1
                outcomes = {name: _timed(backend, problem, at_most, time_limit) for name, backend in backends.items()}
                verdicts = {name: _verdict(outcome) for name, outcome in outcomes.items() if _verdict(outcome)}
                # exact evidence: a replayed smaller set (any backend), an exact backend's "nothing smaller"
                evidence = {verdict for name, verdict in verdicts.items() if verdict == "suboptimal" or outcomes[name].exact}
                if len(evidence) > 1:
                    sys.exit(f"exact evidence conflicts on n={n} widths={net.widths} row={row} {kind}: {verdicts}")
                if peer is not None:
                    outcomes[PEER] = peer.solve(torch_model, problem, at_most, time_limit)
                for name, outcome in outcomes.items():
                    seconds = min(outcome.seconds, time_limit) if outcome.status == Status.TIMEOUT else outcome.seconds
                    wrong = outcome.status == Status.REFUTED or bool(_verdict(outcome) and evidence - {_verdict(outcome)})
                    results[name].append((seconds, outcome.status.value, wrong))
    finally:
        for backend in backends.values():
            backend.close()


def _timed(backend: Solver, problem: Problem, at_most: int, time_limit: float) -> Outcome:
    """One call, its `seconds` from the call to the end of the exact replay of its answer (as the peer's)."""
    started = time.perf_counter()
    outcome = solve_problem(backend, problem, at_most, time_limit)
    return dataclasses.replace(outcome, seconds=time.perf_counter() - started)


def _verdict(outcome: Outcome) -> str | None:
    """What a call says about greedy's answer: minimal, suboptimal (a replayed smaller set), or None."""
    if outcome.status == Status.NONE_WITHIN:
        return "minimal"
    if outcome.status in (Status.OPTIMAL, Status.FEASIBLE) and outcome.replayed:
        return "suboptimal"
    return None


def _row(sweep: str, n: int, hidden: tuple[int, ...], name: str, calls: list[tuple[float, str, bool]], time_limit: float) -> list:
    times = sorted(seconds for seconds, _, _ in calls)
    timeouts = sum(status == "timeout" for _, status, _ in calls)
    other = sum(status not in ("none_within", "optimal", "feasible", "timeout") for _, status, _ in calls)
    p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
    penalised = statistics.fmean(seconds if _answered(status, wrong) else 2 * time_limit for seconds, status, wrong in calls)
    return [
        sweep, n, "×".join(map(str, hidden)), name, len(calls),
        f"{statistics.median(times) * 1e3:.1f}", f"{p90 * 1e3:.1f}", f"{times[-1] * 1e3:.1f}", timeouts, other,
        sum(wrong for _, _, wrong in calls), f"{penalised:.3f}",
    ]  # fmt: skip


def _answered(status: str, wrong: bool) -> bool:
    """The call answered the question, and no exact evidence contradicts it."""
    return status in ANSWERED and not wrong


def virtual_best(calls: Calls, time_limit: float) -> list[tuple[float, str, bool]]:
    """Per certification call of a configuration, the fastest answer among cardinal's backends
    (the peer apart), or a timeout at the limit when none answered. Every backend of a
    configuration made the same calls, in the same order."""
    runs = [runs for name, runs in calls.items() if name != PEER]
    best = []
    for answers in zip(*runs, strict=True):
        times = [seconds for seconds, status, wrong in answers if _answered(status, wrong)]
        best.append((min(times), "none_within", False) if times else (time_limit, "timeout", False))
    return best


def _colours(names: set[str]) -> dict[str, str]:
    """One colour per backend, the same in every figure (the peer's is grey)."""
    ordered = sorted(name for name in names if name != PEER)
    colours = {name: f"C{index}" for index, name in enumerate(ordered)}
    return colours | ({PEER: "0.45"} if PEER in names else {})


def cactus(done: dict, time_limit: float, path: Path, calls: str = "certification calls") -> None:
    """Instances solved vs time per backend, over every configuration run (module docstring):
    `done` maps each configuration to its `Calls`; `calls` names them on the axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    solved: dict[str, list[float]] = defaultdict(list)
    total: dict[str, int] = defaultdict(int)
    for configuration in done.values():
        for name, runs in configuration.items():
            total[name] += len(runs)
            solved[name] += [seconds for seconds, status, wrong in runs if _answered(status, wrong)]
    colours = _colours(set(total))
    figure, axis = plt.subplots(figsize=(6.4, 4.2))
    for name in sorted(total):
        times = sorted(solved[name])
        label = f"{name} ({len(times)}/{total[name]})"
        style = "--" if name == PEER else "-"
        axis.step(range(1, len(times) + 1), times, where="post", linestyle=style, color=colours[name], label=label)
    axis.axhline(time_limit, color="grey", linestyle=":", linewidth=1, label=f"time limit ({time_limit:g} s)")
    axis.set(xlabel=f"{calls} answered (every configuration run)", ylabel="seconds per call", yscale="log")
    axis.set_title("cactus plot: the k-th fastest answered call per backend")
    axis.legend(fontsize=8, title="backend (answered / calls)", title_fontsize=8)
    axis.grid(True, which="both", alpha=0.3)
    figure.tight_layout()
    write_figure(path, figure, 110, root=path.parent)
    plt.close(figure)


def plot(rows: list[list], path: Path, sweeps: list[str], calls: int) -> None:
    """Median time per call vs each sweep's parameter, one line per backend (`calls` per point)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    colours = _colours({row[3] for row in rows})
    held = {"features": "hidden 32×32", "width": "28 features, 2 hidden layers", "depth": "28 features, width 32"}
    figure, axes = plt.subplots(1, len(sweeps), figsize=(4.2 * len(sweeps), 3.6), sharey=True, squeeze=False)
    for axis, sweep in zip(axes[0], sweeps, strict=True):
        by_solver: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for row in rows:
            if row[0] == sweep:
                x = {"features": row[1], "width": int(row[2].split("×")[0]), "depth": len(row[2].split("×"))}[sweep]
                by_solver[row[3]].append((x, float(row[5]) / 1e3))
        for name, points in sorted(by_solver.items()):
            points.sort()
            style = "--" if name == PEER else "-"
            xs, ys = [p[0] for p in points], [p[1] for p in points]
            axis.plot(xs, ys, marker="o", linestyle=style, color=colours[name], label=name)
        axis.set(xlabel=f"{sweep} ({held[sweep]})", yscale="log", title=f"median time per call vs {sweep}")
        if sweep != "depth":
            axis.set_xscale("log", base=2)
        else:
            axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.grid(True, which="both", alpha=0.3)
    axes[0, 0].set_ylabel(f"seconds per call (median of {calls})")
    legend = {label: handle for axis in axes[0] for handle, label in zip(*axis.get_legend_handles_labels(), strict=True)}
    figure.legend(legend.values(), legend.keys(), loc="lower center", ncol=len(legend), fontsize=8, frameon=False)
    figure.tight_layout(rect=(0, 0.07, 1, 1))
    write_figure(path, figure, 110, root=path.parent)
    plt.close(figure)


def run_family(family: str, networks: int, inputs: int, solvers: list[str], with_peer: bool, time_limit: float):
    """One family of the held-out mix (`bench.heldout`) in a worker process, one thread:
    (labels, per-query calls)."""
    from bench import heldout

    torch.set_num_threads(1)
    peer = Peer() if with_peer else None
    try:
        with threadpool_limits(1):
            mix = heldout.queries(family, networks, inputs)
            return [query.label for query in mix], heldout.run(mix, solvers, peer, time_limit)
    finally:
        if peer is not None:
            peer.close()


def main(argv: Sequence[str] | None = None) -> None:
    from bench import heldout

    parser = Parser(prog="python -m bench.solvers", description=__doc__.splitlines()[0])
    parser.add_argument("--networks", type=int, default=3, help="random networks per configuration (and held-out family)")
    parser.add_argument("--inputs", type=int, default=4, help="inputs per network (each certified for both kinds)")
    parser.add_argument("--time-limit", type=float, default=5.0)
    parser.add_argument("--solvers", help="comma-separated (default: every installed backend)")
    parser.add_argument("--no-peer", action="store_true", help=f"leave out the {PEER} peer column")
    parser.add_argument("--sweeps", default=",".join(SWEEPS), help=f"comma-separated subset of {', '.join(SWEEPS)}, or none")
    parser.add_argument(
        "--families", default=",".join(heldout.FAMILIES), help=f"held-out mix: subset of {', '.join(heldout.FAMILIES)}, or none"
    )
    parser.add_argument(
        "--out", default="bench-results/solvers.md", help="markdown table to write, the figures beside it (default: %(default)s)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="configurations run at once, one process (and core) each")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as in every worker (`run_config`); `machine()` reports it
    solvers = args.solvers.split(",") if args.solvers else list(available_solvers())
    sweeps = _subset(parser, "sweep", args.sweeps, SWEEPS)
    families = _subset(parser, "family", args.families, heldout.FAMILIES)
    if not sweeps and not families:
        parser.error("nothing to run: --sweeps none and --families none")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    out = Path(args.out).resolve()  # a link named by --out is followed: the figures go beside its file
    figures = [out.with_suffix(".png"), out.with_name(f"{out.stem}_cactus.png"), out.with_name(f"{out.stem}_heldout_cactus.png")]
    try:
        for path in (out, *figures):
            output_file(path, "--out", root=None if path == out else out.parent)
    except InputError as error:
        parser.error(str(error))
    if not args.no_peer and not peer_available():
        print(f"no {PEER} column: pip install 'cardinal[peer]' (gurobi-machinelearning) to add it", file=sys.stderr)
    with_peer = not args.no_peer and peer_available()
    configs = list(dict.fromkeys(config for sweep in sweeps for config in SWEEPS[sweep]))
    common = (args.networks, args.inputs, solvers, with_peer, args.time_limit)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {config: pool.submit(run_config, config, *common) for config in configs}
        mixes = {family: pool.submit(run_family, family, *common) for family in families}
        done: dict[tuple[int, tuple[int, ...]], Calls] = {config: future.result() for config, future in futures.items()}
        asked = {family: future.result() for family, future in mixes.items()}
    command = f"python -m bench.solvers --networks {args.networks} --inputs {args.inputs} --time-limit {args.time_limit:g}"
    command += f" --jobs {args.jobs}"
    command += "" if sweeps == list(SWEEPS) else f" --sweeps {','.join(sweeps) or 'none'}"
    command += "" if families == list(heldout.FAMILIES) else f" --families {','.join(families) or 'none'}"
    command += " --no-peer" if args.no_peer else ""
    command += f" --solvers {args.solvers}" if args.solvers else ""
    text = [
        "# Exact backends: certification time and a held-out query mix",
        "",
        f"Run {datetime.date.today().isoformat()} with `{command}` on {machine()}. Every backend runs on one thread"
        + (f", the {PEER} peer too" if with_peer else "; no peer column (gurobi-machinelearning not installed)")
        + ("; one configuration at a time." if args.jobs == 1 else f"; {args.jobs} configurations at once, one process each."),
        "",
    ]
    if sweeps:
        text += _sweep_section(done, sweeps, args, figures[0], figures[1])
    if families:
        text += _heldout_section(asked, args.time_limit, figures[2])
    write_atomic(out, "\n".join(text))
    print(f"wrote {out} and its figures")


def _subset(parser: Parser, what: str, text: str, known: dict) -> list[str]:
    """A comma-separated subset of `known` ("none": empty); a usage error names an unknown one."""
    names = [] if text.strip() == "none" else [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or (not names and text.strip() != "none"):
        parser.error(f"unknown {what} {unknown[0] if unknown else '(none)'!r}: use {', '.join(known)} or none")
    return names


def _sweep_section(done: dict, sweeps: list[str], args, figure: Path, cactus_figure: Path) -> list[str]:
    """The certification sweeps: table (a VBS row after each configuration's backends), median
    plot, cactus plot."""
    rows = []
    for sweep in sweeps:
        for n, hidden in SWEEPS[sweep]:
            calls = done[n, hidden]
            for name, runs in sorted(calls.items()):
                rows.append(_row(sweep, n, hidden, name, runs, args.time_limit))
            rows.append(_row(sweep, n, hidden, "VBS", virtual_best(calls, args.time_limit), args.time_limit))
    plot([row for row in rows if row[3] != "VBS"], figure, sweeps, calls=args.networks * args.inputs * 2)
    cactus(done, args.time_limit, cactus_figure)
    headers = ["sweep", "n", "hidden", "solver", "calls", "median ms", "p90 ms", "max ms", "timeouts", "other", "wrong"]
    return [
        '## Certification: "≤ g − 1?"',
        "",
        "Monotone ReLU networks, inputs uniform in [0,1]^n, threshold midway around the median output; each call "
        "certifies greedy's answer of size g by asking for an explanation of size ≤ g − 1 (both kinds; inputs "
        "whose greedy answer is empty or absent need no call), through `solve_problem` (unguarded, replay included). "
        "Timeouts count at the limit. `other` counts unsupported / size_limit / error / refuted answers; `wrong` counts "
        "refuted sets and verdicts that contradict an exact backend's (z3, cvc5, enumerate). PAR-2: the mean time per "
        "call, an unanswered or wrong one at twice the limit; VBS: the virtual best solver, per call the fastest "
        "answer among cardinal's backends (the peer apart). "
        + ", ".join(f"{name} runs up to n = {limit}" for name, limit in MAX_FEATURES.items())
        + f". {PEER}: the MILP a user builds with gurobi-machinelearning's `add_predictor_constr` "
        "(see `bench/solvers.py`).",
        "",
        tabulate(rows, headers=[*headers, "PAR-2 s"], tablefmt="github"),
        "",
        f"![certification time]({figure.name})",
        "",
        f"![cactus plot]({cactus_figure.name})",
        "",
    ]


def _heldout_section(asked: dict, time_limit: float, cactus_figure: Path) -> list[str]:
    """The held-out mix (`bench.heldout`): PAR-2 and VBS per family and query, the front door,
    and its cactus plot."""
    from bench import heldout

    labels = [label for family_labels, _ in asked.values() for label in family_labels]
    results = [calls for _, family_results in asked.values() for calls in family_results]
    rows = heldout.table(results, labels, time_limit, PEER)
    solved_calls: dict[str, Calls] = {}
    for family, (family_labels, family_results) in asked.items():
        per_backend: Calls = defaultdict(list)
        for label, calls in zip(family_labels, family_results, strict=True):
            for name, call in calls.items():
                per_backend[name].append((call[0], "optimal" if heldout.solved(call, label.query) else call[1], call[2]))
        solved_calls[family] = per_backend
    cactus(solved_calls, time_limit, cactus_figure, calls="held-out queries")
    door = heldout.front_door(results, labels, PEER)
    return [
        "## A held-out query mix",
        "",
        "Explanation questions as a user asks them (`bench/heldout.py`): ReLU 32 × 32 networks, monotone and not "
        "(`signed`), 28 and 64 features; per input three thresholds 50/80/95% of the way from f(x) to f at a corner "
        "(the counterpoint on monotone networks); at each, the minimum CXp (`cxp`) and AXp (`axp`) from scratch and, "
        'on monotone networks, certify\'s "≤ g − 1?" per kind. Every backend through `solve_minimum` with its '
        "defaults (guarded, the answer replayed exactly), timed from the call to its return. `solved`: the answer "
        "stands (a replayed set, none_within, none_exists) and no exact evidence contradicts it; PAR-2 counts the "
        "others at twice the limit; VBS: per query the fastest solving call among cardinal's backends. The peer "
        "answers every query but AXps of non-monotone networks.",
        "",
        tabulate(rows, headers=heldout.HEADERS, tablefmt="github"),
        "",
        "The front door (issue 30): the minimum CXp at 80% on monotone-28, the median per call, and the peer's "
        "median over it (above 1: faster than the peer).",
        "",
        tabulate(door, headers=["solver", "calls", "median ms", "peer / solver"], tablefmt="github"),
        "",
        f"![held-out cactus plot]({cactus_figure.name})",
        "",
    ]


if __name__ == "__main__":
    main()

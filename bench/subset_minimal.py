"""Benchmark: subset-minimal explanations against the proved minimum (issue 40's research table).

Models (each built by its own module, with its fixed seeds; nothing is copied here):

* the `classifiers` suite's four (`verify.classifiers`): `digits-fc` (64 → 16 → 10, ONNX),
  `digits-conv` (Conv2d(1, 4, 3) → 144 → 10, a torch file unrolled exactly), `credit-signs`
  (8 → 8 → 4 → 1, sign-monotone) and `credit-partial` (the same, two features of either sign),
  each row over its ε-balls at radii 0.05, 0.1 and 0.2 (`RADII`), both kinds (CXp and AXp);
* `digits-mlp`: the scikit-learn MLPClassifier of `bench.digits` (64 → 16 → 10, skl2onnx): the
  CXp on the full box [0, 1]^64, both kinds on the ball of radius 0.1 (the full-box AXp is left
  out: its minimum is not within reach, `bench/results/digits.md`);
* `mnist-fc`: VeriX's MNIST-FC shape of `bench.verix` (784 → 10 → 10 → 10, on scikit-learn's
  digits upsampled to 28 × 28, not MNIST), the CXp on the ball ε = 0.05 (the AXp's minimum is
  not within reach: [2, 199] at 300 s, `bench/results/verix.md`).

The first `--rows` test rows of each model's seeded split. Per (model, row, box, kind):

* **minimum**: `solve_minimum(net, x, kind, box, time_limit=T)` with its defaults (the auto
  backend, guarded, its answer replayed exactly). *Proved* when it answers OPTIMAL, exact, its
  set replayed — or when its exact lower bound meets the size of an exactly valid set (its own
  or an explainer's); "no CXp" when an exact engine or deletion proves none exists. Otherwise
  the bounds [lower, upper]: lower the exact lower bound the engine reports in its message
  (`exact lower bound L`), else the definition's (1 for a CXp, 0 for an AXp); upper the
  smallest exactly valid set known (the engine's replayed set, or any explainer's; for an AXp at
  most n, every feature), "?" where no CXp is known.
* **deletion** in each traversal of `solvers.deletion.TRAVERSALS` (index, sensitivity,
  quickxplain): size and seconds; its answer is exactly valid and subset-minimal by the
  deletion module's guarantee (each step decided by the exact set oracle, each question limited
  to T seconds; `unknown` when a step is undecided).
* **greedy**: `cardinal.greedy.explain(..., verify=True)` where it applies (sign-monotone
  networks: `credit-signs`); its answer re-checked exactly ("exact" or "repaired").

The oracle and the minimum's backend are the processes `solvers.guard.lent` keeps: the run pays
their start once, on its first case. Each case's seconds are its own wall clock on the machine
as it was (the table's header gives its load).

Outputs, in `--out` DIR: `subset_minimal.md` (a table per model × kind × explainer: cases,
proved minima, median sizes, median and max ratio explainer / minimum over the proved cases, how
often the answer is a minimum, median seconds), `subset_minimal.jsonl` (one record per case, every
set and second, to recompute anything) and `subset_minimal.png` (explainer size against the proved
minimum, and how often each explainer is minimum per model).

    python -m bench.subset_minimal [--rows 1] [--time-limit 20] [--models digits-fc,...] --out DIR

The default (1 row, 20 s, every model but `mnist-fc`: 27 cases) took 550 s on the shared 2-core
VM (load 5–9); `mnist-fc` runs only when named: its one CXp case had not finished after 10
minutes there (784 features: each traversal's CXp deletion asks up to 784 exact questions).
`--out bench/results` refreshes the files kept there.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from cardinal.solvers.base import solve_minimum
from cardinal.solvers.deletion import NONE_EXISTS, SUBSET_MINIMAL, TRAVERSALS, deletion
from cardinal.solvers.guard import lent
from cardinal.solvers.oracle import SetOracle
from cardinal.verify.classifiers import MODELS as CLASSIFIERS
from cardinal.verify.classifiers import RADII, classifier_instances
from tabulate import tabulate

from bench import Parser
from bench.deletion import verix_model
from bench.digits import _commit, digits_model
from bench.greedy import machine
from cardinal.domain import Domain
from cardinal.greedy import explain
from cardinal.network import Network
from cardinal.problem import Kind, Problem, Status

MODELS = (*CLASSIFIERS, "digits-mlp", "mnist-fc")
DEFAULT_MODELS = MODELS[:-1]  # mnist-fc only when named (module docstring)
GREEDY = "greedy"
EXPLAINERS = (*(f"deletion-{t}" for t in TRAVERSALS), GREEDY)
DIGITS_RADIUS, VERIX_RADIUS = 0.1, 0.05
HEADER = ("model", "kind", "explainer", "cases", "unknown", "proved", "median size")
HEADER += ("median ratio", "max ratio", "% minimum", "median s", "[lower, upper] where not proved")
_LOWER = re.compile(r"exact lower bound (\d+)")


@dataclass(frozen=True, eq=False)
class Case:
    """One explanation to measure: `kind` of the network's prediction at x [n] over `domain`
    (`box` names it), `threshold` None for K ≥ 2 outputs."""

    model: str
    row: int
    box: str
    kind: str
    net: Network
    x: np.ndarray
    domain: Domain
    threshold: float | None


def cases(model: str, work: Path, rows: int) -> Iterator[Case]:
    """The cases of `model` (module docstring) on its first `rows` test rows; its file built in `work`."""
    if model in CLASSIFIERS:
        for instance in classifier_instances(work / "classifiers", rows, RADII, (model,)):
            for row in range(len(instance.X)):
                for kind in Kind:
                    box = f"r{instance.radius:g}"
                    yield Case(model, row, box, kind, instance.net, instance.X[row], instance.box(row), instance.threshold)
    elif model == "digits-mlp":
        net, X, _, _ = digits_model(work / "digits_mlp16.onnx")
        for row, x in enumerate(X[:rows]):
            cube = Domain.unit(net.n_inputs)
            yield Case(model, row, "full box", Kind.CONTRASTIVE, net, x, cube, None)
            for kind in Kind:
                yield Case(model, row, f"r{DIGITS_RADIUS:g}", kind, net, x, cube.ball(x, DIGITS_RADIUS), None)
    else:
        net, X = verix_model(work / "verix_fc_digits28.onnx")
        for row, x in enumerate(X[:rows]):
            box = Domain.unit(net.n_inputs).ball(x, VERIX_RADIUS)
            yield Case(model, row, f"r{VERIX_RADIUS:g}", Kind.CONTRASTIVE, net, x, box, None)


def run_case(case: Case, time_limit: float) -> dict:
    """One case's record: the minimum's outcome and bounds, and each explainer's answer (module docstring)."""
    problem = Problem.make(case.net, case.x, case.kind, case.domain, case.threshold)
    started = time.perf_counter()
    outcome = solve_minimum(case.net, case.x, case.kind, case.domain, case.threshold, time_limit=time_limit)
    minimum = {"status": outcome.status.value, "seconds": time.perf_counter() - started, "message": outcome.message}
    found = {}
    with lent("oracle", SetOracle) as oracle:  # the oracle solve_minimum's replay uses: started once per run
        for traversal in TRAVERSALS:
            started = time.perf_counter()
            answer = deletion(problem, oracle, time_limit, traversal)
            found[f"deletion-{traversal}"] = {
                "status": answer.status,
                "features": None if answer.features is None else list(answer.features),
                "seconds": time.perf_counter() - started,
                "queries": answer.queries,
            }
    if case.net.is_sign_monotone:
        started = time.perf_counter()
        result = explain(case.net, case.x, case.kind, case.domain, case.threshold, device="cpu", verify=True)
        seconds = time.perf_counter() - started
        check = result.checks[0] if result.checks else "undecided"
        status = "undecided" if check == "undecided" else ("answer" if bool(result.exists[0]) else NONE_EXISTS)
        features = result.features(0) if status == "answer" else None
        found[GREEDY] = {"status": status, "features": None if features is None else list(features), "seconds": seconds}
    minimum.update(_bounds(case, outcome, found))
    return {
        "model": case.model,
        "row": case.row,
        "box": case.box,
        "kind": str(case.kind),
        "n": problem.n,
        "prediction": problem.prediction,
        "minimum": minimum,
        "explainers": found,
    }


def _bounds(case: Case, outcome, found: dict[str, dict]) -> dict:
    """The minimum's exact bounds and whether it is proved (module docstring): lower, upper (None
    where no valid set is known), proved, size (when proved), none_exists, and the minimum's set."""
    solution = outcome.solution if outcome.status in (Status.OPTIMAL, Status.FEASIBLE) and outcome.replayed else None
    none_exists = (outcome.status == Status.NONE_EXISTS and outcome.proved) or any(
        answer["status"] == NONE_EXISTS for name, answer in found.items() if name != GREEDY
    )
    sizes = [len(answer["features"]) for answer in found.values() if answer["features"] is not None]
    sizes += [] if solution is None else [len(solution)]
    upper = min(sizes, default=case.net.n_inputs if case.kind == Kind.ABDUCTIVE else None)  # every feature: an AXp
    optimal = outcome.status == Status.OPTIMAL and outcome.exact and outcome.replayed and outcome.solution is not None
    if optimal:
        lower = len(outcome.solution)
    else:
        lower = max([int(m) for m in _LOWER.findall(outcome.message)], default=1 if case.kind == Kind.CONTRASTIVE else 0)
    proved = not none_exists and upper is not None and lower == upper
    return {
        "none_exists": none_exists,
        "conflict": none_exists and upper is not None,  # a valid set and "none exists" both: a bug, never expected
        "lower": None if none_exists else lower,
        "upper": None if none_exists else upper,
        "proved": proved,
        "proof": "optimal" if optimal else ("bounds met" if proved else None),
        "size": lower if proved else None,
        "features": None if solution is None else list(solution),
    }


def summary(records: list[dict]) -> list[list]:
    """Per model × kind × explainer (and the minimum itself): the table's rows (module docstring)."""
    rows = []
    groups: dict[tuple[str, str], list[dict]] = {}
    for record in records:
        groups.setdefault((record["model"], record["kind"]), []).append(record)
    for (model, kind), chosen in groups.items():
        proved = [r for r in chosen if r["minimum"]["proved"]]
        nones = sum(r["minimum"]["none_exists"] for r in chosen)
        seconds = _median([r["minimum"]["seconds"] for r in chosen], ".2f")
        minima = _median([r["minimum"]["size"] for r in proved])
        count = f"{len(proved)} (+{nones} no CXp)" if nones else len(proved)
        open_minima = [r["minimum"] for r in chosen if not r["minimum"]["proved"] and not r["minimum"]["none_exists"]]
        bounds = " ".join(f"[{m['lower']}, {'?' if m['upper'] is None else m['upper']}]" for m in open_minima) or "—"
        dashes = ["—"] * 3  # no ratios nor % for the minimum itself
        rows.append([model, kind, "minimum", len(chosen), len(open_minima), count, minima, *dashes, seconds, bounds])
        for name in EXPLAINERS:
            answers = [(r, r["explainers"][name]) for r in chosen if name in r["explainers"]]
            if answers:
                rows.append([model, kind, name, *_explainer_columns(answers)])
    return rows


def _explainer_columns(answers: list[tuple[dict, dict]]) -> list:
    """Of one explainer's (record, answer) pairs: cases, unknown (no set, no proof that none
    exists), proved cases answered, median size, median and max ratio, % minimum, median seconds."""
    sizes = [len(a["features"]) for _, a in answers if a["features"] is not None]
    proved = [(r, a) for r, a in answers if r["minimum"]["proved"] and a["features"] is not None]
    pairs = [(len(a["features"]), r["minimum"]["size"]) for r, a in proved]
    ratios = [ratio(size, best) for size, best in pairs]
    return [
        len(answers),
        sum(a["status"] not in (SUBSET_MINIMAL, NONE_EXISTS, "answer") for _, a in answers),
        len(pairs),
        _median(sizes),
        _median(ratios, ".2f"),
        f"{max(ratios):.2f}" if ratios else "—",
        f"{100 * sum(size == best for size, best in pairs) / len(pairs):.0f}%" if pairs else "—",
        _median([a["seconds"] for _, a in answers], ".2f"),
        "",
    ]


def ratio(size: int, minimum: int) -> float:
    """size / minimum; 1 where both are 0 (an empty AXp), ∞ where only the minimum is."""
    return size / minimum if minimum else (1.0 if size == 0 else float("inf"))


def _median(values: list, spec: str = "g") -> str:
    return format(statistics.median(values), spec) if values else "—"


def figure(records: list[dict], path: Path) -> None:
    """Left: each explainer's size against the proved minimum (one marker per explainer, its area
    the number of cases at that point, each explainer's markers nudged sideways; the diagonal
    drawn; log-log with 0 drawn at ½). Right: % of proved cases where each explainer's answer is a
    minimum, per model and kind."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    markers = dict(zip(EXPLAINERS, ("o", "s", "^", "x"), strict=True))
    colours = dict(zip(EXPLAINERS, plt.rcParams["axes.prop_cycle"].by_key()["color"], strict=False))
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 5.6), gridspec_kw={"width_ratios": (1, 1.6)})
    top = 1.0
    for k, name in enumerate(EXPLAINERS):
        points = Counter(
            (max(r["minimum"]["size"], 0.5), max(len(r["explainers"][name]["features"]), 0.5))
            for r in records
            if r["minimum"]["proved"] and name in r["explainers"] and r["explainers"][name]["features"] is not None
        )
        if points:
            best, size = (np.array(v) for v in zip(*points, strict=True))
            nudge = 1 + 0.05 * (k - (len(EXPLAINERS) - 1) / 2)
            area = 18 * np.array(list(points.values()))
            colour = {"color": colours[name]} if markers[name] == "x" else {"edgecolors": colours[name], "facecolors": "none"}
            left.scatter(best * nudge, size, s=area, marker=markers[name], label=name, **colour)
            top = max(top, size.max(), best.max())
    left.plot([0.5, top * 1.3], [0.5, top * 1.3], color="grey", linewidth=1, label="size = minimum")
    left.set(xscale="log", yscale="log", xlabel="proved minimum size (0 drawn at ½)", ylabel="explainer's size")
    ticks = [t for t in (0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500) if t <= top * 1.3]
    for axis in (left.xaxis, left.yaxis):
        axis.set_ticks(ticks, ["0" if t == 0.5 else f"{t:g}" for t in ticks])
        axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    left.set_title("answers against the proved minimum (area: cases)")
    left.legend(fontsize=8)
    groups = list(dict.fromkeys((r["model"], r["kind"]) for r in records))
    width = 0.8 / len(EXPLAINERS)
    for k, name in enumerate(EXPLAINERS):
        shares = []
        for model, kind in groups:
            pairs = [
                (len(r["explainers"][name]["features"]), r["minimum"]["size"])
                for r in records
                if (r["model"], r["kind"]) == (model, kind) and r["minimum"]["proved"] and name in r["explainers"]
                if r["explainers"][name]["features"] is not None
            ]
            shares.append(100 * sum(a == b for a, b in pairs) / len(pairs) if pairs else np.nan)
        bars = right.bar(np.arange(len(groups)) + (k - (len(EXPLAINERS) - 1) / 2) * width, shares, width, label=name)
        right.bar_label(bars, ["" if np.isnan(v) else f"{v:.0f}" for v in shares], fontsize=6)
    labels = [f"{model}\n{'CXp' if kind == 'contrastive' else 'AXp'}" for model, kind in groups]
    right.set_xticks(np.arange(len(groups)), labels, fontsize=7)
    right.set(ylabel="% of proved cases where the answer is a minimum", ylim=(0, 125), yticks=range(0, 101, 20))
    right.set_title("how often the answer is a minimum (no bar: not run, or no proved case)")
    right.legend(fontsize=8, loc="upper center", ncol=len(EXPLAINERS))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "load average " + ", ".join(f"{v:.2f}" for v in os.getloadavg())


def write_results(out: Path, records: list[dict], command: str, loads: tuple[str, str], seconds: float) -> None:
    """`out`/subset_minimal.md, .jsonl and .png (module docstring)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "subset_minimal.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    figure(records, out / "subset_minimal.png")
    conflicts = sum(r["minimum"]["conflict"] for r in records)
    lines = [
        "# Subset-minimal explanations against the proved minimum (`bench/subset_minimal.py`)",
        "",
        f"- `{command}`, {datetime.date.today().isoformat()}, commit {_commit()}, {seconds:.0f} s in all",
        f"- {machine()}",
        f"- `uptime` before: {loads[0]}",
        f"- `uptime` after: {loads[1]}",
        "- The VM is shared with other engineers' sessions (2 cores): the seconds move with its load.",
        "- Per model and kind: `minimum` is `solve_minimum`'s row (cases, unknown: bounds only, proved minima, "
        "median proved size, median seconds); each explainer's row: cases it ran on, unknown (a step undecided at its "
        "limit: no set), proved cases it answered on, its median size over every case, "
        "median and max size / minimum over those proved cases, the % of them where its answer is a minimum, median "
        "seconds. A ratio is 1 where the minimum and the answer are both empty. Every set is exactly valid; "
        f"{conflicts} case(s) where a valid set and 'no CXp' met (a bug if ever > 0).",
        "- Definitions, models and the raw records: the docstring of bench/subset_minimal.py, subset_minimal.jsonl.",
        "",
        tabulate(summary(records), HEADER, tablefmt="github", disable_numparse=True),
        "",
        "![explainer size against the proved minimum](subset_minimal.png)",
        "",
    ]
    (out / "subset_minimal.md").write_text("\n".join(lines))


def main(argv: Sequence[str] | None = None) -> None:
    parser = Parser(prog="python -m bench.subset_minimal", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1, help="test rows per model (default 1)")
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds per minimum and per exact question (default 20)")
    names = f"comma-separated, of {', '.join(MODELS)} (default all but mnist-fc)"
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help=names)
    parser.add_argument("--work", default="bench-results/subset_minimal", help="where the model files go (not committed)")
    parser.add_argument("--out", required=True, help="folder of the results (bench/results to refresh those kept)")
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    if unknown := [m for m in models if m not in MODELS]:
        parser.error(f"unknown model {unknown[0]!r} (use {', '.join(MODELS)})")
    if args.rows < 1 or not args.time_limit > 0:
        parser.error("--rows must be ≥ 1 and --time-limit > 0")
    command = (
        f"python -m bench.subset_minimal --rows {args.rows} --time-limit {args.time_limit:g} "
        f"--models {','.join(models)} --out {args.out}"
    )
    before, started = _uptime(), time.perf_counter()
    records = []
    for model in models:
        for case in cases(model, Path(args.work), args.rows):
            record = run_case(case, args.time_limit)
            records.append(record)
            print(_line(record), file=sys.stderr, flush=True)
    write_results(Path(args.out), records, command, (before, _uptime()), time.perf_counter() - started)
    print(f"wrote {args.out}/subset_minimal.md, .jsonl, .png", file=sys.stderr)


def _line(record: dict) -> str:
    m = record["minimum"]
    upper = "?" if m["upper"] is None else m["upper"]
    best = "no CXp" if m["none_exists"] else (str(m["size"]) if m["proved"] else f"[{m['lower']}, {upper}]")
    answers = ", ".join(
        f"{name} {'—' if a['features'] is None else len(a['features'])} ({a['seconds']:.1f} s)"
        for name, a in record["explainers"].items()
    )
    case = f"{record['model']} row {record['row']} {record['box']} {record['kind']}"
    return f"{case}: minimum {best} ({m['seconds']:.1f} s); {answers}"


if __name__ == "__main__":
    main()

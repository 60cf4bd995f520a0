"""`summary.md` and `figures/*.png` of a campaign, rebuilt from its records alone."""

from __future__ import annotations

import datetime
import platform
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

from .activations import CONTINUOUS
from .io import write_atomic
from .problem import Status, Verdict

VERDICT_COLUMNS = tuple(verdict.value for verdict in Verdict)
ADMISSIBLE = set(CONTINUOUS)  # every activation is monotone; admissible ones are also continuous


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def verdict_table(records: list[dict[str, Any]]) -> list[list[Any]]:
    groups: dict[tuple[str, str, str], Counter] = defaultdict(Counter)
    certified: Counter = Counter()
    for record in records:
        key = (record["family"], record["activation"], record["kind"])
        groups[key][record["verdict"]] += 1
        certified[key] += bool(record["certified"])
    rows = []
    for key in sorted(groups):
        counts = groups[key]
        total = sum(counts.values())
        rows.append([*key, total, *(counts.get(v, 0) for v in VERDICT_COLUMNS), f"{100 * certified[key] / total:.0f}%"])
    return rows


# Greedy-gap bins: (label, smallest gap, largest gap)
GAP_BINS = (
    ("0", 0, 0), ("1", 1, 1), ("2", 2, 2), ("3", 3, 3), ("4", 4, 4),
    ("5–9", 5, 9), ("10–19", 10, 19), ("20–49", 20, 49), ("50–99", 50, 99), ("≥ 100", 100, 10**9),
)  # fmt: skip


def _gap_bins(records: list[dict[str, Any]], group_of: Callable[[dict[str, Any]], str]) -> tuple[list[str], dict[str, list[int]]]:
    """Bin labels up to the largest non-empty bin, and each group's count per bin."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0] * len(GAP_BINS))
    for record in records:
        if record.get("gap") is not None:
            index = next(i for i, (_, low, high) in enumerate(GAP_BINS) if low <= record["gap"] <= high)
            counts[group_of(record)][index] += 1
    used = max((i for row in counts.values() for i, c in enumerate(row) if c), default=0) + 1
    return [label for label, _, _ in GAP_BINS[:used]], {group: row[:used] for group, row in sorted(counts.items())}


def gap_table(records: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows: per family / activation, explanations per greedy-gap bin."""
    labels, counts = _gap_bins(records, lambda r: f"{r['family']} / {r['activation']}")
    return ["family / activation", *(f"gap {label}" for label in labels)], [[group, *row] for group, row in counts.items()]


def runtime_table(records: list[dict[str, Any]]) -> list[list[Any]]:
    times: dict[str, list[float]] = defaultdict(list)
    statuses: dict[str, Counter] = defaultdict(Counter)
    for record in records:
        for name, outcome in record["solvers"].items():
            times[name].append(outcome["seconds"])
            statuses[name][outcome["status"]] += 1
    rows = []
    for name in sorted(times):
        values = times[name]
        status_text = ", ".join(f"{status} {count}" for status, count in statuses[name].most_common())
        rows.append(
            [
                name,
                len(values),
                f"{statistics.median(values) * 1e3:.1f}",
                f"{_quantile(values, 0.9) * 1e3:.1f}",
                f"{max(values) * 1e3:.1f}",
                status_text,
            ]
        )
    greedy = [record["greedy"]["seconds"] for record in records if record.get("greedy")]
    if greedy:
        rows.append(
            [
                "greedy (batched, per row)",
                len(greedy),
                f"{statistics.median(greedy) * 1e3:.2f}",
                f"{_quantile(greedy, 0.9) * 1e3:.2f}",
                f"{max(greedy) * 1e3:.2f}",
                "",
            ]
        )
    return rows


_ANSWERS = (Status.OPTIMAL, Status.FEASIBLE, Status.NONE_WITHIN, Status.NONE_EXISTS)


def agreement_table(records: list[dict[str, Any]]) -> list[list[Any]]:
    """Per solver: calls, answers, claims refuted by exact evidence (by the status claimed), and
    calls without an answer. A refuted claim changes no verdict; it measures the solver."""
    rows = []
    names = sorted({name for record in records for name in record["solvers"]})
    for name in names:
        outcomes = [record["solvers"][name] for record in records if name in record["solvers"]]
        statuses = Counter(outcome["status"] for outcome in outcomes)
        claimed = Counter(
            outcome.get("claimed") or Status.REFUTED.value for outcome in outcomes if outcome["status"] == Status.REFUTED
        )
        rows.append(
            [
                name,
                len(outcomes),
                sum(statuses[status] for status in _ANSWERS),
                sum(claimed.values()),
                ", ".join(f"{status} {count}" for status, count in sorted(claimed.items())) or "–",
                statuses[Status.TIMEOUT],
                len(outcomes) - sum(statuses[status] for status in (*_ANSWERS, Status.REFUTED, Status.TIMEOUT)),
            ]
        )
    return rows


def refuted_claims(records: list[dict[str, Any]], limit: int = 50) -> list[str]:
    """One line per refuted claim (the first `limit`)."""
    lines = []
    for record in records:
        for name, outcome in record["solvers"].items():
            if outcome["status"] == Status.REFUTED:
                claim = f"{outcome.get('claimed') or 'a witness'} {outcome['features'] or ''}".rstrip()
                lines.append(f"- `{record['key']}`: {name} claimed {claim} — {outcome.get('message', '')}")
    return lines[:limit] + ([f"- … and {len(lines) - limit} more"] if len(lines) > limit else [])


def claim_summary(records: list[dict[str, Any]]) -> list[str]:
    """What the records say about 'greedy is minimal on admissible monotone networks'."""
    lines = []
    for label, admissible in (("admissible (continuous activations)", True), ("step (not admissible)", False)):
        chosen = [
            r for r in records if r.get("greedy") is not None and (set(r["activation"].split("+")) <= ADMISSIBLE) == admissible
        ]
        decided = [r for r in chosen if r["verdict"] in ("greedy_minimal", "greedy_suboptimal")]
        suboptimal = [r for r in decided if r["verdict"] == "greedy_suboptimal"]
        certified = [r for r in decided if r["certified"]]
        if not chosen:
            continue
        robust = sum(r.get("tie_decided") is False for r in suboptimal)
        rescued = sum(r.get("tie_decided") is True for r in suboptimal)
        lines.append(
            f"- {label}: {len(chosen)} greedy explanations, {len(decided)} decided by the solvers "
            f"({len(certified)} certified in exact arithmetic"
            + (
                f"; {len(decided) - len(certified)} on a float MILP's 'nothing smaller' alone"
                if len(certified) < len(decided)
                else ""
            )
            + f"); greedy was **not minimal in {len(suboptimal)}**"
            + (
                f" (largest gap {max(r['gap'] for r in suboptimal)}). Ties in the scores: in {robust} of them no way of "
                f"breaking ties would have given greedy a smaller answer, in {rescued} another tie order would have, "
                f"{len(suboptimal) - robust - rescued} undetermined (too many tie orders to check)"
                if suboptimal
                else ""
            )
            + "."
        )
    return lines


def write_report(
    out: Path, records: list[dict[str, Any]], suite: str, solvers: tuple[str, ...], time_limit: float, seconds: float
) -> None:
    """Write `out/summary.md` and `out/figures/*.png` from the records."""
    disagreements = [r for r in records if r["verdict"] == "solver_disagreement"]
    cases = sorted(p.name for p in (out / "cases").glob("*.json")) if (out / "cases").exists() else []
    figures = write_figures(out / "figures", records)
    gap_headers, gap_rows = gap_table(records)
    parts = [
        f"# crosscheck — suite `{suite}`",
        "",
        f"{len(records)} records; solvers {', '.join(solvers) or 'none'}; time limit {time_limit:g} s per call; "
        f"this run {seconds:.0f} s on {platform.node() or 'this machine'} ({platform.machine()}, {_cpus()} CPUs), "
        f"{datetime.date.today().isoformat()}.",
        "",
        "## The paper's claim, as measured",
        "",
        *claim_summary(records),
        "",
        "## Verdicts per family, activation and kind",
        "",
        tabulate(
            verdict_table(records),
            headers=["family", "activation", "kind", "records", *VERDICT_COLUMNS, "certified"],
            tablefmt="github",
        ),
        "",
        "## Greedy gap (greedy size − minimum), where a minimum is known",
        "",
        tabulate(gap_rows, headers=gap_headers, tablefmt="github") if gap_rows else "No minimum known yet.",
        "",
        "## Solver runtimes (ms per certification call)",
        "",
        tabulate(runtime_table(records), headers=["solver", "calls", "median", "p90", "max", "statuses"], tablefmt="github"),
        "",
        "## Solver agreement: claims refuted by exact replay",
        "",
        'A claim is refuted when its set is no explanation in exact arithmetic, or when its "nothing smaller" '
        "(none_within, none_exists, optimal's minimality) is contradicted by a smaller set replayed exactly. A refuted "
        "claim changes no verdict: the verdicts rest on exact evidence alone.",
        "",
        tabulate(
            agreement_table(records),
            headers=["solver", "calls", "answers", "refuted", "refuted claims", "timeouts", "no answer (limits, errors)"],
            tablefmt="github",
        )
        if records
        else "No records.",
        "",
        *(refuted_claims(records) or ["No claim was refuted."]),
        "",
        "## Conflicting exact evidence (solver_disagreement: a bug)",
        "",
        *(
            [
                f"- `{r['key']}`: " + ", ".join(f"{n} {o['status']} {o['features']}" for n, o in r["solvers"].items())
                for r in disagreements
            ]
            or ["None."]
        ),
        "",
        f"## Cases ({len(cases)} in `cases/`, replay with `cardinal replay FILE`)",
        "",
        *([f"- `{name}`" for name in cases[:50]] + ([f"- … and {len(cases) - 50} more"] if len(cases) > 50 else []) or ["None."]),
        "",
        "## Figures",
        "",
        *[f"![{name}](figures/{name})" for name in figures],
        "",
    ]
    write_atomic(out / "summary.md", "\n".join(parts))


def _cpus() -> int:
    import os

    return os.cpu_count() or 1


def write_figures(directory: Path, records: list[dict[str, Any]]) -> list[str]:
    """gap_histogram.png and certification_time.png; returns the file names written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    labels, gaps = _gap_bins(records, lambda r: r["family"])
    if gaps:
        figure, axis = plt.subplots(figsize=(6, 3.5))
        bottom = np.zeros(len(labels))
        for family, row in gaps.items():
            axis.bar(labels, row, bottom=bottom, label=family)
            bottom += row
        axis.set(xlabel="greedy size − minimum size", ylabel="explanations", yscale="log", title="Greedy gap")
        written.append(_finish(figure, axis, directory / "gap_histogram.png"))
    times: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for record in records:
        for name, outcome in record["solvers"].items():
            times[name][record["n"]].append(outcome["seconds"])
    if times:
        figure, axis = plt.subplots(figsize=(6, 3.5))
        for name, by_n in sorted(times.items()):
            sizes = sorted(by_n)
            axis.plot(sizes, [statistics.median(by_n[n]) for n in sizes], marker="o", label=f"{name} (median)")
        axis.set(xlabel="features n", ylabel="seconds per call", yscale="log", title="Certification time vs features")
        written.append(_finish(figure, axis, directory / "certification_time.png"))
    return written


def _finish(figure: Any, axis: Any, path: Path) -> str:
    """Legend, layout, save and close; returns the file name."""
    import matplotlib.pyplot as plt

    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path.name

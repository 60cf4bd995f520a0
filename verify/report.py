"""`summary.md` and `figures/*.png` of a campaign, rebuilt from its records (`verify.record`) alone.

The summary opens with a glossary of the verdicts and statuses it counts, and says how its counts
relate (why a solver made fewer calls than there are records, which records a table leaves out).
Each figure is built by a function that returns the matplotlib `Figure` (tests read the plotted
data from it) and is written by `write_figures`.
"""

from __future__ import annotations

import datetime
import platform
import statistics
import textwrap
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tabulate import tabulate

from cardinal.activations import CONTINUOUS
from cardinal.io import write_atomic, write_figure
from cardinal.problem import Status, Verdict

from .record import Record, proves_none
from .settings import CONSTANT

VERDICT_COLUMNS = tuple(verdict.value for verdict in Verdict)
ADMISSIBLE = set(CONTINUOUS)  # every activation is monotone; admissible ones are also continuous

# What each verdict and status means, for the glossary that opens `summary.md`.
VERDICT_MEANING = {
    Verdict.GREEDY_MINIMAL: "no explanation smaller than greedy's exists, proved in exact arithmetic (counted only where "
    "`certified`; a float MILP's 'nothing smaller' alone is `unknown`)",
    Verdict.GREEDY_SUBOPTIMAL: "a smaller explanation than greedy's holds in exact arithmetic: greedy was not minimal",
    Verdict.DELETION_MINIMAL: "no explanation smaller than the deletion explainer's (subset-minimal) answer exists "
    "(`method` deletion; certified as greedy_minimal is)",
    Verdict.DELETION_SUBOPTIMAL: "a smaller explanation than the deletion explainer's holds in exact arithmetic: its "
    "subset-minimal answer is not a minimum one",
    Verdict.NONE_EXISTS: "no contrastive explanation exists at all (no change of features flips the prediction); "
    "there is nothing to compare",
    Verdict.SOLVER_DISAGREEMENT: "exact evidence conflicts (a bug, never a float error)",
    Verdict.UNKNOWN: "no evidence decided it (limits were reached, or only a float MILP said 'nothing smaller')",
    Verdict.EXACT_ONLY: "the network is not monotone, so greedy does not apply; the solvers give the minimum alone",
    Verdict.UNDECIDED: "exact arithmetic cannot decide p(x) or greedy's answer (a smooth network's enclosures leave "
    "a prediction or a score order open); nothing about greedy is certified",
}
STATUS_MEANING = {
    Status.OPTIMAL: "the solver returned a minimum explanation",
    Status.FEASIBLE: "an explanation within the bound, its minimality not proved (a limit stopped the search)",
    Status.NONE_WITHIN: "no explanation of size ≤ the bound (greedy's size − 1): the solver's 'nothing smaller'",
    Status.NONE_EXISTS: "no explanation of this kind at all",
    Status.TIMEOUT: "the time limit stopped it before it found any set within the bound",
    Status.SIZE_LIMIT: "a licence or memory cap (Gurobi's size-limited licence)",
    Status.UNSUPPORTED: "the backend cannot encode this network (e.g. a smooth activation in a MILP)",
    Status.REFUTED: "exact evidence refutes the solver's claim (its set is no explanation, or its 'nothing smaller' "
    "is contradicted); the claim is kept (`claimed`) and changes no verdict",
    Status.UNCONFIRMED: "the claimed set's witness does not flip in exact arithmetic and no exact check decided the set: "
    "neither confirmed nor refuted; the claim is kept (`claimed`) and changes no verdict",
    Status.ERROR: "the backend failed",
}


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def share(part: int, total: int, decimals: int = 0) -> str:
    """part of total as a percentage with `decimals` places that never rounds a partial share to
    100% or 0% (206 of 207 reads 99%, not 100%; 2000 of 2001 with one place, 99.9%)."""
    percent, step = round(100 * part / total, decimals), 10.0**-decimals
    if 0 < part < total:
        percent = min(100 - step, max(step, percent))
    return f"{percent:.{decimals}f}%"


def solver_calls(records: list[Record]) -> list[Record]:
    """The records whose `solvers` are calls of their own, so that each call counts once: a record
    judged on another record's calls (`solvers_from`: a second explainer of the same explanation)
    is left out."""
    return [record for record in records if record.solvers_from is None]


def counted(record: Record) -> Verdict:
    """The verdict a report counts: `greedy_minimal` or `deletion_minimal` only where `certified`,
    else `unknown` (records written before a float MILP's lone "nothing smaller" gave `unknown`
    hold such a verdict uncertified)."""
    if record.verdict in (Verdict.GREEDY_MINIMAL, Verdict.DELETION_MINIMAL) and not record.certified:
        return Verdict.UNKNOWN
    return record.verdict


def verdict_table(records: list[Record]) -> list[list[Any]]:
    groups: dict[tuple[str, str, str], Counter] = defaultdict(Counter)
    certified: Counter = Counter()
    for record in records:
        key = (record.family, record.activation, record.kind.value)
        groups[key][counted(record).value] += 1
        certified[key] += record.certified
    rows = []
    for key in sorted(groups):
        counts = groups[key]
        total = sum(counts.values())
        rows.append([*key, total, *(counts.get(v, 0) for v in VERDICT_COLUMNS), share(certified[key], total)])
    return rows


# Greedy-gap bins: (label, smallest gap, largest gap)
GAP_BINS = (
    ("0", 0, 0), ("1", 1, 1), ("2", 2, 2), ("3", 3, 3), ("4", 4, 4),
    ("5–9", 5, 9), ("10–19", 10, 19), ("20–49", 20, 49), ("50–99", 50, 99), ("≥ 100", 100, 10**9),
)  # fmt: skip


def _gap_bins(records: list[Record], group_of: Callable[[Record], str]) -> tuple[list[str], dict[str, list[int]]]:
    """Bin labels up to the largest non-empty bin, and each group's count per bin."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0] * len(GAP_BINS))
    for record in records:
        if record.gap is not None:
            index = next(i for i, (_, low, high) in enumerate(GAP_BINS) if low <= record.gap <= high)
            counts[group_of(record)][index] += 1
    used = max((i for row in counts.values() for i, c in enumerate(row) if c), default=0) + 1
    return [label for label, _, _ in GAP_BINS[:used]], {group: row[:used] for group, row in sorted(counts.items())}


def gap_table(records: list[Record]) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows: per family / activation, explanations per greedy-gap bin."""
    labels, counts = _gap_bins(greedy_records(records), lambda r: f"{r.family} / {r.activation}")
    return ["family / activation", *(f"gap {label}" for label in labels)], [[group, *row] for group, row in counts.items()]


@dataclass(frozen=True)
class Distance:
    """How far one explainer's answer of size g is from the minimum, in exact evidence: the gap
    g − minimum lies in [low, high]; `proved` when the minimum is (then low = high)."""

    low: int
    high: int
    proved: bool


def distance(record: Record) -> Distance | None:
    """The gap interval of a record whose explainer gave a set decided in exact arithmetic and
    whose evidence does not conflict; None otherwise (no explainer, no set, undecided). Upper end
    of the minimum: the smallest exactly valid set known (the answer itself at worst); lower end:
    `minimum_lower` (else the definition's: 1 for a CXp, 0 for an AXp)."""
    answer = record.greedy
    if answer is None or answer.features is None or record.verdict in (Verdict.UNDECIDED, Verdict.SOLVER_DISAGREEMENT):
        return None
    size = len(answer.features)
    upper = size if record.minimum is None else min(size, len(record.minimum))
    lower = record.minimum_lower if record.minimum_lower is not None else int(record.kind == "contrastive")
    if record.minimum_proved and record.minimum is not None:
        return Distance(size - upper, size - upper, True)
    return Distance(size - upper, max(size - upper, size - lower), False)


def explainer_table(records: list[Record]) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows: per family (model), kind and explainer, how often its answer is a proved
    minimum, the gaps (answer size − minimum) where the minimum is proved, and the gap intervals
    where only bounds are known (`distance`)."""
    groups: dict[tuple[str, str, str], list[Record]] = defaultdict(list)
    for record in records:
        if record.method is not None:
            groups[(record.family, record.kind.value, record.method)].append(record)
    rows = []
    for (family, kind, method), chosen in sorted(groups.items()):
        distances = [d for d in map(distance, chosen) if d is not None]
        proved = [d.low for d in distances if d.proved]
        bounded = Counter((d.low, d.high) for d in distances if not d.proved)
        none = sum(r.verdict == Verdict.NONE_EXISTS for r in chosen)
        rows.append(
            [
                family,
                kind,
                method,
                len(chosen),
                len(distances),
                f"{proved.count(0)} ({share(proved.count(0), len(distances))})" if distances else "–",
                ", ".join(f"{gap}: {count}" for gap, count in sorted(Counter(proved).items())) or "–",
                f"{statistics.mean(proved):.2f}" if proved else "–",
                ", ".join(f"[{low}, {high}]: {count}" for (low, high), count in sorted(bounded.items())) or "–",
                none,
                len(chosen) - len(distances) - none,
            ]
        )
    headers = [
        "model",
        "kind",
        "explainer",
        "records",
        "answers",
        "a proved minimum",
        "gap where the minimum is proved (gap: count)",
        "mean gap (proved)",
        "gap bounds only ([low, high]: count)",
        "none_exists",
        "no answer or conflict",
    ]
    return headers, rows


def runtime_table(records: list[Record]) -> list[list[Any]]:
    times: dict[str, list[float]] = defaultdict(list)
    statuses: dict[str, Counter] = defaultdict(Counter)
    for record in solver_calls(records):
        for name, outcome in record.solvers.items():
            times[name].append(outcome.seconds)
            statuses[name][outcome.status.value] += 1
    rows = []
    for name in sorted(times):
        values = times[name]
        status_text = ", ".join(f"{status} {count}" for status, count in statuses[name].most_common())
        rows.append([name, len(values), *_milliseconds(values, ".1f"), status_text])
    for method, label in EXPLAINER_TIMES.items():
        answered = [r.greedy.seconds for r in records if r.method == method and r.greedy and r.greedy.features is not None]
        if answered:
            rows.append([label, len(answered), *_milliseconds(answered, ".2f"), ""])
    return rows


EXPLAINER_TIMES = {  # method → its row in the runtime table
    "greedy": "greedy (batched, per row)",
    "deletion": "deletion (per row, its exact questions included)",
}


def _milliseconds(values: list[float], style: str) -> list[str]:
    """Median, p90 and max of `values` (seconds) in ms."""
    return [f"{1e3 * value:{style}}" for value in (statistics.median(values), _quantile(values, 0.9), max(values))]


_ANSWERS = (Status.OPTIMAL, Status.FEASIBLE, Status.NONE_WITHIN, Status.NONE_EXISTS)


def agreement_table(records: list[Record]) -> list[list[Any]]:
    """Per solver: calls, answers, claims refuted by exact evidence (by the status claimed), claims
    unconfirmed (a failed witness, the set undecided), timeouts, and calls without an answer.
    Neither a refuted nor an unconfirmed claim changes a verdict; they measure the solver."""
    rows = []
    records = solver_calls(records)
    for name in sorted({name for record in records for name in record.solvers}):
        outcomes = [record.solvers[name] for record in records if name in record.solvers]
        statuses = Counter(outcome.status for outcome in outcomes)
        claimed = Counter((outcome.claimed or Status.REFUTED).value for outcome in outcomes if outcome.status == Status.REFUTED)
        counted = (*_ANSWERS, Status.REFUTED, Status.UNCONFIRMED, Status.TIMEOUT)
        rows.append(
            [
                name,
                len(outcomes),
                sum(statuses[status] for status in _ANSWERS),
                sum(claimed.values()),
                ", ".join(f"{status} {count}" for status, count in sorted(claimed.items())) or "–",
                statuses[Status.UNCONFIRMED],
                statuses[Status.TIMEOUT],
                len(outcomes) - sum(statuses[status] for status in counted),
            ]
        )
    return rows


def refuted_claims(records: list[Record], limit: int = 50) -> list[str]:
    """One line per refuted claim (the first `limit`)."""
    lines = []
    for record in solver_calls(records):
        for name, outcome in record.solvers.items():
            if outcome.status == Status.REFUTED:
                claimed = outcome.claimed.value if outcome.claimed else "a witness"
                claim = f"{claimed} {list(outcome.solution) if outcome.solution is not None else ''}".rstrip()
                lines.append(f"- `{record.key}`: {name} claimed {claim} — {outcome.message}")
    return lines[:limit] + ([f"- … and {len(lines) - limit} more"] if len(lines) > limit else [])


def is_admissible(record: Record) -> bool:
    return record.activations <= ADMISSIBLE


def claim_summary(records: list[Record]) -> list[str]:
    """What the records say about 'greedy is minimal on admissible monotone networks'."""
    lines = []
    for label, admissible in (("admissible (continuous activations)", True), ("step (not admissible)", False)):
        chosen = [r for r in records if r.method == "greedy" and is_admissible(r) == admissible]
        decided = [r for r in chosen if counted(r) in (Verdict.GREEDY_MINIMAL, Verdict.GREEDY_SUBOPTIMAL)]
        suboptimal = [r for r in decided if r.verdict == Verdict.GREEDY_SUBOPTIMAL]
        if not chosen:
            continue
        robust = sum(r.tie_decided is False for r in suboptimal)
        rescued = sum(r.tie_decided is True for r in suboptimal)
        rest = Counter(counted(r).value for r in chosen if counted(r) not in (Verdict.GREEDY_MINIMAL, Verdict.GREEDY_SUBOPTIMAL))
        others = "".join(f"; {count} {verdict}" for verdict, count in sorted(rest.items()))
        lines.append(
            f"- {label}: {len(chosen)} greedy explanations, {len(decided)} decided by the solvers{others} "
            f"(each decided one certified in exact arithmetic); greedy was **not minimal in {len(suboptimal)}**"
            + (
                f" (largest gap {max(r.gap for r in suboptimal if r.gap is not None)}). Ties in the scores: in {robust} "
                f"of them no way of breaking ties would have given greedy a smaller answer, in {rescued} another tie "
                f"order would have, {len(suboptimal) - robust - rescued} undetermined (too many tie orders to check)"
                if suboptimal
                else ""
            )
            + "."
        )
    return lines


def glossary() -> list[str]:
    """The verdicts and statuses the summary counts, one line each."""
    return [
        "Each record is one explanation: an instance (a network, a threshold, a box), one input row and one kind "
        "(contrastive: a smallest set of features whose change can flip the prediction; abductive: a smallest set that, "
        "kept fixed, holds the prediction whatever the others do). Greedy answers first; each solver is then asked "
        "for an explanation smaller than greedy's.",
        "",
        "Verdicts (one per record):",
        "",
        *[f"- `{verdict.value}`: {meaning}." for verdict, meaning in VERDICT_MEANING.items()],
        "",
        "Solver statuses (one per solver call):",
        "",
        *[f"- `{status.value}`: {meaning}." for status, meaning in STATUS_MEANING.items()],
        "",
        "`certified`: the verdict rests on exact arithmetic alone (a smaller set replayed exactly, a 'nothing smaller' "
        "from an exact engine (z3, exact-milp, cvc5 or enumerate), or greedy of size 1 or an empty abductive "
        "explanation). Gap: greedy's size minus the "
        "smallest size known.",
    ]


def count_notes(records: list[Record]) -> list[str]:
    """How the summary's counts relate, one bullet per count that does not add up to another."""
    verdicts = Counter(counted(record).value for record in records)
    columns = f"the sum of the verdict columns ({', '.join(f'{verdict} {count}' for verdict, count in verdicts.most_common())})"
    methods = Counter(record.method or "no explainer" for record in records)
    if set(methods) <= {"greedy", "no explainer"}:
        notes = [f"- {len(records)} records = {len(records)} explanations (instances × rows × kinds) = {columns}."]
    else:
        shared = sum(record.solvers_from is not None for record in records)
        notes = [
            f"- {len(records)} records, one per explanation (instances × rows × kinds) and explainer that applies to its "
            f"network ({', '.join(f'{method} {count}' for method, count in methods.most_common())}) = {columns}. "
            f"{shared} records judge a second explainer on the solver calls of the first (`solvers_from`): the solver "
            "tables and figures count each call once."
        ]
    called = solver_calls(records)
    empty = [r for r in called if not r.solvers and r.greedy is not None and r.greedy.size == 0]
    if empty:
        notes.append(
            f"- {len(empty)} records are empty abductive explanations: the explainer found that no feature needs fixing "
            "(the prediction holds on the whole box), nothing can be smaller, and no solver is called for them. So "
            f"each solver makes at most {len(called) - len(empty)} calls."
        )
    for name in sorted({name for record in called for name in record.solvers}):
        skipped = [r for r in called if name not in r.solvers and r.solvers]
        if skipped:
            ran = max(r.n for r in called if name in r.solvers)
            sizes = ", ".join(map(str, sorted({r.n for r in skipped})))
            notes.append(
                f"- {name}: {len(called) - len(empty) - len(skipped)} calls; not run on {len(skipped)} more records with "
                f"n = {sizes} features (the campaign caps it by size: here it ran up to n = {ran})."
            )
    no_set = sum(r.method == "greedy" and r.greedy.features is None for r in records if r.greedy)
    if no_set:
        timed = sum(r.method == "greedy" and r.greedy.features is not None for r in records if r.greedy)
        notes.append(
            f"- The greedy runtime row counts {timed} explanations: in {no_set} records greedy found that no contrastive "
            "explanation exists (`none_exists`), which carries no set and no time of its own."
        )
    constant = [r for r in records if any(note.startswith(CONSTANT) for note in r.notes)]
    if constant:
        instances = len({r.instance for r in constant})
        notes.append(
            f"- {len(constant)} records come from {instances} instance(s) whose prediction is the same on the whole box "
            "(an exact bound of f lies on one side of the threshold; see their notes): there no contrastive explanation "
            "exists and the empty set is the abductive one, which says nothing about greedy."
        )
    greedy = greedy_records(records)
    gaps = sum(r.gap is not None for r in greedy)
    if gaps < len(greedy):
        left = Counter(r.verdict.value for r in greedy if r.gap is None)
        notes.append(
            f"- The gap table and figures count {gaps} explanations, those with a greedy set and a known minimum; "
            f"left out: {', '.join(f'{count} {verdict}' for verdict, count in left.most_common())}."
        )
    if len(greedy) < len(records):
        notes.append(
            f"- The {len(records) - len(greedy)} records of the deletion explainer are counted in 'Explainers against "
            "the exact minimum', not in the greedy gap table and figures."
        )
    return notes


def greedy_records(records: list[Record]) -> list[Record]:
    """The records the greedy gap table and figures read: greedy's, and those without an explainer."""
    return [record for record in records if record.method in (None, "greedy")]


def write_report(
    out: Path,
    records: list[Record],
    suite: str,
    solvers: tuple[str, ...],
    time_limit: float,
    seconds: float,
    root: Path | None = None,
) -> None:
    """Write `out/summary.md` and `out/figures/*.png` from the records (never through a link
    below `root`, the folder the user named, default `out`: `io.write_atomic`)."""
    root = out if root is None else root
    figures = write_figures(out / "figures", records, time_limit, root=root)
    parts = [
        f"# crosscheck — suite `{suite}`",
        "",
        f"{len(records)} records; solvers {', '.join(solvers) or 'none'}; time limit {time_limit:g} s per call; "
        f"this run {seconds:.0f} s on {platform.node() or 'this machine'} ({platform.machine()}, {_cpus()} CPUs), "
        f"{datetime.date.today().isoformat()}.",
        "",
        "## Reading this summary",
        "",
        *glossary(),
        "",
        "How the counts below relate:",
        "",
        *count_notes(records),
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
        *_gap_section(records),
        *explainer_section(records),
        "## Solver runtimes (ms per certification call)",
        "",
        tabulate(runtime_table(records), headers=["solver", "calls", "median", "p90", "max", "statuses"], tablefmt="github"),
        "",
        *_agreement_section(records),
        *proof_section(records),
        *_disagreement_section(records),
        *_cases_section(out),
        "## Figures",
        "",
        *[f"![{name}](figures/{name})" for name in figures],
        "",
    ]
    write_atomic(out / "summary.md", "\n".join(parts), root=root)


def _gap_section(records: list[Record]) -> list[str]:
    headers, rows = gap_table(records)
    table = tabulate(rows, headers=headers, tablefmt="github") if rows else "No minimum known yet."
    return ["## Greedy gap (greedy size − minimum), where a minimum is known", "", table, ""]


def explainer_section(records: list[Record]) -> list[str]:
    """'Explainers against the exact minimum', for a campaign with the deletion explainer: how far
    each explainer's answers are from the exact minimum, per model, kind and explainer."""
    if not any(record.method == "deletion" for record in records):
        return []
    headers, rows = explainer_table(records)
    return [
        "## Explainers against the exact minimum",
        "",
        "Greedy (Algorithm 1, sign-monotone networks) and deletion (subset-minimal, any network) on the same "
        "explanations, judged on the same solver calls. *A proved minimum*: answers whose size equals a minimum proved "
        "in exact arithmetic (share of the answers). Gap: the answer's size minus the minimum's; where the minimum is "
        "not proved it lies in [answer − smallest exactly valid set known, answer − exact lower bound "
        "(`minimum_lower`)]. *No answer or conflict*: the explainer left a step undecided (a limit), or "
        "`solver_disagreement`.",
        "",
        tabulate(rows, headers=headers, tablefmt="github"),
        "",
    ]


def _agreement_section(records: list[Record]) -> list[str]:
    return [
        "## Solver agreement: claims refuted by exact replay",
        "",
        'A claim is refuted when its set is no explanation in exact arithmetic, or when its "nothing smaller" '
        "(none_within, none_exists, optimal's minimality) is contradicted by a smaller set replayed exactly. A claim is "
        "unconfirmed when its witness does not flip the prediction exactly and no exact check decided its set. Neither "
        "changes a verdict: the verdicts rest on exact evidence alone.",
        "",
        tabulate(
            agreement_table(records),
            headers=[
                "solver",
                "calls",
                "answers",
                "refuted",
                "refuted claims",
                "unconfirmed",
                "timeouts",
                "no answer (limits, errors)",
            ],
            tablefmt="github",
        )
        if records
        else "No records.",
        "",
        *(refuted_claims(records) or ["No claim was refuted."]),
        "",
    ]


def proof_section(records: list[Record], limit: int = 20) -> list[str]:
    """Certificates of the records' exact "nothing smaller" claims (a run with `--proof`): how many
    proved claims carry one the checker accepts, their median size, and the time to make and
    check them against the time the solvers took."""
    asked = [record for record in records if record.proof is not None]
    if not asked:
        return []
    claims = [r for r in asked if proves_none(r.verdict, r.certified, r.minimum) or (r.minimum_proved and r.minimum)]
    written = [r.proof for r in asked if r.proof is not None and r.proof["file"] is not None]
    accepted = [r for r in claims if r.proof is not None and r.proof.get("accepted")]
    empty = sum(r.minimum_proved and r.minimum == () for r in asked)
    sizes = [entry["bytes"] for entry in written]
    made, checked = sum(entry["seconds"] for entry in written), sum(entry["check_seconds"] for entry in written)
    solving = sum(outcome.seconds for record in solver_calls(records) for outcome in record.solvers.values())
    none_exists = sum(r.verdict == Verdict.NONE_EXISTS for r in claims)
    fraction = share(len(accepted), len(claims), 1) if claims else "—"
    lines = [
        "## Certificates of 'nothing smaller' (`cardinal proof check FILE`)",
        "",
        f"- {len(claims)} records hold an exact 'nothing smaller' claim ({none_exists} of them 'no contrastive "
        f"explanation'); {len(accepted)} ({fraction}) carry a certificate the independent checker accepts"
        + (f"; {empty} minima are the empty set, with nothing smaller to prove" if empty else "")
        + ".",
    ]
    if sizes:
        lines.append(
            f"- Size: median {statistics.median(sizes):,.0f} bytes, max {max(sizes):,} bytes, {sum(sizes):,} in all "
            "(compact JSON, the network aside: it is written once, in `networks/`)."
        )
    lines.append(
        f"- Time: made in {made:.1f} s and checked in {checked:.1f} s in all, against {solving:.1f} s of solver calls "
        "over every record."
    )
    rejected = [r for r in asked if r.proof is not None and r.proof["file"] is not None and not r.proof["accepted"]]
    missing = [r for r in claims if r.proof is not None and r.proof["file"] is None]
    if rejected or missing:
        lines += ["", "Claims without an accepted certificate:", ""]
        shown = [f"- `{r.key}`: rejected by the checker (a bug) — {r.proof['message']}" for r in rejected]
        shown += [f"- `{r.key}`: {r.proof['reason']}" for r in missing]
        lines += shown[:limit] + ([f"- … and {len(shown) - limit} more"] if len(shown) > limit else [])
    return [*lines, ""]


def _disagreement_section(records: list[Record]) -> list[str]:
    lines = [
        f"- `{r.key}`: "
        + ", ".join(f"{n} {o.status.value} {list(o.solution) if o.solution is not None else None}" for n, o in r.solvers.items())
        for r in records
        if r.verdict == Verdict.SOLVER_DISAGREEMENT
    ]
    return ["## Conflicting exact evidence (solver_disagreement: a bug)", "", *(lines or ["None."]), ""]


def _cases_section(out: Path) -> list[str]:
    cases = sorted(p.name for p in (out / "cases").glob("*.json")) if (out / "cases").exists() else []
    listed = [f"- `{name}`" for name in cases[:50]] + ([f"- … and {len(cases) - 50} more"] if len(cases) > 50 else [])
    return [f"## Cases ({len(cases)} in `cases/`, replay with `cardinal replay FILE`)", "", *(listed or ["None."]), ""]


def _cpus() -> int:
    import os

    return os.cpu_count() or 1


# ---------------------------------------------------------------------------- figures
def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def gap_figure(records: list[Record]) -> Any | None:
    """Grouped bars: per family, explanations per greedy-gap bin (linear axis, counts on bars)."""
    records = greedy_records(records)
    labels, gaps = _gap_bins(records, lambda r: r.family)
    if not gaps:
        return None
    plt = _pyplot()
    total = sum(map(sum, gaps.values()))
    figure, axis = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(gaps)
    for number, (family, row) in enumerate(gaps.items()):
        positions = [i + (number - (len(gaps) - 1) / 2) * width for i in range(len(labels))]
        bars = axis.bar(positions, row, width=width, label=f"{family} (n = {sum(row)})")
        axis.bar_label(bars, labels=[str(c) if c else "" for c in row], fontsize=7, padding=1)
    axis.set_xticks(range(len(labels)), labels)
    axis.set(
        xlabel="greedy size − minimum size (features)",
        ylabel="explanations",
        title=f"Greedy gap per family (n = {total} explanations with a known minimum;\n"
        f"excluded: {_excluded(records, lambda r: r.gap is None)})",
    )
    axis.margins(y=0.1)
    axis.legend(fontsize=8)
    return figure


def explainer_figure(records: list[Record]) -> Any | None:
    """For a campaign with the deletion explainer: one panel per family (model), bars per explainer
    and kind counting its answers per gap (answer size − minimum) where the minimum is proved; the
    legend counts the rest of its records: bounds only (`distance`), none_exists, no answer."""
    if not any(record.method == "deletion" for record in records):
        return None
    series: dict[str, dict[tuple[str, str], list[Record]]] = defaultdict(lambda: defaultdict(list))
    for record in records:
        if record.method is not None:
            series[record.family][(record.method, record.kind.value)].append(record)
    plt = _pyplot()
    gaps = [d.low for r in records if (d := distance(r)) is not None and d.proved]
    labels = [str(gap) for gap in range(max(gaps, default=0) + 1)]
    columns = min(2, len(series))
    rows = -(-len(series) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(6 * columns, 3.8 * rows), squeeze=False)
    colours = {"greedy": "C0", "deletion": "C1"}
    for axis, family in zip(axes.flat, sorted(series), strict=False):
        panel = series[family]
        width = 0.8 / len(panel)
        for number, ((method, kind), chosen) in enumerate(sorted(panel.items())):
            found = [d for d in map(distance, chosen) if d is not None]
            counts = Counter(d.low for d in found if d.proved)
            row = [counts.get(gap, 0) for gap in range(len(labels))]
            rest = {
                "bounds only": sum(not d.proved for d in found),
                "none_exists": sum(r.verdict == Verdict.NONE_EXISTS for r in chosen),
            }
            rest["no answer"] = len(chosen) - len(found) - rest["none_exists"]
            others = "".join(f", {count} {what}" for what, count in rest.items() if count)
            label = f"{method}, {kind}: {sum(row)} with the minimum proved{others}"
            positions = [i + (number - (len(panel) - 1) / 2) * width for i in range(len(labels))]
            bars = axis.bar(positions, row, width=width, color=colours.get(method, "C2"), label=label,
                            hatch="//" if kind == "abductive" else None, edgecolor="white")  # fmt: skip
            axis.bar_label(bars, labels=[str(c) if c else "" for c in row], fontsize=7, padding=1)
        axis.set_xticks(range(len(labels)), labels)
        axis.set(xlabel="answer size − proved minimum (features)", ylabel="answers", title=family)
        axis.yaxis.get_major_locator().set_params(integer=True)
        axis.set_ylim(0, max(1, axis.get_ylim()[1]) * 1.6)  # room above the bars for the legend
        axis.legend(fontsize=7, loc="upper right")
    for axis in list(axes.flat)[len(series) :]:
        axis.set_visible(False)
    figure.suptitle(
        "How far each explainer's answers are from the exact minimum, where it is proved (hatched: abductive; "
        "the legend counts the rest)",
        fontsize=10,
    )
    return figure


def _excluded(records: list[Record], left_out: Callable[[Record], bool]) -> str:
    """'6 none_exists, 2 unknown': the verdicts of the records a figure leaves out."""
    counts = Counter(r.verdict.value for r in records if left_out(r))
    return ", ".join(f"{count} {verdict}" for verdict, count in counts.most_common()) or "none"


_ANNOTATED_POINTS = 60
"""A panel with more distinct points than this shows counts by marker area alone (labels would overlap)."""


def size_figure(records: list[Record]) -> Any | None:
    """Scatter per family: greedy size against the minimum size, with the diagonal; marker area
    grows with the number of explanations at a point, printed beside it in sparse panels. The
    legend sits below the diagonal, where no point can be (greedy is never below the minimum)."""
    records = greedy_records(records)
    chosen = [r for r in records if r.gap is not None and r.minimum is not None and r.greedy is not None]
    if not chosen:
        return None
    plt = _pyplot()
    families = sorted({r.family for r in chosen})
    columns = min(3, len(families))
    rows = -(-len(families) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4 * columns, 3.6 * rows), squeeze=False)
    for axis, family in zip(axes.flat, families, strict=False):
        points = Counter((len(r.minimum), r.greedy.size) for r in chosen if r.family == family)
        top = max(max(point) for point in points) + 1
        axis.plot([0, top], [0, top], color="grey", linewidth=0.8, linestyle="--", label="greedy = minimum")
        xs, ys = zip(*points, strict=True)
        axis.scatter(xs, ys, s=[12 + 4 * min(c, 40) for c in points.values()], alpha=0.6, label="explanations")
        if len(points) <= _ANNOTATED_POINTS:
            for (x, y), count in points.items():
                if count > 1:
                    axis.annotate(str(count), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        axis.set(
            xlabel="minimum size (features)",
            ylabel="greedy size (features)",
            title=f"{family} (n = {sum(points.values())})",
            xlim=(-0.5, top),
            ylim=(-0.5, top),
        )
        axis.legend(fontsize=7, loc="lower right")
        axis.xaxis.get_major_locator().set_params(integer=True)
        axis.yaxis.get_major_locator().set_params(integer=True)
    for axis in list(axes.flat)[len(families) :]:
        axis.set_visible(False)
    excluded = _excluded(records, lambda r: r.gap is None)
    title = f"Greedy vs minimum explanation size (above the diagonal: greedy not minimal; excluded: {excluded})"
    figure.suptitle(textwrap.fill(title, width=45 * columns), fontsize=10)  # one panel's title ran off the figure
    return figure


def _answered(records: list[Record]) -> dict[str, list[float]]:
    """Per solver, the seconds of the calls that answered (optimal, feasible, none_within, none_exists)."""
    times: dict[str, list[float]] = defaultdict(list)
    for record in solver_calls(records):
        for name, outcome in record.solvers.items():
            if outcome.status in _ANSWERS:
                times[name].append(outcome.seconds)
    return times


def _colours(records: list[Record]) -> dict[str, str]:
    """One colour per solver, the same in every panel of every figure of the report."""
    names = sorted({name for record in records for name in record.solvers})
    return {name: f"C{index}" for index, name in enumerate(names)}


def cactus_figure(records: list[Record], time_limit: float | None = None) -> Any | None:
    """Cactus plot: per solver, the k-th fastest answered call against k (higher right = slower)."""
    times = _answered(records)
    if not times:
        return None
    plt = _pyplot()
    calls = Counter(name for record in solver_calls(records) for name in record.solvers)
    colours = _colours(records)
    figure, axis = plt.subplots(figsize=(7, 4))
    for name in sorted(times):
        ordered = sorted(times[name])
        features = max(r.n for r in records if name in r.solvers)
        label = f"{name}: {len(ordered)} of {calls[name]} calls answered (n ≤ {features})"
        axis.step(range(1, len(ordered) + 1), ordered, where="post", color=colours[name], label=label)
    if time_limit:
        axis.axhline(time_limit, color="grey", linestyle=":", linewidth=0.8, label=f"time limit {time_limit:g} s")
    axis.set(
        xlabel="calls answered (sorted by time)",
        ylabel="seconds per call (log)",
        yscale="log",
        title=f"Certification time per backend (cactus; {len(records)} records; unanswered calls —\n"
        "timeout, unsupported, size limit, refuted, error — are left out)",
    )
    axis.legend(fontsize=7)
    return figure


def time_figure(records: list[Record]) -> Any | None:
    """Per activation family, the seconds of every answered call against the number of features n:
    for each n (one column each, in order) and each solver that answered there, its calls as points
    and their median as a bar, with the count of answered calls above the column ("k/m" when only
    k of its m calls there answered). Only solvers with an answered call on the family are drawn."""
    calls: dict[str, dict[str, dict[int, list[float | None]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for record in solver_calls(records):
        for name, outcome in record.solvers.items():
            calls[record.activation][name][record.n].append(outcome.seconds if outcome.status in _ANSWERS else None)
    drawn = {
        activation: {name: by_n for name, by_n in solvers.items() if any(s is not None for t in by_n.values() for s in t)}
        for activation, solvers in calls.items()
    }
    drawn = {activation: solvers for activation, solvers in drawn.items() if solvers}
    if not drawn:
        return None
    plt = _pyplot()
    colours = _colours(records)
    columns = min(3, len(drawn))
    rows = -(-len(drawn) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.8 * columns, 3.8 * rows + 0.6), squeeze=False, layout="constrained")
    for axis, activation in zip(axes.flat, sorted(drawn), strict=False):
        _time_panel(axis, drawn[activation], colours)
        count = sum(r.activation == activation for r in records)
        axis.set_title(f"{activation} ({count} records)")
    for axis in list(axes.flat)[len(drawn) :]:
        axis.set_visible(False)
    names = sorted({name for solvers in drawn.values() for name in solvers})
    handles = [plt.Line2D([], [], linestyle="none", marker="o", color=colours[name], label=name) for name in names]
    handles.append(plt.Line2D([], [], color="black", linewidth=2.2, label="median of the column"))
    # at most three entries per panel's width in a row: one panel's legend in one row ran off the figure
    figure.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 3 * columns), fontsize=8, frameon=False)
    title = (
        "Certification time vs features n, per activation: each answered call a point, the median a bar, above each "
        "column its number of answered calls (k/m: k of the m calls there answered; timeouts and other non-answers "
        "are not plotted; a solver with no answered call on an activation is not drawn)"
    )
    figure.suptitle(textwrap.fill(title, width=62 * columns), fontsize=9)  # lines as wide as the panels
    return figure


_TIME_COLUMN = 0.8  # width of one n's column, shared by its solvers


def _time_panel(axis: Any, solvers: dict[str, dict[int, list[float | None]]], colours: dict[str, str]) -> None:
    """One activation's panel of `time_figure`: per solver, its calls' seconds per n (None: no answer)."""
    sizes = sorted({n for by_n in solvers.values() for n in by_n})
    slot = _TIME_COLUMN / len(solvers)
    seconds = [s for by_n in solvers.values() for times in by_n.values() for s in times if s is not None]
    for index, (name, by_n) in enumerate(sorted(solvers.items())):
        xs, ys = [], []
        for column, n in enumerate(sizes):
            answered = sorted(s for s in by_n.get(n, []) if s is not None)
            if not answered:
                continue
            centre = column - _TIME_COLUMN / 2 + slot * (index + 0.5)
            xs += list(centre + np.linspace(-0.25, 0.25, len(answered)) * slot * (len(answered) > 1))
            ys += answered
            axis.hlines(statistics.median(answered), centre - 0.45 * slot, centre + 0.45 * slot, color=colours[name],
                        linewidth=2.2, alpha=0.8, zorder=2, gid=f"{name} median n={n}")  # fmt: skip
            total = len(by_n[n])
            shown = str(len(answered)) if len(answered) == total else f"{len(answered)}/{total}"
            axis.annotate(shown, (centre, max(seconds)), xytext=(0, 5), textcoords="offset points", ha="center",
                          va="bottom", fontsize=6, rotation=90, color=colours[name], gid=f"{name} count n={n}")  # fmt: skip
        axis.scatter(xs, ys, s=10, alpha=0.6, color=colours[name], zorder=3, linewidths=0, gid=name)
    axis.set_xticks(range(len(sizes)), [str(n) for n in sizes])
    axis.set_xlim(-0.6, len(sizes) - 0.4)
    axis.set(xlabel="features n (one column per n of the suite)", ylabel="seconds per answered call (log)", yscale="log")
    axis.set_ylim(min(seconds) / 3, max(seconds) * 12)  # room above for the counts


FIGURES: dict[str, Callable[..., Any]] = {
    "gap_distribution.png": gap_figure,
    "greedy_vs_minimum.png": size_figure,
    "explainer_gap.png": explainer_figure,
    "certification_cactus.png": cactus_figure,
    "certification_time.png": time_figure,
}


def write_figures(
    directory: Path, records: list[Record], time_limit: float | None = None, *, root: Path | None = None
) -> list[str]:
    """Every figure of `FIGURES` that the records can fill; returns the file names written.
    `root`: the folder the user named (default `directory`), below which no link is followed."""
    plt = _pyplot()
    written = []
    for name, build in FIGURES.items():
        figure = build(records, time_limit) if build is cactus_figure else build(records)
        if figure is None:
            continue
        if figure.get_layout_engine() is None:  # a figure that lays itself out (constrained) keeps its engine
            figure.tight_layout()
        write_figure(directory / name, figure, 120, root=root or directory)
        plt.close(figure)
        written.append(name)
    return written

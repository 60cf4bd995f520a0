"""Compare a run of `certify` or `check` with a previous one, and decide what fails a CI job.

Records match by (row, kind). A row *changed* when its explanation (the set), its size or its
verdict differs from the baseline, or when it is new or gone. `--fail-on` names what makes the
exit code 1:

* `invalid`    — an explanation that is not valid (`check`'s verdict `invalid`; `certify`
  re-checks and repairs greedy's answers, so there it never fires);
* `suboptimal` — an explanation known not to be minimal (`certify`: `greedy_suboptimal`;
  `check`: `not_subset_minimal` or `not_minimum`);
* `larger`     — an explanation larger than the baseline's for the same row (needs a baseline);
* `changed`    — any change (needs a baseline).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabulate import tabulate

from cardinal.errors import InputError
from cardinal.io import MAX_DATA_BYTES, json_lines, read_input
from cardinal.problem import KINDS, Verdict
from cardinal.validate import describe, json_feature_set, json_string

from .check import FAILING, PASSING

FAIL_ON = ("invalid", "larger", "suboptimal", "changed")
NEEDS_BASELINE = ("larger", "changed")
INVALID = ("invalid",)
SUBOPTIMAL = ("greedy_suboptimal", "deletion_suboptimal", "not_subset_minimal", "not_minimum")
VERDICTS = {"certify": tuple(verdict.value for verdict in Verdict), "check": PASSING + FAILING}  # by command


@dataclass(frozen=True)
class Entry:
    """What a run said about one row and kind: the explanation (None: none exists) and the verdict."""

    row: int
    kind: str
    features: tuple[int, ...] | None
    verdict: str

    @property
    def size(self) -> int | None:
        return None if self.features is None else len(self.features)

    @property
    def key(self) -> tuple[int, str]:
        return self.row, self.kind

    def to_json(self) -> dict[str, Any]:
        return {"features": None if self.features is None else list(self.features), "size": self.size, "verdict": self.verdict}

    def show(self) -> str:
        shown = "none" if self.features is None else "{" + ", ".join(map(str, self.features)) + "}"
        return f"{shown} ({self.verdict})"


def entry_of(record: dict[str, Any], where: str = "record") -> Entry:
    """The entry of a `certify` record (greedy's set) or a `check` record (the judged set). Each
    field it uses is checked (a row number, a known kind and verdict of that command, distinct
    feature indices); `InputError` names `where` and the field."""
    command = command_of(record)
    field = "greedy" if command == "certify" else "features"
    missing = [key for key in ("row", "kind", "verdict", field) if key not in record]
    if missing:
        raise InputError(f"{where}: not a certify or check record ('{missing[0]}' is missing)")
    row = record["row"]
    if isinstance(row, bool) or not isinstance(row, int) or row < 0:
        raise InputError(f"{where}: 'row' must be a row number (an integer ≥ 0), got {describe(row)}")
    kind = json_string(record["kind"], f"{where}: 'kind'", KINDS)
    verdict = json_string(record["verdict"], f"{where}: 'verdict'", VERDICTS[command])
    features = record[field]
    if command == "certify" and features is not None:
        if not isinstance(features, dict) or "features" not in features:
            raise InputError(f"{where}: 'greedy' must be an object with 'features', or null, got {describe(features)}")
        features, field = features["features"], "greedy.features"
    return Entry(row, kind, json_feature_set(features, f"{where}: '{field}'"), verdict)


def command_of(record: dict[str, Any]) -> str:
    return "certify" if "greedy" in record else "check"


def read_baseline(path: str | Path, command: str) -> dict[tuple[int, str], Entry]:
    """The entries of a previous run's JSON lines, which must come from the same command."""
    path = Path(path)
    entries: dict[tuple[int, str], Entry] = {}
    for number, record in json_lines(read_input(path, "baseline", MAX_DATA_BYTES), lambda number: f"{path}: line {number}"):
        where = f"{path}: line {number}"
        if not isinstance(record, dict):
            raise InputError(f"{where}: not a certify or check record (a JSON object)")
        if command_of(record) != command:
            raise InputError(f"{where}: a {command_of(record)} record; compare {command} output with {command} output")
        entry = entry_of(record, where)
        if entry.key in entries:
            raise InputError(f"{where}: row {entry.row} ({entry.kind}) appears twice")
        entries[entry.key] = entry
    return entries


@dataclass(frozen=True)
class Change:
    """One row that differs from the baseline: what changed, and the entries before and after."""

    row: int
    kind: str
    what: tuple[str, ...]  # explanation, size, verdict — or added / removed
    before: Entry | None
    after: Entry | None

    @property
    def larger(self) -> bool:
        sizes = (None, None) if self.before is None or self.after is None else (self.before.size, self.after.size)
        return None not in sizes and sizes[1] > sizes[0]

    def to_json(self) -> dict[str, Any]:
        return {
            "row": self.row,
            "kind": self.kind,
            "changes": list(self.what),
            "larger": self.larger,
            "before": None if self.before is None else self.before.to_json(),
            "after": None if self.after is None else self.after.to_json(),
        }


def compare(baseline: dict[tuple[int, str], Entry], current: Sequence[Entry], kinds: Iterable[str]) -> list[Change]:
    """Every row of the given kinds whose explanation, size or verdict differs, plus rows new or gone."""
    kinds = tuple(kinds)
    now = {entry.key: entry for entry in current}
    changes = []
    for key in sorted(set(now) | {k for k in baseline if k[1] in kinds}):
        before, after = baseline.get(key), now.get(key)
        if before is None or after is None:
            what: tuple[str, ...] = ("added",) if before is None else ("removed",)
        else:
            what = tuple(
                name
                for name, differs in (
                    ("explanation", before.features != after.features),
                    ("size", before.size != after.size),
                    ("verdict", before.verdict != after.verdict),
                )
                if differs
            )
        if what:
            changes.append(Change(key[0], key[1], what, before, after))
    return changes


def change_table(changes: Sequence[Change]) -> str:
    rows = [
        [
            c.row,
            c.kind,
            ", ".join(c.what),
            "-" if c.before is None else c.before.show(),
            "-" if c.after is None else c.after.show(),
        ]
        for c in changes
    ]
    return tabulate(rows, headers=["row", "kind", "changed", "before", "after"], tablefmt="simple")


def parse_fail_on(text: str | Iterable[str] | None, has_baseline: bool) -> tuple[str, ...]:
    """The --fail-on list, checked: known names, and a baseline for those that need one."""
    if text is None:
        return ()
    names = [name.strip() for name in (text.split(",") if isinstance(text, str) else text) if name.strip()]
    unknown = [name for name in names if name not in FAIL_ON]
    if unknown:
        raise InputError(f"--fail-on: unknown condition {unknown[0]!r} (use {', '.join(FAIL_ON)})")
    missing = [name for name in names if name in NEEDS_BASELINE and not has_baseline]
    if missing:
        raise InputError(f"--fail-on {missing[0]} compares with a previous run: give --baseline PREVIOUS.jsonl")
    return tuple(dict.fromkeys(names))


def failures(fail_on: Sequence[str], current: Sequence[Entry], changes: Sequence[Change] | None) -> list[str]:
    """One line per condition of `fail_on` that the run meets, naming its rows."""
    found: dict[str, list[str]] = {}
    for entry in current:
        if "invalid" in fail_on and entry.verdict in INVALID:
            found.setdefault("invalid", []).append(f"row {entry.row} ({entry.kind})")
        if "suboptimal" in fail_on and entry.verdict in SUBOPTIMAL:
            found.setdefault("suboptimal", []).append(f"row {entry.row} ({entry.kind})")
    for change in changes or ():
        if "larger" in fail_on and change.larger:
            found.setdefault("larger", []).append(f"row {change.row} ({change.kind})")
        if "changed" in fail_on:
            found.setdefault("changed", []).append(f"row {change.row} ({change.kind})")
    return [
        f"fail-on {name}: {len(rows)} row(s): {', '.join(rows[:10])}{' …' if len(rows) > 10 else ''}"
        for name, rows in found.items()
    ]

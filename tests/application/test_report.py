"""Campaign records (`verify.record`) and what `verify.report` builds from them alone.

`tests/data/records_old.jsonl` holds 11 lines written by the campaign before `Record` existed
(quick suite, before the `refuted` field): they must still load. The figures are checked on the
data they plot (bar heights, points, lines, labels), not only on the PNG files.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from cardinal.verify.paper import certification_rows
from cardinal.verify.record import Record, read_records
from cardinal.verify.report import (
    VERDICT_COLUMNS,
    cactus_figure,
    claim_summary,
    count_notes,
    counted,
    gap_figure,
    share,
    size_figure,
    time_figure,
    verdict_table,
    write_report,
)
from matplotlib.colors import to_hex

from cardinal.errors import InputError
from cardinal.problem import Kind, Status, Verdict

OLD = Path(__file__).parents[1] / "data" / "records_old.jsonl"


@pytest.fixture(scope="module")
def records() -> list[Record]:
    return read_records(OLD)


def _exact_only(record: Record) -> dict:
    """A record of a non-monotone network (no greedy), one solver's claim refuted, as written now."""
    document = record.to_json()
    document.update(key="hand:0:contrastive", verdict="exact_only", greedy=None, greedy_exists=None, greedy_check=None, gap=None)
    document["solvers"]["gurobi"].update(status="refuted", claimed="optimal", features=[0], message="not an explanation")
    return document


@pytest.mark.parametrize(
    ("part", "total", "decimals", "shown"),
    [
        (206, 207, 0, "99%"),
        (207, 207, 0, "100%"),
        (1, 1000, 0, "1%"),
        (0, 5, 0, "0%"),
        (1, 2, 0, "50%"),
        (2, 3, 0, "67%"),
        (2000, 2001, 1, "99.9%"),
        (1, 2001, 1, "0.1%"),
        (172, 207, 1, "83.1%"),
        (200, 200, 1, "100.0%"),
    ],
)
def test_a_partial_share_never_reads_as_all_or_none(part: int, total: int, decimals: int, shown: str) -> None:
    assert share(part, total, decimals) == shown


def test_old_records_load_and_round_trip(records: list[Record]) -> None:
    lines = [json.loads(line) for line in OLD.read_text().splitlines()]
    assert len(records) == len(lines) == 11 and all("refuted" not in line for line in lines)
    first = records[0]
    assert first.kind == Kind.CONTRASTIVE and first.verdict == Verdict.GREEDY_MINIMAL and first.certified
    assert first.greedy.features == (3,) and first.minimum == (3,) and first.gap == 0
    assert first.solvers["highs"].status == Status.NONE_WITHIN and first.solvers["highs"].raw_status == "Infeasible"
    for record, line in zip(records, lines, strict=True):
        again = record.to_json()
        assert Record.from_json(again) == record
        # Everything the old line held reads back the same; `refuted` (derived from the outcomes) and
        # `minimum_witness`, `minimum_lower` (absent in old files: null) and `method` (absent: greedy's answer) are new.
        new = ("refuted", "minimum_witness", "method", "minimum_lower", "proved_by")
        assert {key: value for key, value in again.items() if key not in new} == line
        assert again["minimum_lower"] is None
        assert again["method"] == ("greedy" if line["greedy_exists"] is not None else None)
        assert again["minimum_witness"] is None
    empty = next(r for r in records if r.greedy is not None and r.greedy.size == 0)
    assert empty.solvers == {} and empty.verdict == Verdict.GREEDY_MINIMAL
    none = next(r for r in records if r.verdict == Verdict.NONE_EXISTS)
    assert none.greedy is not None and none.greedy.features is None and none.gap is None


def test_new_fields_round_trip(records: list[Record]) -> None:
    document = _exact_only(records[0])
    record = Record.from_json(document)
    assert record.greedy is None and record.refuted == ("gurobi",)
    assert record.solvers["gurobi"].claimed == Status.OPTIMAL and record.solvers["gurobi"].solution == (0,)
    assert record.to_json()["refuted"] == ["gurobi"] and Record.from_json(record.to_json()) == record


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("verdict", "maybe", "field 'verdict' is 'maybe', expected one of greedy_minimal"),
        ("certified", "yes", "field 'certified' is 'yes', expected true or false"),
        ("gap", 1.5, "field 'gap' is 1.5, expected an integer"),
        ("kind", None, "field 'kind' is null, expected one of contrastive, abductive"),
        ("solvers", [], "field 'solvers' must be an object"),
        ("greedy", {"seconds": 1}, "field 'greedy' is an object, expected an object with 'features'"),
    ],
)
def test_bad_records_name_the_line_and_field(tmp_path: Path, field: str, value: object, message: str) -> None:
    lines = OLD.read_text().splitlines()
    broken = json.loads(lines[2])
    broken[field] = value
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join([lines[0], lines[1], json.dumps(broken)]) + "\n")
    with pytest.raises(InputError, match=f"records.jsonl line 3: {message}"):
        read_records(path)


def test_solver_outcome_with_unknown_status_is_refused(records: list[Record]) -> None:
    document = records[0].to_json()
    document["solvers"]["z3"]["status"] = "fine"
    with pytest.raises(InputError, match=r"solvers\.z3 must be an object with a known 'status'"):
        Record.from_json(document, "line 9")


def test_gap_figure_plots_the_counts_per_family(records: list[Record]) -> None:
    figure = gap_figure(records)
    axis = figure.axes[0]
    assert [tick.get_text() for tick in axis.get_xticklabels()] == ["0", "1", "2", "3", "4", "5–9"]
    assert axis.get_yscale() == "linear"
    expected = {"random": [5, 1, 1, 0, 0, 0], "set-cover": [0, 0, 1, 0, 1, 0], "trained:breast-cancer": [0, 0, 0, 0, 0, 1]}
    legend = [text.get_text() for text in axis.get_legend().get_texts()]
    assert legend == [f"{family} (n = {sum(counts)})" for family, counts in expected.items()]
    for container, counts in zip(axis.containers, expected.values(), strict=True):
        assert [patch.get_height() for patch in container] == counts
    printed = sorted(text.get_text() for text in axis.texts if text.get_text())
    assert printed == sorted(str(c) for counts in expected.values() for c in counts if c)
    assert "n = 10 explanations" in axis.get_title() and "excluded: 1 none_exists" in axis.get_title()


def test_size_figure_plots_greedy_against_the_minimum(records: list[Record]) -> None:
    figure = size_figure(records)
    panels = {axis.get_title(): axis for axis in figure.axes if axis.get_visible()}
    assert set(panels) == {"random (n = 7)", "set-cover (n = 2)", "trained:breast-cancer (n = 1)"}
    points = {tuple(point) for point in panels["set-cover (n = 2)"].collections[0].get_offsets()}
    assert points == {(2, 6), (2, 4)}  # (minimum, greedy): greedy above the diagonal
    diagonal = panels["random (n = 7)"].get_lines()[0]
    assert list(diagonal.get_xdata()) == list(diagonal.get_ydata())
    random_points = Counter((len(r.minimum), r.greedy.size) for r in records if r.family == "random" and r.gap is not None)
    assert {tuple(p) for p in panels["random (n = 7)"].collections[0].get_offsets()} == set(random_points)
    counts = {text.get_text() for text in panels["random (n = 7)"].texts}
    assert counts == {str(c) for c in random_points.values() if c > 1}


def test_cactus_and_time_figures(records: list[Record]) -> None:
    axis = cactus_figure(records, time_limit=10.0).axes[0]
    lines = {line.get_label().split(":")[0]: line for line in axis.get_lines()}
    answered = sorted(
        o.seconds
        for r in records
        for name, o in r.solvers.items()
        if name == "z3" and o.status in (Status.OPTIMAL, Status.FEASIBLE, Status.NONE_WITHIN, Status.NONE_EXISTS)
    )
    assert list(lines["z3"].get_ydata()) == answered and list(lines["z3"].get_xdata()) == list(range(1, len(answered) + 1))
    assert "enumerate: 9 of 9 calls answered (n ≤ 8)" in [line.get_label() for line in axis.get_lines()]
    assert list(lines["time limit 10 s"].get_ydata()) == [10.0, 10.0] and axis.get_yscale() == "log"



def test_time_figure_shows_every_answered_call_its_median_and_count(records: list[Record]) -> None:
    """Issue 26: not medians joined into lines, but each call a point, the median a bar and the count
    per n; a solver with no answered call on an activation (gurobi on sigmoid) is not drawn."""
    figure = time_figure(records)
    panels = {axis.get_title(): axis for axis in figure.axes if axis.get_visible()}
    assert set(panels) == {"relu (5 records)", "sigmoid (2 records)", "step (4 records)"}
    for title, axis in panels.items():
        activation = title.split()[0]
        answered: dict[str, dict[int, list[float]]] = {}
        for r in records:
            for name, o in r.solvers.items():
                if r.activation == activation and o.status in (Status.OPTIMAL, Status.FEASIBLE, Status.NONE_WITHIN, Status.NONE_EXISTS):
                    answered.setdefault(name, {}).setdefault(r.n, []).append(o.seconds)
        points = {c.get_gid(): c for c in axis.collections if c.get_gid() in answered}
        assert set(points) == set(answered)  # only the solvers that answered here
        for name, by_n in answered.items():
            assert sorted(points[name].get_offsets()[:, 1]) == sorted(s for times in by_n.values() for s in times)
            medians = {c.get_gid(): c for c in axis.collections if (c.get_gid() or "").startswith(f"{name} median")}
            assert set(medians) == {f"{name} median n={n}" for n in by_n}
            for n, times in by_n.items():
                assert medians[f"{name} median n={n}"].get_segments()[0][0][1] == np.median(times)
            counts = {t.get_gid(): t.get_text() for t in axis.texts if (t.get_gid() or "").startswith(f"{name} count")}
            calls = Counter(r.n for r in records if r.activation == activation and name in r.solvers)
            assert counts == {
                f"{name} count n={n}": str(len(times)) if len(times) == calls[n] else f"{len(times)}/{calls[n]}"
                for n, times in by_n.items()
            }
    assert [t.get_text() for t in panels["relu (5 records)"].get_xticklabels()] == ["4", "8", "30"]
    assert "gurobi" not in {c.get_gid() for c in panels["sigmoid (2 records)"].collections}
    legend = [text.get_text() for text in figure.legends[0].get_texts()]
    assert legend == ["enumerate", "gurobi", "highs", "z3", "median of the column"]


def test_summary_explains_its_counts(records: list[Record], tmp_path: Path) -> None:
    notes = "\n".join(count_notes(records))
    assert "11 records = 11 explanations" in notes
    assert "1 records are empty abductive explanations" in notes and "at most 10 calls" in notes
    assert "enumerate: 9 calls; not run on 1 more records with n = 30 features" in notes
    assert "The gap table and figures count 10 explanations" in notes and "1 none_exists" in notes
    write_report(tmp_path, [*records, Record.from_json(_exact_only(records[0]))], "test", ("enumerate",), 10.0, 1.0)
    summary = (tmp_path / "summary.md").read_text()
    glossary = summary[summary.index("## Reading this summary") : summary.index("## The paper's claim")]
    for word in (*(v.value for v in Verdict), *(s.value for s in Status)):
        assert f"- `{word}`:" in glossary
    assert "`hand:0:contrastive`: gurobi claimed optimal [0] — not an explanation" in summary
    for name in ("gap_distribution", "greedy_vs_minimum", "certification_cactus", "certification_time"):
        assert (tmp_path / "figures" / f"{name}.png").stat().st_size > 0
    assert np.isclose(records[0].margin, json.loads(OLD.read_text().splitlines()[0])["margin"])


def test_each_solver_keeps_its_colour_in_every_panel(records: list[Record]) -> None:
    """A panel without some solvers' lines (here: sigmoid, z3's answer alone) must not shift the
    colours of the others."""

    def z3_alone(record: Record) -> Record:
        solvers = {k: v for k, v in record.solvers.items() if k != "enumerate"}
        return dataclasses.replace(record, solvers=solvers | {"z3": record.solvers["enumerate"]})

    records = [z3_alone(r) if r.activation == "sigmoid" else r for r in records]
    colours: dict[str, set] = {}
    figures = [cactus_figure(records, time_limit=10.0), time_figure(records)]
    for axis in (axis for figure in figures for axis in figure.axes if axis.get_visible()):
        for line in axis.get_lines():
            name = line.get_label().split(":")[0].split(",")[0]
            if name in {"enumerate", "gurobi", "highs", "z3"}:
                colours.setdefault(name, set()).add(to_hex(line.get_color()))
        for points in axis.collections:  # the time figure's points, named by their gid
            if points.get_gid() in {"enumerate", "gurobi", "highs", "z3"}:
                colours.setdefault(points.get_gid(), set()).add(to_hex(points.get_facecolor()[0], keep_alpha=False))
    assert set(colours) == {"enumerate", "gurobi", "highs", "z3"}
    assert all(len(seen) == 1 for seen in colours.values()) and len(set.union(*colours.values())) == 4


def test_size_figure_legend_sits_below_the_diagonal(records: list[Record]) -> None:
    for axis in (a for a in size_figure(records).axes if a.get_visible()):
        assert axis.get_legend()._loc == 4  # lower right: greedy is never smaller than the minimum


def test_undecided_rows_are_named_in_the_summary_and_counted_in_the_paper_table(records: list[Record]) -> None:
    """An `undecided` row is neither none_exists nor unknown: the claim summary names each verdict
    it leaves out, and the paper table has a column for it (issue 24 leftover)."""
    document = records[6].to_json()  # random-sigmoid-n4-h8:0:contrastive
    document.update(family="paper:heart", verdict="undecided", greedy_check="undecided", certified=False, gap=None)
    undecided = Record.from_json(document)
    admissible, step = claim_summary([*records, undecided])
    assert "7 decided by the solvers; 1 undecided (" in admissible and "; 1 none_exists (" in step
    (headers,) = _paper_table_lines([undecided])
    assert "undecided" in headers
    (row,) = certification_rows([undecided])
    columns = [name.strip() for name in headers.strip("|").split("|")]
    assert row[columns.index("undecided")] == 1 and row[columns.index("unknown")] == 0


def test_an_uncertified_minimal_verdict_is_counted_as_unknown(records: list[Record]) -> None:
    """A record holding `greedy_minimal` with `certified` false (a float MILP's "nothing smaller"
    alone, as earlier versions wrote it) is never counted as greedy minimal: the verdict table,
    the claim summary and the paper table count it as unknown."""
    document = records[6].to_json()  # random-sigmoid-n4-h8:0:contrastive
    document.update(family="paper:heart", verdict="greedy_minimal", certified=False, minimum_proved=False)
    claimed = Record.from_json(document)
    assert counted(claimed) == Verdict.UNKNOWN and counted(records[6]) == records[6].verdict
    (row,) = verdict_table([claimed])
    assert row[4 + VERDICT_COLUMNS.index("greedy_minimal")] == 0 and row[4 + VERDICT_COLUMNS.index("unknown")] == 1
    (summary,) = claim_summary([claimed])
    assert "0 decided by the solvers; 1 unknown (" in summary
    (headers,) = _paper_table_lines([claimed])
    (paper_row,) = certification_rows([claimed])
    columns = [name.strip() for name in headers.strip("|").split("|")]
    assert paper_row[columns.index("unknown")] == 1 and paper_row[columns.index("greedy minimal")] == 0


def _paper_table_lines(records: list[Record]) -> list[str]:
    from cardinal.verify.paper import _certification_section

    return [line for line in _certification_section(records) if line.startswith("| dataset")]

"""Campaigns with both explainers (issue 27): `crosscheck --method greedy,deletion` makes one
record per explainer that applies, judged on one set of solver calls; the records and the
'Explainers against the exact minimum' summary agree with brute force on Boolean cubes; resume
does not duplicate; the default (greedy alone, `quick`) is unchanged."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from cardinal.verify.campaign import CampaignResult, CampaignSettings, run_campaign
from cardinal.verify.certify import GreedyAnswer, certify_answers, judge
from cardinal.verify.commands.crosscheck import method_list
from cardinal.verify.instance import Instance
from cardinal.verify.record import Record, read_records
from cardinal.verify.report import agreement_table, explainer_table

from cardinal.domain import Domain
from cardinal.problem import Outcome, Problem, Status, Verdict
from tests.bruteforce import vertex_minimum
from tests.engines.test_deletion import _inputs, _network, _threshold

BOTH = ("greedy", "deletion")


def _instances() -> list[Instance]:
    """A sign-monotone K = 1 network (greedy and deletion apply; seed 30: deletion's answer is
    not always a minimum) and a K = 3 classifier (deletion only; seed 2: the same), on the cube."""
    monotone, classifier = _network(30, 5, 1, True), _network(2, 5, 3, False)
    return [
        Instance("monotone", "sign-monotone", monotone, _inputs(monotone, True, 30), _threshold(monotone), Domain.boolean(5)),
        Instance("classes", "classifier", classifier, _inputs(classifier, True, 2), None, Domain.boolean(5)),
    ]


def _minimum(record: Record, instances: list[Instance]) -> int | None:
    """The brute-force minimum size of a record's explanation."""
    instance = next(i for i in instances if i.id == record.instance)
    problem = Problem.make(instance.net, instance.X[record.row], record.kind.value, instance.domain, instance.threshold)
    return vertex_minimum(problem)


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CampaignResult]:
    """One uninterrupted campaign of `_instances()` with both explainers, shared by the module's
    tests (read-only): its folder and its result."""
    folder = tmp_path_factory.mktemp("both")
    return folder, run_campaign("tiny", folder, CampaignSettings(("enumerate",), 30.0, methods=BOTH), instances=_instances())


def test_both_explainers_one_record_each_on_shared_calls(both: tuple[Path, CampaignResult]) -> None:
    instances = _instances()
    folder, result = both
    records = read_records(folder / "records.jsonl")
    assert result.records == len(records) == 3 * 2 * 2 + 3 * 2  # monotone: both explainers; K = 3: deletion only
    keys = [r.key for r in records]
    assert len(set(keys)) == len(keys)
    by_key = {r.key: r for r in records}
    for record in records:
        base = f"{record.instance}:{record.row}:{record.kind.value}"
        assert record.key == (base if record.method == "greedy" else f"{base}:deletion")
        if record.instance == "classes":
            assert record.method == "deletion" and record.solvers_from is None
        elif record.method == "deletion":  # judged on greedy's calls: the same outcomes, the same minimum
            greedy = by_key[base]
            assert record.solvers_from == base and record.solvers == greedy.solvers and record.minimum == greedy.minimum
        minimum = _minimum(record, instances)
        assert minimum is not None and record.minimum_proved and len(record.minimum) == minimum == record.minimum_lower
        minimal = {"greedy": Verdict.GREEDY_MINIMAL, "deletion": Verdict.DELETION_MINIMAL}[record.method]
        suboptimal = {"greedy": Verdict.GREEDY_SUBOPTIMAL, "deletion": Verdict.DELETION_SUBOPTIMAL}[record.method]
        assert record.verdict == (minimal if record.greedy.size == minimum else suboptimal) and record.certified
        assert record.gap == record.greedy.size - minimum
    assert any(r.verdict == Verdict.DELETION_SUBOPTIMAL for r in records if r.instance == "monotone")
    assert any(r.verdict == Verdict.DELETION_SUBOPTIMAL for r in records if r.instance == "classes")
    # each solver call counted once: one per explanation, not per record
    (row,) = agreement_table(records)
    assert row[:2] == ["enumerate", 3 * 2 + 3 * 2]
    # the summary's answer to "how far from the minimum", per model, kind and explainer
    _, rows = explainer_table(records)
    groups = {("sign-monotone", "greedy"), ("sign-monotone", "deletion"), ("classifier", "deletion")}
    assert {tuple(r[:3]) for r in rows} == {(f, k, m) for f, m in groups for k in ("abductive", "contrastive")}
    for family, kind, method, count, answers, proved, gaps, *_ in rows:
        chosen = [r for r in records if (r.family, r.kind.value, r.method) == (family, kind, method)]
        assert count == answers == len(chosen)
        assert proved.startswith(f"{sum(r.gap == 0 for r in chosen)} (")
        expected = sorted({r.gap for r in chosen})
        assert gaps == ", ".join(f"{gap}: {sum(r.gap == gap for r in chosen)}" for gap in expected)
    summary = (folder / "summary.md").read_text()
    assert "## Explainers against the exact minimum" in summary and "](figures/explainer_gap.png)" in summary
    assert (folder / "figures" / "explainer_gap.png").stat().st_size > 0


def test_resume_with_both_explainers_does_not_duplicate(tmp_path: Path, both: tuple[Path, CampaignResult]) -> None:
    """Stopped after 3 records (in the middle of an explanation's two records), resumed twice:
    every record once, with the verdicts of an uninterrupted run."""
    whole = both[0]

    def stop_after_three(done: int, total: int, key: str) -> None:
        if done == 3:
            raise KeyboardInterrupt

    parts = tmp_path / "parts"
    first = run_campaign("tiny", parts, CampaignSettings(("enumerate",), 30.0, methods=BOTH), instances=_instances(), progress=stop_after_three)
    assert first.interrupted and first.records == 3
    second = run_campaign("tiny", parts, CampaignSettings(("enumerate",), 30.0, methods=BOTH), resume=True, instances=_instances())
    third = run_campaign("tiny", parts, CampaignSettings(("enumerate",), 30.0, methods=BOTH), resume=True, instances=_instances())
    assert second.new == second.records - 3 and third.new == 0
    resumed, uninterrupted = read_records(parts / "records.jsonl"), read_records(whole / "records.jsonl")
    assert len(resumed) == len({r.key for r in resumed}) == len(uninterrupted)

    def verdicts(records: list[Record]) -> set:
        return {(r.key, r.verdict, r.certified, len(r.minimum), r.minimum_proved) for r in records}

    assert verdicts(resumed) == verdicts(uninterrupted)


def test_the_default_is_greedy_alone_except_for_the_classifiers_suite(tmp_path: Path) -> None:
    """`crosscheck --suite quick` (no --method): greedy's records as before — no deletion record,
    the old keys, no explainer section; the classifiers suite runs both explainers."""
    instances = _instances()
    run_campaign("quick", tmp_path / "quick", CampaignSettings(("enumerate",), 30.0), instances=instances)
    quick = read_records(tmp_path / "quick" / "records.jsonl")
    assert {(r.instance, r.method) for r in quick} == {("monotone", "greedy"), ("classes", None)}
    assert all(r.key == f"{r.instance}:{r.row}:{r.kind.value}" and r.solvers_from is None for r in quick)
    assert "Explainers against the exact minimum" not in (tmp_path / "quick" / "summary.md").read_text()
    assert not (tmp_path / "quick" / "figures" / "explainer_gap.png").exists()
    run_campaign("classifiers", tmp_path / "classifiers", CampaignSettings(("enumerate",), 30.0), instances=instances)
    both = read_records(tmp_path / "classifiers" / "records.jsonl")
    assert {(r.instance, r.method) for r in both} == {("monotone", "greedy"), ("monotone", "deletion"), ("classes", "deletion")}


def test_method_list_parses_a_comma_separated_list() -> None:
    assert method_list("greedy,deletion") == BOTH and method_list(" deletion , deletion") == ("deletion",)
    for bad in ("fastest", "greedy,", "greedy,,deletion"):
        with pytest.raises(argparse.ArgumentTypeError, match="invalid choice"):
            method_list(bad)


class _CountingPool:
    """Stands in for a `SolverPool`: records each question, answers nothing (a timeout)."""

    def __init__(self) -> None:
        self.asked: list[int | None] = []

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> tuple[dict[str, Outcome], list[str]]:
        self.asked.append(at_most)
        return {"stub": Outcome(Status.TIMEOUT, "stub", 0.0)}, []


def test_two_answers_one_question_below_the_smaller() -> None:
    """certify_answers asks the solvers once, for a set smaller than the smaller answer; with no
    solver answer, the smaller answer (exactly valid) still shows the larger one suboptimal."""
    net = _network(30, 5, 1, True)
    x = _inputs(net, True, 30)[0]
    problem = Problem.make(net, x, "abductive", Domain.boolean(5), _threshold(net))
    everything = tuple(range(5))
    assert problem.is_explanation(everything) is True
    smaller = next(s for s in ((0, 1, 2, 3), (0, 1, 2, 4), (0, 1, 3, 4), (0, 2, 3, 4), (1, 2, 3, 4)) if problem.is_explanation(s))
    greedy, deletion = GreedyAnswer(smaller, 0.0), GreedyAnswer(everything, 0.0, method="deletion")
    pool = _CountingPool()
    first, second = certify_answers(pool, problem, (greedy, deletion), 10.0)  # type: ignore[arg-type]
    assert pool.asked == [len(smaller) - 1]
    assert first.verdict == Verdict.UNKNOWN and not first.certified
    assert second.verdict == Verdict.DELETION_SUBOPTIMAL and second.certified and second.minimum == smaller
    assert second.minimum_lower == 1 and not second.minimum_proved  # a non-empty answer: the empty set is no AXp
    alone = judge(problem, deletion, {}, len(everything) - 1)  # without the other answer: nothing known
    assert alone.verdict == Verdict.UNKNOWN
    conflict = judge(problem, GreedyAnswer(None, 0.0), {}, None, [deletion])  # "no AXp" against a valid one
    assert conflict.verdict == Verdict.SOLVER_DISAGREEMENT and conflict.lower is None


def test_two_records_with_one_claim_share_one_certificate(tmp_path: Path) -> None:
    """--proof with both explainers: the records of an explanation whose minimum is proved carry
    the same certificate entry, made once, written once and accepted by the checker."""
    monotone = _instances()[0]
    proofs = tmp_path / "proofs"
    result = run_campaign("tiny", tmp_path / "run", CampaignSettings(("enumerate",), 30.0, methods=BOTH, proof=proofs), instances=[monotone])
    assert result.rejected_proofs == 0
    records = read_records(tmp_path / "run" / "records.jsonl")
    deletion = [r for r in records if r.method == "deletion"]
    assert deletion and all(r.solvers_from is not None for r in deletion)
    by_key = {r.key: r for r in records}
    files = set()
    for record in deletion:
        greedy = by_key[record.solvers_from]
        assert record.proof == greedy.proof and record.proof["file"] is not None and record.proof["accepted"]
        files.add(record.proof["file"])
    assert files <= {path.name for path in proofs.glob("*.proof.json")}
    assert not any(":deletion" in path.name or "_deletion" in path.name for path in proofs.glob("*.proof.json"))

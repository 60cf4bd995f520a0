"""The paper suite on small slices: Heart (classification, its sample topped up with training rows)
and Auto-MPG (regression, a threshold sweep) — models, greedy statistics, certification, report.

Skipped when the data folder ($CARDINAL_DATA or ../shared/data) lacks the files.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from cardinal.verify.campaign import CampaignSettings, run_campaign
from cardinal.verify.datasets import data_directory
from cardinal.verify.paper import (
    REGRESSION_THRESHOLDS,
    certification_rows,
    greedy_statistics,
    paper_figure,
    paper_instances,
    paper_models,
    write_paper_report,
)
from cardinal.verify.record import read_records

from cardinal.greedy import explain
from cardinal.problem import Verdict

FILES = ("COMET/Heart/train_data.csv", "COMET/Auto-MPG/train_data.csv")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = [name for name in FILES if not (data_directory() / name).is_file()]
    if missing:
        pytest.skip(f"{', '.join(missing)} not in {data_directory()}")
    return tmp_path_factory.mktemp("paper")


def test_models_are_cached_monotone_and_reloaded_identically(workdir: Path) -> None:
    first = list(paper_models(workdir, ("heart", "auto-mpg")))
    assert (workdir / "models" / "heart.json").is_file()
    again = list(paper_models(workdir, ("heart", "auto-mpg")))
    for model, cached in zip(first, again, strict=True):
        assert model.net.is_monotone and cached.net.hash == model.net.hash
    heart, auto = first
    assert heart.thresholds == (0.0,) and auto.thresholds == REGRESSION_THRESHOLDS
    assert heart.test_metric > heart.baseline  # accuracy above the constant predictor
    assert auto.test_metric < auto.baseline  # RMSE below the mean predictor's


def test_sample_tops_up_a_small_test_set_with_training_rows(workdir: Path) -> None:
    (heart,) = paper_models(workdir, ("heart",))
    test_part, train_part = paper_instances(workdir, ("heart",), sample=len(heart.X_test) + 9)
    assert test_part.id == "paper-heart" and len(test_part.X) == len(heart.X_test)
    assert train_part.id == "paper-heart-train" and len(train_part.X) == 9
    assert all(any(np.array_equal(row, x) for x in heart.X_train) for row in train_part.X)
    sweep = list(paper_instances(workdir, ("auto-mpg",), sample=18))
    assert [i.threshold for i in sweep] == list(REGRESSION_THRESHOLDS) and all(len(i.X) == 2 for i in sweep)


@pytest.mark.parametrize("heart", [3, pytest.param(8, marks=pytest.mark.slow)], ids=["heart3", "heart8"])
def test_statistics_certification_and_report(workdir: Path, tmp_path: Path, heart: int) -> None:
    """Greedy statistics equal `explain`'s; a campaign of `heart` Heart rows and the Auto-MPG sweep
    (one row per threshold) all certified; the report's tables and figures plot them."""
    models = list(paper_models(workdir, ("heart", "auto-mpg")))
    stats = greedy_statistics(models)
    for row in stats:
        model = next(m for m in models if m.name == row["dataset"])
        result = explain(model.net, model.X_test, kind=row["kind"], threshold=row["threshold"], device="cpu", verify=False)
        assert row["exists"] == int(result.exists.sum()) and row["sizes"] == result.sizes[result.exists].tolist()
        assert row["positive"] == int(result.predictions.sum())
    out = tmp_path / "campaign"
    instances = [*paper_instances(workdir, ("heart",), sample=heart), *paper_instances(workdir, ("auto-mpg",), sample=9)]
    run_campaign("paper", out, CampaignSettings(("enumerate",), 30.0), instances=instances)
    records = read_records(out / "records.jsonl")
    assert len(records) == 2 * (heart + 9)
    assert all(r.certified and r.verdict != Verdict.SOLVER_DISAGREEMENT for r in records)
    written = write_paper_report(tmp_path / "report" / "paper.md", models, stats, records)
    text = written[0].read_text()
    assert all(path.is_file() for path in written) and [p.name for p in written[1:]] == ["paper_heart.png", "paper_auto-mpg.png"]
    heart_rows = [line for line in text.splitlines() if line.startswith("| heart ")]
    assert heart_rows and "accuracy" in heart_rows[0]
    assert "| auto-mpg  |         0.5 |" in text.replace("0.50", "0.5")  # the sweep table
    rows = {(row[0], row[1]): row for row in certification_rows(records)}
    for kind in ("contrastive", "abductive"):
        _, _, sample, minimal, suboptimal, _, none_exists, disagreement, unknown, *_ = rows["heart", kind]
        assert sample == heart and minimal + suboptimal + none_exists + disagreement + unknown == heart
    # The figures plot these statistics and records: the sweep's sizes against the threshold, with
    # the certified share of the sample (all certified here: enumerate on small networks).
    sweep = paper_figure("auto-mpg", stats, records)
    size_axis, _, share_axis = sweep.axes
    cxp = [s for s in stats if s["dataset"] == "auto-mpg" and s["kind"] == "contrastive"]
    cxp_line = next(line for line in size_axis.get_lines() if line.get_label() == "CXp")
    assert list(cxp_line.get_xdata()) == [s["threshold"] for s in cxp]
    assert np.allclose(cxp_line.get_ydata(), [np.mean(s["sizes"]) if s["sizes"] else np.nan for s in cxp], equal_nan=True)
    share = share_axis.get_lines()[0]
    sampled = sorted({round(r.threshold, 6) for r in records if r.family == "paper:auto-mpg"})
    assert list(share.get_xdata()) == sampled and set(share.get_ydata()) == {100.0}
    figure = paper_figure("heart", stats, records)
    assert f"certified: {2 * heart} of {2 * heart} sampled" in figure.axes[0].get_title()
    sizes = [size for s in stats if s["dataset"] == "heart" and s["kind"] == "contrastive" for size in s["sizes"]]
    bars = figure.axes[0].containers[0]
    assert sum(patch.get_height() for patch in bars) == len(sizes)


def test_crosscheck_paper_writes_its_report_under_out_only(
    workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """`crosscheck --suite paper` writes OUT/paper.md and its figures, nothing in the source tree."""
    from cardinal.verify import paper, suites
    from cardinal.verify.cli import main

    tracked = Path(__file__).resolve().parents[2] / "bench" / "results"
    before = {path: path.stat().st_mtime_ns for path in tracked.glob("paper*")}
    heart_only = paper.paper_models
    monkeypatch.setattr(paper, "paper_models", lambda out, datasets=None: heart_only(out, ("heart",)))
    monkeypatch.setitem(suites.SUITES, "paper", lambda out: paper_instances(out, ("heart",), sample=3))
    monkeypatch.chdir(tmp_path)
    list(heart_only(workdir, ("heart",)))  # the module's model (trained unless cached), put where the run caches it
    (tmp_path / "run" / "models").mkdir(parents=True)
    for name in ("heart.json", "heart.metrics.json"):
        shutil.copy(workdir / "models" / name, tmp_path / "run" / "models" / name)
    assert main(["crosscheck", "--suite", "paper", "--out", "run", "--solvers", "enumerate"]) == 0
    assert (tmp_path / "run" / "paper.md").is_file() and (tmp_path / "run" / "paper_heart.png").is_file()
    assert {path: path.stat().st_mtime_ns for path in tracked.glob("paper*")} == before
    assert "run/paper.md" in capsys.readouterr().err

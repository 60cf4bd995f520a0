"""Baselines and --fail-on (certify, check) and the pytest helper `cardinal.verify.testing`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from cardinal.verify.cli import main
from cardinal.verify.testing import assert_explanations

from cardinal.network import Network


def _inputs(tmp_path: Path) -> Path:
    inputs = tmp_path / "x.csv"
    inputs.write_text("1,1,1\n0.2,0.9,1\n")
    return inputs


def _run(args: list[str], capsys: pytest.CaptureFixture) -> tuple[int, list[dict], str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, [json.loads(line) for line in captured.out.splitlines()], captured.err


def _plant(source: Path, target: Path, row: int, kind: str, features: list[int]) -> None:
    """Copy a certify output with one row's greedy explanation replaced."""
    lines = []
    for text in source.read_text().splitlines():
        record = json.loads(text)
        if (record["row"], record["kind"]) == (row, kind):
            record["greedy"] = {"features": features, "size": len(features), "seconds": 0.0}
        lines.append(json.dumps(record))
    target.write_text("\n".join(lines) + "\n")


def test_certify_baseline_reports_a_planted_change(
    design_network_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    certify = ["certify", str(design_network_file), "--inputs", str(_inputs(tmp_path)), "--threshold", "0.5"]
    certify += ["--cases", str(tmp_path / "cases")]
    previous = tmp_path / "previous.jsonl"
    assert _run([*certify, "--out", str(previous)], capsys)[0] == 0  # greedy_suboptimal found, but not asked to fail
    code, lines, err = _run([*certify, "--baseline", str(previous), "--fail-on", "changed"], capsys)
    assert code == 0 and "no row changed since the baseline" in err
    assert all(line["baseline"]["changes"] == [] for line in lines)
    planted = tmp_path / "planted.jsonl"
    _plant(previous, planted, 1, "abductive", [1, 2])  # the run finds {2}: smaller, so not "larger"
    diff = tmp_path / "diff.jsonl"
    code, lines, err = _run([*certify, "--baseline", str(planted), "--fail-on", "larger", "--diff-out", str(diff)], capsys)
    assert code == 0  # a change, but nothing larger
    assert re.search(
        r"1 row\(s\) changed since the baseline:\n.*\n.*\n\s+1\s+abductive\s+explanation, size\s+\{1, 2\} \(greedy_minimal\)\s+\{2\} \(greedy_minimal\)",
        err,
    ), err
    [change] = [json.loads(text) for text in diff.read_text().splitlines()]
    assert change == {
        "row": 1,
        "kind": "abductive",
        "changes": ["explanation", "size"],
        "larger": False,
        "before": {"features": [1, 2], "size": 2, "verdict": "greedy_minimal"},
        "after": {"features": [2], "size": 1, "verdict": "greedy_minimal"},
    }
    changed = next(line for line in lines if (line["row"], line["kind"]) == (1, "abductive"))
    assert changed["baseline"]["changes"] == ["explanation", "size"] and changed["baseline"]["before"]["features"] == [1, 2]
    code, _, err = _run([*certify, "--baseline", str(planted), "--fail-on", "changed"], capsys)
    assert code == 1 and "FAIL fail-on changed: 1 row(s): row 1 (abductive)" in err
    _plant(previous, planted, 0, "abductive", [])  # now the run's {2} is larger than the baseline's {}
    code, _, err = _run([*certify, "--baseline", str(planted), "--fail-on", "larger"], capsys)
    assert code == 1 and "FAIL fail-on larger: 1 row(s): row 0 (abductive)" in err


def test_certify_fail_on_suboptimal(design_network_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    certify = ["certify", str(design_network_file), "--inputs", str(_inputs(tmp_path)), "--threshold", "0.5"]
    certify += ["--cases", str(tmp_path / "cases")]
    code, _, err = _run([*certify, "--fail-on", "suboptimal"], capsys)
    assert code == 1 and "FAIL fail-on suboptimal: 1 row(s): row 0 (contrastive)" in err
    code, _, _ = _run([*certify, "--fail-on", "suboptimal", "--kind", "abductive"], capsys)
    assert code == 0


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--fail-on", "worse"], r"--fail-on: unknown condition 'worse'"),
        (["--fail-on", "larger"], r"--fail-on larger compares with a previous run: give --baseline"),
        (["--baseline", "missing.jsonl"], r"baseline missing\.jsonl not found"),
        (["--diff-out", "d.jsonl"], r"--diff-out needs --baseline"),
    ],
)
def test_bad_ci_flags_exit_2(
    design_network_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    flags: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, lines, err = _run(["certify", str(design_network_file), "--inputs", str(_inputs(tmp_path)), *flags], capsys)
    assert code == 2 and lines == [] and re.search(message, err), err


def test_check_baseline_and_wrong_baseline_kind(design_network_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    inputs = _inputs(tmp_path)
    explanations = tmp_path / "e.jsonl"
    explanations.write_text(
        '{"row": 0, "kind": "contrastive", "features": [0, 2]}\n{"row": 1, "kind": "contrastive", "features": [2]}\n'
    )
    check = [
        "check",
        str(design_network_file),
        "--inputs",
        str(inputs),
        "--threshold",
        "0.5",
        "--explanations",
        str(explanations),
    ]
    previous = tmp_path / "previous.jsonl"
    assert _run([*check, "--require", "subset", "--out", str(previous)], capsys)[0] == 0
    explanations.write_text(
        '{"row": 0, "kind": "contrastive", "features": [0, 1, 2]}\n{"row": 1, "kind": "contrastive", "features": [2]}\n'
    )
    code, _, err = _run([*check, "--require", "valid", "--baseline", str(previous), "--fail-on", "larger"], capsys)
    assert code == 1 and "FAIL fail-on larger: 1 row(s): row 0 (contrastive)" in err
    assert re.search(
        r"0\s+contrastive\s+explanation, size, verdict\s+\{0, 2\} \(subset_minimal\)\s+\{0, 1, 2\} \(valid\)", err
    ), err
    code, _, err = _run([*check, "--require", "subset", "--fail-on", "suboptimal"], capsys)
    assert code == 1 and "FAIL fail-on suboptimal: 1 row(s): row 0 (contrastive)" in err
    certified = tmp_path / "certified.jsonl"
    _run(
        ["certify", str(design_network_file), "--inputs", str(inputs), "--out", str(certified), "--cases", str(tmp_path / "c")],
        capsys,
    )
    code, _, err = _run([*check, "--baseline", str(certified)], capsys)
    assert code == 2 and "a certify record; compare check output with check output" in err


def test_assert_explanations_catches_a_planted_change(
    design_network: Network, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    X = np.array([[1.0, 1.0, 1.0], [0.2, 0.9, 1.0]])
    baseline = tmp_path / "baseline.jsonl"
    with pytest.raises(AssertionError, match=r"baseline .* does not exist: write it with update=True"):
        assert_explanations(design_network, X, threshold=0.5, baseline=baseline)
    monkeypatch.setenv("CARDINAL_UPDATE_BASELINE", "1")
    written = assert_explanations(design_network, X, threshold=0.5, baseline=baseline)
    monkeypatch.delenv("CARDINAL_UPDATE_BASELINE")
    assert [json.loads(text)["features"] for text in baseline.read_text().splitlines()] == [[0, 1, 2], [2], [2], [2]]
    assert [j.verdict for j in written] == ["valid"] * 4
    assert_explanations(design_network, X, threshold=0.5, baseline=baseline)  # unchanged: passes
    records = [json.loads(text) for text in baseline.read_text().splitlines()]
    records[2]["features"] = [0, 2]  # plant: row 1's CXp was {0, 2}
    baseline.write_text("".join(json.dumps(record) + "\n" for record in records))
    with pytest.raises(AssertionError) as failure:
        assert_explanations(design_network, X, threshold=0.5, baseline=baseline)
    assert "fail-on changed: 1 row(s): row 1 (contrastive)" in str(failure.value)
    assert re.search(r"1\s+contrastive\s+explanation, size\s+\{0, 2\} \(valid\)\s+\{2\} \(valid\)", str(failure.value))
    assert_explanations(design_network, X, threshold=0.5, baseline=baseline, fail_on=("larger",))  # smaller: not larger


def test_assert_explanations_judges_explanations_from_elsewhere(design_network: Network) -> None:
    X = np.ones((1, 3))
    ours = [{"row": 0, "kind": "contrastive", "features": [1, 2]}, {"row": 0, "kind": "abductive", "features": [2]}]
    judged = assert_explanations(design_network, X, explanations=ours, threshold=0.5, require="minimum")
    assert [j.verdict for j in judged] == ["minimum", "minimum"]
    with pytest.raises(
        AssertionError, match=r"row 0 \(contrastive\) \{0, 1, 2\}: not_subset_minimal; smaller explanation \[1, 2\]"
    ):
        assert_explanations(design_network, X, threshold=0.5, require="subset")  # cardinal's own greedy answer
    wrong = [{"row": 0, "kind": "abductive", "features": [0]}]
    with pytest.raises(AssertionError, match=r"row 0 \(abductive\) \{0\}: invalid; witness y = \[1.0, 0.0, 0.0\], p\(y\) = 0"):
        assert_explanations(design_network, X, explanations=wrong, threshold=0.5)

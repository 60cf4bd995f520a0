"""bench/budget.py's flags (issue 51): --kinds, --images drawn by --seed from the held-out test
split, the per-call columns (size, bounds, proved, certified, re-check) and the summary line per
model and kind. The models are stubbed by a tiny network (three of 64 features matter) and the
fresh-interpreter timing by a constant: nothing here depends on the machine's speed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import bench.budget as budget
from cardinal.network import Network

LIMIT = 60.0  # no call here comes near it: the answers asserted are the proved ones


def tiny() -> Network:
    """64 inputs, one ReLU unit and two classes; only features 0, 1 and 2 matter."""
    weight = np.zeros((1, 64))
    weight[0, :3] = [1.0, 1.0, 1.0]
    return Network.from_json({
        "format": "cardinal.network/1",
        "layers": [
            {"weight": weight.tolist(), "bias": [-0.5], "activation": "relu"},
            {"weight": [[1.0], [-1.0]], "bias": [0.0, 0.2], "activation": "identity"},
        ],
    })


def test_the_images_are_held_out_and_drawn_by_the_seed() -> None:
    X_train, y_train, X_test, y_test, test_index = budget.split()
    assert (len(X_train), len(X_test)) == (1347, 450) and len(y_train) == 1347 and len(y_test) == 450
    train_rows = {row.tobytes() for row in X_train}
    assert set(test_index).isdisjoint(set(range(1797)) - set(test_index))
    assert len(set(test_index)) == 450
    drawn = budget.draw(len(X_test), 3, 2026)
    assert drawn == budget.draw(len(X_test), 3, 2026) and len(set(drawn)) == 3
    assert drawn != budget.draw(len(X_test), 3, 2027)
    # the split is made by index: a drawn test image is not one of the training rows (digits has no duplicates there)
    assert all(X_test[i].tobytes() not in train_rows for i in drawn)
    with pytest.raises(ValueError):
        budget.draw(len(X_test), 451, 0)


def test_kinds_parse_and_refuse(capsys) -> None:
    assert budget.kinds_of("abductive,contrastive") == ["abductive", "contrastive"]
    assert budget.kinds_of(" contrastive ") == ["contrastive"]
    with pytest.raises(SystemExit) as stop:
        budget.main(["--kinds", "abductive,sideways", "--out", "x.md"])
    assert stop.value.code == 2 and "--kinds" in capsys.readouterr().err


def test_summary_counts_proved_answers_with_an_accepted_certificate() -> None:
    def row(proved: bool, certified: bool, wall: float) -> dict[str, object]:
        return {"model": "m", "kind": "abductive", "proved?": proved, "certified?": certified, "wall": wall,
                "T": 10.0, "met": wall <= 12.0}

    lines = budget.summary([row(True, True, 5.0), row(True, False, 10.0), row(False, False, 13.0)])
    assert lines == [["m", "abductive", 3, "2/3", "2/3", "1/2 (50 %)", "NO", "1.00"]]
    assert budget.summary([row(False, False, 10.0)])[0][5:7] == ["0/0", "—"]


def test_a_tiny_run_writes_both_kinds_per_call_and_the_summary(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(budget, "first_answer", lambda: "0.100 (proved: True)")
    monkeypatch.setattr(budget, "models", lambda X, y: {"tiny": tiny()})
    out = tmp_path / "budget.md"
    budget.main(["--limits", f"{LIMIT:g}", "--images", "2", "--seed", "7", "--out", str(out)])
    text = out.read_text()
    assert f"`python -m bench.budget --kinds abductive,contrastive --limits {LIMIT:g} --images 2 --seed 7`" in text
    assert "load average" in text and "held out" in text.lower()
    header = "| " + " | ".join(budget.HEADERS)
    table = [line for line in text.splitlines() if line.startswith("| tiny")]
    summary, calls = table[:2], table[2:]
    assert [line.split("|")[2].strip() for line in summary] == ["abductive", "contrastive"]
    assert len(calls) == 4 and header.split(" | ")[0] in text
    columns = {name: index for index, name in enumerate(budget.HEADERS)}
    for line in calls:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert cells[columns["≤ T + max(2, 10%)"]] == "yes"
        assert int(cells[columns["image"]]) in set(budget.split()[4].tolist())
        if cells[columns["kind"]] == "abductive":
            assert int(cells[columns["size"]]) >= 1  # never empty for an AXp
        if cells[columns["proved"]] == "True":
            assert cells[columns["size"]] == cells[columns["lower"]] == cells[columns["upper"]]
        if cells[columns["certified"]] == "True":
            assert cells[columns["re-check (s)"]].startswith("accepted")
        else:
            assert cells[columns["certificate"]]
    for line in summary:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert cells[2] == "2" and cells[3] == "2/2"

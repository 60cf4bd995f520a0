"""The threshold and box a command judges with (issue 26): where they come from, recorded on every
output line, used by `check` on an `explain` file, a constant prediction said aloud, and the rows
a command works on (`--inputs -`, `--rows`)."""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from cardinal.verify.cli import main
from cardinal.verify.settings import Flags, Recorded, constant_note, resolve
from cardinal.verify.testing import assert_explanations

from cardinal.domain import Domain
from cardinal.network import Metadata, Network

DESIGN = {
    "format": "cardinal.network/1",
    "layers": [
        {"weight": [[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]], "bias": [-1.0, 0.0], "activation": "relu"},
        {"weight": [[1.0, 0.6]], "bias": [0.0], "activation": "identity"},
    ],
}


def design(output: str = "identity", metadata: dict | None = None) -> Network:
    document = json.loads(json.dumps(DESIGN))
    document["layers"][-1]["activation"] = output
    if metadata is not None:
        document["metadata"] = metadata
    return Network.from_json(document)


def lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """The design network plain, with a sigmoid output, and with metadata threshold 0.5; inputs."""
    paths = {"plain": tmp_path / "plain.json", "sigmoid": tmp_path / "sigmoid.json", "meta": tmp_path / "meta.json"}
    design().save(paths["plain"])
    design("sigmoid").save(paths["sigmoid"])
    design(metadata={"threshold": 0.5}).save(paths["meta"])
    paths["inputs"] = tmp_path / "x.csv"
    paths["inputs"].write_text("a,b,c\n1,1,1\n0.2,0.9,1\n0,0,0\n")
    return paths


# ---------------------------------------------------------------------------- a constant prediction
def test_a_sigmoid_output_at_threshold_zero_is_said_to_be_constant(files, capsys: pytest.CaptureFixture) -> None:
    assert main(["explain", str(files["sigmoid"]), "--inputs", str(files["inputs"]), "--kind", "contrastive"]) == 0
    captured = capsys.readouterr()
    assert "warning: constant prediction" in captured.err and "the output layer is sigmoid" in captured.err
    records = lines(captured.out)
    assert all(not record["exists"] and record["prediction"] == 1 for record in records)
    assert all(record["notes"][0].startswith("constant prediction") for record in records)
    assert all(record["threshold"] == 0.0 for record in records)
    # at a threshold inside the output's range nothing is said
    assert main(["explain", str(files["sigmoid"]), "--inputs", str(files["inputs"]), "--threshold", "0.7"]) == 0
    captured = capsys.readouterr()
    assert "constant" not in captured.err and all(record["notes"] == [] for record in lines(captured.out))


def test_constant_note_rests_on_an_exact_bound_of_f_over_the_box() -> None:
    net = design()  # f ranges over [0, 1.6] on [0, 1]^3
    unit = Domain.unit(3)
    assert constant_note(net, unit, 0.5) is None
    assert constant_note(net, unit, -1e-300) is not None  # f ≥ 0 > t: every prediction 1
    assert "every prediction is 0" in constant_note(net, unit, 1.6)  # f ≤ 1.6 = t exactly: p = 0 everywhere
    assert constant_note(net, unit, np.nextafter(1.6, 0)) is None  # f(1, 1, 1) = 1.6 > t
    assert constant_note(net, Domain.broadcast(0.0, 0.5, 3), 0.7) is not None  # a smaller box: f ≤ 0.3


# ---------------------------------------------------------------------------- where the threshold comes from
def test_explain_certify_check_take_the_metadata_threshold_and_say_so(files, tmp_path: Path, capsys) -> None:
    args = ["--inputs", str(files["inputs"]), "--kind", "contrastive"]
    assert main(["explain", str(files["meta"]), *args]) == 0
    captured = capsys.readouterr()
    assert f"using threshold 0.5 (from {files['meta']}'s metadata)" in captured.err
    explained = lines(captured.out)
    assert [record["features"] for record in explained] == [[0, 1, 2], [2], [2]] and explained[0]["threshold"] == 0.5
    assert main(["certify", str(files["meta"]), *args, "--cases", str(tmp_path / "cases")]) == 0
    assert [record["threshold"] for record in lines(capsys.readouterr().out)] == [0.5] * 3
    claims = tmp_path / "e.jsonl"
    claims.write_text("".join(json.dumps(record) + "\n" for record in explained))
    assert main(["check", str(files["meta"]), *args, "--explanations", str(claims)]) == 0
    assert [record["verdict"] for record in lines(capsys.readouterr().out)] == ["valid", "valid", "valid"]


def test_check_judges_an_explain_file_at_the_threshold_it_records(files, tmp_path: Path, capsys) -> None:
    """Before: `check` without --threshold judged at 0 and called the valid sets invalid."""
    base = [str(files["plain"]), "--inputs", str(files["inputs"]), "--kind", "contrastive"]
    assert main(["explain", *base, "--threshold", "0.5", "--lower", "0", "--upper", "1"]) == 0
    claims = tmp_path / "e.jsonl"
    claims.write_text(capsys.readouterr().out)
    assert main(["check", *base, "--explanations", str(claims)]) == 0
    captured = capsys.readouterr()
    assert f"using threshold 0.5 (from {claims})" in captured.err
    assert [record["verdict"] for record in lines(captured.out)] == ["valid", "valid", "valid"]
    # a flag wins, with a warning that names the recorded threshold
    assert main(["check", *base, "--explanations", str(claims), "--threshold", "0.05"]) == 1
    err = capsys.readouterr().err
    assert f"warning: {claims} line 1 records threshold 0.5" in err and "--threshold 0.05 as asked" in err
    # lines that disagree need the flag
    mixed = [json.loads(line) for line in claims.read_text().splitlines()]
    mixed[1]["threshold"] = 0.25
    claims.write_text("".join(json.dumps(record) + "\n" for record in mixed))
    assert main(["check", *base, "--explanations", str(claims)]) == 2
    assert "line 1 records threshold 0.5 and line 2 threshold 0.25: pass --threshold" in capsys.readouterr().err


def test_check_takes_the_domain_an_explain_file_records(files, tmp_path: Path, capsys) -> None:
    base = [str(files["plain"]), "--inputs", str(files["inputs"]), "--kind", "contrastive", "--threshold", "1"]
    box = ["--lower", "0", "--upper", "1,1,10"]  # x2 up to 10: f(0, 0, 10) = 6 > 1
    assert main(["explain", *base, *box, "--rows", "2"]) == 0
    records = lines(capsys.readouterr().out)
    assert records[0]["domain"] == {"lower": 0.0, "upper": [1.0, 1.0, 10.0]} and records[0]["features"] == [2]
    claims = tmp_path / "e.jsonl"
    claims.write_text("".join(json.dumps(record) + "\n" for record in records))
    assert main(["check", *base, "--explanations", str(claims)]) == 0  # in [0, 1]^3 x2 alone would not flip it
    assert "domain a box of 3 features (per-feature bounds)" in capsys.readouterr().err


def test_the_domain_of_a_record_is_compact_and_reads_back() -> None:
    box = Domain.broadcast(0.0, [1.0, 2.0], 2, binary=True)
    compact = box.to_json(compact=True)
    assert compact == {"lower": 0.0, "upper": [1.0, 2.0], "binary": True}
    assert Domain.from_json(compact, n=2).same_as(box) and box.to_json() == {"lower": [0.0, 0.0], "upper": [1.0, 2.0], "binary": True}


def test_resolve_order_flag_then_file_then_metadata_then_default() -> None:
    net = design(metadata={"threshold": 0.25, "domain": {"lower": [0, 0, 0], "upper": [2, 2, 2]}})
    recorded = Recorded.of("e.jsonl", [(1, 0.5, None, None), (2, 0.5, Domain.unit(3), None)])
    assert resolve(net, "n", Flags(0.75), recorded).threshold == 0.75
    assert resolve(net, "n", Flags(), recorded).threshold == 0.5
    assert resolve(net, "n", Flags()).threshold == 0.25
    assert resolve(net.with_metadata(Metadata()), "n", Flags()).threshold == 0.0
    assert resolve(net, "n", Flags(), recorded).domain.same_as(Domain.unit(3))
    assert resolve(net, "n", Flags()).domain.same_as(Domain.broadcast(0.0, 2.0, 3))
    assert resolve(net, "n", Flags(binary=True)).domain.binary


def test_assert_explanations_takes_the_metadata_threshold(tmp_path: Path) -> None:
    model = tmp_path / "meta.json"
    design(metadata={"threshold": 0.5}).save(model)
    X = np.array([[0.0, 0.0, 0.5]])  # f(x) = 0.3: p(x) = 0 at t = 0.5 (at the old default 0 it was 1)
    judgements = assert_explanations(model, X, kind="contrastive", require="minimum")
    assert (judgements[0].prediction, judgements[0].claim.features) == (0, (2,))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert_explanations(design("sigmoid"), X, kind="abductive")
    assert any("constant prediction" in str(warning.message) for warning in caught)


# ---------------------------------------------------------------------------- which rows
def test_inputs_from_standard_input(files, monkeypatch, capsys) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"a,b,c\n1,1,1\n")))
    assert main(["explain", str(files["plain"]), "--inputs", "-", "--threshold", "0.5", "--kind", "contrastive"]) == 0
    assert [record["features"] for record in lines(capsys.readouterr().out)] == [[0, 1, 2]]


def test_rows_choose_part_of_the_file_and_keep_its_numbers(files, tmp_path: Path, capsys) -> None:
    base = [str(files["plain"]), "--inputs", str(files["inputs"]), "--threshold", "0.5", "--kind", "contrastive"]
    assert main(["explain", *base, "--rows", "2,0-0"]) == 0
    records = lines(capsys.readouterr().out)
    assert [(record["row"], record["features"]) for record in records] == [(0, [0, 1, 2]), (2, [2])]
    claims = tmp_path / "e.jsonl"
    assert main(["explain", *base, "--out", str(claims)]) == 0
    assert main(["check", *base, "--explanations", str(claims), "--rows", "1-2"]) == 0
    assert [record["row"] for record in lines(capsys.readouterr().out)] == [1, 2]
    assert main(["explain", *base, "--rows", "1,3"]) == 2
    assert "--rows 3: " in capsys.readouterr().err
    assert main(["explain", *base, "--rows", "2-1"]) == 2
    assert "'2-1' is not a range A-B" in capsys.readouterr().err


def test_a_campaign_records_and_summarises_a_constant_prediction(tmp_path: Path) -> None:
    from cardinal.verify.campaign import CampaignSettings, run_campaign
    from cardinal.verify.instance import Instance
    from cardinal.verify.record import read_records

    instance = Instance("sigmoid-at-0", "hand-built", design("sigmoid"), np.array([[1.0, 1.0, 1.0]]), 0.0, Domain.unit(3))
    run_campaign("constant", tmp_path, CampaignSettings(("enumerate",), 30.0), instances=[instance])
    records = read_records(tmp_path / "records.jsonl")
    assert len(records) == 2 and all(record.notes[0].startswith("constant prediction") for record in records)
    assert "2 records come from 1 instance(s) whose prediction is the same on the whole box" in (tmp_path / "summary.md").read_text()

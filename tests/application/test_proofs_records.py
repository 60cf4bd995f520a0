"""`proof check --records` checks each record whole (issue 49, item 2): a record whose prediction,
minimum, witness, lower bound, verdict, gap, none_exists or threshold was edited is rejected
(exit 1, the field named) while its certificate's SHA-256, problem, claim and kind still match;
honest records of certify, crosscheck and `Explanation.to_dict()` are accepted. The expected
sizes come from the Fraction oracle (`fraction_oracle`, every set tried), not from the records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cardinal.verify.campaign import CampaignSettings, run_campaign
from cardinal.verify.cli import main
from fraction_oracle import Oracle

from cardinal.checker.record import check_record
from cardinal.network import Network
from tests.application.test_campaign_methods import BOTH, _instances
from tests.conftest import DESIGN_NETWORK


def _certify(tmp_path: Path, threshold: str, rows: str = "1,1,1\n0.2,0.9,0.4\n1,0,1\n") -> tuple[Path, list[dict[str, Any]]]:
    network, inputs = tmp_path / "net.json", tmp_path / "x.csv"
    network.write_text(json.dumps(DESIGN_NETWORK))
    inputs.write_text(rows)
    folder, out = tmp_path / "proofs", tmp_path / "out.jsonl"
    assert main(["certify", str(network), "--inputs", str(inputs), "--threshold", threshold, "--solvers", "enumerate",
                 "--proof", str(folder), "--out", str(out)]) == 0  # fmt: skip
    return folder, [json.loads(line) for line in out.read_text().splitlines()]


def _check(tmp_path: Path, folder: Path, record: dict[str, Any], capsys: pytest.CaptureFixture) -> tuple[int, str]:
    """`proof check --records` of one record and the file it names: the exit code and the output."""
    records = tmp_path / "one.jsonl"
    records.write_text(json.dumps(record) + "\n")
    capsys.readouterr()
    code = main(["proof", "check", "--records", str(records), str(folder / record["proof"]["file"])])
    return code, capsys.readouterr().out


def _forgeries(record: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The record with one result field edited, each with the field `proof check` must name."""
    out = [("prediction", {"prediction": 1 - record["prediction"]}), ("threshold", {"threshold": record["threshold"] + 0.125}),
           ("verdict", {"verdict": "greedy_suboptimal" if record["verdict"] == "greedy_minimal" else "greedy_minimal"}),
           ("none_exists", {"none_exists": record["minimum"] is not None}), ("certified", {"certified": False})]  # fmt: skip
    if record["minimum"] is None:
        out.append(("greedy", {"greedy": {"features": [0], "size": 1, "seconds": 0.0, "witness": [0.0, 1.0, 1.0]}}))
        out += [("minimum", {"minimum": [0]}), ("minimum_lower", {"minimum_lower": 1}), ("minimum_proved", {"minimum_proved": True})]
        return out
    minimum = record["minimum"]
    out += [("minimum", {"minimum": sorted({*minimum, *range(3)})[: len(minimum) + 1]}),
            ("minimum_lower", {"minimum_lower": len(minimum) - 1}), ("minimum_lower", {"minimum_lower": len(minimum) + 1}),
            ("minimum_proved", {"minimum_proved": False}), ("gap", {"gap": record["gap"] + 1}),
            ("greedy_exists", {"greedy_exists": False}),
            ("greedy", {"greedy": {**record["greedy"], "features": minimum[:-1], "size": len(minimum) - 1}})]  # fmt: skip
    if len(minimum) < 3:  # another set of the same size: not an explanation here, or its witness leaves it
        other = [i for i in range(3) if i not in minimum][: len(minimum)]
        out.append(("minimum", {"minimum": sorted(other), "greedy": {**record["greedy"], "features": sorted(other)}}))
    if record["kind"] == "contrastive":
        out.append(("minimum_witness", {"minimum_witness": list(record["problem_x"])}))  # x itself: nothing flips
    else:
        out.append(("minimum_witness", {"minimum_witness": [0.0, 0.0, 0.0]}))
    return out


@pytest.mark.parametrize("threshold", ["0.5", "100"])  # 100: no input flips, no CXp at all
def test_every_edited_result_field_is_rejected_and_named(tmp_path: Path, threshold: str, capsys: pytest.CaptureFixture) -> None:
    folder, lines = _certify(tmp_path, threshold)
    named = [line for line in lines if line["proof"]["file"]]
    assert named and (threshold == "0.5" or all(line["minimum"] is None for line in named))
    rows = [[1.0, 1.0, 1.0], [0.2, 0.9, 0.4], [1.0, 0.0, 1.0]]
    for line in named:
        oracle = Oracle(Network.from_json(DESIGN_NETWORK), rows[line["row"]], float(threshold), [0.0] * 3, [1.0] * 3)
        assert oracle.sizes(line["kind"])[1] == (None if line["minimum"] is None else len(line["minimum"]))  # honest
        code, out = _check(tmp_path, folder, line, capsys)
        assert code == 0 and "accepted: " in out, out
        for field, edit in _forgeries({**line, "problem_x": line["proof"]["problem"]["x"]}):
            forged = {**line, **edit}
            code, out = _check(tmp_path, folder, forged, capsys)
            assert code == 1 and "REJECTED" in out and "does not support" in out, (field, edit, out)
            assert f"support: {field}" in out or f"support: {field.split('.')[0]}" in out, (field, edit, out)


def test_a_record_that_names_a_smaller_abductive_set_is_refuted_by_the_replay() -> None:
    """An AXp's replay is interval bisection: a set that is not an explanation is refuted, a set
    that is one is confirmed; checked against the brute force's minimum on the design network."""
    net = Network.from_json(DESIGN_NETWORK)
    x = [1.0, 1.0, 1.0]
    certificate = {"problem": {"x": x, "lower": [0.0] * 3, "upper": [1.0] * 3, "binary": False, "kind": "abductive",
                               "threshold": 0.5, "network_sha256": net.sha256}, "claim": {"no_explanation_within": 0}}  # fmt: skip
    oracle = Oracle(net, x, 0.5, [0.0] * 3, [1.0] * 3)
    assert oracle.sizes("abductive")[1] == 1
    base = {"prediction": 1, "threshold": 0.5, "minimum_proved": True, "minimum_lower": 1, "certified": True, "method": None,
            "verdict": "exact_only", "gap": None, "minimum_witness": None}  # fmt: skip
    verdicts = {i: check_record({**base, "minimum": [i]}, certificate, DESIGN_NETWORK) for i in range(3)}
    for i, why in verdicts.items():
        assert (why is None) == bool(oracle.valid("abductive", (i,))), (i, why)
        assert why is None or why.startswith("minimum: not an abductive explanation")


def test_crosscheck_records_with_both_explainers_are_accepted(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """crosscheck's records of one input with the same claim share one certificate: each is checked."""
    proofs = tmp_path / "proofs"
    result = run_campaign("tiny", tmp_path / "run", CampaignSettings(("enumerate",), 30.0, methods=BOTH, proof=proofs), instances=[_instances()[0]])
    assert result.rejected_proofs == 0
    files = sorted(proofs.glob("*.proof.json"))
    assert files
    capsys.readouterr()
    assert main(["proof", "check", "--records", str(tmp_path / "run" / "records.jsonl"), *map(str, files)]) == 0
    said = capsys.readouterr().out
    assert said.count("accepted: ") == len(files) and said.count("  record: ") > len(files)


def test_check_records_are_checked_whole(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`check --require minimum --proof` records (features, size, witness, verdict minimum): the
    honest ones are accepted, each edited result field is rejected and named."""
    network, inputs, claims = tmp_path / "net.json", tmp_path / "x.csv", tmp_path / "ex.jsonl"
    network.write_text(json.dumps(DESIGN_NETWORK))
    inputs.write_text("1,1,1\n0.2,0.9,0.4\n")
    claims.write_text('{"row":0,"kind":"contrastive","features":[0,2]}\n{"row":1,"kind":"contrastive","features":[0]}\n'
                      '{"row":0,"kind":"abductive","features":[2]}\n')  # fmt: skip
    folder, out = tmp_path / "proofs", tmp_path / "out.jsonl"
    assert main(["check", str(network), "--inputs", str(inputs), "--threshold", "0.5", "--explanations", str(claims),
                 "--require", "minimum", "--solvers", "enumerate", "--proof", str(folder), "--out", str(out)]) == 0  # fmt: skip
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(line["proof"]["file"] for line in lines)
    for line in lines:
        code, said = _check(tmp_path, folder, line, capsys)
        assert code == 0 and "accepted: " in said, said
        forgeries = [("prediction", {"prediction": 1 - line["prediction"]}), ("size", {"size": line["size"] + 1}),
                     ("verdict", {"verdict": "valid"}), ("features", {"features": [1] if line["features"] != [1] else [0]})]
        if line["kind"] == "contrastive":
            forgeries.append(("witness", {"witness": line["proof"]["problem"]["x"]}))
        for field, edit in forgeries:
            code, said = _check(tmp_path, folder, {**line, **edit}, capsys)
            assert code == 1 and f"does not support: {field}: " in said, (field, said)


@pytest.mark.parametrize("with_records", [True, False])
def test_a_certificate_path_that_names_no_file_is_named_not_the_records(
    tmp_path: Path, with_records: bool, capsys: pytest.CaptureFixture
) -> None:
    """A shell glob that matched nothing reaches `proof check` as written (issue 51): the one-line
    error names that path as the missing certificate, and does not blame the records file, which
    is well formed and names real certificates."""
    folder, _ = _certify(tmp_path, "0.5")
    records = tmp_path / "out.jsonl"
    pattern = str(folder / "*.proof.jsn")
    capsys.readouterr()
    files = sorted(map(str, folder.glob("*.proof.json")))
    assert files
    code = main(["proof", "check", *(["--records", str(records)] if with_records else []), *files, pattern])
    assert code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and f"no such certificate file: {pattern}" in lines[0], captured.err
    assert "a pattern that matched no file" in lines[0] and str(records) not in lines[0]
    assert captured.out == ""  # refused before any certificate is checked

"""Certificates by default: certify (and check --require minimum) write them beside --out, or in
./cardinal-proofs/ when the lines go to stdout; --no-proof makes none; each record says what backs
its exact "nothing smaller" (proved_by: certificate or engine)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from cardinal.verify.cli import main


def _design(tmp_path: Path, design_network_file: Path) -> list[str]:
    inputs = tmp_path / "x.csv"
    inputs.write_text("1,1,1\n0.2,0.9,1\n")
    return [str(design_network_file), "--inputs", str(inputs), "--threshold", "0.5", "--kind", "both"]


def test_certify_writes_certificates_beside_out(tmp_path: Path, design_network_file: Path, capsys) -> None:
    out = tmp_path / "r.jsonl"
    assert main(["certify", *_design(tmp_path, design_network_file), "--out", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    files = sorted((tmp_path / "r.proofs").glob("*.proof.json"))
    assert files and (tmp_path / "r.proofs" / "networks").is_dir()
    for record in records:
        if record["proved_by"] == "certificate":
            assert record["proof"]["accepted"] and (tmp_path / "r.proofs" / record["proof"]["file"]).is_file()
        elif record["proved_by"] == "engine":
            assert record["proof"]["file"] is None and record["proof"]["reason"]
        elif record["proved_by"] == "definition":
            assert record["minimum"] == [] and record["proof"]["file"] is None
        else:
            assert not record["minimum_proved"] and record["verdict"] != "none_exists"
    assert any(r["proved_by"] == "certificate" for r in records)
    assert main(["proof", "check", "--records", str(out), *map(str, files)]) == 0


def test_without_out_they_go_to_the_working_folder(tmp_path: Path, design_network_file: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["certify", *_design(tmp_path, design_network_file)]) == 0
    assert sorted((tmp_path / "cardinal-proofs").glob("*.proof.json"))


def test_no_proof_makes_none(tmp_path: Path, design_network_file: Path, capsys) -> None:
    out = tmp_path / "r.jsonl"
    assert main(["certify", *_design(tmp_path, design_network_file), "--out", str(out), "--no-proof"]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert not (tmp_path / "r.proofs").exists() and not list(tmp_path.glob("**/*.proof.json"))
    assert all("proof" not in r for r in records)
    assert {r["proved_by"] for r in records if r["minimum_proved"] and r["minimum"]} == {"engine"}


def test_no_proof_with_proof_is_a_usage_error(tmp_path: Path, design_network_file: Path, capsys) -> None:
    assert main(["certify", *_design(tmp_path, design_network_file), "--no-proof", "--proof", str(tmp_path / "p")]) == 2
    assert "--no-proof" in capsys.readouterr().err and not (tmp_path / "p").exists()


@pytest.mark.parametrize("require", ["valid", "minimum"])
def test_check_makes_them_only_for_minimum(tmp_path: Path, design_network_file: Path, capsys, require: str) -> None:
    explanations = tmp_path / "e.jsonl"
    assert main(["explain", *_design(tmp_path, design_network_file), "--out", str(explanations)]) == 0
    out = tmp_path / "c.jsonl"
    argv = ["check", *_design(tmp_path, design_network_file), "--explanations", str(explanations), "--require", require]
    main([*argv, "--out", str(out)])
    assert (tmp_path / "c.proofs").exists() == (require == "minimum")


def test_the_summary_counts_files_and_the_certified_verdicts_without_one(
    tmp_path: Path, design_network_file: Path, capsys
) -> None:
    """`certified` in a record is its verdict's exact certification, not a certificate file (issue
    51): certify's summary line counts the files written, and among the results without one, those
    whose verdict is certified, with the reasons, so that "0 files" never reads as "nothing proved"."""
    out = tmp_path / "r.jsonl"
    capsys.readouterr()
    radius = ["--radius", "0.001"]  # nothing flips in so small a ball: empty AXps, proved by definition
    assert main(["certify", *_design(tmp_path, design_network_file), *radius, "--out", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    files = [r for r in records if r["proof"]["file"] is not None]
    without = [r for r in records if r["proof"]["file"] is None]
    assert files and without and any(r["certified"] for r in without), records
    summary = [line for line in capsys.readouterr().err.splitlines() if "certificate file(s)" in line]
    folder = tmp_path / "r.proofs"
    certified = sum(r["certified"] for r in without)
    assert summary == [
        f"{len(files)} certificate file(s) written in {folder}/, {len(files)} accepted by the checker; "
        f"{len(without)} result(s) without one, {certified} of them with a certified verdict "
        f"('certified' is the verdict's exact check, not a file); why none: "
        + "; ".join(f"{reason} ({n})" for reason, n in Counter(r["proof"]["reason"] for r in without).most_common())
    ]

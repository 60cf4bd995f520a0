"""Certificates bound to their problem (issue 38): `cardinal proof check` states the claim in
full, `--records` binds each file to its record (SHA-256, problem, claim, kind), `--proof` never
reports an acceptance that `proof check` would not repeat (no link followed out of the folder), a
certificate of the wrong shape is one line and exit 2, and the checker's work is bounded (size
limits read before the numbers, a time limit that never ends in "accepted")."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
from cardinal.verify.cli import main

from cardinal import checker
from tests.conftest import DESIGN_NETWORK


def _run(tmp_path: Path, *extra: str) -> tuple[Path, Path]:
    """certify --proof on the design network (three rows, both kinds): the folder and the records."""
    network, inputs = tmp_path / "net.json", tmp_path / "x.csv"
    network.write_text(json.dumps(DESIGN_NETWORK))
    inputs.write_text("1,1,1\n0.2,0.9,0.4\n1,0,1\n")
    folder, out = tmp_path / "proofs", tmp_path / "out.jsonl"
    code = main(["certify", str(network), "--inputs", str(inputs), "--threshold", "0.5", "--solvers", "enumerate",
                 "--proof", str(folder), "--out", str(out), *extra])  # fmt: skip
    assert code == 0
    return folder, out


def test_proof_check_states_the_claim_in_full(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder, _ = _run(tmp_path)
    capsys.readouterr()
    path = folder / "row1-contrastive.proof.json"
    document = json.loads(path.read_text())
    assert main(["proof", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"network: sha256 {document['problem']['network_sha256']} (3 × 2 × 1, activations relu, identity)" in out
    assert "x: [0.2, 0.9, 0.4]" in out
    assert "lower [0.0, 0.0, 0.0], upper [1.0, 1.0, 1.0]" in out and "box (real" in out
    assert "p = 1 iff f > threshold = 0.5" in out
    assert "claim: no contrastive explanation of at most 0 feature(s) (kind contrastive), method shortcut-tree" in out


def test_records_bind_each_certificate_and_a_swapped_file_is_rejected(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder, out = _run(tmp_path)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    entries = {line["proof"]["file"]: line["proof"] for line in lines if line["proof"]["file"]}
    files = sorted(folder.glob("*.proof.json"))
    assert len(files) == len(entries) == 6
    for path in files:
        document = json.loads(path.read_text())
        assert entries[path.name]["problem"] == document["problem"] and entries[path.name]["claim"] == document["claim"]
    capsys.readouterr()
    assert main(["proof", "check", "--records", str(out), *map(str, files)]) == 0  # untouched: every one accepted
    said = capsys.readouterr().out
    assert said.count("accepted: ") == 6 and f"record: {out} line 1 (row 0, contrastive)" in said
    swapped = tmp_path / "swapped"
    shutil.copytree(folder, swapped)
    first, second = swapped / "row0-contrastive.proof.json", swapped / "row1-contrastive.proof.json"
    first.write_bytes((folder / second.name).read_bytes())
    second.write_bytes((folder / first.name).read_bytes())
    assert main(["proof", "check", str(first), str(second)]) == 0  # without the records, each is a valid certificate
    capsys.readouterr()
    assert main(["proof", "check", "--records", str(out), str(first), str(second)]) == 1
    said = capsys.readouterr().out.splitlines()
    assert len(said) == 2 and all("REJECTED: not the certificate" in line for line in said)
    assert said[0].startswith(f"{first}: REJECTED") and f"{out} line 1 (row 0, contrastive)" in said[0]
    # a record that states another problem than the file (same bytes named, problem edited) is rejected too
    edited = [dict(line, proof={**line["proof"], "problem": {**line["proof"]["problem"], "x": [0.0, 0.0, 0.0]}})
              if line["proof"]["file"] == "row2-contrastive.proof.json" else line for line in lines]  # fmt: skip
    (tmp_path / "edited.jsonl").write_text("".join(json.dumps(line) + "\n" for line in edited))
    assert main(["proof", "check", "--records", str(tmp_path / "edited.jsonl"), str(folder / "row2-contrastive.proof.json")]) == 1
    assert "its problem is not the one" in capsys.readouterr().out
    assert main(["proof", "check", "--records", str(out), str(tmp_path / "net.json")]) == 2  # no record names it
    assert "no record of" in capsys.readouterr().err


def test_a_networks_link_is_refused_by_proof_and_by_proof_check(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`--proof` checked its certificates against the network in memory while `networks/` (a link)
    held another one: it reported them accepted, and `proof check` then failed. Now `--proof`
    refuses the link before any work, and `proof check` never reads a network through one."""
    digest = json.loads(json.dumps(checker.network_sha256(DESIGN_NETWORK)[0]))
    other = copy.deepcopy(DESIGN_NETWORK)
    other["layers"][1]["weight"][0][1] = 0.7
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / f"{digest}.json").write_text(json.dumps(other))
    folder = tmp_path / "proofs"
    folder.mkdir()
    (folder / "networks").symlink_to(outside)
    network, inputs = tmp_path / "net.json", tmp_path / "x.csv"
    network.write_text(json.dumps(DESIGN_NETWORK))
    inputs.write_text("1,1,1\n")
    base = ["certify", str(network), "--inputs", str(inputs), "--threshold", "0.5", "--solvers", "enumerate"]
    assert main([*base, "--proof", str(folder)]) == 2
    assert "symbolic link" in capsys.readouterr().err and not list(folder.glob("*.proof.json"))
    (folder / "networks").unlink()
    assert main([*base, "--proof", str(folder)]) == 0
    stored = folder / "networks" / f"{digest}.json"
    stored.write_text(json.dumps(other))  # a stale file of the same name is replaced, not trusted
    assert main([*base, "--proof", str(folder)]) == 0 and json.loads(stored.read_text()) == DESIGN_NETWORK
    shutil.move(folder / "networks", outside / "real")
    (folder / "networks").symlink_to(outside / "real")
    capsys.readouterr()
    assert main(["proof", "check", str(folder / "row0-contrastive.proof.json")]) == 2
    err = capsys.readouterr().err
    assert "networks is a symbolic link" in err and err.count("\n") == 1

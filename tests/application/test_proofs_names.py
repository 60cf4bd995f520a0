"""Certificates are never replaced (issue 49, item 1): every certificate's file name holds its
SHA-256, so one `Explainer` asked twice, or two `certify` runs into one `--proof` folder, keep
every answer's certificate; `Proof.check()` checks that the file is this answer's (its SHA-256
and problem), and `to_dict()` binds it as certify's records do, so `proof check --records`
accepts a Python record. Each file is read back here with `json` and `hashlib` alone."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from cardinal.verify import proofs
from cardinal.verify.cli import main

import cardinal
from cardinal.errors import InputError
from cardinal.network import Network
from tests.conftest import DESIGN_NETWORK

X1, X2 = [1.0, 1.0, 1.0], [1.0, 0.0, 1.0]  # two inputs whose CXps both have certificates (claims k = 1, k = 0)


def test_an_explainer_asked_twice_keeps_both_certificates(tmp_path: Path) -> None:
    folder = tmp_path / "proofs"
    with cardinal.Explainer(Network.from_json(DESIGN_NETWORK), threshold=0.5, proof_dir=folder, time_limit=30) as explainer:
        first = explainer.explain(np.array(X1), "contrastive")
        second = explainer.explain(np.array(X2), "contrastive")
    assert first.certificate is not None and second.certificate is not None
    assert first.certificate.path != second.certificate.path
    for answer, x in ((first, X1), (second, X2)):
        data = answer.certificate.path.read_bytes()
        assert json.loads(data)["problem"]["x"] == x  # each file is still about its own input
        assert hashlib.sha256(data).hexdigest() == answer.certificate.sha256 == answer.to_dict()["proof"]["sha256"]
        assert answer.certificate.path.name == answer.to_dict()["proof"]["file"]
        assert answer.certificate.check()
    # the first answer's file replaced by the second's certificate: a valid certificate, but not this answer's
    first.certificate.path.write_bytes(second.certificate.path.read_bytes())
    assert main(["proof", "check", str(first.certificate.path)]) == 0
    assert not first.certificate.check() and second.certificate.check()


def test_python_records_pass_proof_check_records(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = tmp_path / "proofs"
    answers = [
        cardinal.explain(Network.from_json(DESIGN_NETWORK), np.array(x), kind, threshold=0.5, proof_dir=folder, time_limit=30)
        for x in (X1, X2) for kind in ("contrastive", "abductive")
    ]  # fmt: skip
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(answer.to_dict()) + "\n" for answer in answers))
    files = [answer.certificate.path for answer in answers if answer.certificate is not None]
    assert len(set(files)) == len(files) >= 3 and sorted(folder.glob("*.proof.json")) == sorted(files)
    capsys.readouterr()
    assert main(["proof", "check", "--records", str(records), *map(str, files)]) == 0, capsys.readouterr().out
    assert capsys.readouterr().out.count("accepted: ") == len(files)


def _certify(tmp_path: Path, rows: str, folder: Path, out: Path) -> list[dict]:
    network, inputs = tmp_path / "net.json", tmp_path / f"{out.stem}.csv"
    network.write_text(json.dumps(DESIGN_NETWORK))
    inputs.write_text(rows)
    assert main(["certify", str(network), "--inputs", str(inputs), "--threshold", "0.5", "--solvers", "enumerate",
                 "--kind", "contrastive", "--proof", str(folder), "--out", str(out)]) == 0  # fmt: skip
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_two_certify_runs_into_one_folder_keep_every_certificate(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = tmp_path / "proofs"
    first = _certify(tmp_path, "1,1,1\n", folder, tmp_path / "a.jsonl")
    second = _certify(tmp_path, "1,0,1\n", folder, tmp_path / "b.jsonl")
    again = _certify(tmp_path, "1,1,1\n", folder, tmp_path / "c.jsonl")  # the same question: the same file, reused
    named = [line["proof"]["file"] for line in (*first, *second)]
    assert all(named) and len(set(named)) == 2
    assert [again[0]["proof"][key] for key in ("file", "sha256")] == [first[0]["proof"][key] for key in ("file", "sha256")]
    assert sorted(path.name for path in folder.glob("*.proof.json")) == sorted(named)
    capsys.readouterr()
    for records, line in ((tmp_path / "a.jsonl", first[0]), (tmp_path / "b.jsonl", second[0])):
        path = folder / line["proof"]["file"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == line["proof"]["sha256"]
        assert main(["proof", "check", "--records", str(records), str(path)]) == 0


def test_a_different_file_under_a_certificates_name_is_never_replaced(tmp_path: Path) -> None:
    """`save` keeps a file that holds the very certificate, and refuses one that holds anything else."""
    text = '{"format": "cardinal.proof/1"}\n'
    digest = hashlib.sha256(text.encode()).hexdigest()
    name = proofs.certificate_name("row0-contrastive", digest)
    assert name.startswith("row0-contrastive-") and digest[: proofs.NAME_DIGITS] in name
    written = proofs.Written({"file": name, "sha256": digest}, text)
    net = Network.from_json(DESIGN_NETWORK)
    proofs.save(tmp_path, written, net, embed=True)
    proofs.save(tmp_path, written, net, embed=True)  # the same bytes again: kept
    assert (tmp_path / name).read_text() == text
    (tmp_path / name).write_text("another certificate\n")
    with pytest.raises(InputError, match="never replaces"):
        proofs.save(tmp_path, written, net, embed=True)
    assert (tmp_path / name).read_text() == "another certificate\n"

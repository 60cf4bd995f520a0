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
from typing import Any

import numpy as np
import pytest
from cardinal.solvers.proof import search
from cardinal.verify import proofs
from cardinal.verify.cli import main

from cardinal import checker
from cardinal.checker import exact
from cardinal.domain import Domain
from cardinal.network import Network
from cardinal.problem import Problem
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


def _named(folder: Path, stem: str) -> Path:
    """The one certificate of `folder` written for record key `stem` ("row1-contrastive"): its
    name holds its SHA-256 as well (`proofs.certificate_name`)."""
    (path,) = folder.glob(f"{stem}-*.proof.json")
    return path


def test_proof_check_states_the_claim_in_full(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder, _ = _run(tmp_path)
    capsys.readouterr()
    path = _named(folder, "row1-contrastive")
    document = json.loads(path.read_text())
    assert main(["proof", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"network: sha256 {document['problem']['network_sha256']} (3 × 2 × 1, activations relu, identity)" in out
    assert "x: [0.2, 0.9, 0.4]" in out
    assert "lower [0.0, 0.0, 0.0], upper [1.0, 1.0, 1.0]" in out and "box (real" in out
    assert "p = 1 iff f > threshold = 0.5" in out
    method = document["proof"]["method"]  # the certificate's own (subset-split where the engine's record wrote it)
    assert f"claim: no contrastive explanation of at most 0 feature(s) (kind contrastive), method {method}" in out


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
    first, second = _named(swapped, "row0-contrastive"), _named(swapped, "row1-contrastive")
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
              if line["proof"]["file"] == _named(folder, "row2-contrastive").name else line for line in lines]  # fmt: skip
    (tmp_path / "edited.jsonl").write_text("".join(json.dumps(line) + "\n" for line in edited))
    assert main(["proof", "check", "--records", str(tmp_path / "edited.jsonl"), str(_named(folder, "row2-contrastive"))]) == 1
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
    assert main(["proof", "check", str(_named(folder, "row0-contrastive"))]) == 2
    err = capsys.readouterr().err
    assert "networks is a symbolic link" in err and err.count("\n") == 1


# ---------------------------------------------------------------------------- certificates of the wrong shape
def _certificate() -> dict[str, Any]:
    """A valid embedded shortcut-tree certificate of the design network: no CXp of 1 feature at x = 1."""
    net = Network.from_json(DESIGN_NETWORK)
    problem = Problem.make(net, np.ones(3), "contrastive", Domain(np.zeros(3), np.ones(3)), 0.5)
    certificate = search(problem, 1).certificate
    assert certificate is not None and checker.check(certificate, net.to_json()).accepted
    return {**certificate, "network": net.to_json()}


def _set(document: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(document)
    node = changed
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return changed


WRONG_SHAPES = [  # (path, value, what the one-line message names)
    (("problem", "x", 0), 10**400, "problem.x[0] must be a number a double holds exactly, got an integer of 401 digits"),
    (("problem", "threshold"), -(10**400), "problem.threshold must be a number a double holds exactly"),
    (("network", "layers"), [], "the network has no layers"),
    (("network", "layers", 0, "weight", 0), 1.0, "network layer 1: 'weight' must be a non-empty list of non-empty lists"),
    (("network", "layers", 0, "weight"), {"a": 1}, "network layer 1: 'weight' must be"),
    (("network", "layers", 0, "weight", 1), [], "network layer 1: 'weight' must be"),
    (("network", "layers", 0, "weight", 1, 0), 10**400, "network layer 1 weight row 1[0] must be a number a double holds"),
    (("network", "layers", 0, "weight", 1, 0), "0.5", "network layer 1 weight row 1[0] must be a finite number, got a string"),
    (("network", "layers", 0, "bias"), 3.0, "network layer 1 bias must be a list of 2 numbers, got a number"),
    (("network", "layers", 0, "activation"), ["relu"], "network layer 1: unknown activation a list"),
    (("network", "layers", 0, "activation"), {"name": ["relu"]}, "network layer 1: unknown activation an object"),
    (("network", "layers", 0, "activation"), {"name": "leaky_relu", "slope": "x"}, "network layer 1 slope must be a finite"),
    (("network", "layers", 0), 7, "network layer 1: 'weight' must be"),
    (("problem",), [], "a certificate needs the objects"),
    (("claim", "no_explanation_within"), 10**400, "claim must be"),
    (("proof", "method"), ["shortcut-tree"], "proof.method must be one of the seven method names"),
    (("proof", "root"), [], "a node must be an object"),
    (("proof", "root", "split"), 10**400, "not a feature index"),
]


@pytest.mark.parametrize(("path", "value", "message"), WRONG_SHAPES)
def test_a_certificate_of_the_wrong_shape_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture, path: tuple[Any, ...], value: Any, message: str
) -> None:
    document = _certificate()
    if path[-1] == "split" and "split" not in document["proof"]["root"]:
        document["proof"]["root"] = {"split": 0, "in": {"leaf": "size"}, "out": {"leaf": "size"}}
    file = tmp_path / "bad.proof.json"
    file.write_text(json.dumps(_set(document, path, value)))
    assert main(["proof", "check", str(file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_no_value_of_the_wrong_json_type_anywhere_ends_otherwise_than_in_a_refusal() -> None:
    """Every field of a valid certificate (its network too) replaced by each JSON value of another
    type or size: the checker gives a report or a `CertificateError`, never another exception."""
    document = _certificate()

    def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        return [prefix] + [path for key, child in children for path in paths(child, (*prefix, key))]

    values = [None, True, "s", 10**400, -(2**70), 1e300, [], {}, [[]], [1], {"a": 1}, [[1, 2]]]
    for path in paths(document)[1:]:
        for value in values:
            try:
                checker.check(_set(document, path, value))
            except checker.CertificateError:
                pass


# ---------------------------------------------------------------------------- bounds on work and memory
def test_size_limits_are_refused_before_the_numbers_are_read(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    document = _certificate()
    deep = copy.deepcopy(document)
    identity = {"weight": [[1.0]], "bias": [0.0], "activation": "identity"}
    deep["network"]["layers"] += [identity] * exact.MAX_LAYERS
    with pytest.raises(checker.CertificateError, match=f"layers, more than the checker's limit of {exact.MAX_LAYERS}"):
        checker.check(deep)
    wide = copy.deepcopy(document)
    wide["network"]["layers"][0]["weight"] = [[0.0] * 3] * (exact.MAX_WIDTH + 1)
    with pytest.raises(checker.CertificateError, match="past the checker's limit"):
        checker.check(wide)
    file = tmp_path / "big.proof.json"
    file.write_text(json.dumps(document))
    monkeypatch.setattr(proofs, "MAX_CERTIFICATE_BYTES", file.stat().st_size - 1)
    assert main(["proof", "check", str(file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(file) in err


def test_a_check_past_its_time_limit_is_refused_never_accepted(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    document = _certificate()
    # a leaf "all" over C(12, 6) = 924 sets of a 12-feature network: thousands of exact evaluations
    net = Network.from_json({"format": "cardinal.network/1", "layers": [
        {"weight": [[1.0] * 12], "bias": [0.0], "activation": "relu"},
        {"weight": [[1.0]], "bias": [0.0], "activation": "identity"}]})  # fmt: skip
    problem = Problem.make(net, np.ones(12), "contrastive", Domain(np.zeros(12), np.ones(12)), 0.5)
    document = {**document, "problem": {**document["problem"], "network_sha256": net.sha256, "x": [1.0] * 12,
                                        "lower": [0.0] * 12, "upper": [1.0] * 12},
                "claim": {"no_explanation_within": 6}, "network": net.to_json(),
                "proof": {"method": "shortcut-tree", "root": {"leaf": "all"}}}  # fmt: skip
    assert problem.n == 12 and checker.check(document).accepted
    file = tmp_path / "slow.proof.json"
    file.write_text(json.dumps(document))
    assert main(["proof", "check", str(file), "--time-limit", "1e-6"]) == 2
    captured = capsys.readouterr()
    assert f"{file}: not checked within 1e-06 s" in captured.err and "accepted" not in captured.out
    assert main(["proof", "check", str(file)]) == 0

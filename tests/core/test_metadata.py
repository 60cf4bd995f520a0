"""Network metadata (feature names, threshold, input scaling, domain): written by `cardinal train`,
kept through JSON and ONNX, used by explain/certify/check in place of flags, names in the output."""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path

import numpy as np
import pytest
from cardinal.verify.cli import main
from cardinal.verify.datasets import load_dataset
from cardinal.verify.train import train_monotone

from cardinal.errors import InputError
from cardinal.network import Metadata, Network


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """`cardinal train` on breast cancer (small and quick): the network file and the test inputs."""
    folder = tmp_path_factory.mktemp("trained")
    net, inputs = folder / "net.json", folder / "test.csv"
    argv = ["train", "--dataset", "breast-cancer", "--out", str(net), "--hidden", "4", "--epochs", "1", "--quiet"]
    assert main([*argv, "--export-test", str(inputs)]) == 0
    lines = inputs.read_text().splitlines()
    inputs.write_text("\n".join(lines[:9]) + "\n")  # 8 rows are enough
    return net, inputs


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_train_writes_metadata_and_explain_names_features(trained: tuple[Path, Path], tmp_path: Path) -> None:
    net_path, inputs = trained
    data = load_dataset("breast-cancer")
    metadata = Network.load(net_path).metadata
    assert metadata.feature_names == data.feature_names and metadata.threshold == 0.0
    assert metadata.scaling["min"] == list(data.feature_ranges[0]) and metadata.scaling["max"] == list(data.feature_ranges[1])
    assert metadata.domain == {"lower": [0.0] * data.n_features, "upper": [1.0] * data.n_features}
    out = tmp_path / "explain.jsonl"
    assert main(["explain", str(net_path), "--inputs", str(inputs), "--kind", "both", "--out", str(out)]) == 0
    lines = _lines(out)
    assert len(lines) == 16
    for line in lines:
        assert line["names"] == (None if line["features"] is None else [data.feature_names[i] for i in line["features"]])


def test_metadata_round_trips_and_replaces_the_flags(trained: tuple[Path, Path], tmp_path: Path) -> None:
    """A threshold and a box other than the defaults, stored in the file, give the same explanations
    as the flags do on the bare network — from JSON and from ONNX."""
    net_path, inputs = trained
    net = Network.load(net_path)
    X = np.loadtxt(inputs, delimiter=",", skiprows=1)
    threshold = float(np.median(net.forward(X).numpy()))
    upper = np.maximum(X.max(axis=0), 0.5).tolist()
    domain = {"lower": [0.0] * net.n_inputs, "upper": upper}
    with_metadata = net.with_metadata(dataclasses.replace(net.metadata, threshold=threshold, domain=domain))
    bare = Network(net.layers)
    (tmp_path / "domain.json").write_text(json.dumps(domain))
    bare.save(tmp_path / "bare.json")
    common = ["--inputs", str(inputs), "--kind", "both"]
    flags = [f"--threshold={threshold!r}", "--domain", str(tmp_path / "domain.json")]
    assert main(["explain", str(tmp_path / "bare.json"), *common, *flags, "--out", str(tmp_path / "flags")]) == 0
    expected = [{k: v for k, v in line.items()} for line in _lines(tmp_path / "flags")]
    assert "names" not in expected[0]
    for suffix in ("json", "onnx"):
        importlib.import_module("onnx") if suffix == "onnx" else None
        path = tmp_path / f"meta.{suffix}"
        with_metadata.save(path)
        loaded = Network.load(path)
        assert loaded.metadata == with_metadata.metadata and loaded.hash == net.hash
        out = tmp_path / f"out-{suffix}"
        assert main(["explain", str(path), *common, "--out", str(out)]) == 0
        got = _lines(out)
        assert [{k: v for k, v in line.items() if k != "names"} for line in got] == expected
        assert any(line["prediction"] == 1 for line in got) and any(line["prediction"] == 0 for line in got)
    # A flag still overrides the file's threshold.
    out = tmp_path / "override"
    assert main(["explain", str(tmp_path / "meta.json"), *common, "--threshold=-1e9", "--out", str(out)]) == 0
    assert all(line["prediction"] == 1 for line in _lines(out))


def test_certify_and_check_use_the_metadata(trained: tuple[Path, Path], tmp_path: Path) -> None:
    net_path, inputs = trained
    out = tmp_path / "certify.jsonl"
    assert (
        main(
            [
                "certify",
                str(net_path),
                "--inputs",
                str(inputs),
                "--out",
                str(out),
                "--cases",
                str(tmp_path / "c"),
                "--solvers",
                "highs",
            ]
        )
        == 0
    )
    names = Network.load(net_path).metadata.feature_names
    for line in _lines(out):
        if line["minimum"] is not None:
            assert line["minimum_names"] == [names[i] for i in line["minimum"]]
        if line["greedy"] is not None:
            assert line["greedy"]["names"] == [names[i] for i in line["greedy"]["features"]]
    claims = tmp_path / "claims.jsonl"
    claims.write_text(
        "".join(
            json.dumps({"row": line["row"], "kind": line["kind"], "features": line["minimum"]}) + "\n"
            for line in _lines(out)
            if line["minimum"] is not None
        )
    )
    checked = tmp_path / "check.jsonl"
    assert (
        main(
            [
                "check",
                str(net_path),
                "--inputs",
                str(inputs),
                "--explanations",
                str(claims),
                "--out",
                str(checked),
                "--solvers",
                "highs",
            ]
        )
        == 0
    )
    assert all(line["names"] == [names[i] for i in line["features"]] for line in _lines(checked) if line["features"] is not None)


def test_bad_metadata_is_refused_with_the_field(trained: tuple[Path, Path], tmp_path: Path) -> None:
    document = json.loads(trained[0].read_text())
    for field, value, message in (
        ("feature_names", ["a"], "metadata.feature_names must be a list of 30 strings"),
        ("threshold", "high", "metadata.threshold"),
        ("colour", 1, "unknown field"),
    ):
        broken = json.loads(json.dumps(document))
        broken["metadata"][field] = value
        with pytest.raises(InputError, match=message):
            Network.from_json(broken, "net.json")
    assert Metadata().to_json() == {}


def test_training_with_balanced_loss_predicts_both_classes_deterministically() -> None:
    data = load_dataset("breast-cancer")
    runs = [train_monotone(data, hidden=(4,), epochs=2, seed=1, progress=False, balanced=True) for _ in range(2)]
    assert json.dumps(runs[0].network.to_json()) == json.dumps(runs[1].network.to_json())
    predictions = runs[0].network.forward(np.array(data.X_test)).numpy() > 0
    assert 0 < predictions.mean() < 1
    assert 0.5 < runs[0].balanced_accuracy <= 1 and 0.5 < runs[0].auc <= 1

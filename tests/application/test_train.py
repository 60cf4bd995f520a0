"""Monotone training: determinism, non-negative weights, real learning, and `cardinal train`."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from cardinal.verify.cli import UsageError, build_parser
from cardinal.verify.datasets import Dataset, load_csv, load_dataset
from cardinal.verify.train import run_train, train_monotone

from cardinal.errors import InputError
from cardinal.io import read_inputs
from cardinal.network import Network


@pytest.fixture(scope="module")
def cancer() -> Dataset:
    return load_dataset("breast-cancer")


def head(data: Dataset, rows: int) -> Dataset:
    """The first `rows` training rows (the test part unchanged)."""
    return dataclasses.replace(data, X_train=data.X_train[:rows], y_train=data.y_train[:rows])


def test_same_seed_same_network_bit_for_bit(cancer: Dataset) -> None:
    small = head(cancer, 120)
    runs = [train_monotone(small, hidden=(8, 8), epochs=2, seed=seed, progress=False) for seed in (5, 5, 6)]
    documents = [json.dumps(run.network.to_json()) for run in runs]
    assert documents[0] == documents[1]
    assert documents[0] != documents[2]


def test_training_leaves_global_rng_and_threads_alone(cancer: Dataset) -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    train_monotone(head(cancer, 60), hidden=(4,), epochs=1, progress=False)
    assert torch.equal(torch.rand(3), expected)
    assert torch.get_num_threads() == threads
    assert torch.are_deterministic_algorithms_enabled() == deterministic


def test_weights_are_non_negative_and_not_all_zero(cancer: Dataset) -> None:
    result = train_monotone(head(cancer, 200), hidden=(16, 8), epochs=2, progress=False)
    net = result.network
    assert net.is_monotone and net.widths == (16, 8, 1) and net.activation_names == ("relu", "relu", "identity")
    for layer in net.layers:
        assert (layer.weight > 0).mean() > 0.2
    assert len(result.history) == 2 and result.metric == "accuracy"


def test_classifier_beats_the_constant_predictor(cancer: Dataset) -> None:
    result = train_monotone(cancer, hidden=(16, 16), epochs=5, progress=False)
    rate = cancer.y_train.mean()
    constant_loss = -(rate * np.log(rate) + (1 - rate) * np.log(1 - rate))  # BCE of the best constant
    logits = torch.tensor(result.network.forward(np.array(cancer.X_train)).numpy())
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.tensor(cancer.y_train)).item()
    assert loss < 0.6 * constant_loss  # about 0.32 against 0.66
    assert result.test_metric > result.baseline + 0.2  # about 0.89 against 0.62
    assert result.history[-1].loss < result.history[0].loss


def test_regressor_beats_the_mean(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(300, 3))
    frame = pd.DataFrame(X, columns=["x0", "x1", "x2"]).assign(y=2 * X[:, 0] + np.maximum(X[:, 1] - 0.5, 0))
    frame.to_csv(tmp_path / "reg.csv", index=False)
    result = train_monotone(load_csv(tmp_path / "reg.csv", "y"), hidden=(8,), epochs=20, lr=1e-2, progress=False)
    assert result.metric == "rmse" and result.test_metric < 0.5 * result.baseline  # about 0.045 against 0.25


def test_bad_settings_raise(cancer: Dataset) -> None:
    with pytest.raises(InputError):
        train_monotone(cancer, epochs=0, progress=False)
    with pytest.raises(InputError):
        train_monotone(cancer, hidden=(4, 0), progress=False)


def parse(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(["train", *argv])


def test_train_command_saves_network_and_exact_test_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model, inputs = tmp_path / "model.json", tmp_path / "test.csv"
    args = parse(
        ["--dataset", "breast-cancer", "--out", str(model), "--epochs", "1", "--hidden", "4", "--export-test", str(inputs)]
    )
    assert run_train(args) == 0
    printed = capsys.readouterr().out
    assert "test accuracy" in printed and "on 114 rows" in printed
    net = Network.load(model)
    assert net.is_monotone and net.widths == (4, 1)
    data = load_dataset("breast-cancer")
    assert np.array_equal(read_inputs(inputs, net.n_inputs), data.X_test)  # every double written exactly
    assert inputs.read_text().splitlines()[0].split(",")[0] == "mean radius"


def test_train_command_csv_and_flags(tmp_path: Path) -> None:
    frame = pd.DataFrame({"a": np.arange(30.0), "b": np.arange(30.0) % 7, "label": (np.arange(30) > 14).astype(int)})
    frame.to_csv(tmp_path / "d.csv", index=False)
    args = parse(["--dataset", f"csv:{tmp_path / 'd.csv'}", "--target", "label", "--out", str(tmp_path / "m.json"),
                  "--hidden", "none", "--epochs", "2", "--quiet"])  # fmt: skip
    assert run_train(args) == 0
    assert Network.load(tmp_path / "m.json").widths == (1,)
    with pytest.raises(UsageError, match="not a comma-separated list of layer widths"):
        parse(["--dataset", "heart", "--out", "m.json", "--hidden", "8,x"])


def test_a_near_constant_classifier_points_to_balanced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 26: `cardinal train --dataset loan` without --balanced gave balanced accuracy 0.51 and
    said nothing; a rare class now gets a hint, and --balanced makes it go away."""
    rng = np.random.default_rng(0)
    a = rng.random(400)
    frame = pd.DataFrame({"a": a, "b": rng.random(400), "label": (a > 0.95).astype(int)})  # 5% positives
    frame.to_csv(tmp_path / "rare.csv", index=False)
    args = ["--dataset", f"csv:{tmp_path / 'rare.csv'}", "--target", "label", "--out", str(tmp_path / "m.json"),
            "--hidden", "none", "--epochs", "1", "--quiet"]  # fmt: skip
    assert run_train(parse(args)) == 0
    assert "--balanced weights the rare class" in capsys.readouterr().out
    assert run_train(parse([*args, "--balanced", "--epochs", "30"])) == 0
    assert "--balanced weights the rare class" not in capsys.readouterr().out

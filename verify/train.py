"""Fully monotone training, as in the paper: every weight ≥ 0, so f is non-decreasing in every input.

The model is `Linear, ReLU, …, Linear` (identity output) trained with Adam; after every step all
negative weights are set to 0 (projected Adam; biases are free). Regression minimises the mean
squared error on the scaled target; classification minimises binary cross-entropy on the logit,
and the prediction is `f(x) > 0`, i.e. cardinal's default threshold 0. With `balanced`, the
positive class is weighted by (negatives / positives) of the training part (`pos_weight`), so a
rare class is not traded for accuracy: a model that predicts both classes. Classification is
scored by accuracy, balanced accuracy (the mean of the two classes' recalls) and ROC AUC.

The saved network carries metadata (`cardinal.network.Metadata`): the feature names, the threshold
(0 for classification), the input scaling and the unit domain, so `explain`, `certify` and
`check` need no flags to read it as it was trained.

Training is bit-for-bit reproducible for a seed: initialisation and shuffling draw from a seeded
generator (the global torch RNG is left as it was) and the arithmetic runs on one CPU thread.
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import math
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from cardinal.errors import InputError
from cardinal.network import Metadata, Network
from cardinal.validate import output_file

from .datasets import Dataset, load_dataset

NEAR_CONSTANT = 0.6  # a balanced accuracy below this: the classifier predicts nearly one class


@dataclass(frozen=True)
class EpochStats:
    """One epoch of training: its number (from 1), mean loss, test metric, and seconds since the start."""

    epoch: int
    loss: float  # mean training loss over the epoch's batches
    test_metric: float
    seconds: float


@dataclass(frozen=True, eq=False)
class TrainResult:
    """A trained monotone network and its scores: `metric` is "rmse" (scaled target) or "accuracy";
    `baseline` is the test metric of the best constant predictor fitted on the training part."""

    network: Network
    metric: str
    test_metric: float
    train_metric: float
    baseline: float
    seconds: float
    history: tuple[EpochStats, ...]
    balanced_accuracy: float | None = None  # classification, on the test part
    auc: float | None = None  # classification: ROC AUC of f on the test part


def build_model(hidden: Sequence[int], X: torch.Tensor, y: torch.Tensor, task: str, generator: torch.Generator) -> nn.Sequential:
    """`Linear, ReLU, …, Linear` with non-negative weights, initialised on the training data X [N, n], y [N].

    Weights start as |N(0, 1)|. Then, layer by layer over X, each unit's weights are scaled so
    that its pre-activation has standard deviation 1, and its bias is minus the median, so every
    ReLU is active on half of the training inputs (plain kaiming init clamped at 0 kills half the
    weights and leaves every ReLU on). The output starts at the training mean of y (regression,
    spread 0.1) or at the log-odds of the positive rate (classification, spread 1).
    """
    widths = [X.shape[1], *hidden, 1]
    modules: list[nn.Module] = []
    z = X
    with torch.no_grad():
        for layer, (fan_in, width) in enumerate(itertools.pairwise(widths), start=1):
            linear = nn.Linear(fan_in, width)
            linear.weight.copy_(torch.randn(width, fan_in, generator=generator).abs())
            h = z @ linear.weight.T
            spread = h.std(dim=0)
            spread = torch.where(spread > 1e-12, spread, 1.0)  # a unit constant on X keeps its weights
            if layer < len(widths) - 1:
                linear.weight.div_(spread[:, None])
                linear.bias.copy_(-(h / spread).median(dim=0).values)
                z = torch.relu(linear(z))
                modules += [linear, nn.ReLU()]
            else:
                scale = 0.1 if task == "regression" else 1.0
                rate = float(y.mean().clamp(1e-3, 1 - 1e-3))
                start = float(y.mean()) if task == "regression" else math.log(rate / (1 - rate))
                linear.weight.mul_(scale / spread[:, None])
                linear.bias.copy_(start - (h * scale / spread).mean(dim=0))
                modules.append(linear)
    return nn.Sequential(*modules)


def score(network: Network, X: np.ndarray, y: np.ndarray, task: str) -> float:
    """RMSE (regression) or accuracy of `f(x) > 0` (classification) of X [N, n] against y [N]."""
    output = network.forward(np.array(X)).numpy()  # a writable copy: torch warns on read-only arrays
    if task == "regression":
        return float(np.sqrt(np.mean((output - y) ** 2)))
    return float(np.mean((output > 0) == (y > 0.5)))


def class_scores(network: Network, X: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Balanced accuracy of `f(x) > 0` and ROC AUC of f on X [N, n] against 0/1 labels y [N]."""
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score

    output = network.forward(np.array(X)).numpy()
    labels = y > 0.5
    return float(balanced_accuracy_score(labels, output > 0)), float(roc_auc_score(labels, output))


def metadata_of(dataset: Dataset) -> Metadata:
    """What a network trained on `dataset` should carry: names, threshold, scaling, unit box."""
    n = dataset.n_features
    scaling = None
    if dataset.feature_ranges is not None:
        low, high = dataset.feature_ranges
        scaling = {"min": list(low), "max": list(high), "flipped": list(dataset.flipped)}
    return Metadata(
        feature_names=dataset.feature_names,
        threshold=0.0 if dataset.task == "classification" else None,
        scaling=scaling,
        domain={"lower": [0.0] * n, "upper": [1.0] * n},
    )


def baseline_score(dataset: Dataset) -> float:
    """Test metric of the training mean (regression) or the training majority class (classification)."""
    if dataset.task == "regression":
        return float(np.sqrt(np.mean((dataset.y_test - dataset.y_train.mean()) ** 2)))
    majority = float(dataset.y_train.mean() >= 0.5)
    return float(np.mean(dataset.y_test == majority))


def train_monotone(
    dataset: Dataset,
    hidden: Sequence[int] = (64, 64),
    epochs: int = 10,
    seed: int = 0,
    lr: float = 1e-3,
    batch_size: int = 32,
    progress: bool = True,
    balanced: bool = False,
) -> TrainResult:
    """Train a fully monotone ReLU network on `dataset` (every feature treated as non-decreasing);
    `balanced`: weight the positive class by negatives / positives (classification only).

    The bar (tqdm, on stderr) shows each epoch; it is off when `progress` is False or stderr is
    not a terminal. Same arguments and data → the identical network (bit for bit).
    """
    if epochs < 1 or batch_size < 1 or lr <= 0 or any(width < 1 for width in hidden):
        raise InputError(f"need epochs, batch size, lr and hidden widths > 0; got {epochs}, {batch_size}, {lr}, {tuple(hidden)}")
    start = time.perf_counter()
    generator = torch.Generator().manual_seed(seed)
    X = torch.tensor(dataset.X_train, dtype=torch.float32)
    y = torch.tensor(dataset.y_train, dtype=torch.float32)
    history = []
    with torch.random.fork_rng(devices=[]), _reproducible():
        model = build_model(hidden, X, y, dataset.task, generator)
        optimiser = torch.optim.Adam(model.parameters(), lr=lr)
        loss_function = _loss(dataset.task, y, balanced)
        batches, show = (len(X) + batch_size - 1) // batch_size, progress and sys.stderr.isatty()
        for epoch in range(1, epochs + 1):
            with tqdm(total=batches, desc=f"epoch {epoch}/{epochs}", unit="batch", disable=not show) as bar:
                order = torch.randperm(len(X), generator=generator)
                loss = _epoch(model, optimiser, loss_function, X, y, order.split(batch_size), bar)
                network = Network.from_torch(model)
                test_metric = score(network, dataset.X_test, dataset.y_test, dataset.task)
                bar.set_postfix(loss=f"{loss:.4g}", test=f"{test_metric:.4g}")
            history.append(EpochStats(epoch, loss, test_metric, time.perf_counter() - start))
    network = network.with_metadata(metadata_of(dataset))
    classification = dataset.task == "classification"
    balanced_accuracy, auc = class_scores(network, dataset.X_test, dataset.y_test) if classification else (None, None)
    return TrainResult(
        balanced_accuracy=balanced_accuracy,
        auc=auc,
        network=network,
        metric="rmse" if dataset.task == "regression" else "accuracy",
        test_metric=history[-1].test_metric,
        train_metric=score(network, dataset.X_train, dataset.y_train, dataset.task),
        baseline=baseline_score(dataset),
        seconds=time.perf_counter() - start,
        history=tuple(history),
    )


def _loss(task: str, y: torch.Tensor, balanced: bool) -> nn.Module:
    """MSE (regression), or binary cross-entropy on the logit, its positive class weighted by
    negatives / positives of the training labels y [N] when `balanced`."""
    if task == "regression":
        if balanced:
            raise InputError("--balanced applies to classification only")
        return nn.MSELoss()
    if not balanced:
        return nn.BCEWithLogitsLoss()
    positives = float(y.sum())
    if positives == 0 or positives == len(y):
        raise InputError("--balanced needs both classes in the training part")
    return nn.BCEWithLogitsLoss(pos_weight=torch.tensor((len(y) - positives) / positives))


def _epoch(
    model: nn.Sequential, optimiser: torch.optim.Optimizer, loss_function: nn.Module,
    X: torch.Tensor, y: torch.Tensor, batches: Sequence[torch.Tensor], bar: tqdm,
) -> float:  # fmt: skip
    """One pass of projected Adam over the index batches; returns the mean training loss."""
    linears = [module for module in model if isinstance(module, nn.Linear)]
    total = 0.0
    for batch in batches:
        optimiser.zero_grad()
        loss = loss_function(model(X[batch])[:, 0], y[batch])
        loss.backward()
        optimiser.step()
        with torch.no_grad():
            for linear in linears:
                linear.weight.clamp_(min=0.0)
        total += loss.item() * len(batch)
        bar.update()
    return total / len(X)


@contextmanager
def _reproducible() -> Iterator[None]:
    """Run torch on one CPU thread with deterministic algorithms only, so that the sums inside
    each step depend neither on the machine's core count nor on kernel choice."""
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)


# ---------------------------------------------------------------------------- command line (flags: commands/train.py, _add_train)
def export_inputs(feature_names: Sequence[str], X: np.ndarray) -> str:
    """CSV text for `cardinal explain --inputs`: a header of feature names, then X [B, n] with every
    double written exactly (shortest round-trip repr)."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(feature_names)
    writer.writerows([repr(float(value)) for value in row] for row in X)
    return text.getvalue()


def run_train(args: argparse.Namespace) -> int:
    """`cardinal train`: load, train, save the network atomically, report the test metric."""
    from cardinal.io import write_atomic

    output_file(args.out, "--out")
    if args.export_test:
        output_file(args.export_test, "--export-test")
    dataset = load_dataset(args.dataset, data_dir=args.data_dir, target=args.target, task=args.task)
    try:
        result = train_monotone(dataset, args.hidden, args.epochs, args.seed, args.lr, args.batch_size, progress=not args.quiet,
                                balanced=args.balanced)
    except (MemoryError, RuntimeError) as error:  # torch's allocator raises RuntimeError
        if isinstance(error, RuntimeError) and "allocate" not in str(error):
            raise
        raise InputError(f"not enough memory to train hidden widths {','.join(map(str, args.hidden))}") from None
    result.network.save(args.out)
    if args.export_test:
        write_atomic(args.export_test, export_inputs(dataset.feature_names, dataset.X_test))
    shape = ",".join(map(str, args.hidden)) or "none"
    print(f"{dataset.name}: {dataset.n_features} inputs, hidden {shape}, {args.epochs} epochs, {result.seconds:.1f} s")
    line = f"test {result.metric} {result.test_metric:.4f} on {len(dataset.y_test)} rows (train {result.train_metric:.4f}"
    print(f"{line}; constant predictor {result.baseline:.4f})")
    if result.auc is not None:
        print(f"test balanced accuracy {result.balanced_accuracy:.4f}, ROC AUC {result.auc:.4f}")
        if not args.balanced and result.balanced_accuracy is not None and result.balanced_accuracy < NEAR_CONSTANT:
            print("the model predicts nearly one class (balanced accuracy near 0.5): --balanced weights the rare class")
    if dataset.target_range is not None:
        low, high = dataset.target_range
        raw = result.test_metric * (high - low)
        print(f"target {dataset.target_name} was scaled from [{low:g}, {high:g}]: test rmse {raw:.4g} in its own units")
    print(f"saved {Path(args.out)}" + (f" and test inputs {Path(args.export_test)}" if args.export_test else ""))
    return 0

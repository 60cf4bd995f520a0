"""The `classifiers` suite: models as users have them, each row over its own ε-ball (issue 27).

Four models, trained at run time with fixed seeds and cached as model files under `DIR/models/`;
the suite reads every one back through cardinal's own readers (`Network.load`), so it exercises
the path a user's file takes:

* `digits-fc` — scikit-learn's bundled 8 × 8 digits (1,797 images, 64 pixels scaled to [0, 1],
  10 classes): a ReLU classifier 64 → 16 → 10, exported with `torch.onnx.export` (an ONNX file
  with a `[N, 64]` input and 10 outputs).
* `digits-conv` — the same data through `Conv2d(1, 4, 3)` → ReLU → Flatten → `Linear(144, 10)`,
  saved whole with `torch.save` and read with `input_shape` (1, 8, 8): the conv is unrolled
  exactly into a dense layer.
* `credit-signs` — a synthetic credit table (`credit_table`: 8 features in [0, 1], approval y):
  a ReLU network 8 → 8 → 4 → 1 whose first-layer weights keep one sign per feature (increasing:
  income, savings, years employed, age; decreasing: debt ratio, late payments, inquiries, loan
  amount) and whose later weights are ≥ 0, so the model is *sign-monotone*: non-decreasing in the
  first four features, non-increasing in the last four. `f(x) > 0` approves.
* `credit-partial` — the same network and data with age and loan amount left free (weights of
  either sign): *partially monotone*, the direction of those two unknown.

The credit table is synthetic rather than a real data set so that which features are monotone is
known by construction: approval rises with income, savings and employment, falls with debt, late
payments and inquiries, and depends on age and loan amount in both directions (best at middle age;
a large loan hurts unless income is high).

Every model is trained full-batch in float64 on one thread from seeded numpy draws, and its weights
are rounded to multiples of 2^-10 (`GRID`) at the end, exactly as `examples/credit/train.py`
does, so the same seed gives the same networks (and records) on every run; the rounded weights are
exact in float32, so the float32 ONNX export loses nothing. Each model is explained at radii
0.05, 0.1 and 0.2 (`RADII`) on `ROWS` test rows, both kinds.

Explainers: both by default (`suites.SUITE_METHODS`): greedy where it applies (sign-monotone
networks: `credit-signs`) and the subset-minimal deletion explainer on every model, each answer
certified against the exact minimum (on `credit-signs` both on the same solver calls).
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from torch import nn

from cardinal.domain import Domain
from cardinal.errors import InputError
from cardinal.formats.torch_io import torch_bytes
from cardinal.io import write_atomic
from cardinal.network import Network

from .instance import Instance

GRID = 2.0**-10  # trained weights and biases are rounded to multiples of this
RADII = (0.05, 0.1, 0.2)
ROWS = 3  # test rows per model and radius (the suite: 72 explanations, 90 records with both explainers)
MODELS = ("digits-fc", "digits-conv", "credit-signs", "credit-partial")
CREDIT_FEATURES = ("income", "savings", "years_employed", "age", "debt_ratio", "late_payments", "inquiries", "loan_amount")
# First-layer weight sign per credit feature: +1 increasing, −1 decreasing, 0 free.
SIGNS = {
    "credit-signs": (1, 1, 1, 1, -1, -1, -1, -1),
    "credit-partial": (1, 1, 1, 0, -1, -1, -1, 0),
}


def classifier_instances(
    workdir: Path, rows: int = ROWS, radii: tuple[float, ...] = RADII, names: tuple[str, ...] = MODELS
) -> Iterator[Instance]:
    """The suite's instances: each model of `names` (built into `workdir/models/` unless there)
    read back, its first `rows` test rows (a seeded split), one instance per radius."""
    for name, (path, X) in _models(workdir / "models", names).items():
        net = Network.load(path, input_shape=(1, 8, 8) if path.suffix == ".pt" else None)
        for radius in radii:
            yield Instance(
                f"{name}-r{radius:g}",
                f"classifiers:{name}",
                net,
                X[:rows],
                None if net.n_outputs > 1 else 0.0,
                Domain.unit(net.n_inputs),
                radius=radius,
            )


def _models(models: Path, names: tuple[str, ...]) -> dict[str, tuple[Path, np.ndarray]]:
    """name → (model file, test rows [B, n]) for `names`; each file trained and written unless present."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    X, y = digits.data / 16.0, digits.target
    order = np.random.default_rng(0).permutation(len(X))
    train, test = order[:1400], order[1400:]
    credit_X, credit_y = credit_table(3000, np.random.default_rng(1))
    found = {
        "digits-fc": (models / "digits-fc.onnx", X[test]),
        "digits-conv": (models / "digits-conv.pt", X[test]),
        "credit-signs": (models / "credit-signs.onnx", credit_X[2000:]),
        "credit-partial": (models / "credit-partial.onnx", credit_X[2000:]),
    }
    found = {name: found[name] for name in names}
    for name, (path, _) in found.items():
        if path.exists():
            continue
        models.mkdir(parents=True, exist_ok=True)
        if name == "digits-fc":
            model = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))
            _fit(model, X[train], y[train], classes=10, seed=2)
            data = _onnx_bytes(model, 64, path)
        elif name == "digits-conv":
            model = nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(144, 10))
            _fit(model, X[train], y[train], classes=10, seed=3)
            data = torch_bytes(nn.Sequential(*list(model)[1:]))  # whole, without the Unflatten: the reader is told the shape
        else:
            model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 1))
            _fit(model, credit_X[:2000], credit_y[:2000], classes=1, seed=4, signs=SIGNS[name])
            data = _onnx_bytes(model, 8, path)
        write_atomic(path, data, root=models.parent)  # whole or not at all: a killed run leaves no half model
    return found


def credit_table(rows: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic applicants X [rows, 8] in [0, 1] (columns `CREDIT_FEATURES`, 2 decimals) and
    approvals y [rows] in {0, 1} (module docstring)."""
    X = np.round(rng.beta(2.0, 2.0, size=(rows, len(CREDIT_FEATURES))), 2)
    income, savings, employed, age, debt, late, inquiries, loan = X.T
    score = (
        0.35 * income
        + 0.15 * savings
        + 0.10 * employed
        - 0.30 * debt
        - 0.25 * late
        - 0.10 * inquiries
        - 0.40 * (age - 0.5) ** 2
        - 0.30 * loan * (1.0 - income)
    )
    y = (score + rng.normal(0.0, 0.03, size=rows) > np.median(score)).astype(np.float64)
    return X, y


def _fit(
    model: nn.Sequential, X: np.ndarray, y: np.ndarray, classes: int, seed: int, signs: tuple[int, ...] | None = None
) -> None:
    """Full-batch Adam in float64 on one thread from a seeded start; with `signs` (credit models)
    the first layer's columns are projected onto their signs and later weights onto ≥ 0 after each
    step; at the end every weight and bias is rounded to a multiple of `GRID`. X [B, n]; y [B]
    class indices (classes ≥ 2, cross-entropy) or 0/1 (classes = 1, logistic loss)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model.double()
        start = np.random.default_rng(seed)
        with torch.no_grad():
            for parameter in model.parameters():
                fan_in = int(np.prod(parameter.shape[1:])) if parameter.ndim > 1 else 1
                scale = 1.0 / np.sqrt(fan_in) if parameter.ndim > 1 else 0.0
                parameter.copy_(torch.from_numpy(start.uniform(-scale, scale, size=tuple(parameter.shape))))
        inputs = torch.tensor(X, dtype=torch.float64)
        targets = torch.tensor(y, dtype=torch.long if classes > 1 else torch.float64)
        loss_of = nn.CrossEntropyLoss() if classes > 1 else nn.BCEWithLogitsLoss()
        optimiser = torch.optim.Adam(model.parameters(), lr=0.02)
        linears = [module for module in model if isinstance(module, nn.Linear)]
        for _ in range(400):
            optimiser.zero_grad()
            output = model(inputs)
            loss = loss_of(output if classes > 1 else output[:, 0], targets)
            loss.backward()
            optimiser.step()
            if signs is not None:
                _project(linears, signs)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.copy_(torch.round(parameter / GRID) * GRID)
    finally:
        torch.set_num_threads(threads)


def _project(linears: list[nn.Linear], signs: tuple[int, ...]) -> None:
    """First-layer column i onto sign `signs[i]` (0: free); every later weight onto ≥ 0."""
    with torch.no_grad():
        first = linears[0].weight
        for i, sign in enumerate(signs):
            if sign:
                first[:, i] = first[:, i].clamp(min=0.0) if sign > 0 else first[:, i].clamp(max=0.0)
        for linear in linears[1:]:
            linear.weight.clamp_(min=0.0)


def _onnx_bytes(model: nn.Sequential, n: int, path: Path) -> bytes:
    """The ONNX file of `torch.onnx.export` (the TorchScript exporter, float32: the rounded weights
    are exact in float32) with a dynamic batch axis; failures name `path`."""
    buffer = io.BytesIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(None):
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(
                model.float(),
                torch.zeros(1, n),
                buffer,
                dynamo=False,
                input_names=["x"],
                output_names=["logits"],
                dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}},
            )
            return buffer.getvalue()
        except Exception as error:  # any exporter failure, as one line
            raise InputError(f"{path}: torch.onnx.export failed: {str(error).splitlines()[0]}") from None
        finally:
            model.double()

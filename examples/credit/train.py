"""Train the example credit model and write the files its test guards (a few seconds on a CPU).

A fully monotone ReLU network 6 → 8 → 4 → 1 scores loan applicants; `f(x) > 0` approves. Every
feature is scaled to [0, 1] so that larger is better for the applicant, and every weight is kept
≥ 0 (projected Adam), so more of any feature never turns an approval into a refusal. The data are
synthetic, drawn with a fixed seed.

    python examples/credit/train.py        # writes credit.onnx, applicants.csv, baseline.jsonl

then `python -m pytest examples/credit` (part of the test suite) checks the committed model's
explanations: the contrastive ones ("what would have to change for the other decision") exactly
minimum and equal to the baseline, the abductive ones exactly valid.

**The same model on every machine.** The data and the initial weights come from numpy's seeded
generator; training is full-batch (no shuffling), in float64, on one thread; the weights and biases
are then rounded to multiples of 2^-10 (`GRID`). Machines differ only in the last bits of float64
sums (their BLAS kernels, vector widths): perturbing the data by one ulp moves the trained weights
by about 3e-15, while the nearest rounding boundary is about 9e-6 away (`train` prints it), so the
rounded network — and with it credit.onnx, written by cardinal's own ONNX writer, and the baseline —
is the same everywhere. What it costs: float64 and one thread make training about 2.5 s of CPU
instead of well under a second in float32 on all cores (where 2 busy cores took minutes), and the
rounding moves the training accuracy by less than 0.1%.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from torch import nn

HERE = Path(__file__).resolve().parent
FEATURES = ("income", "savings", "years_employed", "repayment_history", "collateral", "credit_age")


def synthetic_applicants(rows: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """X [rows, 6] in [0, 1] (rounded to 2 decimals) and approvals y [rows] in {0, 1}."""
    X = np.round(rng.beta(2.0, 2.0, size=(rows, len(FEATURES))), 2)
    score = X @ np.array([0.30, 0.15, 0.10, 0.30, 0.05, 0.10]) + 0.2 * np.minimum(X[:, 0], X[:, 3])
    y = (score + rng.normal(0.0, 0.04, size=rows) > 0.58).astype(np.float64)
    return X, y


GRID = 2.0**-10  # the trained weights and biases are rounded to multiples of this


def train(seed: int = 0, epochs: int = 400) -> nn.Sequential:
    """Full-batch Adam on 2,000 applicants in float64 on one thread; negative weights are clamped
    to 0 after every step; at the end every weight and bias is rounded to a multiple of `GRID`."""
    X, y = synthetic_applicants(2000, np.random.default_rng(seed))
    inputs, targets = torch.tensor(X, dtype=torch.float64), torch.tensor(y, dtype=torch.float64)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 1)).double()
    linears = [module for module in model if isinstance(module, nn.Linear)]
    start = np.random.default_rng(seed + 1)  # a monotone start: small non-negative weights, zero biases
    with torch.no_grad():
        for linear in linears:
            linear.weight.copy_(torch.from_numpy(start.uniform(0.0, 0.5, size=tuple(linear.weight.shape))))
            linear.bias.zero_()
    optimiser = torch.optim.Adam(model.parameters(), lr=0.02)
    loss_function = nn.BCEWithLogitsLoss()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(epochs):
            optimiser.zero_grad()
            loss_function(model(inputs)[:, 0], targets).backward()
            optimiser.step()
            with torch.no_grad():
                for linear in linears:
                    linear.weight.clamp_(min=0.0)
    finally:
        torch.set_num_threads(threads)
    margin = round_to_grid(model)
    with torch.no_grad():
        accuracy = float(((model(inputs)[:, 0] > 0).double() == targets).double().mean())
    print(f"training accuracy {accuracy:.3f} (approval rate {y.mean():.3f}); weights rounded to multiples of 2^-10, the "
          f"nearest rounding boundary {margin:.1e} away")  # fmt: skip
    return model.eval()


def round_to_grid(model: nn.Module) -> float:
    """Round every parameter to a multiple of `GRID` in place; returns the smallest distance of a
    parameter (before rounding) to a rounding boundary, the margin against float differences."""
    margin = math.inf
    with torch.no_grad():
        for parameter in model.parameters():
            steps = parameter / GRID
            margin = min(margin, float((0.5 - (steps - steps.round()).abs()).min()) * GRID)
            parameter.copy_(steps.round() * GRID)
    return margin


def main() -> None:
    from cardinal.verify.testing import assert_explanations

    from cardinal.network import Metadata, Network

    net = Network.from_torch(train()).with_metadata(Metadata(feature_names=FEATURES, threshold=0.0))
    net.save(HERE / "credit.onnx")  # float64: the rounded weights exactly
    X, _ = synthetic_applicants(12, np.random.default_rng(1))
    header = ",".join(FEATURES)
    np.savetxt(HERE / "applicants.csv", X, delimiter=",", fmt="%.2f", header=header, comments="")
    judgements = assert_explanations(
        HERE / "credit.onnx",
        HERE / "applicants.csv",
        kind="contrastive",
        require="minimum",
        baseline=HERE / "baseline.jsonl",
        update=True,
    )
    print(f"wrote credit.onnx (network hash {net.hash}), applicants.csv and baseline.jsonl ({len(judgements)} "
          "contrastive explanations, all minimum)")  # fmt: skip


if __name__ == "__main__":
    main()

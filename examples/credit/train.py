"""Train the example credit model and write the files its test guards (about a second on a CPU).

A fully monotone ReLU network 6 → 8 → 4 → 1 scores loan applicants; `f(x) > 0` approves. Every
feature is scaled to [0, 1] so that larger is better for the applicant, and every weight is kept
≥ 0 (projected Adam), so more of any feature never turns an approval into a refusal. The data are
synthetic, drawn with a fixed seed.

    python examples/credit/train.py        # writes credit.onnx, applicants.csv, baseline.jsonl

then `python -m pytest examples/credit` (part of the test suite) checks the committed model's
explanations: the contrastive ones ("what would have to change for the other decision") exactly
minimum and equal to the baseline, the abductive ones exactly valid. Retraining changes the model;
if its explanations change, the test names every changed row until the baseline is rewritten on
purpose (`CARDINAL_UPDATE_BASELINE=1 python -m pytest examples/credit`).
"""

from __future__ import annotations

import warnings
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


def train(seed: int = 0, epochs: int = 400) -> nn.Sequential:
    """Full-batch Adam on 2,000 applicants; negative weights are clamped to 0 after every step."""
    torch.manual_seed(seed)
    X, y = synthetic_applicants(2000, np.random.default_rng(seed))
    inputs, targets = torch.tensor(X, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 1))
    linears = [module for module in model if isinstance(module, nn.Linear)]
    with torch.no_grad():  # a monotone start: small non-negative weights, zero biases
        for linear in linears:
            linear.weight.uniform_(0.0, 0.5)
            linear.bias.zero_()
    optimiser = torch.optim.Adam(model.parameters(), lr=0.02)
    loss_function = nn.BCEWithLogitsLoss()
    for _ in range(epochs):
        optimiser.zero_grad()
        loss_function(model(inputs)[:, 0], targets).backward()
        optimiser.step()
        with torch.no_grad():
            for linear in linears:
                linear.weight.clamp_(min=0.0)
    accuracy = float(((model(inputs)[:, 0] > 0).float() == targets).float().mean())
    print(f"training accuracy {accuracy:.3f} (approval rate {y.mean():.3f})")
    return model.eval()


def main() -> None:
    from cardinal.testing import assert_explanations

    model = train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(
            model, (torch.zeros(1, 6),), HERE / "credit.onnx", dynamo=False, input_names=["applicant"], output_names=["score"]
        )
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
    print(f"wrote credit.onnx, applicants.csv and baseline.jsonl ({len(judgements)} contrastive explanations, all minimum)")


if __name__ == "__main__":
    main()

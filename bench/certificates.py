"""Certificates of proved CXp minima (issue 51, item 2): written from the exact MILP's own proof
(`Outcome.subset_trees`, method subset-split) against the generic search afterwards
(`solvers.proof.search` without the record, as before).

The models of the issue's report: a scikit-learn MLPClassifier((32,), random_state=0) and a torch
CNN (Conv2d 1→4 3×3, ReLU, Linear 144→10; seeded, 200 Adam steps), both on sklearn's 8×8 digits
/ 16 (the first 1,400 of a seeded permutation to train), `--images` test images each, default
box [0, 1]^64. Per image: the exact MILP's minimum CXp (in this process), then the certificate
from its record and from the generic search (each given `--time-limit`), each checked by
`cardinal.checker`.

    python -m bench.certificates --seed 0 --images 3 --time-limit 30 --out bench/results/certificates.md
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Sequence

import numpy as np


def models(seed: int) -> tuple[dict, np.ndarray]:
    """{name: Network} and the test images [m, 64]."""
    import torch
    from sklearn.datasets import load_digits
    from sklearn.neural_network import MLPClassifier
    from torch import nn

    from cardinal.network import Network

    digits = load_digits()
    X, y = digits.data / 16.0, digits.target
    order = np.random.default_rng(seed).permutation(len(X))
    train, test = order[:1400], order[1400:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mlp = MLPClassifier((32,), random_state=0, max_iter=300).fit(X[train], y[train])
    first, last = nn.Linear(64, 32), nn.Linear(32, 10)
    with torch.no_grad():
        first.weight[:], first.bias[:] = torch.tensor(mlp.coefs_[0].T), torch.tensor(mlp.intercepts_[0])
        last.weight[:], last.bias[:] = torch.tensor(mlp.coefs_[1].T), torch.tensor(mlp.intercepts_[1])
    torch.manual_seed(seed)
    cnn = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(144, 10)).double()
    optimizer = torch.optim.Adam(cnn.parameters(), 0.01)
    images, labels = torch.tensor(X[train]).reshape(-1, 1, 8, 8), torch.tensor(y[train])
    for _ in range(200):
        optimizer.zero_grad()
        nn.functional.cross_entropy(cnn(images), labels).backward()
        optimizer.step()
    nets = {
        "MLP 64-32-10": Network.from_torch(nn.Sequential(first, nn.ReLU(), last).double()),
        "CNN conv 1→4 3×3 + linear": Network.from_torch(cnn, input_shape=(1, 8, 8)),
    }
    return nets, X[test]


def _certified(found, net) -> tuple[str, float]:
    from cardinal import checker

    if found.certificate is None:
        return f"none ({found.reason[:60]})", 0.0
    started = time.perf_counter()
    report = checker.check(json.loads(json.dumps(found.certificate)), net.to_json())
    return ("accepted" if report.accepted else "REJECTED"), time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> None:
    from cardinal.solvers.base import exact_claim, solve_minimum
    from cardinal.solvers.proof import search

    from cardinal.problem import Problem

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--images", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=30.0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    nets, X = models(args.seed)
    rows = []
    for name, net in nets.items():
        for image in range(args.images):
            problem = Problem.make(net, X[image], "contrastive")
            started = time.perf_counter()
            outcome = solve_minimum(net, X[image], "contrastive", solver="exact-milp", time_limit=args.time_limit, guarded=False)
            solve = time.perf_counter() - started
            k = exact_claim(problem, outcome, None)
            row = {"model": name, "image": image, "status": outcome.status.value, "k": k, "solve": solve}
            if k is not None:
                started = time.perf_counter()
                written = search(problem, k, time.perf_counter() + args.time_limit, trees=outcome.subset_trees)
                row["written"] = time.perf_counter() - started
                row["after"], row["after_check"] = _certified(written, net)
                started = time.perf_counter()
                again = search(problem, k, time.perf_counter() + args.time_limit)
                row["before_s"] = time.perf_counter() - started
                row["before"], _ = _certified(again, net)
            rows.append(row)
            print(row, flush=True)
    lines = [
        "# Certificates of proved CXp minima: from the engine's proof vs a second search (issue 51)",
        "",
        f"`python -m bench.certificates --seed {args.seed} --images {args.images} --time-limit {args.time_limit:g}`"
        ' (exact-milp in this process, box [0, 1]^64). k: the claim "no CXp within k" (the minimum − 1). '
        "before: the generic search (`solvers.proof.search`, no record) as verify/ runs it; after: the certificate "
        "written from `Outcome.subset_trees` (method subset-split). Every certificate checked by `cardinal.checker`.",
        "",
        "| model | image | outcome | k | solve s | before | before s | after | write s | write / solve | check s |",
        "|:--|---:|:--|---:|---:|:--|---:|:--|---:|---:|---:|",
    ]
    for r in rows:
        if r["k"] is None:
            lines.append(f"| {r['model']} | {r['image']} | {r['status']} | — | {r['solve']:.2f} | — | — | — | — | — | — |")
            continue
        lines.append(
            f"| {r['model']} | {r['image']} | {r['status']} | {r['k']} | {r['solve']:.2f} | {r['before']} | {r['before_s']:.1f} |"
            f" {r['after']} | {r['written']:.3f} | {r['written'] / r['solve']:.1%} | {r['after_check']:.1f} |"
        )
    proved = [r for r in rows if r["k"] is not None]
    for key, label in (("before", "before"), ("after", "after")):
        accepted = sum(r[key] == "accepted" for r in proved)
        lines.append(f"\n- {label}: {accepted} of {len(proved)} proved answers carry an accepted certificate.")
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as out:
            out.write(text)
    print(text)


if __name__ == "__main__":
    main()

"""Benchmark: batched greedy explanations vs the paper's one-call-at-a-time reference.

Monotone ReLU networks n → 64 → 64 → 1 with n = 28 (the paper's Loan Defaulter width) and
n = 276 (BlogFeedback), B = 4,096 inputs uniform in [0, 1]^n, threshold at the median output,
both kinds. For each: explanations per second of `verify.explain` (median of repeated runs) and
of `verify.explain_reference` on a row sample, in the same run and dtype; the FLOP rate of the
batched run against this machine's measured float32 matmul peak.

FLOPs (multiply-add = 2) are those of one run: every matmul as torch.profiler counts it, plus
the rank-one multiply-adds that build the variants. Before timing, the batched answers are
checked against the reference on the sample rows (the same masks), and every timed result is
checked for validity.

With `--device cuda` the batched runs (and the peak) are on the GPU; the reference stays the
one-call loop on the CPU, as the paper ran it on one device at a time.

    python -m bench.greedy [--rows 4096] [--repeats 5] [--device cpu] [--out bench-results/greedy.md]

(`--out bench/results/greedy.md` refreshes the table kept in the repository.)
"""

from __future__ import annotations

import argparse
import datetime
import math
import platform
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from cardinal.verify.domain import Domain
from cardinal.verify.generate import median_threshold, random_network
from cardinal.verify.greedy import explain, explain_reference
from cardinal.verify.network import Network
from tabulate import tabulate

HIDDEN = (64, 64)


def machine(device: str = "cpu") -> str:
    model = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = f"{torch.cuda.get_device_name()} with " if torch.device(device).type == "cuda" else ""
    return f"{gpu}{model}, {torch.get_num_threads()} torch threads, torch {torch.__version__}, Python {platform.python_version()}"


def matmul_peak(device: str = "cpu", repeats: int = 10) -> float:
    """Float32 GFLOP/s of a square matmul (2048² on the CPU, 8192² on a GPU): the best of
    `repeats` warm runs."""
    size = 8192 if torch.device(device).type == "cuda" else 2048
    a, b = torch.randn(size, size, device=device), torch.randn(size, size, device=device)
    out = torch.empty(size, size, device=device)
    torch.mm(a, b, out=out)
    best = math.inf
    for _ in range(repeats):
        _synchronize(device)
        started = time.perf_counter()
        torch.mm(a, b, out=out)
        _synchronize(device)
        best = min(best, time.perf_counter() - started)
    return 2 * size**3 / best / 1e9


def _synchronize(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def measured_flops(net: Network, X: np.ndarray, kind: str, threshold: float, dtype: torch.dtype, device: str) -> float:
    """FLOPs of one `explain` run: every matmul as counted by torch.profiler (with_flops), plus
    the rank-one multiply-adds that build the variants (2 per element of [B, n, d1])."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_flops=True) as profile:
        explain(net, X, kind=kind, threshold=threshold, device=device, dtype=dtype)
    matmul = sum(event.flops for event in profile.key_averages() if event.flops)
    return matmul + 2 * len(X) * net.n_inputs * net.widths[0]


def _timed(function, repeats: int, *args, **kwargs) -> tuple[float, object]:
    """Median seconds of `repeats` calls of function(*args, **kwargs), and the last result (whose
    tensors are on the CPU: the time includes the copy back)."""
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = function(*args, **kwargs)
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def run(rows: int, repeats: int, sample: dict[int, int], device: str = "cpu") -> tuple[list[list], float]:
    peak = matmul_peak(device)
    table = []
    for n in (28, 276):
        rng = np.random.default_rng(n)
        net = random_network(rng, n, HIDDEN, "relu")
        X = rng.random((rows, n))
        t = median_threshold(net, X)
        for kind in ("contrastive", "abductive"):
            # Correctness first (untimed, float64): batched = reference on the sample rows.
            ref64 = explain_reference(net, X[: sample[n]], kind=kind, threshold=t)
            fast64 = explain(net, X[: sample[n]], kind=kind, threshold=t, device=device)
            assert torch.equal(ref64.masks, fast64.masks) and torch.equal(ref64.exists, fast64.exists)
            for dtype in (torch.float32, torch.float64):
                explain(net, X[:256], kind=kind, threshold=t, device=device, dtype=dtype)  # warm-up
                seconds, result = _timed(explain, repeats, net, X, kind=kind, threshold=t, device=device, dtype=dtype)
                _check_valid(net, X, result, kind, t)
                explain_reference(net, X[:8], kind=kind, threshold=t, dtype=dtype)  # warm-up
                ref_seconds, _ = _timed(explain_reference, 3, net, X[: sample[n]], kind=kind, threshold=t, dtype=dtype)
                rate, ref_rate = rows / seconds, sample[n] / ref_seconds
                gflops = measured_flops(net, X, kind, t, dtype, device) / seconds / 1e9
                table.append(
                    [
                        n,
                        kind,
                        str(dtype).removeprefix("torch."),
                        f"{float(result.sizes[result.exists].float().mean()):.1f}",
                        f"{seconds * 1e3:.1f}",
                        f"{rate:,.0f}",
                        f"{ref_rate:,.0f}",
                        f"{rate / ref_rate:,.0f}×",
                        f"{gflops:.1f}",
                        f"{100 * gflops / peak:.0f}%" if dtype == torch.float32 else "–",
                    ]
                )
                print(" | ".join(str(cell) for cell in table[-1]), flush=True)
    return table, peak


def _check_valid(net: Network, X: np.ndarray, result, kind: str, threshold: float) -> None:
    """Every answer flips (CXp) or keeps (AXp) the prediction at the monotone shortcut point
    (float64 forward passes; the exact check lives in the tests)."""
    domain = Domain.unit(net.n_inputs)
    predictions = result.predictions.numpy().astype(bool)
    counterpoint = domain.counterpoint(predictions)
    mask = result.masks.numpy()
    probe = np.where(mask, counterpoint, X) if kind == "contrastive" else np.where(mask, X, counterpoint)
    reached = net.forward(probe).numpy() > threshold
    exists = result.exists.numpy()
    expected = ~predictions if kind == "contrastive" else predictions
    assert (reached[exists] == expected[exists]).mean() > 0.999  # float32 runs may sit on the threshold


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=f"cardinal bench {__name__.rsplit('.', 1)[-1]}", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu", help="where the batched runs go: cpu or cuda")
    parser.add_argument("--out", default="bench-results/greedy.md", help="markdown table to write (default: %(default)s)")
    args = parser.parse_args(argv)
    sample = {28: 512, 276: 64}
    table, peak = run(args.rows, args.repeats, sample, args.device)
    headers = [
        "n",
        "kind",
        "dtype",
        "mean size",
        "batched ms",
        "batched expl/s",
        "reference expl/s",
        "speed-up",
        "GFLOP/s",
        "of peak",
    ]
    text = "\n".join(
        [
            "# Greedy explanations: batched vs reference",
            "",
            f"Run {datetime.date.today().isoformat()} with `python -m bench.greedy --rows {args.rows} --repeats {args.repeats}"
            f" --device {args.device}` on {machine(args.device)}.",
            "",
            f"Measured float32 matmul peak ({'8192' if args.device == 'cuda' else '2048'}² `torch.mm` on {args.device}, "
            f"best of 10): **{peak:.1f} GFLOP/s**.",
            "",
            f"Networks n → {' → '.join(map(str, HIDDEN))} → 1, ReLU, monotone random weights; B = {args.rows} inputs uniform "
            "in [0,1]^n; threshold midway around the median output. Batched: median of the repeats for all B rows. Reference "
            f"(Algorithm 1 one model call at a time): {sample[28]} rows for n = 28, {sample[276]} rows for n = 276, "
            "same dtype, median of 3. GFLOP/s: one run's matmul FLOPs (torch.profiler) plus the rank-one "
            "updates, over the batched median time.",
            "",
            tabulate(table, headers=headers, tablefmt="github"),
            "",
        ]
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

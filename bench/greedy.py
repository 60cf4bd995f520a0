"""Benchmark: batched greedy explanations vs Algorithm 1 written as a plain PyTorch loop.

Monotone ReLU networks n → 64 → 64 → 1 with n = 28 (the paper's Loan Defaulter width) and
n = 276 (BlogFeedback), B inputs uniform in [0, 1]^n, threshold at the median output, both
kinds, float32 and float64. For each: explanations per second of `verify.explain` (median of
repeated runs over all B rows) against two one-call-at-a-time loops on a sample of the rows, in
the same run and dtype:

* **torch loop** (the baseline): Algorithm 1 as its users would write it, on their own
  `nn.Sequential` (here `net.to_torch(dtype)`), one `model(y.unsqueeze(0)).item()` per call —
  exactly this code (`plain_loop` below):

      def plain_loop(model, x, kind, lower, upper, t):
          def f(y):
              return model(y.unsqueeze(0)).item()

          p = f(x) > t
          counterpoint = lower if p else upper
          base, target = (x, counterpoint) if kind == "contrastive" else (counterpoint, x)
          goal = (not p) if kind == "contrastive" else p
          scores = []
          for j in range(len(x)):
              y = base.clone()
              y[j] = target[j]
              scores.append(f(y))
          ascending = p == (kind == "contrastive")
          order = sorted(range(len(x)), key=lambda j: scores[j] if ascending else -scores[j])
          if kind == "abductive" and (f(base) > t) == goal:
              return []
          y = base.clone()
          for size, j in enumerate(order, 1):
              y[j] = target[j]
              if (f(y) > t) == goal:
                  return sorted(order[:size])
          return None

* **explain_reference**: cardinal's own loop (Algorithm 1 one call at a time over its `Network`
  class, numpy in and out of every call; about half the torch loop's speed).

Both loops run on the CPU (one-row calls are fastest there, also when the batched runs go to a
GPU with `--device cuda`). Correctness is asserted on the timed results: the batched answers
equal the torch loop's on the sample rows (float64: every row; float32: rows may differ where the
two float32 summation orders round differently — counted in `≠ loop`, at most 1%), and
`explain_reference` in float64.

Physical limits, per configuration and per explanation (multiply-add = 2 FLOPs; activations and
comparisons not counted): FLOPs of the algorithm as `explain` runs it (`flops`: the scores'
rank-one updates and the layers after the first for n variants, the forward passes of x and of
the counterpoint check, ⌈log2 n⌉ binary-search passes) and bytes of a layer-by-layer
implementation (`bytes_moved`: every layer's output for the n variants written and read once,
each search pass's prefix row written and read once). Against this machine's measured matmul
peak (square `torch.mm` in the run's dtype) and copy bandwidth (`Tensor.copy_` of 256 MB,
read + write), the table gives the achieved fraction of each, and each of its rows names the CPU and its vector ISA
(`cpu_isa`: the AVX2/AVX-512 flags, and the kernels torch runs) — or the GPU — those fractions are of.

    python -m bench.greedy [--full] [--rows R] [--repeats K] [--device cpu] [--out bench-results/greedy.md]

By default (about a minute on 2 idle cores): B = 4,096, 5 repeats, loop samples of 256 rows at
n = 28 and 32 at n = 276. `--full`: B = 16,384, 7 repeats, samples of 1,024 and 128.
(`--out bench/results/greedy.md` refreshes the table kept in the repository.)
"""

from __future__ import annotations

import datetime
import itertools
import math
import os
import platform
import statistics
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from cardinal.verify.generate import median_threshold, random_network
from tabulate import tabulate

from bench import bench_parser, parse
from cardinal.greedy import explain, explain_reference
from cardinal.io import write_atomic
from cardinal.network import Network
from cardinal.validate import count

HIDDEN = (64, 64)
DEFAULTS = {"rows": 4096, "repeats": 5, "sample": {28: 256, 276: 32}}
FULL = {"rows": 16384, "repeats": 7, "sample": {28: 1024, 276: 128}}


def plain_loop(model, x, kind, lower, upper, t):
    def f(y):
        return model(y.unsqueeze(0)).item()

    p = f(x) > t
    counterpoint = lower if p else upper
    base, target = (x, counterpoint) if kind == "contrastive" else (counterpoint, x)
    goal = (not p) if kind == "contrastive" else p
    scores = []
    for j in range(len(x)):
        y = base.clone()
        y[j] = target[j]
        scores.append(f(y))
    ascending = p == (kind == "contrastive")
    order = sorted(range(len(x)), key=lambda j: scores[j] if ascending else -scores[j])
    if kind == "abductive" and (f(base) > t) == goal:
        return []
    y = base.clone()
    for size, j in enumerate(order, 1):
        y[j] = target[j]
        if (f(y) > t) == goal:
            return sorted(order[:size])
    return None


def run_plain_loop(net: Network, X: np.ndarray, kind: str, threshold: float, dtype: torch.dtype) -> torch.Tensor:
    """`plain_loop` over the rows X [m, n] on `net.to_torch(dtype)` (CPU, no grad): masks [m, n]
    bool, all False where no explanation exists."""
    model = net.to_torch(dtype=dtype)
    rows = torch.tensor(X, dtype=dtype)
    lower, upper = torch.zeros(net.n_inputs, dtype=dtype), torch.ones(net.n_inputs, dtype=dtype)
    masks = torch.zeros(rows.shape, dtype=torch.bool)
    with torch.no_grad():
        for i, x in enumerate(rows):
            features = plain_loop(model, x, kind, lower, upper, threshold)
            masks[i, features or []] = True
    return masks


def flops(n: int, widths: Sequence[int], kind: str) -> int:
    """FLOPs of one explanation as `explain` computes it (see the module docstring)."""
    first = 2 * n * widths[0]
    tail = sum(2 * a * b for a, b in itertools.pairwise(widths))
    forwards = 2 * (first + tail) + (first if kind == "abductive" else 0)  # x, the end check (+ base's first layer)
    search = math.ceil(math.log2(n)) * (first + tail)
    return n * (2 * widths[0] + tail) + forwards + search


def bytes_moved(n: int, widths: Sequence[int], element: int) -> int:
    """Bytes of one explanation in a layer-by-layer implementation (see the module docstring)."""
    return element * (2 * n * sum(widths) + math.ceil(math.log2(n)) * 2 * n)


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo, else `platform.processor()`)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")


def cpu_isa() -> str:
    """The vector ISA that matters for float matmul: the CPU's flags among `ISA_FLAGS`
    (/proc/cpuinfo) and the kernels torch dispatches to (`torch.backends.cpu.get_cpu_capability`),
    e.g. "avx2 fma; torch AVX2 kernels"."""
    flags: set[str] = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    found = " ".join(flag for flag in ISA_FLAGS if flag in flags) or "no AVX2/AVX-512 flags read"
    return f"{found}; torch {torch.backends.cpu.get_cpu_capability()} kernels"


def machine(device: str = "cpu") -> str:
    gpu = f"{torch.cuda.get_device_name()} with " if torch.device(device).type == "cuda" else ""
    threads = torch.get_num_threads()
    return (
        f"{gpu}{cpu_name()} ({os.cpu_count()} CPUs; {cpu_isa()}), {threads} torch thread{'s' if threads != 1 else ''}, "
        f"torch {torch.__version__}, Python {platform.python_version()}"
    )


def _best_seconds(function, repeats: int, device: str) -> float:
    function()
    best = math.inf
    for _ in range(repeats):
        _synchronize(device)
        started = time.perf_counter()
        function()
        _synchronize(device)
        best = min(best, time.perf_counter() - started)
    return best


def matmul_peak(device: str, dtype: torch.dtype, repeats: int = 10) -> float:
    """GFLOP/s of a square matmul in `dtype` (2048² on the CPU, 8192² on a GPU): the best of
    `repeats` warm runs."""
    size = 8192 if torch.device(device).type == "cuda" else 2048
    a, b = torch.randn(size, size, device=device, dtype=dtype), torch.randn(size, size, device=device, dtype=dtype)
    out = torch.empty(size, size, device=device, dtype=dtype)
    return 2 * size**3 / _best_seconds(lambda: torch.mm(a, b, out=out), repeats, device) / 1e9


def copy_bandwidth(device: str, repeats: int = 10) -> float:
    """GB/s of `Tensor.copy_` between two 256 MB tensors (bytes read + bytes written), best of `repeats`."""
    source = torch.ones(1 << 26, device=device)
    target = torch.empty_like(source)
    return 2 * source.numel() * source.element_size() / _best_seconds(lambda: target.copy_(source), repeats, device) / 1e9


def _synchronize(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _timed(function, repeats: int, *args, **kwargs) -> tuple[float, object]:
    """Median seconds of `repeats` calls of function(*args, **kwargs), and the last result (whose
    tensors are on the CPU: the time includes the copy back)."""
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = function(*args, **kwargs)
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


SPEED_HEADERS = [
    "n",
    "kind",
    "dtype",
    "mean size",
    "batched ms",
    "batched expl/s",
    "torch loop expl/s",
    "vs torch loop",
    "≠ loop",
    "explain_reference expl/s",
    "vs explain_reference",
]
LIMIT_HEADERS = [
    "n",
    "kind",
    "dtype",
    "kFLOP/expl",
    "kB/expl",
    "limit expl/s",
    "bound",
    "GFLOP/s",
    "of matmul peak",
    "GB/s",
    "of copy bandwidth",
    "measured on",
]
CONFIGURATIONS = [
    (n, kind, dtype) for n in (28, 276) for kind in ("contrastive", "abductive") for dtype in (torch.float32, torch.float64)
]


def machine_limits(device: str) -> dict:
    """The machine's measured matmul peak per dtype (GFLOP/s) and copy bandwidth (GB/s)."""
    return {
        "peak": {dtype: matmul_peak(device, dtype) for dtype in (torch.float32, torch.float64)},
        "bandwidth": copy_bandwidth(device),
    }


def run(rows: int, repeats: int, sample: dict[int, int], limits: dict, device: str = "cpu") -> Iterator[tuple[list, list]]:
    """One (speed row, limits row) per configuration of `CONFIGURATIONS`, as each is measured; each
    limits row names the CPU and its ISA (or the GPU) that its fractions of the peak are of."""
    networks = {}
    where = torch.cuda.get_device_name() if torch.device(device).type == "cuda" else f"{cpu_name()} ({cpu_isa()})"
    for n, kind, dtype in CONFIGURATIONS:
        if n not in networks:
            rng = np.random.default_rng(n)
            net = random_network(rng, n, HIDDEN, "relu")
            X = rng.random((rows, n))
            networks[n] = net, X, median_threshold(net, X)
        net, X, t = networks[n]
        m = sample[n]
        explain(net, X[:256], kind=kind, threshold=t, device=device, dtype=dtype, verify=False)  # warm-up
        seconds, result = _timed(explain, repeats, net, X, kind=kind, threshold=t, device=device, dtype=dtype, verify=False)
        run_plain_loop(net, X[:2], kind, t, dtype)  # warm-up
        loop_seconds, loop_masks = _timed(run_plain_loop, 1, net, X[:m], kind, t, dtype)
        differ = int((loop_masks != result.masks[:m]).any(dim=1).sum())
        assert differ == 0 if dtype == torch.float64 else differ <= m // 100, f"{differ} of {m} rows ≠ loop"
        ref_seconds, reference = _timed(explain_reference, 1, net, X[:m], kind=kind, threshold=t, dtype=dtype)
        if dtype == torch.float64:
            assert torch.equal(reference.masks, result.masks[:m]) and torch.equal(reference.exists, result.exists[:m])
        rate, loop_rate, ref_rate = rows / seconds, m / loop_seconds, m / ref_seconds
        name = str(dtype).removeprefix("torch.")
        speed = [
            n,
            kind,
            name,
            f"{float(result.sizes[result.exists].float().mean()):.1f}",
            f"{seconds * 1e3:.1f}",
            f"{rate:,.0f}",
            f"{loop_rate:,.0f}",
            f"{rate / loop_rate:,.0f}×",
            f"{differ}/{m}",
            f"{ref_rate:,.0f}",
            f"{rate / ref_rate:,.0f}×",
        ]
        work, traffic = flops(n, net.widths, kind), bytes_moved(n, net.widths, dtype.itemsize)
        peak, bandwidth = limits["peak"][dtype] * 1e9, limits["bandwidth"] * 1e9
        limit = min(peak / work, bandwidth / traffic)
        physical = [
            n,
            kind,
            name,
            f"{work / 1e3:,.0f}",
            f"{traffic / 1e3:,.0f}",
            f"{limit:,.0f}",
            "compute" if peak / work < bandwidth / traffic else "memory",
            f"{rate * work / 1e9:.1f}",
            f"{100 * rate * work / peak:.0f}%",
            f"{rate * traffic / 1e9:.1f}",
            f"{100 * rate * traffic / bandwidth:.0f}%",
            where,
        ]
        yield speed, physical


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__file__, __doc__)
    parser.add_argument("--full", action="store_true", help="the long run: more rows, repeats and loop samples")
    parser.add_argument("--rows", type=count(1), help="batched rows B (default 4096; --full 16384)")
    parser.add_argument("--repeats", type=count(1), help="batched repeats, median taken (default 5; --full 7)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where the batched runs go")
    args = parse(parser, argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device")
    setting = FULL if args.full else DEFAULTS
    rows, repeats, sample = args.rows or setting["rows"], args.repeats or setting["repeats"], setting["sample"]
    sample = {n: min(size, rows) for n, size in sample.items()}
    started = time.perf_counter()
    limits = machine_limits(args.device)
    speed, physical = [], []
    print(" | ".join(SPEED_HEADERS + LIMIT_HEADERS[3:]), flush=True)  # the progress rows below, one per configuration
    interrupted = False
    try:
        for speed_row, physical_row in run(rows, repeats, sample, limits, args.device):
            speed.append(speed_row)
            physical.append(physical_row)
            print(" | ".join(str(cell) for cell in speed_row + physical_row[3:]), flush=True)
    except KeyboardInterrupt:  # write what was measured
        interrupted = True
    command = f"python -m bench.greedy{' --full' if args.full else ''} --rows {rows} --repeats {repeats} --device {args.device}"
    state = f" Interrupted: {len(speed)} of {len(CONFIGURATIONS)} configurations measured." if interrupted else ""
    header = f"Run {datetime.date.today().isoformat()} with `{command}` on {machine(args.device)}; "
    header += f"{time.perf_counter() - started:.0f} s in all.{state}"
    write_atomic(args.out, report(header, args.device, rows, repeats, sample, limits, speed, physical))
    print(f"wrote {args.out}" + (f" ({len(speed)} of {len(CONFIGURATIONS)} rows: interrupted)" if interrupted else ""))
    if interrupted:
        raise SystemExit(130)


def report(
    header: str, device: str, rows: int, repeats: int, sample: dict[int, int], limits: dict, speed: list, physical: list
) -> str:
    """The markdown of the two tables (the rows measured so far) and what they measured; `header`:
    the line saying when, how and where it ran."""
    size = "8192" if torch.device(device).type == "cuda" else "2048"
    return "\n".join(
        [
            "# Greedy explanations: batched vs one-call loops",
            "",
            header,
            "",
            f"Networks n → {' → '.join(map(str, HIDDEN))} → 1, ReLU, monotone random weights; B = {rows} inputs uniform "
            "in [0,1]^n; threshold midway around the median output. Batched: `explain`, median of "
            f"{repeats} runs over all B rows on {device}. Torch loop: Algorithm 1 in plain PyTorch on the "
            "`nn.Sequential`, one `model(y.unsqueeze(0)).item()` per call (code in `bench/greedy.py`), same dtype, CPU; "
            f"`explain_reference`: cardinal's own one-call loop over its `Network`, same dtype, CPU. Loops on "
            f"{sample[28]} rows for n = 28 and {sample[276]} for n = 276, one pass each. `≠ loop`: sample rows whose "
            "batched answer differs from the torch loop's (float32 rounding; asserted 0 in float64).",
            "",
            tabulate(speed, headers=SPEED_HEADERS, tablefmt="github"),
            "",
            "## Against the physical limits",
            "",
            f"Measured on {device}: matmul peak ({size}² `torch.mm`, best of 10) "
            f"**{limits['peak'][torch.float32]:.1f} GFLOP/s** in float32, **{limits['peak'][torch.float64]:.1f}** in "
            f"float64; copy bandwidth (256 MB `copy_`, read + write, best of 10) **{limits['bandwidth']:.1f} GB/s**. "
            "Per explanation: kFLOP of the algorithm as `explain` runs it and kB of a layer-by-layer implementation "
            "(definitions in `bench/greedy.py`); limit = min(peak / FLOPs, bandwidth / bytes) explanations per second, "
            "and which of the two binds; achieved = batched expl/s × FLOPs (or bytes), and its fraction of the peak "
            "(or bandwidth).",
            "",
            tabulate(physical, headers=LIMIT_HEADERS, tablefmt="github"),
            "",
        ]
    )


if __name__ == "__main__":
    main()

"""Benchmark: minimum explanations of a VeriX-shaped classifier, 784 → 10 → 10 → 10, at ε = 0.05.

**The model is not VeriX's and the data are not MNIST.** There is no MNIST offline, so the images
are scikit-learn's bundled 8 × 8 digits (1,797 images, 10 classes), upsampled to 28 × 28 by
bilinear interpolation (`scipy.ndimage.zoom`, order 1) and scaled to [0, 1]. On them a ReLU
network of VeriX's MNIST-FC shape, 784 → 10 → 10 → 10, is trained here (seeded, full batch, float64
on one thread, weights rounded to multiples of 2^-10 as in `verify.classifiers`) and exported to
ONNX the way tf2onnx exports VeriX's Keras model: a float32 `[N, 28, 28, 1]` input, a `Reshape` to
`[-1, 784]`, MatMul + Add per Dense layer, Relu, a last Softmax (which cardinal drops, the argmax
unchanged). The bench reads that file with `Network.load`, like a user's.

Per test image x (the first `--images` of a seeded split) and its ball B = [0, 1]^784 ∩ [x − ε, x + ε]:

* **Minimum CXp** (target: proved within 60 s). The MILP minimises the CXp size (a float MILP; its
  witness is replayed exactly, so its set is an exact *upper* bound; where it finds none in time,
  one flip of the whole ball, shrunk exactly, gives one). The exact *lower* bound is
  the largest k + 1 such that no set of k features can flip the class: first-layer pre-activations
  can move by at most the sum of their k largest per-feature moves over B, and interval
  arithmetic in exact rationals carries that through the network to a positive lower bound on
  f_c − f_j for every other class j (`_keeps_class`; a float64 screen finds the k, the rationals
  prove it). Proved when the bounds meet; no CXp exists when no k ≤ 784 flips.
* **Minimum AXp** (target: proved within 300 s). The call a user makes,
  `solve_minimum(net, x, "abductive", B, time_limit=T)` (what `cardinal.explain(...,
  method="minimum")` runs: the exact MILP engine in its guarded child, the answer replayed
  exactly): the implicit-hitting-set loop of `solvers.hitting`, whose first seed is deletion on
  its own exact oracle (a subset-minimal AXp, the upper bound) and whose minimum hitting sets of
  exactly checked contrastive sets give the exact *lower* bound it reports ("exact lower bound
  L"). Proved when it answers OPTIMAL; else [L, the size of its exactly valid AXp]. With
  `--float-only`: a loop of its own with the float MILP as flip oracle, its lower bound a
  minimum hitting set of the exactly replayed contrastive sets, its upper bound an AXp verified
  in exact interval arithmetic (the final candidate if it holds, else interval deletion).

**`--exact`** (the default; `--float-only` leaves it out): the exact MILP engine (`exact-milp`,
`solvers.exact_milp`: HiGHS's LPs pruning only by safe bounds, every incumbent replayed exactly)
answers both. The minimum CXp is its answer: optimal (its set replayed) is a proof; where it
stops at the limit, its best set (else the float MILP's, replayed) is the upper bound and the
interval bound above the lower one.

z3's full encoding is not run: on the 64-feature digit classifier of `crosscheck --suite
classifiers` 6 of 8 of its calls already ended at a 20 s limit (not measured at 784 inputs). The
MILP is `--milp` (default gurobi, else highs): the CXp model has 1,637 variables and 1,662
constraints, within Gurobi's size-limited pip licence (2,000 each).

    python -m bench.verix [--images 10] [--radius 0.05] [--cxp-limit 60] [--axp-limit 300] [--float-only]
                          [--work bench-results/verix] [--out bench/results/verix.md]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import re
import statistics
import sys
import time
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np
import torch
from cardinal.solvers.base import available_solvers, get_solver, solve_minimum, solve_problem
from cardinal.solvers.encode import encode
from cardinal.solvers.hitting import OracleTimeout, minimum_hitting_set, shrink_witness
from cardinal.solvers.milp import RunState, _witness
from cardinal.verify.classifiers import GRID
from torch import nn

from bench.greedy import machine
from cardinal.domain import Domain
from cardinal.network import Network
from cardinal.problem import Problem, Status

SHAPE = (28, 28, 1)
_LOWER = re.compile(r"exact lower bound (\d+)")
N = 784


def digits_28() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits upsampled to 28 × 28 (bilinear), in [0, 1]: X [1797, 784] (row-major
    over [28, 28, 1]), y [1797]."""
    from scipy.ndimage import zoom
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = np.stack([zoom(image / 16.0, 3.5, order=1) for image in digits.images])
    return np.clip(images, 0.0, 1.0).reshape(len(images), N), digits.target


def train_fc(X: np.ndarray, y: np.ndarray, seed: int = 0) -> nn.Sequential:
    """784 → 10 → 10 → 10 ReLU, full-batch Adam in float64 on one thread, rounded to `GRID`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = nn.Sequential(nn.Linear(N, 10), nn.ReLU(), nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 10)).double()
        start = np.random.default_rng(seed)
        with torch.no_grad():
            for linear in (m for m in model if isinstance(m, nn.Linear)):
                scale = 1.0 / np.sqrt(linear.in_features)
                linear.weight.copy_(torch.from_numpy(start.uniform(-scale, scale, size=tuple(linear.weight.shape))))
                linear.bias.zero_()
        fit_rounded(model, torch.tensor(X), torch.tensor(y, dtype=torch.long))
        return model
    finally:
        torch.set_num_threads(threads)


def fit_rounded(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> None:
    """Train `model` in place: 300 full-batch Adam steps (lr 0.01) of cross-entropy on inputs [B, ...]
    and class indices targets [B], then every parameter rounded to a multiple of `GRID`."""
    optimiser = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(300):
        optimiser.zero_grad()
        nn.functional.cross_entropy(model(inputs), targets).backward()
        optimiser.step()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.round(parameter / GRID) * GRID)


def tf2onnx_bytes(model: nn.Sequential) -> bytes:
    """The model as tf2onnx writes a Keras Dense stack: float32 input [N, 28, 28, 1], Reshape to
    [-1, 784], MatMul + Add (+ Relu) per layer, Softmax."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Reshape", ["input", "flatten/Const"], ["flat"], name="sequential/flatten/Reshape")]
    weights = {"flatten/Const": np.array([-1, N], dtype=np.int64)}
    data = "flat"
    linears = [m for m in model if isinstance(m, nn.Linear)]
    for number, linear in enumerate(linears):
        name = f"sequential/dense_{number}"
        weights[f"{name}/MatMul/ReadVariableOp"] = linear.weight.detach().numpy().T.astype(np.float32)
        weights[f"{name}/BiasAdd/ReadVariableOp"] = linear.bias.detach().numpy().astype(np.float32)
        nodes.append(
            helper.make_node("MatMul", [data, f"{name}/MatMul/ReadVariableOp"], [f"{name}/MatMul"], name=f"{name}/MatMul")
        )
        nodes.append(
            helper.make_node(
                "Add", [f"{name}/MatMul", f"{name}/BiasAdd/ReadVariableOp"], [f"{name}/BiasAdd"], name=f"{name}/BiasAdd"
            )
        )
        data = f"{name}/BiasAdd"
        if number < len(linears) - 1:
            nodes.append(helper.make_node("Relu", [data], [f"{name}/Relu"], name=f"{name}/Relu"))
            data = f"{name}/Relu"
    nodes.append(helper.make_node("Softmax", [data], ["output"], name="sequential/softmax", axis=-1))
    graph = helper.make_graph(
        nodes,
        "verix_mnist_fc_shape",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["unk__6", *SHAPE])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["unk__7", 10])],
        [numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(onnx_model)
    buffer = io.BytesIO()
    onnx.save(onnx_model, buffer)
    return buffer.getvalue()


# ---------------------------------------------------------------------------- interval bounds
def _keeps_class(
    net: Network, c: int, x: np.ndarray, lower: np.ndarray, upper: np.ndarray, moved: int | None = None, exact: bool = True
) -> bool:
    """Whether interval arithmetic proves that every y with lower ≤ y ≤ upper [n] (and, with
    `moved`, y = x off at most `moved` features) is predicted class c. `exact`: in rationals, a
    proof; else in float64 with a margin of 1e-9, a quick screen only. False proves nothing."""
    num = Fraction if exact else float
    margin = num(0) if exact else 1e-9
    first = net.layers[0]
    base = [num(v) for v in x.tolist()]
    ups = [num(u) - b for u, b in zip(upper.tolist(), base, strict=True)]
    downs = [num(v) - b for v, b in zip(lower.tolist(), base, strict=True)]
    intervals = []
    for row, bias in zip(first.weight.tolist(), first.bias.tolist(), strict=True):
        terms = [(num(w), b, u, d) for w, b, u, d in zip(row, base, ups, downs, strict=True) if w]
        centre = num(bias) + sum((w * b for w, b, _, _ in terms), num(0))
        rise = [max(w * u, w * d) for w, _, u, d in terms]
        fall = [min(w * u, w * d) for w, _, u, d in terms]
        if moved is not None:
            rise, fall = sorted(rise, reverse=True)[:moved], sorted(fall)[:moved]
        intervals.append(_relu(first, centre + sum(fall, num(0)), centre + sum(rise, num(0))))
    for layer in net.layers[1:-1]:
        rows = zip(layer.weight.tolist(), layer.bias.tolist(), strict=True)
        intervals = [_relu(layer, *_affine([num(w) for w in row], num(bias), intervals)) for row, bias in rows]
    weights, biases = net.layers[-1].weight.tolist(), net.layers[-1].bias.tolist()
    for j in range(len(biases)):
        if j != c:
            row = [num(a) - num(b) for a, b in zip(weights[c], weights[j], strict=True)]
            low, _ = _affine(row, num(biases[c]) - num(biases[j]), intervals)
            if low < margin or (low == margin and j < c):
                return False
    return True


def _affine(row: list, bias, intervals: list[tuple]) -> tuple:
    """The interval of row · z + bias for z in the given intervals."""
    low = high = bias
    for w, (a, b) in zip(row, intervals, strict=True):
        low += min(w * a, w * b)
        high += max(w * a, w * b)
    return low, high


def _relu(layer, low, high) -> tuple:
    """The layer's activation of an interval: ReLU (every hidden layer here), or the identity."""
    return (max(low, 0 * low), max(high, 0 * high)) if layer.activation.name == "relu" else (low, high)


def cxp_lower_bound(net: Network, problem: Problem, upper: int | None) -> int:
    """The exact lower bound on the CXp size: 1 + the largest k below `upper` (at most n) for which
    the class is proved kept whatever k features move within the ball. The largest k that the
    float screen passes (binary search; monotone in k) is then proved exactly, stepping down until
    a proof holds (k = 0 always does). n + 1: no CXp exists."""
    box, c, x = problem.domain, problem.prediction, problem.x
    lo, hi = 0, problem.n if upper is None else upper - 1
    while lo < hi:
        k = (lo + hi + 1) // 2
        lo, hi = (k, hi) if _keeps_class(net, c, x, box.lower, box.upper, moved=k, exact=False) else (lo, k - 1)
    while lo > 0 and not _keeps_class(net, c, x, box.lower, box.upper, moved=lo):
        lo -= 1
    return lo + 1


def verified_axp(problem: Problem, candidate: tuple[int, ...] | None) -> tuple[int, ...]:
    """An AXp proved by exact interval arithmetic over the box with the set fixed at x
    (`_keeps_class`): `candidate` if it is one, else what deletion leaves (features
    by increasing first-layer weight mass times their range, each dropped when the float screen
    still keeps the class), if proved, else every feature (always an AXp)."""
    box, x, c = problem.domain, problem.x, problem.prediction

    def bounds(kept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.where(kept, x, box.lower), np.where(kept, x, box.upper)

    def proved(kept: np.ndarray) -> bool:
        return _keeps_class(problem.net, c, x, *bounds(kept))

    if candidate is not None and proved(np.isin(np.arange(problem.n), candidate)):
        return tuple(candidate)
    kept = np.ones(problem.n, dtype=bool)
    mass = np.abs(problem.net.layers[0].weight).sum(axis=0) * (box.upper - box.lower)
    for i in np.argsort(mass, kind="stable"):
        kept[i] = False
        if not _keeps_class(problem.net, c, x, *bounds(kept), exact=False):
            kept[i] = True
    return tuple(int(i) for i in np.flatnonzero(kept)) if proved(kept) else tuple(range(problem.n))


# ---------------------------------------------------------------------------- per image
def _flip_oracle(backend, problem: Problem):
    """The flip oracle of `cardinal certify`'s hitting-set loop, with `backend` (a MILP): a point y
    agreeing with x off `free` that flips exactly (from the model with margins where the first
    point fails), None when the MILP finds none."""

    def find_flip(free: frozenset[int], until: float) -> np.ndarray | None:
        y = None
        for margin in (False, True):
            remaining = until - time.perf_counter()
            if remaining <= 0:
                raise OracleTimeout
            model = encode(problem, free=free, margin=margin)
            run = backend._optimize(model, remaining)
            if run.state is RunState.INFEASIBLE and not margin:
                return None
            if run.state is not RunState.OPTIMAL or run.values is None:
                break
            y = _witness(problem, model, run.values, tuple(sorted(free)))
            if problem.flips(y):
                break
        if y is None:
            raise OracleTimeout
        return y

    return find_flip


def minimum_axp(find_flip, problem: Problem, time_limit: float) -> tuple[Status, tuple[int, ...] | None, int]:
    """The implicit-hitting-set loop of `solvers.hitting` with `find_flip` as flip oracle, keeping
    its contrastive sets: (status, the candidate it ended with, the exact lower bound — the size
    of a minimum hitting set of the exactly replayed contrastive sets found)."""
    deadline = time.perf_counter() + time_limit
    sets: list[frozenset[int]] = []
    everything = frozenset(range(problem.n))
    status, candidate = Status.TIMEOUT, None
    while time.perf_counter() < deadline:
        candidate = minimum_hitting_set(sets)
        try:
            y = find_flip(everything - candidate, deadline)
        except OracleTimeout:
            break
        if y is None:
            status = Status.OPTIMAL
            break
        if not problem.flips(y):
            status = Status.ERROR
            break
        sets.append(shrink_witness(problem, y))
    hitting = minimum_hitting_set(sets)
    return status, None if candidate is None else tuple(sorted(candidate)), len(hitting)


def cxp_bounds(backend, problem: Problem, time_limit: float, exact: bool) -> tuple[int, int | None, bool]:
    """The minimum CXp's (exact lower bound, size of an exactly verified CXp or None, whether no
    CXp exists) by `backend` (a float MILP) or, with `exact`, the exact MILP engine (module
    docstring)."""
    if exact:
        with get_solver("exact-milp") as prover:
            outcome = solve_problem(prover, problem, None, time_limit)
        if outcome.exact and outcome.status == Status.OPTIMAL and outcome.replayed:
            return outcome.size, outcome.size, False
        if outcome.exact and outcome.status == Status.NONE_EXISTS:
            return N + 1, None, True
    else:
        outcome = solve_problem(backend, problem, None, time_limit)
    upper = outcome.size if outcome.status in (Status.OPTIMAL, Status.FEASIBLE) and outcome.replayed else None
    if upper is None:  # any flip of the whole ball, shrunk exactly, is a CXp
        y = None
        with contextlib.suppress(OracleTimeout):
            y = _flip_oracle(backend, problem)(frozenset(range(N)), time.perf_counter() + 10.0)
        upper = len(shrink_witness(problem, y)) if y is not None and problem.flips(y) else None
    lower = cxp_lower_bound(problem.net, problem, upper)
    return lower, upper, lower == N + 1


def run_image(
    net: Network, x: np.ndarray, radius: float, cxp_limit: float, axp_limit: float, milp: str, exact: bool, proofs: Path
) -> dict:
    """The CXp and AXp bounds of one image with their seconds (module docstring); `milp`: the
    MILP backend's name; `exact`: the exact MILP engine proves (module docstring); certificates
    go to `proofs`."""
    box = Domain.unit(N).ball(x, radius)
    row: dict = {}
    with get_solver(milp) as backend:
        started = time.perf_counter()
        problem = Problem.make(net, x, "contrastive", box)
        row["class"] = problem.prediction
        row["cxp"] = (*cxp_bounds(backend, problem, cxp_limit, exact), time.perf_counter() - started)
        started = time.perf_counter()
        problem = Problem.make(net, x, "abductive", box)
        if exact:  # the call a user makes (module docstring)
            outcome = solve_minimum(net, x, "abductive", box, time_limit=axp_limit, proof=proofs)
            status = outcome.status
            proved = status == Status.OPTIMAL and outcome.exact and outcome.replayed and outcome.solution is not None
            valid = outcome.solution if status in (Status.OPTIMAL, Status.FEASIBLE) and outcome.replayed else None
            upper = N if valid is None else len(valid)
            lower = upper if proved else max((int(m) for m in _LOWER.findall(outcome.message)), default=1)
        else:
            status, candidate, lower = minimum_axp(_flip_oracle(backend, problem), problem, axp_limit)
            upper = len(verified_axp(problem, candidate if status == Status.OPTIMAL else None))
        row["axp"] = (lower, upper, status.value, time.perf_counter() - started)
    return row


def _bounds(lower: int, upper: int | None) -> str:
    return f"{lower}" if upper == lower else f"[{lower}, {'?' if upper is None else upper}]"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.verix", description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=10, help="test images to explain (default 10)")
    parser.add_argument("--radius", type=float, default=0.05, help="epsilon of the ball (default 0.05)")
    parser.add_argument("--cxp-limit", type=float, default=60.0, help="seconds for the minimum CXp (default 60)")
    parser.add_argument("--axp-limit", type=float, default=300.0, help="seconds for the minimum AXp (default 300)")
    parser.add_argument("--milp", choices=("gurobi", "highs"), help="the MILP (default gurobi where installed, else highs)")
    parser.add_argument("--exact", action="store_true", default=True, help="the exact MILP engine proves the minima (default)")
    parser.add_argument(
        "--float-only", dest="exact", action="store_false", help="no exact MILP engine: the float MILP, interval bounds"
    )
    parser.add_argument("--work", default="bench-results/verix", help="where the model file goes (not committed)")
    parser.add_argument("--out", default="bench-results/verix.md", help="results table (bench/results/verix.md to refresh)")
    args = parser.parse_args(argv)
    if args.milp is None:
        args.milp = "gurobi" if "gurobi" in available_solvers() else "highs"
    X, y = digits_28()
    order = np.random.default_rng(0).permutation(len(X))
    train, test = order[:1400], order[1400:]
    path = Path(args.work) / "verix_fc_digits28.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    model = train_fc(X[train], y[train])
    path.write_bytes(tf2onnx_bytes(model))
    net = Network.load(path)
    accuracy = float((net.forward(X[test]).numpy().argmax(1) == y[test]).mean())
    print(f"model {path}: widths {net.widths}, test accuracy {accuracy:.3f}; {net.metadata.dropped}", file=sys.stderr)
    rows = []
    for index in test[: args.images]:
        proofs = Path(args.work) / "proofs"
        row = run_image(net, X[index], args.radius, args.cxp_limit, args.axp_limit, args.milp, args.exact, proofs)
        rows.append((int(index), row))
        (cl, cu, cnone, cs), (al, au, astatus, asec) = row["cxp"], row["axp"]
        print(
            f"image {index}: class {row['class']}; CXp {'none exists' if cnone else _bounds(cl, cu)} "
            f"({cs:.1f} s); AXp {_bounds(al, au)} ({astatus}, {asec:.1f} s)",
            file=sys.stderr,
            flush=True,
        )
    write_table(Path(args.out), rows, args, accuracy)


def write_table(path: Path, rows: list[tuple[int, dict]], args: argparse.Namespace, accuracy: float) -> None:
    """The results table with medians, the machine and the command."""
    lines = [
        f"# VeriX-shaped classifier (784 → 10 → 10 → 10), minimum explanations at ε = {args.radius:g}",
        "",
        f"Run {datetime.date.today().isoformat()} with `python -m bench.verix --images {args.images} --radius {args.radius:g} "
        f"--milp {args.milp} --cxp-limit {args.cxp_limit:g} --axp-limit {args.axp_limit:g} "
        f"{'--exact' if args.exact else '--float-only'}` "
        f"on {machine()}. "
        f"Not MNIST: scikit-learn's 8 × 8 digits upsampled to 28 × 28 (test accuracy {accuracy:.3f}); see the "
        "docstring of bench/verix.py. A size is exact where one number is shown, else [exact lower bound, size of an "
        "exactly verified explanation].",
        "",
        "| image | class | min CXp | CXp s | CXp proved | min AXp | AXp s | AXp proved | AXp loop |",
        "|---:|---:|---:|---:|:--|---:|---:|:--|:--|",
    ]
    for index, row in rows:
        (cl, cu, cnone, cs), (al, au, astatus, asec) = row["cxp"], row["axp"]
        cxp = "none exists" if cnone else _bounds(cl, cu)
        cxp_proved = cnone or cu == cl
        lines.append(
            f"| {index} | {row['class']} | {cxp} | {cs:.1f} | {'yes' if cxp_proved else 'no'} | {_bounds(al, au)} | "
            f"{asec:.1f} | {'yes' if au == al else 'no'} | {astatus} |"
        )
    cxp_seconds = [row["cxp"][3] for _, row in rows]
    axp_seconds = [row["axp"][3] for _, row in rows]
    proved_cxp = sum(row["cxp"][2] or row["cxp"][0] == row["cxp"][1] for _, row in rows)
    proved_axp = sum(row["axp"][0] == row["axp"][1] for _, row in rows)
    lines += [
        "",
        f"Medians over {len(rows)} image(s): CXp {statistics.median(cxp_seconds):.1f} s (proved {proved_cxp} of {len(rows)} "
        f"within {args.cxp_limit:g} s), AXp {statistics.median(axp_seconds):.1f} s (proved {proved_axp} of {len(rows)} "
        f"within {args.axp_limit:g} s).",
        "",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()

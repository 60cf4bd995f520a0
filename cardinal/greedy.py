"""Greedy contrastive (CXp) and abductive (AXp) explanations of sign-monotone networks.

The network must be sign-monotone (`Network.is_sign_monotone`): one output, or two through the
exact logit difference f_1 − f_0 at threshold 0 (`Network.logit_difference`), with every feature
monotone in its own direction; x' puts each feature at its own end (`Domain.counterpoint`).

`explain` is the batched version of the paper's Algorithm 1 and its dual; `explain_reference`
keeps the algorithm as written, one model call at a time, as the baseline for tests and
benchmarks. Both return an `ExplainResult` and agree row by row.

How `explain` batches, for inputs X [B, n] and first-layer weights W1 [d1, n]:

* Scores. A single-feature variant `base with j set to target_j` changes the first layer's
  pre-activation by the rank-one term `(target_j − base_j) · W1[:, j]`, so all B·n variants come
  from one product `base @ W1ᵀ` plus a broadcast multiply-add; only layers 2..L run on B·n rows.
* First flip. Along the greedy order the inputs move monotonically from `base` to `target`, so on
  a sign-monotone network the prediction of the prefixes changes at most once; a binary search over
  the prefix length finds the first change with ⌈log2(n+1)⌉ batched forward passes.

Ties in the scores break by lower feature index. Decisions are taken in the chosen float dtype;
`verify=True` (the default, as on the command line) re-checks each answer exactly (see
`cardinal.exact`) and recomputes a row with exact arithmetic where float rounding decided
differently; `verify=False` leaves the float decisions as they are (faster; no exact claim).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .algorithm1 import ExactCalls, FloatCalls, reference_row, validated
from .bounds import SAFETY, TINY, UNIT_ROUNDOFF, BoundedForward, constant_piece
from .domain import Domain
from .errors import InputError
from .exact import Enclosure, ExactNetwork, Score, exact_blocks, modified_inputs
from .network import Network
from .problem import shortcut

# Elements of the [rows, n, width] variant tensor processed at once: on a CPU about 1 MB per torch
# thread (measured best: smaller chunks pay per-call overhead, larger ones leave the cache; torch
# splits each product across the threads), on a GPU large enough to keep it busy.
_CPU_CHUNK_ELEMENTS_PER_THREAD = 1 << 18
_CUDA_CHUNK_ELEMENTS = 1 << 27
# Inputs n of a network greedy takes: it scores an input's n single-feature variants at once, an
# [n, n] tensor (2 GiB of float64 at this limit); a wider network is refused before any of it.
MAX_GREEDY_INPUTS = 1 << 14
# Elements of the [rows, n, n + widths] tensors of the exact re-check processed at once.
_VERIFY_CHUNK_ELEMENTS = 1 << 20
# Elements of the [rows, n] tensors of the sort and the binary search processed at once.
_SEARCH_BLOCK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class ExplainResult:
    """Greedy explanations of one kind for B inputs with n features; tensors live on the CPU.

    masks [B, n] bool (the explanation), sizes [B] int64, exists [B] bool (a CXp may not exist;
    an AXp always does), predictions [B] int64 (0/1), outputs [B] float64 (f(x) in float),
    order [B, n] int64 (feature indices in greedy order: the explanation is its first `size`).
    For a network of K = 2 outputs, predictions are class indices and outputs are f_1 − f_0.
    `directions` [n] (`Network.directions`) place the counterpoint of `witness`.
    `checks` is None unless `verify=True`: then per row "exact" (the answer holds in exact
    arithmetic), "repaired" (float rounding misled; recomputed exactly) or "undecided" (a smooth
    network's output lies within the stated margin of the threshold).
    """

    kind: str
    masks: torch.Tensor
    sizes: torch.Tensor
    exists: torch.Tensor
    predictions: torch.Tensor
    outputs: torch.Tensor
    order: torch.Tensor
    checks: tuple[str, ...] | None = None
    directions: np.ndarray | None = None

    def features(self, row: int) -> tuple[int, ...] | None:
        """The explanation of `row` as sorted feature indices, or None when none exists."""
        if not bool(self.exists[row]):
            return None
        return tuple(int(i) for i in torch.nonzero(self.masks[row]).flatten())

    def witness(self, row: int, x: np.ndarray, domain: Domain) -> tuple[float, ...] | None:
        """The point that shows the contrastive answer of `row` (input x [n]): x with the set moved
        to the counterpoint x', the monotone shortcut's point, whose prediction differs from
        p(x) (one forward pass re-checks it). None for an AXp, when no CXp exists, or where p(x)
        is undecided."""
        prediction = int(self.predictions[row])
        features = self.features(row)
        if self.kind != "contrastive" or features is None or prediction < 0:
            return None
        counterpoint = domain.counterpoint(np.array([prediction]), self.directions)[0]
        return tuple(modified_inputs(x, features, counterpoint).tolist())

    def __len__(self) -> int:
        return self.masks.shape[0]


def resolve_device(device: str | torch.device) -> torch.device:
    """`auto` → CUDA when available, else CPU; a CUDA request without CUDA is an error."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError:
        raise InputError(f"unknown device {device!r} (use auto, cpu or cuda)") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise InputError("device 'cuda' requested but torch sees no CUDA device (use --device cpu or auto)")
    return resolved


def explain(
    net: Network,
    X: torch.Tensor | np.ndarray,
    kind: str = "contrastive",
    domain: Domain | None = None,
    threshold: float | None = None,
    device: str | torch.device = "auto",
    dtype: torch.dtype = torch.float64,
    verify: bool = True,
) -> ExplainResult:
    """Greedy explanations for inputs X [B, n] (or [n]) of a sign-monotone network (threshold
    None: 0; a K = 2 network takes none).

    Raises `InputError` for a network that is not sign-monotone (naming a feature of mixed sign,
    or K ≥ 3), an unknown kind, an input outside the domain (naming row and feature), or a network
    of more than `MAX_GREEDY_INPUTS` inputs (before any allocation of n × n).
    """
    if net.n_inputs > MAX_GREEDY_INPUTS:
        raise InputError(
            f"greedy scores all {net.n_inputs:,} single-feature variants of an input at once ({net.n_inputs:,} × "
            f"{net.n_inputs:,} values): at most {MAX_GREEDY_INPUTS:,} inputs; use the deletion explainer, traversal index"
        )
    X_checked, domain, net, threshold = validated(net, X, kind, domain, threshold)
    torch_device = resolve_device(device)
    if torch_device.type == "cuda":
        limit = _CUDA_CHUNK_ELEMENTS
    else:
        limit = _CPU_CHUNK_ELEMENTS_PER_THREAD * torch.get_num_threads()
    rows = min(len(X_checked), max(1, limit // (net.n_inputs * max(net.widths))))
    # Sort and search run on larger blocks than the variants: fewer, larger calls.
    block = min(len(X_checked), max(rows, _SEARCH_BLOCK_ELEMENTS // net.n_inputs))
    worker = _BatchedGreedy(net, domain, threshold, torch_device, dtype, max_rows=rows)
    parts = [worker.run(torch.as_tensor(X_checked[i : i + block]), kind) for i in range(0, len(X_checked), block)]
    result = ExplainResult(kind, *(torch.cat(column) for column in zip(*parts, strict=True)), directions=net.directions)
    return _verified(net, X_checked, result, domain, threshold, torch_device) if verify else result


class _BatchedGreedy:
    """The batched worker: one block of rows at a time, on one device and dtype.

    The single-feature variants of `max_rows` rows at a time flow through preallocated buffers
    (one per layer) with in-place activations, so the hot loop allocates nothing; the sort and
    the binary search then run on the whole block.
    """

    def __init__(
        self, net: Network, domain: Domain, threshold: float, device: torch.device, dtype: torch.dtype, max_rows: int
    ) -> None:
        self.weights = [torch.tensor(layer.weight, dtype=dtype, device=device) for layer in net.layers]  # [out, in]
        self.weights_t = [weight.T.contiguous() for weight in self.weights]  # [in, out]
        self.biases = [torch.tensor(layer.bias, dtype=dtype, device=device) for layer in net.layers]
        self.activations = [layer.activation for layer in net.layers]
        self.fused = _fused_relu_linear_available(device, dtype)
        # x' per prediction (0, 1) [2, n]: each feature at its own end (`Domain.counterpoint`)
        self.counterpoints = torch.tensor(domain.counterpoint(np.array([0, 1]), net.directions), dtype=dtype, device=device)
        self.threshold = threshold
        self.device, self.dtype = device, dtype
        self.max_rows = max_rows
        variant_rows = max_rows * net.n_inputs
        self.buffers = [torch.empty(variant_rows, width, dtype=dtype, device=device) for width in net.widths]

    def _tail(self, h1: torch.Tensor, buffers: list[torch.Tensor] | None = None) -> torch.Tensor:
        """From the first activation on: pre-activations h1 [m, d1] → outputs [m]. With
        `buffers`, h1 is overwritten and layer ℓ may write into buffers[ℓ][:m].

        A width-1 layer is a matrix-vector product (a matmul of one column is slower than it;
        docs/results.md); a ReLU layer on a CPU in float32 is oneDNN's fused linear + ReLU (one pass over its
        output instead of bias copy, matmul and ReLU)."""
        z = self.activations[0].apply_(h1)
        for layer in range(1, len(self.weights_t)):
            activation = self.activations[layer]
            if self.weights[layer].shape[0] == 1:
                h = torch.mv(z, self.weights[layer][0]).add_(self.biases[layer])[:, None]
            elif self.fused and activation.name == "relu":
                z = torch.ops.mkldnn._linear_pointwise(z, self.weights[layer], self.biases[layer], "relu", [], "")
                continue
            else:
                out = None if buffers is None else buffers[layer][: z.shape[0]]
                h = torch.addmm(self.biases[layer], z, self.weights_t[layer], out=out)
            z = activation.apply_(h)
        return z[:, 0]

    def _first(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.biases[0], x, self.weights_t[0])

    def _predict(self, x: torch.Tensor) -> torch.Tensor:
        return self._tail(self._first(x)) > self.threshold

    @torch.no_grad()
    def run(self, X: torch.Tensor, kind: str) -> tuple[torch.Tensor, ...]:
        X = X.to(device=self.device, dtype=self.dtype)
        b, n = X.shape
        h1 = self._first(X)
        base_h1 = h1.clone() if kind == "contrastive" else None
        outputs = self._tail(h1)
        predictions = outputs > self.threshold
        counterpoint = self.counterpoints[predictions.long()]
        # goal: the prediction a prefix must reach — the other class (CXp) or x's class (AXp).
        base, target, goal = shortcut(kind, X, counterpoint, predictions)
        if base_h1 is None:
            base_h1 = self._first(base)
        # Scores: f at every single-feature variant, each a rank-one update of base_h1; the
        # variants of at most `max_rows` rows at a time.
        scores = torch.empty(b, n, dtype=self.dtype, device=self.device)
        moves = target - base
        for start in range(0, b, self.max_rows):
            stop = min(b, start + self.max_rows)
            variants = self.buffers[0][: (stop - start) * n].view(stop - start, n, -1)
            torch.addcmul(
                base_h1[start:stop, None, :], moves[start:stop, :, None], self.weights_t[0][None], out=variants
            )
            scores[start:stop] = self._tail(variants.view((stop - start) * n, -1), self.buffers).view(stop - start, n)
        ascending = predictions ^ (kind == "abductive")
        order = torch.sort(torch.where(ascending[:, None], scores, -scores), dim=1, stable=True).indices
        # rank [b, n]: each feature's position in the order, in 32 bits (the search reads it on every pass)
        rank = torch.empty(b, n, dtype=torch.int32, device=self.device)
        rank.scatter_(1, order, torch.arange(n, dtype=torch.int32, device=self.device).expand(b, n))
        lo = torch.zeros(b, dtype=torch.long, device=self.device)
        if kind == "contrastive":  # no CXp unless the whole counterpoint (prefix n) flips
            exists = self._predict(target) == goal
            hi = torch.full((b,), n, dtype=torch.long, device=self.device)
        else:  # the AXp is empty when the counterpoint (prefix 0) already predicts p(x)
            exists = torch.ones(b, dtype=torch.bool, device=self.device)
            hi = torch.where(self._predict(base) == goal, 0, n)
        # Binary search. Invariant: prefix hi reaches the goal, prefix lo does not (or lo = hi = 0).
        active = exists & (hi - lo > 1)
        while bool(active.any()):
            middle = (lo + hi) // 2
            prefix = torch.where(rank < middle[:, None].to(torch.int32), target, base)
            reached = self._predict(prefix) == goal
            hi = torch.where(active & reached, middle, hi)
            lo = torch.where(active & ~reached, middle, lo)
            active = exists & (hi - lo > 1)
        sizes = torch.where(exists, hi, 0)
        masks = (rank < sizes[:, None]) & exists[:, None]
        cpu = torch.device("cpu")
        return (
            masks.to(cpu),
            sizes.to(cpu, torch.long),
            exists.to(cpu),
            predictions.to(cpu, torch.long),
            outputs.to(cpu, torch.float64),
            order.to(cpu),
        )


@functools.cache
def _fused_relu_linear_available(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether oneDNN's fused linear + ReLU (`torch.ops.mkldnn._linear_pointwise`, the op torch's
    own compiler emits on CPUs) runs here and agrees with addmm + ReLU: CPU, float32 only."""
    if device.type != "cpu" or dtype != torch.float32 or not torch.backends.mkldnn.is_available():
        return False
    x, weight, bias = torch.randn(8, 4), torch.randn(3, 4), torch.randn(3)
    try:
        fused = torch.ops.mkldnn._linear_pointwise(x, weight, bias, "relu", [], "")
    except (AttributeError, RuntimeError):
        return False
    return bool(torch.allclose(fused, torch.relu(torch.addmm(bias, x, weight.T)), rtol=1e-5, atol=1e-5))


def explain_reference(
    net: Network | nn.Module,
    X: torch.Tensor | np.ndarray,
    kind: str = "contrastive",
    domain: Domain | None = None,
    threshold: float | None = None,
    exact: bool = False,
    dtype: torch.dtype = torch.float64,
) -> ExplainResult:
    """Algorithm 1 of the paper (and its dual for `abductive`) as written: for each row, n model
    calls for the scores, a stable sort, then one call per prefix until the prediction changes.

    The dual adds one check the paper leaves implicit: when p(x') = p(x) the prediction is
    constant on the box and the empty set is the AXp. With `exact=True` every model call is an
    exact evaluation (`cardinal.exact`) instead of a float forward pass, and the sort orders two
    scores only when exact arithmetic decides it (disjoint enclosures, or provably equal scores:
    `cardinal.exact.exact_blocks`); raises `cardinal.errors.Undecided` for a row whose prediction,
    score order or prefix check exact arithmetic cannot decide (smooth networks only).
    """
    network = net if isinstance(net, Network) else Network.from_torch(net)
    X_checked, domain, network, threshold = validated(network, X, kind, domain, threshold)
    calls: FloatCalls | ExactCalls
    if exact:
        calls = ExactCalls(ExactNetwork(network), threshold)
    else:
        calls = FloatCalls(network.to_torch(dtype=dtype), dtype, threshold)
    masks, sizes, exists, predictions, outputs, orders = [], [], [], [], [], []
    for x in X_checked:
        features, prediction, output, order = reference_row(calls, x, kind, domain, network.directions)
        mask = torch.zeros(network.n_inputs, dtype=torch.bool)
        mask[list(features or ())] = True
        masks.append(mask)
        sizes.append(len(features or ()))
        exists.append(features is not None)
        predictions.append(prediction)
        outputs.append(output)
        orders.append(order)
    return ExplainResult(
        kind,
        torch.stack(masks),
        torch.tensor(sizes, dtype=torch.long),
        torch.tensor(exists, dtype=torch.bool),
        torch.tensor(predictions, dtype=torch.long),
        torch.tensor(outputs, dtype=torch.float64),
        torch.tensor(orders, dtype=torch.long),
        directions=network.directions,
    )


def _verified(
    net: Network, X: np.ndarray, result: ExplainResult, domain: Domain, threshold: float, device: torch.device
) -> ExplainResult:
    """Replace each answer by Algorithm 1's in exact arithmetic (`_ExactGreedy`) and say per row
    whether the batched float answer already equalled it ("exact"), differed ("repaired": the
    exact answer is reported), or exact arithmetic could not decide Algorithm 1's answer
    ("undecided": a smooth network's enclosures leave p(x), a score order or a prefix check
    open; the float answer is kept, unverified, and the prediction is the exact one, −1 when
    it is p(x) that is undecided)."""
    worker = _ExactGreedy(net, domain, threshold, device)
    rows = max(1, _VERIFY_CHUNK_ELEMENTS // (net.n_inputs * (net.n_inputs + sum(net.widths))))
    columns: dict[str, list[torch.Tensor]] = {name: [] for name in ("masks", "sizes", "exists", "predictions", "order")}
    checks: list[str] = []
    for start in range(0, len(X), rows):
        answers = worker.run(X[start : start + rows], result.kind)
        for offset, answer in enumerate(answers):
            row = start + offset
            if answer.order is None:
                checks.append("undecided")
                values = {name: getattr(result, name)[row] for name in columns}
                values["predictions"] = torch.tensor(answer.prediction)
            else:
                mask = torch.zeros(net.n_inputs, dtype=torch.bool)
                mask[torch.as_tensor(answer.order[: answer.size])] = answer.exists
                values = {
                    "masks": mask,
                    "sizes": torch.tensor(answer.size if answer.exists else 0),
                    "exists": torch.tensor(answer.exists),
                    "predictions": torch.tensor(answer.prediction),
                    "order": torch.as_tensor(answer.order),
                }
                same = bool(result.exists[row]) == answer.exists and bool(torch.equal(result.masks[row], mask))
                checks.append("exact" if same and int(result.predictions[row]) == answer.prediction else "repaired")
            for name, value in values.items():
                columns[name].append(value.to(getattr(result, name).dtype))
    stacked = {name: torch.stack(values) for name, values in columns.items()}
    return ExplainResult(result.kind, outputs=result.outputs, checks=tuple(checks), directions=net.directions, **stacked)


@dataclass(frozen=True)
class _Answer:
    """Algorithm 1's answer to one row in exact arithmetic. `prediction`: p(x), −1 when undecided.
    `order` [n]: None when the answer is undecided; else the explanation is its first `size`
    features (when `exists`), and those first `size` are Algorithm 1's set (the order beyond,
    and within groups settled in float, is a hint)."""

    prediction: int
    exists: bool = False
    size: int = 0
    order: np.ndarray | None = None


class _ExactGreedy:
    """Algorithm 1 (or its dual) in exact arithmetic, at float speed where float is provably right.

    Every float64 value comes with a rigorous error bound (`cardinal.bounds.BoundedForward`), so:

    * predictions (of x, and of the prefixes along the greedy order) are exact: rows within their
      bound of the threshold are re-decided by exact evaluation;
    * in the scores sorted in float, neighbours whose bounds do not overlap are in the exact order,
      and so are two features whose variants provably leave f at its value at the base (every
      unit they change lies certainly on one flat piece of its activation, both at the base and
      at the variant: an exact tie, broken by index). The exact order can differ from the float
      one only inside *groups*, maximal runs of neighbours not settled this way. A prefix that
      ends at a group boundary is the same set in both orders, and on a monotone network prefix
      validity only grows along the order. So a binary search over group boundaries finds the
      group in which the answer stops; only that group's scores are evaluated exactly, and the
      stop inside it is found by a second binary search over its exact order.

    Inside a group the scores are exact enclosures, ordered only where exact arithmetic decides:
    disjoint enclosures, or provably equal scores (equal points, equal first-layer
    pre-activations, or both features unchanged), equal ones by lower index (`exact_blocks`). Where
    the answer would stop among scores whose order stays open, the row is undecided — never an
    order by midpoints — unless it provably takes all of them.
    """

    def __init__(self, net: Network, domain: Domain, threshold: float, device: torch.device) -> None:
        self.exact = ExactNetwork(net)
        self.forward = BoundedForward(net, device, self.exact)
        self.domain, self.threshold, self.device = domain, threshold, device
        self.n = net.n_inputs
        # which units each unit feeds, [in, out] float64 (0/1): a changed input may change them
        self.feeds = [torch.tensor(layer.weight.T != 0, dtype=torch.float64, device=device) for layer in net.layers]

    def _predict(self, Y: torch.Tensor) -> np.ndarray:
        """[m, n] float64 → [m] exact predictions (−1: undecided)."""
        return self.forward.predictions(Y.to(self.device), self.threshold).cpu().numpy()

    def _exact_scores(self, Y: np.ndarray) -> list[Score]:
        """Exact scores (enclosures with their first-layer keys) of Y [m, n]."""
        return self.exact.scores(Y) if len(Y) else []

    def run(self, X: np.ndarray, kind: str) -> list[_Answer]:
        """For rows X [R, n]: Algorithm 1's answer per row in exact arithmetic."""
        r, n = X.shape
        X_t = torch.as_tensor(X, dtype=torch.float64)
        predictions = self._predict(X_t)
        decided = predictions >= 0
        p = np.where(decided, predictions, 0)
        counterpoint = torch.as_tensor(self.domain.counterpoint(p, self.exact.net.directions))
        base, target, goal = shortcut(kind, X_t, counterpoint, p)
        # The ends: a CXp exists iff the whole counterpoint reaches the goal; the AXp is empty iff
        # the counterpoint alone (prefix 0) does.
        end = self._predict(target if kind == "contrastive" else base)
        decided &= end >= 0
        exists = end == goal if kind == "contrastive" else np.ones(r, dtype=bool)
        empty = (end == goal) if kind == "abductive" else np.zeros(r, dtype=bool)
        scores, errors, unchanged, known = self._scores(base, target)
        ascending = (p == 1) == (kind == "contrastive")
        keys = np.where(ascending[:, None], scores, -scores)
        # Float order; among equal keys the unchanged features first (they are contiguous), then by index.
        order = np.lexsort((~unchanged, keys), axis=1)
        sorted_keys, sorted_errors = np.take_along_axis(keys, order, 1), np.take_along_axis(errors, order, 1)
        settled = np.diff(sorted_keys, axis=1) > (sorted_errors[:, 1:] + sorted_errors[:, :-1]) * SAFETY + TINY
        settled |= _isolated_block(np.take_along_axis(unchanged, order, 1), settled)
        # Group boundaries as prefix lengths [r, n + 1], padded with n: 0, the ends of groups, n.
        lengths = np.full((r, n + 1), n)
        for row in range(r):
            ends = np.concatenate([[0], np.flatnonzero(settled[row]) + 1, [n]])
            lengths[row, : len(ends)] = ends
        counts = (lengths < n).sum(axis=1) + 1
        # Binary search over boundaries. Invariant: boundary lo does not reach the goal, hi does.
        search = decided & exists & ~empty
        lo, hi = np.zeros(r, dtype=np.int64), counts - 1
        while (active := search & (hi - lo > 1)).any():
            middle = (lo + hi) // 2
            reached = self._prefix_reaches(base, target, order, lengths[np.arange(r), middle], goal)
            decided &= ~active | (reached >= 0)
            lo = np.where(active & (reached == 0), middle, lo)
            hi = np.where(active & (reached == 1), middle, hi)
            search &= decided
        answers: list[_Answer] = []
        for row in range(r):
            if not decided[row]:
                answers.append(_Answer(int(predictions[row])))
            elif not exists[row] or empty[row]:
                answers.append(_Answer(int(p[row]), bool(exists[row]), 0, order[row]))
            else:
                low, high = int(lengths[row, lo[row]]), int(lengths[row, hi[row]])
                group = _Group(row, low, high, bool(ascending[row]), int(goal[row]))
                size = self._inside_group(group, base[row], target[row], order[row], unchanged[row], known)
                answers.append(_Answer(int(p[row])) if size is None else _Answer(int(p[row]), True, size, order[row]))
        return answers

    def _scores(
        self, base: torch.Tensor, target: torch.Tensor
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[tuple[int, int], Score]]:
        """f at every single-feature variant (row r, feature j) of base [r, n] towards target [r, n]:
        float scores [r, n], their error bounds [r, n], whether each provably equals f(base)
        exactly [r, n] (`_unchanged`), and the exact values computed on the way, keyed (r, j) (j = −1:
        the base), for rows a step unit or an overflow left unsure."""
        r, n = base.shape
        variants = torch.where(torch.eye(n, dtype=torch.bool)[None], target[:, None, :], base[:, None, :]).reshape(r * n, n)
        points = torch.cat([base, variants])
        first = self.forward.single_moves(base.to(self.device), target.to(self.device))
        values, bounds, unsure, layers = self.forward.trace(points.to(self.device), first=first)
        values, bounds = values.cpu().numpy().copy(), bounds.cpu().numpy().copy()
        known: dict[tuple[int, int], Score] = {}
        rows = np.flatnonzero(unsure.cpu().numpy())
        for index, score in zip(rows, self._exact_scores(points[rows].numpy()), strict=True):
            known[(int(index), -1) if index < r else divmod(int(index) - r, n)] = score
            values[index], bounds[index] = _float_enclosure(score.enclosure)
        # a step unit near its breakpoint leaves the bounds of the layers after it meaningless
        unsure_rows = unsure.cpu().numpy()
        trusted = ~unsure_rows[r:].reshape(r, n) & ~unsure_rows[:r, None]
        unchanged = self._unchanged(layers, (target != base).to(self.device), r, n) & trusted
        scores, errors = values[r:].reshape(r, n), bounds[r:].reshape(r, n)
        scores[unchanged] = np.broadcast_to(values[:r, None], (r, n))[unchanged]
        errors[unchanged] = np.broadcast_to(bounds[:r, None], (r, n))[unchanged]
        return scores, errors, unchanged, known

    def _unchanged(self, layers: list, moved: torch.Tensor, r: int, n: int) -> np.ndarray:
        """[r, n] bool: f at variant (r, j) provably equals f at base r exactly. `layers` holds each
        layer's (activation, h, bound) for the r base rows followed by the r·n variants; moved [r, n]:
        target ≠ base. A unit may change only if an input it reads may change, and does not when
        its pre-activation lies certainly on the same flat piece at the variant and at the base."""
        changed = None
        for number, (activation, h, bound) in enumerate(layers):
            if number == 0:
                changed = (moved[:, :, None] & (self.feeds[0] > 0)[None]).reshape(r * n, -1)
            else:
                changed = (changed.to(torch.float64) @ self.feeds[number]) > 0
            at_base = constant_piece(activation, h[:r], bound[:r]).repeat_interleave(n, dim=0)
            at_variant = constant_piece(activation, h[r:], bound[r:])
            changed &= ~((at_variant >= 0) & (at_variant == at_base))
        return ~changed[:, 0].reshape(r, n).cpu().numpy()

    def _prefix_reaches(
        self, base: torch.Tensor, target: torch.Tensor, order: np.ndarray, lengths: np.ndarray, goal: np.ndarray
    ) -> np.ndarray:
        """Per row: 1 if the first `lengths` features of `order` [r, n] reach the goal, 0 if not, −1 undecided."""
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(order.shape[1])[None, :], axis=1)
        prefix = torch.where(torch.as_tensor(rank < lengths[:, None]), target, base)
        predicted = self._predict(prefix)
        return np.where(predicted < 0, -1, (predicted == goal).astype(np.int64))

    def _inside_group(
        self,
        group: _Group,
        base: torch.Tensor,
        target: torch.Tensor,
        order: np.ndarray,
        unchanged: np.ndarray,
        known: dict[tuple[int, int], Score],
    ) -> int | None:
        """The answer's size when prefix `group.low` misses the goal and prefix `group.high` reaches
        it: order[low:high] is put in its exact order (in place) and searched; None if undecided."""
        row, low, high = group.row, group.low, group.high
        if high - low == 1:
            return high
        members = [int(j) for j in order[low:high]]
        missing = [j for j in members if (row, j) not in known and not unchanged[j]]
        if any(unchanged[j] for j in members) and (row, -1) not in known:
            missing.append(-1)
        points = [(base if j < 0 else torch.where(torch.arange(self.n) == j, target, base)).numpy() for j in missing]
        for j, score in zip(missing, self._exact_scores(np.array(points).reshape(-1, self.n)), strict=True):
            known[(row, j)] = score
        blocks = exact_blocks({j: known[(row, -1)] if unchanged[j] else known[(row, j)] for j in members}, group.ascending)
        order[low:high] = [j for block in blocks for features in block for j in features]
        # The prefix lengths at which the exact order fixes the set: every one inside a decided block
        # (one class of equal scores), only the ends of a block whose order is undecided.
        lengths = [low]
        for block in blocks:
            size = sum(len(features) for features in block)
            lengths += range(lengths[-1] + 1, lengths[-1] + size + 1) if len(block) == 1 else [lengths[-1] + size]
        below, above = 0, len(lengths) - 1  # prefix lengths[below] misses, lengths[above] reaches
        while above - below > 1:
            middle = (below + above) // 2
            reached = self._prefix_reaches(
                base[None], target[None], order[None], np.array([lengths[middle]]), np.array([group.goal])
            )[0]
            if reached < 0:
                return None
            below, above = (below, middle) if reached else (middle, above)
        start, stop = lengths[below], lengths[above]
        if stop - start == 1 or self._only_whole(group, base, target, order[:start], order[start:stop]):
            return stop
        return None  # it stops inside a block of scores whose order is undecided

    def _only_whole(
        self, group: _Group, base: torch.Tensor, target: torch.Tensor, before: np.ndarray, block: np.ndarray
    ) -> bool:
        """Whether the prefix `before` plus any |block| − 1 features of `block` misses the goal, for
        sure: then, whatever the block's exact order, the answer takes the whole block (on a
        monotone network every shorter prefix is a subset of one of these)."""
        sets = [np.concatenate([before, np.delete(block, i)]) for i in range(len(block))]
        points = torch.stack([torch.where(torch.isin(torch.arange(self.n), torch.as_tensor(s)), target, base) for s in sets])
        return bool((self._predict(points) == 1 - group.goal).all())


def _float_enclosure(enclosure: Enclosure) -> tuple[float, float]:
    """A float64 value v and a bound e with |v − y| ≤ e for every y in the enclosure (e = inf when
    the enclosure does not fit the double range): a rigorous float hint for the float order."""
    middle = (enclosure.lower + enclosure.upper) / 2
    try:
        value = float(middle)
        radius = float(enclosure.width / 2)
    except OverflowError:
        largest = float(np.finfo(np.float64).max)
        return (largest if middle > 0 else -largest), math.inf
    return value, (radius + abs(value) * UNIT_ROUNDOFF) * SAFETY + TINY  # |fl(m) − m| ≤ u|fl(m)|·(1 + u)


def _isolated_block(flat: np.ndarray, apart: np.ndarray) -> np.ndarray:
    """flat [r, n]: which sorted positions hold a feature that leaves f unchanged (one contiguous
    block per row, all with exactly f(base)); apart [r, n − 1]: neighbours settled by their bounds.
    Returns [r, n − 1]: the cuts inside a block whose neighbours on both sides are apart from it.
    There its members are exactly equal and nothing else can equal them, so their exact order is by
    index, as the float order has them."""
    inside = flat[:, 1:] & flat[:, :-1]
    padded = np.pad(apart, ((0, 0), (1, 1)), constant_values=True)  # the ends count as apart
    first, last = np.argmax(flat, axis=1), flat.shape[1] - 1 - np.argmax(flat[:, ::-1], axis=1)
    rows = np.arange(flat.shape[0])
    isolated = padded[rows, first] & padded[rows, last + 1]
    return inside & isolated[:, None]


@dataclass(frozen=True)
class _Group:
    """The group of row `row` in which its answer stops: positions low..high − 1 of its order."""

    row: int
    low: int
    high: int
    ascending: bool
    goal: int

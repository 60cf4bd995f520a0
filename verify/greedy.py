"""Greedy contrastive (CXp) and abductive (AXp) explanations of monotone networks.

`explain` is the batched version of the paper's Algorithm 1 and its dual; `explain_reference`
keeps the algorithm as written, one model call at a time, as the baseline for tests and
benchmarks. Both return an `ExplainResult` and agree row by row.

How `explain` batches, for inputs X [B, n] and first-layer weights W1 [d1, n]:

* Scores. A single-feature variant `base with j set to target_j` changes the first layer's
  pre-activation by the rank-one term `(target_j − base_j) · W1[:, j]`, so all B·n variants come
  from one product `base @ W1ᵀ` plus a broadcast multiply-add; only layers 2..L run on B·n rows.
* First flip. Along the greedy order the inputs move monotonically from `base` to `target`, so on
  a monotone network the prediction of the prefixes changes at most once; a binary search over
  the prefix length finds the first change with ⌈log2(n+1)⌉ batched forward passes.

Ties in the scores break by lower feature index. Decisions are taken in the chosen float dtype;
`verify=True` re-checks each answer exactly (see `verify.exact`) and recomputes a row with exact
arithmetic where float rounding decided differently.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch
from torch import nn

from .domain import Domain
from .errors import InputError
from .exact import ExactNetwork, modified_inputs
from .network import Network
from .problem import KINDS

# Elements of the [rows, n, width] variant tensor processed at once: a few MB on a CPU (measured
# best on 2 cores; smaller chunks pay per-call overhead, larger ones leave the cache), large
# enough to keep a GPU busy.
_CPU_CHUNK_ELEMENTS = 1 << 20
_CUDA_CHUNK_ELEMENTS = 1 << 27
# Elements of the [rows, n] tensors of the sort and the binary search processed at once.
_SEARCH_BLOCK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class ExplainResult:
    """Greedy explanations of one kind for B inputs with n features; tensors live on the CPU.

    masks [B, n] bool (the explanation), sizes [B] int64, exists [B] bool (a CXp may not exist;
    an AXp always does), predictions [B] int64 (0/1), outputs [B] float64 (f(x) in float),
    order [B, n] int64 (feature indices in greedy order: the explanation is its first `size`).
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

    def features(self, row: int) -> tuple[int, ...] | None:
        """The explanation of `row` as sorted feature indices, or None when none exists."""
        if not bool(self.exists[row]):
            return None
        return tuple(int(i) for i in torch.nonzero(self.masks[row]).flatten())

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


def _validated(net: Network, X: torch.Tensor | np.ndarray, kind: str, domain: Domain | None) -> tuple[np.ndarray, Domain]:
    if kind not in KINDS:
        raise InputError(f"unknown kind {kind!r} (use contrastive or abductive)")
    problems = net.monotonicity_problems()
    if problems:
        raise InputError(
            "greedy explanations need a monotone network, and this one is not: "
            + "; ".join(problems)
            + ". Use the exact solvers instead (solvers.solve_minimum, or `cardinal certify`)."
        )
    domain = domain if domain is not None else Domain.unit(net.n_inputs)
    if domain.n != net.n_inputs:
        raise InputError(f"domain has {domain.n} features, the network has {net.n_inputs} inputs")
    return domain.check(X), domain


def explain(
    net: Network,
    X: torch.Tensor | np.ndarray,
    kind: str = "contrastive",
    domain: Domain | None = None,
    threshold: float = 0.0,
    device: str | torch.device = "auto",
    dtype: torch.dtype = torch.float64,
    verify: bool = False,
) -> ExplainResult:
    """Greedy explanations for inputs X [B, n] (or [n]) of a monotone network.

    Raises `InputError` for a non-monotone network, an unknown kind, or an input outside the
    domain (naming row and feature).
    """
    X_checked, domain = _validated(net, X, kind, domain)
    torch_device = resolve_device(device)
    limit = _CUDA_CHUNK_ELEMENTS if torch_device.type == "cuda" else _CPU_CHUNK_ELEMENTS
    rows = min(len(X_checked), max(1, limit // (net.n_inputs * max(net.widths))))
    # Sort and search run on larger blocks than the variants: fewer, larger calls.
    block = min(len(X_checked), max(rows, _SEARCH_BLOCK_ELEMENTS // net.n_inputs))
    worker = _BatchedGreedy(net, domain, threshold, torch_device, dtype, max_rows=rows)
    parts = [worker.run(torch.as_tensor(X_checked[i : i + block]), kind) for i in range(0, len(X_checked), block)]
    result = ExplainResult(kind, *(torch.cat(column) for column in zip(*parts, strict=True)))
    return _verified(net, X_checked, result, domain, threshold) if verify else result


class _BatchedGreedy:
    """The batched worker: one block of rows at a time, on one device and dtype.

    The single-feature variants of `max_rows` rows at a time flow through preallocated buffers
    (one per layer) with in-place activations, so the hot loop allocates nothing; the sort and
    the binary search then run on the whole block.
    """

    def __init__(
        self, net: Network, domain: Domain, threshold: float, device: torch.device, dtype: torch.dtype, max_rows: int
    ) -> None:
        self.weights_t = [torch.tensor(layer.weight.T, dtype=dtype, device=device) for layer in net.layers]  # [in, out]
        self.biases = [torch.tensor(layer.bias, dtype=dtype, device=device) for layer in net.layers]
        self.activations = [layer.activation for layer in net.layers]
        self.lower = torch.tensor(domain.lower, dtype=dtype, device=device)
        self.upper = torch.tensor(domain.upper, dtype=dtype, device=device)
        self.threshold = threshold
        self.device, self.dtype = device, dtype
        self.max_rows = max_rows
        variant_rows = max_rows * net.n_inputs
        self.buffers = [torch.empty(variant_rows, width, dtype=dtype, device=device) for width in net.widths]

    def _tail(self, h1: torch.Tensor, buffers: list[torch.Tensor] | None = None) -> torch.Tensor:
        """From the first activation on: pre-activations h1 [m, d1] → outputs [m]. With
        `buffers`, h1 is overwritten and layer ℓ writes into buffers[ℓ][:m]."""
        z = self.activations[0].apply_(h1)
        for layer in range(1, len(self.weights_t)):
            out = None if buffers is None else buffers[layer][: z.shape[0]]
            h = torch.addmm(self.biases[layer], z, self.weights_t[layer], out=out)
            z = self.activations[layer].apply_(h)
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
        counterpoint = torch.where(predictions[:, None], self.lower, self.upper)
        base, target = (X, counterpoint) if kind == "contrastive" else (counterpoint, X)
        if base_h1 is None:
            base_h1 = self._first(base)
        # Scores: f at every single-feature variant, each a rank-one update of base_h1; the
        # variants of at most `max_rows` rows at a time.
        scores = torch.empty(b, n, dtype=self.dtype, device=self.device)
        for start in range(0, b, self.max_rows):
            stop = min(b, start + self.max_rows)
            variants = self.buffers[0][: (stop - start) * n].view(stop - start, n, -1)
            torch.addcmul(
                base_h1[start:stop, None, :], (target - base)[start:stop, :, None], self.weights_t[0][None], out=variants
            )
            scores[start:stop] = self._tail(variants.view((stop - start) * n, -1), self.buffers).view(stop - start, n)
        ascending = predictions ^ (kind == "abductive")
        order = torch.sort(torch.where(ascending[:, None], scores, -scores), dim=1, stable=True).indices
        rank = torch.empty_like(order)
        rank.scatter_(1, order, torch.arange(n, device=self.device).expand(b, n))
        # goal: the prediction a prefix must reach — the other class (CXp) or x's class (AXp).
        goal = ~predictions if kind == "contrastive" else predictions
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
            prefix = torch.where(rank < middle[:, None], target, base)
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


def explain_reference(
    net: Network | nn.Module,
    X: torch.Tensor | np.ndarray,
    kind: str = "contrastive",
    domain: Domain | None = None,
    threshold: float = 0.0,
    exact: bool = False,
    dtype: torch.dtype = torch.float64,
) -> ExplainResult:
    """Algorithm 1 of the paper (and its dual for `abductive`) as written: for each row, n model
    calls for the scores, a stable sort, then one call per prefix until the prediction changes.

    The dual adds one check the paper leaves implicit: when p(x') = p(x) the prediction is
    constant on the box and the empty set is the AXp. With `exact=True` every model call is an
    exact evaluation (`verify.exact`) instead of a float forward pass.
    """
    network = net if isinstance(net, Network) else Network.from_torch(net)
    X_checked, domain = _validated(network, X, kind, domain)
    if exact:
        model = ExactNetwork(network)
        call = _exact_call(model, threshold)
    else:
        module = network.to_torch(dtype=dtype)
        call = _float_call(module, dtype)
    masks, sizes, exists, predictions, outputs, orders = [], [], [], [], [], []
    for x in X_checked:
        features, prediction, output, order = _reference_row(call, x, kind, domain, threshold)
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
    )


def _float_call(module: nn.Module, dtype: torch.dtype):
    def call(y: np.ndarray) -> float:
        with torch.no_grad():
            return float(module(torch.tensor(y, dtype=dtype)[None, :])[0, 0])

    return call


class UndecidedError(ArithmeticError):
    """A smooth network's output lies within the stated margin of the threshold."""


def _exact_call(model: ExactNetwork, threshold: float):
    t = Fraction(threshold)

    def call(y: np.ndarray) -> Fraction:
        enclosure = model.outputs(y[None, :])[0]
        if enclosure.predict(t) is None:
            raise UndecidedError(
                f"output enclosure [{float(enclosure.lower)}, {float(enclosure.upper)}] contains t = {threshold}"
            )
        # The midpoint decides like the enclosure and, for PWL networks, is the exact value.
        # Fractions compare exactly with floats, so the algorithm below runs unchanged.
        return (enclosure.lower + enclosure.upper) / 2

    return call


def _reference_row(
    call, x: np.ndarray, kind: str, domain: Domain, threshold: float
) -> tuple[tuple[int, ...] | None, int, float, list[int]]:
    """One row of Algorithm 1 (or its dual): (features or None, prediction, f(x), greedy order)."""
    n = x.shape[0]
    output = call(x)
    prediction = int(output > threshold)
    counterpoint = domain.lower if prediction == 1 else domain.upper
    base, target = (x, counterpoint) if kind == "contrastive" else (counterpoint, x)
    scores = [call(modified_inputs(base, [j], target)) for j in range(n)]
    # Line 9: ascending when the starting point predicts 1 (x for CXp, x' for AXp, where p(x') ≠ p(x)).
    ascending = (prediction == 1) == (kind == "contrastive")
    order = sorted(range(n), key=lambda j: scores[j] if ascending else -scores[j])
    if kind == "abductive" and int(call(counterpoint) > threshold) == prediction:
        return (), prediction, float(output), order  # constant prediction on the box: ∅ is the AXp
    goal = 1 - prediction if kind == "contrastive" else prediction
    chosen: list[int] = []
    for j in order:
        chosen.append(j)
        if int(call(modified_inputs(base, chosen, target)) > threshold) == goal:
            return tuple(sorted(chosen)), prediction, float(output), order
    return None, prediction, float(output), order


def _verified(net: Network, X: np.ndarray, result: ExplainResult, domain: Domain, threshold: float) -> ExplainResult:
    """Re-check each answer exactly; recompute rows where float rounding decided differently."""
    exact = ExactNetwork(net)
    checks: list[str] = []
    rows: dict[str, list[torch.Tensor]] = {name: [] for name in ("masks", "sizes", "exists", "predictions", "order")}
    for row, x in enumerate(X):
        verdict = _check_row(exact, x, result, row, domain, threshold)
        if verdict == "repaired":
            redone = explain_reference(net, x[None, :], result.kind, domain, threshold, exact=True)
            source, index = redone, 0
        else:
            source, index = result, row
        for name, values in rows.items():
            values.append(getattr(source, name)[index])
        checks.append(verdict)
    stacked = {name: torch.stack(values) for name, values in rows.items()}
    return ExplainResult(result.kind, outputs=result.outputs, checks=tuple(checks), **stacked)


def _check_row(exact: ExactNetwork, x: np.ndarray, result: ExplainResult, row: int, domain: Domain, threshold: float) -> str:
    """ "exact" when the float decisions that made this answer hold exactly, else "repaired"
    (or "undecided" when a smooth enclosure straddles the threshold)."""
    prediction = exact.predictions(x[None, :], threshold)[0]
    if prediction < 0:
        return "undecided"
    if prediction != int(result.predictions[row]):
        return "repaired"
    counterpoint = domain.counterpoint(np.array([prediction]))[0]
    features = result.features(row)
    kind = result.kind
    goal = 1 - prediction if kind == "contrastive" else prediction
    base, target = (x, counterpoint) if kind == "contrastive" else (counterpoint, x)
    probes: list[np.ndarray] = []
    expected: list[bool] = []
    if features is None:  # no CXp: even the whole counterpoint keeps the prediction
        probes.append(target)
        expected.append(False)
    else:
        probes.append(modified_inputs(base, features, target))
        expected.append(True)
        if features:  # the prefix one shorter must not have reached the goal yet
            last_added = int(result.order[row, len(features) - 1])
            shorter = tuple(j for j in features if j != last_added)
            probes.append(modified_inputs(base, shorter, target))
            expected.append(False)
    reached = exact.predictions(np.stack(probes), threshold)
    if (reached < 0).any():
        return "undecided"
    return "exact" if all((p == goal) == e for p, e in zip(reached, expected, strict=True)) else "repaired"

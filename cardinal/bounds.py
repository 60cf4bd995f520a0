"""Float64 forward passes with a rigorous bound on their rounding error, and exact decisions
taken at float speed from them (`BoundedForward`).

A layer computes `h = fl(W z + b)` from a computed z with `|z − z_true| ≤ e_z`; then
`|h − h_true| ≤ γ_{m+1} (|W| |z| + |b|) + |W| e_z` with `γ_m = m u / (1 − m u)`, u = 2^-53 (any
summation order, FMA included; `cardinal.rounding`). Activations pass the bound on with their
Lipschitz constant plus their own rounding (`Activation.float_error`); a step unit is exact unless
|h − at| is within the bound, which makes its row *unsure*. Every computed bound is scaled by
1 + 2^-20 and raised by 2^-1000, more than the rounding and underflow of evaluating the bound
itself.

`BoundedForward.predictions` decides p(y) exactly (the rule of `cardinal.prediction`): a row is
decided in float when its outputs leave no doubt — K = 1: |f − t| exceeds f's bound; K ≥ 2: the
float argmax c beats every other output j by more than the two bounds, f_c − f_j > b_c + b_j, so
that no tie is ever decided in float — and the others (and unsure rows) by `cardinal.exact`
(exact dyadic arithmetic for piecewise-linear networks, rigorous enclosures for smooth ones, −1
where an enclosure leaves the prediction open).
"""

from __future__ import annotations

import math
from types import ModuleType

import numpy as np
import torch

from .activations import Activation
from .exact import ExactNetwork
from .network import Network
from .prediction import PREDICTION_DTYPE
from .rounding import SAFETY, TINY, UNIT_ROUNDOFF, gamma

Array = torch.Tensor | np.ndarray


class BoundedForward:
    """float64 forward passes of `net`, each output with a rigorous error bound: on `device` for
    torch tensors, and on the CPU in numpy for numpy arrays (the same code; numpy's call overhead
    is about a third of torch's, which dominates the small batches of the exact solvers)."""

    def __init__(self, net: Network, device: str | torch.device = "cpu", exact: ExactNetwork | None = None) -> None:
        self.device = torch.device(device)
        self.exact = exact if exact is not None else ExactNetwork(net)
        self.arrays = []  # per layer: W^T [in, out], |W|^T, b [out], γ·|b|, γ = γ_{in+1}, activation
        for layer in net.layers:
            weight_t = np.ascontiguousarray(layer.weight.T, dtype=np.float64)
            term_gamma = gamma(layer.weight.shape[1] + 1)
            bias = np.asarray(layer.bias, dtype=np.float64)
            self.arrays.append((weight_t, np.abs(weight_t), bias, term_gamma * np.abs(bias), term_gamma, layer.activation))
        self.layers = [
            (*(torch.tensor(a, device=self.device) for a in arrays[:4]), *arrays[4:]) for arrays in self.arrays
        ]  # the same as torch tensors on the device

    def __call__(self, Y: Array) -> tuple[Array, Array, Array]:
        """Y [B, n] float64 (a tensor on the device, or a numpy array) → (f, bound, unsure [B]
        bool) of its kind, f and bound [B] for K = 1 and [B, K] for K ≥ 2: each exact output lies
        within its `bound` of f unless the row is unsure (a step unit within its bound of its
        breakpoint, or an overflow)."""
        f, bound, unsure, _ = self.trace(Y, keep=False)
        return f, bound, unsure

    def trace(
        self, Y: Array, keep: bool = True, first: tuple[Array, Array] | None = None
    ) -> tuple[Array, Array, Array, list[tuple[Activation, Array, Array]]]:
        """Like calling, and also (with `keep`) every layer's activation, pre-activation h [B, w]
        and its bound [B, w]. `first`: the first layer's (h, bound), computed already (then Y
        is not read)."""
        if isinstance(Y if first is None else first[0], np.ndarray):
            with np.errstate(all="ignore"):  # an overflow makes its row unsure, as in torch (which does not warn)
                return self._trace(Y, keep, first, self.arrays, np)
        with torch.no_grad():
            return self._trace(Y, keep, first, self.layers, torch)

    @staticmethod
    def _trace(
        Y: Array, keep: bool, first: tuple[Array, Array] | None, layers: list[tuple], kind: ModuleType
    ) -> tuple[Array, Array, Array, list[tuple[Activation, Array, Array]]]:
        """`trace` over `layers` (`arrays` or their tensors; `kind`: np or torch)."""
        z, error, unsure = Y, None, None
        kept = []
        for number, (weight_t, abs_weight_t, bias, abs_bias_term, term_gamma, activation) in enumerate(layers):
            given = number == 0 and first is not None
            if given:
                h, bound = first
            else:
                h = _affine(bias, z, weight_t)
                spread = term_gamma * abs(z) if error is None else error + term_gamma * abs(z)
                bound = _affine(abs_bias_term, spread, abs_weight_t) * SAFETY + TINY
            if keep:
                kept.append((activation, h, bound))
            z, error, stepped = _activate(activation, h, bound, in_place=not (keep or given))
            if stepped is not None:
                unsure = stepped if unsure is None else unsure | stepped
        f, bound = z, error * SAFETY + TINY
        overflow = ~kind.isfinite(f + bound).all(1)  # also where either is not finite
        if f.shape[1] == 1:
            f, bound = f[:, 0], bound[:, 0]
        return f, bound, overflow if unsure is None else unsure | overflow, kept

    @torch.no_grad()
    def single_moves(self, base: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """First-layer pre-activations and their bounds [r + r·n, w] of the rows base [r, n] and
        then of their single-feature variants (row i with feature j set to target[i, j], in that
        order), each variant a rank-one update of its base row's product: h_v = fl(h + fl(d_j·w_j))
        with d_j = fl(target_j − base_j) adds three roundings, at most u·(2·|d_j·w_j| + |h_v|)
        beyond the base's bound (up to factors 1 + O(u), which SAFETY covers)."""
        r, n = base.shape
        weight_t, abs_weight_t, bias, abs_bias_term, term_gamma, _ = self.layers[0]
        h = torch.addmm(bias, base, weight_t)
        bound = torch.addmm(abs_bias_term, term_gamma * base.abs(), abs_weight_t).mul_(SAFETY).add_(TINY)
        moves = (target - base)[:, :, None] * weight_t[None]  # [r, n, w]
        h_moved = h[:, None, :] + moves
        bound_moved = (bound[:, None, :] + UNIT_ROUNDOFF * (2 * moves.abs() + h_moved.abs())) * SAFETY + TINY
        width = h.shape[1]
        return torch.cat([h, h_moved.reshape(r * n, width)]), torch.cat([bound, bound_moved.reshape(r * n, width)])

    def predictions(self, Y: Array, threshold: float | None) -> Array:
        """Y [B, n] float64 → [B] predictions of its kind (`cardinal.prediction.PREDICTION_DTYPE`):
        p(y) decided exactly (threshold t for K = 1, None for K ≥ 2), or −1 where an exact
        enclosure leaves it open (smooth networks only)."""
        return self.decide(Y, threshold)[0]

    def decide(self, Y: Array, threshold: float | None) -> tuple[Array, Array]:
        """`predictions`, and the float64 outputs f it started from ([B] for K = 1, [B, K] for
        K ≥ 2; a hint, never a proof)."""
        f, bound, unsure = self(Y)
        with np.errstate(invalid="ignore"):
            if f.ndim == 1:
                margin = f - threshold
                predicted = margin > 0
                unsure = unsure | ~(abs(margin) > bound * SAFETY + TINY)  # NaN counts as unsure
            else:
                predicted, clear = _argmax_clear(f, bound)
                unsure = unsure | ~clear
        if isinstance(Y, np.ndarray):
            predicted, rows = predicted.astype(PREDICTION_DTYPE), np.flatnonzero(unsure)
            if len(rows):
                predicted[rows] = self.exact.predictions(Y[rows], threshold)
            return predicted, f
        predicted, rows = predicted.to(torch.int32), torch.nonzero(unsure).flatten()
        if len(rows):
            exact = self.exact.predictions(Y[rows].cpu().numpy(), threshold)
            predicted[rows] = torch.as_tensor(exact, device=self.device)
        return predicted, f


def constant_piece(activation: Activation, h: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
    """Per unit, the index of the flat piece (slope 0) of σ that every exact pre-activation within
    `bound` of h lies on, or −1 (h [B, w], bound [B, w] → int8 [B, w]): relu's 0 below 0,
    hardtanh's clipped ends, both sides of a step; smooth and other units have none. Piece j is
    [c_j, c_{j+1}) between the breakpoints (`Activation.pieces`). Each test is strict, so rounding
    cannot mislead it: fl(a ± b) < c implies a ± b < c exactly when c is a double (rounding is
    monotone)."""
    piece = torch.full(h.shape, -1, dtype=torch.int8, device=h.device)
    if not activation.is_piecewise_linear:
        return piece
    breaks, pieces = activation.pieces()
    edges = [-math.inf, *(float(c) for c in breaks), math.inf]
    for index, (slope, _) in enumerate(pieces):
        if slope == 0:
            piece[(h - bound > edges[index]) & (h + bound < edges[index + 1])] = index
    return piece


def _argmax_clear(f: Array, bound: Array) -> tuple[Array, Array]:
    """K ≥ 2, f and bound [B, K] (numpy or torch): the float argmax c per row [B] (ties to the
    lowest index), and whether it is the exact prediction beyond doubt [B] bool: f_c − f_j >
    (b_c + b_j)·SAFETY + TINY for every j ≠ c, the rounding of both sides covered as in the K = 1
    test. Never true for tied floats or a NaN."""
    if isinstance(f, np.ndarray):
        c = f.argmax(axis=1)  # the first maximum
        f_c, b_c = np.take_along_axis(f, c[:, None], 1), np.take_along_axis(bound, c[:, None], 1)
    else:
        c = f.argmax(dim=1)  # the first maximum (torch documents it)
        f_c, b_c = f.gather(1, c[:, None]), bound.gather(1, c[:, None])
    beaten = (f_c - f) > (b_c + bound) * SAFETY + TINY  # [B, K]; False at c itself
    columns = (np if isinstance(f, np.ndarray) else torch).arange(f.shape[1])
    if not isinstance(f, np.ndarray):
        columns = columns.to(f.device)
    beaten = beaten | (columns[None, :] == c[:, None])
    return c, beaten.all(1)


def _affine(bias: Array, z: Array, weight_t: Array) -> Array:
    """bias + z @ weight_t (one fused call for tensors)."""
    return torch.addmm(bias, z, weight_t) if isinstance(z, torch.Tensor) else z @ weight_t + bias


def _activate(activation: Activation, h: Array, bound: Array, in_place: bool = False) -> tuple[Array, Array, Array | None]:
    """σ(h) for h [B, w] with error bound [B, w] → (z, bound on z, rows made unsure or None),
    overwriting h if `in_place`. A discontinuous σ passes no error on, but a row whose h lies
    within its bound of a breakpoint is unsure."""
    in_place = in_place and activation.is_continuous  # a step's h is read again below
    if isinstance(h, np.ndarray):  # the activation's own torch op, on the same memory
        z = activation.apply_(torch.from_numpy(h if in_place else h.copy())).numpy()
    else:
        z = activation.apply_(h if in_place else h.clone())
    if activation.is_continuous:
        return z, activation.float_error(z, bound), None
    unsure = None
    for at in activation.pieces()[0]:
        near = (~(abs(h - float(at)) > bound)).any(1)
        unsure = near if unsure is None else unsure | near
    return z, (np if isinstance(bound, np.ndarray) else torch).zeros_like(bound), unsure

"""Float64 forward passes with a rigorous bound on their rounding error, and exact decisions
taken at float speed from them (`BoundedForward`).

A layer computes `h = fl(W z + b)` from a computed z with `|z − z_true| ≤ e_z`; then
`|h − h_true| ≤ γ_{m+1} (|W| |z| + |b|) + |W| e_z` with `γ_m = m u / (1 − m u)`, u = 2^-53 (any
summation order, FMA included; `verify.rounding`). Activations pass the bound on with their
Lipschitz constant plus their own rounding (`Activation.float_error`); a step unit is exact unless
|h − at| is within the bound, which makes its row *unsure*. Every computed bound is scaled by
1 + 2^-20 and raised by 2^-1000, more than the rounding and underflow of evaluating the bound
itself.

`BoundedForward.predictions` decides p(y) exactly: a row whose |f − t| exceeds its bound is
decided in float; the others (and unsure rows) by `verify.exact` (exact dyadic arithmetic for
piecewise-linear networks, rigorous enclosures for smooth ones, −1 when an enclosure straddles t).
"""

from __future__ import annotations

import math

import torch

from .activations import Activation
from .exact import ExactNetwork
from .network import Network
from .rounding import SAFETY, TINY, UNIT_ROUNDOFF, gamma


class BoundedForward:
    """float64 forward passes of `net` on `device`, each output with a rigorous error bound."""

    def __init__(self, net: Network, device: str | torch.device = "cpu", exact: ExactNetwork | None = None) -> None:
        self.device = torch.device(device)
        self.exact = exact if exact is not None else ExactNetwork(net)
        self.layers = []
        for layer in net.layers:
            weight_t = torch.tensor(layer.weight.T, dtype=torch.float64, device=self.device)
            bias = torch.tensor(layer.bias, dtype=torch.float64, device=self.device)
            term_gamma = gamma(layer.weight.shape[1] + 1)
            self.layers.append((weight_t, weight_t.abs(), bias, term_gamma * bias.abs(), term_gamma, layer.activation))

    def __call__(self, Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Y [B, n] float64 on the device → (f [B], bound [B], unsure [B] bool): the exact output
        lies within `bound` of f unless the row is unsure (a step unit within its bound of its
        breakpoint, or an overflow)."""
        f, bound, unsure, _ = self.trace(Y, keep=False)
        return f, bound, unsure

    @torch.no_grad()
    def trace(
        self, Y: torch.Tensor, keep: bool = True, first: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[tuple[Activation, torch.Tensor, torch.Tensor]]]:
        """Like calling, and also (with `keep`) every layer's activation, pre-activation h [B, w]
        and its bound [B, w]. `first`: the first layer's (h, bound), computed already (then Y
        is not read)."""
        z, error = Y, None
        unsure = torch.zeros(Y.shape[0], dtype=torch.bool, device=self.device)
        kept = []
        for number, (weight_t, abs_weight_t, bias, abs_bias_term, term_gamma, activation) in enumerate(self.layers):
            if number == 0 and first is not None:
                h, bound = first
            else:
                h = torch.addmm(bias, z, weight_t)
                spread = term_gamma * z.abs() if error is None else torch.add(error, z.abs(), alpha=term_gamma)
                bound = torch.addmm(abs_bias_term, spread, abs_weight_t).mul_(SAFETY).add_(TINY)
            if keep:
                kept.append((activation, h, bound))
            z, error, stepped = _activate(activation, h, bound)
            if stepped is not None:
                unsure |= stepped
        bound = error[:, 0] * SAFETY + TINY
        unsure |= ~torch.isfinite(z[:, 0]) | ~torch.isfinite(bound)
        return z[:, 0], bound, unsure, kept

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

    def predictions(self, Y: torch.Tensor, threshold: float) -> torch.Tensor:
        """Y [B, n] float64 → [B] int8 on the device: p(y) ∈ {0, 1} decided exactly, or −1 where
        an exact enclosure straddles the threshold (smooth networks only)."""
        f, bound, unsure = self(Y)
        margin = f - threshold
        unsure |= ~(margin.abs() > bound * SAFETY + TINY)  # NaN counts as unsure
        predicted = (margin > 0).to(torch.int8)
        rows = torch.nonzero(unsure).flatten()
        if len(rows):
            exact = self.exact.predictions(Y[rows].cpu().numpy(), threshold)
            predicted[rows] = torch.as_tensor(exact, device=self.device)
        return predicted


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


def _activate(
    activation: Activation, h: torch.Tensor, bound: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """σ(h) for h [B, w] with error bound [B, w] → (z, bound on z, rows made unsure or None).
    A discontinuous σ passes no error on, but a row whose h lies within its bound of a
    breakpoint is unsure."""
    z = activation.apply_(h.clone())
    if activation.is_continuous:
        return z, activation.float_error(z, bound), None
    unsure = torch.zeros(h.shape[0], dtype=torch.bool, device=h.device)
    for at in activation.pieces()[0]:
        unsure |= (~((h - float(at)).abs() > bound)).any(dim=1)
    return z.to(h.dtype), torch.zeros_like(bound), unsure

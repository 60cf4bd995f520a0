"""Float64 forward passes with a rigorous bound on their rounding error, and exact decisions
taken at float speed from them (`BoundedForward`).

A layer computes `h = fl(W z + b)` from a computed z with `|z − z_true| ≤ e_z`; then
`|h − h_true| ≤ γ_{m+1} (|W| |z| + |b|) + |W| e_z`, where a sum or product of m terms rounded to
nearest, in any order and FMA included, is within `γ_m = m u / (1 − m u)` (u = 2^-53) times the
sum of the terms' magnitudes of the exact one. Activations pass the bound on with their
Lipschitz constant (relu, hardtanh, identity 1; leaky max(1, slope); sigmoid 1/4; tanh, softplus
1) plus their own rounding (u·|z| for leaky, 1e-15·|z| for the smooth functions); a step unit is
exact unless |h − at| is within the bound, which makes its row *unsure*. Every computed bound is
scaled by `SAFETY` (1 + 2^-20) and raised by `TINY` (2^-1000), more than the rounding and
underflow of evaluating the bound itself.

`BoundedForward.predictions` decides p(y) exactly: a row whose |f − t| exceeds its bound is
decided in float; the others (and unsure rows) by `verify.exact` (exact dyadic arithmetic for
piecewise-linear networks, rigorous enclosures for smooth ones, −1 when an enclosure straddles t).
"""

from __future__ import annotations

import torch

from .activations import Activation
from .exact import ExactNetwork
from .network import Network

UNIT_ROUNDOFF = 2.0**-53
SAFETY = 1.0 + 2.0**-20
TINY = 2.0**-1000
_SMOOTH_RELATIVE = 1e-15
_LIPSCHITZ = {"sigmoid": 0.25, "tanh": 1.0, "softplus": 1.0}


def gamma(m: int) -> float:
    """γ_m = m·u / (1 − m·u), u the unit roundoff of float64."""
    return m * UNIT_ROUNDOFF / (1 - m * UNIT_ROUNDOFF)


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
    """Per unit, the flat piece σ is on for every exact pre-activation within `bound` of h, or −1
    (h [B, w], bound [B, w] → int8 [B, w]): relu 0 (h ≤ 0), hardtanh 0 / 1 (clipped at min / max),
    step 0 / 1 (below / at or above `at`); identity, leaky relu and smooth units have none. Each
    test is strict, so rounding cannot mislead it: fl(a + b) < c implies a + b < c exactly when c
    is a double (rounding is monotone)."""
    piece = torch.full(h.shape, -1, dtype=torch.int8, device=h.device)
    name = activation.name
    if name == "relu":
        piece[h + bound < 0] = 0
    elif name == "hardtanh":
        piece[h + bound < activation.param("min")] = 0
        piece[h - bound > activation.param("max")] = 1
    elif name == "step":
        piece[h + bound < activation.param("at")] = 0
        piece[h - bound > activation.param("at")] = 1
    return piece


def _activate(
    activation: Activation, h: torch.Tensor, bound: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """σ(h) for h [B, w] with error bound [B, w] → (z, bound on z, rows made unsure or None)."""
    name = activation.name
    if name == "identity":
        return h, bound, None
    if name == "relu":
        return h.relu(), bound, None
    if name == "hardtanh":
        return h.clamp(activation.param("min"), activation.param("max")), bound, None
    if name == "leaky_relu":
        slope = activation.param("slope")
        z = torch.nn.functional.leaky_relu(h, slope)
        return z, bound * max(1.0, slope) + UNIT_ROUNDOFF * z.abs(), None
    if name == "step":
        at = activation.param("at")
        return (h >= at).to(h.dtype), torch.zeros_like(bound), (~((h - at).abs() > bound)).any(dim=1)
    if name == "sigmoid":
        z = torch.sigmoid(h)
    elif name == "tanh":
        z = torch.tanh(h)
    else:
        z = torch.logaddexp(h, torch.zeros_like(h))  # softplus without torch's linear cut-off at 20
    return z, bound * _LIPSCHITZ[name] + _SMOOTH_RELATIVE * z.abs() + TINY, None

"""`Instance`: one campaign unit of work before it is split per row and kind."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cardinal.domain import Domain
from cardinal.network import Network
from cardinal.problem import KINDS


@dataclass(frozen=True, eq=False)
class Instance:
    """A network with inputs X [B, n] to explain at `threshold` (None for K ≥ 2 outputs) over
    `domain`, or with `radius` each row over its own ball `domain.ball(x, radius)`."""

    id: str
    family: str  # random, set-cover, trained:<dataset>, paper:<dataset>
    net: Network
    X: np.ndarray
    threshold: float | None
    domain: Domain
    kinds: tuple[str, ...] = KINDS
    radius: float | None = None

    def box(self, row: int) -> Domain:
        """The box row `row` of X ranges over."""
        return self.domain if self.radius is None else self.domain.ball(self.X[row], self.radius)

    @property
    def activation(self) -> str:
        return self.net.hidden_activation()

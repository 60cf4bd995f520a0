"""What every certificate search shares: `Stopped`, what ends one without a certificate (the
reason, and a counterexample where the search found the claim false), and `Searched`, the `proof`
object it gave or why not. Used by `solvers.proof` (shortcut trees), `solvers.proof_lp`
(lp-tree), `solvers.proof_box` (box-tree) and `solvers.proof_hitting` (witness-hitting)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class Stopped(Exception):
    """Ends a search without a certificate (the reason in its message)."""

    def __init__(self, reason: str, counterexample: tuple[int, ...] | None = None) -> None:
        super().__init__(reason)
        self.counterexample = counterexample


@dataclass(frozen=True)
class Searched:
    """What a search gave: the certificate's `proof` object, or None and why (`reason`); the
    nodes searched (witness-hitting: the lemmas found); `counterexample`: an explanation of at most
    k features (the claim is false)."""

    proof: dict[str, Any] | None
    reason: str
    nodes: int
    counterexample: tuple[int, ...] | None = None

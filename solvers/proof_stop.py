"""`Stopped`: what ends a certificate search without a certificate — the reason, and a
counterexample where the search found the claim false. Shared by `solvers.proof` (shortcut
trees), `solvers.proof_lp` (lp-tree) and `solvers.proof_hitting` (witness-hitting)."""

from __future__ import annotations


class Stopped(Exception):
    """Ends a search without a certificate (the reason in its message)."""

    def __init__(self, reason: str, counterexample: tuple[int, ...] | None = None) -> None:
        super().__init__(reason)
        self.counterexample = counterexample

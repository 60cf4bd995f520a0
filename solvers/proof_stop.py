"""What every certificate search shares: `Stopped`, what ends one without a certificate (the
reason, and a counterexample where the search found the claim false), `Searched`, the `proof`
object it gave or why not, and the certificate's document around a `proof` object (`document`).
Used by `solvers.proof` (shortcut trees), `solvers.proof_lp` (lp-tree), `solvers.proof_box`
(box-tree), `solvers.proof_hitting` (witness-hitting) and `solvers.reset_bound` (reset-bound)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cardinal import errors
from cardinal.problem import Kind, Problem

FORMAT = "cardinal.proof/1"


class Stopped(errors.Stopped):
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


def document(problem: Problem, k: int, proof: dict[str, Any]) -> dict[str, Any]:
    """The certificate of "no explanation of `problem`'s kind within k" with its `proof` object."""
    return {"format": FORMAT, "problem": problem_json(problem), "claim": claim_json(problem, k), "proof": proof}


def problem_json(problem: Problem) -> dict[str, Any]:
    """The certificate's `problem` object: every number the double cardinal holds."""
    return {
        "network_sha256": problem.net.sha256,
        "x": problem.x.tolist(),
        "kind": problem.kind,
        "lower": problem.domain.lower.tolist(),
        "upper": problem.domain.upper.tolist(),
        "binary": bool(problem.domain.binary),
        "threshold": None if problem.threshold is None else float(problem.threshold),
    }


def claim_json(problem: Problem, k: int) -> dict[str, Any]:
    """`{"none_exists": true}` for a CXp with k = n, else `{"no_explanation_within": k}`."""
    if k == problem.n and problem.kind == Kind.CONTRASTIVE:
        return {"none_exists": True}
    return {"no_explanation_within": k}

"""Constants of the rigorous float64 error bounds (activations, `cardinal.bounds`, `solvers.subsets`).

A sum or product of m terms rounded to nearest, in any order and FMA included, is within
γ_m·Σ|terms| of the exact one. Every computed bound is then scaled by `SAFETY` and raised by
`TINY`, far more than the rounding and underflow of computing the bound itself.
"""

from __future__ import annotations

UNIT_ROUNDOFF = 2.0**-53
SAFETY = 1.0 + 2.0**-20
TINY = 2.0**-1000


def gamma(m: int) -> float:
    """γ_m = m·u / (1 − m·u), u the unit roundoff of float64."""
    return m * UNIT_ROUNDOFF / (1 - m * UNIT_ROUNDOFF)

"""Rigorous lower bounds of linear programs from any multipliers (Neumaier & Shcherbina, "Safe
bounds in linear and mixed-integer linear programming", Math. Program. 99, 2004): what makes the
float LPs of `solvers.exact_milp` prune only by exact evidence.

The LP: minimize `c·v` subject to `L ≤ A v ≤ U` (rows, a side may be infinite) and `l ≤ v ≤ u`
(every variable bounded). For any multipliers y [R], with r = c − Aᵀy [V],

    c·v = y·(A v) + r·v ≥ Σ_i ρ_i + Σ_j min(r_j l_j, r_j u_j)      for every feasible v,

where ρ_i = y_i L_i if y_i > 0, y_i U_i if y_i < 0 (and 0 if y_i = 0): a multiplier whose sign
would use an infinite side is set to 0 first (the sign correction). No optimality and no dual
feasibility of y is needed; a good y (the float LP's duals) only makes the bound tight. With c = 0
and y a dual ray, a bound > 0 proves the LP infeasible (Farkas): 0 = y·(Av) − y·(Av) ≥ that bound
would be > 0 for a feasible v.

`SafeBounds.bound` evaluates the right-hand side in float64 and subtracts a rigorous bound on its
rounding error (`cardinal.rounding`): a sum of m products in any order, FMA included, is within
γ_m·Σ|products| of the exact sum. r_j is a sum of (k_j + 1) products (k_j the nonzeros of column
j), so |r̂_j − r_j| ≤ e_j = γ_{K+1}·(|c_j| + Σ_i |A_ij y_i|), K the largest k_j; the column's term
is then ≥ min(r̂_j l_j, r̂_j u_j) − e_j·max(|l_j|, |u_j|). The whole sum of N such products is
within γ_{N+1}·Σ|products| of the exact one; each computed error bound is scaled by `SAFETY` and
raised by `TINY`, and the result is moved one double down. So the returned float is ≤ the exact
bound of the given y, whatever the rounding. `exact_bound` computes the same bound in exact
rationals (the reference the tests compare with).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from cardinal.rounding import SAFETY, TINY, gamma


def corrected(multipliers: np.ndarray, row_lower: np.ndarray, row_upper: np.ndarray) -> np.ndarray:
    """The multipliers [R] with every entry whose sign would use an infinite row side set to 0
    (and non-finite entries too)."""
    y = np.where(np.isfinite(multipliers), multipliers, 0.0)
    return np.where(((y > 0) & ~np.isfinite(row_lower)) | ((y < 0) & ~np.isfinite(row_upper)), 0.0, y)


class SafeBounds:
    """Safe bounds for LPs over one constraint matrix A [R, V] and its row sides L, U [R]; the
    objective and the variable bounds are given per call (they change from node to node)."""

    def __init__(self, matrix: sp.spmatrix, row_lower: np.ndarray, row_upper: np.ndarray) -> None:
        csc = sp.csc_matrix(matrix, dtype=np.float64)
        self.transpose = csc.T.tocsr()  # [V, R]: one row per column of A
        self.abs_transpose = abs(self.transpose)
        self.row_lower = np.array(row_lower, dtype=np.float64)  # copies: a row's sides may change
        self.row_upper = np.array(row_upper, dtype=np.float64)
        most = int(np.diff(csc.indptr).max()) if csc.shape[1] else 0
        self.column_gamma = gamma(most + 1)

    def bound(self, multipliers: np.ndarray, objective: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> float:
        """A float ≤ the exact bound Σ ρ_i + Σ min(r_j l_j, r_j u_j) of the corrected `multipliers`
        [R] for the objective c [V] over the variable bounds `lower`, `upper` [V] (module
        docstring); −inf when a variable bound is infinite, or on overflow."""
        y = corrected(np.asarray(multipliers, dtype=np.float64), self.row_lower, self.row_upper)
        c = np.asarray(objective, dtype=np.float64)
        with np.errstate(all="ignore"):
            r = c - self.transpose @ y
            error = (self.column_gamma * (np.abs(c) + self.abs_transpose @ np.abs(y))) * SAFETY + TINY
            if not (np.isfinite(lower).all() and np.isfinite(upper).all()):
                return -math.inf
            reach = np.maximum(np.abs(lower), np.abs(upper))
            side = np.where(y > 0, self.row_lower, self.row_upper)
            rows = np.where(y != 0, y * np.where(np.isfinite(side), side, 0.0), 0.0)
            products = np.concatenate([rows, np.minimum(r * lower, r * upper), -(error * reach)])
            total = products.sum()
            slack = gamma(len(products) + 1) * np.abs(products).sum() * SAFETY + TINY
            result = float(np.nextafter(total - slack, -math.inf))
        return result if math.isfinite(result) else -math.inf

    def proves_infeasible(self, ray: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> bool:
        """Whether the dual ray [R] (either sign) proves the rows and bounds infeasible: its safe
        bound with objective 0 is > 0."""
        zero = np.zeros(self.transpose.shape[0])
        ray = np.asarray(ray, dtype=np.float64)
        return any(self.bound(sign * ray, zero, lower, upper) > 0 for sign in (1.0, -1.0))


def exact_bound(
    matrix: sp.spmatrix,
    row_lower: np.ndarray,
    row_upper: np.ndarray,
    multipliers: np.ndarray,
    objective: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
) -> Fraction | None:
    """The bound of `SafeBounds.bound` in exact rationals (every double read exactly); None when a
    variable bound that matters is infinite."""
    y = corrected(np.asarray(multipliers, dtype=np.float64), row_lower, row_upper)
    coo = sp.coo_matrix(matrix)
    reduced = [Fraction(c) for c in np.asarray(objective, dtype=np.float64).tolist()]
    for i, j, a in zip(coo.row.tolist(), coo.col.tolist(), coo.data.tolist(), strict=True):
        reduced[j] -= Fraction(a) * Fraction(y[i])
    total = Fraction(0)
    for i, value in enumerate(y.tolist()):
        if value:
            total += Fraction(value) * Fraction(row_lower[i] if value > 0 else row_upper[i])
    for j, r in enumerate(reduced):
        if r:
            ends = (lower[j], upper[j])
            if not all(math.isfinite(end) for end in ends):
                return None
            total += min(r * Fraction(end) for end in ends)
    return total


"""A small AXp chosen directly, for the upper side of the implicit hitting-set loop (`solvers.hitting`):
a MILP picks the fewest features S whose sufficiency a linear relaxation certifies, on networks
with one hidden ReLU layer, f(y) = V relu(W y + b) + d.

For x of class c, each rival j has the margin m_j(y) = Σ_k a_jk relu(h_k(y)) + e_j, h = W y + b
(K ≥ 2: a_j = V_c − V_j, e_j = d_c − d_j; K = 1: one rival, a = ±V_0, e = ±(d_0 − t), the sign
that makes the margin positive at x). Over the points y of the box with y_S = x_S:

* a_jk > 0: relu(h) ≥ λ_jk h for any slope λ_jk ∈ [0, 1], a variable of the MILP;
* a_jk < 0: relu(h_k) ≤ t_k, t_k ≥ 0 and t_k ≥ the interval upper bound of h_k, which is
  linear in the selectors s_i ∈ {0, 1} (s_i = 1: i ∈ S): b_k + Σ_i [s_i W_ki x_i + (1 − s_i) max(W_ki l_i, W_ki u_i)].

So m_j(y) ≥ Σ_i c_ji y_i + Σ_{a>0} a_jk λ_jk b_k + Σ_{a<0} a_jk t_k + e_j, c_ji = Σ_{a>0} a_jk λ_jk W_ki,
and the least value of c_ji y_i is g_ji: g_ji ≤ c_ji x_i + M_ji (1 − s_i), g_ji ≤ c_ji l_i + M_ji s_i,
g_ji ≤ c_ji u_i + M_ji s_i (M_ji bounds |c_ji| times the coordinates). The MILP asks the bound to
be at least `MARGIN` for every rival and minimises |S|, from the solution S = every feature (λ_jk =
[h_k(x) > 0], t = relu(h(x)): the bound is then the margin at x). Every S it certifies is an
AXp, so its answer is one, if the floats are right. They are evidence only: the loop asks its
exact flip oracle about S before it uses it (a point that flips there is a contrastive set like
any other). A big M too small only makes the bound lower: never unsound.

Inside small balls, where the minimum AXp is often empty, the hitting-set loop is usually done
before it asks.
"""

from __future__ import annotations

import highspy
import numpy as np
from scipy import sparse

from cardinal.problem import Problem

from .quiet_highs import new_highs

MARGIN = 1e-6  # the bound each rival's margin must reach in the MILP (floats: the exact oracle decides)


def applies(problem: Problem) -> bool:
    """Whether the network has one hidden ReLU layer and an identity output (the module's form)."""
    layers = problem.net.layers
    return len(layers) == 2 and layers[0].activation.name == "relu" and layers[1].activation.name == "identity"


def rivals(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """The margins' hidden weights a [R, H] and offsets e [R] (module docstring), one row per rival."""
    (V, d), c = (problem.net.layers[1].weight, problem.net.layers[1].bias), problem.prediction
    if problem.classes == 1:
        sign = 1.0 if c == 1 else -1.0
        return sign * V[:1], sign * (d[:1] - problem.threshold)
    others = [j for j in range(V.shape[0]) if j != c]
    return V[c] - V[others], d[c] - d[others]


def relaxed_axp(problem: Problem, seconds: float) -> frozenset[int] | None:
    """The fewest features whose sufficiency the relaxation certifies (module docstring), as HiGHS
    finds them within `seconds` (its best set when stopped), or None (no set found, or the
    network is not of the module's form). Float evidence: not yet an AXp."""
    if not applies(problem) or seconds <= 0:
        return None
    W, b = problem.net.layers[0].weight, problem.net.layers[0].bias
    A, e = rivals(problem)
    x, lo, up = problem.x, problem.domain.lower, problem.domain.upper
    hidden, n = W.shape
    columns = _Columns()
    s = columns.add(n, 0.0, 1.0, cost=1.0, integer=True)
    t = columns.add(hidden, 0.0, np.inf)
    rows = _Rows()
    h = W @ x + b  # [H] at x: the start, S = every feature, λ = [h > 0], t = relu(h), g = c x, is the margin at x
    start = {**dict(zip(s, np.ones(n), strict=True)), **dict(zip(t, np.maximum(h, 0.0), strict=True))}
    for k in range(hidden):  # t_k − Σ_i s_i (W_ki x_i − top_ki) ≥ b_k + Σ_i top_ki, top_ki = max(W_ki l_i, W_ki u_i)
        top = np.maximum(W[k] * lo, W[k] * up)
        rows.add({t[k]: 1.0, **{s[i]: -(W[k, i] * x[i] - top[i]) for i in range(n)}}, b[k] + top.sum(), np.inf)
    scale = np.maximum.reduce([np.abs(lo), np.abs(up), np.abs(x)])
    for a, offset in zip(A, e, strict=True):
        positive = np.flatnonzero(a > 0)
        slopes = columns.add(len(positive), 0.0, 1.0)
        big = 2.0 * (np.abs(a[positive])[:, None] * np.abs(W[positive])).sum(axis=0) * scale + 1.0  # M_i ≥ 2 |c_i| |coordinate|
        g = columns.add(n, -big, big)
        start.update(zip(slopes, (h[positive] > 0).astype(float), strict=True))
        start.update(zip(g, (a[positive] * (h[positive] > 0)) @ W[positive] * x, strict=True))
        for i in range(n):
            slope = {slopes[p]: a[k] * W[k, i] for p, k in enumerate(positive)}  # c_i = Σ slope[λ] λ
            rows.add({**_below(g[i], slope, x[i]), s[i]: big[i]}, -np.inf, big[i])  # g ≤ c x + M (1 − s)
            rows.add({**_below(g[i], slope, lo[i]), s[i]: -big[i]}, -np.inf, 0.0)  # g ≤ c l + M s
            rows.add({**_below(g[i], slope, up[i]), s[i]: -big[i]}, -np.inf, 0.0)  # g ≤ c u + M s
        bound = {**{g[i]: 1.0 for i in range(n)}, **{slopes[p]: a[k] * b[k] for p, k in enumerate(positive)}}
        bound.update({t[k]: a[k] for k in np.flatnonzero(a < 0)})
        rows.add(bound, MARGIN - offset, np.inf)
    values = _solve(columns, rows, seconds, np.array([start.get(j, 0.0) for j in range(columns.count)]))
    return None if values is None else frozenset(int(i) for i in np.flatnonzero(values[s] > 0.5))


def _below(g: int, slope: dict[int, float], value: float) -> dict[int, float]:
    """The terms of g − c · value, c = Σ slope[λ] λ (the columns g and λ)."""
    return {g: 1.0, **{column: -w * value for column, w in slope.items()}}


class _Columns:
    """The MILP's variables, added in blocks."""

    def __init__(self) -> None:
        self.lower: list[np.ndarray] = []
        self.upper: list[np.ndarray] = []
        self.cost: list[np.ndarray] = []
        self.integer: list[np.ndarray] = []
        self.count = 0

    def add(
        self, size: int, lower: float | np.ndarray, upper: float | np.ndarray, cost: float = 0.0, integer: bool = False
    ) -> np.ndarray:
        """`size` new variables; returns their indices [size]."""
        self.lower.append(np.broadcast_to(np.asarray(lower, dtype=np.float64), (size,)))
        self.upper.append(np.broadcast_to(np.asarray(upper, dtype=np.float64), (size,)))
        self.cost.append(np.full(size, cost))
        self.integer.append(np.full(size, integer))
        self.count += size
        return np.arange(self.count - size, self.count)


class _Rows:
    """The MILP's constraints lower ≤ Σ coefficient · variable ≤ upper, one at a time."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, int, float]] = []
        self.lower: list[float] = []
        self.upper: list[float] = []

    def add(self, terms: dict, lower: float, upper: float) -> None:
        row = len(self.lower)
        self.entries.extend((row, int(column), float(value)) for column, value in terms.items() if value != 0.0)
        self.lower.append(float(lower))
        self.upper.append(float(upper))


def _solve(columns: _Columns, rows: _Rows, seconds: float, start: np.ndarray) -> np.ndarray | None:
    """HiGHS's best solution [columns] within `seconds` from the solution `start` [columns], or
    None when it has none."""
    row, column, value = (np.array(part) for part in zip(*rows.entries, strict=True))
    matrix = sparse.csc_matrix((value, (row.astype(int), column.astype(int))), shape=(len(rows.lower), columns.count))
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = columns.count, len(rows.lower)
    lp.col_cost_, lp.col_lower_ = np.concatenate(columns.cost), np.concatenate(columns.lower)
    lp.col_upper_ = np.concatenate(columns.upper)
    lp.row_lower_, lp.row_upper_ = np.array(rows.lower), np.array(rows.upper)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = columns.count, len(rows.lower)
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = matrix.indptr, matrix.indices, matrix.data
    kinds = highspy.HighsVarType.kInteger, highspy.HighsVarType.kContinuous
    lp.integrality_ = [kinds[0] if flag else kinds[1] for flag in np.concatenate(columns.integer)]
    highs = new_highs()
    try:
        for key, option in (("output_flag", False), ("time_limit", float(seconds)), ("random_seed", 0)):
            highs.setOptionValue(key, option)
        if highs.passModel(lp) == highspy.HighsStatus.kError:
            return None
        solution = highspy.HighsSolution()
        solution.col_value = start.tolist()
        highs.setSolution(solution)
        if highs.run() == highspy.HighsStatus.kError:
            return None
        if highs.getInfo().primal_solution_status != highspy.kSolutionStatusFeasible:
            return None
        return np.array(highs.getSolution().col_value, dtype=np.float64)
    finally:
        highs.clear()

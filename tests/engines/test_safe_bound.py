"""Safe LP bounds (`solvers.safe_bound`) against exact rational computation on hand-made LPs."""

from __future__ import annotations

import math
from fractions import Fraction

import highspy
import numpy as np
import pytest
import scipy.sparse as sp
from cardinal.solvers.safe_bound import SafeBounds, corrected, exact_bound


def _lp(rng: np.random.Generator, rows: int, columns: int, scale: float = 1.0):
    """A random LP with a known feasible point v0 [V]: rows around A·v0 (some one-sided, some
    equalities), bounds around v0."""
    matrix = sp.random(rows, columns, density=0.6, random_state=np.random.RandomState(int(rng.integers(1 << 30))))
    matrix.data = rng.normal(size=matrix.nnz) * scale
    matrix = sp.csr_matrix(matrix)
    v0 = rng.normal(size=columns)
    lower, upper = v0 - rng.random(columns), v0 + rng.random(columns)
    activity = matrix @ v0
    kind = rng.integers(0, 3, size=rows)  # 0: ≥, 1: ≤, 2: =
    row_lower = np.where(kind == 1, -math.inf, activity - np.where(kind == 2, 0.0, rng.random(rows)))
    row_upper = np.where(kind == 0, math.inf, activity + np.where(kind == 2, 0.0, rng.random(rows)))
    row_lower[kind == 2] = row_upper[kind == 2] = activity[kind == 2]
    objective = rng.normal(size=columns)
    return matrix, row_lower, row_upper, lower, upper, objective, v0


def _exact_objective(objective: np.ndarray, v: np.ndarray) -> Fraction:
    return sum((Fraction(c) * Fraction(x) for c, x in zip(objective.tolist(), v.tolist(), strict=True)), Fraction(0))


@pytest.mark.parametrize("seed", range(12))
def test_float_bound_is_below_the_exact_bound_and_close_to_it(seed: int) -> None:
    rng = np.random.default_rng(seed)
    scale = [1.0, 1e-6, 1e6][seed % 3]
    matrix, row_lower, row_upper, lower, upper, objective, _ = _lp(rng, 7, 9, scale)
    safe = SafeBounds(matrix, row_lower, row_upper)
    for _ in range(5):
        y = rng.normal(size=7) / scale
        exact = exact_bound(matrix, row_lower, row_upper, y, objective, lower, upper)
        bound = safe.bound(y, objective, lower, upper)
        assert Fraction(bound) <= exact
        assert float(exact) - bound <= 1e-9 * (1 + abs(float(exact)))


@pytest.mark.parametrize("seed", range(12))
def test_exact_bound_holds_at_every_feasible_point(seed: int) -> None:
    """Weak duality with bounded variables: any multipliers give a bound ≤ c·v at a feasible v,
    in exact arithmetic (the known point v0, and points between it and other feasible ones)."""
    rng = np.random.default_rng(100 + seed)
    matrix, row_lower, row_upper, lower, upper, objective, v0 = _lp(rng, 6, 8)
    for _ in range(5):
        y = rng.normal(size=6) * 10
        assert exact_bound(matrix, row_lower, row_upper, y, objective, lower, upper) <= _exact_objective(objective, v0)


def test_sign_correction_drops_multipliers_on_an_infinite_side() -> None:
    y = np.array([1.0, -1.0, 2.0, -2.0, math.nan])
    row_lower = np.array([-math.inf, 0.0, 0.0, 0.0, 0.0])
    row_upper = np.array([1.0, math.inf, 1.0, 1.0, 1.0])
    assert corrected(y, row_lower, row_upper).tolist() == [0.0, 0.0, 2.0, -2.0, 0.0]


def _highs_duals(matrix, row_lower, row_upper, lower, upper, objective):
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("presolve", "off")
    csc = sp.csc_matrix(matrix)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = csc.shape[1], csc.shape[0]
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = objective, lower, upper
    lp.row_lower_, lp.row_upper_ = row_lower, row_upper
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = csc.shape[1], csc.shape[0]
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = csc.indptr, csc.indices, csc.data
    highs.passModel(lp)
    highs.run()
    return highs


@pytest.mark.parametrize("seed", range(6))
def test_duals_of_a_float_lp_give_its_optimum_within_rounding(seed: int) -> None:
    rng = np.random.default_rng(200 + seed)
    matrix, row_lower, row_upper, lower, upper, objective, _ = _lp(rng, 8, 10)
    highs = _highs_duals(matrix, row_lower, row_upper, lower, upper, objective)
    assert highs.getModelStatus() == highspy.HighsModelStatus.kOptimal
    optimum = highs.getInfo().objective_function_value
    bound = SafeBounds(matrix, row_lower, row_upper).bound(np.array(highs.getSolution().row_dual), objective, lower, upper)
    assert bound <= optimum + 1e-9 and optimum - bound < 1e-6


def test_a_dual_ray_proves_an_infeasible_lp_and_nothing_proves_a_feasible_one() -> None:
    matrix = sp.csr_matrix(np.array([[1.0, 1.0], [1.0, -1.0]]))
    lower, upper = np.zeros(2), np.ones(2)
    infeasible = SafeBounds(matrix, np.array([2.5, -math.inf]), np.array([math.inf, 5.0]))  # x + y ≥ 2.5 in [0, 1]²
    highs = _highs_duals(matrix, infeasible.row_lower, infeasible.row_upper, lower, upper, np.zeros(2))
    _, has_ray, ray = highs.getDualRay()
    assert has_ray and infeasible.proves_infeasible(np.array(ray), lower, upper)
    feasible = SafeBounds(matrix, np.array([1.5, -math.inf]), np.array([math.inf, 5.0]))
    rng = np.random.default_rng(0)
    assert not any(feasible.proves_infeasible(rng.normal(size=2) * 10.0 ** rng.integers(-8, 8), lower, upper) for _ in range(200))


def test_bound_is_minus_infinity_on_an_unbounded_variable_or_overflow() -> None:
    matrix = sp.csr_matrix(np.array([[1.0, 1.0]]))
    safe = SafeBounds(matrix, np.array([0.0]), np.array([math.inf]))
    assert safe.bound(np.array([1.0]), np.array([2.0, 1.0]), np.array([0.0, -math.inf]), np.array([1.0, 1.0])) == -math.inf
    assert safe.bound(np.array([1e308]), np.array([2.0, 1.0]), np.array([-1e308, 0.0]), np.array([1.0, 1.0])) == -math.inf

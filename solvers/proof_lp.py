"""Certificates of "no CXp within k" on piecewise-linear networks without the monotone shortcut
(method "lp-tree" of `cardinal.proof/1`, docs/proofs.md; layers identity, relu, leaky_relu of
slope below 1, hardtanh): a branch and bound over the checker's own LP relaxation whose every leaf
is closed by a safe LP bound; on K ≥ 2 outputs, one tree per rival class j ≠ p(x), each bounding
f_c − f_j.

The relaxation is `cardinal.checker.LpRelaxation`, built from the network document as the
checker builds it: the checker's encoding is the reference, so that the rows, their order and
their big-M (the hull rows from the checker's exact interval bounds) are the checker's by
construction. HiGHS solves each node's LP in floats — minimize g (f when p(x) = 1, −f when
p(x) = 0; f_c − f_j in rival j's tree) — and its row duals (also rounded to a few fractional
bits: where the bound must reach a tie exactly, the exact duals are often such numbers) or, for
an infeasible LP, its dual ray, scaled up, are the leaf's multipliers; a leaf is kept only when
the checker's exact bound of those multipliers closes it (`LpRelaxation.bound`), so a wrong float
LP costs nodes, never a wrong certificate. A node that does not close splits, depth first: on the
unstable breakpoint whose unit's LP value is farthest from z = σ(h) (of a hardtanh unit's two, the
one nearer h; active first), else on the selector s_i nearest 1/2, else — an LP point that is a
candidate CXp — on any open breakpoint or selector, after judging the point exactly: a point that
flips with at most k features moved ends the search (the claim is false).

This replaces no engine: the exact MILP (`solvers.exact_milp`) proves the claims with its own
encoding and search; this module proves them again, over the encoding the checker rebuilds.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction
from typing import Any

import highspy
import numpy as np
import scipy.sparse as sp

from cardinal import checker
from cardinal.problem import Problem

from .proof_stop import Searched
from .proof_stop import Stopped as _Stop
from .quiet_highs import new_highs

_OPTIONS: dict[str, float | bool | str] = {"output_flag": False, "presolve": "off", "solver": "simplex", "random_seed": 0}
_VIOLATION = 1e-7  # an LP value this far from the ReLU's value (or from an integer) counts for branching
_ROUNDED = (8, 16, 24, 32)  # the duals also rounded to these many fractional bits: a tie's exact duals are often dyadic
_Highs = highspy.HighsModelStatus


def applies(problem: Problem) -> bool:
    """Whether method lp-tree covers the problem: a CXp, identity, relu, leaky_relu (slope below 1)
    and hardtanh layers (any K)."""
    names = {layer.activation.name for layer in problem.net.layers}
    slopes = [dict(layer.activation.params)["slope"] for layer in problem.net.layers if layer.activation.name == "leaky_relu"]
    return (
        problem.kind == "contrastive" and names <= {"identity", "relu", "leaky_relu", "hardtanh"} and all(a < 1 for a in slopes)
    )


def search_lp(problem: Problem, k: int, deadline: float) -> Searched:
    """The `proof` object of an "lp-tree" certificate that no CXp of `problem` has at most k
    features, or None and why."""
    domain = problem.domain
    box = (domain.lower.tolist(), domain.upper.tolist(), bool(domain.binary))
    threshold = None if problem.threshold is None else float(problem.threshold)
    relaxation = checker.LpRelaxation.of(problem.net.to_json(), problem.x.tolist(), box, threshold, k)
    trees: dict[int, dict[str, Any]] = {}
    nodes = 0
    for rival in relaxation.rivals:
        search = _Search(problem, relaxation, rival, k, deadline)
        try:
            trees[rival] = search.node({}, {})
        except _Stop as stop:
            return Searched(None, str(stop), nodes + search.nodes, stop.counterexample)
        except RecursionError:
            return Searched(None, "the tree is too deep for this generator", nodes + search.nodes)
        finally:
            search.highs.clear()
        nodes += search.nodes
    if problem.classes == 1:
        return Searched({"method": "lp-tree", "root": trees[relaxation.rivals[0]]}, "proved", nodes)
    rivals = [trees.get(j) for j in range(problem.classes)]  # null at p(x)
    return Searched({"method": "lp-tree", "root": {"rivals": rivals}}, "proved", nodes)


class _Search:
    """The depth-first branch and bound of the module docstring over one relaxation, for one rival."""

    def __init__(self, problem: Problem, relaxation: checker.LpRelaxation, rival: int, k: int, deadline: float) -> None:
        self.problem, self.relaxation, self.rival, self.k, self.deadline = problem, relaxation, rival, k, deadline
        self.nodes = 0
        rows, columns, values = [], [], []
        for row, (coefficients, _, _) in enumerate(relaxation.rows):
            for variable, a in coefficients.items():
                rows.append(row)
                columns.append(variable)
                values.append(float(a))
        shape = (len(relaxation.rows), len(relaxation.lo))
        self.matrix = sp.csc_matrix((values, (rows, columns)), shape=shape)
        self.row_sides = [(low, high) for _, low, high in relaxation.rows]
        self.highs = new_highs()
        for key, value in _OPTIONS.items():
            self.highs.setOptionValue(key, value)
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = shape[1], shape[0]
        cost = np.zeros(shape[1])
        for variable, a in relaxation.goal(rival).objective.items():
            cost[variable] = float(a)
        lp.col_cost_ = cost
        lp.col_lower_, lp.col_upper_ = _floats(relaxation.lo, -1), _floats(relaxation.hi, +1)
        lp.row_lower_ = np.array([-math.inf if low is None else float(low) for low, _ in self.row_sides])
        lp.row_upper_ = np.array([math.inf if high is None else float(high) for _, high in self.row_sides])
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = self.matrix.indptr
        lp.a_matrix_.index_ = self.matrix.indices
        lp.a_matrix_.value_ = self.matrix.data
        if self.highs.passModel(lp) == highspy.HighsStatus.kError:
            raise RuntimeError("HiGHS rejected the LP relaxation")
        selectors = range(problem.n)
        self.selectors, self.inputs = list(selectors), [problem.n + i for i in selectors]

    def node(self, fixed: dict[int, int], phases: dict[tuple[int, ...], bool]) -> dict[str, Any]:
        """The subtree of a node (`fixed`: selector → 0/1, `phases`: unstable unit → active)."""
        self.nodes += 1
        if time.perf_counter() > self.deadline:
            raise _Stop("deadline")
        closed, values = self._leaf(fixed, phases)
        if closed is not None:
            return closed
        unit, feature = self._branching(fixed, phases, values)
        if unit is not None:
            active, inactive = self.node(fixed, {**phases, unit: True}), self.node(fixed, {**phases, unit: False})
            return {"unit": list(unit), "active": active, "inactive": inactive}
        assert feature is not None
        inside, outside = self.node({**fixed, feature: 1}, phases), self.node({**fixed, feature: 0}, phases)
        return {"feature": feature, "in": inside, "out": outside}

    def _leaf(self, fixed: dict[int, int], phases: dict[tuple[int, ...], bool]) -> tuple[dict | None, np.ndarray | None]:
        """The node's LP: a leaf when its multipliers close it in exact arithmetic, else None and
        the LP's point [V] (None when it has none)."""
        lo, hi, sides = self.relaxation.node(fixed, phases)
        self.highs.changeColsBounds(len(lo), np.arange(len(lo), dtype=np.int32), _floats(lo, -1), _floats(hi, +1))
        for row, (low, high) in enumerate(self.row_sides):
            low, high = sides.get(row, (low, high))
            self.highs.changeRowBounds(row, -math.inf if low is None else float(low), math.inf if high is None else float(high))
        self.highs.setOptionValue("time_limit", self.highs.getRunTime() + max(self.deadline - time.perf_counter(), 0.0))
        self.highs.run()
        status = self.highs.getModelStatus()
        candidates: list[np.ndarray] = []
        values = None
        if status == _Highs.kOptimal:
            solution = self.highs.getSolution()
            values = np.array(solution.col_value)
            if solution.dual_valid:
                duals = np.array(solution.row_dual)
                candidates += [duals] + [np.round(duals * 2.0**bits) / 2.0**bits for bits in _ROUNDED]
        elif status in (_Highs.kInfeasible, _Highs.kUnboundedOrInfeasible):
            _, has_ray, ray = self.highs.getDualRay()
            if has_ray:
                ray = np.array(ray)
                candidates += [sign * 2.0**scale * ray for scale in (0, 10, 20, 40) for sign in (1.0, -1.0)]
        elif status == _Highs.kTimeLimit:
            raise _Stop("deadline")
        for multipliers in candidates:
            pairs = self._pairs(multipliers, sides)
            if self.relaxation.closes(self.rival, self.relaxation.bound(self.rival, fixed, phases, pairs)):
                return {"multipliers": pairs}, values
        return None, values

    def _pairs(self, multipliers: np.ndarray, sides: dict) -> list[list[float]]:
        """Nonzero multipliers as [row, value] pairs, those whose sign would use an infinite side dropped."""
        pairs = []
        for row in np.flatnonzero(np.isfinite(multipliers) & (multipliers != 0)).tolist():
            low, high = sides.get(row, self.row_sides[row])
            value = float(multipliers[row])
            if (low if value > 0 else high) is not None:
                pairs.append([row, value])
        return pairs

    def _branching(
        self, fixed: dict[int, int], phases: dict[tuple[int, ...], bool], values: np.ndarray | None
    ) -> tuple[tuple[int, int] | None, int | None]:
        """The unit or the selector to split on (module docstring)."""
        units = [unit for unit in self.relaxation.units if unit not in phases]
        free = [i for i in self.selectors if i not in fixed]
        if values is not None:
            gaps = [self._gap(unit, values) for unit in units]
            if gaps and max(gaps)[0] > _VIOLATION:
                return units[gaps.index(max(gaps))], None
            fractional = [abs(values[i] - round(values[i])) for i in free]
            if fractional and max(fractional) > _VIOLATION:
                return None, free[int(np.argmax(fractional))]
            self._judge(values)
        if units:
            return units[0], None
        if free:
            return None, free[0]
        raise _Stop("open: a leaf whose LP bound closes nothing though its point is no CXp (a point on the threshold)")

    def _gap(self, unit: tuple[int, ...], values: np.ndarray) -> tuple[float, float]:
        """How far the LP point [V] is from z = σ(h) at a breakpoint's unit, then (among a hardtanh
        unit's two) how near h is to the breakpoint."""
        point = self.relaxation.units[unit]
        h = float(values[point.h])
        activation = self.problem.net.layers[unit[0]].activation
        p = dict(activation.params)
        if activation.name == "hardtanh":
            value = min(max(h, p["min"]), p["max"])
        else:
            value = h if h >= 0 else p.get("slope", 0.0) * h
        return abs(float(values[point.z]) - value), -abs(h - float(point.at))

    def _judge(self, values: np.ndarray) -> None:
        """An LP point with integral selectors and exact ReLUs: a CXp of at most k features when
        its point, moved only on the selected features and put in the box, flips exactly."""
        problem = self.problem
        moved = values[self.selectors] > 0.5
        y = np.clip(values[self.inputs], problem.domain.lower, problem.domain.upper)
        if problem.domain.binary:
            y = np.where(y - problem.domain.lower < problem.domain.upper - y, problem.domain.lower, problem.domain.upper)
        y = np.where(moved, y, problem.x)
        if moved.sum() <= self.k and problem.flips(y):
            found = tuple(int(i) for i in np.flatnonzero(y != problem.x))
            raise _Stop(f"the claim is false: {list(found)} is a contrastive explanation", found)


def _floats(values: list[Fraction], direction: int) -> np.ndarray:
    """Exact bounds as doubles rounded outwards (direction −1 down, +1 up)."""
    out = np.array([float(v) for v in values])
    exact = np.array([Fraction(float(v)) == v for v in values])
    return np.where(exact, out, np.nextafter(out, direction * math.inf))

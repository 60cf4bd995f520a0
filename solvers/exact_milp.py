"""`ExactMilpSolver` ("exact-milp"): minimum explanations of piecewise-linear networks, proved by a
branch and bound whose LP relaxations are solved in floats by HiGHS and whose every pruning bound
is rigorous.

**The model** is the exact closure of `solvers.encode` (`encode(..., exact=True)`): its feasible
set contains every real solution (ε = 0 on the strict sides, big-M and input coefficients rounded
outwards), and the strict margin τ ∈ [−1, 1] enters each closed strict row, so that a point is a
real solution iff τ > 0 there. A network of K ≥ 2 classes (argmax, ties to the lowest index)
asks to leave class c = p(x): one binary β_j per rival class j, Σ β ≥ 1, β_j = 1 forcing
f_j − f_c ≥ 0 for j < c and f_j − f_c − τ ≥ 0 for j > c (the strict side closed by τ), big-M
from exact bounds of f_j − f_c; its problems take the general (non-monotone) path below.

**Pruning.** Each node's LP (the integer columns' bounds of the node, the rest relaxed) is solved
by HiGHS's simplex, warm-started from the node before. Its duals go into the safe bound of
`solvers.safe_bound` (Neumaier–Shcherbina): a float ≤ the exact minimum of the LP, whatever the
float LP got wrong; an infeasible LP is closed only when its dual ray proves it (the same bound,
> 0). A node closes when that bound shows that it holds no real solution better than what is
asked:

- the size of a set, Σ s (monotone networks, τ fixed at 0): bound > cutoff, the largest size
  still sought (`at_most`, then the incumbent's size − 1);
- Σ s − λ·τ (non-monotone CXps): a real point has τ > 0, so its value is < Σ s ≤ the node's
  largest Σ s and ≤ the cutoff: the node closes when bound ≥ the smaller of the two;
- −τ (the flip oracle): bound ≥ 0; where its flip is f ≤ t (one output, p(x) = 1: a closed side,
  which τ does not enter), f: bound > t (`_Flip`).

A wrong float LP (bad duals, a wrong "infeasible") can only leave a node open — more nodes, more
time — never close one that holds a solution.

**Leaves and incumbents.** On a monotone network the set decides everything: a node whose
selectors are all fixed is judged by the exact monotone shortcut (`Problem.is_explanation`). On a
binary box the toggles b decide the point y. Elsewhere a leaf (every integer column fixed) is an
LP whose proof is its bound; a leaf whose bound proves nothing though its point does not flip in
exact arithmetic (τ's optimum 0 within the float error: a point exactly on a strict boundary) is
*open*. A search that ends with open regions proves nothing by itself: z3's exact encoding
(`solvers.smt`, when installed) then decides the same question — a set within the final cutoff,
or a flip — and without it the answer is FEASIBLE with the best set, else ERROR. (Open regions
are rare: they need a point exactly on the threshold, such as a sample whose score is t.)

Incumbents come from every LP: the selectors sorted by their LP values, the shortest valid
prefix, shrunk (monotone), or the LP's point y, re-checked exactly (`Problem.flips`) and shrunk
(`hitting.shrink_witness`), and from one float MILP's answer judged the same way (`optimize`:
Gurobi where installed, else HiGHS); each one is reported (`guard.report_incumbent`) and replayed again
by `solvers.base.replay`.

**Small binary boxes.** A question over at most `VERTEX_FEATURES` free features of a binary box
(a flip, or a whole CXp) is decided at its 2^k vertices, every one predicted in exact arithmetic
(`Problem.predictions`): milliseconds where the branch and bound took seconds per question.

**CXps of non-monotone networks** start with the flip search below over every feature: none
proves NONE_EXISTS (one flip question is far cheaper than the search for a minimum), and its
point, shrunk, is the first incumbent.

Where the size bound k still sought is small (C(n, k) ≤ `SET_QUESTIONS`: k = 1 at 28
features, k ≤ 2 at 16), a CXp search is decided set by set instead: a CXp of size ≤ k exists
iff some set of exactly k features is one, each set one flip question (`_by_small_sets`).
On ReLU networks over a continuous box the levels are asked bottom up, each subset by input
splitting (`solvers.levels`, `_by_levels`): first the levels of at most `EARLY_SETS` subsets
whatever the cutoff, then (after the float MILP's seed, which only more than `SEED_FEATURES`
features get there: `_seeded`) every level below a small cutoff (at most 3), and again each time
the branch and bound's incumbent lowers the cutoff (`_Minimum.improved`). A level that flips
gives the minimum; the levels proved below it are the search's *floor*, at which an incumbent
of the branch and bound ends it; every level proved up to the cutoff proves the incumbent
(so an incumbent that lowers the cutoff can bring in levels too many to ask early).

**AXps of non-monotone networks**: covering the free sets level by level (`solvers.covering`;
the implicit hitting-set loop of `solvers.hitting` past `COVER_FEATURES` features),
with this engine's flip search as the oracle: is there a y in the box, equal to
x off the free features, that flips the prediction?
The same branch and bound maximizes τ (or minimizes f where the flip is f ≤ t): a node closes
when its safe bound proves τ ≤ 0 (f > t) there, and the search stops at the first point that flips
in exact arithmetic. `ExactMilpFlipSearch` asks
the same question for the exact set oracle (`solvers.oracle`).

**Branching**: depth first, on the last fractional integer column (the deepest layer's first,
which needed fewer nodes than the most fractional one on the benchmark networks: docs/results.md;
a selector when none is fractional), the child nearer the LP's value first, so that the simplex
restarts from a basis that is nearly optimal.

What was tried and not adopted for the hard flip questions, and what might move them:
bench/results/engine_notes.md.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from functools import partial

import highspy
import numpy as np

from cardinal import errors
from cardinal.prediction import overtakes_strictly
from cardinal.problem import Outcome, Problem, Status, stopped

from .attack import flipping_point
from .base import BaseSolver
from .covering import minimum_by_covering
from .encode import MilpModel, encode, refusing_unencodable
from .guard import report_incumbent, report_lower
from .highs import highs_lp, new_highs
from .highs import optimize as highs_optimize
from .hitting import OracleCalls, OracleTimeout, Screened, shrink_witness
from .levels import SPLIT_NODES, Unproved, by_levels
from .levels import fits as levels_fit
from .milp import MilpRun, RunState
from .safe_bound import SafeBounds
from .split import BoxSplitter, OutOfNodes
from .split import applies as split_applies

QUICK_NODES = 64  # flip searches on deeper networks run this many nodes per rival class before `tightened`'s LPs (`flip_point`)
SPLIT_FREE = 3  # a flip question over at most this many free features of a continuous ReLU box: splitting first (`flip_point`)
VERTEX_FEATURES = 14  # on a binary box, a question over at most this many free features is decided at its 2^k vertices
SET_QUESTIONS = 128  # a CXp bound k is decided set by set (flip questions) while C(n, k) is at most this
SEED_FEATURES = 128  # up to here a non-monotone CXp search over a continuous box is not seeded (`_seeded`)
SEED_SHARE = 0.25  # the share of a call's time limit that the float MILP seeding its incumbent may take
EARLY_SETS = 512  # levels of at most this many subsets are asked before the float MILP's seed, whatever the cutoff (`_by_levels`)
MARGIN_WEIGHT = 2.0**-10  # λ: the weight of the strict margin τ in a CXp's objective Σ s − λ·τ
_FRACTIONAL = 1e-6  # an LP value this close to an integer counts as integral (for branching only)
_LP_OPTIONS: dict[str, float | bool | str] = {
    "output_flag": False,
    "presolve": "off",  # warm starts, and dual rays of infeasible LPs
    "solver": "simplex",
    "random_seed": 0,
}
_Highs = highspy.HighsModelStatus


class OpenLeaves(errors.Unproved):
    """The search ended with regions that no exact argument closed (module docstring)."""


@dataclass(frozen=True)
class _Lp:
    """One node's LP: `bound` (a safe lower bound of its objective: +inf when it is proved
    infeasible, −inf when nothing is proved) and its values [V] (None when it has none)."""

    bound: float
    values: np.ndarray | None
    stopped: bool = False  # the deadline cut it short


class _Relaxation:
    """The LP relaxation of an exact closure in one HiGHS instance, warm-started from node to node."""

    def __init__(self, model: MilpModel, objective: np.ndarray) -> None:
        self.model = model
        self.lower, self.upper = model.lower.copy(), model.upper.copy()
        self.objective = np.asarray(objective, dtype=np.float64)
        self.safe = SafeBounds(model.matrix, model.row_lower, model.row_upper)
        self.highs = new_highs()
        for key, value in _LP_OPTIONS.items():
            self.highs.setOptionValue(key, value)
        lp = highs_lp(model, relaxed=True)
        lp.col_cost_ = self.objective
        lp.col_lower_, lp.col_upper_ = self.lower, self.upper
        if self.highs.passModel(lp) == highspy.HighsStatus.kError:
            raise RuntimeError("HiGHS rejected the LP relaxation")

    def bounds(self, lower: np.ndarray, upper: np.ndarray) -> None:
        """Set the variables' bounds to lower, upper [V]."""
        index = np.flatnonzero((self.lower != lower) | (self.upper != upper))
        if len(index):
            self.lower[index], self.upper[index] = lower[index], upper[index]
            self.highs.changeColsBounds(len(index), index.astype(np.int32), self.lower[index], self.upper[index])

    def set_objective(self, objective: np.ndarray) -> None:
        """Replace the objective c [V] (changed entries only)."""
        index = np.flatnonzero(self.objective != objective)
        if len(index):
            self.objective = np.asarray(objective, dtype=np.float64).copy()
            self.highs.changeColsCost(len(index), index.astype(np.int32), self.objective[index])

    def row_bounds(self, row: int, lower: float, upper: float) -> None:
        self.safe.row_lower[row], self.safe.row_upper[row] = lower, upper
        self.highs.changeRowBounds(row, lower, upper)

    def solve(self, deadline: float) -> _Lp:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return _Lp(-math.inf, None, stopped=True)
        self.highs.setOptionValue("time_limit", self.highs.getRunTime() + remaining)  # HiGHS's clock runs on from run to run
        self.highs.run()
        status = self.highs.getModelStatus()
        if status == _Highs.kOptimal:
            solution = self.highs.getSolution()
            values = np.array(solution.col_value, dtype=np.float64)
            duals = np.array(solution.row_dual, dtype=np.float64) if solution.dual_valid else None
            bound = -math.inf if duals is None else self.safe.bound(duals, self.objective, self.lower, self.upper)
            return _Lp(bound, values)
        if status in (_Highs.kInfeasible, _Highs.kUnboundedOrInfeasible):
            _, has_ray, ray = self.highs.getDualRay()
            proved = has_ray and self.safe.proves_infeasible(np.asarray(ray, dtype=np.float64), self.lower, self.upper)
            return _Lp(math.inf if proved else -math.inf, None)
        return _Lp(-math.inf, None, stopped=status == _Highs.kTimeLimit)

    def close(self) -> None:
        self.highs.clear()


@dataclass
class _Node:
    """Bounds [I] of the integer columns at a node, and its parent's safe bound."""

    lower: np.ndarray
    upper: np.ndarray
    bound: float


class _Search:
    """Depth-first branch and bound over the integer columns of an exact closure (module
    docstring). Subclasses say what closes a node (`closes`), what a leaf is and how it is judged
    (`is_leaf`, `judge_leaf`), and what an LP point gives (`examine`)."""

    strict = True  # real points have objective values < the limit (else ≤)

    def __init__(
        self, problem: Problem, model: MilpModel, objective: np.ndarray, deadline: float, relaxation: _Relaxation | None = None
    ) -> None:
        self.problem, self.model, self.deadline = problem, model, deadline
        self.objective = objective
        self.owns = relaxation is None  # a relaxation shared by searches asked in turn is closed by its owner
        self.relaxation = _Relaxation(model, objective) if relaxation is None else relaxation
        self.lower, self.upper = model.lower.copy(), model.upper.copy()  # the root's bounds
        self.integer = np.flatnonzero(model.integer)
        self.position = {int(column): index for index, column in enumerate(self.integer)}
        self.selectors = np.array([self.position[int(c)] for c in model.selectors], dtype=np.int64)
        self.toggles = self._toggles() if problem.domain.binary else None
        self.deciding = np.ones(len(self.integer), dtype=bool)  # the integer columns that decide a leaf
        if self.toggles is not None:
            self.deciding = np.isin(np.arange(len(self.integer)), self.toggles)
        self.open = 0  # leaves that no exact argument closed
        self.nodes = 0
        self.done = False  # the question is answered (set by `examine` or `judge_leaf`)
        self.restart = False  # search again from the root (set when the cutoff falls)

    def _toggles(self) -> np.ndarray:
        """Positions [n] of the toggles b among the integer columns on a binary box (the integer
        column that shares a row with y_i), −1 where the box pins y_i (no toggle)."""
        matrix = self.model.matrix.tocsc()
        toggles = []
        for column in self.model.inputs.tolist():
            rows = matrix[:, column].nonzero()[0]
            linked = sorted(set(self.model.matrix[rows].nonzero()[1].tolist()) & set(self.position))
            toggles.append(self.position[linked[0]] if linked else -1)
        return np.array(toggles, dtype=np.int64)

    def toggled_point(self, lower: np.ndarray) -> np.ndarray:
        """The point y [n] that fixed toggles (bounds [I], binary box) decide."""
        domain = self.problem.domain
        on = np.array([t >= 0 and lower[t] > 0.5 for t in self.toggles.tolist()], dtype=bool)
        return np.where(on, domain.upper, domain.lower)

    # -- hooks
    def limit(self, lower: np.ndarray, upper: np.ndarray) -> float:
        """The value that a node's safe bound must reach (strict: ≥; else >) to close it."""
        raise NotImplementedError

    def is_leaf(self, lower: np.ndarray, upper: np.ndarray) -> bool:
        """Whether the integer columns that decide a leaf (`deciding`) are all fixed."""
        return bool((lower[self.deciding] == upper[self.deciding]).all())

    def judge_leaf(self, lower: np.ndarray, upper: np.ndarray) -> bool:
        """Close a leaf its bound did not close: True when an exact argument closes it. On a
        binary box the toggles fix the point, judged here (not the LP's point: a float LP may be
        wrong)."""
        if self.toggles is None:
            return False
        self.examine_point(self.toggled_point(lower))
        return True

    def examine_point(self, y: np.ndarray) -> None:
        """Judge a point of the box [n] exactly (the non-monotone questions)."""

    def examine(self, values: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        """Look for incumbents at an LP point [V]."""

    def improved(self) -> None:
        """A better incumbent lowered the cutoff (before the search starts again from the root)."""

    # -- the search
    def closes(self, bound: float, lower: np.ndarray, upper: np.ndarray) -> bool:
        limit = self.limit(lower, upper)
        return bound >= limit if self.strict else bound > limit

    def restrict(self, column: int, lower: float, upper: float) -> None:
        """Narrow the root's bounds of one variable (before `run`)."""
        self.lower[column], self.upper[column] = lower, upper

    def run(self, budget: float = math.inf) -> bool:
        """Search until every node is closed or the question answered (True), or the deadline
        (False); raises OutOfNodes past `budget` nodes."""
        root = _Node(self.lower[self.integer].copy(), self.upper[self.integer].copy(), -math.inf)
        stack = [root]
        self.relaxation.set_objective(self.objective)
        while stack and not self.done:
            if time.perf_counter() > self.deadline:
                return False
            if self.nodes >= budget:
                raise OutOfNodes
            if self.restart:  # a better incumbent: the nodes opened for the old cutoff start afresh
                self.restart, stack = False, [root]
                self.improved()
                continue
            node = stack.pop()
            if self.closes(node.bound, node.lower, node.upper):
                continue
            self.nodes += 1
            lower, upper = self.lower.copy(), self.upper.copy()
            lower[self.integer], upper[self.integer] = node.lower, node.upper
            self.relaxation.bounds(lower, upper)
            lp = self.relaxation.solve(self.deadline)
            if lp.stopped:
                return False
            bound = max(node.bound, lp.bound)
            if lp.values is not None:
                self.examine(lp.values, node.lower, node.upper)
                if self.done:
                    break
            if self.closes(bound, node.lower, node.upper):
                continue
            if self.is_leaf(node.lower, node.upper):
                if not self.judge_leaf(node.lower, node.upper):
                    self.open += 1
                continue
            stack.extend(self._children(node, bound, lp.values))
        return True

    def _children(self, node: _Node, bound: float, values: np.ndarray | None) -> list[_Node]:
        """The two children of a node, the one to explore first last."""
        unfixed = np.flatnonzero(node.lower < node.upper)
        index = self._branching(unfixed, values)
        value = 0.5 if values is None else float(values[self.integer[index]])
        split = math.floor(value) if node.lower[index] <= math.floor(value) < node.upper[index] else int(node.lower[index])
        down = _Node(node.lower.copy(), node.upper.copy(), bound)
        up = _Node(node.lower.copy(), node.upper.copy(), bound)
        down.upper[index], up.lower[index] = split, split + 1
        return [up, down] if value - split < 0.5 else [down, up]

    def _branching(self, unfixed: np.ndarray, values: np.ndarray | None) -> int:
        """The last fractional unfixed integer column (its position: the deepest layer's first), else
        the first unfixed selector, else the first unfixed."""
        if values is not None:
            at = values[self.integer[unfixed]]
            fractional = np.flatnonzero(np.abs(at - np.round(at)) > _FRACTIONAL)
            if len(fractional):
                return int(unfixed[fractional[-1]])
        unfixed_selectors = [p for p in self.selectors.tolist() if p in set(unfixed.tolist())]
        return unfixed_selectors[0] if unfixed_selectors else int(unfixed[0])

    def close(self) -> None:
        if self.owns:
            self.relaxation.close()


class _Minimum(_Search):
    """The smallest explanation of size ≤ `cutoff` (monotone networks: sets judged by the exact
    shortcut; otherwise contrastive: points judged exactly)."""

    def __init__(self, problem: Problem, cutoff: int, deadline: float) -> None:
        n = problem.n
        model = encode(problem, min(cutoff, n), exact=True)
        objective = model.objective.copy()
        self.monotone = problem.monotone
        if not self.monotone:
            objective[model.slack] = -MARGIN_WEIGHT
        super().__init__(problem, model, objective, deadline)
        self.strict = not self.monotone
        # τ ≥ 0 here (real points have τ > 0): a node where τ < 0 everywhere is an infeasible LP;
        # on a monotone network the set decides, so τ = 0: f ≥ t, the closure of class 1
        self.restrict(model.slack, 0.0, 0.0 if self.monotone else 1.0)
        self.size_row = model.shape[0] - 1  # 1 ≤ Σ s ≤ cutoff: the empty set is no explanation here
        self.relaxation.row_bounds(self.size_row, 1.0, float(min(cutoff, n)))
        if self.monotone:  # the set decides
            self.deciding = np.isin(np.arange(len(self.integer)), self.selectors)
        self.offered: set[tuple[int, ...]] = set()
        self.attacked: set[frozenset[int]] = set()
        self.cutoff = min(cutoff, n)
        self.floor = 0  # proved: no explanation of `floor` features or fewer (the empty set is none)
        self.trees: dict[int, list] = {}  # the levels' proofs (`levels.Levels.trees`, `Outcome.subset_trees`)
        self.best: tuple[int, ...] | None = None
        self.witness: tuple[float, ...] | None = None

    @property
    def proved_lower(self) -> int | None:
        """The exact lower bound the levels proved (`Outcome.lower`): `floor` + 1; None where none was proved."""
        return self.floor + 1 if self.floor else None

    def limit(self, lower: np.ndarray, upper: np.ndarray) -> float:
        if self.monotone:
            return float(self.cutoff)
        return float(min(self.cutoff, upper[self.selectors].sum()))

    def judge_leaf(self, lower: np.ndarray, upper: np.ndarray) -> bool:
        if self.monotone:
            self._offer_set(tuple(int(i) for i in np.flatnonzero(lower[self.selectors] > 0.5)))
            return True
        return super().judge_leaf(lower, upper)

    def seed(self, seconds: float) -> None:
        """Offer the answer of a float MILP (`optimize`, `seconds` at most) as an incumbent, judged
        exactly like every other: the model with ε, and on a real box with margins too
        (`encode(..., margin=True)`), so that its point is not on a boundary that rounding decides."""
        if seconds <= 0:
            return
        margin = not self.monotone and not self.problem.domain.binary
        model = encode(self.problem, self.cutoff, margin=margin)
        values = optimize(model, seconds).values
        if values is None:
            return
        if self.monotone:
            self._offer_set(tuple(int(i) for i in np.flatnonzero(values[model.selectors] > 0.5)))
        else:
            moved = values[model.selectors] > 0.5
            self.examine_point(np.where(moved, values[model.inputs], self.problem.x))

    def improved(self) -> None:
        """Where the new cutoff brings every level below it within reach (`_by_levels`: a CXp
        search on a ReLU network over a continuous box), the levels decide the search."""
        if self.monotone or not split_applies(self.problem):
            return
        try:
            if _by_levels(self.problem, self, self.deadline):
                self.done = True
        except OracleTimeout:  # no verdict from the levels: the branch and bound goes on
            pass

    def examine(self, values: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        if self.monotone:
            self._ordered_completion(values[self.model.selectors])
        else:
            self.examine_point(values[self.model.inputs])
            self._attack(values[self.model.selectors])

    def _attack(self, weights: np.ndarray) -> None:
        """Ask the gradient search (`solvers.attack`) for a point that moves only the `cutoff`
        features of largest LP weight [n] (each such set once)."""
        chosen = frozenset(int(i) for i in np.lexsort((np.arange(len(weights)), -weights))[: self.cutoff])
        if chosen in self.attacked:
            return
        self.attacked.add(chosen)
        point = flipping_point(self.problem, chosen)
        if point is not None:
            self.examine_point(point)

    def _ordered_completion(self, weights: np.ndarray) -> None:
        """The shortest valid prefix of the features sorted by `weights` [n] (descending, then by
        index), found by bisection (validity is upward closed), shrunk, offered."""
        order = np.lexsort((np.arange(len(weights)), -weights))
        low, high = 1, len(order)
        if self.best is not None:
            high = min(high, len(self.best) - 1 + self._shrinkable())
        if not self._valid(order[:high]):
            return
        while low < high:
            middle = (low + high) // 2
            if self._valid(order[:middle]):
                high = middle
            else:
                low = middle + 1
        self._offer_set(tuple(sorted(int(i) for i in order[:high])))

    def _shrinkable(self) -> int:
        """How much larger than the incumbent a prefix may be and still shrink below it: a few."""
        return max(3, self.problem.n // 20)

    def _valid(self, features: np.ndarray) -> bool:
        return bool(self.problem.is_explanation(tuple(int(i) for i in features)))

    def _offer_set(self, features: tuple[int, ...]) -> None:
        """A set on a monotone network: judged exactly, shrunk to an inclusion-minimal one, kept
        when it beats the incumbent (each set once)."""
        if (self.best is not None and len(features) > len(self.best) + self._shrinkable()) or features in self.offered:
            return
        self.offered.add(features)
        if not features or not self.problem.is_explanation(features):
            return
        kept = list(features)
        for feature in features:
            trial = [i for i in kept if i != feature]
            if trial and self.problem.is_explanation(tuple(trial)):
                kept = trial
        self._improve(tuple(kept), None)

    def examine_point(self, raw: np.ndarray) -> None:
        """An LP point y [n] (non-monotone): snapped into the box, judged exactly, shrunk."""
        problem = self.problem
        y = _snapped(problem, raw)
        if not problem.flips(y):
            return
        moved = frozenset(shrink_witness(problem, y))
        point = np.where(np.isin(np.arange(problem.n), sorted(moved)), y, problem.x)
        self._improve(tuple(sorted(moved)), tuple(point.tolist()))

    def _improve(self, features: tuple[int, ...], witness: tuple[float, ...] | None) -> None:
        """Keep an exactly valid set when it is within the cutoff (smaller than the incumbent and
        within `at_most`), and lower the cutoff below it."""
        if len(features) <= self.cutoff:
            self.best, self.witness = features, witness
            report_incumbent(features, witness)
            self.cutoff = min(self.cutoff, len(features) - 1)
            if self.cutoff <= self.floor:  # no CXp of `floor` features or fewer: nothing smaller is left
                self.done = True
            else:
                self.relaxation.row_bounds(self.size_row, 1.0, float(self.cutoff))
                self.restart = True


def tightened(problem: Problem, free: frozenset[int], deadline: float) -> MilpModel:
    """The flip question's exact closure (`encode(..., free=free, exact=True)`) with the
    pre-activation bounds of every hidden layer after the first tightened by LPs: each unit's h
    minimized and maximized over the LP relaxation, its safe bound taken (`solvers.safe_bound`:
    rigorous whatever the float LP got wrong), the model rebuilt with them — tighter big-M
    constants, and units that turn stable need no binary. Layer by layer, until the deadline."""
    model = encode(problem, free=free, exact=True)
    layers: list[tuple[np.ndarray, np.ndarray] | None] = [None]
    for index in range(1, len(problem.net.layers) - 1):
        columns = model.pre_activations[index]
        relaxation = _Relaxation(model, np.zeros(model.shape[1]))
        low, high = model.lower[columns].copy(), model.upper[columns].copy()
        try:
            for position, column in enumerate(columns.tolist()):
                for sign in (1.0, -1.0):
                    objective = np.zeros(model.shape[1])
                    objective[column] = sign
                    relaxation.set_objective(objective)
                    lp = relaxation.solve(deadline)
                    if lp.stopped:
                        return model
                    if sign > 0:
                        low[position] = max(low[position], lp.bound)
                    else:
                        high[position] = min(high[position], -lp.bound)
        finally:
            relaxation.close()
        if (low > high).any():  # no solution at all: the caller's search proves it at its root
            return model
        layers.append((low, high))
        model = encode(problem, free=free, exact=True, bounds=layers)
    return model


class _Flip(_Search):
    """Is there a y in the box, equal to x off `free`, with p(y) ≠ p(x)? One output: maximizes τ;
    or, where the flip is f ≤ t (p(x) = 1: a closed side, which τ does not enter), minimizes f,
    closing a node when its safe bound proves f > t. τ would be free there, and the LP's point
    could lie on f = t, flipping in floats but not exactly: such leaves were left open, and each
    such question went to z3, far slower than this search (docs/results.md).

    K ≥ 2 outputs: one search per `rival` class j (`flip_point` asks them in turn), with β_j fixed
    at 1 and every other β at 0, minimizing f_c − f_j: a node closes when its safe bound proves
    f_c − f_j ≥ 0 (j > c, which must overtake strictly) or > 0 (j < c). The one search over the
    disjunction Σ β ≥ 1 was much weaker: its LP spreads β over the classes, and big-M rows with
    fractional β bound nothing; split by class, the searches decide questions the disjunction
    left open at its limit (docs/results.md). τ stays in [0, 1] in both closed forms: it still closes the
    strict rows of step units (real points have τ > 0)."""

    def __init__(
        self,
        problem: Problem,
        free: frozenset[int],
        deadline: float,
        model: MilpModel | None = None,
        rival: int | None = None,
        relaxation: _Relaxation | None = None,
    ) -> None:
        model = tightened(problem, free, deadline) if model is None else model
        objective = np.zeros(model.shape[1])
        c = problem.prediction
        self.closed = rival is not None or (problem.classes == 1 and c == 1)
        if rival is not None:
            objective[model.outputs[c]], objective[model.outputs[rival]] = 1.0, -1.0
        else:
            objective[model.output if self.closed else model.slack] = 1.0 if self.closed else -1.0
        super().__init__(problem, model, objective, deadline, relaxation)
        self.strict = not self.closed or (rival is not None and overtakes_strictly(c, rival))
        if self.closed:  # τ still closes the strict rows of step units: real points have τ > 0 there
            self.restrict(model.slack, 0.0, 1.0)
        if rival is not None:
            for j, beta in enumerate(model.rivals.tolist()):
                if beta >= 0:
                    self.restrict(beta, float(j == rival), float(j == rival))
        self.rival = rival
        self.free = free
        self.point: np.ndarray | None = None

    def limit(self, lower: np.ndarray, upper: np.ndarray) -> float:
        return float(self.problem.threshold) if self.closed and self.rival is None else 0.0

    def examine(self, values: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        self.examine_point(values[self.model.inputs])

    def examine_point(self, raw: np.ndarray) -> None:
        problem = self.problem
        y = _snapped(problem, raw)
        y = np.where(np.isin(np.arange(problem.n), sorted(self.free)), y, problem.x)
        if problem.flips(y):
            self.point, self.done = y, True


def _flip_searches(
    problem: Problem, free: frozenset[int], deadline: float, model: MilpModel, relaxation: _Relaxation
) -> list[_Flip]:
    """The searches over `model` (the flip question's exact closure) that together ask the flip
    question (`_Flip`), in turn, all on one `relaxation` of it: one search, or with K ≥ 2 outputs
    one per rival class that exact bounds leave possible, the classes nearest c at x first (the
    order matters for speed only)."""
    if model.rivals is None:
        return [_Flip(problem, free, deadline, model, relaxation=relaxation)]
    return [_Flip(problem, free, deadline, model, j, relaxation) for j in _rivals(problem, model)]


def _rivals(problem: Problem, model: MilpModel) -> list[int]:
    """The rival classes j [≤ K − 1] that exact bounds leave possible in `model` (β_j not fixed at
    0), those nearest c at x first (the order matters for speed only); none on one output."""
    if model.rivals is None:
        return []
    scores = problem.net.forward(problem.x[None, :]).detach().numpy()[0]
    rivals = [j for j, beta in enumerate(model.rivals.tolist()) if beta >= 0 and model.upper[beta] > 0]
    return sorted(rivals, key=lambda j: (-scores[j], j))


def _by_class(search: _Minimum) -> bool:
    """Run the minimum's branch and bound; with K ≥ 2 outputs once per rival class j (β_j fixed at
    1, the others at 0: the smallest CXp is the smallest that reaches some class), each run
    keeping the incumbent and cutoff of the runs before. True when every run finished."""
    model = search.model
    if model.rivals is None:
        return search.run()
    rivals = _rivals(search.problem, model)
    for rival in rivals:
        for j in rivals:
            beta = float(j == rival)
            search.restrict(int(model.rivals[j]), beta, beta)
        if not search.run():
            return False
    return True


def _flip_by_searches(
    problem: Problem, free: frozenset[int], deadline: float, model: MilpModel, rivals: list[int | None] | None, budget: float
) -> tuple[np.ndarray | None, list[int | None], int, int]:
    """Run the searches of `_flip_searches` (only those of `rivals` when given) in turn, each up to
    `budget` nodes: (a point that flips or None, the rivals that ran out of nodes, regions left
    open, nodes). Raises OracleTimeout at the deadline."""
    relaxation = _Relaxation(model, np.zeros(model.shape[1]))
    pending: list[int | None] = []
    opened = nodes = 0
    try:
        for search in _flip_searches(problem, free, deadline, model, relaxation):
            if rivals is not None and search.rival not in rivals:
                continue
            try:
                finished = search.run(budget)
            except OutOfNodes:
                pending.append(search.rival)
                continue
            if search.point is not None:
                return search.point, [], opened, nodes
            if not finished:
                raise OracleTimeout
            opened, nodes = opened + search.open, nodes + search.nodes
    finally:
        relaxation.close()
    return None, pending, opened, nodes


def optimize(model: MilpModel, seconds: float) -> MilpRun:
    """The float MILP that seeds an incumbent (`_Minimum.seed`): Gurobi where installed and its
    licence takes the model, else HiGHS (the rest of the time): on large classifiers Gurobi finds
    incumbents that HiGHS does not within a seed's share, and a better incumbent shortens the
    proof (docs/results.md). Its answer is a float claim, judged like every other."""
    started = time.perf_counter()
    try:
        import gurobipy

        from .gurobi import GurobiSolver
    except ImportError:
        return highs_optimize(model, seconds)
    try:
        with GurobiSolver() as gurobi:
            run = gurobi._optimize(model, seconds)
    except gurobipy.GurobiError as error:  # no licence, or another Gurobi failure: HiGHS seeds instead
        run = MilpRun(RunState.OTHER, f"GurobiError {error.errno}")
    remaining = seconds - (time.perf_counter() - started)
    if run.values is None and run.state in (RunState.SIZE_LIMIT, RunState.OTHER) and remaining > 0:
        return highs_optimize(model, remaining)
    return run


def _snapped(problem: Problem, raw: np.ndarray) -> np.ndarray:
    """A point [n] clipped into the box (to the nearer end point on a binary box)."""
    lower, upper = problem.domain.lower, problem.domain.upper
    y = np.clip(raw, lower, upper)
    return np.where(y - lower < upper - y, lower, upper) if problem.domain.binary else y


class ExactMilpSolver(BaseSolver):
    """The exact MILP engine (module docstring)."""

    name = "exact-milp"
    exact = True

    @refusing_unencodable
    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        started = time.perf_counter()
        deadline = started + time_limit
        if not problem.net.is_piecewise_linear:
            return self.outcome(Status.UNSUPPORTED, started, message=f"{problem.net.hidden_activation()} is not piecewise linear")
        if problem.monotone:
            if (unmoved := self.unmoved(problem, started)) is not None:
                return unmoved
        elif problem.kind == "abductive":
            return self._hitting_sets(problem, at_most, started, deadline)
        cutoff = problem.n if at_most is None else min(at_most, problem.n)
        if cutoff < 1:  # the empty set is no explanation here (for an AXp: p(x') ≠ p(x))
            return self.outcome(Status.NONE_WITHIN, started, message="the empty set is no explanation")
        if not problem.monotone and problem.domain.binary and problem.n <= VERTEX_FEATURES:
            vertices, flipped = _vertices(problem, frozenset(range(problem.n)))
            if flipped is not None:
                return self._smallest_flip(problem, vertices[flipped], at_most, started)
        first = None
        if not problem.monotone:  # is there any CXp? The flip search answers in a fraction of the search's time
            try:
                first = flip_point(problem, frozenset(range(problem.n)), deadline)
            except OracleTimeout:
                return self.outcome(Status.TIMEOUT, started, message="the flip search stopped at the limit")
            except OpenLeaves as error:
                return self.outcome(Status.ERROR, started, message=f"flip search: {error}")
            if first is None:
                return self.outcome(Status.NONE_EXISTS, started, message="the flip search proved that no point of the box flips")
        search = _Minimum(problem, cutoff, deadline)
        try:
            if first is not None:
                search.examine_point(first)
            try:
                by_sets = not problem.monotone and _by_sets(problem, search, deadline, early=True)
                if not search.done and not by_sets and _seeded(problem):
                    # the seed's incumbent may bring the bound within reach of the sets
                    search.seed(min(SEED_SHARE * time_limit, deadline - time.perf_counter()))
                    by_sets = not problem.monotone and _by_sets(problem, search, deadline)
            except Unproved as error:
                return self.outcome(Status.ERROR, started, message=str(error))
            except OracleTimeout:
                status, kept = stopped(search.best, at_most)
                fields = {"solution": kept, "witness": search.witness if kept else None, "lower": search.proved_lower}
                return self.outcome(status, started, **fields)
            try:
                finished = by_sets or _by_class(search)
            except Unproved as error:  # a level's point, asked after a new incumbent, failed the exact check
                return self.outcome(Status.ERROR, started, message=str(error))
        finally:
            search.close()
        message = "decided set by set" if by_sets else f"{search.nodes} nodes"
        if search.floor:
            message += f"; levels 1 to {search.floor} proved by splitting"
        best, witness = search.best, search.witness
        if not finished:
            status, kept = stopped(best, at_most)
            fields = {"solution": kept, "witness": witness if kept else None, "message": message, "lower": search.proved_lower}
            return self.outcome(status, started, **fields)
        if search.open:
            return self._decide_open(problem, search, at_most, started, deadline)
        trees = search.trees
        if best is not None:
            return self.outcome(Status.OPTIMAL, started, solution=best, witness=witness, message=message, subset_trees=trees)
        if at_most is None:
            return self.outcome(Status.NONE_EXISTS, started, message=message)
        return self.outcome(Status.NONE_WITHIN, started, message=message, subset_trees=trees)

    def _smallest_flip(self, problem: Problem, flipping: np.ndarray, at_most: int | None, started: float) -> Outcome:
        """The minimum CXp from every flipping vertex [m, n] of a binary box (all decided exactly)."""
        message = f"decided at the {1 << problem.n} vertices"
        if not len(flipping):
            return self.outcome(Status.NONE_EXISTS, started, message=message)
        moved = flipping != problem.x
        best = int(np.argmin(moved.sum(axis=1)))
        features = tuple(int(i) for i in np.flatnonzero(moved[best]))
        if at_most is not None and len(features) > at_most:
            return self.outcome(Status.NONE_WITHIN, started, message=message)
        witness = tuple(float(v) for v in flipping[best])
        return self.outcome(Status.OPTIMAL, started, solution=features, witness=witness, message=message)

    def _decide_open(self, problem: Problem, search: _Minimum, at_most: int | None, started: float, deadline: float) -> Outcome:
        """A finished search with open regions proves nothing: z3's exact encoding (when installed)
        asks again for a set within the search's final cutoff; else FEASIBLE with the best set, or
        ERROR."""
        best, witness = search.best, search.witness
        message = f"{search.nodes} nodes; {search.open} regions left open (points on a strict boundary)"
        within = search.cutoff if best is not None else at_most
        decided = _z3_minimum(problem, within, deadline) if within is None or within >= 1 else None
        if decided is not None and decided.status == Status.OPTIMAL:
            message += "; z3's exact encoding found a smaller set"
            return self.outcome(Status.OPTIMAL, started, solution=decided.solution, witness=decided.witness, message=message)
        if decided is not None and decided.status in (Status.NONE_WITHIN, Status.NONE_EXISTS):
            message += "; z3's exact encoding proved nothing smaller"
            if best is not None:
                return self.outcome(Status.OPTIMAL, started, solution=best, witness=witness, message=message)
            status = Status.NONE_EXISTS if at_most is None or at_most >= problem.n else Status.NONE_WITHIN
            return self.outcome(status, started, message=message)
        message += ": no proof" + ("" if decided is None else f" (z3: {decided.status.value})")
        if best is None:
            return self.outcome(Status.ERROR, started, message=message)
        return self.outcome(Status.FEASIBLE, started, solution=best, witness=witness, message=message, lower=search.proved_lower)

    def _hitting_sets(self, problem: Problem, at_most: int | None, started: float, deadline: float) -> Outcome:
        """Minimum AXp of a non-monotone network by covering (`solvers.covering`; past its features,
        implicit hitting sets), the flip search as the oracle behind the exact screens (`hitting.Screened`)."""
        oracle = Screened(problem, partial(flip_point, problem), self.supply)  # the exact screens before the flip search
        calls = OracleCalls()
        try:
            result = minimum_by_covering(problem, oracle, at_most, deadline, self.supply, calls=calls)
        except OpenLeaves as error:
            return self.outcome(Status.ERROR, started, message=f"flip search: {error}")
        message = f"{calls.count} oracle calls ({oracle.summary()})" + (f"; {result.message}" if result.message else "")
        fields = {"solution": result.solution, "message": message, "lemmas": result.lemmas, "lower": result.lower}
        return self.outcome(result.status, started, **fields)


def flip_point(problem: Problem, free: frozenset[int], deadline: float, split: bool = True) -> np.ndarray | None:
    """A point y [n] of the box, equal to x off `free`, that flips the prediction in exact
    arithmetic, or None when the search proves there is none: at most `SPLIT_FREE` free features
    of a ReLU network over a continuous box, the splitting search (`solvers.split`, `SPLIT_NODES`
    boxes; `split` False: not asked, the caller's own splitting left the set); then a gradient
    search (`solvers.attack`), then the branch and bound (`_Flip`, class by class where K ≥ 2).
    Raises `OracleTimeout` at the deadline and `OpenLeaves` when it can prove neither.

    On networks of two hidden layers or more, each search first runs `QUICK_NODES` nodes on the
    plain exact closure; only the classes left open then get `tightened`'s LPs (two LPs a unit
    of each hidden layer after the first, and a second encoding, per question): most questions
    are decided without them, and the tightening would otherwise be most of this search's time
    (docs/results.md).

    The splitting first: on few free features it decides a question well before the branch and
    bound has tightened its root; its boxes multiply with the free features, so past `SPLIT_FREE`
    the branch and bound is the faster one (docs/results.md)."""
    if problem.domain.binary and len(free) <= VERTEX_FEATURES:
        vertices, flipped = _vertices(problem, free)
        if flipped is not None:
            return vertices[int(np.argmax(flipped))] if flipped.any() else None
    if split and len(free) <= SPLIT_FREE and split_applies(problem):
        try:
            return BoxSplitter(problem).flip(free, deadline, nodes=SPLIT_NODES)
        except OutOfNodes:
            pass
    found = flipping_point(problem, free)
    if found is not None:
        return found
    budget = QUICK_NODES if len(problem.net.layers) > 2 else math.inf  # `tightened` changes only deeper networks
    model = encode(problem, free=free, exact=True)
    point, pending, opened, nodes = _flip_by_searches(problem, free, deadline, model, None, budget)
    if point is not None:
        return point
    if pending:  # the rivals that ran out of quick nodes, on the tightened closure
        model = tightened(problem, free, deadline)
        point, _, more_open, more_nodes = _flip_by_searches(problem, free, deadline, model, pending, math.inf)
        if point is not None:
            return point
        opened, nodes = opened + more_open, nodes + more_nodes
    if opened:
        why = f"{opened} regions left open (points on a strict boundary) after {nodes} nodes"
        return _z3_flip(problem, free, deadline, why)
    return None


def _by_small_sets(problem: Problem, search: _Minimum, deadline: float) -> bool:
    """Decide a non-monotone CXp search while C(n, cutoff) ≤ `SET_QUESTIONS`: a CXp within the
    cutoff exists iff some set of exactly `cutoff` features is one (validity is upward closed),
    so each such set is one flip question; a flip improves the incumbent (the cutoff falls and
    the next round asks smaller sets), none proves it minimum. True when decided; False when the
    sets are too many (or a question left regions open): the branch and bound goes on."""
    try:
        while not search.done and math.comb(problem.n, search.cutoff) <= SET_QUESTIONS:
            for chosen in itertools.combinations(range(problem.n), search.cutoff):
                y = flip_point(problem, frozenset(chosen), deadline)
                if y is not None:
                    search.examine_point(y)
                    break
            else:
                return True
    except OpenLeaves:
        return False
    return search.done


def _seeded(problem: Problem) -> bool:
    """Whether a float MILP seeds the search (`_Minimum.seed`): not on a ReLU network over a
    continuous box of at most `SEED_FEATURES` features, where the early levels were asked: there
    the seed spends its share of the time and seldom improves the incumbent, which the branch and
    bound alone finds soon after its start (docs/results.md)."""
    return problem.monotone or not split_applies(problem) or problem.n > SEED_FEATURES


def _by_sets(problem: Problem, search: _Minimum, deadline: float, early: bool = False) -> bool:
    """Decide a non-monotone CXp search by its small sets: level by level where the splitting
    search applies (`_by_levels`; `early`: the first levels only), else set by set
    (`_by_small_sets`); True when decided."""
    if split_applies(problem) and _by_levels(problem, search, deadline, early):
        return True
    return _by_small_sets(problem, search, deadline)


def _by_levels(problem: Problem, search: _Minimum, deadline: float, early: bool = False) -> bool:
    """Decide a CXp search on a ReLU network over a continuous box level by level below its
    cutoff (`solvers.levels`), where every level up to the cutoff is small enough to ask
    (`levels.fits`): True when every level is proved or one flips (its point the new incumbent,
    the levels below it the search's floor, which ends the search); False where the levels do
    not fit or a question left regions open (the branch and bound goes on).

    `early` (before the float MILP's seed), where the levels up to the cutoff do not fit: only
    the levels of at most `EARLY_SETS` subsets; those proved become the floor, at which a later incumbent ends the search.
    Small levels asked first decide most small CXp searches before the seed's share runs out;
    larger ones asked early can take a query past its limit, hence the bound `EARLY_SETS`
    (docs/results.md)."""
    below = search.cutoff + 1
    if early and not levels_fit(problem.n, below):
        below = min(below, next(j for j in range(1, problem.n + 2) if j > problem.n or math.comb(problem.n, j) > EARLY_SETS))
    if not levels_fit(problem.n, below) or below - 1 <= search.floor:
        return False
    try:
        ask = partial(flip_point, problem, split=False)
        levels = by_levels(problem, ask, below, deadline, search.floor)
    except OpenLeaves:
        return False
    if levels.proved > search.floor:
        search.floor = levels.proved
        report_lower(search.floor + 1)  # a guarded call stopped from outside keeps it (`_Minimum.proved_lower`)
    search.trees.update(levels.trees)
    if levels.point is not None:
        search.examine_point(levels.point)
    return levels.point is not None or levels.proved >= search.cutoff


def _vertices(problem: Problem, free: frozenset[int]) -> tuple[np.ndarray, np.ndarray | None]:
    """Every vertex y [2^k, n] of a binary box that agrees with x off `free` (k features), and
    whether each flips the prediction in exact arithmetic [2^k] (None when one is undecided)."""
    order = np.array(sorted(free), dtype=np.int64)
    bits = ((np.arange(1 << len(order))[:, None] >> np.arange(len(order))) & 1).astype(bool)
    Y = np.repeat(problem.x[None, :], len(bits), axis=0)
    Y[:, order] = np.where(bits, problem.domain.upper[order], problem.domain.lower[order])
    predictions = problem.predictions(Y)
    return Y, None if (predictions < 0).any() else predictions != problem.prediction


def _z3_minimum(problem: Problem, at_most: int | None, deadline: float) -> Outcome | None:
    """z3's exact answer (full encoding) for a set within `at_most`, until the deadline; None
    when z3 is not installed."""
    try:
        from .smt import Z3Solver
    except ImportError:
        return None
    with Z3Solver() as z3_solver:
        return z3_solver.solve(problem, at_most, max(deadline - time.perf_counter(), 1e-3))


def _z3_flip(problem: Problem, free: frozenset[int], deadline: float, why: str) -> np.ndarray | None:
    """Decide the flip question that the branch and bound left open (`why`) by z3's exact
    encoding. Raises `OpenLeaves` when z3 is not installed or finds no point made of doubles,
    `OracleTimeout` at the deadline."""
    try:
        import z3

        from .smt import _Encoding, _NoDoubleWitness
    except ImportError:
        raise OpenLeaves(why + "; z3 (which decides them) is not installed") from None
    try:
        return _Encoding(problem, z3.Context()).find_flip(free, deadline)
    except _NoDoubleWitness as error:
        raise OpenLeaves(f"{why}; {error}") from None


class ExactMilpFlipSearch(BaseSolver):
    """The engine of the exact set oracle (`solvers.oracle`): is there any CXp at all? The flip
    search over every feature: FEASIBLE with the features where its point y differs from x and y
    [n], NONE_EXISTS, TIMEOUT, UNSUPPORTED (not piecewise linear) or ERROR (regions left open)."""

    name = "exact-milp"
    exact = True

    @refusing_unencodable
    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        """`at_most` is ignored: any flipping point answers."""
        started = time.perf_counter()
        if not problem.net.is_piecewise_linear:
            return self.outcome(Status.UNSUPPORTED, started, message="the exact MILP needs piecewise-linear activations")
        try:
            y = flip_point(problem, frozenset(range(problem.n)), started + time_limit)
        except OracleTimeout:
            return self.outcome(Status.TIMEOUT, started)
        except OpenLeaves as error:
            return self.outcome(Status.ERROR, started, message=str(error))
        if y is None:
            return self.outcome(Status.NONE_EXISTS, started)
        features = tuple(int(i) for i in np.flatnonzero(y != problem.x))
        return self.outcome(Status.FEASIBLE, started, solution=features, witness=tuple(float(v) for v in y))

"""One backend-neutral MILP for explanation problems (docs/design.md §4), translated by `solvers.gurobi`
and `solvers.highs`.

Variables: `s_i ∈ {0,1}` (feature i is in the set), the input point `y` [n], and per layer the
pre-activations `h` and post-activations `z`. Objective `min Σ s_i`; with `at_most=k` also
`Σ s_i ≤ k`. Output goal (K = 1): `f ≥ t + ε` to reach class 1, `f ≤ t` to reach class 0. The ε
sits on the strict side only (class 1 is f > t, a step's 0 is h < at): it cuts off points within
ε of a strict boundary, never a point of the other, closed side (class 0 is f ≤ t, a step's 1 is
h ≥ at).

Output goal (K ≥ 2, `cardinal.prediction`): leave class c = p(x), that is some output j ≠ c takes
it, f_j ≥ f_c for j < c or f_j > f_c for j > c. One binary β_j per j and `Σ β_j ≥ 1`; β_j = 1
forces `f_j − f_c ≥ e_j` with e_j = ε on the strict side (j > c) and 0 on the closed one, by a
big-M row `f_j − f_c ≥ e_j − M_j·(1 − β_j)` whose M_j = e_j − L_j comes from an exact lower bound
L_j of f_j − f_c over the region (`_difference_bounds`). A j that exact bounds show can never
take c gets β_j = 0 and no row. Only leaving c is ever asked (the hitting-set loop asks for
flips only), so keeping a class needs no encoding.

Inputs:
- sign-monotone networks (`Problem.monotone`), bound vectors with x' the counterpoint (each
  feature at its own end): CXp `y = x + (x' − x)·s` and the goal
  is the other class; AXp `y = x' + (x − x')·s` and the goal is p(x);
- any network, CXp (and the flip oracle of the hitting-set loop): `y` free in the box where
  `s_i = 1`, tied to `x_i` where `s_i = 0`; on a binary domain `y_i = l_i + (u_i − l_i)·b_i` with
  `b_i` binary. A feature of known direction (`Problem.known`: partially monotone networks, and
  K = 2 sign-monotone ones) is moreover `y_i = x_i + (x'_i − x_i)·s_i`: only the mixed features
  range over the box. The flip oracle fixes `s` to its free set and has no objective.

Margins (`margin=True`, for finding witnesses only). A continuous `y` often ends on the boundary
of the region it reaches, where float rounding decides its exact replay half the time. A model
asked with margins keeps such points off the closed sides too, and twice as far off the strict
ones: where a value moves continuously with y (no step layer between them), class 0 means
`f ≤ t − ε` and class 1 `f ≥ t + 2ε`, an output j < c takes class c only with `f_j ≥ f_c + ε`
and one j > c only with `f_j ≥ f_c + 2ε`, a step's `z = 1` means `h ≥ at + ε` and `z = 0` means
`h ≤ at − 2ε`; values fed by steps alone take finitely many values, and exact ties there keep the
plain conditions. (The strict side's second ε: asked for `f ≥ t + 10⁻⁶` at FeasibilityTol 10⁻⁹,
Gurobi answered OPTIMAL with f = 0 = t, a violation of 10⁻⁶, on the plain and the old margin
model alike; at 2·10⁻⁶ it gave f = 2·10⁻⁶.) Such a model cuts off valid points, so its
infeasibility proves nothing: the MILP backends ask it only for a second witness of a free set
whose first one did not flip in exact arithmetic (`solvers.milp`).

Bounds: exact interval propagation over the region y ranges over (`ExactNetwork.layer_bounds`),
tightened where `at_most=k` < n by letting only the k largest single-feature moves act on the
first layer (float bounds padded by `PAD`, then interval propagation). Float bounds are rounded
outwards and padded; stability is decided on exact rationals, and a stable unit gets no binary.

Hidden units: every PWL activation is a chain of stages: `max(w, a·w + c)` (relu, leaky_relu with
slope < 1, hardtanh's lower clip), `min(w, a·w + c)` (leaky_relu with slope > 1, hardtanh's upper
clip) or `step(at)` (`z = 1 ⇒ w ≥ at`, `z = 0 ⇒ w ≤ at − ε`, one binary). A straddling max/min
stage gets its two hull rows (`z ≥` both pieces for max, `≤` for min) plus one binary δ with two
big-M rows for the other side.

Dropped binaries on monotone networks (`Network.is_monotone`: all weights ≥ 0; a sign-monotone
network whose hidden negative weights compose to one direction does not qualify, since the
induction below needs every weight ≥ 0). Every stage is non-decreasing.
When the goal is `f ≤ t`, let each straddling max stage keep only its hull rows, `z ≥ σ(w)`, and
encode every other stage exactly. By induction over the layers each MILP value is then ≥ the
true value at the same y (a larger input to a non-negative weight or a non-decreasing stage
never lowers what follows), so the true f is ≤ the MILP's f ≤ t: every MILP solution is a real
one, and every real one satisfies all the rows. So relu, leaky_relu with slope < 1 and
hardtanh's lower clip need no binary when f must fall; symmetrically min stages (hardtanh's upper
clip, leaky_relu with slope > 1) need none when f must rise.

Every row is an equality or one-sided, and every variable is bounded. Every constant derived
from the network (big-M, the right-hand sides beside them, the input rows' coefficients) is
computed in exact rationals and rounded outwards, so that no real point is cut off by rounding.

Exact closure (`exact=True`, for proofs: `solvers.exact_milp`). The model's feasible set then
contains every real solution, read as exact rationals: ε is 0 (class 1 is `f ≥ t`, a step's 0 is
`h ≤ at`, the closures of the strict `f > t` and `h < at`), and the bound-vector rows, whose
coefficient x'_i − x_i may be no double, become `y` between `base` and `base + d·s` with d
rounded outwards (a relaxation: on a monotone network the exact check of the set decides).
One more variable, the *strict margin* τ ∈ [−1, 1] (`MilpModel.slack`), enters each closed
strict row: `f − τ ≥ t`, `h + τ ≤ at`, and for K ≥ 2 `f_j − f_c − τ ≥ 0` where j > c (each big-M
grown by 1; the closed `f_j − f_c ≥ 0` of j < c has no τ). A point is a real solution iff it
has τ > 0 for the same integers; so a proof that τ ≤ 0 over a region, or that the region is
empty, shows that it holds no real solution.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import scipy.sparse as sp

from cardinal.activations import Stage
from cardinal.domain import rounded_sum
from cardinal.errors import CardinalError
from cardinal.network import Layer
from cardinal.prediction import overtakes_strictly
from cardinal.problem import Problem, Status

PAD = 1e-7  # relative outward padding of the float bounds
MAX_MAGNITUDE = 1e15
"""The largest magnitude a model may hold (a weight, bias, input, box bound, threshold, a unit's
bound, a big-M): beyond it a float MILP resolves nothing (HiGHS refuses matrix entries of 1e15
and reads bounds of 1e20 as infinite; Gurobi's tolerances are absolute, 1e-6, while the double
spacing at 2^53 is 1). `encode` raises `Unencodable` instead, and the backends answer UNSUPPORTED."""


class Unencodable(CardinalError, ValueError):
    """The problem holds a number a float MILP cannot carry (beyond `MAX_MAGNITUDE`)."""


def refusing_unencodable(solve: Callable) -> Callable:
    """A backend's `solve` that answers UNSUPPORTED, naming the number, where the model holds one
    beyond what a float LP resolves (`solvers.encode.MAX_MAGNITUDE`)."""

    @functools.wraps(solve)
    def checked(self: Any, problem: Problem, at_most: int | None, time_limit: float) -> Any:
        started = time.perf_counter()
        try:
            return solve(self, problem, at_most, time_limit)
        except Unencodable as reason:
            return self.outcome(Status.UNSUPPORTED, started, message=str(reason))

    return checked


@dataclass(frozen=True, eq=False)
class MilpModel:
    """`min objective·v` s.t. `row_lower ≤ matrix·v ≤ row_upper`, `lower ≤ v ≤ upper`, and
    `v_j ∈ ℤ` where `integer[j]`.

    Shapes: V variables and R rows; `lower`, `upper`, `objective`, `integer` [V]; `matrix` CSR
    [R, V]; `row_lower`, `row_upper` [R] (±inf on an open side; each row is an equality or
    one-sided). `selectors` [n] and `inputs` [n] index s and y; `output` indexes f (f_0 when
    the network has K ≥ 2 outputs).
    """

    lower: np.ndarray
    upper: np.ndarray
    integer: np.ndarray
    objective: np.ndarray
    matrix: sp.csr_matrix
    row_lower: np.ndarray
    row_upper: np.ndarray
    selectors: np.ndarray
    inputs: np.ndarray
    output: int
    slack: int | None = None  # τ's index in an exact closure (module docstring), else None
    pre_activations: tuple[np.ndarray, ...] = ()  # per layer, the indices [width] of its pre-activations h
    rivals: np.ndarray | None = None  # K ≥ 2: β_j's index per class j [K] (−1 at c = p(x))
    outputs: np.ndarray | None = None  # K ≥ 2: f_j's index per class j [K]

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, variables)."""
        return self.matrix.shape


class _Builder:
    """Collects bounded variables and sparse rows, then freezes them into a `MilpModel`."""

    def __init__(self) -> None:
        self.bounds: list[tuple[np.ndarray, np.ndarray, bool]] = []
        self.count = 0
        self.entries: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.sides: list[tuple[np.ndarray, np.ndarray]] = []
        self.row_count = 0

    def variables(self, lower: np.ndarray, upper: np.ndarray, integer: bool = False) -> np.ndarray:
        """New variables with bounds lower, upper [m]; returns their indices [m]."""
        lower, upper = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
        self.bounds.append((lower, upper, integer))
        self.count += lower.size
        return np.arange(self.count - lower.size, self.count)

    def rows(self, lower: float | np.ndarray, upper: float | np.ndarray, *terms: tuple[np.ndarray, float | np.ndarray]) -> None:
        """Rows r = 0..R−1: `lower[r] ≤ Σ_terms coefficient[r]·v[column[r]] ≤ upper[r]`; each term is
        (columns [R], coefficients [R] or a scalar)."""
        size = len(terms[0][0])
        if size == 0:
            return
        index = np.arange(self.row_count, self.row_count + size)
        for columns, coefficients in terms:
            self.entries.append(
                (index, np.asarray(columns), np.broadcast_to(np.asarray(coefficients, dtype=np.float64), (size,)))
            )
        self.sides.append(
            (
                np.broadcast_to(np.asarray(lower, dtype=np.float64), (size,)),
                np.broadcast_to(np.asarray(upper, dtype=np.float64), (size,)),
            )
        )
        self.row_count += size

    def sum_row(self, columns: np.ndarray, lower: float, upper: float) -> None:
        """One row `lower ≤ Σ v[columns] ≤ upper`."""
        self.entries.append((np.full(len(columns), self.row_count), columns, np.ones(len(columns))))
        self.sides.append((np.full(1, lower), np.full(1, upper)))
        self.row_count += 1

    def affine(self, out: np.ndarray, weight: np.ndarray, inputs: np.ndarray, bias: np.ndarray) -> None:
        """Rows `out − weight·v[inputs] = bias` for out [m], weight [m, k], inputs [k], bias [m]."""
        rows, cols = np.nonzero(weight)
        index = np.arange(self.row_count, self.row_count + len(out))
        self.entries.append((index, out, np.ones(len(out))))
        self.entries.append((index[rows], inputs[cols], -weight[rows, cols]))
        self.sides.append((bias, bias))
        self.row_count += len(out)

    def freeze(
        self,
        objective: np.ndarray,
        selectors: np.ndarray,
        inputs: np.ndarray,
        output: int,
        slack: int | None = None,
        pre_activations: tuple[np.ndarray, ...] = (),
        rivals: np.ndarray | None = None,
        outputs: np.ndarray | None = None,
    ) -> MilpModel:
        rows, cols, values = (np.concatenate(part) for part in zip(*self.entries, strict=True))
        matrix = sp.csr_matrix((values, (rows, cols)), shape=(self.row_count, self.count))
        matrix.eliminate_zeros()
        integer = np.concatenate([np.full(lo.size, flag) for lo, _, flag in self.bounds])
        return MilpModel(
            lower=np.concatenate([lo for lo, _, _ in self.bounds]),
            upper=np.concatenate([hi for _, hi, _ in self.bounds]),
            integer=integer,
            objective=objective,
            matrix=matrix,
            row_lower=np.concatenate([lo for lo, _ in self.sides]),
            row_upper=np.concatenate([hi for _, hi in self.sides]),
            selectors=selectors,
            inputs=inputs,
            output=output,
            slack=slack,
            pre_activations=pre_activations,
            rivals=rivals,
            outputs=outputs,
        )


def encode(
    problem: Problem,
    at_most: int | None = None,
    free: frozenset[int] | None = None,
    relax: bool = True,
    margin: bool = False,
    exact: bool = False,
    bounds: Sequence[tuple[np.ndarray, np.ndarray] | None] = (),
    opening: float = 0.0,
) -> MilpModel:
    """The MILP of a problem (the network must be PWL).

    `free` None: the minimization model (bound vectors on monotone networks, the free box
    otherwise; the latter is contrastive only). `free` given: the flip oracle's feasibility model,
    y free in the box on `free` and equal to x elsewhere. `relax`: drop the binaries that the
    module docstring shows unnecessary on monotone networks. `margin`: keep continuous values ε
    off the closed sides too, 2ε off the strict ones (module docstring, Margins): for witnesses,
    never for proofs. `exact`: the exact closure with its strict margin τ (module docstring), for
    proofs. `bounds`: per layer (None or missing: none), float bounds lower, upper [width] of its
    pre-activations that hold at every solution of this model (`exact_milp`'s LP-based
    tightening); they narrow the interval bounds, and with them the big-M constants. `opening`
    (≥ 0): the closed sides moved outward by it (class 0 is `f ≤ t + opening`, a step's 1 is
    `h ≥ at − opening`, K ≥ 2: `f_j − f_c ≥ −opening` for j < c), the strict ones kept ε off: for
    the exported files (`verify.export.milp_text`), so that a point reached exactly on a closed side
    stays inside at a float solver's tolerances; it admits points just past a closed side.
    """
    if exact and (margin or opening):
        raise ValueError("the exact closure has no margins")
    if margin and opening:
        raise ValueError("margins and an opening are exclusive")
    _check_magnitudes(problem)
    n = problem.n
    builder = _Builder()
    epsilon = 0.0 if exact else problem.epsilon + opening  # the strict sides: ε + margin, the margin −opening
    tau = builder.variables(np.array([-1.0]), np.array([1.0])) if exact else None
    if free is None:
        selectors = builder.variables(np.zeros(n), np.ones(n), integer=True)
    else:
        chosen = np.isin(np.arange(n), sorted(free)).astype(np.float64)
        selectors = builder.variables(chosen, chosen, integer=True)
    free_box = free is not None or not problem.monotone
    if free_box:
        if free is None and problem.kind != "contrastive":
            raise ValueError("the free-box encoding answers contrastive questions only")
        low, high, center, z = _free_box(builder, problem, selectors, free, exact)
        goal = 1 - problem.prediction if problem.classes == 1 else None
    else:
        low, high, center, z = _bound_vectors(builder, problem, selectors, exact)
        goal = problem.goal
    inputs = z
    pre_activations: list[np.ndarray] = []
    # the dropped binaries need all weights ≥ 0, not just a sign-monotone f (module docstring)
    hull_only = {"max": goal == 0, "min": goal == 1} if relax and problem.net.is_monotone else {}
    continuous = margin and free_box and not problem.domain.binary  # values that move with a continuous y
    moves = n if at_most is None or free is not None else min(at_most, n)
    z_low, z_high = low, high  # the bounds of each layer's inputs (y's first)
    for index, (layer, box) in enumerate(zip(problem.net.layers, problem.exact.layer_bounds(low, high), strict=True)):
        inputs_low, inputs_high = z_low, z_high
        if index == 0:
            z_low, z_high = _tighter(box, _first_layer(layer, center, low, high, moves))
        else:
            z_low, z_high = _tighter(box, _interval(layer, _outward(z_low, -1), _outward(z_high, +1)))
        if index < len(bounds) and bounds[index] is not None:
            z_low, z_high = _tighter((z_low, z_high), bounds[index])
        h = builder.variables(_outward(z_low, -1), _outward(z_high, +1))
        pre_activations.append(h)
        builder.affine(h, layer.weight, z, layer.bias)
        z = h
        for stage in layer.activation.stages():
            if stage.op == "step":
                margin = problem.epsilon if continuous else -opening
                z, z_low, z_high = _encode_step(builder, stage.offset, z, z_low, z_high, epsilon, margin, tau)
                continuous = False
            else:
                z, z_low, z_high = _encode_kink(builder, stage, z, z_low, z_high, hull_only.get(stage.op, False))
    margin = problem.epsilon if continuous else -opening
    rivals = None
    if problem.classes > 1:
        difference = _difference_bounds(problem.net.layers[-1], inputs_low, inputs_high, z_low, z_high, problem.prediction)
        rivals = _leave_class(builder, z, problem.prediction, difference, epsilon, margin, tau)
    elif goal == 1 and tau is not None:
        builder.rows(problem.threshold, math.inf, (z, 1.0), (tau, -1.0))  # f − τ ≥ t
    elif goal == 1:
        builder.rows(problem.threshold + epsilon + margin, math.inf, (z, 1.0))
    else:
        builder.rows(-math.inf, problem.threshold - margin, (z, 1.0))
    if at_most is not None and free is None:
        builder.sum_row(selectors, -math.inf, float(at_most))
    objective = np.zeros(builder.count)
    if free is None:
        objective[selectors] = 1.0
    slack = None if tau is None else int(tau[0])
    outputs = None if rivals is None else np.asarray(z, dtype=np.int64)
    return builder.freeze(objective, selectors, inputs, int(z[0]), slack, tuple(pre_activations), rivals, outputs)


def _leave_class(
    builder: _Builder,
    f: np.ndarray,
    c: int,
    difference: tuple[list[Fraction], list[Fraction]],
    epsilon: float,
    margin: float,
    tau: np.ndarray | None = None,
) -> np.ndarray:
    """K ≥ 2: rows that make some output j ≠ c take class c (module docstring); returns β_j's
    index per class j [K] (−1 at c). f [K]: the
    outputs' variables; `difference`: exact bounds (low [K], high [K]) of f_j − f_c; `margin`: the
    e_j of the closed side (j < c), 0 unless margins are asked; `tau`: the strict margin's index
    [1] in the exact closure (ε = 0), which enters each strict row, f_j − f_c − τ ≥ 0 (its big-M
    grown by 1: τ ≥ −1)."""
    low, high = difference
    others = [j for j in range(len(f)) if j != c]
    strict = np.array([overtakes_strictly(c, j) for j in others], dtype=bool)
    possible = np.array([high[j] > 0 or (high[j] == 0 and not s) for j, s in zip(others, strict.tolist(), strict=True)])
    beta = builder.variables(np.zeros(len(others)), possible.astype(np.float64), integer=True)
    builder.sum_row(beta, 1.0, math.inf)
    required = np.array([epsilon + margin if s else margin for s in strict])  # 2ε off the strict side with margins
    reach = [Fraction(e) + (1 if s and tau is not None else 0) for e, s in zip(required.tolist(), strict.tolist(), strict=True)]
    big_m = _outward([max(Fraction(0), r - low[j]) for r, j in zip(reach, others, strict=True)], +1)
    rows = possible & (big_m > 0)  # with M = 0 the row holds everywhere (L_j ≥ e_j, + 1 with τ) and is left out
    columns = np.array(others, dtype=np.int64)
    terms = [(f[columns], 1.0), (np.full(len(columns), f[c]), -1.0), (beta, -big_m)]
    if tau is not None:
        terms.append((np.repeat(tau, len(columns)), -strict.astype(np.float64)))
    kept = [(column[rows], np.broadcast_to(value, rows.shape)[rows]) for column, value in terms]
    builder.rows((required - big_m)[rows], math.inf, *kept)
    rivals = np.full(len(f), -1, dtype=np.int64)
    rivals[columns] = beta
    return rivals


def _difference_bounds(
    last: Layer, inputs_low: Sequence, inputs_high: Sequence, f_low: list[Fraction], f_high: list[Fraction], c: int
) -> tuple[list[Fraction], list[Fraction]]:
    """Exact bounds (low [K], high [K]) of f_j − f_c over the region: the difference of the
    outputs' bounds f_low, f_high [K], and, where the last layer is affine (identity), the
    tighter interval bound of (W_j − W_c)·z + b_j − b_c over its inputs' bounds [m]."""
    low = [f_low[j] - f_high[c] for j in range(len(f_low))]
    high = [f_high[j] - f_low[c] for j in range(len(f_low))]
    if last.activation.name != "identity":
        return low, high
    z_low = np.array([Fraction(v) for v in inputs_low], dtype=object)
    z_high = np.array([Fraction(v) for v in inputs_high], dtype=object)
    weights = np.array([[Fraction(w) for w in row] for row in last.weight.tolist()], dtype=object)
    biases = [Fraction(b) for b in last.bias.tolist()]
    for j in range(len(f_low)):
        step = weights[j] - weights[c]
        positive, negative = np.where(step > 0, step, 0), np.where(step < 0, step, 0)
        bias = biases[j] - biases[c]
        low[j] = max(low[j], bias + positive.dot(z_low) + negative.dot(z_high))
        high[j] = min(high[j], bias + positive.dot(z_high) + negative.dot(z_low))
    return low, high


def _check_magnitudes(problem: Problem) -> None:
    """Unencodable when a number of the problem is beyond `MAX_MAGNITUDE`."""
    numbers = [
        ("the input", problem.x),
        ("the box", np.concatenate([problem.domain.lower, problem.domain.upper])),
        ("the threshold", np.array([] if problem.threshold is None else [problem.threshold])),  # None: K ≥ 2
    ]
    for index, layer in enumerate(problem.net.layers, start=1):
        numbers += [(f"layer {index}'s weights", layer.weight), (f"layer {index}'s biases", layer.bias)]
        numbers += [(f"layer {index}'s activation", np.array([value for _, value in layer.activation.params]))]
    for where, values in numbers:
        if values.size and np.abs(values).max() >= MAX_MAGNITUDE:
            largest = np.abs(values).max()
            raise Unencodable(f"a number of {where} ({largest:.3g}) is beyond what a float MILP resolves ({MAX_MAGNITUDE:g})")


def _bound_vectors(
    builder: _Builder, problem: Problem, selectors: np.ndarray, exact: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Monotone: y = base + (other − base)·s; `exact`: y between base and base + d·s, d = other −
    base rounded outwards (module docstring). Returns the region's low, high [n], y at s = 0
    [n] and y's indices [n]."""
    x, counter = problem.x, problem.counterpoint
    base, other = problem.base, problem.target
    low, high = np.minimum(x, counter), np.maximum(x, counter)
    y = builder.variables(low, high)
    if not exact:
        builder.rows(base, base, (y, 1.0), (selectors, -(other - base)))
        return low, high, base, y
    rises = other > base  # y ≥ base is y's bound there, y ≤ base + d·s a row; the other way round where it falls
    builder.rows(-math.inf, base[rises], (y[rises], 1.0), (selectors[rises], -_differences(other[rises], base[rises], +1)))
    falls = other < base
    builder.rows(base[falls], math.inf, (y[falls], 1.0), (selectors[falls], -_differences(other[falls], base[falls], -1)))
    return low, high, base, y


def _free_box(
    builder: _Builder, problem: Problem, selectors: np.ndarray, free: frozenset[int] | None, exact: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """y in the box where s = 1, y = x where s = 0; a feature of known direction moves only to its
    counterpoint end (not in the `exact` closure: its coefficient x' − x is rounded, and the whole
    box is a relaxation with the same flips). Returns the region's low, high [n], y at s = 0 (that
    is x) [n] and y's indices [n]."""
    x, lower, upper = problem.x, problem.domain.lower, problem.domain.upper
    y = builder.variables(lower, upper)
    if problem.domain.binary:
        width = upper - lower
        b = builder.variables(np.zeros(problem.n), (width > 0).astype(np.float64), integer=True)
        below, above = _differences(upper, lower, -1), _differences(upper, lower, +1)
        kept = below == above  # u − l is a double: y = l + (u − l)·b
        builder.rows(lower[kept], lower[kept], (y[kept], 1.0), (b[kept], -width[kept]))
        inexact = ~kept  # y between l + ⌊u − l⌋·b and l + ⌈u − l⌉·b: b = 0 still pins y = l
        builder.rows(lower[inexact], math.inf, (y[inexact], 1.0), (b[inexact], -below[inexact]))
        builder.rows(-math.inf, lower[inexact], (y[inexact], 1.0), (b[inexact], -above[inexact]))
        at_low, at_high = (x == lower) & (width > 0), (x == upper) & (width > 0)
        builder.rows(-math.inf, 0.0, (b[at_low], 1.0), (selectors[at_low], -1.0))  # b ≤ s
        builder.rows(1.0, math.inf, (b[at_high], 1.0), (selectors[at_high], 1.0))  # b ≥ 1 − s
    else:
        builder.rows(x, math.inf, (y, 1.0), (selectors, _differences(x, lower, +1)))  # y ≥ x − (x − l)·s
        builder.rows(-math.inf, x, (y, 1.0), (selectors, -_differences(upper, x, +1)))  # y ≤ x + (u − x)·s
    if not exact:  # y_i ∈ {x_i, x'_i} where the direction is known
        known, counter = problem.known, problem.counterpoint
        builder.rows(x[known], x[known], (y[known], 1.0), (selectors[known], -(counter - x)[known]))
    if free is None:
        return lower, upper, x, y
    movable = np.isin(np.arange(problem.n), sorted(free))
    return np.where(movable, lower, x), np.where(movable, upper, x), x, y


def _encode_kink(
    builder: _Builder, stage: Stage, w: np.ndarray, low: list[Fraction], high: list[Fraction], hull_only: bool
) -> tuple[np.ndarray, list[Fraction], list[Fraction]]:
    """Encode z = op(w, a·w + c) for units w [m] with exact bounds low, high; returns z [m] and its
    exact bounds. Stable units reuse w (identity piece) or get one equality row; a straddling unit
    gets the hull rows and, unless `hull_only`, a binary δ (1: the piece right of the kink) with
    two big-M rows."""
    a, c, sign = stage.slope, stage.offset, 1.0 if stage.op == "max" else -1.0
    kink = c / (1 - a)
    identity_right = (stage.op == "max") == (a < 1)  # right of the kink: the steeper piece for max
    z_low, z_high = [_apply(stage, value) for value in low], [_apply(stage, value) for value in high]
    left_stable = np.array([value <= kink for value in high], dtype=bool)
    right_stable = np.array([value >= kink for value in low], dtype=bool) & ~left_stable
    on_piece = left_stable if identity_right else right_stable
    cross = ~(left_stable | right_stable)
    z = w.copy()  # units stable on the identity piece keep z = w
    for mask in (on_piece, cross):
        z[mask] = builder.variables(_outward(_pick(z_low, mask), -1), _outward(_pick(z_high, mask), +1))
    builder.rows(float(c), float(c), (z[on_piece], 1.0), (w[on_piece], -float(a)))
    zc, wc = z[cross], w[cross]
    pieces = [(1.0, 0.0), (float(a), float(c))]  # (slope, offset) of the identity and the other piece
    for slope, offset in pieces:  # sign·z ≥ sign·piece(w)
        builder.rows(sign * offset, math.inf, (zc, sign), (wc, -sign * slope))
    if hull_only:
        return z, z_low, z_high
    right, left = (pieces[0], pieces[1]) if identity_right else (pieces[1], pieces[0])
    gap = abs(1 - a)  # M = |left(w) − right(w)| at the far end, exactly, rounded up
    m_right = _rounded([gap * (kink - Fraction(v)) for v in _outward(_pick(low, cross), -1)], +1)
    m_left = _rounded([gap * (Fraction(v) - kink) for v in _outward(_pick(high, cross), +1)], +1)
    right_side = _rounded([Fraction(sign) * Fraction(right[1]) + Fraction(m) for m in m_right.tolist()], +1)
    delta = builder.variables(np.zeros(len(zc)), np.ones(len(zc)), integer=True)
    # sign·z ≤ sign·right(w) + M_right·(1 − δ) and sign·z ≤ sign·left(w) + M_left·δ
    builder.rows(-math.inf, right_side, (zc, sign), (wc, -sign * right[0]), (delta, m_right))
    builder.rows(-math.inf, sign * left[1], (zc, sign), (wc, -sign * left[0]), (delta, -m_left))
    return z, z_low, z_high


def _encode_step(
    builder: _Builder,
    at: Fraction,
    w: np.ndarray,
    low: list[Fraction],
    high: list[Fraction],
    epsilon: float,
    margin: float,
    tau: np.ndarray | None = None,
) -> tuple[np.ndarray, list[Fraction], list[Fraction]]:
    """z = [w ≥ at] for units w [m]: z binary (fixed where stable), z = 1 ⇒ w ≥ at + margin and
    z = 0 ⇒ w ≤ at − ε − margin (with `tau`, the strict margin's index [1]: w + τ ≤ at). Returns
    z [m] and its exact bounds."""
    z_low = [Fraction(int(value >= at)) for value in low]
    z_high = [Fraction(int(value >= at)) for value in high]
    z = builder.variables(np.array(z_low, dtype=np.float64), np.array(z_high, dtype=np.float64), integer=True)
    cross = np.array([lo != hi for lo, hi in zip(z_low, z_high, strict=True)], dtype=bool)
    zc, wc, at_float = z[cross], w[cross], float(at)
    floor = at + Fraction(margin)
    m_low = _rounded([floor - Fraction(v) for v in _outward(_pick(low, cross), -1)], +1)
    builder.rows(_rounded([floor - Fraction(m) for m in m_low.tolist()], -1), math.inf, (wc, 1.0), (zc, -m_low))
    reach = (1 if tau is not None else 0) + Fraction(epsilon) + Fraction(margin) - at  # M = high − at + ε + margin (+ 1: τ ≥ −1)
    m_high = _rounded([Fraction(v) + reach for v in _outward(_pick(high, cross), +1)], +1)
    extra = () if tau is None else ((np.repeat(tau, len(wc)), 1.0),)
    builder.rows(-math.inf, at_float - epsilon - margin, (wc, 1.0), (zc, -m_high), *extra)
    return z, z_low, z_high


def _first_layer(
    layer: Layer, center: np.ndarray, low: np.ndarray, high: np.ndarray, moves: int
) -> tuple[np.ndarray, np.ndarray]:
    """Float bounds [width] of the first pre-activation when at most `moves` features leave
    `center` [n], each within [low, high] [n]: h(center) plus the `moves` largest rises (falls)."""
    weight = layer.weight
    steps = np.stack([weight * (low - center), weight * (high - center)])
    rises, falls = np.maximum(steps.max(axis=0), 0.0), np.minimum(steps.min(axis=0), 0.0)
    rise = -np.sort(-rises, axis=1)[:, :moves].sum(axis=1)
    fall = np.sort(falls, axis=1)[:, :moves].sum(axis=1)
    middle = weight @ center + layer.bias
    slack = PAD * (1.0 + np.abs(weight) @ np.abs(center) + np.abs(layer.bias) + rises.sum(axis=1) - falls.sum(axis=1))
    return middle + fall - slack, middle + rise + slack


def _interval(layer: Layer, low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float interval bounds [width] of a pre-activation whose inputs lie in [low, high] [k]."""
    positive, negative = np.maximum(layer.weight, 0.0), np.minimum(layer.weight, 0.0)
    slack = PAD * (1.0 + np.abs(layer.weight) @ np.maximum(np.abs(low), np.abs(high)) + np.abs(layer.bias))
    return positive @ low + negative @ high + layer.bias - slack, positive @ high + negative @ low + layer.bias + slack


def _tighter(box: tuple[np.ndarray, np.ndarray], floats: tuple[np.ndarray, np.ndarray]) -> tuple[list[Fraction], list[Fraction]]:
    """The tighter of the exact box bounds and sound float bounds, unit by unit, as Fractions."""
    low = [max(exact, Fraction(value)) for exact, value in zip(box[0], floats[0], strict=True)]
    high = [min(exact, Fraction(value)) for exact, value in zip(box[1], floats[1], strict=True)]
    return low, high


def _apply(stage: Stage, value: Fraction) -> Fraction:
    other = stage.slope * value + stage.offset
    return max(value, other) if stage.op == "max" else min(value, other)


def _pick(values: list[Fraction], mask: np.ndarray) -> list[Fraction]:
    return [value for value, keep in zip(values, mask, strict=True) if keep]


def _rounded(values: list[Fraction], direction: int) -> np.ndarray:
    """Exact values [m] as the nearest doubles in `direction` (−1: the largest double ≤ each,
    +1: the smallest ≥ each)."""
    nearest = np.array([float(value) for value in values], dtype=np.float64)
    for i, value in enumerate(values):
        if (Fraction(nearest[i]) - value) * direction < 0:
            nearest[i] = np.nextafter(nearest[i], direction * math.inf)
    return nearest


def _differences(minuend: np.ndarray, subtrahend: np.ndarray, direction: int) -> np.ndarray:
    """minuend − subtrahend [m] (doubles) computed exactly and rounded in `direction`
    (`domain.rounded_sum`: the sign of TwoSum's exact error, where one Fraction per entry was a
    large share of a deletion on the 784-feature MNIST-FC shape; docs/results.md)."""
    minuend, subtrahend = np.asarray(minuend, dtype=np.float64), np.asarray(subtrahend, dtype=np.float64)
    return rounded_sum(minuend, -subtrahend, direction * math.inf)


def _outward(values: list[Fraction] | np.ndarray, direction: int) -> np.ndarray:
    """Exact values [m] as floats moved outwards (direction −1: down, +1: up) by one ulp, which
    covers the rounding of `float`, and then padded by PAD."""
    largest = max((abs(value) for value in values), default=0)
    if largest >= MAX_MAGNITUDE:
        shown = f"{float(largest):.3g}" if largest <= np.finfo(np.float64).max else "beyond the double range"
        raise Unencodable(f"a unit's bound reaches {shown}, beyond what a float MILP resolves ({MAX_MAGNITUDE:g})")
    rounded = np.nextafter(np.array([float(value) for value in values], dtype=np.float64), direction * math.inf)
    return rounded + direction * PAD * (1.0 + np.abs(rounded))

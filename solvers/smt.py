"""z3 backend: exact answers over the rationals (piecewise-linear networks, and monotone networks
with smooth units too).

Every weight, bias, bound, input and threshold is a double read as an exact rational; class 1 is
`f > t` and class 0 is `f ≤ t`, with no ε, and a network of K ≥ 2 outputs leaves class c where
some f_j ≥ f_c (j < c) or f_j > f_c (j > c), exactly (`cardinal.prediction`). Two strategies:

**lazy** (monotone networks, any activation; the default there). By the monotone shortcut a set S
is judged by one exact evaluation of `base with S set to target` (CXp: x → x'; AXp: x' → x), and
validity is upward closed. Each question "a valid set within k?" goes first to a branch and bound
over sets (`solvers.branch`): exact probes of a node's sets, and rigorous float bounds of f over
all of them (`solvers.subsets` on ReLU networks, `solvers.smooth` on the other continuous ones;
none on step networks), close whole subtrees (bench/results/engine_notes.md). It answers
every question, except on ReLU networks where valid means f ≤ t — there only its root node is tried
(`_BELOW_NODES`), a lower bound tangent at a maximal invalid set, and the SAT loop does the rest
with the tangent cuts below — and where it meets an
undecided set (below), which the loop handles.

The SAT loop: z3 (the `QF_FD` SAT core with native cardinality) proposes a set S under
`AtMost(s, k)` and the clauses learned so far; a valid S is shrunk to an inclusion-minimal one; an
invalid S is grown to a maximal invalid set M and the clause `OR_{i ∉ M} s_i` (every valid set
leaves M) is added. Each size bound k has a guard literal; the search for size ≤ k assumes
the guards of k and of every larger bound, so what was learned for sets within a larger bound
stays in force. The loop (its z3 solver, its bounds) is built only when a check reaches it.

- *Tangent cuts* (ReLU, valid means f ≤ t; `solvers.cuts`). Each maximal invalid set also adds
  the pseudo-Boolean cut of an exact linear lower bound on f that touches f there (Kelley's
  cutting plane: f is convex in s on ReLU networks). It excludes all subsets of M at once. Every
  cut goes in also combined with the size row (`Cut.within`): on the plain knapsack next to
  `AtMost(s, k)` z3's pseudo-Boolean propagation stalls for seconds.
- *Smooth units* (sigmoid, tanh, softplus, alone or mixed with piecewise-linear ones). f is then
  neither piecewise linear nor convex, so exact cuts do not apply; `solvers.smooth` gives
  rigorous float bounds instead, in both goal directions. Validity being upward closed, the
  search for size ≤ k looks for sets of size exactly k (`AtLeast` under an assumption of that
  bound only), and each k adds the cut of a linear bound of f over the sets of size k; maximal
  invalid sets are widened by the features that the bounds show cannot help within k, while that
  keeps paying (`_WIDEN_PATIENCE`). Each invalid proposal also grows `_SIBLINGS` maximal invalid
  sets along random orders, and batches of random maximal sets come at doubling intervals.

Where z3's SAT core spends its time, and why z3 stays: bench/results/engine_notes.md.

*Undecided sets.* A smooth set is judged by a rigorous enclosure (`cardinal.exact`, 256 bits); an
enclosure that straddles the threshold (f = t exactly, say) decides nothing. The branch and bound
stops at one that could matter, and the loop takes over. There such a proposal is neither
learned as invalid nor taken as valid: it is excluded alone and remembered. An unsat that
a set of size ≤ k so excluded could overturn is no proof: the answer is then FEASIBLE (a set
within `at_most` is known) or ERROR, with a message naming the sets, never a verdict.

Evaluations are rigorous (`Problem.decider`, `cardinal.bounds`: float64 with a forward error bound,
exact dyadic arithmetic or a 256-bit enclosure near the threshold). The full encoding below cannot
certify the 28-feature 32×32 benchmark nets at all, because z3's exact simplex chokes on the dense
rationals of double weights (a single LP relaxation does not finish in a useful time).

**encode** (non-monotone networks always; monotone ones with `strategy="encode"`; piecewise linear only). The whole
network as linear real arithmetic: one real term per unit, with exact interval bounds
(`ExactNetwork.layer_bounds`) over the region — the box, or for monotone problems the box
between x and x' — so stable units are plain linear terms. An unstable unit gets one Boolean
phase per breakpoint inside its bounds (`a ↔ h ≥ c`, a step's `¬a` being `h < at`) and linear
constraints per phase; a size search uses one guarded `AtMost` per bound, checked under an
assumption, on one incremental solver.

*One-sided relaxation* (monotone encode). Say the goal is to *decrease* f to ≤ t. Replace every
unit's `z = σ(h)` by `z ≥ σ(h)`. Claim: for each s, the relaxed system is feasible iff the exact
one is. (⇐) the exact point is feasible. (⇒) take a relaxed solution and the true values h*, z*
of the same y. By induction over layers h* ≤ h and z* ≤ z: the first layer's h is the same
affine function of y; z* = σ(h*) ≤ σ(h) ≤ z as σ is non-decreasing; the next h* = W z* + b ≤
W z + b = h as W ≥ 0 (so only where every weight is; a sign-monotone network with negative
weights keeps exact units). So f* = z*_L ≤ z_L ≤ t. Where σ is convex on the unit's bounds (relu,
leaky relu with slope ≤ 1, hardtanh with only its lower corner inside), `z ≥ σ(h)` is the
conjunction `z ≥ ℓ_j(h)` over its linear pieces: no Boolean at all. Symmetrically, to *increase*
f above t use `z ≤ σ(h)`, and concave pieces need no Boolean.

*Witnesses* (non-monotone CXp on a real box). z3's model is exact but may hold rationals that are
no doubles (1/3, say). The model's point is taken when it is made of doubles; else it is rounded
to the nearest doubles and kept if `problem.flips` confirms it exactly; else the query is asked
again with each y_i either x_i or on the grid of doubles around the model's value (`y_i = k·ulp`,
k an integer with |k| ≤ 2^53: every double of that binade and below), whose model is exact in
doubles. Failing that the backend reports ERROR (no double point was found, though a rational one
exists).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from fractions import Fraction
from functools import cached_property

import numpy as np
import torch
import z3

from cardinal.activations import Activation
from cardinal.errors import InputError, Unproved
from cardinal.prediction import overtakes_strictly
from cardinal.problem import Outcome, Problem, Status, stopped

from . import hitting
from .base import BaseSolver
from .branch import NODE_LIMIT as _NODE_LIMIT
from .branch import UNDECIDED_SET, SubsetSearch
from .cuts import Cut, LinearBounds
from .guard import report_incumbent
from .smooth import SmoothBounds
from .subsets import SubsetBounds

STRATEGIES = ("auto", "encode")
# Lazy strategy without tangent cuts or widening (and on smooth networks): after this many invalid
# proposals the instance counts as hard, and a batch of maximal invalid sets grown along random
# orders is learned at once; then again after twice as many rounds, with twice as many sets, and
# so on: hard instances learn many sets at once, easy ones never pay for them (docs/results.md).
_ROUNDS_BEFORE_BATCH = 64
_BATCH_SETS = 2000
_SIBLINGS = 16
# Widening screens this many candidate features per batch (2 rows each), so that one batch stays
# short on wide inputs (at 276 features a batch of every candidate took 0.5 s).
_WIDEN_WINDOW = 32
# Widening stops after this many rounds in a row in which it proved nothing (the bounds are too
# loose for the instance; the rounds go faster without it).
_WIDEN_PATIENCE = 16
# With the goal f ≤ t the branch and bound gets this many nodes per check before the SAT loop takes
# over: the root alone, whose bound (lower lines tangent at a maximal invalid set) often settles the
# check at once; more nodes cost more than the loop they spare on wide inputs (docs/results.md).
_BELOW_NODES = 1
Check = tuple[str, tuple[int, ...] | None, np.ndarray | None]  # (z3 result, solution, witness y [n])
# What the lazy strategy's check answers in place of "unsat" when the proof would rest on a set
# whose smooth enclosure straddles the threshold (`_Lazy.check`).
_UNDECIDED = "undecided"
_VALID, _INVALID, _UNSURE = 1, 0, -1  # `_Lazy.judge`


class _NoDoubleWitness(Unproved):
    """z3 found a rational flipping point, but no flipping point made of doubles was found."""


class Z3Solver(BaseSolver):
    """`strategy`: "auto" (lazy on monotone networks, encode otherwise) or "encode" (always)."""

    name = "z3"
    exact = True

    def __init__(self, strategy: str = "auto") -> None:
        if strategy not in STRATEGIES:
            raise InputError(f"unknown z3 strategy {strategy!r} (use {' or '.join(STRATEGIES)})")
        self.strategy = strategy
        self.context: z3.Context | None = None

    def close(self) -> None:
        """Drop the z3 context (and with it every solver and term of this backend)."""
        self.context = None

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        started = time.perf_counter()
        if not problem.net.is_piecewise_linear and not (problem.monotone and self.strategy == "auto"):
            message = "z3 needs piecewise-linear activations, or a monotone network and the lazy strategy"
            return self.outcome(Status.UNSUPPORTED, started, message=message)
        # A fresh context per call, so that no answer depends on the calls before it; made only where
        # z3 runs (making one takes about 4 ms, a third of a typical call that the branch and bound answers).
        self.context = None
        deadline = started + time_limit
        try:
            fields = self._dispatch(problem, at_most, deadline)
        except _NoDoubleWitness as error:
            fields = {"status": Status.ERROR, "message": str(error)}
        return self.outcome(fields.pop("status"), started, **fields)

    def _dispatch(self, problem: Problem, at_most: int | None, deadline: float) -> dict:
        if not problem.monotone:
            self.context = z3.Context()
            encoding = _Encoding(problem, self.context)
            if problem.kind == "contrastive":
                return _descend(encoding.check, problem.n, at_most, None, deadline)
            result = hitting.minimum_abductive(problem, encoding.find_flip, at_most, deadline, self.supply)
            return {"status": result.status, "solution": result.solution, "raw_status": encoding.raw, "message": result.message,
                    "lemmas": result.lemmas, "lower": result.lower}
        flips = problem.flips(problem.counterpoint)
        if problem.kind == "contrastive" and flips is None:
            return {"status": Status.ERROR, "message": "p(x') is undecided (smooth margin): whether any CXp exists is unknown"}
        if problem.kind == "contrastive" and not flips:
            return {"status": Status.NONE_EXISTS}
        if problem.kind == "abductive" and flips is False:
            return {"status": Status.OPTIMAL, "solution": ()}
        base, target = problem.base, problem.target
        if self.strategy == "encode":
            self.context = z3.Context()
            return _descend(_Encoding(problem, self.context, base, target).check, problem.n, at_most, None, deadline)
        lazy = _Lazy(problem, base, target)
        if flips is None:  # p(x') undecided: the empty set may be an AXp, so no lower bound holds
            lazy.undecided.append(np.zeros(problem.n, dtype=bool))
        fields = _descend(lazy.check, problem.n, at_most, lazy.first_solution(), deadline)
        if flips is None and fields["status"] in (Status.OPTIMAL, Status.NONE_WITHIN):  # _descend never asks about size 0
            lazy.open_sets = lazy.undecided[:1]
            fields["raw_status"] = _UNDECIDED
            fields["status"] = Status.FEASIBLE if fields.get("solution") is not None else Status.ERROR
        if fields["raw_status"] == _UNDECIDED:
            fields["message"] = lazy.undecided_message()
        return fields


class Z3FlipSearch(BaseSolver):
    """The z3 engine of the exact set oracle (`solvers.oracle`): is there any CXp at all? One exact
    check of the whole network over the problem's box (`_Encoding`, no size bound, no
    minimisation). FEASIBLE with the features where the witness y differs from x and y [n] (made
    of doubles), NONE_EXISTS, TIMEOUT, UNSUPPORTED (not piecewise linear) or ERROR."""

    name = "z3"
    exact = True

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        """`at_most` is ignored: any flipping point answers."""
        started = time.perf_counter()
        if not problem.net.is_piecewise_linear:
            return self.outcome(Status.UNSUPPORTED, started, message="z3's exact encoding needs piecewise-linear activations")
        encoding = _Encoding(problem, z3.Context())
        try:
            y = encoding.find_flip(frozenset(range(problem.n)), started + time_limit)
        except hitting.OracleTimeout as stop:
            return self.outcome(Status.TIMEOUT, started, raw_status=str(stop))
        except _NoDoubleWitness as error:
            return self.outcome(Status.ERROR, started, raw_status=encoding.raw, message=str(error))
        if y is None:
            return self.outcome(Status.NONE_EXISTS, started, raw_status=encoding.raw)
        features = tuple(int(i) for i in np.flatnonzero(y != problem.x))
        return self.outcome(Status.FEASIBLE, started, solution=features, witness=_floats(y), raw_status=encoding.raw)


def _descend(
    check: Callable[[int, float], Check], n: int, at_most: int | None, best: tuple[int, ...] | None, deadline: float
) -> dict:
    """Search sizes downwards from `at_most` (or n): each solution of size j asks next for one of
    size ≤ j − 1, until unsat proves the last one minimum. `check(bound, deadline) -> (result,
    solution, witness)`; `best` is a solution known already. The empty set is never a solution
    here. A timeout after a solution (within `at_most`) is FEASIBLE (`cardinal.problem.stopped`)."""
    if best is not None and at_most is not None and len(best) > at_most:
        best = None
    if best is not None:
        report_incumbent(best)
    bound = min(n if best is None else len(best) - 1, n if at_most is None else at_most)
    witness, raw = None, ""
    while bound >= 1:
        raw, solution, y = check(bound, deadline)
        if raw == "sat":
            best, witness, bound = solution, y, len(solution) - 1
            report_incumbent(best, witness)  # a guarded call stopped at its limit answers with it
        elif raw == "unsat":
            break
        else:  # a limit, or (lazy) an unsat resting on undecided sets: the question stays open
            status, kept = stopped(best, at_most)
            if raw == _UNDECIDED and status == Status.TIMEOUT:
                status = Status.ERROR
            return {"status": status, "solution": kept, "witness": _floats(witness) if kept else None, "raw_status": raw}
    if best is None:
        status = Status.NONE_EXISTS if at_most is None or at_most >= n else Status.NONE_WITHIN
        return {"status": status, "raw_status": raw}
    return {"status": Status.OPTIMAL, "solution": best, "witness": _floats(witness), "raw_status": raw}


def _extend(
    chosen: np.ndarray,
    candidates: np.ndarray,
    keeps: Callable[[np.ndarray], np.ndarray],
    setting: bool,
    window: int | None = None,
    deadline: float = math.inf,
) -> tuple[np.ndarray, bool]:
    """Set the `candidates` [m] of chosen [n] bool to `setting`, in order, each only where
    `keeps(rows [B, n] bool) -> [B] bool` still holds with it; `keeps` is monotone (a candidate it
    rejects alone, it rejects later too). One batch per step over the next `window` candidates
    (all if None): every prefix of them, and each alone. The longest kept prefix is taken (its own
    row passed), the candidate after it skipped, and any rejected alone dropped. Returns the new
    [n] bool and whether every candidate was judged before the deadline."""
    chosen = chosen.copy()
    rest = candidates
    while len(rest) and time.perf_counter() < deadline:
        batch, later = (rest, rest[:0]) if window is None else (rest[:window], rest[window:])
        size = len(batch)
        rows = np.repeat(chosen[None, :], 2 * size, axis=0)
        rows[np.arange(size), batch] = setting
        rows[size:, batch] = np.where(np.tril(np.ones((size, size), dtype=bool)), setting, chosen[batch])
        kept = keeps(rows)
        alone, prefixes = kept[:size], kept[size:]
        taken = int(np.argmin(prefixes)) if not prefixes.all() else size
        chosen[batch[:taken]] = setting
        rest = np.concatenate([batch[taken + 1 :][alone[taken + 1 :]], later])
    return chosen, len(rest) == 0


def _floats(y: np.ndarray | None) -> tuple[float, ...] | None:
    return None if y is None else tuple(float(v) for v in y)


def _run(solver: z3.Solver, assumptions: Sequence[z3.BoolRef], deadline: float) -> str:
    """One check under the time left; "sat", "unsat" or "unknown (reason)"."""
    left = deadline - time.perf_counter()
    if left <= 0:
        return "unknown (deadline)"
    solver.set("timeout", max(1, int(left * 1000)))
    result = solver.check(*assumptions)
    return str(result) if result != z3.unknown else f"unknown ({solver.reason_unknown()})"


class _Lazy:
    """Monotone networks: z3 proposes sets, exact evaluation judges them (module docstring)."""

    def __init__(self, problem: Problem, base: np.ndarray, target: np.ndarray) -> None:
        self.base, self.target = np.asarray(base, dtype=np.float64), np.asarray(target, dtype=np.float64)  # [n]
        self.valid_when = 1 if problem.kind == "contrastive" else 0
        self.goal_below = (self.valid_when == 1) == (problem.prediction == 1)  # valid iff f ≤ t
        # The branch and bound answers each check first (`_branch_and_bound`). The loop's bounds, built
        # when it starts (`_start_loop`): exact tangent cuts on ReLU networks with f ≤ t, rigorous
        # float ones with smooth units (both directions).
        self.problem = problem
        self.tangents: LinearBounds | None = None  # tangent cuts from every maximal invalid set
        self.sized: Callable[[int], Cut] | None = None  # the cut of each size exactly (see `check`)
        self.widener: SmoothBounds | None = None  # proves sets free of valid sets within k
        self.solver: z3.Solver | None = None  # the SAT loop, started by `_start_loop`
        self.batch = True  # batches of random maximal sets for hard instances (no tangent cuts)
        self.undecided: list[np.ndarray] = []  # [n] bool sets whose enclosure straddles t, each excluded alone
        self.open_sets: list[np.ndarray] = []  # those within the bound of the last unsat
        self.n = problem.n
        self.random = np.random.default_rng(0)  # the orders of random maximal sets
        self.threshold = problem.threshold
        self.branch, self.branch_nodes = self._branch_and_bound(base, target)

    def _branch_and_bound(self, base: np.ndarray, target: np.ndarray) -> tuple[SubsetSearch | None, int | None]:
        """The branch and bound that answers each check first, and its nodes per check (None: no
        limit): with the node bounds of `SubsetBounds` on ReLU networks (for f ≤ t its root only,
        `_BELOW_NODES`), of `SmoothBounds` on the other continuous ones, and with its exact probes
        alone on step networks."""
        search = functools.partial(SubsetSearch, self.n, self.threshold, self.evaluate, self.goal_below)
        subsets = SubsetBounds(self.problem.net, base, target, self.threshold)
        if subsets.supported:
            reference = self.walk(np.zeros(self.n, dtype=bool), True).astype(np.float64) if self.goal_below else None
            return search(subsets, reference), _BELOW_NODES if self.goal_below else None
        smooth = SmoothBounds(self.problem.net, base, target, self.threshold)
        return search(smooth if smooth.supported else None), None

    @cached_property
    def order(self) -> np.ndarray:
        """Heuristic order [n] int64, least helpful feature first: f with one feature moved (floats
        suffice)."""
        single = self.problem.decider(np.where(np.eye(self.n, dtype=bool), self.target, self.base))[0]
        goal_is_one = (self.valid_when == 1) != (self.problem.prediction == 1)
        return np.argsort(single if goal_is_one else -single, kind="stable")

    def _start_loop(self) -> None:
        """The SAT loop's solver (in a z3 context of its own), literals and bounds (only where the
        branch and bound left a check open)."""
        problem, context = self.problem, z3.Context()
        if problem.net.is_piecewise_linear:
            if self.goal_below and problem.net.is_monotone:  # the cuts need all weights ≥ 0 (`solvers.cuts`)
                self.tangents = LinearBounds(problem.net, self.base, self.target, problem.threshold)
            self.batch = self.tangents is None
        else:
            smooth = SmoothBounds(problem.net, self.base, self.target, problem.threshold)
            if smooth.supported:
                self.sized, self.widener = smooth.size_cut, smooth
            self.batch = True  # the float bounds are looser: measured, the batches decide the hard tail
        self.failed_widenings = 0  # in a row; at `_WIDEN_PATIENCE` widening stops
        self.solver = z3.SolverFor("QF_FD", ctx=context)
        self.solver.set("random_seed", 0)  # z3's default, fixed: a run that ends before its limit repeats
        self.chosen = [z3.Bool(f"s{i}", context) for i in range(self.n)]
        self.literals = [s.as_ast() for s in self.chosen]
        self.guards: dict[int, z3.BoolRef] = {}
        self.exactly: dict[int, z3.BoolRef] = {}  # with `sized`: Σ s = k and its cut, assumed at bound k only
        self.cuts: list[Cut] = []  # the cuts that hold for every size bound
        self.rounds = 0  # invalid proposals so far
        self.batches = 0  # batches of random maximal sets learned so far
        # Σ 2^i·s_i: one model evaluation reads the whole proposal (reading each s_i is far slower).
        self.code = z3.Sum([z3.If(s, z3.IntVal(1 << i, context), z3.IntVal(0, context)) for i, s in enumerate(self.chosen)])

    def judge(self, masks: np.ndarray) -> np.ndarray:
        """masks [B, n] bool → [B] int8: is `base with the mask set to target` valid, exactly:
        `_VALID`, `_INVALID`, or `_UNSURE` where a smooth enclosure straddles the threshold (never
        on piecewise-linear networks)."""
        return self.evaluate(masks)[0]

    def evaluate(self, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`judge`, and g [B] in float64 (a hint), from one forward pass (`Problem.decider`, in numpy)."""
        predicted, f = self.problem.decider.decide(np.where(masks, self.target, self.base), self.threshold)
        valid = (predicted != self.problem.prediction) == (self.valid_when == 1)
        return np.where(predicted < 0, _UNSURE, np.where(valid, _VALID, _INVALID)).astype(np.int8), f

    def walk(self, chosen: np.ndarray, setting: bool) -> np.ndarray:
        """Set features to `setting` in `order` while the set stays surely invalid (True: grows an
        invalid set to a maximal one) or surely valid (False: shrinks a valid one to a minimal
        one), by `_extend`. Every set it returns was judged so; next to undecided sets the result
        may fall short of maximal (minimal), which weakens a clause but never makes one unsound."""
        rest = self.order[chosen[self.order] != setting]
        keep = _INVALID if setting else _VALID
        return _extend(chosen, rest, lambda rows: self.judge(rows) == keep, setting)[0]

    def first_solution(self) -> tuple[int, ...]:
        return tuple(int(i) for i in np.flatnonzero(self.walk(np.ones(self.n, dtype=bool), False)))

    def check(self, bound: int, deadline: float) -> Check:
        if self.branch is not None:
            # f > t: the branch and bound alone; f ≤ t: its root first (`_BELOW_NODES`), then the loop
            raw, found = self.branch.search(bound, deadline, self.branch_nodes)
            if found is not None:
                minimal = self.walk(found, False)
                y = np.where(minimal, self.target, self.base)
                return raw, tuple(int(i) for i in np.flatnonzero(minimal)), y
            if raw not in (_NODE_LIMIT, UNDECIDED_SET):
                return raw, None, None
        if self.solver is None:
            self._start_loop()
        if bound not in self.guards:
            self.guards[bound] = z3.Bool(f"at_most_{bound}", self.solver.ctx)
            self.solver.add(z3.Implies(self.guards[bound], z3.AtMost(*self.chosen, bound)))
            for cut in self.cuts:
                self._add_pb(cut.within(bound), self.guards[bound])
            if self.sized is not None:
                self.exactly[bound] = exactly = z3.Bool(f"exactly_{bound}", self.solver.ctx)
                self.solver.add(z3.Implies(exactly, z3.AtLeast(*self.chosen, bound)))
                cut = self.sized(bound)
                self._add_pb(cut, exactly)
                self._add_pb(cut.within(bound), exactly)
        # every guard ≥ bound holds too: what was learned for larger bounds stays
        assumptions = [guard for limit, guard in self.guards.items() if limit >= bound]
        assumptions += [self.exactly[bound]] if bound in self.exactly else []
        while True:
            raw = _run(self.solver, assumptions, deadline)
            if raw == "unsat":  # "no valid set within bound", unless it rests on undecided sets
                self.open_sets = [chosen for chosen in self.undecided if chosen.sum() <= bound]
                if self.open_sets:
                    return _UNDECIDED, None, None
            if raw != "sat":
                return raw, None, None
            code = self.solver.model().eval(self.code, model_completion=True).as_long()
            proposal = np.array([code >> i & 1 == 1 for i in range(self.n)])
            verdict = self.judge(proposal[None, :])[0]
            if verdict == _VALID:
                minimal = self.walk(proposal, False)
                y = np.where(minimal, self.target, self.base)
                return raw, tuple(int(i) for i in np.flatnonzero(minimal)), y
            if verdict == _UNSURE:  # neither learned as invalid nor taken as valid: set aside alone
                self.undecided.append(proposal)
                self._exclude(proposal)
                continue
            invalid = self.walk(proposal, True)
            if self.widener is not None and self.failed_widenings < _WIDEN_PATIENCE:
                widened = self._widen(invalid, bound, deadline)
                self.failed_widenings = 0 if widened.sum() > invalid.sum() else self.failed_widenings + 1
                self._learn(widened, self.guards[bound])
            else:
                self._learn(invalid)
                if self.batch and _SIBLINGS:
                    for grown in np.unique(self.grow_from(proposal, _SIBLINGS, deadline), axis=0):
                        self._learn(grown)
            if self.tangents is not None:
                self._add_cut(self.tangents.tangent_cut(invalid), bound, guarded=False)
            self.rounds += 1
            if self.batch and self.rounds == _ROUNDS_BEFORE_BATCH << self.batches:
                for grown in np.unique(self.grow_random(_BATCH_SETS << self.batches, deadline), axis=0):
                    if time.perf_counter() > deadline:
                        break
                    self._learn(grown)
                self.batches += 1

    def _learn(self, invalid: np.ndarray, guard: z3.BoolRef | None = None) -> None:
        """Every valid set (within the bound of `guard`, if given) leaves `invalid` [n] bool: a
        clause over the rest."""
        rest = np.flatnonzero(~invalid)
        self._add_clause([self.literals[i] for i in rest] + ([z3.Not(guard).as_ast()] if guard is not None else []))

    def _exclude(self, chosen: np.ndarray) -> None:
        """No further proposal is exactly `chosen` [n] bool (and nothing else is excluded)."""
        self._add_clause([self.literals[i] if not c else z3.Not(self.chosen[i]).as_ast() for i, c in enumerate(chosen)])

    def _add_clause(self, literals: list[z3.Ast]) -> None:
        """Built and asserted through z3's C API: the Python `z3.Or` re-checks every argument's sort
        and `Solver.add` flattens its arguments, which cost more than the solving itself at tens of
        thousands of clauses."""
        context = self.solver.ctx
        clause = z3.BoolRef(z3.Z3_mk_or(context.ref(), len(literals), (z3.Ast * len(literals))(*literals)), context)
        z3.Z3_solver_assert(context.ref(), self.solver.solver, clause.as_ast())

    def undecided_message(self) -> str:
        """Names the sets that left the last `_UNDECIDED` answer open."""
        sets = "; ".join("{" + ", ".join(map(str, np.flatnonzero(chosen))) + "}" for chosen in self.open_sets[:3])
        more = f" and {len(self.open_sets) - 3} more" if len(self.open_sets) > 3 else ""
        return (
            f"undecided (smooth margin): only the set(s) {sets}{more} could be smaller explanations;"
            " their enclosures of f straddle the threshold"
        )

    def _widen(self, invalid: np.ndarray, bound: int, deadline: float = math.inf) -> np.ndarray:
        """The invalid set [n] bool widened by features taken in `order` while no set inside it
        within `bound` can be valid: screened with the widener's `likely_refutes` (`_extend`, the
        next `_WIDEN_WINDOW` features per batch), then proved once by its `refutes`;
        unproved, or cut short by the deadline, the set stays as it was."""
        rest = self.order[~invalid[self.order]]
        screened = _extend(invalid, rest, lambda rows: self.widener.likely_refutes(bound, rows), True, _WIDEN_WINDOW, deadline)
        widened, finished = screened
        if finished and widened.sum() > invalid.sum() and self.widener.refutes(bound, widened[None, :])[0]:
            return widened
        return invalid

    def _add_cut(self, cut: Cut, bound: int, guarded: bool = True) -> None:
        """Add the cut Σ c_i s_i ≤ b: under the guard of `bound` if `guarded` (it holds for sets
        within `bound` only), else for good and kept for later bounds. Under the guard goes also
        its combination with the cardinality row (`Cut.within`), which z3 propagates well."""
        if not guarded:
            self.cuts.append(cut)
            self._add_pb(cut)
        self._add_pb(cut.within(bound), self.guards[bound])

    def _add_pb(self, cut: Cut, guard: z3.BoolRef | None = None) -> None:
        if cut.trivial:
            return
        terms = [(self.chosen[i], c) for i, c in enumerate(cut.coefficients) if c]
        constraint = z3.PbLe(terms, cut.bound) if terms else z3.BoolVal(False, self.solver.ctx)  # 0 ≤ b < 0
        self.solver.add(constraint if guard is None else z3.Implies(guard, constraint))

    def grow_random(self, count: int, deadline: float = math.inf) -> np.ndarray:
        """Up to `count` maximal invalid sets [≤ count, n] bool, grown from ∅ along random feature
        orders (`self.random`, seeded) in one batch: step t tries each set's t-th feature and
        keeps it while the set stays invalid. The steps decide in plain float64 (half the work
        of `judge`); the grown sets are then judged rigorously and only those surely invalid are
        returned (a float misjudgement near the threshold costs a set, or its maximality, never
        soundness). Past the deadline the sets stop growing."""
        orders = np.argsort(self.random.random((count, self.n)), axis=1)
        grown = np.zeros((count, self.n), dtype=bool)
        for step in range(self.n):
            if time.perf_counter() > deadline:
                break
            trial = grown.copy()
            trial[np.arange(count), orders[:, step]] = True
            still_invalid = self._float_invalid(trial)
            grown[still_invalid] = trial[still_invalid]
        return grown[self.judge(grown) == _INVALID]

    @cached_property
    def float_layers(self) -> list[tuple[torch.Tensor, torch.Tensor, torch.nn.Module]]:
        """(W^T, b, σ) per layer as torch float64 (`_float_invalid`)."""
        return [(weight.T, bias, activation) for weight, bias, activation in self.problem.net.torch_layers()]

    @torch.no_grad()
    def _float_invalid(self, masks: np.ndarray) -> np.ndarray:
        """masks [B, n] bool → [B] bool: invalid by a plain float64 forward pass (not rigorous)."""
        z = torch.from_numpy(np.where(masks, self.target, self.base))
        for weight, bias, activation in self.float_layers:
            z = activation(torch.addmm(bias, z, weight))
        above = (z[:, 0] > self.threshold).numpy()
        return above if self.goal_below else ~above

    def grow_from(self, start: np.ndarray, count: int, deadline: float = math.inf) -> np.ndarray:
        """`count` maximal invalid supersets [count, n] bool of the surely invalid `start` [n],
        along random orders of the other features: `_extend` for all of them at once. Each pass
        judges, per set, every pending candidate alone and every prefix of them; a set takes its
        longest surely invalid prefix, skips the candidate after it, and drops those rejected
        alone. Few passes of many rows: cheaper than `grow_random`'s step per feature when the
        sets are few. Every set returned was judged surely invalid."""
        free = np.flatnonzero(~start)
        count, m, n = count, len(free), self.n
        orders = free[np.argsort(self.random.random((count, m)), axis=1)]  # [count, m]
        grown = np.repeat(start[None, :], count, axis=0)
        pending = np.ones((count, m), dtype=bool)
        positions = np.arange(m)
        while pending.any() and time.perf_counter() < deadline:
            candidates = np.zeros((count, m, n), dtype=bool)
            candidates[np.arange(count)[:, None], positions[None, :], orders] = pending
            prefixes = np.cumsum(candidates, axis=1) > 0  # [count, m, n]: the pending candidates up to j
            rows = np.concatenate([grown[:, None, :] | candidates, grown[:, None, :] | prefixes], axis=1)  # [count, 2m, n]
            asked = np.concatenate([pending, pending], axis=1)
            kept = np.zeros((count, 2 * m), dtype=bool)
            kept[asked] = self.judge(rows[asked]) == _INVALID
            alone, prefix_kept = kept[:, :m], kept[:, m:]
            failing = pending & ~prefix_kept
            first = np.where(failing.any(axis=1), failing.argmax(axis=1), m)  # the first pending prefix rejected
            taken = pending & (positions[None, :] < first[:, None])
            grown |= (candidates & taken[:, :, None]).any(axis=1)
            pending &= (positions[None, :] > first[:, None]) & alone
        return grown


class _Encoding:
    """The network, the input region and the goal as exact z3 constraints over s [n] Booleans.

    Monotone (base, target given): y = base + (target − base)·s, one-sided units where all
    weights are ≥ 0 (exact units on other sign-monotone networks). Otherwise y [n]
    reals in the box (its end points on a binary domain), y_i = x_i unless s_i, exact units, and
    the goal is the other class: f > t or f ≤ t (K = 1), or for K ≥ 2 leaving class c, the
    disjunction over j ≠ c of f_j ≥ f_c (j < c) and f_j > f_c (j > c)."""

    def __init__(self, problem: Problem, context: z3.Context, base: np.ndarray | None = None, target: np.ndarray | None = None):
        self.problem, self.context = problem, context
        self.solver = z3.Solver(ctx=context)
        self.solver.set("random_seed", 0)
        self.chosen = [z3.Bool(f"s{i}", context) for i in range(problem.n)]
        self.guards: dict[int, z3.BoolRef] = {}
        self.rounds = 0  # invalid proposals so far
        self.raw, self.units = "", 0
        goal = 1 - problem.prediction if problem.kind == "contrastive" or base is None else problem.prediction
        # one-sided units need all weights ≥ 0 (module docstring), not just a sign-monotone f
        self.moved = base is not None  # bound vectors: s alone decides the point
        self.mode = "exact" if not (self.moved and problem.net.is_monotone) else ("above" if goal == 0 else "below")
        layers = problem.net.layers
        weights = [[[Fraction(w) for w in row] for row in layer.weight.tolist()] for layer in layers]
        biases = [[Fraction(b) for b in layer.bias.tolist()] for layer in layers]
        if base is None:
            lower, upper = problem.domain.lower, problem.domain.upper
            self.points = [z3.Real(f"y{i}", context) for i in range(problem.n)]
            self._tie_inputs()
            inputs: list[z3.ArithRef] = self.points
        else:
            lower, upper = np.minimum(base, target), np.maximum(base, target)
            start = [Fraction(v) for v in base.tolist()]
            move = [Fraction(t) - s for t, s in zip(target.tolist(), start, strict=True)]
            biases[0] = [
                b + sum(w * v for w, v in zip(row, start, strict=True)) for b, row in zip(biases[0], weights[0], strict=True)
            ]
            weights[0] = [[w * d for w, d in zip(row, move, strict=True)] for row in weights[0]]
            inputs = [z3.If(s, self._value(Fraction(1)), self._value(Fraction(0))) for s in self.chosen]
        z = inputs
        for number, (layer, (low, high)) in enumerate(zip(layers, problem.exact.layer_bounds(lower, upper), strict=True)):
            z = [
                self._unit(layer.activation, self._linear(weights[number][j], z, biases[number][j]), low[j], high[j])
                for j in range(layer.width)
            ]
        if problem.classes > 1:  # leave class c: some output j takes it (`cardinal.prediction`)
            c = problem.prediction
            self.solver.add(z3.Or(*[z[j] > z[c] if overtakes_strictly(c, j) else z[j] >= z[c] for j in range(len(z)) if j != c]))
            return
        threshold = self._value(Fraction(problem.threshold))
        self.solver.add(z[0] > threshold if goal == 1 else z[0] <= threshold)

    def _value(self, value: Fraction) -> z3.ArithRef:
        return z3.RealVal(value, self.context)

    def _linear(self, coefficients: list[Fraction], terms: Sequence[z3.ArithRef], constant: Fraction) -> z3.ArithRef:
        parts = [self._value(c) * term for c, term in zip(coefficients, terms, strict=True) if c != 0]
        return z3.Sum([*parts, self._value(constant)]) if parts else self._value(constant)

    def _tie_inputs(self) -> None:
        """y_i = x_i unless s_i; y_i in the box (its ends on a binary one), or for a feature of
        known direction (`Problem.known`) y_i ∈ {x_i, x'_i}."""
        domain, x, known, counter = self.problem.domain, self.problem.x, self.problem.known, self.problem.counterpoint
        for i, (y, s) in enumerate(zip(self.points, self.chosen, strict=True)):
            low, high, here, end = (self._value(Fraction(v)) for v in (domain.lower[i], domain.upper[i], x[i], counter[i]))
            if known[i]:
                self.solver.add(z3.Or(y == here, y == end))
            else:
                self.solver.add(z3.Or(y == low, y == high) if domain.binary else z3.And(low <= y, y <= high))
            self.solver.add(z3.Or(s, y == here))

    def _unit(self, activation: Activation, h: z3.ArithRef, low: Fraction, high: Fraction) -> z3.ArithRef:
        """z for one unit with pre-activation h ∈ [low, high]: a linear term when the unit is stable."""
        _, pieces = activation.pieces()
        step = not activation.is_continuous
        first, inside = activation.pieces_over(low, high)
        pieces = pieces[first : first + len(inside) + 1]
        terms = [h if (a, b) == (1, 0) else self._value(b) if a == 0 else self._value(a) * h + self._value(b) for a, b in pieces]
        if not inside:
            return terms[0]
        self.units += 1
        z = z3.Real(f"z{self.units}", self.context)
        slopes = [a for a, _ in pieces]
        convex, concave = slopes == sorted(slopes), slopes == sorted(slopes, reverse=True)
        if not step and ((self.mode == "above" and convex) or (self.mode == "below" and concave)):
            self.solver.add(*[z >= t if self.mode == "above" else z <= t for t in terms])
            return z
        phases = [z3.Bool(f"a{self.units}_{j}", self.context) for j in range(len(inside))]
        for j, (a, c) in enumerate(zip(phases, inside, strict=True)):
            self.solver.add(z3.Implies(a, h >= self._value(c)), z3.Or(a, h < self._value(c) if step else h <= self._value(c)))
            if j:
                self.solver.add(z3.Implies(a, phases[j - 1]))
        for j, term in enumerate(terms):
            active = z3.And(*([phases[j - 1]] if j else []), *([z3.Not(phases[j])] if j < len(phases) else []))
            if self.mode != "below":
                self.solver.add(z3.Implies(active, z >= term))
            if self.mode != "above":
                self.solver.add(z3.Implies(active, z <= term))
        return z

    def check(self, bound: int, deadline: float, assumptions: Sequence[z3.BoolRef] = ()) -> Check:
        if bound not in self.guards:
            self.guards[bound] = z3.Bool(f"at_most_{bound}", self.context)
            self.solver.add(z3.Implies(self.guards[bound], z3.AtMost(*self.chosen, bound)))
        self.raw = _run(self.solver, [self.guards[bound], *assumptions], deadline)
        if self.raw != "sat":
            return self.raw, None, None
        model = self.solver.model()
        if self.moved:
            solution = tuple(i for i, s in enumerate(self.chosen) if z3.is_true(model.eval(s, model_completion=True)))
            return self.raw, solution, None
        y = self._witness(model, [self.guards[bound], *assumptions], deadline)
        return self.raw, tuple(int(i) for i in np.flatnonzero(y != self.problem.x)), y

    def find_flip(self, free: frozenset[int], deadline: float) -> np.ndarray | None:
        """The flip oracle of `hitting.minimum_abductive`: a flipping y agreeing with x off `free`."""
        raw, _, y = self.check(self.problem.n, deadline, [z3.Not(s) for i, s in enumerate(self.chosen) if i not in free])
        if raw.startswith("unknown"):
            raise hitting.OracleTimeout(raw)
        return y

    def _witness(self, model: z3.ModelRef, assumptions: list[z3.BoolRef], deadline: float) -> np.ndarray:
        """A flipping point made of doubles (module docstring): the model, rounded, or on a grid."""
        values = [_fraction(model.eval(y, model_completion=True)) for y in self.points]
        rounded = np.array([float(v) for v in values])
        if all(Fraction(r) == v for r, v in zip(rounded.tolist(), values, strict=True)) or self.problem.flips(rounded):
            return rounded
        self.solver.push()
        for i, (y, value) in enumerate(zip(self.points, rounded.tolist(), strict=True)):
            # every k·ulp with |k| ≤ 2^53 is a double: all doubles of the model's binade and below
            bounds = self.problem.domain.lower[i], self.problem.domain.upper[i]
            k = z3.Int(f"k{i}", self.context)
            spacing = self._value(Fraction(math.ulp(abs(value) if value else max(map(abs, bounds)))))
            self.solver.add(z3.Or(y == self._value(Fraction(self.problem.x[i])), y == spacing * z3.ToReal(k)))
            self.solver.add(k >= -(2**53), k <= 2**53)
        raw = _run(self.solver, assumptions, deadline)
        grid_model = self.solver.model() if raw == "sat" else None
        self.solver.pop()
        if grid_model is None:
            raise _NoDoubleWitness(f"z3 found a flipping point with non-double coordinates, none on a grid of doubles ({raw})")
        return np.array([float(_fraction(grid_model.eval(y, model_completion=True))) for y in self.points])


def _fraction(value: z3.ExprRef) -> Fraction:
    """An exact z3 rational numeral as a Fraction."""
    return Fraction(value.numerator_as_long(), value.denominator_as_long())

"""`MarabouSolver`: the Marabou neural-network verifier (maraboupy) as the set oracle of an
implicit-hitting-set search (ReLU networks).

A verifier answers fixed-set questions — is there a y in the box, equal to x off a free set F,
whose prediction differs from p(x)? — and has no cardinality constraint or objective. So the
search over sets is cardinal's (`solvers.hitting`): minimum AXps by `minimum_abductive` (free =
the features outside a minimum hitting set of the CXps found), minimum CXps by
`minimum_contrastive` (free = a minimum hitting set of the AXps found), with `at_most` bounding
the hitting sets. Each question is one Marabou query: y_i ∈ [l_i, u_i] on F and y_i = x_i
elsewhere, one equation per unit (`h − W·z = b`), one ReLU constraint per hidden unit, the
pre-activations bounded by their exact interval bounds rounded outwards, and the output asked
for `f ≥ t + ε` (class 1) or `f ≤ t` (class 0), ε as in the float MILPs.

Marabou works in floating point, so `exact` is false: its points are replayed exactly (a
point that does not flip in exact arithmetic ends an AXp search with ERROR, and a CXp answer's
witness goes to the replay), and its "no flip" answers — every lower bound of the search — are
float claims like a MILP's infeasibility. A point on the boundary f = t is asked for again with a
margin, as the MILP backends do (`solvers.milp`). The same search runs on monotone networks too, where
the monotone shortcut would answer each question with one forward pass: the backend is there to
measure the verifier, not to be fast; there a binary box is asked as the real box, which has the
same explanations (the shortcut's corners are vertices), and a CXp's witness is the shortcut's
point. ReLU hidden layers and one identity or ReLU output only (K ≥ 2 classes are unsupported); a binary box of a non-monotone
network (no discrete inputs in Marabou) is unsupported.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from cardinal.errors import Stopped
from cardinal.exact import modified_inputs
from cardinal.problem import Outcome, Problem, Status

from . import hitting
from .base import BaseSolver
from .encode import _outward

with warnings.catch_warnings():  # maraboupy warns at import that its TensorFlow parser is unavailable
    warnings.simplefilter("ignore")
    from maraboupy import Marabou, MarabouCore

ACTIVATIONS = ("relu", "identity")


class _Stopped(Stopped):
    """Marabou ended a query without a verdict (error, unknown)."""


class MarabouSolver(BaseSolver):
    """Marabou backend (module docstring)."""

    name = "marabou"
    exact = False

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        started = time.perf_counter()
        deadline = started + time_limit
        other = sorted(set(problem.net.activation_names) - set(ACTIVATIONS))
        if other:
            return self.outcome(Status.UNSUPPORTED, started, message=f"Marabou runs ReLU networks here, not {', '.join(other)}")
        if problem.net.n_outputs > 1:
            message = "the Marabou backend asks about one output and a threshold, not an argmax"
            return self.outcome(Status.UNSUPPORTED, started, message=message)
        if problem.domain.binary and not problem.monotone:
            return self.outcome(Status.UNSUPPORTED, started, message="Marabou has no discrete inputs (binary box)")
        query = _Query(problem)
        search = hitting.minimum_contrastive if problem.kind == "contrastive" else hitting.minimum_abductive
        try:
            result = search(problem, query.find_flip, at_most, deadline)
        except _Stopped as stop:
            return self.outcome(Status.ERROR, started, raw_status=str(stop), message=f"{query.calls} Marabou queries")
        message = f"{query.calls} Marabou queries" + (f"; {result.message}" if result.message else "")
        witness = result.witness
        if witness is not None and problem.monotone:  # the exact point of the shortcut, a vertex of the box
            witness = tuple(modified_inputs(problem.x, result.solution, problem.counterpoint).tolist())
        fields = {"solution": result.solution, "witness": witness, "raw_status": query.raw, "message": message,
                  "lemmas": result.lemmas}
        return self.outcome(result.status, started, **fields)


class _Query:
    """The network of a problem in Marabou's terms, asked one free set at a time."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.goal = 1 - problem.prediction
        self.calls, self.raw = 0, ""
        box = problem.exact.layer_bounds(problem.domain.lower, problem.domain.upper)  # exact, over every free set
        self.bounds = [(_outward(low, -1), _outward(high, +1)) for low, high in box]

    def find_flip(self, free: frozenset[int], deadline: float) -> np.ndarray | None:
        """A y [n] in the box, equal to x off `free`, that Marabou says flips the prediction, or
        None. A point that does not flip in exact arithmetic (class 0 reached on the boundary
        f = t) is asked for once more with f ≤ t − ε, and the first point is kept if that fails."""
        y = self._ask(free, deadline, 0.0)
        if y is None or self.goal == 1 or self.problem.flips(y):
            return y
        try:
            second = self._ask(free, deadline, self.problem.epsilon)
        except hitting.OracleTimeout:
            return y
        return second if second is not None and self.problem.flips(second) else y

    def _ask(self, free: frozenset[int], deadline: float, margin: float) -> np.ndarray | None:
        """One Marabou query (module docstring); class 0 asked as f ≤ t − `margin`."""
        left = deadline - time.perf_counter()
        if left <= 0:
            raise hitting.OracleTimeout("deadline")
        problem, query = self.problem, MarabouCore.InputQuery()
        n = problem.n
        widths = problem.net.widths
        hidden = [w for layer, w in zip(problem.net.layers, widths, strict=True) if layer.activation.name == "relu"]
        query.setNumberOfVariables(n + sum(widths) + sum(hidden))
        lower, upper, x = problem.domain.lower, problem.domain.upper, problem.x
        for i in range(n):
            query.setLowerBound(i, float(lower[i]) if i in free else float(x[i]))
            query.setUpperBound(i, float(upper[i]) if i in free else float(x[i]))
            query.markInputVariable(i, i)
        inputs, following = list(range(n)), n
        for layer, (low, high) in zip(problem.net.layers, self.bounds, strict=True):
            h = list(range(following, following + layer.width))
            following += layer.width
            for j, unit in enumerate(h):
                query.setLowerBound(unit, float(low[j]))
                query.setUpperBound(unit, float(high[j]))
                equation = MarabouCore.Equation(MarabouCore.Equation.EQ)
                equation.addAddend(-1.0, unit)
                for weight, source in zip(layer.weight[j].tolist(), inputs, strict=True):
                    if weight != 0:
                        equation.addAddend(weight, source)
                equation.setScalar(-float(layer.bias[j]))
                query.addEquation(equation)
            if layer.activation.name == "relu":
                z = list(range(following, following + layer.width))
                following += layer.width
                for unit, value, top in zip(h, z, high.tolist(), strict=True):
                    query.setLowerBound(value, 0.0)
                    query.setUpperBound(value, max(0.0, top))
                    MarabouCore.addReluConstraint(query, unit, value)
                inputs = z
            else:
                inputs = h
        output = inputs[0]
        if self.goal == 1:
            query.setLowerBound(output, max(query.getLowerBound(output), problem.threshold + problem.epsilon))
        else:
            query.setUpperBound(output, min(query.getUpperBound(output), problem.threshold - margin))
        query.markOutputVariable(output, 0)
        if query.getLowerBound(output) > query.getUpperBound(output):  # the bounds alone rule the goal out
            self.raw = "unsat (bounds)"
            return None
        options = Marabou.createOptions(timeoutInSeconds=max(1, math.ceil(left)), verbosity=0)
        self.calls += 1
        exit_code, values, _ = MarabouCore.solve(query, options)
        self.raw = exit_code
        if exit_code == "unsat":
            return None
        if exit_code == "TIMEOUT":
            raise hitting.OracleTimeout(exit_code)
        if exit_code != "sat":
            raise _Stopped(exit_code)
        y = np.array([values[i] for i in range(n)], dtype=np.float64)
        movable = np.isin(np.arange(n), sorted(free))
        return np.where(movable, np.clip(y, lower, upper), x)

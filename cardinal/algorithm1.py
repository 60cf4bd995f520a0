"""Algorithm 1 of the paper (greedy CXps of monotone networks) and its dual for AXps, as written:
one model call at a time, in float (`FloatCalls`) or in exact arithmetic (`ExactCalls`).

`reference_row` is one row of the algorithm; `cardinal.greedy.explain_reference` runs it over a
batch as the baseline of the batched explainer, and `explain_exactly` answers small questions
with it in exact arithmetic alone: the same answers as `cardinal.greedy.explain(verify=True)`,
which re-checks its float answers against exactly this algorithm, without loading torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .domain import Domain
from .errors import InputError, Undecided
from .exact import ExactNetwork, Score, exact_blocks, modified_inputs
from .lazy import lazy_import
from .network import Network
from .prediction import threshold_for
from .problem import KINDS, shortcut

torch = lazy_import("torch")  # FloatCalls only


def validated(
    net: Network, X: Any, kind: str, domain: Domain | None, threshold: float | None
) -> tuple[np.ndarray, Domain, Network, float]:
    """Checked inputs [B, n], the domain, the single-output network greedy runs on (the logit
    difference for K = 2) and its threshold (0 for K = 2, which takes none)."""
    if kind not in KINDS:
        raise InputError(f"unknown kind {kind!r} (use contrastive or abductive)")
    problem = net.sign_monotonicity_problem()
    if problem:
        raise InputError(
            f"greedy explanations need a sign-monotone network, and this one is not: {problem}. "
            "Use `cardinal certify` or solvers.solve_minimum, which give the exact minimum, or the deletion explainer "
            "(`cardinal explain --method deletion`)."
        )
    threshold = threshold_for(net.n_outputs, threshold)
    domain = domain if domain is not None else Domain.unit(net.n_inputs)
    if domain.n != net.n_inputs:
        raise InputError(f"domain has {domain.n} features, the network has {net.n_inputs} inputs")
    return domain.check(X), domain, net.logit_difference(), 0.0 if threshold is None else threshold


class FloatCalls:
    """Algorithm 1's model calls in float: f(y) as a float, compared and sorted as floats."""

    def __init__(self, module: torch.nn.Module, dtype: torch.dtype, threshold: float) -> None:
        self.module, self.dtype, self.threshold = module, dtype, threshold

    def score(self, y: np.ndarray) -> float:
        with torch.no_grad():
            return float(self.module(torch.tensor(y, dtype=self.dtype)[None, :])[0, 0])

    def decide(self, score: float) -> int:
        """The prediction for a point with this score."""
        return int(score > self.threshold)

    def predict(self, y: np.ndarray) -> int:
        return self.decide(self.score(y))

    def order(self, scores: list[float], ascending: bool) -> list[int]:
        """The stable sort of line 9 (ties by lower index)."""
        return sorted(range(len(scores)), key=lambda j: scores[j] if ascending else -scores[j])

    def value(self, score: float) -> float:
        return score


class ExactCalls:
    """Algorithm 1's model calls in exact arithmetic (`cardinal.exact`): scores are exact enclosures,
    ordered only where exact arithmetic decides (`exact_blocks`); `Undecided` where it does not."""

    def __init__(self, model: ExactNetwork, threshold: float) -> None:
        self.model, self.threshold = model, Fraction(threshold)

    def score(self, y: np.ndarray) -> Score:
        return self.model.scores(y[None, :])[0]

    def decide(self, score: Score) -> int:
        """The prediction for a point with this score; `Undecided` when its enclosure contains t."""
        enclosure = score.enclosure
        decided = enclosure.predict(self.threshold)
        if decided is None:
            raise Undecided(f"output enclosure [{_approximate(enclosure.lower)}, {_approximate(enclosure.upper)}] contains t")
        return decided

    def predict(self, y: np.ndarray) -> int:
        return self.decide(self.score(y))

    def order(self, scores: list[Score], ascending: bool) -> list[int]:
        blocks = exact_blocks(dict(enumerate(scores)), ascending)
        tangled = [block for block in blocks if len(block) > 1]
        if tangled:
            raise Undecided(f"the order of the scores of features {sorted(j for c in tangled[0] for j in c)} is undecided")
        return [j for (features,) in blocks for j in features]

    def value(self, score: Score) -> float:
        """f as a float, for display only."""
        return _approximate((score.enclosure.lower + score.enclosure.upper) / 2)


def _approximate(value: Fraction) -> float:
    """value as the nearest float, ±inf beyond the double range: for display, never a decision."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def reference_row(
    calls: FloatCalls | ExactCalls, x: np.ndarray, kind: str, domain: Domain, directions: np.ndarray | None
) -> tuple[tuple[int, ...] | None, int, float, list[int]]:
    """One row of Algorithm 1 (or its dual): (features or None, prediction, f(x), greedy order)."""
    n = x.shape[0]
    score = calls.score(x)
    prediction = calls.decide(score)
    counterpoint = domain.counterpoint(np.array([prediction]), directions)[0]
    base, target, goal = shortcut(kind, x, counterpoint, prediction)
    scores = [calls.score(modified_inputs(base, [j], target)) for j in range(n)]
    # Line 9: ascending when the starting point predicts 1 (x for CXp, x' for AXp, where p(x') ≠ p(x)).
    order = calls.order(scores, ascending=(prediction == 1) == (kind == "contrastive"))
    output = calls.value(score)
    if kind == "abductive" and calls.predict(counterpoint) == prediction:
        return (), prediction, output, order  # constant prediction on the box: ∅ is the AXp
    chosen: list[int] = []
    for j in order:
        chosen.append(j)
        if calls.predict(modified_inputs(base, chosen, target)) == goal:
            return tuple(sorted(chosen)), prediction, output, order
    return None, prediction, output, order


@dataclass(frozen=True)
class ExactAnswer:
    """Algorithm 1's answer to one row in exact arithmetic: p(x) (0/1; for K = 2 the class), f(x)
    rounded to a float (f_1 − f_0 for K = 2), and the explanation as sorted feature indices, None
    when no CXp exists. `witness` [n]: for a CXp, x with the set moved to the counterpoint x' (the
    monotone shortcut's point, predicted differently from x); else None."""

    prediction: int
    output: float
    features: tuple[int, ...] | None
    witness: tuple[float, ...] | None


def exact_work(net: Network, rows: int) -> int:
    """About how many rational multiply-adds `explain_exactly` spends on `rows` inputs of `net`:
    2n + 2 exact forward passes per row (n scores, the prefixes, x and x')."""
    parameters = sum(layer.weight.size for layer in net.layers)
    return rows * (2 * net.n_inputs + 2) * parameters


def explain_exactly(
    net: Network, X: Any, kind: str, domain: Domain | None = None, threshold: float | None = None
) -> list[ExactAnswer]:
    """Algorithm 1 (or its dual) in exact arithmetic for inputs X [B, n] of a sign-monotone
    piecewise-linear network: per row what `cardinal.greedy.explain(..., verify=True)` answers
    (check "exact"). Raises `InputError` as `explain` does, and for a smooth network (whose exact
    enclosures may leave a row undecided: use `explain`)."""
    X_checked, domain, single, t = validated(net, X, kind, domain, threshold)
    if not single.is_piecewise_linear:
        raise InputError("explain_exactly takes piecewise-linear networks; use cardinal.greedy.explain")
    calls = ExactCalls(ExactNetwork(single), t)
    answers = []
    for x in X_checked:
        features, prediction, output, _ = reference_row(calls, x, kind, domain, single.directions)
        witness = None
        if kind == "contrastive" and features is not None:
            counterpoint = domain.counterpoint(np.array([prediction]), single.directions)[0]
            witness = tuple(modified_inputs(x, features, counterpoint).tolist())
        answers.append(ExactAnswer(prediction, output, features, witness))
    return answers

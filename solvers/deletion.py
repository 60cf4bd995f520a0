"""The sequential deletion explainer (as VeriX and other formal explainers use it): a
*subset-minimal* explanation of any network, each step decided exactly.

`deletion(problem, oracle, time_limit)` traverses the n features once, in the sensitivity order
below, and asks one exact set question per step, "is there a y in the box, equal to x off the
free features F, with p(y) ≠ p(x)?" (`solvers.oracle`):

* **AXp.** S starts as every feature (F = ∅: y = x, nothing to ask). Step i frees i: no y flips
  with F ∪ {i} free → i leaves S (F grows); some y flips → i stays in S.
* **CXp.** S starts as every feature, if freeing them all flips (one question: no flip means no
  CXp exists). Step i fixes i back to x_i: some y flips with S \\ {i} free → i leaves S (and that
  y becomes the witness); none flips → i stays in S. The witness of the answer is the flipping
  point of its last question, replayed exactly once more at the end.

Both properties are closed upwards (a superset of an AXp is an AXp, of a CXp a CXp), so the
answer is **subset-minimal**: each i it keeps was needed when judged, and a proper subset of the
answer without i lies inside the set judged then. It is *not* cardinality-minimal in general:
certify and crosscheck compare it with the exact minimum.

**Order** (deterministic, exact): feature i's sensitivity is the smallest margin of p(x) over the
two points x with x_i set to l_i and to u_i (the box's ends), computed exactly (`cardinal.exact`;
for smooth networks the enclosure's lower end). The margin is f(y) − t when p(x) = 1 and
t − f(y) when p(x) = 0 (K = 1), f_c(y) − max_{j≠c} f_j(y) for c = p(x) (K ≥ 2). Features go by
this smallest margin, largest first — the least sensitive feature is judged first, so the
features that matter least leave the set first — ties by lower index.

**Exactness.** Each step is decided by the exact set oracle (exact interval bounds first, then
enumerate on small binary boxes, the exact MILP's flip search and z3 on piecewise-linear
networks, K ≥ 2 classes included, each engine in a guarded child process), or, on a monotone network, by the
monotone shortcut (one exact evaluation of x with F set to the counterpoint x': it flips iff
some y does). A step that neither decides (a limit, a smooth network the oracle cannot encode, an
undecided enclosure) ends the run with status `unknown` and no set: nothing is guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from cardinal.exact import Enclosure, modified_inputs
from cardinal.problem import Kind, Problem

from .oracle import Flip, SetOracle, check_witness

METHOD = "deletion"
SUBSET_MINIMAL, NONE_EXISTS, UNKNOWN = "subset_minimal", "none_exists", "unknown"


@dataclass(frozen=True)
class Step:
    """One question of the run: `feature` judged (None: the CXp's first question, every feature
    free: "kept" when it flips, else "none_exists"), its `verdict` — "removed" (it leaves the
    set), "kept", or "undecided" — and the
    `engine` that decided it (shortcut, enumerate, exact-milp, z3, definition) or why none did."""

    feature: int | None
    verdict: str
    engine: str


@dataclass(frozen=True)
class Deletion:
    """The answer of `deletion`. `status`: subset_minimal (`features` is a subset-minimal
    explanation of `kind`), none_exists (no CXp at all) or unknown (a step was undecided: no
    set). `prediction`: p(x). `witness` [n]: for a CXp, a point of the box equal to x off `features` whose prediction
    differs from p(x), replayed exactly. `order` [n]: the sensitivity order; `steps`: every
    question in the order asked; `queries`: how many went to the oracle or the shortcut."""

    kind: str
    prediction: int
    status: str
    features: tuple[int, ...] | None
    witness: tuple[float, ...] | None
    order: tuple[int, ...]
    steps: tuple[Step, ...]
    queries: int
    note: str = ""
    method: str = METHOD


def deletion(problem: Problem, oracle: SetOracle, time_limit: float) -> Deletion:
    """The subset-minimal explanation of `problem` (module docstring); each oracle question gets
    `time_limit` seconds (> 0)."""
    order = _sensitivity_order(problem)
    return _Run(problem, oracle, time_limit).explain(order)


def _sensitivity_order(problem: Problem) -> tuple[int, ...]:
    """The features [n] least sensitive first (module docstring), ties by lower index."""
    n, x = problem.n, problem.x
    ends = np.concatenate([np.tile(x, (n, 1)), np.tile(x, (n, 1))])
    ends[np.arange(n), np.arange(n)] = problem.domain.lower
    ends[n + np.arange(n), np.arange(n)] = problem.domain.upper
    margins = [_margin(outputs, problem) for outputs in problem.exact.outputs(ends)]
    worst = [min(margins[i], margins[n + i]) for i in range(n)]
    return tuple(sorted(range(n), key=lambda i: (-worst[i], i)))


def _margin(outputs: tuple[Enclosure, ...], problem: Problem) -> Fraction:
    """An exact lower bound of the margin of p(x) at a point with these output enclosures."""
    c = problem.prediction
    if problem.classes == 1:
        f = outputs[0]
        return f.lower - problem.exact_threshold if c == 1 else problem.exact_threshold - f.upper
    return outputs[c].lower - max(o.upper for j, o in enumerate(outputs) if j != c)


class _Run:
    """One run of the algorithm: the questions, counted and recorded."""

    def __init__(self, problem: Problem, oracle: SetOracle, time_limit: float) -> None:
        self.problem, self.oracle, self.time_limit = problem, oracle, time_limit
        self.steps: list[Step] = []
        self.queries = 0

    def explain(self, order: tuple[int, ...]) -> Deletion:
        everything = frozenset(range(self.problem.n))
        if self.problem.kind == Kind.ABDUCTIVE:
            free: frozenset[int] = frozenset()
            for i in order:
                flip = self._ask(i, free | {i})
                if flip.answer is None:
                    return self._unknown(order, i, flip)
                free = free if flip.answer else free | {i}
            return self._done(order, tuple(sorted(everything - free)), None)
        first = self._ask(None, everything)
        if first.answer is None:
            return self._unknown(order, None, first)
        if not first.answer:
            return self._result(order, NONE_EXISTS)
        chosen, witness = everything, first.witness
        for i in order:
            flip = self._ask(i, chosen - {i})
            if flip.answer is None:
                return self._unknown(order, i, flip)
            if flip.answer:
                chosen, witness = chosen - {i}, flip.witness
        return self._done(order, tuple(sorted(chosen)), witness)

    def _ask(self, feature: int | None, free: frozenset[int]) -> Flip:
        """Does some y, equal to x off `free`, flip the prediction? Recorded as the step of
        `feature` (its verdict from the kind: a flip keeps an AXp's feature, removes a CXp's)."""
        flip = self._flip(free)
        if flip.answer is None:
            verdict = "undecided"
        elif feature is None:
            verdict = "kept" if flip.answer else "none_exists"
        else:
            verdict = "kept" if flip.answer == (self.problem.kind == Kind.ABDUCTIVE) else "removed"
        self.steps.append(Step(feature, verdict, flip.note))
        return flip

    def _flip(self, free: frozenset[int]) -> Flip:
        problem = self.problem
        if not free:
            return Flip(False, None, "definition")  # y = x
        self.queries += 1
        if not problem.monotone:
            return self.oracle.flip(problem, free, self.time_limit)
        y = modified_inputs(problem.x, sorted(free), problem.counterpoint)
        flips = problem.flips(y)
        if flips is None:
            return Flip(None, None, "shortcut: the exact enclosure is undecided (smooth margin)")
        return Flip(flips, tuple(y.tolist()) if flips else None, "shortcut")

    def _unknown(self, order: tuple[int, ...], feature: int | None, flip: Flip) -> Deletion:
        judged = "the first question (every feature free)" if feature is None else f"feature {feature}"
        note = f"deletion stopped at {judged}: undecided ({flip.note})"
        return self._result(order, UNKNOWN, note=note)

    def _done(self, order: tuple[int, ...], features: tuple[int, ...], witness: tuple[float, ...] | None) -> Deletion:
        if self.problem.kind == Kind.CONTRASTIVE:
            valid, reason = check_witness(self.problem, frozenset(features), witness)
            if not valid:  # never expected: every witness was checked exactly when it was found
                note = f"deletion's witness {reason}"
                return self._result(order, UNKNOWN, note=note)
        return self._result(order, SUBSET_MINIMAL, features, witness)

    def _result(
        self,
        order: tuple[int, ...],
        status: str,
        features: tuple[int, ...] | None = None,
        witness: tuple[float, ...] | None = None,
        note: str = "",
    ) -> Deletion:
        problem = self.problem
        return Deletion(problem.kind, problem.prediction, status, features, witness, order, tuple(self.steps), self.queries, note)

"""`Cvc5Solver`: exact answers from cvc5 over the rationals (piecewise-linear networks).

cvc5 reads the SMT-LIB text of `solvers.smtlib` (the file `cardinal export --format smt2`
writes, less its size bound) through its own parser, once per call. The search then goes down
in size as z3's full encoding does: a set of size j found, the next question is "≤ j − 1?",
each bound behind a guard literal of its own on one incremental solver, until unsat proves the
last set minimum (a limit first: FEASIBLE with the last set, or TIMEOUT). The shortcut answers
of monotone networks come first (p(x') = p(x): no CXp, the empty AXp). AXps of non-monotone
networks go to the implicit hitting sets of `solvers.hitting`, cvc5 as the flip oracle (the
size bound left out, the selectors outside the free set assumed false).

cvc5's arithmetic is exact, so `exact` is true: its "nothing smaller" is a proof. Its witness on
a real box (non-monotone networks) is exact too but may hold rationals that are no doubles (1/3)
and sit on the boundary f = t, where rounding to doubles may undo the flip. Such a point is asked
for once more, for the same set, with the output ε off the threshold (`f ≥ t + ε` or
`f ≤ t − ε`; with K ≥ 2 outputs, some other class's output ε above that of p(x): ε of the
problem, as the MILPs' margins; that query's unsat proves nothing), and its
rounding taken if it flips exactly. Otherwise the rounded point stands: the exact replay
(`solvers.base.replay`, the exact set oracle) then decides a CXp's set, and in the AXp search a
point that does not flip ends the search with ERROR (`hitting`).
"""

from __future__ import annotations

import time
from dataclasses import replace
from fractions import Fraction

import cvc5
import numpy as np

from cardinal.problem import Outcome, Problem, Status, stopped

from . import hitting
from .base import BaseSolver
from .guard import report_incumbent
from .smtlib import OUTPUT, encode_smtlib, number, point, selector, size_term, supported


class Cvc5Solver(BaseSolver):
    """cvc5 backend (module docstring)."""

    name = "cvc5"
    exact = True

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        started = time.perf_counter()
        deadline = started + time_limit
        reason = supported(replace(problem, kind="contrastive") if not problem.monotone else problem)
        if reason is not None:
            return self.outcome(Status.UNSUPPORTED, started, message=reason)
        if problem.monotone and (unmoved := self.unmoved(problem, started)) is not None:
            return unmoved
        if problem.kind == "abductive" and not problem.monotone:
            query = _Query(replace(problem, kind="contrastive"))  # the free box, asked with assumptions
            result = hitting.minimum_abductive(problem, query.find_flip, at_most, deadline, self.supply)
            fields = {"solution": result.solution, "raw_status": query.raw, "message": result.message, "lemmas": result.lemmas,
                      "lower": result.lower}
            return self.outcome(result.status, started, **fields)
        return self.outcome(**_descend(_Query(problem), at_most, deadline), started=started)


def _descend(query: _Query, at_most: int | None, deadline: float) -> dict:
    """Sizes downwards from `at_most` (or n): the Outcome fields (status, solution, witness, raw_status)."""
    n = query.problem.n
    bound = n if at_most is None else min(at_most, n)
    best: tuple[int, ...] | None = None
    witness: tuple[float, ...] | None = None
    while bound >= 1:  # the empty set is never a CXp, nor here an AXp (the shortcut answered that)
        answer = query.check(bound, deadline)
        if answer is None:
            status, kept = stopped(best, at_most)
            return {"status": status, "solution": kept, "witness": witness if kept else None, "raw_status": query.raw}
        if answer is False:
            break
        best, witness = answer
        report_incumbent(best, witness)
        bound = len(best) - 1
    if best is None:
        status = Status.NONE_EXISTS if at_most is None or at_most >= n else Status.NONE_WITHIN
        return {"status": status, "raw_status": query.raw}
    return {"status": Status.OPTIMAL, "solution": best, "witness": witness, "raw_status": query.raw}


class _Query:
    """One problem loaded into an incremental cvc5 solver: `check(bound)` for sets within a
    bound, `find_flip(free)` for the flip oracle."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.terms = cvc5.TermManager()
        self.solver = cvc5.Solver(self.terms)
        for key, value in (("incremental", "true"), ("produce-models", "true"), ("seed", "0")):
            self.solver.setOption(key, value)
        self.symbols = cvc5.SymbolManager(self.terms)
        self.parser = cvc5.InputParser(self.solver, self.symbols)
        self._run(encode_smtlib(problem) + f"(define-fun size () Real {size_term(problem.n)})\n")
        declared = {term.getSymbol(): term for term in self.symbols.getDeclaredTerms()}
        self.chosen = [declared[selector(i)] for i in range(problem.n)]
        self.points = [declared[point(i)] for i in range(problem.n)]
        self.guards: dict[int, cvc5.Term] = {}
        self.raw = ""

    def _run(self, text: str) -> None:
        """Parse SMT-LIB commands and run them on the solver (declarations stay in `symbols`)."""
        self.parser.setIncrementalStringInput(cvc5.InputLanguage.SMT_LIB_2_6, "cardinal")
        self.parser.appendIncrementalStringInput(text)
        while not (command := self.parser.nextCommand()).isNull():
            command.invoke(self.solver, self.symbols)

    def _check(self, assumptions: list[cvc5.Term], deadline: float) -> bool | None:
        """True (sat), False (unsat) or None (a limit, or cvc5 gave up); `raw` says which."""
        left = deadline - time.perf_counter()
        if left <= 0:
            self.raw = "unknown (deadline)"
            return None
        self.solver.setOption("tlimit-per", str(max(1, int(left * 1000))))
        result = self.solver.checkSatAssuming(*assumptions)
        if result.isUnknown():
            self.raw = f"unknown ({result.getUnknownExplanation()})"
            return None
        self.raw = "sat" if result.isSat() else "unsat"
        return result.isSat()

    def check(self, bound: int, deadline: float) -> tuple[tuple[int, ...], tuple[float, ...] | None] | bool | None:
        """A set within `bound` and its witness (None on monotone networks), False (none), None (no verdict)."""
        if bound not in self.guards:
            self._run(f"(declare-fun at_most_{bound} () Bool)\n(assert (=> at_most_{bound} (<= size {bound})))\n")
            self.guards[bound] = next(t for t in self.symbols.getDeclaredTerms() if t.getSymbol() == f"at_most_{bound}")
        sat = self._check([self.guards[bound]], deadline)
        if not sat:
            return sat
        solution = tuple(i for i, s in enumerate(self.chosen) if self.solver.getValue(s).getBooleanValue())
        if self.problem.monotone:
            return solution, None
        return solution, tuple(self._point(frozenset(solution), deadline).tolist())

    def find_flip(self, free: frozenset[int], deadline: float) -> np.ndarray | None:
        """The flip oracle of `hitting.minimum_abductive`: a y [n] that agrees with x off `free`
        and flips the prediction (its coordinates rounded to doubles), or None."""
        sat = self._check(self._fixed(free), deadline)
        if sat is None:
            raise hitting.OracleTimeout(self.raw)
        return self._point(free, deadline) if sat else None

    def _fixed(self, free: frozenset[int]) -> list[cvc5.Term]:
        """Assumptions: every selector outside `free` false."""
        return [self.terms.mkTerm(cvc5.Kind.NOT, s) for i, s in enumerate(self.chosen) if i not in free]

    def _point(self, free: frozenset[int], deadline: float) -> np.ndarray:
        """The last model's y [n] rounded to doubles; where it does not flip exactly, the point of
        the query with a margin (module docstring) when that one does."""
        y = self._rounded()
        if self.problem.flips(y) is not False:
            return y
        self.solver.push()
        try:
            self._run(self._margin())
            raw = self.raw
            if self._check(self._fixed(free), deadline):
                second = self._rounded()
                y = second if self.problem.flips(second) else y
            self.raw = raw
        finally:
            self.solver.pop()
        return y

    def _margin(self) -> str:
        """The assertion that puts the outputs ε past the boundary, toward a change of class: one
        output f ≥ t + ε (class 0 at x) or f ≤ t − ε (class 1); K ≥ 2 outputs f0 … f{K−1}, class
        c at x: some other output f_j ≥ f_c + ε (a tie no longer decides it)."""
        p, epsilon = self.problem.prediction, Fraction(self.problem.epsilon)
        if self.problem.classes > 1:
            beyond = [f"(>= f{j} (+ f{p} {number(epsilon)}))" for j in range(self.problem.classes) if j != p]
            return f"(assert (or {' '.join(beyond)}))\n" if len(beyond) > 1 else f"(assert {beyond[0]})\n"
        t = Fraction(self.problem.threshold)
        return f"(assert (>= {OUTPUT} {number(t + epsilon)}))\n" if p == 0 else f"(assert (<= {OUTPUT} {number(t - epsilon)}))\n"

    def _rounded(self) -> np.ndarray:
        """The last model's y [n], each value rounded to the nearest double."""
        return np.array([float(Fraction(self.solver.getValue(p).getRealValue())) for p in self.points], dtype=np.float64)

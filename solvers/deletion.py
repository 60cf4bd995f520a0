"""The sequential deletion explainer (as VeriX and other formal explainers use it): a
*subset-minimal* explanation of any network, each step decided exactly.

`deletion(problem, oracle, time_limit, traversal)` traverses the n features once, in an order
(below), and asks exact set questions, "is there a y in the box, equal to x off the free
features F, with p(y) ≠ p(x)?" (`solvers.oracle`), one per step:

* **AXp.** S starts as every feature (F = ∅: y = x, nothing to ask). The first question frees
  every feature at once: no y flips → the AXp is ∅ (p is constant on the box), the answer in one
  question; some y flips, or no engine decides (a limit), → the traversal. Step i frees i: no y
  flips with F ∪ {i} free → i leaves S (F grows); some y flips → i stays in S.
* **CXp.** S starts as every feature, if freeing them all flips (one question: no flip means no
  CXp exists). Step i fixes i back to x_i: some y flips with S \\ {i} free → i leaves S (and that
  y becomes the witness); none flips → i stays in S. The witness of the answer is the flipping
  point of its last question, replayed exactly once more at the end.

Both properties are closed upwards (a superset of an AXp is an AXp, of a CXp a CXp), so the
answer is **subset-minimal**: each i it keeps was needed when judged, and a proper subset of the
answer without i lies inside the set judged then. It is *not* cardinality-minimal in general:
certify and crosscheck compare it with the exact minimum.

The cheap question comes first in both kinds: the one question "can every feature be freed?"
(AXp: is ∅ an AXp; CXp: does any CXp exist) settles a robust prediction (no flip in the box: AXp
∅, no CXp) before any traversal, where feature by feature would ask n questions.

**Traversals** (`TRAVERSALS`): "index" judges the features one by one in index order;
"sensitivity" (the default, as VeriX) one by one in the sensitivity order below; "quickxplain"
(VeriX+'s binary search) judges blocks of the sensitivity order, starting from the whole order:
one question asks whether every feature of the block can leave at once (AXp: F ∪ block free; CXp:
S \\ block free); yes → they all leave; no → the block's two halves are judged in turn (a single
feature that cannot leave stays). Since the properties are closed upwards, a block leaves only
when each of its features would have left one by one, so the answer is the sensitivity
traversal's, in fewer questions where most features leave; where most stay, each block that cannot
leave costs a question of its own, up to about twice one per feature, so sensitivity stays the
default (bench/results/traversals.md compares them). A question asked again (a block's
second half, once its first half left, has its parent's free set; the AXp's last feature one by
one, once every other one left, the first question's) takes the earlier answer. The AXp's first
question is quickxplain's first block: the sequential traversals record it as a block of the
whole order ("removed": the answer ∅; "split": some y flips, the features come one by one next).

**Order** (deterministic, exact): feature i's sensitivity is the smallest margin of p(x) over the
two points x with x_i set to l_i and to u_i (the box's ends), computed exactly (`cardinal.exact`;
for smooth networks the enclosure's lower end). The margin is f(y) − t when p(x) = 1 and
t − f(y) when p(x) = 0 (K = 1), f_c(y) − max_{j≠c} f_j(y) for c = p(x) (K ≥ 2). Features go by
this smallest margin, largest first — the least sensitive feature is judged first, so the
features that matter least leave the set first — ties by lower index. The 2n points are
evaluated in chunks of at most `SENSITIVITY_CHUNK` values (memory linear in n), and the order is
refused before any of them (InputError naming `MAX_SENSITIVITY_WORK`) where 2n evaluations of
the network would take more multiply-adds than that: the "index" traversal needs no order.

**Exactness.** Each step is decided by the exact set oracle (exact interval bounds first, then
an exact linear-relaxation bound and points replayed exactly, then enumerate on small binary
boxes, the exact MILP's flip search and z3 on piecewise-linear networks, K ≥ 2 classes included,
each engine in a guarded child process), or, on a monotone network, by the monotone shortcut
(one exact evaluation of x with F set to the counterpoint x': it flips iff some y does). A step
that neither decides (a limit, a smooth network the oracle cannot encode, an undecided
enclosure) ends the run with status `unknown` and no answer: nothing is guessed. What the run had
shown by then stays as `found`, an exactly valid set that is not shown subset-minimal: for an AXp
the features not removed (every feature where none was: all n always form an AXp), for a CXp the
set still free at the last flip, with that flip's witness replayed exactly (`found_witness`; none
where the first question was undecided). Certify takes it as an upper bound on the minimum.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from cardinal.deadline import SPENT, Deadline
from cardinal.errors import InputError, Unproved
from cardinal.exact import Enclosure, modified_inputs
from cardinal.problem import Kind, Problem

from .oracle import Flip, SetOracle, check_witness

METHOD = "deletion"
TRAVERSALS = ("index", "sensitivity", "quickxplain")
SENSITIVITY_CHUNK = 1 << 22  # input values (rows × n) of the order's points evaluated at once
MAX_SENSITIVITY_WORK = 1 << 36  # multiply-adds of the order's 2n evaluations (2n × parameters) allowed
ASKED_BEFORE = "asked before"  # a step's engine where an earlier question with the same free set answered it
SUBSET_MINIMAL, NONE_EXISTS, UNKNOWN = "subset_minimal", "none_exists", "unknown"
STOPPED = "stopped"  # the call's time limit passed: the best exactly valid set known, not shown subset-minimal


@dataclass(frozen=True)
class Step:
    """One question of the run: `feature` judged (None: the CXp's first question, every feature
    free: "kept" when it flips, else "none_exists"), its `verdict` — "removed" (it leaves the
    set), "kept", or "undecided" — and the
    `engine` that decided it (shortcut, enumerate, exact-milp, z3, definition) or why none did.
    `block` [k]: the features judged together (quickxplain: "removed" removes them all, "split"
    — the block's question flipped — judges its halves next; index and sensitivity: the AXp's
    first question, the whole order, "split" or "undecided" judges the features one by one next);
    (feature,) for a single one."""

    feature: int | None
    verdict: str
    engine: str
    block: tuple[int, ...] = ()


@dataclass(frozen=True)
class Deletion:
    """The answer of `deletion`. `status`: subset_minimal (`features` is a subset-minimal
    explanation of `kind`), none_exists (no CXp at all), stopped (the call's deadline passed:
    `features` is the best exactly valid explanation known then — for an AXp the features not
    removed, for a CXp the set still chosen with its witness — not shown subset-minimal) or
    unknown (a step was undecided: no set). `prediction`: p(x). `witness` [n]: for a CXp, a
    point of the box equal to x off `features` whose prediction differs from p(x), replayed exactly.
    `order` [n]: the sensitivity order; `steps`: every question in the order asked;
    `queries`: how many went to the oracle or the shortcut. `found`: where the run stopped
    unknown, the exactly valid set it had shown (module docstring; None where it had shown none),
    with `found_witness` [n] for a CXp."""

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
    traversal: str = "sensitivity"
    found: tuple[int, ...] | None = None
    found_witness: tuple[float, ...] | None = None

    @property
    def removed(self) -> frozenset[int]:
        """The features that left the set (every "removed" step's block). For an AXp this holds
        even where the run stopped `unknown`: the features not removed form an AXp, exactly valid
        (the last removal's question proved that they keep p(x) with every other feature free),
        though not shown subset-minimal."""
        return frozenset(j for step in self.steps if step.verdict == "removed" for j in step.block)


def deletion(
    problem: Problem, oracle: SetOracle, time_limit: float, traversal: str = "sensitivity", deadline: Deadline | None = None
) -> Deletion:
    """The subset-minimal explanation of `problem` (module docstring); each oracle question gets
    `time_limit` seconds (> 0), or the time left before `deadline` (the call's budget,
    `cardinal.deadline`) when that is less. Once the deadline has passed no question is asked:
    the run ends `stopped` with the best exactly valid set known (`Deletion`), or `unknown` where
    it holds none (a CXp whose first question was not answered). `traversal`: one of
    `TRAVERSALS` (module docstring)."""
    if traversal not in TRAVERSALS:
        raise ValueError(f"unknown traversal {traversal!r} (use {', '.join(TRAVERSALS)})")
    order = tuple(range(problem.n)) if traversal == "index" else _sensitivity_order(problem)
    return _Run(problem, oracle, time_limit, traversal, deadline or Deadline.never()).explain(order)


def sensitivity_work(problem: Problem) -> int:
    """Multiply-adds of the sensitivity order's 2n exact evaluations: 2n × the network's parameters."""
    parameters = sum(layer.weight.size + layer.bias.size for layer in problem.net.layers)
    return 2 * problem.n * parameters


def _sensitivity_order(problem: Problem) -> tuple[int, ...]:
    """The features [n] least sensitive first (module docstring), ties by lower index; InputError
    before any evaluation where their work is past `MAX_SENSITIVITY_WORK`."""
    n, x = problem.n, problem.x
    if (work := sensitivity_work(problem)) > MAX_SENSITIVITY_WORK:
        raise InputError(
            f"the sensitivity order (traversal sensitivity or quickxplain) evaluates the network at 2 × {n:,} points: "
            f"{work:,} multiply-adds, past the {MAX_SENSITIVITY_WORK:,} allowed; use traversal index"
        )
    rows = max(1, SENSITIVITY_CHUNK // n)
    worst: list[Fraction] = []
    for start in range(0, n, rows):
        features = np.arange(start, min(n, start + rows))
        lows, highs = np.tile(x, (len(features), 1)), np.tile(x, (len(features), 1))
        lows[np.arange(len(features)), features] = problem.domain.lower[features]
        highs[np.arange(len(features)), features] = problem.domain.upper[features]
        low, high = problem.exact.outputs(lows), problem.exact.outputs(highs)
        worst += [min(_margin(a, problem), _margin(b, problem)) for a, b in zip(low, high, strict=True)]
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

    def __init__(self, problem: Problem, oracle: SetOracle, time_limit: float, traversal: str, deadline: Deadline) -> None:
        self.problem, self.oracle, self.time_limit, self.traversal = problem, oracle, time_limit, traversal
        self.deadline = deadline
        self.steps: list[Step] = []
        self.queries = 0
        self.answered: dict[frozenset[int], Flip] = {}  # each decided question's answer, by its free set
        self.witness: tuple[float, ...] | None = None  # a CXp's: the last flip's point (its set: `chosen`)

    def explain(self, order: tuple[int, ...]) -> Deletion:
        everything = frozenset(range(self.problem.n))
        self.abductive = self.problem.kind == Kind.ABDUCTIVE
        if self.abductive:
            self.free: frozenset[int] = frozenset()
        else:
            first = self._ask(None, everything)
            if first.answer is None:  # no set held yet: unknown, also at the deadline
                return self._unknown(order, None, first)
            if not first.answer:
                return self._result(order, NONE_EXISTS)
            self.chosen, self.witness = everything, first.witness
        blocks = [order] if self.traversal == "quickxplain" else [(i,) for i in order]
        if self.abductive and self.traversal != "quickxplain" and len(order) > 1:
            blocks = self._everything_free(order)
        try:
            while blocks:
                blocks[:0] = self._judge(blocks.pop(0))
        except _Undecided as undecided:
            if self.deadline.passed():
                return self._stopped(order)
            return self._unknown(order, undecided.feature, undecided.flip)
        if self.abductive:
            return self._done(order, tuple(sorted(everything - self.free)), None)
        return self._done(order, tuple(sorted(self.chosen)), self.witness)

    def _judge(self, block: tuple[int, ...]) -> list[tuple[int, ...]]:
        """Ask whether the features of `block` can all leave the set (AXp: freed with the free
        features; CXp: fixed back to x, the rest of the set still free); when they can, they
        leave. Returns the blocks still to judge: none, or the two halves of a block of two or
        more features whose question said no (a single feature that cannot leave stays)."""
        free = self.free | set(block) if self.abductive else self.chosen - set(block)
        flip = self._flip(free)
        if flip.answer is None:
            self.steps.append(Step(block[0] if len(block) == 1 else None, "undecided", flip.note, block))
            raise _Undecided(block[0] if len(block) == 1 else None, flip)
        leaves = flip.answer != self.abductive
        if leaves and self.abductive:
            self.free = free
        elif leaves:
            self.chosen, self.witness = free, flip.witness
        verdict = "removed" if leaves else "kept" if len(block) == 1 else "split"
        self.steps.append(Step(block[0] if len(block) == 1 else None, verdict, flip.note, block))
        return [] if leaves or len(block) == 1 else [block[: len(block) // 2], block[len(block) // 2 :]]

    def _everything_free(self, order: tuple[int, ...]) -> list[tuple[int, ...]]:
        """The AXp's first question in a sequential traversal: can every feature be freed at once?
        Returns the blocks still to judge: none (no y flips: every feature left, the AXp is ∅), else
        each feature of `order` alone — after a flip, or where no engine decided (a limit: the
        traversal goes on as if it had not been asked; its step stays "undecided")."""
        try:
            if not self._judge(order):
                return []
        except _Undecided:
            pass
        return [(i,) for i in order]

    def _ask(self, feature: int | None, free: frozenset[int]) -> Flip:
        """The CXp's first question: does some y, equal to x off `free` (every feature), flip?"""
        flip = self._flip(free)
        verdict = "undecided" if flip.answer is None else "kept" if flip.answer else "none_exists"
        self.steps.append(Step(feature, verdict, flip.note))
        return flip

    def _flip(self, free: frozenset[int]) -> Flip:
        """The answer for `free`: by definition (none free), from an earlier question with the
        same free set (quickxplain: a block's second half, once its first half left, asks its
        parent's question again), or asked of the shortcut or the oracle (counted)."""
        problem = self.problem
        if not free:
            return Flip(False, None, "definition")  # y = x
        if free in self.answered:
            return Flip(self.answered[free].answer, self.answered[free].witness, ASKED_BEFORE)
        if not problem.monotone and (limit := self.deadline.limit(self.time_limit)) <= 0:
            return Flip(None, None, f"not asked: {SPENT}")
        self.queries += 1
        if not problem.monotone:
            flip = self.oracle.flip(problem, free, limit)
        else:
            y = modified_inputs(problem.x, sorted(free), problem.counterpoint)
            flips = problem.flips(y)
            if flips is None:
                return Flip(None, None, "shortcut: the exact enclosure is undecided (smooth margin)")
            flip = Flip(flips, tuple(y.tolist()) if flips else None, "shortcut")
        if flip.answer is not None:
            self.answered[free] = flip
        return flip

    def _unknown(self, order: tuple[int, ...], feature: int | None, flip: Flip) -> Deletion:
        judged = "the first question (every feature free)" if feature is None else f"feature {feature}"
        if feature is None and self.steps and len(self.steps[-1].block) > 1:
            judged = f"a block of {len(self.steps[-1].block)} features"
        note = f"deletion stopped at {judged}: undecided ({flip.note})"
        return replace(self._result(order, UNKNOWN, note=note), **self._found())

    def _found(self) -> dict[str, tuple[int, ...] | tuple[float, ...] | None]:
        """The exactly valid set shown so far, for a run that stops unknown (`Deletion.found`)."""
        everything = frozenset(range(self.problem.n))
        if self.abductive:
            return {"found": tuple(sorted(everything - self.free))}
        if self.witness is None or check_witness(self.problem, frozenset(self.chosen), self.witness)[0] is not True:
            return {}
        return {"found": tuple(sorted(self.chosen)), "found_witness": self.witness}

    def _stopped(self, order: tuple[int, ...]) -> Deletion:
        """The run at the call's deadline: the best exactly valid set known (`Deletion`, stopped)."""
        everything = frozenset(range(self.problem.n))
        features = sorted(everything - self.free) if self.abductive else sorted(self.chosen)
        held = "the features not removed (an AXp" if self.abductive else "the set still chosen (a CXp, its witness replayed"
        note = f"deletion stopped at {SPENT}: {held}, exactly valid, not shown subset-minimal)"
        done = self._done(order, tuple(features), None if self.abductive else self.witness)
        if done.status != SUBSET_MINIMAL:
            return done
        return self._result(order, STOPPED, done.features, done.witness, note)

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
        return Deletion(
            problem.kind,
            problem.prediction,
            status,
            features,
            witness,
            order,
            tuple(self.steps),
            self.queries,
            note,
            METHOD,
            self.traversal,
        )


class _Undecided(Unproved):
    """A question that no engine decided: the run ends `unknown`."""

    def __init__(self, feature: int | None, flip: Flip) -> None:
        super().__init__(flip.note)
        self.feature, self.flip = feature, flip

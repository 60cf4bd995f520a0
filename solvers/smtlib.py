"""SMT-LIB 2 text (QF_LRA) of explanation questions: what `cardinal export --format smt2` writes,
and what the cvc5 backend (`solvers.cvc`) loads.

Every constant is the exact rational of its double, written `3`, `(- 3)`, `(/ 3 4)` or
`(- (/ 3 4))`, so a solver reading the file answers the question cardinal asks, with no rounding.
Symbols:

- `s0 … s{n−1}` (Bool): feature i is in the set;
- `y0 … y{n−1}` (Real): the input point. Monotone networks use the monotone shortcut:
  `y_i = (ite s_i target_i base_i)` (CXp: x → x'; AXp: x' → x). Other networks (CXps only) have
  `y_i` free in the box (`l_i ≤ y_i ≤ u_i`, or `y_i = l_i ∨ y_i = u_i` on a binary box) and tied
  to `x_i` unless `s_i`;
- `h{l}_{j}`, `z{l}_{j}` (Real): unit j of layer l (from 1), its pre-activation `h = W·z + b` and
  its value. A unit whose exact interval bounds (`ExactNetwork.layer_bounds` over the region y
  ranges over) keep it on one linear piece is that piece; another is an `ite` over its
  breakpoints inside the bounds, `(ite (>= h c) right left)` — exact for every piecewise-linear
  activation, a step's 1 being `h ≥ at` — and its bounds are asserted too (implied, a help to
  solvers);
- the output `f` (defined as layer L's unit) must reach the goal class: `(> f t)` for class 1,
  `(<= f t)` for class 0, strict where the semantics is; with K ≥ 2 outputs `f0 … f{K−1}`, the
  prediction must leave x's class c: `(>= fj fc)` for some j < c or `(> fj fc)` for some j > c.

`question` adds the cardinality `(<= (+ (ite s0 1 0) …) k)`: sat iff an explanation of size ≤ k
exists. AXps of non-monotone networks ("every y that agrees with x on S …") are universal
questions with no QF_LRA form; `encode_smtlib` refuses them, as it refuses smooth activations.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction

import numpy as np

from cardinal.activations import Activation
from cardinal.errors import InputError
from cardinal.prediction import overtakes_strictly
from cardinal.problem import Problem

LOGIC = "QF_LRA"
OUTPUT = "f"  # the network's output, a defined term


def number(value: Fraction | float | int) -> str:
    """An exact rational (a double is read exactly) as an SMT-LIB real term: 3, (- 3), (/ 3 4), (- (/ 3 4))."""
    value = Fraction(value)
    magnitude = abs(value)
    text = str(magnitude.numerator) if magnitude.denominator == 1 else f"(/ {magnitude.numerator} {magnitude.denominator})"
    return f"(- {text})" if value < 0 else text


def total(terms: Sequence[str]) -> str:
    """The sum of terms as one SMT-LIB term (`+` needs two arguments or more)."""
    if not terms:
        return "0"
    return terms[0] if len(terms) == 1 else f"(+ {' '.join(terms)})"


def selector(i: int) -> str:
    return f"s{i}"


def point(i: int) -> str:
    return f"y{i}"


def size_term(n: int) -> str:
    """|S| = Σ (ite s_i 1 0) over the n selectors."""
    return total([f"(ite {selector(i)} 1 0)" for i in range(n)])


def supported(problem: Problem) -> str | None:
    """Why the question has no QF_LRA form here, or None when it has one."""
    if not problem.net.is_piecewise_linear:
        return f"{problem.net.hidden_activation()} is not piecewise linear (QF_LRA holds linear arithmetic only)"
    if problem.kind == "abductive" and not problem.monotone:
        return "an AXp of a non-monotone network is a universal question (every y that agrees with x on S) with no QF_LRA form"
    return None


def encode_smtlib(problem: Problem) -> str:
    """The declarations and assertions of the module docstring (logic set, no size bound, no
    check-sat). Raises `InputError` where the question has no QF_LRA form (`supported`)."""
    reason = supported(problem)
    if reason is not None:
        raise InputError(reason)
    lines = [f"(set-logic {LOGIC})"]
    n = problem.n
    lines += [f"(declare-fun {selector(i)} () Bool)" for i in range(n)]
    lines += [f"(declare-fun {point(i)} () Real)" for i in range(n)]
    if problem.monotone:
        base, target = problem.base, problem.target
        lower, upper = np.minimum(base, target), np.maximum(base, target)
        goal = problem.goal
        lines.append("; the monotone shortcut: y_i moves from base_i to target_i where s_i")
        for i in range(n):
            lines.append(f"(assert (= {point(i)} (ite {selector(i)} {number(target[i])} {number(base[i])})))")
    else:
        lower, upper = problem.domain.lower, problem.domain.upper
        goal = 1 - problem.prediction
        lines.append("; y in the box, equal to x unless s_i")
        for i in range(n):
            low, high, y = number(lower[i]), number(upper[i]), point(i)
            inside = f"(or (= {y} {low}) (= {y} {high}))" if problem.domain.binary else f"(and (<= {low} {y}) (<= {y} {high}))"
            lines.append(f"(assert {inside})")
            lines.append(f"(assert (or {selector(i)} (= {y} {number(problem.x[i])})))")
    inputs = [point(i) for i in range(n)]
    for index, (layer, (low, high)) in enumerate(zip(problem.net.layers, problem.exact.layer_bounds(lower, upper), strict=True)):
        number_ = index + 1
        lines.append(f"; layer {number_}: {layer.width} unit(s), {layer.activation.name}")
        values = []
        for j in range(layer.width):
            h = f"h{number_}_{j}"
            terms = [_scaled(Fraction(w), z) for w, z in zip(layer.weight[j].tolist(), inputs, strict=True) if w != 0]
            bias = [number(layer.bias[j])] if layer.bias[j] != 0 else []
            lines.append(f"(declare-fun {h} () Real)")
            lines.append(f"(assert (= {h} {total([*terms, *bias])}))")
            value, bounded = _unit(layer.activation, h, low[j], high[j])
            if bounded:
                lines.append(f"(assert (and (<= {number(low[j])} {h}) (<= {h} {number(high[j])})))")
            if value == h:
                values.append(h)
                continue
            z = f"z{number_}_{j}"
            lines.append(f"(declare-fun {z} () Real)")
            lines.append(f"(assert (= {z} {value}))")
            values.append(z)
        inputs = values
    if len(inputs) > 1:
        lines += _leave_class(problem.prediction, inputs)
        return "\n".join(lines) + "\n"
    relation = ">" if goal == 1 else "<="
    lines.append(f"; the output f and the goal: class {goal}")
    lines.append(f"(define-fun {OUTPUT} () Real {inputs[0]})")
    lines.append(f"(assert ({relation} {OUTPUT} {number(problem.threshold)}))")
    return "\n".join(lines) + "\n"


def _leave_class(c: int, outputs: Sequence[str]) -> list[str]:
    """K ≥ 2 outputs `f0 … f{K−1}`: the prediction leaves class c (argmax, ties to the lowest
    index): some j < c has f_j ≥ f_c, or some j > c has f_j > f_c."""
    lines = [f"; the outputs f0 … f{len(outputs) - 1} and the goal: a class other than {c} (ties to the lowest index)"]
    lines += [f"(define-fun f{j} () Real {term})" for j, term in enumerate(outputs)]
    overtakes = [f"({'>' if overtakes_strictly(c, j) else '>='} f{j} f{c})" for j in range(len(outputs)) if j != c]
    lines.append(f"(assert (or {' '.join(overtakes)}))" if len(overtakes) > 1 else f"(assert {overtakes[0]})")
    return lines


def _unit(activation: Activation, h: str, low: Fraction, high: Fraction) -> tuple[str, bool]:
    """The value of one unit with pre-activation `h` ∈ [low, high] as a term, and whether it
    changes piece inside the bounds (then its bounds are worth asserting)."""
    _, pieces = activation.pieces()
    first, inside = activation.pieces_over(low, high)
    terms = [_piece(slope, offset, h) for slope, offset in pieces[first : first + len(inside) + 1]]
    value = terms[0]
    for breakpoint, right in zip(inside, terms[1:], strict=True):
        value = f"(ite (>= {h} {number(breakpoint)}) {right} {value})"
    return value, bool(inside)


def _piece(slope: Fraction, offset: Fraction, h: str) -> str:
    if slope == 0:
        return number(offset)
    return _scaled(slope, h) if offset == 0 else f"(+ {_scaled(slope, h)} {number(offset)})"


def _scaled(factor: Fraction, term: str) -> str:
    """factor·term as an SMT-LIB term (the term itself when the factor is 1)."""
    return term if factor == 1 else f"(* {number(factor)} {term})"


def question(problem: Problem, at_most: int, comments: Iterable[str] = (), status: str | None = None) -> str:
    """A whole SMT-LIB file: is there an explanation of size ≤ `at_most`? (sat: yes.) `comments`
    open the file as `;` lines; `status` ("sat", "unsat") becomes `(set-info :status …)`."""
    head = [f"; {line}" for line in comments] + ["(set-info :smt-lib-version 2.6)"]
    if status is not None:
        head.append(f"(set-info :status {status})")
    body = encode_smtlib(problem)
    bound = f"; the size bound\n(assert (<= {size_term(problem.n)} {at_most}))\n(check-sat)\n(exit)\n"
    return "\n".join(head) + "\n" + body + bound

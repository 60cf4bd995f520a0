"""VNN-LIB 1.0 properties of explanation questions, their exact answers, and VNN-COMP counterexamples.

A question fixes a *region*: the free features F range over the problem's box (the domain, or
under `--radius` the input's ball `Domain.ball`), the others sit at x. The property over the
network's ONNX (inputs X_0..X_{n−1}, outputs Y_0..Y_{K−1}) asks for a point of the region whose
prediction differs from p(x) — SAT means a counterexample:

- K = 1, p(x) = 1: `Y_0 <= t` (class 0 is f ≤ t: exact);
- K = 1, p(x) = 0: `Y_0 >= t` (class 1 is f > t);
- K ≥ 2, p(x) = c (argmax, ties to the lowest index, `cardinal.prediction`): the disjunction over
  the rival classes j ≠ c, `(or (and (>= Y_j Y_c)) ...)`. A rival j < c takes the class with
  f_j ≥ f_c (exact); a rival j > c needs f_j > f_c.

**Strictness.** VNN-LIB has only ≤ and ≥, and VNN-LIB 1.0 compares a variable with a variable or
a constant (no `Y_c + μ`). So each strict side is written as its closure (`f >= t`, `Y_j >= Y_c`)
and the file asks a slightly larger question: its answer differs from the explanation question's
only where the region touches the boundary (a tie f = t, or f_j = f_c for some j > c) without
crossing it. Every file's answer is decided *as written*, exactly (`decide`): the closure of a
strict side is itself a flip of a transformed network, asked of cardinal's exact engines — K = 1,
p = 0: the network −f at threshold −t (p = 0 there iff f ≥ t); K ≥ 2: the outputs reordered so
that c comes last (every rival then takes the class from c with f_j ≥ f_c). Both transforms append
one identity layer of weights 0, ±1, so nothing is rounded.

**Counterexamples** (`counterexample_text`) are written as a VNN-COMP results file is: the line
`sat`, then `((X_0 v) ... (Y_{K−1} v))`, the outputs being the float64 network's (the ONNX's
arithmetic) at the point, every number the shortest decimal that reads back as its double.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from cardinal.activations import Activation
from cardinal.errors import InputError, UndecidedPrediction
from cardinal.exact import modified_inputs
from cardinal.network import Layer, Network
from cardinal.problem import Problem

from .oracle import SetOracle

TIE_RULE = "argmax of Y_0..Y_{K-1}, ties to the lowest index: class c iff Y_c > Y_j for j < c and Y_c >= Y_j for j > c"


def number(value: float) -> str:
    """A double as the shortest decimal that reads back as the same double, without an exponent."""
    return format(Decimal(repr(float(value))), "f")


def outputs(problem: Problem) -> list[str]:
    """The declared output names Y_0..Y_{K−1}."""
    return [f"Y_{j}" for j in range(problem.classes)]


def condition_lines(problem: Problem) -> list[str]:
    """The output condition (module docstring) as comment and assert lines."""
    p, t = problem.prediction, problem.threshold
    if problem.classes == 1 and p == 1:
        return ["; the counterexample: class 0, f <= t", f"(assert (<= Y_0 {number(t)}))"]
    if problem.classes == 1:
        return [
            "; the counterexample: class 1, f > t, written as its closure f >= t (VNN-LIB has no strict comparison)",
            f"(assert (>= Y_0 {number(t)}))",
        ]
    rivals = [j for j in range(problem.classes) if j != p]
    lines = [
        f"; the counterexample: a rival class j takes class {p} from x: Y_j >= Y_{p} for j < {p} (ties to the lowest index),",
        f"; Y_j > Y_{p} for j > {p}, written as its closure Y_j >= Y_{p} (VNN-LIB has no strict comparison)",
    ]
    if len(rivals) == 1:
        return [*lines, f"(assert (>= Y_{rivals[0]} Y_{p}))"]
    return [*lines, "(assert (or", *[f"    (and (>= Y_{j} Y_{p}))" for j in rivals], "))"]


def property_text(problem: Problem, free: np.ndarray, comments: Sequence[str]) -> str:
    """The VNN-LIB property of the region with free features `free` [n] bool, opened by `comments`."""
    lower = np.where(free, problem.domain.lower, problem.x)
    upper = np.where(free, problem.domain.upper, problem.x)
    lines = [f"; {line}" for line in comments]
    if problem.classes > 1:
        lines.append(f"; prediction: {TIE_RULE}; p(x) = {problem.prediction}")
    lines += [f"(declare-const X_{i} Real)" for i in range(problem.n)]
    lines += [f"(declare-const {name} Real)" for name in outputs(problem)]
    lines.append("; the region: free features in the box, the others at x")
    for i in range(problem.n):
        lines.append(f"(assert (>= X_{i} {number(lower[i])}))")
        lines.append(f"(assert (<= X_{i} {number(upper[i])}))")
    return "\n".join([*lines, *condition_lines(problem)]) + "\n"


@dataclass(frozen=True)
class Answer:
    """A property's answer decided exactly: `sat` True (`witness` [n], a point of the region that
    meets the output condition as written, checked exactly), False (an exact engine proved none
    does), None (undecided: `note` says why)."""

    sat: bool | None
    witness: np.ndarray | None = None
    note: str = ""


def closure_problem(problem: Problem) -> tuple[Problem, int]:
    """The contrastive problem, on the same x and box, whose flips are exactly the points meeting
    the property's output condition as written (module docstring), and the prediction it must
    give at x for x itself not to meet it. Raises `UndecidedPrediction` on a smooth network whose
    enclosure leaves p(x) open there."""
    net, p, K = problem.net, problem.prediction, problem.classes
    identity = Activation.make("identity")
    if K == 1 and p == 1:
        return Problem.make(net, problem.x, "contrastive", problem.domain, problem.threshold), 1
    if K == 1:
        negate = Layer(np.array([[-1.0]]), np.zeros(1), identity)
        return Problem.make(Network((*net.layers, negate)), problem.x, "contrastive", problem.domain, -problem.threshold), 1
    order = [j for j in range(K) if j != p] + [p]
    reorder = Layer(np.eye(K)[order], np.zeros(K), identity)
    return Problem.make(Network((*net.layers, reorder)), problem.x, "contrastive", problem.domain, None), K - 1


def decide(problem: Problem, free: np.ndarray, oracle: SetOracle, time_limit: float) -> Answer:
    """Exactly: does the property of the region (free features `free` [n] bool) have a
    counterexample, as written? The monotone shortcut where it holds, else the exact set oracle
    (`solvers.oracle`, `time_limit` seconds per engine)."""
    try:
        closure, keeps = closure_problem(problem)
    except UndecidedPrediction as error:
        return Answer(None, None, str(error))
    if closure.prediction != keeps:
        return Answer(True, problem.x.copy(), "x itself meets the condition (a tie on the boundary)")
    chosen = tuple(np.flatnonzero(free).tolist())
    if closure.monotone:
        corner = modified_inputs(problem.x, chosen, closure.counterpoint)
        flips = closure.flips(corner)
        if flips is None:
            return Answer(None, None, "the region's extreme point is undecided (smooth margin)")
        return Answer(True, corner, "monotone shortcut") if flips else Answer(False, None, "monotone shortcut")
    flip = oracle.flip(closure, frozenset(chosen), time_limit)
    witness = None if flip.witness is None else np.asarray(flip.witness, dtype=np.float64)
    return Answer(flip.answer, witness, flip.note)


def counterexample_text(net: Network, y: np.ndarray) -> str:
    """The counterexample y [n] as a VNN-COMP results file holds it (module docstring)."""
    values = net.forward(np.asarray(y, dtype=np.float64)[None, :]).detach().numpy().reshape(-1)
    pairs = [(f"X_{i}", v) for i, v in enumerate(np.asarray(y).tolist())] + [(f"Y_{j}", v) for j, v in enumerate(values.tolist())]
    return "sat\n(" + "\n".join(f"({name} {number(value)})" for name, value in pairs) + ")\n"


def read_counterexample(text: str, n: int, source: str) -> np.ndarray:
    """The inputs X_0..X_{n−1} [n] of a counterexample in VNN-COMP's form (the `sat` line
    optional; the Y values are read past); `InputError` naming `source` when it is not one."""
    body = text.strip()
    if body.startswith("sat"):
        body = body[3:].strip()
    pairs = re.findall(r"\(\s*([XY])_(\d+)\s+([^\s()]+)\s*\)", body)
    stripped = re.sub(r"\(\s*[XY]_\d+\s+[^\s()]+\s*\)", "", body).replace("(", "").replace(")", "").strip()
    if not pairs or stripped:
        raise InputError(f"{source}: not a VNN-COMP counterexample ((X_0 v) ... lines)")
    values: dict[int, float] = {}
    for name, index, value in pairs:
        if name == "X":
            try:
                values[int(index)] = float(value)
            except ValueError:
                raise InputError(f"{source}: X_{index} = {value!r} is not a number") from None
    if sorted(values) != list(range(n)):
        raise InputError(f"{source}: the counterexample gives {len(values)} inputs X_i; the network has {n}")
    return np.array([values[i] for i in range(n)], dtype=np.float64)


def onnx_data(net: Network) -> bytes:
    """The network as `network.onnx` holds it (float64: the same network exactly)."""
    from cardinal.formats.onnx_io import onnx_bytes

    shape = net.metadata.input_shape or (net.n_inputs,)
    return onnx_bytes(net.chain(), shape, net.n_outputs, False, net.metadata.to_json() or None)

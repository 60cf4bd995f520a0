"""The checker's relaxations against exactly evaluated points.

cardinal's certificate generators build their trees through the checker's own classes
(docs/proofs.md, *What the generators share with the checker*), so "every generated certificate
is accepted" says nothing about whether what the checker asserts is true. This file checks it
directly. For every activation the checker reads (identity, relu, leaky_relu of slopes 0, 0.01,
0.25 and 1.5, hardtanh with min < max and min = max, step at 0 and at 1/2, sigmoid, tanh,
softplus), seeded random networks whose units sit on their breakpoints at a pivot point of the
box (hardtanh at its min or max, step at its `at`), and points of the box — the pivot, corners,
grid points — each evaluated by this file's own evaluator (Fractions; sigmoid, tanh and softplus
as mpmath interval enclosures at 400 bits, rigorous), must satisfy what the checker asserts:

- its point evaluation (`_Net.point`, every method's) encloses the value; `_predict` agrees;
- its sign analysis (`shortcut._signs`, the shortcut's basis): a unit's pre-activation moves with
  an input as the sign says;
- `BoxTree.enclosure` (method box-tree) encloses the outputs at every point of its node;
- `Shortcut.bound_closes` and `Shortcut.linear_closes` (leaves `bound` and `linear`) close no
  node that holds a set reaching the goal, tested at the threshold just short of the nearest set;
- `LpRelaxation` (lp-tree, shortcut-lp): every variable bound and row, of the root and of nodes
  split on selectors and breakpoints, holds at every CXp point; `bound` (weak duality, any
  multipliers) never exceeds the objective there; `closes` never closes a rival's winning point.

Then mutations: each tightens one relaxation (monkeypatch) and the same check must find a point
it cuts off. Nothing of cardinal but `cardinal.checker` is imported. Last, which files outside
the checker import it (docs/proofs.md lists them).
"""

from __future__ import annotations

import ast
import itertools
import random
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from mpmath import iv, libmp

from cardinal.checker import box, exact, linear, lp, shortcut

Value = tuple[Fraction, Fraction]  # an enclosure [lo, hi] of a real number; lo = hi where exact
Spec = str | dict[str, Any]

N = 4  # inputs
ACTIVATIONS: dict[str, Spec] = {
    "identity": "identity",
    "relu": "relu",
    "leaky_relu": "leaky_relu",  # the default slope, 0.01
    "leaky_relu-0": {"name": "leaky_relu", "slope": 0.0},
    "leaky_relu-quarter": {"name": "leaky_relu", "slope": 0.25},
    "leaky_relu-steep": {"name": "leaky_relu", "slope": 1.5},
    "hardtanh": "hardtanh",  # [-1, 1]
    "hardtanh-narrow": {"name": "hardtanh", "min": -0.5, "max": 0.75},
    "hardtanh-flat": {"name": "hardtanh", "min": 0.25, "max": 0.25},
    "step": "step",  # at 0
    "step-half": {"name": "step", "at": 0.5},
    "sigmoid": "sigmoid",
    "tanh": "tanh",
    "softplus": "softplus",
}
SMOOTH = ("sigmoid", "tanh", "softplus")
LP_KINDS = [key for key in ACTIVATIONS if key.split("-")[0] in ("identity", "relu", "hardtanh") or key in
            ("leaky_relu", "leaky_relu-0", "leaky_relu-quarter")]  # fmt: skip
LINEAR_KINDS = [key for key in ACTIVATIONS if key.split("-")[0] in ("identity", "relu", "leaky_relu", "hardtanh")]
_DEFAULTS = {"leaky_relu": {"slope": 0.01}, "hardtanh": {"min": -1.0, "max": 1.0}, "step": {"at": 0.0}}  # docs/proofs.md


# ---------------------------------------------------------------------------- this file's own evaluator
def _unpack(spec: Spec) -> tuple[str, dict[str, Fraction]]:
    name = spec if isinstance(spec, str) else spec["name"]
    given = {} if isinstance(spec, str) else spec
    return name, {key: Fraction(given.get(key, default)) for key, default in _DEFAULTS.get(name, {}).items()}


def _rational(raw: tuple) -> Fraction:
    return Fraction(*libmp.to_rational(raw))


def _smooth(name: str, h: Fraction) -> Value:
    """A rigorous enclosure of sigmoid, tanh or softplus at h (mpmath intervals at 400 bits)."""
    before, iv.prec = iv.prec, 400
    try:
        q = iv.mpf(h.numerator) / iv.mpf(h.denominator)
        if name == "sigmoid":
            value = 1 / (1 + iv.exp(-q))
        elif name == "tanh":
            value = 1 - 2 / (iv.exp(2 * q) + 1)
        else:
            value = iv.log(1 + iv.exp(q))
        low, high = value._mpi_
        return _rational(low), _rational(high)
    finally:
        iv.prec = before


def _sigma(spec: Spec, h: Value) -> Value:
    """σ over an enclosure of h (every activation is non-decreasing)."""
    name, p = _unpack(spec)
    if name in SMOOTH:
        return _smooth(name, h[0])[0], _smooth(name, h[1])[1]

    def exact_value(v: Fraction) -> Fraction:
        if name == "relu":
            return max(v, Fraction(0))
        if name == "leaky_relu":
            return v if v >= 0 else p["slope"] * v
        if name == "hardtanh":
            return min(max(v, p["min"]), p["max"])
        if name == "step":
            return Fraction(int(v >= p["at"]))
        return v

    return exact_value(h[0]), exact_value(h[1])


def _evaluate(doc: dict, y: list[Fraction]) -> list[tuple[list[Value], list[Value]]]:
    """Per layer, the enclosures of its pre-activations h and its values z at the point y."""
    values: list[Value] = [(v, v) for v in y]
    every = []
    for layer in doc["layers"]:
        h = []
        for row, bias in zip(layer["weight"], layer["bias"], strict=True):
            low = high = Fraction(bias)
            for w, (lo, hi) in zip(map(Fraction, row), values, strict=True):
                low, high = low + w * (lo if w > 0 else hi), high + w * (hi if w > 0 else lo)
            h.append((low, high))
        values = [_sigma(layer["activation"], v) for v in h]
        every.append((h, values))
    return every


def _outputs(doc: dict, y: list[Fraction]) -> list[Value]:
    return _evaluate(doc, y)[-1][1]


def _prediction(outputs: list[Value], threshold: Fraction | None) -> int | None:
    """p from exact outputs (K = 1: f > t; argmax, ties to the lowest index); None if not exact."""
    if any(lo != hi for lo, hi in outputs):
        return None
    f = [lo for lo, _ in outputs]
    return int(f[0] > threshold) if threshold is not None else f.index(max(f))


# ---------------------------------------------------------------------------- networks, boxes, points
class Case:
    """A network (its JSON document and the checker's `_Net`), a box and its pivot, x, a threshold."""

    def __init__(self, key: str, seed: int, classes: int = 1, binary: bool = False) -> None:
        rng = self.rng = random.Random(f"{key}/{seed}/{classes}/{binary}")
        spec = ACTIVATIONS[key]
        name, params = _unpack(spec)
        self.name, self.binary = name, binary
        self.lower = [Fraction(-rng.randint(0, 4), 8) for _ in range(N)]
        self.upper = [Fraction(8 + rng.randint(0, 4), 8) for _ in range(N)]
        if binary:
            pivot = [rng.choice(ends) for ends in zip(self.lower, self.upper, strict=True)]
        else:
            pivot = [Fraction(rng.randint(0, 16), 16) for _ in range(N)]
        self.pivot = pivot
        breaks = {"relu": [0], "leaky_relu": [0], "step": [params.get("at")], "sigmoid": [0], "tanh": [0], "softplus": [0],
                  "hardtanh": [params.get("min"), params.get("max")], "identity": [0]}[name]  # fmt: skip
        output = spec if seed % 2 else "identity"  # odd seeds: the output layer has the activation too
        layers: list[dict] = []
        for number, size in enumerate((4, 3, classes)):
            z = _evaluate({"layers": layers}, pivot)[-1][1] if layers else [(v, v) for v in pivot]
            weight = [[Fraction(rng.randint(-6, 6), 4) for _ in z] for _ in range(size)]
            bias = []
            for row in weight:
                at_pivot = sum((w * lo for w, (lo, _) in zip(row, z, strict=True)), Fraction(0))
                on_break = Fraction(rng.choice(breaks)) - at_pivot  # the unit on a breakpoint at the pivot
                exact_z = all(lo == hi for lo, hi in z)
                bias.append(
                    on_break
                    if exact_z and rng.random() < 0.8 and float(on_break) == on_break
                    else Fraction(rng.randint(-8, 8), 8)
                )
            layers.append({"weight": [[float(w) for w in row] for row in weight], "bias": [float(b) for b in bias],
                           "activation": output if number == 2 else spec})  # fmt: skip
        self.doc = {"format": "cardinal.network/1", "layers": layers}
        self.net = exact._Net(exact.network_sha256(self.doc)[1])
        self.x = list(pivot)
        for i in rng.sample(range(N), rng.randint(1, 2)):  # x: the pivot moved on one or two features
            self.x[i] = self.other(i) if binary else Fraction(rng.randint(0, 16), 16)
        f = _outputs(self.doc, self.pivot)
        self.threshold = None if classes > 1 else f[0][0] if f[0][0] == f[0][1] else Fraction(1, 3)  # a tie at the pivot

    def other(self, i: int) -> Fraction:
        """Feature i's end that the pivot is not (binary boxes)."""
        return self.upper[i] if self.pivot[i] == self.lower[i] else self.lower[i]

    @property
    def box(self) -> tuple:
        return self.lower, self.upper, self.binary

    def values(self, i: int) -> list[Fraction]:
        """The values feature i takes in the sample: its ends, the pivot's, and two grid points."""
        if self.binary:
            return [self.lower[i], self.upper[i]]
        grid = [self.lower[i] + (self.upper[i] - self.lower[i]) * Fraction(self.rng.randint(0, 32), 32) for _ in range(2)]
        return [self.lower[i], self.upper[i], self.pivot[i], *grid]

    def points(self, k: int, count: int = 40) -> Iterator[list[Fraction]]:
        """Points of the box equal to x off at most k features: the pivot when it is one, then
        `count` drawn (a moved set, then each moved feature's value from `values`)."""
        if sum(p != v for p, v in zip(self.pivot, self.x, strict=True)) <= k:
            yield list(self.pivot)
        for _ in range(count):
            y = list(self.x)
            for i in self.rng.sample(range(N), self.rng.randint(0, k)):
                y[i] = self.rng.choice(self.values(i))
            yield y


def _inside(outer: Value, inner: Value) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1]


def cases(keys: list[str]) -> list:
    """(key, seed) per activation: seed 0 in the default run, seed 1 (another random case) with -m slow."""
    return [case for key in keys for case in ((key, 0), pytest.param(key, 1, marks=pytest.mark.slow))]


CASES = cases(list(ACTIVATIONS))


# ---------------------------------------------------------------------------- the checks
def point_violations(key: str, seed: int) -> Iterator[str]:
    """`_Net.point` and `_predict` at the sample points (K = 1 and 3, real and binary boxes)."""
    for classes, binary in ((1, False), (3, True)):
        case = Case(key, seed, classes, binary)
        for y in case.points(N, 8 if key in SMOOTH else 30):
            low, high = case.net.point(y)
            truth = _outputs(case.doc, y)
            yield from (f"{key}: at {y}, output {j} {truth[j]} outside [{low[j]}, {high[j]}]"
                        for j in range(classes) if not _inside((low[j], high[j]), truth[j]))  # fmt: skip
            p = _prediction(truth, case.threshold)
            if p is not None and exact._predict((low, high), case.threshold, "y") != p:
                yield f"{key}: at {y}, the checker predicts otherwise than {p}"


def sign_violations(key: str, seed: int) -> Iterator[str]:
    """The sign analysis: sign +1 (−1, 0) of unit j in input i means h_j never falls (rises, moves)
    as y_i grows, whatever the other inputs."""
    case = Case(key, seed, 3)
    signs = shortcut._signs(case.net.layers)
    for y in case.points(N, 8 if key in SMOOTH else 30):
        i = case.rng.randrange(N)
        higher = list(y)
        higher[i] = max(y[i], case.rng.choice(case.values(i)))
        before, after = _evaluate(case.doc, y), _evaluate(case.doc, higher)
        for number, ((h, _), (h2, _)) in enumerate(zip(before, after, strict=True)):
            for j, ((lo, hi), (lo2, hi2)) in enumerate(zip(h, h2, strict=True)):
                sign = signs[number][j][i]
                falls, rises = hi2 < lo, lo2 > hi  # proven, whatever the enclosures' width
                if (sign == 1 and falls) or (sign == -1 and rises) or (sign == 0 and (falls or rises)):
                    yield f"{key}: layer {number} unit {j} has sign {sign} in input {i}, yet moves from {y} to {higher}"


def box_violations(key: str, seed: int) -> Iterator[str]:
    """`BoxTree.enclosure` over random nodes holding each sample point (its moved features in or
    open, ranges around its values, step units in its phases)."""
    for classes, binary in ((1, False), (3, False), (1, True)):
        case = Case(key, seed, classes, binary)
        k = case.rng.randint(1, N)
        tree = box.BoxTree(case.net, case.x, case.box, case.threshold, 0, k)
        steps = [
            (number, j) for number, layer in enumerate(case.net.layers) if layer.name == "step" for j in range(len(layer.bias))
        ]
        for y in case.points(k, 6 if key in SMOOTH else 20):
            moved = [i for i in range(N) if y[i] != case.x[i]]
            chosen = frozenset(i for i in moved if case.rng.random() < 0.5)
            excluded = frozenset(i for i in range(N) if i not in moved and case.rng.random() < 0.3)
            lo, hi = list(case.lower), list(case.upper)
            for i in moved if not binary else ():
                lo[i] = case.rng.choice([v for v in case.values(i) if v <= y[i]] + [y[i]])
                hi[i] = case.rng.choice([v for v in case.values(i) if v >= y[i]] + [y[i]])
            layers = _evaluate(case.doc, y)
            phases = {unit: layers[unit[0]][0][unit[1]][0] >= case.net.layers[unit[0]].params["at"]
                      for unit in steps if case.rng.random() < 0.5}  # fmt: skip
            enclosure = tree.enclosure(box.BoxNode(chosen, excluded, lo, hi, phases))
            truth = layers[-1][1]
            if enclosure is None or not all(_inside((enclosure[0][j], enclosure[1][j]), truth[j]) for j in range(classes)):
                yield f"{key}: the node in {sorted(chosen)} out {sorted(excluded)} [{lo}, {hi}] {phases}: {enclosure} misses {truth} at {y}"


def shortcut_violations(key: str, seed: int, linear_leaf: bool = False) -> Iterator[str]:
    """Leaves `bound` (any |T| ≤ r) and `linear` (|T| = r): at the threshold just short of the
    node's nearest set — below the largest f for goal 1 (f > t), at the smallest for goal 0 —
    that set reaches the goal, so the leaf must not close."""
    case = Case(key, seed)
    base = list(case.x)
    tiny = Fraction(1, 1 << 300)
    for trial in range(6):
        target = [case.rng.choice(case.values(i)) for i in range(N)]
        k = case.rng.randint(1, N)
        cut = case.rng.sample(range(N), case.rng.randint(0, min(k, N)))
        chosen, excluded = frozenset(cut[: len(cut) // 2 + trial % 2]), frozenset(cut[len(cut) // 2 + trial % 2 :])
        open_ = [i for i in range(N) if i not in chosen and i not in excluded]
        r = min(k - len(chosen), len(open_))
        sizes = [r] if linear_leaf else range(r + 1)
        sets = [chosen | set(extra) for size in sizes for extra in itertools.combinations(open_, size)]
        values = [
            _outputs(case.doc, [t if i in s else b for i, (b, t) in enumerate(zip(base, target, strict=True))])[0] for s in sets
        ]
        for goal, threshold in ((1, max(lo for lo, _ in values) - tiny), (0, min(hi for _, hi in values))):
            state = shortcut.Shortcut(case.net, base, target, goal, threshold, k)
            closes = state.linear_closes(chosen, open_) if linear_leaf else state.bound_closes(chosen, open_)
            if closes:
                yield f"{key}: goal {goal}, t = {float(threshold)}, node in {sorted(chosen)} open {open_}: closed, yet a set reaches it"


def _assignment(case: Case, y: list[Fraction]) -> list[Fraction]:
    """The LP's variables at y (docs/proofs.md, *LP bounds*: s, y, then per unit h and z)."""
    values = [Fraction(int(a != b)) for a, b in zip(y, case.x, strict=True)] + list(y)
    for layer, (h, z) in zip(case.doc["layers"], _evaluate(case.doc, y), strict=True):
        for (h_value, _), (z_value, _) in zip(h, z, strict=True):
            values += [h_value] if _unpack(layer["activation"])[0] == "identity" else [h_value, z_value]
    return values


def _holds(low: Fraction | None, value: Fraction, high: Fraction | None) -> bool:
    return (low is None or low <= value) and (high is None or value <= high)


def lp_violations(key: str, seed: int) -> Iterator[str]:
    """Every bound and row of `LpRelaxation` and of its nodes at every CXp-candidate point; weak
    duality of `bound` for random multipliers; `closes` at a rival's winning point."""
    for classes, binary, k in ((1, False, N), (3, False, 1), (1, True, 2), (3, True, N)):
        case = Case(key, seed, classes, binary)
        prediction = _prediction(_outputs(case.doc, case.x), case.threshold)
        relaxation = lp.LpRelaxation(case.net, case.x, case.box, case.threshold, prediction, k)
        for y in case.points(k, 16):
            v = _assignment(case, y)
            fixed = {i: int(v[i]) for i in range(N) if case.rng.random() < 0.5}
            phases = {}
            for unit, point in relaxation.units.items():
                if case.rng.random() < 0.6:  # active: h ≥ at, inactive: h ≤ at (at h = at, either)
                    phases[unit] = v[point.h] > point.at or (v[point.h] == point.at and case.rng.random() < 0.5)
            lo, hi, sides = relaxation.node(fixed, phases)  # the root's bounds and rows are no tighter
            yield from (f"{key}: {fixed} {phases}: variable {j} = {v[j]} outside [{lo[j]}, {hi[j]}] at {y}"
                        for j in range(len(v)) if not lo[j] <= v[j] <= hi[j])  # fmt: skip
            for number, (coefficients, low, high) in enumerate(relaxation.rows):
                low, high = sides.get(number, (low, high))
                if not _holds(low, sum((a * v[j] for j, a in coefficients.items()), Fraction(0)), high):
                    yield f"{key}: {fixed} {phases}: row {number} fails at {y} (k = {k}, binary {binary})"
            winner = _prediction(_outputs(case.doc, y), case.threshold)
            for rival in relaxation.rivals:
                g = sum(a * v[j] for j, a in relaxation.goal(rival).objective.items())
                pairs = []
                for row in case.rng.sample(range(len(relaxation.rows)), 6):
                    low, high = sides.get(row, relaxation.rows[row][1:])
                    sign = case.rng.choice([s for s, side in ((1, low), (-1, high)) if side is not None] or [0])
                    pairs += [[row, sign * case.rng.randint(1, 16) / 8]] if sign else []
                if relaxation.bound(rival, fixed, phases, pairs) > g:
                    yield f"{key}: rival {rival}: the bound of {pairs} passes g = {g} at {y}"
                if winner == rival and relaxation.closes(rival, g):
                    yield f"{key}: rival {rival} wins at {y}, yet its objective there {g} closes"


# ---------------------------------------------------------------------------- the tests
@pytest.mark.parametrize("key,seed", CASES)
def test_point_evaluation_encloses_the_exact_value(key: str, seed: int) -> None:
    assert list(point_violations(key, seed)) == []


@pytest.mark.parametrize("key,seed", CASES)
def test_sign_analysis_holds_between_exact_points(key: str, seed: int) -> None:
    assert list(sign_violations(key, seed)) == []


@pytest.mark.parametrize("key,seed", CASES)
def test_box_enclosures_hold_every_point_of_their_node(key: str, seed: int) -> None:
    assert list(box_violations(key, seed)) == []


@pytest.mark.parametrize("key,seed", CASES)
def test_interval_leaf_closes_no_node_with_a_set_reaching_the_goal(key: str, seed: int) -> None:
    assert list(shortcut_violations(key, seed)) == []


@pytest.mark.parametrize("key,seed", cases(LINEAR_KINDS))
def test_linear_leaf_closes_no_node_with_a_set_reaching_the_goal(key: str, seed: int) -> None:
    assert list(shortcut_violations(key, seed, linear_leaf=True)) == []


@pytest.mark.parametrize("key,seed", cases(LP_KINDS))
def test_lp_relaxation_holds_at_every_cxp_point(key: str, seed: int) -> None:
    assert list(lp_violations(key, seed)) == []


def test_smooth_enclosures_hold_at_their_edges() -> None:
    """`_smooth` at 0, near 0, at and around ±64 (where it switches to constant ends), and between."""
    points = [Fraction(0), Fraction(1, 1 << 60), Fraction(-3, 7), Fraction(5, 2), Fraction(63) + Fraction(127, 128), Fraction(64),
              Fraction(200), Fraction(-64), Fraction(-6399, 100), Fraction(-200), Fraction(1, 3) - 32]  # fmt: skip
    for name in SMOOTH:
        for h in points:
            low, high = exact._smooth(name, h)
            assert _inside((low, high), _smooth(name, h)), (name, h)


# ---------------------------------------------------------------------------- mutations: the checks catch a tightened relaxation
def _tighten_row(name: str, which: int, delta: Fraction) -> Callable:
    """`LpRelaxation._unit` with row `which` of each `name` unit tightened by delta (its finite
    low side raised, else its high side lowered)."""
    original = lp.LpRelaxation._unit

    def mutated(self: lp.LpRelaxation, layer: exact._Layer, unit: tuple, h: int, lo: Fraction, hi: Fraction) -> int:
        start = len(self.rows)
        z = original(self, layer, unit, h, lo, hi)
        if layer.name == name:
            coefficients, low, high = self.rows[start + which]
            self.rows[start + which] = (coefficients, low, high - delta) if low is None else (coefficients, low + delta, high)
        return z

    return mutated


def _shifted_smooth(name: str, h: Fraction) -> Value:
    low, high = _ORIGINAL_SMOOTH(name, h)
    return (low + Fraction(1, 1 << 100), high + Fraction(1, 1 << 100)) if name == "sigmoid" else (low, high)


def _strict_step(layer: exact._Layer, h: Fraction, direction: int) -> Fraction:
    return Fraction(int(h > layer.params["at"])) if layer.name == "step" else _ORIGINAL_APPLY(layer, h, direction)


def _lowered_lines(net: exact._Net, number: int, kinks: list[Fraction], low: int, high: int) -> linear.Lines:
    up_slope, up_offset, down_slope, down_offset = _ORIGINAL_LINES(net, number, kinks, low, high)
    return up_slope, up_offset - (1 << (linear.BITS - 6)), down_slope, down_offset


def _narrower_affine(net: exact._Net, index: int, low: list[Fraction], high: list[Fraction]) -> tuple[list, list]:
    out_low, out_high = _ORIGINAL_AFFINE(net, index, low, high)
    return out_low, [v - Fraction(1, 64) for v in out_high]


_ORIGINAL_SMOOTH, _ORIGINAL_APPLY, _ORIGINAL_LINES, _ORIGINAL_AFFINE = (
    exact._smooth,
    exact._apply,
    linear._lines,
    exact._Net.affine,
)
chain = itertools.chain
MUTATIONS: dict[str, tuple[Any, str, Any, Callable[[], Iterator[str]]]] = {  # what is replaced, by what, and the check that must fail
    "lp: relu chord lowered": (lp.LpRelaxation, "_unit", _tighten_row("relu", 1, Fraction(1, 64)), lambda: lp_violations("relu", 0)),
    "lp: leaky_relu z ≥ a·h raised": (lp.LpRelaxation, "_unit", _tighten_row("leaky_relu", 1, Fraction(1, 1024)),
                                      lambda: lp_violations("leaky_relu-quarter", 0)),
    "lp: hardtanh z − h ≤ σ(L) − L lowered": (lp.LpRelaxation, "_unit", _tighten_row("hardtanh", 0, Fraction(1, 64)),
                                              lambda: lp_violations("hardtanh", 0)),
    "lp: hardtanh lower chord lowered": (lp.LpRelaxation, "_unit", _tighten_row("hardtanh", 3, Fraction(1, 64)),
                                         lambda: lp_violations("hardtanh-narrow", 1)),
    "step: 1 only above its breakpoint": (exact, "_apply", _strict_step,
                                          lambda: chain(point_violations("step", 0), box_violations("step", 1))),
    "sigmoid: enclosure shifted by 2^-100": (exact, "_smooth", _shifted_smooth, lambda: point_violations("sigmoid", 0)),
    "interval arithmetic: upper ends lowered": (exact._Net, "affine", _narrower_affine,
                                                lambda: chain(box_violations("tanh", 0), shortcut_violations("relu", 0))),
    "linear: upper lines lowered": (linear, "_lines", _lowered_lines, lambda: chain.from_iterable(
        shortcut_violations(key, seed, True) for key in ("relu", "hardtanh") for seed in (0, 1))),
    "signs: every weight positive": (shortcut, "_sign", lambda value: 1,
                                     lambda: chain(sign_violations("relu", 0), sign_violations("tanh", 1))),
}  # fmt: skip


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_a_tightened_relaxation_is_caught(mutation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check that passes on the checker as it is (the tests above, same seeds) finds a point
    that the mutated relaxation cuts off."""
    owner, attribute, replacement, check = MUTATIONS[mutation]
    monkeypatch.setattr(owner, attribute, replacement)
    assert next(iter(check()), None) is not None


def test_only_the_generators_and_the_commands_import_the_checker() -> None:
    """docs/proofs.md, *What the generators share with the checker*, lists every file outside
    cardinal/checker/ that imports it: a new one must be listed there too."""
    root = Path(__file__).resolve().parents[2]
    users = set()
    for path in sorted(
        path for folder in ("cardinal", "solvers", "verify", "bench", "examples") for path in (root / folder).glob("**/*.py")
    ):
        name = path.relative_to(root).as_posix()
        if name.startswith("cardinal/checker/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("cardinal")):
                module = node.module or ""
                if module.split(".")[-1] == "checker" or any(alias.name == "checker" for alias in node.names):
                    users.add(name)
            elif isinstance(node, ast.Import) and any(alias.name.startswith("cardinal.checker") for alias in node.names):
                users.add(name)
    assert users == {
        "solvers/proof.py", "solvers/proof_lp.py", "solvers/proof_box.py", "solvers/reset_bound.py", "verify/proofs.py", "bench/digits.py",
        "bench/certificates.py",
    }  # fmt: skip

"""An exact oracle for the seam probes, independent of `cardinal.exact` and `cardinal.bounds`.

Every number is a Python `Fraction` (each double read exactly). Piecewise-linear units are
evaluated exactly; sigmoid and tanh exactly at 0 (1/2 and 0), elsewhere as an mpmath value at
320 bits widened by 2^-260 on each side, softplus likewise everywhere — so a smooth value is an
interval [low, high] of Fractions, and a comparison is decided only when the intervals say so.

What it decides, for a network whose layers `cardinal.network.Layer` describes:

* `Oracle.prediction(y)`: p(y) ∈ {0, 1}, or None when the interval of f(y) holds t.
* `Oracle.flips(free)`: does some y of the box, equal to x off `free`, flip p(x)? True, False or
  None (not decidable here). Monotone networks: the monotone shortcut (one point). Binary boxes:
  every vertex. Continuous boxes of other networks: only continuous piecewise-linear networks,
  at most `MAX_FREE` free features: f is then linear on the cells of an arrangement of
  hyperplanes, its extremes over the box lie at the cells' vertices, and every vertex is the
  solution of |free| equations taken from a superset of the arrangement's hyperplanes (the
  breakpoints of each unit under every piece of the units before it) and the box's faces.
* `Oracle.valid(kind, S)`, `Oracle.sizes(kind)` (the smallest size of a surely valid set, and
  the smallest size that may hold one), `Oracle.algorithm1(kind)`: every answer Algorithm 1 can
  give under the orders and predictions the intervals leave open (one answer: decided).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from fractions import Fraction

import mpmath
import numpy as np

from cardinal.network import Network

Interval = tuple[Fraction, Fraction]
MAX_FREE = 3
_PREC = 320
_PAD = Fraction(1, 2**260)
_CONTINUOUS_PWL = {"identity", "relu", "leaky_relu", "hardtanh"}
_SMOOTH = {"sigmoid", "tanh", "softplus"}


def _mp(value: Fraction) -> mpmath.mpf:
    return mpmath.mpf(value.numerator) / value.denominator


def _fraction(value: mpmath.mpf) -> Fraction:
    sign, mantissa, exponent, _ = value._mpf_  # value = (-1)^sign · mantissa · 2^exponent, exactly (no rounding)
    if not mantissa:
        return Fraction(0)
    return (-1) ** sign * Fraction(int(mantissa)) * Fraction(2) ** int(exponent)


def _smooth(name: str, q: Fraction) -> Interval:
    if q == 0 and name == "sigmoid":
        return Fraction(1, 2), Fraction(1, 2)
    if q == 0 and name == "tanh":
        return Fraction(0), Fraction(0)
    if abs(q) >= 1000:  # e^-1000 < 2^-1442: the tails, without asking mpmath for exp(±1e300)
        tail = Fraction(1, 2**1400)
        return {
            ("sigmoid", True): (1 - tail, Fraction(1)),
            ("sigmoid", False): (Fraction(0), tail),
            ("tanh", True): (1 - tail, Fraction(1)),
            ("tanh", False): (Fraction(-1), tail - 1),
            ("softplus", True): (q, q + tail),
            ("softplus", False): (Fraction(0), tail),
        }[name, q > 0]
    with mpmath.workprec(_PREC):
        z = _mp(q)
        if name == "sigmoid":
            value = 1 / (1 + mpmath.exp(-z))
        elif name == "tanh":
            value = mpmath.tanh(z)
        else:
            value = mpmath.log1p(mpmath.exp(z))
    middle = _fraction(value)
    pad = _PAD * max(1, abs(middle))
    low, high = middle - pad, middle + pad
    if name == "sigmoid":
        low, high = max(low, Fraction(0)), min(high, Fraction(1))
    elif name == "tanh":
        low, high = max(low, Fraction(-1)), min(high, Fraction(1))
    else:
        low = max(low, Fraction(0))
    return low, high


def _activate(name: str, params: dict[str, Fraction], q: Fraction) -> Interval:
    if name in _SMOOTH:
        return _smooth(name, q)
    if name == "identity":
        value = q
    elif name == "relu":
        value = max(q, Fraction(0))
    elif name == "leaky_relu":
        value = q if q >= 0 else params["slope"] * q
    elif name == "hardtanh":
        value = min(max(q, params["min"]), params["max"])
    elif name == "step":
        value = Fraction(1) if q >= params["at"] else Fraction(0)
    else:
        raise ValueError(name)
    return value, value


def _apply(name: str, params: dict[str, Fraction], low: Fraction, high: Fraction) -> Interval:
    """σ over [low, high]; every activation is non-decreasing, so the end points bound it."""
    return _activate(name, params, low)[0], _activate(name, params, high)[1]


def _pieces(name: str, params: dict[str, Fraction]) -> list[tuple[Fraction, Fraction]]:
    """Each linear piece (slope, offset) a continuous PWL unit or a step can take."""
    one, zero = Fraction(1), Fraction(0)
    return {
        "identity": [(one, zero)],
        "relu": [(zero, zero), (one, zero)],
        "leaky_relu": [(params.get("slope", zero), zero), (one, zero)],
        "hardtanh": [(zero, params.get("min", zero)), (one, zero), (zero, params.get("max", zero))],
        "step": [(zero, zero), (zero, one)],
    }[name]


def _breakpoints(name: str, params: dict[str, Fraction]) -> list[Fraction]:
    return {"identity": [], "relu": [Fraction(0)], "leaky_relu": [Fraction(0)], "step": [params.get("at", Fraction(0))]}.get(
        name, [params.get("min", Fraction(0)), params.get("max", Fraction(0))]
    )


class ExactLayers:
    """A network's layers as Fractions: weight rows, biases, activation name and parameters."""

    def __init__(self, net: Network) -> None:
        self.layers = [
            (
                [[Fraction(float(w)) for w in row] for row in layer.weight],
                [Fraction(float(b)) for b in layer.bias],
                layer.activation.name,
                {key: Fraction(float(value)) for key, value in layer.activation.params},
            )
            for layer in net.layers
        ]
        self.names = {name for _, _, name, _ in self.layers}
        self.monotone = all(w >= 0 for weight, _, _, _ in self.layers for row in weight for w in row)

    def first_preactivations(self, y: Sequence[Fraction]) -> tuple[Fraction, ...]:
        weight, bias, _, _ = self.layers[0]
        return tuple(sum((w * v for w, v in zip(row, y, strict=True)), b) for row, b in zip(weight, bias, strict=True))

    def value(self, y: Sequence[Fraction]) -> Interval:
        """f(y) as an interval (a point for piecewise-linear networks)."""
        low, high = self.outputs(y)
        return low[0], high[0]

    def outputs(self, y: Sequence[Fraction]) -> tuple[list[Fraction], list[Fraction]]:
        """Every output f_0 … f_{K−1} at y [n] as intervals: (lower ends [K], upper ends [K])."""
        low: list[Fraction] = list(y)
        high: list[Fraction] = list(y)
        for weight, bias, name, params in self.layers:
            next_low, next_high = [], []
            for row, b in zip(weight, bias, strict=True):
                lo = b + sum(w * (low[i] if w >= 0 else high[i]) for i, w in enumerate(row))
                hi = b + sum(w * (high[i] if w >= 0 else low[i]) for i, w in enumerate(row))
                a, c = _apply(name, params, lo, hi)
                next_low.append(a)
                next_high.append(c)
            low, high = next_low, next_high
        return low, high


def _solve(rows: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction] | None:
    """The unique solution of a square system, or None (Gauss–Jordan over Fractions)."""
    k = len(rows)
    matrix = [[*row, value] for row, value in zip(rows, rhs, strict=True)]
    for column in range(k):
        pivot = next((r for r in range(column, k) if matrix[r][column] != 0), None)
        if pivot is None:
            return None
        matrix[column], matrix[pivot] = matrix[pivot], matrix[column]
        head = matrix[column][column]
        matrix[column] = [v / head for v in matrix[column]]
        for r in range(k):
            if r != column and matrix[r][column] != 0:
                factor = matrix[r][column]
                matrix[r] = [a - factor * b for a, b in zip(matrix[r], matrix[column], strict=True)]
    return [matrix[r][k] for r in range(k)]


class Oracle:
    """Exact answers about one input x [n] of `net` on the box [lower, upper] at threshold t."""

    def __init__(
        self,
        net: Network,
        x: Sequence[float],
        threshold: float,
        lower: Sequence[float],
        upper: Sequence[float],
        binary: bool = False,
    ) -> None:
        self.net = ExactLayers(net)
        self.x = [Fraction(float(v)) for v in x]
        self.t = Fraction(float(threshold))
        self.lower = [Fraction(float(v)) for v in lower]
        self.upper = [Fraction(float(v)) for v in upper]
        self.binary = binary
        self.n = len(self.x)
        self.p = self.prediction(self.x)
        self._flips: dict[frozenset[int], bool | None] = {}

    def prediction(self, y: Sequence[Fraction], near: Fraction = Fraction(0)) -> int | None:
        """p(y), None when f(y) may lie on either side of t (its interval, widened by `near`)."""
        low, high = self.net.value(y)
        if low - near > self.t:
            return 1
        if high + near <= self.t:
            return 0
        return None

    @property
    def counterpoint(self) -> list[Fraction]:
        return self.lower if self.p == 1 else self.upper

    def moved(self, features: Iterable[int], base: Sequence[Fraction], target: Sequence[Fraction]) -> list[Fraction]:
        y = list(base)
        for i in features:
            y[i] = target[i]
        return y

    def flips(self, free: Iterable[int]) -> bool | None:
        """Some y of the box equal to x off `free` has p(y) ≠ p(x): True, False, None (open)."""
        free = frozenset(free)
        if free not in self._flips:
            self._flips[free] = self._decide_flip(free)
        return self._flips[free]

    def _decide_flip(self, free: frozenset[int]) -> bool | None:
        if self.p is None:
            return None
        if self.net.monotone:
            outcome = self.prediction(self.moved(free, self.x, self.counterpoint))
            return None if outcome is None else outcome != self.p
        if self.binary:
            points = (self._vertex(free, corner) for corner in itertools.product((0, 1), repeat=len(free)))
        elif self.net.names <= _CONTINUOUS_PWL and len(free) <= MAX_FREE:
            points = self._cell_vertices(sorted(free))
        else:
            return None
        undecided = False
        for y in points:
            outcome = self.prediction(y)
            if outcome is None:
                undecided = True
            elif outcome != self.p:
                return True
        return None if undecided else False

    def _vertex(self, free: frozenset[int], corner: tuple[int, ...]) -> list[Fraction]:
        y = list(self.x)
        for i, bit in zip(sorted(free), corner, strict=True):
            y[i] = self.upper[i] if bit else self.lower[i]
        return y

    def _hyperplanes(self, free: list[int]) -> list[tuple[list[Fraction], Fraction]]:
        """(a, c): a·y_free = c for every breakpoint of every unit, under every piece choice of
        the units before it (a superset of the arrangement's hyperplanes)."""
        planes: list[tuple[list[Fraction], Fraction]] = []
        # affine maps of the current layer's inputs in y_free: (coefficients [k], constant)
        inputs = [([Fraction(int(i == j)) for j in free], Fraction(0) if i in free else self.x[i]) for i in range(self.n)]
        maps: list[list[tuple[list[Fraction], Fraction]]] = [inputs]
        for weight, bias, name, params in self.net.layers[:-1] if len(self.net.layers) > 1 else []:
            next_maps = []
            for z in maps:
                pre = [
                    (
                        [sum((w * z[i][0][j] for i, w in enumerate(row)), Fraction(0)) for j in range(len(free))],
                        b + sum((w * z[i][1] for i, w in enumerate(row)), Fraction(0)),
                    )
                    for row, b in zip(weight, bias, strict=True)
                ]
                for coefficients, constant in pre:
                    planes += [(coefficients, point - constant) for point in _breakpoints(name, params)]
                for choice in itertools.product(*[_pieces(name, params) for _ in pre]):
                    next_maps.append(
                        [
                            ([slope * c for c in coefficients], slope * constant + offset)
                            for (slope, offset), (coefficients, constant) in zip(choice, pre, strict=True)
                        ]
                    )
            maps = next_maps
        *_, (_, _, name, params) = self.net.layers
        if name != "identity":
            raise ValueError("the oracle takes an identity output layer")
        return planes

    def _cell_vertices(self, free: list[int]) -> Iterable[list[Fraction]]:
        k = len(free)
        if k == 0:
            yield list(self.x)
            return
        faces = []
        for j, i in enumerate(free):
            unit = [Fraction(int(j == m)) for m in range(k)]
            faces += [(unit, self.lower[i]), (unit, self.upper[i])]
        equations = [p for p in self._hyperplanes(free) if any(p[0])] + faces
        seen = set()
        for chosen in itertools.combinations(equations, k):
            solution = _solve([a for a, _ in chosen], [c for _, c in chosen])
            if solution is None:
                continue
            if any(not self.lower[i] <= v <= self.upper[i] for i, v in zip(free, solution, strict=True)):
                continue
            key = tuple(solution)
            if key in seen:
                continue
            seen.add(key)
            y = list(self.x)
            for i, v in zip(free, solution, strict=True):
                y[i] = v
            yield y

    # ------------------------------------------------------------------ explanations
    def valid(self, kind: str, features: Iterable[int]) -> bool | None:
        """S is an explanation of `kind`: True, False, None (open)."""
        features = frozenset(features)
        if kind == "contrastive":
            return self.flips(features)
        flip = self.flips(frozenset(range(self.n)) - features)
        return None if flip is None else not flip

    def table(self, kind: str) -> dict[tuple[int, ...], bool | None]:
        return {s: self.valid(kind, s) for size in range(self.n + 1) for s in itertools.combinations(range(self.n), size)}

    def sizes(self, kind: str) -> tuple[int | None, int | None]:
        """(smallest size that may hold a valid set, smallest size of a surely valid set); None: none."""
        table = self.table(kind)
        maybe = [len(s) for s, v in table.items() if v is not False]
        sure = [len(s) for s, v in table.items() if v is True]
        return (min(maybe) if maybe else None), (min(sure) if sure else None)

    def algorithm1(self, kind: str, near: Fraction = Fraction(0)) -> set[tuple[int, ...] | None]:
        """Every answer Algorithm 1 can give (monotone networks), None for "no CXp".

        `near` > 0: also every answer a float run can give whose rounding errs by at most `near`
        in a score or in f at a prefix — a comparison closer than `near` (ties included) may go
        either way, whatever summation order the BLAS used."""
        assert self.net.monotone and self.p is not None
        goal = 1 - self.p if kind == "contrastive" else self.p
        base, target = (self.x, self.counterpoint) if kind == "contrastive" else (self.counterpoint, self.x)
        points = [self.moved([j], base, target) for j in range(self.n)]
        scores = [(low - near, high + near) for low, high in (self.net.value(y) for y in points)]
        first = [self.net.first_preactivations(y) for y in points]

        def before(a: int, b: int) -> bool | None:
            """a comes before b: True, False, or None (undecided)."""
            (la, ha), (lb, hb) = scores[a], scores[b]
            equal = (la == ha == lb == hb) or first[a] == first[b]
            if equal and not near:
                return a < b
            if goal == 1:  # the largest score first
                if la > hb:
                    return True
                if ha < lb:
                    return False
            else:
                if ha < lb:
                    return True
                if la > hb:
                    return False
            return None

        answers: set[tuple[int, ...] | None] = set()
        for order in itertools.permutations(range(self.n)):
            if any(before(order[j], order[i]) is True for i in range(self.n) for j in range(i + 1, self.n)):
                continue
            answers |= self._prefixes(order, goal, base, target, kind, near)
        return answers

    def _prefixes(
        self, order: tuple[int, ...], goal: int, base: Sequence[Fraction], target: Sequence[Fraction], kind: str, near: Fraction
    ) -> set[tuple[int, ...] | None]:
        """Algorithm 1's answers along one order: move features base → target in that order until
        the prediction reaches `goal` (every branch an undecided prediction leaves open)."""
        answers: set[tuple[int, ...] | None] = set()
        branches = [0]  # prefix lengths still running
        while branches:
            k = branches.pop()
            outcome = self.prediction(self.moved(order[:k], base, target), near)
            stop = {True} if outcome == goal else {False} if outcome is not None else {True, False}
            if True in stop:
                answers.add(tuple(sorted(order[:k])))
            if False in stop:
                if k == self.n:
                    answers.add(None if kind == "contrastive" else tuple(range(self.n)))
                else:
                    branches.append(k + 1)
        return answers


def as_fractions(values: np.ndarray) -> list[Fraction]:
    return [Fraction(float(v)) for v in np.asarray(values, dtype=np.float64).reshape(-1)]

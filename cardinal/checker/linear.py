"""The leaf "linear" of method "shortcut-tree" (docs/proofs.md): a budgeted linear bound over a
node's sets, computed by the checker alone, for networks of identity, relu, leaky_relu and
hardtanh layers.

Each unit's pre-activation over the node's sets is bounded by two linear forms over the
selection variables s ∈ {0,1}^open (an upper and a lower one), layer by layer: the first layer's
is exact; through a unit, σ lies below an upper line and above a lower line over the unit's range
(any slope a ≥ 0 with the offset max (min) of σ(p) − a·p over the range's ends and σ's kinks
inside: valid by construction, as σ is linear between those points); the next layer takes the
upper form through its positive weights and the lower one through its negative ones. A form's
range over the sets that matter (|s| = r exactly, below) is its constant plus its r largest (r
smallest) coefficients; a unit that the sign analysis finds monotone along the shortcut also lies
between its exact values at y(in) and y(in ∪ open), which cuts that range. Every number is an
integer multiple of 2^-`BITS`, each rounded outwards (a form's coefficient up in an upper form,
down in a lower one: s ≥ 0), so the integers stay small; nothing is a float.

Validity is closed upwards along the shortcut, so a node has a set of at most k features that is
an explanation iff it has one with min(k − |in|, |open|) open features: the bounds range over
those sets only."""

from __future__ import annotations

from fractions import Fraction

from .exact import _Net, _Rejected, _scaled

BITS = 64  # the grid: every bound, slope, offset and coefficient is a multiple of 2^-BITS
_KINKS = {"identity": (), "relu": ("zero",), "leaky_relu": ("zero",), "hardtanh": ("min", "max")}
LAYERS = tuple(_KINKS)  # the activations whose networks the leaf "linear" takes
Form = list[int]  # coefficients over the open features, then the constant; × 2^-BITS
Lines = tuple[int, int, int, int]  # a unit's upper slope, upper offset, lower slope, lower offset; × 2^-BITS


def _down(value: int, shift: int) -> int:
    """⌊value · 2^-shift⌋ (shift ≥ 0)."""
    return value >> shift


def _up(value: int, shift: int) -> int:
    return -((-value) >> shift)


def _grid(value: Fraction, upward: bool) -> int:
    """value rounded to the grid, up or down, as an integer × 2^-BITS."""
    scaled = value * (1 << BITS)
    return -((-scaled.numerator) // scaled.denominator) if upward else scaled.numerator // scaled.denominator


class LinearBound:
    """The bound along one shortcut: `base`, `target` [n]; `moves` [w₀][n] (d_ji = W₁[j,i]·(target_i
    − base_i), integers × 2^-`shift`); `monotone` [layer][unit]: +1 where the unit's pre-activation
    is non-decreasing in each s_i along the shortcut, −1 non-increasing, 0 neither (the sign analysis)."""

    def __init__(
        self, net: _Net, base: list[Fraction], target: list[Fraction], moves: list[list[int]], shift: int,
        monotone: list[list[int]],
    ) -> None:  # fmt: skip
        for number, layer in enumerate(net.layers):
            if layer.name not in _KINKS:
                raise _Rejected(f"leaf 'linear': layer {number} is {layer.name}, not identity, relu, leaky_relu or hardtanh")
        self.net, self.base, self.target, self.moves, self.shift, self.monotone = net, base, target, moves, shift, monotone

    def bound(
        self, chosen: frozenset[int], open_: list[int], budget: int, goal: int, threshold: Fraction, at_most: bool = False
    ) -> tuple[bool, Form]:
        """Whether no set of in = `chosen` plus `budget` (or all, if fewer) of `open_` reaches `goal`
        (f > `threshold` for goal 1, f ≤ it for 0), and the coefficients of the output's form that
        decides it (upper for goal 1, lower for goal 0) [open], × 2^-BITS. `at_most`: plus at most
        `budget` of `open_` (method "reset-bound", where validity is not closed upwards): a form's
        range then takes only the negative (positive) ones of its r smallest (largest) coefficients."""
        r = min(budget, len(open_))
        low_part, high_part = (min, max) if at_most else ((lambda c, _: c),) * 2
        floor = self._pre_activations(chosen)  # each unit between its values at y(in) and y(in ∪ open)
        ceiling = self._pre_activations(chosen | frozenset(open_))
        upper, lower = self._first(floor[0], open_)
        lines: list[Lines] = []  # the previous layer's units' lines
        for number, layer in enumerate(self.net.layers):
            if number:
                upper, lower = self._affine(number, lines, upper, lower)
            lows = [form[-1] + sum(low_part(c, 0) for c in sorted(form[:-1])[:r]) for form in lower]
            highs = [form[-1] + sum(high_part(c, 0) for c in sorted(form[:-1], reverse=True)[:r]) for form in upper]
            for unit, direction in enumerate(self.monotone[number]):
                if direction:
                    ends = sorted((floor[number][unit], ceiling[number][unit]))
                    lows[unit], highs[unit] = max(lows[unit], _grid(ends[0], False)), min(highs[unit], _grid(ends[1], True))
            if number == len(self.net.layers) - 1:
                break
            kinks = [Fraction(0) if name == "zero" else layer.params[name] for name in _KINKS[layer.name]]
            lines = [_lines(self.net, number, kinks, low, high) for low, high in zip(lows, highs, strict=True)]
        scale = Fraction(1, 1 << BITS)
        if goal == 1:  # an explanation needs f > t
            return self.net.activate(number, [], [scale * highs[0]])[1][0] <= threshold, upper[0][:-1]
        return self.net.activate(number, [scale * lows[0]], [])[0][0] > threshold, lower[0][:-1]

    def _pre_activations(self, chosen: frozenset[int]) -> list[list[Fraction]]:
        """Every layer's pre-activations [layer][unit] at y(chosen), exact."""
        z = [t if i in chosen else b for i, (b, t) in enumerate(zip(self.base, self.target, strict=True))]
        every = []
        for number in range(len(self.net.layers)):
            h = self.net.affine(number, z, z)[0]
            every.append(h)
            z = self.net.activate(number, h, h)[0]
        return every

    def _first(self, centres: list[Fraction], open_: list[int]) -> tuple[list[Form], list[Form]]:
        """The first layer's pre-activations as forms over s: `centres` (its values at y(in)) plus
        the open features' moves, exact, then rounded outwards."""
        upper, lower = [], []
        grow = BITS - self.shift
        for centre, moves in zip(centres, self.moves, strict=True):
            coefficients = [moves[i] << grow if grow >= 0 else moves[i] for i in open_]
            if grow >= 0:
                upper.append([*coefficients, _grid(centre, True)])
                lower.append([*coefficients, _grid(centre, False)])
            else:
                upper.append([*(_up(c, -grow) for c in coefficients), _grid(centre, True)])
                lower.append([*(_down(c, -grow) for c in coefficients), _grid(centre, False)])
        return upper, lower

    def _affine(self, number: int, lines: list[Lines], upper: list[Form], lower: list[Form]) -> tuple[list[Form], list[Form]]:
        """Layer `number`'s pre-activations as forms, from the previous layer's forms and its units'
        lines: u′ = W⁺·(a ⊙ u + β) + W⁻·(a′ ⊙ l + β′) + b, l′ = W⁺·(a′ ⊙ l + β′) + W⁻·(a ⊙ u + β) + b."""
        positive, negative, shift = self.net.scaled[number]
        a_up, b_up, a_low, b_low = (list(column) for column in zip(*lines, strict=True))
        up_columns, low_columns = list(zip(*upper, strict=True)), list(zip(*lower, strict=True))
        scale = BITS + shift  # a weight × a slope × a coefficient is × 2^-(2·BITS + shift)
        new_upper, new_lower = [], []
        for p, q, bias in zip(positive, negative, self.net.layers[number].bias, strict=True):
            high = _combine(_times(p, a_up), up_columns, _times(q, a_low), low_columns)
            low = _combine(_times(p, a_low), low_columns, _times(q, a_up), up_columns)
            high[-1] += (_dot(p, b_up) + _dot(q, b_low)) << BITS
            low[-1] += (_dot(p, b_low) + _dot(q, b_up)) << BITS
            new_upper.append([_up(v, scale) for v in high])
            new_upper[-1][-1] += _grid(bias, True)
            new_lower.append([_down(v, scale) for v in low])
            new_lower[-1][-1] += _grid(bias, False)
        return new_upper, new_lower


def _times(row: list[int], slopes: list[int]) -> list[int]:
    return [w * a for w, a in zip(row, slopes, strict=True)]


def _combine(first: list[int], columns: list[tuple[int, ...]], second: list[int], others: list[tuple[int, ...]]) -> list[int]:
    """Per column i: first · columns[i] + second · others[i] (the second left out when all zero)."""
    if not any(second):
        return [_dot(first, column) for column in columns]
    return [_dot(first, column) + _dot(second, other) for column, other in zip(columns, others, strict=True)]


def _dot(row: list[int], values: tuple[int, ...] | list[int]) -> int:
    return sum(w * v for w, v in zip(row, values, strict=True) if w)


def _lines(net: _Net, number: int, kinks: list[Fraction], low: int, high: int) -> Lines:
    """The lines of one unit of layer `number` over its range [low, high] (× 2^-BITS): (upper
    slope, upper offset, lower slope, lower offset), each × 2^-BITS. Each slope is the chord's or
    that of σ's piece at the range's middle, rounded down onto the grid (any slope ≥ 0 is
    valid), with the offset that makes its line valid: max (upper) or min (lower) of σ(p) − a·p
    over the ends and the kinks inside; of the two lines, the one nearer σ at the middle."""
    scale = Fraction(1, 1 << BITS)
    points = sorted({scale * low, scale * high, *(c for c in kinks if scale * low < c < scale * high)})
    values = net.activate(number, points, points)[0]  # piecewise linear: exact
    if len(points) == 1:
        return 0, _grid(values[0], True), 0, _grid(values[0], False)
    ints, shift = _scaled(points + values)  # every one × 2^-shift, exactly
    p, v = ints[: len(points)], ints[len(points) :]
    piece = next(i for i in range(len(p) - 1) if 2 * p[i + 1] >= p[0] + p[-1])
    slopes = [((v[j] - v[i]) << BITS) // (p[j] - p[i]) for i, j in ((0, -1), (piece, piece + 1))]
    # σ(p) − a·p per slope and point, × 2^-(shift + BITS)
    gaps = [[(value << BITS) - a * point for point, value in zip(p, v, strict=True)] for a in slopes]

    def line(upper: bool) -> tuple[int, int]:
        offsets = [max(row) if upper else min(row) for row in gaps]
        at_middle = [a * (p[0] + p[-1]) + 2 * b for a, b in zip(slopes, offsets, strict=True)]
        best = at_middle.index(min(at_middle) if upper else max(at_middle))
        return slopes[best], _up(offsets[best], shift) if upper else _down(offsets[best], shift)

    return *line(True), *line(False)

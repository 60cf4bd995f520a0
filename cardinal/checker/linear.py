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
smallest) coefficients. Every number is an integer multiple of 2^-`BITS`, each rounded outwards
(a form's coefficient up in an upper form, down in a lower one: s ≥ 0), so the integers stay
small; nothing is a float.

Validity is closed upwards along the shortcut, so a node has a set of at most k features that is
an explanation iff it has one with min(k − |in|, |open|) open features: the bounds range over
those sets only."""

from __future__ import annotations

from fractions import Fraction

from .exact import _Net, _Rejected

BITS = 64  # the grid: every bound, slope, offset and coefficient is a multiple of 2^-BITS
_KINKS = {"identity": (), "relu": ("zero",), "leaky_relu": ("zero",), "hardtanh": ("min", "max")}
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
    """The bound of one shortcut: `centres` [w₀] (the first layer at base, exact) and `moves`
    [w₀][n] (d_ji = W₁[j,i]·(target_i − base_i), integers × 2^-`shift`)."""

    def __init__(
        self, net: _Net, centres: list[Fraction], moves: list[list[int]], shift: int, goal: int, threshold: Fraction
    ) -> None:
        for number, layer in enumerate(net.layers):
            if layer.name not in _KINKS:
                raise _Rejected(f"leaf 'linear': layer {number} is {layer.name}, not identity, relu, leaky_relu or hardtanh")
        self.net, self.centres, self.moves, self.shift = net, centres, moves, shift
        self.goal, self.threshold = goal, threshold

    def closes(self, chosen: frozenset[int], open_: list[int], budget: int) -> bool:
        """Whether no set of in = `chosen` plus `budget` (or all, if fewer) of `open_` reaches the goal."""
        r = min(budget, len(open_))
        upper, lower = self._first(chosen, open_)
        lines: list[Lines] = []  # the previous layer's units' lines
        for number, layer in enumerate(self.net.layers):
            if number:
                upper, lower = self._affine(number, lines, upper, lower)
            lows = [form[-1] + sum(sorted(form[:-1])[:r]) for form in lower]
            highs = [form[-1] + sum(sorted(form[:-1], reverse=True)[:r]) for form in upper]
            if number == len(self.net.layers) - 1:
                break
            kinks = [Fraction(0) if name == "zero" else layer.params[name] for name in _KINKS[layer.name]]
            lines = [_lines(self.net, number, kinks, low, high) for low, high in zip(lows, highs, strict=True)]
        scale = Fraction(1, 1 << BITS)
        if self.goal == 1:  # an explanation needs f > t
            return self.net.activate(number, [], [scale * highs[0]])[1][0] <= self.threshold
        return self.net.activate(number, [scale * lows[0]], [])[0][0] > self.threshold

    def _first(self, chosen: frozenset[int], open_: list[int]) -> tuple[list[Form], list[Form]]:
        """The first layer's pre-activations as forms over s: exact, then rounded outwards."""
        upper, lower = [], []
        grow = BITS - self.shift
        for centre, moves in zip(self.centres, self.moves, strict=True):
            fixed = centre + Fraction(sum(moves[i] for i in chosen), 1 << self.shift)
            coefficients = [moves[i] << grow if grow >= 0 else moves[i] for i in open_]
            if grow >= 0:
                upper.append([*coefficients, _grid(fixed, True)])
                lower.append([*coefficients, _grid(fixed, False)])
            else:
                upper.append([*(_up(c, -grow) for c in coefficients), _grid(fixed, True)])
                lower.append([*(_down(c, -grow) for c in coefficients), _grid(fixed, False)])
        return upper, lower

    def _affine(self, number: int, lines: list[Lines], upper: list[Form], lower: list[Form]) -> tuple[list[Form], list[Form]]:
        """Layer `number`'s pre-activations as forms, from the previous layer's forms and the lines
        (upper slope, upper offset, lower slope, lower offset) of its units."""
        positive, negative, shift = self.net.scaled[number]
        bias = self.net.layers[number].bias
        upper_columns = list(zip(*upper, strict=True))
        lower_columns = list(zip(*lower, strict=True))
        new_upper, new_lower = [], []
        total = 2 * BITS + shift  # a weight × a slope × a coefficient
        for p_row, q_row, b in zip(positive, negative, bias, strict=True):
            # z ≤ a·form + c with a ≥ 0: the upper form of z is a·(upper form) + c, the lower one likewise
            up_z = [p * a_up for p, (a_up, _, _, _) in zip(p_row, lines, strict=True)]
            low_z = [q * a_low for q, (_, _, a_low, _) in zip(q_row, lines, strict=True)]
            up_rows = [(p * a_low) for p, (_, _, a_low, _) in zip(p_row, lines, strict=True)]
            low_rows = [(q * a_up) for q, (a_up, _, _, _) in zip(q_row, lines, strict=True)]
            high = [_dot(up_z, u) + _dot(low_z, v) for u, v in zip(upper_columns, lower_columns, strict=True)]
            low = [_dot(up_rows, v) + _dot(low_rows, u) for u, v in zip(upper_columns, lower_columns, strict=True)]
            high_offset = sum(p * c_up for p, (_, c_up, _, _) in zip(p_row, lines, strict=True) if p)
            high_offset += sum(q * c_low for q, (_, _, _, c_low) in zip(q_row, lines, strict=True) if q)
            low_offset = sum(p * c_low for p, (_, _, _, c_low) in zip(p_row, lines, strict=True) if p)
            low_offset += sum(q * c_up for q, (_, c_up, _, _) in zip(q_row, lines, strict=True) if q)
            high[-1] += high_offset << BITS
            low[-1] += low_offset << BITS
            new_upper.append([_up(v, total - BITS) for v in high[:-1]] + [_up(high[-1], total - BITS) + _grid(b, True)])
            new_lower.append([_down(v, total - BITS) for v in low[:-1]] + [_down(low[-1], total - BITS) + _grid(b, False)])
        return new_upper, new_lower


def _dot(row: list[int], values: tuple[int, ...]) -> int:
    return sum(w * v for w, v in zip(row, values, strict=True) if w)


def _lines(net: _Net, number: int, kinks: list[Fraction], low: int, high: int) -> Lines:
    """The lines of one unit of layer `number` over its range [low, high] (× 2^-BITS): (upper
    slope, upper offset, lower slope, lower offset), each × 2^-BITS. Upper slope: the chord's;
    lower slope: that of σ's piece at the range's middle; both rounded down onto the grid (any
    slope ≥ 0 is valid). Offsets: max (min) of σ(p) − a·p over the ends and the kinks inside."""
    scale = Fraction(1, 1 << BITS)
    points = sorted({scale * low, scale * high, *(c for c in kinks if scale * low < c < scale * high)})
    values = net.activate(number, points, points)[0]  # piecewise linear: exact
    if len(points) == 1:
        return 0, _grid(values[0], True), 0, _grid(values[0], False)
    chord = (values[-1] - values[0]) / (points[-1] - points[0])
    middle = (points[0] + points[-1]) / 2
    piece = next(i for i in range(len(points) - 1) if points[i + 1] >= middle)
    tangent = (values[piece + 1] - values[piece]) / (points[piece + 1] - points[piece])
    a_up, a_low = _grid(chord, False), _grid(tangent, False)
    up_offset = max(v - scale * a_up * p for p, v in zip(points, values, strict=True))
    low_offset = min(v - scale * a_low * p for p, v in zip(points, values, strict=True))
    return a_up, _grid(up_offset, True), a_low, _grid(low_offset, False)

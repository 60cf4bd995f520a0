"""Method "lp-tree" (docs/proofs.md, *LP bounds*): CXps of identity, relu, leaky_relu (slope in
[0, 1)) and hardtanh networks, K ≥ 1: the checker's own LP relaxation (`LpRelaxation`, the
reference encoding, which cardinal's generator uses too) and weak duality, in rationals."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, NamedTuple

from .exact import CertificateError, _apply, _index, _Layer, _Lazy, _Net, _number, _predict, _Rejected, network_sha256


class _Goal(NamedTuple):
    """What a leaf of one rival's tree must show: the objective g {variable: coefficient} whose
    safe lower bound B must pass `target` (strictly when `strict`)."""

    objective: dict[int, Fraction]
    target: Fraction
    strict: bool


_Side = Fraction | None  # a row's side; None: absent (infinite)


_Sides = tuple[int, _Side, _Side]  # a row and its new sides


class _Break(NamedTuple):
    """An unstable breakpoint `at` of a unit (h, z variables): a node splits h ≥ at (`above`) from
    h ≤ at (`below`). Each phase raises h's lower (lowers its upper) bound to `at` and gives one of
    the unit's rows new sides, or, where None, moves z's bound the same way to σ(at) = at."""

    h: int
    z: int
    at: Fraction
    above: _Sides | None
    below: _Sides | None


class LpRelaxation:
    """Method "lp-tree" (CXps of piecewise-linear networks, K ≥ 1): the LP relaxation of "some y
    of the box, equal to x off at most k features, is predicted other than p(x)", built here from
    the network and its exact interval bounds over the box — the reference encoding
    (docs/proofs.md: variables, rows and their order), which cardinal's generator builds through
    this class too — and the tree (one per rival class when K ≥ 2) whose every leaf a safe LP
    bound closes."""

    def __init__(self, net: _Net, x: list[Fraction], box: tuple, threshold: Fraction | None, prediction: int, k: int) -> None:
        lower, upper, binary = box
        n = len(x)
        zero = Fraction(0)
        self.n = n
        self.lo, self.hi = [zero] * n + list(lower), [Fraction(1)] * n + list(upper)  # s [n], y [n], then per unit h (, z)
        self.rows: list[tuple[dict[int, Fraction], Fraction | None, Fraction | None]] = []  # a·v, low side, high side
        for i in range(n):
            other = (upper[i] if x[i] == lower[i] else lower[i]) if binary else None
            down, up = (other - x[i], other - x[i]) if binary else (lower[i] - x[i], upper[i] - x[i])
            self.rows.append(({n + i: Fraction(1), i: -down}, x[i], None))  # y_i − down_i·s_i ≥ x_i
            self.rows.append(({n + i: Fraction(1), i: -up}, None, x[i]))  # y_i − up_i·s_i ≤ x_i
        self.rows.append(({i: Fraction(1) for i in range(n)}, None, Fraction(k)))  # Σ s ≤ k
        self.units: dict[tuple[int, ...], _Break] = {}  # [layer, j] (hardtanh: [layer, j, 0 min / 1 max]) → its breakpoint
        previous, low, high = list(range(n, 2 * n)), lower, upper
        for index, layer in enumerate(net.layers):
            if not _piecewise(layer):
                given = ", ".join(f"{key} {float(v)!r}" for key, v in layer.params.items())
                raise _Rejected(
                    "method lp-tree takes relu, leaky_relu (slope in [0, 1)), hardtanh (min ≤ max) and identity layers,"
                    f" layer {index + 1} is {layer.name}" + (f" ({given})" if given else "")
                )
            low, high = net.affine(index, low, high)
            current = []
            for j, (weights, bias) in enumerate(zip(layer.weight, layer.bias, strict=True)):
                h = self._variable(low[j], high[j])
                affine = {h: Fraction(1)}
                for m, w in zip(previous, weights, strict=True):
                    if w:
                        affine[m] = -w
                self.rows.append((affine, bias, bias))  # h − W·z_prev = b
                current.append(h if layer.name == "identity" else self._unit(layer, (index, j), h, low[j], high[j]))
            low, high = net.activate(index, low, high)
            previous = current
        self.outputs, self.threshold, self.prediction = previous, threshold, prediction  # f's variables [K]
        self._integral: list[tuple[int, dict[int, int]]] | None = None  # each row as `_common`, made at the first bound
        classes = len(previous)
        self.rivals = [1 - prediction] if threshold is not None else [j for j in range(classes) if j != prediction]

    def _unit(self, layer: _Layer, unit: tuple[int, ...], h: int, lo: Fraction, hi: Fraction) -> int:
        """The variable z of a relu, leaky_relu or hardtanh unit whose h ranges over [lo, hi]; adds
        its rows (docs/proofs.md) and its unstable breakpoints."""

        def value(v: Fraction) -> Fraction:
            return _apply(layer, v, 0)

        def row(coefficients: dict[int, Fraction], low: _Side, high: _Side) -> int:
            self.rows.append(({v: a for v, a in coefficients.items() if a}, low, high))
            return len(self.rows) - 1

        zero, one = Fraction(0), Fraction(1)
        z = self._variable(value(lo), value(hi))
        if layer.name in ("relu", "leaky_relu"):
            a = layer.params.get("slope", zero)
            on = row({z: one, h: -one}, zero, zero if lo >= 0 else None)  # z ≥ h (= h when stable on)
            off = row({z: one, h: -a}, zero, zero if hi <= 0 else None) if layer.name == "leaky_relu" else None  # z ≥ a·h
            if lo < 0 < hi:  # the chord: (U − L)·z − (U − a·L)·h ≤ −(1 − a)·U·L
                row({z: hi - lo, h: a * lo - hi}, None, (a - 1) * hi * lo)
                self.units[unit] = _Break(h, z, zero, (on, zero, zero), None if off is None else (off, zero, zero))
            else:
                row({}, None, zero)
            return z
        low_break, high_break = layer.params["min"], layer.params["max"]  # hardtanh
        top = row({z: one, h: -one}, None, value(lo) - lo)  # z − h ≤ σ(L) − L (σ(h) − h never rises)
        bottom = row({z: one, h: -one}, value(hi) - hi, None)  # z − h ≥ σ(U) − U
        first, last = min(max(low_break, lo), hi), min(max(high_break, lo), hi)  # the breakpoints clipped to [L, U]
        rise, climb = value(hi) - value(first), value(last) - value(lo)
        # above the chord (m′, σ(m′)) → (U, σ(U)), below the chord (L, σ(L)) → (M′, σ(M′))
        row({z: hi - first, h: -rise}, (hi - first) * value(first) - rise * first, None)
        row({z: last - lo, h: -climb}, None, (last - lo) * value(lo) - climb * lo)
        if lo < low_break < hi:
            self.units[(*unit, 0)] = _Break(h, z, low_break, (top, None, zero), None)
        if lo < high_break < hi:
            self.units[(*unit, 1)] = _Break(h, z, high_break, None, (bottom, zero, None))
        return z

    def goal(self, rival: int) -> _Goal:
        """The objective and the value a leaf's bound must pass to rule out `rival` (docs/proofs.md).
        K = 1: p(x) = 1 needs f ≤ t for a CXp (g = f, B > t closes); p(x) = 0 needs f > t (g = −f,
        B ≥ −t closes). K ≥ 2, c = p(x): rival j wins over c only if f_j ≥ f_c (j < c) or f_j > f_c
        (j > c); g = f_c − f_j, and B > 0 (j < c) or B ≥ 0 (j > c) closes."""
        if self.threshold is not None:
            f = self.outputs[0]
            if self.prediction == 1:
                return _Goal({f: Fraction(1)}, self.threshold, True)
            return _Goal({f: Fraction(-1)}, -self.threshold, False)
        own, other = self.outputs[self.prediction], self.outputs[rival]
        return _Goal({own: Fraction(1), other: Fraction(-1)}, Fraction(0), rival < self.prediction)

    @classmethod
    def of(cls, network: Any, x: list[float], box: tuple, threshold: float | None, k: int) -> LpRelaxation:
        """The relaxation of a problem given as doubles (x [n], box = (lower [n], upper [n], binary),
        `threshold` None for K ≥ 2) on a cardinal.network/1 document: what cardinal's generator
        builds its LPs from."""
        net = _Net(network_sha256(network)[1])
        exact = [Fraction(v) for v in x]
        box = ([Fraction(v) for v in box[0]], [Fraction(v) for v in box[1]], box[2])
        t = None if threshold is None else Fraction(threshold)
        return cls(net, exact, box, t, _predict(net.point(exact), t, "x"), k)

    def node(self, fixed: dict[int, int], phases: dict[tuple[int, ...], bool]) -> tuple[list, list, dict]:
        """A node's variable bounds lo, hi [V] and its changed row sides {row: (low, high)}
        (`fixed`: selector i → 0/1; `phases`: unstable breakpoint → active: h ≥ at; inactive:
        h ≤ at, `_Break`)."""
        lo, hi = list(self.lo), list(self.hi)
        sides: dict[int, tuple[Fraction | None, Fraction | None]] = {}
        for i, value in fixed.items():
            lo[i] = hi[i] = Fraction(value)
        for unit, active in phases.items():
            point = self.units[unit]
            change = point.above if active else point.below
            bounds, variables = (lo, max) if active else (hi, min)
            bounds[point.h] = variables(bounds[point.h], point.at)
            if change is None:
                bounds[point.z] = variables(bounds[point.z], point.at)
            else:
                sides[change[0]] = change[1:]
        return lo, hi, sides

    def _variable(self, lo: Fraction, hi: Fraction) -> int:
        self.lo.append(lo)
        self.hi.append(hi)
        return len(self.lo) - 1

    def bound(
        self, rival: int, fixed: dict[int, int], phases: dict[tuple[int, ...], bool], multipliers: Any, where: Any = ""
    ) -> Fraction:
        """The safe bound Σ_r λ_r·side_r + Σ_j min over [lo_j, hi_j] of (g − Aᵀλ)_j·v_j of the node
        (g: `rival`'s objective; `fixed`: selector i → 0/1; `phases`: breakpoint → active) for
        multipliers λ, a list of [row, value] pairs; a value's sign picks the row's low side (> 0)
        or high side (< 0)."""
        return self._bound(rival, *self.node(fixed, phases), multipliers, where)

    def _bound(self, rival: int, lo: list, hi: list, sides: dict, multipliers: Any, where: Any) -> Fraction:
        """`bound` at a node given by its variable bounds lo, hi [V] and changed row sides: work
        linear in the multiplied rows' sizes (lo and hi are read, never copied). g − Aᵀλ is summed
        in integers over one common denominator (the same rationals, without a gcd per term)."""
        if not isinstance(multipliers, list) or not all(
            isinstance(pair, list) and len(pair) == 2 and _index(pair[0], len(self.rows)) for pair in multipliers
        ):
            raise CertificateError(f"{where}: 'multipliers' must be a list of [row, value] pairs")
        if self._integral is None:
            self._integral = [_common(coefficients) for coefficients, _, _ in self.rows]
        denominator, reduced = _common(self.goal(rival).objective)  # (g − Aᵀλ)_v = reduced[v] / denominator
        total = Fraction(0)
        for row, raw in multipliers:
            value = Fraction(_number(raw, _Lazy(lambda row=row: f"{where}: the multiplier of row {row}")))
            if not value:
                continue
            _, low, high = self.rows[row]
            low, high = sides.get(row, (low, high))
            side = low if value > 0 else high
            if side is None:
                raise _Rejected(f"{where}: the multiplier of row {row} has the sign of its infinite side")
            total += value * side
            scale, coefficients = self._integral[row]
            scale *= value.denominator
            if denominator % scale:
                grow = scale // math.gcd(denominator, scale)
                denominator *= grow
                for variable in reduced:
                    reduced[variable] *= grow
            factor = value.numerator * (denominator // scale)
            for variable, a in coefficients.items():
                reduced[variable] = reduced.get(variable, 0) - factor * a
        return total + sum(min(r * lo[v], r * hi[v]) for v, r in reduced.items() if r) / denominator

    def closes(self, rival: int, bound: Fraction) -> bool:
        """Whether a leaf's bound excludes every point where `rival` wins (docs/proofs.md)."""
        goal = self.goal(rival)
        return bound > goal.target if goal.strict else bound >= goal.target

    def walk(self, root: Any) -> int:
        """Check the certificate's root (docs/proofs.md): K = 1, the tree of rival 1 − p(x); K ≥ 2,
        `{"rivals": [LNODE or null, ...]}`, one tree per class, null at p(x). Returns the leaf count."""
        if self.threshold is not None:
            return self._walk(self.rivals[0], root)
        trees = root.get("rivals") if isinstance(root, dict) else None
        if not isinstance(trees, list) or len(trees) != len(self.outputs) or trees[self.prediction] is not None:
            shape = f"{len(self.outputs)} trees, one per class, null at p(x) = {self.prediction}"
            raise CertificateError(f"the root must be {{'rivals': [...]}}: {shape}")
        return sum(self._walk(rival, trees[rival]) for rival in self.rivals)

    def _walk(self, rival: int, root: Any) -> int:
        """Check the tree of one rival; returns its leaf count. Depth first, the node's state (its
        selectors and phases, variable bounds and changed row sides) changed on the way down and
        restored on the way up, so each node costs its own work, not its depth's or the network's."""
        fixed: dict[int, int] = {}
        phases: dict[tuple[int, ...], bool] = {}
        lo, hi = list(self.lo), list(self.hi)
        sides: dict[int, tuple[Fraction | None, Fraction | None]] = {}
        where = _Lazy(lambda: f"rival {rival}: the node with s {sorted(fixed.items())},"
                              f" active/inactive breakpoints {sorted(phases.items())}")
        undo: list[tuple[Any, Any, Any]] = []  # (dict or list, key, old value or _ABSENT), restored last in first out
        stack: list[tuple[Any, Any]] = [(root, None)]  # (node, the split to make first) or (_UP, undo length to restore)
        leaves = 0
        while stack:
            node, split = stack.pop()
            if node is _UP:
                while len(undo) > split:
                    store, key, old = undo.pop()
                    if old is _ABSENT:
                        del store[key]
                    else:
                        store[key] = old
                continue
            if split is not None:
                stack.append((_UP, len(undo)))
                self._enter(split, fixed, phases, lo, hi, sides, undo)
            if not isinstance(node, dict):
                raise CertificateError(f"{where}: a node must be an object")
            if "feature" in node:
                i = node["feature"]
                if not _index(i, self.n) or i in fixed:
                    raise CertificateError(f"{where}: split on {i!r}, not a feature index not split on yet")
                stack += [(node.get("in"), ("feature", i, 1)), (node.get("out"), ("feature", i, 0))]
            elif "unit" in node:
                given = node["unit"]
                unit = tuple(given) if isinstance(given, list) and all(_index(v, len(self.lo)) for v in given) else None
                if unit not in self.units or unit in phases:
                    raise CertificateError(f"{where}: split on {node['unit']!r}, not an unstable breakpoint not split on yet")
                stack += [(node.get("active"), ("unit", unit, True)), (node.get("inactive"), ("unit", unit, False))]
            elif "multipliers" in node:
                leaves += 1
                bound = self._bound(rival, lo, hi, sides, node["multipliers"], where)
                if not self.closes(rival, bound):
                    target = float(self.goal(rival).target)
                    raise _Rejected(f"{where}: its LP bound {_approximately(bound)} does not pass {target!r}")
            else:
                raise CertificateError(f"{where}: a node splits on a 'feature' or a 'unit', or is a leaf of 'multipliers'")
        return leaves

    def _enter(self, split: tuple, fixed: dict, phases: dict, lo: list, hi: list, sides: dict, undo: list) -> None:
        """Make one split (("feature", i, 0/1) or ("unit", unit, active)) on the walk's state, as
        `node` does from scratch, recording each old value in `undo`."""

        def put(store: Any, key: Any, value: Any) -> None:
            undo.append((store, key, store.get(key, _ABSENT) if isinstance(store, dict) else store[key]))
            store[key] = value

        kind, key, value = split
        if kind == "feature":
            put(fixed, key, value)
            put(lo, key, Fraction(value))
            put(hi, key, Fraction(value))
            return
        put(phases, key, value)
        point = self.units[key]
        change = point.above if value else point.below
        bounds, pick = (lo, max) if value else (hi, min)
        put(bounds, point.h, pick(bounds[point.h], point.at))
        if change is None:
            put(bounds, point.z, pick(bounds[point.z], point.at))
        else:
            put(sides, change[0], change[1:])


_UP = object()  # a walk's marker: restore the state of the node above
_ABSENT = object()  # an undo record's old value of a key a dict did not have


def _common(coefficients: dict[int, Fraction]) -> tuple[int, dict[int, int]]:
    """Rational coefficients {variable: a} as (d, {variable: a·d}), d the least common denominator."""
    denominator = math.lcm(*(a.denominator for a in coefficients.values()))
    return denominator, {v: a.numerator * (denominator // a.denominator) for v, a in coefficients.items()}


def _piecewise(layer: _Layer) -> bool:
    """Whether method lp-tree encodes the layer: identity, relu, leaky_relu of slope in [0, 1)
    (convex), hardtanh with min ≤ max."""
    if layer.name == "leaky_relu":
        return 0 <= layer.params["slope"] < 1
    if layer.name == "hardtanh":
        return layer.params["min"] <= layer.params["max"]
    return layer.name in ("identity", "relu")


def _approximately(value: Fraction) -> str:
    """A rational for a message: the nearest double, or its order of magnitude past a double's range."""
    try:
        return repr(float(value))
    except OverflowError:
        return f"about {'-' if value < 0 else ''}2^{abs(value.numerator).bit_length() - value.denominator.bit_length()}"

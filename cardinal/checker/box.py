"""Method "box-tree" (docs/proofs.md, *Interval boxes*): CXps of any network the checker
evaluates (step, smooth units, leaky_relu of slope ≥ 1; K ≥ 1), closed by interval evaluation
over boxes of the input."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, NamedTuple

from .exact import CertificateError, _index, _Lazy, _Net, _number, _predict, _Rejected, network_sha256


class BoxNode(NamedTuple):
    """A node of a box tree: its CXp points y have moved features M = {i : y_i ≠ x_i} with
    `chosen` ⊆ M, M ∩ `excluded` = ∅, |M| ≤ k, y_i in [lo_i, hi_i] for i ∈ M, and each step unit
    of `phases` ((layer, j) → on) in that phase: on, h ≥ at (value 1); off, h < at (value 0)."""

    chosen: frozenset[int]
    excluded: frozenset[int]
    lo: list[Fraction]
    hi: list[Fraction]
    phases: dict[tuple[int, int], bool]


class BoxTree:
    """Method "box-tree" (CXps of any network the checker evaluates, K ≥ 1): a tree whose nodes
    split a feature's selection (in/out), its range at a point, or a step unit's phase, and whose
    every leaf the checker's own interval evaluation closes: the enclosure of the outputs over
    the leaf's points predicts p(x) (docs/proofs.md)."""

    def __init__(self, net: _Net, x: list[Fraction], box: tuple, threshold: Fraction | None, prediction: int, k: int) -> None:
        self.net, self.x, self.threshold, self.prediction, self.k = net, x, threshold, prediction, k
        lower, upper, binary = box
        self.root = BoxNode(frozenset(), frozenset(), list(lower), list(upper), {})
        # binary: a moved feature takes the end x_i is not (x_i itself when the ends agree)
        self.other = [(hi if v == lo else lo) for lo, v, hi in zip(lower, x, upper, strict=True)] if binary else None

    @classmethod
    def of(cls, network: Any, x: list[float], box: tuple, threshold: float | None, k: int) -> BoxTree:
        """The tree checker of a problem given as doubles (as `LpRelaxation.of`): what cardinal's
        generator closes its leaves with."""
        net = _Net(network_sha256(network)[1])
        exact = [Fraction(v) for v in x]
        box = ([Fraction(v) for v in box[0]], [Fraction(v) for v in box[1]], box[2])
        t = None if threshold is None else Fraction(threshold)
        return cls(net, exact, box, t, _predict(net.point(exact), t, "x"), k)

    def enclosure(self, node: BoxNode) -> tuple | None:
        """Enclosures [K] of the outputs over the node's points, or None when a phase of `phases`
        is out of its unit's range (the node has no point). The first layer's pre-activation of
        unit j is W·y⁰ + b (y⁰: x, with the features in over their ranges) plus the moves of at
        most r = k − |in| open features, each W_ji·(y_i − x_i) ∈ [d⁻_ji ≤ 0, d⁺_ji ≥ 0]: at least
        the sum of the r most negative d⁻_ji, at most that of the r largest d⁺_ji."""
        x, chosen = self.x, node.chosen
        budget, lo, hi = max(self.k - len(chosen), 0), node.lo, node.hi
        if self.other is not None:  # binary: a moved feature sits at its other end
            lo = hi = self.other
        low, high = self.net.affine(0, [lo[i] if i in chosen else x[i] for i in range(len(x))],
                                    [hi[i] if i in chosen else x[i] for i in range(len(x))])  # fmt: skip
        for j, row in enumerate(self.net.layers[0].weight):
            moves = [(row[i] * (lo[i] - x[i]), row[i] * (hi[i] - x[i])) for i in range(len(x))
                     if row[i] and i not in chosen and i not in node.excluded]  # fmt: skip
            low[j] += sum(sorted(min(0, *pair) for pair in moves)[:budget])
            high[j] += sum(sorted((max(0, *pair) for pair in moves), reverse=True)[:budget])
        for index, layer in enumerate(self.net.layers):
            if index:
                low, high = self.net.affine(index, low, high)
            fixed = {j: on for (number, j), on in node.phases.items() if number == index}
            if any(high[j] < layer.params["at"] if on else low[j] >= layer.params["at"] for j, on in fixed.items()):
                return None
            low, high = self.net.activate(index, low, high)
            for j, on in fixed.items():
                low[j] = high[j] = Fraction(int(on))
        return low, high

    def closes(self, node: BoxNode) -> bool:
        """Whether every point of the node is predicted p(x) (an open enclosure does not close)."""
        outputs = self.enclosure(node)
        try:
            return outputs is None or _predict(outputs, self.threshold, "") == self.prediction
        except _Rejected:
            return False

    def _described(self, node: BoxNode) -> str:
        chosen, excluded, lo, hi, phases = node
        root = self.root
        ranges = [(i, float(lo[i]), float(hi[i])) for i in range(len(lo)) if (lo[i], hi[i]) != (root.lo[i], root.hi[i])]
        return f"the node with in {sorted(chosen)}, out {sorted(excluded)}, ranges cut to {ranges}, steps on {phases}"

    def walk(self, root: Any) -> int:
        """Check every node — `{"feature": i, "in", "out"}`; `{"cut": i, "at": v, "below", "above"}`
        with lo_i < v < hi_i; `{"step": [layer, j], "on", "off"}` on a step unit not split on the
        path; `{"leaf": "bound"}` — and return the leaf count."""
        n, leaves = len(self.x), 0
        stack: list[tuple[Any, BoxNode]] = [(root, self.root)]
        while stack:
            tree, node = stack.pop()
            chosen, excluded, lo, hi, phases = node
            where = _Lazy(lambda node=node: self._described(node))
            if not isinstance(tree, dict):
                raise CertificateError(f"{where}: a node must be an object")
            if "feature" in tree:
                i = tree["feature"]
                if not _index(i, n) or i in chosen or i in excluded:
                    raise CertificateError(f"{where}: split on {i!r}, not a feature index not split on yet")
                stack += [(tree.get("in"), node._replace(chosen=chosen | {i})),
                          (tree.get("out"), node._replace(excluded=excluded | {i}))]  # fmt: skip
            elif "cut" in tree:
                i = tree["cut"]
                if not _index(i, n):
                    raise CertificateError(f"{where}: a cut of {i!r}, not a feature index")
                at = Fraction(_number(tree.get("at"), f"{where}: the cut's point"))
                if not lo[i] < at < hi[i]:
                    raise _Rejected(f"{where}: a cut of feature {i} at {float(at)!r}, outside its range")
                stack += [(tree.get("below"), node._replace(hi=[*hi[:i], at, *hi[i + 1 :]])),
                          (tree.get("above"), node._replace(lo=[*lo[:i], at, *lo[i + 1 :]]))]  # fmt: skip
            elif "step" in tree:
                unit = tuple(tree["step"]) if isinstance(tree["step"], list) and len(tree["step"]) == 2 else None
                layers = self.net.layers
                if unit is None or not _index(unit[0], len(layers)) or layers[unit[0]].name != "step" \
                        or not _index(unit[1], len(layers[unit[0]].bias)) or unit in phases:  # fmt: skip
                    raise CertificateError(f"{where}: split on {tree['step']!r}, not a step unit [layer, j] not split on yet")
                stack += [(tree.get("on"), node._replace(phases={**phases, unit: True})),
                          (tree.get("off"), node._replace(phases={**phases, unit: False}))]  # fmt: skip
            elif tree.get("leaf") == "bound":
                leaves += 1
                if not self.closes(node):
                    raise _Rejected(f"{where}: leaf 'bound', but its enclosure does not keep the prediction {self.prediction}")
            else:
                raise CertificateError(f"{where}: a node splits on a 'feature', a 'cut' or a 'step', or is {{'leaf': 'bound'}}")
        return leaves

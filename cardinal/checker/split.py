"""Method "subset-split" (docs/proofs.md, *Subset boxes*): CXps of ReLU networks (hidden layers
relu, the last identity; K ≥ 1), closed subset by subset: for every set S of exactly k features, a
tree of cuts of S's box whose every leaf holds no point predicted otherwise than x, by interval
arithmetic on the keep scores or, where every hidden unit is stable, by the affine map's worst
vertex, evaluated exactly."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from .exact import CertificateError, _index, _Layer, _Lazy, _Net, _number, _Rejected

MAX_SUBSETS = 1 << 16  # C(n, k) past this: the certificate is refused (it lists every k-subset)


class SubsetSplit:
    """The checker of one claim: the keep scores g_r (g_r < 0, or ≤ 0 where `weak`, at every point
    that keeps p(x)) and the walk of each subset's tree."""

    def __init__(self, net: _Net, x: list[Fraction], box: tuple, threshold: Fraction | None, prediction: int, k: int) -> None:
        layers = net.layers
        if any(layer.name != "relu" for layer in layers[:-1]) or layers[-1].name != "identity":
            raise _Rejected("method subset-split takes relu hidden layers and an identity last layer")
        self.net, self.x, self.lower, self.upper, self.k = net, x, box[0], box[1], k
        first = layers[0]  # its pre-activations at x, once: a box moves only its subset's features
        self.columns = [list(column) for column in zip(*first.weight, strict=True)]  # [n][w0]
        self.at_x = [
            b + sum(w * v for w, v in zip(row, x, strict=True) if w) for row, b in zip(first.weight, first.bias, strict=True)
        ]
        weight, bias = layers[-1].weight, layers[-1].bias
        if threshold is not None:  # c = 0 keeps f ≤ t (g = f − t ≤ 0); c = 1 keeps f > t (g = t − f < 0)
            sign = 1 if prediction == 0 else -1
            self.scores = [([sign * w for w in weight[0]], sign * (bias[0] - threshold), prediction == 0)]
        else:  # rival r keeps c when f_r − f_c < 0 (r < c) or ≤ 0 (r > c)
            c = prediction
            self.scores = [
                ([a - b for a, b in zip(weight[r], weight[c], strict=True)], bias[r] - bias[c], r > c)
                for r in range(len(weight)) if r != c
            ]  # fmt: skip
        # the keep scores as one more affine layer, evaluated in the checker's integer arithmetic
        self.keep = _Net([_Layer([row for row, _, _ in self.scores], [offset for _, offset, _ in self.scores], "identity", {})])

    def walk(self, proof: dict) -> tuple[int, int]:
        """Check `proof["subsets"]`: every k-subset once, each with a tree that closes. Returns
        (leaves, exact evaluations)."""
        n, k = len(self.x), self.k
        subsets = proof.get("subsets")
        count = math.comb(n, k)
        if count > MAX_SUBSETS:
            raise _Rejected(f"method subset-split lists every {k}-subset: C({n}, {k}) = {count} is more than {MAX_SUBSETS}")
        if not isinstance(subsets, list) or len(subsets) != count:
            raise CertificateError(f"proof.subsets must list the C({n}, {k}) = {count} subsets of {k} features, each once")
        seen: set[tuple[int, ...]] = set()
        leaves = evaluations = 0
        for entry in subsets:
            free = entry.get("free") if isinstance(entry, dict) else None
            if not (isinstance(free, list) and len(free) == k and all(_index(i, n) for i in free) and free == sorted(set(free))):
                raise CertificateError(f"each subset is {{'free': [{k} increasing feature indices], 'root': SNODE}}")
            if tuple(free) in seen:
                raise CertificateError(f"subset {free} is listed twice")
            seen.add(tuple(free))
            lo = [self.lower[i] if i in free else v for i, v in enumerate(self.x)]
            hi = [self.upper[i] if i in free else v for i, v in enumerate(self.x)]
            more_leaves, more = self._tree(entry.get("root"), free, lo, hi)
            leaves, evaluations = leaves + more_leaves, evaluations + more
        return leaves, evaluations

    def _tree(self, root: Any, free: list[int], lo: list[Fraction], hi: list[Fraction]) -> tuple[int, int]:
        leaves = evaluations = 0
        stack = [(root, lo, hi)]
        while stack:
            node, lo, hi = stack.pop()
            where = _Lazy(lambda lo=lo, hi=hi: f"subset {free}, the box {[(float(lo[i]), float(hi[i])) for i in free]}")
            if not isinstance(node, dict):
                raise CertificateError(f"{where}: a node must be an object")
            if "cut" in node:
                i = node["cut"]
                if i not in free:
                    raise CertificateError(f"{where}: cut on {i!r}, not a feature of the subset")
                at = Fraction(_number(node.get("at"), _Lazy(lambda where=where: f"{where}: 'at'")))
                if not lo[i] < at < hi[i]:
                    raise _Rejected(f"{where}: a cut of feature {i} at {float(at)!r} outside its range")
                stack.append((node.get("below"), lo, [*hi[:i], at, *hi[i + 1 :]]))
                stack.append((node.get("above"), [*lo[:i], at, *lo[i + 1 :]], hi))
                continue
            leaves += 1
            if node.get("leaf") == "interval":
                self._interval(where, free, lo, hi)
            elif node.get("leaf") == "affine":
                evaluations += self._affine(where, free, lo, hi)
            else:
                raise CertificateError(f"{where}: a node is a 'cut' or a leaf 'interval' or 'affine'")
        return leaves, evaluations

    def _hidden(self, free: list[int], lo: list[Fraction], hi: list[Fraction]) -> tuple[list[tuple[list, list]], list, list]:
        """Each hidden layer's pre-activation ranges, and the last hidden layer's outputs' range,
        for a box that equals x outside `free`."""
        ranges = []
        for index in range(len(self.net.layers) - 1):
            lo, hi = self._first(free, lo, hi) if index == 0 else self.net.affine(index, lo, hi)
            ranges.append((lo, hi))
            lo, hi = self.net.activate(index, lo, hi)
        return ranges, lo, hi

    def _first(self, free: list[int], lo: list[Fraction], hi: list[Fraction]) -> tuple[list[Fraction], list[Fraction]]:
        """The first layer's pre-activation range over a box equal to x outside `free`: its value
        at x plus, per free feature i, the range of W[:, i]·(z_i − x_i) — exactly the interval
        range of W·z + b over the box (the other features' terms are W[:, j]·x_j at both ends)."""
        if any(lo[j] != v or hi[j] != v for j, v in enumerate(self.x) if j not in free):
            raise _Rejected("a box of subset-split moves a feature outside its subset")
        out_lo, out_hi = list(self.at_x), list(self.at_x)
        for i in free:
            down, up = lo[i] - self.x[i], hi[i] - self.x[i]
            for u, w in enumerate(self.columns[i]):
                if w:
                    a, b = w * down, w * up
                    out_lo[u] += min(a, b)
                    out_hi[u] += max(a, b)
        return out_lo, out_hi

    def _interval(self, where: Any, free: list[int], lo: list[Fraction], hi: list[Fraction]) -> None:
        _, z_lo, z_hi = self._hidden(free, lo, hi)
        _, tops = self.keep.affine(0, z_lo, z_hi)  # each score's largest value over the box's enclosure
        for r, ((_, _, weak), top) in enumerate(zip(self.scores, tops, strict=True)):
            if not (top <= 0 if weak else top < 0):
                raise _Rejected(f"{where}: the interval bound of keep score {r} is {float(top)!r}, not below 0")

    def _affine(self, where: Any, free: list[int], lo: list[Fraction], hi: list[Fraction]) -> int:
        """Every hidden unit stable on the box: the scores are affine there; each one's largest
        value lies at the vertex its gradient's signs pick, evaluated exactly."""
        ranges, _, _ = self._hidden(free, lo, hi)
        if any(a < 0 < b for low, high in ranges for a, b in zip(low, high, strict=True)):
            raise _Rejected(f"{where}: a leaf 'affine' with a hidden unit whose range crosses 0")
        slopes = [[Fraction(0)] * len(free) for _ in self.scores]
        for position, i in enumerate(free):  # forward mode along feature i
            d = [Fraction(int(m == i)) for m in range(len(lo))]
            for index, (low, _) in enumerate(ranges):
                d = [sum(w * v for w, v in zip(row, d, strict=True) if v) for row in self.net.layers[index].weight]
                d = [v if low[m] >= 0 else Fraction(0) for m, v in enumerate(d)]
            for r, (row, _, _) in enumerate(self.scores):
                slopes[r][position] = sum(w * v for w, v in zip(row, d, strict=True) if w)
        for r, (row, offset, weak) in enumerate(self.scores):
            y = list(lo)
            for position, i in enumerate(free):
                y[i] = hi[i] if slopes[r][position] > 0 else lo[i]
            _, z, _ = self._hidden(free, y, y)
            top = offset + sum(w * v for w, v in zip(row, z, strict=True) if w)
            if not (top <= 0 if weak else top < 0):
                raise _Rejected(f"{where}: keep score {r} is {float(top)!r} at the box's vertex {[float(y[i]) for i in free]}")
        return len(self.scores)

"""Method "reset-bound" (AXps of networks of identity, relu, leaky_relu and hardtanh layers): a
tree over the sets S of at most k features, each leaf a point y of the box predicted otherwise
than x and the budgeted linear bound (`linear`) showing that y with the leaf's sets reset to x's
values is still predicted otherwise.

The argument: an AXp S fixes S to x, so every point of the box that agrees with x on S keeps
p(x); y with the features of S where it differs from x reset is such a point. A node (in, out)
stands for the sets S ⊇ in with S ∩ out = ∅ and |S| ≤ k; the root's are (∅, ∅). `{"branch": i,
"children": [A, B]}`: A is (in ∪ {i}, out), B is (in, out ∪ {i}). `{"size": true}`: |in| > k,
no set. `{"point": [[feature, value], ...], "rival": r}`: y (x with those values) lies in the
box and changes the prediction, and the bound along the shortcut from base y to target x, with in
moved and at most k − |in| of the features where y differs from x (outside in and out) moved too
(`LinearBound.bound` with `at_most`), says that none of those points keeps p(x). So no S of the
node is an AXp, and none of the root's: no AXp has at most k features. The bound is on one output:
f for K = 1; for K ≥ 2 (last layer the identity) the difference of the rival r and c = p(x) —
kept means f_c > f_r for r < c, f_c ≥ f_r for r > c (ties to the lowest index)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, NamedTuple

from .exact import CertificateError, _index, _Layer, _Net, _point, _predict, _Rejected, _scaled, network_sha256
from .linear import LinearBound


class _Claim(NamedTuple):
    """The claim "no AXp within k" of one problem: its layers, x, box, threshold, p(x) and k."""

    layers: list[_Layer]
    x: list[Fraction]
    box: tuple
    threshold: Fraction | None
    prediction: int
    k: int


def _reset(
    layers: list[_Layer], x: list[Fraction], box: tuple, threshold: Fraction | None, prediction: int, k: int, proof: dict
) -> tuple[int, int]:
    """Check method "reset-bound" (module docstring); returns (leaves, exact evaluations)."""
    counts = [0, 0]
    claim = _Claim(layers, x, box, threshold, prediction, k)

    def walk(node: Any, chosen: frozenset[int], out: frozenset[int], where: str) -> None:
        if not isinstance(node, dict):
            raise CertificateError(f"{where}: a node must be an object")
        if set(node) == {"size"} and node["size"] is True:
            if len(chosen) <= k:
                raise _Rejected(f"{where}: leaf 'size', but {len(chosen)} feature(s) in fit within {k}")
            counts[0] += 1
            return
        if set(node) == {"point", "rival"}:
            _leaf(claim, node, chosen, out, where)
            counts[0] += 1
            counts[1] += 1
            return
        if set(node) != {"branch", "children"}:
            raise CertificateError(f"{where}: a node is a branch, a leaf 'point' or a leaf 'size'")
        i, children = node["branch"], node["children"]
        if not _index(i, len(x)) or i in chosen or i in out:
            raise CertificateError(f"{where}: branch must name a feature neither in nor out")
        if not isinstance(children, list) or len(children) != 2:
            raise CertificateError(f"{where}: a branch has two children (feature in, feature out)")
        walk(children[0], chosen | {i}, out, f"{where}.in{i}")
        walk(children[1], chosen, out | {i}, f"{where}.out{i}")

    walk(proof.get("root"), frozenset(), frozenset(), "root")
    return counts[0], counts[1]


def _leaf(claim: _Claim, node: dict, chosen: frozenset[int], out: frozenset[int], where: str) -> None:
    """Check one leaf "point" of the node (chosen, out) of `claim`, or `_Rejected`."""
    layers, x, box, threshold, prediction, k = claim
    n, classes = len(x), len(layers[-1].weight)
    y = _point(node["point"], x, box, f"{where}: point")
    rival = node["rival"]
    if classes == 1:
        if rival is not None:
            raise CertificateError(f"{where}: rival must be null for a network of one output")
        one, goal, level = layers, prediction, threshold  # kept: f > t (p = 1) or f ≤ t (p = 0)
    else:
        if not (_index(rival, classes) and rival != prediction):
            raise CertificateError(f"{where}: rival must be a class index other than p(x) = {prediction}")
        last = layers[-1]
        if last.name != "identity":
            raise _Rejected(f"method 'reset-bound' on K ≥ 2 outputs needs an identity last layer, not {last.name}")
        c = prediction
        # kept iff f_c − f_r > 0 (r < c: goal 1 of f_c − f_r), or iff f_r − f_c ≤ 0 (r > c: goal 0 of f_r − f_c)
        first, second, goal = (c, rival, 1) if rival < c else (rival, c, 0)
        row = [a - b for a, b in zip(last.weight[first], last.weight[second], strict=True)]
        bias = last.bias[first] - last.bias[second]
        one, level = [*layers[:-1], _Layer([row], [bias], "identity", {})], Fraction(0)
    if _predict(_Net(layers).point(y), threshold, f"{where}: its point") == prediction:
        raise _Rejected(f"{where}: its point does not change the prediction")
    net = _Net(one)
    moves = [[w * (t - b) for w, b, t in zip(row, y, x, strict=True)] for row in one[0].weight]
    flat, shift = _scaled([d for row in moves for d in row])
    moves = [flat[j * n : (j + 1) * n] for j in range(len(moves))]
    bound = LinearBound(net, y, x, moves, shift, [[0] * len(layer.weight) for layer in one])
    open_ = [i for i in range(n) if y[i] != x[i] and i not in chosen and i not in out]
    if not bound.bound(chosen, open_, max(k - len(chosen), 0), goal, level, at_most=True)[0]:
        raise _Rejected(f"{where}: the linear bound does not show that every reset of the node leaves p(x)")


class Resets:
    """The leaves "point" of one problem's reset-bound tree, checked one at a time: what cardinal's
    generator asks before it writes a leaf (as `Shortcut` for the shortcut's leaves "linear")."""

    def __init__(self, network: Any, x: list[float], box: tuple[list[float], list[float], bool], threshold: float | None,
                 k: int) -> None:  # fmt: skip
        self.layers = network_sha256(network)[1]
        self.x = [Fraction(v) for v in x]
        self.box = ([Fraction(v) for v in box[0]], [Fraction(v) for v in box[1]], box[2])
        self.threshold = None if threshold is None else Fraction(threshold)
        self.prediction = _predict(_Net(self.layers).point(self.x), self.threshold, "x")
        self.k = k

    def holds(self, leaf: dict, chosen: frozenset[int], out: frozenset[int], k: int | None = None) -> bool:
        """Whether the leaf closes the node (chosen, out) of the claim "no AXp within k" (default: the one given)."""
        k = self.k if k is None else k
        try:
            _leaf(_Claim(self.layers, self.x, self.box, self.threshold, self.prediction, k), leaf, chosen, out, "leaf")
        except _Rejected:
            return False
        return True

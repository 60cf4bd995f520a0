"""Methods "shortcut-tree" and "shortcut-lp" (docs/proofs.md): either kind
on a sign-monotone network with one output. The checker's own sign analysis finds each
feature's direction; along the shortcut, base moved to target on a set S reaches the goal iff S is
an explanation, and validity is closed upwards. Trusts `exact` (evaluation), `linear` (the leaf
"linear") and `lp` (LP bounds over the shortcut's binary box)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

from .exact import CertificateError, _index, _Layer, _Lazy, _Net, _predict, _Rejected, _scaled, network_sha256
from .linear import LinearBound
from .lp import LpRelaxation

MAX_ALL_SETS = 4096  # a leaf "all" evaluates at most this many sets


def check_shortcut(
    method: str,
    net: _Net,
    x: list[Fraction],
    box: tuple,
    threshold: Fraction | None,
    prediction: int,
    kind: str,
    k: int,
    proof: dict,
) -> tuple[int, int]:
    """Methods "shortcut-tree" and "shortcut-lp": the network must be
    sign-monotone with one output (its own sign analysis). Returns (leaves, evaluations)."""
    lower, upper, _ = box
    n = len(x)
    if threshold is None:
        raise _Rejected(f"method {method} needs one output, the network has {len(net.layers[-1].weight)}")
    directions = _directions(net.layers)
    if 2 in directions:
        raise _Rejected(f"feature {directions.index(2)} has mixed signs: the network is not sign-monotone")
    towards_low = [(d > 0) == (prediction == 1) for d in directions]
    ends = zip(x, directions, towards_low, lower, upper, strict=True)
    counter = [x_i if d == 0 else lo if down else hi for x_i, d, down, lo, hi in ends]
    base, target, goal = (x, counter, 1 - prediction) if kind == "contrastive" else (counter, x, prediction)
    state = Shortcut(net, base, target, goal, threshold, k)
    if method == "shortcut-lp":
        leaves = _shortcut_lp(state, proof.get("root"))
    else:
        leaves = _walk(state, proof.get("root"), n)
    return leaves, state.evaluations


def _directions(layers: list[_Layer]) -> list[int]:
    """Each input's sign at the output: +1, −1, 0 (no influence), or 2 (mixed)."""
    return _signs(layers)[-1][0]


def _signs(layers: list[_Layer]) -> list[list[list[int]]]:
    """Per layer, each unit's pre-activation's sign in each input [unit][input]: +1, −1, 0 (no
    influence), or 2 (mixed), by propagating the signs of the weights through non-decreasing
    activations."""
    n = len(layers[0].weight[0])
    signs = [[1 if i == j else 0 for j in range(n)] for i in range(n)]  # [unit][input]
    every = []
    for layer in layers:
        new = []
        for row in layer.weight:
            unit = []
            for i in range(n):
                seen = {_sign(w) * signs[k][i] if signs[k][i] != 2 else 2 for k, w in enumerate(row) if w and signs[k][i]}
                unit.append(0 if not seen else 2 if 2 in seen or seen == {1, -1} else seen.pop())
            new.append(unit)
        signs = new
        every.append(signs)
    return every


def _sign(value: Fraction) -> int:
    return 1 if value > 0 else -1


def _monotone(signs: list[int], moving: list[int]) -> int:
    """A unit's direction along the shortcut from its signs [input] and the moves' signs: +1
    non-decreasing in each selection s_i, −1 non-increasing, 0 neither (or unknown)."""
    effects = {2 if sign == 2 else sign * move for sign, move in zip(signs, moving, strict=True) if sign and move}
    return -1 if effects == {-1} else 0 if effects - {1} else 1


class Shortcut:
    """The shortcut of one certificate: base, target and goal (docs/proofs.md), and the first
    layer's moves d_ji = W₁[j,i]·(target_i − base_i) kept as integers for the node bounds."""

    def __init__(self, net: _Net, base: list[Fraction], target: list[Fraction], goal: int, threshold: Fraction, k: int) -> None:
        self.net, self.base, self.target, self.goal, self.threshold, self.k = net, base, target, goal, threshold, k
        self.evaluations = 0
        layer = net.layers[0]
        moves = [[w * (t - b) for w, b, t in zip(row, base, target, strict=True)] for row in layer.weight]
        flat, self.shift = _scaled([d for row in moves for d in row])
        n = len(base)
        self.moves = [flat[j * n : (j + 1) * n] for j in range(len(moves))]  # [unit][feature] × 2^-shift
        rows = zip(layer.weight, layer.bias, strict=True)
        self.centres = [bias + sum(w * b for w, b in zip(row, base, strict=True) if w) for row, bias in rows]
        self._linear: LinearBound | None = None

    @classmethod
    def of(cls, network: Any, base: list[float], target: list[float], goal: int, threshold: float, k: int) -> Shortcut:
        """The shortcut of a problem given as doubles (as `BoxTree.of`): what cardinal's generator
        closes its leaves "linear" with."""
        exact = [[Fraction(v) for v in values] for values in (base, target)]
        return cls(_Net(network_sha256(network)[1]), *exact, goal, Fraction(threshold), k)

    def linear_closes(self, chosen: frozenset[int], open_: list[int]) -> bool:
        """The budgeted linear bound (`linear`): no set of the node reaches the goal."""
        return self.linear_bound(chosen, open_)[0]

    def linear_bound(self, chosen: frozenset[int], open_: list[int]) -> tuple[bool, list[int]]:
        """`linear_closes`, and the output's form over the open features (`LinearBound.bound`)."""
        if self._linear is None:
            moving = [_sign(t - b) if t != b else 0 for b, t in zip(self.base, self.target, strict=True)]
            monotone = [[_monotone(unit, moving) for unit in layer] for layer in _signs(self.net.layers)]
            self._linear = LinearBound(self.net, self.base, self.target, self.moves, self.shift, monotone)
        return self._linear.bound(chosen, open_, self.k - len(chosen), self.goal, self.threshold)

    def valid(self, chosen: frozenset[int]) -> bool:
        """Whether y(chosen) is an explanation (rejects when its enclosure straddles t)."""
        self.evaluations += 1
        y = [t if i in chosen else b for i, (b, t) in enumerate(zip(self.base, self.target, strict=True))]
        return _predict(self.net.point(y), self.threshold, f"the point of {sorted(chosen)}") == self.goal

    def bound_closes(self, chosen: frozenset[int], open_: list[int]) -> bool:
        """The budgeted interval bound: no set of the node reaches the goal."""
        budget = max(self.k - len(chosen), 0)
        scale = Fraction(1, 1 << self.shift)
        low, high = [], []
        for centre, moves in zip(self.centres, self.moves, strict=True):
            middle = sum(moves[i] for i in chosen)
            falls = sorted(moves[i] for i in open_ if moves[i] < 0)[:budget]
            rises = sorted((moves[i] for i in open_ if moves[i] > 0), reverse=True)[:budget]
            low.append(centre + scale * (middle + sum(falls)))
            high.append(centre + scale * (middle + sum(rises)))
        f_low, f_high = self.net.output(low, high)
        return f_high[0] <= self.threshold if self.goal == 1 else f_low[0] > self.threshold


def _walk(state: Shortcut, root: Any, n: int) -> int:
    """Check every leaf of the tree (iteratively: trees may be deep); returns the leaf count."""
    stack: list[tuple[Any, frozenset[int], frozenset[int]]] = [(root, frozenset(), frozenset())]
    leaves = 0
    while stack:
        node, chosen, excluded = stack.pop()
        where = _Lazy(lambda chosen=chosen, excluded=excluded: f"the node with in {sorted(chosen)}, out {sorted(excluded)}")
        if not isinstance(node, dict):
            raise CertificateError(f"{where}: a node must be an object")
        if "split" in node:
            feature = node["split"]
            if not _index(feature, n):
                raise CertificateError(f"{where}: split on {feature!r}, not a feature index")
            if feature in chosen or feature in excluded:
                raise _Rejected(f"{where}: splits again on feature {feature}")
            stack.append((node.get("out"), chosen, excluded | {feature}))
            stack.append((node.get("in"), chosen | {feature}, excluded))
            continue
        leaves += 1
        open_ = [i for i in range(n) if i not in chosen and i not in excluded]
        leaf = node.get("leaf")
        if leaf == "size":
            if len(chosen) <= state.k:
                raise _Rejected(f"{where}: leaf 'size', but only {len(chosen)} of at most {state.k} features are in")
        elif leaf == "invalid":
            features = node.get("set")
            if not isinstance(features, list) or not all(_index(i, n) for i in features):
                raise CertificateError(f"{where}: 'set' must be a list of feature indices")
            covered = frozenset(features)
            if not covered >= chosen | set(open_):
                missing = sorted(chosen | set(open_) - covered)
                raise _Rejected(f"{where}: leaf 'invalid' with {sorted(covered)}, which misses {missing}")
            if state.valid(covered):
                raise _Rejected(f"{where}: {sorted(covered)} is an explanation, not the invalid set the leaf cites")
        elif leaf == "bound":
            if not state.bound_closes(chosen, open_):
                raise _Rejected(f"{where}: leaf 'bound', but the interval bound does not close it")
        elif leaf == "linear":
            if len(chosen) > state.k or not state.linear_closes(chosen, open_):
                raise _Rejected(f"{where}: leaf 'linear', but the linear bound does not close it")
        elif leaf == "all":
            size = min(state.k - len(chosen), len(open_))
            if size < 0 or math.comb(len(open_), size) > MAX_ALL_SETS:
                raise _Rejected(f"{where}: leaf 'all' over more than {MAX_ALL_SETS} sets (or none fits)")
            for subset in itertools.combinations(open_, size):
                if state.valid(chosen | frozenset(subset)):
                    raise _Rejected(f"{where}: {sorted(chosen | set(subset))} is an explanation of at most {state.k} features")
        else:
            raise CertificateError(f"{where}: unknown leaf {leaf!r}")
    return leaves


def _shortcut_lp(state: Shortcut, root: Any) -> int:
    """Method "shortcut-lp": the points y(S) are the binary box with ends base_i and target_i, and S
    is an explanation iff y(S) is predicted `goal`; with p(base) ≠ goal, that makes S a CXp of base
    in that box, which an lp-tree from base rules out within k. Returns the leaf count."""
    if _predict(state.net.point(state.base), state.threshold, "the shortcut's base") == state.goal:
        raise _Rejected("the shortcut's base is predicted the goal: the empty set is an explanation")
    ends = list(zip(state.base, state.target, strict=True))
    box = ([min(pair) for pair in ends], [max(pair) for pair in ends], True)
    return LpRelaxation(state.net, state.base, box, state.threshold, 1 - state.goal, state.k).walk(root)

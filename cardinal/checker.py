"""The independent checker of `cardinal.proof/1` certificates (`cardinal proof check`).

A certificate says that no explanation of some kind has at most k features (docs/proofs.md has
the format). This module decides whether it proves that, on its own: it imports nothing from
cardinal, only Python's standard library, and evaluates the network with its own exact
arithmetic. What it trusts: Python (integers, `fractions`, `json`, `hashlib`), the network it is
given (checked against the certificate's SHA-256), and the argument written in docs/proofs.md,
one per method: "shortcut-tree", the monotone shortcut on a sign-monotone network (which it checks
itself) and interval arithmetic; "shortcut-hitting", the same shortcut's invalid sets and a
hitting-set tree; "shortcut-lp", the same shortcut and an lp-tree over the box of its points;
"witness-hitting" (AXps of any network), points that change the
prediction and a hitting-set tree; "lp-tree" (CXps of relu, leaky_relu and hardtanh networks,
K ≥ 1), its own LP relaxation (`LpRelaxation`, the reference encoding) and weak duality, in
rationals; "box-tree" (CXps of any network, K ≥ 1), interval evaluation over boxes of the input
(`BoxTree`).

Numbers. Every double is a dyadic rational, and so is every value of a piecewise-linear network
at dyadic inputs: those are computed exactly. Sigmoid, tanh and softplus give rational enclosures
(a Taylor series with its remainder bound, in integers rounded outwards to multiples of
2^-`_WORK`), so a value is an interval [lo, hi] throughout (lo = hi where exact); a decision that
the interval leaves open rejects. Matrix products run on Python integers with one power-of-two scale per vector.

`check(certificate, network)` returns a `Report` (accepted or the first step that fails, with the
path to it); `CertificateError` is a certificate (or network) that is not well formed.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple

FORMAT = "cardinal.proof/1"
NETWORK_FORMAT = "cardinal.network/1"
MAX_ALL_SETS = 4096  # a leaf "all" evaluates at most this many sets
_WORK, _TERMS = 192, 48  # smooth enclosures: fixed point of 2^-_WORK; at most _TERMS Taylor terms of e^a
_ONE = 1 << _WORK
_PARAMETERS = {"identity": {}, "relu": {}, "sigmoid": {}, "tanh": {}, "softplus": {},
               "leaky_relu": {"slope": 0.01}, "hardtanh": {"min": -1.0, "max": 1.0}, "step": {"at": 0.0}}  # fmt: skip

Interval = tuple[Fraction, Fraction]


class CertificateError(Exception):
    """A certificate or network that is not well formed (exit 2)."""


@dataclass(frozen=True)
class Report:
    accepted: bool
    message: str
    leaves: int = 0
    evaluations: int = 0


class _Rejected(Exception):
    """A step that does not hold (exit 1)."""


# ---------------------------------------------------------------------------- the network
@dataclass(frozen=True)
class _Layer:
    weight: list[list[Fraction]]  # [out][in]
    bias: list[Fraction]
    name: str
    params: dict[str, Fraction]


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CertificateError(f"{where} must be a finite number")
    return float(value)


def _numbers(value: Any, where: str, length: int | None = None) -> list[float]:
    if not isinstance(value, list) or (length is not None and len(value) != length):
        raise CertificateError(f"{where} must be a list" + (f" of {length} numbers" if length is not None else ""))
    return [_number(v, f"{where}[{i}]") for i, v in enumerate(value)]


def network_sha256(document: Any) -> tuple[str, list[_Layer]]:
    """The SHA-256 of a cardinal.network/1 document's canonical layers, and the layers read exactly."""
    if not isinstance(document, dict) or document.get("format") != NETWORK_FORMAT or not isinstance(document.get("layers"), list):
        raise CertificateError(f"the network is not a {NETWORK_FORMAT} document")
    canonical, layers, width = [], [], None
    for number, spec in enumerate(document["layers"], start=1):
        where = f"network layer {number}"
        if not isinstance(spec, dict) or not isinstance(spec.get("weight"), list) or not spec["weight"]:
            raise CertificateError(f"{where}: needs 'weight', 'bias' and 'activation'")
        weight = [_numbers(row, f"{where} weight row", len(spec["weight"][0])) for row in spec["weight"]]
        bias = _numbers(spec.get("bias"), f"{where} bias", len(weight))
        if width is not None and len(weight[0]) != width:
            raise CertificateError(f"{where}: {len(weight[0])} inputs, the layer before has {width} outputs")
        width = len(weight)
        activation = spec.get("activation")
        name = activation if isinstance(activation, str) else activation.get("name") if isinstance(activation, dict) else None
        if name not in _PARAMETERS:
            raise CertificateError(f"{where}: unknown activation {activation!r}")
        given = activation if isinstance(activation, dict) else {}
        params = {key: _number(given.get(key, default), f"{where} {key}") for key, default in _PARAMETERS[name].items()}
        if params.get("slope", 0) < 0:  # every method's interval arithmetic needs non-decreasing units
            raise CertificateError(f"{where}: a leaky_relu of negative slope {params['slope']!r} is not a cardinal network")
        canonical.append({"weight": weight, "bias": bias, "activation": {"name": name, **params} if params else name})
        layers.append(_Layer([[Fraction(w) for w in row] for row in weight], [Fraction(b) for b in bias], name,
                             {key: Fraction(value) for key, value in params.items()}))  # fmt: skip
    text = json.dumps({"format": NETWORK_FORMAT, "layers": canonical}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest(), layers


# ---------------------------------------------------------------------------- exact evaluation
def _scaled(values: list[Fraction]) -> tuple[list[int], int]:
    """Dyadic values as integers times 2^-shift (one shift for all)."""
    shift = max((v.denominator.bit_length() - 1 for v in values), default=0)
    if any(v.denominator & (v.denominator - 1) for v in values):
        raise AssertionError("not dyadic")  # weights, inputs and rounded enclosures always are
    return [v.numerator << (shift - (v.denominator.bit_length() - 1)) for v in values], shift


class _Net:
    """The network in integer arithmetic: each layer's weights scaled by one power of two."""

    def __init__(self, layers: list[_Layer]) -> None:
        self.layers = layers
        self.scaled = []
        for layer in layers:
            flat, shift = _scaled([w for row in layer.weight for w in row])
            width = len(layer.weight[0])
            rows = [flat[i : i + width] for i in range(0, len(flat), width)]
            self.scaled.append(([[max(w, 0) for w in row] for row in rows], [[min(w, 0) for w in row] for row in rows], shift))

    def affine(self, index: int, low: list[Fraction], high: list[Fraction]) -> tuple[list[Fraction], list[Fraction]]:
        """The range of W·z + b for z in [low, high] (interval arithmetic, exact)."""
        positive, negative, shift = self.scaled[index]
        ints, z_shift = _scaled(low + high)
        lo, hi = ints[: len(low)], ints[len(low) :]
        scale = Fraction(1, 1 << (shift + z_shift))
        bias = self.layers[index].bias
        out_lo = [scale * (_dot(p, lo) + _dot(q, hi)) + b for p, q, b in zip(positive, negative, bias, strict=True)]
        out_hi = [scale * (_dot(p, hi) + _dot(q, lo)) + b for p, q, b in zip(positive, negative, bias, strict=True)]
        return out_lo, out_hi

    def activate(self, index: int, low: list[Fraction], high: list[Fraction]) -> tuple[list[Fraction], list[Fraction]]:
        layer = self.layers[index]
        return [_apply(layer, v, -1) for v in low], [_apply(layer, v, +1) for v in high]

    def output(self, low: list[Fraction], high: list[Fraction], first: int = 0) -> tuple[list[Fraction], list[Fraction]]:
        """The range of the K outputs for layer `first`'s pre-activations in [low, high]."""
        for index in range(first, len(self.layers)):
            if index > first:
                low, high = self.affine(index, low, high)
            low, high = self.activate(index, low, high)
        return low, high

    def point(self, y: list[Fraction]) -> tuple[list[Fraction], list[Fraction]]:
        """Enclosures [K] of the outputs at y (equal ends where exact)."""
        return self.output(*self.affine(0, y, y))


def _dot(row: list[int], values: list[int]) -> int:
    return sum(w * v for w, v in zip(row, values, strict=True) if w)


def _apply(layer: _Layer, h: Fraction, direction: int) -> Fraction:
    """σ(h), rounded down (direction −1) or up (+1) where it is not exact."""
    p = layer.params
    if layer.name == "identity":
        return h
    if layer.name == "relu":
        return max(h, Fraction(0))
    if layer.name == "leaky_relu":
        return h if h >= 0 else p["slope"] * h
    if layer.name == "hardtanh":
        return min(max(h, p["min"]), p["max"])
    if layer.name == "step":
        return Fraction(1) if h >= p["at"] else Fraction(0)
    return _smooth(layer.name, h)[0 if direction < 0 else 1]


def _exp(q: Fraction) -> tuple[int, int]:
    """Integers lo ≤ e^q·2^_WORK ≤ hi for |q| ≤ 64: the Taylor series of e^|a|, a = q/2^s
    (|a| ≤ 1/2), each term rounded down for lo and up for hi (every term is ≥ 0); the sum stops
    once a term's upper end is at most one unit, and hi adds that term again for the rest (which is
    below it when |a| ≤ 1/2); e^a = 1/e^|a| for a < 0; then s squarings, each rounded outwards."""
    s = max(0, math.ceil(math.log2(abs(q) * 2))) if q else 0
    size = abs(q)
    shifted, scale = size.numerator << _WORK, size.denominator << s
    a_low, a_high = shifted // scale, -(-shifted // scale)
    low = high = term_low = term_high = _ONE
    for k in range(1, _TERMS + 1):
        term_low = term_low * a_low // (k << _WORK)
        term_high = -(-term_high * a_high // (k << _WORK))
        low, high = low + term_low, high + term_high
        if term_high <= 1:
            break
    high += term_high
    if q < 0:
        low, high = _ONE * _ONE // high, -(-_ONE * _ONE // low)
    for _ in range(s):
        low, high = low * low // _ONE, -(-high * high // _ONE)
    return low, high


def _smooth(name: str, h: Fraction) -> Interval:
    """Rational enclosure of sigmoid, tanh or softplus at h (exact where the value is rational)."""
    tiny = Fraction(1, 1 << 90)  # e^-64 < 2^-92
    if name == "tanh":
        if h == 0:
            return Fraction(0), Fraction(0)
        low, high = _smooth("sigmoid", 2 * h)
        return 2 * low - 1, 2 * high - 1
    if name == "sigmoid":
        if h == 0:
            return Fraction(1, 2), Fraction(1, 2)
        if h >= 64:
            return 1 - tiny, Fraction(1)
        if h <= -64:
            return Fraction(0), tiny
        low, high = _exp(-h)  # sigmoid(h) = 1/(1 + e^-h), in units of 2^-_WORK
        return Fraction(_ONE * _ONE // (_ONE + high), _ONE), Fraction(-(-_ONE * _ONE // (_ONE + low)), _ONE)
    # softplus(h) = log(1 + e^h): a float guess, confirmed by e^guess below and above 1 + e^h
    if h >= 64:
        return h, h + tiny
    if h <= -64:
        return Fraction(0), tiny
    low, high = _exp(h)
    guess = math.log1p(math.exp(float(h)))
    margin = 2.0**-40 * (1 + guess)
    below, above = Fraction(guess - margin), Fraction(guess + margin)
    if not (_exp(below)[1] <= _ONE + low and _exp(above)[0] >= _ONE + high):
        raise _Rejected(f"softplus({float(h)!r}) could not be enclosed")
    return below, above


# ---------------------------------------------------------------------------- the problem
def _directions(layers: list[_Layer]) -> list[int]:
    """Each input's sign at the output: +1, −1, 0 (no influence), or 2 (mixed), by propagating the
    signs of the weights through non-decreasing activations."""
    n = len(layers[0].weight[0])
    signs = [[1 if i == j else 0 for j in range(n)] for i in range(n)]  # [unit][input]
    for layer in layers:
        new = []
        for row in layer.weight:
            unit = []
            for i in range(n):
                seen = {_sign(w) * signs[k][i] if signs[k][i] != 2 else 2 for k, w in enumerate(row) if w and signs[k][i]}
                unit.append(0 if not seen else 2 if 2 in seen or seen == {1, -1} else seen.pop())
            new.append(unit)
        signs = new
    return signs[0]


def _sign(value: Fraction) -> int:
    return 1 if value > 0 else -1


class _Problem:
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


def _predict(outputs: tuple[list[Fraction], list[Fraction]], threshold: Fraction | None, what: str) -> int:
    """p from enclosures [K] of the outputs. K = 1: 1 iff f > t. K ≥ 2 (`threshold` None): the
    largest output, ties to the lowest index — class c when its lower end beats every other
    output's upper end, strictly for j < c. An enclosure that leaves p open rejects."""
    low, high = outputs
    if threshold is not None:
        if low[0] > threshold:
            return 1
        if high[0] <= threshold:
            return 0
    else:
        for c in range(len(low)):
            if all(low[c] > high[j] if j < c else low[c] >= high[j] for j in range(len(low)) if j != c):
                return c
    raise _Rejected(f"{what}: the enclosure of its outputs leaves the prediction open (straddles the threshold)")


# ---------------------------------------------------------------------------- the certificate
def check(certificate: Any, network: Any | None = None) -> Report:
    """Check a parsed certificate, against `network` (a parsed cardinal.network/1 document) or the
    one it embeds. Raises `CertificateError` when either is not well formed."""
    if not isinstance(certificate, dict) or certificate.get("format") != FORMAT:
        raise CertificateError(f"not a {FORMAT} certificate")
    problem, claim, proof = (certificate.get(key) for key in ("problem", "claim", "proof"))
    if not all(isinstance(part, dict) for part in (problem, claim, proof)):
        raise CertificateError("a certificate needs the objects 'problem', 'claim' and 'proof'")
    network = network if network is not None else certificate.get("network")
    if network is None:
        raise CertificateError("no network: give one, or a certificate that embeds it")
    digest, layers = network_sha256(network)
    try:
        return _check(problem, claim, proof, digest, layers)
    except _Rejected as rejection:
        return Report(False, str(rejection))


def _check(problem: dict, claim: dict, proof: dict, digest: str, layers: list[_Layer]) -> Report:
    n, classes = len(layers[0].weight[0]), len(layers[-1].weight)
    x = [Fraction(v) for v in _numbers(problem.get("x"), "problem.x", n)]
    lower = [Fraction(v) for v in _numbers(problem.get("lower"), "problem.lower", n)]
    upper = [Fraction(v) for v in _numbers(problem.get("upper"), "problem.upper", n)]
    if classes == 1:
        threshold: Fraction | None = Fraction(_number(problem.get("threshold"), "problem.threshold"))
    elif problem.get("threshold") is None:
        threshold = None
    else:
        raise CertificateError(f"problem.threshold must be null: the network has {classes} outputs (argmax)")
    binary = problem.get("binary")
    if not isinstance(binary, bool):
        raise CertificateError("problem.binary must be true or false")
    kind = problem.get("kind")
    if kind not in ("contrastive", "abductive"):
        raise CertificateError("problem.kind must be 'contrastive' or 'abductive'")
    if claim == {"none_exists": True} and kind == "contrastive":
        k = n
    elif set(claim) == {"no_explanation_within"} and _index(claim["no_explanation_within"], n + 1):
        k = claim["no_explanation_within"]
    else:
        raise CertificateError("claim must be {'no_explanation_within': k} (0 ≤ k ≤ n) or, contrastive, {'none_exists': true}")
    if proof.get("method") not in ("shortcut-tree", "shortcut-hitting", "shortcut-lp", "witness-hitting", "lp-tree", "box-tree"):
        raise CertificateError(f"unknown proof method {proof.get('method')!r}")
    if problem.get("network_sha256") != digest:
        raise _Rejected(f"the network's SHA-256 is {digest}, the certificate is about {problem.get('network_sha256')!r}")
    if not all(lo <= v <= hi for lo, v, hi in zip(lower, x, upper, strict=True)):
        raise _Rejected("x lies outside the box")
    if binary and not all(v in (lo, hi) for lo, v, hi in zip(lower, x, upper, strict=True)):
        raise _Rejected("x is no vertex of the binary box")
    net = _Net(layers)
    prediction = _predict(net.point(x), threshold, "x")
    if proof["method"] == "witness-hitting":
        if kind != "abductive":
            raise _Rejected("witness lemmas prove claims about abductive explanations only")
        box = (lower, upper, binary)
        leaves, evaluations = _hitting(net, x, box, threshold, prediction, k, proof)
        return Report(True, f"accepted: no abductive explanation of at most {k} feature(s)", leaves, evaluations)
    if proof["method"] == "lp-tree":
        if kind != "contrastive":
            raise _Rejected("LP bounds prove claims about contrastive explanations only")
        relaxation = LpRelaxation(net, x, (lower, upper, binary), threshold, prediction, k)
        leaves = relaxation.walk(proof.get("root"))
        return Report(True, f"accepted: no contrastive explanation of at most {k} feature(s)", leaves, 0)
    if proof["method"] == "box-tree":
        if kind != "contrastive":
            raise _Rejected("interval boxes prove claims about contrastive explanations only")
        leaves = BoxTree(net, x, (lower, upper, binary), threshold, prediction, k).walk(proof.get("root"))
        return Report(True, f"accepted: no contrastive explanation of at most {k} feature(s)", leaves, leaves)
    if threshold is None:
        raise _Rejected(f"method {proof['method']} needs one output, the network has {classes}")
    directions = _directions(layers)
    if 2 in directions:
        raise _Rejected(f"feature {directions.index(2)} has mixed signs: the network is not sign-monotone")
    towards_low = [(d > 0) == (prediction == 1) for d in directions]
    ends = zip(x, directions, towards_low, lower, upper, strict=True)
    counter = [x_i if d == 0 else lo if down else hi for x_i, d, down, lo, hi in ends]
    base, target, goal = (x, counter, 1 - prediction) if kind == "contrastive" else (counter, x, prediction)
    state = _Problem(net, base, target, goal, threshold, k)
    if proof["method"] == "shortcut-hitting":
        leaves = _walk_hitting(_invalid_sets(state, proof.get("lemmas"), n), proof.get("root"), k)
    elif proof["method"] == "shortcut-lp":
        leaves = _shortcut_lp(state, proof.get("root"))
    else:
        leaves = _walk(state, proof.get("root"), n)
    return Report(True, f"accepted: no {kind} explanation of at most {k} feature(s)", leaves, state.evaluations)


def _walk(state: _Problem, root: Any, n: int) -> int:
    """Check every leaf of the tree (iteratively: trees may be deep); returns the leaf count."""
    stack: list[tuple[Any, frozenset[int], frozenset[int]]] = [(root, frozenset(), frozenset())]
    leaves = 0
    while stack:
        node, chosen, excluded = stack.pop()
        where = f"the node with in {sorted(chosen)}, out {sorted(excluded)}"
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


def _invalid_sets(state: _Problem, lemmas: Any, n: int) -> list[frozenset[int]]:
    """Method "shortcut-hitting": each lemma is a set T that is no explanation along the shortcut
    (one exact evaluation of y(T)); validity is closed upwards, so every explanation has a feature
    outside T. Returns those complements D = [n] − T, for the hitting tree."""
    if not isinstance(lemmas, list):
        raise CertificateError("proof.lemmas must be a list")
    sets = []
    for number, lemma in enumerate(lemmas):
        if not isinstance(lemma, list) or not all(_index(i, n) for i in lemma):
            raise CertificateError(f"lemma {number}: must be a list of feature indices")
        if state.valid(frozenset(lemma)):
            raise _Rejected(f"lemma {number}: {sorted(lemma)} is an explanation, not an invalid set")
        sets.append(frozenset(range(n)) - frozenset(lemma))
    return sets


def _shortcut_lp(state: _Problem, root: Any) -> int:
    """Method "shortcut-lp": the points y(S) are the binary box with ends base_i and target_i, and S
    is an explanation iff y(S) is predicted `goal`; with p(base) ≠ goal, that makes S a CXp of base
    in that box, which an lp-tree from base rules out within k. Returns the leaf count."""
    if _predict(state.net.point(state.base), state.threshold, "the shortcut's base") == state.goal:
        raise _Rejected("the shortcut's base is predicted the goal: the empty set is an explanation")
    ends = list(zip(state.base, state.target, strict=True))
    box = ([min(pair) for pair in ends], [max(pair) for pair in ends], True)
    return LpRelaxation(state.net, state.base, box, state.threshold, 1 - state.goal, state.k).walk(root)


# ---------------------------------------------------------------------------- LP bounds
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
        self, rival: int, fixed: dict[int, int], phases: dict[tuple[int, ...], bool], multipliers: Any, where: str = ""
    ) -> Fraction:
        """The safe bound Σ_r λ_r·side_r + Σ_j min over [lo_j, hi_j] of (g − Aᵀλ)_j·v_j of the node
        (g: `rival`'s objective; `fixed`: selector i → 0/1; `phases`: breakpoint → active) for
        multipliers λ, a list of [row, value] pairs; a value's sign picks the row's low side (> 0)
        or high side (< 0)."""
        lo, hi, sides = self.node(fixed, phases)
        if not isinstance(multipliers, list) or not all(
            isinstance(pair, list) and len(pair) == 2 and _index(pair[0], len(self.rows)) for pair in multipliers
        ):
            raise CertificateError(f"{where}: 'multipliers' must be a list of [row, value] pairs")
        reduced, total = dict(self.goal(rival).objective), Fraction(0)
        for row, raw in multipliers:
            value = Fraction(_number(raw, f"{where}: the multiplier of row {row}"))
            coefficients, low, high = self.rows[row]
            low, high = sides.get(row, (low, high))
            side = low if value > 0 else high
            if value and side is None:
                raise _Rejected(f"{where}: the multiplier of row {row} has the sign of its infinite side")
            total += value * side if value else 0
            for variable, a in coefficients.items():
                reduced[variable] = reduced.get(variable, Fraction(0)) - value * a
        return total + sum(min(r * lo[v], r * hi[v]) for v, r in reduced.items() if r)

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
        """Check the tree of one rival; returns its leaf count."""
        stack: list[tuple[Any, dict[int, int], dict[tuple[int, ...], bool]]] = [(root, {}, {})]
        leaves = 0
        while stack:
            node, fixed, phases = stack.pop()
            where = (
                f"rival {rival}: the node with s {sorted(fixed.items())}, active/inactive breakpoints {sorted(phases.items())}"
            )
            if not isinstance(node, dict):
                raise CertificateError(f"{where}: a node must be an object")
            if "feature" in node:
                i = node["feature"]
                if not _index(i, self.n) or i in fixed:
                    raise CertificateError(f"{where}: split on {i!r}, not a feature index not split on yet")
                stack += [(node.get("in"), {**fixed, i: 1}, phases), (node.get("out"), {**fixed, i: 0}, phases)]
            elif "unit" in node:
                given = node["unit"]
                unit = tuple(given) if isinstance(given, list) and all(_index(v, len(self.lo)) for v in given) else None
                if unit not in self.units or unit in phases:
                    raise CertificateError(f"{where}: split on {node['unit']!r}, not an unstable breakpoint not split on yet")
                stack += [
                    (node.get("active"), fixed, {**phases, unit: True}),
                    (node.get("inactive"), fixed, {**phases, unit: False}),
                ]
            elif "multipliers" in node:
                leaves += 1
                bound = self.bound(rival, fixed, phases, node["multipliers"], where)
                if not self.closes(rival, bound):
                    raise _Rejected(f"{where}: its LP bound {float(bound)!r} does not pass {float(self.goal(rival).target)!r}")
            else:
                raise CertificateError(f"{where}: a node splits on a 'feature' or a 'unit', or is a leaf of 'multipliers'")
        return leaves


# ---------------------------------------------------------------------------- interval boxes
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

    def walk(self, root: Any) -> int:
        """Check every node — `{"feature": i, "in", "out"}`; `{"cut": i, "at": v, "below", "above"}`
        with lo_i < v < hi_i; `{"step": [layer, j], "on", "off"}` on a step unit not split on the
        path; `{"leaf": "bound"}` — and return the leaf count."""
        n, leaves = len(self.x), 0
        stack: list[tuple[Any, BoxNode]] = [(root, self.root)]
        while stack:
            tree, node = stack.pop()
            chosen, excluded, lo, hi, phases = node
            ranges = [(i, float(lo[i]), float(hi[i])) for i in range(n) if (lo[i], hi[i]) != (self.root.lo[i], self.root.hi[i])]
            where = f"the node with in {sorted(chosen)}, out {sorted(excluded)}, ranges cut to {ranges}, steps on {phases}"
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


# ---------------------------------------------------------------------------- witness lemmas
def _hitting(
    net: _Net, x: list[Fraction], box: tuple, threshold: Fraction | None, prediction: int, k: int, proof: dict
) -> tuple[int, int]:
    """Method "witness-hitting" (AXps of any network): each lemma is a point y of the box (x with
    the listed features changed) whose prediction differs from p(x), so the features D where y
    differs from x meet every AXp (an AXp outside D would fix y's features to x's and keep p(x)).
    The tree shows that no set of at most k features meets every D. Returns (leaves, evaluations)."""
    lower, upper, binary = box
    n = len(x)
    lemmas = proof.get("lemmas")
    if not isinstance(lemmas, list):
        raise CertificateError("proof.lemmas must be a list")
    sets = []
    for number, lemma in enumerate(lemmas):
        where = f"lemma {number}"
        if not isinstance(lemma, list) or not all(
            isinstance(pair, list) and len(pair) == 2 and _index(pair[0], n) for pair in lemma
        ):
            raise CertificateError(f"{where}: must be a list of [feature, value] pairs")
        if len({pair[0] for pair in lemma}) != len(lemma):
            raise CertificateError(f"{where}: a feature is given twice")
        y = list(x)
        for i, value in lemma:
            y[i] = Fraction(_number(value, f"{where}: the value of feature {i}"))
        outside = [i for i in range(n) if not lower[i] <= y[i] <= upper[i] or (binary and y[i] not in (lower[i], upper[i]))]
        if outside:
            raise _Rejected(
                f"{where}: feature {outside[0]} lies outside the box" + (" (binary: only its two ends)" if binary else "")
            )
        if _predict(net.point(y), threshold, where) == prediction:
            raise _Rejected(f"{where}: its point does not change the prediction")
        sets.append(frozenset(i for i in range(n) if y[i] != x[i]))
    return _walk_hitting(sets, proof.get("root"), k), len(sets)


def _walk_hitting(sets: list[frozenset[int]], root: Any, k: int) -> int:
    """Check the hitting tree (docs/proofs.md); returns its leaf count. A node's sets are S ⊇ in,
    S ∩ out = ∅, |S| ≤ k (the root: every set of at most k features). `{"branch": w, "children":
    [...]}`: lemma w's set D is not met by in; with m_0 < m_1 < … its features not out, child i
    puts m_i in and m_0 … m_(i−1) out, so every set of the node that meets D lies in one child (no
    child: no set of the node meets D). `{"disjoint": [w, ...]}`: those lemmas' sets, none met by
    in, are pairwise disjoint once out is removed, so each set of the node meeting them all has
    more than k features: |in| + their number > k."""
    stack: list[tuple[Any, frozenset[int], frozenset[int]]] = [(root, frozenset(), frozenset())]
    leaves = 0
    while stack:
        node, chosen, excluded = stack.pop()
        where = f"the node with in {sorted(chosen)}, out {sorted(excluded)}"
        if isinstance(node, dict) and "branch" in node and isinstance(node.get("children"), list):
            members = sorted(_unmet(sets, node["branch"], chosen, where) - excluded)
            if len(node["children"]) != len(members):
                raise _Rejected(
                    f"{where}: lemma {node['branch']} leaves {len(members)} feature(s) to branch on, not {len(node['children'])}"
                )
            leaves += not members
            for i, (member, child) in enumerate(zip(members, node["children"], strict=True)):
                stack.append((child, chosen | {member}, excluded | set(members[:i])))
        elif isinstance(node, dict) and isinstance(node.get("disjoint"), list):
            leaves += 1
            met: set[int] = set()
            for w in node["disjoint"]:
                reduced = _unmet(sets, w, chosen, where) - excluded
                if reduced & met:
                    raise _Rejected(f"{where}: lemma {w}'s set meets another of the leaf's outside out")
                met |= reduced
            if len(chosen) + len(node["disjoint"]) <= k:
                raise _Rejected(
                    f"{where}: {len(chosen)} feature(s) in and {len(node['disjoint'])} disjoint lemma(s) fit within {k}"
                )
        else:
            raise CertificateError(f"{where}: a node must be {{'branch': w, 'children': [...]}} or {{'disjoint': [w, ...]}}")
    return leaves


def _unmet(sets: list[frozenset[int]], w: Any, chosen: frozenset[int], where: str) -> frozenset[int]:
    """Lemma w's set, which the features in must not meet."""
    if not _index(w, len(sets)):
        raise CertificateError(f"{where}: {w!r} is not a lemma's index")
    if sets[w] & chosen:
        raise _Rejected(f"{where}: lemma {w}'s set is met by the features in")
    return sets[w]


def _piecewise(layer: _Layer) -> bool:
    """Whether method lp-tree encodes the layer: identity, relu, leaky_relu of slope in [0, 1)
    (convex), hardtanh with min ≤ max."""
    if layer.name == "leaky_relu":
        return 0 <= layer.params["slope"] < 1
    if layer.name == "hardtanh":
        return layer.params["min"] <= layer.params["max"]
    return layer.name in ("identity", "relu")


def _index(value: Any, n: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < n

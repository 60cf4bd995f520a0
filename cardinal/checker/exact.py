"""The checker's core: the network read exactly (and its SHA-256), its exact evaluation over
points and boxes, and the prediction rule. Every method of the checker builds on this file and
nothing else of cardinal.

Numbers. Every double is a dyadic rational, and so is every value of a piecewise-linear network
at dyadic inputs: those are computed exactly. Sigmoid, tanh and softplus give rational enclosures
(a Taylor series with its remainder bound, in integers rounded outwards to multiples of
2^-`_WORK`), so a value is an interval [lo, hi] throughout (lo = hi where exact); a decision that
the interval leaves open rejects. Matrix products run on Python integers with one power-of-two
scale per vector.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

FORMAT = "cardinal.proof/1"
NETWORK_FORMAT = "cardinal.network/1"
_WORK, _TERMS = 192, 48  # smooth enclosures: fixed point of 2^-_WORK; at most _TERMS Taylor terms of e^a
_ONE = 1 << _WORK
_PARAMETERS = {"identity": {}, "relu": {}, "sigmoid": {}, "tanh": {}, "softplus": {},
               "leaky_relu": {"slope": 0.01}, "hardtanh": {"min": -1.0, "max": 1.0}, "step": {"at": 0.0}}  # fmt: skip
Interval = tuple[Fraction, Fraction]
# Size limits, checked before the numbers are read (docs/proofs.md, *Limits*)
MAX_LAYERS = 64
MAX_WIDTH = 1 << 16  # units of a layer, inputs of the first
MAX_WEIGHTS = 1 << 22  # in the whole network


class CertificateError(Exception):
    """A certificate or network that is not well formed (exit 2)."""


@dataclass(frozen=True)
class Report:
    """The checker's verdict: `accepted`, and `message` (the claim, or the first step that fails);
    `statement`: the problem as checked, one line per part (network, x, box, prediction rule,
    kind, bound), given as soon as the problem is read (empty when it is not well formed)."""

    accepted: bool
    message: str
    leaves: int = 0
    evaluations: int = 0
    statement: tuple[str, ...] = ()


class _Lazy:
    """A message part made only when a message is: a node's description costs O(n) to write, and a
    walk builds one per node (`f"{where}: ..."` formats it)."""

    def __init__(self, make: Any) -> None:  # make() -> str
        self.make = make

    def __format__(self, spec: str) -> str:
        return format(self.make(), spec)


class _Rejected(Exception):
    """A step that does not hold (exit 1)."""


@dataclass(frozen=True)
class _Layer:
    weight: list[list[Fraction]]  # [out][in]
    bias: list[Fraction]
    name: str
    params: dict[str, Fraction]


def _number(value: Any, where: str | _Lazy) -> float:
    """A JSON number that a double holds exactly (an integer too long for one is refused, never rounded)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value).bit_length() > 1024 or float(value) != value:  # float() of a longer one overflows
            digits = len(str(abs(value)))
            raise CertificateError(f"{where} must be a number a double holds exactly, got an integer of {digits} digits")
        return float(value)
    if not isinstance(value, float) or not math.isfinite(value):
        raise CertificateError(f"{where} must be a finite number, got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    """The JSON type of a value, for messages (never the value itself: it may be huge)."""
    names = {bool: "true/false", int: "an integer", float: "a number", str: "a string", list: "a list", dict: "an object"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _numbers(value: Any, where: str, length: int | None = None) -> list[float]:
    if not isinstance(value, list) or (length is not None and len(value) != length):
        given = f"{len(value)} entries" if isinstance(value, list) else _kind(value)
        wanted = f" of {length} numbers" if length is not None else ""
        raise CertificateError(f"{where} must be a list{wanted}, got {given}")
    return [_number(v, f"{where}[{i}]") for i, v in enumerate(value)]


def network_sha256(document: Any) -> tuple[str, list[_Layer]]:
    """The SHA-256 of a cardinal.network/1 document's canonical layers, and the layers read exactly.
    Refuses (`CertificateError`, naming the layer) a document of the wrong shape, and one past the
    size limits (`MAX_LAYERS`, `MAX_WIDTH`, `MAX_WEIGHTS`) before reading its numbers."""
    if not isinstance(document, dict) or document.get("format") != NETWORK_FORMAT or not isinstance(document.get("layers"), list):
        raise CertificateError(f"the network is not a {NETWORK_FORMAT} document")
    specs = document["layers"]
    if not specs:
        raise CertificateError("the network has no layers")
    if len(specs) > MAX_LAYERS:
        raise CertificateError(f"the network has {len(specs)} layers, more than the checker's limit of {MAX_LAYERS}")
    total = 0
    for number, spec in enumerate(specs, start=1):
        where = f"network layer {number}"
        weight = spec.get("weight") if isinstance(spec, dict) else None
        if not isinstance(weight, list) or not weight or not all(isinstance(row, list) and row for row in weight):
            raise CertificateError(f"{where}: 'weight' must be a non-empty list of non-empty lists of numbers")
        if len(weight) > MAX_WIDTH or len(weight[0]) > MAX_WIDTH:
            shape = f"{len(weight)} × {len(weight[0])}"
            raise CertificateError(f"{where}: {shape} weights, past the checker's limit of {MAX_WIDTH} a side")
        total += len(weight) * len(weight[0])
        if total > MAX_WEIGHTS:
            raise CertificateError(f"{where}: the network has more than the checker's limit of {MAX_WEIGHTS} weights")
    canonical, layers, width = [], [], None
    for number, spec in enumerate(specs, start=1):
        where = f"network layer {number}"
        weight = [_numbers(row, f"{where} weight row {j}", len(spec["weight"][0])) for j, row in enumerate(spec["weight"])]
        bias = _numbers(spec.get("bias"), f"{where} bias", len(weight))
        if width is not None and len(weight[0]) != width:
            raise CertificateError(f"{where}: {len(weight[0])} inputs, the layer before has {width} outputs")
        width = len(weight)
        activation = spec.get("activation")
        name = activation if isinstance(activation, str) else activation.get("name") if isinstance(activation, dict) else None
        if not isinstance(name, str) or name not in _PARAMETERS:
            shown = repr(activation) if isinstance(activation, str) and len(activation) < 40 else _kind(activation)
            raise CertificateError(f"{where}: unknown activation {shown}")
        given = activation if isinstance(activation, dict) else {}
        params = {key: _number(given.get(key, default), f"{where} {key}") for key, default in _PARAMETERS[name].items()}
        if params.get("slope", 0) < 0:  # every method's interval arithmetic needs non-decreasing units
            raise CertificateError(f"{where}: a leaky_relu of negative slope {params['slope']!r} is not a cardinal network")
        canonical.append({"weight": weight, "bias": bias, "activation": {"name": name, **params} if params else name})
        layers.append(_Layer([[Fraction(w) for w in row] for row in weight], [Fraction(b) for b in bias], name,
                             {key: Fraction(value) for key, value in params.items()}))  # fmt: skip
    text = json.dumps({"format": NETWORK_FORMAT, "layers": canonical}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest(), layers


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


def _point(pairs: Any, x: list[Fraction], box: tuple, where: str) -> list[Fraction]:
    """x with the values of `pairs` (`[feature, value]`, each feature once: else `CertificateError`),
    which must lie in the box, at an end of each feature when it is binary (else `_Rejected`)."""
    lower, upper, binary = box
    n = len(x)
    if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 and _index(p[0], n) for p in pairs):
        raise CertificateError(f"{where}: must be a list of [feature, value] pairs")
    if len({pair[0] for pair in pairs}) != len(pairs):
        raise CertificateError(f"{where}: a feature is given twice")
    y = list(x)
    for i, value in pairs:
        y[i] = Fraction(_number(value, f"{where}: the value of feature {i}"))
    outside = [i for i in range(n) if not lower[i] <= y[i] <= upper[i] or (binary and y[i] not in (lower[i], upper[i]))]
    if outside:
        ends = " (binary: only its two ends)" if binary else ""
        raise _Rejected(f"{where}: feature {outside[0]} lies outside the box{ends}")
    return y


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


def _index(value: Any, n: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < n

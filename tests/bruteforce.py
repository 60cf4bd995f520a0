"""Brute-force references for the backend tests: every subset or vertex, decided exactly, by code
that shares nothing with what it checks.

Nothing here calls `cardinal.exact`, `cardinal.bounds`, `cardinal.signs`, a `Problem` method or an
engine: `Network`, `Layer`, `Problem` and `Domain` serve only as containers, read as plain values (each
layer's `weight` [out, in], `bias` [out], activation name and parameters; x, the box's ends, the
threshold). Kept deliberately naive (every point evaluated, no shortcut beyond the definitions).

How a point y [n] is predicted (`Reference.predictions`), by the rule p(y) = [f(y) > t] (K = 1) or the
largest output, ties to the lowest index (K ≥ 2):

* A float64 pass of interval arithmetic encloses every output: each dot product widened by
  (2·fan-in + 4)·2^-50 of the sum of its absolute terms (8 times the rounding error bound γ of any
  summation order, FMA or not, which leaves room for the rounding of the widening itself) plus
  (2·fan-in + 4)·2^-1000 (underflow, flushed subnormals); a leaky slope's product by 2^-50 of itself;
  exp, log1p and tanh (numpy's, documented to a few ulps) are trusted to 2^-40 relative. NaN ends
  become ±inf. A row is decided here only where the enclosures decide it.
* Every row the pass leaves open is evaluated exactly: a piecewise-linear network in integers
  (`Reference.outputs`: each double an integer over a power of two), any other in Fractions
  (`fraction_oracle.ExactLayers`: smooth units as 320-bit enclosures, sigmoid(0) and tanh(0)
  exact); a row still open there is undecided, and the references below refuse to answer
  (AssertionError) rather than guess.

Directions for the monotone shortcut come from the same sign analysis the definitions give, done
here from the weights' signs (`directions`).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
from fraction_oracle import ExactLayers
from threadpoolctl import threadpool_limits

from cardinal.activations import Activation
from cardinal.network import Layer, Network
from cardinal.problem import Problem


def random_network(
    rng: np.random.Generator, n: int, widths: tuple[int, ...], activation: Activation, monotone: bool = True, grain: int = 0
) -> Network:
    """Random weights (|N(0,1)| when monotone, else N(0,1)) scaled by 1/sqrt(fan-in), negative-ish
    biases, identity output. `grain` > 0 rounds every number to a multiple of 2^-grain."""
    layers, fan_in = [], n
    for width in (*widths, 1):
        weight = rng.normal(size=(width, fan_in)) / np.sqrt(fan_in)
        weight = np.abs(weight) if monotone else weight
        bias = rng.normal(size=width) * 0.5 - (0.3 if monotone else 0.0)
        if grain:
            weight, bias = np.round(weight * 2**grain) / 2**grain, np.round(bias * 2**grain) / 2**grain
        layers.append(Layer(weight, bias, activation if width != 1 else Activation.make("identity")))
        fan_in = width
    return Network(layers)


INCREASING, DECREASING, CONSTANT, MIXED = 1, -1, 0, 2
_SMOOTH_ERROR = 2.0**-40
_PIECEWISE = {"identity", "relu", "leaky_relu", "hardtanh", "step"}
_PRODUCT_ERROR = 2.0**-50  # one rounded product, and the addition that widens it
_FLOOR = 2.0**-1000


def directions(net: Network) -> np.ndarray | None:
    """[n] int: the direction of the prediction's score in each feature (f for K = 1, f_1 − f_0 for
    K = 2; None for K ≥ 3): +1 when every path from the feature is positive (the product of its
    weights' signs), −1 when every one is negative, 0 with no path (zero weights), 2 (mixed) else.
    Sound because every activation is non-decreasing."""
    n = net.layers[0].weight.shape[1]
    positive, negative = np.eye(n, dtype=bool), np.zeros((n, n), dtype=bool)
    for layer in net.layers:
        up, down = np.asarray(layer.weight) > 0, np.asarray(layer.weight) < 0
        positive, negative = (
            (up.astype(int) @ positive + down.astype(int) @ negative) > 0,
            (up.astype(int) @ negative + down.astype(int) @ positive) > 0,
        )
    if positive.shape[0] == 2:
        positive, negative = positive[1:] | negative[:1], negative[1:] | positive[:1]
    elif positive.shape[0] > 2:
        return None
    codes = np.full(n, CONSTANT)
    codes[positive[0] & ~negative[0]] = INCREASING
    codes[negative[0] & ~positive[0]] = DECREASING
    codes[positive[0] & negative[0]] = MIXED
    return codes


def _outward(value: np.ndarray, side: float, relative: float) -> np.ndarray:
    """`value` moved by `relative` of itself plus `_FLOOR` towards `side` (±inf). `relative` ≥ 2^-50
    also covers the rounding of this addition (at most 2^-53 of the result)."""
    return value + np.copysign(np.abs(value) * relative + _FLOOR, side)


def _activate(name: str, params: dict[str, float], q: np.ndarray, side: float) -> np.ndarray:
    """σ(q) rounded towards `side` (−inf: a lower bound, +inf: an upper one), for one end of an interval."""
    if name == "identity":
        return q
    if name == "relu":
        return np.maximum(q, 0.0)
    if name == "leaky_relu":
        return np.where(q >= 0, q, _outward(params["slope"] * q, side, _PRODUCT_ERROR))
    if name == "hardtanh":
        return np.minimum(np.maximum(q, params["min"]), params["max"])
    if name == "step":
        return np.where(q >= params["at"], 1.0, 0.0)
    if name == "sigmoid":
        return np.clip(_outward(1.0 / (1.0 + np.exp(-q)), side, _SMOOTH_ERROR), 0.0, 1.0)
    if name == "tanh":
        return np.clip(_outward(np.tanh(q), side, _SMOOTH_ERROR), -1.0, 1.0)
    if name == "softplus":
        return np.maximum(_outward(np.logaddexp(q, 0.0), side, _SMOOTH_ERROR), 0.0)
    raise ValueError(f"the brute force knows no activation {name!r}")


def _integers(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Finite doubles [...] → (Python integers, object array [...], s) with values = integers / 2^s exactly."""
    pairs = [float(v).as_integer_ratio() for v in np.ravel(values)]  # each denominator a power of two
    scale = max((d.bit_length() - 1 for _, d in pairs), default=0)
    integers = [numerator << (scale - d.bit_length() + 1) for numerator, d in pairs]
    return np.array(integers, dtype=object).reshape(np.shape(values)), scale


def _piecewise(name: str, params: dict[str, float], q: np.ndarray, scale: int) -> tuple[np.ndarray, int]:
    """σ(q / 2^scale) = result / 2^scale' exactly, for integers q (object array): (result, scale')."""
    if name == "identity":
        return q, scale
    if name == "relu":
        return np.where(q > 0, q, 0), scale
    if name == "leaky_relu":
        (slope,), slope_scale = _integers(np.array([params["slope"]]))
        return np.where(q >= 0, q * (1 << slope_scale), q * slope), scale + slope_scale
    (*ends,), ends_scale = _integers(np.array([params[key] for key in (("at",) if name == "step" else ("min", "max"))]))
    common = max(scale, ends_scale)
    q = q * (1 << (common - scale))
    ends = [end * (1 << (common - ends_scale)) for end in ends]
    if name == "step":
        return np.where(q >= ends[0], 1, 0), 0
    return np.where(q < ends[0], ends[0], np.where(q > ends[1], ends[1], q)), common  # hardtanh


def _decide(low: np.ndarray, high: np.ndarray, threshold: float | None) -> np.ndarray:
    """Predictions [B] from enclosures low ≤ f ≤ high [B, K] (floats or Fractions): −1 where open."""
    if low.shape[1] == 1:
        above, below = (low[:, 0] > threshold).astype(bool), (high[:, 0] <= threshold).astype(bool)
        return np.where(above, 1, np.where(below, 0, -1))
    decided = np.full(low.shape[0], -1)
    for c in range(low.shape[1]):
        wins = np.ones(low.shape[0], dtype=bool)
        for j in range(low.shape[1]):
            if j != c:
                wins &= ((low[:, c] > high[:, j]) if j < c else (low[:, c] >= high[:, j])).astype(bool)
        decided[wins] = c
    return decided


class Reference:
    """A network read as plain values; exact predictions of batches of points."""

    def __init__(self, net: Network) -> None:
        self.layers = [
            (
                np.array(layer.weight, dtype=np.float64),
                np.array(layer.bias, dtype=np.float64),
                layer.activation.name,
                dict(layer.activation.params),
            )
            for layer in net.layers
        ]
        for *_, params in self.layers:  # `directions` and the interval ends rest on non-decreasing units
            assert params.get("slope", 0.0) >= 0 and params.get("min", 0.0) <= params.get("max", 0.0), "a decreasing activation"
        self.directions = directions(net)
        self.piecewise = all(name in _PIECEWISE for _, _, name, _ in self.layers)
        self.smooth = None if self.piecewise else ExactLayers(net)  # the exact evaluation of the rest

    def enclose(self, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Y [B, n] → (low, high) [B, K]: float64 enclosures of every output (module docstring)."""
        low = high = np.asarray(Y, dtype=np.float64)
        with np.errstate(all="ignore"), threadpool_limits(1):  # tiny products: BLAS threads only wait on a loaded machine
            for weight, bias, name, params in self.layers:
                fan_in = weight.shape[1]
                size = np.maximum(np.abs(low), np.abs(high)) if low is not high else np.abs(low)
                slack = (2 * fan_in + 4) * 2.0**-50 * (size @ np.abs(weight).T + np.abs(bias)) + (2 * fan_in + 4) * _FLOOR
                if low is high:  # points (the input layer): one product
                    q_low = q_high = low @ weight.T + bias
                else:
                    positive, negative = np.maximum(weight, 0.0), np.minimum(weight, 0.0)
                    q_low, q_high = low @ positive.T + high @ negative.T + bias, high @ positive.T + low @ negative.T + bias
                q_low, q_high = q_low - slack, q_high + slack
                q_low, q_high = np.where(np.isnan(q_low), -np.inf, q_low), np.where(np.isnan(q_high), np.inf, q_high)
                low, high = _activate(name, params, q_low, -np.inf), _activate(name, params, q_high, np.inf)
        return low, high

    def outputs(self, Y: np.ndarray) -> np.ndarray:
        """Y [B, n] → [B, K] Fractions: the outputs of a piecewise-linear network, exactly, in integers
        (every double is an integer over a power of two; each layer's values share one power)."""
        values, scale = _integers(Y)
        for weight, bias, name, params in self.layers:
            (w, w_scale), (b, b_scale) = _integers(weight), _integers(bias)
            common = max(scale + w_scale, b_scale)
            q = (values @ w.T) * (1 << (common - scale - w_scale)) + b * (1 << (common - b_scale))
            values, scale = _piecewise(name, params, q, common)
        return np.vectorize(lambda v: Fraction(v, 1 << scale), otypes=[object])(values)

    def predictions(self, Y: np.ndarray, threshold: float | None) -> np.ndarray:
        """Y [B, n] → [B] int: p(y) decided exactly, −1 where even the Fraction enclosures of a smooth
        network leave it open."""
        Y = np.asarray(Y, dtype=np.float64)
        decided = _decide(*self.enclose(Y), threshold)
        t = None if threshold is None else Fraction(threshold)
        open_rows = np.flatnonzero(decided < 0)
        if self.smooth is None:
            if len(open_rows):
                exact = self.outputs(Y[open_rows])
                decided[open_rows] = _decide(exact, exact, t)
            return decided
        for row in open_rows:
            low, high = self.smooth.outputs([Fraction(float(v)) for v in Y[row]])
            decided[row] = _decide(np.array([low], dtype=object), np.array([high], dtype=object), t)[0]
        return decided

    def prediction(self, x: np.ndarray, threshold: float | None) -> int:
        predicted = int(self.predictions(np.asarray(x, dtype=np.float64)[None, :], threshold)[0])
        assert predicted >= 0, "brute force cannot decide p(x)"
        return predicted


def _masks(n: int) -> np.ndarray:
    """All 2^n subsets as bool rows [2^n, n], row m holding the bits of m."""
    return (np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1 == 1


def _decided(predicted: np.ndarray) -> np.ndarray:
    assert (predicted >= 0).all(), "brute force met an undecided point"
    return predicted


def shortcut_minimum(
    net: Network, x: np.ndarray, kind: str, lower: np.ndarray, upper: np.ndarray, threshold: float | None
) -> int | None:
    """Minimum explanation size on a sign-monotone network (K ≤ 2) over the box [lower, upper] [n], by
    the monotone shortcut over all 2^n subsets (None: no CXp). The counterpoint x' puts each feature
    at the end of the box that moves the score against p(x): for p(x) = 1 the lower end of a
    non-decreasing feature and the upper end of a non-increasing one, for p(x) = 0 the opposite.
    CXp S: x with S set to x' flips p(x); AXp S: x' with S set to x keeps it."""
    reference = Reference(net)
    signs = reference.directions
    assert signs is not None and not (signs == MIXED).any(), "the monotone shortcut needs a sign-monotone network"
    x = np.asarray(x, dtype=np.float64)
    p = reference.prediction(x, threshold)
    counterpoint = np.where((p == 1) != (signs == DECREASING), lower, upper)
    masks = _masks(len(x))
    if kind == "contrastive":
        valid = _decided(reference.predictions(np.where(masks, counterpoint, x), threshold)) != p
    else:
        valid = _decided(reference.predictions(np.where(masks, x, counterpoint), threshold)) == p
    sizes = masks.sum(axis=1)[valid]
    return int(sizes.min()) if len(sizes) else None


def _own_prediction(problem: Problem, reference: Reference) -> int:
    """p(x), decided here; the problem's own prediction (the engine's) must agree."""
    p = reference.prediction(problem.x, problem.threshold)
    assert p == problem.prediction, f"the problem predicts {problem.prediction} at x, brute force {p}"
    return p


def monotone_minimum(problem: Problem) -> int | None:
    """Minimum explanation size of a problem on a sign-monotone network (`shortcut_minimum`)."""
    _own_prediction(problem, Reference(problem.net))
    lower, upper = problem.domain.lower, problem.domain.upper
    return shortcut_minimum(problem.net, problem.x, problem.kind, lower, upper, problem.threshold)


def _vertex_flips(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """(masks [2^n, n], flips [2^n]): every toggle set of the binary box, and whether toggling it flips p(x)."""
    reference = Reference(problem.net)
    p = _own_prediction(problem, reference)
    masks = _masks(problem.n)
    x, lower, upper = problem.x, problem.domain.lower, problem.domain.upper
    toggled = np.where(x == lower, upper, lower)
    return masks, _decided(reference.predictions(np.where(masks, toggled, x), problem.threshold)) != p


def vertex_minimum(problem: Problem) -> int | None:
    """Minimum explanation size over the binary domain (vertices of the box), any network."""
    masks, flipping = _vertex_flips(problem)
    sizes = masks.sum(axis=1)
    if problem.kind == "contrastive":
        return int(sizes[flipping].min()) if flipping.any() else None
    flipping_sets = masks[flipping]  # S is an AXp iff it meets every flipping toggle set
    for size in range(problem.n + 1):
        for chosen in itertools.combinations(range(problem.n), size):
            if flipping_sets[:, list(chosen)].any(axis=1).all():
                return size
    raise AssertionError("the full set is always an AXp")


def vertex_valid(problem: Problem, features: tuple[int, ...]) -> bool:
    """Whether `features` is an explanation over the binary domain (vertices of the box), any network."""
    masks, flipping = _vertex_flips(problem)
    inside = ~masks[:, [i for i in range(problem.n) if i not in features]].any(axis=1)  # toggle sets within S
    if problem.kind == "contrastive":  # some toggle set within S flips
        return bool((flipping & inside).any())
    outside = ~masks[:, list(features)].any(axis=1)  # toggle sets disjoint from S
    return not bool((flipping & outside).any())


def mixed(net: Network) -> Network:
    """The same function exactly, with every feature of mixed sign, so that no
    monotone shortcut applies (`directions`): two equal units σ(Σ y) join the first layer and reach f with
    weights +1 and −1, which cancel exactly. For a network of one layer (f = W·y + b, identity:
    it becomes two identity layers) or two (hidden σ, identity output)."""
    identity = Activation.make("identity")
    layers = net.layers if len(net.layers) == 2 else (Layer(net.layers[0].weight, net.layers[0].bias, identity), None)
    hidden, out = layers
    n = net.n_inputs
    assert out is None or out.activation.name == "identity", "mixed() takes an identity output layer"
    first = Layer(np.vstack([hidden.weight, np.ones((2, n))]), np.concatenate([hidden.bias, np.zeros(2)]), hidden.activation)
    if out is None:
        second = Layer(np.array([[1.0, 1.0, -1.0]]), np.zeros(1), identity)
    else:
        second = Layer(np.hstack([out.weight, [[1.0, -1.0]]]), out.bias, identity)
    result = Network([first, second], net.metadata)
    signs = directions(result)
    assert signs is not None and (signs == MIXED).all()
    return result

"""Branch and bound over feature sets (`solvers.branch`) and its node bounds against brute force."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from bruteforce import random_network
from cardinal.solvers.branch import NODE_LIMIT, SubsetSearch
from cardinal.solvers.smooth import SmoothBounds
from cardinal.solvers.subsets import SubsetBounds, _Form

from cardinal import Layer, Network
from cardinal.activations import Activation
from cardinal.exact import ExactNetwork


def _setting(seed: int, n: int, below: bool = False):
    """A random monotone ReLU network, base and target [n] (target ≥ base, or ≤ with `below`),
    every set S [2^n, n] and g(S) exactly."""
    rng = np.random.default_rng(seed)
    net = random_network(rng, n, (int(rng.integers(3, 9)), 5), Activation.make("relu"), grain=3 if seed % 2 else 0)
    base, target = rng.uniform(size=n) * 0.5, 0.5 + rng.uniform(size=n) * 0.5
    unmoved = rng.uniform(size=n) < 0.15
    target[unmoved] = base[unmoved]
    if below:
        base, target = target, base
    S = np.array(list(itertools.product([False, True], repeat=n)))
    g = np.array([enclosure.lower for (enclosure,) in ExactNetwork(net).outputs(np.where(S, target, base))], dtype=object)
    return net, base, target, S, g


def _judge(net, base: np.ndarray, target: np.ndarray, threshold: float, below: bool = False):
    """Exact validity: 1 where g > t (g ≤ t with `below`), else 0."""
    exact = ExactNetwork(net)

    def judge(masks: np.ndarray) -> np.ndarray:
        above = exact.predictions(np.where(masks, target, base), threshold).astype(np.int8)
        return 1 - above if below else above

    return judge


def _evaluate(judge, net, base: np.ndarray, target: np.ndarray):
    """The search's `evaluate`: `judge`'s exact verdicts, and g in plain float64 (its hint)."""
    return lambda masks: (judge(masks), net.forward(np.where(masks, target, base)).numpy().ravel())


def _reference(judge, n: int) -> np.ndarray:
    """A maximal invalid set grown from ∅ in index order, as a point of [0,1]^n."""
    chosen = np.zeros(n, dtype=bool)
    for i in range(n):
        chosen[i] = True
        chosen[i] = judge(chosen[None, :])[0] == 0
    return chosen.astype(np.float64)


@pytest.mark.parametrize("minimum", [False, True], ids=["upper", "lower"])
def test_node_bounds_cover_every_set_of_the_node(minimum: bool) -> None:
    """With features fixed in and a budget per node, the upper (lower) bound is ≥ (≤) g(fixed ∪ s)
    for every s ⊆ allowed \\ fixed within the budget, at any tangent point for the lower one."""
    closed = 0
    for seed in range(6):
        n = 7
        net, base, target, S, g = _setting(seed + 500, n, below=minimum)
        threshold = float(sorted(g)[len(g) // 3 if minimum else len(g) * 2 // 3])
        bounds = SubsetBounds(net, base, target, threshold)
        rng = np.random.default_rng(seed)
        allowed = rng.uniform(size=(16, n)) < 0.7
        fixed = allowed & (rng.uniform(size=(16, n)) < 0.3)
        budget = rng.integers(0, n + 1, size=16)
        reference = rng.uniform(size=(16, n)) if minimum and seed % 2 else None
        value, radius, shares = bounds.bound_and_form(budget, allowed, fixed=fixed, minimum=minimum, reference=reference)
        assert shares.shape == (16, n) and not shares[~(allowed & ~fixed)].any()
        for row in range(16):
            inside = [
                v
                for s, v in zip(S, g, strict=True)
                if not (s & ~allowed[row]).any() and not (fixed[row] & ~s).any() and (s & ~fixed[row]).sum() <= budget[row]
            ]
            if minimum:
                bottom = Fraction(value[row]) - Fraction(radius[row])
                assert bottom <= min(inside)
                closed += bottom > Fraction(threshold)
            else:
                top = Fraction(value[row]) + Fraction(radius[row])
                assert top >= max(inside)
                closed += top <= Fraction(threshold)
    assert closed > 0


@pytest.mark.parametrize("seeds", [range(4), pytest.param(range(4, 10), marks=pytest.mark.slow)], ids=["seeds0-3", "seeds4-9"])
@pytest.mark.parametrize("below", [False, True], ids=["above", "below"])
def test_search_agrees_with_brute_force_for_every_bound(below: bool, seeds: range) -> None:
    """ "sat" iff some set within k is valid (g > t, or g ≤ t `below`), the set returned being one;
    "unsat" otherwise; with a node limit, either that or NODE_LIMIT. Seeds 0-3 have both sizes of
    network (9 and 12 features) and the reference judge; the others run with -m slow."""
    answers = set()
    for seed in seeds:
        n = 9 if seed % 3 else 12
        net, base, target, S, g = _setting(seed + 700, n, below)
        for quantile in (0.05, 0.3, 0.7) if below else (0.3, 0.7, 0.95):
            threshold = float(sorted(g)[int(len(g) * quantile)])
            judge = _judge(net, base, target, threshold, below)
            reference = _reference(judge, n) if below and seed % 2 else None
            bounds = SubsetBounds(net, base, target, threshold)
            search = SubsetSearch(n, threshold, _evaluate(judge, net, base, target), below, bounds, reference)
            sizes = S.sum(axis=1)
            valid = np.array([(v <= Fraction(threshold)) if below else (v > Fraction(threshold)) for v in g])
            for k in range(n + 1):
                limited, _ = search.search(k, nodes=2)
                assert limited in (NODE_LIMIT, "sat" if (valid & (sizes <= k)).any() else "unsat")
                raw, found = search.search(k)
                exists = bool((valid & (sizes <= k)).any())
                answers.add((raw, exists))
                assert raw == ("sat" if exists else "unsat"), (seed, quantile, k)
                if exists:
                    assert found.sum() <= k and judge(found[None, :])[0] == 1
    assert answers == {("sat", True), ("unsat", False)}


@pytest.mark.parametrize("below", [False, True], ids=["above", "below"])
def test_search_never_refutes_a_set_valid_by_less_than_an_ulp(below: bool) -> None:
    """t is the double next to the best g within k (below it for g > t; the best g itself, a
    double here, for g ≤ t): the search must find that set, not prune it."""
    for seed in range(6):
        n = 8
        net, base, target, S, g = _setting(seed + 900, n, below)
        for k in (1, 3, 5):
            values = [v for s, v in zip(S, g, strict=True) if s.sum() <= k]
            if below:
                best = min(values)
                threshold = float(best) if Fraction(float(best)) >= best else float(np.nextafter(float(best), np.inf))
            else:
                best = max(values)
                threshold = float(best) if Fraction(float(best)) < best else float(np.nextafter(float(best), -np.inf))
            judge = _judge(net, base, target, threshold, below)
            bounds = SubsetBounds(net, base, target, threshold)
            search = SubsetSearch(
                n, threshold, _evaluate(judge, net, base, target), below, bounds, _reference(judge, n) if below else None
            )
            raw, found = search.search(k)
            assert raw == "sat" and found.sum() <= k and judge(found[None, :])[0] == 1


SMOOTH = [("sigmoid", "sigmoid"), ("tanh", "tanh"), ("softplus", "tanh"), ("leaky_relu", "hardtanh"), ("relu", "sigmoid")]


def _smooth_setting(seed: int, n: int, names: tuple[str, str], below: bool):
    """A random monotone network with the hidden activations `names` (identity output), base and
    target [n], every set S [2^n, n] and the enclosures of g(S)."""
    rng = np.random.default_rng(seed)
    layers, fan_in = [], n
    for width, name in zip((6, 4, 1), (*names, "identity"), strict=True):
        weight = np.abs(rng.normal(size=(width, fan_in))) / np.sqrt(fan_in)
        bias = rng.normal(size=width) * 0.5 - 0.5 * weight.sum(axis=1)
        activation = Activation.make(name, **({"slope": 0.1} if name == "leaky_relu" else {}))
        layers.append(Layer(weight, bias, activation))
        fan_in = width
    net = Network(layers)
    base, target = rng.uniform(size=n) * 0.5, 0.5 + rng.uniform(size=n) * 0.5
    if below:
        base, target = target, base
    S = np.array(list(itertools.product([False, True], repeat=n)))
    return net, base, target, S, [row[0] for row in ExactNetwork(net).outputs(np.where(S, target, base))]


def _exact_judge(net, base: np.ndarray, target: np.ndarray, threshold: float, below: bool):
    """1 valid, 0 invalid, −1 where the enclosure straddles t (never in these tests' networks)."""
    exact = ExactNetwork(net)

    def judge(masks: np.ndarray) -> np.ndarray:
        above = exact.predictions(np.where(masks, target, base), threshold).astype(np.int8)
        return np.where(above < 0, -1, 1 - above if below else above).astype(np.int8)

    return judge


@pytest.mark.parametrize("names", SMOOTH, ids="+".join)
@pytest.mark.parametrize("below", [False, True], ids=["above", "below"])
def test_smooth_node_bounds_cover_every_set_of_the_node(names: tuple[str, str], below: bool) -> None:
    """`SmoothBounds.bound_and_form` with features fixed in and a budget per node: ĝ ≥ (≤ below)
    every g(fixed ∪ s), s ⊆ allowed \\ fixed within the budget, as enclosures; the shares of the
    features outside the node's free ones are zero; and some node is closed by it."""
    n = 7
    closed = 0
    for seed in range(3):
        net, base, target, S, enclosures = _smooth_setting(seed + 40, n, names, below)
        values = sorted(float(e.lower) for e in enclosures)
        threshold = values[len(values) // 3 if below else len(values) * 2 // 3]
        bounds = SmoothBounds(net, base, target, threshold)
        assert bounds.supported and bounds.upward != below
        rng = np.random.default_rng(seed)
        allowed = rng.uniform(size=(24, n)) < 0.75
        fixed = allowed & (rng.uniform(size=(24, n)) < 0.3)
        budget = rng.integers(0, n + 1, size=24)
        value, radius, shares = bounds.bound_and_form(budget, allowed, fixed, minimum=below)
        assert shares.shape == (24, n) and not shares[~(allowed & ~fixed)].any() and (radius == 0).all()
        for row in range(24):
            inside = (~(S & ~allowed[row]).any(axis=1)) & (S & fixed[row] == fixed[row]).all(axis=1)
            inside &= (S & ~fixed[row]).sum(axis=1) <= budget[row]
            node = [e for e, within in zip(enclosures, inside, strict=True) if within]
            if below:
                assert all(Fraction(value[row]) <= e.lower for e in node)
                closed += Fraction(value[row]) > Fraction(threshold)
            else:
                assert all(Fraction(value[row]) >= e.upper for e in node)
                closed += Fraction(value[row]) <= Fraction(threshold)
    assert closed > 0


@pytest.mark.parametrize("quantiles", [(0.4,), pytest.param((0.1, 0.8), marks=pytest.mark.slow)], ids=["q0.4", "q0.1+0.8"])
@pytest.mark.parametrize("names", SMOOTH, ids="+".join)
@pytest.mark.parametrize("below", [False, True], ids=["above", "below"])
def test_search_on_continuous_networks_agrees_with_brute_force(
    names: tuple[str, str], below: bool, quantiles: tuple[float, ...], monkeypatch
) -> None:
    """With the smooth node bounds or none, probing every node or none, leaves of one set or of
    many: "sat" iff some set within k is valid (the set returned being one), else "unsat". One
    threshold (the 40% quantile of g) by default; two more with -m slow."""
    import cardinal.solvers.branch as branch

    n = 8
    for seed, (leaf, probe, with_bounds) in enumerate([(1, 0, True), (1, n, True), (64, n, False), (1, n, False)]):
        monkeypatch.setattr(branch, "_LEAF_SETS", leaf)
        monkeypatch.setattr(branch, "_PROBE_FREE", probe)
        net, base, target, S, enclosures = _smooth_setting(seed + 60, n, names, below)
        sizes = S.sum(axis=1)
        for quantile in quantiles:
            lows = sorted(float(e.lower) for e in enclosures)
            threshold = lows[int(len(lows) * quantile)]
            t = Fraction(threshold)
            valid = np.array([(e.upper <= t) if below else (e.lower > t) for e in enclosures])
            judge = _exact_judge(net, base, target, threshold, below)
            bounds = SmoothBounds(net, base, target, threshold) if with_bounds else None
            search = SubsetSearch(n, threshold, _evaluate(judge, net, base, target), below, bounds)
            for k in range(n + 1):
                raw, found = search.search(k)
                exists = bool((valid & (sizes <= k)).any())
                assert raw == ("sat" if exists else "unsat"), (names, seed, quantile, k)
                if exists:
                    assert found.sum() <= k and judge(found[None, :])[0] == 1


def test_probe_closes_invalid_nodes_and_forces_what_every_valid_set_needs() -> None:
    """`_probe`: a node whose `allowed` is invalid closes; a free feature without which `allowed`
    is invalid is fixed in; a node whose `allowed` fits within k answers with it when valid."""
    n = 5
    # valid iff the set holds features 0 and 1 and at least one of 2, 3 (upward closed)
    judge = lambda masks: (masks[:, 0] & masks[:, 1] & (masks[:, 2] | masks[:, 3])).astype(np.int8)  # noqa: E731
    search = SubsetSearch(n, 0.5, lambda masks: (judge(masks), masks.sum(axis=1).astype(float)), below=False)
    allowed = np.array([[1, 1, 1, 1, 1], [0, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=bool)
    fixed = np.zeros_like(allowed)
    found, open_rows, shares = search._probe(2, fixed, allowed)
    assert found is None and open_rows.tolist() == [True, False, False]  # row 2 needs 3 features: more than k
    assert fixed[0].tolist() == [True, True, False, False, False]  # 2 and 3 replace each other: neither forced
    assert fixed[2].tolist() == [True, True, True, False, False]
    assert shares.shape == (3, n) and (shares[0] == 1).all() and not shares[2, 3:].any()
    found, open_rows, _ = search._probe(3, np.zeros((1, n), dtype=bool), allowed[2:])
    assert found.tolist() == [True, True, True, False, False]  # allowed fits within k and is valid


@pytest.mark.parametrize("largest", [True, False])
def test_extreme_with_a_budget_per_form_equals_one_budget_at_a_time(largest: bool) -> None:
    """`_Form.extreme` with k [B] (the top max(k) partitioned, then sorted and masked by rank) gives
    each form the value and radius of the same form extremised alone with its own k."""
    rng = np.random.default_rng(3)
    batch, rows, n = 7, 3, 20
    coefficients = rng.normal(size=(batch, rows, n))
    radius = np.abs(rng.normal(size=(batch, rows, n))) * 1e-12
    form = _Form(coefficients, radius, rng.normal(size=(batch, rows)), np.full((batch, rows), 1e-12))
    budgets = np.array([0, 1, 3, 7, 20, 25, 5])
    value, value_radius = form.extreme(budgets, largest)
    for b, k in enumerate(budgets):
        alone = _Form(coefficients[b : b + 1], radius[b : b + 1], form.constant[b : b + 1], form.constant_radius[b : b + 1])
        expected, _ = alone.extreme(int(k), largest)
        picked = np.sort(coefficients[b], axis=-1)[:, ::-1] if largest else np.sort(coefficients[b], axis=-1)
        signed = np.maximum(picked, 0) if largest else np.minimum(picked, 0)
        np.testing.assert_allclose(value[b], expected[0], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(value[b], form.constant[b] + signed[:, :k].sum(axis=-1), rtol=1e-12, atol=1e-12)
        assert (value_radius[b] >= radius[b].sum(axis=-1)).all()

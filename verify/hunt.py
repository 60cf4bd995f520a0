"""Counterexample hunting: instances where the greedy explanation is not minimum.

Three sources (docs/design.md §5):

* the paper's SET-COVER reduction (Theorems 1 and 2): sets E_1..E_m over {0..u−1} give a
  two-layer monotone network with m inputs; a CXp of x = 0 (an AXp of x = 1) is exactly a set
  cover. With `step` units this is the paper's construction; with `hardtanh` clipped to [0, 1]
  it computes the same on the cube and is continuous, i.e. admissible;
* random small networks with sparse, short-decimal weights and negative biases;
* any found case is shrunk — fewer features, units and layers, rounder numbers — while greedy
  stays suboptimal, every step re-verified (greedy exactly re-checked, the smaller explanation
  found by exhaustive enumeration and replayed in exact arithmetic).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np
from cardinal.solvers.base import get_solver, solve_problem

from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.greedy import explain
from cardinal.network import Layer, Network
from cardinal.problem import KINDS, Problem, Status

from .cases import Case
from .certify import tie_decided
from .generate import random_set_cover, set_cover_problem

HUNT_ACTIVATIONS = ("relu", "hardtanh", "step", "sigmoid")


# ---------------------------------------------------------------------------- random instances
def random_instance(rng: np.random.Generator, activation: str, max_features: int) -> tuple[Network, np.ndarray, float]:
    """A small monotone network with sparse half-integer weights and negative biases, an input on
    the {0, ½, 1} grid, and a threshold between f(lower corner) and f(upper corner)."""
    n = int(rng.integers(3, max_features + 1))
    widths = [int(rng.integers(2, 5)) for _ in range(int(rng.integers(1, 3)))]
    act = Activation.make("hardtanh", min=0.0, max=1.0) if activation == "hardtanh" else Activation.make(activation)
    if activation == "step":
        act = Activation.make("step", at=0.5)
    layers, fan_in = [], n
    for position, width in enumerate([*widths, 1]):
        weight = rng.choice([0.0, 0.0, 0.5, 1.0, 1.5, 2.0], size=(width, fan_in))
        weight[np.arange(width), rng.integers(0, fan_in, size=width)] = 1.0  # every unit sees an input
        last = position == len(widths)
        bias = np.zeros(1) if last else -rng.choice([0.0, 0.5, 1.0, 1.5, 2.0], size=width)
        layers.append(Layer(weight, bias, Activation.make("identity") if last else act))
        fan_in = width
    net = Network(layers)
    x = rng.choice([0.0, 0.5, 1.0], size=n)
    low, high = (float(v) for v in net.forward(np.stack([np.zeros(n), np.ones(n)])))
    threshold = float(np.round(low + (high - low) * rng.uniform(0.1, 0.9), 2))
    return net, x, threshold


# ---------------------------------------------------------------------------- checking
@dataclass(frozen=True)
class Counterexample:
    net: Network
    x: np.ndarray
    threshold: float
    kind: str
    greedy: tuple[int, ...]
    minimum: tuple[int, ...]
    source: str
    tie_decided: bool  # another way of breaking exact score ties would rescue greedy (or it is undetermined)

    def case(self) -> Case:
        ties = (
            "another way of breaking exact ties in the scores may give greedy a smaller answer"
            if self.tie_decided
            else "no way of breaking ties in the scores gives greedy a smaller answer"
        )
        note = f"found by cardinal hunt ({self.source}); greedy size {len(self.greedy)}, minimum {len(self.minimum)}; {ties}"
        return Case(
            self.net,
            Domain.unit(self.net.n_inputs),
            self.threshold,
            self.x,
            self.kind,
            self.greedy,
            self.minimum,
            {"enumerate": {"status": "optimal", "features": list(self.minimum), "size": len(self.minimum)}},
            "greedy_suboptimal",
            note,
        )


class Checker:
    """Greedy (exactly re-checked) vs the exhaustive minimum, with one open enumerate backend."""

    def __init__(self, time_limit: float = 10.0) -> None:
        self.backend = get_solver("enumerate")
        self.time_limit = time_limit

    def close(self) -> None:
        self.backend.close()

    def check(self, net: Network, x: np.ndarray, threshold: float, kind: str, source: str) -> Counterexample | None:
        """The counterexample this instance is, or None."""
        domain = Domain.unit(net.n_inputs)
        result = explain(net, x, kind=kind, domain=domain, threshold=threshold, device="cpu", verify=True)
        greedy = result.features(0)
        if greedy is None or len(greedy) <= 1 or result.checks != ("exact",):
            return None
        problem = Problem.make(net, x, kind, domain, threshold)
        outcome = solve_problem(self.backend, problem, len(greedy) - 1, self.time_limit)
        if outcome.status in (Status.OPTIMAL, Status.FEASIBLE) and outcome.replayed:
            ties = tie_decided(problem, greedy) is not False  # undetermined counts as tie-dependent
            return Counterexample(net, x, threshold, kind, greedy, outcome.features, source, ties)
        return None


# ---------------------------------------------------------------------------- shrinking
def _drop_feature(net: Network, x: np.ndarray, i: int) -> tuple[Network, np.ndarray]:
    first = net.layers[0]
    layers = [Layer(np.delete(first.weight, i, axis=1), first.bias, first.activation), *net.layers[1:]]
    return Network(layers), np.delete(x, i)


def _drop_unit(net: Network, layer: int, unit: int) -> Network:
    layers = list(net.layers)
    this, following = layers[layer], layers[layer + 1]
    layers[layer] = Layer(np.delete(this.weight, unit, axis=0), np.delete(this.bias, unit), this.activation)
    layers[layer + 1] = Layer(np.delete(following.weight, unit, axis=1), following.bias, following.activation)
    return Network(layers)


def _drop_layer(net: Network, layer: int) -> Network:
    """Compose hidden layer `layer` into the next one, forgetting its activation."""
    layers = list(net.layers)
    this, following = layers[layer], layers[layer + 1]
    merged = Layer(following.weight @ this.weight, following.weight @ this.bias + following.bias, following.activation)
    return Network([*layers[:layer], merged, *layers[layer + 2 :]])


def _rounded(net: Network, decimals: int) -> Network:
    return Network(
        [Layer(np.round(layer.weight, decimals), np.round(layer.bias, decimals), layer.activation) for layer in net.layers]
    )


def _simplifications(found: Counterexample) -> Iterator[tuple[Network, np.ndarray, float]]:
    net, x, t = found.net, found.x, found.threshold
    for decimals in (0, 1):
        yield _rounded(net, decimals), x, float(np.round(t, decimals))
    for layer in range(net.depth - 1):
        yield _drop_layer(net, layer), x, t
    for i in range(net.n_inputs):
        if net.n_inputs > 1:
            yield (*_drop_feature(net, x, i), t)
    for layer in range(net.depth - 1):
        for unit in range(net.layers[layer].width):
            if net.layers[layer].width > 1:
                yield _drop_unit(net, layer, unit), x, t


def shrink(found: Counterexample, checker: Checker, deadline: float) -> Counterexample:
    """Apply simplifications while the instance stays a counterexample (re-verified each time)."""
    improved = True
    while improved and time.perf_counter() < deadline:
        improved = False
        for net, x, t in _simplifications(found):
            if _size(net) > _size(found.net) or (
                _size(net) == _size(found.net) and net.hash == found.net.hash and t == found.threshold
            ):
                continue
            smaller = checker.check(net, x, t, found.kind, found.source)
            if smaller is not None and smaller.tie_decided <= found.tie_decided:  # keep a tie-free case tie-free
                found, improved = replace(smaller, source=found.source), True
                break
    return found


def _size(net: Network) -> tuple[int, int, int]:
    return (net.n_inputs, sum(net.widths), net.depth)


# ---------------------------------------------------------------------------- the search
@dataclass(frozen=True)
class HuntReport:
    activation: str
    tried: int  # instances × kinds checked
    raw_finds: int  # counterexamples before shrinking
    smallest: tuple[Counterexample, ...]  # the smallest shrunk case per kind, source and tie rescue (`KEPT`)
    seconds: float
    finds_by: dict[tuple[str, str], int] = field(default_factory=dict)  # raw finds per (kind, source)


KEPT = "per kind, source and tie rescue, the smallest after shrinking"  # which finds a hunt keeps, for its report


def _instances(
    rng: np.random.Generator, activation: str, max_features: int
) -> Iterator[tuple[Network, np.ndarray, float, str, str]]:
    """Endless (net, x, threshold, kind, source) candidates: SET-COVER instances alternate with
    random ones for step and hardtanh."""
    for draw in itertools.count():
        if activation in ("step", "hardtanh") and draw % 2 == 0:
            universe = int(rng.integers(3, 7))
            n_sets = int(rng.integers(3, max(4, max_features + 1)))
            sets = random_set_cover(rng, universe, n_sets)
            for kind in KINDS:
                net, x = set_cover_problem(sets, universe, kind, activation)
                yield net, x, 0.5, kind, "set-cover"
        else:
            net, x, threshold = random_instance(rng, activation, max_features)
            for kind in KINDS:
                yield net, x, threshold, kind, "random"


def hunt(activation: str, max_features: int = 8, seconds: float = 60.0, seed: int = 0, progress=None) -> HuntReport:
    """Search for `seconds`; shrink each find (within the remaining time) and keep the smallest.

    `progress`, if given, is called with (tried, finds) after each candidate.
    """
    if activation not in HUNT_ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r} (use {', '.join(HUNT_ACTIVATIONS)})")
    started = time.perf_counter()
    deadline = started + seconds
    rng = np.random.default_rng(seed)
    checker = Checker()
    best: dict[tuple[str, str, bool], Counterexample] = {}
    tried = finds = 0
    finds_by: dict[tuple[str, str], int] = {}
    try:
        for net, x, threshold, kind, source in _instances(rng, activation, max_features):
            if time.perf_counter() > deadline:
                break
            tried += 1
            found = checker.check(net, x, threshold, kind, source)
            if found is not None:
                finds += 1
                finds_by[kind, source] = finds_by.get((kind, source), 0) + 1
                if (kind, source, found.tie_decided) not in best or _size(found.net) < _size(
                    best[kind, source, found.tie_decided].net
                ):
                    shrunk = shrink(found, checker, deadline)
                    key = (kind, source, shrunk.tie_decided)
                    if key not in best or _size(shrunk.net) < _size(best[key].net):
                        best[key] = shrunk
            if progress is not None:
                progress(tried, finds)
    finally:
        checker.close()
    ordered = tuple(best[key] for key in sorted(best))
    return HuntReport(activation, tried, finds, ordered, time.perf_counter() - started, finds_by)

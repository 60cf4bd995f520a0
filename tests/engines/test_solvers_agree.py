"""One shared problem set for every backend: 240 random small instances — monotone relu,
hardtanh, step and sigmoid, and non-monotone relu; both kinds; real and Boolean boxes — on which
every installed backend must return the minimum size that brute force finds in exact
arithmetic, with a set that passes the exact replay.

Brute force here is independent of the backends: the monotone shortcut for monotone networks,
and for non-monotone ones on the Boolean cube a table of the exact prediction at all 2^n
vertices. Non-monotone networks on a real box have no brute force; there the exact backend (z3)
is the reference, and the float MILPs must match it.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from cardinal.solvers.base import available_solvers, get_solver, solve_problem
from cardinal.verify.generate import median_threshold, random_network

from cardinal.domain import Domain
from cardinal.exact import ExactNetwork
from cardinal.problem import Problem, Status
from tests.conftest import brute_force_minimum

# The limit of a call whose answer a test asserts: none that a run here comes near, so that no
# answer depends on the machine's speed (a limit of seconds ended calls undecided on a loaded machine).
UNBOUNDED = 3600.0

SEEDS = range(12)
CONFIGS = [  # (activation, monotone, binary domain)
    ("relu", True, False),
    ("relu", True, True),
    ("hardtanh", True, False),
    ("step", True, False),
    ("step", True, True),
    ("sigmoid", True, False),
    ("relu", False, True),
    ("hardtanh", False, True),
    ("relu", False, False),
    ("leaky_relu", True, False),
]
PIECEWISE_LINEAR = {"relu", "hardtanh", "step", "leaky_relu"}


INSTALLED = available_solvers()


def _instances(activation: str, monotone: bool, binary: bool):
    for seed in SEEDS:
        rng = np.random.default_rng(1000 + seed)
        n = int(rng.integers(3, 7))
        hidden = (int(rng.integers(2, 5)),) if seed % 2 else (int(rng.integers(2, 4)), int(rng.integers(2, 4)))
        net = random_network(rng, n, hidden, activation, monotone=monotone)
        X = (rng.random((5, n)) < 0.5).astype(float) if binary else rng.random((5, n))
        threshold = median_threshold(net, X)
        domain = Domain.boolean(n) if binary else Domain.unit(n)
        yield seed, net, X[int(rng.integers(0, 5))], threshold, domain


def _vertex_minimum(net, x: np.ndarray, kind: str, threshold: float) -> int | None:
    """Exact minimum on the Boolean cube of any network, from the predictions at all vertices."""
    n = len(x)
    vertices = np.array(list(itertools.product((0.0, 1.0), repeat=n)))
    predictions = ExactNetwork(net).predictions(vertices, threshold)
    p = int(predictions[list(map(tuple, vertices)).index(tuple(x))])
    flips = [frozenset(np.flatnonzero(v != x)) for v, q in zip(vertices, predictions, strict=True) if q != p]
    for size in range(n + 1):
        for subset in map(frozenset, itertools.combinations(range(n), size)):
            if kind == "contrastive" and any(changed <= subset for changed in flips):
                return size
            if kind == "abductive" and not any(not (changed & subset) for changed in flips):
                return size
    return None


def _reference(net, x, kind, threshold, domain) -> int | None:
    if net.is_monotone:
        return brute_force_minimum(net, x, kind, domain, threshold)
    return _vertex_minimum(net, x, kind, threshold)


@pytest.mark.parametrize(("activation", "monotone", "binary"), CONFIGS)
@pytest.mark.parametrize("kind", ["contrastive", "abductive"])
def test_every_backend_finds_the_brute_force_minimum(activation: str, monotone: bool, binary: bool, kind: str) -> None:
    if not INSTALLED:
        pytest.skip("no backend installed")
    checked = 0
    for seed, net, x, threshold, domain in _instances(activation, monotone, binary):
        problem = Problem.make(net, x, kind, domain, threshold)
        has_brute_force = monotone or binary
        expected = _reference(net, x, kind, threshold, domain) if has_brute_force else None
        sizes = {}
        for name in INSTALLED:
            with get_solver(name) as backend:
                outcome = solve_problem(backend, problem, None, UNBOUNDED)
            where = f"{name} on {activation} monotone={monotone} binary={binary} seed={seed} {kind}: {outcome}"
            if outcome.status == Status.UNSUPPORTED:
                # Only these combinations may be unsupported: smooth nets in MILP/SMT, continuous
                # non-monotone boxes in enumerate, shallow-margin MILP cases (with a message),
                # Marabou beyond ReLU networks and on non-monotone binary boxes.
                assert (
                    (activation not in PIECEWISE_LINEAR and name != "enumerate")
                    or (name == "enumerate" and not monotone and not binary)
                    or (name in ("gurobi", "highs", "scip") and "ε" in outcome.message)
                    or (name == "marabou" and (activation != "relu" or (binary and not monotone)))
                ), where
                continue
            assert outcome.status in (Status.OPTIMAL, Status.NONE_EXISTS), where
            assert outcome.status != Status.REFUTED, where
            size = outcome.size if outcome.status == Status.OPTIMAL else None
            if outcome.status == Status.OPTIMAL and (monotone or kind == "contrastive"):
                assert outcome.replayed, where
            sizes[name] = size
            if has_brute_force:
                assert size == expected, f"{where}; brute force {expected}"
        if not has_brute_force and "z3" in sizes:
            assert len(set(sizes.values())) == 1, sizes
        checked += 1
    assert checked == len(SEEDS)


def test_the_shared_set_is_large_enough() -> None:
    assert len(CONFIGS) * len(SEEDS) * 2 >= 200

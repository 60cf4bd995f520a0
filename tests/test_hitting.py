"""The hitting-set step of the implicit-hitting-set loop (`solvers.hitting.HittingSets`): grown one
set at a time, its minimum hitting sets equal brute force with PySAT's RC2 and without it (the
branch and bound), and its greedy hitting set hits every set."""

from __future__ import annotations

import importlib
import itertools

import numpy as np
import pytest
from cardinal.solvers import hitting
from cardinal.solvers.hitting import HittingSets


def _smallest(sets: list[frozenset[int]], universe: int) -> int:
    return next(k for k in range(universe + 1) for c in itertools.combinations(range(universe), k) if all(set(c) & s for s in sets))


@pytest.mark.parametrize("maxsat", [True, False])
def test_minimum_and_greedy_hitting_sets_as_sets_arrive(maxsat: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if maxsat:
        importlib.import_module("pysat")
    else:
        monkeypatch.setattr(hitting, "_maxsat", lambda n: None)
    rng = np.random.default_rng(5)
    for _ in range(30):
        universe = int(rng.integers(3, 9))
        sets: list[frozenset[int]] = []
        with HittingSets(universe) as family:
            assert (family.maxsat is not None) == maxsat
            assert family.minimum(None) == frozenset() and family.minimum(-1) is None  # nothing to hit yet
            for _ in range(int(rng.integers(1, 8))):
                found = frozenset(np.flatnonzero(rng.random(universe) < 0.4).tolist()) or frozenset({int(rng.integers(universe))})
                sets.append(found)
                family.add(found)
                assert family.sets() == sets and len(family) == len(sets)
                smallest = _smallest(sets, universe)
                minimum = family.minimum(None)
                assert minimum is not None and len(minimum) == smallest and all(minimum & s for s in sets)
                assert family.minimum(smallest) is not None and family.minimum(smallest - 1) is None
                assert all(family.greedy() & s for s in sets)

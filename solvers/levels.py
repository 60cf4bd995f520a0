"""Minimum contrastive explanations of non-monotone ReLU networks level by level (issue 28).

CXps are upward closed (a superset of a flipping free set flips), so "no CXp of at most j
features" holds iff no j-subset of the features flips, and each j-subset S is one flip question
in only j dimensions. `by_levels` asks them for j = 1, 2, … while j ≤ `LEVEL_MOST`, C(n, j) ≤ `LEVEL_SETS`
and j is below the incumbent's size: the splitting search (`solvers.split`) takes the subsets `CHUNK` at a
time, each with at most `SPLIT_NODES` boxes, and the caller's exact flip oracle (the exact
MILP's) decides a subset that it leaves. The first point that flips (judged exactly, shrunk) is a
CXp of at most j features — of exactly j, the levels below being proved — and ends the search;
none for every subset proves the level.

Where every feature may move far, the global branch and bound's cardinality row has a weak
relaxation, while a level of few features is a few cheap splitting searches per subset; the
number of subsets grows as C(n, k), so levels go up to 3 (`fits`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cardinal import errors
from cardinal.problem import Problem

from .hitting import FlipOracle, shrink_points
from .oracle import check_witness
from .split import BoxSplitter, OutOfNodes, tree

LEVEL_MOST = 3  # the largest level asked (a 4-feature level took 34 s at 28 features, and minutes at 16)
LEVEL_SETS = 4_000  # the most j-subsets a level may have (C(28, 3) = 3,276)
CHUNK = 512  # subsets searched together
SPLIT_NODES = 20_000  # boxes the splitting search may take per subset before the exact oracle decides it


class Unproved(errors.Unproved):
    """An exact oracle's point failed the exact check: no verdict."""


@dataclass(frozen=True)
class Levels:
    """How far the levels got: no CXp has `proved` features or fewer, and `point` [n], when
    found, flips with `proved + 1` features moved (a minimum CXp, shrunk)."""

    proved: int
    point: np.ndarray | None
    # per level proved here: each j-subset (increasing features) and the splitting search's tree
    # that proved it (method subset-split's SNODE, `split.tree`), None where the oracle decided it
    trees: dict[int, list[tuple[tuple[int, ...], dict[str, Any] | None]]] = field(default_factory=dict)


def fits(n: int, below: int) -> bool:
    """Whether every level under `below` is asked (at most `LEVEL_MOST`, of at most `LEVEL_SETS`
    subsets each), so that the levels decide the search: where they cannot, the branch and bound
    alone proved the 5–9-feature minima at radius 0.05 in under a second, and levels asked first
    cost it its limit."""
    return below - 1 <= LEVEL_MOST and all(math.comb(n, j) <= LEVEL_SETS for j in range(1, below))


def by_levels(problem: Problem, find_flip: FlipOracle, below: int, deadline: float, proved: int = 0) -> Levels:
    """Prove levels `proved` + 1, … up to `below` − 1 (module docstring; levels up to `proved`
    are already proved) until one flips or a level is too large. `find_flip` is the exact oracle
    for the subsets the splitting search leaves; raises `OracleTimeout` at the deadline and
    `Unproved` when the oracle's point fails."""
    splitter = BoxSplitter(problem)
    trees: dict[int, list[tuple[tuple[int, ...], dict[str, Any] | None]]] = {}
    for j in range(proved + 1, below):
        if not fits(problem.n, j + 1):
            break
        trees[j] = []
        point = _level(problem, j, splitter, find_flip, deadline, trees[j])
        if point is not None:
            del trees[j]
            return Levels(proved, point, trees)
        proved = j
    return Levels(proved, None, trees)


def _level(
    problem: Problem, j: int, splitter: BoxSplitter, find_flip: FlipOracle, deadline: float, trees: list | None = None
) -> np.ndarray | None:
    """A point that flips with at most j features moved (shrunk), or None: no j-subset flips. The
    splitting's points are judged exactly there; the oracle's are checked here (`check_witness`).
    `trees` gets each subset's proof (`Levels.trees`) when none flips."""
    subsets = [frozenset(chosen) for chosen in itertools.combinations(range(problem.n), j)]
    for start in range(0, len(subsets), CHUNK):
        chunk = subsets[start : start + CHUNK]
        recorded: list = []
        answers = splitter.flips(chunk, deadline, nodes=SPLIT_NODES, first=True, record=recorded)
        for y in answers:
            if isinstance(y, np.ndarray):
                return shrink_points(problem, y[None, :])[0]
        for free in (free for free, y in zip(chunk, answers, strict=True) if isinstance(y, OutOfNodes)):
            if (y := find_flip(free, deadline)) is not None:
                valid, reason = check_witness(problem, free, tuple(y.tolist()))
                if not valid:
                    raise Unproved(f"a flip oracle's point {reason}")
                return shrink_points(problem, y[None, :])[0]
        if trees is not None:
            recorded += [None] * (len(chunk) - len(recorded))  # a splitter that records nothing: no trees
            for free, answer, found in zip(chunk, answers, recorded, strict=True):
                moved = np.isin(np.arange(problem.n), sorted(free))
                lo, hi = np.where(moved, problem.domain.lower, problem.x), np.where(moved, problem.domain.upper, problem.x)
                trees.append((tuple(sorted(free)), None if answer is not None or found is None else tree(found, lo, hi)))
    return None  # every subset answered (the splitting and the oracle raise `OracleTimeout` at the deadline)

"""Certificates of "no AXp within k" on any network: witness lemmas and a hitting-set tree
(method "witness-hitting" of `cardinal.proof/1`, docs/proofs.md), for the AXps that the monotone
shortcut of `solvers.proof` does not cover (non-monotone networks, K ≥ 2 classifiers, ε-balls).

A point y of the box predicted otherwise than x is a *lemma*: the features D where y differs
from x meet every AXp. So "no set of at most k features meets every D" proves the claim, and the
checker, given the points, evaluates each once and replays a small branch tree over the sets.

**Where the lemmas come from.** First from the solver run that proved the claim: the points
behind its contrastive sets (`Outcome.lemmas`, from the loop's `Outcome` to the backend's), each judged
again here (in the box, flips exactly; one that fails is dropped: they are hints, and the checker
judges every lemma anyway). Where they do not settle the claim, `search_hitting` goes on with the
implicit hitting-set loop of `solvers.hitting`, cut at k — a minimum hitting set of the
sets found so far, of at most k features (`hitting.HittingSets`, incremental RC2), is asked for a flip with
the features outside it free; a flipping point (a gradient search, `solvers.attack`, on K = 1
piecewise-linear networks, else the exact set oracle `solvers.oracle`: enumerate, exact-milp, z3),
shrunk exactly (`hitting.shrink_witness`), is a new lemma; no flip makes the hitting set an AXp
of at most k features (the claim is false, no certificate). When no hitting set of at most k
features is left, `hitting_tree` writes the tree that shows it. The loop's only exact "no" is
the one that refutes the claim: the certificate rests on points alone, so every piece of it is
one exact evaluation for the checker. The certificate keeps only the lemmas its tree names.

The run's own sets are reused because recomputing lemmas without them costs far more than a tree
over them.
"""

from __future__ import annotations

import time
from contextlib import nullcontext

import numpy as np

from cardinal.problem import Problem

from . import reset_bound
from .attack import flipping_point
from .guard import lent
from .hitting import HittingSets, Lemmas, add_point, shrink_points
from .oracle import SetOracle
from .proof_stop import Searched
from .proof_stop import Stopped as _Stop

RESET_SHARE = 0.25  # `search_abductive` gives the reset bound this share of the time first


def search_abductive(
    problem: Problem, k: int, deadline: float, oracle: SetOracle | None = None, hints: Lemmas = ()
) -> Searched:
    """A certificate that no AXp of `problem` has at most k features: method "reset-bound"
    (`solvers.reset_bound`, where it applies, for `RESET_SHARE` of the time, the oracle asked
    where gradient ascent finds no flip), else "witness-hitting" (`search_hitting`)."""
    with lent("oracle", SetOracle) if oracle is None else nullcontext(oracle) as asked:
        if reset_bound.applies(problem):
            until = time.perf_counter() + RESET_SHARE * (deadline - time.perf_counter())
            found = reset_bound.search_reset(problem, k, until, lambda free, stop: _flip(problem, free, stop, asked))
            if found.proof is not None or found.counterexample is not None:
                return found
        return search_hitting(problem, k, deadline, asked, hints)


def search_hitting(
    problem: Problem, k: int, deadline: float, oracle: SetOracle | None = None, hints: Lemmas = ()
) -> Searched:
    """The `proof` object of a "witness-hitting" certificate that no AXp of `problem` has at most k
    features, or None and why; its `nodes`: the lemmas found. `oracle`: the exact set oracle to ask
    (None: this process's lent one); `hints`: lemmas to start from (a solver run's), each judged
    here first."""
    found = HittingSets(problem.n)
    try:
        with lent("oracle", SetOracle) if oracle is None else nullcontext(oracle) as asked, found:
            for y in _judged(problem, hints):
                add_point(problem, found, y)
            while (candidate := found.minimum(k)) is not None:
                if time.perf_counter() > deadline:
                    raise _Stop("deadline")
                y = _flip(problem, frozenset(range(problem.n)) - candidate, deadline, asked)
                if y is None:
                    raise _Stop(f"the claim is false: {sorted(candidate)} is an abductive explanation", tuple(sorted(candidate)))
                add_point(problem, found, shrink_points(problem, y[None, :])[0])
        root = hitting_tree(found.sets(), k, deadline)
    except _Stop as stop:
        return Searched(None, str(stop), len(found), stop.counterexample)
    named = sorted(_named(root))
    renumber = {w: number for number, w in enumerate(named)}
    lemmas = [[list(pair) for pair in found.lemmas[w]] for w in named]
    proof = {"method": "witness-hitting", "lemmas": lemmas, "root": _renumbered(root, renumber)}
    return Searched(proof, "proved", len(found))


def _judged(problem: Problem, hints: Lemmas) -> list[np.ndarray]:
    """The points [n] of `hints` (x with the pairs' values) that lie in the box (at its ends on a
    binary box) and flip the prediction in exact arithmetic; the others are dropped."""
    if not hints:
        return []
    Y = np.repeat(problem.x[None, :], len(hints), axis=0)
    for row, pairs in enumerate(hints):
        for i, value in pairs:
            Y[row, i] = value
    lower, upper = problem.domain.lower, problem.domain.upper
    inside = ((Y >= lower) & (Y <= upper)).all(axis=1)
    if problem.domain.binary:
        inside &= ((Y == lower) | (Y == upper)).all(axis=1)
    Y = Y[inside]
    predicted = problem.predictions(Y) if len(Y) else np.zeros(0, dtype=np.int64)
    return list(Y[(predicted >= 0) & (predicted != problem.prediction)])


def _named(node: dict) -> set[int]:
    """The lemmas a hitting tree names."""
    if "disjoint" in node:
        return set(node["disjoint"])
    return {node["branch"]}.union(*(_named(child) for child in node["children"]))


def _renumbered(node: dict, renumber: dict[int, int]) -> dict:
    """The tree with each lemma index w replaced by `renumber[w]`."""
    if "disjoint" in node:
        return {"disjoint": [renumber[w] for w in node["disjoint"]]}
    return {"branch": renumber[node["branch"]], "children": [_renumbered(child, renumber) for child in node["children"]]}


def _flip(problem: Problem, free: frozenset[int], deadline: float, oracle: SetOracle) -> np.ndarray | None:
    """A point y [n] of the box, x off `free`, that flips the prediction in exact arithmetic, or
    None when an exact engine proved that none exists. Raises `_Stop` at the deadline or when the
    oracle cannot decide."""
    if not free:
        return None  # y = x
    if problem.classes == 1 and problem.net.is_piecewise_linear:
        found = flipping_point(problem, free)
        if found is not None:
            return found
    remaining = deadline - time.perf_counter()
    if remaining <= 0:
        raise _Stop("deadline")
    answer = oracle.flip(problem, free, remaining)
    if answer.answer is None:
        raise _Stop(f"undecided: no exact engine found a flip or proved none with {sorted(free)} free ({answer.note})")
    return None if not answer.answer else np.asarray(answer.witness, dtype=np.float64)


def hitting_tree(sets: list[frozenset[int]], k: int, deadline: float = float("inf")) -> dict:
    """The checker's tree (docs/proofs.md) showing that no set of at most k features meets every
    one of `sets`: at each node (in, out) a leaf "disjoint" when |in| plus a greedy packing of the
    unmet sets (minus out, pairwise disjoint, smallest first) exceeds k, else a branch on the
    smallest unmet set. Raises `_Stop` at the deadline; `ValueError` when some set of at most k
    features meets them all (the claim is false)."""

    def node(chosen: frozenset[int], excluded: frozenset[int]) -> dict:
        if time.perf_counter() > deadline:
            raise _Stop("deadline")
        unmet = sorted(((len(s - excluded), w) for w, s in enumerate(sets) if not s & chosen))
        if not unmet:
            raise ValueError(f"{sorted(chosen)} meets every set: the claim is false")
        packed, used = [], set()
        for _, w in unmet:
            if not (sets[w] - excluded) & used:
                packed.append(w)
                used |= sets[w] - excluded
        if len(chosen) + len(packed) > k:
            return {"disjoint": packed}
        w = unmet[0][1]
        members = sorted(sets[w] - excluded)
        children = [node(chosen | {m}, excluded | set(members[:i])) for i, m in enumerate(members)]
        return {"branch": w, "children": children}

    return node(frozenset(), frozenset())

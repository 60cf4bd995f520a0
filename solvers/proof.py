"""Certificates of "no explanation within k": the generator of `cardinal.proof/1` (docs/proofs.md),
whose trees `cardinal.checker` checks on its own.

Where the monotone shortcut holds there are two methods; `search` tries both (see there). The
first, `shortcut_tree`, searches, depth first, a tree over the
nodes (in, out) of the shortcut's sets (`Problem.base` moved to `Problem.target` on a set S
reaches `Problem.goal` iff S is an explanation; validity is closed upwards). A node's sets are `in ∪ T`, T ⊆ open, |in ∪ T| ≤ k;
its *allowed* set is `in ∪ open`. Each node closes, in this order, by

1. *size*: more than k features are in;
2. *invalid*: `allowed` is no explanation (one exact evaluation), so neither is any set of the node;
3. *bound*: the checker's budgeted interval bound, computed here in float64 and rounded outwards
   (`IntervalBound`), so that whenever it closes a node the checker's exact bound, which is
   tighter, closes it too; else, on networks of `checker.LINEAR_LAYERS`, *linear*: the checker's own
   budgeted linear bound (`checker.Shortcut.linear_bound`, exact, so every such leaf passes);
4. *forced features*: an open feature i without which `allowed` is invalid is in every
   explanation of the node — a split on i whose out-child is an invalid leaf; more forced features
   than the budget end in a size leaf;
5. *all*: at most `ALL_SETS` largest sets, each judged exactly;

else it splits on the open feature of largest share — in first: its coefficient in the linear
bound's output form at the node, where that bound applies, else `_Tree.shares` (a float64 hint).
Every judgement is exact (`Problem.predictions`, via `BoundedForward.decide`); a set of at most k
features found valid ends the search (the claim is false), and so does an undecided judgement (a
smooth enclosure straddling t) and the deadline: `search` says which, `prove` returns None. The
other, `shortcut_lp`, is the lp-tree of `solvers.proof_lp` for the shortcut as a CXp problem
(`_line`: base in the binary box of base and target).

`certificate_file` and `write_certificate` name and write a certificate and its network
(`networks/SHA256.json`, once per folder) through `cardinal.io`'s safe writers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import math
import os
import re
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cardinal import checker
from cardinal.deadline import SPENT, Deadline
from cardinal.domain import Domain
from cardinal.io import write_atomic
from cardinal.network import Network
from cardinal.problem import Kind, Outcome, Problem
from cardinal.rounding import SAFETY, TINY, UNIT_ROUNDOFF, gamma

from . import proof_lp
from .hitting import Lemmas
from .oracle import SetOracle
from .proof_box import search_box
from .proof_hitting import search_abductive
from .proof_stop import FORMAT as FORMAT
from .proof_stop import Stopped as _Stop
from .proof_stop import claim_json as claim_json
from .proof_stop import document as _document
from .proof_stop import problem_json as problem_json

# A node with at most this many largest sets becomes a leaf "all" (the checker allows 4096): each
# set costs the checker an exact evaluation, so a split that closes with a few leaves is cheaper
# (4: the least checking time of the values tried; docs/results.md).
ALL_SETS = 4
# With the shortcut, `search` gives the tree this many seconds, then shortcut-lp `LP_BUDGET`, then the
# tree the rest (see there): each closes most claims fast where it closes them (docs/results.md),
# and a restarted search loses what it had done.
FIRST_BUDGET = 0.5
LP_BUDGET = 2.0
# The checker's rational enclosures of sigmoid, tanh and softplus are this wide (relative) at most;
# the float bound widens every smooth unit by it (softplus's is 2^-40·(1 + value)).
_SMOOTH_SLACK = 2.0**-36


@dataclass(frozen=True)
class Proof:
    """What a search gave: the certificate, or None and why (`reason`); `nodes`: the tree's nodes
    searched (witness-hitting: the lemmas found); `counterexample`: a valid set of at most k
    features (the claim is false), when one was found."""

    certificate: dict[str, Any] | None
    reason: str
    nodes: int
    seconds: float
    counterexample: tuple[int, ...] | None = None


def prove(problem: Problem, k: int, deadline: float = math.inf) -> dict[str, Any] | None:
    """A `cardinal.proof/1` certificate that no explanation of `problem`'s kind has at most k
    features (k = n for a CXp: none exists at all), or None: the claim is false, the deadline
    (`time.perf_counter()`) passed, a judgement was undecided, or the shortcut does not apply."""
    return search(problem, k, deadline).certificate


def from_record(problem: Problem, k: int, trees: Mapping[int, Sequence[tuple[tuple[int, ...], Any]]]) -> Proof | None:
    """The "subset-split" certificate of "no CXp within k" written from the proof an engine found
    (`Outcome.subset_trees`: per level j, each j-subset and its tree), without a search; None
    where the record does not prove the claim by that method alone: not a CXp, level k not
    recorded or not every k-subset listed, or a subset proved by another argument (None)."""
    started = time.perf_counter()
    layers = problem.net.layers
    if problem.kind != Kind.CONTRASTIVE or layers[-1].activation.name != "identity":
        return None
    if any(layer.activation.name != "relu" for layer in layers[:-1]):
        return None
    if k == 0:  # the one empty subset: its box is x alone, whose keep scores the checker evaluates
        subsets = [{"free": [], "root": {"leaf": "interval"}}]
    else:
        level = trees.get(k)
        if level is None or len(level) != math.comb(problem.n, k) or any(root is None for _, root in level):
            return None
        subsets = [{"free": list(free), "root": root} for free, root in level]
    document = _document(problem, k, {"method": "subset-split", "subsets": subsets})
    nodes = sum(_size(entry["root"]) for entry in subsets)
    return Proof(document, "written from the engine's proof", nodes, time.perf_counter() - started)


def _size(node: dict[str, Any]) -> int:
    """The nodes of a subset-split tree."""
    return 1 if "leaf" in node else 1 + _size(node["below"]) + _size(node["above"])


def search(
    problem: Problem,
    k: int,
    deadline: float = math.inf,
    oracle: SetOracle | None = None,
    hints: Lemmas = (),
    trees: Mapping[int, Sequence[tuple[tuple[int, ...], Any]]] | None = None,
) -> Proof:
    """`prove`, with the reason when there is no certificate. First, where `trees` (the solver
    run's `Outcome.subset_trees`) hold the engine's own proof of the claim, the certificate
    written from it (`from_record`), no search. With the monotone shortcut:
    `shortcut_tree` for `FIRST_BUDGET` seconds, `shortcut_lp` where it applies for `LP_BUDGET`,
    then `shortcut_tree` until the deadline; the reason names each one's.
    Without the monotone shortcut an AXp claim is proved by witness lemmas
    (`solvers.proof_hitting`, which starts from `hints`, the points behind a solver run's
    contrastive sets — `Outcome.lemmas` — and asks `oracle`, the exact set oracle: None, this
    process's lent one), a CXp claim on a piecewise-linear network (any K; identity, relu, leaky_relu of slope
    below 1, hardtanh) by LP bounds (`solvers.proof_lp`), any other CXp claim (step, smooth
    units, leaky_relu of slope ≥ 1) by interval boxes (`solvers.proof_box`)."""
    started = time.perf_counter()
    if not 0 <= k <= problem.n:
        raise ValueError(f"k must lie in 0..{problem.n}, got {k}")
    if trees is not None and (written := from_record(problem, k, trees)) is not None:
        return written
    if not problem.monotone:
        if problem.kind == Kind.ABDUCTIVE:
            found = search_abductive(problem, k, deadline, oracle, hints)
        else:
            found = proof_lp.search_lp(problem, k, deadline) if proof_lp.applies(problem) else search_box(problem, k, deadline)
        document = None if found.proof is None else _document(problem, k, found.proof)
        return Proof(document, found.reason, found.nodes, time.perf_counter() - started, found.counterexample)
    # The tree closes quickly most claims it closes, LP bounds some others quickly, and the tree
    # given the rest of the time closes those LP bounds leave (docs/results.md). So: the tree
    # briefly, LP bounds briefly, the tree again.
    turns: list[tuple[Callable[[Problem, int, float], Proof], float]] = [(shortcut_tree, FIRST_BUDGET)]
    if problem.net.is_piecewise_linear and proof_lp.applies(_line(problem)):  # else shortcut_lp gives none at once
        turns.append((shortcut_lp, LP_BUDGET))
    turns.append((shortcut_tree, math.inf))
    reasons: dict[str, str] = {}
    nodes = 0
    for method, budget in turns:
        name = method.__name__.replace("_", "-")
        if reasons.get(name, "deadline") != "deadline" or (reasons and time.perf_counter() >= deadline):
            continue  # it failed for good (an undecided judgement, a tree too deep), or the time is up
        found = method(problem, k, min(deadline, time.perf_counter() + budget))
        if found.certificate is not None or found.counterexample is not None:
            return dataclasses.replace(found, seconds=time.perf_counter() - started)
        reasons[name], nodes = found.reason, nodes + found.nodes
    return Proof(None, "; ".join(f"{name}: {reason}" for name, reason in reasons.items()), nodes, time.perf_counter() - started)


def shortcut_tree(problem: Problem, k: int, deadline: float = math.inf) -> Proof:
    """A "shortcut-tree" certificate (the monotone shortcut holds: `problem.monotone`), or none and why."""
    started = time.perf_counter()
    tree = _Tree(problem, k, deadline)
    try:
        root = tree.node(np.zeros(problem.n, dtype=bool), np.zeros(problem.n, dtype=bool))
    except RecursionError:  # one frame per split on a path: n beyond Python's recursion limit
        return Proof(
            None, f"the tree is too deep for this generator ({problem.n} features)", tree.nodes, time.perf_counter() - started
        )
    except _Stop as stop:
        return Proof(None, str(stop), tree.nodes, time.perf_counter() - started, stop.counterexample)
    document = _document(problem, k, {"method": "shortcut-tree", "root": root})
    return Proof(document, "proved", tree.nodes, time.perf_counter() - started)


def shortcut_lp(problem: Problem, k: int, deadline: float = math.inf) -> Proof:
    """A "shortcut-lp" certificate (the monotone shortcut holds, on a network `proof_lp` encodes),
    or none and why: the lp-tree of `_line(problem)`, whose CXps within k are the explanations
    within k here."""
    started = time.perf_counter()
    if not (problem.net.is_piecewise_linear and proof_lp.applies(line := _line(problem))):
        reason = "LP bounds do not apply (a layer other than identity, relu, leaky_relu of slope below 1 or hardtanh)"
        return Proof(None, reason, 0, 0.0)
    if line.prediction == problem.goal:
        return Proof(None, "the claim is false: the empty set is an explanation", 0, 0.0, ())
    found = proof_lp.search_lp(line, k, deadline)
    document = None if found.proof is None else _document(problem, k, {**found.proof, "method": "shortcut-lp"})
    return Proof(document, found.reason, found.nodes, time.perf_counter() - started, found.counterexample)


def _line(problem: Problem) -> Problem:
    """The shortcut as a CXp problem: `problem.base` in the binary box whose ends are base_i and
    target_i (moving feature i there is moving it along the shortcut)."""
    base, target = problem.base, problem.target
    domain = Domain(np.minimum(base, target), np.maximum(base, target), binary=True)
    return Problem.make(problem.net, base, "contrastive", domain, problem.threshold)


# ---------------------------------------------------------------------------- the node bound
class IntervalBound:
    """The checker's budgeted interval bound (docs/proofs.md) in float64, rounded outwards.

    The first layer's pre-activation of unit j over a node's sets lies in [c_j + Σ_in d_j +
    (the r most negative d_ji on open), c_j + Σ_in d_j + (the r largest)], d_ji = W₁[j,i]·(target_i
    − base_i); computed in float64, each end is within `error` [w₀] of the checker's exact one
    (γ bounds of the products and sums, every move counted; a sum of the r largest moves is
    1-Lipschitz in the moves, whatever the rounding does to their order). Each later step moves
    the ends outwards by its rigorous rounding bound (`cardinal.rounding`), and smooth units by
    `_SMOOTH_SLACK` more than the checker's enclosures are wide. So the float interval contains the
    checker's at every layer, and a node it closes the checker's bound closes too."""

    def __init__(self, problem: Problem) -> None:
        first = problem.net.layers[0]
        weight, bias = first.weight, first.bias
        step = problem.target - problem.base
        self.moves = weight * step[None, :]  # [w0, n]
        self.centres = weight @ problem.base + bias  # [w0]
        magnitude = np.abs(weight) @ np.abs(problem.base) + np.abs(bias) + 3 * (np.abs(weight) @ np.abs(step))
        self.error = gamma(2 * problem.n + 8) * (magnitude + np.abs(self.centres)) * SAFETY + TINY
        self.layers = problem.net.layers
        self.goal, self.threshold = problem.goal, problem.threshold

    def closes(self, chosen: np.ndarray, open_: np.ndarray, budget: int) -> bool:
        """Whether the checker's bound closes the node (chosen, open_ [n] bool, budget r ≥ 0)."""
        fixed = self.moves[:, chosen].sum(axis=1)
        free = self.moves[:, open_]
        r = min(budget, free.shape[1])
        rises = falls = 0.0
        if r:
            rises = -np.partition(-np.maximum(free, 0.0), r - 1, axis=1)[:, :r].sum(axis=1)
            falls = np.partition(np.minimum(free, 0.0), r - 1, axis=1)[:, :r].sum(axis=1)
        low, high = self.centres + fixed + falls, self.centres + fixed + rises
        low, high = _down(low, self.error), _up(high, self.error)
        for number, layer in enumerate(self.layers):
            if number:
                positive, negative = np.maximum(layer.weight, 0.0), np.minimum(layer.weight, 0.0)
                terms = gamma(layer.weight.shape[1] + 2)
                low_sum = positive @ low + negative @ high + layer.bias
                high_sum = positive @ high + negative @ low + layer.bias
                spread = terms * (positive @ np.abs(low) - negative @ np.abs(high) + np.abs(layer.bias))
                spread_high = terms * (positive @ np.abs(high) - negative @ np.abs(low) + np.abs(layer.bias))
                low, high = _down(low_sum, spread), _up(high_sum, spread_high)
            low, high = _activate(layer.activation, low, -1), _activate(layer.activation, high, +1)
        if self.goal == 1:  # an explanation needs f > t: impossible when the top ≤ t
            return bool(high[0] <= self.threshold)
        return bool(low[0] > self.threshold)


def _down(value: np.ndarray, error: np.ndarray | float) -> np.ndarray:
    """A float64 at most value − error in exact arithmetic (the subtraction's rounding included)."""
    return value - (error + 2 * UNIT_ROUNDOFF * np.abs(value)) * SAFETY - TINY


def _up(value: np.ndarray, error: np.ndarray | float) -> np.ndarray:
    return value + (error + 2 * UNIT_ROUNDOFF * np.abs(value)) * SAFETY + TINY


def _activate(activation: Any, h: np.ndarray, direction: int) -> np.ndarray:
    """σ at float ends h, moved outwards (direction −1 down, +1 up) by σ's own rounding and, for
    smooth units, by more than the width of the checker's enclosures. A step is exact in float64
    (a comparison), and non-decreasing: step(h) at an end below (above) the checker's is below
    (above) the checker's."""
    z = activation.apply_(torch.from_numpy(h.copy())).numpy()
    if not activation.is_continuous:
        return z
    error = activation.float_error(z, np.zeros_like(z))
    if not activation.is_piecewise_linear:
        error = error + _SMOOTH_SLACK * (1 + np.abs(z))
    return _down(z, error) if direction < 0 else _up(z, error)


# ---------------------------------------------------------------------------- the tree
class _Tree:
    """The depth-first search of the module docstring for one problem and k."""

    def __init__(self, problem: Problem, k: int, deadline: float) -> None:
        self.problem, self.k, self.deadline = problem, k, deadline
        self.bound = IntervalBound(problem)
        self.nodes = 0
        # a feature's share: Σ_j s_j·|d_ji|, s = |W_L|···|W_2| (how far its move can carry f, ignoring
        # the activations); splitting on the largest gave trees 3× smaller than the largest drop of
        # f at the node, or the largest single-feature move, on the quick suite's trained networks
        sensitivity = np.ones(1)
        for layer in reversed(problem.net.layers[1:]):
            sensitivity = sensitivity @ np.abs(layer.weight)
        self.shares = sensitivity @ np.abs(self.bound.moves)
        self.linear = _linear_bound(problem, k)

    def closes(self, chosen: np.ndarray, open_: np.ndarray, budget: int) -> tuple[dict[str, Any] | None, np.ndarray]:
        """A leaf "bound" or "linear" when that bound closes the node (else None), and the open
        features' shares [n] to split on: where the linear bound applies, each one's coefficient
        in the output's form that failed to close (how far it can carry f towards the goal), else
        the static `shares`."""
        if self.bound.closes(chosen, open_, budget):
            return {"leaf": "bound"}, self.shares
        if self.linear is None:
            return None, self.shares
        closed, form = self.linear.linear_bound(frozenset(np.flatnonzero(chosen).tolist()), np.flatnonzero(open_).tolist())
        if closed:
            return {"leaf": "linear"}, self.shares
        shares = np.zeros(self.problem.n)
        shares[open_] = np.array([float(c) for c in form]) * (1.0 if self.problem.goal == 1 else -1.0)
        return None, shares

    def valid_sets(self, masks: np.ndarray) -> np.ndarray:
        """masks [B, n] bool → [B] bool: each set an explanation, judged exactly; a valid set of at
        most k features, or an undecided judgement (a smooth enclosure straddling t), ends the search."""
        problem = self.problem
        predicted = problem.predictions(np.where(masks, problem.target[None, :], problem.base[None, :]))
        valid = predicted == problem.goal
        small = masks.sum(axis=1) <= self.k
        if (valid & small).any():
            found = masks[np.argmax(valid & small)]
            raise _Stop(f"the claim is false: {_shown(found)} is an explanation", tuple(np.flatnonzero(found).tolist()))
        if (predicted < 0).any():
            undecided = _shown(masks[np.argmax(predicted < 0)])
            raise _Stop(f"undecided: exact arithmetic cannot decide whether {undecided} is an explanation")
        return valid

    def node(self, chosen: np.ndarray, excluded: np.ndarray) -> dict[str, Any]:
        """The subtree of the node (chosen = in, excluded = out; [n] bool each)."""
        self.nodes += 1
        if time.perf_counter() > self.deadline:
            raise _Stop("deadline")
        budget = self.k - int(chosen.sum())
        if budget < 0:
            return {"leaf": "size"}
        allowed = ~excluded
        if not self.valid_sets(allowed[None, :])[0]:
            return _invalid(allowed)
        leaf, shares = self.closes(chosen, allowed & ~chosen, budget)
        if leaf is not None:
            return leaf
        free = np.flatnonzero(allowed & ~chosen)
        probes = np.repeat(allowed[None, :], len(free) + 1, axis=0)
        probes[np.arange(1, len(free) + 1), free] = False
        forced = free[~self.valid_sets(probes)[1:]].tolist()[: budget + 1]
        if not forced:
            return self._rest(chosen, excluded, budget, shares)
        # a chain of splits on the forced features, each out-child invalid; a size leaf at its end
        # when they exceed the budget, else the node with them all in (the same allowed set)
        inside = chosen.copy()
        inside[forced] = True
        tail = {"leaf": "size"} if len(forced) > budget else self._rest(inside, excluded, budget - len(forced))
        for feature in reversed(forced):
            out = allowed.copy()
            out[feature] = False
            tail = {"split": feature, "in": tail, "out": _invalid(out)}
        return tail

    def _rest(self, chosen: np.ndarray, excluded: np.ndarray, budget: int, shares: np.ndarray | None = None) -> dict[str, Any]:
        """A node whose allowed set is valid and has no forced feature (`shares`: its bounds are
        known not to close, and these are its shares from `closes`): a bound leaf, a leaf "all"
        when small, else a split on the open feature of largest share."""
        open_ = ~excluded & ~chosen
        if shares is None:
            leaf, shares = self.closes(chosen, open_, budget)
            if leaf is not None:
                return leaf
        free = np.flatnonzero(open_)
        size = min(budget, len(free))
        count = math.comb(len(free), size)
        if count <= ALL_SETS:
            sets = np.repeat(chosen[None, :], count, axis=0)
            for row, subset in enumerate(itertools.combinations(free.tolist(), size)):
                sets[row, list(subset)] = True
            self.valid_sets(sets)  # a valid one ends the search
            return {"leaf": "all"}
        feature = int(free[np.argmax(shares[free])])
        inside, outside = chosen.copy(), excluded.copy()
        inside[feature] = True
        outside[feature] = True
        return {"split": feature, "in": self.node(inside, excluded), "out": self.node(chosen, outside)}


def _linear_bound(problem: Problem, k: int) -> checker.Shortcut | None:
    """The checker's own shortcut, whose exact linear bound closes leaves "linear", on networks
    of identity, relu, leaky_relu and hardtanh layers (else None)."""
    if not all(layer.activation.name in checker.LINEAR_LAYERS for layer in problem.net.layers):
        return None
    threshold = float(problem.threshold)
    return checker.Shortcut.of(problem.net.to_json(), problem.base.tolist(), problem.target.tolist(), problem.goal, threshold, k)


def _invalid(allowed: np.ndarray) -> dict[str, Any]:
    return {"leaf": "invalid", "set": np.flatnonzero(allowed).tolist()}


def _shown(mask: np.ndarray) -> str:
    return "{" + ", ".join(map(str, np.flatnonzero(mask).tolist())) + "}"


# ---------------------------------------------------------------------------- files
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def certificate_file(key: str) -> str:
    """The file name of the certificate of a record key ("instance:row:kind" → "instance_row_kind.proof.json")."""
    return _UNSAFE.sub("_", key).strip("._") + ".proof.json"


def write_certificate(text: str, path: str | Path, network: Network | None = None, *, root: str | Path | None = None) -> None:
    """Write a certificate's JSON text to `path`, whole or not at all (`io.write_atomic`; `root`
    as there), and with `network` that network's JSON as `networks/SHA256.json` beside it, unless
    that very text is there already (`network_beside`): what `cardinal proof check` will read
    there is the network the certificate was checked against. `networks/` and its file are
    cardinal's names: a link there is refused (InputError), never followed."""
    write_atomic(path, text, root=root)
    if network is not None:
        stored = network_beside(path, network.sha256)
        document = json.dumps(network.to_json()) + "\n"
        if not _holds(stored, document.encode()):
            write_atomic(stored, document, root=Path(path).parent if root is None else root)


def _holds(path: Path, data: bytes) -> bool:
    """Whether `path` is a regular file (not a link, in a folder that is no link) holding `data`."""
    try:
        if path.parent.is_symlink() or not stat.S_ISREG(os.lstat(path).st_mode) or os.lstat(path).st_size != len(data):
            return False
        return path.read_bytes() == data
    except OSError:
        return False


def network_beside(path: str | Path, digest: str) -> Path:
    """Where `write_certificate` keeps the network of a certificate at `path`."""
    return Path(path).parent / "networks" / f"{digest}.json"


# ---------------------------------------------------------------------------- one certificate writer
@dataclass(frozen=True)
class Written:
    """A certificate made for one result: its `proof` entry, and its JSON text (None: no file)."""

    entry: dict[str, Any]
    text: str | None = None


def make(
    problem: Problem, k: int | None, reason: str, key: str, time_limit: float, embed: bool = False,
    outcomes: Mapping[str, Outcome] | None = None, deadline: Deadline | None = None,
) -> Written:
    """Prove "no explanation within k" (generation limited to `time_limit` s), check the
    certificate with `cardinal.checker`, and return its entry and text (`Written`). `outcomes`:
    the solvers' outcomes for the claim, whose lemmas (`Outcome.lemmas`) the search starts from and
    whose recorded subset trees (`Outcome.subset_trees`) it writes the certificate from where they
    cover the claim (`from_record`), searching again only where they do not. The entry's file
    name is `certificate_name(key, sha256)`: the record's key and the certificate's own SHA-256,
    so that two different certificates never get one name. `deadline` (the call's budget): the
    check gets the time left (at least `CHECK_FLOOR` s); a certificate whose check does not end
    by then is dropped — no file, the reason says so — never written unchecked."""
    if k is None:
        return Written({"file": None, "reason": reason})
    started = time.perf_counter()
    hints = tuple(lemma for outcome in (outcomes or {}).values() for lemma in outcome.lemmas)
    trees = {level: tree for outcome in (outcomes or {}).values() for level, tree in outcome.subset_trees.items()}
    found = search(problem, k, started + time_limit, hints=hints, trees=trees)
    if found.certificate is None:
        return Written({"file": None, "reason": f"no certificate: {found.reason} after {found.nodes} node(s)"})
    network = problem.net.to_json()
    if embed:
        found.certificate["network"] = network
    text = json.dumps(found.certificate, separators=(",", ":")) + "\n"
    checked = time.perf_counter()
    within = None if deadline is None or math.isinf(deadline.left()) else max(deadline.left(), CHECK_FLOOR)
    try:  # what `proof check` reads: the text, the network as `save` writes it
        with alarm(within):
            report = checker.check(json.loads(text), network)
    except CheckTime:
        return Written({"file": None, "reason": f"no certificate: its check did not end within {SPENT}"})
    digest = hashlib.sha256(text.encode()).hexdigest()
    entry: dict[str, Any] = {
        "file": certificate_name(key, digest),
        "sha256": digest,
        "problem": found.certificate["problem"],
        "claim": found.certificate["claim"],
        "bytes": len(text.encode()),
        "seconds": round(found.seconds, 6),
        "check_seconds": round(time.perf_counter() - checked, 6),
        "accepted": report.accepted,
    }
    if not report.accepted:
        entry["message"] = report.message
    return Written(entry, text)


CHECK_FLOOR = 0.5  # seconds a made certificate's check gets at least, however little of the budget is left


class CheckTime(BaseException):
    """A check's time ran out (`alarm`): a BaseException, so that no handler of the checker's can
    take it for a verdict."""


@contextlib.contextmanager
def alarm(seconds: float | None) -> Iterator[None]:
    """Run the body within `seconds` (SIGALRM's real-time timer, in the main thread of a Unix
    process; elsewhere, or with None, unbounded), raising `CheckTime` past it."""
    if seconds is None or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return
    armed = [True]

    def expire(signum: int, frame: Any) -> None:
        if armed[0]:
            raise CheckTime

    previous = signal.signal(signal.SIGALRM, expire)
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        yield
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def certificate_name(key: str, sha256: str) -> str:
    """The file name of a certificate: its record's key ("row0-contrastive") and the first
    `NAME_DIGITS` hex digits of its SHA-256 ("row0-contrastive-3f2a….proof.json"). Calls and
    runs that write into one folder never give two different certificates one name; an identical
    certificate gets the same name, and is written once."""
    return certificate_file(f"{key}-{sha256[:NAME_DIGITS]}")


NAME_DIGITS = 16  # hex digits of a certificate's SHA-256 in its file name (64 bits)

"""Method "witness-hitting" (AXps of any network the checker evaluates) and its hitting-set tree:
points that change the prediction, and counting."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from .exact import CertificateError, _index, _Lazy, _Net, _point, _predict, _Rejected


def _hitting(
    net: _Net, x: list[Fraction], box: tuple, threshold: Fraction | None, prediction: int, k: int, proof: dict
) -> tuple[int, int]:
    """Method "witness-hitting" (AXps of any network): each lemma is a point y of the box (x with
    the listed features changed) whose prediction differs from p(x), so the features D where y
    differs from x meet every AXp (an AXp outside D would fix y's features to x's and keep p(x)).
    The tree shows that no set of at most k features meets every D. Returns (leaves, evaluations)."""
    n = len(x)
    lemmas = proof.get("lemmas")
    if not isinstance(lemmas, list):
        raise CertificateError("proof.lemmas must be a list")
    sets = []
    for number, lemma in enumerate(lemmas):
        where = f"lemma {number}"
        y = _point(lemma, x, box, where)
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
        where = _Lazy(lambda chosen=chosen, excluded=excluded: f"the node with in {sorted(chosen)}, out {sorted(excluded)}")
        if isinstance(node, dict) and "branch" in node and isinstance(node.get("children"), list):
            members = sorted(_unmet(sets, node["branch"], chosen, where) - excluded)
            if len(node["children"]) != len(members):
                raise _Rejected(
                    f"{where}: lemma {node['branch']} leaves {len(members)} feature(s) to branch on, not {len(node['children'])}"
                )
            leaves += not members
            out = excluded
            for member, child in zip(members, node["children"], strict=True):
                stack.append((child, chosen | {member}, out))
                out |= {member}
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


def _unmet(sets: list[frozenset[int]], w: Any, chosen: frozenset[int], where: _Lazy) -> frozenset[int]:
    """Lemma w's set, which the features in must not meet."""
    if not _index(w, len(sets)):
        raise CertificateError(f"{where}: {w!r} is not a lemma's index")
    if sets[w] & chosen:
        raise _Rejected(f"{where}: lemma {w}'s set is met by the features in")
    return sets[w]

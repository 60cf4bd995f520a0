"""The independent checker of `cardinal.proof/1` certificates (`cardinal proof check`).

A certificate says that no explanation of some kind has at most k features (docs/proofs.md has
the format). This package decides whether it proves that, on its own: it imports nothing from
cardinal, only Python's standard library and its own files, and evaluates the network with its
own exact arithmetic. What it trusts: Python (integers, `fractions`, `json`, `hashlib`), the network it is
given (checked against the certificate's SHA-256), and the argument written in docs/proofs.md,
one per method: "shortcut-tree", the monotone shortcut on a sign-monotone network (which it checks
itself), interval arithmetic and layer-by-layer linear bounds; "shortcut-lp", the same shortcut
and an lp-tree over the box of its points; "witness-hitting" (AXps of any network), points that
change the prediction and a hitting-set tree; "reset-bound" (AXps of networks of the linear
leaf's activations), one such point and a budgeted linear bound over its resets; "lp-tree" (CXps of relu, leaky_relu and hardtanh
networks, K ≥ 1), its own LP relaxation (`LpRelaxation`, the reference encoding) and weak duality, in
rationals; "box-tree" (CXps of any network, K ≥ 1), interval evaluation over boxes of the input
(`BoxTree`); "subset-split" (CXps of ReLU networks, K ≥ 1), every k-subset's box cut into boxes
closed by interval bounds of the keep scores or by the worst vertex of an affine piece (`SubsetSplit`).

Files: `exact` (the network, its exact evaluation and enclosures, the prediction rule — every
method rests on it), then one file per method family: `shortcut` (shortcut-tree, shortcut-lp; with `linear`, the tree's
leaf "linear"), `hitting` (witness-hitting and the hitting tree), `reset` (reset-bound, with
`linear`), `lp` (lp-tree), `box` (box-tree), `split` (subset-split). To audit one
certificate, read this file, `exact` and its method's file. `record` (`check_record`) checks a
record of certify, crosscheck or `to_dict()` whole against the certificate it names
(`proof check --records`): no certificate's acceptance rests on it.

`check(certificate, network)` returns a `Report` (accepted or the first step that fails, with the
path to it); `CertificateError` is a certificate (or network) that is not well formed.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from .box import BoxNode, BoxTree
from .exact import (
    FORMAT,
    NETWORK_FORMAT,
    CertificateError,
    Report,
    _index,
    _Layer,
    _Net,
    _number,
    _numbers,
    _predict,
    _Rejected,
    network_sha256,
)
from .hitting import _hitting
from .linear import LAYERS as LINEAR_LAYERS
from .lp import LpRelaxation
from .reset import Resets, _reset
from .shortcut import MAX_ALL_SETS, Shortcut, check_shortcut
from .split import SubsetSplit

METHODS = ("shortcut-tree", "shortcut-lp", "witness-hitting", "reset-bound", "lp-tree", "box-tree", "subset-split")

__all__ = [
    "FORMAT",
    "LINEAR_LAYERS",
    "MAX_ALL_SETS",
    "NETWORK_FORMAT",
    "BoxNode",
    "BoxTree",
    "CertificateError",
    "LpRelaxation",
    "Report",
    "Resets",
    "Shortcut",
    "SubsetSplit",
    "check",
    "network_sha256",
]


def check(certificate: Any, network: Any | None = None) -> Report:
    """Check a parsed certificate, against `network` (a parsed cardinal.network/1 document) or the
    one it embeds. Raises `CertificateError` when either is not well formed."""
    if not isinstance(certificate, dict) or certificate.get("format") != FORMAT:
        raise CertificateError(f"not a {FORMAT} certificate")
    problem, claim, proof = (certificate.get(key) for key in ("problem", "claim", "proof"))
    if not all(isinstance(part, dict) for part in (problem, claim, proof)):
        raise CertificateError("a certificate needs the objects 'problem', 'claim' and 'proof'")
    network = network if network is not None else certificate.get("network")
    if network is None:
        raise CertificateError("no network: give one, or a certificate that embeds it")
    digest, layers = network_sha256(network)
    n, classes = len(layers[0].weight[0]), len(layers[-1].weight)
    x = [Fraction(v) for v in _numbers(problem.get("x"), "problem.x", n)]
    lower = [Fraction(v) for v in _numbers(problem.get("lower"), "problem.lower", n)]
    upper = [Fraction(v) for v in _numbers(problem.get("upper"), "problem.upper", n)]
    if classes == 1:
        threshold: Fraction | None = Fraction(_number(problem.get("threshold"), "problem.threshold"))
    elif problem.get("threshold") is None:
        threshold = None
    else:
        raise CertificateError(f"problem.threshold must be null: the network has {classes} outputs (argmax)")
    binary = problem.get("binary")
    if not isinstance(binary, bool):
        raise CertificateError("problem.binary must be true or false")
    kind = problem.get("kind")
    if kind not in ("contrastive", "abductive"):
        raise CertificateError("problem.kind must be 'contrastive' or 'abductive'")
    if claim == {"none_exists": True} and kind == "contrastive":
        k = n
    elif set(claim) == {"no_explanation_within"} and _index(claim["no_explanation_within"], n + 1):
        k = claim["no_explanation_within"]
    else:
        raise CertificateError("claim must be {'no_explanation_within': k} (0 ≤ k ≤ n) or, contrastive, {'none_exists': true}")
    method = proof.get("method")
    if not isinstance(method, str) or method not in METHODS:
        raise CertificateError(f"unknown proof method {method!r}" if isinstance(method, str) and len(method) < 40 else
                               "proof.method must be one of the seven method names")  # fmt: skip
    said = f"no {kind} explanation of at most {k} feature(s)"
    if claim == {"none_exists": True}:
        said = "no contrastive explanation at all"
    statement = _statement(digest, layers, problem, threshold, binary, said, method)
    try:
        leaves, evaluations = _check(x, (lower, upper, binary), threshold, kind, k, proof, problem.get("network_sha256"), digest,
                                     layers)  # fmt: skip
    except _Rejected as rejection:
        return Report(False, str(rejection), statement=statement)
    return Report(True, f"accepted: {said}", leaves, evaluations, statement)


def _statement(
    digest: str, layers: list[_Layer], problem: dict, threshold: Fraction | None, binary: bool, said: str, method: str
) -> tuple[str, ...]:
    """The claim in full, one line per part: every number as the double it is (Python's repr)."""
    widths = [len(layers[0].weight[0])] + [len(layer.weight) for layer in layers]
    classes = widths[-1]
    if threshold is None:
        rule = f"{classes} classes, the argmax of the outputs (ties to the lowest index)"
    else:
        rule = f"one output f, p = 1 iff f > threshold = {float(threshold)!r}"
    box = "binary: each feature at one of its two bounds" if binary else "real: each feature anywhere between its bounds"
    return (
        f"network: sha256 {digest} ({' × '.join(map(str, widths))}, activations {', '.join(layer.name for layer in layers)})",
        f"x: {_doubles(problem['x'])}",
        f"box ({box}): lower {_doubles(problem['lower'])}, upper {_doubles(problem['upper'])}",
        f"prediction: {rule}",
        f"claim: {said} (kind {problem['kind']}), method {method}",
    )


def _doubles(values: list[float | int]) -> str:
    return "[" + ", ".join(repr(float(v)) for v in values) + "]"


def _check(
    x: list[Fraction], box: tuple, threshold: Fraction | None, kind: str, k: int, proof: dict, named: Any, digest: str,
    layers: list[_Layer],
) -> tuple[int, int]:  # fmt: skip
    """Check the proof of the claim read by `check`: (leaves, exact evaluations), or `_Rejected`."""
    lower, upper, binary = box
    if named != digest:
        shown = repr(named) if isinstance(named, str) and len(named) <= 64 else "another value"
        raise _Rejected(f"the network's SHA-256 is {digest}, the certificate is about {shown}")
    if not all(lo <= v <= hi for lo, v, hi in zip(lower, x, upper, strict=True)):
        raise _Rejected("x lies outside the box")
    if binary and not all(v in (lo, hi) for lo, v, hi in zip(lower, x, upper, strict=True)):
        raise _Rejected("x is no vertex of the binary box")
    net = _Net(layers)
    prediction = _predict(net.point(x), threshold, "x")
    if proof["method"] == "witness-hitting":
        if kind != "abductive":
            raise _Rejected("witness lemmas prove claims about abductive explanations only")
        return _hitting(net, x, box, threshold, prediction, k, proof)
    if proof["method"] == "reset-bound":
        if kind != "abductive":
            raise _Rejected("a reset bound proves claims about abductive explanations only")
        return _reset(layers, x, box, threshold, prediction, k, proof)
    if proof["method"] == "lp-tree":
        if kind != "contrastive":
            raise _Rejected("LP bounds prove claims about contrastive explanations only")
        return LpRelaxation(net, x, box, threshold, prediction, k).walk(proof.get("root")), 0
    if proof["method"] == "box-tree":
        if kind != "contrastive":
            raise _Rejected("interval boxes prove claims about contrastive explanations only")
        leaves = BoxTree(net, x, box, threshold, prediction, k).walk(proof.get("root"))
        return leaves, leaves
    if proof["method"] == "subset-split":
        if kind != "contrastive":
            raise _Rejected("subset boxes prove claims about contrastive explanations only")
        return SubsetSplit(net, x, box, threshold, prediction, k).walk(proof)
    return check_shortcut(proof["method"], net, x, box, threshold, prediction, kind, k, proof)

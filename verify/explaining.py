"""The lines of `cardinal explain` (and of `cardinal.explain(..., prove=False)`): an explainer's
answers, each checked in exact arithmetic, without a minimality proof.

Greedy (Algorithm 1) on a sign-monotone network — in exact arithmetic alone on small inputs
(`algorithm1.explain_exactly`), else batched in floats and re-checked exactly — and sequential
deletion (`solvers.deletion`, subset-minimal) on any network or when asked.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from cardinal import signs
from cardinal.defaults import DEFAULT_TIME_LIMIT, DEFAULT_TRAVERSAL
from cardinal.network import Network

from .record import annotated
from .settings import Settings

if TYPE_CHECKING:
    from cardinal.solvers.oracle import SetOracle

# Rational multiply-adds (`algorithm1.exact_work`) below which explain answers in exact arithmetic
# alone (`algorithm1.explain_exactly`, about 0.1 s at this size) instead of running the batched
# float greedy and re-checking it exactly: the same answers, without loading torch (1.9 s of CPU).
EXACT_WORK = 100_000


@dataclass(frozen=True)
class ExplainOptions:
    """How `explain_lines` answers (`cardinal explain`'s `--method`, `--traversal`,
    `--time-limit`, `--device`, `--no-verify`): `method` "deletion" or "greedy" (None: greedy on a
    sign-monotone network, deletion on any other); deletion's order `traversal`
    (`solvers.deletion.TRAVERSALS`) and its seconds per exact question `time_limit`; greedy's
    `device` (auto, cpu or cuda) and `verify` (the exact re-check of each answer). Not
    `pipeline.Plan`: that module loads torch, which a small explain answers without."""

    method: str | None = None
    traversal: str = DEFAULT_TRAVERSAL
    time_limit: float = DEFAULT_TIME_LIMIT
    device: str = "auto"
    verify: bool = True


def explain_lines(
    net: Network,
    settings: Settings,
    X: np.ndarray,
    rows: Sequence[int],
    kinds: Sequence[str],
    options: ExplainOptions,
    oracle: SetOracle | None = None,
) -> list[dict[str, Any]]:
    """explain's output lines for X [B, n] (its row numbers `rows` [B]) and each of `kinds`:
    deletion (in `options.traversal`) where `options.method` says so or (None) the network is not
    sign-monotone, else greedy; annotated with the settings and names (`record.annotated`).
    Deletion asks its questions of `oracle`, left open (None: an oracle of its own, closed before returning)."""
    method = options.method
    if method == "deletion" or (method is None and not net.is_sign_monotone):
        lines = _deletion_lines(net, settings, X, rows, kinds, options.time_limit, oracle, options.traversal)
        return annotated(lines, net, settings)
    directions = signs.to_json(net.directions, net.output_directions)
    answers = _greedy_answers(net, settings, X, kinds, options.device, options.verify)
    lines = []
    for (index, position), (prediction, output, features, check, witness) in sorted(answers.items()):
        line = {
            "row": rows[index],
            "kind": kinds[position],
            "prediction": prediction,
            "output": output if math.isfinite(output) else None,  # f(x) in float64; null where it overflows
            "exists": features is not None,
            "features": None if features is None else list(features),
            "size": None if features is None else len(features),
            "method": "greedy",
        }
        if check is not None:
            line["check"] = check
        if witness is not None:
            line["witness"] = list(witness)
        line["directions"] = directions
        lines.append(line)
    return annotated(lines, net, settings)


def _greedy_answers(
    net: Network, settings: Settings, X: np.ndarray, kinds: Sequence[str], device: str, verify: bool
) -> dict[tuple[int, int], tuple]:
    """(index of the row in X [B, n], kind's position in `kinds`) → (prediction, output, features
    or None, check or None, witness or None)."""
    from cardinal.algorithm1 import exact_work, explain_exactly

    exact = (
        verify and device in ("auto", "cpu") and net.is_piecewise_linear and exact_work(net, len(X) * len(kinds)) <= EXACT_WORK
    )
    # blocks of rows sharing a box: all rows, or one ε-ball per input
    if settings.radius is None:
        blocks = [(range(len(X)), settings.domain)]
    else:
        blocks = [(range(i, i + 1), settings.box(x)) for i, x in enumerate(X)]
    answers = {}
    for position, kind in enumerate(kinds):
        for indices, box in blocks:
            if exact:
                for i, a in zip(indices, explain_exactly(net, X[indices], kind, box, settings.threshold), strict=True):
                    answers[(i, position)] = (a.prediction, a.output, a.features, "exact", a.witness)
                continue
            from cardinal.greedy import explain

            result = explain(net, X[indices], kind, box, settings.threshold, device=device, verify=verify)
            for offset, i in enumerate(indices):
                check = None if result.checks is None else result.checks[offset]
                witness = result.witness(offset, X[i], box)
                answers[(i, position)] = (
                    int(result.predictions[offset]), float(result.outputs[offset]), result.features(offset), check, witness
                )
    return answers


def _deletion_lines(
    net: Network,
    settings: Settings,
    X: np.ndarray,
    rows: Sequence[int],
    kinds: Sequence[str],
    time_limit: float,
    oracle: SetOracle | None,
    traversal: str,
) -> list[dict[str, Any]]:
    """explain's lines from the deletion explainer (`solvers.deletion`), one row at a time, each
    question to `oracle` (None: one of its own) limited to `time_limit`: "check" exact (a
    subset-minimal answer, or none exists) or undecided (a step no engine decided; the reason in
    notes): the set the run had shown by then where it had one (`Deletion.found`: for an AXp the
    features not removed, for a CXp the set with its replayed witness; exactly valid, not shown
    subset-minimal), else no set and "exists" null."""
    from cardinal.solvers.oracle import SetOracle

    from .certify import deletion_answer

    outputs = net.forward(X).numpy().reshape(len(X), -1)  # [B, K]
    with SetOracle() if oracle is None else contextlib.nullcontext(oracle) as asked:
        runs = {
            kind: [
                deletion_answer(net, x, kind, settings.box(x), settings.threshold, asked, time_limit, traversal)[0]
                for x in X
            ]
            for kind in kinds
        }
    lines = []
    for index, row in enumerate(rows):
        for kind in kinds:
            run = runs[kind][index]
            decided = run is not None and run.status != "unknown"
            features, witness = (None, None) if run is None else (run.features, run.witness)
            shown = not decided and run is not None and run.found is not None  # the set a stopped run had shown
            if shown:
                features, witness = run.found, run.found_witness
            line = {
                "row": row,
                "kind": kind,
                "prediction": -1 if run is None else run.prediction,
                "output": finite(outputs[index][0]) if net.n_outputs == 1 else [finite(v) for v in outputs[index]],
                "exists": (features is not None) if decided or shown else None,
                "features": None if features is None else list(features),
                "size": None if features is None else len(features),
                "method": "deletion",
                "check": "exact" if decided else "undecided",
                "queries": 0 if run is None else run.queries,
                "traversal": traversal,
            }
            if witness is not None:
                line["witness"] = list(witness)
            if run is None:
                line["notes"] = ["the prediction of x is undecided in exact arithmetic (smooth network)"]
            else:
                line["notes"] = [run.note] if run.note else []
                if shown:
                    line["notes"].append("features: the set the run had shown before the undecided step — an exactly valid "
                                         "explanation, not shown subset-minimal")
                if not line["notes"]:
                    del line["notes"]
            lines.append(line)
    return lines


def finite(value: float) -> float | None:
    """A float64 output, or None where it overflows."""
    return float(value) if math.isfinite(value) else None

"""A pytest helper: assert that a model's explanations hold exactly and did not change.

    from cardinal.verify.testing import assert_explanations

    def test_credit_explanations():
        assert_explanations("credit.onnx", "applicants.csv", require="minimum",
                            baseline="explanations.jsonl", fail_on=("changed",))

It judges explanations like `cardinal check` (cardinal's own greedy ones, or `explanations` from
any explainer), compares them with a baseline like `--baseline`, and raises `AssertionError`
listing every failure with its evidence (the witness of an invalid set, a smaller explanation).
A baseline is the JSON lines that `cardinal check --out` writes (the helper writes them without
the solvers' seconds, so that a rewrite changes the file only where the explanations changed); it
is (re)written instead of compared when `update=True` or the environment has
`CARDINAL_UPDATE_BASELINE=1`.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.io import read_inputs, write_atomic
from cardinal.network import Network
from cardinal.problem import DEFAULT_TIME_LIMIT

from .baseline import change_table, compare, entry_of, failures, parse_fail_on, read_baseline
from .certify import greedy_answers
from .check import KINDS, Claim, Judgement, check_explanations, parse_claim, read_claims
from .pipeline import Plan
from .settings import Flags, resolve

__all__ = ["assert_explanations"]


def assert_explanations(
    model: Network | nn.Module | str | Path,
    X: np.ndarray | torch.Tensor | str | Path,
    *,
    explanations: Sequence[Mapping[str, Any]] | str | Path | None = None,
    kind: str = "both",
    threshold: float | None = None,
    domain: Domain | None = None,
    require: str = "valid",
    baseline: str | Path | None = None,
    fail_on: Iterable[str] | None = None,
    solvers: Sequence[str] = ("enumerate",),
    time_limit: float = DEFAULT_TIME_LIMIT,
    activations: Sequence[str | Activation] | str | None = None,
    update: bool | None = None,
) -> list[Judgement]:
    """Judge the explanations of `model` for inputs X [B, n] and raise `AssertionError` on any failure.

    model: a `Network`, a torch module (`Network.from_torch`) or a network file (`Network.load`,
    with `activations` for a state_dict). X: an array [B, n] or a CSV file. explanations: None
    for cardinal's greedy explanations of sign-monotone networks, else `{"row", "kind", "features"}`
    records or a JSON-lines file of them. kind: contrastive, abductive or both. require: valid,
    subset or minimum (as `cardinal check --require`). baseline: a `cardinal check` JSON-lines
    file; fail_on: what fails against it (default `("changed",)` when there is a baseline), as
    `--fail-on`. threshold and domain: as `--threshold` and `--domain`, by default the network
    file's metadata, else 0 and [0, 1]^n (`verify.settings`); a prediction constant on the box is
    a warning. Returns the judgements (each `.to_json()` is a `cardinal check` record).
    """
    net = _network(model, activations)
    settings = resolve(net, str(model) if isinstance(model, (str, Path)) else "the network", Flags(threshold, domain))
    for note in settings.notes:
        warnings.warn(note, stacklevel=2)
    domain, threshold = settings.domain, settings.threshold
    inputs = read_inputs(X, net.n_inputs) if isinstance(X, (str, Path)) else X
    inputs = domain.check(inputs)
    kinds = KINDS if kind == "both" else (kind,)
    claims, known = _claims(net, inputs, explanations, kinds, domain, threshold)
    conditions = parse_fail_on(("changed",) if fail_on is None and baseline is not None else fail_on, baseline is not None)
    judgements = check_explanations(net, inputs, claims, settings, require, solvers, Plan(time_limit=time_limit))
    if known:  # cardinal's own answers: back in (row, kind) order
        judgements = sorted([*judgements, *known], key=lambda judgement: (judgement.claim.row, KINDS.index(judgement.claim.kind)))
    problems = [judgement.describe() for judgement in judgements if not judgement.passed]
    records = [judgement.to_json() for judgement in judgements]
    if baseline is not None:
        if update if update is not None else os.environ.get("CARDINAL_UPDATE_BASELINE") == "1":
            write_atomic(baseline, "".join(json.dumps(_untimed(record)) + "\n" for record in records))
        elif not Path(baseline).exists():
            problems.append(f"baseline {baseline} does not exist: write it with update=True or CARDINAL_UPDATE_BASELINE=1")
        else:
            entries = [entry_of(record) for record in records]
            changes = compare(read_baseline(baseline, "check"), entries, kinds)
            found = failures(conditions, entries, changes)
            if found:
                problems += [*found, f"changes since {baseline}:", change_table(changes)]
    elif conditions:
        problems += failures(conditions, [entry_of(record) for record in records], None)
    if problems:
        raise AssertionError("explanations failed their checks:\n" + "\n".join(problems))
    return judgements


def _untimed(record: dict[str, Any]) -> dict[str, Any]:
    """A `check` record without the solvers' measured seconds: a baseline holds only what a rerun
    must reproduce, so rewriting it when nothing but the timings changed leaves the file as it was."""
    solvers = {name: {k: v for k, v in outcome.items() if k != "seconds"} for name, outcome in record["solvers"].items()}
    return {**record, "solvers": solvers}


def _network(model: Network | nn.Module | str | Path, activations: Sequence[str | Activation] | str | None) -> Network:
    if isinstance(model, Network):
        return model
    if isinstance(model, nn.Module):
        return Network.from_torch(model)
    return Network.load(model, activations=activations)


def _claims(
    net: Network,
    X: np.ndarray,
    explanations: Sequence[Mapping[str, Any]] | str | Path | None,
    kinds: Sequence[str],
    domain: Domain,
    threshold: float | None,
) -> tuple[list[Claim], list[Judgement]]:
    """The claims to judge, and the judgements already known: cardinal's greedy answers that exact
    arithmetic leaves undecided are no claim of Algorithm 1's answer, so they are `undecided`."""
    if isinstance(explanations, (str, Path)):
        return read_claims(explanations, len(X), net.n_inputs, kinds), []
    if explanations is not None:
        claims = [parse_claim(dict(record), len(X), net.n_inputs, f"explanation {i}") for i, record in enumerate(explanations)]
        return [claim for claim in claims if claim.kind in kinds], []
    claims, undecided = [], []
    for kind in kinds:
        result, answers = greedy_answers(net, X, kind, domain, threshold)
        for row, answer in enumerate(answers):
            claim = Claim(row, kind, answer.features)
            if answer.check == "undecided":
                note = "greedy's answer (Algorithm 1) is undecided in exact arithmetic (smooth network)"
                undecided.append(Judgement(claim, int(result.predictions[row]), "undecided", notes=(note,)))
            else:
                claims.append(claim)
    return sorted(claims, key=lambda claim: (claim.row, KINDS.index(claim.kind))), undecided

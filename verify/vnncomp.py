"""`cardinal export --layout vnncomp`: explanation questions as a benchmark folder in VNN-COMP's layout.

    DIR/instances.csv                 onnx,vnnlib,timeout per row (no header; paths relative to DIR)
    DIR/onnx/NAME.onnx                the network as cardinal reads it (float64, `export.onnx_data`)
    DIR/vnnlib/STEM.vnnlib            one property (`verify.vnnlib`)
    DIR/vnnlib/STEM.answer            its certified answer: `sat` or `unsat`, decided exactly as written
    DIR/vnnlib/STEM.counterexample    for every sat instance: a point, as a VNN-COMP results file holds it
    DIR/README.md                     provenance: network, settings, questions, counts

Which questions, per input and kind: a minimum explanation is computed and proved by cardinal's
exact backends (`solve_minimum`, `auto`); around it, for a minimum AXp S, "is S an AXp?" (the
features of S pinned to x, the others free: unsat) and the same for S less each feature (sat: the
minimum is tight); for a minimum CXp C, "is C a CXp?" (C free: sat) and C less each feature
(unsat). Each file's answer is decided exactly as written (`vnnlib.decide`); an instance whose
file answer differs from its question's (a tie on the boundary, the closure of a strict side) or
that no exact engine decides within the time limit is left out and counted in the README. Inputs
whose minimum is not proved within the limit, or which have no CXp, ask nothing.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..domain import Domain
from ..errors import InputError, UndecidedPrediction
from ..network import Network
from ..problem import Problem, Status
from ..solvers.base import solve_minimum
from ..solvers.oracle import SetOracle
from ..validate import output_directory
from . import vnnlib
from .export import _write_files, onnx_data, region

CATEGORY = "cardinal-xbench"


@dataclass(frozen=True)
class Instance:
    """One question of the folder: its file stem, property text, certified answer and, when sat,
    counterexample text."""

    stem: str
    text: str
    answer: str
    counterexample: str | None


@dataclass
class Tally:
    """What the export asked and left out, for the README."""

    inputs: int = 0
    unproved: int = 0
    no_explanation: int = 0
    ties: int = 0
    undecided: int = 0


def questions(problem: Problem, minimum: tuple[int, ...]) -> list[tuple[tuple[int, ...], str]]:
    """(set, the explanation question's answer) around a proved minimum (module docstring)."""
    whole, less = ("unsat", "sat") if problem.kind == "abductive" else ("sat", "unsat")
    return [(minimum, whole)] + [(tuple(f for f in minimum if f != i), less) for i in minimum]


def refuse_nonempty(out: Path) -> Path:
    """`out` as a new or empty folder; `InputError` when it holds anything."""
    out = output_directory(out, "--out")
    if out.is_dir() and any(out.iterdir()):
        raise InputError(f"--out {out} exists and is not empty: --layout vnncomp writes a new benchmark folder")
    return out


def export_layout(
    net: Network,
    X: np.ndarray,
    kinds: Sequence[str],
    domain: Domain,
    threshold: float | None,
    out: Path,
    timeout: float,
    radius: float | Sequence[float] | None = None,
    source: str = "network",
    rows: Sequence[int] | None = None,
) -> list[Instance]:
    """The benchmark folder of inputs X [B, n] (module docstring) into `out`, a new or empty
    folder; `timeout`: seconds per instance in instances.csv, and each exact call's limit here.
    Everything is made in memory and every path checked before the first file is written."""
    out = refuse_nonempty(out)
    if domain.binary:
        raise InputError("--layout vnncomp: VNN-LIB has no discrete inputs: a binary box cannot be exported")
    rows = list(range(len(X))) if rows is None else list(rows)
    name = "".join(c if c.isalnum() or c in "._-" else "_" for c in Path(source).stem) or "network"
    tally, instances = Tally(), []
    with SetOracle() as oracle:
        for row, x in zip(rows, X, strict=True):
            box = domain if radius is None else domain.ball(x, radius)
            for kind in kinds:
                try:
                    problem = Problem.make(net, x, kind, box, threshold)
                except UndecidedPrediction as error:
                    raise InputError(f"row {row}: {error}: no question to ask") from None
                tally.inputs += 1
                outcome = solve_minimum(net, x, kind, box, threshold, time_limit=timeout)
                if outcome.status == Status.NONE_EXISTS:
                    tally.no_explanation += 1
                    continue
                if not (outcome.status == Status.OPTIMAL and outcome.exact and outcome.replayed and outcome.solution):
                    tally.unproved += 1
                    continue
                for number, (chosen, expected) in enumerate(questions(problem, outcome.solution)):
                    answer = vnnlib.decide(problem, region(problem, chosen), oracle, timeout)
                    if answer.sat is None:
                        tally.undecided += 1
                        continue
                    if ("sat" if answer.sat else "unsat") != expected:
                        tally.ties += 1
                        continue
                    stem = f"{name}-row{row}-{kind}-q{number}"
                    shown = "{" + ", ".join(map(str, chosen)) + "}"
                    comments = [
                        f"cardinal export --layout vnncomp: {source}, row {row}, kind {kind}: is S = {shown} "
                        f"{'a CXp' if kind == 'contrastive' else 'an AXp'}? (minimum {len(outcome.solution)})",
                        f"network: onnx/{name}.onnx; certified answer: {expected} (vnnlib/{stem}.answer)",
                    ]
                    text = vnnlib.property_text(problem, region(problem, chosen), comments)
                    example = vnnlib.counterexample_text(net, answer.witness) if answer.sat else None
                    instances.append(Instance(stem, text, expected, example))
    files: list[tuple[Path, str | bytes]] = [(out / "onnx" / f"{name}.onnx", onnx_data(net))]
    for instance in instances:
        files.append((out / "vnnlib" / f"{instance.stem}.vnnlib", instance.text))
        files.append((out / "vnnlib" / f"{instance.stem}.answer", instance.answer + "\n"))
        if instance.counterexample is not None:
            files.append((out / "vnnlib" / f"{instance.stem}.counterexample", instance.counterexample))
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerows((f"onnx/{name}.onnx", f"vnnlib/{i.stem}.vnnlib", _seconds(timeout)) for i in instances)
    files.append((out / "instances.csv", table.getvalue()))
    files.append((out / "README.md", _readme(net, source, name, domain, radius, kinds, rows, timeout, instances, tally)))
    _write_files(out, files)
    return instances


def _seconds(timeout: float) -> str:
    return str(int(timeout)) if float(timeout).is_integer() else repr(float(timeout))


def _readme(
    net: Network,
    source: str,
    name: str,
    domain: Domain,
    radius: float | Sequence[float] | None,
    kinds: Sequence[str],
    rows: Sequence[int],
    timeout: float,
    instances: Sequence[Instance],
    tally: Tally,
) -> str:
    """The folder's README.md: provenance and counts."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        made_by = f"cardinal {version('cardinal')}"
    except PackageNotFoundError:
        made_by = "cardinal"
    sat = sum(i.answer == "sat" for i in instances)
    digest = hashlib.sha256(onnx_data(net)).hexdigest()
    rule = f"{net.n_outputs} classes, argmax, ties to the lowest index"
    if net.n_outputs == 1:
        rule = "one output, p(x) = 1 iff f(x) > t"
    ball = "" if radius is None else f"; each input's ε-ball, radius {radius}"
    return f"""# {CATEGORY}: explanation questions of {source}

Made by `{made_by}` (`cardinal export --layout vnncomp`). Each instance asks whether a set of
features is an explanation of a prediction, as a VNN-LIB 1.0 property whose SAT is a
counterexample (docs/formats.md, *Export*, and docs/benchmarking.md in cardinal).

- network: `onnx/{name}.onnx` (float64 ONNX as cardinal reads it; sha256 {digest}), {net.n_inputs} inputs, {rule}
- domain: lower {domain.lower.tolist()}, upper {domain.upper.tolist()}{ball}
- inputs: rows {list(rows)}; kinds {", ".join(kinds)}; timeout {_seconds(timeout)} s per instance
- questions: around each proved minimum explanation, "is it one?" and the same less each feature
- answers: `vnnlib/STEM.answer` (`sat`/`unsat`), each decided in exact rational arithmetic for the
  property as written (strict sides written as their closures); `vnnlib/STEM.counterexample` for
  every sat instance: the line `sat`, then `((X_0 v) ... (Y_j v))` as a VNN-COMP results file
  holds it, outputs from the float64 network

| | count |
|---|---|
| instances | {len(instances)} |
| sat | {sat} |
| unsat | {len(instances) - sat} |
| input-kind pairs | {tally.inputs} |
| left out: minimum not proved within the timeout | {tally.unproved} |
| left out: no CXp exists | {tally.no_explanation} |
| left out: a tie on the boundary (the file's answer is not the question's) | {tally.ties} |
| left out: no exact engine decided the file | {tally.undecided} |
"""

"""`cardinal export --layout vnncomp` (one network) and `--suite xbench` (the quick and classifiers
crosscheck suites): explanation questions as a benchmark folder in VNN-COMP's layout.

    DIR/instances.csv                 onnx,vnnlib,timeout per row (no header; paths relative to DIR)
    DIR/onnx/NAME.onnx                each network as cardinal reads it (float64, `solvers.vnnlib.onnx_data`)
    DIR/vnnlib/STEM.vnnlib            one property (`solvers.vnnlib`)
    DIR/vnnlib/STEM.answer            its certified answer: `sat` or `unsat`, decided exactly as written
    DIR/vnnlib/STEM.counterexample    for every sat instance: a point, as a VNN-COMP results file holds it
    DIR/vnnlib/STEM.proof.json        for every unsat instance where a method proves it: a `cardinal.proof/1`
                                      certificate (`certificate`), checked by `cardinal proof check`
    DIR/vnnlib/networks/SHA256.json   the network each certificate names (cardinal's JSON)
    DIR/README.md                     provenance: networks, settings, questions, counts per network

Which questions, per input and kind: a minimum explanation is computed and proved by cardinal's
exact backends (`solve_minimum`, `auto`); around it, for a minimum AXp S, "is S an AXp?" (the
features of S pinned to x, the others free: unsat) and the same for S less each feature (sat: the
minimum is tight); for a minimum CXp C, "is C a CXp?" (C free: sat) and C less each feature
(unsat). Each file's answer is decided exactly as written (`vnnlib.decide`); an instance whose
file answer differs from its question's (a tie on the boundary, the closure of a strict side) or
that no exact engine decides within the time limit is left out and counted in the README. Inputs
whose minimum is not proved within the limit, which have no CXp, or whose prediction a smooth
network's enclosure leaves undecided, ask nothing.

**Certificates.** An unsat file says: no point of its region meets its output condition as
written. That is the claim "no contrastive explanation at all" of the closure problem
(`vnnlib.closure_problem`: the network, or for a closed strict side the network followed by one
identity layer, −1 for K = 1 or the outputs reordered for K ≥ 2) over the region as its box —
the free features in their bounds, the others pinned at x (lower = upper). `solvers.proof.search`
proves it within the time limit and `cardinal.checker` accepts it before it is written; an unsat
instance whose proof ends open has none and is counted in the README.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from cardinal.solvers import vnnlib
from cardinal.solvers.base import solve_minimum
from cardinal.solvers.oracle import SetOracle
from cardinal.solvers.vnnlib import onnx_data

from cardinal.domain import Domain
from cardinal.errors import InputError, UndecidedPrediction
from cardinal.network import Network
from cardinal.problem import Problem, Status
from cardinal.validate import output_directory

from .export import region, write_files
from .instance import Instance as SuiteInstance
from .proofs import make
from .settings import Settings

CATEGORY = "cardinal-xbench"


@dataclass(frozen=True)
class Question:
    """One instance of the folder: its file stem, its network's name, property text, certified
    answer and, when sat, counterexample text."""

    stem: str
    onnx: str  # the network's name: onnx/NAME.onnx
    timeout: float  # seconds, its row of instances.csv
    text: str
    answer: str
    counterexample: str | None
    certificate: str | None = None  # an unsat instance's checked `cardinal.proof/1` text
    network: Network | None = None  # the network it names


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


@dataclass(frozen=True)
class Source:
    """One network's part of a folder: `name` (its ONNX file's stem and its instances' prefix),
    what it came from, its family, and the settings of its questions."""

    name: str
    source: str
    family: str
    net: Network
    X: np.ndarray
    rows: tuple[int, ...]
    kinds: tuple[str, ...]
    domain: Domain
    threshold: float | None
    radius: float | Sequence[float] | None = None
    timeout: float | None = None  # seconds per instance and per exact call here (None: the folder's)


def export_layout(
    net: Network,
    X: np.ndarray,
    kinds: Sequence[str],
    settings: Settings,
    out: Path,
    timeout: float,
    source: str = "network",
    rows: Sequence[int] | None = None,
) -> list[Question]:
    """The benchmark folder of one network's inputs X [B, n] (module docstring) into `out`, a new
    or empty folder; `settings`: the threshold and box (`pipeline.given(net, domain, threshold,
    radius)` for a Python caller's; with its `radius`, each row's ball); `timeout`: seconds per
    instance in instances.csv, and each exact call's limit here; `source`: the network's name;
    `rows` [B]: the inputs' row numbers (default 0..B−1). Everything is made in memory and every
    path checked before the first file is written."""
    name = "".join(c if c.isalnum() or c in "._-" else "_" for c in Path(source).stem) or "network"
    rows = tuple(range(len(X))) if rows is None else tuple(rows)
    box, threshold, radius = settings.domain, settings.threshold, settings.radius
    part = Source(name, source, "network", net, X, rows, tuple(kinds), box, threshold, radius)
    return write_folder([part], out, timeout, f"explanation questions of {source}")


def write_folder(
    parts: Sequence[Source], out: Path, timeout: float, title: str, progress: Callable[[str], None] | None = None
) -> list[Question]:
    """The folder of every part's questions (module docstring) into `out`, a new or empty folder;
    `progress` is told each part's name as it starts."""
    out = refuse_nonempty(out)
    for part in parts:
        if part.domain.binary:
            raise InputError(f"{part.source}: VNN-LIB has no discrete inputs: a binary box cannot be exported")
    files: list[tuple[Path, str | bytes]] = []
    every: list[Question] = []
    tallies: list[tuple[Source, list[Question], Tally]] = []
    with SetOracle() as oracle:
        for part in parts:
            if progress is not None:
                progress(part.name)
            instances, tally = _questions_of(part, timeout if part.timeout is None else part.timeout, oracle)
            tallies.append((part, instances, tally))
            every += instances
            files.append((out / "onnx" / f"{part.name}.onnx", onnx_data(part.net)))
    networks: dict[str, str] = {}  # as `solvers.proof.write_certificate` writes them beside the certificates
    for instance in every:
        files.append((out / "vnnlib" / f"{instance.stem}.vnnlib", instance.text))
        files.append((out / "vnnlib" / f"{instance.stem}.answer", instance.answer + "\n"))
        if instance.counterexample is not None:
            files.append((out / "vnnlib" / f"{instance.stem}.counterexample", instance.counterexample))
        if instance.certificate is not None and instance.network is not None:
            files.append((out / "vnnlib" / f"{instance.stem}.proof.json", instance.certificate))
            networks[instance.network.sha256] = json.dumps(instance.network.to_json()) + "\n"
    files += [(out / "vnnlib" / "networks" / f"{digest}.json", text) for digest, text in networks.items()]
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerows((f"onnx/{i.onnx}.onnx", f"vnnlib/{i.stem}.vnnlib", _seconds(i.timeout)) for i in every)
    files.append((out / "instances.csv", table.getvalue()))
    files.append((out / "README.md", _readme(title, tallies, timeout)))
    write_files(out, files)
    return every


XBENCH_SUITES = ("quick", "classifiers")


def export_xbench(out: Path, timeout: float, progress: Callable[[str], None] | None = None) -> list[Question]:
    """`cardinal export --suite xbench`: the questions of every instance of the quick and
    classifiers crosscheck suites (`suite_parts`; their models are trained in a temporary folder)
    as one folder in VNN-COMP's layout (`write_folder`): the published set's `suites` family only;
    `python -m bench.xbench build` builds the whole set (its other families' builders live in
    bench/, which the application does not import)."""
    import tempfile

    out = refuse_nonempty(out)
    with tempfile.TemporaryDirectory(prefix="cardinal-xbench-") as work:
        parts = suite_parts(Path(work))
    title = (f"explanation questions of the {' and '.join(XBENCH_SUITES)} suites (the published set's `suites` family; "
             "`python -m bench.xbench build` builds the whole set)")  # fmt: skip
    return write_folder(parts, out, timeout, title, progress)


def suite_parts(work: Path, rows: int | None = None) -> list[Source]:
    """Every instance of the quick and classifiers crosscheck suites (`verify.suites`, built from
    fixed seeds, models trained under `work`) as a part of the folder, its first `rows` inputs
    (None: all)."""
    from .suites import SUITES

    return [_suite_part(suite, instance, rows) for suite in XBENCH_SUITES for instance in SUITES[suite](work)]


def _suite_part(suite: str, instance: SuiteInstance, rows: int | None) -> Source:
    """A crosscheck suite's instance as a part of the folder."""
    X = instance.X if rows is None else instance.X[:rows]
    return Source(
        instance.id, f"suite {suite}: {instance.id}", instance.family, instance.net, X, tuple(range(len(X))),
        tuple(instance.kinds), instance.domain, instance.threshold, instance.radius,
    )  # fmt: skip


def _questions_of(part: Source, timeout: float, oracle: SetOracle) -> tuple[list[Question], Tally]:
    """One part's instances (module docstring) and what was left out."""
    tally, instances = Tally(), []
    net, threshold = part.net, part.threshold
    for row, x in zip(part.rows, part.X, strict=True):
        box = part.domain if part.radius is None else part.domain.ball(x, part.radius)
        for kind in part.kinds:
            try:
                problem = Problem.make(net, x, kind, box, threshold)
            except UndecidedPrediction:
                tally.undecided += 1
                continue
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
                stem = f"{part.name}-row{row}-{kind}-q{number}"
                shown = "{" + ", ".join(map(str, chosen)) + "}"
                comments = [
                    f"cardinal export --layout vnncomp: {part.source}, row {row}, kind {kind}: is S = {shown} "
                    f"{'a CXp' if kind == 'contrastive' else 'an AXp'}? (minimum {len(outcome.solution)})",
                    f"network: onnx/{part.name}.onnx; certified answer: {expected} (vnnlib/{stem}.answer)",
                ]
                text = vnnlib.property_text(problem, region(problem, chosen), comments)
                if answer.sat:
                    example = vnnlib.counterexample_text(net, answer.witness)
                    instances.append(Question(stem, part.name, timeout, text, expected, example))
                    continue
                proof, network = certificate(problem, region(problem, chosen), f"{stem}.proof.json", timeout)
                instances.append(Question(stem, part.name, timeout, text, expected, None, proof, network))
    return instances, tally


def certificate(problem: Problem, free: np.ndarray, name: str, time_limit: float) -> tuple[str | None, Network | None]:
    """The checked certificate (its JSON text, and the network it names) that the property of the
    region with free features `free` [n] bool has no counterexample as written (module docstring),
    or (None, None) when none is found within `time_limit` seconds or the checker rejects it."""
    closure, _ = vnnlib.closure_problem(problem)
    lower = np.where(free, problem.domain.lower, problem.x)
    upper = np.where(free, problem.domain.upper, problem.x)
    pinned = Problem.make(closure.net, problem.x, "contrastive", Domain(lower, upper), closure.threshold)
    written = make(pinned, pinned.n, "", name, time_limit)
    if written.text is None or not written.entry.get("accepted"):
        return None, None
    return written.text, pinned.net


def _seconds(timeout: float) -> str:
    return str(int(timeout)) if float(timeout).is_integer() else repr(float(timeout))


def _readme(title: str, tallies: Sequence[tuple[Source, list[Question], Tally]], timeout: float) -> str:
    """The folder's README.md: provenance and counts per network."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        made_by = f"cardinal {version('cardinal')}"
    except PackageNotFoundError:
        made_by = "cardinal"
    every = [instance for _, instances, _ in tallies for instance in instances]
    sat = sum(i.answer == "sat" for i in every)
    certified = sum(i.certificate is not None for i in every)
    lines = [
        f"# {CATEGORY}: {title}",
        "",
        f"Made by `{made_by}` (`cardinal export`, VNN-COMP layout). Each instance asks whether a set of",
        "features is an explanation of a prediction, as a VNN-LIB 1.0 property whose SAT is a",
        "counterexample (cardinal's docs/formats.md, *Export*, and docs/benchmarking.md).",
        "",
        f"- {len(every)} instances: {sat} sat, {len(every) - sat} unsat; timeout {_seconds(timeout)} s per instance "
        "unless the table gives its network another (instances.csv gives each)",
        "- questions: per input and kind, a minimum explanation found and proved by cardinal's exact backends;",
        '  around it, "is it one?" and the same less each feature (AXp: unsat, then sat; CXp: sat, then unsat)',
        "- answers: `vnnlib/STEM.answer` (`sat`/`unsat`), each decided in exact rational arithmetic for the",
        "  property as written (strict sides written as their closures); `vnnlib/STEM.counterexample` for",
        "  every sat instance: the line `sat`, then `((X_0 v) ... (Y_j v))` as a VNN-COMP results file",
        "  holds it, the outputs from the float64 network",
        "- networks: `onnx/NAME.onnx`, float64 ONNX as cardinal reads it; K = 1: p(x) = 1 iff f(x) > t;",
        "  K ≥ 2: argmax, ties to the lowest index",
        "- certificates: `vnnlib/STEM.proof.json` beside every unsat instance that cardinal's proof search",
        f"  closed within the timeout ({certified} of {len(every) - sat}), each a `cardinal.proof/1` file",
        "  (cardinal's docs/proofs.md) that no point of the file's region meets its output condition as written:",
        '  the claim "no contrastive explanation at all" over the region as the box (the free features in',
        "  their bounds, the others pinned at x). Its network, `vnnlib/networks/SHA256.json`, is the ONNX's,",
        "  or for a strict side written as its closure the ONNX's followed by one identity layer (K = 1, p = 0:",
        "  -f at threshold -t; K >= 2: the outputs reordered, the class of x last). Check them with",
        "  `cardinal proof check vnnlib/*.proof.json` (exit 0: every one accepted); `--network` is not needed",
        "- left out (counted below): inputs whose minimum was not proved within the timeout, or with no CXp;",
        "  questions whose file answer is not the question's (a tie on a boundary), or that no exact engine decided",
        "",
        "| network | family | source | n | K | domain | radius | rows | timeout | sat | unsat "
        "| certified | not proved | no CXp | ties | undecided | sha256 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for part, instances, tally in tallies:
        yes = sum(i.answer == "sat" for i in instances)
        proofs = sum(i.certificate is not None for i in instances)
        seconds = _seconds(timeout if part.timeout is None else part.timeout)
        domain = f"[{min(part.domain.lower.tolist())}, {max(part.domain.upper.tolist())}]"
        radius = "" if part.radius is None else str(part.radius)
        digest = hashlib.sha256(onnx_data(part.net)).hexdigest()[:16]
        lines.append(
            f"| {part.name} | {part.family} | {part.source} | {part.net.n_inputs} | {part.net.n_outputs} | {domain} | {radius} "
            f"| {len(part.rows)} | {seconds} | {yes} | {len(instances) - yes} | {proofs} | {tally.unproved} "
            f"| {tally.no_explanation} | {tally.ties} | {tally.undecided} | {digest} |"
        )
    return "\n".join(lines) + "\n"

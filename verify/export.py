"""`cardinal export`: explanation questions as files that other solvers read.

Per input and kind, one file asks one question (docs/formats.md, *Export*):

- **mps**, **lp** (MILP solvers): the neutral MILP of `solvers.encode` written by HiGHS —
  `min Σ s_i` (the minimum explanation), or with `at_most=k` also `Σ s_i ≤ k` (feasible iff an
  explanation of size ≤ k exists). Its sides carry margins (`milp_margins`): a strict side is μ
  off (class 1 is `f ≥ t + μ`, a step's 0 is `h ≤ at − μ`), a closed side is opened by γ = μ/10
  (class 0 is `f ≤ t + γ`, a step's 1 is `h ≥ at − γ`). μ is 100 times the default feasibility
  tolerance of HiGHS and SCIP (10⁻⁶, SCIP's relative beyond magnitude 1): a point on a strict
  boundary (a tie f = t, a step at its breakpoint) is not taken for the other side, and one
  reached exactly on a closed side is not lost, at their default settings. The file's answer is
  the exact one unless it rests on a value within μ of a boundary (docs/formats.md).
- **smt2** (SMT solvers): `solvers.smtlib.question`, QF_LRA with exact rationals: sat iff an
  explanation of size ≤ k exists. Without `at_most`, k is greedy's size − 1, certify's question
  (monotone networks).
- **vnnlib** (neural-network verifiers): for a fixed set S, the VNN-LIB property over the
  network's ONNX (`network.onnx`, float64, as cardinal writes it) whose counterexample is an input
  y of the region (y_i = x_i off the free features F; F = S for a CXp, the features outside S for
  an AXp) that changes the prediction: SAT ⇔ S is a CXp; UNSAT ⇔ S is an AXp. VNN-LIB has no
  strict comparison, so reaching class 1 is written `Y_0 ≥ t` (the closure of f > t).

K ≥ 2 classifiers (p(x) = c, the argmax, ties to the lowest index, stated in every file's
header): MPS/LP leave c as the MILP does (`solvers.encode`: some f_j − f_c ≥ −γ for j < c, ≥ μ
for j > c); SMT-LIB exactly (`(>= fj fc)` for j < c, `(> fj fc)` for j > c). With `radius` every
format asks its question over the row's ball `Domain.ball(x, radius)`, the box the file states.

AXps of non-monotone networks have no single MILP or QF_LRA form (cardinal answers them by
implicit hitting sets), nor do smooth activations: those are refused with one line.

`export_suite` writes a whole benchmark: every explanation of a crosscheck suite as mps, smt2
and vnnlib instances, with `index.csv` giving each instance's answer and whether it is certified.
The answers come from a campaign (`verify.campaign.run_campaign`: greedy, every default solver,
the exact verdicts) run into `OUT/campaign/` or read from an earlier run of the same suite
(`campaign`), and, for the fixed sets of the VNN-LIB instances, from exact set checks here.
"""

from __future__ import annotations

import csv
import io
import re
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

import numpy as np
from cardinal.solvers import smtlib, vnnlib
from cardinal.solvers.vnnlib import onnx_data

from cardinal.domain import Domain
from cardinal.errors import InputError, UndecidedPrediction
from cardinal.exact import modified_inputs
from cardinal.io import write_atomic
from cardinal.network import Network
from cardinal.problem import DEFAULT_EPSILON, Problem, Verdict
from cardinal.validate import output_directory, output_file

from .settings import Settings

FORMATS = ("mps", "lp", "smt2", "vnnlib")
SUITE_FORMATS = ("mps", "smt2", "vnnlib")
NETWORK_FILE = "network.onnx"
INDEX = "index.csv"
COLUMNS = ("file", "format", "instance", "row", "kind", "prediction", "question", "answer", "certified", "evidence")


@dataclass(frozen=True)
class Entry:
    """One exported file: a line of `index.csv`. `question`: "minimum", "at_most k" or "set
    {…}"; `answer`: the minimum size or "infeasible" (minimum), "sat"/"unsat" (the others), empty
    when unknown or not computed; `evidence`: where the answer comes from."""

    file: str
    format: str
    instance: str
    row: int
    kind: str
    prediction: int
    question: str
    answer: str = ""
    certified: bool = False
    evidence: str = ""

    def cells(self) -> list[str]:
        return [
            self.file, self.format, self.instance, str(self.row), self.kind, str(self.prediction),
            self.question, self.answer, "true" if self.certified else "false", self.evidence,
        ]  # fmt: skip


def refusal(problem: Problem, fmt: str) -> str | None:
    """Why `fmt` cannot ask this problem's question, or None."""
    if fmt == "vnnlib":
        return "VNN-LIB has no discrete inputs: a binary box cannot be exported" if problem.domain.binary else None
    if fmt == "smt2":
        return smtlib.supported(problem)
    if not problem.net.is_piecewise_linear:
        return f"{problem.net.hidden_activation()} is not piecewise linear (no MILP form)"
    if problem.kind == "abductive" and not problem.monotone:
        return "an AXp of a non-monotone network has no single MILP form (cardinal answers it by implicit hitting sets)"
    return None


MILP_MARGIN = 1e-4
"""μ of the MPS and LP files at magnitude ≤ 1 (`milp_margins`): 100 × the default feasibility
tolerance 10⁻⁶ of HiGHS (`mip_feasibility_tolerance`) and SCIP (`numerics/feastol`); the closed
sides are opened by a tenth of it (10 × the tolerance: HiGHS's presolve, asked for f ≤ t at a
point with f = t exactly, answered infeasible with an opening of 10⁻⁷ and found it with 10⁻⁶)."""


def milp_margins(problem: Problem) -> tuple[float, float]:
    """(μ, γ) of an MPS or LP file: μ the margin of the strict sides, `MILP_MARGIN` times the
    largest of 1, |t| and every step's |at| (SCIP's tolerance is relative beyond 1), never below
    the problem's ε; γ = μ/10 the opening of the closed sides."""
    stages = [stage for layer in problem.net.layers for stage in layer.activation.stages()]
    offsets = [abs(float(stage.offset)) for stage in stages if stage.op == "step"]
    mu = max(problem.epsilon, MILP_MARGIN * max(1.0, abs(problem.threshold or 0.0), *offsets))
    return mu, mu / 10


def milp_text(problem: Problem, at_most: int | None, fmt: str, comments: Sequence[str]) -> str:
    """The MPS or LP file of the problem (module docstring: its margins `milp_margins`), opened
    by `comments` (`*` lines in MPS, `\\` lines in LP)."""
    from cardinal.solvers.encode import encode
    from cardinal.solvers.highs import write_model

    mu, gamma = milp_margins(problem)
    model = encode(replace(problem, epsilon=mu), at_most, opening=gamma)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"model.{fmt}"
        write_model(model, str(path), "cardinal")
        body = path.read_text()
    mark = "*" if fmt == "mps" else "\\"
    return "".join(f"{mark} {line}\n" for line in comments) + body


def region(problem: Problem, features: Iterable[int]) -> np.ndarray:
    """The free features [n] bool of the fixed-set question: F = S for a CXp, the rest for an AXp."""
    chosen = np.isin(np.arange(problem.n), sorted(features))
    return chosen if problem.kind == "contrastive" else ~chosen


def closed_flip(problem: Problem, features: Sequence[int]) -> bool | None:
    """Exactly, on a monotone network: does the VNN-LIB property of the set, as written (class 1
    closed: f ≥ t), have a counterexample? The region's extreme point toward the other class
    decides it (the monotone shortcut); None when a smooth enclosure leaves it open."""
    free = region(problem, features)
    corner = modified_inputs(problem.x, tuple(np.flatnonzero(free).tolist()), problem.counterpoint)
    output = problem.exact.outputs(corner[None, :])[0][0]
    t = Fraction(problem.threshold)
    if problem.prediction == 1:
        decided = output.predict(t)
        return None if decided is None else decided == 0
    if output.lower >= t:
        return True
    if output.upper < t:
        return False
    return None


def _kind_phrase(kind: str) -> str:
    return "a contrastive explanation (CXp)" if kind == "contrastive" else "an abductive explanation (AXp)"


def _shown(features: Iterable[int]) -> str:
    return "{" + ", ".join(map(str, sorted(features))) + "}"


def _comments(problem: Problem, row: int, question: str, where: str) -> list[str]:
    """The opening lines of every exported file: what it asks and of which input."""
    p, t = problem.prediction, problem.threshold
    box = "binary box" if problem.domain.binary else "box"
    rule = f"f(x) {'>' if p == 1 else '<='} t = {t!r}" if problem.classes == 1 else f"argmax of {problem.classes} outputs"
    lines = [
        f"cardinal export: {where}, row {row}, kind {problem.kind}: {question}",
        f"p(x) = {p} ({rule}); {problem.n} features in a {box}; feature indices 0-based",
    ]
    if problem.classes > 1:
        lines.append(f"prediction: {vnnlib.TIE_RULE.replace('Y_', 'f')}")
    return lines


def _files(
    problem: Problem,
    row: int,
    fmt: str,
    stem: str,
    at_most: int | None,
    features: Sequence[int] | None,
    where: str,
    status: str | None = None,
) -> tuple[str, str, str]:
    """(file name, text, question) of one export; `status`: an SMT-LIB file's known answer."""
    if fmt == "vnnlib":
        assert features is not None
        question = f"set {_shown(features)}"
        free = "S" if problem.kind == "contrastive" else "the features outside S"
        meaning = "SAT iff S is a CXp" if problem.kind == "contrastive" else "UNSAT iff S is an AXp"
        comments = [
            *_comments(problem, row, f"is S = {_shown(features)} {_kind_phrase(problem.kind)}?", where),
            f"network: {NETWORK_FILE} (ONNX, float64); inputs X_0..X_{problem.n - 1}, "
            f"outputs {', '.join(vnnlib.outputs(problem))}",
            f"a counterexample changes the prediction with only {free} free: {meaning}",
        ]
        return f"{stem}.vnnlib", vnnlib.property_text(problem, region(problem, features), comments), question
    if fmt == "smt2":
        assert at_most is not None
        question = f"at_most {at_most}"
        comments = _comments(problem, row, f"is there {_kind_phrase(problem.kind)} of size <= {at_most}? (sat: yes)", where)
        return f"{stem}.smt2", smtlib.question(problem, at_most, comments, status), question
    question = "minimum" if at_most is None else f"at_most {at_most}"
    mu, gamma = milp_margins(problem)
    asked = "the minimum size of" if at_most is None else f"is there, of size <= {at_most},"
    goal = (
        "class 1 is f >= t + mu, class 0 f <= t + gamma"
        if problem.classes == 1
        else f"leaving class c = {problem.prediction}: f_j - f_c >= -gamma for a j < c, >= mu for a j > c"
    )
    comments = [
        *_comments(problem, row, f"{asked} {_kind_phrase(problem.kind)}? (the objective: its size)", where),
        f"s{{i}} = 1: feature i in the set; y{{i}}: the input point; f: the output(s); margins mu = {mu!r}, gamma = {gamma!r}:",
        f"{goal}; a step's 1 is h >= at - gamma, its 0 h <= at - mu",
    ]
    return f"{stem}.{fmt}", milp_text(problem, at_most, fmt, comments), question


@dataclass(frozen=True)
class ExportSettings:
    """What each file of `export_inputs` asks (`cardinal export`'s `--format`, `--at-most`,
    `--set`, `--epsilon`): `fmt` one of `FORMATS`; `at_most` k: "is there an explanation of
    size ≤ k?" (smt2 without it: greedy's size − 1; mps and lp without it: the minimum);
    `features`: the set a VNN-LIB file asks about (vnnlib only, and required there); `epsilon`:
    the problem's margin (`Problem.make`)."""

    fmt: str
    at_most: int | None = None
    features: Sequence[int] | None = None
    epsilon: float = DEFAULT_EPSILON


def export_inputs(
    net: Network,
    X: np.ndarray,
    kinds: Sequence[str],
    settings: Settings,
    out: Path,
    asked: ExportSettings,
    source: str = "network",
    rows: Sequence[int] | None = None,
) -> list[Entry]:
    """One file per input X [B, n] and kind into `out` (module docstring), `network.onnx` beside
    the VNN-LIB files, and `index.csv` listing them (no answers), each asking `asked`'s question.
    `settings`: the threshold and box (`pipeline.given(net, domain, threshold, radius)` for a
    Python caller's); with its `radius`, each row's question is asked over its ball
    `domain.ball(x, radius)` (the box its file states), in every format. `source`: the network's
    name in the files and the index. `rows` [B]: the inputs' row numbers in their file
    (`--rows`), which name the files and the index rows (default 0..B−1).
    Every question and every file name is checked before a file is written (`write_files`)."""
    fmt, at_most, features, epsilon = asked.fmt, asked.at_most, asked.features, asked.epsilon
    domain, threshold, radius = settings.domain, settings.threshold, settings.radius
    rows = range(len(X)) if rows is None else rows
    if len(rows) != len(X):
        raise ValueError(f"{len(rows)} row numbers for {len(X)} inputs")
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r} (use {', '.join(FORMATS)})")
    if (fmt == "vnnlib") != (features is not None):
        raise InputError("--format vnnlib asks whether a fixed set is an explanation: give --set, and --set only with it")
    if features is not None and any(not 0 <= i < net.n_inputs for i in features):
        raise InputError(f"--set holds a feature outside 0..{net.n_inputs - 1}")
    jobs = []
    for kind in kinds:
        bounds = _greedy_bounds(net, X, kind, domain, threshold, radius) if fmt == "smt2" and at_most is None else None
        for index, (row, x) in enumerate(zip(rows, X, strict=True)):
            try:
                box = domain if radius is None else domain.ball(x, radius)
                problem = Problem.make(net, x, kind, box, threshold, epsilon)
            except UndecidedPrediction as error:
                raise InputError(f"row {row}: {error}: no question to ask") from None
            reason = refusal(problem, fmt)
            if reason is not None:
                raise InputError(f"row {row} ({kind}): {reason}")
            bound = at_most if bounds is None else bounds[index]
            if fmt == "smt2" and bound is None:
                raise InputError(
                    f"row {row} ({kind}): greedy gives no question to ask (no explanation, or the empty one): give --at-most"
                )
            jobs.append((problem, row, bound))
    output_directory(out, "--out")
    files: list[tuple[Path, str | bytes]] = [(out / NETWORK_FILE, onnx_data(net))] if fmt == "vnnlib" else []
    entries = []
    for problem, row, bound in jobs:
        name, text, question = _files(problem, row, fmt, f"row{row}-{problem.kind}", bound, features, source)
        files.append((out / name, text))
        entries.append(Entry(name, fmt, source, row, problem.kind, problem.prediction, question))
    write_files(out, [*files, (out / INDEX, index_text(entries))])
    return entries


def write_files(out: Path, files: Sequence[tuple[Path, str | bytes]]) -> None:
    """Write each file (path below `out`, content) whole, into `out`, the folder the user named.
    Every path is checked before the first write (`validate.output_file`: no symbolic link below
    `out`, a folder or regular file where one goes, names the file system takes), so a refusal
    leaves nothing written; a link planted between the checks and a write is still refused by the
    write itself (`io.write_atomic`)."""
    for path, _ in files:
        output_file(path, "--out", root=out)
    for path, data in files:
        write_atomic(path, data, root=out)


def _greedy_bounds(
    net: Network, X: np.ndarray, kind: str, domain: Domain, threshold: float | None, radius: float | Sequence[float] | None
) -> list[int | None]:
    """Certify's question per row: greedy's size − 1 (None where greedy gives no set of size ≥ 1);
    with `radius`, each row's over its own ball."""
    if not net.is_sign_monotone:
        raise InputError("--format smt2 without --at-most asks greedy's size − 1, and greedy needs a sign-monotone network")
    from .certify import greedy_answers

    answers = greedy_answers(net, X, kind, domain, threshold, radius)[1]
    return [None if a.size is None or a.size == 0 else a.size - 1 for a in answers]


def index_text(entries: Sequence[Entry]) -> str:
    """The text of `index.csv`: a header (`COLUMNS`), then one line per entry."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(entry.cells() for entry in entries)
    return buffer.getvalue()


# ---------------------------------------------------------------------------- whole suites
def export_suite(
    suite: str,
    out: Path,
    formats: Sequence[str] = SUITE_FORMATS,
    solvers: tuple[str, ...] | None = None,
    time_limit: float = 10.0,
    workers: int = 1,
    campaign: Path | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[Entry]:
    """Every explanation of a crosscheck suite (quick or standard) as instances (module
    docstring) under `out/INSTANCE/`, with `out/index.csv`. The answers come from the campaign
    in `campaign` (default `out/campaign/`), run (or resumed) here with `solvers` (default: the
    campaign's) before any file is written. A campaign record with conflicting exact evidence
    (`solver_disagreement`) gets no answer in the index; `cardinal export` then exits 1, as
    `cardinal crosscheck` does.

    Everything cardinal makes below `out` (the default campaign folder and all in it, the
    instance folders and their files) is checked before any work and written without following
    a symbolic link (`io.write_atomic`): a planted link is refused with one line and nothing is
    written; the export's files are all made in memory and checked before the first is written
    (`write_files`)."""
    from .campaign import CampaignSettings, default_solvers, run_campaign
    from .record import read_records
    from .suites import SUITES

    if suite not in ("quick", "standard"):
        raise InputError(f"unknown suite {suite!r} for export (use quick or standard)")
    unknown = [fmt for fmt in formats if fmt not in SUITE_FORMATS]
    if unknown or not formats:
        raise InputError(f"unknown suite format {unknown[0] if unknown else '(none)'!r} (use {', '.join(SUITE_FORMATS)})")
    out = output_directory(out, "--out")
    folder, root = (campaign, None) if campaign is not None else (out / "campaign", out)
    instances = list(SUITES[suite](folder))
    wheres = {instance.id: re.sub(r"[^A-Za-z0-9._-]", "_", instance.id) for instance in instances}
    for instance in instances:  # before the campaign: a link planted there refuses the export before any work
        output_directory(out / wheres[instance.id], "--out", root=out)
        for name in _suite_names(instance, formats):
            output_file(out / wheres[instance.id] / name, "--out", root=out)
    output_file(out / INDEX, "--out", root=out)
    log = folder / "records.jsonl"
    settings = CampaignSettings(solvers or default_solvers(), time_limit, workers)
    result = run_campaign(suite, folder, settings, resume=log.exists(), progress=progress, instances=instances, root=root)
    if result.interrupted:  # the finished records stay: the next export resumes
        raise KeyboardInterrupt
    records = {record.key: record for record in read_records(log)}
    entries: list[Entry] = []
    files: list[tuple[Path, str | bytes]] = []
    for instance in instances:
        where = wheres[instance.id]
        target = out / where
        if "vnnlib" in formats:
            files.append((target / NETWORK_FILE, onnx_data(instance.net)))
        for kind in instance.kinds:
            for row, x in enumerate(instance.X):
                record = records.get(f"{instance.id}:{row}:{kind}")
                if record is None:
                    raise InputError(
                        f"{log}: no record of {instance.id}:{row}:{kind} (an interrupted campaign: run the export again)"
                    )
                if record.network_hash != instance.net.hash:
                    raise InputError(f"{log}: {record.key} was certified on another network than the suite's (hash differs)")
                if record.prediction < 0:
                    continue  # p(x) undecided: no question
                problem = Problem.make(instance.net, x, kind, instance.domain, instance.threshold)
                for fmt in formats:
                    for name, text, entry in _suite_entries(problem, record, fmt, where):
                        files.append((target / name, text))
                        entries.append(entry)
    write_files(out, [*files, (out / INDEX, index_text(entries))])
    return entries


def _suite_names(instance, formats: Sequence[str]) -> Iterable[str]:
    """Every file name `_suite_entries` may write for the instance (a superset: which are written
    depends on the campaign's answers), and the network's."""
    if "vnnlib" in formats:
        yield NETWORK_FILE
    for kind in instance.kinds:
        for row in range(len(instance.X)):
            for fmt in formats:
                stem = f"row{row}-{kind}"
                yield from [f"{stem}-set0.{fmt}", f"{stem}-set1.{fmt}"] if fmt == "vnnlib" else [f"{stem}.{fmt}"]


def _suite_entries(problem: Problem, record, fmt: str, where: str) -> list[tuple[str, str, Entry]]:
    """The instances of one record in one format: (file name, text, index entry) each, with
    their answers."""
    if refusal(problem, fmt) is not None:
        return []
    questions: list[tuple[int | None, Sequence[int] | None, str, bool, str]] = []  # at_most, set, answer, certified, evidence
    if fmt == "mps":
        if record.verdict == Verdict.NONE_EXISTS:
            questions.append((None, None, "infeasible", record.certified, "greedy's exact check: no CXp exists"))
        elif record.minimum is not None:
            proved = record.minimum_proved
            answer = str(len(record.minimum)) if proved else ""
            questions.append(
                (None, None, answer, proved, "campaign: minimum proved exactly" if proved else "campaign: not proved")
            )
    elif fmt == "smt2":
        greedy = record.greedy.size if record.greedy is not None else None
        if greedy:
            if record.verdict == Verdict.GREEDY_SUBOPTIMAL:
                questions.append((greedy - 1, None, "sat", True, "campaign: a smaller set replayed exactly"))
            elif record.verdict == Verdict.GREEDY_MINIMAL:
                answer = "unsat" if record.certified else ""
                evidence = "campaign: an exact proof that nothing smaller exists" if record.certified else "campaign: not proved"
                questions.append((greedy - 1, None, answer, record.certified, evidence))
            else:
                questions.append((greedy - 1, None, "", False, f"campaign: verdict {record.verdict.value}"))
    elif record.minimum:
        for chosen in (record.minimum, record.minimum[:-1]):  # an explanation, and one feature fewer
            flip = closed_flip(problem, chosen) if problem.monotone else None
            answer = "" if flip is None else "sat" if flip else "unsat"
            questions.append((None, chosen, answer, flip is not None, "exact evaluation of the region's extreme point"))
    if record.verdict == Verdict.SOLVER_DISAGREEMENT and fmt != "vnnlib":  # a bug: no answer rests on that record
        questions = [(at_most, chosen, "", False, "campaign: verdict solver_disagreement") for at_most, chosen, *_ in questions]
    entries = []
    for number, (at_most, chosen, answer, certified, evidence) in enumerate(questions):
        stem = f"row{record.row}-{record.kind.value}" + (f"-set{number}" if chosen is not None else "")
        status = answer if fmt == "smt2" and answer else None
        name, text, question = _files(problem, record.row, fmt, stem, at_most, chosen, record.instance, status)
        entry = Entry(
            f"{where}/{name}", fmt, record.instance, record.row, record.kind.value, record.prediction, question, answer,
            certified, evidence,
        )  # fmt: skip
        entries.append((name, text, entry))
    return entries

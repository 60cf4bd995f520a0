"""`cardinal crosscheck`: certify explainers' answers at scale and keep every counterexample.

For each instance of a suite and each kind, greedy runs batched (answers re-checked exactly);
then each exact solver certifies every answer. With several explainers (`methods`: greedy and
the deletion explainer, which runs in the worker) each explanation gets one record per explainer
that applies, all judged on one set of solver calls (`certify_unit`). One JSON record per
explanation and explainer goes to
`DIR/records.jsonl` the moment it is finished (flushed and fsynced; a kill loses no finished
record), greedy-suboptimal and disagreeing instances to `DIR/cases/`, and `DIR/summary.md` plus
`DIR/figures/` are rebuilt from the records at the end. `--resume` skips finished records.

Each record is `verify.certify`'s certificate with the instance's data around it: the verdict,
`certified`, `minimum` and `minimum_proved` rest on exact evidence alone, and a solver claim the
exact check refutes is logged under its solver. With `workers > 1` the solver calls run in worker
processes, or on Ray with `executor="ray"`. A failure of the executor is not a result: a unit
that gave none (`executors.Failed`: its task raised, its worker died — on Ray after retries —, or
the pool or Ray itself broke, whereupon every unit not finished is lost) gets no record, is
counted in `CampaignResult.lost`, and `--resume` redoes it; `cardinal crosscheck` then exits 1.
A solver's own error inside a unit is a result (its call's status `error`). The records
are the same as with one worker, and as in any other run of the suite (only their order in the
file and the measured seconds differ), unless a call reaches its time limit. A record with
conflicting exact evidence (`solver_disagreement`) is counted in `CampaignResult.disagreements`,
and `cardinal crosscheck` then exits 1. Workers die with the campaign
(`solvers.guard.die_with_parent`), and so do the processes its solvers run in. SIGTERM stops a
run as Ctrl-C does, from its start on (`executors.sigterm_interrupts`).

A folder holds one campaign at a time: a run holds an advisory lock (`flock`) on
`DIR/campaign.lock` from its checks to its summary, so a second run or `--resume` on the same
folder stops with a message while the first is alive. The run removes the lock file when it ends
(normally, on Ctrl-C or SIGTERM, or on an error); the kernel drops the lock when its holder dies,
so the file a killed run leaves behind blocks nothing and its folder can be resumed at once.

Nothing is written through a symbolic link inside the folder (`io.open_folder`): a link, FIFO or
folder planted where a campaign file goes is refused with one line, by the checks before any work
(`_check_folder`) or by the write itself when it appears later.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from cardinal.solvers.guard import start_zygote

from cardinal.errors import BackendUnavailable, InputError, interrupted_code
from cardinal.io import JsonLines, open_folder, open_regular, writing
from cardinal.network import Network
from cardinal.problem import DEFAULT_TIME_LIMIT, DEFAULT_TRAVERSAL, Kind, Method, Status, Verdict
from cardinal.validate import output_directory, output_file

from .executors import Failed, execute, sigterm_interrupts
from .instance import Instance
from .record import GreedyAnswer, Record, read_records
from .suites import SUITE_METHODS, SUITES

if TYPE_CHECKING:
    from .certify import SolverPool

LOCK_FILE = "campaign.lock"

# Backends that run only up to this many features (beyond, exhaustive enumeration is hopeless and
# z3's full encoding rarely finishes within a campaign's time limit) — except z3 on monotone
# networks, whose lazy loop (branch and bound for f > t on ReLU networks) scales with the
# features (docs/results.md); and with smooth units z3 alone decides beyond enumerate's cap.
# (The caps are each backend's `max_features` in `solvers.registry`.)


def solvers_for(net: Network, solvers: tuple[str, ...]) -> tuple[str, ...]:
    """The backends of `solvers` that a campaign runs on this network (their registry entries'
    `max_features`; a name the registry does not list has no cap)."""
    from cardinal.solvers.registry import BACKENDS

    lazy = net.has_monotone_shortcut or not net.is_piecewise_linear  # z3's lazy loop, or z3 alone (smooth units)
    n = net.n_inputs

    def within(name: str) -> bool:
        entry = BACKENDS.get(name)
        return entry is None or entry.max_features is None or n <= entry.max_features

    return tuple(name for name in solvers if (lazy and name == "z3") or within(name))


@dataclass(frozen=True, kw_only=True)
class Unit:
    """One explanation to certify: everything a worker process needs, in plain data (built by keyword)."""

    key: str  # "instance:row:kind": the explanation (its records' keys: `keys`)
    instance: str
    family: str
    activation: str
    network: dict[str, Any]
    network_hash: str
    widths: tuple[int, ...]
    domain: dict[str, Any]
    threshold: float | None  # None for a network of K ≥ 2 outputs
    x: tuple[float, ...]
    row: int
    kind: str
    output: float | tuple[float, ...] | None  # f(x) in float64, or the K outputs; None where it overflows the double range
    greedy: GreedyAnswer | None  # greedy's answer where `methods` holds greedy, else None
    solvers: tuple[str, ...]
    time_limit: float
    notes: tuple[str, ...] = ()  # about the whole instance: a prediction constant on the box
    proof: bool = False  # make a certificate of the record's exact "nothing smaller" (`verify.proofs`)
    proof_embed: bool = False  # ... with the network in it
    proof_time_limit: float = DEFAULT_TIME_LIMIT  # seconds to search for each certificate
    # The explainers judged, one record each, on the same solver calls: greedy (run batched in the
    # parent) and deletion (run in the worker); () makes one record without an explainer (exact_only).
    methods: tuple[str, ...] = ("greedy",)
    traversal: str = DEFAULT_TRAVERSAL  # deletion's order (`pipeline.Plan.traversal`)
    radius: float | None = None  # `domain` is the row's ball of this radius in the instance's box (None: the box)

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys of the unit's records, one per explainer of `methods` (or one without)."""
        return tuple(record_key(self.key, method) for method in self.methods or (None,))


def record_key(base: str, method: str | None) -> str:
    """A record's key: "instance:row:kind" for greedy's record and for one without an explainer,
    with ":METHOD" added for any other explainer's, so that the records of one explanation under
    several explainers are told apart (by --resume too) and greedy's keep their old keys."""
    return base if method in (None, Method.GREEDY) else f"{base}:{method}"


def applicable(net: Network, methods: tuple[str, ...]) -> tuple[str, ...]:
    """The explainers that `methods` run on a network, each once (`pipeline.explainer_of`): auto
    is greedy on a sign-monotone network and deletion on any other; greedy applies to
    sign-monotone networks only, deletion to any."""
    from .pipeline import explainer_of

    return tuple(dict.fromkeys(e for e in (explainer_of(method, net) for method in methods) if e is not None))


@dataclass(frozen=True)
class Certificates:
    """A campaign's certificates of its records' exact "nothing smaller" (`verify.proofs`): each
    with its network embedded (`embed`, else `networks/SHA256.json` beside them), each search
    stopped after `time_limit` seconds."""

    embed: bool = False
    time_limit: float = DEFAULT_TIME_LIMIT


@dataclass(frozen=True)
class CampaignSettings:
    """How a campaign runs (`run_campaign`; `cardinal crosscheck` builds it from its flags).

    `solvers`: the exact backends that certify each answer (each within `solvers_for`'s caps),
    every call limited to `time_limit` seconds. `workers`, `executor` ("local" or "ray"),
    `address` (a Ray cluster): where the solver calls run (`executors.execute`). `methods`: the
    explainers whose answers are certified (auto, greedy, deletion, or several: one record each
    where it applies; `units_of`, `pipeline.explainer_of`); None: the suite's own
    (`suites.SUITE_METHODS`, greedy unless named there). `traversal`: deletion's order.
    `radius`: every row of every instance over its own ball of this radius (`Instance.box`), the
    instances renamed `ID@rRADIUS` (None: the instances' boxes).

    `proof`: a folder for the certificates of the records' exact "nothing smaller" claims
    (`verify.proofs`; with `proof_embed` each holds its network, else `networks/SHA256.json`
    does, once per network), written before their records; each certificate's search stops after
    `proof_time_limit` seconds (then `"file": null` with the reason). None: no certificates."""

    solvers: tuple[str, ...]
    time_limit: float = DEFAULT_TIME_LIMIT
    workers: int = 1
    executor: str = "local"
    address: str | None = None
    methods: tuple[str, ...] | None = None
    traversal: str = DEFAULT_TRAVERSAL
    radius: float | None = None
    proof: Path | None = None
    proof_embed: bool = False
    proof_time_limit: float = DEFAULT_TIME_LIMIT

    @property
    def certificates(self) -> Certificates | None:
        """The certificates to make of each record (`units_of`), None without `proof`."""
        return None if self.proof is None else Certificates(self.proof_embed, self.proof_time_limit)


def units_of(
    instance: Instance,
    solvers: tuple[str, ...],
    time_limit: float,
    done: set[str],
    certificates: Certificates | None = None,
    methods: tuple[str, ...] = ("greedy",),
    traversal: str = DEFAULT_TRAVERSAL,
) -> list[Unit]:
    """The units of every row and kind of an instance whose records are not all in `done`, each
    with the explainers of `methods` that apply to the network (`applicable`) and are still to
    do, and greedy's answers (batched, exactly re-checked) where greedy is one of them;
    deletion's answers (in `traversal`) are computed by the worker that certifies the unit
    (`certify_unit`), with its pool's oracle. `certificates`: make one per record (None: none)."""
    from .certify import greedy_answers
    from .settings import constant_note

    names = solvers_for(instance.net, solvers)
    constant = constant_note(instance.net, instance.domain, instance.threshold)
    outputs = instance.net.forward(instance.X).numpy()
    chosen = applicable(instance.net, methods)

    def left(base: str) -> tuple[str, ...] | None:
        """The explainers still to do for one explanation (() for a record without one), None: nothing."""
        if not chosen:
            return None if base in done else ()
        return tuple(method for method in chosen if record_key(base, method) not in done) or None

    units = []
    for kind in instance.kinds:
        bases = [f"{instance.id}:{row}:{kind}" for row in range(len(instance.X))]
        todo = [left(base) for base in bases]
        if all(row_left is None for row_left in todo):
            continue
        answers = (
            greedy_answers(instance.net, instance.X, kind, instance.domain, instance.threshold, instance.radius)[1]
            if any(row_left and Method.GREEDY in row_left for row_left in todo)
            else [None] * len(instance.X)
        )
        for row, (base, methods_left, answer) in enumerate(zip(bases, todo, answers, strict=True)):
            if methods_left is None:
                continue
            units.append(
                Unit(
                    key=base,
                    instance=instance.id,
                    family=instance.family,
                    activation=instance.activation,
                    network=instance.net.to_json(),
                    network_hash=instance.net.hash,
                    widths=instance.net.widths,
                    domain=instance.box(row).to_json(),
                    threshold=instance.threshold,
                    radius=instance.radius,
                    x=tuple(float(v) for v in instance.X[row]),
                    row=row,
                    kind=kind,
                    output=_finite(outputs[row]),
                    greedy=answer if Method.GREEDY in methods_left else None,
                    solvers=names,
                    time_limit=time_limit,
                    notes=(constant,) if constant else (),
                    proof=certificates is not None,
                    proof_embed=certificates is not None and certificates.embed,
                    proof_time_limit=DEFAULT_TIME_LIMIT if certificates is None else certificates.time_limit,
                    methods=methods_left,
                    traversal=traversal,
                )
            )
    return units


# ---------------------------------------------------------------------------- worker side
_POOL = None


Certified = tuple[Record, dict[str, Any] | None, str | None]  # a record, its case document, its certificate's text


def certify_unit(unit: Unit, pool: SolverPool | None = None) -> list[Certified]:
    """Certify one unit: per explainer of `unit.methods` (one entry without any), its record,
    its case file document when it is worth keeping, and with `unit.proof` the JSON text of its
    certificate when one was made (the record's `proof` entry names its file; records of the unit
    with the same claim share one certificate, made once). The solvers run once for the unit and
    every explainer's answer is judged on their outcomes (`certify.certify_answers`); the records
    after the first name the first in `solvers_from`. `pool`: the solvers to run (default: this
    process's pool of `unit.solvers`)."""
    from cardinal.domain import Domain
    from cardinal.network import Network

    from .certify import SolverPool, case_of, deletion_answer, tie_decided
    from .pipeline import Plan, certify_input, given
    from .proofs import UNDECIDED, Written, claim_of, make

    global _POOL
    if pool is None and (_POOL is None or _POOL.names != unit.solvers):
        if _POOL is not None:
            _POOL.close()
        _POOL = SolverPool(unit.solvers)
    net = Network.from_json(unit.network)
    domain = Domain.from_json(unit.domain)
    pool = pool or _POOL
    x = np.array(unit.x)
    answers: list[GreedyAnswer | None] = []
    for method in unit.methods or (None,):
        if method == Method.DELETION:
            oracle, limit = pool.oracle, unit.time_limit
            answers.append(deletion_answer(net, x, unit.kind, domain, unit.threshold, oracle, limit, unit.traversal)[1])
        else:
            answers.append(unit.greedy if method == Method.GREEDY else None)
    plan = Plan(time_limit=unit.time_limit, traversal=unit.traversal)
    problem, certificates = certify_input(pool, net, given(net, domain, unit.threshold), x, unit.kind, answers, plan, unit.row)
    results: list[Certified] = []
    made: dict[tuple[int | None, str], Written] = {}  # claim → its certificate, made once per unit
    first = unit.keys[0]
    for key, certificate in zip(unit.keys, certificates, strict=True):
        suboptimal = problem is not None and certificate.verdict == Verdict.GREEDY_SUBOPTIMAL
        written, text = None, None
        if unit.proof:
            written = Written({"file": None, "reason": UNDECIDED})
            if problem is not None:
                claim = claim_of(
                    problem, certificate.verdict, certificate.minimum, certificate.minimum_proved, certificate.certified
                )
                if claim not in made:
                    made[claim] = make(problem, *claim, key, unit.proof_time_limit, unit.proof_embed,
                                       certificate.solvers)
                    text = made[claim].text
                written = made[claim]
        record = Record(
            key=key,
            instance=unit.instance,
            family=unit.family,
            activation=unit.activation,
            network_hash=unit.network_hash,
            n=len(unit.x),
            widths=unit.widths,
            row=unit.row,
            kind=Kind(unit.kind),
            threshold=unit.threshold,
            prediction=certificate.prediction,
            output=unit.output,
            greedy=certificate.greedy,
            solvers=certificate.solvers,
            verdict=certificate.verdict,
            certified=certificate.certified,
            minimum=certificate.minimum,
            minimum_proved=certificate.minimum_proved,
            gap=certificate.gap,
            tie_decided=tie_decided(problem, certificate.greedy.features) if suboptimal else None,
            notes=(*unit.notes, *certificate.notes),
            minimum_witness=certificate.minimum_witness,
            proof=None if written is None else written.entry,
            radius=unit.radius,
            minimum_lower=certificate.minimum_lower,
            solvers_from=None if key == first or not certificate.solvers else first,
        )
        case = None
        if problem is not None and certificate.verdict in (Verdict.GREEDY_SUBOPTIMAL, Verdict.SOLVER_DISAGREEMENT):
            case = case_of(problem, certificate, note=f"crosscheck {key}").to_json()
        results.append((record, case, text))
    return results


# ---------------------------------------------------------------------------- parent side
@dataclass(frozen=True)
class CampaignResult:
    directory: Path
    records: int  # finished records in the log (this run and earlier ones)
    new: int
    cases: int
    seconds: float
    interrupted: bool
    disagreements: int = 0  # records whose exact evidence conflicts (a bug: the command exits non-zero)
    failed: int = 0  # records whose every solver call ended in `error` (the solvers' own errors: results)
    rejected_proofs: int = 0  # certificates the checker rejected (a bug of the generator: the command exits non-zero)
    lost: int = 0  # units of this run that gave no result (`executors.Failed`): no record, --resume redoes them
    lost_reason: str = ""  # the first lost unit's reason, in one line
    interrupted_code: int = 130  # when interrupted: the command's exit code, 128 + the signal (`errors.interrupted_code`)


@sigterm_interrupts()  # from the start: SIGTERM during greedy ends as Ctrl-C does
def run_campaign(
    suite: str,
    out: Path,
    settings: CampaignSettings,
    resume: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
    instances: Iterable[Instance] | None = None,
    announce: Callable[[int], None] | None = None,
    root: Path | None = None,
) -> CampaignResult:
    """Run a suite (or the given instances) into `out` under `settings` (`CampaignSettings`: the
    solvers, their time limit, where they run, the explainers, the radius, the certificates); see
    the module docstring. `resume`: skip the records already in `out` (else a folder holding
    records is refused).

    `root`: the folder the user named when `out` is a folder cardinal makes inside it (as
    `export --suite` makes `OUT/campaign`): then `out` itself, like everything in it, is never
    reached through a symbolic link below `root`. None: the user named `out`, and a link there
    is followed.

    `progress(done, total, key)` is called after each record is written; `announce(count)` with
    the number of explanations to certify once greedy has run, before any solver.
    Bad input (the folder, its records, the suite's data) raises InputError before any record is
    written, and a folder made by this run is then removed again. A write that fails later (a full
    disk, a link planted meanwhile) raises InputError too, and the records finished so far stay.
    """
    if suite not in SUITES and instances is None:
        raise InputError(f"unknown suite {suite!r} (use {', '.join(SUITES)})")
    if settings.methods is None:
        settings = replace(settings, methods=SUITE_METHODS.get(suite, (Method.GREEDY.value,)))
    root = out if root is None else root
    _check_folder(out, root)
    _refuse_if_in_use(out)
    log = JsonLines(out / "records.jsonl", root)
    _finished(log, resume)  # the checks once before the lock file is made, so a refusal writes nothing
    created = not out.exists()
    try:
        with _locked(out, root):
            done = _finished(log, resume)
            try:
                chosen = instances if instances is not None else SUITES[suite](out)
                radius = settings.radius
                if radius is not None:
                    chosen = (replace(i, id=f"{i.id}@r{radius:g}", radius=radius) for i in chosen)
                return _run(suite, out, log, done, settings, chosen, progress=progress, announce=announce)
            finally:
                _close_pool()
    except (InputError, BackendUnavailable):
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()  # only if nothing else was written
        raise


def _run(
    suite: str,
    out: Path,
    log: JsonLines,
    done: set[str],
    settings: CampaignSettings,
    instances: Iterable[Instance],
    *,
    progress: Callable[[int, int, str], None] | None = None,
    announce: Callable[[int], None] | None = None,
) -> CampaignResult:
    """`run_campaign`'s work once the folder is locked: the units of `instances` whose records
    are not in `done`, certified and logged into `log` (its `root`: the folder the user named),
    then the summary. `settings.methods` is resolved (not None)."""
    started = time.perf_counter()
    root = log.root
    proof, certificates = settings.proof, settings.certificates
    methods = settings.methods or ()
    if settings.workers <= 1 and settings.executor == "local":
        start_zygote()  # the solver processes start while greedy runs
    units = [
        unit
        for instance in instances
        for unit in units_of(instance, settings.solvers, settings.time_limit, done, certificates, methods, settings.traversal)
    ]
    networks: dict[str, Network] = {}
    total = sum(len(unit.keys) for unit in units)
    if announce is not None:
        announce(total)
    new = cases = lost = 0
    lost_reason = ""
    interrupted = False
    code = interrupted_code()
    try:
        with contextlib.closing(execute(certify_unit, units, settings.workers, settings.executor, settings.address)) as finished:
            for unit, results in finished:
                if isinstance(results, Failed):  # no result: no record (module docstring)
                    lost += 1
                    lost_reason = lost_reason or " ".join(results.message.split())
                    continue
                for record, case, certificate in results:
                    # The certificate and case files first: a record in the log is finished work that --resume skips.
                    if certificate is not None and proof is not None and record.proof is not None:
                        from .proofs import Written, save

                        network = networks.setdefault(unit.instance, Network.from_json(unit.network))
                        save(proof, Written(record.proof, certificate), network, settings.proof_embed)
                    if case is not None:
                        from .cases import Case

                        Case.from_json(case).save(out / "cases", root=root or out)
                        cases += 1
                    log.append(record.to_json())
                    new += 1
                    if progress is not None:
                        progress(new, total, record.key)
    except KeyboardInterrupt as error:  # Ctrl-C or SIGTERM: the summary of what is finished, then out
        interrupted, code = True, interrupted_code(error)
    from .report import write_report

    records = read_records(log.path)
    elapsed = time.perf_counter() - started
    write_report(
        out, records, suite=suite, solvers=settings.solvers, time_limit=settings.time_limit, seconds=elapsed, root=root
    )
    disagreements = sum(record.verdict == Verdict.SOLVER_DISAGREEMENT for record in records)
    failed = sum(bool(r.solvers) and all(o.status == Status.ERROR for o in r.solvers.values()) for r in records)
    rejected = sum(r.proof is not None and r.proof["file"] is not None and not r.proof["accepted"] for r in records)
    seconds = time.perf_counter() - started
    return CampaignResult(
        out, len(records), new, cases, seconds, interrupted, disagreements, failed, rejected, lost, lost_reason, code
    )


def _check_folder(out: Path, root: Path) -> None:
    """The campaign folder and what goes in it can be written, and nothing below `root` (the
    folder the user named: `out` or an ancestor) is a symbolic link (nothing is created here)."""
    output_directory(out, "campaign folder", root=root)
    for name in ("cases", "figures"):
        output_directory(out / name, "campaign folder:", root=root)
    for name in ("records.jsonl", "summary.md", LOCK_FILE):
        output_file(out / name, "campaign folder:", root=root)


@contextmanager
def _locked(out: Path, root: Path | None = None) -> Iterator[None]:
    """Hold the folder's lock (module docstring) for the duration, and remove the lock file at the
    end; InputError if another process holds it. The lock file keeps the pid of its holder, for
    the message. `out` is opened from `root` without following a link below it."""
    folder = open_folder(out, root)
    try:
        descriptor = _lock(folder, out, create=True)
        try:
            with writing(out / LOCK_FILE):
                os.ftruncate(descriptor, 0)
                os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
            yield
        finally:
            with contextlib.suppress(OSError):
                os.unlink(LOCK_FILE, dir_fd=folder)  # while still locked: see `_lock`
            os.close(descriptor)  # releases the lock
    finally:
        os.close(folder)


def _refuse_if_in_use(out: Path) -> None:
    """InputError if a live campaign holds the folder's lock (creates nothing)."""
    if not out.is_dir():
        return
    folder = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        descriptor = _lock(folder, out, create=False)
        if descriptor is not None:
            os.close(descriptor)
    finally:
        os.close(folder)


def _lock(folder: int, out: Path, create: bool) -> int | None:
    """An open descriptor of the lock file in the open `folder`, locked (None: there is none and
    not `create`); InputError naming the holder if it is busy, or if the lock file is a
    link, a folder or a FIFO. A holder removes the file before it lets go, so a lock taken on a
    file that is no longer the one in the folder is let go, and taken again."""
    path = out / LOCK_FILE
    while True:
        try:
            descriptor = open_regular(folder, path, os.O_RDWR | os.O_CREAT if create else os.O_RDONLY)
        except InputError:
            if not create and not os.path.lexists(path):
                return None
            raise
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(descriptor, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(descriptor)
            raise InputError(
                f"{out} is in use by another campaign (pid {holder}): wait for it to end, or choose another --out"
            ) from None
        try:
            named = os.stat(LOCK_FILE, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            named = None
        held = os.fstat(descriptor)
        if named is not None and (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino):
            return descriptor
        os.close(descriptor)  # removed (or replaced) by the holder we waited for: start again


def _finished(log: JsonLines, resume: bool) -> set[str]:
    """Keys of the records already in the log; InputError if there are some and not `resume`."""
    existing = log.read()
    if existing and not resume:
        raise InputError(
            f"{log.path.parent} already holds {len(existing)} records: pass --resume to continue, or choose another --out"
        )
    return {Record.from_json(document, f"{log.path} line {number}").key for number, document in enumerate(existing, start=1)}


def _close_pool() -> None:
    """Stop this process's solver pool (and the processes its backends run in)."""
    global _POOL
    if _POOL is not None:
        _POOL.close()
        _POOL = None


def default_solvers() -> tuple[str, ...]:
    from cardinal.solvers.base import BENCHMARK_ONLY, available_solvers

    return tuple(name for name in available_solvers() if name not in BENCHMARK_ONLY)


def _finite(output: np.ndarray) -> float | tuple[float, ...] | None:
    """A record's `output`: f(x) [] or the K outputs [K] in float64; None where one overflows."""
    if not np.all(np.isfinite(output)):
        return None
    return float(output) if output.ndim == 0 else tuple(float(v) for v in output)

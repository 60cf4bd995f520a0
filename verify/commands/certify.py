"""`cardinal certify`: greedy (or deletion) vs exact solvers, with a verdict per input and kind (JSON lines). Its
flags (`_add_certify`) and its handler.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cardinal.errors import InputError
from cardinal.validate import output_directory, output_file

from .common import (
    PLAN_METHODS,
    _beside,
    _ci_flag_arguments,
    _ci_flags,
    _ci_report,
    _exact_flag_arguments,
    _kinds,
    _load_problem,
    _picture_argument,
    _picture_folder,
    _Progress,
    _proof_flag_arguments,
    _proof_folder,
    _proof_report,
    _solver_names,
    _traversal_argument,
    _write_picture,
)

SAME_RUN = "--resume continues the same run (the same inputs and flags)"


def _add_certify(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    certify = commands.add_parser(
        "certify",
        parents=[problem],
        help="greedy (or deletion) vs exact solvers, with a verdict per input and kind (JSON lines)",
        description="Certify an explainer's answers with exact solvers. One JSON line per input and kind: "
        '{"row", "kind", "prediction", "method", "greedy", "solvers", "verdict", "certified", "minimum", ..., '
        '"threshold", "domain", "notes"}; method names the explainer (greedy or deletion, null when none ran) whose '
        'answer "greedy" holds. '
        "Verdicts: greedy_minimal, greedy_suboptimal (deletion_minimal, deletion_suboptimal where deletion ran), "
        "none_exists, solver_disagreement, unknown, exact_only (--method greedy on a network that is not sign-monotone: "
        "the solvers alone), undecided "
        "(exact arithmetic cannot decide p(x) or the explainer's answer: a valid input, recorded, not certified); they rest "
        "on exact evidence only, and a solver claim refuted by the exact replay is listed under its solver. "
        "Each line is written as soon as its row is decided (with --out: appended and flushed to disk, so that a "
        "stopped run keeps every finished row; --resume finishes it). "
        "Exit 1 when exact evidence conflicts (solver_disagreement), 2 on bad input, 130/143 when interrupted.",
    )
    _exact_flag_arguments(
        certify,
        "comma-separated: exact-milp,z3,enumerate,gurobi,highs, or all (every installed one); default: every installed "
        "exact backend that applies to the network (docs/statuses.md)",
        budget=True,
    )
    certify.add_argument("--cases", help="directory for case files (default: OUT.cases/ or ./cardinal-cases/)")
    _proof_flag_arguments(certify, "each exact 'nothing smaller' (a minimum proved, no CXp at all)")
    certify.add_argument(
        "--method",
        choices=PLAN_METHODS,
        default="auto",
        help="the explainer to certify: auto (default, as explain's: greedy on a sign-monotone network, deletion on any "
        "other), greedy (on a network that is not sign-monotone the solvers alone give the minimum, exact_only) or "
        "deletion (subset-minimal, any network; each of its exact questions gets --time-limit)",
    )
    _traversal_argument(certify)
    _picture_argument(certify)
    _ci_flag_arguments(certify)
    certify.add_argument(
        "--resume",
        action="store_true",
        help="continue a stopped run in --out: keep its finished lines (each row and kind once) and certify only the "
        "rest; refused where a kept line's settings (threshold, domain, radius, method, traversal, solvers) differ from "
        "this run's. "
        "Removes the temporary files a killed run left beside --out and in the case and certificate folders",
    )
    certify.set_defaults(handler=_certify)


def _certify(args: argparse.Namespace) -> int:
    from cardinal.verify.certify import SolverPool, case_of
    from cardinal.verify.pipeline import Plan, answered, record_of
    from tabulate import tabulate

    from cardinal.problem import Status, Verdict

    if args.resume and args.out is None:
        raise InputError("--resume needs --out: the file of the run to continue")
    if args.out is not None:
        output_file(args.out, "--out")
    cases_dir = Path(args.cases) if args.cases else _beside(args.out, ".cases", "cardinal-cases")
    output_directory(cases_dir, "--cases" if args.cases else "case folder")
    net, settings, X, rows = _load_problem(args)
    pictures = _picture_folder(args, net)
    names = _solver_names(args.solvers, net, settings.domain)
    fail_on, baseline = _ci_flags(args, "certify")
    proofs = _proof_folder(args, net)
    plan = Plan(args.method, args.traversal, args.time_limit, args.epsilon, proofs)
    with _records(args.out, args.resume) as (kept, write):
        done = _check_kept(kept, args, settings, names, rows, plan.explainer(net))
        if args.resume:
            out = Path(os.path.realpath(args.out))
            _remove_temporaries(out.parent, out.name)  # write_atomic's beside --out (the old end-of-run write)
            for folder in (cases_dir, *(() if proofs is None else (proofs.folder, proofs.folder / "networks"))):
                _remove_temporaries(folder)
        lines, certificates, saved = list(kept), [], []
        pool = SolverPool(names, first_proof=args.solvers is None)  # the default set: until the first exact proof
        with pool, _Progress(len(X) * len(_kinds(args)) - len(done), "certify", "done") as progress:
            for kind in _kinds(args):
                left = [i for i, row in enumerate(rows) if (row, kind) not in done]
                if not left:
                    continue
                for result in answered(pool, net, settings, X[left], [rows[i] for i in left], kind, plan):
                    problem, certificate = result.problem, result.verdict
                    certificates.append(certificate)
                    # the case file first: a line written is finished work that --resume keeps
                    if problem is not None and certificate.verdict in (Verdict.SOLVER_DISAGREEMENT, Verdict.GREEDY_SUBOPTIMAL):
                        saved.append(case_of(problem, certificate).save(cases_dir))
                    line = record_of(result, net, settings)
                    if baseline is not None:
                        line["baseline"] = _baseline_field(line, baseline)
                    write(line)
                    lines.append(line)
                    if pictures is not None:
                        _picture(pictures, net, certificate, kind, X[rows.index(result.row)], result.row)
                    if certificate.verdict == Verdict.SOLVER_DISAGREEMENT:
                        where = f"row {result.row} ({kind}): {_statuses(certificate)}"
                        progress.write(f"!!! SOLVER DISAGREEMENT on {where} — case saved to {saved[-1]}")
                    progress.update("certified" if certificate.certified else certificate.verdict.value)
    if kept:
        print(f"cardinal certify: {len(kept)} line(s) kept from {args.out}, {len(certificates)} new", file=sys.stderr)
    failed = _ci_report(lines, "certify", _kinds(args), fail_on, baseline, args.diff_out, annotate=False)
    verdicts = Counter((line["kind"], line["verdict"]) for line in lines)
    table = [[kind, verdict, count] for (kind, verdict), count in sorted(verdicts.items())]
    print(tabulate(table, headers=["kind", "verdict", "count"], tablefmt="simple"), file=sys.stderr)
    for status, title in (
        (Status.REFUTED, "claims refuted by exact replay:"),
        (Status.UNCONFIRMED, "claims unconfirmed (their witness failed; no exact check decided the set):"),
    ):
        claims = Counter(
            (name, o.get("claimed", status.value))
            for line in lines
            for name, o in line["solvers"].items()
            if o["status"] == status.value
        )
        if claims:
            rows = [[name, claimed, count] for (name, claimed), count in sorted(claims.items())]
            print(title, file=sys.stderr)
            print(tabulate(rows, headers=["solver", "claimed", "count"], tablefmt="simple"), file=sys.stderr)
    if saved:
        print(f"{len(saved)} case file(s) in {cases_dir}/", file=sys.stderr)
    if proofs is not None:
        failed += _proof_report([_Proof(line.get("proof"), bool(line.get("certified"))) for line in lines], proofs.folder)
    disagreements = sum(count for (_, verdict), count in verdicts.items() if verdict == "solver_disagreement")
    if disagreements:  # exact evidence conflicts: always a failure
        failed.append(f"{disagreements} solver disagreement(s): exact evidence conflicts")
    for line in failed:
        print(f"FAIL {line}", file=sys.stderr)
    return 1 if failed else 0


def _picture(folder: Path, net, certificate, kind: str, x, row: int) -> None:
    """The --picture of one verdict: its minimum (the smallest exactly valid set known) and witness,
    titled with what is proved of its size (as `Explanation` reads the verdict)."""
    from cardinal.verify.picture import title_of
    from cardinal.verify.record import proves_none

    features = certificate.minimum
    proved = certificate.minimum_proved or proves_none(certificate.verdict, certificate.certified, features)
    upper = None if features is None else len(features)
    title = title_of(kind, certificate.prediction, features, proved, certificate.minimum_lower, upper,
                     class_names=net.metadata.class_names)
    _write_picture(folder, net, row, kind, x, features, certificate.minimum_witness, title)


def _statuses(certificate) -> str:
    parts = []
    for name, outcome in certificate.solvers.items():
        found = "" if outcome.solution is None else f" {list(outcome.solution)}"
        parts.append(f"{name}: {outcome.status.value}{found}")
    return ", ".join(parts)


class _Proof:
    """A line's certificate entry and its verdict's certification, as `_proof_report` reads them."""

    def __init__(self, proof: dict[str, Any] | None, certified: bool) -> None:
        self.proof, self.certified = proof, certified


def _baseline_field(line: dict[str, Any], baseline) -> dict[str, Any]:
    """The line's "baseline" field: what changed since the baseline's line of the same row and kind."""
    from cardinal.verify.baseline import compare, entry_of

    entry = entry_of(line)
    changes = [change for change in compare(baseline, [entry], [entry.kind]) if (change.row, change.kind) == entry.key]
    before = baseline.get(entry.key)
    return {"changes": list(changes[0].what) if changes else [], "before": before and before.to_json()}


@contextlib.contextmanager
def _records(out: str | None, resume: bool) -> Iterator[tuple[list[dict[str, Any]], Any]]:
    """(the lines kept from `out`, a function that writes one more line). With `out`: the file is
    locked for the run (another certify on it is refused), emptied unless `resume` (else its
    finished lines are kept; a torn last line, a kill mid-write, is dropped), and each line is
    appended whole and flushed to disk (`io.JsonLines`); a file made here that gets no line is
    removed. Without: each line goes to stdout at once."""
    if out is None:

        def show(line: dict[str, Any]) -> None:
            sys.stdout.write(json.dumps(line) + "\n")
            sys.stdout.flush()

        yield [], show
        return
    from cardinal.io import JsonLines, write_atomic

    path = Path(os.path.realpath(out))
    created = not os.path.lexists(path)
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as error:
        raise InputError(f"cannot write {out}: {error.strerror}") from None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(f"{out} is in use by another certify run: wait for it to end, or choose another --out") from None
        log = JsonLines(path)
        if resume:
            kept = log.read()
        else:
            kept = []
            if os.fstat(descriptor).st_size:
                write_atomic(path, b"")  # a fresh run: the old lines go (the lock is on the file we replace: retake it)
                os.close(descriptor)
                descriptor = os.open(path, os.O_RDWR | os.O_CLOEXEC)
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield kept, log.append
    finally:
        if created and os.fstat(descriptor).st_size == 0:  # no line written (bad input, a full disk): no file
            with contextlib.suppress(OSError):
                os.unlink(path)
        os.close(descriptor)


def _check_kept(
    kept: list[dict[str, Any]], args: argparse.Namespace, settings, names: list[str], rows, explainer: str | None
) -> set[tuple[int, str]]:
    """The (row, kind) of each kept line; InputError naming --out's line where one is not a line of
    this run: another row, kind, threshold, domain, radius, explainer (`explainer`: the one this
    run's --method runs, None: none), traversal or solver, or a row and kind twice."""
    expected = json.loads(json.dumps(settings.to_json()))
    done: set[tuple[int, str]] = set()
    kinds, known = set(_kinds(args)), set(rows)
    for number, line in enumerate(kept, start=1):
        where = f"{args.out} line {number}"
        key = (line.get("row"), line.get("kind"))
        if not isinstance(key[0], int) or isinstance(key[0], bool) or key[0] not in known or key[1] not in kinds:
            raise InputError(f"{where}: row {key[0]!r} ({key[1]!r}) is not one this run certifies: {SAME_RUN}")
        if key in done:
            raise InputError(f"{where}: row {key[0]} ({key[1]}) appears twice")
        for field, value in (*expected.items(), ("radius", expected.get("radius"))):
            if line.get(field) != value:
                raise InputError(f"{where}: '{field}' is {line.get(field)!r}, this run's is {value!r}: {SAME_RUN}")
        if line.get("method") != explainer:
            raise InputError(f"{where}: 'method' is {line.get('method')!r}, this run's is {explainer!r} (--method {args.method})")
        traversal = args.traversal if explainer == "deletion" else None
        if line.get("traversal") != traversal:
            raise InputError(f"{where}: 'traversal' is {line.get('traversal')!r}, this run's is {traversal!r}")
        others = sorted(set(line.get("solvers") or ()) - set(names))
        if others:
            raise InputError(f"{where}: solver {others[0]!r} is not one of this run's ({', '.join(names)})")
        done.add(key)
    return done


def _remove_temporaries(folder: Path, name: str | None = None) -> None:
    """Remove the temporary files (`.NAME.XXXXXXXX.tmp`, `io.write_atomic`'s) that a killed run left
    in `folder`: those of the file `name` only, or (None) every one."""
    stem = ".+" if name is None else re.escape(name)
    pattern = re.compile(rf"\.{stem}\.[0-9a-f]{{8}}\.tmp")
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for entry in os.scandir(folder):
            if pattern.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)

"""The `cardinal` command. Each subcommand parses its flags here and calls one library entry.

Bad input ends with a one-line message on stderr and exit code 2; output files are written whole
or not at all.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ..errors import InputError
from ..validate import (
    count,
    finite_number,
    input_shape,
    number_list,
    output_directory,
    output_file,
    positive_number,
    row_selection,
    rows_chosen,
    seconds,
)
from .executors import EXECUTORS, sigterm_interrupts
from .record import annotated

if TYPE_CHECKING:
    from ..domain import Domain
    from ..network import Network

KIND_CHOICES = ("contrastive", "abductive", "both")
METHOD_CHOICES = ("greedy", "deletion")
MAX_WORKERS = 4 * (os.cpu_count() or 1)


def method_list(text: str) -> tuple[str, ...]:
    """argparse type of crosscheck's --method: explainers of `METHOD_CHOICES`, comma-separated,
    in order, each once ("greedy,deletion")."""
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",")))
    for name in names:
        if name not in METHOD_CHOICES:
            raise argparse.ArgumentTypeError(f"invalid choice: {name!r} (choose from {', '.join(METHOD_CHOICES)}, or a list)")
    return names
MAX_HUNT_FEATURES = 20  # hunt certifies by exhaustive enumeration


class UsageError(Exception):
    """A command-line error found by argparse; `main` prints it on one line."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (`cardinal CMD: error: ...`), handed to `main` rather than
    printed after the usage text; values such as `-1e-3` or `-1,0,0` are read as values, not as
    unknown options (argparse's own pattern knows only `-1` and `-0.5`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\.?\d[\d.eE+\-,]*$")

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.prog, f"{message} (see {self.prog} --help)")


def _input_shape_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input-shape",
        type=input_shape,
        metavar="DIMS",
        help="for a whole torch module with Conv2d layers: the input's dims without the batch axis, e.g. 1,28,28 "
        "(ONNX and JSON files declare their own)",
    )


def _problem_flags(
    required: bool = True, out: str = "write JSON lines here instead of stdout (written whole, or not at all)"
) -> argparse.ArgumentParser:
    """Flags shared by explain, certify, check and export: network, inputs, kind, threshold,
    domain, --out (`out`: its help; `required` False: the network and --inputs may be left out,
    as `export --suite` does)."""
    parent = _Parser(add_help=False)
    parent.add_argument(
        "network",
        nargs=None if required else "?",
        help="network file: JSON (cardinal.network/1), ONNX, or torch (.pt: nn.Sequential or state_dict)",
    )
    parent.add_argument(
        "--activations",
        help="for a torch state_dict: one activation per Linear layer, e.g. relu,relu,identity "
        "(with parameters: leaky_relu:0.1, hardtanh:0:1, step:0.5)",
    )
    _input_shape_argument(parent)
    parent.add_argument(
        "--inputs", required=required, help="CSV of inputs, one per row (a header row is allowed); - reads standard input"
    )
    parent.add_argument(
        "--rows",
        type=row_selection,
        help="work on these rows of --inputs only, e.g. 3,5-9: numbered from 0 after any header, as `row` in the output "
        "(the whole file is still read and checked)",
    )
    header = parent.add_mutually_exclusive_group()
    header.add_argument(
        "--header", dest="header", action="store_true", default=None, help="the first row of --inputs is a header"
    )
    header.add_argument(
        "--no-header",
        dest="header",
        action="store_false",
        help="the first row of --inputs is data (default: a header only when none of its cells is a number)",
    )
    parent.add_argument("--kind", choices=KIND_CHOICES, default="both", help="explanation kind (default: both)")
    parent.add_argument(
        "--threshold",
        type=finite_number,
        help="prediction is 1 iff f(x) > T (default: for check, the threshold the explanations file records; else the "
        "network file's metadata.threshold; else 0); single-output networks only: a network of K ≥ 2 outputs predicts "
        "the class of the largest output",
    )
    parent.add_argument("--lower", type=number_list, help="domain lower bound: a scalar or n comma-separated values (default 0)")
    parent.add_argument("--upper", type=number_list, help="domain upper bound: a scalar or n comma-separated values (default 1)")
    parent.add_argument(
        "--domain",
        help='domain file {"lower": [...], "upper": [...]} (instead of --lower/--upper; default: for check, the domain '
        "the explanations file records; else the network file's metadata.domain; else [0, 1]^n)",
    )
    parent.add_argument("--binary", action="store_true", help="features take only their two bound values (Boolean cube)")
    parent.add_argument(
        "--radius",
        type=number_list,
        help="each input ranges over its own box, the largest box of doubles in the domain within exact distance R of x "
        "(an epsilon-ball): R one number "
        "> 0 or n comma-separated ones; recorded as 'radius' on every line (default: none, or for check the radius the "
        "explanations file records)",
    )
    parent.add_argument("--out", help=out)
    return parent


def _load_problem(args: argparse.Namespace):
    """Network, settings (threshold, domain), the chosen inputs [B, n] checked against the domain,
    and their row numbers in the file [B] (`--rows`), from the shared flags."""
    net = _network(args)
    inputs = _inputs(args, net)
    settings = _settings(args, net)
    rows = _rows(args, len(inputs))
    return net, settings, settings.domain.check(inputs, source=args.inputs)[list(rows)], rows


def _network(args: argparse.Namespace):
    from ..network import Network

    return Network.load(args.network, activations=args.activations, input_shape=args.input_shape)


def _inputs(args: argparse.Namespace, net):
    """Every row of --inputs [B, n], as read (not yet checked against the domain)."""
    from ..io import read_inputs

    return read_inputs(args.inputs, net.n_inputs, args.header)


def _settings(args: argparse.Namespace, net, recorded=None):
    """The threshold and domain (`verify.settings`); says on stderr where they came from when not
    from a flag, and every note (a mismatch with the explanations file, a constant prediction)."""
    from .settings import Flags, flag_domain, resolve

    flags = Flags(args.threshold, flag_domain(net, args.domain, args.lower, args.upper), args.binary, args.radius)
    settings = resolve(net, args.network, flags, recorded)
    for line in settings.announcements():
        print(f"cardinal {args.command}: {line}", file=sys.stderr)
    for note in settings.notes:
        print(f"cardinal {args.command}: warning: {note}", file=sys.stderr)
    return settings


def _rows(args: argparse.Namespace, count: int) -> tuple[int, ...]:
    """The row numbers `--rows` chooses (all when not given), each < count."""
    if args.rows is None:
        return tuple(range(count))
    return rows_chosen(args.rows, count, args.inputs)


def _kinds(args: argparse.Namespace) -> tuple[str, ...]:
    return ("contrastive", "abductive") if args.kind == "both" else (args.kind,)


def _emit(lines: list[dict[str, Any]], out: str | None) -> None:
    from ..io import write_atomic

    text = "".join(json.dumps(line) + "\n" for line in lines)
    if out is None:
        sys.stdout.write(text)
    else:
        write_atomic(out, text)


# ---------------------------------------------------------------------------- explain
def _explain(args: argparse.Namespace) -> int:
    from .explaining import explain_lines

    if args.out is not None:
        output_file(args.out, "--out")
    net, settings, X, rows = _load_problem(args)
    lines = explain_lines(
        net, settings, X, rows, _kinds(args), args.method, args.time_limit, device=args.device, verify=not args.no_verify
    )
    _emit(lines, args.out)
    return 0


# ---------------------------------------------------------------------------- certify
def _certify(args: argparse.Namespace) -> int:
    from collections import Counter
    from dataclasses import replace

    from tabulate import tabulate

    from ..problem import Status, Verdict
    from .certify import SolverPool, case_of, certify_input, explainer_answers
    from .proofs import claim_of

    if args.out is not None:
        output_file(args.out, "--out")
    cases_dir = Path(args.cases) if args.cases else _beside(args.out, ".cases", "cardinal-cases")
    output_directory(cases_dir, "--cases" if args.cases else "case folder")
    net, settings, X, rows = _load_problem(args)
    domain, threshold = settings.domain, settings.threshold
    names = _solver_names(args.solvers, net, domain)
    fail_on, baseline = _ci_flags(args, "certify")
    proofs = _proof_folder(args, net, _beside(args.out, ".proofs", "cardinal-proofs"))
    lines, certificates, saved = [], [], []
    pool = SolverPool(names, first_proof=args.solvers is None)  # the default set: until the first exact proof
    with pool, _Progress(len(X) * len(_kinds(args)), "certify", "done") as progress:
        for kind in _kinds(args):
            answers = explainer_answers(args.method, pool, net, X, kind, domain, threshold, args.time_limit, settings.radius)
            for row, x, answer in zip(rows, X, answers, strict=True):
                problem, (certificate,) = certify_input(
                    pool, net, x, kind, settings.box(x), threshold, (answer,), args.time_limit, row, args.epsilon
                )
                if proofs is not None and problem is not None:
                    claim = claim_of(
                        problem, certificate.verdict, certificate.minimum, certificate.minimum_proved, certificate.certified
                    )
                    certificate = replace(certificate, proof=proofs.write(problem, claim, f"row{row}-{kind}"))
                certificates.append(certificate)
                lines.append(certificate.to_json())
                if problem is not None and certificate.verdict in (Verdict.SOLVER_DISAGREEMENT, Verdict.GREEDY_SUBOPTIMAL):
                    saved.append(case_of(problem, certificate).save(cases_dir))
                if certificate.verdict == Verdict.SOLVER_DISAGREEMENT:
                    where = f"row {row} ({kind}): {_statuses(certificate)}"
                    progress.write(f"!!! SOLVER DISAGREEMENT on {where} — case saved to {saved[-1]}")
                progress.update("certified" if certificate.certified else certificate.verdict.value)
    failed = _ci_report(lines, "certify", _kinds(args), fail_on, baseline, args.diff_out)
    _emit(annotated(lines, net, settings), args.out)
    verdicts = Counter((c.kind, c.verdict.value) for c in certificates)
    table = [[kind, verdict, count] for (kind, verdict), count in sorted(verdicts.items())]
    print(tabulate(table, headers=["kind", "verdict", "count"], tablefmt="simple"), file=sys.stderr)
    for status, title in (
        (Status.REFUTED, "claims refuted by exact replay:"),
        (Status.UNCONFIRMED, "claims unconfirmed (their witness failed; no exact check decided the set):"),
    ):
        claims = Counter(
            (name, (o.claimed or status).value) for c in certificates for name, o in c.solvers.items() if o.status == status
        )
        if claims:
            rows = [[name, claimed, count] for (name, claimed), count in sorted(claims.items())]
            print(title, file=sys.stderr)
            print(tabulate(rows, headers=["solver", "claimed", "count"], tablefmt="simple"), file=sys.stderr)
    if saved:
        print(f"{len(saved)} case file(s) in {cases_dir}/", file=sys.stderr)
    if proofs is not None:
        failed += _proof_report([c.proof for c in certificates if c.proof is not None], proofs.folder)
    disagreements = sum(count for (_, verdict), count in verdicts.items() if verdict == "solver_disagreement")
    if disagreements:  # exact evidence conflicts: always a failure
        failed.append(f"{disagreements} solver disagreement(s): exact evidence conflicts")
    for line in failed:
        print(f"FAIL {line}", file=sys.stderr)
    return 1 if failed else 0


def _solver_names(spec: str | None, net: Network, domain: Domain) -> list[str]:
    """The backends `--solvers` names: a comma-separated list, `all` (every installed backend), or
    None: the default, every installed exact backend that applies (`certify.proving_solvers`)."""
    from ..solvers.base import available_solvers
    from .certify import proving_solvers

    if spec is None:
        names = list(proving_solvers(net, domain))
        if not names:
            raise InputError("no exact solver applies to this network here: pip install 'cardinal[solvers]'")
        return names
    if spec.strip() == "all":
        return list(available_solvers())
    names = [name.strip() for name in spec.split(",") if name.strip()]
    if not names:
        raise InputError("--solvers needs at least one solver name")
    return names


# ---------------------------------------------------------------------------- check
def _check(args: argparse.Namespace) -> int:
    from collections import Counter

    from tabulate import tabulate

    from ..solvers.base import SOLVER_NAMES
    from .check import check_explanations, read_claims

    if args.out is not None:
        output_file(args.out, "--out")
    net = _network(args)
    X = _inputs(args, net)
    claims = read_claims(args.explanations, len(X), net.n_inputs, _kinds(args))
    settings = _settings(args, net, _recorded(args.explanations, claims))
    X = settings.domain.check(X, source=args.inputs)
    claims = _chosen(args, claims, len(X))
    names = _solver_names(args.solvers, net, settings.domain)
    unknown = [name for name in names if name not in SOLVER_NAMES and not name.startswith("vnncomp:")]
    if unknown:  # (a missing library is named when the solver is first needed)
        raise InputError(f"unknown solver {unknown[0]!r} (known: {', '.join(SOLVER_NAMES)})")
    fail_on, baseline = _ci_flags(args, "check")
    if args.proof is not None and args.require != "minimum":
        raise InputError("--proof needs --require minimum (a certificate proves that nothing smaller exists)")
    proofs = _proof_folder(args, net, _beside(args.out, ".proofs", "cardinal-proofs")) if args.require == "minimum" else None
    with _Progress(len(claims), "check", "judged") as progress:
        judgements = check_explanations(
            net, X, claims, settings.domain, settings.threshold, args.require, None if args.solvers is None else names,
            args.time_limit, args.epsilon, progress.update, proofs, settings.radius,
        )
    lines = [judgement.to_json() for judgement in judgements]
    failed = [f"{judgement.describe()}" for judgement in judgements if not judgement.passed]
    failed += _ci_report(lines, "check", _kinds(args), fail_on, baseline, args.diff_out)
    if proofs is not None:
        failed += _proof_report([j.proof for j in judgements if j.proof is not None], proofs.folder)
    _emit(annotated(lines, net, settings), args.out)
    verdicts = Counter((j.claim.kind, j.verdict) for j in judgements)
    table = [[kind, verdict, count] for (kind, verdict), count in sorted(verdicts.items())]
    print(tabulate(table, headers=["kind", "verdict", "count"], tablefmt="simple"), file=sys.stderr)
    for line in failed:
        print(f"FAIL {line}", file=sys.stderr)
    return 1 if failed else 0


def _recorded(path: str, claims):
    """The settings an explanations file records on its lines (`explain` writes them)."""
    from .settings import Recorded

    return Recorded.of(path, [(claim.line, claim.threshold, claim.domain, claim.radius) for claim in claims])


def _chosen(args: argparse.Namespace, claims, count: int):
    """The claims about the rows `--rows` chooses."""
    chosen = set(_rows(args, count))
    claims = [claim for claim in claims if claim.row in chosen]
    if not claims:
        raise InputError(f"{args.explanations}: no explanation for the rows of --rows")
    return claims


def _ci_flags(args: argparse.Namespace, command: str):
    """--fail-on and --baseline, read and checked before any solver runs: (fail_on, baseline or None)."""
    from .baseline import parse_fail_on, read_baseline

    fail_on = parse_fail_on(args.fail_on, args.baseline is not None)
    if args.diff_out is not None and args.baseline is None:
        raise InputError("--diff-out needs --baseline")
    if args.diff_out is not None:
        output_file(args.diff_out, "--diff-out")
    return fail_on, None if args.baseline is None else read_baseline(args.baseline, command)


def _ci_report(lines: list[dict[str, Any]], command: str, kinds, fail_on, baseline, diff_out: str | None) -> list[str]:
    """Compare with the baseline (each record gets its "baseline" changes; the table goes to
    stderr, the changed rows as JSON lines to `diff_out`); returns the --fail-on failures."""
    from .baseline import change_table, compare, entry_of, failures

    entries = [entry_of(line) for line in lines]
    changes = None
    if baseline is not None:
        changes = compare(baseline, entries, kinds)
        by_key = {(change.row, change.kind): change for change in changes}
        for line, entry in zip(lines, entries, strict=True):
            change = by_key.get(entry.key)
            before = baseline.get(entry.key)
            line["baseline"] = {"changes": [] if change is None else list(change.what), "before": before and before.to_json()}
        if changes:
            print(f"{len(changes)} row(s) changed since the baseline:", file=sys.stderr)
            print(change_table(changes), file=sys.stderr)
        else:
            print("no row changed since the baseline", file=sys.stderr)
        if diff_out is not None:
            _emit([change.to_json() for change in changes], diff_out)
    return failures(fail_on, entries, changes)


def _ci_flag_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline", help="JSON lines of a previous run of the same command: report every row that changed")
    parser.add_argument(
        "--fail-on",
        help="comma-separated conditions that make the exit code 1: invalid, suboptimal, larger, changed "
        "(larger and changed need --baseline)",
    )
    parser.add_argument("--diff-out", help="write the rows that changed since --baseline here, as JSON lines")


_PROOFS_BESIDE = "OUT.proofs/, or ./cardinal-proofs/ without --out"


def _proof_flag_arguments(parser: argparse.ArgumentParser, what: str, default: str) -> None:
    parser.add_argument(
        "--proof",
        metavar="DIR",
        help=f"write a certificate (cardinal.proof/1) of {what} into DIR (default {default}), each checked at once by the "
        "independent checker (`cardinal proof check FILE`); the network goes once into DIR/networks/SHA256.json",
    )
    parser.add_argument("--no-proof", action="store_true", help="make no certificates (records say proved_by: engine)")
    parser.add_argument(
        "--proof-embed", action="store_true", help="embed the network in each certificate (self-contained, larger)"
    )
    parser.add_argument(
        "--proof-time-limit",
        type=seconds,
        default=60.0,
        metavar="S",
        help="seconds to search for each certificate, apart from --time-limit (default 60); one not found "
        "in time is recorded with \"file\": null and the reason",
    )


def _beside(out: str | None, suffix: str, fallback: str) -> Path:
    """A folder of a command's side files: beside `--out` with `suffix` (r.jsonl → r.proofs/), or
    `fallback` in the working directory when the output goes to stdout."""
    return Path(out).with_suffix(suffix) if out else Path(fallback)


def _proof_path(args: argparse.Namespace, default: Path) -> Path | None:
    """Where certificates go: `--proof DIR`, else `default` (certificates are made by default),
    None with `--no-proof`."""
    if args.no_proof:
        if args.proof is not None or args.proof_embed:
            raise InputError("--no-proof makes no certificates: drop --proof and --proof-embed, or --no-proof")
        return None
    return Path(args.proof) if args.proof is not None else default


def _proof_folder(args: argparse.Namespace, net, default: Path):
    """The certificates' folder (`_proof_path`; checked writable before any work), or None."""
    folder = _proof_path(args, default)
    if folder is None:
        return None
    from .proofs import ProofFolder, proof_directory

    return ProofFolder(proof_directory(folder, "--proof" if args.proof else "proof folder"), net, args.proof_time_limit,
                       args.proof_embed)


def _proof_report(entries: list[dict[str, Any]], folder: Path) -> list[str]:
    """One stderr line on the certificates written; the failures (a rejected certificate is a bug)."""
    written = [entry for entry in entries if entry["file"] is not None]
    accepted = sum(entry["accepted"] for entry in written)
    missing = len(entries) - len(written)
    print(
        f"{len(written)} certificate(s) in {folder}/, {accepted} accepted by the checker"
        + (f"; {missing} result(s) without one (see their 'proof' reason)" if missing else ""),
        file=sys.stderr,
    )
    return [
        f"certificate {entry['file']} rejected by the checker: {entry['message']}" for entry in written if not entry["accepted"]
    ]
# ---------------------------------------------------------------------------- info
def _info(args: argparse.Namespace) -> int:
    from ..network import Network
    from .info import summary, text

    document = summary(Network.load(args.network, activations=args.activations, input_shape=args.input_shape), args.network)
    sys.stdout.write(json.dumps(document) + "\n" if args.json else text(document))
    return 0


# ---------------------------------------------------------------------------- convert
def _convert(args: argparse.Namespace) -> int:
    import numpy as np

    from ..formats.loaders import activation_flag, format_for_output
    from ..network import Network

    format_for_output(args.output)  # fail on the extension and the path before reading anything
    output_file(args.output, "OUT")
    net = Network.load(args.input, activations=args.activations, input_shape=args.input_shape)
    net.save(args.output, float32=args.float32, state_dict=args.state_dict)
    print(f"{args.input} → {args.output}: {net}", file=sys.stderr)
    for note in net.metadata.dropped or ():
        print(f"note: {note}", file=sys.stderr)
    arrays = [array for layer in net.layers for array in (layer.weight, layer.bias)]
    rounded = sum(int(np.count_nonzero(array.astype(np.float32) != array)) for array in arrays) if args.float32 else 0
    if rounded:
        print(f"warning: float32 rounded {rounded} weight(s)/bias(es): {args.output} is not exactly the network", file=sys.stderr)
    if args.state_dict:
        flag = activation_flag(layer.activation for layer in net.layers)
        print(f"a state_dict holds no activations: load it with --activations {flag}", file=sys.stderr)
    return 0


def _statuses(certificate) -> str:
    parts = []
    for name, outcome in certificate.solvers.items():
        found = "" if outcome.solution is None else f" {list(outcome.solution)}"
        parts.append(f"{name}: {outcome.status.value}{found}")
    return ", ".join(parts)


# ---------------------------------------------------------------------------- crosscheck
def _crosscheck(args: argparse.Namespace) -> int:
    from .campaign import default_solvers, run_campaign

    solvers = default_solvers() if args.solvers is None else tuple(n.strip() for n in args.solvers.split(",") if n.strip())
    if args.solvers is not None and not solvers:
        raise InputError("--solvers needs at least one solver name")
    if args.solvers is not None:
        from ..solvers.base import get_solver

        for name in solvers:
            get_solver(name).close()  # fail early on an unknown or missing backend
    if not solvers:
        raise InputError("no exact solver is installed: pip install 'cardinal[solvers]'")
    out = output_directory(args.out, "--out")
    from .proofs import proof_directory

    proof_path = _proof_path(args, out / "proofs")
    proof = None if proof_path is None else proof_directory(proof_path, "--proof" if args.proof else "proof folder")
    if args.suite in ("paper", "classifiers"):  # their models are cached in OUT/models/
        output_directory(out / "models", "--out", root=out)
    if args.suite == "paper":  # its report is OUT/paper.md unless named
        if args.paper_report is not None:
            output_file(args.paper_report, "--paper-report")
        else:
            output_file(out / "paper.md", "--out", root=out)
    if args.data_dir is not None:  # through the environment, so that worker processes see it too
        if not Path(args.data_dir).is_dir():
            raise InputError(f"--data-dir {args.data_dir} is not a directory")
        os.environ["CARDINAL_DATA"] = str(Path(args.data_dir).resolve())

    if args.address is not None and args.executor != "ray":
        raise InputError("--address names a Ray cluster: use it with --executor ray")
    if args.executor == "ray":
        from .executors import import_ray

        import_ray(local=args.address is None)  # fail before greedy runs when Ray is not installed
    where = f"{args.workers} worker(s)" if args.address is None else f"Ray cluster {args.address}"
    where += " on Ray" if args.executor == "ray" and args.address is None else ""

    def announce(count: int) -> None:  # once greedy has run, before any solver
        print(
            f"cardinal crosscheck: suite {args.suite} → {out}/: {count} explanation(s) to certify "
            f"(solvers {', '.join(solvers)}, {where})",
            file=sys.stderr,
        )

    bar, report = _progress(args.suite)
    try:
        result = run_campaign(
            args.suite,
            out,
            solvers,
            args.time_limit,
            args.workers,
            args.resume,
            progress=report,
            announce=announce,
            executor=args.executor,
            address=args.address,
            proof=proof,
            proof_embed=args.proof_embed,
            methods=args.method,
            radius=args.radius,
            proof_time_limit=args.proof_time_limit,
        )
    finally:
        if bar is not None:
            bar.close()
    if args.suite == "paper" and not result.interrupted:
        from .paper import greedy_statistics, paper_models, write_paper_report
        from .record import read_records

        models = list(paper_models(out))
        stats = greedy_statistics(models)
        records = read_records(out / "records.jsonl")
        if args.paper_report:
            written = write_paper_report(Path(args.paper_report), models, stats, records)
        else:
            written = write_paper_report(out / "paper.md", models, stats, records, root=out)
        print(f"paper report: {', '.join(map(str, written))}", file=sys.stderr)
    state = "interrupted" if result.interrupted else "done"
    print(
        f"{state}: {result.new} new record(s), {result.records} in {out / 'records.jsonl'}; {result.cases} new case file(s); "
        f"summary {out / 'summary.md'}; {result.seconds:.0f} s",
        file=sys.stderr,
    )
    if result.failed:
        print(
            f"{result.failed} unit(s) failed: every solver call of their record ended in error (the reason is in the "
            "solvers' messages of their records in records.jsonl)",
            file=sys.stderr,
        )
    if result.disagreements:
        print(
            f"!!! {result.disagreements} record(s) with conflicting exact evidence (solver_disagreement): see the summary",
            file=sys.stderr,
        )
    if result.rejected_proofs:
        print(f"!!! {result.rejected_proofs} certificate(s) rejected by the checker (a bug): see the summary", file=sys.stderr)
    if result.lost:
        print(
            f"!!! {result.lost} unit(s) lost to a failure of the executor or its workers, not recorded "
            f"({result.lost_reason}): run again with --resume to redo them",
            file=sys.stderr,
        )
    return 130 if result.interrupted else 1 if result.disagreements or result.rejected_proofs or result.lost else 0


class _Progress:
    """Progress of a run of known length on stderr, shown only once the run lasts more than a
    moment: a tqdm bar on a terminal (after 1 s), else a plain line every 10 s that says what it
    counts (`cardinal check: judged 2 of 4 explanations`: done so far, not passed). With an
    outcome per explanation (`update(outcome)`), the line counts what happened instead
    (`cardinal certify: 4 of 4 explanation(s) done: 2 certified, 2 unknown`)."""

    def __init__(self, total: int, command: str, verb: str) -> None:
        self.total, self.command, self.verb, self.done = total, command, verb, 0
        self.outcomes: Counter[str] = Counter()
        self.last = time.monotonic()
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=f"{command}: {verb}", unit="expl", file=sys.stderr, delay=1.0)

    def update(self, outcome: str | None = None) -> None:
        """One more explanation done; `outcome`: what became of it (counted in the line)."""
        self.done += 1
        if outcome is not None:
            self.outcomes[outcome] += 1
        if self.bar is not None:
            if self.outcomes:
                self.bar.set_postfix_str(self.counts(), refresh=False)
            self.bar.update(1)
        elif time.monotonic() - self.last >= 10.0:
            print(f"cardinal {self.command}: {self.line()}", file=sys.stderr, flush=True)
            self.last = time.monotonic()

    def line(self) -> str:
        if self.outcomes:
            return f"{self.done} of {self.total} explanation(s) done: {self.counts()}"
        return f"{self.verb} {self.done} of {self.total} explanation(s)"

    def counts(self) -> str:
        """'2 certified, 2 unknown': the outcomes so far, most frequent first."""
        return ", ".join(f"{count} {outcome}" for outcome, count in self.outcomes.most_common())

    def write(self, message: str) -> None:
        """A message that does not break the bar."""
        if self.bar is not None:
            self.bar.write(message, file=sys.stderr)
        else:
            print(message, file=sys.stderr)

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()


def _progress(label: str):
    """A tqdm bar on a terminal, plain progress lines otherwise (about 20 in a run, each saying
    what it counts): (bar or None, callback(done, total, key of the last record))."""
    if sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=0, desc=label, unit="expl", file=sys.stderr)

        def report(done: int, total: int, key: str) -> None:
            bar.total = total
            bar.update(done - bar.n)

        return bar, report
    step = [0]

    def plain(done: int, total: int, key: str) -> None:
        if done == total or done >= step[0]:
            print(f"{label}: {done} of {total} explanation(s) done (last: {key})", file=sys.stderr, flush=True)
            step[0] = done + max(1, total // 20)

    return None, plain


# ---------------------------------------------------------------------------- export
def _export(args: argparse.Namespace) -> int:
    from collections import Counter

    from .export import FORMATS, SUITE_FORMATS, export_inputs, export_suite

    if args.out is None:
        raise InputError("--out names the folder to write into")
    if args.suite == "xbench":
        return _export_xbench(args)
    if args.suite is not None:
        if args.network is not None or args.inputs is not None:
            raise InputError("give either --suite or a network with --inputs, not both")
        for flag, value in (("--at-most", args.at_most), ("--set", args.set), ("--radius", args.radius)):
            if value is not None:
                raise InputError(f"{flag} is for one network's export, not --suite (which asks its own questions)")
        formats = SUITE_FORMATS if args.format is None else tuple(f.strip() for f in args.format.split(",") if f.strip())
        solvers = None if args.solvers is None else tuple(n.strip() for n in args.solvers.split(",") if n.strip())
        if solvers is not None:
            from ..solvers.base import get_solver

            for name in solvers:
                get_solver(name).close()  # fail early on an unknown or missing backend
        bar, report = _progress(f"export {args.suite}")
        try:
            entries = export_suite(
                args.suite, Path(args.out), formats, solvers, args.time_limit, args.workers,
                None if args.campaign is None else Path(args.campaign), progress=report,
            )  # fmt: skip
        finally:
            if bar is not None:
                bar.close()
    elif args.layout is not None:
        return _export_layout(args)
    else:
        if args.network is None or args.inputs is None:
            raise InputError("give a network and --inputs, or --suite quick|standard")
        if args.format is None or args.format not in FORMATS:
            raise InputError(f"--format must be one of {', '.join(FORMATS)} (got {args.format!r})")
        if args.campaign is not None or args.solvers is not None:
            raise InputError("--campaign and --solvers are for --suite")
        features = None if args.set is None else _feature_set(args.set)
        net, settings, X, rows = _load_problem(args)
        if net.n_outputs > 1 and args.format != "vnnlib":
            classes = net.n_outputs
            raise InputError(f"{args.network}: {args.format} asks about one output and a threshold; this network has {classes}")
        entries = export_inputs(
            net, X, _kinds(args), settings.domain, settings.threshold, args.format, Path(args.out), args.at_most, features,
            args.epsilon, source=Path(args.network).name, rows=rows, radius=settings.radius,
        )  # fmt: skip
    counts = Counter(entry.format for entry in entries)
    listed = ", ".join(f"{count} {fmt}" for fmt, count in sorted(counts.items())) or "no file"
    print(f"cardinal export: {listed} in {args.out}/ (index: {args.out}/index.csv)", file=sys.stderr)
    conflicts = sum("solver_disagreement" in entry.evidence for entry in entries)
    if conflicts:
        print(f"!!! {conflicts} instance(s) of records with conflicting exact evidence: see the summary", file=sys.stderr)
    return 1 if conflicts else 0


def _export_layout(args: argparse.Namespace) -> int:
    """`export --layout vnncomp`: one network's benchmark folder (`verify.vnncomp`)."""
    from .vnncomp import export_layout, refuse_nonempty

    if args.network is None or args.inputs is None:
        raise InputError("--layout vnncomp: give a network and --inputs")
    for flag, value in (("--format", args.format), ("--set", args.set), ("--at-most", args.at_most), ("--solvers", args.solvers)):
        if value is not None:
            raise InputError(f"{flag} is not for --layout vnncomp (which writes VNN-LIB and asks its own questions)")
    refuse_nonempty(Path(args.out))
    net, settings, X, rows = _load_problem(args)
    instances = export_layout(
        net, X, _kinds(args), settings.domain, settings.threshold, Path(args.out), args.time_limit, settings.radius,
        Path(args.network).name, rows,
    )  # fmt: skip
    sat = sum(instance.answer == "sat" for instance in instances)
    print(f"cardinal export: {len(instances)} instances ({sat} sat) in {args.out}/ (see {args.out}/README.md)", file=sys.stderr)
    return 0


def _export_xbench(args: argparse.Namespace) -> int:
    """`export --suite xbench`: the quick and classifiers suites' questions in VNN-COMP's layout."""
    from .vnncomp import export_xbench, refuse_nonempty

    if args.network is not None or args.inputs is not None:
        raise InputError("give either --suite or a network with --inputs, not both")
    for flag, value in (("--format", args.format), ("--set", args.set), ("--at-most", args.at_most), ("--radius", args.radius)):
        if value is not None:
            raise InputError(f"{flag} is not for --suite xbench (which asks its own questions in VNN-COMP's layout)")
    refuse_nonempty(Path(args.out))
    instances = export_xbench(Path(args.out), args.time_limit, lambda name: print(f"cardinal export: {name}", file=sys.stderr))
    sat = sum(instance.answer == "sat" for instance in instances)
    print(f"cardinal export: {len(instances)} instances ({sat} sat) in {args.out}/ (see {args.out}/README.md)", file=sys.stderr)
    return 0


def _feature_set(text: str) -> tuple[int, ...]:
    """--set 0,3,7 → (0, 3, 7): distinct non-negative integers."""
    try:
        features = tuple(sorted(int(part) for part in text.split(",") if part.strip()))
    except ValueError:
        raise InputError(f"--set must be comma-separated feature indices, got {text!r}") from None
    if len(set(features)) != len(features) or any(i < 0 for i in features):
        raise InputError(f"--set must hold distinct feature indices ≥ 0, got {text!r}")
    return features


# ---------------------------------------------------------------------------- bench
def _bench(args: argparse.Namespace) -> int:
    import importlib

    checkout = Path(__file__).resolve().parents[1]
    if not (checkout / "bench" / f"{args.name}.py").is_file():
        raise InputError(f"no bench/{args.name}.py beside {checkout / 'verify'}: the benchmarks run from a source checkout")
    if str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    importlib.import_module(f"bench.{args.name}").main(args.arguments)
    return 0


def _ticker(label: str, every: float = 5.0):
    """For an open-ended search: a counting tqdm bar on a terminal, else a line every `every` s.
    Returns (bar or None, callback(checked, found))."""
    if sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(desc=label, unit="pair", file=sys.stderr)

        def count(checked: int, found: int) -> None:
            bar.set_postfix(found=found, refresh=False)
            bar.update(checked - bar.n)

        return bar, count
    last = [time.monotonic()]

    def plain(checked: int, found: int) -> None:
        if time.monotonic() - last[0] >= every:
            print(f"{label}: {checked} instance/kind pairs checked, {found} counterexample(s) found", file=sys.stderr, flush=True)
            last[0] = time.monotonic()

    return None, plain


# ---------------------------------------------------------------------------- hunt
def _hunt(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from .hunt import KEPT, hunt

    out = output_directory(args.out, "--out")
    bar, report = _ticker(f"hunt {args.activation}")
    try:
        result = hunt(args.activation, args.max_features, args.seconds, args.seed, progress=report)
    finally:
        if bar is not None:
            bar.close()
    rows = []
    for found in result.smallest:
        path = found.case().save(out)
        rows.append(
            [
                found.kind,
                found.source,
                result.finds_by.get((found.kind, found.source), 0),
                "yes" if found.tie_decided else "no",  # another tie order rescues greedy (or undetermined)
                found.net.n_inputs,
                "-".join(map(str, found.net.widths)),
                len(found.greedy),
                len(found.minimum),
                str(path),
            ]
        )
    checked = f"{result.tried} instance/kind pairs checked in {result.seconds:.0f} s"
    print(f"hunt {args.activation}: {checked}, {result.raw_finds} counterexample(s) found")
    if rows:
        print(f"kept {len(rows)} of {result.raw_finds}, {KEPT} (the group's other finds are not saved), in {out}/:")
        headers = ["kind", "source", "finds", "tie rescue", "n", "widths", "greedy", "minimum", "case file"]
        print(tabulate(rows, headers=headers, tablefmt="simple"))
    else:
        print(f"no instance where greedy is not minimal was found for {args.activation} (that is not a proof that none exists)")
    return 0


# ---------------------------------------------------------------------------- replay
def _replay(args: argparse.Namespace) -> int:
    from .cases import Case, replay

    case = Case.load(args.case)
    report = replay(case)
    for check in report.checks:
        print(f"ok: {check}")
    if report.holds:
        print(f"{args.case}: the case holds")
        return 0
    print(f"{args.case}: the case does NOT hold: {report.reason}")
    return 1


# ---------------------------------------------------------------------------- proof
CHECK_SECONDS = 300.0  # `proof check --time-limit`'s default, per certificate


def _proof(args: argparse.Namespace) -> int:
    from .proofs import against_record, check_file, records_by_file

    records = None if args.records is None else records_by_file(args.records)
    rejected = 0
    for path in args.files:
        named = None
        if records is not None:
            named = records.get(Path(path).name)
            if named is None:
                raise InputError(f"{path}: no record of {args.records} names this file")
        started = time.perf_counter()
        checked = check_file(path, args.network, args.activations, args.time_limit, args.input_shape)
        seconds = time.perf_counter() - started
        report, message = checked.report, checked.report.message
        if report.accepted and named is not None:
            mismatch = against_record(checked, *named)
            message = message if mismatch is None else mismatch
        if report.accepted and message == report.message:
            print(f"{path}: {message} ({report.leaves} leaves, {report.evaluations} exact evaluations, {seconds:.2f} s)")
            if named is not None:
                print(f"  record: {named[0]}, certificate sha256 {checked.sha256}")
            for line in report.statement:
                print(f"  {line}")
        else:
            rejected += 1
            print(f"{path}: REJECTED: {message}")
    return 1 if rejected else 0


# ---------------------------------------------------------------------------- data
def _data(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from .datasets import check_data_files, data_directory

    states = check_data_files(None, args.data_dir)
    rows = [(file.relative, state, ", ".join(file.datasets), file.source) for file, state in states]
    print(f"data folder: {data_directory(args.data_dir)}")
    print(tabulate(rows, headers=["file", "state", "datasets", "public source"], tablefmt="simple"))
    bad = [file.relative for file, state in states if state != "ok"]
    if bad:
        print(f"{len(bad)} of {len(states)} data files missing or altered: {', '.join(bad)}")
        return 1
    print(f"all {len(states)} data files present with the expected SHA-256")
    return 0


class _Version(argparse.Action):
    """`--version`: the installed package's version (as `cardinal.__version__`), looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> NoReturn:
        from ..version import package_version

        print(f"cardinal {package_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The `cardinal` parser: the shared problem flags, then each subcommand's own `_add_*`."""
    parser = _Parser(
        prog="cardinal",
        description="Cardinality-minimal explanations of neural-network predictions, greedy and certified.",
    )
    parser.add_argument("--version", action=_Version, help="print cardinal's version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    problem = _problem_flags()
    for add in (
        _add_explain, _add_certify, _add_check, _add_info, _add_convert, _add_crosscheck,
        _add_export, _add_hunt, _add_train, _add_bench, _add_replay, _add_proof, _add_data,
    ):  # fmt: skip
        add(commands, problem)  # one function per subcommand, below, in the order of `cardinal --help`
    return parser


def _add_explain(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    explain = commands.add_parser(
        "explain",
        parents=[problem],
        help="explanations of a network: greedy (sign-monotone networks) or sequential deletion (any network) (JSON lines)",
        description="Contrastive/abductive explanations, one JSON line per input and kind: "
        '{"row", "kind", "prediction", "output", "exists", "features", "size", "method", "check", "witness", '
        '"directions", "threshold", "domain", "notes"}, and "names" (the features\' names, beside "features") when the '
        "network file's metadata has feature_names. row: the input's row in --inputs (from 0, after any header); "
        "output: f(x) in float64 (f_1 − f_0 for two outputs under greedy; the K outputs otherwise); method: greedy or "
        "deletion; check: exact, repaired or undecided (the exact re-check of the answer); witness (contrastive): the "
        'point that flips; directions: each feature\'s direction found by sign analysis, as counts {"+", "-", "0", '
        '"mixed"} and "each", one character per feature (+ - 0 ?); threshold and domain: what the line was computed '
        "with (`check` reads them back); notes: e.g. a prediction constant on the whole box. Greedy (Algorithm 1, the "
        "default on a sign-monotone network: one output, or two through the logit difference f_1 − f_0) answers in a "
        "few batched passes, with no minimality guarantee. Deletion (the default on every other network) is VeriX's "
        "sequential deletion: features least sensitive first (the smallest margin of p(x) with the feature alone at "
        "either end of its box, computed exactly; ties by lower index), each removed from the set unless that breaks "
        "the explanation, one exact question per feature (z3, or enumeration on small binary boxes; the monotone "
        "shortcut on sign-monotone networks): a subset-minimal explanation (no feature can be dropped), not "
        'necessarily a minimum one. Its lines add "queries" (exact questions asked); a question no engine decides '
        'within --time-limit leaves the line undecided ("exists" null, the reason in notes): nothing is guessed.',
    )
    explain.add_argument(
        "--method",
        choices=METHOD_CHOICES,
        help="greedy (sign-monotone networks only) or deletion (any network); default: greedy on a sign-monotone "
        "network, deletion on any other",
    )
    explain.add_argument("--device", default="auto", help="greedy: auto (CUDA when present), cpu or cuda")
    explain.add_argument(
        "--no-verify",
        action="store_true",
        help="greedy: skip the exact re-check of each answer (faster, float decisions only); deletion is always exact",
    )
    explain.add_argument(
        "--time-limit", type=seconds, default=60.0, help="deletion: seconds per exact question (default 60)"
    )
    explain.set_defaults(handler=_explain)


def _add_certify(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    certify = commands.add_parser(
        "certify",
        parents=[problem],
        help="greedy (or deletion) vs exact solvers, with a verdict per input and kind (JSON lines)",
        description="Certify an explainer's answers with exact solvers. One JSON line per input and kind: "
        '{"row", "kind", "prediction", "method", "greedy", "solvers", "verdict", "certified", "minimum", ..., '
        '"threshold", "domain", "notes"}; method names the explainer (greedy or deletion, null when none ran) whose '
        'answer "greedy" holds. '
        "Verdicts: greedy_minimal, greedy_suboptimal (deletion_minimal, deletion_suboptimal with --method deletion), "
        "none_exists, solver_disagreement, unknown, exact_only (greedy on a network that is not sign-monotone: the solvers "
        "alone), undecided "
        "(exact arithmetic cannot decide p(x) or the explainer's answer: a valid input, recorded, not certified); they rest "
        "on exact evidence only, and a solver claim refuted by the exact replay is listed under its solver. "
        "Exit 1 when exact evidence conflicts (solver_disagreement), 2 on bad input.",
    )
    certify.add_argument(
        "--solvers",
        help="comma-separated: exact-milp,z3,enumerate,gurobi,highs, or all (every installed one); default: every installed "
        "exact backend that applies to the network (docs/statuses.md)",
    )
    certify.add_argument("--time-limit", type=seconds, default=60.0, help="seconds per solver call (default 60)")
    certify.add_argument(
        "--epsilon", type=positive_number, default=1e-6, help="MILP margin to reach class 1: f ≥ t + ε (default 1e-6)"
    )
    certify.add_argument("--cases", help="directory for case files (default: OUT.cases/ or ./cardinal-cases/)")
    _proof_flag_arguments(certify, "each exact 'nothing smaller' (a minimum proved, no CXp at all)", _PROOFS_BESIDE)
    certify.add_argument(
        "--method",
        choices=METHOD_CHOICES,
        default="greedy",
        help="the explainer to certify: greedy (default; on a network that is not sign-monotone the solvers alone give "
        "the minimum, exact_only) or deletion (subset-minimal, any network; each of its exact questions gets --time-limit)",
    )
    _ci_flag_arguments(certify)
    certify.set_defaults(handler=_certify)


def _add_check(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    check = commands.add_parser(
        "check",
        parents=[problem],
        help="judge explanations from any source exactly: valid, subset-minimal, minimum (JSON lines)",
        description='Judge explanations given as JSON lines {"row", "kind", "features"} (features null: none '
        'exists). One JSON line per explanation: {"row", "kind", "features", "verdict", "passed", "valid", '
        '"witness", "subset_minimal", "smaller", ..., "threshold", "domain", "notes"}; the threshold and domain are '
        "those the explanations file records (explain writes them) unless a flag says otherwise. Verdicts: valid, "
        "subset_minimal, minimum, none_exists (pass); "
        "invalid, not_subset_minimal, not_minimum, undecided, solver_disagreement (fail). Exit 0: every explanation "
        "passes what --require asks; 1: one fails; 2: bad input.",
    )
    check.add_argument("--explanations", required=True, help="JSON lines, one per row and kind")
    check.add_argument(
        "--require",
        choices=("valid", "subset", "minimum"),
        default="valid",
        help="what each explanation must be: valid (default), subset-minimal, or cardinality-minimum (runs --solvers)",
    )
    check.add_argument(
        "--solvers",
        help="for --require minimum and non-monotone networks (default: every installed exact backend that applies)",
    )
    check.add_argument("--time-limit", type=seconds, default=60.0, help="seconds per solver call (default 60)")
    check.add_argument(
        "--epsilon", type=positive_number, default=1e-6, help="MILP margin to reach class 1: f ≥ t + ε (default 1e-6)"
    )
    _proof_flag_arguments(check, "each minimum and none_exists verdict (with --require minimum)", _PROOFS_BESIDE)
    _ci_flag_arguments(check)
    check.set_defaults(handler=_check)


def _add_info(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    info = commands.add_parser(
        "info",
        help="summarise a model file: inputs, outputs, layers, parameters, monotonicity per feature",
        description="Print a summary of a network file (JSON, ONNX or torch): inputs and input_shape, outputs (K) and "
        "the prediction rule, class names, layers and activations, parameter count, whether it is monotone (all "
        "weights ≥ 0), sign-monotone (every feature non-decreasing or non-increasing) or partially monotone (some "
        "features mixed), the per-feature directions found by sign analysis (+ - 0 ?), and the parts of the file "
        'dropped on reading. --json prints one JSON object: {"file", "hash", "inputs", "input_shape", '
        '"feature_names", "outputs", "prediction", "threshold", "class_names", "layers", "parameters", "monotone", '
        '"sign_monotone", "partially_monotone", "directions", "dropped"}. Exit 2 on a file that cannot be read.',
    )
    info.add_argument("network", help="network file: .json, .onnx, .pt/.pth")
    info.add_argument("--activations", help="for a state_dict file: one activation per Linear layer, e.g. relu,identity")
    _input_shape_argument(info)
    info.add_argument("--json", action="store_true", help="one JSON object instead of text")
    info.set_defaults(handler=_info)


def _add_convert(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    convert = commands.add_parser(
        "convert",
        help="convert a network between JSON, ONNX and torch files (by extension: .json, .onnx, .pt/.pth)",
        description="Read IN (JSON, ONNX, or a torch file: a whole nn.Sequential or a state_dict with --activations) and "
        "write OUT in the format of its extension. ONNX and torch files hold float64 weights, so the network is the "
        "same exactly; a .pt file holds the whole nn.Sequential unless --state-dict.",
    )
    convert.add_argument("input", help="network file to read")
    convert.add_argument("output", help="file to write: .json, .onnx, .pt or .pth")
    convert.add_argument("--activations", help="for a state_dict input: one activation per Linear layer, e.g. relu,identity")
    _input_shape_argument(convert)
    convert.add_argument("--float32", action="store_true", help="ONNX/torch output in float32 (rounds the weights; warns)")
    convert.add_argument(
        "--state-dict", action="store_true", help="torch output as a state_dict (prints the --activations to load it)"
    )
    convert.set_defaults(handler=_convert)


def _add_crosscheck(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    crosscheck = commands.add_parser(
        "crosscheck",
        help="the main job: certify greedy explanations over a suite, log agreement, keep counterexamples",
        description="Run a suite: greedy (batched) then every exact solver on every explanation. Writes DIR/records.jsonl "
        "(one JSON line per explanation), DIR/summary.md, DIR/figures/*.png and DIR/cases/*.json.",
    )
    crosscheck.add_argument(
        "--suite",
        choices=("quick", "standard", "paper", "classifiers"),
        default="quick",
        help="default quick (no data files); classifiers: digit and credit classifiers over epsilon-balls, models "
        "trained at run time into OUT/models/",
    )
    crosscheck.add_argument("--out", default="crosscheck", help="output directory (default ./crosscheck)")
    crosscheck.add_argument(
        "--workers", type=count(1, MAX_WORKERS), default=1, help=f"parallel solver processes, at most {MAX_WORKERS} (default 1)"
    )
    crosscheck.add_argument(
        "--resume", action="store_true", help="continue an interrupted run in --out, skipping finished records"
    )
    crosscheck.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="local",
        help="where solver calls run: local processes (default) or Ray (pip install 'cardinal[ray]')",
    )
    crosscheck.add_argument(
        "--address",
        help="with --executor ray: the Ray cluster to join ('auto': the one `ray start` started on this machine), whose "
        "CPUs set how many calls run at once; default: a local Ray instance of --workers CPUs",
    )
    crosscheck.add_argument(
        "--solvers", help="comma-separated backends (default: every installed one but the benchmark backends cvc5, scip, marabou)"
    )
    crosscheck.add_argument(
        "--method",
        type=method_list,
        help="the explainers to certify, comma-separated: greedy (sign-monotone networks; the solvers alone where no "
        "explainer applies), deletion (any network), or greedy,deletion (one record each where it applies, judged on "
        "the same solver calls); the records name it in `method`. Default: greedy, and greedy,deletion for the "
        "classifiers suite",
    )
    crosscheck.add_argument("--time-limit", type=seconds, default=10.0, help="seconds per solver call (default 10)")
    crosscheck.add_argument(
        "--radius",
        type=positive_number,
        help="every row of every instance ranges over its own box, the largest box of doubles in the instance's box "
        "within exact distance R of x; "
        "instance names get '@rR' (default: each instance's own, the whole box for all but the classifiers suite)",
    )
    crosscheck.add_argument(
        "--data-dir", help="folder with the data files for --suite paper (default: $CARDINAL_DATA, else ../shared/data)"
    )
    crosscheck.add_argument(
        "--paper-report", help="where --suite paper writes its report, figures beside it (default: OUT/paper.md)"
    )
    _proof_flag_arguments(crosscheck, "each record's exact 'nothing smaller' (a minimum proved, no CXp at all)", "OUT/proofs/")
    crosscheck.set_defaults(handler=_crosscheck)


def _add_export(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    export = commands.add_parser(
        "export",
        parents=[_problem_flags(required=False, out="the folder to write into (required)")],
        help="write explanation questions as MPS/LP, SMT-LIB 2 or ONNX + VNN-LIB files, or a whole benchmark suite",
        description="Per input and kind, one file asking one question: 'an explanation of size ≤ k?' (--at-most k; for "
        "mps/lp without it, the minimum; for smt2 without it, greedy's size − 1), or for vnnlib 'is --set S an "
        "explanation?' (with the network as network.onnx). --suite quick|standard writes every explanation of that "
        "crosscheck suite with index.csv holding each instance's certified answer (from a campaign run into "
        "OUT/campaign/, or --campaign DIR). See docs/formats.md, Export.",
    )
    export.add_argument("--format", help="mps, lp, smt2 or vnnlib; with --suite a comma-separated subset of mps,smt2,vnnlib")
    export.add_argument("--at-most", type=count(0), help="the size bound k of the question (default: see above)")
    export.add_argument("--set", help="vnnlib: the fixed feature set, e.g. 0,3,7")
    export.add_argument(
        "--suite",
        choices=("quick", "standard", "xbench"),
        help="export a whole crosscheck suite instead of one network; xbench: the quick and classifiers suites' questions "
        "in VNN-COMP's layout (as --layout vnncomp)",
    )
    export.add_argument(
        "--layout",
        choices=("vnncomp",),
        help="write a benchmark folder in VNN-COMP's layout (instances.csv, onnx/, vnnlib/ with certified answers and "
        "counterexamples, README.md) into a new or empty --out; --time-limit is each instance's timeout",
    )
    export.add_argument("--campaign", help="--suite: the campaign folder to read (and run or resume) (default OUT/campaign)")
    export.add_argument("--solvers", help="--suite: comma-separated backends of the campaign (default: the campaign's)")
    export.add_argument(
        "--time-limit",
        type=seconds,
        default=10.0,
        help="--suite, --layout: seconds per solver call, and per instance (default 10)"
    )
    export.add_argument(
        "--workers", type=count(1, MAX_WORKERS), default=1, help=f"--suite: parallel solver processes, at most {MAX_WORKERS}"
    )
    export.add_argument(
        "--epsilon", type=positive_number, default=1e-6, help="mps/lp: the margin to reach class 1, f ≥ t + ε (default 1e-6)"
    )
    export.set_defaults(handler=_export)


def _add_hunt(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    hunt = commands.add_parser(
        "hunt",
        help="search random and SET-COVER networks for instances where greedy is not minimal; shrink and save them",
        description="Search for `--seconds`: random small monotone networks (and, for step and hardtanh, the paper's "
        "SET-COVER reduction), each input and kind checked by exhaustive enumeration, so every find is exact. Each "
        "find is shrunk (fewer features, units and layers, rounder numbers) while greedy stays suboptimal; per kind, "
        "source and tie rescue the smallest is kept and saved as a case file (`cardinal replay` re-checks it). "
        "Finding nothing is no proof that nothing exists.",
    )
    hunt.add_argument(
        "--activation",
        choices=("relu", "hardtanh", "step", "sigmoid"),
        default="relu",
        help="the hidden units of the networks searched (default relu)",
    )
    hunt.add_argument(
        "--max-features",
        type=count(3, MAX_HUNT_FEATURES),
        default=8,
        help=f"largest random network input size, 3 to {MAX_HUNT_FEATURES} (default 8)",
    )
    hunt.add_argument("--seconds", type=seconds, default=60.0, help="search time, shrinking included (default 60)")
    hunt.add_argument(
        "--seed", type=count(0), default=0, help="seed of the random networks: the same seed searches the same ones (default 0)"
    )
    hunt.add_argument("--out", required=True, help="directory for the case files (cardinal.case/1), made if missing")
    hunt.set_defaults(handler=_hunt)


def _add_train(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    from .datasets import dataset_names

    train = commands.add_parser(
        "train",
        help="train a fully monotone network on a dataset (projected Adam, as in the paper)",
        description="Fully monotone ReLU network: Adam, negative weights clamped to 0 after every step; "
        "prints the test RMSE (regression) or accuracy (classification).",
    )
    train.add_argument("--dataset", required=True, help=f"{', '.join(dataset_names())}, or csv:PATH (with --target)")
    train.add_argument("--out", required=True, help="network file to write (JSON, cardinal.network/1)")
    train.add_argument("--target", help="label column of a csv:PATH dataset")
    train.add_argument("--task", choices=("regression", "classification"), help="for csv:PATH (default: inferred)")
    train.add_argument("--data-dir", help="folder with the data files (default: $CARDINAL_DATA, else ../shared/data)")
    train.add_argument("--hidden", type=_widths, default=(64, 64), help="hidden widths, e.g. 64,64 or none (default 64,64)")
    train.add_argument("--epochs", type=count(1), default=10, help="training epochs (default 10)")
    train.add_argument("--seed", type=count(0), default=0, help="seed for initialisation and shuffling (default 0)")
    train.add_argument("--lr", type=positive_number, default=1e-3, help="Adam learning rate (default 1e-3)")
    train.add_argument("--batch-size", type=count(1), default=32, help="batch size (default 32)")
    train.add_argument(
        "--balanced",
        action="store_true",
        help="classification: weight the positive class by negatives/positives (without it a rare class may never be "
        "predicted)",
    )
    train.add_argument("--export-test", metavar="FILE.csv", help="also write the test inputs (header: feature names)")
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    train.set_defaults(handler=_train)


def _widths(text: str) -> tuple[int, ...]:
    """`--hidden`: comma-separated layer widths ≥ 1, or `none` for no hidden layer."""
    if text.strip().lower() in ("", "none"):
        return ()
    try:
        widths = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of layer widths") from None
    if any(width < 1 for width in widths):
        raise argparse.ArgumentTypeError(f"layer widths must be ≥ 1, got {text!r}")
    return widths


def _train(args: argparse.Namespace) -> int:
    from .train import run_train  # torch and the datasets' readers only for this command

    return run_train(args)


def _add_bench(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    bench = commands.add_parser(
        "bench",
        help="run a benchmark script of the source checkout (bench/greedy.py, guard.py, solvers.py, startup.py)",
        description="Run bench/NAME.py with the arguments that follow (see `cardinal bench NAME --help`); "
        "it writes its table where its --out says (default ./bench-results/; pass --out bench/results/NAME.md to refresh "
        "the tables kept in the repository).",
    )
    bench.add_argument(
        "name",
        choices=("exact_milp", "greedy", "guard", "solvers", "startup", "verix"),
        help="exact_milp: issue 28's exact MILP targets; greedy: batched vs one-call loops; guard: a guarded call's "
        "fixed cost; solvers: time per backend; startup: CPU seconds of short commands; verix: minimum CXps and AXps "
        "of a VeriX-shaped 784-input classifier",
    )
    bench.add_argument("arguments", nargs=argparse.REMAINDER, help="passed to the benchmark")
    bench.set_defaults(handler=_bench)


def _add_replay(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    replay = commands.add_parser(
        "replay",
        help="re-verify a case file in exact arithmetic (exit 0: holds, 1: does not)",
        description="Re-check a case file (written by certify, crosscheck or hunt) in exact arithmetic: that greedy "
        "(Algorithm 1) returns the case's `greedy` set, that its `minimum` is an explanation (smaller than greedy's "
        "for a greedy_suboptimal case) and, where the case says the minimum is proved and the network is small enough "
        "to enumerate, that nothing smaller exists. Prints one `ok:` line per check. Exit 0: the case holds; 1: it "
        "does not (the reason is printed); 2: the file is not a case.",
    )
    replay.add_argument("case", help="case file (cardinal.case/1, docs/formats.md)")
    replay.set_defaults(handler=_replay)


def _add_proof(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    proof = commands.add_parser(
        "proof",
        help="check certificates (cardinal.proof/1) with the independent checker",
        description="`cardinal proof check FILE...`: check each certificate of 'no explanation within k' (or 'no "
        "contrastive explanation') with cardinal.checker, which imports nothing from cardinal (docs/proofs.md says what "
        "the generators share with it). The network: --network "
        "NET (cardinal JSON is read by the checker itself; ONNX and torch files are converted by cardinal's readers, "
        "which the check then trusts too), else the one the certificate embeds, else networks/SHA256.json beside it. "
        "Exit 0: every certificate accepted; 1: one rejected (the first step that fails is named); 2: bad input.",
    )
    proof.add_argument("action", choices=("check",), help="check: check the certificates (the one action today)")
    proof.add_argument("files", nargs="+", metavar="FILE", help="certificate files")
    proof.add_argument("--network", help="the network: JSON (cardinal.network/1), ONNX, or torch")
    proof.add_argument("--activations", help="for a torch state_dict: one activation per Linear layer, e.g. relu,identity")
    _input_shape_argument(proof)
    proof.add_argument(
        "--records",
        metavar="RECORDS",
        help="the JSON lines written with the certificates (certify/check --out, crosscheck's records.jsonl): each FILE must "
        "be the certificate its record names (its SHA-256) and state that record's problem, claim and kind",
    )
    proof.add_argument(
        "--time-limit",
        type=seconds,
        default=CHECK_SECONDS,
        metavar="S",
        help=f"seconds for each certificate (default {CHECK_SECONDS:g}); one not checked in time is refused (exit 2), "
        "never accepted",
    )
    proof.set_defaults(handler=_proof)


def _add_data(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    data = commands.add_parser(
        "data",
        help="check the data files of the paper suite (every missing or altered file at once)",
        description="`cardinal data check`: each data file the named datasets read, with its state (ok, missing, "
        "checksum differs) and public source. Exit 0 when all are present and intact, 1 otherwise.",
    )
    data.add_argument("action", choices=("check",), help="check: list every data file with its state")
    data.add_argument("--data-dir", help="the data folder (default: $CARDINAL_DATA, else ../shared/data)")
    data.set_defaults(handler=_data)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as error:
        return _fail(error.prog, str(error))
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        with sigterm_interrupts():  # SIGTERM takes Ctrl-C's orderly way out
            return handler(args)
    except InputError as error:
        return _fail(f"cardinal {args.command}", str(error))
    except KeyboardInterrupt:
        print(f"cardinal {args.command}: interrupted", file=sys.stderr)
        return 130


def _fail(prog: str, message: str) -> int:
    """Print the one-line message of a user's error (line breaks in names escaped); exit code 2."""
    print(f"{prog}: error: {message}".replace("\r", "\\r").replace("\n", "\\n"), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())

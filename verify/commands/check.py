"""`cardinal check`: judge explanations from any source exactly: valid, subset-minimal, minimum (JSON lines). Its
flags (`_add_check`) and its handler.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from cardinal.errors import InputError
from cardinal.validate import output_file

from .common import (
    _ci_flag_arguments,
    _ci_flags,
    _ci_report,
    _emit,
    _exact_flag_arguments,
    _inputs,
    _kinds,
    _network,
    _Progress,
    _proof_flag_arguments,
    _proof_folder,
    _proof_report,
    _rows,
    _settings,
    _solver_names,
)


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
    _exact_flag_arguments(
        check, "for --require minimum and non-monotone networks (default: every installed exact backend that applies)"
    )
    _proof_flag_arguments(check, "each minimum and none_exists verdict (with --require minimum)")
    _ci_flag_arguments(check)
    check.set_defaults(handler=_check)


def _check(args: argparse.Namespace) -> int:
    from cardinal.solvers.base import SOLVER_NAMES
    from cardinal.verify.check import check_explanations, read_claims
    from cardinal.verify.pipeline import Plan
    from cardinal.verify.record import annotated
    from tabulate import tabulate

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
    proofs = _proof_folder(args, net) if args.require == "minimum" else None
    with _Progress(len(claims), "check", "judged") as progress:
        plan = Plan(time_limit=args.time_limit, epsilon=args.epsilon, proofs=proofs)
        solvers = None if args.solvers is None else names
        judgements = check_explanations(net, X, claims, settings, args.require, solvers, plan, progress.update)
    lines = [judgement.to_json() for judgement in judgements]
    failed = [f"{judgement.describe()}" for judgement in judgements if not judgement.passed]
    failed += _ci_report(lines, "check", _kinds(args), fail_on, baseline, args.diff_out)
    if proofs is not None:
        failed += _proof_report(judgements, proofs.folder)
    _emit(annotated(lines, net, settings), args.out)
    verdicts = Counter((j.claim.kind, j.verdict) for j in judgements)
    table = [[kind, verdict, count] for (kind, verdict), count in sorted(verdicts.items())]
    print(tabulate(table, headers=["kind", "verdict", "count"], tablefmt="simple"), file=sys.stderr)
    for line in failed:
        print(f"FAIL {line}", file=sys.stderr)
    return 1 if failed else 0


def _recorded(path: str, claims):
    """The settings an explanations file records on its lines (`explain` writes them)."""
    from cardinal.verify.settings import Recorded

    return Recorded.of(path, [(claim.line, claim.threshold, claim.domain, claim.radius) for claim in claims])


def _chosen(args: argparse.Namespace, claims, count: int):
    """The claims about the rows `--rows` chooses."""
    chosen = set(_rows(args, count))
    claims = [claim for claim in claims if claim.row in chosen]
    if not claims:
        raise InputError(f"{args.explanations}: no explanation for the rows of --rows")
    return claims

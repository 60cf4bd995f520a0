"""`cardinal certify`: greedy (or deletion) vs exact solvers, with a verdict per input and kind (JSON lines). Its
flags (`_add_certify`) and its handler.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from cardinal.validate import output_directory, output_file

from .common import (
    METHOD_CHOICES,
    _beside,
    _ci_flag_arguments,
    _ci_flags,
    _ci_report,
    _emit,
    _exact_flag_arguments,
    _kinds,
    _load_problem,
    _Progress,
    _proof_flag_arguments,
    _proof_folder,
    _proof_report,
    _solver_names,
)


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
    _exact_flag_arguments(
        certify,
        "comma-separated: exact-milp,z3,enumerate,gurobi,highs, or all (every installed one); default: every installed "
        "exact backend that applies to the network (docs/statuses.md)",
    )
    certify.add_argument("--cases", help="directory for case files (default: OUT.cases/ or ./cardinal-cases/)")
    _proof_flag_arguments(certify, "each exact 'nothing smaller' (a minimum proved, no CXp at all)")
    certify.add_argument(
        "--method",
        choices=METHOD_CHOICES,
        default="greedy",
        help="the explainer to certify: greedy (default; on a network that is not sign-monotone the solvers alone give "
        "the minimum, exact_only) or deletion (subset-minimal, any network; each of its exact questions gets --time-limit)",
    )
    _ci_flag_arguments(certify)
    certify.set_defaults(handler=_certify)


def _certify(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from cardinal.verify.certify import SolverPool, case_of, certify_input, explainer_answers
    from cardinal.verify.proofs import claim_of
    from cardinal.verify.record import annotated
    from tabulate import tabulate

    from cardinal.problem import Status, Verdict

    if args.out is not None:
        output_file(args.out, "--out")
    cases_dir = Path(args.cases) if args.cases else _beside(args.out, ".cases", "cardinal-cases")
    output_directory(cases_dir, "--cases" if args.cases else "case folder")
    net, settings, X, rows = _load_problem(args)
    domain, threshold = settings.domain, settings.threshold
    names = _solver_names(args.solvers, net, domain)
    fail_on, baseline = _ci_flags(args, "certify")
    proofs = _proof_folder(args, net)
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
                    entry = proofs.write(problem, claim, f"row{row}-{kind}", certificate.solvers)
                    certificate = replace(certificate, proof=entry)
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
        failed += _proof_report(certificates, proofs.folder)
    disagreements = sum(count for (_, verdict), count in verdicts.items() if verdict == "solver_disagreement")
    if disagreements:  # exact evidence conflicts: always a failure
        failed.append(f"{disagreements} solver disagreement(s): exact evidence conflicts")
    for line in failed:
        print(f"FAIL {line}", file=sys.stderr)
    return 1 if failed else 0


def _statuses(certificate) -> str:
    parts = []
    for name, outcome in certificate.solvers.items():
        found = "" if outcome.solution is None else f" {list(outcome.solution)}"
        parts.append(f"{name}: {outcome.status.value}{found}")
    return ", ".join(parts)

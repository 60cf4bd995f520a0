"""`cardinal crosscheck`: the main job: certify greedy explanations over a suite, log agreement, keep
counterexamples. Its flags (`_add_crosscheck`) and its handler.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cardinal.verify.executors import EXECUTORS

from cardinal.errors import InputError
from cardinal.validate import count, output_directory, output_file, positive_number, seconds

from .common import MAX_WORKERS, PLAN_METHODS, _progress, _proof_flag_arguments, _proof_path, _traversal_argument


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
        help="the explainers to certify, comma-separated: auto (greedy on a sign-monotone network, deletion on any "
        "other, as explain's and certify's default), greedy (sign-monotone networks; the solvers alone where no "
        "explainer applies), deletion (any network), or greedy,deletion (one record each where it applies, judged on "
        "the same solver calls); the records name it in `method`. Default: greedy, and greedy,deletion for the "
        "classifiers suite",
    )
    _traversal_argument(crosscheck)
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


def _crosscheck(args: argparse.Namespace) -> int:
    from cardinal.verify.campaign import CampaignSettings, default_solvers, run_campaign

    solvers = default_solvers() if args.solvers is None else tuple(n.strip() for n in args.solvers.split(",") if n.strip())
    if args.solvers is not None and not solvers:
        raise InputError("--solvers needs at least one solver name")
    if args.solvers is not None:
        from cardinal.solvers.base import get_solver

        for name in solvers:
            get_solver(name).close()  # fail early on an unknown or missing backend
    if not solvers:
        raise InputError("no exact solver is installed: pip install 'cardinal[solvers]'")
    out = output_directory(args.out, "--out")
    from cardinal.verify.proofs import proof_directory

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
        from cardinal.verify.executors import import_ray

        import_ray(local=args.address is None)  # fail before greedy runs when Ray is not installed
    where = f"{args.workers} worker(s)" if args.address is None else f"Ray cluster {args.address}"
    where += " on Ray" if args.executor == "ray" and args.address is None else ""

    def announce(count: int) -> None:  # once greedy has run, before any solver
        print(
            f"cardinal crosscheck: suite {args.suite} → {out}/: {count} explanation(s) to certify "
            f"(solvers {', '.join(solvers)}, {where})",
            file=sys.stderr,
        )

    settings = CampaignSettings(
        solvers,
        args.time_limit,
        args.workers,
        args.executor,
        args.address,
        methods=args.method,
        traversal=args.traversal,
        radius=args.radius,
        proof=proof,
        proof_embed=args.proof_embed,
        proof_time_limit=args.proof_time_limit,
    )
    bar, report = _progress(args.suite)
    try:
        result = run_campaign(args.suite, out, settings, args.resume, progress=report, announce=announce)
    finally:
        if bar is not None:
            bar.close()
    if args.suite == "paper" and not result.interrupted:
        from cardinal.verify.paper import greedy_statistics, paper_models, write_paper_report
        from cardinal.verify.record import read_records

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
    if result.interrupted:
        return result.interrupted_code
    return 1 if result.disagreements or result.rejected_proofs or result.lost else 0


def method_list(text: str) -> tuple[str, ...]:
    """argparse type of crosscheck's --method: methods of `PLAN_METHODS`, comma-separated,
    in order, each once ("greedy,deletion")."""
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",")))
    for name in names:
        if name not in PLAN_METHODS:
            raise argparse.ArgumentTypeError(f"invalid choice: {name!r} (choose from {', '.join(PLAN_METHODS)}, or a list)")
    return names

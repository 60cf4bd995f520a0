"""`cardinal export`: write explanation questions as MPS/LP, SMT-LIB 2 or ONNX + VNN-LIB files, or a whole
benchmark suite. Its flags (`_add_export`) and its handler.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from cardinal.defaults import DEFAULT_EPSILON
from cardinal.errors import InputError
from cardinal.validate import count, positive_number, seconds

from .common import MAX_WORKERS, _kinds, _load_problem, _problem_flags, _progress


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
        "in VNN-COMP's layout (as --layout vnncomp), the published set's `suites` family only: `python -m bench.xbench "
        "build` (from a clone's root) builds the whole published set, digits and VeriX networks included",
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
        help="--suite, --layout: seconds per solver call, and per instance (default 10)",
    )
    export.add_argument(
        "--workers", type=count(1, MAX_WORKERS), default=1, help=f"--suite: parallel solver processes, at most {MAX_WORKERS}"
    )
    export.add_argument(
        "--epsilon",
        type=positive_number,
        default=DEFAULT_EPSILON,
        help=f"mps/lp: the margin to reach class 1, f ≥ t + ε (default {DEFAULT_EPSILON:g})",
    )
    export.set_defaults(handler=_export)


def _export(args: argparse.Namespace) -> int:

    from cardinal.verify.export import FORMATS, SUITE_FORMATS, ExportSettings, export_inputs, export_suite

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
            from cardinal.solvers.base import get_solver

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
        asked = ExportSettings(args.format, args.at_most, features, args.epsilon)
        entries = export_inputs(net, X, _kinds(args), settings, Path(args.out), asked, Path(args.network).name, rows)
    counts = Counter(entry.format for entry in entries)
    listed = ", ".join(f"{count} {fmt}" for fmt, count in sorted(counts.items())) or "no file"
    print(f"cardinal export: {listed} in {args.out}/ (index: {args.out}/index.csv)", file=sys.stderr)
    conflicts = sum("solver_disagreement" in entry.evidence for entry in entries)
    if conflicts:
        print(f"!!! {conflicts} instance(s) of records with conflicting exact evidence: see the summary", file=sys.stderr)
    return 1 if conflicts else 0


def _export_layout(args: argparse.Namespace) -> int:
    """`export --layout vnncomp`: one network's benchmark folder (`verify.vnncomp`)."""
    from cardinal.verify.vnncomp import export_layout, refuse_nonempty

    if args.network is None or args.inputs is None:
        raise InputError("--layout vnncomp: give a network and --inputs")
    for flag, value in (("--format", args.format), ("--set", args.set), ("--at-most", args.at_most), ("--solvers", args.solvers)):
        if value is not None:
            raise InputError(f"{flag} is not for --layout vnncomp (which writes VNN-LIB and asks its own questions)")
    refuse_nonempty(Path(args.out))
    net, settings, X, rows = _load_problem(args)
    instances = export_layout(net, X, _kinds(args), settings, Path(args.out), args.time_limit, Path(args.network).name, rows)
    sat = sum(instance.answer == "sat" for instance in instances)
    print(f"cardinal export: {len(instances)} instances ({sat} sat) in {args.out}/ (see {args.out}/README.md)", file=sys.stderr)
    return 0


def _export_xbench(args: argparse.Namespace) -> int:
    """`export --suite xbench`: the quick and classifiers suites' questions in VNN-COMP's layout (the
    published set's `suites` family; `python -m bench.xbench build` builds the whole set)."""
    from cardinal.verify.vnncomp import export_xbench, refuse_nonempty

    if args.network is not None or args.inputs is not None:
        raise InputError("give either --suite or a network with --inputs, not both")
    for flag, value in (("--format", args.format), ("--set", args.set), ("--at-most", args.at_most), ("--radius", args.radius)):
        if value is not None:
            raise InputError(f"{flag} is not for --suite xbench (which asks its own questions in VNN-COMP's layout)")
    refuse_nonempty(Path(args.out))
    instances = export_xbench(Path(args.out), args.time_limit, lambda name: print(f"cardinal export: {name}", file=sys.stderr))
    sat = sum(instance.answer == "sat" for instance in instances)
    print(f"cardinal export: {len(instances)} instances ({sat} sat) in {args.out}/ (see {args.out}/README.md); the suites "
          "only: `python -m bench.xbench build` builds the whole published set", file=sys.stderr)  # fmt: skip
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

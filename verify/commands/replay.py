"""`cardinal replay`: re-verify a case file in exact arithmetic (exit 0: holds, 1: does not). Its flags
(`_add_replay`) and its handler.
"""

from __future__ import annotations

import argparse


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


def _replay(args: argparse.Namespace) -> int:
    from cardinal.verify.cases import Case, replay

    case = Case.load(args.case)
    report = replay(case)
    for check in report.checks:
        print(f"ok: {check}")
    if report.holds:
        print(f"{args.case}: the case holds")
        return 0
    print(f"{args.case}: the case does NOT hold: {report.reason}")
    return 1

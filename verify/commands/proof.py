"""`cardinal proof`: check certificates (cardinal.proof/1) with the independent checker. Its flags (`_add_proof`)
and its handler.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from pathlib import Path

from cardinal.errors import InputError
from cardinal.validate import seconds

from .common import _network_file_arguments

CHECK_SECONDS = 300.0  # `proof check --time-limit`'s default, per certificate


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
    _network_file_arguments(proof, "a torch state_dict")
    proof.add_argument(
        "--records",
        metavar="RECORDS",
        help="the JSON lines written with the certificates (certify/check --out, crosscheck's records.jsonl, "
        "Explanation.to_dict()): each FILE must be the certificate its records name (its SHA-256) and state their problem, "
        "claim and kind, and each record is checked whole: its prediction, minimum (replayed exactly: a CXp by its "
        "witness, an AXp by interval bisection), minimum_lower, verdict, none_exists, threshold and gap must be what the "
        "certificate's claim and the replay support (the first field that is not is named)",
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


def _exists(path: str) -> None:
    """InputError naming `path` when no file or link is there, before the records are read: a
    pattern such as `DIR/*.proof.json` that matched nothing reaches us unexpanded from the shell,
    and the records file is not what is wrong then."""
    if not os.path.lexists(path):
        pattern = re.search(r"[*?[]", path) is not None
        unexpanded = " (a pattern that matched no file: the shell passed it on as it was written)" if pattern else ""
        raise InputError(f"no such certificate file: {path}{unexpanded}")


def _proof(args: argparse.Namespace) -> int:
    from cardinal.verify.proofs import against_records, check_file, records_by_file

    for path in args.files:
        _exists(path)
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
            mismatch = against_records(checked, named, args.time_limit, path)
            message = message if mismatch is None else mismatch
        if report.accepted and message == report.message:
            print(f"{path}: {message} ({report.leaves} leaves, {report.evaluations} exact evaluations, {seconds:.2f} s)")
            for where, _, _ in named or ():
                print(f"  record: {where}, certificate sha256 {checked.sha256}")
            for line in report.statement:
                print(f"  {line}")
        else:
            rejected += 1
            print(f"{path}: REJECTED: {message}")
    return 1 if rejected else 0

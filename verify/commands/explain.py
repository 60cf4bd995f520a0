"""`cardinal explain`: explanations of a network: greedy (sign-monotone networks) or sequential deletion (any
network) (JSON lines). Its flags (`_add_explain`) and its handler.
"""

from __future__ import annotations

import argparse

from cardinal.defaults import DEFAULT_TIME_LIMIT
from cardinal.validate import output_file, seconds

from .common import (
    METHOD_CHOICES,
    _emit,
    _kinds,
    _load_problem,
    _picture_argument,
    _picture_folder,
    _traversal_argument,
    _write_picture,
)


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
        'necessarily a minimum one. Its lines add "queries" (exact questions asked) and "traversal" (--traversal); '
        "a question no engine decides "
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
        "--time-limit",
        type=seconds,
        default=DEFAULT_TIME_LIMIT,
        help=f"deletion: seconds per exact question (default {DEFAULT_TIME_LIMIT:g}); certify and cardinal.explain "
        "with prove take it as each input's budget",
    )
    _traversal_argument(explain)
    _picture_argument(explain)
    explain.set_defaults(handler=_explain)


def _explain(args: argparse.Namespace) -> int:
    from cardinal.verify.explaining import ExplainOptions, explain_lines

    if args.out is not None:
        output_file(args.out, "--out")
    net, settings, X, rows = _load_problem(args)
    pictures = _picture_folder(args, net)
    options = ExplainOptions(args.method, args.traversal, args.time_limit, args.device, not args.no_verify)
    lines = explain_lines(net, settings, X, rows, _kinds(args), options)
    if pictures is not None:
        from cardinal.verify.picture import title_of

        where = {row: i for i, row in enumerate(rows)}
        for line in lines:
            title = title_of(line["kind"], line["prediction"], line["features"], line["exists"] is False,
                             method=line["method"], class_names=net.metadata.class_names)
            _write_picture(pictures, net, line["row"], line["kind"], X[where[line["row"]]], line["features"],
                           line.get("witness"), title)
    _emit(lines, args.out)
    return 0

"""The `cardinal` command. Each subcommand parses its flags here and calls one library entry.

Bad input ends with a one-line message on stderr and exit code 2; output files are written whole
or not at all.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from verify.errors import InputError

KIND_CHOICES = ("contrastive", "abductive", "both")


def _number_list(text: str) -> float | list[float]:
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number or a comma-separated list of numbers") from None
    return values[0] if len(values) == 1 else values


def _problem_flags() -> argparse.ArgumentParser:
    """Flags shared by explain and certify: network, inputs, kind, threshold, domain."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("network", help="network file (JSON, format cardinal.network/1)")
    parent.add_argument("--inputs", required=True, help="CSV of inputs, one per row (a header row is allowed)")
    parent.add_argument("--kind", choices=KIND_CHOICES, default="both", help="explanation kind (default: both)")
    parent.add_argument("--threshold", type=float, default=0.0, help="prediction is 1 iff f(x) > T (default 0)")
    parent.add_argument("--lower", type=_number_list, help="domain lower bound: a scalar or n comma-separated values (default 0)")
    parent.add_argument("--upper", type=_number_list, help="domain upper bound: a scalar or n comma-separated values (default 1)")
    parent.add_argument("--domain", help='domain file {"lower": [...], "upper": [...]} (instead of --lower/--upper)')
    parent.add_argument("--binary", action="store_true", help="features take only their two bound values (Boolean cube)")
    parent.add_argument("--out", help="write JSON lines here instead of stdout (written whole, or not at all)")
    return parent


def _load_problem(args: argparse.Namespace):
    """Network, domain and checked inputs [B, n] from the shared flags."""
    from verify.domain import Domain
    from verify.io import read_inputs, read_json
    from verify.network import Network

    net = Network.load(args.network)
    if args.domain is not None:
        if args.lower is not None or args.upper is not None:
            raise InputError("give either --domain or --lower/--upper, not both")
        domain = Domain.from_json(read_json(args.domain, "domain file"), source=args.domain)
        domain = Domain(domain.lower, domain.upper, binary=domain.binary or args.binary)
        if domain.n != net.n_inputs:
            raise InputError(f"{args.domain}: domain has {domain.n} features, the network has {net.n_inputs} inputs")
    else:
        lower = 0.0 if args.lower is None else args.lower
        upper = 1.0 if args.upper is None else args.upper
        domain = Domain.broadcast(lower, upper, net.n_inputs, binary=args.binary)
    X = domain.check(read_inputs(args.inputs, net.n_inputs), source=args.inputs)
    return net, domain, X


def _kinds(args: argparse.Namespace) -> tuple[str, ...]:
    return ("contrastive", "abductive") if args.kind == "both" else (args.kind,)


def _emit(lines: list[dict[str, Any]], out: str | None) -> None:
    from verify.io import write_atomic

    text = "".join(json.dumps(line) + "\n" for line in lines)
    if out is None:
        sys.stdout.write(text)
    else:
        write_atomic(out, text)


# ---------------------------------------------------------------------------- explain
def _explain(args: argparse.Namespace) -> int:
    from verify.greedy import explain

    net, domain, X = _load_problem(args)
    results = [
        explain(net, X, kind=kind, domain=domain, threshold=args.threshold, device=args.device, verify=not args.no_verify)
        for kind in _kinds(args)
    ]
    lines = []
    for row in range(len(X)):
        for result in results:
            features = result.features(row)
            line = {
                "row": row,
                "kind": result.kind,
                "prediction": int(result.predictions[row]),
                "output": float(result.outputs[row]),
                "exists": features is not None,
                "features": None if features is None else list(features),
                "size": None if features is None else len(features),
            }
            if result.checks is not None:
                line["check"] = result.checks[row]
            lines.append(line)
    _emit(lines, args.out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cardinal",
        description="Cardinality-minimal explanations of neural-network predictions, greedy and certified.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    problem = _problem_flags()

    explain = commands.add_parser(
        "explain",
        parents=[problem],
        help="greedy explanations of a monotone network (JSON lines)",
        description="Greedy contrastive/abductive explanations, one JSON line per input and kind: "
        '{"row", "kind", "prediction", "output", "exists", "features", "size", "check"}.',
    )
    explain.add_argument("--device", default="auto", help="auto (CUDA when present), cpu or cuda")
    explain.add_argument(
        "--no-verify", action="store_true", help="skip the exact re-check of each answer (faster, float decisions only)"
    )
    explain.set_defaults(handler=_explain)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except InputError as error:
        print(f"cardinal {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"cardinal {args.command}: interrupted", file=sys.stderr)
        return 130


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()

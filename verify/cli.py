"""The `cardinal` command: `build_parser` gathers each subcommand's flags from its module in
`cardinal.verify.commands` (one module per command: its flags `_add_NAME`, its handler, its own
helpers; what several share in `commands.common`), and `main` runs the chosen handler.

Bad input, and a backend or library asked for that is not installed, end with a one-line message
on stderr and exit code 2; output files are written whole or not at all.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from cardinal.verify.commands.certify import _add_certify
from cardinal.verify.commands.check import _add_check
from cardinal.verify.commands.common import UsageError, _Parser, _problem_flags
from cardinal.verify.commands.convert import _add_convert
from cardinal.verify.commands.crosscheck import _add_crosscheck
from cardinal.verify.commands.data import _add_data
from cardinal.verify.commands.explain import _add_explain
from cardinal.verify.commands.export import _add_export
from cardinal.verify.commands.hunt import _add_hunt
from cardinal.verify.commands.info import _add_info
from cardinal.verify.commands.proof import _add_proof
from cardinal.verify.commands.replay import _add_replay
from cardinal.verify.commands.train import _add_train
from cardinal.verify.executors import sigterm_interrupts

from cardinal.errors import BackendUnavailable, InputError, interrupted_code


class _Version(argparse.Action):
    """`--version`: the installed package's version (as `cardinal.__version__`), looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> NoReturn:
        from cardinal.version import package_version

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
        _add_export, _add_hunt, _add_train, _add_replay, _add_proof, _add_data,
    ):  # fmt: skip
        add(commands, problem)  # one function per subcommand (cardinal.verify.commands), in the order of `cardinal --help`
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as error:
        return _fail(error.prog, str(error))
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        with sigterm_interrupts():  # SIGTERM takes Ctrl-C's orderly way out (exit code 143; 130 after Ctrl-C)
            return handler(args)
    except (InputError, BackendUnavailable) as error:  # a missing library the user asked for: one line too
        return _fail(f"cardinal {args.command}", str(error))
    except KeyboardInterrupt as error:
        print(f"cardinal {args.command}: interrupted", file=sys.stderr)
        return interrupted_code(error)


def _fail(prog: str, message: str) -> int:
    """Print the one-line message of a user's error (line breaks in names escaped); exit code 2."""
    print(f"{prog}: error: {message}".replace("\r", "\\r").replace("\n", "\\n"), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())

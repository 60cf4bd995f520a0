"""Benchmarks: scripts that measure and write their tables to bench/results/ (run as `python -m bench.NAME`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from cardinal.errors import InputError
from cardinal.validate import output_file


class Parser(argparse.ArgumentParser):
    """The benchmarks' argparse: an error, from argparse or from a check of the values, is one line
    `PROG: error: MESSAGE` on stderr and exit code 2, with no usage block before it."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see {self.prog} --help)".replace("\n", "\\n"), file=sys.stderr)
        raise SystemExit(2)


def bench_parser(file: str, doc: str) -> Parser:
    """The parser of bench/NAME.py (`file`: its `__file__`, `doc`: its docstring, whose first line
    describes it): `python -m bench.NAME`. `parse` adds --out."""
    return Parser(prog=f"python -m bench.{Path(file).stem}", description=doc.splitlines()[0])


def parse(parser: Parser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Add --out (the markdown table; default bench-results/NAME.md), parse `argv`, and refuse an
    --out that cannot be written (a one-line error, exit 2) before any work."""
    name = parser.prog.rsplit(".", 1)[-1]  # `python -m bench.NAME`
    parser.add_argument("--out", default=f"bench-results/{name}.md", help="markdown table to write (default: %(default)s)")
    args = parser.parse_args(argv)
    check_out(parser, args.out)
    return args


def check_out(parser: argparse.ArgumentParser, out: str) -> None:
    """Refuse an --out file that cannot be written (the parser's one-line error, exit 2), before any work."""
    try:
        output_file(out, "--out")
    except InputError as error:
        parser.error(str(error))

"""Benchmarks: scripts that measure and write their tables to bench/results/ (run as `python -m bench.NAME`)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    """The benchmarks' argparse: an error, from argparse or from a check of the values, is one line
    `PROG: error: MESSAGE` on stderr and exit code 2, with no usage block before it."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see {self.prog} --help)".replace("\n", "\\n"), file=sys.stderr)
        raise SystemExit(2)

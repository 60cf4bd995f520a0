"""`new_highs`: a fresh HiGHS instance, the first of a process made with stdout sent to /dev/null —
HiGHS prints a banner to stdout when the first `Highs` object of a process is made, and the JSON
lines of `cardinal certify` must stay clean. Its own module so that every user of HiGHS (the
backends, the exact MILP, the LP certificates of `solvers.proof_lp`) can import it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import highspy

_banner_shown = False


@contextmanager
def _quiet_stdout() -> Iterator[None]:
    """Send file descriptor 1 to /dev/null for the duration (C-level prints included)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as sink:
            os.dup2(sink.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def new_highs() -> highspy.Highs:
    """A fresh `Highs` (the first of a process made with stdout sent to /dev/null: module docstring)."""
    global _banner_shown
    if _banner_shown:
        return highspy.Highs()
    with _quiet_stdout():
        highs = highspy.Highs()
    _banner_shown = True
    return highs

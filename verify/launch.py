"""The `cardinal` command's entry point, whose first lines run before anything heavy loads.

Importing the command (`cardinal.verify.cli`) loads torch and the core, which takes seconds; a
SIGTERM or Ctrl-C in that time used to end the command by the default signal or with a
KeyboardInterrupt traceback. `entry` installs `errors.interrupt` for SIGTERM and SIGINT from its
first line on (the package `cardinal` imports nothing heavy, PEP 562; a SIGINT that the caller
ignores, as a shell does for a background job, stays ignored), and turns either into the command's
orderly exit: `cardinal COMMAND: interrupted`, exit code 130 after SIGINT and 143 after SIGTERM
(`errors.interrupted_code`), as `cli.main` does once it runs its handler. Once the command is on its
way out, a further signal changes nothing: no second message, no traceback.
"""

from __future__ import annotations

import signal
import sys

from cardinal.errors import interrupt, interrupted_code


def entry() -> None:
    """Run `cardinal` (`cli.main` on sys.argv) and exit with its code; 130 or 143 when interrupted."""
    try:
        # inside the try: a signal that lands while signal.signal still runs (its handler is in place
        # from the system call on) is an interruption too, not a traceback
        signal.signal(signal.SIGTERM, interrupt)
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, interrupt)
        from .cli import main

        code = main()
    except KeyboardInterrupt as error:
        _calm()
        command = " ".join(["cardinal", *sys.argv[1:2]]) if sys.argv[1:2] and not sys.argv[1].startswith("-") else "cardinal"
        print(f"{command}: interrupted", file=sys.stderr)
        code = interrupted_code(error)
    _calm()
    sys.exit(code)


def _calm() -> None:
    """From here on, SIGINT and SIGTERM (and a signal still pending from an interrupted import,
    `cardinal.lazy`) do nothing: the command is ending anyway."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _ignore)


def _ignore(signum: int, frame: object) -> None:
    """A handler that does nothing (not SIG_IGN: a pending signal must find a Python handler)."""

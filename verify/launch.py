"""The `cardinal` command's entry point, whose first lines run before anything heavy loads.

Importing the command (`cardinal.verify.cli`) loads torch and the core, which takes seconds; a
SIGTERM or Ctrl-C in that time used to end the command by the default signal or with a
KeyboardInterrupt traceback. `entry` makes SIGTERM raise KeyboardInterrupt as Ctrl-C does, from its
first line on (the package `cardinal` imports nothing heavy, PEP 562), and turns either into the
command's orderly exit: `cardinal COMMAND: interrupted`, exit code 130, as `cli.main` does once it
runs its handler.
"""

from __future__ import annotations

import signal
import sys

from cardinal.errors import interrupt


def entry() -> None:
    """Run `cardinal` (`cli.main` on sys.argv) and exit with its code; 130 when interrupted."""
    try:
        # inside the try: a signal that lands while signal.signal still runs (its handler is in place
        # from the system call on) is an interruption too, not a traceback
        signal.signal(signal.SIGTERM, interrupt)
        from .cli import main

        code = main()
    except KeyboardInterrupt:
        command = " ".join(["cardinal", *sys.argv[1:2]]) if sys.argv[1:2] and not sys.argv[1].startswith("-") else "cardinal"
        print(f"{command}: interrupted", file=sys.stderr)
        code = 130
    sys.exit(code)


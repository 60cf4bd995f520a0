"""The exception for bad input, and the ones for questions exact arithmetic cannot decide.

`InputError` subclasses `ValueError`, so library callers may catch either; the CLI turns it
into a one-line message and exit code 2. `Undecided` (and `UndecidedPrediction`) is not bad
input: the input is valid, but a smooth network's enclosures cannot decide what was asked (f(x)
may equal the threshold exactly, as sigmoid(a) + sigmoid(−a) = 1 does); the commands record such
a row as `undecided` and go on with the others.

`interrupt` is the command's handler of SIGINT and SIGTERM: it raises `Interrupted`, a
KeyboardInterrupt that names its signal, so that both take Ctrl-C's orderly way out and the
command exits with `interrupted_code` (128 + the signal: 130 for SIGINT, 143 for SIGTERM);
`interrupted_import` tells an import that Ctrl-C interrupted from a library that is missing.
"""

import signal


class InputError(ValueError):
    """Bad user input: the message names the file, row, layer or feature at fault."""


class Undecided(ArithmeticError):
    """An answer needs a comparison that exact arithmetic cannot decide: an enclosure of f that
    contains the threshold, or two scores whose order no exact argument settles."""


class UndecidedPrediction(Undecided):
    """p(x) is undecided: the enclosure of f(x) contains the threshold (smooth networks only)."""


def interrupted_import(error: ImportError) -> None:
    """Raise KeyboardInterrupt if Ctrl-C (or SIGTERM, which the command makes one) interrupted the
    import that failed: a C extension whose initialization it interrupts raises
    `ImportError('initialization failed')` caused by it (highspy does), which is no missing library."""
    if isinstance(error.__cause__, KeyboardInterrupt) or isinstance(error.__context__, KeyboardInterrupt):
        raise KeyboardInterrupt from None


class Interrupted(KeyboardInterrupt):
    """Ctrl-C's way out, taken on the signal `signum` (SIGINT or SIGTERM)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def interrupt(signum: int, frame: object) -> None:
    """A signal handler (SIGINT's and SIGTERM's, in the command) that takes Ctrl-C's way out:
    `Interrupted(signum)`, a KeyboardInterrupt."""
    raise Interrupted(signum)


def interrupted_code(error: BaseException | None = None) -> int:
    """The exit code of a command that `error` (a KeyboardInterrupt) stopped: 128 + its signal,
    130 (SIGINT's) for a plain KeyboardInterrupt or None."""
    return 128 + getattr(error, "signum", signal.SIGINT)

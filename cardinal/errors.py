"""cardinal's exceptions: one hierarchy under `CardinalError`, and the SIGTERM handler.

    CardinalError
    ├── InputError (also a ValueError)       bad user input: the CLI prints one line, exit code 2
    ├── BackendUnavailable (also an ImportError)  a backend's or a feature's library is not installed
    ├── Undecided (also an ArithmeticError)  exact arithmetic cannot decide what was asked
    │   └── UndecidedPrediction              p(x) itself is undecided
    ├── Stopped                              a search or a tool's query ended without an answer
    │   └── OutOfTime                        ... because its deadline passed
    └── Unproved                             an answer was found but failed its exact check
    (and each module's own exceptions, derived from one of these)

`InputError` subclasses `ValueError`, so library callers may catch either; the CLI turns it
into a one-line message and exit code 2. `BackendUnavailable` is no bad input, but the CLI answers
it the same way (the user named a backend, or a feature, whose library is missing); it is an
`ImportError` too, so code that treats a missing library as such still does. `Undecided` (and
`UndecidedPrediction`) is not bad input either: the input is valid, but a smooth network's
enclosures cannot decide what was asked (f(x) may equal the threshold exactly, as sigmoid(a) +
sigmoid(−a) = 1 does); the commands record such a row as `undecided` and go on with the others.

`Stopped` and `Unproved` are what the engines raise inside themselves: each engine defines its own
subclass (`solvers.hitting.OracleTimeout`, `solvers.split.OutOfNodes`, `solvers.proof_stop.Stopped`,
...) and catches that one, so a handler never takes another engine's stop for its own.

The independent checker (`cardinal.checker`) imports nothing of cardinal and keeps its own
`CertificateError`. `solvers.proof.CheckTime` is a BaseException on purpose (no handler of the
checker's may take a time limit for a verdict), so it stands outside this hierarchy.

`interrupt` is the command's handler of SIGINT and SIGTERM: it raises `Interrupted`, a
KeyboardInterrupt that names its signal, so that both take Ctrl-C's orderly way out and the
command exits with `interrupted_code` (128 + the signal: 130 for SIGINT, 143 for SIGTERM);
`interrupted_import` tells an import that Ctrl-C interrupted from a library that is missing.
"""

import signal


class CardinalError(Exception):
    """The root of cardinal's exceptions (all but the independent checker's)."""


class InputError(CardinalError, ValueError):
    """Bad user input: the message names the file, row, layer or feature at fault."""


class BackendUnavailable(CardinalError, ImportError):
    """A backend's or a feature's library is not installed here: the message names it and the
    `pip install` that adds it."""


class Undecided(CardinalError, ArithmeticError):
    """An answer needs a comparison that exact arithmetic cannot decide: an enclosure of f that
    contains the threshold, or two scores whose order no exact argument settles."""


class UndecidedPrediction(Undecided):
    """p(x) is undecided: the enclosure of f(x) contains the threshold (smooth networks only)."""


class Stopped(CardinalError):
    """A search, or a tool's query, ended without an answer: at its node or size limit, at its
    deadline, or because the tool gave none that cardinal can use (the reason in its message)."""


class OutOfTime(Stopped):
    """A search reached its deadline without an answer."""


class Unproved(CardinalError):
    """No verdict although no limit was reached: a candidate answer failed its exact check, or
    no exact argument settled the question."""


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

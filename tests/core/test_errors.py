"""One exception hierarchy: every exception class that cardinal, cardinal.solvers and
cardinal.verify define derives from `CardinalError` (the independent checker keeps its own), and
the hierarchy's public names are exported by `cardinal`."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import cardinal
from cardinal import errors

# Outside the hierarchy on purpose, BaseExceptions both: no `except Exception` of the checker's
# can take a check's time limit for a verdict (see its docstring), and a signal (`Interrupted`,
# a KeyboardInterrupt) passes every `except Exception` on its way out. The VNN-COMP tool keeper's
# file runs as a script that imports the standard library alone (`solvers.toolkeeper`).
_OUTSIDE = {
    "cardinal.solvers.proof.CheckTime",
    "cardinal.errors.Interrupted",
    "cardinal.solvers.toolkeeper.KeeperError",
}


def _modules() -> list[str]:
    """Every module of cardinal but the independent checker (the backends whose library is
    missing here are left out: they cannot be imported)."""
    names = []
    for package in ("cardinal", "cardinal.solvers", "cardinal.verify"):  # three folders (pyproject's package-dir)
        path = importlib.import_module(package).__path__
        names.append(package)
        for info in pkgutil.walk_packages(path, f"{package}."):
            if info.name != "cardinal.checker" and not info.name.startswith("cardinal.checker."):
                names.append(info.name)
    return names


def _exception_classes() -> list[type[BaseException]]:
    found = []
    for name in _modules():
        try:
            module = importlib.import_module(name)
        except ImportError:  # a backend whose library is not installed here
            continue
        found.extend(
            value
            for value in vars(module).values()
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name
        )
    return found


def test_the_walk_reaches_all_three_layers() -> None:
    """The walk below is no empty loop: it sees the core's, the engines' and the application's classes."""
    names = {f"{cls.__module__}.{cls.__qualname__}" for cls in _exception_classes()}
    assert {
        "cardinal.errors.InputError",
        "cardinal.solvers.hitting.OracleTimeout",
        "cardinal.verify.commands.common.UsageError",
    } <= names
    assert _OUTSIDE <= names


def test_every_exception_class_derives_from_the_root() -> None:
    strays = [
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in _exception_classes()
        if not issubclass(cls, errors.CardinalError) and f"{cls.__module__}.{cls.__qualname__}" not in _OUTSIDE
    ]
    assert strays == [], f"derive these from cardinal.errors.CardinalError (or a subclass): {strays}"


def test_the_checker_keeps_its_own() -> None:
    """The independent checker imports nothing of cardinal: its error is no CardinalError."""
    from cardinal.checker import CertificateError

    assert not issubclass(CertificateError, errors.CardinalError)


@pytest.mark.parametrize(
    "name", ["CardinalError", "InputError", "Undecided", "UndecidedPrediction", "Stopped", "BackendUnavailable"]
)
def test_exported(name: str) -> None:
    assert name in cardinal.__all__
    assert getattr(cardinal, name) is getattr(errors, name)
    assert issubclass(getattr(cardinal, name), errors.CardinalError)


def test_builtin_bases_kept() -> None:
    """Callers that catch the builtin bases still catch cardinal's exceptions."""
    assert issubclass(errors.InputError, ValueError)
    assert issubclass(errors.Undecided, ArithmeticError)
    assert issubclass(errors.UndecidedPrediction, errors.Undecided)
    assert issubclass(errors.BackendUnavailable, ImportError)
    assert not issubclass(errors.BackendUnavailable, errors.InputError)
    assert issubclass(errors.OutOfTime, errors.Stopped)


def test_the_engines_stops_are_stops() -> None:
    """Each engine's own stop is a `Stopped` (or `Unproved`), and distinct from the others', so
    one engine's handler never takes another's."""
    from cardinal.solvers import enumerate, hitting, proof_stop, split

    stops = [hitting.OracleTimeout, split.OutOfNodes, proof_stop.Stopped, enumerate._OutOfTime]
    assert all(issubclass(stop, errors.Stopped) for stop in stops)
    assert issubclass(hitting.OracleTimeout, errors.OutOfTime) and not issubclass(split.OutOfNodes, errors.OutOfTime)
    assert not any(issubclass(a, b) for a in stops for b in stops if a is not b)

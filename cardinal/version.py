"""The installed package's version, read from its metadata: its one source is pyproject.toml
(`cardinal.__version__`, `cardinal --version`)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def package_version() -> str:
    """cardinal's version as installed, or `0+unknown` for a source tree that was never installed."""
    try:
        return version("cardinal")
    except PackageNotFoundError:
        return "0+unknown"

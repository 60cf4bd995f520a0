"""Module docstrings state contracts, shapes and reasons, not lab notes: a measurement (seconds,
a percentage, "3× faster", "Measured on ...") belongs in bench/results and docs/results.md, where
it says when and on what it was taken, not in the code it goes stale beside."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("cardinal", "solvers", "verify")  # the package's three folders (pyproject's package-dir)

# A number with a unit of time or a ratio ("0.65 s", "10–30 ms", "12 %", "20×", "3 times fewer";
# not a shape, "32 × 32"),
# or a report of a run ("Measured on", "measured:", "x faster").
MEASUREMENT = re.compile(
    r"\d(?:[\d.,]*\d)?(?:\s*[–-]\s*\d(?:[\d.,]*\d)?)?\s*(?:(?:ms|µs|s|secs?|seconds?|minutes?|min|%)(?![\w^])|×(?!\s*\d))"
    r"|\d\s*(?:times|x)\s+(?:faster|slower|fewer|more)\b"
    r"|\bmeasured\s*(?:on|at|:)"
    r"|\bload average",
    re.IGNORECASE,
)


def _modules() -> list[Path]:
    return sorted(path for folder in FOLDERS for path in (ROOT / folder).rglob("*.py") if "checker" not in path.parts)


def _measurements(text: str) -> list[str]:
    return [match.group(0) for match in MEASUREMENT.finditer(text)]


@pytest.mark.parametrize(
    "text", ["took 0.65 s", "10–30 ms of a call", "+12 %", "20× slower", "3 times fewer nodes", "Measured on the digits MLP"]
)
def test_the_pattern_finds_measurements(text: str) -> None:
    assert _measurements(text)


@pytest.mark.parametrize(
    "text", ["256 bits", "2^53", "a 28-feature 32 × 32 network", "its seconds measured by the caller", "K ≥ 2 classes"]
)
def test_the_pattern_leaves_contracts(text: str) -> None:
    assert _measurements(text) == []


def test_no_module_docstring_carries_a_measurement() -> None:
    found = {}
    for path in _modules():
        doc = ast.get_docstring(ast.parse(path.read_text()), clean=False)
        if doc and _measurements(doc):
            found[str(path.relative_to(ROOT))] = _measurements(doc)
    assert found == {}, f"move these measurements to docs/results.md (or bench/results): {found}"

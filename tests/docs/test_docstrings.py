"""Docstrings (of modules, functions and classes) state contracts, shapes and reasons, not lab
notes: a measurement (seconds, a percentage, "3× faster", "Measured on ...") belongs in
bench/results and docs/results.md, where it says when and on what it was taken, not in the code
it goes stale beside."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("cardinal", "solvers", "verify")  # the package's three folders (pyproject's package-dir)

# A number with a unit of time or a ratio ("0.65 s", "10–30 ms", "12 %", "20×", "3 times fewer";
# not a shape, "32 × 32", nor a type's width, "float64s"),
# or a report of a run ("Measured on", "measured:", "x faster").
MEASUREMENT = re.compile(
    r"(?<![\w.])\d(?:[\d.,]*\d)?(?:\s*[–-]\s*\d(?:[\d.,]*\d)?)?\s*(?:(?:ms|µs|s|secs?|seconds?|minutes?|min|%)(?![\w^])|×(?!\s*\d))"
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
    "text", ["256 bits", "2^53", "a 28-feature 32 × 32 network", "its seconds measured by the caller", "K ≥ 2 classes", "float64s"]
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


# Docstrings whose numbers are their own contract (what the function returns or shows), not a
# measurement: (file, qualified name) → why.
CONTRACTS = {
    ("solvers/guard.py", "allowed_overrun"): "the overrun it returns",
    ("verify/commands/common.py", "_Progress"): "when the progress shows",
    ("verify/report.py", "share"): "examples of the strings it returns",
}


def _definitions(path: Path) -> list[tuple[str, str]]:
    """(qualified name, docstring) of every function and class of a module, nested ones included."""
    found = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                doc = ast.get_docstring(child, clean=False)
                if doc:
                    found.append((name, doc))
                walk(child, f"{name}.")
            else:
                walk(child, prefix)

    walk(ast.parse(path.read_text()), "")
    return found


def test_no_function_or_class_docstring_carries_a_measurement() -> None:
    found = {}
    for path in _modules():
        where = str(path.relative_to(ROOT))
        for name, doc in _definitions(path):
            if (where, name) not in CONTRACTS and _measurements(doc):
                found[f"{where}:{name}"] = _measurements(doc)
    assert found == {}, f"move these measurements to docs/results.md (or bench/results): {found}"


def test_the_walk_finds_nested_definitions_and_the_contracts_still_stand(tmp_path: Path) -> None:
    """Nested functions and methods are walked; each exempted docstring still exists and still
    holds a number the pattern finds (else its entry is stale and must go)."""
    module = tmp_path / "m.py"
    module.write_text('class A:\n    """took 2 s"""\n\n    def f(self):\n        """fine"""\n\n        def g():\n            """3 ms"""\n')
    assert [(name, bool(_measurements(doc))) for name, doc in _definitions(module)] == [
        ("A", True),
        ("A.f", False),
        ("A.f.g", True),
    ]
    for file, name in CONTRACTS:
        docs = dict(_definitions(ROOT / file))
        assert name in docs and _measurements(docs[name]), (file, name)

"""The import contract: one `cardinal` namespace, and layers that only look down.

core         errors, io, activations, chain, loaders, onnx_io, torch_io, network, domain, exact, bounds, problem
engines      the greedy (verify.greedy) and the exact backends (cardinal.solvers.*)
application  certify, cases, campaign, hunt, suites, paper, report, cli, ... (everything else)

A module may import its own layer or a lower one; `cardinal.solvers` imports the core only (and
itself); no two modules import each other, even lazily. The package `__init__` files are façades
that re-export and are exempt. A new module must be placed in `LAYERS` below, or this test
fails: that is where the contract is written down.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"cardinal": ROOT / "cardinal", "cardinal.verify": ROOT / "verify", "cardinal.solvers": ROOT / "solvers"}
CORE, ENGINE, APPLICATION = 0, 1, 2
LAYERS: dict[str, int] = {
    **{
        f"cardinal.verify.{name}": CORE
        for name in (
            "errors",
            "io",
            "validate",
            "rounding",
            "activations",
            "chain",
            "loaders",
            "onnx_io",
            "torch_io",
            "network",
            "domain",
            "exact",
            "bounds",
            "problem",
        )
    },
    "cardinal.verify.greedy": ENGINE,
    **{
        f"cardinal.solvers.{name}": ENGINE
        for name in (
            "base",
            "branch",
            "cuts",
            "encode",
            "enumerate",
            "gurobi",
            "guard",
            "highs",
            "hitting",
            "milp",
            "oracle",
            "smooth",
            "smt",
            "subsets",
        )
    },
    **{
        f"cardinal.verify.{name}": APPLICATION
        for name in (
            "baseline",
            "campaign",
            "executors",
            "cases",
            "certify",
            "check",
            "cli",
            "datasets",
            "generate",
            "hunt",
            "instance",
            "paper",
            "record",
            "report",
            "suites",
            "train",
        )
    },
    "cardinal.testing": APPLICATION,
}
FACADES = set(FOLDERS)


def _modules() -> dict[str, Path]:
    found = {}
    for package, folder in FOLDERS.items():
        for path in sorted(folder.glob("*.py")):
            found[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return found


def _imports(module: str, path: Path) -> set[str]:
    """Every cardinal module that `module` imports, at top level or inside a function."""
    package = module if path.stem == "__init__" else module.rpartition(".")[0]
    known = _modules()
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:
                candidate = f"{prefix}.{alias.name}"
                targets.add(candidate if candidate in known else prefix)
        elif isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
    return {target for target in targets if target in known and target != module}


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(set(_modules()) - FACADES - set(LAYERS))
    assert not unplaced, f"place these modules in LAYERS of tests/test_architecture.py: {unplaced}"


@pytest.mark.parametrize("module", sorted(set(LAYERS) & set(_modules())))
def test_imports_only_look_down(module: str) -> None:
    path = _modules()[module]
    for target in _imports(module, path):
        if target in FACADES:
            pytest.fail(f"{module} imports the façade {target}: import the defining module instead")
        assert LAYERS[target] <= LAYERS[module], f"{module} (layer {LAYERS[module]}) imports {target} (layer {LAYERS[target]})"
        if module.startswith("cardinal.solvers."):
            assert target.startswith("cardinal.solvers.") or LAYERS[target] == CORE, f"{module} imports {target}"


def test_no_import_cycles() -> None:
    graph = {module: _imports(module, path) - FACADES for module, path in _modules().items() if module not in FACADES}
    state: dict[str, int] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                pytest.fail("import cycle: " + " -> ".join([*trail[trail.index(target) :], target]))
            if target not in state:
                visit(target, [*trail, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_the_checker_catches_a_solver_importing_the_application(tmp_path: Path) -> None:
    """The contract can fail: a solver module that imports `certify` is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("from ..verify.certify import certify\n")
    imports = _imports("cardinal.solvers.bad", bad)
    assert imports == {"cardinal.verify.certify"}
    assert LAYERS["cardinal.verify.certify"] > LAYERS["cardinal.solvers.base"]


def test_user_modules_named_verify_and_solvers_do_not_collide(tmp_path: Path) -> None:
    """A user's own verify.py and solvers.py in the working directory shadow nothing of cardinal's."""
    (tmp_path / "solvers.py").write_text("WHO = 'user solvers'\n")
    (tmp_path / "verify.py").write_text("WHO = 'user verify'\n")
    script = (
        "import solvers, verify\n"
        "import cardinal.solvers.base, cardinal.verify.cli\n"
        "from cardinal import Network, explain, solve_minimum\n"
        "print(solvers.WHO, '|', verify.WHO, '|', cardinal.solvers.base.__name__)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "user solvers | user verify | cardinal.solvers.base"

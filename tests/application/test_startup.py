"""Start-up stays cheap (issue 26): `import cardinal` and `cardinal --help` import none of the heavy
libraries, which commands import when they need them. What is asserted is which modules are
loaded, never a time (`bench/startup.py` measures the CPU seconds)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import cardinal

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HEAVY = ("torch", "numpy", "scipy", "pandas", "matplotlib", "sklearn", "mpmath", "gurobipy", "highspy", "z3", "onnx", "ray")


def loaded_after(code: str) -> set[str]:
    """The heavy top-level modules loaded in a fresh interpreter after running `code` (a module
    that `cardinal.lazy.lazy_import` made but nothing has used yet is not loaded)."""
    script = (
        f"import sys\n{code}\nimport json\n"
        "print(json.dumps(sorted({n.split('.')[0] for n, m in sys.modules.items() if type(m).__name__ != '_LazyModule'})))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    return set(json.loads(done.stdout.splitlines()[-1])) & set(HEAVY)


def test_import_cardinal_loads_no_heavy_library() -> None:
    assert loaded_after("import cardinal") == set()


def test_the_help_of_every_command_loads_no_heavy_library() -> None:
    code = "from cardinal.verify.cli import build_parser\nbuild_parser().format_help()"
    assert loaded_after(code) == set()  # not even numpy: the flag checks import it where they use it


def test_a_small_explain_answers_without_torch() -> None:
    """The README's example is answered in exact arithmetic alone (`cardinal.algorithm1`), and a
    network loaded on the way leaves torch unloaded until a float computation needs it."""
    explain = (
        "from cardinal.verify.cli import main\n"
        "main(['explain', 'examples/design.json', '--inputs', 'examples/design_inputs.csv', '--threshold', '0.5', '--kind', 'both'])"
    )
    assert "torch" not in loaded_after(f"import os\nos.chdir({str(EXAMPLES.parent)!r})\n{explain}")
    assert "torch" in loaded_after(f"from cardinal import Network\nNetwork.load({str(EXAMPLES / 'design.json')!r}).forward([[0.5] * 3])")


def test_public_names_are_imported_on_first_use() -> None:
    from cardinal import Network, solve_minimum
    from cardinal.network import Network as defined

    assert Network is defined and callable(solve_minimum)
    assert cardinal.network.Network is Network  # a submodule as an attribute, as before
    assert set(cardinal.__all__) <= set(dir(cardinal))
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        _ = cardinal.not_a_name


def test_version_comes_from_the_package_metadata() -> None:
    assert cardinal.__version__ == version("cardinal")
    done = subprocess.run(
        [sys.executable, "-m", "cardinal.verify.cli", "--version"], capture_output=True, text=True, timeout=300, check=False
    )
    assert (done.returncode, done.stdout) == (0, f"cardinal {version('cardinal')}\n")

"""The documentation site builds with `mkdocs build --strict` (every link, anchor and API
reference resolves), into a temporary folder: nothing is written into the repository."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tree(folder: Path) -> set[Path]:
    return {path.relative_to(folder) for path in folder.rglob("*")}


def test_the_site_builds_strictly_outside_the_repository(tmp_path: Path) -> None:
    site = tmp_path / "site"
    before = _tree(ROOT / "docs")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert _tree(ROOT / "docs") == before and not (ROOT / "site").exists()

    cli = (site / "cli" / "index.html").read_text()  # the reference generated from `cardinal COMMAND --help`
    assert 'id="cardinal-certify"' in cli and "<code>--proof DIR</code>" in cli and "<code>--radius RADIUS</code>" in cli
    results = (site / "results" / "index.html").read_text()  # figures served from bench/results/
    assert 'src="../figures/solvers.png"' in results and (site / "figures" / "solvers.png").is_file()
    assert (site / "figures" / "quick" / "figures" / "gap_distribution.png").is_file()
    api = (site / "api" / "index.html").read_text()  # docstrings of the core and of cardinal.solvers
    assert "A minimum explanation of <code>kind</code>" in api and "Greedy explanations of one kind" in api

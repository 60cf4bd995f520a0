"""The README and docs/ stand alone: every relative link resolves inside the repository, every
#anchor names a heading of its target file, every Python block of the README and the quickstart
runs, and the README stays a front door (at most 300 lines, CI's test command in it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = [ROOT / "README.md", ROOT / "docs" / "quickstart.md", ROOT / "docs" / "tutorial.md"]  # pages whose every Python block the tests run
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PYTHON = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `_` dropped, spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())  # underscores are word characters, kept as GitHub keeps them
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(line.lstrip("#")) for line in path.read_text().splitlines() if line.startswith("#")}


def _links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)  # links inside code blocks are examples
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


def _broken(document: Path, root: Path = ROOT) -> list[str]:
    problems = []
    for target in _links(document):
        file, _, anchor = target.partition("#")
        resolved = (document.parent / file).resolve() if file else document
        if not resolved.is_relative_to(root):
            problems.append(f"{document.name}: link {target} leaves the repository")
        elif not resolved.exists():
            problems.append(f"{document.name}: link {target} points to nothing")
        elif anchor and anchor not in _anchors(resolved):
            problems.append(f"{document.name}: link {target}: no heading #{anchor}")
    return problems


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_links_resolve_inside_the_repository(document: Path) -> None:
    assert _broken(document) == []


def test_the_checker_catches_links_outside_the_repository_or_to_nothing(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    page = tmp_path / "repo" / "page.md"
    (tmp_path / "DESIGN.md").write_text("# Design\n")
    page.write_text("# Page\n[design](../DESIGN.md) [gone](gone.md) [here](#page) [no](#nowhere)\n```\n[x](y)\n```\n")
    assert _links(page) == ["../DESIGN.md", "gone.md", "#page", "#nowhere"]
    assert _broken(page, root=tmp_path / "repo") == [
        "page.md: link ../DESIGN.md leaves the repository",
        "page.md: link gone.md points to nothing",
        "page.md: link #nowhere: no heading #nowhere",
    ]
    assert _slug(" Statuses and verdicts") == "statuses-and-verdicts"
    assert _slug(" Greedy: batched vs the paper's loop (`bench/results/greedy.md`)") == (
        "greedy-batched-vs-the-papers-loop-benchresultsgreedymd"
    )
    assert _slug(" The exact MILP (`bench/results/exact_milp.md`)") == "the-exact-milp-benchresultsexact_milpmd"


@pytest.mark.parametrize("document", RUN, ids=lambda path: path.name)
def test_every_python_block_runs(document: Path, tmp_path: Path) -> None:
    """The page's Python blocks, in order, as one program (later blocks use the names of earlier
    ones) in a fresh folder that sees the repository's examples/ as a user's clone does, so that
    the files they write land there, not in the repository; their asserts state the exact outcomes."""
    blocks = PYTHON.findall(document.read_text())
    assert blocks, f"{document.name} has no Python block"
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(ROOT / "examples")
    script = tmp_path / "blocks.py"
    script.write_text("\n".join(blocks))
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, str(script)], cwd=work, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr


def test_python_blocks_are_found_as_the_site_renders_them() -> None:
    text = "x\n```python\na = 1\n```\n```\nnot python\n```\n```python\nb = a\n```\n"
    assert PYTHON.findall(text) == ["a = 1\n", "b = a\n"]


def test_the_readme_is_a_front_door_with_cis_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    command = ci[ci.index("# README test command:") + 1]
    assert f"    {command}\n" in readme

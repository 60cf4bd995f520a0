"""The README and docs/ stand alone: every relative link resolves inside the repository, and
every #anchor names a heading of its target file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
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

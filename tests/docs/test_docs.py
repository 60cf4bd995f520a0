"""The README and docs/ stand alone: every relative link resolves inside the repository, every
#anchor names a heading of its target file, every Python block of the README, the quickstart and
the tutorial runs, then every command line of their `bash` blocks (each a `cardinal` command, in
the same folder, as a user types it: exit 0, and `proof check` accepts every certificate its
pattern names), and the README stays a front door (at most 300 lines, CI's test command in it)."""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = [ROOT / "README.md", ROOT / "docs" / "quickstart.md", ROOT / "docs" / "tutorial.md"]  # pages whose every Python block the tests run
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PYTHON = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
SHELL = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)


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


def _commands(text: str) -> list[str]:
    """The command lines of a page's `bash` blocks, in order (blank lines and comments skipped)."""
    lines = [line.strip() for block in SHELL.findall(text) for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def _run_command(line: str, work: Path, env: dict[str, str]) -> None:
    """One `cardinal` line of a page, run by bash in `work` (its patterns expand as a user's shell
    expands them) with this interpreter's `cardinal` first on PATH: it must exit 0, and a `proof
    check` must name at least one certificate and accept each one its arguments expand to."""
    assert line.startswith("cardinal "), f"a page's command line that is not a cardinal command: {line}"
    done = subprocess.run(["bash", "-c", line], cwd=work, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    if line.startswith("cardinal proof check "):
        files = [name for word in shlex.split(line) if word.endswith(".proof.json") for name in sorted(glob.glob(word, root_dir=work))]
        assert files, f"{line}: its pattern names no certificate"
        for name in files:
            assert f"{name}: accepted: " in done.stdout, f"{line}: {name} not accepted\n{done.stdout[-3000:]}"
        assert "REJECTED" not in done.stdout


@pytest.mark.parametrize("document", RUN, ids=lambda path: path.name)
def test_every_python_block_runs(document: Path, tmp_path: Path) -> None:
    """The page's Python blocks, in order, as one program (later blocks use the names of earlier
    ones) in a fresh folder that sees the repository's examples/ as a user's clone does, so that
    the files they write land there, not in the repository; their asserts state the exact outcomes.
    Then its command lines (`_commands`), in the same folder, on the files the blocks wrote."""
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
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # the venv's `cardinal`
    for line in _commands(document.read_text()):
        _run_command(line, work, env)


def test_a_failing_command_line_fails_the_page(tmp_path: Path) -> None:
    """A page's command that exits non-zero fails its test, and one not of cardinal is refused."""
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    with pytest.raises(AssertionError, match=re.escape("no such certificate file: none.proofs/*.proof.json")):
        _run_command("cardinal proof check none.proofs/*.proof.json", tmp_path, env)
    with pytest.raises(AssertionError, match="not a cardinal command"):
        _run_command("pip install cardinal", tmp_path, env)


def test_the_tutorial_has_command_lines() -> None:
    """The tutorial's command-line section is run, not only shown: its block is a `bash` one."""
    commands = _commands((ROOT / "docs" / "tutorial.md").read_text())
    assert [line.split()[1] for line in commands] == ["certify", "proof", "certify", "proof", "explain"]


def test_python_blocks_are_found_as_the_site_renders_them() -> None:
    text = "x\n```python\na = 1\n```\n```\nnot python\n```\n```python\nb = a\n```\n```bash\n# c\n\ncardinal info n\n```\n"
    assert PYTHON.findall(text) == ["a = 1\n", "b = a\n"]
    assert _commands(text) == ["cardinal info n"]


def test_the_readme_is_a_front_door_with_cis_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    command = ci[ci.index("# README test command:") + 1]
    assert f"    {command}\n" in readme

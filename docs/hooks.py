"""mkdocs hooks: the figures of bench/results/ and the command-line reference, at build time.

The API reference reads the package as it installs: `cardinal` from cardinal/, with
`cardinal.solvers` from solvers/ and `cardinal.verify` from verify/ (pyproject.toml's package-dir),
which mkdocstrings cannot map by itself; a temporary folder of links lays the package out as it
imports. The results page links its figures where they live in the repository (`../bench/results/X.png`,
so the Markdown reads right on its own); the site serves them as `figures/X.png`. The CLI
reference page holds a marker that becomes one section per command, generated from
`cardinal COMMAND --help`, so the tables never drift from the parser.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
MARKER = "<!-- cli-reference: generated at build time by docs/hooks.py from `cardinal COMMAND --help` -->"
ENTRY = re.compile(r"^  (\S.*?)(?:\s{2,}(\S.*))?$")  # an argparse entry: invocation, then its help after 2+ spaces


LAYOUT = {"solvers": ROOT / "solvers", "verify": ROOT / "verify"}  # subpackages outside cardinal/
_staging: tempfile.TemporaryDirectory[str] | None = None


@event_priority(100)  # before mkdocstrings makes its handler, which reads the paths once
def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Point mkdocstrings at a temporary folder where `cardinal` is laid out as it imports."""
    global _staging
    _staging = tempfile.TemporaryDirectory(prefix="cardinal-api-")
    package = Path(_staging.name) / "cardinal"
    package.mkdir()
    sources = {path.name: path for path in (ROOT / "cardinal").iterdir() if path.name != "__pycache__"} | LAYOUT
    for name, source in sources.items():
        (package / name).symlink_to(source, target_is_directory=source.is_dir())
    config.plugins["mkdocstrings"].config.handlers["python"]["paths"] = [_staging.name]
    return config


def on_shutdown() -> None:
    """Remove the temporary package layout."""
    if _staging is not None:
        _staging.cleanup()


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Serve every figure under bench/results/ as figures/RELATIVE_PATH."""
    for path in sorted(RESULTS.rglob("*.png")):
        files.append(File.generated(config, f"figures/{path.relative_to(RESULTS).as_posix()}", abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Point links into bench/results/ at the served figures; expand the CLI reference marker."""
    markdown = markdown.replace("](../bench/results/", "](figures/")
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, cli_reference())
    return markdown


def _help(*command: str) -> str:
    """`cardinal COMMAND --help` of the installed command, at a fixed width."""
    here = Path(sys.executable).parent
    program = shutil.which("cardinal", path=os.pathsep.join([str(here), os.environ.get("PATH", "")]))
    if program is None:
        raise PluginError("the CLI reference needs the `cardinal` command: pip install -e . first")
    env = {**os.environ, "COLUMNS": "1000"}  # one line per entry wherever argparse allows it
    done = subprocess.run([program, *command, "--help"], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise PluginError(f"cardinal {' '.join(command)} --help failed: {done.stderr.strip()}")
    return done.stdout


def _cell(text: str) -> str:
    """Help text as one line of Markdown (a table cell, a paragraph): code spans kept, table and
    HTML characters escaped."""
    return re.sub(r"([|<>*])", r"\\\1", " ".join(text.split()))


def _sections(text: str) -> tuple[str, str, list[tuple[str, list[tuple[str, str]]]]]:
    """(usage, description, [(section title, [(invocation, help)])]) of one argparse help text."""
    blocks = text.strip("\n").split("\n\n")
    usage = blocks[0].removeprefix("usage: ")
    description, sections = [], []
    for block in blocks[1:]:
        first, _, rest = block.partition("\n")
        if re.fullmatch(r"\S.*:", first):  # a section: "options:", "positional arguments:", a group's title
            entries: list[tuple[str, str]] = []
            for line in rest.splitlines():
                match = ENTRY.match(line)
                if match:
                    entries.append((match.group(1), match.group(2) or ""))
                elif entries:  # a continuation, or a sub-command listed under its parent's entry
                    invocation, help_text = entries[-1]
                    entries[-1] = (invocation, f"{help_text} {line.strip()}".strip())
            sections.append((first.removesuffix(":"), entries))
        else:
            description.append(_cell(block))
    return usage, "\n\n".join(description), sections


def _command_section(command: str) -> str:
    usage, description, sections = _sections(_help(command))
    parts = [f"### cardinal {command}", "", description, "", "```", usage, "```", ""]
    for title, entries in sections:
        parts += [f"**{title.capitalize()}**", "", "| argument | meaning |", "|---|---|"]
        parts += [f"| `{invocation}` | {_cell(help_text)} |" for invocation, help_text in entries]
        parts.append("")
    return "\n".join(parts)


def cli_reference() -> str:
    """A table of the commands of `cardinal --help`, then one section per command, in its order."""
    commands: list[list[str]] = []
    for line in _help().splitlines():
        if match := re.match(r"^    (\S+)(?:\s{2,}(\S.*))?$", line):  # a command and the start of its summary
            commands.append([match.group(1), match.group(2) or ""])
        elif commands and line.startswith(" " * 6) and line.strip():  # its summary, continued
            commands[-1][1] = f"{commands[-1][1]} {line.strip()}".strip()
    if not commands:
        raise PluginError("no commands found in `cardinal --help`")
    table = ["| command | what it does |", "|---|---|"]
    table += [f"| [`{name}`](#cardinal-{name}) | {_cell(summary)} |" for name, summary in commands]
    with ThreadPoolExecutor(max_workers=4) as pool:  # each `--help` is a process of its own
        sections = list(pool.map(_command_section, [name for name, _ in commands]))
    return "\n".join(["\n".join(table), "", *sections])

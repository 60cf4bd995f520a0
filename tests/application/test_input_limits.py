"""Standard input and --rows refused in one line before anything is read in bulk or listed: a
closed standard input, a device on it (`< /dev/zero`), NUL bytes through a pipe, and --rows ranges
far beyond the file (exit 2, one line, no traceback, nothing written)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cardinal.verify.cli import main

NETWORK = {"format": "cardinal.network/1", "layers": [{"weight": [[1, 1, 1]], "bias": [-1.5], "activation": "identity"}]}


def _files(tmp: Path) -> tuple[str, str]:
    (tmp / "net.json").write_text(json.dumps(NETWORK))
    (tmp / "x.csv").write_text("1,1,1\n0,1,1\n")
    return str(tmp / "net.json"), str(tmp / "x.csv")


def _refused(code: int, out: str, err: str, message: str) -> None:
    assert code == 2, err
    assert out == "" and "Traceback" not in err
    assert len(err.splitlines()) == 1 and message in err, err


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        ("closed", "cannot read inputs from standard input: it is closed"),
        ("/dev/zero", "inputs on standard input: it is a character device, not a file, a pipe or a terminal"),
        ("zeros through a pipe", "inputs on standard input holds a NUL byte at offset 6: not text"),
    ],
)
def test_standard_input_that_is_not_text_is_refused_at_once(stdin: str, message: str, tmp_path: Path) -> None:
    network, _ = _files(tmp_path)
    out = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "cardinal.verify.cli", "explain", network, "--inputs", "-", "--out", str(out)]
    if stdin == "closed":
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=1800,  # hang guards only
                              preexec_fn=lambda: os.close(0))  # fmt: skip
    elif stdin == "/dev/zero":
        with open("/dev/zero", "rb") as zero:
            done = subprocess.run(command, stdin=zero, capture_output=True, text=True, timeout=1800)
    else:  # a pipe that never ends: the first block with a NUL byte ends the read
        with subprocess.Popen(["sh", "-c", "printf '1,1,1\\n'; exec cat /dev/zero"], stdout=subprocess.PIPE) as source:
            done = subprocess.run(command, stdin=source.stdout, capture_output=True, text=True, timeout=1800)
            source.kill()
    _refused(done.returncode, done.stdout, done.stderr, message)
    assert not out.exists()


def test_huge_row_ranges_are_checked_against_the_file_without_listing_them(tmp_path: Path, capsys) -> None:
    network, inputs = _files(tmp_path)
    ranges = ",".join(["0-999999999999"] * 8)
    out = tmp_path / "out.jsonl"
    code = main(["explain", network, "--inputs", inputs, "--rows", ranges, "--out", str(out)])
    captured = capsys.readouterr()
    _refused(code, captured.out, captured.err, f"--rows 2: {inputs} has 2 input row(s), numbered 0 to 1")
    assert not out.exists()
    # Ranges inside the file still choose their rows, each once, in order.
    assert main(["explain", network, "--inputs", inputs, "--rows", "1-1,0-1,1", "--kind", "contrastive"]) == 0
    assert [json.loads(line)["row"] for line in capsys.readouterr().out.splitlines()] == [0, 1]

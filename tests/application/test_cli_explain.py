"""`cardinal explain`: output lines, domain flags, and every bad input → message + exit 2."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cardinal.verify.cli import main


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def _inputs(tmp_path: Path, text: str, name: str = "x.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_design_network_both_kinds(design_network_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    inputs = _inputs(tmp_path, "a,b,c\n1,1,1\n")
    assert main(["explain", str(design_network_file), "--inputs", str(inputs), "--threshold", "0.5"]) == 0
    lines = _lines(capsys.readouterr().out)
    assert [(line["kind"], line["features"], line["size"]) for line in lines] == [
        ("contrastive", [0, 1, 2], 3),
        ("abductive", [2], 1),
    ]
    assert all(line["row"] == 0 and line["prediction"] == 1 and line["output"] == 1.6 and line["exists"] for line in lines)
    assert all(line["check"] == "exact" for line in lines)


def test_console_script_and_out_file(design_network_file: Path, tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, "1,1,1\n0,0,0\n")
    out = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "cardinal.verify.cli", "explain", str(design_network_file), "--inputs", str(inputs)]
    done = subprocess.run(
        [*command, "--kind", "contrastive", "--threshold", "2", "--out", str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    lines = _lines(out.read_text())
    # f ≤ 1.6 everywhere on the box, so with t = 2 nothing reaches class 1: no CXp exists.
    assert [(line["row"], line["exists"], line["features"], line["size"]) for line in lines] == [
        (0, False, None, None),
        (1, False, None, None),
    ]


def test_domain_flags(design_network_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    inputs = _inputs(tmp_path, "0.5,0.5,0.5\n")
    domain = tmp_path / "domain.json"
    domain.write_text(json.dumps({"lower": [0, 0, 0], "upper": [1, 1, 10]}))
    args = ["explain", str(design_network_file), "--inputs", str(inputs), "--threshold", "1", "--kind", "contrastive"]
    assert main([*args, "--domain", str(domain)]) == 0
    # f = 0.3 ≤ 1; raising x2 to 10 gives f = 6 > 1: one feature suffices.
    assert _lines(capsys.readouterr().out)[0]["features"] == [2]
    assert main([*args, "--lower", "0", "--upper", "1,1,10"]) == 0
    assert _lines(capsys.readouterr().out)[0]["features"] == [2]


@pytest.mark.parametrize(
    ("network", "inputs", "extra", "message"),
    [
        ("missing", "1,1,1\n", [], r"network file .*missing.json not found"),
        ("malformed", "1,1,1\n", [], r"malformed JSON"),
        ("ok", "1,1\n", [], r"row 0 \(line 1\) has 2 values, expected 3"),
        ("ok", "1,nan,1\n", [], r"row 0 \(line 1\), column 1 is nan"),
        ("ok", "1,1,1\n1,abc,1\n", [], r"row 1 \(line 2\), column 1: 'abc' is not a number"),
        ("ok", "1,1,1\n1,2,1\n", [], r"row 1, feature 1 = 2.0 lies outside the domain \[0.0, 1.0\]"),
        ("ok", "", [], r"no input rows"),
        ("ok", "1,1,1\n", ["--lower", "0,0"], r"lower bound has 2 entries, the network has 3 inputs"),
        ("ok", "1,1,1\n", ["--lower", "2"], r"lower bound 2.0 exceeds upper bound 1.0"),
        ("ok", "1,1,1\n", ["--device", "tpu"], r"unknown device"),
        ("unknown_activation", "1,1,1\n", [], r"layer 1: unknown activation 'swish'"),
        ("non_monotone", "1,1,1\n", ["--method", "greedy"], r"sign-monotone network.*feature 1 has mixed sign.*cardinal certify.*--method deletion"),
        ("wide_output", "1,1,1\n", ["--method", "greedy"], r"greedy explanations need a sign-monotone network.*it has 3 outputs.*cardinal certify.*--method deletion"),
        ("ok", "1,1,1\n", ["--method", "bogus"], r"argument --method: invalid choice: 'bogus'"),
        ("ok", "1,1,1\n", ["--method", "deletion", "--time-limit", "0"], r"--time-limit"),
    ],
)
def test_bad_input_exits_2_with_message_and_no_output(
    network: str, inputs: str, extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    documents = {
        "ok": [([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]], [-1.0, 0.0], "relu"), ([[1.0, 0.6]], [0.0], "identity")],
        "unknown_activation": [([[1.0, 1.0, 0.0]], [0.0], "swish"), ([[1.0]], [0.0], "identity")],
        "non_monotone": [([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]], [-1.0, 0.0], "relu"), ([[1.0, -0.6]], [0.0], "identity")],
        "wide_output": [([[1.0, 1.0, 0.0]], [0.0], "relu"), ([[1.0], [2.0], [3.0]], [0.0, 0.0, 0.0], "identity")],
    }
    path = tmp_path / f"{network}.json"
    if network == "malformed":
        path.write_text('{"format": ')
    elif network in documents:
        layers = [{"weight": w, "bias": b, "activation": a} for w, b, a in documents[network]]
        path.write_text(json.dumps({"format": "cardinal.network/1", "layers": layers}))
    out = tmp_path / "out.jsonl"
    code = main(["explain", str(path), "--inputs", str(_inputs(tmp_path, inputs)), "--out", str(out), *extra])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert captured.err.startswith("cardinal explain: error: ")
    assert len(captured.err.strip().splitlines()) == 1
    assert re.search(message, captured.err), captured.err
    assert not out.exists()
    assert list(tmp_path.glob(".out.jsonl*")) == []


def test_missing_inputs_file(design_network_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["explain", str(design_network_file), "--inputs", str(tmp_path / "none.csv")]) == 2
    assert "inputs file" in capsys.readouterr().err


def test_examples_folder_holds_the_design_network(capsys: pytest.CaptureFixture) -> None:
    """The README's first command: examples/design.json at x = (1, 1, 1), t = 0.5."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    assert (
        main(["explain", str(examples / "design.json"), "--inputs", str(examples / "design_inputs.csv"), "--threshold", "0.5"])
        == 0
    )
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    assert first["row"] == 0 and first["features"] == [0, 1, 2] and first["check"] == "exact"


@pytest.mark.parametrize("name", ["exact_milp", "greedy", "guard", "solvers"])
def test_benchmarks_run_as_modules_of_the_checkout(name: str, capsys: pytest.CaptureFixture) -> None:
    """The benchmarks are `python -m bench.NAME` from a source checkout (no `cardinal bench`:
    the installed command cannot reach bench/, which is no part of the package)."""
    with pytest.raises(SystemExit) as stop:
        importlib.import_module(f"bench.{name}").main(["--help"])
    assert stop.value.code == 0
    assert f"usage: python -m bench.{name}" in capsys.readouterr().out
    assert main(["bench", name]) == 2
    assert "invalid choice: 'bench'" in capsys.readouterr().err

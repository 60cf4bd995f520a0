"""Benchmarks print their table's header above the rows they print as they go, and a run stopped by
Ctrl-C writes the rows it finished (issue 26). The measurements themselves are stubbed: nothing is
timed here."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import bench.greedy
import bench.guard


def test_an_interrupted_greedy_bench_writes_its_finished_rows(tmp_path: Path, monkeypatch, capsys) -> None:
    limits = {"peak": {torch.float32: 100.0, torch.float64: 50.0}, "bandwidth": 10.0}

    def two_rows_then_ctrl_c(*args, **kwargs):
        for index in range(2):
            yield (
                [28, "contrastive", f"row{index}", *["1"] * 8],
                [28, "contrastive", f"row{index}", *["2"] * 8, "some CPU (avx2)"],
            )
        raise KeyboardInterrupt

    monkeypatch.setattr(bench.greedy, "machine_limits", lambda device: limits)
    monkeypatch.setattr(bench.greedy, "run", two_rows_then_ctrl_c)
    out = tmp_path / "greedy.md"
    with pytest.raises(SystemExit) as stop:
        bench.greedy.main(["--rows", "8", "--out", str(out)])
    assert stop.value.code == 130
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == " | ".join(bench.greedy.SPEED_HEADERS + bench.greedy.LIMIT_HEADERS[3:])
    assert [line.split(" | ")[2] for line in printed[1:3]] == ["row0", "row1"]
    text = out.read_text()
    assert "Interrupted: 2 of 8 configurations measured." in text
    assert "batched expl/s |" in text and "row0" in text and "row1" in text
    assert "| measured on" in text and "some CPU (avx2)" in text


def test_the_greedy_bench_names_the_cpu_and_its_isa() -> None:
    isa = bench.greedy.cpu_isa()
    assert isa.endswith(f"torch {torch.backends.cpu.get_cpu_capability()} kernels")
    assert f"{bench.greedy.cpu_name()} (" in bench.greedy.machine() and isa in bench.greedy.machine()


def test_an_interrupted_guard_bench_writes_its_finished_rows(tmp_path: Path, monkeypatch, capsys) -> None:
    calls = []

    def one_then_ctrl_c(name, queries, repeats, time_limit):
        calls.append(name)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return [0.001], [0.002]

    monkeypatch.setattr(bench.guard, "available_solvers", lambda: ["enumerate", "z3"])
    monkeypatch.setattr(bench.guard, "solve_minimum", lambda *args, **kwargs: None)
    monkeypatch.setattr(bench.guard, "measure", one_then_ctrl_c)
    out = tmp_path / "guard.md"
    with pytest.raises(SystemExit) as stop:
        bench.guard.main(["--inputs", "1", "--out", str(out)])
    assert stop.value.code == 130
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == " | ".join(bench.guard.HEADERS) and printed[1].startswith("trivial | enumerate | 1 |")
    text = out.read_text()
    assert "Interrupted after 1 row(s)." in text and "fixed cost ms |" in text and "| enumerate" in text

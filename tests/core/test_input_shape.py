"""`--input-shape` on every command that reads a model: a whole torch module with Conv2d layers
is read by every command when the shape is given, and refused with what to do when it is not."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from cardinal.verify.cli import main

from cardinal import Network


def _cnn(path: Path) -> torch.nn.Module:
    torch.manual_seed(0)
    module = torch.nn.Sequential(
        torch.nn.Conv2d(1, 2, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8, 3)
    ).double()
    torch.save(module, path)
    return module


def test_every_command_that_reads_a_model_takes_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    model = tmp_path / "cnn.pt"
    module = _cnn(model)
    x = np.random.default_rng(0).uniform(0, 1, 16)
    (tmp_path / "x.csv").write_text(",".join(repr(float(v)) for v in x) + "\n")
    shape = ["--input-shape", "1,4,4"]
    assert main(["info", str(model), *shape]) == 0
    assert main(["convert", str(model), str(tmp_path / "cnn.json"), *shape]) == 0
    net = Network.load(tmp_path / "cnn.json")
    with torch.no_grad():
        expected = module(torch.tensor(x).reshape(1, 1, 4, 4)).numpy()
    assert np.allclose(net.forward(x[None, :]).numpy(), expected)
    capsys.readouterr()
    flags = ["--inputs", str(tmp_path / "x.csv"), "--kind", "contrastive", *shape]
    assert main(["explain", str(model), *flags]) == 0
    line = json.loads(capsys.readouterr().out)
    assert line["prediction"] == int(np.argmax(expected))
    proofs = tmp_path / "proofs"
    assert main(["certify", str(model), *flags, "--time-limit", "30", "--proof", str(proofs)]) == 0
    certified = json.loads(capsys.readouterr().out)
    assert certified["prediction"] == line["prediction"]
    files = sorted(proofs.glob("*.json"))
    assert files  # its certificate, checked against the torch file itself
    assert main(["proof", "check", str(files[0]), "--network", str(model), *shape]) == 0


@pytest.mark.parametrize("command", ["info", "explain", "convert"])
def test_without_it_the_refusal_says_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture, command: str) -> None:
    model = tmp_path / "cnn.pt"
    _cnn(model)
    (tmp_path / "x.csv").write_text(",".join(["0.5"] * 16) + "\n")
    argv = {"info": ["info", str(model)], "explain": ["explain", str(model), "--inputs", str(tmp_path / "x.csv")],
            "convert": ["convert", str(model), str(tmp_path / "out.json")]}[command]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "--input-shape" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("text", ["0,4,4", "a,b", "", "1,-4,4"])
def test_a_bad_shape_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture, text: str) -> None:
    model = tmp_path / "cnn.pt"
    _cnn(model)
    assert main(["info", str(model), "--input-shape", text]) == 2
    assert "--input-shape" in capsys.readouterr().err

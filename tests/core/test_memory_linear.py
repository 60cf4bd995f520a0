"""Memory linear in the number of inputs n: the sign analysis (`cardinal info`, every explainer's
directions) and the deletion explainer's sensitivity order never build an n × n array, and a
model of 10^6 inputs is summarized, or refused in one line before any n × n work, under a 4 GiB
address-space limit. Checked against brute force: every path's sign, every margin in Fractions."""

from __future__ import annotations

import itertools
import json
import os
import resource
import subprocess
import sys
import tracemalloc
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from cardinal.solvers import deletion as deletion_module
from fraction_oracle import ExactLayers

from cardinal import Domain, signs
from cardinal.activations import Activation
from cardinal.network import Layer, Network
from cardinal.problem import Problem


def _network(seed: int, widths: tuple[int, ...], n: int) -> Network:
    """Random relu layers (then an identity output) with many zero weights, on a grid of 2^-3."""
    rng = np.random.default_rng(seed)
    layers, fan_in = [], n
    for index, width in enumerate(widths):
        weight = np.round(rng.normal(size=(width, fan_in)) * 8) / 8 * (rng.random((width, fan_in)) < 0.6)
        last = index == len(widths) - 1
        layers.append(Layer(weight, np.round(rng.normal(size=width) * 4) / 8, Activation.make("identity" if last else "relu")))
        fan_in = width
    return Network(layers)


def _path_signs(net: Network, output: int, feature: int) -> set[int]:
    """The sign of every path from input `feature` to output `output`, by enumerating the paths."""
    weights = [layer.weight for layer in net.layers]
    found = set()
    for hidden in itertools.product(*(range(w.shape[0]) for w in weights[:-1])):
        units = (feature, *hidden, output)
        product = np.prod([np.sign(weights[k][units[k + 1], units[k]]) for k in range(len(weights))])
        if product != 0:
            found.add(int(product))
    return found


@pytest.mark.parametrize("seed", range(8))
def test_the_directions_are_every_paths_sign(seed: int) -> None:
    widths = ((3, 2), (4, 3, 1), (2, 2, 2), (1, 3))[seed % 4]
    net = _network(seed, widths, n=5)
    codes = signs.output_directions(net.layers)
    expected = {frozenset(): signs.CONSTANT, frozenset({1}): signs.INCREASING, frozenset({-1}): signs.DECREASING,
                frozenset({1, -1}): signs.MIXED}  # fmt: skip
    for k, i in itertools.product(range(widths[-1]), range(5)):
        assert codes[k, i] == expected[frozenset(_path_signs(net, k, i))], (k, i)


def test_the_sign_analysis_of_many_inputs_takes_memory_linear_in_them() -> None:
    """n = 20,000 inputs, two layers: an n × n float32 array would be 1.6 GB; the analysis stays
    within a small multiple of the weights' own size."""
    n = 20_000
    net = _network(3, (2, 1), n)
    tracemalloc.start()
    try:
        codes = signs.output_directions(net.layers)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert codes.shape == (1, n)
    assert peak < 64 * n * 8, peak  # 10 MB; n × n float32 is 1.6 GB


@pytest.mark.parametrize("chunk", [1, 7, 1 << 22])
@pytest.mark.parametrize("seed", range(4))
def test_the_sensitivity_order_in_chunks_is_the_fraction_order(chunk: int, seed: int, monkeypatch) -> None:
    """The order, whatever the chunk, is the one Fractions give: each feature's smallest margin
    over x with it set to either end of the box, largest first, ties by index."""
    monkeypatch.setattr(deletion_module, "SENSITIVITY_CHUNK", chunk)
    n = 6
    net = _network(10 + seed, (3, 1), n)
    rng = np.random.default_rng(seed)
    domain = Domain(np.full(n, -1.0), np.full(n, 2.0))
    x = np.round(rng.uniform(-1, 2, n) * 4) / 4
    problem = Problem.make(net, x, "abductive", domain, 0.0)
    layers, t = ExactLayers(net), Fraction(0)
    f_x = layers.value([Fraction(v) for v in x])[0]
    worst = []
    for i in range(n):
        margins = []
        for end in (Fraction(-1), Fraction(2)):
            y = [Fraction(v) for v in x]
            y[i] = end
            f = layers.value(y)[0]
            margins.append(f - t if f_x > t else t - f)
        worst.append(min(margins))
    expected = tuple(sorted(range(n), key=lambda i: (-worst[i], i)))
    assert deletion_module._sensitivity_order(problem) == expected


# ---------------------------------------------------------------------------- a model of 10^6 inputs
N = 10**6
LIMIT = 4 << 30  # bytes of address space for the command


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def _command(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "cardinal.verify.cli", *argv], capture_output=True, text=True,
                          timeout=600, preexec_fn=_limited, env=env)  # fmt: skip


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A 10^6-input network of one hidden relu unit (weights ±1, sign-monotone), 2.5 MB of JSON
    (under the loaders' 512 MiB), and one input row."""
    folder = tmp_path_factory.mktemp("wide")
    weights = ",".join("1" if i % 2 == 0 else "-1" for i in range(N))
    (folder / "net.json").write_text(
        '{"format": "cardinal.network/1", "layers": [{"weight": [[' + weights + ']], "bias": [0], "activation": "relu"}, '
        '{"weight": [[1]], "bias": [-0.5], "activation": "identity"}]}'
    )
    (folder / "x.csv").write_text(",".join("1" if i % 2 == 0 else "0" for i in range(N)) + "\n")
    return folder / "net.json", folder / "x.csv"


def test_info_on_a_million_inputs_works_in_bounded_memory(wide: tuple[Path, Path]) -> None:
    network, _ = wide
    done = _command("info", str(network), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["inputs"] == N
    # every even feature raises f (weight +1 into a relu), every odd one lowers it
    assert summary["directions"]["+"] == N // 2 and summary["directions"]["-"] == N // 2
    assert summary["directions"]["each"][:4] == "+-+-"


def test_deletion_on_a_million_inputs_is_refused_before_its_n_by_n_work(wide: tuple[Path, Path], tmp_path: Path) -> None:
    network, inputs = wide
    out = tmp_path / "out.jsonl"
    done = _command("explain", str(network), "--inputs", str(inputs), "--method", "deletion", "--kind", "abductive",
                    "--time-limit", "5", "--out", str(out))  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("cardinal explain: error: the sensitivity order")
    assert f"past the {deletion_module.MAX_SENSITIVITY_WORK:,} allowed; use traversal index" in lines[0]
    assert done.stdout == "" and not out.exists()


def test_greedy_on_a_million_inputs_is_refused_before_its_n_by_n_work(wide: tuple[Path, Path], tmp_path: Path) -> None:
    from cardinal.greedy import MAX_GREEDY_INPUTS

    network, inputs = wide
    out = tmp_path / "out.jsonl"
    done = _command("explain", str(network), "--inputs", str(inputs), "--kind", "abductive", "--out", str(out))
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"cardinal explain: error: greedy scores all {N:,} single-feature variants")
    assert f"at most {MAX_GREEDY_INPUTS:,} inputs" in lines[0]
    assert done.stdout == "" and not out.exists()

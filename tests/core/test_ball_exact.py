"""The ball of radius r around x is the largest box of doubles inside the exact ball (issue 38).

`Domain.ball`'s ends are checked against the rule in Fractions: lo_i = max(l_i, the smallest double
≥ x_i − r_i), hi_i = min(u_i, the largest double ≤ x_i + r_i), with x_i ± r_i exact. The two
reproductions of the issue (a certified "no CXp" that a point of the float ball refuted; a witness
outside the exact ball) and random small networks are judged by an oracle written here with
Fractions only: it reads the network's JSON and the records and certificates the CLI writes, and
imports nothing from cardinal's engines.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from cardinal.verify.cli import main
from cardinal.verify.generate import random_network

from cardinal.domain import Domain

# --- the oracle: Fractions only --------------------------------------------------------------------


def exact_ball(x: list[float], r: list[float], lower: list[float], upper: list[float]) -> list[tuple[float, float]]:
    """The documented rule: from the double nearest each exact end (Python rounds a Fraction
    correctly), math.nextafter steps onto the inner side; ±inf where that double overflows."""

    def nearest(value: Fraction) -> float:
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf

    ends = []
    for xi, ri, li, ui in zip(x, r, lower, upper, strict=True):
        low, high = Fraction(xi) - Fraction(ri), Fraction(xi) + Fraction(ri)
        lo, hi = nearest(low), nearest(high)
        if math.isfinite(lo) and Fraction(lo) < low:
            lo = math.nextafter(lo, math.inf)
        if math.isfinite(hi) and Fraction(hi) > high:
            hi = math.nextafter(hi, -math.inf)
        ends.append((max(li, lo), min(ui, hi)))
    return ends


def forward(network: dict, y: list[float | Fraction]) -> list[Fraction]:
    """The outputs of a cardinal.network/1 JSON network of relu and identity layers at y, exactly."""
    z = [Fraction(v) for v in y]
    for layer in network["layers"]:
        h = [sum((Fraction(w) * v for w, v in zip(row, z, strict=True)), Fraction(b)) for row, b in zip(layer["weight"], layer["bias"], strict=True)]
        assert layer["activation"] in ("relu", "identity"), layer["activation"]
        z = [max(v, Fraction(0)) for v in h] if layer["activation"] == "relu" else h
    return z


def predicts(network: dict, y: list[float], threshold: float) -> int:
    return int(forward(network, y)[0] > Fraction(threshold))


def in_exact_ball(y: list[float], x: list[float], r: float, lower: float, upper: float) -> bool:
    return all(
        abs(Fraction(yi) - Fraction(xi)) <= Fraction(r) and Fraction(lower) <= Fraction(yi) <= Fraction(upper)
        for yi, xi in zip(y, x, strict=True)
    )


# --- Domain.ball against the rule ------------------------------------------------------------------


def _cases(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lower, upper, x, r) [n]: short decimals, random doubles and tiny, huge and subnormal scales."""
    n = 12
    scale = 10.0 ** rng.integers(-320, 300, n) if rng.random() < 0.3 else np.ones(n)
    lower = -rng.random(n) * scale
    upper = rng.random(n) * scale
    if rng.random() < 0.5:
        lower, upper = np.round(lower, 2), np.round(upper, 2) + 0.01
    x = np.clip(lower + rng.random(n) * (upper - lower), lower, upper)
    if rng.random() < 0.5:
        x = np.clip(np.round(x, 2), lower, upper)
    r = rng.choice([0.05, 0.1, 0.2, 0.3, 1e-3, 0.15]) * scale if rng.random() < 0.5 else rng.random(n) * scale * 0.5
    return lower, upper, x, np.maximum(r, 5e-324)


@pytest.mark.parametrize("seed", range(40))
def test_ball_ends_obey_the_rule_exactly_and_are_maximal(seed: int) -> None:
    lower, upper, x, r = _cases(np.random.default_rng(seed))
    ball = Domain(lower, upper).ball(x, r)
    for i in range(len(x)):
        lo, hi = float(ball.lower[i]), float(ball.upper[i])
        low, high = Fraction(float(x[i])) - Fraction(float(r[i])), Fraction(float(x[i])) + Fraction(float(r[i]))
        assert lower[i] <= lo <= x[i] <= hi <= upper[i]
        assert Fraction(lo) >= low and Fraction(hi) <= high  # inside the exact ball
        assert lo == lower[i] or Fraction(math.nextafter(lo, -math.inf)) < low  # the next double down leaves it
        assert hi == upper[i] or Fraction(math.nextafter(hi, math.inf)) > high  # the next double up leaves it
    assert [tuple(map(float, e)) for e in zip(ball.lower, ball.upper, strict=True)] == exact_ball(
        x.tolist(), r.tolist(), lower.tolist(), upper.tolist()
    )


def test_huge_ends_beyond_the_double_range_are_clipped_to_the_box() -> None:
    box = Domain(np.array([-1.7e308, -1e308]), np.array([1.7e308, 1e308]))
    x, r = [1.6e308, -9e307], [1e308, 5e307]
    ball = box.ball(np.array(x), r)  # 1.6e308 + 1e308 and −9e307 − 5e307 overflow in floats
    assert ball.upper[0] == 1.7e308 and ball.lower[1] == -1e308
    assert list(zip(ball.lower.tolist(), ball.upper.tolist(), strict=True)) == exact_ball(x, r, box.lower.tolist(), box.upper.tolist())


# --- the two reproductions -----------------------------------------------------------------


def _files(tmp_path: Path, network: dict, rows: list[list[float]]) -> tuple[str, str]:
    net_path, inputs = tmp_path / "net.json", tmp_path / "X.csv"
    net_path.write_text(json.dumps(network))
    inputs.write_text("".join(",".join(repr(v) for v in row) + "\n" for row in rows))
    return str(net_path), str(inputs)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _linear(weight: float, bias: float) -> dict:
    return {"format": "cardinal.network/1", "layers": [{"weight": [[weight]], "bias": [bias], "activation": "identity"}]}


def test_a_certified_no_cxp_is_true_of_the_box_it_states(tmp_path: Path) -> None:
    """0.3·y − 0.075 at x = 0.2, radius 0.05: 0.2 + 0.05 is exactly 0.25000000000000001110…, where the
    prediction flips; the largest double at most that is 0.25, where 0.3·0.25 − 0.075 = 0 exactly
    (no flip). The ball is [0.15000000000000002, 0.25], the certificate states it, and its claim
    "no CXp" holds there (a linear function: its ends decide)."""
    network = _linear(0.3, -0.075)
    assert predicts(network, [0.2], 0.0) == 0
    assert forward(network, [0.25])[0] == 0 and forward(network, [Fraction(0.2) + Fraction(0.05)])[0] > 0
    net_path, inputs = _files(tmp_path, network, [[0.2]])
    out, proofs = tmp_path / "c.jsonl", tmp_path / "P"
    assert main(["certify", net_path, "--inputs", inputs, "--radius", "0.05", "--kind", "contrastive", "--proof", str(proofs), "--out", str(out)]) == 0
    [line] = _lines(out)
    certificate = json.loads((proofs / line["proof"]["file"]).read_text())
    box = (certificate["problem"]["lower"], certificate["problem"]["upper"])
    assert box == ([0.15000000000000002], [0.25]) and exact_ball([0.2], [0.05], [0.0], [1.0]) == [(0.15000000000000002, 0.25)]
    assert line["verdict"] == "none_exists" and line["certified"] and line["proof"]["accepted"]
    assert all(predicts(network, [end], 0.0) == 0 for end in (0.15000000000000002, 0.25))  # true of the box


def test_no_witness_outside_the_exact_ball(tmp_path: Path) -> None:
    """0.1·y − 0.05500000000000001 at x = 0.45, radius 0.1: the float 0.45 + 0.1 = 0.55 lies outside
    the exact ball (0.45 + 0.1 = 0.55000000000000001665… < 0.55000000000000004440…), and no point
    inside flips: explain finds no CXp and certify certifies that none exists."""
    network = _linear(0.1, -0.05500000000000001)
    [(lo, hi)] = exact_ball([0.45], [0.1], [0.0], [1.0])
    assert hi == 0.5499999999999999 and not in_exact_ball([0.55], [0.45], 0.1, 0.0, 1.0)
    assert all(predicts(network, [end], 0.0) == 0 for end in (lo, hi))  # so no point of the box flips
    net_path, inputs = _files(tmp_path, network, [[0.45]])
    flags = ["--inputs", inputs, "--radius", "0.1", "--kind", "contrastive"]
    assert main(["explain", net_path, *flags, "--out", str(tmp_path / "e.jsonl")]) == 0
    assert main(["certify", net_path, *flags, "--out", str(tmp_path / "c.jsonl")]) == 0
    [explained], [certified] = _lines(tmp_path / "e.jsonl"), _lines(tmp_path / "c.jsonl")
    assert explained["exists"] is False and "witness" not in explained
    assert certified["verdict"] == "none_exists" and certified["certified"]


# --- random small networks: every witness in the exact ball ----------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_every_witness_lies_in_the_exact_ball(tmp_path: Path, seed: int) -> None:
    """Monotone (greedy, its witness at the ball's ends) and signed (deletion) 3-feature networks,
    inputs of two decimals, radii whose ends are rarely doubles: each CXp witness of explain and each
    certified minimum's witness lies in the exact ball and flips, in Fractions."""
    rng = np.random.default_rng(seed)
    monotone = seed % 2 == 0
    net = random_network(rng, 3, (4,), "relu", monotone=monotone)
    network = net.to_json()
    X = np.round(rng.random((6, 3)), 2)
    threshold = float(np.median(net.forward(X).numpy()))
    radius = [0.05, 0.1, 0.15, 0.3][seed]
    net_path, inputs = _files(tmp_path, network, X.tolist())
    flags = ["--inputs", inputs, "--radius", repr(radius), "--threshold", repr(threshold), "--kind", "contrastive"]
    assert main(["explain", net_path, *flags, "--out", str(tmp_path / "e.jsonl")]) == 0
    solvers = ["--solvers", "enumerate"] if monotone else []
    assert main(["certify", net_path, *flags, *solvers, "--out", str(tmp_path / "c.jsonl")]) == 0
    witnesses = [(line["row"], line["witness"]) for line in _lines(tmp_path / "e.jsonl") if line["exists"]]
    witnesses += [(line["row"], line["minimum_witness"]) for line in _lines(tmp_path / "c.jsonl") if line["minimum_witness"]]
    assert witnesses
    for row, witness in witnesses:
        x = X[row].tolist()
        assert in_exact_ball(witness, x, radius, 0.0, 1.0), (row, witness)
        assert predicts(network, witness, threshold) != predicts(network, x, threshold)

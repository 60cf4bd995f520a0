"""Greedy explanations: batched = reference = one row at a time; answers valid exactly;
minimal where minimality is proved (one-layer networks); known answers; bad input."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
import torch
from cardinal.verify.generate import median_threshold, random_network

from cardinal.activations import Activation
from cardinal.algorithm1 import explain_exactly
from cardinal.domain import Domain
from cardinal.errors import InputError
from cardinal.exact import ExactNetwork, check_monotone_explanation
from cardinal.greedy import explain, explain_reference
from cardinal.network import Layer, Network
from cardinal.problem import KINDS
from tests.conftest import brute_force_minimum
from tests.fraction_oracle import Oracle

FAMILIES = ["relu", "leaky_relu", "hardtanh", "step", "sigmoid", "tanh", "softplus"]


def _same(a, b) -> None:
    assert torch.equal(a.predictions, b.predictions)
    assert torch.equal(a.exists, b.exists)
    assert torch.equal(a.sizes, b.sizes)
    assert torch.equal(a.masks, b.masks)


def _case(seed: int, family: str, n: int, hidden: tuple[int, ...], rows: int = 12):
    rng = np.random.default_rng(seed)
    net = random_network(rng, n, hidden, family)
    X = rng.random((rows, n))
    return net, X, median_threshold(net, X)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kind", KINDS)
def test_batched_equals_reference_and_row_by_row(family: str, kind: str) -> None:
    for seed in range(3):
        net, X, t = _case(seed, family, n=7, hidden=(6, 4))
        batched = explain(net, X, kind=kind, threshold=t, device="cpu", verify=False)
        _same(batched, explain_reference(net, X, kind=kind, threshold=t))
        for row in range(len(X)):
            single = explain(net, X[row], kind=kind, threshold=t, device="cpu", verify=False)
            assert single.features(0) == batched.features(row)


def _dyadic_case(seed: int, n: int, width: int, rows: int, depth: int = 1):
    """Weights in quarters and inputs in halves: every float computation is exact, so equal
    scores are genuine ties for every implementation. `depth` hidden layers of `width`."""
    rng = np.random.default_rng(seed)
    net = random_network(rng, n, (width,) * depth, "relu")
    layers = [Layer(np.round(layer.weight * 4) / 4, np.round(layer.bias * 4) / 4, layer.activation) for layer in net.layers]
    net = Network(layers)
    X = np.round(rng.random((rows, n)) * 2) / 2
    return net, X, median_threshold(net, X) + 0.125


@pytest.mark.parametrize("kind", KINDS)
def test_ties_break_by_lower_index(kind: str) -> None:
    ties = 0
    for seed in range(4):
        net, X, t = _dyadic_case(seed, n=8, width=5, rows=20)
        batched = explain(net, X, kind=kind, threshold=t, device="cpu", verify=False)
        _same(batched, explain_reference(net, X, kind=kind, threshold=t))
        _same(batched, explain_reference(net, X, kind=kind, threshold=t, exact=True))
        ties += sum(len(set(row.tolist())) < len(row) for row in _scores(net, X, batched))
    assert ties > 0  # the grid really produced tied scores


def _scores(net: Network, X: np.ndarray, result) -> list[np.ndarray]:
    from cardinal.exact import modified_inputs

    rows = []
    for x, prediction in zip(X, result.predictions.tolist(), strict=True):
        target = np.zeros_like(x) if prediction == 1 else np.ones_like(x)
        rows.append(net.forward(np.stack([modified_inputs(x, [j], target) for j in range(len(x))])).numpy())
    return rows


@pytest.mark.parametrize(("chunk", "block"), [(1, 1 << 22), (8 * 9 * 3, 1 << 22), (8 * 9 * 3, 9 * 7), (1, 1)])
@pytest.mark.parametrize("kind", KINDS)
def test_chunking_does_not_change_answers(monkeypatch: pytest.MonkeyPatch, kind: str, chunk: int, block: int) -> None:
    """Variants of 1 or 3 rows at a time; sort and search over blocks of 40, 7 or 1 rows."""
    net, X, t = _case(7, "relu", n=9, hidden=(8, 8), rows=40)
    whole = explain(net, X, kind=kind, threshold=t, device="cpu", verify=False)
    import cardinal.greedy as greedy

    monkeypatch.setattr(greedy, "_CPU_CHUNK_ELEMENTS_PER_THREAD", max(1, chunk // torch.get_num_threads()))
    monkeypatch.setattr(greedy, "_SEARCH_BLOCK_ELEMENTS", block)
    _same(whole, explain(net, X, kind=kind, threshold=t, device="cpu", verify=False))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kind", KINDS)
def test_every_answer_is_valid_in_exact_arithmetic(family: str, kind: str) -> None:
    net, X, t = _case(11, family, n=6, hidden=(5, 5), rows=10)
    result = explain(net, X, kind=kind, threshold=t, device="cpu", verify=False)
    exact = ExactNetwork(net)
    domain = Domain.unit(6)
    for row in range(len(X)):
        features = result.features(row)
        if features is None:  # no CXp: even x' keeps the prediction
            assert check_monotone_explanation(exact, X[row], tuple(range(6)), kind, domain, t) is False
        else:
            assert check_monotone_explanation(exact, X[row], features, kind, domain, t) is True


@pytest.mark.parametrize("family", ["identity", "leaky_relu", "sigmoid", "tanh", "softplus"])
@pytest.mark.parametrize("kind", KINDS)
def test_one_layer_strictly_increasing_greedy_is_minimum(family: str, kind: str) -> None:
    """The proved case: f(x) = σ(w·x + b) with σ strictly increasing orders the single-feature
    scores exactly as the moves w_j·(x'_j − x_j), so the greedy prefixes are the best ones."""
    rng = np.random.default_rng(5)
    for _ in range(15):
        n = int(rng.integers(1, 8))
        layer = random_network(rng, n, (), "identity").layers[0]
        activation = random_network(rng, 1, (1,), family).layers[0].activation
        net = Network([Layer(layer.weight, layer.bias, activation)])
        X = rng.random((4, n))
        t = median_threshold(net, X)
        result = explain(net, X, kind=kind, threshold=t, device="cpu", verify=False)
        for row in range(len(X)):
            minimum = brute_force_minimum(net, X[row], kind, Domain.unit(n), t)
            features = result.features(row)
            assert (features is None) if minimum is None else (len(features) == minimum)


def test_one_layer_relu_flat_region_ties_mislead_greedy() -> None:
    """Not every one-layer case: relu's flat part ties all scores at 0 (broken by index).

    f = relu(x0 + x1 + 2·x2 − 2.2), x = 0, t = 0.5: every single raise leaves f = 0, so greedy
    adds 0, 1, 2 (size 3) while {0, 2} gives f = 0.8 > 0.5 (size 2).
    """
    net = Network([Layer(np.array([[1.0, 1.0, 2.0]]), np.array([-2.2]), Activation.make("relu"))])
    x = np.zeros(3)
    assert explain(net, x, threshold=0.5, device="cpu").features(0) == (0, 1, 2)
    assert brute_force_minimum(net, x, "contrastive", Domain.unit(3), 0.5) == 2


def test_design_network_known_answers(design_network: Network) -> None:
    """f = relu(x0 + x1 − 1) + 0.6·x2 at x = (1,1,1), t = 0.5: f = 1.6, prediction 1.

    Single-feature drops give 0.6, 0.6, 1.0, so greedy takes 0, 1, then 2: the CXp {0,1,2}
    (size 3), while {0,2} (size 2) already gives f = 0. The AXp is {2}: f(0,0,1) = 0.6 > 0.5.
    """
    x = np.ones(3)
    cxp = explain(design_network, x, kind="contrastive", threshold=0.5, device="cpu")
    assert cxp.features(0) == (0, 1, 2)
    assert brute_force_minimum(design_network, x, "contrastive", Domain.unit(3), 0.5) == 2
    axp = explain(design_network, x, kind="abductive", threshold=0.5, device="cpu")
    assert axp.features(0) == (2,)
    assert float(cxp.outputs[0]) == pytest.approx(1.6)


def test_no_contrastive_explanation_and_empty_abductive() -> None:
    # f = x0 + x1 + 1 > 0 everywhere on the unit box: prediction constant.
    net = Network([Layer(np.array([[1.0, 1.0]]), np.array([1.0]), Activation.make("identity"))])
    X = np.array([[0.2, 0.7], [0.0, 0.0]])
    for implementation in (explain, explain_reference):
        cxp = implementation(net, X, kind="contrastive")
        assert not cxp.exists.any() and cxp.features(0) is None
        axp = implementation(net, X, kind="abductive")
        assert axp.exists.all() and axp.features(1) == ()


def test_single_feature_single_row() -> None:
    net = Network([Layer(np.array([[2.0]]), np.array([-1.0]), Activation.make("relu"))])
    cxp = explain(net, np.array([0.9]), kind="contrastive", device="cpu")
    assert cxp.features(0) == (0,) and int(cxp.predictions[0]) == 1
    axp = explain(net, np.array([[0.2]]), kind="abductive", device="cpu")
    assert axp.features(0) == (0,) and int(axp.predictions[0]) == 0


def test_custom_domain_and_threshold() -> None:
    net = Network([Layer(np.array([[1.0, 2.0]]), np.array([0.0]), Activation.make("identity"))])
    domain = Domain(np.array([-1.0, -1.0]), np.array([3.0, 1.0]))
    # f(0, 0) = 0 ≤ 0.5: to flip, raise x0 to 3 (f = 3) or x1 to 1 (f = 2); 3 is the bigger move.
    cxp = explain(net, np.zeros(2), domain=domain, threshold=0.5, device="cpu")
    assert cxp.features(0) == (0,)


def test_float_rounding_is_repaired_when_verifying() -> None:
    """f = x0 + 1e-17·x1 at x = (1, 1), t = 1: float says f = 1 (prediction 0), exactly f > 1."""
    net = Network([Layer(np.array([[1.0, 1e-17]]), np.array([0.0]), Activation.make("identity"))])
    x = np.ones(2)
    fast = explain(net, x, threshold=1.0, device="cpu", verify=False)
    assert int(fast.predictions[0]) == 0  # 1 + 1e-17 rounds to 1 in float64 whatever the summation order
    checked = explain(net, x, threshold=1.0, device="cpu", verify=True)
    assert checked.checks == ("repaired",)
    assert int(checked.predictions[0]) == 1
    exact = ExactNetwork(net)
    assert check_monotone_explanation(exact, x, checked.features(0), "contrastive", Domain.unit(2), 1.0)


def test_verify_marks_exact_answers(design_network: Network) -> None:
    result = explain(design_network, np.array([[1.0, 1.0, 1.0], [0.2, 0.9, 0.3]]), threshold=0.5, verify=True)
    assert result.checks == ("exact", "exact")


def rounding_tie_network() -> Network:
    """Five inputs, relu units y0..y4 and relu(y0 + y2 − 1), identity output with bias 1.2. At
    x = (0.5, 0.5, 0.1, 0, 0), t = 1.601, abductive (x' = 1): features 0, 1 and 3 score within
    6e-17 of 1.7 — exactly feature 3 scores 1.7 + 2.8e-17 and 0 and 1 score 1.7 + 5.6e-17 (the
    weight 0.10000000000000003 of y3 is what float rounding may lose). Exact order 2, 3, …:
    {2, 3} reaches f ≤ t. Float arithmetic orders the three as its summation order rounds them
    (2, 0, 1, … gives {0, 1, 2} on an AMD EPYC; 2, 1, … gives {1, 2} with MKL_CBWR=COMPATIBLE)."""
    weight = np.vstack([np.eye(5), [[1.0, 0.0, 1.0, 0.0, 0.0]]])
    hidden = Layer(weight, np.array([0.0, 0.0, 0.0, 0.0, 0.0, -1.0]), Activation.make("relu"))
    output = Layer(np.array([[0.1, 0.2, 0.05, 0.10000000000000003, 0.05, 0.1]]), np.array([1.2]), Activation.make("identity"))
    return Network([hidden, output])


ROUNDING_TIE_X, ROUNDING_TIE_T = np.array([0.5, 0.5, 0.1, 0.0, 0.0]), 1.601


def _rounding_tie_answers() -> tuple[set, set]:
    """(Algorithm 1's answer in exact arithmetic, every answer a float run can give whose
    rounding errs by at most 2^-40 in a score or in f), both decided by the Fraction oracle."""
    oracle = Oracle(rounding_tie_network(), ROUNDING_TIE_X, ROUNDING_TIE_T, np.zeros(5), np.ones(5))
    return oracle.algorithm1("abductive"), oracle.algorithm1("abductive", near=Fraction(1, 2**40))


def test_rounding_tie_is_decided_in_exact_arithmetic() -> None:
    """Issue 10, item 6: the answer judged is Algorithm 1 in exact arithmetic, whatever the float
    run decided the near-tie (its summation order differs between CPUs and BLAS builds)."""
    net, x, t = rounding_tie_network(), ROUNDING_TIE_X, ROUNDING_TIE_T
    exact_answers, float_answers = _rounding_tie_answers()
    assert exact_answers == {(2, 3)} and float_answers >= {(2, 3), (0, 1, 2), (1, 2)}  # a real near-tie
    fast = explain(net, x, "abductive", threshold=t, verify=False)
    assert fast.features(0) in float_answers
    assert explain_reference(net, x, "abductive", threshold=t).features(0) in float_answers
    assert explain_reference(net, x, "abductive", threshold=t, exact=True).features(0) == (2, 3)
    checked = explain(net, x, "abductive", threshold=t, verify=True)
    assert checked.features(0) == (2, 3) and checked.order[0, :2].tolist() == [2, 3]
    assert checked.checks == (("exact",) if fast.features(0) == (2, 3) else ("repaired",))
    assert brute_force_minimum(net, x, "abductive", Domain.unit(5), t) == 2  # no counterexample here


def test_float_answers_of_the_rounding_tie_cover_each_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """The batched float run under roundings other than this machine's (each output f perturbed
    by 0 or ±2^-50 relative, as another CPU's summation order could round it): every answer is
    one the oracle allows, and `verify=True` reports the exact answer — "repaired" exactly where
    the float answer differs."""
    import cardinal.greedy as greedy

    net, x, t = rounding_tie_network(), ROUNDING_TIE_X, ROUNDING_TIE_T
    _, float_answers = _rounding_tie_answers()
    original = greedy._BatchedGreedy._tail
    seen = set()
    for seed in range(16):
        generator = torch.Generator().manual_seed(seed)

        def tail(self, h1: torch.Tensor, buffers=None, generator=generator) -> torch.Tensor:
            f = original(self, h1, buffers)
            return f * (1 + torch.randint(-1, 2, f.shape, generator=generator).to(f.dtype) * 2.0**-50)

        monkeypatch.setattr(greedy._BatchedGreedy, "_tail", tail)
        fast = explain(net, x, "abductive", threshold=t, verify=False).features(0)
        generator.manual_seed(seed)  # the same rounding again for the run that verify=True re-checks
        checked = explain(net, x, "abductive", threshold=t, verify=True)
        assert fast in float_answers and checked.features(0) == (2, 3)
        assert checked.checks == (("exact",) if fast == (2, 3) else ("repaired",))
        seen.add(fast)
    assert len(seen) >= 2  # the perturbation did reorder the near-tie


def test_cli_explain_reports_the_exact_answer(tmp_path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    from cardinal.verify.cli import main

    network, inputs = tmp_path / "net.json", tmp_path / "x.csv"
    rounding_tie_network().save(network)
    inputs.write_text("0.5,0.5,0.1,0,0\n")
    from cardinal.verify import explaining

    _, float_answers = _rounding_tie_answers()
    fast = explain(rounding_tie_network(), ROUNDING_TIE_X, "abductive", threshold=ROUNDING_TIE_T, verify=False).features(0)
    command = ["explain", str(network), "--inputs", str(inputs), "--threshold", "1.601", "--kind", "abductive"]
    assert main(command) == 0  # a small input: Algorithm 1 in exact arithmetic alone
    line = json.loads(capsys.readouterr().out)
    assert (line["features"], line["check"]) == ([2, 3], "exact")
    monkeypatch.setattr(explaining, "EXACT_WORK", 0)  # as on a larger input: batched float greedy, re-checked
    assert main(command) == 0
    line = json.loads(capsys.readouterr().out)
    assert (line["features"], line["check"]) == ([2, 3], "exact" if fast == (2, 3) else "repaired")
    assert main([*command, "--no-verify"]) == 0
    unverified = tuple(json.loads(capsys.readouterr().out)["features"])
    assert unverified == fast and unverified in float_answers  # float decides the near-tie, as the library's float run


@pytest.mark.parametrize("kind", KINDS)
def test_verify_equals_exact_algorithm_one(kind: str) -> None:
    """Random networks with 1-decimal weights and inputs (ties and near-ties common), every family:
    `explain(verify=True)` returns exactly what `explain_reference(exact=True)` returns, and says
    "exact" only where the batched float answer was already that. (Whether a float answer here
    differs depends on this machine's summation order; test_float_answers_of_the_rounding_tie_cover_each_order
    makes one differ on every machine.)"""
    rng = np.random.default_rng(8)
    for index in range(60):
        family = ("relu", "hardtanh", "leaky_relu", "step")[index % 4]
        n = int(rng.integers(2, 9))
        net = random_network(rng, n, (int(rng.integers(2, 5)),) * int(rng.integers(1, 3)), family, decimals=1)
        X = np.round(rng.random((6, n)), 1) if index % 3 else (rng.random((6, n)) > 0.5).astype(float)
        t = float(np.round(np.median(net.forward(X).numpy()) + rng.normal() * 0.01, 3))
        fast = explain(net, X, kind=kind, threshold=t, verify=False)
        checked = explain(net, X, kind=kind, threshold=t, verify=True)
        reference = explain_reference(net, X, kind=kind, threshold=t, exact=True)
        alone = explain_exactly(net, X, kind=kind, threshold=t)  # what `cardinal explain` uses on small inputs
        for row in range(len(X)):
            assert checked.features(row) == reference.features(row) == alone[row].features, (family, row)
            assert int(checked.predictions[row]) == int(reference.predictions[row]) == alone[row].prediction
            assert checked.witness(row, X[row], Domain.unit(n)) == alone[row].witness
            same = fast.features(row) == reference.features(row) and int(fast.predictions[row]) == int(reference.predictions[row])
            assert checked.checks[row] == ("exact" if same else "repaired")


def test_float32_matches_float64_on_dyadic_network() -> None:
    net, X, t = _dyadic_case(3, n=6, width=4, rows=16)
    _same(explain(net, X, threshold=t, dtype=torch.float32, verify=False), explain(net, X, threshold=t, verify=False))


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("kind", KINDS)
def test_float32_tails_equal_reference_on_dyadic_network(monkeypatch: pytest.MonkeyPatch, kind: str, fused: bool) -> None:
    """float32 on the CPU, with oneDNN's fused linear + ReLU for the hidden layers after the first
    (where torch has it) and without: the answers of the exact reference, ties included."""
    import cardinal.greedy as greedy

    if fused and not greedy._fused_relu_linear_available(torch.device("cpu"), torch.float32):
        pytest.skip("this torch build has no oneDNN fused linear + ReLU")
    if not fused:
        monkeypatch.setattr(greedy, "_fused_relu_linear_available", lambda device, dtype: False)
    for seed in range(3):
        net, X, t = _dyadic_case(seed, n=9, width=6, rows=30, depth=2)
        _same(explain(net, X, kind=kind, threshold=t, dtype=torch.float32), explain_reference(net, X, kind=kind, threshold=t, exact=True))


@pytest.mark.parametrize("kind", KINDS)
def test_large_n_equals_reference(kind: str) -> None:
    """300 features: long sorts and a 9-pass binary search; the reference's answers."""
    net, X, t = _case(5, "relu", n=300, hidden=(8, 8), rows=5)
    _same(explain(net, X, kind=kind, threshold=t, device="cpu"), explain_reference(net, X, kind=kind, threshold=t))


# ---------------------------------------------------------------- bad input
def test_network_of_mixed_sign_is_refused_naming_the_feature() -> None:
    """Feature 0 reaches f through +1·+1 and through +1·−1: mixed; feature 1 only positively."""
    relu, identity = Activation.make("relu"), Activation.make("identity")
    net = Network([Layer(np.array([[1.0, 1.0], [1.0, 0.0]]), np.zeros(2), relu), Layer(np.array([[1.0, -1.0]]), np.zeros(1), identity)])
    with pytest.raises(InputError, match=r"sign-monotone.*not: feature 0 has mixed sign.*cardinal certify.*solve_minimum"):
        explain(net, np.zeros(2))


def test_input_outside_box_names_row_and_feature(design_network: Network) -> None:
    X = np.array([[0.5, 0.5, 0.5], [0.5, 1.5, 0.5]])
    with pytest.raises(InputError, match=r"row 1, feature 1 = 1.5 lies outside"):
        explain(design_network, X)


def test_nan_input_and_wrong_shape(design_network: Network) -> None:
    with pytest.raises(InputError, match=r"row 0, feature 2 is nan"):
        explain(design_network, np.array([0.5, 0.5, np.nan]))
    with pytest.raises(InputError, match=r"shape \[1, 2\], expected \[B, 3\]"):
        explain(design_network, np.array([0.5, 0.5]))


def test_unknown_kind_and_device(design_network: Network) -> None:
    with pytest.raises(InputError, match="unknown kind"):
        explain(design_network, np.zeros(3), kind="causal")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="unknown device"):
        explain(design_network, np.zeros(3), device="tpu")
    if not torch.cuda.is_available():
        with pytest.raises(InputError, match="no CUDA"):
            explain(design_network, np.zeros(3), device="cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("kind", KINDS)
def test_cuda_equals_cpu_in_float64(kind: str) -> None:
    """On a GPU machine: the same answers on the device as on the CPU, and valid exactly."""
    net, X, t = _case(31, "relu", n=20, hidden=(16, 16), rows=300)
    _same(explain(net, X, kind=kind, threshold=t, device="cpu", verify=False), explain(net, X, kind=kind, threshold=t, device="cuda", verify=False))
    on_gpu = explain(net, X, kind=kind, threshold=t, device="cuda", verify=True)
    assert on_gpu.checks == explain(net, X, kind=kind, threshold=t, device="cpu", verify=True).checks


def test_bench_torch_loop_equals_reference_and_is_quoted_in_the_docstring() -> None:
    """The benchmark's baseline (Algorithm 1 as a plain torch loop on the nn.Sequential) gives
    `explain_reference`'s answers, rows without a CXp and empty AXps included; its code is the
    one its docstring states."""
    import inspect
    import itertools
    import textwrap

    import bench.greedy as bench

    assert textwrap.indent(inspect.getsource(bench.plain_loop), " " * 6) in bench.__doc__
    seen = {"none": 0, "empty": 0}
    for seed in range(3):
        net, X, median = _case(seed, "relu", n=7, hidden=(6, 4), rows=16)
        below_box = float(net.forward(np.zeros((1, 7)))[0]) - 0.01  # every row predicts 1, none can flip
        for t, kind in itertools.product((median, below_box), KINDS):
            reference = explain_reference(net, X, kind=kind, threshold=t)
            assert torch.equal(bench.run_plain_loop(net, X, kind, t, torch.float64), reference.masks)
            seen["none" if kind == "contrastive" else "empty"] += int((reference.sizes == 0).sum())
    assert seen["none"] > 0 and seen["empty"] > 0


@pytest.mark.parametrize(("arguments", "message"), [(["--rows", "0"], "--rows"), (["--out", "."], "is a directory")])
def test_bench_refuses_bad_arguments_before_any_work(capsys: pytest.CaptureFixture, arguments, message) -> None:
    import bench.greedy as bench

    with pytest.raises(SystemExit) as exit_info:
        bench.main(arguments)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err

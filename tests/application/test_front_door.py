"""`cardinal.explain`, the front door: explains and proves in one call.

Checked against an oracle that shares no code with the engines (`fraction_oracle`, Fractions
only), against the CLI's own records for the same question, and for the invariant that a batch
gives what each input gives alone.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import torch
from cardinal.verify.cli import main
from fraction_oracle import Oracle

import cardinal
from cardinal import Domain, InputError, Network
from cardinal.activations import Activation
from cardinal.network import Layer

# The limit of a call whose answer a test asserts: none that a run here comes near, so that no
# answer depends on the machine's speed (a limit of seconds ended calls undecided on a loaded machine).
UNBOUNDED = 3600.0


def _network(seed: int, n: int, monotone: bool) -> Network:
    """A small random relu network, weights on a grid of 2^-4 (exact in every format)."""
    rng = np.random.default_rng(seed)
    layers, fan_in = [], n
    for width in (4, 1):
        weight = np.round(rng.normal(size=(width, fan_in)) * 16) / 16
        weight = np.abs(weight) if monotone else weight
        bias = np.round(rng.normal(size=width) * 8) / 16
        activation = Activation.make("relu" if width > 1 else "identity")
        layers.append(Layer(weight, bias, activation))
        fan_in = width
    return Network(layers)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind", ["contrastive", "abductive"])
def test_the_proved_minimum_is_the_oracles(seed: int, kind: str) -> None:
    """On 3-feature networks, monotone or not, the proved answer is valid and of the minimum size
    that the Fraction oracle finds by trying every set; a CXp's witness flips, exactly."""
    net = _network(seed, 3, monotone=seed % 2 == 0)
    x = np.round(np.random.default_rng(100 + seed).uniform(0, 1, 3) * 8) / 8
    e = cardinal.explain(net, x, kind, time_limit=UNBOUNDED)
    oracle = Oracle(net, x, 0.0, [0.0] * 3, [1.0] * 3)
    maybe, sure = oracle.sizes(kind)
    assert maybe == sure  # the oracle decides every set of these networks
    if sure is None:  # no CXp at all
        assert (e.features, e.exists, e.none_exists, e.proved) == (None, False, True, True)
        return
    assert e.proved and e.lower == e.upper == len(e.features) == sure
    assert oracle.valid(kind, e.features) is True
    if kind == "contrastive":
        assert e.witness is not None and oracle.prediction(e.witness) == 1 - oracle.p
        assert all(e.witness[i] == x[i] for i in range(3) if i not in e.features)
    if e.certificate is not None:
        assert e.certificate.accepted and e.certificate.check()
    else:
        assert e.certificate_reason


def _untimed(value):
    """A record without its measured seconds."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in ("seconds", "check_seconds")}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def test_the_record_is_the_clis(tmp_path) -> None:
    """`to_dict()` is the line `cardinal certify` writes for the same input (timings aside), and
    with prove=False the line `cardinal explain` writes."""
    net = _network(7, 4, monotone=True)
    path, inputs = tmp_path / "net.json", tmp_path / "x.csv"
    net.save(path)
    x = np.array([0.25, 0.5, 0.75, 1.0])
    inputs.write_text(",".join(map(str, x)) + "\n")
    for kind in ("contrastive", "abductive"):
        flags = ["--inputs", str(inputs), "--kind", kind, "--threshold", "1"]
        assert main(["certify", str(path), *flags, "--out", str(tmp_path / "c.jsonl")]) == 0
        cli = json.loads((tmp_path / "c.jsonl").read_text())
        e = cardinal.explain(str(path), x, kind, threshold=1.0)
        mine = e.to_dict()
        mine_proof, cli_proof = mine.pop("proof", None), cli.pop("proof", None)  # in memory here, a file there
        assert _untimed(mine) == _untimed(cli)
        assert (mine_proof is None) == (cli_proof is None)
        if cli_proof is not None and cli_proof["file"] is not None:
            assert (mine_proof["claim"], mine_proof["accepted"]) == (cli_proof["claim"], cli_proof["accepted"])
        assert main(["explain", str(path), *flags, "--out", str(tmp_path / "e.jsonl")]) == 0
        cli = json.loads((tmp_path / "e.jsonl").read_text())
        assert cardinal.explain(str(path), x, kind, threshold=1.0, prove=False).to_dict() == cli


def test_a_batch_gives_what_each_input_gives_alone() -> None:
    net = _network(3, 4, monotone=False)
    X = np.round(np.random.default_rng(5).uniform(0, 1, (3, 4)) * 8) / 8
    batch = cardinal.explain(net, X, "abductive", time_limit=UNBOUNDED)
    assert isinstance(batch, list) and len(batch) == 3
    for x, e in zip(X, batch, strict=True):
        alone = cardinal.explain(net, x, "abductive", time_limit=UNBOUNDED)
        assert (alone.features, alone.proved, alone.lower, alone.upper, alone.verdict) == (
            e.features, e.proved, e.lower, e.upper, e.verdict
        )


def test_certificates_go_into_proof_dir_and_check(tmp_path) -> None:
    net = _network(8, 4, monotone=True)
    e = cardinal.explain(net, np.array([0.9, 0.8, 0.7, 0.6]), "contrastive", proof_dir=tmp_path / "proofs")
    assert e.proved
    if e.certificate is None:  # nothing to certify: an empty minimum or no claim
        assert e.certificate_reason
        return
    assert e.certificate.path is not None and e.certificate.path.is_file()
    assert e.certificate.path.parent == tmp_path / "proofs"
    assert e.certificate.check()
    assert main(["proof", "check", str(e.certificate.path)]) == 0


def test_methods_and_a_torch_module() -> None:
    """method: greedy on a monotone network equals auto there; deletion is subset-minimal and
    never smaller than the proved minimum; minimum runs the solvers alone; a torch module is read
    as the same network."""
    net = _network(4, 4, monotone=True)
    x = np.array([0.5, 0.25, 0.75, 0.5])
    auto = cardinal.explain(net, x, "abductive")
    greedy = cardinal.explain(net, x, "abductive", method="greedy", prove=False)
    assert greedy.method == "greedy" and greedy.proved is False and greedy.verdict is None
    deletion = cardinal.explain(net, x, "abductive", method="deletion", prove=False)
    assert auto.proved and len(deletion.features) >= auto.upper and len(greedy.features) >= auto.upper
    minimum = cardinal.explain(net, x, "abductive", method="minimum")
    assert minimum.proved and len(minimum.features) == auto.upper
    module = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1)).double()
    with torch.no_grad():
        for linear, layer in zip((module[0], module[2]), net.layers, strict=True):
            linear.weight.copy_(torch.tensor(layer.weight))
            linear.bias.copy_(torch.tensor(layer.bias))
    from_torch = cardinal.explain(module, x, "abductive")
    assert (from_torch.features, from_torch.proved) == (auto.features, auto.proved)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"kind": "both"}, "kind 'both'"),
        ({"method": "fast"}, "method 'fast'"),
        ({"method": "minimum", "prove": False}, "needs prove=True"),
    ],
)
def test_bad_arguments_are_one_line_errors(arguments, message) -> None:
    net = _network(1, 3, monotone=True)
    with pytest.raises(InputError, match=message):
        cardinal.explain(net, np.zeros(3), **arguments)


def test_greedy_on_a_network_that_is_not_monotone_is_refused() -> None:
    relu, identity = Activation.make("relu"), Activation.make("identity")
    hidden = Layer(np.array([[1.0, -1.0], [-1.0, 1.0]]), np.zeros(2), relu)  # |x0 − x1|: neither sign
    net = Network([hidden, Layer(np.array([[1.0, 1.0]]), np.array([-0.5]), identity)])
    assert not net.is_sign_monotone
    with pytest.raises(InputError, match="sign-monotone"):
        cardinal.explain(net, np.array([0.5, 0.5]), method="greedy", domain=Domain.unit(2))


def _gone(pid: int) -> bool:
    """Whether process `pid` has ended (absent, or a zombie its parent has yet to reap)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def _solver_pids(explainer: cardinal.Explainer) -> list[int]:
    """The pids of the solver processes an Explainer holds now (its pool's backends and oracle engines)."""
    from cardinal.solvers.guard import GuardedSolver

    pool = explainer._pool
    assert pool is not None
    guarded = [*pool.backends.values(), *pool.oracle._started.values()]
    return [g._child.pid for g in guarded if isinstance(g, GuardedSolver) and g._child is not None]


@pytest.mark.parametrize("monotone", [True, False])
def test_an_explainer_answers_as_explain_and_ends_its_solvers(monotone: bool) -> None:
    """`Explainer.explain` gives, input after input and with or without `prove`, the answer and the
    record (timings aside) that the one-shot `cardinal.explain` gives; after close its solver
    processes are gone (on the small monotone network none was started: enumerate answers in
    process) and it answers no more."""
    net = _network(11 if monotone else 12, 4, monotone=monotone)
    X = np.round(np.random.default_rng(6).uniform(0, 1, (3, 4)) * 8) / 8
    with cardinal.Explainer(net, time_limit=UNBOUNDED) as explainer:
        for x in X:
            for kind in ("contrastive", "abductive"):
                for prove in (True, False):
                    mine, alone = explainer.explain(x, kind, prove=prove), cardinal.explain(net, x, kind, prove=prove, time_limit=UNBOUNDED)
                    assert (mine.features, mine.proved, mine.lower, mine.upper, mine.verdict, mine.method) == (
                        alone.features, alone.proved, alone.lower, alone.upper, alone.verdict, alone.method
                    )
                    assert _untimed(mine.to_dict()) == _untimed(alone.to_dict())
        batch = explainer.explain(X, "abductive")
        assert [e.features for e in batch] == [cardinal.explain(net, x, "abductive", time_limit=UNBOUNDED).features for x in X]
        pids = _solver_pids(explainer)
        if monotone:  # 4 features: enumerate answers in this process, no solver process started
            assert pids == []
        else:
            assert pids and not any(_gone(pid) for pid in pids)
    deadline = time.monotonic() + 60  # SIGKILL is sent at close; the kernel ends the process a moment later
    while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(pid) for pid in pids)
    with pytest.raises(InputError, match="closed"):
        explainer.explain(X[0])

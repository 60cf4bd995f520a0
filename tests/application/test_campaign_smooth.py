"""Campaigns route monotone networks and networks with smooth units to z3 whatever their width
(its lazy loop scales with the features; the MILPs cannot encode smooth units, enumeration stops
at 20 features), and z3 decides them in exact arithmetic."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import z3  # noqa: F401 (the [all] extras promise it: missing fails, not skips)
from bruteforce import random_network as any_network
from cardinal.verify.campaign import CampaignSettings, run_campaign, solvers_for
from cardinal.verify.generate import median_threshold, random_network
from cardinal.verify.suites import Instance

from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.io import JsonLines


def test_routing_by_width_and_activation() -> None:
    rng = np.random.default_rng(0)
    solvers = ("gurobi", "highs", "z3", "enumerate")
    assert solvers_for(random_network(rng, 44, (8,), "relu"), solvers) == ("gurobi", "highs", "z3")
    not_monotone = any_network(rng, 44, (8,), Activation.make("relu"), monotone=False)
    assert solvers_for(not_monotone, solvers) == ("gurobi", "highs")
    assert solvers_for(random_network(rng, 44, (8,), "tanh"), solvers) == ("gurobi", "highs", "z3")
    assert solvers_for(random_network(rng, 24, (8,), "sigmoid"), solvers) == ("gurobi", "highs", "z3")
    assert solvers_for(random_network(rng, 12, (8,), "sigmoid"), solvers) == solvers


def test_smooth_networks_beyond_enumeration_are_certified_by_z3(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    instances = []
    for activation, n in (("sigmoid", 24), ("tanh", 44)):
        net = random_network(rng, n, (8,), activation)
        X = rng.random((2, n))
        instances.append(Instance(f"wide-{activation}", "random", net, X, median_threshold(net, X), Domain.unit(n)))
    run_campaign("wide", tmp_path, CampaignSettings(("z3", "enumerate"), 30.0), instances=instances)
    records = JsonLines(tmp_path / "records.jsonl").read()
    assert len(records) == 8
    for record in records:
        assert list(record["solvers"]) == ["z3"], record
        assert record["verdict"] in ("greedy_minimal", "greedy_suboptimal"), record
        assert record["certified"], record


def test_wide_relu_networks_are_certified_by_z3(tmp_path: Path) -> None:
    """Beyond z3's cap for full encodings (40 features), a monotone ReLU network still gets z3."""
    rng = np.random.default_rng(5)
    n = 64
    net = random_network(rng, n, (16, 16), "relu")
    X = rng.random((3, n))
    instance = Instance("wide-relu", "random", net, X, median_threshold(net, X), Domain.unit(n))
    run_campaign("wide", tmp_path, CampaignSettings(("z3", "enumerate"), 30.0), instances=[instance])
    records = JsonLines(tmp_path / "records.jsonl").read()
    assert len(records) == 6
    for record in records:
        assert list(record["solvers"]) == ["z3"], record
        assert record["verdict"] in ("greedy_minimal", "greedy_suboptimal"), record
        assert record["certified"], record

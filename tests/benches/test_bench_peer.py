"""The peer column of bench/solvers.py (gurobi-machinelearning's MILP) against brute force, and the
cactus plot. Skipped where gurobi-ml is not installed (`pip install 'cardinal[peer]'`)."""

from __future__ import annotations

from pathlib import Path

import gurobi_ml  # noqa: F401 (the [all] extras promise it: missing fails, not skips)
import numpy as np
import pytest
from bruteforce import monotone_minimum
from cardinal.verify.generate import median_threshold, random_network

from bench.peer import Peer, peer_model
from bench.solvers import cactus, main
from cardinal.domain import Domain
from cardinal.problem import Problem, Status


def test_peer_answers_the_certification_question_like_brute_force() -> None:
    """For k = minimum − 1 the peer finds nothing (none_within); for k = minimum it finds a set of
    that size that holds in exact arithmetic; both kinds, both goal directions."""
    rng = np.random.default_rng(2)
    peer = Peer()
    checked = 0
    try:
        for _ in range(4):
            n = 7
            net = random_network(rng, n, (6, 5), "relu")
            X = rng.random((3, n))
            threshold = median_threshold(net, X)
            model = peer_model(net)
            for x in X:
                for kind in ("contrastive", "abductive"):
                    problem = Problem.make(net, x, kind, Domain.unit(n), threshold)
                    minimum = monotone_minimum(problem)
                    if not minimum:
                        continue
                    below = peer.solve(model, problem, minimum - 1, 30.0)
                    assert below.status == Status.NONE_WITHIN, below
                    found = peer.solve(model, problem, minimum, 30.0)
                    assert found.status == Status.OPTIMAL and found.size == minimum and found.replayed, found
                    checked += 1
    finally:
        peer.close()
    assert checked >= 10


def test_peer_model_is_plain_linear_and_relu() -> None:
    net = random_network(np.random.default_rng(0), 4, (3,), "relu")
    assert [type(m).__name__ for m in peer_model(net)] == ["Linear", "ReLU", "Linear"]
    x = np.random.default_rng(1).random((5, 4))
    import torch

    assert np.allclose(peer_model(net)(torch.tensor(x)).detach().numpy()[:, 0], net.forward(x).numpy())


def test_cactus_plot_is_written(tmp_path: Path) -> None:
    done = {(8, (4,)): {"z3": [(0.01, "none_within", False), (0.5, "timeout", False)], "gurobi-ml": [(0.2, "optimal", True)]}}
    path = tmp_path / "cactus.png"
    cactus(done, 1.0, path)
    assert path.stat().st_size > 1000


def test_a_job_count_below_one_is_refused_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--jobs", "0", "--out", str(tmp_path / "solvers.md")])
    assert stop.value.code == 2 and "--jobs must be at least 1, got 0" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())

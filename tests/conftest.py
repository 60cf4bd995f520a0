"""Shared fixtures: the docs/design.md §3 two-unit network and small helpers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cardinal.domain import Domain
from cardinal.network import Network

DESIGN_NETWORK = {
    "format": "cardinal.network/1",
    "layers": [
        {"weight": [[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]], "bias": [-1.0, 0.0], "activation": "relu"},
        {"weight": [[1.0, 0.6]], "bias": [0.0], "activation": "identity"},
    ],
}


@pytest.fixture(autouse=True)
def _in_a_fresh_folder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs in a folder of its own, so that what a command writes by default beside its
    working directory (./cardinal-proofs/, ./cardinal-cases/) never lands in the repository."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture
def design_network() -> Network:
    return Network.from_json(DESIGN_NETWORK)


@pytest.fixture
def design_network_file(tmp_path: Path) -> Path:
    path = tmp_path / "net.json"
    path.write_text(json.dumps(DESIGN_NETWORK))
    return path


def brute_force_minimum(net: Network, x: np.ndarray, kind: str, domain: Domain, threshold: float) -> int | None:
    """Smallest |S| of a valid explanation on a monotone network (exact arithmetic, `bruteforce`), None if none."""
    # imported here: scripts that import this module from the repository root lack tests/ on their path
    from bruteforce import shortcut_minimum

    return shortcut_minimum(net, x, kind, domain.lower, domain.upper, threshold)

"""One pipeline under every driver: the same question gives the same record through
`cardinal.explain`, `Explainer.explain`, the Python `certify`, `cardinal certify` and a campaign
unit (`campaign.certify_unit`, built as crosscheck builds it).

Compared: every field the drivers share — the explainer's answer (`method`, `traversal`,
`greedy`, `greedy_exists`, `greedy_check`), the solvers' outcomes, the verdict and its evidence
(`verdict`, `certified`, `minimum`, `minimum_witness`, `minimum_proved`, `minimum_lower`,
`proved_by`, `gap`, `refuted`), `row`, `kind`, `prediction`, `threshold`, `radius`, `notes`, and the
certificate's `claim`, `problem` and `accepted`. Left out, and why: measured seconds (timings);
the certificate's `file`, `sha256` and `bytes` (a file in a folder, or held in memory with its
network embedded: other bytes for the same claim); the campaign's context (`key`, `instance`,
`family`, `activation`, `network_hash`, `n`, `widths`, `output`, `margin`, `tie_decided`,
`solvers_from`, and `domain`, which there is the row's own box where certify's is the box the
ball is cut from); `classes` and `names`, which the campaign's records do not carry.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cardinal.verify.campaign import Certificates, certify_unit, units_of
from cardinal.verify.certify import SolverPool, proving_solvers
from cardinal.verify.cli import main
from cardinal.verify.instance import Instance
from cardinal.verify.pipeline import Plan, certify

import cardinal
from cardinal import Domain, Network
from cardinal.activations import Activation
from cardinal.network import Layer

UNBOUNDED = 3600.0  # no call comes near it: no answer depends on the machine's speed
SHARED = (
    "row", "kind", "prediction", "threshold", "radius", "notes", "method", "traversal", "greedy", "greedy_exists",
    "greedy_check", "solvers", "verdict", "certified", "minimum", "minimum_witness", "minimum_proved", "minimum_lower",
    "proved_by", "gap", "refuted",
)
PROOF = ("claim", "problem", "accepted", "reason")


def _network(seed: int, outputs: int, monotone: bool) -> Network:
    """A 3-feature relu network with `outputs` outputs, weights on a grid of 2^-3 (exact in every format)."""
    rng = np.random.default_rng(seed)
    layers, fan_in = [], 3
    for width, activation in ((4, "relu"), (outputs, "identity")):
        weight = np.round(rng.normal(size=(width, fan_in)) * 8) / 8
        weight = np.abs(weight) if monotone else weight
        bias = np.round(rng.normal(size=width) * 4) / 8
        layers.append(Layer(weight, bias, Activation.make(activation)))
        fan_in = width
    return Network(layers)


NETWORKS = {"k1-monotone": (_network(1, 1, True), 0.5), "k1": (_network(2, 1, False), 0.0), "k3": (_network(3, 3, False), None)}
X = np.array([0.375, 0.625, 0.5])


def _shared(record: dict[str, Any]) -> dict[str, Any]:
    """The fields compared (module docstring), without measured seconds."""
    shared = {name: _untimed(record.get(name)) for name in SHARED}
    proof = record.get("proof")
    shared["proof"] = None if proof is None else {name: proof.get(name) for name in PROOF}
    return shared


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in ("seconds", "check_seconds")}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _cli(tmp_path: Path, path: Path, kind: str, threshold: float | None, radius: float | None) -> dict[str, Any]:
    inputs, out = tmp_path / "x.csv", tmp_path / f"{kind}.jsonl"
    inputs.write_text(",".join(map(str, X)) + "\n")
    flags = ["--inputs", str(inputs), "--kind", kind, "--time-limit", str(UNBOUNDED), "--proof-time-limit", str(UNBOUNDED)]
    flags += [] if threshold is None else ["--threshold", str(threshold)]
    flags += [] if radius is None else ["--radius", str(radius)]
    assert main(["certify", str(path), *flags, "--out", str(out)]) == 0
    (line,) = [json.loads(text) for text in out.read_text().splitlines()]
    return line


def _campaign(net: Network, kind: str, threshold: float | None, radius: float | None) -> dict[str, Any]:
    """The record crosscheck writes for the question (method auto, default solvers until the first proof)."""
    domain = Domain.unit(3)
    instance = Instance("one", "random", net, X[None, :], threshold, domain, (kind,), radius)
    names = proving_solvers(net, domain)
    (unit,) = units_of(instance, names, UNBOUNDED, set(), Certificates(time_limit=UNBOUNDED), ("auto",))
    with SolverPool(unit.solvers, first_proof=True) as pool:
        ((record, _, _),) = certify_unit(unit, pool)
    return record.to_json()


@pytest.mark.parametrize("radius", [None, 0.2])
@pytest.mark.parametrize("name", list(NETWORKS))
def test_every_driver_gives_the_same_record(tmp_path: Path, name: str, radius: float | None) -> None:
    net, threshold = NETWORKS[name]
    path = tmp_path / "net.json"
    net.save(path)
    with cardinal.Explainer(path, radius=radius, threshold=threshold, time_limit=UNBOUNDED) as explainer:
        for kind in ("contrastive", "abductive"):
            front = cardinal.explain(path, X, kind, radius=radius, threshold=threshold, time_limit=UNBOUNDED).to_dict()
            kept = explainer.explain(X, kind).to_dict()
            (verdict,) = certify(net, X, kind, threshold=threshold, radius=radius, plan=Plan(time_limit=UNBOUNDED))
            cli = _cli(tmp_path, path, kind, threshold, radius)
            campaign = _campaign(net, kind, threshold, radius)
            expected = _shared(cli)
            assert expected["method"] == ("greedy" if net.is_sign_monotone else "deletion")  # auto, in every driver
            assert _shared(front) == expected
            assert _shared(kept) == expected
            assert _shared(campaign) == expected
            python = verdict.to_json()  # no settings there (their notes), no certificates (proved_by engine)
            compared = [k for k in SHARED if k in python and k not in ("notes", "proved_by")]  # proved_by: no certificate
            assert {k: _untimed(python[k]) for k in compared} == {k: expected[k] for k in compared}

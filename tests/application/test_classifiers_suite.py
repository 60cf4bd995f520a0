"""The `classifiers` suite (verify.classifiers): models built as documented, read back through
cardinal's readers, and records reproducible from the seeds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cardinal.verify.campaign import CampaignSettings, run_campaign
from cardinal.verify.classifiers import CREDIT_FEATURES, SIGNS, classifier_instances
from cardinal.verify.record import without_timings

from cardinal.io import JsonLines


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose models/ holds the four models, trained once for the module (read-only)."""
    folder = tmp_path_factory.mktemp("classifiers")
    list(classifier_instances(folder, rows=1, radii=(0.1,)))
    return folder


def test_models_have_the_documented_shapes_and_signs(built: Path) -> None:
    """digits-fc 64 → 16 → 10 from ONNX, digits-conv unrolled from a torch file with its input
    shape, credit models whose first-layer columns keep the documented signs and later layers
    ≥ 0; every weight on the 2^-10 grid; test rows in [0, 1] with the radius recorded."""
    instances = {i.id: i for i in classifier_instances(built, rows=2, radii=(0.1,))}
    assert set(instances) == {"digits-fc-r0.1", "digits-conv-r0.1", "credit-signs-r0.1", "credit-partial-r0.1"}
    assert instances["digits-fc-r0.1"].net.widths == (16, 10)
    conv = instances["digits-conv-r0.1"].net
    assert conv.widths == (144, 10) and conv.metadata.input_shape == (1, 8, 8)
    for name in ("credit-signs", "credit-partial"):
        net = instances[f"{name}-r0.1"].net
        assert net.n_inputs == len(CREDIT_FEATURES) and net.n_outputs == 1
        first = net.layers[0].weight
        for i, sign in enumerate(SIGNS[name]):
            if sign:
                assert (np.sign(first[:, i]) * sign >= 0).all(), (name, i)
        assert not SIGNS[name].count(0) or any((first[:, i] > 0).any() and (first[:, i] < 0).any() for i in range(8))
        assert all((layer.weight >= 0).all() for layer in net.layers[1:])
    for instance in instances.values():
        assert instance.radius == 0.1 and instance.X.shape == (2, instance.net.n_inputs)
        assert instance.threshold == (None if instance.net.n_outputs > 1 else 0.0)
        for layer in instance.net.layers:
            assert np.array_equal(np.round(layer.weight * 1024) / 1024, layer.weight)


@pytest.mark.parametrize(
    "names", [("credit-partial",), pytest.param(("digits-fc", "credit-partial"), marks=pytest.mark.slow)], ids=["credit", "digits+credit"]
)
def test_a_classifiers_slice_built_twice_gives_the_same_records(built: Path, tmp_path: Path, names: tuple[str, ...]) -> None:
    """Reproducible from the seeds: two folders, each with its models trained from scratch (the
    module's, and a fresh one), one row of credit-partial (with -m slow also digits-fc) at radius
    0.05: the same records apart from timings."""

    def run(models: Path, out: Path) -> list[dict]:
        instances = classifier_instances(models, rows=1, radii=(0.05,), names=names)
        run_campaign("classifiers", out, CampaignSettings(("highs", "enumerate"), 30.0), instances=instances)
        return without_timings(JsonLines(out / "records.jsonl").read())

    first, second = run(built, tmp_path / "a"), run(tmp_path / "b", tmp_path / "b")
    assert len(first) == 2 * len(names) and first == second
    assert all(record["radius"] == 0.05 for record in first)

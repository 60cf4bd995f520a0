"""The guard of the example credit model (`train.py` wrote the files): run by `python -m pytest`."""

from __future__ import annotations

from pathlib import Path

import pytest
from cardinal.verify.testing import assert_explanations

pytest.importorskip("onnx")  # cardinal[onnx] reads the model
HERE = Path(__file__).resolve().parent
MODEL, APPLICANTS = HERE / "credit.onnx", HERE / "applicants.csv"


def test_reasons_are_minimum_and_unchanged() -> None:
    """Contrastive explanations (the features that would have to change for the other decision):
    each exactly a minimum one, none larger or different from the baseline."""
    assert_explanations(
        MODEL, APPLICANTS, kind="contrastive", require="minimum", baseline=HERE / "baseline.jsonl", fail_on=("larger", "changed")
    )


def test_abductive_explanations_are_valid_but_not_all_subset_minimal() -> None:
    """Abductive explanations (features that alone secure the decision) are exactly valid; for three
    applicants greedy keeps a feature it does not need (its scores tie and ties go by index), and
    `require="subset"` says so, with the smaller explanation."""
    assert_explanations(MODEL, APPLICANTS, kind="abductive", require="valid")
    with pytest.raises(AssertionError) as failure:
        assert_explanations(MODEL, APPLICANTS, kind="abductive", require="subset")
    failed = [line for line in str(failure.value).splitlines() if "not_subset_minimal" in line]
    assert [line.split(":")[0] for line in failed] == [
        "row 2 (abductive) {0, 1, 2, 3}",
        "row 3 (abductive) {0, 1, 2, 3, 4, 5}",
        "row 7 (abductive) {0, 1, 2, 3, 4, 5}",
    ]


def test_training_reproduces_the_committed_model() -> None:
    """`train.py` is deterministic (float64, one thread, full batch, weights rounded to 2^-10): it
    trains the committed network again, weight for weight."""
    import importlib.util

    from cardinal.network import Network

    spec = importlib.util.spec_from_file_location("credit_train", HERE / "train.py")
    assert spec is not None and spec.loader is not None
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    assert Network.from_torch(train.train()).hash == Network.load(MODEL).hash

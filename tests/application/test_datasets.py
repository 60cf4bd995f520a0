"""Dataset loaders: shapes, the [0,1] box, monotone/flip bookkeeping, user CSVs and their errors.

File-based datasets are skipped when the data folder ($CARDINAL_DATA or ../shared/data) lacks them.
"""

from __future__ import annotations

import re
from pathlib import Path

import cardinal.verify.datasets
import numpy as np
import pandas as pd
import pytest
from cardinal.verify.datasets import (
    DATA_FILES,
    check_data_files,
    cmn_split,
    data_directory,
    dataset_names,
    load_csv,
    load_dataset,
)

from cardinal.errors import InputError

FILES = {
    "blog": "BlogFeedback.zip",
    "loan": "loan_data.csv",
    "compas": "compas-scores-two-years.csv",
    "auto-mpg": "COMET/Auto-MPG/train_data.csv",
    "heart": "COMET/Heart/train_data.csv",
}
# name: (train rows, test rows, features, task, names of the monotone features, names of the flipped ones)
EXPECTED = {
    "blog": (47287, 7027, 276, "regression", ("A51", "A52", "A53", "A54", "A56", "A57", "A58", "A59"), ()),
    "loan": (7662, 1916, 19, "classification", ("pub.rec", "dti", "fico", "log.annual.inc"), ("fico", "log.annual.inc")),
    "compas": (4937, 1235, 13, "classification", ("priors_count", "juv_fel_count", "juv_misd_count", "juv_other_count"), ()),
    "auto-mpg": (314, 78, 7, "regression", ("Displacement", "Horsepower", "Weight"), ("Displacement", "Horsepower", "Weight")),
    "heart": (242, 61, 13, "classification", ("trestbps", "chol"), ()),
    "breast-cancer": (455, 114, 30, "classification", (), ()),
    "diabetes": (353, 89, 10, "regression", (), ()),
}
_cache: dict[str, cardinal.verify.datasets.Dataset] = {}


def dataset(name: str) -> cardinal.verify.datasets.Dataset:
    """Load once per test session; skip when the file is absent."""
    if name in FILES and not (data_directory() / FILES[name]).is_file():
        pytest.skip(f"{FILES[name]} not in {data_directory()}")
    if name not in _cache:
        _cache[name] = load_dataset(name)
    return _cache[name]


def test_default_data_directory_is_shared_data_beside_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CARDINAL_DATA", raising=False)
    assert data_directory() == Path(cardinal.verify.datasets.__file__).resolve().parents[2] / "shared" / "data"
    assert set(dataset_names()) == set(EXPECTED)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_shapes_box_and_monotone_bookkeeping(name: str) -> None:
    data = dataset(name)
    n_train, n_test, n, task, monotone, flipped = EXPECTED[name]
    assert (data.X_train.shape, data.X_test.shape, data.y_train.shape, data.y_test.shape) == (
        (n_train, n),
        (n_test, n),
        (n_train,),
        (n_test,),
    )
    assert data.task == task and len(data.feature_names) == n == data.n_features
    for X in (data.X_train, data.X_test):
        assert X.dtype == np.float64 and not X.flags.writeable
        assert X.min() >= 0.0 and X.max() <= 1.0
    assert np.allclose(data.X_train.min(axis=0)[np.ptp(data.X_train, axis=0) > 0], 0.0)  # train min-max scaling
    assert tuple(data.feature_names[i] for i in data.monotone) == monotone
    assert tuple(data.feature_names[i] for i in data.flipped) == flipped
    if task == "classification":
        assert set(np.unique(data.y_train)) == {0.0, 1.0}
    else:
        assert data.target_range is not None and data.y_train.min() == 0.0 and data.y_train.max() == 1.0
    assert data.source


def test_loan_fico_is_flipped_against_the_raw_file() -> None:
    data = dataset("loan")
    raw = pd.read_csv(data_directory() / "loan_data.csv")
    train, _ = cmn_split(len(raw))
    fico = raw["fico"].to_numpy(np.float64)[train]
    column = data.feature_names.index("fico")
    expected = 1.0 - (fico - fico.min()) / (fico.max() - fico.min())
    assert np.allclose(data.X_train[:, column], expected)
    assert data.y_train.tolist() == raw["not.fully.paid"].to_numpy(np.float64)[train].tolist()
    assert np.corrcoef(data.X_train[:, column], data.y_train)[0, 1] > 0.1  # low FICO → more defaults


def test_auto_mpg_decreasing_features_correlate_positively_after_flipping() -> None:
    data = dataset("auto-mpg")
    for i in data.flipped:
        assert np.corrcoef(data.X_train[:, i], data.y_train)[0, 1] > 0.5
    assert data.target_range == (9.0, 46.6)


def test_blog_literature_preprocessing() -> None:
    data = dataset("blog")
    assert data.target_range == (0.0, 8.0)  # rows above the 90th percentile (8 comments) dropped
    assert not {"A13", "A33", "A38", "A278"} & set(data.feature_names)  # the constant columns
    assert data.feature_names[:8] == EXPECTED["blog"][4]


def test_compas_one_hot_groups_sum_to_one() -> None:
    data = dataset("compas")
    for prefix in ("race=", "sex="):
        columns = [i for i, name in enumerate(data.feature_names) if name.startswith(prefix)]
        assert np.all(data.X_train[:, columns].sum(axis=1) == 1.0)
    assert data.y_train.sum() + data.y_test.sum() == 2809


@pytest.mark.parametrize("name", list(FILES))
def test_missing_file_names_file_place_and_origin(name: str, tmp_path: Path) -> None:
    with pytest.raises(InputError) as error:
        load_dataset(name, data_dir=tmp_path)
    message = str(error.value)
    assert FILES[name] in message and str(tmp_path) in message
    assert "comes from" in message and ("GitHub" in message or "UCI" in message)


def test_data_directory_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CARDINAL_DATA", str(tmp_path))
    with pytest.raises(InputError, match=re.escape(str(tmp_path / "COMET" / "Heart"))):
        load_dataset("heart")
    assert data_directory() == tmp_path
    assert load_dataset("breast-cancer").n_features == 30  # bundled with scikit-learn: no file needed


# ---------------------------------------------------------------------------- user CSVs
def write_csv(path: Path, rows: int = 20, target: str = "label", values: np.ndarray | None = None) -> Path:
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"a": rng.uniform(-5, 5, rows), "b": rng.integers(0, 100, rows).astype(float)})
    frame[target] = (frame["a"] > 0).astype(int) if values is None else values
    frame.to_csv(path, index=False)
    return path


def test_csv_classification_inferred(tmp_path: Path) -> None:
    data = load_dataset(f"csv:{write_csv(tmp_path / 'd.csv')}", target="label")
    assert data.task == "classification" and data.feature_names == ("a", "b")
    assert data.X_train.shape == (16, 2) and data.X_test.shape == (4, 2)
    assert data.monotone == () and data.flipped == ()
    assert data.X_train.min() == 0.0 and data.X_train.max() == 1.0


def test_csv_regression_scales_target_and_clips_test_inputs(tmp_path: Path) -> None:
    values = np.linspace(10.0, 29.0, 20)
    path = write_csv(tmp_path / "r.csv", target="y", values=values)
    frame = pd.read_csv(path)
    _, test = cmn_split(20)
    frame.loc[test[0], "a"] = 1e6  # far outside the training range
    frame.to_csv(path, index=False)
    data = load_csv(path, target="y")
    assert data.task == "regression" and data.target_range is not None
    low, high = data.target_range
    assert np.allclose(low + data.y_test * (high - low), values[test])
    assert data.X_test[0, 0] == 1.0 and data.X_test.max() <= 1.0


def test_csv_errors_name_file_row_and_column(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "bad.csv")
    with pytest.raises(InputError, match="no target column 'y'"):
        load_csv(path, target="y")
    frame = pd.read_csv(path).astype(object)
    frame.loc[3, "b"] = "twelve"
    frame.to_csv(path, index=False)
    with pytest.raises(InputError, match=r"bad\.csv: row 3, column 'b': 'twelve'"):
        load_csv(path, target="label")
    frame.loc[3, "b"] = 1.0
    frame.loc[5, "a"] = None
    frame.to_csv(path, index=False)
    with pytest.raises(InputError, match=r"row 5, column 'a'"):
        load_csv(path, target="label")
    with pytest.raises(InputError, match="not found"):
        load_csv(tmp_path / "absent.csv", target="label")


def test_csv_task_and_option_errors(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "d.csv", values=np.arange(20) % 3)
    with pytest.raises(InputError, match="0/1 target"):
        load_csv(path, target="label", task="classification")
    with pytest.raises(InputError, match="needs a target"):
        load_dataset(f"csv:{path}")
    with pytest.raises(InputError, match="takes no options"):
        load_dataset("breast-cancer", target="label")
    with pytest.raises(InputError, match="unknown dataset"):
        load_dataset("mnist")


def test_paper_suite_with_a_data_folder_lacking_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from cardinal.verify.cli import main

    monkeypatch.setenv("CARDINAL_DATA", str(tmp_path / "elsewhere"))  # restored after the test
    out = tmp_path / "out"
    args = ["crosscheck", "--suite", "paper", "--data-dir", str(tmp_path), "--out", str(out), "--solvers", "enumerate"]
    assert main(args) == 2
    err = capsys.readouterr().err
    # the first message names every missing file at once
    assert "7 data file(s) missing" in err and str(tmp_path) in err
    for file in DATA_FILES:
        assert file.relative in err
    assert not (out / "records.jsonl").exists()


def test_data_check_reports_missing_and_altered_files(tmp_path: Path, capsys) -> None:
    from cardinal.verify.cli import main

    (tmp_path / "loan_data.csv").write_text("not the LendingClub file\n")
    states = dict((file.relative, state) for file, state in check_data_files(None, tmp_path))
    assert states["loan_data.csv"] == "checksum differs"
    assert states["BlogFeedback.zip"] == "missing" and len(states) == len(DATA_FILES)
    assert [file.relative for file, _ in check_data_files(["heart"], tmp_path)] == [
        "COMET/Heart/train_data.csv",
        "COMET/Heart/test_data.csv",
    ]
    assert main(["data", "check", "--data-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "7 of 7 data files missing or altered" in out and "checksum differs" in out


def test_data_check_passes_on_the_shared_data() -> None:
    from cardinal.verify.cli import main

    if not all((data_directory() / file.relative).is_file() for file in DATA_FILES):
        pytest.skip(f"the data files are not in {data_directory()}")
    assert all(state == "ok" for _, state in check_data_files())
    assert main(["data", "check"]) == 0


def test_altered_data_files_are_named_not_a_traceback(tmp_path: Path) -> None:
    """A data file with other columns than the loader expects: one InputError naming the files
    whose checksum differs (issue 24; it was a KeyError traceback)."""
    folder = tmp_path / "COMET" / "Heart"
    folder.mkdir(parents=True)
    for part in ("train", "test"):
        (folder / f"{part}_data.csv").write_text(",a,b\n0,1,2\n")
    with pytest.raises(InputError, match=r"dataset heart: its data files are not the expected ones: COMET/Heart/train_data.csv"):
        load_dataset("heart", data_dir=tmp_path)
    (folder / "train_data.csv").write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(InputError, match=r"cannot read data file .*train_data.csv: 'utf-8' codec"):
        load_dataset("heart", data_dir=tmp_path)

"""Tabular datasets from the monotone-network literature, preprocessed for cardinal.

Every loader returns a `Dataset` whose inputs lie in the box [0,1]^n: each feature is min-max
scaled with the minimum and maximum of the *training* part, and test values outside that range
are clipped into [0, 1], so every test input is a valid input for `Domain.unit(n)`. Features that
the literature calls decreasing are flipped as 1 − x (listed in `Dataset.flipped`), so after
loading every feature in `Dataset.monotone` is non-decreasing. Regression targets are min-max
scaled on the training part too (`Dataset.target_range` keeps the raw minimum and maximum).

Fully monotone training (as in the paper, `verify.train`) treats *every* feature as
non-decreasing: the features without a literature direction are used as they are, so the network
is monotone in features that the data are not monotone in. The paper did the same.

Splits: a dataset's own split where it has one (UCI's for BlogFeedback, COMET's for Auto-MPG and
Heart); otherwise the CMN split: the rows, in file order after filtering, are permuted by
`numpy.random.RandomState(78712)` and the first int(0.8·N) form the training part.

Files are read from `data_dir`, else `$CARDINAL_DATA`, else `../shared/data` beside the
repository. `DATA_FILES` names each file with its SHA-256 and public source; `check_data_files`
reports every missing or altered file at once (`cardinal data check`). `breast-cancer` and
`diabetes` come with scikit-learn and need no file. Every file is read through the reading gate
(`cardinal.io.open_input`): a regular file of at most `MAX_DATA_BYTES`, a zip's members unpacked
included.
"""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cardinal.errors import InputError
from cardinal.io import MAX_DATA_BYTES, check_size, open_input, read_input

if TYPE_CHECKING:  # numpy and pandas are imported where used: `cardinal --help` lists the datasets without them
    import numpy as np
    import pandas as pd

SPLIT_SEED = 78712
TRAIN_FRACTION = 0.8
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"
TASKS = ("regression", "classification")


@dataclass(frozen=True, eq=False)
class Dataset:
    """A preprocessed dataset: X_train [N_train, n], y_train [N_train], X_test [N_test, n], y_test [N_test].

    All arrays are read-only float64; X lies in [0, 1]. Classification targets are 0/1; regression
    targets are scaled by the training minimum and maximum (`target_range`, raw units).
    `monotone` holds the indices of features with a literature monotonicity (after flipping, all
    non-decreasing); `flipped` the subset that were decreasing and replaced by 1 − x.
    """

    name: str
    feature_names: tuple[str, ...]
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    task: str
    target_name: str
    monotone: tuple[int, ...]
    flipped: tuple[int, ...]
    source: str
    target_range: tuple[float, float] | None = None
    feature_ranges: tuple[tuple[float, ...], tuple[float, ...]] | None = None  # raw training (min [n], max [n])

    def __post_init__(self) -> None:
        import numpy as np

        if self.task not in TASKS:
            raise InputError(f"dataset {self.name}: task must be one of {TASKS}, got {self.task!r}")
        n = len(self.feature_names)
        for part in ("train", "test"):
            X = np.array(getattr(self, f"X_{part}"), dtype=np.float64)
            y = np.array(getattr(self, f"y_{part}"), dtype=np.float64)
            if X.ndim != 2 or X.shape[1] != n or y.shape != (X.shape[0],):
                shapes = f"X_{part} {list(X.shape)} and y_{part} {list(y.shape)}"
                raise InputError(f"dataset {self.name}: {shapes} do not fit {n} features")
            if not (np.isfinite(X).all() and np.isfinite(y).all() and X.min(initial=0) >= 0 and X.max(initial=0) <= 1):
                raise InputError(f"dataset {self.name}: X_{part} must be finite and in [0, 1], y_{part} finite")
            X.setflags(write=False)
            y.setflags(write=False)
            object.__setattr__(self, f"X_{part}", X)
            object.__setattr__(self, f"y_{part}", y)
        if not set(self.flipped) <= set(self.monotone) <= set(range(n)):
            raise InputError(f"dataset {self.name}: flipped ⊆ monotone ⊆ feature indices fails")

    @property
    def n_features(self) -> int:
        return len(self.feature_names)


# ---------------------------------------------------------------------------- shared steps
def data_directory(data_dir: str | Path | None = None) -> Path:
    """`data_dir`, else `$CARDINAL_DATA`, else `../shared/data` relative to the repository root."""
    if data_dir is not None:
        return Path(data_dir)
    return Path(os.environ["CARDINAL_DATA"]) if os.environ.get("CARDINAL_DATA") else DEFAULT_DATA_DIR


@dataclass(frozen=True)
class DataFile:
    """One data file the named datasets read: where it goes under the data folder, its SHA-256,
    the datasets that need it, and where the public copy comes from."""

    relative: str
    sha256: str
    datasets: tuple[str, ...]
    source: str


DATA_FILES: tuple[DataFile, ...] = (
    DataFile(
        "BlogFeedback.zip",
        "d802b5ad26e333ba0f8ad5ceb878f5b4a26ec19797a0284612f7795a601ce0b8",
        ("blog",),
        "UCI BlogFeedback (Buza 2014); copy: github.com/Akshaya0909/enigma, BlogFeedback.zip",
    ),
    DataFile(
        "loan_data.csv",
        "91969386d42aa27a910a464b7987a9b225451282fa2934baf2c1afb9ef6480c7",
        ("loan",),
        "LendingClub 2007-2010 subset; copy: github.com/Jatin-Mehra119/loan_dataset, loan_data.csv",
    ),
    DataFile(
        "compas-scores-two-years.csv",
        "c451db85908b2f7fef1d83203bedf6b71ecda0d5af468d82ae62178f91d0cc7d",
        ("compas",),
        "ProPublica Machine Bias: github.com/propublica/compas-analysis, compas-scores-two-years.csv",
    ),
    *(
        DataFile(
            f"COMET/{folder}/{part}_data.csv",
            digest,
            (name,),
            f"COMET (Sivaraman et al. 2020, MIT): github.com/AishwaryaSivaraman/COMET, examples/{folder}/{part}_data.csv",
        )
        for folder, name, part, digest in (
            ("Auto-MPG", "auto-mpg", "train", "651719768d4bfca741847889777478b278dad02343acce51729034b78da702c9"),
            ("Auto-MPG", "auto-mpg", "test", "a0a382c4cc2bbf4f95ad89842c71867ac4afbac40532d01dc78c9b83a273ef4d"),
            ("Heart", "heart", "train", "8a456e308acef6688c5c36017bb1ca78b64804846aae4e415ba0cee73fea231c"),
            ("Heart", "heart", "test", "0454aeb41092b0b54d8e40b254700f16c79857ad48376bf2bf9be608944e6d1b"),
        )
    ),
)


def check_data_files(datasets: Sequence[str] | None = None, data_dir: str | Path | None = None) -> list[tuple[DataFile, str]]:
    """The state of every file the named datasets need (all when None): (file, "ok" | "missing" |
    "checksum differs" | "unreadable: why"), in `DATA_FILES` order."""
    folder = data_directory(data_dir)
    states = []
    for file in DATA_FILES:
        if datasets is not None and not set(file.datasets) & set(datasets):
            continue
        path = folder / file.relative
        if not path.exists():
            states.append((file, "missing"))
            continue
        try:
            digest = _sha256(path)
        except InputError as error:
            states.append((file, f"unreadable: {error}"))
            continue
        states.append((file, "ok" if digest == file.sha256 else "checksum differs"))
    return states


def _sha256(path: Path) -> str:
    """The SHA-256 of a data file, read in blocks through the reading gate."""
    digest = hashlib.sha256()
    with open_input(path, "data file", MAX_DATA_BYTES) as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def require_data_files(datasets: Sequence[str], data_dir: str | Path | None = None) -> None:
    """Raise one `InputError` naming every missing file the datasets need (checksums are not
    required to match: `cardinal data check` reports those)."""
    missing = [file.relative for file, state in check_data_files(datasets, data_dir) if state == "missing"]
    if missing:
        raise InputError(
            f"{len(missing)} data file(s) missing under {data_directory(data_dir)}: {', '.join(missing)} "
            "(set $CARDINAL_DATA or --data-dir; `cardinal data check` lists their sources)"
        )


def _require(data_dir: Path, relative: str, origin: str) -> Path:
    path = data_dir / relative
    if not path.exists():
        raise InputError(
            f"data file {relative} not found (looked for {path}; set $CARDINAL_DATA or --data-dir to the folder "
            f"holding it). It comes from {origin}; see the data folder's README.md."
        )
    return path


def _read_csv(path: Path, what: str, **options: Any) -> pd.DataFrame:
    """`pandas.read_csv` of a file read through the reading gate; unreadable text is an `InputError`."""
    return _parse_csv(read_input(path, what, MAX_DATA_BYTES), f"{what} {path}", **options)


def _parse_csv(data: bytes, where: str, **options: Any) -> pd.DataFrame:
    import pandas as pd

    try:
        return pd.read_csv(io.BytesIO(data), **options)
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise InputError(f"cannot read {where}: {' '.join(str(error).split())}") from None


def cmn_split(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (train [int(0.8·n)], test [rest]) of the CMN split: RandomState(78712) permutation."""
    import numpy as np

    order = np.random.RandomState(SPLIT_SEED).permutation(n)
    cut = int(n * TRAIN_FRACTION)
    return order[:cut], order[cut:]


def _split_frame(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    train, test = cmn_split(len(frame))
    return frame.iloc[train], frame.iloc[test]


def _finish(
    name: str,
    train: pd.DataFrame,
    test: pd.DataFrame,
    target: str,
    task: str,
    source: str,
    increasing: Sequence[str] = (),
    decreasing: Sequence[str] = (),
) -> Dataset:
    """Scale features (train min-max, test clipped), flip `decreasing`, scale a regression target.

    `train` and `test` hold the numeric features in their final order plus the `target` column.
    """
    import numpy as np

    features = [column for column in train.columns if column != target]
    X_train, X_test = train[features].to_numpy(np.float64), test[features].to_numpy(np.float64)
    low, high = X_train.min(axis=0), X_train.max(axis=0)
    span = np.where(high > low, high - low, 1.0)  # a constant training column maps to 0
    X_train, X_test = (X_train - low) / span, np.clip((X_test - low) / span, 0.0, 1.0)
    flipped = [features.index(column) for column in decreasing]
    X_train[:, flipped], X_test[:, flipped] = 1.0 - X_train[:, flipped], 1.0 - X_test[:, flipped]
    y_train, y_test = train[target].to_numpy(np.float64), test[target].to_numpy(np.float64)
    target_range = None
    if task == "regression":
        target_range = (float(y_train.min()), float(y_train.max()))
        scale = target_range[1] - target_range[0] or 1.0
        y_train, y_test = (y_train - target_range[0]) / scale, (y_test - target_range[0]) / scale
    monotone = sorted(features.index(column) for column in (*increasing, *decreasing))
    return Dataset(
        name, tuple(features), X_train, y_train, X_test, y_test, task, target,
        tuple(monotone), tuple(sorted(flipped)), source, target_range, (tuple(low.tolist()), tuple(high.tolist())),
    )  # fmt: skip


# ---------------------------------------------------------------------------- the datasets
BLOG_MONOTONE = (50, 51, 52, 53, 55, 56, 57, 58)  # A51–A54, A56–A59: comment and trackback counts
BLOG_ORIGIN = 'UCI "BlogFeedback" (Buza 2014), copy from GitHub Akshaya0909/enigma, BlogFeedback.zip'


def load_blog(data_dir: str | Path | None = None) -> Dataset:
    """BlogFeedback regression, CMN/LMN preprocessing: 276 features, UCI's train/test split.

    Read from the zip without unpacking. Rows whose target (comments in the next 24 h) exceeds its
    90th percentile over train+test (8) are dropped; features are named by UCI attribute (A1–A280);
    the 8 monotone (↑) features come first; the 4 constant ones (A13, A33, A38, A278) are dropped.
    """
    import numpy as np
    import pandas as pd

    path = _require(data_directory(data_dir), "BlogFeedback.zip", BLOG_ORIGIN)
    with open_input(path, "data file", MAX_DATA_BYTES) as stream:
        try:
            with zipfile.ZipFile(stream) as archive:
                names = sorted(entry.filename for entry in archive.infolist() if entry.filename.endswith(".csv"))
                unpacked = sum(archive.getinfo(name).file_size for name in names)  # zipfile stops at each declared size
                check_size(path, "data file", unpacked, MAX_DATA_BYTES, unpacked=True)
                read = {name: _parse_csv(archive.read(name), f"{path}: {name}", header=None) for name in names}
        except (zipfile.BadZipFile, OSError, NotImplementedError) as error:
            raise InputError(f"cannot read {path}: {error}") from None
    train = read.pop("blogData_train.csv", None)
    if train is None or not read:
        raise InputError(f"{path}: expected blogData_train.csv and the daily blogData_test-*.csv files")
    test = pd.concat(read.values(), ignore_index=True)
    limit = np.percentile(np.concatenate([train[280], test[280]]), 90)
    train, test = train[train[280] <= limit], test[test[280] <= limit]
    both = pd.concat([train, test])
    constant = [column for column in range(280) if both[column].min() == both[column].max()]
    order = [*BLOG_MONOTONE, *(c for c in range(280) if c not in BLOG_MONOTONE and c not in constant), 280]
    names = {column: f"A{column + 1}" for column in order}
    train, test = train[order].rename(columns=names), test[order].rename(columns=names)
    source = f"{BLOG_ORIGIN}; rows with target > p90 ({limit:g}) dropped; UCI train/test split; {path}"
    return _finish("blog", train, test, "A281", "regression", source, increasing=[names[c] for c in BLOG_MONOTONE])


LOAN_ORIGIN = "public LendingClub 2007–2010 data, copy from GitHub Jatin-Mehra119/loan_dataset, loan_data.csv"


def load_loan(data_dir: str | Path | None = None) -> Dataset:
    """LendingClub loan_data.csv, a stand-in for the paper's "Loan Defaulter": target not.fully.paid.

    19 features: the monotone ones first (pub.rec ↑, dti ↑, fico ↓, log.annual.inc ↓; fico and
    log.annual.inc flipped), the other numeric columns in file order, then `purpose` one-hot.
    This monotone mapping is the data README's analogy to CMN's Loan features, not literature.
    """
    import numpy as np
    import pandas as pd

    path = _require(data_directory(data_dir), "loan_data.csv", LOAN_ORIGIN)
    frame = _read_csv(path, "data file")
    increasing, decreasing = ["pub.rec", "dti"], ["fico", "log.annual.inc"]
    target = "not.fully.paid"
    rest = [c for c in frame.columns if c not in (*increasing, *decreasing, "purpose", target)]
    purpose = pd.get_dummies(frame["purpose"], prefix="purpose", prefix_sep="=", dtype=np.float64)
    frame = pd.concat([frame[[*increasing, *decreasing, *rest]], purpose, frame[[target]]], axis=1)
    train, test = _split_frame(frame)
    source = f"{LOAN_ORIGIN}; CMN split (seed {SPLIT_SEED}); {path}"
    return _finish("loan", train, test, target, "classification", source, increasing, decreasing)


COMPAS_ORIGIN = 'ProPublica "Machine Bias" (GitHub propublica/compas-analysis, compas-scores-two-years.csv)'
COMPAS_RACES = ("African-American", "Hispanic", "Asian", "Caucasian", "Native American", "Other")


def load_compas(data_dir: str | Path | None = None) -> Dataset:
    """COMPAS two-year recidivism with ProPublica's filters and CMN's 13 inputs (6,172 rows).

    priors_count, juv_fel_count, juv_misd_count, juv_other_count (↑), age, race one-hot (6) and
    sex one-hot (Male, Female); target two_year_recid; the CMN split.
    """
    import numpy as np
    import pandas as pd

    path = _require(data_directory(data_dir), "compas-scores-two-years.csv", COMPAS_ORIGIN)
    data = _read_csv(path, "data file")
    keep = (data["days_b_screening_arrest"].between(-30, 30) & (data["is_recid"] != -1)
            & (data["c_charge_degree"] <= "O") & (data["score_text"] != "N/A"))  # fmt: skip
    data = data[keep]
    increasing = ["priors_count", "juv_fel_count", "juv_misd_count", "juv_other_count"]
    columns = {name: data[name] for name in [*increasing, "age"]}
    columns |= {f"race={race}": (data["race"] == race).astype(np.float64) for race in COMPAS_RACES}
    columns |= {f"sex={sex}": (data["sex"] == sex).astype(np.float64) for sex in ("Male", "Female")}
    train, test = _split_frame(pd.DataFrame(columns | {"two_year_recid": data["two_year_recid"]}))
    source = f"{COMPAS_ORIGIN}; ProPublica filters; CMN features and split (seed {SPLIT_SEED}); {path}"
    return _finish("compas", train, test, "two_year_recid", "classification", source, increasing)


COMET_ORIGIN = "COMET (GitHub AishwaryaSivaraman/COMET, examples/{}/train_data.csv and test_data.csv, MIT)"


def _comet(data_dir: str | Path | None, folder: str) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    origin = COMET_ORIGIN.format(folder)
    paths = [_require(data_directory(data_dir), f"COMET/{folder}/{part}_data.csv", origin) for part in ("train", "test")]
    train, test = (_read_csv(path, "data file", index_col=0) for path in paths)
    return train, test, f"{origin}; COMET's split; {paths[0].parent}"


def load_auto_mpg(data_dir: str | Path | None = None) -> Dataset:
    """Auto-MPG regression on MPG (COMET's 314/78 split), 7 features; ↓ in Displacement,
    Horsepower and Weight (flipped)."""
    train, test, source = _comet(data_dir, "Auto-MPG")
    return _finish("auto-mpg", train, test, "MPG", "regression", source, decreasing=["Displacement", "Horsepower", "Weight"])


def load_heart(data_dir: str | Path | None = None) -> Dataset:
    """Cleveland heart disease (COMET's 242/61 split, target `target`), 13 features; ↑ in trestbps and chol."""
    train, test, source = _comet(data_dir, "Heart")
    return _finish("heart", train, test, "target", "classification", source, increasing=["trestbps", "chol"])


def load_breast_cancer(data_dir: str | Path | None = None) -> Dataset:
    """scikit-learn's bundled Wisconsin breast cancer set (569 × 30), CMN-style seeded split; needs
    no data file (`data_dir` is ignored).

    The target is `malignant` (1 − sklearn's label, which is 1 for benign): the size and shape
    measurements rise with malignancy, so a fully monotone network fits it well. No feature has a
    literature direction (`monotone` is empty).
    """
    from sklearn.datasets import load_breast_cancer as sklearn_breast_cancer

    bunch = sklearn_breast_cancer(as_frame=True)
    frame = bunch.data.assign(malignant=1 - bunch.target)
    train, test = _split_frame(frame)
    source = f"scikit-learn load_breast_cancer (UCI WDBC); CMN split (seed {SPLIT_SEED})"
    return _finish("breast-cancer", train, test, "malignant", "classification", source)


def load_diabetes(data_dir: str | Path | None = None) -> Dataset:
    """scikit-learn's bundled diabetes regression set (442 × 10, target: disease progression a
    year later), CMN-style seeded split; needs no data file (`data_dir` is ignored). No feature
    has a literature direction (`monotone` is empty)."""
    from sklearn.datasets import load_diabetes as sklearn_diabetes

    bunch = sklearn_diabetes(as_frame=True, scaled=False)
    frame = bunch.data.assign(progression=bunch.target)
    train, test = _split_frame(frame)
    source = f"scikit-learn load_diabetes (Efron et al. 2004); CMN split (seed {SPLIT_SEED})"
    return _finish("diabetes", train, test, "progression", "regression", source)


# ---------------------------------------------------------------------------- user CSVs
def load_csv(path: str | Path, target: str, task: str | None = None) -> Dataset:
    """A user's CSV with a header: `target` is the label column, every other column a numeric feature.

    `task` defaults to classification when the target takes only the values 0 and 1, else
    regression. Split and scaling as for the named datasets (CMN split, train min-max, test
    clipped). Errors name the file, the row (counted from 0 after the header) and the column.
    """
    import numpy as np
    import pandas as pd

    path = Path(path)
    frame = _read_csv(path, "CSV file", dtype=str, keep_default_na=False)
    if target not in frame.columns:
        raise InputError(f"{path}: no target column {target!r}; the columns are {list(frame.columns)}")
    if frame.shape[1] < 2 or len(frame) < 2:
        raise InputError(f"{path}: need at least one feature column besides {target!r} and two rows")
    numbers = frame.apply(lambda column: pd.to_numeric(column.str.strip(), errors="coerce")).astype(np.float64)
    bad = np.argwhere(~np.isfinite(numbers.to_numpy()))
    if len(bad):
        row, column = bad[0]
        cell = frame.iat[row, column]
        raise InputError(f"{path}: row {row}, column {frame.columns[column]!r}: {cell!r} is not a finite number")
    labels = set(np.unique(numbers[target]))
    task = task or ("classification" if labels <= {0.0, 1.0} else "regression")
    if task not in TASKS:
        raise InputError(f"task must be one of {TASKS}, got {task!r}")
    if task == "classification" and not labels <= {0.0, 1.0}:
        raise InputError(f"{path}: classification needs a 0/1 target; column {target!r} has values {sorted(labels)[:5]}")
    train, test = _split_frame(numbers)
    return _finish(f"csv:{path}", train, test, target, task, f"user CSV {path}; CMN split (seed {SPLIT_SEED})")


# ---------------------------------------------------------------------------- by name
LOADERS: dict[str, Callable[[str | Path | None], Dataset]] = {
    "blog": load_blog,
    "loan": load_loan,
    "compas": load_compas,
    "auto-mpg": load_auto_mpg,
    "heart": load_heart,
    "breast-cancer": load_breast_cancer,
    "diabetes": load_diabetes,
}


def dataset_names() -> tuple[str, ...]:
    """The named datasets; `load_dataset` also accepts `csv:PATH`."""
    return tuple(LOADERS)


def load_dataset(name: str, data_dir: str | Path | None = None, **options: str | None) -> Dataset:
    """Load a named dataset, or `csv:PATH` with options `target=COLUMN` (required) and `task=...`."""
    if name.startswith("csv:"):
        if not options.get("target"):
            raise InputError(f"dataset {name} needs a target column (target=NAME, --target on the command line)")
        return load_csv(name[4:], options["target"], options.get("task"))
    if name not in LOADERS:
        raise InputError(f"unknown dataset {name!r}; choose one of {', '.join(LOADERS)} or csv:PATH")
    given = [key for key, value in options.items() if value is not None]
    if given:
        raise InputError(f"dataset {name} takes no options ({', '.join(given)} apply to csv:PATH only)")
    try:
        return LOADERS[name](data_dir)
    except (KeyError, ValueError, TypeError, IndexError) as error:
        if isinstance(error, InputError):
            raise
        altered = [f"{file.relative} ({state})" for file, state in check_data_files([name], data_dir) if state != "ok"]
        if not altered:
            raise  # intact files: a defect of the loader, not of the input
        reason = " ".join(str(error).split())[:200]
        raise InputError(f"dataset {name}: its data files are not the expected ones: {', '.join(altered)} ({reason})") from None

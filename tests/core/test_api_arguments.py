"""`cardinal.explain` and `cardinal.Explainer`: every bad argument is a one-line `InputError` that
names the argument, raised before any work (the model is not read for a bad setting; no solver
or explainer starts for a bad input), in the words the command line uses for the same value."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cardinal.verify import explanation
from cardinal.verify.cli import main

import cardinal
from cardinal import Domain, InputError
from tests.conftest import DESIGN_NETWORK

X = [1.0, 1.0, 1.0]  # an input of the DESIGN network (3 features)


def _tripwire(*args: object, **kwargs: object) -> None:
    raise AssertionError("work started before the arguments were checked")


# Settings: refused before the model is read. (arguments, the argument named, what the message says)
SETTINGS: list[tuple[dict[str, Any], str]] = [
    ({"threshold": math.nan}, r"^threshold: nan is not a finite number$"),
    ({"threshold": math.inf}, r"^threshold: inf is not a finite number$"),
    ({"threshold": -math.inf}, r"^threshold: -inf is not a finite number$"),
    ({"threshold": np.float32("nan")}, r"^threshold: nan is not a finite number$"),
    ({"threshold": True}, r"^threshold: True is not a number$"),
    ({"threshold": "0.5"}, r"^threshold: '0.5' is not a number$"),
    ({"threshold": 10**400}, r"^threshold: an integer of 401 digits is too large for a double$"),
    ({"domain": (0, 1)}, r"^domain: a cardinal.Domain .*, not tuple$"),
    ({"domain": "[0, 1]"}, r"^domain: a cardinal.Domain .*, not '\[0, 1\]'$"),
    ({"domain": {"lower": 0, "upper": 1}}, r"^domain: a cardinal.Domain .*, not an object$"),
    ({"radius": -1}, r"^radius: -1 is not positive$"),
    ({"radius": 0.0}, r"^radius: 0.0 is not positive$"),
    ({"radius": math.nan}, r"^radius: nan is not a finite number$"),
    ({"radius": "0.1"}, r"^radius: '0.1' is not a number$"),
    ({"radius": [0.1, -0.1, 0.1]}, r"^radius\[1\]: -0.1 is not positive$"),
    ({"radius": [[0.1]]}, r"^radius: an array of shape \[1, 1\]: give one number or one per feature$"),
    ({"input_shape": "1,3"}, r"^input_shape: a tuple of dims such as \(1, 28, 28\), not '1,3'$"),
    ({"input_shape": (1, 0)}, r"^input_shape: \(1, 0\): dims must be positive"),
    ({"input_shape": (1.5, 2)}, r"^input_shape: 1.5 is not an integer dim$"),
    ({"input_shape": (10**5, 10**5)}, r"^input_shape: .*at most 16,777,216 values"),
    ({"proof_dir": 5}, r"^proof_dir: a folder's path \(str or os.PathLike\), not 5$"),
    ({"proof_dir": ""}, r"^proof_dir: '' names no folder"),
    ({"time_limit": 0}, r"^time_limit: 0 is not positive$"),
    ({"time_limit": -1.5}, r"^time_limit: -1.5 is not positive$"),
    ({"time_limit": math.nan}, r"^time_limit: nan is not a finite number$"),
    ({"time_limit": -math.inf}, r"^time_limit: -inf is not a finite number$"),
    ({"time_limit": math.inf}, r"^time_limit: inf is not a finite number$"),
    ({"time_limit": 1e9}, r"^time_limit: 1000000000.0 seconds is more than the 1e\+07 allowed$"),
    ({"time_limit": "5"}, r"^time_limit: '5' is not a number$"),
    ({"time_limit": False}, r"^time_limit: False is not a number$"),
]


@pytest.mark.parametrize("front", ["explain", "Explainer"])
@pytest.mark.parametrize(("arguments", "message"), SETTINGS, ids=[f"{next(iter(a))}={next(iter(a.values()))!r}" for a, _ in SETTINGS])
def test_a_bad_setting_is_refused_before_the_model_is_read(
    front: str, arguments: dict[str, Any], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(explanation, "_network", _tripwire)
    with pytest.raises(InputError) as caught:
        if front == "explain":
            cardinal.explain("no-such-model.json", X, **arguments)
        else:
            cardinal.Explainer("no-such-model.json", **arguments)
    assert type(caught.value) is InputError
    assert "\n" not in str(caught.value)
    assert re.search(message, str(caught.value)), str(caught.value)


def test_a_proof_dir_that_is_a_file_is_refused_and_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "taken").write_text("mine")
    monkeypatch.setattr(explanation, "_network", _tripwire)
    with pytest.raises(InputError, match=r"^proof_dir .*taken is a file, not a directory$"):
        cardinal.explain("model.json", X, proof_dir=tmp_path / "taken")
    assert (tmp_path / "taken").read_text() == "mine"


# Inputs and per-call choices: refused before any explainer or solver starts.
CALLS: list[tuple[Any, dict[str, Any], str]] = [
    ("abc", {}, r"^x: one input \(a sequence of numbers\) or a batch \[B, n\], not 'abc'$"),
    (b"abc", {}, r"^x: one input .*, not bytes$"),
    ({0.5, 1.0, 0.0}, {}, r"^x: one input .*, not set$"),
    ({"a": 1}, {}, r"^x: one input .*, not an object$"),
    (0.5, {}, r"^x: one input .*, not 0.5$"),
    (None, {}, r"^x: one input .*, not None$"),
    ([[1.0, 1.0, 1.0], [1.0]], {}, r"^x is ragged"),
    ([1.0, "a", 1.0], {}, r"^x holds str\d* values, not numbers$"),
    ([1.0, None, 1.0], {}, r"^x holds None, not a number$"),
    (np.array([1j, 1, 1]), {}, r"^x holds complex numbers"),
    (np.zeros((1, 1, 3)), {}, r"^x has shape \[1, 1, 3\]: give one input \[n\] or a batch \[B, n\]$"),
    ([1.0, math.nan, 1.0], {}, r"^x: row 0, feature 1 is nan$"),
    ([1.0, 1.0], {}, r"^x: inputs have shape \[1, 2\], expected \[B, 3\]$"),
    ([1.0, 2.0, 1.0], {}, r"^x: row 0, feature 1 = 2.0 lies outside the domain"),
    (X, {"kind": "both"}, r"^kind 'both': choose contrastive or abductive$"),
    (X, {"method": "fast"}, r"^method 'fast'"),
    (X, {"traversal": 3}, r"^traversal 3: choose one of"),
    (X, {"prove": "yes"}, r"^prove: True or False, not 'yes'$"),
]


@pytest.mark.parametrize(("x", "arguments", "message"), CALLS)
def test_a_bad_input_or_choice_is_refused_before_any_work(
    x: Any, arguments: dict[str, Any], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "net.json"
    path.write_text(json.dumps(DESIGN_NETWORK))
    for name in ("_proved", "_unproved", "SolverPool"):
        monkeypatch.setattr(explanation, name, _tripwire)
    with pytest.raises(InputError) as caught:
        cardinal.explain(str(path), x, **arguments)
    assert "\n" not in str(caught.value)
    assert re.search(message, str(caught.value)), str(caught.value)
    with cardinal.Explainer(str(path)) as explainer, pytest.raises(InputError, match=message):
        explainer.explain(x, **arguments)


def test_a_domain_of_crossed_bounds_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"^domain feature 1: lower bound 2.0 exceeds upper bound 1.0$"):
        Domain(np.array([0.0, 2.0]), np.array([1.0, 1.0]))


def test_good_arguments_of_other_types_are_taken(tmp_path: Path) -> None:
    """What the checks let through is what they should: numpy and integer numbers, a tuple x, a
    radius per feature, a Path proof_dir; the answer is the one plain floats give."""
    path = tmp_path / "net.json"
    path.write_text(json.dumps(DESIGN_NETWORK))
    plain = cardinal.explain(str(path), [1.0, 1.0, 1.0], "abductive", threshold=0.5, prove=False, time_limit=30.0)
    other = cardinal.explain(str(path), (1, 1, 1), "abductive", threshold=np.float32(0.5), prove=False,
                             time_limit=np.int64(30))
    assert (other.features, other.prediction) == (plain.features, plain.prediction)
    ball = cardinal.explain(str(path), np.array([1.0, 1.0, 1.0]), "abductive", radius=[0.5, 0.5, 0.5], prove=False)
    assert ball.to_dict()["radius"] == 0.5
    batch = cardinal.explain(str(path), np.ones((2, 3), dtype=np.float32), "abductive", prove=False)
    assert [e.features for e in batch] == [cardinal.explain(str(path), X, "abductive", prove=False).features] * 2


# The command line says the same after the name: (API arguments, CLI flags, the words both end with)
SAME_WORDS = [
    ({"threshold": math.nan}, ["--threshold", "nan"], "is not a finite number"),
    ({"time_limit": 0}, ["--time-limit", "0"], "is not positive"),
    ({"time_limit": -1}, ["--time-limit", "-1"], "is not positive"),
    ({"time_limit": math.nan}, ["--time-limit", "nan"], "is not a finite number"),
    ({"time_limit": -math.inf}, ["--time-limit=-inf"], "is not a finite number"),
    ({"time_limit": 1e9}, ["--time-limit", "1e9"], "seconds is more than the 1e+07 allowed"),
    ({"input_shape": (0, 3)}, ["--input-shape", "0,3"], "dims must be positive, at most 16,777,216 values in all"),
]


@pytest.mark.parametrize(("arguments", "flags", "words"), SAME_WORDS)
def test_the_command_line_refuses_the_same_value_in_the_same_words(
    arguments: dict[str, Any], flags: list[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path, inputs = tmp_path / "net.json", tmp_path / "x.csv"
    path.write_text(json.dumps(DESIGN_NETWORK))
    inputs.write_text("1,1,1\n")
    with pytest.raises(InputError) as caught:
        cardinal.explain(str(path), X, **arguments)
    assert str(caught.value).endswith(words)
    assert main(["explain", str(path), "--inputs", str(inputs), *flags]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert f"argument {flags[0].split('=')[0]}: " in err and f"{words} (see " in err, err

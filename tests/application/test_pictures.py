"""Pictures of explanations (`verify.picture`, `Explanation.figure()`, `--picture DIR`): the panels
and titles, the marked pixels read back from the PNG, the difference panel exactly witness − x,
one file per input and kind, and the refusals (no image shape, a folder that is a file, a link)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pytest
from cardinal.verify.cli import main
from cardinal.verify.picture import figure

import cardinal
from cardinal import InputError, Network
from cardinal.activations import Activation
from cardinal.network import Layer, Metadata

CENTRE = (5, 6, 9, 10)  # the 4 × 4 image's middle pixels


def _network(shape: tuple[int, ...] | None = (1, 4, 4)) -> Network:
    """f(x) = the middle pixels + 0.1 × the others, class 1 iff f(x) > 2: on the image with its middle
    lit, the CXp turns off 2 middle pixels and the AXp keeps 3 of them."""
    weight = np.full((1, 16), 0.1)
    weight[0, list(CENTRE)] = 1.0
    layer = Layer(weight, np.zeros(1), Activation.make("identity"))
    return Network([layer], Metadata(threshold=2.0, input_shape=shape))


def _image() -> np.ndarray:
    x = np.zeros(16)
    x[list(CENTRE)] = 1.0
    x[[0, 15]] = 0.5
    return x


def _panels(fig) -> list:
    return [axis for axis in fig.axes if axis.images and axis.get_title()]


def _rendered(fig) -> np.ndarray:
    """The figure as the PNG holds it: [rows, columns, RGBA] read back with matplotlib.image."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=fig.dpi)
    buffer.seek(0)
    return mpimg.imread(buffer, format="png")


def _cell(fig, pixels: np.ndarray, axis, row: int, column: int, size: int = 4) -> np.ndarray:
    """The RGB at the centre of image cell (row, column) of `axis` in the rendered figure."""
    box = axis.get_window_extent()
    x = box.x0 + (column + 0.5) * box.width / size
    y = box.y1 - (row + 0.5) * box.height / size
    return pixels[round(pixels.shape[0] - y), round(x), :3]


def test_panels_and_titles() -> None:
    x = _image()
    witness = x.copy()
    witness[[5, 6]] = 0.0
    contrastive = figure(x, (1, 4, 4), "contrastive", (5, 6), witness, title="CXp of class 1")
    assert [axis.get_title() for axis in _panels(contrastive)] == [
        "input x", "CXp: pixels changed", "witness (prediction flips)", "witness − x"]
    assert contrastive._suptitle.get_text() == "CXp of class 1"
    assert len(contrastive.axes) == 5  # and the difference's colour bar
    abductive = figure(x, (4, 4), "abductive", (5, 6, 9))
    assert [axis.get_title() for axis in _panels(abductive)] == ["input x", "AXp: pixels kept (others free)"]
    assert abductive._suptitle.get_text() == "abductive (AXp): |features| = 3"
    nothing = figure(x, (4, 4), "contrastive", None)
    assert [axis.get_title() for axis in _panels(nothing)] == ["input x"]
    for fig in (contrastive, abductive, nothing):
        plt.close(fig)


@pytest.mark.parametrize("kind", ["contrastive", "abductive"])
def test_the_marked_pixels_differ_from_the_others_in_the_png(kind: str) -> None:
    """Read back from the PNG: a CXp's pixels are painted red over gray, the others stay gray; an
    AXp's pixels stay gray, the others are washed blue."""
    x, features = _image(), (5, 6, 9)
    fig = figure(x, (1, 4, 4), kind, features)
    pixels = _rendered(fig)
    marked = _panels(fig)[1]
    for index in range(16):
        red, _, blue = _cell(fig, pixels, marked, *divmod(index, 4))
        if (index in features) == (kind == "contrastive"):
            assert red - blue > 0.3 if kind == "contrastive" else blue - red > 0.1, index
        else:
            assert abs(red - blue) < 0.02, index
    plain = _panels(fig)[0]
    assert all(abs(np.ptp(_cell(fig, pixels, plain, *divmod(i, 4)))) < 0.02 for i in range(16))  # the input: gray
    plt.close(fig)


def test_the_difference_panel_is_witness_minus_x() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, 16)
    witness = x.copy()
    witness[[2, 7, 12]] = [1.0, 0.0, 0.25]
    fig = figure(x, (4, 4), "contrastive", (2, 7, 12), witness)
    difference = np.asarray(_panels(fig)[3].images[0].get_array())
    for index in (2, 7, 12, 0, 15):
        assert difference[divmod(index, 4)] == witness[index] - x[index]
    assert _panels(fig)[3].images[0].norm.vcenter == 0.0
    pixels = _rendered(fig)
    up, down = (2, 12) if witness[2] > x[2] else (12, 2)
    red, _, blue = _cell(fig, pixels, _panels(fig)[3], *divmod(up, 4))
    assert red > blue
    red, _, blue = _cell(fig, pixels, _panels(fig)[3], *divmod(down, 4))
    assert blue > red
    plt.close(fig)


def test_colour_images_and_bad_shapes() -> None:
    x = np.linspace(0, 1, 3 * 2 * 2)
    fig = figure(x, (3, 2, 2), "contrastive", (0, 4), x[::-1])  # channels first: features 0 and 4 are pixel (0, 0)
    marked = _panels(fig)[1]
    assert len(marked.patches) == 1  # the one pixel outlined
    plt.close(fig)
    with pytest.raises(InputError, match=r"input shape \[2, 3, 2\] is not an image's"):
        figure(np.zeros(12), (2, 3, 2), "abductive", (0,))
    with pytest.raises(InputError, match="records no input shape"):
        figure(np.zeros(12), None, "abductive", (0,))


def test_explanation_figure(tmp_path: Path) -> None:
    x = _image()
    e = cardinal.explain(_network(), x, "contrastive", prove=False)
    assert e.features is not None and set(e.features) <= set(CENTRE) and e.input_shape == (1, 4, 4)
    fig = e.figure()
    assert len(_panels(fig)) == 4
    title = fig._suptitle.get_text()
    assert "contrastive (CXp) of prediction 1" in title and f"|features| = {len(e.features)}" in title
    plt.close(fig)
    proved = cardinal.explain(_network(), x, "abductive", time_limit=30)
    fig = proved.figure()
    assert proved.proved and "|features| = 3 — minimum, proved" in fig._suptitle.get_text()
    plt.close(fig)
    flat = cardinal.explain(_network(None), x, "abductive", prove=False)
    with pytest.raises(InputError, match="no picture: the model records no input shape"):
        flat.figure()
    given = cardinal.explain(_network(None), x, "abductive", prove=False, input_shape=(4, 4))
    plt.close(given.figure())


def _files(tmp_path: Path, shape: tuple[int, ...] | None = (1, 4, 4)) -> tuple[Path, Path]:
    model = tmp_path / "model.json"
    _network(shape).save(model)
    inputs = tmp_path / "x.csv"
    second = _image()
    second[10] = 0.0
    inputs.write_text("\n".join(",".join(repr(float(v)) for v in row) for row in (_image(), second)) + "\n")
    return model, inputs


@pytest.mark.parametrize("command", ["explain", "certify"])
def test_picture_writes_one_png_per_input_and_kind(tmp_path: Path, command: str) -> None:
    model, inputs = _files(tmp_path)
    folder = tmp_path / "pictures"
    extra = ["--time-limit", "30", "--out", str(tmp_path / "out.jsonl")]
    assert main([command, str(model), "--inputs", str(inputs), "--picture", str(folder), *extra]) == 0
    names = sorted(os.listdir(folder))
    assert names == ["row0-abductive.png", "row0-contrastive.png", "row1-abductive.png", "row1-contrastive.png"]
    for name in names:
        pixels = mpimg.imread(folder / name)
        assert pixels.ndim == 3 and pixels.shape[0] > 100 and np.ptp(pixels[..., :3]) > 0.5


def test_input_shape_flag_draws_a_model_that_declares_none(tmp_path: Path) -> None:
    model, inputs = _files(tmp_path, None)
    folder = tmp_path / "pictures"
    argv = ["explain", str(model), "--inputs", str(inputs), "--kind", "abductive", "--rows", "0", "--picture", str(folder)]
    assert main([*argv, "--input-shape", "4,4"]) == 0
    assert os.listdir(folder) == ["row0-abductive.png"]
    assert Network.load(model, input_shape=(4, 4)).metadata.input_shape == (4, 4)
    declared, _ = _files(tmp_path / "declared")
    with pytest.raises(InputError, match=r"declares its own input shape \[1, 4, 4\]: drop input_shape \[4, 4\]"):
        Network.load(declared, input_shape=(4, 4))


def _refused(argv: list[str], capsys: pytest.CaptureFixture, first: bool = True) -> str:
    """The one-line error of a refused run (`first`: refused before anything else is said)."""
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 or not first
    assert lines[-1].startswith(f"cardinal {argv[0]}: error: ")
    return lines[-1]


@pytest.mark.parametrize("command", ["explain", "certify"])
def test_refusals(tmp_path: Path, capsys: pytest.CaptureFixture, command: str) -> None:
    model, inputs = _files(tmp_path, None)
    folder = tmp_path / "pictures"
    base = [command, "--inputs", str(inputs), "--kind", "contrastive", "--out", str(tmp_path / "out.jsonl")]
    err = _refused([base[0], str(model), *base[1:], "--picture", str(folder)], capsys)
    assert "--picture" in err and str(model) in err and "records no input shape" in err
    assert not folder.exists() and not (tmp_path / "out.jsonl").exists()  # refused before any work
    shaped, _ = _files(tmp_path / "shaped")
    afile = tmp_path / "afile"
    afile.write_text("")
    err = _refused([base[0], str(shaped), *base[1:], "--picture", str(afile)], capsys)
    assert f"--picture {afile} is a file, not a directory" in err
    folder.mkdir()
    target = tmp_path / "target.png"
    target.write_text("keep")
    (folder / "row0-contrastive.png").symlink_to(target)
    err = _refused([base[0], str(shaped), *base[1:], "--picture", str(folder)], capsys, first=False)  # met when written
    assert "is a symbolic link" in err and "row0-contrastive.png" in err
    assert target.read_text() == "keep"

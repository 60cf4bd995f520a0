"""Pictures of explanations of images: the input, the explanation's pixels marked, and for a
contrastive explanation its witness and the difference witness − x (`figure`).

Features number the elements of the model's input tensor (batch axis aside) in row-major order,
as `Network.feature_coordinates` does. An image shape is one of (H, W) (grayscale), (C, H, W)
with C = 1 or 3 (channels first, as torch and ONNX use), or (H, W, C) with C = 1 or 3 and a first
axis that is not 1 or 3 (channels last); `image_layout` reads it. A pixel is marked when any of its
channels is a feature of the explanation.

The panels, left to right: "input" (x); the explanation — for an abductive explanation (AXp) the
pixels that keep the prediction, shown as they are while every other pixel is washed pale blue
(those may take any value of the box); for a contrastive explanation (CXp) the pixels that change,
painted red over x (and outlined in yellow on a colour image); for a CXp also "witness" (the point
that flips the prediction, on the input's scale) and "witness − x" (a diverging colormap centred
at 0, with its colour bar; the mean over channels for a colour image). The figure's title states
the kind, the prediction, the number of features and what is proved about the size. Drawn with
matplotlib's Agg backend (no display).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from cardinal.errors import InputError

KINDS = {"abductive": "AXp", "contrastive": "CXp"}
KEPT = np.array([0.75, 0.85, 1.0])  # the wash over the pixels an AXp leaves free
CHANGED = np.array([1.0, 0.0, 0.0])  # the paint over the pixels a CXp changes
WASH, PAINT = 0.7, 0.65  # how much of each colour covers the pixel


def image_layout(shape: Sequence[int] | None) -> tuple[int, int, int, bool]:
    """(channels, height, width, channels_last) of an image shape (module docstring);
    `InputError` naming the shape where it is none (no shape, or not an image's)."""
    if shape is None:
        raise InputError("the model records no input shape: give one (--input-shape, input_shape=) to draw pictures")
    shape = tuple(int(size) for size in shape)
    if len(shape) == 2:
        return 1, shape[0], shape[1], False
    if len(shape) == 3 and shape[0] in (1, 3):
        return shape[0], shape[1], shape[2], False
    if len(shape) == 3 and shape[2] in (1, 3):
        return shape[2], shape[0], shape[1], True
    raise InputError(f"input shape {list(shape)} is not an image's: (H, W), (C, H, W) or (H, W, C) with C = 1 or 3")


def _channels(values: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """A flat vector of the input's elements as an array [H, W, C]."""
    last = image_layout(shape)[3]
    if values.size != math.prod(shape):
        raise InputError(f"x has {values.size} values, the input shape {list(shape)} {math.prod(shape)}")
    array = values.reshape(tuple(shape))
    if len(shape) == 2:
        return array[:, :, None]
    return array if last else np.moveaxis(array, 0, -1)


def _mask(features: Sequence[int], shape: Sequence[int]) -> np.ndarray:
    """[H, W] booleans: the pixels with a channel among `features`."""
    flags = np.zeros(math.prod(shape), dtype=bool)
    flags[list(features)] = True
    return _channels(flags, shape).any(axis=2)


def _scaled(image: np.ndarray, low: float, high: float) -> np.ndarray:
    """An image [H, W, C] as RGB in [0, 1] ([H, W, 3]), `low` black and `high` white."""
    rgb = np.clip((image - low) / (high - low), 0.0, 1.0)
    return np.repeat(rgb, 3, axis=2) if rgb.shape[2] == 1 else rgb


def title_of(kind: str, prediction: int | None, features: Sequence[int] | None, proved: bool = False,
             lower: int | None = None, upper: int | None = None, method: str | None = None,
             class_names: Sequence[str] | None = None) -> str:
    """The figure's title, two lines: kind and prediction (its class name where given); |features|
    and what backs the size (a proved minimum, exact bounds, or the explainer's answer unproved)."""
    short = KINDS.get(kind, kind)
    named = "?" if prediction is None else str(prediction)
    if class_names is not None and prediction is not None and 0 <= prediction < len(class_names):
        named = f"{prediction} ({class_names[prediction]})"
    head = f"{kind} ({short}) of prediction {named}"
    if features is None:
        return f"{head}\nnone found" if not proved else f"{head}\nnone exists (proved)"
    if proved:
        backing = "minimum, proved"
    elif lower is not None and upper is not None:
        backing = f"minimum size in [{lower}, {upper}]"
    else:
        backing = f"{method or 'explainer'}'s answer, not proved minimum"
    return f"{head}\n|features| = {len(features)} — {backing}"


def figure(
    x: Sequence[float] | np.ndarray,
    shape: Sequence[int],
    kind: str,
    features: Sequence[int] | None,
    witness: Sequence[float] | np.ndarray | None = None,
    title: str | None = None,
) -> Any:
    """The matplotlib `Figure` of one explanation of the input `x` [n] of image shape `shape`
    (module docstring: the panels): `kind` "abductive" or "contrastive"; `features`: the
    explanation's feature indices (None: no explanation; the input alone is drawn); `witness` [n]:
    a CXp's point that flips the prediction (its panels are drawn when given); `title`: the
    figure's title (default: the kind and |features|). Pixels are drawn as squares
    (nearest-neighbour); the input's scale is [0, 1] widened to the values of x and the witness.
    `InputError` for a shape that is not an image's or sizes that do not match it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm

    if kind not in KINDS:
        raise InputError(f"kind {kind!r}: choose contrastive or abductive")
    values = np.asarray(x, dtype=np.float64).ravel()
    image = _channels(values, shape)
    points = values if witness is None else np.concatenate([values, np.asarray(witness, dtype=np.float64).ravel()])
    low, high = min(0.0, float(points.min())), max(1.0, float(points.max()))
    gray = image.shape[2] == 1
    panels = ["input x"]
    if features is not None:
        if any(not 0 <= int(i) < values.size for i in features):
            raise InputError(f"features: indices below {values.size} (the input's size)")
        panels.append("AXp: pixels kept (others free)" if kind == "abductive" else "CXp: pixels changed")
        if witness is not None:
            if np.asarray(witness).size != values.size:
                raise InputError(f"witness has {np.asarray(witness).size} values, x {values.size}")
            panels += ["witness (prediction flips)", "witness − x" + ("" if gray else " (channel mean)")]
    width = max(6.0, 2.6 * len(panels) + (0.5 if len(panels) == 4 else 0.0))
    fig, axes = plt.subplots(1, len(panels), figsize=(width, 3.4), squeeze=False)
    axes = axes[0]
    for axis, name in zip(axes, panels, strict=True):
        axis.set_title(name, fontsize=9)
        axis.set_xticks([])
        axis.set_yticks([])
    show = {"interpolation": "nearest", "resample": False}
    rgb = _scaled(image, low, high)
    if gray:
        axes[0].imshow(image[:, :, 0], cmap="gray", vmin=low, vmax=high, **show)
    else:
        axes[0].imshow(rgb, **show)
    if features is not None:
        mask = _mask([int(i) for i in features], shape)[:, :, None]
        if kind == "abductive":
            marked = np.where(mask, rgb, (1 - WASH) * rgb + WASH * KEPT)
        else:
            marked = np.where(mask, (1 - PAINT) * rgb + PAINT * CHANGED, rgb)
        axes[1].imshow(marked, **show)
        if not gray and kind == "contrastive":  # red paint alone can hide in a colour image: outline each pixel too
            from matplotlib.patches import Rectangle

            for row, column in zip(*np.nonzero(mask[:, :, 0]), strict=True):
                axes[1].add_patch(Rectangle((column - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="yellow", linewidth=1.5))
        if witness is not None:
            other = _channels(np.asarray(witness, dtype=np.float64).ravel(), shape)
            if gray:
                axes[2].imshow(other[:, :, 0], cmap="gray", vmin=low, vmax=high, **show)
            else:
                axes[2].imshow(_scaled(other, low, high), **show)
            difference = (other - image).mean(axis=2) if not gray else other[:, :, 0] - image[:, :, 0]
            reach = float(np.abs(difference).max()) or 1.0
            shown = axes[3].imshow(difference, cmap="RdBu_r", norm=TwoSlopeNorm(0.0, -reach, reach), **show)
            fig.colorbar(shown, ax=axes[3], fraction=0.046, pad=0.04)
    size = "no explanation" if features is None else f"|features| = {len(features)}"
    fig.suptitle(title or f"{kind} ({KINDS[kind]}): {size}", fontsize=10)
    fig.tight_layout()
    return fig

"""Models from other tools read as chains of affine maps and activations.

The readers of ONNX and torch files (`cardinal.formats.onnx_io`, `cardinal.formats.torch_io`)
walk a model's data path and feed each operation to a `ChainBuilder`, which produces a `Chain`:
the `ChainStep`s that `Network.from_chain` assembles into layers, and what the model says about
its inputs and outputs (`Chain.metadata()`). The ONNX writer consumes `Network.chain()`.

Image-shaped inputs. A feature is one element of the input tensor (batch axis aside), numbered
in row-major order over its shape. The builder tracks, for every element of the data path's
current tensor, its position in the flat vector computed so far (the inputs, or the outputs of
the last affine map): a Reshape, Flatten or Transpose only relabels positions, so the next affine
map takes them as a permutation of its columns — no arithmetic. A 2-D convolution is linear and
becomes the dense matrix it is (`ChainBuilder.conv`): each entry is one kernel weight, the same
double, or zero. Consecutive affine maps are never multiplied together: each stays its own layer
(with `identity` between them), so every weight is the file's own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cardinal.activations import Activation
from cardinal.errors import InputError

MAX_UNROLLED_ENTRIES = 1 << 24  # a Conv unrolls to a dense matrix of at most 2^24 entries (128 MiB of doubles)
MAX_CONV_PRODUCTS = 1 << 24  # a Conv's (output element, input channel, kernel offset) triples, visited to unroll it
MAX_TENSOR_ELEMENTS = 1 << 24  # the input and every tensor on the data path (batch axis aside), checked before it is indexed
_POOLING = "replace pooling with a strided Conv (pooling is not an affine map cardinal unrolls)"
RUNTIME_SHAPE = (
    "a shape computed at run time: simplify the graph (python -m onnxsim in.onnx out.onnx) so that Reshape takes a constant"
)
_ACTIVATION_CHOICE = (
    "cardinal's activations are relu, leaky_relu (PRelu with one slope), hardtanh (Clip), step (GreaterOrEqual+Cast), "
    "sigmoid, tanh and softplus: train and export with one of them"
)
ADVICE = {  # what to do about a model operation cardinal does not read, by ONNX op name
    **dict.fromkeys(("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool", "MaxUnpool"), _POOLING),
    "BatchNormalization": "fold BatchNormalization into the preceding Conv or Gemm before export (e.g. torch's "
    "fuse_conv_bn_eval, or onnxoptimizer's fuse_bn_into_conv)",
    **dict.fromkeys(
        ("LayerNormalization", "InstanceNormalization", "GroupNormalization", "LRN"),
        "a normalization by the input's own statistics is not piecewise linear: cardinal cannot read it exactly",
    ),
    **dict.fromkeys(
        ("Attention", "MultiHeadAttention", "Einsum"), "attention is not a chain of layers: cardinal reads feed-forward networks"
    ),
    **dict.fromkeys(
        ("Mul", "Div", "Sub"),
        "an elementwise scale or offset: fold it into the neighbouring layer's weights or bias before export, or apply "
        "it to the inputs (the CSV) instead",
    ),
    **dict.fromkeys(("Shape", "Gather", "Concat", "Slice", "Expand", "ConstantOfShape"), RUNTIME_SHAPE),
    **dict.fromkeys(
        "Elu Selu Gelu Celu HardSigmoid HardSwish Mish Softsign ThresholdedRelu Erf Exp Log Abs Sign Sqrt Pow".split(),
        _ACTIVATION_CHOICE,
    ),
    "Pad": "give the padding to the Conv (its pads attribute) instead of a separate Pad",
    **dict.fromkeys(
        ("ArgMax", "ZipMap", "ArrayFeatureExtractor"), "a classifier head is read only at the end of the graph: export the logits"
    ),
}


@dataclass(frozen=True, eq=False)
class ChainStep:
    """An affine map with `weight` [out, in] and `bias` [out] (float64), or an `activation`.
    `where` names the step in messages, e.g. "module 2 (ReLU)" or "node /0/Gemm (Gemm)"."""

    where: str
    weight: np.ndarray | None = None
    bias: np.ndarray | None = None
    activation: Activation | None = None


@dataclass(frozen=True)
class Chain:
    """A model read as `steps`, with what it says about its inputs and outputs: `input_shape` (the
    input tensor's shape, batch axis aside, when it has more than one axis), `dropped` (one note per
    part of the model left out because it cannot change the prediction) and `threshold` (the
    prediction rule of a binary classifier read as its logit)."""

    steps: list[ChainStep]
    input_shape: tuple[int, ...] | None = None
    dropped: tuple[str, ...] = ()
    threshold: float | None = None

    def metadata(self) -> dict[str, Any]:
        """The fields of a network's metadata document (docs/formats.md) that the model sets."""
        document: dict[str, Any] = {}
        if self.input_shape is not None:
            document["input_shape"] = list(self.input_shape)
        if self.dropped:
            document["dropped"] = list(self.dropped)
        if self.threshold is not None:
            document["threshold"] = self.threshold
        return document


@dataclass
class ChainBuilder:
    """Builds a `Chain` one operation of the data path at a time, tracking the current tensor's shape.

    `index` has the current tensor's shape (batch axis aside) and holds, for each element, its
    position in the flat vector the chain computes so far; None while the data path is a vector
    whose width no operation has fixed yet (an input of unknown width). Every method names the
    operation (`where`) in its `InputError`.
    """

    input_shape: tuple[int, ...] | None
    steps: list[ChainStep] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    threshold: float | None = None
    index: np.ndarray | None = None
    open_bias: bool = False  # the last operation is an affine map with no bias yet: an Add may set it
    probabilities: str | None = None  # the Softmax/LogSoftmax read as the last operation, by name
    source: str = "the input"  # names the input in messages, e.g. "the graph input x"

    def __post_init__(self) -> None:
        if self.input_shape is not None:
            _check_elements(list(self.input_shape), self.source)
            self.index = np.arange(math.prod(self.input_shape)).reshape(self.input_shape)

    # ------------------------------------------------------------------ shape
    @property
    def shape(self) -> tuple[int, ...] | None:
        """The current tensor's shape (batch axis aside); None while unknown."""
        return None if self.index is None else self.index.shape

    @property
    def size(self) -> int | None:
        return None if self.index is None else self.index.size

    def known_shape(self, where: str, needs: str) -> tuple[int, ...]:
        if self.index is None:
            raise InputError(
                f"{where}: {needs} needs the input's shape, which the model does not give: declare the input's dims "
                "in the ONNX graph, or for torch give --input-shape C,H,W on the command line (batch axis aside), "
                "input_shape=(1, 28, 28) to cardinal.explain, Network.load or Network.from_torch"
            )
        return self.index.shape

    def reshape(self, shape: Sequence[int], where: str) -> None:
        """Relabel the current tensor as `shape` (batch axis aside; one dim may be -1), row-major."""
        self._after_softmax(where, shaping=True)
        shape = [int(size) for size in shape]
        if shape.count(-1) > 1 or any(size == 0 or size < -1 for size in shape):
            raise InputError(f"{where}: cannot reshape to {shape} (batch axis aside)")
        if self.index is None:  # a vector of unknown width: it stays one, or takes the width given
            if len(shape) > 1:
                self.known_shape(where, f"a reshape to {shape}")
            if shape != [-1]:
                _check_elements(shape, where)
                self.index = np.arange(shape[0])
            self.open_bias = False
            return
        known = math.prod(size for size in shape if size != -1)
        if -1 in shape and self.index.size % known == 0:
            shape[shape.index(-1)] = self.index.size // known
        if math.prod(shape) != self.index.size:
            raise InputError(
                f"{where}: cannot reshape a tensor of shape {list(self.index.shape)} ({self.index.size} elements) "
                f"to {shape} (batch axis aside)"
            )
        self.index = self.index.reshape(shape)
        self.open_bias = False

    def reshape_batched(self, shape: Sequence[int], where: str) -> None:
        """A reshape of the tensor with its batch axis to `shape`, whose first dim must keep the
        batch: -1, or 1 (cardinal reads one input at a time)."""
        shape = [int(size) for size in shape]
        if len(shape) < 2 or shape[0] not in (-1, 1) or (shape[0] == -1 and -1 in shape[1:]):
            raise InputError(
                f"{where}: a reshape to {shape} does not keep the batch axis first and alone; cardinal reads a reshape "
                "to [batch, ...] (first dim -1, 0 or 1)"
            )
        self.reshape(shape[1:], where)

    def flatten(self, start: int, end: int, where: str) -> None:
        """Merge the axes `start`..`end` (the batch axis is 0; negative ones count from the end)."""
        rank = 2 if self.index is None else self.index.ndim + 1
        if not (-rank <= start < rank and -rank <= end < rank):
            raise InputError(f"{where}: axes {start}..{end} are out of range for a tensor of {rank} axes")
        start, end = start % rank, end % rank
        if start == 0:
            raise InputError(f"{where}: a flatten from axis 0 merges the batch axis; cardinal reads a flatten from axis 1")
        if self.index is None or start >= end:
            self.reshape([-1] if self.index is None else self.index.shape, where)
            return
        shape = list(self.index.shape)
        self.reshape([*shape[: start - 1], math.prod(shape[start - 1 : end]), *shape[end:]], where)

    def transpose(self, axes: Sequence[int], where: str) -> None:
        """Permute the current tensor's axes (batch axis aside, numbered from 0)."""
        shape = self.known_shape(where, "a Transpose")
        if sorted(axes) != list(range(len(shape))):
            raise InputError(f"{where}: axes {list(axes)} are not a permutation of the tensor's {len(shape)} axes")
        self._after_softmax(where, shaping=True)
        self.index = self.index.transpose(tuple(axes))
        self.open_bias = False

    # ------------------------------------------------------------------ layers
    def affine(self, weight: np.ndarray, bias: np.ndarray | None, where: str) -> None:
        """A dense layer y = weight·t + bias on the current tensor t, a vector: weight [out, m],
        bias [out] or None (none yet: an `add_bias` may follow). Its columns are placed at the
        positions of t's elements in the flat vector, which is a permutation: no arithmetic."""
        self._after_softmax(where)
        if self.index is not None and self.index.ndim != 1:
            raise InputError(
                f"{where}: takes a vector but its input has shape {list(self.index.shape)}: flatten it first "
                f"(Flatten, or Reshape to [batch, {self.index.size}])"
            )
        if self.index is not None and weight.shape[1] != self.index.size:
            raise InputError(f"{where}: takes {weight.shape[1]} inputs but its input has {self.index.size} elements")
        if self.index is not None and not np.array_equal(self.index, np.arange(self.index.size)):
            placed = np.zeros_like(weight)
            placed[:, self.index] = weight
            weight = placed
        self._layer(where, weight, bias, np.arange(weight.shape[0]))

    def add_bias(self, value: np.ndarray, where: str) -> None:
        """An Add of the constant `value` right after an affine map without bias: its bias,
        `value` broadcast over the current tensor (a leading batch axis of length 1 allowed)."""
        if not self.open_bias:
            raise InputError(
                f"{where}: an Add of a constant is read only as the bias of the Gemm, MatMul or Conv right before it "
                "(one without a bias of its own); fold it into that layer's bias before export"
            )
        shape = self.index.shape
        while value.ndim > len(shape) and value.shape[0] == 1:
            value = value.reshape(value.shape[1:])  # the batch axis, and axes of length 1 before it
        try:
            spread = np.broadcast_to(value, shape)
        except ValueError:
            raise InputError(
                f"{where}: a bias of shape {list(value.shape)} does not fit a tensor of shape {list(shape)}"
            ) from None
        bias = np.zeros(self.index.size)
        bias[self.index.reshape(-1)] = spread.reshape(-1)
        last = self.steps[-1]
        self.steps[-1] = ChainStep(last.where, weight=last.weight, bias=bias)
        self.open_bias = False

    def conv(
        self,
        kernel: np.ndarray,
        bias: np.ndarray | None,
        strides: Sequence[int],
        pads: Sequence[int],
        dilations: Sequence[int],
        where: str,
    ) -> None:
        """A 2-D convolution (group 1, zero padding) on the current tensor [C, H, W], unrolled
        into the dense layer it is: `kernel` [M, C, kh, kw], `bias` [M] or None, `strides` and
        `dilations` (height, width), `pads` (top, left, bottom, right). The output is [M, Ho, Wo];
        each entry of the dense matrix is one kernel weight or zero. Refused, before anything is
        allocated, beyond `MAX_UNROLLED_ENTRIES` (the dense matrix, rows × columns) or
        `MAX_CONV_PRODUCTS` (output elements × channels × kh × kw, the work of unrolling)."""
        shape = self.known_shape(where, "a Conv")
        self._after_softmax(where)
        if len(shape) != 3 or kernel.ndim != 4 or kernel.shape[1] != shape[0]:
            raise InputError(
                f"{where}: a kernel of shape {list(kernel.shape)} does not fit an input of shape {list(shape)} "
                "([channels, height, width])"
            )
        if bias is not None and bias.shape != (kernel.shape[0],):
            raise InputError(f"{where}: a bias of shape {list(bias.shape)} does not fit {kernel.shape[0]} output channels")
        if min(strides) < 1 or min(dilations) < 1 or min(pads) < 0:
            raise InputError(f"{where}: strides and dilations must be ≥ 1 and pads ≥ 0")
        channels, height, width = shape
        count, _, kh, kw = kernel.shape
        out_h = (height + pads[0] + pads[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
        out_w = (width + pads[1] + pads[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
        if out_h < 1 or out_w < 1:
            raise InputError(f"{where}: a {kh}×{kw} kernel does not fit an input of {height}×{width} (with its pads)")
        rows, cols = count * out_h * out_w, self.index.size
        if rows * cols > MAX_UNROLLED_ENTRIES:
            raise InputError(
                f"{where}: unrolled into a dense layer it would hold {rows} × {cols} = {rows * cols:,} entries, over "
                f"cardinal's cap of {MAX_UNROLLED_ENTRIES:,} (2^24): use fewer channels, a larger stride or a smaller input"
            )
        products = rows * channels * kh * kw
        if products > MAX_CONV_PRODUCTS:
            raise InputError(
                f"{where}: unrolling it visits {rows:,} outputs × {channels * kh * kw:,} kernel weights = {products:,} products, "
                f"over cardinal's cap of {MAX_CONV_PRODUCTS:,} (2^24): use a smaller kernel or less padding"
            )
        dense = np.zeros((count, out_h * out_w, cols))
        # One kernel row i at a time: every (output position, kernel column j) inside the input pairs, for each
        # input channel c, one input element with the weight kernel[:, c, i, j] (memory: products / kh).
        x = np.arange(out_w)[:, None] * strides[1] - pads[1] + np.arange(kw)[None, :] * dilations[1]  # [out_w, kw]
        x_inside = (x >= 0) & (x < width)
        for i in range(kh):
            y = np.arange(out_h) * strides[0] - pads[0] + i * dilations[0]  # [out_h]
            oy, ox, j = np.nonzero(((y >= 0) & (y < height))[:, None, None] & x_inside[None, :, :])
            if oy.size:
                column = self.index[:, y[oy], x[ox, j]]  # [channels, pairs]
                dense[:, (oy * out_w + ox)[None, :], column] = kernel[:, :, i, j]  # [count, channels, pairs]
        spread = None if bias is None else np.repeat(bias, out_h * out_w)
        self._layer(where, dense.reshape(rows, cols), spread, np.arange(rows).reshape(count, out_h, out_w))

    def _layer(self, where: str, weight: np.ndarray, bias: np.ndarray | None, index: np.ndarray) -> None:
        self.steps.append(ChainStep(where, weight=weight, bias=np.zeros(weight.shape[0]) if bias is None else bias))
        self.index = index
        self.open_bias = bias is None

    def activation(self, activation: Activation, where: str) -> None:
        """An elementwise activation: the tensor's shape and order stay."""
        self._after_softmax(where)
        self.steps.append(ChainStep(where, activation=activation))
        self.open_bias = False

    def no_op(self) -> None:
        """An operation that changes nothing at inference (Identity, Dropout, a Cast between float types)."""
        self.open_bias = False

    # ------------------------------------------------------------------ the head
    def softmax(self, where: str, axis: int) -> None:
        """A Softmax or LogSoftmax over `axis` (batch axis aside) as the last operation: both keep
        the order of the scores exactly (exp is strictly increasing and the normalizer is common
        to all), so the argmax — the prediction, ties included — is the same without it. It is
        dropped, with a note."""
        shape = self.known_shape(where, "a Softmax")
        self._after_softmax(where)
        if len(shape) != 1 or axis not in (0, -1):
            raise InputError(f"{where}: read only over a vector of class scores, not a tensor of shape {list(shape)}")
        self.probabilities = where
        self.open_bias = False

    def classifier_head(self, ops: Sequence[str]) -> None:
        """The model ends in a classifier head (`ops`: ArgMax, ZipMap, ... past the network's
        output, which are dropped): a last `Sigmoid` is its probability, and is dropped too: with
        one logit, class 1 iff sigmoid(z) > 1/2 iff z > 0 (threshold 0); with several, the
        argmax is unchanged."""
        last = self.steps[-1] if self.steps else None
        if self.probabilities is None and last is not None and last.activation is not None and last.activation.name == "sigmoid":
            self.steps.pop()
            if self.size == 1:
                self.dropped.append(f"{last.where}: dropped, class 1 iff the logit > 0 (the sigmoid > 1/2): threshold 0")
                self.threshold = 0.0
            else:
                self.dropped.append(f"{last.where}: dropped, argmax unchanged")
        self.dropped.append(f"classifier head ({', '.join(dict.fromkeys(ops))}): dropped, the network's outputs are its scores")

    def finish(self, output: str = "the output") -> Chain:
        """The chain read; its `output` (named so in messages) is the current tensor, which must be
        in the last layer's order."""
        if self.index is not None and not np.array_equal(self.index.reshape(-1), np.arange(self.index.size)):
            raise InputError(
                f"{output} (shape {list(self.index.shape)}) is a reordering of the last layer's outputs (a Transpose "
                "after the last layer): cardinal reads the outputs in the order the last layer computes them"
            )
        dropped = list(self.dropped)
        if self.probabilities is not None:
            if self.size == 1:
                raise InputError(f"{self.probabilities}: a Softmax over one output is the constant 1; export the logit instead")
            dropped.insert(0, f"{self.probabilities}: dropped, argmax unchanged")
        input_shape = self.input_shape if self.input_shape is not None and len(self.input_shape) > 1 else None
        return Chain(self.steps, input_shape, tuple(dropped), self.threshold)

    def _after_softmax(self, where: str, shaping: bool = False) -> None:
        """After a Softmax only reshapes may follow."""
        if self.probabilities is not None and not shaping:
            raise InputError(
                f"{where} follows {self.probabilities}: a Softmax is read only as the network's last operation "
                "(where the argmax ignores it); export the logits instead"
            )


def _check_elements(shape: Sequence[int], where: str) -> None:
    """Refuse a tensor of `shape` (batch axis aside) beyond `MAX_TENSOR_ELEMENTS`, before it is indexed."""
    elements = math.prod(shape)
    if elements > MAX_TENSOR_ELEMENTS:
        raise InputError(
            f"{where}: a tensor of shape [batch, {', '.join(map(str, shape))}] has {elements:,} elements, over cardinal's "
            f"cap of {MAX_TENSOR_ELEMENTS:,} (2^24) per tensor"
        )

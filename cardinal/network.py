"""`Network`: a fully connected network `h = W·z + b`, `z' = σ(h)`, whose last layer has width K ≥ 1:
one output f with a threshold (K = 1), or K class outputs predicted by argmax (`cardinal.prediction`).

Weights are kept as float64 numpy arrays, read as exact rationals by `cardinal.exact`. Networks load
from and save to the JSON format `cardinal.network/1` (a round trip keeps every double exactly)
and convert to and from torch modules; `Network.load` also reads ONNX and torch files
(`cardinal.formats.loaders`). Loading never runs pickled code.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from . import signs
from .activations import Activation
from .domain import Domain
from .errors import InputError
from .formats.chain import ChainStep
from .io import write_atomic
from .lazy import lazy_import
from .prediction import threshold_for
from .validate import describe, json_matrix, json_number, json_vector

FORMAT = "cardinal.network/1"
torch = lazy_import("torch")  # loaded by the first float computation or torch conversion


@dataclass(frozen=True)
class Metadata:
    """What a network file may say about its inputs, all optional (docs/formats.md, "metadata").

    `feature_names` [n]; `threshold` (K = 1 only): the prediction is 1 iff f(x) > threshold;
    `class_names` [K] (K ≥ 2 only): the name of each class; `scaling`: how raw values became
    inputs, x_i = (raw_i − min_i) / (max_i − min_i) clipped to [0, 1] and then 1 − x_i for i in
    `flipped` (dict with "min" [n], "max" [n], "flipped"); `domain`: the box of the inputs
    (`Domain.to_json()`); `input_shape`: the shape of the model's input tensor (batch axis aside,
    more than one axis) whose elements, row-major, are the features; `dropped`: one note per part
    of the model file left out because it cannot change the prediction (a final Softmax, a
    classifier head). Commands use each field when present unless a flag overrides it.
    """

    feature_names: tuple[str, ...] | None = None
    threshold: float | None = None
    scaling: dict[str, Any] | None = None
    domain: dict[str, Any] | None = None
    input_shape: tuple[int, ...] | None = None
    dropped: tuple[str, ...] | None = None
    class_names: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        document = {
            "feature_names": None if self.feature_names is None else list(self.feature_names),
            "threshold": self.threshold,
            "class_names": None if self.class_names is None else list(self.class_names),
            "scaling": self.scaling,
            "domain": self.domain,
            "input_shape": None if self.input_shape is None else list(self.input_shape),
            "dropped": None if self.dropped is None else list(self.dropped),
        }
        return {key: value for key, value in document.items() if value is not None}

    @classmethod
    def from_json(cls, document: Any, n: int, source: str, classes: int = 1) -> Metadata:
        """Check a parsed "metadata" object against a network of n inputs and `classes` outputs;
        errors name the field."""
        where = f"{source}: metadata"
        if not isinstance(document, dict):
            raise InputError(f"{where} must be an object")
        unknown = set(document) - {"feature_names", "threshold", "class_names", "scaling", "domain", "input_shape", "dropped"}
        if unknown:
            raise InputError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        names = document.get("feature_names")
        if names is not None and (not isinstance(names, list) or len(names) != n or not all(isinstance(v, str) for v in names)):
            raise InputError(f"{where}.feature_names must be a list of {n} strings")
        threshold = document.get("threshold")
        if threshold is not None:
            threshold = json_number(threshold, f"{where}.threshold")
            threshold_for(classes, threshold, f"{where}.threshold")
        class_names = document.get("class_names")
        if class_names is not None:
            if classes == 1:
                raise InputError(f"{where}.class_names applies to networks with K ≥ 2 outputs; this one has one")
            named = isinstance(class_names, list) and all(isinstance(v, str) for v in class_names)
            if not named or len(class_names) != classes:
                raise InputError(f"{where}.class_names must be a list of {classes} strings, one per output")
        scaling = document.get("scaling")
        if scaling is not None:
            if not isinstance(scaling, dict) or not {"min", "max"} <= set(scaling):
                raise InputError(f"{where}.scaling must be an object with 'min' and 'max' ({n} numbers each)")
            for key in ("min", "max"):
                if len(json_vector(scaling[key], f"{where}.scaling.{key}")) != n:
                    raise InputError(f"{where}.scaling.{key} must hold {n} numbers")
            flipped = scaling.get("flipped", [])
            if not isinstance(flipped, list) or not all(isinstance(i, int) and 0 <= i < n for i in flipped):
                raise InputError(f"{where}.scaling.flipped must be a list of feature indices below {n}")
        domain = document.get("domain")
        if domain is not None:
            if Domain.from_json(domain, source=f"{where}.domain").n != n:
                raise InputError(f"{where}.domain must have {n} features")
        shape = document.get("input_shape")
        if shape is not None and (
            not isinstance(shape, list)
            or len(shape) < 2
            or not all(isinstance(size, int) and not isinstance(size, bool) and size > 0 for size in shape)
            or math.prod(shape) != n
        ):
            raise InputError(f"{where}.input_shape must be a list of two or more positive integers whose product is {n}")
        dropped = document.get("dropped")
        if dropped is not None and (not isinstance(dropped, list) or not all(isinstance(note, str) for note in dropped)):
            raise InputError(f"{where}.dropped must be a list of strings")
        return cls(
            feature_names=None if names is None else tuple(names),
            threshold=threshold,
            scaling=scaling,
            domain=domain,
            input_shape=None if shape is None else tuple(shape),
            dropped=None if dropped is None else tuple(dropped),
            class_names=None if class_names is None else tuple(class_names),
        )


@dataclass(frozen=True, eq=False)
class Layer:
    """One layer: `weight` [out, in] and `bias` [out] as read-only float64 arrays."""

    weight: np.ndarray
    bias: np.ndarray
    activation: Activation

    @property
    def width(self) -> int:
        return self.weight.shape[0]


class Network:
    """A validated fully connected network; immutable once built."""

    def __init__(self, layers: Sequence[Layer], metadata: Metadata | None = None) -> None:
        if not layers:
            raise InputError("network has no layers")
        checked = []
        fan_in = None
        for number, layer in enumerate(layers, start=1):
            weight = _matrix(layer.weight, f"layer {number}: weight")
            bias = _vector(layer.bias, f"layer {number}: bias")
            if fan_in is not None and weight.shape[1] != fan_in:
                raise InputError(
                    f"layer {number}: weight has {weight.shape[1]} columns but layer {number - 1} has {fan_in} outputs"
                )
            if bias.shape[0] != weight.shape[0]:
                raise InputError(f"layer {number}: bias has {bias.shape[0]} entries but weight has {weight.shape[0]} rows")
            fan_in = weight.shape[0]
            checked.append(Layer(weight, bias, layer.activation))
        self.layers: tuple[Layer, ...] = tuple(checked)
        self.metadata = metadata if metadata is not None else Metadata()

    def with_metadata(self, metadata: Metadata) -> Network:
        """The same layers with `metadata` (checked against the inputs)."""
        return Network(self.layers, Metadata.from_json(metadata.to_json(), self.n_inputs, "metadata", self.n_outputs))

    # ------------------------------------------------------------------ properties
    @property
    def n_inputs(self) -> int:
        return self.layers[0].weight.shape[1]

    @property
    def n_outputs(self) -> int:
        """K, the width of the last layer: 1 (the threshold rule) or the number of classes (argmax)."""
        return self.layers[-1].weight.shape[0]

    def feature_coordinates(self, index: int) -> tuple[int, ...]:
        """Feature `index` as its coordinates in the model's input tensor (batch axis aside), e.g.
        (row, column, channel) of an NHWC image: features number the elements of
        `metadata.input_shape` in row-major order; (index,) when the network records no shape."""
        if not 0 <= index < self.n_inputs:
            raise InputError(f"feature {index} is out of range: the network has {self.n_inputs} inputs")
        return tuple(int(i) for i in np.unravel_index(index, self.metadata.input_shape or (self.n_inputs,)))

    @property
    def widths(self) -> tuple[int, ...]:
        """Widths of all layers, the last one being K."""
        return tuple(layer.width for layer in self.layers)

    @property
    def depth(self) -> int:
        return len(self.layers)

    def monotonicity_problems(self) -> list[str]:
        """Why the network is not syntactically monotone (empty list when it is): several outputs
        (argmax is monotone in no output, so no monotone shortcut holds), or a negative weight."""
        problems = []
        if self.n_outputs > 1:
            problems.append(f"it has {self.n_outputs} outputs, predicted by argmax, which has no monotone shortcut")
        for number, layer in enumerate(self.layers, start=1):
            negative = np.argwhere(layer.weight < 0)
            if len(negative):
                row, col = negative[0]
                problems.append(
                    f"layer {number} has {len(negative)} negative weight(s), e.g. weight[{row}][{col}] = "
                    f"{float(layer.weight[row, col])!r}"
                )
        return problems

    @cached_property
    def is_monotone(self) -> bool:
        """One output and all weights ≥ 0 (every supported activation is non-decreasing): the
        monotone shortcut holds. A network with K ≥ 2 outputs never is (its argmax is not monotone
        even where every output is)."""
        return not self.monotonicity_problems()

    @cached_property
    def output_directions(self) -> np.ndarray:
        """[K, n] int8: each output's direction in each input by sign analysis (`cardinal.signs`:
        +1 non-decreasing, −1 non-increasing, 0 independent, 2 mixed)."""
        return signs.output_directions(self.layers)

    @cached_property
    def directions(self) -> np.ndarray | None:
        """[n] int8: the direction of the prediction in each input (`cardinal.signs`): of f for
        K = 1, of the logit difference f_1 − f_0 for K = 2; None for K ≥ 3."""
        return signs.decision_directions(self.layers)

    @property
    def is_sign_monotone(self) -> bool:
        """K ≤ 2 and the prediction monotone in every feature, each in its own direction (no
        feature mixed): the monotone shortcut holds with each feature's counterpoint at its own
        end (`Domain.counterpoint`). Implied by `is_monotone`, not the other way round."""
        return self.directions is not None and not bool((self.directions == signs.MIXED).any())

    @property
    def has_monotone_shortcut(self) -> bool:
        """One output and sign-monotone: the exact engines' monotone shortcut applies
        (`Problem.monotone`). A sign-monotone K = 2 network has it through its
        `logit_difference` only (greedy), not in the engines, which take the general path."""
        return self.n_outputs == 1 and self.is_sign_monotone

    @property
    def is_partially_monotone(self) -> bool:
        """K ≤ 2 and some, not all, features mixed: the known directions still fix those features'
        counterpoints (`Problem.known`)."""
        if self.directions is None:
            return False
        mixed = self.directions == signs.MIXED
        return bool(mixed.any()) and not bool(mixed.all())

    def sign_monotonicity_problem(self) -> str:
        """Why the network is not sign-monotone, in one line naming a feature of mixed sign (or the
        K ≥ 3 outputs); empty when it is."""
        if self.directions is None:
            return f"it has {self.n_outputs} outputs, predicted by argmax, which has no single direction per feature"
        mixed = np.flatnonzero(self.directions == signs.MIXED)
        if not len(mixed):
            return ""
        return (
            f"feature {int(mixed[0])} has mixed sign (paths of both signs reach the output)"
            + (f", and {len(mixed) - 1} other feature(s)" if len(mixed) > 1 else "")
        )

    def logit_difference(self) -> Network:
        """K = 2: the single-output network f_1 − f_0 (this network plus an identity layer with
        weights [−1, 1], exact: no weight is rounded), whose prediction at threshold 0 is exactly
        this one's argmax with ties to class 0. Metadata other than class names and threshold is
        kept. K = 1: this network."""
        if self.n_outputs == 1:
            return self
        if self.n_outputs != 2:
            raise InputError(f"the logit difference needs K = 2 outputs; this network has {self.n_outputs}")
        top = Layer(np.array([[-1.0, 1.0]]), np.zeros(1), Activation.make("identity"))
        metadata = replace(self.metadata, class_names=None, threshold=None)
        return Network((*self.layers, top), metadata)

    @property
    def is_admissible(self) -> bool:
        """The paper's Definition 1: monotone with continuous activations (no `step`)."""
        return self.is_monotone and all(layer.activation.is_continuous for layer in self.layers)

    @property
    def is_piecewise_linear(self) -> bool:
        return all(layer.activation.is_piecewise_linear for layer in self.layers)

    def smooth_layers(self) -> str:
        """The layers whose activation is not piecewise linear, named for a message (numbered from 1
        as in the network's errors), e.g. `layer 2 (the output layer): sigmoid`; empty if none."""
        last = len(self.layers)
        return ", ".join(
            f"layer {number}{' (the output layer)' if number == last else ''}: {layer.activation.name}"
            for number, layer in enumerate(self.layers, start=1)
            if not layer.activation.is_piecewise_linear
        )

    @property
    def activation_names(self) -> tuple[str, ...]:
        return tuple(layer.activation.name for layer in self.layers)

    def hidden_activation(self) -> str:
        """A short label for the network's hidden activations, e.g. `relu` or `relu+sigmoid`."""
        hidden = self.layers[:-1] or self.layers
        return "+".join(dict.fromkeys(layer.activation.name for layer in hidden))

    # ------------------------------------------------------------------ evaluation
    def forward(self, x: torch.Tensor | np.ndarray, dtype: torch.dtype | None = None) -> torch.Tensor:
        """Float forward pass: x [B, n] or [n] → f(x) [B] or a scalar tensor (K = 1); the K
        outputs [B, K] or [K] (K ≥ 2). `dtype`: float64 unless given."""
        dtype = torch.float64 if dtype is None else dtype
        z = torch.tensor(np.asarray(x.cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64), dtype=dtype)
        for weight, bias, activation in self.torch_layers(dtype=dtype):
            z = activation(z @ weight.T + bias)
        return z[..., 0] if self.n_outputs == 1 else z

    def torch_layers(
        self, dtype: torch.dtype | None = None, device: torch.device | str | None = None
    ) -> list[tuple[torch.Tensor, torch.Tensor, torch.nn.Module]]:
        """(weight [out, in], bias [out], activation module) per layer, as tensors on `device`
        (float64 unless `dtype` is given)."""
        dtype = torch.float64 if dtype is None else dtype
        return [
            (
                torch.tensor(layer.weight, dtype=dtype, device=device),
                torch.tensor(layer.bias, dtype=dtype, device=device),
                layer.activation.module(),
            )
            for layer in self.layers
        ]

    # ------------------------------------------------------------------ torch
    @classmethod
    def from_torch(cls, model: torch.nn.Module, input_shape: Sequence[int] | None = None) -> Network:
        """Read a torch model: a `torch.nn.Sequential` of `Linear`, `Conv2d` (unrolled into a dense
        layer), `Flatten` and activation modules, or any module whose `forward` is such a chain
        (traced with `torch.fx`); see `cardinal.formats.torch_io`. `input_shape`: the input
        tensor's shape without the batch axis, e.g. (1, 28, 28); a `Conv2d` needs it. A `Linear`
        not followed by an activation gets `identity`; Dropout and Identity are skipped; a last
        Softmax/LogSoftmax is dropped (argmax unchanged) and noted in `metadata.dropped`."""
        from .formats.torch_io import chain_of_module

        chain = chain_of_module(model, None if input_shape is None else tuple(input_shape))
        net = cls.from_chain(chain.steps)
        metadata = chain.metadata()
        return Network(net.layers, Metadata.from_json(metadata, net.n_inputs, "model")) if metadata else net

    def chain(self) -> list[ChainStep]:
        """The layers as a chain: affine map, activation, affine map, activation, ..."""
        steps = []
        for number, layer in enumerate(self.layers, start=1):
            steps.append(ChainStep(f"layer {number}", weight=layer.weight, bias=layer.bias))
            steps.append(ChainStep(f"layer {number}", activation=layer.activation))
        return steps

    @classmethod
    def from_chain(cls, steps: Sequence[ChainStep]) -> Network:
        """Assemble layers from a model read as a chain of affine maps and activations: an affine
        map followed by an activation is one layer, one followed by another affine map (or by
        nothing) gets `identity`. Errors name the step (`ChainStep.where`)."""
        layers: list[Layer] = []
        pending: ChainStep | None = None
        for step in steps:
            if step.activation is None:
                if pending is not None:
                    layers.append(Layer(pending.weight, pending.bias, Activation.make("identity")))
                pending = step
                continue
            if pending is None:
                raise InputError(f"{step.where} is not preceded by a Linear layer")
            layers.append(Layer(pending.weight, pending.bias, step.activation))
            pending = None
        if pending is not None:
            layers.append(Layer(pending.weight, pending.bias, Activation.make("identity")))
        return cls(layers)

    def to_torch(self, dtype: torch.dtype | None = None, device: torch.device | str | None = None) -> torch.nn.Sequential:
        """An equivalent `torch.nn.Sequential` (Linear, activation, Linear, activation, ...), float64
        unless `dtype` is given."""
        dtype = torch.float64 if dtype is None else dtype
        modules: list[torch.nn.Module] = []
        for layer in self.layers:
            linear = torch.nn.Linear(layer.weight.shape[1], layer.width, dtype=dtype, device=device)
            with torch.no_grad():
                linear.weight.copy_(torch.tensor(layer.weight))
                linear.bias.copy_(torch.tensor(layer.bias))
            modules += [linear, layer.activation.module()]
        return torch.nn.Sequential(*modules)

    # ------------------------------------------------------------------ JSON
    @classmethod
    def from_json(cls, document: Any, source: str = "network") -> Network:
        """Build from a parsed `cardinal.network/1` document; errors name `source` and the layer."""
        if not isinstance(document, dict):
            raise InputError(f"{source}: expected a JSON object with 'format' and 'layers', got {describe(document)}")
        if document.get("format") != FORMAT:
            raise InputError(f"{source}: 'format' must be {FORMAT!r}, got {describe(document.get('format'))}")
        specs = document.get("layers")
        if not isinstance(specs, list) or not specs:
            raise InputError(f"{source}: 'layers' must be a non-empty list")
        layers = []
        for number, spec in enumerate(specs, start=1):
            where = f"{source}: layer {number}"
            if not isinstance(spec, dict) or not {"weight", "bias", "activation"} <= set(spec):
                raise InputError(f"{where}: needs 'weight', 'bias' and 'activation'")
            try:
                activation = Activation.from_json(spec["activation"])
            except InputError as error:
                raise InputError(f"{where}: {error}") from None
            layers.append(
                Layer(json_matrix(spec["weight"], f"{where}: weight"), json_vector(spec["bias"], f"{where}: bias"), activation)
            )
        try:
            net = cls(layers)
        except InputError as error:
            raise InputError(f"{source}: {error}") from None
        if "metadata" in document:
            return Network(net.layers, Metadata.from_json(document["metadata"], net.n_inputs, source, net.n_outputs))
        return net

    def to_json(self) -> dict[str, Any]:
        document = self._layers_json()
        metadata = self.metadata.to_json()
        return {**document, "metadata": metadata} if metadata else document

    def _layers_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "layers": [
                {"weight": layer.weight.tolist(), "bias": layer.bias.tolist(), "activation": layer.activation.to_json()}
                for layer in self.layers
            ],
        }

    @classmethod
    def load(
        cls,
        path: str | Path,
        activations: str | Sequence[str | Activation] | None = None,
        input_shape: Sequence[int] | None = None,
    ) -> Network:
        """Read a network file: cardinal's JSON, ONNX, or a torch file (a whole `torch.nn.Sequential`,
        or a state_dict, which needs `activations`: one per Linear layer, as `Activation`s or
        specs like `relu` and `leaky_relu:0.1`, or one comma-separated string); see
        `cardinal.formats.loaders`. `input_shape` (batch axis aside): needed by a whole torch
        module with `Conv2d` layers; for a file that records no shape of two or more axes it is
        recorded in `metadata.input_shape` (pictures of explanations use it); one that differs
        from the shape the file declares is refused. Never runs pickled code."""
        from .formats.loaders import read_model

        document, chain, metadata = read_model(path, activations, input_shape)
        if document is not None:
            return _given_shape(cls.from_json(document, source=str(path)), input_shape, path)
        try:
            net = cls.from_chain(chain)
        except InputError as error:
            message = str(error)
            raise InputError(message if message.startswith(str(path)) else f"{path}: {message}") from None
        if metadata is not None:
            net = Network(net.layers, Metadata.from_json(metadata, net.n_inputs, str(path), net.n_outputs))
        return _given_shape(net, input_shape, path)

    def save(self, path: str | Path, float32: bool = False, state_dict: bool = False, *, root: str | Path | None = None) -> None:
        """Write the network, whole or not at all, in the format of the extension: `.onnx`, a
        torch file (`.pt`, `.pth`, `.bin`: the whole `torch.nn.Sequential`, or its state_dict), else
        JSON. ONNX and torch files hold float64 weights, the same network exactly, unless
        `float32` (which rounds them). `root`: as in `io.write_atomic` (a link at `path` is
        followed unless `path` lies below `root`)."""
        from .formats.loaders import format_for_output

        kind = format_for_output(path, strict=False)
        if state_dict and kind != "torch":
            raise InputError(f"{path}: a state_dict is a torch file (.pt, .pth)")
        if float32 and kind == "json":
            raise InputError(f"{path}: JSON keeps every double; float32 applies to ONNX and torch files")
        if kind == "onnx":
            from .formats.onnx_io import onnx_bytes

            shape = self.metadata.input_shape or (self.n_inputs,)
            data = onnx_bytes(self.chain(), shape, self.n_outputs, float32, self.metadata.to_json() or None)
            write_atomic(path, data, root=root)
        elif kind == "torch":
            from .formats.torch_io import torch_bytes

            write_atomic(path, torch_bytes(self.to_torch(torch.float32 if float32 else torch.float64), state_dict), root=root)
        else:
            write_atomic(path, json.dumps(self.to_json()) + "\n", root=root)

    @cached_property
    def sha256(self) -> str:
        """SHA-256 (64 hex digits) of the canonical JSON form of the layers, metadata aside: what a
        certificate names its network by (docs/proofs.md, `cardinal.checker.network_sha256`)."""
        canonical = json.dumps(self._layers_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    @property
    def hash(self) -> str:
        """The first 16 hex digits of `sha256`."""
        return self.sha256[:16]

    def __repr__(self) -> str:
        return f"Network(n={self.n_inputs}, widths={self.widths}, activations={self.activation_names})"


def _checked(array: np.ndarray, where: str) -> np.ndarray:
    bad = np.argwhere(~np.isfinite(array))
    if len(bad):
        index = tuple(int(i) for i in bad[0])
        raise InputError(f"{where} has a non-finite value {array[index]} at {list(index)}")
    array = np.array(array, dtype=np.float64)
    array.setflags(write=False)
    return array


def _matrix(value: Any, where: str) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64)
    if array.ndim != 2 or 0 in array.shape:
        raise InputError(f"{where} must be a non-empty 2-D array, got shape {list(array.shape)}")
    return _checked(array, where)


def _vector(value: Any, where: str) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64)
    if array.ndim != 1:
        raise InputError(f"{where} must be a 1-D array, got shape {list(array.shape)}")
    return _checked(array, where)


def _given_shape(net: Network, shape: Sequence[int] | None, path: str | Path) -> Network:
    """`net` with the input shape the caller gave (`Network.load`'s `input_shape`) recorded where the
    file records none; a shape of one axis records nothing; one that differs from the file's is refused."""
    if shape is None or len(shape) < 2:
        return net
    shape = tuple(int(size) for size in shape)
    declared = net.metadata.input_shape
    if declared is None:
        if math.prod(shape) != net.n_inputs:
            size = math.prod(shape)
            raise InputError(f"{path}: input_shape {list(shape)} has {size} elements, the network {net.n_inputs} inputs")
        return Network(net.layers, replace(net.metadata, input_shape=shape))
    if declared != shape:
        raise InputError(f"{path} declares its own input shape {list(declared)}: drop input_shape {list(shape)}")
    return net

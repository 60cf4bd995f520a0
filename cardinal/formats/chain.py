"""`ChainStep`: a model from another tool read as a chain of affine maps and activations.

The readers of ONNX and torch files (`cardinal.formats.onnx_io`, `cardinal.formats.torch_io`) produce chains, and
`Network.from_chain` assembles the layers; the ONNX writer consumes `Network.chain()`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..activations import Activation


@dataclass(frozen=True, eq=False)
class ChainStep:
    """An affine map with `weight` [out, in] and `bias` [out] (float64), or an `activation`.
    `where` names the step in messages, e.g. "module 2 (ReLU)" or "node /0/Gemm (Gemm)"."""

    where: str
    weight: np.ndarray | None = None
    bias: np.ndarray | None = None
    activation: Activation | None = None

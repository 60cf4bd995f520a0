"""Activation functions: names, parameters, JSON form, and their torch counterparts.

Every activation cardinal accepts is non-decreasing (a leaky ReLU with a negative slope is
rejected), so a network is monotone exactly when all its weights are non-negative.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import torch
from torch import nn

from .errors import InputError
from .validate import describe, json_number

PIECEWISE_LINEAR = ("identity", "relu", "leaky_relu", "hardtanh", "step")
SMOOTH = ("sigmoid", "tanh", "softplus")
NAMES = PIECEWISE_LINEAR + SMOOTH

# Parameters each activation takes, with their defaults (torch's defaults where torch has one).
_PARAMETERS: dict[str, dict[str, float]] = {
    "leaky_relu": {"slope": 0.01},
    "hardtanh": {"min": -1.0, "max": 1.0},
    "step": {"at": 0.0},
}


class Step(nn.Module):
    """Heaviside step: 1 where the input is ≥ `at`, else 0 (same shape and dtype as the input)."""

    def __init__(self, at: float = 0.0) -> None:
        super().__init__()
        self.at = float(at)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return (h >= self.at).to(h.dtype)

    def extra_repr(self) -> str:
        return f"at={self.at}"


@dataclass(frozen=True)
class Activation:
    """One activation with its parameters; `params` holds (name, value) pairs in a fixed order."""

    name: str
    params: tuple[tuple[str, float], ...] = ()

    @classmethod
    def make(cls, name: str, **params: float) -> Activation:
        """Build and validate an activation; missing parameters take their defaults."""
        if name not in NAMES:
            raise InputError(f"unknown activation {name!r} (known: {', '.join(NAMES)})")
        defaults = _PARAMETERS.get(name, {})
        unknown = set(params) - set(defaults)
        if unknown:
            raise InputError(f"activation {name!r} takes no parameter {sorted(unknown)[0]!r}")
        values = {key: _finite(name, key, params.get(key, default)) for key, default in defaults.items()}
        if name == "leaky_relu" and values["slope"] < 0:
            raise InputError(f"leaky_relu slope {values['slope']} is negative (must be ≥ 0)")
        if name == "hardtanh" and values["min"] > values["max"]:
            raise InputError(f"hardtanh min {values['min']} exceeds max {values['max']}")
        return cls(name, tuple(values.items()))

    @classmethod
    def from_json(cls, spec: Any) -> Activation:
        """Parse `"relu"` or `{"name": "step", "at": 0.5}`."""
        if isinstance(spec, str):
            return cls.make(spec)
        if isinstance(spec, dict) and isinstance(spec.get("name"), str):
            name = spec["name"]
            params = {
                key: json_number(value, f"activation {describe(name)}: parameter {describe(key)}")
                for key, value in spec.items()
                if key != "name"
            }
            return cls.make(name, **params)
        raise InputError(f"activation must be a name or an object with a 'name', got {describe(spec)}")

    def to_json(self) -> str | dict[str, Any]:
        return {"name": self.name, **dict(self.params)} if self.params else self.name

    def param(self, key: str) -> float:
        return dict(self.params)[key]

    @property
    def is_piecewise_linear(self) -> bool:
        return self.name in PIECEWISE_LINEAR

    @property
    def is_continuous(self) -> bool:
        return self.name != "step"

    def pieces(self) -> tuple[list[Fraction], list[tuple[Fraction, Fraction]]]:
        """Piecewise-linear activations only: breakpoints c_1 ≤ … ≤ c_m and the pieces ℓ_0..ℓ_m
        as exact (slope, offset) pairs, σ = ℓ_j between c_j and c_{j+1} (a step is ℓ_1 from c_1 on)."""
        zero, one = Fraction(0), Fraction(1)
        if self.name == "identity":
            return [], [(one, zero)]
        if self.name in ("relu", "leaky_relu"):
            slope = zero if self.name == "relu" else Fraction(self.param("slope"))
            return [zero], [(slope, zero), (one, zero)]
        if self.name == "hardtanh":
            low, high = Fraction(self.param("min")), Fraction(self.param("max"))
            return [low, high], [(zero, low), (one, zero), (zero, high)]
        if self.name == "step":
            return [Fraction(self.param("at"))], [(zero, zero), (zero, one)]
        raise ValueError(f"{self.name} is not piecewise linear")

    def pieces_over(self, low: Fraction, high: Fraction) -> tuple[int, list[Fraction]]:
        """For h ∈ [low, high]: the index of the piece σ follows at `low`, and the breakpoints
        where it changes piece inside the interval (none: σ is that one piece throughout; a step
        changes at `at` ≤ high, a continuous σ only at breakpoints < high)."""
        breaks, _ = self.pieces()
        step = self.name == "step"
        return sum(c <= low for c in breaks), [c for c in breaks if low < c and (c <= high if step else c < high)]

    def apply_(self, h: torch.Tensor) -> torch.Tensor:
        """Apply elementwise in place (where torch allows; softplus returns a new tensor)."""
        if self.name == "relu":
            return h.relu_()
        if self.name == "leaky_relu":
            return torch.nn.functional.leaky_relu_(h, self.param("slope"))
        if self.name == "hardtanh":
            return h.clamp_(self.param("min"), self.param("max"))
        if self.name == "step":
            return h.ge_(self.param("at"))
        if self.name == "sigmoid":
            return h.sigmoid_()
        if self.name == "tanh":
            return h.tanh_()
        if self.name == "softplus":
            return torch.nn.functional.softplus(h)
        return h

    def module(self) -> nn.Module:
        """The torch module computing this activation."""
        if self.name == "identity":
            return nn.Identity()
        if self.name == "relu":
            return nn.ReLU()
        if self.name == "leaky_relu":
            return nn.LeakyReLU(self.param("slope"))
        if self.name == "hardtanh":
            return nn.Hardtanh(self.param("min"), self.param("max"))
        if self.name == "step":
            return Step(self.param("at"))
        if self.name == "sigmoid":
            return nn.Sigmoid()
        if self.name == "tanh":
            return nn.Tanh()
        return nn.Softplus()

    @classmethod
    def from_module(cls, module: nn.Module) -> Activation:
        """Inverse of `module()`; raises `InputError` for modules cardinal cannot represent."""
        if isinstance(module, nn.Identity):
            return cls.make("identity")
        if isinstance(module, nn.ReLU):
            return cls.make("relu")
        if isinstance(module, nn.LeakyReLU):
            return cls.make("leaky_relu", slope=module.negative_slope)
        if isinstance(module, nn.Hardtanh):  # also nn.ReLU6
            return cls.make("hardtanh", min=module.min_val, max=module.max_val)
        if isinstance(module, Step):
            return cls.make("step", at=module.at)
        if isinstance(module, nn.Sigmoid):
            return cls.make("sigmoid")
        if isinstance(module, nn.Tanh):
            return cls.make("tanh")
        if isinstance(module, nn.Softplus):
            if module.beta != 1:
                raise InputError(f"Softplus with beta={module.beta} is not supported (only beta=1)")
            return cls.make("softplus")
        raise InputError(f"unsupported module {type(module).__name__} (known activations: {', '.join(NAMES)})")


def _finite(name: str, key: str, value: float) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"activation {name!r}: parameter {key!r} is not a finite number") from None
    if not math.isfinite(value):
        raise InputError(f"activation {name!r}: parameter {key!r} is {value}")
    return value

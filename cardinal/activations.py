"""Activation functions, each defined once: parameters, JSON form, torch op and module, exact
pieces or real function, the MILP stages, and the float error bound.

Every activation cardinal accepts is non-decreasing (a leaky ReLU with a negative slope is
rejected), so a network is monotone exactly when all its weights are non-negative. One `_Family`
subclass per activation holds everything about it; `Activation` (name + parameters, the value
stored in a network) delegates to its family, and every other module (exact evaluation, the MILP
encoding, the z3 cuts, enumeration's float bounds, reports) derives what it needs from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import mpmath
import numpy as np

from .errors import InputError
from .lazy import lazy_import
from .rounding import TINY, UNIT_ROUNDOFF
from .validate import describe, json_number

Params = dict[str, float]
Piece = tuple[Fraction, Fraction]  # σ(h) = slope·h + offset
torch = lazy_import("torch")  # loaded by the first float computation


def _step_module() -> type[torch.nn.Module]:
    """`Step`, the torch module of the Heaviside step: 1 where the input is ≥ `at`, else 0 (same
    shape and dtype as the input). Defined on first use, since it subclasses `torch.nn.Module`;
    it lives in this module's namespace (`cardinal.activations.Step`, where saved models find it)."""
    if "Step" not in globals():

        class Step(torch.nn.Module):
            __doc__ = _step_module.__doc__

            def __init__(self, at: float = 0.0) -> None:
                super().__init__()
                self.at = float(at)

            def forward(self, h: torch.Tensor) -> torch.Tensor:
                return (h >= self.at).to(h.dtype)

            def extra_repr(self) -> str:
                return f"at={self.at}"

        Step.__qualname__ = "Step"
        globals()["Step"] = Step
    return globals()["Step"]


def __getattr__(name: str) -> Any:
    """PEP 562: `Step` is made on first use (`_step_module`)."""
    if name == "Step":
        return _step_module()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Stage:
    """One stage of a PWL activation in the MILP: `op` ∈ {max, min}: z = op(w, slope·w + offset);
    `op` = step: z = [w ≥ offset]."""

    op: str
    slope: Fraction = Fraction(0)
    offset: Fraction = Fraction(0)


class _Family:
    """Everything about one activation. Subclasses set the class attributes and the methods that
    apply to them (PWL families: `pieces`, `stages`; smooth families: `real`, `lipschitz`)."""

    name: ClassVar[str]
    defaults: ClassVar[Params] = {}  # parameters with their defaults (torch's where torch has one)
    piecewise_linear: ClassVar[bool] = True
    continuous: ClassVar[bool] = True
    torch_name: ClassVar[str]  # the module's class in torch.nn
    relative_error: ClassVar[float] = 0.0  # float op error, relative to |σ(h)|
    absolute_error: ClassVar[float] = 0.0

    def validate(self, p: Params) -> None:
        """Raise `InputError` for parameter values the family does not accept."""

    def apply_(self, h: torch.Tensor, p: Params) -> torch.Tensor:
        """σ(h) elementwise, in place where torch allows."""
        raise NotImplementedError

    def module(self, p: Params) -> torch.nn.Module:
        raise NotImplementedError

    def torch_type(self) -> type[torch.nn.Module]:
        """The torch module class of this activation."""
        return getattr(torch.nn, self.torch_name)

    def params_of(self, module: torch.nn.Module) -> Params:
        """The parameters of a torch module of `torch_type()` (raise `InputError` if unsupported)."""
        return {}

    def pieces(self, p: Params) -> tuple[list[Fraction], list[Piece]]:
        raise ValueError(f"{self.name} is not piecewise linear")

    def stages(self, p: Params) -> list[Stage]:
        raise ValueError(f"activation {self.name!r} is not piecewise linear")

    def real(self, x: mpmath.mpf) -> mpmath.mpf:
        """σ(x) at mpmath's working precision (smooth families)."""
        raise ValueError(f"{self.name} is piecewise linear: evaluate its pieces exactly")

    def rational(self, x: Fraction) -> Fraction | None:
        """σ(x) for a rational x when that value is rational, else None (smooth families)."""
        raise ValueError(f"{self.name} is piecewise linear: evaluate its pieces exactly")

    def lipschitz(self, p: Params) -> float:
        return 1.0


class _Identity(_Family):
    name, torch_name = "identity", "Identity"

    def apply_(self, h: torch.Tensor, p: Params) -> torch.Tensor:
        return h

    def module(self, p: Params) -> torch.nn.Module:
        return torch.nn.Identity()

    def pieces(self, p: Params) -> tuple[list[Fraction], list[Piece]]:
        return [], [(Fraction(1), Fraction(0))]

    def stages(self, p: Params) -> list[Stage]:
        return []


class _ReLU(_Family):
    name, torch_name = "relu", "ReLU"

    def apply_(self, h: torch.Tensor, p: Params) -> torch.Tensor:
        return h.relu_()

    def module(self, p: Params) -> torch.nn.Module:
        return torch.nn.ReLU()

    def pieces(self, p: Params) -> tuple[list[Fraction], list[Piece]]:
        return [Fraction(0)], [(Fraction(0), Fraction(0)), (Fraction(1), Fraction(0))]

    def stages(self, p: Params) -> list[Stage]:
        return [Stage("max")]


class _LeakyReLU(_Family):
    name, torch_name, defaults = "leaky_relu", "LeakyReLU", {"slope": 0.01}
    relative_error = UNIT_ROUNDOFF  # one rounded product on the negative side

    def validate(self, p: Params) -> None:
        if p["slope"] < 0:
            raise InputError(f"leaky_relu slope {p['slope']} is negative (must be ≥ 0)")

    def apply_(self, h: torch.Tensor, p: Params) -> torch.Tensor:
        return torch.nn.functional.leaky_relu_(h, p["slope"])

    def module(self, p: Params) -> torch.nn.Module:
        return torch.nn.LeakyReLU(p["slope"])

    def params_of(self, module: torch.nn.Module) -> Params:
        return {"slope": module.negative_slope}

    def pieces(self, p: Params) -> tuple[list[Fraction], list[Piece]]:
        return [Fraction(0)], [(Fraction(p["slope"]), Fraction(0)), (Fraction(1), Fraction(0))]

    def stages(self, p: Params) -> list[Stage]:
        slope = Fraction(p["slope"])
        return [] if slope == 1 else [Stage("max" if slope < 1 else "min", slope)]

    def lipschitz(self, p: Params) -> float:
        return max(1.0, p["slope"])


class _Hardtanh(_Family):
    name, torch_name, defaults = "hardtanh", "Hardtanh", {"min": -1.0, "max": 1.0}  # torch.nn.ReLU6 too

    def validate(self, p: Params) -> None:
        if p["min"] > p["max"]:
            raise InputError(f"hardtanh min {p['min']} exceeds max {p['max']}")

    def apply_(self, h: torch.Tensor, p: Params) -> torch.Tensor:
        return h.clamp_(p["min"], p["max"])

    def module(self, p: Params) -> torch.nn.Module:
        return torch.nn.Hardtanh(p["min"], p["max"])

    def params_of(self, module: torch.nn.Module) -> Params:
        return {"min": module.min_val, "max": module.max_val}

    def pieces(self, p: Params) -> tuple[list[Fraction], list[Piece]]:
        low, high = Fraction(p["min"]), Fraction(p["max"])
        return [low, high], [(Fraction(0), low), (Fraction(1), Fraction(0)), (Fraction(0), high)]

    def stages(self, p: Params) -> list[Stage]:
        return [Stage("max", offset=Fraction(p["min"])), Stage("min", offset=Fraction(p["max"]))]


class _Step(_Family):
    name, torch_name, defaults = "step", "Step", {"at": 0.0}
    continuous = False

    def apply_(self, h: torch.Tensor, p: Params) -> torch.Tensor:
        return h.ge_(p["at"])

    def torch_type(self) -> type[torch.nn.Module]:
        return _step_module()

    def module(self, p: Params) -> torch.nn.Module:
        return self.torch_type()(p["at"])

    def params_of(self, module: torch.nn.Module) -> Params:
        return {"at": module.at}

    def pieces(self, p: Params) -> tuple[list[Fraction], list[Piece]]:
        return [Fraction(p["at"])], [(Fraction(0), Fraction(0)), (Fraction(0), Fraction(1))]

    def stages(self, p: Params) -> list[Stage]:
        return [Stage("step", offset=Fraction(p["at"]))]


class _Smooth(_Family):
    """Smooth families: exact enclosures from `real` at high precision; the float op is trusted
    to 1e-15 relative (plus `TINY`), and an input error grows by at most `lipschitz`.

    Where σ(x) is rational, `rational` gives it and evaluation is exact (a point, no enclosure):
    sigmoid(0) = 1/2 and tanh(0) = 0. At every other rational x the value is irrational. By
    Hermite–Lindemann, e^a is transcendental for every algebraic a ≠ 0, so sigmoid(x) =
    1/(1 + e^−x) and tanh(x) = (e^2x − 1)/(e^2x + 1) are irrational for rational x ≠ 0. And
    softplus(x) = ln(1 + e^x) is irrational for every rational x: a rational value q would give
    e^q = 1 + e^x with q ≠ 0 and q ≠ x; for x = 0, e^q = 2 is algebraic, which Hermite–Lindemann
    excludes; otherwise e^q − e^x − e^0 = 0 with distinct algebraic exponents, which
    Lindemann–Weierstrass excludes. So an enclosure of σ at such a point never has a rational
    (a step's breakpoint, a threshold) as its exact value, and a finer one always separates them.
    Equalities that arise later in a network (sigmoid(a) + sigmoid(−a) = 1) stay beyond
    enclosures: what rests on them is reported as undecided.
    """

    piecewise_linear = False
    relative_error, absolute_error = 1e-15, TINY

    def rational(self, x: Fraction) -> Fraction | None:
        return None


class _Sigmoid(_Smooth):
    name, torch_name = "sigmoid", "Sigmoid"

    def apply_(self, h: torch.Tensor, p: Params) -> torch.Tensor:
        return h.sigmoid_()

    def module(self, p: Params) -> torch.nn.Module:
        return torch.nn.Sigmoid()

    def real(self, x: mpmath.mpf) -> mpmath.mpf:
        return 1 / (1 + mpmath.exp(-x))

    def rational(self, x: Fraction) -> Fraction | None:
        return Fraction(1, 2) if x == 0 else None

    def lipschitz(self, p: Params) -> float:
        return 0.25


class _Tanh(_Smooth):
    name, torch_name = "tanh", "Tanh"

    def apply_(self, h: torch.Tensor, p: Params) -> torch.Tensor:
        return h.tanh_()

    def module(self, p: Params) -> torch.nn.Module:
        return torch.nn.Tanh()

    def real(self, x: mpmath.mpf) -> mpmath.mpf:
        return mpmath.tanh(x)

    def rational(self, x: Fraction) -> Fraction | None:
        return Fraction(0) if x == 0 else None


class _Softplus(_Smooth):
    name, torch_name = "softplus", "Softplus"

    def apply_(self, h: torch.Tensor, p: Params) -> torch.Tensor:
        return torch.logaddexp(h, torch.zeros_like(h))  # log(1 + e^h), without torch's linear cut-off at 20

    def module(self, p: Params) -> torch.nn.Module:
        return torch.nn.Softplus()

    def params_of(self, module: torch.nn.Module) -> Params:
        if module.beta != 1:
            raise InputError(f"Softplus with beta={module.beta} is not supported (only beta=1)")
        return {}

    def real(self, x: mpmath.mpf) -> mpmath.mpf:
        return mpmath.log1p(mpmath.exp(x))


_FAMILIES: dict[str, _Family] = {
    family.name: family for family in (_Identity(), _ReLU(), _LeakyReLU(), _Hardtanh(), _Step(), _Sigmoid(), _Tanh(), _Softplus())
}
NAMES = tuple(_FAMILIES)
CONTINUOUS = tuple(name for name, family in _FAMILIES.items() if family.continuous)


@dataclass(frozen=True)
class Activation:
    """One activation with its parameters; `params` holds (name, value) pairs in a fixed order."""

    name: str
    params: tuple[tuple[str, float], ...] = ()

    @classmethod
    def make(cls, name: str, **params: float) -> Activation:
        """Build and validate an activation; missing parameters take their defaults."""
        if name not in _FAMILIES:
            raise InputError(f"unknown activation {name!r} (known: {', '.join(NAMES)})")
        family = _FAMILIES[name]
        unknown = set(params) - set(family.defaults)
        if unknown:
            raise InputError(f"activation {name!r} takes no parameter {sorted(unknown)[0]!r}")
        values = {key: _finite(name, key, params.get(key, default)) for key, default in family.defaults.items()}
        family.validate(values)
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

    @classmethod
    def from_module(cls, module: torch.nn.Module) -> Activation:
        """Inverse of `module()`; raises `InputError` for modules cardinal cannot represent."""
        for family in _FAMILIES.values():
            if isinstance(module, family.torch_type()):
                return cls.make(family.name, **family.params_of(module))
        raise InputError(f"unsupported module {type(module).__name__} (known activations: {', '.join(NAMES)})")

    def to_json(self) -> str | dict[str, Any]:
        return {"name": self.name, **dict(self.params)} if self.params else self.name

    @property
    def _family(self) -> _Family:
        return _FAMILIES[self.name]

    def param(self, key: str) -> float:
        return dict(self.params)[key]

    @property
    def is_piecewise_linear(self) -> bool:
        return self._family.piecewise_linear

    @property
    def is_continuous(self) -> bool:
        return self._family.continuous

    def apply_(self, h: torch.Tensor) -> torch.Tensor:
        """Apply elementwise in place (where torch allows; softplus returns a new tensor)."""
        return self._family.apply_(h, dict(self.params))

    def module(self) -> torch.nn.Module:
        """The torch module computing this activation."""
        return self._family.module(dict(self.params))

    def pieces(self) -> tuple[list[Fraction], list[Piece]]:
        """Piecewise-linear activations only: breakpoints c_1 ≤ … ≤ c_m and the pieces ℓ_0..ℓ_m
        as exact (slope, offset) pairs, σ = ℓ_j on [c_j, c_{j+1}) (a step is ℓ_1 from c_1 on)."""
        return self._family.pieces(dict(self.params))

    def pieces_over(self, low: Fraction, high: Fraction) -> tuple[int, list[Fraction]]:
        """For h ∈ [low, high]: the index of the piece σ follows at `low`, and the breakpoints
        where it changes piece inside the interval (none: σ is that one piece throughout; a step
        changes at `at` ≤ high, a continuous σ only at breakpoints < high)."""
        breaks, _ = self.pieces()
        closed = not self.is_continuous
        return sum(c <= low for c in breaks), [c for c in breaks if low < c and (c <= high if closed else c < high)]

    def stages(self) -> list[Stage]:
        """The MILP form: a chain of max/min/step stages (empty for identity)."""
        return self._family.stages(dict(self.params))

    def real(self, x: mpmath.mpf) -> mpmath.mpf:
        """Smooth activations only: σ(x) at mpmath's working precision."""
        return self._family.real(x)

    def rational(self, x: Fraction) -> Fraction | None:
        """Smooth activations only: σ(x) at a rational x when it is rational (sigmoid(0) = 1/2,
        tanh(0) = 0), else None — and then it is irrational (`_Smooth`)."""
        return self._family.rational(x)

    def float_error(self, z: torch.Tensor | np.ndarray, bound: torch.Tensor | np.ndarray) -> torch.Tensor | np.ndarray:
        """A rigorous bound [same shape] on |float σ(h) − σ(h*)| given |h − h*| ≤ bound and the
        computed z = σ(h) (continuous activations only)."""
        family = self._family
        if not family.continuous:
            raise ValueError(f"{self.name} is discontinuous: no error bound through it")
        grown = bound * family.lipschitz(dict(self.params))
        if family.relative_error:
            grown = grown + family.relative_error * abs(z)
        return grown + family.absolute_error if family.absolute_error else grown


def _finite(name: str, key: str, value: float) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"activation {name!r}: parameter {key!r} is not a finite number") from None
    if not math.isfinite(value):
        raise InputError(f"activation {name!r}: parameter {key!r} is {value}")
    return value

"""`Domain`: the box `[l, u]` that inputs and explanations range over.

A *binary* domain allows only the two end points `l_i` and `u_i` in each feature (with l = 0 and
u = 1 it is the Boolean cube). On monotone networks both kinds give the same explanations, since
only the end points matter; on other networks they differ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Union

import numpy as np

from .errors import InputError
from .lazy import is_tensor
from .validate import describe, json_bool, json_number, json_vector

# A radius of `Domain.ball`: one number for every feature, or one per feature [n].
Radius = Union[float, "list[float]", np.ndarray]


@dataclass(frozen=True, eq=False)
class Domain:
    """Bounds `lower`, `upper`: read-only float64 arrays [n] with lower ≤ upper."""

    lower: np.ndarray
    upper: np.ndarray
    binary: bool = False

    def __post_init__(self) -> None:
        lower = np.array(self.lower, dtype=np.float64).reshape(-1)
        upper = np.array(self.upper, dtype=np.float64).reshape(-1)
        if lower.shape != upper.shape or lower.size == 0:
            raise InputError(f"domain bounds have {lower.size} lower and {upper.size} upper entries")
        for name, bound in (("lower", lower), ("upper", upper)):
            bad = np.flatnonzero(~np.isfinite(bound))
            if bad.size:
                raise InputError(f"domain {name} bound of feature {bad[0]} is {bound[bad[0]]}")
        crossed = np.flatnonzero(lower > upper)
        if crossed.size:
            i = crossed[0]
            raise InputError(f"domain feature {i}: lower bound {lower[i]} exceeds upper bound {upper[i]}")
        lower.setflags(write=False)
        upper.setflags(write=False)
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)

    @classmethod
    def unit(cls, n: int) -> Domain:
        """The box [0, 1]^n."""
        return cls(np.zeros(n), np.ones(n))

    @classmethod
    def boolean(cls, n: int) -> Domain:
        """The Boolean cube {0, 1}^n."""
        return cls(np.zeros(n), np.ones(n), binary=True)

    @classmethod
    def broadcast(cls, lower: float | list[float], upper: float | list[float], n: int, binary: bool = False) -> Domain:
        """Scalars broadcast to all n features; lists must have n entries."""
        low, high = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
        for name, bound in (("lower", low), ("upper", high)):
            if bound.ndim and bound.size != n:
                raise InputError(f"domain {name} bound has {bound.size} entries, the network has {n} inputs")
        return cls(np.broadcast_to(low, (n,)), np.broadcast_to(high, (n,)), binary=binary)

    @property
    def n(self) -> int:
        return self.lower.shape[0]

    def to_json(self, compact: bool = False) -> dict[str, Any]:
        """`{"lower": [...], "upper": [...]}` (with `"binary": true` for a binary box). `compact`:
        a bound whose entries are all equal is written as one number (read back by `from_json`
        with `n`), so that a record can carry its box at little cost."""

        def bound(values: np.ndarray) -> float | list[float]:
            return float(values[0]) if compact and bool((values == values[0]).all()) else values.tolist()

        document: dict[str, Any] = {"lower": bound(self.lower), "upper": bound(self.upper)}
        if self.binary:
            document["binary"] = True
        return document

    @classmethod
    def from_json(cls, document: Any, source: str = "domain", n: int | None = None) -> Domain:
        """Parse `{"lower": [...], "upper": [...], "binary": true|false}` ("binary" optional, a
        JSON Boolean only); with `n`, a bound may be one number for all n features (the compact
        form of `to_json`) and lists must have n entries. Errors name `source` and the field."""
        if not isinstance(document, dict) or "lower" not in document or "upper" not in document:
            raise InputError(f"{source}: expected an object with 'lower' and 'upper', got {describe(document)}")

        def bound(name: str, length: int | None) -> np.ndarray:
            value = document[name]
            if n is not None and not isinstance(value, list):
                return np.full(n, json_number(value, f"{source}: {name}"))
            return json_vector(value, f"{source}: {name}", length=length)

        lower = bound("lower", n)
        upper = bound("upper", len(lower))
        binary = json_bool(document.get("binary", False), f"{source}: binary")
        try:
            return cls(lower, upper, binary=binary)
        except InputError as error:
            raise InputError(f"{source}: {error}") from None

    def same_as(self, other: Domain) -> bool:
        """The same box, bound for bound, and the same binary flag."""
        return (
            self.binary == other.binary
            and np.array_equal(self.lower, other.lower)
            and np.array_equal(self.upper, other.upper)
        )

    def describe(self) -> str:
        """The box in a few words: `[0, 1]^n`, `{0, 1}^n` when binary, else `a box of n features`."""
        compact = self.to_json(compact=True)
        low, high = compact["lower"], compact["upper"]
        if isinstance(low, float) and isinstance(high, float):
            return f"{{{low:g}, {high:g}}}^{self.n}" if self.binary else f"[{low:g}, {high:g}]^{self.n}"
        return f"a {'binary ' if self.binary else ''}box of {self.n} features (per-feature bounds)"

    def check(self, X: np.ndarray, source: str = "inputs") -> np.ndarray:
        """Validate inputs X [B, n] (or [n]) against the box; returns them as float64 [B, n].

        Raises `InputError` naming the first offending row and feature.
        """
        X = np.asarray(X.cpu() if is_tensor(X) else X, dtype=np.float64)
        if X.ndim == 1:
            X = X[None, :]
        if X.ndim != 2 or X.shape[1] != self.n:
            raise InputError(f"{source}: inputs have shape {list(X.shape)}, expected [B, {self.n}]")
        bad = np.argwhere(~np.isfinite(X))
        if len(bad):
            row, feature = bad[0]
            raise InputError(f"{source}: row {row}, feature {feature} is {float(X[row, feature])}")
        outside = np.argwhere((X < self.lower) | (X > self.upper))
        if len(outside):
            row, feature = outside[0]
            raise InputError(
                f"{source}: row {row}, feature {feature} = {float(X[row, feature])!r} lies outside the domain "
                f"[{float(self.lower[feature])!r}, {float(self.upper[feature])!r}]"
            )
        if self.binary:
            off = np.argwhere((X != self.lower) & (X != self.upper))
            if len(off):
                row, feature = off[0]
                raise InputError(
                    f"{source}: row {row}, feature {feature} = {float(X[row, feature])!r} is not an end point of the "
                    f"binary domain {{{float(self.lower[feature])!r}, {float(self.upper[feature])!r}}}"
                )
        return X

    def radius(self, radius: Radius, source: str = "radius") -> np.ndarray:
        """`radius` (one number, or one per feature) as a read-only float64 vector [n]; every entry
        finite and > 0, else InputError naming `source` and the feature."""
        r = np.array(radius, dtype=np.float64)
        if r.ndim > 1 or (r.ndim == 1 and r.size != self.n):
            raise InputError(f"{source} has {r.size} entries, the domain has {self.n} features (give one number or {self.n})")
        bad = np.flatnonzero(~(np.isfinite(r) & (r > 0)).reshape(-1))
        if bad.size:
            where = "" if r.ndim == 0 else f" of feature {bad[0]}"
            raise InputError(f"{source}{where} is {float(r.reshape(-1)[bad[0]])!r}: a radius must be a finite number > 0")
        vector = np.broadcast_to(r, (self.n,)).copy()
        vector.setflags(write=False)
        return vector

    def ball(self, x: np.ndarray, radius: Radius, source: str = "radius") -> Domain:
        """The box of input x [n] at `radius` (one number or one per feature): the largest box of
        doubles inside the exact ε-ball of x in the max norm, clipped to this box. Feature i ranges
        over [max(l_i, lo_i), min(u_i, hi_i)], lo_i the smallest double ≥ x_i − r_i and hi_i the
        largest double ≤ x_i + r_i, both computed exactly (the doubles read as rationals): every
        point of the box lies within exact distance r_i of x_i, and every double that does (in
        this box) lies in it. The one place a ball is built. x must lie in this box; a binary box is
        refused (it has no ball)."""
        if self.binary:
            raise InputError(f"{source}: a binary domain has no ball around an input; drop --binary or the radius")
        r = self.radius(radius, source)
        x = self.check(np.asarray(x, dtype=np.float64).reshape(1, -1), source="the ball's centre")[0]
        low, high = rounded_sum(x, -r, math.inf), rounded_sum(x, r, -math.inf)
        return Domain(np.maximum(self.lower, low), np.minimum(self.upper, high))

    def counterpoint(self, predictions: np.ndarray, directions: np.ndarray | None = None) -> np.ndarray:
        """x' of the monotone shortcut per row: each feature at the end of the box that moves the
        prediction's score against the prediction. `directions` [n] (`cardinal.signs`; None: all
        +1): where the prediction is 1, `lower` for a non-decreasing feature (+1, and 0 or mixed,
        which take the same end) and `upper` for a non-increasing one (−1); where it is 0 the
        opposite ends.

        predictions [B] of 0/1 → [B, n].
        """
        decreasing = np.zeros(self.n, dtype=bool) if directions is None else np.asarray(directions) == -1
        at_low = np.asarray(predictions, dtype=bool)[:, None] != decreasing[None, :]
        return np.where(at_low, self.lower[None, :], self.upper[None, :])


# Knuth's TwoSum is exact below this magnitude (no intermediate overflows); larger entries go to Fractions.
_TWO_SUM_LIMIT = 2.0**1000


def rounded_sum(x: np.ndarray, r: np.ndarray, side: float) -> np.ndarray:
    """The double nearest the exact x + r [n] on the side of `side` (+inf: the smallest double ≥ it;
    −inf: the largest ≤ it), or ±inf where fl(x + r) overflows (a box's bound then decides). fl(x + r)
    is the nearest double to x + r, so one step towards `side` is enough when it lies on the wrong
    side; which side it lies on is the sign of its rounding error e = (x + r) − fl(x + r), exact by
    Knuth's TwoSum (vectorised), or by Fractions for entries of magnitude ≥ 2^1000."""
    with np.errstate(over="ignore", invalid="ignore"):
        total = x + r
        back = total - r
        error = (x - back) + (r - (total - back))
    wrong = error > 0 if side > 0 else error < 0
    large = (np.abs(x) >= _TWO_SUM_LIMIT) | (np.abs(r) >= _TWO_SUM_LIMIT) | ~np.isfinite(total)
    for i in np.flatnonzero(large):
        excess = Fraction(float(total[i])) - Fraction(float(x[i])) - Fraction(float(r[i])) if math.isfinite(total[i]) else 0
        wrong[i] = excess < 0 if side > 0 else excess > 0  # excess: fl(x + r) − (x + r)
    return np.where(wrong, np.nextafter(total, side), total)


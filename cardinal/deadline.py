"""A call's time budget: `Deadline`, a moment on the monotonic clock, computed once when an
input's work starts and passed down through every stage that works on that input (the explainer
and its exact questions, the solvers, the certificate). Each stage takes `limit(cap)`: its own
cap, or the time left when that is less; a stage that finds no time left (`passed`) answers with
what it holds, and says so, instead of starting."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

SPENT = "the call's time limit"  # what a stage that had no time left names as its reason


@dataclass(frozen=True)
class Deadline:
    """`at`: the moment (`time.monotonic()` seconds) the budget ends; `budget`: its seconds in all
    (math.inf: no budget, `Deadline.never()`)."""

    at: float
    budget: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        """The budget of `seconds` from now."""
        return cls(time.monotonic() + seconds, seconds)

    @classmethod
    def never(cls) -> Deadline:
        """No budget: every stage keeps its own cap."""
        return cls(math.inf, math.inf)

    def left(self) -> float:
        """Seconds left (≥ 0; math.inf without a budget)."""
        return max(0.0, self.at - time.monotonic())

    def passed(self) -> bool:
        """Whether no time is left."""
        return self.left() <= 0.0

    def limit(self, cap: float) -> float:
        """A stage's limit: its own `cap`, or the time left when that is less (0: none left)."""
        return min(cap, self.left())

    def perf_counter(self) -> float:
        """The same moment as a `time.perf_counter()` value (what `solvers.guard` waits until)."""
        return time.perf_counter() + self.left()

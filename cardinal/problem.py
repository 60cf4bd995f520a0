"""The explanation problem and what answers to it: `Kind`, `Status` (with `Termination` and
`Evidence`, the two questions a status answers at once), `Verdict`, `Outcome` (with `Proved`,
what an answer proves exactly),
`Problem` (with the monotone shortcut computed once), defined here for every layer above.

`Problem` holds one input x [n] of a network, the kind, the box and the threshold (K = 1; None for
a network of K ≥ 2 outputs, predicted by argmax); its `prediction` is p(x) decided exactly by the
rule of `cardinal.prediction`. On a monotone network the shortcut of docs/design.md §1 is a
property of the problem: `counterpoint` x', and the line from `base` to `target` along which a
set S is moved (`base` with S set to `target` reaches `goal` iff S is an explanation).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field, replace
from enum import StrEnum
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from .defaults import DEFAULT_EPSILON as DEFAULT_EPSILON
from .defaults import DEFAULT_TIME_LIMIT as DEFAULT_TIME_LIMIT
from .defaults import DEFAULT_TRAVERSAL as DEFAULT_TRAVERSAL
from .domain import Domain
from .errors import CardinalError, InputError, UndecidedPrediction
from .exact import ExactNetwork, modified_inputs
from .network import Network
from .prediction import threshold_for
from .signs import MIXED

if TYPE_CHECKING:
    from .bounds import BoundedForward  # imported on use: it loads torch


class Kind(StrEnum):
    """The two kinds of explanation (docs/design.md §1)."""

    CONTRASTIVE = "contrastive"
    ABDUCTIVE = "abductive"


KINDS: tuple[str, ...] = tuple(kind.value for kind in Kind)


class Method(StrEnum):
    """The explainers whose answers certify judges: the paper's greedy Algorithm 1 (monotone
    networks, `cardinal.greedy`) and sequential deletion (any network, subset-minimal,
    `solvers.deletion`)."""

    GREEDY = "greedy"
    DELETION = "deletion"




def shortcut(kind: str, x: Any, counterpoint: Any, prediction: Any) -> tuple[Any, Any, Any]:
    """The monotone shortcut (docs/design.md §1) for one input or a batch, numpy or torch, broadcasting:
    (base, target, goal). S is an explanation iff `base` with S set to `target` predicts `goal`:
    CXp base x, target x', goal 1 − p(x); AXp base x', target x, goal p(x). `prediction` may be
    an int, an int array or a bool tensor; the goal has its type."""
    if kind == Kind.CONTRASTIVE:
        return x, counterpoint, prediction ^ True
    return counterpoint, x, prediction


class Verdict(StrEnum):
    """What a certificate says about the explainer's answer — greedy's, or the deletion
    explainer's (`solvers.deletion`) — or about the minimum, with no explainer."""

    GREEDY_MINIMAL = "greedy_minimal"  # nothing smaller exists
    GREEDY_SUBOPTIMAL = "greedy_suboptimal"  # a smaller explanation holds in exact arithmetic
    DELETION_MINIMAL = "deletion_minimal"  # the same for the deletion explainer's (subset-minimal) answer
    DELETION_SUBOPTIMAL = "deletion_suboptimal"
    NONE_EXISTS = "none_exists"  # no contrastive explanation at all
    SOLVER_DISAGREEMENT = "solver_disagreement"  # exact evidence conflicts
    UNKNOWN = "unknown"  # no evidence decided it
    EXACT_ONLY = "exact_only"  # no explainer ran (greedy on a non-monotone network); the solvers give the minimum
    UNDECIDED = "undecided"  # exact arithmetic cannot decide p(x), or the explainer's answer (smooth enclosures, a limit)


class Status(StrEnum):
    """How a backend's call ended (the table in docs/statuses.md)."""

    OPTIMAL = "optimal"  # `features` is a minimum explanation
    FEASIBLE = "feasible"  # `features` is an explanation of size ≤ at_most (any size without a bound); minimality not proved
    NONE_WITHIN = "none_within"  # no explanation of size ≤ at_most
    NONE_EXISTS = "none_exists"  # no explanation of this kind at all
    TIMEOUT = "timeout"  # a time limit stopped it before any set within the bound: no set
    SIZE_LIMIT = "size_limit"  # a licence or memory cap
    UNSUPPORTED = "unsupported"  # e.g. a smooth activation in MILP or SMT
    REFUTED = "refuted"  # exact evidence refutes the claim (`Outcome.claimed`): no explanation, or "nothing smaller" contradicted
    UNCONFIRMED = "unconfirmed"  # the claimed set's witness does not flip and no exact check decided the set: no verdict
    ERROR = "error"


class Termination(StrEnum):
    """How a backend's call ended, apart from what its answer is worth (`Evidence`): MathOpt's
    split of termination reason and proof."""

    OPTIMAL = "optimal"  # it answered with a set it claims minimum
    INFEASIBLE = "infeasible"  # it claims that no set within the bound (or none at all) exists
    LIMIT = "limit"  # a time, licence or memory limit stopped it (perhaps with a set: FEASIBLE)
    UNSUPPORTED = "unsupported"  # the backend cannot encode the network
    ERROR = "error"


class Evidence(StrEnum):
    """What a call's answer is worth: only EXACT decides anything (`Outcome.proved`)."""

    EXACT = "exact"  # checked in exact arithmetic: an exact backend's proof, or a set replayed exactly
    FLOAT_CLAIM = "float_claim"  # a float solver's claim that exact arithmetic did not re-check: no proof
    REFUTED = "refuted"  # exact evidence contradicts the claim
    NONE = "none"  # no claim (a limit, an error, an unconfirmed set)


_TERMINATION = {
    Status.OPTIMAL: Termination.OPTIMAL,
    Status.FEASIBLE: Termination.LIMIT,
    Status.NONE_WITHIN: Termination.INFEASIBLE,
    Status.NONE_EXISTS: Termination.INFEASIBLE,
    Status.TIMEOUT: Termination.LIMIT,
    Status.SIZE_LIMIT: Termination.LIMIT,
    Status.UNSUPPORTED: Termination.UNSUPPORTED,
    Status.ERROR: Termination.ERROR,
}


def stopped(solution: tuple[int, ...] | None, at_most: int | None) -> tuple[Status, tuple[int, ...] | None]:
    """What a call stopped by a limit reports, the same for every backend: FEASIBLE with the best
    set it found when that set lies within `at_most` (any found set when there is no bound), else
    TIMEOUT and no set."""
    if solution is not None and (at_most is None or len(solution) <= at_most):
        return Status.FEASIBLE, solution
    return Status.TIMEOUT, None


@dataclass(frozen=True)
class Proved:
    """What exact evidence proves about the minimum explanation's size (`Outcome.proves`, the one
    place that reads it off a status). `lower`: no explanation has fewer features (None: no bound
    proved); `none_exists`: no explanation of this kind at all."""

    lower: int | None = None
    none_exists: bool = False

    @property
    def decided(self) -> bool:
        """Whether anything is proved."""
        return self.none_exists or self.lower is not None

    def within(self, n: int) -> int | None:
        """k of the exact claim "no explanation within k features" (n: none at all), or None
        where nothing is proved beyond the definition (a bound of 0: the empty set is not smaller)."""
        if self.none_exists:
            return n
        return None if self.lower is None or self.lower < 1 else self.lower - 1


def _larger(bound: int, other: int | None) -> int:
    return bound if other is None else max(bound, other)


class MissingSolutionError(CardinalError, LookupError):
    """Asked for the explanation of an outcome that has none."""


@dataclass(frozen=True)
class Outcome:
    """The answer of one backend call.

    `solution`: the explanation found (sorted feature indices). `witness` [n]: for a contrastive
    answer, a point y of the box that agrees with x outside the set and flips the prediction; for
    a claim refuted by a point (an AXp that is none, a false none-exists), that point.
    `exact`: the verdict was reached in exact arithmetic (exact-milp, z3, enumerate) rather than by a float
    MILP. `replayed`: the returned set (or the none-exists claim) was confirmed in exact
    arithmetic. A REFUTED or UNCONFIRMED outcome keeps the status it claimed in `claimed` (and
    the set it claimed in `solution`: the record of a claim, not an answer), the reason in
    `message`. `lower`: an exact lower bound on the minimum explanation's size — no explanation of
    this kind has fewer features — that an exact backend proved during this call, whatever its
    status (a call stopped at its limit included); None where none was proved. A float backend's
    outcome never carries one (`solvers.base.BaseSolver.outcome`), and `proves` reads it only from
    an exact, unrefuted outcome. Where the message states "exact lower bound N", `lower` is N.
    """

    status: Status
    solver: str
    seconds: float
    solution: tuple[int, ...] | None = None
    witness: tuple[float, ...] | None = None
    raw_status: str = ""
    exact: bool = False
    replayed: bool = False
    message: str = ""
    claimed: Status | None = None
    lower: int | None = None  # an exact lower bound proved during the call (class docstring)
    # the points behind an implicit hitting-set loop's contrastive sets (where it proved a minimum AXp
    # or none within k): each the (feature, value) pairs where a point of the box that flips p(x)
    # differs from x — a certificate's lemmas (`solvers.proof_hitting`); not in `to_json`
    lemmas: tuple[tuple[tuple[int, float], ...], ...] = field(default=(), repr=False)
    # the proof an engine found of "no CXp of at most j features", per level j: each j-subset
    # (increasing features) and the tree of method subset-split that proved it (None where another
    # argument did) — written into a certificate without a search (`solvers.proof.from_outcome`);
    # the exact MILP's levels by splitting (`solvers.levels`); not in `to_json`
    subset_trees: dict[int, list[tuple[tuple[int, ...], Any]]] = field(default_factory=dict, repr=False)

    @property
    def has_solution(self) -> bool:
        return self.solution is not None

    def refuted(self, reason: str) -> Outcome:
        """This outcome with its claim refuted by exact evidence: status REFUTED, the claimed
        status kept in `claimed`, the reason appended to the message."""
        return self._demoted(Status.REFUTED, reason)

    def unconfirmed(self, reason: str) -> Outcome:
        """This outcome with its set neither confirmed nor refuted (its witness failed, and no
        exact check decided the set): status UNCONFIRMED, the claim kept as by `refuted`."""
        return self._demoted(Status.UNCONFIRMED, reason)

    def noted(self, note: str) -> Outcome:
        """This outcome with `note` appended to its message."""
        return replace(self, message=f"{self.message}; {note}" if self.message else note)

    def _demoted(self, status: Status, reason: str) -> Outcome:
        return replace(self.noted(reason), status=status, claimed=self.status)

    @property
    def termination(self) -> Termination:
        """How the call ended (`Termination`); for a refuted or unconfirmed claim, how the claim ended."""
        return _TERMINATION[self.claimed if self.claimed is not None else self.status]

    def proves(self, n: int, at_most: int | None) -> Proved:
        """What this outcome proves exactly about the minimum of a problem of `n` features asked
        with the bound `at_most` (None: the minimum): NONE_EXISTS from an exact backend or
        replayed exactly → none exists; an exact backend's NONE_WITHIN → nothing below
        `at_most` + 1 (n + 1 without a bound); its OPTIMAL with the set replayed → nothing below
        the set's size; besides, an exact backend's `lower` (any status but REFUTED: a call
        stopped at its limit, FEASIBLE, OPTIMAL without the replay, ...) → nothing below it, the
        larger of the two bounds where both hold. Nothing else — a float solver's claim, a limit
        without `lower`, a refuted claim — proves anything. The one place that says what a status
        proves: `proved`, certify's `judge`, `solvers.base.exact_claim` and
        `verify.proofs.claim_of` read it."""
        if self.status == Status.NONE_EXISTS and (self.exact or self.replayed):
            return Proved(none_exists=True)
        if not self.exact or self.status == Status.REFUTED:
            return Proved()
        if self.status == Status.NONE_WITHIN:
            return Proved(lower=_larger((n if at_most is None else at_most) + 1, self.lower))
        if self.status == Status.OPTIMAL and self.replayed and self.solution is not None:
            return Proved(lower=_larger(len(self.solution), self.lower))
        return Proved(lower=self.lower)

    @property
    def proved(self) -> bool:
        """Whether this outcome is an exact proof of what it claims (`proves` decides something,
        from an exact backend): an exact backend's none_within or none_exists, or its optimal
        with the set replayed in exact arithmetic (not a bound in `lower` alone: a call stopped
        at its limit claims nothing). A float MILP's claim never is, whatever it says."""
        return self.exact and replace(self, lower=None).proves(0, None).decided  # whether it decides, not the bound

    @property
    def evidence(self) -> Evidence:
        """What the answer is worth (`Evidence`): EXACT where it is `proved` or its set was replayed
        exactly, FLOAT_CLAIM where a float solver claimed something exact arithmetic did not check."""
        if self.status == Status.REFUTED:
            return Evidence.REFUTED
        if self.proved or (self.status in (Status.OPTIMAL, Status.FEASIBLE, Status.NONE_EXISTS) and self.replayed):
            return Evidence.EXACT
        if self.status in (Status.OPTIMAL, Status.FEASIBLE, Status.NONE_WITHIN, Status.NONE_EXISTS):
            return Evidence.FLOAT_CLAIM
        return Evidence.NONE

    @property
    def features(self) -> tuple[int, ...]:
        if self.solution is None:
            raise MissingSolutionError(f"{self.solver}: status {self.status.value} carries no explanation")
        return self.solution

    @property
    def size(self) -> int:
        return len(self.features)

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "status": self.status.value,
            "features": None if self.solution is None else list(self.solution),
            "size": None if self.solution is None else len(self.solution),
            "seconds": round(self.seconds, 6),
            "exact": self.exact,
            "replayed": self.replayed,
        }
        if self.claimed is not None:
            document["claimed"] = self.claimed.value
        if self.witness is not None:
            document["witness"] = list(self.witness)
        if self.raw_status:
            document["raw_status"] = self.raw_status
        if self.message:
            document["message"] = self.message
        if self.lower is not None:
            document["lower"] = self.lower
        return document


@dataclass(frozen=True, eq=False)
class Problem:
    """One explanation problem: network, input x [n], kind, domain, threshold (None when the
    network has K ≥ 2 outputs), and ε (the margin a float MILP demands on a strict comparison:
    f ≥ t + ε to reach class 1, f_j ≥ f_c + ε for an output j > c to take class c). `prediction`
    is p(x), decided exactly: 0/1 for K = 1, the class index for K ≥ 2.

    `make` raises `InputError` for bad input, and `UndecidedPrediction` (not an `InputError`:
    the input is valid) when exact arithmetic cannot decide p(x) on a smooth network."""

    net: Network
    x: np.ndarray
    kind: str
    domain: Domain
    threshold: float | None
    epsilon: float = DEFAULT_EPSILON
    prediction: int = field(default=-1)

    @classmethod
    def make(
        cls,
        net: Network,
        x: np.ndarray,
        kind: str = "contrastive",
        domain: Domain | None = None,
        threshold: float | None = None,
        epsilon: float = DEFAULT_EPSILON,
    ) -> Problem:
        """`threshold`: t for a single-output network (None: 0); a network of K ≥ 2 outputs takes
        none (`InputError` if one is given)."""
        if kind not in KINDS:
            raise InputError(f"unknown kind {kind!r} (use contrastive or abductive)")
        if not epsilon > 0:
            raise InputError(f"epsilon must be positive, got {epsilon}")
        domain = domain if domain is not None else Domain.unit(net.n_inputs)
        if domain.n != net.n_inputs:
            raise InputError(f"domain has {domain.n} features, the network has {net.n_inputs} inputs")
        checked = domain.check(np.asarray(x, dtype=np.float64).reshape(1, -1))[0]
        problem = cls(net, checked, kind, domain, threshold_for(net.n_outputs, threshold), float(epsilon))
        prediction = int(problem.predictions(checked[None, :])[0])
        if prediction < 0:
            what = "of f(x) contains the threshold" if net.n_outputs == 1 else "of the outputs leave the largest one open"
            raise UndecidedPrediction(f"the prediction of x is undecided: the exact enclosures {what} (smooth network)")
        object.__setattr__(problem, "prediction", prediction)
        return problem

    @property
    def exact(self) -> ExactNetwork:
        """The network in exact arithmetic (`cardinal.exact`), shared by every problem on it."""
        return _evaluators(self.net)[0]

    @property
    def decider(self) -> BoundedForward:
        """Exact decisions at float speed on the CPU (`cardinal.bounds`), shared by every problem on the network."""
        return _evaluators(self.net)[1]

    def predictions(self, Y: np.ndarray) -> np.ndarray:
        """Y [B, n] float64 → [B] `PREDICTION_DTYPE`: p(y) decided exactly (a float64 pass with a
        rigorous error bound, `cardinal.exact` for the rows it leaves open), or −1 where a smooth
        enclosure leaves it open."""
        return self.decider.predictions(np.asarray(Y, dtype=np.float64), self.threshold)

    @property
    def n(self) -> int:
        return self.net.n_inputs

    @property
    def classes(self) -> int:
        """K, the number of outputs (1: the threshold rule)."""
        return self.net.n_outputs

    @property
    def monotone(self) -> bool:
        """The monotone shortcut holds: one output and a sign-monotone network
        (`Network.is_sign_monotone`), so validity is upward closed along the line from `base` to
        `target`. Weaker than `Network.is_monotone` (all weights ≥ 0), which the node bounds of
        some engines need besides. A K = 2 network is sign-monotone through its logit difference
        but its problems take the general path here (greedy uses `Network.logit_difference`)."""
        return self.net.has_monotone_shortcut

    @property
    def counterpoint(self) -> np.ndarray:
        """x' of the monotone shortcut [n]: each feature at the end of the box that moves f against
        p(x) (`Domain.counterpoint` with `Network.directions`): for p(x) = 1 the lower end of a
        non-decreasing feature, the upper end of a non-increasing one; for p(x) = 0 the opposite."""
        return self.domain.counterpoint(np.array([self.prediction]), self.net.directions)[0]

    @property
    def known(self) -> np.ndarray:
        """[n] bool: the features whose direction is known (`+`, `-` or `0`; none for K ≥ 3). Some
        y agreeing with x off a set S flips the prediction iff one does whose known features in S
        sit at their `counterpoint` end (moving them there only pushes the score further against
        p(x)), so the exact engines' general path searches y_i ∈ {x_i, x'_i} for them and the box
        for the mixed ones only."""
        directions = self.net.directions
        return np.zeros(self.n, dtype=bool) if directions is None else directions != MIXED

    @property
    def goal(self) -> int:
        """The prediction the moved point must reach: 1 − p(x) for a CXp, p(x) for an AXp."""
        return int(shortcut(self.kind, self.x, self.counterpoint, self.prediction)[2])

    @property
    def base(self) -> np.ndarray:
        """Where the monotone shortcut starts [n]: x for a CXp, x' for an AXp."""
        return shortcut(self.kind, self.x, self.counterpoint, self.prediction)[0]

    @property
    def target(self) -> np.ndarray:
        """Where a moved feature goes [n]: x' for a CXp, x for an AXp."""
        return shortcut(self.kind, self.x, self.counterpoint, self.prediction)[1]

    @property
    def exact_threshold(self) -> Fraction:
        """t as an exact rational (K = 1)."""
        return Fraction(self.threshold)

    def flips(self, y: np.ndarray) -> bool | None:
        """Exactly: does p(y) differ from p(x)? None if a smooth enclosure leaves it undecided."""
        predicted = int(self.predictions(np.asarray(y, dtype=np.float64)[None, :])[0])
        return None if predicted < 0 else predicted != self.prediction

    def is_explanation(self, features: tuple[int, ...] | list[int]) -> bool | None:
        """Exactly, on a *monotone* network, by the shortcut: is `features` an explanation of this
        kind (`base` with them set to `target` predicts `goal`)? None when a smooth enclosure
        leaves it undecided. The check of `cardinal.exact.check_monotone_explanation` (all in exact
        arithmetic, the reference that case files and tests use), at float speed."""
        flipped = self.flips(modified_inputs(self.base, features, self.target))
        if flipped is None:
            return None
        return flipped if self.kind == Kind.CONTRASTIVE else not flipped


# network → its exact and bounded-float evaluators, built once per network object (about 2 ms on
# a 28 × 32 × 32 network; a certification call of the z3 backend takes 5–10 ms there).
_EVALUATORS: weakref.WeakKeyDictionary[Network, tuple[ExactNetwork, BoundedForward]] = weakref.WeakKeyDictionary()


def _evaluators(net: Network) -> tuple[ExactNetwork, BoundedForward]:
    if net not in _EVALUATORS:
        from .bounds import BoundedForward

        exact = ExactNetwork(net)
        _EVALUATORS[net] = (exact, BoundedForward(net, "cpu", exact))
    return _EVALUATORS[net]

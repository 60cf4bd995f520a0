"""Edge-case problems at the seams, and the judge that holds cardinal's answers to the Fraction oracle.

`cases(rng, family)` builds small problems of one family (exact thresholds, non-dyadic weights,
1e±300 magnitudes, 2^53 cancellation, leaky slopes 0 and 1, hardtanh min = max, steps at reachable
points, width-1 chains, −0.0, custom and binary boxes, non-monotone networks, sigmoid and tanh
units read by steps at sigmoid(0) = 1/2 and tanh(0) = 0). `Probe.run` puts one problem through
`explain` (floats and exact), `certify`, `solve_minimum` on every installed backend and `check`,
and lists every claim the oracle (`tests.fraction_oracle`) contradicts: a false certified
verdict, a replayed set that is no explanation, a wrong `minimum_proved`, a `refuted` valid set
whose claim stands, a false `none_exists`, a `repaired` or `exact` greedy answer that is not
Algorithm 1's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from cardinal.solvers.base import available_solvers, solve_minimum
from cardinal.verify.check import Claim, Judgement, check_explanations
from cardinal.verify.pipeline import Plan, certify, given

from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.errors import UndecidedPrediction
from cardinal.greedy import explain
from cardinal.network import Layer, Network
from cardinal.problem import Outcome, Status
from tests.fraction_oracle import Oracle

BACKENDS = tuple(name for name in ("gurobi", "highs", "z3", "enumerate") if name in available_solvers())
EXACT_BACKENDS = ("z3", "enumerate")
IDENTITY = Activation.make("identity")
_LARGEST = Fraction(np.finfo(np.float64).max)
FAMILIES = (
    "threshold",
    "non_dyadic",
    "huge",
    "cancellation",
    "leaky",
    "hardtanh_flat",
    "step",
    "chain",
    "negative_zero",
    "box",
    "binary",
    "non_monotone",
    "smooth_step",
)


@dataclass
class Case:
    family: str
    net: Network
    x: np.ndarray
    threshold: float
    domain: Domain

    def oracle(self) -> Oracle:
        return Oracle(self.net, self.x, self.threshold, self.domain.lower, self.domain.upper, self.domain.binary)


def _net(*layers: tuple[np.ndarray, np.ndarray, Activation]) -> Network:
    return Network([Layer(np.asarray(w, dtype=float), np.asarray(b, dtype=float), a) for w, b, a in layers])


def _dyadic(rng: np.random.Generator, shape: tuple[int, ...], grain: int = 2, signed: bool = False) -> np.ndarray:
    values = rng.integers(-4 if signed else 0, 5, size=shape) / 2**grain
    return values.astype(float)


def _pwl(rng: np.random.Generator, n: int, widths: tuple[int, ...], activation: Activation, signed: bool = False) -> Network:
    layers, fan_in = [], n
    for width in widths:
        layers.append((_dyadic(rng, (width, fan_in), signed=signed), _dyadic(rng, (width,), signed=True), activation))
        fan_in = width
    layers.append((_dyadic(rng, (1, fan_in), signed=signed) + (0 if signed else 0.25), np.zeros(1), IDENTITY))
    return _net(*layers)


def _at_value(case_net: Network, y: np.ndarray) -> float:
    """f(y) exactly, as a double when it is one (else the nearest: a threshold next to f(y))."""
    oracle = Oracle(case_net, y, 0.0, np.zeros(len(y)), np.ones(len(y)))
    low, _ = oracle.net.value(oracle.x)
    return float(min(max(low, -_LARGEST), _LARGEST))


def _threshold_at_a_seam(rng: np.random.Generator, net: Network, x: np.ndarray, domain: Domain) -> float:
    """f at x, at the counterpoints, or at a single-feature move: ties on the threshold itself."""
    points = [x, domain.lower.copy(), domain.upper.copy()]
    for j in range(len(x)):
        for bound in (domain.lower, domain.upper):
            y = x.copy()
            y[j] = bound[j]
            points.append(y)
    return _at_value(net, points[int(rng.integers(len(points)))])


def _grid_input(rng: np.random.Generator, domain: Domain) -> np.ndarray:
    fractions = rng.integers(0, 5, size=domain.n) / 4
    x = domain.lower + (domain.upper - domain.lower) * fractions
    return np.clip(x, domain.lower, domain.upper)


def cases(rng: np.random.Generator, family: str) -> Iterator[Case]:
    """A few problems of one family (see the module docstring)."""
    n = int(rng.integers(2, 5))
    unit = Domain.unit(n)
    if family == "threshold":
        net = _pwl(rng, n, (int(rng.integers(1, 4)),), Activation.make("relu"))
        x = _grid_input(rng, unit)
        yield Case(family, net, x, _threshold_at_a_seam(rng, net, x, unit), unit)
    elif family == "non_dyadic":
        weights = rng.choice([0.1, 0.2, 0.3, 1 / 3, 2 / 3, 0.7], size=(2, n))
        net = _net(
            (weights, -rng.choice([0.1, 0.3, 1 / 3], size=2), Activation.make("relu")),
            (np.array([[1 / 3, 0.1]]), [0.0], IDENTITY),
        )
        x = _grid_input(rng, unit)
        yield Case(family, net, x, _threshold_at_a_seam(rng, net, x, unit), unit)
    elif family == "huge":
        scale = float(rng.choice([1e300, 1e-300, 1e150]))
        net = _net(
            (np.abs(rng.normal(size=(2, n))) * scale, [-scale, 0.0], Activation.make("relu")),
            (np.array([[1.0, 1.0]]), [0.0], IDENTITY),
        )
        domain = Domain(np.zeros(n), np.full(n, float(rng.choice([1.0, 1e300, 1e-300]))))
        x = _grid_input(rng, domain)
        yield Case(family, net, x, _threshold_at_a_seam(rng, net, x, domain), domain)
    elif family == "cancellation":
        big = 2.0**53
        net = _net((np.array([[big] + [1.0] * (n - 1)]), [-big], Activation.make("relu")), (np.ones((1, 1)), [0.0], IDENTITY))
        x = _grid_input(rng, unit)
        yield Case(family, net, x, float(rng.choice([0.0, 0.5, 1.0, 2.0**-52])), unit)
        net = _net((np.array([[big, -big] + [1.0] * (n - 2)]), [0.0], IDENTITY))
        yield Case(family, net, x, float(rng.choice([0.0, 1.0, 2.0])), unit)
    elif family == "leaky":
        slope = float(rng.choice([0.0, 1.0]))
        net = _pwl(rng, n, (2, 2), Activation.make("leaky_relu", slope=slope))
        x = _grid_input(rng, unit)
        yield Case(family, net, x, _threshold_at_a_seam(rng, net, x, unit), unit)
    elif family == "hardtanh_flat":
        level = float(rng.choice([0.0, 0.5, -0.25]))
        net = _net(
            (_dyadic(rng, (2, n)), _dyadic(rng, (2,), signed=True), Activation.make("relu")),
            (_dyadic(rng, (2, 2)), [0.0, 0.0], Activation.make("hardtanh", min=level, max=level)),
            (np.array([[1.0, 0.5]]), [0.0], IDENTITY),
        )
        net2 = _net(
            (_dyadic(rng, (2, n)), [-0.5, 0.0], Activation.make("hardtanh", min=0.0, max=1.0)),
            (np.array([[1.0, 1.0]]), [0.0], IDENTITY),
        )
        x = _grid_input(rng, unit)
        yield Case(family, net, x, float(rng.choice([0.0, 1.5 * level, 0.25])), unit)
        yield Case(family, net2, x, _threshold_at_a_seam(rng, net2, x, unit), unit)
    elif family == "step":
        weight = _dyadic(rng, (3, n))
        x = _grid_input(rng, unit)
        reachable = float(weight[int(rng.integers(3))] @ rng.integers(0, 2, size=n))
        net = _net((weight, np.zeros(3), Activation.make("step", at=reachable)), (_dyadic(rng, (1, 3)) + 0.25, [0.0], IDENTITY))
        yield Case(family, net, x, _threshold_at_a_seam(rng, net, x, unit), unit)
    elif family == "chain":
        activation = Activation.make(str(rng.choice(["relu", "hardtanh", "step", "leaky_relu"])))
        layers = [(_dyadic(rng, (1, n)) + 0.25, [-0.5], activation)]
        layers += [
            (np.array([[float(rng.choice([0.5, 1.0, 2.0]))]]), [float(rng.choice([0.0, -0.25]))], activation) for _ in range(2)
        ]
        net = _net(*layers, (np.ones((1, 1)), [0.0], IDENTITY))
        x = _grid_input(rng, unit)
        yield Case(family, net, x, _threshold_at_a_seam(rng, net, x, unit), unit)
    elif family == "negative_zero":
        weight = _dyadic(rng, (2, n))
        weight[weight == 0] = -0.0
        net = _net((weight, [-0.0, -0.25], Activation.make("relu")), (np.array([[1.0, -0.0]]), [-0.0], IDENTITY))
        domain = Domain(np.full(n, -0.0), np.ones(n))
        x = _grid_input(rng, domain)
        x[x == 0] = -0.0
        yield Case(family, net, x, float(rng.choice([-0.0, 0.0])), domain)
    elif family == "box":
        lower = rng.integers(-4, 2, size=n) / 2
        upper = lower + rng.integers(0, 4, size=n) / 2  # some features degenerate (l = u)
        domain = Domain(lower, upper)
        net = _pwl(rng, n, (2,), Activation.make(str(rng.choice(["relu", "hardtanh", "step"]))))
        x = _grid_input(rng, domain)
        yield Case(family, net, x, _threshold_at_a_seam(rng, net, x, domain), domain)
    elif family == "binary":
        domain = Domain(np.zeros(n), np.ones(n), binary=True)
        signed = bool(rng.integers(2))
        net = _pwl(rng, n, (2,), Activation.make(str(rng.choice(["relu", "step", "sigmoid"]))), signed=signed)
        x = rng.integers(0, 2, size=n).astype(float)
        yield Case(family, net, x, _threshold_at_a_seam(rng, net, x, domain), domain)
    elif family == "non_monotone":
        n = min(n, 3)
        unit = Domain.unit(n)
        net = _pwl(
            rng, n, (int(rng.integers(1, 3)),), Activation.make(str(rng.choice(["relu", "hardtanh", "leaky_relu"]))), signed=True
        )
        x = _grid_input(rng, unit)
        yield Case(family, net, x, _threshold_at_a_seam(rng, net, x, unit), unit)
    elif family == "smooth_step":
        yield from _smooth_steps(rng, n)
    else:
        raise ValueError(family)


def issue_example() -> Case:
    """Issue 24: sigmoid units h = W·x − 1/2 read by steps at 1/2; x = 0, t = 3.625."""
    weight = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0.5, 1, 0]], dtype=float)
    net = _net(
        (weight, np.full(4, -0.5), Activation.make("sigmoid")),
        (np.eye(4), np.zeros(4), Activation.make("step", at=0.5)),
        (np.array([[1.5, 1.5, 2.0, 0.5]]), [0.0], IDENTITY),
    )
    return Case("smooth_step", net, np.zeros(3), 3.625, Domain.unit(3))


def _smooth_steps(rng: np.random.Generator, n: int) -> Iterator[Case]:
    """Sigmoid or tanh units whose pre-activation is 0 at grid points, read by steps at their
    value there (1/2, 0), sometimes with a smooth output layer; thresholds on the seams."""
    name = str(rng.choice(["sigmoid", "tanh"]))
    at = 0.5 if name == "sigmoid" else 0.0
    width = int(rng.integers(2, 5))
    weight = _dyadic(rng, (width, n), grain=1)
    bias = -rng.integers(0, 3, size=width) / 2
    out = rng.choice([0.5, 1.0, 1.5, 2.0], size=(1, width))
    last = Activation.make(str(rng.choice(["identity", "identity", "tanh"])))
    net = _net(
        (weight, bias, Activation.make(name)),
        (np.eye(width), np.zeros(width), Activation.make("step", at=at)),
        (out, [0.0], last),
    )
    domain = Domain.unit(n)
    x = rng.integers(0, 2, size=n).astype(float)
    if last.name == "identity":
        threshold = _threshold_at_a_seam(rng, net, x, domain)
        threshold = float(rng.choice([threshold, threshold + 0.125, threshold - 0.125]))
    else:
        threshold = float(rng.choice([0.0, 0.5, 0.9]))
    yield Case("smooth_step", net, x, threshold, domain)
    if name == "tanh" and last.name == "identity":  # tanh(0) = 0 exactly as the output
        yield Case(
            "smooth_step",
            _net((weight[:1], bias[:1], Activation.make("tanh")), (np.ones((1, 1)), [1.0], IDENTITY)),
            x,
            1.0,
            domain,
        )


# ---------------------------------------------------------------------------- the judge
@dataclass
class Probe:
    """Runs problems through cardinal and collects what the oracle contradicts."""

    backends: tuple[str, ...] = BACKENDS
    time_limit: float = 20.0
    requires: tuple[str, ...] = ("valid", "subset", "minimum")  # what `check` is asked
    findings: list[str] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)

    def flag(self, case: Case, kind: str, what: str) -> None:
        self.findings.append(
            f"{case.family} {kind}: {what} | net={case.net.to_json()['layers']} x={case.x.tolist()} t={case.threshold!r} "
            f"box={case.domain.lower.tolist()}..{case.domain.upper.tolist()} binary={case.domain.binary}"
        )

    def run(self, case: Case, kinds: tuple[str, ...] = ("contrastive", "abductive")) -> None:
        oracle = case.oracle()
        self.counts["problems"] += 1
        for kind in kinds:
            self.counts["kinds"] += 1
            self._explain(case, oracle, kind)
            self._certify(case, oracle, kind)
            self._solve_minimum(case, oracle, kind)
            self._check(case, oracle, kind)

    # -- explain ----------------------------------------------------------
    def _explain(self, case: Case, oracle: Oracle, kind: str) -> None:
        if not case.net.is_monotone:
            return
        result = explain(case.net, case.x[None, :], kind, case.domain, case.threshold, device="cpu", verify=True)
        floats = explain(case.net, case.x[None, :], kind, case.domain, case.threshold, device="cpu", verify=False)
        check, answer = result.checks[0], (result.features(0) if result.exists[0] else None)
        if oracle.p is None:
            self.counts["undecided p(x)"] += 1
            if check != "undecided":
                self.flag(case, kind, f"explain: p(x) undecided for the oracle, check {check}")
            return
        answers = oracle.algorithm1(kind)
        self.counts[f"explain {check}"] += 1
        if check in ("exact", "repaired") and answer not in answers:
            self.flag(case, kind, f"explain: check {check} answer {answer}, Algorithm 1 gives {answers}")
        if check == "repaired" and len(answers) == 1 and (floats.features(0) if floats.exists[0] else None) in answers:
            self.flag(case, kind, "explain: repaired although the float answer is Algorithm 1's")
        if check == "exact" and (floats.features(0) if floats.exists[0] else None) != answer:
            self.flag(case, kind, "explain: check exact but the float answer differs")
        if check == "undecided" and len(answers) == 1:
            self.counts["explain undecided where the oracle decides"] += 1

    # -- certify ----------------------------------------------------------
    def _certify(self, case: Case, oracle: Oracle, kind: str) -> None:
        (certificate,) = certify(
            case.net, case.x[None, :], kind, case.domain, case.threshold, solvers=self.backends,
            plan=Plan(method="greedy", time_limit=self.time_limit)
        )
        self.counts[f"certify {certificate.verdict.value}"] += 1
        if oracle.p is None:
            if certificate.certified:
                self.flag(case, kind, "certify: certified although p(x) is open to the oracle")
            return
        if certificate.prediction != oracle.p:
            self.flag(case, kind, f"certify: prediction {certificate.prediction}, oracle {oracle.p}")
            return
        table = oracle.table(kind)
        maybe, sure = oracle.sizes(kind)
        verdict = certificate.verdict.value
        greedy = certificate.greedy
        if verdict == "solver_disagreement":
            self.flag(case, kind, f"certify: solver_disagreement {certificate.notes}")
        if greedy is not None and greedy.check != "undecided" and case.net.is_monotone:
            answers = oracle.algorithm1(kind)
            if greedy.features not in answers:
                self.flag(case, kind, f"certify: greedy {greedy.features} ({greedy.check}), Algorithm 1 gives {answers}")
        if certificate.minimum is not None:
            if table[certificate.minimum] is False:
                self.flag(case, kind, f"certify: minimum {certificate.minimum} is no explanation")
            if certificate.minimum_proved and sure is not None and sure < len(certificate.minimum):
                self.flag(case, kind, f"certify: minimum_proved {certificate.minimum} but size {sure} holds")
        if certificate.certified:
            size = None if greedy is None or greedy.features is None else len(greedy.features)
            if verdict == "greedy_minimal" and sure is not None and size is not None and sure < size:
                self.flag(case, kind, f"certify: certified greedy_minimal at {size}, a set of size {sure} holds")
            if verdict == "greedy_suboptimal" and (maybe is None or (size is not None and maybe >= size)):
                self.flag(case, kind, f"certify: certified greedy_suboptimal, smallest possible size {maybe}")
            if verdict == "none_exists" and sure is not None:
                self.flag(case, kind, "certify: certified none_exists, a CXp holds")
            if verdict == "exact_only" and certificate.minimum is None and sure is not None:
                self.flag(case, kind, "certify: certified exact_only with no minimum, a set holds")
        for name, outcome in certificate.solvers.items():
            self._outcome(case, oracle, kind, f"certify/{name}", outcome, None)

    def _outcome(self, case: Case, oracle: Oracle, kind: str, where: str, outcome: Outcome, at_most: int | None) -> None:
        table = oracle.table(kind)
        maybe, sure = oracle.sizes(kind)
        status = outcome.status
        self.counts[f"outcome {status.value}"] += 1
        if outcome.replayed and outcome.solution is not None and status in (Status.OPTIMAL, Status.FEASIBLE):
            if table[outcome.solution] is False:
                self.flag(case, kind, f"{where}: replayed {status.value} {outcome.solution} is no explanation")
        if (
            status == Status.OPTIMAL
            and outcome.exact
            and sure is not None
            and outcome.solution is not None
            and sure < len(outcome.solution)
        ):
            self.flag(case, kind, f"{where}: exact optimal {outcome.solution}, size {sure} holds")
        if (
            status == Status.OPTIMAL
            and not outcome.exact
            and sure is not None
            and outcome.solution is not None
            and sure < len(outcome.solution)
        ):
            self.counts["float optimal not minimum (unreplayable claim)"] += 1
        if status == Status.NONE_EXISTS and sure is not None:
            self.flag(case, kind, f"{where}: none_exists stands, a set of size {sure} holds ({outcome.message})")
        if status == Status.NONE_WITHIN and outcome.exact and at_most is not None and sure is not None and sure <= at_most:
            self.flag(case, kind, f"{where}: exact none_within {at_most}, a set of size {sure} holds")
        if status == Status.REFUTED and outcome.solution is not None and table[outcome.solution] is True:
            claimed = outcome.claimed.value if outcome.claimed else "?"
            smaller_exists = maybe is not None and maybe < len(outcome.solution)
            if claimed in ("feasible",) or (
                claimed == "optimal" and not smaller_exists and (at_most is None or len(outcome.solution) <= at_most)
            ):
                self.flag(case, kind, f"{where}: refuted a valid set {outcome.solution} (claimed {claimed}): {outcome.message}")
        if (
            status == Status.REFUTED
            and outcome.solution is None
            and outcome.claimed == Status.NONE_EXISTS
            and sure is None
            and maybe is None
        ):
            self.flag(case, kind, f"{where}: refuted a true none_exists: {outcome.message}")

    # -- solve_minimum ----------------------------------------------------
    def _solve_minimum(self, case: Case, oracle: Oracle, kind: str) -> None:
        for name in self.backends:
            try:
                outcome = solve_minimum(
                    case.net, case.x, kind, case.domain, case.threshold, solver=name, time_limit=self.time_limit
                )
            except UndecidedPrediction:
                if oracle.p is not None:
                    self.flag(case, kind, f"solve_minimum/{name}: UndecidedPrediction, oracle p = {oracle.p}")
                continue
            if oracle.p is None:
                continue
            if outcome.status == Status.ERROR:
                self.flag(case, kind, f"solve_minimum/{name}: error {outcome.message}")
            self._outcome(case, oracle, kind, f"solve_minimum/{name}", outcome, None)

    # -- check ------------------------------------------------------------
    def _check(self, case: Case, oracle: Oracle, kind: str) -> None:
        if oracle.p is None:
            return
        table = oracle.table(kind)
        maybe, sure = oracle.sizes(kind)
        sets = sorted({s for s in table if len(s) <= 2} | {tuple(range(case.net.n_inputs))}, key=lambda s: (len(s), s))
        claims = [Claim(0, kind, s) for s in sets[:6]]
        if kind == "contrastive":
            claims.append(Claim(0, kind, None))
        for require in self.requires:
            settings, plan = given(case.net, case.domain, case.threshold), Plan(time_limit=self.time_limit)
            judgements = check_explanations(case.net, case.x[None, :], claims, settings, require, self.backends, plan)
            for judgement in judgements:
                self._judgement(case, oracle, kind, require, judgement, table, maybe, sure)

    def _judgement(
        self,
        case: Case,
        oracle: Oracle,
        kind: str,
        require: str,
        judgement: Judgement,
        table: dict[tuple[int, ...], bool | None],
        maybe: int | None,
        sure: int | None,
    ) -> None:
        features, verdict = judgement.claim.features, judgement.verdict
        self.counts[f"check {verdict}"] += 1
        where = f"check --require {require} {features}"
        if verdict == "solver_disagreement":
            self.flag(case, kind, f"{where}: solver_disagreement {judgement.notes}")
        if features is None:
            if verdict == "invalid" and sure is None and maybe is None:
                self.flag(case, kind, f"{where}: invalid, but no CXp exists")
            if verdict == "none_exists" and sure is not None:
                self.flag(case, kind, f"{where}: none_exists, but a CXp holds")
            return
        valid = table[features]
        if verdict == "invalid" and valid is True:
            self.flag(case, kind, f"{where}: invalid, but the set is an explanation")
        if verdict in ("valid", "subset_minimal", "minimum", "not_subset_minimal", "not_minimum") and valid is False:
            self.flag(case, kind, f"{where}: {verdict}, but the set is no explanation")
        if verdict == "subset_minimal" and any(table[tuple(i for i in features if i != j)] is True for j in features):
            self.flag(case, kind, f"{where}: subset_minimal, but a proper subset holds")
        if verdict == "minimum" and sure is not None and sure < len(features):
            self.flag(case, kind, f"{where}: minimum, but a set of size {sure} holds")
        if verdict in ("not_minimum", "not_subset_minimal") and judgement.smaller is not None:
            if table[tuple(judgement.smaller)] is False or len(judgement.smaller) >= len(features):
                self.flag(case, kind, f"{where}: {verdict} with smaller {judgement.smaller}, which is not")

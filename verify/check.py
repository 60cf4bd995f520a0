"""Judge explanations from any source exactly: valid? subset-minimal? cardinality-minimal?

An explanation file has one JSON line per row and kind: `{"row", "kind", "features"}` (other
keys are ignored, so `cardinal explain` output is one); `"features": null` claims that no
explanation of that kind exists. Each claim gets a `Judgement` whose `verdict` is one of

* `invalid`            — not an explanation (or the none-exists claim is false);
* `not_subset_minimal` — valid, but a proper subset is valid too (`smaller` holds one);
* `not_minimum`        — valid, but a smaller explanation exists (`smaller`, exactly replayed);
* `undecided`          — what was asked could not be decided exactly (a smooth margin, solver
  limits, or only a float MILP's "nothing smaller");
* `solver_disagreement`— exact evidence conflicts (a bug);
* `valid`, `subset_minimal`, `minimum` — the property asked for (`require`) holds;
* `none_exists`        — the claim that no explanation exists holds.

How each is decided:
* Validity on a monotone network: the monotone shortcut, one exact evaluation at the decisive
  point y, which is returned as `witness`. For an invalid abductive set y agrees with x on the set
  and flips the prediction; for an invalid contrastive set y moves every feature of the set to its
  most favourable bound and still keeps the prediction, so (by monotonicity) no y does.
  On other networks (those of K ≥ 2 outputs among them, where a flip is any other class) a solver
  searches the box with the features that must agree with x pinned to x: a flipping y it finds
  is replayed exactly and returned as `witness`; "none" counts only from an exact backend.
* A smaller contrastive set (`smaller`) comes with the point that shows it (`smaller_witness`).
* Subset-minimality: validity is closed under supersets, so S is subset-minimal iff no S ∖ {j} is
  valid: one exact pass per feature (one batch) on monotone networks.
* Cardinality-minimality: `verify.certify.certify_row`, the same solvers and verdict rules as
  `cardinal certify`, with the given set in the place of greedy's answer (on a non-monotone
  network, the exact minimum compared with the set's size).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from cardinal.domain import Domain
from cardinal.errors import InputError
from cardinal.exact import ExactNetwork, modified_inputs
from cardinal.io import MAX_DATA_BYTES, json_lines, parse_json, read_input
from cardinal.network import Network
from cardinal.prediction import threshold_for
from cardinal.problem import Outcome, Problem, Status
from cardinal.validate import describe, json_feature_set, json_number, json_vector

from .certify import GreedyAnswer, SolverPool, certify_row, proving_solvers
from .pipeline import Plan, given
from .settings import Settings

KINDS = ("contrastive", "abductive")
REQUIREMENTS = ("valid", "subset", "minimum")
PASSING = ("valid", "subset_minimal", "minimum", "none_exists")
FAILING = ("invalid", "not_subset_minimal", "not_minimum", "undecided", "solver_disagreement")


@dataclass(frozen=True)
class Claim:
    """One explanation to judge: `features` sorted, or None for "no explanation exists";
    `threshold`, `domain` and `radius`: the settings its line records (`explain` writes them), if
    any; `radius` as one number (a 1-tuple) or one per feature."""

    row: int
    kind: str
    features: tuple[int, ...] | None
    line: int = 0  # where it came from (1-based), for messages
    threshold: float | None = None
    domain: Domain | None = None
    radius: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Judgement:
    """The exact verdict on one claim, with the evidence behind it."""

    claim: Claim
    prediction: int  # p(x), exactly; -1 when undecided
    verdict: str
    valid: bool | None = None
    witness: tuple[float, ...] | None = None  # the point y that decides validity (see the module docstring)
    witness_prediction: int | None = None
    reason: str = ""
    subset_minimal: bool | None = None
    smaller: tuple[int, ...] | None = None  # a smaller valid set, exactly checked, when one is known
    certified: bool = False  # the verdict rests on exact evidence alone
    solvers: dict[str, Outcome] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    smaller_witness: tuple[float, ...] | None = None  # for a smaller contrastive set: the point that shows it
    classes: int = 1  # K, the network's outputs (the prediction is a class index when K ≥ 2)
    proof: dict[str, Any] | None = None  # with a proof folder: the certificate's entry (`verify.proofs`)

    @property
    def passed(self) -> bool:
        return self.verdict in PASSING

    def to_json(self) -> dict[str, Any]:
        features = self.claim.features
        return {
            "row": self.claim.row,
            "kind": self.claim.kind,
            "prediction": self.prediction,
            **({"classes": self.classes} if self.classes > 1 else {}),
            "features": None if features is None else list(features),
            "size": None if features is None else len(features),
            "verdict": self.verdict,
            "passed": self.passed,
            "valid": self.valid,
            "witness": None if self.witness is None else list(self.witness),
            "witness_prediction": self.witness_prediction,
            "reason": self.reason,
            "subset_minimal": self.subset_minimal,
            "smaller": None if self.smaller is None else list(self.smaller),
            "smaller_witness": None if self.smaller_witness is None else list(self.smaller_witness),
            "certified": self.certified,
            "solvers": {name: outcome.to_json() for name, outcome in self.solvers.items()},
            "notes": list(self.notes),
            **({} if self.proof is None else {"proof": self.proof}),
        }

    def describe(self) -> str:
        """One line for people: what failed and the evidence."""
        claim = self.claim
        shown = "no explanation" if claim.features is None else "{" + ", ".join(map(str, claim.features)) + "}"
        text = f"row {claim.row} ({claim.kind}) {shown}: {self.verdict}"
        if self.witness is not None and self.valid is False:
            text += f"; witness y = {list(self.witness)}, p(y) = {self.witness_prediction}: {self.reason}"
        if self.smaller is not None:
            text += f"; smaller explanation {list(self.smaller)}"
        if self.notes:
            text += f" ({'; '.join(self.notes)})"
        return text


# ---------------------------------------------------------------------------- reading
def read_claims(path: str | Path, n_rows: int, n_features: int, kinds: Iterable[str] = KINDS) -> list[Claim]:
    """Claims of the given kinds from a JSON-lines file; `InputError` names the line at fault."""
    path = Path(path)
    claims, seen = [], {}
    data = read_input(path, "explanations file", MAX_DATA_BYTES)
    for number, document in json_lines(data, lambda number: f"{path}: line {number}"):
        claim = parse_claim(document, n_rows, n_features, f"{path}: line {number}", number)
        key = (claim.row, claim.kind)
        if key in seen:
            raise InputError(f"{path}: line {number}: row {claim.row} ({claim.kind}) was already given on line {seen[key]}")
        seen[key] = number
        claims.append(claim)
    selected = [claim for claim in claims if claim.kind in tuple(kinds)]
    if not selected:
        raise InputError(f"{path}: no explanation of kind {' or '.join(kinds)}")
    return selected


def parse_claim(text: str | Any, n_rows: int, n_features: int, where: str, line: int = 0) -> Claim:
    """One claim from a JSON line (or its parsed value)."""
    document = parse_json(text, where, one_line=True) if isinstance(text, str) else text
    if not isinstance(document, dict):
        raise InputError(f'{where}: expected an object {{"row", "kind", "features"}}')
    row, kind = document.get("row"), document.get("kind")
    if isinstance(row, bool) or not isinstance(row, int) or not 0 <= row < n_rows:
        raise InputError(f"{where}: 'row' must be a row number of the inputs (0 to {n_rows - 1}), got {describe(row)}")
    if kind not in KINDS:
        raise InputError(f"{where}: 'kind' must be contrastive or abductive, got {describe(kind)}")
    if "features" not in document:
        raise InputError(f"{where}: 'features' is missing (a list of feature indices, or null for none exists)")
    if "exists" in document and document["exists"] is None:  # explain --method deletion left it undecided
        raise InputError(f"{where}: 'exists' is null: the line holds no explanation (its explainer left it undecided); remove it")
    features = json_feature_set(document["features"], f"{where}: 'features'", n_features)
    threshold = document.get("threshold")
    threshold = None if threshold is None else json_number(threshold, f"{where}: 'threshold'")
    domain = document.get("domain")
    domain = None if domain is None else Domain.from_json(domain, f"{where}: 'domain'", n=n_features)
    radius = document.get("radius")
    if radius is not None:
        field = f"{where}: 'radius'"
        values = json_vector(radius, field) if isinstance(radius, list) else [json_number(radius, field)]
        radius = tuple(float(value) for value in values)
    return Claim(row, kind, features, line, threshold, domain, radius)


# ---------------------------------------------------------------------------- judging
def check_explanations(
    net: Network,
    X: np.ndarray,
    claims: Sequence[Claim],
    settings: Settings | None = None,
    require: str = "valid",
    solvers: Iterable[str] | None = None,
    plan: Plan | None = None,
    progress: Callable[[], None] | None = None,
) -> list[Judgement]:
    """Judge every claim about inputs X [B, n] (rows as in `Claim.row`) with `solvers` where
    needed (None: `certify.proving_solvers`); `progress()` after each. `settings`: the threshold
    and box (`pipeline.given(net, domain, threshold, radius)` for a Python caller's; None: the
    defaults, [0, 1]^n); with its `radius`, each row ranges over its own ball `domain.ball(x,
    radius)`. `plan` (None: `Plan()`): its `time_limit` per solver call, its `epsilon`, and with
    its `proofs` and `require` minimum, each minimum and none-exists verdict gets a certificate
    there (`verify.proofs`): "no explanation of fewer features", "no contrastive explanation"
    (its `method` and `traversal` play no part: the claims are given)."""
    if require not in REQUIREMENTS:
        raise InputError(f"unknown requirement {require!r} (use {', '.join(REQUIREMENTS)})")
    settings = given(net, None, None) if settings is None else settings
    plan = Plan() if plan is None else plan
    domain, radius, proofs = settings.domain, settings.radius, plan.proofs
    X = domain.check(X)
    threshold = threshold_for(net.n_outputs, settings.threshold)
    rows = sorted({claim.row for claim in claims})  # only the rows asked about are evaluated
    predictions = dict(zip(rows, ExactNetwork(net).predictions(X[rows], threshold).tolist(), strict=True)) if rows else {}
    needs_solvers = require == "minimum" or not net.has_monotone_shortcut
    default = solvers is None
    solvers = proving_solvers(net, domain) if solvers is None else solvers
    judgements = []
    with SolverPool(solvers, first_proof=default) if needs_solvers else nullcontext(None) as pool:
        for claim in claims:
            if predictions[claim.row] < 0:
                note = "p(x) is undecided: the enclosures of the outputs leave it open (smooth network)"
                judgements.append(Judgement(claim, -1, "undecided", notes=(note,), classes=net.n_outputs))
            else:
                box = domain if radius is None else domain.ball(X[claim.row], radius)
                problem = Problem.make(net, X[claim.row], claim.kind, box, threshold, plan.epsilon)
                judgement = _Judge(problem, pool, plan.time_limit).judge(claim, require)
                if proofs is not None and require == "minimum" and judgement.verdict in ("minimum", "none_exists"):
                    features = claim.features
                    k = problem.n if features is None else len(features) - 1
                    proved = (k, "") if k >= 0 else (None, "the minimum is the empty set: nothing is smaller")
                    judgement = replace(judgement, proof=proofs.write(problem, proved, f"row{claim.row}-{claim.kind}",
                                                                          judgement.solvers))
                judgements.append(judgement)
            if progress is not None:
                progress()
    return judgements


_MONOTONE_REASONS = {
    ("contrastive", True): "y, x with the set moved to x', flips the prediction",
    ("contrastive", False): "y, x with the set moved to x', keeps the prediction; on a monotone network no y that agrees "
    "with x outside the set flips it",
    ("abductive", True): "y, x' with the set kept at x, keeps the prediction; on a monotone network no y that agrees with "
    "x on the set flips it",
    ("abductive", False): "y agrees with x on the set and flips the prediction",
}


class _Judge:
    """Exact questions about one problem: validity (with its witness), subsets, the minimum."""

    def __init__(self, problem: Problem, pool: SolverPool | None, time_limit: float) -> None:
        self.problem, self.pool, self.time_limit = problem, pool, time_limit

    def judge(self, claim: Claim, require: str) -> Judgement:
        problem = self.problem
        if claim.features is None:
            return self._none_claim(claim)
        valid, witness, reason, notes = self.validity(claim.features)
        common = {"valid": valid, "reason": reason, "notes": tuple(notes), "classes": problem.classes}
        if witness is not None:
            common |= {"witness": tuple(float(v) for v in witness), "witness_prediction": self._predict(witness)}
        if valid is None:
            return Judgement(claim, problem.prediction, "undecided", **common)
        if not valid:
            return Judgement(claim, problem.prediction, "invalid", certified=True, **common)
        if require == "valid":
            return Judgement(claim, problem.prediction, "valid", certified=True, **common)
        smaller, shown, undecided = self.valid_subset(claim.features)
        if smaller is not None:
            return Judgement(
                claim,
                problem.prediction,
                "not_subset_minimal",
                subset_minimal=False,
                smaller=smaller,
                smaller_witness=self._contrastive(shown),
                certified=True,
                **common,
            )
        if undecided:
            return Judgement(
                claim, problem.prediction, "undecided", **common | {"notes": (*notes, "subset-minimality undecided")}
            )
        if require == "subset":
            return Judgement(claim, problem.prediction, "subset_minimal", subset_minimal=True, certified=True, **common)
        verdict, smaller, shown, certified, solvers, more = self.minimum(claim)
        return Judgement(
            claim,
            problem.prediction,
            verdict,
            subset_minimal=True,
            smaller=smaller,
            smaller_witness=self._contrastive(shown),
            certified=certified,
            solvers=solvers,
            **common | {"notes": (*notes, *more)},
        )

    def _contrastive(self, y: np.ndarray | tuple[float, ...] | None) -> tuple[float, ...] | None:
        """y [n] as the witness of a contrastive set (None for an AXp)."""
        if y is None or self.problem.kind != "contrastive":
            return None
        return tuple(float(v) for v in y)

    def _predict(self, y: np.ndarray) -> int:
        return int(self.problem.exact.predictions(np.asarray(y, dtype=np.float64)[None, :], self.problem.threshold)[0])

    def _none_claim(self, claim: Claim) -> Judgement:
        problem = self.problem
        if claim.kind == "abductive":
            reason = "the full feature set is always an abductive explanation"
            return Judgement(
                claim, problem.prediction, "invalid", valid=False, reason=reason, certified=True, classes=problem.classes
            )
        exists, witness, notes = self._flip(frozenset(range(problem.n)))
        if exists is None:
            return Judgement(claim, problem.prediction, "undecided", notes=tuple(notes), classes=problem.classes)
        if exists:
            y = tuple(float(v) for v in witness)
            reason = "y flips the prediction, so a contrastive explanation exists"
            return Judgement(
                claim,
                problem.prediction,
                "invalid",
                valid=False,
                witness=y,
                witness_prediction=self._predict(witness),
                reason=reason,
                certified=True,
                notes=tuple(notes),
                classes=problem.classes,
            )
        return Judgement(
            claim, problem.prediction, "none_exists", valid=True, certified=True, notes=tuple(notes), classes=problem.classes
        )

    # -------------------------------------------------------------- validity
    def validity(self, features: tuple[int, ...]) -> tuple[bool | None, np.ndarray | None, str, list[str]]:
        """(valid or None, the deciding point y, why, notes)."""
        problem = self.problem
        if problem.monotone:  # the shortcut: base with the set moved to target decides
            y = modified_inputs(problem.base, features, problem.target)
            reached = self._predict(y)
            if reached < 0:
                return None, None, "", ["p(y) is undecided (smooth margin)"]
            valid = reached == problem.goal
            return valid, y, _MONOTONE_REASONS[problem.kind, valid], []
        free = frozenset(features) if problem.kind == "contrastive" else frozenset(range(problem.n)) - set(features)
        flips, y, notes = self._flip(free)
        if flips is None:
            return None, None, "", notes
        if problem.kind == "contrastive":
            if flips:
                return True, y, "y agrees with x outside the set and flips the prediction", notes
            return False, None, "no y that agrees with x outside the set flips the prediction (exact search)", notes
        if flips:
            return False, y, "y agrees with x on the set and flips the prediction", notes
        return True, None, "no y that agrees with x on the set flips the prediction (exact search)", notes

    def _flip(self, free: frozenset[int]) -> tuple[bool | None, np.ndarray | None, list[str]]:
        """Is there a y in the box, equal to x outside `free`, with p(y) ≠ p(x)? (answer, y, notes)."""
        problem = self.problem
        if problem.monotone:  # the most favourable point decides
            y = modified_inputs(problem.x, sorted(free), problem.counterpoint)
            flips = problem.flips(y)
            return flips, y if flips else None, [] if flips is not None else ["p(y) is undecided (smooth margin)"]
        assert self.pool is not None
        mask = np.zeros(problem.n, dtype=bool)
        mask[list(free)] = True
        pinned = Domain(
            np.where(mask, problem.domain.lower, problem.x),
            np.where(mask, problem.domain.upper, problem.x),
            problem.domain.binary,
        )
        sub = Problem.make(problem.net, problem.x, "contrastive", pinned, problem.threshold, problem.epsilon)
        outcomes, notes = self.pool.solve(sub, None, self.time_limit)
        found = None
        for name, outcome in outcomes.items():
            if outcome.status in (Status.OPTIMAL, Status.FEASIBLE) and outcome.witness is not None:
                y = np.asarray(outcome.witness, dtype=np.float64)
                if np.array_equal(y[~mask], problem.x[~mask]) and self._inside(y) and problem.flips(y):
                    found = y
                else:
                    notes.append(f"{name}: its witness fails the exact check")
        proved_none = [name for name, o in outcomes.items() if o.status == Status.NONE_EXISTS and o.exact]
        if found is not None and proved_none:
            return None, None, [*notes, f"solver_disagreement: {', '.join(proved_none)} proved no flip, yet one was found"]
        if found is not None:
            return True, found, notes
        if proved_none:
            return False, None, [*notes, f"no flip: proved by {', '.join(proved_none)}"]
        statuses = ", ".join(f"{name}: {outcome.status.value}" for name, outcome in outcomes.items())
        return None, None, [*notes, f"no exact answer ({statuses})"]

    def _inside(self, y: np.ndarray) -> bool:
        try:
            self.problem.domain.check(y[None, :], source="witness")
        except InputError:
            return False
        return True

    def valid_subset(self, features: tuple[int, ...]) -> tuple[tuple[int, ...] | None, np.ndarray | None, bool]:
        """A valid S ∖ {j} if there is one, the point that decided it (for a CXp: the point that
        shows it), and whether some S ∖ {j} stayed undecided."""
        problem = self.problem
        subsets = [tuple(i for i in features if i != j) for j in features]
        if not subsets:
            return None, None, False
        if problem.monotone:  # one exact batch: S ∖ {j} moved (CXp) or kept (AXp)
            probes = [modified_inputs(problem.base, subset, problem.target) for subset in subsets]
            predicted = problem.exact.predictions(np.stack(probes), problem.threshold)
            for subset, probe, p in zip(subsets, probes, predicted, strict=True):
                if p == problem.goal:
                    return subset, probe, False
            return None, None, bool((predicted < 0).any())
        undecided = False
        for subset in subsets:
            valid, y, _, _ = self.validity(subset)
            if valid:
                return subset, y, False
            undecided |= valid is None
        return None, None, undecided

    # -------------------------------------------------------------- minimum
    def minimum(
        self, claim: Claim
    ) -> tuple[str, tuple[int, ...] | None, tuple[float, ...] | None, bool, dict[str, Outcome], list[str]]:
        """(verdict, a smaller explanation, the point that shows it if contrastive, certified,
        solver outcomes, notes), by certify's rules."""
        problem, features = self.problem, claim.features
        assert self.pool is not None and features is not None
        monotone = problem.monotone
        certificate = certify_row(
            self.pool, problem, GreedyAnswer(features, 0.0) if monotone else None, self.time_limit, claim.row
        )
        notes = list(certificate.notes)
        smallest = certificate.minimum
        if certificate.verdict == "solver_disagreement":
            return "solver_disagreement", None, None, False, certificate.solvers, notes
        if smallest is not None and len(smallest) < len(features):
            return "not_minimum", smallest, certificate.minimum_witness, True, certificate.solvers, notes
        proved = certificate.verdict == "greedy_minimal" if monotone else certificate.minimum_proved
        if proved and certificate.certified and smallest is not None and len(smallest) == len(features):
            return "minimum", None, None, True, certificate.solvers, notes
        return "undecided", None, None, False, certificate.solvers, notes

"""Case files (`cardinal.case/1`): one instance whole — network, domain, threshold, input, kind,
the greedy and minimum sets, what each solver said — enough to replay anywhere.

`replay` re-checks a case in exact arithmetic: the greedy set is an explanation and what Algorithm
1 returns in exact arithmetic, the minimum set is one and is smaller, and (n ≤ 16, when the case
says the minimum is proved) no set smaller than the minimum exists, by exhaustive enumeration.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cardinal.domain import Domain
from cardinal.errors import InputError, Undecided
from cardinal.exact import ExactNetwork, check_monotone_explanation
from cardinal.greedy import explain_reference
from cardinal.io import MAX_NETWORK_BYTES, read_json, write_atomic
from cardinal.network import Network
from cardinal.prediction import threshold_for
from cardinal.problem import KINDS, Verdict
from cardinal.validate import json_bool, json_feature_set, json_number, json_object, json_string, json_vector

FORMAT = "cardinal.case/1"
ENUMERATION_LIMIT = 16  # replay proves "nothing smaller" exhaustively up to this many features


@dataclass(frozen=True, eq=False)
class Case:
    """One saved instance. `minimum_witness`: for a contrastive minimum on a non-monotone
    network, the point that flips the prediction. `minimum_proved`: an exact proof that nothing
    smaller than `minimum` exists backed the certificate (files without the field: true)."""

    network: Network
    domain: Domain
    threshold: float | None  # None for a network of K ≥ 2 outputs (argmax)
    x: np.ndarray
    kind: str
    greedy: tuple[int, ...] | None
    minimum: tuple[int, ...] | None
    solvers: dict[str, Any] = field(default_factory=dict)
    verdict: str = ""
    note: str = ""
    minimum_witness: tuple[float, ...] | None = None
    minimum_proved: bool = True

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "format": FORMAT,
            "network": self.network.to_json(),
            "domain": self.domain.to_json(),
            "threshold": self.threshold,
            "input": [float(v) for v in self.x],
            "kind": self.kind,
            "greedy": None if self.greedy is None else list(self.greedy),
            "minimum": None if self.minimum is None else list(self.minimum),
            "solvers": self.solvers,
            "verdict": self.verdict,
            "minimum_proved": self.minimum_proved,
        }
        if self.note:
            document["note"] = self.note
        if self.minimum_witness is not None:
            document["minimum_witness"] = list(self.minimum_witness)
        return document

    @classmethod
    def from_json(cls, document: Any, source: str = "case") -> Case:
        """Parse a `cardinal.case/1` document; every field is type-checked and errors name it."""
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise InputError(f"{source}: not a case file ('format' must be {FORMAT!r})")
        missing = [key for key in ("network", "domain", "threshold", "input", "kind", "greedy", "minimum") if key not in document]
        if missing:
            raise InputError(f"{source}: missing {', '.join(missing)}")
        network = Network.from_json(document["network"], source=f"{source}: network")
        domain = Domain.from_json(document["domain"], source=f"{source}: domain")
        if domain.n != network.n_inputs:
            raise InputError(f"{source}: domain has {domain.n} features, the network has {network.n_inputs} inputs")
        n = network.n_inputs
        x = domain.check(json_vector(document["input"], f"{source}: input", length=n), source=f"{source}: input")[0]
        witness = document.get("minimum_witness")
        threshold = document["threshold"]
        if threshold is not None or network.n_outputs == 1:
            threshold = threshold_for(network.n_outputs, json_number(threshold, f"{source}: threshold"), f"{source}: threshold")
        return cls(
            network,
            domain,
            threshold,
            x,
            json_string(document["kind"], f"{source}: kind", KINDS),
            json_feature_set(document["greedy"], f"{source}: greedy", n),
            json_feature_set(document["minimum"], f"{source}: minimum", n),
            json_object(document.get("solvers", {}), f"{source}: solvers"),
            json_string(document.get("verdict", ""), f"{source}: verdict", ("", *(verdict.value for verdict in Verdict))),
            json_string(document.get("note", ""), f"{source}: note"),
            None if witness is None else tuple(json_vector(witness, f"{source}: minimum_witness", length=n).tolist()),
            json_bool(document.get("minimum_proved", True), f"{source}: minimum_proved"),
        )

    @classmethod
    def load(cls, path: str | Path) -> Case:
        return cls.from_json(read_json(path, "case file", MAX_NETWORK_BYTES), source=str(path))

    @property
    def name(self) -> str:
        """A stable file name: verdict, kind, n and a hash of the problem and the two sets (not of
        solver timings), so a rerun or a resumed campaign writes the same case to the same file."""
        document = self.to_json()
        problem = {key: document[key] for key in ("network", "domain", "threshold", "input", "kind", "greedy", "minimum")}
        digest = hashlib.sha256(json.dumps(problem, sort_keys=True).encode()).hexdigest()[:12]
        return f"{self.verdict or 'case'}-{self.kind}-n{self.network.n_inputs}-{digest}.json"

    def save(self, directory: str | Path, *, root: str | Path | None = None) -> Path:
        """Write the case as `directory/NAME` (`name`); returns its path. `root`: the folder the
        user named (default `directory`), below which no link is followed (`io.write_atomic`)."""
        path = Path(directory) / self.name
        write_atomic(path, json.dumps(self.to_json(), indent=1) + "\n", root=directory if root is None else root)
        return path


@dataclass(frozen=True)
class ReplayReport:
    holds: bool
    checks: tuple[str, ...]  # what was verified, in order
    reason: str = ""  # why the case does not hold


def replay(case: Case) -> ReplayReport:
    """Re-check a case in exact arithmetic (monotone networks by the shortcut; otherwise the
    minimum's witness and an exact solver)."""
    checks: list[str] = []

    def fail(reason: str) -> ReplayReport:
        return ReplayReport(False, tuple(checks), reason)

    exact = ExactNetwork(case.network)
    monotone = case.network.is_sign_monotone
    if case.minimum is None:
        return fail("the case names no minimum explanation")
    if case.greedy is not None:
        if not monotone:
            return fail("a greedy set on a non-monotone network")
        if not check_monotone_explanation(exact, case.x, case.greedy, case.kind, case.domain, case.threshold):
            return fail(f"greedy set {list(case.greedy)} is not a {case.kind} explanation")
        checks.append(f"greedy set {list(case.greedy)} is a valid {case.kind} explanation")
        try:
            rerun = explain_reference(case.network, case.x, case.kind, case.domain, case.threshold, exact=True).features(0)
        except Undecided as reason:
            return fail(f"greedy recomputed in exact arithmetic is undecided: {reason}")
        if rerun != case.greedy:
            recomputed = None if rerun is None else list(rerun)
            return fail(f"greedy recomputed in exact arithmetic gives {recomputed}, not {list(case.greedy)}")
        checks.append("greedy (Algorithm 1, exact arithmetic) returns that set")
    valid = _minimum_valid(case, exact, monotone)
    if valid is not True:
        return fail(valid or f"minimum set {list(case.minimum)} is not a {case.kind} explanation")
    checks.append(f"minimum set {list(case.minimum)} is a valid {case.kind} explanation")
    if case.greedy is not None and case.verdict == "greedy_suboptimal":
        if len(case.minimum) >= len(case.greedy):
            return fail(f"minimum size {len(case.minimum)} is not smaller than greedy size {len(case.greedy)}")
        checks.append(f"minimum size {len(case.minimum)} < greedy size {len(case.greedy)}")
    if not case.minimum_proved:
        checks.append("the case does not claim the minimum is proved: no search for a smaller set")
    elif case.network.n_inputs <= ENUMERATION_LIMIT and case.minimum:
        smaller = _smaller_exists(case)
        if smaller is None:
            checks.append("no exhaustive check: the enumeration could not decide")
        elif smaller:
            return fail(f"a {case.kind} explanation smaller than the minimum exists: {list(smaller)}")
        else:
            checks.append(f"by enumeration, no {case.kind} explanation has size < {len(case.minimum)}")
    return ReplayReport(True, tuple(checks))


def _minimum_valid(case: Case, exact: ExactNetwork, monotone: bool) -> bool | str | None:
    if monotone:
        return check_monotone_explanation(exact, case.x, case.minimum, case.kind, case.domain, case.threshold)
    from cardinal.problem import Problem

    problem = Problem.make(case.network, case.x, case.kind, case.domain, case.threshold)
    if case.kind == "contrastive":
        if case.minimum_witness is None:
            return "no witness point for a contrastive minimum on a non-monotone network"
        y = np.asarray(case.minimum_witness, dtype=np.float64)
        if any(y[i] != case.x[i] for i in range(len(y)) if i not in case.minimum):
            return "the witness changes a feature outside the minimum set"
        return problem.flips(y)
    return _abductive_valid_by_solver(case)


def _abductive_valid_by_solver(case: Case) -> bool | str:
    """A non-monotone AXp is a universal claim: an exact backend decides it."""
    from cardinal.solvers.base import solve_minimum

    from cardinal.problem import Status

    solver = "enumerate" if case.domain.binary else "z3"
    fixed = Domain(
        np.where(np.isin(np.arange(case.network.n_inputs), case.minimum), case.x, case.domain.lower),
        np.where(np.isin(np.arange(case.network.n_inputs), case.minimum), case.x, case.domain.upper),
        binary=case.domain.binary,
    )
    # With the set fixed to x, S is an AXp iff no point of the remaining box flips: no CXp at all.
    outcome = solve_minimum(case.network, case.x, "contrastive", fixed, case.threshold, solver=solver, time_limit=600)
    if outcome.status == Status.NONE_EXISTS:
        return True
    if outcome.status in (Status.OPTIMAL, Status.FEASIBLE):
        return False
    return f"the {solver} check of the abductive set ended {outcome.status.value}"


def _smaller_exists(case: Case) -> tuple[int, ...] | bool | None:
    """An explanation smaller than the case's minimum, False if none, None if undecided."""
    from cardinal.solvers.base import solve_minimum

    from cardinal.problem import Status

    solver = "enumerate" if case.network.has_monotone_shortcut or case.domain.binary else "z3"
    outcome = solve_minimum(
        case.network, case.x, case.kind, case.domain, case.threshold, solver=solver, time_limit=600, at_most=len(case.minimum) - 1
    )
    if outcome.status == Status.NONE_WITHIN:
        return False
    if outcome.status in (Status.OPTIMAL, Status.FEASIBLE) and outcome.replayed:
        return outcome.features
    return None

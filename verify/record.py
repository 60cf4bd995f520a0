"""`Record`: one certified explanation of a campaign, the line `cardinal crosscheck` writes to
`DIR/records.jsonl` and the one type that `verify.report` and `verify.paper` read.

In the style of OR-Tools MathOpt's `result.py`: a frozen dataclass whose enums (`Kind`, `Verdict`,
and the `Status` of each solver's `Outcome`) are defined once in `cardinal.problem`, with
`to_json` / `from_json`. `from_json` checks every field it reads and names the line and field of
a bad one; fields added after the first campaigns (`refuted`, `tie_decided`, `notes`,
`minimum_lower`, `solvers_from`, ...) are optional, so records written by older versions still load.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cardinal.errors import InputError
from cardinal.io import JsonLines
from cardinal.problem import Kind, Method, Outcome, Status, Verdict
from cardinal.validate import describe, json_bool, json_vector


@dataclass(frozen=True)
class GreedyAnswer:
    """The explainer's answer to one row, for the explainer named by `method`: "greedy"
    (Algorithm 1) or "deletion" (`solvers.deletion`, subset-minimal). `features` None when no
    explanation of the kind exists; `seconds` the run's time per row; `check`: exact, repaired
    (greedy: float rounding misled, recomputed exactly) or undecided (an answer exact arithmetic
    left open, or a deletion step no engine decided: no evidence); `witness` [n]: for a CXp, the
    point that shows it (`ExplainResult.witness`, `Deletion.witness`). The records keep it in
    the fields `greedy`, `greedy_exists` and `greedy_check` whatever the method, and name the
    method in `method`; `traversal`: deletion's order (`solvers.deletion.TRAVERSALS`), which the
    records name in `traversal` (None for greedy). `found`: an exactly valid set the run showed
    before it stopped undecided (`solvers.deletion.Deletion.found`; None otherwise), with
    `found_witness` [n] for a CXp — no answer and not in the records' `greedy`, but certify takes
    it as evidence of an upper bound (`certify.judge`)."""

    features: tuple[int, ...] | None
    seconds: float
    check: str = "exact"
    witness: tuple[float, ...] | None = None
    method: str = "greedy"
    traversal: str | None = None
    found: tuple[int, ...] | None = None
    found_witness: tuple[float, ...] | None = None

    @property
    def size(self) -> int | None:
        return None if self.features is None else len(self.features)

    def to_json(self) -> dict[str, Any] | None:
        if self.features is None:
            return None
        document = {"features": list(self.features), "size": len(self.features), "seconds": round(self.seconds, 6)}
        if self.witness is not None:
            document["witness"] = list(self.witness)
        return document


class Judged:
    """What a row's verdict (`certify.RowVerdict`) and a campaign `Record` share beyond their
    fields: each has `greedy` (the explainer's answer or None) and `solvers` (name → `Outcome`),
    and writes its verdict with its evidence through `verdict_fields`."""

    greedy: GreedyAnswer | None
    solvers: dict[str, Outcome]

    @property
    def refuted(self) -> tuple[str, ...]:
        """The solvers whose claims exact evidence refuted."""
        return refuted_solvers(self.solvers)

    @property
    def method(self) -> str | None:
        """The explainer whose answer is judged (greedy, deletion), None when none ran."""
        return None if self.greedy is None else self.greedy.method


@dataclass(frozen=True)
class Record(Judged):
    """One explanation (instance, row, kind) with greedy's answer, every solver's outcome and the
    verdict that exact evidence supports (see `verify.certify`).

    A `certify.RowVerdict` with the campaign's context, yet a type of its own: a record holds what
    its line says, `gap` and `minimum_witness` as the version that wrote it put them (older files
    lack `minimum_witness`, and the rule for `gap` has changed since: null for undecided answers),
    where a `RowVerdict` derives them from its evidence; and a record cannot always say the
    network's K that a `RowVerdict` holds (K ≥ 2 shows as a null `threshold` and a list `output`,
    which is null where an output overflows). Their JSON differs too (docs/formats.md: the
    campaign's fields, no `classes`). What they share is written once: `Judged` and `verdict_fields`."""

    key: str  # "instance:row:kind"
    instance: str
    family: str
    activation: str  # e.g. "relu", or "relu+sigmoid" for mixed networks
    network_hash: str
    n: int  # features
    widths: tuple[int, ...]
    row: int
    kind: Kind
    threshold: float | None  # None for a network of K ≥ 2 outputs (argmax)
    prediction: int
    output: float | tuple[float, ...] | None  # f(x) in float64 (K = 1), or the K outputs (K ≥ 2); None where one overflows
    greedy: GreedyAnswer | None  # the explainer's answer (`method`); None: no explainer ran (greedy on a non-monotone network)
    solvers: dict[str, Outcome]
    verdict: Verdict
    certified: bool
    minimum: tuple[int, ...] | None
    minimum_proved: bool
    gap: int | None  # greedy size − minimum size
    tie_decided: bool | None = None  # for greedy_suboptimal: would some tie order have rescued greedy?
    notes: tuple[str, ...] = ()
    minimum_witness: tuple[float, ...] | None = None  # for a contrastive minimum: the point that shows it
    proof: dict[str, Any] | None = None  # with --proof: the certificate's entry (`verify.proofs`)
    radius: float | None = None  # the row ranged over its ball of this radius in the instance's box (None: the box)
    minimum_lower: int | None = None  # an exact lower bound on the minimum's size (= its size when `minimum_proved`)
    solvers_from: str | None = None  # the key of the record whose solver calls `solvers` are (judged for both explainers)

    @property
    def margin(self) -> float | None:
        """In float64: f(x) − t (K = 1); for K ≥ 2 the predicted class's output minus the largest
        other one (the float argmax's where the prediction is undecided). None where an output or
        the difference overflows the double range."""
        if self.output is None:
            return None
        if isinstance(self.output, float):
            value = self.output - self.threshold
        else:
            outputs = list(self.output)
            c = self.prediction if self.prediction >= 0 else outputs.index(max(outputs))
            value = outputs[c] - max(value for j, value in enumerate(outputs) if j != c)
        return value if math.isfinite(value) else None

    @property
    def activations(self) -> frozenset[str]:
        return frozenset(self.activation.split("+"))

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "instance": self.instance,
            "family": self.family,
            "activation": self.activation,
            "network_hash": self.network_hash,
            "n": self.n,
            "widths": list(self.widths),
            "row": self.row,
            "kind": self.kind.value,
            "threshold": self.threshold,
            **({} if self.radius is None else {"radius": self.radius}),
            "prediction": self.prediction,
            "output": self.output if self.output is None or isinstance(self.output, float) else list(self.output),
            "margin": self.margin,
            **verdict_fields(self),
            "tie_decided": self.tie_decided,
            "notes": list(self.notes),
            **({} if self.proof is None else {"proof": self.proof}),
            **({} if self.solvers_from is None else {"solvers_from": self.solvers_from}),
        }

    @classmethod
    def from_json(cls, document: Any, where: str = "record") -> Record:
        """Read a record line; InputError naming `where` (e.g. "DIR/records.jsonl line 7") and
        the field when a field is missing or of the wrong type."""
        if not isinstance(document, dict):
            raise InputError(f"{where}: not a campaign record (a JSON object), got {describe(document)}")
        read = _Reader(document, where)
        greedy = None
        if document.get("greedy") is not None or document.get("greedy_exists") is not None:
            greedy = _greedy(document, read)
        outcomes = document.get("solvers")
        if not isinstance(outcomes, dict):
            raise InputError(f"{where}: field 'solvers' must be an object, got {describe(outcomes)}")
        return cls(
            key=read.string("key"),
            instance=read.string("instance"),
            family=read.string("family"),
            activation=read.string("activation"),
            network_hash=read.string("network_hash"),
            n=read.integer("n"),
            widths=tuple(_integers(document.get("widths"), f"{where}: widths")),
            row=read.integer("row"),
            kind=read.choice("kind", Kind),
            threshold=None if isinstance(document.get("output"), list) else read.number("threshold"),
            prediction=read.integer("prediction"),
            output=None if document.get("output") is None else (
                read.numbers("output") if isinstance(document.get("output"), list) else read.number("output")
            ),
            greedy=greedy,
            solvers={name: _outcome(name, outcome, f"{where}: solvers.{name}") for name, outcome in outcomes.items()},
            verdict=read.choice("verdict", Verdict),
            certified=read.boolean("certified"),
            minimum=None if document.get("minimum") is None else _features(document["minimum"], f"{where}: minimum"),
            minimum_proved=read.boolean("minimum_proved"),
            gap=None if document.get("gap") is None else read.integer("gap"),
            tie_decided=None if document.get("tie_decided") is None else read.boolean("tie_decided"),
            notes=tuple(str(note) for note in document.get("notes") or ()),
            minimum_witness=_witness(document.get("minimum_witness"), f"{where}: minimum_witness"),
            proof=_proof(document.get("proof"), f"{where}: proof"),
            radius=None if document.get("radius") is None else read.number("radius"),
            minimum_lower=None if document.get("minimum_lower") is None else read.integer("minimum_lower"),
            solvers_from=None if document.get("solvers_from") is None else read.string("solvers_from"),
        )


def _greedy(document: dict[str, Any], read: _Reader) -> GreedyAnswer:
    """Greedy's answer from the fields `greedy`, `greedy_exists` and `greedy_check`."""
    check, answer = read.string("greedy_check"), document.get("greedy")
    method = "greedy" if document.get("method") is None else read.choice("method", Method).value
    traversal = None if document.get("traversal") is None else read.string("traversal")
    if not read.boolean("greedy_exists"):
        return GreedyAnswer(None, 0.0, check, method=method, traversal=traversal)
    features, seconds = (answer.get("features"), answer.get("seconds")) if isinstance(answer, dict) else (None, None)
    if not (_is_indices(features) and _is_seconds(seconds)):
        raise read.fail("greedy", "an object with 'features' (indices) and 'seconds' when greedy_exists is true")
    witness = _witness(answer.get("witness"), f"{read.where}: greedy.witness")
    return GreedyAnswer(tuple(features), float(seconds), check, witness, method, traversal)


def proves_none(verdict: Verdict, certified: bool, minimum: tuple[int, ...] | None) -> bool:
    """Whether a result says, on exact evidence, that no explanation exists: verdict none_exists,
    or exact_only (no explainer ran: a network without the shortcut) certified without a minimum
    (an exact backend's none_exists)."""
    return verdict == Verdict.NONE_EXISTS or (verdict == Verdict.EXACT_ONLY and certified and minimum is None)


def refuted_solvers(solvers: dict[str, Outcome]) -> tuple[str, ...]:
    """The names of the solvers whose claims exact evidence refuted."""
    return tuple(name for name, outcome in solvers.items() if outcome.status == Status.REFUTED)


def verdict_fields(result: Any) -> dict[str, Any]:
    """The JSON fields a certificate and a campaign record share: the explainer's answer (`method`:
    greedy or deletion, null when none ran; the answer in `greedy`, `greedy_exists`,
    `greedy_check`; deletion's order in `traversal`), each solver's outcome and the verdict with its evidence (`result` is a
    `Judged`: a `RowVerdict` or a `Record`);
    `minimum_witness` is the point that shows a contrastive minimum (null for an AXp);
    `minimum_lower` an exact lower bound on the minimum's size (its size where `minimum_proved`;
    null where no explanation may exist or the evidence conflicts); `proved_by` what backs an
    exact "nothing smaller" (`proved_by`)."""
    greedy = result.greedy
    return {
        "method": None if greedy is None else greedy.method,
        "greedy": None if greedy is None else greedy.to_json(),
        "greedy_exists": None if greedy is None else greedy.features is not None,
        "greedy_check": None if greedy is None else greedy.check,
        **({} if greedy is None or greedy.traversal is None else {"traversal": greedy.traversal}),
        "solvers": {name: outcome.to_json() for name, outcome in result.solvers.items()},
        "verdict": result.verdict.value,
        "certified": result.certified,
        "minimum": None if result.minimum is None else list(result.minimum),
        "minimum_witness": None if result.minimum_witness is None else list(result.minimum_witness),
        "minimum_proved": result.minimum_proved,
        "minimum_lower": result.minimum_lower,
        "proved_by": proved_by(result),
        "gap": result.gap,
        "refuted": list(result.refuted),
    }


def proved_by(result: Any) -> str | None:
    """What backs a result's exact "nothing smaller" (its minimum proved, or no CXp at all):
    "certificate" where a certificate of it was made and the independent checker accepted it,
    "engine" where only an exact engine's proof does, "definition" for an empty minimum (nothing
    is smaller); None where nothing is proved."""
    if not (result.minimum_proved or proves_none(result.verdict, result.certified, result.minimum)):
        return None
    if result.minimum == ():
        return "definition"
    proof = getattr(result, "proof", None)
    return "certificate" if proof and proof.get("accepted") else "engine"


def without_timings(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Record documents without their measured seconds, in key order: what two runs of the same
    campaign must share."""
    cleaned = []
    for record in sorted(records, key=lambda r: r["key"]):
        record = json.loads(json.dumps(record))
        if record["greedy"]:
            record["greedy"].pop("seconds")
        for outcome in record["solvers"].values():
            outcome.pop("seconds")
        if record.get("proof"):
            record["proof"].pop("seconds", None)
            record["proof"].pop("check_seconds", None)
        cleaned.append(record)
    return cleaned


def read_records(path: str | Path) -> list[Record]:
    """Every finished record of a `records.jsonl` (a torn last line is skipped), checked."""
    return [Record.from_json(document, f"{path} line {number}") for number, document in enumerate(JsonLines(path).read(), 1)]


# ---------------------------------------------------------------------------- field checks
class _Reader:
    """Typed access to the fields of one record document, errors naming the field."""

    def __init__(self, document: dict[str, Any], where: str) -> None:
        self.document, self.where = document, where

    def fail(self, field: str, expected: str) -> InputError:
        return InputError(f"{self.where}: field {field!r} is {describe(self.document.get(field))}, expected {expected}")

    def string(self, field: str) -> str:
        value = self.document.get(field)
        if not isinstance(value, str):
            raise self.fail(field, "a string")
        return value

    def choice(self, field: str, enum: type[Kind] | type[Verdict] | type[Method]) -> Any:
        value = self.document.get(field)
        if not isinstance(value, str) or value not in {member.value for member in enum}:
            raise self.fail(field, f"one of {', '.join(member.value for member in enum)}")
        return enum(value)

    def integer(self, field: str) -> int:
        value = self.document.get(field)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(field, "an integer")
        return value

    def numbers(self, field: str) -> tuple[float, ...]:
        value = self.document.get(field)
        if not isinstance(value, list) or not value or not all(
            not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) for v in value
        ):
            raise self.fail(field, "a list of finite numbers")
        return tuple(float(v) for v in value)

    def number(self, field: str) -> float:
        value = self.document.get(field)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(field, "a finite number")
        return float(value)

    def boolean(self, field: str) -> bool:
        value = self.document.get(field)
        if not isinstance(value, bool):
            raise self.fail(field, "true or false")
        return value


def _is_indices(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def _is_seconds(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _integers(value: Any, where: str) -> list[int]:
    if not _is_indices(value):
        raise InputError(f"{where} must be a list of integers, got {describe(value)}")
    return value


def _witness(value: Any, where: str) -> tuple[float, ...] | None:
    return None if value is None else tuple(json_vector(value, where).tolist())


def _features(value: Any, where: str) -> tuple[int, ...]:
    return tuple(_integers(value, where))


def _seconds(value: Any, where: str) -> float:
    if not _is_seconds(value):
        raise InputError(f"{where} must be a number of seconds ≥ 0, got {describe(value)}")
    return float(value)


def _proof(document: Any, where: str) -> dict[str, Any] | None:
    """A record's `proof` entry (`verify.proofs`), or None: a file name with its size, seconds and
    the checker's answer, or no file and the reason."""
    if document is None:
        return None
    if not isinstance(document, dict) or "file" not in document:
        raise InputError(f"{where} must be an object with 'file', got {describe(document)}")
    if document["file"] is None:
        if not isinstance(document.get("reason"), str):
            raise InputError(f"{where}: 'reason' must be a string when 'file' is null")
        return document
    ok = isinstance(document["file"], str) and isinstance(document.get("accepted"), bool)
    if not ok or not all(_is_seconds(document.get(key)) for key in ("bytes", "seconds", "check_seconds")):
        raise InputError(
            f"{where} must give 'file', 'bytes', 'seconds', 'check_seconds' and 'accepted', got {describe(document)}"
        )
    return document


def _outcome(solver: str, document: Any, where: str) -> Outcome:
    """A solver's `Outcome` as `Outcome.to_json` wrote it."""
    statuses = {status.value for status in Status}
    if not isinstance(document, dict) or not isinstance(document.get("status"), str) or document["status"] not in statuses:
        raise InputError(f"{where} must be an object with a known 'status' and 'seconds', got {describe(document)}")
    claimed = document.get("claimed")
    if claimed is not None and (not isinstance(claimed, str) or claimed not in statuses):
        raise InputError(f"{where}.claimed: unknown status {describe(claimed)}")
    witness = document.get("witness")
    return Outcome(
        status=Status(document["status"]),
        solver=solver,
        seconds=_seconds(document.get("seconds"), f"{where}.seconds"),
        solution=None if document.get("features") is None else _features(document["features"], f"{where}.features"),
        witness=None if witness is None else tuple(json_vector(witness, f"{where}.witness").tolist()),
        raw_status=str(document.get("raw_status", "")),
        exact=json_bool(document.get("exact", False), f"{where}.exact"),
        replayed=json_bool(document.get("replayed", False), f"{where}.replayed"),
        message=str(document.get("message", "")),
        claimed=None if claimed is None else Status(claimed),
    )


def annotated(lines: list[dict[str, Any]], net: Any, settings: Any) -> list[dict[str, Any]]:
    """Output lines with the settings they were computed under (`threshold`, `domain`), the
    settings' notes first in `notes`, and the feature names (`named`)."""
    for line in lines:
        line.update(settings.to_json())
        line["notes"] = [*settings.notes, *line.get("notes", ())]
    return named(lines, net)


def named(lines: list[dict[str, Any]], net: Any) -> list[dict[str, Any]]:
    """Output lines with the names of the network's metadata beside the indices: the feature
    names as "names" for "features", "minimum_names" for "minimum", and "names" inside "greedy";
    the class names (K ≥ 2) as "prediction_name" for a decided "prediction"."""
    classes = net.metadata.class_names
    if classes is not None:
        for line in lines:
            if line.get("prediction", -1) >= 0:
                line["prediction_name"] = classes[line["prediction"]]
    names = net.metadata.feature_names
    if names is None:
        return lines

    def named(indices: Any) -> list[str] | None:
        return None if indices is None else [names[i] for i in indices]

    for line in lines:
        if "features" in line:
            line["names"] = named(line["features"])
        if "minimum" in line:
            line["minimum_names"] = named(line["minimum"])
        if isinstance(line.get("greedy"), dict):
            line["greedy"]["names"] = named(line["greedy"]["features"])
    return lines

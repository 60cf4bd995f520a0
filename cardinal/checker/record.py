"""A record checked whole against the certificate it names (`cardinal proof check --records`).

A record of certify, check, crosscheck or `Explanation.to_dict()` states results: the prediction,
the minimum (`minimum`, with `minimum_witness` for a CXp), its lower bound (`minimum_lower`),
`minimum_proved`, the verdict, `none_exists`, the threshold, the explainer's answer and its gap.
`check_record` derives what the certificate (its problem and its claim, which `check` accepted)
and an exact replay support, and names the first field that states anything else:

- `prediction`: p(x), evaluated here in rationals; `threshold`: the certificate's.
- claim "no contrastive explanation" (or none within n): no minimum, no lower bound, verdict
  none_exists (exact_only without an explainer), no explainer's answer, `none_exists` true.
- claim "none within k": a minimum of exactly k + 1 distinct features that replays as an
  explanation — a CXp by its witness (differs from x only on those features, lies in the box, and
  flips p exactly), an AXp by interval bisection of the box with those features fixed (every
  sub-box's enclosure keeps p; a budget of `MAX_BOXES` boxes, never a time); then
  `minimum_proved` true, `minimum_lower` k + 1, `certified` true, and the verdict the
  explainer's answer implies: `<method>_minimal` when its size is k + 1 (the answer replayed too
  when it is another set), `<method>_suboptimal` when larger, `exact_only` without an explainer;
  `gap` its size less k + 1. An explainer whose answer exact arithmetic left open
  (`greedy_check` undecided: a deletion step no engine decided, or greedy's undecided enclosures)
  judged nothing: verdict `undecided`, `certified` false, `gap` null, its answer (if any) not
  read — the proved minimum stands on the certificate alone.

Like the rest of this package it imports nothing from cardinal: the records are checked by code
that shares none with the code that wrote them.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from .exact import CertificateError, _index, _Net, _number, _numbers, _predict, _Rejected, network_sha256

MAX_BOXES = 4096  # sub-boxes an AXp's replay may evaluate before it says "not confirmed"


class _Field(Exception):
    """A record field that the certificate and the replay do not support: its name and why."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"{name}: {why}")


def check_record(
    record: dict[str, Any], certificate: dict[str, Any], network: Any, max_boxes: int = MAX_BOXES, witness: Any = None
) -> str | None:
    """None when every result `record` states is what `certificate` (already accepted by `check`
    against the parsed `network` document) and the exact replay support; else "FIELD: why".
    `witness`: a CXp minimum's witness for a record that states none (crosscheck's record of a
    second explainer: the witness is in the record of the first, which names the same
    certificate); it is replayed like the record's own."""
    try:
        _Record(record, certificate, network, max_boxes, witness).check()
    except _Field as field:
        return str(field)
    return None


class _Record:
    def __init__(self, record: dict[str, Any], certificate: dict[str, Any], network: Any, max_boxes: int, witness: Any) -> None:
        self.record, self.max_boxes, self.witness = record, max_boxes, witness
        problem, claim = certificate["problem"], certificate["claim"]
        _, layers = network_sha256(network)
        self.net = _Net(layers)
        self.n, self.classes = len(layers[0].weight[0]), len(layers[-1].weight)
        self.x = [Fraction(v) for v in _numbers(problem["x"], "problem.x", self.n)]
        self.lower = [Fraction(v) for v in _numbers(problem["lower"], "problem.lower", self.n)]
        self.upper = [Fraction(v) for v in _numbers(problem["upper"], "problem.upper", self.n)]
        self.binary, self.kind = problem["binary"], problem["kind"]
        self.threshold = None if self.classes > 1 else Fraction(_number(problem["threshold"], "problem.threshold"))
        k = self.n if claim == {"none_exists": True} else claim["no_explanation_within"]
        self.none = self.kind == "contrastive" and k == self.n
        self.size = k + 1
        self.p = _predict(self.net.point(self.x), self.threshold, "x")  # `check` decided it already

    def check(self) -> None:
        self.expect("prediction", self.p)
        threshold = self.record.get("threshold")
        if self.threshold is None:
            self.expect("threshold", None)
        elif not _is_number(threshold) or Fraction(threshold) != self.threshold:
            said = f"the certificate's threshold is {float(self.threshold)!r}, the record states {threshold!r}"
            raise _Field("threshold", said)
        if "minimum" not in self.record and "features" in self.record:
            return self.check_claim()
        method, answer = self.record.get("method"), self.record.get("greedy")
        features = None if not isinstance(answer, dict) else answer.get("features")
        if self.none:
            return self.check_none(method, features)
        undecided = method is not None and self.record.get("greedy_check") == "undecided"  # no answer judged
        if method is not None and not undecided and not isinstance(answer, dict):
            raise _Field("greedy", f"the record names the explainer {method!r} but not its answer")
        minimum = self.features("minimum", self.record.get("minimum"))
        if len(minimum) != self.size:
            raise _Field("minimum", f"{len(minimum)} feature(s), but the certificate proves a minimum of {self.size} "
                                    f"(no {self.kind} explanation within {self.size - 1})")  # fmt: skip
        witness = self.record.get("minimum_witness")
        if witness is None and self.kind == "contrastive":
            witness = self.witness
        self.replay("minimum", minimum, "minimum_witness", witness)
        self.expect("minimum_proved", True)
        self.expect("minimum_lower", self.size)
        self.expect("certified", not undecided)
        if "none_exists" in self.record:
            self.expect("none_exists", False)
        if undecided:
            self.expect("verdict", "undecided")
            self.expect("gap", None)
            return
        if method is None:
            self.expect("verdict", "exact_only")
            self.expect("gap", None)
            return
        if "greedy_exists" in self.record:
            self.expect("greedy_exists", True)
        given = self.features("greedy", features)
        if len(given) < self.size:
            raise _Field("greedy", f"{len(given)} feature(s): the certificate proves no {self.kind} explanation within "
                                   f"{self.size - 1}")  # fmt: skip
        if len(given) == self.size and given != minimum:
            self.replay("greedy", given, "greedy.witness", answer.get("witness"))
        self.expect("verdict", f"{method}_{'minimal' if len(given) == self.size else 'suboptimal'}")
        self.expect("gap", len(given) - self.size)

    def check_claim(self) -> None:
        """A record of `check --require minimum` (its `features`, `size`, `witness`, verdict
        minimum or none_exists)."""
        if self.none:
            for name in ("features", "size"):
                self.expect(name, None)
            self.expect("verdict", "none_exists")
            return
        features = self.features("features", self.record.get("features"))
        if len(features) != self.size:
            raise _Field("features", f"{len(features)} feature(s), but the certificate proves a minimum of {self.size}")
        self.expect("size", self.size)
        witness = self.record.get("witness") if self.kind == "contrastive" else None  # an AXp's is a point of its own
        self.replay("features", features, "witness", witness)
        self.expect("verdict", "minimum")
        for name in ("valid", "passed"):
            if name in self.record:
                self.expect(name, True)

    def check_none(self, method: Any, features: Any) -> None:
        """The record of a certificate of "no contrastive explanation at all"."""
        for name in ("minimum", "minimum_witness", "minimum_lower"):
            self.expect(name, None)
        self.expect("minimum_proved", False)
        self.expect("certified", True)
        if "none_exists" in self.record:
            self.expect("none_exists", True)
        if features is not None:
            raise _Field("greedy", "the explainer's answer is a set, but the certificate proves that no contrastive "
                                   "explanation exists")  # fmt: skip
        if "greedy_exists" in self.record:
            self.expect("greedy_exists", None if method is None else False)
        self.expect("verdict", "exact_only" if method is None else "none_exists")

    def expect(self, name: str, wanted: Any) -> None:
        """The record's field `name` must be `wanted` (a missing field is None)."""
        given = self.record.get(name)
        if given != wanted or (type(given) is not type(wanted) and not (_is_number(given) and _is_number(wanted))):
            said = "missing" if name not in self.record else repr(given) if len(repr(given)) <= 80 else "another value"
            raise _Field(name, f"the certificate and the replay support {wanted!r}, the record states {said}")

    def features(self, name: str, value: Any) -> list[int]:
        """A list of distinct feature indices, in increasing order."""
        if not isinstance(value, list) or not all(_index(i, self.n) for i in value) or value != sorted(set(value)):
            raise _Field(name, f"not a set of features (distinct indices below {self.n}, in increasing order)")
        return value

    def replay(self, name: str, features: list[int], witness_name: str, witness: Any) -> None:
        """`features` (the record's field `name`) must be an explanation of the certificate's
        kind: a CXp by its `witness` (the field `witness_name`), an AXp by `_Bisection`."""
        if self.kind == "abductive":
            if witness is not None:
                raise _Field(witness_name, "an abductive explanation has no witness")
            why = _Bisection(self, features).holds()
            if why is not None:
                raise _Field(name, why)
            return
        if not isinstance(witness, list) or len(witness) != self.n or not all(_is_number(v) for v in witness):
            raise _Field(witness_name, f"a contrastive explanation needs its witness: {self.n} numbers")
        y = [Fraction(v) for v in witness]
        moved = [i for i in range(self.n) if y[i] != self.x[i] and i not in features]
        if moved:
            raise _Field(name, f"its witness ({witness_name}) moves feature {moved[0]}, which the set leaves out")
        ends = zip(self.lower, y, self.upper, strict=True)
        if any(not lo <= v <= hi or (self.binary and v not in (lo, hi)) for lo, v, hi in ends):
            raise _Field(witness_name, "the witness lies outside the box")
        try:
            q = _predict(self.net.point(y), self.threshold, "the witness")
        except _Rejected as open_:
            raise _Field(witness_name, str(open_)) from None
        if q == self.p:
            raise _Field(witness_name, f"the witness does not change the prediction (p = {q} there, as at x)")


class _Bisection:
    """Whether fixing `features` at x keeps p over the whole box: a stack of sub-boxes (the free
    features' ranges; binary: their two ends), each evaluated with interval arithmetic; one that
    neither keeps p nor is a point splits its widest free feature (at the middle; binary: into
    its two ends). A point where p changes refutes the set; `MAX_BOXES` boxes without a verdict
    leave it unconfirmed."""

    def __init__(self, record: _Record, features: list[int]) -> None:
        self.record, self.fixed = record, set(features)

    def holds(self) -> str | None:
        """None when the set is an AXp; else why it is not (or is not confirmed)."""
        r = self.record
        low = [r.x[i] if i in self.fixed else r.lower[i] for i in range(r.n)]
        high = [r.x[i] if i in self.fixed else r.upper[i] for i in range(r.n)]
        stack, boxes = [(low, high)], 0
        while stack:
            low, high = stack.pop()
            boxes += 1
            if boxes > r.max_boxes:
                return f"not confirmed as an abductive explanation within {r.max_boxes} boxes (interval bisection)"
            outputs = r.net.output(*r.net.affine(0, low, high))
            try:
                if _predict(outputs, r.threshold, "box") == r.p:
                    continue
                return f"not an abductive explanation: the prediction changes in the box {_shown(low, high)}"
            except _Rejected:
                pass
            wide = [i for i in range(r.n) if high[i] > low[i]]
            if not wide:
                return f"the enclosure at {_shown(low, high)} leaves the prediction open"
            corner = _point(r, low)
            if corner is not None and corner != r.p:
                return f"not an abductive explanation: p = {corner} at {_shown(low, low)}"
            i = max(wide, key=lambda j: high[j] - low[j])
            cut_low, cut_high = (low[i], high[i]) if r.binary else ((low[i] + high[i]) / 2,) * 2
            stack.append((low, [*high[:i], cut_low, *high[i + 1 :]]))
            stack.append(([*low[:i], cut_high, *low[i + 1 :]], high))
        return None


def _point(record: _Record, y: list[Fraction]) -> int | None:
    """p at the point y (None where the enclosure leaves it open)."""
    try:
        return _predict(record.net.point(y), record.threshold, "point")
    except _Rejected:
        return None


def _shown(low: list[Fraction], high: list[Fraction]) -> str:
    parts = (repr(float(a)) if a == b else f"{float(a)!r}..{float(b)!r}" for a, b in zip(low, high, strict=True))
    text = "[" + ", ".join(parts) + "]"
    return text if len(text) <= 200 else text[:197] + "..."


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) != float("inf")


__all__ = ["MAX_BOXES", "CertificateError", "check_record"]

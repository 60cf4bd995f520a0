"""`cardinal.explain`: explain a model's prediction and prove the answer minimal, in one call.

    import cardinal
    e = cardinal.explain("model.onnx", x, kind="abductive")
    e.features, e.proved, e.certificate.check()

One call runs what `cardinal certify --proof` runs on the command line: an explainer (greedy on a
sign-monotone network, deletion on any other), then, with `prove` (the default), the exact
solvers that ask for anything smaller, and a certificate of every exact "nothing smaller" that the
independent checker accepts. The answer is an `Explanation`; its `to_dict()` is the record the
CLI writes for the same question (`certify` with `prove`, `explain` without), timings aside.

Exact by default: `proved` is True only where an exact proof (or a certificate) backs the claim
that nothing smaller exists; `lower` and `upper` bound the minimum's size exactly.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from cardinal.solvers.deletion import TRAVERSALS
from cardinal.solvers.oracle import SetOracle

from cardinal.arguments import api_arguments, api_inputs
from cardinal.domain import Domain, Radius
from cardinal.errors import InputError
from cardinal.network import Network
from cardinal.problem import DEFAULT_TIME_LIMIT, DEFAULT_TRAVERSAL, KINDS
from cardinal.validate import describe

from .certify import SolverPool, proving_solvers
from .explaining import ExplainOptions, explain_lines
from .pipeline import METHODS, Answered, Plan, answered, record_of
from .proofs import ProofFolder, Written, check_file
from .record import proves_none
from .settings import Flags, Settings, resolve

if TYPE_CHECKING:
    import torch



@dataclass(frozen=True)
class Proof:
    """The certificate (`cardinal.proof/1`, docs/proofs.md) of an explanation's "nothing smaller":
    `claim` (the certificate's claim), `accepted` (by the independent checker when it was made),
    `path` (the file under `proof_dir`; None when it is held in memory, network embedded), its
    JSON `text`, and what binds it to this answer: `sha256` (of the text) and `problem` (the
    certificate's problem). `entry` is the record's `proof` entry, as `certify --proof` writes it.
    `check()` runs the checker again, on this answer's certificate only."""

    claim: dict[str, Any]
    accepted: bool
    text: str = field(repr=False)
    path: Path | None = None
    sha256: str = ""
    problem: dict[str, Any] = field(default_factory=dict, repr=False)
    entry: dict[str, Any] = field(default_factory=dict, repr=False)

    def check(self) -> bool:
        """True when the certificate read now (the file when written, else the text) is this
        answer's — its SHA-256 is `sha256` and its problem is `problem` — and `cardinal.checker`
        accepts it; False when the file holds another certificate or the checker rejects it."""
        if self.path is not None:
            return _bound(check_file(self.path), self.sha256, self.problem)
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "certificate.json"
            path.write_text(self.text)
            return _bound(check_file(path), self.sha256, self.problem)


def _bound(checked: Any, sha256: str, problem: dict[str, Any]) -> bool:
    """Whether a checked certificate (`proofs.Checked`) is the bound one and accepted."""
    return checked.sha256 == sha256 and checked.certificate.get("problem") == problem and checked.report.accepted


@dataclass(frozen=True)
class Explanation:
    """One explanation of one input.

    `features`: the explanation (sorted feature indices) — the canonical smallest exactly valid
    set any stage found (the explainer's answer, a set its run showed before it stopped, a
    solver's, for an AXp all n features at worst; fewest features, then lexicographically
    smallest), the minimum where `proved`. Never None for an AXp where p(x) is decided; for a CXp
    None where exact evidence shows that none exists or no valid set was found (`verdict` says
    which). `method`: what found it (greedy, deletion, or minimum: the exact solvers, or for an
    AXp the full set). `witness` [n]: for a contrastive set, a point of the box that differs
    from x only on `features` and flips the prediction. `lower`, `upper`: exact bounds on the
    size of a minimum explanation — `upper` is len(`features`), `lower` the best exact lower
    bound any engine proved (the record's `minimum_lower`) — None where unknown or none exists.
    `none_exists`: exact evidence shows that no contrastive explanation exists. `verdict`: the explainer's verdict
    (`cardinal.Verdict`; None without `prove`). `certificate`: the `Proof` of "nothing smaller",
    None with `certificate_reason`. `timings`: seconds per stage. `x`: the input explained;
    `input_shape`: the model's input shape (the network's record, else the caller's
    `input_shape=`; None: neither), which `figure()` draws the input as an image by.
    """

    kind: str
    prediction: int
    features: tuple[int, ...] | None
    method: str
    proved: bool
    lower: int | None
    upper: int | None
    verdict: str | None
    none_exists: bool = False
    witness: tuple[float, ...] | None = None
    certificate: Proof | None = None
    certificate_reason: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict, repr=False)
    x: tuple[float, ...] | None = field(default=None, repr=False)
    input_shape: tuple[int, ...] | None = None

    @property
    def exists(self) -> bool | None:
        """Whether an explanation exists: False only where exact evidence shows no CXp."""
        if self.features is not None:
            return True
        return False if self.none_exists else None

    def to_dict(self) -> dict[str, Any]:
        """The record the CLI writes for the same question (`certify`, or `explain` without `prove`)."""
        return dict(self.record)

    def figure(self) -> Any:
        """The matplotlib `Figure` of this explanation drawn on its input as an image
        (`verify.picture.figure`: the input, the explanation's pixels marked, and for a contrastive
        one its witness and witness − x; the title states kind, prediction, |features| and what is
        proved). `InputError` saying why where it cannot be drawn: no input shape (the model records
        none and no `input_shape=` was given) or one that is not an image's."""
        from .picture import figure, title_of

        if self.input_shape is None:
            raise InputError("no picture: the model records no input shape and none was given (input_shape=, e.g. (1, 28, 28))")
        if self.x is None:
            raise InputError("no picture: this explanation does not hold its input x")
        title = title_of(self.kind, self.prediction, self.features, self.proved, self.lower, self.upper, self.method)
        witness = self.witness if self.kind == "contrastive" else None
        return figure(self.x, self.input_shape, self.kind, self.features, witness, title)


def explain(
    model: str | Path | Network | torch.nn.Module,
    x: Sequence[float] | np.ndarray,
    kind: str = "contrastive",
    *,
    method: str = "auto",
    traversal: str = DEFAULT_TRAVERSAL,
    radius: Radius | None = None,
    threshold: float | None = None,
    domain: Domain | None = None,
    prove: bool = True,
    proof_dir: str | Path | None = None,
    time_limit: float | None = None,
    input_shape: Sequence[int] | None = None,
) -> Explanation | list[Explanation]:
    """Explain the prediction of `model` at `x` and, with `prove`, prove the answer minimal.

    `model`: a path (cardinal JSON, ONNX, a torch file read with `weights_only`), a `Network`, or a
    torch module (`input_shape` without the batch axis where it has Conv2d layers). `x`: one input
    [n] (→ one `Explanation`) or a 2-D array [B, n] (→ a list, with a progress bar on a terminal).
    `kind`: "contrastive" or "abductive". `method`: "auto" (greedy on a sign-monotone network,
    deletion on any other; then the exact minimum where `prove`), "greedy", "deletion", or
    "minimum" (the exact solvers alone). `traversal`: the order of deletion's questions, as
    `cardinal explain --traversal` — "index", "sensitivity" (VeriX's, the default) or
    "quickxplain" (VeriX+'s binary search: the sensitivity traversal's answer, in fewer questions
    where most features leave); named in the answer's record (`to_dict()["traversal"]`) where
    deletion ran. `radius`: explain inside the ball of x (docs/semantics.md);
    `threshold`, `domain`: as the CLI's flags (default: the model's metadata, else 0 and [0, 1]^n).
    `proof_dir`: write certificates (and the network once) there; None keeps them in memory.
    `time_limit`: the call's budget in seconds, per input (default 60): with `prove`, every stage
    (the explainer's exact questions, the solvers — their processes' start included —, the
    certificate) shares it, each getting what the earlier ones left, and the answer comes within
    `time_limit` plus max(2, time_limit / 10) seconds, with the best exactly valid set and exact
    bounds held then (`proved` False where the minimum was not proved in time;
    `certificate_reason` "no certificate: the call's time limit" where no time was left for it);
    a timeout never proves "nothing smaller". Without `prove`, each of deletion's exact questions gets `time_limit`.

    A small network is answered in this process (enumerate, up to 16 features: no solver process
    starts); otherwise the exact solvers' processes start, in the background while the explainer
    runs, only when a question needs them, and end before the call returns; to explain input after
    input, an `Explainer` keeps them between calls.
    """
    _check_arguments(kind, method, prove, traversal)
    with Explainer(model, radius=radius, threshold=threshold, domain=domain, proof_dir=proof_dir, time_limit=time_limit,
                   input_shape=input_shape) as explainer:
        return explainer.explain(x, kind, method=method, traversal=traversal, prove=prove)


class Explainer:
    """`explain` for one model, its exact solvers kept between calls: a context manager that ends
    their processes on leaving (or `close()`), as PySAT's solvers free theirs.

        with cardinal.Explainer("model.onnx", threshold=0.5) as explainer:
            for x in X:
                e = explainer.explain(x, "abductive")

    The arguments are `explain`'s, split as they are fixed: the model and its settings here (read
    and resolved once), the input, kind, method, traversal and `prove` per call. Each answer is the one
    `explain` gives for the same arguments; only the solver processes' start-up is saved, paid on
    the first call that needs them (the explainer's exact questions, or the proof with `prove`),
    within that call's budget. `time_limit` is each input's budget (`explain`), for a batch too:
    every row gets its own.
    """

    def __init__(
        self,
        model: str | Path | Network | torch.nn.Module,
        *,
        radius: Radius | None = None,
        threshold: float | None = None,
        domain: Domain | None = None,
        proof_dir: str | Path | None = None,
        time_limit: float | None = None,
        input_shape: Sequence[int] | None = None,
    ) -> None:
        checked = api_arguments(threshold=threshold, domain=domain, radius=radius, proof_dir=proof_dir,
                                time_limit=time_limit, input_shape=input_shape, default_time_limit=DEFAULT_TIME_LIMIT)
        self.limit = checked.time_limit
        self.net, name = _network(model, checked.input_shape)
        self.shape = self.net.metadata.input_shape or checked.input_shape  # what `Explanation.figure` draws by
        self.settings = resolve(self.net, name, Flags(checked.threshold, checked.domain, False, checked.radius))
        self.proofs = ProofFolder(checked.proof_dir, self.net, self.limit)  # proof_dir None: held in memory
        self._pool: SolverPool | None = None  # the exact solvers of `prove`, started on first use
        self._oracle: SetOracle | None = None  # the deletion explainer's without `prove` (the pool has its own)
        self._closed = False

    def explain(
        self,
        x: Sequence[float] | np.ndarray,
        kind: str = "contrastive",
        *,
        method: str = "auto",
        traversal: str = DEFAULT_TRAVERSAL,
        prove: bool = True,
    ) -> Explanation | list[Explanation]:
        """`explain(model, x, kind, method=method, traversal=traversal, prove=prove, ...)` with this
        explainer's model and settings: x [n] → one `Explanation`, x [B, n] → a list."""
        if self._closed:
            raise InputError("this Explainer is closed: make a new one")
        _check_arguments(kind, method, prove, traversal)
        given = api_inputs(x)
        single = given.ndim == 1
        X = self.settings.domain.check(np.atleast_2d(given), source="x")
        explainer = _explainer(method, self.net)
        if prove:
            if self._pool is None:
                self._pool = SolverPool(proving_solvers(self.net, self.settings.domain), first_proof=True)
            plan = Plan(method, traversal, self.limit, proofs=self.proofs)
            explanations = _proved(self.net, self.settings, X, kind, plan, self._pool)
        else:
            if self._oracle is None and explainer == "deletion":
                self._oracle = SetOracle()
            explanations = _unproved(self.net, self.settings, X, kind, explainer, traversal, self.limit, self._oracle)
        explanations = [replace(e, x=tuple(map(float, x)), input_shape=self.shape) for e, x in zip(explanations, X, strict=True)]
        return explanations[0] if single else explanations

    def close(self) -> None:
        """End the solvers' processes; the explainer answers no more calls."""
        self._closed = True
        for resource in (self._pool, self._oracle):
            if resource is not None:
                resource.close()
        self._pool = self._oracle = None

    def __enter__(self) -> Explainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_arguments(kind: str, method: str, prove: bool, traversal: str) -> None:
    """One-line errors for a kind, method, traversal or `prove` that `explain` does not take (the
    other arguments: `cardinal.validate.api_arguments` and `api_inputs`)."""
    if not isinstance(prove, bool):
        raise InputError(f"prove: True or False, not {describe(prove)}")
    if kind not in KINDS:
        raise InputError(f"kind {kind!r}: choose contrastive or abductive")
    if method not in METHODS:
        raise InputError(f"method {method!r}: choose one of {', '.join(METHODS)}")
    if method == "minimum" and not prove:
        raise InputError("method 'minimum' is the exact solvers' answer: it needs prove=True")
    if traversal not in TRAVERSALS:
        raise InputError(f"traversal {traversal!r}: choose one of {', '.join(TRAVERSALS)}")


def _network(model: Any, input_shape: Sequence[int] | None) -> tuple[Network, str]:
    """The network of `model` and a name for messages."""
    if isinstance(model, Network):
        return model, "the network"
    if isinstance(model, (str, Path)):
        return Network.load(model, input_shape=input_shape), str(model)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        torch = None
    if torch is not None and isinstance(model, torch.nn.Module):
        return Network.from_torch(model, input_shape), "the torch module"
    raise InputError(f"model: a path, a cardinal.Network or a torch module, not {type(model).__name__}")


def _explainer(method: str, net: Network) -> str | None:
    """The explainer to run (None: the solvers alone)."""
    if method == "minimum":
        return None
    if method == "auto":
        return "greedy" if net.is_sign_monotone else "deletion"
    if method == "greedy" and not net.is_sign_monotone:
        raise InputError("method 'greedy' needs a sign-monotone network (cardinal info says); use 'auto' or 'deletion'")
    return method


def _bar(total: int) -> Any:
    """A progress bar over `total` inputs on a terminal when there are several (its `update`), else None."""
    if total > 1 and sys.stderr.isatty():
        from tqdm import tqdm

        return tqdm(total=total, desc="cardinal.explain", unit="input", file=sys.stderr)
    return None


def _proved(net: Network, settings: Settings, X: np.ndarray, kind: str, plan: Plan, pool: SolverPool) -> list[Explanation]:
    """The pipeline (`pipeline.answered`) on X [B, n] with `pool`'s solvers under `plan`: one
    `Explanation` per row, its record `pipeline.record_of`'s (the line `certify` writes)."""
    out = []
    bar = _bar(len(X))
    try:
        for done in answered(pool, net, settings, X, range(len(X)), kind, plan):
            out.append(_explanation(done, record_of(done, net, settings), plan.proofs))
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return out


def _explanation(done: Answered, record: dict[str, Any], folder: ProofFolder | None) -> Explanation:
    """The `Explanation` of one answer of the pipeline, its record given."""
    judged, answer = done.verdict, done.answer
    features = judged.minimum
    found_by = "minimum"
    if answer is not None and features is not None and features in (answer.features, answer.found):
        found_by = answer.method
    none = proves_none(judged.verdict, judged.certified, judged.minimum)
    upper = None if features is None else len(features)
    lower = upper if judged.minimum_proved else judged.minimum_lower
    proof, reason = _proof(done.written, folder)
    return Explanation(
        done.kind, judged.prediction, features, found_by, judged.minimum_proved or none, lower, upper,
        judged.verdict.value, none, judged.minimum_witness, proof, reason, dict(done.timings), record,
    )


def _proof(written: Written | None, folder: ProofFolder | None) -> tuple[Proof | None, str]:
    """The `Proof` of a certificate the pipeline made (written into `folder`'s folder, or held in
    memory), or None and why there is none."""
    if written is None:
        return None, "no certificate asked for"
    entry = written.entry
    if written.text is None:
        return None, entry["reason"]
    path = None if folder is None or folder.folder is None else folder.folder / entry["file"]
    return Proof(entry["claim"], bool(entry["accepted"]), written.text, path, entry["sha256"], entry["problem"], dict(entry)), ""


def _unproved(net: Network, settings: Any, X: np.ndarray, kind: str, explainer: str | None, traversal: str,
              limit: float, oracle: SetOracle | None) -> list[Explanation]:
    """The explainer alone on X [B, n], as `cardinal explain` runs it (`explaining.explain_lines`;
    deletion's questions asked of `oracle`): each answer checked exactly, no minimality proof."""
    import time

    started = time.perf_counter()
    lines = explain_lines(net, settings, X, range(len(X)), (kind,), ExplainOptions(explainer, traversal, limit), oracle)
    seconds = (time.perf_counter() - started) / max(1, len(X))
    out = []
    for line in lines:
        features = None if line["features"] is None else tuple(line["features"])
        witness = tuple(line["witness"]) if "witness" in line else None
        size = None if features is None else len(features)
        out.append(Explanation(
            kind, line["prediction"], features, line["method"], False, None, size, None, line["exists"] is False, witness, None,
            "prove=False", {"explain": seconds}, line,
        ))
    return out

"""The one front over every exact backend: the `Solver` protocol, making a backend by its name in
the registry (`solvers.registry`), the exact replay, and `solve_minimum` (the problem and outcome
types live in `cardinal.problem`).

A backend answers "what is a minimum explanation?" or, with `at_most=k`, "is there one of size
≤ k?". Whatever it claims about a concrete set or witness is replayed in exact arithmetic here
before it is returned (by one exact evaluation, or by the exact set oracle, `solvers.oracle`); a
claim the replay refutes comes back as `Status.REFUTED`, never silently corrected. A timeout or a
licence limit is never read as "no smaller explanation".
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import numpy as np

from cardinal.domain import Domain
from cardinal.errors import BackendUnavailable, InputError, interrupted_import
from cardinal.greedy import explain
from cardinal.network import Network
from cardinal.problem import DEFAULT_EPSILON, DEFAULT_TIME_LIMIT, Outcome, Problem, Status
from cardinal.validate import output_directory, output_file

from .guard import GuardedSolver, lent
from .oracle import SetOracle, check_witness
from .proof import make, write_certificate
from .registry import BACKENDS, Backend, enumerate_first
from .registry import BENCHMARK_ONLY as BENCHMARK_ONLY  # re-exported: callers import it from here
from .registry import SOLVER_NAMES as SOLVER_NAMES


class Solver(Protocol):
    """What every backend provides. Backends are context managers that free their resources."""

    name: str
    exact: bool

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> Outcome: ...

    def close(self) -> None: ...

    def __enter__(self) -> Solver: ...

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None: ...


class BaseSolver:
    """Context-manager plumbing shared by the backends."""

    name = "base"
    exact = False
    supply = True  # the hitting-set loop's own exact contrastive sets (`hitting.Supply`); False: the oracle's alone

    def close(self) -> None:
        """Free solver resources (environments, models); the default holds none."""

    def __enter__(self) -> BaseSolver:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()

    def outcome(self, status: Status, started: float, **fields: Any) -> Outcome:
        """An Outcome stamped with this backend's name, exactness and the seconds since `started`.
        A `lower` bound is kept only from an exact backend (`Outcome.lower`)."""
        if not self.exact:
            fields.pop("lower", None)
        return Outcome(status, self.name, time.perf_counter() - started, exact=self.exact, **fields)

    def unmoved(self, problem: Problem, started: float) -> Outcome | None:
        """On a network with the monotone shortcut where p(x') = p(x) exactly: no CXp exists, and
        the empty set is the minimum AXp. None otherwise (p(x') differs, or is undecided)."""
        if problem.flips(problem.counterpoint) is not False:
            return None
        if problem.kind == "contrastive":
            return self.outcome(Status.NONE_EXISTS, started, message="monotone shortcut: p(x') = p(x)")
        return self.outcome(Status.OPTIMAL, started, solution=(), message="monotone shortcut: p(x') = p(x)")


AUTO = "auto"  # `solve_minimum`'s default: the exact backend that suits the problem (`auto_solver`)
LARGE_MINIMUM = 48  # from a greedy answer this large on, the exact MILP may go before z3's lazy strategy (`auto_solver`)
WIDE_FEATURES = 128  # beyond this many features it does so whatever the goal (`auto_solver`)


def get_solver(name: str, guarded: bool = False, **options: Any) -> Solver:
    """A fresh backend by name; raises `InputError` for an unknown backend, `BackendUnavailable`
    for one whose library is not installed (naming the `pip install` that adds it).

    `guarded`: run it in a child process that is killed when a call overruns its time limit
    (`solvers.guard`): what certify and crosscheck use, so that every limit holds.
    `vnncomp:TOOLDIR`: a VNN-COMP tool (`solvers.vnncomp`), its folder and scripts checked here.
    """
    if name.startswith("vnncomp:"):  # by name, as every backend: the backends import this module
        vnncomp = importlib.import_module(f"{__package__}.vnncomp")
        vnncomp.tool_folder(name)
        factory = vnncomp.VnncompSolver
        return GuardedSolver(name, factory, {"name": name, **options}) if guarded else factory(name, **options)
    entry = check_name(name)
    try:
        module = importlib.import_module(entry.module)
    except ImportError as error:
        interrupted_import(error)
        hint = f"pip install 'cardinal[{entry.extra}]'" if entry.extra else "reinstall cardinal"
        raise BackendUnavailable(f"solver {name!r} is not installed ({error.name} missing): {hint}") from None
    factory = getattr(module, entry.factory)
    return GuardedSolver(name, factory, options) if guarded else factory(**options)


def check_name(name: str) -> Backend:
    """The registry's entry for a backend name; raises `InputError` for an unknown one."""
    entry = BACKENDS.get(name)
    if entry is None:
        raise InputError(f"unknown solver {name!r} (known: {', '.join(BACKENDS)})")
    return entry


def available_solvers(exact: bool | None = None) -> tuple[str, ...]:
    """Names of the backends whose libraries import here (`exact`: only those whose "nothing
    smaller" is a proof, or only the others, as the registry declares: the others are not imported)."""
    found = []
    for name, entry in BACKENDS.items():
        if exact is not None and entry.exact != exact:
            continue
        try:
            backend = get_solver(name)
        except BackendUnavailable:
            continue
        backend.close()
        if exact is None or backend.exact == exact:
            found.append(name)
    return tuple(found)


def auto_solver(problem: Problem, answer_size: int | None = None) -> str:
    """The exact backend that suits the problem best among those installed, each considered only
    where the registry declares it handles the problem (`Backend.handles`): enumerate where it is
    tiny (`Backend.auto_features`); on other monotone networks z3's lazy strategy, unless the
    network is piecewise linear, the explanation has `LARGE_MINIMUM` features or more, and either
    valid means f ≤ t (goal 0: z3's branch and bound tries its root only, and its SAT loop grows
    with the minimum's size) or the network has more than `WIDE_FEATURES` features: there the
    exact MILP decides what z3's loop leaves open, while z3 stays the faster one on monotone
    networks of at most that many features where valid means f > t (the runs behind this choice:
    docs/results.md, "Measurements formerly in docstrings"). Then the exact MILP on other
    piecewise-linear networks, K ≥ 2 classes included (z3's full encoding without it); z3 on other
    smooth ones. What applies to nothing installed falls back to enumerate. Where none of them
    declares it handles the problem (a smooth network without the monotone shortcut), enumerate on
    a binary box, else z3 (which answers `unsupported`, saying why).

    `answer_size`: the size of an explanation the caller already has (certify: its explainer's
    answer; n where none exists); None: greedy runs here, once, where the choice depends on it."""
    if enumerate_first(problem.net, problem.domain):
        preferred: tuple[str, ...] = ("enumerate",)
    elif (
        problem.monotone
        and problem.net.is_piecewise_linear
        and (problem.goal == 0 or problem.n > WIDE_FEATURES)
        and _large_minimum(problem, answer_size)
    ):
        preferred = ("exact-milp", "z3")
    elif problem.monotone:
        preferred = ("z3", "exact-milp")
    else:
        preferred = ("exact-milp", "z3")
    handled = [name for name in preferred if BACKENDS[name].handles(problem.net, problem.domain, problem.kind)]
    if not handled:  # none declares it can (a smooth non-monotone network): enumerate where it can, else z3 says why not
        handled = ["enumerate"] if BACKENDS["enumerate"].handles(problem.net, problem.domain) else ["z3"]
    return next((name for name in handled if _installed_exact(name)), "enumerate")


def _installed_exact(name: str) -> bool:
    """Whether the backend imports here and proves its "nothing smaller" (as `available_solvers`
    finds, without importing the others: a backend's import can cost a first call more than its
    answer; docs/results.md)."""
    if not BACKENDS[name].exact:
        return False
    try:
        backend = get_solver(name)
    except BackendUnavailable:
        return False
    backend.close()
    return backend.exact


def _large_minimum(problem: Problem, answer_size: int | None) -> bool:
    """Whether the explanation known (`answer_size`, else greedy's, run only where the network has
    `LARGE_MINIMUM` features or more: a cost of its own beside z3's quick answers on small
    networks) has `LARGE_MINIMUM` features or more."""
    if problem.n < LARGE_MINIMUM:
        return False
    return (answer_size if answer_size is not None else _greedy_size(problem)) >= LARGE_MINIMUM


def _greedy_size(problem: Problem) -> int:
    """The size of greedy's answer (floats: it only picks a backend), n when there is none."""
    result = explain(problem.net, problem.x[None, :], problem.kind, problem.domain, problem.threshold, device="cpu", verify=False)
    return int(result.sizes[0]) if bool(result.exists[0]) else problem.n


def replay(
    problem: Problem, outcome: Outcome, time_limit: float = DEFAULT_TIME_LIMIT, oracle: SetOracle | None = None
) -> Outcome:
    """Re-check in exact arithmetic what the outcome claims about concrete sets and points.

    - A set on a monotone network: the monotone shortcut.
    - A contrastive set on another network: its witness. When the witness fails, the exact set
      oracle (`solvers.oracle`, free = the set) decides the set: a flip → the claim stands, with
      the oracle's point as its witness and the failed one noted; none → REFUTED; undecided →
      UNCONFIRMED (`Outcome.unconfirmed`).
    - An abductive set on another network: the oracle, free = the features outside the set (none
      → replayed; a flip → REFUTED, the point kept as `witness`; undecided → not replayed).
    - NONE_EXISTS: for an AXp REFUTED (the full set is one); on a monotone network p(x') = p(x);
      otherwise the oracle, free = every feature.

    A failed check turns the outcome into REFUTED (`Outcome.refuted`: the claim kept in `claimed`,
    the reason in `message`); a claim no check decided keeps `replayed` false, with a note. Lower
    bounds (OPTIMAL's minimality, NONE_WITHIN) cannot be replayed; `Outcome.exact` says whether
    an exact backend made them. Each oracle question gets `time_limit` seconds of its own (the
    call's limit when `solve_problem` asks); `oracle` None: a fresh one for this call.
    """
    if oracle is None:
        with SetOracle() as own:
            return replay(problem, outcome, time_limit, own)
    if outcome.status == Status.NONE_EXISTS:
        return _replay_none_exists(problem, outcome, time_limit, oracle)
    if outcome.solution is None:
        return outcome
    features = outcome.solution
    if outcome.status in (Status.FEASIBLE, Status.OPTIMAL) and problem.kind == "contrastive" and not features:
        return replace(outcome.refuted("an empty set is never a contrastive explanation"), replayed=True)
    if problem.monotone:
        valid = problem.is_explanation(features)
        if valid is None:
            return outcome.noted("exact replay undecided (smooth margin)")
        if not valid:
            return replace(outcome.refuted(f"exact check: {set(features)} is not a {problem.kind} explanation"), replayed=True)
        return replace(outcome, replayed=True)
    if problem.kind == "contrastive":
        return _replay_contrastive(problem, outcome, time_limit, oracle)
    flip = oracle.flip(problem, frozenset(range(problem.n)) - set(features), time_limit)
    if flip.answer is None:
        return replace(outcome, replayed=False).noted(f"exact replay undecided: {flip.note}")
    if flip.answer:
        reason = f"exact check ({flip.note}): the witness agrees with x on {_shown(features)} and flips the prediction"
        return replace(outcome.refuted(reason), witness=flip.witness, replayed=True)
    return replace(outcome, replayed=True)


def _replay_contrastive(problem: Problem, outcome: Outcome, time_limit: float, oracle: SetOracle) -> Outcome:
    """A contrastive set on a non-monotone network: its witness, else the exact set oracle."""
    features = frozenset(outcome.features)
    valid, reason = check_witness(problem, features, outcome.witness)
    if valid:
        return replace(outcome, replayed=True)
    flip = oracle.flip(problem, features, time_limit)
    if flip.answer:
        note = f"its witness {reason}; an exact check ({flip.note}) found a point that flips, now its witness"
        return replace(outcome, witness=flip.witness, replayed=True).noted(note)
    if flip.answer is False:
        reason = f"exact check ({flip.note}): no y that agrees with x outside {_shown(features)} flips the prediction"
        return replace(outcome.refuted(reason), replayed=True)
    if valid is None:
        return outcome.noted(f"exact replay undecided: the witness {reason}; {flip.note}")
    return outcome.unconfirmed(f"its witness {reason}, and no exact check decided the set ({flip.note})")


def _replay_none_exists(problem: Problem, outcome: Outcome, time_limit: float, oracle: SetOracle) -> Outcome:
    if problem.kind == "abductive":
        return replace(outcome.refuted("the full feature set is always an AXp"), replayed=True)
    if problem.monotone:
        flips = problem.flips(problem.counterpoint)
        if flips is None:
            return outcome
        if flips:
            return replace(outcome.refuted("exact check: x' flips the prediction, so a CXp exists"), replayed=True)
        return replace(outcome, replayed=True)
    flip = oracle.flip(problem, frozenset(range(problem.n)), time_limit)
    if flip.answer is None:
        return outcome.noted(f"exact replay undecided: {flip.note}")
    if flip.answer:
        reason = f"exact check ({flip.note}): the witness flips the prediction, so a CXp exists"
        return replace(outcome.refuted(reason), witness=flip.witness, replayed=True)
    return replace(outcome, replayed=True)


def _shown(features: Iterable[int]) -> str:
    return "{" + ", ".join(map(str, sorted(features))) + "}"


def solve_minimum(
    net: Network,
    x: np.ndarray,
    kind: str = "contrastive",
    domain: Domain | None = None,
    threshold: float | None = None,
    solver: str = AUTO,
    time_limit: float = DEFAULT_TIME_LIMIT,
    at_most: int | None = None,
    epsilon: float = DEFAULT_EPSILON,
    guarded: bool = True,
    proof: str | Path | None = None,
    supply: bool = True,
) -> Outcome:
    """A minimum explanation of `kind` for x [n] by the named backend (`auto`: `auto_solver`'s
    choice for the problem), replayed exactly.

    With `at_most=k` only "is there one of size ≤ k?" is asked: certifying a greedy answer of
    size g is one call with k = g − 1 (NONE_WITHIN means greedy is minimal). `guarded`: the call
    runs in a child process stopped at the time limit plus `solvers.guard.allowed_overrun`, so
    the limit holds whatever the backend does (the process of an earlier guarded call on the
    same backend serves it, `solvers.guard.lent`); False runs it in this process. Either way the
    answer is replayed (`replay`), and the exact set oracle's questions, limited to `time_limit`
    each, always run guarded (`solvers.oracle`).

    `proof`: a file (`….json`) or a folder for the certificate (`solvers.proof`, docs/proofs.md)
    of the answer's exact "nothing smaller" — an exact backend's NONE_WITHIN (k = `at_most`),
    OPTIMAL (k = its size − 1), NONE_EXISTS (no CXp) — made within `time_limit` more seconds; in a
    folder it is named by kind, network and input (`certificate_file`), and the network goes
    beside it (`networks/SHA256.json`). The outcome's message says where it went, or why there is
    none.

    `supply`: False turns off the implicit hitting-set loop's own exact contrastive sets
    (`hitting.Supply`, `BaseSolver.supply`), so that a non-monotone AXp rests on the backend's
    flip answers alone (tests of what a backend says by itself); with `guarded=False` only.

    Raises `InputError` for bad input, and `cardinal.errors.UndecidedPrediction` (not an
    `InputError`: x is valid) when exact arithmetic cannot decide p(x) — a smooth network whose
    enclosure of f(x) contains the threshold, as where f(x) may equal it exactly — so that no
    explanation of either class can be asked for.
    """
    problem = Problem.make(net, x, kind, domain, threshold, epsilon)
    if solver == AUTO:
        solver = auto_solver(problem)
    if at_most is not None and at_most < 0:
        raise InputError(f"at_most must be ≥ 0, got {at_most}")
    if not time_limit > 0:
        raise InputError(f"time limit must be positive, got {time_limit}")
    if not supply and guarded:
        raise InputError("supply=False needs guarded=False (the backend runs in this process)")
    if proof is not None:
        proof = output_file(proof, "proof") if str(proof).endswith(".json") else output_directory(proof, "proof")
    with lent("oracle", SetOracle) as oracle:  # kept with its engines' processes for the next call
        if not guarded:
            with get_solver(solver) as backend:
                backend.supply = supply
                outcome = solve_problem(backend, problem, at_most, time_limit, oracle)
        else:
            with lent(solver, lambda: get_solver(solver, guarded=True)) as backend:  # an earlier call's started process
                outcome = solve_problem(backend, problem, at_most, time_limit, oracle)
    return outcome if proof is None else _with_certificate(problem, outcome, at_most, proof, time_limit)


def exact_claim(problem: Problem, outcome: Outcome, at_most: int | None) -> int | None:
    """k of the outcome's exact "nothing smaller" ("no explanation within k"; n: no CXp), or None
    (`Outcome.proves`; "no AXp exists" is never a claim to certify)."""
    proved = outcome.proves(problem.n, at_most)
    if proved.none_exists and problem.kind != "contrastive":
        return None
    return proved.within(problem.n)


def _with_certificate(problem: Problem, outcome: Outcome, at_most: int | None, proof: Path, time_limit: float) -> Outcome:
    """The outcome, its exact claim certified into `proof` (`solve_minimum`) and noted: the
    certificate made and checked by the independent checker as every driver's are
    (`solvers.proof.make`), written into the file `proof`, or into the folder `proof` under a
    name that holds its kind, network and SHA-256 (`certificate_name`)."""
    k = exact_claim(problem, outcome, at_most)
    if k is None:
        return outcome.noted("no certificate: no exact 'nothing smaller' claim")
    written = make(problem, k, "", f"{problem.kind}-{problem.net.hash}", time_limit, outcomes={outcome.solver: outcome})
    if written.text is None:
        return outcome.noted(written.entry["reason"])
    path = proof if proof.suffix == ".json" else proof / written.entry["file"]
    write_certificate(written.text, path, problem.net, root=None if proof.suffix == ".json" else proof)
    if not written.entry["accepted"]:
        return outcome.noted(f"certificate: {path}, rejected by the checker: {written.entry['message']}")
    return outcome.noted(f"certificate: {path}, accepted by the checker")


def solve_problem(
    backend: Solver, problem: Problem, at_most: int | None, time_limit: float, oracle: SetOracle | None = None
) -> Outcome:
    """Run an open backend on a problem and replay its answer (`replay`, with `oracle`, its
    questions limited to `time_limit` each); backend crashes become ERROR."""
    started = time.perf_counter()
    try:
        outcome = backend.solve(problem, at_most, time_limit)
    except (InputError, KeyboardInterrupt):
        raise
    except Exception as error:  # a backend failure is a result to log, not a crash of the campaign
        return Outcome(
            Status.ERROR,
            backend.name,
            time.perf_counter() - started,
            exact=backend.exact,
            message=f"{type(error).__name__}: {error}",
        )
    return replay(problem, outcome, time_limit, oracle)

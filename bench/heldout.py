"""The held-out query mix of `bench/solvers.py`: explanation questions as a user asks them, beside
certify's "≤ g − 1?".

**Queries.** Per family — monotone or not (signed weights), 28 or 64 features, ReLU 32 × 32
(`verify.generate.random_network`, seeded) — `networks` networks and `inputs` inputs uniform in
[0, 1]^n. Each input gets a corner: the upper one for even rows, the lower one for odd rows; and
three thresholds 50%, 80% and 95% of the way from f(x) to f at that corner (on a monotone network
the corner is then the counterpoint x', and p(x) = 0 at the upper corner, 1 at the lower; an input
with f(x) = f(corner) is skipped). At each threshold: the minimum CXp and the minimum AXp from
scratch, and on monotone networks certify's question for each kind, "an explanation of size ≤
g − 1?" with g greedy's size (none where g = 0 or no CXp exists).

**Calls.** Every backend as a user calls it: `solve_minimum` with its defaults (guarded, the
answer replayed exactly), timed from the call to its return; enumerate only up to 20 features.
Untimed calls first start each backend's solver process and the replay's oracle (`warm_up`), as
a user's earlier calls would have.
The gurobi-ml peer (`bench.solvers.Peer`, unguarded, its replay included) on the same queries,
except AXps of non-monotone networks (no single MILP of its form).

**Scoring.** A call *solves* its query when its answer stands: a replayed set (optimal for a
minimum; optimal or feasible within the bound for certify's question), none_within, or
none_exists — and no exact evidence contradicts it (`wrong`: a refuted set, a float "nothing
smaller" below a set replayed by any call, a float none-exists where a set was replayed; exact
evidence that conflicts stops the run). PAR-2: the mean time per query with every unsolved one
at twice the time limit. The virtual best solver (VBS) takes, per query, the fastest call among
cardinal's backends that solved it (the peer apart).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
from cardinal.solvers.base import solve_minimum
from cardinal.solvers.guard import STARTUP_WAIT
from cardinal.verify.generate import random_network

from cardinal.domain import Domain
from cardinal.greedy import explain
from cardinal.network import Network
from cardinal.problem import KINDS, Outcome, Problem, Status

if TYPE_CHECKING:
    from bench.solvers import Peer

HIDDEN = (32, 32)
FAMILIES = {f"{'monotone' if monotone else 'signed'}-{n}": (monotone, n) for monotone in (True, False) for n in (28, 64)}
ALPHAS = (0.5, 0.8, 0.95)
MAX_FEATURES = {"enumerate": 20}
VBS = "VBS"
QUERIES = ("cxp", "axp", "certify-cxp", "certify-axp")
Call = tuple[float, str, bool]  # (seconds, status, wrong); a set's status gets "-unreplayed" where the replay did not confirm it


@dataclass(frozen=True)
class Label:
    """What the tables need of a query: its family, its question (`QUERIES`) and α."""

    family: str
    query: str
    alpha: float


@dataclass(frozen=True, eq=False)
class Query:
    """One question (`label.query`: "cxp", "axp" — the minimum from scratch — or "certify-cxp",
    "certify-axp" — size ≤ `at_most`)."""

    label: Label
    net: Network
    x: np.ndarray
    kind: str
    threshold: float
    at_most: int | None = None


def queries(family: str, networks: int, inputs: int) -> list[Query]:
    """The family's queries (module docstring), reproducible from its seeds."""
    monotone, n = FAMILIES[family]
    found = []
    for index in range(networks):
        rng = np.random.default_rng([n, int(monotone), index, 30])
        net = random_network(rng, n, HIDDEN, "relu", monotone=monotone)
        X = rng.random((inputs, n))
        for row, x in enumerate(X):
            corner = np.ones(n) if row % 2 == 0 else np.zeros(n)
            fx, fc = (float(net.forward(point)) for point in (x, corner))
            if fx == fc:
                continue
            for alpha in ALPHAS:
                threshold = fx + alpha * (fc - fx)
                for kind in KINDS:
                    short = "cxp" if kind == "contrastive" else "axp"
                    found.append(Query(Label(family, short, alpha), net, x, kind, threshold))
                    if monotone:
                        greedy = explain(net, x[None, :], kind, Domain.unit(n), threshold, device="cpu", verify=True).features(0)
                        if greedy:
                            found.append(
                                Query(Label(family, f"certify-{short}", alpha), net, x, kind, threshold, len(greedy) - 1)
                            )
    return found


def run(mix: Sequence[Query], solvers: Sequence[str], peer: Peer | None, time_limit: float) -> list[dict[str, Call]]:
    """Per query, backend → (seconds, status, wrong) (the peer under its name, when given); one
    line per query on stdout."""
    from bench.solvers import PEER, peer_model

    warm_up(solvers, peer)
    results: list[dict[str, Call]] = []
    models: dict[int, object] = {}
    for number, query in enumerate(mix):
        outcomes: dict[str, Outcome] = {}
        for name in solvers:
            if query.net.n_inputs > MAX_FEATURES.get(name, query.net.n_inputs):
                continue
            started = time.perf_counter()
            outcome = solve_minimum(
                query.net,
                query.x,
                query.kind,
                threshold=query.threshold,
                solver=name,
                time_limit=time_limit,
                at_most=query.at_most,
            )
            outcomes[name] = replace(outcome, seconds=time.perf_counter() - started)
        if peer is not None:
            if id(query.net) not in models:
                models[id(query.net)] = peer_model(query.net)
            model = models[id(query.net)]
            problem = Problem.make(query.net, query.x, query.kind, Domain.unit(query.net.n_inputs), query.threshold)
            answer = peer.solve(model, problem, query.at_most, time_limit)
            if answer.status != Status.UNSUPPORTED:
                outcomes[PEER] = answer
        results.append(judge(query.label, outcomes, time_limit))
        calls = ", ".join(f"{name} {status} {seconds * 1e3:.0f} ms" for name, (seconds, status, _) in results[-1].items())
        label = query.label
        print(f"[{number + 1}/{len(mix)}] {label.family} {label.query} α={label.alpha}: {calls}", flush=True)
    return results


def warm_up(solvers: Sequence[str], peer: Peer | None) -> None:
    """Untimed calls that start what the timed ones reuse: each backend's solver process (the
    limit of a call counts its start), the replay's exact set oracle and its engines (a
    non-monotone AXp asks it), Gurobi's environment for the peer."""
    from bench.guard import trivial
    from bench.solvers import peer_model

    net, x, threshold = trivial()[0]
    signed = random_network(np.random.default_rng(0), 4, (3,), "relu", monotone=False)
    for name in solvers:
        solve_minimum(net, x, threshold=threshold, solver=name, time_limit=STARTUP_WAIT)
    for name in solvers[:1]:
        solve_minimum(signed, np.full(4, 0.5), "abductive", threshold=float(signed.forward(np.full(4, 0.5))), solver=name)
    if peer is not None:
        problem = Problem.make(net, x, "contrastive", Domain.unit(net.n_inputs), threshold)
        peer.solve(peer_model(net), problem, None, STARTUP_WAIT)


def judge(label: Label, outcomes: dict[str, Outcome], time_limit: float) -> dict[str, Call]:
    """(seconds, status, wrong) per backend (module docstring, *Scoring*); exits on conflicting
    exact evidence."""
    sets = [o.size for o in outcomes.values() if o.replayed and o.status in (Status.OPTIMAL, Status.FEASIBLE)]
    smallest = min(sets) if sets else None
    for name, outcome in outcomes.items():
        if outcome.exact and _contradicted(outcome, smallest):
            sys.exit(f"exact evidence conflicts on {label}: {name} {outcome}, a set of {smallest} replayed")
    calls = {}
    for name, outcome in outcomes.items():
        wrong = outcome.status == Status.REFUTED or _contradicted(outcome, smallest)
        seconds = min(outcome.seconds, time_limit) if outcome.status == Status.TIMEOUT else outcome.seconds
        unreplayed = outcome.has_solution and not outcome.replayed
        calls[name] = (seconds, outcome.status.value + ("-unreplayed" if unreplayed else ""), wrong)
    return calls


def _contradicted(outcome: Outcome, smallest: int | None) -> bool:
    """Whether a replayed set of size `smallest` contradicts the outcome's "nothing smaller"."""
    if smallest is None:
        return False
    if outcome.status in (Status.NONE_WITHIN, Status.NONE_EXISTS):
        return True  # NONE_WITHIN's bound is the query's, and every replayed set lies within it
    return outcome.status == Status.OPTIMAL and outcome.solution is not None and len(outcome.solution) > smallest


def solved(call: Call, query: str) -> bool:
    """Whether the call answered its query (module docstring, *Scoring*)."""
    _, status, wrong = call
    answers = ("optimal", "none_exists") if query in ("cxp", "axp") else ("optimal", "feasible", "none_within", "none_exists")
    return status in answers and not wrong


def virtual_best(
    results: Sequence[dict[str, Call]], labels: Sequence[Label], backends: set[str], time_limit: float
) -> list[Call]:
    """Per query, the fastest solving call among `backends` (or an unsolved one at the limit)."""
    best = []
    for label, calls in zip(labels, results, strict=True):
        times = [call[0] for name, call in calls.items() if name in backends and solved(call, label.query)]
        best.append((min(times), "optimal", False) if times else (time_limit, "timeout", False))
    return best


def table(results: Sequence[dict[str, Call]], labels: Sequence[Label], time_limit: float, peer_name: str) -> list[list]:
    """Rows per family and query (then "all" its queries), one per backend, the peer last, then
    the VBS."""
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for index, label in enumerate(labels):
        groups[label.family, label.query].append(index)
        groups[label.family, "all"].append(index)
    order = {query: position for position, query in enumerate((*QUERIES, "all"))}
    rows = []
    for family, query in sorted(groups, key=lambda key: (list(FAMILIES).index(key[0]), order[key[1]])):
        indices = groups[family, query]
        names = sorted({name for i in indices for name in results[i]}, key=lambda name: (name == peer_name, name))
        for name in names:
            rows.append(
                _row(
                    family, query, name, [(results[i][name], labels[i].query) for i in indices if name in results[i]], time_limit
                )
            )
        chosen = [labels[i] for i in indices]
        vbs = virtual_best([results[i] for i in indices], chosen, set(names) - {peer_name}, time_limit)
        rows.append(_row(family, query, VBS, list(zip(vbs, [label.query for label in chosen], strict=True)), time_limit))
    return rows


def _row(family: str, query: str, name: str, calls: list[tuple[Call, str]], time_limit: float) -> list:
    done = sum(solved(call, kind) for call, kind in calls)
    times = [call[0] if solved(call, kind) else time_limit for call, kind in calls]
    penalised = statistics.fmean(call[0] if solved(call, kind) else 2 * time_limit for call, kind in calls)
    return [
        family, query, name, len(calls), done, f"{penalised:.3f}", f"{statistics.median(times) * 1e3:.1f}",
        sum(call[2] for call, _ in calls),
    ]  # fmt: skip


HEADERS = ["family", "query", "solver", "calls", "solved", "PAR-2 s", "median ms", "wrong"]


def front_door(results: Sequence[dict[str, Call]], labels: Sequence[Label], peer_name: str) -> list[list]:
    """Issue 30's front door: the minimum CXp at α = 0.8 on monotone-28, the median per backend
    and the peer's median over it (> 1: faster than the peer)."""
    picked = [r for r, label in zip(results, labels, strict=True) if label == Label("monotone-28", "cxp", 0.8)]
    medians = {}
    for name in sorted({name for r in picked for name in r}):
        medians[name] = statistics.median(r[name][0] for r in picked if name in r)
    peer = medians.get(peer_name)
    return [
        [name, len([r for r in picked if name in r]), f"{median * 1e3:.1f}", f"{peer / median:.2f}" if peer else "–"]
        for name, median in medians.items()
    ]

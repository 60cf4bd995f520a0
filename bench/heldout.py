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
The gurobi-ml peer (`bench.peer.Peer`, unguarded, its replay included) on the same queries,
except AXps of non-monotone networks (no single MILP of its form).

**Scoring.** A call *solves* its query when its answer stands: a replayed set (optimal for a
minimum; optimal or feasible within the bound for certify's question), none_within, or
none_exists — and no exact evidence contradicts it (`wrong`: a refuted set, a float "nothing
smaller" below a set replayed by any call, a float none-exists where a set was replayed; exact
evidence that conflicts stops the run). PAR-2: the mean time per query with every unsolved one
at twice the time limit. The virtual best solver (VBS) takes, per query, the fastest call among
cardinal's backends that solved it (the peer apart).

**A mix drawn from a seed** (`python -m bench.heldout --seed S`, `draw`, `front_door_run`): the
front door as a user meets it — `cardinal.solve_minimum` with every default (`auto`, guarded,
replayed) against the peer on the same queries, in the same run, one call after the other. Per
mix (`MIXES`: the minimum CXp or AXp from scratch × monotone or signed × 28 or 64 features)
`--networks` networks and `--inputs` inputs each, all drawn from the seed: the network
(`random_network`), x uniform in [0, 1]^n, the corner (upper or lower, a coin) and α uniform in
[`ALPHA_RANGE`] — the threshold α of the way from f(x) to f at the corner (an input with f(x) =
f(corner) is redrawn). Inside the timed loop `agree` asserts the answers: cardinal's must stand
(a replayed set or an exact none_exists; neither refuted) and, where both calls prove an answer
(a replayed optimum, none_exists), both have the same size — any disagreement stops the run.
Per mix: calls answered, the median seconds of each (a call that answers nothing counts at the
limit), and the peer's median over cardinal's (above 1: cardinal faster), written with the
machine, the commit and the load (`uptime`) to `--out`:

    python -m bench.heldout --seed S [--networks 3] [--inputs 3] [--time-limit 2] [--mixes cxp-monotone-28,...]
                            [--out bench/results/heldout.md]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
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
    from bench.peer import Peer

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
    from bench.peer import PEER, peer_model

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
    from bench.peer import peer_model

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


# ---------------------------------------------------------------------------- a mix drawn from a seed
SHORT = {"contrastive": "cxp", "abductive": "axp"}
MIXES = {f"{SHORT[kind]}-{family}": (kind, family) for kind in KINDS for family in FAMILIES}
ALPHA_RANGE = (0.5, 0.95)
AUTO_PICKS = ("exact-milp", "z3", "enumerate")  # what `auto` may pick here: a user's earlier calls started each
HEADERS_SEEDED = [
    "mix",
    "queries",
    "cardinal answered",
    "peer answered",
    "cardinal median ms",
    "peer median ms",
    "peer / cardinal",
]


class Disagreement(AssertionError):
    """Two answers to one query that cannot both stand (`agree`)."""


def draw(seed: int, mix: str, networks: int, inputs: int) -> list[Query]:
    """`networks` × `inputs` queries of the mix (`MIXES`), reproducible from (seed, mix): networks,
    inputs, corners and α all drawn from one generator (module docstring)."""
    kind, family = MIXES[mix]
    monotone, n = FAMILIES[family]
    rng = np.random.default_rng([seed, list(MIXES).index(mix)])
    found = []
    for _ in range(networks):
        net = random_network(rng, n, HIDDEN, "relu", monotone=monotone)
        drawn = 0
        for _ in range(100 * inputs):  # a network constant on the box would have no threshold between
            if drawn == inputs:
                break
            x = rng.random(n)
            corner = np.full(n, float(rng.integers(2)))
            alpha = float(rng.uniform(*ALPHA_RANGE))
            fx, fc = (float(net.forward(point)) for point in (x, corner))
            if fx != fc:
                found.append(Query(Label(family, SHORT[kind], alpha), net, x, kind, fx + alpha * (fc - fx)))
                drawn += 1
    return found


def agree(query: Query, cardinal: Outcome, peer: Outcome | None) -> None:
    """Raise `Disagreement` unless cardinal's answer stands (a replayed set — exact where it is
    optimal — or none_exists; never refuted) and, where the peer proves an answer too (a replayed
    optimum or a replayed none_exists), both have the same size."""
    where = f"{query.label} threshold={query.threshold!r}"
    if cardinal.status == Status.REFUTED or (peer is not None and peer.status == Status.OPTIMAL and not peer.has_solution):
        raise Disagreement(f"{where}: an answer without a standing set: cardinal {cardinal}, peer {peer}")
    if cardinal.status == Status.OPTIMAL and not (cardinal.replayed and cardinal.exact):
        raise Disagreement(f"{where}: cardinal's optimum is not replayed and exact: {cardinal}")
    if peer is None:
        return
    sizes = []
    for outcome in (cardinal, peer):
        if outcome.status == Status.OPTIMAL and outcome.replayed:
            sizes.append(outcome.size)
        elif outcome.status == Status.NONE_EXISTS and (outcome.exact or outcome.replayed):
            sizes.append(None)
    if len(sizes) == 2 and sizes[0] != sizes[1]:
        raise Disagreement(f"{where}: cardinal {_said(cardinal)}, peer {_said(peer)}")
    smallest = peer.size if peer.replayed and peer.status in (Status.OPTIMAL, Status.FEASIBLE) else None
    if smallest is not None and cardinal.status == Status.OPTIMAL and cardinal.size > smallest:
        raise Disagreement(f"{where}: cardinal's exact optimum {cardinal.size} above the peer's replayed set of {smallest}")


def _said(outcome: Outcome) -> str:
    return f"{outcome.status.value}" + (f" of size {outcome.size}" if outcome.has_solution else "")


def answered(outcome: Outcome) -> bool:
    """Whether the call answered its query: a replayed optimum or none_exists, unrefuted."""
    if outcome.status == Status.NONE_EXISTS:
        return outcome.replayed or outcome.exact
    return outcome.status == Status.OPTIMAL and outcome.replayed


def front_door_run(mix: Sequence[Query], peer: Peer | None, time_limit: float) -> list[tuple[float, float | None]]:
    """Per query (cardinal's seconds, the peer's or None where it has no MILP for it), each call
    timed from the call to its return, `agree` asserted on every pair; unanswered calls at the limit."""
    from bench.peer import peer_model

    models: dict[int, object] = {}
    times = []
    for query in mix:
        started = time.perf_counter()
        ours = solve_minimum(query.net, query.x, query.kind, threshold=query.threshold, time_limit=time_limit)
        seconds = time.perf_counter() - started
        theirs, peer_seconds = None, None
        if peer is not None:
            models.setdefault(id(query.net), peer_model(query.net))
            problem = Problem.make(query.net, query.x, query.kind, Domain.unit(query.net.n_inputs), query.threshold)
            started = time.perf_counter()
            theirs = peer.solve(models[id(query.net)], problem, None, time_limit)
            peer_seconds = time.perf_counter() - started
            if theirs.status == Status.UNSUPPORTED:
                theirs, peer_seconds = None, None
        agree(query, ours, theirs)
        times.append(
            (
                seconds if answered(ours) else time_limit,
                None if peer_seconds is None else peer_seconds if answered(theirs) else time_limit,
            )
        )
        label = query.label
        print(
            f"{label.family} {label.query} α={label.alpha:.2f}: cardinal {_said(ours)} {seconds * 1e3:.0f} ms"
            + ("" if theirs is None else f", peer {_said(theirs)} {peer_seconds * 1e3:.0f} ms"),
            flush=True,
        )
    return times


def _design() -> tuple[Network, np.ndarray, str, None, float]:
    """The DESIGN network's trivial query (`bench.guard.trivial`) as `solve_minimum`'s arguments."""
    from bench.guard import trivial

    net, x, threshold = trivial()[0]
    return net, x, "contrastive", None, threshold


def summary(mix: str, times: Sequence[tuple[float, float | None]], time_limit: float) -> list:
    """[mix, queries, cardinal answered, peer answered, cardinal median ms, peer median ms, peer / cardinal]."""
    ours = [t for t, _ in times]
    theirs = [t for _, t in times if t is not None]
    mine = statistics.median(ours)
    peer = statistics.median(theirs) if theirs else None
    return [
        mix,
        len(times),
        sum(t < time_limit for t in ours),
        sum(t < time_limit for t in theirs) if theirs else "–",
        f"{mine * 1e3:.1f}",
        "–" if peer is None else f"{peer * 1e3:.1f}",
        "–" if peer is None else f"{peer / mine:.2f}",
    ]


def main(argv: Sequence[str] | None = None) -> None:
    import datetime
    import subprocess

    import torch
    from tabulate import tabulate
    from threadpoolctl import threadpool_limits

    from bench import Parser
    from bench.greedy import machine
    from bench.peer import Peer, peer_available
    from cardinal.errors import InputError
    from cardinal.io import write_atomic
    from cardinal.validate import output_file

    about = "cardinal's front door against the peer on a mix drawn from a seed"
    parser = Parser(prog="python -m bench.heldout", description=about)
    parser.add_argument("--seed", type=int, required=True, help="draws the networks, inputs, corners and thresholds")
    parser.add_argument("--networks", type=int, default=3, help="networks per mix (default: %(default)s)")
    parser.add_argument("--inputs", type=int, default=3, help="inputs per network (default: %(default)s)")
    parser.add_argument("--time-limit", type=float, default=2.0, help="seconds per call (default: %(default)s)")
    parser.add_argument("--mixes", default=",".join(MIXES), help=f"comma-separated subset of {', '.join(MIXES)}")
    parser.add_argument("--out", default="bench-results/heldout.md", help="markdown to write (default: %(default)s)")
    args = parser.parse_args(argv)
    mixes = [name.strip() for name in args.mixes.split(",") if name.strip()]
    if not mixes or any(name not in MIXES for name in mixes):
        parser.error(f"--mixes: use a subset of {', '.join(MIXES)}")
    if args.networks < 1 or args.inputs < 1 or not args.time_limit > 0:
        parser.error("--networks and --inputs must be at least 1, --time-limit positive")
    try:
        out = output_file(Path(args.out), "--out")
    except InputError as error:
        parser.error(str(error))
    if not peer_available():
        parser.error("the peer needs gurobi-machinelearning: pip install 'cardinal[peer]'")
    torch.set_num_threads(1)

    def said(*command: str) -> str:
        return subprocess.run(command, capture_output=True, text=True).stdout.strip()

    load, commit = said("uptime"), said("git", "rev-parse", "--short", "HEAD") or "unknown"
    dirty = said("git", "status", "--porcelain", "--untracked-files=no")
    peer = Peer()
    try:
        with threadpool_limits(1):
            warm_up(list(AUTO_PICKS), peer)
            solve_minimum(*_design(), time_limit=STARTUP_WAIT)  # auto's own first call: what it imports to choose
            rows = [
                summary(
                    mix, front_door_run(draw(args.seed, mix, args.networks, args.inputs), peer, args.time_limit), args.time_limit
                )
                for mix in mixes
            ]
    finally:
        peer.close()
    after = said("uptime")
    command = f"python -m bench.heldout --seed {args.seed} --networks {args.networks} --inputs {args.inputs}"
    command += f" --time-limit {args.time_limit:g}" + ("" if mixes == list(MIXES) else f" --mixes {','.join(mixes)}")
    text = [
        "# The front door against the peer on a mix drawn from a seed",
        "",
        f"Run {datetime.date.today().isoformat()} with `{command}` at commit {commit}{' (with local changes)' if dirty else ''}"
        f" on {machine()}; every call on one thread. Load (`uptime`) before: `{load}`; after: `{after}` — the machine was"
        " shared, so the timings carry that load.",
        "",
        "`cardinal.solve_minimum` with its defaults (`auto`, guarded, replayed) against the gurobi-ml peer (`bench/solvers.py`)"
        " on the same queries (`bench/heldout.py`, *A mix drawn from a seed*); answers asserted to agree inside the timed loop."
        " Medians per call, a call that answers nothing at the limit; `peer / cardinal` above 1: cardinal faster. The peer has no"
        " MILP for AXps of non-monotone networks (–).",
        "",
        tabulate(rows, HEADERS_SEEDED, tablefmt="github"),
        "",
    ]
    write_atomic(out, "\n".join(text))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

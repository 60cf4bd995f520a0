"""The best answer known, always, and the same answer through every driver (issue 51, items 1 and 6).

Item 1: with the engines stopped undecided — the pool's calls monkeypatched to end at their limit
with an exact `lower` and no set, the deletion explainer's questions cut off by a budget of
questions (never a clock) — an AXp answer still has features (the explainer's set, the set its
run showed before it stopped, or all n features), `upper` its size, `lower` the engines' bound,
and the record and its notes state the same numbers; `proof check --records` accepts every record
that carries a certificate. Item 6: `cardinal.explain` on a batch, a loop of single calls and one
`Explainer` give the same proved features, bounds and verdict (random small networks, K = 1 and
K = 3, monotone and not, both kinds). Every expected size and set comes from the brute force
(`bruteforce`, every vertex of the binary box), not from the engines.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import cardinal.verify.certify as certify_module
import numpy as np
import pytest
from bruteforce import vertex_minimum, vertex_valid
from cardinal.solvers.deletion import deletion as real_deletion
from cardinal.solvers.oracle import Flip, SetOracle
from cardinal.verify.certify import SolverPool, judge
from cardinal.verify.cli import main
from cardinal.verify.generate import median_threshold, random_network
from cardinal.verify.record import GreedyAnswer

import cardinal
from cardinal import Domain
from cardinal.network import Network
from cardinal.problem import Outcome, Problem, Status, Verdict

UNBOUNDED = 3600.0  # no call comes near it: every stop below is a monkeypatched outcome or a budget of questions
N = 5


def _case(seed: int, outputs: int, monotone: bool, rows: int = 3) -> tuple[Network, np.ndarray, float | None]:
    """A random relu network of N binary features, `rows` inputs and its threshold (None for K = 3)."""
    rng = np.random.default_rng(seed)
    net = random_network(rng, N, (4, 3), "relu", monotone=monotone, outputs=outputs)
    X = (rng.random((16, N)) < 0.5).astype(float)
    threshold = median_threshold(net, X) if outputs == 1 else None
    return net, X[:rows], threshold


def _problem(net: Network, x: np.ndarray, kind: str, threshold: float | None) -> Problem:
    return Problem.make(net, x, kind, Domain.boolean(N), threshold)


class _Budget:
    """The pool's oracle for the deletion explainer, answering `questions` questions, then none (undecided)."""

    def __init__(self, oracle: SetOracle, questions: int) -> None:
        self.oracle, self.left = oracle, questions

    def flip(self, problem: Problem, free: frozenset[int], time_limit: float) -> Flip:
        if self.left <= 0:
            return Flip(None, None, "budget of questions spent")
        self.left -= 1
        return self.oracle.flip(problem, free, time_limit)


def _budgeted_deletion(monkeypatch: pytest.MonkeyPatch, questions: int) -> None:
    def deletion(problem: Problem, oracle: SetOracle, time_limit: float, traversal: str = "sensitivity", deadline: Any = None) -> Any:
        return real_deletion(problem, _Budget(oracle, questions), time_limit, traversal, deadline)  # type: ignore[arg-type]

    monkeypatch.setattr(certify_module, "deletion", deletion)


def _stopped_pool(monkeypatch: pytest.MonkeyPatch, bound: dict[str, int]) -> list[int | None]:
    """Every pool call ends at its limit with no set and the exact lower bound `bound["lower"]`
    (as the exact MILP's levels say it); returns the bounds each call was asked (`at_most`)."""
    asked: list[int | None] = []

    def solve(self: SolverPool, problem: Problem, at_most: int | None, time_limit: float, deadline: Any = None) -> Any:
        asked.append(at_most)
        lower = bound["lower"]
        message = f"stopped at the time limit; exact lower bound {lower}"
        return {"exact-milp": Outcome(Status.TIMEOUT, "exact-milp", time_limit, exact=True, lower=lower, message=message)}, []

    monkeypatch.setattr(SolverPool, "solve", solve)
    return asked


def _records_accepted(tmp_path: Path, explanations: list[cardinal.Explanation]) -> int:
    """`proof check --records` on each record that carries a certificate (all must be accepted);
    returns how many there were."""
    checked = 0
    for index, e in enumerate(explanations):
        record = e.to_dict()
        if not (record.get("proof") or {}).get("file"):
            continue
        records = tmp_path / f"records-{index}.jsonl"
        records.write_text(json.dumps(record) + "\n")
        assert main(["proof", "check", "--records", str(records), str(tmp_path / "proofs" / record["proof"]["file"])]) == 0
        checked += 1
    return checked


def _consistent(e: cardinal.Explanation) -> None:
    """The answer, its record and its notes state the same numbers."""
    record = e.to_dict()
    assert record["minimum"] == (None if e.features is None else list(e.features))
    assert e.upper == (None if e.features is None else len(e.features))
    assert record["minimum_lower"] == e.lower and record["verdict"] == e.verdict
    said = [int(b) for note in record["notes"] for b in re.findall(r"exact lower bound (\d+)", note)]
    assert e.lower is None or all(b <= e.lower for b in said)  # no note states a bound the answer does not
    for note in record["notes"]:
        if note.startswith("left open: ") and e.features is not None:
            assert note.startswith(f"left open: is there a {e.kind} explanation of size ≤ {len(e.features) - 1}? "
                                   f"(exact lower bound {e.lower};")  # fmt: skip


@pytest.mark.parametrize(("outputs", "monotone"), [(1, False), (3, False), (1, True)])
@pytest.mark.parametrize("above", [0, 1])  # the engines' bound: the brute-force minimum, or one below it
def test_engines_stopped_undecided_still_give_the_best_axp_known(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outputs: int, monotone: bool, above: int
) -> None:
    seed = {(1, False): 11, (3, False): 13, (1, True): 14}[(outputs, monotone)]  # AXp minima of 2 and 3 features
    net, X, threshold = _case(seed, outputs, monotone)
    bound: dict[str, int] = {}
    asked = _stopped_pool(monkeypatch, bound)
    with cardinal.Explainer(net, threshold=threshold, domain=Domain.boolean(N), proof_dir=tmp_path / "proofs",
                            time_limit=UNBOUNDED) as explainer:  # fmt: skip
        answers = []
        for x in X:
            problem = _problem(net, x, "abductive", threshold)
            minimum = vertex_minimum(problem)
            assert minimum is not None  # the full set always is one
            bound["lower"] = max(minimum - above, 0)
            e = explainer.explain(x, "abductive")
            answers.append(e)
            assert e.features is not None and vertex_valid(problem, e.features)  # replayed by the brute force
            explainer_set = tuple(e.to_dict()["greedy"]["features"])  # greedy, or deletion, decided here
            assert e.features == explainer_set and e.method == ("greedy" if net.is_sign_monotone else "deletion")
            assert not explainer_set or asked[-1] == len(explainer_set) - 1  # the search starts from the explainer's answer
            assert e.upper == len(e.features) and e.lower == max(bound["lower"], int(bool(e.features)))
            assert e.proved == (e.lower == len(e.features))
            assert e.verdict == (e.to_dict()["method"] + "_minimal" if e.proved else Verdict.UNKNOWN.value)
            _consistent(e)
            if not e.proved:
                assert f"exact lower bound {e.lower};" in e.to_dict()["notes"][-1]
    assert _records_accepted(tmp_path, answers) == sum(e.proved and e.lower > 0 for e in answers)


@pytest.mark.parametrize("outputs", [1, 3])
@pytest.mark.parametrize("questions", [0, 2, 4])
def test_a_deletion_run_stopped_undecided_gives_the_set_it_showed(
    monkeypatch: pytest.MonkeyPatch, outputs: int, questions: int
) -> None:
    """Deletion's questions cut off after `questions`, the pool's calls stopped too: an AXp answer
    is the set the run showed (all n features where it removed none), never None; a CXp answer
    is the set still free at its last flip, with a witness that flips p(x) (brute force)."""
    net, X, threshold = _case(21 + outputs, outputs, False)
    _budgeted_deletion(monkeypatch, questions)
    bound = {"lower": 1}
    _stopped_pool(monkeypatch, bound)
    for kind in ("abductive", "contrastive"):
        for x in X:
            problem = _problem(net, x, kind, threshold)
            minimum = vertex_minimum(problem)
            bound["lower"] = 1 if minimum is None else min(1, minimum)  # true: what the brute force says
            e = cardinal.explain(net, x, kind, threshold=threshold, domain=Domain.boolean(N), time_limit=UNBOUNDED)
            assert isinstance(e, cardinal.Explanation)
            record = e.to_dict()
            _consistent(e)
            if kind == "abductive":
                assert e.features is not None and vertex_valid(problem, e.features)
                assert questions > 0 or e.features == tuple(range(N))  # nothing removed: the full set
            elif e.features is not None:
                assert vertex_valid(problem, e.features) and e.witness is not None
                y = np.array(e.witness)
                assert all(y[i] == x[i] for i in range(N) if i not in e.features)
                assert problem.exact.predictions(y[None, :], threshold)[0] not in (-1, problem.prediction)
            else:  # no set shown: none exists, or the first question was never asked
                assert minimum is None or questions == 0
            if record["greedy_check"] == "undecided":
                assert record["verdict"] == "undecided" and not e.proved
                assert e.lower == max(bound["lower"], int(kind == "contrastive"))
            if e.features is not None:
                assert e.upper == len(e.features) and not (minimum is not None and len(e.features) < minimum)


def test_the_proved_minimum_of_an_undecided_deletion_run_is_certified_and_its_record_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The explainer stopped at its first question, the exact solvers unbounded: the minimum is
    the solvers', proved; the verdict stays `undecided`, and `proof check --records` accepts the
    record (the certificate backs the minimum, the explainer's absent answer judged nothing)."""
    net, X, threshold = _case(31, 1, False)
    _budgeted_deletion(monkeypatch, 0)
    answers = cardinal.explain(net, X, "abductive", threshold=threshold, domain=Domain.boolean(N), time_limit=UNBOUNDED,
                               proof_dir=tmp_path / "proofs")  # fmt: skip
    assert isinstance(answers, list)
    for x, e in zip(X, answers, strict=True):
        problem = _problem(net, x, "abductive", threshold)
        assert e.verdict == "undecided" and e.proved and e.features is not None
        assert len(e.features) == vertex_minimum(problem) == e.lower == e.upper and vertex_valid(problem, e.features)
        _consistent(e)
    assert _records_accepted(tmp_path, answers) == sum(bool(e.features) for e in answers)


def test_the_minimum_is_the_canonical_smallest_whatever_the_order_found() -> None:
    """`judge` takes the fewest features, then the lexicographically smallest set, from the
    solvers' sets in any order; an `unknown` row keeps it, with the engines' bound."""
    net, X, threshold = _case(41, 1, False, rows=1)
    problem = _problem(net, X[0], "abductive", threshold)
    answer = GreedyAnswer(tuple(range(N)), 0.0, method="deletion")
    sets = [(1, 2, 3, 4), (0, 1, 3, 4), (0, 2, 3, 4)]
    outcomes = {
        f"s{i}": Outcome(Status.FEASIBLE, f"s{i}", 0.0, s, replayed=True, exact=True, lower=2) for i, s in enumerate(sets)
    }
    decided = [judge(problem, answer, dict(reversed(list(outcomes.items())) if flip else outcomes), N - 1) for flip in (0, 1)]
    assert decided[0].minimum == decided[1].minimum == (0, 1, 3, 4)
    assert decided[0].verdict == Verdict.DELETION_SUBOPTIMAL and decided[0].lower == 2


NETWORKS = [(1, True), (1, False), (3, True), (3, False)]


@pytest.mark.parametrize(("outputs", "monotone"), NETWORKS)
def test_a_batch_a_loop_and_an_explainer_give_the_same_answers(outputs: int, monotone: bool) -> None:
    net, X, threshold = _case(51 + outputs + 2 * monotone, outputs, monotone)
    settings = {"threshold": threshold, "domain": Domain.boolean(N), "time_limit": UNBOUNDED}
    for kind in ("contrastive", "abductive"):
        batch = cardinal.explain(net, X, kind, **settings)
        loop = [cardinal.explain(net, x, kind, **settings) for x in X]
        with cardinal.Explainer(net, **settings) as explainer:
            kept = [explainer.explain(x, kind) for x in X]
            kept_batch = explainer.explain(X, kind)
        assert isinstance(batch, list) and isinstance(kept_batch, list)
        for x, *answers in zip(X, batch, loop, kept, kept_batch, strict=True):
            stated = {(e.features, e.lower, e.upper, e.verdict, e.proved, e.witness) for e in answers}  # type: ignore[union-attr]
            assert len(stated) == 1, stated
            e = answers[0]
            assert isinstance(e, cardinal.Explanation)
            minimum = vertex_minimum(_problem(net, x, kind, threshold))
            assert e.proved, e.to_dict()["notes"]  # unbounded: every answer is decided
            assert (e.features is None) == (minimum is None) and e.upper == minimum
            assert e.features is None or vertex_valid(_problem(net, x, kind, threshold), e.features)


@pytest.mark.parametrize("questions", [0, 2])
def test_without_prove_a_stopped_deletion_run_still_answers_its_set(monkeypatch: pytest.MonkeyPatch, questions: int) -> None:
    """`prove=False` (the explainer alone, as `cardinal explain`): a deletion run cut off after
    `questions` answers the set it had shown — an AXp never None, valid by brute force — with the
    line's check `undecided` and a note saying the set is not shown subset-minimal."""
    net, X, threshold = _case(22, 1, False)
    _budgeted_deletion(monkeypatch, questions)
    for x in X:
        problem = _problem(net, x, "abductive", threshold)
        e = cardinal.explain(net, x, "abductive", threshold=threshold, domain=Domain.boolean(N), prove=False,
                             method="deletion", time_limit=UNBOUNDED)
        assert isinstance(e, cardinal.Explanation) and e.features is not None and vertex_valid(problem, e.features)
        assert questions > 0 or e.features == tuple(range(N))
        record = e.to_dict()
        if record["check"] == "undecided":
            assert record["exists"] is True and any("not shown subset-minimal" in note for note in record["notes"])

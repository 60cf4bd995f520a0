"""One evidence vocabulary: how a call ended (`Termination`) apart from what its answer is worth
(`Evidence`); `Outcome.proved` only on exact evidence, never on a float claim."""

from __future__ import annotations

import pytest

from cardinal import Evidence, Outcome, Status, Termination


@pytest.mark.parametrize(
    ("status", "exact", "replayed", "termination", "evidence", "proved"),
    [
        (Status.OPTIMAL, True, True, Termination.OPTIMAL, Evidence.EXACT, True),
        (Status.OPTIMAL, True, False, Termination.OPTIMAL, Evidence.FLOAT_CLAIM, False),
        (Status.OPTIMAL, False, True, Termination.OPTIMAL, Evidence.EXACT, False),  # the set holds; minimality is a float claim
        (Status.NONE_WITHIN, True, False, Termination.INFEASIBLE, Evidence.EXACT, True),
        (Status.NONE_WITHIN, False, False, Termination.INFEASIBLE, Evidence.FLOAT_CLAIM, False),
        (Status.NONE_EXISTS, True, False, Termination.INFEASIBLE, Evidence.EXACT, True),
        (Status.NONE_EXISTS, False, False, Termination.INFEASIBLE, Evidence.FLOAT_CLAIM, False),
        (Status.FEASIBLE, False, True, Termination.LIMIT, Evidence.EXACT, False),
        (Status.TIMEOUT, True, False, Termination.LIMIT, Evidence.NONE, False),
        (Status.SIZE_LIMIT, False, False, Termination.LIMIT, Evidence.NONE, False),
        (Status.UNSUPPORTED, False, False, Termination.UNSUPPORTED, Evidence.NONE, False),
        (Status.ERROR, False, False, Termination.ERROR, Evidence.NONE, False),
    ],
)
def test_termination_and_evidence_apart(status, exact, replayed, termination, evidence, proved) -> None:
    outcome = Outcome(status, "x", 0.0, (0,) if status in (Status.OPTIMAL, Status.FEASIBLE) else None, exact=exact, replayed=replayed)
    assert (outcome.termination, outcome.evidence, outcome.proved) == (termination, evidence, proved)


def test_a_refuted_claim_keeps_how_it_ended_and_proves_nothing() -> None:
    refuted = Outcome(Status.NONE_WITHIN, "gurobi", 0.0).refuted("a smaller set holds exactly")
    assert (refuted.status, refuted.termination, refuted.evidence, refuted.proved) == (
        Status.REFUTED, Termination.INFEASIBLE, Evidence.REFUTED, False
    )

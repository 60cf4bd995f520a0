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


# status, exact, replayed, solution → (lower, none_exists) for n = 5, at_most = 2; written out by hand
PROVES = [
    (Status.OPTIMAL, True, True, (1, 3), (2, False)),
    (Status.OPTIMAL, True, True, (), (0, False)),
    (Status.OPTIMAL, True, False, (1, 3), (None, False)),  # minimality without the set replayed
    (Status.OPTIMAL, False, True, (1, 3), (None, False)),  # a float MILP's "minimum"
    (Status.NONE_WITHIN, True, False, None, (3, False)),
    (Status.NONE_WITHIN, False, False, None, (None, False)),
    (Status.NONE_EXISTS, True, False, None, (None, True)),
    (Status.NONE_EXISTS, False, True, None, (None, True)),  # a float claim the oracle confirmed
    (Status.NONE_EXISTS, False, False, None, (None, False)),
    (Status.FEASIBLE, True, True, (1, 3), (None, False)),
    (Status.TIMEOUT, True, False, None, (None, False)),
    (Status.REFUTED, True, True, (1,), (None, False)),
]


@pytest.mark.parametrize(("status", "exact", "replayed", "solution", "expected"), PROVES)
def test_what_an_outcome_proves(status, exact, replayed, solution, expected) -> None:
    """`Outcome.proves`, the one reading of "what is proved", against a table written by hand;
    `proved` agrees with it for exact backends, and `Proved.within` gives the certificate's k."""
    outcome = Outcome(status, "s", 0.0, solution=solution, exact=exact, replayed=replayed)
    proved = outcome.proves(5, 2)
    assert (proved.lower, proved.none_exists) == expected
    assert outcome.proved == (exact and proved.decided)
    lower, none_exists = expected
    assert proved.within(5) == (5 if none_exists else None if lower is None or lower == 0 else lower - 1)
    assert Outcome(Status.NONE_WITHIN, "s", 0.0, exact=True).proves(5, None).lower == 6  # no bound: none within n

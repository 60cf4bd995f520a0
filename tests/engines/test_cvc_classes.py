"""cvc5 on networks of K = 3 outputs over real boxes (issue 38): where a model's point, rounded to
doubles, falls back onto a tie, the point is asked for again with some other class's output ε
above that of p(x) — the K-output form of the margin. Its minimum sizes are z3's (both exact),
and every CXp's witness changes the class exactly."""

from __future__ import annotations

import pytest
from cardinal.solvers.base import get_solver, solve_problem
from cardinal.solvers.oracle import check_witness

from cardinal.problem import Problem, Status
from tests.engines.test_classes import _classifier, _varied_input

pytest.importorskip("cvc5")
pytest.importorskip("z3")


@pytest.mark.parametrize("seed", [1, 5])  # seeds whose rounded points fall on a tie (the margin query)
def test_cvc5_finds_z3s_minimum_on_three_class_networks(seed: int) -> None:
    net = _classifier(200 + seed, 3 + seed % 2, (4,))
    x = _varied_input(net, False, seed)
    for kind in ("contrastive", "abductive"):
        problem = Problem.make(net, x, kind)
        assert problem.classes == 3
        with get_solver("z3") as z3, get_solver("cvc5") as cvc5:
            expected, outcome = solve_problem(z3, problem, None, 60.0), solve_problem(cvc5, problem, None, 60.0)
        where = f"seed {seed}, {kind}: z3 {expected}, cvc5 {outcome}"
        assert expected.status == outcome.status == Status.OPTIMAL and outcome.size == expected.size, where
        if kind == "contrastive":
            valid, _ = check_witness(problem, frozenset(outcome.features), outcome.witness)
            assert outcome.replayed and valid, where

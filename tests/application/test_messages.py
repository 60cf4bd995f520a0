"""What the user reads (issue 26): every flag described, refusals that name what to change, and an
undecided row that says what was left open."""

from __future__ import annotations

import argparse
import importlib

import numpy as np
import pytest
from cardinal.solvers.base import get_solver
from cardinal.verify.certify import GreedyAnswer, certify_row
from cardinal.verify.cli import build_parser

from cardinal.activations import Activation
from cardinal.network import Layer, Network
from cardinal.problem import Outcome, Problem, Status, Verdict


def subcommands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_flag_of_every_command_is_described(name: str) -> None:
    parser = subcommands()[name]
    undescribed = [action.dest for action in parser._actions if not action.help]
    assert not undescribed, f"cardinal {name}: {undescribed} have no help text"
    assert parser.description, f"cardinal {name} has no description"


def test_explain_help_documents_every_output_field() -> None:
    text = subcommands()["explain"].format_help()
    for field in ("row", "kind", "prediction", "output", "exists", "features", "size", "check", "threshold", "domain"):
        assert f'"{field}"' in text
    assert '"names"' in text and "feature_names" in text


def sigmoid_output() -> Network:
    relu, sigmoid = Activation.make("relu"), Activation.make("sigmoid")
    return Network([Layer(np.eye(2), np.zeros(2), relu), Layer(np.ones((1, 2)), np.zeros(1), sigmoid)])


@pytest.mark.parametrize("solver", ["highs", "gurobi"])
def test_a_milp_refusal_names_the_layer_that_is_not_piecewise_linear(solver: str) -> None:
    importlib.import_module("highspy" if solver == "highs" else "gurobipy")
    problem = Problem.make(sigmoid_output(), np.array([1.0, 1.0]), "contrastive", threshold=0.8)
    outcome = get_solver(solver).solve(problem, None, 10.0)
    assert outcome.status == Status.UNSUPPORTED
    assert "layer 2 (the output layer): sigmoid" in outcome.message and "relu is not" not in outcome.message


class _StoppedPool:
    """A solver pool whose every call stopped at its limit or gave only a float claim."""

    def solve(self, problem: Problem, at_most: int | None, time_limit: float) -> tuple[dict[str, Outcome], list[str]]:
        return {
            "z3": Outcome(Status.TIMEOUT, "z3", time_limit, exact=True),
            "highs": Outcome(Status.NONE_WITHIN, "highs", 0.01),
        }, []


def test_an_undecided_row_says_which_solver_stopped_and_what_was_left_open() -> None:
    net = Network([Layer(np.array([[1.0, 1.0, 1.0]]), np.zeros(1), Activation.make("identity"))])
    problem = Problem.make(net, np.ones(3), "contrastive", threshold=1.5)
    certificate = certify_row(_StoppedPool(), problem, GreedyAnswer((0, 1), 0.0), 7.0)
    assert certificate.verdict == Verdict.UNKNOWN and not certificate.certified  # a float MILP only: no verdict
    unknown = certify_row(_StoppedPool(), problem, None, 7.0)  # not monotone-style: the minimum is asked
    assert unknown.verdict == Verdict.EXACT_ONLY and not unknown.certified
    note = unknown.notes[-1]
    assert note.startswith("left open: the minimum contrastive explanation?")
    assert "z3 stopped at its time limit of 7 s" in note and "highs says none_within, a float MILP's claim" in note

"""The backend registry (`solvers.registry`): the one place that lists backend names, and what each
entry declares holds — its exactness is its class's, a backend declared to handle K ≥ 2 classes
answers a K = 3 problem, and one declared not to is never chosen for it (by `auto_solver`, the
exact set oracle, certify's default set)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import numpy as np
import pytest
from cardinal.solvers import oracle
from cardinal.solvers.base import auto_solver, available_solvers, get_solver, solve_problem
from cardinal.solvers.registry import BACKENDS, SOLVER_NAMES
from cardinal.verify.certify import proving_solvers
from cardinal.verify.commands.common import _solver_names

from cardinal.activations import Activation
from cardinal.domain import Domain
from cardinal.errors import InputError
from cardinal.network import Layer, Network
from cardinal.problem import Problem, Status

ROOT = Path(__file__).resolve().parents[2]
INSTALLED = available_solvers()


def test_only_the_registry_lists_the_backend_names() -> None:
    """No module outside `solvers/registry.py` spells a tuple, list or dict of two or more backend
    names (a second registry or selection list); choices name single backends only."""
    quoted = "|".join(re.escape(f'"{name}"') for name in SOLVER_NAMES)
    listing = re.compile(rf"(?:{quoted})\s*[:,]\s*[^\n]*?(?:{quoted})")
    offenders = []
    for folder in ("cardinal", "solvers", "verify"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name == "registry.py":
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if listing.search(line.split("#")[0]):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    allowed = {"solvers/base.py"}  # auto_solver's preference orders among the registry's entries
    assert [o for o in offenders if o.split(":")[0] not in allowed] == []


def test_each_entry_makes_its_backend_with_the_declared_exactness() -> None:
    for name, entry in BACKENDS.items():
        module = pytest.importorskip(entry.module) if name not in INSTALLED else importlib.import_module(entry.module)
        factory = getattr(module, entry.factory)
        assert factory.exact == entry.exact, name
        if entry.flip_search is not None:
            assert getattr(module, entry.flip_search).exact, name  # an oracle engine must be exact
    assert [engine.name for engine in oracle.ENGINES] == ["enumerate", "exact-milp", "z3"]


def _three_classes(binary: bool) -> Problem:
    rng = np.random.default_rng(5)
    net = Network(
        [
            Layer(rng.normal(size=(4, 4)), rng.normal(size=4), Activation.make("relu")),
            Layer(rng.normal(size=(3, 4)), rng.normal(size=3), Activation.make("identity")),
        ]
    )
    domain = Domain.boolean(4) if binary else Domain.unit(4)
    x = np.array([1.0, 0.0, 1.0, 0.0]) if binary else np.array([0.7, 0.2, 0.9, 0.4])
    return Problem.make(net, x, "contrastive", domain)


@pytest.mark.parametrize("binary", [True, False])
def test_declared_capabilities_hold_on_a_three_class_problem(binary: bool) -> None:
    """Every installed backend that declares it handles this K = 3 problem gives a real answer
    (a set, or none exists), never `unsupported`; one declared not to handle it is chosen by no
    default: not by auto, not as an oracle engine, not in certify's default set."""
    problem = _three_classes(binary)
    assert problem.classes == 3
    handles = {name for name, entry in BACKENDS.items() if entry.handles(problem.net, problem.domain, problem.kind)}
    assert "marabou" not in handles and {"z3", "exact-milp", "gurobi", "highs"} <= handles
    assert ("enumerate" in handles) == binary
    for name in sorted(handles & set(INSTALLED) - {"marabou"}):
        with get_solver(name) as backend:
            outcome = solve_problem(backend, problem, None, 60.0)
        assert outcome.status in (Status.OPTIMAL, Status.FEASIBLE, Status.NONE_EXISTS), (name, outcome)
    chosen = {auto_solver(problem), *proving_solvers(problem.net, problem.domain)}
    chosen |= {engine.name for engine in oracle.ENGINES if engine.applies(problem)}
    assert chosen <= handles, chosen - handles


def test_a_backend_declared_not_to_handle_a_problem_answers_unsupported() -> None:
    """Marabou declares no K ≥ 2 support; where installed it says so itself."""
    if "marabou" not in INSTALLED:
        pytest.skip("marabou is not installed")
    with get_solver("marabou") as backend:
        outcome = solve_problem(backend, _three_classes(False), None, 60.0)
    assert outcome.status == Status.UNSUPPORTED


def test_cli_solver_names_are_the_registrys() -> None:
    net = _three_classes(False).net
    domain = Domain.unit(4)
    assert set(_solver_names(None, net, domain)) <= set(SOLVER_NAMES)
    assert _solver_names("all", net, domain) == list(INSTALLED)
    assert _solver_names("z3, enumerate", net, domain) == ["z3", "enumerate"]
    with pytest.raises(InputError, match="unknown solver 'cplex'"):
        _solver_names("z3,cplex", net, domain)

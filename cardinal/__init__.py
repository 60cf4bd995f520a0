"""cardinal: cardinality-minimal explanations of neural-network predictions, certified exactly.

The public API in one place. `cardinal.verify` holds the core, the greedy engine and the
application layer; `cardinal.solvers` the exact backends behind one front (imported lazily by
name, so `import cardinal` needs none of their libraries).
"""

from .solvers.base import SOLVER_NAMES, available_solvers, get_solver, solve_minimum
from .verify.activations import Activation, Step
from .verify.domain import Domain
from .verify.errors import InputError
from .verify.greedy import ExplainResult, explain, explain_reference
from .verify.network import Layer, Network
from .verify.problem import Kind, MissingSolutionError, Outcome, Problem, Status, Verdict

__all__ = [
    "SOLVER_NAMES",
    "Activation",
    "Domain",
    "ExplainResult",
    "InputError",
    "Kind",
    "Layer",
    "MissingSolutionError",
    "Network",
    "Outcome",
    "Problem",
    "Status",
    "Step",
    "Verdict",
    "available_solvers",
    "explain",
    "explain_reference",
    "get_solver",
    "solve_minimum",
]

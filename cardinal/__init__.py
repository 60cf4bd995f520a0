"""cardinal: cardinality-minimal explanations of neural-network predictions, certified exactly.

The public API in one place. Three folders, three layers, each importing only the ones below:
the core in this package (`cardinal.network`, `cardinal.problem`, `cardinal.exact`, ..., the greedy
explainer `cardinal.greedy`, and the model-file readers in `cardinal.formats`), the exact engines
in `cardinal.solvers` (backends behind one front, imported lazily by name, so `import cardinal`
needs none of their libraries), and the application in `cardinal.verify` (certify, check,
campaigns, reports, the `cardinal` command).
"""

from .activations import Activation, Step
from .domain import Domain
from .errors import InputError
from .greedy import ExplainResult, explain, explain_reference
from .network import Layer, Network
from .problem import Kind, MissingSolutionError, Outcome, Problem, Status, Verdict
from .solvers.base import SOLVER_NAMES, available_solvers, get_solver, solve_minimum

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

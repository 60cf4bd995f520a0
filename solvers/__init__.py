"""Exact backends behind one front: `solve_minimum(..., solver="gurobi"|"highs"|"z3"|"enumerate")`.

Backends are imported by name on first use, so `import cardinal.solvers` needs none of their libraries.
"""

from ..problem import MissingSolutionError, Outcome, Problem, Status
from .base import SOLVER_NAMES, available_solvers, get_solver, solve_minimum

__all__ = [
    "SOLVER_NAMES",
    "MissingSolutionError",
    "Outcome",
    "Problem",
    "Status",
    "available_solvers",
    "get_solver",
    "solve_minimum",
]

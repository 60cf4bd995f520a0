"""Exact backends behind one front: `solve_minimum(..., solver="auto"|"exact-milp"|"z3"|"enumerate"|"gurobi"|"highs")`.

Backends are imported by name on first use, so `import cardinal.solvers` needs none of their libraries.
"""

from cardinal.problem import MissingSolutionError, Outcome, Problem, Status

from .base import SOLVER_NAMES, auto_solver, available_solvers, get_solver, solve_minimum

__all__ = [
    "SOLVER_NAMES",
    "MissingSolutionError",
    "Outcome",
    "Problem",
    "Status",
    "auto_solver",
    "available_solvers",
    "get_solver",
    "solve_minimum",
]

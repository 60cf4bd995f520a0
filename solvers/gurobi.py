"""`GurobiSolver`: the neutral MILP of `solvers.encode` solved by Gurobi (gurobipy's matrix API).

Tolerances are tightened (feasibility, integrality and optimality 1e-9, relative gap 0, absolute
gap 0.5 since the objective is integral); the seed is fixed and one thread runs by default, so a
run that ends before its time limit is reproducible; NumericFocus stays at Gurobi's default
(these tolerances need no more numeric care than it gives). One `Env` (no output) is created on first use and
disposed by `close()`; every model is disposed after its run. Gurobi's pip licence is
size-limited (about 2,000 variables and constraints): errno 10010 becomes a SIZE_LIMIT run.
"""

from __future__ import annotations

import gurobipy as gp
import numpy as np
from gurobipy import GRB

from .encode import MilpModel
from .milp import MilpRun, MilpSolver, RunState

SIZE_LIMITED = 10010  # GurobiError errno: "Model too large for size-limited license"

PARAMETERS: dict[str, float | int] = {
    "FeasibilityTol": 1e-9,
    "IntFeasTol": 1e-9,
    "OptimalityTol": 1e-9,
    "MIPGap": 0.0,
    "MIPGapAbs": 0.5,
    "Seed": 0,  # Gurobi's default, fixed here: with one thread a run is then deterministic
}

_STATES = {
    GRB.OPTIMAL: RunState.OPTIMAL,
    GRB.INFEASIBLE: RunState.INFEASIBLE,
    GRB.INF_OR_UNBD: RunState.INFEASIBLE,  # every variable is bounded, so it cannot be unbounded
    GRB.TIME_LIMIT: RunState.TIME_LIMIT,
    GRB.MEM_LIMIT: RunState.SIZE_LIMIT,
}
_STATUS_NAMES = {getattr(GRB.Status, name): name for name in dir(GRB.Status) if name.isupper()}


def run_state(status: int) -> RunState:
    """Gurobi's integer model status → the neutral run state."""
    return _STATES.get(status, RunState.OTHER)


class GurobiSolver(MilpSolver):
    """Gurobi backend. `threads`: Gurobi's Threads parameter; 1 by default, since these models
    are small (more threads did not make them faster; docs/results.md) and campaigns run a solver per worker process;
    0 lets Gurobi decide."""

    name = "gurobi"

    def __init__(self, threads: int = 1) -> None:
        self.threads = threads
        self._env: gp.Env | None = None

    def close(self) -> None:
        if self._env is not None:
            self._env.dispose()
            self._env = None

    def _environment(self) -> gp.Env:
        if self._env is None:
            env = gp.Env(empty=True)
            env.setParam("OutputFlag", 0)
            env.start()
            self._env = env
        return self._env

    def _optimize(self, model: MilpModel, time_limit: float) -> MilpRun:
        with gp.Model(env=self._environment()) as gm:
            for key, value in PARAMETERS.items():
                gm.setParam(key, value)
            gm.setParam("Threads", self.threads)
            gm.setParam("TimeLimit", time_limit)
            v = gm.addMVar(
                len(model.lower),
                lb=model.lower,
                ub=model.upper,
                obj=model.objective,
                vtype=np.where(model.integer, GRB.INTEGER, GRB.CONTINUOUS),
            )
            equal = model.row_lower == model.row_upper
            upper_only = np.isneginf(model.row_lower)
            sense = np.where(equal, GRB.EQUAL, np.where(upper_only, GRB.LESS_EQUAL, GRB.GREATER_EQUAL))
            gm.addMConstr(model.matrix, v, sense, np.where(upper_only, model.row_upper, model.row_lower))
            try:
                gm.optimize()
            except gp.GurobiError as error:
                if error.errno == SIZE_LIMITED:
                    return MilpRun(RunState.SIZE_LIMIT, f"SIZE_LIMIT (GurobiError {error.errno})")
                raise
            raw = _STATUS_NAMES.get(gm.Status, str(gm.Status))
            values = np.array(v.X, dtype=np.float64) if gm.SolCount > 0 else None
            return MilpRun(run_state(gm.Status), raw, values)

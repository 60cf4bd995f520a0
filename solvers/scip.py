"""`ScipSolver`: the neutral MILP of `solvers.encode` solved by SCIP (pyscipopt), a float MILP
like Gurobi and HiGHS: its answers are evidence that the exact replay checks.

Tolerances as for HiGHS (`solvers.highs`): feasibility 1e-8, well below the model's margin ε
(1e-6), so that step units and strict class margins hold in its solutions; the gap closed
(relative 0, absolute 0.5 since the objective is integral); the seed fixed; all output off.
SCIP runs on one thread. Each run builds a fresh model and frees it.
"""

from __future__ import annotations

import numpy as np
import pyscipopt

from .encode import MilpModel
from .milp import MilpRun, MilpSolver, RunState

PARAMETERS: dict[str, float | int] = {
    "numerics/feastol": 1e-8,
    "limits/gap": 0.0,
    "limits/absgap": 0.5,
    "randomization/randomseedshift": 0,
}

_STATES = {
    "optimal": RunState.OPTIMAL,
    "infeasible": RunState.INFEASIBLE,
    "inforunbd": RunState.INFEASIBLE,  # every variable is bounded, so it cannot be unbounded
    "timelimit": RunState.TIME_LIMIT,
    "memlimit": RunState.SIZE_LIMIT,
}


def run_state(status: str) -> RunState:
    """SCIP's status string → the neutral run state."""
    return _STATES.get(status, RunState.OTHER)


class ScipSolver(MilpSolver):
    """SCIP backend."""

    name = "scip"

    def _optimize(self, model: MilpModel, time_limit: float) -> MilpRun:
        scip = pyscipopt.Model()
        try:
            scip.hideOutput()
            for key, value in PARAMETERS.items():
                scip.setParam(key, value)
            scip.setParam("limits/time", float(time_limit))
            columns = [
                scip.addVar(lb=lower, ub=upper, obj=cost, vtype="I" if integer else "C")
                for lower, upper, cost, integer in zip(
                    model.lower.tolist(), model.upper.tolist(), model.objective.tolist(), model.integer.tolist(), strict=True
                )
            ]
            matrix = model.matrix.tocsr()
            for row, (low, high) in enumerate(zip(model.row_lower.tolist(), model.row_upper.tolist(), strict=True)):
                span = slice(matrix.indptr[row], matrix.indptr[row + 1])
                terms = pyscipopt.quicksum(
                    value * columns[column]
                    for column, value in zip(matrix.indices[span].tolist(), matrix.data[span].tolist(), strict=True)
                )
                if low == high:
                    scip.addCons(terms == low)
                elif np.isneginf(low):
                    scip.addCons(terms <= high)
                else:
                    scip.addCons(terms >= low)
            scip.optimize()
            status = scip.getStatus()
            values = None
            if scip.getNSols() > 0:
                best = scip.getBestSol()
                values = np.array([best[column] for column in columns], dtype=np.float64)
            return MilpRun(run_state(status), status, values)
        finally:
            scip.freeProb()

"""`HighsSolver`: the neutral MILP of `solvers.encode` solved by HiGHS (passed whole as a CSC
`HighsLp`); `new_highs` (`solvers.quiet_highs`) makes every `Highs` object.

The gap is closed (relative gap 0, absolute gap 0.5 since the objective is integral) and the
feasibility tolerances are 1e-8: well below the model's margin ε (1e-6), which HiGHS's defaults
(1e-6 / 1e-7) are not, so that step units and strict class margins hold in its solutions; and not
1e-9, at which HiGHS's presolve declared feasible models infeasible (two COMPAS abductive
instances of the paper suite; one is `tests/data/highs_tight_tolerance_case.json`) — a wrong
"infeasible" is the one error an exact replay cannot catch. All output is off. HiGHS prints a banner to stdout when the first
`Highs` object of a process is made; that one construction runs with stdout sent to /dev/null,
so that the JSON lines of `cardinal certify` stay clean.
"""

from __future__ import annotations

import highspy
import numpy as np

from .encode import MilpModel
from .milp import MilpRun, MilpSolver, RunState
from .quiet_highs import new_highs

OPTIONS: dict[str, float | bool | str] = {
    "output_flag": False,
    "mip_feasibility_tolerance": 1e-8,
    "primal_feasibility_tolerance": 1e-8,
    "dual_feasibility_tolerance": 1e-8,
    "mip_rel_gap": 0.0,
    "mip_abs_gap": 0.5,
    "random_seed": 0,  # HiGHS's default, fixed here so that runs repeat
}

_Status = highspy.HighsModelStatus
_STATES = {
    _Status.kOptimal: RunState.OPTIMAL,
    _Status.kInfeasible: RunState.INFEASIBLE,
    _Status.kUnboundedOrInfeasible: RunState.INFEASIBLE,  # every variable is bounded
    _Status.kTimeLimit: RunState.TIME_LIMIT,
    _Status.kMemoryLimit: RunState.SIZE_LIMIT,
}


def run_state(status: highspy.HighsModelStatus) -> RunState:
    """HiGHS's model status → the neutral run state."""
    return _STATES.get(status, RunState.OTHER)


class HighsSolver(MilpSolver):
    """HiGHS backend. Its thread count stays HiGHS's own: the option binds a process-wide
    scheduler that cannot change once started."""

    name = "highs"

    def _optimize(self, model: MilpModel, time_limit: float) -> MilpRun:
        return optimize(model, time_limit)


def optimize(model: MilpModel, time_limit: float) -> MilpRun:
    """Solve the MILP `model` by HiGHS within `time_limit` seconds (> 0)."""
    highs = new_highs()
    try:
        for key, value in OPTIONS.items():
            highs.setOptionValue(key, value)
        highs.setOptionValue("time_limit", float(time_limit))
        if highs.passModel(highs_lp(model)) == highspy.HighsStatus.kError:
            raise RuntimeError("HiGHS rejected the model")
        if highs.run() == highspy.HighsStatus.kError:
            raise RuntimeError(f"HiGHS failed: {highs.modelStatusToString(highs.getModelStatus())}")
        status = highs.getModelStatus()
        raw = highs.modelStatusToString(status)
        feasible = highs.getInfo().primal_solution_status == highspy.kSolutionStatusFeasible
        values = np.array(highs.getSolution().col_value, dtype=np.float64) if feasible else None
        return MilpRun(run_state(status), raw, values)
    finally:
        highs.clear()


def write_model(model: MilpModel, path: str, name: str) -> None:
    """Write the model to `path` in the format of its extension (`.mps`: fixed MPS, `.lp`: CPLEX LP),
    every double with 17 significant digits (it reads back the same); the columns named s{i}
    (selectors), y{i} (the input point), f (the output) and v{j} (the others), the rows r{j}."""
    lp = highs_lp(model)
    names = [f"v{j}" for j in range(lp.num_col_)]
    for i, (s, y) in enumerate(zip(model.selectors.tolist(), model.inputs.tolist(), strict=True)):
        names[s], names[y] = f"s{i}", f"y{i}"
    names[model.output] = "f"
    lp.col_names_, lp.row_names_, lp.model_name_ = names, [f"r{j}" for j in range(lp.num_row_)], name
    highs = new_highs()
    try:
        highs.setOptionValue("output_flag", False)
        if highs.passModel(lp) == highspy.HighsStatus.kError or highs.writeModel(path) == highspy.HighsStatus.kError:
            raise RuntimeError(f"HiGHS could not write {path}")
    finally:
        highs.clear()


def highs_lp(model: MilpModel, relaxed: bool = False) -> highspy.HighsLp:
    """The model as a HighsLp with a column-wise matrix (`relaxed`: its LP relaxation, every
    variable continuous)."""
    rows, columns = model.shape
    matrix = model.matrix.tocsc()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = columns, rows
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = model.objective, model.lower, model.upper
    lp.row_lower_, lp.row_upper_ = model.row_lower, model.row_upper
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = columns, rows
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = matrix.indptr, matrix.indices, matrix.data
    if not relaxed:
        kinds = highspy.HighsVarType.kInteger, highspy.HighsVarType.kContinuous
        lp.integrality_ = [kinds[0] if flag else kinds[1] for flag in model.integer]
    return lp

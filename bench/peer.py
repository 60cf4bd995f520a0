"""The peer of the solver benches: the MILP a user builds with gurobi-machinelearning's encoder
(`add_predictor_constr` on the network as a torch model), one binary per feature choosing which
features move, minimizing their count, every answer replayed exactly as cardinal's own are.
Shared by `bench.solvers` and `bench.heldout` (its own module, so that neither imports the other).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import time

import numpy as np
import torch
from cardinal.solvers.base import replay
from cardinal.solvers.oracle import SetOracle

from cardinal.network import Network
from cardinal.problem import Outcome, Problem, Status, stopped

PEER = "gurobi-ml"


class Peer:
    """The peer MILP of the module docstring, one Gurobi environment and one exact set oracle (the
    replay's, kept as `solve_minimum` keeps its own) for all its calls."""

    name = PEER

    def __init__(self) -> None:
        import gurobipy as gp

        self.env = gp.Env(empty=True)
        self.env.setParam("OutputFlag", 0)
        self.env.start()
        self.oracle = SetOracle()

    def close(self) -> None:
        self.env.dispose()
        self.oracle.close()

    def solve(self, torch_model: torch.nn.Sequential, problem: Problem, at_most: int | None, time_limit: float) -> Outcome:
        """The minimum explanation (`at_most` None) or one of size ≤ `at_most`, replayed exactly.
        Monotone networks: the bound vectors of the shortcut; others (CXps on a real box): x free
        in the box where s_i = 1. An AXp of a non-monotone network has no single-MILP form:
        unsupported, as on a binary box."""
        import gurobipy as gp
        from gurobi_ml import add_predictor_constr
        from gurobipy import GRB

        started = time.perf_counter()
        if not problem.monotone and (problem.kind == "abductive" or problem.domain.binary):
            return Outcome(Status.UNSUPPORTED, PEER, 0.0, message="no single MILP of the peer's form")
        base, target, n = problem.base, problem.target, problem.n
        lower, upper, x0 = problem.domain.lower, problem.domain.upper, problem.x
        solution, witness = None, None
        with gp.Model(env=self.env) as model:
            model.Params.Threads = 1
            model.Params.TimeLimit = time_limit
            s = model.addMVar(n, vtype=GRB.BINARY)
            if problem.monotone:
                x = model.addMVar((1, n), lb=np.minimum(base, target), ub=np.maximum(base, target))
                model.addConstr(x[0] == base + (target - base) * s)
                goal = problem.goal
            else:
                x = model.addMVar((1, n), lb=lower, ub=upper)
                model.addConstr(x[0] >= x0 - (x0 - lower) * s)
                model.addConstr(x[0] <= x0 + (upper - x0) * s)
                goal = 1 - problem.prediction
            y = model.addMVar((1, 1), lb=-GRB.INFINITY)
            try:
                add_predictor_constr(model, torch_model, x, y)
                model.addConstr(y[0, 0] >= problem.threshold + problem.epsilon if goal == 1 else y[0, 0] <= problem.threshold)
                if at_most is not None:
                    model.addConstr(s.sum() <= at_most)
                model.setObjective(s.sum(), GRB.MINIMIZE)
                model.optimize()
            except gp.GurobiError as error:
                if error.errno != 10010:  # "Model too large for size-limited license"
                    raise
                return Outcome(Status.SIZE_LIMIT, PEER, time.perf_counter() - started, message=str(error))
            if model.SolCount > 0:
                chosen = np.asarray(s.X) > 0.5
                solution = tuple(int(i) for i in np.flatnonzero(chosen))
                moved = target if problem.monotone else np.clip(x.X[0], lower, upper)
                point = np.where(chosen, moved, base)  # base is x where the box is free
                witness = tuple(float(v) for v in point)
            if model.Status == GRB.OPTIMAL:
                status = Status.OPTIMAL
            elif model.Status in (GRB.INFEASIBLE, GRB.INF_OR_UNBD):
                status = Status.NONE_WITHIN if at_most is not None else Status.NONE_EXISTS
            elif model.Status == GRB.TIME_LIMIT:
                status, solution = stopped(solution, at_most)
                witness = witness if solution is not None else None
            else:
                status = Status.ERROR
            raw = str(model.Status)
        outcome = Outcome(status, PEER, time.perf_counter() - started, solution, witness, raw_status=raw)
        return dataclasses.replace(replay(problem, outcome, time_limit, self.oracle), seconds=time.perf_counter() - started)


def peer_model(net: Network) -> torch.nn.Sequential:
    """The network as its user's torch model: Linear and ReLU modules (no Identity at the output)."""
    return torch.nn.Sequential(*[module for module in net.to_torch() if not isinstance(module, torch.nn.Identity)])


def peer_available() -> bool:
    return importlib.util.find_spec("gurobi_ml") is not None and importlib.util.find_spec("gurobipy") is not None

"""cardinal: cardinality-minimal explanations of neural-network predictions, certified exactly.

The public API in one place. Three folders, three layers, each importing only the ones below:
the core in this package (`cardinal.network`, `cardinal.problem`, `cardinal.exact`, ..., the greedy
explainer `cardinal.greedy`, and the model-file readers in `cardinal.formats`), the exact engines
in `cardinal.solvers` (backends behind one front, imported lazily by name, so `import cardinal`
needs none of their libraries), and the application in `cardinal.verify` (certify, check,
campaigns, reports, the `cardinal` command).

The names below are imported on first use (PEP 562): `import cardinal` itself imports nothing
heavy (torch takes seconds), so that the `cardinal` command's first lines (`cardinal.verify.launch`)
run before torch loads.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .activations import Activation, Step
    from .domain import Domain
    from .errors import InputError
    from .greedy import ExplainResult, explain, explain_reference
    from .network import Layer, Network
    from .problem import Kind, MissingSolutionError, Outcome, Problem, Status, Verdict
    from .solvers.base import SOLVER_NAMES, available_solvers, get_solver, solve_minimum

_HOMES = {  # each public name → the module that defines it
    **dict.fromkeys(("Activation", "Step"), ".activations"),
    "Domain": ".domain",
    "InputError": ".errors",
    **dict.fromkeys(("ExplainResult", "explain", "explain_reference"), ".greedy"),
    **dict.fromkeys(("Layer", "Network"), ".network"),
    **dict.fromkeys(("Kind", "MissingSolutionError", "Outcome", "Problem", "Status", "Verdict"), ".problem"),
    **dict.fromkeys(("SOLVER_NAMES", "available_solvers", "get_solver", "solve_minimum"), ".solvers.base"),
}

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


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name], __name__), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

"""cardinal: cardinality-minimal explanations of neural-network predictions, certified exactly.

The public API in one place. Three folders, three layers, each importing only the ones below:
the core in this package (`cardinal.network`, `cardinal.problem`, `cardinal.exact`, ..., the greedy
explainer `cardinal.greedy`, and the model-file readers in `cardinal.formats`), the exact engines
in `cardinal.solvers` (backends behind one front, imported lazily by name, so `import cardinal`
needs none of their libraries), and the application in `cardinal.verify` (certify, check,
campaigns, reports, the `cardinal` command).

`cardinal.explain(model, x, kind)` is the front door: it explains and proves in one call
(`cardinal.verify.explanation`; `cardinal.Explainer` keeps the exact solvers between calls); the
batched greedy explainer alone is `cardinal.greedy.explain`.

The public names are imported on first use (PEP 562), so `import cardinal` and `cardinal --help`
import neither numpy's users nor torch; the core itself loads torch on its first float
computation (`cardinal.lazy`), so that a small `cardinal explain`, answered in exact arithmetic
(`cardinal.algorithm1`), never does.
`__version__` is the installed package's version (its one source is pyproject.toml).
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {  # public name → the module that defines it
    "Activation": "activations",
    "Step": "activations",
    "Domain": "domain",
    "BackendUnavailable": "errors",
    "CardinalError": "errors",
    "InputError": "errors",
    "Stopped": "errors",
    "Undecided": "errors",
    "UndecidedPrediction": "errors",
    "ExplainResult": "greedy",
    "Explainer": "verify.explanation",
    "Explanation": "verify.explanation",
    "explain": "verify.explanation",
    "Layer": "network",
    "Network": "network",
    "Evidence": "problem",
    "Kind": "problem",
    "MissingSolutionError": "problem",
    "Outcome": "problem",
    "Problem": "problem",
    "Status": "problem",
    "Termination": "problem",
    "Verdict": "problem",
    "SOLVER_NAMES": "solvers.base",
    "available_solvers": "solvers.base",
    "get_solver": "solvers.base",
    "solve_minimum": "solvers.base",
}

__all__ = sorted([*_PUBLIC, "__version__"])


def __getattr__(name: str) -> Any:
    """A public name, `__version__`, or a submodule (`cardinal.network`), imported on first use."""
    if name in _PUBLIC:
        value = getattr(importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)
    elif name == "__version__":
        from .version import package_version

        value = package_version()
    elif name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:
        try:
            value = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value  # the next look-up is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

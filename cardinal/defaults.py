"""The defaults every driver shares, defined once (a module of constants that imports nothing, so
that the command line reads them without loading numpy)."""

DEFAULT_EPSILON = 1e-6  # the MILP margin to reach a class: f ≥ t + ε (docs/design.md §4)
DEFAULT_TIME_LIMIT = 60.0  # seconds per exact solver call, deletion question and certificate search
DEFAULT_TRAVERSAL = "sensitivity"  # the deletion explainer's order (`solvers.deletion.TRAVERSALS`)

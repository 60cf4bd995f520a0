"""The one registry of backends: what each one is, how to make it, and what it can do.

Every list of backend names and every choice among them reads `BACKENDS`: `solvers.base`
(`get_solver`, `available_solvers`, `auto_solver`), the exact set oracle's engines
(`solvers.oracle`), certify's default set (`verify.certify.proving_solvers`), campaigns' default
set and the CLI's `--solvers` (`verify.commands.common`). A capability is a promise: a backend
declared to handle a problem (`Backend.handles`) answers it with a real answer, never
`unsupported`; one declared not to is never chosen for it by default (it may still be named, and
then answers `unsupported` where it cannot encode the problem). The VNN-COMP tools
(`vnncomp:TOOLDIR`, `solvers.vnncomp`) are named by folder, not listed here.

Capabilities (docs/architecture.md, "The backend registry"):

- `exact`: its "nothing smaller" (NONE_WITHIN, NONE_EXISTS, OPTIMAL's minimality) is a proof in
  exact arithmetic; a float solver's is a claim to replay (`cardinal.problem.Outcome.proves`).
- `activations`: `relu` (ReLU hidden layers, identity or ReLU output), `piecewise-linear`,
  `smooth-if-monotone` (piecewise linear, or any activation on a network with the monotone
  shortcut), or `any`.
- `classes`: networks of K ≥ 2 outputs (argmax) besides K = 1 (threshold).
- `real_boxes`, `binary_boxes`: continuous boxes (ε-balls included: a ball is a box) and binary
  boxes, on every network it handles; where False, only on networks with the monotone shortcut
  (whose questions never need a point inside the box).
- `kinds`: the explanation kinds it answers.
- `max_features`: offered by default (certify, campaigns, benches, the oracle's questions) up to
  this many features; None: any number. `auto_features`: `auto_solver` prefers it up to here.
- `lemmas`: its outcomes carry certificate lemmas (`Outcome.lemmas`, from the implicit
  hitting-set loop) where it proves a minimum AXp or none within k.
- `benchmark_only`: left out of every default set (run when named, or with `all`).
- `flip_search`: the class that serves as the exact set oracle's engine (`solvers.oracle`), asked
  in `flip_order`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from cardinal.domain import Domain
from cardinal.network import Network
from cardinal.problem import KINDS

Activations = Literal["relu", "piecewise-linear", "smooth-if-monotone", "any"]
_RELU = ("relu", "identity")


@dataclass(frozen=True)
class Backend:
    """One backend as the registry declares it (module docstring: what each field promises)."""

    name: str
    module: str
    factory: str
    exact: bool
    extra: str | None = None  # the pip extra that installs its library (None: cardinal's own)
    activations: Activations = "piecewise-linear"
    classes: bool = True
    real_boxes: bool = True
    binary_boxes: bool = True
    kinds: tuple[str, ...] = KINDS
    max_features: int | None = None
    auto_features: int = 0
    lemmas: bool = False
    benchmark_only: bool = False
    flip_search: str | None = None
    flip_order: int = 0

    def handles(self, net: Network, domain: Domain, kind: str | None = None, general: bool = False) -> bool:
        """Whether it answers problems on `net` over `domain` (of `kind`; None: either) by its
        declared capabilities. `general`: as questions that do not take the monotone shortcut
        (the oracle's flip searches)."""
        shortcut = net.has_monotone_shortcut and not general
        if kind is not None and kind not in self.kinds:
            return False
        if net.n_outputs > 1 and not self.classes:
            return False
        if self.activations == "relu":
            activations = set(net.activation_names) <= set(_RELU)
        elif self.activations == "piecewise-linear":
            activations = net.is_piecewise_linear
        elif self.activations == "smooth-if-monotone":
            activations = net.is_piecewise_linear or shortcut
        else:
            activations = True
        boxes = self.binary_boxes if domain.binary else self.real_boxes
        return activations and (boxes or shortcut)

    def offered(self, net: Network, domain: Domain) -> bool:
        """Whether a default set offers it for this network: it handles it, within `max_features`."""
        return self.handles(net, domain) and (self.max_features is None or net.n_inputs <= self.max_features)


# Backends answered in the caller's process, no solver process started, up to this many features:
# those whose own time limit holds there (enumerate checks its deadline between batches, each a
# bounded exact batch), where a process's start would cost more than the question (issue 51).
IN_PROCESS_FEATURES: dict[str, int] = {"enumerate": 16}


def in_process(name: str, n: int) -> bool:
    """Whether backend `name` answers a problem of n features in the caller's process (`IN_PROCESS_FEATURES`)."""
    return n <= IN_PROCESS_FEATURES.get(name, -1)


# In this order `available_solvers` lists them (and certify's pool runs them).
BACKENDS: dict[str, Backend] = {
    backend.name: backend
    for backend in (
        Backend("gurobi", "cardinal.solvers.gurobi", "GurobiSolver", exact=False, extra="gurobi", lemmas=True),
        Backend("highs", "cardinal.solvers.highs", "HighsSolver", exact=False, extra="highs", lemmas=True),
        # 40: z3's full encoding of a non-monotone network rarely decides beyond this within a call's limit
        Backend("z3", "cardinal.solvers.smt", "Z3Solver", exact=True, extra="z3", activations="smooth-if-monotone",
                max_features=40, lemmas=True, flip_search="Z3FlipSearch", flip_order=3),
        # 20: 2^20 vertices took 4.4 s (20 × 16 × 16 ReLU network, no flip); at 28 features half a
        # campaign's calls timed out. 12: up to here it answers in milliseconds (2^12 sets or vertices).
        Backend("enumerate", "cardinal.solvers.enumerate", "EnumerateSolver", exact=True, activations="any",
                real_boxes=False, max_features=20, auto_features=12, flip_search="EnumerateSolver", flip_order=1),
        Backend("cvc5", "cardinal.solvers.cvc", "Cvc5Solver", exact=True, extra="cvc5", lemmas=True, benchmark_only=True),
        Backend("scip", "cardinal.solvers.scip", "ScipSolver", exact=False, extra="scip", lemmas=True, benchmark_only=True),
        Backend("marabou", "cardinal.solvers.marabou", "MarabouSolver", exact=False, extra="marabou", activations="relu",
                classes=False, binary_boxes=False, lemmas=True, benchmark_only=True),
        Backend("exact-milp", "cardinal.solvers.exact_milp", "ExactMilpSolver", exact=True, extra="highs", lemmas=True,
                flip_search="ExactMilpFlipSearch", flip_order=2),
    )
}
SOLVER_NAMES: tuple[str, ...] = tuple(BACKENDS)
BENCHMARK_ONLY: tuple[str, ...] = tuple(name for name, backend in BACKENDS.items() if backend.benchmark_only)


def backend(name: str) -> Backend | None:
    """The registry's entry for `name`, or None (an unknown name, or a VNN-COMP tool)."""
    return BACKENDS.get(name)


def enumerate_first(net: Any, domain: Any) -> bool:
    """Whether `auto` asks enumerate first on `net` over `domain`: a problem of at most its
    `auto_features` features that it declares it handles (`solvers.base.auto_solver`, and the
    certify pool deciding which solver processes to start)."""
    tiny = BACKENDS["enumerate"]
    return net.n_inputs <= tiny.auto_features and tiny.handles(net, domain)

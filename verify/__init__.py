"""cardinal's core: networks, domains, greedy explanations and exact checks.

`import verify` needs only torch, numpy and mpmath; the exact solvers live in `solvers` and are
imported lazily by the commands that call them.
"""

from verify.activations import Activation, Step
from verify.domain import Domain
from verify.errors import InputError
from verify.greedy import ExplainResult, explain, explain_reference
from verify.network import Layer, Network

__all__ = ["Activation", "Domain", "ExplainResult", "InputError", "Layer", "Network", "Step", "explain", "explain_reference"]

"""cardinal's core: networks, domains, greedy explanations and exact checks.

`import cardinal.verify` needs only torch, numpy and mpmath; the exact solvers live in
`cardinal.solvers` and are imported lazily by the commands that call them.
"""

from .activations import Activation, Step
from .domain import Domain
from .errors import InputError
from .greedy import ExplainResult, explain, explain_reference
from .network import Layer, Network

__all__ = ["Activation", "Domain", "ExplainResult", "InputError", "Layer", "Network", "Step", "explain", "explain_reference"]

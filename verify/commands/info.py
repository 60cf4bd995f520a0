"""`cardinal info`: summarise a model file: inputs, outputs, layers, parameters, monotonicity per feature. Its
flags (`_add_info`) and its handler.
"""

from __future__ import annotations

import argparse
import json
import sys

from .common import _load_network, _network_file_arguments


def _add_info(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    info = commands.add_parser(
        "info",
        help="summarise a model file: inputs, outputs, layers, parameters, monotonicity per feature",
        description="Print a summary of a network file (JSON, ONNX or torch): inputs and input_shape, outputs (K) and "
        "the prediction rule, class names, layers and activations, parameter count, whether it is monotone (all "
        "weights ≥ 0), sign-monotone (every feature non-decreasing or non-increasing) or partially monotone (some "
        "features mixed), the per-feature directions found by sign analysis (+ - 0 ?), and the parts of the file "
        'dropped on reading. --json prints one JSON object: {"file", "hash", "inputs", "input_shape", '
        '"feature_names", "outputs", "prediction", "threshold", "class_names", "layers", "parameters", "monotone", '
        '"sign_monotone", "partially_monotone", "directions", "dropped"}. Exit 2 on a file that cannot be read.',
    )
    info.add_argument("network", help="network file: .json, .onnx, .pt/.pth")
    _network_file_arguments(info, "a state_dict file")
    info.add_argument("--json", action="store_true", help="one JSON object instead of text")
    info.set_defaults(handler=_info)


def _info(args: argparse.Namespace) -> int:
    from cardinal.verify.info import summary, text

    document = summary(_load_network(args.network, args), args.network)
    sys.stdout.write(json.dumps(document) + "\n" if args.json else text(document))
    return 0

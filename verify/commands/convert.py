"""`cardinal convert`: convert a network between JSON, ONNX and torch files (by extension: .json, .onnx,
.pt/.pth). Its flags (`_add_convert`) and its handler.
"""

from __future__ import annotations

import argparse
import sys

from cardinal.validate import output_file

from .common import _load_network, _network_file_arguments


def _add_convert(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    convert = commands.add_parser(
        "convert",
        help="convert a network between JSON, ONNX and torch files (by extension: .json, .onnx, .pt/.pth)",
        description="Read IN (JSON, ONNX, or a torch file: a whole nn.Sequential or a state_dict with --activations) and "
        "write OUT in the format of its extension. ONNX and torch files hold float64 weights, so the network is the "
        "same exactly; a .pt file holds the whole nn.Sequential unless --state-dict.",
    )
    convert.add_argument("input", help="network file to read")
    convert.add_argument("output", help="file to write: .json, .onnx, .pt or .pth")
    _network_file_arguments(convert, "a state_dict input")
    convert.add_argument("--float32", action="store_true", help="ONNX/torch output in float32 (rounds the weights; warns)")
    convert.add_argument(
        "--state-dict", action="store_true", help="torch output as a state_dict (prints the --activations to load it)"
    )
    convert.set_defaults(handler=_convert)


def _convert(args: argparse.Namespace) -> int:
    import numpy as np

    from cardinal.formats.loaders import activation_flag, format_for_output
    format_for_output(args.output)  # fail on the extension and the path before reading anything
    output_file(args.output, "OUT")
    net = _load_network(args.input, args)
    net.save(args.output, float32=args.float32, state_dict=args.state_dict)
    print(f"{args.input} → {args.output}: {net}", file=sys.stderr)
    for note in net.metadata.dropped or ():
        print(f"note: {note}", file=sys.stderr)
    arrays = [array for layer in net.layers for array in (layer.weight, layer.bias)]
    rounded = sum(int(np.count_nonzero(array.astype(np.float32) != array)) for array in arrays) if args.float32 else 0
    if rounded:
        print(f"warning: float32 rounded {rounded} weight(s)/bias(es): {args.output} is not exactly the network", file=sys.stderr)
    if args.state_dict:
        flag = activation_flag(layer.activation for layer in net.layers)
        print(f"a state_dict holds no activations: load it with --activations {flag}", file=sys.stderr)
    return 0

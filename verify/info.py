"""`cardinal info NET`: a summary of a model file — inputs and their shape, outputs and the
prediction rule, layers and activations, parameter count, monotonicity (all weights ≥ 0,
sign-monotone, partially monotone) with the per-feature directions (`cardinal.signs`), and what
the reader dropped. `summary` gives the JSON document (`--json`), `text` the human lines.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cardinal import signs
from cardinal.network import Network

_WORDS = {signs.INCREASING: "non-decreasing (+)", signs.DECREASING: "non-increasing (-)", signs.CONSTANT: "no influence (0)"}


def summary(net: Network, source: str) -> dict[str, Any]:
    """The model's summary as a JSON document (docs/formats.md, "cardinal info")."""
    metadata = net.metadata
    classes = net.n_outputs
    return {
        "file": source,
        "hash": net.hash,
        "inputs": net.n_inputs,
        "input_shape": None if metadata.input_shape is None else list(metadata.input_shape),
        "feature_names": None if metadata.feature_names is None else list(metadata.feature_names),
        "outputs": classes,
        "prediction": "threshold" if classes == 1 else "argmax",
        "threshold": metadata.threshold if classes == 1 else None,
        "class_names": None if metadata.class_names is None else list(metadata.class_names),
        "layers": [{"width": layer.width, "activation": layer.activation.name} for layer in net.layers],
        "parameters": int(sum(layer.weight.size + layer.bias.size for layer in net.layers)),
        "monotone": net.is_monotone,
        "sign_monotone": net.is_sign_monotone,
        "partially_monotone": net.is_partially_monotone,
        "directions": signs.to_json(net.directions, net.output_directions),
        "dropped": list(metadata.dropped or ()),
    }


def text(document: dict[str, Any]) -> str:
    """The summary for a person, one fact per line."""
    names = document["feature_names"]

    def features(indices: np.ndarray) -> str:
        shown = [f"{i} {names[i]}" if names else str(i) for i in indices[:20]]
        return ", ".join(shown) + (f", … ({len(indices) - 20} more)" if len(indices) > 20 else "")

    shape = document["input_shape"]
    lines = [
        f"model: {document['file']} (layers' hash {document['hash']})",
        f"inputs: {document['inputs']}" + (f", shape {' × '.join(map(str, shape))} (row-major)" if shape else ""),
    ]
    if document["outputs"] == 1:
        threshold = document["threshold"]
        lines.append(
            f"outputs: 1, class 1 iff f(x) > t (t = {0.0 if threshold is None else threshold}"
            f"{'' if threshold is not None else ', the default'})"
        )
    else:
        classes = document["class_names"]
        named = f": {', '.join(classes)}" if classes else ""
        lines.append(f"outputs: {document['outputs']} classes by argmax, ties to the lowest index{named}")
    layers = " → ".join([str(document["inputs"]), *(f"{layer['width']} {layer['activation']}" for layer in document["layers"])])
    lines += [f"layers: {len(document['layers'])}: {layers}", f"parameters: {document['parameters']}"]
    yes = {True: "yes", False: "no"}
    lines.append(
        f"monotone (all weights ≥ 0): {yes[document['monotone']]}; sign-monotone: {yes[document['sign_monotone']]}; "
        f"partially monotone: {yes[document['partially_monotone']]}"
    )
    directions = document["directions"]
    if "each" in directions:
        of = "f" if document["outputs"] == 1 else "the logit difference f_1 − f_0"
        codes = np.array([{v: k for k, v in signs.CHARACTERS.items()}[c] for c in directions["each"]])
        lines.append(f"directions of {of}: {signs.describe(codes)}")
        for code, word in (*_WORDS.items(), (signs.MIXED, "mixed (unknown)")):
            chosen = np.flatnonzero(codes == code)
            if len(chosen) and len(chosen) < len(codes):
                lines.append(f"  {word}: {features(chosen)}")
    else:
        lines.append("directions: none for the argmax of 3 or more outputs; per output (+ - 0 ?):")
        lines += [f"  output {k}: {row}" for k, row in enumerate(directions["outputs"])]
    lines += [f"dropped: {note}" for note in document["dropped"]] or ["dropped: nothing"]
    return "\n".join(lines) + "\n"

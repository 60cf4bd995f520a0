"""`cardinal train`: train a fully monotone network on a dataset (projected Adam, as in the paper). Its flags
(`_add_train`) and its handler.
"""

from __future__ import annotations

import argparse

from cardinal.validate import count, positive_number


def _add_train(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    from cardinal.verify.datasets import dataset_names

    train = commands.add_parser(
        "train",
        help="train a fully monotone network on a dataset (projected Adam, as in the paper)",
        description="Fully monotone ReLU network: Adam, negative weights clamped to 0 after every step; "
        "prints the test RMSE (regression) or accuracy (classification).",
    )
    train.add_argument("--dataset", required=True, help=f"{', '.join(dataset_names())}, or csv:PATH (with --target)")
    train.add_argument("--out", required=True, help="network file to write (JSON, cardinal.network/1)")
    train.add_argument("--target", help="label column of a csv:PATH dataset")
    train.add_argument("--task", choices=("regression", "classification"), help="for csv:PATH (default: inferred)")
    train.add_argument("--data-dir", help="folder with the data files (default: $CARDINAL_DATA, else ../shared/data)")
    train.add_argument("--hidden", type=_widths, default=(64, 64), help="hidden widths, e.g. 64,64 or none (default 64,64)")
    train.add_argument("--epochs", type=count(1), default=10, help="training epochs (default 10)")
    train.add_argument("--seed", type=count(0), default=0, help="seed for initialisation and shuffling (default 0)")
    train.add_argument("--lr", type=positive_number, default=1e-3, help="Adam learning rate (default 1e-3)")
    train.add_argument("--batch-size", type=count(1), default=32, help="batch size (default 32)")
    train.add_argument(
        "--balanced",
        action="store_true",
        help="classification: weight the positive class by negatives/positives (without it a rare class may never be "
        "predicted)",
    )
    train.add_argument("--export-test", metavar="FILE.csv", help="also write the test inputs (header: feature names)")
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    train.set_defaults(handler=_train)


def _train(args: argparse.Namespace) -> int:
    from cardinal.verify.train import run_train  # torch and the datasets' readers only for this command

    return run_train(args)


def _widths(text: str) -> tuple[int, ...]:
    """`--hidden`: comma-separated layer widths ≥ 1, or `none` for no hidden layer."""
    if text.strip().lower() in ("", "none"):
        return ()
    try:
        widths = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of layer widths") from None
    if any(width < 1 for width in widths):
        raise argparse.ArgumentTypeError(f"layer widths must be ≥ 1, got {text!r}")
    return widths

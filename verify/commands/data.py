"""`cardinal data`: check the data files of the paper suite (every missing or altered file at once). Its flags
(`_add_data`) and its handler.
"""

from __future__ import annotations

import argparse


def _add_data(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    data = commands.add_parser(
        "data",
        help="check the data files of the paper suite (every missing or altered file at once)",
        description="`cardinal data check`: each data file the named datasets read, with its state (ok, missing, "
        "checksum differs) and public source. Exit 0 when all are present and intact, 1 otherwise.",
    )
    data.add_argument("action", choices=("check",), help="check: list every data file with its state")
    data.add_argument("--data-dir", help="the data folder (default: $CARDINAL_DATA, else ../shared/data)")
    data.set_defaults(handler=_data)


def _data(args: argparse.Namespace) -> int:
    from cardinal.verify.datasets import check_data_files, data_directory
    from tabulate import tabulate

    states = check_data_files(None, args.data_dir)
    rows = [(file.relative, state, ", ".join(file.datasets), file.source) for file, state in states]
    print(f"data folder: {data_directory(args.data_dir)}")
    print(tabulate(rows, headers=["file", "state", "datasets", "public source"], tablefmt="simple"))
    bad = [file.relative for file, state in states if state != "ok"]
    if bad:
        print(f"{len(bad)} of {len(states)} data files missing or altered: {', '.join(bad)}")
        return 1
    print(f"all {len(states)} data files present with the expected SHA-256")
    return 0

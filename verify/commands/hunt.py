"""`cardinal hunt`: search random and SET-COVER networks for instances where greedy is not minimal; shrink and
save them. Its flags (`_add_hunt`) and its handler.
"""

from __future__ import annotations

import argparse
import sys
import time

from cardinal.validate import count, output_directory, seconds

MAX_HUNT_FEATURES = 20  # hunt certifies by exhaustive enumeration


def _add_hunt(commands: argparse._SubParsersAction, problem: argparse.ArgumentParser) -> None:
    hunt = commands.add_parser(
        "hunt",
        help="search random and SET-COVER networks for instances where greedy is not minimal; shrink and save them",
        description="Search for `--seconds`: random small monotone networks (and, for step and hardtanh, the paper's "
        "SET-COVER reduction), each input and kind checked by exhaustive enumeration, so every find is exact. Each "
        "find is shrunk (fewer features, units and layers, rounder numbers) while greedy stays suboptimal; per kind, "
        "source and tie rescue the smallest is kept and saved as a case file (`cardinal replay` re-checks it). "
        "Finding nothing is no proof that nothing exists.",
    )
    hunt.add_argument(
        "--activation",
        choices=("relu", "hardtanh", "step", "sigmoid"),
        default="relu",
        help="the hidden units of the networks searched (default relu)",
    )
    hunt.add_argument(
        "--max-features",
        type=count(3, MAX_HUNT_FEATURES),
        default=8,
        help=f"largest random network input size, 3 to {MAX_HUNT_FEATURES} (default 8)",
    )
    hunt.add_argument("--seconds", type=seconds, default=60.0, help="search time, shrinking included (default 60)")
    hunt.add_argument(
        "--seed", type=count(0), default=0, help="seed of the random networks: the same seed searches the same ones (default 0)"
    )
    hunt.add_argument("--out", required=True, help="directory for the case files (cardinal.case/1), made if missing")
    hunt.set_defaults(handler=_hunt)


def _hunt(args: argparse.Namespace) -> int:
    from cardinal.verify.hunt import KEPT, hunt
    from tabulate import tabulate

    out = output_directory(args.out, "--out")
    bar, report = _ticker(f"hunt {args.activation}")
    try:
        result = hunt(args.activation, args.max_features, args.seconds, args.seed, progress=report)
    finally:
        if bar is not None:
            bar.close()
    rows = []
    for found in result.smallest:
        path = found.case().save(out)
        rows.append(
            [
                found.kind,
                found.source,
                result.finds_by.get((found.kind, found.source), 0),
                "yes" if found.tie_decided else "no",  # another tie order rescues greedy (or undetermined)
                found.net.n_inputs,
                "-".join(map(str, found.net.widths)),
                len(found.greedy),
                len(found.minimum),
                str(path),
            ]
        )
    checked = f"{result.tried} instance/kind pairs checked in {result.seconds:.0f} s"
    print(f"hunt {args.activation}: {checked}, {result.raw_finds} counterexample(s) found")
    if rows:
        print(f"kept {len(rows)} of {result.raw_finds}, {KEPT} (the group's other finds are not saved), in {out}/:")
        headers = ["kind", "source", "finds", "tie rescue", "n", "widths", "greedy", "minimum", "case file"]
        print(tabulate(rows, headers=headers, tablefmt="simple"))
    else:
        print(f"no instance where greedy is not minimal was found for {args.activation} (that is not a proof that none exists)")
    return 0


def _ticker(label: str, every: float = 5.0):
    """For an open-ended search: a counting tqdm bar on a terminal, else a line every `every` s.
    Returns (bar or None, callback(checked, found))."""
    if sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(desc=label, unit="pair", file=sys.stderr)

        def count(checked: int, found: int) -> None:
            bar.set_postfix(found=found, refresh=False)
            bar.update(checked - bar.n)

        return bar, count
    last = [time.monotonic()]

    def plain(checked: int, found: int) -> None:
        if time.monotonic() - last[0] >= every:
            print(f"{label}: {checked} instance/kind pairs checked, {found} counterexample(s) found", file=sys.stderr, flush=True)
            last[0] = time.monotonic()

    return None, plain

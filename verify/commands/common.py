"""What several `cardinal` commands share: the argument parser with one-line errors, the problem
flags (network, inputs, kind, threshold, domain, --out) and their reading, the CI flags (--baseline,
--fail-on), the --proof flags, JSON-lines output and progress on stderr. Each command's own module
(`cardinal.verify.commands.NAME`) imports what it uses from here; nothing here imports a command.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from cardinal.defaults import DEFAULT_EPSILON, DEFAULT_TIME_LIMIT, DEFAULT_TRAVERSAL
from cardinal.errors import BackendUnavailable, CardinalError, InputError
from cardinal.validate import (
    finite_number,
    input_shape,
    number_list,
    output_file,
    positive_number,
    row_selection,
    rows_chosen,
    seconds,
)

if TYPE_CHECKING:
    from cardinal.domain import Domain
    from cardinal.network import Network


KIND_CHOICES = ("contrastive", "abductive", "both")
METHOD_CHOICES = ("greedy", "deletion")  # the explainers (`cardinal.problem.Method`)
PLAN_METHODS = ("auto", *METHOD_CHOICES)  # what certify and crosscheck judge: auto, greedy where it applies, else deletion
TRAVERSALS = ("index", "sensitivity", "quickxplain")  # `solvers.deletion.TRAVERSALS`, without importing the engines


def _traversal_argument(parser: argparse.ArgumentParser) -> None:
    """--traversal: the order of the deletion explainer's questions (explain, certify, crosscheck)."""
    parser.add_argument(
        "--traversal",
        choices=TRAVERSALS,
        default=DEFAULT_TRAVERSAL,
        help="deletion: the order of its questions — index (feature order), sensitivity (VeriX's) or quickxplain "
        "(VeriX+'s binary search: a whole block of features in one question, split only when it fails; the same answer "
        f"as sensitivity, in fewer questions where most features leave); default {DEFAULT_TRAVERSAL}",
    )


def _picture_argument(parser: argparse.ArgumentParser) -> None:
    """--picture DIR: one PNG per input and kind (explain, certify)."""
    parser.add_argument(
        "--picture",
        metavar="DIR",
        help="draw each explanation into DIR/row{R}-{kind}.png: the input, the explanation's pixels marked, and for a "
        "contrastive one its witness and witness − x; needs an image shape, the model's or --input-shape's ((H, W), "
        "(C, H, W) or (H, W, C), C = 1 or 3)",
    )


def _picture_folder(args: argparse.Namespace, net: Network) -> Path | None:
    """The --picture folder, checked before any work: the model has an image shape and the folder
    takes files (one-line `InputError` naming why not); None without --picture."""
    if getattr(args, "picture", None) is None:
        return None
    from cardinal.verify.picture import image_layout

    from cardinal.validate import output_directory

    try:
        image_layout(net.metadata.input_shape)
    except InputError as error:
        raise InputError(f"--picture: {args.network}: {error}") from None
    return output_directory(args.picture, "--picture")


def _write_picture(folder: Path, net: Network, row: int, kind: str, x, features, witness, title: str) -> None:
    """DIR/row{row}-{kind}.png of one explanation (`verify.picture.figure`), written whole, never
    through a link inside DIR (`io.write_figure`)."""
    import matplotlib.pyplot as plt
    from cardinal.verify.picture import figure

    from cardinal.io import write_figure

    drawn = figure(x, net.metadata.input_shape, kind, features, witness if kind == "contrastive" else None, title)
    try:
        write_figure(folder / f"row{row}-{kind}.png", drawn, 100, root=folder)
    finally:
        plt.close(drawn)


MAX_WORKERS = 4 * (os.cpu_count() or 1)


class UsageError(CardinalError):
    """A command-line error found by argparse; `main` prints it on one line."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (`cardinal CMD: error: ...`), handed to `main` rather than
    printed after the usage text; values such as `-1e-3` or `-1,0,0` are read as values, not as
    unknown options (argparse's own pattern knows only `-1` and `-0.5`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\.?\d[\d.eE+\-,]*$")

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.prog, f"{message} (see {self.prog} --help)")


def _input_shape_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input-shape",
        type=input_shape,
        metavar="DIMS",
        help="the input's dims without the batch axis, e.g. 1,28,28: needed for a whole torch module with Conv2d layers; "
        "for a file that declares none, recorded for --picture (one that differs from the file's is refused)",
    )


def _network_file_arguments(parser: argparse.ArgumentParser, state_dict: str) -> None:
    """--activations and --input-shape, the flags that say how to read a network file (convert, info,
    proof); `state_dict`: what --activations is for, as its help names it ("a state_dict input")."""
    parser.add_argument("--activations", help=f"for {state_dict}: one activation per Linear layer, e.g. relu,identity")
    _input_shape_argument(parser)


def _load_network(path: str, args: argparse.Namespace) -> Network:
    """The network file `path`, read with --activations and --input-shape."""
    from cardinal.network import Network

    return Network.load(path, activations=args.activations, input_shape=args.input_shape)


def _problem_flags(
    required: bool = True, out: str = "write JSON lines here instead of stdout (written whole, or not at all)"
) -> argparse.ArgumentParser:
    """Flags shared by explain, certify, check and export: network, inputs, kind, threshold,
    domain, --out (`out`: its help; `required` False: the network and --inputs may be left out,
    as `export --suite` does)."""
    parent = _Parser(add_help=False)
    parent.add_argument(
        "network",
        nargs=None if required else "?",
        help="network file: JSON (cardinal.network/1), ONNX, or torch (.pt: nn.Sequential or state_dict)",
    )
    parent.add_argument(
        "--activations",
        help="for a torch state_dict: one activation per Linear layer, e.g. relu,relu,identity "
        "(with parameters: leaky_relu:0.1, hardtanh:0:1, step:0.5)",
    )
    _input_shape_argument(parent)
    parent.add_argument(
        "--inputs", required=required, help="CSV of inputs, one per row (a header row is allowed); - reads standard input"
    )
    parent.add_argument(
        "--rows",
        type=row_selection,
        help="work on these rows of --inputs only, e.g. 3,5-9: numbered from 0 after any header, as `row` in the output "
        "(the whole file is still read and checked)",
    )
    header = parent.add_mutually_exclusive_group()
    header.add_argument(
        "--header", dest="header", action="store_true", default=None, help="the first row of --inputs is a header"
    )
    header.add_argument(
        "--no-header",
        dest="header",
        action="store_false",
        help="the first row of --inputs is data (default: a header only when none of its cells is a number)",
    )
    parent.add_argument("--kind", choices=KIND_CHOICES, default="both", help="explanation kind (default: both)")
    parent.add_argument(
        "--threshold",
        type=finite_number,
        help="prediction is 1 iff f(x) > T (default: for check, the threshold the explanations file records; else the "
        "network file's metadata.threshold; else 0); single-output networks only: a network of K ≥ 2 outputs predicts "
        "the class of the largest output",
    )
    parent.add_argument("--lower", type=number_list, help="domain lower bound: a scalar or n comma-separated values (default 0)")
    parent.add_argument("--upper", type=number_list, help="domain upper bound: a scalar or n comma-separated values (default 1)")
    parent.add_argument(
        "--domain",
        help='domain file {"lower": [...], "upper": [...]} (instead of --lower/--upper; default: for check, the domain '
        "the explanations file records; else the network file's metadata.domain; else [0, 1]^n)",
    )
    parent.add_argument("--binary", action="store_true", help="features take only their two bound values (Boolean cube)")
    parent.add_argument(
        "--radius",
        type=number_list,
        help="each input ranges over its own box, the largest box of doubles in the domain within exact distance R of x "
        "(an epsilon-ball): R one number "
        "> 0 or n comma-separated ones; recorded as 'radius' on every line (default: none, or for check the radius the "
        "explanations file records)",
    )
    parent.add_argument("--out", help=out)
    return parent


def _load_problem(args: argparse.Namespace):
    """Network, settings (threshold, domain), the chosen inputs [B, n] checked against the domain,
    and their row numbers in the file [B] (`--rows`), from the shared flags."""
    net = _network(args)
    _picture_folder(args, net)  # --picture refused before anything else is read or said
    inputs = _inputs(args, net)
    settings = _settings(args, net)
    rows = _rows(args, len(inputs))
    return net, settings, settings.domain.check(inputs, source=args.inputs)[list(rows)], rows


def _network(args: argparse.Namespace):
    return _load_network(args.network, args)


def _inputs(args: argparse.Namespace, net):
    """Every row of --inputs [B, n], as read (not yet checked against the domain)."""
    from cardinal.io import read_inputs

    return read_inputs(args.inputs, net.n_inputs, args.header)


def _settings(args: argparse.Namespace, net, recorded=None):
    """The threshold and domain (`verify.settings`); says on stderr where they came from when not
    from a flag, and every note (a mismatch with the explanations file, a constant prediction)."""
    from cardinal.verify.settings import Flags, flag_domain, resolve

    flags = Flags(args.threshold, flag_domain(net, args.domain, args.lower, args.upper), args.binary, args.radius)
    settings = resolve(net, args.network, flags, recorded)
    for line in settings.announcements():
        print(f"cardinal {args.command}: {line}", file=sys.stderr)
    for note in settings.notes:
        print(f"cardinal {args.command}: warning: {note}", file=sys.stderr)
    return settings


def _rows(args: argparse.Namespace, count: int) -> tuple[int, ...]:
    """The row numbers `--rows` chooses (all when not given), each < count."""
    if args.rows is None:
        return tuple(range(count))
    return rows_chosen(args.rows, count, args.inputs)


def _kinds(args: argparse.Namespace) -> tuple[str, ...]:
    return ("contrastive", "abductive") if args.kind == "both" else (args.kind,)


def _emit(lines: list[dict[str, Any]], out: str | None) -> None:
    from cardinal.io import write_atomic

    text = "".join(json.dumps(line) + "\n" for line in lines)
    if out is None:
        sys.stdout.write(text)
    else:
        write_atomic(out, text)


def _solver_names(spec: str | None, net: Network, domain: Domain) -> list[str]:
    """The backends `--solvers` names: a comma-separated list of the registry's names
    (`solvers.registry`; `InputError` for another) or `vnncomp:TOOLDIR`, `all` (every installed
    backend), or None: the default, every installed exact backend that applies
    (`certify.proving_solvers`)."""
    from cardinal.solvers.base import available_solvers, check_name
    from cardinal.verify.certify import proving_solvers

    if spec is None:
        names = list(proving_solvers(net, domain))
        if not names:
            raise BackendUnavailable("no exact solver applies to this network here: pip install 'cardinal[solvers]'")
        return names
    if spec.strip() == "all":
        return list(available_solvers())
    names = [name.strip() for name in spec.split(",") if name.strip()]
    if not names:
        raise InputError("--solvers needs at least one solver name")
    for name in names:  # the registry's names (`solvers.registry`), or a VNN-COMP tool's folder
        if not name.startswith("vnncomp:"):
            check_name(name)
    return names


def _ci_flags(args: argparse.Namespace, command: str):
    """--fail-on and --baseline, read and checked before any solver runs: (fail_on, baseline or None)."""
    from cardinal.verify.baseline import parse_fail_on, read_baseline

    fail_on = parse_fail_on(args.fail_on, args.baseline is not None)
    if args.diff_out is not None and args.baseline is None:
        raise InputError("--diff-out needs --baseline")
    if args.diff_out is not None:
        output_file(args.diff_out, "--diff-out")
    return fail_on, None if args.baseline is None else read_baseline(args.baseline, command)


def _ci_report(
    lines: list[dict[str, Any]], command: str, kinds, fail_on, baseline, diff_out: str | None, annotate: bool = True
) -> list[str]:
    """Compare with the baseline (with `annotate`, each record gets its "baseline" changes; the
    table goes to stderr, the changed rows as JSON lines to `diff_out`); returns the --fail-on failures."""
    from cardinal.verify.baseline import change_table, compare, entry_of, failures

    entries = [entry_of(line) for line in lines]
    changes = None
    if baseline is not None:
        changes = compare(baseline, entries, kinds)
        by_key = {(change.row, change.kind): change for change in changes}
        for line, entry in zip(lines, entries, strict=True) if annotate else ():
            change = by_key.get(entry.key)
            before = baseline.get(entry.key)
            line["baseline"] = {"changes": [] if change is None else list(change.what), "before": before and before.to_json()}
        if changes:
            print(f"{len(changes)} row(s) changed since the baseline:", file=sys.stderr)
            print(change_table(changes), file=sys.stderr)
        else:
            print("no row changed since the baseline", file=sys.stderr)
        if diff_out is not None:
            _emit([change.to_json() for change in changes], diff_out)
    return failures(fail_on, entries, changes)


def _ci_flag_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline", help="JSON lines of a previous run of the same command: report every row that changed")
    parser.add_argument(
        "--fail-on",
        help="comma-separated conditions that make the exit code 1: invalid, suboptimal, larger, changed "
        "(larger and changed need --baseline)",
    )
    parser.add_argument("--diff-out", help="write the rows that changed since --baseline here, as JSON lines")


_PROOFS_BESIDE = "OUT.proofs/, or ./cardinal-proofs/ without --out"


def _proof_flag_arguments(parser: argparse.ArgumentParser, what: str, default: str = _PROOFS_BESIDE) -> None:
    """--proof, --no-proof, --proof-embed, --proof-time-limit; `what`: what a certificate is written for, `default`:
    where (`_proof_folder`'s folder for certify and check)."""
    parser.add_argument(
        "--proof",
        metavar="DIR",
        help=f"write a certificate (cardinal.proof/1) of {what} into DIR (default {default}), each checked at once by the "
        "independent checker (`cardinal proof check FILE`); the network goes once into DIR/networks/SHA256.json",
    )
    parser.add_argument("--no-proof", action="store_true", help="make no certificates (records say proved_by: engine)")
    parser.add_argument(
        "--proof-embed", action="store_true", help="embed the network in each certificate (self-contained, larger)"
    )
    parser.add_argument(
        "--proof-time-limit",
        type=seconds,
        default=DEFAULT_TIME_LIMIT,
        metavar="S",
        help=f"seconds at most to search for each certificate (default {DEFAULT_TIME_LIMIT:g}; certify: within the "
        "row's --time-limit, what is left of it); one not found in time is recorded with \"file\": null and the reason",
    )


def _beside(out: str | None, suffix: str, fallback: str) -> Path:
    """A folder of a command's side files: beside `--out` with `suffix` (r.jsonl → r.proofs/), or
    `fallback` in the working directory when the output goes to stdout."""
    return Path(out).with_suffix(suffix) if out else Path(fallback)


def _proof_path(args: argparse.Namespace, default: Path) -> Path | None:
    """Where certificates go: `--proof DIR`, else `default` (certificates are made by default),
    None with `--no-proof`."""
    if args.no_proof:
        if args.proof is not None or args.proof_embed:
            raise InputError("--no-proof makes no certificates: drop --proof and --proof-embed, or --no-proof")
        return None
    return Path(args.proof) if args.proof is not None else default


def _exact_flag_arguments(parser: argparse.ArgumentParser, solvers: str, budget: bool = False) -> None:
    """--solvers (`solvers`: its help), --time-limit and --epsilon: the exact solvers' flags of
    certify and check. `budget`: --time-limit is each input's budget (certify, `verify.pipeline`),
    else seconds per solver call (check)."""
    parser.add_argument("--solvers", help=solvers)
    meaning = (
        "seconds per input and kind, every stage included (the explainer's exact questions, the solvers, the "
        "certificate): the row ends by then, plus at most max(2 s, 10%%), with the best answer and exact bounds held "
        "then, never a verdict from a timeout"
        if budget
        else "seconds per solver call"
    )
    help_text = f"{meaning} (default {DEFAULT_TIME_LIMIT:g})"
    parser.add_argument("--time-limit", type=seconds, default=DEFAULT_TIME_LIMIT, help=help_text)
    parser.add_argument(
        "--epsilon",
        type=positive_number,
        default=DEFAULT_EPSILON,
        help=f"MILP margin to reach class 1: f ≥ t + ε (default {DEFAULT_EPSILON:g})",
    )


def _proof_folder(args: argparse.Namespace, net):
    """The certificates' folder of certify and check (`_proof_path`, by default beside --out:
    `_PROOFS_BESIDE`; checked writable before any work), or None."""
    folder = _proof_path(args, _beside(args.out, ".proofs", "cardinal-proofs"))
    if folder is None:
        return None
    from cardinal.verify.proofs import ProofFolder, proof_directory

    return ProofFolder(proof_directory(folder, "--proof" if args.proof else "proof folder"), net, args.proof_time_limit,
                       args.proof_embed)


def _proof_report(results: list[Any], folder: Path) -> list[str]:
    """One stderr line on the certificate files of `results` (each with its `proof` entry, or None
    where no certificate was asked for); the failures (a rejected certificate is a bug). A
    record's `certified` is its verdict's exact certification, not a file: a certified verdict
    need not state an exact "nothing smaller" (check's validity verdicts, an empty minimum), and
    the generator may find no certificate in its time. So the line counts the certified results
    among those without a file and gives the reasons, the most frequent first (node counts
    dropped so that equal reasons group)."""
    entries = [(result, result.proof) for result in results if result.proof is not None]
    written = [entry for _, entry in entries if entry["file"] is not None]
    accepted = sum(entry["accepted"] for entry in written)
    without = [(result, entry) for result, entry in entries if entry["file"] is None]
    line = f"{len(written)} certificate file(s) written in {folder}/, {accepted} accepted by the checker"
    if without:
        certified = sum(bool(getattr(result, "certified", False)) for result, _ in without)
        reasons = Counter(re.sub(r" after \d+ node\(s\)", "", str(entry.get("reason"))) for _, entry in without)
        why = "; ".join(f"{reason} ({count})" for reason, count in reasons.most_common())
        line += (
            f"; {len(without)} result(s) without one, {certified} of them with a certified verdict"
            f" ('certified' is the verdict's exact check, not a file); why none: {why}"
        )
    print(line, file=sys.stderr)
    return [
        f"certificate {entry['file']} rejected by the checker: {entry['message']}" for entry in written if not entry["accepted"]
    ]


class _Progress:
    """Progress of a run of known length on stderr, shown only once the run lasts more than a
    moment: a tqdm bar on a terminal (after 1 s), else a plain line every 10 s that says what it
    counts (`cardinal check: judged 2 of 4 explanations`: done so far, not passed). With an
    outcome per explanation (`update(outcome)`), the line counts what happened instead
    (`cardinal certify: 4 of 4 explanation(s) done: 2 certified, 2 unknown`)."""

    def __init__(self, total: int, command: str, verb: str) -> None:
        self.total, self.command, self.verb, self.done = total, command, verb, 0
        self.outcomes: Counter[str] = Counter()
        self.last = time.monotonic()
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=f"{command}: {verb}", unit="expl", file=sys.stderr, delay=1.0)

    def update(self, outcome: str | None = None) -> None:
        """One more explanation done; `outcome`: what became of it (counted in the line)."""
        self.done += 1
        if outcome is not None:
            self.outcomes[outcome] += 1
        if self.bar is not None:
            if self.outcomes:
                self.bar.set_postfix_str(self.counts(), refresh=False)
            self.bar.update(1)
        elif time.monotonic() - self.last >= 10.0:
            print(f"cardinal {self.command}: {self.line()}", file=sys.stderr, flush=True)
            self.last = time.monotonic()

    def line(self) -> str:
        if self.outcomes:
            return f"{self.done} of {self.total} explanation(s) done: {self.counts()}"
        return f"{self.verb} {self.done} of {self.total} explanation(s)"

    def counts(self) -> str:
        """'2 certified, 2 unknown': the outcomes so far, most frequent first."""
        return ", ".join(f"{count} {outcome}" for outcome, count in self.outcomes.most_common())

    def write(self, message: str) -> None:
        """A message that does not break the bar."""
        if self.bar is not None:
            self.bar.write(message, file=sys.stderr)
        else:
            print(message, file=sys.stderr)

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()


def _progress(label: str):
    """A tqdm bar on a terminal, plain progress lines otherwise (about 20 in a run, each saying
    what it counts): (bar or None, callback(done, total, key of the last record))."""
    if sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=0, desc=label, unit="expl", file=sys.stderr)

        def report(done: int, total: int, key: str) -> None:
            bar.total = total
            bar.update(done - bar.n)

        return bar, report
    step = [0]

    def plain(done: int, total: int, key: str) -> None:
        if done == total or done >= step[0]:
            print(f"{label}: {done} of {total} explanation(s) done (last: {key})", file=sys.stderr, flush=True)
            step[0] = done + max(1, total // 20)

    return None, plain

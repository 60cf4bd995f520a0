"""The published explanation benchmark `cardinal-xbench` (issue 41): build it, and run the backends on it.

**build** writes one folder in VNN-COMP's layout (`cardinal.verify.vnncomp.write_folder`: every
answer decided exactly, a counterexample beside every sat instance, a checked certificate beside
every unsat one where a method proves it) from these families (`--families`, default all):

* `suites` — every instance of the quick and classifiers crosscheck suites (`cardinal export
  --suite xbench` alone writes these), at most `--rows` inputs each;
* `digits-mlp` — the digits MLP of `bench.digits` (scikit-learn `MLPClassifier((16,))`, 64 → 16 →
  10, via skl2onnx), its test images in the ball of radius 0.2, both kinds, 30 s per instance;
* `digits-cnn` — a 2-Conv CNN on the same 8 × 8 digits, `Conv2d(1, 4, 3)` → ReLU → `Conv2d(4, 4,
  3)` → ReLU → Flatten → `Linear(64, 10)` (trained here, seeded, weights rounded to 2^-10), read
  through cardinal's torch reader, which unrolls each conv into a dense layer (64 → 144 → 64 →
  10), radius 0.1 (at 0.2 no minimum CXp was proved within 30 s), both kinds, 60 s per instance,
  from the second test image on (the first has no CXp at 0.1);
* `verix-fc` — VeriX's MNIST-FC shape 784 → 10 → 10 → 10 as `bench.verix` builds it (digits
  upsampled to 28 × 28, exported as tf2onnx does), radius 0.05 (bench/results/verix.md's ε), CXps
  only (a minimum AXp there is not proved in 300 s: verix.md), 60 s per instance, from the second
  test image on (the first's minimum CXp, 160 features, would ask 161 questions; `SETTINGS`);
* `paper` — the paper's monotone networks (`verify.paper.paper_models`) on its datasets, where
  the data folder ($CARDINAL_DATA, else ../shared/data) holds them; otherwise skipped with a line.

An input and kind ask questions only where the minimum is proved within the family's limit (the
others are counted "not proved" in the folder's README): every instance rests on a proved minimum.

    python -m bench.xbench build --out DIR [--families suites,digits-mlp,...] [--rows 1] [--time-limit 10]

**run** asks each backend every instance of a folder (at most `--limit` per network, the first
ones), each within `--time-limit` seconds: `cardinal` (its exact decision of the property as
written, `solvers.vnnlib.decide`), `highs` and `gurobi` (the MPS file of the property's question
as `cardinal export` writes it: the closure problem over the property's box), `z3` and `cvc5`
(its SMT-LIB file), `marabou` (maraboupy's VNN-LIB reader on the ONNX and the property), whichever
are installed. Each answer is compared with the folder's certified one: a wrong answer is listed
and never changes a verdict. It writes a table (`--out`, default bench/results/xbench.md) and a
cactus plot beside it (`xbench_cactus.png`: per backend, how many instances it answers correctly
within t seconds each).

    python -m bench.xbench run DIR [--limit 4] [--time-limit 10] [--backends cardinal,highs,...] [--out FILE]
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import re
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from cardinal.solvers import smtlib, vnnlib
from cardinal.solvers.oracle import SetOracle
from cardinal.verify.export import milp_text, refusal
from cardinal.verify.vnncomp import Source, refuse_nonempty, suite_parts, write_folder

from bench.greedy import machine
from cardinal.domain import Domain
from cardinal.errors import InputError
from cardinal.io import write_atomic, write_figure
from cardinal.network import Network
from cardinal.problem import Problem
from cardinal.validate import count, seconds

FAMILIES = ("suites", "digits-mlp", "digits-cnn", "verix-fc", "paper")
BACKENDS = ("cardinal", "highs", "gurobi", "z3", "cvc5", "marabou")
# Per family: (radius of the balls, seconds per instance and per exact call, first test row). Measured under a load
# near 9 on the 2-core VM: the MLP's minimum CXp at 0.2 is proved in 30 s, its first image has none at 0.1; the CNN's
# minimum CXps at 0.2 were not proved in 30 s (33 and 10 features found, 500 nodes), at 0.1 row 1's (24 features) in
# 17 s and row 0 has none (and its AXp, empty, was not proved within 60 s in a build); VeriX's MNIST-FC at 0.05
# (bench/results/verix.md's ε) proved rows 1 and 2 (19 and 58 features) in 13 and 20 s, row 0's (160 features in
# verix.md) not in 30 s, and 160 would ask 161 questions on 784 inputs.
SETTINGS = {"digits-mlp": (0.2, 30.0, 0), "digits-cnn": (0.1, 60.0, 1), "verix-fc": (0.05, 60.0, 1)}


# ---------------------------------------------------------------------------- build
def verix_fc(path: Path) -> tuple[Network, np.ndarray]:
    """VeriX's MNIST-FC shape as `bench.verix` builds and exports it, read back from `path`:
    (network, test images [m, 784])."""
    from bench.verix import digits_28, tf2onnx_bytes, train_fc

    X, y = digits_28()
    order = np.random.default_rng(0).permutation(len(X))
    train, test = order[:1400], order[1400:]
    write_atomic(path, tf2onnx_bytes(train_fc(X[train], y[train])))
    return Network.load(path), X[test]


def family_parts(family: str, work: Path, rows: int) -> list[Source]:
    """The parts (networks with their inputs and settings) of one family (module docstring)."""
    both = ("contrastive", "abductive")
    if family == "suites":
        return suite_parts(work, rows)
    if family in SETTINGS:
        radius, timeout, first = SETTINGS[family]
    if family in ("digits-mlp", "digits-cnn"):
        if family == "digits-mlp":
            from bench.digits import digits_model

            net, X, _, _ = digits_model(work / "digits-mlp.onnx")
            source = "bench.digits: scikit-learn MLPClassifier((16,)), skl2onnx"
        else:
            from bench.digits import digits_cnn

            net, X = digits_cnn(work / "digits-cnn.pt")
            source = "bench.xbench: Conv2d(1,4,3)-ReLU-Conv2d(4,4,3)-ReLU-Linear(64,10), torch"
        X = X[first : first + rows]
        return [Source(family, source, family, net, X, tuple(range(first, first + len(X))), both, Domain.unit(64), None, radius,
                       timeout)]  # fmt: skip
    if family == "verix-fc":
        net, X = verix_fc(work / "verix-fc.onnx")
        source = "bench.verix: VeriX's MNIST-FC shape 784-10-10-10 on digits upsampled to 28 x 28, tf2onnx-style ONNX"
        X = X[first : first + rows]
        return [
            Source("verix-fc", source, family, net, X, tuple(range(first, first + len(X))), ("contrastive",), Domain.unit(784),
                   None, radius, timeout)
        ]  # fmt: skip
    if family == "paper":
        from cardinal.verify.paper import DATASETS, paper_models

        parts = []
        for model in paper_models(work, DATASETS):
            threshold = model.thresholds[len(model.thresholds) // 2]
            X = model.X_test[:rows]
            source = f"verify.paper: {model.name}, monotone 64-64, threshold {threshold}"
            n = model.net.n_inputs
            parts.append(Source(f"paper-{model.name}", source, family, model.net, X, tuple(range(len(X))), both,
                                Domain.unit(n), threshold))  # fmt: skip
        return parts
    raise InputError(f"unknown family {family!r} (use {', '.join(FAMILIES)})")


def build(out: Path, families: Sequence[str], rows: int, timeout: float) -> None:
    """The folder (module docstring) into `out`, a new or empty folder: refused (InputError)
    before any network is made or question asked when it is not one, or cannot be made."""
    from cardinal.verify.datasets import check_data_files

    out = refuse_nonempty(out)
    parts: list[Source] = []
    included = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cardinal-xbench-") as work:
        for family in families:
            if family == "paper" and any(state != "ok" for _, state in check_data_files()):
                print(
                    "xbench: paper skipped: the data folder ($CARDINAL_DATA or ../shared/data) lacks its files", file=sys.stderr
                )
                continue
            parts += family_parts(family, Path(work), rows)
            included.append(family)
            print(f"xbench: {family}: {len(parts)} network(s) so far", file=sys.stderr)
    every = write_folder(
        parts, out, timeout, f"explanation questions of {', '.join(included)} ({rows} input(s) per network)",
        lambda name: print(f"xbench: {name} ({time.perf_counter() - started:.0f} s)", file=sys.stderr),
    )  # fmt: skip
    sat = sum(q.answer == "sat" for q in every)
    proofs = sum(q.certificate is not None for q in every)
    print(f"xbench: {len(every)} instances ({sat} sat, {len(every) - sat} unsat, {proofs} certificates) in "
          f"{time.perf_counter() - started:.0f} s: {out}", file=sys.stderr)  # fmt: skip


# ---------------------------------------------------------------------------- run
def question(net: Network, text: str) -> Problem | None:
    """The contrastive problem whose flips over the property's box are exactly the points meeting
    its output condition as written (`vnnlib.closure_problem`), based at a corner or the centre of
    the box that does not meet it; None when each of those does (the property is sat)."""
    lower = {int(i): float(v) for i, v in re.findall(r"\(assert \(>= X_(\d+) (-?[0-9.]+)\)\)", text)}
    upper = {int(i): float(v) for i, v in re.findall(r"\(assert \(<= X_(\d+) (-?[0-9.]+)\)\)", text)}
    box = Domain(np.array([lower[i] for i in range(len(lower))]), np.array([upper[i] for i in range(len(upper))]))
    single = re.search(r"\(assert \((<=|>=) Y_0 (-?[0-9.]+)\)\)", text)
    rival = re.search(r"\(>= Y_\d+ Y_(\d+)\)", text)
    for x in (box.lower, box.upper, (box.lower + box.upper) / 2):
        problem = Problem.make(net, x, "contrastive", box, None if single is None else float(single.group(2)))
        if single is not None:
            meets = problem.prediction == (0 if single.group(1) == "<=" else 1)
        else:
            meets = rival is None or problem.prediction != int(rival.group(1))
        if not meets:
            return vnnlib.closure_problem(problem)[0]
    return None


def _cardinal(problem: Problem, limit: float, oracle: SetOracle) -> str:
    answer = vnnlib.decide(problem, np.ones(problem.n, dtype=bool), oracle, limit)
    return {True: "sat", False: "unsat", None: "unknown"}[answer.sat]


def _highs(path: Path, limit: float) -> str:
    import highspy

    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("time_limit", float(limit))
    highs.setOptionValue("threads", 1)
    highs.readModel(str(path))
    highs.run()
    status = highs.getModelStatus()
    if status == highspy.HighsModelStatus.kOptimal:
        return "sat"
    if status in (highspy.HighsModelStatus.kInfeasible, highspy.HighsModelStatus.kUnboundedOrInfeasible):
        return "unsat"
    return "unknown"


def _gurobi(path: Path, limit: float) -> str:
    import gurobipy

    with gurobipy.Env(params={"OutputFlag": 0}) as env, gurobipy.read(str(path), env) as model:
        model.Params.TimeLimit, model.Params.Threads = float(limit), 1
        model.optimize()
        if model.SolCount > 0:
            return "sat"
        return "unsat" if model.Status == gurobipy.GRB.INFEASIBLE else "unknown"


def _z3(text: str, limit: float) -> str:
    import z3

    solver = z3.Solver()
    solver.set("timeout", int(limit * 1000))
    solver.add(z3.parse_smt2_string(text))
    return {"sat": "sat", "unsat": "unsat"}.get(str(solver.check()), "unknown")


def _cvc5(text: str, limit: float) -> str:
    import cvc5

    terms = cvc5.TermManager()
    solver = cvc5.Solver(terms)
    solver.setOption("tlimit-per", str(int(limit * 1000)))
    parser = cvc5.InputParser(solver, cvc5.SymbolManager(terms))
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text, "xbench")
    answer = "unknown"
    while True:
        command = parser.nextCommand()
        if command.isNull():
            return answer
        result = command.invoke(solver, parser.getSymbolManager())
        if "sat" in result:
            answer = result.strip() if result.strip() in ("sat", "unsat") else "unknown"


def _marabou(onnx: Path, prop: Path, limit: float) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from maraboupy import Marabou

        network = Marabou.read_onnx(str(onnx))
        result = network.solve(
            propertyFilename=str(prop), verbose=False, options=Marabou.createOptions(verbosity=0, timeoutInSeconds=int(limit))
        )
    return result[0] if result[0] in ("sat", "unsat") else "unknown"


def ask(backend: str, net: Network, onnx: Path, prop: Path, limit: float, oracle: SetOracle, work: Path) -> tuple[str, float]:
    """One backend's answer to one property ("sat", "unsat", "unknown": none within `limit`
    seconds, "n/a": the backend has no form of it, "error: …") and its seconds."""
    text = prop.read_text()
    started = time.perf_counter()
    try:
        if backend == "marabou":
            answer = _marabou(onnx, prop, limit)
        else:
            problem = question(net, text)
            if problem is None:
                answer = "sat" if backend == "cardinal" else "n/a"  # a corner of the box meets the condition
            elif backend == "cardinal":
                answer = _cardinal(problem, limit, oracle)
            elif backend in ("highs", "gurobi"):
                if refusal(problem, "mps") is not None:
                    return "n/a", 0.0
                path = work / "question.mps"
                path.write_text(milp_text(problem, None, "mps", []))
                started = time.perf_counter()
                answer = (_highs if backend == "highs" else _gurobi)(path, limit)
            else:
                if refusal(problem, "smt2") is not None:
                    return "n/a", 0.0
                smt = smtlib.question(problem, problem.n)
                started = time.perf_counter()
                answer = (_z3 if backend == "z3" else _cvc5)(smt, limit)
    except Exception as error:  # a backend's failure is its answer, logged; it decides nothing
        answer = f"error: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:120]
    seconds = time.perf_counter() - started
    return ("unknown" if seconds > limit and answer in ("sat", "unsat") else answer), seconds


def installed(backends: Sequence[str]) -> list[str]:
    """The backends whose libraries import."""
    import importlib.util

    module = {"highs": "highspy", "gurobi": "gurobipy", "z3": "z3", "cvc5": "cvc5", "marabou": "maraboupy"}
    return [b for b in backends if b == "cardinal" or importlib.util.find_spec(module[b]) is not None]


def sample(folder: Path, rows: list[list[str]], per_network: int | None) -> list[list[str]]:
    """The rows of instances.csv to ask: all, or per network at most `per_network`, half of them
    (rounded up) unsat where there are enough, each answer's first ones in the file's order."""
    if per_network is None:
        return rows
    by_network: dict[str, dict[str, list[list[str]]]] = {}
    for row in rows:
        answer = (folder / row[1]).with_suffix(".answer").read_text().strip()
        by_network.setdefault(row[0], {"sat": [], "unsat": []})[answer].append(row)
    taken = []
    for answers in by_network.values():
        unsat = answers["unsat"][: max(-(-per_network // 2), per_network - len(answers["sat"]))]
        taken += unsat + answers["sat"][: per_network - len(unsat)]
    return taken


def run(
    folder: Path, backends: Sequence[str], limit: float, per_network: int | None, progress: Callable[[str], None]
) -> list[dict]:
    """Every backend on the folder's instances (at most `per_network` per network): one record each."""
    rows = sample(folder, list(csv.reader((folder / "instances.csv").read_text().splitlines())), per_network)
    records = []
    networks: dict[str, Network] = {}
    with SetOracle() as oracle, tempfile.TemporaryDirectory() as work:
        if rows and "cardinal" in backends:  # untimed: the exact oracle's engines start on their first call
            ask(
                "cardinal", Network.load(folder / rows[0][0]), folder / rows[0][0], folder / rows[0][1], limit, oracle, Path(work)
            )
        for onnx, prop, _ in rows:
            net = networks.setdefault(onnx, Network.load(folder / onnx))
            certified = (folder / prop).with_suffix(".answer").read_text().strip()
            record = {"instance": prop, "network": onnx, "n": net.n_inputs, "K": net.n_outputs, "answer": certified}
            for backend in backends:
                record[backend] = ask(backend, net, folder / onnx, folder / prop, limit, oracle, Path(work))
            records.append(record)
            progress(f"{len(records)}: {prop} {certified}: " + ", ".join(f"{b} {record[b][0]}" for b in backends))
    return records


def write_results(
    path: Path,
    records: list[dict],
    backends: Sequence[str],
    folder: Path,
    limit: float,
    argv: Sequence[str],
    load: tuple[float, float] | None = None,
) -> None:
    """The table (`path`) and the cactus plot beside it (`xbench_cactus.png`); `load`: the machine's
    one-minute load average when the run started and ended."""  # fmt: skip
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4.5))
    lines = [
        "# cardinal-xbench: the backends on the explanation benchmark",
        "",
        f"`python -m bench.xbench {' '.join(argv)}` on {datetime.date.today()}, {machine()}"
        + ("." if load is None else f"; load average {load[0]:.1f} at the start, {load[1]:.1f} at the end (shared VM)."),
        f"Folder {folder.name}: {len(records)} instances asked ({sum(r['answer'] == 'sat' for r in records)} sat), "
        f"{limit:g} s per instance and backend, one at a time. Each answer is compared with the folder's certified one "
        "(decided in exact arithmetic): *correct* counts answers equal to it, *wrong* answers that differ (listed below; "
        "a wrong answer changes no verdict), *n/a* instances the backend has no form of (a smooth network; a box whose "
        "corner already meets the condition, for the exported MILP/SMT files). Seconds: each solver's own call on its "
        "file, written beforehand (MPS for HiGHS and Gurobi, SMT-LIB for z3 and cvc5), Marabou's read of the ONNX and "
        "the property and its solve, cardinal's parse of the property and exact decision; an answer after the limit "
        "counts as unknown.",
        "",
        "| backend | correct | wrong | unknown (timeout) | error | n/a | median s (correct) | total s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    readme = (folder / "README.md").read_text().splitlines() if (folder / "README.md").is_file() else []
    made = [
        line.removeprefix("# ").removeprefix("- ") for line in readme if line.startswith(("# ", "- ")) and "instances:" in line
    ]
    lines[4:4] = [f"The folder: {readme[0].removeprefix('# ')}; {made[0] if made else ''} (its README).", ""] if readme else []
    wrong = []
    for backend in backends:
        answers = [(r[backend][0], r[backend][1], r) for r in records]
        correct = sorted(seconds for answer, seconds, r in answers if answer == r["answer"])
        wrong += [
            (backend, r["instance"], answer, r["answer"])
            for answer, _, r in answers
            if answer in ("sat", "unsat") and answer != r["answer"]
        ]
        count = {kind: sum(answer == kind for answer, _, _ in answers) for kind in ("unknown", "n/a")}
        errors = sum(answer.startswith("error") for answer, _, _ in answers)
        median = f"{np.median(correct):.3f}" if correct else ""
        lines.append(
            f"| {backend} | {len(correct)} | {sum(1 for b, *_ in wrong if b == backend)} | {count['unknown']} | {errors} "
            f"| {count['n/a']} | {median} | {sum(s for _, s, _ in answers):.1f} |"
        )
        if correct:
            axes.step(correct, np.arange(1, len(correct) + 1), where="post", label=backend)
    lines += ["", "Wrong answers (backend, instance, its answer, the certified one):", ""]
    lines += [f"- {b}: `{i}` answered {a}, certified {c}" for b, i, a, c in wrong] or ["- none"]
    agree = "marabou" in backends
    if agree:
        decided = [r for r in records if r["marabou"][0] in ("sat", "unsat")]
        bad = [r for r in decided if r["marabou"][0] != r["answer"]]
        lines += ["", f"Marabou's runner decided {len(decided)} of {len(records)} instances and "
                  + ("agrees on every one." if not bad else f"disagrees on {len(bad)} (listed above).")]  # fmt: skip
    errors = sorted({(b, r[b][0]) for r in records for b in backends if r[b][0].startswith("error")})
    if errors:
        lines += ["", "Errors (backend: message):", "", *[f"- {b}: {m}" for b, m in errors[:20]]]
    per_network: dict[str, list[dict]] = {}
    for r in records:
        per_network.setdefault(r["network"], []).append(r)
    lines += ["", "| network | n | K | instances | sat |", "|---|---|---|---|---|"]
    lines += [f"| {name} | {rs[0]['n']} | {rs[0]['K']} | {len(rs)} | {sum(r['answer'] == 'sat' for r in rs)} |"
              for name, rs in per_network.items()]  # fmt: skip
    axes.set_xscale("log")
    axes.set_xlabel("seconds per instance")
    axes.set_ylabel("instances answered correctly within that time")
    axes.set_title(f"cardinal-xbench: {len(records)} instances, {limit:g} s limit")
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)  # outside: no curve's tail hidden
    axes.grid(alpha=0.3)
    figure.tight_layout()
    write_figure(path.parent / "xbench_cactus.png", figure, 120)
    plt.close(figure)
    write_atomic(path, "\n".join(lines) + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.xbench", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    making = commands.add_parser("build", help="build the folder")
    making.add_argument("--out", required=True)
    making.add_argument("--families", default=",".join(FAMILIES))
    making.add_argument("--rows", type=count(1), default=1,
                        help="inputs per network, ≥ 1 (default 1: the published set, 767 instances)")
    making.add_argument("--time-limit", type=seconds, default=10.0)
    running = commands.add_parser("run", help="run the backends on a folder")
    running.add_argument("folder")
    running.add_argument("--backends", default=",".join(BACKENDS))
    running.add_argument("--limit", type=count(1), default=None, help="instances per network (default: all)")
    running.add_argument("--time-limit", type=seconds, default=10.0)
    running.add_argument("--out", default="bench/results/xbench.md")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            families = [f.strip() for f in args.families.split(",") if f.strip()]
            unknown = [f for f in families if f not in FAMILIES]
            if unknown:
                raise InputError(f"unknown family {unknown[0]!r} (use {', '.join(FAMILIES)})")
            build(Path(args.out), families, args.rows, args.time_limit)
        else:
            backends = installed([b.strip() for b in args.backends.split(",") if b.strip()])
            folder = Path(args.folder)
            start = os.getloadavg()[0]
            records = run(folder, backends, args.time_limit, args.limit, lambda line: print(line, file=sys.stderr, flush=True))
            write_results(Path(args.out), records, backends, folder, args.time_limit, sys.argv[1:] if argv is None else argv,
                          (start, os.getloadavg()[0]))  # fmt: skip
    except InputError as error:
        print(f"xbench: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()

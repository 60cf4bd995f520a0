"""cardinal's application layer: `certify` (greedy against the exact solvers), `check`
(explanations from any source judged exactly), baselines, case files, campaigns (`crosscheck`)
and their executors, reports, the counterexample hunt, the suites and datasets, and the
`cardinal` command (`cardinal.verify.cli`). It builds on the core (`cardinal`) and the exact
engines (`cardinal.solvers`); nothing below imports it.
"""

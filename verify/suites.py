"""Instance suites for `cardinal crosscheck`, reproducible from fixed seeds.

* `quick` (no data files; minutes on a laptop): random monotone relu / sigmoid / hardtanh / step
  networks with 4–20 features, the paper's SET-COVER construction with step and with hardtanh
  units, and small monotone models trained on scikit-learn's bundled diabetes and breast-cancer
  data.
* `standard`: the same families, larger (up to 40 features, wider and deeper networks, more
  inputs).
* `paper`: the real datasets of ../shared/data (see `verify.paper`).
* `classifiers`: K-class digit classifiers (fully connected and conv) and sign- and partially
  monotone credit models, each row over its own ε-ball (see `verify.classifiers`).

A campaign certifies the explainers its `--method` names, by default the suite's own
(`SUITE_METHODS`): greedy alone, except the classifiers suite, which runs greedy and deletion.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from cardinal.domain import Domain

from .classifiers import classifier_instances
from .generate import median_threshold, random_network, random_set_cover, set_cover_network
from .instance import Instance
from .paper import paper_instances


def _random(
    seed: int, activations: tuple[str, ...], sizes: tuple[int, ...], hiddens: tuple[tuple[int, ...], ...], rows: int
) -> Iterator[Instance]:
    rng = np.random.default_rng(seed)
    for activation in activations:
        for n in sizes:
            for hidden in hiddens:
                net = random_network(rng, n, hidden, activation)
                X = rng.random((rows, n))
                shape = "x".join(map(str, hidden))
                yield Instance(f"random-{activation}-n{n}-h{shape}", "random", net, X, median_threshold(net, X), Domain.unit(n))


def _set_cover(seed: int, count: int, universes: tuple[int, int], sets: tuple[int, int]) -> Iterator[Instance]:
    """Theorem 1 and 2 networks: x = 0 asks for a CXp, x = 1 for an AXp; both are set covers."""
    rng = np.random.default_rng(seed)
    for index in range(count):
        universe = int(rng.integers(*universes))
        n_sets = int(rng.integers(*sets))
        cover = random_set_cover(rng, universe, n_sets)
        X = np.stack([np.zeros(n_sets), np.ones(n_sets)])
        for activation in ("step", "hardtanh"):
            net = set_cover_network(cover, universe, activation)
            yield Instance(f"set-cover-{activation}-{index}-u{universe}-m{n_sets}", "set-cover", net, X, 0.5, Domain.unit(n_sets))


def _trained(seed: int, datasets: tuple[str, ...], hidden: tuple[int, ...], epochs: int, rows: int) -> Iterator[Instance]:
    from .datasets import load_dataset
    from .train import train_monotone

    for name in datasets:
        data = load_dataset(name)
        trained = train_monotone(data, hidden=hidden, epochs=epochs, seed=seed, progress=False)
        rng = np.random.default_rng(seed)
        X = data.X_test[rng.choice(len(data.X_test), size=min(rows, len(data.X_test)), replace=False)]
        # Classification: logit > 0. Regression: the median prediction on these rows.
        threshold = 0.0 if data.task == "classification" else median_threshold(trained.network, X)
        yield Instance(
            f"trained-{name}-h{'x'.join(map(str, hidden))}",
            f"trained:{name}",
            trained.network,
            X,
            threshold,
            Domain.unit(X.shape[1]),
        )


def quick(workdir: Path) -> Iterator[Instance]:
    yield from _random(2026, ("relu", "sigmoid", "hardtanh", "step"), (4, 8, 12, 16, 20), ((8,), (8, 8)), rows=3)
    yield from _set_cover(7, count=6, universes=(3, 7), sets=(5, 11))
    yield from _trained(0, ("diabetes", "breast-cancer"), hidden=(16, 16), epochs=10, rows=8)


def standard(workdir: Path) -> Iterator[Instance]:
    yield from _random(
        2027,
        ("relu", "leaky_relu", "sigmoid", "tanh", "hardtanh", "step"),
        (8, 16, 24, 32, 40),
        ((16,), (16, 16), (32, 16, 8)),
        rows=6,
    )
    yield from _set_cover(8, count=20, universes=(4, 10), sets=(8, 19))
    yield from _trained(0, ("diabetes", "breast-cancer"), hidden=(32, 32), epochs=20, rows=40)


# name → instances, given the campaign's directory (where the paper suite caches its models)
SUITES: dict[str, Callable[[Path], Iterator[Instance]]] = {
    "quick": quick,
    "standard": standard,
    "paper": paper_instances,
    "classifiers": classifier_instances,
}
# name → the explainers a campaign of the suite certifies unless --method says otherwise (default greedy)
SUITE_METHODS: dict[str, tuple[str, ...]] = {"classifiers": ("greedy", "deletion")}

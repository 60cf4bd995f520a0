"""The example pictures of docs/tutorial.md: explanations of the classifiers suite's digits CNN.

The model is the `classifiers` suite's `digits-conv` (`verify.classifiers`: Conv2d(1, 4, 3) → ReLU
→ Flatten → Linear(144, 10) on scikit-learn's 8 × 8 digits, trained with fixed seeds, read back
with `input_shape` (1, 8, 8), which the network records). Two pictures, each `Explanation.figure()`:

* `digits-cxp.png` — the minimum contrastive explanation of its first test image over the box
  [0, 1]^64, proved (`cardinal.explain(..., "contrastive")`, `prove` on);
* `digits-axp.png` — the deletion explainer's abductive explanation of its second test image
  over the ε-ball of radius 0.15 (`prove=False`: subset-minimal, not proved a minimum).

    python -m bench.pictures [--out docs/images] [--work bench-results/pictures]

Each file is written whole (`cardinal.io.write_figure`); the script says on stdout what each shows.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import cardinal
from cardinal.io import write_figure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/images"), help="folder of the PNGs (default docs/images)")
    parser.add_argument("--work", type=Path, default=Path("bench-results/pictures"), help="where the models are cached")
    args = parser.parse_args(argv)
    import matplotlib.pyplot as plt  # to close each figure (drawn with Agg: `verify.picture`)
    from cardinal.verify.classifiers import classifier_instances

    (instance,) = classifier_instances(args.work, rows=2, radii=(0.15,), names=("digits-conv",))
    net, X = instance.net, instance.X
    answers = {
        "digits-cxp.png": cardinal.explain(net, X[0], "contrastive", time_limit=60),
        "digits-axp.png": cardinal.explain(net, X[1], "abductive", prove=False, radius=0.15, time_limit=10),
    }
    for name, e in answers.items():
        figure = e.figure()
        write_figure(args.out / name, figure, 100, root=args.out)
        plt.close(figure)
        print(f"{args.out / name}: {e.kind}, prediction {e.prediction}, features {list(e.features or ())}, proved {e.proved}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Issue 36, item 4: GEM's selection in the distinct count, the exponential mechanism (the paper's) against
permute-and-flip (McKenna & Sheldon 2020), measured by the release's exact error law on each data set's
true count curve (``userdp.plan.distinct(curve=...)``, which computes the law of ``l_hat`` and the lattice
Laplace exactly, and is checked against the release's draws in ``tests/distinct/test_selection.py``).

Data: Amazon Fashion (bundled), Foursquare venues (bundled), Reddit words (``../shared/datasets``).
Writes experiments/results/distinct_selection.csv and distinct_selection.png.

Run: python experiments/distinct_selection.py
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from userdp import datasets, plan
from userdp.distinct import dc_matching, person_element_graph

OUT = Path(__file__).resolve().parent / "results"
REDDIT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "reddit_ngrams.csv.xz"


def main() -> None:
    graphs = {"amazon fashion": person_element_graph(datasets.amazon_fashion()),
              "foursquare venues": person_element_graph(datasets.foursquare_nyc("venue"))}  # fmt: skip
    if REDDIT.exists():
        import lzma

        import pyarrow.csv as pc

        with lzma.open(REDDIT) as fh:
            t = pc.read_csv(fh)
        words = [n.strip("()").replace("'", " ").replace(",", " ") for n in t.column("ngram").to_pylist()]
        graphs["reddit words"] = person_element_graph(datasets.words_dataset(t.column("author").to_pylist(), words))
    rows = []
    for name, g in graphs.items():
        curve = dc_matching(g, 100)
        for eps in (0.25, 0.5, 1.0, 2.0, 4.0):
            for selection in ("exponential", "permute-and-flip"):
                p = plan.distinct(eps, curve=curve, distinct=g.distinct_count(), selection=selection)
                rows.append({"data": name, "epsilon": eps, "selection": selection, "median_error": p.median,
                             "q90_error": p.quantiles[0.9]})  # fmt: skip
    df = pd.DataFrame(rows)
    OUT.mkdir(exist_ok=True)
    df.to_csv(OUT / "distinct_selection.csv", index=False)
    wide = df.pivot_table(index=["data", "epsilon"], columns="selection", values="median_error")
    wide["permute-and-flip / exponential"] = wide["permute-and-flip"] / wide["exponential"]
    print(wide.round(3).to_string())

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(graphs), figsize=(4 * len(graphs), 3.4))
    for ax, (name, g) in zip(axes, df.groupby("data", sort=False), strict=True):
        for selection, h in g.groupby("selection"):
            ax.plot(h["epsilon"], h["median_error"], "o-", label=selection)
        ax.set(xscale="log", yscale="log", title=name, xlabel="epsilon", ylabel="median |DC(D) - release|")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "distinct_selection.png", dpi=120)


if __name__ == "__main__":
    main()

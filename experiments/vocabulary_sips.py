"""DP-SIPS against the one-round weighted Gaussian union: items released (issue 35).

For IMDB reviews (words), Amazon Fashion (words) and Foursquare NYC venues, at (epsilon, delta) in
{(1, 1e-5), (4, 1e-5)} and max_items in {10, 100, 300}, the number of items released by
:func:`userdp.vocabulary.weighted_gaussian_union` (one round, today's default algorithm) and by
:func:`userdp.vocabulary.sips_union` under several schedules (rounds r, geometric ratio q: round i gets
q^(i-1) / sum_j q^(j-1) of rho and of delta_N), the mean over a few runs of the real mechanisms (the same
seeds for every method). Writes experiments/results/vocabulary_sips.csv and vocabulary_sips.md.

Run: python experiments/vocabulary_sips.py [--imdb PATH] [--seeds 3] [--imdb-seeds 2]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from userdp.datasets import amazon_fashion, foursquare_nyc_table, imdb_reviews
from userdp.engines.base import Columns
from userdp.engines.memory import MemoryEngine
from userdp.vocabulary import sips_union, weighted_gaussian_union

OUT = Path(__file__).parent / "results"
CASES = ((1.0, 1e-5), (4.0, 1e-5))
BOUNDS = (10, 100, 300)
SCHEDULES = ((2, 1.0), (2, 2.0), (2, 4.0), (3, 1.0), (3, 2.0), (3, 4.0), (3, 8.0), (4, 2.0), (4, 4.0))


def _sets(name: str, imdb: Path):
    if name == "Amazon Fashion (words)":
        ds = amazon_fashion()
    elif name == "IMDB reviews (words)":
        ds = imdb_reviews(imdb)
    else:
        ds = MemoryEngine().edges(MemoryEngine().load(foursquare_nyc_table(), Columns("user", "venue_id")))
    return ds.offsets, ds.items, len(ds.domain)


def main() -> None:
    ap = argparse.ArgumentParser()
    imdb = Path(__file__).resolve().parents[2] / "shared/datasets/imdb_reviews.jsonl.xz"
    ap.add_argument("--imdb", default=str(imdb), help="the IMDB reviews (JSON lines); skipped when absent")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--imdb-seeds", type=int, default=2)
    args = ap.parse_args()
    names = ["Amazon Fashion (words)", "Foursquare venues"]
    if Path(args.imdb).exists():
        names.append("IMDB reviews (words)")
    rows = []
    for name in names:
        off, its, n = _sets(name, Path(args.imdb))
        seeds = range(args.imdb_seeds if name.startswith("IMDB") else args.seeds)
        print(f"{name}: {off.size - 1} persons, {its.size} pairs, {n} items", flush=True)
        for eps, delta in CASES:
            for d0 in BOUNDS:
                got = [weighted_gaussian_union(off, its, n, eps, delta, d0, rng=s)[0].size for s in seeds]
                rows.append((name, eps, delta, d0, "weighted gaussian (1 round)", 1, None, float(np.mean(got))))
                for r, q in SCHEDULES:
                    got = [sips_union(off, its, n, eps, delta, d0, r, q, rng=s)[0].size for s in seeds]
                    rows.append((name, eps, delta, d0, f"DP-SIPS r={r} q={q:g}", r, q, float(np.mean(got))))
                done = rows[-1 - len(SCHEDULES) :]
                print(f"  eps {eps:g} max_items {d0}: " + ", ".join(f"{x[4]} {x[7]:.1f}" for x in done), flush=True)
    cols = ["dataset", "epsilon", "delta", "max_items", "method", "rounds", "ratio", "items_released"]
    df = pd.DataFrame(rows, columns=cols)
    OUT.mkdir(exist_ok=True)
    df.to_csv(OUT / "vocabulary_sips.csv", index=False)
    best = df.groupby(["dataset", "epsilon", "method"]).items_released.max().unstack("method")
    at100 = df[df.max_items == 100].groupby(["dataset", "epsilon", "method"]).items_released.max().unstack("method")
    lines = []
    for title, tab in (("at each method's best max_items of (10, 100, 300)", best), ("at max_items 100", at100)):
        lines += [f"Items released, delta = 1e-5, {title} (mean of the runs):", ""]
        lines += ["| dataset | ε | " + " | ".join(tab.columns) + " |", "|---|---|" + "---|" * len(tab.columns)]
        for (ds, eps), r in tab.iterrows():
            top = r.max()
            lines.append(f"| {ds} | {eps:g} | " + " | ".join(f"**{v:,.1f}**" if v == top else f"{v:,.1f}" for v in r)
                         + " |")  # fmt: skip
        lines.append("")
    (OUT / "vocabulary_sips.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

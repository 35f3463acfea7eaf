"""The vocabulary's default contribution bound, ``max_items="auto"`` (issue 35): the items released at the default
against a fixed ``max_items = 100`` (the old default) and against the best fixed bound, on Amazon Fashion, IMDB,
Foursquare venues and the Reddit sample, at epsilon 1 and 4, delta 1e-5 (and 1e-6, to set beside the peers'
figures of ``experiments/vocabulary.py``), the set alone (``count_fraction = 0``) and with the default counts.

For a fixed bound ``b`` the figure is the expected number of items the weighted Gaussian union releases,
``sum_i P[h_i + Z >= T]`` (as in ``experiments/vocabulary.py``), on one keyed bounding of the persons. For
``"auto"`` it is that expectation under the choice's exact law (the exponential mechanism over the grid with the
implementation's scores, :func:`userdp.vocabulary.max_items_scores`, at 2% of epsilon), the set calibrated at the
rest of the budget; beside it, the median of three real default releases (``releases.vocabulary``, in memory).
The best fixed bound is searched over ``1, 2, 3, 4, 6, 8, 11, ..., 8192`` (factor about sqrt 2).

Run: python experiments/vocabulary_bound.py [--imdb PATH] [--reddit PATH]
Writes experiments/results/vocabulary_bound.csv and vocabulary_bound.md.
"""

from __future__ import annotations

import argparse
import lzma
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import ndtr

from userdp import datasets, releases
from userdp.datasets import amazon_fashion, foursquare_nyc_table, imdb_reviews
from userdp.engines.base import Columns
from userdp.engines.memory import MemoryEngine
from userdp.vocabulary import (
    MAX_ITEMS_GRID,
    BoundChoice,
    bound_contributions,
    max_items_scores,
    persons_within,
    plan_vocabulary,
    union_histogram,
)

OUT = Path(__file__).parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared/datasets"
FINE = sorted({int(round(2 ** (j / 2))) for j in range(27)} | {100})
CASES = [(1.0, 1e-5, 0.0), (4.0, 1e-5, 0.0), (1.0, 1e-5, 0.5), (4.0, 1e-5, 0.5), (1.0, 1e-6, 0.0), (4.0, 1e-6, 0.0)]


def _load(name: str, imdb: Path, reddit: Path):
    """(persons in CSR form, number of items, a table for the release) of one data set."""
    if name == "Foursquare venues":
        table = foursquare_nyc_table()
        sets = MemoryEngine().edges(MemoryEngine().load(table, Columns("user", "venue_id")))
        return sets, sets
    if name == "Amazon Fashion (words)":
        ds = amazon_fashion()
    elif name == "IMDB reviews (words)":
        ds = imdb_reviews(imdb)
    else:
        import pyarrow.csv as pc

        with lzma.open(reddit) as fh:
            t = pc.read_csv(fh)
        words = [n.strip("()").replace("'", " ").replace(",", " ") for n in t.column("ngram").to_pylist()]
        ds = datasets.words_dataset(t.column("author").to_pylist(), words)
    return ds, ds


def _items_at(b: int, plan: dict, state: dict) -> float:
    """The expected items released at the fixed bound ``b`` under ``plan`` (one keyed bounding per bound)."""
    bb = min(b, int(np.diff(state["offsets"]).max()))  # a bound above every person's count keeps everything
    if bb not in state["hists"]:
        off, its = bound_contributions(state["offsets"], state["items"], bb, rng=1)
        state["hists"][bb] = union_histogram(off, its, state["n_items"], "gaussian")
    return _expected(state["hists"][bb], plan["calibration"])


def _expected(hist: np.ndarray, cal) -> float:
    h = hist[hist > 0].astype(np.float64)
    return float(ndtr(-(cal.threshold - h - 0.5) / cal.scale).sum())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--imdb", default=str(SHARED / "imdb_reviews.jsonl.xz"))
    ap.add_argument("--reddit", default=str(SHARED / "reddit_ngrams.csv.xz"))
    ap.add_argument("--runs", type=int, default=3, help="real default releases per case (median)")
    args = ap.parse_args()
    names = ["Amazon Fashion (words)", "Foursquare venues"]
    if Path(args.reddit).exists():
        names.append("Reddit sample (words)")
    if Path(args.imdb).exists():
        names.append("IMDB reviews (words)")
    rows = []
    for name in names:
        sets, source = _load(name, Path(args.imdb), Path(args.reddit))
        offsets, items, n_items = sets.offsets, np.asarray(sets.items, dtype=np.int64), len(sets.domain)
        k = np.diff(offsets)
        print(f"{name}: {k.size} persons, {items.size} pairs, k quantiles 50/90/99% "
              f"{np.quantile(k, [0.5, 0.9, 0.99]).round(0).tolist()}", flush=True)  # fmt: skip

        state = {"offsets": offsets, "items": items, "n_items": n_items, "hists": {}}

        within = persons_within(k)
        for eps, delta, frac in CASES:
            fixed = {b: _items_at(b, plan_vocabulary(eps, delta, b, count_fraction=frac), state) for b in FINE}
            best = max(fixed, key=fixed.get)
            auto = plan_vocabulary(eps, delta, "auto", count_fraction=frac)
            s = max_items_scores(within)
            p = np.exp(auto["epsilon_bound"] * (s - s.max()) / 2)
            p /= p.sum()
            expected_auto = 0.0
            for pi, g in zip(p, MAX_ITEMS_GRID, strict=True):
                if pi > 1e-6:
                    chosen = BoundChoice(g, auto["epsilon_bound"])
                    plan = plan_vocabulary(eps, delta, chosen, count_fraction=frac)
                    expected_auto += pi * _items_at(g, plan, state)
            mode = MAX_ITEMS_GRID[int(np.argmax(p))]
            runs = [len(releases.vocabulary(source, eps, delta, count_fraction=frac, rng=r).value["items"])
                    for r in range(args.runs)]  # fmt: skip
            rows.append({
                "dataset": name, "epsilon": eps, "delta": delta, "count_fraction": frac,
                "fixed_100": fixed[100], "best_fixed": fixed[best], "best_max_items": best,
                "auto_expected": expected_auto, "auto_most_likely_max_items": mode,
                "auto_median_of_runs": float(np.median(runs)), "auto_over_best": expected_auto / fixed[best],
            })  # fmt: skip
            print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    OUT.mkdir(exist_ok=True)
    df.to_csv(OUT / "vocabulary_bound.csv", index=False)
    lines = [
        "| dataset | ε | δ | count fraction | max_items 100 | best fixed (its max_items) | "
        "auto: expected (most likely max_items) | auto: median of runs | auto / best |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['dataset']} | {r['epsilon']:g} | {r['delta']:g} | {r['count_fraction']:g} | {r['fixed_100']:,.1f} | "
            f"{r['best_fixed']:,.1f} ({r['best_max_items']}) | {r['auto_expected']:,.1f} "
            f"({r['auto_most_likely_max_items']}) | {r['auto_median_of_runs']:,.0f} | {r['auto_over_best']:.2f} |"
        )
    (OUT / "vocabulary_bound.md").write_text(
        "Items released by the weighted Gaussian vocabulary: the default max_items='auto' against fixed bounds "
        "(expected counts; see experiments/vocabulary_bound.py):\n\n" + "\n".join(lines) + "\n"
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()

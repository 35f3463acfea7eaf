"""The vocabulary's default contribution bound, ``max_items="auto"`` (issue 35): the items released at the default
against a fixed ``max_items = 100`` (the old default) and against the best fixed bound, on Amazon Fashion, IMDB,
Foursquare venues and the Reddit sample, at epsilon 1 and 4, delta 1e-5 (and 1e-6, to set beside the peers'
figures of ``experiments/vocabulary.py``), the set alone (``count_fraction = 0``) and with the default counts.

For a fixed bound ``b`` the figure is the expected number of items the weighted union releases,
``sum_i P[h_i + Z >= T]`` with the sampler's exact tail (as in ``experiments/vocabulary.py``: the discrete
Laplace's in closed form, the discrete Gaussian's through its normal approximation), on one keyed bounding of the
persons. For ``"auto"`` it is that expectation under the choice's exact law (the exponential mechanism over the
grid with the implementation's scores, :func:`userdp.vocabulary.max_items_scores`, at 2% of epsilon, at the
library's quantile for the noise, :func:`userdp.vocabulary.auto_quantile`), the set calibrated at the rest of the
budget; beside it, the median of three real default releases (``releases.vocabulary`` in memory for Gaussian
noise, :func:`userdp.vocabulary.private_vocabulary` for the weighted Laplace union). The best fixed bound is
searched over ``1, 2, 3, 4, 6, 8, 11, ..., 8192`` (factor about sqrt 2).

The sweep (issue 35, the Laplace unions' quantile): for both noises, the set alone at epsilon 1 and 4, delta
1e-5, the auto choice's expected items at each quantile of :data:`QUANTILES` against the best fixed bound
(``vocabulary_bound_quantiles.csv`` and the second and third tables of ``vocabulary_bound.md``).

Run: python experiments/vocabulary_bound.py [--imdb PATH] [--reddit PATH] [--runs N] [--only NAME]
Writes experiments/results/vocabulary_bound.csv, vocabulary_bound_quantiles.csv and vocabulary_bound.md (with
``--only``, files suffixed with the name, for a quick look).
"""

from __future__ import annotations

import argparse
import lzma
import math
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
    auto_quantile,
    bound_contributions,
    max_items_scores,
    persons_within,
    plan_vocabulary,
    private_vocabulary,
    union_histogram,
)

OUT = Path(__file__).parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared/datasets"
FINE = sorted({int(round(2 ** (j / 2))) for j in range(27)} | {100})
CASES = [(1.0, 1e-5, 0.0), (4.0, 1e-5, 0.0), (1.0, 1e-5, 0.5), (4.0, 1e-5, 0.5), (1.0, 1e-6, 0.0), (4.0, 1e-6, 0.0)]
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)  # the sweep of the choice's quantile, per noise
SWEEP = [(1.0, 1e-5), (4.0, 1e-5)]  # (epsilon, delta) of the sweep, the set alone


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
    """The expected items released at the fixed bound ``b`` under ``plan`` (one keyed bounding per bound, shared
    by both noises)."""
    bb = min(b, int(np.diff(state["offsets"]).max()))  # a bound above every person's count keeps everything
    noise = plan["calibration"].noise
    if (bb, noise) not in state["hists"]:
        if bb not in state["bounded"]:
            state["bounded"][bb] = bound_contributions(state["offsets"], state["items"], bb, rng=1)
        state["hists"][bb, noise] = union_histogram(*state["bounded"][bb], state["n_items"], noise)
    return _expected(state["hists"][bb, noise], plan["calibration"])


def _expected(hist: np.ndarray, cal) -> float:
    """``sum_i P[h_i + Z >= T]`` with the sampler's exact tail: the discrete Gaussian's through its normal
    approximation (as :file:`experiments/vocabulary.py`), the discrete Laplace's in closed form."""
    h = hist[hist > 0].astype(np.float64)
    m = cal.threshold - h  # released when Z >= m
    if cal.noise == "laplace":
        q = math.exp(-1.0 / cal.scale)
        up = np.exp(-np.maximum(m, 1) / cal.scale) / (1 + q)  # P[Z >= m], m >= 1
        down = 1 - np.exp(-np.maximum(1 - m, 0) / cal.scale) / (1 + q)  # 1 - P[Z <= m - 1], m <= 0
        return float(np.where(m >= 1, up, down).sum())
    return float(ndtr(-(m - 0.5) / cal.scale).sum())


def _auto_expected(eps: float, delta: float, frac: float, noise: str, quantile: float, within, state) -> tuple:
    """(expected items, most likely bound) of ``max_items="auto"`` choosing the ``quantile``-quantile: the
    expectation over the exponential mechanism's exact law on the grid (the implementation's scores, its share
    of epsilon), the set calibrated for each candidate at the rest of the budget."""
    auto = plan_vocabulary(eps, delta, "auto", noise, count_fraction=frac)
    s = max_items_scores(within, quantile)
    p = np.exp(auto["epsilon_bound"] * (s - s.max()) / 2)
    p /= p.sum()
    total = 0.0
    for pi, g in zip(p, MAX_ITEMS_GRID, strict=True):
        if pi > 1e-6:  # (the calibration does not depend on the quantile: the library's own for this noise)
            chosen = BoundChoice(g, auto["epsilon_bound"], quantile=auto_quantile(noise))
            total += pi * _items_at(g, plan_vocabulary(eps, delta, chosen, noise, count_fraction=frac), state)
    return total, MAX_ITEMS_GRID[int(np.argmax(p))]


def _sweep(name: str, within, state) -> list[dict]:
    """For each noise and (epsilon, delta) of :data:`SWEEP`: the best fixed bound, and the auto choice's
    expected items at each quantile of :data:`QUANTILES`."""
    rows = []
    for noise in ("gaussian", "laplace"):
        for eps, delta in SWEEP:
            fixed = {b: _items_at(b, plan_vocabulary(eps, delta, b, noise, count_fraction=0.0), state) for b in FINE}
            best = max(fixed, key=fixed.get)
            for q in QUANTILES:
                got, mode = _auto_expected(eps, delta, 0.0, noise, q, within, state)
                rows.append({
                    "dataset": name, "noise": noise, "epsilon": eps, "delta": delta, "quantile": q,
                    "best_fixed": fixed[best], "best_max_items": best, "auto_expected": got,
                    "auto_most_likely_max_items": mode, "auto_over_best": got / fixed[best],
                })  # fmt: skip
                print(rows[-1], flush=True)
    return rows


def _runs(noise: str, source, sets, eps: float, delta: float, frac: float, runs: int) -> list[int]:
    """The items of ``runs`` real default releases: the release function for Gaussian noise, the mechanism
    (:func:`userdp.vocabulary.private_vocabulary`, the weighted Laplace union) for Laplace noise."""
    if noise == "gaussian":
        return [len(releases.vocabulary(source, eps, delta, count_fraction=frac, rng=r).value["items"])
                for r in range(runs)]  # fmt: skip
    labels = np.asarray(sets.domain.labels)
    return [len(private_vocabulary(sets.offsets, sets.items, labels, eps, delta, noise="laplace",
                                   count_fraction=frac, rng=r).value["items"]) for r in range(runs)]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--imdb", default=str(SHARED / "imdb_reviews.jsonl.xz"))
    ap.add_argument("--reddit", default=str(SHARED / "reddit_ngrams.csv.xz"))
    ap.add_argument("--runs", type=int, default=3, help="real default releases per case (median)")
    ap.add_argument("--only", default=None, help="one data set (its name's start), for a quick look")
    args = ap.parse_args()
    names = ["Amazon Fashion (words)", "Foursquare venues"]
    if Path(args.reddit).exists():
        names.append("Reddit sample (words)")
    if Path(args.imdb).exists():
        names.append("IMDB reviews (words)")
    if args.only:
        names = [n for n in names if n.lower().startswith(args.only.lower())]
    rows, sweep = [], []
    cases = [("gaussian", *c) for c in CASES] + [("laplace", eps, delta, 0.0) for eps, delta in SWEEP]
    for name in names:
        sets, source = _load(name, Path(args.imdb), Path(args.reddit))
        offsets, items, n_items = sets.offsets, np.asarray(sets.items, dtype=np.int64), len(sets.domain)
        k = np.diff(offsets)
        print(f"{name}: {k.size} persons, {items.size} pairs, k quantiles 10/25/50/75/90/99% "
              f"{np.quantile(k, [0.1, 0.25, 0.5, 0.75, 0.9, 0.99]).round(0).tolist()}", flush=True)  # fmt: skip

        state = {"offsets": offsets, "items": items, "n_items": n_items, "hists": {}, "bounded": {}}
        within = persons_within(k)
        sweep += _sweep(name, within, state)
        for noise, eps, delta, frac in cases:
            fixed = {b: _items_at(b, plan_vocabulary(eps, delta, b, noise, count_fraction=frac), state) for b in FINE}
            best = max(fixed, key=fixed.get)
            q = auto_quantile(noise)
            expected_auto, mode = _auto_expected(eps, delta, frac, noise, q, within, state)
            runs = _runs(noise, source, sets, eps, delta, frac, args.runs) if args.runs else [float("nan")]
            rows.append({
                "dataset": name, "noise": noise, "quantile": q, "epsilon": eps, "delta": delta,
                "count_fraction": frac, "fixed_100": fixed[100], "best_fixed": fixed[best], "best_max_items": best,
                "auto_expected": expected_auto, "auto_most_likely_max_items": mode,
                "auto_median_of_runs": float(np.median(runs)), "auto_over_best": expected_auto / fixed[best],
            })  # fmt: skip
            print(rows[-1], flush=True)
    suffix = f"_{args.only.lower()}" if args.only else ""
    OUT.mkdir(exist_ok=True)
    pd.DataFrame(rows).to_csv(OUT / f"vocabulary_bound{suffix}.csv", index=False)
    pd.DataFrame(sweep).to_csv(OUT / f"vocabulary_bound_quantiles{suffix}.csv", index=False)
    lines = [
        "| dataset | noise (quantile) | ε | δ | count fraction | max_items 100 | best fixed (its max_items) | "
        "auto: expected (most likely max_items) | auto: median of runs | auto / best |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['dataset']} | {r['noise']} ({r['quantile']:g}) | {r['epsilon']:g} | {r['delta']:g} | "
            f"{r['count_fraction']:g} | {r['fixed_100']:,.1f} | {r['best_fixed']:,.1f} ({r['best_max_items']}) | "
            f"{r['auto_expected']:,.1f} ({r['auto_most_likely_max_items']}) | {r['auto_median_of_runs']:,.0f} | "
            f"{r['auto_over_best']:.2f} |"
        )
    sw = pd.DataFrame(sweep)
    head = "| noise | ε | dataset | best fixed (its max_items) | " + " | ".join(f"q = {q:g}" for q in QUANTILES) + " |"
    qlines = [head, "|" + "---|" * (4 + len(QUANTILES))]
    for (noise, eps, name), g in sw.groupby(["noise", "epsilon", "dataset"], sort=False):
        r0 = g.iloc[0]
        cells = [f"{r.auto_expected:,.1f} ({r.auto_most_likely_max_items}) {r.auto_over_best:.2f}"
                 for r in g.itertuples()]  # fmt: skip
        qlines.append(f"| {noise} | {eps:g} | {name} | {r0.best_fixed:,.1f} ({r0.best_max_items}) | "
                      + " | ".join(cells) + " |")  # fmt: skip
    worst = sw.groupby(["noise", "quantile"])["auto_over_best"].min().unstack("quantile")
    wlines = ["| noise | " + " | ".join(f"q = {q:g}" for q in worst.columns) + " |",
              "|" + "---|" * (1 + len(worst.columns))]  # fmt: skip
    for noise, r in worst.iterrows():
        wlines.append(f"| {noise} | " + " | ".join(f"{v:.2f}" for v in r) + " |")
    (OUT / f"vocabulary_bound{suffix}.md").write_text(
        "Items released by the weighted vocabulary (set alone, or with the default counts): the default "
        "max_items='auto' (at the library's quantile for the noise) against fixed bounds (expected counts; "
        "see experiments/vocabulary_bound.py):\n\n" + "\n".join(lines) + "\n\n"
        "The choice's quantile swept (set alone, δ = 1e-5): expected items at the auto choice (its most likely "
        "max_items) and their ratio to the best fixed bound:\n\n" + "\n".join(qlines) + "\n\n"
        "Worst auto / best ratio across the data sets and ε, per noise and quantile:\n\n" + "\n".join(wlines) + "\n"
    )
    print("\n".join(lines + [""] + qlines + [""] + wlines))


if __name__ == "__main__":
    main()

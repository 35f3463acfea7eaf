"""Items released by the policy greedy set union (Carvalho, Wang & Gondara, AAAI 2022) against the policy
Laplace and the weighted Gaussian unions (Gopi et al. 2020), at epsilon 1 and delta 1e-5, the set alone, on
IMDB reviews and Amazon Fashion (words; each review or reviewer a person). The greedy runs twice: with the
persons' local counts (their number of occurrences of each word: the paper's order) and with every count 1
(the order by the random priority alone). Mean over seeds; timings are not measured.

Run: python experiments/vocabulary_greedy.py [--imdb PATH] [--seeds 3] [--imdb-seeds 2]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from userdp.datasets import amazon_fashion, imdb_reviews
from userdp.vocabulary import policy_greedy_union, policy_laplace_union, weighted_gaussian_union

OUT = Path(__file__).parent / "results"
EPS, DELTA = 1.0, 1e-5
BOUNDS = (10, 100, 300)


def _runs(name, ds_counts, ds_sets, seeds):
    rows = []
    n = len(ds_sets.domain)
    for m in BOUNDS:
        got = {}
        for s in range(seeds):
            got.setdefault("weighted gaussian", []).append(
                weighted_gaussian_union(ds_sets.offsets, ds_sets.items, n, EPS, DELTA, m, rng=s)[0].size
            )
            got.setdefault("policy laplace", []).append(
                policy_laplace_union(ds_sets.offsets, ds_sets.items, n, EPS, DELTA, m, rng=s)[0].size
            )
            got.setdefault("policy greedy (local counts)", []).append(
                policy_greedy_union(ds_counts.offsets, ds_counts.items, n, EPS, DELTA, m, rng=s)[0].size
            )
            got.setdefault("policy greedy (no counts)", []).append(
                policy_greedy_union(ds_sets.offsets, ds_sets.items, n, EPS, DELTA, m, rng=s)[0].size
            )
        for k, v in got.items():
            rows.append((name, m, k, float(np.mean(v))))
            print(f"{name:24s} max_items {m:4d}  {k:30s} {np.mean(v):9.1f}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    imdb = Path(__file__).resolve().parents[2] / "shared/datasets/imdb_reviews.jsonl.xz"
    ap.add_argument("--imdb", default=str(imdb), help="the IMDB reviews (JSON lines); skipped when absent")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--imdb-seeds", type=int, default=2)
    args = ap.parse_args()
    rows = _runs("Amazon Fashion (words)", amazon_fashion(dedupe=False), amazon_fashion(), args.seeds)
    if Path(args.imdb).exists():
        raw = imdb_reviews(args.imdb, dedupe=False)
        sets = imdb_reviews(args.imdb)
        assert len(raw.domain) == len(sets.domain)
        rows += _runs("IMDB reviews (words)", raw, sets, args.imdb_seeds)
    OUT.mkdir(exist_ok=True)
    with open(OUT / "vocabulary_greedy.csv", "w") as f:
        f.write("dataset,max_items,method,items_released\n")
        for r in rows:
            f.write(f"{r[0]},{r[1]},{r[2]},{r[3]:.1f}\n")


if __name__ == "__main__":
    main()

"""Benchmark: the private vocabulary (weighted set union + noisy counts) on IMDB, reviews as persons.

Prints the time of each stage of ``userdp.vocabulary.private_vocabulary`` on 7.0 M person-word pairs
(50,000 persons, 101,944 words), after the words are read and deduplicated. No target is set by issue 18;
the figure to compare with is the exact distinct count on the same graph (about 1 s, bench_distinct.py).

Run: python benchmarks/bench_vocabulary.py [--imdb PATH]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from userdp.datasets import imdb_reviews
from userdp.vocabulary import bound_contributions, calibrate_union, private_vocabulary, union_histogram


def main() -> None:
    ap = argparse.ArgumentParser()
    default = Path(__file__).resolve().parents[2] / "shared/datasets/imdb_reviews.jsonl.xz"
    ap.add_argument("--imdb", default=str(default), help="the IMDB reviews (JSON lines)")
    args = ap.parse_args()
    t = time.perf_counter()
    ds = imdb_reviews(args.imdb)
    print(f"read + tokenize + dedupe: {time.perf_counter() - t:.2f} s ({ds.n_items:,} pairs, {len(ds.domain):,} words)")
    for noise in ("gaussian", "laplace"):
        t = time.perf_counter()
        calibrate_union(1.0, 1e-6, 100, noise)
        t_cal = time.perf_counter() - t
        t = time.perf_counter()
        off, its = bound_contributions(ds.offsets, ds.items, 100, rng=1)
        t_bound = time.perf_counter() - t
        t = time.perf_counter()
        union_histogram(off, its, len(ds.domain), noise)
        t_hist = time.perf_counter() - t
        t = time.perf_counter()
        rel = private_vocabulary(ds.offsets, ds.items, ds.domain.labels, 1.0, 1e-6, noise=noise)
        t_all = time.perf_counter() - t
        print(
            f"{noise}: calibration {t_cal:.2f} s, bounding {t_bound:.2f} s, weights {t_hist:.2f} s; whole release "
            f"(OS CSPRNG) {t_all:.2f} s, {np.asarray(rel.value['items']).size:,} words released at epsilon 1"
        )


if __name__ == "__main__":
    main()

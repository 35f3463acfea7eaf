"""Benchmark: the private vocabulary (weighted and policy set unions + noisy counts) and the records per key
with GEM-chosen bounds, on IMDB, reviews as persons.

Prints the time of each stage of ``userdp.vocabulary.private_vocabulary`` on 7.0 M person-word pairs
(50,000 persons, 101,944 words), after the words are read and deduplicated, then of
``userdp.vocabulary.private_key_counts`` on the same reviews' word counts (repeats counted). No target is
set by issue 18; the figure to compare with is the exact distinct count on the same graph (about 1 s,
bench_distinct.py).

Run: python benchmarks/bench_vocabulary.py [--imdb PATH]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from userdp.datasets import imdb_reviews
from userdp.vocabulary import (
    bound_contributions,
    calibrate_union,
    kept_records,
    policy_histogram,
    private_key_counts,
    private_vocabulary,
    union_histogram,
)


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
    cal = calibrate_union(1.0, 1e-6, 100, "laplace", policy=True)
    off, its = bound_contributions(ds.offsets, ds.items, 100, rng=1)
    t = time.perf_counter()
    policy_histogram(off, its, len(ds.domain), cal.cutoff, cal.unit, rng=1)
    t_pol = time.perf_counter() - t
    t = time.perf_counter()
    rel = private_vocabulary(ds.offsets, ds.items, ds.domain.labels, 1.0, 1e-6, noise="laplace", policy=True)
    print(f"policy laplace: histogram {t_pol:.2f} s; whole release {time.perf_counter() - t:.2f} s, "
          f"{np.asarray(rel.value['items']).size:,} words released at epsilon 1")  # fmt: skip

    # records per key: every review's words with their repeats
    import pyarrow as pa

    from userdp.data import read_table
    from userdp.engines import Columns, MemoryEngine

    eng = MemoryEngine()
    t = time.perf_counter()
    table = read_table(Path(args.imdb), columns=None, format="jsonl").select(["text"])
    table = table.append_column("review", pa.array(np.arange(table.num_rows)))  # each review one person
    sets, mult = eng.key_records(eng.load(table, Columns("review", "text", tokenize=True)))
    t_read = time.perf_counter() - t
    t = time.perf_counter()
    kept_records(sets.offsets, mult, [1, 2, 4, 8, 16, 32, 64, 128, 256], [1, 2, 4, 8, 16, 32, 64, 128, 256])
    t_kept = time.perf_counter() - t
    t = time.perf_counter()
    rel = private_key_counts(sets.offsets, sets.items, mult, sets.domain.labels, 1.0, 1e-6)
    t_all = time.perf_counter() - t
    print(f"records per key: read + tokenize + aggregate {t_read:.2f} s ({int(mult.sum()):,} words, "
          f"{sets.items.size:,} review-word pairs); kept records of 81 candidate bounds {t_kept:.2f} s; whole release "
          f"(selection, GEM, counts) {t_all:.2f} s, {rel.value['keys'].size:,} words, bounds "
          f"{rel.value['l0']} x {rel.value['linf']}")  # fmt: skip


if __name__ == "__main__":
    main()

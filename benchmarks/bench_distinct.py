"""Benchmark: distinct count on IMDB (50,000 persons, about 7 million person-word pairs, 100k words).

Targets: exact DC(D; l) for all l = 1..100 in at most 10 s, the greedy for all l in at most 2 s, peak
memory under 2 GB. Also the naive way -- one scipy max-flow per l -- timed on a few l and extrapolated
to 100, and how both scale with the number of records (IMDB prefixes).

Run: python benchmarks/bench_distinct.py [--imdb PATH]
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_flow

from userdp.datasets import imdb_reviews
from userdp.distinct import dc_greedy, dc_matching, dc_sampling, person_element_graph

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "imdb_reviews.jsonl.xz"


def scipy_flow(g, l: int) -> int:
    n, k = g.n_persons, g.n_elements
    S, T = 0, n + k + 1
    src = np.concatenate([np.zeros(n, np.int64), 1 + np.repeat(np.arange(n), g.degrees()), 1 + n + np.arange(k)])
    dst = np.concatenate([1 + np.arange(n), 1 + n + g.adj, np.full(k, T)])
    cap = np.concatenate([np.full(n, l), np.ones(g.n_edges + k)]).astype(np.int32)
    G = sp.csr_matrix((cap, (src, dst)), shape=(T + 1, T + 1))
    return int(maximum_flow(G, S, T).flow_value)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--imdb", default=str(SHARED))
    args = ap.parse_args()
    t = time.perf_counter()
    ds = imdb_reviews(args.imdb)
    g = person_element_graph(ds)
    print(
        f"IMDB: {g.n_persons} persons, {g.n_edges} pairs, {g.n_elements} words "
        f"(load + dedupe {time.perf_counter() - t:.1f} s)"
    )
    small = person_element_graph(ds.subset_users(np.arange(50)))
    dc_matching(small, 3), dc_greedy(small, 3)  # compile
    for name, fn in (("exact (incremental matching)", dc_matching), ("greedy (Algorithm 2)", dc_greedy)):
        t = time.perf_counter()
        v = fn(g, 100)
        print(f"{name:<30} all l = 1..100: {time.perf_counter() - t:6.2f} s   DC(100) = {v[-1]}")
    t = time.perf_counter()
    dc_sampling(g, 100, rng=1)
    print(f"{'sampling baseline':<30} all l = 1..100: {time.perf_counter() - t:6.2f} s")
    naive = []
    for l in (1, 10, 100):
        t = time.perf_counter()
        scipy_flow(g, l)
        naive.append(time.perf_counter() - t)
        print(f"naive: one scipy maximum_flow at l = {l:<3}     {naive[-1]:6.2f} s")
    print(f"naive all l = 1..100 (extrapolated from the mean): about {100 * np.mean(naive):.0f} s")
    print(f"peak memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    print("scaling with records (IMDB prefixes):")
    for frac in (0.125, 0.25, 0.5, 1.0):
        sub = person_element_graph(ds.subset_users(np.arange(int(frac * ds.n_users))))
        t = time.perf_counter()
        dc_matching(sub, 100)
        tm = time.perf_counter() - t
        t = time.perf_counter()
        dc_greedy(sub, 100)
        tg = time.perf_counter() - t
        print(f"  {sub.n_edges:>9} pairs: exact {tm:6.2f} s, greedy {tg:6.3f} s")


if __name__ == "__main__":
    main()

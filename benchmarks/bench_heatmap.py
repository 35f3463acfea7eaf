"""Benchmark: DP heatmap at scale.

Targets: 1 million users with 10 million points at Delta = 1024, gridding + aggregation + release in at most
10 s; Reconstruct alone at most 1 s for w = 20 at Delta = 4096; bounded memory (no dense Delta^2 x Delta^2
object: the release draws noise only for the O(w L) cells it reads).

Run: python benchmarks/bench_heatmap.py
"""

from __future__ import annotations

import resource
import time

import numpy as np

from userdp.data import BoxDomain, UserDataset
from userdp.heatmaps import dp_sparse_emd_agg, laplace_heatmap, level_budgets, reconstruct, user_grid_sum
from userdp.heatmaps.sparse import _measure
from userdp.noise import RandomSource


def main() -> None:
    rng = np.random.default_rng(0)
    n, per = 1_000_000, 10
    centers = rng.random((200, 2))
    pts = centers[rng.integers(0, 200, n * per)] + rng.normal(scale=0.01, size=(n * per, 2))
    pts = np.clip(pts, 0.0, 1.0)
    box = BoxDomain((0.0, 0.0), (1.0, 1.0))
    t = time.perf_counter()
    ds = UserDataset(np.arange(n + 1, dtype=np.int64) * per, pts, None, box)
    t_build = time.perf_counter() - t
    t = time.perf_counter()
    s = user_grid_sum(ds, 1024)
    t_grid = time.perf_counter() - t
    dp_sparse_emd_agg(np.ones((8, 8)), 1.0)  # warm up
    t = time.perf_counter()
    dp_sparse_emd_agg(s, 1.0)
    t_rel = time.perf_counter() - t
    print(
        f"1M users, 10M points, Delta = 1024: dataset (CSR, validation) {t_build:.2f} s, gridding + aggregation "
        f"{t_grid:.2f} s, sparse release {t_rel:.2f} s; gridding + aggregation + release {t_grid + t_rel:.2f} s"
    )
    t = time.perf_counter()
    laplace_heatmap(s, 1.0)
    print(f"Laplace baseline release at Delta = 1024 (noise on 1M cells): {time.perf_counter() - t:.2f} s")
    big = np.zeros((4096, 4096))
    idx = rng.integers(0, 4096, (50_000, 2))
    np.add.at(big, (idx[:, 0], idx[:, 1]), 1.0)
    _, budgets = level_budgets(1.0, 12, 20)
    t = time.perf_counter()
    levels = _measure(big, 12, budgets, 20, RandomSource())
    t_meas = time.perf_counter() - t
    t = time.perf_counter()
    reconstruct(levels)
    print(f"Delta = 4096, w = 20: measurement {t_meas:.2f} s, Reconstruct (LP) {time.perf_counter() - t:.3f} s")
    print(f"peak memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()

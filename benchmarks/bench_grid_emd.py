"""Benchmark: exact L1 EMD on the grid by min-cost flow (LEMON network simplex via pylmcf).

Prints seconds per EMD for grids of 64..256 cells a side on
  * realistic inputs: the Foursquare NYC check-in heatmap of 200 users vs a user-level Laplace release
    (eps = 1), raw and Gaussian-filtered (sigma = 1 cell) as the heatmaps paper compares them;
  * the adversarial case: two dense random distributions (every cell non-zero).
Run: python benchmarks/bench_grid_emd.py
"""

from __future__ import annotations

import time

import numpy as np
from scipy.ndimage import gaussian_filter

from userdp import datasets as D
from userdp.data import FiniteDomain
from userdp.dem import user_histogram
from userdp.metrics import GridL1, grid_emd
from userdp.noise import RandomSource


def timed(p, q, reps=3):
    best = np.inf
    for _ in range(reps):
        t = time.perf_counter()
        v = grid_emd(p, q)
        best = min(best, time.perf_counter() - t)
    return v, best


def main() -> None:
    rng = RandomSource(7)  # benchmark only
    fs = D.foursquare_nyc()
    users = rng.permutation(fs.n_users)[:200]
    sub = fs.subset_users(users)
    print(f"{'side':>5} {'input':<34} {'EMD':>9} {'seconds':>8}")
    for side in (64, 128, 256):
        g = GridL1(side)
        ds = sub.with_items(g.cells_of(sub.items, D.NYC_BOX), FiniteDomain(np.arange(g.size)))
        truth = (ds.histograms().sum(axis=0).A1 / ds.n_users).reshape(side, side)
        rel = user_histogram(ds, 1.0, rng=rng).value.reshape(side, side)
        cases = {
            "check-ins vs Laplace release": (truth, rel),
            "same, Gaussian-filtered (1 cell)": (gaussian_filter(truth, 1), gaussian_filter(rel, 1)),
        }
        r = np.random.default_rng(side)
        p, q = r.random((side, side)) ** 8, r.random((side, side)) ** 8
        cases["random dense (worst case)"] = (p / p.sum(), q / q.sum())
        for name, (a, b) in cases.items():
            v, t = timed(a, b, reps=1 if side == 256 else 3)
            print(f"{side:>5} {name:<34} {v:>9.5f} {t:>8.3f}")


if __name__ == "__main__":
    main()

"""Benchmark: exact L1 EMD on the grid (multi-scale primal-dual min-cost flow, userdp.metrics.grid_flow).

Prints seconds per EMD (best of a few runs, time.perf_counter) for grids of 64..512 cells a side on
  * realistic inputs: the Foursquare NYC check-in heatmap of 200 users vs a user-level Laplace release
    (eps = 1), raw and Gaussian-filtered (sigma = 1 cell) as the heatmaps paper compares them;
  * the adversarial case: two dense random distributions, rand**8 normalized (every cell non-zero);
next to the target (<= 10 s per EMD at 512 x 512) and, where affordable, the previous solver (LEMON's
network simplex via pylmcf, minutes at 512: skipped there unless --old-512), with the relative
difference of the two values (both solve the same integer problem, so it should be 0).

Run: python benchmarks/bench_grid_emd.py [--sides 64,128,256,512] [--old-512]
"""

from __future__ import annotations

import argparse
import importlib
import time

import numpy as np
from scipy.ndimage import gaussian_filter

from userdp import datasets as D
from userdp.data import FiniteDomain
from userdp.dem import user_histogram
from userdp.metrics import GridL1, grid_emd
from userdp.noise import RandomSource

E = importlib.import_module("userdp.metrics.emd")
TARGET_512 = 10.0


def best_of(f, reps):
    best, val = np.inf, None
    for _ in range(reps):
        t = time.perf_counter()
        val = f()
        best = min(best, time.perf_counter() - t)
    return val, best


def old_solver(a, b):
    """The previous implementation on the same integer problem (grid_emd's normalized units)."""
    w = a.ravel() - b.ravel()
    pos, neg = np.maximum(w, 0), np.maximum(-w, 0)
    mp, mn = pos.sum(), neg.sum()
    if E._balanced(a.sum(), b.sum()):
        mn = mp
    return E._grid_flow_lemon(pos, neg, a.shape, E._balanced(mp, mn))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sides", default="64,128,256,512")
    ap.add_argument("--old-512", action="store_true", help="also time the old solver once at 512 (minutes)")
    args = ap.parse_args()
    sides = [int(s) for s in args.sides.split(",")]

    t = time.perf_counter()
    grid_emd(np.eye(40), np.eye(40)[::-1])  # numba compilation (cached on disk after the first run)
    print(f"first call (JIT compile or cache load): {time.perf_counter() - t:.1f} s")

    rng = RandomSource(7)  # benchmark only
    fs = D.foursquare_nyc()
    users = rng.permutation(fs.n_users)[:200]
    sub = fs.subset_users(users)
    print(f"target: <= {TARGET_512:.0f} s per EMD at 512 x 512 on the dense random worst case")
    print(f"{'side':>5} {'input':<34} {'EMD':>9} {'new s':>8} {'old s':>8} {'rel diff':>9}")
    for side in sides:
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
            v, t_new = best_of(lambda a=a, b=b: grid_emd(a, b), reps=2 if side >= 512 else 3)
            old = ""
            diff = ""
            if side < 512 or args.old_512:
                v_old, t_old = best_of(lambda a=a, b=b: old_solver(a, b), reps=1 if side >= 256 else 3)
                old = f"{t_old:8.3f}"
                diff = f"{abs(v - v_old) / max(abs(v_old), 1e-300):9.1e}"
            note = ""
            if side == 512 and "worst" in name:
                note = f"  (target <= {TARGET_512:.0f} s: {'met' if t_new <= TARGET_512 else 'MISSED'})"
            print(f"{side:>5} {name:<34} {v:>9.5f} {t_new:>8.3f} {old:>8} {diff:>9}{note}", flush=True)


if __name__ == "__main__":
    main()

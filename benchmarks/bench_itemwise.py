"""Benchmark: GKRR item randomization throughput (target: at least 2e7 items per second on 2 cores), with the
default OS-CSPRNG source and a seeded one, and PrivEMDItemWise end to end.

Run: python benchmarks/bench_itemwise.py
"""

from __future__ import annotations

import time

import numpy as np

from userdp.data import FiniteDomain, UserDataset
from userdp.dem import GKRR, priv_emd_itemwise
from userdp.metrics import ClusteredMetric
from userdp.noise import RandomSource


def main() -> None:
    space = ClusteredMetric(50, 20, 0.1)  # k = 1000 items
    g = GKRR(space, 2.0)
    N = 20_000_000
    codes = np.random.default_rng(0).integers(0, space.size, N)
    for label, src in (("os.urandom (default)", RandomSource()), ("seeded", RandomSource(1))):
        g.randomize(codes[:1000], src)
        best = np.inf
        for _ in range(3):
            t = time.perf_counter()
            g.randomize(codes, src)
            best = min(best, time.perf_counter() - t)
        print(f"GKRR, k = 1000, {label:<22} {N / best / 1e6:8.1f} M items/s")
    n, m = 100_000, 200
    ds = UserDataset(np.arange(n + 1) * m, codes[: n * m], None, FiniteDomain(np.arange(space.size)))
    for model in ("local", "central"):
        t = time.perf_counter()
        priv_emd_itemwise(ds, g, model, delta=1e-9)
        print(f"PrivEMDItemWise {model:<8} n = {n}, m = {m}: {time.perf_counter() - t:6.2f} s")


if __name__ == "__main__":
    main()

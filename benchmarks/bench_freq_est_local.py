"""Benchmark: FreqEstLocal (Algorithm 4) on any finite metric with the exponential randomizer, against GKRR on a
clustered metric of the same size.

For k items on a line metric (and GKRR on k/8 clusters of 8), n users holding m items each: the time to build
and check the randomizer's integer table (its exact alpha_0 over all pairs, O(k^3)), to randomize the n m
items (exact sampling from the table, OS CSPRNG) and to invert the transition matrix (LU, O(k^3)). No
target is set by issue 19; GKRR's closed form is the figure to compare with.

Run: python benchmarks/bench_freq_est_local.py
"""

from __future__ import annotations

import time

import numpy as np

from userdp.data import FiniteDomain, UserDataset
from userdp.dem import ExponentialRandomizer, freq_est_local
from userdp.dem.frequency import right_inverse_estimate
from userdp.metrics import ClusteredMetric, FiniteMetric


def _best(fn, reps: int = 3) -> float:
    best = np.inf
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"{'k':>5} {'n x m items':>12} {'table + alpha_0':>16} {'randomize':>10} {'items/s':>9} {'inverse':>8} "
          f"{'whole release':>14} {'GKRR release':>13}")  # fmt: skip
    for k, n, m in ((64, 10_000, 100), (256, 10_000, 100), (1024, 2_000, 100)):
        x = np.arange(k, dtype=np.float64)
        line = FiniteMetric(np.abs(x[:, None] - x[None, :]), check=False)
        ds = UserDataset(np.arange(n + 1) * m, rng.integers(0, k, n * m), None, FiniteDomain(np.arange(k)))
        t_table = _best(lambda line=line: ExponentialRandomizer(line, 2.0), 1)
        rz = ExponentialRandomizer(line, 2.0)
        t_rand = _best(lambda rz=rz, ds=ds: rz.randomize(ds.items))
        A = rz.transition_matrix()
        v = np.full(k, 1.0 / k)
        t_inv = _best(lambda A=A, v=v: right_inverse_estimate(A, v))
        t_rel = _best(lambda ds=ds, line=line: freq_est_local(ds, line, 50.0, 1e-6, randomizer="exponential"), 1)
        gk = ClusteredMetric(k // 8, 8, 0.1)
        t_gk = _best(lambda ds=ds, gk=gk: freq_est_local(ds, gk, 50.0, 1e-6), 1)
        print(f"{k:>5} {n * m:>12,} {t_table:>15.2f}s {t_rand:>9.2f}s {n * m / t_rand / 1e6:>7.1f}M {t_inv:>7.3f}s "
              f"{t_rel:>13.2f}s {t_gk:>12.2f}s")  # fmt: skip


if __name__ == "__main__":
    main()

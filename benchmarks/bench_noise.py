"""Benchmark: throughput of the exact samplers with the OS CSPRNG (the default) and a seeded source.

Run: python benchmarks/bench_noise.py
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from userdp.noise import RandomSource, discrete_gaussian, discrete_laplace, knorm_noise, laplace_mechanism


def rate(fn: Callable[[int], object], n: int) -> float:
    fn(1000)  # compile / warm up
    t = time.perf_counter()
    fn(n)
    return n / (time.perf_counter() - t)


def cases(src: RandomSource) -> dict[str, Callable[[int], object]]:
    return {
        "uniform 64-bit words": src.words,
        "discrete Laplace, t = 2^40": lambda k: discrete_laplace(2**40, k, src),
        "discrete Gaussian, sigma^2 = 2^25": lambda k: discrete_gaussian(2**25, k, src),
        "Laplace mechanism (values/s)": lambda k: laplace_mechanism(np.zeros(k), 1.0, 1.0, src),
        "l2 K-norm noise, d = 50 (coords/s)": lambda k: knorm_noise(50, 1.0, "l2", k // 50, src),
    }


def main() -> None:
    n = 2_000_000
    for label, src in (("os.urandom (default)", RandomSource()), ("seeded PCG64", RandomSource(1))):
        print(f"--- {label}")
        for name, fn in cases(src).items():
            print(f"{name:<38} {rate(fn, n) / 1e6:8.2f} M/s")


if __name__ == "__main__":
    main()

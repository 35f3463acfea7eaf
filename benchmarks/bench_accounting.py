"""Benchmark: time of the d_EM-DP calibration (target: under 50 ms) and of Theorem 4.4.

Run: python benchmarks/bench_accounting.py
"""

from __future__ import annotations

import time

from userdp.privacy.accounting import calibrate, shuffle_guarantee

CASES = [
    ("central, paper example", dict(alpha=25, delta_prime=1e-5, m=1000, n=100_000)),
    ("local, m = 1000", dict(alpha=25, delta_prime=1e-5, m=1000)),
    ("central, m = 50, n = 2000", dict(alpha=10, delta_prime=1e-6, m=50, n=2000)),
    ("local, m = 100 (shuffle invalid)", dict(alpha=2, delta_prime=1e-6, m=100)),
]


def main() -> None:
    print(f"{'case':<34} {'route':<12} {'alpha_0':>9} {'ms/calibration':>15}")
    for name, kw in CASES:
        calibrate(**kw)
        reps = 20
        t = time.perf_counter()
        for _ in range(reps):
            cal = calibrate(**kw)
        ms = (time.perf_counter() - t) / reps * 1e3
        print(f"{name:<34} {cal.route:<12} {cal.alpha0:>9.4g} {ms:>15.1f}")
    t = time.perf_counter()
    for _ in range(10_000):
        shuffle_guarantee(2.7, 1000, 1e-12, n=100_000)
    print(f"Theorem 4.4 evaluation: {(time.perf_counter() - t) / 10_000 * 1e6:.1f} us")


def numerical() -> None:
    """How much larger alpha_0 the numerical amplification bound allows (takes about a minute)."""
    print(f"\n{'case (numerical route)':<34} {'thm 4.4':>9} {'numerical':>10} {'composition':>12} {'seconds':>8}")
    for name, kw in CASES[:3]:
        t = time.perf_counter()
        cal = calibrate(numerical=True, **kw)
        r = cal.routes
        print(
            f"{name:<34} {r['theorem 4.4'].alpha0:>9.4g} {r['numerical'].alpha0:>10.4g} "
            f"{r['composition'].alpha0:>12.4g} {time.perf_counter() - t:>8.1f}"
        )


if __name__ == "__main__":
    main()
    numerical()

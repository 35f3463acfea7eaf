"""Table 2b of Imola et al. (CCS 2024), measured: frequency estimation on the clustered metric.

d_EM error of GKRR + PrivEMDItemWise (FreqEstLocal, Algorithm 4) under (alpha, delta')-d_EM-DP against the
user-level DP baselines: Hadamard response (local, (eps, delta)) and the Laplace mechanism (central,
(eps, 0)), with alpha = eps / r (the paper's choice: privacy is needed inside a cluster). Two data sources:

* synthetic clustered data (users draw m items i.i.d. from a Zipf-like distribution over k = s t items);
* Foursquare NYC check-ins: clusters = a public 4 x 4 grid over the NYC box, items = a public 3 x 3
  refinement of each cell (k = 144), m = 100 check-ins per user sampled with replacement
  (BoundedEMDReduction's projection).

Writes experiments/results/dem_frequency.csv and .png. Run: python experiments/dem_frequency.py [--quick]
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

from userdp import datasets as D
from userdp.data import FiniteDomain, UserDataset
from userdp.dem.frequency import demd_error, freq_est_gkrr, freq_est_hadamard, freq_laplace_central
from userdp.metrics import ClusteredMetric
from userdp.noise import RandomSource

OUT = Path(__file__).resolve().parent / "results"
DELTA = 1e-6


def synthetic(s: int, t: int, n: int, m: int, rng: np.random.Generator) -> UserDataset:
    k = s * t
    w = 1.0 / np.arange(1, k + 1) ** 1.1
    p = rng.permutation(w / w.sum())
    items = rng.choice(k, size=n * m, p=p)
    return UserDataset(np.arange(n + 1) * m, items, None, FiniteDomain(np.arange(k)))


def foursquare(m: int, src: RandomSource) -> tuple[UserDataset, ClusteredMetric]:
    fs = D.foursquare_nyc()
    box = D.NYC_BOX
    p = (fs.items - np.array(box.low)) / (np.array(box.high) - np.array(box.low))
    fine = np.minimum((p * 12).astype(np.int64), 11)  # public 12 x 12 grid
    coarse = fine // 3  # public 4 x 4 grid, each cell split 3 x 3
    b = coarse[:, 0] * 4 + coarse[:, 1]
    c = (fine[:, 0] % 3) * 3 + fine[:, 1] % 3
    codes = b * 9 + c
    ds = fs.with_items(codes, FiniteDomain(np.arange(144)))
    return ds.sample(m, replace=True, rng=src), ClusteredMetric(16, 9, 0.25)


def run_config(
    ds: UserDataset, space: ClusteredMetric, eps: float, alphas: list[float], reps: int, src: RandomSource
) -> list[dict]:
    """Baselines at user-level eps, GKRR at every alpha in ``alphas``; ``reps`` repetitions each."""
    truth = ds.global_histogram()
    m, n, k = int(ds.counts()[0]), ds.n_users, space.size
    rows = []
    base = dict(k=k, m=m, n=n, eps=eps)
    for rep in range(reps):
        h = freq_est_hadamard(ds, eps, DELTA, rng=src)
        rows.append(
            dict(
                base,
                method="Hadamard user-level",
                model="local",
                alpha=float("nan"),
                alpha0=h.params["epsilon0"],
                route="optimal composition",
                error=demd_error(h.value, truth, space),
                rep=rep,
            )
        )
        lap = freq_laplace_central(ds, eps, rng=src)
        rows.append(
            dict(
                base,
                method="Laplace user-level",
                model="central",
                alpha=float("nan"),
                alpha0=float("nan"),
                route="-",
                error=demd_error(lap.value, truth, space),
                rep=rep,
            )
        )
        for alpha in alphas:
            for model in ("local", "central"):
                g = freq_est_gkrr(ds, space, alpha, DELTA, model=model, rng=src)
                rows.append(
                    dict(
                        base,
                        method="GKRR d_EM",
                        model=model,
                        alpha=alpha,
                        alpha0=g.extras["alpha0"],
                        route=g.params["route"],
                        error=demd_error(g.value, truth, space),
                        rep=rep,
                    )
                )
    return rows


def crossovers(df):
    """Smallest alpha at which GKRR's median error beats the baseline of the same model, per config, next to
    the paper's thresholds alpha >= eps^2 k / ln(m / delta) (local) and alpha >= eps^2 k (central)."""
    import pandas as pd

    out = []
    for key, g in df.groupby(["data", "k", "m", "n", "eps"]):
        data, k, m, n, eps = key
        for model, base in (("local", "Hadamard user-level"), ("central", "Laplace user-level")):
            b = g[g.method == base].error.median()
            gk = g[(g.method == "GKRR d_EM") & (g.model == model)].groupby("alpha").error.median()
            wins = gk[gk < b]
            theory = eps**2 * k / math.log(m / DELTA) if model == "local" else eps**2 * k
            out.append(
                dict(
                    data=data,
                    k=k,
                    m=m,
                    n=n,
                    eps=eps,
                    model=model,
                    baseline_error=b,
                    best_dem_error=gk.min(),
                    measured_crossover_alpha=wins.index.min() if len(wins) else float("inf"),
                    theory_threshold_alpha=theory,
                )
            )
    return pd.DataFrame(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    src = RandomSource(2024)  # experiments: seeded for reproducibility
    rng = np.random.default_rng(2024)
    reps = 3 if args.quick else 9
    alphas = [1, 3, 10, 30, 100, 300, 1000]
    configs = [(4, 4, 2000, 1000), (8, 8, 2000, 1000), (8, 8, 2000, 200), (16, 16, 2000, 1000), (8, 8, 500, 1000)]
    if args.quick:
        configs, alphas = configs[:2], [3, 30, 300]
    rows: list[dict] = []
    t0 = time.time()
    for s, t, n, m in configs:
        ds = synthetic(s, t, n, m, rng)
        space = ClusteredMetric(s, t, 0.1)
        for eps in (0.25, 1.0):
            for row in run_config(ds, space, eps, alphas, reps, src):
                rows.append(dict(row, data="synthetic"))
    ds, space = foursquare(100, src)
    for eps in (0.25, 1.0):
        for row in run_config(ds, space, eps, alphas, reps, src):
            rows.append(dict(row, data="foursquare"))
    import pandas as pd

    df = pd.DataFrame(rows)
    df.to_csv(OUT / "dem_frequency.csv", index=False)
    cx = crossovers(df)
    cx.to_csv(OUT / "dem_frequency_crossover.csv", index=False)
    print(cx.round(4).to_string(index=False))
    _plot(df)
    print(f"done in {time.time() - t0:.0f} s; wrote {OUT / 'dem_frequency.csv'}, dem_frequency_crossover.csv and .png")


def _plot(df) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("synthetic", 64, 1000, 2000), ("foursquare", 144, 100, 1083)]
    fig, axes = plt.subplots(1, 2, figsize=(11.5, 4.4))
    for ax, (data, k, m, n) in zip(axes, panels, strict=True):
        sub = df[(df.data == data) & (df.k == k) & (df.m == m) & (df.n == n) & (df.eps == 1.0)]
        if sub.empty:
            continue
        for model, color in (("local", "C0"), ("central", "C1")):
            g = sub[(sub.method == "GKRR d_EM") & (sub.model == model)].groupby("alpha").error
            ax.plot(g.median().index, g.median().values, "o-", color=color, label=f"GKRR d_EM-DP ({model}), alpha")
            base = "Hadamard user-level" if model == "local" else "Laplace user-level"
            ax.axhline(sub[sub.method == base].error.median(), color=color, ls="--", label=f"{base}, eps = 1")
        ax.axvline(k / math.log(m / DELTA), color="C0", ls=":", label="theory: alpha = eps^2 k / ln(m/delta)")
        ax.axvline(k, color="C1", ls=":", label="theory: alpha = eps^2 k")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("alpha (d_EM-DP)")
        ax.set_ylabel("median d_EM(estimate, truth)")
        ax.set_title(f"{data}: k = {k}, m = {m}, n = {n}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(OUT / "dem_frequency.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()

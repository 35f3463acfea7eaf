"""Ghazi et al. (AAAI 2023), Figures 1 and 2, on the Foursquare NYC check-ins.

Public sub-boxes: well-known neighbourhoods whose coordinates are taken from a map (not found by searching
the data); each has check-ins from more than 200 users. In every trial 200 users (or n) are sampled, each
user's check-ins inside the box form their distribution, and every algorithm runs on the same sum:

* ours: DPSparseEMDAgg + Reconstruct (w = 20, gamma = 1/sqrt 2, levels below q skipped);
* Laplace baseline (noise on every cell, negatives zeroed) and its top-1% and top-0.1% thresholding;
* dense EMD aggregation (appendix D) on a coarse public grid of side 2^round(log2 sqrt(eps n));
* ours with w = 100 (the paper fixes w = 20), to show the sparse-approximation term.

Metrics on Gaussian-filtered heatmaps (sigma = Delta / 128 cells): SIM, Pearson CC, KL, EMD (exact).
1. eps in {0.1, 0.5, 1, 2, 5, 10} at Delta = 256 (Figure 1): mean and 95% CI over boxes x trials;
2. n in {50, ..., 500} (Figure 2 left) and Delta in {64, 128, 256, 512} (Figure 2 right), eps = 10, EMD.

Writes experiments/results/heatmaps_*.csv and .png. Run: python experiments/heatmaps.py [--quick]
With ``--paper``: the paper's own construction (cell-months of a 300 x 300 grid over the continental US),
see experiments/heatmaps_paper.py.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from userdp import datasets as D
from userdp.data import BoxDomain
from userdp.heatmaps import (
    all_metrics,
    dense_emd_agg,
    dense_resolution,
    dp_sparse_emd_agg,
    gaussian_heatmap,
    laplace_heatmap,
    user_grid_sum,
)
from userdp.noise import RandomSource
from userdp.report.maps import MapPanel, left_out_label, render_maps

OUT = Path(__file__).resolve().parent / "results"
BOXES = {  # (lat_min, lat_max, lon_min, lon_max), from a map of New York City
    "Midtown Manhattan": (40.745, 40.770, -73.999, -73.965),
    "Lower Manhattan": (40.700, 40.725, -74.020, -73.990),
    "Greenwich & East Village": (40.722, 40.740, -74.010, -73.975),
    "Downtown Brooklyn": (40.685, 40.705, -73.998, -73.975),
    "Williamsburg": (40.700, 40.725, -73.970, -73.935),
}
ALGOS = [
    "ours (sparse EMD)",
    "Laplace baseline",
    "Laplace top 1%",
    "Laplace top 0.1%",
    "dense EMD (app. D)",
    "ours, w = 100",
]


def box_users(fs, box: BoxDomain):
    """Users with at least one check-in in the box, restricted to their check-ins inside it."""
    inside = box.contains(fs.items)
    users = np.unique(fs.user_index()[inside])
    return users


def run_algos(s: np.ndarray, eps: float, n_public: int, src: RandomSource) -> dict[str, np.ndarray]:
    side = s.shape[0]
    return {
        ALGOS[0]: dp_sparse_emd_agg(s, eps, rng=src).value,
        ALGOS[1]: laplace_heatmap(s, eps, rng=src).value,
        ALGOS[2]: laplace_heatmap(s, eps, top_percent=1.0, rng=src).value,
        ALGOS[3]: laplace_heatmap(s, eps, top_percent=0.1, rng=src).value,
        ALGOS[4]: dense_emd_agg(s, eps, dense_resolution(eps, n_public, side), rng=src).value,
        ALGOS[5]: dp_sparse_emd_agg(s, eps, w=100, rng=src).value,
    }


def trial(fs, name: str, box: BoxDomain, users: np.ndarray, n: int, side: int, eps: float, src, gen, emd=True):
    pick = gen.choice(users, size=n, replace=False)
    sub = fs.subset_users(pick)
    s = user_grid_sum(sub, side, box, drop_outside=True)
    sigma = side / 128
    truth = gaussian_heatmap(s / s.sum(), sigma)
    rows = []
    outs = run_algos(s, eps, n, src)
    for algo, est in outs.items():
        m = all_metrics(truth, gaussian_heatmap(est, sigma), emd=emd)
        rows.append(dict(box=name, n=n, side=side, epsilon=eps, algorithm=algo, **m))
    return rows, truth, outs


def main() -> None:
    if "--paper" in sys.argv:  # the paper's construction: experiments/heatmaps_paper.py
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import heatmaps_paper

        heatmaps_paper.main([a for a in sys.argv[1:] if a != "--paper"])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sides", default="64,128,256,512", help="resolutions of the Delta sweep")
    ap.add_argument(
        "--only",
        choices=["all", "delta"],
        default="all",
        help="delta: run only the resolution sweep and reuse the saved epsilon and n results",
    )
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    src = RandomSource(2023)  # experiments: seeded
    gen = np.random.default_rng(2023)
    t0 = time.time()
    fs = D.foursquare_nyc()
    boxes = {k: BoxDomain.latlon(a, b, c, d) for k, (a, b, c, d) in BOXES.items()}
    eligible = {k: box_users(fs, b) for k, b in boxes.items()}
    for k, u in eligible.items():
        print(f"{k}: {u.size} users with check-ins inside")
    boxes = {k: b for k, b in boxes.items() if eligible[k].size >= 200}
    import pandas as pd

    if args.only == "delta":
        df1 = pd.read_csv(OUT / "heatmaps_eps.csv")
        df2 = pd.read_csv(OUT / "heatmaps_n.csv")
    # 1. epsilon sweep at Delta = 256
    eps_list = [0.1, 0.5, 1, 2, 5, 10] if not args.quick else [1, 10]
    trials = 2 if not args.quick else 1
    rows = []
    for eps in eps_list if args.only == "all" else []:
        for name, box in boxes.items():
            for _ in range(trials):
                r, truth, outs = trial(fs, name, box, eligible[name], 200, 256, eps, src, gen)
                rows += r
        print(f"eps = {eps}: done ({time.time() - t0:.0f} s)")
        if eps in (1, 10):
            sig = 2.0
            kinds = ["sparse", "laplace", "threshold", "threshold", "dense", "sparse"]  # the order of ALGOS
            render_maps(
                [MapPanel(truth, "true (non-private)", left_out=left_out_label("truth"))]
                + [
                    MapPanel(gaussian_heatmap(v, sig), k, left_out=left_out_label(kind, top))
                    for (k, v), kind, top in zip(outs.items(), kinds, [None, None, 1.0, 0.1, None, None], strict=True)
                ],
                OUT / f"heatmaps_example_eps{eps:g}.png",
                box,
                title=f"{name}, 200 users, ε = {eps:g}, Δ = 256 cells a side, Gaussian filter σ = {sig:g} "
                "cells; each map has its own colour scale",
            )
    if args.only == "all":
        df1 = pd.DataFrame(rows)
        df1.to_csv(OUT / "heatmaps_eps.csv", index=False)
    # 2. n and Delta sweeps on Midtown, eps = 10, EMD
    name = "Midtown Manhattan"
    box, users = boxes[name], eligible[name]
    rows = []
    n_list = [50, 100, 200, 300, 400, 500] if not args.quick else [50, 200]
    for n in n_list if args.only == "all" else []:
        for _ in range(10 if not args.quick else 1):
            rows += trial(fs, name, box, users, min(n, users.size), 256, 10.0, src, gen)[0]
    if args.only == "all":
        df2 = pd.DataFrame(rows)
        df2.to_csv(OUT / "heatmaps_n.csv", index=False)
    rows = []
    for side in [int(x) for x in args.sides.split(",")] if not args.quick else [64, 128]:
        for _ in range(5 if not args.quick else 1):
            rows += trial(fs, name, box, users, 200, side, 10.0, src, gen)[0]
        print(f"Delta = {side}: done ({time.time() - t0:.0f} s)")
    df3 = pd.DataFrame(rows)
    df3.to_csv(OUT / "heatmaps_delta.csv", index=False)
    summary = df1.groupby(["epsilon", "algorithm"])[["SIM", "CC", "KL", "EMD"]].mean().round(4)
    summary.to_csv(OUT / "heatmaps_eps_summary.csv")
    print(summary.to_string())
    print(df2.groupby(["n", "algorithm"]).EMD.mean().unstack().round(4).to_string())
    print(df3.groupby(["side", "algorithm"]).EMD.mean().unstack().round(4).to_string())
    _plots(df1, df2, df3)
    print(f"done in {time.time() - t0:.0f} s")


def _ci(g):
    m = g.mean()
    h = 1.96 * g.std(ddof=1) / np.sqrt(max(len(g), 1)) if len(g) > 1 else 0.0
    return m, h


def _plots(df1, df2, df3) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    for ax, metric in zip(axes, ["SIM", "CC", "KL", "EMD"], strict=True):
        for algo in ALGOS:
            g = df1[df1.algorithm == algo].groupby("epsilon")[metric]
            stats = [(e, *_ci(v)) for e, v in g]
            e, m, h = (np.array(x) for x in zip(*stats, strict=True))
            ax.errorbar(e, m, yerr=h, marker="o", capsize=2, label=algo)
        ax.set_xscale("log")
        ax.set_xlabel("epsilon")
        ax.set_title(metric + (" (higher is better)" if metric in ("SIM", "CC") else " (lower is better)"), fontsize=9)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(OUT / "heatmaps_eps.png", dpi=100)
    plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, (df, col, label) in zip(axes, [(df2, "n", "users n"), (df3, "side", "resolution Delta")], strict=True):
        for algo in ALGOS:
            g = df[df.algorithm == algo].groupby(col).EMD
            stats = [(x, *_ci(v)) for x, v in g]
            x, m, h = (np.array(v) for v in zip(*stats, strict=True))
            ax.errorbar(x, m, yerr=h, marker="o", capsize=2, label=algo)
        ax.set_xlabel(label)
        ax.set_ylabel("EMD (eps = 10)")
        if col == "side":
            ax.set_xscale("log", base=2)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(OUT / "heatmaps_n_delta.png", dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()

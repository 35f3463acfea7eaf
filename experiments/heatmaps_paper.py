"""Ghazi et al. (AAAI 2023), section 4 and appendix E, run the way the paper ran it, on Foursquare NYC.

The construction (section 4, "Datasets"): the continental US (latitude 0 to 50, longitude -135 to -60) cut
into a 300 x 300 grid; a *cell-month* is one month of check-ins in one grid cell; the cell-months with check-ins
from at least 200 users are used (on Foursquare NYC: 28 cell-months in 4 cells around New York). Each cell is
cut into a Delta x Delta sub-grid (square in degrees, as in the paper) and every check-in is snapped to it. A
*trial* samples 200 users of a cell-month; each user's check-ins there form their distribution; every algorithm
runs on the same sum, ``--repeats`` times. A *run* is one (cell-month, trial, repeat). In a run every algorithm
draws its noise from the same seeded stream (common random numbers): where two algorithms share a noise step
(appendix D and userdp's grid branch), their paired difference is measured on the same noise.

Metrics (section 4): SIM, Pearson CC, KL and exact EMD between the Gaussian-filtered true and released heatmaps,
with the untruncated kernel of section 2.3 and sigma in {Delta/128, Delta/64, Delta/32} (the paper does not
state sigma; EMD for the first sigma only unless ``--emd-all-sigmas``).

Figures (each writes CSV under experiments/results/heatmaps_paper_*.csv and a PNG):

* ``fig1``: epsilon in {0.1, 0.5, 1, 2, 5, 10} at Delta = 256, n = 200, 2 trials per cell-month: mean and 95%
  confidence interval per algorithm, and paired comparisons of userdp's default (``auto_heatmap``) with every
  other algorithm (mean paired difference with its 95% interval, and the win rate);
* ``fig2``: on the largest cell-month, n in {50, 100, 200, 300, 400, 500} (Delta = 256) and Delta in {64, 128,
  256, 512} (n = 200), 10 trials: figure 2 (EMD, epsilon = 10) and figures 4-7 (SIM, CC, KL and EMD against n
  and against Delta, at epsilon = 10 and epsilon = 1: ``heatmaps_paper_fig4_7.png``, means in
  ``heatmaps_paper_fig4_7_means.csv``);
* ``fig3``: example maps at epsilon = 1 and 5;
* ``e3``: appendix E.3's synthetic sparsity: 200 users drawing points from a mixture of 20 random Gaussians,
  the number of points setting the share of non-empty cells, epsilon = 1, 10 datasets per level (figure 10);
  and with 5, 10, 20 and 80 Gaussians (figure 11, ``heatmaps_paper_fig11.png``).

Algorithms: the paper's (DPSparseEMDAgg + Reconstruct, w = 20), appendix D's dense aggregation (coarse side
2^round(log2 sqrt(eps n)) from the public n = 200), the Laplace baseline and its top 0.01% and 0.001% variants
(the paper's thresholds), PrivTree, adaptive grids, Hay et al.'s hierarchy, userdp's PrivTree-EMD, and userdp's
default, ``auto_heatmap`` (the post-processed appendix-D grid when epsilon n < 40, PrivTree-EMD above).

Run: python experiments/heatmaps.py --paper [--figures fig1,fig2,fig3,e3] [--epsilons ...] [--repeats R]
[--workers W]. Results are appended per (figure, point) to the CSV, and points already there are skipped, so an
interrupted run resumes where it stopped.
"""

from __future__ import annotations

import argparse
import math
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from userdp import datasets as D
from userdp.heatmaps import (
    adaptive_grid_heatmap,
    all_metrics,
    auto_heatmap,
    dense_emd_agg,
    dense_resolution,
    dp_sparse_emd_agg,
    gaussian_heatmap,
    hierarchical_heatmap,
    laplace_heatmap,
    privtree_emd_heatmap,
    privtree_heatmap,
)
from userdp.noise import RandomSource

OUT = Path(__file__).resolve().parent / "results"
US = (0.0, 50.0, -135.0, -60.0)  # lat_min, lat_max, lon_min, lon_max (section 4)
US_GRID = 300
N_USERS = 200
OURS = "userdp auto (default)"
ALGOS = {
    "sparse EMD (paper)": lambda s, e, r, n: dp_sparse_emd_agg(s, e, rng=r).value,
    "dense EMD (app. D)": lambda s, e, r, n: dense_emd_agg(s, e, dense_resolution(e, n, s.shape[0]), rng=r).value,
    "Laplace": lambda s, e, r, n: laplace_heatmap(s, e, rng=r).value,
    "Laplace top 0.01%": lambda s, e, r, n: laplace_heatmap(s, e, top_percent=0.01, rng=r).value,
    "Laplace top 0.001%": lambda s, e, r, n: laplace_heatmap(s, e, top_percent=0.001, rng=r).value,
    "PrivTree": lambda s, e, r, n: privtree_heatmap(s, e, rng=r).value,
    "adaptive grid": lambda s, e, r, n: adaptive_grid_heatmap(s, e, n_public=n, rng=r).value,
    "hierarchy (Hay)": lambda s, e, r, n: hierarchical_heatmap(s, e, rng=r).value,
    "PrivTree-EMD (userdp)": lambda s, e, r, n: privtree_emd_heatmap(s, e, rng=r).value,
    OURS: lambda s, e, r, n: auto_heatmap(s, e, n_public=n, rng=r).value,
}
HIGHER_IS_BETTER = {"SIM": True, "CC": True, "KL": False, "EMD": False}


def cell_months(min_users: int = N_USERS) -> list[dict]:
    """The cell-months of the paper's construction with check-ins from at least ``min_users`` users, each
    with its users and check-in positions as fractions of the cell (largest first)."""
    df = D.foursquare_nyc_table().select(["user", "lat", "lon", "utc_date_time"]).to_pandas()
    dl, dn = (US[1] - US[0]) / US_GRID, (US[3] - US[2]) / US_GRID
    df["ci"] = np.floor((df.lat - US[0]) / dl).astype(int)
    df["cj"] = np.floor((df.lon - US[2]) / dn).astype(int)
    df["month"] = df.utc_date_time.dt.to_period("M").astype(str)
    out = []
    for (ci, cj, month), g in df.groupby(["ci", "cj", "month"]):
        if g.user.nunique() >= min_users:
            out.append(
                dict(
                    name=f"cell ({ci},{cj}) {month}",
                    users=g.user.to_numpy(),
                    fy=(g.lat.to_numpy() - (US[0] + ci * dl)) / dl,
                    fx=(g.lon.to_numpy() - (US[2] + cj * dn)) / dn,
                    n_users=g.user.nunique(),
                )
            )
    return sorted(out, key=lambda c: -c["n_users"])


def user_sum(users: np.ndarray, fy: np.ndarray, fx: np.ndarray, side: int) -> np.ndarray:
    """``s = sum_i p_i`` on the side x side sub-grid: every user's check-ins as a distribution."""
    r = np.minimum((fy * side).astype(np.int64), side - 1)
    c = np.minimum((fx * side).astype(np.int64), side - 1)
    _, inv, cnt = np.unique(users, return_inverse=True, return_counts=True)
    s = np.zeros((side, side))
    np.add.at(s, (r, c), 1.0 / cnt[inv])
    return s


def sample_users(cm: dict, n: int, side: int, gen: np.random.Generator) -> np.ndarray:
    pick = gen.choice(np.unique(cm["users"]), size=n, replace=False)
    m = np.isin(cm["users"], pick)
    return user_sum(cm["users"][m], cm["fy"][m], cm["fx"][m], side)


def evaluate(s: np.ndarray, eps: float, n: int, seed: int, emd_sigmas: tuple[float, ...], sigmas) -> list[dict]:
    """Every algorithm on the sum ``s``; metrics per sigma (EMD only for ``emd_sigmas``)."""
    truths = {sg: gaussian_heatmap(s / s.sum(), sg) for sg in sigmas}
    rows = []
    for name, algo in ALGOS.items():
        # common random numbers: every algorithm draws from the same seeded stream, so paired differences
        # between algorithms that share a noise step (appendix D and userdp's grid branch) compare them on
        # the same noise; the other pairs are as independent as before
        src = RandomSource(seed)  # experiments: seeded
        t0 = time.perf_counter()
        est = algo(s, eps, src, n)
        secs = time.perf_counter() - t0
        for sg in sigmas:
            h = gaussian_heatmap(est, sg)
            m = {"EMD": np.nan, **all_metrics(truths[sg], h, emd=sg in emd_sigmas)}
            rows.append(dict(algorithm=name, sigma=sg, seconds=secs, **m))
    return rows


def _task(args) -> list[dict]:
    figure, key, s, eps, n, seed, emd_sigmas, sigmas = args
    return [dict(figure=figure, **key, epsilon=eps, n=n, side=s.shape[0], **r) for r in
            evaluate(s, eps, n, seed, emd_sigmas, sigmas)]


def _sigmas(side: int) -> tuple[float, ...]:
    return (side / 128, side / 64, side / 32)


def _run(tasks: list, path: Path, workers: int, label: str) -> None:
    t0 = time.time()
    with ProcessPoolExecutor(max_workers=workers) as pool:
        rows = [r for part in pool.map(_task, tasks) for r in part]
    df = pd.DataFrame(rows)
    df.to_csv(path, mode="a", header=not path.exists(), index=False)
    print(f"{label}: {len(tasks)} runs in {time.time() - t0:.0f} s", flush=True)


def _done(path: Path, column: str) -> set:
    return set(pd.read_csv(path)[column].unique()) if path.exists() else set()


def fig1(cms, epsilons, repeats, workers, emd_all):
    path = OUT / "heatmaps_paper_fig1.csv"
    done = _done(path, "epsilon")
    side = 256
    gen = np.random.default_rng(2023)
    sums = [(cm["name"], t, sample_users(cm, N_USERS, side, gen)) for cm in cms for t in range(2)]
    sig = _sigmas(side)
    for eps in epsilons:
        if eps in done:
            continue
        tasks = [
            ("fig1", dict(cell_month=name, trial=t, repeat=r), s, eps, N_USERS,
             zlib.crc32(f"{name}/{t}/{r}/{eps}".encode()), sig if emd_all else sig[:1], sig)
            for name, t, s in sums
            for r in range(repeats)
        ]
        _run(tasks, path, workers, f"figure 1, epsilon = {eps:g}")


def fig2(cms, workers, epsilons=(10.0, 1.0)):
    """Figures 2 and 4-7: on the largest cell-month, n in {50, ..., 500} (Delta = 256) and Delta in {64, ...,
    512} (n = 200), 10 trials, at epsilon 10 (figures 2, 4, 5) and 1 (figures 6, 7); every metric per run."""
    path = OUT / "heatmaps_paper_fig2.csv"
    cm = cms[0]  # the largest cell-month
    done = set()
    if path.exists():
        old = pd.read_csv(path)
        done = {(float(e), "n", int(v)) for e, v in old[old.sweep == "n"][["epsilon", "n"]].itertuples(index=False)}
        done |= {(float(e), "side", int(v))
                 for e, v in old[old.sweep == "side"][["epsilon", "side"]].itertuples(index=False)}  # fmt: skip
    for eps in epsilons:
        gen = np.random.default_rng(2024)  # the same users at every epsilon (the figures' x-axes match)
        for n in (50, 100, 200, 300, 400, 500):
            sums = [sample_users(cm, n, 256, gen) for _ in range(10)]
            if (eps, "n", n) in done:
                continue
            seed = 1000 * n if eps == 10.0 else 1000 * n + 500_000 + int(100 * eps)
            tasks = [("fig2", dict(cell_month=cm["name"], sweep="n", trial=t), sums[t], eps, n, seed + t, (2.0,),
                      (2.0,)) for t in range(10)]  # fmt: skip
            _run(tasks, path, workers, f"figure 2, epsilon = {eps:g}, n = {n}")
        for side in (64, 128, 256, 512):
            sums = [sample_users(cm, N_USERS, side, gen) for _ in range(10)]
            if (eps, "side", side) in done:
                continue
            seed = 7 * side if eps == 10.0 else 7 * side + 500_000 + int(100 * eps)
            tasks = [("fig2", dict(cell_month=cm["name"], sweep="side", trial=t), sums[t], eps,
                      N_USERS, seed + t, (side / 128,), (side / 128,)) for t in range(10)]  # fmt: skip
            _run(tasks, path, workers, f"figure 2, epsilon = {eps:g}, Delta = {side}")


def synthetic_sum(n_users: int, points: int, clusters: int, side: int, gen: np.random.Generator) -> np.ndarray:
    """Appendix E.3: ``n_users`` users, each with ``points`` points from one mixture of ``clusters`` random 2-D
    Gaussians on [0, 1)^2 (random means, random covariances), snapped to the grid."""
    means = gen.random((clusters, 2))
    covs = []
    for _ in range(clusters):
        a = gen.normal(size=(2, 2)) * gen.uniform(0.005, 0.05)
        covs.append(a @ a.T + 1e-6 * np.eye(2))
    s = np.zeros((side, side))
    for _ in range(n_users):
        k = gen.integers(0, clusters, points)
        x = np.array([gen.multivariate_normal(means[j], covs[j]) for j in k]).reshape(-1, 2)
        x = np.clip(x, 0, 1 - 1e-12)
        ij = (x * side).astype(np.int64)
        np.add.at(s, (ij[:, 0], ij[:, 1]), 1.0 / points)
    return s


def e3(workers, clusters=(20, 5, 10, 80)):
    """Appendix E.3 (figure 10) and figure 11: the share of non-empty cells set by the points per user, with
    mixtures of 5, 10, 20 and 80 random Gaussians, epsilon = 1, 10 data sets per level."""
    path = OUT / "heatmaps_paper_e3.csv"
    if path.exists():
        old = pd.read_csv(path)
        if "clusters" not in old.columns:  # rows written before figure 11: all of 20 Gaussians
            old.insert(1, "clusters", 20)
            old.to_csv(path, index=False)
        done = {(int(c), int(p)) for c, p in old[["clusters", "points"]].itertuples(index=False)}
    else:
        done = set()
    side = 256
    for k in clusters:
        for points in (1, 4, 16, 64):
            if (k, points) in done:
                continue
            tasks = []
            for t in range(10):
                gen = np.random.default_rng(100 * points + t + (0 if k == 20 else 1_000_000 * k))
                s = synthetic_sum(N_USERS, points, k, side, gen)
                key = dict(clusters=k, points=points, trial=t, sparsity=float((s > 0).mean()))
                tasks.append(("e3", key, s, 1.0, N_USERS, 31 * points + t + (0 if k == 20 else 7_000 * k), (2.0,),
                              (2.0,)))  # fmt: skip
            _run(tasks, path, workers, f"appendix E.3, {k} Gaussians, {points} points per user")


def fig3(cms):
    from userdp.report.maps import MapPanel, render_maps

    cm = cms[0]
    gen = np.random.default_rng(3)
    s = sample_users(cm, N_USERS, 256, gen)
    for eps in (1.0, 5.0):
        panels = [MapPanel(gaussian_heatmap(s / s.sum(), 2.0), "true (non-private)", left_out=None)]
        for name in ("Laplace", "Laplace top 0.01%", "sparse EMD (paper)", "dense EMD (app. D)", OURS):
            est = ALGOS[name](s, eps, RandomSource(int(eps)), N_USERS)  # the same seed for each (as in fig1)
            panels.append(MapPanel(gaussian_heatmap(est, 2.0), name, left_out=None))
        render_maps(panels, OUT / f"heatmaps_paper_fig3_eps{eps:g}.png", None,
                    title=f"{cm['name']}, 200 users, ε = {eps:g}, Δ = 256, σ = 2 cells", ncols=3)
        print(f"figure 3, epsilon = {eps:g}: written", flush=True)


def ci95(x: np.ndarray) -> tuple[float, float]:
    """Mean and the half-width of its 95% t-interval."""
    from scipy.stats import t as student

    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if x.size < 2:
        return (float(x.mean()) if x.size else math.nan), math.nan
    return float(x.mean()), float(student.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))


def paired(df: pd.DataFrame, metric: str, sigma: float, unit: str = "cell_month") -> pd.DataFrame:
    """Per epsilon and algorithm: the mean paired difference (other - ours, signed so that positive means
    ours is better), its 95% t-interval over the runs and over the means per ``unit`` (the cell-month; the
    image on SALICON), and ours' win and tie rates over the same runs (a tie: the same output, e.g. the auto
    release and the branch it ran)."""
    d = df[df.sigma == sigma]
    keys = ["epsilon", unit, "trial", "repeat"]
    wide = d.pivot_table(index=keys, columns="algorithm", values=metric)
    rows = []
    sign = -1.0 if HIGHER_IS_BETTER[metric] else 1.0
    for eps, g in wide.groupby(level="epsilon"):
        for other in [a for a in ALGOS if a != OURS and a in g]:
            diff = sign * (g[other] - g[OURS])
            m, h = ci95(diff.to_numpy())
            # the runs of one cell-month share its users (and the repeats share a sum): a t-interval over the
            # cell-month means is the conservative one
            _, h_cells = ci95(diff.groupby(level=unit).mean().to_numpy())
            rows.append(dict(epsilon=eps, metric=metric, versus=other, runs=int(diff.notna().sum()),
                             advantage=m, ci95=h, ci95_cell_months=h_cells, win_rate=float((diff > 0).mean()),
                             tie_rate=float((diff == 0).mean())))
    return pd.DataFrame(rows)


def curves(ax, g: pd.DataFrame, x: str, metric: str) -> None:
    """One panel: every algorithm's mean ``metric`` against ``x`` with its 95% t-interval (userdp's default
    drawn thicker)."""
    for algo in ALGOS:
        pts = [(v, *ci95(gg[metric])) for v, gg in g[g.algorithm == algo].groupby(x)]
        if pts:
            xs, m, h = (np.array(a) for a in zip(*pts, strict=True))
            ax.errorbar(xs, m, yerr=h, marker="o", capsize=2, label=algo, lw=2.5 if algo == OURS else 1)
    ax.set_xlabel({"side": "Δ", "n": "n (users)", "points": "points per user", "epsilon": "ε"}[x])
    if x in ("side", "points"):
        ax.set_xscale("log", base=2)
    elif x == "epsilon":
        ax.set_xscale("log")


def summarize() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = OUT / "heatmaps_paper_fig1.csv"
    if path.exists():
        df = pd.read_csv(path)
        for sg, g in df.groupby("sigma"):
            cols = ["SIM", "CC", "KL", "EMD"]
            stats = g.groupby(["epsilon", "algorithm"])[cols].agg(lambda x: "{:.4g} ± {:.2g}".format(*ci95(x)))
            stats.to_csv(OUT / f"heatmaps_paper_fig1_sigma{sg:g}.csv")
        sg0 = df.sigma.min()
        tab = pd.concat([paired(df, m, sg0) for m in ("KL", "EMD", "SIM", "CC")])
        tab.to_csv(OUT / "heatmaps_paper_fig1_paired.csv", index=False)
        print(tab[tab.versus.isin(["sparse EMD (paper)", "dense EMD (app. D)"])].round(4).to_string(index=False))
        fig, axes = plt.subplots(1, 4, figsize=(18, 4))
        d0 = df[df.sigma == sg0]
        for ax, metric in zip(axes, ["SIM", "CC", "KL", "EMD"], strict=True):
            for algo in ALGOS:
                pts = [(e, *ci95(v)) for e, v in d0[d0.algorithm == algo].groupby("epsilon")[metric]]
                if not pts:
                    continue
                e, m, h = (np.array(x) for x in zip(*pts, strict=True))
                ax.errorbar(e, m, yerr=h, marker="o", capsize=2, label=algo, lw=2.5 if algo == OURS else 1)
            ax.set_xscale("log")
            ax.set_xlabel("ε")
            ax.set_title(f"{metric} ({'higher' if HIGHER_IS_BETTER[metric] else 'lower'} is better), σ = {sg0:g}")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(OUT / "heatmaps_paper_fig1.png", dpi=100)
        plt.close(fig)
    path = OUT / "heatmaps_paper_fig2.csv"
    if path.exists():
        df = pd.read_csv(path)
        sweeps = [("n", df[df.sweep == "n"]), ("side", df[df.sweep == "side"])]
        fig, axes = plt.subplots(1, 2, figsize=(12, 4), squeeze=False)  # figure 2: EMD at epsilon 10
        for ax, (x, g) in zip(axes[0], sweeps, strict=True):
            curves(ax, g[g.epsilon == 10.0], x, "EMD")
            ax.set_ylabel("EMD")
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(OUT / "heatmaps_paper_fig2.png", dpi=100)
        plt.close(fig)
        epsilons = sorted(df.epsilon.unique(), reverse=True)  # figures 4-7: every metric, epsilon 10 and 1
        fig, axes = plt.subplots(4, 2 * len(epsilons), figsize=(5 * 2 * len(epsilons), 14), squeeze=False)
        for i, metric in enumerate(("SIM", "CC", "KL", "EMD")):
            for j, (eps, (x, g)) in enumerate((e, sw) for e in epsilons for sw in sweeps):
                ax = axes[i][j]
                curves(ax, g[g.epsilon == eps], x, metric)
                ax.set_title(f"{metric} ({'higher' if HIGHER_IS_BETTER[metric] else 'lower'} is better), ε = {eps:g}",
                             fontsize=9)  # fmt: skip
        axes[0][0].legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(OUT / "heatmaps_paper_fig4_7.png", dpi=90)
        plt.close(fig)
        summary = df.groupby(["epsilon", "sweep", "n", "side", "algorithm"])[["SIM", "CC", "KL", "EMD"]].mean()
        summary.round(4).to_csv(OUT / "heatmaps_paper_fig4_7_means.csv")
        for eps in epsilons:
            print(f"epsilon {eps:g}, EMD by Delta:", flush=True)
            d = df[(df.epsilon == eps) & (df.sweep == "side")]
            print(d.groupby(["side", "algorithm"]).EMD.mean().unstack().round(4).to_string(), flush=True)
    path = OUT / "heatmaps_paper_e3.csv"
    if path.exists():
        df = pd.read_csv(path)
        if "clusters" not in df.columns:
            df.insert(1, "clusters", 20)
        fig, axes = plt.subplots(1, 1, figsize=(6, 4), squeeze=False)  # figure 10: 20 Gaussians
        curves(axes[0][0], df[df.clusters == 20], "points", "EMD")
        axes[0][0].set_ylabel("EMD")
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(OUT / "heatmaps_paper_e3.png", dpi=100)
        plt.close(fig)
        ks = sorted(df.clusters.unique())  # figure 11: 5, 10, 20 and 80 Gaussians
        fig, axes = plt.subplots(1, len(ks), figsize=(5 * len(ks), 4), squeeze=False)
        for ax, k in zip(axes[0], ks, strict=True):
            curves(ax, df[df.clusters == k], "points", "EMD")
            ax.set_title(f"{k} Gaussians, ε = 1")
            ax.set_ylabel("EMD")
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(OUT / "heatmaps_paper_fig11.png", dpi=90)
        plt.close(fig)
        print(df.groupby(["clusters", "points", "algorithm"]).EMD.mean().unstack().round(4).to_string(), flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--figures", default="fig1,fig2,fig3,e3")
    ap.add_argument("--epsilons", default="0.1,0.5,1,2,5,10")
    ap.add_argument("--repeats", type=int, default=2, help="noise draws per trial (runs = 28 x 2 x repeats)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--emd-all-sigmas", action="store_true")
    ap.add_argument("--summary-only", action="store_true")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    figures = args.figures.split(",")
    if not args.summary_only:
        cms = cell_months()
        print(f"{len(cms)} cell-months with at least {N_USERS} users", flush=True)
        if "fig3" in figures:
            fig3(cms)
        if "fig1" in figures:
            fig1(cms, [float(e) for e in args.epsilons.split(",")], args.repeats, args.workers, args.emd_all_sigmas)
        if "fig2" in figures:
            fig2(cms, args.workers)
        if "e3" in figures:
            e3(args.workers)
    summarize()


if __name__ == "__main__":
    main()

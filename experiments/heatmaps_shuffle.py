"""Ghazi et al. (AAAI 2023), appendix F: the sparse EMD aggregation in the shuffle model, Figures 12 and 13.

Setup (appendix F, "Empirical Results"): n = 50 users, epsilon = 5, delta = 1e-5, a 320 x 240 grid, the
scaling factor B from 1 to 1024, and B = infinity for the central algorithm (:func:`dp_sparse_emd_agg`, no
rounding). The paper ran on SALICON (appendix E.2): ``fig13`` runs on the 10-image SALICON sample (read from
``../shared/datasets``, non-commercial, experiments only; run ``r`` samples 50 workers of image ``r mod 10``),
or with ``--data foursquare`` on a stand-in, the paper's own section 4 construction on Foursquare NYC
(:mod:`heatmaps_paper`): each run samples 50 users of one of the four largest cell-months and snaps their
check-ins to a 240-row x 320-column sub-grid of the cell (``results/heatmaps_shuffle_fig13_foursquare.*``).

* ``fig12``: communication per user against B (independent of the data: only the grid size enters ``m``):
  messages ``r m`` and bits ``r m ceil(log2(m q))``, with userdp's modulus ``q = B n + 2h + 1`` (room for the
  noise) and with the appendix's ``q = B n``. Writes ``results/heatmaps_shuffle_fig12.csv`` and ``.png``.
* ``fig13``: SIM, CC, KL and EMD against B over 20 runs (the four largest cell-months, five samples of 50
  users each; every B and the central algorithm run on the same users and the same seed), mean and 95%
  interval. The heatmaps are Gaussian-filtered with sigma = 2.5 cells (320 / 128, the paper's first sigma);
  EMD is computed exactly on the maps pooled 2 x 2 (160 x 120 cells; the full-resolution transport problem
  takes seconds per map). The protocol's analyzer output is drawn with ``simulate="aggregate"`` (the same
  law as the message-level protocol; see :mod:`userdp.heatmaps.shuffle`). Writes
  ``results/heatmaps_shuffle_fig13.csv`` and ``.png``.
* ``crosscheck``: the message-level protocol end to end (every randomizer's Polya shares and ``r m``
  messages, the shuffler, the analyzer) against the aggregate simulation on the same users at 80 x 60 cells,
  B in {4, 32}, 15 runs each (``results/heatmaps_shuffle_crosscheck.csv``; the paired difference of the two
  paths' SIM and CC with its 95% interval is printed).

Run: python experiments/heatmaps_shuffle.py [--figures fig12,fig13,crosscheck] [--runs 20]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from heatmaps_paper import cell_months, ci95  # noqa: E402

from userdp.heatmaps import (  # noqa: E402
    dp_sparse_emd_agg,
    gaussian_heatmap,
    heatmap_emd,
    kl_divergence,
    pearson_cc,
    shuffle_plan,
    shuffle_sparse_emd_agg,
    similarity,
)
from userdp.noise import RandomSource  # noqa: E402

OUT = Path(__file__).resolve().parent / "results"
N, EPS, DELTA = 50, 5.0, 1e-5
ROWS, COLS = 240, 320
B_VALUES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
SIGMA = COLS / 128
METRICS = ("SIM", "CC", "KL", "EMD")


def fig12() -> pd.DataFrame:
    rows = []
    for B in B_VALUES:
        p = shuffle_plan((ROWS, COLS), N, EPS, DELTA, B)
        paper = p.paper_communication()
        rows.append(
            dict(B=B, m=p.coordinates, r=p.shares, q=p.modulus, headroom=p.headroom,
                 bits_per_message=p.bits_per_message, messages_per_user=p.messages_per_user,
                 bits_per_user=p.bits_per_user, MB_per_user=p.bits_per_user / 8e6,
                 paper_q=paper["modulus"], paper_r=paper["shares"], paper_bits_per_message=paper["bits_per_message"],
                 paper_messages_per_user=paper["messages_per_user"], paper_bits_per_user=paper["bits_per_user"],
                 paper_MB_per_user=paper["bits_per_user"] / 8e6)
        )
    df = pd.DataFrame(rows)
    df.to_csv(OUT / "heatmaps_shuffle_fig12.csv", index=False)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    axes[0].plot(df.B, df.MB_per_user, "o-", label="userdp (q = Bn + 2h + 1)")
    axes[0].plot(df.B, df.paper_MB_per_user, "s--", label="appendix F (q = Bn)")
    axes[0].set(xscale="log", xlabel="B", ylabel="MB per user (10^6 bytes)",
                title="communication per user")
    axes[1].plot(df.B, df.messages_per_user / 1e6, "o-", label="userdp")
    axes[1].plot(df.B, df.paper_messages_per_user / 1e6, "s--", label="appendix F")
    axes[1].set(xscale="log", xlabel="B", ylabel="million messages per user", title="messages per user (r m)")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"Shuffle-model DP heatmaps: {COLS} x {ROWS} grid, n = {N}, ε = {EPS:g}, δ = {DELTA:g}")
    fig.tight_layout()
    fig.savefig(OUT / "heatmaps_shuffle_fig12.png", dpi=120)
    plt.close(fig)
    return df


def user_grids(cm: dict, n: int, rows: int, cols: int, gen: np.random.Generator) -> np.ndarray:
    """``(n, rows, cols)``: the check-ins of ``n`` sampled users of a cell-month, each user's as a distribution."""
    pick = gen.choice(np.unique(cm["users"]), size=n, replace=False)
    out = np.zeros((n, rows, cols))
    for k, u in enumerate(pick):
        m = cm["users"] == u
        r = np.minimum((cm["fy"][m] * rows).astype(np.int64), rows - 1)
        c = np.minimum((cm["fx"][m] * cols).astype(np.int64), cols - 1)
        np.add.at(out[k], (r, c), 1.0 / m.sum())
    return out


def _pool2(h: np.ndarray) -> np.ndarray:
    return h.reshape(h.shape[0] // 2, 2, h.shape[1] // 2, 2).sum(axis=(1, 3))


def metrics(truth: np.ndarray, est: np.ndarray) -> dict[str, float]:
    h = gaussian_heatmap(est, SIGMA)
    return {"SIM": similarity(truth, h), "CC": pearson_cc(truth, h), "KL": kl_divergence(truth, h),
            "EMD": heatmap_emd(_pool2(truth), _pool2(h))}


def salicon_grids(image: dict, n: int, gen: np.random.Generator) -> np.ndarray:
    """``(n, 240, 320)``: ``n`` sampled workers of a SALICON image, each worker's fixations as a distribution
    (the loading of :mod:`heatmaps_salicon`)."""
    workers = image["workers"]
    pick = gen.choice(sorted(workers), size=n, replace=False)
    out = np.zeros((n, ROWS, COLS))
    for k, w in enumerate(pick):
        c = workers[w]
        np.add.at(out[k], (c[:, 0], c[:, 1]), 1.0 / len(c))
    return out


def fig13(runs: int, data: str = "salicon") -> pd.DataFrame:
    """Figure 13 on SALICON (the paper's data; run ``r`` samples 50 workers of image ``r mod 10``) or on the
    Foursquare stand-in (``data="foursquare"``: the four largest cell-months)."""
    if data == "salicon":
        from heatmaps_salicon import load_images

        units = load_images()
    else:
        units = cell_months(N)[:4]
    rows = []
    t0 = time.time()
    for run in range(runs):
        cm = units[run % len(units)]
        gen = np.random.default_rng(1000 + run)
        U = salicon_grids(cm, N, gen) if data == "salicon" else user_grids(cm, N, ROWS, COLS, gen)
        cm = {"name": f"image {cm['image']}"} if data == "salicon" else cm
        s = U.sum(axis=0)
        truth = gaussian_heatmap(s / s.sum(), SIGMA)
        seed = 7000 + run
        for B in [*B_VALUES, math.inf]:
            src = RandomSource(seed)  # experiments: seeded, the same stream for every B
            if math.isinf(B):
                est = dp_sparse_emd_agg(s, EPS, rng=src).value
            else:
                est = shuffle_sparse_emd_agg(U, EPS, DELTA, B, simulate="aggregate", rng=src).value
            rows.append(dict(run=run, cell_month=cm["name"], B=B, **metrics(truth, est)))
        print(f"fig13 run {run + 1}/{runs} done ({time.time() - t0:.0f} s)", flush=True)
    raw = pd.DataFrame(rows)
    summary = []
    for B, g in raw.groupby("B", sort=True):
        row = {"B": B, "runs": len(g)}
        for k in METRICS:
            row[k], row[f"{k}_ci95"] = ci95(g[k].to_numpy())
        summary.append(row)
    df = pd.DataFrame(summary)
    stem = "heatmaps_shuffle_fig13" + ("" if data == "salicon" else "_foursquare")
    df.to_csv(OUT / f"{stem}.csv", index=False)
    plot13(df, stem, "SALICON (10-image sample)" if data == "salicon" else "Foursquare NYC stand-in")
    return df


def plot13(df: pd.DataFrame, stem: str, label: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fin = df[np.isfinite(df.B)]
    cen = df[~np.isfinite(df.B)].iloc[0]
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.6))
    for ax, k in zip(axes, METRICS, strict=True):
        ax.plot(fin.B, fin[k], "o-", label="shuffle protocol")
        ax.fill_between(fin.B, fin[k] - fin[f"{k}_ci95"], fin[k] + fin[f"{k}_ci95"], alpha=0.25)
        ax.axhline(cen[k], color="k", ls="--", label="B = ∞ (central)")
        ax.axhspan(cen[k] - cen[f"{k}_ci95"], cen[k] + cen[f"{k}_ci95"], color="k", alpha=0.08)
        ax.set_xscale("log", base=2)
        ax.set(xlabel="B", title=k + (" (higher is better)" if k in ("SIM", "CC") else " (lower is better)"))
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(f"Shuffle-model DP heatmaps against B: {label}, {COLS} x {ROWS}, "
                 f"n = {N}, ε = {EPS:g}, δ = {DELTA:g}, {int(df.runs.iloc[0])} runs, 95% intervals")
    fig.tight_layout()
    fig.savefig(OUT / f"{stem}.png", dpi=120)
    plt.close(fig)


def crosscheck(runs: int = 15) -> pd.DataFrame:
    """The message-level protocol against the aggregate simulation, on the same users (80 x 60 cells)."""
    cms = cell_months(N)[:1]
    rows = []
    for B in (4, 32):
        for run in range(runs):
            U = user_grids(cms[0], N, ROWS // 4, COLS // 4, np.random.default_rng(2000 + run))
            s = U.sum(axis=0)
            truth = gaussian_heatmap(s / s.sum(), SIGMA / 4)
            for mode in ("messages", "aggregate"):
                t0 = time.perf_counter()
                rel = shuffle_sparse_emd_agg(U, EPS, DELTA, B, simulate=mode, rng=RandomSource(9000 + run))
                secs = time.perf_counter() - t0
                h = gaussian_heatmap(rel.value, SIGMA / 4)
                rows.append(dict(B=B, run=run, simulate=mode, seconds=secs, SIM=similarity(truth, h),
                                 CC=pearson_cc(truth, h), messages_per_user=rel.extras["communication"][
                                     "messages_per_user"]))
        print(f"crosscheck B = {B} done", flush=True)
    df = pd.DataFrame(rows)
    df.to_csv(OUT / "heatmaps_shuffle_crosscheck.csv", index=False)
    return df


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--figures", default="fig12,fig13,crosscheck")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--data", choices=("salicon", "foursquare"), default="salicon",
                    help="fig13's data: the SALICON sample (the paper's) or the Foursquare stand-in")
    a = ap.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    figs = a.figures.split(",")
    if "fig12" in figs:
        print(fig12().to_string(index=False))
    if "fig13" in figs:
        print(fig13(a.runs, a.data).to_string(index=False))
    if "crosscheck" in figs:
        df = crosscheck()
        print(df.groupby(["B", "simulate"])[["SIM", "CC", "seconds"]].mean().to_string())
        for B, g in df.groupby("B"):
            w = g.pivot(index="run", columns="simulate")
            for k in ("SIM", "CC"):
                mean, hw = ci95((w[k]["messages"] - w[k]["aggregate"]).to_numpy())
                print(f"B = {B}: {k} messages - aggregate = {mean:+.4f} +- {hw:.4f}")


if __name__ == "__main__":
    main()

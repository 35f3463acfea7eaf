"""Per-key quantiles (issue 37, item 1): the private q-quantile of each key's values against the non-private one,
before and after the quantiles' private grid, with other candidate sets beside them, on three data sets:

* Amazon Fashion 5-core: rating (1..5) per product, reviewers as the persons, the 31 products public, range [1, 5];
* Foursquare NYC: local check-in hour (``utc_date_time + utc_offset_min``, the hour of the day 0..23) per venue
  category, users as the persons, the 251 categories public, range [0, 23];
* IMDB: review length in words per film, a review as a person, 100 films with at least 20 reviews public (the
  first 100 ids of the 706 such films; a list read off the data: the comparison is of the quantiles, not of the
  keys), range [0, 1000] (a nearly continuous column: lengths of 4 to 2,470 words, few ties).

Every release runs :func:`userdp.releases.aggregate` with ``stats=["quantile:0.1,0.5,0.9"]`` (the bounds ``(L0,
Linf)`` chosen by GEM, the range given) at epsilon 0.5 to 16. Methods, all at that release's bounds, range and
per-level share ``epsilon_quantity`` (the budget of one level, spent on its keys at ``epsilon / L0`` each):

* ``after`` (the library): the release's own quantiles: a tenth of the quantiles' budget chooses one grid for
  all levels (the persons' coarsest common resolution, :func:`~userdp.vocabulary.aggregates.choose_resolution`),
  the rest the per-key exponential mechanism over that grid's points with the tie-aware rank score;
* ``before``: the exponential mechanism over 257 lattice points spread evenly over ``[lo, hi]`` (the previous
  default), the whole share per key, the same tie-aware score;
* ``lattice``: over every lattice point (up to 4,097: Smith's interval weighting on the lattice, each candidate
  standing for one lattice step);
* ``binary search``: a noisy binary search over the lattice (12 halvings, each a Laplace-noised
  ``#{v <= c} - q n`` of sensitivity ``Linf``, the key's share split evenly over them).

The baselines draw with numpy (Gumbel-max for the exponential mechanism, float Laplace): the same laws, not the
library's exact samplers. Error: the mean absolute error over the keys (the keys holding data), averaged over the
runs; the same over the keys holding at least 100 kept values (``mae_big``: where a quantile can be found at
all); and the fraction of keys whose private quantile equals the true one. The true quantile is the lower
``q``-quantile of all of a key's values (``numpy.quantile``, method ``inverted_cdf``).

Writes experiments/results/aggregates_quantiles.csv and aggregates_quantiles.png.

Run: python experiments/aggregates_quantiles.py [--runs 10] [--data amazon foursquare imdb] [--keep]
(IMDB runs half as many times: about 25 s a release there on a loaded machine; the whole script about 20 min)
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from userdp import releases
from userdp.engines.base import KeyValues
from userdp.vocabulary import aggregates as mech

OUT = Path(__file__).resolve().parent / "results"
DATA = Path("/work/shared/datasets")
EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
LEVELS = (0.1, 0.5, 0.9)


def amazon() -> tuple[pa.Table, list, tuple]:
    rows = [json.loads(line) for line in gzip.open(DATA / "amazon_fashion_5.json.gz", "rt")]
    t = pa.table({"user": [r["reviewerID"] for r in rows], "key": [r["asin"] for r in rows],
                  "value": [float(r["overall"]) for r in rows]})  # fmt: skip
    return t, sorted(set(t.column("key").to_pylist())), (1.0, 5.0)


def foursquare() -> tuple[pa.Table, list, tuple]:
    c = pd.read_csv(DATA / "foursquare_nyc_checkins.csv.xz")
    local = pd.to_datetime(c["utc_date_time"]) + pd.to_timedelta(c["utc_offset_min"], unit="min")
    t = pa.table({"user": c["user"].astype(str), "key": c["category_name"].astype(str),
                  "value": local.dt.hour.astype(float)})  # fmt: skip
    return t, sorted(c["category_name"].astype(str).unique()), (0.0, 23.0)


def imdb() -> tuple[pa.Table, list, tuple]:
    f = pd.read_json(DATA / "imdb_reviews.jsonl.xz", lines=True)
    f = f[f["movie"].notna()]
    n = f.groupby("movie").size()
    f = f[f["movie"].isin(sorted(n[n >= 20].index)[:100])]  # 100 films: the exact sampler runs per key and level
    t = pa.table({"user": [f"r{i}" for i in range(len(f))], "key": f["movie"].astype(str).to_numpy(),
                  "value": f["text"].str.split().str.len().astype(float).to_numpy()})  # fmt: skip
    return t, sorted(f["movie"].astype(str).unique()), (0.0, 1000.0)


def truths(t: pa.Table) -> dict:
    df = t.to_pandas()
    return {q: df.groupby("key")["value"].quantile(q, interpolation="lower") for q in LEVELS}


def _gumbel_pick(scores: np.ndarray, eps: float, sens: float, rng) -> int:
    return int(np.argmax(eps * scores / (2 * sens) + rng.gumbel(size=scores.size)))


def baselines(kept, keys, lo, hi, l0, linf, eps_level, rng) -> dict:
    """The other methods' per-key quantiles (values) from the kept records ``(code, values)``."""
    code, values = kept
    r, klo, khi = mech.lattice_of(lo, hi)
    k = mech._on_lattice(values, lo, hi)
    grids = {
        "before": np.unique(np.round(np.linspace(klo, khi, min(257, khi - klo + 1))).astype(np.int64)),
        "lattice": np.arange(klo, khi + 1, dtype=np.int64),
    }
    e = eps_level / l0
    out = {m: {q: np.full(len(keys), np.nan) for q in LEVELS} for m in (*grids, "binary search")}
    for i in range(len(keys)):
        ks = np.sort(k[code == i])
        n = ks.size
        for m, grid in grids.items():
            le = np.searchsorted(ks, grid, side="right")
            lt = np.searchsorted(ks, grid, side="left")
            for q in LEVELS:
                out[m][q][i] = grid[_gumbel_pick(mech.quantile_scores(le, lt, n, q), e, linf, rng)] * r
        steps = max(1, int(np.ceil(np.log2(khi - klo + 1))))
        for q in LEVELS:
            a, b = klo, khi  # the answer in [a, b]: the least c with #{v <= c} >= q n
            for _ in range(steps):
                if a >= b:
                    break
                c = (a + b) // 2
                d = np.searchsorted(ks, c, side="right") - q * n + rng.laplace(scale=linf * steps / e)
                a, b = (a, c) if d >= 0 else (c + 1, b)
            out["binary search"][q][i] = a * r
    return out


def run(name: str, loader, runs: int) -> list[dict]:
    t, keys, rng_pair = loader()
    true = truths(t)
    counted = np.asarray(keys, dtype=object)
    batch = KeyValues(np.asarray(t.column("user").to_pylist(), dtype=object),
                      np.asarray(t.column("key").to_pylist(), dtype=object),
                      t.column("value").to_numpy())  # fmt: skip
    rows = []
    for eps in EPSILONS:
        t0 = time.time()
        for run_i in range(runs):
            rel = releases.aggregate(t, eps, stats=["quantile:" + ",".join(map(str, LEVELS))], keys=keys,
                                     value_range=rng_pair, engine="memory", rng=1000 * run_i + 11)  # fmt: skip
            v = rel.value
            l0, linf, lo, hi = v["l0"], v["linf"], v["lo"], v["hi"]
            person, code, values = mech._kept(batch, counted, l0, linf)
            size = np.bincount(code, minlength=len(keys))
            held, big = size > 0, size >= 100
            est = {"after": v["quantiles"]}
            est |= baselines((code, values), keys, lo, hi, l0, linf, rel.params["epsilon_quantity"],
                             np.random.default_rng(run_i + int(100 * eps)))  # fmt: skip
            for m, by_q in est.items():
                for q in LEVELS:
                    tr = true[q].reindex(keys).to_numpy()
                    ok = held & np.isfinite(tr)
                    err = np.abs(np.asarray(by_q[q]) - tr)
                    rows.append({"data": name, "epsilon": eps, "run": run_i, "method": m, "q": q,
                                 "mae": float(err[ok].mean()), "exact": float(np.mean(err[ok] == 0)),
                                 "mae_big": float(err[ok & big].mean()) if np.any(ok & big) else np.nan,
                                 "keys": int(ok.sum()), "big_keys": int((ok & big).sum()), "l0": l0, "linf": linf,
                                 "step": rel.params.get("quantile_step")})  # fmt: skip
        print(f"{name} eps {eps}: {time.time() - t0:.0f} s", flush=True)
    return rows


def plot(res: pd.DataFrame) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = list(dict.fromkeys(res["data"]))
    fig, axes = plt.subplots(len(data), len(LEVELS), figsize=(12, 3.2 * len(data)), squeeze=False)
    for i, d in enumerate(data):
        big = bool(res.loc[res["data"] == d, "mae_big"].notna().any())  # keys of 100+ kept values, where there are
        mean = res[res["data"] == d].groupby(["q", "method", "epsilon"])["mae_big" if big else "mae"].mean()
        for j, q in enumerate(LEVELS):
            ax = axes[i][j]
            for m in ("before", "lattice", "binary search", "after"):
                s = mean[q, m]
                ax.plot(s.index, s.values, marker="o", label=m, lw=2.5 if m == "after" else 1.2)
            ax.set_xscale("log", base=2)
            lo_hi = mean[q].min(), mean[q].max()
            if lo_hi[0] <= 0 or lo_hi[1] / lo_hi[0] > 5:  # a narrow spread stays linear (readable ticks)
                ax.set_yscale("symlog", linthresh=0.05 if big else 1.0)
            ax.set_title(f"{d}, q = {q:g}" + (" (keys of 100+ kept values)" if big else " (every key)"), fontsize=9)
            ax.set_xlabel("epsilon")
            ax.set_ylabel("MAE per key")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "aggregates_quantiles.png", dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--data", nargs="*", default=["amazon", "foursquare", "imdb"])
    ap.add_argument("--keep", action="store_true", help="keep the other data sets' rows already in the CSV")
    ap.add_argument("--plot-only", action="store_true", help="redraw the PNG from the CSV")
    args = ap.parse_args()
    if args.plot_only:
        plot(pd.read_csv(OUT / "aggregates_quantiles.csv"))
        return
    loaders = {"amazon": amazon, "foursquare": foursquare, "imdb": imdb}
    OUT.mkdir(exist_ok=True)
    path = OUT / "aggregates_quantiles.csv"
    done = pd.read_csv(path) if path.exists() and args.keep else pd.DataFrame()
    for d in args.data:  # each data set written as soon as it is measured
        rows = pd.DataFrame(run(d, loaders[d], args.runs if d != "imdb" else max(1, args.runs // 2)))
        done = pd.concat([done[done["data"] != d] if len(done) else done, rows], ignore_index=True)
        done.to_csv(path, index=False)
    res = done
    plot(res)
    table = res.groupby(["data", "q", "epsilon", "method"]).agg(mae=("mae", "mean"), big=("mae_big", "mean"),
                                                                exact=("exact", "mean"))  # fmt: skip
    print(table.unstack("method").round(3).to_string())


if __name__ == "__main__":
    main()

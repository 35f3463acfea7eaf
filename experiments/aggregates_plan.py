"""The aggregates' plan against measured error (issue 37, item 2): ``plan.aggregate``'s predicted noise per key
against the error of ``releases.aggregate`` on real data, at epsilon 0.5, 1, 2 and 4.

* **Amazon Fashion** (bundled): the mean rating per product, reviewers as the persons, the 31 products as public
  keys, bounds (8, 1) and the range [1, 5] given (so the comparison is about noise); stats ``count`` and ``mean``.
* **Foursquare NYC** (bundled): the check-ins per venue category (``count``) and their mean local hour
  (``mean``, the day from 4 am to 4 am: range [4, 28] given), users as the persons, the 251 categories as
  public keys, bounds (4, 4) given.

Per key, the plan is made at the key's own size (the records the bounds keep, ``persons = N``,
``records_per_person = 1``: the same ``N``) and, for the mean, at the key's own mean and spread of the kept
values (in the experiment these are read from the data, as stand-ins for a user's public guess; a plan at the
range's midpoint instead is reported too). Measured: the RMSE over the runs of the released value against the
exact statistic of the *kept* records (the library's own bounding, ``bounded_rows``: the noise alone), and
against the statistic of all records (noise plus the bounds' bias, which the plan does not predict).

Writes ``results/aggregates_plan.csv`` (one row per data set, statistic, epsilon and key),
``results/aggregates_plan_summary.md`` and ``results/aggregates_plan.png``.

Run: ``python experiments/aggregates_plan.py [--runs 30]`` (about 4 minutes on the loaded 2-core machine).
"""

from __future__ import annotations

import argparse
import gzip
import json
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from userdp import plan, releases
from userdp.datasets import foursquare_nyc_table
from userdp.vocabulary.aggregates import bounded_rows

OUT = Path(__file__).resolve().parent / "results"
EPSILONS = (0.5, 1.0, 2.0, 4.0)


def amazon() -> pd.DataFrame:
    path = resources.files("userdp.datasets") / "data" / "amazon_fashion_5.json.gz"
    with gzip.open(path, "rt") as fh:
        rows = [json.loads(line) for line in fh]
    return pd.DataFrame({"user": [r["reviewerID"] for r in rows], "key": [r["asin"] for r in rows],
                         "value": [float(r["overall"]) for r in rows]})  # fmt: skip


def foursquare() -> pd.DataFrame:
    raw = foursquare_nyc_table()
    local = pc.add(raw["utc_date_time"], pc.multiply(raw["utc_offset_min"], 60).cast(pa.duration("s")))
    hour = pc.hour(local).to_numpy() + pc.minute(local).to_numpy() / 60
    hour = np.where(hour < 4, hour + 24, hour)
    return pd.DataFrame({"user": raw["user"].to_numpy().astype(str), "key": raw["category_name"].to_pylist(),
                         "value": hour})  # fmt: skip


def kept(df: pd.DataFrame, keys: list[str], l0: int, linf: int) -> pd.DataFrame:
    """The records the release keeps under the bounds (the library's own ``bounded_rows``)."""
    d = df[df["key"].isin(keys)].copy()
    d["person"] = pd.factorize(d["user"], sort=True)[0]
    d["code"] = d["key"].map({k: i for i, k in enumerate(sorted(keys))})
    d = d.sort_values(["person", "code", "value"], kind="stable")
    keep = bounded_rows(d["person"].to_numpy(), d["code"].to_numpy(), d["value"].to_numpy(), l0, linf)
    return d[keep]


def run(name: str, df: pd.DataFrame, bounds: tuple[int, int], rng_range: tuple[float, float], runs: int) -> list:
    keys = sorted(df["key"].unique())
    k = kept(df, keys, *bounds)
    g, full = k.groupby("key")["value"], df.groupby("key")["value"]
    n = g.size().reindex(keys).fillna(0).to_numpy()
    exact = {"count": n, "mean": g.mean().reindex(keys).to_numpy()}
    total = {"count": full.size().reindex(keys).to_numpy(), "mean": full.mean().reindex(keys).to_numpy()}
    sd_v = g.std(ddof=0).reindex(keys).fillna(0).to_numpy()
    table = pa.table({"user": df["user"].to_numpy(), "key": df["key"].to_numpy(), "value": df["value"].to_numpy()})
    rows = []
    for eps in EPSILONS:
        got = {"count": [], "mean": []}
        for r in range(runs):
            rel = releases.aggregate(table, eps, stats=["count", "mean"], keys=keys, value_range=rng_range,
                                     bounds=bounds, engine="memory", rng=1000 * r + round(100 * eps))  # fmt: skip
            for s in got:
                got[s].append(rel.value[s])
        preds = []
        for i in range(len(keys)):
            pk = {"persons": float(max(n[i], 1)), "stats": ["count", "mean"], "n_keys": len(keys),
                  "value_range": rng_range, "bounds": bounds}  # fmt: skip
            mu = float(exact["mean"][i]) if n[i] else None
            preds.append((plan.aggregate(eps, value_mean=mu, value_sd=float(sd_v[i]), **pk), plan.aggregate(eps, **pk)))
        for s in got:
            x = np.array(got[s])
            for i, key in enumerate(keys):
                if n[i] < 1:
                    continue
                p, p_mid = preds[i]
                rows.append({
                    "data": name, "stat": s, "epsilon": eps, "key": key, "records": int(n[i]),
                    "predicted_sd": p.sd(s), "predicted_sd_at_midpoint": p_mid.sd(s), "valid": p.valid,
                    "rmse_noise": float(np.sqrt(np.mean((x[:, i] - exact[s][i]) ** 2))),
                    "rmse_total": float(np.sqrt(np.mean((x[:, i] - total[s][i]) ** 2))),
                })  # fmt: skip
        print(name, eps, flush=True)
    return rows


def summary(res: pd.DataFrame) -> str:
    lines = ["| data | statistic | ε | keys (delta method valid) | measured / predicted RMSE, median over keys "
             "[10th, 90th pct] | pooled | noise + bounds' bias / predicted, median |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for (data, stat, eps), d in res.groupby(["data", "stat", "epsilon"], sort=False):
        v = d[d["valid"]]
        ratio = v["rmse_noise"] / v["predicted_sd"]
        pooled = np.sqrt(np.mean(v["rmse_noise"] ** 2)) / np.sqrt(np.mean(v["predicted_sd"] ** 2))
        lines.append(f"| {data} | {stat} | {eps:g} | {len(v)} of {len(d)} | {ratio.median():.2f} "
                     f"[{ratio.quantile(0.1):.2f}, {ratio.quantile(0.9):.2f}] | {pooled:.2f} | "
                     f"{(v['rmse_total'] / v['predicted_sd']).median():.2f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def figure(res: pd.DataFrame) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), constrained_layout=True)
    panels = [("Amazon Fashion", "mean", "mean rating per product (stars)"),
              ("Foursquare", "count", "check-ins per category"),
              ("Foursquare", "mean", "mean hour per category (h)")]  # fmt: skip
    for ax, (data, stat, title) in zip(axes, panels, strict=True):
        d = res[(res["data"] == data) & (res["stat"] == stat) & res["valid"]]
        for eps, de in d.groupby("epsilon"):
            ax.scatter(de["predicted_sd"], de["rmse_noise"], s=10, alpha=0.7, label=f"ε = {eps:g}")
        lo, hi = d[["predicted_sd", "rmse_noise"]].min().min(), d[["predicted_sd", "rmse_noise"]].max().max()
        ax.plot([lo, hi], [lo, hi], "k:", lw=1)
        ax.set(xscale="log", yscale="log", xlabel="predicted noise sd (plan.aggregate)", ylabel="measured RMSE",
               title=title)  # fmt: skip
        ax.legend(fontsize=8)
    fig.savefig(OUT / "aggregates_plan.png", dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    rows = run("Amazon Fashion", amazon(), (8, 1), (1.0, 5.0), args.runs)
    rows += run("Foursquare", foursquare(), (4, 4), (4.0, 28.0), args.runs)
    res = pd.DataFrame(rows)
    OUT.mkdir(exist_ok=True)
    res.to_csv(OUT / "aggregates_plan.csv", index=False, float_format="%.6g")
    text = summary(res)
    (OUT / "aggregates_plan_summary.md").write_text(text)
    figure(res)
    print(text)


if __name__ == "__main__":
    main()

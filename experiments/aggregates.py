"""Per-key aggregates (issue 37, item 1): the error of the private mean rating per product against the
non-private means, on Amazon Fashion (5-core: 406 reviewers, 3,176 reviews, 31 products), reviewers as the
persons, at epsilon 0.5, 1, 2 and 4.

Settings, all through :func:`userdp.releases.aggregate` (Laplace on the integer lattice):

* ``public keys, range 1..5``: the 31 products as public keys (a catalogue), the rating scale [1, 5] given
  (public: nothing spent on the range), the bounds ``(L0, Linf)`` chosen by GEM;
* ``public keys, domain 0..10``: the range chosen privately over 65 points of the public domain [0, 10];
* ``public keys, geometric grid``: the range chosen privately over the geometric grid (``value_domain='geometric'``);
* ``selected keys, range 1..5`` (delta 1e-6): the products selected privately as the counts select them.

And the two sum estimators at the same bounds and budget, on the ratings (range [1, 5]) and on the ratings
shifted to [0, 4] (so a one-sided range): the normalized sum ``mid N~ + S~_centred`` (the release's) against
the direct sum ``S~`` with sensitivity ``L0 Linf max(|lo|, |hi|)`` and the whole share, as the root mean
squared error per key (analytic: both are Laplace).

Error: the mean absolute error over the released products, and the median over products, averaged over 20
runs. Then mean, variance and median together (one release, range [1, 5]) against the non-private
statistics. Writes experiments/results/aggregates.csv, aggregates_stats.csv and aggregates_table.md.

Run: python experiments/aggregates.py
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from userdp import releases
from userdp.noise import calibrate_laplace

OUT = Path(__file__).resolve().parent / "results"
DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "amazon_fashion_5.json.gz"
EPSILONS = (0.5, 1.0, 2.0, 4.0)
RUNS = 20


def load() -> pa.Table:
    rows = [json.loads(line) for line in gzip.open(DATA if DATA.exists() else "/work/shared/datasets/"
                                                        "amazon_fashion_5.json.gz", "rt")]  # fmt: skip
    return pa.table({"user": [r["reviewerID"] for r in rows], "key": [r["asin"] for r in rows],
                     "value": [float(r["overall"]) for r in rows]})  # fmt: skip


def main() -> None:
    t = load()
    df = t.to_pandas()
    truth = df.groupby("key")["value"].mean()
    products = sorted(truth.index)
    settings = {
        "public keys, range 1..5": {"keys": products, "value_range": (1.0, 5.0)},
        "public keys, domain 0..10": {"keys": products, "value_domain": (0.0, 10.0)},
        "public keys, geometric grid": {"keys": products, "value_domain": "geometric"},
        "selected keys, range 1..5": {"value_range": (1.0, 5.0)},
    }
    out = []
    for eps in EPSILONS:
        for name, kw in settings.items():
            for run in range(RUNS):
                rel = releases.aggregate(t, eps, 0.0 if "keys" in kw else 1e-6, stats=["mean"], engine="memory",
                                         rng=1000 * run + 7, **kw)  # fmt: skip
                keys = list(rel.value["keys"])
                err = np.abs(rel.value["mean"] - truth.reindex(keys).fillna(np.nan).to_numpy())
                err = err[np.isfinite(err)]
                out.append({"epsilon": eps, "setting": name, "run": run, "keys": len(keys),
                            "mae": float(err.mean()) if err.size else np.nan,
                            "median_ae": float(np.median(err)) if err.size else np.nan,
                            "l0": rel.value["l0"], "linf": rel.value["linf"], "lo": rel.value["lo"],
                            "hi": rel.value["hi"]})  # fmt: skip
            print(eps, name, flush=True)
    res = pd.DataFrame(out)
    OUT.mkdir(exist_ok=True)
    res.to_csv(OUT / "aggregates.csv", index=False)
    table = res.groupby(["setting", "epsilon"]).agg(keys=("keys", "mean"), mae=("mae", "mean"),
                                                     median_ae=("median_ae", "mean"), l0=("l0", "median"),
                                                     linf=("linf", "median"), lo=("lo", "median"),
                                                     hi=("hi", "median")).reset_index()  # fmt: skip
    lines = ["| setting | epsilon | keys | MAE of the mean | median AE | L0 | Linf | lo | hi |", "|---" * 9 + "|"]
    for r in table.itertuples():
        lines.append(f"| {r.setting} | {r.epsilon:g} | {r.keys:.1f} | {r.mae:.3f} | {r.median_ae:.3f} | {r.l0:g} | "
                     f"{r.linf:g} | {r.lo:g} | {r.hi:g} |")  # fmt: skip
    # the two sum estimators at bounds (L0, Linf) = (4, 1), each with the share of one quantity
    head = "| range | eps per quantity | normalized sum rmse per key | direct sum rmse per key |"
    lines += ["", head, "|---" * 4 + "|"]
    for lo, hi in [(1.0, 5.0), (0.0, 4.0), (-2.0, 2.0)]:
        for e in (0.3, 1.2):
            l0, linf = 4, 1
            half = (hi - lo) / 2
            mid = (lo + hi) / 2
            sd_n = math.sqrt(2) * calibrate_laplace(float(l0 * linf), e).scale
            sd_c = math.sqrt(2) * calibrate_laplace(l0 * linf * half, e).scale
            norm = math.sqrt(sd_c**2 + (mid * sd_n) ** 2)  # the count's share spent too (it is released)
            direct = math.sqrt(2) * calibrate_laplace(l0 * linf * max(abs(lo), abs(hi)), e).scale
            lines.append(f"| [{lo:g}, {hi:g}] | {e:g} | {norm:.3g} | {direct:.3g} |")
    # mean, variance and median together (one release: the budget split five ways less), range [1, 5]
    var_truth = df.groupby("key")["value"].var(ddof=0)
    med_truth = df.groupby("key")["value"].median()
    lines += ["", "| keys | epsilon | MAE mean | MAE variance | MAE median | median = true median |", "|---" * 6 + "|"]
    extra = []
    for eps in (1.0, 4.0):
        for name, kw in [("31 public", {"keys": products}), ("selected", {})]:
            errs = []
            for run in range(RUNS):
                rel = releases.aggregate(t, eps, 0.0 if kw else 1e-6, stats=["mean", "variance", "quantile:0.5"],
                                         value_range=(1.0, 5.0), engine="memory", rng=1000 * run + 9, **kw)  # fmt: skip
                keys = list(rel.value["keys"])
                med = rel.value["quantiles"][0.5]
                errs.append((np.abs(rel.value["mean"] - truth.reindex(keys).to_numpy()).mean(),
                             np.abs(rel.value["variance"] - var_truth.reindex(keys).to_numpy()).mean(),
                             np.abs(med - med_truth.reindex(keys).to_numpy()).mean(),
                             np.mean(med == med_truth.reindex(keys).to_numpy())))  # fmt: skip
            m = np.mean(errs, axis=0)
            extra.append({"keys": name, "epsilon": eps, "mae_mean": m[0], "mae_variance": m[1], "mae_median": m[2],
                          "median_exact": m[3]})  # fmt: skip
            lines.append(f"| {name} | {eps:g} | {m[0]:.3f} | {m[1]:.3f} | {m[2]:.3f} | {m[3]:.0%} |")
    pd.DataFrame(extra).to_csv(OUT / "aggregates_stats.csv", index=False)
    (OUT / "aggregates_table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

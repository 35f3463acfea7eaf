"""Issue 19: every release's predicted error (``userdp.plan``, from public sizes only) against its measured
error on real data.

Releases, data and what is measured (the median and 90% quantile of the error over repeated releases):

* distinct count (Knop & Steinke): Amazon Fashion (bundled), Foursquare venues and IMDB (reviews as persons), ``|DC(D) -
  release|``, 300 releases from the exact count curve. Predicted from (persons, distinct words, mean words
  per person), rounded as a planner would know them, by the synthetic curve; and by the exact law of the
  true curve (what a planner with a public sample of the same data would get);
* PrivEMDLinear (local): the average distance to Times Square on Foursquare NYC, 400 releases;
* frequency estimation with GKRR (local, ``delta' = 1e-6``): Foursquare check-in regions (16 public clusters
  of 9 cells, 100 check-ins sampled per user), ``d_EM`` to the truth, 20 releases; and with the exponential
  randomizer on a synthetic 50-point line metric (2,000 users of 20 items), 20 releases;
* heatmaps (``auto`` and ``laplace``): Midtown Manhattan, 64 cells a side, the EMD between the normalized true
  and released heatmaps, 8 releases.

Writes experiments/results/planning.csv, planning_table.md and planning.png.

Run: python experiments/planning.py [--imdb PATH] [--quick]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from userdp import datasets, plan, releases
from userdp.dem.frequency import demd_error
from userdp.dem.itemwise import BoundedEMDReduction
from userdp.dem.linear import linear_release
from userdp.distinct import dc_matching, person_element_graph
from userdp.distinct.release import distinct_count
from userdp.heatmaps import heatmap_emd, user_grid_sum
from userdp.metrics import GreatCircleMetric
from userdp.report.demo import MIDTOWN, TIMES_SQUARE, _regions

OUT = Path(__file__).resolve().parent / "results"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "imdb_reviews.jsonl.xz"


def _row(release, data, param, value, pred, errs, basis):
    return {
        "release": release,
        "data": data,
        "parameter": param,
        "value": value,
        "predicted_median": pred.median,
        "predicted_q90": pred.quantiles[0.9],
        "measured_median": float(np.median(errs)),
        "measured_q90": float(np.quantile(errs, 0.9)),
        "ratio_median": pred.median / float(np.median(errs)),
        "basis": basis,
    }


def _round(x: float) -> float:
    """A public estimate: two significant digits."""
    return float(f"{x:.2g}")


def distinct_rows(name, graph, runs):
    curve = dc_matching(graph, 100)
    truth = graph.distinct_count()
    sizes = {"persons": int(_round(graph.n_persons)), "distinct": int(_round(truth)),
             "items_per_person": _round(float(graph.degrees().mean()))}  # fmt: skip
    rows = []
    for eps in (0.25, 0.5, 1.0, 2.0, 4.0):
        errs = np.abs([truth - distinct_count(None, eps, 0.05, 100, counts=curve, rng=s).value for s in range(runs)])
        rows.append(_row("distinct count", name, "epsilon", eps, plan.distinct(eps, **sizes), errs, "synthetic curve"))
        exact = plan.distinct(eps, curve=curve, distinct=truth)
        rows.append(_row("distinct count", name, "epsilon", eps, exact, errs, "exact law, true curve"))
    return rows


def linear_rows(fs, runs):
    space = GreatCircleMetric(datasets.NYC_BOX)
    f, ell, _ = releases.distance_query(space, TIMES_SQUARE)
    per_user = np.add.reduceat(f(fs.items), fs.offsets[:-1]) / fs.counts()
    truth = per_user.mean()
    rows = []
    for alpha in (5.0, 10.0, 25.0, 50.0, 100.0):
        errs = np.abs([linear_release(per_user, ell, alpha, "local", rng=s).value[0] - truth for s in range(runs)])
        pred = plan.linear(alpha, persons=1100)
        rows.append(_row("PrivEMDLinear (local)", "foursquare", "alpha", alpha, pred, errs, "sampler draws"))
    return rows


def frequency_rows(fs, runs):
    ds, space = _regions(fs)
    proj = BoundedEMDReduction(s=100, epsilon=1.0, r=0.01, delta=1e-6).project(ds, 0)
    truth = proj.global_histogram()
    rows = []
    for alpha in (25.0, 50.0, 100.0, 200.0):
        errs = [demd_error(releases.frequency(proj, space, ds.domain, alpha, delta=1e-6, rng=s).value, truth, space)
                for s in range(runs)]  # fmt: skip
        pred = plan.frequency(alpha, persons=1083, items_per_person=100, clusters=16, cluster_size=9, r=0.25,
                              delta=1e-6)  # fmt: skip
        rows.append(_row("frequency (GKRR, local)", "foursquare regions", "alpha", alpha, pred, errs,
                         "simulation, uniform stand-in"))  # fmt: skip
    return rows


def exponential_rows(runs):
    """FreqEstLocal with the exponential randomizer on a synthetic 50-point line (2,000 users of 20 items
    from two bumps), predicted from the uniform stand-in."""
    from userdp.data import FiniteDomain, UserDataset
    from userdp.dem import freq_est_local
    from userdp.metrics import FiniteMetric

    x = np.arange(50.0)
    line = FiniteMetric(np.abs(x[:, None] - x[None, :]))
    p = np.exp(-((x - 12) ** 2) / 18) + 0.6 * np.exp(-((x - 36) ** 2) / 8)
    items = np.random.default_rng(7).choice(50, size=40_000, p=p / p.sum())
    ds = UserDataset(np.arange(2001) * 20, items, None, FiniteDomain(np.arange(50)))
    truth = ds.global_histogram()
    rows = []
    for alpha in (25.0, 50.0, 100.0, 200.0):
        errs = [demd_error(freq_est_local(ds, line, alpha, 1e-6, rng=s).value, truth, line) for s in range(runs)]
        pred = plan.frequency(alpha, persons=2000, items_per_person=20, space=line, delta=1e-6)
        rows.append(_row("frequency (exponential, local)", "synthetic line, k = 50", "alpha", alpha, pred, errs,
                         "simulation, uniform stand-in"))  # fmt: skip
    return rows


def heatmap_rows(fs, runs):
    box, shape = releases.grid_of(MIDTOWN, 64)
    s = user_grid_sum(fs, shape, box, drop_outside=True)
    rows = []
    for algorithm in ("auto", "laplace"):
        for eps in (0.5, 1.0, 2.0, 4.0):
            errs = [heatmap_emd(s, releases.heatmap(fs, MIDTOWN, 64, eps, algorithm, drop_outside=True, rng=i).value)
                    for i in range(runs)]  # fmt: skip
            pred = plan.heatmap(eps, shape=shape, persons=1000, points_per_person=40, algorithm=algorithm)
            rows.append(_row(f"heatmap ({algorithm})", "foursquare midtown", "epsilon", eps, pred, errs,
                             "simulation, blob stand-in"))  # fmt: skip
    return rows


def _markdown(df: pd.DataFrame) -> str:
    def cell(v) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--imdb", default=str(SHARED))
    ap.add_argument("--quick", action="store_true", help="fewer runs (a smoke test)")
    args = ap.parse_args()
    q = args.quick
    fs = datasets.foursquare_nyc()
    rows = distinct_rows("amazon fashion", person_element_graph(datasets.amazon_fashion()), 60 if q else 300)
    rows += distinct_rows("foursquare venues", person_element_graph(datasets.foursquare_nyc("venue")), 60 if q else 300)
    if Path(args.imdb).exists() and not q:
        rows += distinct_rows("imdb", person_element_graph(datasets.imdb_reviews(args.imdb)), 300)
    rows += linear_rows(fs, 100 if q else 400)
    rows += frequency_rows(fs, 5 if q else 20)
    rows += exponential_rows(5 if q else 20)
    rows += heatmap_rows(fs, 3 if q else 8)
    df = pd.DataFrame(rows)
    OUT.mkdir(exist_ok=True)
    df.to_csv(OUT / "planning.csv", index=False)
    table = df[["release", "data", "parameter", "value", "predicted_median", "measured_median", "ratio_median",
                "predicted_q90", "measured_q90", "basis"]]  # fmt: skip
    (OUT / "planning_table.md").write_text(_markdown(table))
    print(table.to_string(index=False))
    inside = df["ratio_median"].between(0.5, 2.0)
    print(f"\npredicted median within 2x of the measured median: {inside.sum()} of {len(df)} rows (target: all)")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 6))
    for (release, basis), g in df.groupby(["release", "basis"]):
        ax.scatter(g["measured_median"], g["predicted_median"], label=f"{release} ({basis})", s=22)
    lo = min(df["measured_median"].min(), df["predicted_median"].min()) / 2
    hi = max(df["measured_median"].max(), df["predicted_median"].max()) * 2
    xs = np.array([lo, hi])
    ax.plot(xs, xs, "k-", lw=0.8, label="predicted = measured")
    ax.fill_between(xs, xs / 2, xs * 2, color="grey", alpha=0.15, label="within 2x")
    ax.set(xscale="log", yscale="log", xlabel="measured median error", ylabel="predicted median error (userdp.plan)",
           title="Planned against measured error, every release")  # fmt: skip
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(OUT / "planning.png", dpi=130)


if __name__ == "__main__":
    main()

"""Per-key aggregates against the peers (issue 37, item 3): the error of each aggregate against epsilon for
userdp at its defaults beside PipelineDP, OpenDP and Tumult Analytics at the bounds a user would guess, at the
best fixed bounds read off the data, and with their own private bound helpers.

Tasks (persons -> public keys; every key of the data is public, the same keys for every library):

* ``amazon``: Amazon Fashion 5-core, the rating (1..5 stars) per product, reviewers as persons;
* ``fsq_category``: Foursquare NYC, per venue category (251), the check-ins (count) and the local check-in
  hour (``utc_date_time + utc_offset_min``, 0..23; mean, median);
* ``fsq_subway``: Foursquare NYC, per venue of the category "Subway" (430 venues with a check-in, standing in for
  the public list of subway stations), the check-ins and the mean local hour;
* ``imdb``: IMDB reviews, the rating (1..10) per film (``movie``), each review a person (so L0 = Linf = 1).

Settings, each at the same total epsilon (0.5, 1, 2, 4), pure DP, user-level (add/remove a person):

* ``guessed``: ``L0`` = the largest number of keys of a person, ``Linf`` = the largest number of records of a
  person on one key (read off the data: "the maximum"), the known value range;
* ``best``: the fixed ``(L0, Linf)`` of least expected error, per (task, statistic, epsilon), by a grid search
  over powers of 2 (and the maximum) with the true data, simulating the standard Laplace estimators at the known
  range (count; clipped sum; mean = mid + noisy centred sum / noisy count, epsilon halved; variance from three
  noisy sums, epsilon in thirds; the median takes the mean's bounds): a reference no one can use;
* ``helper``: the peer's own private bound helper (PipelineDP: ``PrivateL0Calculator``; Tumult: ``get_bounds``
  for the range); OpenDP has none;
* ``default``: userdp's ``releases.aggregate`` at its defaults (``bounds="auto"``, ``value_range="auto"``;
  ``value_domain`` = the known range only while the default still requires one, recorded in the CSV's
  ``setting``).

Error: per run, the mean (and the median) over the public keys of the absolute error against the non-private
statistic of every record; averaged over ``--runs`` runs (10; 2 for PipelineDP and Tumult on the Foursquare
categories and IMDB, 3 (2) for the Foursquare category median: ``TASKS``). Tumult runs at epsilon 1 and 4 on
count, mean and median only (``TUMULT``); variance on Amazon only; no median on IMDB (userdp's per-key quantile
takes about 130 s a release on its 7,036 films). Every library's estimates get the same public
post-processing (``peers/_common.py``: counts at least 0, means and medians clipped to the range used).

The peers run in their own environments: ``experiments/peers/aggregates_pipelinedp.py`` (PipelineDP, OpenDP;
``--pdp-python``) and ``experiments/peers/aggregates_tumult.py`` (``--tumult-python``). Their rows are kept in
``results/aggregates_peers.csv``; ``--only userdp`` recomputes userdp's rows alone and keeps the others.

Writes ``results/aggregates_peers.csv`` (one row per task, statistic, epsilon, library, setting: the means over
the runs), ``aggregates_peers.md`` and ``aggregates_peers.png``.

Run: nice -n 10 python experiments/aggregates_peers.py [--only userdp|pipelinedp|opendp|tumult]
         [--pdp-python /tmp/pdpenv/bin/python] [--tumult-python /tmp/tmltenv/bin/python] [--runs 10]
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from _common import errors, load_task, post, runs_for, truth  # noqa: E402

from userdp import releases  # noqa: E402
from userdp.errors import ParameterError  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE / "results"
SHARED = HERE.parents[1] / "shared" / "datasets"
if not SHARED.exists():
    SHARED = Path("/work/shared/datasets")
EPSILONS = (0.5, 1.0, 2.0, 4.0)
TASKS = {
    "amazon": {"label": "Amazon Fashion, rating per product", "range": (1.0, 5.0),
               "stats": ["count", "sum", "mean", "variance", "median"]},
    "fsq_category": {"label": "Foursquare, local hour per category", "range": (0.0, 23.0),
                     "stats": ["count", "mean", "median"], "peer_runs": 2, "stat_runs": {"median": 3}},
    "fsq_subway": {"label": "Foursquare, local hour per subway venue", "range": (0.0, 23.0),
                   "stats": ["count", "mean"]},
    "imdb": {"label": "IMDB, rating per film", "range": (1.0, 10.0), "stats": ["count", "mean"], "peer_runs": 2},
}  # fmt: skip
# Tumult's queries cost 10-40 s each on the loaded 2-core machine (Spark and its planning), whatever the size
TUMULT = {"epsilons": [1.0, 4.0], "stats": ["count", "mean", "median"]}
LIBS = ("userdp", "pipelinedp", "opendp", "tumult")
LIBRARY = {"userdp": "userdp", "pipelinedp": "PipelineDP", "opendp": "OpenDP", "tumult": "Tumult"}


# ---------------------------------------------------------------------------------------------- the data
def prepare(cache: Path) -> None:
    """Write ``<cache>/<task>.csv`` (user, key, value) for every task."""
    cache.mkdir(parents=True, exist_ok=True)
    if not (cache / "amazon.csv").exists():
        rows = [json.loads(line) for line in gzip.open(SHARED / "amazon_fashion_5.json.gz", "rt")]
        pd.DataFrame({"user": [r["reviewerID"] for r in rows], "key": [r["asin"] for r in rows],
                      "value": [float(r["overall"]) for r in rows]}
                     ).to_csv(cache / "amazon.csv", index=False)  # fmt: skip
    if not (cache / "fsq_category.csv").exists():
        f = pd.read_csv(SHARED / "foursquare_nyc_checkins.csv.xz")
        hour = (pd.to_datetime(f["utc_date_time"]) + pd.to_timedelta(f["utc_offset_min"], unit="m")).dt.hour
        cat = pd.DataFrame({"user": f["user"].astype(str), "key": f["category_name"], "value": hour.astype(float)})
        cat.to_csv(cache / "fsq_category.csv", index=False)
        sub = f["category_name"] == "Subway"
        pd.DataFrame({"user": f["user"][sub].astype(str), "key": f["venue_id"][sub], "value": hour[sub].astype(float)}
                     ).to_csv(cache / "fsq_subway.csv", index=False)  # fmt: skip
    if not (cache / "imdb.csv").exists():
        im = pd.read_json(SHARED / "imdb_reviews.jsonl.xz", lines=True, compression="xz")
        pd.DataFrame({"user": [f"review{i}" for i in range(len(im))], "key": im["movie"].astype(str),
                      "value": im["rating"].astype(float)}).to_csv(cache / "imdb.csv", index=False)  # fmt: skip


def _codes(df: pd.DataFrame, keys: list[str]):
    u = pd.factorize(df["user"])[0]
    k = pd.Index(keys).get_indexer(df["key"])
    pair = pd.factorize(pd.Series(u).astype(np.int64) * (len(keys) + 1) + k)[0]
    return u, k, pair


def _grid(top: int) -> list[int]:
    g = [1 << i for i in range(20) if (1 << i) < top]
    return g + [top]


def _ranks(group: np.ndarray, rand: np.ndarray) -> np.ndarray:
    """The rank of each element within its group, in the order of ``rand``."""
    order = np.lexsort((rand, group))
    g = group[order]
    start = np.r_[0, np.flatnonzero(np.diff(g)) + 1]
    pos = np.arange(g.size) - np.repeat(start, np.diff(np.r_[start, g.size]))
    out = np.empty(g.size, dtype=np.int64)
    out[order] = pos
    return out


def bounds_of(df: pd.DataFrame, keys: list[str], lo: float, hi: float, stats: list[str], seed: int = 1,
              reps: int = 3, noise_reps: int = 20) -> dict:  # fmt: skip
    """The guessed bounds (the maxima) and, per statistic and epsilon, the fixed bounds of least simulated error
    (a non-private grid search; see the module's docstring)."""
    u, k, pair = _codes(df, keys)
    pair_user = np.zeros(pair.max() + 1, dtype=np.int64)
    pair_user[pair] = u
    l0_max = int(np.bincount(pair_user).max())
    linf_max = int(np.bincount(pair).max())
    true = truth(df, keys)
    v = np.clip(df["value"].to_numpy(dtype=float), lo, hi)
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    rng = np.random.default_rng(seed)
    n_keys = len(keys)
    mae = {}  # (stat, eps, l0, linf) -> summed error
    for _ in range(reps):
        prank = _ranks(pair_user, rng.random(pair_user.size))[pair]
        rrank = _ranks(pair, rng.random(pair.size))
        for l0 in _grid(l0_max):
            for linf in _grid(linf_max):
                keep = (prank < l0) & (rrank < linf)
                n = np.bincount(k[keep], minlength=n_keys).astype(float)
                s = np.bincount(k[keep], weights=v[keep], minlength=n_keys)
                c1 = np.bincount(k[keep], weights=v[keep] - mid, minlength=n_keys)
                c2 = np.bincount(k[keep], weights=(v[keep] - mid) ** 2, minlength=n_keys)
                d = l0 * linf
                for eps in EPSILONS:
                    lap = rng.laplace(size=(noise_reps, 3, n_keys))
                    ests = {"count": n + lap[:, 0] * d / eps,
                            "sum": s + lap[:, 0] * d * max(abs(lo), abs(hi)) / eps}  # fmt: skip
                    nn = np.maximum(1.0, n + lap[:, 0] * d / (eps / 2))
                    ests["mean"] = mid + (c1 + lap[:, 1] * d * half / (eps / 2)) / nn
                    nn = np.maximum(1.0, n + lap[:, 0] * d / (eps / 3))
                    m1 = (c1 + lap[:, 1] * d * half / (eps / 3)) / nn
                    m2 = (c2 + lap[:, 2] * d * half**2 / (eps / 3)) / nn
                    ests["variance"] = m2 - m1**2
                    for stat in set(stats) - {"median"}:
                        e = np.abs(post(stat, ests[stat].ravel(), lo, hi).reshape(noise_reps, -1) - true[stat])
                        key = (stat, eps, l0, linf)
                        mae[key] = mae.get(key, 0.0) + float(e.mean())
    best: dict = {}
    for stat in stats:
        for eps in EPSILONS:
            cand = {(a, b): m for (s, e, a, b), m in mae.items() if s == ("mean" if stat == "median" else stat)
                    and e == eps}  # fmt: skip
            best.setdefault(stat, {})[str(eps)] = list(min(cand, key=cand.get))
    return {"guessed": [l0_max, linf_max], "best": best}


def make_job(cache: Path, runs: int, tasks: list[str]) -> dict:
    job = {"epsilons": list(EPSILONS), "runs": runs, "tumult": TUMULT, "tasks": {}}
    for task in tasks:
        spec = TASKS[task]
        df = load_task(cache, task)
        keys = sorted(df["key"].unique().tolist())
        lo, hi = spec["range"]
        b = bounds_of(df, keys, lo, hi, spec["stats"])
        job["tasks"][task] = {"keys": keys, "range": [lo, hi], "stats": spec["stats"],
                              "peer_runs": spec.get("peer_runs", runs), "stat_runs": spec.get("stat_runs", {}),
                              **b}  # fmt: skip
        print(task, "guessed", b["guessed"], "best", b["best"], flush=True)
    (cache / "job.json").write_text(json.dumps(job))
    return job


# ---------------------------------------------------------------------------------------------- userdp
def userdp_rows(cache: Path, job: dict) -> pd.DataFrame:
    out = []
    for task, spec in job["tasks"].items():
        df = load_task(cache, task)
        keys = spec["keys"]
        true = truth(df, keys)
        lo, hi = spec["range"]
        table = pa.table({"user": df["user"].to_numpy(), "key": df["key"].to_numpy(),
                          "value": df["value"].to_numpy(dtype=float)})  # fmt: skip
        for stat in spec["stats"]:
            name = "quantile:0.5" if stat == "median" else stat
            for eps in job["epsilons"]:
                settings = {"default": {}, "best": {"bounds": tuple(spec["best"][stat][str(eps)]),
                                                    "value_range": (lo, hi)}}  # fmt: skip
                for setting, kw in settings.items():
                    label = setting
                    for run in range(runs_for(job, spec, stat, "userdp")):
                        t0 = time.perf_counter()
                        args = {"stats": [name], "keys": keys, "engine": "memory", "rng": 7919 * run + 17, **kw}
                        try:
                            rel = releases.aggregate(table, eps, 0.0, **args)
                        except ParameterError as exc:  # the default range still needs a public domain
                            if setting != "default" or "value_domain" not in str(exc):
                                raise
                            label = "default (value_domain = known range)"
                            rel = releases.aggregate(table, eps, 0.0, value_domain=(lo, hi), **args)
                        val = rel.value
                        est = val["quantiles"][0.5] if stat == "median" else val[stat]
                        pos = {str(x): i for i, x in enumerate(val["keys"])}
                        est = np.array([est[pos[x]] for x in keys], dtype=float)
                        mae, med = errors(post(stat, est, val["lo"], val["hi"]), true[stat])
                        out.append({"dataset": task, "statistic": stat, "epsilon": eps, "library": "userdp",
                                    "setting": label, "run": run, "mae": mae, "median_ae": med, "l0": val["l0"],
                                    "linf": val["linf"], "lo": val["lo"], "hi": val["hi"],
                                    "seconds": round(time.perf_counter() - t0, 3)})  # fmt: skip
                print("userdp", task, stat, eps, flush=True)
    return pd.DataFrame(out)


# ---------------------------------------------------------------------------------------------- summary
def summarise(raw: pd.DataFrame) -> pd.DataFrame:
    g = raw.groupby(["dataset", "statistic", "epsilon", "library", "setting"], sort=False)
    res = g.agg(runs=("run", "size"), mae=("mae", "mean"), mae_sd=("mae", "std"), median_ae=("median_ae", "mean"),
                l0=("l0", "median"), linf=("linf", "median"), lo=("lo", "median"), hi=("hi", "median"),
                seconds=("seconds", "mean")).reset_index()  # fmt: skip
    return res


def _col(r) -> str:
    s = "default" if str(r.setting).startswith("default") else r.setting
    return f"{r.library} {s}"


def write_table(res: pd.DataFrame) -> str:
    res = res.assign(col=[_col(r) for r in res.itertuples()])
    order = ["userdp default", "userdp guessed", "userdp best", "PipelineDP guessed", "PipelineDP best",
             "PipelineDP helper", "OpenDP guessed", "OpenDP best", "Tumult guessed", "Tumult best",
             "Tumult helper"]  # fmt: skip
    cols = [c for c in order if c in set(res["col"])]
    lines = ["| data set | statistic | ε | " + " | ".join(cols) + " | default / best peer at guessed | default / "
             "best fixed (any library) |", "|---" * (len(cols) + 5) + "|"]  # fmt: skip
    for (task, stat, eps), grp in res.groupby(["dataset", "statistic", "epsilon"], sort=False):
        m = dict(zip(grp["col"], grp["mae"], strict=True))
        cells = [f"{m[c]:.3g}" if c in m else "–" for c in cols]
        d = m.get("userdp default", np.nan)
        guessed = [m[c] for c in m if c.endswith("guessed") and not c.startswith("userdp")]
        best = [m[c] for c in m if c.endswith("best")]
        g_ratio = d / min(guessed) if guessed else np.nan
        b_ratio = d / min(best) if best else np.nan
        flag_g = " **(not below)**" if g_ratio >= 1 else ""
        flag_b = " **(> 1.5x)**" if b_ratio > 1.5 else ""
        lines.append(f"| {task} | {stat} | {eps:g} | " + " | ".join(cells)
                     + f" | {g_ratio:.2f}{flag_g} | {b_ratio:.2f}{flag_b} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def write_figure(res: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(t, s) for t in TASKS for s in TASKS[t]["stats"] if t in set(res["dataset"])]
    ncol = 5
    nrow = -(-len(panels) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4 * ncol, 3.3 * nrow), squeeze=False)
    res = res.assign(col=[_col(r) for r in res.itertuples()])
    style = {"userdp": ("k", "o"), "PipelineDP": ("tab:blue", "s"), "OpenDP": ("tab:green", "^"),
             "Tumult": ("tab:red", "D")}  # fmt: skip
    dash = {"default": "-", "guessed": ":", "best": "--", "helper": "-."}
    for ax, (task, stat) in zip(axes.ravel(), panels, strict=False):
        sub = res[(res["dataset"] == task) & (res["statistic"] == stat)]
        for col, grp in sub.groupby("col", sort=False):
            lib, setting = col.split(" ", 1)
            if lib == "userdp" and setting == "guessed":
                continue
            c, mk = style[lib]
            ax.plot(grp["epsilon"], grp["mae"], dash[setting], color=c, marker=mk, ms=4, lw=2 if lib == "userdp" else 1,
                    label=col)  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{task}: {stat}", fontsize=9)
        ax.set_xlabel("ε")
        ax.set_ylabel("mean abs. error per key")
    for ax in axes.ravel()[len(panels):]:
        ax.axis("off")
    h, lab = axes[0, 0].get_legend_handles_labels()
    fig.legend(h, lab, loc="lower right", fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=LIBS, action="append", help="recompute these libraries' rows only")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--cache", default="/tmp/userdp_aggregates_peers", help="prepared tasks and the job")
    ap.add_argument("--pdp-python", default="/tmp/pdpenv/bin/python", help="a Python with pipeline-dp and opendp")
    ap.add_argument("--tumult-python", default="/tmp/tmltenv/bin/python", help="a Python with tmlt.analytics")
    ap.add_argument("--rejob", action="store_true", help="recompute the bounds (the job) even if cached")
    ap.add_argument("--tasks", default=",".join(TASKS), help="comma-separated tasks (a smoke test: --tasks amazon)")
    ap.add_argument("--results", default=str(OUT), help="where the CSV, table and figure go")
    args = ap.parse_args()
    cache = Path(args.cache)
    prepare(cache)
    job = json.loads((cache / "job.json").read_text()) if (cache / "job.json").exists() and not args.rejob else None
    tasks = args.tasks.split(",")
    if job is None or job["runs"] != args.runs or list(job["tasks"]) != tasks:
        job = make_job(cache, args.runs, tasks)
    only = args.only or list(LIBS)
    out_dir = Path(args.results)
    csv_path = out_dir / "aggregates_peers.csv"
    old = pd.read_csv(csv_path) if csv_path.exists() else pd.DataFrame()
    parts = []
    for lib in only:
        t0 = time.perf_counter()
        if lib == "userdp":
            raw = userdp_rows(cache, job)
        else:
            script = HERE / "peers" / ("aggregates_tumult.py" if lib == "tumult" else "aggregates_pipelinedp.py")
            python = args.tumult_python if lib == "tumult" else args.pdp_python
            out = cache / f"{lib}_raw.csv"
            cmd = [python, str(script), "--cache", str(cache), "--out", str(out)]
            if lib != "tumult":
                cmd += ["--libs", lib]
            subprocess.run(cmd, check=True)
            raw = pd.read_csv(out)
        raw.to_csv(cache / f"{lib}_rows.csv", index=False)
        parts.append(summarise(raw))
        print(f"{lib}: {time.perf_counter() - t0:.0f} s", flush=True)
    new = pd.concat(parts, ignore_index=True)
    if len(old):
        old = old[~old["library"].isin([LIBRARY[x] for x in only])]
    res = pd.concat([old, new], ignore_index=True)
    lib_order = {v: i for i, v in enumerate(LIBRARY.values())}
    task_order = {t: i for i, t in enumerate(TASKS)}
    stat_order = {s: i for i, s in enumerate(["count", "sum", "mean", "variance", "median"])}
    res = res.sort_values(["dataset", "statistic", "epsilon", "library", "setting"],
                          key=lambda c: c.map(task_order) if c.name == "dataset" else c.map(stat_order)
                          if c.name == "statistic" else c.map(lib_order) if c.name == "library" else c)  # fmt: skip
    out_dir.mkdir(exist_ok=True)
    res.to_csv(csv_path, index=False, float_format="%.6g")
    table = write_table(res)
    (out_dir / "aggregates_peers.md").write_text(table)
    write_figure(res, out_dir / "aggregates_peers.png")
    print(table)


if __name__ == "__main__":
    main()

"""PipelineDP and OpenDP rows of ``experiments/aggregates_peers.py`` (issue 37, item 3). Runs under the peers'
Python (``python3 -m venv /tmp/pdpenv && /tmp/pdpenv/bin/pip install pipeline-dp opendp "polars==1.36.1"
pandas pyarrow``; OpenDP 0.16 needs exactly the Polars it was built against).

Reads the job and the prepared tasks from ``--cache`` (see ``_common.py``) and writes one row per (data set,
statistic, epsilon, library, setting, run) to ``--out``:

* PipelineDP 0.3 (``LocalBackend``, ``NaiveBudgetAccountant(total_epsilon=eps, total_delta=0)``, Laplace noise,
  public partitions = the public keys, ``max_partitions_contributed=L0``,
  ``max_contributions_per_partition=Linf``, ``min_value``/``max_value`` = the range): COUNT, SUM, MEAN,
  VARIANCE, PERCENTILE(50), one aggregation per statistic with the whole epsilon; settings ``guessed``, ``best``
  and ``helper`` (``PrivateL0Calculator``: L0 chosen by its exponential mechanism with 20% of epsilon, its
  aggregation at the other 80%, candidates 1..the number of public keys, Linf at the guessed maximum; the helper
  is documented for COUNT and PRIVACY_ID_COUNT only, used here for every statistic as the only helper there is).
* OpenDP 0.16 (Polars ``Context.compositor``, ``unit_of(contributions=1, identifier="user")``, pure DP,
  ``truncate_per_group(Linf)`` then ``truncate_num_groups(L0)``, ``with_keys`` the public keys, a margin by key
  with ``max_length`` = the number of rows and ``max_groups`` = the number of public keys): ``dp.len()``,
  ``dp.sum``, ``dp.mean`` and ``dp.median`` over the integer candidates of the range (no variance); settings
  ``guessed`` and ``best``; OpenDP has no private bound helper. ``truncate_num_groups(keep="sample")`` fails
  on Polars 1.36 (a struct with two fields named ``key``), so the keys are relabelled by a fresh random
  permutation each run and ``keep="first"`` keeps each person's first keys in that order: what ``"sample"``
  does (one hash order of the keys for every person). ``truncate_num_groups(k)`` keeps ``k - 1`` groups per
  person (it filters ``rank("dense") < k`` and the dense rank starts at 1; with ``k = 1`` it keeps nothing) while
  its stability map charges ``k`` (checked with ``summarize()``: L0 = 2, Linf = 1 gives the scale of 2 per unit
  of epsilon, and each person keeps one key); so ``truncate_num_groups(L0 + 1)`` is passed, which keeps ``L0``
  keys at the noise of ``L0 + 1``, the closest OpenDP 0.16 comes to ``L0``.

Run: /tmp/pdpenv/bin/python experiments/peers/aggregates_pipelinedp.py --cache DIR --out FILE [--libs pipelinedp,opendp]
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import FIELDS, errors, load_job, load_task, post, runs_for, truth  # noqa: E402

warnings.filterwarnings("ignore")


def pipelinedp_runner(df, keys):
    import pipeline_dp
    from pipeline_dp.dataset_histograms import computing_histograms
    from pipeline_dp.private_contribution_bounds import PrivateL0Calculator

    rows = list(zip(df["user"].tolist(), df["key"].tolist(), df["value"].tolist(), strict=True))
    ext = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1],
                                     value_extractor=lambda r: r[2])  # fmt: skip
    backend = pipeline_dp.LocalBackend()
    hist = []
    metric = {"count": pipeline_dp.Metrics.COUNT, "sum": pipeline_dp.Metrics.SUM, "mean": pipeline_dp.Metrics.MEAN,
              "variance": pipeline_dp.Metrics.VARIANCE, "median": pipeline_dp.Metrics.PERCENTILE(50)}  # fmt: skip
    field = {"count": "count", "sum": "sum", "mean": "mean", "variance": "variance", "median": "percentile_50"}

    def aggregate(stat, eps, l0, linf, lo, hi):
        acc = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=0.0)
        params = pipeline_dp.AggregateParams(noise_kind=pipeline_dp.NoiseKind.LAPLACE, metrics=[metric[stat]],
                                             max_partitions_contributed=int(l0),
                                             max_contributions_per_partition=int(linf), min_value=float(lo),
                                             max_value=float(hi))  # fmt: skip
        res = pipeline_dp.DPEngine(acc, backend).aggregate(rows, params, ext, public_partitions=keys)
        acc.compute_budgets()
        got = {k: getattr(v, field[stat]) for k, v in res}
        return np.array([got.get(k, np.nan) for k in keys], dtype=float)

    def helper_l0(eps):
        if not hist:
            hist.append(list(computing_histograms.compute_dataset_histograms(rows, ext, backend))[0])
        p = pipeline_dp.CalculatePrivateContributionBoundsParams(
            aggregation_noise_kind=pipeline_dp.NoiseKind.LAPLACE, aggregation_eps=0.8 * eps, aggregation_delta=0.0,
            calculation_eps=0.2 * eps, max_partitions_contributed_upper_bound=len(keys))
        return int(list(PrivateL0Calculator(p, keys, [hist[0]], backend).calculate())[0])

    def run(stat, eps, setting, l0, linf, lo, hi, rng):
        if setting == "helper":
            l0 = helper_l0(eps)
            return aggregate(stat, 0.8 * eps, l0, linf, lo, hi), l0
        return aggregate(stat, eps, l0, linf, lo, hi), l0

    return run


def opendp_runner(df, keys):
    import opendp.prelude as dp
    import polars as pl
    from opendp.measurements import make_private_lazyframe

    dp.enable_features("contrib")
    index = {k: i for i, k in enumerate(keys)}
    codes = df["key"].map(index).to_numpy(dtype=np.int64)
    users = df["user"].to_numpy()
    values = df["value"].to_numpy(dtype=float)
    measurements = {}

    def frame(perm):
        return pl.DataFrame({"user": users, "key": perm[codes], "value": values}).lazy()

    def measurement(stat, eps, l0, linf, lo, hi):
        ctx = dp.Context.compositor(data=frame(np.arange(len(keys))),
                                    privacy_unit=dp.unit_of(contributions=1, identifier="user"),
                                    privacy_loss=dp.loss_of(epsilon=eps), split_evenly_over=1,
                                    margins=[dp.polars.Margin(by=["key"], max_length=len(df),
                                                              max_groups=len(keys))])  # fmt: skip
        v = pl.col("value").fill_null((lo + hi) / 2)
        cands = [float(c) for c in np.arange(np.ceil(lo), np.floor(hi) + 1)]
        expr = {"count": lambda: dp.len(), "sum": lambda: v.dp.sum((float(lo), float(hi))),
                "mean": lambda: v.dp.mean((float(lo), float(hi))),
                "median": lambda: v.dp.median(cands)}[stat]()  # fmt: skip
        q = (ctx.query().truncate_per_group(int(linf), by=["key"])
             .truncate_num_groups(int(l0) + 1, by=["key"], keep="first")  # keeps L0 groups: see the docstring
             .group_by("key").agg(expr.alias("est"))
             .with_keys(pl.LazyFrame({"key": np.arange(len(keys))})))  # fmt: skip
        # LazyFrameQuery.resolve() binary-searches the global scale (10-20 s a query here); the loss is
        # proportional to 1 / scale, so solve it from the loss at scale 1 and check the measurement instead
        plan = object.__getattribute__(q, "polars_plan")
        query = object.__getattribute__(q, "_query")
        domain, metric = query._chain

        def make(scale):
            return make_private_lazyframe(input_domain=domain, input_metric=metric,
                                          output_measure=query._output_measure, lazyframe=plan,
                                          global_scale=scale)  # fmt: skip

        scale = make(1.0).map(query._d_in) / eps
        for _ in range(60):
            m = make(scale)
            if m.check(query._d_in, eps):
                return m
            scale *= 1 + 1e-9
        raise RuntimeError("no OpenDP scale found")

    def run(stat, eps, setting, l0, linf, lo, hi, rng):
        if setting != "guessed" and setting != "best":
            return None, l0
        key = (stat, eps, l0, linf, lo, hi)
        if key not in measurements:
            measurements[key] = measurement(stat, eps, l0, linf, lo, hi)
        perm = rng.permutation(len(keys))  # relabel the keys: keep="first" is then a random order of the keys
        out = measurements[key](frame(perm)).collect()
        got = dict(zip(out["key"].to_list(), out["est"].to_list(), strict=True))
        return np.array([got.get(int(perm[i]), np.nan) for i in range(len(keys))], dtype=float), l0

    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--libs", default="pipelinedp,opendp")
    ap.add_argument("--tasks", default=None, help="comma-separated task names (default: every task of the job)")
    args = ap.parse_args()
    job = load_job(Path(args.cache))
    libs = args.libs.split(",")
    tasks = args.tasks.split(",") if args.tasks else list(job["tasks"])
    rng = np.random.default_rng(20261127)
    with open(args.out, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(FIELDS)
        for task in tasks:
            spec = job["tasks"][task]
            df = load_task(Path(args.cache), task)
            keys = spec["keys"]
            true = truth(df, keys)
            lo, hi = spec["range"]
            runners = {}
            if "pipelinedp" in libs:
                runners["PipelineDP"] = pipelinedp_runner(df, keys)
            if "opendp" in libs:
                runners["OpenDP"] = opendp_runner(df, keys)
            for stat in spec["stats"]:
                for eps in job["epsilons"]:
                    for lib, runner in runners.items():
                        if lib == "OpenDP" and stat == "variance":
                            continue
                        done = []
                        for setting in ("guessed", "best", "helper"):
                            l0, linf = spec["guessed"] if setting != "best" else spec["best"][stat][str(eps)]
                            if setting == "best" and [l0, linf] == spec["guessed"]:  # the same release: reuse
                                w.writerows([[*row[:4], "best", *row[5:]] for row in done])
                                continue
                            for r in range(runs_for(job, spec, stat, lib)):
                                t0 = time.perf_counter()
                                est, used_l0 = runner(stat, eps, setting, l0, linf, lo, hi, rng)
                                if est is None:
                                    break
                                mae, med = errors(post(stat, est, lo, hi), true[stat])
                                row = [task, stat, eps, lib, setting, r, mae, med, used_l0, linf, lo, hi,
                                       round(time.perf_counter() - t0, 3)]  # fmt: skip
                                w.writerow(row)
                                if setting == "guessed":
                                    done.append(row)
                            fh.flush()
                    print(task, stat, eps, flush=True)


if __name__ == "__main__":
    main()

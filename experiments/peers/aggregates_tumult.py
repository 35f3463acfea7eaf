"""Tumult Analytics rows of ``experiments/aggregates_peers.py`` (issue 37, item 3). Runs under Tumult's Python
(``python3 -m venv /tmp/tmltenv && /tmp/tmltenv/bin/pip install tmlt.analytics``; Spark needs Java 8-17).

Tumult Analytics 0.21 (Spark ``local[2]``), ``Session.from_dataframe(PureDPBudget(inf), protected_change=
AddRowsWithID("user"))``, each query evaluated at ``PureDPBudget(eps)`` (pure DP; Tumult's default mechanisms:
geometric noise on counts and integer sums, Laplace on floats), ``enforce(MaxGroupsPerID(key, L0))``,
``enforce(MaxRowsPerGroupPerID(key, Linf))`` and ``groupby(KeySet.from_dict({key: public keys}))``: ``count()``,
``sum``, ``average``, ``variance``, ``median`` (``low``, ``high`` = the range). Settings ``guessed``, ``best`` and
``helper``: ``get_bounds("value")`` (Tumult's private range, its power-of-two bins) with 20% of epsilon over all
the records (``MaxRowsPerGroupPerID`` = the largest number of records of a person, the maximum), then the
aggregate at the other 80% with ``low, high`` = those bounds and the guessed ``L0, Linf`` (no helper for the
contribution bounds; none for the count, which has no range).

The runs are one query: the records are copied once per run with the persons renamed ``run:person`` and the
key ``run|key`` (a person is in one run only, so each run's noise and truncation are independent and each run is
the release a separate query would give; the budget of a query covers every run, by parallel composition over
disjoint persons). ``get_bounds`` is one query grouped by run; then one aggregate per distinct pair of bounds.

Run: /tmp/tmltenv/bin/python experiments/peers/aggregates_tumult.py --cache DIR --out FILE [--tasks ...]
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import FIELDS, errors, load_job, load_task, post, runs_for, truth  # noqa: E402

warnings.filterwarnings("ignore")


def spark_session():
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("aggregates_peers")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "8")
             .config("spark.driver.memory", "4g").config("spark.sql.execution.arrow.pyspark.enabled", "true")
             .getOrCreate())  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main() -> None:
    from tmlt.analytics import (
        AddRowsWithID,
        KeySet,
        MaxGroupsPerID,
        MaxRowsPerGroupPerID,
        PureDPBudget,
        QueryBuilder,
        Session,
    )

    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tasks", default=None)
    args = ap.parse_args()
    job = load_job(Path(args.cache))
    tasks = args.tasks.split(",") if args.tasks else list(job["tasks"])
    spark = spark_session()
    with open(args.out, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(FIELDS)
        for task in tasks:
            spec = job["tasks"][task]
            df = load_task(Path(args.cache), task)
            keys = spec["keys"]
            true = truth(df, keys)
            lo, hi = spec["range"]
            max_rows = int(df.groupby("user").size().max())
            runs = runs_for(job, spec, "count", "Tumult")
            rep = pd.concat([df.assign(run=r) for r in range(runs)], ignore_index=True)
            rep["user"] = rep["run"].astype(str) + ":" + rep["user"]
            rep["rk"] = rep["run"].astype(str) + "|" + rep["key"]
            sdf = spark.createDataFrame(rep[["user", "rk", "run", "value"]]).cache()
            sdf.count()
            sess = Session.from_dataframe(privacy_budget=PureDPBudget(float("inf")), source_id="d", dataframe=sdf,
                                          protected_change=AddRowsWithID("user"))  # fmt: skip

            def aggregate(stat, eps, l0, linf, a, b, run_list, keys=keys, sess=sess):
                ks = KeySet.from_dict({"rk": [f"{r}|{k}" for r in run_list for k in keys]})
                qb = (QueryBuilder("d").enforce(MaxGroupsPerID("rk", int(l0)))
                      .enforce(MaxRowsPerGroupPerID("rk", int(linf))).groupby(ks))  # fmt: skip
                a, b = float(a), float(b)
                q = {"count": lambda: qb.count(name="est"), "sum": lambda: qb.sum("value", a, b, name="est"),
                     "mean": lambda: qb.average("value", a, b, name="est"),
                     "variance": lambda: qb.variance("value", a, b, name="est"),
                     "median": lambda: qb.median("value", a, b, name="est")}[stat]()  # fmt: skip
                got = sess.evaluate(q, PureDPBudget(eps)).toPandas()
                got = dict(zip(got["rk"], got["est"].astype(float), strict=True))
                return {r: np.array([got.get(f"{r}|{k}", np.nan) for k in keys], dtype=float) for r in run_list}

            def bounds(eps, n, sess=sess, max_rows=max_rows):
                ks = KeySet.from_dict({"run": list(range(n))})
                q = (QueryBuilder("d").enforce(MaxGroupsPerID("run", 1)).enforce(MaxRowsPerGroupPerID("run", max_rows))
                     .groupby(ks).get_bounds("value", "lo", "hi"))  # fmt: skip
                got = sess.evaluate(q, PureDPBudget(eps)).toPandas()
                return {int(r): (float(a), float(b)) for r, a, b in zip(got["run"], got["lo"], got["hi"], strict=True)}

            for stat in [s for s in spec["stats"] if s in job["tumult"]["stats"]]:
                n_runs = runs_for(job, spec, stat, "Tumult")
                for eps in job["tumult"]["epsilons"]:
                    done = []
                    for setting in ("guessed", "best", "helper"):
                        if setting == "helper" and stat == "count":
                            continue
                        l0, linf = spec["guessed"] if setting != "best" else spec["best"][stat][str(eps)]
                        if setting == "best" and [l0, linf] == spec["guessed"]:  # the same release: reuse
                            w.writerows([[*row[:4], "best", *row[5:]] for row in done])
                            continue
                        t0 = time.perf_counter()
                        if setting == "helper":
                            rb = bounds(0.2 * eps, n_runs)
                            ests = {}
                            for pair in sorted(set(rb.values())):
                                ests.update(aggregate(stat, 0.8 * eps, l0, linf, *pair,
                                                      [r for r in range(n_runs) if rb[r] == pair]))  # fmt: skip
                        else:
                            rb = dict.fromkeys(range(n_runs), (lo, hi))
                            ests = aggregate(stat, eps, l0, linf, lo, hi, list(range(n_runs)))
                        sec = (time.perf_counter() - t0) / n_runs
                        for r in range(n_runs):
                            a, b = rb[r]
                            mae, med = errors(post(stat, ests[r], a, b), true[stat])
                            row = [task, stat, eps, "Tumult", setting, r, mae, med, l0, linf, a, b, round(sec, 3)]
                            w.writerow(row)
                            if setting == "guessed":
                                done.append(row)
                        fh.flush()
                    print(task, stat, eps, flush=True)
            sdf.unpersist()


if __name__ == "__main__":
    main()

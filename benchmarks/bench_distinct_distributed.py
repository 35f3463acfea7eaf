"""Benchmark: the distinct count beyond one driver (issue 17, "Beyond one machine").

1. **Utility of the bucketed count** (``method="bucketed"``, :func:`userdp.distinct.dc_bucketed`) against the
   exact count that the driver path computes, on IMDB (each review a person, as in Knop & Steinke): the
   relative gap of ``sum_b DC_b(l)`` to ``DC(D; l)`` at several ``l``, and the median released lower bound at
   epsilon = 1 over 21 seeds, for 1 to 64 buckets.
2. **The driver path's memory**: the driver's peak resident memory from the collected edge list (a pandas
   frame of (user, text) rows, as ``toPandas`` gives it) through the graph and the exact count, at growing
   sizes without Spark; the bytes per edge at the margin, and the largest edge list a 64 GB driver holds,
   extrapolated linearly.
3. **Spark (local mode)**: the driver path (:meth:`SparkEngine.edges`) and the bucketed path
   (``SparkEngine.bucket_sums``, whose driver receives ``l_max`` numbers per bucket whatever the size): wall
   time and the Python driver's peak memory.

Run: python benchmarks/bench_distinct_distributed.py [--imdb PATH] [--driver-sizes 1e6,1e7,3e7] [--sizes 1e5,1e6]
[--no-spark]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "imdb_reviews.jsonl.xz"

CHILD = r"""
import resource, sys, time
import numpy as np
import pyarrow as pa
from userdp.engines import Columns
from userdp.engines.spark import SparkEngine
from userdp.distinct import person_element_graph, dc_matching
from userdp.distinct.counting import bucket_count, element_buckets, person_shares
n_edges, mode = int(float(sys.argv[1])), sys.argv[2]
rng = np.random.default_rng(0)
persons = max(n_edges // 20, 1)
users = rng.integers(0, persons, n_edges)
items = np.char.add("w", (rng.zipf(1.3, n_edges) % (n_edges // 4 + 1)).astype(str))
eng = SparkEngine()
df = eng.spark.createDataFrame(pa.table({"user": users, "item": items}).to_pandas()).repartition(8).cache()
df.count()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
data = eng.load(df, Columns("user", "item"))
t = time.perf_counter()
if mode == "driver":
    g = person_element_graph(eng.edges(data))
    counts = dc_matching(g, 100)
    extra = g.n_edges
else:
    counts = eng.bucket_sums(data, 16, lambda x: element_buckets(x, 16),
                             lambda off, eb: person_shares(off, eb, 16, 100),
                             lambda p, e, up, ul: bucket_count(p, e, up, ul, 100), 100)
    extra = 0
wall = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(f"{wall:.2f} {peak - base:.3f} {extra} {counts[-1]}")
"""


DRIVER = r"""
import resource, sys, time
import numpy as np
import pandas as pd
from userdp.engines.base import edges_from_pairs
from userdp.distinct import person_element_graph, dc_matching
n = int(float(sys.argv[1]))
rng = np.random.default_rng(0)
users = rng.integers(0, max(n // 10, 1), n)
items = np.char.add("w", (rng.zipf(1.3, n) % (n // 4 + 1)).astype(str)).astype(object)
pdf = pd.DataFrame({"user": users, "item": items}).drop_duplicates()  # what toPandas() hands the driver
del users, items
def rss(field):  # GB
    return next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith(field)) / 2**20
base = rss("VmRSS:")
open("/proc/self/clear_refs", "w").write("5")  # restart the peak (VmHWM) from here: the generation's is not ours
t = time.perf_counter()
g = person_element_graph(edges_from_pairs(pdf["user"].to_numpy(), pdf["item"].to_numpy()))
dc_matching(g, 100)
peak = rss("VmHWM:")
print(f"{time.perf_counter() - t:.2f} {base:.3f} {peak:.3f} {g.n_edges}")
"""


def driver_memory(sizes: list[float]) -> None:
    """The driver path after Spark's collect: the edge list as a pandas frame of (user, text) rows, the graph
    and the exact count, in a fresh interpreter per size."""
    rows = []
    for n in sizes:
        out = subprocess.run([sys.executable, "-c", DRIVER, str(n)], capture_output=True, text=True, timeout=3600)
        if out.returncode != 0:
            print(f"driver path at {n:g} failed: {out.stderr.strip().splitlines()[-1:]}")
            continue
        wall, base, peak, edges = out.stdout.split()[-4:]
        rows.append((int(edges), float(base), float(peak)))
        print(f"driver path, {int(edges):>11,} edges: {float(wall):6.1f} s; peak {float(peak):.2f} GB "
              f"(the collected frame alone {float(base):.2f} GB)")  # fmt: skip
    if len(rows) >= 2:
        (e0, _, p0), (e1, _, p1) = rows[-2], rows[-1]
        per_edge = (p1 - p0) * 2**30 / (e1 - e0)
        print(f"  {per_edge:.0f} bytes per edge at the margin: a 64 GB driver holds about "
              f"{(64 - p1) * 2**30 / per_edge + e1:.2e} edges (linear extrapolation)")  # fmt: skip


def utility(path: str) -> None:
    from userdp.datasets import imdb_reviews
    from userdp.distinct import dc_bucketed, dc_matching, distinct_count, person_element_graph

    g = person_element_graph(imdb_reviews(path))
    exact = dc_matching(g, 100)
    ls = (5, 10, 25, 50, 100)
    print(f"IMDB reviews: {g.n_persons:,} persons, {g.n_edges:,} pairs, {g.n_elements:,} words")
    head = " ".join(f"{'gap l=' + str(lv):>10}" for lv in ls)
    print(f"{'buckets':>8} {'time s':>7} {head} {'median release':>15}")
    for b in (None, 1, 4, 16, 64):
        t = time.perf_counter()
        c = exact if b is None else dc_bucketed(g, 100, b)
        dt = time.perf_counter() - t
        gaps = " ".join(f"{1 - c[lv - 1] / exact[lv - 1]:>10.4f}" for lv in ls)
        method = "matching" if b is None else "bucketed"
        rel = [distinct_count(g, 1.0, method=method, n_buckets=b or 16, counts=c, rng=s).value for s in range(21)]
        label = "exact" if b is None else str(b)
        print(f"{label:>8} {dt:>7.2f} {gaps} {np.median(rel):>15,.0f}")
    print(f"(true distinct count {g.distinct_count():,})")


def spark(sizes: list[float]) -> None:
    rows = []
    for n in sizes:
        for mode in ("driver", "bucketed"):
            out = subprocess.run([sys.executable, "-c", CHILD, str(n), mode], capture_output=True, text=True,
                                 timeout=3600)  # fmt: skip
            if out.returncode != 0:
                print(f"{mode} at {n:g} failed: {out.stderr.strip().splitlines()[-1:]}")
                continue
            wall, mem, edges, dc = out.stdout.split()[-4:]
            rows.append((n, mode, float(wall), float(mem), int(edges), int(dc)))
            print(f"{mode:>9} {n:>8.0e} records: {float(wall):7.1f} s, driver peak +{float(mem):.2f} GB, "
                  f"DC(100) {int(dc):,}")  # fmt: skip
    driver = [(e, m) for _, mode, _, m, e, _ in rows if mode == "driver" and e > 0]
    if len(driver) >= 2:
        (e0, m0), (e1, m1) = driver[-2], driver[-1]
        per_edge = (m1 - m0) * 2**30 / (e1 - e0)
        print(f"driver path: {per_edge:.0f} bytes per distinct edge (slope between the two largest sizes); "
              f"a 64 GB driver holds about {64 * 2**30 / per_edge:.2e} edges")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--imdb", default=str(SHARED))
    ap.add_argument("--sizes", default="1e5,1e6", help="records for the Spark runs")
    ap.add_argument("--driver-sizes", default="1e6,1e7,3e7", help="records for the driver path's memory")
    ap.add_argument("--no-spark", action="store_true")
    args = ap.parse_args()
    if Path(args.imdb).exists():
        utility(args.imdb)
    driver_memory([float(x) for x in args.driver_sizes.split(",")])
    if not args.no_spark:
        spark([float(x) for x in args.sizes.split(",")])


if __name__ == "__main__":
    main()

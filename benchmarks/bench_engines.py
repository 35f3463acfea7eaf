"""Benchmark: releases on files in random user order, against DuckDB's own query of the same aggregate (issue 33).

Every figure is measured in a fresh interpreter (wall time, CPU time of all its threads, peak resident memory)
and printed next to its target; a release's *floor* is the plain DuckDB query that computes the same exact
aggregate from the same file, run in the same way in the same run, so the ratios hold on any machine:

* **heatmap**: a Parquet file of ``--points`` points (about 10 per user, users in random order); the default
  heatmap release (``releases.heatmap(path, box, 256, 1.0)``, the DuckDB engine) against DuckDB's ``GROUP BY``
  of the exact ``(cell, user size)`` count table. Targets: at most 1.5x the floor, peak at most 2 GB, CPU/wall
  at least 1.6 on 2 cores. With ``--memory-engine`` the in-memory engine's time too (the "before").
* **pairs**: ``--pairs`` person-word pairs in random order; the exact distinct count (``method="matching"``,
  the default off Spark; target 60 s), the vocabulary and the key counts against DuckDB's ``GROUP BY user,
  word`` of the same pairs (targets 1.5x).
* **itemwise**: ``--items`` items, 10 per user, users in random order, codes of a 100-item domain;
  PrivEMDItemWise (central, GKRR) against DuckDB's ``ORDER BY user`` of the same file read to the end (target
  2x; CPU/wall at least 1.6 on 2 cores).
* **spark**: the heatmap of the same ``--points`` file on Spark ``local[2]`` (the release reads the file; the
  session is started before the clock) against the memory engine's release of it (target 5x).
* **csv**: the Foursquare check-ins replicated to about 2.7 M rows and sorted by numeric user id, written as
  CSV; the heatmap, distinct count, vocabulary and key counts on every engine against the in-memory engine
  (target 1.3x).

Run: ``python benchmarks/bench_engines.py`` (10^7 points, pairs and items; about 10 minutes on two cores) or
``--points 1e8 --pairs 1e8 --items 1e9`` for the issue's sizes (the files take 1.6, 1.0 and 8 GB of disk).
``--only heatmap pairs`` runs some parts. Files are written under ``--dir`` (default: a temporary folder).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

_CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, {src!r})
{setup}
t0, c0 = time.perf_counter(), time.process_time()
{call}
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({{"wall": wall, "cpu": cpu, "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}}))
"""


def measure(setup: str, call: str) -> dict:
    """Run ``setup`` then time ``call`` in a fresh interpreter: wall and CPU seconds of ``call``, and the
    process's peak resident memory (GB, setup included)."""
    code = _CHILD.format(src=str(ROOT / "src"), setup=setup, call=call)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode:
        sys.stderr.write(out.stderr[-4000:])
        raise SystemExit(f"a measurement failed (exit {out.returncode})")
    last = out.stdout.strip().splitlines()[-1]
    return json.loads(last[last.rindex('{"wall"') :])  # (after DuckDB's progress bar, on long queries)


def duck(sql: str) -> None:
    import duckdb

    duckdb.connect().execute(sql)


def row(name: str, r: dict, floor: dict | None, target: str) -> None:
    ratio = f"{r['wall'] / floor['wall']:5.2f}x" if floor else "   -  "
    print(f"  {name:<44} {r['wall']:7.2f} s {ratio}  cpu/wall {r['cpu'] / r['wall']:4.2f}  peak {r['peak_gb']:5.2f} GB"
          f"   target {target}")  # fmt: skip


# -- the files ---------------------------------------------------------------------------------------------------


def points_file(d: Path, n: int) -> Path:
    path = d / f"points_{n}.parquet"
    if not path.exists():
        users = max(1, n // 10)
        duck(f"""SELECT setseed(0.5);
            COPY (SELECT (hash(i) % {users})::BIGINT AS user, 40.55 + random() * 0.44 AS lat,
                         -74.27 + random() * 0.59 AS lon FROM range({n}) t(i))
            TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 1000000)""")
    return path


def pairs_file(d: Path, n: int) -> Path:
    path = d / f"pairs_{n}.parquet"
    if not path.exists():
        users = max(1, n // 20)
        duck(f"""SELECT setseed(0.25);
            COPY (SELECT (hash(i) % {users})::BIGINT AS user,
                         'w' || CAST(floor(pow(random(), 4) * 200000) AS BIGINT) AS word FROM range({n}) t(i))
            TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 1000000)""")
    return path


def items_file(d: Path, n: int, m: int = 10) -> Path:
    path = d / f"items_{n}.parquet"
    if not path.exists():  # user = a permutation of the rows (a multiplier coprime to n), m rows each
        n = n - n % m
        duck(f"""SELECT setseed(0.75);
            COPY (SELECT ((i * 999983) % {n} // {m})::BIGINT AS user, CAST(floor(pow(random(), 2) * 100) AS BIGINT)
                         AS item FROM range({n}) t(i))
            TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 1000000)""")
    return path


def checkins_csv(d: Path, copies: int = 12) -> Path:
    path = d / f"checkins_x{copies}.csv"
    if not path.exists():
        import duckdb

        src = ROOT.parent / "shared" / "datasets" / "foursquare_nyc_checkins.csv.xz"
        if not src.exists():
            from userdp.datasets import foursquare_nyc  # the bundled copy

            t = foursquare_nyc().to_arrow()
        else:
            import lzma

            import pyarrow.csv as pcsv

            with lzma.open(src) as fh:
                t = pcsv.read_csv(fh)
        con = duckdb.connect()
        con.register("t", t)
        con.execute(f"""COPY (SELECT CAST(user AS BIGINT) + 10000 * k AS user, venue_id, category_name, lat, lon
                              FROM t, range({copies}) r(k) ORDER BY 1) TO '{path}' (HEADER, DELIMITER ',')""")
    return path


# -- the parts -----------------------------------------------------------------------------------------------------

SETUP = "from userdp import releases\nfrom userdp.data import BoxDomain\nimport duckdb"
BOX = "BoxDomain((40.55, -74.27), (40.99, -73.68))"


def heatmap_part(d: Path, n: int, memory_engine: bool) -> None:
    path = points_file(d, n)
    print(f"heatmap: {n:.0e} points, users in random order ({path.stat().st_size / 2**30:.2f} GB Parquet)")
    floor = measure("import duckdb", f"""duckdb.sql('''
        WITH p AS (SELECT user AS u, least(greatest(CAST(floor((lat - 40.55) / 0.44 * 256) AS BIGINT), 0), 255) * 256
                       + least(greatest(CAST(floor((lon + 74.27) / 0.59 * 256) AS BIGINT), 0), 255) AS b
                   FROM read_parquet('{path}')),
             s AS (SELECT u, count(*) AS n FROM p GROUP BY u)
        SELECT b, n, count(*) AS k FROM p JOIN s USING (u) GROUP BY b, n''').to_arrow_table()""")
    row("floor: DuckDB GROUP BY (cell, user size)", floor, None, "")
    rel = measure(SETUP, f"releases.heatmap('{path}', {BOX}, 256, 1.0, engine='duckdb', rng=1)")
    row("releases.heatmap, DuckDB engine", rel, floor, "<= 1.5x, <= 2 GB, cpu/wall >= 1.6")
    limited = measure(SETUP + "\nfrom userdp.engines.duckdb import DuckDBEngine",
                      f"releases.heatmap('{path}', {BOX}, 256, 1.0, engine=DuckDBEngine(memory_limit='1GB'), rng=1)")
    row("releases.heatmap, DuckDB with memory_limit='1GB'", limited, floor, "<= 1.5x, <= 2 GB")
    auto = measure(SETUP, f"releases.heatmap('{path}', {BOX}, 256, 1.0, rng=1)")
    row("releases.heatmap, engine='auto'", auto, floor, "(auto: DuckDB past 32 MB)")
    if memory_engine:
        mem = measure(SETUP, f"releases.heatmap('{path}', {BOX}, 256, 1.0, engine='memory', rng=1)")
        row("releases.heatmap, memory engine (before)", mem, floor, "")


def pairs_part(d: Path, n: int, memory_engine: bool) -> None:
    path = pairs_file(d, n)
    print(f"pairs: {n:.0e} person-word pairs in random order ({path.stat().st_size / 2**30:.2f} GB Parquet)")
    floor = measure("import duckdb", f"""duckdb.sql('''SELECT user, word, count(*) AS k FROM read_parquet('{path}')
        GROUP BY user, word''').to_arrow_table()""")
    row("floor: DuckDB GROUP BY user, word", floor, None, "")
    kw = "user='user', item='word', engine='duckdb', rng=1"
    r = measure(SETUP, f"releases.distinct('{path}', 1.0, method='matching', {kw})")
    row("releases.distinct (exact, matching)", r, floor, "<= 60 s")
    r = measure(SETUP, f"releases.vocabulary('{path}', 1.0, 1e-6, {kw})")
    row("releases.vocabulary", r, floor, "<= 1.5x")
    r = measure(SETUP, f"releases.key_counts('{path}', 1.0, 1e-6, user='user', key='word', engine='duckdb', rng=1)")
    row("releases.key_counts", r, floor, "<= 1.5x")
    if memory_engine:
        kw = kw.replace("'duckdb'", "'memory'")
        r = measure(SETUP, f"releases.distinct('{path}', 1.0, method='matching', {kw})")
        row("releases.distinct, memory engine (before)", r, floor, "")
        r = measure(SETUP, f"releases.vocabulary('{path}', 1.0, 1e-6, {kw})")
        row("releases.vocabulary, memory engine (before)", r, floor, "")
        r = measure(SETUP, f"releases.key_counts('{path}', 1.0, 1e-6, user='user', key='word', engine='memory', rng=1)")
        row("releases.key_counts, memory engine (before)", r, floor, "")


def itemwise_part(d: Path, n: int, memory_engine: bool) -> None:
    path = items_file(d, n)
    print(f"itemwise: {n:.0e} items, 10 per user, users in random order ({path.stat().st_size / 2**30:.2f} GB)")
    floor = measure("import duckdb", f"""r = duckdb.connect().sql('''SELECT user, item FROM read_parquet('{path}')
        ORDER BY user''').to_arrow_reader(1 << 20)
for b in r:
    pass""")
    row("floor: DuckDB ORDER BY user, read to the end", floor, None, "")
    setup = SETUP + "\nimport numpy as np\nfrom userdp.data import FiniteDomain"
    setup += "\nfrom userdp.metrics import ClusteredMetric"
    r = measure(setup, f"""releases.itemwise('{path}', ClusteredMetric(10, 10, 0.2), FiniteDomain(np.arange(100)), 2.0,
        delta=1e-6, model='central', engine='duckdb', rng=1)""")
    row("releases.itemwise (central, GKRR)", r, floor, "<= 2x, cpu/wall >= 1.6")
    if memory_engine:
        r = measure(setup, f"""releases.itemwise('{path}', ClusteredMetric(10, 10, 0.2), FiniteDomain(np.arange(100)),
            2.0, delta=1e-6, model='central', engine='memory', rng=1)""")
        row("releases.itemwise, memory engine (before)", r, floor, "")


def csv_part(d: Path, engines: list[str]) -> None:
    path = checkins_csv(d)
    print(f"csv: Foursquare check-ins x12 sorted by numeric user id ({path.stat().st_size / 2**20:.0f} MB CSV)")
    calls = {
        "heatmap": f"releases.heatmap('{path}', {BOX}, 256, 1.0, engine=E, rng=1)",
        "distinct": f"releases.distinct('{path}', 1.0, item='venue_id', method='matching', engine=E, rng=1)",
        "vocabulary": f"releases.vocabulary('{path}', 1.0, 1e-6, item='category_name', engine=E, rng=1)",
        "key_counts": f"releases.key_counts('{path}', 1.0, 1e-6, key='category_name', engine=E, rng=1)",
    }
    for name, call in calls.items():
        base = measure(SETUP, call.replace("engine=E", "engine='memory'"))
        row(f"{name}, memory", base, None, "")
        for e in engines:
            row(f"{name}, {e}", measure(SETUP, call.replace("engine=E", f"engine={e!r}")), base, "<= 1.3x")


def spark_part(d: Path, n: int) -> None:
    path = points_file(d, n)
    print(f"spark: the heatmap of {n:.0e} points in random user order on Spark local[2] against the memory engine")
    base = measure(SETUP, f"releases.heatmap('{path}', {BOX}, 256, 1.0, engine='memory', rng=1)")
    row("floor: releases.heatmap, memory engine", base, None, "")
    setup = SETUP + """
from pyspark.sql import SparkSession
from userdp.engines.spark import SparkEngine
spark = (SparkSession.builder.master('local[2]').config('spark.ui.enabled', 'false')
         .config('spark.driver.memory', '4g').config('spark.ui.showConsoleProgress', 'false')
         .config('spark.sql.shuffle.partitions', '8').getOrCreate())
spark.sparkContext.setLogLevel('ERROR')
E = SparkEngine(spark)
E.spark.range(1).count()"""  # the session is up before the clock starts; the release reads the file itself
    r = measure(setup, f"releases.heatmap('{path}', {BOX}, 256, 1.0, engine=E, rng=1)")
    row("releases.heatmap, Spark local[2]", r, base, "<= 5x (cpu/wall: the driver only)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--points", type=float, default=1e7)
    ap.add_argument("--pairs", type=float, default=1e7)
    ap.add_argument("--items", type=float, default=1e7)
    ap.add_argument("--only", nargs="*", default=["heatmap", "pairs", "itemwise", "csv", "spark"])
    ap.add_argument("--engines", nargs="*", default=["duckdb", "chunked"], help="engines of the CSV part")
    ap.add_argument("--memory-engine", action="store_true", help="also time the releases on the memory engine")
    ap.add_argument("--dir", default=None, help="where the files are written (kept for the next run)")
    a = ap.parse_args()
    d = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="userdp-bench-"))
    d.mkdir(parents=True, exist_ok=True)
    print(f"bench_engines: {os.cpu_count()} cores; files in {d}")
    if "heatmap" in a.only:
        heatmap_part(d, int(a.points), a.memory_engine)
    if "pairs" in a.only:
        pairs_part(d, int(a.pairs), a.memory_engine)
    if "itemwise" in a.only:
        itemwise_part(d, int(a.items), a.memory_engine)
    if "csv" in a.only:
        csv_part(d, a.engines)
    if "spark" in a.only:
        spark_part(d, int(a.points))


if __name__ == "__main__":
    main()

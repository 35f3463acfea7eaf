"""Benchmark: 10 million check-in rows -- heatmap (Delta = 256) and PrivEMDLinear (average distance to a
point, local model) through `userdp.releases` on the memory and chunked engines and on Spark local[1] and
local[2]. "load" is reading the file (memory, Spark: cached); the chunked engine re-reads it per release.

Run: python benchmarks/bench_spark.py [--rows 10000000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from userdp import releases
from userdp.data import BoxDomain, UserDataset
from userdp.metrics import GreatCircleMetric

BOX = BoxDomain.latlon(40.5, 41.0, -74.3, -73.65)
POINT = (40.758, -73.9855)


def make_data(rows: int, path: Path) -> None:
    rng = np.random.default_rng(0)
    users = rng.integers(0, rows // 20, rows)
    centers = np.column_stack([rng.uniform(40.6, 40.9, 500), rng.uniform(-74.1, -73.8, 500)])
    pts = centers[rng.integers(0, 500, rows)] + rng.normal(scale=0.005, size=(rows, 2))
    pts[:, 0] = np.clip(pts[:, 0], 40.5, 41.0)
    pts[:, 1] = np.clip(pts[:, 1], -74.3, -73.65)
    order = np.argsort(users, kind="stable")  # grouped by user: the chunked engine reads runs of whole users
    pq.write_table(pa.table({"user": users[order], "lat": pts[order, 0], "lon": pts[order, 1]}), path)


QUERY, ELL, _ = releases.distance_query(GreatCircleMetric(BOX), POINT)


def memory_run(path: Path) -> tuple[float, float, float]:
    t = time.perf_counter()
    ds = UserDataset.from_file(path, user="user", items=["lat", "lon"], domain=BOX)
    t_load = time.perf_counter() - t
    t = time.perf_counter()
    releases.heatmap(ds, BOX, 256, 1.0)
    t_heat = time.perf_counter() - t
    t = time.perf_counter()
    releases.linear(ds, QUERY, ELL, 25.0)
    return t_load, t_heat, time.perf_counter() - t


def chunked_run(path: Path) -> tuple[float, float, float]:
    from userdp.engines import ChunkedEngine

    eng = ChunkedEngine(1_000_000)
    t = time.perf_counter()
    releases.heatmap(path, BOX, 256, 1.0, engine=eng)
    t_heat = time.perf_counter() - t
    t = time.perf_counter()
    releases.linear(path, QUERY, ELL, 25.0, points=("lat", "lon"), engine=eng)
    return 0.0, t_heat, time.perf_counter() - t


def spark_run(path: Path, master: str) -> tuple[float, float, float]:
    from pyspark.sql import SparkSession

    from userdp.engines.spark import SparkEngine

    t = time.perf_counter()
    spark = (
        SparkSession.builder.master(master)
        .appName("bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "6g")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "16")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    eng = SparkEngine(spark)
    df = eng.read(str(path)).cache()
    df.count()
    t_load = time.perf_counter() - t
    t = time.perf_counter()
    releases.heatmap(df, BOX, 256, 1.0, engine=eng)
    t_heat = time.perf_counter() - t
    t = time.perf_counter()
    releases.linear(df, QUERY, ELL, 25.0, points=("lat", "lon"), engine=eng)
    t_lin = time.perf_counter() - t
    spark.stop()
    return t_load, t_heat, t_lin


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "checkins.parquet"
        make_data(args.rows, path)
        print(f"{args.rows:,} rows, {args.rows // 20:,} users")
        print(f"{'engine':<16} {'load (s)':>9} {'heatmap (s)':>12} {'PrivEMDLinear (s)':>18}")
        r = memory_run(path)
        print(f"{'memory (NumPy)':<16} {r[0]:>9.1f} {r[1]:>12.1f} {r[2]:>18.1f}")
        r = chunked_run(path)
        print(f"{'chunked':<16} {'-':>9} {r[1]:>12.1f} {r[2]:>18.1f}")
        for master in ("local[1]", "local[2]"):
            r = spark_run(path, master)
            print(f"{'Spark ' + master:<16} {r[0]:>9.1f} {r[1]:>12.1f} {r[2]:>18.1f}")


if __name__ == "__main__":
    main()

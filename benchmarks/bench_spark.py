"""Benchmark: 10 million check-in rows -- heatmap (Delta = 256) and PrivEMDLinear (average distance to a
point, local model) with the local engine and with Spark local[1] and local[2].

Run: python benchmarks/bench_spark.py [--rows 10000000]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from userdp import releases
from userdp.data import BoxDomain, UserDataset
from userdp.metrics import haversine_km

BOX = BoxDomain.latlon(40.5, 41.0, -74.3, -73.65)
POINT = (40.758, -73.9855)


def make_data(rows: int, path: Path) -> None:
    rng = np.random.default_rng(0)
    users = rng.integers(0, rows // 20, rows)
    centers = np.column_stack([rng.uniform(40.6, 40.9, 500), rng.uniform(-74.1, -73.8, 500)])
    pts = centers[rng.integers(0, 500, rows)] + rng.normal(scale=0.005, size=(rows, 2))
    pts[:, 0] = np.clip(pts[:, 0], 40.5, 41.0)
    pts[:, 1] = np.clip(pts[:, 1], -74.3, -73.65)
    pq.write_table(pa.table({"user": users, "lat": pts[:, 0], "lon": pts[:, 1]}), path)


def local_run(path: Path) -> tuple[float, float, float]:
    t = time.perf_counter()
    ds = UserDataset.from_file(path, user="user", items=["lat", "lon"], domain=BOX)
    t_load = time.perf_counter() - t
    t = time.perf_counter()
    releases.heatmap(ds, BOX, 256, 1.0)
    t_heat = time.perf_counter() - t
    t = time.perf_counter()
    d = haversine_km(ds.items[:, 0], ds.items[:, 1], *POINT) / 80.0
    releases.linear_mean(ds, d[:, None], 1.0, 25.0)
    return t_load, t_heat, time.perf_counter() - t


def spark_run(path: Path, master: str) -> tuple[float, float, float]:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

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
    lat1, lon1 = F.radians(F.col("lat")), F.radians(F.col("lon"))
    lat2, lon2 = math.radians(POINT[0]), math.radians(POINT[1])
    a = F.sin((F.lit(lat2) - lat1) / 2) ** 2 + F.cos(lat1) * math.cos(lat2) * F.sin((F.lit(lon2) - lon1) / 2) ** 2
    dist = 2 * 6371.0088 * F.asin(F.sqrt(a)) / 80.0
    releases.linear_mean(df.withColumn("d", dist), ["d"], 1.0, 25.0, engine=eng)
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
        r = local_run(path)
        print(f"{'local (NumPy)':<16} {r[0]:>9.1f} {r[1]:>12.1f} {r[2]:>18.1f}")
        for master in ("local[1]", "local[2]"):
            r = spark_run(path, master)
            print(f"{'Spark ' + master:<16} {r[0]:>9.1f} {r[1]:>12.1f} {r[2]:>18.1f}")


if __name__ == "__main__":
    main()

from __future__ import annotations

from pathlib import Path

import pytest

from userdp.noise import RandomSource

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"


@pytest.fixture
def rng() -> RandomSource:
    """A seeded source: tests are reproducible (never use seeds for real releases)."""
    return RandomSource(20261122)


@pytest.fixture(scope="session")
def spark_engine():
    """One local Spark session for the whole run: 2 threads, up to 4 attempts per task (retries)."""
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    from userdp.engines.spark import SparkEngine

    spark = (
        SparkSession.builder.master("local[2,4]")
        .appName("userdp-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    yield SparkEngine(spark)
    spark.stop()

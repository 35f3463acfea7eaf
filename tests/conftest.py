from __future__ import annotations

from pathlib import Path

import pytest

from userdp.noise import RandomSource

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"


@pytest.fixture
def rng() -> RandomSource:
    """A seeded source: tests are reproducible (never use seeds for real releases)."""
    return RandomSource(20261122)


def pytest_collection_modifyitems(config, items):
    """Tests that use the shared SparkSession are marked ``spark`` and kept on one xdist worker (one JVM)."""
    for item in items:
        if "spark_engine" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
            item.add_marker(pytest.mark.xdist_group("spark"))


@pytest.fixture(scope="session")
def spark_engine():
    """One local Spark session for the whole run: 2 threads, up to 4 attempts per task (retries), 4 shuffle
    partitions, and adaptive execution off, so that small shuffles are not merged into one partition and a
    per-user step that only works when a user's rows share a partition by chance fails here."""
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    from userdp.engines.spark import SparkEngine

    spark = (
        SparkSession.builder.master("local[2,4]")
        .appName("userdp-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.adaptive.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    yield SparkEngine(spark)
    spark.stop()

"""The Spark engine gives the local engine's results for the deterministic parts, and a retried task does
not change what is released."""

from __future__ import annotations

import numpy as np
import pytest

pyspark = pytest.importorskip("pyspark")

from tests import cli_argv  # noqa: E402
from userdp.data import BoxDomain, FiniteDomain, UserDataset  # noqa: E402
from userdp.distinct import dc_matching, person_element_graph  # noqa: E402
from userdp.engines import LocalEngine  # noqa: E402
from userdp.engines.spark import SparkEngine  # noqa: E402
from userdp.errors import DataError  # noqa: E402
from userdp.heatmaps import user_grid_sum  # noqa: E402


@pytest.fixture(scope="module")
def engine():
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2,4]")  # 2 threads, up to 4 attempts per task (retries)
        .appName("userdp-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    yield SparkEngine(spark)
    spark.stop()


@pytest.fixture(scope="module")
def records():
    rng = np.random.default_rng(0)
    n = 300
    users = np.repeat(np.arange(n), rng.integers(1, 12, n))
    words = np.array([f"w{i}" for i in range(40)])
    items = words[rng.integers(0, 40, users.size)]
    lat = 40.70 + 0.05 * rng.random(users.size)
    lon = -74.0 + 0.05 * rng.random(users.size)
    return users, items, lat, lon, words


def _df(engine, records):
    users, items, lat, lon, _ = records
    import pandas as pd

    return engine.spark.createDataFrame(pd.DataFrame({"user": users, "item": items, "lat": lat, "lon": lon}))


def test_histogram_sum_equals_local(engine, records):
    users, items, _, _, words = records
    ds = UserDataset.from_arrays(users, items, domain=FiniteDomain(words))
    local = LocalEngine().histogram_sum(ds)
    spark = engine.histogram_sum(_df(engine, records), "user", "item", words)
    assert np.allclose(local, spark)
    with pytest.raises(DataError, match="not in the declared domain"):
        engine.histogram_sum(_df(engine, records), "user", "item", words[:5])


def test_grid_sum_equals_local(engine, records):
    users, _, lat, lon, _ = records
    box = BoxDomain.latlon(40.69, 40.76, -74.01, -73.94)
    ds = UserDataset.from_arrays(users, np.column_stack([lat, lon]), domain=box)
    assert np.allclose(user_grid_sum(ds, 64, box), engine.grid_sum(_df(engine, records), "user", "lat", "lon", box, 64))
    small = BoxDomain.latlon(40.72, 40.76, -74.01, -73.94)
    with pytest.raises(DataError, match="outside"):
        engine.grid_sum(_df(engine, records), "user", "lat", "lon", small, 64)
    kept = engine.grid_sum(_df(engine, records), "user", "lat", "lon", small, 64, drop_outside=True)
    assert np.allclose(kept, user_grid_sum(ds, 64, small, drop_outside=True))


def test_per_user_mean_equals_local(engine, records):
    users, _, lat, lon, _ = records
    ds = UserDataset.from_arrays(users, np.column_stack([lat, lon]))
    local = LocalEngine().per_user_mean(ds, ds.items)
    assert np.allclose(engine.per_user_mean(_df(engine, records), "user", ["lat", "lon"]), local)
    total, n = engine.per_user_mean(_df(engine, records), "user", ["lat", "lon"], collect=False)
    assert n == ds.n_users and np.allclose(total, local.sum(axis=0))


def test_edges_equal_local(engine, records):
    users, items, _, _, _ = records
    g_local = person_element_graph(UserDataset.from_arrays(users, items))
    g_spark = engine.edges(_df(engine, records), "user", "item")
    assert g_spark.n_edges == g_local.n_edges and np.array_equal(g_spark.degrees(), g_local.degrees())
    assert np.array_equal(dc_matching(g_spark, 12), dc_matching(g_local, 12))
    with pytest.raises(DataError, match="exceed the driver limit"):
        SparkEngine(engine.spark, max_edges=10).edges(_df(engine, records), "user", "item")


def test_sampling_equals_local_keyed(engine, records):
    users, _, lat, lon, _ = records
    ds = UserDataset.from_arrays(users, np.column_stack([lat, lon]))
    local = LocalEngine().sample_keyed(ds, 7, seed=42)
    sdf = engine.sample_with_replacement(_df(engine, records), "user", ["lat", "lon"], 7, seed=42).toPandas()
    sdf = sdf.sort_values(["user", "lat", "lon"], kind="stable")
    loc = np.column_stack([np.repeat(local.user_ids, 7), local.items])
    loc = loc[np.lexsort((loc[:, 2], loc[:, 1], loc[:, 0]))]
    assert np.allclose(sdf[["user", "lat", "lon"]].to_numpy(dtype=float), loc)


def test_retried_task_does_not_change_the_release(engine, records):
    """A task that fails on its first attempt is retried by Spark; the per-user samples and randomized items
    are the same as in a run without failures (they depend only on the driver seed and the user key)."""
    from pyspark import TaskContext

    df = _df(engine, records)

    def flaky(batches):
        if TaskContext.get().attemptNumber() == 0:
            raise RuntimeError("injected failure on the first attempt")
        yield from batches

    failing = df.mapInPandas(flaky, df.schema)
    a = engine.sample_with_replacement(df, "user", ["lat", "lon"], 5, seed=7).toPandas()
    b = engine.sample_with_replacement(failing, "user", ["lat", "lon"], 5, seed=7).toPandas()
    key = ["user", "lat", "lon"]
    assert a.sort_values(key).reset_index(drop=True).equals(b.sort_values(key).reset_index(drop=True))

    from userdp.dem import GKRR
    from userdp.metrics import ClusteredMetric

    words = records[4]
    gk = GKRR(ClusteredMetric(8, 5, 0.2), 1.0)
    r1 = engine.randomize_items(df, "user", "item", gk, words, seed=11).toPandas().sort_values(["user", "item"])
    r2 = engine.randomize_items(failing, "user", "item", gk, words, seed=11).toPandas().sort_values(["user", "item"])
    assert r1.reset_index(drop=True).equals(r2.reset_index(drop=True))
    r3 = engine.randomize_items(df, "user", "item", gk, words, seed=12).toPandas().sort_values(["user", "item"])
    assert not r1.reset_index(drop=True).equals(r3.reset_index(drop=True))
    assert len(r1) == len(records[0])


def test_missing_columns(engine, records):
    with pytest.raises(DataError, match="not found"):
        engine.histogram_sum(_df(engine, records), "person", "item", records[4])


def test_releases_api_and_cli_on_spark(engine, records, tmp_path, capsys):
    """The same releases through the engine= API and the CLI's --engine spark."""
    import json

    from userdp import releases
    from userdp.cli import main

    users, items, lat, lon, _ = records
    df = _df(engine, records)
    box = BoxDomain.latlon(40.69, 40.76, -74.01, -73.94)
    rel = releases.heatmap(df, box, 32, 1.0, engine=engine, rng=1)
    local = releases.heatmap(
        UserDataset.from_arrays(users, np.column_stack([lat, lon]), domain=box), box, 32, 1.0, rng=1
    )
    assert np.allclose(rel.value, local.value)  # same aggregate, same seeded noise
    d1 = releases.distinct(df, 1.0, engine=engine, rng=2)
    d2 = releases.distinct(UserDataset.from_arrays(users, items), 1.0, rng=2)
    assert d1.value == d2.value and d1.extras["bound"] == d2.extras["bound"]
    path = tmp_path / "pts.csv"
    import pandas as pd

    pd.DataFrame({"user": users, "text": items, "lat": lat, "lon": lon}).to_csv(path, index=False)
    argv = cli_argv.heatmap(path, "--bbox", cli_argv.BBOX, "--resolution", "32", "--epsilon", "1")
    assert main([*argv, "--engine", "spark", "--out", str(tmp_path / "h.png"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["engine"] == "spark"
    argv = cli_argv.distinct(path, "user", "text", "--tokenize", "--epsilon", "1", "--engine", "spark")
    assert main([*argv, "--json", "--seed", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["lower_bound"] <= 40


def test_dem_cli_on_spark(engine, tmp_path, capsys):
    import json

    import pandas as pd

    from userdp.cli import main

    rng = np.random.default_rng(3)
    labels = [f"{b}{c}" for b in "ABC" for c in range(4)]
    (tmp_path / "domain.csv").write_text("item,cluster\n" + "".join(f"{x},{x[0]}\n" for x in labels))
    users = np.repeat(np.arange(100), 10)
    pd.DataFrame(
        {
            "user": users,
            "item": np.array(labels)[rng.integers(0, 12, users.size)],
            "lat": 40.7 + 0.05 * rng.random(users.size),
            "lon": -74.0 + 0.05 * rng.random(users.size),
        }
    ).to_csv(tmp_path / "d.csv", index=False)
    data = tmp_path / "d.csv"
    base = ["--alpha", "20", "--engine", "spark", "--json", "--seed", "1"]
    assert main(cli_argv.clustered("freq", data, tmp_path / "domain.csv", *base)) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["engine"] == "spark" and sum(out["estimate"].values()) == pytest.approx(1.0)
    assert main(cli_argv.greatcircle(data, *base)) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["unit"] == "km" and 0 < out["estimate"][0] < 30


def test_equal_sizes_on_spark(engine, records):
    """The bounded releases' size check on executors: the same answer as UserDataset.require_equal_sizes."""
    df = _df(engine, records)
    lo, hi, n = engine.user_sizes(df, "user")
    local = UserDataset.from_arrays(np.asarray(records[0]), np.asarray(records[1]))
    assert (lo, hi, n) == (local.counts().min(), local.counts().max(), local.n_users)
    if lo != hi:
        with pytest.raises(DataError, match="BoundedEMDReduction"):
            engine.require_equal_sizes(df, "user")
    sampled = engine.sample_with_replacement(df, "user", ["item"], 3, seed=1)
    assert engine.require_equal_sizes(sampled, "user") == 3

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
from userdp.noise import KeyedStreams  # noqa: E402


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
    """The same master gives the same per-user samples with replacement on Spark and locally; an unseeded
    (os.urandom) master is used, so this also holds for real releases, not only for seeded demos."""
    users, _, lat, lon, _ = records
    ds = UserDataset.from_arrays(users, np.column_stack([lat, lon]))
    streams = KeyedStreams()
    assert not streams.seeded
    local = LocalEngine().sample_keyed(ds, 7, rng=streams)
    sdf = engine.sample_with_replacement(_df(engine, records), "user", ["lat", "lon"], 7, rng=streams).toPandas()
    sdf = sdf.sort_values(["user", "lat", "lon"], kind="stable")
    loc = np.column_stack([np.repeat(local.user_ids, 7), local.items])
    loc = loc[np.lexsort((loc[:, 2], loc[:, 1], loc[:, 0]))]
    assert np.allclose(sdf[["user", "lat", "lon"]].to_numpy(dtype=float), loc)
    other = LocalEngine().sample_keyed(ds, 7, rng=KeyedStreams())  # another master: other samples
    assert not np.array_equal(other.items, local.items)


def test_item_randomization_equals_local_keyed(engine, records):
    """The same master gives the same GKRR-randomized items per user on Spark and in
    LocalEngine.randomize_keyed (string user keys here; the sampling test above uses integer keys)."""
    from userdp.dem import GKRR
    from userdp.metrics import ClusteredMetric

    users, items, _, _, words = records
    users = np.array([f"u{u}" for u in users])
    gk = GKRR(ClusteredMetric(8, 5, 0.2), 1.0)
    streams = KeyedStreams()
    ds = UserDataset.from_arrays(users, items, domain=FiniteDomain(words))
    local = LocalEngine().randomize_keyed(ds, gk, rng=streams)
    assert np.array_equal(local.counts(), ds.counts())
    import pandas as pd

    df = engine.spark.createDataFrame(pd.DataFrame({"user": users, "item": items}))
    spark = engine.randomize_items(df, "user", "item", gk, words, rng=streams).toPandas()
    loc = sorted(zip(np.repeat(local.user_ids, local.counts()).tolist(), words[local.items].tolist(), strict=True))
    assert sorted(zip(spark["user"].tolist(), spark["item"].tolist(), strict=True)) == loc
    assert not np.array_equal(local.items, ds.items)  # GKRR at alpha0 = 1 changes many items
    again = LocalEngine().randomize_keyed(ds, gk, rng=KeyedStreams())
    assert not np.array_equal(again.items, local.items)


def test_keyed_operations_refuse_user_keys_without_an_encoding(engine):
    import datetime

    import pandas as pd

    df = engine.spark.createDataFrame(pd.DataFrame({"user": [datetime.date(2024, 1, 1)] * 2, "item": ["a", "b"]}))
    with pytest.raises(DataError, match="user column"):
        engine.sample_with_replacement(df, "user", ["item"], 2)
    with pytest.raises(DataError, match="user column"):
        engine.randomize_items(df, "user", "item", None, np.array(["a", "b"]))


def test_retried_task_does_not_change_the_release(engine, records):
    """A task that fails on its first attempt is retried by Spark; the per-user samples and randomized items
    are the same as in a run without failures (they depend only on the master secret and the user key)."""
    from pyspark import TaskContext

    df = _df(engine, records)

    def flaky(batches):
        if TaskContext.get().attemptNumber() == 0:
            raise RuntimeError("injected failure on the first attempt")
        yield from batches

    failing = df.mapInPandas(flaky, df.schema)
    streams = KeyedStreams()
    a = engine.sample_with_replacement(df, "user", ["lat", "lon"], 5, rng=streams).toPandas()
    b = engine.sample_with_replacement(failing, "user", ["lat", "lon"], 5, rng=streams).toPandas()
    key = ["user", "lat", "lon"]
    assert a.sort_values(key).reset_index(drop=True).equals(b.sort_values(key).reset_index(drop=True))

    from userdp.dem import GKRR
    from userdp.metrics import ClusteredMetric

    words = records[4]
    gk = GKRR(ClusteredMetric(8, 5, 0.2), 1.0)
    rows = ["user", "item"]
    r1 = engine.randomize_items(df, "user", "item", gk, words, rng=streams).toPandas().sort_values(rows)
    r2 = engine.randomize_items(failing, "user", "item", gk, words, rng=streams).toPandas().sort_values(rows)
    assert r1.reset_index(drop=True).equals(r2.reset_index(drop=True))
    r3 = engine.randomize_items(df, "user", "item", gk, words).toPandas().sort_values(rows)
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


def _clustered_files(tmp_path):
    """A (user, item, lat, lon) CSV of 100 users with 10 records each and its public clustered domain file."""
    import pandas as pd

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
    return tmp_path / "d.csv", tmp_path / "domain.csv"


def test_dem_cli_on_spark(engine, tmp_path, capsys):
    import json

    from userdp.cli import main

    data, domain = _clustered_files(tmp_path)
    base = ["--alpha", "20", "--engine", "spark", "--json", "--seed", "1"]
    assert main(cli_argv.clustered("freq", data, domain, *base)) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["engine"] == "spark" and sum(out["estimate"].values()) == pytest.approx(1.0)
    assert main(cli_argv.greatcircle(data, *base)) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["unit"] == "km" and 0 < out["estimate"][0] < 30


def test_cli_spark_master_comes_from_urandom_and_is_never_shown(engine, tmp_path, capfd, monkeypatch):
    """`userdp freq --engine spark --samples S --json` without --seed: the per-user randomness (sampling and
    GKRR on the executors) is a function of os.urandom(32) alone -- two runs under the same fixed 32-byte
    os.urandom output release the same estimate -- and that master appears nowhere in stdout or stderr."""
    import base64
    import json
    import os

    from userdp.cli import main

    master = bytes(range(0xA0, 0xC0))
    real = os.urandom
    monkeypatch.setattr(os, "urandom", lambda n: master if n == 32 else real(n))
    data, domain = _clustered_files(tmp_path)
    argv = cli_argv.clustered(
        "freq", data, domain, "--alpha", "20", "--engine", "spark", "--json", "--samples", "4", "--delta", "1e-6"
    )
    runs = []
    for _ in range(2):
        assert main(argv) == 0
        captured = capfd.readouterr()
        text = captured.out + captured.err
        for shown in (master.hex(), master.hex().upper(), repr(master), base64.b64encode(master).decode()):
            assert shown not in text
        out = json.loads(captured.out)
        assert "warning" not in out  # an unseeded (real) release
        runs.append(out["estimate"])
    assert runs[0] == runs[1]


def test_equal_sizes_on_spark(engine, records):
    """The bounded releases' size check on executors: the same answer as UserDataset.require_equal_sizes."""
    df = _df(engine, records)
    lo, hi, n = engine.user_sizes(df, "user")
    local = UserDataset.from_arrays(np.asarray(records[0]), np.asarray(records[1]))
    assert (lo, hi, n) == (local.counts().min(), local.counts().max(), local.n_users)
    if lo != hi:
        with pytest.raises(DataError, match="BoundedEMDReduction"):
            engine.require_equal_sizes(df, "user")
    sampled = engine.sample_with_replacement(df, "user", ["item"], 3)
    assert engine.require_equal_sizes(sampled, "user") == 3

"""The Spark engine: its per-user steps gather each person's rows from every partition (checked against brute
force, tests/engines/brute.py, on input spread over four partitions), it gives the in-memory engine's results
bit for bit (aggregates and keyed per-user randomness), and a retried task does not change what is released.

The default tier keeps the per-user bounding and grouping checks (several partitions, brute force); the full
comparison with the other engines and the CLI runs on Spark are marked ``slow`` (``pytest -m ""`` runs them).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

pyspark = pytest.importorskip("pyspark")

from tests import cli_argv  # noqa: E402
from tests.engines import brute  # noqa: E402
from userdp.data import BoxDomain, FiniteDomain, UserDataset  # noqa: E402
from userdp.distinct import dc_matching, person_element_graph  # noqa: E402
from userdp.engines import Columns, MemoryEngine  # noqa: E402
from userdp.errors import DataError  # noqa: E402
from userdp.heatmaps import user_grid_sum  # noqa: E402
from userdp.noise import KeyedStreams, keyed_keep  # noqa: E402

BOX = BoxDomain.latlon(40.69, 40.76, -74.01, -73.94)
SMALL_BOX = BoxDomain.latlon(40.72, 40.76, -74.01, -73.94)  # some points, and some persons, outside


@pytest.fixture(scope="module")
def engine(spark_engine):
    return spark_engine


@pytest.fixture(scope="module")
def records():
    rng = np.random.default_rng(0)
    n = 80
    users = np.repeat(np.arange(n), rng.integers(1, 12, n))
    words = np.array([f"w{i}" for i in range(40)])
    items = words[rng.integers(0, 40, users.size)]
    lat = 40.70 + 0.05 * rng.random(users.size)
    lon = -74.0 + 0.05 * rng.random(users.size)
    return users, items, lat, lon, words


def _spread(df) -> tuple[int, float]:
    """The number of partitions of ``df`` and the share of the persons holding several rows whose rows lie in
    more than one partition."""
    from pyspark.sql import functions as F

    per = df.withColumn("_p", F.spark_partition_id()).groupBy("user")
    rows = per.agg(F.count(F.lit(1)).alias("n"), F.countDistinct("_p").alias("parts")).filter("n > 1").collect()
    return df.rdd.getNumPartitions(), float(np.mean([r["parts"] > 1 for r in rows]))


@pytest.fixture(scope="module")
def frame(engine, records):
    """The records as one DataFrame (made once for the module), spread round-robin over 4 partitions: nearly
    every person's rows lie in several partitions, so a per-user step that does not gather them first fails."""
    import pandas as pd

    users, items, lat, lon, _ = records
    pdf = pd.DataFrame({"user": users, "item": items, "lat": lat, "lon": lon})
    df = engine.spark.createDataFrame(pdf).repartition(4).cache()
    parts, spread = _spread(df)
    assert parts == 4 and spread > 0.9
    yield df
    df.unpersist()


ITEMS = Columns("user", "item")
POINTS = Columns("user", points=("lat", "lon"))


def _histogram_in_batches_of(engine, data, rows: int) -> np.ndarray:
    """The sum of per-person distributions with Arrow batches of ``rows`` rows on the executors (a partition's
    persons cut between batches, to be carried whole to the next one)."""
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = engine.spark.conf.get(key)
    engine.spark.conf.set(key, str(rows))
    try:
        return engine.histogram_sum(data, True)
    finally:
        engine.spark.conf.set(key, before)


# --------------------------------------------------------------------------------------------
# Default tier: per-user grouping and bounding on several partitions, against brute force
# --------------------------------------------------------------------------------------------


def test_per_user_aggregates_gather_a_person_s_rows_from_every_partition(engine, records, frame):
    """Each person's rows, spread over four partitions (and, with batches of 3 rows, over several Arrow batches of
    a partition), are one person: the sums of per-person distributions over the words and over a grid (points
    outside the box dropped), the per-person means and the person sizes equal the brute-force ones. Catches
    per-user steps run on the partitions as they are (no shuffle by person), a carry between batches that
    splits a person, partitions' count tables merged other than by their sum, and sizes whose minimum is not
    the minimum."""
    users, items, lat, lon, words = records
    data = engine.load(frame, ITEMS, FiniteDomain(words))
    want = brute.histogram_sum(users, items, words, True)
    assert np.allclose(engine.histogram_sum(data, True), want, rtol=0, atol=1e-12)
    assert np.allclose(_histogram_in_batches_of(engine, data, 3), want, rtol=0, atol=1e-12)
    pts = np.column_stack([lat, lon])
    grid = engine.grid_sum(engine.load(frame, POINTS), SMALL_BOX, (6, 5), drop_outside=True)
    assert np.allclose(grid, brute.grid_sum(users, pts, SMALL_BOX, (6, 5)), rtol=0, atol=1e-12)
    _, means = brute.per_user_mean(users, pts, np.sin)
    assert np.allclose(engine.per_user_mean(engine.load(frame, POINTS), np.sin), means, rtol=1e-12, atol=0)
    sizes = engine.user_sizes(data)
    assert (sizes.smallest, sizes.largest, sizes.users) == brute.user_sizes(users)
    assert sizes.smallest < sizes.largest
    with pytest.raises(DataError, match="BoundedEMDReduction"):
        sizes.equal()


def _kept_and_held(k):
    """Weights of a person keeping ``k`` items: ``k`` itself (so a sum shows the kept count) and 1."""
    k = np.asarray(k, dtype=np.int64)
    return np.column_stack([k, np.ones(k.size, dtype=np.int64)])


def test_bounded_item_sums_on_spark_equal_the_definition(engine):
    """The set union's bounding on the executors, on persons spread over four partitions: a person keeps all of
    its distinct items up to ``cap``, else the ``cap`` positions (labels in text order) of the smallest words
    of its keyed stream -- keyed by the person's own key (integers here, not their text) -- and each kept item
    gets the weights of the kept count; computed per person in the test."""
    import pandas as pd

    rng = np.random.default_rng(12)
    users, items = [], []
    for p in range(30):
        held = rng.choice([2, 9, 10, 11, 33, 100, 101, 7], int(rng.integers(1, 9)), replace=False)
        users += [p * 3 + 1] * (held.size + 1)
        items += held.tolist() + [int(held[0])]  # one item held twice
    df = engine.spark.createDataFrame(pd.DataFrame({"user": users, "item": items})).repartition(4)
    cap, streams = 3, KeyedStreams(21)
    got = engine.bounded_item_sums(engine.load(df, ITEMS), cap, partial(keyed_keep, streams, cap=cap), _kept_and_held)
    want = brute.item_sums(users, items, cap, lambda p, n: brute.kept_positions(streams, p, n, cap), _kept_and_held)
    assert brute.item_sums_of(got) == want
    gone = np.array(["10", "7", "not held"], dtype=object)  # DP-SIPS's later rounds: broadcast to the executors
    got = engine.bounded_item_sums(engine.load(df, ITEMS), cap, partial(keyed_keep, streams, cap=cap), _kept_and_held,
                                   exclude=gone)  # fmt: skip
    want = brute.item_sums(users, items, cap, lambda p, n: brute.kept_positions(streams, p, n, cap), _kept_and_held,
                           gone)  # fmt: skip
    assert brute.item_sums_of(got) == want and not {"10", "7"} & set(want)


def test_edges_and_key_records_on_spark_are_the_persons_pairs(engine, records, frame):
    """The person-element edges (each pair once) and the records per person and key (one entry per pair, the
    person's records of it added), on persons spread over four partitions, as counted in the test."""
    users, items, _, _, _ = records
    assert sorted(brute.edges_of(engine.edges(engine.load(frame, ITEMS)))) == sorted(brute.edges(users, items))
    want = brute.key_records(users, items)
    assert brute.key_records_of(engine.key_records(engine.load(frame, ITEMS))) == want
    assert max(want.values()) > 1


def _rows(data) -> list:
    """Sorted (user, item...) rows of a Spark table or a dataset."""
    if isinstance(data, UserDataset):
        users = np.repeat(data.user_ids, data.counts()).tolist()
        items = data.items.tolist() if data.is_points else data.domain.labels[data.items].tolist()
        return sorted(zip(users, map(repr, items), strict=True))
    pdf = data.df.toPandas()
    cols = data.columns
    items = pdf[list(cols.points)].to_numpy().tolist() if cols.points else pdf[cols.item].tolist()
    return sorted(zip(pdf[cols.user].tolist(), map(repr, items), strict=True))


def test_keyed_draws_on_spark_are_each_person_s_own(engine, records, frame):
    """Sampling with replacement and GKRR on the executors, persons spread over four partitions: each person's
    samples are its sorted points at the draws of its own sampling stream, and its randomized items are its
    sorted codes through GKRR with its own randomization stream (computed per person in the test), with an
    unseeded (os.urandom) master, as real releases use."""
    from userdp.dem import GKRR
    from userdp.metrics import ClusteredMetric

    users, items, lat, lon, words = records
    streams = KeyedStreams()
    assert not streams.seeded
    spark = engine.sample_keyed(engine.load(frame, POINTS), 5, streams)
    groups = brute.by_person(users, np.column_stack([lat, lon]))
    want = sorted((p, repr(list(x))) for p, pts in groups.items() for x in brute.sampled(streams, p, pts, 5))
    assert _rows(spark) == want
    dom = FiniteDomain(words)
    gk = GKRR(ClusteredMetric(8, 5, 0.2), 1.0)
    randomized = engine.histogram_sum(engine.randomize_keyed(engine.load(frame, ITEMS, dom), gk, streams), False)
    codes = brute.by_person(users, dom.encode(items))
    assert randomized.tolist() == brute.randomized_counts(streams, codes, gk, len(words)).tolist()


def test_refusals_on_spark(engine, records, frame):
    """Points outside the box (without drop_outside) are refused by the engine; items outside the declared
    domain are dropped on the executors, person by person, as in memory (never refused)."""
    users, items, _, _, words = records
    small = FiniteDomain(words[:5])
    got = engine.histogram_sum(engine.load(frame, ITEMS, small), normalize=False)
    mem = MemoryEngine()
    assert np.array_equal(got, mem.histogram_sum(UserDataset.from_arrays(users, items, small), False))
    # every aggregate sees the table after the drop: the sizes (m and n of a bounded release) too
    assert engine.user_sizes(engine.load(frame, ITEMS, small)) == mem.user_sizes(
        UserDataset.from_arrays(users, items, small)
    )
    with pytest.raises(DataError, match="outside"):
        engine.grid_sum(engine.load(frame, POINTS), SMALL_BOX, 8)


def test_keyed_operations_refuse_user_keys_without_an_encoding(engine):
    import datetime

    import pandas as pd

    df = engine.spark.createDataFrame(pd.DataFrame({"user": [datetime.date(2024, 1, 1)] * 2, "item": ["a", "b"]}))
    data = engine.load(df, ITEMS, FiniteDomain(["a", "b"]))
    with pytest.raises(DataError, match="user column"):
        engine.sample_keyed(data, 2, KeyedStreams())
    with pytest.raises(DataError, match="user column"):
        engine.randomize_keyed(data, None, KeyedStreams())


def test_missing_columns(engine, frame):
    with pytest.raises(DataError, match="not found"):
        engine.load(frame, Columns("person", "item"))


# --------------------------------------------------------------------------------------------
# Slow tier: bit-for-bit equality with the in-memory engine, retries, the CLI on Spark
# --------------------------------------------------------------------------------------------


@pytest.mark.slow  # bit-for-bit equality with memory (the brute-force sums run in the default tier)
def test_histogram_sum_equals_memory(engine, records, frame):
    users, items, _, _, words = records
    ds = UserDataset.from_arrays(users, items, domain=FiniteDomain(words))
    mem = MemoryEngine()
    for normalize in (True, False):
        spark = engine.histogram_sum(engine.load(frame, ITEMS, FiniteDomain(words)), normalize)
        assert np.array_equal(mem.histogram_sum(ds, normalize), spark)
    small = FiniteDomain(words[:5])  # items outside it are dropped alike
    got = engine.histogram_sum(engine.load(frame, ITEMS, small), True)
    assert np.array_equal(mem.histogram_sum(UserDataset.from_arrays(users, items, small), True), got)


@pytest.mark.slow  # bit-for-bit equality with memory on a 64 x 64 grid (brute force: default tier)
def test_grid_sum_equals_memory(engine, records, frame):
    users, _, lat, lon, _ = records
    box = BoxDomain.latlon(40.69, 40.76, -74.01, -73.94)
    ds = UserDataset.from_arrays(users, np.column_stack([lat, lon]), domain=box)
    data = engine.load(frame, POINTS)
    assert np.array_equal(user_grid_sum(ds, 64, box), engine.grid_sum(data, box, 64))
    small = BoxDomain.latlon(40.72, 40.76, -74.01, -73.94)
    with pytest.raises(DataError, match="outside"):
        engine.grid_sum(data, small, 64)
    kept = engine.grid_sum(data, small, 64, drop_outside=True)
    assert np.array_equal(kept, user_grid_sum(ds, 64, small, drop_outside=True))


def test_grid_sum_in_spark_sql_is_the_memory_engine_s_on_cell_edges(engine):
    """Spark computes the heatmap's count table in SQL: points on every cell edge (where a different order of
    the cell arithmetic would round across), on the box's edges and corners, outside it, NaN and infinite
    coordinates, persons with all their points outside: bit for bit the in-memory engine's sum (points outside
    dropped person by person). Catches a cell formula that is not the memory engine's, a size counted over
    the points outside, a point on the upper edge put past the last cell."""
    import pandas as pd

    box, shape = BoxDomain((0.0, -1.0), (0.7, 0.3)), (7, 13)
    edges0, edges1 = np.linspace(0.0, 0.7, 8), np.linspace(-1.0, 0.3, 14)
    pts = [(a, b) for a in edges0 for b in edges1[::3]] + [(a, b) for a in edges0[::2] for b in edges1]
    pts += [(0.7, 0.3), (0.0, -1.0), (0.71, 0.0), (1e300, 0.0), (-0.2, -2.0)]
    users = np.arange(len(pts)) % 9
    users[-2:] = 100  # a person with no point inside
    lat, lon = np.array(pts).T
    want = user_grid_sum(UserDataset.from_arrays(users, np.array(pts)), shape, box, drop_outside=True)
    df = engine.spark.createDataFrame(pd.DataFrame({"user": users, "lat": lat, "lon": lon})).repartition(3)
    got = engine.grid_sum(engine.load(df, POINTS), box, shape, drop_outside=True)
    assert np.array_equal(got, want)
    assert want.sum() == pytest.approx(9)  # the nine persons with a point inside, each of mass 1
    with pytest.raises(DataError, match="NaN or inf"):  # refused at load, as in memory and on DuckDB
        engine.load(engine.spark.createDataFrame(pd.DataFrame({"user": [1], "lat": [np.inf], "lon": [0.0]})), POINTS)


@pytest.mark.slow  # bit-for-bit equality with memory (brute-force means: default tier)
def test_per_user_mean_equals_memory(engine, records, frame):
    users, _, lat, lon, _ = records
    ds = UserDataset.from_arrays(users, np.column_stack([lat, lon]))
    mem = MemoryEngine().per_user_mean(ds, np.sin)
    assert np.array_equal(engine.per_user_mean(engine.load(frame, POINTS), np.sin), mem)


@pytest.mark.slow  # equality with memory and the driver limit (brute-force edges: default tier)
def test_edges_equal_memory(engine, records, frame):
    users, items, _, _, _ = records
    g_mem = person_element_graph(MemoryEngine().edges(UserDataset.from_arrays(users, items)))
    g_spark = person_element_graph(engine.edges(engine.load(frame, ITEMS)))
    assert np.array_equal(g_spark.offsets, g_mem.offsets) and np.array_equal(g_spark.adj, g_mem.adj)
    assert np.array_equal(dc_matching(g_spark, 12), dc_matching(g_mem, 12))


@pytest.mark.slow  # tokenizing on the executors, equal to memory: a Spark job of its own
def test_tokenized_edges_equal_memory(engine):
    """Text split into words on the executors gives the in-memory engine's person-word graph, also for
    non-ASCII text and rows that Python itself splits (capital sigma, emoji)."""
    import pyarrow as pa

    texts = ["The cat, the CAT", "naïve café", "ΣΊΣΥΦΟΣ και σίσυφος", "emoji 😀 ok", "", "İstanbul x_1"] * 5
    users = [f"u{i % 7}" for i in range(len(texts))]
    table = pa.table({"user": users, "text": texts})
    cols = Columns("user", "text", tokenize=True)
    g_mem = person_element_graph(MemoryEngine().edges(MemoryEngine().load(table, cols)))
    df = engine.spark.createDataFrame(table.to_pandas()).repartition(4)  # a person's texts in several partitions
    g_spark = person_element_graph(engine.edges(engine.load(df, cols)))
    assert np.array_equal(g_spark.offsets, g_mem.offsets) and np.array_equal(g_spark.adj, g_mem.adj)


def _rows(data) -> list:
    """Sorted (user, item...) rows of a Spark table or a dataset."""
    if isinstance(data, UserDataset):
        users = np.repeat(data.user_ids, data.counts()).tolist()
        items = data.items.tolist() if data.is_points else data.domain.labels[data.items].tolist()
        return sorted(zip(users, map(repr, items), strict=True))
    pdf = data.df.toPandas()
    cols = data.columns
    items = pdf[list(cols.points)].to_numpy().tolist() if cols.points else pdf[cols.item].tolist()
    return sorted(zip(pdf[cols.user].tolist(), map(repr, items), strict=True))


@pytest.mark.slow  # equality with memory (brute-force keyed draws: default tier)
def test_sampling_equals_memory_keyed(engine, records, frame):
    """The same master gives the same per-user samples with replacement on Spark and in memory; an unseeded
    (os.urandom) master is used, so this also holds for real releases, not only for seeded demos."""
    users, _, lat, lon, _ = records
    ds = UserDataset.from_arrays(users, np.column_stack([lat, lon]))
    streams = KeyedStreams()
    assert not streams.seeded
    mem = MemoryEngine().sample_keyed(ds, 7, streams)
    spark = engine.sample_keyed(engine.load(frame, POINTS), 7, streams)
    assert _rows(spark) == _rows(mem)
    other = MemoryEngine().sample_keyed(ds, 7, KeyedStreams())  # another master: other samples
    assert not np.array_equal(other.items, mem.items)


@pytest.mark.slow  # equality with memory, string keys (keyed draws: default tier)
def test_item_randomization_equals_memory_keyed(engine, records):
    """The same master gives the same GKRR-randomized items per user on Spark and in memory (string user keys
    here; the sampling test above uses integer keys)."""
    import pandas as pd

    from userdp.dem import GKRR
    from userdp.metrics import ClusteredMetric

    users, items, _, _, words = records
    users = np.array([f"u{u}" for u in users])
    gk = GKRR(ClusteredMetric(8, 5, 0.2), 1.0)
    streams = KeyedStreams()
    dom = FiniteDomain(words)
    ds = UserDataset.from_arrays(users, items, domain=dom)
    mem = MemoryEngine().randomize_keyed(ds, gk, streams)
    assert np.array_equal(mem.counts(), ds.counts())
    df = engine.spark.createDataFrame(pd.DataFrame({"user": users, "item": items})).repartition(4)
    spark = engine.randomize_keyed(engine.load(df, ITEMS, dom), gk, streams)
    assert _rows(spark) == _rows(mem)
    assert not np.array_equal(mem.items, ds.items)  # GKRR at alpha0 = 1 changes many items
    again = MemoryEngine().randomize_keyed(ds, gk, KeyedStreams())
    assert not np.array_equal(again.items, mem.items)


def _flaky(df):
    """``df`` behind a task that fails on its first attempt (Spark retries it: the fixture allows 4)."""
    from pyspark import TaskContext

    def flaky(batches):
        if TaskContext.get().attemptNumber() == 0:
            raise RuntimeError("injected failure on the first attempt")
        yield from batches

    return df.mapInPandas(flaky, df.schema)


@pytest.mark.slow  # every task run twice (about 40 s on 2 busy cores)
def test_retried_task_does_not_change_the_release(engine, records, frame):
    """A task that fails on its first attempt is retried by Spark; the per-user samples and randomized items
    are the same as in a run without failures (they depend only on the master secret and the user key)."""
    from userdp.dem import GKRR
    from userdp.metrics import ClusteredMetric

    df, failing = frame, _flaky(frame)  # (persons spread over four partitions)
    streams = KeyedStreams()
    a = engine.sample_keyed(engine.load(df, POINTS), 5, streams)
    b = engine.sample_keyed(engine.load(failing, POINTS), 5, streams)
    assert _rows(a) == _rows(b)
    dom = FiniteDomain(records[4])
    gk = GKRR(ClusteredMetric(8, 5, 0.2), 1.0)
    r1 = _rows(engine.randomize_keyed(engine.load(df, ITEMS, dom), gk, streams))
    r2 = _rows(engine.randomize_keyed(engine.load(failing, ITEMS, dom), gk, streams))
    assert r1 == r2 and len(r1) == len(records[0])
    assert r1 != _rows(engine.randomize_keyed(engine.load(df, ITEMS, dom), gk, KeyedStreams()))


@pytest.mark.slow  # two releases and two CLI runs on Spark (15 s)
def test_releases_api_and_cli_on_spark(engine, records, frame, tmp_path, capsys):
    """The same releases through the engine= API and the CLI's --engine spark."""
    import json

    from userdp import releases
    from userdp.cli import main

    users, items, lat, lon, _ = records
    df = frame
    rel = releases.heatmap(df, BOX, 32, 1.0, engine=engine, rng=1)
    local = releases.heatmap(
        UserDataset.from_arrays(users, np.column_stack([lat, lon]), domain=BOX), BOX, 32, 1.0, rng=1
    )
    assert np.array_equal(rel.value, local.value)  # same aggregate, same seeded noise
    d1 = releases.distinct(df, 1.0, method="matching", engine=engine, rng=2)  # the exact count, on the driver
    d2 = releases.distinct(UserDataset.from_arrays(users, items), 1.0, rng=2)
    assert d1.value == d2.value and d1.extras["bound"] == d2.extras["bound"]
    assert releases.distinct(df, 1.0, engine=engine, rng=2).params["method"] == "bucketed"  # Spark's default
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


@pytest.mark.slow  # two CLI runs on Spark, each reading a CSV (19 s)
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


@pytest.mark.slow  # two sampled, randomized CLI runs on Spark (17 s)
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


@pytest.mark.slow  # sizes after sampling on Spark (the sizes themselves: default tier)
def test_equal_sizes_on_spark(engine, records, frame):
    """The bounded releases' size check on executors: the same answer as UserDataset.require_equal_sizes."""
    data = engine.load(frame, ITEMS, FiniteDomain(records[4]))
    sizes = engine.user_sizes(data)
    local = UserDataset.from_arrays(np.asarray(records[0]), np.asarray(records[1]))
    assert (sizes.smallest, sizes.largest, sizes.users) == (local.counts().min(), local.counts().max(), local.n_users)
    if sizes.smallest != sizes.largest:
        with pytest.raises(DataError, match="BoundedEMDReduction"):
            sizes.equal()
    assert engine.user_sizes(engine.sample_keyed(data, 3, KeyedStreams())).equal() == 3


@pytest.mark.slow  # two bucketed counts and a release on Spark (7 s)
def test_bucketed_distinct_count_on_the_executors_equals_local(engine, records, frame):
    """The bucketed count summed on the executors equals the in-memory bucketed count (same public buckets,
    same shares), and the release path on Spark uses it by default (no edge list on the driver)."""
    from userdp import releases
    from userdp.distinct import dc_bucketed
    from userdp.distinct.counting import bucket_count, element_buckets, person_shares

    users, items, _, _, _ = records
    g_mem = person_element_graph(MemoryEngine().edges(UserDataset.from_arrays(users, items)))
    data = engine.load(frame, ITEMS)
    for b in (1, 3):
        local = dc_bucketed(g_mem, 12, b)
        spark = engine.bucket_sums(
            data,
            b,
            lambda x, b=b: element_buckets(x, b),
            lambda off, eb, b=b: person_shares(off, eb, b, 12),
            lambda p, e, up, ul: bucket_count(p, e, up, ul, 12),
            12,
        )
        assert spark.tolist() == local.tolist()
    r1 = releases.distinct(frame, 1.0, n_buckets=3, l_max=12, engine=engine, rng=4)
    assert r1.params["method"] == "bucketed"
    r2 = releases.distinct(UserDataset.from_arrays(users, items), 1.0, method="bucketed", n_buckets=3, l_max=12, rng=4)
    assert r1.value == r2.value and r1.extras["bound"] == r2.extras["bound"]


def test_no_spark_release_is_refused_for_the_size_of_its_data(engine, records):
    """Issue 33: Spark's exact distinct count, its policy vocabulary and its key counts collected the edges on the
    driver and refused above a fixed number of them, so a dataset just below the limit released and the same
    dataset plus one person did not (a refusal is a release: unbounded privacy loss on that pair). Now no
    size is gated: D (60 person-item pairs) and D plus one person holding one more item both release, for
    every Spark release that reads edges or key records; the distinct count runs on the executors unless the
    exact count is asked for."""
    import pandas as pd

    from userdp import releases

    users = np.repeat(np.arange(20), 3)
    items = np.array([f"w{(3 * u + j) % 17}" for u in range(20) for j in range(3)])
    d = pd.DataFrame({"user": users, "item": items})
    plus = pd.concat([d, pd.DataFrame({"user": [99], "item": ["w0"]})], ignore_index=True)
    for pdf in (d, plus):
        df = engine.spark.createDataFrame(pdf).repartition(4)
        assert releases.distinct(df, 1.0, l_max=5, engine=engine, rng=1).params["method"] == "bucketed"
        assert np.isfinite(releases.distinct(df, 1.0, l_max=5, method="matching", engine=engine, rng=1).value)
        assert releases.vocabulary(df, 1.0, 1e-6, noise="laplace", policy=True, engine=engine, rng=1) is not None
        assert releases.key_counts(df, 1.0, 1e-6, key="item", engine=engine, rng=1) is not None



def test_key_counts_are_bounded_person_by_person_on_the_executors(engine, records, frame):
    """The key counts' per-person steps run on the executors over persons spread across 4 partitions: the
    records each candidate bound keeps and the bounded counts (each person's ``L0`` keys of most records, at
    most ``Linf`` on each, ties by the keys' text) equal their definitions computed person by person here."""
    from collections import Counter

    from userdp.vocabulary import bounded_counts_part, kept_grid_part

    users, items, _, _, words = records
    counted = np.array(sorted(words[::3]), dtype=object)  # the keys counted: a third of them
    data = engine.load(frame, ITEMS)
    per_person: dict = {}
    for u, x in zip(users.tolist(), items.tolist(), strict=True):
        per_person.setdefault(u, Counter())[x] += 1

    def kept_by(person: Counter, l0: int, linf: int) -> dict:
        held = sorted(((-m, k) for k, m in person.items() if k in set(counted)))[:l0]
        return {k: min(-m, linf) for m, k in held}

    l0s, linfs = (1, 2, 4), (1, 3)
    _, kept = engine.key_record_sums(data, partial(kept_grid_part, counted=counted, l0s=l0s, linfs=linfs), 6)
    want = [sum(sum(kept_by(p, a, b).values()) for p in per_person.values()) for a in l0s for b in linfs]
    assert kept.reshape(-1).tolist() == want
    labels, counts = engine.key_record_sums(data, partial(bounded_counts_part, counted=counted, l0=2, linf=3), 1)
    expected: Counter = Counter()
    for p in per_person.values():
        expected.update(kept_by(p, 2, 3))
    assert dict(zip(labels.tolist(), counts[:, 0].tolist(), strict=True)) == {k: v for k, v in expected.items() if v}

"""One release, three engines: the same public parameters and the same seed give identical releases in memory,
in chunks and on Spark (``local[2]``, with a task that fails on its first attempt and is retried). This covers
the keyed per-user sampling (BoundedEMDReduction) and item randomization (PrivEMDItemWise, frequency)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from userdp import releases
from userdp.data import BoxDomain, FiniteDomain
from userdp.engines import ChunkedEngine
from userdp.metrics import ClusteredMetric, FiniteMetric, GreatCircleMetric

BOX = BoxDomain.latlon(40.69, 40.76, -74.01, -73.94)
SPACE = ClusteredMetric(3, 4, 0.2)
LINE = FiniteMetric(np.abs(np.arange(12.0)[:, None] - np.arange(12.0)[None, :]))  # the 12 labels on a line
LABELS = [f"{c}{i}" for c in "ABC" for i in range(4)]
DOMAIN = FiniteDomain(np.array(LABELS, dtype=object))
WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran"]


def _table(equal_sizes: bool) -> pa.Table:
    rng = np.random.default_rng(11)
    n = 60
    sizes = np.full(n, 6) if equal_sizes else rng.integers(1, 14, n)
    users = np.repeat(np.arange(n) * 3 + 1, sizes)  # grouped by user (the chunked engine reads runs of users)
    k = users.size
    text = [" ".join(rng.choice(WORDS, rng.integers(1, 5))) for _ in range(k)]
    return pa.table(
        {
            "user": users,
            "item": np.array(LABELS)[rng.integers(0, 12, k)],
            "lat": 40.70 + 0.05 * rng.random(k),
            "lon": -74.0 + 0.05 * rng.random(k),
            "text": text,
        }
    )


GC = GreatCircleMetric(BOX)
DIST, ELL, _ = releases.distance_query(GC, (40.758, -73.9855))

RELEASES = {
    "heatmap sparse": (False, lambda src, eng, rng=5: releases.heatmap(src, BOX, 16, 1.0, engine=eng, rng=rng)),
    "heatmap dense": (False, lambda src, eng, rng=5: releases.heatmap(src, BOX, 16, 1.0, "dense", engine=eng, rng=rng)),
    "distinct": (False, lambda src, eng, rng=5: releases.distinct(src, 1.0, l_max=8, engine=eng, rng=rng)),
    "distinct, words": (
        False,
        lambda src, eng, rng=5: releases.distinct(
            src, 1.0, item="text", tokenize=True, method="greedy", engine=eng, rng=rng
        ),
    ),
    "vocabulary": (
        False,
        lambda src, eng, rng=5: releases.vocabulary(src, 4.0, 1e-3, max_items=3, engine=eng, rng=rng),
    ),
    "vocabulary, words, laplace": (
        False,
        lambda src, eng, rng=5: releases.vocabulary(
            src, 4.0, 1e-3, item="text", tokenize=True, noise="laplace", engine=eng, rng=rng
        ),
    ),
    "key counts, public keys, bounds by GEM": (
        False,
        lambda src, eng, rng=5: releases.key_counts(src, 2.0, key="item", keys=LABELS[:9] + ["Z"], engine=eng,
                                                    rng=rng),  # fmt: skip
    ),
    "key counts, selected keys, gaussian": (
        False,
        lambda src, eng, rng=5: releases.key_counts(
            src, 4.0, 1e-3, key="item", noise="gaussian", max_keys=3, engine=eng, rng=rng
        ),
    ),
    "histogram": (False, lambda src, eng, rng=5: releases.histogram(src, DOMAIN, 1.0, engine=eng, rng=rng)),
    "linear, local": (
        False,
        lambda src, eng, rng=5: releases.linear(src, DIST, ELL, 20.0, points=("lat", "lon"), engine=eng, rng=rng),
    ),
    "linear, central, BoundedEMDReduction": (
        False,
        lambda src, eng, rng=5: releases.linear(
            src, DIST, ELL, 20.0, points=("lat", "lon"), model="central", delta=1e-6, samples=5, engine=eng, rng=rng
        ),
    ),
    "itemwise, central": (
        True,
        lambda src, eng, rng=5: releases.itemwise(
            src, SPACE, DOMAIN, 4.0, model="central", delta=1e-6, engine=eng, rng=rng
        ),
    ),
    "frequency, exponential randomizer on a line metric": (
        False,
        lambda src, eng, rng=5: releases.frequency(
            src, LINE, DOMAIN, 40.0, delta=1e-6, samples=4, engine=eng, rng=rng
        ),
    ),
    "frequency, local, BoundedEMDReduction": (
        False,
        lambda src, eng, rng=5: releases.frequency(
            src, SPACE, DOMAIN, 40.0, delta=1e-6, samples=4, engine=eng, rng=rng
        ),
    ),
}


def _values(rel) -> np.ndarray:
    if isinstance(rel.value, dict):  # the vocabulary (items and counts), the key counts (and their bounds)
        return np.concatenate([np.asarray(v, dtype=object).ravel() for v in rel.value.values() if v is not None])
    return np.asarray(rel.value)


def _same(a, b) -> None:
    assert a.guarantee == b.guarantee and a.mechanism == b.mechanism
    assert np.array_equal(_values(a), _values(b))


@pytest.mark.parametrize("name", list(RELEASES))
def test_memory_chunked_and_spark_releases_are_identical(name, tmp_path, spark_engine):
    from tests.engines.test_spark_engine import _flaky

    equal, run = RELEASES[name]
    table = _table(equal)
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=97)
    memory = run(table, "memory")
    chunked = run(path, ChunkedEngine(rows_per_chunk=50))  # many chunks of whole users
    _same(memory, chunked)
    df = spark_engine.spark.createDataFrame(table.to_pandas()).repartition(3)
    _same(memory, run(df, spark_engine))
    _same(memory, run(_flaky(df), spark_engine))  # a retried task recomputes the same rows
    assert not np.array_equal(_values(run(table, "memory", rng=6)), _values(memory))  # not vacuous
    if isinstance(memory.value, dict):
        assert len(memory.value["items" if "items" in memory.value else "keys"]) > 0


def test_a_file_s_labels_and_persons_do_not_depend_on_another_person_s_values(tmp_path, spark_engine):
    """CSV columns of persons and items are read as text when the labels come from the data: one added
    person holding "abc" must not turn the other persons' "007" into 7 (nor merge persons "007" and "7"),
    on any engine."""
    from userdp.engines import ChunkedEngine

    rows = [("007", "007")] * 50 + [("7", "007")] * 50 + [(str(u), "007") for u in range(100)]
    for extra in ([], [("x", "abc")]):
        path = tmp_path / f"t{len(extra)}.csv"
        path.write_text("user,key\n" + "".join(f"{u},{k}\n" for u, k in rows + extra))
        for eng in ("memory", ChunkedEngine(rows_per_chunk=37), spark_engine):
            rel = releases.key_counts(path, 1.0, user="user", key="key", keys=["007", "7"], bounds=(1, 1), engine=eng,
                                      rng=1)  # fmt: skip
            assert list(rel.value["keys"]) == ["007", "7"]
            assert abs(rel.value["counts"][0] - 101) < 25 and abs(rel.value["counts"][1]) < 25  # 101 persons hold 007


def test_a_file_s_persons_are_text_for_points_and_declared_domains(tmp_path, spark_engine):
    """Also with points in a public box and with a declared item domain, the person column of a CSV is text:
    persons "007" and "7" stay two persons whether or not another person's id is "abc"; a declared domain's
    labels (given as integers) match the file's items as text."""
    from userdp.engines import ChunkedEngine, Columns, get_engine

    dom = FiniteDomain(np.array([7, 8]))
    for extra in ("", "abc,8,40.71,-73.99\n"):
        path = tmp_path / f"p{len(extra)}.csv"
        path.write_text("user,item,lat,lon\n007,7,40.70,-74.0\n7,8,40.72,-73.98\n" + extra)
        for eng in (get_engine("memory"), ChunkedEngine(rows_per_chunk=1), spark_engine):
            points = eng.load(path, Columns("user", points=("lat", "lon")), BOX)
            assert eng.user_sizes(points).users == 2 + bool(extra), eng.name
            items = eng.load(path, Columns("user", item="item"), dom)
            hist = eng.histogram_sum(items, normalize=False)
            assert hist.tolist() == [1, 1 + bool(extra)], eng.name


def test_a_float_person_id_is_refused_on_every_engine(tmp_path, spark_engine):
    """JSON lines type a column by all its rows: one person whose id is 1.5 would make the others' ids
    doubles and merge 9007199254740993 with ...992. Every engine refuses a float person column instead."""
    from userdp.engines import ChunkedEngine, Columns, get_engine
    from userdp.errors import DataError

    path = tmp_path / "d.jsonl"
    path.write_text('{"user": 9007199254740993, "item": "a"}\n{"user": 1.5, "item": "b"}\n')
    for eng in (get_engine("memory"), ChunkedEngine(rows_per_chunk=1), spark_engine):
        with pytest.raises(DataError, match="floating-point"):
            eng.user_sizes(eng.load(path, Columns("user", item="item")))

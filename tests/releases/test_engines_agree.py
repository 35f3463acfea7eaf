"""One release, three engines: the same public parameters and the same seed give identical releases in memory,
in chunks and on Spark (``local[2]``, with a task that fails on its first attempt and is retried). This covers
the keyed per-user sampling (BoundedEMDReduction) and item randomization (PrivEMDItemWise, frequency).

Engines agreeing is not correctness (a bug common to every engine, or to the shared steps they end in, would
pass), so every release also runs on *recording* engines, which keep what they hand the release -- the
aggregates, and the keyed streams and parameters the release gave them -- and each of these is checked against
the brute-force aggregate of the table computed in the test (tests/engines/brute.py): on the memory and chunked
engines in the default tier, on Spark too (a smoke set of one release per kind of aggregate in the default tier,
the whole matrix and the retried tasks in the slow tier)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.engines import brute
from userdp import releases
from userdp.data import BoxDomain, FiniteDomain
from userdp.engines import ChunkedEngine, MemoryEngine
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
    # (the exact count asked for: on Spark the default counts within public buckets, a different lower bound)
    "distinct": (
        False,
        lambda src, eng, rng=5: releases.distinct(src, 1.0, l_max=8, method="matching", engine=eng, rng=rng),
    ),
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
    "vocabulary, max_items auto": (
        False,
        lambda src, eng, rng=5: releases.vocabulary(src, 4.0, 1e-3, count_fraction=0.3, engine=eng, rng=rng),
    ),
    "vocabulary, words, laplace": (
        False,
        lambda src, eng, rng=5: releases.vocabulary(
            src, 4.0, 1e-3, item="text", tokenize=True, noise="laplace", engine=eng, rng=rng
        ),
    ),
    "vocabulary, DP-SIPS": (
        False,
        lambda src, eng, rng=5: releases.vocabulary(src, 4.0, 1e-3, max_items=3, algorithm="sips", engine=eng, rng=rng),
    ),
    "vocabulary, DP-SIPS, max_items auto": (
        False,
        lambda src, eng, rng=5: releases.vocabulary(src, 4.0, 1e-3, algorithm="sips", engine=eng, rng=rng),
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
    "key counts, selected keys, max_keys auto": (
        False,
        lambda src, eng, rng=5: releases.key_counts(src, 4.0, 1e-3, key="item", engine=eng, rng=rng),
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


# --------------------------------------------------------------------------------------------
# Recording engines, and each release's aggregates against brute force
# --------------------------------------------------------------------------------------------


class _Recording:
    """Keeps, for every engine method a release calls, the arguments the release chose (past the data handle)
    and what the engine returned: ``calls[name] = [(args, result), ...]``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: dict[str, list] = defaultdict(list)

    def _kept(self, name, result, *args):
        self.calls[name].append((args, result))
        return result

    def user_sizes(self, data):
        return self._kept("user_sizes", super().user_sizes(data))

    def grid_sum(self, data, box, shape, drop_outside=False):
        return self._kept("grid_sum", super().grid_sum(data, box, shape, drop_outside), box, shape, drop_outside)

    def histogram_sum(self, data, normalize=True):
        return self._kept("histogram_sum", super().histogram_sum(data, normalize), normalize)

    def per_user_mean(self, data, query):
        return self._kept("per_user_mean", super().per_user_mean(data, query), query)

    def edges(self, data):
        return self._kept("edges", super().edges(data))

    def bounded_item_sums(self, data, cap, keep, weights, exclude=None):
        # (the edges the in-memory default reads inside are not the release's: on Spark none reach the driver)
        before = list(self.calls["edges"])
        out = super().bounded_item_sums(data, cap, keep, weights, exclude)
        self.calls["edges"] = before
        return self._kept("bounded_item_sums", out, cap, keep, weights, exclude)

    def key_records(self, data):
        return self._kept("key_records", super().key_records(data))

    def key_record_sums(self, data, fn, width):
        # (the recorded calls of key_records made inside, by the default implementation, are not the release's)
        before = list(self.calls["key_records"])
        out = super().key_record_sums(data, fn, width)
        self.calls["key_records"] = before
        return self._kept("key_record_sums", out, fn, width)

    def sample_keyed(self, data, s, streams):
        return self._kept("sample_keyed", super().sample_keyed(data, s, streams), s, streams)

    def randomize_keyed(self, data, randomizer, streams, m=None):
        out = super().randomize_keyed(data, randomizer, streams, m)
        return self._kept("randomize_keyed", out, randomizer, streams, m)


class RecordingMemory(_Recording, MemoryEngine):
    pass


class RecordingChunked(_Recording, ChunkedEngine):
    pass


def _one(calls, name):
    """The arguments and the result of the release's one call of ``name``."""
    assert len(calls[name]) == 1, (name, len(calls[name]))
    return calls[name][0]


def _sizes(calls, m, n):
    (_, sizes), = calls["user_sizes"]
    assert (sizes.smallest, sizes.largest, sizes.users) == (m, m, n)


def _check_grid(table, calls):
    (box, shape, _), got = _one(calls, "grid_sum")
    pts = np.column_stack([table["lat"].to_numpy(), table["lon"].to_numpy()])
    assert np.allclose(got, brute.grid_sum(table["user"], pts, box, shape), rtol=0, atol=1e-12)


def _words(table):
    """One record per word of the text column (the words are lower-case letters separated by spaces)."""
    users = [u for u, t in zip(table["user"].to_pylist(), table["text"].to_pylist(), strict=True) for _ in t.split()]
    return users, [w for t in table["text"].to_pylist() for w in t.split()]


def _check_edges(words: bool):
    def check(table, calls):
        users, items = _words(table) if words else (table["user"], table["item"])
        _, got = _one(calls, "edges")
        assert sorted(brute.edges_of(got)) == sorted(brute.edges(users, items))

    return check


def _check_union(words: bool):
    def check(table, calls):
        users, items = _words(table) if words else (table["user"], table["item"])
        (cap, keep, weights, exclude), got = _one(calls, "bounded_item_sums")
        assert exclude is None
        assert brute.item_sums_of(got) == brute.item_sums(users, items, cap, keep, weights)
        streams = keep.args[0]  # the release's keep: the definition's positions, from the bounding stream
        for person, held in brute.by_person(users, items).items():
            n = len(set(held))
            if n > cap:
                assert keep(person, n).tolist() == brute.kept_positions(streams, person, n, cap)

    return check


def _check_sips(table, calls):
    """DP-SIPS: no edges reach the release; each of the three rounds asks the engine for the per-item sums of
    every person's items less the labels released before (none in round 1, then a growing set of labels the
    earlier rounds summed), each person bounded by the keyed stream of the round's own purpose; every round's
    sums equal the definition's."""
    from userdp.noise import sips_round_purpose

    assert not calls["edges"]
    rounds = calls["bounded_item_sums"]
    assert len(rounds) == 3
    users, items = table["user"], table["item"]
    before: set = set()
    summed: set = set()
    for r, ((cap, keep, weights, exclude), got) in enumerate(rounds, start=1):
        assert keep.purpose == sips_round_purpose(r) and keep.cap == cap
        gone = set(np.asarray(exclude).tolist())
        assert before <= gone <= summed and (r > 1 or not gone)
        before = gone
        summed |= set(brute.item_sums_of(got))
        assert brute.item_sums_of(got) == brute.item_sums(users, items, cap, keep, weights, gone)
        streams = keep.streams
        for person, held in brute.by_person(users, items).items():
            n = len(set(held) - gone)
            if n > cap:
                assert keep(person, n).tolist() == brute.kept_positions(streams, person, n, cap, sips_round_purpose(r))
    assert before, "no item released before the last round: the exclusion is not exercised"


def _check_sips_auto(table, calls):
    from userdp.vocabulary import MAX_ITEMS_GRID, max_items_grid_part

    ((fn, width), _), = calls["key_record_sums"]
    assert fn.func is max_items_grid_part and width == len(MAX_ITEMS_GRID) + 1
    _check_sips(table, calls)


def _check_union_auto(table, calls):
    """The default ``max_items="auto"``: the persons' distinct-item counts summed where the data are equal
    their definition, and the union bounds each person by the chosen bound."""
    from userdp.vocabulary import MAX_ITEMS_GRID, max_items_grid_part

    ((fn, width), (labels, sums)), = calls["key_record_sums"]
    assert fn.func is max_items_grid_part and width == len(MAX_ITEMS_GRID) + 1
    k = [len(set(x)) for x in brute.by_person(table["user"], table["item"]).values()]
    want = [sum(1 <= x <= g for x in k) for g in MAX_ITEMS_GRID] + [sum(x >= 1 for x in k)]
    assert labels.tolist() == [""] and sums.reshape(-1).tolist() == want
    _check_union(words=False)(table, calls)


def _kept_by(person: dict, counted: set, l0: int, linf: int) -> dict:
    """A person's bounded records by the definition: their ``l0`` counted keys of most records (ties by the
    keys' text), at most ``linf`` records on each."""
    top = sorted((-m, k) for k, m in person.items() if k in counted)[:l0]
    return {k: min(-m, linf) for m, k in top}


def check_key_record_sums(users, keys, calls) -> None:
    """Every per-person sum the key counts release asked the engine for (the records each candidate bound
    keeps; the bounded counts) equals its definition, person by person from the records."""
    from collections import Counter

    from userdp.vocabulary import MAX_ITEMS_GRID, kept_grid_part, max_items_grid_part

    per: dict = defaultdict(dict)
    for (p, k), m in brute.key_records(users, keys).items():
        per[p][k] = m
    assert calls["key_record_sums"]
    for (fn, width), (labels, sums) in calls["key_record_sums"]:
        if fn.func is max_items_grid_part:  # max_keys="auto": each person's distinct keys, on the grid
            k = [len(p) for p in per.values()]
            want = [sum(1 <= x <= g for x in k) for g in MAX_ITEMS_GRID] + [sum(x >= 1 for x in k)]
            assert labels.tolist() == [""] and sums.reshape(-1).tolist() == want and width == len(want)
            continue
        kw, counted = fn.keywords, set(fn.keywords["counted"].tolist())
        if fn.func is kept_grid_part:
            want = [sum(sum(_kept_by(p, counted, a, b).values()) for p in per.values()) for a in kw["l0s"]
                    for b in kw["linfs"]]  # fmt: skip
            assert labels.tolist() == [""] and sums.reshape(-1).tolist() == want and width == len(want)
        else:
            total: Counter = Counter()
            for p in per.values():
                total.update(_kept_by(p, counted, kw["l0"], kw["linf"]))
            assert dict(zip(labels.tolist(), sums[:, 0].tolist(), strict=True)) == {k: v for k, v in total.items() if v}


def _check_key_records(table, calls):
    check_key_record_sums(table["user"], table["item"], calls)


def _check_key_records_auto(table, calls):
    """``max_keys="auto"``: the persons' distinct keys counted on the grid where the data are (first), then the
    key selection's bounding and sums, and every per-person sum, each against its definition."""
    from userdp.vocabulary import max_items_grid_part

    assert calls["key_record_sums"][0][0][0].func is max_items_grid_part
    check_key_record_sums(table["user"], table["item"], calls)
    _check_union(words=False)(table, calls)


def _check_histogram(table, calls):
    (normalize,), got = _one(calls, "histogram_sum")
    assert normalize and np.allclose(got, brute.histogram_sum(table["user"], table["item"], LABELS), rtol=0, atol=1e-12)


def _check_means(samples: int | None):
    def check(table, calls):
        pts = np.column_stack([table["lat"].to_numpy(), table["lon"].to_numpy()])
        groups = brute.by_person(table["user"], pts)
        if samples is not None:
            (s, streams), _ = _one(calls, "sample_keyed")
            assert s == samples
            groups = {p: brute.sampled(streams, p, x, s) for p, x in groups.items()}
            _sizes(calls, samples, len(groups))
        (query,), got = _one(calls, "per_user_mean")
        users = [p for p, x in groups.items() for _ in x]
        _, want = brute.per_user_mean(users, np.array([y for x in groups.values() for y in x]), query)
        assert np.allclose(got, want, rtol=1e-12, atol=0)

    return check


def _check_counts(samples: int | None):
    def check(table, calls):
        groups = brute.by_person(table["user"], DOMAIN.encode(table["item"].to_numpy(zero_copy_only=False)))
        (randomizer, streams, m), _ = _one(calls, "randomize_keyed")
        if samples is not None:
            (s, sampling_streams), _ = _one(calls, "sample_keyed")
            assert s == samples and sampling_streams is streams
            groups = {p: brute.sampled(streams, p, x, s) for p, x in groups.items()}
        m_data = {len(x) for x in groups.values()}
        assert m_data == {m}  # every person randomized under the bound m holds m items
        _sizes(calls, m, len(groups))
        (normalize,), got = _one(calls, "histogram_sum")
        assert not normalize
        assert got.tolist() == brute.randomized_counts(streams, groups, randomizer, len(LABELS)).tolist()

    return check


CHECKS = {
    "heatmap sparse": _check_grid,
    "heatmap dense": _check_grid,
    "distinct": _check_edges(words=False),
    "distinct, words": _check_edges(words=True),
    "vocabulary": _check_union(words=False),
    "vocabulary, max_items auto": _check_union_auto,
    "vocabulary, words, laplace": _check_union(words=True),
    "vocabulary, DP-SIPS": _check_sips,
    "vocabulary, DP-SIPS, max_items auto": _check_sips_auto,  # the bound chosen where the data are
    "key counts, public keys, bounds by GEM": _check_key_records,
    "key counts, selected keys, gaussian": _check_key_records,
    "key counts, selected keys, max_keys auto": _check_key_records_auto,
    "histogram": _check_histogram,
    "linear, local": _check_means(None),
    "linear, central, BoundedEMDReduction": _check_means(5),
    "itemwise, central": _check_counts(None),
    "frequency, exponential randomizer on a line metric": _check_counts(4),
    "frequency, local, BoundedEMDReduction": _check_counts(4),
}
assert set(CHECKS) == set(RELEASES)

SPARK_SMOKE = (  # one release per kind of aggregate (the rest of the Spark column is slow)
    "heatmap sparse",
    "histogram",
    "linear, local",
    "distinct",
    "vocabulary",
    "vocabulary, max_items auto",
    "vocabulary, DP-SIPS",  # each round's bounding and sums on the executors, the released set broadcast
    "key counts, public keys, bounds by GEM",
    "key counts, selected keys, max_keys auto",  # max_keys chosen from sums computed on the executors
    "itemwise, central",  # keyed randomization and the count histogram (keyed sampling: test_spark_engine.py)
)


@pytest.mark.parametrize("name", list(RELEASES))
def test_memory_and_chunked_releases_are_identical_and_their_aggregates_right(name, tmp_path):
    """The release in memory and in many chunks of whole users: identical, and the aggregates each engine handed
    the release equal the brute-force ones (for the keyed steps, with the streams the release gave the engine)."""
    equal, run = RELEASES[name]
    table = _table(equal)
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=97)
    memory_engine, chunked_engine = RecordingMemory(), RecordingChunked(rows_per_chunk=50)  # many chunks
    memory = run(table, memory_engine)
    _same(memory, run(path, chunked_engine))
    for eng in (memory_engine, chunked_engine):
        CHECKS[name](table, eng.calls)
    assert not np.array_equal(_values(run(table, "memory", rng=6)), _values(memory))  # not vacuous
    if isinstance(memory.value, dict):
        assert len(memory.value["items" if "items" in memory.value else "keys"]) > 0


def _spark_params():
    return [n if n in SPARK_SMOKE else pytest.param(n, marks=pytest.mark.slow) for n in RELEASES]


# the Spark column of the matrix: one Spark job or more per aggregate (8-35 s a release on 2 busy cores), so all
# but the smoke set are slow; the aggregates' correctness on every engine is checked in the default tier above
@pytest.mark.parametrize("name", _spark_params())
def test_spark_releases_equal_memory_and_their_aggregates_right(name, spark_engine):
    """The release on Spark, persons spread over three partitions: the in-memory release, and the aggregates the
    Spark engine handed the release equal the brute-force ones."""
    from userdp.engines.spark import SparkEngine

    class RecordingSpark(_Recording, SparkEngine):
        pass

    equal, run = RELEASES[name]
    table = _table(equal)
    spark = RecordingSpark(spark_engine.spark)
    df = spark_engine.spark.createDataFrame(table.to_pandas()).repartition(3)
    _same(run(table, "memory"), run(df, spark))
    CHECKS[name](table, spark.calls)


@pytest.mark.slow  # a Spark release per case, each task run twice (8-35 s a release on 2 busy cores)
@pytest.mark.parametrize("name", list(RELEASES))
def test_a_retried_spark_task_recomputes_the_same_release(name, spark_engine):
    """A task that fails on its first attempt is retried by Spark; the release is the in-memory one (the keyed
    per-user draws depend only on the master secret and the person's key)."""
    from tests.engines.test_spark_engine import _flaky

    equal, run = RELEASES[name]
    table = _table(equal)
    df = spark_engine.spark.createDataFrame(table.to_pandas()).repartition(3)
    _same(run(table, "memory"), run(_flaky(df), spark_engine))


def _typing_engines(spark_engine=None) -> list:
    """The recording memory and chunked engines, or the recording Spark engine on the shared session."""
    if spark_engine is None:
        return [RecordingMemory(), RecordingChunked(rows_per_chunk=37)]
    from userdp.engines.spark import SparkEngine

    class RecordingSpark(_Recording, SparkEngine):
        pass

    return [RecordingSpark(spark_engine.spark)]


def _labels_and_persons_are_text(tmp_path, engines):
    rows = [("007", "007")] * 50 + [("7", "007")] * 50 + [(str(u), "007") for u in range(100)]
    for extra in ([], [("x", "abc")]):
        path = tmp_path / f"t{len(extra)}.csv"
        path.write_text("user,key\n" + "".join(f"{u},{k}\n" for u, k in rows + extra))
        want = brute.key_records(*zip(*(rows + extra), strict=True))  # persons and keys as the file's text
        assert want[("007", "007")] == 50 and want[("7", "007")] == 51 and len(want) == 101 + len(extra)  # 101 holders
        for eng in engines:  # the release's defaults: bounds chosen by GEM
            eng.calls.clear()
            rel = releases.key_counts(path, 1.0, user="user", key="key", keys=["007", "7"], engine=eng, rng=1)
            assert list(rel.value["keys"]) == ["007", "7"]
            users, keys = zip(*[(u, k) for (u, k), m in want.items() for _ in range(m)], strict=True)
            check_key_record_sums(list(users), list(keys), eng.calls)  # the file's text, person by person


def test_a_file_s_labels_and_persons_do_not_depend_on_another_person_s_values(tmp_path):
    """CSV columns of persons and items are read as text when the labels come from the data: one added
    person holding "abc" must not turn the other persons' "007" into 7 (nor merge persons "007" and "7"):
    the records per person and key the release counts are those of the file's text, in memory and in chunks."""
    _labels_and_persons_are_text(tmp_path, _typing_engines())


@pytest.mark.slow  # the Spark column of the test above (a CSV read and two Spark jobs per file)
def test_a_file_s_labels_and_persons_do_not_depend_on_another_person_s_values_on_spark(tmp_path, spark_engine):
    """As above, on Spark."""
    _labels_and_persons_are_text(tmp_path, _typing_engines(spark_engine))


def _points_and_domains_are_text(tmp_path, engines):
    from userdp.engines import Columns

    dom = FiniteDomain(np.array([7, 8]))
    for extra in ("", "abc,8,40.71,-73.99\n"):
        path = tmp_path / f"p{len(extra)}.csv"
        path.write_text("user,item,lat,lon\n007,7,40.70,-74.0\n7,8,40.72,-73.98\n" + extra)
        for eng in engines:
            points = eng.load(path, Columns("user", points=("lat", "lon")), BOX)
            assert eng.user_sizes(points).users == 2 + bool(extra), eng.name
            items = eng.load(path, Columns("user", item="item"), dom)
            hist = eng.histogram_sum(items, normalize=False)
            assert hist.tolist() == [1, 1 + bool(extra)], eng.name


def test_a_file_s_persons_are_text_for_points_and_declared_domains(tmp_path):
    """Also with points in a public box and with a declared item domain, the person column of a CSV is text:
    persons "007" and "7" stay two persons whether or not another person's id is "abc"; a declared domain's
    labels (given as integers) match the file's items as text."""
    from userdp.engines import ChunkedEngine, get_engine

    _points_and_domains_are_text(tmp_path, [get_engine("memory"), ChunkedEngine(rows_per_chunk=1)])


@pytest.mark.slow  # the Spark column of the test above (four Spark jobs per file)
def test_a_file_s_persons_are_text_for_points_and_declared_domains_on_spark(tmp_path, spark_engine):
    """As above, on Spark."""
    _points_and_domains_are_text(tmp_path, [spark_engine])


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


# --------------------------------------------------------------------------------------------
# Items outside a declared domain: dropped person by person on every engine, never refused
# --------------------------------------------------------------------------------------------

_DOMAIN_RELEASES = [
    "histogram",
    "itemwise, central",
    "frequency, exponential randomizer on a line metric",
    "frequency, local, BoundedEMDReduction",
]


def _plus_outside(table: pa.Table) -> pa.Table:
    """The table plus one new person holding one item outside the domain, and one more such item held by the
    first person: a neighbouring dataset (add a person) of a neighbour (change one person's items)."""
    first = table.slice(0, 1).to_pylist()[0]
    extra = [{**first, "item": "ZZ"}, {**first, "user": 10**6, "item": "not a label"}]
    return pa.concat_tables([table, pa.Table.from_pylist(extra, schema=table.schema)])


@pytest.mark.parametrize("name", _DOMAIN_RELEASES)
def test_items_outside_the_domain_are_dropped_alike_on_every_engine_and_never_refused(name, tmp_path):
    """Every release over a declared finite domain, on the memory, DuckDB and chunked engines, releases D and D
    plus items outside the domain (a new person holding only such an item, and one such item more for an old
    person) alike: the same value for the same seed, and ``params["outside"]`` says items are dropped, with no
    count. Catches a refusal when an item lies outside (a data-dependent refusal: a release on D, an error on D
    plus one person), and an outside item counted or coded as another label."""
    from userdp.data import OUTSIDE_DOMAIN
    from userdp.engines.duckdb import DuckDBEngine

    equal, run = RELEASES[name]
    table, plus = _table(equal), _plus_outside(_table(equal))
    pq.write_table(plus, tmp_path / "plus.parquet", row_group_size=97)
    base = run(table, "memory")
    for source, eng in ((plus, "memory"), (plus, DuckDBEngine()), (tmp_path / "plus.parquet", ChunkedEngine(50))):
        rel = run(source, eng)
        _same(base, rel)
        assert rel.params["outside"] == OUTSIDE_DOMAIN and not any(ch.isdigit() for ch in OUTSIDE_DOMAIN)
    auto = run(plus, None)  # engine="auto" picks by the input's size: the release records "auto", not its pick
    _same(base, auto)
    assert auto.params.get("engine", "auto") == "auto"


@pytest.mark.slow  # two Spark releases (the smoke set's DP-SIPS release checks the same without the patch)
@pytest.mark.parametrize("max_items", [3, "auto"])
def test_sips_on_spark_collects_no_edges(max_items, spark_engine, monkeypatch):
    """DP-SIPS on Spark: every round's bounding and per-item sums run on the executors, so the release is the
    in-memory one with the engine's ``edges`` (the person-item pairs collected on the driver) made to fail."""
    from userdp.engines.spark import SparkEngine

    def no_edges(self, data):
        raise AssertionError("the person-item edges were collected on the driver")

    table = _table(False)
    want = releases.vocabulary(table, 4.0, 1e-3, max_items=max_items, algorithm="sips", rng=5)
    monkeypatch.setattr(SparkEngine, "edges", no_edges)
    df = spark_engine.spark.createDataFrame(table.to_pandas()).repartition(3)
    _same(want, releases.vocabulary(df, 4.0, 1e-3, max_items=max_items, algorithm="sips", engine=spark_engine, rng=5))

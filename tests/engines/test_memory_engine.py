"""The engine seam and the in-memory engine, and the exact shared steps every engine ends in."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.engines import brute
from userdp.data import BoxDomain, FiniteDomain, UserDataset, group_by_user
from userdp.engines import ChunkedEngine, Columns, Engine, MemoryEngine, get_engine
from userdp.engines.base import count_table, sum_by_size, user_count_table, user_means
from userdp.errors import DataError, ParameterError
from userdp.noise import KeyedStreams, keyed_keep


def test_get_engine():
    assert isinstance(get_engine(None), MemoryEngine) and isinstance(get_engine("memory"), MemoryEngine)
    assert isinstance(get_engine("chunked"), ChunkedEngine)
    from userdp.engines.duckdb import DuckDBEngine

    assert isinstance(get_engine("duckdb"), DuckDBEngine)
    eng = MemoryEngine()
    assert get_engine(eng) is eng
    with pytest.raises(ParameterError, match="memory, duckdb, chunked, spark"):
        get_engine("nope")


def test_auto_reads_files_past_the_measured_size_with_duckdb(tmp_path):
    """``engine="auto"`` (the default): files of at least ``AUTO_FILE_BYTES`` (32 MB, where DuckDB overtook the
    memory engine on every release measured) go to DuckDB, smaller ones stay in memory; a memory limit asks for
    DuckDB whatever the size. (The choice never changes a released value: the engines agree bit for bit.)"""
    from userdp.engines import AUTO_FILE_BYTES
    from userdp.engines.duckdb import DuckDBEngine

    assert AUTO_FILE_BYTES == 32 << 20
    small, large = tmp_path / "small.parquet", tmp_path / "large.parquet"
    for path, size in ((small, AUTO_FILE_BYTES - 1), (large, AUTO_FILE_BYTES)):
        with open(path, "wb") as f:  # sparse: only the size is read
            f.truncate(size)
    assert isinstance(get_engine("auto", small), MemoryEngine)
    assert isinstance(get_engine(None, str(small)), MemoryEngine)
    assert isinstance(get_engine("auto", large), DuckDBEngine)
    assert isinstance(get_engine("auto", small, memory_limit="1GB"), DuckDBEngine)


def test_spark_engine_without_pyspark_says_how_to_install_it(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pyspark", None)  # import pyspark now raises ImportError
    with pytest.raises(ParameterError, match=r'pip install "userdp\[spark\]".*Java'):
        get_engine("spark")


def test_group_by_user_keeps_record_order():
    off, order, keys = group_by_user(np.array([3, 1, 3, 2, 1]))
    assert list(keys) == [1, 2, 3]
    assert list(off) == [0, 2, 3, 5]
    assert list(order) == [1, 4, 3, 0, 2]


def test_histogram_sum_and_per_user_mean():
    ds = UserDataset.from_lists([[0, 0, 1], [2]], domain=FiniteDomain([0, 1, 2]))
    eng = MemoryEngine()
    assert np.allclose(eng.histogram_sum(ds), [2 / 3, 1 / 3, 1])
    assert np.allclose(eng.histogram_sum(ds, normalize=False), [2, 1, 1])
    vals = np.array([[1.0, 0.0], [3.0, 0.0], [5.0, 1.0], [7.0, 2.0]])
    assert np.allclose(eng.per_user_mean(ds, lambda codes: vals), [[3.0, 1 / 3], [7.0, 2.0]])
    with pytest.raises(DataError, match="one value"):  # no count of the data in the message
        eng.per_user_mean(ds, lambda codes: np.ones(3))
    with pytest.raises(DataError, match="NaN"):
        eng.per_user_mean(ds, lambda codes: np.full(4, np.nan))


def test_sum_by_size_does_not_depend_on_the_split_or_the_order():
    """The exact table: the same multiset of (bin, size, count) rows, however split and ordered, gives the
    same floats bit for bit; and the value is sum count/size."""
    rng = np.random.default_rng(3)
    bins, sizes = rng.integers(0, 50, 20_000), rng.integers(1, 97, 20_000)
    ref = sum_by_size(bins, sizes, np.ones(bins.size, np.int64), 50)
    perm = rng.permutation(bins.size)
    assert np.array_equal(sum_by_size(bins[perm], sizes[perm], np.ones(bins.size, np.int64), 50), ref)
    # merged rows (integer counts) give the same floats as the rows one by one
    key, counts = np.unique(np.stack([bins, sizes], 1), axis=0, return_counts=True)
    assert np.array_equal(sum_by_size(key[:, 0], key[:, 1], counts, 50), ref)
    assert np.allclose(ref, np.bincount(bins, weights=1.0 / sizes, minlength=50), rtol=1e-12)


def _table_by_sorting(bins: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.unique((bins.astype(np.int64) << 31) | sizes, return_counts=True)


@pytest.mark.parametrize("kind", ["uniform", "few", "heavy", "shuffled"])
def test_count_table_by_runs_equals_the_sorted_table(kind):
    """The compiled table (runs of equal sizes per bin, merged) gives exactly np.unique's keys and totals, for
    rows grouped by user and for rows in any order, with sizes equal, few or heavy-tailed (many runs per bin,
    past the first run list's 4,096 entries)."""
    rng = np.random.default_rng(len(kind))
    n_users = 30_000
    per = {
        "uniform": np.full(n_users, 7),
        "few": rng.choice([1, 2, 50], n_users),
        "heavy": np.minimum(rng.zipf(1.6, n_users), 5_000),
        "shuffled": rng.integers(1, 40, n_users),
    }[kind]
    offsets = np.r_[0, np.cumsum(per)]
    bins = rng.integers(0, 300, offsets[-1])
    sizes = np.repeat(per, per)
    if kind == "shuffled":
        p = rng.permutation(bins.size)
        bins, sizes = bins[p], sizes[p]
    keys, totals = count_table(bins, sizes)
    ref_keys, ref_totals = _table_by_sorting(bins, sizes)
    assert np.array_equal(keys, ref_keys) and np.array_equal(totals, ref_totals)
    if kind != "shuffled":
        keys, totals = user_count_table(offsets, bins, 300)
        assert np.array_equal(keys, ref_keys) and np.array_equal(totals, ref_totals)
    # bins too spread for a table over the bins: the sort
    wide = bins * 10**6
    keys, totals = count_table(wide, sizes)
    assert np.array_equal(keys, _table_by_sorting(wide, sizes)[0]) and np.array_equal(totals, ref_totals)


def test_user_count_table_drops_rows_without_a_bin_and_counts_the_rest():
    """A row with bin -1 (a point outside the box, dropped) is not counted, and its user's size counts only
    the rows kept; a user left with none contributes nothing."""
    rng = np.random.default_rng(9)
    per = rng.integers(0, 12, 5_000)
    offsets = np.r_[0, np.cumsum(per)]
    bins = rng.integers(-1, 64, offsets[-1])
    users = np.repeat(np.arange(per.size), per)
    kept = bins >= 0
    size = np.bincount(users[kept], minlength=per.size)
    ref_keys, ref_totals = _table_by_sorting(bins[kept], size[users[kept]])
    keys, totals = user_count_table(offsets, bins, 64)
    assert np.array_equal(keys, ref_keys) and np.array_equal(totals, ref_totals)
    assert user_count_table(np.array([0, 2]), np.array([-1, -1]), 4)[0].size == 0
    with pytest.raises(DataError):
        user_count_table(offsets, bins, 10)


def test_user_means_do_not_depend_on_the_order_within_a_user():
    rng = np.random.default_rng(4)
    counts = rng.integers(1, 30, 200)
    offsets = np.r_[0, np.cumsum(counts)]
    v = rng.standard_normal((offsets[-1], 3)) * 10.0 ** rng.integers(-8, 8, (offsets[-1], 1))
    ref = user_means(offsets, v)
    shuffled = np.concatenate([rng.permutation(v[offsets[i] : offsets[i + 1]]) for i in range(200)])
    assert np.array_equal(user_means(offsets, shuffled), ref)
    one = np.array([user_means(np.array([0, c]), v[offsets[i] : offsets[i + 1]])[0] for i, c in enumerate(counts)])
    assert np.array_equal(one, ref)  # one user at a time (Spark's groups) gives the same floats
    exact = [[math.fsum(v[offsets[i] : offsets[i + 1], j]) / c for j in range(3)] for i, c in enumerate(counts)]
    assert np.array_equal(ref, np.array(exact))  # the correctly rounded sum, as math.fsum
    hard = np.array([1e16, 1.0, -1e16, 1e-16, 3.0, -3.0])  # cancellation: a naive sum gives 0 or 2
    assert user_means(np.array([0, 6]), hard)[0, 0] == math.fsum(hard) / 6


def test_memory_engine_loads_tables_and_datasets():
    eng = MemoryEngine()
    table = {"u": ["b", "a", "b"], "x": ["p", "q", "q"]}
    ds = eng.load(table, Columns("u", "x"), FiniteDomain(["p", "q"]))
    assert list(ds.user_ids) == ["a", "b"] and list(ds.counts()) == [1, 2]
    assert eng.load(ds, Columns("u", "x")) is ds  # a dataset is used as it is
    with pytest.raises(DataError, match="not found"):
        eng.load(table, Columns("u", "nope"))
    with pytest.raises(ParameterError, match="item column"):
        eng.load(table, Columns("u"))
    words = eng.load(
        {"u": [1, 1, 2], "t": ["Hello world", "hello", "Ünïcode wörds!"]}, Columns("u", "t", tokenize=True)
    )
    e = eng.edges(words)
    assert list(e.counts()) == [2, 2] and sorted(e.domain.labels) == ["hello", "world", "wörds", "ünïcode"]


def test_custom_engine_plugs_in():
    """An engine is anything implementing the interface; the releases call only the interface."""
    from userdp import releases

    class Recording(MemoryEngine):
        calls: list[str] = []

        def edges(self, data):
            self.calls.append("edges")
            return super().edges(data)

    eng = Recording()
    assert isinstance(eng, Engine)
    ds = UserDataset.from_lists([[0, 0], [1]], domain=FiniteDomain([0, 1]))
    assert list(ds.dedupe().counts()) == [1, 1]
    releases.distinct(ds, 1.0, engine=eng, rng=1)
    assert eng.calls == ["edges"]


def _edges_reference(users, labels):
    """The person-element graph as the first release built it: every label printed, all sorted by NumPy."""
    from userdp.data import FiniteDomain, UserDataset, group_by_user

    text = np.asarray([str(x) for x in labels], dtype=str) if len(labels) else np.empty(0, dtype=str)
    names, codes = np.unique(text, return_inverse=True)
    offsets, order, keys = group_by_user(np.asarray(users))
    ds = UserDataset(
        offsets, codes.reshape(-1).astype(np.int64)[order], keys, FiniteDomain(names.astype(object), public=False)
    )
    return ds.dedupe()


def _same(a, b):
    assert np.array_equal(a.offsets, b.offsets) and np.array_equal(a.items, b.items)
    assert list(a.user_ids) == list(b.user_ids) and list(a.domain.labels) == list(b.domain.labels)


def test_edges_equal_the_reference_graph():
    """Issue 17: the person-element graph from codes (IMDB: 52 s -> 3.7 s) equals the reference bit for bit:
    text and integer labels, labels that print alike, a public domain with unused labels, users with no item,
    users not sorted."""
    from userdp.data import FiniteDomain, UserDataset
    from userdp.engines.base import edges_from_pairs, edges_of_dataset

    rng = np.random.default_rng(2)
    words = np.array([f"w{i}" for i in rng.integers(0, 300, 5000)] + ["é", "Z", "a b", ""] * 10, dtype=object)
    users = np.array([f"p{i}" for i in rng.integers(0, 200, words.size)], dtype=object)
    _same(edges_from_pairs(users, words), _edges_reference(users, words))
    ints = rng.integers(0, 2000, 3000)
    _same(edges_from_pairs(ints % 97, ints), _edges_reference(ints % 97, ints))
    mixed = np.array([1, "1", 2, "x"] * 400, dtype=object)  # 1 and "1" are one element
    _same(edges_from_pairs(np.arange(mixed.size) % 7, mixed), _edges_reference(np.arange(mixed.size) % 7, mixed))
    domain = FiniteDomain(["zz", "a", "m", "unused", "b"])
    ds = UserDataset.from_lists([["a", "m", "a"], [], ["zz", "b"], ["m"]], domain=domain)
    recs = np.repeat(ds.user_ids, ds.counts())
    _same(edges_of_dataset(ds), _edges_reference(recs, ds.domain.labels[ds.items]))
    shuffled = UserDataset(ds.offsets, ds.items, ds.user_ids[::-1].copy(), ds.domain)  # keys not sorted
    recs = np.repeat(shuffled.user_ids, shuffled.counts())
    _same(edges_of_dataset(shuffled), _edges_reference(recs, shuffled.domain.labels[shuffled.items]))


@pytest.mark.parametrize("rows_per_slice", [1, 3, 64])
def test_a_count_table_summed_slice_by_slice_gives_the_same_sums(monkeypatch, rows_per_slice):
    """sum_table turns a large table into sums a slice of whole bins at a time; any slice size gives the
    same floats as one slice (a bin with more rows than a slice stays whole)."""
    from userdp.engines import base

    rng = np.random.default_rng(11)
    bins = np.concatenate([rng.integers(0, 40, 3000), np.full(500, 7)])  # bin 7: many sizes
    sizes = np.concatenate([rng.integers(1, 30, 3000), rng.integers(1, 400, 500)])
    keys, totals = count_table(bins, sizes)
    whole = base.sum_table(keys, totals, 40)
    monkeypatch.setattr(base, "_SUM_SLICE", rows_per_slice)
    assert np.array_equal(base.sum_table(keys, totals, 40), whole)
    assert np.array_equal(whole, sum_by_size(bins, sizes, None, 40))


def test_a_slice_of_a_count_table_ends_at_a_bin_boundary_even_for_the_last_bin():
    from userdp.engines.base import _bin_end

    last = (1 << 32) - 1  # the largest bin a key holds: bin << 31 | size reaches 2^63 - 1
    keys = np.array([(last - 1) << 31 | 1, last << 31 | 1, last << 31 | 2, last << 31 | 3], dtype=np.int64)
    assert _bin_end(keys, 2) == 4 and _bin_end(keys, 1) == 1 and _bin_end(keys, 4) == 4
    keys = np.array([5 << 31 | 1, 5 << 31 | 9, 6 << 31 | 1], dtype=np.int64)
    assert _bin_end(keys, 1) == 2 and _bin_end(keys, 2) == 2


# --------------------------------------------------------------------------------------------
# The in-memory engine's per-person grouping and bounding, checked against brute force (tests/engines/brute.py)
# --------------------------------------------------------------------------------------------

LETTERS = FiniteDomain(np.array(list("abcde"), dtype=object))


def test_memory_engine_groups_a_person_s_rows_wherever_they_lie():
    """Rows of one person scattered through the table (the first and last keys in order, as a sorted file's
    are) are one person: the sizes, sums of per-person distributions and edges are the brute-force ones.
    Catches a grouping that takes rows in runs (a person returning later becomes a second person, adding a
    second distribution of mass 1)."""
    eng = MemoryEngine()
    for users in ([1, 5, 1, 2, 1, 9], [3, 3, 7, 3, 8], ["a", "c", "a", "b", "d"]):
        table = {"u": users, "x": list("abcdeabcde"[: len(users)])}
        data = eng.load(table, Columns("u", "x"), LETTERS)
        sizes = eng.user_sizes(data)
        assert (sizes.smallest, sizes.largest, sizes.users) == brute.user_sizes(users)
        for normalize in (True, False):
            want = brute.histogram_sum(users, table["x"], LETTERS.labels, normalize)
            assert np.allclose(eng.histogram_sum(data, normalize), want, rtol=0, atol=1e-12)
        assert sorted(brute.edges_of(eng.edges(data))) == sorted(brute.edges(users, table["x"]))


def test_edges_are_the_distinct_person_item_pairs():
    """The person-element graph holds each (person, element) pair once: from a table (rows in any order), from
    a dataset grouped and sorted by person (its own path) with items held several times, and from a dataset
    whose person ids repeat (one person over two rows of the dataset is one person). Catches a graph left
    with repeated edges (a person counted twice toward an element) and a repeated id taken for grouped."""
    eng = MemoryEngine()
    users, items = [4, 2, 4, 4, 2, 9, 9], ["b", "a", "b", "c", "a", "e", "e"]
    assert sorted(brute.edges_of(eng.edges(eng.load({"u": users, "x": items}, Columns("u", "x"))))) == sorted(
        brute.edges(users, items)
    )
    grouped = UserDataset.from_lists([["a", "b", "a", "a"], ["c"], ["d", "d", "e"]], domain=LETTERS)
    recs = np.repeat(grouped.user_ids, grouped.counts())
    want = brute.edges(recs, LETTERS.labels[grouped.items])
    assert len(want) == 5 and sorted(brute.edges_of(eng.edges(grouped))) == sorted(want)
    rows = UserDataset.from_lists([["a", "b"], ["a", "c"], ["d", "e"]], domain=LETTERS)
    repeated = UserDataset(rows.offsets, rows.items, np.array([7, 7, 9]), LETTERS)  # person 7 on two rows
    recs = np.repeat(repeated.user_ids, repeated.counts())
    graph = eng.edges(repeated)
    got = brute.edges_of(graph)
    assert sorted(got) == sorted(brute.edges(recs, LETTERS.labels[repeated.items]))
    assert sorted(got) == [(7, "a"), (7, "b"), (7, "c"), (9, "d"), (9, "e")] and graph.n_users == 2


def test_key_records_add_up_a_person_s_records_of_a_key():
    """One entry per person and key, with the number of the person's records of it, as counted in the test:
    a dataset of many persons and keys (an entry coded by person and key must not collide with another's)."""
    rng = np.random.default_rng(6)
    users = rng.integers(0, 30, 400) * 7
    keys = np.array([f"k{j}" for j in rng.integers(0, 9, 400)], dtype=object)
    eng = MemoryEngine()
    got = brute.key_records_of(eng.key_records(eng.load({"u": users, "k": keys}, Columns("u", "k"))))
    want = brute.key_records(users, keys)
    assert got == want and max(want.values()) > 1


def _kept_and_held(k):
    """Weights of a person keeping ``k`` items: ``k`` itself (so a sum shows the kept count) and 1."""
    k = np.asarray(k, dtype=np.int64)
    return np.column_stack([k, np.ones(k.size, dtype=np.int64)])


@pytest.mark.parametrize("cap", [1, 3, 5])
def test_bounded_item_sums_equal_the_definition(cap):
    """A person keeps all of its distinct items up to ``cap``, else the ``cap`` positions (labels in text order:
    integer labels 10 before 9) of the smallest words of its keyed stream for the bounding purpose; each kept
    item gets the weights of the kept count. Computed per person in the test, for integer and text person keys."""
    from functools import partial

    rng = np.random.default_rng(cap)
    labels = np.array([9, 10, 11, 100, 2, 33, 7])
    streams = KeyedStreams(cap)
    for ids in (np.arange(25) * 11 - 40, np.array([f"p{i}" for i in range(25)], dtype=object)):
        users, items = [], []
        for p in ids.tolist():
            held = rng.choice(labels, int(rng.integers(1, 8)), replace=False)
            users += [p] * (held.size + 1)
            items += held.tolist() + [int(held[0])]  # one item held twice
        eng = MemoryEngine()
        data = eng.load({"u": users, "x": items}, Columns("u", "x"))
        got = eng.bounded_item_sums(data, cap, partial(keyed_keep, streams, cap=cap), _kept_and_held)
        want = brute.item_sums(users, items, cap, lambda p, n: brute.kept_positions(streams, p, n, cap),
                               _kept_and_held)  # fmt: skip
        assert brute.item_sums_of(got) == want
        # DP-SIPS's later rounds: the excluded labels (text) leave every person's set before the bounding
        gone = np.array(["10", "7", "not held"], dtype=object)
        got = eng.bounded_item_sums(data, cap, partial(keyed_keep, streams, cap=cap), _kept_and_held, exclude=gone)
        want = brute.item_sums(users, items, cap, lambda p, n: brute.kept_positions(streams, p, n, cap),
                               _kept_and_held, gone)  # fmt: skip
        assert brute.item_sums_of(got) == want and not {"10", "7"} & set(want)


@pytest.mark.parametrize("shape", [(4, 6), (1200, 1000)])
def test_grid_sum_counts_each_person_s_points_inside_the_box(shape):
    """Each person's points inside the box as a distribution of mass 1, points outside dropped, a person with
    none inside adding nothing: the brute-force sum, on a small grid (one compiled counting pass) and on a grid
    of more cells than a counting pass is worth (the sort), where a person's size must count only its points
    inside."""
    box = BoxDomain((0.0, 0.0), (1.0, 1.0))
    rng = np.random.default_rng(9)
    users = np.repeat(np.arange(40), rng.integers(1, 7, 40))
    pts = rng.uniform(-0.2, 1.2, (users.size, 2))
    ds = UserDataset.from_arrays(users, pts)
    want = brute.grid_sum(users, pts, box, shape)
    got = MemoryEngine().grid_sum(ds, box, shape, drop_outside=True)
    assert np.allclose(got, want, rtol=0, atol=1e-12)
    persons_inside = {u for u, p in zip(users.tolist(), pts, strict=True) if brute.cell_of(p, box, shape) is not None}
    assert got.sum() == pytest.approx(len(persons_inside)) and len(persons_inside) < 40


def test_words_outside_a_declared_domain_are_dropped_on_every_engine():
    """Text split into words against a declared domain: a word outside it is dropped, person by person (a person
    with none left adds nothing), on the memory, DuckDB and chunked engines alike; never refused."""
    import pyarrow as pa

    from userdp.engines.duckdb import DuckDBEngine

    table = pa.table({"user": [1, 1, 2, 3], "text": ["the cat", "zz the", "qq", "cat cat"]})
    cols, dom = Columns("user", "text", tokenize=True), FiniteDomain(["cat", "the"])
    for eng in (MemoryEngine(), DuckDBEngine(), ChunkedEngine(2)):
        data = eng.load(table, cols, dom)
        s = eng.user_sizes(data)
        assert (s.smallest, s.largest, s.users) == (2, 3, 2), eng.name
        assert eng.histogram_sum(data, normalize=False).tolist() == [3, 2], eng.name


def test_sort_segments_sorts_every_segment_of_any_length_and_range():
    """The compiled per-person sort that puts each person's codes in canonical order before the keyed steps
    (insertion for short segments, counting for narrow ranges, NumPy's sort otherwise): every segment equals
    its NumPy sort, on lengths 0 to 200 and ranges narrow, wide and negative."""
    from userdp.engines.memory import _sort_segments

    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 200, 300)
    lengths[:40] = np.arange(40)  # every short length, insertion's boundary (32) included
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    for width in (3, 100, 2**40):
        values = rng.integers(-width, width, offsets[-1]).astype(np.int64)
        got = _sort_segments(values, offsets)
        want = np.concatenate([np.sort(values[a:b]) for a, b in zip(offsets[:-1], offsets[1:], strict=True)])
        assert np.array_equal(got, want), width

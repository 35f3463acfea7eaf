"""The DuckDB engine: every aggregate from files and frames in any row order, equal bit for bit to the in-memory
engine's and to the brute-force definitions (tests/engines/brute.py), in bounded memory, with the refusals of
bad input the in-memory engine makes."""

from __future__ import annotations

import json
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from tests.engines import brute
from tests.releases.test_engines_agree import check_key_record_sums
from userdp.data import BoxDomain, FiniteDomain, UserDataset
from userdp.engines import Columns, MemoryEngine
from userdp.engines.duckdb import DuckDBEngine, _sorted_table, parse_memory_limit
from userdp.errors import DataError, ParameterError
from userdp.noise import KeyedStreams, RandomSource, keyed_keep
from userdp.vocabulary import bounded_counts_part, kept_grid_part, vocabulary_sum_columns

BOX = BoxDomain((40.6, -74.0), (40.8, -73.8))
LABELS = np.array([f"w{i}" for i in range(40)], dtype=object)
POINTS = Columns("user", points=("lat", "lon"))
ITEMS = Columns("user", "item")


def _table(n: int = 4000, seed: int = 1, users: int = 500) -> pa.Table:
    """Records in random order: persons interleaved, points on the box's edges and outside it."""
    rng = np.random.default_rng(seed)
    u = rng.integers(0, users, n) * 7 + 3
    lat, lon = 40.55 + 0.3 * rng.random(n), -74.05 + 0.3 * rng.random(n)
    lat[:20], lat[20:40], lon[40:60] = 40.6, 40.8, -73.8  # on the box's edges: the last cell holds the top edge
    words = ["the", "a", "Big", "dog", "über", "ÉCOLE", "x1", "naïve"]
    return pa.table({
        "user": u,
        "lat": lat,
        "lon": lon,
        "item": rng.choice(LABELS, n),
        "text": [" ".join(rng.choice(words, rng.integers(0, 5))) or "--" for _ in range(n)],  # "--": no word
    })  # fmt: skip


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return _table()


@pytest.fixture(scope="module")
def files(table, tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("duck")
    pq.write_table(table, d / "t.parquet", row_group_size=700)
    pcsv.write_csv(table, d / "t.csv")
    pcsv.write_csv(table, d / "t.tsv", pcsv.WriteOptions(delimiter="\t"))
    with open(d / "t.jsonl", "w") as fh:
        for r in table.to_pylist():
            fh.write(json.dumps(r) + "\n")
    (d / "parts").mkdir()
    for j in range(3):
        pq.write_table(table.slice(j * 1500, 1500), d / "parts" / f"part-{j}.parquet")
    (d / "parts" / "_SUCCESS").write_text("")
    return {"parquet": d / "t.parquet", "csv": d / "t.csv", "tsv": d / "t.tsv", "jsonl": d / "t.jsonl",
            "folder": d / "parts", "glob": str(d / "parts" / "part-*.parquet")}  # fmt: skip


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and np.array_equal(a.view(np.uint64), b.view(np.uint64))


@pytest.mark.parametrize("kind", ["parquet", "csv", "tsv", "jsonl", "folder", "glob", "arrow", "pandas"])
def test_every_aggregate_equals_the_memory_engine_and_the_definition(kind, files, table):
    """From every kind of source, in random row order and batches of 300 rows (many batches, users cut by
    them): the grid sum (the box's edges included, points outside dropped), user sizes, per-user means, edges,
    records per key, bounded item sums (persons above and below the cap), the histogram sum and keyed sampling
    all equal the in-memory engine's, bit for bit, and the brute-force definitions; so do the key counts'
    per-person sums (the records each bound keeps, the bounded counts)."""
    src = {"arrow": table, "pandas": table.to_pandas()}.get(kind, files.get(kind))
    rows = table if kind not in ("folder", "glob") else table.slice(0, 4500)
    users = rows.column("user").to_numpy()
    if kind in ("csv", "tsv"):  # a CSV's persons are text (never typed by what other rows hold)
        rows = rows.set_column(0, "user", pa.array(users.astype(str)))
        users = users.astype(str)
    mem, duck = MemoryEngine(), DuckDBEngine(batch_rows=300)
    pts = np.column_stack([rows.column("lat").to_numpy(), rows.column("lon").to_numpy()])
    a, b = mem.load(rows, POINTS), duck.load(src, POINTS)
    for shape in [(16, 16), (7, 13)]:
        g = duck.grid_sum(b, BOX, shape, drop_outside=True)
        assert _same_bits(g, mem.grid_sum(a, BOX, shape, drop_outside=True))
        assert np.allclose(g, brute.grid_sum(users, pts, BOX, shape), rtol=1e-12, atol=1e-12)
    assert tuple(vars(duck.user_sizes(b)).values()) == brute.user_sizes(users)

    def query(x):
        return x[:, 0] * 3.1 + np.sin(x[:, 1])

    means = duck.per_user_mean(b, query)
    assert _same_bits(means, mem.per_user_mean(a, query))
    keys, expected = brute.per_user_mean(users, pts, query)
    assert np.array_equal(means, expected)

    labels = rows.column("item").to_numpy(zero_copy_only=False)
    a, b = mem.load(rows, ITEMS), duck.load(src, ITEMS)
    e = duck.edges(b)
    assert sorted(brute.edges_of(e)) == sorted(brute.edges(users, labels))
    ea = mem.edges(a)
    assert np.array_equal(e.offsets, ea.offsets) and np.array_equal(e.items, ea.items)
    assert brute.key_records_of(duck.key_records(b)) == brute.key_records(users, labels)
    streams = KeyedStreams.from_rng(RandomSource(3))
    for cap in (1, 3, 100):
        args = (cap, partial(keyed_keep, streams, cap=cap), partial(vocabulary_sum_columns, noise="gaussian"))
        got = brute.item_sums_of(duck.bounded_item_sums(b, *args))
        assert got == brute.item_sums_of(mem.bounded_item_sums(a, *args))
        assert got == brute.item_sums(users, labels, *args)
        gone = np.array(sorted(set(labels.tolist()))[::3] + ["not held"], dtype=object)  # DP-SIPS's later rounds
        got = brute.item_sums_of(duck.bounded_item_sums(b, *args, exclude=gone))
        assert got == brute.item_sums_of(mem.bounded_item_sums(a, *args, exclude=gone))
        assert got == brute.item_sums(users, labels, *args, gone) and not set(gone) & set(got)
    counted = np.array(sorted(LABELS[::2]), dtype=object)

    def check_key_counts(a, b):  # keys read off the data (coded in SQL) or of a declared domain (its codes)
        for part, width in ((partial(kept_grid_part, counted=counted, l0s=(1, 2, 4), linfs=(1, 3)), 6),
                            (partial(bounded_counts_part, counted=counted, l0=2, linf=2), 1)):  # fmt: skip
            got = brute.item_sums_of(duck.key_record_sums(b, part, width))
            assert got == brute.item_sums_of(mem.key_record_sums(a, part, width))
        check_key_record_sums(users, labels, _recorded(duck, b, counted))

    check_key_counts(a, b)
    dom = FiniteDomain(LABELS)
    a, b = mem.load(rows, ITEMS, dom), duck.load(src, ITEMS, dom)
    check_key_counts(a, b)
    for normalize in (True, False):
        h = duck.histogram_sum(b, normalize)
        assert _same_bits(h, mem.histogram_sum(a, normalize))
        assert np.allclose(h, brute.histogram_sum(users, labels, LABELS, normalize), rtol=1e-12)
    assert _same_bits(duck.histogram_sum(duck.sample_keyed(b, 5, streams)),
                      mem.histogram_sum(mem.sample_keyed(a, 5, streams)))  # fmt: skip


def _recorded(engine, data, counted) -> dict:
    """The calls ``check_key_record_sums`` reads: the kept grid and the bounded counts over ``counted``."""
    calls = {"key_record_sums": []}
    for part, width in ((partial(kept_grid_part, counted=counted, l0s=(1, 2, 4), linfs=(1, 3)), 6),
                        (partial(bounded_counts_part, counted=counted, l0=2, linf=2), 1)):  # fmt: skip
        calls["key_record_sums"].append(((part, width), engine.key_record_sums(data, part, width)))
    return calls


def test_text_is_split_by_userdp_s_tokenizer(files, table):
    """Words (Unicode lower-casing and ``\\w``, as :func:`userdp.text.tokenize`) from a CSV: the same edges as
    the in-memory engine, persons without a word left out."""
    from userdp.text import tokenize

    cols = Columns("user", "text", tokenize=True)
    duck = DuckDBEngine(batch_rows=256)
    e = duck.edges(duck.load(files["csv"], cols))
    users = table.column("user").to_numpy()
    expected = {(u, w) for u, t in zip(users.tolist(), table.column("text").to_pylist(), strict=True)
                for w in tokenize(t)}  # fmt: skip
    assert set(brute.edges_of(e)) == {(str(u), w) for u, w in expected}  # a CSV's persons are text
    m = MemoryEngine().edges(MemoryEngine().load(files["csv"], cols))
    assert np.array_equal(e.items, m.items) and list(e.domain.labels) == list(m.domain.labels)


def test_persons_from_a_csv_are_text_and_never_typed_by_other_rows(tmp_path):
    """``007`` and ``7`` are two persons in a CSV (read as text), as in the in-memory engine."""
    path = tmp_path / "p.csv"
    path.write_text("user,item\n007,a\n7,b\n7,c\n")
    duck = DuckDBEngine()
    e = duck.edges(duck.load(path, ITEMS))
    assert sorted(brute.edges_of(e)) == [("007", "a"), ("7", "b"), ("7", "c")]


def test_bad_input_is_refused_as_the_memory_engine_refuses_it(tmp_path, table):
    duck = DuckDBEngine()
    with pytest.raises(DataError, match="not found"):
        duck.load(table, Columns("person", "item"))
    with pytest.raises(DataError, match="no such file"):
        duck.load(tmp_path / "missing.parquet", ITEMS)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(DataError, match="empty"):
        duck.load(empty, ITEMS)
    with pytest.raises(DataError, match="missing values"):
        duck.load(pa.table({"user": [1, None], "item": ["a", "b"]}), ITEMS)
    with pytest.raises(DataError, match="floating-point"):
        duck.load(pa.table({"user": [1.0, 2.0], "item": ["a", "b"]}), ITEMS)
    with pytest.raises(DataError, match="must be numeric"):
        duck.load(pa.table({"user": [1], "lat": ["x"], "lon": [1.0]}), POINTS)
    with pytest.raises(DataError, match="NaN or inf"):
        duck.load(pa.table({"user": [1], "lat": [np.nan], "lon": [1.0]}), POINTS)
    outside = duck.load(pa.table({"user": [1, 2], "item": ["zz", LABELS[0]]}), ITEMS, FiniteDomain(LABELS))
    assert duck.user_sizes(outside).users == 1  # an item outside the domain is dropped, never refused
    with pytest.raises(DataError, match="outside the declared box"):
        b = duck.load(pa.table({"user": [1], "lat": [0.0], "lon": [0.0]}), POINTS)
        duck.grid_sum(b, BOX, 8)
    with pytest.raises(DataError, match="public finite domain"):
        duck.histogram_sum(duck.load(table, ITEMS))


def test_the_settings_are_checked_before_anything_is_read():
    assert parse_memory_limit("4GB") == "4GB" and parse_memory_limit("512 mib") == "512MB"
    assert parse_memory_limit("50%") == "50%" and parse_memory_limit(None) is None
    for bad in ("", "lots", "-1GB", "0", "120%", "1", "1000KB", "0.5%"):
        with pytest.raises(ParameterError, match="memory-limit"):
            parse_memory_limit(bad)
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ParameterError):
            DuckDBEngine(threads=bad)


def test_a_table_larger_than_the_memory_limit_is_sorted_on_disk(tmp_path):
    """With a memory limit far below the data (40 MB for 3·10^6 rows of random users: 72 MB of values), the
    ordered stream of whole users spills to disk and the per-user means still equal the in-memory engine's."""
    rng = np.random.default_rng(4)
    n = 3_000_000
    t = pa.table({"user": rng.integers(0, 300_000, n), "lat": rng.random(n), "lon": rng.random(n)})
    pq.write_table(t, tmp_path / "big.parquet", row_group_size=100_000)
    duck = DuckDBEngine(memory_limit="40MB", threads=2, temp_directory=tmp_path / "spill")
    means = duck.per_user_mean(duck.load(tmp_path / "big.parquet", POINTS), lambda x: x[:, 0])
    mem = MemoryEngine()
    assert _same_bits(means, mem.per_user_mean(mem.load(t, POINTS), lambda x: x[:, 0]))


def test_the_count_table_kernel_sorts_any_rows():
    """Rows ``(bin, size, count)`` in any order, bins with one size or thousands: the sorted keys and totals of
    ``np.unique``."""
    rng = np.random.default_rng(0)
    for n, bins in [(0, 5), (10, 3), (1000, 2), (200_000, 50)]:
        b, s, c = rng.integers(0, bins, n), rng.integers(1, 10**6, n), rng.integers(1, 5, n)
        keys, inverse = np.unique((b << 31) | s, return_inverse=True)
        totals = np.bincount(inverse, weights=c, minlength=keys.size).astype(np.int64)
        got = _sorted_table(b, s, c, bins)
        assert np.array_equal(got[0], keys) and np.array_equal(got[1], totals)


def test_key_count_parts_in_sql_rank_ties_by_text_and_clip_as_the_parts_do():
    """The key counts' per-person parts computed in SQL on DuckDB equal the parts themselves (the memory
    engine runs them): persons holding many keys with tied record counts (ties go to the key first in text
    order, with labels whose byte order and code-point order agree and differ from naive orders: "10" < "9",
    "Z" < "a" < "é"), records above every Linf, more keys than every L0, counted keys the data lacks, and key
    lists in any order. Catches a tie broken by another order, a clip at the wrong bound, a rank counted
    over keys not counted."""
    rng = np.random.default_rng(5)
    labels = np.array(["9", "10", "Z", "a", "é", "b b", "k1", "k2", "k3", "k4", "k5", "k6"], dtype=object)
    rows = [(u, labels[j]) for u in range(40) for j in rng.choice(12, rng.integers(1, 12), replace=False)
            for _ in range(int(rng.choice([1, 1, 2, 3, 40])))]  # fmt: skip
    table = pa.table({"user": [r[0] for r in rows], "item": [str(r[1]) for r in rows]})
    mem, duck = MemoryEngine(), DuckDBEngine()
    a, b = mem.load(table, ITEMS), duck.load(table, ITEMS)
    lists = (sorted(labels), sorted(["é", "10", "Z", "zz", "k3"]))
    for counted in (np.array(keys, dtype=object) for keys in lists):
        for part, width in ((partial(kept_grid_part, counted=counted, l0s=(3, 1, 256), linfs=(2, 1, 64)), 9),
                            (partial(bounded_counts_part, counted=counted, l0=2, linf=3), 1),
                            (partial(bounded_counts_part, counted=counted, l0=1, linf=100), 1)):  # fmt: skip
            got, want = duck.key_record_sums(b, part, width), mem.key_record_sums(a, part, width)
            assert got[0].tolist() == want[0].tolist() and np.array_equal(got[1], want[1]), (counted, part)
            # the kept grid stays sparse: bounds up to 10^6 (the grid's limit) as in memory
            wide = partial(kept_grid_part, counted=counted, l0s=(1, 10**6), linfs=(1, 10**6))
            assert np.array_equal(duck.key_record_sums(b, wide, 4)[1], mem.key_record_sums(a, wide, 4)[1])
            # any other per-person function runs on the ordered stream of whole persons (small batches here)
            small = DuckDBEngine(batch_rows=16)
            other = small.key_record_sums(small.load(table, ITEMS), lambda sets, mult, p=part: p(sets, mult), width)
            assert other[0].tolist() == want[0].tolist() and np.array_equal(other[1], want[1]), (counted, part)


def test_outside_items_give_the_same_persons_and_sizes_on_memory_and_duckdb():
    """A person whose items all lie outside the declared domain is no person on either engine (from lists as
    from records), so the sizes a bounded release reads agree."""
    dom = FiniteDomain(np.array(["a", "b", "c"], dtype=object))
    ds = UserDataset.from_lists([["a", "b"], ["q"], ["c", "zz"]], domain=dom)
    duck = DuckDBEngine()
    mem, dk = MemoryEngine().user_sizes(ds), duck.user_sizes(duck.load(ds, ITEMS, dom))
    assert mem == dk and (mem.smallest, mem.largest, mem.users) == (1, 2, 2)

"""The chunked engine (DuckDB's ordered stream of whole users): whole users per chunk in any row order,
aggregates equal to the in-memory ones and to brute force, bounded-memory releases, refusals."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from tests.engines import brute
from userdp import releases
from userdp.data import BoxDomain, FiniteDomain, UserDataset
from userdp.dem import GKRR, itemwise_guarantee
from userdp.engines import ChunkedEngine, Columns, MemoryEngine, iter_user_chunks
from userdp.errors import DataError, ParameterError
from userdp.heatmaps import user_grid_sum
from userdp.metrics import ClusteredMetric
from userdp.noise import KeyedStreams, keyed_keep

BOX = BoxDomain((0.0, 0.0), (1.0, 1.0))
POINTS = Columns("u", points=("lat", "lon"))


@pytest.fixture
def points_file(tmp_path):
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 40, 3000)
    users = np.repeat(np.arange(3000) * 7 + 3, sizes)  # grouped (sorted) arbitrary keys
    pts = rng.random((users.size, 2))
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"u": users, "lat": pts[:, 0], "lon": pts[:, 1]}), path, row_group_size=5000)
    return path


@pytest.mark.parametrize("rows", [50, 777, 10**6])
def test_chunks_hold_whole_users_and_sums_are_identical(points_file, rows):
    chunks = list(iter_user_chunks(points_file, "u", items=["lat", "lon"], domain=BOX, rows_per_chunk=rows))
    keys = np.concatenate([c.user_ids for c in chunks])
    assert keys.size == np.unique(keys).size == 3000
    whole = UserDataset.from_file(points_file, user="u", items=["lat", "lon"], domain=BOX)
    eng = ChunkedEngine(rows)
    s = eng.grid_sum(eng.load(points_file, POINTS, BOX), BOX, 16)
    assert np.array_equal(s, user_grid_sum(whole, 16, BOX))  # bit for bit, however the users are split


def test_csv_and_jsonl_are_read_in_chunks(tmp_path, points_file):
    """CSV and JSON lines are read in batches of about ``rows_per_chunk`` rows (not the reader's blocks of about
    1 MB), each chunk of whole users, and give the in-memory grid sums."""
    t = pq.read_table(points_file)
    pcsv.write_csv(t, tmp_path / "p.csv")
    with open(tmp_path / "p.jsonl", "w") as fh:
        for r in t.slice(0, 5000).to_pylist():
            fh.write(f'{{"u": {r["u"]}, "lat": {r["lat"]!r}, "lon": {r["lon"]!r}}}\n')
    for path in (tmp_path / "p.csv", tmp_path / "p.jsonl"):  # batches of at most 700 rows, not the reader's blocks
        sizes = [c.n_items for c in iter_user_chunks(path, "u", items=["lat", "lon"], rows_per_chunk=700)]
        assert len(sizes) > 6 and max(sizes) < 700 + 40  # a chunk: a batch's whole users and the carried one
    mem = MemoryEngine()
    for path, rows in ((tmp_path / "p.csv", None), (tmp_path / "p.jsonl", 5000)):
        eng = ChunkedEngine(700)
        ref = mem.grid_sum(mem.load(t if rows is None else t.slice(0, rows), POINTS), BOX, 8)
        assert np.array_equal(eng.grid_sum(eng.load(path, POINTS), BOX, 8), ref)


def test_heatmap_release_in_chunks_equals_memory(points_file):
    a = releases.heatmap(points_file, BOX, 16, 1.0, user="u", engine=ChunkedEngine(5000), rng=3)
    b = releases.heatmap(points_file, BOX, 16, 1.0, user="u", engine="memory", rng=3)
    assert a.value.shape == (16, 16) and a.value.sum() == pytest.approx(1.0)
    assert np.array_equal(a.value, b.value) and a.guarantee == b.guarantee


def test_itemwise_in_chunks_matches_the_in_memory_law():
    """The central release on the chunked engine (its default path: sizes, keyed GKRR per chunk, counts): the
    counts follow the law of GKRR at the reported alpha_0 and reject alpha_0 30% off either way (so the
    reported parameter is the one whose noise was drawn, not only a number the plan holds), and the guarantee
    is priv_emd_itemwise(central) at that alpha_0 for this data's m and n, within the request."""
    from scipy import stats

    space = ClusteredMetric(3, 2, 0.2)
    dom = FiniteDomain(np.arange(6))
    m, n = 5, 4000
    items = np.random.default_rng(1).choice(6, m * n, p=[0.7, 0.1, 0.1, 0.05, 0.05, 0.0])  # skewed: a0 shows
    table = pa.table({"user": np.repeat(np.arange(n), m), "item": items})
    rel = releases.itemwise(table, space, dom, 2.0, delta=1e-6, model="central", engine=ChunkedEngine(3001), rng=5)
    a0, h = rel.params["alpha0"], rel.params["h_delta"]
    counts = rel.extras["counts"]
    assert counts.sum() == m * n

    def p_value(alpha0):
        expected = np.bincount(items, minlength=6) @ GKRR(space, alpha0).transition_matrix()
        return stats.chi2.sf(((counts - expected) ** 2 / expected).sum(), 5)

    assert p_value(a0) > 1e-4
    assert p_value(a0 * 1.3) < 1e-12 and p_value(a0 / 1.3) < 1e-12
    ref, _ = itemwise_guarantee(a0, m, 1e-6, n, metric=repr(space), inner_delta=h)  # priv_emd_itemwise's accountant
    assert rel.guarantee == ref and rel.guarantee.alpha <= 2.0 and rel.guarantee.delta <= 1e-6


def test_chunked_refusals(tmp_path, points_file):
    dom = FiniteDomain(np.arange(4))
    space = ClusteredMetric(2, 2, 0.3)
    eng = ChunkedEngine(2)
    with pytest.raises(DataError, match="public number"):
        releases.itemwise(pa.table({"user": [1, 1, 2], "item": [0, 1, 2]}), space, dom, 2.0, engine=eng)
    with pytest.raises(ParameterError):
        releases.itemwise(pa.table({"user": [1], "item": [0]}), space, dom, -1.0, engine=eng)
    empty = pa.table({"user": pa.array([], pa.int64()), "item": pa.array([], pa.int64())})
    with pytest.raises(DataError, match="at least one user"):  # n is public for bounded d_EM-DP
        releases.itemwise(empty, space, dom, 2.0, model="central", delta=1e-6, engine=eng)
    with pytest.raises(DataError, match="public domain"):
        eng.load(points_file, Columns("u", "lat"), FiniteDomain.from_data(np.arange(3)))
    with pytest.raises(DataError, match="not found"):
        eng.load(points_file, Columns("u", points=("lat", "nope")), BOX)
    with pytest.raises(ParameterError):
        ChunkedEngine(0)
    path = tmp_path / "ungrouped.parquet"
    pq.write_table(pa.table({"u": [1, 1, 2, 2, 1], "lat": [0.1] * 5, "lon": [0.2] * 5}), path)
    assert eng.grid_sum(eng.load(path, POINTS, BOX), BOX, 4).sum() == pytest.approx(2.0)  # any order: 2 users
    pq.write_table(pa.table({"u": [1], "lat": [5.0], "lon": [0.2]}), tmp_path / "out.parquet")
    with pytest.raises(DataError, match="outside"):
        eng.grid_sum(eng.load(tmp_path / "out.parquet", POINTS, BOX), BOX, 4)


def test_drop_outside_across_chunks(tmp_path):
    """With drop_outside, a chunk whose points all lie outside contributes nothing (no error); so do all
    chunks outside, and no rows: the heatmaps are add/remove-one-user releases, and "no points inside the
    box" would reveal that nobody was there."""
    eng = ChunkedEngine(1)
    t = pa.table({"u": [1, 9], "lat": [5.0, 0.5], "lon": [5.0, 0.5]})
    s = eng.grid_sum(eng.load(t, POINTS), BOX, 4, drop_outside=True)
    assert s.sum() == pytest.approx(1.0)
    assert np.array_equal(eng.grid_sum(eng.load(t.slice(0, 1), POINTS), BOX, 4, drop_outside=True), np.zeros((4, 4)))
    assert np.array_equal(eng.grid_sum(eng.load(t.slice(0, 0), POINTS), BOX, 4), np.zeros((4, 4)))
    with pytest.raises(ParameterError):  # the public side is checked when no chunk comes
        eng.grid_sum(eng.load(t.slice(0, 0), POINTS), BOX, 0)


def test_empty_file_yields_no_chunks_and_releases(tmp_path):
    path = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"u": pa.array([], pa.int64()), "lat": pa.array([], pa.float64()),
                             "lon": pa.array([], pa.float64())}), path)  # fmt: skip
    assert list(iter_user_chunks(path, "u", items=["lat", "lon"], domain=BOX)) == []
    rel = releases.heatmap(path, BOX, 8, 1.0, user="u", engine="chunked", rng=1)
    assert np.all(np.isfinite(rel.value)) and rel.value.sum() == pytest.approx(1.0)


def test_a_user_larger_than_a_chunk_stays_whole(tmp_path):
    path = tmp_path / "big.parquet"
    users = np.r_[np.zeros(5000, dtype=np.int64), np.ones(3, dtype=np.int64)]
    pq.write_table(pa.table({"u": users, "lat": np.full(users.size, 0.5), "lon": np.full(users.size, 0.5)}), path)
    chunks = list(iter_user_chunks(path, "u", items=["lat", "lon"], domain=BOX, rows_per_chunk=1000))
    assert [list(c.counts()) for c in chunks] == [[5000], [3]]
    eng = ChunkedEngine(1000)
    sizes = eng.user_sizes(eng.load(path, POINTS))
    assert (sizes.smallest, sizes.largest, sizes.users) == (3, 5000, 2)


@pytest.mark.parametrize("min_rows", [1, 50, 1 << 20])
def test_count_tables_merged_chunk_by_chunk_equal_the_whole_table(monkeypatch, min_rows):
    """The chunked engine's running (bin, size) table, merged by linear merges of sorted tables as often as
    every chunk or only at the end, gives the same sums, bit for bit, as the table of all rows at once."""
    from userdp.engines import streams
    from userdp.engines.base import sum_by_size

    monkeypatch.setattr(streams, "_MERGE_MIN_ROWS", min_rows)
    rng = np.random.default_rng(7)
    rows, bins, sizes = streams._Rows(), [], []
    for _ in range(40):
        n = int(rng.integers(0, 400))
        b, s = rng.integers(0, 300, n), rng.integers(1, int(rng.integers(2, 40)), n)
        rows.add(b, s)
        bins.append(b)
        sizes.append(s)
    got = rows.total(300)
    assert np.array_equal(got, sum_by_size(np.concatenate(bins), np.concatenate(sizes), None, 300))
    assert rows.size and np.all(np.diff(rows.keys[: rows.size]) > 0)


# --------------------------------------------------------------------------------------------
# Whole persons per chunk: every chunking of small tables, checked against brute force (tests/engines/brute.py)
# --------------------------------------------------------------------------------------------

ITEMS = Columns("u", "x")
LETTERS = FiniteDomain(np.array(list("abcde"), dtype=object))
GROUPED = pa.table(
    {
        "u": [3, 3, 10, 11, 11, 11, 40, 41, 41, 41, 41, 42, 42, 100, 100],
        "x": list("aabcdaeabbcdeea"),
    }
)


def _assert_histograms(eng, table, domain=LETTERS):
    """The chunked engine's sums of per-person distributions and counts equal the brute-force ones."""
    data = eng.load(table, ITEMS, domain)
    for normalize in (True, False):
        want = brute.histogram_sum(table["u"], table["x"], domain.labels, normalize)
        assert np.allclose(eng.histogram_sum(data, normalize), want, rtol=0, atol=1e-12), normalize


@pytest.mark.parametrize("rows", range(1, GROUPED.num_rows + 2))
def test_every_chunking_keeps_each_person_whole(rows):
    """However the rows are batched (1 row per batch to all of them), each chunk holds whole persons, no person
    is in two chunks, the chunks hold every record, and the sizes and sums equal the brute-force ones. Catches a
    carry that leaves a person's last row behind (the person then split over two chunks) or drops a row."""
    want = brute.by_person(GROUPED["u"], GROUPED["x"])
    chunks = list(iter_user_chunks(GROUPED, "u", "x", domain=LETTERS, rows_per_chunk=rows))
    got = {}
    for c in chunks:
        for i, key in enumerate(c.user_ids.tolist()):
            assert key not in got, "a person in two chunks"
            got[key] = sorted(LETTERS.labels[c.user_items(i)].tolist())
    assert got == {k: sorted(v) for k, v in want.items()}
    eng = ChunkedEngine(rows)
    sizes = eng.user_sizes(eng.load(GROUPED, ITEMS, LETTERS))
    assert (sizes.smallest, sizes.largest, sizes.users) == brute.user_sizes(GROUPED["u"]) == (1, 4, 7)
    _assert_histograms(eng, GROUPED)


def _ungrouped_tables():
    """Small (u, x) tables whose persons' rows are not all contiguous."""
    yield pa.table({"u": [1, 2, 3, 2, 4, 5], "x": list("abcdea")})  # person 2 comes back after person 3
    rng = np.random.default_rng(3)
    for _ in range(15):
        n = int(rng.integers(4, 12))
        yield pa.table({"u": rng.integers(0, 5, n) * 10, "x": rng.choice(list("abcde"), n)})


def test_rows_in_any_order_count_each_person_once():
    """Rows not grouped by person, read in every batch size: each read counts every person once (the
    brute-force sums; a person's rows all in one chunk) -- never a person split in two, which would add two
    distributions of mass 1 (twice the sensitivity) -- and is never refused for its row order. The case of the
    review's survivor: person 2's rows come back after person 3."""
    for table in _ungrouped_tables():
        for rows in range(1, table.num_rows + 2):
            _assert_histograms(ChunkedEngine(rows), table)
            want = brute.by_person(table["u"], table["x"])
            chunks = list(iter_user_chunks(table, "u", "x", domain=LETTERS, rows_per_chunk=rows))
            keys = [k for c in chunks for k in c.user_ids.tolist()]
            assert keys == sorted(want), "a person in two chunks, or chunks out of order"
    first = next(_ungrouped_tables())
    chunks = iter_user_chunks(first, "u", "x", domain=LETTERS, rows_per_chunk=3)
    assert [c.user_ids.tolist() for c in chunks] == [[1], [2, 3, 4], [5]]  # person 2: both rows in one chunk
    a = releases.histogram(first, LETTERS, 1.0, user="u", item="x", engine=ChunkedEngine(3), rng=1)
    b = releases.histogram(first, LETTERS, 1.0, user="u", item="x", engine="memory", rng=1)
    assert np.array_equal(a.value, b.value)


def test_chunked_user_sizes_see_the_smallest_person_in_any_chunk():
    """The smallest and largest person sizes come from every chunk: a bounded release (PrivEMDLinear, central,
    no sampling, whose only size check this is) refuses persons of different sizes also when the smaller
    person comes in a later chunk. Catches sizes taken from the first chunk only."""
    users = np.r_[np.repeat(np.arange(6), 3), [6, 6]]
    table = pa.table({"u": users, "x": np.resize(np.array(list("abcde")), users.size)})
    for rows in (1, 4, 7, 100):
        eng = ChunkedEngine(rows)
        sizes = eng.user_sizes(eng.load(table, ITEMS, LETTERS))
        assert (sizes.smallest, sizes.largest, sizes.users) == brute.user_sizes(users) == (2, 3, 7)
    f = np.array([0.0, 0.25, 0.5, 0.75, 1.0]).__getitem__
    for rows in (4, 100):
        with pytest.raises(DataError, match="same public number"):
            releases.linear(table, f, 1.0, 5.0, user="u", item="x", domain=LETTERS, model="central", delta=1e-6,
                            engine=ChunkedEngine(rows), rng=1)  # fmt: skip
    same = table.slice(0, 18)  # six persons of three items: the release goes ahead
    rel = releases.linear(same, f, 1.0, 5.0, user="u", item="x", domain=LETTERS, model="central", delta=1e-6,
                          engine=ChunkedEngine(4), rng=1)  # fmt: skip
    assert np.isfinite(rel.value)


def test_grid_sums_in_chunks_equal_the_brute_force_sums():
    """Each person's points inside the box as a distribution of mass 1, points outside dropped (a person with
    none inside adds nothing), in chunks of every size: the brute-force grid sum."""
    rng = np.random.default_rng(8)
    users = np.repeat(np.arange(12) * 5, rng.integers(1, 6, 12))
    pts = rng.uniform(-0.3, 1.1, (users.size, 2))
    pts[users == 10] = [2.0, 2.0]  # a person with no point inside the box
    table = pa.table({"u": users, "lat": pts[:, 0], "lon": pts[:, 1]})
    want = brute.grid_sum(users, pts, BOX, (4, 6))
    inside = {u for u, p in zip(users.tolist(), pts, strict=True) if brute.cell_of(p, BOX, (4, 6)) is not None}
    assert want.sum() == pytest.approx(len(inside)) and 5 < len(inside) < 12  # some persons hold no point inside
    for rows in (1, 3, 10, 1000):
        eng = ChunkedEngine(rows)
        got = eng.grid_sum(eng.load(table, POINTS), BOX, (4, 6), drop_outside=True)
        assert np.allclose(got, want, rtol=0, atol=1e-12)


def _kept_and_held(k):
    """Weights of a person keeping ``k`` items: ``k`` itself (so a sum shows the kept count) and 1."""
    k = np.asarray(k, dtype=np.int64)
    return np.column_stack([k, np.ones(k.size, dtype=np.int64)])


def _bounding_table():
    """Persons holding 1 to 9 distinct integer items (text order differs from numeric order: "10" < "9"), some
    held twice; person keys not in numeric order of rows."""
    rng = np.random.default_rng(12)
    users, items = [], []
    for p in range(40):
        held = rng.choice([2, 9, 10, 11, 33, 100, 101, 7, 8], int(rng.integers(1, 10)), replace=False)
        held = np.r_[held, held[:2]]  # records repeated: a person holds an item once
        users += [p * 3 + 1] * held.size
        items += held.tolist()
    return pa.table({"u": np.array(users), "x": np.array(items)})


@pytest.mark.parametrize("rows", [1, 7, 50, 10**6])
def test_bounded_item_sums_in_chunks_equal_the_definition(rows):
    """A person's kept items: all of them up to ``cap``, else the ``cap`` positions (in the labels' text order)
    of the smallest words of the person's keyed stream for the bounding purpose; each kept item gets the row of
    weights of the kept count. Computed per person in the test; catches a bound off by one, weights of the
    held count, and a stream keyed by the person's position in a chunk instead of the person's key."""
    from functools import partial

    table, cap, streams = _bounding_table(), 3, KeyedStreams(21)
    eng = ChunkedEngine(rows)
    got = eng.bounded_item_sums(eng.load(table, ITEMS), cap, partial(keyed_keep, streams, cap=cap), _kept_and_held)
    want = brute.item_sums(table["u"], table["x"], cap,
                           lambda p, n: brute.kept_positions(streams, p, n, cap), _kept_and_held)  # fmt: skip
    assert brute.item_sums_of(got) == want
    held = {p: len(set(x)) for p, x in brute.by_person(table["u"], table["x"]).items()}
    assert sum(r[1] for r in want.values()) == sum(min(n, cap) for n in held.values())  # at most cap per person
    assert max(held.values()) > cap + 1  # not vacuous: persons above the bound by more than one


@pytest.mark.parametrize("rows", [1, 4, 10**6])
def test_key_records_in_chunks_add_up_a_person_s_records_of_a_key(rows):
    """One entry per person and key, with the person's number of records of that key (also when a person's
    records of one key come in different batches), as counted in the test."""
    table = pa.table({"u": [5, 5, 5, 5, 6, 7, 7, 7, 9, 9], "x": list("aabaccccab")})
    eng = ChunkedEngine(rows)
    got = brute.key_records_of(eng.key_records(eng.load(table, ITEMS)))
    assert got == brute.key_records(table["u"], table["x"])
    assert got[(5, "a")] == 3 and got[(7, "c")] == 3

"""The chunked engine: whole users per chunk, aggregates equal to the in-memory ones, bounded-memory releases,
refusals."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from userdp import releases
from userdp.data import BoxDomain, FiniteDomain, UserDataset
from userdp.dem import GKRR, itemwise_guarantee
from userdp.engines import ChunkedEngine, Columns, MemoryEngine, iter_user_chunks
from userdp.errors import DataError, ParameterError
from userdp.heatmaps import user_grid_sum
from userdp.metrics import ClusteredMetric

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
    t = pq.read_table(points_file)
    pcsv.write_csv(t, tmp_path / "p.csv")
    with open(tmp_path / "p.jsonl", "w") as fh:
        for r in t.slice(0, 5000).to_pylist():
            fh.write(f'{{"u": {r["u"]}, "lat": {r["lat"]!r}, "lon": {r["lon"]!r}}}\n')
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
    """The central release on the chunked engine: the guarantee of priv_emd_itemwise(central) at the same
    alpha_0, and the expected histogram of GKRR's table."""
    space = ClusteredMetric(3, 2, 0.2)
    dom = FiniteDomain(np.arange(6))
    m, n = 5, 4000
    items = np.random.default_rng(1).integers(0, 6, m * n)
    table = pa.table({"user": np.repeat(np.arange(n), m), "item": items})
    rel = releases.itemwise(table, space, dom, 2.0, delta=1e-6, model="central", engine=ChunkedEngine(3001), rng=5)
    a0, h = rel.params["alpha0"], rel.params["h_delta"]
    ref, _ = itemwise_guarantee(a0, m, 1e-6, n, metric=repr(space), inner_delta=h)  # priv_emd_itemwise's accountant
    assert rel.guarantee == ref and rel.guarantee.alpha <= 2.0 and rel.guarantee.delta <= 1e-6
    counts = rel.extras["counts"]
    assert counts.sum() == m * n
    expected = np.bincount(items, minlength=6) @ GKRR(space, a0).transition_matrix()
    assert np.all(np.abs((counts - expected) / np.sqrt(expected)) < 5)


def test_chunked_refusals(tmp_path, points_file):
    dom = FiniteDomain(np.arange(4))
    space = ClusteredMetric(2, 2, 0.3)
    eng = ChunkedEngine(2)
    ungrouped = pa.table({"user": [1, 1, 2, 2, 1], "item": [0, 1, 2, 3, 0]})
    with pytest.raises(DataError, match="two chunks"):
        releases.itemwise(ungrouped, space, dom, 2.0, engine=eng)
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
    with pytest.raises(DataError, match="two chunks"):
        eng.grid_sum(eng.load(path, POINTS, BOX), BOX, 4)
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
    from userdp.engines import chunked
    from userdp.engines.base import sum_by_size

    monkeypatch.setattr(chunked, "_MERGE_MIN_ROWS", min_rows)
    rng = np.random.default_rng(7)
    rows, bins, sizes = chunked._Rows(), [], []
    for _ in range(40):
        n = int(rng.integers(0, 400))
        b, s = rng.integers(0, 300, n), rng.integers(1, int(rng.integers(2, 40)), n)
        rows.add(b, s)
        bins.append(b)
        sizes.append(s)
    got = rows.total(300)
    assert np.array_equal(got, sum_by_size(np.concatenate(bins), np.concatenate(sizes), None, 300))
    assert rows.size and np.all(np.diff(rows.keys[: rows.size]) > 0)


def test_seen_users_kept_as_runs_still_refuse_a_user_seen_before():
    """Integer user keys in order are kept as runs of consecutive values (a few numbers for a file of users
    numbered in order), and a chunk that goes back still finds every earlier key, gaps and extremes included."""
    from userdp.engines.chunked import _SeenUsers

    big = np.iinfo(np.int64)
    chunks = [np.arange(c * 1000, c * 1000 + 900, dtype=np.int64) for c in range(50)]
    chunks.append(np.array([10**12, 10**12 + 2, big.max], dtype=np.int64))
    seen = _SeenUsers()
    for c in chunks:
        seen.add(c)
    assert seen.nbytes < 2000  # 50 chunks of runs and one of 3 keys, not 45,003 keys
    assert np.array_equal(np.sort(seen._all()), np.concatenate(chunks))
    gapped = _SeenUsers()
    gapped.add(np.arange(0, 20_000, 2, dtype=np.int64))  # runs of one would double it: kept as keys
    assert gapped.nbytes == 10_000 * 8
    for back in ([899], [49_001, 10**12 + 1], [big.max - 1, 10**12 + 2], [5, 10**13]):
        keys = np.array(back, dtype=np.int64)
        expect_refusal = bool(np.isin(keys, np.concatenate(chunks)).any())
        fresh = _SeenUsers()
        for c in chunks:
            fresh.add(c)
        if expect_refusal:
            with pytest.raises(DataError, match="two chunks"):
                fresh.add(keys)
        else:
            fresh.add(keys)
            assert np.array_equal(np.sort(fresh._all()), np.union1d(np.concatenate(chunks), keys))
    low = _SeenUsers()
    low.add(np.array([big.min, big.min + 1, 0], dtype=np.int64))
    with pytest.raises(DataError, match="two chunks"):
        low.add(np.array([big.min + 1], dtype=np.int64))

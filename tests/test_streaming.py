"""Chunked releases: equal to the in-memory aggregates, whole users per chunk, refusals."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from userdp.data import BoxDomain, FiniteDomain, UserDataset
from userdp.dem import GKRR, priv_emd_itemwise
from userdp.errors import DataError, ParameterError
from userdp.heatmaps import user_grid_sum
from userdp.metrics import ClusteredMetric
from userdp.streaming import grid_sum_chunks, itemwise_histogram_chunks, iter_user_chunks

BOX = BoxDomain((0.0, 0.0), (1.0, 1.0))


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
def test_chunks_hold_whole_users_and_sum_matches(points_file, rows):
    chunks = list(iter_user_chunks(points_file, "u", items=["lat", "lon"], domain=BOX, rows_per_chunk=rows))
    keys = np.concatenate([c.user_ids for c in chunks])
    assert keys.size == np.unique(keys).size == 3000
    whole = UserDataset.from_file(points_file, user="u", items=["lat", "lon"], domain=BOX)
    s = grid_sum_chunks(iter(chunks), 16, BOX)
    assert np.allclose(s, user_grid_sum(whole, 16, BOX), atol=1e-9)


def test_heatmap_release_from_chunks(points_file, rng):
    from userdp.releases import heatmap

    chunks = iter_user_chunks(points_file, "u", items=["lat", "lon"], domain=BOX, rows_per_chunk=5000)
    rel = heatmap(chunks, BOX, 16, 1.0, rng=rng)
    assert rel.value.shape == (16, 16) and rel.value.sum() == pytest.approx(1.0)


def test_itemwise_chunks_match_the_in_memory_law(rng):
    """Same guarantee as priv_emd_itemwise(central) and the same expected histogram."""
    space = ClusteredMetric(3, 2, 0.2)
    dom = FiniteDomain(np.arange(6))
    m, n = 5, 4000
    items = np.random.default_rng(1).integers(0, 6, m * n)
    chunks = [
        UserDataset(
            np.arange(0, 1000 * m + 1, m), items[i * 1000 * m : (i + 1) * 1000 * m], np.arange(1000) + 1000 * i, dom
        )
        for i in range(4)
    ]
    g = GKRR(space, 0.5)
    rel = itemwise_histogram_chunks(chunks, g, m, delta=1e-6, rng=rng)
    whole = UserDataset(np.arange(0, m * n + 1, m), items, None, dom)
    ref = priv_emd_itemwise(whole, g, "central", delta=1e-6, rng=rng)
    assert rel.guarantee == ref.guarantee and rel.params["n"] == n
    assert rel.value.sum() == m * n
    expected = np.bincount(items, minlength=6) @ g.transition_matrix()
    z = (rel.value - expected) / np.sqrt(expected)
    assert np.all(np.abs(z) < 5)


def test_streaming_refusals(tmp_path, points_file):
    dom = FiniteDomain(np.arange(4))
    g = GKRR(ClusteredMetric(2, 2, 0.3), 0.5)
    a = UserDataset(np.array([0, 2, 4]), np.array([0, 1, 2, 3]), np.array([1, 2]), dom)
    b = UserDataset(np.array([0, 2]), np.array([0, 1]), np.array([2]), dom)  # user 2 again
    with pytest.raises(DataError, match="two chunks"):
        itemwise_histogram_chunks([a, b], g, 2)
    with pytest.raises(DataError, match="public number"):
        itemwise_histogram_chunks([a], g, 3)
    with pytest.raises(ParameterError):
        itemwise_histogram_chunks([a], g, 0)
    with pytest.raises(DataError, match="at least one user"):  # n is public for bounded d_EM-DP
        itemwise_histogram_chunks([], g, 2)
    with pytest.raises(DataError, match="at least one user"):
        itemwise_histogram_chunks([UserDataset.from_lists([], domain=dom)], g, 2)
    with pytest.raises(DataError, match="public domain"):
        next(iter_user_chunks(points_file, "u", items=["lat", "lon"]))
    with pytest.raises(DataError, match="not found"):
        next(iter_user_chunks(points_file, "u", items=["lat", "nope"], domain=BOX))
    # rows not grouped by user: the second run of user 1 is refused
    path = tmp_path / "ungrouped.parquet"
    pq.write_table(pa.table({"u": [1, 1, 2, 2, 1], "lat": [0.1] * 5, "lon": [0.2] * 5}), path)
    with pytest.raises(DataError, match="two chunks"):
        list(iter_user_chunks(path, "u", items=["lat", "lon"], domain=BOX, rows_per_chunk=2))
    with pytest.raises(DataError, match="outside"):
        pq.write_table(pa.table({"u": [1], "lat": [5.0], "lon": [0.2]}), tmp_path / "out.parquet")
        list(iter_user_chunks(tmp_path / "out.parquet", "u", items=["lat", "lon"], domain=BOX))


def test_drop_outside_across_chunks(tmp_path):
    """With drop_outside, a chunk whose points all lie outside contributes nothing (no error); so do all
    chunks outside, and no chunks: the heatmaps are add/remove-one-user releases, and "no points inside the
    box" would reveal that nobody was there."""
    a = UserDataset.from_lists([[(5.0, 5.0)]], domain=None)
    b = UserDataset(np.array([0, 1]), np.array([[0.5, 0.5]]), np.array([9]), None)
    s = grid_sum_chunks([a, b], 4, BOX, drop_outside=True)
    assert s.sum() == pytest.approx(1.0)
    assert np.array_equal(grid_sum_chunks([a], 4, BOX, drop_outside=True), np.zeros((4, 4)))
    assert np.array_equal(grid_sum_chunks([], 4, BOX), np.zeros((4, 4)))
    with pytest.raises(ParameterError):  # the public side is still checked when no chunk comes
        grid_sum_chunks([], 6, BOX)


def test_empty_file_yields_no_chunks_and_releases(tmp_path, rng):
    from userdp.releases import heatmap

    path = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"u": pa.array([], pa.int64()), "lat": pa.array([], pa.float64()),
                             "lon": pa.array([], pa.float64())}), path)  # fmt: skip
    assert list(iter_user_chunks(path, "u", items=["lat", "lon"], domain=BOX)) == []
    rel = heatmap(iter_user_chunks(path, "u", items=["lat", "lon"], domain=BOX), BOX, 8, 1.0, rng=rng)
    assert np.all(np.isfinite(rel.value)) and rel.value.sum() == pytest.approx(1.0)


def test_itemwise_chunks_skip_chunks_of_no_users(rng):
    dom = FiniteDomain(np.arange(4))
    g = GKRR(ClusteredMetric(2, 2, 0.3), 0.5)
    a = UserDataset(np.array([0, 2, 4]), np.array([0, 1, 2, 3]), np.array([1, 2]), dom)
    rel = itemwise_histogram_chunks([UserDataset.from_lists([], domain=dom), a], g, 2, rng=rng)
    assert rel.params["n"] == 2 and rel.value.sum() == 4


def test_a_user_larger_than_a_chunk_stays_whole(tmp_path):
    path = tmp_path / "big.parquet"
    users = np.r_[np.zeros(5000, dtype=np.int64), np.ones(3, dtype=np.int64)]
    pq.write_table(pa.table({"u": users, "lat": np.full(users.size, 0.5), "lon": np.full(users.size, 0.5)}), path)
    chunks = list(iter_user_chunks(path, "u", items=["lat", "lon"], domain=BOX, rows_per_chunk=1000))
    assert [list(c.counts()) for c in chunks] == [[5000], [3]]

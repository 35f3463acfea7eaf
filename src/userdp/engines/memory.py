"""The in-memory engine: the whole table as one :class:`~userdp.data.UserDataset` (Arrow in, NumPy inside).

The module-level functions are the in-memory data plane; the chunked engine runs them on every chunk, and
the mechanisms' convenience entry points (which take a ``UserDataset``) call them too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit, prange

from ..data import BoxDomain, FiniteDomain, UserDataset, table_of, to_arrow
from ..data.dataset import kept_per_run
from ..data.sorting import sort_range
from ..errors import DataError
from ..metrics.spaces import grid_cells_inside
from ..noise import KeyedStreams
from ..noise.keyed import RANDOMIZE_PURPOSE, SAMPLE_PURPOSE
from ..text import tokenize_codes
from .base import (
    Columns,
    Engine,
    KeyValues,
    UserSizes,
    check_grid,
    edges_of_dataset,
    key_records_of_dataset,
    key_values_of_table,
    merge_int_sums,
    sum_by_size,
    sum_table,
    text_columns,
    user_count_table,
    user_means,
)

__all__ = [
    "MemoryEngine",
    "grid_rows",
    "grid_sum",
    "histogram_rows",
    "histogram_sum",
    "load_table",
    "per_user_mean",
    "sample_keyed",
    "randomize_keyed",
    "user_sizes",
]


def load_table(table: Any, columns: Columns, domain: FiniteDomain | BoxDomain | None = None) -> UserDataset:
    """A :class:`UserDataset` from an Arrow table (or anything :func:`userdp.data.to_arrow` takes) with the
    named columns; text items are split into words (:func:`userdp.data.tokenize`) with ``columns.tokenize``."""
    t = to_arrow(table)
    missing = [c for c in columns.names if c not in t.column_names]  # names: refuses a Columns naming no items
    if missing:
        raise DataError(f"column(s) {missing} not found; the table has columns {t.column_names}")
    if columns.tokenize:
        import pyarrow as pa

        col = t.column(columns.item)
        if t.num_rows and not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            raise DataError(f"--tokenize needs a text column; {columns.item!r} has type {col.type}")
        users, texts = t.column(columns.user), col
        if users.null_count or texts.null_count:
            raise DataError("the user and item columns must not have missing values")
        counts, codes, vocabulary = tokenize_codes(texts)  # tokenize() on every row, in one compiled pass
        if domain is None:
            domain = FiniteDomain(vocabulary, public=False)
        elif isinstance(domain, FiniteDomain):
            codes = domain.encode(vocabulary)[codes] if vocabulary.size else codes
            inside = codes >= 0  # a word outside the public domain is dropped (OUTSIDE_DOMAIN)
            if not inside.all():
                counts = kept_per_run(counts, inside)
                codes = codes[inside]
        else:
            raise DataError("--tokenize makes the items words; a point box does not apply")
        return UserDataset.from_rows(users.to_numpy(zero_copy_only=False), counts, codes, domain)
    if columns.item is not None:
        return UserDataset.from_table(t, user=columns.user, item=columns.item, domain=domain)
    return UserDataset.from_table(t, user=columns.user, items=list(columns.points), domain=domain)


def user_sizes(ds: UserDataset) -> UserSizes:
    """Smallest and largest user size, and the number of users."""
    c = ds.counts()
    return UserSizes(int(c.min()) if c.size else 0, int(c.max()) if c.size else 0, int(c.size))


_OUTSIDE = (
    "some points lie outside the declared box; pass a larger public box, or drop them with "
    "drop_outside=True (--drop-outside on the command line)"
)


def grid_rows(ds: UserDataset, shape: int | tuple[int, int], box: BoxDomain | None = None, drop_outside: bool = False):
    """The rows ``(cell, size of the point's user)`` of every point inside the public ``box`` on the
    ``rows x cols`` grid ``shape`` (:func:`~userdp.metrics.grid_cells`; row index = first coordinate, e.g.
    latitude).

    Points outside the box are an error unless ``drop_outside`` (then they are dropped and a user left with
    no point contributes nothing; how many were dropped is data-dependent and is not reported).
    """
    if not ds.is_points or ds.dim != 2:
        raise DataError("heatmaps need 2-D point items (e.g. lat, lon)")
    box = box or ds.require_box()
    shape = check_grid(box, shape)
    cells, inside, all_inside = grid_cells_inside(ds.items, box, shape)  # one compiled pass
    users = ds.user_index()
    if not all_inside:
        if not drop_outside:
            raise DataError(_OUTSIDE)
        cells, users = cells[inside], users[inside]
    size = np.bincount(users, minlength=ds.n_users)
    return cells, size[users]


def grid_sum(
    ds: UserDataset, shape: int | tuple[int, int], box: BoxDomain | None = None, drop_outside: bool = False
) -> np.ndarray:
    """``s = sum_i p_i`` on the ``rows x cols`` grid ``shape`` (an ``int`` is square): each user's points
    gridded (:func:`grid_rows`) as a distribution (mass 1 per user), summed over users
    (:func:`~userdp.engines.base.sum_by_size`). A user with no points, and a dataset with no users, contribute
    nothing: the sum is then all zeros and the release goes ahead (under add/remove-one-user neighbours an
    empty user changes nothing)."""
    if not ds.is_points or ds.dim != 2:
        raise DataError("heatmaps need 2-D point items (e.g. lat, lon)")
    box = box or ds.require_box()
    rows, cols = check_grid(box, shape)
    cells, _, all_inside = grid_cells_inside(ds.items, box, (rows, cols))  # -1 outside the box
    if not all_inside and not drop_outside:
        raise DataError(_OUTSIDE)
    # the rows of grid_rows, tabled straight from the users' offsets (one compiled counting sort)
    return sum_table(*user_count_table(ds.offsets, cells, rows * cols), rows * cols).reshape(rows, cols)


def histogram_rows(ds: UserDataset, normalize: bool = True):
    """The rows ``(item code, size of the item's user)`` (or size 1 for the count histogram)."""
    size = ds.counts()
    return ds.items, np.repeat(size, size) if normalize else np.ones(ds.n_items, np.int64)


def histogram_sum(ds: UserDataset, normalize: bool = True) -> np.ndarray:
    """``sum_i K~_i`` (``normalize``; users with no items contribute nothing) or the count histogram of
    ``K_G`` over the dataset's finite domain."""
    return sum_by_size(*histogram_rows(ds, normalize), None, ds.domain_size)


def per_user_mean(ds: UserDataset, query: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Every user's mean of ``query`` over its items (:func:`~userdp.engines.base.user_means`), users in key
    order; every user must hold an item."""
    ds.require_items()
    v = np.asarray(query(ds.items), dtype=np.float64)
    if v.shape[:1] != (ds.n_items,):
        raise DataError("the query must give one value (or one row) per item")
    if getattr(query, "drops_outside", False):  # NaN marks an item outside the domain: dropped, user by user
        keep = np.isfinite(v.reshape(ds.n_items, -1)).all(axis=1)
        if not keep.all():
            kept = kept_per_run(np.diff(ds.offsets), keep)
            offsets = np.r_[0, np.cumsum(kept)].astype(np.int64)
            out = np.full((ds.n_users, 1 if v.ndim == 1 else v.shape[1]), np.nan)
            some = kept > 0  # a user with no item left gets NaN: the release leaves it out
            if some.any():
                out[some] = user_means(np.r_[offsets[:-1][some], offsets[-1]], v[keep])  # (empty runs out)
            return out
    if not np.all(np.isfinite(v)):
        raise DataError("the query's values contain NaN or inf")
    return user_means(ds.offsets, v)


def _sorted_items(items: np.ndarray) -> np.ndarray:
    """A user's items in canonical order (codes ascending; points lexicographically)."""
    return items[np.lexsort(items.T[::-1])] if items.ndim == 2 else np.sort(items, kind="stable")


@njit(cache=True, parallel=True)
def _sort_segments(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``values`` (integers) with every segment ``offsets[i]:offsets[i + 1]`` sorted ascending (a new array).
    A segment of at most 32 values is sorted by insertion (in place, no allocation), a longer one whose values
    span a range at most twice its length by counting, others by an introsort in place. Segments (users) are sorted in
    parallel, on every core numba's threads have (``prange``): each segment's result is its sort, so the
    output does not depend on the number of threads."""
    out = values.copy()
    for i in prange(offsets.size - 1):
        a, b = offsets[i], offsets[i + 1]
        if b - a < 2:
            continue
        if b - a <= 32:
            for j in range(a + 1, b):
                v = out[j]
                k = j - 1
                while k >= a and out[k] > v:
                    out[k + 1] = out[k]
                    k -= 1
                out[k + 1] = v
            continue
        lo, hi = values[a], values[a]
        for j in range(a + 1, b):
            v = values[j]
            if v < lo:
                lo = v
            elif v > hi:
                hi = v
        if np.uint64(hi) - np.uint64(lo) >= np.uint64(2 * (b - a)):  # the exact width, without overflow
            sort_range(out, a, b)  # an introsort in place (userdp.data.sorting)
            continue
        span = hi - lo + 1
        tally = np.zeros(span, dtype=np.int64)  # at most twice the segment: per segment, so per thread
        for j in range(a, b):
            tally[values[j] - lo] += 1
        pos = a
        for v in range(span):
            for _ in range(tally[v]):
                out[pos] = lo + v
                pos += 1
    return out


def sample_keyed(ds: UserDataset, s: int, streams: KeyedStreams) -> UserDataset:
    """``s`` items per user with replacement, from the user's sorted items, with the user's keyed stream
    (what :func:`userdp.noise.keyed_sample_indices` draws, user by user)."""
    ds.require_items()
    s = int(s)
    if s < 1:
        raise DataError(f"the per-user sample size must be at least 1, got {s}")
    batch = streams.batch(ds.user_ids, SAMPLE_PURPOSE)
    out = [
        _sorted_items(ds.user_items(i))[batch.source(i).integers(int(ds.offsets[i + 1] - ds.offsets[i]), size=s)]
        for i in range(ds.n_users)
    ]
    offsets = np.arange(ds.n_users + 1, dtype=np.int64) * s
    return UserDataset(offsets, np.concatenate(out), ds.user_ids, ds.domain)


def randomize_keyed(ds: UserDataset, randomizer: Any, streams: KeyedStreams, m: int | None = None) -> UserDataset:
    """Each user's item codes through ``randomizer`` with the user's keyed stream, sorted; with ``m``, every
    user must hold exactly ``m`` items.

    The result is :func:`userdp.noise.keyed_randomize` of every user, bit for bit. A randomizer with a
    ``randomize_users(codes, offsets, batch)`` method (GKRR) randomizes all users in one pass; any other runs
    user by user on each user's :class:`~userdp.noise.KeyedSource`."""
    if m is not None and ds.n_users and ds.require_equal_sizes() != m:
        raise DataError("every user must hold the public number of items m of this bounded release")
    if ds.is_points:
        raise DataError("keyed item randomization needs items from a finite domain, not points")
    offsets = np.asarray(ds.offsets, dtype=np.int64)
    if not ds.n_users:
        return UserDataset(ds.offsets, np.empty(0, dtype=np.int64), ds.user_ids, ds.domain)
    codes = _sort_segments(np.ascontiguousarray(ds.items, dtype=np.int64), offsets)
    batch = streams.batch(ds.user_ids, RANDOMIZE_PURPOSE)
    if hasattr(randomizer, "randomize_users"):
        out = randomizer.randomize_users(codes, offsets, batch)
    else:
        out = np.concatenate(
            [randomizer.randomize(codes[offsets[i] : offsets[i + 1]], batch.source(i)) for i in range(ds.n_users)]
        )
    out = np.ascontiguousarray(out, dtype=np.int64)
    if out.shape != codes.shape:
        raise DataError("the item randomizer must return one item for every item it is given")
    items = _sort_segments(out, offsets)
    return UserDataset(ds.offsets, items, ds.user_ids, ds.domain)


def _same_domain(a: Any, b: FiniteDomain) -> bool:
    return a is b or (
        isinstance(a, FiniteDomain) and a.public == b.public and len(a) == len(b) and bool(np.all(a.labels == b.labels))
    )


class MemoryEngine(Engine):
    """The whole table in memory as a :class:`UserDataset`. ``load`` takes a path (CSV, TSV, Parquet, JSON lines)
    or a :class:`~userdp.data.FileSource` (a headerless file, another delimiter),
    an Arrow table, a pandas or polars frame, a dict of columns, or a ``UserDataset`` (used as it is)."""

    name = "memory"
    supports_key_values = True

    def load(self, source: Any, columns: Columns, domain: FiniteDomain | BoxDomain | None = None) -> UserDataset:
        if isinstance(source, UserDataset):
            if isinstance(domain, FiniteDomain) and not _same_domain(source.domain, domain):
                raise DataError("the dataset's item domain is not the declared one; build it with that domain")
            return source
        return load_table(table_of(source, columns.names, text_columns(columns, domain)), columns, domain)

    def user_sizes(self, data: UserDataset) -> UserSizes:
        return user_sizes(data)

    def grid_sum(
        self, data: UserDataset, box: BoxDomain, shape: int | tuple[int, int], drop_outside: bool = False
    ) -> np.ndarray:
        return grid_sum(data, shape, box, drop_outside)

    def histogram_sum(self, data: UserDataset, normalize: bool = True) -> np.ndarray:
        data.require_public_domain()
        return histogram_sum(data, normalize)

    def per_user_mean(self, data: UserDataset, query: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        return per_user_mean(data, query)

    def edges(self, data: UserDataset) -> UserDataset:
        return edges_of_dataset(data)

    def key_records(self, data: UserDataset) -> tuple[UserDataset, np.ndarray]:
        return key_records_of_dataset(data)

    def sample_keyed(self, data: UserDataset, s: int, streams: KeyedStreams) -> UserDataset:
        return sample_keyed(data, s, streams)

    def randomize_keyed(
        self, data: UserDataset, randomizer: Any, streams: KeyedStreams, m: int | None = None
    ) -> UserDataset:
        return randomize_keyed(data, randomizer, streams, m)

    def load_key_values(self, source: Any, user: str, key: str, value: str) -> KeyValues:
        return key_values_of_table(table_of(source, [user, key, value], (user, key)), user, key, value)

    def key_value_sums(self, data: KeyValues, fn: Callable, width: int) -> tuple[np.ndarray, np.ndarray]:
        return merge_int_sums([fn(data)], int(width))

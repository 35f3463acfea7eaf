"""Aggregates over a stream of datasets of whole users: each chunk runs through the in-memory engine's functions
and only exact aggregates are kept and merged (the ``(bin, size)`` count tables, one row per user for means,
the edges, the per-item sums). The DuckDB engine uses them for whatever needs a person's items together in
Python (keyed per-user transformations, query means, keyed bounding), reading DuckDB's ``ORDER BY user``
stream; every result equals the in-memory engine's on the whole table, bit for bit."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..data import BoxDomain, FiniteDomain, UserDataset
from ..errors import DataError
from . import memory
from .base import (
    UserSizes,
    bounded_item_sums_of,
    count_table,
    edges_from_pairs,
    key_records_from_triples,
    merge_item_sums,
    sum_table,
)

__all__ = ["Stream", "user_sizes", "grid_sum", "histogram_sum", "per_user_mean", "edges", "bounded_item_sums",
           "key_records", "key_record_sums"]  # fmt: skip


@dataclass(frozen=True)
class Stream:
    """A re-readable stream of datasets of whole users (each user in one chunk) and their item domain."""

    chunks: Callable[[], Iterable[UserDataset]]
    domain: FiniteDomain | BoxDomain | None

    def __iter__(self) -> Iterator[UserDataset]:
        return iter(self.chunks())


def user_sizes(data: Stream) -> UserSizes:
    lo, hi, n = None, 0, 0
    for ds in data:
        if ds.n_users:
            c = ds.counts()
            lo = int(c.min()) if lo is None else min(lo, int(c.min()))
            hi, n = max(hi, int(c.max())), n + ds.n_users
    return UserSizes(lo or 0, hi, n)


def grid_sum(data: Stream, box: BoxDomain, shape: tuple[int, int], drop_outside: bool = False) -> np.ndarray:
    rows = _Rows()
    for ds in data:
        rows.add(*memory.grid_rows(ds, shape, box, drop_outside))
    return rows.total(shape[0] * shape[1]).reshape(shape)


def histogram_sum(data: Stream, normalize: bool = True) -> np.ndarray:
    if not isinstance(data.domain, FiniteDomain) or not data.domain.public:
        raise DataError("this release needs ids in a public finite domain; declare the domain")
    rows = _Rows()
    for ds in data:
        rows.add(*memory.histogram_rows(ds, normalize))
    return rows.total(len(data.domain))


def per_user_mean(data: Stream, query: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    keys, means = [], []
    for ds in data:
        if ds.n_users:
            keys.append(ds.user_ids)
            means.append(memory.per_user_mean(ds, query))
    if not keys:
        raise DataError("this release needs at least one user (the number of users is public for it)")
    return np.concatenate(means)[np.argsort(np.concatenate(keys), kind="stable")]


def edges(data: Stream) -> UserDataset:
    users, labels = [], []
    for ds in data:
        e = memory.MemoryEngine().edges(ds)
        users.append(np.repeat(e.user_ids, e.counts()))
        labels.append(e.domain.labels[e.items])
    if not users:
        return edges_from_pairs(np.empty(0, dtype=np.int64), np.empty(0, dtype=object))
    return edges_from_pairs(np.concatenate(users), np.concatenate(labels))


def bounded_item_sums(data: Stream, cap, keep, weights, width: int, exclude=None) -> tuple[np.ndarray, np.ndarray]:
    parts = []
    for ds in data:  # every chunk holds whole users: their bounding is final
        parts.append(bounded_item_sums_of(memory.MemoryEngine().edges(ds), cap, keep, weights, exclude))
    return merge_item_sums(parts, width)


def key_record_sums(data: Stream, fn, width: int) -> tuple[np.ndarray, np.ndarray]:
    parts = [fn(*memory.MemoryEngine().key_records(ds)) for ds in data]  # whole users per chunk: final
    return merge_item_sums(parts, int(width))


def key_records(data: Stream) -> tuple[UserDataset, np.ndarray]:
    users, labels, mults = [], [], []
    for ds in data:  # every chunk holds whole users: its (user, key) multiplicities are final
        kd, mult = memory.MemoryEngine().key_records(ds)
        users.append(np.repeat(kd.user_ids, kd.counts()))
        labels.append(np.asarray(kd.domain.labels)[kd.items])
        mults.append(mult)
    if not users:
        return key_records_from_triples(np.empty(0, dtype=np.int64), np.empty(0, dtype=object), np.empty(0))
    return key_records_from_triples(np.concatenate(users), np.concatenate(labels), np.concatenate(mults))


_MERGE_MIN_ROWS = 1 << 20  # count-table rows that may wait before a merge


@njit(cache=True)
def _merge_tables(ka: np.ndarray, ta: np.ndarray, kb: np.ndarray, tb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two count tables (sorted, distinct keys; integer totals) merged into one: equal keys add up. Two walks,
    the first to size the output exactly, so the merge holds the inputs and the result and nothing more."""
    n = i = j = 0
    while i < ka.size and j < kb.size:
        if ka[i] <= kb[j]:
            j += ka[i] == kb[j]
            i += 1
        else:
            j += 1
        n += 1
    n += (ka.size - i) + (kb.size - j)
    keys = np.empty(n, np.int64)
    totals = np.empty(n, np.int64)
    n = i = j = 0
    while i < ka.size and j < kb.size:
        if ka[i] < kb[j]:
            keys[n], totals[n] = ka[i], ta[i]
            i += 1
        elif ka[i] > kb[j]:
            keys[n], totals[n] = kb[j], tb[j]
            j += 1
        else:
            keys[n], totals[n] = ka[i], ta[i] + tb[j]
            i += 1
            j += 1
        n += 1
    while i < ka.size:
        keys[n], totals[n] = ka[i], ta[i]
        i += 1
        n += 1
    while j < kb.size:
        keys[n], totals[n] = kb[j], tb[j]
        j += 1
        n += 1
    return keys, totals


@njit(cache=True)
def _merge_into(keys: np.ndarray, totals: np.ndarray, m: int, kb: np.ndarray, tb: np.ndarray) -> int:
    """The table ``kb, tb`` merged into the table held in ``keys[:m], totals[:m]`` (both sorted, distinct
    keys), in place: the buffers must hold ``m + kb.size`` rows. Merges from the back, so no row is
    overwritten before it is read, then closes the gap equal keys left. Returns the merged table's length."""
    assert keys.size >= m + kb.size and totals.size >= m + kb.size and tb.size == kb.size
    i, j, w = m - 1, kb.size - 1, m + kb.size - 1
    while j >= 0:
        if i >= 0 and keys[i] > kb[j]:
            keys[w], totals[w] = keys[i], totals[i]
            i -= 1
        elif i >= 0 and keys[i] == kb[j]:
            keys[w], totals[w] = keys[i], totals[i] + tb[j]
            i -= 1
            j -= 1
        else:
            keys[w], totals[w] = kb[j], tb[j]
            j -= 1
        w -= 1
    gap = w - i  # rows i+1..w are free: the merged rows after them move down
    if gap > 0:
        n = m + kb.size
        for r in range(w + 1, n):
            keys[r - gap] = keys[r]
            totals[r - gap] = totals[r]
    return m + kb.size - gap


class _Rows:
    """The exact ``(bin, size)`` count table of :func:`~userdp.engines.base.sum_by_size`, built chunk by chunk:
    each chunk's rows are reduced to its table at once (sorted keys, integer totals); the chunks' tables wait
    until they outgrow a quarter of the running table, are merged with each other, and then merged into the
    running table in place (integer sums, no sort; its buffers grow by ``realloc``, which moves large arrays'
    pages without copying them). Memory holds one chunk, the running table and the tables waiting."""

    def __init__(self) -> None:
        self.keys = np.empty(0, np.int64)  # the running table's buffers; its rows are [:self.size]
        self.totals = np.empty(0, np.int64)
        self.size = 0
        self.waiting: list[tuple[np.ndarray, np.ndarray]] = []
        self.pending = 0  # rows waiting

    def add(self, bins: np.ndarray, sizes: np.ndarray) -> None:
        keys, totals = count_table(bins, sizes)
        # copies: the table may be a view of a much larger buffer of runs, which would stay alive while waiting
        self.waiting.append((np.array(keys, dtype=np.int64), np.array(totals, dtype=np.int64)))
        self.pending += keys.size
        if self.pending > max(_MERGE_MIN_ROWS, self.size // 4):
            self._merge()

    def _merge(self) -> None:
        tables, self.waiting, self.pending = self.waiting, [], 0
        while len(tables) > 1:  # pairwise, so each row is copied about log2(tables) times
            merged = []
            for i in range(0, len(tables) - 1, 2):
                (ka, ta), (kb, tb) = tables[i], tables[i + 1]
                tables[i] = tables[i + 1] = None  # each pair is freed as soon as it is merged
                merged.append(_merge_tables(ka, ta, kb, tb))
                del ka, ta, kb, tb
            tables = merged + tables[len(tables) - len(tables) % 2 :]
        if not tables:
            return
        kb, tb = tables.pop()
        need = self.size + kb.size
        if self.keys.size < need:
            grow = max(need, self.keys.size + self.keys.size // 4)
            # realloc in place. refcheck=False because a tracer or debugger holds extra references and would make
            # the check refuse; safe because no view of these buffers outlives a method of this class
            # (total() hands sum_table views that it drops before returning), and the class is private.
            self.keys.resize(grow, refcheck=False)
            self.totals.resize(grow, refcheck=False)
        self.size = _merge_into(self.keys, self.totals, self.size, kb, tb)

    def total(self, length: int) -> np.ndarray:
        self._merge()
        return sum_table(self.keys[: self.size], self.totals[: self.size], length)

"""Aggregates over a stream of datasets of whole users: each chunk runs through the in-memory engine's functions
and only exact aggregates are kept and merged (the ``(bin, size)`` count tables, one row per user for means,
the edges, the per-item sums). The DuckDB engine uses them for whatever needs a person's items together in
Python (keyed per-user transformations, query means, keyed bounding), reading DuckDB's ``ORDER BY user``
stream; every result equals the in-memory engine's on the whole table, bit for bit."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from ..data import BoxDomain, FiniteDomain, UserDataset
from ..errors import DataError
from . import memory
from .base import (
    UserSizes,
    bounded_item_sums_of,
    edges_from_pairs,
    key_records_from_triples,
    merge_item_sums,
)
from .chunked import _Rows

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


def bounded_item_sums(data: Stream, cap, keep, weights, width: int) -> tuple[np.ndarray, np.ndarray]:
    parts = []
    for ds in data:  # every chunk holds whole users: their bounding is final
        parts.append(bounded_item_sums_of(memory.MemoryEngine().edges(ds), cap, keep, weights))
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

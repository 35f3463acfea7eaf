"""The local NumPy engine."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import DataError
from ..noise import resolve_rng
from .base import Engine

if TYPE_CHECKING:
    from ..data import UserDataset
    from ..noise import RngLike


class LocalEngine(Engine):
    """Runs the data plane in memory with vectorized NumPy."""

    name = "local"

    def group_by_user(self, users: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        users = np.asarray(users)
        keys, inverse = np.unique(users, return_inverse=True)
        inverse = inverse.reshape(-1)
        order = np.argsort(inverse, kind="stable")
        counts = np.bincount(inverse, minlength=keys.size)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return offsets, order.astype(np.int64), keys

    def dedupe(self, ds: UserDataset) -> UserDataset:
        from ..data import UserDataset

        uidx = ds.user_index()
        if ds.is_points:
            rows = np.column_stack([uidx.astype(np.float64), ds.items])
            uniq = np.unique(rows, axis=0)
            u = uniq[:, 0].astype(np.int64)
            items = uniq[:, 1:]
        else:
            key = uidx * np.int64(ds.domain_size) + ds.items
            uniq = np.unique(key)
            u = uniq // ds.domain_size
            items = uniq % ds.domain_size
        counts = np.bincount(u, minlength=ds.n_users)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return UserDataset(offsets, items, ds.user_ids, ds.domain)

    def sample(self, ds: UserDataset, s: int, replace: bool, rng: RngLike) -> UserDataset:
        from ..data import UserDataset

        s = int(s)
        if s < 1:
            raise DataError(f"the per-user sample size must be at least 1, got {s}")
        src = resolve_rng(rng)
        counts = ds.counts()
        if replace:
            ds.require_items()
            highs = np.repeat(counts, s)
            pick = np.repeat(ds.offsets[:-1], s) + src.integers(highs)
            offsets = np.arange(ds.n_users + 1, dtype=np.int64) * s
            return UserDataset(offsets, ds.items[pick], ds.user_ids, ds.domain)
        # Without replacement: a uniform permutation of all items, then a stable sort by user, gives
        # every user a uniformly random order of its own items; keep the first min(s, |K_i|).
        perm = src.permutation(ds.n_items)
        uidx = ds.user_index()[perm]
        order = perm[np.argsort(uidx, kind="stable")]
        rank = np.arange(ds.n_items) - np.repeat(ds.offsets[:-1], counts)
        keep = order[rank < s]
        new_counts = np.minimum(counts, s)
        offsets = np.concatenate([[0], np.cumsum(new_counts)]).astype(np.int64)
        return UserDataset(offsets, ds.items[keep], ds.user_ids, ds.domain)

    def sample_keyed(self, ds: UserDataset, s: int, seed: int) -> UserDataset:
        """Sampling with replacement where user ``u``'s draws come from a generator seeded by
        ``user_seed(seed, key_u)`` over its items sorted by value: the same rows as the Spark engine, and
        independent of how users are split into partitions or tasks."""
        from ..data import UserDataset
        from .spark import keyed_choice

        ds.require_items()
        s = int(s)
        if s < 1:
            raise DataError(f"the per-user sample size must be at least 1, got {s}")
        out = []
        for i in range(ds.n_users):
            items = ds.user_items(i)
            order = np.lexsort(items.T[::-1]) if items.ndim == 2 else np.argsort(items, kind="stable")
            out.append(items[order][keyed_choice(seed, ds.user_ids[i], items.shape[0], s)])
        offsets = np.arange(ds.n_users + 1, dtype=np.int64) * s
        return UserDataset(offsets, np.concatenate(out), ds.user_ids, ds.domain)

    def histogram_sum(self, ds: UserDataset, normalize: bool = True) -> np.ndarray:
        k = ds.domain_size
        if not normalize:
            return np.bincount(ds.items, minlength=k).astype(np.float64)
        ds.require_items()
        w = np.repeat(1.0 / ds.counts(), ds.counts())
        return np.bincount(ds.items, weights=w, minlength=k)

    def per_user_mean(self, ds: UserDataset, item_values: np.ndarray) -> np.ndarray:
        ds.require_items()
        v = np.asarray(item_values, dtype=np.float64)
        if v.shape[0] != ds.n_items:
            raise DataError(f"expected one value row per item ({ds.n_items}), got {v.shape[0]}")
        sums = np.add.reduceat(v, ds.offsets[:-1], axis=0)
        cnt = ds.counts().astype(np.float64)
        return sums / (cnt[:, None] if v.ndim == 2 else cnt)

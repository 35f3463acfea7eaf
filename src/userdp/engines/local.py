"""The local NumPy engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DataError
from ..noise import KeyedStreams, resolve_rng
from .base import Engine

if TYPE_CHECKING:
    from ..data import UserDataset
    from ..noise import RngLike


# Purposes of the keyed per-user streams (one stream per user and purpose; see KeyedStreams.source).
SAMPLE_PURPOSE = "BoundedEMDReduction: sampling with replacement"
RANDOMIZE_PURPOSE = "local-model item randomization"


def keyed_sample_indices(streams: KeyedStreams, user_key: Any, size: int, s: int) -> np.ndarray:
    """``s`` indices drawn uniformly with replacement from ``range(size)`` with the user's keyed stream for
    :data:`SAMPLE_PURPOSE`. The local engine and the Spark executors both call this function."""
    return streams.source(user_key, SAMPLE_PURPOSE).integers(int(size), size=int(s))


def keyed_randomize(streams: KeyedStreams, user_key: Any, codes: np.ndarray, randomizer) -> np.ndarray:
    """One user's randomized item codes: ``randomizer`` applied to the user's sorted codes with the user's
    keyed stream for :data:`RANDOMIZE_PURPOSE`, sorted. The local engine and the Spark executors both call
    this function."""
    codes = np.sort(np.asarray(codes, dtype=np.int64))
    return np.sort(randomizer.randomize(codes, streams.source(user_key, RANDOMIZE_PURPOSE)))


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

    def sample_keyed(self, ds: UserDataset, s: int, rng: KeyedStreams | RngLike = None) -> UserDataset:
        """Sampling with replacement where user ``u``'s draws come from its keyed stream
        (:func:`keyed_sample_indices`) over its items sorted by value: the same rows as
        :meth:`~userdp.engines.spark.SparkEngine.sample_with_replacement` for the same
        :class:`~userdp.noise.KeyedStreams`, independent of how users are split into partitions or tasks.

        Parameters
        ----------
        ds:
            The dataset; every user must hold at least one item.
        s:
            Samples per user (at least 1).
        rng:
            A :class:`~userdp.noise.KeyedStreams` (share it with another engine to get the same rows), or
            ``None`` for a fresh 256-bit master from the OS CSPRNG, or a seed (reproducible, no privacy).
        """
        from ..data import UserDataset

        ds.require_items()
        s = int(s)
        if s < 1:
            raise DataError(f"the per-user sample size must be at least 1, got {s}")
        streams = KeyedStreams.from_rng(rng)
        out = []
        for i in range(ds.n_users):
            items = ds.user_items(i)
            order = np.lexsort(items.T[::-1]) if items.ndim == 2 else np.argsort(items, kind="stable")
            out.append(items[order][keyed_sample_indices(streams, ds.user_ids[i], items.shape[0], s)])
        offsets = np.arange(ds.n_users + 1, dtype=np.int64) * s
        return UserDataset(offsets, np.concatenate(out), ds.user_ids, ds.domain)

    def randomize_keyed(self, ds: UserDataset, randomizer, rng: KeyedStreams | RngLike = None) -> UserDataset:
        """Local-model item randomization where user ``u``'s items (sorted codes) are randomized with its
        keyed stream (:func:`keyed_randomize`): the same released multisets as
        :meth:`~userdp.engines.spark.SparkEngine.randomize_items` for the same
        :class:`~userdp.noise.KeyedStreams` and the same item labels.

        Parameters
        ----------
        ds:
            A dataset over a finite item domain.
        randomizer:
            An :class:`~userdp.dem.randomizers.ItemRandomizer` on item codes (e.g. GKRR).
        rng:
            As in :meth:`sample_keyed`.

        Returns
        -------
        UserDataset
            Each user's randomized items, sorted, with the same users and sizes.
        """
        from ..data import UserDataset

        if ds.is_points:
            raise DataError("keyed item randomization needs items from a finite domain, not points")
        streams = KeyedStreams.from_rng(rng)
        out = [keyed_randomize(streams, ds.user_ids[i], ds.user_items(i), randomizer) for i in range(ds.n_users)]
        items = np.concatenate(out).astype(np.int64) if out else np.empty(0, dtype=np.int64)
        return UserDataset(ds.offsets, items, ds.user_ids, ds.domain)

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

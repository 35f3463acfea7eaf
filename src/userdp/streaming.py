"""Releases over inputs larger than memory: the data arrive as chunks of *whole users*, each chunk is reduced
to a small aggregate, and only the aggregates are kept.

* :func:`iter_user_chunks` reads a Parquet file (rows grouped by user, e.g. sorted) in bounded memory and
  yields :class:`~userdp.data.UserDataset` chunks; a user never spans two chunks, and a user whose rows are
  not contiguous is refused (their contribution could not be bounded).
* :func:`grid_sum_chunks` — the heatmap aggregate ``s = sum_i p_i`` (each user a distribution on the grid),
  for :func:`userdp.releases.heatmap` and the heatmap mechanisms.
* :func:`itemwise_histogram_chunks` — PrivEMDItemWise in the central (shuffle) model: every item is
  randomized by the item-level randomizer, and the released multiset of all ``m n`` outputs is kept as its
  histogram (the same information as the shuffled multiset for a finite output alphabet).

Peak memory is one chunk plus the aggregate (``benchmarks/bench_memory.py``: 10^8 items, 10^7 points).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from .data import BoxDomain, FiniteDomain, UserDataset
from .errors import DataError, ParameterError
from .noise import RngLike, resolve_rng
from .privacy.guarantees import Model
from .release import Release

__all__ = ["iter_user_chunks", "grid_sum_chunks", "itemwise_histogram_chunks"]


class _SeenUsers:
    """User keys seen in earlier chunks, to refuse a user whose rows are not contiguous. Chunks whose keys
    all exceed every earlier key (a file sorted by user) are checked in O(chunk); otherwise against all
    earlier keys."""

    def __init__(self) -> None:
        self.parts: list[np.ndarray] = []
        self.top = None

    def add(self, keys: np.ndarray) -> None:
        keys = np.unique(np.asarray(keys))
        if keys.size == 0:
            return
        if self.top is not None:
            try:
                monotone = bool(keys[0] > self.top)
            except TypeError:
                monotone = False
            if not monotone:
                seen = np.concatenate(self.parts)
                if np.isin(keys, seen).any():
                    raise DataError(
                        "a user appears in two chunks (the rows must be grouped by user, e.g. sorted, and chunks "
                        "must carry distinct user ids); their contribution could not be bounded"
                    )
                self.parts = [np.union1d(seen, keys)]
                self.top = self.parts[0][-1]
                return
        self.parts.append(keys)
        self.top = keys[-1]


def iter_user_chunks(
    path: str | Path,
    user: str,
    item: str | None = None,
    items: Sequence[str] | None = None,
    domain: FiniteDomain | BoxDomain | None = None,
    rows_per_chunk: int = 1_000_000,
) -> Iterator[UserDataset]:
    """Chunks of whole users from a Parquet file whose rows are grouped by ``user``.

    ``domain`` is required and must be public (a caller-declared :class:`FiniteDomain` for ``item``, a
    :class:`BoxDomain` for the coordinate columns ``items``): a domain read off one chunk would be both
    private and inconsistent across chunks. A file with no rows yields no chunk (no users: the releases
    decide what that means under their neighbour relation).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if domain is None or (isinstance(domain, FiniteDomain) and not domain.public):
        raise DataError("reading in chunks needs a public domain (a FiniteDomain or BoxDomain you declare)")
    if rows_per_chunk < 1:
        raise ParameterError("rows_per_chunk must be positive")
    path = Path(path)
    if not path.exists():
        raise DataError(f"no such file: {path}")
    cols = [user] + ([item] if item is not None else list(items or []))
    # a buffered stream without read-ahead: with the defaults the reader's memory grows with the file
    # (measured: +140 MB from 2e6 to 1e7 rows); with these it stays flat (benchmarks/bench_memory.py)
    pf = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
    missing = [c for c in cols if c not in pf.schema_arrow.names]
    if missing:
        raise DataError(f"column(s) {missing} not found; the file has columns {pf.schema_arrow.names}")
    seen = _SeenUsers()
    carry: pa.Table | None = None

    def emit(t: pa.Table) -> UserDataset:
        ds = UserDataset.from_table(t, user=user, item=item, items=items, domain=domain)
        seen.add(ds.user_ids)
        return ds

    for batch in pf.iter_batches(batch_size=rows_per_chunk, columns=cols, use_threads=False):
        t = pa.Table.from_batches([batch])
        if carry is not None:
            t = pa.concat_tables([carry, t])
        if t.num_rows == 0:
            continue
        u = t.column(user).to_numpy(zero_copy_only=False)
        other = np.flatnonzero(u != u[-1])  # the last user's rows (contiguous) are carried to the next chunk
        start = int(other[-1]) + 1 if other.size else 0
        carry = t.slice(start)
        if start > 0:
            yield emit(t.slice(0, start))
    if carry is not None and carry.num_rows:
        yield emit(carry)


def grid_sum_chunks(chunks: Iterable[UserDataset], side: int, box: BoxDomain, drop_outside: bool = False) -> np.ndarray:
    """``sum_i p_i`` over all chunks (each user's points as a distribution on the ``side x side`` grid of the
    public ``box``); equal to :func:`userdp.heatmaps.user_grid_sum` on the concatenated data. No chunks, or
    no point inside the box, give the all-zero grid: the heatmaps are add/remove-one-user releases, for
    which no users is an input like any other."""
    from .heatmaps import user_grid_sum

    no_users = UserDataset(np.zeros(1, dtype=np.int64), np.empty((0, box.dim)), None, box)
    total = user_grid_sum(no_users, side, box)  # all zeros; checks side and box even if no chunk comes
    seen = _SeenUsers()
    for ds in chunks:
        seen.add(ds.user_ids)
        total = total + user_grid_sum(ds, side, box, drop_outside)
    return total


def itemwise_histogram_chunks(
    chunks: Iterable[UserDataset],
    randomizer,
    m: int,
    delta: float = 1e-9,
    numerical: bool = False,
    rng: RngLike = None,
) -> Release:
    """PrivEMDItemWise (Algorithm 2), central (shuffle) model, over chunks of whole users.

    ``m`` is the public number of items per user (every user must hold exactly ``m``; apply
    :class:`~userdp.dem.BoundedEMDReduction` per chunk otherwise). The value is the histogram (counts) of
    the ``m n`` randomized items — the shuffled multiset — and ``extras["histogram"]`` its normalized form;
    the guarantee is the accountant's for ``(alpha_0, m, n)`` as in :func:`userdp.dem.priv_emd_itemwise`.
    Bounded d_EM-DP keeps the number of users ``n`` public (replace-one-user neighbours), so a chunk of no
    users adds nothing and no users at all is refused.
    """
    from .dem.itemwise import itemwise_guarantee

    if isinstance(m, bool) or int(m) != m or m < 1:
        raise ParameterError(f"m must be a positive integer, got {m!r}")
    src = resolve_rng(rng)
    seen = _SeenUsers()
    counts: np.ndarray | None = None
    n = 0
    for ds in chunks:
        seen.add(ds.user_ids)
        if ds.n_users == 0:
            continue
        if ds.require_equal_sizes() != m:
            raise DataError(f"every user must hold the public number of items m = {m}")
        out = randomizer.randomize(ds.items, src)
        if out.ndim != 1:
            raise ParameterError("the chunked release needs a randomizer with a finite output alphabet")
        c = np.bincount(out, minlength=ds.domain_size)
        counts = c if counts is None else counts + c
        n += ds.n_users
    if counts is None:
        raise DataError("this bounded release needs at least one user (the number of users is public for it)")
    a0 = randomizer.guarantee.alpha
    g, route = itemwise_guarantee(a0, int(m), delta, n, numerical, metric=randomizer.guarantee.metric)
    return Release(
        counts,
        g,
        "PrivEMDItemWise (Algorithm 2), central, chunked",
        {"alpha0": a0, "m": int(m), "n": n, "model": Model.CENTRAL.value, "delta": delta, "route": route},
        None,
        {"histogram": counts / counts.sum(), "route": route, "alpha0": a0},
    )

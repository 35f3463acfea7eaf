"""The dataset: :class:`UserDataset` (n users, each a multiset of items, in CSR form), the grouping of records by
user (:func:`group_by_user`) and the checks of user keys."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from numba import njit

from ..errors import DataError
from ..noise import RngLike, resolve_rng
from .domains import BoxDomain, FiniteDomain, unique_inverse
from .io import _column_numpy, _require_columns, read_table, to_arrow
from .sorting import sort_range

if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = ["UserDataset", "group_by_user", "kept_per_run"]


def kept_per_run(counts: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """How many of each run's items ``keep`` keeps: runs of ``counts[r]`` consecutive items (a person's list, a
    row's words), ``keep`` one flag per item."""
    counts = np.asarray(counts, dtype=np.int64)
    return np.bincount(np.repeat(np.arange(counts.size), counts)[keep], minlength=counts.size)


def group_by_user(users: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group records by user key.

    Returns ``(offsets, order, user_keys)``: records ``order[offsets[i]:offsets[i+1]]`` belong to user
    ``user_keys[i]``; users are sorted by key and records keep their input order within a user.
    """
    users = np.asarray(users)
    if users.ndim == 1 and users.dtype.kind in "iuU" and users.size > 1 and bool(np.all(users[1:] >= users[:-1])):
        # already grouped and sorted (a file sorted by user): the runs, without a sort (the same result)
        starts = np.concatenate([[0], np.flatnonzero(users[1:] != users[:-1]) + 1]).astype(np.int64)
        offsets = np.concatenate([starts, [users.size]]).astype(np.int64)
        return offsets, np.arange(users.size, dtype=np.int64), users[starts]
    keys, inverse = unique_inverse(users)
    order = np.argsort(inverse, kind="stable")
    counts = np.bincount(inverse, minlength=keys.size)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return offsets, order.astype(np.int64), keys


def _user_keys(users: Sequence[Any] | np.ndarray) -> np.ndarray:
    """User keys as a 1-D array of integers or strings. Keys given as Python objects (a list, an object array)
    are typed by Arrow, not NumPy: all strings or all integers, never booleans or floats, which NumPy would
    convert (``[True, 1]`` becomes ``[1, 1]``: one added key merging two persons); strings keep every
    character (a NumPy string array drops trailing NULs)."""
    if not isinstance(users, np.ndarray) or users.dtype.kind == "O":
        seq = users if isinstance(users, np.ndarray) else np.array(list(users), dtype=object)
        if seq.ndim != 1:
            raise DataError("users must be a 1-D array")
        if seq.size:
            try:
                typed = pa.array(seq, from_pandas=False)
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                # (Arrow's message quotes the offending key: only its kind is reported)
                raise DataError(
                    "person ids must be all strings or all 64-bit integers, not a mix (nor floating-point numbers)"
                ) from None
            if typed.null_count:
                raise DataError("person ids have missing values")
            if pa.types.is_string(typed.type) or pa.types.is_large_string(typed.type):
                return seq
            if pa.types.is_integer(typed.type):
                return typed.to_numpy()
            raise DataError("person ids must be strings or integers, not floating-point numbers, booleans or objects")
    users = np.asarray(users)
    if users.ndim != 1:
        raise DataError("users must be a 1-D array")
    if users.size == 0 and users.dtype.kind not in "iuUSO":
        return np.empty(0, dtype=np.int64)  # no rows: no persons (an empty list has no type)
    if users.dtype.kind == "f":
        # a column becomes floats when any one row holds a fraction (JSON lines, a list of keys), and floats
        # merge persons (9007199254740993 and 9007199254740992 are one double): one added person could merge
        # two others, so no person key is a float
        raise DataError("person ids must be strings or integers, not floating-point numbers")
    if users.dtype.kind not in "iuUSO":
        raise DataError(f"unsupported user key type {users.dtype}")
    return users


@njit(cache=True)
def _copy_runs(src, starts, lengths, out):
    """``out = concatenate([src[s:s + n] for s, n in zip(starts, lengths)])``."""
    pos = 0
    for r in range(starts.size):
        s = starts[r]
        for j in range(lengths[r]):
            out[pos + j] = src[s + j]
        pos += lengths[r]


@njit(cache=True)
def _dedupe_runs(offsets, items, domain_size):
    """Per run ``items[offsets[i]:offsets[i+1]]``: its distinct values, sorted; returns (counts, values)."""
    n = offsets.size - 1
    seen = np.full(domain_size, -1, np.int64)
    out = np.empty(items.size, np.int64)
    counts = np.zeros(n, np.int64)
    pos = np.int64(0)  # typed: a literal 0 would compile sort_range for literal arguments too
    for u in range(n):
        start = pos
        for p in range(offsets[u], offsets[u + 1]):
            c = items[p]
            if seen[c] != u:
                seen[c] = u
                out[pos] = c
                pos += 1
        sort_range(out, start, pos)
        counts[u] = pos - start
    return counts, out[:pos].copy()


# --------------------------------------------------------------------------------------------
# The dataset
# --------------------------------------------------------------------------------------------


class UserDataset:
    """n users, each a multiset of items, stored in CSR form.

    Build one with :meth:`from_table`, :meth:`from_file`, :meth:`from_arrays` or :meth:`from_lists`.

    Attributes
    ----------
    offsets:
        ``int64`` array of length ``n_users + 1``; user ``i`` holds ``items[offsets[i]:offsets[i+1]]``.
    items:
        ``int64`` codes (finite domain) or ``float64`` points of shape ``(N, dim)``.
    user_ids:
        The original user keys, one per user (never released by a mechanism).
    domain:
        A :class:`FiniteDomain` for ids, a :class:`BoxDomain` or ``None`` for points.
    """

    def __init__(
        self,
        offsets: np.ndarray,
        items: np.ndarray,
        user_ids: np.ndarray | None = None,
        domain: FiniteDomain | BoxDomain | None = None,
    ) -> None:
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        if offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0 or np.any(np.diff(offsets) < 0):
            raise DataError("offsets must start at 0 and be non-decreasing")
        items = np.asarray(items)
        if items.shape[0] != offsets[-1]:
            raise DataError("offsets must end at the number of items")
        if isinstance(domain, FiniteDomain) or (domain is None and items.ndim == 1 and items.dtype.kind in "iu"):
            items = np.ascontiguousarray(items, dtype=np.int64)
            if items.ndim != 1:
                raise DataError("finite-domain items must be a 1-D array of codes")
            if domain is not None and items.size and (items.min() < 0 or items.max() >= len(domain)):
                raise DataError("item codes fall outside the finite domain")
        else:
            items = np.ascontiguousarray(items, dtype=np.float64)
            if items.ndim == 1:
                items = items[:, None]
            if items.ndim != 2:
                raise DataError("point items must have shape (N, dim)")
            if not np.all(np.isfinite(items)):
                raise DataError("point coordinates contain NaN or inf")
            if isinstance(domain, BoxDomain):
                if domain.dim != items.shape[1]:
                    raise DataError(f"box has dimension {domain.dim} but points have {items.shape[1]}")
                domain.check(items)
        n = offsets.size - 1
        if user_ids is None:
            user_ids = np.arange(n)
        user_ids = np.asarray(user_ids)
        if user_ids.shape != (n,):
            raise DataError("one user id per user (offsets has one entry more than there are users)")
        self.offsets = offsets
        self.items = items
        self.user_ids = user_ids
        self.domain = domain

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_arrays(
        cls,
        users: Sequence[Any] | np.ndarray,
        items: Sequence[Any] | np.ndarray,
        domain: FiniteDomain | BoxDomain | None = None,
    ) -> UserDataset:
        """Build from one record per item: ``users[j]`` holds ``items[j]``.

        Items given as strings or integers are ids in a finite domain (``domain`` given, or read off
        the data and marked non-public); items given as a float array of shape ``(N, dim)`` (or
        ``(N,)``) are points. No records give a dataset of no users (it contributes nothing to a
        release); with no records and no ``domain``, the items are ids unless ``items`` is a float array.
        """
        users = _user_keys(users)
        items_arr = np.asarray(items)
        if items_arr.shape[:1] != users.shape:
            raise DataError("one item (or point) per user key is needed")
        point_domain = isinstance(domain, BoxDomain)
        if isinstance(domain, FiniteDomain) and items_arr.dtype.kind == "f":
            # one fraction among the items would make every item a float (and then a code, not a label)
            raise DataError("item ids of a finite domain must be strings or integers, not floating-point numbers")
        if point_domain or items_arr.dtype.kind == "f" or items_arr.ndim == 2:
            if items_arr.dtype.kind not in "iuf":
                raise DataError(f"point coordinates must be numeric, not {items_arr.dtype}")
            codes = items_arr.astype(np.float64)
            if not np.all(np.isfinite(codes)):
                raise DataError("point coordinates contain NaN or inf")
        else:
            if items_arr.dtype.kind == "b":
                raise DataError("item ids must be strings or integers, not booleans")
            if items_arr.dtype.kind == "O":
                bad = [x for x in items_arr[:1000] if not isinstance(x, (str, int, np.integer)) or isinstance(x, bool)]
                if bad:
                    raise DataError(f"item ids must be strings or integers, found {type(bad[0]).__name__}")
            elif items_arr.dtype.kind not in "iuU":
                raise DataError(f"item ids must be strings or integers, not {items_arr.dtype}")
            if domain is None:  # read off the data: its distinct values and the codes in one pass
                labels, codes = unique_inverse(items_arr)
                domain = FiniteDomain(labels, public=False)
            else:
                codes = domain.encode(items_arr)
                inside = codes >= 0  # an item outside the public domain is dropped (OUTSIDE_DOMAIN)
                if not inside.all():
                    users, codes = users[inside], codes[inside]
        offsets, order, user_keys = group_by_user(users)
        return cls(offsets, codes[order], user_keys, domain)

    @classmethod
    def from_rows(
        cls,
        row_users: Sequence[Any] | np.ndarray,
        row_counts: np.ndarray,
        codes: np.ndarray,
        domain: FiniteDomain,
        keep_empty: bool = False,
    ) -> UserDataset:
        """Build from rows that each hold several items: row ``r`` belongs to ``row_users[r]`` and holds the
        next ``row_counts[r]`` of ``codes`` (codes in ``domain``), e.g. the words of one text per row.

        Equal to :meth:`from_arrays` of one record per item (``np.repeat(row_users, row_counts)`` and
        ``domain.labels[codes]``), without a key per item: the rows are grouped by user (stably) and their
        runs of codes copied in that order in one compiled pass. With ``keep_empty`` a user whose rows hold
        no item is kept, with no items (it contributes nothing to a release)."""
        users = _user_keys(row_users)
        row_counts = np.asarray(row_counts, dtype=np.int64)
        codes = np.ascontiguousarray(codes, dtype=np.int64)
        if row_counts.shape != users.shape or np.any(row_counts < 0) or int(row_counts.sum()) != codes.size:
            raise DataError("one non-negative item count per row, adding up to the number of codes, is needed")
        starts = np.concatenate([[0], np.cumsum(row_counts)[:-1]]).astype(np.int64)
        keep = np.arange(users.size) if keep_empty else np.flatnonzero(row_counts > 0)  # (as no record would)
        offsets, row_order, keys = group_by_user(users[keep])
        rows = keep[row_order]
        per_user = np.add.reduceat(row_counts[rows], offsets[:-1]) if rows.size else np.zeros(0, np.int64)
        user_offsets = np.concatenate([[0], np.cumsum(per_user)]).astype(np.int64)
        items = np.empty(codes.size, np.int64)
        _copy_runs(codes, starts[rows], row_counts[rows], items)
        return cls(user_offsets, items, keys, domain)

    @classmethod
    def from_lists(
        cls, per_user: Sequence[Sequence[Any]], domain: FiniteDomain | BoxDomain | None = None
    ) -> UserDataset:
        """Build from one list of items per user. Users may be empty and so may the list (no users): both
        contribute nothing to a release. With no items at all, pass ``domain`` (the item kind cannot be
        read off nothing)."""
        counts = np.fromiter((len(u) for u in per_user), dtype=np.int64, count=len(per_user))
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        flat = [x for u in per_user for x in u]
        if isinstance(domain, BoxDomain) or (flat and isinstance(flat[0], (list, tuple, np.ndarray, float))):
            dim = domain.dim if isinstance(domain, BoxDomain) else 1
            try:
                items = np.asarray(flat, dtype=np.float64).reshape(len(flat), -1) if flat else np.empty((0, dim))
            except (TypeError, ValueError):
                raise DataError("point items must be numbers") from None  # NumPy's message quotes the value
            return cls(offsets, items, None, domain)
        arr = np.asarray(flat)
        if domain is None:
            if arr.size == 0:
                raise DataError("cannot infer a domain from no items; pass domain=")
            domain = FiniteDomain.from_data(arr)
        codes = domain.encode(arr) if arr.size else np.empty(0, dtype=np.int64)
        inside = codes >= 0  # an item outside the public domain is dropped (OUTSIDE_DOMAIN)
        if not inside.all():  # a person left with none is no person (as from records); the others keep their keys
            kept = kept_per_run(counts, inside)
            person = (kept > 0) | (counts == 0)
            offsets = np.concatenate([[0], np.cumsum(kept[person])]).astype(np.int64)
            return cls(offsets, codes[inside], np.flatnonzero(person), domain)
        return cls(offsets, codes, None, domain)

    @classmethod
    def from_table(
        cls,
        table: Any,
        user: str,
        item: str | None = None,
        items: Sequence[str] | None = None,
        domain: FiniteDomain | BoxDomain | None = None,
    ) -> UserDataset:
        """Build from a table (pandas, polars, pyarrow or dict of columns).

        Name the user column and either one ``item`` column (ids) or several ``items`` columns
        (point coordinates, e.g. ``items=["lat", "lon"]``).
        """
        if (item is None) == (items is None) or (items is not None and len(items) == 0):
            raise DataError("name exactly one of item= (ids) or items= (point coordinate columns)")
        t = to_arrow(table)
        cols = [user] + ([item] if item is not None else list(items))
        _require_columns(t, cols)
        users = _column_numpy(t.column(user), user)
        if t.num_rows == 0:  # a dataset of no users; its columns' types say nothing (a header-only CSV has none)
            vals = np.empty(0, dtype=object) if item is not None else np.empty((0, len(items)))
            return cls.from_arrays(users, vals, domain=domain)
        if item is not None:
            col = t.column(item)
            typ = col.type
            if pa.types.is_dictionary(typ):
                col = col.cast(typ.value_type)
                typ = typ.value_type
            if not (pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_integer(typ)):
                raise DataError(
                    f"item column {item!r} has type {typ}; ids must be strings or integers "
                    "(use items=[...] for point coordinates)"
                )
            vals = _column_numpy(col, item)
        else:
            arrs = []
            for c in items:
                col = t.column(c)
                if not (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)):
                    raise DataError(f"coordinate column {c!r} has type {col.type}; it must be numeric")
                arrs.append(_column_numpy(col, c).astype(np.float64))
            vals = np.column_stack(arrs)
        return cls.from_arrays(users, vals, domain=domain)

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        user: str,
        item: str | None = None,
        items: Sequence[str] | None = None,
        domain: FiniteDomain | BoxDomain | None = None,
        format: str | None = None,
    ) -> UserDataset:
        """Build from a CSV, Parquet or JSON-lines file (see :func:`read_table`)."""
        cols = [user] + ([item] if item is not None else list(items or []))
        # as the engines read files: the person (and the item ids) as text, never typed by other rows
        text = [user] + ([item] if item is not None and not isinstance(domain, BoxDomain) else [])
        table = read_table(path, columns=cols, format=format, text=text)
        return cls.from_table(table, user=user, item=item, items=items, domain=domain)

    # -- basic properties -------------------------------------------------------------------------
    @property
    def n_users(self) -> int:
        return int(self.offsets.size - 1)

    @property
    def n_items(self) -> int:
        """Total number of items ``|K_G|``."""
        return int(self.offsets[-1])

    @property
    def is_points(self) -> bool:
        return self.items.dtype == np.float64

    @property
    def dim(self) -> int:
        """Point dimension (1 for finite-domain ids)."""
        return int(self.items.shape[1]) if self.is_points else 1

    @property
    def domain_size(self) -> int:
        if not isinstance(self.domain, FiniteDomain):
            raise DataError("this dataset's items are points, not ids in a finite domain")
        return len(self.domain)

    def counts(self) -> np.ndarray:
        """Per-user item counts ``|K_i|``."""
        return np.diff(self.offsets)

    def user_index(self) -> np.ndarray:
        """For every item, the index of the user holding it."""
        return np.repeat(np.arange(self.n_users, dtype=np.int64), self.counts())

    def user_items(self, i: int) -> np.ndarray:
        """Items of user ``i`` (``K_i``)."""
        return self.items[self.offsets[i] : self.offsets[i + 1]]

    def __len__(self) -> int:
        return self.n_users

    def __repr__(self) -> str:
        kind = f"points(dim={self.dim})" if self.is_points else f"ids(domain={self.domain!r})"
        return f"UserDataset(n_users={self.n_users}, n_items={self.n_items}, items={kind})"

    def nonempty_users(self) -> UserDataset:
        """The dataset without its users that hold no items. Under add/remove-one-user neighbours an empty
        user contributes nothing, so a release may drop it: the output law does not change."""
        keep = np.flatnonzero(self.counts() > 0)
        return self if keep.size == self.n_users else self.subset_users(keep)

    def require_items(self) -> UserDataset:
        """Raise :class:`DataError` unless there is a user and every user holds an item.

        For the d_EM releases that call it, a user's data is a non-empty multiset (its normalized histogram
        ``K~_i`` must exist) and the number of users is public (local or replace-one-user neighbours).
        Releases under add/remove-one-user neighbours do not call it: there an empty user, or an empty
        dataset, contributes nothing and the release goes ahead. The message never says how many users
        are empty.
        """
        if self.n_users == 0:
            raise DataError("this release needs at least one user (the number of users is public for it)")
        if np.any(self.counts() == 0):
            raise DataError(
                "this release needs every user to hold at least one item (d_EM compares the normalized "
                "histograms of non-empty multisets)"
            )
        return self

    def require_equal_sizes(self) -> int:
        """The common number of items ``m`` of every user (bounded releases); a :class:`DataError` if users
        differ or hold nothing. The message names no count read off the data."""
        c = self.counts()
        if c.size == 0:
            raise DataError("this bounded release needs at least one user (the number of users is public for it)")
        if c.min() < 1 or c.min() != c.max():
            raise DataError(
                "this bounded release needs every user to hold the same public number of items m; "
                "apply BoundedEMDReduction (sampling with replacement) first"
            )
        return int(c[0])

    def require_public_domain(self) -> UserDataset:
        """Raise :class:`DataError` unless the items come from a caller-declared (public) finite domain."""
        if not isinstance(self.domain, FiniteDomain):
            raise DataError("this release needs ids in a finite domain")
        if not self.domain.public:
            raise DataError(
                "the item domain was read off the data; pass the public domain (FiniteDomain(labels)) "
                "so that the release does not reveal which items occur"
            )
        return self

    def require_box(self) -> BoxDomain:
        """The dataset's public :class:`BoxDomain` (raise if the points have none)."""
        if not isinstance(self.domain, BoxDomain):
            raise DataError("this release needs point items inside a public BoxDomain; pass domain=BoxDomain(...)")
        return self.domain

    # -- histograms (K~_i and K_G) ------------------------------------------------------------
    def histograms(self, normalize: bool = True) -> sp.csr_matrix:
        """Per-user histograms as a sparse ``n_users x k`` matrix (rows ``K~_i`` if ``normalize``; a user
        with no items has a zero row: it contributes nothing)."""
        k = self.domain_size
        if normalize:
            c = self.counts()
            w = np.repeat(1.0 / np.maximum(c, 1), c)
        else:
            w = np.ones(self.n_items)
        import scipy.sparse as sp  # imported on use: scipy.sparse costs 0.25 s to import

        m = sp.csr_matrix((w, (self.user_index(), self.items)), shape=(self.n_users, k))
        m.sum_duplicates()
        return m

    def global_histogram(self, normalize: bool = True) -> np.ndarray:
        """Histogram of ``K_G`` (normalized to sum 1 if ``normalize``)."""
        h = np.bincount(self.items, minlength=self.domain_size).astype(np.float64)
        if normalize:
            if self.n_items == 0:
                raise DataError("the dataset has no items")
            h /= self.n_items
        return h

    # -- per-user transformations of the in-memory dataset --------------------------------------------
    def dedupe(self) -> UserDataset:
        """Keep each distinct item once per user (sets instead of multisets), sorted within each user."""
        if self.is_points:
            uidx = self.user_index()
            rows = np.column_stack([uidx.astype(np.float64), self.items])
            uniq = np.unique(rows, axis=0)
            u = uniq[:, 0].astype(np.int64)
            items = uniq[:, 1:]
        else:
            # each user's distinct codes, sorted (what np.unique of (user, code) pairs gives), in one compiled
            # pass with a mark per code instead of a sort of all N pairs (IMDB's 12M words: 1 s -> 0.1 s)
            counts, items = _dedupe_runs(self.offsets, self.items, max(self.domain_size, 1))
            offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            return UserDataset(offsets, items, self.user_ids, self.domain)
        counts = np.bincount(u, minlength=self.n_users)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return UserDataset(offsets, items, self.user_ids, self.domain)

    def sample(self, s: int, replace: bool = True, rng: RngLike = None) -> UserDataset:
        """Per-user sampling: ``s`` items with replacement (every user then holds exactly ``s`` items,
        Algorithm 3 of Imola et al.) or ``min(s, |K_i|)`` without replacement, with one random source for
        all users. (The engines' keyed sampling, :meth:`userdp.engines.Engine.sample_keyed`, gives every
        user its own stream instead, so that every engine draws the same rows.)"""
        s = int(s)
        if s < 1:
            raise DataError(f"the per-user sample size must be at least 1, got {s}")
        src = resolve_rng(rng)
        counts = self.counts()
        if replace:
            self.require_items()
            highs = np.repeat(counts, s)
            pick = np.repeat(self.offsets[:-1], s) + src.integers(highs)
            offsets = np.arange(self.n_users + 1, dtype=np.int64) * s
            return UserDataset(offsets, self.items[pick], self.user_ids, self.domain)
        # Without replacement: a uniform permutation of all items, then a stable sort by user, gives
        # every user a uniformly random order of its own items; keep the first min(s, |K_i|).
        perm = src.permutation(self.n_items)
        uidx = self.user_index()[perm]
        order = perm[np.argsort(uidx, kind="stable")]
        rank = np.arange(self.n_items) - np.repeat(self.offsets[:-1], counts)
        keep = order[rank < s]
        new_counts = np.minimum(counts, s)
        offsets = np.concatenate([[0], np.cumsum(new_counts)]).astype(np.int64)
        return UserDataset(offsets, self.items[keep], self.user_ids, self.domain)

    def subset_users(self, idx: np.ndarray) -> UserDataset:
        """The dataset restricted to the users ``idx`` (in that order)."""
        idx = np.asarray(idx, dtype=np.int64)
        counts = self.counts()[idx]
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        gather = (
            np.concatenate([np.arange(self.offsets[i], self.offsets[i + 1]) for i in idx])
            if idx.size
            else (np.empty(0, dtype=np.int64))
        )
        return UserDataset(offsets, self.items[gather], self.user_ids[idx], self.domain)

    def with_items(self, items: np.ndarray, domain: FiniteDomain | BoxDomain | None) -> UserDataset:
        """The same users with each item replaced by ``items[j]`` (e.g. points mapped to grid cells)."""
        return UserDataset(self.offsets, items, self.user_ids, domain)

    def to_arrow(self, user: str = "user", item: str = "item") -> pa.Table:
        """Back to one record per item (labels for finite domains)."""
        users = np.repeat(self.user_ids, self.counts())
        if self.is_points:
            names = (
                self.domain.names
                if isinstance(self.domain, BoxDomain) and self.domain.names
                else tuple(f"x{j}" for j in range(self.dim))
            )
            cols = {user: users, **{n: self.items[:, j] for j, n in enumerate(names)}}
        else:
            cols = {user: users, item: self.domain.labels[self.items]}
        return pa.table(cols)

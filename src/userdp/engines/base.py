"""The engine interface: the one seam between the releases and where the data lives.

An engine turns a table source (a path, an Arrow table, a pandas or polars frame, a Spark DataFrame) and
the names of its columns into the aggregates a mechanism needs -- the grid sum of per-user distributions,
the histogram sum, per-user query means, user sizes, the deduplicated person-element edges -- and
applies the per-user keyed transformations (sampling with replacement, item randomization). It never
adds privacy noise: the releases draw noise once, on the driver, from these aggregates.

**Identical results on every engine.** Engines compute only *exact* aggregates (integer counts, or one
user's values at a time), and every floating-point step runs in the shared functions below, in a
canonical order that does not depend on how the users were split into chunks or partitions:

* sums of per-user distributions (``sum_i K~_i``, the heatmap grid sum) are built from the exact integer
  table ``T[bin, size] = #{items in bin held by users of that size}``, then ``sum_size T / size`` in order
  of increasing size (:func:`sum_by_size`);
* a user's mean sorts that user's values before summing (:func:`user_means`), and users are ordered by key;
* per-user randomness reads the user's keyed stream (:func:`userdp.noise.keyed_sample_indices`,
  :func:`userdp.noise.keyed_randomize`) over the user's items in a canonical order.

So the same public parameters and the same seed give the same release in memory, in chunks and on Spark,
and a retried Spark task recomputes the same rows.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from ..data import BoxDomain, FiniteDomain, UserDataset, group_by_user, sorted_text, unique_inverse
from ..data.sorting import sort_pairs
from ..errors import DataError, ParameterError
from ..noise import KeyedStreams

__all__ = [
    "text_columns",
    "bounded_item_sums_of",
    "merge_item_sums",
    "key_records_from_triples",
    "key_records_of_dataset",
    "key_values_of_table",
    "merge_int_sums",
    "Columns",
    "KeyValues",
    "Engine",
    "UserSizes",
    "check_grid",
    "count_table",
    "decode_keys",
    "edges_from_codes",
    "edges_from_pairs",
    "edges_of_dataset",
    "sum_by_size",
    "sum_table",
    "user_count_table",
    "user_means",
]


@dataclass(frozen=True)
class Columns:
    """Which columns of a table hold what: the ``user`` column and either one ``item`` column (ids in a finite
    domain, or text split into words with ``tokenize``) or the coordinate columns ``points``. (A
    :class:`~userdp.data.UserDataset` source already knows its items: then only ``user`` matters.)"""

    user: str = "user"
    item: str | None = None
    points: tuple[str, ...] = ()
    tokenize: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "points", tuple(self.points))
        if self.item is not None and self.points:
            raise ParameterError("name one of item= (ids) or points= (coordinate columns), not both")
        if self.tokenize and self.item is None:
            raise ParameterError("tokenize splits an item column into words; name the item column")
        roles = [self.user, *([self.item] if self.item is not None else []), *self.points]
        twice = sorted({c for c in roles if roles.count(c) > 1})
        if twice:
            raise ParameterError(f"column(s) {twice} named for two roles; each role needs its own column")

    @property
    def names(self) -> list[str]:
        """The columns read, user first; a :class:`ParameterError` if neither items nor points are named (only a
        :class:`~userdp.data.UserDataset` source needs no column names)."""
        if self.item is None and not self.points:
            raise ParameterError("name the item column (item=, --item) or the point columns (points=, --items)")
        return [self.user, *([self.item] if self.item is not None else self.points)]


@dataclass(frozen=True)
class UserSizes:
    """The smallest and largest number of records per user, and the number of users. These are private:
    a release uses them only where the neighbour relation makes them public (the bounded releases keep ``n``
    and ``m`` public) or to refuse, and never puts them in a message."""

    smallest: int
    largest: int
    users: int

    def equal(self) -> int:
        """The common number of items ``m`` of every user (bounded releases); a :class:`DataError` if there is
        no user or users differ. The message names no count read off the data."""
        if self.users == 0:
            raise DataError("this bounded release needs at least one user (the number of users is public for it)")
        if self.smallest < 1 or self.smallest != self.largest:
            raise DataError(
                "this bounded release needs every user to hold the same public number of items m; "
                "apply BoundedEMDReduction first (sampling with replacement: samples=S, or --samples S)"
            )
        return self.smallest


@dataclass(frozen=True)
class KeyValues:
    """A batch of ``(person, key, value)`` records holding every record of each of its persons (a person is in
    exactly one batch): ``users`` (the person of each record), ``keys`` (each record's key as text) and
    ``values`` (finite floats). The per-key aggregates (:mod:`userdp.vocabulary.aggregates`) read batches of
    this form, whatever the engine; the order of the records within a batch does not matter."""

    users: np.ndarray
    keys: np.ndarray
    values: np.ndarray


class Engine(ABC):
    """The data plane. Three implementations with the same signatures: :class:`~userdp.engines.MemoryEngine`
    (NumPy/Arrow), :class:`~userdp.engines.ChunkedEngine` (bounded memory over streams of whole users) and
    :class:`~userdp.engines.SparkEngine`.

    :meth:`load` returns the engine's handle on a table; every other method takes such a handle. Every
    method is deterministic given its inputs (and, for the keyed transformations, the
    :class:`~userdp.noise.KeyedStreams`), and none adds privacy noise.
    """

    name: str = "abstract"

    @abstractmethod
    def load(self, source: Any, columns: Columns, domain: FiniteDomain | BoxDomain | None = None) -> Any:
        """The engine's handle on ``source`` (validated: the columns exist, have the right types and no missing
        values). ``domain`` is the public item domain (a :class:`FiniteDomain` or a :class:`BoxDomain`);
        without one, finite-domain labels are read off the data and only :meth:`edges` may use them."""

    @abstractmethod
    def user_sizes(self, data: Any) -> UserSizes:
        """Records per user (smallest, largest) and the number of users."""

    @abstractmethod
    def grid_sum(
        self, data: Any, box: BoxDomain, shape: int | tuple[int, int], drop_outside: bool = False
    ) -> np.ndarray:
        """``s = sum_i p_i`` on the ``rows x cols`` grid (``shape``; an ``int`` is square) of the public ``box``
        (:func:`check_grid`): each user's points as a
        distribution (mass 1). Points outside the box are an error unless ``drop_outside``; a user left with no
        point, and no users at all, contribute nothing."""

    @abstractmethod
    def histogram_sum(self, data: Any, normalize: bool = True) -> np.ndarray:
        """``sum_i K~_i`` (``normalize``) or the count histogram of ``K_G`` over the public finite domain."""

    @abstractmethod
    def per_user_mean(self, data: Any, query: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """``(1/|K_i|) sum_{x in K_i} query(x)`` for every user, one row per user in the order of the user keys.
        ``query`` maps an ``(N, dim)`` point array (or ``N`` item codes) to ``N`` values or an ``(N, q)`` array;
        it runs where the data are (on the Spark executors too), so it must be a picklable function."""

    @abstractmethod
    def edges(self, data: Any) -> UserDataset:
        """The deduplicated person-element edges as a dataset of sets (:func:`edges_from_pairs`)."""

    def bounded_item_sums(
        self,
        data: Any,
        cap: int,
        keep: Callable[[object, int], np.ndarray],
        weights: Callable[[np.ndarray], np.ndarray],
        exclude: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per-item sums of bounded per-person weights, aggregated where the data are.

        Each person's distinct items, less those whose label's text is in ``exclude`` (DP-SIPS's items released
        in earlier rounds; shipped to the executors on Spark, a broadcast), are put in the order of their
        labels' text; a person holding more than
        ``cap`` keeps the positions ``keep(user_key, n_items)`` (a function of the person alone, such as
        :func:`userdp.noise.keyed_keep`), the others keep all; a person keeping ``k`` items adds the row
        ``weights([k])[0]`` (integers, ``width`` columns) to each of them. Returns the items that received
        anything (labels as text, sorted) and their ``(n, width)`` integer sums. ``keep`` and ``weights`` run
        on the Spark executors, so they must be picklable."""
        return bounded_item_sums_of(self.edges(data), cap, keep, weights, exclude)

    def key_records(self, data: Any) -> tuple[UserDataset, np.ndarray]:
        """Each person's keys and how many records they hold of each: a dataset of sets (each key once per
        person, coded by the keys' sorted text as :meth:`edges` does) and the multiplicity of every entry.
        Persons appear in the order of their keys; the aggregation runs where the data are."""
        raise NotImplementedError(f"the {self.name} engine cannot count records per key")

    def key_record_sums(
        self, data: Any, fn: Callable[[UserDataset, np.ndarray], tuple[np.ndarray, np.ndarray]], width: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per-label sums of ``fn`` over batches of whole persons' key records, computed where the data are.

        ``fn(sets, mult)`` gets a batch of whole persons as :meth:`key_records` gives them (each person in
        exactly one batch) and returns labels (text) and their ``(n, width)`` integer rows; the rows are added
        up by label (:func:`merge_item_sums`). Per-person bounding runs inside ``fn``, so on Spark it runs on the
        executors and only one row per label reaches the driver. ``fn`` must be picklable."""
        sets, mult = self.key_records(data)
        return merge_item_sums([fn(sets, mult)], width)

    supports_key_values: bool = False
    """Whether :meth:`load_key_values` and :meth:`key_value_sums` are implemented (memory, DuckDB, Spark)."""

    def load_key_values(self, source: Any, user: str, key: str, value: str) -> Any:
        """The engine's handle on the ``(person, key, value)`` records of ``source``: the ``user`` and ``key``
        columns (text or whole numbers; keys compared as text) and the numeric ``value`` column (finite, no
        missing values: a :class:`DataError` otherwise)."""
        raise NotImplementedError(f"the {self.name} engine cannot read (person, key, value) records")

    def key_value_sums(
        self, data: Any, fn: Callable[[KeyValues], tuple[np.ndarray, np.ndarray]], width: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per-label integer sums of ``fn`` over batches of whole persons' ``(person, key, value)`` records
        (:class:`KeyValues`), computed where the data are; ``fn`` returns labels (text) and their ``(n, width)``
        integer rows, added up exactly by label (:func:`merge_int_sums`). ``fn`` must be picklable."""
        raise NotImplementedError(f"the {self.name} engine cannot read (person, key, value) records")

    @abstractmethod
    def sample_keyed(self, data: Any, s: int, streams: KeyedStreams) -> Any:
        """BoundedEMDReduction's projection: ``s`` items per user, drawn with replacement with the user's keyed
        stream (:func:`userdp.noise.keyed_sample_indices`) from the user's items in sorted order."""

    @abstractmethod
    def randomize_keyed(self, data: Any, randomizer: Any, streams: KeyedStreams, m: int | None = None) -> Any:
        """Local-model item randomization: each user's item codes through ``randomizer`` with the user's keyed
        stream (:func:`userdp.noise.keyed_randomize`); the same users, each holding its randomized multiset.
        With ``m``, every user must hold exactly ``m`` items, checked in the same pass (a bounded release's
        guarantee is computed for that ``m``)."""


# --------------------------------------------------------------------------------------------
# The shared exact steps: every engine ends in these functions
# --------------------------------------------------------------------------------------------


MAX_SIDE = 1 << 13  # 8192 x 8192 cells: one grid of floats is 512 MB, and a release holds several


GridShape = tuple[int, int]
"""A heatmap grid: ``(rows, cols)``, rows along the box's first coordinate (latitude)."""


def check_grid(box: BoxDomain, shape: int | tuple[int, int]) -> GridShape:
    """The grid ``(rows, cols)`` (an ``int`` is a square grid), after refusing a box that is not 2-D and sides
    that are not whole numbers in ``[1, MAX_SIDE]`` (public parameters), before any data is read."""
    if not isinstance(box, BoxDomain) or box.dim != 2:
        raise DataError("heatmaps need a 2-D public box (a BoxDomain of lat, lon)")
    sides = (shape, shape) if not isinstance(shape, tuple | list) else tuple(shape)
    if len(sides) != 2:
        raise ParameterError(f"a grid has two sides (rows, cols), got {shape!r}")
    for side in sides:
        if isinstance(side, bool) or not isinstance(side, int | np.integer) or side < 1:
            raise ParameterError(f"a grid side must be a positive whole number of cells, got {side!r}")
        if side > MAX_SIDE:
            raise ParameterError(
                f"the resolution {side} is above the largest supported, {MAX_SIDE} cells a side (one {MAX_SIDE} x "
                f"{MAX_SIDE} grid of floats takes 512 MB, and a release holds several)"
            )
    return int(sides[0]), int(sides[1])


_SIZE_BITS = 31  # a (bin, size) row is the key bin * 2^31 + size: sizes below 2^31, bins below 2^32


# The (bin, size) table without sorting the rows. Each bin keeps a running count of rows of one size, packed
# with that size in one word (size << 32 | count); a row of another size ends the run, which goes to a list.
# The runs (one per bin when a bin's users share a size, and never more than the rows plus the bins) are then
# put in (bin, size) order by a counting sort on the bin and a sort of each bin's runs, equal sizes added up.
# The compiled passes stop when the run list is full, and the driver grows it: arrays reassigned inside the
# hot loop cost numba reference counting on every row (7x slower), and so did a helper taking the arrays,
# called per row (10x: its body is written out in both passes).


# --------------------------------------------------------------------------------------------
# The engines' own progress output
# --------------------------------------------------------------------------------------------

_PROGRESS: ContextVar[bool] = ContextVar("userdp_engine_progress", default=False)


@contextlib.contextmanager
def engine_progress(show: bool = True) -> Iterator[None]:
    """Inside this block, engines created without an explicit ``progress=`` show their own progress output
    (DuckDB's progress bar on standard output, Spark's stage bars and warnings on standard error); outside it
    they are silent, so that their output never mixes into a result (``userdp … --verbose`` opens it)."""
    token = _PROGRESS.set(bool(show))
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def progress_default(progress: bool | None) -> bool:
    """An engine's ``progress=`` argument, or the default of the enclosing :func:`engine_progress` block."""
    return _PROGRESS.get() if progress is None else bool(progress)


_RUN_FULL = (1 << 32) - 1


@njit(cache=True)
def _table_of_runs(runs, n_bins):
    """The runs ``(bin, size, count)`` merged into count_table's sorted keys and totals."""
    n_runs = runs.shape[0]
    start = np.zeros(n_bins + 1, np.int64)
    for r in range(n_runs):
        start[runs[r, 0] + 1] += 1
    for b in range(n_bins):
        start[b + 1] += start[b]
    fill = np.empty(n_bins, np.int64)
    for b in range(n_bins):
        fill[b] = start[b]
    sizes = np.empty(n_runs, np.int64)  # grouped by bin
    counts = np.empty(n_runs, np.int64)
    for r in range(n_runs):
        b = runs[r, 0]
        sizes[fill[b]] = runs[r, 1]
        counts[fill[b]] = runs[r, 2]
        fill[b] += 1
    keys = np.empty(n_runs, np.int64)
    totals = np.empty(n_runs, np.int64)
    k = 0
    for b in range(n_bins):
        lo, hi = start[b], start[b + 1]
        if hi == lo:
            continue
        if hi - lo == 1:
            keys[k] = (np.int64(b) << 31) | sizes[lo]
            totals[k] = counts[lo]
            k += 1
            continue
        sort_pairs(sizes, counts, lo, hi)
        for r in range(lo, hi):
            if r > lo and sizes[r] == sizes[r - 1]:
                totals[k - 1] += counts[r]
            else:
                keys[k] = (np.int64(b) << 31) | sizes[r]
                totals[k] = counts[r]
                k += 1
    return keys[:k], totals[:k]


@njit(cache=True)
def _rows_pass(state, bins, sizes, i, runs, k):
    """Rows from ``i`` on until done or ``runs`` is full; returns ``(i, k)``."""
    while i < bins.size and k < runs.shape[0]:
        b, sz = bins[i], np.int64(sizes[i])  # count the row; a run it ends goes to runs[k] (as in _users_pass)
        v = state[b]
        if (v >> 32) != sz or (v & _RUN_FULL) == _RUN_FULL:
            if v != 0:
                runs[k, 0] = b
                runs[k, 1] = v >> 32
                runs[k, 2] = v & _RUN_FULL
                k += 1
            v = sz << 32
        state[b] = v + 1
        i += 1
    return i, k


@njit(cache=True)
def _users_pass(state, offsets, bins, dropped, u, runs, k):
    """Users from ``u`` on until done or the next user might overflow ``runs``; returns ``(u, k)``."""
    while u < offsets.size - 1:
        lo, hi = offsets[u], offsets[u + 1]
        if k + (hi - lo) > runs.shape[0]:
            break
        s = np.int64(hi - lo)
        if dropped:
            s = 0
            for i in range(lo, hi):
                if bins[i] >= 0:
                    s += 1
        for i in range(lo, hi):
            b = bins[i]
            if b >= 0:  # written out: a helper taking the arrays, called per row, cost 10x (reference counts)
                v = state[b]
                if (v >> 32) != s or (v & _RUN_FULL) == _RUN_FULL:
                    if v != 0:
                        runs[k, 0] = b
                        runs[k, 1] = v >> 32
                        runs[k, 2] = v & _RUN_FULL
                        k += 1
                    v = s << 32
                state[b] = v + 1
        u += 1
    return u, k


@njit(cache=True)
def _close_runs(state, runs, k):
    """The runs still open in ``state`` appended to ``runs[:k]``, all merged (:func:`_table_of_runs`)."""
    n_open = 0
    for b in range(state.size):
        if state[b] != 0:
            n_open += 1
    out = np.empty((k + n_open, 3), np.int64)
    for r in range(k):  # element by element: a slice copy compiles numba's shape-mismatch message (seconds)
        out[r, 0] = runs[r, 0]
        out[r, 1] = runs[r, 1]
        out[r, 2] = runs[r, 2]
    for b in range(state.size):
        v = state[b]
        if v != 0:
            out[k, 0] = b
            out[k, 1] = v >> 32
            out[k, 2] = v & _RUN_FULL
            k += 1
    return _table_of_runs(out, state.size)


def _more_runs(runs: np.ndarray, at_least: int) -> np.ndarray:
    bigger = np.empty((max(2 * runs.shape[0], at_least), 3), np.int64)
    bigger[: runs.shape[0]] = runs
    return bigger


def _table_of_rows(bins: np.ndarray, sizes: np.ndarray, n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """count_table(bins, sizes) in one compiled pass over the rows, then the runs merged."""
    state = np.zeros(n_bins, np.int64)
    runs = np.empty((4096, 3), np.int64)
    i = k = 0
    while True:
        i, k = _rows_pass(state, bins, sizes, i, runs, k)
        if i >= bins.size:
            return _close_runs(state, runs, k)
        runs = _more_runs(runs, 0)


def _table_of_users(offsets: np.ndarray, bins: np.ndarray, n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """count_table of the rows ``(bins[i], size of i's user)`` with ``bins[i] >= 0``, where user ``u`` holds
    rows ``offsets[u]:offsets[u+1]`` and its size counts its rows with a bin."""
    dropped = bool(bins.size and bins.min() < 0)
    state = np.zeros(n_bins, np.int64)
    runs = np.empty((4096, 3), np.int64)
    u = k = 0
    while True:
        u, k = _users_pass(state, offsets, bins, dropped, u, runs, k)
        if u >= offsets.size - 1:
            return _close_runs(state, runs, k)
        runs = _more_runs(runs, k + int(offsets[u + 1] - offsets[u]) + 1)


def _dense_bins(n_rows: int, n_bins: int) -> bool:
    """Whether a counting sort over ``n_bins`` bins is worth (and cheap enough in memory for) ``n_rows``."""
    return n_bins <= 4 * n_rows + (1 << 20)


def count_table(bins: np.ndarray, sizes: np.ndarray, counts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The exact table ``T[bin, size]`` of integer rows (``counts`` items, or one item per row when ``None``),
    as sorted keys ``bin * 2^31 + size`` and their integer totals. Tables of parts add up: pass the
    concatenated keys (decoded with :func:`decode_keys`) and totals again.

    One row per item over a modest range of bins (a grid, a vocabulary) is tabled by a compiled counting
    sort on the bin, in time linear in the rows; otherwise by sorting the keys."""
    bins = np.asarray(bins, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    if sizes.size and (sizes.max() >= 1 << _SIZE_BITS or sizes.min() < 1 or bins.min() < 0 or bins.max() >= 1 << 32):
        raise DataError("a user holds more than 2^31 items, or a bin or size is out of range")
    if counts is None and bins.size and _dense_bins(bins.size, int(bins.max()) + 1):
        return _table_of_rows(bins, sizes, int(bins.max()) + 1)
    key = (bins << _SIZE_BITS) | sizes
    if counts is None:
        return np.unique(key, return_counts=True)
    order = np.argsort(key, kind="stable")
    key = key[order]
    starts = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]])) if key.size else np.empty(0, np.int64)
    return key[starts], np.add.reduceat(np.asarray(counts, dtype=np.int64)[order], starts) if key.size else key


def user_count_table(offsets: np.ndarray, bins: np.ndarray, n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`count_table` of the rows ``(bins[i], size of row i's user)`` for the rows with ``bins[i] >= 0``,
    where user ``u`` holds rows ``offsets[u]:offsets[u+1]`` and its size counts only its rows with a bin
    (``-1`` marks a row dropped, e.g. a point outside the box). The in-memory engine's path: no per-row user
    index or size array is built."""
    offsets = np.asarray(offsets, dtype=np.int64)
    bins = np.asarray(bins, dtype=np.int64)
    if bins.size and int(bins.max()) >= n_bins:
        raise DataError("a bin is out of range")
    if np.any(np.diff(offsets) >= 1 << _SIZE_BITS):
        raise DataError("a user holds more than 2^31 items, or a bin or size is out of range")
    if not _dense_bins(bins.size, n_bins):
        users = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
        kept = bins >= 0
        size = np.bincount(users[kept], minlength=offsets.size - 1)
        return count_table(bins[kept], size[users[kept]])
    return _table_of_users(offsets, bins, n_bins)


def decode_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(bins, sizes)`` of :func:`count_table`'s keys."""
    return keys >> _SIZE_BITS, keys & ((1 << _SIZE_BITS) - 1)


def sum_by_size(bins: np.ndarray, sizes: np.ndarray, counts: np.ndarray | None, length: int) -> np.ndarray:
    """``out[b] = sum over rows with bins == b of counts / sizes``, computed the same way from any split.

    ``(bins, sizes, counts)`` are integer rows: ``counts`` items (one per row when ``None``) fall in bin ``b``
    and belong to users holding ``sizes`` items each. Equal ``(bin, size)`` rows are added exactly
    (integers, :func:`count_table`), each ``T / size`` is one correctly rounded division, and each bin adds
    its terms in order of increasing size. The result depends only on the multiset of rows, not on their
    order or on how they were split between chunks or tasks.
    """
    return sum_table(*count_table(bins, sizes, counts), length)


def sum_table(keys: np.ndarray, totals: np.ndarray, length: int) -> np.ndarray:
    """:func:`sum_by_size` from the table :func:`count_table` (or :func:`user_count_table`) gives (sorted keys).
    A large table is summed a slice of whole bins at a time, so its working memory stays small."""
    out = np.zeros(int(length), dtype=np.float64)
    start = 0
    while start < keys.size:  # about 2^20 rows at a time, every bin's rows in one slice (the same sums)
        stop = _bin_end(keys, start + _SUM_SLICE)
        b, n = decode_keys(keys[start:stop])  # sorted by (bin, size)
        terms = totals[start:stop] / n.astype(np.float64)
        starts = np.flatnonzero(np.concatenate([[True], b[1:] != b[:-1]]))
        out[b[starts]] = np.add.reduceat(terms, starts)
        start = stop
    return out


_SUM_SLICE = 1 << 20  # rows of a count table turned into sums at a time (bounds the memory sum_table adds)


def _bin_end(keys: np.ndarray, stop: int) -> int:
    """The first row at or after ``stop`` that starts a new bin (sorted keys), so a slice never cuts a bin."""
    if stop >= keys.size:
        return int(keys.size)
    following = (int(keys[stop - 1]) >> _SIZE_BITS) + 1  # the next bin (a Python int: no overflow at 2^32)
    if following >= 1 << 32:
        return int(keys.size)
    return max(stop, int(np.searchsorted(keys, following << _SIZE_BITS)))


@njit(cache=True)
def _fsum_segments(offsets: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The correctly rounded sum of every segment ``values[offsets[i]:offsets[i+1]]``: CPython's ``math.fsum``
    (Shewchuk's exact partials, then one correctly rounded sum), so the result does not depend on the order
    of a segment's values. Values must be finite."""
    out = np.zeros(offsets.size - 1)
    partials = np.empty(64)  # a double's exact partials never number more than about 40
    for s in range(offsets.size - 1):
        n = 0
        for k in range(offsets[s], offsets[s + 1]):
            x = values[k]
            i = 0
            for j in range(n):
                y = partials[j]
                if abs(x) < abs(y):
                    x, y = y, x
                hi = x + y
                lo = y - (hi - x)
                if lo != 0.0:
                    partials[i] = lo
                    i += 1
                x = hi
            partials[i] = x
            n = i + 1
        hi = 0.0
        if n > 0:
            n -= 1
            hi = partials[n]
            lo = 0.0
            while n > 0:
                x = hi
                n -= 1
                y = partials[n]
                hi = x + y
                yr = hi - x
                lo = y - yr
                if lo != 0.0:
                    break
            if n > 0 and ((lo < 0.0 and partials[n - 1] < 0.0) or (lo > 0.0 and partials[n - 1] > 0.0)):
                y = lo * 2.0
                x = hi + y
                yr = x - hi
                if y == yr:
                    hi = x
        out[s] = hi
    return out


def user_means(offsets: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each user's mean of ``values`` (rows ``offsets[i]:offsets[i+1]``; every user holds at least one row):
    the correctly rounded sum of every column (``math.fsum``), divided by the user's count, so the result does
    not depend on the order of the user's rows (nor on the engine). Values must be finite."""
    v = np.asarray(values, dtype=np.float64)
    v2 = v[:, None] if v.ndim == 1 else v
    offsets = np.asarray(offsets, dtype=np.int64)
    counts = np.diff(offsets).astype(np.float64)
    out = np.empty((counts.size, v2.shape[1]), dtype=np.float64)
    for j in range(v2.shape[1]):
        out[:, j] = _fsum_segments(offsets, np.ascontiguousarray(v2[:, j])) / counts
    return out


def edges_from_pairs(users: np.ndarray, labels: np.ndarray) -> UserDataset:
    """The deduplicated person-element graph of ``(users[j], labels[j])`` records as a dataset of sets:
    labels as strings, coded by their sorted order (a data-independent element order), users by key. The
    labels are read off the data (``FiniteDomain(public=False)``): the distinct count never releases them.

    The distinct raw labels are found first (Arrow's hash path for text, :func:`userdp.data.unique_inverse`),
    and only they are turned into strings and sorted."""
    users = np.asarray(users)
    if len(labels) == 0:
        return edges_from_codes(users, np.empty(0, dtype=np.int64), np.empty(0, dtype=object))
    labels = np.asarray(labels)
    try:
        raw, codes = unique_inverse(labels)
    except TypeError:  # labels of mixed types: compare them as text
        raw, codes = unique_inverse(np.array([str(x) for x in labels], dtype=object))
    return edges_from_codes(users, codes, raw)


def _text_coded(codes: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, FiniteDomain]:
    """Codes of ``labels[codes]`` renumbered into the sorted order of the labels as strings, and that (non-public)
    domain; two labels that print alike (1 and "1") become one element."""
    if sorted_text(labels):  # already so (a vocabulary read off text): nothing to renumber
        return np.asarray(codes, dtype=np.int64), FiniteDomain(labels, public=False)
    text = np.array([str(x) for x in labels], dtype=object)
    names, rank = unique_inverse(text)
    codes = np.asarray(codes, dtype=np.int64)
    return (rank[codes] if names.size else codes), FiniteDomain(names.astype(object), public=False)


def edges_from_codes(users: np.ndarray, codes: np.ndarray, labels: np.ndarray) -> UserDataset:
    """:func:`edges_from_pairs` of the records ``(users[j], labels[codes[j]])``, where every label occurs."""
    codes, domain = _text_coded(codes, labels)
    offsets, order, keys = group_by_user(users)
    return UserDataset(offsets, codes[order], keys, domain).dedupe()


def text_columns(columns: Columns, domain: Any) -> tuple[str, ...]:
    """The columns a file must give as text, not as types inferred from all of its rows: the person always,
    and the item unless the items are points. Inferring a column's type from every row lets one added person
    (a key ``abc`` among ``007``s) change the other persons' identities (``007`` and ``7`` would be one
    person as numbers, two as text) and labels; items of a declared domain match its labels as text
    (:meth:`userdp.data.FiniteDomain.encode`)."""
    if columns.item is not None and not isinstance(domain, BoxDomain):
        return (columns.user, columns.item)
    return (columns.user,)


def bounded_item_sums_of(
    sets: UserDataset,
    cap: int,
    keep: Callable[[object, int], np.ndarray],
    weights: Callable[[np.ndarray], np.ndarray],
    exclude: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`Engine.bounded_item_sums` of a dataset of sets (each item once per person)."""
    offsets, items = sets.offsets, np.asarray(sets.items, dtype=np.int64)
    n_lab = len(sets.domain)
    text = np.array([str(x) for x in np.asarray(sets.domain.labels, dtype=object)[:n_lab]], dtype=object)
    if exclude is not None and len(exclude) and items.size:  # each person's items less the excluded labels
        gone = np.isin(text.astype(str), np.asarray(exclude).astype(str))
        left = ~gone[items]
        person = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
        offsets = np.r_[0, np.cumsum(np.bincount(person[left], minlength=offsets.size - 1))].astype(np.int64)
        items = items[left]
    rank = np.empty(n_lab, dtype=np.int64)
    rank[np.argsort(text, kind="stable")] = np.arange(n_lab)  # the labels' text order, whatever the coding
    deg = np.diff(offsets)
    kept = np.ones(items.size, dtype=bool)
    heavy = np.flatnonzero(deg > cap)
    many = getattr(keep, "many", None)  # (a KeyedKeep: every heavy person's choice with one AES call)
    if many is not None and heavy.size:
        at = np.repeat(offsets[heavy], deg[heavy]) + np.arange(int(deg[heavy].sum())) - np.repeat(
            np.r_[0, np.cumsum(deg[heavy])[:-1]], deg[heavy])  # fmt: skip
        who = np.repeat(np.arange(heavy.size), deg[heavy])
        key = who * n_lab + rank[items[at]]
        if key.size > 1 and not np.all(key[1:] > key[:-1]):  # (the edges' codes are usually in text order already)
            at = at[np.argsort(key, kind="stable")]  # each heavy person's items in their labels' text order
        kept[at] = np.asarray(many(sets.user_ids[heavy], deg[heavy]), dtype=bool)
        heavy = heavy[:0]
    for u in heavy:
        lo, hi = offsets[u], offsets[u + 1]
        order = np.argsort(rank[items[lo:hi]], kind="stable")  # the person's items in their labels' order
        mask = np.zeros(hi - lo, dtype=bool)
        mask[order[np.asarray(keep(sets.user_ids[u], int(hi - lo)), dtype=np.int64)]] = True
        kept[lo:hi] = mask
    k = np.minimum(deg, cap)
    person = np.repeat(np.arange(deg.size), deg)[kept]
    w = np.asarray(weights(np.maximum(k, 1)), dtype=np.int64)
    if w.ndim != 2 or w.shape[0] != deg.size:
        raise ParameterError("weights must map the persons' kept counts to one row per person")
    code = items[kept]
    sums = np.zeros((n_lab, w.shape[1]), dtype=np.int64)
    for c in range(w.shape[1]):
        sums[:, c] = np.bincount(code, weights=w[person, c], minlength=n_lab).astype(np.int64)
    got = np.flatnonzero(np.bincount(code, minlength=n_lab) > 0)
    got = got[np.argsort(rank[got], kind="stable")]
    return text[got], sums[got]


def merge_item_sums(parts: list[tuple[np.ndarray, np.ndarray]], width: int) -> tuple[np.ndarray, np.ndarray]:
    """Add up :meth:`Engine.bounded_item_sums` results of disjoint sets of persons (by label)."""
    parts = [(lab, s) for lab, s in parts if len(lab)]
    if not parts:
        return np.empty(0, dtype=object), np.zeros((0, width), dtype=np.int64)
    labels = np.concatenate([lab for lab, _ in parts]).astype(str)
    sums = np.concatenate([s for _, s in parts])
    names, inv = np.unique(labels, return_inverse=True)
    out = np.zeros((names.size, width), dtype=np.int64)
    for c in range(width):
        out[:, c] = np.bincount(inv, weights=sums[:, c], minlength=names.size).astype(np.int64)
    return names.astype(object), out


def merge_int_sums(parts: list[tuple[np.ndarray, np.ndarray]], width: int) -> tuple[np.ndarray, np.ndarray]:
    """Add up per-label integer rows of disjoint sets of persons exactly (int64, no floating point): labels as
    text, sorted. Unlike :func:`merge_item_sums` the sums stay exact past ``2^53``."""
    parts = [(lab, s) for lab, s in parts if len(lab)]
    if not parts:
        return np.empty(0, dtype=object), np.zeros((0, width), dtype=np.int64)
    labels = np.array([str(x) for p in parts for x in p[0]], dtype=object)
    sums = np.concatenate([np.asarray(s, dtype=np.int64).reshape(-1, width) for _, s in parts])
    names, inv = np.unique(labels.astype(str), return_inverse=True)
    out = np.zeros((names.size, width), dtype=np.int64)
    np.add.at(out, inv.reshape(-1), sums)
    return names.astype(object), out


def key_values_of_table(table: Any, user: str, key: str, value: str) -> KeyValues:
    """The :class:`KeyValues` of an Arrow table with the named columns, checked: persons and keys are text or
    whole numbers (keys compared as text), values are numbers, nothing is missing, every value is finite."""
    import pyarrow as pa

    for name in (user, key):
        t = table.column(name).type
        if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)
                or pa.types.is_dictionary(t)):  # fmt: skip
            raise DataError(f"column {name!r} has type {t}; persons and keys must be text or whole numbers")
    t = table.column(value).type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)):
        raise DataError(f"value column {value!r} has type {t}; it must be numeric")
    if any(table.column(c).null_count for c in (user, key, value)):
        raise DataError(f"columns {[user, key, value]} have missing values")
    users = table.column(user).to_numpy(zero_copy_only=False)
    keys = np.array([str(x) for x in table.column(key).to_pylist()], dtype=object)
    values = np.asarray(table.column(value).cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    if not np.all(np.isfinite(values)):
        raise DataError(f"value column {value!r} contains NaN or inf")
    return KeyValues(users, keys, values)


def key_records_from_triples(users: np.ndarray, labels: np.ndarray, mult: np.ndarray) -> tuple[UserDataset, np.ndarray]:
    """:meth:`Engine.key_records` from ``(user, key label, records)`` rows, each (user, key) once."""
    users = np.asarray(users)
    mult = np.asarray(mult, dtype=np.int64)
    if len(labels) == 0:
        return edges_from_codes(users, np.empty(0, dtype=np.int64), np.empty(0, dtype=object)), mult
    try:
        raw, codes = unique_inverse(np.asarray(labels))
    except TypeError:
        raw, codes = unique_inverse(np.array([str(x) for x in labels], dtype=object))
    items, domain = _text_coded(codes, raw)
    ukeys, person = unique_inverse(users)
    return _one_entry_per_key(person, items, mult, ukeys, domain)


def _one_entry_per_key(person, items, mult, user_ids, domain) -> tuple[UserDataset, np.ndarray]:
    """One entry per (person, key), multiplicities added: labels that print alike (``1`` and ``"1"``) are one
    key after text coding, and must not give one person two entries for it."""
    n_lab = max(1, len(domain))
    pair, inv = np.unique(np.asarray(person, dtype=np.int64) * n_lab + np.asarray(items, dtype=np.int64),
                          return_inverse=True)  # fmt: skip
    total = np.bincount(inv.ravel(), weights=np.asarray(mult, dtype=np.float64), minlength=pair.size).astype(np.int64)
    p, codes = pair // n_lab, pair % n_lab
    offsets = np.r_[0, np.cumsum(np.bincount(p, minlength=len(user_ids)))].astype(np.int64)
    return UserDataset(offsets, codes, user_ids, domain), total


def key_records_of_dataset(data: UserDataset) -> tuple[UserDataset, np.ndarray]:
    """:meth:`Engine.key_records` of an in-memory dataset of ids: one entry per person and key."""
    if not isinstance(data.domain, FiniteDomain):
        raise DataError("counting records per key needs keys that are ids (a finite domain)")
    counts = data.counts()
    labels = np.asarray(data.domain.labels)[: len(data.domain)]
    used = np.bincount(data.items, minlength=labels.size) > 0  # the domain read off the data: used labels only
    items, domain = _text_coded((np.cumsum(used) - 1)[data.items], labels[used])
    person = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
    return _one_entry_per_key(person, items, np.ones(items.size, dtype=np.int64), data.user_ids, domain)


def edges_of_dataset(data: UserDataset) -> UserDataset:
    """:func:`edges_from_pairs` of a dataset of ids, from its codes: no per-record label is materialized,
    and users that arrive grouped and sorted keep their grouping (users with no item are left out, as the
    records would leave them)."""
    if not isinstance(data.domain, FiniteDomain):
        raise DataError("distinct counting needs items that are ids (a finite domain)")
    counts = data.counts()
    keys = data.user_ids
    try:
        grouped = bool(np.all(keys[:-1] < keys[1:])) if keys.size > 1 else True
    except TypeError:
        grouped = False
    used = np.bincount(data.items, minlength=len(data.domain)) > 0
    if used.all():  # (a domain read off the data): the codes stay as they are
        codes, labels = data.items, data.domain.labels
    else:
        codes, labels = (np.cumsum(used) - 1)[data.items], data.domain.labels[used]
    if not grouped:
        return edges_from_codes(np.repeat(keys, counts), codes, labels)
    items, domain = _text_coded(codes, labels)
    keep = counts > 0
    offsets = np.concatenate([[0], np.cumsum(counts[keep])]).astype(np.int64)
    return UserDataset(offsets, items, keys[keep], domain).dedupe()

"""The chunked engine: bounded memory over a table read as a stream of *whole users*.

The rows of a file (Parquet, CSV or JSON lines, optionally compressed) or of an in-memory table are read in
batches; each batch is cut after its last complete user, so a user never spans two chunks, and a user whose
rows are not contiguous is refused (their contribution could not be bounded). Every chunk is a small
:class:`~userdp.data.UserDataset` run through the in-memory data plane (:mod:`userdp.engines.memory`); only
the aggregates are kept: the exact ``(bin, size)`` count tables, one row per user for means, the edges.

Peak memory is one chunk plus the aggregate (``benchmarks/bench_memory.py``: 10^8 items, 10^7 points).
The input must be grouped by user (e.g. sorted); a table is re-read for each aggregate a release needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from numba import njit

from ..data import BoxDomain, FiniteDomain, UserDataset, to_arrow
from ..errors import DataError, ParameterError
from ..noise import KeyedStreams
from . import memory
from .base import (
    Columns,
    Engine,
    UserSizes,
    bounded_item_sums_of,
    check_grid,
    count_table,
    edges_from_pairs,
    key_records_from_triples,
    merge_item_sums,
    sum_table,
    text_columns,
)

__all__ = ["ChunkedEngine", "ChunkedTable", "iter_user_chunks"]

ROWS_PER_CHUNK = 1_000_000


class _SeenUsers:
    """User keys seen in earlier chunks, to refuse a user whose rows are not contiguous. Chunks whose keys
    all exceed every earlier key (a file sorted by user) are checked in O(chunk); otherwise against all
    earlier keys. Integer keys (int64) are kept as runs of consecutive values where that takes less room, so a
    file of users numbered in order holds a few numbers instead of one per user."""

    def __init__(self) -> None:
        self.parts: list[np.ndarray] = []  # sorted, distinct keys (any type but int64 runs)
        self.lo: list[np.ndarray] = []  # int64 keys: runs lo[i]..hi[i] of consecutive values, in order
        self.hi: list[np.ndarray] = []
        self.top = None

    @property
    def nbytes(self) -> int:
        """Memory held by the keys."""
        return sum(p.nbytes for p in self.parts + self.lo + self.hi)

    def add(self, keys: np.ndarray) -> None:
        keys = np.asarray(keys)
        if not _increasing(keys):  # (a chunk's keys arrive sorted and distinct when the file is sorted by user)
            keys = np.unique(keys)
        if keys.size == 0:
            return
        if self.top is not None:
            try:
                monotone = bool(keys[0] > self.top)
            except TypeError:
                monotone = False
            if not monotone:
                seen = self._all()
                if np.isin(keys, seen).any():
                    raise DataError(
                        "a user appears in two chunks (the rows must be grouped by user, e.g. sorted, and chunks "
                        "must carry distinct user ids); their contribution could not be bounded"
                    )
                self.parts, self.lo, self.hi = [np.union1d(seen, keys)], [], []
                self.top = self.parts[0][-1]
                return
        cut = np.flatnonzero(np.diff(keys) != 1) + 1 if keys.dtype == np.int64 else None  # (keys increase)
        if cut is not None and 2 * (cut.size + 1) <= keys.size:  # runs only where they take less room
            self.lo.append(keys[np.concatenate([[0], cut])])
            self.hi.append(keys[np.concatenate([cut - 1, [keys.size - 1]])])
        else:
            self.parts.append(keys)
        self.top = keys[-1]

    def _all(self) -> np.ndarray:
        """Every key seen (runs written out), in no particular order."""
        out = list(self.parts)
        if self.lo:
            lo, hi = np.concatenate(self.lo), np.concatenate(self.hi)
            n = hi - lo + 1
            ramp = np.arange(int(n.sum()), dtype=np.int64)
            ramp += np.repeat(lo - (np.cumsum(n) - n), n)
            out.append(ramp)
        return np.concatenate(out)


def _increasing(keys: np.ndarray) -> bool:
    """Whether ``keys`` is strictly increasing (then it is its own ``np.unique``)."""
    if keys.size < 2 or keys.dtype.kind not in "iuUO":
        return keys.size < 2
    try:
        return bool(np.all(keys[1:] > keys[:-1]))
    except TypeError:
        return False


def _batches(source: Any, columns: Sequence[str], rows: int, text: Sequence[str] = ()) -> Iterator[pa.RecordBatch]:
    """Record batches of ``columns`` from a path (Parquet, CSV/TSV, JSON lines; ``.gz``/``.xz``/``.bz2``), an
    in-memory table, or a stream (a zero-argument callable returning an iterator of Arrow record batches or
    tables, called again for every pass), about ``rows`` rows each."""
    import pyarrow.csv as pcsv
    import pyarrow.json as pjson
    import pyarrow.parquet as pq

    from ..data import READ_ERRORS, _open, check_columns

    if callable(source):  # a stream: a fresh iterator of Arrow batches or tables on every call
        for part in source():
            t = pa.Table.from_batches([part]) if isinstance(part, pa.RecordBatch) else to_arrow(part)
            check_columns(columns, t.column_names, "stream")
            yield from t.select(list(columns)).to_batches(max_chunksize=rows)
        return
    if not isinstance(source, (str, Path)):
        t = to_arrow(source)
        check_columns(columns, t.column_names, "table")
        yield from t.select(list(columns)).to_batches(max_chunksize=rows)
        return
    path = Path(source)
    if not path.exists():
        raise DataError(f"no such file: {path}")
    sfx = [x.lower() for x in path.suffixes if x.lower() not in (".xz", ".gz", ".bz2")]
    fmt = sfx[-1].lstrip(".") if sfx else ""
    if path.is_file() and path.stat().st_size == 0:
        raise DataError(f"{path.name} is empty (not even a header line)")
    try:
        if fmt in ("parquet", "pq"):
            # a buffered stream without read-ahead: with the defaults the reader's memory grows with the file
            # (measured: +140 MB from 2e6 to 1e7 rows); with these it stays flat (benchmarks/bench_memory.py)
            pf = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
            check_columns(columns, pf.schema_arrow.names, "file")
            yield from pf.iter_batches(batch_size=rows, columns=list(columns), use_threads=False)
            return
        if fmt in ("csv", "tsv", "txt", "json", "jsonl", "ndjson"):
            with _open(path) as fh:
                check_columns(columns, list(dict.fromkeys(columns)), "file")  # no column in two roles
                if fmt in ("json", "jsonl", "ndjson"):
                    reader = pjson.open_json(fh)
                else:
                    reader = pcsv.open_csv(
                        fh,
                        parse_options=pcsv.ParseOptions(delimiter="\t" if fmt == "tsv" else ","),
                        convert_options=pcsv.ConvertOptions(
                            strings_can_be_null=True,
                            null_values=[""],
                            include_columns=list(columns),
                            column_types={c: pa.string() for c in text},  # never typed by later rows
                        ),
                    )
                check_columns(columns, reader.schema.names, "file")
                for batch in reader:  # blocks of the reader's size (about 1 MB), cut to at most `rows` rows
                    batch = batch.select(list(columns)) if hasattr(batch, "select") else batch
                    for start in range(0, batch.num_rows, rows):
                        yield batch.slice(start, rows)
            return
    except READ_ERRORS as exc:
        # the parser's own message can quote rows of the file: only its kind is reported
        raise DataError(f"could not read {path.name} as {fmt} ({type(exc).__name__})") from None
    raise DataError(f"cannot tell the format of {path.name}; use a .parquet, .csv or .jsonl file")


def iter_user_chunks(
    source: Any,
    user: str,
    item: str | None = None,
    items: Sequence[str] | None = None,
    domain: FiniteDomain | BoxDomain | None = None,
    rows_per_chunk: int = ROWS_PER_CHUNK,
    tokenize: bool = False,
) -> Iterator[UserDataset]:
    """Chunks of whole users from a file or table whose rows are grouped by ``user``.

    ``domain`` is the public item domain (a caller-declared :class:`FiniteDomain` for ``item``, a
    :class:`BoxDomain` for the coordinate columns ``items``). Without one, each chunk's labels are read off
    the chunk (``public=False``): only the distinct count's edges may use such chunks. A table with no rows
    yields no chunk (no users: the releases decide what that means under their neighbour relation).
    """
    if isinstance(domain, FiniteDomain) and not domain.public:
        raise DataError("reading in chunks needs a public domain (a FiniteDomain you declare)")
    if isinstance(rows_per_chunk, bool) or int(rows_per_chunk) != rows_per_chunk or rows_per_chunk < 1:
        raise ParameterError("rows_per_chunk must be a positive integer")
    cols = Columns(user, item, tuple(items or ()), tokenize)
    seen = _SeenUsers()
    carry: pa.Table | None = None

    def emit(t: pa.Table) -> UserDataset:
        ds = memory.load_table(t, cols, domain)
        seen.add(ds.user_ids)
        return ds

    for batch in _batches(source, cols.names, int(rows_per_chunk), text_columns(cols, domain)):
        t = pa.Table.from_batches([batch])
        if carry is not None:
            try:
                t = pa.concat_tables([carry, t])
            except pa.ArrowInvalid:
                raise DataError(
                    "the file's column types change between blocks; write it with one type per column"
                ) from None
        if t.num_rows == 0:
            continue
        if t.column(user).null_count:
            raise DataError(f"column {user!r} has missing values")
        u = t.column(user).to_numpy(zero_copy_only=False)
        other = np.flatnonzero(u != u[-1])  # the last user's rows (contiguous) are carried to the next chunk
        start = int(other[-1]) + 1 if other.size else 0
        carry = t.slice(start)
        if start > 0:
            yield emit(t.slice(0, start))
    if carry is not None and carry.num_rows:
        yield emit(carry)


@dataclass(frozen=True)
class ChunkedTable:
    """The chunked engine's handle: a re-readable source, its columns and domain, and the keyed per-user
    transformations to apply to every chunk (in order) when it is read."""

    source: Any
    columns: Columns
    domain: FiniteDomain | BoxDomain | None
    rows_per_chunk: int
    transforms: tuple[Callable[[UserDataset], UserDataset], ...] = field(default=())

    def __iter__(self) -> Iterator[UserDataset]:
        c = self.columns
        for ds in iter_user_chunks(
            self.source, c.user, c.item, c.points or None, self.domain, self.rows_per_chunk, c.tokenize
        ):
            for f in self.transforms:
                ds = f(ds)
            yield ds

    def then(self, transform: Callable[[UserDataset], UserDataset]) -> ChunkedTable:
        return replace(self, transforms=(*self.transforms, transform))


class ChunkedEngine(Engine):
    """Bounded memory: a path (Parquet, CSV, JSON lines), a table, or a stream (a zero-argument callable that
    returns an iterator of Arrow batches or tables, e.g. from a database cursor) read in chunks of whole users.

    Parameters
    ----------
    rows_per_chunk:
        Rows read per batch (a chunk holds the batch's complete users; a user larger than a batch is kept
        whole).
    """

    name = "chunked"

    def __init__(self, rows_per_chunk: int = ROWS_PER_CHUNK):
        if isinstance(rows_per_chunk, bool) or int(rows_per_chunk) != rows_per_chunk or rows_per_chunk < 1:
            raise ParameterError("rows_per_chunk must be a positive integer")
        self.rows_per_chunk = int(rows_per_chunk)

    def load(self, source: Any, columns: Columns, domain: FiniteDomain | BoxDomain | None = None) -> ChunkedTable:
        if isinstance(source, UserDataset):
            source = source.to_arrow(columns.user, columns.item or "item")
        if isinstance(domain, FiniteDomain) and not domain.public:
            raise DataError("reading in chunks needs a public domain (a FiniteDomain you declare)")
        table = ChunkedTable(source, columns, domain, self.rows_per_chunk)
        for _ in _batches(source, columns.names, self.rows_per_chunk):  # the columns exist (reads one batch)
            break
        return table

    def user_sizes(self, data: ChunkedTable) -> UserSizes:
        lo, hi, n = None, 0, 0
        for ds in data:
            if ds.n_users:
                c = ds.counts()
                lo = int(c.min()) if lo is None else min(lo, int(c.min()))
                hi, n = max(hi, int(c.max())), n + ds.n_users
        return UserSizes(lo or 0, hi, n)

    def grid_sum(
        self, data: ChunkedTable, box: BoxDomain, shape: int | tuple[int, int], drop_outside: bool = False
    ) -> np.ndarray:
        shape = check_grid(box, shape)  # also when no chunk comes
        rows = _Rows()
        for ds in data:
            rows.add(*memory.grid_rows(ds, shape, box, drop_outside))
        return rows.total(shape[0] * shape[1]).reshape(shape)

    def histogram_sum(self, data: ChunkedTable, normalize: bool = True) -> np.ndarray:
        if not isinstance(data.domain, FiniteDomain):
            raise DataError("this release needs ids in a public finite domain; declare the domain")
        rows = _Rows()
        for ds in data:
            rows.add(*memory.histogram_rows(ds, normalize))
        return rows.total(len(data.domain))

    def per_user_mean(self, data: ChunkedTable, query: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        keys, means = [], []
        for ds in data:
            if ds.n_users:
                keys.append(ds.user_ids)
                means.append(memory.per_user_mean(ds, query))
        if not keys:
            raise DataError("this release needs at least one user (the number of users is public for it)")
        k = np.concatenate(keys)
        return np.concatenate(means)[np.argsort(k, kind="stable")]

    def edges(self, data: ChunkedTable) -> UserDataset:
        users, labels = [], []
        for ds in data:
            e = memory.MemoryEngine().edges(ds)
            users.append(np.repeat(e.user_ids, e.counts()))
            labels.append(e.domain.labels[e.items])
        if not users:
            return edges_from_pairs(np.empty(0, dtype=np.int64), np.empty(0, dtype=object))
        return edges_from_pairs(np.concatenate(users), np.concatenate(labels))

    def bounded_item_sums(self, data: ChunkedTable, cap, keep, weights) -> tuple[np.ndarray, np.ndarray]:
        parts, width = [], None
        for ds in data:  # every chunk holds whole users: their bounding is final
            lab, sums = bounded_item_sums_of(memory.MemoryEngine().edges(ds), cap, keep, weights)
            parts.append((lab, sums))
            width = sums.shape[1]
        if width is None:
            width = np.asarray(weights(np.ones(1, dtype=np.int64))).shape[1]
        return merge_item_sums(parts, width)

    def key_records(self, data: ChunkedTable) -> tuple[UserDataset, np.ndarray]:
        users, labels, mults = [], [], []
        for ds in data:  # every chunk holds whole users: its (user, key) multiplicities are final
            kd, mult = memory.MemoryEngine().key_records(ds)
            users.append(np.repeat(kd.user_ids, kd.counts()))
            labels.append(np.asarray(kd.domain.labels)[kd.items])
            mults.append(mult)
        if not users:
            return key_records_from_triples(np.empty(0, dtype=np.int64), np.empty(0, dtype=object), np.empty(0))
        return key_records_from_triples(np.concatenate(users), np.concatenate(labels), np.concatenate(mults))

    def key_record_sums(self, data: ChunkedTable, fn, width: int) -> tuple[np.ndarray, np.ndarray]:
        parts = []
        for ds in data:  # every chunk holds whole users: each person's bounding is final
            parts.append(fn(*memory.MemoryEngine().key_records(ds)))
        return merge_item_sums(parts, int(width))

    def sample_keyed(self, data: ChunkedTable, s: int, streams: KeyedStreams) -> ChunkedTable:
        if isinstance(s, bool) or int(s) != s or s < 1:
            raise DataError(f"the per-user sample size must be at least 1, got {s}")
        return data.then(lambda ds, s=int(s): memory.sample_keyed(ds, s, streams) if ds.n_users else ds)

    def randomize_keyed(
        self, data: ChunkedTable, randomizer: Any, streams: KeyedStreams, m: int | None = None
    ) -> ChunkedTable:
        return data.then(lambda ds: memory.randomize_keyed(ds, randomizer, streams, m))


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

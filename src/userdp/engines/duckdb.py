"""The DuckDB engine: userdp's data plane on an embedded, out-of-core, multi-threaded SQL engine.

Files (CSV, TSV, Parquet, JSON lines; a folder or a glob of them) and in-memory frames (Arrow, pandas, polars)
are read by DuckDB, in **any row order**: no input needs to be sorted or grouped by user. DuckDB's hash
aggregation and external sort use every core and spill to ``temp_directory`` past ``memory_limit``, so a
table larger than memory runs in bounded memory.

What each aggregate costs:

* **In SQL** (one or two parallel scans, hash aggregations): the user sizes, the exact integer count tables
  ``T[bin, size]`` behind the heatmap grid sum and the histogram sum (:func:`~userdp.engines.base.sum_table`
  then turns them into floats exactly as every engine does), the deduplicated person-element edges, the
  records per (person, key), and the per-item sums of the persons who hold at most ``cap`` items.
* **On DuckDB's ordered stream** (``ORDER BY user``, read in batches of whole users): whatever needs a
  person's items together in Python -- per-user query means (correctly rounded sums), the keyed bounding of
  persons holding more than ``cap`` items, and the keyed per-user transformations (sampling with
  replacement, item randomization) with everything computed after them. Each batch is a
  :class:`~userdp.data.UserDataset` run through the in-memory engine's functions, and the batches' exact
  aggregates are merged (:mod:`userdp.engines.streams`).

Cells are computed in SQL with the in-memory engine's arithmetic, operation for operation
(``floor((x - low) / width * rows)``, in doubles), the tokenizer is userdp's own (:func:`userdp.text.tokenize`,
run on the stream, since no SQL engine's ``\\w`` and lower-casing are Python's), and every floating-point
reduction runs in the shared functions: the same parameters and seed give bit-identical releases on the
in-memory, DuckDB and Spark engines.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from numba import njit

from ..data import BoxDomain, FileLayout, FileSource, FiniteDomain, UserDataset, file_layout, group_by_user, to_arrow
from ..errors import DataError, ParameterError
from ..noise import KeyedStreams
from . import memory, streams
from .base import (
    Columns,
    Engine,
    KeyValues,
    UserSizes,
    bounded_item_sums_of,
    check_grid,
    edges_from_pairs,
    key_records_from_triples,
    merge_int_sums,
    merge_item_sums,
    progress_default,
    sum_table,
    text_columns,
)

__all__ = ["DuckDBEngine", "DuckTable", "parse_memory_limit"]

BATCH_ROWS = 1 << 20  # rows per batch of the ordered stream (a batch holds the complete users in it)

_INTEGER = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "HUGEINT",
            "UHUGEINT"}  # fmt: skip
_FLOAT = {"FLOAT", "DOUBLE", "REAL"}
_SIZE_LIMIT = 1 << 31  # a user holds fewer than 2^31 items (count_table's key packing)


_UNITS = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
MIN_MEMORY_BYTES = 16 << 20  # below this DuckDB cannot hold one batch of a scan and would spill every row


def parse_memory_limit(text: str | None) -> str | None:
    """``"4GB"``, ``"512MB"``, ``"80%"`` (of the machine's memory) or ``None`` (DuckDB's default, 80%), checked
    before anything is read (at least 16 MB, or 1%); returns DuckDB's spelling."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(%|[KMGT]i?B|B)?\s*", str(text), re.IGNORECASE)
    unit = (m.group(2) or "B").upper().replace("IB", "B") if m else ""
    value = float(m.group(1)) if m else 0.0
    ok = m is not None and (1 <= value <= 100 if unit == "%" else value * _UNITS.get(unit, 0) >= MIN_MEMORY_BYTES)
    if not ok:
        raise ParameterError(f"--memory-limit takes a size of at least 16MB (such as 4GB) or a share of at least 1% "
                             f"(such as 50%), got {text!r}")  # fmt: skip
    return f"{m.group(1)}{unit}"


def _quote(name: str) -> str:
    return '"' + str(name).replace('"', '""') + '"'


def _literal(text: str) -> str:
    """A SQL string literal."""
    return "'" + str(text).replace("'", "''") + "'"


@dataclass(frozen=True)
class DuckTable:
    """The DuckDB engine's handle: a view with the columns ``u`` (the person), then ``c`` (item codes of a
    declared domain), ``i`` (item values read off the data) or ``x0, x1, ...`` (point coordinates); the
    domain; and the keyed per-user transformations to apply, in order, to every batch of whole users."""

    view: str
    columns: Columns
    domain: FiniteDomain | BoxDomain | None
    kind: str  # "codes" | "ids" | "points"
    dim: int = 0
    transforms: tuple[Callable[[UserDataset], UserDataset], ...] = field(default=())

    def then(self, transform: Callable[[UserDataset], UserDataset]) -> DuckTable:
        return replace(self, transforms=(*self.transforms, transform))

    @property
    def item_sql(self) -> str:
        return {"codes": "c", "ids": "i"}.get(self.kind, ", ".join(f"x{j}" for j in range(self.dim)))


class DuckDBEngine(Engine):
    """An embedded DuckDB database as the data plane: any row order, larger than memory, every core.

    Parameters
    ----------
    memory_limit:
        DuckDB's memory limit (``"4GB"``, ``"80%"``; default DuckDB's, 80% of the machine). Past it, sorts and
        aggregations spill to ``temp_directory``.
    threads:
        Threads DuckDB may use (default: every core).
    temp_directory:
        Where DuckDB spills (default: a ``.tmp`` folder DuckDB makes in the working directory... here: the
        system's temporary folder).
    batch_rows:
        Rows per batch of the ordered stream.
    """

    name = "duckdb"

    def __init__(
        self,
        memory_limit: str | None = None,
        threads: int | None = None,
        temp_directory: str | os.PathLike | None = None,
        batch_rows: int = BATCH_ROWS,
        progress: bool | None = None,
    ):
        self.memory_limit = parse_memory_limit(memory_limit)
        self.progress = progress_default(progress)  # DuckDB's progress bar (on standard output): off by default
        if threads is not None and (isinstance(threads, bool) or int(threads) != threads or threads < 1):
            raise ParameterError(f"threads must be a positive integer, got {threads!r}")
        if isinstance(batch_rows, bool) or int(batch_rows) != batch_rows or batch_rows < 1:
            raise ParameterError("batch_rows must be a positive integer")
        self.threads = None if threads is None else int(threads)
        self.temp_directory = None if temp_directory is None else str(temp_directory)
        self.batch_rows = int(batch_rows)
        self._con = None
        self._names = itertools.count()
        self._frames: dict[str, Any] = {}
        self._grouped: dict[str, str] = {}  # view -> its (u, t, k) table: records per person and key text
        self._grouped_keys: dict[str, tuple[str, FiniteDomain]] = {}  # view -> its coded, sorted records
        self._layout: FileLayout | None = None  # the file last loaded: DuckDB's reading errors are worded for it

    # -- the connection -------------------------------------------------------------------------
    @property
    def con(self):
        if self._con is None:
            import tempfile

            import duckdb

            config: dict[str, Any] = {"temp_directory": self.temp_directory or tempfile.gettempdir()}
            if self.memory_limit is not None:
                config["memory_limit"] = self.memory_limit
            if self.threads is not None:
                config["threads"] = self.threads
            try:
                self._con = duckdb.connect(":memory:", config=config)
            except duckdb.Error as exc:
                raise ParameterError(f"DuckDB refused its settings ({type(exc).__name__})") from None
            self._con.execute(f"SET enable_progress_bar = {'true' if self.progress else 'false'}")  # a session option
        return self._con

    def _name(self, what: str) -> str:
        return f"userdp_{what}_{next(self._names)}"

    def _register(self, what: str, frame: Any) -> str:
        """Register an in-memory Arrow table (zero copy) under a new name; returns the name."""
        name = self._name(what)
        self.con.register(name, frame)
        self._frames[name] = frame
        return name

    def _sql(self, query: str, params: list | None = None):
        """Run ``query``; DuckDB's errors become a :class:`DataError` naming only their kind (DuckDB's
        messages can quote rows of the file)."""
        import duckdb

        try:
            return self.con.execute(query, params or [])
        except duckdb.Error as exc:
            raise self._failed(exc) from None

    def _arrow(self, query: str, params: list | None = None) -> pa.Table:
        """The result of ``query`` as an Arrow table."""
        import duckdb

        try:
            return self.con.sql(query, params=params or None).to_arrow_table()
        except duckdb.Error as exc:
            raise self._failed(exc) from None

    def _reader(self, query: str) -> Iterator[pa.RecordBatch]:
        """The result of ``query`` as a stream of Arrow batches, on a cursor of its own (the engine's
        connection stays free for other queries while it streams)."""
        import duckdb

        try:
            cur = self.con.cursor()
            for name, frame in self._frames.items():  # registered frames are per connection
                cur.register(name, frame)
            reader = cur.sql(query).to_arrow_reader(self.batch_rows)
            yield from reader
        except duckdb.Error as exc:
            raise self._failed(exc) from None

    def _failed(self, exc: Exception) -> DataError:
        """DuckDB's error as a :class:`DataError`: a file that could not be read says what is wrong and which
        option fixes it (:meth:`~userdp.data.FileLayout.unreadable`, as the other engines say it). DuckDB's own
        message is only classified, never repeated: it can quote rows of the file."""
        import duckdb

        msg, kind = str(exc), type(exc).__name__
        if isinstance(exc, duckdb.OutOfMemoryException):
            return DataError("DuckDB ran out of memory; raise --memory-limit (memory_limit=) or free some memory")
        reading = isinstance(exc, (duckdb.InvalidInputException, duckdb.ConversionException, duckdb.IOException))
        if self._layout is not None and reading:
            low = msg.lower()
            if "invalid unicode" in low or "not utf-8 encoded" in low:
                problem = "utf8"
            elif isinstance(exc, duckdb.ConversionException) or "could not convert" in low:
                problem = "type"
            elif "sniffing" in low or "columns" in low:
                problem = "fields"
            elif "gzip" in low or "zstd" in low or "compress" in low:
                problem = "compressed"
            else:
                problem = "other"
            return self._layout.unreadable(problem)
        return DataError(f"DuckDB could not read the data (a DuckDB {kind})")

    # -- input ----------------------------------------------------------------------------------
    def _source(self, source: Any, columns: Columns, domain: Any) -> tuple[str, str]:
        """A SQL table expression for ``source`` and what it is (``file`` or ``table``)."""
        if isinstance(source, UserDataset):
            source = source.to_arrow(columns.user, columns.item or "item")
        file = FileSource.of(source)
        self._layout = None
        if file is not None:
            return self._file(file, columns, domain), "file"
        if callable(source):
            return self._stored(source, columns), "stream"
        return self._register("frame", to_arrow(source)), "table"

    def _stored(self, source: Callable[[], Iterable[Any]], columns: Columns) -> str:
        """A stream (a zero-argument callable returning an iterator of Arrow record batches or tables, e.g.
        from a database cursor) read once into a DuckDB table, spillable past the memory limit; its name."""
        from ..data import check_columns

        names = list(dict.fromkeys(columns.names))
        schema: list[pa.Schema] = []

        def batches() -> Iterator[pa.RecordBatch]:
            for part in source():
                t = pa.Table.from_batches([part]) if isinstance(part, pa.RecordBatch) else to_arrow(part)
                check_columns(columns.names, t.column_names, "stream")
                t = t.select(names)
                if schema and t.schema != schema[0]:
                    try:
                        t = t.cast(schema[0])
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
                        raise DataError("the stream's column types change between batches") from None
                schema[:1] = schema or [t.schema]
                yield from t.to_batches()

        it = batches()
        head = next(it, None)
        if head is None:
            raise DataError("the stream yields no batch (give at least an empty one with its columns)")
        name = self._name("stream")
        self.con.register(name + "_in", pa.RecordBatchReader.from_batches(head.schema, itertools.chain([head], it)))
        try:
            self._sql(f"CREATE TABLE {name} AS SELECT * FROM {name}_in")
        finally:
            self.con.unregister(name + "_in")
        return name

    def _file(self, source: FileSource, columns: Columns, domain: Any) -> str:
        """A SQL table expression reading the file, folder or glob ``source`` as every engine reads it
        (:func:`~userdp.data.file_layout`: the delimiter, the header line, a headerless file's names, sniffed
        on its first file)."""
        import glob as globs

        path = str(source.path)
        globbed = any(ch in path for ch in "*?[")
        p = Path(path)
        if not globbed and not p.exists():
            raise DataError(f"no such file: {path}")
        target, probe = path, p
        if globbed or p.is_dir():
            if globbed:
                files = sorted(Path(f) for f in globs.glob(path, recursive=True) if Path(f).is_file())
            else:
                files = sorted(q for q in p.rglob("*") if q.is_file() and not q.name.startswith(("_", ".")))
            if not files:
                raise DataError(f"no file matches {path}" if globbed else f"{p.name} is an empty folder")
            probe = next((f for f in files if f.stat().st_size), files[0])
            if not globbed:
                target = str(p / "**" / f"*{''.join(probe.suffixes)}")
        layout = file_layout(source, probe=probe)
        self._layout = layout
        if probe.suffix.lower() in (".xz", ".bz2"):  # compressions DuckDB cannot read: through Arrow, in memory
            from ..data import read_table

            one = replace(source, path=probe)
            return self._register("frame", read_table(one, text=text_columns(columns, domain)))
        lit = _literal(target)
        if layout.kind == "parquet":
            return f"read_parquet({lit})"
        if layout.kind == "json":
            return f"read_json({lit}, format='newline_delimited')"
        text = ", ".join(f"{_quote(c)}: 'VARCHAR'" for c in text_columns(columns, domain))
        names = "" if layout.names is None else ", names=[" + ", ".join(_literal(c) for c in layout.names) + "]"
        header = "true" if layout.header else "false"
        # skip=0: DuckDB's sniffer would otherwise skip lines that do not fit its guess (a ragged line could
        # become the header, and the lines above it dropped): the first line is the header, or a record
        delim = _literal(layout.delimiter)
        csv = f"read_csv({lit}, header={header}, skip=0, delim={delim}, quote='\"', escape='\"'{names}"
        # the columns checked before the text columns' types name them (DuckDB's binder error names nothing)
        layout.check_columns(columns.names, [r[0] for r in self._sql(f"DESCRIBE SELECT * FROM {csv})").fetchall()])
        return f"{csv}, types={{{text}}})"

    def load(self, source: Any, columns: Columns, domain: FiniteDomain | BoxDomain | None = None) -> DuckTable:
        from ..data import check_columns

        if isinstance(source, UserDataset) and isinstance(domain, FiniteDomain):
            if not memory._same_domain(source.domain, domain):
                raise DataError("the dataset's item domain is not the declared one; build it with that domain")
        names = columns.names  # refuses a Columns naming no items
        src, what = self._source(source, columns, domain)
        described = self._sql(f"DESCRIBE SELECT * FROM {src}").fetchall()
        if what == "file" and self._layout is not None:
            self._layout.check_columns(names, [r[0] for r in described])
        else:
            check_columns(names, [r[0] for r in described], what)
        types = {r[0]: str(r[1]).upper() for r in described}
        user = self._user_expr(columns.user, types[columns.user])
        view = self._name("view")
        if columns.points:
            exprs = []
            for j, c in enumerate(columns.points):
                t = types[c]
                if not (t in _INTEGER or t in _FLOAT or t.startswith("DECIMAL")):
                    raise DataError(f"coordinate column {c!r} has type {t.lower()}; it must be numeric")
                exprs.append(f"CAST({_quote(c)} AS DOUBLE) AS x{j}")
            self._sql(f"CREATE VIEW {view} AS SELECT {user} AS u, {', '.join(exprs)} FROM {src}")
            self._refuse_missing(view, ["u", *[f"x{j}" for j in range(len(columns.points))]], names)
            finite = " OR ".join(f"NOT isfinite(x{j})" for j in range(len(columns.points)))
            if self._any(f"SELECT 1 FROM {view} WHERE {finite} LIMIT 1"):
                raise DataError("point coordinates contain NaN or inf")
            if isinstance(domain, BoxDomain):
                if domain.dim != len(columns.points):
                    raise DataError(f"box has dimension {domain.dim} but points have {len(columns.points)}")
                outside = " OR ".join(
                    f"x{j} < {float(lo)!r}::DOUBLE OR x{j} > {float(hi)!r}::DOUBLE"
                    for j, (lo, hi) in enumerate(zip(domain.low, domain.high, strict=True))
                )
                if self._any(f"SELECT 1 FROM {view} WHERE {outside} LIMIT 1"):
                    raise DataError(
                        f"some points lie outside the declared box {domain.low} .. {domain.high}; "
                        "pass a larger public box or drop them explicitly"
                    )
            return DuckTable(view, columns, domain, "points", len(columns.points))
        t = types[columns.item]
        if t.startswith("ENUM"):
            item = f"CAST({_quote(columns.item)} AS VARCHAR)"
        elif t == "VARCHAR" or t in _INTEGER - {"HUGEINT", "UHUGEINT"}:
            item = _quote(columns.item)
        else:
            raise DataError(
                f"item column {columns.item!r} has type {t.lower()}; ids must be strings or integers"
                + ("" if columns.tokenize else " (use items=[...] for point coordinates)")
            )
        if columns.tokenize and t != "VARCHAR" and not t.startswith("ENUM"):
            raise DataError(f"--tokenize needs a text column; {columns.item!r} has type {t.lower()}")
        self._sql(f"CREATE VIEW {view} AS SELECT {user} AS u, {item} AS i FROM {src}")
        self._refuse_missing(view, ["u", "i"], names)
        if columns.tokenize:
            view = self._words(view)
        if isinstance(domain, FiniteDomain):
            return self._coded(view, columns, domain)
        return DuckTable(view, columns, domain, "ids")

    supports_key_values = True

    def load_key_values(self, source: Any, user: str, key: str, value: str) -> str:
        """A view ``(u, k, v)`` of the records: persons as :meth:`load` reads them, keys as text (strings or
        whole numbers), values as doubles (numeric columns only); missing and non-finite values refused.
        Returns the view's name."""
        from ..data import check_columns

        if callable(source) and not isinstance(source, UserDataset):
            raise ParameterError("per-key aggregates read a file or a table, not a stream of batches")
        if isinstance(source, UserDataset):
            raise ParameterError("per-key aggregates read a table with a value column, not a UserDataset")
        names = [user, key, value]
        src, what = self._source(source, Columns(user, key), None)
        described = self._sql(f"DESCRIBE SELECT * FROM {src}").fetchall()
        if what == "file" and self._layout is not None:
            self._layout.check_columns(names, [r[0] for r in described])
        else:
            check_columns(names, [r[0] for r in described], what)
        types = {r[0]: str(r[1]).upper() for r in described}
        u = self._user_expr(user, types[user])
        t = types[key]
        if not (t == "VARCHAR" or t.startswith("ENUM") or t in _INTEGER):
            raise DataError(f"column {key!r} has type {t.lower()}; persons and keys must be text or whole numbers")
        t = types[value]
        if not (t in _INTEGER or t in _FLOAT or t.startswith("DECIMAL")):
            raise DataError(f"value column {value!r} has type {t.lower()}; it must be numeric")
        view = self._name("values")
        self._sql(f"CREATE VIEW {view} AS SELECT {u} AS u, CAST({_quote(key)} AS VARCHAR) AS k, "
                  f"CAST({_quote(value)} AS DOUBLE) AS v FROM {src}")  # fmt: skip
        self._refuse_missing(view, ["u", "k", "v"], names)
        if self._any(f"SELECT 1 FROM {view} WHERE NOT isfinite(v) LIMIT 1"):
            raise DataError(f"value column {value!r} contains NaN or inf")
        return view

    def key_value_sums(self, data: str, fn: Callable, width: int) -> tuple[np.ndarray, np.ndarray]:
        """The records read in batches of whole persons (DuckDB's ``ORDER BY`` the person), ``fn`` on each."""
        parts = []
        for t in _whole_users(self._reader(f"SELECT u, k, v FROM {data} ORDER BY u")):
            batch = KeyValues(t.column("u").to_numpy(zero_copy_only=False),
                              np.asarray(t.column("k").to_numpy(zero_copy_only=False), dtype=object),
                              t.column("v").to_numpy().astype(np.float64))  # fmt: skip
            parts.append(fn(batch))
        return merge_int_sums(parts, int(width))

    def _user_expr(self, name: str, t: str) -> str:
        if t == "VARCHAR" or t.startswith("ENUM"):
            return f"CAST({_quote(name)} AS VARCHAR)"
        if t in _INTEGER:
            return f"CAST({_quote(name)} AS BIGINT)"
        if t in _FLOAT or t.startswith("DECIMAL"):
            raise DataError("person ids must be strings or integers, not floating-point numbers")
        raise DataError(f"unsupported user key type {t.lower()}; person ids must be strings or integers")

    def _any(self, query: str) -> bool:
        return bool(self._sql(query).fetchall())

    def _refuse_missing(self, view: str, cols: list[str], names: list[str]) -> None:
        cond = " OR ".join(f"{c} IS NULL" for c in cols)
        if self._any(f"SELECT 1 FROM {view} WHERE {cond} LIMIT 1"):
            raise DataError(f"columns {names} have missing values")

    def _words(self, view: str) -> str:
        """A table of one row per (person, word) of the view's texts, split by userdp's tokenizer on DuckDB's
        stream (in batches), then stored (spillable) in DuckDB."""
        from ..text import tokenize_column

        utype = self.con.sql(f"SELECT u FROM {view} LIMIT 0").to_arrow_table().schema.field("u").type
        schema = pa.schema([("u", utype), ("i", pa.large_string())])

        def batches() -> Iterator[pa.RecordBatch]:
            for b in self._reader(f"SELECT u, i FROM {view}"):
                if b.num_rows == 0:
                    continue
                counts, words = tokenize_column(b.column("i"))  # tokenize() on every row, compiled
                keys = pa.array(np.repeat(b.column("u").to_numpy(zero_copy_only=False), counts),
                                type=schema.field("u").type)  # fmt: skip
                yield pa.RecordBatch.from_arrays([keys, words.cast(pa.large_string())], schema=schema)

        stream = pa.RecordBatchReader.from_batches(schema, batches())
        table = self._name("words")
        self.con.register(table + "_in", stream)
        self._sql(f"CREATE TABLE {table} AS SELECT u, CAST(i AS VARCHAR) AS i FROM {table}_in")
        self.con.unregister(table + "_in")
        return table

    def _coded(self, view: str, columns: Columns, domain: FiniteDomain) -> DuckTable:
        """The view's items as codes of the declared domain (labels matched as text); an item outside it is
        dropped (the inner join), person by person, as the in-memory engine drops it (``OUTSIDE_DOMAIN``)."""
        labels = pa.array([str(x) for x in domain.labels], type=pa.string())
        dom = self._register("domain", pa.table({"t": labels, "c": pa.array(np.arange(len(domain)), pa.int64())}))
        coded = self._name("view")
        self._sql(f"CREATE VIEW {coded} AS SELECT v.u, d.c FROM {view} v JOIN {dom} d ON CAST(v.i AS VARCHAR) = d.t")
        return DuckTable(coded, columns, domain, "codes")

    # -- the ordered stream of whole users --------------------------------------------------------
    def chunks(self, data: DuckTable) -> Iterator[UserDataset]:
        """The table as datasets of whole users (DuckDB's ``ORDER BY user``, cut after each batch's last
        complete user), each through the handle's transformations."""
        for t in _whole_users(self._reader(f"SELECT u, {data.item_sql} FROM {data.view} ORDER BY u")):
            yield self._dataset(data, t)

    def _dataset(self, data: DuckTable, t: pa.Table) -> UserDataset:
        users = t.column("u").to_numpy(zero_copy_only=False)
        if data.kind == "points":
            items = np.column_stack([t.column(f"x{j}").to_numpy() for j in range(data.dim)])
            offsets, order, keys = group_by_user(users)
            ds = UserDataset(offsets, items[order], keys, data.domain)
        elif data.kind == "codes":
            offsets, order, keys = group_by_user(users)
            ds = UserDataset(offsets, t.column("c").to_numpy()[order], keys, data.domain)
        else:
            ds = UserDataset.from_arrays(users, t.column("i").to_numpy(zero_copy_only=False))
        for f in data.transforms:
            ds = f(ds)
        return ds

    def _streamed(self, data: DuckTable) -> bool:
        """Whether the aggregates of ``data`` are read off the ordered stream of whole users (they must be
        once a keyed per-user transformation applies; :class:`~userdp.engines.chunked.ChunkedEngine` always
        does) rather than computed in SQL."""
        return bool(data.transforms)

    def _stream(self, data: DuckTable) -> streams.Stream:
        return streams.Stream(lambda: self.chunks(data), data.domain)

    # -- aggregates -------------------------------------------------------------------------------
    def _sizes(self, data: DuckTable, where: str = "") -> str:
        return f"SELECT u, count(*) AS n FROM {data.view} {where} GROUP BY u"

    def user_sizes(self, data: DuckTable) -> UserSizes:
        if self._streamed(data):
            return streams.user_sizes(self._stream(data))
        lo, hi, n = self._sql(f"SELECT min(n), max(n), count(*) FROM ({self._sizes(data)})").fetchall()[0]
        return UserSizes(int(lo or 0), int(hi or 0), int(n))

    def _table(self, query: str, params: list, length: int) -> np.ndarray:
        """``sum_table`` of the ``(bin, size, count)`` rows ``query`` gives (one row per distinct pair)."""
        t = self._arrow(query, params)
        bins = t.column("b").to_numpy().astype(np.int64)
        sizes = t.column("n").to_numpy().astype(np.int64)
        counts = t.column("k").to_numpy().astype(np.int64)
        if sizes.size and (sizes.max() >= _SIZE_LIMIT or sizes.min() < 1 or bins.min() < 0 or bins.max() >= length):
            raise DataError("a user holds more than 2^31 items, or a bin or size is out of range")
        return sum_table(*_sorted_table(bins, sizes, counts, int(length)), length)

    def grid_sum(
        self, data: DuckTable, box: BoxDomain, shape: int | tuple[int, int], drop_outside: bool = False
    ) -> np.ndarray:
        if data.kind != "points" or data.dim != 2:
            raise DataError("heatmaps need 2-D point items (e.g. lat, lon)")
        rows, cols = check_grid(box, shape)
        if self._streamed(data):
            return streams.grid_sum(self._stream(data), box, (rows, cols), drop_outside)
        (l0, l1), (h0, h1) = (float(v) for v in box.low), (float(v) for v in box.high)
        inside = "x0 >= $1 AND x0 <= $3 AND x1 >= $2 AND x1 <= $4"
        params = [l0, l1, h0, h1]
        if not drop_outside and self._any_params(f"SELECT 1 FROM {data.view} WHERE NOT ({inside}) LIMIT 1", params):
            raise DataError(memory._OUTSIDE)
        # the in-memory engine's cell arithmetic, operation for operation (metrics.spaces._grid_pass)
        r = "least(greatest(CAST(floor((x0 - $1) / $5 * $7) AS BIGINT), 0), $7 - 1)"
        c = "least(greatest(CAST(floor((x1 - $2) / $6 * $8) AS BIGINT), 0), $8 - 1)"
        query = f"""
            WITH p AS (SELECT u, {r} * $8 + {c} AS b FROM {data.view} WHERE {inside}),
                 s AS (SELECT u, count(*) AS n FROM p GROUP BY u)
            SELECT b, n, count(*) AS k FROM p JOIN s USING (u) GROUP BY b, n"""
        params = [l0, l1, h0, h1, h0 - l0, h1 - l1, rows, cols]
        return self._table(query, params, rows * cols).reshape(rows, cols)

    def _any_params(self, query: str, params: list) -> bool:
        return bool(self._sql(query, params).fetchall())

    def histogram_sum(self, data: DuckTable, normalize: bool = True) -> np.ndarray:
        if data.kind != "codes" or not data.domain.public:
            raise DataError("this release needs ids in a public finite domain; declare the domain")
        if self._streamed(data):
            return streams.histogram_sum(self._stream(data), normalize)
        if normalize:
            sizes = self._sizes(data)
            query = f"SELECT c AS b, n, count(*) AS k FROM {data.view} JOIN ({sizes}) USING (u) GROUP BY c, n"
        else:
            query = f"SELECT c AS b, 1 AS n, count(*) AS k FROM {data.view} GROUP BY c"
        return self._table(query, [], len(data.domain))

    def per_user_mean(self, data: DuckTable, query: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        return streams.per_user_mean(self._stream(data), query)

    def edges(self, data: DuckTable) -> UserDataset:
        if data.kind == "points":
            raise DataError("distinct counting needs items that are ids (a finite domain)")
        if self._streamed(data):
            return streams.edges(self._stream(data))
        if data.kind == "ids":  # coded in SQL, sorted by person and code: the edges' CSR form as it comes
            coded, domain = self._coded_keys(data)
            t = self._arrow(f"SELECT u, code FROM {coded} ORDER BY u, code")
            users = t.column("u").to_numpy(zero_copy_only=False)
            starts = np.flatnonzero(np.r_[True, users[1:] != users[:-1]]) if users.size else np.zeros(0, np.int64)
            offsets = np.r_[starts, users.size].astype(np.int64)
            return UserDataset(offsets, t.column("code").to_numpy().astype(np.int64), users[starts], domain)
        t = self._arrow(f"SELECT DISTINCT u, {data.item_sql} AS i FROM {data.view}")
        return edges_from_pairs(t.column("u").to_numpy(zero_copy_only=False), self._labels(data, t.column("i")))

    def key_records(self, data: DuckTable) -> tuple[UserDataset, np.ndarray]:
        if data.kind == "points":
            raise DataError("counting records per key needs keys that are ids (a finite domain)")
        if self._streamed(data):
            return streams.key_records(self._stream(data))
        col = data.item_sql
        t = self._arrow(f"SELECT u, {col} AS i, count(*) AS k FROM {data.view} GROUP BY u, {col}")
        return key_records_from_triples(
            t.column("u").to_numpy(zero_copy_only=False), self._labels(data, t.column("i")),
            t.column("k").to_numpy().astype(np.int64),
        )  # fmt: skip

    def key_record_sums(self, data: DuckTable, fn, width: int) -> tuple[np.ndarray, np.ndarray]:
        """The (person, key) record counts grouped by DuckDB, read in batches of whole persons, ``fn`` on each."""
        if data.kind == "points":
            raise DataError("counting records per key needs keys that are ids (a finite domain)")
        if self._streamed(data):
            return streams.key_record_sums(self._stream(data), fn, width)
        if data.kind == "ids":
            part = getattr(getattr(fn, "func", None), "key_part", None)  # (a part of the key counts' bounding)
            if part is not None and not getattr(fn, "args", ()):
                return self._key_part_in_sql(data, part, dict(fn.keywords), int(width))
            return self._key_record_sums_of_ids(data, fn, int(width))
        col = "c"  # codes of a declared domain
        parts = []
        query = f"SELECT u, {col} AS i, count(*) AS k FROM {data.view} GROUP BY u, {col} ORDER BY u"
        for t in _whole_users(self._reader(query)):
            sets, mult = key_records_from_triples(
                t.column("u").to_numpy(zero_copy_only=False), self._labels(data, t.column("i")),
                t.column("k").to_numpy().astype(np.int64),
            )  # fmt: skip
            parts.append(fn(sets, mult))
        return merge_item_sums(parts, int(width))

    def _grouped_table(self, data: DuckTable) -> str:
        """The view's records per person and key text, ``(u, t, k)``, stored once (in DuckDB, spillable) for
        every pass of the releases on this handle: the set union's distinct pairs and the key counts' coded
        records are read off it."""
        if data.view not in self._grouped:
            grouped = self._name("grouped")
            self._sql(f"CREATE TABLE {grouped} AS SELECT u, CAST(i AS VARCHAR) AS t, count(*) AS k "
                      f"FROM {data.view} GROUP BY ALL")  # fmt: skip
            self._grouped[data.view] = grouped
        return self._grouped[data.view]

    def _coded_keys(self, data: DuckTable) -> tuple[str, FiniteDomain]:
        """The view's records per person and key, ``(u, code, k)``, with the keys' text numbered once in its
        sorted order (DuckDB compares text byte by byte in UTF-8, which is Python's order of code points), stored
        sorted by person and code (each pass's ``ORDER BY`` then reads a sorted table: 0.37 s against 1.5 s for
        the join and sort at 10^7 pairs), and that (non-public) domain of the keys' text; kept (in DuckDB,
        spillable) for every later pass over the same table."""
        if data.view not in self._grouped_keys:
            grouped, names, coded = self._grouped_table(data), self._name("keys"), self._name("coded")
            self._sql(f"CREATE TABLE {names} AS SELECT t, CAST(row_number() OVER (ORDER BY t) - 1 AS BIGINT) "
                      f"AS code FROM (SELECT DISTINCT t FROM {grouped})")  # fmt: skip
            text = self._arrow(f"SELECT t FROM {names} ORDER BY code").column("t").to_numpy(zero_copy_only=False)
            domain = FiniteDomain(np.asarray(text, dtype=object), public=False)
            self._sql(f"CREATE TABLE {coded} AS SELECT g.u, n.code, g.k FROM {grouped} g JOIN {names} n USING (t) "
                      f"ORDER BY g.u, n.code")  # fmt: skip
            self._sql(f"DROP TABLE {names}")
            self._grouped_keys[data.view] = (coded, domain)
        return self._grouped_keys[data.view]

    def _key_part_in_sql(self, data: DuckTable, part: str, kw: dict, width: int) -> tuple[np.ndarray, np.ndarray]:
        """The key counts' per-person parts (:func:`userdp.vocabulary.kept_grid_part`,
        :func:`~userdp.vocabulary.bounded_counts_part`) in SQL, over the grouped records: each person's records
        restricted to the counted keys (matched as text), ranked by records, most first, ties in the keys' text
        order (DuckDB compares text byte by byte in UTF-8: Python's order of code points), as the parts rank
        them. ``kept_grid``: the table of (rank, records clipped at the largest Linf) counts up to the largest
        L0, from which every candidate's kept records are exact integer sums (row by row: the bounds may be
        up to 10^6); ``bounded_counts``: each counted
        key's records within rank L0, at most Linf each. What the parts give, bit for bit (tested)."""
        counted = np.asarray(kw["counted"], dtype=object)
        keys = self._register(
            "counted",
            pa.table(
                {
                    "t": pa.array([str(x) for x in counted], type=pa.string()),
                    "pos": pa.array(np.arange(counted.size), type=pa.int64()),
                }
            ),
        )
        ranked = f"""SELECT n.pos, g.k, row_number() OVER (PARTITION BY g.u ORDER BY g.k DESC, g.t) AS r
                     FROM {self._grouped_table(data)} g JOIN {keys} n USING (t)"""
        if part == "kept_grid":
            l0s, linfs = (np.asarray(kw[k], dtype=np.int64) for k in ("l0s", "linfs"))
            top_l, top_k = int(l0s.max()), int(linfs.max())
            t = self._arrow(f"SELECT r, least(k, {top_k}) AS k, count(*) AS n FROM ({ranked}) WHERE r <= {top_l} "
                            f"GROUP BY ALL")  # fmt: skip
            r, k, n = (t.column(c).to_numpy().astype(np.int64) for c in ("r", "k", "n"))
            kept_rows = n[:, None] * np.minimum(k[:, None], linfs[None, :])  # each row's records kept by each Linf
            kept = np.stack([kept_rows[r <= l0].sum(axis=0) for l0 in l0s]).astype(np.int64)  # (sparse: any grid)
            if not self._any(f"SELECT 1 FROM {self._grouped_table(data)} LIMIT 1"):
                return merge_item_sums([], width)  # no person: no part (as no batch)
            return merge_item_sums([(np.array([""], dtype=object), kept.reshape(1, -1))], width)
        l0, linf = int(kw["l0"]), int(kw["linf"])
        t = self._arrow(f"SELECT pos, sum(least(k, {linf}))::BIGINT AS s FROM ({ranked}) WHERE r <= {l0} "
                        f"GROUP BY pos HAVING sum(least(k, {linf})) > 0")  # fmt: skip
        labels = counted[t.column("pos").to_numpy().astype(np.int64)]
        return merge_item_sums([(labels, t.column("s").to_numpy().astype(np.int64).reshape(-1, 1))], width)

    def _key_record_sums_of_ids(self, data: DuckTable, fn, width: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`key_record_sums` of keys read off the data, coded in SQL (:meth:`_coded_keys`): the ordered
        stream carries ``(person, code, records)`` integers, each batch a dataset of whole persons over that one
        domain. What ``fn`` sees per person is what :func:`~userdp.engines.base.key_records_from_triples` gives
        (its keys in text order), without coding every batch's labels again."""
        coded, domain = self._coded_keys(data)
        parts = []
        query = f"SELECT u, code, k FROM {coded} ORDER BY u, code"
        for t in _whole_users(self._reader(query)):
            users = t.column("u").to_numpy(zero_copy_only=False)
            starts = np.flatnonzero(np.r_[True, users[1:] != users[:-1]])
            offsets = np.r_[starts, users.size].astype(np.int64)
            sets = UserDataset(offsets, t.column("code").to_numpy().astype(np.int64), users[starts], domain)
            parts.append(fn(sets, t.column("k").to_numpy().astype(np.int64)))
        return merge_item_sums(parts, width)

    def bounded_item_sums(
        self, data: DuckTable, cap, keep, weights, exclude=None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Persons holding at most ``cap`` distinct items keep them all: their weights are summed per item in
        SQL (one weight row per kept count, joined). Persons holding more are bounded by their keyed streams
        on DuckDB's ordered stream of those persons only. The ``exclude``d labels are matched to the table's
        own values (their text as :func:`~userdp.engines.base.bounded_item_sums_of` reads it) and anti-joined
        out of the pairs first."""
        if data.kind == "points":
            raise DataError("a set union needs items that are ids (a finite domain)")
        cap = int(cap)
        width = int(np.asarray(weights(np.ones(1, dtype=np.int64))).shape[1])
        if self._streamed(data):
            return streams.bounded_item_sums(self._stream(data), cap, keep, weights, width, exclude)
        col = "CAST(c AS BIGINT)" if data.kind == "codes" else "i"
        shared = data.kind == "ids" and str(self.con.sql(f"SELECT i FROM {data.view} LIMIT 0").types[0]) == "VARCHAR"
        all_pairs = pairs = self._name("pairs")
        if shared:  # text ids: the distinct pairs are the grouped records' (kept for the key counts' passes)
            self._sql(f"CREATE VIEW {pairs} AS SELECT u, t AS i FROM {self._grouped_table(data)}")
        else:
            self._sql(f"CREATE TABLE {pairs} AS SELECT DISTINCT u, {col} AS i FROM {data.view}")
        if exclude is not None and len(exclude):
            values = self._arrow(f"SELECT DISTINCT i FROM {all_pairs}").column("i")
            text = np.array([str(x) for x in self._labels(data, values)], dtype=object).astype(str)
            gone = self._register("exclude", pa.table({"i": values.filter(pa.array(np.isin(
                text, np.asarray(exclude).astype(str))))}))  # fmt: skip
            pairs = self._name("pairs_left")
            self._sql(f"CREATE VIEW {pairs} AS SELECT u, i FROM {all_pairs} WHERE i NOT IN (SELECT i FROM {gone})")
        try:
            ks = np.arange(1, cap + 1, dtype=np.int64)
            w = np.asarray(weights(ks), dtype=np.int64)
            if w.ndim != 2 or w.shape != (cap, width):
                raise ParameterError("weights must map the persons' kept counts to one row per person")
            wt = self._register("weights", pa.table({"k": ks, **{f"w{j}": w[:, j] for j in range(width)}}))
            sums = ", ".join(f"sum(w{j})::BIGINT AS w{j}" for j in range(width))
            light = self._arrow(f"""
                WITH d AS (SELECT u, count(*) AS k FROM {pairs} GROUP BY u)
                SELECT p.i, {sums} FROM {pairs} p JOIN d USING (u) JOIN {wt} USING (k) GROUP BY p.i""")
            parts = [(self._labels(data, light.column("i")), np.column_stack(
                [light.column(f"w{j}").to_numpy().astype(np.int64) for j in range(width)]
            ).reshape(-1, width))]  # fmt: skip
            heavy = self._reader(f"""
                SELECT p.u, p.i FROM {pairs} p JOIN (SELECT u FROM {pairs} GROUP BY u HAVING count(*) > {cap}) h
                USING (u) ORDER BY p.u""")
            for ds in _whole_users(heavy):
                labels = self._labels(data, ds.column("i"))
                sets = edges_from_pairs(ds.column("u").to_numpy(zero_copy_only=False), labels)
                parts.append(bounded_item_sums_of(sets, cap, keep, weights))
            return merge_item_sums(parts, width)
        finally:
            if pairs != all_pairs:
                self._sql(f"DROP VIEW IF EXISTS {pairs}")
            self._sql(f"DROP {'VIEW' if shared else 'TABLE'} IF EXISTS {all_pairs}")

    @staticmethod
    def _labels(data: DuckTable, col: pa.ChunkedArray) -> np.ndarray:
        values = col.to_numpy(zero_copy_only=False)
        if data.kind == "codes":
            return np.asarray(data.domain.labels, dtype=object)[values.astype(np.int64)]
        return values

    def sample_keyed(self, data: DuckTable, s: int, streams_: KeyedStreams) -> DuckTable:
        if isinstance(s, bool) or int(s) != s or s < 1:
            raise DataError(f"the per-user sample size must be at least 1, got {s}")
        return data.then(lambda ds, s=int(s): memory.sample_keyed(ds, s, streams_) if ds.n_users else ds)

    def randomize_keyed(
        self, data: DuckTable, randomizer: Any, streams_: KeyedStreams, m: int | None = None
    ) -> DuckTable:
        if data.kind != "codes":
            raise DataError("keyed item randomization needs items from a public finite domain; declare it")
        return data.then(lambda ds: memory.randomize_keyed(ds, randomizer, streams_, m))


@njit(cache=True)
def _sorted_table(bins, sizes, counts, n_bins):
    """The rows ``(bins, sizes, counts)`` (distinct ``(bin, size)`` pairs, in any order) as count_table's sorted
    keys ``bin * 2^31 + size`` and totals: a counting sort on the bin, then a sort of each bin's sizes (an
    insertion sort when they are few; a sort of all the keys took four times as long)."""
    n = bins.size
    start = np.zeros(n_bins + 1, np.int64)
    for r in range(n):
        start[bins[r] + 1] += 1
    for b in range(n_bins):
        start[b + 1] += start[b]
    fill = start[:-1].copy()
    sz = np.empty(n, np.int64)
    ct = np.empty(n, np.int64)
    for r in range(n):
        b = bins[r]
        j = fill[b]
        sz[j] = sizes[r]
        ct[j] = counts[r]
        fill[b] = j + 1
    keys = np.empty(n, np.int64)
    totals = np.empty(n, np.int64)
    k = 0
    for b in range(n_bins):
        lo, hi = start[b], start[b + 1]
        if hi - lo > 32:  # many sizes in one bin: a real sort (insertion sort would be quadratic)
            order = np.argsort(sz[lo:hi]) + lo
            sz[lo:hi], ct[lo:hi] = sz[order], ct[order]
        for i in range(lo + 1, hi):  # insertion sort by size (a bin holds few sizes; sorted above if many)
            s, c = sz[i], ct[i]
            j = i - 1
            while j >= lo and sz[j] > s:
                sz[j + 1] = sz[j]
                ct[j + 1] = ct[j]
                j -= 1
            sz[j + 1] = s
            ct[j + 1] = c
        for i in range(lo, hi):
            if i > lo and sz[i] == sz[i - 1]:  # (rows of equal pairs are added: the table is exact either way)
                totals[k - 1] += ct[i]
            else:
                keys[k] = (np.int64(b) << 31) | sz[i]
                totals[k] = ct[i]
                k += 1
    return keys[:k], totals[:k]


def _whole_users(reader: Iterable[pa.RecordBatch]) -> Iterator[pa.Table]:
    """Tables of whole users from a stream ordered by ``u``."""
    carry: pa.Table | None = None
    for batch in reader:
        t = pa.Table.from_batches([batch])
        if carry is not None and carry.num_rows:
            t = pa.concat_tables([carry, t])
        if t.num_rows == 0:
            continue
        u = t.column("u").to_numpy(zero_copy_only=False)
        other = np.flatnonzero(u != u[-1])
        cut = int(other[-1]) + 1 if other.size else 0
        carry = t.slice(cut)
        if cut:
            yield t.slice(0, cut)
    if carry is not None and carry.num_rows:
        yield carry

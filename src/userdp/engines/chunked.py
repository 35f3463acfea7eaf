"""The chunked engine: bounded memory over a table read as a stream of *whole users*, in any row order.

Since issue 33 the chunked engine is the DuckDB engine (:class:`~userdp.engines.duckdb.DuckDBEngine`) reading
every aggregate off DuckDB's ordered stream (``ORDER BY user``, an external sort that spills past the memory
limit): batches of ``rows_per_chunk`` rows, each cut after its last complete user, run through the in-memory
data plane (:mod:`userdp.engines.memory`) and only the exact aggregates are kept and merged
(:mod:`userdp.engines.streams`). The input need not be grouped or sorted by user: the hand-written chunk
reader, its carry and its user-contiguity refusal are gone (a refusal that depended on the row order).

Use it where a release must see whole users in small pieces: a stream source (a zero-argument callable
returning an iterator of Arrow batches or tables, read once into DuckDB's spillable storage), or a check of
the streamed path itself. For speed on files, prefer ``engine="duckdb"`` (aggregates in SQL where they can
be) or ``engine="auto"``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ..data import BoxDomain, FiniteDomain, UserDataset
from ..errors import DataError, ParameterError
from .base import Columns
from .duckdb import DuckDBEngine, DuckTable

__all__ = ["ROWS_PER_CHUNK", "ChunkedEngine", "iter_user_chunks"]

ROWS_PER_CHUNK = 1_000_000


def _rows(rows_per_chunk: Any) -> int:
    if isinstance(rows_per_chunk, bool) or int(rows_per_chunk) != rows_per_chunk or rows_per_chunk < 1:
        raise ParameterError("rows_per_chunk must be a positive integer")
    return int(rows_per_chunk)


class ChunkedEngine(DuckDBEngine):
    """Bounded memory: a path (Parquet, CSV, TSV, JSON lines; a folder or a glob), a table, or a stream (a
    zero-argument callable that returns an iterator of Arrow batches or tables, e.g. from a database cursor),
    read by DuckDB in any row order and handed to the releases in chunks of whole users.

    Parameters
    ----------
    rows_per_chunk:
        Rows per batch of DuckDB's ordered stream (a chunk holds the batch's complete users; a user larger than
        a batch is kept whole).
    memory_limit, threads, temp_directory:
        DuckDB's settings (see :class:`~userdp.engines.duckdb.DuckDBEngine`).
    """

    name = "chunked"

    def __init__(
        self,
        rows_per_chunk: int = ROWS_PER_CHUNK,
        memory_limit: str | None = None,
        threads: int | None = None,
        temp_directory: Any = None,
    ):
        super().__init__(memory_limit, threads, temp_directory, batch_rows=_rows(rows_per_chunk))
        self.rows_per_chunk = self.batch_rows

    def load(self, source: Any, columns: Columns, domain: FiniteDomain | BoxDomain | None = None) -> DuckTable:
        if isinstance(domain, FiniteDomain) and not domain.public:
            raise DataError("reading in chunks needs a public domain (a FiniteDomain you declare)")
        return super().load(source, columns, domain)

    def _streamed(self, data: DuckTable) -> bool:
        return True  # every aggregate on the ordered stream of whole users


def iter_user_chunks(
    source: Any,
    user: str,
    item: str | None = None,
    items: Sequence[str] | None = None,
    domain: FiniteDomain | BoxDomain | None = None,
    rows_per_chunk: int = ROWS_PER_CHUNK,
    tokenize: bool = False,
) -> Iterator[UserDataset]:
    """Chunks of whole users from a file, table or stream, in any row order (DuckDB sorts by ``user``).

    ``domain`` is the public item domain (a caller-declared :class:`FiniteDomain` for ``item``, a
    :class:`BoxDomain` for the coordinate columns ``items``). Without one, each chunk's labels are read off
    the chunk (``public=False``): only the distinct count's edges may use such chunks. A table with no rows
    yields no chunk. Each user is in exactly one chunk; chunks come in increasing order of user key.
    """
    eng = ChunkedEngine(_rows(rows_per_chunk))
    data = eng.load(source, Columns(user, item, tuple(items or ()), tokenize), domain)
    yield from eng.chunks(data)

"""Engines run userdp's data plane: the exact aggregates a mechanism needs (grid sums, histogram sums,
per-user means, user sizes, person-element edges) and the per-user keyed transformations (sampling,
randomization). The releases ask an engine for these and do all noise, selection and reconstruction
themselves, exactly once, on the driver.

The engines share one interface (:class:`Engine`) and give identical results, bit for bit: ``"memory"``
(:class:`MemoryEngine`), ``"duckdb"`` (:class:`~userdp.engines.duckdb.DuckDBEngine`: an embedded DuckDB
database, any row order, larger than memory, every core), ``"chunked"`` (:class:`ChunkedEngine`: the DuckDB
engine computing every aggregate on its ordered stream of whole users, in bounded memory) and ``"spark"``
(:class:`~userdp.engines.spark.SparkEngine`, imported only when asked for). ``"auto"`` (the default) picks
one by the input (:func:`get_engine`); the choice never changes a released value.
"""

from __future__ import annotations

from typing import Any

from .base import Columns, Engine, UserSizes, engine_progress
from .chunked import ChunkedEngine, iter_user_chunks
from .memory import MemoryEngine

__all__ = ["AUTO_FILE_BYTES", "ChunkedEngine", "Columns", "Engine", "MemoryEngine", "UserSizes", "engine_progress",
           "get_engine", "iter_user_chunks", "requested_engine"]  # fmt: skip

ENGINES = ("auto", "memory", "duckdb", "chunked", "spark")

AUTO_FILE_BYTES = 32 << 20
"""``engine="auto"`` reads input files of at least this many bytes in all with DuckDB, smaller ones in memory.
Measured on two cores, every release (heatmap, distinct count, vocabulary, key counts, PrivEMDItemWise) from
Parquet in random user order, DuckDB against memory: at 10^6 rows (3-18 MB) 0.77-1.39x (the heatmap 1.29x,
the item-wise release 1.39x: DuckDB's fixed costs), at 3*10^6 rows (14-60 MB) 0.60-1.03x, at 10^7 rows (50-209
MB) 0.3-0.5x for the heatmap and the item-wise release. Past this size DuckDB is as fast or faster, and its
memory is bounded."""


def _input_bytes(source: Any) -> int | None:
    """The bytes of the files a path, folder or glob (or a :class:`~userdp.data.FileSource` of one) names
    (``None`` for anything else, or a path with none)."""
    import glob as globs
    from pathlib import Path

    from ..data import FileSource

    file = FileSource.of(source)
    if file is None:
        return None
    text = str(file.path)
    try:
        if any(ch in text for ch in "*?["):
            files = [Path(f) for f in globs.glob(text, recursive=True)]
        else:
            p = Path(text)
            files = [q for q in p.rglob("*") if q.is_file()] if p.is_dir() else [p] if p.is_file() else []
        return sum(f.stat().st_size for f in files if f.is_file()) if files else None
    except OSError:
        return None


def requested_engine(engine: Engine | str | None) -> str:
    """The engine a caller asked for, as a release records it: ``"auto"`` for ``None`` or ``"auto"`` (not the
    engine ``auto`` chose: that choice reads the input's size, which a release must not reveal), else the
    name asked for or the instance's."""
    if engine is None or engine == "auto":
        return "auto"
    return engine if isinstance(engine, str) else str(getattr(engine, "name", type(engine).__name__))


def get_engine(engine: Engine | str | None = None, source: Any = None, *, memory_limit: str | None = None) -> Engine:
    """The engine for an ``engine=`` argument: ``"memory"``, ``"duckdb"`` (an embedded DuckDB
    database: any row order, larger than memory, every core), ``"chunked"``, ``"spark"`` (on the active Spark
    session, or a new ``local[2]`` one), or an :class:`Engine` instance (returned as it is).

    ``None`` or ``"auto"``: the Spark engine for a Spark DataFrame, DuckDB for input files of at least
    :data:`AUTO_FILE_BYTES` in all, the in-memory engine otherwise. ``memory_limit`` (``"4GB"``) is DuckDB's."""
    from ..errors import ParameterError

    if engine is None or engine == "auto":
        if type(source).__module__.startswith("pyspark"):
            engine = "spark"
        else:
            size = _input_bytes(source)
            engine = "duckdb" if (size is not None and size >= AUTO_FILE_BYTES) or memory_limit else "memory"
    if memory_limit is not None and engine not in ("duckdb", "chunked"):
        raise ParameterError(
            "a memory limit (--memory-limit) applies to the DuckDB engines (--engine duckdb, chunked or auto)"
        )
    if engine == "memory":
        return MemoryEngine()
    if isinstance(engine, Engine):
        return engine
    if engine == "chunked":
        return ChunkedEngine(memory_limit=memory_limit)
    if engine == "duckdb":
        from .duckdb import DuckDBEngine

        return DuckDBEngine(memory_limit=memory_limit)
    if engine == "spark":
        try:
            import pyspark  # noqa: F401
        except ImportError:
            raise ParameterError(
                'the Spark engine needs pyspark: pip install "userdp[spark]" (and a Java runtime)'
            ) from None
        from .spark import SparkEngine

        return SparkEngine()
    raise ParameterError(f"unknown engine {engine!r}; use one of {', '.join(ENGINES)} or an Engine instance")

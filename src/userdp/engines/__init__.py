"""Engines run userdp's data plane: the exact aggregates a mechanism needs (grid sums, histogram sums,
per-user means, user sizes, person-element edges) and the per-user keyed transformations (sampling,
randomization). The releases ask an engine for these and do all noise, selection and reconstruction
themselves, exactly once, on the driver.

Three engines share one interface (:class:`Engine`) and give identical results: ``"memory"``
(:class:`MemoryEngine`, the default), ``"chunked"`` (:class:`ChunkedEngine`, bounded memory over files of
whole users) and ``"spark"`` (:class:`~userdp.engines.spark.SparkEngine`, imported only when asked for).
"""

from __future__ import annotations

from .base import Columns, Engine, UserSizes
from .chunked import ChunkedEngine, iter_user_chunks
from .memory import MemoryEngine

__all__ = ["ChunkedEngine", "Columns", "Engine", "MemoryEngine", "UserSizes", "get_engine", "iter_user_chunks"]

ENGINES = ("memory", "chunked", "spark")


def get_engine(engine: Engine | str | None = None) -> Engine:
    """The engine for an ``engine=`` argument: ``None`` or ``"memory"``, ``"chunked"``, ``"spark"`` (on the active
    Spark session, or a new ``local[2]`` one), or an :class:`Engine` instance (returned as it is)."""
    from ..errors import ParameterError

    if engine is None or engine == "memory":
        return MemoryEngine()
    if isinstance(engine, Engine):
        return engine
    if engine == "chunked":
        return ChunkedEngine()
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

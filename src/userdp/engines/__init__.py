"""Engines run userdp's data plane: grouping records by user, deduplication, per-user sampling and
aggregation. Mechanisms ask an engine for these and do all noise, selection and reconstruction
themselves, exactly once, on the driver. :class:`LocalEngine` (NumPy) is the default; a Spark
engine plugs in behind the same :class:`Engine` interface.
"""

from __future__ import annotations

from .base import Engine
from .local import LocalEngine

__all__ = ["Engine", "LocalEngine", "get_engine"]

_DEFAULT = LocalEngine()


def get_engine(engine: Engine | str | None = None) -> Engine:
    """Resolve an ``engine=`` argument: ``None`` or ``"local"`` gives the NumPy engine, ``"spark"`` a
    :class:`~userdp.engines.spark.SparkEngine` on the active (or a new ``local[2]``) Spark session."""
    if engine is None or engine == "local":
        return _DEFAULT
    if isinstance(engine, Engine) or getattr(engine, "name", None) == "spark":
        return engine
    if engine == "spark":
        from .spark import SparkEngine

        return SparkEngine()
    raise ValueError(f"unknown engine {engine!r}; use 'local' or an Engine instance")

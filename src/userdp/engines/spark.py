"""The Spark engine: userdp's data plane on Apache Spark (pyspark).

The executors compute only exact, deterministic aggregates -- the ``(bin, size)`` count tables behind
``sum_i K~_i`` and the heatmap grid sum, one row per user for means, the deduplicated person-element edges
-- and run every per-user step through the same Python functions as the other engines (gridding with
:meth:`~userdp.metrics.GridL1.cells_of`, :func:`~userdp.engines.base.user_means`,
:func:`~userdp.data.tokenize`, the keyed streams). Everything random that happens per user (sampling with
replacement for BoundedEMDReduction, local-model item randomization) reads the user's keyed stream
(:class:`~userdp.noise.KeyedStreams`: AES-256-CTR under HMAC-SHA256 of a 256-bit master secret, drawn on the
driver from ``os.urandom``, and of the user key). A retried or speculative task therefore recomputes exactly
the same rows, while no user's stream can be predicted without the master (which travels to the executors
inside the pickled task closure, and nowhere else). Privacy noise, selection and reconstruction run on the
driver, once, in the releases.

Driver memory: aggregates are small (a histogram, a grid's count table, one row per user for means); the
distinct-count graph is collected as an edge list and is refused above ``max_edges`` (default 5e7 edges,
about 0.8 GB on the driver).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..data import BoxDomain, FiniteDomain, UserDataset, to_arrow, tokenize
from ..errors import DataError, UserDPError
from ..metrics.spaces import GridL1
from ..noise import KeyedStreams, keyed_randomize, keyed_sample_indices
from .base import Columns, Engine, UserSizes, check_grid, edges_from_pairs, sum_by_size, user_means

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["SparkEngine", "SparkTable"]

MAX_EDGES = 50_000_000


@dataclass(frozen=True)
class SparkTable:
    """The Spark engine's handle: a DataFrame holding the named columns (text already split into words), and
    the public domain."""

    df: DataFrame
    columns: Columns
    domain: FiniteDomain | BoxDomain | None


def _codes(domain: FiniteDomain | None, values) -> np.ndarray:
    """Item codes of ``values`` in the public domain (-1 for a value outside it); on the executors."""
    index = domain._index  # noqa: SLF001 - the domain's own label -> code map
    return np.fromiter(
        (index.get(v.item() if hasattr(v, "item") else v, -1) for v in values), dtype=np.int64, count=len(values)
    )


def _items(pdf, columns: Columns, domain) -> np.ndarray:
    """One user's (or one batch's) items as the in-memory engine holds them: codes or float points."""
    if columns.item is not None:
        return _codes(domain, pdf[columns.item].tolist())
    return pdf[list(columns.points)].to_numpy(dtype=np.float64)


class SparkEngine(Engine):
    """Runs userdp's data plane on Spark. ``load`` takes a Spark DataFrame, a path Spark reads (Parquet, CSV
    with a header row, JSON lines), or an in-memory table (Arrow, pandas, polars, ``UserDataset``)."""

    name = "spark"

    def __init__(self, spark: SparkSession | None = None, master: str = "local[2]", max_edges: int = MAX_EDGES):
        if spark is None:
            from pyspark.sql import SparkSession

            spark = (
                SparkSession.builder.master(master)
                .appName("userdp")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "8")
                .getOrCreate()
            )
        self.spark = spark
        self.max_edges = int(max_edges)

    # -- input ------------------------------------------------------------------------------
    def read(self, path: str | Path) -> DataFrame:
        """Read a Parquet, CSV (header row, inferred types) or JSON-lines path."""
        p = str(path).lower()
        if not Path(path).exists():
            raise DataError(f"no such file: {path}")
        if p.endswith((".csv", ".csv.gz", ".csv.bz2", ".tsv")):
            sep = "\t" if p.endswith(".tsv") else ","
            return self.spark.read.option("header", True).option("inferSchema", True).option("sep", sep).csv(str(path))
        if p.endswith((".json", ".jsonl", ".ndjson", ".jsonl.gz", ".json.gz")):
            return self.spark.read.json(str(path))
        return self.spark.read.parquet(str(path))

    def load(self, source: Any, columns: Columns, domain: FiniteDomain | BoxDomain | None = None) -> SparkTable:
        from pyspark.sql import DataFrame
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        if isinstance(source, (str, Path)):
            df = self.read(source)
        elif isinstance(source, DataFrame):
            df = source
        else:
            if isinstance(source, UserDataset):
                source = source.to_arrow(columns.user, columns.item or "item")
            df = self.spark.createDataFrame(to_arrow(source).to_pandas())
        missing = [c for c in columns.names if c not in df.columns]
        if missing:
            raise DataError(f"column(s) {missing} not found; the DataFrame has columns {df.columns}")
        df = df.select(*columns.names)
        cond = None
        for c in columns.names:
            e = F.col(c).isNull()
            cond = e if cond is None else (cond | e)
        if df.filter(cond).limit(1).count():
            raise DataError(f"columns {columns.names} have missing values")
        if columns.item is not None:
            itype = df.schema[columns.item].dataType
            if not isinstance(itype, (T.StringType, T.IntegralType)):
                raise DataError(
                    f"item column {columns.item!r} has type {itype.simpleString()}; ids must be strings or integers"
                )
            if columns.tokenize:
                df = self._tokenized(df, columns)
        else:
            for c in columns.points:
                if not isinstance(df.schema[c].dataType, T.NumericType):
                    raise DataError(
                        f"coordinate column {c!r} has type {df.schema[c].dataType.simpleString()}; it must be numeric"
                    )
        return SparkTable(df, columns, domain)

    @staticmethod
    def _tokenized(df: DataFrame, columns: Columns) -> DataFrame:
        """One row per (user, word), with :func:`userdp.data.tokenize` on the executors."""
        import pandas as pd
        from pyspark.sql.types import StringType, StructField, StructType

        user, item = columns.user, columns.item
        schema = StructType([StructField(user, df.schema[user].dataType), StructField(item, StringType())])

        def split(batches):
            for pdf in batches:
                u, w = [], []
                for key, text in zip(pdf[user].tolist(), pdf[item].tolist(), strict=True):
                    toks = tokenize(text)
                    u.extend([key] * len(toks))
                    w.extend(toks)
                yield pd.DataFrame({user: pd.Series(u, dtype=pdf[user].dtype), item: w})

        return df.mapInPandas(split, schema)

    # -- aggregates ---------------------------------------------------------------------------
    def user_sizes(self, data: SparkTable) -> UserSizes:
        from pyspark.sql import functions as F

        c = (
            data.df.groupBy(data.columns.user)
            .count()
            .agg(F.min("count").alias("lo"), F.max("count").alias("hi"), F.count(F.lit(1)).alias("n"))
            .collect()[0]
        )
        return UserSizes(int(c["lo"] or 0), int(c["hi"] or 0), int(c["n"]))

    def _size_table(self, df: DataFrame, user: str, length: int) -> np.ndarray:
        """``sum_by_size`` of the rows of ``df`` (``user``, ``_bin``, kept rows only), exact on the executors."""
        sizes = df.groupBy(user).count().withColumnRenamed("count", "_n")
        rows = df.join(sizes, on=user).groupBy("_bin", "_n").count().collect()
        b = np.array([r["_bin"] for r in rows], dtype=np.int64)
        n = np.array([r["_n"] for r in rows], dtype=np.int64)
        c = np.array([r["count"] for r in rows], dtype=np.int64)
        return sum_by_size(b, n, c, length)

    def grid_sum(self, data: SparkTable, box: BoxDomain, side: int, drop_outside: bool = False) -> np.ndarray:
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, StructField, StructType

        check_grid(box, side)
        cols = data.columns
        if len(cols.points) != 2:
            raise DataError("heatmaps need 2-D point items (e.g. lat, lon)")
        user, grid = cols.user, GridL1(int(side))
        schema = StructType([StructField(user, data.df.schema[user].dataType), StructField("_bin", LongType())])

        def cells(batches):
            for pdf in batches:
                pts = pdf[list(cols.points)].to_numpy(dtype=np.float64)
                inside = box.contains(pts)
                out = np.full(len(pdf), -1, dtype=np.int64)
                out[inside] = grid.cells_of(pts[inside], box)
                yield pdf[[user]].assign(_bin=out)

        binned = data.df.mapInPandas(cells, schema)
        if drop_outside:
            binned = binned.filter(F.col("_bin") >= 0)
        elif binned.filter(F.col("_bin") < 0).limit(1).count():
            raise DataError("some points lie outside the declared box; pass a larger public box or drop_outside=True")
        return self._size_table(binned, user, side * side).reshape(side, side)

    def _coded(self, data: SparkTable) -> DataFrame:
        """``user, _bin`` with ``_bin`` the item's code in the public domain (refused if an item is outside it)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, StructField, StructType

        dom, cols = data.domain, data.columns
        if not isinstance(dom, FiniteDomain) or not dom.public or cols.item is None:
            raise DataError("this release needs ids in a public finite domain; declare the domain")
        user, item = cols.user, cols.item
        schema = StructType([StructField(user, data.df.schema[user].dataType), StructField("_bin", LongType())])

        def code(batches):
            for pdf in batches:
                yield pdf[[user]].assign(_bin=_codes(dom, pdf[item].tolist()))

        coded = data.df.mapInPandas(code, schema)
        if coded.filter(F.col("_bin") < 0).limit(1).count():
            raise DataError("some item values are not in the declared domain")
        return coded

    def histogram_sum(self, data: SparkTable, normalize: bool = True) -> np.ndarray:
        coded = self._coded(data)
        k = len(data.domain)
        if normalize:
            return self._size_table(coded, data.columns.user, k)
        rows = coded.groupBy("_bin").count().collect()
        out = np.zeros(k)
        for r in rows:
            out[r["_bin"]] = r["count"]
        return out

    def per_user_mean(self, data: SparkTable, query: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        import pandas as pd
        from pyspark.sql.types import ArrayType, DoubleType, StringType, StructField, StructType

        cols, dom = data.columns, data.domain
        user = cols.user
        schema = StructType(
            [
                StructField(user, data.df.schema[user].dataType),
                StructField("_m", ArrayType(DoubleType())),
                StructField("_err", StringType()),
            ]
        )

        def mean(pdf: pd.DataFrame) -> pd.DataFrame:
            try:  # a refusal of the query (e.g. a point outside the public domain) travels back as its message
                v = np.asarray(query(_items(pdf, cols, dom)), dtype=np.float64)
                m, err = user_means(np.array([0, len(pdf)]), v)[0].tolist(), None
            except UserDPError as exc:
                m, err = [], str(exc)
            return pd.DataFrame({user: [pdf[user].iloc[0]], "_m": [m], "_err": [err]})

        rows = data.df.groupBy(user).applyInPandas(mean, schema).collect()
        errors = sorted({r["_err"] for r in rows if r["_err"] is not None})
        if errors:
            raise DataError(errors[0])
        if not rows:
            raise DataError("this release needs at least one user (the number of users is public for it)")
        keys = np.asarray([r[user] for r in rows])
        means = np.array([r["_m"] for r in rows], dtype=np.float64)
        if not np.all(np.isfinite(means)):
            raise DataError("the query's values contain NaN or inf")
        return means[np.argsort(keys, kind="stable")]

    def edges(self, data: SparkTable) -> UserDataset:
        cols = data.columns
        if cols.item is None:
            raise DataError("distinct counting needs items that are ids (a finite domain)")
        d = data.df.select(cols.user, cols.item).distinct()
        if d.limit(self.max_edges + 1).count() > self.max_edges:
            raise DataError(
                f"the person-element edges exceed the driver limit {self.max_edges}; split the graph into connected "
                "components on Spark and count each component (DC(D; l) adds up over components)"
            )
        pdf = d.toPandas()
        return edges_from_pairs(pdf[cols.user].to_numpy(), pdf[cols.item].to_numpy())

    # -- per-user randomness (deterministic in the master secret and the user key) --------------
    @staticmethod
    def _check_keyable(df: DataFrame, user: str) -> None:
        """Refuse, on the driver, a user column whose values have no canonical key encoding."""
        from pyspark.sql import types as T

        keyable = (T.IntegralType, T.StringType, T.BinaryType, T.FractionalType, T.BooleanType)
        dtype = df.schema[user].dataType
        if not isinstance(dtype, keyable) or isinstance(dtype, T.DecimalType):
            raise DataError(
                f"keyed per-user randomness needs an integer, string, binary or floating-point user column, "
                f"not {dtype.simpleString()}; cast the user column first"
            )

    def sample_keyed(self, data: SparkTable, s: int, streams: KeyedStreams) -> SparkTable:
        import pandas as pd

        if isinstance(s, bool) or int(s) != s or s < 1:
            raise DataError(f"the per-user sample size must be at least 1, got {s}")
        self._check_keyable(data.df, data.columns.user)
        if data.columns.item is not None:
            self._coded(data)  # the canonical order is the codes' order: every item must have one
        cols, dom, s = data.columns, data.domain, int(s)

        def per_user(pdf: pd.DataFrame) -> pd.DataFrame:
            items = _items(pdf, cols, dom)
            order = np.lexsort(items.T[::-1]) if items.ndim == 2 else np.argsort(items, kind="stable")
            pick = order[keyed_sample_indices(streams, pdf[cols.user].iloc[0], len(pdf), s)]
            return pdf.iloc[pick].reset_index(drop=True)

        df = data.df.groupBy(cols.user).applyInPandas(per_user, data.df.schema)
        return SparkTable(df, cols, dom)

    def randomize_keyed(self, data: SparkTable, randomizer: Any, streams: KeyedStreams) -> SparkTable:
        import pandas as pd
        from pyspark.sql.types import StructField, StructType

        cols, dom = data.columns, data.domain
        self._check_keyable(data.df, cols.user)
        self._coded(data)
        labels = [v.item() if hasattr(v, "item") else v for v in dom.labels]
        user, item = cols.user, cols.item
        schema = StructType(
            [StructField(user, data.df.schema[user].dataType), StructField(item, data.df.schema[item].dataType)]
        )

        def per_user(pdf: pd.DataFrame) -> pd.DataFrame:
            key = pdf[user].iloc[0]
            out = keyed_randomize(streams, key, _items(pdf, cols, dom), randomizer)
            return pd.DataFrame({user: [key] * len(out), item: [labels[j] for j in out]})

        df = data.df.groupBy(user).applyInPandas(per_user, schema)
        return SparkTable(df, cols, dom)

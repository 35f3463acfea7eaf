"""The Spark engine: userdp's data plane on Apache Spark (pyspark).

Input is a Spark DataFrame (or a Parquet/CSV path Spark reads) with a user column and item column(s).
Executors compute only **deterministic** aggregates -- per-user counts, weighted histograms
``sum_i K~_i``, grid sums of per-user distributions, per-user means of a query, the deduplicated
person-element edges -- and everything random that must happen per user (sampling with replacement for
BoundedEMDReduction, local-model item randomization) is a deterministic function of a seed drawn on the
driver from the CSPRNG and of the user key. A retried or speculative task therefore recomputes exactly
the same rows, and no privacy noise is ever drawn on an executor: noise, selection and reconstruction
run on the driver, once, through the same mechanism functions as the local engine.

Driver memory: aggregates are small (a histogram, a grid, one row per user for local-model releases);
the distinct-count graph is collected as an edge list and is refused above ``max_edges`` (default
5e7 edges, about 0.8 GB on the driver). Beyond that, split the graph into connected components on Spark
(each component's ``DC(D; l)`` adds up) and run the flow per component.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DataError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["SparkEngine", "user_seed"]

MAX_EDGES = 50_000_000


def user_seed(seed: int, user: Any) -> int:
    """A 64-bit seed for one user, derived from the driver's seed and the user key (SHA-256)."""
    if hasattr(user, "item"):  # NumPy scalars hash like the Python values Spark hands out
        user = user.item()
    h = hashlib.sha256(f"{int(seed)}|{type(user).__name__}|{user}".encode()).digest()
    return int.from_bytes(h[:8], "little")


class SparkEngine:
    """Runs userdp's data plane on Spark. Methods take a DataFrame and column names and return NumPy
    arrays on the driver (or a DataFrame, for per-user sampling and randomization)."""

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
    def read(self, path: str, fmt: str | None = None) -> DataFrame:
        """Read a Parquet or CSV path (CSV with a header row and inferred types)."""
        fmt = fmt or ("csv" if str(path).lower().endswith((".csv", ".csv.gz")) else "parquet")
        if fmt == "csv":
            return self.spark.read.option("header", True).option("inferSchema", True).csv(str(path))
        return self.spark.read.parquet(str(path))

    @staticmethod
    def _check(df: DataFrame, cols: list[str]) -> None:
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise DataError(f"column(s) {missing} not found; the DataFrame has columns {df.columns}")
        from pyspark.sql import functions as F

        cond = None
        for c in cols:
            e = F.col(c).isNull()
            cond = e if cond is None else (cond | e)
        if df.filter(cond).limit(1).count():
            raise DataError(f"columns {cols} have missing values")

    def _with_weight(self, df: DataFrame, user: str) -> DataFrame:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        return df.withColumn("_w", 1.0 / F.count(F.lit(1)).over(Window.partitionBy(user)))

    # -- aggregates ---------------------------------------------------------------------------
    def histogram_sum(
        self, df: DataFrame, user: str, item: str, labels: np.ndarray, normalize: bool = True
    ) -> np.ndarray:
        """``sum_i K~_i`` (or counts) over a public list of item labels; unknown items are an error."""
        from pyspark.sql import functions as F

        self._check(df, [user, item])
        index = {str(v): i for i, v in enumerate(labels)}
        d = self._with_weight(df, user) if normalize else df.withColumn("_w", F.lit(1.0))
        rows = d.groupBy(F.col(item).cast("string").alias("_it")).agg(F.sum("_w").alias("_s")).collect()
        out = np.zeros(len(labels))
        for r in rows:
            j = index.get(r["_it"])
            if j is None:
                raise DataError("some items are not in the declared domain")
            out[j] = r["_s"]
        return out

    def grid_sum(
        self, df: DataFrame, user: str, lat: str, lon: str, box, side: int, drop_outside: bool = False
    ) -> np.ndarray:
        """``s = sum_i p_i`` on the ``side x side`` grid of a public box (heatmaps), computed on the executors."""
        from pyspark.sql import functions as F

        self._check(df, [user, lat, lon])
        (la0, lo0), (la1, lo1) = box.low, box.high
        inside = (F.col(lat) >= la0) & (F.col(lat) <= la1) & (F.col(lon) >= lo0) & (F.col(lon) <= lo1)
        if drop_outside:
            df = df.filter(inside)
        elif df.filter(~inside).limit(1).count():
            raise DataError("some points lie outside the declared box; pass a larger public box or drop_outside=True")
        r = F.least(F.floor((F.col(lat) - la0) / (la1 - la0) * side), F.lit(side - 1)).cast("long")
        c = F.least(F.floor((F.col(lon) - lo0) / (lo1 - lo0) * side), F.lit(side - 1)).cast("long")
        d = self._with_weight(df, user).withColumn("_cell", r * side + c)
        rows = d.groupBy("_cell").agg(F.sum("_w").alias("_s")).collect()
        out = np.zeros(side * side)
        for row in rows:
            out[row["_cell"]] = row["_s"]
        return out.reshape(side, side)

    def user_sizes(self, df: DataFrame, user: str) -> tuple[int, int, int]:
        """``(smallest, largest, number of users)`` of the per-user record counts, computed on the executors."""
        from pyspark.sql import functions as F

        self._check(df, [user])
        c = (
            df.groupBy(user)
            .count()
            .agg(F.min("count").alias("lo"), F.max("count").alias("hi"), F.count(F.lit(1)).alias("n"))
            .collect()[0]
        )
        if c["n"] == 0:
            raise DataError("the input is empty: no rows")
        return int(c["lo"]), int(c["hi"]), int(c["n"])

    def require_equal_sizes(self, df: DataFrame, user: str, sizes: tuple[int, int, int] | None = None) -> int:
        """The common number of records ``m`` per user (bounded releases), as
        :meth:`userdp.data.UserDataset.require_equal_sizes` does locally (``sizes``: a :meth:`user_sizes`
        result already computed, to save a Spark job)."""
        lo, hi, _ = sizes if sizes is not None else self.user_sizes(df, user)
        if lo != hi:
            raise DataError(
                "this bounded release needs every user to hold the same public number of items m; apply "
                "BoundedEMDReduction (sampling with replacement, --samples S) first"
            )
        return lo

    def per_user_mean(self, df: DataFrame, user: str, values: list[str], collect: bool = True):
        """Per-user means of value columns (one row per user, sorted by user key), or their sum over users
        with ``collect=False`` (``(sum, number of users)``: for the bounded central model, where ``n`` is public)."""
        from pyspark.sql import functions as F

        self._check(df, [user, *values])
        per = df.groupBy(user).agg(*[F.avg(v).alias(v) for v in values])
        if collect:
            rows = per.orderBy(user).collect()
            return np.array([[r[v] for v in values] for r in rows], dtype=np.float64)
        tot = per.agg(*[F.sum(v).alias(v) for v in values], F.count(F.lit(1)).alias("_n")).collect()[0]
        return np.array([tot[v] for v in values], dtype=np.float64), int(tot["_n"])

    def edges(self, df: DataFrame, user: str, item: str):
        """The deduplicated person-element edges, collected to the driver as a :class:`PersonElementGraph`.
        Refused above ``max_edges``."""
        from ..distinct.counting import PersonElementGraph

        self._check(df, [user, item])
        d = df.select(user, item).distinct()
        n = d.count()
        if n > self.max_edges:
            raise DataError(
                f"{n} person-element edges exceed the driver limit {self.max_edges}; split the graph into connected "
                "components on Spark and count each component (DC(D; l) adds up over components)"
            )
        pdf = d.toPandas()
        users = pdf[user].to_numpy()
        items = pdf[item].astype(str).to_numpy()
        labels = np.unique(items)
        codes = np.searchsorted(labels, items)
        ukeys, uinv = np.unique(users, return_inverse=True)
        order = np.lexsort((codes, uinv))
        counts = np.bincount(uinv, minlength=ukeys.size)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return PersonElementGraph(offsets, np.ascontiguousarray(codes[order].astype(np.int64)), labels.size)

    # -- per-user randomness (deterministic in the driver seed and the user key) ----------------
    def sample_with_replacement(self, df: DataFrame, user: str, cols: list[str], s: int, seed: int) -> DataFrame:
        """BoundedEMDReduction's projection: ``s`` rows per user, drawn with replacement by a generator seeded
        with :func:`user_seed` (driver seed, user key). Output rows are sorted within each user."""
        import pandas as pd

        self._check(df, [user, *cols])
        schema = df.select(user, *cols).schema

        def per_user(pdf: pd.DataFrame) -> pd.DataFrame:
            from userdp.engines.spark import keyed_choice

            key = pdf[user].iloc[0]
            pdf = pdf.sort_values(cols, kind="stable").reset_index(drop=True)
            return pdf.iloc[keyed_choice(seed, key, len(pdf), s)].reset_index(drop=True)

        return df.select(user, *cols).groupBy(user).applyInPandas(per_user, schema)

    def randomize_items(
        self, df: DataFrame, user: str, item: str, randomizer, labels: np.ndarray, seed: int
    ) -> DataFrame:
        """Local-model item randomization on the executors (PrivEMDItemWise's ``A``), each user's items with a
        generator seeded by (driver seed, user key); returns ``user, item`` rows of the released multisets."""
        import pandas as pd
        from pyspark.sql.types import StringType, StructField, StructType

        self._check(df, [user, item])
        index = {str(v): i for i, v in enumerate(labels)}
        lab = [str(v) for v in labels]
        utype = df.schema[user].dataType
        schema = StructType([StructField(user, utype), StructField(item, StringType())])

        def per_user(pdf: pd.DataFrame) -> pd.DataFrame:
            from userdp.noise import RandomSource

            key = pdf[user].iloc[0]
            codes = np.array(sorted(index[str(x)] for x in pdf[item]), dtype=np.int64)
            out = np.sort(randomizer.randomize(codes, RandomSource(user_seed(seed, key))))
            return pd.DataFrame({user: [key] * len(out), item: [lab[j] for j in out]})

        return df.select(user, item).groupBy(user).applyInPandas(per_user, schema)


def keyed_choice(seed: int, key: Any, size: int, s: int) -> np.ndarray:
    """``s`` indices drawn uniformly with replacement from ``range(size)`` with the generator of
    :func:`user_seed` -- the same function the local engine's keyed sampling uses."""
    from ..noise import RandomSource

    return RandomSource(user_seed(seed, key)).integers(size, size=s)

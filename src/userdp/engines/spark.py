"""The Spark engine: userdp's data plane on Apache Spark (pyspark).

Input is a Spark DataFrame (or a Parquet/CSV path Spark reads) with a user column and item column(s).
Executors compute only **deterministic** aggregates -- per-user counts, weighted histograms
``sum_i K~_i``, grid sums of per-user distributions, per-user means of a query, the deduplicated
person-element edges -- and everything random that must happen per user (sampling with replacement for
BoundedEMDReduction, local-model item randomization) reads the user's keyed stream
(:class:`~userdp.noise.KeyedStreams`): AES-256-CTR under HMAC-SHA256 of a 256-bit master secret, drawn on
the driver from ``os.urandom``, and of the user key. A retried or speculative task therefore recomputes
exactly the same rows, while no user's stream can be predicted without the master (which travels to the
executors inside the pickled task closure, and nowhere else). No other privacy noise is ever drawn on an
executor: noise, selection and reconstruction run on the driver, once, through the same mechanism
functions as the local engine.

Driver memory: aggregates are small (a histogram, a grid, one row per user for local-model releases);
the distinct-count graph is collected as an edge list and is refused above ``max_edges`` (default
5e7 edges, about 0.8 GB on the driver). Beyond that, split the graph into connected components on Spark
(each component's ``DC(D; l)`` adds up) and run the flow per component.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import DataError
from ..noise import KeyedStreams

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from ..noise import RngLike

__all__ = ["SparkEngine"]

MAX_EDGES = 50_000_000


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

    def sample_with_replacement(
        self, df: DataFrame, user: str, cols: list[str], s: int, rng: KeyedStreams | RngLike = None
    ) -> DataFrame:
        """BoundedEMDReduction's projection: ``s`` rows per user, drawn with replacement from the user's rows
        sorted by ``cols``, with the user's keyed stream (:func:`userdp.engines.local.keyed_sample_indices`,
        the function :meth:`LocalEngine.sample_keyed <userdp.engines.local.LocalEngine.sample_keyed>` uses).

        Parameters
        ----------
        rng:
            A :class:`~userdp.noise.KeyedStreams` (share it with the local engine to get the same rows),
            ``None`` for a fresh 256-bit master from ``os.urandom``, or a seed or seeded source (reproducible,
            no privacy). The master is pickled into the task closure sent to the executors.
        """
        import pandas as pd

        self._check(df, [user, *cols])
        self._check_keyable(df, user)
        if int(s) < 1:
            raise DataError(f"the per-user sample size must be at least 1, got {s}")
        streams = KeyedStreams.from_rng(rng)
        schema = df.select(user, *cols).schema

        def per_user(pdf: pd.DataFrame) -> pd.DataFrame:
            from userdp.engines.local import keyed_sample_indices

            key = pdf[user].iloc[0]
            pdf = pdf.sort_values(cols, kind="stable").reset_index(drop=True)
            return pdf.iloc[keyed_sample_indices(streams, key, len(pdf), s)].reset_index(drop=True)

        return df.select(user, *cols).groupBy(user).applyInPandas(per_user, schema)

    def randomize_items(
        self,
        df: DataFrame,
        user: str,
        item: str,
        randomizer,
        labels: np.ndarray,
        rng: KeyedStreams | RngLike = None,
    ) -> DataFrame:
        """Local-model item randomization on the executors (PrivEMDItemWise's ``A``): each user's item codes
        (positions in ``labels``) with the user's keyed stream (:func:`userdp.engines.local.keyed_randomize`,
        the function :meth:`LocalEngine.randomize_keyed <userdp.engines.local.LocalEngine.randomize_keyed>`
        uses); returns ``user, item`` rows of the released multisets. ``rng`` as in
        :meth:`sample_with_replacement`."""
        import pandas as pd
        from pyspark.sql.types import StringType, StructField, StructType

        self._check(df, [user, item])
        self._check_keyable(df, user)
        streams = KeyedStreams.from_rng(rng)
        index = {str(v): i for i, v in enumerate(labels)}
        lab = [str(v) for v in labels]
        utype = df.schema[user].dataType
        schema = StructType([StructField(user, utype), StructField(item, StringType())])

        def per_user(pdf: pd.DataFrame) -> pd.DataFrame:
            from userdp.engines.local import keyed_randomize

            key = pdf[user].iloc[0]
            codes = np.array([index[str(x)] for x in pdf[item]], dtype=np.int64)
            out = keyed_randomize(streams, key, codes, randomizer)
            return pd.DataFrame({user: [key] * len(out), item: [lab[j] for j in out]})

        return df.select(user, item).groupBy(user).applyInPandas(per_user, schema)

"""The Spark engine: userdp's data plane on Apache Spark (pyspark).

The executors compute only exact, deterministic aggregates -- the ``(bin, size)`` count tables behind
``sum_i K~_i`` and the heatmap grid sum, one row per user for means, the deduplicated person-element edges
-- and run every per-user step through the same Python functions as the other engines (gridding with
:meth:`~userdp.metrics.GridL1.cells_of`, :func:`~userdp.engines.base.user_means`,
:func:`~userdp.data.tokenize`, the keyed streams). Everything random that happens per user (sampling with
replacement for BoundedEMDReduction, local-model item randomization) reads the user's keyed stream
(:class:`~userdp.noise.KeyedStreams`: AES-256-CTR under a key derived from a 256-bit master secret, drawn on
the driver from ``os.urandom``, from a counter block keyed by the user). A retried or speculative task
therefore recomputes exactly the same rows, while no user's stream can be predicted without the master
(which travels to the executors inside the pickled task closure, and nowhere else). Privacy noise, selection
and reconstruction run on the driver, once, in the releases.

Driver memory: aggregates are small (a histogram, a grid's count table, one row per user for means, one row per
item or key). Nothing is refused for its size: a limit on a data-dependent size would make the refusal itself
depend on the data (a dataset just below it releases, the same plus one person does not). The distinct count
runs on the executors by default (:meth:`SparkEngine.bucket_sums`); the exact count asked for explicitly
(``method="matching"``) and the policy vocabulary collect the deduplicated edges on the driver, whatever their
number (the driver's memory is then the limit, as for any collect).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..data import BoxDomain, FileLayout, FileSource, FiniteDomain, UserDataset, file_layout, read_table, to_arrow
from ..errors import DataError, UserDPError
from ..noise import KeyedStreams
from ..text import tokenize_column
from .base import (
    Columns,
    Engine,
    KeyValues,
    UserSizes,
    bounded_item_sums_of,
    check_grid,
    count_table,
    decode_keys,
    edges_from_pairs,
    key_records_from_triples,
    progress_default,
    sum_by_size,
)
from .memory import _OUTSIDE, histogram_rows, load_table, per_user_mean, randomize_keyed, sample_keyed

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["SparkEngine", "SparkTable"]


@dataclass(frozen=True)
class SparkTable:
    """The Spark engine's handle: a DataFrame holding the named columns (text already split into words), and
    the public domain."""

    df: DataFrame
    columns: Columns
    domain: FiniteDomain | BoxDomain | None


def _as_rows(cols: Columns, domain: FiniteDomain | BoxDomain | None, ds: UserDataset):
    """A dataset of whole users back as rows of the engine's columns (labels of the public domain, or points);
    on the executors."""
    import pandas as pd

    users = np.repeat(ds.user_ids, ds.counts())
    if cols.points:
        return pd.DataFrame({cols.user: users, **{c: ds.items[:, j] for j, c in enumerate(cols.points)}})
    labels = np.asarray([v.item() if hasattr(v, "item") else v for v in domain.labels], dtype=object)
    return pd.DataFrame({cols.user: users, cols.item: labels[ds.items]})


class SparkEngine(Engine):
    """Runs userdp's data plane on Spark. ``load`` takes a Spark DataFrame, a path Spark reads (Parquet, CSV
    with a header row, JSON lines), or an in-memory table (Arrow, pandas, polars, ``UserDataset``)."""

    name = "spark"

    def __init__(self, spark: SparkSession | None = None, master: str = "local[2]", progress: bool | None = None):
        """``spark``: the session to run on (a new ``local[2]`` one when ``None``). ``progress``: whether the
        session this engine creates shows Spark's stage bars and warnings on standard error (off by default,
        or as :func:`~userdp.engines.base.engine_progress` says); a session passed in is left as it is."""
        if spark is None:
            from pyspark.sql import SparkSession

            show = progress_default(progress)
            spark = (
                SparkSession.builder.master(master)
                .appName("userdp")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "true" if show else "false")
                .config("spark.sql.shuffle.partitions", "8")
                .getOrCreate()
            )
            if not show:
                spark.sparkContext.setLogLevel("ERROR")
        self.spark = spark

    # -- input ------------------------------------------------------------------------------
    def read(self, path: str | Path | FileSource, infer: bool = True) -> DataFrame:
        """Read a Parquet, delimited text (types inferred unless ``infer`` is false: then every column is text)
        or JSON-lines path, a folder of them or a :class:`~userdp.data.FileSource` (a headerless file, another
        delimiter), laid out as every engine reads it (:func:`~userdp.data.file_layout`)."""
        return self._read(FileSource.of(path), infer)[0]

    def _read(self, src: FileSource, infer: bool, text: tuple[str, ...] = ()) -> tuple[DataFrame, FileLayout]:
        p = Path(src.path)
        if not p.exists():
            raise DataError(f"no such file: {src.path}")
        probe = p
        if p.is_dir():
            files = sorted(q for q in p.rglob("*") if q.is_file() and not q.name.startswith(("_", ".")))
            if not files:
                raise DataError(f"{p.name} is an empty folder")
            probe = next((f for f in files if f.stat().st_size), files[0])
        layout = file_layout(src, probe=probe)
        if probe.suffix.lower() == ".xz":  # a compression Spark cannot read: through Arrow, on the driver
            table = read_table(replace(src, path=probe), text=() if infer else text)
            return self.spark.createDataFrame(table.to_pandas()), layout
        if layout.kind == "csv":
            reader = (
                self.spark.read.option("header", layout.header)
                .option("inferSchema", bool(infer))
                .option("sep", layout.delimiter)
            )
            df = reader.csv(str(src.path))
            return (df if layout.names is None else df.toDF(*layout.names)), layout
        if layout.kind == "json":
            return self.spark.read.json(str(src.path)), layout
        return self.spark.read.parquet(str(src.path)), layout

    def load(self, source: Any, columns: Columns, domain: FiniteDomain | BoxDomain | None = None) -> SparkTable:
        from pyspark.sql import DataFrame
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        layout = None
        if FileSource.of(source) is not None:  # a CSV's columns are text, never typed by what other rows hold
            df, layout = self._read(FileSource.of(source), infer=False, text=columns.names)
        elif isinstance(source, DataFrame):
            df = source
        else:
            if isinstance(source, UserDataset):
                source = source.to_arrow(columns.user, columns.item or "item")
            df = self.spark.createDataFrame(to_arrow(source).to_pandas())
        if layout is not None:
            layout.check_columns(columns.names, df.columns)
        missing = [c for c in columns.names if c not in df.columns]
        if missing:
            raise DataError(f"column(s) {missing} not found; the DataFrame has columns {df.columns}")
        df = df.select(*columns.names)
        if any(isinstance(df.schema[c].dataType, T.StringType) for c in columns.points):
            df = self._numeric_points(df, columns)  # read as text: a coordinate that is no number is refused
        cond = None
        for c in columns.names:
            e = F.col(c).isNull()
            cond = e if cond is None else (cond | e)
        flags = [F.max(cond.cast("int")).alias("_missing")]
        if columns.points:  # NaN and inf refused as every engine refuses them (one job for both checks)
            bad = None
            for c in columns.points:
                e = F.isnan(F.col(c)) | (F.abs(F.col(c)) == F.lit(float("inf")))
                bad = e if bad is None else (bad | e)
            flags.append(F.max(bad.cast("int")).alias("_nonfinite"))
        found = df.select(*flags).collect()[0]
        if found["_missing"]:
            raise DataError(f"columns {columns.names} have missing values")
        if columns.points and found["_nonfinite"]:
            raise DataError("point coordinates contain NaN or inf")
        if isinstance(df.schema[columns.user].dataType, T.FractionalType):
            raise DataError("person ids must be strings or integers, not floating-point numbers")
        if columns.item is not None:
            itype = df.schema[columns.item].dataType
            if not isinstance(itype, (T.StringType, T.IntegralType)):
                raise DataError(
                    f"item column {columns.item!r} has type {itype.simpleString()}; ids must be strings or integers"
                )
            if columns.tokenize:
                df = self._tokenized(df, columns)
            if isinstance(domain, FiniteDomain):  # items outside the declared domain are dropped here, so that
                # every aggregate (user sizes too) sees the table the in-memory engine sees (OUTSIDE_DOMAIN)
                labels = self.spark.createDataFrame([(str(x),) for x in domain.labels], "_label string")
                df = df.join(F.broadcast(labels), F.col(columns.item).cast("string") == F.col("_label"), "left_semi")
        else:
            for c in columns.points:
                if not isinstance(df.schema[c].dataType, T.NumericType):
                    raise DataError(
                        f"coordinate column {c!r} has type {df.schema[c].dataType.simpleString()}; it must be numeric"
                    )
        return SparkTable(df, columns, domain)

    @staticmethod
    def _numeric_points(df: DataFrame, columns: Columns) -> DataFrame:
        """The coordinate columns given as text cast to doubles; a value that is no number is refused."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        for c in columns.points:
            if isinstance(df.schema[c].dataType, T.StringType):
                bad = df.filter(F.col(c).isNotNull() & F.col(c).cast("double").isNull()).limit(1).count()
                if bad:
                    raise DataError(f"coordinate column {c!r} holds values that are not numbers; it must be numeric")
                df = df.withColumn(c, F.col(c).cast("double"))
        return df

    @staticmethod
    def _tokenized(df: DataFrame, columns: Columns) -> DataFrame:
        """One row per (user, word), with :func:`userdp.text.tokenize_column` (the words of
        :func:`userdp.data.tokenize`) on the executors."""
        import pandas as pd
        import pyarrow as pa
        from pyspark.sql.types import StringType, StructField, StructType

        user, item = columns.user, columns.item
        schema = StructType([StructField(user, df.schema[user].dataType), StructField(item, StringType())])

        def split(batches):
            for pdf in batches:
                texts = pa.array(pdf[item], type=pa.large_string(), from_pandas=True)  # (nulls refused above)
                counts, words = tokenize_column(texts)  # tokenize() on every row, compiled
                keys = np.repeat(pdf[user].to_numpy(), counts)
                yield pd.DataFrame({user: pd.Series(keys, dtype=pdf[user].dtype), item: words.to_pandas()})

        return df.mapInPandas(split, schema)

    # -- whole users on the executors ---------------------------------------------------------
    @staticmethod
    def _whole_users(df: DataFrame, user: str, apply: Callable[[pd.DataFrame], pd.DataFrame], schema) -> DataFrame:
        """``apply`` on the executors, over pandas frames of whole users: the table is partitioned by user and
        sorted within partitions, so each partition's rows arrive in runs of whole users; a user's rows cut by a
        batch boundary are carried to the next batch."""
        import pandas as pd

        def run(batches):
            carry = None
            for pdf in batches:
                if carry is not None and len(carry):
                    pdf = pd.concat([carry, pdf], ignore_index=True)
                if not len(pdf):
                    continue
                u = pdf[user].to_numpy()
                other = np.flatnonzero(u != u[-1])
                cut = int(other[-1]) + 1 if other.size else 0
                carry = pdf.iloc[cut:]
                if cut:
                    yield apply(pdf.iloc[:cut])
            if carry is not None and len(carry):
                yield apply(carry)

        return df.repartition(user).sortWithinPartitions(user).mapInPandas(run, schema)

    def _by_users(self, data: SparkTable, fn: Callable[[UserDataset], pd.DataFrame], schema) -> DataFrame:
        """``fn`` on the executors, over datasets of whole users (the in-memory data plane's functions run
        there; :meth:`_whole_users`). A refusal (``UserDPError``) becomes a row whose ``_err`` column holds its
        message."""
        import pandas as pd
        import pyarrow as pa

        cols, dom = data.columns, data.domain
        memory_cols = Columns(cols.user, cols.item, cols.points)  # text is already split into words
        reports_errors = "_err" in schema.fieldNames()

        def _apply(pdf):
            try:
                return fn(load_table(pa.Table.from_pandas(pdf, preserve_index=False), memory_cols, dom))
            except UserDPError as exc:
                if not reports_errors:  # checked on the driver beforehand: a failure here fails the job
                    raise
                return pd.DataFrame({"_err": [str(exc)]}).reindex(columns=schema.fieldNames())

        return self._whole_users(data.df, cols.user, _apply, schema)

    @staticmethod
    def _raise_errors(rows: list) -> list:
        errors = sorted({r["_err"] for r in rows if r["_err"] is not None})
        if errors:
            raise DataError(errors[0])
        return rows

    def _table(self, data: SparkTable, rows_of: Callable[[UserDataset], tuple], length: int) -> np.ndarray:
        """``sum_by_size`` of the ``(bin, size)`` rows ``rows_of`` gives for every dataset of whole users: each
        batch's exact count table on the executors, the tables added (integers) by Spark."""
        import pandas as pd
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, StringType, StructField, StructType

        schema = StructType(
            [StructField("_key", LongType()), StructField("_count", LongType()), StructField("_err", StringType())]
        )

        def table(ds: UserDataset) -> pd.DataFrame:
            keys, counts = count_table(*rows_of(ds))
            return pd.DataFrame({"_key": keys, "_count": counts, "_err": None})

        part = self._by_users(data, table, schema)
        rows = self._raise_errors(part.groupBy("_key", "_err").agg(F.sum("_count").alias("_count")).collect())
        keys = np.array([r["_key"] for r in rows], dtype=np.int64)
        b, n = decode_keys(keys)
        return sum_by_size(b, n, np.array([r["_count"] for r in rows], dtype=np.int64), length)

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

    def grid_sum(
        self, data: SparkTable, box: BoxDomain, shape: int | tuple[int, int], drop_outside: bool = False
    ) -> np.ndarray:
        """The exact ``(cell, user size)`` count table computed by Spark SQL (no Python on the executors): the
        in-memory engine's cell arithmetic operation for operation (``floor((x - low) / width * rows)`` in
        doubles, clamped to the grid), each person's size among its points inside the box (points outside are
        dropped person by person, or refused without ``drop_outside``), then ``sum_by_size`` on the driver of
        the table's rows (one per distinct cell and size): the in-memory sum, bit for bit."""
        from pyspark.sql import functions as F

        rows, cols = check_grid(box, shape)
        if len(data.columns.points) != 2:
            raise DataError("heatmaps need 2-D point items (e.g. lat, lon)")
        (l0, l1), (h0, h1) = (float(v) for v in box.low), (float(v) for v in box.high)
        x0, x1 = (F.col(c).cast("double") for c in data.columns.points)
        inside = (x0 >= l0) & (x0 <= h0) & (x1 >= l1) & (x1 <= h1)  # (NaN and inf compare outside)
        if not drop_outside and data.df.where(~inside).limit(1).count():
            raise DataError(_OUTSIDE)

        def cell(x, low, width, k):
            return F.least(F.greatest(F.floor((x - F.lit(low)) / F.lit(width) * F.lit(float(k))), F.lit(0)),
                           F.lit(k - 1)).cast("long")  # fmt: skip

        b = cell(x0, l0, h0 - l0, rows) * cols + cell(x1, l1, h1 - l1, cols)
        p = data.df.where(inside).select(F.col(data.columns.user).alias("_u"), b.alias("_b"))
        sizes = p.groupBy("_u").agg(F.count(F.lit(1)).alias("_n"))
        t = p.join(sizes, "_u").groupBy("_b", "_n").agg(F.count(F.lit(1)).alias("_k")).collect()
        b = np.array([r["_b"] for r in t], dtype=np.int64)
        n = np.array([r["_n"] for r in t], dtype=np.int64)
        k = np.array([r["_k"] for r in t], dtype=np.int64)
        return sum_by_size(b, n, k, rows * cols).reshape(rows, cols)

    @staticmethod
    def _coded(data: SparkTable) -> None:
        """Refuse a table without a public finite domain of ids (the handle's parameters, not its rows). On the
        executors every item is coded, and an item outside the domain dropped, person by person, as the
        in-memory engine drops it (``OUTSIDE_DOMAIN``)."""
        dom, cols = data.domain, data.columns
        if not isinstance(dom, FiniteDomain) or not dom.public or cols.item is None:
            raise DataError("this release needs ids in a public finite domain; declare the domain")

    def histogram_sum(self, data: SparkTable, normalize: bool = True) -> np.ndarray:
        self._coded(data)
        return self._table(data, lambda ds: histogram_rows(ds, normalize), len(data.domain))

    def per_user_mean(self, data: SparkTable, query: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        import pandas as pd
        from pyspark.sql.types import ArrayType, DoubleType, StringType, StructField, StructType

        user = data.columns.user
        schema = StructType(
            [
                StructField(user, data.df.schema[user].dataType),
                StructField("_m", ArrayType(DoubleType())),
                StructField("_err", StringType()),
            ]
        )

        def means(ds: UserDataset) -> pd.DataFrame:
            m = per_user_mean(ds, query)
            return pd.DataFrame({user: ds.user_ids, "_m": list(m), "_err": None})

        rows = self._raise_errors(self._by_users(data, means, schema).collect())
        if not rows:
            raise DataError("this release needs at least one user (the number of users is public for it)")
        keys = np.asarray([r[user] for r in rows])
        means_ = np.array([r["_m"] for r in rows], dtype=np.float64)
        return means_[np.argsort(keys, kind="stable")]

    def edges(self, data: SparkTable) -> UserDataset:
        cols = data.columns
        if cols.item is None:
            raise DataError("distinct counting needs items that are ids (a finite domain)")
        pdf = data.df.select(cols.user, cols.item).distinct().toPandas()  # (no size gate: see the module)
        return edges_from_pairs(pdf[cols.user].to_numpy(), pdf[cols.item].to_numpy())

    def bounded_item_sums(self, data: SparkTable, cap, keep, weights, exclude=None) -> tuple[np.ndarray, np.ndarray]:
        """The bounding and the per-item sums run on the executors (each batch of whole persons through
        :func:`~userdp.engines.base.bounded_item_sums_of`, then a sum by item); one row per item reaches
        the driver. The ``exclude``d labels reach the executors as a broadcast variable."""
        import pandas as pd
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        cols = data.columns
        if cols.item is None:
            raise DataError("a set union needs items that are ids (a finite domain)")
        self._check_keyable(data.df, cols.user)
        user, item = cols.user, cols.item
        width = int(np.asarray(weights(np.ones(1, dtype=np.int64))).shape[1])
        d = data.df.select(user, F.col(item).cast("string").alias(item)).distinct()
        names = [f"_w{c}" for c in range(width)]
        gone = None
        if exclude is not None and len(exclude):
            gone = self.spark.sparkContext.broadcast(np.asarray(exclude).astype(str))

        def part(ds: UserDataset) -> pd.DataFrame:
            out = None if gone is None else gone.value
            lab, sums = bounded_item_sums_of(ds.dedupe() if ds.n_items else ds, cap, keep, weights, out)
            return pd.DataFrame({"_k": lab.astype(str), **{n: sums[:, c] for c, n in enumerate(names)}})

        schema = T.StructType([T.StructField("_k", T.StringType())] + [T.StructField(n, T.LongType()) for n in names])
        rows = (
            self._by_users(SparkTable(d, Columns(user, item), None), part, schema)
            .groupBy("_k")
            .agg(*[F.sum(n).alias(n) for n in names])
            .collect()
        )
        if gone is not None:
            gone.unpersist()
        if not rows:
            return np.empty(0, dtype=object), np.zeros((0, width), dtype=np.int64)
        labels = np.array([r["_k"] for r in rows], dtype=object)
        sums = np.array([[int(r[n]) for n in names] for r in rows], dtype=np.int64)
        order = np.argsort(labels.astype(str), kind="stable")
        return labels[order], sums[order]

    def key_records(self, data: SparkTable) -> tuple[UserDataset, np.ndarray]:
        """The (person, key) record counts aggregate on the executors; one row per person and key reaches
        the driver (no size gate: see the module)."""
        cols = data.columns
        if cols.item is None:
            raise DataError("counting records per key needs keys that are ids (a finite domain)")
        pdf = data.df.groupBy(cols.user, cols.item).count().toPandas()
        return key_records_from_triples(
            pdf[cols.user].to_numpy(), pdf[cols.item].to_numpy(), pdf["count"].to_numpy(dtype=np.int64)
        )

    def key_record_sums(self, data: SparkTable, fn, width: int) -> tuple[np.ndarray, np.ndarray]:
        """The (person, key) record counts aggregate on the executors, and ``fn`` (the per-person bounding of key
        counts) runs there too, on batches of whole persons; one row per label reaches the driver."""
        from pyspark.sql import functions as F

        cols = data.columns
        if cols.item is None:
            raise DataError("counting records per key needs keys that are ids (a finite domain)")
        user, item = cols.user, cols.item
        d = data.df.groupBy(user, F.col(item).cast("string").alias(item)).count()

        def batch(pdf: pd.DataFrame):
            return fn(*key_records_from_triples(
                pdf[user].to_numpy(), pdf[item].to_numpy(dtype=object), pdf["count"].to_numpy(dtype=np.int64)
            ))  # fmt: skip

        return self._sums_by_label(d, user, batch, width)

    def _sums_by_label(self, d, user: str, batch: Callable, width: int) -> tuple[np.ndarray, np.ndarray]:
        """``batch`` (a pandas frame of whole persons' rows -> labels and ``width`` integer columns) on the
        executors; its rows added up by label there (Spark's exact sum of longs) and one row per label, in text
        order, collected on the driver."""
        import pandas as pd
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        names = [f"_w{c}" for c in range(int(width))]

        def part(pdf: pd.DataFrame) -> pd.DataFrame:
            lab, sums = batch(pdf)
            sums = np.asarray(sums, dtype=np.int64).reshape(-1, len(names))
            keys = np.asarray(lab, dtype=object).astype(str)
            return pd.DataFrame({"_k": keys, **{n: sums[:, c] for c, n in enumerate(names)}})

        schema = T.StructType([T.StructField("_k", T.StringType())] + [T.StructField(n, T.LongType()) for n in names])
        summed = self._whole_users(d, user, part, schema).groupBy("_k").agg(*[F.sum(n).alias(n) for n in names])
        rows = summed.collect()
        if not rows:
            return np.empty(0, dtype=object), np.zeros((0, len(names)), dtype=np.int64)
        labels = np.array([r["_k"] for r in rows], dtype=object)
        sums = np.array([[int(r[n]) for n in names] for r in rows], dtype=np.int64)
        order = np.argsort(labels.astype(str), kind="stable")
        return labels[order], sums[order]

    supports_key_values = True

    def load_key_values(self, source: Any, user: str, key: str, value: str) -> DataFrame:
        """The ``(u, k, v)`` records as a DataFrame: persons as read (text or whole numbers), keys as text, values
        as doubles (a numeric column, or text whose every value is a number); missing and non-finite values
        refused, as every engine refuses them."""
        from pyspark.sql import DataFrame
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        names = [user, key, value]
        layout = None
        if FileSource.of(source) is not None:  # persons and keys as text, never typed by other rows
            df, layout = self._read(FileSource.of(source), infer=False, text=(user, key))
        elif isinstance(source, DataFrame):
            df = source
        else:
            df = self.spark.createDataFrame(to_arrow(source).to_pandas())
        if layout is not None:
            layout.check_columns(names, df.columns)
        missing = [c for c in names if c not in df.columns]
        if missing:
            raise DataError(f"column(s) {missing} not found; the DataFrame has columns {df.columns}")
        df = df.select(*names)
        for c in (user, key):
            t = df.schema[c].dataType
            if not isinstance(t, (T.StringType, T.IntegralType)):
                raise DataError(
                    f"column {c!r} has type {t.simpleString()}; persons and keys must be text or whole numbers"
                )
        vt = df.schema[value].dataType
        if isinstance(vt, T.StringType):
            as_number = F.col(value).try_cast("double") if hasattr(F.col(value), "try_cast") else F.col(value).cast(
                "double")  # fmt: skip  # (ANSI mode: a cast of text that is no number fails the job)
            if df.filter(F.col(value).isNotNull() & as_number.isNull()).limit(1).count():
                raise DataError(f"value column {value!r} holds values that are not numbers; it must be numeric")
        elif not isinstance(vt, T.NumericType):
            raise DataError(f"value column {value!r} has type {vt.simpleString()}; it must be numeric")
        df = df.select(F.col(user).alias("u"), F.col(key).cast("string").alias("k"),
                       F.col(value).cast("double").alias("v"))  # fmt: skip
        nulls = F.col("u").isNull() | F.col("k").isNull() | F.col("v").isNull()
        bad = F.isnan(F.col("v")) | (F.abs(F.col("v")) == F.lit(float("inf")))
        found = df.select(F.max(nulls.cast("int")).alias("m"), F.max(bad.cast("int")).alias("f")).collect()[0]
        if found["m"]:
            raise DataError(f"columns {names} have missing values")
        if found["f"]:
            raise DataError(f"value column {value!r} contains NaN or inf")
        return df

    def key_value_sums(self, data: DataFrame, fn: Callable, width: int) -> tuple[np.ndarray, np.ndarray]:
        """``fn`` on the executors, over pandas frames of whole persons' records; the integer rows are added up
        by label there (Spark's exact sum of longs) and one row per label reaches the driver."""
        def batch(pdf):
            return fn(KeyValues(pdf["u"].to_numpy(), pdf["k"].to_numpy(dtype=object),
                                pdf["v"].to_numpy(dtype=np.float64)))  # fmt: skip

        return self._sums_by_label(data, "u", batch, width)

    def bucket_sums(
        self,
        data: SparkTable,
        n_buckets: int,
        bucket_of: Callable[[np.ndarray], np.ndarray],
        shares: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]],
        count: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray],
        width: int,
    ) -> np.ndarray:
        """A sum over public buckets of elements, every part computed on the executors; ``width`` numbers per
        bucket reach the driver (the distinct count's default path on Spark).

        The person-element edges are deduplicated, with the elements as text (as :meth:`edges` reads them);
        ``bucket_of(labels)`` puts each element in a bucket; ``shares(offsets, edge_buckets)`` turns persons'
        buckets (one per distinct element, CSR by person) into their ``(person, bucket, level)`` units; and
        ``count(persons, elements, unit_persons, unit_levels)`` gives a bucket's ``width`` numbers from its
        edges and its persons' units. Returns the sum over the buckets."""
        import pandas as pd
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        cols = data.columns
        if cols.item is None:
            raise DataError("distinct counting needs items that are ids (a finite domain)")
        user, item = cols.user, cols.item
        d = data.df.select(user, F.col(item).cast("string").alias(item)).distinct()
        utype = d.schema[user].dataType.simpleString()

        def with_bucket(batches):
            for pdf in batches:
                yield pdf.assign(_b=bucket_of(pdf[item].to_numpy(dtype=object)).astype(np.int64))

        edges = d.mapInPandas(with_bucket, f"{user} {utype}, {item} string, _b long")

        def units_of(ds: UserDataset) -> pd.DataFrame:  # a batch of whole persons and their edges' buckets
            person, bucket, level = shares(ds.offsets, ds.domain.labels[ds.items].astype(np.int64))
            return pd.DataFrame({user: ds.user_ids[person], "_b": bucket, "_l": level})

        units = self._by_users(
            SparkTable(edges.select(user, "_b"), Columns(user, "_b"), None),
            units_of,
            T.StructType(
                [T.StructField(user, d.schema[user].dataType), T.StructField("_b", T.LongType()),
                 T.StructField("_l", T.LongType())]
            ),
        )  # fmt: skip

        def count_bucket(e, u):
            if e.empty:
                return pd.DataFrame({"_b": [], "_i": [], "_c": []}, dtype=np.int64)
            none = u.empty  # (a bucket can hold edges but no units: a person's l_max units went elsewhere)
            up = np.empty(0, dtype=e[user].to_numpy().dtype) if none else u[user].to_numpy()
            ul = np.empty(0, dtype=np.int64) if none else u["_l"].to_numpy()
            c = count(e[user].to_numpy(), e[item].to_numpy(dtype=object), up, ul)
            return pd.DataFrame({"_b": np.full(width, int(e["_b"].iloc[0])), "_i": np.arange(width), "_c": c})

        parts = (
            edges.groupBy("_b")
            .cogroup(units.groupBy("_b"))
            .applyInPandas(count_bucket, "_b long, _i long, _c long")
            .groupBy("_i")
            .agg(F.sum("_c").alias("_c"))
            .collect()
        )
        out = np.zeros(width, np.int64)
        for r in parts:
            out[int(r["_i"])] = int(r["_c"])
        return out

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
        if isinstance(s, bool) or int(s) != s or s < 1:
            raise DataError(f"the per-user sample size must be at least 1, got {s}")
        self._check_keyable(data.df, data.columns.user)
        if data.columns.item is not None:
            self._coded(data)  # the canonical order is the codes' order: the items are coded
        s, cols, dom = int(s), data.columns, data.domain
        df = self._by_users(data, lambda ds: _as_rows(cols, dom, sample_keyed(ds, s, streams)), data.df.schema)
        return SparkTable(df, data.columns, data.domain)

    def randomize_keyed(
        self, data: SparkTable, randomizer: Any, streams: KeyedStreams, m: int | None = None
    ) -> SparkTable:
        self._check_keyable(data.df, data.columns.user)
        self._coded(data)
        cols, dom = data.columns, data.domain
        df = self._by_users(
            data, lambda ds: _as_rows(cols, dom, randomize_keyed(ds, randomizer, streams, m)), data.df.schema
        )
        return SparkTable(df, data.columns, data.domain)

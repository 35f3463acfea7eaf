"""Tabular input: Arrow tables from DataFrames, dicts of columns and files (CSV, TSV, Parquet, JSON lines,
optionally compressed), and the checks of their columns."""

from __future__ import annotations

import bz2
import gzip
import lzma
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import DataError

__all__ = ["to_arrow", "read_table", "table_of", "check_columns", "READ_ERRORS"]


# --------------------------------------------------------------------------------------------
# Tabular input
# --------------------------------------------------------------------------------------------


def to_arrow(table: Any) -> pa.Table:
    """Convert a pandas / polars DataFrame, a pyarrow Table or a dict of columns to a pyarrow Table."""
    if isinstance(table, pa.Table):
        return table
    if isinstance(table, pa.RecordBatch):
        return pa.Table.from_batches([table])
    mod = type(table).__module__
    if mod.startswith("pandas"):
        try:
            return pa.Table.from_pandas(table, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
            # pyarrow's message quotes the offending value (a person's key, say): only its kind is reported
            raise DataError(
                f"could not convert the DataFrame ({type(exc).__name__}): a column mixes types (e.g. numbers and "
                "text); give it one type"
            ) from None
    if mod.startswith("polars"):
        return table.to_arrow()
    if isinstance(table, dict):
        try:
            # an empty column has no type (as in a header-only CSV), not NumPy's default float64
            cols = {
                k: v if isinstance(v, pa.Array) else (pa.nulls(0) if len(v) == 0 else np.asarray(v))
                for k, v in table.items()
            }
            return pa.table(cols)
        except (pa.ArrowInvalid, ValueError):
            # pyarrow's message names the columns' lengths (counts read off the data): not repeated here
            raise DataError("could not build a table from the dict of columns (are they of equal length?)") from None
    raise DataError(
        f"unsupported table type {type(table).__name__}: pass a pandas/polars DataFrame, a pyarrow Table, "
        "a dict of columns, or use UserDataset.from_file"
    )


def _open(path: Path):
    suffixes = path.suffixes
    if suffixes and suffixes[-1] == ".xz":
        return lzma.open(path, "rb")
    if suffixes and suffixes[-1] == ".gz":
        return gzip.open(path, "rb")
    if suffixes and suffixes[-1] == ".bz2":
        return bz2.open(path, "rb")
    return open(path, "rb")


# what reading a (compressed) file can raise: Arrow's parse errors, I/O errors and corrupt compressed streams
READ_ERRORS: tuple[type[BaseException], ...] = (pa.ArrowException, OSError, EOFError, lzma.LZMAError, zlib.error)


def read_table(
    path: str | Path, columns: Sequence[str] | None = None, format: str | None = None, text: Sequence[str] = ()
) -> pa.Table:
    """Read a CSV, Parquet or JSON-lines file (optionally ``.gz`` / ``.xz`` / ``.bz2`` compressed). The CSV
    columns named in ``text`` are read as text, never typed by what the other rows hold (one row of ``abc``
    would otherwise turn a column of ``007`` from numbers into text, and change every other person's labels)."""
    import pyarrow.csv as pcsv
    import pyarrow.json as pjson
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.exists():
        raise DataError(f"no such file: {path}")
    sfx = [s.lower() for s in path.suffixes if s.lower() not in (".xz", ".gz", ".bz2")]
    fmt = format or (sfx[-1].lstrip(".") if sfx else "")
    if fmt not in ("parquet", "pq", "csv", "tsv", "txt", "json", "jsonl", "ndjson"):
        raise DataError(f"cannot tell the format of {path.name}; pass format='csv', 'parquet' or 'jsonl'")
    if path.is_file() and path.stat().st_size == 0:  # an empty file says nothing: not even its columns
        raise DataError(f"{path.name} is empty (not even a header line)")
    try:
        if fmt in ("parquet", "pq"):
            table = pq.read_table(path)
        elif fmt in ("csv", "tsv", "txt"):
            with _open(path) as fh:
                opts = pcsv.ParseOptions(delimiter="\t" if fmt == "tsv" else ",")
                # an empty field is a missing value, also in text columns (then refused, never a "" label)
                conv = pcsv.ConvertOptions(
                    strings_can_be_null=True, null_values=[""], column_types={c: pa.string() for c in text}
                )
                table = pcsv.read_csv(fh, parse_options=opts, convert_options=conv)
        else:
            with _open(path) as fh:
                table = pjson.read_json(fh)
    except READ_ERRORS as exc:
        # the parser's own message can quote rows of the file: only its kind is reported
        raise DataError(f"could not read {path.name} as {fmt} ({type(exc).__name__})") from None
    if columns is not None:
        _require_columns(table, columns)
        table = table.select(list(columns))
    return table


def table_of(source: Any, columns: Sequence[str] | None = None, text: Sequence[str] = ()) -> pa.Table:
    """An Arrow table from a path (:func:`read_table`, the CSV columns ``text`` read as text) or from anything
    :func:`to_arrow` takes, with the named ``columns`` (a :class:`DataError` naming the table's columns if one
    is missing)."""
    if isinstance(source, (str, Path)):
        return read_table(source, columns=columns, text=text)
    table = to_arrow(source)
    if columns is not None:
        _require_columns(table, columns)
        table = table.select(list(columns))
    return table


def _require_columns(table: pa.Table, columns: Sequence[str]) -> None:
    check_columns(columns, table.column_names, "table")


def check_columns(columns: Sequence[str], available: Sequence[str], what: str = "table") -> None:
    """Each named column must exist exactly once in ``available`` (a file's header), and no column may play
    two roles (``--user lat --lat lat``): a :class:`DataError` saying which, before any row is read."""
    twice = sorted({c for c in columns if list(columns).count(c) > 1})
    if twice:
        raise DataError(f"column(s) {twice} named for two roles; each role needs its own column")
    missing = [c for c in columns if c not in available]
    if missing:
        raise DataError(f"column(s) {missing} not found; the {what} has columns {list(available)}")
    repeated = sorted({c for c in columns if list(available).count(c) > 1})
    if repeated:
        raise DataError(f"the {what} has more than one column named {repeated}; rename them")


def _column_numpy(col: pa.ChunkedArray, name: str) -> np.ndarray:
    if col.null_count:  # how many is data-dependent and is not reported
        raise DataError(f"column {name!r} has missing values")
    return col.to_numpy()

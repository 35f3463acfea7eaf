"""Tabular input: Arrow tables from DataFrames, dicts of columns and files (CSV, TSV, Parquet, JSON lines,
optionally compressed), and the checks of their columns."""

from __future__ import annotations

import bz2
import csv
import gzip
import lzma
import os
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import DataError, ParameterError

__all__ = ["FileSource", "FileLayout", "file_layout", "to_arrow", "read_table", "table_of", "check_columns",
           "READ_ERRORS"]  # fmt: skip


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
    if suffixes and suffixes[-1].lower() == ".xz":
        return lzma.open(path, "rb")
    if suffixes and suffixes[-1].lower() == ".gz":
        return gzip.open(path, "rb")
    if suffixes and suffixes[-1].lower() == ".bz2":
        return bz2.open(path, "rb")
    return open(path, "rb")


# what reading a (compressed) file can raise: Arrow's parse errors, I/O errors and corrupt compressed streams
READ_ERRORS: tuple[type[BaseException], ...] = (pa.ArrowException, OSError, EOFError, lzma.LZMAError, zlib.error)

COMPRESSIONS = (".gz", ".xz", ".bz2", ".zst")
"""Compression suffixes a file name may end with (``.zst``: DuckDB only)."""

_SUFFIXES = {"parquet": "parquet", "pq": "parquet", "csv": "csv", "tsv": "csv", "txt": "csv", "json": "json",
             "jsonl": "json", "ndjson": "json"}  # fmt: skip
_KINDS = {"csv": "delimited text", "parquet": "Parquet", "json": "JSON lines"}
_DELIMITER_NAMES = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";", "pipe": "|", "space": " "}
_SNIFF_BYTES = 1 << 20  # the first line is read up to this many bytes to tell tabs from commas


def _delimiter_name(d: str) -> str:
    return {"\t": "tab", ",": "comma", ";": "semicolon", "|": "pipe", " ": "space"}.get(d, repr(d))


@dataclass(frozen=True)
class FileSource:
    """A file and how its delimited text is laid out: what every engine reads where it reads a path. The
    command line builds one from ``--delimiter``, ``--no-header`` and ``--columns NAME,...``. Every option is
    checked here, before any file is opened (a :class:`~userdp.errors.ParameterError`).

    Parameters
    ----------
    path:
        The file (a folder or a glob where the engine reads those: DuckDB, chunked, Spark).
    delimiter:
        The field separator of a text file: one ASCII character (not ``"``), or ``"tab"`` (also ``"\\t"``),
        ``"comma"``, ``"semicolon"``, ``"pipe"``, ``"space"``. ``None`` (the default): a ``.tsv`` file is
        tab-separated; a ``.csv`` or ``.txt`` file is tab-separated when its first line has more tab-separated
        fields than comma-separated ones (a header line with tabs and no commas, say), else comma-separated.
        A delimiter also reads a file of any other suffix as delimited text.
    header:
        Whether the first line names the columns (the default). ``False``: every line is a record.
    columns:
        The names of a headerless file's fields, in order (``header=False`` only); one per field of the file.
        Without them a headerless file's fields are named ``"1"``, ``"2"``, ... (as ``cut -f`` counts).
    """

    path: str | os.PathLike
    delimiter: str | None = None
    header: bool = True
    columns: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.path, (str, os.PathLike)):
            raise ParameterError(f"a FileSource's path must be a str or a path, got {type(self.path).__name__}")
        d = self.delimiter
        if d is not None:
            if not isinstance(d, str):
                raise ParameterError("the delimiter (--delimiter) must be text: one character, or tab")
            d = _DELIMITER_NAMES.get(d.lower(), d)
            if len(d) != 1 or not (d == "\t" or " " <= d <= "~"):
                raise ParameterError(
                    "the delimiter (--delimiter) must be one ASCII character (or tab, comma, semicolon, pipe, "
                    f"space), got {self.delimiter!r}"
                )
            if d == '"':
                raise ParameterError(f"the delimiter (--delimiter) cannot be {d!r} (the quote character)")
            object.__setattr__(self, "delimiter", d)
        if not isinstance(self.header, bool):
            raise ParameterError("header must be True or False (--no-header)")
        if self.columns is not None:
            cols = (self.columns,) if isinstance(self.columns, str) else tuple(self.columns)
            if self.header:
                raise ParameterError(
                    "column names (--columns) are for a file without a header line: add --no-header "
                    "(header=False), or leave --columns out to use the header's names"
                )
            if not cols or any(not isinstance(c, str) or not c.strip() for c in cols):
                raise ParameterError("--columns needs one non-empty name per field, comma-separated: user,time,lat,lon")
            twice = sorted({c for c in cols if cols.count(c) > 1})
            if twice:
                raise ParameterError(f"--columns names {twice} more than once; each field needs its own name")
            object.__setattr__(self, "columns", cols)

    @property
    def name(self) -> str:
        return Path(self.path).name

    @staticmethod
    def of(source: Any) -> FileSource | None:
        """``source`` as a :class:`FileSource` (a ``str`` or path: with the default layout), or ``None`` for
        anything that is not a file."""
        if isinstance(source, FileSource):
            return source
        if isinstance(source, (str, os.PathLike)):
            return FileSource(source)
        return None

    @property
    def default(self) -> bool:
        """The layout of a plain path (every option left at its default)."""
        return self.delimiter is None and self.header and self.columns is None


@dataclass(frozen=True)
class FileLayout:
    """How one file is read, resolved from a :class:`FileSource` by :func:`file_layout`: ``kind``
    (``"csv"``, ``"parquet"`` or ``"json"``), and for delimited text its ``delimiter``, ``header`` and the
    ``names`` of a headerless file's fields (``None`` with a header line)."""

    path: Path
    kind: str
    delimiter: str = ","
    header: bool = True
    names: tuple[str, ...] | None = None

    @property
    def name(self) -> str:
        return self.path.name

    def describe(self) -> str:
        """What the file was read as, for messages: ``tab-separated text with a header line``."""
        if self.kind != "csv":
            return _KINDS[self.kind]
        sep = {"\t": "tab", ",": "comma"}.get(self.delimiter)
        what = f"{sep}-separated text" if sep else f"text separated by {self.delimiter!r}"
        return what + (" with a header line" if self.header else " without a header line")

    def unreadable(self, problem: str) -> DataError:
        """The :class:`DataError` of a file that could not be read, worded for the command line: what is
        wrong (``problem``: ``"fields"``, ``"utf8"``, ``"type"``, ``"compressed"``, or anything else for a file
        that is not of its kind) and which option fixes it. Nothing read from the file is quoted."""
        head = f"could not read {self.name} as {self.describe()}"
        if self.kind == "csv":
            flags = "check --delimiter (tab, comma, ...) and --no-header / --columns"
            if problem == "fields":
                against = "the header line" if self.header else "the first line"
                why = f"a line has more or fewer fields than {against}, or a quoted field does not end; {flags}"
            elif problem == "utf8":
                why = "a field is not UTF-8 text; convert the file to UTF-8"
            elif problem == "type":
                why = f"a column's values change type part-way through the file (text in a column of numbers); {flags}"
            elif problem == "compressed":
                why = "the compressed stream is damaged or truncated"
            else:
                why = f"it is not delimited text as described; {flags}"
        elif problem == "compressed":
            why = "the compressed stream is damaged or truncated"
        elif self.kind == "json":
            why = "a line is not one JSON object (JSON lines: one object per line); a text table needs a .csv suffix"
        else:
            why = (
                f"the file is not Parquet (damaged, or another format named {self.path.suffix}); a delimited text "
                "file needs a .csv, .tsv or .txt suffix"
            )
        return DataError(f"{head}: {why}")

    def check_columns(self, columns: Sequence[str], available: Sequence[str]) -> None:
        """:func:`check_columns` for the columns read from this file. A header line that does not look like
        column names (a number, a date, a space...: a headerless file's first record) is not quoted: the
        message says how many fields it has and how to read a file without a header line."""
        twice = sorted({c for c in columns if list(columns).count(c) > 1})
        if twice or not self.header or all(_NAME.fullmatch(str(c)) for c in available):
            if not self.header and any(c not in available for c in columns) and not twice:
                missing = [c for c in columns if c not in available]
                raise DataError(
                    f"column(s) {missing} not found; {self.name} is read without a header line and its "
                    f"columns are {list(available)}: name them with --columns NAME,... (one per field)"
                )
            check_columns(columns, available, f"file {self.name}")
            return
        try:
            check_columns(columns, available, f"file {self.name}")
        except DataError:
            raise DataError(
                f"the columns {list(columns)} are not the columns of {self.name}: its first line "
                f"({len(available)} fields, read as {self.describe()}) does not look like column names. If the "
                "file has no header line, pass --no-header and name its fields with --columns NAME,...; if its "
                "fields are separated by another character, pass --delimiter"
            ) from None


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}")  # a header field that looks like a column name


def format_of(path: Path, format: str | None = None, text: bool = False) -> str | None:
    """The kind of file ``path`` is by its suffix (``csv``, ``parquet`` or ``json``), or by ``format``
    (``"csv"``, ``"tsv"``, ``"txt"``, ``"parquet"``, ``"jsonl"``...); ``None`` if neither tells."""
    if format is not None:
        kind = _SUFFIXES.get(str(format).lower().lstrip("."))
        if kind is None:
            raise ParameterError(f"unknown file format {format!r}; use csv, tsv, parquet or jsonl")
        return kind
    sfx = [s.lower().lstrip(".") for s in path.suffixes if s.lower() not in COMPRESSIONS]
    return _SUFFIXES.get(sfx[-1] if sfx else "") or ("csv" if text else None)


def _first_line(path: Path) -> bytes:
    with _open(path) as fh:
        return fh.readline(_SNIFF_BYTES)


def file_layout(
    source: FileSource | str | os.PathLike, format: str | None = None, probe: Path | None = None
) -> FileLayout:
    """How to read ``source``: its kind by the suffix (or ``format``), the delimiter (given, or sniffed: a
    ``.tsv`` file, or a first line with more tab-separated fields than comma-separated ones, is
    tab-separated), and a headerless file's field names (``columns``, or ``"1"``, ``"2"``, ...; as many as the
    first line has fields).

    ``probe`` is the file to look at when ``source`` names a folder or a glob (its first file). Raises a
    :class:`DataError` worded for the command line (the flags that fix it); nothing read from the file is
    quoted."""
    src = FileSource.of(source)
    if src is None:
        raise ParameterError(f"not a file: {type(source).__name__}")
    path = Path(probe if probe is not None else src.path)
    if not path.exists():
        raise DataError(f"no such file: {src.path}")
    if path.is_dir():
        raise DataError(f"{path.name} is a folder; the in-memory engine reads one file (--engine duckdb reads folders)")
    kind = format_of(path, format, text=not src.default)
    if kind is None:
        raise DataError(
            f"cannot tell the format of {path.name} from its suffix: name it .csv, .tsv or .txt (delimited "
            "text), .parquet or .jsonl (JSON lines), or pass --delimiter to read it as delimited text"
        )
    if kind != "csv" and not src.default:
        raise ParameterError(
            f"--delimiter, --no-header and --columns apply to delimited text; {path.name} is read as "
            f"{_KINDS[kind]} (by its suffix)"
        )
    if path.is_file() and path.stat().st_size == 0:  # an empty file says nothing: not even its columns
        raise DataError(f"{path.name} is empty (not even a header line)")
    if kind != "csv":
        return FileLayout(path, kind)
    delimiter = src.delimiter
    tsv = format is not None and str(format).lower().lstrip(".") == "tsv"
    suffixes = [s.lower() for s in path.suffixes if s.lower() not in COMPRESSIONS]
    if delimiter is None and (tsv or (format is None and suffixes and suffixes[-1] == ".tsv")):
        delimiter = "\t"
    zst = bool(path.suffixes) and path.suffixes[-1].lower() == ".zst"  # DuckDB's alone: not looked into
    line = b""
    if (delimiter is None or not src.header) and not zst:
        try:
            line = _first_line(path)
        except READ_ERRORS:
            raise FileLayout(path, kind).unreadable("compressed") from None
    if delimiter is None:  # tabs when the first line has more tab-separated fields than comma-separated ones
        first = line.decode("utf-8", errors="replace").rstrip("\r\n")
        delimiter = "\t" if _width(first, "\t") > _width(first, ",") else ","
    names = None
    if not src.header:
        text = line.decode("utf-8", errors="replace").rstrip("\r\n")
        width = len(next(csv.reader([text], delimiter=delimiter, quotechar='"'), [""]))
        if zst and src.columns is None:
            raise DataError(f"{path.name} (zstd) has no header line: name its fields with --columns NAME,...")
        if src.columns is not None and len(src.columns) != width and not zst:
            raise DataError(
                f"{path.name} has {width} field(s) per line (read as {_delimiter_name(delimiter)}-separated) but "
                f"--columns names {len(src.columns)}: name every field, in order, or check --delimiter"
            )
        names = src.columns or tuple(str(j + 1) for j in range(width))
    return FileLayout(path, kind, delimiter, src.header, names)


def _width(line: str, delimiter: str) -> int:
    """The number of fields of one line of delimited text (quotes as the readers take them)."""
    return len(next(csv.reader([line], delimiter=delimiter, quotechar='"'), [""]))


def _arrow_problem(exc: BaseException) -> str:
    """What kind of reading problem Arrow's exception is (its message is not repeated: it can quote rows)."""
    if isinstance(exc, (EOFError, lzma.LZMAError, zlib.error)) or type(exc).__name__ == "BadGzipFile":
        return "compressed"
    msg = str(exc)
    if "UTF8" in msg or "UTF-8" in msg or "utf-8" in msg:
        return "utf8"
    if "Expected" in msg and "columns" in msg:
        return "fields"
    if "conversion error" in msg:
        return "type"
    return "other"


def read_table(
    path: str | Path | FileSource,
    columns: Sequence[str] | None = None,
    format: str | None = None,
    text: Sequence[str] = (),
) -> pa.Table:
    """Read a CSV / TSV (delimited text), Parquet or JSON-lines file (optionally ``.gz`` / ``.xz`` / ``.bz2``
    compressed). A :class:`FileSource` says how delimited text is laid out (its delimiter, whether it has a
    header line, the names of a headerless file's fields); a plain path is read as its suffix says
    (:func:`file_layout`: ``.tsv``, and ``.csv`` / ``.txt`` whose first line has more tab-separated fields
    than comma-separated ones, are tab-separated). ``format`` (``"csv"``, ``"tsv"``, ``"parquet"``,
    ``"jsonl"``) overrides the suffix.

    The CSV columns named in ``text`` are read as text, never typed by what the other rows hold (one row of
    ``abc`` would otherwise turn a column of ``007`` from numbers into text, and change every other person's
    labels). A file that cannot be read is a :class:`DataError` saying what is wrong and which option fixes
    it, never quoting a row."""
    import pyarrow.csv as pcsv
    import pyarrow.json as pjson
    import pyarrow.parquet as pq

    layout = file_layout(path, format)
    path = layout.path
    try:
        if layout.kind == "parquet":
            table = pq.read_table(path)
        elif layout.kind == "csv":
            with _open(path) as fh:
                opts = pcsv.ParseOptions(delimiter=layout.delimiter)
                read = pcsv.ReadOptions(column_names=list(layout.names) if layout.names is not None else None)
                # an empty field is a missing value, also in text columns (then refused, never a "" label)
                conv = pcsv.ConvertOptions(
                    strings_can_be_null=True, null_values=[""], column_types={c: pa.string() for c in text}
                )
                table = pcsv.read_csv(fh, read_options=read, parse_options=opts, convert_options=conv)
        else:
            with _open(path) as fh:
                table = pjson.read_json(fh)
    except READ_ERRORS as exc:
        # the parser's own message can quote rows of the file: only the kind of problem is reported
        if isinstance(exc, OSError) and not isinstance(exc, pa.ArrowException) and exc.strerror:
            raise DataError(f"could not read {path.name} ({exc.strerror})") from None
        raise layout.unreadable(_arrow_problem(exc)) from None
    if columns is not None:
        layout.check_columns(columns, table.column_names)
        table = table.select(list(columns))
    return table


def table_of(source: Any, columns: Sequence[str] | None = None, text: Sequence[str] = ()) -> pa.Table:
    """An Arrow table from a path (:func:`read_table`, the CSV columns ``text`` read as text) or from anything
    :func:`to_arrow` takes, with the named ``columns`` (a :class:`DataError` naming the table's columns if one
    is missing)."""
    if isinstance(source, (str, os.PathLike, FileSource)):
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

"""Reading files (userdp.data.io): the layout of delimited text (FileSource: --delimiter, --no-header, --columns),
TSV sniffing, and messages worded for the command line that quote no row of the file."""

from __future__ import annotations

import gzip

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from userdp.data import FileSource, UserDataset, file_layout, read_table
from userdp.errors import DataError, ParameterError

ROWS = [("u0", "2010-05-01T10:00", 40.71, -73.99, "secret venue"), ("u1", "2010-05-02T11:00", 40.72, -73.98, "v2"),
        ("u0", "2010-05-03T12:00", 40.73, -73.97, "v3")]  # fmt: skip
NAMES = ("user", "time", "lat", "lon", "venue")


def _text(sep: str, header: bool = True) -> str:
    lines = [sep.join(NAMES)] if header else []
    return "\n".join(lines + [sep.join(str(v) for v in r) for r in ROWS]) + "\n"


@pytest.fixture
def reference(tmp_path) -> pa.Table:
    (tmp_path / "ref.csv").write_text(_text(","))
    return read_table(tmp_path / "ref.csv")


def test_a_headerless_tab_separated_file_reads_as_the_csv_with_a_header(tmp_path, reference):
    (tmp_path / "checkins.txt").write_text(_text("\t", header=False))
    got = read_table(FileSource(tmp_path / "checkins.txt", header=False, columns=NAMES))
    assert got.equals(reference)
    # the delimiter given (any suffix is then delimited text), and its names
    (tmp_path / "checkins.dat").write_text(_text(";", header=False))
    for d in (";", "semicolon"):
        assert read_table(FileSource(tmp_path / "checkins.dat", d, False, NAMES)).equals(reference)
    (tmp_path / "tabs.dat").write_text(_text("\t"))
    for d in ("\t", "tab", "\\t", "TAB"):
        assert read_table(FileSource(tmp_path / "tabs.dat", delimiter=d)).equals(reference)
    # compressed too
    (tmp_path / "c.txt.gz").write_bytes(gzip.compress(_text("\t", header=False).encode()))
    assert read_table(FileSource(tmp_path / "c.txt.gz", header=False, columns=NAMES)).equals(reference)


def test_headerless_fields_are_named_by_position_without_columns(tmp_path, reference):
    (tmp_path / "c.tsv").write_text(_text("\t", header=False))
    got = read_table(FileSource(tmp_path / "c.tsv", header=False), columns=["1", "3", "4"])
    assert got.column_names == ["1", "3", "4"] and got.column("3").equals(reference.column("lat"))


@pytest.mark.parametrize(
    ("name", "text", "delimiter"),
    [
        ("a.tsv", _text("\t"), "\t"),
        ("a.csv", _text("\t"), "\t"),  # a .csv whose header has tabs and no commas is tab-separated
        ("a.txt", _text("\t"), "\t"),
        ("a.txt", _text(","), ","),
        ("a.csv", "user\tvenue,city\nu0\tx,y\n", ","),  # as many fields either way: as the suffix says
        ("a.txt", "u0\tJoe's, Pizza\t40.7\n", "\t"),  # a headerless first record with a comma in a field
        ("a.txt", 'u0,"a\tb",40.7\n', ","),
        ("a.csv", "user\n" + "u0\n", ","),
    ],
)
def test_tab_separated_text_is_sniffed(tmp_path, name, text, delimiter):
    (tmp_path / name).write_text(text)
    assert file_layout(tmp_path / name).delimiter == delimiter


def test_tsv_sniffing_reads_the_table(tmp_path, reference):
    for name in ("tabs.csv", "tabs.txt", "tabs.tsv"):
        (tmp_path / name).write_text(_text("\t"))
        assert read_table(tmp_path / name).equals(reference)
    (tmp_path / "tabs.csv.gz").write_bytes(gzip.compress(_text("\t").encode()))
    assert read_table(tmp_path / "tabs.csv.gz").equals(reference)
    ds = UserDataset.from_file(tmp_path / "tabs.csv", user="user", items=["lat", "lon"])
    assert ds.n_users == 2 and ds.n_items == 3
    ds2 = UserDataset.from_file(FileSource(tmp_path / "tabs.csv"), user="user", items=["lat", "lon"])
    assert ds2.n_items == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"delimiter": "ab"}, "one ASCII character"),
        ({"delimiter": ""}, "one ASCII character"),
        ({"delimiter": '"'}, "the quote character"),
        ({"delimiter": "\n"}, "one ASCII character"),
        ({"delimiter": "é"}, "one ASCII character"),
        ({"delimiter": "\x00"}, "one ASCII character"),
        ({"columns": ("a", "b")}, "--no-header"),  # names for a file that has a header line
        ({"header": False, "columns": ("a", "")}, "non-empty"),
        ({"header": False, "columns": ("a", "a")}, "more than once"),
        ({"header": "no"}, "True or False"),
    ],
)
def test_bad_layouts_are_refused_before_any_file_is_opened(kwargs, message):
    with pytest.raises(ParameterError, match=message):
        FileSource("does-not-exist.csv", **kwargs)


def _quiet(message: str) -> None:
    """A reader message quotes no row, and names no library internals."""
    for bad in ("secret", "u0", "2010", "40.71", "format=", "ArrowInvalid", "Arrow", "Error)"):
        assert bad not in message, (bad, message)


def test_a_wrong_number_of_columns_is_refused_naming_both_counts(tmp_path):
    (tmp_path / "c.txt").write_text(_text("\t", header=False))
    with pytest.raises(DataError, match=r"c.txt has 5 field\(s\) per line .* --columns names 3") as info:
        read_table(FileSource(tmp_path / "c.txt", header=False, columns=("user", "lat", "lon")))
    _quiet(str(info.value))


def test_a_layout_for_a_file_that_is_not_text_is_refused(tmp_path, reference):
    pq.write_table(reference, tmp_path / "c.parquet")
    with pytest.raises(ParameterError, match="apply to delimited text; c.parquet is read as Parquet"):
        read_table(FileSource(tmp_path / "c.parquet", delimiter="\t"))
    cols = ["user", "lat", "lon", "venue"]  # (Parquet stores the times in ms)
    assert read_table(FileSource(tmp_path / "c.parquet"), columns=cols).equals(reference.select(cols))


def test_reader_messages_name_the_flags_and_quote_no_row(tmp_path):
    (tmp_path / "data.dat").write_text(_text(","))
    with pytest.raises(DataError, match="cannot tell the format of data.dat") as info:
        read_table(tmp_path / "data.dat")
    assert "--delimiter" in str(info.value) and ".tsv" in str(info.value)
    _quiet(str(info.value))
    # a malformed file: a line with more fields than the header
    (tmp_path / "bad.csv").write_text("user,venue\nu0,secret venue,2010\n")
    with pytest.raises(DataError, match="could not read bad.csv as comma-separated text") as info:
        read_table(tmp_path / "bad.csv")
    assert "more or fewer fields" in str(info.value) and "--delimiter" in str(info.value)
    _quiet(str(info.value))
    # a compressed file that is damaged
    (tmp_path / "bad.csv.gz").write_bytes(b"\x1f\x8b\x08\x00garbage" * 3)
    with pytest.raises(DataError, match="damaged or truncated") as info:
        read_table(tmp_path / "bad.csv.gz")
    _quiet(str(info.value))
    # text that is not Parquet
    (tmp_path / "text.parquet").write_text(_text(","))
    with pytest.raises(DataError, match="the file is not Parquet") as info:
        read_table(tmp_path / "text.parquet")
    _quiet(str(info.value))


def test_a_headerless_file_read_with_a_header_is_not_quoted(tmp_path):
    """The issue's case: a headerless file's first record taken for its header. The message says so and names
    the flags; it quotes none of the record's fields."""
    (tmp_path / "checkins.txt").write_text(_text("\t", header=False))
    with pytest.raises(DataError, match="does not look like column names") as info:
        read_table(tmp_path / "checkins.txt", columns=["user", "lat", "lon"])
    assert "--no-header" in str(info.value) and "--columns" in str(info.value)
    _quiet(str(info.value))
    # a header of names is still listed (a typo is easy to see)
    (tmp_path / "named.csv").write_text(_text(","))
    with pytest.raises(DataError, match=r"not found; the file named.csv has columns \['user', 'time'"):
        read_table(tmp_path / "named.csv", columns=["usr"])
    # headerless: the names it has, and how to give others
    with pytest.raises(DataError, match=r"read without a header line and its columns are \['1', '2'"):
        read_table(FileSource(tmp_path / "checkins.txt", header=False), columns=["user"])

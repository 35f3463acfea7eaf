"""Every engine reads a file's layout (:class:`~userdp.data.FileSource`: --delimiter, --no-header, --columns;
TSV sniffed) the same way: the same table, hence the same aggregates, as the in-memory engine reading the same
records from a CSV file with a header line; and every engine words a malformed file's message alike."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from userdp.data import BoxDomain, FileSource, FiniteDomain
from userdp.engines import Columns, MemoryEngine, get_engine
from userdp.errors import DataError

BOX = BoxDomain.latlon(40.69, 40.76, -74.01, -73.94)
NAMES = ("user", "time", "lat", "lon", "venue")
VENUES = ["Joe's, Pizza", "Central Park", "Blue Bar", "Met"]
POINTS = Columns("user", points=("lat", "lon"))
ITEMS = Columns("user", "venue")


def _rows(n: int = 300, seed: int = 3) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return [
        (f"{rng.integers(0, 40):03d}", f"2010-05-{1 + i % 28:02d}T10:00", f"{40.70 + 0.05 * rng.random():.5f}",
         f"{-74.0 + 0.05 * rng.random():.5f}", VENUES[rng.integers(0, len(VENUES))])
        for i in range(n)
    ]  # fmt: skip


def _write(path, sep: str, header: bool, rows) -> None:
    def field(v: str) -> str:
        return f'"{v}"' if sep in v else v

    lines = [sep.join(NAMES)] if header else []
    text = "\n".join(lines + [sep.join(field(v) for v in r) for r in rows]) + "\n"
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The same records as a CSV with a header (the reference) and in the layouts a user may have."""
    root = tmp_path_factory.mktemp("formats")
    rows = _rows()
    _write(root / "ref.csv", ",", True, rows)
    _write(root / "checkins.txt", "\t", False, rows)  # the file: tab-separated, no header line
    _write(root / "tabs.csv", "\t", True, rows)  # a .csv that is tab-separated: sniffed
    _write(root / "semi.dat", ";", False, rows)
    _write(root / "c.tsv.gz", "\t", False, rows)
    folder = root / "parts"
    folder.mkdir()
    _write(folder / "a.txt", "\t", False, rows[:150])
    _write(folder / "b.txt", "\t", False, rows[150:])
    return root


def _sources(root):
    return {
        "headerless tsv": FileSource(root / "checkins.txt", header=False, columns=NAMES),
        "sniffed tsv": root / "tabs.csv",
        "sniffed tsv (str)": str(root / "tabs.csv"),
        "semicolons": FileSource(root / "semi.dat", delimiter=";", header=False, columns=NAMES),
        "gzip": FileSource(root / "c.tsv.gz", header=False, columns=NAMES),
    }


def _aggregates(eng, source) -> dict:
    domain = FiniteDomain(VENUES)
    pts = eng.load(source, POINTS, BOX)
    ids = eng.load(source, ITEMS, domain)
    edges = eng.edges(eng.load(source, ITEMS))
    return {
        "sizes": eng.user_sizes(pts),
        "grid": eng.grid_sum(pts, BOX, (8, 8)),
        "hist": eng.histogram_sum(ids),
        "edges": (edges.n_users, edges.n_items, sorted(map(str, edges.domain.labels))),
    }


def _same(a: dict, b: dict) -> None:
    assert a["sizes"] == b["sizes"] and a["edges"] == b["edges"]
    np.testing.assert_array_equal(a["grid"], b["grid"])
    np.testing.assert_array_equal(a["hist"], b["hist"])


@pytest.fixture(scope="module")
def expected(files):
    return _aggregates(MemoryEngine(), files / "ref.csv")


@pytest.mark.parametrize("engine", ["memory", "duckdb", "chunked"])
def test_every_engine_reads_every_layout_as_the_csv_with_a_header(files, expected, engine):
    for name, source in _sources(files).items():
        try:
            _same(_aggregates(get_engine(engine), source), expected)
        except AssertionError as exc:  # pragma: no cover - names the layout that differs
            raise AssertionError(f"{engine}: {name}") from exc


@pytest.mark.parametrize("engine", ["duckdb", "chunked"])
def test_a_folder_of_headerless_files(files, expected, engine):
    _same(_aggregates(get_engine(engine), FileSource(files / "parts", header=False, columns=NAMES)), expected)


def test_auto_reads_a_file_source(files, expected):
    _same(_aggregates(get_engine("auto", files / "tabs.csv"), FileSource(files / "tabs.csv")), expected)


@pytest.mark.parametrize("engine", ["memory", "duckdb", "chunked"])
def test_every_engine_words_a_reader_message_alike(tmp_path, engine):
    eng = get_engine(engine)
    (tmp_path / "bad.csv").write_text("user,venue\n" + "u1,x\n" * 5 + "u0,secret venue,2010\n")
    (tmp_path / "data.dat").write_text("user,venue\nu0,secret\n")
    (tmp_path / "checkins.txt").write_text("0\t2010-05-01\t40.7\t-73.9\tsecret\n")
    cases = [
        (tmp_path / "bad.csv", "could not read bad.csv as comma-separated text with a header line: a line has more"),
        (tmp_path / "data.dat", "cannot tell the format of data.dat from its suffix"),
        (tmp_path / "checkins.txt", "does not look like column names"),
        (FileSource(tmp_path / "checkins.txt", header=False, columns=("user", "venue")), "--columns names 2"),
    ]
    for source, message in cases:
        with pytest.raises(DataError, match=message) as info:
            eng.load(source, ITEMS)
        text = str(info.value)
        assert "--delimiter" in text or "--columns" in text, text
        for bad in ("secret", "u0", "2010", "format=", "ArrowInvalid", "Exception"):
            assert bad not in text, (bad, text)


#: Spark reads each layout in about 9 s: the issue's file and a folder in the default tier, the rest in the slow one.
SPARK_LAYOUTS = [
    "headerless tsv",
    "folder",
    *(pytest.param(n, marks=pytest.mark.slow) for n in ("sniffed tsv", "sniffed tsv (str)", "semicolons", "gzip")),
]


@pytest.mark.parametrize("layout", SPARK_LAYOUTS)
def test_spark_reads_every_layout_as_the_csv_with_a_header(files, expected, spark_engine, layout):
    sources = {**_sources(files), "folder": FileSource(files / "parts", header=False, columns=NAMES)}
    _same(_aggregates(spark_engine, sources[layout]), expected)

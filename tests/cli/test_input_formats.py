"""``--delimiter``, ``--no-header`` and ``--columns`` (userdp.cli.common.add_input): every command that reads a
file releases the same values (seeded) from a headerless tab-separated file as from the same records in a CSV
file with a header line; TSV is sniffed; bad combinations are usage errors (exit 2, nothing read or charged);
reader messages name the flags and quote no row."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from tests import cli_argv
from userdp.cli import build_parser, main

VENUES = ["Joe Pizza", "Central Park", "Blue Bar", "Corner Deli", "Met Museum", "Pier 17", "Night Owl", "Green Cafe"]
CLUSTER = dict(zip(VENUES, ["food", "park", "bar", "food", "art", "park", "bar", "art"], strict=True))
NAMES = "user,lat,lon,venue"
HEADERLESS = ("--no-header", "--columns", NAMES)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The same records as ``ref.csv`` (comma-separated, a header line), ``checkins.txt`` (tab-separated, no
    header: the issue's file), ``tabs.csv`` (tab-separated with a header) and a public clustered domain."""
    root = tmp_path_factory.mktemp("inputs")
    rng = np.random.default_rng(5)
    rows = [
        (f"{u}", f"{40.70 + 0.05 * rng.random():.5f}", f"{-74.0 + 0.05 * rng.random():.5f}", VENUES[rng.integers(8)])
        for u in range(80)
        for _ in range(4)
    ]
    (root / "ref.csv").write_text("\n".join([NAMES, *(",".join(r) for r in rows)]) + "\n")
    (root / "checkins.txt").write_text("\n".join("\t".join(r) for r in rows) + "\n")
    (root / "tabs.csv").write_text("\n".join([NAMES.replace(",", "\t"), *("\t".join(r) for r in rows)]) + "\n")
    (root / "domain.csv").write_text("item,cluster\n" + "".join(f"{v},{c}\n" for v, c in CLUSTER.items()))
    return root


def _commands(root) -> dict[str, list[str]]:
    seed = ("--seed", "3", "--json")
    return {
        "heatmap": ["heatmap", "{}", "--user", "user", "--lat", "lat", "--lon", "lon", "--bbox", cli_argv.BBOX,
                    "--epsilon", "1", "--resolution", "16", *seed],
        "distinct": ["distinct", "{}", "--user", "user", "--item", "venue", "--epsilon", "1", *seed],
        "vocabulary": ["vocabulary", "{}", "--user", "user", "--item", "venue", "--epsilon", "1", "--delta", "1e-6",
                       *seed],
        "counts": ["counts", "{}", "--user", "user", "--key", "venue", "--epsilon", "1", "--delta", "1e-6", *seed],
        "linear": [*cli_argv.greatcircle("{}", "--alpha", "25"), *seed],
        "itemwise": [*cli_argv.clustered("itemwise", "{}", root / "domain.csv", "--item", "venue", "--alpha", "20"),
                     *seed],
        "freq": [*cli_argv.clustered("freq", "{}", root / "domain.csv", "--item", "venue", "--alpha", "20"), *seed],
    }  # fmt: skip


def _release(capsys, argv: list[str], path, tmp_path, tag: str, *extra: str) -> dict:
    argv = [str(path) if a == "{}" else str(a) for a in argv] + list(extra)
    if argv[0] == "heatmap":
        argv += ["--out", str(tmp_path / f"{tag}.png")]
    assert main(argv) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    if argv[0] == "heatmap":  # the grid itself, not the name of its file
        out["grid"] = np.load(out["grid"]).tolist()
        out.pop("image")
    return out


@pytest.mark.parametrize("command", ["heatmap", "distinct", "vocabulary", "counts", "linear", "itemwise", "freq"])
def test_a_headerless_tsv_releases_what_the_csv_with_a_header_releases(files, tmp_path, capsys, command):
    argv = _commands(files)[command]
    expected = _release(capsys, argv, files / "ref.csv", tmp_path, "ref")
    assert _release(capsys, argv, files / "checkins.txt", tmp_path, "tsv", *HEADERLESS) == expected
    # TSV sniffed: a .csv whose header line has tabs and no commas, with no flag at all
    assert _release(capsys, argv, files / "tabs.csv", tmp_path, "tabs") == expected


@pytest.mark.parametrize("engine", ["duckdb", "chunked"])
def test_a_headerless_tsv_on_the_duckdb_engines(files, tmp_path, capsys, engine):
    for command in ("heatmap", "distinct"):
        argv = _commands(files)[command] + ["--engine", engine]
        expected = _release(capsys, argv, files / "ref.csv", tmp_path, "ref")
        assert _release(capsys, argv, files / "checkins.txt", tmp_path, "tsv", *HEADERLESS) == expected


def test_fields_named_by_position_and_a_named_delimiter(files, tmp_path, capsys):
    argv = _commands(files)["distinct"]
    expected = _release(capsys, argv, files / "ref.csv", tmp_path, "ref")
    by_position = [a for a in argv if a not in ("user", "venue")]
    by_position[by_position.index("--user") + 1 : by_position.index("--user") + 1] = ["1"]
    by_position[by_position.index("--item") + 1 : by_position.index("--item") + 1] = ["4"]
    got = _release(capsys, by_position, files / "checkins.txt", tmp_path, "pos", "--no-header", "--delimiter", "tab")
    assert got == expected


def _refused(capsys, argv) -> str:
    assert main([str(a) for a in argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("userdp: error: ") and "Traceback" not in captured.err
    return captured.err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--columns", NAMES), "--columns) are for a file without a header line: add --no-header"),
        (("--delimiter", "ab"), "must be one ASCII character"),
        (("--delimiter", "é"), "must be one ASCII character"),
        (("--delimiter", '"'), "cannot be '\"'"),
        (("--no-header", "--columns", "user,lat"), "checkins.txt has 4 field(s) per line"),
        (("--no-header", "--columns", "user,lat,,venue"), "one non-empty name per field"),
        (("--no-header", "--columns", "user,lat,lat,venue"), "more than once"),
        (("--no-header", "--columns", NAMES, "--engine", "chunked", "--delimiter", ";"), "has 1 field(s) per line"),
    ],
)
def test_bad_flag_combinations_are_usage_errors(files, tmp_path, capsys, extra, message):
    ledger = tmp_path / "ledger.json"
    assert main(["ledger", "init", str(ledger), "--budget", "replace:10"]) == 0
    before = ledger.read_text()
    capsys.readouterr()
    argv = [str(files / "checkins.txt") if a == "{}" else a for a in _commands(files)["distinct"]]
    err = _refused(capsys, [*argv, "--ledger", str(ledger), *extra])
    assert message in err and ledger.read_text() == before


def test_a_layout_for_parquet_is_refused(files, tmp_path, capsys):
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    pq.write_table(pcsv.read_csv(files / "ref.csv"), tmp_path / "c.parquet")
    argv = [str(tmp_path / "c.parquet") if a == "{}" else a for a in _commands(files)["distinct"]]
    assert "apply to delimited text; c.parquet is read as Parquet" in _refused(capsys, [*argv, "--no-header"])


@pytest.mark.parametrize("engine", ["memory", "duckdb", "chunked"])
def test_reader_messages_name_flags_and_quote_no_row(files, tmp_path, capsys, engine):
    (tmp_path / "data.dat").write_text((files / "ref.csv").read_text())
    (tmp_path / "ragged.csv").write_text("user,venue\nu1,x\nsecret_user,Joe Pizza,2010\n")
    cases = [
        ("data.dat", "cannot tell the format of data.dat from its suffix", "--delimiter"),
        ("ragged.csv", "a line has more or fewer fields than the header line", "--delimiter"),
        (files / "checkins.txt", "does not look like column names", "--no-header"),  # the case
    ]
    for name, message, flag in cases:
        argv = [*cli_argv.distinct(tmp_path / name, "user", "venue", "--epsilon", "1"), "--engine", engine]
        err = _refused(capsys, argv)
        assert message in err and flag in err, err
        for bad in ("format=", "ArrowInvalid", "Exception", "secret", "Joe", "2010", "40.7", "\t"):
            assert bad not in err, (bad, err)


def test_every_command_that_reads_a_file_has_the_format_flags():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name in ("heatmap", "distinct", "vocabulary", "counts", "linear", "itemwise", "freq"):
        text = sub.choices[name].format_help()
        for flag in ("--delimiter", "--no-header", "--columns", ".tsv", "Parquet"):
            assert flag in text, (name, flag)

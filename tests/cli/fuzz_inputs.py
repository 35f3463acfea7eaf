"""Inputs for the command-line fuzz test (tests/cli/test_fuzz.py): the subcommands of the real parser, pools of
nasty option values, valid command lines to mutate, and the small input files every example gets.

Every file is named relative to the example's own folder (the fuzz test runs each command there), so a failing
command line reads as it would be typed: ``userdp heatmap empty.csv --user user ...``.
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import json
import lzma
from dataclasses import dataclass
from pathlib import Path

# --------------------------------------------------------------------------------------------
# The parser's subcommands
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """One parser of the command line: ``path`` is ``()`` for ``userdp`` itself, ``("ledger", "show")`` for
    ``userdp ledger show``. ``leaf``: it runs something (it has no subcommands of its own)."""

    path: tuple[str, ...]
    parser: argparse.ArgumentParser
    leaf: bool

    @property
    def optionals(self) -> list[argparse.Action]:
        """Its own options, but not ``-h`` / ``--version`` (they only print and exit 0)."""
        return [
            a
            for a in self.parser._actions
            if a.option_strings and not isinstance(a, (argparse._HelpAction, argparse._VersionAction))
        ]

    @property
    def positionals(self) -> list[argparse.Action]:
        return [
            a for a in self.parser._actions if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
        ]


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[Command]:
    """Every parser under ``parser`` (itself included), found from the parser's own subcommand actions: a new
    subcommand is fuzzed without a change here."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    out = [Command(path, parser, not subs)]
    seen: set[int] = set()
    for action in subs:
        for name, p in action.choices.items():
            if id(p) not in seen:  # an alias names the same parser
                seen.add(id(p))
                out.extend(commands(p, (*path, name)))
    return out


# --------------------------------------------------------------------------------------------
# Option values
# --------------------------------------------------------------------------------------------

#: Spark starts a JVM (slow) and is compared elsewhere: never fuzzed.
EXCLUDED_CHOICES = {"spark"}

NUMBERS = [
    "",
    "0",
    "-0",
    "-1",
    "1",
    "2",
    "3",
    "4",
    "0.5",
    "20",
    "32",
    "100",
    "1e-6",
    "1e-12",
    "1e-320",
    "5e-324",
    "1e308",
    "-1e308",
    "1e400",
    "nan",
    "NaN",
    "-nan",
    "inf",
    "-inf",
    "Infinity",
    "65536",
    "16384",
    str(2**31),
    str(2**63),
    str(2**64),
    str(-(2**63) - 1),
    "9" * 30,
    "1_000",
    "0x10",
    " 1",
    "1 ",
    "1e3",
    "1.5",
    "one",
]

STRINGS = [
    "",
    " ",
    "-",
    "--",
    "abc",
    "a,b",
    ",",
    "1,2",
    "1,,2",
    "40.7,-74.0,40.8,-73.9",
    "40.75,-73.98",
    "é",
    "名前",
    "\U0001f600",
    "x" * 300,
    "caf\udce9",  # an undecodable byte in argv (Python's surrogateescape): a real command line can carry one
    "$HOME",
    "%s%n",
    "{}",
    "a\nb",
    "a\tb",
]

COLUMNS = ["user", "lat", "lon", "venue", "category", "item", "text", "lat,lon", "lon,lat", "lat,lat", "user,lat,lon",
           "lat,lon,", "nope", "USER", "", "é", "lat, lon"]  # fmt: skip

#: ``--delimiter`` (one ASCII character or a name; others refused) and ``--columns`` (with ``--no-header``)
DELIMITERS = ["tab", "\\t", "\t", ",", ";", "comma", "TAB", " ", "|", "'", "\\", '"', "ab", "", "é", "\n", "\x7f"]
COLUMN_LISTS = ["user,lat,lon,venue,category", "user,lat,lon,venue", "user,lat,lon,venue,category,extra",
                "user,user,lat,lon,venue", "user,,lat,lon,venue", ",,,,", "", " user , lat,lon,venue,category",
                "1,2,3,4,5", "user"]  # fmt: skip

BBOXES = [
    "40.69,-74.01,40.76,-73.94",  # around the valid check-ins
    "40.5,-74.3,41,-73.65",
    "40.7,-74.0,40.8,-73.9",
    "40.76,-74.01,40.69,-73.94",  # min and max swapped
    "40.72,-74.01,40.76,-73.94",  # cuts the points
    "-90,-180,90,180",
    "-91,-181,91,181",
    "0,0,0,0",
    "0,0,1e-300,1e-300",
    "nan,nan,nan,nan",
    "-inf,-inf,inf,inf",
    "1e308,1e308,1e308,1e308",
    "-1e308,-1e308,1e308,1e308",
    "40.69,-74.01",
    "40.69,-74.01,40.76,-73.94,1",
    "a,b,c,d",
    ",,,",
]

POINTS = ["40.75,-73.98", "0,0", "nan,nan", "inf,-inf", "1e308,1e308", "40.75", "40.75,-73.98,1", "x,y", "90,180",
          "-91,0"]  # fmt: skip

BUDGETS = ["replace:4", "replace:4:1e-6", "add-remove:1", "add-remove:1.5:1e-6", "local:3:1e-6", "replace:0",
           "replace:-1", "replace:nan", "replace:inf", "replace:1e308", "replace:1:nan", "replace:1:1", "replace:1:2",
           "replace:1:-1e-6", "replace:1e-320", "replace", "replace:", ":1", "bogus:1", "replace:1:2:3",
           "add-remove:1e308:1e-6", "local:1:1e-320"]  # fmt: skip

ROUTES = ["best", "theorem 4.4", "eq. (6)", "eq. (7)", "composition", "numerical", "bogus", ""]

#: Files a path option may name (see :func:`make_inputs`), and paths that are not files.
DATA_FILES = [
    "checkins.csv",
    "checkins_unequal.csv",
    "checkins.parquet",
    "checkins.jsonl",
    "checkins.json",
    "checkins.csv.gz",
    "checkins.csv.xz",
    "checkins.csv.bz2",
    "checkins.tsv",
    "checkins.txt",
    "checkins_noheader.txt",
    "checkins_tabs.csv",
    "checkins_semicolons.dat",
    "checkins_noext",
    "empty.csv",
    "empty.parquet",
    "empty.jsonl",
    "empty.csv.gz",
    "header.csv",
    "header.parquet",
    "one.csv",
    "one.jsonl",
    "badtypes.csv",
    "huge.csv",
    "nonfinite.csv",
    "unicode.csv",
    "bom_crlf.csv",
    "latin1.csv",
    "missing_columns.csv",
    "duplicate_columns.csv",
    "ragged.csv",
    "quoted.csv",
    "nulls.csv",
    "int_users.csv",
    "float_users.csv",
    "outside.csv",
    "one_user.csv",
    "blank_lines.csv",
    "nul_bytes.csv",
    "typed.parquet",
    "strings.parquet",
    "nulls.parquet",
    "nested.parquet",
    "nested.jsonl",
    "mixed.jsonl",
    "array.json",
    "bad.jsonl",
    "csv_text.parquet",
    "corrupt.csv.gz",
    "corrupt.csv.xz",
    "corrupt.csv.bz2",
    "adir",
    "adir.csv",
    "parts.parquet",
    "bad_parts.parquet",
    "nonexistent.csv",
    "nowhere/checkins.csv",
    "checkins.csv/child.csv",
    "",
    ".",
    "caf\udce9.csv",
]
DOMAIN_FILES = ["domain.csv", "domain_dup.csv", "domain_nulls.csv", "domain_one_cluster.csv", "domain_numeric.csv",
                "domain.parquet", "empty.csv", "header.csv", "missing_columns.csv", "adir", "nonexistent.csv",
                "checkins.csv"]  # fmt: skip
LEDGER_FILES = ["ledger.json", "ledger.json", "ledger.json", "nonexistent.json", "nowhere/ledger.json", "adir",
                "checkins.csv", "empty.csv", ""]  # fmt: skip
OUT_FILES = ["h.png", "h.jpg", "h.pdf", "h.svg", "h", "h.xyz", "h.npy", ".png", "nowhere/h.png", "adir", "adir/h.png",
             "checkins.csv", "checkins.csv/h.png", "", ".", "new_folder", "é.png", "caf\udce9.png"]  # fmt: skip

_POOLS = {
    "user": COLUMNS,
    "lat": COLUMNS,
    "lon": COLUMNS,
    "item": COLUMNS,
    "items": COLUMNS,
    "delimiter": DELIMITERS,
    "columns": COLUMN_LISTS,
    "bbox": BBOXES,
    "point": POINTS,
    "budget": BUDGETS,
    "route": ROUTES,
    "input": DATA_FILES,
    "file": DATA_FILES,
    "path": LEDGER_FILES + ["new-ledger.json"],
    "domain": DOMAIN_FILES,
    "ledger": LEDGER_FILES,
    "out": OUT_FILES,
    "plot": OUT_FILES,
}


def specific_pool(action: argparse.Action) -> list[str]:
    """Values meant for this option (column names for ``--user``, files for ``--ledger``); ``[]`` if none."""
    return _POOLS.get(action.dest, [])


def generic_pool(action: argparse.Action) -> list[str]:
    """Any value: numbers first for a numeric option."""
    if action.type in (int, float):
        return NUMBERS + STRINGS[:8]
    return STRINGS + NUMBERS[:12] + DATA_FILES[:3]


# --------------------------------------------------------------------------------------------
# Valid command lines (mutated by the fuzz test)
# --------------------------------------------------------------------------------------------

SEED = ("--seed", "7")
TEMPLATES: dict[tuple[str, ...], list[tuple[str, ...]]] = {
    ("heatmap",): [("checkins.csv",), ("--user", "user"), ("--lat", "lat"), ("--lon", "lon"),
                   ("--bbox", "40.69,-74.01,40.76,-73.94"), ("--epsilon", "1"), ("--resolution", "32"),
                   ("--users", "100"), ("--out", "h.png"), SEED],
    ("distinct",): [("checkins.csv",), ("--user", "user"), ("--item", "venue"), ("--epsilon", "1"), SEED],
    ("linear",): [("checkins.csv",), ("--user", "user"), ("--items", "lat,lon"), ("--metric", "greatcircle"),
                  ("--bbox", "40.5,-74.3,41,-73.65"), ("--point", "40.75,-73.98"), ("--alpha", "25"), SEED],
    ("itemwise",): [("checkins.csv",), ("--user", "user"), ("--item", "venue"), ("--metric", "clustered"),
                    ("--domain", "domain.csv"), ("--alpha", "20"), ("--delta", "1e-6"), SEED],
    ("freq",): [("checkins.csv",), ("--user", "user"), ("--item", "venue"), ("--metric", "clustered"),
                ("--domain", "domain.csv"), ("--alpha", "20"), ("--delta", "1e-6"), ("--samples", "5"), SEED],
    ("account", "shuffle"): [("--alpha0", "2.7"), ("--m", "1000"), ("--n", "100000"), ("--delta", "1e-12")],
    ("account", "calibrate"): [("--alpha", "25"), ("--m", "1000"), ("--n", "100000"), ("--delta", "1e-5")],
    ("account", "reduction"): [("--epsilon", "1"), ("--r", "0.05"), ("--delta", "1e-6")],
    ("audit",): [("laplace",), ("--trials", "200"), SEED],
    ("ledger", "init"): [("new-ledger.json",), ("--budget", "replace:4")],
    ("ledger", "show"): [("ledger.json",)],
    ("datasets",): [],
}  # fmt: skip

#: ``userdp demo`` runs for ~10 s: it is only fuzzed with an ``--out`` that must fail at once.
DEMO_FAST_OUT = ["checkins.csv", "checkins.csv/sub", "empty.csv"]

# --------------------------------------------------------------------------------------------
# Input files
# --------------------------------------------------------------------------------------------

VENUES = ["Joe Pizza", "Central Park", "Blue Bar", "Corner Deli", "Met Museum", "Pier 17", "Night Owl", "Green Cafe"]
# four public clusters of two venues each (the clustered metric needs clusters of equal size)
CATEGORY = {v: ("food", "park", "bar", "food", "art", "park", "bar", "art")[i] for i, v in enumerate(VENUES)}
HEADER = "user,lat,lon,venue,category"


def _rows(users: int, per_user, seed: int = 0) -> list[str]:
    import numpy as np

    rng = np.random.default_rng(seed)
    rows = []
    for u in range(users):
        for _ in range(per_user(u)):
            v = VENUES[rng.integers(0, len(VENUES))]
            lat, lon = 40.70 + 0.05 * rng.random(), -74.0 + 0.05 * rng.random()
            rows.append(f"u{u:02d},{lat:.5f},{lon:.5f},{v},{CATEGORY[v]}")
    return rows


def _csv(rows: list[str], header: str = HEADER) -> str:
    return "\n".join([header, *rows]) + "\n"


# the states ``ledger.json`` can be in before the command runs
LEDGER_STATES = ["absent", "fresh", "spent", "exhausted", "local", "garbage", "empty", "wrong-shape", "old-format",
                 "nan-budget", "negative-entry", "list"]  # fmt: skip


def make_inputs(root: Path) -> None:
    """Write every input file that :data:`DATA_FILES`, :data:`DOMAIN_FILES` and :data:`OUT_FILES` name into
    ``root`` (small: a few milliseconds)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    valid = _csv(_rows(24, lambda u: 5))
    files: dict[str, str | bytes] = {
        "checkins.csv": valid,
        "checkins_unequal.csv": _csv(_rows(24, lambda u: 3 + u % 4, seed=1)),
        "checkins.tsv": valid.replace(",", "\t"),
        "checkins.txt": valid,
        "checkins_noext": valid,
        "checkins_noheader.txt": valid.split("\n", 1)[1].replace(",", "\t"),
        "checkins_tabs.csv": valid.replace(",", "\t"),
        "checkins_semicolons.dat": valid.replace(",", ";"),
        "empty.csv": "",
        "empty.parquet": "",
        "empty.jsonl": "",
        "empty.csv.gz": gzip.compress(b""),
        "header.csv": HEADER + "\n",
        "one.csv": _csv(["u0,40.72,-73.98,Joe Pizza,food"]),
        "badtypes.csv": _csv(["u0,north,west,Joe Pizza,food", "u1,40.72,-73.98,Blue Bar,bar", "u2,1,x,3,4"]),
        "huge.csv": _csv(
            [
                f"{'9' * 40},1e308,-1e308,{'9' * 25},food",
                f"u1,{'9' * 400},1e-320,Joe Pizza,bar",
                "u2,1.7976931348623157e308,-1.7976931348623157e308,-1,-1",
            ]
        ),  # fmt: skip
        "nonfinite.csv": _csv(["u0,nan,-73.98,Joe Pizza,food", "u1,inf,-inf,Blue Bar,bar", "u2,40.72,NaN,a,b"]),
        "unicode.csv": "usér,lät,lon,venüe,category\n"
        + "".join(f"ü{i % 3}😀,40.7{i},-73.9{i},Café {i % 2},ñ\n" for i in range(9)),
        "bom_crlf.csv": "\ufeff" + valid.replace("\n", "\r\n"),
        "latin1.csv": (HEADER + "\n").encode() + b"u\xe90,40.72,-73.98,Caf\xe9,food\nu1,40.71,-73.97,\xff\xfe,bar\n",
        "missing_columns.csv": "a,b\n1,2\n3,4\n",
        "duplicate_columns.csv": "user,user,lat,lon,lat\nu0,u1,40.72,-73.98,40.71\n",
        "ragged.csv": HEADER + "\nu0,40.72\nu1,40.72,-73.98,Joe Pizza,food,extra\n",
        "quoted.csv": _csv(['"u,0",40.72,-73.98,"Joe, ""Pizza""",food', '"u\n1",40.71,-73.97,"Blue\nBar",bar']),
        "nulls.csv": _csv([",40.72,-73.98,Joe Pizza,food", "u1,,-73.97,,bar", "u2,40.71,,Blue Bar,"]),
        "int_users.csv": _csv([f"{u},{40.70 + u / 100:.3f},-73.98,{u % 3},{u % 2}" for u in range(10)]),
        "float_users.csv": _csv([f"{u}.5,{40.70 + u / 100:.3f},-73.98,{u}.25,1.5" for u in range(10)]),
        "outside.csv": _csv(["u0,95.0,-73.98,Joe Pizza,food", "u1,40.72,200,Blue Bar,bar", "u2,-95,-400,a,b"]),
        "one_user.csv": _csv([f"u0,{40.70 + i / 1000:.4f},-73.98,{VENUES[i % 8]},food" for i in range(50)]),
        "blank_lines.csv": "\n\n" + valid.replace("\n", "\n\n"),
        "nul_bytes.csv": (HEADER + "\n").encode() + b"u\x000,40.72,-73.98,Jo\x00e,food\n",
        "nested.jsonl": '{"user": {"a": 1}, "lat": [1, 2], "lon": null, "venue": true, "category": 1}\n',
        "mixed.jsonl": '{"user": "u0", "lat": 40.7, "lon": -73.9, "venue": "a", "category": "b"}\n'
        '{"user": 1, "lat": "north", "lon": -73.9, "venue": 2, "category": "b"}\n',
        "array.json": json.dumps([{"user": "u0", "lat": 40.7, "lon": -73.9, "venue": "a", "category": "b"}]),
        "bad.jsonl": '{"user": "u0", "lat": 40.7\nnot json\n',
        "csv_text.parquet": valid,
        "corrupt.csv.gz": b"\x1f\x8b\x08\x00garbage" * 3,
        "corrupt.csv.xz": b"\xfd7zXZ\x00garbage" * 3,
        "corrupt.csv.bz2": b"BZh91AY&SYgarbage" * 3,
        "checkins.csv.gz": gzip.compress(valid.encode()),
        "checkins.csv.xz": lzma.compress(valid.encode()),
        "checkins.csv.bz2": bz2.compress(valid.encode()),
        "caf\udce9.csv": valid,
        "domain.csv": "item,cluster\n" + "".join(f"{v},{c}\n" for v, c in CATEGORY.items()),
        "domain_dup.csv": "item,cluster\n" + "".join(f"{v},{c}\n{v},other\n" for v, c in CATEGORY.items()),
        "domain_nulls.csv": "item,cluster\nJoe Pizza,\n,park\nBlue Bar,bar\n",
        "domain_one_cluster.csv": "item,cluster\n" + "".join(f"{v},all\n" for v in VENUES),
        "domain_numeric.csv": "item,cluster\n1,1\n2,1\nnan,2\ninf,2\n",
    }
    for name, content in files.items():
        path = root / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")

    lines = valid.splitlines()[1:]
    cols = list(zip(*(r.split(",") for r in lines), strict=True))
    table = pa.table({"user": cols[0], "lat": [float(x) for x in cols[1]], "lon": [float(x) for x in cols[2]],
                      "venue": cols[3], "category": cols[4]})  # fmt: skip
    pq.write_table(table, root / "checkins.parquet")
    (root / "checkins.jsonl").write_text("".join(json.dumps(r) + "\n" for r in table.to_pylist()), encoding="utf-8")
    (root / "checkins.json").write_text((root / "checkins.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    (root / "one.jsonl").write_text(json.dumps(table.slice(0, 1).to_pylist()[0]) + "\n", encoding="utf-8")
    pq.write_table(table.slice(0, 0), root / "header.parquet")
    pq.write_table(pa.table({"item": VENUES, "cluster": [CATEGORY[v] for v in VENUES]}), root / "domain.parquet")
    n = 6
    pq.write_table(
        pa.table({
            "user": pa.array([b"u0", b"u1", b"\xff", b"u0", b"u1", b""], pa.binary()),
            "lat": pa.array([40701, 40702, 40703, 40704, 40705, 40706], pa.decimal128(10, 3)),
            "lon": pa.array([-73.98] * n, pa.float32()),
            "venue": pa.array(VENUES[:n]).dictionary_encode(),
            "category": pa.array([1, 2, 3, 1, 2, 3], pa.int8()),
        }),
        root / "typed.parquet",
    )  # fmt: skip
    pq.write_table(pa.table({c: pa.array(["40.7", "x", "", "1e999", "nan", "u"]) for c in HEADER.split(",")}),
                   root / "strings.parquet")  # fmt: skip
    pq.write_table(pa.table({c: pa.nulls(4) for c in HEADER.split(",")}), root / "nulls.parquet")
    pq.write_table(
        pa.table(
            {
                "user": [["a"], ["b"]],
                "lat": [[40.7], []],
                "lon": [{"x": 1}, {"x": 2}],
                "venue": [None, "v"],
                "category": [1, 2],
            }
        ),  # fmt: skip
        root / "nested.parquet",
    )
    (root / "adir").mkdir()
    (root / "adir.csv").mkdir()
    (root / "adir.csv" / "part.csv").write_text(valid, encoding="utf-8")
    (root / "parts.parquet").mkdir()
    pq.write_table(table.slice(0, 60), root / "parts.parquet" / "part-0.parquet")
    pq.write_table(table.slice(60), root / "parts.parquet" / "part-1.parquet")
    (root / "bad_parts.parquet").mkdir()
    (root / "bad_parts.parquet" / "part-0.parquet").write_text("not parquet", encoding="utf-8")


def make_ledger(root: Path, state: str) -> None:
    """``root / "ledger.json"`` in the state ``state`` (:data:`LEDGER_STATES`), through the library's own API
    where it is a valid ledger."""
    from userdp.cli import ledger as cli_ledger
    from userdp.privacy import ApproxDP, Neighbours, PureDP, Session

    path = root / "ledger.json"
    ar = Neighbours.ADD_REMOVE_USER

    def charge(g) -> None:
        cli_ledger.charge(argparse.Namespace(ledger=str(path), command="distinct"), g, "fuzz")

    if state == "absent":
        return
    if state in ("fresh", "spent", "exhausted"):
        Session(PureDP(4.0, neighbours=Neighbours.REPLACE_USER)).save(path)
        if state != "fresh":
            charge(PureDP(2.0 if state == "exhausted" else 0.5, neighbours=ar))
        return
    if state == "local":
        Session(ApproxDP(3.0, 1e-6, Neighbours.ANY_TWO_INPUTS)).save(path)
        return
    text = {
        "garbage": "{not json",
        "empty": "",
        "wrong-shape": json.dumps({"format": "userdp-ledger/2", "budget": None, "entries": {}}),
        "old-format": json.dumps(
            {
                "format": "userdp-ledger/1",
                "entries": [],
                "budgets": [{"kind": "PureDP", "epsilon": 1.0, "delta": 0.0, "neighbours": ar.value}],
            }
        ),  # fmt: skip
        "nan-budget": '{"format": "userdp-ledger/2", "budget": {"kind": "PureDP", "epsilon": NaN, "delta": 0.0, '
        f'"neighbours": "{ar.value}"}}, "entries": []}}',
        "negative-entry": json.dumps(
            {
                "format": "userdp-ledger/2",
                "budget": {"kind": "PureDP", "epsilon": 1.0, "delta": 0.0, "neighbours": ar.value},
                "entries": [{"label": "x"}],
            }
        ),  # fmt: skip
        "list": "[1, 2, 3]",
    }[state]
    path.write_text(text, encoding="utf-8")

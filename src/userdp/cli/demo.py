"""``userdp demo`` and ``userdp datasets``: every release on the bundled real data, and the bundled data."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import ParameterError
from .common import SEED, console


def cmd_datasets(args: argparse.Namespace) -> int:
    from rich.table import Table

    from .. import datasets as D

    con = console()
    t = Table(title="Bundled datasets")
    for c in ("name", "users", "items", "kind", "source"):
        t.add_column(c)
    fs = D.foursquare_nyc()
    am = D.amazon_fashion()
    t.add_row(
        "foursquare_nyc",
        str(fs.n_users),
        str(fs.n_items),
        "(lat, lon) check-ins",
        D.ATTRIBUTION["foursquare_nyc"],
    )
    t.add_row(
        "amazon_fashion",
        str(am.n_users),
        str(am.n_items),
        "person-word pairs",
        D.ATTRIBUTION["amazon_fashion"],
    )
    con.print(t)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Every release userdp makes, on the bundled real data (see :mod:`userdp.report.demo`)."""
    from ..report.demo import run_demo

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ParameterError(f"--out {out} is a file; give a folder for the report")
    run_demo(out, args.seed, console(), compile_ahead=True)
    return 0


def add_parser(sub) -> None:
    d = sub.add_parser("demo", help="run the releases on the bundled real data")
    d.add_argument("--out", default="userdp-demo", help="output directory")
    d.add_argument("--seed", type=SEED, default=None, help="seed the noise (demonstrations only: no privacy)")
    d.set_defaults(func=cmd_demo)
    s = sub.add_parser("datasets", help="list the bundled datasets")
    s.set_defaults(func=cmd_datasets)

"""What every ``userdp`` command shares: the options of the release commands (``--engine``, ``--seed``,
``--json``, ``--ledger``), reading public numbers, and printing a release."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..engines import ENGINES
from ..errors import ParameterError
from . import ledger

SEED_WARNING = "seeded noise: for demonstrations only, no privacy"


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr)


def add_release_options(p: argparse.ArgumentParser) -> None:
    """``--engine``, ``--seed``, ``--json`` and ``--ledger``: every release command has them."""
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="memory",
        help="where the data plane runs: memory (default), chunked (bounded memory; rows grouped by user) or spark",
    )
    p.add_argument("--seed", type=int, default=None, help="seed the noise (demonstrations only: no privacy)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    ledger.add_option(p)


def floats(text: str, n: int, name: str) -> list[float]:
    """``n`` comma-separated numbers of option ``--name``."""
    try:
        vals = [float(x) for x in str(text).split(",")]
    except ValueError:
        raise ParameterError(f"--{name} needs {n} comma-separated numbers, got {text!r}") from None
    if len(vals) != n:
        raise ParameterError(f"--{name} needs {n} comma-separated numbers, got {text!r}")
    return vals


BBOX_FORM = "MINLAT,MINLON,MAXLAT,MAXLON"


def add_bbox(p: argparse.ArgumentParser, required: bool, purpose: str = "") -> None:
    """``--bbox MINLAT,MINLON,MAXLAT,MAXLON``: the one form of a public latitude/longitude box on every command."""
    p.add_argument("--bbox", required=required, metavar=BBOX_FORM, help=f"{purpose}public box, degrees, in this order")


def parse_bbox(text: str):
    """The :class:`~userdp.data.BoxDomain` of a ``--bbox`` value (its order checked, with the reason)."""
    from ..data import BoxDomain

    try:
        la0, lo0, la1, lo1 = floats(text, 4, "bbox")
    except ParameterError:
        raise ParameterError(f"--bbox needs {BBOX_FORM} (four numbers), got {text!r}") from None
    return BoxDomain.latlon(la0, la1, lo0, lo1)


def print_json(out: dict) -> None:
    print(json.dumps(out, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


def print_table(title: str, rows: dict) -> None:
    from rich.table import Table

    t = Table(title=title, show_header=False)
    t.add_column("", style="bold")
    t.add_column("")
    for k, v in rows.items():
        t.add_row(k, f"{v:.6g}" if isinstance(v, float) else str(v))
    console().print(t)


def report(args: argparse.Namespace, title: str, out: dict) -> bool:
    """Print ``out`` as JSON with ``--json`` (returns True), else as a titled table (returns False)."""
    if args.json:
        print_json(out)
        return True
    print_table(title, out)
    return False


def charge(args: argparse.Namespace, release: Any) -> None:
    """Charge ``release`` to ``--ledger`` (if given) before anything is printed or written."""
    ledger.charge(args, release.guarantee, release.mechanism)


def warn_seed(args: argparse.Namespace, out: dict | None = None) -> None:
    """With ``--seed``: a warning on standard error (and in the JSON output ``out``)."""
    if getattr(args, "seed", None) is None:
        return
    if out is not None:
        out["warning"] = SEED_WARNING
    console(stderr=True).print(f"[bold yellow]warning:[/] {SEED_WARNING}")

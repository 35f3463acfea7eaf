"""What every ``userdp`` command shares: the options of the release commands (``--engine``, ``--seed``,
``--json``, ``--ledger``), reading public numbers, and printing a release."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from typing import Any

from ..engines import ENGINES
from ..errors import ParameterError
from . import ledger

SEED_WARNING = "seeded noise: for demonstrations only, no privacy"


class OutOfRange(Exception):
    """A number outside its option's range; the parser (:class:`userdp.cli.main._Parser`) adds the option's
    name and raises :class:`~userdp.errors.ParameterError` (``userdp: error: …``, exit 2)."""


def number(kind: type, low: float, high: float, low_open: bool = False) -> Callable[[str], Any]:
    """An argparse ``type``: a finite ``kind`` (int or float) in ``[low, high]`` (``(low, high]`` with
    ``low_open``), checked before anything runs: beyond these ranges a release is meaningless and its
    calibration would overflow. Text that is not a number is argparse's usage error."""

    def parse(text: str) -> Any:
        v = kind(text)  # a ValueError: argparse's "invalid float value"
        if (isinstance(v, float) and not math.isfinite(v)) or v > high or v < low or (low_open and v == low):
            raise OutOfRange(f"must lie in {'(' if low_open else '['}{low:g}, {high:g}], got {text}")
        return v

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


EPSILON = number(float, 1e-6, 1e4)  # epsilon, alpha and alpha_0 of a release
DELTA_FLOOR = 1e-300  # below it ln(1/delta) is no longer finite; 0 (pure) is leaving --delta out


def DELTA(text: str) -> float:
    """The argparse ``type`` of ``--delta``: :func:`userdp.privacy.check_delta`'s rule (refused outside
    ``(0, 1)``, with the library's message; ``0``, a pure guarantee, is leaving the option out), checked
    before anything runs. Above :data:`userdp.privacy.DELTA_CEILING` it prints ``userdp: warning: ...`` on
    standard error, once; the release then does not warn again (:class:`~userdp.privacy.AcknowledgedDelta`)."""
    from ..privacy.params import AcknowledgedDelta, delta_problem, delta_warning

    v = float(text)  # a ValueError: argparse's "invalid float value"
    problem = delta_problem(v, allow_zero=False, floor=DELTA_FLOOR)
    if problem is not None:
        hint = " (leave --delta out for a pure guarantee, where the command offers one)" if v == 0 else ""
        raise OutOfRange(problem + hint)
    note = delta_warning(v)
    if note is not None:
        warn(note)
    return AcknowledgedDelta(v)


DELTA.__name__ = "float"  # argparse names the type in its messages


def warn(text: str) -> None:
    """A warning on standard error, as ``userdp: warning: TEXT`` (it changes nothing that is released)."""
    import sys

    print(f"userdp: warning: {text}", file=sys.stderr)


SEED = number(int, 0, 2**63 - 1)
PROBABILITY = number(float, 0.0, 1.0, low_open=True)  # a failure probability beta


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr)


def add_release_options(p: argparse.ArgumentParser) -> None:
    """``--engine``, ``--seed``, ``--json`` and ``--ledger``: every release command has them."""
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="auto",
        help="where the data plane runs: auto (default: duckdb for input files of 32 MB or more, memory below), "
        "memory, duckdb (embedded DuckDB: any row order, larger than memory, every core), chunked or spark; "
        "every engine releases the same values",
    )
    p.add_argument(
        "--memory-limit",
        default=None,
        metavar="SIZE",
        help="DuckDB's memory limit, e.g. 4GB or 50%% (past it, DuckDB spills to disk); implies the duckdb engine "
        "with --engine auto",
    )
    p.add_argument("--seed", type=SEED, default=None, help="seed the noise (demonstrations only: no privacy)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    ledger.add_option(p)


def engine_of(args: argparse.Namespace) -> Any:
    """The engine a release command asked for (``--engine``, ``--memory-limit``), checked before any data is
    read: the engine's name, or a DuckDB engine with the memory limit."""
    limit = getattr(args, "memory_limit", None)
    if limit is None:
        return args.engine
    from ..engines import get_engine

    source = getattr(args, "input", None) or getattr(args, "file", None)
    return get_engine(args.engine, source, memory_limit=limit)


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


def charge_and_write_csv(args: argparse.Namespace, release: Any, out: Any, header: list[str], rows: Any) -> None:
    """Charge ``release`` to ``--ledger`` and write ``rows`` under ``header`` to the CSV file ``out`` (if not
    ``None``): written under a temporary name first, charged, then moved into place, so that a file that
    cannot be written charges nothing and a refused charge leaves no file."""
    import csv
    import os

    tmp = None
    try:
        if out is not None:
            tmp = out.with_name(f".{out.stem}.userdp-tmp.csv")
            try:
                with open(tmp, "w", newline="", encoding="utf-8") as fh:
                    w = csv.writer(fh)
                    w.writerow(header)
                    w.writerows(rows)
            except OSError as exc:
                reason = exc.strerror or type(exc).__name__
                raise ParameterError(f"cannot write {out} ({reason}); nothing was released or charged") from None
        charge(args, release)
        if tmp is not None:
            try:
                os.replace(tmp, out)
            except OSError as exc:
                raise ParameterError(
                    f"the release was charged to the ledger but {out} could not be written "
                    f"({exc.strerror or type(exc).__name__})"
                ) from None
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def warn_seed(args: argparse.Namespace, out: dict | None = None) -> None:
    """With ``--seed``: a warning on standard error (and in the JSON output ``out``)."""
    if getattr(args, "seed", None) is None:
        return
    if out is not None:
        out["warning"] = SEED_WARNING
    console(stderr=True).print(f"[bold yellow]warning:[/] {SEED_WARNING}")

"""What every ``userdp`` command shares: the options of the release commands (``--engine``, ``--seed``,
``--json``, ``--ledger``), reading public numbers, and printing a release."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from collections.abc import Callable, Iterator
from typing import Any

from ..engines import ENGINES
from ..errors import ParameterError
from . import ledger
from .messages import WARNED, warn

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


def MAX_ITEMS(text: str) -> int | str:
    """The argparse ``type`` of the vocabulary's ``--max-items``: ``auto`` (chosen privately from the data) or a
    whole number in ``[1, 10000]``."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return number(int, 1, 10_000)(text)
    except ValueError:
        raise OutOfRange(f"must be auto or a whole number in [1, 10000], got {text}") from None


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


SEED = number(int, 0, 2**63 - 1)
PROBABILITY = number(float, 0.0, 1.0, low_open=True)  # a failure probability beta


#: Commands without a spinner: the demo has its own progress, the others finish at once or print as they go.
QUIET_COMMANDS = frozenset({"demo", "datasets", "completion", "ledger"})


@contextlib.contextmanager
def working(args: argparse.Namespace) -> Iterator[None]:
    """A transient spinner on standard error while a command reads its data and releases (a large file can
    take minutes), when standard error is a terminal: nothing in a pipe, a log or a test. What the command
    prints meanwhile is printed above it (standard output only when that is the terminal too, so ``--json >
    file`` stays byte for byte what it was), and the spinner leaves no trace."""
    command = getattr(args, "command", None)
    if command in QUIET_COMMANDS or not _isatty(sys.stderr):
        yield
        return
    from rich.console import Console
    from rich.live import Live
    from rich.spinner import Spinner

    spinner = Spinner("dots", text=f"userdp {command}: reading the data and releasing")
    with Live(
        spinner,
        console=Console(stderr=True, force_terminal=True),  # standard error is a terminal (checked above)
        transient=True,
        refresh_per_second=8,
        redirect_stdout=_isatty(sys.stdout),
        redirect_stderr=True,
    ):
        yield


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no stream, or a closed one
        return False


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
    p.add_argument(
        "--verbose",
        action="store_true",
        help="show the engines' own progress output (DuckDB's progress bar, Spark's stage bars and warnings); "
        "without it they are silent",
    )
    ledger.add_option(p)


INPUT_FORMATS = (
    "delimited text (.csv, .tsv, .txt: comma- or tab-separated, with a header line unless --no-header), Parquet "
    "(.parquet) or JSON lines (.jsonl), optionally .gz/.bz2/.xz compressed"
)


def add_input(p: argparse.ArgumentParser, dest: str = "input", what: str = "") -> None:
    """The input file of a command that reads one (positional ``dest``) and how it is laid out:
    ``--delimiter``, ``--no-header`` and ``--columns`` (:func:`source_of` turns them into a
    :class:`~userdp.data.FileSource`)."""
    p.add_argument(dest, metavar="FILE", help=f"the data: {INPUT_FORMATS}{what}")
    g = p.add_argument_group("input format (delimited text)")
    g.add_argument(
        "--delimiter",
        default=None,
        metavar="CHAR",
        help="the field separator: one ASCII character, or tab, comma, semicolon, pipe, space (default: tab for "
        "a .tsv file, and for a .csv/.txt file whose first line has more tab-separated fields than "
        "comma-separated ones; else comma); reads a file of any other suffix as delimited text",
    )
    g.add_argument(
        "--no-header",
        dest="header",
        action="store_false",
        help="the file has no header line: every line is a record (by default the first line names the "
        "fields); name its fields with --columns, else they are named 1, 2, 3, ...",
    )
    g.add_argument(
        "--columns",
        default=None,
        metavar="NAME,...",
        help="with --no-header: the names of the file's fields, in order, one per field (e.g. "
        "user,time,lat,lon,venue), used by --user, --item, --lat, ...",
    )


def source_of(args: argparse.Namespace, dest: str = "input") -> Any:
    """The input file of a command as a :class:`~userdp.data.FileSource` (``--delimiter``, ``--no-header``,
    ``--columns``), checked before any data is read: a ParameterError (``userdp: error: ...``, exit 2) for a
    delimiter that is not one ASCII character, ``--columns`` without ``--no-header``, an empty or repeated name."""
    from ..data import FileSource

    columns = getattr(args, "columns", None)
    names = None if columns is None else tuple(c.strip() for c in str(columns).split(","))
    return FileSource(getattr(args, dest), getattr(args, "delimiter", None), getattr(args, "header", True), names)


def engine_of(args: argparse.Namespace) -> Any:
    """The engine a release command asked for (``--engine``, ``--memory-limit``), checked before any data is
    read: the engine's name, or a DuckDB engine with the memory limit."""
    limit = getattr(args, "memory_limit", None)
    if limit is None:
        return args.engine
    from ..engines import get_engine

    source = source_of(args, "input" if getattr(args, "input", None) else "file")
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
    """``out`` as one line of JSON, with the command's warnings (:func:`warn`) under ``"warnings"``."""
    if WARNED:
        out = {**out, "warnings": list(WARNED)}
    print(json.dumps(out, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


#: Significant digits of a number printed in a table: released values carry noise far above the fourth digit
#: (``--json`` keeps every digit).
DIGITS = 4


def shown(v: Any, digits: int = DIGITS) -> str:
    """``v`` as a table prints it: a float (or each float of a list, tuple or array) to ``digits`` significant
    digits (``7.942``, not ``7.942379367316338``); anything else as ``str`` gives it."""
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float) or (hasattr(v, "dtype") and getattr(v, "ndim", 1) == 0 and v.dtype.kind == "f"):
        return f"{float(v):.{digits}g}"
    if isinstance(v, (list, tuple)) or (hasattr(v, "tolist") and getattr(v, "ndim", 0) >= 1):
        items = v.tolist() if hasattr(v, "tolist") else v
        return "[" + ", ".join(shown(x, digits) for x in items) + "]"
    return str(v)


def print_table(title: str, rows: dict) -> None:
    from rich.table import Table

    t = Table(title=title, show_header=False)
    t.add_column("", style="bold")
    t.add_column("")
    for k, v in rows.items():
        t.add_row(k, shown(v))
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
    ledger.charge(args, release.guarantee, release.mechanism, getattr(release, "losses", ()))


def probe_writable(*paths: Any) -> None:
    """Refuse, before any data is read, an output that cannot be written: a file is created and removed next
    to each path (a missing folder, no permission, a read-only disk). Whatever fails later, once the release
    exists, is charged (:func:`charge_and_write_csv`): whether a write fails could depend on its size, so a
    failure after the release must not be a free look at it."""
    for path in paths:
        probe = path.with_name(f".{path.stem}.userdp-tmp-probe")
        try:
            with open(probe, "w", encoding="utf-8"):
                pass
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise ParameterError(f"cannot write {path} ({reason}); nothing was released or charged") from None
        finally:
            try:
                probe.unlink(missing_ok=True)
            except OSError:  # (it was never created)
                pass


def charge_and_write_csv(args: argparse.Namespace, release: Any, out: Any, header: list[str], rows: Any) -> None:
    """Charge ``release`` to ``--ledger``, then write ``rows`` under ``header`` to the CSV file ``out`` (if not
    ``None``) under a temporary name and move it into place. The folder was probed before the data were read
    (:func:`probe_writable`); a write that fails after the charge (a full disk) says so, and is charged: its
    failure could depend on the release's size. A refused charge leaves no file."""
    import csv
    import os

    charge(args, release)
    tmp = None
    try:
        if out is not None:
            tmp = out.with_name(f".{out.stem}.userdp-tmp.csv")
            try:
                with open(tmp, "w", newline="", encoding="utf-8") as fh:
                    w = csv.writer(fh)
                    w.writerow(header)
                    w.writerows(rows)
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

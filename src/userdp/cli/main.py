"""The ``userdp`` command line: one module per command group, each parsing its options, calling a release
(:mod:`userdp.releases`) and printing or writing the result."""

from __future__ import annotations

import argparse
import sys

from .. import __version__
from ..engines import engine_progress
from ..errors import ParameterError, UserDPError
from . import account, aggregate, audit, completion, counts, dem, demo, distinct, heatmap, ledger, plan, vocabulary
from .common import OutOfRange, working
from .messages import WARNED


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option with a default shows it (unless its help already says it); examples (the epilogs) are kept
    as written."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "default" in text or not action.option_strings:
            return text
        return text + " (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        kwargs.setdefault("allow_abbrev", False)  # --eps is no --epsilon, and --r no --r-discrete
        super().__init__(*args, **kwargs)

    def _get_value(self, action: argparse.Action, arg_string: str):
        """A number outside its option's range (:func:`userdp.cli.common.number`) is a ParameterError naming
        the option: ``userdp: error: --epsilon must lie in …`` (exit 2)."""
        try:
            return super()._get_value(action, arg_string)
        except OutOfRange as exc:
            name = action.option_strings[-1] if action.option_strings else action.dest
            raise ParameterError(f"{name} {exc}") from None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="userdp", description="User-level differential privacy.")
    p.add_argument("--version", action="version", version=f"userdp {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for group in (demo, account, audit, distinct, vocabulary, counts, aggregate, dem, heatmap, ledger, plan):
        group.add_parser(sub)
    completion.add_parser(sub, build_parser)
    return p


def _check_argv(argv: list[str]) -> None:
    """Arguments must be text this program can print back (a name that is not valid UTF-8 would fail when a
    message or the ledger repeats it, possibly after a release was charged)."""
    for a in argv:
        try:
            a.encode("utf-8")
        except UnicodeEncodeError:
            shown = a.encode("utf-8", "backslashreplace").decode()
            raise ParameterError(f"argument {shown} is not valid UTF-8") from None


def _check_values(args: argparse.Namespace) -> None:
    """``--option=--`` gives argparse's empty list instead of a value (Python 3.11): refuse it as a usage
    error. Only ``--budget`` and ``--stat`` (append) take a list (``--stat``'s of values)."""
    for name, value in vars(args).items():
        if name == "stat" and isinstance(value, list) and all(isinstance(v, str) for v in value):
            continue
        if isinstance(value, list) and name not in ("budget", "budget_rho", "argv"):
            raise ParameterError(f"--{name.replace('_', '-')} needs a value")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    WARNED.clear()  # one command's warnings (main may run several times in one process)
    try:
        _check_argv(argv)
        args = build_parser().parse_args(argv)
        args.argv = argv  # recorded in the ledger with a charged release
        _check_values(args)
        ledger.check(args)  # a missing or invalid --ledger fails before any data is read
        # a spinner on a terminal's standard error while the command works; the engines' own progress output
        # only with --verbose
        with working(args), engine_progress(bool(getattr(args, "verbose", False))):
            return int(args.func(args) or 0)
    except UserDPError as exc:  # the command line reports every refusal without a traceback
        print(f"userdp: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: no traceback; what a release writes, it writes after it is complete
        print("userdp: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print(
            "userdp: error: out of memory; use smaller parameters (--resolution, --samples, --trials) "
            "or --engine duckdb with --memory-limit (such as 2GB)",
            file=sys.stderr,
        )
        return 2
    except OSError as exc:  # a file the command cannot open, read or write (a name too long, a folder, ...)
        where = f": {exc.filename}" if exc.filename else ""
        print(f"userdp: error: {exc.strerror or type(exc).__name__}{where}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""The ``userdp`` command line: one module per command group, each parsing its options, calling a release
(:mod:`userdp.releases`) and printing or writing the result."""

from __future__ import annotations

import argparse
import sys

from .. import __version__
from ..errors import UserDPError
from . import account, audit, completion, dem, demo, distinct, heatmap, ledger


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
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="userdp", description="User-level differential privacy.")
    p.add_argument("--version", action="version", version=f"userdp {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for group in (demo, account, audit, distinct, dem, heatmap, ledger):
        group.add_parser(sub)
    completion.add_parser(sub, build_parser)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    args.argv = argv  # recorded in the ledger with a charged release
    try:
        ledger.check(args)  # a missing or invalid --ledger fails before any data is read
        return int(args.func(args) or 0)
    except UserDPError as exc:  # the command line reports every refusal without a traceback
        print(f"userdp: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print("userdp: error: out of memory; use a smaller resolution or --engine chunked", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""The ``userdp`` command line: one module per command group, each parsing its options, calling a release
(:mod:`userdp.releases`) and printing or writing the result."""

from __future__ import annotations

import argparse
import sys

from .. import __version__
from ..errors import UserDPError
from . import account, audit, dem, demo, distinct, heatmap, ledger


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="userdp", description="User-level differential privacy.")
    p.add_argument("--version", action="version", version=f"userdp {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for group in (demo, account, audit, distinct, dem, heatmap, ledger):
        group.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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

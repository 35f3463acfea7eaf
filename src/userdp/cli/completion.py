"""``userdp completion bash|zsh|tcsh``: a shell-completion script generated from the command line's own parser
(with `shtab <https://github.com/iterative/shtab>`_), so it completes every subcommand, option and choice of
this version, and file names where a file is expected.

Install for bash::

    userdp completion bash > ~/.local/share/bash-completion/completions/userdp

or for zsh (a folder on ``$fpath``)::

    userdp completion zsh > ~/.zfunc/_userdp
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable

SHELLS = ("bash", "zsh", "tcsh")
# the options and positionals whose values are paths: completed as file names
_FILE_DESTS = {"input", "file", "path", "out", "domain", "ledger", "plot"}


def _mark_files(parser: argparse.ArgumentParser) -> None:
    import shtab

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _mark_files(sub)
        elif action.dest in _FILE_DESTS:
            action.complete = shtab.FILE  # type: ignore[attr-defined]


def cmd_completion(args: argparse.Namespace, build_parser: Callable[[], argparse.ArgumentParser]) -> int:
    import shtab

    parser = build_parser()
    _mark_files(parser)
    print(shtab.complete(parser, shell=args.shell), end="")
    return 0


def add_parser(sub, build_parser: Callable[[], argparse.ArgumentParser]) -> None:
    """The ``completion`` command; ``build_parser`` makes the whole command line's parser (passed in by
    :mod:`userdp.cli.main`, which imports this module)."""
    p = sub.add_parser(
        "completion",
        help="print a shell-completion script (bash, zsh or tcsh)",
        epilog="example:\n  userdp completion bash > ~/.local/share/bash-completion/completions/userdp",
    )
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(func=functools.partial(cmd_completion, build_parser=build_parser))

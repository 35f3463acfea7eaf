"""The command line's warnings: ``userdp: warning: TEXT`` on standard error, and the list ``--json`` output
repeats (:func:`userdp.cli.common.print_json`). A module of its own so that every command module can warn
without an import circle."""

from __future__ import annotations

import sys

#: The warnings this command printed; ``--json`` output lists them under ``"warnings"``.
WARNED: list[str] = []


def warn(text: str) -> None:
    """A warning on standard error, as ``userdp: warning: TEXT`` (it changes nothing that is released); also
    kept for the ``--json`` output."""
    WARNED.append(text)
    print(f"userdp: warning: {text}", file=sys.stderr)

"""What the scale benchmarks share: a measurement run in a fresh interpreter, reporting one JSON line."""

from __future__ import annotations

import json
import subprocess
import sys


def run(code: str) -> dict:
    """Run ``code`` in a fresh interpreter and return the JSON object on the last line it prints."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode:
        sys.stderr.write(out.stderr)
        raise SystemExit(f"a measurement failed (exit {out.returncode})")
    return json.loads(out.stdout.strip().splitlines()[-1])

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


_PROFILE = """
import cProfile, json, pstats, time
pr = cProfile.Profile()
t0 = time.perf_counter()
pr.enable()
CALL
pr.disable()
secs = time.perf_counter() - t0
rows = []
for (f, line, name), (cc, nc, tt, ct, _) in pstats.Stats(pr).stats.items():
    rows.append((tt, ct, nc, f"{f.split('site-packages/')[-1].split('src/')[-1]}:{line}({name})"))
rows.sort(reverse=True)
cum = sorted((r for r in rows if "userdp/" in r[3]), key=lambda r: -r[1])
print(json.dumps({"secs": secs, "top": rows[:TOP], "cum": cum[:TOP]}))
"""


def profile_code(call: str, top: int) -> str:
    """Code for a child that runs the statement ``call`` under cProfile and prints, as JSON, its time and the
    ``top`` functions by own time and the userdp functions by cumulative time (for :func:`print_profile`)."""
    return _PROFILE.replace("CALL", call).replace("TOP", str(int(top)))


def print_profile(pr: dict, title: str) -> None:
    """Print what :func:`profile_code`'s child reported."""
    print(f"cProfile of {title} ({pr['secs']:.1f} s under the profiler); own time, cumulative, calls:")
    for tt, ct, nc, name in pr["top"]:
        print(f"  {tt:7.2f} {ct:7.2f} {nc:>9} {name}")
    print("userdp functions by cumulative time:")
    for tt, ct, nc, name in pr["cum"]:
        print(f"  {tt:7.2f} {ct:7.2f} {nc:>9} {name}")

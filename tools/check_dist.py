"""Check the built sdist and wheel (``python -m build``): both carry the licence and the bundled data.

    python3 tools/check_dist.py dist/

Complements ``twine check`` (which checks the metadata and that the README renders): a wheel without
``userdp/datasets/data/*`` installs fine and then fails at ``userdp demo``.
"""

from __future__ import annotations

import sys
import tarfile
import zipfile
from pathlib import Path

DATA = ("amazon_fashion_5.json.gz", "foursquare_nyc_checkins.csv.xz")


def check(dist: Path) -> list[str]:
    problems = []
    wheels, sdists = sorted(dist.glob("userdp-*.whl")), sorted(dist.glob("userdp-*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        return [f"expected one wheel and one sdist in {dist}, found {[p.name for p in (*wheels, *sdists)]}"]
    with zipfile.ZipFile(wheels[0]) as whl:
        names = set(whl.namelist())
        metadata = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
        meta = whl.read(metadata).decode() if metadata else ""
    for f in DATA:
        if f"userdp/datasets/data/{f}" not in names:
            problems.append(f"wheel: bundled data file {f} is missing")
    if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
        problems.append("wheel: LICENSE is missing")
    if "License-Expression: Apache-2.0" not in meta:
        problems.append("wheel: METADATA has no 'License-Expression: Apache-2.0'")
    with tarfile.open(sdists[0]) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    for f in ("LICENSE", "README.md", "pyproject.toml", *(f"src/userdp/datasets/data/{f}" for f in DATA)):
        if f not in names:
            problems.append(f"sdist: {f} is missing")
    return problems


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    dist = Path(args[0] if args else "dist")
    problems = check(dist)
    for p in problems:
        print(f"PROBLEM {p}")
    print(f"check_dist: {dist}: {'ok' if not problems else f'{len(problems)} problems'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: how the releases on files in random user order scale with cores, against DuckDB's own query.

For each thread count ``t`` (``--threads``, default 2 4 8 16), every figure is measured in a fresh interpreter
(as in ``bench_engines.py``) with DuckDB limited to ``t`` threads, and printed with its *floor* — the plain
DuckDB query computing the same exact aggregate from the same file with the same ``t`` threads — and with its
speed-up over the smallest ``t``. The ratio to the floor is the figure that matters: a release whose ratio stays
flat as ``t`` grows uses the extra cores as well as DuckDB itself does.

* **heatmap**: ``--points`` points (10 per user, users in random order, Parquet); the default heatmap release
  on ``DuckDBEngine(threads=t)`` against ``GROUP BY (cell, user size)``.
* **pairs**: ``--pairs`` person-word pairs in random order; the exact distinct count (matching) and the key
  counts on ``DuckDBEngine(threads=t)`` against ``GROUP BY user, word``.

Run: ``python benchmarks/bench_scaling.py --points 1e8 --pairs 3e7`` on a machine with 16 cores (about 6
minutes); the targets (issue 33, two cores): the heatmap at most 1.5x its floor, the key counts at most 1.5x.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_engines import BOX, SETUP, measure, pairs_file, points_file  # noqa: E402

ENGINE = "\nfrom userdp.engines.duckdb import DuckDBEngine"


def _line(name: str, t: int, r: dict, floor: dict, base: dict | None) -> None:
    speed = f"{base['wall'] / r['wall']:5.2f}x" if base else "  1.00x"
    print(f"  t={t:<3d} {name:<36} {r['wall']:7.2f} s  {r['wall'] / floor['wall']:5.2f}x floor  speed-up {speed}"
          f"  cpu/wall {r['cpu'] / r['wall']:5.2f}  peak {r['peak_gb']:5.2f} GB", flush=True)  # fmt: skip


def heatmap(d: Path, n: int, threads: list[int]) -> None:
    path = points_file(d, n)
    print(f"heatmap: {n:.0e} points, users in random order", flush=True)
    first: dict[str, dict] = {}
    for t in threads:
        floor = measure("import duckdb", f"""con = duckdb.connect(config={{'threads': {t}}})
con.sql('''WITH p AS (SELECT user AS u, least(greatest(CAST(floor((lat - 40.55) / 0.44 * 256) AS BIGINT), 0), 255)
                      * 256 + least(greatest(CAST(floor((lon + 74.27) / 0.59 * 256) AS BIGINT), 0), 255) AS b
                  FROM read_parquet('{path}')),
           s AS (SELECT u, count(*) AS n FROM p GROUP BY u)
      SELECT b, n, count(*) AS k FROM p JOIN s USING (u) GROUP BY b, n''').to_arrow_table()""")
        _line("floor: GROUP BY (cell, user size)", t, floor, floor, first.get("floor"))
        first.setdefault("floor", floor)
        rel = measure(SETUP + ENGINE, f"releases.heatmap('{path}', {BOX}, 256, 1.0, engine=DuckDBEngine(threads={t}), "
                                      "rng=1)")  # fmt: skip
        _line("releases.heatmap", t, rel, floor, first.get("heatmap"))
        first.setdefault("heatmap", rel)


def pairs(d: Path, n: int, threads: list[int]) -> None:
    path = pairs_file(d, n)
    print(f"pairs: {n:.0e} person-word pairs in random order", flush=True)
    first: dict[str, dict] = {}
    for t in threads:
        floor = measure("import duckdb", f"""con = duckdb.connect(config={{'threads': {t}}})
con.sql('''SELECT user, word, count(*) AS k FROM read_parquet('{path}') GROUP BY user, word''').to_arrow_table()""")
        _line("floor: GROUP BY user, word", t, floor, floor, first.get("floor"))
        first.setdefault("floor", floor)
        eng = f"engine=DuckDBEngine(threads={t}), rng=1"
        call = f"releases.distinct('{path}', 1.0, method='matching', user='user', item='word', {eng})"
        r = measure(SETUP + ENGINE, call)
        _line("releases.distinct (matching)", t, r, floor, first.get("distinct"))
        first.setdefault("distinct", r)
        r = measure(SETUP + ENGINE, f"releases.key_counts('{path}', 1.0, 1e-6, user='user', key='word', {eng})")
        _line("releases.key_counts", t, r, floor, first.get("counts"))
        first.setdefault("counts", r)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=float, default=1e7)
    ap.add_argument("--pairs", type=float, default=1e7)
    ap.add_argument("--threads", type=int, nargs="*", default=[2, 4, 8, 16])
    ap.add_argument("--only", nargs="*", default=["heatmap", "pairs"])
    ap.add_argument("--dir", default=None, help="where the files are written (kept for the next run)")
    args = ap.parse_args()
    threads = [t for t in args.threads if t <= (os.cpu_count() or 1)] or [1]
    print(f"{os.cpu_count()} cores; DuckDB threads {threads}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(args.dir or tmp)
        d.mkdir(parents=True, exist_ok=True)
        if "heatmap" in args.only:
            heatmap(d, int(args.points), threads)
        if "pairs" in args.only:
            pairs(d, int(args.pairs), threads)


if __name__ == "__main__":
    main()

r"""Benchmark: the person-level distinct count on IMDB from the file to the release, stage by stage, as a user
runs it (``userdp distinct imdb.jsonl --user movie --item text --tokenize --epsilon 1``), with the peak memory.

Issue 17's target for the whole run is 6 s. Figures measured on the 2-core machine, seed 1 (the same release
before and after):

  | stage                          | first release | now   |
  |--------------------------------|---------------|-------|
  | read + tokenize + dataset      | 58-68 s       | 6-9 s |
  | person-word graph              | 52 s          | 0.5 s |
  | whole command (wall, peak RSS) | 69 s, 11.4 GB | 13.5-15 s, 2.0 GB |

Where the rest goes (cProfile): Python's ``re.findall`` over the reviews 2.4 s (Arrow's regex kernels use
RE2, whose ``\w`` and lower-casing differ from Python's, so the vocabulary would change), the hash passes of
the vocabulary and of the user keys 3 s, the exact count's kernel 2.5 s.

Run: python benchmarks/bench_distinct_end_to_end.py [--imdb PATH]   (a .jsonl or .jsonl.xz file)
"""

from __future__ import annotations

import argparse
import lzma
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from userdp.data import read_table
from userdp.distinct import dc_matching, person_element_graph
from userdp.engines import get_engine
from userdp.engines.base import Columns
from userdp.engines.memory import load_table

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "imdb_reviews.jsonl.xz"
TARGET_S = 6.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--imdb", default=str(SHARED))
    ap.add_argument("--runs", type=int, default=3, help="whole-command runs (the best is reported)")
    args = ap.parse_args()
    src = Path(args.imdb)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "imdb.jsonl"
        opener = lzma.open if src.suffix == ".xz" else open
        with opener(src, "rb") as fi, open(path, "wb") as fo:
            fo.write(fi.read())
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import userdp.cli.main"], check=True)
        imports = time.perf_counter() - t
        eng = get_engine("memory")
        eng.edges(eng.load(path, Columns("movie", "text", tokenize=True)))  # numba's caches loaded
        t0 = time.perf_counter()
        table = read_table(path)
        t1 = time.perf_counter()
        data = load_table(table, Columns("movie", "text", tokenize=True))
        t2 = time.perf_counter()
        graph = person_element_graph(eng.edges(data))
        t3 = time.perf_counter()
        dc_matching(graph, 100)
        t4 = time.perf_counter()
        print(f"{'stage':<36} {'seconds':>8}")
        print(f"{'python + import userdp.cli.main':<36} {imports:>8.2f}")
        print(f"{'read the JSON lines (Arrow)':<36} {t1 - t0:>8.2f}")
        sizes = f"({data.n_items:,} words, {len(data.domain):,} distinct)"
        print(f"{'tokenize + dataset':<36} {t2 - t1:>8.2f}   {sizes}")
        print(f"{'person-word graph':<36} {t3 - t2:>8.2f}   ({graph.n_edges:,} edges)")
        print(f"{'exact DC(D; l), l = 1..100':<36} {t4 - t3:>8.2f}")
        argv = ["distinct", str(path), "--user", "movie", "--item", "text", "--tokenize", "--epsilon", "1"]
        best = np.inf
        for _ in range(args.runs):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "userdp.cli.main", *argv, "--seed", "1", "--json"], check=True,
                           capture_output=True)  # fmt: skip
            best = min(best, time.perf_counter() - t)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
        print(f"{'userdp distinct, file to release':<36} {best:>8.2f}   target <= {TARGET_S:g} s; peak {peak:.2f} GB")


if __name__ == "__main__":
    main()

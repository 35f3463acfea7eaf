"""Peak memory of large releases: the chunked engine against the in-memory engine (`userdp.releases`).

* PrivEMDItemWise (central, GKRR on a 20-item clustered metric): 10^7 items = 10^5 users x m = 100, fed to
  the chunked engine as a stream of Arrow tables of 10^4 whole users (generated batch by batch, as a reader
  would deliver them), against the in-memory engine on the same 10^7 items. (Both use the per-user keyed
  streams, drawn for a whole chunk of users at once: about 5 us per user of 100 items.)
* The sparse heatmap at 256 x 256 on 2 x 10^6 and 10^7 points (10 per user) from Parquet files, read by the
  chunked engine in 250,000-row batches, against the in-memory engine.

Every case runs in a fresh interpreter and reports its peak resident set size (ru_maxrss), the baseline
being the interpreter with userdp, NumPy and numba loaded. Run: python benchmarks/bench_memory.py [--quick]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

PRELUDE = """
import resource, time, numpy as np
from userdp.data import BoxDomain, FiniteDomain, UserDataset
from userdp.dem import GKRR
from userdp.metrics import ClusteredMetric
from userdp.noise import RandomSource
import pyarrow as pa
from userdp import releases
from userdp.engines import ChunkedEngine
SPACE = ClusteredMetric(4, 5, 0.2)
DOM = FiniteDomain(np.arange(SPACE.size))
BOX = BoxDomain((0.0, 0.0), (1.0, 1.0))
g = GKRR(SPACE, 0.5)
src = RandomSource()
GKRR(SPACE, 0.5).randomize(np.zeros(10, dtype=np.int64), src)  # compile the kernels before measuring
def stream(n_users, m, per_chunk):
    def batches():
        gen = np.random.default_rng(0)
        for start in range(0, n_users, per_chunk):
            k = min(per_chunk, n_users - start)
            users = np.repeat(np.arange(start, start + k), m)
            yield pa.table({"user": users, "item": gen.integers(0, SPACE.size, k * m)})
    return batches
def report(label, t0):
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{label}\\t{time.perf_counter() - t0:.1f}\\t{rss:.0f}")
"""

CASES = {
    "baseline (imports, kernels compiled)": "t0 = time.perf_counter(); report('{label}', t0)",
    "itemwise chunked, 1e7 items": """
t0 = time.perf_counter()
rel = releases.itemwise(stream(100_000, 100, 10_000), SPACE, DOM, 50.0, delta=1e-9, model="central",
                        engine=ChunkedEngine(1_000_000))
assert rel.extras["counts"].sum() == 10**7
report('{label}', t0)
""",
    "itemwise in memory, 1e7 items": """
table = next(stream(100_000, 100, 100_000)())
t0 = time.perf_counter()
rel = releases.itemwise(table, SPACE, DOM, 50.0, delta=1e-9, model="central")
report('{label}', t0)
""",
    "heatmap chunked from Parquet, 2e6 points": """
t0 = time.perf_counter()
rel = releases.heatmap(r'{small}', BOX, 256, 1.0, user='u', engine=ChunkedEngine(250_000))
report('{label}', t0)
""",
    "heatmap chunked from Parquet, 1e7 points": """
t0 = time.perf_counter()
rel = releases.heatmap(r'{path}', BOX, 256, 1.0, user='u', engine=ChunkedEngine(250_000))
report('{label}', t0)
""",
    "heatmap in memory from Parquet, 1e7 points": """
t0 = time.perf_counter()
rel = releases.heatmap(r'{path}', BOX, 256, 1.0, user='u', engine='memory')
report('{label}', t0)
""",
}


def write_points(path: Path, n_points: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    gen = np.random.default_rng(0)
    n_users = n_points // 10
    with pq.ParquetWriter(path, pa.schema([("u", pa.int64()), ("lat", pa.float64()), ("lon", pa.float64())])) as w:
        step = 100_000
        for start in range(0, n_users, step):
            users = np.repeat(np.arange(start, start + step), 10)
            centre = gen.random((step, 2)) * 0.8 + 0.1
            pts = np.clip(np.repeat(centre, 10, axis=0) + gen.normal(0, 0.02, (users.size, 2)), 0, 1)
            w.write_table(pa.table({"u": users, "lat": pts[:, 0], "lon": pts[:, 1]}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="10x smaller inputs")
    args = ap.parse_args()
    scale = 10 if args.quick else 1
    with tempfile.TemporaryDirectory() as tmp:
        path, small = Path(tmp) / "points.parquet", Path(tmp) / "small.parquet"
        t = time.perf_counter()
        write_points(path, 10_000_000 // scale)
        write_points(small, 2_000_000 // scale)
        print(
            f"wrote {10_000_000 // scale:,} and {2_000_000 // scale:,} points to Parquet "
            f"in {time.perf_counter() - t:.1f} s"
        )
        print(f"{'case':45s} {'seconds':>8s} {'peak RSS MB':>12s}")
        for label, body in CASES.items():
            code = PRELUDE + textwrap.dedent(body).format(label=label, path=path, small=small)
            if args.quick:
                code = code.replace("100_000, 100, 10_000", "10_000, 100, 10_000").replace("10**7", "10**6")
                code = code.replace("100_000, 100, 100_000", "10_000, 100, 10_000")
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
            _, secs, rss = out.strip().splitlines()[-1].split("\t")
            print(f"{label:45s} {secs:>8s} {rss:>12s}")


if __name__ == "__main__":
    main()

"""Benchmark: the DP heatmap of 10^8 points read from Parquet through the chunked engine (issue 17).

Target (issue 17): the default heatmap release (``userdp.releases.heatmap``, algorithm ``"auto"``) of a
Parquet file of 10^8 points, grouped by user, through the chunked engine (``engine=ChunkedEngine()``), in
at most 30 s and at most 1 GB peak memory.

The file (generated with NumPy, seeded, in row groups of ``--row-group`` rows, so that generating it takes
one row group of memory; its writing is timed apart and is not part of the target): columns ``user``
(int64, ascending: the file is grouped and sorted by user), ``lat``, ``lon`` (float64) in the Foursquare NYC
box (``userdp.datasets.NYC_BOX``). ``--per-user`` points per user (default 10), or with ``--zipf A`` user sizes
from a Zipf law of exponent ``A`` capped at 10^4; each user has a home near one of 1,000 hotspots (Zipf
popularity, exponent 1.1) and scatters its points around it (0.01 degree sd), clipped to the box.

Every measurement runs in a fresh interpreter after a warm-up on a tiny in-memory table (numba's cache load
and both branches of the auto release are not counted; the warm-up's peak RSS is the baseline):

* end to end: ``releases.heatmap(path, NYC_BOX, resolution, epsilon, engine=ChunkedEngine(rows_per_chunk))``
  (``--resolution`` cells along the longer side, the CLI's default 256, cells square on the ground), its wall
  time and its interpreter's peak RSS (``ru_maxrss``) against 30 s and 1 GB (the file has just been written:
  it is read from the page cache);
* the breakdown, in another interpreter: the Parquet read alone (``pyarrow.parquet.ParquetFile.iter_batches``
  with the engine's settings, the same columns and batch size), then one pass that replays
  ``ChunkedEngine.grid_sum`` step by step with timers -- reading the batches, cutting them after their last
  whole user, building each chunk's ``UserDataset`` (``engines.memory.load_table``), the contiguity check,
  gridding (``engines.memory.grid_rows``), aggregation (``_Rows.add`` / ``_Rows.total``: the exact
  ``(cell, size)`` count tables) -- and the release (``auto_heatmap`` on the grid sum); with what the pass holds
  at its end (the users' keys kept by ``_SeenUsers``, the most count-table rows held at once and how often
  the tables were merged) and,
  with ``--trace-memory``, the peak NumPy memory (tracemalloc) of each step and the Arrow pool's largest size;
* with ``--profile``, a third interpreter runs the end-to-end call under cProfile (its time is inflated by
  the profiler) and prints the functions with the most own time.

Run: python benchmarks/bench_scale_heatmap.py [--points 1e8] [--per-user 10 | --zipf 2.1] [--resolution 256]
     [--rows-per-chunk 1000000] [--repeat 3] [--profile] [--trace-memory] [--verify] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from _measure import print_profile, profile_code, run  # benchmarks/_measure.py (run from the repo root)

TARGET_S = 30.0
TARGET_PEAK_MB = 1024.0
TARGET_POINTS = 10**8
NYC = (40.5, 41.0, -74.3, -73.65)  # userdp.datasets.NYC_BOX: lat_min, lat_max, lon_min, lon_max


# --------------------------------------------------------------------------------------------
# The file
# --------------------------------------------------------------------------------------------


def write_points(path: Path, n_points: int, per_user: int, zipf: float | None, row_group: int, seed: int) -> dict:
    """Write ``n_points`` rows ``(user, lat, lon)`` grouped and sorted by user, one row group at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    gen = np.random.default_rng(seed)
    lat0, lat1, lon0, lon1 = NYC
    n_hot = 1000
    hot = np.column_stack([gen.uniform(lat0 + 0.05, lat1 - 0.05, n_hot), gen.uniform(lon0 + 0.05, lon1 - 0.05, n_hot)])
    w = 1.0 / np.arange(1, n_hot + 1) ** 1.1
    w /= w.sum()
    schema = pa.schema([("user", pa.int64()), ("lat", pa.float64()), ("lon", pa.float64())])
    next_user, written, largest = 0, 0, 0
    with pq.ParquetWriter(path, schema) as writer:
        while written < n_points:
            rows = min(row_group, n_points - written)
            if zipf is None:
                sizes = np.full(-(-rows // per_user), per_user, dtype=np.int64)
            else:
                sizes = np.minimum(gen.zipf(zipf, rows), 10_000)  # at least rows users' worth: always enough
                sizes = sizes[: int(np.searchsorted(np.cumsum(sizes), rows)) + 1]
            sizes[-1] -= int(sizes.sum()) - rows  # the block ends with a (possibly shortened) whole user
            largest = max(largest, int(sizes.max()))
            k = sizes.size
            users = np.repeat(np.arange(next_user, next_user + k, dtype=np.int64), sizes)
            home = hot[gen.choice(n_hot, k, p=w)] + gen.normal(0.0, 0.01, (k, 2))
            pts = np.repeat(home, sizes, axis=0) + gen.normal(0.0, 0.01, (rows, 2))
            np.clip(pts[:, 0], lat0, lat1, out=pts[:, 0])
            np.clip(pts[:, 1], lon0, lon1, out=pts[:, 1])
            writer.write_table(pa.table({"user": users, "lat": pts[:, 0], "lon": pts[:, 1]}, schema=schema))
            next_user += k
            written += rows
    return {"users": next_user, "largest": largest}


# --------------------------------------------------------------------------------------------
# The measurements (each in a fresh interpreter)
# --------------------------------------------------------------------------------------------

PRELUDE = """
import json, resource, time
import numpy as np
import pyarrow as pa
from userdp import releases
from userdp.datasets import NYC_BOX
from userdp.engines import ChunkedEngine
PATH, RES, EPS, ROWS = {path!r}, {resolution}, {epsilon}, {rows}
def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t0 = time.perf_counter()
_g = np.random.default_rng(1)
_tiny = pa.table({{"user": np.repeat(np.arange(200), 5), "lat": _g.uniform(40.6, 40.9, 1000),
                  "lon": _g.uniform(-74.2, -73.7, 1000)}})
for _n in (1, 10**6):  # both branches of the auto release (coarse grid, PrivTree-EMD)
    releases.heatmap(_tiny, NYC_BOX, RES, EPS, n_public=_n, engine=ChunkedEngine(300))
WARM_S, BASE_MB = time.perf_counter() - t0, rss_mb()
"""

END_TO_END = """
t0 = time.perf_counter()
rel = releases.heatmap(PATH, NYC_BOX, RES, EPS, engine=ChunkedEngine(ROWS))
secs = time.perf_counter() - t0
print(json.dumps({"warm_s": WARM_S, "base_mb": BASE_MB, "secs": secs, "peak_mb": rss_mb(),
                  "branch": rel.params.get("branch"), "shape": rel.params["shape"]}))
"""

STAGES = """
import pyarrow.parquet as pq
from userdp.engines import memory
from userdp.engines.base import Columns
from userdp.engines.chunked import _Rows, _SeenUsers
from userdp.heatmaps import auto_heatmap
from userdp.releases.heatmap import grid_of
box, shape = grid_of(NYC_BOX, RES)
out = {{"warm_s": WARM_S, "base_mb": BASE_MB}}
TRACE, M = {trace}, {{}}
if TRACE:  # NumPy's buffers are traced; Arrow's pool is read apart
    import tracemalloc
    tracemalloc.start()
def mem(k):
    if TRACE:
        M[k] = max(M.get(k, 0), tracemalloc.get_traced_memory()[1] / 2**20)
        M["arrow pool"] = max(M.get("arrow pool", 0), pa.total_allocated_bytes() / 2**20)
        tracemalloc.reset_peak()

t0 = time.perf_counter()  # the Parquet read alone: the engine's reader settings, columns and batch size
pf = pq.ParquetFile(PATH, pre_buffer=False, buffer_size=1 << 20)
n = 0
for b in pf.iter_batches(batch_size=ROWS, columns=["user", "lat", "lon"], use_threads=False):
    n += b.num_rows
out["read"] = time.perf_counter() - t0
out["rows"] = n

# ChunkedEngine.grid_sum replayed step by step (chunked.iter_user_chunks, memory.grid_rows, _Rows)
T = dict.fromkeys(["read", "cut", "load", "seen", "grid", "aggregate", "release"], 0.0)
cols = Columns("user", points=("lat", "lon"))
pf = pq.ParquetFile(PATH, pre_buffer=False, buffer_size=1 << 20)
batches = pf.iter_batches(batch_size=ROWS, columns=cols.names, use_threads=False)
class Rows(_Rows):  # _Rows, recording its merges and the most rows it holds (running table and tables waiting)
    held, merges = 0, 0
    def _merge(self):
        self.held = max(self.held, self.size + self.pending)
        self.merges += bool(self.waiting)
        super()._merge()
rows, seen, carry, chunks, users = Rows(), _SeenUsers(), None, 0, 0
def step(t):
    ds = memory.load_table(t, cols, None)  # the heatmap release loads without a domain: the grid pass checks the box
    t1 = time.perf_counter(); T["load"] += t1 - t0_
    mem("load")
    t1 = time.perf_counter()
    seen.add(ds.user_ids)
    t2 = time.perf_counter(); T["seen"] += t2 - t1
    mem("seen")
    t2 = time.perf_counter()
    r = memory.grid_rows(ds, shape, box, False)
    t3 = time.perf_counter(); T["grid"] += t3 - t2
    mem("grid")
    t3 = time.perf_counter()
    rows.add(*r)
    T["aggregate"] += time.perf_counter() - t3
    del r
    mem("aggregate")
    return ds.n_users
t_all = time.perf_counter()
while True:
    t0_ = time.perf_counter()
    b = next(batches, None)
    t1_ = time.perf_counter(); T["read"] += t1_ - t0_
    if b is None:
        break
    mem("read")
    t1_ = time.perf_counter()
    t = pa.Table.from_batches([b])
    if carry is not None:
        t = pa.concat_tables([carry, t])
    u = t.column("user").to_numpy(zero_copy_only=False)
    other = np.flatnonzero(u != u[-1])
    start = int(other[-1]) + 1 if other.size else 0
    carry = t.slice(start)
    t0_ = time.perf_counter(); T["cut"] += t0_ - t1_
    mem("cut")
    t0_ = time.perf_counter()
    if start > 0:
        users += step(t.slice(0, start)); chunks += 1
if carry is not None and carry.num_rows:
    t0_ = time.perf_counter()
    users += step(carry); chunks += 1
t0_ = time.perf_counter()
s = rows.total(shape[0] * shape[1]).reshape(shape)
t1_ = time.perf_counter(); T["aggregate"] += t1_ - t0_
rel = auto_heatmap(s, EPS)
T["release"] = time.perf_counter() - t1_
out["pass"] = time.perf_counter() - t_all
assert abs(s.sum() - users) < 1e-6 * users, "the grid sum must hold one unit of mass per user"
if {verify}:
    t0_ = time.perf_counter()
    ref = ChunkedEngine(ROWS).grid_sum(ChunkedEngine(ROWS).load(PATH, cols), box, shape)
    assert np.array_equal(ref, s), "the replay must give the engine's grid sum"
    out["verify_s"] = time.perf_counter() - t0_
mem("release")
out.update(stages=T, chunks=chunks, users=users, peak_mb=rss_mb(), branch=rel.params.get("branch"), mem=M,
           seen_mb=seen.nbytes / 2**20, merges=rows.merges, held=rows.held)
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=float, default=TARGET_POINTS, help="rows of the file (default 1e8)")
    ap.add_argument("--per-user", type=int, default=10, help="points per user (default 10)")
    ap.add_argument("--zipf", type=float, default=None, help="user sizes from a Zipf law of this exponent (> 1)")
    ap.add_argument("--resolution", type=int, default=256, help="cells along the longer side (CLI default 256)")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--rows-per-chunk", type=int, default=None, help="ChunkedEngine's batch (default its own)")
    ap.add_argument("--row-group", type=int, default=1_000_000, help="rows per Parquet row group when writing")
    ap.add_argument("--profile", action="store_true", help="also run the release under cProfile")
    ap.add_argument("--top", type=int, default=25, help="functions listed by --profile")
    ap.add_argument(
        "--trace-memory", action="store_true", help="peak traced NumPy memory per step (slower; timings inflated)"
    )
    ap.add_argument("--verify", action="store_true", help="check the step-by-step replay against the engine")
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where the temporary Parquet file goes")
    ap.add_argument("--repeat", type=int, default=1, help="end-to-end runs (the fastest is reported)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from userdp.engines.chunked import ROWS_PER_CHUNK

    n_points = int(args.points)
    rows = args.rows_per_chunk or ROWS_PER_CHUNK
    sizes = f"Zipf({args.zipf:g}) points per user" if args.zipf else f"{args.per_user} points per user"
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench_scale_heatmap_") as tmp:
        path = Path(tmp) / "points.parquet"
        t = time.perf_counter()
        info = write_points(path, n_points, args.per_user, args.zipf, args.row_group, args.seed)
        t_write = time.perf_counter() - t
        mb = os.path.getsize(path) / 2**20
        print(
            f"file: {n_points:,} points, {info['users']:,} users ({sizes}, largest {info['largest']:,}), "
            f"{mb:,.0f} MB Parquet, written in {t_write:.1f} s (not part of the target)"
        )
        fmt = dict(path=str(path), resolution=args.resolution, epsilon=args.epsilon, rows=rows)
        load = os.getloadavg()[0]  # a shared machine: the load before the measurements, printed with them
        runs = [run(PRELUDE.format(**fmt) + END_TO_END) for _ in range(args.repeat)]  # each in a fresh interpreter
        e2e = min(runs, key=lambda r: r["secs"])  # the fastest run; all are printed with --repeat
        e2e["peak_mb"] = max(r["peak_mb"] for r in runs)
        print(
            f"warm-up (imports, kernels) {e2e['warm_s']:.1f} s, baseline peak RSS {e2e['base_mb']:.0f} MB; "
            f"grid {e2e['shape'][0]} x {e2e['shape'][1]}, ChunkedEngine({rows:,}), auto branch {e2e['branch']}; "
            f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after (2 cores, shared)"
        )
        scale = TARGET_POINTS / n_points
        print(f"{'':34s} {'measured':>10s} {'x' + format(scale, 'g') + ' (linear)':>16s} {'target':>8s}")
        print(f"{'end to end, seconds':34s} {e2e['secs']:10.2f} {e2e['secs'] * scale:16.1f} {TARGET_S:8.0f}")
        print(f"{'peak RSS, MB':34s} {e2e['peak_mb']:10.0f} {'':>16s} {TARGET_PEAK_MB:8.0f}")
        print(f"{'points per second':34s} {n_points / e2e['secs']:10.3g}")
        if args.repeat > 1:
            print(
                f"{'all runs, seconds (peak RSS MB)':34s} "
                + ", ".join(f"{r['secs']:.2f} ({r['peak_mb']:.0f})" for r in runs)
            )

        st = run(PRELUDE.format(**fmt) + STAGES.format(verify=bool(args.verify), trace=bool(args.trace_memory)))
        T = st["stages"]
        total = sum(T.values())
        print(
            f"breakdown (one replayed pass: {st['chunks']} chunks, {st['users']:,} users; peak RSS "
            f"{st['peak_mb']:.0f} MB"
            + (f"; replay = engine, checked in {st['verify_s']:.1f} s" if args.verify else "")
            + ")"
        )
        print(f"  {'Parquet read alone (pyarrow)':44s} {st['read']:8.2f} s")
        names = {
            "read": "read batches (ParquetFile.iter_batches)",
            "cut": "cut after the last whole user (Arrow)",
            "load": "UserDataset per chunk (memory.load_table)",
            "seen": "contiguity check (_SeenUsers.add)",
            "grid": "gridding (memory.grid_rows)",
            "aggregate": "aggregation (_Rows.add, _Rows.total)",
            "release": "release (auto_heatmap)",
        }
        for k, label in names.items():
            print(f"  {label:44s} {T[k]:8.2f} s {100 * T[k] / total:5.1f}%")
        print(f"  {'total of the steps':44s} {total:8.2f} s (pass wall {st['pass']:.2f} s)")
        print(
            f"  held at the end: the users' keys for the contiguity check {st['seen_mb']:.1f} MB; the (cell, size) "
            f"count tables at most {st['held']:,} rows ({st['held'] * 16 / 2**20:.0f} MB), merged {st['merges']} times"
        )
        if args.trace_memory:
            print("  peak traced NumPy memory (tracemalloc) in each step, MB, and the Arrow pool's largest:")
            print("    " + ", ".join(f"{k} {v:.0f}" for k, v in st["mem"].items()))
        if args.profile:
            call = "releases.heatmap(PATH, NYC_BOX, RES, EPS, engine=ChunkedEngine(ROWS))"
            pr = run(PRELUDE.format(**fmt) + profile_code(call, args.top))
            print_profile(pr, "the end-to-end call")


if __name__ == "__main__":
    main()

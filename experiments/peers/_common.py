"""Shared by ``experiments/aggregates_peers.py`` and the peers' scripts in this folder (pandas and NumPy only,
so that it runs in the peers' own virtual environments).

The prepared tasks are CSV files ``<cache>/<task>.csv`` with the columns ``user``, ``key`` (text) and ``value``;
the job is ``<cache>/job.json`` (written by ``experiments/aggregates_peers.py``): the tasks, their public keys
(every key of the data, sorted), the known value range, the statistics, the epsilons, the number of runs and the
bounds of each setting.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

STATS = ("count", "sum", "mean", "variance", "median")
FIELDS = ["dataset", "statistic", "epsilon", "library", "setting", "run", "mae", "median_ae", "l0", "linf",
          "lo", "hi", "seconds"]  # fmt: skip


def load_job(cache: Path) -> dict:
    return json.loads((Path(cache) / "job.json").read_text())


def load_task(cache: Path, task: str) -> pd.DataFrame:
    return pd.read_csv(Path(cache) / f"{task}.csv", dtype={"user": str, "key": str, "value": float})


def truth(df: pd.DataFrame, keys: list[str]) -> dict[str, np.ndarray]:
    """The non-private statistics of every row (no bound, no clipping), per public key, in ``keys``' order."""
    g = df.groupby("key")["value"]
    out = {"count": g.size(), "sum": g.sum(), "mean": g.mean(), "variance": g.var(ddof=0), "median": g.median()}
    return {s: v.reindex(keys).to_numpy(dtype=float) for s, v in out.items()}


def post(stat: str, est: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """The same public post-processing for every library: counts at least 0, means and medians in the clipping
    range, variances in ``[0, (hi - lo)^2 / 4]``; a missing or infinite estimate (a noisy count at 0) reads as
    the range's middle (means, medians), 0 (counts, sums) or ``(hi - lo)^2 / 8`` (variances)."""
    est = np.asarray(est, dtype=float).copy()
    bad = ~np.isfinite(est)
    if stat in ("count", "sum"):
        est[bad] = 0.0
        return np.maximum(est, 0.0) if stat == "count" else est
    if stat == "variance":
        est[bad] = (hi - lo) ** 2 / 8
        return np.clip(est, 0.0, (hi - lo) ** 2 / 4)
    est[bad] = (lo + hi) / 2
    return np.clip(est, lo, hi)


def errors(est: np.ndarray, true: np.ndarray) -> tuple[float, float]:
    """The mean and the median over the public keys of the absolute error."""
    err = np.abs(np.asarray(est, dtype=float) - true)
    return float(err.mean()), float(np.median(err))


def runs_for(job: dict, spec: dict, stat: str, library: str) -> int:
    """The runs of one (task, statistic, library): the job's, fewer for PipelineDP and Tumult on the large tasks
    (``peer_runs``) and for every library on a slow statistic (``stat_runs``)."""
    n = int(job["runs"])
    if library in ("PipelineDP", "Tumult"):
        n = min(n, int(spec["peer_runs"]))
    return min(n, int(spec.get("stat_runs", {}).get(stat, n)))

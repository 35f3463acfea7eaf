"""The DP heatmap release (Ghazi et al., AAAI 2023): a table of user locations -> a heatmap.

The engine computes ``s = sum_i p_i`` on the grid of a public box (each user's points as a distribution);
the mechanism -- sparse EMD aggregation (Algorithms 1 and 2, :func:`userdp.heatmaps.dp_sparse_emd_agg`) or
a baseline -- adds noise, selects and reconstructs on the driver, once. Guarantee: ``epsilon``-DP under
adding or removing one user.
"""

from __future__ import annotations

from typing import Any

from ..data import BoxDomain
from ..engines import Columns, Engine, get_engine
from ..engines.base import check_grid
from ..errors import ParameterError
from ..heatmaps import dense_emd_agg, dp_sparse_emd_agg, laplace_heatmap
from ..noise import RngLike, resolve_rng
from ..privacy.result import Release

__all__ = ["heatmap", "ALGORITHMS"]

ALGORITHMS = ("sparse", "dense", "laplace", "threshold")


def heatmap(
    source: Any,
    box: BoxDomain,
    side: int,
    epsilon: float,
    algorithm: str = "sparse",
    *,
    user: str = "user",
    lat: str = "lat",
    lon: str = "lon",
    drop_outside: bool = False,
    w: int = 20,
    top_percent: float = 1.0,
    coarse_side: int | None = None,
    engine: Engine | str | None = None,
    rng: RngLike = None,
) -> Release:
    """A DP heatmap of the ``(lat, lon)`` points of a table.

    Parameters
    ----------
    source:
        A path (CSV, Parquet, JSON lines), an Arrow table, a pandas or polars frame, a Spark DataFrame
        (``engine="spark"``) or a :class:`~userdp.data.UserDataset` of points.
    box, side:
        The public box and the grid's cells per side (a power of two).
    epsilon:
        The privacy parameter (add/remove one user).
    algorithm:
        ``"sparse"`` (sparse EMD aggregation, keeping ``w`` cells per level), ``"dense"`` (dense EMD
        aggregation on a public coarse grid of ``coarse_side`` cells a side, default ``side // 8``),
        ``"laplace"`` (Laplace noise on every cell) or ``"threshold"`` (Laplace, the ``top_percent``% largest
        cells kept).
    drop_outside:
        Drop points outside the box (how many is not reported) instead of refusing the table.
    engine:
        ``"memory"`` (default), ``"chunked"``, ``"spark"`` or an :class:`~userdp.engines.Engine`.
    rng:
        ``None`` (the OS CSPRNG) or a seed (reproducible: demonstrations only, no privacy).
    """
    if algorithm not in ALGORITHMS:
        raise ParameterError(f"unknown heatmap algorithm {algorithm!r}; use one of {', '.join(ALGORITHMS)}")
    check_grid(box, side)  # public parameters first: nothing is read for a release that cannot be made
    eng = get_engine(engine)
    data = eng.load(source, Columns(user, points=(lat, lon)))
    s = eng.grid_sum(data, box, side, drop_outside)
    src = resolve_rng(rng)
    if algorithm == "sparse":
        return dp_sparse_emd_agg(s, epsilon, w=w, rng=src)
    if algorithm == "laplace":
        return laplace_heatmap(s, epsilon, rng=src)
    if algorithm == "threshold":
        return laplace_heatmap(s, epsilon, top_percent=top_percent, rng=src)
    return dense_emd_agg(s, epsilon, coarse_side or max(1, side // 8), rng=src)

"""Table-level releases that run on any engine: the same mechanisms and guarantees on a local
:class:`~userdp.data.UserDataset` or on a Spark DataFrame (``engine="spark"`` or a
:class:`~userdp.engines.spark.SparkEngine`).

The engine computes the deterministic aggregate on the data's side (a grid sum, the edge list, per-user
query values); the mechanism adds noise, selects and reconstructs on the driver, once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from .data import BoxDomain, UserDataset
from .engines import get_engine
from .errors import DataError
from .noise import RngLike
from .privacy.guarantees import Model
from .release import Release

__all__ = ["heatmap", "distinct", "linear_mean"]


def _spark(engine):
    from .engines.spark import SparkEngine

    eng = get_engine(engine) if engine is not None else None
    return eng if isinstance(eng, SparkEngine) else None


def heatmap(
    data: Any,
    box: BoxDomain,
    side: int,
    epsilon: float,
    algorithm: str = "sparse",
    user: str = "user",
    lat: str = "lat",
    lon: str = "lon",
    drop_outside: bool = False,
    engine=None,
    rng: RngLike = None,
    **kwargs,
) -> Release:
    """A DP heatmap (``algorithm`` in ``sparse``, ``dense``, ``laplace``, ``threshold``) of a UserDataset of
    (lat, lon) points, of an iterable of UserDataset chunks of whole users (e.g.
    :func:`userdp.streaming.iter_user_chunks`, bounded memory) or of a Spark DataFrame with ``user``,
    ``lat``, ``lon`` columns."""
    from .heatmaps import dense_emd_agg, dp_sparse_emd_agg, laplace_heatmap, user_grid_sum

    sp = _spark(engine)
    if sp is not None:
        s = sp.grid_sum(data, user, lat, lon, box, side, drop_outside)
    elif isinstance(data, UserDataset):
        s = user_grid_sum(data, side, box, drop_outside)
    elif isinstance(data, Iterable) and not isinstance(data, (str, bytes, dict)):
        from .streaming import grid_sum_chunks

        s = grid_sum_chunks(data, side, box, drop_outside)  # chunks of whole users, bounded memory
    else:
        raise DataError(
            "pass a UserDataset, an iterable of UserDataset chunks, or a Spark DataFrame with engine='spark'"
        )
    if algorithm == "sparse":
        return dp_sparse_emd_agg(s, epsilon, rng=rng, **kwargs)
    if algorithm == "laplace":
        return laplace_heatmap(s, epsilon, rng=rng)
    if algorithm == "threshold":
        return laplace_heatmap(s, epsilon, top_percent=kwargs.get("top_percent", 1.0), rng=rng)
    if algorithm == "dense":
        return dense_emd_agg(s, epsilon, kwargs.get("coarse_side", max(1, side // 8)), rng=rng)
    raise DataError(f"unknown heatmap algorithm {algorithm!r}")


def distinct(
    data: Any,
    epsilon: float,
    beta: float = 0.05,
    l_max: int = 100,
    method: str = "matching",
    user: str = "user",
    item: str = "item",
    engine=None,
    rng: RngLike = None,
) -> Release:
    """Person-level DP distinct count of a UserDataset or of a Spark DataFrame (``user``, ``item``): on Spark
    the deduplicated edges are computed on the executors and the flow runs on the driver."""
    from .distinct import distinct_count

    sp = _spark(engine)
    if sp is not None:
        return distinct_count(sp.edges(data, user, item), epsilon, beta, l_max, method, rng=rng)
    return distinct_count(data, epsilon, beta, l_max, method, rng=rng)


def linear_mean(
    data: Any,
    values: list[str] | np.ndarray,
    lipschitz: float,
    alpha: float,
    model: Model | str = Model.LOCAL,
    user: str = "user",
    delta: float | None = None,
    engine=None,
    rng: RngLike = None,
) -> Release:
    """PrivEMDLinear on precomputed item values: on Spark, ``values`` names the DataFrame's value columns
    (``f(x)`` already evaluated per record, e.g. a distance), and the executors compute per-user means; for a
    UserDataset, ``values`` is an array with one row per item."""
    from .dem import priv_emd_linear

    sp = _spark(engine)
    if sp is not None:
        if Model(model) is Model.CENTRAL:
            sp.require_equal_sizes(data, user)
        means = sp.per_user_mean(data, user, list(values))
        ds = UserDataset(np.arange(means.shape[0] + 1), means, None, None)  # one "item" per user: its mean
        return priv_emd_linear(ds, lipschitz, alpha, f_points=lambda x: x, model=model, delta=delta, rng=rng)
    vals = np.asarray(values, dtype=np.float64)
    return priv_emd_linear(data, lipschitz, alpha, f_points=lambda x, v=vals: v, model=model, delta=delta, rng=rng)

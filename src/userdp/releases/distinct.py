"""The person-level DP distinct count release (Knop & Steinke, NeurIPS 2023, Algorithm 1): a table of
(person, element) records -> a lower bound on the number of distinct elements.

The engine computes the deduplicated person-element edges; the flow (``DC(D; l)`` for every ``l``), the
selection of ``l`` and the shifted Laplace count run on the driver (:func:`userdp.distinct.distinct_count`).
With ``method="bucketed"`` (the default on the Spark engine), the counts are summed over public buckets of
elements, each counted on an executor (:func:`userdp.distinct.counting.dc_bucketed`), and only the sums reach
the driver.
Guarantee: ``epsilon``-DP under adding or removing one person (all of their records).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from ..distinct import distinct_count
from ..distinct.counting import bucket_count, element_buckets, person_shares
from ..distinct.release import check_parameters
from ..engines import Columns, Engine, get_engine
from ..noise import RngLike, resolve_rng
from ..privacy.result import Release

__all__ = ["distinct"]


def distinct(
    source: Any,
    epsilon: float,
    *,
    user: str = "user",
    item: str = "item",
    tokenize: bool = False,
    beta: float = 0.05,
    l_max: int = 100,
    method: str | None = None,
    engine: Engine | str | None = None,
    rng: RngLike = None,
    n_buckets: int = 16,
    selection: str = "exponential",
) -> Release:
    """Person-level ``epsilon``-DP lower bound on the number of distinct ``item`` values of a table.

    Parameters
    ----------
    source:
        A path, a :class:`~userdp.data.FileSource` (a headerless or tab-separated file), an Arrow table, a
        pandas or polars frame, a Spark DataFrame (``engine="spark"``) or a
        :class:`~userdp.data.UserDataset`.
    tokenize:
        The item column is text; the elements are its lower-cased words (:func:`userdp.data.tokenize`).
    beta, l_max, method, n_buckets, selection:
        As in :func:`userdp.distinct.distinct_count`: the released value is a lower bound with probability at
        least ``1 - beta``; ``l_max`` is the largest contribution bound tried. ``method="bucketed"`` splits
        the elements into ``n_buckets`` public buckets; on the Spark engine every bucket is then counted on
        the executors and the edge list never reaches the driver. ``None`` (the default): ``"bucketed"`` on
        Spark, ``"matching"`` (exact) on the other engines. The exact count on Spark (``"matching"``, asked for
        explicitly) collects the deduplicated edges on the driver; nothing is refused for their number.
    engine, rng:
        As in :func:`userdp.releases.heatmap`.
    """
    eng = get_engine(engine, source)
    if method is None:  # on Spark the count runs on the executors unless the exact driver-side count is asked for
        method = "bucketed" if eng.name == "spark" else "matching"
    check_parameters(epsilon, beta, l_max, method, n_buckets=n_buckets, selection=selection)
    l_max, n_buckets = int(l_max), int(n_buckets)
    data = eng.load(source, Columns(user, item, tokenize=tokenize))
    if method == "bucketed" and hasattr(eng, "bucket_sums"):  # the buckets counted where the data is
        counts = eng.bucket_sums(
            data,
            n_buckets,
            partial(element_buckets, n_buckets=n_buckets),
            partial(person_shares, n_buckets=n_buckets, l_max=l_max),
            partial(bucket_count, l_max=l_max),
            l_max,
        )
        return distinct_count(None, epsilon, beta, l_max, method, rng=resolve_rng(rng), n_buckets=n_buckets,
                              counts=counts, selection=selection)  # fmt: skip
    graph = eng.edges(data)
    return distinct_count(graph, epsilon, beta, l_max, method, rng=resolve_rng(rng), n_buckets=n_buckets,
                          selection=selection)  # fmt: skip

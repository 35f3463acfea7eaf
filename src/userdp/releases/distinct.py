"""The person-level DP distinct count release (Knop & Steinke, NeurIPS 2023, Algorithm 1): a table of
(person, element) records -> a lower bound on the number of distinct elements.

The engine computes the deduplicated person-element edges; the flow (``DC(D; l)`` for every ``l``), the
selection of ``l`` and the shifted Laplace count run on the driver (:func:`userdp.distinct.distinct_count`).
Guarantee: ``epsilon``-DP under adding or removing one person (all of their records).
"""

from __future__ import annotations

from typing import Any

from ..distinct import distinct_count
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
    method: str = "matching",
    engine: Engine | str | None = None,
    rng: RngLike = None,
) -> Release:
    """Person-level ``epsilon``-DP lower bound on the number of distinct ``item`` values of a table.

    Parameters
    ----------
    source:
        A path, an Arrow table, a pandas or polars frame, a Spark DataFrame (``engine="spark"``) or a
        :class:`~userdp.data.UserDataset`.
    tokenize:
        The item column is text; the elements are its lower-cased words (:func:`userdp.data.tokenize`).
    beta, l_max, method:
        As in :func:`userdp.distinct.distinct_count`: the released value is a lower bound with probability at
        least ``1 - beta``; ``l_max`` is the largest contribution bound tried.
    engine, rng:
        As in :func:`userdp.releases.heatmap`.
    """
    check_parameters(epsilon, beta, l_max, method)
    eng = get_engine(engine)
    graph = eng.edges(eng.load(source, Columns(user, item, tokenize=tokenize)))
    return distinct_count(graph, epsilon, beta, l_max, method, rng=resolve_rng(rng))

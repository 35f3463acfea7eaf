"""The private vocabulary release: a table of (person, item) records -> the items many persons hold, and a
noisy person count of each (:func:`userdp.vocabulary.private_vocabulary`; Gopi et al., ICML 2020).

The engine deduplicates the person-item records (the same edges as the distinct count); bounding, the
weighted (or policy) histogram, the threshold and the counts run on the driver. Guarantee: ``(epsilon, delta)``-DP for
adding or removing one person (all of their records). The items' labels are read off the data; only the
released ones leave.
"""

from __future__ import annotations

from typing import Any

from ..engines import Columns, Engine, get_engine
from ..noise import RngLike, resolve_rng
from ..privacy.result import Release
from ..vocabulary import plan_vocabulary, private_vocabulary

__all__ = ["vocabulary"]


def vocabulary(
    source: Any,
    epsilon: float,
    delta: float,
    *,
    user: str = "user",
    item: str = "item",
    tokenize: bool = False,
    max_items: int = 100,
    noise: str = "gaussian",
    policy: bool = False,
    count_fraction: float = 0.5,
    engine: Engine | str | None = None,
    rng: RngLike = None,
) -> Release:
    """Person-level ``(epsilon, delta)``-DP set of the ``item`` values many persons hold, with noisy counts.

    Parameters
    ----------
    source:
        A path, an Arrow table, a pandas or polars frame, a Spark DataFrame (``engine="spark"``) or a
        :class:`~userdp.data.UserDataset`.
    tokenize:
        The item column is text; the items are its lower-cased words (:func:`userdp.data.tokenize`).
    max_items, noise, policy, count_fraction:
        As in :func:`userdp.vocabulary.private_vocabulary`.
    engine, rng:
        As in :func:`userdp.releases.heatmap`.
    """
    plan_vocabulary(epsilon, delta, max_items, noise, policy, count_fraction)  # every refusal before the data is read
    eng = get_engine(engine)
    sets = eng.edges(eng.load(source, Columns(user, item, tokenize=tokenize)))
    return private_vocabulary(
        sets.offsets,
        sets.items,
        sets.domain.labels,
        epsilon,
        delta,
        max_items=max_items,
        noise=noise,
        policy=policy,
        count_fraction=count_fraction,
        rng=resolve_rng(rng),
    )

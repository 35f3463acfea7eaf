"""The per-key counts release: a table of (person, key) records -> noisy records per key, with the
contribution bounds (keys per person ``L0``, records per key ``Linf``) chosen privately by GEM
(:func:`userdp.vocabulary.private_key_counts`).

Every per-person step runs where the data are (on Spark, on the executors), on batches of whole persons: the
persons' numbers of distinct keys for the private choice of ``max_keys`` (``max_keys="auto"``, the default,
:meth:`~userdp.engines.Engine.key_record_sums`), the bounding of each person's keys to ``max_keys`` for the
key selection
(:meth:`~userdp.engines.Engine.bounded_item_sums`), the records each candidate bound keeps, and the bounded
counts (:meth:`~userdp.engines.Engine.key_record_sums`). One row per key (or per candidate bound) reaches the
driver, which selects, chooses the bounds and adds the noise (:func:`userdp.vocabulary.key_counts_from_sums`).
Guarantee: ``(epsilon, delta)``-DP (pure with public keys and Laplace noise) for adding or removing one person
with all of their records.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from ..engines import Columns, Engine, get_engine
from ..errors import ParameterError
from ..noise import RngLike, resolve_rng
from ..privacy.params import warn_large_delta
from ..privacy.result import Release
from ..vocabulary import BOUND_GRID, key_counts_from_sums, plan_key_counts

__all__ = ["key_counts"]


def key_counts(
    source: Any,
    epsilon: float,
    delta: float = 0.0,
    *,
    user: str = "user",
    key: str = "key",
    tokenize: bool = False,
    keys: Any = None,
    bounds: str | tuple[int, int] = "auto",
    noise: str = "laplace",
    select_fraction: float = 0.2,
    key_fraction: float = 0.5,
    max_keys: int | str = "auto",
    l0s: tuple[int, ...] = BOUND_GRID,
    linfs: tuple[int, ...] = BOUND_GRID,
    engine: Engine | str | None = None,
    rng: RngLike = None,
) -> Release:
    """Noisy records per ``key``, each person's contribution bounded by privately chosen (or given) bounds.

    Parameters
    ----------
    source:
        A path, a :class:`~userdp.data.FileSource` (a headerless or tab-separated file), an Arrow table, a
        pandas or polars frame, a Spark DataFrame (``engine="spark"``) or a
        :class:`~userdp.data.UserDataset`.
    tokenize:
        The key column is text; the keys are its lower-cased words (:func:`userdp.data.tokenize`), counted with
        their repeats (a review using "great" twice holds two records of it).
    keys:
        The public keys to count (a list of labels), or ``None`` to select them from the data privately.
    max_keys:
        Keys selected from the data: the most keys one person contributes to the selection. ``"auto"`` (the
        default): chosen privately, counted where the data are (each person's distinct keys,
        :func:`userdp.vocabulary.choose_max_items_with`), with 2% of the selection's share of ``epsilon``;
        or a whole number in ``[1, 10000]``. Unused with public ``keys``.
    bounds, noise, select_fraction, key_fraction, l0s, linfs:
        As in :func:`userdp.vocabulary.private_key_counts`.
    engine, rng:
        As in :func:`userdp.releases.heatmap`.
    """
    public = None if keys is None else np.asarray([str(k) for k in keys], dtype=object)
    if public is not None and public.size == 0:
        raise ParameterError("keys is empty: list at least one public key (or None to select them)")
    plan_key_counts(epsilon, delta, bounds=bounds, noise=noise, public_keys=public is not None,
                    select_fraction=select_fraction, key_fraction=key_fraction, max_keys=max_keys,
                    l0s=l0s, linfs=linfs)  # fmt: skip  # every refusal before the data is read
    plan = plan_key_counts(epsilon, delta, bounds=bounds, noise=noise, public_keys=public is not None,
                           select_fraction=select_fraction, key_fraction=key_fraction, max_keys=max_keys,
                           l0s=l0s, linfs=linfs)  # fmt: skip
    warn_large_delta(delta)  # checked by plan_key_counts
    eng = get_engine(engine, source)
    data = eng.load(source, Columns(user, key, tokenize=tokenize))
    return key_counts_from_sums(
        partial(eng.bounded_item_sums, data), partial(eng.key_record_sums, data), plan, public_keys=public,
        rng=resolve_rng(rng),
    )  # fmt: skip

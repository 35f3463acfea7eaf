"""The per-key counts release: a table of (person, key) records -> noisy records per key, with the
contribution bounds (keys per person ``L0``, records per key ``Linf``) chosen privately by GEM
(:func:`userdp.vocabulary.private_key_counts`).

The engine aggregates the records into one (person, key, records) row per person and key, on the Spark
executors too; bounding, the choice of bounds and the noise run on the driver. Guarantee: ``(epsilon, delta)``-DP
(pure with public keys and Laplace noise) for adding or removing one person with all of their records.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..engines import Columns, Engine, get_engine
from ..errors import ParameterError
from ..noise import RngLike, resolve_rng
from ..privacy.result import Release
from ..vocabulary import BOUND_GRID, plan_key_counts, private_key_counts

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
    max_keys: int = 100,
    l0s: tuple[int, ...] = BOUND_GRID,
    linfs: tuple[int, ...] = BOUND_GRID,
    engine: Engine | str | None = None,
    rng: RngLike = None,
) -> Release:
    """Noisy records per ``key``, each person's contribution bounded by privately chosen (or given) bounds.

    Parameters
    ----------
    source:
        A path, an Arrow table, a pandas or polars frame, a Spark DataFrame (``engine="spark"``) or a
        :class:`~userdp.data.UserDataset`.
    tokenize:
        The key column is text; the keys are its lower-cased words (:func:`userdp.data.tokenize`), counted with
        their repeats (a review using "great" twice holds two records of it).
    keys:
        The public keys to count (a list of labels), or ``None`` to select them from the data privately.
    bounds, noise, select_fraction, key_fraction, max_keys, l0s, linfs:
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
    eng = get_engine(engine)
    sets, mult = eng.key_records(eng.load(source, Columns(user, key, tokenize=tokenize)))
    return private_key_counts(
        sets.offsets,
        sets.items,
        mult,
        np.asarray(sets.domain.labels, dtype=object),
        epsilon,
        delta,
        public_keys=public,
        bounds=bounds,
        noise=noise,
        select_fraction=select_fraction,
        key_fraction=key_fraction,
        max_keys=max_keys,
        l0s=l0s,
        linfs=linfs,
        rng=resolve_rng(rng),
    )

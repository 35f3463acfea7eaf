"""The private vocabulary release: a table of (person, item) records -> the items many persons hold, and a
noisy person count of each (:func:`userdp.vocabulary.private_vocabulary`; Gopi et al., ICML 2020).

For the weighted union the engine bounds each person's items (a uniformly random subset of at most
``max_items``, drawn from the person's keyed stream, :func:`userdp.noise.keyed_keep`, so that every engine
keeps the same items) and sums the weights per item where the data are: on Spark, on the executors, and one
row per item reaches the driver. DP-SIPS (``algorithm="sips"``, :mod:`userdp.vocabulary.sips`) runs each
round the same way: the items released by the earlier rounds are sent to the engine (a broadcast on Spark),
removed from every person's set, and the rest bounded by the person's keyed stream for the round's own
purpose (:func:`userdp.noise.sips_round_purpose`: a fresh subset each round) and summed per item where the
data are. The policy histogram visits the persons one after another, so its engine collects the
deduplicated person-item edges on the driver (the policy greedy union, ``algorithm="policy-greedy"``,
collects them with each person's number of records of each item, its local counts:
:meth:`~userdp.engines.Engine.key_records`, aggregated where the data are). The threshold, the noise and the
counts' noise run on the driver. Under ``max_items="auto"`` (the default) the bound is chosen privately first (2% of
epsilon) from the persons' numbers of distinct items: counted where the data are for the weighted union and
DP-SIPS (whose every round then uses the chosen bound), from the collected edges for the policy union.
Guarantee: ``(epsilon, delta)``-DP for adding or removing one person (all of their records). The items'
labels are read off the data; only the released ones leave.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from ..engines import Columns, Engine, get_engine
from ..noise import KeyedKeep, KeyedStreams, RngLike, keyed_keep, resolve_rng, sips_round_purpose
from ..privacy.params import warn_large_delta
from ..privacy.result import Release
from ..vocabulary import (
    BoundChoice,
    choose_max_items_with,
    plan_sips_vocabulary,
    plan_vocabulary,
    private_vocabulary,
    private_vocabulary_from_sums,
    sips_vocabulary_from_sums,
    vocabulary_algorithm,
    vocabulary_sum_columns,
)

__all__ = ["vocabulary"]


def vocabulary(
    source: Any,
    epsilon: float,
    delta: float,
    *,
    user: str = "user",
    item: str = "item",
    tokenize: bool = False,
    max_items: int | str = "auto",
    noise: str = "gaussian",
    policy: bool = False,
    count_fraction: float = 0.5,
    algorithm: str | None = None,
    rounds: int | None = None,
    ratio: float | None = None,
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
    max_items:
        ``"auto"`` (default): chosen privately from the persons' numbers of distinct items with 2% of
        ``epsilon`` (for the weighted union and DP-SIPS counted where the data are,
        :func:`userdp.vocabulary.choose_max_items_with`; for the policy union from the edges
        collected on the driver), then used by the selection (by every round of DP-SIPS) with the rest of the
        budget; or a whole number. As in :func:`userdp.vocabulary.private_vocabulary`.
    noise, policy, count_fraction, algorithm, rounds, ratio:
        As in :func:`userdp.vocabulary.private_vocabulary` (``algorithm``: ``"weighted"``, the default,
        ``"policy"``, ``"policy-greedy"`` (Laplace noise; :func:`userdp.vocabulary.policy_greedy_union`) or
        ``"sips"``; ``rounds`` and ``ratio``: :func:`userdp.vocabulary.sips_vocabulary`).
    engine, rng:
        As in :func:`userdp.releases.heatmap`.
    """
    algo = vocabulary_algorithm(algorithm, policy, rounds, ratio)  # every refusal before the data is read
    if algo == "sips":
        sched = {k: v for k, v in (("rounds", rounds), ("ratio", ratio)) if v is not None}
        plan_sips_vocabulary(epsilon, delta, max_items, noise, count_fraction, **sched)
    else:
        plan_vocabulary(
            epsilon, delta, max_items, noise, algo == "policy", count_fraction, greedy=algo == "policy-greedy"
        )
    warn_large_delta(delta)  # checked by plan_vocabulary
    eng = get_engine(engine, source)
    src = resolve_rng(rng)
    data = eng.load(source, Columns(user, item, tokenize=tokenize))
    if algo == "weighted":  # bounding and weights per person, then sums per item: on Spark's executors too
        if isinstance(max_items, str):  # "auto": each person's distinct items counted where the data are
            max_items = choose_max_items_with(partial(eng.key_record_sums, data), epsilon, src, noise=noise)
        cap = max_items.value if isinstance(max_items, BoundChoice) else int(max_items)
        streams = KeyedStreams.from_rng(src)
        labels, sums = eng.bounded_item_sums(
            data, cap, partial(keyed_keep, streams, cap=cap),
            partial(vocabulary_sum_columns, noise=noise),
        )  # fmt: skip
        return private_vocabulary_from_sums(
            labels, sums, epsilon, delta, max_items=max_items, noise=noise, count_fraction=count_fraction, rng=src
        )
    if algo == "policy-greedy":  # each person's items with their records (the local counts), on the driver
        sets, mult = eng.key_records(data)
        return private_vocabulary(
            sets.offsets, sets.items, sets.domain.labels, epsilon, delta, max_items=max_items, noise=noise,
            count_fraction=count_fraction, greedy=True, multiplicity=mult, rng=src,
        )  # fmt: skip
    if algo == "sips":  # each round's bounding and per-item sums where the data are, the released set sent there
        if isinstance(max_items, str):  # "auto": chosen as for the weighted union, once, for every round
            max_items = choose_max_items_with(partial(eng.key_record_sums, data), epsilon, src)
        round_sums = partial(_sips_round_sums, eng, data, KeyedStreams.from_rng(src))
        return sips_vocabulary_from_sums(
            round_sums, epsilon, delta, max_items=max_items, noise=noise, count_fraction=count_fraction, rng=src,
            **sched,
        )  # fmt: skip
    sets = eng.edges(data)  # the policy visits persons one after another: on the driver
    return private_vocabulary(
        sets.offsets,
        sets.items,
        sets.domain.labels,
        epsilon,
        delta,
        max_items=max_items,
        noise=noise,
        policy=algo == "policy",
        count_fraction=count_fraction,
        rng=src,
    )


def _sips_round_sums(eng: Engine, data: Any, streams: KeyedStreams, round_: int, cap: int, released) -> tuple:
    """DP-SIPS's round ``round_`` on the engine (:data:`userdp.vocabulary.sips.RoundSums`): every person's items
    less the ``released`` labels, at most ``cap`` kept by the person's keyed stream for the round's own purpose
    (a fresh uniformly random subset each round), the weights summed per item where the data are."""
    keep = KeyedKeep(streams, cap, purpose=sips_round_purpose(round_))
    weights = partial(vocabulary_sum_columns, noise="gaussian")
    return eng.bounded_item_sums(data, cap, keep, weights, exclude=released)

"""Brute-force aggregates for the engine tests: what every engine must compute, written out from the definitions
with Python loops over the records, one person at a time, so that a bug common to every engine, or to the shared
steps they all end in, still fails. Library code is used only where it *defines* a person's draws: the keyed
streams (:class:`userdp.noise.KeyedStreams`) and the per-person reference draws of :mod:`userdp.noise`
(``keyed_sample_indices``, ``keyed_randomize``), which the noise tests check on their own.

A *record* is a ``(person, item)`` pair; the person keys and labels are plain Python values (``.tolist()``).
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from userdp.noise import KeyedStreams, keyed_randomize, keyed_sample_indices
from userdp.noise.keyed import BOUND_PURPOSE, RANDOMIZE_PURPOSE, SAMPLE_PURPOSE

__all__ = [
    "by_person",
    "cell_of",
    "edges",
    "edges_of",
    "grid_sum",
    "histogram_sum",
    "item_sums",
    "item_sums_of",
    "kept_positions",
    "key_records",
    "key_records_of",
    "per_user_mean",
    "purposes_are_distinct",
    "randomized_counts",
    "sampled",
    "user_sizes",
]


def by_person(users, items) -> dict:
    """Each person's records, in record order: ``{person: [item, ...]}``."""
    out: dict = defaultdict(list)
    for u, x in zip(np.asarray(users).tolist(), np.asarray(items).tolist(), strict=True):
        out[u].append(tuple(x) if isinstance(x, list) else x)
    return dict(out)


def user_sizes(users) -> tuple[int, int, int]:
    """(smallest, largest, number of persons)."""
    sizes = [len(v) for v in by_person(users, np.zeros(len(users))).values()]
    return (min(sizes), max(sizes), len(sizes)) if sizes else (0, 0, 0)


def cell_of(point, box, shape) -> int | None:
    """The grid cell ``row * cols + col`` of one point of the closed ``box`` (``None`` outside): ``floor((x -
    low) / width * n)`` along each axis, the top edge in the last cell."""
    (l0, l1), (h0, h1) = (float(v) for v in box.low), (float(v) for v in box.high)
    x, y = float(point[0]), float(point[1])
    if not (l0 <= x <= h0 and l1 <= y <= h1):
        return None
    r = min(max(math.floor((x - l0) / (h0 - l0) * shape[0]), 0), shape[0] - 1)
    c = min(max(math.floor((y - l1) / (h1 - l1) * shape[1]), 0), shape[1] - 1)
    return r * shape[1] + c


def grid_sum(users, points, box, shape) -> np.ndarray:
    """``sum_i p_i``: each person's points inside the box as a distribution of mass 1 over the cells (points
    outside dropped; a person with none inside adds nothing)."""
    out = np.zeros(shape[0] * shape[1])
    for pts in by_person(users, np.asarray(points, dtype=float)).values():
        cells = [c for c in (cell_of(p, box, shape) for p in pts) if c is not None]
        for c in cells:
            out[c] += 1.0 / len(cells)
    return out.reshape(shape)


def histogram_sum(users, labels, domain_labels, normalize: bool = True) -> np.ndarray:
    """``sum_i K~_i`` (each person's items as a distribution of mass 1) or the count histogram, over the
    public labels (matched as text)."""
    index = {str(x): j for j, x in enumerate(np.asarray(domain_labels).tolist())}
    out = np.zeros(len(index))
    for items in by_person(users, labels).values():
        for x in items:
            out[index[str(x)]] += 1.0 / len(items) if normalize else 1.0
    return out


def per_user_mean(users, items, query) -> tuple[list, np.ndarray]:
    """Persons in key order and each one's mean of ``query`` over its items (``math.fsum``, one person at a
    time)."""
    groups = by_person(users, items)
    keys = sorted(groups)
    rows = []
    for k in keys:
        v = np.asarray(query(np.asarray(groups[k])), dtype=float).reshape(len(groups[k]), -1)
        rows.append([math.fsum(v[:, j]) / len(groups[k]) for j in range(v.shape[1])])
    return keys, np.array(rows)


def edges(users, labels) -> set:
    """The distinct ``(person, label as text)`` pairs."""
    return {(u, str(x)) for u, xs in by_person(users, labels).items() for x in xs}


def edges_of(ds) -> list:
    """An engine's edges (a dataset of sets) as a list of ``(person, label as text)`` pairs (with repeats, if any)."""
    persons = np.repeat(ds.user_ids, ds.counts()).tolist()
    return list(zip(persons, [str(x) for x in np.asarray(ds.domain.labels)[ds.items].tolist()], strict=True))


def key_records(users, labels) -> dict:
    """``{(person, key as text): records}``."""
    out: dict = defaultdict(int)
    for u, xs in by_person(users, labels).items():
        for x in xs:
            out[(u, str(x))] += 1
    return dict(out)


def key_records_of(result) -> dict:
    """An engine's :meth:`~userdp.engines.Engine.key_records` as ``{(person, key): records}``; a person holding
    one key twice fails (one entry per person and key)."""
    ds, mult = result
    pairs = edges_of(ds)
    assert len(pairs) == len(set(pairs)), "a person holds one key in two entries"
    return dict(zip(pairs, np.asarray(mult).tolist(), strict=True))


def kept_positions(streams: KeyedStreams, person, size: int, cap: int, purpose: str = BOUND_PURPOSE) -> list[int]:
    """Which ``cap`` of a person's ``size`` items (in their labels' text order) the person keeps, by the
    definition: the positions of the ``cap`` smallest of the first ``size`` words of the person's keyed stream
    for the bounding purpose (DP-SIPS's rounds: the round's ``purpose``; ties to the earlier position)."""
    words = streams.source(person, purpose).words(size).tolist()
    return sorted(sorted(range(size), key=lambda j: (words[j], j))[:cap])


def item_sums(users, labels, cap: int, keep, weights, exclude=()) -> dict:
    """:meth:`~userdp.engines.Engine.bounded_item_sums` from the definition: each person's distinct items less
    the labels in ``exclude``, in their labels' text order; a person holding more than ``cap`` keeps
    ``keep(person, n)`` of them; a person keeping ``k`` adds ``weights([k])[0]`` to each kept item.
    ``{label: row}``."""
    out: dict = {}
    gone = {str(x) for x in exclude}
    for u, xs in by_person(users, [str(x) for x in labels]).items():
        held = sorted(set(xs) - gone)
        kept = [held[j] for j in keep(u, len(held))] if len(held) > cap else held
        assert len(kept) == min(len(held), cap)
        if not kept:  # every item of the person's excluded
            continue
        row = np.asarray(weights(np.array([len(kept)])))[0].tolist()
        for x in kept:
            out[x] = [a + b for a, b in zip(out.get(x, [0] * len(row)), row, strict=True)]
    return {k: tuple(v) for k, v in out.items()}


def item_sums_of(result) -> dict:
    """An engine's :meth:`~userdp.engines.Engine.bounded_item_sums` as ``{label: row}``."""
    labels, sums = result
    return {str(k): tuple(r) for k, r in zip(np.asarray(labels).tolist(), np.asarray(sums).tolist(), strict=True)}


def sampled(streams: KeyedStreams, person, items: list, s: int) -> list:
    """A person's ``s`` samples with replacement: its items sorted, indexed by the draws of its keyed stream for
    the sampling purpose (:func:`userdp.noise.keyed_sample_indices`)."""
    ordered = sorted(items)
    return [ordered[j] for j in keyed_sample_indices(streams, person, len(ordered), s).tolist()]


def randomized_counts(streams: KeyedStreams, groups: dict, randomizer, k: int) -> np.ndarray:
    """The count histogram of every person's codes (``{person: [code, ...]}``) through ``randomizer`` with the
    person's keyed stream for the randomization purpose (:func:`userdp.noise.keyed_randomize`)."""
    out = np.zeros(k, dtype=np.int64)
    for person, codes in groups.items():
        out += np.bincount(keyed_randomize(streams, person, np.asarray(codes), randomizer), minlength=k)
    return out


def purposes_are_distinct() -> bool:
    """The three keyed purposes are three different strings (one stream per person and purpose)."""
    return len({SAMPLE_PURPOSE, RANDOMIZE_PURPOSE, BOUND_PURPOSE}) == 3

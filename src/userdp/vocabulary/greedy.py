"""The policy greedy histogram of a set union (Carvalho, Wang & Gondara, "Incorporating item frequency for
differentially private set union", AAAI 2022: the greedy policy ordered by the person's *local* item
frequency, ``run_gw`` with ``greedy="ci"`` in the authors' public code), exact on the integer lattice.

**The rule.** Persons are visited one after another in a random order. A person ranks their kept items by
how many records they hold of each (their local count, largest first; ties by a uniformly random priority of
the items, smaller first), and spends one unit of weight (``unit`` lattice steps) down that list: each item
still below the cutoff ``Gamma`` is raised *all the way* to ``Gamma`` if the budget left allows, else by the
budget left, which ends the person's turn. Items at or above ``Gamma`` are skipped. The paper's point is that
the order depends on the person's own data only: Gopi et al. (ICML 2020, section 4) note that the greedy
order of the *current histogram* (fill first the items nearest the cutoff) is not contractive, and it is not
(the test suite holds a counterexample: one step on the input moves the output by 3 steps). The local order
makes the policy contractive, so the threshold of the policy Laplace union applies with one change, the
weight of a new item (below).

**The lattice form.** For a fixed person, item ``i`` of rank ``r_i`` in their list (a rank that depends on
the person's counts and the priorities, never on the histogram) with gap ``g_i = max(Gamma - h_i, 0)`` owns
the *slots* ``(r_i, s)`` for ``0 <= s < g_i``, ordered lexicographically (rank first). The person takes the
``unit`` first slots of their items in that order (all of them if there are fewer), and each taken slot
raises its item by one step. That is exactly the greedy rule: the first item's slots all come before the
second's, and so on.

**Contraction (exact).** Let ``F`` be one person's update and ``h' = h + e_j`` (one step more on item ``j``).
The slots of ``h'`` are those of ``h`` less item ``j``'s last one, ``(r_j, g_j - 1)`` (none less if
``h_j >= Gamma`` or ``j`` is not the person's), and the order of the others is unchanged because the ranks
do not depend on ``h``. If that slot was not among the ``unit`` first at ``h``, ``F`` takes the same slots at
``h'`` and ``F(h') = F(h) + e_j``; if it was, ``F`` takes the same slots less it plus the next one, of some
item ``i``, and ``F(h') = F(h) + e_i`` (or ``F(h)`` when there is no next slot). Either way
``||F(h') - F(h)||_1 <= 1``; along a path of unit steps (the l1 distance between integer histograms is the
length of the shortest such path) ``||F(h) - F(g)||_1 <= ||h - g||_1``: the update is l1 non-expansive on the
lattice itself.

**Privacy (add or remove one person p).** As for the policy Laplace union (:mod:`userdp.vocabulary.policy`):
couple the two runs on the same order of the other persons and the same priorities of the shared items;
before p the histograms agree, p adds at most ``unit`` in l1, every later person applies the same
non-expansive ``F`` to both, so the final histograms differ by at most ``unit`` in l1, and discrete Laplace
noise of scale ``t >= unit / epsilon`` makes the shared items' release ``epsilon``-DP. **The new items'
weight differs**: p's items that no one else holds are at level 0 when p comes, and no later person touches
them; greedy may put p's *whole* unit on one of them (water-filling gives each ``ceil(unit / k)``). As
``Gamma >= T > unit``, at most one new item gets any weight, at most ``unit``, and the others keep 0 (they are
candidates still: every item some person kept is one). The release probability of p's ``k`` new items is at
most ``sum_i P[Z >= T - w_i]`` over weights with ``sum_i w_i <= unit``; each tail is convex in ``w_i`` (the
discrete Laplace's ``q^(T - w) / (1 + q)``), so the sum is largest at a vertex of that simplex: one item at
``unit``, the others at 0. The threshold's ``delta`` bound is therefore
``max_k P[Z >= T - unit] + (k - 1) P[Z >= T]`` over ``k <= max_items``
(:func:`userdp.vocabulary.union.greedy_delta_new`), larger than the policy Laplace's
``max_k k P[Z >= T - ceil(unit / k)]`` for every ``k >= 2``.

**Departures from the paper**, both on the side of privacy: each person keeps at most ``max_items`` distinct
items (a uniformly random subset, as every union of this package; the paper visits all of a person's items,
but every kept item is a candidate, so ``k`` must be bounded for the new items' ``delta``), and the local
counts are the numbers of records the person holds of each kept item.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..noise import RngLike, resolve_rng

__all__ = ["greedy_histogram", "greedy_histogram_in_order", "kept_counts", "local_counts"]


def greedy_histogram(
    offsets: np.ndarray,
    items: np.ndarray,
    counts: np.ndarray,
    n_items: int,
    cutoff: int,
    unit: int,
    rng: RngLike = None,
) -> np.ndarray:
    """The policy greedy histogram (``int64``, lattice steps): persons in a uniformly random order, ties
    between a person's items of one local count broken by a uniformly random priority (both from ``rng``).

    Parameters
    ----------
    offsets, items:
        Persons in CSR form over item codes ``[0, n_items)``, each person's items distinct (and bounded).
    counts:
        The person's local count of each entry of ``items`` (records held); larger first.
    cutoff:
        ``Gamma`` in lattice steps: no person raises an item past it.
    unit:
        One person's budget in lattice steps.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    n_persons = offsets.size - 1
    src = resolve_rng(rng)
    order = src.permutation(max(n_persons, 0))  # exact uniform permutations (Fisher-Yates)
    priority = src.permutation(int(n_items))
    return greedy_histogram_in_order(offsets, items, counts, n_items, cutoff, unit, order, priority)


def greedy_histogram_in_order(
    offsets: np.ndarray,
    items: np.ndarray,
    counts: np.ndarray,
    n_items: int,
    cutoff: int,
    unit: int,
    order: np.ndarray,
    priority: np.ndarray,
) -> np.ndarray:
    """:func:`greedy_histogram` for a given order of the persons and priority of the items (distinct
    integers; among items of one local count a smaller ``priority`` is filled first). The exact audit
    enumerates these."""
    hist = np.zeros(int(n_items), dtype=np.int64)
    _greedy_fill(
        np.asarray(offsets, dtype=np.int64),
        np.asarray(items, dtype=np.int64),
        np.asarray(counts, dtype=np.int64),
        np.asarray(order, dtype=np.int64),
        np.asarray(priority, dtype=np.int64),
        np.int64(cutoff),
        np.int64(unit),
        hist,
    )
    return hist


@njit(cache=True)
def _greedy_fill(offsets, items, counts, order, priority, cutoff, unit, hist):
    """Spend every person's ``unit`` steps in ``hist``, persons in ``order`` (see the module): the person's
    items by local count (largest first), then priority (smallest first); each item below the cutoff is
    raised to it, or by the budget left."""
    for p in order:
        lo, hi = offsets[p], offsets[p + 1]
        if hi == lo:
            continue
        mine = items[lo:hi]
        by_priority = np.argsort(priority[mine])
        rank = by_priority[np.argsort(-counts[lo:hi][by_priority], kind="mergesort")]  # stable: ties by priority
        left = unit
        for t in rank:
            i = mine[t]
            gap = cutoff - hist[i]
            if gap <= 0:
                continue
            step = gap if gap < left else left
            hist[i] += step
            left -= step
            if left == 0:
                break


def local_counts(offsets: np.ndarray, items: np.ndarray, mult: np.ndarray | None = None) -> tuple:
    """Each person's distinct items (the first occurrence of each, in order) and their local counts: the
    number of times the person lists the item, or the sum of ``mult`` (records per entry) over those times.
    Returns ``(offsets, items, counts)``."""
    offsets = np.asarray(offsets, dtype=np.int64)
    items = np.asarray(items, dtype=np.int64)
    mult = np.ones(items.size, dtype=np.int64) if mult is None else np.asarray(mult, dtype=np.int64)
    if items.size == 0:
        return offsets, items, mult
    keep = np.empty(items.size, dtype=np.bool_)
    n_new = np.empty(offsets.size - 1, dtype=np.int64)
    total = np.zeros(items.size, dtype=np.int64)
    size = int(items.max()) + 1
    _first_with_counts(
        offsets, items, mult, np.full(size, -1, dtype=np.int64), np.zeros(size, dtype=np.int64), keep, n_new, total
    )
    return np.r_[0, np.cumsum(n_new)].astype(np.int64), items[keep], total[keep]


@njit(cache=True)
def _first_with_counts(offsets, items, mult, stamp, where, keep, n_new, total):
    """``keep`` the first occurrence of each item within each person, ``total`` at it the person's
    multiplicities of the item added up (``stamp[i]``: the last person seen with ``i``; ``where[i]``: where)."""
    for u in range(offsets.size - 1):
        c = 0
        for e in range(offsets[u], offsets[u + 1]):
            i = items[e]
            if stamp[i] == u:
                keep[e] = False
                total[where[i]] += mult[e]
            else:
                stamp[i] = u
                where[i] = e
                keep[e] = True
                total[e] = mult[e]
                c += 1
        n_new[u] = c


def kept_counts(
    offsets: np.ndarray, items: np.ndarray, counts: np.ndarray, kept_offsets: np.ndarray, kept_items: np.ndarray
) -> np.ndarray:
    """The local counts of a bounded dataset: ``kept`` holds, for every person, a subsequence of the person's
    distinct ``items`` (as :func:`userdp.vocabulary.bound_contributions` keeps them, in order); each kept
    entry gets the count of its item."""
    out = np.empty(np.asarray(kept_items).size, dtype=np.int64)
    _match_subsequence(
        np.asarray(offsets, dtype=np.int64),
        np.asarray(items, dtype=np.int64),
        np.asarray(counts, dtype=np.int64),
        np.asarray(kept_offsets, dtype=np.int64),
        np.asarray(kept_items, dtype=np.int64),
        out,
    )
    return out


@njit(cache=True)
def _match_subsequence(offsets, items, counts, kept_offsets, kept_items, out):
    for u in range(offsets.size - 1):
        e = offsets[u]
        for f in range(kept_offsets[u], kept_offsets[u + 1]):
            while items[e] != kept_items[f]:
                e += 1
            out[f] = counts[e]
            e += 1

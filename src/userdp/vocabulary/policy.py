"""The policy Laplace histogram of a set union (Gopi, Gulhane, Kulkarni, Shen, Shokouhi & Yekhanin, ICML 2020,
section 4: Algorithm 7, "l1 descent"), exact on the integer lattice.

Persons are visited one after another in a random order. A person spends one unit of weight (``unit``
lattice steps) on their kept items, but only on items still below the *cutoff* ``Gamma`` and never past it:
every such item is raised by the same increment ``c``, or up to ``Gamma`` if its gap ``Gamma - h_i`` is
smaller, with ``c`` as large as the unit allows (the paper's l1 descent: ``min(gap_i, c)``, summing to 1).
Weight is not wasted on items that already have enough to pass the threshold; it flows to the person's
other items.

**The lattice form.** Think of item ``i`` with gap ``g_i`` as owning the *slots* ``(i, s)`` for
``0 <= s < g_i`` (its ``s``-th step up), ordered by ``s`` and then by a random priority of the item. A person
takes the ``unit`` first slots of their items in that order (all of them if there are fewer), and each taken
slot raises its item by one step. This is the paper's rule with the fractional part of ``c`` given, one step
each, to the open items of lowest priority; on integers it needs no rounding.

**Contraction (exact).** Let ``F`` be one person's update and ``h' = h + e_j`` (one step more on item ``j``).
The slots of ``h'`` are those of ``h`` less item ``j``'s last one, ``(j, g_j - 1)`` (none less if
``h_j >= Gamma``). If that slot was not among the ones ``F`` takes at ``h``, ``F`` takes the same slots at
``h'`` and ``F(h') = F(h) + e_j``; if it was, ``F`` takes the same slots less it plus the next one, of some
item ``i``, and ``F(h') = F(h) + e_i`` (or ``F(h)`` when there is no next slot). Either way
``||F(h') - F(h)||_1 <= 1``, and by the triangle inequality along a path of unit steps
``||F(h) - F(g)||_1 <= ||h - g||_1`` for all integer ``h, g``: the update is l1 non-expansive on the lattice
itself, not only on the reals. (Rounding ``c`` down and dropping the remainder is *not*: the test suite
holds a counterexample.)

**Privacy (add or remove one person p).** Couple the two runs on the same order of the other persons and the
same priorities of the shared items (both are independent uniform draws, so this is a coupling of the two
mechanisms' laws). Before p the histograms agree; p's update adds at most ``unit`` in l1; every later person
applies the same non-expansive ``F`` to both; so the final histograms differ by at most ``unit`` in l1 over
all items. The threshold step is then that of the weighted Laplace union
(:mod:`userdp.vocabulary.union`): on shared items a histogram of l1 sensitivity ``unit`` with discrete
Laplace noise of scale ``t >= unit / epsilon``, and an item only p holds has weight at most ``ceil(unit / k)``
(p's ``k`` new items all start at level 0, so water-filling gives them equal shares up to one step), which the
threshold's ``delta`` bound uses. Candidates are all items some person kept, including those a person had to
leave at weight 0.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..noise import RngLike, resolve_rng

__all__ = ["policy_histogram", "policy_histogram_in_order"]


def policy_histogram(
    offsets: np.ndarray, items: np.ndarray, n_items: int, cutoff: int, unit: int, rng: RngLike = None
) -> np.ndarray:
    """The policy Laplace histogram (``int64``, lattice steps): persons in a uniformly random order, ties
    between items at one level broken by a uniformly random priority (both drawn from ``rng``).

    Parameters
    ----------
    offsets, items:
        Persons in CSR form over item codes ``[0, n_items)``, each person's items distinct (and bounded).
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
    return policy_histogram_in_order(offsets, items, n_items, cutoff, unit, order, priority)


def policy_histogram_in_order(
    offsets: np.ndarray,
    items: np.ndarray,
    n_items: int,
    cutoff: int,
    unit: int,
    order: np.ndarray,
    priority: np.ndarray,
) -> np.ndarray:
    """:func:`policy_histogram` for a given order of the persons and priority of the items (distinct
    integers; a smaller ``priority`` takes a slot first). The exact audit enumerates these."""
    hist = np.zeros(int(n_items), dtype=np.int64)
    _fill(
        np.asarray(offsets, dtype=np.int64),
        np.asarray(items, dtype=np.int64),
        np.asarray(order, dtype=np.int64),
        np.asarray(priority, dtype=np.int64),
        np.int64(cutoff),
        np.int64(unit),
        hist,
    )
    return hist


@njit(cache=True)
def _fill(offsets, items, order, priority, cutoff, unit, hist):
    """Spend every person's ``unit`` steps in ``hist``, persons in ``order`` (see the module): each open item
    of the person is raised by the same increment ``c`` or by its gap to the cutoff if smaller, ``c`` the
    largest with a total at most ``unit``; the ``rest`` steps go, one each, to the items of lowest priority
    among those still open."""
    for p in order:
        lo, hi = offsets[p], offsets[p + 1]
        if hi == lo:
            continue
        mine = items[lo:hi]
        below = mine[hist[mine] < cutoff]  # items with open slots
        n_open = below.size
        if n_open == 0:
            continue
        gap = cutoff - hist[below]
        idx = np.argsort(gap)
        s = 0  # the gaps of the items that fill up
        j = 0
        inc = -1
        while j < n_open:
            g = gap[idx[j]]
            if s + (n_open - j) * g > unit:  # the budget runs out before item idx[j] fills up
                inc = (unit - s) // (n_open - j)
                break
            s += g
            j += 1
        for t in range(j):  # these reach the cutoff
            hist[below[idx[t]]] = cutoff
        if inc < 0:
            continue
        rest = unit - s - (n_open - j) * inc  # 0 <= rest < n_open - j
        m = n_open - j
        key = np.empty(m, dtype=np.int64)
        for t in range(m):
            hist[below[idx[j + t]]] += inc
            key[t] = priority[below[idx[j + t]]]
        if rest > 0:
            pick = np.argsort(key)
            for t in range(rest):
                hist[below[idx[j + pick[t]]]] += 1

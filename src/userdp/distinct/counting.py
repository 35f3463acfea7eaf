"""Counting distinct elements with bounded contributions (Knop & Steinke, NeurIPS 2023).

``DC(D; l)`` is the largest number of distinct elements obtainable when every person keeps at most ``l``
of their elements: the max flow of source -> person (capacity ``l``) -> element (capacity 1) -> sink, i.e.
a maximum bipartite b-matching. It has sensitivity ``l`` under adding or removing a person, is
non-decreasing and concave in ``l``, and equals the true distinct count once ``l`` reaches the largest
person degree.

* :func:`dc_matching` -- exact ``DC(D; l)`` for *all* ``l = 1..l_max`` in one incremental computation:
  raising every person's capacity by one keeps the previous matching feasible, so each ``l`` starts from
  the previous flow, first hands out still-free elements greedily (per-person pointers; an element once
  matched is never freed, so this is ``O(E)`` over all ``l``), then runs Hopcroft-Karp phases (layered BFS,
  DFS along the layers) until no augmenting path is left. Each phase searches from the side whose first
  layer is cheaper: from the persons with spare capacity (few while ``l`` is small), or from the free
  elements (few once ``l`` is large) over the transposed lists. Once every element is kept, ``DC`` stays at
  its maximum and the search stops. (IMDB, ``l <= 100``: 3.5 s -> 1.7 s; the values are the same, as any
  maximum matching has the same size.)
* :func:`dc_greedy` -- Algorithm 2: for ``l = 1..l_max``, persons in a fixed order each take the first
  element of their list (in a fixed global element order) that nobody has taken. Sensitivity ``l``,
  a 2-approximation of ``DC(D; l)``, ``O(E)`` for all ``l``.
* :func:`dc_sampling` -- the sampling baseline: each person keeps ``l`` uniformly random elements.

The fixed orders are data-independent: persons by their (sorted) key, elements by their label.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from ..data import FiniteDomain, UserDataset, sorted_text
from ..errors import DataError, ParameterError
from ..noise import RngLike, resolve_rng

__all__ = ["PersonElementGraph", "person_element_graph", "dc_matching", "dc_greedy", "dc_sampling"]


@dataclass(frozen=True)
class PersonElementGraph:
    """The deduplicated person-element bipartite graph in CSR form.

    ``adj[offsets[u]:offsets[u+1]]`` are person ``u``'s distinct elements, sorted by the global element
    order (element codes are ranks of the element labels, so the order does not depend on the data).
    """

    offsets: np.ndarray
    adj: np.ndarray
    n_elements: int

    @property
    def n_persons(self) -> int:
        return int(self.offsets.size - 1)

    @property
    def n_edges(self) -> int:
        return int(self.adj.size)

    def degrees(self) -> np.ndarray:
        return np.diff(self.offsets)

    def distinct_count(self) -> int:
        """The true number of distinct elements (non-private)."""
        return int(np.unique(self.adj).size) if self.adj.size else 0


def person_element_graph(ds: UserDataset) -> PersonElementGraph:
    """Deduplicate (person, element) records into the bipartite graph, with elements ranked by label.

    No persons, or persons with no elements, are a graph like any other (``DC = 0`` for it): under
    add/remove-one-person neighbours an empty person changes nothing, so the release goes ahead."""
    if not isinstance(ds.domain, FiniteDomain):
        raise DataError("distinct counting needs items that are ids (a finite domain)")
    labels = ds.domain.labels
    if sorted_text(labels):  # codes are already ranks (a vocabulary read off text)
        d = ds.dedupe()
        return PersonElementGraph(d.offsets, np.ascontiguousarray(d.items), labels.size)
    try:
        rank = np.empty(labels.size, dtype=np.int64)
        rank[np.argsort(labels.astype(str) if labels.dtype.kind == "O" else labels, kind="stable")] = np.arange(
            labels.size
        )
    except TypeError as exc:  # mixed label types
        raise DataError(f"element labels cannot be ordered: {exc}") from exc
    ranked = ds.with_items(rank[ds.items], FiniteDomain(np.arange(labels.size), public=ds.domain.public))
    d = ranked.dedupe()  # sorted by (person, element rank)
    return PersonElementGraph(d.offsets, np.ascontiguousarray(d.items), labels.size)


# --------------------------------------------------------------------------------------------
# Exact: incremental b-matching
# --------------------------------------------------------------------------------------------


@njit(cache=True)
def _greedy_fill(offsets, adj, owner, cnt, gp, cap):
    """Give each person with spare capacity still-free elements from its pointer on (amortized O(E))."""
    added = 0
    for u in range(offsets.size - 1):
        p = gp[u]
        end = offsets[u + 1]
        while cnt[u] < cap and p < end:
            e = adj[p]
            p += 1
            if owner[e] < 0:
                owner[e] = u
                cnt[u] += 1
                added += 1
        gp[u] = p
    return added


@njit(cache=True)
def _hk_phase(offsets, adj, owner, cnt, cap, dist, queue, it, stack_u, parent_e):
    """One Hopcroft-Karp phase; returns the number of augmentations."""
    n = offsets.size - 1
    INF = np.int64(1 << 60)
    head = 0
    tail = 0
    for u in range(n):
        if cnt[u] < cap:
            dist[u] = 0
            queue[tail] = u
            tail += 1
        else:
            dist[u] = INF
    found = INF
    while head < tail:
        u = queue[head]
        head += 1
        if dist[u] >= found:
            break
        for p in range(offsets[u], offsets[u + 1]):
            e = adj[p]
            v = owner[e]
            if v < 0:
                if found == INF:
                    found = dist[u] + 1
            elif v != u and dist[v] == INF:
                dist[v] = dist[u] + 1
                queue[tail] = v
                tail += 1
    if found == INF:
        return 0
    for u in range(n):
        it[u] = offsets[u]
    aug = 0
    for root in range(n):
        while cnt[root] < cap and dist[root] == 0:
            # iterative DFS along layers dist+1 ending at a free element (at layer `found`)
            depth = 0
            stack_u[0] = root
            success = False
            while depth >= 0:
                u = stack_u[depth]
                advanced = False
                while it[u] < offsets[u + 1]:
                    p = it[u]
                    it[u] += 1
                    e = adj[p]
                    v = owner[e]
                    if v < 0:
                        if dist[u] + 1 == found:
                            parent_e[depth] = e
                            success = True
                            break
                    elif v != u and dist[v] == dist[u] + 1:
                        parent_e[depth] = e
                        depth += 1
                        stack_u[depth] = v
                        advanced = True
                        break
                if success:
                    break
                if not advanced:
                    dist[u] = INF  # dead end: prune
                    depth -= 1
            if not success:
                break
            # augment: element parent_e[i] moves to stack_u[i]
            for i in range(depth, -1, -1):
                owner[parent_e[i]] = stack_u[i]
            cnt[root] += 1
            aug += 1
            dist[root] = 0
    return aug


@njit(cache=True)
def _transpose(offsets, adj, n_elements):
    """The element -> persons lists (CSR) of the person -> elements lists."""
    n = offsets.size - 1
    toff = np.zeros(n_elements + 1, np.int64)
    for p in range(adj.size):
        toff[adj[p] + 1] += 1
    for e in range(n_elements):
        toff[e + 1] += toff[e]
    pos = toff[:-1].copy()
    tadj = np.empty(adj.size, adj.dtype)
    for u in range(n):
        for p in range(offsets[u], offsets[u + 1]):
            e = adj[p]
            tadj[pos[e]] = u
            pos[e] += 1
    return toff, tadj


@njit(cache=True)
def _hk_phase_back(offsets, adj, toff, tadj, owner, cnt, cap, dist, queue, it_e, it_p, layer, stack_e, stack_p):
    """One Hopcroft-Karp phase searched from the free elements: the mirror of :func:`_hk_phase`.

    An augmenting path read from its free end: a free element ``e0`` is taken by a full person ``w0``,
    who releases an element ``e1`` it holds, taken by ``w1``, ... until a person with spare capacity
    takes the last one. The BFS layers elements by this distance (``dist``) and gives each full person
    the layer it is reached from (``layer``); the DFS follows the layers. Returns the number of
    augmentations, or -1 when no augmenting path exists (the matching is then maximum)."""
    ne = owner.size
    INF = np.int64(1 << 60)
    for u in range(offsets.size - 1):
        layer[u] = INF
    tail = 0
    for e in range(ne):
        if owner[e] < 0:
            dist[e] = 0
            queue[tail] = e
            tail += 1
        else:
            dist[e] = INF
    nroots = tail
    head = 0
    found = INF
    while head < tail:
        e = queue[head]
        head += 1
        de = dist[e]
        if de >= found:
            break
        oe = owner[e]
        for q in range(toff[e], toff[e + 1]):
            w = tadj[q]
            if w == oe:
                continue
            if cnt[w] < cap:
                if found == INF:
                    found = de + 1
            elif layer[w] == INF:
                layer[w] = de
                for p in range(offsets[w], offsets[w + 1]):
                    e2 = adj[p]
                    if owner[e2] == w and dist[e2] == INF:
                        dist[e2] = de + 1
                        queue[tail] = e2
                        tail += 1
    if found == INF:
        return -1
    dead = -1  # the layer of a person proven useless in this phase
    for e in range(ne):
        it_e[e] = toff[e]
    for u in range(offsets.size - 1):
        it_p[u] = offsets[u]
    aug = 0
    for r in range(nroots):
        root = queue[r]
        if owner[root] >= 0 or dist[root] != 0:
            continue
        depth = 0
        stack_e[0] = root
        success = False
        while depth >= 0:
            e = stack_e[depth]
            de = dist[e]
            oe = owner[e]
            advanced = False
            while it_e[e] < toff[e + 1]:
                w = tadj[it_e[e]]
                if w == oe:
                    it_e[e] += 1
                    continue
                if cnt[w] < cap:
                    if de + 1 == found:
                        stack_p[depth] = w
                        success = True
                        break
                    it_e[e] += 1
                    continue
                if layer[w] != de:  # not on this layer, or proven useless in this phase
                    it_e[e] += 1
                    continue
                # w is full: it takes e and releases an element it owns at the next layer
                while it_p[w] < offsets[w + 1]:
                    e2 = adj[it_p[w]]
                    if owner[e2] == w and dist[e2] == de + 1:
                        break
                    it_p[w] += 1
                if it_p[w] < offsets[w + 1]:
                    e2 = adj[it_p[w]]
                    it_p[w] += 1
                    stack_p[depth] = w
                    depth += 1
                    stack_e[depth] = e2
                    advanced = True
                    break
                layer[w] = dead
                it_e[e] += 1
            if success:
                break
            if not advanced:
                dist[e] = INF
                depth -= 1
        if not success:
            continue
        for i in range(depth + 1):
            owner[stack_e[i]] = stack_p[i]
        cnt[stack_p[depth]] += 1
        aug += 1
    return aug

@njit(cache=True)
def _dc_all(offsets, adj, n_elements, l_max):
    n = offsets.size - 1
    toff, tadj = _transpose(offsets, adj, n_elements)
    deg = offsets[1:] - offsets[:-1]
    tdeg = toff[1:] - toff[:-1]
    owner = np.full(n_elements, -1, adj.dtype)
    cnt = np.zeros(n, np.int64)
    gp = offsets[:-1].copy()
    dist = np.empty(n, np.int64)
    queue = np.empty(n, np.int64)
    it = np.empty(n, np.int64)
    stack_u = np.empty(n + 1, np.int64)
    parent_e = np.empty(n + 1, np.int64)
    dist_e = np.empty(n_elements, np.int64)
    queue_e = np.empty(n_elements, np.int64)
    it_e = np.empty(n_elements, np.int64)
    layer = np.empty(n, np.int64)
    seen = np.zeros(n, np.int64)
    stack_e = np.empty(n_elements + 1, np.int64)
    stack_p = np.empty(n_elements + 1, np.int64)
    out = np.zeros(l_max, np.int64)
    total = 0
    stamp = 0
    phases = np.zeros(2, np.int64)  # searches from the persons, from the elements
    for cap in range(1, l_max + 1):
        total += _greedy_fill(offsets, adj, owner, cnt, gp, cap)
        while total < n_elements:  # (once every element is kept, DC(D; l) is at its maximum for all larger l)
            # the first layer of each search: the free persons' lists, or the free elements' persons and the
            # lists of the full ones among them; the cheaper side is searched
            fwd = 0
            for u in range(n):
                if cnt[u] < cap:
                    fwd += deg[u]
            bwd = 0
            stamp += 1
            for e in range(n_elements):
                if owner[e] < 0 and bwd < fwd:
                    bwd += tdeg[e]
                    for q in range(toff[e], toff[e + 1]):
                        w = tadj[q]
                        if cnt[w] >= cap and seen[w] != stamp:
                            seen[w] = stamp
                            bwd += deg[w]
            a = 0
            if bwd < fwd:
                a = _hk_phase_back(
                    offsets, adj, toff, tadj, owner, cnt, cap, dist_e, queue_e, it_e, it, layer, stack_e, stack_p
                )
                phases[1] += 1
                if a < 0:  # no augmenting path: the matching is maximum
                    break
            if a == 0:
                a = _hk_phase(offsets, adj, owner, cnt, cap, dist, queue, it, stack_u, parent_e)
                phases[0] += 1
                if a == 0:
                    break
            total += a
        out[cap - 1] = total
    return out, phases


def _check_lmax(l_max: int) -> int:
    if isinstance(l_max, bool) or int(l_max) != l_max or int(l_max) < 1:
        raise ParameterError(f"l_max must be a positive integer, got {l_max!r}")
    return int(l_max)


def dc_matching(graph: PersonElementGraph, l_max: int) -> np.ndarray:
    """Exact ``DC(D; l)`` for ``l = 1..l_max`` (array index ``l - 1``), by incremental b-matching."""
    l_max = _check_lmax(l_max)
    adj = graph.adj
    if max(graph.n_elements, graph.n_persons) < 2**31:  # half the memory traffic of the searches
        adj = adj.astype(np.int32)
    return _dc_all(graph.offsets, adj, graph.n_elements, l_max)[0]


# --------------------------------------------------------------------------------------------
# Algorithm 2: the linear-time greedy
# --------------------------------------------------------------------------------------------


@njit(cache=True)
def _greedy_all(offsets, adj, n_elements, l_max):
    n = offsets.size - 1
    taken = np.zeros(n_elements, np.bool_)
    ptr = offsets[:-1].copy()
    out = np.zeros(l_max, np.int64)
    total = 0
    for l in range(l_max):
        for u in range(n):  # fixed person order
            p = ptr[u]
            end = offsets[u + 1]
            while p < end and taken[adj[p]]:  # first untaken element in the fixed element order
                p += 1
            if p < end:
                taken[adj[p]] = True
                total += 1
                p += 1
            ptr[u] = p
        out[l] = total
    return out


def dc_greedy(graph: PersonElementGraph, l_max: int) -> np.ndarray:
    """Algorithm 2 (Knop & Steinke): the greedy count after each round ``l = 1..l_max``.

    In round ``l`` every person, in the fixed order, takes the first element of its list (fixed global
    element order) not taken by anyone, keeping a pointer. These two rules are what the sensitivity
    proof needs: adding or removing one person changes the value after round ``l`` by at most ``l``.
    """
    l_max = _check_lmax(l_max)
    return _greedy_all(graph.offsets, graph.adj, graph.n_elements, l_max)


# --------------------------------------------------------------------------------------------
# Sampling baseline
# --------------------------------------------------------------------------------------------


def dc_sampling(graph: PersonElementGraph, l_max: int, rng: RngLike = None) -> np.ndarray:
    """The sampling baseline: each person keeps ``l`` uniformly random elements (nested in ``l``: a random
    order per person, prefix of length ``l``); returns the distinct count of the union for every ``l``.
    Sensitivity ``l`` (a person contributes at most ``l`` elements)."""
    l_max = _check_lmax(l_max)
    src = resolve_rng(rng)
    E = graph.n_edges
    perm = src.permutation(E)
    person = np.repeat(np.arange(graph.n_persons), graph.degrees())
    order = perm[np.argsort(person[perm], kind="stable")]  # uniform random order inside each person
    rank = np.empty(E, dtype=np.int64)
    rank[order] = np.arange(E) - np.repeat(graph.offsets[:-1], graph.degrees())
    first = np.full(graph.n_elements, np.iinfo(np.int64).max)
    np.minimum.at(first, graph.adj, rank)
    hist = np.bincount(np.minimum(first[first < l_max], l_max), minlength=l_max)
    return np.cumsum(hist)[:l_max]

"""Exact min-cost flow for the L1 earth mover's distance on an ``H x W`` grid.

The EMD with L1 ground distance between two histograms on a grid of cells is the cheapest flow on the
4-neighbour grid graph in which every step between adjacent cells costs 1 (any shortest grid path has
the L1 length). Unequal masses use the EMD norm of Ghazi et al.: a "bank" node at cost ``A = H + W``
steps from every cell absorbs the difference.

Algorithm: a multi-scale primal-dual method
-------------------------------------------
The network is uncapacitated and both directions of a grid edge cost 1, so a flow is one signed number
per edge. Node potentials ``pi`` (integers) are *dual feasible* when every residual arc has a
non-negative reduced cost, which here reads ``|pi(u) - pi(v)| <= 1`` for adjacent cells, with equality
``pi(v) - pi(u) = 1`` along every edge carrying flow ``u -> v`` (complementary slackness), and
``pi(bank) - pi(u) <= A`` with equality where cell ``u`` sends mass to the bank.

``_solve_level`` keeps a pseudoflow (a flow that may leave some excess and deficit at cells) and
potentials that satisfy these conditions at all times, and alternates

1. a maximum flow from the excess cells to the deficit cells through the *tight* arcs only (reduced
   cost 0), by FIFO push-relabel with global relabelling; pushing along tight arcs keeps
   complementary slackness;
2. a Dijkstra search (Dial's buckets: reduced costs are 0, 1 or 2, the bank arc aside) from all
   excess nodes over reduced costs, and the update ``pi += min(dist, C)``. For any cap ``C >= 0``
   this keeps every reduced cost non-negative (``dist(v) <= dist(u) + rc(u, v)``); ``C`` beyond the
   largest distance makes every shortest path from the excess to every deficit tight, so the next
   maximum flow moves some mass into a deficit: the total deficit (an integer; pushes never turn a
   cell into a deficit) falls every phase, so the method terminates.

It stops when no excess is left: the flow is then feasible and complementary slack with dual-feasible
potentials, hence optimal by linear-programming duality. This is the classical primal-dual
(successive shortest path) method, exact in integer arithmetic, and it is correct from *any*
dual-feasible starting potentials. Its running time depends on how close those are to optimal, so
the potentials come from the same problem on the 2x coarser grid (2 x 2 blocks of cells summed,
solved recursively down to ``_BASE_SIDE`` cells a side), doubled, smoothed to the largest and
smallest 1-Lipschitz functions around them and averaged. Measured: 3-5 phases per level on
check-in heatmaps, about 20 on the dense random worst case (rand**8, every cell non-zero), whatever
the grid size; 512 x 512 takes about 1.5 s and 4 s respectively (2 shared cores), against 35-50 s
and minutes for LEMON's network simplex (``benchmarks/bench_grid_emd.py``). Time grows somewhat
faster than the number of cells (about 7x per doubling of the side on the worst case).

Every solution is checked before it is returned (:func:`_certify`): flow conservation at every cell
and at the bank, dual feasibility and complementary slackness on every arc of the full problem, and
equality of the primal cost and the dual objective. A violation raises ``RuntimeError``; it is a proof
of optimality, not a heuristic.

Only arcs from cells to the bank are modelled when the cells hold more supply than demand (the bank is
a sink); the opposite case is solved on the negated supplies. A path through the bank costs ``2A``,
more than any grid path, so the omitted arcs carry no flow in some optimal solution; the certificate
also checks the omitted arcs' reduced costs, so the returned potentials certify the full problem.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

__all__ = ["GridFlow", "solve_grid_flow"]

_INF = np.int64(1) << np.int64(60)
# Distance labels (push-relabel): _LINF = cannot reach a deficit; _LPAD marks padding cells and an
# absent bank, so that they are never a push target, never a relabel minimum, never a BFS target.
_LINF = np.int32(1 << 30)
_LPAD = np.int32((1 << 30) + 1)
# Grids up to this many cells a side are solved from zero potentials (no coarser level).
_BASE_SIDE = 32
# Global relabelling after every (nodes / _GR_DIV) relabels inside one maximum flow.
_GR_DIV = 16


@dataclass(frozen=True)
class GridFlow:
    """An optimal flow on the ``H x W`` grid graph with its certificate.

    Attributes
    ----------
    cost:
        Optimal total cost, in grid steps times supply units (an exact integer).
    right:
        ``(H, W-1)`` signed flow from cell ``(r, c)`` to ``(r, c+1)``.
    down:
        ``(H-1, W)`` signed flow from cell ``(r, c)`` to ``(r+1, c)``.
    bank:
        ``(H, W)`` signed flow from each cell to the bank (all zero when the supplies sum to zero).
    potentials:
        ``(H, W)`` integer node potentials: ``|pi(u) - pi(v)| <= 1`` for adjacent cells, with
        ``pi(v) - pi(u) = 1`` wherever flow goes from ``u`` to ``v``.
    bank_potential:
        The bank's potential (``|pi(bank) - pi(u)| <= bank_cost``, equality where flow moves).
    bank_cost:
        ``H + W``, the cost of moving one unit between a cell and the bank.
    phases:
        Primal-dual phases used at the finest level (diagnostic).
    """

    cost: int
    right: np.ndarray
    down: np.ndarray
    bank: np.ndarray
    potentials: np.ndarray
    bank_potential: int
    bank_cost: int
    phases: int


# --------------------------------------------------------------------------------------------
# Kernels. Cells live in a padded (H+2) x (W+2) array so that neighbours need no bounds checks;
# node N (one past the padded cells) is the bank. fh[u] is the signed flow u -> u+1, fv[u] the
# signed flow u -> u+Wp, g[u] >= 0 the flow from cell u to the bank.
# Directions k: 0 right, 1 left, 2 down, 3 up; off[k] is the index offset.
# --------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _flow(u, v, k, fh, fv):
    """Signed flow from ``u`` to its neighbour ``v`` in direction ``k``."""
    if k == 0:
        return fh[u]
    if k == 1:
        return -fh[v]
    if k == 2:
        return fv[u]
    return -fv[v]


@njit(cache=True, inline="always")
def _add(u, v, k, fh, fv, a):
    """Send ``a`` more units from ``u`` to its neighbour ``v`` in direction ``k``."""
    if k == 0:
        fh[u] += a
    elif k == 1:
        fh[v] -= a
    elif k == 2:
        fv[u] += a
    else:
        fv[v] -= a


@njit(cache=True)
def _global_relabel(N, valid, ex, fh, fv, g, pi, A, has_bank, off, lab, bfs):
    """Exact distance labels (arc counts) to the nearest deficit node in the tight residual network,
    by a backward BFS; nodes that cannot reach a deficit get ``_LINF`` (padding keeps ``_LPAD``)."""
    B = N
    qt = 0
    for u in range(N + 1):
        if valid[u]:
            if ex[u] < 0:
                lab[u] = 0
                bfs[qt] = u
                qt += 1
            else:
                lab[u] = _LINF
    qh = 0
    while qh < qt:
        v = bfs[qh]
        qh += 1
        lv = lab[v] + 1
        if v == B:
            # tight arcs u -> bank
            for u in range(N):
                if lab[u] == _LINF and pi[B] - pi[u] == A:
                    lab[u] = lv
                    bfs[qt] = u
                    qt += 1
            continue
        for k in range(4):
            u = v - off[k]  # the arc u -> v goes in direction k from u
            if lab[u] != _LINF:  # already labelled, or padding
                continue
            F = _flow(u, v, k, fh, fv)
            if F < 0 or pi[v] - pi[u] == 1:
                lab[u] = lv
                bfs[qt] = u
                qt += 1
        if has_bank and g[v] > 0 and lab[B] == _LINF:  # cancelling arc bank -> v
            lab[B] = lv
            bfs[qt] = B
            qt += 1


# The bank is a node of huge degree. Cells sending flow to it are kept in glist[:gn[0]] (lazily:
# gin marks membership, cells whose bank flow dropped to zero leave at the next compaction), and a
# binary min-heap (hkey, hnode, hsz[0]) of (label, cell) entries finds the lowest-labelled of them
# when the bank must push back; stale entries (label changed, or bank flow zero) are skipped.


@njit(cache=True)
def _heap_push(hkey, hnode, hsz, key, node):
    i = hsz[0]
    if i == hkey.size:
        return False
    hsz[0] = i + 1
    while i > 0:
        p = (i - 1) >> 1
        if hkey[p] <= key:
            break
        hkey[i] = hkey[p]
        hnode[i] = hnode[p]
        i = p
    hkey[i] = key
    hnode[i] = node
    return True


@njit(cache=True)
def _heap_pop(hkey, hnode, hsz):
    n = hsz[0] - 1
    hsz[0] = n
    if n == 0:
        return
    key = hkey[n]
    node = hnode[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and hkey[c + 1] < hkey[c]:
            c += 1
        if hkey[c] >= key:
            break
        hkey[i] = hkey[c]
        hnode[i] = hnode[c]
        i = c
    hkey[i] = key
    hnode[i] = node


@njit(cache=True)
def _bank_rebuild(g, lab, glist, gin, gn, hkey, hnode, hsz):
    """Compact the list of cells with bank flow and rebuild the heap from their current labels."""
    j = 0
    hsz[0] = 0
    for i in range(gn[0]):
        w = glist[i]
        if g[w] > 0:
            glist[j] = w
            j += 1
            _heap_push(hkey, hnode, hsz, lab[w], w)
        else:
            gin[w] = False
    gn[0] = j


@njit(cache=True)
def _bank_note(u, g_before, g, lab, glist, gin, gn, hkey, hnode, hsz):
    """Record that cell ``u`` now sends flow to the bank (it had ``g_before``)."""
    if not gin[u]:
        gin[u] = True
        glist[gn[0]] = u
        gn[0] += 1
    if g_before == 0 and not _heap_push(hkey, hnode, hsz, lab[u], u):
        _bank_rebuild(g, lab, glist, gin, gn, hkey, hnode, hsz)


@njit(cache=True)
def _max_flow(N, valid, ex, fh, fv, g, pi, A, has_bank, off, lab, bfs, ring, inq, grfreq,
              glist, gin, gn, hkey, hnode, hsz):
    """Route as much excess as possible to deficits through tight arcs (FIFO push-relabel with
    global relabelling every ``grfreq`` relabels). Excess that cannot reach a deficit stays where it
    is; the caller then raises potentials."""
    B = N
    mask = ring.size - 1
    while True:
        _global_relabel(N, valid, ex, fh, fv, g, pi, A, has_bank, off, lab, bfs)
        if has_bank:
            _bank_rebuild(g, lab, glist, gin, gn, hkey, hnode, hsz)
        head = 0
        cnt = 0
        for u in range(N + 1):
            inq[u] = False
            if ex[u] > 0 and lab[u] < _LINF:
                ring[cnt] = u
                cnt += 1
                inq[u] = True
        if cnt == 0:
            return
        relabels = 0
        while cnt > 0 and relabels <= grfreq:
            u = ring[head]
            head = (head + 1) & mask
            cnt -= 1
            inq[u] = False
            if u == B:
                # push back along cancelling arcs bank -> w, lowest-labelled w first
                while ex[B] > 0:
                    while hsz[0] > 0:
                        w = hnode[0]
                        if g[w] > 0 and lab[w] == hkey[0]:
                            break
                        _heap_pop(hkey, hnode, hsz)
                    if hsz[0] == 0 or hkey[0] >= _LINF:
                        lab[B] = _LINF
                        relabels += 1
                        break
                    if hkey[0] != lab[B] - 1:
                        lab[B] = hkey[0] + 1
                        relabels += 1
                        continue
                    w = hnode[0]
                    a = min(ex[B], g[w])
                    g[w] -= a
                    ex[B] -= a
                    if g[w] == 0:
                        _heap_pop(hkey, hnode, hsz)
                    if ex[w] <= 0 < ex[w] + a and not inq[w]:
                        ring[(head + cnt) & mask] = w
                        cnt += 1
                        inq[w] = True
                    ex[w] += a
                continue
            while ex[u] > 0:
                target = lab[u] - 1
                for k in range(4):
                    v = u + off[k]
                    if lab[v] != target:  # never true for padding (_LPAD)
                        continue
                    F = _flow(u, v, k, fh, fv)
                    e = ex[u]
                    if F < 0:
                        a = e if e < -F else -F
                    elif pi[v] - pi[u] == 1:
                        a = e
                    else:
                        continue
                    _add(u, v, k, fh, fv, a)
                    ex[u] = e - a
                    if ex[v] <= 0 < ex[v] + a and not inq[v]:
                        ring[(head + cnt) & mask] = v
                        cnt += 1
                        inq[v] = True
                    ex[v] += a
                    if ex[u] == 0:
                        break
                if ex[u] == 0:
                    break
                if has_bank and lab[B] == target and pi[B] - pi[u] == A:
                    a = ex[u]
                    gb = g[u]
                    g[u] = gb + a
                    ex[u] = 0
                    _bank_note(u, gb, g, lab, glist, gin, gn, hkey, hnode, hsz)
                    if ex[B] <= 0 < ex[B] + a and not inq[B]:
                        ring[(head + cnt) & mask] = B
                        cnt += 1
                        inq[B] = True
                    ex[B] += a
                    break
                # relabel
                m = _LINF
                for k in range(4):
                    v = u + off[k]
                    if lab[v] < m and (_flow(u, v, k, fh, fv) < 0 or pi[v] - pi[u] == 1):
                        m = lab[v]
                if has_bank and lab[B] < m and pi[B] - pi[u] == A:
                    m = lab[B]
                relabels += 1
                if m >= _LINF:
                    lab[u] = _LINF
                    break
                lab[u] = m + 1
                if has_bank and g[u] > 0 and not _heap_push(hkey, hnode, hsz, lab[u], u):
                    _bank_rebuild(g, lab, glist, gin, gn, hkey, hnode, hsz)


@njit(cache=True, inline="always")
def _bucket_lower(v, nd, dist, visited, nvis, head, nxt, prv, cnt):
    """Dial's bucket queue (4 circular buckets, doubly linked): give node ``v`` the smaller label ``nd``,
    unlinking it from its old bucket or recording it as visited. Returns the new ``(nvis, cnt)``."""
    if dist[v] == _INF:
        visited[nvis] = v
        nvis += 1
    else:
        if prv[v] >= 0:
            nxt[prv[v]] = nxt[v]
        else:
            head[dist[v] & 3] = nxt[v]
        if nxt[v] >= 0:
            prv[nxt[v]] = prv[v]
        cnt -= 1
    dist[v] = nd
    h = head[nd & 3]
    nxt[v] = h
    prv[v] = -1
    if h >= 0:
        prv[h] = v
    head[nd & 3] = v
    return nvis, cnt + 1


@njit(cache=True)
def _raise_potentials(N, valid, ex, fh, fv, g, pi, A, has_bank, off, dist, head, nxt, prv, done, visited, stamp,
                      glist, gn):
    """Dijkstra from all excess nodes over reduced costs, then ``pi += min(dist, C)`` (stored as
    ``pi += dist - C`` on the settled nodes, a common shift aside) with ``C`` beyond the largest
    distance, which makes every shortest path from the excess to every deficit tight. Returns the
    distance of the nearest deficit, or -1 when no excess is left."""
    B = N
    for i in range(4):
        head[i] = -1
    nvis = 0
    cnt = 0
    for s in range(N):
        if valid[s] and ex[s] > 0:
            dist[s] = 0
            nxt[s] = head[0]
            prv[s] = -1
            if head[0] >= 0:
                prv[head[0]] = s
            head[0] = s
            visited[nvis] = s
            nvis += 1
            cnt += 1
    bank_src = has_bank and ex[B] > 0
    if cnt == 0 and not bank_src:
        return -1
    if has_bank:
        dist[B] = 0 if bank_src else _INF
    bank_done = False
    D = -1
    b = 0
    while True:
        if has_bank and not bank_done and dist[B] == b:
            bank_done = True
            done[B] = stamp
            if ex[B] < 0 and D < 0:
                D = b
            for i in range(gn[0]):  # cancelling arcs bank -> v (reduced cost 0)
                v = glist[i]
                if g[v] > 0 and done[v] != stamp:
                    nd = b - A - (pi[v] - pi[B])
                    if nd != b:
                        raise RuntimeError("grid flow: complementary slackness lost on a bank arc")
                    if nd < dist[v]:
                        nvis, cnt = _bucket_lower(v, nd, dist, visited, nvis, head, nxt, prv, cnt)
            continue
        if cnt == 0:
            if has_bank and not bank_done and dist[B] < _INF:
                b = dist[B]
                continue
            break
        u = head[b & 3]
        if u == -1:
            b += 1
            continue
        head[b & 3] = nxt[u]
        if nxt[u] >= 0:
            prv[nxt[u]] = -1
        cnt -= 1
        done[u] = stamp
        if ex[u] < 0 and D < 0:
            D = b
        for k in range(4):
            v = u + off[k]
            if not valid[v] or done[v] == stamp:
                continue
            if _flow(u, v, k, fh, fv) < 0:
                rc = -1 - (pi[v] - pi[u])
            else:
                rc = 1 - (pi[v] - pi[u])
            if rc < 0 or rc > 2:
                raise RuntimeError("grid flow: dual feasibility lost on a grid arc")
            nd = b + rc
            if nd < dist[v]:
                nvis, cnt = _bucket_lower(v, nd, dist, visited, nvis, head, nxt, prv, cnt)
        if has_bank and not bank_done:
            rc = A - (pi[B] - pi[u])
            if rc < 0:
                raise RuntimeError("grid flow: dual feasibility lost on a bank arc")
            if b + rc < dist[B]:
                dist[B] = b + rc
    if D < 0:
        raise RuntimeError("grid flow: excess with no reachable deficit")
    C = b + 1  # every settled node has dist <= b
    for i in range(nvis):
        v = visited[i]
        if done[v] == stamp:
            pi[v] += dist[v] - C
        dist[v] = _INF
    if has_bank:
        if bank_done:
            pi[B] += dist[B] - C
        dist[B] = _INF
    return D


@njit(cache=True)
def _solve_level(sup, pi0, pib0, A, has_bank):
    """Primal-dual from the dual-feasible potentials ``pi0`` (cells) and ``pib0`` (bank)."""
    H, W = sup.shape
    Wp = W + 2
    N = (H + 2) * Wp
    B = N
    valid = np.zeros(N + 1, np.bool_)
    ex = np.zeros(N + 1, np.int64)
    pi = np.zeros(N + 1, np.int64)
    for r in range(H):
        for c in range(W):
            u = (r + 1) * Wp + c + 1
            valid[u] = True
            ex[u] = sup[r, c]
            pi[u] = pi0[r, c]
    if has_bank:
        valid[B] = True
        total = np.int64(0)
        for r in range(H):
            for c in range(W):
                total += sup[r, c]
        ex[B] = -total
        pi[B] = pib0
    off = np.array([1, -1, Wp, -Wp], np.int64)
    fh = np.zeros(N, np.int64)
    fv = np.zeros(N, np.int64)
    g = np.zeros(N, np.int64)
    lab = np.full(N + 1, _LPAD, np.int32)
    bfs = np.empty(N + 1, np.int64)
    size = 1
    while size < N + 2:
        size *= 2
    ring = np.empty(size, np.int64)
    inq = np.zeros(N + 1, np.bool_)
    dist = np.full(N + 1, _INF, np.int64)
    head = np.full(4, -1, np.int64)
    nxt = np.full(N + 1, -1, np.int64)
    prv = np.full(N + 1, -1, np.int64)
    done = np.zeros(N + 1, np.int64)
    visited = np.empty(N + 1, np.int64)
    glist = np.empty(N, np.int64)
    gin = np.zeros(N, np.bool_)
    gn = np.zeros(1, np.int64)
    hkey = np.empty(2 * N + 16 if has_bank else 1, np.int64)
    hnode = np.empty(hkey.size, np.int64)
    hsz = np.zeros(1, np.int64)
    grfreq = max(N // _GR_DIV, 64)
    phases = 0
    max_phases = 4 * (H + W) * (A + 2) + 100  # a guard against bugs, far above anything observed
    while True:
        _max_flow(N, valid, ex, fh, fv, g, pi, A, has_bank, off, lab, bfs, ring, inq, grfreq,
                  glist, gin, gn, hkey, hnode, hsz)
        phases += 1
        if _raise_potentials(N, valid, ex, fh, fv, g, pi, A, has_bank, off, dist, head, nxt, prv, done,
                             visited, phases, glist, gn) < 0:
            break
        if phases > max_phases:
            raise RuntimeError("grid flow: no convergence")
    right = np.zeros((H, max(W - 1, 0)), np.int64)
    down = np.zeros((max(H - 1, 0), W), np.int64)
    bank = np.zeros((H, W), np.int64)
    pot = np.zeros((H, W), np.int64)
    lo = pi[B] if has_bank else _INF
    for r in range(H):
        for c in range(W):
            u = (r + 1) * Wp + c + 1
            if pi[u] < lo:
                lo = pi[u]
    for r in range(H):
        for c in range(W):
            u = (r + 1) * Wp + c + 1
            if c < W - 1:
                right[r, c] = fh[u]
            if r < H - 1:
                down[r, c] = fv[u]
            bank[r, c] = g[u]
            pot[r, c] = pi[u] - lo
    pib = pi[B] - lo if has_bank else np.int64(0)
    return right, down, bank, pot, pib, phases


@njit(cache=True)
def _certify(sup, right, down, bank, pot, pib, A):
    """Optimality certificate of a grid flow; returns its cost, or -1 if any condition fails.

    Checks (1) conservation ``out - in = sup`` at every cell, with the bank taking the rest;
    (2) dual feasibility of every arc of the full problem (both directions of every grid edge, and
    both directions of every bank arc, cost ``A``) and complementary slackness wherever flow moves;
    (3) primal cost = dual objective ``-sum pi * supply``."""
    H, W = sup.shape
    primal = np.int64(0)
    dual = np.int64(0)
    total = np.int64(0)
    bank_in = np.int64(0)
    for r in range(H):
        for c in range(W):
            out = bank[r, c]
            if c < W - 1:
                out += right[r, c]
            if c > 0:
                out -= right[r, c - 1]
            if r < H - 1:
                out += down[r, c]
            if r > 0:
                out -= down[r - 1, c]
            if out != sup[r, c]:
                return np.int64(-1)
            total += sup[r, c]
            bank_in += bank[r, c]
            dual -= pot[r, c] * sup[r, c]
            for dr, dc in ((0, 1), (1, 0)):
                r2 = r + dr
                c2 = c + dc
                if r2 >= H or c2 >= W:
                    continue
                F = right[r, c] if dc == 1 else down[r, c]
                d = pot[r2, c2] - pot[r, c]
                if d > 1 or d < -1 or (F > 0 and d != 1) or (F < 0 and d != -1):
                    return np.int64(-1)
                primal += F if F > 0 else -F
            F = bank[r, c]
            d = pib - pot[r, c]
            if d > A or d < -A or (F > 0 and d != A) or (F < 0 and d != -A):
                return np.int64(-1)
            primal += A * (F if F > 0 else -F)
    if bank_in != total:
        return np.int64(-1)
    dual += pib * total  # the bank's supply is -total
    if primal != dual:
        return np.int64(-1)
    return primal


@njit(cache=True)
def _lower_envelope(a):
    """The largest function ``<= a`` with ``|f(u) - f(v)| <= 1`` on grid edges (exact L1 distance
    transform in two raster passes)."""
    f = a.copy()
    H, W = a.shape
    for r in range(H):
        for c in range(W):
            if r > 0 and f[r - 1, c] + 1 < f[r, c]:
                f[r, c] = f[r - 1, c] + 1
            if c > 0 and f[r, c - 1] + 1 < f[r, c]:
                f[r, c] = f[r, c - 1] + 1
    for r in range(H - 1, -1, -1):
        for c in range(W - 1, -1, -1):
            if r < H - 1 and f[r + 1, c] + 1 < f[r, c]:
                f[r, c] = f[r + 1, c] + 1
            if c < W - 1 and f[r, c + 1] + 1 < f[r, c]:
                f[r, c] = f[r, c + 1] + 1
    return f


def _coarsen(sup: np.ndarray) -> np.ndarray:
    H, W = sup.shape
    Hc, Wc = (H + 1) // 2, (W + 1) // 2
    pad = np.zeros((2 * Hc, 2 * Wc), np.int64)
    pad[:H, :W] = sup
    return pad.reshape(Hc, 2, Wc, 2).sum(axis=(1, 3))


def _prolong(pic: np.ndarray, H: int, W: int) -> np.ndarray:
    """Dual-feasible fine potentials from coarse ones: a coarse step is two fine steps, so double
    them, then average the largest and the smallest 1-Lipschitz functions around the block-constant
    result (floor of an average of two 1-Lipschitz integer functions is 1-Lipschitz)."""
    P = 2 * np.repeat(np.repeat(pic, 2, axis=0), 2, axis=1)[:H, :W]
    P = np.ascontiguousarray(P)
    lo = _lower_envelope(P)
    up = -_lower_envelope(-P)
    return (lo + up) // 2


def _solve(sup: np.ndarray, has_bank: bool) -> tuple:
    H, W = sup.shape
    A = H + W
    if H <= _BASE_SIDE and W <= _BASE_SIDE:
        pi0 = np.zeros((H, W), np.int64)
        pib0 = 0
    else:
        _, _, _, pic, pibc, _ = _solve(_coarsen(sup), has_bank)
        pi0 = _prolong(pic, H, W)
        pib0 = min(2 * int(pibc), int(pi0.min()) + A) if has_bank else 0
    return _solve_level(sup, pi0, np.int64(pib0), np.int64(A), has_bank)


def solve_grid_flow(supply: np.ndarray) -> GridFlow:
    """Exact min-cost flow on the ``H x W`` 4-neighbour grid, unit cost per step.

    Parameters
    ----------
    supply:
        ``(H, W)`` integers, positive where mass leaves and negative where it arrives. If they do not
        sum to zero, a bank node at cost ``H + W`` from every cell takes (or gives) the difference.
        The total absolute supply times ``2 (H + W)`` must fit in ``int64``.

    Returns
    -------
    GridFlow
        The optimal cost with an optimal flow and optimal potentials, already verified by
        :func:`_certify`.
    """
    sup = np.ascontiguousarray(supply, dtype=np.int64)
    if sup.ndim != 2 or sup.shape[0] < 1 or sup.shape[1] < 1:
        raise ValueError("supply must be a non-empty 2-D array")
    H, W = sup.shape
    A = H + W
    total = int(sup.sum())
    sign = -1 if total < 0 else 1
    if not sup.any():
        right, down = np.zeros((H, W - 1), np.int64), np.zeros((H - 1, W), np.int64)
        bank, pot = np.zeros((H, W), np.int64), np.zeros((H, W), np.int64)
        pib, phases = 0, 0
    else:
        right, down, bank, pot, pib, phases = _solve(sign * sup, total != 0)
        if sign < 0:
            right, down, bank, pot, pib = -right, -down, -bank, -pot, -pib
    cost = int(_certify(sup, right, down, bank, pot, np.int64(pib), np.int64(A)))
    if cost < 0:
        raise RuntimeError("grid flow: the optimality certificate failed")
    return GridFlow(cost, right, down, bank, pot, int(pib), A, int(phases))

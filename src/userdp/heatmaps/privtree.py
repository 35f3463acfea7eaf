"""PrivTree (Zhang, Xiao & Xie, "PrivTree: A Differentially Private Algorithm for Hierarchical
Decompositions", SIGMOD 2016) as a 2-D DP heatmap under USER-level neighbours, with the privacy proof
re-derived for users that are fractional distributions over the grid and for lattice (discrete) Laplace
noise. See :func:`privtree_heatmap` for the algorithm and the proof, and :func:`privtree_lambda` for the
calibration.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..errors import ParameterError
from ..noise import LaplaceCalibration, RngLike, add_laplace, calibrate_laplace, resolve_rng
from ..privacy.guarantees import Neighbours, PureDP
from ..privacy.result import ErrorStatement, Release
from .hierarchy import _check_epsilon, _check_fraction
from .postprocess import add_floor, smooth_within_parts, smoothing_scales, soft_threshold
from .quality import _norm as _normalize  # mass 1 (uniform if nothing is left)
from .sparse import _check_sum_grid

__all__ = [
    "privtree_heatmap",
    "privtree_emd_heatmap",
    "tree_emd_projection",
    "privtree_lambda",
    "privtree_path_sum",
    "privtree_certificate",
    "split_partitions",
]

_FANOUT = 4  # beta of the paper: a quadtree (strips of width 1 split in two, which the proof allows)
_SHIFT_STEPS = 2.0  # lattice steps between the real threshold and the lattice threshold, with room to spare
_LATTICE_BITS = 40  # calibrate_laplace puts the scale 2^40 to 2^41 lattice steps: g <= scale * 2^-40


# --------------------------------------------------------------------------------------------
# The privacy bound for fractional users (see privtree_heatmap's Notes)
# --------------------------------------------------------------------------------------------


def privtree_path_sum(lam: float, beta: float = _FANOUT, shift: float = 0.0) -> float:
    """``S(lam) = sum_{j >= 0} r((j - 1) delta - 1 - shift)`` with ``delta = lam ln beta`` and
    ``r(y) = 1`` for ``y <= 0``, ``r(y) = 1 / (2 e^{y / lam} - 1)`` for ``y > 0``.

    ``lam * eps_tree >= S(lam)`` is the condition under which the decomposition is ``eps_tree``-DP for
    fractional users (``shift`` absorbs the lattice threshold; see :func:`privtree_heatmap`). ``S`` is
    non-increasing in ``lam`` and at least 2. Evaluated with a relative margin of ``1e-9`` (upwards)."""
    lam, beta, shift = float(lam), float(beta), float(shift)
    delta = lam * math.log(beta)
    # terms with (j - 1) delta <= 1 + shift are 1
    n_unit = math.floor((1.0 + shift) / delta) + 2
    total = float(n_unit)
    j = n_unit
    while True:
        y = (j - 1) * delta - 1.0 - shift
        if y <= 0:  # pragma: no cover - floating-point edge of the floor above
            term = 1.0
        else:
            term = 1.0 / (2.0 * math.exp(min(y / lam, 700.0)) - 1.0)
        total += term
        j += 1
        if y > 0 and term < 1e-18 * total:
            break
    return total * (1.0 + 1e-9)


def _certified(lam: float, epsilon_tree: float, beta: float) -> bool:
    """``S(lam) <= lam * eps_tree`` with the lattice shift ``2 g``, ``g <= lam 2^-40``."""
    shift = _SHIFT_STEPS * lam * 2.0**-_LATTICE_BITS
    return privtree_path_sum(lam, beta, shift) <= lam * epsilon_tree


@functools.lru_cache(maxsize=256)
def _smallest_certified_lambda(epsilon_tree: float, beta: float) -> float:
    lo = 2.0 / epsilon_tree  # S >= 2: infeasible below
    hi = 2.0 * lo
    while not _certified(hi, epsilon_tree, beta):
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _certified(mid, epsilon_tree, beta):
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-12 * hi:
            break
    return hi


@functools.lru_cache(maxsize=256)
def privtree_lambda(epsilon_tree: float, beta: float = _FANOUT) -> float:
    """The Laplace scale ``lambda`` of the split decisions for a decomposition budget ``epsilon_tree``.

    The paper's ``lambda = (2 beta - 1) / ((beta - 1) epsilon_tree)`` (its privacy theorem's condition) whenever
    the fractional-user bound certifies it (``S(lambda) <= lambda epsilon_tree``, :func:`privtree_path_sum`;
    for ``beta = 4`` this holds up to ``epsilon_tree`` about 1.178), else the smallest certified ``lambda``
    (1.17x the paper's at ``epsilon_tree = 3``, 1.66x at 10). ``delta = lambda ln beta`` in both cases."""
    e = _check_epsilon(epsilon_tree)
    paper = (2 * beta - 1) / ((beta - 1) * e)
    if _certified(paper, e, beta):
        return paper
    return _smallest_certified_lambda(e, float(beta))


def _tree_calibration(lam: float, epsilon_tree: float, n_cells: int) -> LaplaceCalibration:
    """Lattice Laplace for the split decisions: ``calibrate_laplace(lam * eps_tree, eps_tree, dim=H W)``, so
    ``t >= (S / g + H W) / eps_tree`` whenever ``S(g t) <= lam eps_tree`` (``g t >= lam``; the path sum
    ``S`` is non-increasing in the scale). :func:`privtree_certificate` re-checks it on the lattice."""
    return calibrate_laplace(lam * epsilon_tree, epsilon_tree, dim=n_cells)


def privtree_certificate(cal: LaplaceCalibration, beta: float = _FANOUT) -> float:
    """The decomposition's proven epsilon on the lattice actually used: ``S(g t) / (g t) + dim / t`` with the
    threshold shift of 2 lattice steps (see :func:`privtree_heatmap`). At most ``cal.epsilon`` for every
    calibration :func:`privtree_heatmap` makes (tested)."""
    g, t = cal.granularity, cal.t
    return privtree_path_sum(g * t, beta, _SHIFT_STEPS * g) / (g * t) + cal.dim / t


# --------------------------------------------------------------------------------------------
# The fixed (data-independent) splitting rule
# --------------------------------------------------------------------------------------------


def _halvings(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per depth ``d``: ``(starts, parent)`` of the intervals of ``[0, n)`` after ``d`` halvings (an interval
    of length >= 2 splits into ``[a, a + ceil(len / 2))`` and the rest; length 1 stays), ``parent[i]`` the
    index of interval ``i``'s interval at depth ``d - 1``. Until every interval has length 1."""
    starts = np.array([0], dtype=np.int64)
    out = [(starts, np.zeros(1, dtype=np.int64))]
    while True:
        ends = np.append(starts[1:], n)
        length = ends - starts
        if np.all(length == 1):
            return out
        split = length >= 2
        mids = starts[split] + (length[split] + 1) // 2
        new_starts = np.sort(np.concatenate([starts, mids]))
        parent = np.searchsorted(starts, new_starts, side="right") - 1
        out.append((new_starts, parent))
        starts = new_starts


def split_partitions(shape: tuple[int, int]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Row and column interval starts at every depth of the splitting rule (public, data-independent).

    A region splits each axis of length >= 2 in halves by index (the first half gets the extra index of an
    odd length); an axis of length 1 is not split, so 1-wide strips split in two and single cells not at
    all. At depth ``d`` the potential nodes are the products of the depth-``d`` row and column intervals
    (lists padded with the last, all-singleton, partition to a common depth)."""
    plan = _plan(int(shape[0]), int(shape[1]))
    return list(plan.rows), list(plan.cols)


@dataclass(frozen=True)
class _Plan:
    """The splitting rule of one grid shape, per depth: interval starts and lengths, the index of each
    interval's first child at the next depth, and the interval of every row / column."""

    rows: tuple[np.ndarray, ...]
    cols: tuple[np.ndarray, ...]
    row_len: tuple[np.ndarray, ...]
    col_len: tuple[np.ndarray, ...]
    row_first: tuple[np.ndarray, ...]
    col_first: tuple[np.ndarray, ...]
    row_of: tuple[np.ndarray, ...]
    col_of: tuple[np.ndarray, ...]


def _axis(parts: list[np.ndarray], n: int) -> tuple[tuple, tuple, tuple, tuple]:
    length = [np.diff(np.append(p, n)) for p in parts]
    first = [np.searchsorted(parts[d + 1], parts[d]) for d in range(len(parts) - 1)] + [np.arange(n)]
    of = [np.repeat(np.arange(p.size), ln) for p, ln in zip(parts, length, strict=True)]
    for arrays in (parts, length, first, of):
        for a in arrays:
            a.setflags(write=False)
    return tuple(parts), tuple(length), tuple(first), tuple(of)


@functools.lru_cache(maxsize=64)
def _plan(H: int, W: int) -> _Plan:
    rows, cols = [r[0] for r in _halvings(H)], [c[0] for c in _halvings(W)]
    depth = max(len(rows), len(cols))
    rows += [rows[-1]] * (depth - len(rows))
    cols += [cols[-1]] * (depth - len(cols))
    r, c = _axis(rows, H), _axis(cols, W)
    return _Plan(r[0], c[0], r[1], c[1], r[2], c[2], r[3], c[3])


def _level_counts(s: np.ndarray, plan: _Plan) -> list[np.ndarray]:
    """Node counts of every depth, bottom-up (each by summing the at most 4 children: small rounding)."""
    D = len(plan.rows) - 1
    counts = [np.empty((0, 0))] * (D + 1)
    x = s  # the deepest partition is the single cells (summing them one by one would copy the same bits)
    counts[D] = x
    for d in range(D - 1, -1, -1):
        x = np.add.reduceat(np.add.reduceat(x, plan.row_first[d], axis=0), plan.col_first[d], axis=1)
        counts[d] = x
    return counts


def _budget_split(epsilon: float, tree_fraction: float) -> tuple[float, float]:
    """``(epsilon_tree, epsilon_counts)``: the decomposition and the leaf counts."""
    eps_tree = epsilon * tree_fraction
    return eps_tree, epsilon - eps_tree


def _decompose(
    counts: list[np.ndarray], plan: _Plan, theta: float, delta: float, tree_cal: LaplaceCalibration, src
) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """PrivTree's decomposition (Algorithm 2): the leaves, per depth, as ``(depth, row intervals, column
    intervals)`` of :func:`split_partitions`."""
    D = len(plan.rows) - 1
    leaves: list[tuple[int, np.ndarray, np.ndarray]] = []
    act_r = np.zeros(1, dtype=np.int64)
    act_c = np.zeros(1, dtype=np.int64)
    for d in range(D + 1):
        rl, cl = plan.row_len[d][act_r], plan.col_len[d][act_c]
        splittable = (rl > 1) | (cl > 1)
        split = np.zeros(act_r.size, dtype=bool)
        if d < D and splittable.any():
            b = np.maximum(theta - delta, counts[d][act_r[splittable], act_c[splittable]] - d * delta)
            split[splittable] = add_laplace(b, tree_cal, src) > theta
        keep = ~split
        leaves.append((d, act_r[keep], act_c[keep]))
        if not split.any():
            break
        r_first, c_first = plan.row_first[d][act_r[split]], plan.col_first[d][act_c[split]]
        r_two, c_two = rl[split] > 1, cl[split] > 1
        # children: (r, c), (r, c + 1) if the columns split, (r + 1, c) if the rows split, (r + 1, c + 1) if both
        act_r = np.concatenate([r_first, r_first[c_two], r_first[r_two] + 1, r_first[r_two & c_two] + 1])
        act_c = np.concatenate([c_first, c_first[c_two] + 1, c_first[r_two], c_first[r_two & c_two] + 1])
    return leaves


def _leaf_boxes(
    leaves: list[tuple[int, np.ndarray, np.ndarray]], plan: _Plan
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every leaf's cells ``[r0, r1) x [c0, c1)`` (in the order of ``leaves``) and its area."""
    parts = [
        (plan.rows[d][r], plan.row_len[d][r], plan.cols[d][c], plan.col_len[d][c]) for d, r, c in leaves if r.size
    ]
    if not parts:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty, empty, empty
    r0, rl, c0, cl = (np.concatenate(x).astype(np.int64) for x in zip(*parts, strict=True))
    return r0, r0 + rl, c0, c0 + cl, rl * cl


@njit(cache=True)
def _paint(r0, r1, c0, c1, values, out):
    """``out[r0[i]:r1[i], c0[i]:c1[i]] = values[i]`` for every leaf ``i`` (the leaves are disjoint)."""
    for i in range(r0.size):
        v = values[i]
        for y in range(r0[i], r1[i]):
            for x in range(c0[i], c1[i]):
                out[y, x] = v


def _spread_leaves(
    leaves: list[tuple[int, np.ndarray, np.ndarray]], values: np.ndarray, plan: _Plan, shape: tuple[int, int]
) -> np.ndarray:
    """Each leaf's value spread uniformly over its cells (one compiled pass over the grid)."""
    r0, r1, c0, c1, area = _leaf_boxes(leaves, plan)
    out = np.zeros(shape)
    # 0.0 + v: a cell no leaf covers stays 0.0, and -0.0 becomes 0.0, as when the depths' grids were added up
    _paint(r0, r1, c0, c1, 0.0 + np.asarray(values[: r0.size], dtype=np.float64) / area, out)
    return out


def _leaf_labels(leaves: list[tuple[int, np.ndarray, np.ndarray]], plan: _Plan, shape: tuple[int, int]) -> np.ndarray:
    """``H x W`` labels: the index of each cell's leaf (in the order of ``leaves``; unsigned 32-bit, as
    :func:`~userdp.heatmaps.postprocess.smooth_within_parts` reads them, while they fit)."""
    r0, r1, c0, c1, _ = _leaf_boxes(leaves, plan)
    dtype = np.uint32 if r0.size <= 2**32 else np.int64
    out = np.zeros(shape, dtype=dtype)
    _paint(r0, r1, c0, c1, np.arange(r0.size, dtype=dtype), out)
    return out


def tree_emd_projection(
    leaves: list[tuple[int, np.ndarray, np.ndarray]], values: np.ndarray, plan: _Plan
) -> np.ndarray:
    """Non-negative leaf values from signed noisy ones, cancelling negative mass against positive mass at
    their lowest common ancestor, bottom-up (post-processing).

    Going up the tree from the deepest level, in every node the negative mass of its leaves (what is left of
    it) cancels as much of their positive mass as it can, both shrinking proportionally; what is left of the
    negative mass moves up; at the root it is dropped. In a tree metric (distance growing with the depth of
    the lowest common ancestor) cancelling at the lowest common ancestor is the cheapest way to remove the
    negative mass, so this is the EMD projection onto non-negative vectors for that metric, the tree analogue
    of the LP projection of Ghazi et al.'s appendix D. Unlike clipping, it does not turn the positive noise of
    empty leaves into mass.
    """
    depth = np.concatenate([np.full(r.size, d, dtype=np.int64) for d, r, _ in leaves])
    anc_r = np.concatenate([r for _, r, _ in leaves]).astype(np.int64)
    anc_c = np.concatenate([c for _, _, c in leaves]).astype(np.int64)
    pos = np.maximum(values, 0.0)
    neg = np.maximum(-values, 0.0)
    cur = depth.copy()
    for d in range(int(depth.max(initial=0)), -1, -1):
        up = cur > d  # move those leaves' ancestor indices to depth d: the interval holding their first row
        if up.any():
            anc_r[up] = plan.row_of[d][plan.rows[d + 1][anc_r[up]]]
            anc_c[up] = plan.col_of[d][plan.cols[d + 1][anc_c[up]]]
            cur[up] = d
        act = depth >= d
        node = anc_r[act] * plan.cols[d].size + anc_c[act]
        n_nodes = plan.rows[d].size * plan.cols[d].size
        # group by node: directly by its index when there are not many more nodes than leaves (bincount adds
        # each group's terms in the leaves' order either way, so the sums are the same bits)
        inv = node if n_nodes <= 4 * node.size + 4096 else np.unique(node, return_inverse=True)[1]
        P = np.bincount(inv, pos[act])
        N = np.bincount(inv, neg[act])
        cancel = np.minimum(P, N)
        pos[act] *= (1.0 - np.divide(cancel, P, out=np.zeros_like(P), where=P > 0))[inv]
        neg[act] *= (1.0 - np.divide(cancel, N, out=np.zeros_like(N), where=N > 0))[inv]
    return pos


def privtree_emd_heatmap(s: np.ndarray, epsilon: float, *, rng: RngLike = None) -> Release:
    """userdp's PrivTree variant for heatmaps: :func:`privtree_heatmap` with 30% of the budget on the
    decomposition, the tree-EMD projection of the leaf counts (:func:`tree_emd_projection`) instead of
    clipping, the kept counts shrunk by half a noise scale, each leaf's mass smoothed towards its heavier
    neighbours (:func:`~userdp.heatmaps.postprocess.smooth_within_parts`) and a 1% uniform floor. Same
    guarantee (``epsilon``-DP, add/remove one user): the changes are post-processing and a budget split.
    Chosen on the paper-style Foursquare cells (``experiments/heatmaps.py --paper``), where it beats the
    paper's sparse algorithm and the appendix-D dense algorithm on KL and EMD from epsilon = 0.5 (at
    ``epsilon n`` below about 50 a fixed coarse grid does better: :func:`~userdp.heatmaps.auto_heatmap`)."""
    rel = privtree_heatmap(
        s, epsilon, rng=rng, tree_fraction=0.3, projection="tree", floor=0.01, shrink=0.5, smooth=True
    )
    return Release(
        rel.value,
        rel.guarantee,
        "PrivTree-EMD (PrivTree decomposition, tree-EMD projection, shrinkage, smoothing inside leaves, 1% floor)",
        rel.params,
        rel.error,
        rel.extras,
    )


def privtree_heatmap(
    s: np.ndarray,
    epsilon: float,
    *,
    rng: RngLike = None,
    theta: float = 0.0,
    tree_fraction: float = 0.5,
    beta: int = _FANOUT,
    projection: str = "clip",
    floor: float = 0.0,
    shrink: float = 0.0,
    smooth: bool = False,
) -> Release:
    """PrivTree (Zhang, Xiao & Xie, SIGMOD 2016, Algorithm 2) on the grid, then noisy leaf counts.

    Parameters
    ----------
    s:
        ``H x W`` array (any ``H, W >= 1``): the sum over users of each user's distribution over the cells
        (every user contributes a non-negative vector of mass 1, or nothing).
    epsilon:
        The privacy parameter; the release is ``epsilon``-DP for adding or removing one user.
    rng:
        Random source (``None``: the OS CSPRNG; seeds are for tests and experiments only).
    theta:
        The split threshold (the paper's ``theta``; 0 by default, as in its experiments).
    tree_fraction:
        Share of ``epsilon`` spent on the decomposition (``epsilon_tree``); the rest (``epsilon_counts``) noises
        the leaf counts. Default one half.
    beta:
        The fanout in ``delta = lambda ln beta`` (the quadtree's 4; 1-wide strips split in two, which the proof
        below allows: it only uses ``delta``).
    projection:
        How negative noisy leaf counts are removed (post-processing): ``"clip"`` (set to zero, as the paper)
        or ``"tree"`` (:func:`tree_emd_projection`: cancelled against positive mass under their lowest common
        ancestor, the nearest mass in the tree).
    floor:
        Post-processing: the share of mass spread uniformly over the grid at the end (0 by default). A small
        floor keeps every cell's estimate positive, which bounds KL-type losses where a noisy tree left no mass,
        at an EMD cost of at most ``floor`` times the grid's diameter.
    shrink:
        Post-processing: the kept leaf counts are soft-thresholded by ``shrink`` times the nominal count noise
        scale ``1 / epsilon_counts`` (0 by default: none); if nothing is left, the unshrunk counts are kept.
    smooth:
        Post-processing: spread each leaf's mass towards its heavier neighbours, keeping the leaf's total
        (:func:`~userdp.heatmaps.postprocess.smooth_within_parts`, widths from a sixteenth of the longer side
        down to one cell), instead of uniformly over the leaf. ``False`` by default.

    Returns
    -------
    Release
        ``value``: ``H x W`` non-negative array of mass 1 (uniform if no mass survives the clipping).
        ``params`` has ``epsilon_tree + epsilon_counts = epsilon``, ``lambda`` and ``delta``; ``extras`` the
        number of leaves (a function of the released tree).

    Notes
    -----
    **Algorithm.** Start from the root (the whole grid, depth 0). A visited node ``v`` that has more than one
    cell gets the biased count ``b(v) = max(theta - delta, c(v) - depth(v) delta)`` and the noisy
    ``b^(v) = b(v) + Lap(lambda)`` (lattice Laplace, below); if ``b^(v) > theta`` it is split: each axis of
    length >= 2 is halved by index ranges (``ceil`` half first), so a node has 4 children, or 2 for a 1-wide
    strip; single cells are never split (Algorithm 2 with "``v`` can be split"). The leaves partition the
    grid; their counts get ``Lap(1 / epsilon_counts)``; each leaf's clipped count is spread uniformly over its
    cells and the result is normalized. ``lambda = privtree_lambda(epsilon_tree)`` (the paper's
    ``(2 beta - 1) / ((beta - 1) epsilon_tree)`` where certified, see below), ``delta = lambda ln beta``.

    **Why the paper's proof does not apply as is.** Its privacy theorem (section 3: ``epsilon``-DP for
    ``lambda >= (2 beta - 1) / ((beta - 1) epsilon)``, ``delta = lambda ln beta``) assumes one individual is
    one point: a neighbour changes ``c(v)`` by exactly 1 on one root-to-leaf path. Here a user is a non-negative vector
    ``p`` over the cells with ``sum p <= 1``; node ``v``'s count changes by ``p_v = sum_{cells in v} p``, on
    any number of paths.

    **Privacy proof (fractional users, lattice noise).** Write ``a_v = c(v) - depth(v) delta`` for the
    unfloored biased count on the smaller dataset ``D`` (``D' = D + p``). Because ``s >= 0``, a child's count
    is at most its parent's, so along any root-to-leaf path ``a`` drops by at least ``delta`` per level.

    *Lattice.* The decision is made on the lattice of ``calibrate_laplace``: ``k_v = rint(b(v) / g)`` and
    ``b^ = g (k_v + Z)`` with ``Z ~ DLap(t)`` (``P(z) ∝ r^|z|``, ``r = e^{-1/t}``, scale ``g t >= lambda``);
    ``b^ > theta`` is the event ``Z >= K - k_v`` for the integer ``K = floor(theta / g) + 1`` (exact in
    float64 since ``|theta| < 2^50 g`` is required), ``K g <= theta + g``. Let ``F(k) = P[Z >= K - k]`` and
    ``Delta(j) = ln F(j) - ln F(j - 1)``. From ``P[Z >= i] = r^i / (1 + r)`` (``i >= 0``):
    ``Delta(j) = 1/t`` for ``j <= K`` and, for ``m = j - K >= 1``,
    ``Delta(j) = ln(1 + r^m (1 - r) / (1 + r - r^m)) <= (1/t) r^{m-1} / (2 - r^m)`` (using ``1 - r <= 1/t``
    and ``1 + r - r^m >= r (2 - r^m)``): non-increasing in ``j``. Also ``ln(1 - F)`` changes by at most
    ``1/t`` per step. Rounding: ``k_v`` moves by at most ``p_v / g + 1`` steps between ``D`` and ``D'``.

    *Leaves* (``T``'s unsplit nodes that have a decision): ``ln P[T | D] / P[T | D']`` gets at most
    ``(p_v / g + 1) / t`` from each and nothing from split nodes (their split probability only grows), so it
    is at most ``sum_leaves (p_v / g + 1) / t <= 1 / (g t) + H W / t``: the leaves are disjoint.

    *Split nodes* (the other direction): node ``v`` contributes
    ``sum_{j = k_v + 1}^{k'_v} Delta(j) <= (p_v / g + 1) (1/t) rho_v``, where
    ``rho_v = R(a_v - theta - 1.5 g) <= 1`` bounds ``t Delta`` at the first step
    (``R(y) = 1`` for ``y <= 0``, ``1 / (2 e^{y / (g t)} - 1)`` for ``y > 0``), and only if ``k'_v > k_v``,
    which needs ``a_v + p_v`` above the floor: ``a_v >= theta - delta - 1``. **This is the per-node loss for a
    count change ``p_v`` in ``[0, 1]``: ``p_v`` times the bound PrivTree's analysis gives for a unit change,
    plus one lattice step.** Decompose ``p_v = sum_{cells l in v} p_l`` and exchange the sums:
    ``sum_v p_v rho_v = sum_l p_l sum_{split v containing l} rho_v``. On the path of cell ``l`` the
    contributing ``a_v`` are ``>= theta - delta - 1`` and ``delta`` apart, and ``R`` is non-increasing, so the
    inner sum is at most ``S = sum_{i >= 0} R((i - 1) delta - 1 - 1.5 g)`` (:func:`privtree_path_sum`), and
    ``sum_l p_l <= 1``. The split nodes add ``S / (g t) + (H W - 1) / t`` at most (fewer than ``H W`` split
    nodes). With ``S >= 2 > 1`` both directions are at most ``S / (g t) + H W / t``, and
    ``calibrate_laplace(lambda epsilon_tree, epsilon_tree, dim = H W)`` makes that ``<= epsilon_tree`` as soon
    as ``S(lambda) <= lambda epsilon_tree`` (``g t >= lambda``; ``S`` is non-increasing in the scale).

    *Constants.* With ``delta = lambda ln beta``, ``S = 2 + sum_{i >= 2} R((i - 1) delta - 1)`` (the code
    evaluates it with ``2 g`` for the ``1.5 g`` above, a margin), whose tail terms are
    ``1 / (2 beta^{i-1} e^{-1/lambda} - 1)``: they grow with ``1 / lambda``. As ``epsilon_tree -> 0``,
    ``S -> 2 + sum_{i >= 1} 1 / (2 beta^i - 1) = 2.186``, below the paper's ``(2 beta - 1) / (beta - 1) = 7/3``
    (``beta = 4``). So the paper's ``lambda`` is proven here for ``epsilon_tree <= 1.178``; above,
    :func:`privtree_lambda` uses the smallest certified ``lambda`` (a provably safe calibration: 1.02x the
    paper's at 1.5, 1.17x at 3, 1.66x at 10). The bound is not tight: for unit users (one point each) the
    worst path, computed numerically with the paper's constants, stays below ``0.94 epsilon_tree`` at every
    ``epsilon_tree`` tried (0.001 to 100); a sharper bound for fractional users is not claimed.

    *Leaf counts.* Given the tree, the leaves partition the grid, so their counts change by l1 at most
    ``sum p <= 1``: ``calibrate_laplace(1, epsilon_counts, dim = H W)`` is ``epsilon_counts``-DP. Adaptive
    composition: ``epsilon_tree + epsilon_counts = epsilon``. Clipping, spreading, normalizing:
    post-processing. (Node counts are float64 sums of at most four children per level; their rounding, like
    the rest of :mod:`userdp.heatmaps`, is treated as exact.)
    """
    s = _check_sum_grid(s)
    eps = _check_epsilon(epsilon)
    frac = _check_fraction(tree_fraction, "tree_fraction")
    if projection not in ("clip", "tree"):
        raise ParameterError(f"projection must be 'clip' or 'tree', got {projection!r}")
    if isinstance(floor, bool) or not isinstance(floor, int | float) or not 0 <= floor < 1:
        raise ParameterError(f"floor must be a number in [0, 1), got {floor!r}")
    if isinstance(shrink, bool) or not isinstance(shrink, int | float) or not 0 <= shrink < math.inf:
        raise ParameterError(f"shrink must be a non-negative finite number, got {shrink!r}")
    try:
        beta_f = float(beta)
    except (TypeError, ValueError):
        raise ParameterError(f"beta must be a number above 1, got {beta!r}") from None
    if not (math.isfinite(beta_f) and beta_f > 1):
        raise ParameterError(f"beta must be a number above 1, got {beta!r}")
    try:
        theta_f = float(theta)
    except (TypeError, ValueError):
        raise ParameterError(f"theta must be a finite number, got {theta!r}") from None
    if not math.isfinite(theta_f):
        raise ParameterError(f"theta must be a finite number, got {theta!r}")
    src = resolve_rng(rng)
    H, W = s.shape
    n_cells = H * W
    eps_tree, eps_counts = _budget_split(eps, frac)
    lam = privtree_lambda(eps_tree, beta_f)
    delta = lam * math.log(beta_f)
    tree_cal = _tree_calibration(lam, eps_tree, n_cells)
    if not abs(theta_f) < 2.0**50 * tree_cal.granularity:
        raise ParameterError("theta must be below 2^50 lattice steps of the split noise in absolute value")
    count_cal = calibrate_laplace(1.0, eps_counts, dim=n_cells)

    plan = _plan(H, W)
    counts = _level_counts(s, plan)
    leaves = _decompose(counts, plan, theta_f, delta, tree_cal, src)
    n_leaves = sum(r.size for _, r, _ in leaves)
    noisy_counts = add_laplace(np.concatenate([counts[d][r, c] for d, r, c in leaves]), count_cal, src)
    if projection == "tree":
        kept_counts = tree_emd_projection(leaves, noisy_counts, plan)
    else:
        kept_counts = np.maximum(noisy_counts, 0.0)
    if shrink > 0:
        shrunk = soft_threshold(kept_counts, shrink / eps_counts)
        kept_counts = shrunk if shrunk.sum() > 0 else kept_counts  # nothing left: keep the unshrunk counts
    out = _spread_leaves(leaves, kept_counts, plan, (H, W))
    if smooth:
        out = smooth_within_parts(out, _leaf_labels(leaves, plan, (H, W)), smoothing_scales(max(H, W) / 16))
    out = add_floor(out, floor) if floor > 0 else _normalize(out)
    return Release(
        out,
        PureDP(eps, neighbours=Neighbours.ADD_REMOVE_USER),
        "PrivTree + noisy leaf counts (Zhang, Xiao & Xie 2016, Algorithm 2)"
        + (", tree-EMD projection" if projection == "tree" else "")
        + (f", {floor:g} uniform floor" if floor > 0 else ""),
        {
            "epsilon": eps,
            "epsilon_tree": eps_tree,
            "epsilon_counts": eps_counts,
            "tree_fraction": frac,
            "lambda": lam,
            "delta": delta,
            "theta": theta_f,
            "beta": beta_f,
            "projection": projection,
            "floor": float(floor),
            "shrink": float(shrink),
            "smooth": bool(smooth),
            "paper_lambda": (2 * beta_f - 1) / ((beta_f - 1) * eps_tree),
            "split_noise_scale": tree_cal.scale,
            "count_noise_scale": count_cal.scale,
        },
        ErrorStatement("data-dependent: leaves stop where the biased count falls below theta (PrivTree, section 3)"),
        {"leaves": int(n_leaves)},
    )

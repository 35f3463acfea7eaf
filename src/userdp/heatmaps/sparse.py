"""DP heatmaps by sparse EMD aggregation (Ghazi, He, Kohlhoff, Kumar, Manurangsi, Navalpakkam &
Valliappan, AAAI 2023).

Each user ``i`` holds a distribution ``p_i`` on the ``Delta x Delta`` grid (``Delta = 2^L``); the goal is the
average ``a = (1/n) sum_i p_i`` under ``epsilon``-DP for adding or removing one user. Nothing here needs
``n``: the algorithms release a noisy *sum* and normalize it.

* :func:`dp_sparse_emd_agg` -- Algorithm 1 (DPSparseEMDAgg) + Algorithm 2 (Reconstruct).
  The (scaled) pyramidal transform has, for level ``i = 0..L``, one row per level-``i`` cell
  (``4^i`` cells of side ``2^-i``), equal to the cell's indicator scaled by ``2^-i`` (Definition 3.1).
  Level ``i`` is measured as ``y'_i = (P_i s + nu_i) / 2^i`` with ``nu_i ~ Lap(1/eps_i)`` per cell.
  **Privacy.** Adding or removing a user changes ``s = sum_i p_i`` by a vector of l1 norm 1 (mass 1),
  so each level's cell sums ``P_i s`` change by l1 norm exactly 1: level ``i`` is ``eps_i``-DP and the
  release is ``(sum_i eps_i) = eps``-DP by basic composition, with
  ``eps_i = gamma^{|i - q|} eps / Z`` over the measured levels (``Z`` normalizes the sum to ``eps``).
  Section 4's choices are the defaults: ``gamma = 1/sqrt(2)``, ``w = 20``, and levels below
  ``q = floor(log2 sqrt(w))`` (the first level with at most ``w`` cells) are not measured;
  ``measure_all_levels=True`` gives the full Algorithm 1.
  **Lazy noise.** Reconstruct reads ``y'`` only on the children of kept cells; drawing the Laplace noise of
  exactly those cells, level by level, gives the same output distribution as noising every cell of every
  level (the other noisy values are never used), so the release costs ``O(w L)`` noise draws.
* Reconstruct: keep the top-``w`` children of the kept cells at each level, then solve
  ``argmin_{s >= 0} ||y_hat - P s||_1`` (``y_hat = y'`` on kept cells, 0 elsewhere) as a linear program
  with one variable per kept finest cell and one per left-out cell (a child of a kept cell that was not
  kept): mass placed anywhere inside a left-out cell contributes to the same kept ancestor rows and costs
  ``sum_{j >= level} 2^-j`` per unit in the rows below, so its position inside the cell does not change
  the objective. **Where that mass goes:** it is spread uniformly over the left-out cell's finest cells --
  the LP is indifferent, and the uniform spread is the choice that assumes nothing about the data below a
  cell that the algorithm chose not to look into (it also minimizes the worst-case EMD to any placement
  inside the cell up to a factor 2). An all-zero LP solution gives the uniform distribution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import DataError, ParameterError
from ..noise import RngLike, add_laplace, calibrate_laplace, resolve_rng
from ..privacy.guarantees import Neighbours, PureDP
from ..privacy.result import ErrorStatement, Release

__all__ = [
    "level_budgets",
    "pyramid_level",
    "dp_sparse_emd_agg",
    "reconstruct",
    "SparseLevels",
    "pad_square",
    "padded_levels",
]


def _check_grid(s: np.ndarray) -> tuple[int, int]:
    """``(rows, cols)`` of a valid aggregate: a non-empty 2-D array of finite numbers."""
    try:
        s = np.asarray(s)
    except (TypeError, ValueError):
        raise DataError("the aggregate must be a numeric rows x cols array") from None
    if s.ndim != 2 or s.shape[0] == 0 or s.shape[1] == 0:
        raise DataError("the aggregate must be a non-empty 2-D (rows x cols) array")
    if s.dtype.kind not in "biuf":
        raise DataError(f"the aggregate must be numeric, got dtype {s.dtype}")
    if not np.all(np.isfinite(s)):
        raise DataError("the aggregate contains NaN or inf")
    return int(s.shape[0]), int(s.shape[1])


def _check_sum_grid(s: np.ndarray) -> np.ndarray:
    """``s`` as a float64 ``rows x cols`` array of finite, non-negative values (a sum of user distributions),
    else DataError. The messages never quote values read from the data."""
    _check_grid(s)
    arr = np.asarray(s, dtype=np.float64)
    if np.any(arr < 0):
        raise DataError("the aggregate of user distributions cannot be negative")
    if np.any(arr > 2.0**53):  # each user adds at most 1 to a cell
        raise DataError("the aggregate of user distributions holds more than 2^53 users in a cell")
    return arr


def padded_levels(shape: tuple[int, int]) -> int:
    """``L`` with ``2^L`` the smallest power of two holding both sides of the grid: the pyramid runs over the
    enclosing ``2^L x 2^L`` square, whose extra (padding) cells are public and empty."""
    return max(0, math.ceil(math.log2(max(shape))))


def pad_square(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(S, real)``: ``s`` in the top-left corner of the enclosing ``2^L x 2^L`` square (zeros elsewhere), and
    the public mask of the real cells."""
    H, W = s.shape
    side = 2 ** padded_levels(s.shape)
    S = np.zeros((side, side))
    S[:H, :W] = s
    real = np.zeros((side, side), dtype=bool)
    real[:H, :W] = True
    return S, real


def pyramid_level(s: np.ndarray, i: int) -> np.ndarray:
    """Cell sums ``P_i s`` of level ``i`` (a ``2^i x 2^i`` array)."""
    side = s.shape[0]
    k = 2**i
    return s.reshape(k, side // k, k, side // k).sum(axis=(1, 3))


def level_budgets(
    epsilon: float, L: int, w: int = 20, gamma: float = 1 / math.sqrt(2), measure_all_levels: bool = False
) -> tuple[int, dict[int, float]]:
    """``(q, {level: eps_i})`` with ``eps_i = gamma^{|i - q|} eps / Z`` over the measured levels."""
    eps = float(epsilon)
    if not (math.isfinite(eps) and eps > 0):
        raise ParameterError(f"epsilon must be positive and finite, got {epsilon!r}")
    if w < 1:
        raise ParameterError("w must be at least 1")
    if not 0 < gamma <= 1:
        raise ParameterError("gamma must lie in (0, 1]")
    q = min(int(math.floor(math.log2(math.sqrt(w)))), L)
    levels = range(0, L + 1) if measure_all_levels else range(q, L + 1)
    weights = {i: gamma ** abs(i - q) for i in levels}
    Z = sum(weights.values())
    return q, {i: eps * v / Z for i, v in weights.items()}


@dataclass
class SparseLevels:
    """What Reconstruct uses: kept cells per level (as (row, col) arrays at that level), their noisy
    values ``y'``, and the left-out cells (children of kept cells that were not kept)."""

    L: int
    kept: dict[int, np.ndarray]
    values: dict[int, np.ndarray]
    left_out: dict[int, np.ndarray]
    measured: set
    real: np.ndarray | None = None
    """The public mask of real cells on the ``2^L x 2^L`` square (``None``: every cell is real)."""


def _children(cells: np.ndarray) -> np.ndarray:
    r, c = cells[:, 0], cells[:, 1]
    ch = np.stack([np.stack([2 * r + a, 2 * c + b], axis=1) for a in (0, 1) for b in (0, 1)], axis=1)
    return ch.reshape(-1, 2)


def child_sums(x: np.ndarray) -> np.ndarray:
    """Sum of the four children of every node of the level above (``2m x 2m`` -> ``m x m``)."""
    return x[0::2, 0::2] + x[0::2, 1::2] + x[1::2, 0::2] + x[1::2, 1::2]


def _pyramid(f: np.ndarray, L: int) -> dict[int, np.ndarray]:
    """All level sums ``P_i f`` bottom-up, ``O(4^L)`` in total."""
    out = {L: f}
    for i in range(L - 1, -1, -1):
        out[i] = child_sums(out[i + 1])
    return out


def _measure(
    s: np.ndarray,
    L: int,
    budgets: dict[int, float],
    w: int,
    rng,
    real: np.ndarray | None = None,
    noisy_sums: dict[int, np.ndarray] | None = None,
) -> SparseLevels:
    """Algorithm 1 lines 4-7 with lazy noise, and Algorithm 2 lines 3-7 (top-w children).

    With a ``real`` mask (a rectangular grid padded to the enclosing square), cells made only of padding are
    publicly empty: they are never measured nor kept (their sum is 0 on every input, so leaving them out
    reveals nothing). ``noisy_sums`` (level -> ``2^i x 2^i`` array of already noisy cell sums ``P_i s + nu_i``,
    as the shuffle-model analyzer recovers them, :mod:`.shuffle`) replaces the lazy noise: ``s`` is then not
    read."""
    kept: dict[int, np.ndarray] = {}
    values: dict[int, np.ndarray] = {}
    left_out: dict[int, np.ndarray] = {}
    pyramid = _pyramid(s, L) if noisy_sums is None else None
    reals = _pyramid(real.astype(np.int64), L) if real is not None else None
    cells = np.zeros((1, 2), dtype=np.int64)  # S_0: the root
    for i in range(0, L + 1):
        if i > 0:
            cells = _children(kept[i - 1])
        if reals is not None:
            cells = cells[reals[i][cells[:, 0], cells[:, 1]] > 0]
        if noisy_sums is not None:
            noisy = noisy_sums[i][cells[:, 0], cells[:, 1]] / 2.0**i if i in budgets else None
        elif i in budgets:
            sums = pyramid[i][cells[:, 0], cells[:, 1]]
            # calibrated for the whole level (4^i cells, l1 sensitivity 1), drawn for the cells read here
            noisy = add_laplace(sums, calibrate_laplace(1.0, budgets[i], dim=4**i), rng) / 2.0**i
        else:
            noisy = None  # unmeasured level: every cell is kept (at most w of them)
        if noisy is None or cells.shape[0] <= w:
            keep = np.arange(cells.shape[0])
        else:
            keep = np.argpartition(-noisy, w - 1)[:w]
        mask = np.zeros(cells.shape[0], dtype=bool)
        mask[keep] = True
        kept[i] = cells[mask]
        values[i] = noisy[mask] if noisy is not None else np.full(mask.sum(), np.nan)
        left_out[i] = cells[~mask]
    return SparseLevels(L, kept, values, left_out, set(budgets), real)


def reconstruct(levels: SparseLevels) -> np.ndarray:
    """Algorithm 2, line 9: ``argmin_{s >= 0} ||y_hat - P s||_1`` as an LP (HiGHS), returned on the full grid.

    Variables: ``x`` for kept finest cells, ``z`` for left-out cells, ``t`` for the absolute deviations of
    the kept measured rows. Rows not kept have ``y_hat = 0``, so their cost is linear in the variables.
    """
    L = levels.L
    side = 2**L
    fin = levels.kept[L]
    lo_cells = [(i, c) for i in range(1, L + 1) for c in levels.left_out[i]]
    nx, nz = fin.shape[0], len(lo_cells)
    # rows: kept cells at measured levels
    row_index: dict[tuple[int, int, int], int] = {}
    rows_y = []
    for i in sorted(levels.measured):
        for c, y in zip(levels.kept[i], levels.values[i], strict=True):
            row_index[(i, int(c[0]), int(c[1]))] = len(rows_y)
            rows_y.append(y)
    nr = len(rows_y)
    # incidence: variable v contributes 2^-i to the kept row of its level-i ancestor, for measured levels
    A_rows, A_cols, A_vals = [], [], []

    def add(var: int, level: int, r: int, c: int) -> None:
        for i in range(level, -1, -1):
            key = (i, r >> (level - i), c >> (level - i))
            j = row_index.get(key)
            if j is not None:
                A_rows.append(j)
                A_cols.append(var)
                A_vals.append(2.0**-i)

    for v, c in enumerate(fin):
        add(v, L, int(c[0]), int(c[1]))
    lin_cost = np.zeros(nx + nz)
    for k, (i, c) in enumerate(lo_cells):
        # the left-out cell's own row is not kept, so start contributing from its parent upwards
        add(nx + k, i - 1, int(c[0]) >> 1, int(c[1]) >> 1)
        lin_cost[nx + k] = sum(2.0**-j for j in range(i, L + 1) if j in levels.measured)
    import scipy.sparse as sp  # imported on use (0.25 s)

    A = sp.csr_matrix((A_vals, (A_rows, A_cols)), shape=(nr, nx + nz))
    y = np.asarray(rows_y, dtype=np.float64)
    # minimize lin_cost . v + sum t  s.t.  A v - t <= y,  -A v - t <= -y,  v, t >= 0
    I = sp.identity(nr, format="csr")
    A_ub = sp.vstack([sp.hstack([A, -I]), sp.hstack([-A, -I])]).tocsr()
    b_ub = np.concatenate([y, -y])
    c_obj = np.concatenate([lin_cost, np.ones(nr)])
    from scipy.optimize import linprog  # imported on use: scipy.optimize costs 0.15 s to import

    res = linprog(c_obj, A_ub=A_ub, b_ub=b_ub, bounds=(0, None), method="highs")
    if res.status != 0:  # pragma: no cover - the LP is always feasible and bounded
        raise RuntimeError(f"reconstruction LP failed: {res.message}")
    v = res.x
    out = np.zeros((side, side))
    out[fin[:, 0], fin[:, 1]] += v[:nx]
    for k, (i, c) in enumerate(lo_cells):
        if v[nx + k] > 0:
            span = 2 ** (L - i)
            r0, c0 = int(c[0]) * span, int(c[1]) * span
            if levels.real is None:
                out[r0 : r0 + span, c0 : c0 + span] += v[nx + k] / span**2
            else:  # uniformly over the cell's real cells (it has at least one, or it was never a candidate)
                block = levels.real[r0 : r0 + span, c0 : c0 + span]
                out[r0 : r0 + span, c0 : c0 + span] += block * (v[nx + k] / block.sum())
    return out


def dp_sparse_emd_agg(
    s: np.ndarray,
    epsilon: float,
    w: int = 20,
    gamma: float = 1 / math.sqrt(2),
    measure_all_levels: bool = False,
    rng: RngLike = None,
) -> Release:
    """DPSparseEMDAgg (Algorithm 1) + Reconstruct (Algorithm 2) on the sum ``s = sum_i p_i``.

    ``s`` must be the sum of per-user *distributions* (each of mass 1) on a ``rows x cols`` grid of any
    size; the pyramid runs over the enclosing ``2^L x 2^L`` square (:func:`pad_square`), whose padding cells
    are public and empty. The guarantee is ``epsilon``-DP for adding or removing one user. The value is the
    normalized estimate ``a_hat`` (``rows x cols``).
    """
    s = _check_sum_grid(s)
    H, W = s.shape
    src = resolve_rng(rng)
    L = padded_levels((H, W))
    q, budgets = level_budgets(epsilon, L, w, gamma, measure_all_levels)
    S, real = pad_square(s)
    levels = _measure(S, L, budgets, w, src, None if real.all() else real)
    s_hat = reconstruct(levels)[:H, :W]
    total = s_hat.sum()
    a_hat = s_hat / total if total > 0 else np.full_like(s_hat, 1.0 / s_hat.size)
    return Release(
        a_hat,
        PureDP(epsilon, neighbours=Neighbours.ADD_REMOVE_USER),
        "DPSparseEMDAgg + Reconstruct (Ghazi et al., Algorithms 1-2)",
        {
            "epsilon": float(epsilon),
            "w": int(w),
            "gamma": float(gamma),
            "q": q,
            "levels": L,
            "level_epsilons": {int(k): v for k, v in budgets.items()},
            "measure_all_levels": measure_all_levels,
        },
        ErrorStatement("EMD error O(sqrt(k) / (eps n)) plus the best k-sparse approximation error (Theorem 3.1)"),
        {"kept_finest_cells": int(levels.kept[L].shape[0])},
    )

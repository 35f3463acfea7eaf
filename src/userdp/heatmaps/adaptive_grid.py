"""Adaptive grids (AG) of Qardaji, Yang & Li, "Differentially Private Grids for Geospatial Data" (ICDE 2013),
as a DP heatmap on an ``H x W`` grid under user-level neighbours. See :func:`adaptive_grid_heatmap`."""

from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError
from ..noise import RngLike, add_laplace, calibrate_laplace, resolve_rng
from ..privacy.guarantees import Neighbours, PureDP
from ..privacy.result import ErrorStatement, Release
from .baselines import check_user_count_source, user_count_estimate
from .hierarchy import _check_epsilon, _check_fraction
from .quality import _norm as _normalize  # mass 1 (uniform if nothing is left)
from .sparse import _check_sum_grid

__all__ = ["adaptive_grid_heatmap", "ag_first_level_size", "ag_second_level_size", "index_edges"]


def index_edges(n: int, m: int) -> np.ndarray:
    """``m' + 1`` edges splitting ``[0, n)`` into ``m' = min(m, n)`` near-equal non-empty index ranges
    (``floor(i n / m')``): the cells of an ``m``-cell axis aligned with the grid's cells."""
    m = max(1, min(int(m), int(n)))
    return (np.arange(m + 1, dtype=np.int64) * int(n)) // m


def ag_first_level_size(n_estimate: float, epsilon: float, c: float = 10.0) -> int:
    """``m1 = max(10, ceil(ceil(sqrt(N eps / c)) / 4))`` (Qardaji et al., section V; ``N`` clipped at 0)."""
    n = max(0.0, float(n_estimate))
    return max(10, math.ceil(math.ceil(math.sqrt(n * epsilon / c)) / 4))


def ag_second_level_size(noisy_count: float, epsilon2: float, c2: float = 5.0) -> int:
    """``m2 = ceil(sqrt(N' eps2 / c2))`` for a first-level cell with noisy count ``N'`` (at least 1; a cell
    with ``N' <= 0`` is kept whole), ``eps2 = (1 - alpha) eps``, ``c2 = c / 2``."""
    return max(1, math.ceil(math.sqrt(max(0.0, float(noisy_count)) * epsilon2 / c2)))


def _budget_split(epsilon: float, alpha: float, total_fraction: float, public_n: bool) -> tuple[float, float, float]:
    """``(eps_total, eps_1, eps_2)``: the noisy user count (0 with a public estimate), the first level
    (``alpha`` of the rest) and the second level (``1 - alpha`` of the rest)."""
    eps_total = 0.0 if public_n else epsilon * total_fraction
    rest = epsilon - eps_total
    eps1 = alpha * rest
    return eps_total, eps1, rest - eps1


def adaptive_grid_heatmap(
    s: np.ndarray,
    epsilon: float,
    *,
    rng: RngLike = None,
    n_public: float | None = None,
    alpha: float = 0.5,
    c: float = 10.0,
    total_fraction: float = 0.05,
) -> Release:
    """Adaptive grids (AG; Qardaji, Yang & Li, ICDE 2013, section V) on the grid's cells.

    Parameters
    ----------
    s:
        ``H x W`` array (any ``H, W >= 1``): the sum over users of each user's distribution over the cells
        (every user contributes a non-negative vector of mass 1, or nothing).
    epsilon:
        The privacy parameter; the release is ``epsilon``-DP for adding or removing one user.
    rng:
        Random source (``None``: the OS CSPRNG; seeds are for tests and experiments only).
    n_public:
        A *public* estimate of the number of users ``N`` (e.g. from an earlier release or from outside the
        data; like :func:`userdp.heatmaps.dense_resolution`'s). ``None`` (default): ``total_fraction`` of
        ``epsilon`` buys a noisy total ``N^ = sum(s) + Lap`` instead. ``N`` is never read from the data for free.
    alpha:
        Share of the grid budget spent on the first level (the paper's ``alpha = 0.5``).
    c:
        The paper's constant ``c = 10`` (``c2 = c / 2`` for the second level).
    total_fraction:
        Share of ``epsilon`` spent on the noisy user count when ``n_public`` is None (default 5%).

    Returns
    -------
    Release
        ``value``: ``H x W`` non-negative array of mass 1 (uniform if no mass survives the clipping).
        ``params``: ``epsilon_total + epsilon_level1 + epsilon_level2 = epsilon``, ``m1`` and the user count
        estimate used (public, or the noisy one, which is part of the release).

    Notes
    -----
    **Algorithm** (with ``eps_g = epsilon - eps_total`` the budget of the two grids).

    1. ``N^``: ``n_public``, or ``sum(s) + Lap(1 / eps_total)``.
    2. First level: ``m1 = max(10, ceil(ceil(sqrt(N^ eps_g / c)) / 4))``; an ``m1 x m1`` grid (capped at
       ``H`` rows and ``W`` columns) of near-equal index ranges, so its cells are unions of grid cells (uneven
       by at most one row or column); noisy counts ``v`` with ``Lap(1 / (alpha eps_g))``.
    3. Second level: every first-level cell with noisy count ``N'`` is split into ``m2 x m2`` with
       ``m2 = ceil(sqrt(N' (1 - alpha) eps_g / c2))``, ``c2 = c / 2`` (at least 1, capped by the cell's rows
       and columns, index ranges again); noisy counts ``u`` with ``Lap(1 / ((1 - alpha) eps_g))``.
    4. Constrained inference (section V): per first-level cell with ``k`` sub-cells, the inverse-variance
       average ``v' = (k b2^2 v + b1^2 sum u) / (k b2^2 + b1^2)`` (``b1, b2`` the two Laplace scales; with the
       nominal scales this is the paper's ``(alpha^2 m2^2 v + (1 - alpha)^2 sum u) / (alpha^2 m2^2 +
       (1 - alpha)^2)``), then ``u' = u + (v' - sum u) / k``.
    5. Heatmap: every sub-cell's ``max(u', 0)`` is spread uniformly over its grid cells; normalize.

    **Privacy proof.** Adding or removing a user changes ``s`` by ``p >= 0`` with ``sum p <= 1``, over any
    number of cells. (1) The total ``sum s`` changes by at most 1: the lattice Laplace release
    (:func:`userdp.noise.laplace_mechanism`, rounding included) is ``eps_total``-DP. (2) Given ``N^``
    (public or released), ``m1`` and the first-level partition are fixed; the first-level counts are sums
    over a partition, so they change by l1 at most ``sum p <= 1``: ``calibrate_laplace(1, alpha eps_g,
    dim = #cells)`` is ``alpha eps_g``-DP. (3) Given the first level's release, the second-level partition is
    fixed and again a partition of the grid: l1 sensitivity at most 1, ``calibrate_laplace(1,
    (1 - alpha) eps_g, dim = H W)`` (at least the number of sub-cells, so the rounding of every released
    coordinate is covered) is ``(1 - alpha) eps_g``-DP. Adaptive sequential composition:
    ``eps_total + alpha eps_g + (1 - alpha) eps_g = epsilon``. Steps 4-5 read only released values:
    post-processing. A user spread over many cells costs nothing extra, since each level is a partition.
    """
    s = _check_sum_grid(s)
    eps = _check_epsilon(epsilon)
    alpha = _check_fraction(alpha, "alpha")
    try:
        c = float(c)
    except (TypeError, ValueError):
        raise ParameterError(f"c must be a positive finite number, got {c!r}") from None
    if not (math.isfinite(c) and c > 0):
        raise ParameterError(f"c must be a positive finite number, got {c!r}")
    public, total_fraction = check_user_count_source(n_public, total_fraction)
    src = resolve_rng(rng)
    H, W = s.shape
    eps_total, eps1, eps2 = _budget_split(eps, alpha, total_fraction, public)
    eps_grid = eps1 + eps2

    # 1. the user count
    n_hat = user_count_estimate(s, eps_total, n_public, src)
    # 2. first level
    m1 = ag_first_level_size(n_hat, eps_grid, c)
    re1, ce1 = index_edges(H, m1), index_edges(W, m1)
    first = np.add.reduceat(np.add.reduceat(s, re1[:-1], axis=0), ce1[:-1], axis=1)
    cal1 = calibrate_laplace(1.0, eps1, dim=first.size)
    v = add_laplace(first, cal1, src)
    # 3. second level: the partition depends on the released v only
    m2 = np.ceil(np.sqrt(np.maximum(v, 0.0) * eps2 / (c / 2)))
    heights, widths = np.diff(re1), np.diff(ce1)
    mr = np.minimum(np.maximum(m2, 1), heights[:, None]).astype(np.int64)  # sub-rows of each first-level cell
    mc = np.minimum(np.maximum(m2, 1), widths[None, :]).astype(np.int64)
    k = mr * mc
    offset = np.concatenate([[0], np.cumsum(k.reshape(-1))[:-1]]).reshape(k.shape)
    # every grid cell's sub-cell: row offset x in a cell of height h with m sub-rows (edges floor(a h / m))
    # lies in sub-row ((x + 1) m - 1) // h
    bi = np.repeat(np.arange(heights.size), heights)
    bj = np.repeat(np.arange(widths.size), widths)
    x = (np.arange(H) - re1[bi])[:, None]
    y = (np.arange(W) - ce1[bj])[None, :]
    cell_mr, cell_mc = mr[bi][:, bj], mc[bi][:, bj]
    a = ((x + 1) * cell_mr - 1) // heights[bi][:, None]
    b = ((y + 1) * cell_mc - 1) // widths[bj][None, :]
    sub = offset[bi][:, bj] + a * cell_mc + b  # H x W sub-cell ids
    n_sub = int(k.sum())
    sums = np.bincount(sub.reshape(-1), weights=s.reshape(-1), minlength=n_sub)
    cal2 = calibrate_laplace(1.0, eps2, dim=H * W)
    u = add_laplace(sums, cal2, src)
    # 4. constrained inference per first-level cell
    owner = np.repeat(np.arange(k.size), k.reshape(-1))  # first-level cell of each sub-cell
    su = np.bincount(owner, weights=u, minlength=k.size)
    kf = k.reshape(-1).astype(np.float64)
    b1, b2 = cal1.scale, cal2.scale
    v_adj = (kf * b2**2 * v.reshape(-1) + b1**2 * su) / (kf * b2**2 + b1**2)
    u_adj = np.maximum(u + ((v_adj - su) / kf)[owner], 0.0)
    # 5. the heatmap: each sub-cell's count spread uniformly over its grid cells
    area = np.bincount(sub.reshape(-1), minlength=n_sub)
    out = (u_adj / area)[sub]
    return Release(
        _normalize(out),
        PureDP(eps, neighbours=Neighbours.ADD_REMOVE_USER),
        "adaptive grids AG (Qardaji, Yang & Li 2013, section V)",
        {
            "epsilon": eps,
            "epsilon_total": eps_total,
            "epsilon_level1": eps1,
            "epsilon_level2": eps2,
            "alpha": alpha,
            "c": c,
            "n_public": n_hat if public else None,
            "m1": m1,
            "first_level_shape": tuple(int(x) for x in first.shape),
        },
        ErrorStatement("no closed-form bound; the grid sizes balance noise and non-uniformity error (section V)"),
        {"n_estimate": n_hat, "second_level_cells": n_sub},
    )

"""userdp's default heatmap: a fixed coarse grid when the signal is weak, PrivTree-EMD when it is not.

On the paper's construction (``experiments/heatmaps.py --paper``) no single algorithm wins at every
``epsilon``: with ``epsilon n`` around 20 (``epsilon = 0.1``, 200 users), PrivTree's decomposition has too
little budget to find the clusters and the appendix-D coarse grid is better; from ``epsilon n`` of about 100
the adaptive tree is better. :func:`auto_heatmap` switches between the two on ``epsilon n^``, with ``n^`` a
public estimate of the number of users or a noisy count bought with a small share of the budget, and
improves both by post-processing (:mod:`userdp.heatmaps.postprocess`).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError
from ..noise import RngLike, resolve_rng
from ..privacy.guarantees import Neighbours, PureDP
from ..privacy.result import ErrorStatement, Release
from .baselines import (
    check_user_count_source,
    dense_projected_counts,
    dense_resolution,
    spread_blocks,
    user_count_estimate,
)
from .hierarchy import _check_epsilon
from .postprocess import add_floor, smooth_within_parts, soft_threshold
from .privtree import privtree_emd_heatmap
from .sparse import _check_sum_grid, padded_levels

__all__ = ["auto_heatmap", "dense_emd_heatmap", "SWITCH_EPSILON_USERS"]

SWITCH_EPSILON_USERS = 40.0
"""``epsilon n^`` below which :func:`auto_heatmap` uses the coarse grid (measured: the grid wins at 20 and 30,
the tree from 50 on; see ``experiments/heatmaps.py --paper``)."""


def _budget(epsilon: float, total_fraction: float, public_n: bool) -> tuple[float, float]:
    """``(epsilon_total, epsilon_map)``: the noisy user count (0 with a public estimate) and the map."""
    eps_total = 0.0 if public_n else epsilon * total_fraction
    return eps_total, epsilon - eps_total


def dense_emd_heatmap(
    s: np.ndarray,
    epsilon: float,
    coarse_side: int,
    *,
    shrink: float = 0.5,
    smooth: bool = True,
    floor: float = 0.01,
    rng: RngLike = None,
) -> Release:
    """userdp's variant of the dense EMD aggregation (Ghazi et al., appendix D): the same noisy coarse grid
    and LP projection (:func:`~userdp.heatmaps.dense_emd_agg`), then post-processing only.

    Parameters
    ----------
    s:
        ``H x W`` sum over users of each user's distribution over the cells.
    epsilon:
        ``epsilon``-DP for adding or removing one user.
    coarse_side:
        Coarse cells a side of the enclosing power-of-two square (public; e.g. :func:`dense_resolution`).
    shrink:
        The projected coarse counts are soft-thresholded by ``shrink / epsilon`` (``shrink`` times the nominal
        noise scale); if nothing is left, the projection is kept as it is.
    smooth:
        Spread each coarse cell's mass towards its heavier neighbours, keeping its total
        (:func:`~userdp.heatmaps.postprocess.smooth_within_parts`, widths half a coarse cell, three times),
        instead of uniformly.
    floor:
        Share of the mass spread uniformly at the end (bounds KL where the estimate is 0).
    rng:
        ``None`` (the OS CSPRNG) or a seed (experiments only).

    Returns
    -------
    Release
        ``value``: ``H x W``, non-negative, mass 1. Guarantee: ``PureDP(epsilon)``, add/remove one user (the
        noisy coarse counts are :func:`dense_emd_agg`'s; everything after them is post-processing).
    """
    H, W = _check_sum_grid(s).shape
    eps = _check_epsilon(epsilon)
    if isinstance(shrink, bool) or not isinstance(shrink, int | float) or not 0 <= shrink < math.inf:
        raise ParameterError(f"shrink must be a non-negative finite number, got {shrink!r}")
    if isinstance(floor, bool) or not isinstance(floor, int | float) or not 0 <= floor < 1:
        raise ParameterError(f"floor must be a number in [0, 1), got {floor!r}")
    proj, span = dense_projected_counts(s, eps, coarse_side, rng)
    kept = soft_threshold(proj, shrink / eps) if shrink > 0 else proj
    if not kept.sum() > 0:
        kept = proj  # nothing above the threshold: keep the projection (post-processing either way)
    # (the threshold is in units of the nominal noise scale 1/eps, not of the lattice calibration's scale)
    fine = spread_blocks(kept, span, (H, W))
    if smooth and span > 1:
        rows, cols = np.arange(H) // span, np.arange(W) // span
        blocks = rows[:, None] * (-(-W // span)) + cols[None, :]
        fine = smooth_within_parts(fine, blocks, (span / 2,) * 3)
    return Release(
        add_floor(fine, floor),
        PureDP(eps, neighbours=Neighbours.ADD_REMOVE_USER),
        "dense EMD aggregation (Ghazi et al., appendix D) with shrinkage, smoothing inside coarse cells and a "
        f"{floor:g} uniform floor",
        {"epsilon": eps, "coarse_side": int(coarse_side), "shrink": float(shrink), "smooth": bool(smooth),
         "floor": float(floor)},
        ErrorStatement("EMD error O~(1/sqrt(eps n)) (Theorem D.1; post-processing does not change the bound)"),
        {},
    )


def auto_heatmap(
    s: np.ndarray,
    epsilon: float,
    *,
    n_public: float | None = None,
    total_fraction: float = 0.05,
    switch: float = SWITCH_EPSILON_USERS,
    rng: RngLike = None,
) -> Release:
    """userdp's default DP heatmap: :func:`dense_emd_heatmap` on the appendix-D coarse grid when
    ``epsilon' n^ < switch``, :func:`~userdp.heatmaps.privtree_emd_heatmap` otherwise.

    Parameters
    ----------
    s:
        ``H x W`` sum over users of each user's distribution over the cells.
    epsilon:
        ``epsilon``-DP for adding or removing one user, in total.
    n_public:
        A public estimate of the number of users (never read from the data), or ``None``: then
        ``total_fraction`` of ``epsilon`` buys ``n^ = sum(s) + Lap``
        (:func:`~userdp.heatmaps.baselines.user_count_estimate`), released with the map.
    total_fraction:
        Share of ``epsilon`` for the noisy count when ``n_public`` is None (default 5%).
    switch:
        The threshold on ``epsilon' n^`` (``epsilon'`` the budget left for the map); ``0`` always takes the
        tree, ``math.inf`` always the grid.
    rng:
        ``None`` (the OS CSPRNG) or a seed (experiments only).

    Returns
    -------
    Release
        ``value``: ``H x W``, non-negative, mass 1. ``params["branch"]`` is ``"dense"`` or ``"privtree-emd"``,
        ``params["n_estimate"]`` the ``n^`` used. Guarantee: ``PureDP(epsilon)``, add/remove one user.

    Notes
    -----
    **Privacy.** ``n^`` is ``epsilon_total``-DP (or public); given ``n^``, the branch and the coarse side are
    public functions of ``(epsilon', n^)``, and either branch is ``epsilon'``-DP. Sequential composition:
    ``epsilon_total + epsilon' = epsilon``.

    **Why a switch.** A PrivTree split decision needs a node count above ``depth x delta`` with
    ``delta ~ 3 / epsilon_tree``; with ``epsilon n`` near 20 only the root's children pass it, and the tree
    ends coarser than the appendix-D grid, whose side ``2^round(log2 sqrt(epsilon n))`` is sized for exactly
    that signal. With ``epsilon n`` of 100 and more the tree goes deep where the users are and wins.
    """
    s = _check_sum_grid(s)
    eps = _check_epsilon(epsilon)
    try:
        switch_f = float(switch)
    except (TypeError, ValueError):
        raise ParameterError(f"switch must be a non-negative number, got {switch!r}") from None
    if not switch_f >= 0:  # inf allowed: always the grid
        raise ParameterError(f"switch must be a non-negative number, got {switch!r}")
    public, total_fraction = check_user_count_source(n_public, total_fraction)
    eps_total, eps_map = _budget(eps, total_fraction, public)
    src = resolve_rng(rng)
    n_hat = user_count_estimate(s, eps_total, n_public, src)
    # a negative noisy count counts as 0: switch = 0 always takes the tree, switch = inf always the grid
    if switch_f == math.inf or eps_map * max(n_hat, 0.0) < switch_f:
        side = dense_resolution(eps_map, max(1.0, n_hat), 2 ** padded_levels(s.shape))
        inner = dense_emd_heatmap(s, eps_map, side, rng=src)
        branch = "dense"
    else:
        inner = privtree_emd_heatmap(s, eps_map, rng=src)
        branch = "privtree-emd"
    return Release(
        inner.value,
        PureDP(eps, neighbours=Neighbours.ADD_REMOVE_USER),
        f"userdp auto heatmap ({inner.mechanism})",
        {
            "epsilon": eps,
            "epsilon_total": eps_total,
            "epsilon_map": eps_map,
            "n_public": float(n_public) if public else None,
            "n_estimate": n_hat,
            "switch": switch_f,
            "branch": branch,
            **{f"{branch}_{k}": v for k, v in inner.params.items() if k != "epsilon"},
        },
        inner.error,
        inner.extras,
    )

"""Hierarchical histograms with consistency (Hay, Rastogi, Miklau & Suciu, "Boosting the Accuracy of
Differentially Private Histograms Through Consistency", PVLDB 3(1), 2010) as a 2-D DP heatmap.

A complete quadtree (branching ``k = 4``) over the grid padded to the enclosing ``2^L x 2^L`` square;
Laplace noise on every node's count with the same budget ``epsilon / h`` on each of the ``h = L + 1``
levels (the paper's hierarchical query ``H``, section 4); then the paper's constrained inference
(Theorem 3, the minimum-L2 consistent tree computed in two passes); then post-processing for a heatmap
(crop the padding, clip negatives, normalize). Vectorized: one noise draw for the whole tree, one array
operation per level in each pass (about 0.2 s at 512 x 512).

The module also holds the input checks shared by :mod:`.privtree` and :mod:`.adaptive_grid`.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError
from ..noise import RngLike, add_laplace, calibrate_laplace, resolve_rng
from ..privacy.guarantees import Neighbours, PureDP
from ..privacy.result import ErrorStatement, Release
from .quality import _norm as _normalize  # mass 1 (uniform if nothing is left)
from .sparse import _check_sum_grid, _pyramid, child_sums, pad_square, padded_levels

__all__ = ["hierarchical_heatmap", "hay_consistency", "quadtree_levels"]

_BRANCHING = 4  # a quadtree


# --------------------------------------------------------------------------------------------
# Input checks shared by the three published baselines
# --------------------------------------------------------------------------------------------


def _check_epsilon(epsilon: float) -> float:
    try:
        e = float(epsilon)
    except (TypeError, ValueError):
        raise ParameterError(f"epsilon must be a positive finite number, got {epsilon!r}") from None
    if not (math.isfinite(e) and e > 0):
        raise ParameterError(f"epsilon must be a positive finite number, got {epsilon!r}")
    return e


def _check_fraction(x: float, name: str) -> float:
    try:
        f = float(x)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must lie strictly between 0 and 1, got {x!r}") from None
    if not 0.0 < f < 1.0:
        raise ParameterError(f"{name} must lie strictly between 0 and 1, got {x!r}")
    return f


# --------------------------------------------------------------------------------------------
# The tree and Hay et al.'s constrained inference
# --------------------------------------------------------------------------------------------


def _spread(x: np.ndarray) -> np.ndarray:
    """Copy every node's value to its four children (``m x m`` -> ``2m x 2m``)."""
    return np.repeat(np.repeat(x, 2, axis=0), 2, axis=1)


def quadtree_levels(s: np.ndarray) -> list[np.ndarray]:
    """The complete quadtree of cell sums over ``s`` zero-padded to the enclosing ``2^L x 2^L`` square:
    ``levels[l]`` is the ``2^l x 2^l`` array of level-``l`` node counts (``levels[0]`` the root, ``levels[L]``
    the padded grid). Padding cells are public and empty."""
    S, _ = pad_square(np.asarray(s, dtype=np.float64))
    L = padded_levels(S.shape)
    levels = _pyramid(S, L)
    return [levels[i] for i in range(L + 1)]


def hay_consistency(noisy: list[np.ndarray]) -> list[np.ndarray]:
    """Hay et al.'s constrained inference on a complete quadtree (Theorem 3 with ``k = 4``).

    ``noisy[l]`` holds the noisy counts ``h~`` of level ``l`` (``2^l x 2^l``, root first). Returns ``h-``,
    the unique minimum-L2 tree (``sum (h- - h~)^2`` minimal) in which every node equals the sum of its
    children, by the theorem's two passes. With ``l`` the *height* of a node (leaves have height 1):

    * bottom-up (weighted averaging): ``z[v] = h~[v]`` at the leaves, else
      ``z[v] = (k^l - k^(l-1)) / (k^l - 1) h~[v] + (k^(l-1) - 1) / (k^l - 1) sum_{children u} z[u]``;
    * top-down (mean consistency): ``h-[root] = z[root]``, else
      ``h-[v] = z[v] + (h-[parent] - sum_{children w of parent} z[w]) / k``.

    A consistent input is returned unchanged (it is its own least-squares projection).
    """
    k = _BRANCHING
    L = len(noisy) - 1
    for lvl, x in enumerate(noisy):
        if np.shape(x) != (2**lvl, 2**lvl):
            raise ParameterError("level l of the tree must be a 2^l x 2^l array, root first")
    z: list[np.ndarray] = [np.empty(0)] * (L + 1)
    z[L] = np.asarray(noisy[L], dtype=np.float64)
    for lvl in range(L - 1, -1, -1):
        height = L - lvl + 1
        kl, kl1 = float(k) ** height, float(k) ** (height - 1)
        own = np.asarray(noisy[lvl], dtype=np.float64)
        z[lvl] = (kl - kl1) / (kl - 1) * own + (kl1 - 1) / (kl - 1) * child_sums(z[lvl + 1])
    out: list[np.ndarray] = [np.empty(0)] * (L + 1)
    out[0] = z[0]
    for lvl in range(1, L + 1):
        out[lvl] = z[lvl] + _spread((out[lvl - 1] - child_sums(z[lvl])) / k)
    return out


def _level_epsilon(epsilon: float, levels: int) -> float:
    """The budget of each level: ``epsilon / h`` (uniform, as in Hay et al.'s hierarchical query)."""
    return epsilon / levels


def hierarchical_heatmap(s: np.ndarray, epsilon: float, *, rng: RngLike = None) -> Release:
    """Hierarchical quadtree histogram with consistency (Hay, Rastogi, Miklau & Suciu, PVLDB 2010).

    Parameters
    ----------
    s:
        ``H x W`` array (any ``H, W >= 1``): the sum over users of each user's distribution over the cells
        (every user contributes a non-negative vector of mass 1, or nothing).
    epsilon:
        The privacy parameter; the release is ``epsilon``-DP for adding or removing one user.
    rng:
        Random source (``None``: the OS CSPRNG; seeds are for tests and experiments only).

    Returns
    -------
    Release
        ``value``: ``H x W`` non-negative array of mass 1 (uniform if no mass survives the clipping).

    Notes
    -----
    **Algorithm.** ``L = ceil(log2 max(H, W))``; the grid is zero-padded to ``2^L x 2^L`` (the padding is
    public and empty) and summed into the complete quadtree of ``h = L + 1`` levels (the hierarchical query
    ``H`` of the paper's section 4 with branching ``k = 4``). Every node count gets lattice Laplace noise with
    budget ``epsilon / h`` per level; the noisy tree is made consistent by the paper's Theorem 3
    (:func:`hay_consistency`: weighted averaging bottom-up, mean consistency top-down; the minimum-L2 tree in
    which every node is the sum of its children); the consistent leaves are cropped to ``H x W``, so the
    padding cells get zero weight, negatives are set to zero and the result is normalized.

    **Privacy proof.** Adding or removing a user changes ``s`` by a non-negative vector ``p`` of l1 norm at
    most 1, spread over any number of cells. The level-``l`` node counts are sums of ``s`` over a partition
    of the padded grid, so they change by the vector of ``p``'s masses in the level-``l`` nodes: l1 norm
    ``sum p <= 1`` on every level, however ``p`` is spread (Hay et al. count ``h`` for one record per level;
    a fractional user is no worse, since the per-level l1 norm is the same ``sum p``). Each level is released
    by the lattice Laplace mechanism calibrated by ``calibrate_laplace(1, epsilon / h, dim)``, with ``dim``
    the number of nodes of the whole tree (at least the level's, so the deterministic rounding of each
    level's coordinates to the lattice is covered): each level is ``(epsilon / h)``-DP, and the ``h`` levels
    together are ``epsilon``-DP by basic composition (all levels are drawn in one call; its noise is
    independent per coordinate, so this is the same as ``h`` separate releases). Consistency, cropping,
    clipping and normalization read only the noisy tree: post-processing.
    """
    s = _check_sum_grid(s)
    eps = _check_epsilon(epsilon)
    src = resolve_rng(rng)
    H, W = s.shape
    levels = quadtree_levels(s)
    h = len(levels)
    eps_level = _level_epsilon(eps, h)
    n_nodes = sum(x.size for x in levels)
    cal = calibrate_laplace(1.0, eps_level, dim=n_nodes)
    flat = add_laplace(np.concatenate([x.reshape(-1) for x in levels]), cal, src)
    noisy, start = [], 0
    for x in levels:
        noisy.append(flat[start : start + x.size].reshape(x.shape))
        start += x.size
    leaves = hay_consistency(noisy)[-1][:H, :W]
    value = _normalize(np.maximum(leaves, 0.0))
    return Release(
        value,
        PureDP(eps, neighbours=Neighbours.ADD_REMOVE_USER),
        "hierarchical quadtree + consistency (Hay et al. 2010, Theorem 3)",
        {
            "epsilon": eps,
            "levels": h,
            "level_epsilon": eps_level,
            "level_epsilons": [eps_level] * h,
            "padded_side": levels[-1].shape[0],
            "branching": _BRANCHING,
            "laplace_scale": cal.scale,
        },
        ErrorStatement(
            "consistent, unbiased node counts before clipping; a range query's error variance is O(h^3 / eps^2) "
            "and never above that of the noisy tree's canonical decomposition (Hay et al., section 4)"
        ),
        {},
    )

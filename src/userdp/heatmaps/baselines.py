"""Baselines for DP heatmaps: Laplace noise on every cell (Liu et al. 2019, as in Ghazi et al. section 4),
its top-t% thresholding variant, and the dense EMD aggregation of Ghazi et al., appendix D."""

from __future__ import annotations

import math

import numpy as np

from ..errors import DataError, ParameterError
from ..noise import RngLike, laplace_mechanism
from ..privacy.guarantees import Neighbours, PureDP
from ..privacy.result import ErrorStatement, Release
from .hierarchy import _check_fraction
from .quality import _norm as _normalize  # mass 1 (uniform if nothing is left)
from .sparse import _check_grid, padded_levels

__all__ = [
    "laplace_heatmap",
    "dense_emd_agg",
    "dense_resolution",
    "emd_projection_nonnegative",
    "block_sums",
    "spread_blocks",
    "dense_projected_counts",
    "user_count_estimate",
]


def laplace_heatmap(s: np.ndarray, epsilon: float, top_percent: float | None = None, rng: RngLike = None) -> Release:
    """Laplace noise ``Lap(1/eps)`` on every cell of the sum (l1 sensitivity 1 under add/remove one user),
    negatives set to zero; with ``top_percent`` only the largest ``top_percent``% noisy cells are kept."""
    _check_grid(s)
    s = np.asarray(s, dtype=np.float64)
    noisy = laplace_mechanism(s.reshape(-1), 1.0, epsilon, rng).reshape(s.shape)
    out = np.maximum(noisy, 0.0)
    name = "Laplace per cell (baseline)"
    if top_percent is not None:
        if not 0 < top_percent <= 100:
            raise ParameterError("top_percent must lie in (0, 100]")
        k = max(1, int(math.ceil(out.size * top_percent / 100)))
        thr = np.partition(out.reshape(-1), out.size - k)[out.size - k]
        out = np.where(out >= thr, out, 0.0)
        name = f"Laplace per cell, top {top_percent:g}% (baseline)"
    return Release(
        _normalize(out),
        PureDP(epsilon, neighbours=Neighbours.ADD_REMOVE_USER),
        name,
        {"epsilon": float(epsilon), "top_percent": top_percent},
        None,
        {},
    )


def emd_projection_nonnegative(x: np.ndarray) -> np.ndarray:
    """``argmin_{s >= 0} ||s - x||_EMD`` on a ``rows x cols`` grid (L1 ground distance with cell side
    ``1/max(rows, cols)``, EMD norm with the bank at the grid's L1 diameter ``alpha = (rows + cols) /
    max(rows, cols)``, which is 2 on a square), as a min-cost-flow LP solved with HiGHS."""
    H, W = x.shape
    n = H * W
    idx = np.arange(n).reshape(H, W)
    src = np.concatenate([idx[:, :-1].ravel(), idx[:, 1:].ravel(), idx[:-1, :].ravel(), idx[1:, :].ravel()])
    dst = np.concatenate([idx[:, 1:].ravel(), idx[:, :-1].ravel(), idx[1:, :].ravel(), idx[:-1, :].ravel()])
    E = src.size
    # variables: edge flows f (E), bank in b_in (n), bank out b_out (n), output s (n)
    # conservation at cell v: x_v + inflow - outflow + b_in - b_out - s_v = 0
    rows = np.concatenate([dst, src, np.arange(n), np.arange(n), np.arange(n)])
    cols = np.concatenate(
        [np.arange(E), np.arange(E), E + np.arange(n), E + n + np.arange(n), E + 2 * n + np.arange(n)]
    )
    vals = np.concatenate([np.ones(E), -np.ones(E), np.ones(n), -np.ones(n), -np.ones(n)])
    import scipy.sparse as sp  # imported on use (0.25 s)

    A = sp.csr_matrix((vals, (rows, cols)), shape=(n, E + 3 * n))
    step = 1.0 / max(H, W)
    cost = np.concatenate([np.full(E, step), np.full(2 * n, (H + W) * step), np.zeros(n)])
    from scipy.optimize import linprog  # imported on use: scipy.optimize costs 0.15 s to import

    res = linprog(cost, A_eq=A, b_eq=-x.reshape(-1), bounds=(0, None), method="highs")
    if res.status != 0:  # pragma: no cover
        raise RuntimeError(f"EMD projection LP failed: {res.message}")
    return res.x[E + 2 * n :].reshape(H, W)


def block_sums(s: np.ndarray, span: int) -> np.ndarray:
    """Sums over ``span x span`` blocks of a ``rows x cols`` array (the last row and column of blocks may be
    partial): a ``ceil(rows/span) x ceil(cols/span)`` array."""
    H, W = s.shape
    h, w = -(-H // span), -(-W // span)
    out = np.zeros((h * span, w * span))
    out[:H, :W] = s
    return out.reshape(h, span, w, span).sum(axis=(1, 3))


def spread_blocks(coarse: np.ndarray, span: int, shape: tuple[int, int]) -> np.ndarray:
    """Each coarse cell's mass spread uniformly over the real fine cells of its ``span x span`` block."""
    H, W = shape
    real = block_sums(np.ones(shape), span)
    fine = np.kron(np.divide(coarse, real, out=np.zeros_like(coarse), where=real > 0), np.ones((span, span)))
    return fine[:H, :W]


def dense_emd_agg(s: np.ndarray, epsilon: float, coarse_side: int, rng: RngLike = None) -> Release:
    """Dense EMD aggregation (Ghazi et al., appendix D, Theorem D.1): snap the sum to a public coarse grid of
    ``coarse_side`` cells a side of the enclosing power-of-two square (the paper's
    ``Delta* = 2^{log sqrt(eps n)}``; choose it from a public estimate of ``n``, e.g. :func:`dense_resolution`),
    add ``Lap(1/eps)`` to every coarse cell that holds a real cell (the others are public padding), project
    onto non-negative vectors in EMD norm by an LP, normalize, and spread each coarse cell uniformly over its
    real fine cells."""
    H, W = _check_grid(s)
    proj, span = dense_projected_counts(s, epsilon, coarse_side, rng)
    fine = spread_blocks(_normalize(proj), span, (H, W))
    return Release(
        fine,
        PureDP(epsilon, neighbours=Neighbours.ADD_REMOVE_USER),
        "dense EMD aggregation (Ghazi et al., appendix D)",
        {"epsilon": float(epsilon), "coarse_side": coarse_side},
        ErrorStatement("EMD error O~(1/sqrt(eps n)) (Theorem D.1)"),
        {},
    )


def dense_projected_counts(
    s: np.ndarray, epsilon: float, coarse_side: int, rng: RngLike = None
) -> tuple[np.ndarray, int]:
    """The released part of :func:`dense_emd_agg`: ``(counts, span)``, the EMD projection onto non-negative
    vectors of the coarse grid's noisy counts (``epsilon``-DP, add/remove one user), and the coarse cells'
    side in fine cells."""
    H, W = _check_grid(s)
    s = np.asarray(s, dtype=np.float64)
    L = padded_levels((H, W))
    Lc = int(round(math.log2(coarse_side))) if coarse_side >= 1 else -1
    if Lc < 0 or 2**Lc != coarse_side or Lc > L:
        raise ParameterError("coarse_side must be a power of two no larger than the grid side")
    span = 2 ** (L - Lc)
    coarse = block_sums(s, span)
    noisy = laplace_mechanism(coarse.reshape(-1), 1.0, epsilon, rng).reshape(coarse.shape)
    return emd_projection_nonnegative(noisy), span


def user_count_estimate(
    s: np.ndarray, epsilon_total: float, n_public: float | None, rng: RngLike = None
) -> float:
    """The number of users a mechanism may use to size itself: ``n_public`` (a public estimate, never read
    from the data; checked to be finite and non-negative), or else ``sum(s) + Lap(1 / epsilon_total)``
    (the lattice Laplace mechanism: ``epsilon_total``-DP under add/remove one user, whose distribution has
    mass at most 1). The noisy value is part of the release."""
    if n_public is not None:
        try:
            n_pub = float(n_public)
        except (TypeError, ValueError):
            raise DataError("the public user estimate must be a number") from None
        if not (math.isfinite(n_pub) and n_pub >= 0):
            raise DataError("the public user estimate must be finite and non-negative")
        return n_pub
    return float(laplace_mechanism(np.array([float(np.sum(s))]), 1.0, epsilon_total, rng)[0])


def check_user_count_source(n_public: float | None, total_fraction: float) -> tuple[bool, float]:
    """``(public, total_fraction)`` for a mechanism that sizes itself from the number of users: a public
    estimate is checked (:func:`user_count_estimate`) or else the share of epsilon for the noisy count must
    lie strictly between 0 and 1. Checked before anything is drawn."""
    if n_public is not None:
        user_count_estimate(None, 0.0, n_public)
        return True, total_fraction
    return False, _check_fraction(total_fraction, "total_fraction")


def dense_resolution(epsilon: float, n_public: int, side: int) -> int:
    """``Delta* = 2^{round(log2 sqrt(eps n))}`` from a *public* estimate of the number of users, capped by
    the grid side."""
    if n_public < 1:
        raise DataError("the public user estimate must be positive")
    side = 2 ** max(0, math.ceil(math.log2(side)))  # of the enclosing power-of-two square
    return int(min(side, 2 ** max(0, round(math.log2(math.sqrt(epsilon * n_public))))))

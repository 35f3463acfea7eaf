"""Heatmaps from distributions (Gaussian filter, Ghazi et al. section 2.3) and the evaluation metrics of
section 4 (SIM, Pearson CC, KL, EMD): pure array functions. Drawing maps is reporting, not part of a
mechanism: see :mod:`userdp.report.maps`."""

from __future__ import annotations

import numpy as np

from ..metrics.emd import grid_emd

__all__ = ["gaussian_heatmap", "similarity", "pearson_cc", "kl_divergence", "heatmap_emd", "all_metrics"]

KL_EPS = 2.220446049250313e-16


def _kernel_matrix(n: int, sigma: float) -> np.ndarray:
    """``G[x, x'] = exp(-(x - x')^2 / 2 sigma^2)`` on ``n`` cells (every pair: no truncation)."""
    d = np.arange(n, dtype=np.float64)
    return np.exp(-((d[:, None] - d[None, :]) ** 2) / (2.0 * sigma * sigma))


def gaussian_heatmap(p: np.ndarray, sigma: float, truncate: float | None = None) -> np.ndarray:
    """``H(x) = sum_x' e^{-|x-x'|^2 / 2 sigma^2} p(x') / Z(x')`` with ``Z(x') = sum_x e^{-|x-x'|^2/2sigma^2}``
    over the grid (section 2.3): every source cell's mass is spread by a Gaussian of ``sigma`` cells and
    renormalized at the borders, so the total mass is kept. Works on any ``rows x cols`` grid.

    By default the kernel is the untruncated one of section 2.3: the Gaussian is separable, so ``H = G_r
    (p / Z) G_c^T`` with the full ``rows x rows`` and ``cols x cols`` kernel matrices (``Z`` their column sums'
    outer product); its tails are exact down to floating-point underflow (``exp(-745)``, beyond about 38
    sigma). ``truncate`` instead cuts the kernel at ``truncate`` sigmas with SciPy's ``gaussian_filter``
    (faster on very large grids; the earlier experiments used 4)."""
    p = np.asarray(p, dtype=np.float64)
    if sigma <= 0:
        return p.copy()
    if truncate is not None:
        from scipy.ndimage import gaussian_filter  # imported on use (0.1 s)

        Z = gaussian_filter(np.ones_like(p), sigma, mode="constant", truncate=truncate)
        return gaussian_filter(p / Z, sigma, mode="constant", truncate=truncate)
    Gr, Gc = _kernel_matrix(p.shape[0], sigma), _kernel_matrix(p.shape[1], sigma)
    Z = np.outer(Gr.sum(axis=0), Gc.sum(axis=0))
    return Gr @ (p / Z) @ Gc.T


def _norm(h: np.ndarray) -> np.ndarray:
    t = h.sum()
    return h / t if t > 0 else np.full_like(h, 1.0 / h.size)


def similarity(h: np.ndarray, h_hat: np.ndarray) -> float:
    """SIM = sum of min(h, h_hat) of the normalized heatmaps (= 1 - total variation). Higher is better."""
    return float(np.minimum(_norm(h), _norm(h_hat)).sum())


def pearson_cc(h: np.ndarray, h_hat: np.ndarray) -> float:
    """Pearson correlation coefficient of the cell values. Higher is better."""
    a, b = h.reshape(-1), h_hat.reshape(-1)
    if a.std() == 0 or b.std() == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


def kl_divergence(h: np.ndarray, h_hat: np.ndarray) -> float:
    """KL(h || h_hat) = sum h log(eps + h / (h_hat + eps)) of the normalized heatmaps with eps = 2.2e-16 (the
    MIT saliency benchmark's smoothing, which keeps cells where h_hat = 0 finite). Lower is better."""
    p, q = _norm(h), _norm(h_hat)
    return float(np.sum(p * np.log(KL_EPS + p / (q + KL_EPS))))


def heatmap_emd(h: np.ndarray, h_hat: np.ndarray) -> float:
    """Exact EMD with L1 ground distance on ``[0,1)^2`` (cell side 1/Delta) between the normalized heatmaps.
    Lower is better."""
    return grid_emd(_norm(h), _norm(h_hat), raw=True)


def all_metrics(h: np.ndarray, h_hat: np.ndarray, emd: bool = True) -> dict[str, float]:
    out = {"SIM": similarity(h, h_hat), "CC": pearson_cc(h, h_hat), "KL": kl_divergence(h, h_hat)}
    if emd:
        out["EMD"] = heatmap_emd(h, h_hat)
    return out

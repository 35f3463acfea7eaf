"""Post-processing of released heatmap counts: shrinkage, mass-preserving smoothing and a uniform floor.

Every function here reads only a released (noisy) estimate and public structure (the grid, or a partition
of it that was itself released), so it costs no privacy. They turn a piecewise-constant estimate into a
better one under EMD and KL:

* :func:`soft_threshold` shrinks every noisy count towards zero: on clustered data most cells are empty,
  and the positive noise of empty cells is mass spread far from the truth;
* :func:`smooth_within_parts` spreads each part's mass towards the neighbouring parts with more mass,
  keeping every part's total, instead of uniformly inside the part;
* :func:`add_floor` mixes in a little uniform mass, which bounds KL-type losses where the estimate is 0.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..errors import ParameterError
from .quality import _norm as _normalize  # mass 1 (uniform if nothing is left)

__all__ = ["soft_threshold", "smooth_within_parts", "smoothing_scales", "add_floor"]


def soft_threshold(values: np.ndarray, tau: float) -> np.ndarray:
    """``max(values - tau, 0)``, elementwise (``tau >= 0``, in the units of ``values``)."""
    if not tau >= 0:
        raise ParameterError(f"the threshold must be non-negative, got {tau!r}")
    return np.maximum(np.asarray(values, dtype=np.float64) - tau, 0.0)


def smoothing_scales(coarsest: float) -> tuple[float, ...]:
    """Gaussian widths (in cells) for :func:`smooth_within_parts`: ``coarsest``, halved down to one cell
    (at least one width)."""
    out = [float(coarsest)]
    while out[-1] / 2 >= 1.0:
        out.append(out[-1] / 2)
    return tuple(out)


def smooth_within_parts(v: np.ndarray, parts: np.ndarray, sigmas: tuple[float, ...]) -> np.ndarray:
    """Smooth ``v`` with Gaussians of widths ``sigmas`` (in cells, one after another; zero outside the grid),
    rescaling after each so that every part keeps its total.

    Parameters
    ----------
    v:
        ``H x W`` non-negative estimate, constant inside each part (e.g. a leaf's count spread uniformly).
    parts:
        ``H x W`` integer labels ``0..k-1`` of a partition of the grid that is public or released (the coarse
        blocks of a fixed grid, the leaves of a released tree).
    sigmas:
        Widths, widest first.

    Returns
    -------
    numpy.ndarray
        Non-negative, with the same total per part as ``v``: inside a part, mass moves towards the
        neighbouring parts that hold more of it. A part whose smoothed mass vanishes (underflows to 0) keeps
        its values from the width before.

    Notes
    -----
    An iterative proportional fitting between a smooth field and the part totals. Post-processing of a
    released estimate and a released partition: it costs no privacy. It helps under EMD because a cluster
    cut by a part boundary is more likely near that boundary than uniform inside the part. The grid is
    taken as zero outside (the public box is the whole domain), so a part on the border also leans slightly
    inwards; with a single part nothing is done. Each width is applied by :func:`gaussian_blur`, whose cost
    does not grow with the width: the whole smoothing of a 1024 x 1024 grid takes about 25 ms. Labels with
    gaps are renumbered first (the work grows with the largest label otherwise).
    """
    v = np.asarray(v, dtype=np.float64)
    if v.ndim != 2:
        raise ParameterError(f"the estimate must be a 2-D grid, got shape {v.shape}")
    if not (np.isfinite(v).all() and (v >= 0).all()):  # (v is released: this quotes nothing private)
        raise ParameterError("the estimate to smooth must be finite and non-negative")
    labels = np.asarray(parts)
    if labels.shape != v.shape or not np.issubdtype(labels.dtype, np.integer):
        raise ParameterError(f"parts must be integer labels of shape {v.shape}, got {labels.dtype} {labels.shape}")
    if int(labels.min(initial=0)) < 0:
        raise ParameterError("parts must be non-negative labels")
    k = int(labels.max(initial=0)) + 1
    if k > v.size:  # gaps: renumber 0 .. k-1 (the same partition)
        labels = np.unique(labels, return_inverse=True)[1].reshape(v.shape)
        k = int(labels.max(initial=0)) + 1
    if k <= 1:
        return v  # one part: nothing to lean towards (the zero border would only pull mass to the middle)
    # unsigned 32-bit while the labels fit (the compiled loops then need no wraparound test); a grid of more
    # than 2^32 parts keeps 64-bit labels rather than wrap them
    labels = labels.astype(np.uint32 if k <= 2**32 else np.int64, copy=False)
    totals = np.bincount(labels.ravel(), v.ravel(), minlength=k)
    out = v.copy()
    for sigma in sigmas:
        blurred = gaussian_blur(out, float(sigma))
        got = np.zeros(k)
        _sum_parts(blurred, labels, got)
        _rescale_parts(blurred, labels, totals, got, out)
    return out


def gaussian_blur(v: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian smoothing of width ``sigma`` cells, zero outside the grid; non-negative for a non-negative
    ``v``, at a cost that does not grow with ``sigma``.

    Below 4 cells this is ``scipy.ndimage.gaussian_filter(v, sigma, mode="constant")`` (the same kernel,
    applied directly, rows then columns; equal to about 1e-15 of the largest value). From 4 cells on it is
    computed at a coarser resolution: ``v`` is averaged over ``f x f`` blocks (``f`` the largest power of two
    with ``2 f <= sigma``; zero past the border), blurred there with width ``sigma_c = sqrt((sigma / f)^2 -
    1/4)`` blocks (1.9 to 4, exactly as below 4 cells) and interpolated back bilinearly (flat past the
    outermost block centres). Moving a point to its block's centre and interpolating between centres ``f``
    apart add ``(f^2 - 1) / 12`` (over the point's place in its block) and ``(2 f^2 + 1) / 12`` to its mean
    squared displacement along each axis, ``f^2 / 4`` in all, which ``sigma_c`` leaves room for: a point mass
    away from the border keeps its mass and is moved by ``sigma^2`` in mean square along each axis, averaged
    over its place in its block. The shape is not SciPy's to the last digit: piecewise bilinear at the scale
    of a block, reaching 4.5–4.75 ``sigma`` instead of SciPy's 4 (for a single point mass, 1–14% of the mass
    sits elsewhere than SciPy puts it); on maps of leaves the two blurs differ by 1–4% of the mass in L1,
    and userdp's smoothed releases by 0.01–2% (measured on the paper's construction, where the released maps
    are, if anything, slightly better under EMD and KL).
    """
    v = np.asarray(v, dtype=np.float64)
    if v.ndim != 2:
        raise ParameterError(f"the map must be a 2-D grid, got shape {v.shape}")
    sigma = float(sigma)
    if not 0 < sigma <= 1e9:  # wider is flat on any grid that fits in memory
        raise ParameterError(f"the width must be a positive number of cells up to 1e9, got {sigma!r}")
    f = 1
    while 4 * f <= sigma:
        f *= 2
    if f == 1:
        return _correlate_rows_columns(v, _gaussian_kernel(sigma))
    # block means and bilinear interpolation move a point by f^2 / 4 in mean square, over its place in its block
    sigma_c = math.sqrt((sigma / f) ** 2 - 0.25)
    coarse = _correlate_rows_columns(_block_means(v, f), _gaussian_kernel(sigma_c))
    out = np.empty_like(v)
    _interpolate_bilinear(coarse, f, out)
    return out


def _gaussian_kernel(sigma: float) -> np.ndarray:
    """SciPy's ``gaussian_filter1d`` weights: ``exp(-x^2 / 2 sigma^2)`` for ``|x| <= int(4 sigma + 0.5)``,
    normalized."""
    radius = int(4.0 * sigma + 0.5)
    if radius == 0:
        return np.ones(1)  # (sigma below 1/8: SciPy's kernel is the identity; sigma^2 may underflow)
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    w = np.exp(-0.5 * x * x / (sigma * sigma))
    return w / w.sum()


# The compiled loops below index through row views with non-negative offsets only: with a signed index that
# might be negative, numba tests for wraparound on every access and LLVM no longer vectorizes (8x slower).


@njit(cache=True, nogil=True)
def _correlate_rows_columns(v, w):
    """Correlate ``v`` with the symmetric kernel ``w`` (odd length) along rows, then columns, zero outside."""
    H, W = v.shape
    n = w.size
    r = n // 2
    tmp = np.zeros((H, W))
    for y in range(H):
        vr = v[y]
        tr = tmp[y]
        for k in range(n):
            wk = w[k]
            d = k - r
            if d >= 0:
                src = vr[d:]
                for x in range(W - d):
                    tr[x] += wk * src[x]
            else:
                dst = tr[-d:]
                for x in range(W + d):
                    dst[x] += wk * vr[x]
    out = np.zeros((H, W))
    for y in range(H):
        orow = out[y]
        for k in range(max(0, r - y), min(n, H + r - y)):
            wk = w[k]
            trow = tmp[y + k - r]
            for x in range(W):
                orow[x] += wk * trow[x]
    return out


@njit(cache=True, nogil=True)
def _block_means(v, f):
    """Means of ``v`` over ``f x f`` blocks (cells past the border count as 0; ``f`` a power of two, so scaling
    each term by ``1 / f^2`` is exact and no partial sum exceeds the largest value)."""
    H, W = v.shape
    Hc, Wc = (H + f - 1) // f, (W + f - 1) // f
    inv = 1.0 / (f * f)
    c = np.zeros((Hc, Wc))
    for y in range(H):
        vr = v[y]
        cr = c[y // f]
        for j in range(Wc):
            acc = 0.0
            for x in range(j * f, min(j * f + f, W)):
                acc += vr[x] * inv
            cr[j] += acc
    return c


@njit(cache=True, nogil=True)
def _axis_weights(n, nc, f):
    """For fine cells ``0..n-1``: the two block centres around each (clamped to ``0..nc-1``) and the weight of
    the second. Block ``j``'s centre is at fine coordinate ``(j + 1/2) f - 1/2``."""
    lo = np.empty(n, np.uint32)
    hi = np.empty(n, np.uint32)
    w = np.empty(n)
    for x in range(n):
        t = (x + 0.5) / f - 0.5
        j = math.floor(t)
        w[x] = t - j
        lo[x] = min(max(j, 0), nc - 1)
        hi[x] = min(max(j + 1, 0), nc - 1)
    return lo, hi, w


@njit(cache=True, nogil=True)
def _interpolate_bilinear(c, f, out):
    """``out`` (the fine grid) from the block values ``c`` by bilinear interpolation between block centres."""
    H, W = out.shape
    Hc, Wc = c.shape
    r0, r1, wr = _axis_weights(H, Hc, f)
    c0, c1, wc = _axis_weights(W, Wc, f)
    row = np.empty(Wc)
    for y in range(H):
        t = wr[y]
        above = c[r0[y]]
        below = c[r1[y]]
        for j in range(Wc):
            row[j] = (1.0 - t) * above[j] + t * below[j]
        orow = out[y]
        for x in range(W):
            orow[x] = (1.0 - wc[x]) * row[c0[x]] + wc[x] * row[c1[x]]


@njit(cache=True, nogil=True)
def _sum_parts(blurred, labels, got):
    """Add each cell of ``blurred`` into its part's entry of ``got``."""
    H, W = blurred.shape
    for y in range(H):
        br = blurred[y]
        lr = labels[y]
        for x in range(W):
            got[lr[x]] += br[x]


@njit(cache=True, nogil=True)
def _rescale_parts(blurred, labels, totals, got, out):
    """``out = blurred * totals / got`` per part, where the part's smoothed mass ``got`` is positive."""
    scale = np.empty(totals.size)
    for i in range(totals.size):
        scale[i] = totals[i] / got[i] if got[i] > 0 else -1.0
    H, W = blurred.shape
    for y in range(H):
        br = blurred[y]
        lr = labels[y]
        orow = out[y]
        for x in range(W):
            s = scale[lr[x]]
            if s >= 0.0:
                orow[x] = br[x] * s


def add_floor(v: np.ndarray, floor: float) -> np.ndarray:
    """``(1 - floor) v / sum(v) + floor / cells``: mass 1 with ``floor`` of it spread uniformly (uniform if
    ``v`` has no mass). Under EMD this costs at most ``floor`` times the grid's diameter."""
    if not 0.0 <= floor < 1.0:
        raise ParameterError(f"the floor must lie in [0, 1), got {floor!r}")
    return (1.0 - floor) * _normalize(v) + floor / v.size

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

import numpy as np

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
        neighbouring parts that hold more of it. A part whose smoothed mass vanished keeps ``v``.

    Notes
    -----
    An iterative proportional fitting between a smooth field and the part totals. Post-processing of a
    released estimate and a released partition: it costs no privacy. It helps under EMD because a cluster
    cut by a part boundary is more likely near that boundary than uniform inside the part. The grid is
    taken as zero outside (the public box is the whole domain), so a part on the border also leans slightly
    inwards; with a single part nothing is done.
    """
    v = np.asarray(v, dtype=np.float64)
    labels = np.asarray(parts).ravel()
    k = int(labels.max(initial=-1)) + 1
    if k <= 1:
        return v  # one part: nothing to lean towards (the zero border would only pull mass to the middle)
    totals = np.bincount(labels, v.ravel(), minlength=k)
    out = v
    for sigma in sigmas:
        blurred = gaussian_blur(out, float(sigma))
        got = np.bincount(labels, blurred.ravel(), minlength=k)
        ok = got > 0
        scale = np.divide(totals, got, out=np.zeros_like(totals), where=ok)
        out = np.where(ok[labels].reshape(v.shape), blurred * scale[labels].reshape(v.shape), out)
    return out


_FFT_RADIUS = 24  # wider kernels are applied by FFT (3x faster at sigma = 64 on 1024 x 1024)


def gaussian_blur(v: np.ndarray, sigma: float) -> np.ndarray:
    """``scipy.ndimage.gaussian_filter(v, sigma, mode="constant")`` (zero outside the grid, kernel truncated at
    4 sigma), non-negative. Kernels wider than 49 cells are applied by FFT along each axis, which agrees with
    SciPy's direct correlation to about 1e-15 of the largest value; values FFT round-off leaves below zero
    are set to 0."""
    radius = int(4.0 * sigma + 0.5)
    if radius <= _FFT_RADIUS:
        from scipy.ndimage import gaussian_filter  # imported on use (0.1 s)

        return gaussian_filter(v, sigma, mode="constant")
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    w = np.exp(-0.5 * x * x / (sigma * sigma))
    w /= w.sum()  # SciPy's kernel: the same formula, the same truncation
    out = _fft_filter(np.asarray(v, dtype=np.float64), w, 0)
    out = _fft_filter(out, w, 1)
    return np.maximum(out, 0.0, out=out)


def _fft_filter(v: np.ndarray, w: np.ndarray, axis: int) -> np.ndarray:
    """Correlate ``v`` along ``axis`` with the symmetric kernel ``w`` (odd length), zero outside, by FFT
    (``scipy.fft``; ``scipy.signal`` costs a second to import)."""
    from scipy import fft

    n, r = v.shape[axis], w.size // 2
    size = fft.next_fast_len(n + w.size - 1, real=True)
    spectrum = fft.rfft(v, size, axis=axis) * np.expand_dims(fft.rfft(w, size), 1 - axis)
    full = fft.irfft(spectrum, size, axis=axis)  # the full linear convolution, v[0] at index 0 ... + r
    return np.take(full, np.arange(r, r + n), axis=axis)


def add_floor(v: np.ndarray, floor: float) -> np.ndarray:
    """``(1 - floor) v / sum(v) + floor / cells``: mass 1 with ``floor`` of it spread uniformly (uniform if
    ``v`` has no mass). Under EMD this costs at most ``floor`` times the grid's diameter."""
    if not 0.0 <= floor < 1.0:
        raise ParameterError(f"the floor must lie in [0, 1), got {floor!r}")
    return (1.0 - floor) * _normalize(v) + floor / v.size

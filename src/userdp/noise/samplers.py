"""Exact integer noise: discrete Laplace, discrete Gaussian, Polya (negative binomial) shares, and the exact
randomized rounding of a float."""

from __future__ import annotations

import math

import numpy as np

from ..errors import DataError, ParameterError
from .kernels import _dgauss_batch, _dgauss_sq_batch, _dlap_batch, _dyadic_batch, _polya_batch
from .sources import RngLike, resolve_rng

# --------------------------------------------------------------------------------------------
# Exact integer noise
# --------------------------------------------------------------------------------------------

_DLAP_WORDS = 16  # measured mean: 9.2 words per sample for t = 2**40, 10 for t = 3
_DGAUSS_WORDS = 28  # measured mean: 18 words per sample for sigma**2 = 2**25
_DGAUSS_SQ_WORDS = 40
_GAUSS_SQ_MAX = 1 << 56


def _shape(size: int | tuple[int, ...]) -> tuple[int, ...]:
    return (int(size),) if isinstance(size, (int, np.integer)) else tuple(int(s) for s in size)


def discrete_laplace(t: int, size: int | tuple[int, ...], rng: RngLike = None) -> np.ndarray:
    """Exact samples of the discrete Laplace distribution ``P(x) ∝ exp(-|x| / t)`` on the integers.

    Parameters
    ----------
    t:
        Integer scale ``t >= 1`` (at most ``2**52``).
    """
    t = int(t)
    if not 1 <= t <= 2**52:
        raise ParameterError(f"discrete Laplace scale must be an integer in [1, 2**52], got {t}")
    src = resolve_rng(rng)
    out = np.empty(_shape(size), dtype=np.int64)
    src._fill(_dlap_batch, out.reshape(-1), _DLAP_WORDS, np.int64(t))
    return out


def polya(
    shape_num: int, shape_den: int, tau: int, size: int | tuple[int, ...], rng: RngLike = None, step: int = 1
) -> np.ndarray:
    """Exact samples of ``Polya(r, alpha)`` (the negative binomial of real shape ``r = shape_num / shape_den``
    and ratio ``alpha = exp(-step / tau)``): ``P(x) = Gamma(x + r) / (x! Gamma(r)) (1 - alpha)^r alpha^x``.

    ``Polya(1, alpha)`` is the geometric law, and the sum of independent ``Polya(r_j, alpha)`` is
    ``Polya(sum r_j, alpha)``: ``n`` draws of ``Polya(1/n, alpha)`` add up to one geometric, and the
    difference of two such sums is the discrete Laplace ``P(x) ∝ alpha^|x|`` (Balle, Bell, Gascón & Nissim,
    CCS 2020; Goryczka & Xiong). Used by the shuffle-model heatmaps (:mod:`userdp.heatmaps.shuffle`).

    The sampler (no floating point decides anything): an exact geometric ``G`` of ratio ``alpha`` (CKS
    Algorithm 2's magnitude step at integer scale ``tau``, divided by ``step`` with the floor), whose ``G``
    units are then split by a Polya urn with integer weights ``(shape_num, shape_den - shape_num)`` growing by
    ``shape_den`` per unit; the first colour's count is exactly ``Polya(r, alpha)`` (the Dirichlet-multinomial
    split of a ``Polya(1)`` total into independent ``Polya(r)`` and ``Polya(1 - r)`` parts). Expected cost
    ``O(1 + alpha / (1 - alpha))`` words per draw (about ``tau / step``); ``r = 1`` costs ``O(1)``.

    Parameters
    ----------
    shape_num, shape_den:
        The shape ``r = shape_num / shape_den`` with ``1 <= shape_num <= shape_den <= 2**20``.
    tau, step:
        Integers ``1 <= step``, ``1 <= tau <= 2**52``: the ratio is ``exp(-step / tau)``.
    """
    a, d, t, k = int(shape_num), int(shape_den), int(tau), int(step)
    if not 1 <= a <= d <= 2**20:
        raise ParameterError(f"Polya shape must be a/d with 1 <= a <= d <= 2**20, got {a}/{d}")
    if not (1 <= t <= 2**52 and 1 <= k <= 2**52):
        raise ParameterError(f"Polya ratio exp(-step/tau) needs integers 1 <= step, tau <= 2**52, got {k}/{t}")
    src = resolve_rng(rng)
    out = np.empty(_shape(size), dtype=np.int64)
    per_item = _DLAP_WORDS + (0 if a == d else min(2 * (t // k) + 2, 1 << 20))
    src._fill(_polya_batch, out.reshape(-1), per_item, np.int64(a), np.int64(d), np.int64(t), np.int64(k))
    return out


def _dgauss_params(S: int) -> tuple[int, int]:
    t = math.isqrt(S) + 1
    ymax = ((1 << 31) + S) // t - 1
    return t, ymax


def discrete_gaussian(sigma2: int, size: int | tuple[int, ...], rng: RngLike = None) -> np.ndarray:
    """Exact samples of the discrete Gaussian ``P(x) ∝ exp(-x^2 / (2 sigma2))`` on the integers.

    ``sigma2`` is an integer in ``[1, 2**28]``, or a perfect square ``w^2`` with ``w <= 2**56`` (the
    lattice Gaussian mechanism uses ``w`` between ``2**54`` and ``2**55``). The square path (every Gaussian
    release) is conditioned on ``|x| <= 32 sigma`` (probability ``1 - exp(-480)`` and more); the general path
    on ``|x| <= ymax`` with ``ymax = (2^31 + sigma2) / (isqrt(sigma2) + 1) - 1``, about ``9 sigma`` at
    ``sigma2 ~ 2^28`` (tail mass about ``2e-19``), which no mechanism uses.
    """
    S = int(sigma2)
    src = resolve_rng(rng)
    out = np.empty(_shape(size), dtype=np.int64)
    w = math.isqrt(S) if S > 0 else 0
    if 1 <= S and w * w == S and w <= _GAUSS_SQ_MAX:
        src._fill(_dgauss_sq_batch, out.reshape(-1), _DGAUSS_SQ_WORDS, np.int64(w))
        return out
    if not 1 <= S <= 2**28:
        raise ParameterError(
            f"discrete Gaussian variance must be an integer in [1, 2**28] or a square w^2 with w <= 2**56, got {S}"
        )
    t, ymax = _dgauss_params(S)
    src._fill(_dgauss_batch, out.reshape(-1), _DGAUSS_WORDS, np.int64(S), np.int64(t), np.int64(ymax))
    return out


def randomized_round(x: np.ndarray, rng: RngLike = None) -> np.ndarray:
    """``floor(x) + Bernoulli(x - floor(x))`` elementwise, exactly (``int64``), negative ``x`` included.

    The fractional part of a float is an exact dyadic rational ``M / 2**E``; its Bernoulli is decided by
    comparing the first ``E`` bits of a uniform number with ``M``, so ``P(round up) = frac(x)`` exactly and
    ``E[result] = x``. Used on ``values / g`` (``g`` a power of two, so the division is exact) by the
    metric-DP mechanisms. ``|x|`` must be below ``2**62``.
    """
    v = np.asarray(x, dtype=np.float64)
    if v.size and not np.all(np.abs(v) < 2.0**62):
        raise DataError("values are too large for the lattice of this release (|value / granularity| >= 2^62)")
    # Rounded as -randomized_round(|x|) for negative x: the same law (P(floor(x)) = ceil(x) - x = frac(|x|)),
    # and the fraction of |x| is exact, while x - floor(x) is not for a negative x with bits below 2^-53
    # (for x = -2^-55 it rounds to 1.0, which once sent every such x to -1).
    neg = v < 0
    a = np.abs(v)
    fl = np.floor(a)
    frac = (a - fl).reshape(-1)  # exact for a >= 0: the fractional bits of a are bits of a's own significand
    m, e = np.frexp(frac)
    M = np.ascontiguousarray((m * 2.0**53).astype(np.int64))
    E = np.ascontiguousarray((53 - e).astype(np.int64))
    up = np.empty(frac.shape, dtype=np.int64)
    resolve_rng(rng)._fill(_dyadic_batch, up, 4, M, E)
    magnitude = fl.astype(np.int64) + up.reshape(v.shape)
    return np.where(neg, -magnitude, magnitude)

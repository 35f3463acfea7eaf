"""All randomness used by userdp, in one module.

Design
------
* **Source of randomness.** Every sampler draws 64-bit words from a :class:`RandomSource`. The
  default source is the operating system's CSPRNG (``os.urandom``); large batches are expanded with
  AES-256-CTR under a fresh key from ``os.urandom`` per batch (NIST SP 800-90A CTR-DRBG style). A seeded source
  (NumPy's PCG64) exists for experiments and tests and is used only when the caller passes it
  (or an ``int`` seed, or a :class:`numpy.random.Generator`) explicitly.
* **Exact samplers, exact streams.** Every sampler is an algorithm on an unbounded stream of uniform words
  in which integer arithmetic alone decides each output; its law is the law of that algorithm, with no
  truncation and no conditioning. Words are drawn in batches; when a batch runs out in the middle of a
  sample, the sample is *continued* on the same words plus fresh ones (the kernels are deterministic
  functions of the stream), never restarted, so running out of words cannot bias the output.
  Discrete Laplace and discrete Gaussian: Canonne, Kamath & Steinke, "The Discrete Gaussian for
  Differential Privacy" (NeurIPS 2020), Algorithms 1-3. Kernels are compiled with numba; where an
  intermediate integer would leave 63 bits, the sample is finished by the same algorithm on Python integers.
* **Floating-point safety.** Real-valued releases never compute ``value + float_noise`` (the
  floating-point attack of Mironov, CCS 2012). A value is first moved to a lattice ``g * Z`` (``g`` a power
  of two chosen from the *public* noise scale), exact integer noise is added to the integer lattice
  coordinate, and the result is converted back to a float, which is post-processing. This is the approach
  of OpenDP and of Google's differential-privacy library. Two roundings are used:

  - *deterministic* rounding (user-level DP: Laplace, Gaussian, histograms, heatmaps): rounding moves
    a coordinate by at most ``g / 2``, so the calibration adds ``g`` per coordinate to the sensitivity
    (``d g`` in l1, ``sqrt(d) g`` in l2). The guarantee is exact for the stated sensitivity.
  - *randomized* rounding (metric DP: d_EM releases and item randomizers, whose guarantee must shrink in
    proportion to the distance however small it is): ``x/g`` goes to ``floor(x/g) + Bernoulli(frac(x/g))``,
    where the Bernoulli of the exact dyadic fraction is decided by comparing uniform bits. The output law is
    the multilinear interpolation of the lattice noise law, so its privacy loss is Lipschitz in ``x`` with
    an explicit constant (see :class:`KNormCalibration`); deterministic rounding would add a constant
    ``g / scale`` to the loss of every pair, however close.
* **Lattice K-norm noise.** l1: independent discrete Laplace coordinates. l2 (dimension >= 2): the exact
  lattice law ``P(z) ∝ exp(-ceil(s sqrt(|z|^2 + c^2)) / (s T))`` (:class:`L2LatticeLaw`), sampled by
  an exact rejection sampler built from discrete-Laplace, geometric and discrete-Gaussian draws; every
  lattice point has positive probability. The K-norm mechanism of Hardt & Talwar (2010) is its continuous
  limit; the smoothing radius ``c`` and the granularity ``s`` keep the guarantee within 0.2% of it.
  (The l-infinity K-norm is not offered: no exact lattice sampler is known to userdp whose loss stays
  proportional to the l-infinity distance under randomized rounding.)
* **Selection** (exponential mechanism, permute-and-flip) is exact: scores, epsilon and the sensitivity
  are turned into exact rationals. The exponential mechanism inverts its CDF against a lazily refined
  uniform with interval arithmetic (constant work except with probability below ``m 10^-38``);
  permute-and-flip uses exact ``Bernoulli(exp(-gamma))`` draws with Python integers.

Negligible deviations (documented, not hidden)
----------------------------------------------
* The discrete Gaussian sampler rejects discrete-Laplace proposals beyond ``32 sigma`` (acceptance
  probability below ``exp(-480)``): its law is the discrete Gaussian conditioned on ``|x| <= 32 sigma``.
  For the Gaussian mechanism this adds at most ``2 exp(-480)`` to delta, far below the relative margin
  of ``1e-9`` that :func:`calibrate_gaussian` keeps. Inside the l2 lattice sampler it only rescales a
  normalising constant by less than ``1e-200`` (accounted for in ``kappa``).
* The multivariate discrete Gaussian's privacy curve differs from the continuous Gaussian's by a term of
  order ``d exp(-2 pi^2 sigma^2)`` in lattice units (Canonne, Kamath & Steinke 2020, section 4); with
  ``sigma >= 2^54`` lattice steps this is zero to every representable digit.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from fractions import Fraction
from typing import Literal

import numpy as np
from numba import njit
from scipy import special

from .errors import DataError, ParameterError

__all__ = [
    "RandomSource",
    "resolve_rng",
    "seeded",
    "discrete_laplace",
    "discrete_gaussian",
    "randomized_round",
    "LaplaceCalibration",
    "GaussianCalibration",
    "calibrate_laplace",
    "calibrate_gaussian",
    "add_laplace",
    "add_gaussian",
    "laplace_mechanism",
    "gaussian_mechanism",
    "laplace_noise",
    "gaussian_noise",
    "analytic_gaussian_sigma",
    "gaussian_delta",
    "zcdp_delta",
    "calibrate_gaussian_metric",
    "metric_gaussian_sup_delta",
    "L2LatticeLaw",
    "lattice_knorm_noise",
    "knorm_release",
    "knorm_mechanism",
    "KNormCalibration",
    "calibrate_knorm",
    "exponential_mechanism",
    "permute_and_flip",
    "bernoulli_exp",
    "sample_cumulative",
    "KeyedStreams",
    "keyed_sample_indices",
    "keyed_randomize",
    "KeyedSource",
    "encode_user_key",
]

_U64 = np.uint64
_BATCH = 1 << 16
_MAX_BATCH_WORDS = 1 << 22
_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)

# --------------------------------------------------------------------------------------------
# numba kernels over a word stream.  st[0] = position, st[1] = "exhausted" flag.
#
# Batch kernels have the signature ``kernel(words, start, stop, out, *params) -> (i, pos)``: they fill
# ``out[start:stop]`` and return the first unfinished index ``i`` (``stop`` when all are done) and the
# position ``pos`` of the first word that item ``i`` read. The driver (:meth:`RandomSource._fill`) then
# calls the kernel again on ``words[pos:]`` followed by fresh words: item ``i`` re-reads exactly the words
# it had read and continues past them, so the result is the algorithm run on one unbounded stream.
# --------------------------------------------------------------------------------------------


@njit(cache=True)
def _next(words, st):
    i = st[0]
    if i >= words.size:
        st[1] = 1
        return _U64(0)
    st[0] = i + 1
    return words[i]


@njit(cache=True)
def _below(words, st, n):
    """Uniform integer in [0, n) for 1 <= n <= 2**63 (exact, by masked rejection)."""
    if n <= 1:
        return np.int64(0)
    m = _U64(n - 1)
    m |= m >> _U64(1)
    m |= m >> _U64(2)
    m |= m >> _U64(4)
    m |= m >> _U64(8)
    m |= m >> _U64(16)
    m |= m >> _U64(32)
    nn = _U64(n)
    while True:
        w = _next(words, st) & m
        if st[1] != 0:
            return np.int64(0)
        if w < nn:
            return np.int64(w)


@njit(cache=True)
def _bern_ratio(words, st, num, den):
    """Exact Bernoulli(num / den) for 0 <= num <= den."""
    return _below(words, st, den) < num


@njit(cache=True)
def _bern_exp_le1(words, st, num, den):
    """Exact Bernoulli(exp(-num/den)) for 0 <= num <= den (CKS Algorithm 1)."""
    k = np.int64(1)
    while True:
        if st[1] != 0:
            return False
        # A ~ Bernoulli(gamma / k) = Bernoulli(gamma) AND Bernoulli(1/k)
        if not (_below(words, st, den) < num):
            break
        if _below(words, st, k) != 0:
            break
        k += 1
    return (k % 2) == 1


@njit(cache=True)
def _bern_exp(words, st, num, den):
    """Exact Bernoulli(exp(-num/den)) for any num >= 0 (CKS Algorithm 1, extended to gamma > 1)."""
    q = num // den
    i = np.int64(0)
    while i < q:
        if not _bern_exp_le1(words, st, np.int64(1), np.int64(1)):
            return False
        if st[1] != 0:
            return False
        i += 1
    return _bern_exp_le1(words, st, num - q * den, den)


@njit(cache=True)
def _bern_exp_half_sq(words, st, r, w):
    """Exact Bernoulli(exp(-r^2 / (2 w^2))) for 0 <= r <= w <= 2**62, without forming r^2: CKS Algorithm 1
    with Bernoulli(gamma / k) = Bernoulli(r/w) AND Bernoulli(r/w) AND Bernoulli(1/(2k))."""
    k = np.int64(1)
    while True:
        if st[1] != 0:
            return False
        if not (_below(words, st, w) < r):
            break
        if not (_below(words, st, w) < r):
            break
        if _below(words, st, 2 * k) != 0:
            break
        k += 1
    return (k % 2) == 1


@njit(cache=True)
def _bern_dyadic(words, st, M, E):
    """Exact Bernoulli(M / 2**E) for an integer 0 <= M < 2**53 and E >= 53 (the exact value of a float in
    [0, 1)): compare the first E bits of a uniform number with M, 64 bits at a time."""
    if M == 0:
        return False
    j = np.int64(0)
    while j * 64 < E:
        start = j * 64
        end = min(start + 64, E)
        L = end - start
        shift = E - end  # bits of M below this chunk
        if shift >= 53:
            c = _U64(0)
        else:
            c = _U64(M) >> _U64(shift)
            if L < 64:
                c = c & ((_U64(1) << _U64(L)) - _U64(1))
        w = _next(words, st)
        if st[1] != 0:
            return False
        if L < 64:
            w = w >> _U64(64 - L)
        if w < c:
            return True
        if w > c:
            return False
        j += 1
    return False


@njit(cache=True)
def _geometric(words, st, tau):
    """``(U, V)`` with ``U + tau V`` geometric: ``P(G = g) ∝ exp(-g / tau)`` on ``{0, 1, ...}`` (the magnitude
    step of CKS Algorithm 2). ``V`` is returned separately so that callers can check for overflow."""
    while True:
        if st[1] != 0:
            return np.int64(0), np.int64(0)
        u = _below(words, st, tau)
        if _bern_exp_le1(words, st, u, tau):
            break
    v = np.int64(0)
    while _bern_exp_le1(words, st, np.int64(1), np.int64(1)):
        v += 1
        if st[1] != 0:
            return np.int64(0), np.int64(0)
    return u, v


@njit(cache=True)
def _dlap(words, st, t):
    """Exact discrete Laplace: P(x) proportional to exp(-|x|/t), integer t >= 1 (CKS Algorithm 2, s=1)."""
    while True:
        if st[1] != 0:
            return np.int64(0)
        u, v = _geometric(words, st, t)
        x = u + t * v
        b = _next(words, st) & _U64(1)
        if st[1] != 0:
            return np.int64(0)
        if b == 1 and x == 0:
            continue
        if b == 1:
            return -x
        return x


@njit(cache=True)
def _dgauss(words, st, S, t, ymax):
    """Exact discrete Gaussian with variance parameter sigma^2 = S (integer <= 2**28), t = isqrt(S)+1
    (CKS Algorithm 3)."""
    den = 2 * S * t * t
    while True:
        if st[1] != 0:
            return np.int64(0)
        y = _dlap(words, st, t)
        a = abs(y)
        if a > ymax:
            continue
        d = a * t - S
        if _bern_exp(words, st, d * d, den):
            return y


@njit(cache=True)
def _dgauss_sq(words, st, w):
    """Exact discrete Gaussian with variance parameter ``w^2`` (integer ``1 <= w <= 2**56``; CKS Algorithm 3
    with ``t = w``), conditioned on ``|x| <= 32 w``. The acceptance ``exp(-(|y| - w)^2 / (2 w^2))`` is split
    as ``exp(-q^2/2) exp(-q r / w) exp(-r^2 / (2 w^2))`` with ``||y| - w| = q w + r`` so that every
    integer stays below 2**63."""
    while True:
        if st[1] != 0:
            return np.int64(0)
        u, v = _geometric(words, st, w)
        b = _next(words, st) & _U64(1)
        if st[1] != 0:
            return np.int64(0)
        if v >= 32:  # |y| >= 32 w: outside the support kept (probability < exp(-480) after acceptance)
            continue
        x = u + w * v
        if b == 1 and x == 0:
            continue
        e = abs(x - w)
        q = e // w
        r = e - q * w
        if not _bern_exp(words, st, q * q, np.int64(2)):
            continue
        if not _bern_exp(words, st, q * r, w):
            continue
        if not _bern_exp_half_sq(words, st, r, w):
            continue
        if b == 1:
            return -x
        return x


@njit(cache=True)
def _dlap_batch(words, start, stop, out, t):
    st = np.zeros(2, np.int64)
    for i in range(start, stop):
        pos = st[0]
        out[i] = _dlap(words, st, t)
        if st[1] != 0:
            return i, pos
    return stop, st[0]


@njit(cache=True)
def _dgauss_batch(words, start, stop, out, S, t, ymax):
    st = np.zeros(2, np.int64)
    for i in range(start, stop):
        pos = st[0]
        out[i] = _dgauss(words, st, S, t, ymax)
        if st[1] != 0:
            return i, pos
    return stop, st[0]


@njit(cache=True)
def _dgauss_sq_batch(words, start, stop, out, w):
    st = np.zeros(2, np.int64)
    for i in range(start, stop):
        pos = st[0]
        out[i] = _dgauss_sq(words, st, w)
        if st[1] != 0:
            return i, pos
    return stop, st[0]


@njit(cache=True)
def _dyadic_batch(words, start, stop, out, M, E):
    st = np.zeros(2, np.int64)
    for i in range(start, stop):
        pos = st[0]
        out[i] = 1 if _bern_dyadic(words, st, M[i], E[i]) else 0
        if st[1] != 0:
            return i, pos
    return stop, st[0]


@njit(cache=True)
def _below_batch(words, highs, out):
    st = np.zeros(2, np.int64)
    for i in range(out.size):
        out[i] = _below(words, st, highs[i])
        if st[1] != 0:
            return False
    return True


@njit(cache=True)
def _shuffle_inplace(words, arr):
    st = np.zeros(2, np.int64)
    for i in range(arr.size - 1, 0, -1):
        j = _below(words, st, np.int64(i + 1))
        if st[1] != 0:
            return False
        tmp = arr[i]
        arr[i] = arr[j]
        arr[j] = tmp
    return True


@njit(cache=True)
def _searchsorted_rows(cum, rows, u, out):
    """out[i] = first j with cum[rows[i], j] > u[i]."""
    k = cum.shape[1]
    for i in range(rows.size):
        r = rows[i]
        lo = 0
        hi = k - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if cum[r, mid] > u[i]:
                hi = mid
            else:
                lo = mid + 1
        out[i] = lo


# --------------------------------------------------------------------------------------------
# The exact l2 lattice sampler (see L2LatticeLaw)
# --------------------------------------------------------------------------------------------


@njit(cache=True)
def _isqrt(n):
    """floor(sqrt(n)) for 0 <= n < 2**62, exactly."""
    if n <= 0:
        return np.int64(0)
    r = np.int64(math.sqrt(float(n)))
    while r * r > n:
        r -= 1
    while (r + 1) * (r + 1) <= n:
        r += 1
    return r


@njit(cache=True)
def _l2_attempt(words, st, z, d, tau, s_bits, c2, root, A, j_min, M, j_fast, hand):
    """One attempt of the l2 lattice sampler. Returns 1 (accepted, ``z`` filled), 0 (rejected), or 2 (the
    radius index ``j`` exceeds ``j_fast``: ``hand`` holds (sum U, sum V) of its geometric draws and the
    attempt must be finished on Python integers)."""
    sum_u = np.int64(0)
    sum_v = np.int64(0)
    for _ in range(d + 1):
        u, v = _geometric(words, st, tau)
        if st[1] != 0:
            return 0
        sum_u += u
        sum_v += v
    if sum_v > (j_fast - sum_u) // tau:
        hand[0] = sum_u
        hand[1] = sum_v
        return 2
    j = sum_u + tau * sum_v
    if j < j_min:
        return 0
    w = (j + A - 1) // A
    for i in range(1, d + 1):
        if not _bern_ratio(words, st, w * A * (M - 1), (j + i) * M):
            return 0
    mask = (np.int64(1) << s_bits) - 1
    qj = j >> s_bits
    rj = j & mask
    Q = qj * qj + ((2 * qj * rj * (mask + 1) + rj * rj) >> (2 * s_bits)) - c2
    R = root * w
    if not _bern_exp(words, st, R * R - Q, 2 * w * w):
        return 0
    sq = _isqrt(Q)
    rem = Q
    for i in range(d):
        x = _dgauss_sq(words, st, w)
        if st[1] != 0:
            return 0
        if abs(x) > sq:
            return 0
        x2 = x * x
        if x2 > rem:
            return 0
        rem -= x2
        z[i] = x
    if _bern_exp(words, st, rem, 2 * w * w):
        return 1
    return 0


@njit(cache=True)
def _l2_batch(words, start, stop, out, tau, s_bits, c2, root, A, j_min, M, j_fast, hand):
    """Fill rows ``start:stop`` of ``out`` (shape ``(n, d)``). Returns ``(i, pos, flag)``: ``flag = 1`` when
    row ``i`` must be finished on Python integers (``pos`` is then the first unused word)."""
    st = np.zeros(2, np.int64)
    d = out.shape[1]
    z = np.empty(d, np.int64)
    for i in range(start, stop):
        pos = st[0]
        while True:
            res = _l2_attempt(words, st, z, d, tau, s_bits, c2, root, A, j_min, M, j_fast, hand)
            if st[1] != 0:
                return i, pos, 0
            if res == 1:
                for k in range(d):
                    out[i, k] = z[k]
                break
            if res == 2:
                return i, st[0], 1
    return stop, st[0], 0


# --------------------------------------------------------------------------------------------
# Random sources
# --------------------------------------------------------------------------------------------


_ZEROS = bytearray(0)


def _aes_ctr_words(n: int) -> np.ndarray:
    """``n`` words of AES-256-CTR keystream under a fresh key from the OS CSPRNG."""
    global _ZEROS
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    nbytes = 8 * n
    if len(_ZEROS) < nbytes:
        _ZEROS = bytearray(nbytes)
    enc = Cipher(algorithms.AES(os.urandom(32)), modes.CTR(os.urandom(16))).encryptor()
    out = bytearray(nbytes + 15)
    enc.update_into(memoryview(_ZEROS)[:nbytes], out)
    return np.frombuffer(out, dtype=_U64, count=n)


class RandomSource:
    """A stream of uniformly random 64-bit words and the exact uniform draws built on it.

    Parameters
    ----------
    seed:
        ``None`` (default) reads the operating system's CSPRNG. An integer or a
        :class:`numpy.random.Generator` gives a reproducible, *non-cryptographic* stream for
        experiments and tests only.
    """

    def __init__(self, seed: int | np.random.Generator | None = None) -> None:
        if seed is None:
            self._gen: np.random.Generator | None = None
        elif isinstance(seed, np.random.Generator):
            self._gen = seed
        elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            self._gen = np.random.Generator(np.random.PCG64(int(seed)))
        else:
            raise TypeError(f"seed must be None, an int or a numpy Generator, not {type(seed).__name__}")

    @property
    def seeded(self) -> bool:
        """True when this stream is reproducible (and therefore not suitable for real releases)."""
        return self._gen is not None

    def __repr__(self) -> str:
        return "RandomSource(seeded)" if self.seeded else "RandomSource(os.urandom)"

    # -- raw words ------------------------------------------------------------------------
    def words(self, n: int) -> np.ndarray:
        """``n`` independent uniform 64-bit words (``uint64``).

        Unseeded: up to 512 words come straight from ``os.urandom``; larger batches are the AES-256-CTR
        keystream under a fresh 256-bit key and 128-bit counter block drawn from ``os.urandom`` for that
        batch (the CTR-DRBG construction of NIST SP 800-90A, as BoringSSL uses), about 10x faster.
        """
        n = int(n)
        if n <= 0:
            return np.empty(0, dtype=_U64)
        if self._gen is None:
            if n <= 512:
                return np.frombuffer(os.urandom(8 * n), dtype=_U64).copy()
            return _aes_ctr_words(n)
        return self._gen.bit_generator.random_raw(n).astype(_U64, copy=False)

    def _fill(self, kernel, out: np.ndarray, per_item: int, *params, slow=None) -> np.ndarray:
        """Fill ``out`` (along its first axis) with a batch kernel, continuing any item that ran out of words
        on the same words plus fresh ones (see the kernel conventions above). ``slow(i)`` finishes item ``i``
        on Python integers when a kernel hands it over (flag 1)."""
        n = out.shape[0]
        batch = max(1, min(_BATCH, _MAX_BATCH_WORDS // per_item))  # at most 32 MB of words at a time
        start = 0
        while start < n:
            stop = min(n, start + batch)
            words = self.words(per_item * (stop - start) + 4096)
            i = start
            while i < stop:
                res = kernel(words, i, stop, out, *params)
                j, pos = int(res[0]), int(res[1])
                if j >= stop:
                    break
                if len(res) > 2 and res[2] == 1:
                    slow(j)  # item j is finished on Python integers; the words after pos are unused
                    words, i = words[pos:], j + 1
                    continue
                words = np.concatenate([words[pos:], self.words(per_item * (stop - j) + 4096 + (words.size - pos))])
                i = j
            start = stop
        return out

    # -- uniform draws ------------------------------------------------------------------------
    def uniform(self, size: int | tuple[int, ...]) -> np.ndarray:
        """Uniform floats in the open interval (0, 1): ``(k + 1/2) 2**-53`` for uniform 53-bit ``k``.

        Not used by any mechanism (floats never decide a private output); for simulations and tests."""
        shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
        n = int(np.prod(shape, dtype=np.int64))
        w = self.words(n) >> _U64(11)
        return ((w.astype(np.float64) + 0.5) * 2.0**-53).reshape(shape)

    def integers(self, high: int | np.ndarray, size: int | None = None) -> np.ndarray:
        """Exact uniform integers in ``[0, high)`` (``high`` a scalar with ``size``, or an array).

        Rejection sampling: how many words an item uses is independent of its value, so a batch that runs
        out of words can be redrawn whole without biasing the output."""
        if np.isscalar(high):
            if size is None:
                raise TypeError("size is required when high is a scalar")
            highs = np.full(int(size), int(high), dtype=np.int64)
        else:
            highs = np.ascontiguousarray(high, dtype=np.int64)
        if highs.size and (highs.min() < 1):
            raise ValueError("every upper bound must be at least 1")
        out = np.empty(highs.shape, dtype=np.int64)
        flat_h = highs.reshape(-1)
        flat = out.reshape(-1)
        for start in range(0, flat.size, _BATCH):
            h = flat_h[start : start + _BATCH]
            chunk = flat[start : start + _BATCH]
            budget = 3 * chunk.size + 4096
            while not _below_batch(self.words(budget), h, chunk):
                budget *= 2
        return out

    def bits(self, size: int) -> np.ndarray:
        """``size`` fair coin flips as a boolean array."""
        return (self.words(size) & _U64(1)).astype(bool)

    def shuffle(self, arr: np.ndarray) -> None:
        """Uniformly random in-place permutation (Fisher-Yates) of a 1-D array (word use is independent of
        the permutation drawn, so a redraw after running out of words is unbiased)."""
        budget = 2 * arr.size + 4096
        while True:
            work = arr.copy()
            if _shuffle_inplace(self.words(budget), work):
                arr[...] = work
                return
            budget *= 2

    def permutation(self, n: int) -> np.ndarray:
        """A uniformly random permutation of ``range(n)``."""
        p = np.arange(int(n), dtype=np.int64)
        self.shuffle(p)
        return p

    def randbelow(self, n: int) -> int:
        """Exact uniform Python integer in ``[0, n)`` for arbitrarily large ``n``."""
        if n < 1:
            raise ValueError("n must be >= 1")
        if n == 1:
            return 0
        k = (n - 1).bit_length()
        nwords = (k + 63) // 64
        while True:
            w = self.words(nwords)
            v = int.from_bytes(w.tobytes(), "little") & ((1 << k) - 1)
            if v < n:
                return v


def seeded(seed: int) -> RandomSource:
    """A reproducible random source for experiments and tests (never for real releases)."""
    return RandomSource(seed)


RngLike = RandomSource | np.random.Generator | int | None


def resolve_rng(rng: RngLike) -> RandomSource:
    """Turn the ``rng=`` argument of any userdp function into a :class:`RandomSource`.

    ``None`` gives the OS CSPRNG. A seed or generator is accepted only because the caller passed it.
    """
    if isinstance(rng, RandomSource):
        return rng
    return RandomSource(rng)


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


def _dgauss_params(S: int) -> tuple[int, int]:
    t = math.isqrt(S) + 1
    ymax = ((1 << 31) + S) // t - 1
    return t, ymax


def discrete_gaussian(sigma2: int, size: int | tuple[int, ...], rng: RngLike = None) -> np.ndarray:
    """Exact samples of the discrete Gaussian ``P(x) ∝ exp(-x^2 / (2 sigma2))`` on the integers.

    ``sigma2`` is an integer in ``[1, 2**28]``, or a perfect square ``w^2`` with ``w <= 2**56`` (the
    lattice Gaussian mechanism uses ``w`` between ``2**54`` and ``2**55``). Both are conditioned on
    ``|x| <= 32 sigma`` (probability ``1 - exp(-480)`` and more).
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
    """``floor(x) + Bernoulli(x - floor(x))`` elementwise, exactly (``int64``).

    The fractional part of a float is an exact dyadic rational ``M / 2**E``; its Bernoulli is decided by
    comparing the first ``E`` bits of a uniform number with ``M``, so ``P(round up) = frac(x)`` exactly and
    ``E[result] = x``. Used on ``values / g`` (``g`` a power of two, so the division is exact) by the
    metric-DP mechanisms. ``|x|`` must be below ``2**62``.
    """
    v = np.asarray(x, dtype=np.float64)
    if v.size and not np.all(np.abs(v) < 2.0**62):
        raise DataError("values are too large for the lattice of this release (|value / granularity| >= 2^62)")
    fl = np.floor(v)
    frac = (v - fl).reshape(-1)  # exact: v and floor(v) share their binary exponent range
    m, e = np.frexp(frac)
    M = np.ascontiguousarray((m * 2.0**53).astype(np.int64))
    E = np.ascontiguousarray((53 - e).astype(np.int64))
    up = np.empty(frac.shape, dtype=np.int64)
    resolve_rng(rng)._fill(_dyadic_batch, up, 4, M, E)
    return fl.astype(np.int64) + up.reshape(v.shape)


# --------------------------------------------------------------------------------------------
# Lattice arithmetic
# --------------------------------------------------------------------------------------------

_LAPLACE_BITS = 40  # t = scale / g lies in [2**40, 2**41]
_GAUSS_BITS = 54  # sigma / g lies in [2**54, 2**55]
_L2_BITS = 16  # T = scale / g lies in [2**16, 2**17]


def _pow2_below(x: float, bits: int) -> float:
    return math.ldexp(1.0, math.floor(math.log2(x)) - bits)


def _check_values(values: np.ndarray) -> np.ndarray:
    try:
        v = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError("values to be released must be numbers") from None
    if not np.all(np.isfinite(v)):
        raise DataError("values to be released must be finite (no NaN or inf)")
    return v


def _nonempty(values: np.ndarray | float) -> np.ndarray:
    v = np.atleast_1d(_check_values(values))
    if v.size == 0:
        raise DataError("there are no values to release")
    return v


def _lattice_add(values: np.ndarray, g: float, noise: np.ndarray) -> np.ndarray:
    """``g * (round(values / g) + noise)`` computed exactly on the integer lattice (deterministic rounding)."""
    scaled = np.rint(values / g)
    if scaled.size == 0 or np.max(np.abs(scaled)) < 2.0**61:
        k = scaled.astype(np.int64)
        # |noise| < 2**61 for every scale we allow, so the sum cannot overflow.
        return (k + noise).astype(np.float64) * g
    flat = [float(int(a) + int(b)) * g for a, b in zip(scaled.reshape(-1), noise.reshape(-1), strict=True)]
    return np.asarray(flat, dtype=np.float64).reshape(values.shape)


def _check_eps(epsilon: float, name: str = "epsilon") -> float:
    e = float(epsilon)
    if not (math.isfinite(e) and e > 0):
        raise ParameterError(f"{name} must be a positive finite number, got {epsilon!r}")
    return e


def _check_sens(sensitivity: float) -> float:
    s = float(sensitivity)
    if not (math.isfinite(s) and s > 0):
        raise ParameterError(f"sensitivity must be a positive finite number, got {sensitivity!r}")
    return s


@dataclass(frozen=True)
class LaplaceCalibration:
    """Calibration of the lattice Laplace mechanism (deterministic rounding; user-level DP).

    The noise is ``g * DLap(t)`` (``scale = g t``), the values are rounded to ``g Z``, and the
    mechanism is ``epsilon``-DP for any two inputs whose l1 distance is at most ``sensitivity``:
    ``t >= (sensitivity / g + dim) / epsilon`` covers the rounding of ``dim`` coordinates.
    """

    epsilon: float
    sensitivity: float
    dim: int
    granularity: float
    t: int

    @property
    def scale(self) -> float:
        """The Laplace scale actually used (at least ``sensitivity / epsilon``)."""
        return self.granularity * self.t


def calibrate_laplace(l1_sensitivity: float, epsilon: float, dim: int = 1) -> LaplaceCalibration:
    """Lattice Laplace calibration giving exactly ``epsilon``-DP for l1 sensitivity ``l1_sensitivity``."""
    eps = _check_eps(epsilon)
    sens = _check_sens(l1_sensitivity)
    b = sens / eps
    g = _pow2_below(b, _LAPLACE_BITS)
    t = math.ceil((sens / g + dim) / eps)
    if t > 2**52:
        raise ParameterError("Laplace calibration overflow (epsilon is too small relative to the sensitivity)")
    return LaplaceCalibration(eps, sens, int(dim), g, int(t))


def add_laplace(values: np.ndarray, calibration: LaplaceCalibration, rng: RngLike = None) -> np.ndarray:
    """Release ``values`` with lattice Laplace noise as calibrated (see :func:`calibrate_laplace`)."""
    v = _check_values(values)
    if v.size > calibration.dim:
        raise ParameterError(f"calibration covers {calibration.dim} coordinates but {v.size} values were given")
    z = discrete_laplace(calibration.t, v.shape, rng)
    return _lattice_add(v, calibration.granularity, z)


def laplace_mechanism(
    values: np.ndarray | float, l1_sensitivity: float, epsilon: float, rng: RngLike = None
) -> np.ndarray:
    """``epsilon``-DP release of ``values`` whose l1 sensitivity is ``l1_sensitivity`` (lattice Laplace)."""
    v = _nonempty(values)
    cal = calibrate_laplace(l1_sensitivity, epsilon, dim=v.size)
    return add_laplace(v, cal, rng)


def laplace_noise(scale: float, size: int | tuple[int, ...], rng: RngLike = None) -> np.ndarray:
    """Samples of ``g * DLap(round(scale / g))``: Laplace noise of (almost exactly) ``scale`` on a lattice.

    For tests and for values that are already lattice points; releases should use
    :func:`laplace_mechanism` or :func:`add_laplace`, which also round the values.
    """
    scale = _check_sens(scale)
    g = _pow2_below(scale, _LAPLACE_BITS)
    return discrete_laplace(round(scale / g), size, rng).astype(np.float64) * g


# --------------------------------------------------------------------------------------------
# Gaussian
# --------------------------------------------------------------------------------------------


def gaussian_delta(sigma: float, l2_sensitivity: float, epsilon: float) -> float:
    """Exact delta of the Gaussian mechanism (Balle & Wang 2018, Theorem 8).

    ``delta = Phi(D/(2s) - e s/D) - exp(e) Phi(-D/(2s) - e s/D)`` for sensitivity ``D``, noise ``s``.
    Computed in log space so that it is accurate for large ``epsilon``. ``D = 0`` gives 0.
    """
    D, s, e = float(l2_sensitivity), float(sigma), float(epsilon)
    if D == 0:
        return 0.0
    a = D / (2 * s) - e * s / D
    b = -D / (2 * s) - e * s / D
    la = special.log_ndtr(a)
    lb = e + special.log_ndtr(b)
    if lb >= la:
        return 0.0
    return float(math.exp(la) * -math.expm1(lb - la))


def analytic_gaussian_sigma(l2_sensitivity: float, epsilon: float, delta: float) -> float:
    """Smallest ``sigma`` for which the Gaussian mechanism is ``(epsilon, delta)``-DP (analytic Gaussian
    mechanism of Balle & Wang 2018). Valid for every ``epsilon > 0``, unlike the classical
    ``sqrt(2 ln(1.25/delta))`` formula, which needs ``epsilon < 1``."""
    D = _check_sens(l2_sensitivity)
    e = _check_eps(epsilon)
    d = float(delta)
    if not 0 < d < 1:
        raise ParameterError(f"delta must be in (0, 1), got {delta!r}")
    lo, hi = D * 1e-6, D
    while gaussian_delta(hi, D, e) > d:
        hi *= 2
    while gaussian_delta(lo, D, e) <= d:
        lo /= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if gaussian_delta(mid, D, e) > d:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return hi


_DELTA_MARGIN = 1e-9  # relative room kept below the requested delta for the negligible terms
_TRUNCATION_DELTA = 2 * math.exp(-480)  # per coordinate: the sampler keeps |x| < 32 sigma


def zcdp_delta(rho: float, epsilon: float) -> float:
    """delta of a ``rho``-zCDP mechanism at ``epsilon``: ``inf_{a > 1} exp((a-1)(a rho - eps)) (a-1)^(a-1) / a^a``
    (Canonne, Kamath & Steinke 2020, Proposition 12 / Corollary 13; Asoodeh et al. 2021). Every ``a``
    gives a valid bound, so the numerical minimisation can only make it looser, never wrong."""
    from scipy.optimize import minimize_scalar

    rho, eps = float(rho), float(epsilon)
    if rho <= 0:
        return 0.0

    def log_delta(a: float) -> float:
        return (a - 1) * (a * rho - eps) + (a - 1) * math.log(a - 1) - a * math.log(a)

    def in_u(u: float) -> float:  # a = 1 + e^u
        return log_delta(1 + math.exp(u))

    u_hi = math.log(10 * (1 + eps / rho) + 10 / math.sqrt(rho))
    grid = np.linspace(-25.0, u_hi, 241)
    vals = [in_u(float(u)) for u in grid]
    k = int(np.argmin(vals))
    lo_u, hi_u = grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)]
    res = minimize_scalar(in_u, bounds=(lo_u, hi_u), method="bounded", options={"xatol": 1e-10})
    best = min(float(res.fun), vals[k])
    return min(1.0, math.exp(best))


@dataclass(frozen=True)
class GaussianCalibration:
    """Calibration of the lattice Gaussian mechanism: noise ``g * DGauss(w^2)``, ``sigma = g w``.

    Values are rounded to ``g Z`` (deterministic rounding), which moves two inputs apart by at most
    ``rounding = g sqrt(dim)`` in l2. The discrete Gaussian with l2 sensitivity ``D`` is
    ``D^2 / (2 sigma^2)``-zCDP exactly (Canonne, Kamath & Steinke 2020, Proposition 5 and Theorem 14: its
    Renyi divergences are at most the continuous Gaussian's), so the delta at ``epsilon`` is
    :func:`zcdp_delta` of ``rho = (D + rounding)^2 / (2 sigma^2)``. This is the accounting OpenDP uses for the
    discrete Gaussian; it needs about 10% more noise than the analytic continuous Gaussian, whose delta
    the discrete Gaussian can exceed (by a relative 2.5e-4 at sigma = 13 lattice steps, measured exactly).
    With ``sigma / g >= 2^54`` the rounding term is below ``6e-17 sqrt(dim)`` of the sensitivity, so two
    inputs closer than a lattice step are covered too (see :meth:`delta_at`).
    """

    epsilon: float
    delta: float
    sensitivity: float
    dim: int
    granularity: float
    w: int

    @property
    def sigma(self) -> float:
        return self.granularity * self.w

    @property
    def rounding(self) -> float:
        """Largest l2 distance rounding can add between two inputs: ``g sqrt(dim)``."""
        return self.granularity * math.sqrt(self.dim)

    def rho_at(self, distance: float) -> float:
        """zCDP parameter for two inputs at l2 distance ``distance`` (rounding included)."""
        return (float(distance) + self.rounding) ** 2 / (2 * self.sigma**2)

    def delta_at(self, distance: float, epsilon: float) -> float:
        """An upper bound on the delta at ``epsilon`` for two inputs at l2 distance ``distance``:
        :func:`zcdp_delta` at :meth:`rho_at`, plus the truncation term ``2 dim exp(-480)`` (below double
        precision next to any delta userdp accepts; added for completeness)."""
        return zcdp_delta(self.rho_at(distance), float(epsilon)) + self.dim * _TRUNCATION_DELTA


def calibrate_gaussian(
    l2_sensitivity: float, epsilon: float, delta: float, dim: int = 1, *, lattice_bits: int | None = None
) -> GaussianCalibration:
    """Lattice Gaussian calibration giving ``(epsilon, delta)``-DP for l2 sensitivity ``l2_sensitivity``
    (zCDP accounting of the discrete Gaussian, see :class:`GaussianCalibration`). ``lattice_bits`` (audits
    only) puts ``sigma`` about ``2^lattice_bits`` lattice steps instead of ``2^54``, so that the exact law
    can be enumerated."""
    sens = _check_sens(l2_sensitivity)
    eps = _check_eps(epsilon)
    target = float(delta)
    if not 0 < target < 1:
        raise ParameterError(f"delta must be in (0, 1), got {delta!r}")
    sigma0 = analytic_gaussian_sigma(sens, eps, target)  # a lower bound: zCDP needs at least this
    g = _pow2_below(sigma0, _GAUSS_BITS if lattice_bits is None else int(lattice_bits))
    sens_eff = sens + g * math.sqrt(dim)
    goal = target * (1 - _DELTA_MARGIN)

    def ok(sigma: float) -> bool:
        return zcdp_delta(sens_eff**2 / (2 * sigma**2), eps) + dim * _TRUNCATION_DELTA <= goal

    lo, hi = sigma0, 2 * sigma0
    while not ok(hi):
        lo, hi = hi, 2 * hi
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
        if hi - lo <= 1e-13 * hi:
            break
    w = math.ceil(hi / g)
    cal = GaussianCalibration(eps, target, sens, int(dim), g, int(w))
    if cal.delta_at(sens, eps) > target:  # pragma: no cover - the bisection above guarantees it
        raise ParameterError("Gaussian calibration failed to reach the requested delta")
    if w > _GAUSS_SQ_MAX:  # pragma: no cover - sigma / sigma0 < 2 for every delta < 1
        raise ParameterError("Gaussian calibration overflow")
    return cal


def _zcdp_log_delta_grid(rho: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """``log`` of the :func:`zcdp_delta` bound for arrays of ``(rho, eps)``, minimised over a fixed grid of
    Renyi orders (each order gives a valid bound, so the grid minimum is a valid, slightly looser bound)."""
    a = 1 + np.exp(np.linspace(-20.0, 60.0, 801))[None, :]
    r, e = np.asarray(rho, float)[:, None], np.asarray(eps, float)[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        ld = (a - 1) * (a * r - e) + (a - 1) * np.log(a - 1) - a * np.log(a)
    ld = np.where(np.isnan(ld), np.inf, ld)
    return np.minimum(ld.min(axis=1), 0.0)


def metric_gaussian_sup_delta(cal: GaussianCalibration, lipschitz: float, alpha: float) -> float:
    """A rigorous upper bound on ``sup_{0 <= d <= 1} delta(d)`` for the per-distance guarantee
    ``(alpha d, delta(d))`` of the lattice Gaussian on a query with ``|q(K) - q(K')| <= lipschitz d``
    (PrivEMDLinear's Gaussian variant). ``delta(d)`` grows with the distance ``lipschitz d + rounding`` and
    shrinks with ``epsilon = alpha d``, so on each cell ``[d_k, d_{k+1}]`` of a geometric grid it is at most
    the zCDP bound at ``(rho(d_{k+1}), alpha d_k)``; below ``1e-15`` the bound at ``(rho(1e-15), 0)`` holds."""
    ell, a = float(lipschitz), float(alpha)
    d = np.concatenate([[0.0], np.geomspace(1e-15, 1.0, 4000)])
    rho = (ell * d[1:] + cal.rounding) ** 2 / (2 * cal.sigma**2)
    eps = a * d[:-1]
    worst = float(np.exp(_zcdp_log_delta_grid(rho, eps)).max())
    return worst + cal.dim * _TRUNCATION_DELTA


def calibrate_gaussian_metric(lipschitz: float, alpha: float, delta: float, dim: int = 1) -> GaussianCalibration:
    """The lattice Gaussian for a per-distance guarantee ``(alpha d, delta)`` at *every* ``d_EM = d`` in
    ``[0, 1]`` (Imola et al.'s Gaussian variant of PrivEMDLinear): :func:`calibrate_gaussian` at ``d = 1``,
    then ``sigma`` raised (if needed) until :func:`metric_gaussian_sup_delta` is within ``delta``."""
    cal = calibrate_gaussian(lipschitz, alpha, delta, dim)
    goal = float(delta) * (1 - _DELTA_MARGIN)
    w = cal.w
    for _ in range(200):
        c = GaussianCalibration(cal.epsilon, cal.delta, cal.sensitivity, cal.dim, cal.granularity, w)
        if metric_gaussian_sup_delta(c, lipschitz, alpha) <= goal:
            return c
        w = math.ceil(w * 1.01)
    raise ParameterError("could not calibrate the Gaussian variant for every distance; use a larger delta")


def add_gaussian(values: np.ndarray, calibration: GaussianCalibration, rng: RngLike = None) -> np.ndarray:
    """Release ``values`` with lattice (discrete) Gaussian noise as calibrated: one release of a vector of at
    most ``dim`` coordinates, or one release per row of a matrix with ``dim`` columns."""
    v = _check_values(values)
    width = v.shape[1] if v.ndim == 2 else v.size
    if width > calibration.dim:
        raise ParameterError(f"calibration covers {calibration.dim} coordinates but {width} values were given")
    z = discrete_gaussian(calibration.w**2, v.shape, rng)
    return _lattice_add(v, calibration.granularity, z)


def gaussian_mechanism(
    values: np.ndarray | float, l2_sensitivity: float, epsilon: float, delta: float, rng: RngLike = None
) -> np.ndarray:
    """``(epsilon, delta)``-DP release of ``values`` with l2 sensitivity ``l2_sensitivity``."""
    v = _nonempty(values)
    cal = calibrate_gaussian(l2_sensitivity, epsilon, delta, dim=v.size)
    return add_gaussian(v, cal, rng)


def gaussian_noise(sigma: float, size: int | tuple[int, ...], rng: RngLike = None) -> np.ndarray:
    """Samples of ``g * DGauss(w^2)`` with ``g w ~ sigma`` (for tests and lattice-aligned values)."""
    sigma = _check_sens(sigma)
    g = _pow2_below(sigma, _GAUSS_BITS)
    return discrete_gaussian(round(sigma / g) ** 2, size, rng).astype(np.float64) * g


# --------------------------------------------------------------------------------------------
# K-norm noise on the lattice (metric DP): l1 = discrete Laplace per coordinate, l2 = L2LatticeLaw
# --------------------------------------------------------------------------------------------

Norm = Literal["l1", "l2"]

_S_BITS = 13  # s = 2**13 sub-steps per lattice step in the radius of the l2 law
_SMOOTH = 256  # c = 256 isqrt(dim) lattice steps of smoothing at the origin
_SAFETY = 1e-12  # relative margin on kappa for floating-point rounding in its evaluation


@dataclass(frozen=True)
class L2LatticeLaw:
    """The lattice law ``P(z) ∝ exp(-rho(z) / (s T))`` on ``Z^dim`` with ``rho(z) = ceil(s sqrt(|z|^2 + c^2))``.

    A discrete, exactly sampleable stand-in for the l2 K-norm density ``exp(-|z| / T)`` (Hardt & Talwar
    2010; the Gamma(dim) radius of Imola et al., Algorithm 1). ``s`` makes the radius a multiple of ``1/s``
    lattice steps (so ``rho`` is an exact integer); ``c`` rounds off the cone of ``|z|`` at the origin.

    **Guarantee** (with randomized rounding of the input, :func:`knorm_mechanism`): for inputs ``x, x'``
    the log-ratio of the output probabilities is at most ``kappa |x - x'|_2 / (g T)``, at every distance,
    where ``kappa = e^{(1 + 1/s)/T} (sqrt(1 + dim / (4 c^2)) + sqrt(dim) / s) psi`` and ``psi <= 1 + 1e-200``
    bounds the sampler's normalising constants (see the proof in the docstring of :meth:`kappa`).

    **Sampler** (exact, :meth:`sample`): the law is the ``z``-marginal of
    ``P(j, z) ∝ exp(-j / (s T)) 1[rho(z) <= j]``. Propose ``j`` negative-binomial (a sum of ``dim + 1``
    geometric draws of mean ``s T``), accept it with the exact rational and ``exp(-rational)`` factors
    that turn it into ``∝ exp(-j/(sT)) w^dim e^{Q/(2w^2)}``, draw ``z`` from the discrete Gaussian of
    variance ``w^2`` (``w = ceil(j / (s isqrt(dim)))``), keep it if ``|z|^2 <= Q = floor(j^2/s^2) - c^2``
    with probability ``exp(-(Q - |z|^2) / (2 w^2))``: given ``j`` this is uniform on the lattice ball, and
    the discrete Gaussian's normaliser ``Theta(w) = w sqrt(2 pi) (1 + O(e^{-2 pi^2 w^2}))`` cancels the
    ``w^dim`` factor. Every lattice point has positive probability.
    """

    dim: int
    T: int
    s: int = 1 << _S_BITS
    c: int = 0

    def __post_init__(self) -> None:
        if self.dim < 2 or self.dim > 1024:
            raise ParameterError(f"the l2 lattice law needs 2 <= dim <= 1024, got {self.dim}")
        if self.c == 0:
            object.__setattr__(self, "c", _SMOOTH * math.isqrt(self.dim))
        if self.s < 4 or self.s & (self.s - 1) or self.T < 1 or self.c < 1:
            raise ParameterError("the l2 lattice law needs s a power of two >= 4, T >= 1, c >= 1")

    # -- derived integers ---------------------------------------------------------------------
    @property
    def tau(self) -> int:
        return self.s * self.T

    @property
    def root(self) -> int:
        return math.isqrt(self.dim)

    @property
    def A(self) -> int:
        return self.s * self.root

    @property
    def j_min(self) -> int:
        return self.s * self.c

    @property
    def M(self) -> int:
        return (self.j_min + self.A - 1) // (self.A - 2)

    @property
    def w_max(self) -> int:
        return (1 << 30) // self.root

    @property
    def j_fast(self) -> int:
        """Largest radius index the compiled sampler handles (beyond it: Python integers)."""
        return self.A * self.w_max

    def rho(self, z: np.ndarray) -> np.ndarray:
        """``ceil(s sqrt(|z|^2 + c^2))`` exactly, row by row (Python integers)."""
        z = np.atleast_2d(np.asarray(z))
        out = []
        for row in z:
            n2 = self.s**2 * (sum(int(v) * int(v) for v in row) + self.c**2)
            r = math.isqrt(n2)
            out.append(r if r * r == n2 else r + 1)
        return np.array(out, dtype=object)

    def w_of(self, j: int) -> int:
        return -(-j // self.A)

    def ball(self, j: int) -> int:
        """``Q_j = floor(j^2 / s^2) - c^2``: ``rho(z) <= j`` iff ``|z|^2 <= Q_j``."""
        return j * j // (self.s * self.s) - self.c * self.c

    def psi_ratio(self) -> float:
        """An upper bound on ``max_j psi_j / min_j psi_j`` where ``psi_j = (w sqrt(2 pi) / Theta_32(w))^dim``
        and ``Theta_32(w) = sum_{|k| < 32 w} exp(-k^2 / (2 w^2))`` (the truncated discrete Gaussian's
        normaliser). Poisson summation gives ``Theta(w) <= w sqrt(2 pi) (1 + 2 e^{-2 pi^2 w^2} / (1 -
        e^{-2 pi^2 w^2}))``; the truncation removes less than ``2 e^{-512} Theta``."""
        w = self.w_of(self.j_min)
        up = 2 * math.exp(-2 * math.pi**2 * w * w) / (1 - math.exp(-2 * math.pi**2 * w * w))
        down = 2 * math.exp(-(32.0**2) / 2)
        return math.exp(self.dim * (math.log1p(up) - math.log1p(-down)))

    def kappa(self) -> float:
        """The factor by which the privacy loss exceeds the ideal ``|x - x'| / (g T)``.

        Proof sketch. Write ``F(x) = sum_b w_b(frac) P(y - floor(x) - b)`` for the law of the released
        lattice point (randomized rounding is multilinear interpolation over the unit cube of corners
        ``x - b``). ``d F / d x_i`` is a weighted sum of ``P(z - e_i) - P(z)`` over corner pairs, and
        ``|P(z') - P(z)| <= (e^{m} - 1) psi_ratio min(P(z), P(z'))`` with ``m = |rho(z) - rho(z')| / (sT)
        <= (|h(z) - h(z')| + 1/s) / T`` for ``h = sqrt(|.|^2 + c^2)``. For a corner pair along ``e_i``,
        ``|h(z) - h(z - e_i)| = |2 p_i| / (h(z) + h(z - e_i)) <= |p_i| / h_min`` with ``p`` the cube's centre
        and ``h_min >= sqrt((|p| - sqrt(dim)/2)_+^2 + c^2)``; Cauchy-Schwarz and ``sup_r r / sqrt((r - a)^2 +
        c^2) = sqrt(1 + a^2 / c^2)`` give ``|d log F / du| <= kappa |u|_2 / T`` per lattice step.
        """
        return (
            math.exp((1 + 1 / self.s) / self.T)
            * (math.sqrt(1 + self.dim / (4 * self.c**2)) + math.sqrt(self.dim) / self.s)
            * self.psi_ratio()
            * (1 + _SAFETY)
        )

    # -- sampling ---------------------------------------------------------------------------------
    def _params(self, j_fast: int | None = None) -> tuple:
        jf = self.j_fast if j_fast is None else int(j_fast)
        return (
            np.int64(self.tau),
            np.int64(self.s.bit_length() - 1),
            np.int64(self.c * self.c),
            np.int64(self.root),
            np.int64(self.A),
            np.int64(self.j_min),
            np.int64(self.M),
            np.int64(jf),
        )

    def sample(self, size: int, rng: RngLike = None, *, j_fast: int | None = None) -> np.ndarray:
        """``size`` exact draws (shape ``(size, dim)``, ``int64``). ``j_fast`` (tests only) lowers the limit
        beyond which the attempt is finished on Python integers."""
        src = resolve_rng(rng)
        out = np.empty((int(size), self.dim), dtype=np.int64)
        hand = np.zeros(2, dtype=np.int64)

        def slow(i: int) -> None:
            out[i] = self._finish_python(int(hand[0]) + self.tau * int(hand[1]), src)

        # measured: about 130 (dim 2) to 450 (dim 50) words per coordinate
        src._fill(_l2_batch, out, 500 * self.dim, *self._params(j_fast), hand, slow=slow)
        return out

    # The same algorithm on Python integers (for radius indices beyond j_fast, and as a reference).
    def _finish_python(self, j: int | None, src: RandomSource) -> np.ndarray:
        """Finish an attempt whose radius index is ``j`` (``None``: start a new attempt), retrying until one
        is accepted; every step is the compiled sampler's step on Python integers."""
        d = self.dim
        while True:
            if j is None:
                j = sum(_geometric_py(self.tau, src) for _ in range(d + 1))
            z = self._attempt_python(j, src)
            if z is not None:
                return np.array(z, dtype=object if max(abs(v) for v in z) >= 2**62 else np.int64)
            j = None

    def _attempt_python(self, j: int, src: RandomSource) -> list[int] | None:
        if j < self.j_min:
            return None
        d, A, M = self.dim, self.A, self.M
        w = self.w_of(j)
        for i in range(1, d + 1):
            if not src.randbelow((j + i) * M) < w * A * (M - 1):
                return None
        Q = self.ball(j)
        if not bernoulli_exp(Fraction((self.root * w) ** 2 - Q, 2 * w * w), src):
            return None
        rem = Q
        z = []
        for _ in range(d):
            x = _dgauss_sq_py(w, src)
            rem -= x * x
            if rem < 0:
                return None
            z.append(x)
        if bernoulli_exp(Fraction(rem, 2 * w * w), src):
            return z
        return None


def _geometric_py(tau: int, src: RandomSource) -> int:
    """``P(G = g) ∝ exp(-g / tau)`` on Python integers (as :func:`_geometric`)."""
    while True:
        u = src.randbelow(tau)
        if _bern_exp_le1_py(Fraction(u, tau), src):
            break
    v = 0
    while _bern_exp_le1_py(Fraction(1), src):
        v += 1
    return u + tau * v


def _dgauss_sq_py(w: int, src: RandomSource) -> int:
    """The discrete Gaussian of variance ``w^2`` on ``|x| < 32 w`` on Python integers (as :func:`_dgauss_sq`)."""
    while True:
        g = _geometric_py(w, src)
        b = src.randbelow(2)
        if g >= 32 * w or (b == 1 and g == 0):
            continue
        if bernoulli_exp(Fraction((g - w) ** 2, 2 * w * w), src):
            return -g if b == 1 else g


@dataclass(frozen=True)
class KNormCalibration:
    """Calibration of the lattice K-norm mechanism with randomized rounding (:func:`knorm_mechanism`).

    The release is ``g (randomized_round(x / g) + Z)`` with ``Z`` exact lattice noise: ``DLap(t)`` per
    coordinate (``norm = "l1"``, or any norm in one dimension) or the :class:`L2LatticeLaw` of parameter
    ``T`` (``"l2"``). For any two inputs the log-ratio of output probabilities is at most
    ``loss_per_unit * |x - x'|`` in the norm, **at every distance** (no additive rounding term):

    * l1: ``loss_per_unit = expm1(1/t) / g`` (each coordinate's interpolated discrete Laplace has
      ``|d log P / dx| <= (e^{1/t} - 1) / g``);
    * l2: ``loss_per_unit = kappa / (g T)`` (:meth:`L2LatticeLaw.kappa`).

    ``epsilon_realized = sensitivity * loss_per_unit <= epsilon``.
    """

    epsilon: float
    sensitivity: float
    norm: str
    dim: int
    granularity: float
    t: int
    law: L2LatticeLaw | None = None

    @property
    def loss_per_unit(self) -> float:
        if self.law is None:
            return math.expm1(1 / self.t) / self.granularity * (1 + _SAFETY)
        return self.law.kappa() / (self.granularity * self.law.T)

    @property
    def epsilon_realized(self) -> float:
        return self.sensitivity * self.loss_per_unit

    @property
    def scale(self) -> float:
        """The noise scale ``g t`` (continuous K-norm scale of the lattice law; ``E|Z| ~ dim * scale``)."""
        return self.granularity * self.t

    def expected_norm(self) -> float:
        """``E|Z|`` in the mechanism's norm (``dim * scale`` for the K-norm density, to within 0.1%)."""
        return self.dim * self.scale


def calibrate_knorm(sensitivity: float, epsilon: float, norm: Norm, dim: int) -> KNormCalibration:
    """Lattice K-norm calibration: ``epsilon_realized <= epsilon`` at every distance for inputs whose
    ``norm``-distance is at most ``sensitivity`` (and in proportion below it)."""
    eps = _check_eps(epsilon)
    sens = _check_sens(sensitivity)
    dim = int(dim)
    if dim < 1:
        raise ParameterError("the K-norm mechanism needs at least one coordinate")
    if norm not in ("l1", "l2"):
        raise ParameterError(
            f"norm must be 'l1' or 'l2', got {norm!r} (the l-infinity K-norm has no exact lattice sampler here)"
        )
    b = sens / eps
    if norm == "l1" or dim == 1:
        g = _pow2_below(b, _LAPLACE_BITS)
        # smallest t with expm1(1/t) (1 + SAFETY) / g * sens <= eps, i.e. t >= 1 / log1p(g eps / (sens (1+SAFETY)))
        t = math.ceil(1 / math.log1p(g * eps / (sens * (1 + _SAFETY)))) + 1
        cal = KNormCalibration(eps, sens, norm, dim, g, int(t))
    else:
        g = _pow2_below(b, _L2_BITS)
        s_, c_ = 1 << _S_BITS, _SMOOTH * math.isqrt(dim)
        probe = L2LatticeLaw(dim, 1 << _L2_BITS, s_, c_)
        T = math.ceil(probe.kappa() * b / g) + 1
        law = L2LatticeLaw(dim, T, s_, c_)
        cal = KNormCalibration(eps, sens, norm, dim, g, int(T), law)
    if cal.epsilon_realized > eps:  # pragma: no cover - the constructions above guarantee it
        raise ParameterError("K-norm calibration failed to reach the requested epsilon")
    return cal


def lattice_knorm_noise(calibration: KNormCalibration, size: int, rng: RngLike = None) -> np.ndarray:
    """``size`` exact lattice noise vectors (integer lattice coordinates, shape ``(size, dim)``)."""
    if calibration.law is None:
        return discrete_laplace(calibration.t, (int(size), calibration.dim), rng)
    return calibration.law.sample(int(size), rng)


def knorm_release(values: np.ndarray, calibration: KNormCalibration, rng: RngLike = None) -> np.ndarray:
    """Release each row of ``values`` (shape ``(n, dim)``) with the calibrated lattice K-norm mechanism:
    ``g (randomized_round(values / g) + Z)``."""
    v = _check_values(values)
    m = v[None, :] if v.ndim == 1 else v
    if m.shape[1] != calibration.dim:
        raise ParameterError(f"calibration covers {calibration.dim} coordinates per row, got {m.shape[1]}")
    src = resolve_rng(rng)
    k = randomized_round(m / calibration.granularity, src)
    z = lattice_knorm_noise(calibration, m.shape[0], src)
    out = (k + z).astype(np.float64) * calibration.granularity
    return out[0] if v.ndim == 1 else out


def knorm_mechanism(
    values: np.ndarray, sensitivity: float, epsilon: float, norm: Norm = "l2", rng: RngLike = None
) -> np.ndarray:
    """Release a vector (or each row of a matrix) with the lattice K-norm mechanism.

    ``sensitivity`` bounds ``||f(D) - f(D')||`` in the given norm; every row is released with
    ``epsilon``-DP for that sensitivity, and two inputs at distance ``r`` are ``epsilon r / sensitivity``-
    indistinguishable however small ``r`` is (metric DP; see :class:`KNormCalibration`). The values are
    randomized-rounded to the lattice and exact lattice noise is added to the integer coordinates.
    """
    v = _check_values(values)
    dim = v.shape[0] if v.ndim == 1 else v.shape[1]
    return knorm_release(v, calibrate_knorm(sensitivity, epsilon, norm, dim), rng)


# --------------------------------------------------------------------------------------------
# Exact selection
# --------------------------------------------------------------------------------------------


def bernoulli_exp(gamma: Fraction, rng: RngLike = None) -> bool:
    """Exact ``Bernoulli(exp(-gamma))`` for a non-negative rational ``gamma`` (Python integers)."""
    src = resolve_rng(rng)
    g = Fraction(gamma)
    if g < 0:
        raise ValueError("gamma must be non-negative")
    whole = g.numerator // g.denominator
    for _ in range(whole):
        if not _bern_exp_le1_py(Fraction(1), src):
            return False
    return _bern_exp_le1_py(g - whole, src)


def _bern_exp_le1_py(g: Fraction, src: RandomSource) -> bool:
    k = 1
    num, den = g.numerator, g.denominator
    while True:
        if not src.randbelow(den) < num:
            break
        if src.randbelow(k) != 0:
            break
        k += 1
    return k % 2 == 1


def _selection_inputs(scores, sensitivity: float, epsilon: float) -> tuple[list[Fraction], Fraction]:
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if s.size == 0:
        raise ParameterError("selection needs at least one candidate")
    if not np.all(np.isfinite(s)):
        raise ParameterError("scores must be finite")
    eps = Fraction(_check_eps(epsilon))
    sens = Fraction(_check_sens(sensitivity))
    return [Fraction(float(x)) for x in s], eps / sens


def _exp_interval(gamma: Fraction, ctx_lo: Context, ctx_hi: Context) -> tuple[Decimal, Decimal]:
    """Rigorous bounds ``lo <= exp(-gamma) <= hi`` in decimal arithmetic (``Decimal.exp`` is correctly
    rounded, so one unit in the last place on each side covers its error)."""
    x_lo = ctx_lo.divide(Decimal(gamma.numerator), Decimal(gamma.denominator))
    x_hi = ctx_hi.divide(Decimal(gamma.numerator), Decimal(gamma.denominator))
    lo = ctx_lo.next_minus(ctx_lo.exp(-x_hi))
    hi = ctx_hi.next_plus(ctx_hi.exp(-x_lo))
    return max(lo, Decimal(0)), hi


def _context(digits: int, rounding: str) -> Context:
    return Context(prec=digits, rounding=rounding, Emin=-(10**17), Emax=10**17)


def exponential_mechanism(
    scores, sensitivity: float, epsilon: float, rng: RngLike = None, monotone: bool = False
) -> int:
    """Exact exponential mechanism: index ``i`` with probability ``∝ exp(eps s_i / (2 Delta))``.

    ``epsilon``-DP when each score has sensitivity ``Delta`` (``exp(eps s_i / Delta)`` when the scores
    are monotone, i.e. all move in the same direction between neighbours).

    Sampled by inverting the CDF: a uniform ``U`` is drawn lazily (256 bits, then 64 more at a time) and
    compared with the cumulative weights ``exp(-gamma_i)``, ``gamma_i = c (s_max - s_i)``, computed in
    decimal interval arithmetic at 60 digits (doubling when undecided). The answer is the exact
    ``min {i : U < C_i / C_m}``, so the law is exact; the work is ``m`` exponentials whatever the scores,
    except in the rare event (probability below ``m 10^-38``) that ``U`` falls within the interval width
    of a cell boundary. (The previous rejection sampler's number of proposals depended on the scores: a
    timing side channel.)
    """
    src = resolve_rng(rng)
    fr, ratio = _selection_inputs(scores, sensitivity, epsilon)
    c = ratio if monotone else ratio / 2
    smax = max(fr)
    gammas = [c * (smax - s) for s in fr]
    m = len(gammas)
    if m == 1:
        return 0
    ubits, u = 256, src.randbelow(1 << 256)
    digits = 60
    while True:
        lo_ctx, hi_ctx = _context(digits, ROUND_FLOOR), _context(digits, ROUND_CEILING)
        lo_cum, hi_cum = [], []
        acc_lo, acc_hi = Decimal(0), Decimal(0)
        for gm in gammas:
            a, b = _exp_interval(gm, lo_ctx, hi_ctx)
            acc_lo = lo_ctx.add(acc_lo, a)
            acc_hi = hi_ctx.add(acc_hi, b)
            lo_cum.append(acc_lo)
            hi_cum.append(acc_hi)
        total_lo, total_hi = lo_cum[-1], hi_cum[-1]
        u_lo = lo_ctx.divide(Decimal(u), Decimal(1 << ubits))
        u_hi = hi_ctx.divide(Decimal(u + 1), Decimal(1 << ubits))
        # the answer is the first i with U < C_i / C_m; find the first i whose ratio may exceed U
        for i in range(m):
            r_hi = hi_ctx.divide(hi_cum[i], total_lo) if i < m - 1 else Decimal(1)
            if r_hi > u_lo:
                break
        r_lo = lo_ctx.divide(lo_cum[i], total_hi) if i < m - 1 else Decimal(1)
        prev_hi = hi_ctx.divide(hi_cum[i - 1], total_lo) if i > 0 else Decimal(0)
        if u_hi <= r_lo and prev_hi <= u_lo:
            return i
        u = (u << 64) | src.randbelow(1 << 64)
        ubits += 64
        digits *= 2


def permute_and_flip(scores, sensitivity: float, epsilon: float, rng: RngLike = None, monotone: bool = False) -> int:
    """Exact permute-and-flip (McKenna & Sheldon 2020): ``epsilon``-DP, never worse than the exponential
    mechanism in expected score. Visits candidates in a uniformly random order and stops at ``i``
    with probability ``exp(eps (s_i - s_max) / (2 Delta))`` (``/ Delta`` if monotone). Its running time
    depends on the scores (the number of candidates visited); use :func:`exponential_mechanism` where
    that matters."""
    src = resolve_rng(rng)
    fr, ratio = _selection_inputs(scores, sensitivity, epsilon)
    c = ratio if monotone else ratio / 2
    smax = max(fr)
    for i in src.permutation(len(fr)):
        if bernoulli_exp(c * (smax - fr[int(i)]), src):
            return int(i)
    raise AssertionError("unreachable: the maximum is always accepted")


def sample_cumulative(cum: np.ndarray, rows: np.ndarray, rng: RngLike = None) -> np.ndarray:
    """Exact categorical draws from integer weights.

    ``cum`` is a ``(k_in, k_out)`` array of cumulative integer weights (each row non-decreasing,
    last entry the row total, at most ``2**62``); for each ``r`` in ``rows`` draw ``j`` with probability
    ``(cum[r, j] - cum[r, j-1]) / cum[r, -1]``. Because the weights are integers the privacy loss of a
    randomizer built on them can be computed exactly from the table.
    """
    src = resolve_rng(rng)
    cum = np.ascontiguousarray(cum, dtype=np.int64)
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    u = src.integers(cum[rows, -1])
    out = np.empty(rows.shape, dtype=np.int64)
    _searchsorted_rows(cum, rows, u, out)
    return out


# --------------------------------------------------------------------------------------------
# Keyed per-user streams: AES-256-CTR under HMAC-SHA256(master, user key)
# --------------------------------------------------------------------------------------------
#
# Per-user randomness that must be recomputable (a retried Spark task, the local engine reproducing
# the Spark engine's rows) is a deterministic function of a 256-bit master secret and the user key.
# The function is a PRF (HMAC-SHA256) followed by a stream cipher (AES-256-CTR), so a party that knows
# its own users' keys, items and outputs learns nothing about the master or about other users' streams.

_KEYED_STREAM_LABEL = b"userdp keyed per-user stream v1\x00"
_KEYED_SEED_LABEL = b"userdp keyed master from an explicit seed v1\x00"
_MASTER_BYTES = 32


def encode_user_key(user_key: object) -> bytes:
    """The canonical, type-tagged byte encoding of a user key (the message the per-user key is derived from).

    Keys that a local dataset and a Spark executor see for the same user encode identically: NumPy scalars
    encode like the Python values they hold (``np.int64(7)``, ``np.int32(7)`` and ``7`` agree, as do
    ``np.str_('a')`` and ``'a'``), and ``-0.0`` encodes like ``0.0``. Keys of different types never collide
    (``1``, ``'1'``, ``b'1'``, ``1.0`` and ``True`` are five different users): the encoding is a type tag,
    a zero byte, then an unambiguous payload (decimal digits for integers, UTF-8 for strings, the raw bytes,
    ``float.hex`` for floats).

    Parameters
    ----------
    user_key:
        An integer (Python or NumPy, not bool), a string, bytes, a float, or a bool.

    Returns
    -------
    bytes
        The encoding.

    Raises
    ------
    DataError
        For any other type (dates, decimals, tuples, ``None``...): convert the user column to strings or
        integers first.
    """
    if isinstance(user_key, (bool, np.bool_)):
        return b"bool\x00" + (b"1" if user_key else b"0")
    if isinstance(user_key, (int, np.integer)):
        return b"int\x00" + str(int(user_key)).encode("ascii")
    if isinstance(user_key, str):
        return b"str\x00" + user_key.encode("utf-8", "surrogatepass")
    if isinstance(user_key, (bytes, bytearray, memoryview)):
        return b"bytes\x00" + bytes(user_key)
    if isinstance(user_key, (float, np.floating)):
        x = float(user_key)
        return b"float\x00" + (0.0 if x == 0.0 else x).hex().encode("ascii")
    raise DataError(
        "keyed per-user randomness needs user keys that are integers, strings, bytes or floats, "
        f"not {type(user_key).__name__}; convert the user column first"
    )


def _keyed_stream_key(master: bytes, purpose: str, user_key: object) -> bytes:
    """The 256-bit AES key of one user's stream: HMAC-SHA256 over a label, the length-prefixed purpose and
    the canonical user key encoding (the key encoding comes last, so the message is unambiguous)."""
    import hashlib
    import hmac

    p = purpose.encode("utf-8")
    msg = _KEYED_STREAM_LABEL + len(p).to_bytes(4, "big") + p + encode_user_key(user_key)
    return hmac.new(master, msg, hashlib.sha256).digest()


class KeyedSource(RandomSource):
    """One user's random stream: the AES-256-CTR keystream under a per-user key, counter starting at zero.

    A :class:`RandomSource` whose :meth:`words` read the keystream, so every sampler built on words
    (``integers``, ``randbelow``, ``shuffle``, ``permutation``, GKRR's kernel, the exact noise samplers)
    works on it unchanged, and two sources with the same key give the same draws in the same order.
    Made by :meth:`KeyedStreams.source`; not picklable (ship the :class:`KeyedStreams` instead).
    """

    def __init__(self, key: bytes, seeded: bool) -> None:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        super().__init__()
        # Each per-user key encrypts exactly one stream, so a fixed all-zero initial counter block is safe.
        self._encryptor = Cipher(algorithms.AES(bytes(key)), modes.CTR(bytes(16))).encryptor()
        self._from_seed = bool(seeded)

    @property
    def seeded(self) -> bool:
        """True when the master came from an explicit seed (reproducible: not for real releases)."""
        return self._from_seed

    def __repr__(self) -> str:
        return "KeyedSource(seeded)" if self._from_seed else "KeyedSource(AES-256-CTR, os.urandom master)"

    def words(self, n: int) -> np.ndarray:
        """The next ``n`` 64-bit words of the keystream (little-endian, so every platform agrees)."""
        n = int(n)
        if n <= 0:
            return np.empty(0, dtype=_U64)
        return np.frombuffer(self._encryptor.update(bytes(8 * n)), dtype="<u8").astype(_U64)

    def __reduce__(self):
        raise TypeError("a KeyedSource cannot be pickled; ship the KeyedStreams and call .source() where needed")


def _keyed_streams_from_state(master: bytes, seeded: bool) -> KeyedStreams:
    return KeyedStreams._from_master(master, seeded)


class KeyedStreams:
    """A 256-bit master secret and the per-user random streams derived from it.

    ``KeyedStreams().source(user_key, purpose)`` is user ``user_key``'s stream for one purpose: the
    AES-256-CTR keystream under the key HMAC-SHA256(master, label ‖ purpose ‖ :func:`encode_user_key`),
    as a :class:`KeyedSource`. The same master, purpose and key always give the same stream -- on the
    driver, on every Spark executor and in the local engine -- so a retried task recomputes the same rows;
    without the master, the streams of different users (or purposes) are computationally independent, and
    knowing one's own user's stream reveals nothing about the master or any other user's stream.

    Parameters
    ----------
    seed:
        ``None`` (default): the master is 32 fresh bytes from the OS CSPRNG (``os.urandom``). An integer
        gives a reproducible master (SHA-256 of the seed) for tests and demonstrations only: it is marked
        :attr:`seeded`, like ``RandomSource(seed)``, and gives no privacy.

    Notes
    -----
    The master is never logged, printed or returned, and ``repr``/``str`` do not show it. It must, however,
    reach every executor that derives per-user streams: an instance is picklable, and the pickle (for
    example inside the closure Spark ships to its executors) **contains the master**. Treat the cluster's
    task serialization as seeing the secret, as it sees the data. Use one instance per release (or a
    distinct ``purpose`` per use) so that unrelated draws for the same user never share a stream.
    """

    __slots__ = ("_master", "_seeded")

    def __init__(self, seed: int | None = None) -> None:
        import hashlib

        if seed is None:
            master, from_seed = os.urandom(_MASTER_BYTES), False
        elif isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)):
            master, from_seed = hashlib.sha256(_KEYED_SEED_LABEL + encode_user_key(int(seed))).digest(), True
        else:
            raise TypeError(f"seed must be None or an int, not {type(seed).__name__}")
        self._master: bytes = master
        self._seeded: bool = from_seed

    @classmethod
    def _from_master(cls, master: bytes, seeded: bool) -> KeyedStreams:
        master = bytes(master)
        if len(master) != _MASTER_BYTES:
            raise ValueError(f"the master secret must be {_MASTER_BYTES} bytes")
        obj = cls.__new__(cls)
        obj._master, obj._seeded = master, bool(seeded)
        return obj

    @classmethod
    def from_rng(cls, rng: KeyedStreams | RngLike = None) -> KeyedStreams:
        """Resolve the ``rng=`` argument of a keyed operation.

        A :class:`KeyedStreams` is returned as is (share one between engines to get the same draws).
        ``None`` or an unseeded :class:`RandomSource` gives a fresh master from ``os.urandom(32)``; an int
        is a seed (``KeyedStreams(seed)``); a seeded source or NumPy generator gives a reproducible master of
        256 bits drawn from it. Reproducible masters are marked :attr:`seeded`.
        """
        if isinstance(rng, KeyedStreams):
            return rng
        if rng is None:
            return cls()
        if isinstance(rng, (int, np.integer)) and not isinstance(rng, (bool, np.bool_)):
            return cls(int(rng))
        src = resolve_rng(rng)
        if not src.seeded:
            return cls()
        return cls._from_master(src.words(_MASTER_BYTES // 8).astype("<u8").tobytes(), seeded=True)

    @property
    def seeded(self) -> bool:
        """True when the master is reproducible (an explicit seed): such streams give no privacy."""
        return self._seeded

    def source(self, user_key: object, purpose: str = "") -> KeyedSource:
        """User ``user_key``'s stream for ``purpose`` (a fresh :class:`KeyedSource` at the stream's start).

        Raises
        ------
        DataError
            When the user key's type has no canonical encoding (see :func:`encode_user_key`).
        """
        return KeyedSource(_keyed_stream_key(self._master, str(purpose), user_key), self._seeded)

    def __repr__(self) -> str:
        return "KeyedStreams(seeded)" if self._seeded else "KeyedStreams(os.urandom, 256-bit master)"

    def __reduce__(self):
        return (_keyed_streams_from_state, (self._master, self._seeded))


# Purposes of the keyed per-user streams (one stream per user and purpose; see KeyedStreams.source).
SAMPLE_PURPOSE = "BoundedEMDReduction: sampling with replacement"
RANDOMIZE_PURPOSE = "local-model item randomization"


def keyed_sample_indices(streams: KeyedStreams, user_key: object, size: int, s: int) -> np.ndarray:
    """``s`` indices drawn uniformly with replacement from ``range(size)`` with the user's keyed stream for
    :data:`SAMPLE_PURPOSE`. Every engine calls this function for every user (in memory, per chunk, on the
    Spark executors), so they draw the same rows, and a retried task draws them again."""
    return streams.source(user_key, SAMPLE_PURPOSE).integers(int(size), size=int(s))


def keyed_randomize(streams: KeyedStreams, user_key: object, codes: np.ndarray, randomizer) -> np.ndarray:
    """One user's randomized item codes: ``randomizer`` applied to the user's sorted codes with the user's
    keyed stream for :data:`RANDOMIZE_PURPOSE`, sorted. Every engine calls this function for every user."""
    codes = np.sort(np.asarray(codes, dtype=np.int64))
    return np.sort(randomizer.randomize(codes, streams.source(user_key, RANDOMIZE_PURPOSE)))

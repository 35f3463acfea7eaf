"""Numba kernels of the exact samplers: each draws 64-bit words from a stream and decides every output
with integer arithmetic alone (Canonne, Kamath & Steinke 2020, Algorithms 1-3; the l2 lattice sampler)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_U64 = np.uint64
_BATCH = 1 << 16
_MAX_BATCH_WORDS = 1 << 22
_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)

# --------------------------------------------------------------------------------------------
# numba kernels over a word stream.  st[0] = position, st[1] = "exhausted" flag.
#
# The per-item helpers are inlined into the batch kernels (``inline="always"``, at numba's IR level): a call
# that passes arrays costs reference-count updates, and a sample makes about 20 such calls. Inlining changes
# no output (same words, same decisions) and made the discrete Laplace kernel about 3.7x faster (issue 17).
#
# Batch kernels have the signature ``kernel(words, start, stop, out, *params) -> (i, pos)``: they fill
# ``out[start:stop]`` and return the first unfinished index ``i`` (``stop`` when all are done) and the
# position ``pos`` of the first word that item ``i`` read. They release the GIL (``nogil``): the OS CSPRNG's
# large fills run one slice per core (:meth:`RandomSource._fill`). The driver (:meth:`RandomSource._fill`) then
# calls the kernel again on ``words[pos:]`` followed by fresh words: item ``i`` re-reads exactly the words
# it had read and continues past them, so the result is the algorithm run on one unbounded stream.
# --------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _next(words, st):
    i = st[0]
    if i >= words.size:
        st[1] = 1
        return _U64(0)
    st[0] = i + 1
    return words[i]


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
def _bern_ratio(words, st, num, den):
    """Exact Bernoulli(num / den) for 0 <= num <= den."""
    return _below(words, st, den) < num


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
def _dlap(words, st, t):
    """Exact discrete Laplace: P(x) proportional to exp(-|x|/t), integer t >= 1 (CKS Algorithm 2, s=1)."""
    while True:
        if st[1] != 0:
            return np.int64(0)
        u, v = _geometric_call(words, st, t)
        x = u + t * v
        b = _next(words, st) & _U64(1)
        if st[1] != 0:
            return np.int64(0)
        if b == 1 and x == 0:
            continue
        if b == 1:
            return -x
        return x


@njit(cache=True, inline="always")
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
        if _bern_exp_call(words, st, d * d, den):
            return y


@njit(cache=True, inline="always")
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


# The l2 sampler's attempt, the discrete Gaussians and their batches call their heavy helpers as compiled
# functions rather than inlining them at numba's IR level: inlined, the l2 kernel alone took about 40 s to
# compile (the discrete Gaussian's and the Bernoulli factories' loops copied over a dozen times), the largest
# part of a first run's compile time; now about 17 s for all three. A sample costs about what it did (these
# helpers do many draws per call). The calls decide with the same words as the inlined code: the outputs
# are identical (issue 34). The discrete Laplace (and through it the discrete Gaussian of small variance) calls
# ``_geometric_call`` the same way: its batch compiled in about 4.4 s inlined, 1.6 s so, at the same speed
# (2e6 draws in 0.31-0.45 s either way, the same values).
_geometric_call = njit(cache=True)(_geometric.py_func)
_bern_exp_call = njit(cache=True)(_bern_exp.py_func)
_dgauss_sq_call = njit(cache=True)(_dgauss_sq.py_func)


@njit(cache=True, nogil=True)
def _dlap_batch(words, start, stop, out, t):
    st = np.zeros(2, np.int64)
    for i in range(start, stop):
        pos = st[0]
        out[i] = _dlap(words, st, t)
        if st[1] != 0:
            return i, pos
    return stop, st[0]


@njit(cache=True, nogil=True)
def _polya_batch(words, start, stop, out, a, d, tau, K):
    """Exact ``Polya(a/d, exp(-K/tau))`` (negative binomial of shape ``a/d``, ``0 < a <= d``): ``P(x) ∝
    Gamma(x + a/d) / x! exp(-x K / tau)``. ``G = floor(X / K)`` with ``X = U + tau V`` exactly geometric
    (``P(X) ∝ exp(-X / tau)``, CKS Algorithm 2's magnitude step) is geometric of ratio ``exp(-K / tau)``, i.e.
    ``Polya(1, exp(-K/tau))``; its ``G`` balls then go one by one through a Polya urn holding weights
    ``(a, d - a)`` that grows by ``d`` per ball (ball ``k`` joins the first colour with probability
    ``(a + d x) / (d (k + 1))``, ``x`` the balls it holds, an exact rational Bernoulli). The first colour's
    count is Dirichlet-multinomial, and a ``Polya(1)`` total split that way gives independent ``Polya(a/d)``
    and ``Polya(1 - a/d)`` parts: the output is exactly ``Polya(a/d, exp(-K/tau))``. Cost ``O(1 + G)``."""
    st = np.zeros(2, np.int64)
    for i in range(start, stop):
        pos = st[0]
        u, v = _geometric_call(words, st, tau)
        if st[1] != 0:
            return i, pos
        g = (u + tau * v) // K
        x = np.int64(0)
        if a < d:
            for k in range(g):
                if _below(words, st, d * (k + 1)) < a + d * x:
                    x += 1
                if st[1] != 0:
                    return i, pos
        else:
            x = g
        out[i] = x
    return stop, st[0]


@njit(cache=True, nogil=True)
def _dgauss_batch(words, start, stop, out, S, t, ymax):
    st = np.zeros(2, np.int64)
    for i in range(start, stop):
        pos = st[0]
        out[i] = _dgauss(words, st, S, t, ymax)
        if st[1] != 0:
            return i, pos
    return stop, st[0]


@njit(cache=True, nogil=True)
def _dgauss_sq_batch(words, start, stop, out, w):
    st = np.zeros(2, np.int64)
    for i in range(start, stop):
        pos = st[0]
        out[i] = _dgauss_sq_call(words, st, w)
        if st[1] != 0:
            return i, pos
    return stop, st[0]


@njit(cache=True, nogil=True)
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


@njit(cache=True, inline="always")
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
        u, v = _geometric_call(words, st, tau)
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
    if not _bern_exp_call(words, st, R * R - Q, 2 * w * w):
        return 0
    sq = _isqrt(Q)
    rem = Q
    for i in range(d):
        x = _dgauss_sq_call(words, st, w)
        if st[1] != 0:
            return 0
        if abs(x) > sq:
            return 0
        x2 = x * x
        if x2 > rem:
            return 0
        rem -= x2
        z[i] = x
    if _bern_exp_call(words, st, rem, 2 * w * w):
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

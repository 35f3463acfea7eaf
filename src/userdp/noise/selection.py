"""Exact selection: the exponential mechanism (inverse CDF with interval arithmetic), permute-and-flip
(exact ``Bernoulli(exp(-gamma))``) and sampling from cumulative tables."""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from fractions import Fraction

import numpy as np

from ..errors import ParameterError
from . import trace as _trace
from .kernels import _searchsorted_rows
from .mechanisms import _check_eps, _check_sens
from .sources import RandomSource, RngLike, resolve_rng

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


def _multiplicities(multiplicities, m: int) -> list[int]:
    if multiplicities is None:
        return [1] * m
    k = np.asarray(multiplicities).reshape(-1)
    if k.size != m or k.dtype.kind not in "iu" or np.any(k < 1):
        raise ParameterError("multiplicities must be positive integers, one per score")
    return [int(x) for x in k]


def _exp_interval(gamma: Fraction, ctx_lo: Context, ctx_hi: Context) -> tuple[Decimal, Decimal]:
    """Rigorous bounds ``lo <= exp(-gamma) <= hi`` in decimal arithmetic (``Decimal.exp`` is correctly
    rounded, so one unit in the last place on each side covers its error)."""
    x_lo = ctx_lo.divide(Decimal(gamma.numerator), Decimal(gamma.denominator))
    x_hi = ctx_hi.divide(Decimal(gamma.numerator), Decimal(gamma.denominator))
    # copy_negate is exact; unary minus would round to the *thread's* decimal context (28 digits by default,
    # or whatever the host application set), and the interval could then miss exp(-gamma)
    lo = ctx_lo.next_minus(ctx_lo.exp(x_hi.copy_negate()))
    hi = ctx_hi.next_plus(ctx_hi.exp(x_lo.copy_negate()))
    return max(lo, Decimal(0)), hi


def _context(digits: int, rounding: str) -> Context:
    return Context(prec=digits, rounding=rounding, Emin=-(10**17), Emax=10**17)


def exponential_mechanism(
    scores,
    sensitivity: float,
    epsilon: float,
    rng: RngLike = None,
    monotone: bool = False,
    multiplicities=None,
) -> int:
    """Exact exponential mechanism: index ``i`` with probability ``∝ exp(eps s_i / (2 Delta))``.

    ``multiplicities`` (positive integers, one per score) stand for that many candidates sharing the score:
    index ``i`` is then drawn with probability ``∝ m_i exp(eps s_i / (2 Delta))``, exactly (the caller picks
    one of the ``m_i`` tied candidates uniformly). The shifted inverse mechanism uses it for runs of grid
    points with the same loss.

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
    mult = _multiplicities(multiplicities, len(fr))
    log = _trace.active()
    if log is None:
        return _exponential_draw(fr, ratio, monotone, mult, src)
    forced = log.forced()  # the exact auditor's replay of a neighbour's choice (userdp.noise.trace)
    if forced is not None and not 0 <= forced < len(fr):
        raise ValueError(f"replayed choice {forced} is not one of {len(fr)} candidates")
    i = _exponential_draw(fr, ratio, monotone, mult, src) if forced is None else forced
    _trace.note("exponential", i, scores=np.asarray(scores, dtype=np.float64).reshape(-1).copy(),
                sensitivity=float(sensitivity), epsilon=float(epsilon), monotone=bool(monotone),
                multiplicities=np.asarray(mult, dtype=np.int64))  # fmt: skip
    return i


def _exponential_draw(fr: list[Fraction], ratio: Fraction, monotone: bool, mult: list[int], src: RandomSource) -> int:
    """:func:`exponential_mechanism`'s draw from its checked inputs."""
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
        for gm, k in zip(gammas, mult, strict=True):
            a, b = _exp_interval(gm, lo_ctx, hi_ctx)
            if k != 1:  # k exp(-gamma), rounded outwards
                a, b = lo_ctx.multiply(a, Decimal(k)), hi_ctx.multiply(b, Decimal(k))
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


def permute_and_flip_probabilities(scores, sensitivity: float, epsilon: float, monotone: bool = False) -> np.ndarray:
    """The law of :func:`permute_and_flip` (floats): ``P(i) = p_i int_0^1 prod_{j != i} (1 - x p_j) dx`` with
    ``p_j = exp(eps (s_j - s_max) / (2 Delta))`` (``/ Delta`` if monotone). A uniformly random order is the
    order of independent uniform arrival times: candidate ``i`` arriving at time ``x`` is reached when each
    ``j`` that arrived earlier (probability ``x`` each, independently) was rejected. The integrand is a
    polynomial of degree ``m - 1``, integrated exactly (up to rounding) by Gauss-Legendre quadrature at
    ``ceil(m / 2) + 1`` nodes."""
    fr, ratio = _selection_inputs(scores, sensitivity, epsilon)
    c = float(ratio if monotone else ratio / 2)
    s = np.array([float(x) for x in fr])
    pj = np.exp(c * (s - s.max()))
    m = pj.size
    nodes, weights = np.polynomial.legendre.leggauss(m // 2 + 2)
    x = (nodes + 1) / 2  # on [0, 1]
    w = weights / 2
    # log of prod_j (1 - x p_j) over all j, then divide out j = i (1 - x p_i > 0 except x = 1, p_i = 1)
    one_minus = 1 - np.outer(x, pj)  # (nodes, m)
    with np.errstate(divide="ignore"):
        log_all = np.log(one_minus).sum(axis=1, keepdims=True)
        log_terms = log_all - np.log(one_minus)
    probs = pj * (w[:, None] * np.exp(log_terms)).sum(axis=0)
    return probs / probs.sum()


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

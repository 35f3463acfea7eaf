"""Frequency estimation (Imola et al., section 6): FreqEstLocal (Algorithm 4) under d_EM-DP with GKRR on the
clustered metric (section 6.2) or the exponential randomizer on any finite metric (Theorem 6.5), its
central/shuffle version (Corollary 6.8), and the user-level DP baselines:
Hadamard response in the local model (Lemma 6.4) and the Laplace mechanism in the central model
(Lemma 6.7).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from ..data import FiniteDomain, UserDataset
from ..errors import DataError, ParameterError
from ..metrics.emd import emd, emd_norm
from ..metrics.spaces import ClusteredMetric, FiniteSpace
from ..noise import RngLike, add_laplace, calibrate_laplace, resolve_rng
from ..privacy.accounting import REQUEST_RTOL, calibrate
from ..privacy.guarantees import ApproxDP, Model, Neighbours, PureDP
from ..privacy.params import check_delta
from ..privacy.result import ErrorStatement, Release
from .itemwise import priv_emd_itemwise
from .randomizers import GKRR, ExponentialRandomizer, check_exponential_metric

__all__ = [
    "project_simplex",
    "freq_est_gkrr",
    "freq_est_local",
    "frequency_randomizer",
    "right_inverse_estimate",
    "unbiased_estimate",
    "hadamard_weights",
    "hadamard_transition_matrix",
    "hadamard_response",
    "freq_est_hadamard",
    "freq_laplace_central",
    "user_histogram",
    "laplace_histogram",
    "composition_epsilon0",
    "rr_composition_delta",
    "demd_error",
    "gkrr_interval_halfwidth",
    "theorem_6_5_bound",
]


def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection onto the probability simplex (Duchi, Shalev-Shwartz, Singer & Chandra 2008)."""
    v = np.asarray(v, dtype=np.float64)
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    idx = np.arange(1, v.size + 1)
    rho = np.nonzero(u - css / idx > 0)[0][-1]
    theta = css[rho] / (rho + 1)
    return np.maximum(v - theta, 0.0)


def demd_error(estimate: np.ndarray, truth: np.ndarray, space: FiniteSpace) -> float:
    """``d_EM`` between an estimate and the true histogram on a finite metric (closed form on the clustered
    metric, exact transport otherwise); a signed
    estimate (the raw unbiased one) is compared with the EMD norm of the difference."""
    if np.any(estimate < 0):
        return emd_norm(estimate - truth, space)
    return emd(estimate, truth, space)


def right_inverse_estimate(A: np.ndarray, v: np.ndarray, rcond: float = 1e-10) -> tuple[np.ndarray, dict]:
    """``H`` with ``H A = v`` for a row-stochastic transition matrix ``A[x, y] = P[A(x) = y]`` (Algorithm 4's
    ``v B`` with ``B`` a right inverse of ``A``).

    * **exact** when ``A`` is well conditioned (``cond(A) <= 1 / rcond``): the square system solved by LU
      with partial pivoting, ``B = A^{-1}``, so ``E[H]`` is the true histogram (unbiased, up to float
      rounding: the residual ``||H A - v||`` is checked);
    * **stable** otherwise: the minimum-norm least-squares solution with the singular values below
      ``rcond * s_max`` dropped (truncated SVD). It is biased (the dropped directions are set to 0) but its
      variance stays bounded where ``A^{-1}`` would multiply the noise by ``cond(A)``.

    Returns ``(H, info)`` with ``info = {"inverse": "exact" | "truncated SVD", "condition": cond(A),
    "rank": r}``. Post-processing: the privacy of ``v`` is unchanged.
    """
    A = np.asarray(A, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    k = A.shape[0]
    if A.ndim != 2 or A.shape != (k, k) or v.shape != (k,):
        raise DataError("a square transition matrix and a histogram of its size are needed")
    u, sv, vt = np.linalg.svd(A)
    cond = float(sv[0] / sv[-1]) if sv[-1] > 0 else math.inf
    if cond <= 1.0 / rcond:
        from scipy.linalg import lu_factor, lu_solve

        H = lu_solve(lu_factor(A.T), v)  # H A = v  <=>  A^T H^T = v^T
        if np.linalg.norm(H @ A - v, 1) > 1e-6 * max(1.0, np.abs(v).sum()):  # pragma: no cover - cond checked
            raise ParameterError("the transition matrix could not be inverted accurately")
        return H, {"inverse": "exact", "condition": cond, "rank": k}
    keep = sv >= rcond * sv[0]
    r = int(keep.sum())
    # A = U S V^T, so H A = v  =>  H = v V S^+ U^T restricted to the kept singular directions
    H = ((v @ vt[:r].T) / sv[:r]) @ u[:, :r].T
    return H, {"inverse": "truncated SVD", "condition": cond, "rank": r}


def unbiased_estimate(randomizer: Any, v: np.ndarray) -> tuple[np.ndarray, dict]:
    """Algorithm 4's ``H = v B`` for the released histogram ``v``: GKRR's closed-form inverse, else
    :func:`right_inverse_estimate` of the randomizer's transition matrix (exact when well conditioned, a
    truncated SVD otherwise). Returns ``(H, info)``, the info naming the randomizer and the inverse used."""
    if isinstance(randomizer, GKRR):
        return randomizer.unbiased_estimate(v), {"randomizer": "GKRR", "inverse": "exact (closed form)"}
    H, info = right_inverse_estimate(randomizer.transition_matrix(), v)
    return H, {"randomizer": type(randomizer).__name__, **info}


def theorem_6_5_bound(transition: np.ndarray, space: ClusteredMetric, items: int, rcond: float = 1e-10) -> float | None:
    """Theorem 6.5, Eq. (8) (Imola et al.): the expected ``d_EM`` error of Algorithm 4's estimator ``H = v B``
    for ANY item randomizer with row-stochastic transition matrix ``A`` (``A[x, y] = P[A(x) = y]``) on the
    clustered metric ``B x C`` (``s`` clusters of ``t`` items, distance ``r`` inside a cluster), over ``items``
    randomized items in all (``m n``; the central model's one global user holds them all, Corollary 6.8)::

        r sqrt(s t (||B^T||_{1->2}^2 - 1) / (m n)) + sqrt(s (||P^T B^T||_{1->2}^2 - 1) / (m n))

    with ``B = A^{-1}`` (the right inverse the release uses when ``A`` is well conditioned) and ``P`` the
    ``k x s`` matrix summing each cluster's items. ``||B^T||_{1->2}`` is the largest l2 norm of a row of
    ``B`` (the estimate one report contributes), ``||P^T B^T||_{1->2}`` the same for the rows' cluster sums.
    For GKRR the closed form Eq. (9) (Theorem 6.6) bounds these norms; this computes them, so it is at most
    Eq. (9). It bounds the unprojected estimate; the release's projection onto the simplex is
    post-processing that the theorem does not cover. None when ``cond(A) > 1 / rcond`` (the release then
    uses a truncated inverse, which is biased, and the theorem does not apply).
    """
    A = np.asarray(transition, dtype=np.float64)
    s, t, r = space.n_clusters, space.cluster_size, float(space.r)
    k = s * t
    if A.shape != (k, k) or int(items) < 1:
        raise ParameterError(f"Eq. (8) needs the {k} x {k} transition matrix of the clustered metric and items >= 1")
    sv = np.linalg.svd(A, compute_uv=False)
    if not sv[-1] > 0 or sv[0] / sv[-1] > 1.0 / rcond:
        return None
    B = np.linalg.inv(A)
    b2 = float(np.max(np.sum(B * B, axis=1)))  # ||B^T||_{1->2}^2
    BP = B.reshape(k, s, t).sum(axis=2)  # B P: each row's mass per cluster (codes b t + c)
    bp2 = float(np.max(np.sum(BP * BP, axis=1)))  # ||P^T B^T||_{1->2}^2
    mn = float(items)
    return r * math.sqrt(s * t * max(b2 - 1.0, 0.0) / mn) + math.sqrt(s * max(bp2 - 1.0, 0.0) / mn)


def check_randomizer(space: Any, randomizer: str = "auto") -> bool:
    """Refuse a randomizer that does not fit the metric (public parameters, before any data); True for GKRR."""
    if randomizer not in ("auto", "gkrr", "exponential"):
        raise ParameterError(f"randomizer must be auto, gkrr or exponential, got {randomizer!r}")
    if not isinstance(space, FiniteSpace):
        raise ParameterError("frequency estimation needs a finite metric space")
    use_gkrr = randomizer == "gkrr" or (randomizer == "auto" and isinstance(space, ClusteredMetric))
    if use_gkrr and not isinstance(space, ClusteredMetric):
        raise ParameterError("GKRR needs a ClusteredMetric; use randomizer='exponential' on other finite metrics")
    if not use_gkrr:
        if space.size > 2000:
            raise ParameterError(f"the exponential randomizer stores a k x k table; k = {space.size} > 2000")
        check_exponential_metric(space.full_matrix())
    return use_gkrr


def frequency_randomizer(
    space: FiniteSpace, alpha: float, delta_prime: float, m: int, n: int | None, randomizer: str = "auto",
    numerical: bool = False,
):  # fmt: skip
    """The item randomizer of :func:`freq_est_local` and its calibration: ``alpha_0`` is the accountant's best
    for ``(alpha, delta')`` with ``m`` items per user (Theorem 4.4 holds for any ``(alpha_0, 0)``
    ``d_X``-DP randomizer; central/shuffle with ``n`` users), capped at 40. ``randomizer``: ``"gkrr"``
    (clustered metrics only), ``"exponential"`` (:class:`ExponentialRandomizer`, any finite metric) or
    ``"auto"`` (GKRR on a clustered metric, else exponential)."""
    use_gkrr = check_randomizer(space, randomizer)
    cal = calibrate(alpha, delta_prime, m, n=n, numerical=numerical)
    a0 = min(cal.alpha0, 40.0)
    return (GKRR(space, a0) if use_gkrr else ExponentialRandomizer(space, a0)), cal


def freq_est_local(
    ds: UserDataset,
    space: FiniteSpace,
    alpha: float,
    delta_prime: float,
    model: Model | str = Model.LOCAL,
    randomizer: str = "auto",
    numerical: bool = False,
    rng: RngLike = None,
    allow_weaker: bool = False,
) -> Release:
    """FreqEstLocal (Algorithm 4) under ``(alpha, delta')``-bounded d_EM-DP on any finite metric.

    Every item is randomized by an ``alpha_0``-``d_X``-DP randomizer (:func:`frequency_randomizer`: GKRR on
    the clustered metric, as in section 6.2, or the exponential randomizer ``P(y | x) ∝ exp(-alpha_0 d(x, y)
    / 2)`` on any finite metric, which the paper's Theorem 6.5 allows: "any mechanism A satisfying
    (alpha_0, 0) d_X-DP"); ``alpha_0`` is the accountant's best calibration (Theorem 4.4, Eq. (6)/(7) or
    composition; the numerical bound too if ``numerical``); ``delta_prime = 0`` asks for a pure guarantee
    (composition). Local: every user releases their randomized multiset; central (Corollary 6.8): one
    shuffle of all ``m n`` items. The estimate is ``H = v B`` with ``B`` a right inverse of the transition
    matrix -- GKRR's closed form, else :func:`right_inverse_estimate` (exact when well conditioned, a
    truncated SVD otherwise; ``params["inverse"]`` says which) -- projected onto the simplex
    (post-processing); ``extras["unbiased"]`` is ``H`` itself.

    The release's realized guarantee is compared with the request: an alpha above
    ``alpha * (1 + REQUEST_RTOL)`` or a delta' above ``delta_prime`` is refused with a
    :class:`~userdp.errors.ParameterError` -- unless ``allow_weaker``, and then the weaker guarantee is the
    one reported (``params["weaker_than_requested"]``).
    """
    ds.require_public_domain()
    if ds.domain_size != space.size:
        raise DataError(f"the dataset's domain has {ds.domain_size} items but the metric has {space.size}")
    mdl = Model(model)
    m = ds.require_equal_sizes()
    n = ds.n_users
    rz, cal = frequency_randomizer(space, alpha, delta_prime, m, n if mdl is Model.CENTRAL else None, randomizer,
                                   numerical)  # fmt: skip
    target = cal.delta_prime_target
    rel = priv_emd_itemwise(ds, rz, mdl, target, cal.route == "numerical", rng, inner_delta=cal.best.delta or None)
    g = rel.guarantee
    weaker = g.alpha > alpha * (1 + REQUEST_RTOL) or g.delta > target
    if weaker and not allow_weaker:
        raise ParameterError(
            f"the release would be ({g.alpha:.6g}, {g.delta:.3g})-d_EM-DP, weaker than the requested alpha = "
            f"{alpha:.6g}, delta' = {target:.3g}: lower alpha (or raise delta_prime), or pass allow_weaker=True "
            "to release the weaker guarantee"
        )
    H, info = unbiased_estimate(rz, rel.extras["histogram"])
    est = project_simplex(H)
    params = dict(rel.params)
    params.update(
        {"alpha": float(alpha), "delta_prime": target, "route": rel.params["route"], "weaker_than_requested": weaker,
         **info, "randomizer": type(rz).__name__}
    )  # fmt: skip
    name = "GKRR" if isinstance(rz, GKRR) else "exponential randomizer"
    bound = "Theorem 6.6 / Corollary 6.8" if isinstance(rz, GKRR) else "Theorem 6.5 (with B = the inverse used)"
    return Release(
        est,
        g,
        f"FreqEst{'Local' if mdl is Model.LOCAL else ' (central, Corollary 6.8)'} + {name} (Algorithm 4)",
        params,
        ErrorStatement(f"unbiased before projection (exact inverse); see {bound} for the d_EM error bound"),
        {"unbiased": H, "alpha0": rz.realized_alpha0, "calibration": cal},
    )


def freq_est_gkrr(
    ds: UserDataset,
    space: ClusteredMetric,
    alpha: float,
    delta_prime: float,
    model: Model | str = Model.LOCAL,
    numerical: bool = False,
    rng: RngLike = None,
    allow_weaker: bool = False,
) -> Release:
    """FreqEstLocal (Algorithm 4) with ``A = GKRR_{alpha_0}`` on the clustered metric: :func:`freq_est_local`
    with ``randomizer="gkrr"`` (the estimate ``H = v A^{-1}`` in GKRR's closed form)."""
    if not isinstance(space, ClusteredMetric):
        raise ParameterError("GKRR needs a ClusteredMetric; use freq_est_local on other finite metrics")
    return freq_est_local(ds, space, alpha, delta_prime, model, "gkrr", numerical, rng, allow_weaker)


# --------------------------------------------------------------------------------------------
# Baselines
# --------------------------------------------------------------------------------------------


def gkrr_interval_halfwidth(gk: GKRR, n_items: int, beta: float = 0.05, sampled: bool = False) -> float:
    """Half-width ``w`` of simultaneous confidence intervals ``H_j ± w`` for every item ``j`` of the unbiased
    estimate ``H = v A^{-1}`` of Algorithm 4, from GKRR's known noise law alone (no data-dependent quantity).

    ``H_j`` is the mean of ``N = n_items`` independent terms ``T_i = (A^{-1})[y_i, j]``, where ``y_i`` is the
    randomized ``i``-th item (``A`` is symmetric; ``(A^{-1})[y, j]`` takes three values, for ``y = j``, ``y``
    in ``j``'s cluster, ``y`` elsewhere). Given the true item ``x_i``, ``E[T_i] = 1[x_i = j]``; the variance of
    ``T_i`` is at most ``V = max_x Var_{y ~ A[x]}(T)``, and ``|T_i - E T_i| <= M``, the largest distance
    between a value of ``T`` and ``{0, 1}``. Bernstein's inequality with a union bound over the ``k`` items
    gives ``P(max_j |H_j - h_j| > w) <= beta`` for

    ``w = (M L / 3 + sqrt((M L / 3)^2 + 2 N V L)) / N``, ``L = ln(2 k / beta)``,

    where ``h`` is the histogram of the randomized items' true values. With ``sampled=True``
    (BoundedEMDReduction: every user's items are drawn with replacement, independently), ``x_i`` is random
    too, ``E[T_i]`` is the user's share of ``j``, ``h`` is the average over users of their shares, and the
    variance gains at most ``1/4`` (the variance of ``1[x_i = j]``).

    The interval is for ``H`` before the projection onto the simplex; the projection moves every coordinate
    by the same shift (then clips at 0), so it is reported beside ``H``, not inside this interval.
    """
    if n_items < 1:
        raise ParameterError("the interval needs at least one randomized item")
    if not 0 < beta < 1:
        raise ParameterError(f"beta must lie in (0, 1), got {beta}")
    space = gk.space
    k, t = space.size, space.cluster_size
    row = gk.unbiased_estimate(np.eye(k)[0])  # (A^{-1})[0, :]: the three values
    c_same, c_in, c_out = row[0], (row[1] if t > 1 else row[0]), (row[t] if k > t else row[0])
    ps, pi, po = gk.probabilities()
    # the law of the relation of y to j, for each relation of the true x to j (same item, same cluster, other)
    laws = [(ps, (t - 1) * pi, (k - t) * po)]
    if t > 1:
        laws.append((pi, ps + (t - 2) * pi, (k - t) * po))
    if k > t:
        laws.append((po, (t - 1) * po, 1.0 - t * po))
    vals = np.array([c_same, c_in, c_out])
    var = max(float(np.dot(q, vals**2) - np.dot(q, vals) ** 2) for q in map(np.asarray, laws))
    if sampled:
        var += 0.25
    m_bound = float(max(np.abs(vals).max(), np.abs(vals - 1.0).max()))
    L = math.log(2 * k / beta)
    a = m_bound * L / 3
    return float((a + math.sqrt(a * a + 2 * n_items * var * L)) / n_items)


def rr_composition_delta(epsilon0: float, m: int, epsilon: float) -> float:
    """Exact delta of the ``m``-fold composition of ``epsilon0``-DP mechanisms at level ``epsilon``.

    Randomized response is the worst case (Kairouz, Oh & Viswanath 2015, optimal composition): the privacy
    loss is ``epsilon0 (m - 2J)`` with ``J ~ Bin(m, 1/(1 + e^epsilon0))``.
    """
    p = 1.0 / (1.0 + math.exp(epsilon0))
    j_max = math.ceil((m - epsilon / epsilon0) / 2)  # loss > epsilon only for j < (m - epsilon/epsilon0)/2
    if j_max <= 0:
        return 0.0
    # terms below j_lo (40 standard deviations under the mean) are each at most pmf(j_lo) (the pmf is
    # unimodal): bound their sum by j_lo * pmf(j_lo) and add it, so delta is never underestimated
    j_lo = max(0, min(j_max, math.floor(m * p - 40 * math.sqrt(m * p * (1 - p) + 1))))
    j = np.arange(j_lo, j_max + 1)
    from scipy.stats import binom  # imported on use (0.4 s)

    logP = binom.logpmf(j, m, p)
    loss = epsilon0 * (m - 2 * j)
    terms = np.exp(logP) * -np.expm1(np.minimum(epsilon - loss, 0.0))
    tail = j_lo * math.exp(float(logP[0])) if j_lo > 0 else 0.0
    return float(terms[loss > epsilon].sum()) + tail


def composition_epsilon0(epsilon: float, delta: float, m: int) -> float:
    """Largest per-item ``epsilon0`` whose optimal ``m``-fold composition is ``(epsilon, delta)``-DP (at least
    ``epsilon / m``, the basic composition value)."""
    delta = check_delta(delta)
    lo, hi = epsilon / m, epsilon
    if rr_composition_delta(hi, m, epsilon) <= delta:
        return hi
    while hi - lo > 1e-12 * lo:
        mid = 0.5 * (lo + hi)
        if rr_composition_delta(mid, m, epsilon) <= delta:
            lo = mid
        else:
            hi = mid
    return lo


@njit(cache=True)
def _hr_kernel(words, rows, K, W1, W0, out):
    pos = 0
    T = W1 + W0
    tmask = np.uint64(1)
    while tmask < np.uint64(T):
        tmask <<= np.uint64(1)
    tmask -= np.uint64(1)
    kmask = np.uint64(K - 1)
    for i in range(rows.size):
        while True:
            if pos + 1 >= words.size:
                return -1
            u = np.int64(words[pos] & tmask)
            pos += 1
            if u < T:
                break
        in_c = u < W1
        y = np.int64(words[pos] & kmask)
        pos += 1
        row = rows[i]
        v = y & row
        par = 0
        while v:
            par ^= 1
            v &= v - 1
        if (par == 0) != in_c:
            y ^= row & (-row)
        out[i] = y
    return pos


def hadamard_weights(k: int, epsilon0: float) -> tuple[int, int, int]:
    """The table of Hadamard response on items ``0..k-1`` at item level ``epsilon0``: ``(K, W1, W0)``.

    ``K = 2^ceil(log2(k + 1))``; item ``x`` uses Hadamard row ``x + 1`` and its set
    ``C_x = {y : popcount((x+1) & y) even}`` of size ``K/2``; outputs in ``C_x`` have weight ``W1``, the others
    ``W0`` (integers, ``W1 / W0 <= e^epsilon0``): ``P(y | x) = W / ((W1 + W0) K/2)``.
    """
    K = 1 << max(1, math.ceil(math.log2(k + 1)))
    W0 = 1 << 40
    W1 = int(math.floor(math.exp(epsilon0) * W0 * (1 - 1e-12)))
    return K, W1, W0


def hadamard_transition_matrix(k: int, K: int, W1: int, W0: int) -> np.ndarray:
    """The ``k x K`` matrix ``P[x, y]`` of Hadamard response with the weights of :func:`hadamard_weights`
    (for exact audits and small ``k``)."""
    x = np.arange(k)[:, None] + 1
    y = np.arange(K)[None, :]
    parity = np.vectorize(lambda v: bin(int(v)).count("1") % 2)(x & y)
    return np.where(parity == 0, W1, W0) / ((W1 + W0) * (K // 2))


def hadamard_response(
    codes: np.ndarray, k: int, epsilon0: float, rng: RngLike = None
) -> tuple[np.ndarray, int, int, int]:
    """Hadamard response (Acharya, Sun & Zhang 2019) on items ``0..k-1`` at item level ``epsilon0``-LDP.

    The table is :func:`hadamard_weights`: the output is in ``C_x`` with probability ``W1 / (W1 + W0)``,
    uniform inside. Returns ``(outputs, K, W1, W0)``.
    """
    K, W1, W0 = hadamard_weights(k, epsilon0)
    rows = np.ascontiguousarray(np.asarray(codes, dtype=np.int64) + 1)
    src = resolve_rng(rng)
    out = np.empty_like(rows)
    budget = 3 * rows.size + 64
    while _hr_kernel(src.words(budget), rows, K, W1, W0, out) < 0:
        budget *= 2
    return out, K, W1, W0


def _fwht(a: np.ndarray) -> np.ndarray:
    a = a.astype(np.float64).copy()
    h = 1
    n = a.size
    while h < n:
        a = a.reshape(-1, 2 * h)
        x, y = a[:, :h].copy(), a[:, h:].copy()
        a[:, :h], a[:, h:] = x + y, x - y
        a = a.reshape(-1)
        h *= 2
    return a


def freq_est_hadamard(ds: UserDataset, epsilon: float, delta: float, rng: RngLike = None) -> Release:
    """User-level ``(epsilon, delta)``-LDP frequency estimation with Hadamard response (Lemma 6.4's baseline).

    Every user randomizes each of their ``m`` items with ``epsilon0`` from the *optimal* composition theorem
    (:func:`composition_epsilon0`; tighter than the ``epsilon / sqrt(m ln(m/delta))`` of the paper's remark),
    and the aggregator estimates ``p(x) = (q_x - 1/2) 2 (W1 + W0) / (W1 - W0)`` from the fraction ``q_x`` of
    outputs in ``C_x``, all ``x`` at once by a fast Walsh-Hadamard transform. Projected onto the simplex.
    """
    ds.require_public_domain()
    m = ds.require_equal_sizes()
    k = ds.domain_size
    e0 = composition_epsilon0(epsilon, delta, m)
    y, K, W1, W0 = hadamard_response(ds.items, k, e0, rng)
    counts = np.bincount(y, minlength=K)
    N = y.size
    q = (N + _fwht(counts)[1 : k + 1]) / (2 * N)
    H = (q - 0.5) * 2 * (W1 + W0) / (W1 - W0)
    realized = math.log(W1 / W0)
    g = ApproxDP(epsilon, delta, Neighbours.ANY_TWO_INPUTS) if delta > 0 else PureDP(epsilon, Neighbours.ANY_TWO_INPUTS)
    params = {
        "epsilon": epsilon,
        "delta": delta,
        "epsilon0": realized,
        "m": m,
        "n": ds.n_users,
        "K": K,
        "W1": W1,
        "W0": W0,
    }
    name = "Hadamard response, user-level LDP (Lemma 6.4 baseline)"
    return Release(project_simplex(H), g, name, params, None, {"unbiased": H})


def freq_laplace_central(ds: UserDataset, epsilon: float, rng: RngLike = None) -> Release:
    """Central user-level Laplace baseline (Lemma 6.7): ``K~_G`` plus Laplace noise, replace-one-user
    neighbours with equal public sizes, so the l1 sensitivity of the normalized histogram is ``2/n``
    (the paper's ``Lap(1/(n eps))`` assumes add/remove). Negatives set to 0, then normalized."""
    ds.require_equal_sizes()
    return user_histogram(ds, epsilon, neighbours=Neighbours.REPLACE_USER, rng=rng)


def clustered_domain(space: ClusteredMetric) -> FiniteDomain:
    """The public domain ``0..k-1`` of a clustered metric."""
    return FiniteDomain(np.arange(space.size))


# --------------------------------------------------------------------------------------------
# The user-level DP histogram (the baseline of Lemma 6.7, and a release of its own)
# --------------------------------------------------------------------------------------------
#
# Each user contributes their normalized histogram ``K~_i`` (mass 1). Under add/remove-one-user neighbours
# the l1 sensitivity of ``sum_i K~_i`` is 1; under replace-one-user it is 2 (one histogram of mass 1 leaves,
# another arrives). A user with no items contributes the zero vector, and a dataset with no users the zero
# sum: adding or removing an empty user changes nothing, so the sensitivities are unchanged and such inputs
# are released like any other (an error would itself reveal that a user, or the dataset, is empty).


def laplace_histogram(
    total: np.ndarray, epsilon: float, neighbours: Neighbours = Neighbours.ADD_REMOVE_USER, rng: RngLike = None
) -> Release:
    """Release ``sum_i K~_i`` (``total``, computed by an engine) with lattice Laplace noise; the value is the
    estimated *average* distribution.

    The noisy sum is post-processed: negatives are set to zero and the result is normalized to sum 1 (an
    all-zero result becomes the uniform distribution). The domain (the length of ``total``) is public.

    Returns
    -------
    Release
        ``value``: the normalized estimate; ``extras["noisy_sum"]``: the raw noisy sum.
    """
    nb = Neighbours(neighbours)
    if nb not in (Neighbours.ADD_REMOVE_USER, Neighbours.REPLACE_USER):
        raise ParameterError("a central histogram protects add/remove or replace-one-user neighbours")
    sens = 1.0 if nb is Neighbours.ADD_REMOVE_USER else 2.0
    total = np.asarray(total, dtype=np.float64)
    k = total.size
    cal = calibrate_laplace(sens, epsilon, dim=k)
    noisy = add_laplace(total, cal, rng)
    est = np.maximum(noisy, 0.0)
    s = est.sum()
    est = est / s if s > 0 else np.full(k, 1.0 / k)
    return Release(
        value=est,
        guarantee=PureDP(epsilon, neighbours=nb),
        mechanism="user-level Laplace histogram",
        params={"epsilon": float(epsilon), "l1_sensitivity": sens, "domain_size": k, "scale": cal.scale},
        error=ErrorStatement(
            f"each cell of the noisy sum has Laplace noise of scale {cal.scale:.4g} (expected l1 error of the sum "
            f"{k * cal.scale:.4g})",
            bound=k * cal.scale,
        ),
        extras={"noisy_sum": noisy},
    )


def user_histogram(
    ds: UserDataset,
    epsilon: float,
    neighbours: Neighbours = Neighbours.ADD_REMOVE_USER,
    rng: RngLike = None,
) -> Release:
    """:func:`laplace_histogram` of an in-memory dataset over its public domain (users with no items contribute
    nothing; on a dataset with no users the release is the noise alone). For a table on any engine, use
    :func:`userdp.releases.histogram`."""
    from ..engines.memory import histogram_sum

    ds.require_public_domain()
    return laplace_histogram(histogram_sum(ds, normalize=True), epsilon, neighbours, rng)

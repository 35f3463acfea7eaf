"""PrivEMDLinear (Imola et al., section 4.1, Algorithm 1, Theorem 4.1, Lemma 4.2) and the user-level
DP baselines for linear queries (section 6.1, Lemmas 6.1 and 6.3).

A linear query is ``q_f(K) = E_{x ~ K~}[f(x)]`` with ``f: X -> R^d``. If ``f`` is ``l``-Lipschitz
(``||f(x) - f(x')|| <= l d(x, x')``), Theorem 4.1 gives ``||q_f(K) - q_f(K')|| <= l d_EM(K~, K~')`` for
datasets of *any* sizes, so adding K-norm noise of scale ``l w`` with ``w = 1/alpha`` is
``(alpha, 0)``-unbounded local d_EM-DP, and on the global dataset of ``n`` users with equal public
sizes, ``w = 1/(alpha n)`` is ``(alpha, 0)``-bounded central d_EM-DP (one user's ``m`` items are a
``1/n`` fraction of ``K_G``, so ``d_EM(K~_G, K~'_G) <= d_EM(K~_i, K~'_i)/n``).

The guarantee is per distance: two datasets at ``d_EM = d`` are ``alpha d``-indistinguishable for *every*
``d``, however small. The paper's continuous noise cannot be sampled exactly; userdp releases on a lattice
with randomized rounding and exact lattice K-norm noise (:func:`userdp.noise.knorm_release`), whose loss is
proportional to the distance (a nearest-point rounding would add a constant to it). The Gaussian variant
rounds to a lattice ``2^54`` times finer than ``sigma`` and accounts for the discrete Gaussian by zCDP, with
``delta(d) <= delta`` checked at every ``d`` (:func:`userdp.noise.calibrate_gaussian_metric`). The
l-infinity K-norm is not offered (no exact lattice sampler keeps its loss proportional).
"""

from __future__ import annotations

import math

import numpy as np

from ..data import UserDataset
from ..engines.base import user_means
from ..errors import DataError, ParameterError
from ..metrics.spaces import FiniteSpace
from ..noise import (
    GaussianCalibration,
    RngLike,
    add_gaussian,
    calibrate_gaussian_metric,
    calibrate_knorm,
    gaussian_noise,
    knorm_release,
    resolve_rng,
)
from ..privacy.guarantees import EMDMetricDP, Model, Neighbours, PureDP
from ..privacy.params import check_delta
from ..privacy.result import ErrorStatement, Release

__all__ = [
    "lipschitz_constant",
    "embedding_lipschitz",
    "priv_emd_linear",
    "linear_baseline",
    "duchi_l2_privatizer",
    "duchi_l2_radius",
    "gaussian_delta_at_distance",
]

_ORD = {"l1": 1, "l2": 2, "linf": np.inf}  # norms for measuring Lipschitz constants
_RELEASE_NORMS = ("l1", "l2")  # norms PrivEMDLinear releases with


def lipschitz_constant(f_values: np.ndarray, space: FiniteSpace, norm: str = "l2", chunk: int = 256) -> float:
    """``max_{x != x'} ||f(x) - f(x')|| / d(x, x')`` over a finite domain (vectorized, chunked: ``k = 10^4``
    items with ``d = 50`` take a few seconds).

    ``f_values`` has one row ``f(x)`` per item code.
    """
    F = np.asarray(f_values, dtype=np.float64)
    if F.ndim == 1:
        F = F[:, None]
    if F.shape[0] != space.size:
        raise DataError(f"need one row of f per item ({space.size}), got {F.shape[0]}")
    if not np.all(np.isfinite(F)):
        raise DataError("f contains NaN or inf")
    ordn = _ORD[norm]
    k = space.size
    best = 0.0
    codes = np.arange(k)
    for s0 in range(0, k, chunk):
        rows = codes[s0 : s0 + chunk]
        D = space.cost_matrix(rows, codes)
        if ordn == 2:
            sq = (F[rows] ** 2).sum(1)[:, None] + (F**2).sum(1)[None, :] - 2 * F[rows] @ F.T
            diff = np.sqrt(np.maximum(sq, 0.0))
        else:
            diff = np.linalg.norm(F[rows][:, None, :] - F[None, :, :], ord=ordn, axis=2)
        mask = D > 0
        if np.any(~mask & (diff > 1e-6 * (1 + np.abs(F).max()))):  # sqrt of float rounding is ~1e-8
            raise DataError("f differs on two items at distance 0: it is not Lipschitz")
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(mask, diff / np.where(mask, D, 1.0), 0.0)
        best = max(best, float(ratio.max()))
    return best


def embedding_lipschitz(F: np.ndarray) -> float:
    """For a linear embedding query ``x -> F phi(x)`` under the l2 metric on embeddings, the Lipschitz
    constant is at most the spectral norm ``||F||_2`` (section 6.1)."""
    return float(np.linalg.norm(np.asarray(F, dtype=np.float64), ord=2))


def gaussian_delta_at_distance(cal: GaussianCalibration, lipschitz: float, alpha: float, d: float) -> float:
    """delta of the Gaussian variant at ``d_EM = d``: the lattice Gaussian's zCDP bound for two inputs at
    distance ``lipschitz d`` (plus the lattice rounding) at privacy level ``alpha d``."""
    return cal.delta_at(lipschitz * d, alpha * d)


def _query_values(ds: UserDataset, f_values: np.ndarray | None, f_points) -> np.ndarray:
    if ds.is_points:
        if f_points is None:
            raise DataError("point datasets need f as a function of the points (f_points=...)")
        v = np.asarray(f_points(ds.items), dtype=np.float64)
    else:
        if f_values is None:
            raise DataError("finite-domain datasets need f_values (one row per item code)")
        F = np.asarray(f_values, dtype=np.float64)
        F = F[:, None] if F.ndim == 1 else F
        if F.shape[0] != ds.domain_size:
            raise DataError(f"need one row of f per item code ({ds.domain_size}), got {F.shape[0]}")
        v = F[ds.items]
    v = v[:, None] if v.ndim == 1 else v
    if not np.all(np.isfinite(v)):
        raise DataError("f(x) contains NaN or inf")
    return v


def priv_emd_linear(
    ds: UserDataset,
    lipschitz: float,
    alpha: float,
    f_values: np.ndarray | None = None,
    f_points=None,
    model: Model | str = Model.LOCAL,
    norm: str = "l2",
    delta: float | None = None,
    rng: RngLike = None,
) -> Release:
    """PrivEMDLinear (Algorithm 1): release ``q_f`` under d_EM-DP.

    Parameters
    ----------
    lipschitz:
        A public upper bound ``l`` on the Lipschitz constant of ``f`` in the chosen norm (see
        :func:`lipschitz_constant`, :func:`embedding_lipschitz`).
    f_values / f_points:
        ``f`` as a table (one row per item code) or as a function of an ``(N, dim)`` point array.
    model:
        ``"local"``: every user releases ``q_f(K~_i) + l g U`` with scale ``1/alpha`` ((alpha, 0)-unbounded
        local d_EM-DP); the value is the average of the users' releases and ``extras["per_user"]`` holds them.
        ``"central"``: ``q_f(K~_G)`` plus noise of scale ``1/(alpha n)`` ((alpha, 0)-bounded central d_EM-DP;
        every user must hold the same number of items).
    norm:
        ``"l2"`` (the lattice l2 K-norm: Gamma(d) radius, uniform direction) or ``"l1"`` (discrete Laplace
        per coordinate); ``l`` must be measured in the same norm. (``"linf"`` is refused: see the module
        docstring.)
    delta:
        If given, the Gaussian variant: ``(alpha d, delta)`` at every ``d_EM = d`` (the realized per-distance
        delta is in ``guarantee.curve``), with the lattice Gaussian calibrated for sensitivity ``l`` (``l/n``
        central) at ``d_EM = 1`` and checked at every smaller distance. Needs ``norm="l2"``.
    """
    ds.require_items()
    if Model(model) is Model.CENTRAL:
        ds.require_equal_sizes()
    _check_linear(lipschitz, alpha, norm, delta)
    per_user = user_means(ds.offsets, _query_values(ds, f_values, f_points))
    return linear_release(per_user, lipschitz, alpha, model, norm, delta, rng)


def _check_linear(lipschitz: float, alpha: float, norm: str, delta: float | None) -> None:
    a = float(alpha)
    if not (math.isfinite(a) and a > 0):
        raise ParameterError(f"alpha must be positive and finite, got {alpha!r}")
    ell = float(lipschitz)
    if not (math.isfinite(ell) and ell > 0):
        raise ParameterError(f"the Lipschitz bound must be positive and finite, got {lipschitz!r}")
    if norm == "linf":
        raise ParameterError(
            "norm 'linf' is not offered: no exact lattice sampler keeps the l-infinity K-norm's loss proportional "
            "to the distance; use norm='l2' (an l-infinity Lipschitz bound l gives l * sqrt(dim) in l2) or 'l1'"
        )
    if norm not in _RELEASE_NORMS:
        raise ParameterError(f"norm must be 'l1' or 'l2', got {norm!r}")
    if delta is not None:
        check_delta(delta, allow_zero=False)  # (delta None, not 0, asks for the pure release)
        if norm != "l2":
            raise ParameterError("the Gaussian variant uses the l2 norm")


def linear_release(
    per_user: np.ndarray,
    lipschitz: float,
    alpha: float,
    model: Model | str = Model.LOCAL,
    norm: str = "l2",
    delta: float | None = None,
    rng: RngLike = None,
) -> Release:
    """The noise step of PrivEMDLinear (Algorithm 1) on the users' query means ``q_f(K~_i)`` (one row per user,
    computed by an engine); parameters as in :func:`priv_emd_linear`. Central: every user holds the same
    public number of items (the caller checks it)."""
    _check_linear(lipschitz, alpha, norm, delta)
    mdl, a, ell = Model(model), float(alpha), float(lipschitz)
    per_user = np.asarray(per_user, dtype=np.float64)
    per_user = per_user[:, None] if per_user.ndim == 1 else per_user
    n, d = per_user.shape
    if n == 0:
        raise DataError("this release needs at least one user (the number of users is public for it)")
    if mdl is Model.CENTRAL:
        sens = ell / n
        target = per_user.mean(axis=0)
    else:
        sens = ell
        target = per_user
    params = {"alpha": a, "lipschitz": ell, "norm": norm, "model": mdl.value, "n": n, "dim": d}
    if delta is None:
        cal = calibrate_knorm(sens, a, norm, d)
        noisy = knorm_release(target, cal, rng)
        guarantee = EMDMetricDP(a, 0.0, mdl, bounded=mdl is Model.CENTRAL, metric="")
        noise_scale = cal.scale
        expected = cal.expected_norm()
        desc = f"K-norm noise ({norm}) of scale {noise_scale:.4g}: E||noise||_{norm[1:]} = {expected:.4g}"
        params["alpha_realized"] = cal.epsilon_realized
    else:
        gcal = calibrate_gaussian_metric(sens, a, delta, dim=d)
        noisy = add_gaussian(target, gcal, rng)

        def curve(dist: float, gcal=gcal, sens=sens, a=a) -> tuple[float, float]:
            return a * dist, min(float(delta), gcal.delta_at(sens * dist, a * dist))

        guarantee = EMDMetricDP(a, float(delta), mdl, bounded=mdl is Model.CENTRAL, metric="", curve=curve)
        noise_scale = gcal.sigma
        expected = gcal.sigma * math.sqrt(d)
        desc = f"Gaussian noise sigma = {gcal.sigma:.4g} per coordinate (E||noise||_2 ~ {expected:.4g})"
        params["delta"] = float(delta)
    params["noise_scale"] = noise_scale
    if mdl is Model.LOCAL:
        value = noisy.mean(axis=0)
        err = ErrorStatement(
            desc + f" per user; the average over {n} users has ~{expected / math.sqrt(n):.4g}",
            bound=expected / math.sqrt(n),
        )
        extras = {"per_user": noisy}
    else:
        value = noisy
        err = ErrorStatement(desc, bound=expected)
        extras = {}
    return Release(value, guarantee, "PrivEMDLinear (Algorithm 1)", params, err, extras)


def _side_numerator(epsilon: float) -> int:
    """``M`` with ``M / 2^53 <= e^eps / (1 + e^eps)``, within 5 units of ``2^-53`` below it: the side coin's
    probability ``p = M / 2^53`` is a dyadic drawn exactly from 53 uniform bits, and its privacy ratio
    ``p / (1 - p)`` is at most ``e^eps`` (a float ``1 / (1 + e^-eps)`` is within a few units of the true
    value, so 4 units below it are below the true value)."""
    p = 1.0 / (1.0 + math.exp(-float(epsilon)))
    return max(0, math.floor(p * 2.0**53) - 4)


def duchi_l2_radius(radius: float, epsilon: float, dim: int) -> float:
    """``B = r / ((2 p - 1) c_d)`` with ``c_d = Gamma(d/2) / (sqrt(pi) Gamma((d + 1)/2))`` and ``p`` the side
    coin's probability (:func:`_side_numerator`; ``2 p - 1 = (e^eps - 1)/(e^eps + 1)`` up to ``2^-50``): the
    sphere the privatizer's outputs lie on, so that they are unbiased (``E[u | <u, w> > 0] = c_d w`` for
    ``u`` uniform on the unit sphere and a unit ``w``)."""
    d = int(dim)
    log_c = math.lgamma((d + 1) / 2) - math.lgamma(d / 2) + 0.5 * math.log(math.pi)
    two_p_minus_1 = 2 * _side_numerator(epsilon) / 2.0**53 - 1
    return float(radius) / two_p_minus_1 * math.exp(log_c)


def duchi_l2_privatizer(values: np.ndarray, radius: float, epsilon: float, rng: RngLike = None) -> np.ndarray:
    """Duchi, Jordan & Wainwright (2013), the l2 privatizer of Proposition 3 (Imola et al.'s Lemma 6.1): each row
    ``v`` (``||v||_2 <= r``, ``d >= 2``) is reported as a point of the sphere of radius ``B``
    (:func:`duchi_l2_radius`), an unbiased ``epsilon``-LDP estimate of ``v``:

    1. ``w = v / ||v||`` with probability ``1/2 + ||v|| / (2 r)``, else ``-v / ||v||`` (``E[r w] = v``);
    2. ``T ~ Bernoulli(p)``, ``p = M / 2^53 <= e^eps / (1 + e^eps)`` (:func:`_side_numerator`), exact from 53
       uniform bits;
    3. ``u`` uniform on the unit sphere, with an exact fair sign, so that ``u`` and ``-u`` are equally likely;
       the report is ``B u'`` with ``u'`` the one of ``u, -u`` on ``w``'s side (``<u', w> > 0``) if ``T``, else
       the other.

    Privacy: the report's law given ``w`` puts mass ``p`` or ``1 - p`` (``p = e^eps / (1 + e^eps)``) on each
    pair ``{B u, -B u}`` split by which side of ``w`` it lies, so for any two inputs the ratio of the
    probabilities of any report is at most ``p / (1 - p) <= e^eps``, whatever steps 1 and 3 do, as long as the
    direction's law is symmetric (the exact fair sign makes it so); a direction orthogonal to ``w`` (``<u, w> =
    0``, measure zero) is reported with probability 1/2 either way, within the same ratio. Step 1's probability
    is a float (the uniform's 53 bits): it moves only the estimate's bias, never its privacy."""
    src = resolve_rng(rng)
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.shape[1] < 2:
        raise ParameterError("the l2 privatizer needs rows of dimension 2 or more")
    eps = float(epsilon)
    if not (math.isfinite(eps) and eps > 0) or not (math.isfinite(radius) and radius > 0):
        raise ParameterError("epsilon and the radius must be positive and finite")
    n, d = v.shape
    B = duchi_l2_radius(radius, eps, d)
    norms = np.linalg.norm(v, axis=1)
    unit = np.where(norms[:, None] > 0, v / np.maximum(norms, 1e-300)[:, None], 0.0)
    unit[norms == 0, 0] = 1.0  # any direction: the coin below is then fair
    keep = src.uniform(n) < 0.5 + np.minimum(norms, radius) / (2 * radius)
    w = np.where(keep[:, None], unit, -unit)
    u = gaussian_noise(1.0, (n, d), src)
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    u *= np.where(src.bits(n) == 1, 1.0, -1.0)[:, None]  # an exact fair sign: u and -u equally likely
    on_side = np.where(np.einsum("ij,ij->i", u, w) > 0, 1.0, -1.0)[:, None] * u  # u' on w's side (or -u)
    t = src.integers(1 << 53, size=n) < _side_numerator(eps)
    return B * np.where(t[:, None], on_side, -on_side)


def linear_baseline(
    ds: UserDataset,
    epsilon: float,
    f_values: np.ndarray | None = None,
    f_points=None,
    f_bound: float | None = None,
    model: Model | str = Model.LOCAL,
    rng: RngLike = None,
    mechanism: str = "knorm",
) -> Release:
    """User-level ``(epsilon, 0)``-DP baselines for linear queries, l2 K-norm noise on the range of ``f``, or
    (``mechanism="duchi"``, local only) the l2 privatizer of Duchi et al. behind Lemma 6.1
    (:func:`duchi_l2_privatizer`). A query value beyond ``f_bound`` is projected onto the ball of that radius
    (a refusal would depend on the data).

    ``f_bound`` is a public bound on ``max_x ||f(x)||_2``, so any two users' query values differ by at most
    ``2 f_bound`` in l2. Local (Lemma 6.1's setting): each user adds l2 K-norm noise with sensitivity
    ``2 f_bound`` (expected error ``2 f_bound d / (epsilon sqrt(n))`` for the average, the order of
    Duchi et al.'s bound ``O(d / (eps sqrt n))`` when ``||F Phi||_{1->2} ~ sqrt(d)``). Central (Lemma 6.3's
    setting, replace-one-user neighbours, equal user sizes): sensitivity ``2 f_bound / n``. The ball is a
    valid (not always optimal) choice of the Hardt-Talwar body ``K``; the optimal body, the symmetric hull
    of ``F Phi``'s columns, improves logarithmic factors only.
    """
    ds.require_items()
    mdl = Model(model)
    eps = float(epsilon)
    if not (math.isfinite(eps) and eps > 0):
        raise ParameterError("epsilon must be positive and finite")
    if f_bound is None:
        raise ParameterError("the baseline needs a public bound f_bound on ||f(x)||_2")
    if mechanism not in ("knorm", "duchi"):
        raise ParameterError(f"mechanism must be knorm or duchi, got {mechanism!r}")
    if mechanism == "duchi" and mdl is not Model.LOCAL:
        raise ParameterError("the Duchi et al. privatizer is a local mechanism: use model='local' with it")
    vals = _query_values(ds, f_values, f_points)
    # a value beyond the public bound is projected onto its ball (a refusal would depend on the data)
    norms = np.linalg.norm(vals, axis=1, keepdims=True)
    vals = vals * np.minimum(1.0, float(f_bound) / np.maximum(norms, 1e-300))
    per_user = user_means(ds.offsets, vals)
    n, d = per_user.shape
    if mechanism == "duchi":  # Lemma 6.1: Duchi et al.'s l2 privatizer, each user's mean in the f_bound ball
        noisy = duchi_l2_privatizer(per_user, float(f_bound), eps, rng)
        B = duchi_l2_radius(float(f_bound), eps, d)
        expected = B / math.sqrt(n)  # the norm of the mean of n independent reports of norm B, at most
        return Release(
            noisy.mean(axis=0),
            PureDP(eps, neighbours=Neighbours.ANY_TWO_INPUTS),
            "user-level l2 privatizer of Duchi et al. (local)",
            {"epsilon": eps, "f_bound": f_bound, "model": mdl.value, "n": n, "dim": d, "radius": B},
            ErrorStatement(f"expected l2 error at most {expected:.4g}", bound=expected),
            {"per_user": noisy},
        )
    if mdl is Model.CENTRAL:
        ds.require_equal_sizes()
        sens = 2 * f_bound / n
        cal = calibrate_knorm(sens, eps, "l2", d)
        noisy = knorm_release(per_user.mean(axis=0), cal, rng)
        value, extras, nb = noisy, {}, Neighbours.REPLACE_USER
    else:
        sens = 2 * f_bound
        cal = calibrate_knorm(sens, eps, "l2", d)
        noisy = knorm_release(per_user, cal, rng)
        value, extras, nb = noisy.mean(axis=0), {"per_user": noisy}, Neighbours.ANY_TWO_INPUTS
    scale = cal.scale
    expected = scale * d / (math.sqrt(n) if mdl is Model.LOCAL else 1)
    return Release(
        value,
        PureDP(eps, neighbours=nb),
        f"user-level l2 K-norm baseline ({mdl.value})",
        {"epsilon": eps, "f_bound": f_bound, "model": mdl.value, "n": n, "dim": d, "noise_scale": scale},
        ErrorStatement(f"expected l2 error about {expected:.4g}", bound=expected),
        extras,
    )

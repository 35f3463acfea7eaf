"""Laplace and Gaussian noise on a lattice: calibrations (with the rounding term), the zCDP accounting of the
discrete Gaussian, and the mechanisms that add the noise to values."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import DataError, ParameterError
from .samplers import _GAUSS_SQ_MAX, discrete_gaussian, discrete_laplace
from .sources import RngLike

# --------------------------------------------------------------------------------------------
# Lattice arithmetic
# --------------------------------------------------------------------------------------------

_LAPLACE_BITS = 40  # t = scale / g lies in [2**40, 2**41]
_GAUSS_BITS = 54  # sigma / g lies in [2**54, 2**55]


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
    from scipy import special  # imported on use (0.15 s)

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
_GAUSS_MIN_DELTA = 1e-15  # below this the lattice step (2^-54 sigma) and float evaluation decide delta
_GAUSS_MAX_EPSILON = 300.0  # truncation term (1 + e^eps) 2 exp(-480) per coordinate: e^-180 at most


def _truncation_delta(epsilon: float, dim: int) -> float:
    """What the sampler's truncation (``|x| < 32 sigma``) adds to delta at ``epsilon``: the truncated and the
    untruncated laws differ in total variation by at most ``t = 2 exp(-480)`` per coordinate, which moves an
    ``(epsilon, delta)`` guarantee to ``(epsilon, delta + (1 + e^epsilon) t)``."""
    return dim * (1 + math.exp(min(float(epsilon), _GAUSS_MAX_EPSILON))) * _TRUNCATION_DELTA


def _check_gaussian_request(epsilon: float, delta: float) -> None:
    if not _GAUSS_MIN_DELTA <= delta < 1:
        raise ParameterError(
            f"the Gaussian mechanism accepts delta in [{_GAUSS_MIN_DELTA:g}, 1), got {delta!r}: below 1e-15 its "
            "lattice (steps of 2^-54 sigma) and the floating-point accounting cannot certify delta"
        )
    if epsilon > _GAUSS_MAX_EPSILON:
        raise ParameterError(
            f"the Gaussian mechanism accepts epsilon up to {_GAUSS_MAX_EPSILON:g}, got {epsilon!r}: its sampler "
            "keeps |noise| < 32 sigma, which the accounting covers only while e^epsilon stays far below e^480"
        )


def zcdp_delta(rho: float, epsilon: float) -> float:
    """delta of a ``rho``-zCDP mechanism at ``epsilon``: ``inf_{a > 1} exp((a-1)(a rho - eps)) (a-1)^(a-1) / a^a``
    (Canonne, Kamath & Steinke 2020, Proposition 12 / Corollary 13; Asoodeh et al. 2021). Every ``a``
    gives a valid bound, so the numerical minimisation can only make it looser, never wrong."""
    from scipy.optimize import minimize_scalar

    rho, eps = float(rho), float(epsilon)
    if rho <= 0:
        return 0.0

    def log_delta(a: float) -> float:
        # (a-1) log(a-1) - a log a, written without the cancellation that zeroes it for a above ~1e13
        return (a - 1) * (a * rho - eps) + (a - 1) * math.log1p(-1 / a) - math.log(a)

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
        :func:`zcdp_delta` at :meth:`rho_at`, plus the truncation term ``(1 + e^epsilon) 2 dim exp(-480)``
        (:func:`_truncation_delta`)."""
        return zcdp_delta(self.rho_at(distance), float(epsilon)) + _truncation_delta(epsilon, self.dim)


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
    _check_gaussian_request(eps, target)
    sigma0 = analytic_gaussian_sigma(sens, eps, target)  # a lower bound: zCDP needs at least this
    g = _pow2_below(sigma0, _GAUSS_BITS if lattice_bits is None else int(lattice_bits))
    sens_eff = sens + g * math.sqrt(dim)
    goal = target * (1 - _DELTA_MARGIN)

    def ok(sigma: float) -> bool:
        return zcdp_delta(sens_eff**2 / (2 * sigma**2), eps) + _truncation_delta(eps, dim) <= goal

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
        ld = (a - 1) * (a * r - e) + (a - 1) * np.log1p(-1 / a) - np.log(a)  # no cancellation at large a
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
    return worst + _truncation_delta(a, cal.dim)  # the largest epsilon of the curve (alpha d <= alpha)


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

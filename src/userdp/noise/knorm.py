"""K-norm noise on the lattice (metric DP): l1 = discrete Laplace per coordinate, l2 = the exact lattice law
:class:`L2LatticeLaw` and its rejection sampler; calibrations that state the realized parameter."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np

from ..errors import ParameterError
from .kernels import _l2_batch
from .mechanisms import _LAPLACE_BITS, _check_eps, _check_sens, _check_values, _pow2_below
from .samplers import discrete_laplace, randomized_round
from .selection import _bern_exp_le1_py, bernoulli_exp
from .sources import RandomSource, RngLike, resolve_rng

# --------------------------------------------------------------------------------------------
# K-norm noise on the lattice (metric DP): l1 = discrete Laplace per coordinate, l2 = L2LatticeLaw
# --------------------------------------------------------------------------------------------

Norm = Literal["l1", "l2"]

_L2_BITS = 16  # T = scale / g lies in [2**16, 2**17]

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
        if self.M < 2:  # the radius acceptance w A (M - 1) / ((j + i) M) would be 0: the sampler would never stop
            raise ParameterError("the l2 lattice law needs a smoothing radius c large enough that M >= 2")

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

"""Exact checks of the lattice samplers as implemented (issue 13, findings 1 and 2).

For each metric-DP mechanism the output law of the *algorithm the sampler runs* is enumerated on small
lattices (its integer steps, its normalising constants, randomized rounding), the library's compiled
sampler is shown to follow that law (chi-square, also through the Python-integer path), and the exact
privacy loss of neighbouring inputs -- including inputs a tiny distance apart -- is compared with the
claim. Each check has a broken variant (a change to the library) that it catches.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from scipy import stats

import userdp.audit as A
import userdp.noise as N
from userdp.errors import ParameterError
from userdp.noise import (
    KNormCalibration,
    L2LatticeLaw,
    RandomSource,
    calibrate_gaussian,
    calibrate_knorm,
    discrete_gaussian,
    knorm_mechanism,
    randomized_round,
)

# ---------------------------------------------------------------------------------- exact laws
# The exact laws are the auditor's (userdp.audit): built from the sampler's own steps.


def _rho(law: L2LatticeLaw, pts: np.ndarray) -> np.ndarray:
    return A._l2_rho(law, pts)


def l2_law_table(law: L2LatticeLaw, radius: int) -> tuple[np.ndarray, np.ndarray]:
    return A.l2_lattice_table(law, radius)


@functools.lru_cache(maxsize=32)
def l2_law_total(law: L2LatticeLaw, power: int = 0) -> float:
    return A.l2_lattice_moment(law, power)


def rr_law(table: dict, dim: int, x: np.ndarray, box: int) -> dict:
    return A.randomized_rounding_law(table, dim, x, box)


FLOAT_SLACK = A._FLOAT_SLACK


def max_loss(P: dict, Q: dict) -> tuple[float, int]:
    return A._max_log_ratio(P, Q)


# Small laws: small enough to enumerate, large enough that the smoothing and ceil terms matter.
SMALL_2D = L2LatticeLaw(2, 12, s=8, c=2)
SMALL_3D = L2LatticeLaw(3, 5, s=4, c=1)


def _chi2_law(law: L2LatticeLaw, draws: np.ndarray, radius: int) -> float:
    """Chi-square p-value of ``draws`` against the exact law: cells of the box grouped (in order of
    ``rho``, then lexicographically) into bins of expected count >= 20, plus one bin for the rest."""
    pts, p = l2_law_table(law, radius)
    total = l2_law_total(law)
    rho = _rho(law, pts)
    order = np.lexsort((*pts.T[::-1], rho))
    expected = p[order] / total * draws.shape[0]
    bins = np.zeros(len(pts), dtype=np.int64)
    b, acc = 0, 0.0
    for i, e in enumerate(expected):
        bins[i] = b
        acc += e
        if acc >= 20:
            b, acc = b + 1, 0.0
    index = {tuple(pts[k]): bins[i] for i, k in enumerate(order)}
    nb = int(bins.max()) + 2
    counts = np.zeros(nb)
    for z in map(tuple, draws):
        counts[index.get(z, nb - 1)] += 1
    exp = np.bincount(bins, weights=expected, minlength=nb)
    exp[nb - 1] = draws.shape[0] - expected.sum()
    keep = exp > 5
    return stats.chisquare(counts[keep], exp[keep] * counts[keep].sum() / exp[keep].sum()).pvalue


def _moment_z(law: L2LatticeLaw, draws: np.ndarray) -> float:
    """z-score of the sample mean of ``|z|^2`` against its exact value under the law."""
    total = l2_law_total(law)
    mean = l2_law_total(law, 1) / total
    var = l2_law_total(law, 2) / total - mean**2
    x = (draws.astype(float) ** 2).sum(axis=1)
    return (x.mean() - mean) / math.sqrt(var / x.size)


# large statistical runs (150,000 and 60,000 draws, and 2,500 on the Python-integer path): the default tier keeps
# test_l2_sampler_rejects_a_wrong_scale (the same law, fewer draws, 30% off rejected)
@pytest.mark.slow
@pytest.mark.parametrize("law,radius,n", [(SMALL_2D, 30, 150_000), (SMALL_3D, 12, 60_000)])
def test_l2_sampler_follows_its_exact_law(law, radius, n):
    """The compiled sampler's draws follow the enumerated law (binned chi-square, and a z-test of the mean
    of ``|z|^2``, which has the power to see the ~1% distortions that a wrong acceptance step causes);
    so do draws finished on Python integers (``j_fast`` lowered so that attempts are handed over)."""
    rng = RandomSource(11)
    fast = law.sample(n, rng)
    assert _chi2_law(law, fast, radius) > 1e-3
    assert abs(_moment_z(law, fast)) < 4
    slow = law.sample(2_500, rng, j_fast=law.j_min + 3 * law.A)
    assert _chi2_law(law, slow, radius) > 1e-3
    assert abs(_moment_z(law, slow)) < 4


# 150,000 draws to see a 3% error in the kernel's scale; the default tier rejects 30% off
# (test_l2_sampler_rejects_a_wrong_scale)
@pytest.mark.slow
def test_l2_sampler_moment_test_catches_a_wrong_kernel_scale(monkeypatch):
    """Broken variant: the compiled kernel run with a radius scale ``tau`` 3% off the law's (through the
    library's ``_params``) is refuted by the moment test."""
    law = SMALL_2D
    orig = L2LatticeLaw._params

    def broken(self, j_fast=None):
        p = list(orig(self, j_fast))
        p[0] = np.int64(round(int(p[0]) * 1.03))  # tau
        return tuple(p)

    monkeypatch.setattr(L2LatticeLaw, "_params", broken)
    assert abs(_moment_z(law, law.sample(150_000, RandomSource(13)))) > 4


def test_l2_sampler_rejects_a_wrong_scale():
    """The compiled sampler's draws follow the enumerated law (binned chi-square), as do draws finished on
    Python integers; the check has power: the same draws against the law with T 30% larger or smaller fail."""
    rng = RandomSource(12)
    draws = SMALL_2D.sample(20_000, rng)
    assert _chi2_law(SMALL_2D, draws, 30) > 1e-3
    for factor in (1.3, 0.7):
        wrong = L2LatticeLaw(2, round(SMALL_2D.T * factor), s=SMALL_2D.s, c=SMALL_2D.c)
        assert _chi2_law(wrong, draws, 30) < 1e-6
    slow = SMALL_2D.sample(400, rng, j_fast=SMALL_2D.j_min + 3 * SMALL_2D.A)
    assert _chi2_law(SMALL_2D, slow, 30) > 1e-3


def test_l2_mechanism_exact_loss_within_claim_at_every_distance():
    """Randomized rounding + the l2 lattice law (the auditor's exact audit): every output in the box is
    reachable from every input and the exact log-ratio is within ``kappa |x - x'| / T`` -- including at
    distance 1.4e-6; the claim is not vacuous (the worst pair uses most of it)."""
    res = A.audit_lattice_l2(SMALL_2D)
    assert res.passed, str(res)
    worst = float(res.measured.split("=")[1].split("x")[0])
    assert worst > 0.5


def test_l2_loss_check_catches_the_ideal_claim(monkeypatch):
    """Broken variant: the library claiming the ideal factor (kappa = 1, no smoothing or ceil terms) is
    refuted by the same exact audit."""
    monkeypatch.setattr(L2LatticeLaw, "kappa", lambda self: 1.0)
    assert not A.audit_lattice_l2(SMALL_2D).passed


def test_deterministic_rounding_is_refuted_at_small_distances():
    """What the old K-norm code did (round the input to the nearest lattice point): two inputs 2e-6 apart
    on either side of a rounding boundary differ by a whole lattice step, a loss of about 1/T however
    small the distance, so the metric guarantee fails by orders of magnitude."""
    pts, p = l2_law_table(SMALL_2D, 14)
    table = {tuple(q): v for q, v in zip(pts, p, strict=True)}
    # x = (0.499999, 0) rounds to (0, 0) and x' = (0.500001, 0) to (1, 0)
    P = {k: v for k, v in table.items() if max(map(abs, k)) <= 10}
    Q = {tuple(np.add(k, (1, 0))): v for k, v in P.items()}  # round(xp) = round(x) + e_1
    Q = {k: v for k, v in Q.items() if max(map(abs, k)) <= 10}
    loss, _ = max_loss(P, Q)
    claim = SMALL_2D.kappa() * 2e-6 / SMALL_2D.T
    assert loss / claim > 1e4


def test_randomized_round_is_exact_and_unbiased():
    rng = RandomSource(3)
    x = np.full(200_000, 2.25)
    r = randomized_round(x, rng)
    assert set(np.unique(r)) == {2, 3}
    assert stats.binomtest(int((r == 3).sum()), r.size, 0.25).pvalue > 1e-3
    assert stats.binomtest(int((r == 3).sum()), r.size, 0.25 * 1.3).pvalue < 1e-6
    neg = randomized_round(np.full(100_000, -0.75), rng)
    assert set(np.unique(neg)) == {-1, 0}
    assert stats.binomtest(int((neg == 0).sum()), neg.size, 0.25).pvalue > 1e-3
    exact = randomized_round(np.array([3.0, -7.0, 2.0**60]), rng)
    assert exact.tolist() == [3, -7, 2**60]


def test_dyadic_bernoulli_compares_all_bits():
    """``_bern_dyadic(M, E)`` on crafted words: the decision is the exact comparison of the first E bits."""
    st = np.zeros(2, np.int64)

    def run(M, E, words):
        st[:] = 0
        return N.kernels._bern_dyadic(np.array(words, dtype=np.uint64), st, np.int64(M), np.int64(E))

    M, E = 5 * 2**50, 53  # 5/8: top three bits 101
    assert run(M, E, [(5 << 61) - 1])
    assert not run(M, E, [5 << 61])
    # a tiny fraction 2^-100 (+ extra bits): the first 47 bits of U must be zero before M is compared
    M, E = 2**52 + 1, 152
    assert not run(M, E, [1, 0])
    assert run(M, E, [0, 0])  # U < 2^-128 < M / 2^152
    hi = (2**52 + 1) >> (152 - 128)  # bits of M in the second 64-bit chunk
    assert run(M, E, [0, (hi - 1)])
    assert not run(M, E, [0, hi + 1])


def test_l1_mechanism_exact_loss_at_every_distance(monkeypatch):
    """Randomized rounding + discrete Laplace (the l1 K-norm, and every 1-D K-norm): exact log-ratio within
    the library's ``loss_per_unit`` (``expm1(1/t)`` per step) at distances from 1e-9 to 5, no unreachable
    output; the naive claim ``1/t`` per step (broken variant) is refuted."""
    res = A.audit_lattice_l1(4)
    assert res.passed, str(res)
    assert float(res.measured.split("=")[1].split("x")[0]) > 0.9
    monkeypatch.setattr(N.KNormCalibration, "loss_per_unit", property(lambda self: 1 / self.t / self.granularity))
    assert not A.audit_lattice_l1(4).passed


def test_lattice_laplace_exact_audit_at_real_parameters(monkeypatch):
    """The lattice Laplace mechanism at its real lattice (t ~ 2^40): the exact supremum loss at the worst
    rounding positions is within epsilon; a calibration without the rounding term (broken variant) is not."""
    assert A.audit_lattice_laplace(1.0, 1.0, 3).passed
    real = N.calibrate_laplace

    def no_rounding_term(sens, eps, dim=1):
        cal = real(sens, eps, dim)
        return N.LaplaceCalibration(cal.epsilon, sens, dim, cal.granularity, math.ceil(sens / cal.granularity / eps))

    monkeypatch.setattr(N, "calibrate_laplace", no_rounding_term)  # where the auditor reads it
    assert not A.audit_lattice_laplace(1.0, 1.0, 3).passed


def test_knorm_mechanism_follows_the_l1_law():
    """The library path (``knorm_mechanism``, l1, at its real lattice): the released points for one input
    follow the discrete Laplace of scale ``sens / eps`` (the definition's, to within a lattice step); a scale
    30% off is rejected."""
    rng = RandomSource(7)
    sens, eps = 1.0, 1.0
    g = 2.0 ** (math.floor(math.log2(sens / eps)) - 40)
    x = 0.3 * g + 5 * g
    y = np.round(knorm_mechanism(np.full((40_000, 1), x), sens, eps, "l1", rng)[:, 0] / g).astype(np.int64) - 5
    assert stats.kstest(y * g, stats.laplace(scale=sens / eps).cdf).pvalue > 1e-3
    assert stats.kstest(y * g, stats.laplace(scale=1.3 * sens / eps).cdf).pvalue < 1e-6
    assert stats.kstest(y * g, stats.laplace(scale=0.7 * sens / eps).cdf).pvalue < 1e-6


def _interpolated_dlap(t: int, x: float, ys: np.ndarray) -> np.ndarray:
    """The law of ``randomized_round(x) + DLap(t)`` from the definitions: ``(1 - f) D(y - a) + f D(y - a - 1)``
    with ``a = floor(x)``, ``f = x - a`` and ``D`` the discrete Laplace ``∝ exp(-|k| / t)``."""
    q = math.exp(-1 / t)
    a = math.floor(x)
    f = x - a

    def dlap(k):
        return (1 - q) / (1 + q) * q ** np.abs(k)

    return (1 - f) * dlap(ys - a) + f * dlap(ys - a - 1)


def test_knorm_mechanism_exact_l1_law_on_a_coarse_lattice(monkeypatch):
    """``knorm_mechanism`` (l1, one coordinate) as released -- its calibration, randomized rounding and sampler
    -- on a lattice made coarse (2^-2 of the scale) so that its integer scale can be read off the draws: the
    releases at an input 0.45 steps off the lattice follow the interpolated discrete Laplace (the best fitting
    integer ``t``; deterministic rounding, and 30% off, rejected); ``t`` is at least the definition's smallest
    ``t`` with ``expm1(1/t) <= g eps / sens`` (the l1 K-norm's loss per unit) and at most one more; and that law
    meets the *request* exactly at every distance: ``loss <= eps |x - x'| / sens`` (down to 1e-9 steps)."""
    import userdp.noise.knorm as knorm

    monkeypatch.setattr(knorm, "_LAPLACE_BITS", 2)
    sens, eps = 1.0, 1.0
    g = 2.0 ** (math.floor(math.log2(sens / eps)) - 2)
    t_min = next(t for t in range(1, 1000) if math.expm1(1 / t) <= g * eps / sens)
    x = 0.45
    out = knorm_mechanism(np.full((40_000, 1), x * g), sens, eps, "l1", RandomSource(41))[:, 0] / g
    assert np.all(out == np.round(out))
    y = out.astype(np.int64)
    ys = np.arange(y.min(), y.max() + 1)
    counts = np.bincount(y - y.min(), minlength=ys.size)

    def pvalue(pmf: np.ndarray) -> float:
        keep = pmf * y.size > 5
        return stats.chisquare(counts[keep], pmf[keep] / pmf[keep].sum() * counts[keep].sum()).pvalue

    def loglik(t: int) -> float:
        return float((counts * np.log(_interpolated_dlap(t, x, ys))).sum())

    t = max(range(1, 4 * t_min), key=loglik)
    assert t_min <= t <= t_min + 1
    assert pvalue(_interpolated_dlap(t, x, ys)) > 1e-3
    assert pvalue(_interpolated_dlap(t, float(round(x)), ys)) < 1e-6  # deterministic rounding
    for wrong in (round(0.7 * t), round(1.3 * t)):
        assert pvalue(_interpolated_dlap(wrong, x, ys)) < 1e-6
    box = np.arange(-40 * t, 40 * t + 1)
    worst = 0.0
    for a, b in ((0.5, 0.5 + 1e-9), (0.0, 1e-7), (0.9999, 1.0001), (0.2, 0.7), (0.0, 3.0)):
        loss = np.abs(np.log(_interpolated_dlap(t, a, box)) - np.log(_interpolated_dlap(t, b, box))).max()
        worst = max(worst, (loss - FLOAT_SLACK) / (eps * abs(a - b) * g / sens))
    assert 0.6 < worst <= 1.0


def _small_l2_mechanism(monkeypatch) -> L2LatticeLaw:
    """Make the library calibrate a small l2 law (T about 8, s = 8, c = 1) so its end-to-end law can be
    enumerated; returns that law."""
    monkeypatch.setattr(N.knorm, "_L2_BITS", 2)
    monkeypatch.setattr(N.knorm, "_S_BITS", 3)
    monkeypatch.setattr(N.knorm, "_SMOOTH", 1)
    law = calibrate_knorm(1.0, 1.0, "l2", 2).law
    assert (law.s, law.c) == (8, 1) and 6 <= law.T <= 12
    return law


def _mechanism_draws(monkeypatch, x_steps: float, n: int = 40_000) -> tuple[np.ndarray, dict]:
    """``n`` releases of ``knorm_mechanism`` (l2, the small calibration) at ``x_steps`` lattice steps from 0
    on the first axis, in lattice units, and the exact law of randomized rounding + the lattice law."""
    y, P, _ = _mechanism_draws_and_laws(monkeypatch, x_steps, n)
    return y, P


def _mechanism_draws_and_laws(monkeypatch, x_steps: float, n: int = 40_000) -> tuple[np.ndarray, dict, dict]:
    """:func:`_mechanism_draws` and the law that rounding to the nearest lattice point would give."""
    law = _small_l2_mechanism(monkeypatch)
    cal = calibrate_knorm(1.0, 1.0, "l2", 2)
    g = cal.granularity
    pts, p = l2_law_table(law, 40)
    table = {tuple(q): v for q, v in zip(pts, p, strict=True) if max(map(abs, q)) <= 40}
    x = np.array([x_steps, 0.0])
    out = knorm_mechanism(np.tile(x * g, (n, 1)), 1.0, 1.0, "l2", RandomSource(31))
    near = np.floor(x + 0.5)
    return np.round(out / g).astype(np.int64), rr_law(table, 2, x, 30), rr_law(table, 2, near, 30)


def _log_likelihood_ratio(y: np.ndarray, P: dict, Q: dict) -> float:
    """``sum ln P(y) / Q(y)`` over the draws that both laws' boxes hold (positive: the draws favour ``P``)."""
    return float(sum(math.log(P[r] / Q[r]) for r in map(tuple, y) if r in P and r in Q))


def test_knorm_mechanism_end_to_end_law(monkeypatch):
    """The library path (``knorm_mechanism``: its calibration, randomized rounding, then the sampler) follows
    the enumerated law of the mechanism at an input half a lattice step from the lattice, and its mean is the
    input. That law meets the *request*: for inputs at l2 distance ``r`` (down to 1.4e-6 lattice steps) the
    exact privacy loss is at most ``eps r / sens`` (not only the calibration's own ``epsilon_realized``)."""
    y, P, P_near = _mechanism_draws_and_laws(monkeypatch, 0.5)
    keys = list(P)
    index = {k: i for i, k in enumerate(keys)}
    counts = np.zeros(len(keys))
    for row in map(tuple, y):
        if row in index:
            counts[index[row]] += 1
    exp = np.array([P[k] for k in keys])
    keep = exp / exp.sum() * counts.sum() > 5
    assert stats.chisquare(counts[keep], exp[keep] / exp[keep].sum() * counts[keep].sum()).pvalue > 1e-3
    assert abs(y[:, 0].mean() - 0.5) < 4 * y[:, 0].std() / math.sqrt(y.shape[0])
    assert _log_likelihood_ratio(y, P, P_near) > 10  # the draws favour it over rounding to the nearest point
    law = _small_l2_mechanism(monkeypatch)
    g = calibrate_knorm(1.0, 1.0, "l2", 2).granularity
    pts, p = l2_law_table(law, 19)
    table = {tuple(q.tolist()): v for q, v in zip(pts, p, strict=True)}
    worst = 0.0
    for x, xp in A.LATTICE_PAIRS_2D:  # lattice units; sens = eps = 1
        x, xp = np.asarray(x, float), np.asarray(xp, float)
        loss, zero = max_loss(rr_law(table, 2, x, 10), rr_law(table, 2, xp, 10))
        assert zero == 0
        worst = max(worst, (loss - FLOAT_SLACK) / (float(np.linalg.norm(x - xp)) * g))
    assert 0.4 < worst <= 1.0


def test_knorm_mechanism_nearest_rounding_is_caught(monkeypatch):
    """Broken variant: the library rounding to the nearest lattice point (as the old code did) releases
    around 1 instead of 0.5 -- the likelihood-ratio test of the end-to-end check fails."""
    monkeypatch.setattr(N.knorm, "randomized_round", lambda x, rng=None: np.floor(np.asarray(x) + 0.5).astype(np.int64))
    y, P, P_near = _mechanism_draws_and_laws(monkeypatch, 0.5)
    assert _log_likelihood_ratio(y, P, P_near) < -10


def test_knorm_calibration_realizes_the_request():
    """The calibration's realized epsilon is within the request and uses nearly all of it; for l1 (and any
    one-dimensional norm) on the design's lattice ``g = 2^(floor(log2(sens / eps)) - 40)`` the definition's
    loss per unit ``expm1(1/t) / g`` (computed here) times the sensitivity is within the request too."""
    for norm, dim in [("l1", 3), ("l2", 1), ("l2", 2), ("l2", 50)]:
        cal = calibrate_knorm(0.7, 1.3, norm, dim)
        assert isinstance(cal, KNormCalibration)
        assert cal.epsilon_realized <= 1.3
        assert cal.epsilon_realized > 1.3 * (1 - 1e-4)
        assert cal.scale >= 0.7 / 1.3
        if norm == "l1" or dim == 1:
            g = 2.0 ** (math.floor(math.log2(0.7 / 1.3)) - 40)
            assert cal.granularity == g and 0.7 * math.expm1(1 / cal.t) / g <= 1.3
    assert calibrate_knorm(1.0, 1.0, "l2", 50).law.kappa() < 1.002
    with pytest.raises(ParameterError):
        calibrate_knorm(1.0, 1.0, "linf", 2)


def test_l2_mechanism_radius_law_at_real_parameters():
    """At the calibrated parameters the noise radius is Gamma(dim, scale) to within kappa (K-norm
    density exp(-|z| / scale)); a scale 30% off is rejected."""
    rng = RandomSource(9)
    for dim, n in [(2, 20_000), (5, 4000)]:
        cal = calibrate_knorm(1.0, 1.0, "l2", dim)
        z = N.lattice_knorm_noise(cal, n, rng) * cal.granularity
        r = np.linalg.norm(z, axis=1)
        scale = 1.0 / 1.0  # the K-norm scale sens / eps of the definition (the lattice law's is within kappa)
        assert stats.kstest(r, stats.gamma(dim, scale=scale).cdf).pvalue > 1e-3
        assert stats.kstest(r, stats.gamma(dim, scale=1.3 * scale).cdf).pvalue < 1e-6
        assert stats.kstest(r, stats.gamma(dim, scale=0.7 * scale).cdf).pvalue < 1e-6
        u = z / r[:, None]
        if dim == 2:  # uniform angle
            assert stats.kstest(np.arctan2(u[:, 1], u[:, 0]), stats.uniform(-math.pi, 2 * math.pi).cdf).pvalue > 1e-3


# ---------------------------------------------------------------------------------- Gaussian


def test_discrete_gaussian_square_kernel_matches_its_law():
    """The wide-range discrete Gaussian (variance w^2, the split acceptance exp(-q^2/2) exp(-qr/w)
    exp(-r^2/(2w^2))) follows the truncated discrete Gaussian; 30% off is rejected."""
    rng = RandomSource(21)
    for w in (3, 40):
        x = discrete_gaussian(w * w, 60_000, rng)
        k, p = A._discrete_gaussian_law(w)
        counts = np.array([np.sum(x == v) for v in k])
        keep = p * x.size > 5
        assert stats.chisquare(counts[keep], p[keep] / p[keep].sum() * counts[keep].sum()).pvalue > 1e-3
        _, q = A._discrete_gaussian_law(round(1.3 * w))
        k2 = np.arange(-32 * round(1.3 * w) + 1, 32 * round(1.3 * w))
        q = np.interp(k, k2, q)
        assert stats.chisquare(counts[keep], q[keep] / q[keep].sum() * counts[keep].sum()).pvalue < 1e-6
    big = discrete_gaussian((2**54) ** 2, 50_000, rng).astype(float) / 2**54
    assert stats.kstest(big, stats.norm.cdf).pvalue > 1e-3
    assert stats.kstest(big, stats.norm(scale=1.3).cdf).pvalue < 1e-6


def _lattice_gaussian_delta(w: int, shift: int, eps: float) -> float:
    """Exact hockey-stick (both directions) of the sampler's discrete Gaussian and its shift by ``shift``."""
    k, p = A._discrete_gaussian_law(w)
    P = dict(zip(k.tolist(), p, strict=True))
    return A._hockey_stick_laws(P, {v + shift: pr for v, pr in P.items()}, eps)


def test_gaussian_lattice_delta_at_tiny_distances():
    """Deterministic rounding moves two inputs 2e-9 apart by a whole lattice step when they straddle a
    rounding boundary. On a coarse lattice (sigma/g about 2^3, ``lattice_bits=3``) the exact hockey-stick is
    ~0.03 at epsilon ~ 0: the calibration's ``delta_at`` covers it, the old claim (the Gaussian delta at the
    true distance) does not. The exact discrete delta also exceeds the *continuous* Gaussian's delta at one
    lattice step, which is why userdp accounts for the discrete Gaussian by zCDP. At the real lattice
    (sigma/g >= 2^54) the rounding term is below 1e-15."""
    cal = calibrate_gaussian(1.0, 1.0, 1e-3, dim=1, lattice_bits=3)
    assert A.audit_lattice_gaussian(3).passed
    for eps in (1e-9, 0.05, 0.2):
        exact = _lattice_gaussian_delta(cal.w, 1, eps)
        assert exact <= cal.delta_at(2e-9, eps)
    exact = _lattice_gaussian_delta(cal.w, 1, 1e-9)
    assert exact > 1000 * N.gaussian_delta(cal.sigma, 2e-9, 1e-9)
    assert exact > N.gaussian_delta(cal.sigma, cal.granularity, 1e-9)  # discrete > continuous here
    for shift in (2, 4, 8):  # and at whole lattice distances with epsilon = 1 x distance
        d = shift * cal.granularity
        assert _lattice_gaussian_delta(cal.w, shift, d) <= cal.delta_at(d - cal.granularity, d)
    real = calibrate_gaussian(1.0, 1.0, 1e-6, dim=50)
    assert real.delta_at(0.0, 0.0) < 1e-15
    assert real.delta_at(1.0, 1.0) <= 1e-6


def test_gaussian_broken_rounding_term_is_caught(monkeypatch):
    """Broken variant: if ``GaussianCalibration.rounding`` is dropped, ``delta_at`` no longer covers the
    exact divergence of straddling inputs on a coarse lattice."""
    monkeypatch.setattr(N.GaussianCalibration, "rounding", property(lambda self: 0.0))
    cal = calibrate_gaussian(1.0, 1.0, 1e-3, dim=1, lattice_bits=3)
    assert _lattice_gaussian_delta(cal.w, 1, 1e-9) > cal.delta_at(2e-9, 1e-9)
    assert not A.audit_lattice_gaussian(3).passed


def test_gaussian_broken_accounting_is_caught(monkeypatch):
    """Broken variant: accounting for the discrete Gaussian with the continuous Gaussian's exact delta
    (the previous calibration) under-reports the exact discrete delta at one lattice step."""
    cal = calibrate_gaussian(1.0, 1.0, 1e-3, dim=1, lattice_bits=3)

    def continuous(rho, eps):
        return N.gaussian_delta(cal.sigma, math.sqrt(2 * rho) * cal.sigma, eps)

    monkeypatch.setattr(N.mechanisms, "zcdp_delta", continuous)
    assert _lattice_gaussian_delta(cal.w, 1, 1e-9) > cal.delta_at(0.0, 1e-9)
    assert not A.audit_lattice_gaussian(3).passed


def _zcdp_dp_delta(rho: float, eps: float) -> float:
    """``inf_{a > 1} exp((a-1)(a rho - eps)) (a-1)^(a-1) / a^a`` (Canonne, Kamath & Steinke 2020, Corollary 13) by
    brute force over a grid of orders (a valid bound: at least the infimum)."""
    a = 1 + np.exp(np.linspace(-18.0, 18.0, 200_001))
    return float(min(1.0, np.exp(((a - 1) * (a * rho - eps) + (a - 1) * np.log(a - 1) - a * np.log(a)).min())))


def test_metric_gaussian_holds_at_every_distance():
    """The Gaussian variant's calibration: the rigorous sup over d of delta(d) is within delta, and so is the
    per-distance delta at a few distances (tiny to 1), both as the library states it and as the definition
    gives it (zCDP of the discrete Gaussian at ``rho = (ell d + g sqrt(dim))^2 / (2 sigma^2)``, converted
    here by brute force; within its 1e-3 resolution)."""
    ell, alpha, delta, dim = 1.0, 25.0, 1e-6, 2
    cal = N.calibrate_gaussian_metric(ell, alpha, delta, dim=dim)
    assert N.metric_gaussian_sup_delta(cal, ell, alpha) <= delta
    sigma = cal.granularity * cal.w
    for d in (1e-12, 1e-6, 1e-3, 0.1, 0.5, 1.0):
        assert cal.delta_at(ell * d, alpha * d) <= delta
        rho = (ell * d + cal.granularity * math.sqrt(dim)) ** 2 / (2 * sigma**2)
        assert _zcdp_dp_delta(rho, alpha * d) <= delta * (1 + 1e-3)


def test_cli_audit_lattice_runs_the_exact_audits(capsys):
    from userdp.cli import main

    assert main(["audit", "lattice"]) == 0
    out = capsys.readouterr().out
    assert out.count("[PASS]") == 4 and "unreachable" in out


def test_randomized_round_of_tiny_negative_values_is_exact():
    """x = -2^-55 must round to 0 except with probability 2^-55 (E = x). The former code took frac(x) as
    x - floor(x) = 1 - 2^-55, which rounds to 1.0 in floating point, and sent every such x to -1: a full
    lattice step at a distance of 2^-55, where the metric guarantee claims a loss of about 2^-55 alpha."""
    src = RandomSource(3)
    for x in (-(2.0**-55), -1e-300, -5e-324, -(2.0**-53) * 3):
        assert np.all(randomized_round(np.full(4000, x), src) == 0), x
    near = randomized_round(np.full(4000, -(1 - 2.0**-53)), src)  # P(-1) = 1 - 2^-53
    assert np.all(near == -1)
    for x, p_down in ((-0.3, 0.3), (-2.75, 0.75), (-0.1, 0.1)):
        r = randomized_round(np.full(40_000, x), src)
        assert set(np.unique(r)) <= {math.floor(x), math.ceil(x)}
        assert stats.binomtest(int((r == math.floor(x)).sum()), r.size, p_down).pvalue > 1e-4


def test_gaussian_refuses_what_its_accounting_cannot_certify():
    """delta below 1e-15: the lattice step (2^-54 sigma) alone moves delta(d) near d = 0 to ~1e-17, and the
    float zCDP evaluation could not see it (the metric calibration once 'met' 1e-18 while the true sup of
    delta(d) was 2e-17). epsilon above 300: the sampler truncates at 32 sigma, and the truncation term
    (1 + e^epsilon) 2 exp(-480) stops being negligible (at epsilon = 1000 a release of 0 and of 1 had disjoint
    supports: delta ~ 1 for a claim of 1e-5). Both are refused; the term grows with epsilon."""
    from userdp.noise.mechanisms import _truncation_delta

    for call in (
        lambda: N.calibrate_gaussian(1.0, 1.0, 1e-18),
        lambda: N.calibrate_gaussian_metric(1.0, 1.0, 1e-18),
        lambda: N.calibrate_gaussian(1.0, 1000.0, 1e-5),
        lambda: N.calibrate_gaussian_metric(1.0, 301.0, 1e-5),
    ):
        with pytest.raises(ParameterError):
            call()
    assert _truncation_delta(300.0, 1) < 1e-70 and _truncation_delta(200.0, 1) > 1e6 * _truncation_delta(0.0, 1)
    # the term covers what the truncation moves, from the definition: the sampler keeps |x| < 32 w, so its law
    # differs from the discrete Gaussian by the tail mass tv = P(|x| >= 32 w) in total variation, which moves an
    # (eps, delta) guarantee by (1 + e^eps) tv per coordinate
    for w in (1, 3, 40):
        k = np.arange(0, 40 * w)
        p = np.exp(-(k.astype(float) ** 2) / (2.0 * w * w))
        tv = 2 * p[32 * w :].sum() / (2 * p.sum() - 1)
        assert 0 < tv < 1e-220
        for eps in (0.0, 1.0, 50.0, 300.0):
            for dim in (1, 7):
                assert dim * (1 + math.exp(eps)) * tv <= _truncation_delta(eps, dim)
    cal = N.calibrate_gaussian(1.0, 300.0, 1e-15)  # the edges of what is accepted still calibrate
    assert cal.delta_at(1.0, 300.0) <= 1e-15


def test_zcdp_bound_keeps_its_precision_at_large_renyi_orders():
    """(a-1) log(a-1) - a log a cancelled to 0 for a above ~1e13, so the minimiser found spurious tiny deltas
    (1.6e-28 at rho = 1e-33, eps = 1e-16, where the exact bound is 5.5e-19): the per-distance curve of the
    Gaussian variant was false at d < 1e-16. The bound must not fall below the exact delta of that Gaussian."""
    from scipy.stats import norm

    from userdp.noise.mechanisms import _zcdp_log_delta_grid

    rho, eps = 1e-33, 1e-16
    mu = math.sqrt(2 * rho)  # a Gaussian of rho-zCDP: shift mu in units of sigma
    # Phi(mu/2 - z) - e^eps Phi(-mu/2 - z), z = eps/mu, to first order in mu and eps (the rest is ~1e-34)
    z = eps / mu
    exact = norm.pdf(z) * mu - eps * norm.cdf(-z)
    assert 1.9e-19 < exact < 2.1e-19
    assert N.zcdp_delta(rho, eps) >= exact
    assert float(np.exp(_zcdp_log_delta_grid(np.array([rho]), np.array([eps])))[0]) >= exact


def test_l2_law_refuses_parameters_whose_sampler_cannot_stop():
    with pytest.raises(ParameterError, match="M >= 2"):
        L2LatticeLaw(4, 1, 4, 1)

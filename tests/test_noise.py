"""Tests of userdp.noise: exact samplers, calibration, floating-point safety, and statistical tests
that accept the right noise scale and reject one 30% off."""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import permutations

import numpy as np
import pytest
from scipy import stats

from userdp.errors import DataError, ParameterError
from userdp.noise import (
    RandomSource,
    add_laplace,
    analytic_gaussian_sigma,
    bernoulli_exp,
    calibrate_gaussian,
    calibrate_knorm,
    calibrate_laplace,
    discrete_gaussian,
    discrete_laplace,
    exponential_mechanism,
    gaussian_delta,
    gaussian_mechanism,
    gaussian_noise,
    knorm_mechanism,
    laplace_mechanism,
    laplace_noise,
    lattice_knorm_noise,
    permute_and_flip,
    resolve_rng,
    sample_cumulative,
)

N = 40_000


# ---------------------------------------------------------------------------------- sources
def test_default_source_is_os_csprng():
    src = resolve_rng(None)
    assert not src.seeded
    assert "urandom" in repr(src)
    a, b = src.words(4), src.words(4)
    assert a.dtype == np.uint64 and not np.array_equal(a, b)


def test_seeded_source_is_reproducible_and_explicit():
    assert np.array_equal(RandomSource(5).words(10), RandomSource(5).words(10))
    assert RandomSource(5).seeded
    assert resolve_rng(np.random.default_rng(1)).seeded
    with pytest.raises(TypeError):
        RandomSource(1.5)
    with pytest.raises(TypeError):
        RandomSource(True)


def test_uniform_integers_are_uniform(rng):
    x = rng.integers(7, size=70_000)
    assert x.min() == 0 and x.max() == 6
    assert stats.chisquare(np.bincount(x, minlength=7)).pvalue > 1e-3
    u = rng.uniform(50_000)
    assert 0 < u.min() and u.max() < 1
    assert stats.kstest(u, "uniform").pvalue > 1e-3


def test_permutation_is_uniform(rng):
    counts = {p: 0 for p in permutations(range(3))}
    for _ in range(6000):
        counts[tuple(rng.permutation(3))] += 1
    assert stats.chisquare(list(counts.values())).pvalue > 1e-3


def test_randbelow_large(rng):
    n = 10**40 + 7
    xs = [rng.randbelow(n) for _ in range(2000)]
    assert all(0 <= x < n for x in xs)
    assert 0.4 < np.mean([x / n for x in xs]) < 0.6


# ---------------------------------------------------------------------------------- exact samplers
def _dlap_pmf(t: float, k: np.ndarray) -> np.ndarray:
    q = math.exp(-1 / t)
    return (1 - q) / (1 + q) * q ** np.abs(k)


def _chi2_pvalue(samples: np.ndarray, pmf) -> float:
    lo, hi = -30, 30
    ks = np.arange(lo, hi + 1)
    obs = np.array([np.sum(samples == k) for k in ks] + [np.sum((samples < lo) | (samples > hi))])
    p = pmf(ks)
    exp = np.concatenate([p, [1 - p.sum()]]) * samples.size
    keep = exp > 5
    obs_k, exp_k = obs[keep], exp[keep]
    exp_k = exp_k * obs_k.sum() / exp_k.sum()
    return stats.chisquare(obs_k, exp_k).pvalue


@pytest.mark.parametrize("t", [1, 3])
def test_discrete_laplace_matches_pmf_and_rejects_wrong_scale(rng, t):
    x = discrete_laplace(t, N, rng)
    assert _chi2_pvalue(x, lambda k: _dlap_pmf(t, k)) > 1e-3
    assert _chi2_pvalue(x, lambda k: _dlap_pmf(1.3 * t, k)) < 1e-6
    assert _chi2_pvalue(x, lambda k: _dlap_pmf(0.7 * t, k)) < 1e-6


@pytest.mark.parametrize("s2", [2, 9])
def test_discrete_gaussian_matches_pmf_and_rejects_wrong_scale(rng, s2):
    x = discrete_gaussian(s2, N, rng)

    def pmf(var):
        ks = np.arange(-200, 201)
        w = np.exp(-(ks**2) / (2 * var))
        w /= w.sum()
        return lambda k: w[k + 200]

    assert _chi2_pvalue(x, pmf(s2)) > 1e-3
    assert _chi2_pvalue(x, pmf(s2 * 1.3**2)) < 1e-6
    assert _chi2_pvalue(x, pmf(s2 * 0.7**2)) < 1e-6


def test_sampler_parameter_ranges():
    with pytest.raises(ParameterError):
        discrete_laplace(0, 3)
    with pytest.raises(ParameterError):
        discrete_gaussian(2**29, 3)


def _ks_laplace(x: np.ndarray, scale: float) -> float:
    return stats.kstest(x, stats.laplace(scale=scale).cdf).pvalue


@pytest.mark.parametrize("scale", [1e-3, 1.0, 250.0])
def test_laplace_noise_scale(rng, scale):
    x = laplace_noise(scale, N, rng)
    assert _ks_laplace(x, scale) > 1e-3
    assert _ks_laplace(x, 1.3 * scale) < 1e-6
    assert _ks_laplace(x, 0.7 * scale) < 1e-6


@pytest.mark.parametrize("sigma", [1e-2, 3.0])
def test_gaussian_noise_scale(rng, sigma):
    x = gaussian_noise(sigma, N, rng)
    assert stats.kstest(x, stats.norm(scale=sigma).cdf).pvalue > 1e-3
    assert stats.kstest(x, stats.norm(scale=1.3 * sigma).cdf).pvalue < 1e-6
    assert stats.kstest(x, stats.norm(scale=0.7 * sigma).cdf).pvalue < 1e-6


# ---------------------------------------------------------------------------------- mechanisms
def test_laplace_mechanism_is_lattice_valued_and_has_calibrated_scale(rng):
    eps, sens = 0.5, 2.0
    cal = calibrate_laplace(sens, eps, dim=N)
    # scale covers the sensitivity plus one lattice step per rounded coordinate, and no more
    assert sens / eps <= cal.scale <= (sens + N * cal.granularity) / eps + cal.granularity
    assert cal.scale <= sens / eps * (1 + 1e-6)
    vals = np.full(N, 10.123456789)
    out = add_laplace(vals, cal, rng)
    lattice = out / cal.granularity
    assert np.all(lattice == np.round(lattice))  # every output is a lattice point
    noise = out - np.round(vals / cal.granularity) * cal.granularity
    assert _ks_laplace(noise, sens / eps) > 1e-3
    assert _ks_laplace(noise, 1.3 * sens / eps) < 1e-6


def test_laplace_lattice_privacy_loss_exact():
    """Exact privacy loss of the lattice Laplace mechanism on worst-case rounding positions: the
    discrete-Laplace log-ratio is |k - k'| / t; it must be <= eps. The naive calibration that ignores
    rounding fails the same check (so this test can fail)."""
    sens, eps, dim = 1.0, 0.9, 3
    cal = calibrate_laplace(sens, eps, dim)
    g = cal.granularity
    # x rounds down in every coordinate, x' = x + sens*e1 shifted so that every coordinate rounds up
    x = np.full(dim, 0.49 * g)
    xp = x + np.array([sens] + [0.0] * (dim - 1)) + np.array([0.0] + [0.02 * g] * (dim - 1))
    assert np.abs(xp - x).sum() <= sens + dim * g  # within sensitivity after rounding
    k = np.rint(x / g)
    kp = np.rint(xp / g)
    shift = int(np.abs(kp - k).sum())
    assert Fraction(shift, cal.t) <= Fraction(eps)
    naive_t = math.ceil(sens / g / eps)
    worst = math.ceil(sens / g) + dim  # rounding can add one lattice step per coordinate
    assert Fraction(worst, naive_t) > Fraction(eps)


def test_laplace_mechanism_refuses_bad_input():
    with pytest.raises(DataError):  # the values are data
        laplace_mechanism([1.0, np.nan], 1.0, 1.0)
    with pytest.raises(DataError):
        laplace_mechanism([1.0, np.inf], 1.0, 1.0)
    with pytest.raises(ParameterError):
        laplace_mechanism([1.0], 1.0, 0.0)
    with pytest.raises(ParameterError):
        laplace_mechanism([1.0], -1.0, 1.0)
    with pytest.raises(ParameterError):
        add_laplace(np.zeros(3), calibrate_laplace(1.0, 1.0, dim=2))


def test_huge_values_do_not_overflow(rng):
    out = laplace_mechanism(np.array([1e30, -1e30]), 1.0, 1.0, rng)
    assert np.allclose(out, [1e30, -1e30], rtol=1e-12)


def test_analytic_gaussian():
    for eps, delta in [(0.5, 1e-6), (1.0, 1e-5), (8.0, 1e-9)]:
        s = analytic_gaussian_sigma(1.0, eps, delta)
        assert gaussian_delta(s, 1.0, eps) <= delta * (1 + 1e-9)
        assert gaussian_delta(s * 0.99, 1.0, eps) > delta
    # the classical formula is valid (and looser) for eps < 1
    classical = math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5
    assert analytic_gaussian_sigma(1.0, 0.5, 1e-5) < classical
    with pytest.raises(ParameterError):
        analytic_gaussian_sigma(1.0, 1.0, 0.0)


def test_gaussian_mechanism_calibration(rng):
    cal = calibrate_gaussian(1.0, 1.0, 1e-6, dim=N)
    assert cal.sigma >= analytic_gaussian_sigma(1.0 + cal.granularity * math.sqrt(N), 1.0, 1e-6)
    assert cal.delta_at(1.0, 1.0) <= 1e-6  # zCDP accounting of the discrete Gaussian, rounding included
    out = gaussian_mechanism(np.zeros(N), 1.0, 1.0, 1e-6, rng)
    assert stats.kstest(out, stats.norm(scale=cal.sigma).cdf).pvalue > 1e-3
    assert stats.kstest(out, stats.norm(scale=1.3 * cal.sigma).cdf).pvalue < 1e-6


@pytest.mark.parametrize("norm,d", [("l2", 5), ("l1", 5), ("l2", 1)])
def test_knorm_radius_distribution(rng, norm, d):
    """Under density exp(-||z||_K / scale), ||z||_K ~ Gamma(d, scale): the lattice K-norm noise at the
    calibrated scale follows it (l1: exactly a discrete Laplace per coordinate; l2: to within kappa < 1.002);
    a scale 30% off is rejected."""
    cal = calibrate_knorm(1.0, 0.5, norm, d)
    z = lattice_knorm_noise(cal, 20_000, rng) * cal.granularity
    r = np.linalg.norm(z, ord={"l1": 1, "l2": 2}[norm], axis=1)
    scale = cal.scale
    assert stats.kstest(r, stats.gamma(d, scale=scale).cdf).pvalue > 1e-3
    assert stats.kstest(r, stats.gamma(d, scale=1.3 * scale).cdf).pvalue < 1e-6
    assert stats.kstest(r, stats.gamma(d, scale=0.7 * scale).cdf).pvalue < 1e-6
    assert np.all(np.abs(z.mean(axis=0)) < 0.15 * scale * math.sqrt(d))


def test_l2_direction_uniform(rng):
    cal = calibrate_knorm(1.0, 1.0, "l2", 3)
    z = lattice_knorm_noise(cal, 20_000, rng).astype(float)
    u = z / np.linalg.norm(z, axis=1, keepdims=True)
    # on S^2 each coordinate of a uniform direction is uniform on [-1, 1] (Archimedes)
    assert stats.kstest(u[:, 0], stats.uniform(-1, 2).cdf).pvalue > 1e-3


def test_knorm_mechanism_lattice_and_calibration(rng):
    cal = calibrate_knorm(1.0, 2.0, "l2", 4)
    assert cal.scale >= 0.5 and cal.epsilon_realized <= 2.0
    out = knorm_mechanism(np.ones((100, 4)), 1.0, 2.0, "l2", rng)
    assert out.shape == (100, 4)
    assert np.all(out / cal.granularity == np.round(out / cal.granularity))
    with pytest.raises(ParameterError):
        knorm_mechanism(np.ones(3), 1.0, 1.0, "l3")


# ---------------------------------------------------------------------------------- selection
def test_bernoulli_exp_exact(rng):
    for g in (Fraction(3, 10), Fraction(17, 10)):
        hits = sum(bernoulli_exp(g, rng) for _ in range(20_000))
        p = math.exp(-float(g))
        assert stats.binomtest(hits, 20_000, p).pvalue > 1e-3
        assert stats.binomtest(hits, 20_000, math.exp(-1.3 * float(g))).pvalue < 1e-6


def test_exponential_mechanism_distribution(rng):
    scores = [0.0, 1.0, 2.5]
    eps, sens = 1.2, 1.0
    p = np.exp(eps * np.array(scores) / (2 * sens))
    p /= p.sum()
    draws = np.bincount([exponential_mechanism(scores, sens, eps, rng) for _ in range(12_000)], minlength=3)
    assert stats.chisquare(draws, p * draws.sum()).pvalue > 1e-3
    wrong = np.exp(1.3 * eps * np.array(scores) / (2 * sens))
    wrong /= wrong.sum()
    assert stats.chisquare(draws, wrong * draws.sum()).pvalue < 1e-6


def test_permute_and_flip_distribution(rng):
    scores = [0.0, 1.0, 2.0]
    eps, sens = 1.0, 1.0
    acc = np.exp(eps * (np.array(scores) - max(scores)) / (2 * sens))
    exact = np.zeros(3)
    for perm in permutations(range(3)):
        stay = 1.0
        for i in perm:
            exact[i] += stay * acc[i] / 6
            stay *= 1 - acc[i]
    draws = np.bincount([permute_and_flip(scores, sens, eps, rng) for _ in range(12_000)], minlength=3)
    assert stats.chisquare(draws, exact * draws.sum()).pvalue > 1e-3


def test_selection_refuses_bad_scores():
    with pytest.raises(ParameterError):
        exponential_mechanism([], 1.0, 1.0)
    with pytest.raises(ParameterError):
        permute_and_flip([1.0, np.nan], 1.0, 1.0)


def test_sample_cumulative_exact(rng):
    cum = np.array([[1, 3, 6], [5, 5, 6]])
    rows = np.repeat([0, 1], 30_000)
    y = sample_cumulative(cum, rows, rng)
    c0 = np.bincount(y[:30_000], minlength=3)
    c1 = np.bincount(y[30_000:], minlength=3)
    assert stats.chisquare(c0, np.array([1, 2, 3]) / 6 * 30_000).pvalue > 1e-3
    assert c1[1] == 0
    assert stats.chisquare(c1[[0, 2]], np.array([5, 1]) / 6 * 30_000).pvalue > 1e-3


# --------------------------------------------------------------------------------------------
# The auditor on the noise module's mechanisms
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("select", [exponential_mechanism, permute_and_flip])
def test_audit_selection_mechanisms(select, rng):
    """Scores of sensitivity 1 (each score moves by at most 1): the worst of the candidate pairs stays within
    (eps, 0); run at 2 eps while claiming eps (sensitivity off by 2x), it is refuted."""
    from userdp.audit import NeighbourPair, audit_search

    eps = 1.0
    pairs = [
        NeighbourPair("one candidate up, the others down", [0.0, 1.0, 1.0], [1.0, 0.0, 0.0]),
        NeighbourPair("leader up", [2.0, 1.0, 0.0], [3.0, 1.0, 0.0]),
        NeighbourPair("tie broken", [1.0, 1.0, 1.0], [0.0, 1.0, 1.0]),
    ]

    def sampler(e):
        return lambda scores, k: np.array([select(scores, 1.0, e, rng) for _ in range(k)], dtype=float)

    assert audit_search(sampler(eps), pairs, lambda d: (eps, 0.0), n=15_000, n_pilot=1500).passed
    assert not audit_search(sampler(2 * eps), pairs, lambda d: (eps, 0.0), n=15_000, n_pilot=1500).passed


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian", "knorm_l1", "knorm_l2"])
def test_audit_lattice_mechanisms(mechanism, rng, monkeypatch):
    """laplace_mechanism, gaussian_mechanism and knorm_mechanism as releases of a 2-vector with the stated
    sensitivity: every pair at that sensitivity passes its claim; with the library's calibration given half
    the sensitivity (broken variant), the worst pair refutes it."""
    import userdp.noise as noise_module
    from userdp.audit import NeighbourPair, audit_search

    pairs = [
        NeighbourPair("l1 move on one coordinate", np.zeros(2), np.array([1.0, 0.0])),
        NeighbourPair("l1 move split", np.zeros(2), np.array([0.5, -0.5])),
    ]
    eps, delta, n = 1.0, 1e-3, 20_000

    def knorm(norm):
        return lambda x, k: knorm_mechanism(np.tile(x, (k, 1)), 1.0, eps, norm, rng)

    sample, claim, calibration = {
        "laplace": (
            lambda x, k: laplace_mechanism(np.tile(x, (k, 1)).ravel(), 1.0, eps, rng).reshape(k, 2),
            (eps, 0.0),
            "calibrate_laplace",
        ),
        "gaussian": (
            lambda x, k: gaussian_mechanism(np.tile(x, (k, 1)).ravel(), 1.0, eps, delta, rng).reshape(k, 2),
            (eps, delta),
            "calibrate_gaussian",
        ),
        "knorm_l1": (knorm("l1"), (eps, 0.0), "calibrate_knorm"),
        "knorm_l2": (knorm("l2"), (eps, 0.0), "calibrate_knorm"),
    }[mechanism]
    assert audit_search(sample, pairs, lambda d: claim, n=n, n_pilot=2000).passed
    module = noise_module.knorm if calibration == "calibrate_knorm" else noise_module.mechanisms  # its caller's
    real = getattr(module, calibration)
    monkeypatch.setattr(module, calibration, lambda sens, *a, **k: real(sens / 2, *a, **k))
    assert not audit_search(sample, pairs, lambda d: claim, n=n, n_pilot=2000).passed


def test_exponential_mechanism_work_does_not_depend_on_scores(monkeypatch):
    """The exponential mechanism inverts its CDF: m interval exponentials and 4 words (a 256-bit uniform)
    whatever the scores -- the old rejection sampler's proposal count grew with the score gaps, a timing
    side channel. Extreme gaps (exp(-10^6)) are handled exactly (the best candidate wins)."""
    import userdp.noise as noise_module

    calls = []
    real = noise_module.selection._exp_interval
    monkeypatch.setattr(noise_module.selection, "_exp_interval", lambda *a: calls.append(1) or real(*a))

    class Counting(RandomSource):
        used = 0

        def words(self, n):
            Counting.used += int(n)
            return super().words(n)

    for scores in ([0.0, 0.0, 0.0, 0.0], [0.0, 5.0, 10.0, 40.0], [0.0, 1e6, 0.0, 0.0]):
        calls.clear()
        Counting.used = 0
        src = Counting(3)
        picks = [exponential_mechanism(scores, 1.0, 2.0, src) for _ in range(50)]
        assert len(calls) == 50 * 4 and Counting.used == 50 * 4
        if scores[1] == 1e6:
            assert set(picks) == {1}


def test_exponential_mechanism_ignores_the_thread_decimal_context():
    """The interval exponentials must not depend on the caller's decimal context: under a 3-digit thread
    context, unary minus once rounded gamma, so the 'rigorous' interval missed exp(-gamma) and the
    mechanism's law moved. The bounds must bracket exp(-gamma) whatever the context, and the sampled index
    for a fixed uniform must not change."""
    from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal, localcontext
    from fractions import Fraction

    import userdp.noise.selection as sel

    gamma = Fraction(1, 3) * Fraction(10**6 + 1, 10**6)
    ref = Context(prec=120)
    true = ref.exp(ref.divide(-Decimal(gamma.numerator), Decimal(gamma.denominator)))
    for prec in (28, 3, 1):
        with localcontext() as c:
            c.prec = prec
            lo, hi = sel._exp_interval(gamma, sel._context(60, ROUND_FLOOR), sel._context(60, ROUND_CEILING))
        assert lo <= true <= hi, prec

    class Fixed(RandomSource):
        def __init__(self, u):
            super().__init__(0)
            self.u = u

        def randbelow(self, n):
            u, self.u = self.u, 0
            return u

    scores, eps = [0.0, 1.0], 2.0 * 0.123456789
    boundary = []
    for prec in (28, 2):
        lo_u, hi_u = 0, 1 << 256
        with localcontext() as c:
            c.prec = prec
            while hi_u - lo_u > 1:
                mid = (lo_u + hi_u) // 2
                lo_u, hi_u = (mid, hi_u) if exponential_mechanism(scores, 1.0, eps, Fixed(mid)) == 0 else (lo_u, mid)
        boundary.append(hi_u)
    assert boundary[0] == boundary[1]

"""Exact checks of the lattice samplers as implemented (issue 13, findings 1 and 2).

For each metric-DP mechanism the output law of the *algorithm the sampler runs* is enumerated on small
lattices (its integer steps, its normalising constants, randomized rounding), the library's compiled
sampler is shown to follow that law (chi-square, also through the Python-integer path), and the exact
privacy loss of neighbouring inputs -- including inputs a tiny distance apart -- is compared with the
claim. Each check has a broken variant (a change to the library) that it catches.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

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


def _rho(law: L2LatticeLaw, pts: np.ndarray) -> np.ndarray:
    """``ceil(s sqrt(|z|^2 + c^2))`` for small integer points, vectorized and exact (float root, then
    integer correction)."""
    n = law.s**2 * ((pts.astype(np.int64) ** 2).sum(axis=1) + law.c**2)
    r = np.floor(np.sqrt(n.astype(float))).astype(np.int64)
    r -= r * r > n
    r += (r + 1) * (r + 1) <= n
    return r + (r * r < n)


def l2_law_table(law: L2LatticeLaw, radius: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact (unnormalised) law of :meth:`L2LatticeLaw.sample` on the box ``[-radius, radius]^dim``.

    The sampler's accepted pairs have ``P(j, z) ∝ exp(-j / tau) psi_j 1[rho(z) <= j]`` with
    ``psi_j = (w_j sqrt(2 pi) / Theta_32(w_j))^dim``, ``Theta_32`` the truncated discrete Gaussian's
    normaliser (see the class docstring), so ``P(z) ∝ G(rho(z))`` with ``G(r) = sum_{j >= r} e^{-j/tau} psi_j``.
    Returns the box's points and their unnormalised probabilities, scaled so that ``G(j_min) = 1``."""
    axes = [np.arange(-radius, radius + 1)] * law.dim
    pts = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, law.dim)
    rho = _rho(law, pts)
    j_hi = int(rho.max()) + 80 * law.tau
    js = np.arange(law.j_min, j_hi + 1)
    ws = -(-js // law.A)
    theta = {}
    for w in np.unique(ws):
        k = np.arange(-32 * int(w) + 1, 32 * int(w))
        theta[int(w)] = np.exp(-(k.astype(float) ** 2) / (2.0 * float(w) ** 2)).sum()
    psi = np.array([(w * math.sqrt(2 * math.pi) / theta[int(w)]) ** law.dim for w in ws])
    terms = np.exp(-(js - law.j_min) / law.tau) * psi
    G = np.cumsum(terms[::-1])[::-1]  # G[r - j_min] = sum_{j >= r}
    return pts, G[rho - law.j_min]


def l2_law_total(law: L2LatticeLaw, power: int = 0) -> float:
    """``sum_z |z|^(2 power) G(rho(z))`` over all of ``Z^dim`` (same scaling as :func:`l2_law_table`; power 0
    is the total mass): ``sum_j e^{-(j - j_min)/tau} psi_j S(Q_j)`` with ``S(Q)`` the sum of ``|z|^(2 power)``
    over lattice points with ``|z|^2 <= Q``, counted exactly by convolving the squares."""
    j_hi = law.j_min + law.tau * (law.dim + 45)  # Gamma(dim) tail beyond: < e^-40
    q_max = law.ball(j_hi)
    r = math.isqrt(q_max)
    one = np.zeros(q_max + 1)
    sq = np.arange(-r, r + 1) ** 2
    np.add.at(one, sq, 1.0)
    counts = one.copy()
    for _ in range(law.dim - 1):
        nxt = np.zeros(q_max + 1)
        for a2, mult in zip(*np.unique(sq, return_counts=True), strict=True):
            nxt[a2:] += mult * counts[: q_max + 1 - a2]
        counts = nxt
    cum = np.cumsum(counts * np.arange(q_max + 1, dtype=float) ** power)
    js = np.arange(law.j_min, j_hi + 1)
    Q = js * js // (law.s * law.s) - law.c * law.c
    ws = -(-js // law.A)
    theta = {}
    for w in np.unique(ws):
        k = np.arange(-32 * int(w) + 1, 32 * int(w))
        theta[int(w)] = np.exp(-(k.astype(float) ** 2) / (2.0 * float(w) ** 2)).sum()
    psi = np.array([(w * math.sqrt(2 * math.pi) / theta[int(w)]) ** law.dim for w in ws])
    return float((np.exp(-(js - law.j_min) / law.tau) * psi * cum[np.maximum(Q, 0)] * (Q >= 0)).sum())


def rr_law(table: dict, dim: int, x: np.ndarray, box: int) -> dict:
    """Exact output law of ``randomized_round(x) + Z`` for ``Z`` with the law ``table`` (dict point -> p):
    multilinear interpolation of the noise law over the unit cube at ``x``."""
    a = np.floor(x).astype(np.int64)
    f = x - a
    out: dict = {}
    for bits in range(2**dim):
        b = np.array([(bits >> i) & 1 for i in range(dim)])
        wb = float(np.prod(np.where(b == 1, f, 1 - f)))
        if wb == 0:
            continue
        shift = a + b
        for z, p in table.items():
            y = tuple(np.add(z, shift))
            if max(abs(v) for v in y) <= box:
                out[y] = out.get(y, 0.0) + wb * p
    return out


# Float evaluation of two laws a distance 1e-9 apart leaves an absolute error of about 1e-14 in their
# log-ratio; the checks allow 1e-12 on top of the claim.
FLOAT_SLACK = 1e-12


def max_loss(P: dict, Q: dict) -> tuple[float, int]:
    keys = set(P) & set(Q)
    zero = sum(1 for k in set(P) | set(Q) if P.get(k, 0.0) == 0.0 or Q.get(k, 0.0) == 0.0)
    return max(abs(math.log(P[k]) - math.log(Q[k])) for k in keys), zero


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
    """The chi-square check has power: the same draws against the law with T 30% larger fail."""
    draws = SMALL_2D.sample(60_000, RandomSource(12))
    wrong = L2LatticeLaw(2, round(SMALL_2D.T * 1.3), s=SMALL_2D.s, c=SMALL_2D.c)
    assert _chi2_law(wrong, draws, 30) < 1e-6


def _loss_check(law: L2LatticeLaw, pairs, box: int, radius: int) -> float:
    """max over pairs of (exact max log-ratio) / (claimed loss kappa |x - x'| / T); also asserts that no
    output in the box has probability zero under either input."""
    pts, p = l2_law_table(law, radius)
    table = {tuple(q): v for q, v in zip(pts, p, strict=True)}
    worst = 0.0
    for x, xp in pairs:
        x, xp = np.asarray(x, float), np.asarray(xp, float)
        P, Q = rr_law(table, law.dim, x, box), rr_law(table, law.dim, xp, box)
        loss, zero = max_loss(P, Q)
        assert zero == 0, "an output is reachable from one input and not from the other"
        claim = law.kappa() * np.linalg.norm(x - xp) / law.T
        worst = max(worst, (loss - FLOAT_SLACK) / claim)
    return worst


PAIRS_2D = [
    ((0.5, 0.5), (0.5 + 1e-6, 0.5 + 1e-6)),  # tiny diagonal move at the origin's cell
    ((0.0, 0.0), (1e-6, 1e-6)),
    ((0.999999, 0.0), (1.000001, 0.0)),  # across a lattice line
    ((0.3, -0.2), (0.8, 0.6)),
    ((0.0, 0.0), (3.0, 0.0)),
    ((2.5, 2.5), (2.5, 7.5)),
]


def test_l2_mechanism_exact_loss_within_claim_at_every_distance():
    """Randomized rounding + the l2 lattice law: every output in the box is reachable from every input
    and the exact log-ratio is within ``kappa |x - x'| / T`` -- including at distance 1.4e-6."""
    ratio = _loss_check(SMALL_2D, PAIRS_2D, box=10, radius=20)
    assert ratio <= 1.0
    assert ratio > 0.5  # the claim is not vacuous


def test_l2_loss_check_catches_the_ideal_claim(monkeypatch):
    """Broken variant: the library claiming the ideal factor (kappa = 1, no smoothing or ceil terms) is
    refuted by the same exact check."""
    monkeypatch.setattr(L2LatticeLaw, "kappa", lambda self: 1.0)
    assert _loss_check(SMALL_2D, PAIRS_2D, box=10, radius=20) > 1.0


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
        return N._bern_dyadic(np.array(words, dtype=np.uint64), st, np.int64(M), np.int64(E))

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


def test_l1_mechanism_exact_loss_at_every_distance():
    """Randomized rounding + discrete Laplace (the l1 K-norm, and every 1-D K-norm): exact log-ratio
    within ``expm1(1/t) |x - x'|`` lattice units at distances from 1e-9 to 5, no unreachable output."""
    t = 4
    ys = np.arange(-200, 201)
    table = {(int(y),): math.exp(-abs(y) / t) for y in ys}
    worst = 0.0
    for x, xp in [(0.5, 0.5 + 1e-9), (0.0, 1e-7), (0.9999, 1.0001), (0.2, 0.7), (0.0, 5.0)]:
        P = rr_law(table, 1, np.array([x]), 150)
        Q = rr_law(table, 1, np.array([xp]), 150)
        loss, zero = max_loss(P, Q)
        assert zero == 0
        worst = max(worst, (loss - FLOAT_SLACK) / (math.expm1(1 / t) * abs(x - xp)))
    assert 0.9 < worst <= 1


def test_knorm_mechanism_follows_the_l1_law():
    """The library path (``knorm_mechanism``, l1): the released lattice points for one input follow the
    interpolated discrete-Laplace law with the calibrated ``t``; a scale 30% off is rejected."""
    rng = RandomSource(7)
    cal = calibrate_knorm(1.0, 1.0, "l1", 1)
    g, t = cal.granularity, cal.t
    x = 0.3 * g + 5 * g
    y = np.round(knorm_mechanism(np.full((40_000, 1), x), 1.0, 1.0, "l1", rng)[:, 0] / g).astype(np.int64) - 5
    ks = stats.laplace(scale=t * g).cdf  # continuous check of the scale on the value scale
    assert stats.kstest(y * g, ks).pvalue > 1e-3
    assert stats.kstest(y * g, stats.laplace(scale=1.3 * t * g).cdf).pvalue < 1e-6


def _small_l2_mechanism(monkeypatch) -> L2LatticeLaw:
    """Make the library calibrate a small l2 law (T about 12, s = 8, c = 1) so its end-to-end law can be
    enumerated; returns that law."""
    monkeypatch.setattr(N, "_L2_BITS", 3)
    monkeypatch.setattr(N, "_S_BITS", 3)
    monkeypatch.setattr(N, "_SMOOTH", 1)
    law = calibrate_knorm(1.0, 1.0, "l2", 2).law
    assert (law.s, law.c) == (8, 1) and 8 <= law.T <= 20
    return law


def _mechanism_draws(monkeypatch, x_steps: float, n: int = 200_000) -> tuple[np.ndarray, dict]:
    """``n`` releases of ``knorm_mechanism`` (l2, the small calibration) at ``x_steps`` lattice steps from 0
    on the first axis, in lattice units, and the exact law of randomized rounding + the lattice law."""
    law = _small_l2_mechanism(monkeypatch)
    cal = calibrate_knorm(1.0, 1.0, "l2", 2)
    g = cal.granularity
    pts, p = l2_law_table(law, 40)
    table = {tuple(q): v for q, v in zip(pts, p, strict=True) if max(map(abs, q)) <= 40}
    x = np.array([x_steps, 0.0])
    out = knorm_mechanism(np.tile(x * g, (n, 1)), 1.0, 1.0, "l2", RandomSource(31))
    return np.round(out / g).astype(np.int64), rr_law(table, 2, x, 30)


def test_knorm_mechanism_end_to_end_law(monkeypatch):
    """The library path (``knorm_mechanism``: randomized rounding, then the sampler) follows the enumerated
    law of the mechanism at an input half a lattice step from the lattice, and its mean is the input."""
    y, P = _mechanism_draws(monkeypatch, 0.5)
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


def test_knorm_mechanism_nearest_rounding_is_caught(monkeypatch):
    """Broken variant: the library rounding to the nearest lattice point (as the old code did) releases
    around 1 instead of 0.5 -- the mean test of the end-to-end check fails."""
    monkeypatch.setattr(N, "randomized_round", lambda x, rng=None: np.floor(np.asarray(x) + 0.5).astype(np.int64))
    y, _ = _mechanism_draws(monkeypatch, 0.5)
    assert abs(y[:, 0].mean() - 0.5) > 4 * y[:, 0].std() / math.sqrt(y.shape[0])


def test_knorm_calibration_realizes_the_request():
    for norm, dim in [("l1", 3), ("l2", 1), ("l2", 2), ("l2", 50)]:
        cal = calibrate_knorm(0.7, 1.3, norm, dim)
        assert isinstance(cal, KNormCalibration)
        assert cal.epsilon_realized <= 1.3
        assert cal.epsilon_realized > 1.3 * (1 - 1e-4)
        assert cal.scale >= 0.7 / 1.3
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
        assert stats.kstest(r, stats.gamma(dim, scale=cal.scale).cdf).pvalue > 1e-3
        assert stats.kstest(r, stats.gamma(dim, scale=1.3 * cal.scale).cdf).pvalue < 1e-6
        u = z / r[:, None]
        if dim == 2:  # uniform angle
            assert stats.kstest(np.arctan2(u[:, 1], u[:, 0]), stats.uniform(-math.pi, 2 * math.pi).cdf).pvalue > 1e-3


# ---------------------------------------------------------------------------------- Gaussian


def _dgauss_pmf(w: int) -> tuple[np.ndarray, np.ndarray]:
    k = np.arange(-32 * w + 1, 32 * w)
    p = np.exp(-(k.astype(float) ** 2) / (2.0 * w * w))
    return k, p / p.sum()


def test_discrete_gaussian_square_kernel_matches_its_law():
    """The wide-range discrete Gaussian (variance w^2, the split acceptance exp(-q^2/2) exp(-qr/w)
    exp(-r^2/(2w^2))) follows the truncated discrete Gaussian; 30% off is rejected."""
    rng = RandomSource(21)
    for w in (3, 40):
        x = discrete_gaussian(w * w, 60_000, rng)
        k, p = _dgauss_pmf(w)
        counts = np.array([np.sum(x == v) for v in k])
        keep = p * x.size > 5
        assert stats.chisquare(counts[keep], p[keep] / p[keep].sum() * counts[keep].sum()).pvalue > 1e-3
        _, q = _dgauss_pmf(round(1.3 * w))
        k2 = np.arange(-32 * round(1.3 * w) + 1, 32 * round(1.3 * w))
        q = np.interp(k, k2, q)
        assert stats.chisquare(counts[keep], q[keep] / q[keep].sum() * counts[keep].sum()).pvalue < 1e-6
    big = discrete_gaussian((2**54) ** 2, 50_000, rng).astype(float) / 2**54
    assert stats.kstest(big, stats.norm.cdf).pvalue > 1e-3
    assert stats.kstest(big, stats.norm(scale=1.3).cdf).pvalue < 1e-6


def _lattice_gaussian_delta(w: int, shift: int, eps: float) -> float:
    k, p = _dgauss_pmf(w)
    P = dict(zip(k.tolist(), p, strict=True))
    Q = {v + shift: pr for v, pr in P.items()}
    keys = set(P) | set(Q)
    e = math.exp(eps)
    return max(
        sum(max(P.get(y, 0) - e * Q.get(y, 0), 0) for y in keys),
        sum(max(Q.get(y, 0) - e * P.get(y, 0), 0) for y in keys),
    )


def test_gaussian_lattice_delta_at_tiny_distances(monkeypatch):
    """Deterministic rounding moves two inputs 2e-9 apart by a whole lattice step when they straddle a
    rounding boundary. On a coarse lattice (sigma/g about 2^3, monkeypatched) the exact hockey-stick is
    ~0.03 at epsilon ~ 0: the calibration's ``delta_at`` covers it, the old claim (the Gaussian delta at the
    true distance) does not. The exact discrete delta also exceeds the *continuous* Gaussian's delta at one
    lattice step, which is why userdp accounts for the discrete Gaussian by zCDP. At the real lattice
    (sigma/g >= 2^54) the rounding term is below 1e-15."""
    monkeypatch.setattr(N, "_GAUSS_BITS", 3)
    cal = calibrate_gaussian(1.0, 1.0, 1e-3, dim=1)
    for eps in (1e-9, 0.05, 0.2):
        exact = _lattice_gaussian_delta(cal.w, 1, eps)
        assert exact <= cal.delta_at(2e-9, eps)
    exact = _lattice_gaussian_delta(cal.w, 1, 1e-9)
    assert exact > 1000 * N.gaussian_delta(cal.sigma, 2e-9, 1e-9)
    assert exact > N.gaussian_delta(cal.sigma, cal.granularity, 1e-9)  # discrete > continuous here
    for shift in (2, 4, 8):  # and at whole lattice distances with epsilon = 1 x distance
        d = shift * cal.granularity
        assert _lattice_gaussian_delta(cal.w, shift, d) <= cal.delta_at(d - cal.granularity, d)
    monkeypatch.setattr(N, "_GAUSS_BITS", 54)
    real = calibrate_gaussian(1.0, 1.0, 1e-6, dim=50)
    assert real.delta_at(0.0, 0.0) < 1e-15
    assert real.delta_at(1.0, 1.0) <= 1e-6


def test_gaussian_broken_rounding_term_is_caught(monkeypatch):
    """Broken variant: if ``GaussianCalibration.rounding`` is dropped, ``delta_at`` no longer covers the
    exact divergence of straddling inputs on a coarse lattice."""
    monkeypatch.setattr(N, "_GAUSS_BITS", 3)
    monkeypatch.setattr(N.GaussianCalibration, "rounding", property(lambda self: 0.0))
    cal = calibrate_gaussian(1.0, 1.0, 1e-3, dim=1)
    assert _lattice_gaussian_delta(cal.w, 1, 1e-9) > cal.delta_at(2e-9, 1e-9)


def test_gaussian_broken_accounting_is_caught(monkeypatch):
    """Broken variant: accounting for the discrete Gaussian with the continuous Gaussian's exact delta
    (the previous calibration) under-reports the exact discrete delta at one lattice step."""
    monkeypatch.setattr(N, "_GAUSS_BITS", 3)
    cal = calibrate_gaussian(1.0, 1.0, 1e-3, dim=1)
    def continuous(rho, eps):
        return N.gaussian_delta(cal.sigma, math.sqrt(2 * rho) * cal.sigma, eps)

    monkeypatch.setattr(N, "zcdp_delta", continuous)
    assert _lattice_gaussian_delta(cal.w, 1, 1e-9) > cal.delta_at(0.0, 1e-9)


def test_metric_gaussian_holds_at_every_distance():
    """The Gaussian variant's calibration: the rigorous sup over d of delta(d) is within delta, and the
    exact zCDP bound at a few distances (tiny to 1) is too."""
    ell, alpha, delta = 1.0, 25.0, 1e-6
    cal = N.calibrate_gaussian_metric(ell, alpha, delta, dim=2)
    assert N.metric_gaussian_sup_delta(cal, ell, alpha) <= delta
    for d in (1e-12, 1e-6, 1e-3, 0.1, 0.5, 1.0):
        assert cal.delta_at(ell * d, alpha * d) <= delta

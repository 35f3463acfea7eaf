"""PrivEMDLinear (Algorithm 1, Theorem 4.1, Lemma 4.2) and the linear-query baselines."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from userdp.data import FiniteDomain, UserDataset
from userdp.dem import embedding_lipschitz, linear_baseline, lipschitz_constant, priv_emd_linear
from userdp.dem.linear import gaussian_delta_at_distance
from userdp.errors import DataError, ParameterError
from userdp.metrics import ClusteredMetric, FiniteMetric, emd_datasets
from userdp.noise import calibrate_gaussian_metric, metric_gaussian_sup_delta
from userdp.privacy import Model


def _space_and_f(seed: int, k: int = 8, d: int = 3):
    rng = np.random.default_rng(seed)
    pts = rng.random((k, 2))
    D = np.linalg.norm(pts[:, None] - pts[None], axis=2)
    space = FiniteMetric(D, scale=math.sqrt(2))
    F = rng.normal(size=(k, d))
    return space, F


def test_lipschitz_constant_brute_force():
    space, F = _space_and_f(0)
    D = space.full_matrix()
    brute = max(np.linalg.norm(F[i] - F[j]) / D[i, j] for i in range(8) for j in range(8) if i != j)
    assert lipschitz_constant(F, space) == pytest.approx(brute, rel=1e-9)
    assert lipschitz_constant(F, space, norm="l1", chunk=3) == pytest.approx(
        max(np.abs(F[i] - F[j]).sum() / D[i, j] for i in range(8) for j in range(8) if i != j), rel=1e-9
    )
    with pytest.raises(DataError):
        lipschitz_constant(F[:5], space)


def test_embedding_bound_dominates():
    rng = np.random.default_rng(1)
    phi = rng.normal(size=(30, 6))
    Fq = rng.normal(size=(4, 6))
    Fq /= np.linalg.norm(Fq, axis=1, keepdims=True)
    D = np.linalg.norm(phi[:, None] - phi[None], axis=2)
    space = FiniteMetric(D, scale=D.max(), check=False)
    ell = lipschitz_constant(phi @ Fq.T, space)
    assert ell <= embedding_lipschitz(Fq) * D.max() + 1e-9  # ||F||_2 in raw units, times the scale
    assert embedding_lipschitz(Fq) <= math.sqrt(4) + 1e-12


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 6), st.integers(1, 6))
def test_theorem_4_1_sensitivity(seed, m1, m2):
    """||q_f(K) - q_f(K')|| <= l d_EM(K~, K~') for datasets of any sizes."""
    space, F = _space_and_f(seed % 50)
    ell = lipschitz_constant(F, space)
    rng = np.random.default_rng(seed)
    K, Kp = rng.integers(0, 8, m1), rng.integers(0, 8, m2)
    diff = np.linalg.norm(F[K].mean(0) - F[Kp].mean(0))
    assert diff <= ell * emd_datasets(K, Kp, space) + 1e-9


def _ds(n=400, m=5, k=8, seed=0):
    rng = np.random.default_rng(seed)
    items = rng.integers(0, k, n * m)
    return UserDataset(np.arange(n + 1) * m, items, None, FiniteDomain(np.arange(k)))


@pytest.mark.parametrize("model", ["local", "central"])
def test_priv_emd_linear_noise_scale(rng, model):
    """The noise is l2 K-norm of scale l/alpha (local) or l/(alpha n) (central): its norm is
    Gamma(d, scale); a 30% wrong scale is rejected."""
    space, F = _space_and_f(2)
    ds = _ds()
    ell = lipschitz_constant(F, space)
    alpha = 3.0
    truth_user = F[ds.items].reshape(ds.n_users, 5, 3).mean(1)
    if model == "local":
        rel = priv_emd_linear(ds, ell, alpha, f_values=F, model=model, rng=rng)
        noise = rel.extras["per_user"] - truth_user
        scale = ell / alpha
        assert rel.guarantee.alpha == alpha and not rel.guarantee.bounded  # unbounded local (Lemma 4.2)
    else:
        noise = np.array(
            [
                priv_emd_linear(ds, ell, alpha, f_values=F, model=model, rng=rng).value - truth_user.mean(0)
                for _ in range(800)
            ]
        )
        scale = ell / (alpha * ds.n_users)
        assert priv_emd_linear(ds, ell, alpha, f_values=F, model=model, rng=rng).guarantee.bounded
    r = np.linalg.norm(noise, axis=1)
    assert stats.kstest(r, stats.gamma(3, scale=scale).cdf).pvalue > 1e-3
    assert stats.kstest(r, stats.gamma(3, scale=1.3 * scale).cdf).pvalue < 1e-6


def test_gaussian_variant_delta_holds_at_every_distance():
    """The per-distance guarantee (alpha d, delta) at every d_EM = d in [0, 1], including distances below a
    lattice step: the rigorous sup over d is within delta, and so is the bound at sampled distances."""
    for alpha, delta, dim in [(0.5, 1e-6, 1), (5.0, 1e-9, 3), (25.0, 1e-12, 2), (100.0, 1e-6, 8)]:
        cal = calibrate_gaussian_metric(1.0, alpha, delta, dim)
        assert metric_gaussian_sup_delta(cal, 1.0, alpha) <= delta
        ds_ = [gaussian_delta_at_distance(cal, 1.0, alpha, d) for d in np.geomspace(1e-12, 1.0, 200)]
        assert max(ds_) <= delta


def test_gaussian_variant_curve_is_the_release_s(rng, monkeypatch):
    """The release's per-distance claim ``(alpha d, delta(d))`` against the sigma it handed its sampler (read
    off the call of ``add_gaussian``, not off the release's params or a calibration recomputed here): at every
    ``d`` the claim is at most ``delta`` and never below the exact Gaussian profile at distance ``l d / n``
    (Balle & Wang; a curve evaluated at ``alpha`` instead of ``alpha d`` falls far below it), and the zCDP
    bound of that sigma for the l2 sensitivity ``l / n``, computed here from its definition, stays within
    ``delta`` at every ``d`` -- a 3-dimensional query whose sigma is calibrated per coordinate (``l / sqrt 3``),
    or 30% smaller, breaks it."""
    import userdp.dem.linear as L
    from tests.dem.exact_laws import Spy, gaussian_delta, zcdp_to_delta

    drawn = Spy(L.add_gaussian)
    monkeypatch.setattr(L, "add_gaussian", drawn)
    ds = _ds()
    space, F = _space_and_f(3)
    ell, alpha, delta = lipschitz_constant(F, space), 10.0, 1e-9
    rel = priv_emd_linear(ds, ell, alpha, f_values=F, model="central", delta=delta, rng=rng)
    cal = drawn.calls[0][0][1]
    sigma, rounding, sens = cal.granularity * cal.w, cal.granularity * math.sqrt(3), ell / ds.n_users
    worst = 0.0
    for d in np.geomspace(1e-5, 1.0, 150):
        eps, dd = rel.guarantee.at_distance(float(d))
        assert eps == pytest.approx(alpha * d, rel=1e-12) and dd <= delta
        assert dd >= gaussian_delta(sigma, sens * d, alpha * d)
        worst = max(worst, zcdp_to_delta((sens * d + rounding) ** 2 / (2 * sigma**2), alpha * d))
    assert worst <= delta * (1 + 1e-3)  # (a grid of orders: a bound a little looser than the library's)
    assert zcdp_to_delta((sens + rounding) ** 2 / (2 * (sigma / 1.3) ** 2), alpha) > delta  # 30% less: refuted


def test_gaussian_release(monkeypatch):
    """The Gaussian variant draws the noise it is calibrated for: local model, 2,000 users, each user's noise
    is normal of the width handed to the sampler (within 6%; a width 30% off is rejected), and that width is
    enough for sensitivity l at (alpha, delta) by the zCDP bound computed here (the local model has no 1/n)."""
    import userdp.dem.linear as L
    from tests.dem.exact_laws import Spy, zcdp_to_delta

    drawn = Spy(L.add_gaussian)
    monkeypatch.setattr(L, "add_gaussian", drawn)
    space, F = _space_and_f(3)
    ds = _ds(n=2000, m=2, seed=4)
    ell = lipschitz_constant(F, space)
    rel = priv_emd_linear(ds, ell, 10.0, f_values=F, delta=1e-6, rng=7)
    cal = drawn.calls[0][0][1]
    sigma, rounding = cal.granularity * cal.w, cal.granularity * math.sqrt(3)
    assert zcdp_to_delta((ell + rounding) ** 2 / (2 * sigma**2), 10.0) <= 1e-6 * (1 + 1e-6)  # enough for l
    assert rel.guarantee.delta == 1e-6
    noise = (rel.extras["per_user"] - F[ds.items].reshape(2000, 2, 3).mean(1)).ravel()
    assert abs(noise.std() / sigma - 1) < 0.06
    assert stats.kstest(noise, stats.norm(scale=sigma).cdf).pvalue > 1e-3
    assert stats.kstest(noise, stats.norm(scale=1.3 * sigma).cdf).pvalue < 1e-6
    with pytest.raises(ParameterError):
        priv_emd_linear(ds, 1.0, 1.0, f_values=F, norm="l1", delta=1e-9)


def test_points_and_refusals(rng):
    pts = UserDataset.from_lists([[(0.1, 0.2), (0.3, 0.4)], [(0.5, 0.5)]])
    rel = priv_emd_linear(pts, 1.0, 2.0, f_points=lambda x: x, rng=rng)
    assert rel.value.shape == (2,)
    with pytest.raises(DataError, match="same public number"):
        priv_emd_linear(pts, 1.0, 2.0, f_points=lambda x: x, model="central")
    with pytest.raises(DataError):
        priv_emd_linear(pts, 1.0, 2.0)  # no f
    with pytest.raises(ParameterError):
        priv_emd_linear(pts, 0.0, 2.0, f_points=lambda x: x)
    with pytest.raises(ParameterError):
        priv_emd_linear(pts, 1.0, -1.0, f_points=lambda x: x)
    with pytest.raises(DataError):
        priv_emd_linear(pts, 1.0, 1.0, f_points=lambda x: x * np.nan)


@pytest.mark.parametrize("model", [Model.LOCAL, Model.CENTRAL])
def test_baseline(rng, model):
    space, F = _space_and_f(4)
    ds = _ds()
    bound = float(np.linalg.norm(F, axis=1).max())
    rel = linear_baseline(ds, 1.0, f_values=F, f_bound=bound, model=model, rng=rng)
    assert rel.guarantee.epsilon == 1.0 and rel.guarantee.pure
    with pytest.raises(ParameterError):
        linear_baseline(ds, 1.0, f_values=F, model=model)
    # a value beyond the public bound is projected onto the ball, not refused (a refusal would depend on the
    # data): the release is the one on the projected values, draw for draw
    clipped = F * np.minimum(1.0, (bound / 2) / np.linalg.norm(F, axis=1, keepdims=True))
    a = linear_baseline(ds, 1.0, f_values=F, f_bound=bound / 2, model=model, rng=5).value
    b = linear_baseline(ds, 1.0, f_values=clipped, f_bound=bound / 2, model=model, rng=5).value
    assert np.allclose(a, b)


@pytest.mark.parametrize("model", ["local", "central"])
def test_baseline_noise_scale(model):
    """The user-level baselines' noise, read off their draws: l2 K-norm of scale ``2 f_bound / epsilon`` per
    user (local: any two users differ by ``2 f_bound``) and ``2 f_bound / (n epsilon)`` on the mean (central,
    replace one user of m items). On 1-D points with ``f_bound = 1`` the noise is Laplace of that scale (3,000
    users, or 1,500 central releases): its mean absolute value is within 12% of the scale (4 standard errors),
    so a scale 30% off, e.g. the add/remove formula ``f_bound / n`` (half), is rejected."""
    eps, n = 1.0, 40
    rng = np.random.default_rng(6)
    if model == "local":
        lists = [list(rng.uniform(-1, 1, 3)) for _ in range(3000)]
        ds = UserDataset.from_lists([[(v,) for v in u] for u in lists])
        rel = linear_baseline(ds, eps, f_points=lambda x: x, f_bound=1.0, rng=3)
        noise = rel.extras["per_user"][:, 0] - np.array([np.mean(u) for u in lists])
        scale = 2.0 / eps
    else:
        lists = [list(rng.uniform(-1, 1, 3)) for _ in range(n)]
        ds = UserDataset.from_lists([[(v,) for v in u] for u in lists])
        truth = np.mean([np.mean(u) for u in lists])
        noise = np.array([linear_baseline(ds, eps, f_points=lambda x: x, f_bound=1.0, model=model, rng=s).value[0]
                          for s in range(1500)]) - truth  # fmt: skip
        scale = 2.0 / (n * eps)
    assert stats.kstest(noise, stats.laplace(scale=scale).cdf).pvalue > 1e-3
    assert abs(np.abs(noise).mean() / scale - 1) < 0.12


def test_clustered_indicator_query_is_lipschitz():
    """A cluster-indicator query on the clustered metric has Lipschitz constant 1 (cross-cluster distance 1)."""
    space = ClusteredMetric(3, 4, 0.2)
    F = np.eye(3)[np.arange(12) // 4]
    assert lipschitz_constant(F, space, norm="l1") == pytest.approx(2.0)
    assert lipschitz_constant(F, space) == pytest.approx(math.sqrt(2))


# --------------------------------------------------------------------------------------------
# The auditor: worst-case neighbour search
# --------------------------------------------------------------------------------------------


def _local_sampler(fn, rng):
    """``k`` outputs of a local mechanism on one user's points: ``k`` copies of the user, one release."""

    def sample(x, k):
        ds = UserDataset.from_lists([[tuple(p) for p in x]] * k)
        return fn(ds, rng).extras["per_user"]

    return sample


def test_linf_is_refused():
    pts = UserDataset.from_lists([[(0.1, 0.2), (0.3, 0.4)], [(0.5, 0.5)]])
    with pytest.raises(ParameterError, match="l-infinity"):
        priv_emd_linear(pts, 1.0, 2.0, f_points=lambda x: x, norm="linf")


# l2 is a large statistical audit (30,000 draws a pair); its noise law stays in the default tier
# (test_priv_emd_linear_noise_scale, tests/releases/test_dem.py::test_linear_local_release_is_knorm_noise_for_l)
@pytest.mark.parametrize("norm", [pytest.param("l2", marks=pytest.mark.slow), "l1"])
def test_audit_priv_emd_linear_local(norm, rng):
    """f(x) = x on the square [-1, 1]^2 (Lipschitz 1 in l2 for the Euclidean metric; in l1 the constant
    w.r.t. the same metric is sqrt(2)): the claim alpha d_EM holds at the worst of all distance moves,
    single-item moves and opposite corners; with l claimed at half, it is refuted."""
    from userdp.audit import audit_search, point_neighbours

    alpha = 1.5
    ell = {"l2": 1.0, "l1": math.sqrt(2)}[norm]
    pairs = point_neighbours(np.array([[0.0, 0.0], [0.5, -0.5], [-0.5, 0.25]]), 0.5, -1.0, 1.0)

    def mech(lip):
        return _local_sampler(
            lambda ds, r: priv_emd_linear(ds, lip, alpha, f_points=lambda x: x, norm=norm, rng=r), rng
        )

    def claim(d):
        return alpha * d, 0.0

    assert audit_search(mech(ell), pairs, claim, n=30_000).passed
    assert not audit_search(mech(ell / 2), pairs, claim, n=30_000).passed


@pytest.mark.slow  # large statistical audit; the central noise law is tested fast (test_priv_emd_linear_noise_scale)
def test_audit_priv_emd_linear_central(rng):
    """Bounded central model: user 0's data moved inside a 4-user dataset; (alpha d_EM(K_0, K_0'), 0)."""
    from userdp.audit import NeighbourPair, audit_search, point_neighbours

    alpha = 1.0
    others = [[(0.2,), (0.4,)], [(0.9,), (0.1,)], [(0.5,), (0.5,)]]
    pairs = [
        NeighbourPair(p.label, [[tuple(r) for r in p.a]] + others, [[tuple(r) for r in p.b]] + others, p.distance)
        for p in point_neighbours(np.array([[0.25], [0.75]]), 0.25, 0.0, 1.0)
    ]

    def sampler(lip):
        def sample(users, k):
            ds = UserDataset.from_lists(users)
            return np.array(
                [
                    priv_emd_linear(ds, lip, alpha, f_points=lambda x: x, model="central", rng=rng).value
                    for _ in range(k)
                ]
            )

        return sample

    assert audit_search(sampler(1.0), pairs, lambda d: (alpha * d, 0.0), n=6_000, n_pilot=600).passed
    assert not audit_search(sampler(0.5), pairs, lambda d: (alpha * d, 0.0), n=6_000, n_pilot=600).passed


@pytest.mark.slow  # large statistical audit; the baseline's noise scale is tested fast (test_baseline_noise_scale)
def test_audit_linear_baseline_local(rng, monkeypatch):
    """The user-level baseline: any two users' data (here, every candidate pair, opposite corners included)
    within (epsilon, 0); with the library's sensitivity halved (broken variant), refuted."""
    import userdp.dem.linear as L
    from userdp.audit import audit_search, point_neighbours

    eps = 1.0
    pairs = point_neighbours(np.array([[0.0, 0.0], [0.5, 0.5]]), 0.5, -0.7, 0.7)
    sample = _local_sampler(lambda ds, r: linear_baseline(ds, eps, f_points=lambda x: x, f_bound=1.0, rng=r), rng)
    assert audit_search(sample, pairs, lambda d: (eps, 0.0), n=30_000).passed
    real = L.calibrate_knorm
    monkeypatch.setattr(L, "calibrate_knorm", lambda sens, e, norm, dim: real(sens / 2, e, norm, dim))
    assert not audit_search(sample, pairs, lambda d: (eps, 0.0), n=30_000).passed


@pytest.mark.slow  # large statistical audit; the Gaussian claim is checked exactly (test_gaussian_variant_curve_...)
def test_audit_priv_emd_linear_gaussian(rng):
    """The Gaussian variant: (alpha d_EM, delta) at the worst candidate pair; with l claimed at half it is
    refuted."""
    from userdp.audit import audit_search, point_neighbours

    alpha, delta = 1.5, 1e-3
    pairs = point_neighbours(np.array([[0.0, 0.0], [0.5, -0.5], [-0.5, 0.25]]), 0.5, -1.0, 1.0)

    def mech(lip):
        return _local_sampler(
            lambda ds, r: priv_emd_linear(ds, lip, alpha, f_points=lambda x: x, delta=delta, rng=r), rng
        )

    assert audit_search(mech(1.0), pairs, lambda d: (alpha * d, delta), n=30_000).passed
    assert not audit_search(mech(0.5), pairs, lambda d: (alpha * d, delta), n=30_000).passed


@pytest.mark.slow  # large statistical audit; the baseline's noise scale is tested fast (test_baseline_noise_scale)
def test_audit_linear_baseline_central(rng, monkeypatch):
    """The central user-level baseline (replace one user, equal sizes, f(x) = x with f_bound = 1): (eps, 0)
    at the worst pairs -- a user with every item at +1 replaced by one with every item at -1, the largest
    change of the mean (2 / n) -- and, with the library's sensitivity halved (broken variant), refuted."""
    import userdp.dem.linear as L
    from userdp.audit import NeighbourPair, audit_search

    eps = 1.0
    base = [[(1.0,), (1.0,)], [(0.9,), (0.1,)], [(0.5,), (0.5,)]]
    pairs = [NeighbourPair("+1 user replaced by -1 user", base, [[(-1.0,), (-1.0,)]] + base[1:])] + [
        NeighbourPair(f"replace user {u}", base, base[:u] + [[(-1.0,), (-1.0,)]] + base[u + 1 :]) for u in (1, 2)
    ]

    def sample(users, k):
        ds = UserDataset.from_lists(users)
        return np.array(
            [
                linear_baseline(ds, eps, f_points=lambda x: x, f_bound=1.0, model="central", rng=rng).value
                for _ in range(k)
            ]
        )

    assert audit_search(sample, pairs, lambda d: (eps, 0.0), n=5_000, n_pilot=500).passed
    real = L.calibrate_knorm
    monkeypatch.setattr(L, "calibrate_knorm", lambda sens, e, norm, dim: real(sens / 2, e, norm, dim))
    assert not audit_search(sample, pairs, lambda d: (eps, 0.0), n=5_000, n_pilot=500).passed


def test_duchi_privatizer_is_unbiased_and_its_radius_is_the_stated_one():
    """Lemma 6.1's mechanism (Duchi et al.'s l2 privatizer, ``linear_baseline(mechanism="duchi")``): every report
    lies on the sphere of radius B (:func:`duchi_l2_radius`) and the mean of 20,000 reports of one value is
    that value (within 4 standard errors); a radius 30% off would bias it by 30% of the value (rejected)."""
    from userdp.dem import duchi_l2_privatizer, duchi_l2_radius

    d, eps, n = 3, 1.0, 20_000
    v = np.array([0.6, -0.3, 0.2])
    out = duchi_l2_privatizer(np.tile(v, (n, 1)), 1.0, eps, rng=11)
    B = duchi_l2_radius(1.0, eps, d)
    assert np.allclose(np.linalg.norm(out, axis=1), B)
    se = B / math.sqrt(n)  # each coordinate's sd is at most B
    assert np.all(np.abs(out.mean(axis=0) - v) < 4 * se)
    assert np.any(np.abs(out.mean(axis=0) * 1.3 - v) > 4 * se)


def test_duchi_privatizer_sides_have_the_privacy_ratio_e_eps():
    """The privacy of the privatizer rests on the side of ``w`` the report falls: with probability ``e^eps /
    (1 + e^eps)`` on the side of the (randomly signed) input direction. For an input at the radius (w = v / r
    always), 20,000 reports: the fraction on v's side matches it (binomial test), and the 1.3 eps value is
    rejected."""
    from userdp.dem import duchi_l2_privatizer

    eps, n = 1.0, 20_000
    v = np.array([1.0, 0.0, 0.0, 0.0])
    out = duchi_l2_privatizer(np.tile(v, (n, 1)), 1.0, eps, rng=12)
    hits = int((out @ v > 0).sum())
    p = math.exp(eps) / (1 + math.exp(eps))
    assert stats.binomtest(hits, n, p).pvalue > 1e-3
    assert stats.binomtest(hits, n, math.exp(1.3 * eps) / (1 + math.exp(1.3 * eps))).pvalue < 1e-6


def test_duchi_baseline_release_and_refusals():
    """The release: the mean of the users' reports, pure eps-DP for any two inputs (local), its error within the
    stated bound on 1,500 users; refused with the central model or in one dimension, before any data is read."""
    rng = np.random.default_rng(8)
    pts = UserDataset.from_lists([[tuple(rng.uniform(-0.5, 0.5, 2)) for _ in range(3)] for _ in range(1500)])
    rel = linear_baseline(pts, 2.0, f_points=lambda x: x, f_bound=1.0, mechanism="duchi", rng=3)
    assert rel.guarantee.epsilon == 2.0 and rel.guarantee.pure and rel.params["radius"] > 1
    truth = np.mean([np.mean(pts.user_items(u), axis=0) for u in range(pts.n_users)], axis=0)
    assert np.linalg.norm(rel.value - truth) < 3 * rel.error.bound
    with pytest.raises(ParameterError, match="local"):
        linear_baseline(pts, 1.0, f_points=lambda x: x, f_bound=1.0, model="central", mechanism="duchi")
    with pytest.raises(ParameterError, match="knorm or duchi"):
        linear_baseline(pts, 1.0, f_points=lambda x: x, f_bound=1.0, mechanism="gauss")

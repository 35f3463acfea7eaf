"""The d_EM-DP releases on their default paths (:func:`userdp.releases.linear`, :func:`~userdp.releases.itemwise`,
:func:`~userdp.releases.frequency`): the noise they draw against the paper's sensitivities computed here, the
guarantee they return against the exact law of the randomizer they ran, BoundedEMDReduction's request and
delivery, the keyed streams they read, and the refusals that must come before any noise.

Expected values come from the definitions (Imola et al.: Lemma 4.2's ``l / alpha`` and ``l / (n alpha)``,
section 6.2's GKRR, Lemma 5.2's distance), computed in the test, and laws are read off the samplers the
release handed its data to (:mod:`tests.dem.exact_laws`), never off the release's own params.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from scipy import stats

from tests.dem.exact_laws import Spy, gaussian_delta, gkrr_law, zcdp_to_delta
from userdp import releases
from userdp.audit import audit_sampled, audit_shuffled
from userdp.data import FiniteDomain, UserDataset
from userdp.errors import DataError, ParameterError
from userdp.metrics import ClusteredMetric
from userdp.noise import KeyedStreams, RandomSource, calibrate_knorm, knorm_release
from userdp.noise.keyed import BOUND_PURPOSE, RANDOMIZE_PURPOSE, SAMPLE_PURPOSE
from userdp.privacy import LargeDeltaWarning


def identity(x: np.ndarray) -> np.ndarray:
    """``f(x) = x`` on 1-D points of ``[0, 1]``: 1-Lipschitz for ``|x - x'|``."""
    return x


def _points(n: int, m: int | list[int], seed: int = 0) -> tuple[UserDataset, np.ndarray]:
    """``n`` users of ``m`` points in ``[0, 1]`` (a list: one size per user) and every user's mean, computed
    here from the lists."""
    rng = np.random.default_rng(seed)
    sizes = [m] * n if isinstance(m, int) else m
    lists = [[float(v) for v in rng.random(k)] for k in sizes]
    return UserDataset.from_lists([[(v,) for v in u] for u in lists]), np.array([[np.mean(u)] for u in lists])


# --------------------------------------------------------------------------------------------
# PrivEMDLinear: Lemma 4.2's sensitivity l (local) and l / n (central), on the release's own draws
# --------------------------------------------------------------------------------------------


def test_linear_central_release_is_knorm_noise_for_l_over_n():
    """Central model (bounded, every user holds m items): the release is the mean of the users' means plus the
    lattice K-norm mechanism for sensitivity ``l / n`` (Theorem 4.1: one user moves ``q_f(K_G)`` by at most
    ``l d_EM / n``), bit for bit, and its noise has the scale ``l / (n alpha)``: 600 releases' absolute noise
    averages within 15% of it (a noise 30% off, e.g. a sensitivity ``l / (2n)`` or ``l`` counted per item, is
    rejected)."""
    n, alpha = 50, 2.0
    ds, means = _points(n, 4)
    truth = means.mean(axis=0)
    expected = knorm_release(truth, calibrate_knorm(1.0 / n, alpha, "l2", 1), RandomSource(11))
    rel = releases.linear(ds, identity, 1.0, alpha, model="central", rng=RandomSource(11))
    assert np.array_equal(rel.value, expected)
    assert rel.guarantee.bounded and rel.guarantee.alpha <= alpha
    noise = np.array([releases.linear(ds, identity, 1.0, alpha, model="central", rng=s).value[0] for s in range(600)])
    noise -= truth[0]
    scale = 1.0 / (n * alpha)
    assert stats.kstest(np.abs(noise), stats.expon(scale=scale).cdf).pvalue > 1e-3
    assert abs(np.abs(noise).mean() / scale - 1) < 0.15


@pytest.mark.parametrize("norm", ["l2", "l1"])
def test_linear_local_release_is_knorm_noise_for_l(norm):
    """Local model (the default; users of any sizes): every user releases its own mean plus K-norm noise for
    sensitivity ``l`` (Lemma 4.2: scale ``l / alpha``), bit for bit, and the 2,000 users' noise norms follow
    ``Gamma(dim, l / alpha)`` (l2) or Laplace(``l / alpha``) per coordinate (l1); a scale 30% off is
    rejected. The value is their average."""
    n, alpha = 2000, 3.0
    rng = np.random.default_rng(1)
    lists = [[(float(a), float(b)) for a, b in rng.random((k, 2))] for k in rng.integers(1, 6, n)]
    ds = UserDataset.from_lists(lists)
    means = np.array([np.mean(u, axis=0) for u in lists])
    rel = releases.linear(ds, identity, 1.0, alpha, norm=norm, rng=RandomSource(5))
    assert np.array_equal(rel.extras["per_user"], knorm_release(means, calibrate_knorm(1.0, alpha, norm, 2),
                                                                RandomSource(5)))  # fmt: skip
    assert np.allclose(rel.value, rel.extras["per_user"].mean(axis=0))
    assert not rel.guarantee.bounded and rel.guarantee.alpha <= alpha  # unbounded local (Lemma 4.2)
    noise = rel.extras["per_user"] - means
    scale = 1.0 / alpha
    if norm == "l2":
        r = np.linalg.norm(noise, axis=1)
        assert stats.kstest(r, stats.gamma(2, scale=scale).cdf).pvalue > 1e-3
        for wrong in (1.3, 1 / 1.3):
            assert stats.kstest(r, stats.gamma(2, scale=wrong * scale).cdf).pvalue < 1e-6
    else:
        z = noise.ravel()
        assert stats.kstest(z, stats.laplace(scale=scale).cdf).pvalue > 1e-3
        for wrong in (1.3, 1 / 1.3):
            assert stats.kstest(z, stats.laplace(scale=wrong * scale).cdf).pvalue < 1e-6


def test_linear_central_refuses_unequal_sizes_before_any_noise(monkeypatch):
    """The central model's ``l / n`` holds only when every user holds the same public number of items: users
    of different sizes are refused (nothing drawn), and ``samples`` makes them equal."""
    import userdp.dem.linear as L

    ds, _ = _points(30, [3] * 29 + [4])
    drawn = Spy(L.knorm_release)
    monkeypatch.setattr(L, "knorm_release", drawn)
    with pytest.raises(DataError, match="same public number"):
        releases.linear(ds, identity, 1.0, 2.0, model="central", rng=1)
    assert drawn.calls == []
    releases.linear(ds, identity, 1.0, 2.0, model="local", rng=1)  # the local model takes any sizes
    rel = releases.linear(ds, identity, 1.0, 20.0, model="central", delta=1e-6, samples=100, rng=1)
    assert rel.guarantee.r == 0.05


def test_linear_gaussian_release_claims_what_its_sigma_gives_at_every_distance(monkeypatch):
    """The Gaussian variant (``delta`` given; central, sensitivity ``l / n``): with ``sigma`` the width the
    release handed its sampler, (1) the per-distance claim ``(alpha d, delta(d))`` is never below the exact
    Gaussian privacy profile (Balle & Wang) at distance ``l d / n`` -- a curve evaluated at ``epsilon = alpha``
    instead of ``alpha d`` is far below it -- and (2) the zCDP bound of that sigma for sensitivity ``l / n``,
    computed here, is within ``delta`` at every ``d`` in ``(0, 1]`` (a sigma for a smaller sensitivity is not)."""
    import userdp.dem.linear as L

    n, alpha, delta = 40, 1.0, 1e-3
    ds, _ = _points(n, 3)
    drawn = Spy(L.add_gaussian)
    monkeypatch.setattr(L, "add_gaussian", drawn)
    rel = releases.linear(ds, identity, 1.0, alpha, model="central", delta=delta, rng=3)
    cal = drawn.calls[0][0][1]  # add_gaussian(values, calibration, rng)
    sigma, rounding = cal.granularity * cal.w, cal.granularity  # g DGauss(w^2), values rounded to g Z (1-D)
    sens = 1.0 / n
    worst = 0.0
    for d in np.geomspace(1e-4, 1.0, 200):
        eps, dd = rel.guarantee.at_distance(float(d))
        assert eps == pytest.approx(alpha * d, rel=1e-12) and dd <= delta
        assert dd >= gaussian_delta(sigma, sens * d, alpha * d)
        worst = max(worst, zcdp_to_delta((sens * d + rounding) ** 2 / (2 * sigma**2), alpha * d))
    assert worst <= delta * (1 + 1e-3)  # (a grid of orders: a bound a little looser than the library's)


# --------------------------------------------------------------------------------------------
# PrivEMDItemWise and frequency estimation: the returned guarantee against the randomizer's exact law
# --------------------------------------------------------------------------------------------

SPACE = ClusteredMetric(2, 2, 0.3)
DOMAIN = FiniteDomain(np.array(["a0", "a1", "b0", "b1"], dtype=object))
PAIR = ClusteredMetric(2, 1, 0.3)
PAIR_DOMAIN = FiniteDomain(np.array(["a", "b"], dtype=object))


def _items(n: int, m: int, domain: FiniteDomain = DOMAIN, seed: int = 0) -> UserDataset:
    rng = np.random.default_rng(seed)
    return UserDataset(np.arange(n + 1) * m, rng.integers(0, len(domain), n * m), np.arange(n), domain)


def _randomizer_spy(monkeypatch) -> Spy:
    import userdp.releases.dem as R

    spy = Spy(R.frequency_randomizer)
    monkeypatch.setattr(R, "frequency_randomizer", spy)
    return spy


@pytest.mark.parametrize("release", [releases.itemwise, releases.frequency])
@pytest.mark.parametrize("model", ["local", "central"])
def test_itemwise_release_meets_its_guarantee_exactly(release, model, monkeypatch):
    """2,000 users of m = 3 items, (alpha, delta) = (1.5, 1e-3): the GKRR the release ran is read off its sampler
    (:func:`gkrr_law`), and every pair of one user's 3-item datasets is within the returned guarantee exactly
    (local, on 4 items: that user's shuffled outputs; central, on 2 items so that the law stays in closed form:
    shuffled with the 1,999 others', where Theorem 4.4's amplification is used). A local release that claims
    the shuffle model's amplification, or a guarantee counted for m - 1 items, is refuted. The frequency
    estimate is post-processing of the same multisets."""
    spy = _randomizer_spy(monkeypatch)
    n, m = 2000, 3
    space, domain = (SPACE, DOMAIN) if model == "local" else (PAIR, PAIR_DOMAIN)
    rel = release(_items(n, m, domain), space, domain, 1.5, delta=1e-3, model=model, rng=7)
    g = rel.guarantee
    assert g.alpha <= 1.5 * (1 + 1e-9) and g.delta <= 1e-3
    gk = spy.calls[0][2][0]
    P = gkrr_law(gk)
    background = () if model == "local" else (0,) * (m * (n - 1))
    res = audit_shuffled(P, space.full_matrix(), m, g.at_distance, background=background)
    assert res.passed, res
    if release is releases.itemwise:
        assert rel.extras["counts"].sum() == n * m


def test_itemwise_local_claim_without_amplification_is_tight():
    """The broken variant of the audit above: in the local model one user's 3 items moved across clusters are
    distinguishable at exactly ``3 alpha_0`` (composition), so a claim of 0.9 of it fails the exact audit."""
    from userdp.dem import GKRR

    gk = GKRR(SPACE, 0.5)
    P = gkrr_law(gk)
    a = 3 * 0.5
    assert audit_shuffled(P, SPACE.full_matrix(), 3, lambda d: (a * d, 0.0)).passed
    assert not audit_shuffled(P, SPACE.full_matrix(), 3, lambda d: (0.9 * a * d, 1e-3)).passed


# --------------------------------------------------------------------------------------------
# BoundedEMDReduction (samples=S): the request, the projection and the delivered guarantee
# --------------------------------------------------------------------------------------------


def test_samples_deliver_an_exactly_audited_discrete_guarantee(monkeypatch):
    """``samples=3``: every user (of 1 to 5 items) is projected to exactly 3 keyed samples, and the discrete
    guarantee the release returns holds exactly over every pair of datasets of 1-3 items (the mixture over the
    multinomial sample of the shuffled GKRR law the release's randomizer samples). Requested ``(A, D)`` at
    resolution ``r``: ``epsilon <= A r``, ``delta <= D``."""
    spy = _randomizer_spy(monkeypatch)
    A, D, r, s = 4.0, 0.05, 0.5, 3
    rng = np.random.default_rng(2)
    lists = [[DOMAIN.labels[j] for j in rng.integers(0, 4, k)] for k in rng.integers(1, 6, 40)]
    ds = UserDataset.from_lists(lists, domain=DOMAIN)
    with pytest.warns(LargeDeltaWarning, match="delta = 0.05 is above 0.001"):  # a large delta keeps the audit small
        rel = releases.itemwise(ds, SPACE, DOMAIN, A, delta=D, samples=s, r=r, rng=4)
    g = rel.guarantee
    assert g.r == r and g.epsilon <= A * r * (1 + 1e-9) and g.delta <= D
    assert rel.extras["counts"].sum() == 40 * s  # every user randomized exactly s samples
    P = gkrr_law(spy.calls[0][2][0])
    datasets = [t for k in (1, 2, 3) for t in itertools.combinations_with_replacement(range(4), k)]
    assert audit_sampled(P, SPACE, s, datasets, g.at_distance).passed


@pytest.mark.parametrize("command", ["linear", "itemwise", "frequency"])
def test_samples_plan_the_inner_release_from_lemma_5_2(command, monkeypatch):
    """``samples=100``, ``r = 0.05``, ``D = 1e-6``: Lemma 5.2's distance ``c = (1 + sqrt 2) r + (3/s) ln(2/D)``
    (computed here, at the projection's ``D/2``) is below 1, so the inner mechanism is handed ``alpha = A r / c``
    and ``D/2`` (read off the call of the mechanism's step), and the release delivers ``(A r, D, r)``-discrete
    d_EM-DP at most: its epsilon within ``A r``, its delta the projection's ``D/2`` plus the inner delta'. An
    inner alpha of ``A / c``, or the whole ``D`` handed to the inner release, is refused by the release itself.
    Every user holds exactly 100 samples."""
    import userdp.releases.dem as R

    A, D, r, s = 20.0, 1e-6, 0.05, 100
    c = (1 + math.sqrt(2)) * r + 3 / s * math.log(2 / D)
    assert c < 1
    if command == "linear":
        step = Spy(R.linear_release)
        monkeypatch.setattr(R, "linear_release", step)
        ds, _ = _points(60, [2, 3, 7] * 20)
        rel = releases.linear(ds, identity, 1.0, A, model="central", delta=D, samples=s, rng=5)
        args = step.calls[0][0]
        (per_user, inner_alpha, inner_delta), inner = (args[0], args[2], args[5]), step.calls[0][2].guarantee
        assert per_user.shape == (60, 1)
    else:
        step = _randomizer_spy(monkeypatch)
        lists = [list(DOMAIN.labels[np.arange(k) % 4]) for k in [1, 2, 9] * 20]
        rel = getattr(releases, command)(UserDataset.from_lists(lists, domain=DOMAIN), SPACE, DOMAIN, A, delta=D,
                                         samples=s, rng=5)  # fmt: skip
        _, inner_alpha, inner_delta, m, _n = step.calls[0][0][:5]
        assert m == s
        if command == "itemwise":
            assert rel.extras["counts"].sum() == 60 * s
        inner = None
    assert inner_alpha == pytest.approx(A * r / c, rel=1e-12)
    assert inner_delta == pytest.approx(D / 2, rel=1e-12)
    g = rel.guarantee
    assert g.epsilon <= A * r * (1 + 1e-9) and g.delta <= D and g.r == r
    assert g.delta == pytest.approx(D / 2 + rel.extras["inner_delta_prime"], rel=1e-12)
    if inner is not None:  # the Gaussian inner release: its (alpha, delta) scaled by Lemma 5.2's c
        assert g.epsilon == pytest.approx(inner.alpha * c, rel=1e-12) and g.delta == pytest.approx(D, rel=1e-12)


def _weaken(monkeypatch, alpha_factor: float = 1.0, delta: float | None = None):
    """The broken inner release: linear_release as called by the release, returning a guarantee ``alpha_factor``
    times weaker in alpha, or with ``delta`` in place of its own."""
    import userdp.releases.dem as R

    real = R.linear_release

    def weaker(*args, **kwargs):
        rel = real(*args, **kwargs)
        g = rel.guarantee
        g = dataclasses.replace(g, alpha=alpha_factor * g.alpha, delta=g.delta if delta is None else delta)
        return dataclasses.replace(rel, guarantee=g)

    monkeypatch.setattr(R, "linear_release", weaker)


@pytest.mark.parametrize("weakness", ["alpha", "delta"])
def test_samples_refuse_an_inner_release_weaker_than_planned(monkeypatch, weakness):
    """The delivered-vs-requested check on the reduction's path: an inner release whose realized alpha is 1.5x
    the planned one (its discrete epsilon then above ``A r``), or whose delta' is all of ``D`` (the total
    ``D/2 + D`` above ``D``, though below the paper's ``2 D``), is refused -- unless ``allow_weaker``, and then
    the weaker guarantee is the one returned, with a warning."""
    A, D, s = 20.0, 1e-6, 100
    ds, _ = _points(30, [2, 5, 3] * 10)
    _weaken(monkeypatch, 1.5 if weakness == "alpha" else 1.0, D if weakness == "delta" else None)
    kw = dict(model="central", delta=D, samples=s)
    with pytest.raises(ParameterError, match="allow_weaker"):
        releases.linear(ds, identity, 1.0, A, rng=1, **kw)
    rel = releases.linear(ds, identity, 1.0, A, rng=1, allow_weaker=True, **kw)
    g = rel.guarantee
    assert "weaker than requested" in rel.extras["guarantee_warning"]
    if weakness == "alpha":
        assert g.epsilon > A * 0.05 * 1.4 and g.delta <= D
    else:
        assert g.delta == pytest.approx(1.5 * D) and g.epsilon <= A * 0.05 * (1 + 1e-9)


def test_a_weaker_release_without_samples_is_refused(monkeypatch):
    """Without samples the request is ``(A, D)``-d_EM-DP itself: an inner alpha 1.5x the request is refused."""
    ds, _ = _points(20, 3)
    _weaken(monkeypatch, 1.5)
    with pytest.raises(ParameterError, match="allow_weaker"):
        releases.linear(ds, identity, 1.0, 5.0, rng=1)


# --------------------------------------------------------------------------------------------
# The keyed per-user streams: sampling and randomization read distinct streams
# --------------------------------------------------------------------------------------------


def test_sampling_and_randomization_read_distinct_keyed_streams(monkeypatch):
    """With ``samples``, each user's S items are drawn with the user's keyed stream for sampling and then
    randomized with the user's keyed stream for randomization: the release's counts are exactly those two
    steps replayed here on the release's streams, and the two streams (and the contribution-bounding one) are
    different for every user -- one stream read twice would tie which items a user keeps to how they are
    randomized."""
    spy = _randomizer_spy(monkeypatch)
    s, seed = 6, 9
    rng = np.random.default_rng(3)
    lists = [[DOMAIN.labels[j] for j in rng.integers(0, 4, k)] for k in rng.integers(1, 8, 25)]
    ds = UserDataset.from_lists(lists, domain=DOMAIN)
    rel = releases.itemwise(ds, SPACE, DOMAIN, 10.0, delta=1e-3, samples=s, rng=RandomSource(seed))
    gk = spy.calls[0][2][0]
    streams = KeyedStreams.from_rng(RandomSource(seed))  # the release's: the first draw of its source
    counts = np.zeros(4, dtype=np.int64)
    for i, u in enumerate(ds.user_ids):
        own = np.sort(ds.user_items(i))
        kept = own[streams.source(u, SAMPLE_PURPOSE).integers(own.size, size=s)]
        out = gk.randomize(np.sort(kept), streams.source(u, RANDOMIZE_PURPOSE))
        counts += np.bincount(out, minlength=4)
    assert np.array_equal(rel.extras["counts"], counts)
    assert len({SAMPLE_PURPOSE, RANDOMIZE_PURPOSE, BOUND_PURPOSE}) == 3
    for u in ds.user_ids:
        w = [streams.source(u, p).words(4) for p in (SAMPLE_PURPOSE, RANDOMIZE_PURPOSE, BOUND_PURPOSE)]
        assert not any(np.array_equal(a, b) for a, b in itertools.combinations(w, 2))


def test_bounded_releases_refuse_unequal_sizes_without_samples():
    """PrivEMDItemWise and frequency estimation are bounded: users of different sizes need ``samples``."""
    ds = UserDataset.from_lists([["a0", "b1"], ["a1"]], domain=DOMAIN)
    for release in (releases.itemwise, releases.frequency):
        for model in ("local", "central"):
            with pytest.raises(DataError, match="same public number"):
                release(ds, SPACE, DOMAIN, 4.0, delta=1e-6, model=model, rng=1)

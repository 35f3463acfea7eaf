"""The distinct count's plan: the exact law against the release's own draws, the synthetic predictor against
the measured error on the bundled data, and the theorem bound against simulated worst cases."""

from __future__ import annotations

import numpy as np
import pytest

from userdp import datasets, plan
from userdp.distinct import dc_matching, person_element_graph
from userdp.distinct.release import distinct_count
from userdp.errors import ParameterError


@pytest.fixture(scope="module")
def fashion():
    g = person_element_graph(datasets.amazon_fashion())
    return g, dc_matching(g, 100)


def _measured(curve, truth, eps, runs=400):
    return np.abs([truth - distinct_count(None, eps, 0.05, 100, counts=curve, rng=s).value for s in range(runs)])


@pytest.mark.parametrize("eps", [0.5, pytest.param(2.0, marks=pytest.mark.slow)])  # 2.0: 400 releases, 3 s
def test_the_exact_law_matches_the_release_s_draws(fashion, eps):
    """On the bundled Amazon Fashion curve, the predicted median and 90% quantile of |error| are within 12% of
    400 releases'; at 1.3 epsilon (the noise 30% off) the prediction is refuted. (At epsilon 2 in the slow tier;
    the law of l_hat at epsilon 2 is checked exactly against the release's own draws below.)"""
    g, curve = fashion
    truth = g.distinct_count()
    err = _measured(curve, truth, eps)
    p = plan.distinct(eps, curve=curve, distinct=truth)
    for c in (0.5, 0.9):
        assert abs(p.quantiles[c] / np.quantile(err, c) - 1) < 0.12, (c, p.quantiles[c], np.quantile(err, c))
    off = plan.distinct(1.3 * eps, curve=curve, distinct=truth)
    assert abs(off.median / np.median(err) - 1) > 0.15


class _FirstUniform:
    """Seeded sources whose first ``randbelow(2^256)`` (the exponential mechanism's uniform) is ``u``."""

    TOP = 1 << 256

    @staticmethod
    def source(u: int):
        from userdp.noise import RandomSource

        class Source(RandomSource):
            def randbelow(self, n):
                nonlocal u
                if n == _FirstUniform.TOP and u is not None:
                    v, u = u, None
                    return v
                return super().randbelow(n)

        return Source(0)


def test_the_law_of_the_bound_is_the_release_s_own(fashion):
    """The law the plan computes for ``l_hat`` (GEM's probabilities over the curve) against the real release run
    with its uniform set: at 48 uniforms spread over ``[0, 1)``, at epsilon 2, the release returns the ``l``
    whose cell of the plan's law holds the uniform (the plan's law is exact, not only close in quantiles)."""
    from userdp.plan.distinct import _release_law

    _, curve = fashion
    p = _release_law(curve, 2.0, 0.05, 0.5)[0]
    cdf = np.cumsum(p)
    top = _FirstUniform.TOP
    seen = set()
    for j in range(48):
        u = (2 * j + 1) * (top // 96)
        if np.min(np.abs(cdf - u / top)) < 1e-9:
            continue
        want = int(np.searchsorted(cdf, u / top, side="right")) + 1
        got = distinct_count(None, 2.0, 0.05, 100, counts=curve, rng=_FirstUniform.source(u)).extras["bound"]
        assert got == want, (u / top, got, want)
        seen.add(got)
    assert len(seen) >= 3


def test_the_synthetic_predictor_is_within_2x_of_the_release_s_error(fashion):
    """From public sizes only (persons, distinct elements, mean elements per person) the predicted median is
    within 2x of the release's median error on the bundled data, at every epsilon tried. (The release's median
    is its exact law on the true curve, which test_the_exact_law_matches_the_release_s_draws checks against
    400 releases; it replaced 600 releases here.)"""
    g, curve = fashion
    truth = g.distinct_count()
    sizes = {"persons": g.n_persons, "distinct": truth, "items_per_person": float(g.degrees().mean())}
    for eps in (0.5, 1.0, 4.0):
        exact = plan.distinct(eps, curve=curve, distinct=truth).median
        ratio = plan.distinct(eps, **sizes).median / exact
        assert 0.5 <= ratio <= 2.0, (eps, ratio)


def _curves() -> tuple[np.ndarray, np.ndarray]:
    return np.minimum(np.arange(1, 101) * 400, 2000), np.full(100, 2000)  # saturating at l* = 5 or at once


def test_the_theorem_bound_holds_exactly_on_data_with_few_items_per_person():
    """Eq. (8) with userdp's constants, against the release's exact law (GEM's probabilities, each ``l``'s
    lattice Laplace, as the plan computes them and the tests above check against the release's draws): on
    curves of persons holding at most l* elements, ``P[DC(D) - release > bound] <= 2 beta`` and
    ``P[release > DC(D)] <= beta`` (a worst-case bound: here even a fifth of it holds)."""
    from userdp.plan.distinct import _dlap_cdf, _release_law

    beta, eps, l_star = 0.05, 1.0, 5
    bound = plan.theorem_bound(eps, l_star, beta)
    for curve in _curves():
        p, base, g, q = _release_law(curve, eps, beta, 0.5)

        def short(b, p=p, base=base, g=g, q=q):  # P[release < 2000 - b]
            return float(np.sum(p * _dlap_cdf(np.ceil((2000 - b - base) / g) - 1, q)))

        over = float(np.sum(p * (1 - _dlap_cdf(np.floor((2000 - base) / g), q))))
        # (the plan's float law is good to a relative 1e-3: q = exp(-1/t) rounds at t ~ 2^41)
        assert short(bound) <= 2 * beta and over <= beta * (1 + 1e-3), (short(bound), over)
    with pytest.raises(ParameterError):
        plan.theorem_bound(eps, 101, beta)  # outside Eq. (8)'s range (l* <= l_max): refused, not clamped


@pytest.mark.slow  # 600 releases (6 s); the exact-law test above checks the same bound in the default tier
def test_the_theorem_bound_holds_on_data_with_few_items_per_person():
    """Eq. (8) with userdp's constants: on curves of persons holding at most l* elements, the release falls
    short by more than the bound with probability at most 2 beta (measured: never in 300 releases)."""
    beta, eps, l_star = 0.05, 1.0, 5
    bound = plan.theorem_bound(eps, l_star, beta)
    for curve in _curves():
        err = np.array([2000 - distinct_count(None, eps, beta, 100, counts=curve, rng=s).value for s in range(300)])
        assert np.mean(err > bound) <= 2 * beta
        assert np.mean(err < 0) <= beta + 0.03  # the release is a lower bound with probability 1 - beta
    with pytest.raises(ParameterError):
        plan.theorem_bound(eps, 101, beta)  # outside Eq. (8)'s range (l* <= l_max): refused, not clamped


def test_the_inverse_meets_its_target_and_refusals(fashion):
    g, curve = fashion
    truth = g.distinct_count()
    eps = plan.distinct_epsilon(0.05, 0.9, curve=curve, distinct=truth)
    assert plan.distinct(eps, curve=curve, distinct=truth).extra["relative"][0.9] <= 0.05
    assert plan.distinct(eps / 1.05, curve=curve, distinct=truth).extra["relative"][0.9] > 0.05
    with pytest.raises(ParameterError):
        plan.distinct(1.0)  # neither a curve nor sizes
    with pytest.raises(ParameterError):
        plan.distinct(1.0, curve=curve[::-1])  # not non-decreasing
    with pytest.raises(ParameterError):
        plan.distinct(1.0, persons=10, distinct=1000, items_per_person=2)  # 20 holdings cannot show 1000


def _coverage(curve, truth, eps, bound) -> float:
    """``P[|DC(D) - release| <= bound]`` under the release's exact law on the true curve (checked against the
    release's own draws above)."""
    from userdp.plan.distinct import _dlap_cdf, _release_law

    p, base, g, q = _release_law(curve, eps, 0.05, 0.5)
    hi, lo = np.floor((truth + bound - base) / g), np.ceil((truth - bound - base) / g)
    return float(np.sum(p * np.clip(_dlap_cdf(hi, q) - _dlap_cdf(lo - 1, q), 0, 1)))


@pytest.mark.parametrize("spread", [None, 1.2])
def test_the_90_percent_bound_from_public_sizes_is_a_90_percent_bound(fashion, spread):
    """Issue 34: from public sizes (rounded as a planner knows them) the stated 90% bound covers at least 85%
    of the releases on Amazon Fashion at every epsilon, exactly (under the release's law on the true curve),
    with the spread unknown (the default) and given (the data's own, 1.2); the median stays within 2x (given:
    2.5x, 2.3x at epsilon 4 is the worst measured, docs/reference/planning.md). (The old single curve of spread
    0.75 stated 219 at epsilon 1 and covered 72%.)"""
    g, curve = fashion
    truth = g.distinct_count()
    sizes = {"persons": 400, "distinct": 1500, "items_per_person": 22.0, "spread": spread}
    for eps in (0.5, 1.0, 4.0):
        pred = plan.distinct(eps, **sizes)
        assert _coverage(curve, truth, eps, pred.quantiles[0.9]) >= 0.85, (eps, pred.quantiles)
        ratio = pred.median / plan.distinct(eps, curve=curve, distinct=truth).median
        assert 0.5 <= ratio <= (2.0 if spread is None else 2.5), (eps, ratio)


def test_the_default_release_stays_within_its_planned_bound(fashion):
    """The library's default path (``releases.distinct`` on the bundled table, seeded): over 40 releases at
    epsilon 1 the error exceeds the plan's 90% bound in at most 6 (the bound covers 90%: 6 or more misses in
    40 happen with probability 0.37 at 90%, 0.02 at 97%; the old bound, covering 72%, missed 14)."""
    from userdp import releases

    g, _ = fashion
    truth = g.distinct_count()
    bound = plan.distinct(1.0, persons=400, distinct=1500, items_per_person=22.0).quantiles[0.9]
    words = datasets.amazon_fashion()
    misses = sum(truth - releases.distinct(words, 1.0, rng=s).value > bound for s in range(40))
    assert misses <= 6, (misses, bound)


def test_the_spread_is_a_public_parameter_and_is_checked():
    """The spread given narrows the mixture to the spread and its calibrated offsets; outside [0, 3] refused."""
    from userdp.plan.distinct import SPREAD_OFFSETS, UNKNOWN_SPREADS, _spreads

    assert _spreads(None) == UNKNOWN_SPREADS
    assert _spreads(1.0) == tuple(round(1.0 + o, 6) for o in SPREAD_OFFSETS)
    assert min(_spreads(0.1)) == 0.0
    sizes = {"persons": 400, "distinct": 1500, "items_per_person": 22.0}
    narrow, wide = plan.distinct(1.0, spread=0.5, **sizes), plan.distinct(1.0, spread=1.3, **sizes)
    assert narrow.quantiles[0.9] < wide.quantiles[0.9]
    assert "spread unknown" in plan.distinct(1.0, **sizes).basis
    for bad in (-0.1, 3.5, float("nan")):
        with pytest.raises(ParameterError):
            plan.distinct(1.0, spread=bad, **sizes)
    with pytest.raises(ParameterError):
        plan.synthetic_curve(400, 1500, 22.0, zipf=-1.0)
    flat = plan.synthetic_curve(400, 1500, 22.0, zipf=0.0)  # a catalogue: every element about equally popular
    assert flat[-1] == 1500


def _shortfall_probability(curve, truth, bound, eps, beta=0.05):
    """``P[truth - release > bound]`` under the release's exact law on ``curve`` (as the plan computes it)."""
    from userdp.plan.distinct import _dlap_cdf, _release_law

    p, base, g, q = _release_law(np.asarray(curve), eps, beta, 0.5)
    return float(np.sum(p * _dlap_cdf(np.ceil((truth - bound - base) / g) - 1, q)))


@pytest.mark.parametrize("eps", [0.25, 1.0, 4.0])
def test_the_general_bound_eq7_holds_on_any_data(fashion, eps):
    """Theorem 1.1 / Eq. (7) with userdp's constants needs no bound on the items per person: on Amazon
    Fashion's true curve (persons holding up to 141 elements, more than l_max = 100) the release falls short
    by more than it with probability at most 2 beta (exact law); it is below the plan's 90% quantile times
    ten (a bound, not vacuous); on a curve saturating at l* it is at most Eq. (8)'s bound for l*."""
    g, curve = fashion
    truth = g.distinct_count()
    bound = plan.general_bound(eps, curve)
    assert _shortfall_probability(curve, truth, bound, eps) <= 2 * 0.05
    assert bound < 10 * plan.distinct(eps, curve=curve).quantiles[0.9]
    sat = _curves()[0]
    assert plan.general_bound(eps, sat) <= plan.theorem_bound(eps, 5) * (1 + 1e-12)
    assert plan.distinct(eps, curve=curve).extra["general bound"] == pytest.approx(bound)


def test_the_greedy_bound_eq10_holds_for_the_greedy_count():
    """Theorem 1.2 / Eq. (10) with userdp's constants: persons of Amazon Fashion cut to their first 5
    elements, the greedy count (Algorithm 2) at every l; its release falls short of the exact DC(D) by more
    than DC(D) / 2 + Eq. (8) with probability at most 2 beta (exact law). The plan reports it with max_items."""
    from userdp.data import UserDataset
    from userdp.distinct import dc_greedy

    ds = datasets.amazon_fashion()
    cut = UserDataset.from_lists([sorted(set(ds.user_items(u).tolist()))[:5] for u in range(ds.n_users)])
    g = person_element_graph(cut)
    truth = g.distinct_count()
    for eps in (0.5, 2.0):
        bound = plan.greedy_bound(eps, 5, truth)
        assert bound == pytest.approx(truth / 2 + plan.theorem_bound(eps, 5))
        assert _shortfall_probability(dc_greedy(g, 100), truth, bound, eps) <= 2 * 0.05
        pred = plan.distinct(eps, curve=dc_matching(g, 100), max_items=5)
        assert pred.extra["greedy bound"] == pytest.approx(bound)
    with pytest.raises(ParameterError, match="Eq. \\(10\\)"):
        plan.greedy_bound(1.0, 5, float("nan"))

"""The d_EM-DP plans against the releases' own measured errors on the bundled Foursquare data."""

from __future__ import annotations

import numpy as np
import pytest

from userdp import datasets, plan, releases
from userdp.dem.frequency import demd_error
from userdp.dem.itemwise import BoundedEMDReduction
from userdp.errors import ParameterError
from userdp.metrics import GreatCircleMetric
from userdp.report.demo import TIMES_SQUARE, _regions


@pytest.fixture(scope="module")
def fs():
    return datasets.foursquare_nyc()


def test_linear_prediction_matches_the_measured_error(fs):
    """The demo's average distance to Times Square (local model): the predicted median and 90% quantile within
    10% of 800 releases' (the noise step of the release on the users' means; one whole release checks the
    means); the prediction at 1.3 alpha (noise 30% smaller) is refuted."""
    from userdp.dem.linear import linear_release

    space = GreatCircleMetric(datasets.NYC_BOX)
    f, ell, _ = releases.distance_query(space, TIMES_SQUARE)
    per_user = np.add.reduceat(f(fs.items), fs.offsets[:-1]) / fs.counts()
    truth = float(per_user.mean())
    whole = releases.linear(fs, f, ell, 25.0, model="local", rng=7)
    assert abs(whole.value[0] - linear_release(per_user, ell, 25.0, "local", rng=7).value[0]) < 1e-12
    err = np.abs([linear_release(per_user, ell, 25.0, "local", rng=s).value[0] - truth for s in range(800)])
    p = plan.linear(25.0, persons=fs.n_users)
    for c in (0.5, 0.9):
        assert abs(p.quantiles[c] / np.quantile(err, c) - 1) < 0.1
    assert abs(plan.linear(32.5, persons=fs.n_users).median / np.median(err) - 1) > 0.15


@pytest.mark.parametrize("delta", [None, 1e-6])
def test_linear_central_prediction_matches_the_release(delta, monkeypatch):
    """Central model, pure and Gaussian: the prediction's median within 15% of 300 releases' noise. (The
    Gaussian calibration, a pure function of public parameters that takes 0.2 s, is memoized across the 300
    releases: the release itself runs unchanged.)"""
    import functools

    import userdp.dem.linear as L
    from userdp.dem.linear import linear_release

    monkeypatch.setattr(L, "calibrate_gaussian_metric", functools.cache(L.calibrate_gaussian_metric))
    rng = np.random.default_rng(0)
    per_user = rng.random((50, 1))

    truth = per_user.mean()
    err = np.abs([linear_release(per_user, 1.0, 2.0, "central", delta=delta, rng=s).value[0] - truth
                  for s in range(300)])  # fmt: skip
    p = plan.linear(2.0, persons=50, model="central", delta=delta)
    assert abs(p.median / np.median(err) - 1) < 0.15


def test_frequency_prediction_is_within_2x_of_the_measured_error(fs):
    """The demo's frequency estimate of check-in regions (alpha 100, delta 1e-6, 100 items a user): the
    uniform stand-in's median within 2x of 20 releases' d_EM error; the theorem's bound above both."""
    ds, space = _regions(fs)
    proj = BoundedEMDReduction(s=100, epsilon=1.0, r=0.01, delta=1e-6).project(ds, 0)
    truth = proj.global_histogram()
    err = [demd_error(releases.frequency(proj, space, ds.domain, 100.0, delta=1e-6, rng=s).value, truth, space)
           for s in range(20)]  # fmt: skip
    p = plan.frequency(100.0, persons=proj.n_users, items_per_person=100, clusters=16, cluster_size=9, r=0.25,
                       delta=1e-6, reps=40)  # fmt: skip
    assert 0.5 <= p.median / np.median(err) <= 2.0
    assert p.extra["theorem"] > np.quantile(err, 0.9)


def test_inverses_and_refusals():
    a = plan.linear_alpha(0.002, 0.9, persons=1000)
    assert plan.linear(a, persons=1000).quantiles[0.9] <= 0.002 < plan.linear(a / 1.05, persons=1000).quantiles[0.9]
    with pytest.raises(ParameterError):
        plan.linear(25.0, persons=100, norm="l1", delta=1e-6)  # the release refuses it: so does the plan
    with pytest.raises(ParameterError):
        plan.frequency(10.0, persons=10, items_per_person=5, clusters=2, cluster_size=2, r=0.1, truth=np.ones(3))


def test_frequency_prediction_with_the_exponential_randomizer_on_a_line_metric():
    """Any finite metric: a 50-point line, 2,000 users of 20 items from two bumps. From the uniform stand-in
    the predicted median d_EM error is within 2x of 8 releases' (the exponential randomizer, local model)."""
    from userdp.data import FiniteDomain, UserDataset
    from userdp.dem import freq_est_local
    from userdp.metrics import FiniteMetric

    x = np.arange(50.0)
    line = FiniteMetric(np.abs(x[:, None] - x[None, :]))
    p = np.exp(-((x - 12) ** 2) / 18) + 0.6 * np.exp(-((x - 36) ** 2) / 8)
    items = np.random.default_rng(7).choice(50, size=40_000, p=p / p.sum())
    ds = UserDataset(np.arange(2001) * 20, items, None, FiniteDomain(np.arange(50)))
    truth = ds.global_histogram()
    for alpha in (100.0, 200.0):
        err = [demd_error(freq_est_local(ds, line, alpha, 1e-6, rng=s).value, truth, line) for s in range(8)]
        pred = plan.frequency(alpha, persons=2000, items_per_person=20, space=line, delta=1e-6, reps=30)
        assert pred.extra["theorem"] is None and "exponential" in pred.release
        assert 0.5 <= pred.median / np.median(err) <= 2.0, (alpha, pred.median, np.median(err))

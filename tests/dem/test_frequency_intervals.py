"""The confidence intervals of GKRR frequency estimates (issue 15, defect 8): the half-width from the noise law
(:func:`userdp.dem.frequency.gkrr_interval_halfwidth`) against a brute-force computation from the dense
transition matrix, its coverage on the library's own randomizer, and the releases that report it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from userdp import releases
from userdp.data import FiniteDomain
from userdp.dem import GKRR
from userdp.dem.frequency import gkrr_interval_halfwidth
from userdp.metrics import ClusteredMetric


def _brute(gk: GKRR, n: int, beta: float, sampled: bool) -> float:
    """The Bernstein half-width from the dense A^{-1}: the worst variance and range over every (x, j)."""
    A = gk.transition_matrix()
    Ainv = np.linalg.inv(A)
    k = A.shape[0]
    var = max(float(A[x] @ Ainv[:, j] ** 2 - (A[x] @ Ainv[:, j]) ** 2) for x in range(k) for j in range(k))
    var += 0.25 if sampled else 0.0
    M = max(float(np.abs(Ainv).max()), float(np.abs(Ainv - 1).max()))
    L = math.log(2 * k / beta)
    return (M * L / 3 + math.sqrt((M * L / 3) ** 2 + 2 * n * var * L)) / n


@pytest.mark.parametrize("s,t,r,a0", [(3, 4, 0.2, 2.0), (5, 1, 0.5, 1.0), (1, 6, 0.1, 3.0), (4, 3, 0.05, 8.0)])
@pytest.mark.parametrize("sampled", [False, True])
def test_halfwidth_matches_the_dense_matrix(s, t, r, a0, sampled):
    gk = GKRR(ClusteredMetric(s, t, r), a0)
    for n in (10, 1000):
        assert gkrr_interval_halfwidth(gk, n, 0.05, sampled) == pytest.approx(_brute(gk, n, 0.05, sampled), rel=1e-9)


def test_intervals_cover_on_the_librarys_randomizer_and_are_not_vacuous():
    """300 runs of the library's GKRR on a skewed histogram: the simultaneous intervals cover every item in
    at least 95% of runs, and the half-width is within 3x of the observed 95th percentile of the worst
    error (a bound 3x too loose, or a broken law, fails)."""
    space = ClusteredMetric(3, 4, 0.2)
    gk = GKRR(space, 2.0)
    k, n = space.size, 4000
    rng = np.random.default_rng(5)
    x = rng.choice(k, size=n, p=np.r_[0.5, 0.2, np.full(k - 2, 0.3 / (k - 2))])
    h = np.bincount(x, minlength=k) / n
    w = gkrr_interval_halfwidth(gk, n, 0.05)
    worst = []
    for seed in range(300):
        y = gk.randomize(x, rng=seed)
        H = gk.unbiased_estimate(np.bincount(y, minlength=k) / n)
        worst.append(np.abs(H - h).max())
    worst = np.array(worst)
    assert np.mean(worst <= w) >= 0.95
    assert w <= 3 * np.quantile(worst, 0.95)


def test_bad_arguments_are_refused():
    gk = GKRR(ClusteredMetric(2, 2, 0.5), 1.0)
    with pytest.raises(Exception, match="at least one"):
        gkrr_interval_halfwidth(gk, 0)
    with pytest.raises(Exception, match="beta"):
        gkrr_interval_halfwidth(gk, 10, beta=1.5)


@pytest.fixture
def clustered_table():
    import pyarrow as pa

    labels = [f"i{j}" for j in range(6)]
    rng = np.random.default_rng(1)
    users = np.repeat(np.arange(300), 4)
    items = rng.choice(6, size=users.size, p=[0.5, 0.2, 0.1, 0.1, 0.05, 0.05])
    table = pa.table({"user": users, "item": [labels[i] for i in items]})
    return table, ClusteredMetric(2, 3, 0.2), FiniteDomain(np.array(labels, dtype=object))


@pytest.mark.parametrize("release", [releases.itemwise, releases.frequency])
def test_releases_report_the_interval(clustered_table, release, monkeypatch):
    """The reported half-width is the Bernstein bound (checked against the dense matrix above) of the GKRR the
    release ran (read off its call, not rebuilt from the reported alpha_0) for its 1,200 randomized items."""
    import userdp.releases.dem as R
    from tests.dem.exact_laws import Spy

    spy = Spy(R.frequency_randomizer)
    monkeypatch.setattr(R, "frequency_randomizer", spy)
    table, space, domain = clustered_table
    rel = release(table, space, domain, 40.0, delta=1e-6, rng=3)
    w = rel.extras["interval_halfwidth"]
    assert rel.error.bound == w and rel.error.confidence == 0.95 and rel.extras["interval_confidence"] == 0.95
    assert w == pytest.approx(_brute(spy.calls[0][2][0], 1200, 0.05, False), rel=1e-9)
    assert rel.extras["unbiased"].shape == (6,) and rel.extras["unbiased"].sum() == pytest.approx(1.0)
    sampled = release(table, space, domain, 40.0, delta=1e-6, samples=8, rng=3)
    assert sampled.extras["interval_halfwidth"] > 0 and "average item shares" in sampled.error.description
    with pytest.raises(Exception, match="beta"):
        release(table, space, domain, 40.0, delta=1e-6, rng=3, beta=0.0)

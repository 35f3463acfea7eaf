"""Theorem 6.5's Eq. (8) for any ``(alpha_0, 0)`` randomizer (issue 36, item 12): computed from the
randomizer's own transition matrix by :func:`userdp.dem.frequency.theorem_6_5_bound`, reported by
``userdp.plan.frequency`` (and ``userdp plan frequency``) beside GKRR's closed form Eq. (9)."""

from __future__ import annotations

import numpy as np
import pytest

from userdp import plan
from userdp.dem.frequency import frequency_randomizer, theorem_6_5_bound
from userdp.errors import ParameterError
from userdp.metrics import ClusteredMetric


def _tree_demd(F: np.ndarray, K: np.ndarray, space: ClusteredMetric) -> np.ndarray:
    """Exact ``d_EM`` on the clustered metric's tree (item edges r/2, cluster edges (1 - r)/2) between rows of
    ``F`` (signed, the unprojected estimates) and ``K``, of equal total mass."""
    s, t, r = space.n_clusters, space.cluster_size, space.r
    d = F - K
    return r / 2 * np.abs(d).sum(axis=-1) + (1 - r) / 2 * np.abs(d.reshape(*d.shape[:-1], s, t).sum(-1)).sum(-1)


@pytest.mark.parametrize("randomizer", ["gkrr", "exponential"])
@pytest.mark.parametrize("alpha", [20.0, 80.0])
def test_eq8_bounds_the_mean_error_of_the_unprojected_estimate(randomizer, alpha):
    """Algorithm 4's estimator ``H = v A^{-1}`` simulated from the randomizer's exact transition law (3,000
    releases of 300 items): its mean ``d_EM`` is at most Eq. (8), and not far below it (the bound is used,
    not vacuous)."""
    space = ClusteredMetric(3, 3, 0.2)
    rz, _ = frequency_randomizer(space, alpha, 1e-6, 30, None, randomizer)
    A = rz.transition_matrix()
    A = A / A.sum(axis=1, keepdims=True)
    B = np.linalg.inv(A)
    counts = np.array([60, 50, 40, 30, 30, 30, 20, 20, 20])  # 300 items
    K = counts / counts.sum()
    rng = np.random.default_rng(5)
    reps = 3000
    v = np.zeros((reps, 9))
    for x, c in enumerate(counts):
        v += rng.multinomial(c, A[x], size=reps)
    err = _tree_demd((v / counts.sum()) @ B, K, space)
    bound = theorem_6_5_bound(rz.transition_matrix(), space, int(counts.sum()))
    assert err.mean() <= bound
    assert err.mean() >= bound / 6


@pytest.mark.parametrize("model", ["local", "central"])
def test_the_plan_reports_eq8_at_most_eq9_for_gkrr(model):
    """Eq. (9) is Eq. (8) with GKRR's norms bounded in closed form: the computed Eq. (8) is at most it, at the
    release's calibrated alpha_0, in the local and the central (Corollary 6.8) model."""
    for alpha, (s, t, r) in [(25.0, (16, 9, 0.25)), (100.0, (4, 8, 0.1)), (400.0, (10, 5, 0.4))]:
        p = plan.frequency(alpha, persons=1000, items_per_person=50, clusters=s, cluster_size=t, r=r, reps=4,
                           model=model)  # fmt: skip
        assert p.extra["theorem eq8"] is not None and p.extra["theorem"] is not None
        assert 0 < p.extra["theorem eq8"] <= p.extra["theorem"] * (1 + 1e-9)


def test_eq8_for_the_exponential_randomizer_and_none_off_the_clustered_metric():
    """The exponential randomizer has no closed form (Eq. (9) is None) but Eq. (8) applies to it; on a metric
    that is not clustered, the theorem does not apply."""
    from userdp.metrics import FiniteMetric

    p = plan.frequency(50.0, persons=500, items_per_person=20, clusters=4, cluster_size=4, r=0.2,
                       randomizer="exponential", reps=4)  # fmt: skip
    assert p.extra["theorem"] is None and p.extra["theorem eq8"] > 0
    x = np.arange(6.0)
    line = FiniteMetric(np.abs(x[:, None] - x[None, :]) / 5)
    assert plan.frequency(50.0, persons=500, items_per_person=20, space=line, reps=4).extra["theorem eq8"] is None


def test_eq8_refuses_a_matrix_of_the_wrong_size_and_gives_none_for_a_singular_one():
    space = ClusteredMetric(2, 2, 0.3)
    with pytest.raises(ParameterError, match="4 x 4"):
        theorem_6_5_bound(np.eye(3), space, 10)
    assert theorem_6_5_bound(np.full((4, 4), 0.25), space, 10) is None
    assert theorem_6_5_bound(np.eye(4), space, 10) == 0.0  # no noise: no error

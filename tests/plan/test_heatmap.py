"""The heatmap's calibrated simulation against the release's measured EMD on the bundled data."""

from __future__ import annotations

import numpy as np
import pytest

from userdp import datasets, plan, releases
from userdp.errors import ParameterError
from userdp.heatmaps import heatmap_emd, user_grid_sum
from userdp.report.demo import MIDTOWN


@pytest.mark.parametrize("algorithm", ["auto", "laplace"])
def test_heatmap_prediction_is_within_2x_of_the_measured_emd(algorithm):
    """Midtown Manhattan, 64 cells a side, epsilon 1: from the public sizes (about 1,000 users, 37 points
    each) the predicted median EMD is within 2x of 6 releases' on the Foursquare check-ins."""
    fs = datasets.foursquare_nyc()
    box, shape = releases.grid_of(MIDTOWN, 64)
    s = user_grid_sum(fs, shape, box, drop_outside=True)
    err = [heatmap_emd(s, releases.heatmap(fs, MIDTOWN, 64, 1.0, algorithm, drop_outside=True, rng=i).value)
           for i in range(6)]  # fmt: skip
    p = plan.heatmap(1.0, shape=shape, persons=1000, points_per_person=37, algorithm=algorithm, reps=8)
    assert 0.5 <= p.median / np.median(err) <= 2.0, (p.median, np.median(err))


def test_heatmap_plan_is_monotone_and_refuses_bad_parameters():
    small = plan.heatmap(0.5, shape=(32, 32), persons=500, points_per_person=10, reps=4)
    large = plan.heatmap(8.0, shape=(32, 32), persons=500, points_per_person=10, reps=4)
    assert large.median < small.median
    with pytest.raises(ParameterError):
        plan.heatmap(1.0, shape=(32, 32), persons=500, points_per_person=10, algorithm="nope")
    with pytest.raises(ParameterError):
        plan.heatmap(1.0, shape=(32, 32), persons=500, points_per_person=10, density=np.ones((4, 4)))


def test_synthetic_users_are_distributions_of_mass_one():
    """The plan simulates the release on synthetic users shaped as the engines hand them to the mechanism: each
    user's points as one distribution of mass 1 (a user with 30 points weighs 1, not 30), whatever the number
    of points, places and users; otherwise the simulated signal, and the predicted error, would be off by the
    mean number of points per user."""
    from userdp.plan.heatmap import synthetic_grid_sum

    for persons, points, places in ((1, 30.0, 3), (7, 5.0, 1), (400, 37.0, 3)):
        s = synthetic_grid_sum((16, 16), persons, points, places=places, seed=persons)
        assert s.min() >= 0 and s.sum() == pytest.approx(persons, rel=1e-12)
        assert s.max() <= persons

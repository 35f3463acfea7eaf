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

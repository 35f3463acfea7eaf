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


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_the_exact_law_matches_the_release_s_draws(fashion, eps):
    """On the bundled Amazon Fashion curve, the predicted median and 90% quantile of |error| are within 12% of
    400 releases'; at 1.3 epsilon (the noise 30% off) the prediction is refuted."""
    g, curve = fashion
    truth = g.distinct_count()
    err = _measured(curve, truth, eps)
    p = plan.distinct(eps, curve=curve, distinct=truth)
    for c in (0.5, 0.9):
        assert abs(p.quantiles[c] / np.quantile(err, c) - 1) < 0.12, (c, p.quantiles[c], np.quantile(err, c))
    off = plan.distinct(1.3 * eps, curve=curve, distinct=truth)
    assert abs(off.median / np.median(err) - 1) > 0.15


def test_the_synthetic_predictor_is_within_2x_of_the_measured_error(fashion):
    """From public sizes only (persons, distinct elements, mean elements per person) the predicted median is
    within 2x of the measured median on the bundled data, at every epsilon tried."""
    g, curve = fashion
    truth = g.distinct_count()
    sizes = {"persons": g.n_persons, "distinct": truth, "items_per_person": float(g.degrees().mean())}
    for eps in (0.5, 1.0, 4.0):
        measured = np.median(_measured(curve, truth, eps, runs=200))
        ratio = plan.distinct(eps, **sizes).median / measured
        assert 0.5 <= ratio <= 2.0, (eps, ratio)


def test_the_theorem_bound_holds_on_data_with_few_items_per_person():
    """Eq. (8) with userdp's constants: on curves of persons holding at most l* elements, the release falls
    short by more than the bound with probability at most 2 beta (measured: never in 300 releases)."""
    beta, eps, l_star = 0.05, 1.0, 5
    bound = plan.theorem_bound(eps, l_star, beta)
    for curve in (np.minimum(np.arange(1, 101) * 400, 2000), np.full(100, 2000)):  # saturating at l* or at once
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

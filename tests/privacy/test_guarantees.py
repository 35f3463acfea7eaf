"""Typed guarantees, conversions (Imola et al. section 3, section 8, Fact 5.1) and composition."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from userdp.errors import ParameterError
from userdp.privacy import (
    ApproxDP,
    DiscreteEMDDP,
    EMDMetricDP,
    ItemMetricDP,
    Model,
    Neighbours,
    PureDP,
    alpha_from_targets,
    compose,
    group_privacy,
    metric_from_dp,
)


def test_paper_alpha_example():
    """Section 3 concrete example: protect (q=0.08, tau=1/30) and (q=0.008, tau=1) at eps=0.2 -> alpha=25."""
    alpha, binding = alpha_from_targets([(0.2, 0.08, 1 / 30), (0.2, 0.008, 1.0)])
    assert alpha == pytest.approx(25.0)
    assert binding == 1
    with pytest.raises(ParameterError):
        alpha_from_targets([(0.2, 0.0, 1.0)])
    with pytest.raises(ParameterError):
        alpha_from_targets([])


def test_parameter_validation():
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ParameterError):
            PureDP(bad)
        with pytest.raises(ParameterError):
            EMDMetricDP(bad)
    with pytest.raises(ParameterError):
        ApproxDP(1.0, 1.0)
    with pytest.raises(ParameterError):
        DiscreteEMDDP(1.0, 1e-6, r=0.0)
    with pytest.raises(ParameterError, match="unbounded central"):
        EMDMetricDP(1.0, model=Model.CENTRAL, bounded=False)


def test_metric_dp_per_distance_and_user_level():
    g = EMDMetricDP(25.0, 1e-9, model=Model.CENTRAL)
    assert g.at_distance(0.008) == (pytest.approx(0.2), 1e-9)
    ul = g.user_level_dp()
    assert ul.epsilon == 25.0 and ul.delta == 1e-9 and ul.neighbours is Neighbours.REPLACE_USER
    local = EMDMetricDP(2.0)
    assert isinstance(local.user_level_dp(0.5), PureDP) and local.user_level_dp(0.5).epsilon == 1.0
    curved = EMDMetricDP(10.0, curve=lambda d: (min(10 * d, 3.0), 0.0))
    assert curved.at_distance(0.9) == (3.0, 0.0)
    with pytest.raises(ParameterError):
        g.at_distance(1.5)
    assert "e^(25 d)" in g.describe()


def test_group_privacy_formula_and_paper_fact_5_1():
    """Group privacy delta = delta (e^{k eps} - 1)/(e^eps - 1). Fact 5.1's delta e^k agrees (is an upper
    bound) only for eps <= 1; for eps = 3, k = 2 it is too small."""
    assert group_privacy(0.5, 0.0, 3) == (1.5, 0.0)
    e, d = group_privacy(0.5, 1e-6, 3)
    assert e == 1.5 and d == pytest.approx(1e-6 * (1 + math.exp(0.5) + math.exp(1.0)))
    for eps in (0.1, 0.5, 1.0):
        for k in (1, 2, 5, 10):
            assert group_privacy(eps, 1e-6, k)[1] <= 1e-6 * math.exp(k)
    assert group_privacy(3.0, 1e-6, 2)[1] > 1e-6 * math.exp(2)


def test_group_privacy_exact_on_randomized_response():
    """Exact check: a chain x0 ~ x1 ~ x2 where each step is (eps, delta)-DP. Mechanism: with probability
    delta output the input, else k-ary randomized response with parameter eps. The hockey-stick
    divergence between the ends at e^{2 eps} is at most the group-privacy delta."""
    eps, delta, k = 0.7, 0.01, 3
    rr = np.full((k, k), 1.0)
    np.fill_diagonal(rr, math.exp(eps))
    rr /= rr.sum(axis=1, keepdims=True)
    P = (1 - delta) * rr + delta * np.eye(k)

    def hockey(p, q, e):
        return np.maximum(p - math.exp(e) * q, 0).sum()

    assert hockey(P[0], P[1], eps) <= delta + 1e-15  # one step is (eps, delta)-DP
    e2, d2 = group_privacy(eps, delta, 2)
    assert hockey(P[0], P[2], e2) <= d2 + 1e-15


def test_discrete_emd_at_distance():
    g = DiscreteEMDDP(0.5, 1e-8, r=0.1)
    assert g.at_distance(0.05) == (0.5, 1e-8)
    assert g.at_distance(0.1)[0] == 0.5
    e, d = g.at_distance(0.25)
    assert e == pytest.approx(1.5) and d == pytest.approx(group_privacy(0.5, 1e-8, 3)[1])
    # for d >= r, eps ceil(d/r) <= 2 eps d / r (section 5)
    for dist in np.linspace(0.1, 1.0, 19):
        assert g.at_distance(dist)[0] <= 2 * 0.5 * dist / 0.1 + 1e-12


def test_metric_from_dp():
    assert metric_from_dp(ApproxDP(1.0, 1e-6), d_min=0.1) == (pytest.approx(10.0), 1e-6)


@given(st.lists(st.floats(0.01, 5.0), min_size=1, max_size=6))
def test_composition_adds(eps_list):
    total = compose(PureDP(e) for e in eps_list)
    assert isinstance(total, PureDP)
    assert total.epsilon == pytest.approx(sum(eps_list))
    mixed = compose([ApproxDP(e, 1e-7) for e in eps_list])
    assert mixed.delta == pytest.approx(1e-7 * len(eps_list))


def test_composition_refuses_mixed_kinds():
    with pytest.raises(TypeError):
        PureDP(1.0).compose(PureDP(1.0, neighbours=Neighbours.REPLACE_USER))
    with pytest.raises(TypeError):
        PureDP(1.0).compose(EMDMetricDP(1.0))
    with pytest.raises(TypeError):
        EMDMetricDP(1.0).compose(EMDMetricDP(1.0, model=Model.CENTRAL))
    with pytest.raises(TypeError):
        DiscreteEMDDP(1.0, 0.0, 0.1).compose(DiscreteEMDDP(1.0, 0.0, 0.2))
    assert ItemMetricDP(1.0, metric="m").compose(ItemMetricDP(2.0, metric="m")).alpha == 3.0
    assert EMDMetricDP(1.0, 1e-9).compose(EMDMetricDP(2.0, 1e-9)).alpha == 3.0

"""Tight composition across releases (privacy loss distributions from dp-accounting): against the package's
own results, against the exact optimal composition of pure-DP mechanisms (Kairouz, Oh & Viswanath), and
against basic composition as an upper bound; the ledger's tight total."""

from __future__ import annotations

import math

import pytest

from userdp.errors import ParameterError
from userdp.privacy import ApproxDP, Neighbours, PureDP, Session
from userdp.privacy.composition import DiscreteLaplaceLoss, DPLoss, basic_epsilon, loss_from_dict, tight_epsilon


def _optimal_delta(eps: float, k: int, eps_g: float) -> float:
    """The exact delta at eps_g of k-fold composition of eps-DP (Kairouz, Oh & Viswanath 2015, Theorem 3.3,
    the randomized-response pair): sum_l C(k, l) max(0, e^{(k-l) eps} - e^{eps_g + l eps}) / (1 + e^eps)^k."""
    total = 0.0
    for l in range(k + 1):
        total += math.comb(k, l) * max(0.0, math.exp((k - l) * eps) - math.exp(eps_g + l * eps))
    return total / (1 + math.exp(eps)) ** k


@pytest.mark.parametrize(("eps", "k", "delta"), [(0.1, 100, 1e-6), (0.5, 20, 1e-5), (1.0, 5, 1e-3)])
def test_tight_epsilon_is_the_optimal_composition_up_to_the_discretization(eps, k, delta):
    got = tight_epsilon([DPLoss(eps)] * k, delta)
    assert got <= k * eps  # never worse than basic composition
    assert _optimal_delta(eps, k, got) <= delta * (1 + 1e-6)  # a valid epsilon for delta, exactly checked
    assert _optimal_delta(eps, k, got - 0.02) > delta  # and within 0.02 of the smallest
    if eps <= 0.1:
        assert got < 0.5 * k * eps  # the gain that motivates it


def test_tight_epsilon_matches_dp_accountings_own_composition():
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld

    own = pld.from_privacy_parameters(common.DifferentialPrivacyParameters(0.3, 1e-7))
    own = own.compose(pld.from_privacy_parameters(common.DifferentialPrivacyParameters(0.2, 0.0)))
    lap = pld.from_discrete_laplace_mechanism(parameter=1 / 40, sensitivity=10)
    expected = own.compose(lap).get_epsilon_for_delta(1e-5)
    got = tight_epsilon([DPLoss(0.3, 1e-7), DPLoss(0.2), DiscreteLaplaceLoss(40, 10)], 1e-5)
    assert got == pytest.approx(expected, rel=1e-9)


def test_basic_composition_bounds_it_and_deltas_below_the_parts_are_infinite():
    parts = [DPLoss(1.0, 1e-6), DPLoss(0.5, 2e-6), DiscreteLaplaceLoss(8, 4)]
    assert basic_epsilon(parts) == (2.0, 3e-6)
    assert tight_epsilon(parts, 3e-6) <= 2.0
    assert tight_epsilon(parts, 1e-7) == math.inf  # the parts alone need 3e-6
    assert tight_epsilon([], 1e-6) == 0.0
    with pytest.raises(ParameterError):
        DPLoss(-1.0)
    with pytest.raises(ParameterError):
        tight_epsilon(parts, 1.5)
    assert loss_from_dict(DiscreteLaplaceLoss(8, 4).to_dict()) == DiscreteLaplaceLoss(8, 4)


def test_the_ledger_reports_the_tight_total_and_keeps_charging_by_basic_composition(tmp_path):
    s = Session(ApproxDP(6.0, 1e-5, Neighbours.ADD_REMOVE_USER))
    for _ in range(50):
        s.charge(PureDP(0.1), "small")
    tight, delta = s.tight_spent()
    assert delta == 1e-5 and tight < 3.0 < s.spent().epsilon == pytest.approx(5.0)
    path = tmp_path / "l.json"
    s.charge(PureDP(0.2), "laplace", losses=[DiscreteLaplaceLoss(40, 8)])
    s.save(path)
    again = Session.load(path)
    assert again.ledger[-1].losses == (DiscreteLaplaceLoss(40, 8),)
    assert again.tight_spent() == s.tight_spent()
    with pytest.raises(ParameterError, match="imply more"):
        s.charge(PureDP(0.1), "lies", losses=[DPLoss(0.5)])
    assert Session(PureDP(3.0)).tight_spent() is None  # pure budget: pure releases add exactly


def test_userdp_ledger_show_prints_the_tight_total(tmp_path, capsys):
    from userdp.cli import main

    path = tmp_path / "l.json"
    s = Session(ApproxDP(20.0, 1e-6, Neighbours.ADD_REMOVE_USER))
    for _ in range(40):
        s.charge(PureDP(0.25), "q")
    s.save(path)
    assert main(["ledger", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "tight composition" in out and "epsilon 10" in out


def test_laplace_gaussian_discrete_gaussian_and_randomized_response_have_their_exact_plds():
    """Each mechanism's tight epsilon is the package's own (its PLD), is at most basic composition's, and is
    right on closed forms: one Laplace of scale b at sensitivity 1 is exactly 1/b-DP; one Gaussian's delta at
    the tight epsilon is its exact delta (Balle & Wang); a single randomized response is ln(1 + (1-p)k/p)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    from userdp.privacy.composition import (
        DiscreteGaussianLoss,
        GaussianLoss,
        LaplaceLoss,
        RandomizedResponseLoss,
        _gaussian_delta,
    )

    assert tight_epsilon([LaplaceLoss(2.0)], 1e-9) == pytest.approx(0.5, abs=2e-3)
    lap = pld.from_laplace_mechanism(2.0).self_compose(10)
    assert tight_epsilon([LaplaceLoss(2.0)] * 10, 1e-6) == pytest.approx(lap.get_epsilon_for_delta(1e-6), rel=1e-9)
    assert tight_epsilon([LaplaceLoss(2.0)] * 10, 1e-6) < 5.0  # basic composition: 10 / 2
    g = tight_epsilon([GaussianLoss(3.0)], 1e-5)
    assert _gaussian_delta(3.0, 1.0, g) <= 1e-5 * (1 + 1e-3) and _gaussian_delta(3.0, 1.0, g - 0.01) > 1e-5
    own = pld.from_gaussian_mechanism(3.0).self_compose(4).get_epsilon_for_delta(1e-5)
    assert tight_epsilon([GaussianLoss(3.0)] * 4, 1e-5) == pytest.approx(own, rel=1e-9)
    dg = pld.from_discrete_gaussian_mechanism(5.0, sensitivity=2).self_compose(3).get_epsilon_for_delta(1e-6)
    assert tight_epsilon([DiscreteGaussianLoss(5.0, 2)] * 3, 1e-6) == pytest.approx(dg, rel=1e-9)
    rr = RandomizedResponseLoss(0.5, 4)
    assert rr.epsilon_delta()[0] == pytest.approx(math.log(1 + 0.5 * 4 / 0.5))
    assert tight_epsilon([rr], 0.0) == pytest.approx(rr.epsilon_delta()[0], abs=2e-3)
    for loss in (LaplaceLoss(1.5, 2.0), GaussianLoss(2.0, 1.0, 1.0), DiscreteGaussianLoss(3.0), rr):
        assert loss_from_dict(loss.to_dict()) == loss  # stored in the ledger and read back
    with pytest.raises(ParameterError):
        LaplaceLoss(0.0)
    with pytest.raises(ParameterError):
        RandomizedResponseLoss(0.5, 1)


def test_gaussian_and_laplace_losses_charge_their_exact_parameters():
    """What basic composition charges for each stated loss, against the definitions computed here: a Gaussian
    of sigma at sensitivity D is charged Balle & Wang's exact delta at its epsilon (from scipy's normal cdf),
    the Laplace and discrete Laplace ``sensitivity / scale``, randomized response ``ln(1 + (1 - p) k / p)``.
    A delta that forgets the ``e^eps`` factor, or a sigma read as a variance, is caught."""
    from scipy.stats import norm

    from userdp.privacy.composition import GaussianLoss, LaplaceLoss, RandomizedResponseLoss

    for sigma, sens, eps in [(3.0, 1.0, 1.0), (1.0, 2.0, 0.5), (0.5, 1.0, 3.0), (2.0, 1.0, 0.1)]:
        a, b = sens / (2 * sigma), eps * sigma / sens
        expected = norm.cdf(a - b) - math.exp(eps) * norm.cdf(-a - b)
        e, d = GaussianLoss(sigma, sens, eps).epsilon_delta()
        assert e == eps and d == pytest.approx(expected, rel=1e-9)
    assert LaplaceLoss(4.0, 3.0).epsilon_delta() == (0.75, 0.0)
    assert DiscreteLaplaceLoss(40, 10).epsilon_delta() == (0.25, 0.0)
    assert RandomizedResponseLoss(0.25, 3).epsilon_delta()[0] == pytest.approx(math.log(1 + 0.75 * 3 / 0.25))

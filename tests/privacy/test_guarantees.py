"""Typed guarantees, conversions (Imola et al. section 3, section 8, Fact 5.1) and composition."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from userdp.errors import BudgetExceededError, ParameterError
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
    convert_to_budget,
    group_privacy,
    metric_from_dp,
)

AR, REPLACE, LOCAL = Neighbours.ADD_REMOVE_USER, Neighbours.REPLACE_USER, Neighbours.ANY_TWO_INPUTS
REPLACE_SAME, LOCAL_SAME = Neighbours.REPLACE_USER_SAME_SIZE, Neighbours.TWO_INPUTS_SAME_SIZE


def _group(eps: float, delta: float, k: int) -> tuple[float, float]:
    """Group privacy over ``k`` steps from its derivation (Dwork & Roth 2014, section 2.3): each step multiplies
    by ``e^eps`` and adds ``delta``, so ``(k eps, delta sum_{j < k} e^{j eps})``."""
    return k * eps, delta * sum(math.exp(j * eps) for j in range(k))


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
    assert ul.epsilon == 25.0 and ul.delta == 1e-9 and ul.neighbours is REPLACE_SAME  # bounded: same sizes only
    assert "by data of the same size" in ul.describe()
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
    assert e == 1.5 and d == pytest.approx(1e-6 * (1 + math.exp(0.5) + math.exp(1.0)), rel=1e-12)
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
    assert e == pytest.approx(1.5) and d == pytest.approx(_group(0.5, 1e-8, 3)[1], rel=1e-12)
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


def test_composition_past_delta_one_is_a_budget_error_not_a_parameter_error():
    """Deltas summing to 1 or more protect nothing: composing them is refused as over any budget (it used to
    cap delta at 1 - 1e-300, which is 1.0 in floating point, and then fail with ParameterError)."""
    for a, b in [
        (ApproxDP(1.0, 0.6), ApproxDP(1.0, 0.6)),
        (ApproxDP(1.0, 0.5), ApproxDP(1.0, 0.5)),
        (EMDMetricDP(1.0, 0.7), EMDMetricDP(1.0, 0.3)),
        (DiscreteEMDDP(1.0, 0.9, 0.1), DiscreteEMDDP(1.0, 0.2, 0.1)),
        (ItemMetricDP(1.0, 0.5), ItemMetricDP(1.0, 0.5)),
    ]:
        with pytest.raises(BudgetExceededError, match="protects nothing"):
            a.compose(b)
    with pytest.raises(BudgetExceededError):
        compose([ApproxDP(0.1, 0.4)] * 3)
    assert ApproxDP(1.0, 0.4).compose(ApproxDP(1.0, 0.5)).delta == pytest.approx(0.9)


# ------------------------------------------------------------------ charging a release to a budget of one kind


def _hockey(p: np.ndarray, q: np.ndarray, eps: float) -> float:
    """Hockey-stick divergence sup_S P(S) - e^eps Q(S)."""
    return float(np.maximum(p - math.exp(eps) * q, 0.0).sum())


def _is_dp(p: np.ndarray, q: np.ndarray, eps: float, delta: float) -> bool:
    return _hockey(p, q, eps) <= delta + 1e-15 and _hockey(q, p, eps) <= delta + 1e-15


def test_add_remove_release_costs_group_privacy_for_two_steps_under_replace_and_it_is_tight():
    """D -> D without user i -> D with user i's data replaced: two add/remove steps. Exact chains whose
    steps are (eps, delta)-DP for add/remove and whose ends need exactly the converted cost."""
    eps, delta = 0.7, 1e-3
    cost = convert_to_budget(ApproxDP(eps, delta, AR), PureDP(4.0, neighbours=REPLACE))
    assert cost.neighbours is REPLACE and cost.epsilon == 2 * eps
    assert cost.delta == pytest.approx(delta * (1 + math.exp(eps)), rel=1e-14)
    assert convert_to_budget(PureDP(eps), ApproxDP(4.0, 1e-6, REPLACE)) == PureDP(2 * eps, neighbours=REPLACE)
    # pure: a count released with two-sided geometric noise, P_t(y) ~ exp(-eps |y - t|) on the integers (the
    # window below; with delta = 0 only pointwise ratios matter). Each step is eps-DP; the ends need 2 eps.
    ys = np.arange(-30, 33)
    pure = [math.tanh(eps / 2) * np.exp(-eps * np.abs(ys - t)) for t in range(3)]
    assert _is_dp(pure[0], pure[1], eps, 0.0) and _is_dp(pure[1], pure[2], eps, 0.0)
    pure_cost = convert_to_budget(PureDP(eps), PureDP(4.0, neighbours=REPLACE))
    assert _is_dp(pure[0], pure[2], pure_cost.epsilon, 0.0)
    assert not _is_dp(pure[0], pure[2], pure_cost.epsilon * (1 - 1e-6), 0.0)  # tight
    # approximate: P0 = (delta (1 + e^eps), rest), P1 = (delta, rest), P2 = (0, 1)
    chain = [np.array([delta * (1 + math.exp(eps)), 1 - delta * (1 + math.exp(eps))]), np.array([delta, 1 - delta])]
    chain.append(np.array([0.0, 1.0]))
    assert _is_dp(chain[0], chain[1], eps, delta) and _is_dp(chain[1], chain[2], eps, delta)
    assert _is_dp(chain[0], chain[2], cost.epsilon, cost.delta)
    assert _hockey(chain[0], chain[2], cost.epsilon) == pytest.approx(cost.delta, rel=1e-12)  # tight
    with pytest.raises(BudgetExceededError, match="delta reaches 1"):
        convert_to_budget(ApproxDP(3.0, 0.2, AR), PureDP(10.0, neighbours=REPLACE))


def test_local_release_costs_the_same_under_replace_exactly():
    """A local release: every user's report comes from one (eps, delta) randomizer (randomized response that
    leaks the bit with probability delta); the release is the tuple of reports. Replacing one user's bit
    changes one factor of the product law, so replace-one-user costs exactly (eps, delta)."""
    eps, delta = 0.9, 1e-2
    rr = np.array([[math.exp(eps), 1.0], [1.0, math.exp(eps)]]) / (1 + math.exp(eps))
    # outputs: (rr 0, rr 1, leak 0, leak 1)
    randomizer = np.hstack([(1 - delta) * rr, delta * np.eye(2)])
    assert _is_dp(randomizer[0], randomizer[1], eps, delta)  # local (eps, delta)-DP: any two inputs
    cost = convert_to_budget(ApproxDP(eps, delta, LOCAL), PureDP(4.0, neighbours=REPLACE))
    assert cost == ApproxDP(eps, delta, REPLACE)
    other_users = randomizer[0]
    for x, x_new in [(0, 1), (1, 0)]:
        before = np.kron(randomizer[x], np.kron(other_users, other_users))  # three users, the first replaced
        after = np.kron(randomizer[x_new], np.kron(other_users, other_users))
        assert _is_dp(before, after, cost.epsilon, cost.delta)
        assert _hockey(before, after, cost.epsilon) == pytest.approx(cost.delta, rel=1e-9)  # tight
        assert not _is_dp(before, after, cost.epsilon * 0.99, cost.delta)
    pure_local = PureDP(eps, neighbours=LOCAL)
    assert convert_to_budget(pure_local, ApproxDP(4.0, 1e-6, LOCAL)) is pure_local  # same relation: as is


@pytest.mark.parametrize(
    "release,budget_relation,reason",
    [
        (PureDP(1.0, neighbours=REPLACE), AR, "does not bound adding or removing a user"),
        (PureDP(1.0, neighbours=LOCAL), AR, "not whether the user took part"),
        (PureDP(1.0, neighbours=AR), LOCAL, "does not protect a user's data from the curator"),
        (ApproxDP(1.0, 1e-6, REPLACE), LOCAL, "does not protect a user's data from the curator"),
        (EMDMetricDP(1.0, model=Model.CENTRAL), AR, r"implies 1-DP for replace .* does not bound adding"),
        (EMDMetricDP(1.0), AR, r"implies 1-DP for any two inputs .* not whether the user took part"),
        (EMDMetricDP(1.0, model=Model.CENTRAL), LOCAL, "from the curator"),
        (DiscreteEMDDP(1.0, 0.0, 0.5, Model.CENTRAL), AR, "does not bound adding"),
        (ItemMetricDP(1.0, metric="m"), REPLACE, "protects one item, not a user's data"),
        (PureDP(1.0, neighbours=Neighbours.ITEM), REPLACE, "protects one item"),
    ],
)
def test_conversions_that_are_not_valid_are_refused_with_the_reason(release, budget_relation, reason):
    budget = PureDP(100.0, neighbours=budget_relation)
    with pytest.raises(BudgetExceededError, match=reason):
        convert_to_budget(release, budget)


def test_demd_releases_cost_their_user_level_guarantee_at_distance_one():
    replace, local = PureDP(100.0, neighbours=REPLACE), PureDP(100.0, neighbours=LOCAL)
    same = PureDP(100.0, neighbours=REPLACE_SAME)
    central = EMDMetricDP(25.0, 1e-9, model=Model.CENTRAL)
    assert convert_to_budget(central, same) == ApproxDP(25.0, 1e-9, REPLACE_SAME)
    local_emd = EMDMetricDP(2.0, bounded=False)
    assert convert_to_budget(local_emd, local) == PureDP(2.0, neighbours=LOCAL)
    assert convert_to_budget(local_emd, replace) == PureDP(2.0, neighbours=REPLACE)
    assert convert_to_budget(EMDMetricDP(2.0), same) == PureDP(2.0, neighbours=REPLACE_SAME)
    curved = EMDMetricDP(10.0, model=Model.CENTRAL, curve=lambda d: (min(10 * d, 3.0), 0.0))
    assert convert_to_budget(curved, same) == PureDP(3.0, neighbours=REPLACE_SAME)
    # discrete: ceil(1 / r) = 4 steps of group privacy
    discrete = DiscreteEMDDP(0.5, 1e-8, r=0.25, model=Model.CENTRAL)
    eps4, delta4 = _group(0.5, 1e-8, 4)
    for release, relation, budget in ((discrete, REPLACE, replace), (DiscreteEMDDP(0.5, 1e-8, r=0.25), LOCAL, local)):
        cost = convert_to_budget(release, budget)
        assert isinstance(cost, ApproxDP) and cost.neighbours is relation
        assert cost.epsilon == pytest.approx(eps4, rel=1e-12) and cost.delta == pytest.approx(delta4, rel=1e-12)
    assert convert_to_budget(DiscreteEMDDP(0.5, 0.0, r=1.0), replace) == PureDP(0.5, neighbours=REPLACE)
    with pytest.raises(BudgetExceededError, match="delta reaches 1"):
        convert_to_budget(DiscreteEMDDP(2.0, 0.01, r=0.1, model=Model.CENTRAL), replace)


def test_a_bounded_guarantee_keeps_its_same_size_qualifier_through_every_conversion():
    """Issue 33: a bounded (equal-sizes) d_EM-DP guarantee read at d_EM = 1 protects only two datasets in which
    the user holds the same number of items. Its user-level guarantee says so, in its relation and in
    describe(); it is charged to a budget for replacing a user's data by data of the same size, never to one
    for replacing it by any data (nor to a local budget for any two inputs). Every pair of relations, from the
    definitions: a budget's pairs must all be pairs of the release's relation (cost: its epsilon), or two
    add/remove steps (group privacy), or the charge is refused."""
    covers = {  # budget relation -> the release relations whose pairs include all of its pairs
        AR: {AR},
        REPLACE: {REPLACE, LOCAL},
        REPLACE_SAME: {REPLACE_SAME, REPLACE, LOCAL, LOCAL_SAME},
        LOCAL: {LOCAL},
        LOCAL_SAME: {LOCAL, LOCAL_SAME},
    }
    for budget_nb, ok in covers.items():
        budget = ApproxDP(100.0, 0.5, budget_nb)
        for release_nb in covers:
            release = ApproxDP(0.5, 1e-6, release_nb)
            if release_nb in ok:
                assert convert_to_budget(release, budget) == ApproxDP(0.5, 1e-6, budget_nb)
            elif release_nb is AR and budget_nb in (REPLACE, REPLACE_SAME):  # remove, then add back
                e, d = _group(0.5, 1e-6, 2)
                cost = convert_to_budget(release, budget)
                assert cost.neighbours is budget_nb
                assert cost.epsilon == pytest.approx(e, rel=1e-12) and cost.delta == pytest.approx(d, rel=1e-12)
            else:
                with pytest.raises(BudgetExceededError):
                    convert_to_budget(release, budget)
    central, local_bounded = EMDMetricDP(3.0, model=Model.CENTRAL), EMDMetricDP(3.0)
    assert central.user_level_dp().neighbours is REPLACE_SAME
    assert local_bounded.user_level_dp().neighbours is LOCAL_SAME
    assert EMDMetricDP(3.0, bounded=False).user_level_dp().neighbours is LOCAL
    assert "same size" in central.user_level_dp().describe() and "same size" in local_bounded.user_level_dp().describe()
    for release in (central, local_bounded):
        with pytest.raises(BudgetExceededError, match="same number of items") as exc:
            convert_to_budget(release, PureDP(10.0, neighbours=REPLACE))
        assert "replace-same-size" in str(exc.value)
        assert convert_to_budget(release, PureDP(10.0, neighbours=REPLACE_SAME)) == PureDP(3.0, neighbours=REPLACE_SAME)
    with pytest.raises(BudgetExceededError):
        convert_to_budget(local_bounded, PureDP(10.0, neighbours=LOCAL))


def test_demd_budgets_accept_what_implies_them():
    central = EMDMetricDP(10.0, 1e-9, model=Model.CENTRAL, metric="m")
    local_bounded = EMDMetricDP(10.0, 1e-9, metric="m")
    unbounded = EMDMetricDP(2.0, 1e-10, bounded=False, metric="m")
    assert convert_to_budget(EMDMetricDP(3.0, 1e-10, model=Model.CENTRAL, metric="m"), central).alpha == 3.0
    assert convert_to_budget(EMDMetricDP(3.0, 1e-10, metric="m"), central) == EMDMetricDP(
        3.0, 1e-10, model=Model.CENTRAL, metric="m"
    )  # local -> central (bounded), per distance
    assert convert_to_budget(unbounded, local_bounded) == EMDMetricDP(2.0, 1e-10, metric="m")
    assert convert_to_budget(unbounded, central) == EMDMetricDP(2.0, 1e-10, model=Model.CENTRAL, metric="m")
    for release, reason in [
        (EMDMetricDP(1.0, model=Model.CENTRAL, metric="m"), "from the curator"),
        (EMDMetricDP(1.0, metric="other"), "metric differs"),
        (PureDP(1.0, neighbours=LOCAL), "only d_EM-DP releases"),
        (DiscreteEMDDP(1.0, 0.0, 0.1, metric="m"), "only d_EM-DP releases"),
    ]:
        with pytest.raises(BudgetExceededError, match=reason):
            convert_to_budget(release, local_bounded)
    with pytest.raises(BudgetExceededError, match="equal size"):
        convert_to_budget(local_bounded, EMDMetricDP(10.0, bounded=False, metric="m"))


def test_discrete_demd_budgets_use_group_privacy_to_their_radius():
    budget = DiscreteEMDDP(5.0, 1e-6, r=0.25, model=Model.CENTRAL)
    small = DiscreteEMDDP(0.5, 1e-8, r=0.1)  # local, r' < r: ceil(0.25 / 0.1) = 3 steps
    eps3, delta3 = _group(0.5, 1e-8, 3)
    cost = convert_to_budget(small, budget)
    assert (cost.r, cost.model) == (0.25, Model.CENTRAL)
    assert cost.epsilon == pytest.approx(eps3, rel=1e-12) and cost.delta == pytest.approx(delta3, rel=1e-12)
    assert convert_to_budget(DiscreteEMDDP(0.5, 1e-8, r=0.5, model=Model.CENTRAL), budget) == DiscreteEMDDP(
        0.5, 1e-8, 0.25, Model.CENTRAL
    )  # r' >= r: as is
    assert convert_to_budget(EMDMetricDP(2.0, 1e-9, bounded=False), budget) == DiscreteEMDDP(
        0.5, 1e-9, 0.25, Model.CENTRAL
    )  # unbounded alpha: alpha r
    with pytest.raises(BudgetExceededError, match="any sizes"):
        convert_to_budget(EMDMetricDP(2.0, 1e-9), budget)  # bounded
    with pytest.raises(BudgetExceededError, match="from the curator"):
        convert_to_budget(DiscreteEMDDP(0.5, 1e-8, 0.25, Model.CENTRAL), DiscreteEMDDP(5.0, 1e-6, 0.25))


def test_item_level_budgets_accept_only_their_kind():
    item = ItemMetricDP(5.0, metric="m")
    assert convert_to_budget(ItemMetricDP(1.0, metric="m"), item).alpha == 1.0
    with pytest.raises(BudgetExceededError, match="metric differs"):
        convert_to_budget(ItemMetricDP(1.0, metric="x"), item)
    with pytest.raises(BudgetExceededError, match="only item-level"):
        convert_to_budget(PureDP(1.0, neighbours=LOCAL), item)
    item_dp = PureDP(5.0, neighbours=Neighbours.ITEM)
    assert convert_to_budget(PureDP(1.0, neighbours=Neighbours.ITEM), item_dp).epsilon == 1.0
    with pytest.raises(BudgetExceededError, match="only item-level"):
        convert_to_budget(PureDP(1.0, neighbours=REPLACE), item_dp)

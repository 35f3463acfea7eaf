"""The budget session: one kind of guarantee, every release converted into it, refuses overspending,
releases nothing on refusal."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from userdp.errors import BudgetExceededError, ParameterError
from userdp.privacy import ApproxDP, DiscreteEMDDP, EMDMetricDP, Model, Neighbours, PureDP, Session
from userdp.privacy.result import Release

AR, REPLACE, LOCAL = Neighbours.ADD_REMOVE_USER, Neighbours.REPLACE_USER, Neighbours.ANY_TWO_INPUTS


def test_charge_and_remaining():
    s = Session(PureDP(1.0))
    s.charge(PureDP(0.4), "a")
    assert s.remaining().epsilon == pytest.approx(0.6)
    s.charge(PureDP(0.6), "b")
    assert s.remaining() is None
    with pytest.raises(BudgetExceededError, match="over the budget"):
        s.charge(PureDP(0.01), "c")
    assert [e.label for e in s.ledger] == ["a", "b"]
    assert s.spent().epsilon == pytest.approx(1.0)


def test_one_relation_is_charged_for_every_user_level_release():
    """Issue 13's example: a replace-one-user budget of 4 pays add/remove 1 (costs 2), replace 1 and
    local 1, and then nothing more, whatever the relation."""
    s = Session(PureDP(4.0, neighbours=REPLACE))
    s.charge(PureDP(1.0, neighbours=AR), "add-remove", "m1")
    assert s.spent() == PureDP(2.0, neighbours=REPLACE)
    s.charge(PureDP(1.0, neighbours=REPLACE), "replace")
    s.charge(PureDP(1.0, neighbours=LOCAL), "local")
    assert s.spent().epsilon == pytest.approx(4.0) and s.remaining() is None
    for nb in (AR, REPLACE, LOCAL):
        assert not s.can_spend(PureDP(1e-6, neighbours=nb))
        with pytest.raises(BudgetExceededError, match="over the budget"):
            s.charge(PureDP(1e-6, neighbours=nb), "more")
    first = s.ledger[0]
    assert first.guarantee == PureDP(1.0, neighbours=AR) and first.cost == PureDP(2.0, neighbours=REPLACE)
    assert first.mechanism == "m1"
    assert [e.cost.epsilon for e in s.ledger] == [2.0, 1.0, 1.0]


def test_an_add_remove_session_refuses_other_relations_and_records_nothing():
    s = Session(ApproxDP(1.0, 1e-6))
    s.charge(ApproxDP(0.5, 5e-7))
    assert not s.can_spend(ApproxDP(0.1, 6e-7))  # delta would overflow
    assert s.can_spend(ApproxDP(0.1, 5e-7))
    for release, reason in [
        (PureDP(0.1, neighbours=REPLACE), "does not bound adding or removing"),
        (PureDP(0.1, neighbours=LOCAL), "not whether the user took part"),
        (EMDMetricDP(0.1, model=Model.CENTRAL), "which implies 0.1-DP for replace"),
    ]:
        assert not s.can_spend(release)
        with pytest.raises(BudgetExceededError, match=reason):
            s.charge(release, "refused")
    assert len(s.ledger) == 1 and s.spent() == ApproxDP(0.5, 5e-7)


def test_a_session_has_exactly_one_budget():
    with pytest.raises(ParameterError, match="one kind of guarantee"):
        Session([PureDP(1.0), PureDP(2.0, neighbours=REPLACE)])
    with pytest.raises(ValueError):  # ParameterError is a ValueError
        Session([PureDP(1.0), PureDP(2.0)])
    with pytest.raises(ParameterError):
        Session([])
    assert Session([PureDP(1.0)]).budget == PureDP(1.0)


def test_a_demd_session_converts_local_releases_and_refuses_user_level_ones():
    s = Session(EMDMetricDP(10.0, 1e-9, model=Model.CENTRAL))
    s.charge(EMDMetricDP(8.0, 1e-10, model=Model.CENTRAL))
    assert not s.can_spend(EMDMetricDP(3.0, 0.0, model=Model.CENTRAL))
    assert s.can_spend(EMDMetricDP(2.0, 0.0, model=Model.CENTRAL))
    s.charge(EMDMetricDP(1.0))  # local d_EM-DP: the same (alpha, delta) for the central model
    assert s.spent().alpha == pytest.approx(9.0) and s.remaining().alpha == pytest.approx(1.0)
    assert s.remaining().curve is None
    with pytest.raises(BudgetExceededError, match="only d_EM-DP releases"):
        s.charge(PureDP(0.1, neighbours=REPLACE))
    with pytest.raises(BudgetExceededError, match="only d_EM-DP releases"):
        s.charge(DiscreteEMDDP(0.1, 0.0, 0.1, Model.CENTRAL))
    local = Session(EMDMetricDP(10.0))
    with pytest.raises(BudgetExceededError, match="from the curator"):
        local.charge(EMDMetricDP(1.0, model=Model.CENTRAL))


def test_charging_past_delta_one_is_refused_as_over_budget():
    """Finding 8: the composed delta reaching 1 used to become delta = 1.0 and raise ParameterError. A budget
    charged by basic composition (here d_EM-DP) refuses it; an (epsilon, delta) budget is charged by the
    optimal composition, whose delta is 1 - (1 - 0.6)^2 = 0.84 (Kairouz et al.), not the sum 1.2."""
    s = Session(EMDMetricDP(5.0, 0.9))
    s.charge(EMDMetricDP(0.1, 0.6), "first")
    assert not s.can_spend(EMDMetricDP(0.1, 0.6))
    with pytest.raises(BudgetExceededError):
        s.charge(EMDMetricDP(0.1, 0.6), "second")
    assert len(s.ledger) == 1
    s = Session(ApproxDP(5.0, 0.9, REPLACE))
    s.charge(ApproxDP(0.1, 0.6, REPLACE), "first")
    s.charge(ApproxDP(0.1, 0.6, REPLACE), "second")  # (0.2, 0.84)-DP by optimal composition
    assert s.tight_spent()[0] <= 0.2 + 1e-3 and s.spent() is None  # basic composition protects nothing
    assert s.basic_spent() == (math.inf, 1.0)
    for release in (ApproxDP(0.1, 0.6, REPLACE), ApproxDP(0.1, 0.4, AR)):  # 1 - 0.4^2 0.4 > 0.9; 0.84 as replace
        assert not s.can_spend(release)
        with pytest.raises(BudgetExceededError):
            s.charge(release, "third")
    assert len(s.ledger) == 2


def test_run_refuses_before_releasing():
    calls = []

    def mech(x):
        calls.append(x)
        return Release(value=x, guarantee=PureDP(0.5), mechanism="toy")

    s = Session(PureDP(0.7))
    out = s.run(PureDP(0.5), mech, 1, label="first")
    assert out.value == 1
    with pytest.raises(BudgetExceededError):
        s.run(PureDP(0.5), mech, 2, label="second")
    assert calls == [1]  # the second mechanism never ran
    replace = Session(PureDP(1.5, neighbours=REPLACE))
    replace.run(PureDP(0.5), mech, 3, label="costs 1")
    with pytest.raises(BudgetExceededError):
        replace.run(PureDP(0.5), mech, 4, label="would cost 1 more")
    assert calls == [1, 3] and replace.spent().epsilon == pytest.approx(1.0)


def test_run_checks_the_returned_guarantee():
    def liar():
        return Release(value=np.zeros(1), guarantee=PureDP(2.0), mechanism="liar")

    s = Session(PureDP(5.0))
    with pytest.raises(BudgetExceededError, match="does not fit"):
        s.run(PureDP(1.0), liar)
    assert s.ledger == []


# ------------------------------------------------------------------ the ledger file


def test_save_and_load_keep_each_release_and_its_cost(tmp_path):
    s = Session(ApproxDP(4.0, 1e-6, Neighbours.REPLACE_USER_SAME_SIZE))  # (the d_EM release below is bounded)
    s.charge(ApproxDP(0.5, 1e-8, AR), "heatmap", "dp_sparse_emd_agg")
    s.charge(EMDMetricDP(1.0, 1e-9), "itemwise", "priv_emd_itemwise")
    path = tmp_path / "ledger.json"
    s.save(path)
    again = Session.load(path)
    assert again.budget == s.budget and again.spent() == s.spent()
    assert [(e.label, e.guarantee, e.mechanism, e.cost) for e in again.ledger] == [
        (e.label, e.guarantee, e.mechanism, e.cost) for e in s.ledger
    ]
    data = json.loads(path.read_text())
    assert data["format"] == "userdp-ledger/3" and data["entries"][0]["cost"]["epsilon"] == 1.0
    data["entries"][0]["cost"]["neighbours"] = AR.value  # a cost of another kind than the budget
    path.write_text(json.dumps(data))
    with pytest.raises(ParameterError, match="another kind"):
        Session.load(path)


def _v1(budgets, entries):
    return {"format": "userdp-ledger/1", "budgets": budgets, "entries": entries}


def test_an_old_ledger_with_several_budgets_is_refused_with_instructions(tmp_path):
    old = _v1(
        [
            {"kind": "PureDP", "epsilon": 1.0, "delta": 0.0, "neighbours": AR.value},
            {"kind": "PureDP", "epsilon": 1.0, "delta": 0.0, "neighbours": REPLACE.value},
            {"kind": "PureDP", "epsilon": 1.0, "delta": 0.0, "neighbours": LOCAL.value},
        ],
        [
            {"label": "distinct", "mechanism": "m", "guarantee": {"kind": "PureDP", "epsilon": 1.0, "neighbours": nb}}
            for nb in (AR.value, REPLACE.value, LOCAL.value)
        ],
    )
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    with pytest.raises(ParameterError) as info:
        Session.load(path)
    message = str(info.value)
    assert str(path) in message and "3 kinds" in message
    assert "userdp ledger init FILE --force --budget replace:EPSILON[:DELTA]" in message
    assert "cost 4-DP for replace one user's data" in message  # 2 + 1 + 1: what was already spent


def test_an_old_ledger_with_one_budget_is_read(tmp_path):
    old = _v1(
        [{"kind": "ApproxDP", "epsilon": 2.0, "delta": 1e-6, "neighbours": AR.value}],
        [
            {
                "label": "distinct",
                "mechanism": "m",
                "guarantee": {"kind": "PureDP", "epsilon": 0.5, "neighbours": AR.value},
            }
        ],
    )
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    s = Session.load(path)
    assert s.budget == ApproxDP(2.0, 1e-6, AR) and s.spent() == PureDP(0.5)
    with Session.locked(path) as same:
        same.charge(PureDP(0.5), "more")
    assert json.loads(path.read_text())["format"] == "userdp-ledger/3"
    assert Session.load(path).spent() == PureDP(1.0)


# ------------------------------------------------------------------ what is left, and the stated losses


def test_what_is_left_deducts_delta_as_well_as_epsilon():
    """Basic composition spends deltas too: after a release of ``(0.5, 4e-6)`` a budget of ``(1, 1e-5)`` has
    ``(0.5, 6e-6)`` left, and a release needing more delta than that no longer fits."""
    s = Session(ApproxDP(1.0, 1e-5, AR))
    s.charge(ApproxDP(0.5, 4e-6, AR), "first")
    left = s.remaining()
    assert left.epsilon == pytest.approx(0.5) and left.delta == pytest.approx(6e-6, rel=1e-12)
    assert s.can_spend(ApproxDP(0.1, 6e-6, AR)) and not s.can_spend(ApproxDP(0.1, 7e-6, AR))


def test_stated_losses_must_not_imply_more_than_the_guarantee():
    """A release may state its loss more exactly than its guarantee (for ``ledger show``'s tight total), never
    more loosely: losses implying 1% more epsilon or delta than the guarantee are refused, equal ones kept."""
    from userdp.privacy.composition import DPLoss

    s = Session(ApproxDP(5.0, 1e-5, AR))
    s.charge(ApproxDP(0.1, 1e-7, AR), "exact", losses=[DPLoss(0.1, 1e-7)])
    for lie in ([DPLoss(0.101, 1e-7)], [DPLoss(0.1, 1.01e-7)], [DPLoss(0.06), DPLoss(0.045)]):
        with pytest.raises(ParameterError, match="imply more"):
            s.charge(ApproxDP(0.1, 1e-7, AR), "lies", losses=lie)
    assert [e.label for e in s.ledger] == ["exact"]


def test_the_tight_total_composes_converted_costs_not_unconverted_losses():
    """An add/remove release charged to a replace budget costs ``2 epsilon`` there; its stated add/remove losses
    are not a replace-one-user loss, so the tight total must compose the converted cost. Charged with and
    without its losses, the ledger's tight total is the same, and at least that of the converted costs
    composed alone (each ``0.2``-DP here)."""
    from userdp.privacy.composition import DPLoss, tight_epsilon

    with_losses, without = Session(ApproxDP(10.0, 1e-5, REPLACE)), Session(ApproxDP(10.0, 1e-5, REPLACE))
    for _ in range(20):
        with_losses.charge(PureDP(0.1, neighbours=AR), "ar", losses=[DPLoss(0.1)])
        without.charge(PureDP(0.1, neighbours=AR), "ar")
    tight = with_losses.tight_spent()
    assert tight == without.tight_spent()
    assert tight[0] == pytest.approx(tight_epsilon([DPLoss(0.2)] * 20, 1e-5), rel=1e-9)
    assert tight[0] > tight_epsilon([DPLoss(0.1)] * 20, 1e-5) * 1.5

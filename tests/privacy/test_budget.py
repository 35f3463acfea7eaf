"""The budget session: records, composes, refuses overspending, releases nothing on refusal."""

from __future__ import annotations

import numpy as np
import pytest

from userdp.errors import BudgetExceededError
from userdp.privacy import ApproxDP, EMDMetricDP, Model, Neighbours, PureDP, Session
from userdp.release import Release


def test_charge_and_remaining():
    s = Session(PureDP(1.0))
    s.charge(PureDP(0.4), "a")
    assert s.remaining(PureDP(1.0)).epsilon == pytest.approx(0.6)
    s.charge(PureDP(0.6), "b")
    assert s.remaining(PureDP(1.0)) is None
    with pytest.raises(BudgetExceededError, match="over the budget"):
        s.charge(PureDP(0.01), "c")
    assert [e.label for e in s.ledger] == ["a", "b"]
    assert s.spent(PureDP(1.0)).epsilon == pytest.approx(1.0)


def test_kinds_are_tracked_separately():
    s = Session([ApproxDP(1.0, 1e-6), EMDMetricDP(10.0, 1e-9, model=Model.CENTRAL)])
    s.charge(EMDMetricDP(8.0, 1e-10, model=Model.CENTRAL))
    s.charge(ApproxDP(0.5, 5e-7))
    assert not s.can_spend(EMDMetricDP(3.0, 0.0, model=Model.CENTRAL))
    assert s.can_spend(EMDMetricDP(2.0, 0.0, model=Model.CENTRAL))
    assert not s.can_spend(ApproxDP(0.1, 6e-7))  # delta would overflow
    with pytest.raises(BudgetExceededError, match="no budget"):
        s.charge(EMDMetricDP(0.1))  # local model: no budget for it
    with pytest.raises(BudgetExceededError, match="no budget"):
        s.charge(PureDP(0.1, neighbours=Neighbours.REPLACE_USER))
    with pytest.raises(ValueError):
        Session([PureDP(1.0), PureDP(2.0)])


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


def test_run_checks_the_returned_guarantee():
    def liar():
        return Release(value=np.zeros(1), guarantee=PureDP(2.0), mechanism="liar")

    s = Session(PureDP(5.0))
    with pytest.raises(BudgetExceededError, match="does not fit"):
        s.run(PureDP(1.0), liar)
    assert s.ledger == []

"""Tests of the engine seam and the local NumPy engine."""

from __future__ import annotations

import numpy as np
import pytest

from userdp.data import FiniteDomain, UserDataset
from userdp.engines import Engine, LocalEngine, get_engine
from userdp.errors import DataError


def test_get_engine():
    assert isinstance(get_engine(None), LocalEngine)
    assert get_engine("local") is get_engine(None)
    eng = LocalEngine()
    assert get_engine(eng) is eng
    with pytest.raises(ValueError):
        get_engine("nope")


def test_group_by_user_keeps_record_order():
    off, order, keys = LocalEngine().group_by_user(np.array([3, 1, 3, 2, 1]))
    assert list(keys) == [1, 2, 3]
    assert list(off) == [0, 2, 3, 5]
    assert list(order) == [1, 4, 3, 0, 2]


def test_histogram_sum_and_per_user_mean():
    ds = UserDataset.from_lists([[0, 0, 1], [2]], domain=FiniteDomain([0, 1, 2]))
    eng = LocalEngine()
    assert np.allclose(eng.histogram_sum(ds), [2 / 3, 1 / 3, 1])
    assert np.allclose(eng.histogram_sum(ds, normalize=False), [2, 1, 1])
    vals = np.array([[1.0, 0.0], [3.0, 0.0], [5.0, 1.0], [7.0, 2.0]])
    assert np.allclose(eng.per_user_mean(ds, vals), [[3.0, 1 / 3], [7.0, 2.0]])
    with pytest.raises(DataError):
        eng.per_user_mean(ds, np.ones(3))


def test_custom_engine_plugs_in():
    class Recording(LocalEngine):
        calls: list[str] = []

        def dedupe(self, ds):
            self.calls.append("dedupe")
            return super().dedupe(ds)

    eng = Recording()
    assert isinstance(eng, Engine)
    ds = UserDataset.from_lists([[0, 0], [1]], domain=FiniteDomain([0, 1]))
    assert list(ds.dedupe(engine=eng).counts()) == [1, 1]
    assert eng.calls == ["dedupe"]

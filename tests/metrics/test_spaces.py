"""Metric spaces: normalization, validation, public domains."""

from __future__ import annotations

import numpy as np
import pytest

from userdp.data import BoxDomain
from userdp.datasets import NYC_BOX
from userdp.errors import DataError, ParameterError
from userdp.metrics import (
    ClusteredMetric,
    EuclideanMetric,
    FiniteMetric,
    GreatCircleMetric,
    GridL1,
    LineMetric,
    haversine_km,
)


def test_finite_metric_normalization_and_checks():
    D = np.array([[0, 2, 3], [2, 0, 4], [3, 4, 0]], dtype=float)
    m = FiniteMetric(D, unit="km")
    assert m.scale == 4 and m.full_matrix().max() == 1.0
    assert FiniteMetric(D, scale=8).full_matrix().max() == 0.5
    with pytest.raises(ParameterError, match="at least the largest"):
        FiniteMetric(D, scale=2)
    bad = D.copy()
    bad[1, 2] = bad[2, 1] = 6  # 6 > 2 + 3
    with pytest.raises(ParameterError, match="triangle"):
        FiniteMetric(bad)
    asym = D.copy()
    asym[0, 1] = 1
    with pytest.raises(ParameterError, match="symmetric"):
        FiniteMetric(asym)
    diag = D.copy()
    diag[0, 0] = 1
    with pytest.raises(ParameterError, match="diagonal"):
        FiniteMetric(diag)
    with pytest.raises(DataError):
        m.cost_matrix(np.array([0, 3]), np.array([0]))
    with pytest.raises(DataError):
        m.cost_matrix(np.array([0.5]), np.array([0]))


def test_clustered_metric():
    m = ClusteredMetric(2, 3, 0.2)
    assert m.pairwise([0, 0, 0], [0, 2, 3]).tolist() == [0.0, 0.2, 1.0]
    FiniteMetric(m.full_matrix())  # it is a metric
    with pytest.raises(ParameterError):
        ClusteredMetric(2, 3, 0.0)


def test_grid_and_gridding():
    g = GridL1(4)
    assert g.scale == 2.0
    assert g.pairwise([0], [15]).tolist() == [6 / 4 / 2]
    box = BoxDomain((0.0, 0.0), (1.0, 2.0))
    cells = g.cells_of(np.array([[0.0, 0.0], [0.99, 1.99], [1.0, 2.0], [0.3, 1.0]]), box)
    assert cells.tolist() == [0, 15, 15, 1 * 4 + 2]
    with pytest.raises(DataError, match="outside"):
        g.cells_of(np.array([[1.5, 0.0]]), box)


def test_point_spaces_validate_domain():
    line = LineMetric(0, 10)
    with pytest.raises(DataError):
        line.check_points([11.0])
    e = EuclideanMetric(2, 2.0)
    assert e.pairwise(np.array([[-1.0, 0.0]]), np.array([[1.0, 0.0]]))[0] == pytest.approx(1.0)
    with pytest.raises(DataError, match="outside the public ball") as info:
        e.check_points(np.array([[2.0, 0.0]] * 7 + [[0.0, 0.0]]))
    assert "7" not in str(info.value)  # how many points lie outside is private: never "7 point(s)"
    for bad in (np.zeros((7, 3)), np.zeros(7)):  # wrong shapes: refused without naming the number of points
        with pytest.raises(DataError, match="shape") as info:
            e.check_points(bad)
        assert "7" not in str(info.value)
    with pytest.raises(DataError):
        e.check_points(np.array([[np.nan, 0.0]]))


def test_great_circle_nyc():
    gc = GreatCircleMetric(NYC_BOX)
    corners = haversine_km(40.5, -74.3, 41.0, -73.65)
    assert gc.scale == pytest.approx(corners, rel=1e-3)
    assert 70 < gc.scale < 85  # the NYC box diagonal is about 77 km
    pts = np.array([[40.5, -74.3], [41.0, -73.65], [40.75, -74.0]])
    C = gc.cost_matrix(pts, pts)
    assert C.max() <= 1.0 and C[0, 1] == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(DataError, match="outside the declared box"):
        gc.check_points(np.array([[42.0, -74.0]]))
    # one degree of latitude is about 111.2 km
    assert haversine_km(40.0, -74.0, 41.0, -74.0) == pytest.approx(111.19, rel=1e-3)

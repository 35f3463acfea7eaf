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


# --------------------------------------------------------------------------------------------
# Gridding (one compiled pass, issue 17)
# --------------------------------------------------------------------------------------------


def _numpy_cells(points, box, shape):
    """The vectorized formula the compiled pass replaced: floor((p - low) / width * (rows, cols)), clipped."""
    p = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    low = np.asarray(box.low)
    ij = np.floor((p - low) / (np.asarray(box.high) - low) * np.array(shape)).astype(np.int64)
    np.clip(ij[:, 0], 0, shape[0] - 1, out=ij[:, 0])
    np.clip(ij[:, 1], 0, shape[1] - 1, out=ij[:, 1])
    return ij[:, 0] * shape[1] + ij[:, 1]


@pytest.mark.parametrize("shape", [(256, 256), (247, 256), (300, 200), (1, 7), (8192, 8192), (3, 5)])
def test_compiled_gridding_equals_the_numpy_formula_bit_for_bit(shape):
    from userdp.metrics import grid_cells
    from userdp.metrics.spaces import grid_cells_inside

    gen = np.random.default_rng(shape[0] * 7 + shape[1])
    for box in (BoxDomain((40.745, -73.999), (40.770, -73.965)), BoxDomain((-3.3, 7.1), (2.2, 9.9))):
        lo, hi = np.array(box.low), np.array(box.high)
        pts = lo + gen.random((20_000, 2)) * (hi - lo)
        pts[:20], pts[20:40] = lo, hi  # both corners: the top edge falls in the last cell
        pts[40:60, 0] = np.nextafter(hi[0], -np.inf)
        cells, inside, all_inside = grid_cells_inside(pts, box, shape)
        assert all_inside and inside.all()
        np.testing.assert_array_equal(cells, _numpy_cells(pts, box, shape))
        np.testing.assert_array_equal(grid_cells(pts, box, shape), cells)


def test_compiled_gridding_marks_outside_and_nan_points_and_refuses_them_without_counting():
    from userdp.metrics import grid_cells
    from userdp.metrics.spaces import grid_cells_inside

    box = BoxDomain((0.0, 0.0), (1.0, 1.0))
    pts = np.array([[0.5, 0.5], [np.nan, 0.5], [2.0, 0.5], [1.0, 1.0], [0.5, -1e-12]])
    cells, inside, all_inside = grid_cells_inside(pts, box, (4, 4))
    assert not all_inside
    assert inside.tolist() == [True, False, False, True, False]
    assert cells[inside].tolist() == [10, 15]
    with pytest.raises(DataError, match="NaN or inf"):
        grid_cells(pts, box, (4, 4))
    with pytest.raises(DataError, match="outside the declared box"):  # how many is never said
        grid_cells(pts[[0, 2]], box, (4, 4))

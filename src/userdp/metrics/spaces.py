"""Metric spaces, normalized so that every distance is at most 1.

Imola et al. (CCS 2024) assume ``d_X <= 1`` throughout (section 2.2); every space here divides its
raw distance by a public ``scale`` (reported as ``space.scale`` with its ``unit``), so
``raw distance = scale * normalized distance``. Scales come from public parameters (a diameter, a
box, a grid size), never from the data.

Finite spaces (items are integer codes ``0..k-1``): :class:`FiniteMetric`, :class:`ClusteredMetric`,
:class:`GridL1`. Point spaces (items are coordinate rows): :class:`LineMetric`,
:class:`EuclideanMetric`, :class:`GreatCircleMetric`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np
from numba import njit

from ..data import BoxDomain
from ..errors import DataError, ParameterError

__all__ = [
    "grid_cells",
    "grid_cells_inside",
    "MetricSpace",
    "FiniteSpace",
    "PointSpace",
    "FiniteMetric",
    "ClusteredMetric",
    "GridL1",
    "LineMetric",
    "EuclideanMetric",
    "GreatCircleMetric",
    "EARTH_RADIUS_KM",
]

EARTH_RADIUS_KM = 6371.0088  # mean Earth radius (IUGG)


class MetricSpace(ABC):
    """A metric space with distances normalized to ``[0, 1]``."""

    #: raw units per normalized unit
    scale: float = 1.0
    #: name of the raw unit
    unit: str = "unit"

    @abstractmethod
    def cost_matrix(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Normalized distances between every element of ``x`` and every element of ``y``."""

    def distance(self, x, y) -> np.ndarray:
        """Normalized distance between corresponding elements (broadcast pairwise)."""
        return self.pairwise(np.asarray(x), np.asarray(y))

    @abstractmethod
    def pairwise(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Elementwise normalized distances ``d(x[j], y[j])``."""


class FiniteSpace(MetricSpace):
    """A finite metric space on codes ``0..size-1``."""

    size: int

    def full_matrix(self) -> np.ndarray:
        """The ``size x size`` normalized distance matrix."""
        c = np.arange(self.size)
        return self.cost_matrix(c, c)

    def check_codes(self, codes: np.ndarray) -> np.ndarray:
        c = np.asarray(codes)
        if c.dtype.kind not in "iu":
            raise DataError("items of a finite metric space must be integer codes")
        if c.size and (c.min() < 0 or c.max() >= self.size):
            raise DataError(f"item codes must lie in [0, {self.size})")
        return c.astype(np.int64)


class PointSpace(MetricSpace):
    """A metric space of points in R^dim with a public domain."""

    dim: int

    @abstractmethod
    def check_points(self, points: np.ndarray) -> np.ndarray:
        """Validate points (finite, inside the public domain) and return them as ``(N, dim)``."""

    @abstractmethod
    def inside(self, points: np.ndarray) -> np.ndarray:
        """Boolean mask of the (finite) points inside the public domain, one per row of ``(N, dim)``."""

    def _as_points(self, points: np.ndarray) -> np.ndarray:
        p = np.asarray(points, dtype=np.float64)
        if p.ndim == 1 and p.size % self.dim == 0:
            p = p.reshape(-1, self.dim)
        if p.ndim != 2 or p.shape[1] != self.dim:
            # the shape would name the number of points N: only the number of coordinates is reported
            got = f"{p.shape[1]} coordinates per point" if p.ndim == 2 else f"a {p.ndim}-D array"
            raise DataError(f"points must have shape (N, {self.dim}), got {got}")
        if not np.all(np.isfinite(p)):
            raise DataError("points contain NaN or inf")
        return p


# --------------------------------------------------------------------------------------------
# Finite spaces
# --------------------------------------------------------------------------------------------


class FiniteMetric(FiniteSpace):
    """An explicit finite metric given by a distance matrix.

    Parameters
    ----------
    distances:
        ``k x k`` raw distances.
    scale:
        Public normalizing constant; defaults to the largest entry (the diameter). Must be at
        least the largest entry so that normalized distances are at most 1.
    check:
        Verify symmetry, zero diagonal, positivity off the diagonal and the triangle inequality
        (Floyd-Warshall, ``O(k^3)``: a few seconds for ``k = 1500``).
    """

    def __init__(self, distances: np.ndarray, scale: float | None = None, unit: str = "unit", check: bool = True):
        D = np.asarray(distances, dtype=np.float64)
        if D.ndim != 2 or D.shape[0] != D.shape[1] or D.shape[0] == 0:
            raise ParameterError("distances must be a non-empty square matrix")
        if not np.all(np.isfinite(D)):
            raise ParameterError("distances must be finite")
        dmax = float(D.max())
        if scale is None:
            scale = dmax if dmax > 0 else 1.0
        if not (scale > 0 and scale >= dmax):
            raise ParameterError(f"scale {scale} must be positive and at least the largest distance {dmax}")
        self.scale = float(scale)
        self.unit = unit
        self.size = D.shape[0]
        self._D = D / self.scale
        if check:
            self.check_metric()

    def check_metric(self, tol: float = 1e-12) -> None:
        """Raise :class:`ParameterError` unless the matrix is a metric (within ``tol``)."""
        D = self._D
        if not np.allclose(D, D.T, atol=tol, rtol=0):
            raise ParameterError("distance matrix is not symmetric")
        if np.any(np.abs(np.diag(D)) > tol):
            raise ParameterError("distance matrix has a non-zero diagonal")
        off = D + np.eye(self.size)
        if np.any(off <= 0):
            raise ParameterError("distinct items must be at positive distance (use a pseudo-metric carefully)")
        # Triangle inequality: the matrix is a metric iff it equals its own shortest-path closure.
        from scipy.sparse.csgraph import shortest_path  # imported on use (0.25 s)

        closure = shortest_path(D, method="FW", directed=False)
        if np.any(D > closure + tol):
            raise ParameterError("distance matrix violates the triangle inequality")

    def cost_matrix(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self._D[np.ix_(self.check_codes(x), self.check_codes(y))]

    def pairwise(self, x, y) -> np.ndarray:
        return self._D[self.check_codes(x), self.check_codes(y)]

    def __repr__(self) -> str:
        return f"FiniteMetric(size={self.size}, scale={self.scale} {self.unit})"


class ClusteredMetric(FiniteSpace):
    """The clustered metric ``B x C`` of Imola et al., section 6.2.

    ``s`` clusters of ``t`` items; item ``(b, c)`` has code ``b * t + c``. Distances: 0 for the same
    item, ``r`` inside a cluster, 1 across clusters. The paper assumes ``r < 1/2``; the space is a
    metric for every ``0 < r <= 1``. It is a tree metric (root -- cluster edges of length
    ``(1 - r)/2``, cluster -- item edges of length ``r/2``), which gives a closed-form EMD.
    """

    def __init__(self, n_clusters: int, cluster_size: int, r: float):
        if n_clusters < 1 or cluster_size < 1:
            raise ParameterError("need at least one cluster of at least one item")
        if not 0 < r <= 1:
            raise ParameterError(f"r must lie in (0, 1], got {r}")
        self.n_clusters = int(n_clusters)
        self.cluster_size = int(cluster_size)
        self.r = float(r)
        self.size = self.n_clusters * self.cluster_size
        self.scale = 1.0
        self.unit = "unit"

    def cluster_of(self, codes: np.ndarray) -> np.ndarray:
        return self.check_codes(codes) // self.cluster_size

    def cost_matrix(self, x, y) -> np.ndarray:
        x = self.check_codes(x)[:, None]
        y = self.check_codes(y)[None, :]
        same_b = (x // self.cluster_size) == (y // self.cluster_size)
        return np.where(x == y, 0.0, np.where(same_b, self.r, 1.0))

    def pairwise(self, x, y) -> np.ndarray:
        x = self.check_codes(x)
        y = self.check_codes(y)
        same_b = (x // self.cluster_size) == (y // self.cluster_size)
        return np.where(x == y, 0.0, np.where(same_b, self.r, 1.0))

    def __repr__(self) -> str:
        return f"ClusteredMetric(s={self.n_clusters}, t={self.cluster_size}, r={self.r})"


@njit(cache=True)
def _grid_pass(p, low0, low1, high0, high1, w0, w1, rows, cols, cells, inside):
    """One pass over ``(N, 2)`` points: ``inside[i]`` (in the closed box; NaN is outside) and, for those,
    the cell code, with numpy's operations in numpy's order so the codes are bit-for-bit
    ``floor((p - low) / width * (rows, cols))`` clipped to the grid. Returns the number inside."""
    n_in = 0
    for i in range(p.shape[0]):
        x, y = p[i, 0], p[i, 1]
        if x >= low0 and x <= high0 and y >= low1 and y <= high1:
            inside[i] = True
            n_in += 1
            r = np.int64(np.floor((x - low0) / w0 * rows))
            c = np.int64(np.floor((y - low1) / w1 * cols))
            r = min(max(r, 0), rows - 1)
            c = min(max(c, 0), cols - 1)
            cells[i] = r * cols + c
        else:
            inside[i] = False
            cells[i] = -1
    return n_in


def grid_cells_inside(
    points: np.ndarray, box: BoxDomain, shape: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(cells, inside, all_inside)`` of ``(N, 2)`` points on the ``rows x cols`` grid of the public 2-D
    ``box`` in one compiled pass: ``inside`` marks the points in the closed box (NaN is outside), ``cells``
    holds their codes as :func:`grid_cells` gives them (``-1`` outside)."""
    if box.dim != 2:
        raise DataError("gridding needs a 2-D box")
    p = np.ascontiguousarray(np.asarray(points, dtype=np.float64).reshape(-1, 2))
    (l0, l1), (h0, h1) = (float(v) for v in box.low), (float(v) for v in box.high)
    cells = np.empty(p.shape[0], dtype=np.int64)
    inside = np.empty(p.shape[0], dtype=np.bool_)
    n_in = _grid_pass(p, l0, l1, h0, h1, h0 - l0, h1 - l1, np.int64(shape[0]), np.int64(shape[1]), cells, inside)
    return cells, inside, n_in == p.shape[0]


def grid_cells(points: np.ndarray, box: BoxDomain, shape: tuple[int, int]) -> np.ndarray:
    """Cell codes ``row * cols + col`` of ``(N, 2)`` points inside the public 2-D ``box`` on a
    ``rows x cols`` grid: the first coordinate indexes rows, the second columns; cell
    ``[low + i w/rows, low + (i+1) w/rows)`` along the first axis (likewise the second), the top edge in the
    last cell. A point outside the box (or not finite) is an error; how many is not reported."""
    cells, _, all_inside = grid_cells_inside(points, box, shape)
    if not all_inside:
        p = np.asarray(points, dtype=np.float64)
        if not np.all(np.isfinite(p)):
            raise DataError("points contain NaN or inf")
        box.check(p)
    return cells


class GridL1(FiniteSpace):
    """The ``side x side`` grid of cells on ``[0, 1)^2`` with the L1 distance between cell centres
    (Ghazi et al., AAAI 2023, section 2.1). Cell ``(row, col)`` has code ``row * side + col``.

    Normalized by the diameter of ``[0,1)^2`` in L1, which is 2 (the paper's EMD-norm constant
    ``alpha = 2``): ``scale = 2``.
    """

    def __init__(self, side: int):
        if side < 1:
            raise ParameterError("grid side must be at least 1")
        self.side = int(side)
        self.size = self.side * self.side
        self.scale = 2.0
        self.unit = "[0,1)^2 L1"

    def cells_of(self, points: np.ndarray, box: BoxDomain) -> np.ndarray:
        """Cell codes of ``(N, 2)`` points inside the public ``box``: the first coordinate indexes rows,
        the second columns; cell ``[i/side, (i+1)/side)`` along each axis, the top edge in the last cell."""
        return grid_cells(points, box, (self.side, self.side))

    def coords(self, codes) -> tuple[np.ndarray, np.ndarray]:
        c = self.check_codes(codes)
        return c // self.side, c % self.side

    def cost_matrix(self, x, y) -> np.ndarray:
        rx, cx = self.coords(x)
        ry, cy = self.coords(y)
        return (np.abs(rx[:, None] - ry[None, :]) + np.abs(cx[:, None] - cy[None, :])) / (self.side * self.scale)

    def pairwise(self, x, y) -> np.ndarray:
        rx, cx = self.coords(x)
        ry, cy = self.coords(y)
        return (np.abs(rx - ry) + np.abs(cx - cy)) / (self.side * self.scale)

    def __repr__(self) -> str:
        return f"GridL1(side={self.side})"


# --------------------------------------------------------------------------------------------
# Point spaces
# --------------------------------------------------------------------------------------------


class LineMetric(PointSpace):
    """The interval ``[low, high]`` with ``|x - y|``, normalized by its length."""

    def __init__(self, low: float, high: float, unit: str = "unit"):
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ParameterError("need finite low < high")
        self.low, self.high = float(low), float(high)
        self.scale = self.high - self.low
        self.unit = unit
        self.dim = 1

    def inside(self, points) -> np.ndarray:
        p = self._as_points(points)
        return (p[:, 0] >= self.low) & (p[:, 0] <= self.high)

    def check_points(self, points) -> np.ndarray:
        p = self._as_points(points)
        if np.any((p < self.low) | (p > self.high)):
            raise DataError(f"points lie outside the declared interval [{self.low}, {self.high}]")
        return p

    def cost_matrix(self, x, y) -> np.ndarray:
        x = self.check_points(x)[:, 0]
        y = self.check_points(y)[:, 0]
        return np.abs(x[:, None] - y[None, :]) / self.scale

    def pairwise(self, x, y) -> np.ndarray:
        return np.abs(self.check_points(x)[:, 0] - self.check_points(y)[:, 0]) / self.scale


class EuclideanMetric(PointSpace):
    """``R^dim`` with the Euclidean distance, for points in the public ball of the given ``diameter``
    around ``center`` (default: the origin). Used for embeddings (e.g. GloVe vectors)."""

    def __init__(self, dim: int, diameter: float, center: np.ndarray | None = None, unit: str = "unit"):
        if dim < 1 or not (math.isfinite(diameter) and diameter > 0):
            raise ParameterError("need dim >= 1 and a positive finite diameter")
        self.dim = int(dim)
        self.scale = float(diameter)
        self.unit = unit
        self.center = np.zeros(self.dim) if center is None else np.asarray(center, dtype=np.float64)
        if self.center.shape != (self.dim,):
            raise ParameterError("center must have shape (dim,)")

    def inside(self, points) -> np.ndarray:
        p = self._as_points(points)
        return np.linalg.norm(p - self.center, axis=1) <= self.scale / 2 * (1 + 1e-12)

    def check_points(self, points) -> np.ndarray:
        p = self._as_points(points)
        r = np.linalg.norm(p - self.center, axis=1)
        if np.any(r > self.scale / 2 * (1 + 1e-12)):  # how many is data-dependent and is not reported
            raise DataError(f"some points lie outside the public ball of diameter {self.scale}")
        return p

    def cost_matrix(self, x, y) -> np.ndarray:
        x = self.check_points(x)
        y = self.check_points(y)
        sq = (x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2 * x @ y.T
        return np.minimum(np.sqrt(np.maximum(sq, 0.0)) / self.scale, 1.0)

    def pairwise(self, x, y) -> np.ndarray:
        return np.minimum(np.linalg.norm(self.check_points(x) - self.check_points(y), axis=1) / self.scale, 1.0)


def haversine_km(lat1, lon1, lat2, lon2) -> np.ndarray:
    """Great-circle distance in km (haversine formula) between degree coordinates."""
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dphi = p2 - p1
    dl = np.radians(np.asarray(lon2) - np.asarray(lon1))
    a = np.sin(dphi / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(a, 0.0, 1.0)))


class GreatCircleMetric(PointSpace):
    """Shortest-path distance on the Earth's surface for (lat, lon) points in a public box.

    The scale is the public ``diameter_km``, or the box's great-circle diameter (the largest distance
    between points sampled densely on the box boundary, plus a relative margin of ``1e-6``).
    """

    def __init__(self, box: BoxDomain, diameter_km: float | None = None):
        if box.dim != 2:
            raise ParameterError("a great-circle space needs a 2-D (lat, lon) box")
        self.box = box
        self.dim = 2
        self.unit = "km"
        if diameter_km is None:
            diameter_km = self.box_diameter_km(box)
        if not diameter_km > 0:
            raise ParameterError("diameter must be positive")
        self.scale = float(diameter_km)

    @staticmethod
    def box_diameter_km(box: BoxDomain, per_edge: int = 129) -> float:
        (la0, lo0), (la1, lo1) = box.low, box.high
        s = np.linspace(0, 1, per_edge)
        lat = np.concatenate(
            [la0 + (la1 - la0) * s, np.full(per_edge, la1), la1 - (la1 - la0) * s, np.full(per_edge, la0)]
        )
        lon = np.concatenate(
            [np.full(per_edge, lo0), lo0 + (lo1 - lo0) * s, np.full(per_edge, lo1), lo1 - (lo1 - lo0) * s]
        )
        d = haversine_km(lat[:, None], lon[:, None], lat[None, :], lon[None, :])
        return float(d.max()) * (1 + 1e-6)

    def inside(self, points) -> np.ndarray:
        return self.box.contains(self._as_points(points))

    def check_points(self, points) -> np.ndarray:
        p = self._as_points(points)
        self.box.check(p)
        return p

    def cost_matrix(self, x, y) -> np.ndarray:
        x = self.check_points(x)
        y = self.check_points(y)
        d = haversine_km(x[:, None, 0], x[:, None, 1], y[None, :, 0], y[None, :, 1])
        return np.minimum(d / self.scale, 1.0)

    def pairwise(self, x, y) -> np.ndarray:
        x = self.check_points(x)
        y = self.check_points(y)
        return np.minimum(haversine_km(x[:, 0], x[:, 1], y[:, 0], y[:, 1]) / self.scale, 1.0)

    def __repr__(self) -> str:
        return f"GreatCircleMetric(diameter={self.scale:.3f} km)"

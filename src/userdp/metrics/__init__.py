"""Metric spaces (normalized to distances <= 1) and the Earth Mover's Distance."""

from .emd import emd, emd_assignment, emd_datasets, emd_norm, grid_emd, histogram
from .spaces import (
    EARTH_RADIUS_KM,
    ClusteredMetric,
    EuclideanMetric,
    FiniteMetric,
    FiniteSpace,
    GreatCircleMetric,
    GridL1,
    LineMetric,
    MetricSpace,
    PointSpace,
    grid_cells,
    haversine_km,
)

__all__ = [
    "emd",
    "emd_assignment",
    "emd_datasets",
    "emd_norm",
    "grid_emd",
    "histogram",
    "EARTH_RADIUS_KM",
    "ClusteredMetric",
    "EuclideanMetric",
    "FiniteMetric",
    "FiniteSpace",
    "GreatCircleMetric",
    "GridL1",
    "LineMetric",
    "MetricSpace",
    "PointSpace",
    "grid_cells",
    "haversine_km",
]

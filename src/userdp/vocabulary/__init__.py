"""Which items: person-level DP set union (private vocabularies, partition selection)."""

from .union import (
    UNIT,
    UnionCalibration,
    bound_contributions,
    calibrate_union,
    person_weights,
    private_vocabulary,
    union_histogram,
    weighted_gaussian_union,
    weighted_laplace_union,
)

__all__ = [
    "UNIT",
    "UnionCalibration",
    "bound_contributions",
    "calibrate_union",
    "person_weights",
    "private_vocabulary",
    "union_histogram",
    "weighted_gaussian_union",
    "weighted_laplace_union",
]

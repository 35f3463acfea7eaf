"""Which items: person-level DP set union (private vocabularies, partition selection)."""

from .policy import policy_histogram
from .union import (
    UNIT,
    UnionCalibration,
    bound_contributions,
    calibrate_union,
    distinct_per_person,
    new_item_weight,
    person_weights,
    plan_vocabulary,
    policy_laplace_union,
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
    "distinct_per_person",
    "new_item_weight",
    "person_weights",
    "plan_vocabulary",
    "policy_histogram",
    "policy_laplace_union",
    "private_vocabulary",
    "union_histogram",
    "weighted_gaussian_union",
    "weighted_laplace_union",
]

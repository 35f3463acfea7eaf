"""Which items, and how many: person-level DP set union (private vocabularies, partition selection) and
per-key counts with privately chosen contribution bounds."""

from .counts import (
    BOUND_GRID,
    bounded_key_counts,
    choose_bounds,
    kept_records,
    plan_key_counts,
    private_key_counts,
)
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
    private_vocabulary_from_sums,
    union_histogram,
    vocabulary_sum_columns,
    weighted_gaussian_union,
    weighted_laplace_union,
)

__all__ = [
    "BOUND_GRID",
    "bounded_key_counts",
    "choose_bounds",
    "kept_records",
    "plan_key_counts",
    "private_key_counts",
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
    "private_vocabulary_from_sums",
    "union_histogram",
    "vocabulary_sum_columns",
    "weighted_gaussian_union",
    "weighted_laplace_union",
]

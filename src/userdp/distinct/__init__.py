"""Person-level DP distinct count (Knop & Steinke, NeurIPS 2023)."""

from .baselines import (
    r2t_distinct_count,
    r2t_thresholds,
    shifted_inverse_distinct_count,
    shifted_inverse_grid,
    shifted_inverse_law,
    shifted_inverse_removals,
)
from .counting import (
    PersonElementGraph,
    dc_bucketed,
    dc_greedy,
    dc_matching,
    dc_sampling,
    element_buckets,
    person_element_graph,
)
from .release import distinct_count, gem_scores, gem_scores_quadratic, gem_select, laplace_lower_bound

__all__ = [
    "PersonElementGraph",
    "dc_bucketed",
    "dc_greedy",
    "dc_matching",
    "dc_sampling",
    "distinct_count",
    "element_buckets",
    "gem_scores",
    "gem_scores_quadratic",
    "gem_select",
    "laplace_lower_bound",
    "person_element_graph",
    "r2t_distinct_count",
    "r2t_thresholds",
    "shifted_inverse_distinct_count",
    "shifted_inverse_grid",
    "shifted_inverse_law",
    "shifted_inverse_removals",
]

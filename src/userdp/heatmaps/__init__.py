"""DP heatmaps by sparse EMD aggregation (Ghazi et al., AAAI 2023)."""

from ..engines.memory import grid_sum as user_grid_sum
from .adaptive_grid import adaptive_grid_heatmap
from .auto import auto_heatmap, dense_emd_heatmap
from .baselines import dense_emd_agg, dense_resolution, emd_projection_nonnegative, laplace_heatmap
from .hierarchy import hierarchical_heatmap
from .privtree import privtree_emd_heatmap, privtree_heatmap, tree_emd_projection
from .quality import all_metrics, gaussian_heatmap, heatmap_emd, kl_divergence, pearson_cc, similarity
from .shuffle import shuffle_plan, shuffle_sparse_emd_agg
from .sparse import dp_sparse_emd_agg, level_budgets, pyramid_level, reconstruct

__all__ = [
    "adaptive_grid_heatmap",
    "auto_heatmap",
    "dense_emd_heatmap",
    "hierarchical_heatmap",
    "privtree_emd_heatmap",
    "privtree_heatmap",
    "tree_emd_projection",
    "all_metrics",
    "dense_emd_agg",
    "dense_resolution",
    "dp_sparse_emd_agg",
    "emd_projection_nonnegative",
    "gaussian_heatmap",
    "heatmap_emd",
    "kl_divergence",
    "laplace_heatmap",
    "level_budgets",
    "pearson_cc",
    "pyramid_level",
    "reconstruct",
    "shuffle_plan",
    "shuffle_sparse_emd_agg",
    "similarity",
    "user_grid_sum",
]

"""d_EM-DP mechanisms (Imola, Roy Chowdhury & Chaudhuri, CCS 2024).

* :mod:`.randomizers` -- item-level metric-DP randomizers (GKRR, exponential, planar Laplace, K-norm);
* :mod:`.linear` -- PrivEMDLinear (Algorithm 1) and user-level baselines;
* :mod:`.itemwise` -- PrivEMDItemWise (Algorithm 2) and BoundedEMDReduction (Algorithm 3);
* :mod:`.frequency` -- frequency estimation (Algorithm 4), its baselines and the user-level DP histogram.
"""

from .frequency import (
    demd_error,
    freq_est_gkrr,
    freq_est_hadamard,
    freq_est_local,
    freq_laplace_central,
    laplace_histogram,
    project_simplex,
    user_histogram,
)
from .itemwise import BoundedEMDReduction, itemwise_guarantee, priv_emd_itemwise
from .linear import (
    duchi_l2_privatizer,
    duchi_l2_radius,
    embedding_lipschitz,
    linear_baseline,
    linear_release,
    lipschitz_constant,
    priv_emd_linear,
)
from .randomizers import GKRR, ExponentialRandomizer, ItemRandomizer, KNormRandomizer, PlanarLaplace

__all__ = [
    "GKRR",
    "BoundedEMDReduction",
    "ExponentialRandomizer",
    "ItemRandomizer",
    "KNormRandomizer",
    "PlanarLaplace",
    "embedding_lipschitz",
    "demd_error",
    "freq_est_gkrr",
    "freq_est_hadamard",
    "freq_est_local",
    "freq_laplace_central",
    "itemwise_guarantee",
    "laplace_histogram",
    "linear_baseline",
    "duchi_l2_privatizer",
    "duchi_l2_radius",
    "linear_release",
    "lipschitz_constant",
    "priv_emd_itemwise",
    "priv_emd_linear",
    "project_simplex",
    "user_histogram",
]

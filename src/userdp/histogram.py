"""User-level DP histograms: the central Laplace release of ``sum_i K~_i``.

Each user contributes their normalized histogram ``K~_i`` (mass 1). Under add/remove-one-user
neighbours the l1 sensitivity of ``sum_i K~_i`` is 1; under replace-one-user it is 2 (one
histogram of mass 1 leaves, another arrives). This is the standard user-level DP baseline that the
d_EM and heatmap mechanisms are compared against.

A user with no items contributes the zero vector, and a dataset with no users the zero sum: adding or
removing an empty user changes nothing, so the sensitivities are unchanged and such inputs are released
like any other (an error would itself reveal that a user, or the dataset, is empty).
"""

from __future__ import annotations

import numpy as np

from .data import UserDataset
from .engines import Engine, get_engine
from .noise import RngLike, add_laplace, calibrate_laplace
from .privacy.guarantees import Neighbours, PureDP
from .release import ErrorStatement, Release

__all__ = ["user_histogram"]


def user_histogram(
    ds: UserDataset,
    epsilon: float,
    neighbours: Neighbours = Neighbours.ADD_REMOVE_USER,
    rng: RngLike = None,
    engine: Engine | None = None,
) -> Release:
    """Release ``sum_i K~_i`` with Laplace noise; the value is the estimated *average* distribution.

    The noisy sum is post-processed: negatives are set to zero and the result is normalized to sum 1
    (an all-zero result becomes the uniform distribution). The domain must be public. Users with no items
    contribute nothing; on a dataset with no users the release is the noise alone.

    Returns
    -------
    Release
        ``value``: the normalized estimate; ``extras["noisy_sum"]``: the raw noisy sum.
    """
    ds.require_public_domain()
    nb = Neighbours(neighbours)
    if nb not in (Neighbours.ADD_REMOVE_USER, Neighbours.REPLACE_USER):
        raise ValueError("a central histogram protects add/remove or replace-one-user neighbours")
    sens = 1.0 if nb is Neighbours.ADD_REMOVE_USER else 2.0
    k = ds.domain_size
    cal = calibrate_laplace(sens, epsilon, dim=k)
    contributors = ds.nonempty_users()  # an empty user's K~_i is the zero vector
    if contributors.n_users:
        total = get_engine(engine).histogram_sum(contributors, normalize=True)
    else:
        total = np.zeros(k)
    noisy = add_laplace(total, cal, rng)
    est = np.maximum(noisy, 0.0)
    s = est.sum()
    est = est / s if s > 0 else np.full(k, 1.0 / k)
    return Release(
        value=est,
        guarantee=PureDP(epsilon, neighbours=nb),
        mechanism="user-level Laplace histogram",
        params={"epsilon": float(epsilon), "l1_sensitivity": sens, "domain_size": k, "scale": cal.scale},
        error=ErrorStatement(
            f"each cell of the noisy sum has Laplace noise of scale {cal.scale:.4g} (expected l1 error of the sum "
            f"{k * cal.scale:.4g})",
            bound=k * cal.scale,
        ),
        extras={"noisy_sum": noisy},
    )

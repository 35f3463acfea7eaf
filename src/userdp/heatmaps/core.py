"""Gridding user points inside a public box and summing the users' distributions (the data plane of
the heatmap releases)."""

from __future__ import annotations

import numpy as np

from ..data import BoxDomain, UserDataset
from ..errors import DataError, ParameterError
from ..metrics.spaces import GridL1

__all__ = ["user_grid_sum"]


def user_grid_sum(ds: UserDataset, side: int, box: BoxDomain | None = None, drop_outside: bool = False) -> np.ndarray:
    """``s = sum_i p_i``: each user's points, gridded to ``side x side`` cells of the public ``box``, as a
    distribution (mass 1 per user), summed over users. Row index = first coordinate (e.g. latitude).

    Points outside the box are an error unless ``drop_outside`` (then they are dropped and a user left
    with no point contributes nothing; how many were dropped is data-dependent and is not reported). A user
    with no points, and a dataset with no users, contribute nothing: the sum is then all zeros and the
    release goes ahead (under add/remove-one-user neighbours an empty user changes nothing).
    """
    if not ds.is_points or ds.dim != 2:
        raise DataError("heatmaps need 2-D point items (e.g. lat, lon)")
    box = box or ds.require_box()
    if box.dim != 2:
        raise DataError("the box must be 2-D")
    L = int(round(np.log2(side))) if side >= 1 else -1
    if side < 1 or 2**L != side:
        raise ParameterError(f"the resolution must be a power of two, got {side}")
    pts = ds.items
    users = ds.user_index()
    if drop_outside:
        inside = box.contains(pts)
        pts, users = pts[inside], users[inside]
    elif not np.all(box.contains(pts)):
        raise DataError("some points lie outside the declared box; pass a larger public box or drop_outside=True")
    cells = GridL1(side).cells_of(pts, box)
    per_user = np.bincount(users, minlength=ds.n_users).astype(np.float64)
    w = 1.0 / per_user[users]
    return np.bincount(cells, weights=w, minlength=side * side).astype(np.float64).reshape(side, side)

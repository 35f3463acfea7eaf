"""Candidate neighbouring inputs for the worst-case search of the statistical audits
(:func:`~userdp.audit.statistical.audit_search`): one user's point datasets moved (:func:`point_neighbours`), and
user-level pairs of a small dataset (:func:`user_neighbours`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["NeighbourPair", "point_neighbours", "user_neighbours"]


@dataclass(frozen=True)
class NeighbourPair:
    """Two inputs of a mechanism and their distance under the claim's neighbour relation (``d_EM`` for
    metric DP, ``1`` for one user added, removed or replaced)."""

    label: str
    a: Any
    b: Any
    distance: float = 1.0


def point_neighbours(points: np.ndarray, step: float, low: float, high: float) -> list[NeighbourPair]:
    """Candidate pairs of one user's point datasets (``(m, dim)``, coordinates in ``[low, high]``), with
    their ``d_EM`` under the (unnormalized) Euclidean metric:

    * every item moved by ``step`` along each axis and direction (``d_EM = step``): distance-1 moves when
      ``step`` is the metric's unit;
    * one item moved by ``m * step`` along each axis (``d_EM = step``, the mass concentrated on one item);
    * all items at ``low`` vs all at ``high`` (the extreme pair, ``d_EM = (high - low) sqrt(dim)``).

    Moves that would leave ``[low, high]`` are skipped.
    """
    K = np.asarray(points, dtype=np.float64)
    m, dim = K.shape
    out: list[NeighbourPair] = []
    for j in range(dim):
        for sgn in (1.0, -1.0):
            e = np.zeros(dim)
            e[j] = sgn * step
            moved = K + e
            if np.all((moved >= low) & (moved <= high)):
                out.append(NeighbourPair(f"all items {'+' if sgn > 0 else '-'}{step:g} on axis {j}", K, moved, step))
            one = K.copy()
            one[0] += e * m
            if np.all((one >= low) & (one <= high)):
                out.append(NeighbourPair(f"item 0 {'+' if sgn > 0 else '-'}{m * step:g} on axis {j}", K, one, step))
    lo, hi = np.full_like(K, low), np.full_like(K, high)
    out.append(NeighbourPair("all items at the low vs the high corner", lo, hi, (high - low) * math.sqrt(dim)))
    return out


def user_neighbours(users: list[list], full_user: list, max_pairs: int = 8) -> list[NeighbourPair]:
    """Candidate user-level neighbour pairs of a small dataset given as one item list per user:

    * one user removed (add/remove neighbours), for up to ``max_pairs`` users (a one-user dataset against
      the dataset of no users);
    * a user with no items added (it must change nothing, and must not turn the release into an error);
    * a *full* user (``full_user``: a user with the maximum contribution, e.g. at one spot) added;
    * a user replaced by the full user, for up to ``max_pairs`` users (replace-one-user neighbours).
    """
    out: list[NeighbourPair] = []
    for u in range(min(len(users), max_pairs)):
        out.append(NeighbourPair(f"remove user {u}", users, users[:u] + users[u + 1 :], 1.0))
    out.append(NeighbourPair("add a user with no items", users, users + [[]], 1.0))
    out.append(NeighbourPair("add a full user", users, users + [list(full_user)], 1.0))
    for u in range(min(len(users), max_pairs)):
        replaced = users[:u] + [list(full_user)] + users[u + 1 :]
        out.append(NeighbourPair(f"replace user {u} by a full user", users, replaced, 1.0))
    return out

"""The engine interface: the seam between mechanisms and where the data lives."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..data import UserDataset
    from ..noise import RngLike


class Engine(ABC):
    """Data-plane operations every engine provides.

    Every method is deterministic given its inputs (and, for sampling, the random source), so that
    a distributed engine can recompute a lost partition without changing a release. No method adds
    privacy noise: noise is drawn by the mechanisms, once, on the driver.
    """

    name: str = "abstract"

    @abstractmethod
    def group_by_user(self, users: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Group records by user key.

        Returns ``(offsets, order, user_keys)``: records ``order[offsets[i]:offsets[i+1]]`` belong to
        user ``user_keys[i]``; users are sorted by key and records keep their input order within a user.
        """

    @abstractmethod
    def dedupe(self, ds: UserDataset) -> UserDataset:
        """Each distinct item once per user."""

    @abstractmethod
    def sample(self, ds: UserDataset, s: int, replace: bool, rng: RngLike) -> UserDataset:
        """Per-user sample: ``s`` items with replacement, or ``min(s, |K_i|)`` without."""

    @abstractmethod
    def histogram_sum(self, ds: UserDataset, normalize: bool = True) -> np.ndarray:
        """``sum_i K~_i`` (``normalize``) or the count histogram of ``K_G`` over the finite domain."""

    @abstractmethod
    def per_user_mean(self, ds: UserDataset, item_values: np.ndarray) -> np.ndarray:
        """``(1/|K_i|) sum_{x in K_i} v(x)`` for every user, given one value row per item."""

"""Plan before you release (issue 19): the predicted error of every release from its public parameters, and
the other way round, the smallest epsilon (or alpha) that reaches a target error.

Every function here reads public parameters only (never data). Where the noise law is known exactly the
quantiles come from the law the sampler draws; where the error depends on the data's shape, from the
release's exact law on a stand-in (a public curve or density, or a seeded synthetic one of the same public
sizes: the calibrated predictors), with the paper's theorem bound beside it:

* :func:`aggregate` -- per-key count, users, sum, mean, variance and quantiles (lattice Laplace: the noise
  of each statistic per key, exact or by the delta method); the bias of the bounds and the range is not included.
* :func:`key_counts` -- records per key (lattice Laplace: exact; lattice Gaussian: within one step); the
  records dropped by the bounds are a bias the data decide and are not included.
* :func:`vocabulary` -- the private vocabulary (weighted, policy or DP-SIPS selection, one model each:
  :data:`VOCABULARY_MODELS`): the weight an item needs to be released, the
  release probability of an item held by ``n`` persons, and its count's noise.
* :func:`distinct` -- Knop & Steinke's distinct count: the exact law on a count curve (given or
  :func:`synthetic_curve`), and Theorem 1.1 / Eq. (8) with userdp's constants (:func:`theorem_bound`),
  Eq. (7) on a curve (:func:`general_bound`) and Theorem 1.2 / Eq. (10) for the greedy count
  (:func:`greedy_bound`).
* :func:`linear` -- PrivEMDLinear (Lemma 4.2's noise): the sampler's own draws.
* :func:`frequency` -- FreqEstLocal (GKRR, or the exponential randomizer on any finite metric): simulated
  through the randomizer's exact law; Theorem 6.6 / Corollary 6.8 beside it for GKRR.
* :func:`heatmap` -- the DP heatmap: simulated releases on a stand-in density; Theorem 3.1's order beside it.
* :func:`histogram` -- the user-level Laplace histogram: one cell's noise, exact. (PrivEMDItemWise releases
  the randomized items themselves; the error of the estimate made from them is :func:`frequency`'s.)

Each has an inverse (``*_epsilon`` / ``*_alpha``): the smallest parameter (to 1%) whose prediction meets a
target. Validity ranges are the releases' own: every plan refuses (``ParameterError``) what its release
would refuse, and never clamps.
"""

from __future__ import annotations

from .aggregate import AggregatePrediction, aggregate
from .common import Prediction
from .counts import (
    VOCABULARY_MODELS,
    SelectionModel,
    histogram,
    key_counts,
    key_counts_epsilon,
    vocabulary,
    vocabulary_epsilon,
    vocabulary_model,
)
from .dem import frequency, frequency_alpha, linear, linear_alpha
from .distinct import distinct, distinct_epsilon, general_bound, greedy_bound, synthetic_curve, theorem_bound
from .heatmap import heatmap, heatmap_epsilon, synthetic_grid_sum

__all__ = [
    "AggregatePrediction",
    "aggregate",
    "VOCABULARY_MODELS",
    "Prediction",
    "SelectionModel",
    "distinct",
    "distinct_epsilon",
    "frequency",
    "frequency_alpha",
    "heatmap",
    "heatmap_epsilon",
    "histogram",
    "key_counts",
    "key_counts_epsilon",
    "linear",
    "linear_alpha",
    "synthetic_curve",
    "synthetic_grid_sum",
    "theorem_bound",
    "general_bound",
    "greedy_bound",
    "vocabulary",
    "vocabulary_epsilon",
    "vocabulary_model",
]

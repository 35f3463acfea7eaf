"""Checking claimed privacy guarantees against actual output distributions.

* **Exact mode** (finite outputs): compute the output distributions on neighbouring inputs and the exact
  privacy loss. For item-level metric DP, ``max_y ln P(y|x)/P(y|x') / d(x, x')`` over all pairs
  (:func:`audit_randomizer`); for shuffled item-wise releases on small domains, the exact law of the
  released multiset (a distribution over compositions of ``m`` into the output alphabet) and the
  hockey-stick divergence at the claimed ``alpha d_EM`` (:func:`audit_shuffled`).
* **Statistical mode** (continuous outputs): sample the mechanism on two neighbouring inputs, bin the
  outputs, and bound the hockey-stick divergence ``D_{e^eps}(P || Q)`` from below with a confidence
  level (Clopper-Pearson per bin, union bound), in the spirit of DP-Auditorium's histogram testers
  (:func:`audit_samples`). A claim is *refuted* when the lower confidence bound exceeds its delta; a
  sound mechanism is never refuted except with probability at most ``1 - confidence``. A finite sample
  cannot see a small delta: every statistical result states its detection limit
  (:func:`detection_limit`, "cannot refute delta below ..."), about 1e-3 with 5e4 samples per input.
* **Worst-case neighbour search** (:func:`audit_search`): a cheap pilot run on every candidate pair
  (:func:`point_neighbours` -- distance-1 moves, single-item moves, opposite corners;
  :func:`user_neighbours` -- removing a user, adding an empty or a full user, replacing a user), then the full test
  with *fresh* samples on the pair (and 1-D projection) the pilot found worst, so the selection does not
  bias the confidence level.
* **DP heatmaps** (:func:`audit_heatmap`): any heatmap mechanism ``mechanism(s, epsilon, rng=...) -> Release``
  under add/remove-one-user neighbours, by :func:`audit_search` over a few users' distributions on a tiny
  grid (a user removed, a user concentrated on one cell or spread evenly added), with the output projected on
  the mean-difference direction, on one cell's mass, or on its number of distinct values (a tree's leaves).
* **Per-key aggregates** (:func:`audit_aggregate`): every randomized step of :func:`userdp.releases.aggregate`
  at its defaults, from what the release hands its samplers (:func:`userdp.noise.trace.recording`), each step's
  exact loss against its stated share over add/remove-one-person pairs of tiny datasets, earlier choices replayed.
* **Distinct count** (:func:`audit_distinct_count`): the exact privacy loss of Knop & Steinke's
  Algorithm 1 as implemented (GEM selection by the exact exponential mechanism, then the lattice discrete
  Laplace release) over all add/remove-one-person pairs of tiny datasets, and its exact ``1 - beta``
  lower-bound coverage.

The package's modules, each importing only those before it: :mod:`userdp.audit.result` (:class:`AuditResult`),
:mod:`userdp.audit.exact` (the exact audits), :mod:`userdp.audit.neighbours` (candidate neighbouring inputs),
:mod:`userdp.audit.statistical` (the sample-based audits) and :mod:`userdp.audit.mechanisms` (the audits of
userdp's own mechanisms that ``userdp audit`` runs, e.g. :func:`audit_laplace_mechanism`,
:func:`audit_every_heatmap`). Every name is importable from ``userdp.audit`` itself.
"""

from .exact import _FLOAT_SLACK as _FLOAT_SLACK
from .exact import (
    LATTICE_PAIRS_2D,
    audit_aggregate,
    audit_distinct_count,
    audit_frequency,
    audit_itemwise,
    audit_lattice_gaussian,
    audit_lattice_l1,
    audit_lattice_l2,
    audit_lattice_laplace,
    audit_max_items_choice,
    audit_randomizer,
    audit_sampled,
    audit_set_union,
    audit_shuffled,
    audit_sips,
    hockey_stick,
    l2_lattice_moment,
    l2_lattice_table,
    randomized_rounding_law,
    set_union_law,
    shuffled_counts_law,
    shuffled_output_distribution,
    sips_law,
)
from .exact import _discrete_gaussian_law as _discrete_gaussian_law
from .exact import _dlap_tail as _dlap_tail
from .exact import _exp_mech_log_probs as _exp_mech_log_probs
from .exact import _hockey_stick_laws as _hockey_stick_laws
from .exact import _l2_psi as _l2_psi
from .exact import _l2_rho as _l2_rho
from .exact import _max_log_ratio as _max_log_ratio
from .exact import _tail_law as _tail_law
from .mechanisms import (
    audit_aggregate_release,
    audit_distinct_release,
    audit_distinct_releases,
    audit_every_heatmap,
    audit_exponential_randomizer,
    audit_gaussian_mechanism,
    audit_gkrr_randomizer,
    audit_itemwise_release,
    audit_laplace_mechanism,
    audit_lattice_mechanisms,
    audit_linear_release,
    audit_set_union_releases,
    heatmap_algorithms,
)
from .neighbours import NeighbourPair, point_neighbours, user_neighbours
from .result import AuditResult
from .statistical import _HEATMAP_PROJECTIONS as _HEATMAP_PROJECTIONS
from .statistical import _cp_lower as _cp_lower
from .statistical import _cp_upper as _cp_upper
from .statistical import _divergence_estimate as _divergence_estimate
from .statistical import _edges as _edges
from .statistical import _heatmap_users as _heatmap_users
from .statistical import audit_heatmap, audit_samples, audit_search, detection_limit

__all__ = [
    "AuditResult",
    "NeighbourPair",
    "hockey_stick",
    "audit_randomizer",
    "shuffled_output_distribution",
    "shuffled_counts_law",
    "audit_shuffled",
    "audit_itemwise",
    "audit_frequency",
    "audit_sampled",
    "detection_limit",
    "audit_samples",
    "point_neighbours",
    "user_neighbours",
    "audit_search",
    "audit_heatmap",
    "audit_distinct_count",
    "audit_aggregate",
    "audit_aggregate_release",
    "set_union_law",
    "audit_set_union",
    "audit_sips",
    "sips_law",
    "audit_max_items_choice",
    "l2_lattice_table",
    "l2_lattice_moment",
    "randomized_rounding_law",
    "LATTICE_PAIRS_2D",
    "audit_lattice_l2",
    "audit_lattice_l1",
    "audit_lattice_laplace",
    "audit_lattice_gaussian",
    "audit_gkrr_randomizer",
    "audit_exponential_randomizer",
    "audit_itemwise_release",
    "audit_distinct_release",
    "audit_distinct_releases",
    "audit_set_union_releases",
    "audit_lattice_mechanisms",
    "audit_laplace_mechanism",
    "audit_gaussian_mechanism",
    "audit_linear_release",
    "heatmap_algorithms",
    "audit_every_heatmap",
]

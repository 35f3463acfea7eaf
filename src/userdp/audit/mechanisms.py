"""The audits of userdp's own mechanisms that ``userdp audit`` runs: one function per mechanism, each with the
small, fixed inputs and parameters of its audit, returning the :class:`~userdp.audit.AuditResult` (or a list of
them) of the general auditors (:mod:`userdp.audit.exact`, :mod:`userdp.audit.statistical`).

The statistical audits take ``n``, the number of samples per input, and ``rng``, the random source of the
mechanisms' noise (a seed gives reproducible audits); the exact audits take neither.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..noise import RngLike, resolve_rng
from .exact import (
    audit_aggregate,
    audit_distinct_count,
    audit_itemwise,
    audit_lattice_gaussian,
    audit_lattice_l1,
    audit_lattice_l2,
    audit_lattice_laplace,
    audit_max_items_choice,
    audit_randomizer,
    audit_set_union,
    audit_sips,
)
from .neighbours import point_neighbours
from .result import AuditResult
from .statistical import audit_heatmap, audit_samples, audit_search

__all__ = [
    "audit_gkrr_randomizer",
    "audit_exponential_randomizer",
    "audit_itemwise_release",
    "audit_distinct_release",
    "audit_distinct_releases",
    "audit_aggregate_release",
    "audit_set_union_releases",
    "audit_laplace_mechanism",
    "audit_gaussian_mechanism",
    "audit_linear_release",
    "audit_lattice_mechanisms",
    "heatmap_algorithms",
    "audit_every_heatmap",
]


# --------------------------------------------------------------------------------------------
# Exact audits
# --------------------------------------------------------------------------------------------


def audit_gkrr_randomizer() -> AuditResult:
    """Exact audit of the GKRR randomizer (:class:`userdp.dem.GKRR`) at ``alpha_0 = 1.5`` on the clustered
    metric of 3 clusters of 3 items (``r = 0.2``).

    Returns
    -------
    AuditResult
        :func:`~userdp.audit.audit_randomizer` of the randomizer's own transition table: the item-level
        privacy loss, exactly, over every pair of inputs and every output.
    """
    from ..dem import GKRR
    from ..metrics import ClusteredMetric

    space = ClusteredMetric(3, 3, 0.2)
    return audit_randomizer(GKRR(space, 1.5).transition_matrix(), space.full_matrix(), 1.5, "GKRR alpha_0 = 1.5")


def audit_exponential_randomizer() -> AuditResult:
    """Exact audit of the exponential randomizer (:class:`userdp.dem.ExponentialRandomizer`) at
    ``alpha_0 = 1.5`` on the clustered metric of 3 clusters of 3 items (``r = 0.2``).

    Returns
    -------
    AuditResult
        :func:`~userdp.audit.audit_randomizer` of the randomizer's own transition table.
    """
    from ..dem import ExponentialRandomizer
    from ..metrics import ClusteredMetric

    space = ClusteredMetric(3, 3, 0.2)
    e = ExponentialRandomizer(space, 1.5)
    return audit_randomizer(e.transition_matrix(), space.full_matrix(), 1.5, "exponential randomizer alpha_0 = 1.5")


def audit_itemwise_release() -> AuditResult:
    """Exact audit of PrivEMDItemWise as the library runs it (:func:`userdp.dem.priv_emd_itemwise`, local
    model): GKRR at ``alpha_0 = 0.7`` on 2 clusters of 2 items (``r = 0.5``), 3 items per user.

    Returns
    -------
    AuditResult
        :func:`~userdp.audit.audit_itemwise`: the guarantee ``priv_emd_itemwise`` returns against GKRR's own
        table, over every pair of 3-item datasets.
    """
    from ..dem import GKRR
    from ..metrics import ClusteredMetric

    return audit_itemwise(
        GKRR(ClusteredMetric(2, 2, 0.5), 0.7),
        3,
        name="PrivEMDItemWise (GKRR alpha_0 = 0.7 on 2 clusters of 2, m = 3, local)",
    )


def audit_distinct_release() -> AuditResult:
    """Exact audit of the distinct count (Knop & Steinke's Algorithm 1, :func:`userdp.distinct.distinct_count`)
    at epsilon 1, ``beta = 0.1`` and ``l_max = 3``, over every dataset of 1 to 3 persons whose sets are subsets
    of 3 elements (the empty set included: a person with nothing).

    Returns
    -------
    AuditResult
        :func:`~userdp.audit.audit_distinct_count` over those datasets and their remove-one-person neighbours:
        the exact privacy loss and the exact coverage of the lower bound.
    """
    from itertools import combinations, combinations_with_replacement

    types = [set(c) for r in (0, 1, 2, 3) for c in combinations(range(3), r)]  # r = 0: a person with nothing
    tiny = [list(c) for k in (1, 2, 3) for c in combinations_with_replacement(types, k)]
    return audit_distinct_count(tiny, 1.0, beta=0.1, l_max=3, name="distinct count (Algorithm 1), epsilon 1")


def audit_distinct_releases() -> list[AuditResult]:
    """:func:`audit_distinct_release` with each of GEM's selections (``userdp distinct --selection``): the
    exponential mechanism and permute-and-flip, on the same tiny datasets."""
    from itertools import combinations, combinations_with_replacement

    types = [set(c) for r in (0, 1, 2, 3) for c in combinations(range(3), r)]
    tiny = [list(c) for k in (1, 2, 3) for c in combinations_with_replacement(types, k)]
    return [audit_distinct_release()] + [
        audit_distinct_count(tiny, 1.0, beta=0.1, l_max=3, selection="permute-and-flip",
                             name="distinct count (Algorithm 1, permute-and-flip), epsilon 1")  # fmt: skip
    ]


def audit_set_union_releases() -> list[AuditResult]:
    """Exact audits of the set unions of :mod:`userdp.vocabulary` on tiny datasets (at most 2 items kept per
    person): the weighted union with Laplace and with Gaussian noise at epsilon 1 and delta 0.01, and the
    policy Laplace union at epsilon 4 and delta 0.01 with its cutoff at the threshold (every order of the
    persons and priority of the items; persons fill items up to the threshold), the policy greedy union at
    epsilon 1 and delta 0.01 (Carvalho, Wang & Gondara 2022; local counts from repeated items), DP-SIPS in 2 rounds at
    epsilon 1 and delta 0.01 (:func:`~userdp.audit.audit_sips`), and the private choice of ``max_items``
    (``max_items="auto"``) at epsilon 0.5 (:func:`~userdp.audit.audit_max_items_choice`).

    Returns
    -------
    list of AuditResult
        :func:`~userdp.audit.audit_set_union` of each union, then :func:`~userdp.audit.audit_sips`, then
        :func:`~userdp.audit.audit_max_items_choice`.
    """
    tiny = [[[0]], [[0, 1]], [[0, 1], [1, 2]], [[0], [0, 1], [0, 2, 3]], [[0, 1], [0, 1], [2]]]
    tiny.append([[0]] * 6 + [[0, 1]])  # a shared item near the threshold
    results = [
        audit_set_union(tiny, 1.0, 1e-2, 2, noise, name=f"weighted {noise} set union, epsilon 1, delta 0.01")
        for noise in ("laplace", "gaussian")
    ]
    policy_tiny = [*tiny[:5], [[0], [0], [0, 1], [1, 2]], [[0, 1, 2], [0], [0], [1]], [[0]] * 4 + [[0, 1]]]
    results.append(  # every order of the persons and priority of the items; persons fill items at T
        audit_set_union(policy_tiny, 4.0, 1e-2, 2, "laplace", policy=True, cutoff_margin=0.0,
                        name="policy laplace set union, epsilon 4, delta 0.01 (cutoff at the threshold)")
    )  # fmt: skip
    greedy_tiny = [*policy_tiny, [[0, 0, 1], [1, 2, 2]], [[0, 1, 2], [0], [2, 2, 1]]]  # repeats: local counts
    results.append(  # every order of the persons and priority of the items; persons fill items most held first
        audit_set_union(greedy_tiny, 1.0, 1e-2, 2, "laplace", greedy=True,
                        name="policy greedy laplace set union, epsilon 1, delta 0.01")
    )  # fmt: skip
    results.append(  # DP-SIPS: every round's kept subsets, the released items removed before the next round
        audit_sips(tiny, 1.0, 1e-2, 2, rounds=2, ratio=4.0, name="DP-SIPS, 2 rounds, epsilon 1, delta 0.01")
    )
    counts = [[1] * 17 + [4] * 2 + [9000], [1] * 8 + [2] * 9 + [16] * 2 + [300], [1] * 26 + [8] * 3 + [5000], [1]]
    results.append(audit_max_items_choice(counts, 0.5, name="max_items chosen privately (auto), epsilon 0.5"))
    return results


def audit_lattice_mechanisms() -> list[AuditResult]:
    """The exact support-and-loss audits of the lattice samplers of :mod:`userdp.noise` at their default
    parameters.

    Returns
    -------
    list of AuditResult
        :func:`~userdp.audit.audit_lattice_laplace`, :func:`~userdp.audit.audit_lattice_gaussian`,
        :func:`~userdp.audit.audit_lattice_l1` and :func:`~userdp.audit.audit_lattice_l2`, in that order.
    """
    return [audit_lattice_laplace(), audit_lattice_gaussian(), audit_lattice_l1(), audit_lattice_l2()]


# --------------------------------------------------------------------------------------------
# Statistical audits
# --------------------------------------------------------------------------------------------


def audit_laplace_mechanism(n: int = 50_000, rng: RngLike = None) -> AuditResult:
    """Statistical audit of the lattice Laplace mechanism (:func:`userdp.noise.laplace_mechanism`) at
    sensitivity 1 and epsilon 1.

    Parameters
    ----------
    n:
        Samples per input: the ``n`` coordinates of a release of zeros and of a release of ones, each
        coordinate's noise that of a release of sensitivity 1.
    rng:
        The mechanism's random source (a seed gives a reproducible audit).

    Returns
    -------
    AuditResult
        :func:`~userdp.audit.audit_samples` of the claim ``(1, 0)``, with its detection limit.
    """
    from ..noise import laplace_mechanism

    src = resolve_rng(rng)
    a = laplace_mechanism(np.zeros(n), 1.0, 1.0, src)
    b = laplace_mechanism(np.ones(n), 1.0, 1.0, src)
    return audit_samples(a, b, 1.0, 0.0, name="lattice Laplace, sensitivity 1")


def audit_gaussian_mechanism(n: int = 50_000, rng: RngLike = None) -> AuditResult:
    """Statistical audit of the lattice Gaussian mechanism (:func:`userdp.noise.gaussian_mechanism`) at
    sensitivity 1, epsilon 1 and delta 0.001.

    Parameters
    ----------
    n:
        Samples per input: the ``n`` coordinates of a release of zeros and of a release of ones.
    rng:
        The mechanism's random source (a seed gives a reproducible audit).

    Returns
    -------
    AuditResult
        :func:`~userdp.audit.audit_samples` of the claim ``(1, 0.001)``, with its detection limit.
    """
    from ..noise import calibrate_gaussian, gaussian_mechanism

    src = resolve_rng(rng)
    a = gaussian_mechanism(np.zeros(n), 1.0, 1.0, 1e-3, src)
    b = gaussian_mechanism(np.ones(n), 1.0, 1.0, 1e-3, src)
    sigma = calibrate_gaussian(1.0, 1.0, 1e-3).sigma
    return audit_samples(a, b, 1.0, 1e-3, name=f"lattice Gaussian, sigma {sigma:.3f}")


def audit_linear_release(n: int = 50_000, rng: RngLike = None) -> AuditResult:
    """Statistical audit of PrivEMDLinear (:func:`userdp.dem.priv_emd_linear`, l2, ``l = 1``, alpha 2) by a
    worst-case search over one user's datasets of 3 points in ``[-1, 1]^2``
    (:func:`~userdp.audit.point_neighbours`, steps of 0.5); the claim is ``(2 d_EM, 0)``.

    Parameters
    ----------
    n:
        Samples per input of the final test (:func:`~userdp.audit.audit_search`).
    rng:
        The mechanism's random source (a seed gives a reproducible audit).

    Returns
    -------
    AuditResult
        :func:`~userdp.audit.audit_search`'s result on the worst pair.
    """
    from ..data import UserDataset
    from ..dem import priv_emd_linear

    src = resolve_rng(rng)

    def sample(x, k):
        ds = UserDataset.from_lists([[tuple(p) for p in x]] * k)
        return priv_emd_linear(ds, 1.0, 2.0, f_points=lambda v: v, rng=src).extras["per_user"]

    pairs = point_neighbours(np.array([[0.0, 0.0], [0.5, -0.5], [-0.5, 0.25]]), 0.5, -1.0, 1.0)
    return audit_search(
        sample, pairs, lambda d: (2.0 * d, 0.0), n=n, name="PrivEMDLinear (l2, alpha 2), one user's 3 points"
    )


def heatmap_algorithms() -> list[tuple[Callable[..., Any], str, int]]:
    """Every heatmap algorithm of ``userdp heatmap``, as :func:`~userdp.audit.audit_every_heatmap` audits it.

    Returns
    -------
    list of (mechanism, label, thin)
        ``mechanism(s, epsilon, rng=...)`` (other required arguments bound), its label, and the divisor of its
        number of samples (10 for the LP-based sparse and dense releases, each call of which solves a linear
        program, and for the coarse-grid branch of ``auto``; 1 for the others).
    """
    from functools import partial

    from ..heatmaps import (
        adaptive_grid_heatmap,
        auto_heatmap,
        dense_emd_agg,
        dp_sparse_emd_agg,
        hierarchical_heatmap,
        laplace_heatmap,
        privtree_emd_heatmap,
        privtree_heatmap,
    )

    return [
        (auto_heatmap, "auto (userdp's default; noisy user count, then grid or PrivTree-EMD)", 1),
        (partial(auto_heatmap, switch=math.inf), "auto, coarse-grid branch", 10),
        (laplace_heatmap, "Laplace per cell", 1),
        (hierarchical_heatmap, "hierarchy (Hay et al.)", 1),
        (adaptive_grid_heatmap, "adaptive grid", 1),
        (privtree_heatmap, "PrivTree", 1),
        (privtree_emd_heatmap, "PrivTree-EMD", 1),
        (dp_sparse_emd_agg, "sparse EMD aggregation", 10),
        (partial(dense_emd_agg, coarse_side=2), "dense EMD aggregation", 10),
    ]


def audit_every_heatmap(
    n: int = 50_000, rng: RngLike = None, report: Callable[[AuditResult], None] | None = None
) -> list[AuditResult]:
    """Statistical audit of every heatmap algorithm (:func:`heatmap_algorithms`) under add/remove-one-user
    neighbours, by :func:`~userdp.audit.audit_heatmap` on a 2 x 2 grid at epsilon 2.

    Parameters
    ----------
    n:
        The budget of samples: an algorithm is tested with ``max(200, n // (10 thin))`` fresh samples per input
        (``thin`` from :func:`heatmap_algorithms`) after ``max(50, that // 8)`` pilot samples per dataset.
    rng:
        The mechanisms' random source, shared by the audits in turn (a seed gives reproducible audits).
    report:
        Called with each result as soon as its audit ends (the audits take seconds each), e.g. to print it.

    Returns
    -------
    list of AuditResult
        One per algorithm, in the order of :func:`heatmap_algorithms`.
    """
    src = resolve_rng(rng)
    results = []
    for mech, label, thin in heatmap_algorithms():
        k = max(200, n // (10 * thin))
        results.append(audit_heatmap(mech, 2.0, shape=(2, 2), n=k, n_pilot=max(50, k // 8), name=label, rng=src))
        if report is not None:
            report(results[-1])
    return results


def audit_aggregate_release() -> list[AuditResult]:
    """Exact audit of the per-key aggregates (:func:`userdp.releases.aggregate`) at its defaults -- bounds by GEM
    (over ``L0`` in {1, 2}, ``Linf`` in {1, 4}), the range chosen over 65 points of the public domain [0, 2] --
    with every statistic and the 0.1- and 0.9-quantiles, at epsilon 1, 2 public keys, over tiny datasets of 1 to 3
    persons (values on several dyadic grids, one person with 4 records on each key); then the same with the range
    [0, 2] given, where the quantiles' grid sees the values (a range chosen on so few persons often holds none).

    Returns
    -------
    list of AuditResult
        :func:`~userdp.audit.audit_aggregate`: each step's exact loss and bound against its stated share (GEM's
        bounds, the range, ``N``, ``U``, ``S1``, ``S2``, the quantiles' grid, each level's per-key draws), then the
        shares' total against the guarantee.
    """
    tiny = [
        [[("a", 0.0), ("b", 2.0)], [("a", 2.0), ("b", 0.5)], [("a", 1.0), ("b", 1.0)]],
        [[("a", 0.25)] * 4 + [("b", 1.5)] * 4, [("a", 2.0), ("b", 0.0)]],
        [[("a", 0.3), ("a", 1.0)], [("b", 0.75)]],
    ]
    stats = ("count", "users", "sum", "mean", "variance", "quantile:0.1,0.9")
    chosen = audit_aggregate(tiny, 1.0, stats=stats, keys=("a", "b"), value_domain=(0.0, 2.0), l0s=(1, 2),
                             linfs=(1, 4), seeds=(0,), name="per-key aggregates, epsilon 1")  # fmt: skip
    given = audit_aggregate(tiny, 1.0, stats=("mean", "quantile:0.1,0.9"), keys=("a", "b"), value_domain=None,
                            value_range=(0.0, 2.0), l0s=(1, 2), linfs=(1, 4), seeds=(0,),
                            name="per-key aggregates, range [0, 2] given, epsilon 1")  # fmt: skip
    return chosen + given

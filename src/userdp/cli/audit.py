"""``userdp audit``: check a mechanism's claimed guarantee against its outputs (:mod:`userdp.audit`)."""

from __future__ import annotations

import argparse
import math

import numpy as np

from .common import SEED, console, number


def cmd_audit(args: argparse.Namespace) -> int:
    """Audit one of userdp's mechanisms: claimed vs measured privacy. Statistical audits also print their
    detection limit (the smallest delta their samples could refute)."""
    from ..audit import audit_randomizer, audit_samples
    from ..metrics import ClusteredMetric
    from ..noise import RandomSource, calibrate_gaussian, gaussian_mechanism, laplace_mechanism

    src = RandomSource(args.seed) if args.seed is not None else RandomSource()
    n = args.trials
    space = ClusteredMetric(3, 3, 0.2)
    if args.mechanism == "gkrr":
        from ..dem import GKRR

        res = audit_randomizer(GKRR(space, 1.5).transition_matrix(), space.full_matrix(), 1.5, "GKRR alpha_0 = 1.5")
    elif args.mechanism == "exponential":
        from ..dem import ExponentialRandomizer

        e = ExponentialRandomizer(space, 1.5)
        res = audit_randomizer(e.transition_matrix(), space.full_matrix(), 1.5, "exponential randomizer alpha_0 = 1.5")
    elif args.mechanism == "itemwise":
        from ..audit import audit_itemwise
        from ..dem import GKRR

        # the library's own mechanism: priv_emd_itemwise's returned guarantee against GKRR's own table
        res = audit_itemwise(
            GKRR(ClusteredMetric(2, 2, 0.5), 0.7),
            3,
            name="PrivEMDItemWise (GKRR alpha_0 = 0.7 on 2 clusters of 2, m = 3, local)",
        )
    elif args.mechanism == "laplace":
        a = laplace_mechanism(np.zeros(n), 1.0, 1.0, src)
        b = laplace_mechanism(np.ones(n), 1.0, 1.0, src)
        res = audit_samples(a, b, 1.0, 0.0, name="lattice Laplace, sensitivity 1")
    elif args.mechanism == "gaussian":
        a = gaussian_mechanism(np.zeros(n), 1.0, 1.0, 1e-3, src)
        b = gaussian_mechanism(np.ones(n), 1.0, 1.0, 1e-3, src)
        sigma = calibrate_gaussian(1.0, 1.0, 1e-3).sigma
        res = audit_samples(a, b, 1.0, 1e-3, name=f"lattice Gaussian, sigma {sigma:.3f}")
    elif args.mechanism == "heatmap":
        from functools import partial

        from ..audit import audit_heatmap
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

        # every heatmap algorithm of `userdp heatmap`, on a 2 x 2 grid at epsilon 2 (the LP-based sparse and
        # dense releases with a tenth of the samples: each call solves a linear program)
        mechanisms = [
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
        results = []
        for mech, label, thin in mechanisms:
            k = max(200, n // (10 * thin))
            results.append(
                audit_heatmap(mech, 2.0, shape=(2, 2), n=k, n_pilot=max(50, k // 8), name=label, rng=src)
            )
            console().print(str(results[-1]))
        return 0 if all(r.passed for r in results) else 1
    elif args.mechanism == "lattice":
        from ..audit import audit_lattice_gaussian, audit_lattice_l1, audit_lattice_l2, audit_lattice_laplace

        results = [audit_lattice_laplace(), audit_lattice_gaussian(), audit_lattice_l1(), audit_lattice_l2()]
        for r in results:
            console().print(str(r))
        return 0 if all(r.passed for r in results) else 1
    elif args.mechanism == "distinct":
        from itertools import combinations, combinations_with_replacement

        from ..audit import audit_distinct_count

        types = [set(c) for r in (0, 1, 2, 3) for c in combinations(range(3), r)]  # r = 0: a person with nothing
        tiny = [list(c) for k in (1, 2, 3) for c in combinations_with_replacement(types, k)]
        res = audit_distinct_count(tiny, 1.0, beta=0.1, l_max=3, name="distinct count (Algorithm 1), epsilon 1")
    elif args.mechanism == "vocabulary":
        from ..audit import audit_set_union

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
        for r in results:
            console().print(str(r))
        return 0 if all(r.passed for r in results) else 1
    else:  # linear: worst-case search over one user's point datasets
        from ..audit import audit_search, point_neighbours
        from ..data import UserDataset
        from ..dem import priv_emd_linear

        def sample(x, k):
            ds = UserDataset.from_lists([[tuple(p) for p in x]] * k)
            return priv_emd_linear(ds, 1.0, 2.0, f_points=lambda v: v, rng=src).extras["per_user"]

        pairs = point_neighbours(np.array([[0.0, 0.0], [0.5, -0.5], [-0.5, 0.25]]), 0.5, -1.0, 1.0)
        res = audit_search(
            sample, pairs, lambda d: (2.0 * d, 0.0), n=n, name="PrivEMDLinear (l2, alpha 2), one user's 3 points"
        )
    console().print(str(res))
    return 0 if res.passed else 1


def add_parser(sub) -> None:
    au = sub.add_parser(
        "audit",
        help="check a mechanism's claimed guarantee against its outputs",
        epilog="example:\n  userdp audit lattice      # the exact audits of the lattice samplers",
    )
    au.add_argument(
        "mechanism",
        choices=[
            "gkrr",
            "exponential",
            "itemwise",
            "distinct",
            "vocabulary",
            "laplace",
            "gaussian",
            "linear",
            "lattice",
            "heatmap",
        ],
        help="lattice: the exact support-and-loss audits of the lattice samplers (Laplace, Gaussian, l1, l2); "
        "heatmap: every heatmap algorithm, statistically, under add/remove-one-user neighbours; vocabulary: the "
        "exact audit of the weighted and policy set unions",
    )
    au.add_argument(
        "--trials", type=number(int, 1, 10**7), default=50_000, help="samples per input (statistical audits)"
    )
    au.add_argument("--seed", type=SEED, default=None, help="seed the audit's sampling (reproducible runs)")
    au.set_defaults(func=cmd_audit)

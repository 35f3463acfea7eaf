"""``userdp audit``: check a mechanism's claimed guarantee against its outputs (:mod:`userdp.audit`)."""

from __future__ import annotations

import argparse

from .common import SEED, console, number


def cmd_audit(args: argparse.Namespace) -> int:
    """Audit one of userdp's mechanisms: claimed vs measured privacy. Statistical audits also print their
    detection limit (the smallest delta their samples could refute)."""
    from .. import audit

    n, seed = args.trials, args.seed  # samples per input and the seed of the statistical audits

    def show(result: audit.AuditResult) -> None:
        console().print(str(result))

    if args.mechanism == "heatmap":  # nine audits of seconds each: each printed as soon as it ends
        results = audit.audit_every_heatmap(n, seed, report=show)
        return 0 if all(r.passed for r in results) else 1
    run = {
        "gkrr": audit.audit_gkrr_randomizer,
        "exponential": audit.audit_exponential_randomizer,
        "itemwise": audit.audit_itemwise_release,
        "distinct": audit.audit_distinct_releases,
        "vocabulary": audit.audit_set_union_releases,
        "aggregate": audit.audit_aggregate_release,
        "lattice": audit.audit_lattice_mechanisms,
        "laplace": lambda: audit.audit_laplace_mechanism(n, seed),
        "gaussian": lambda: audit.audit_gaussian_mechanism(n, seed),
        "linear": lambda: audit.audit_linear_release(n, seed),
    }[args.mechanism]
    outcome = run()
    results = outcome if isinstance(outcome, list) else [outcome]
    for r in results:
        show(r)
    return 0 if all(r.passed for r in results) else 1


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
            "aggregate",
            "laplace",
            "gaussian",
            "linear",
            "lattice",
            "heatmap",
        ],
        help="lattice: the exact support-and-loss audits of the lattice samplers (Laplace, Gaussian, l1, l2); "
        "heatmap: every heatmap algorithm, statistically, under add/remove-one-user neighbours; vocabulary: the "
        "exact audit of the weighted and policy set unions; aggregate: the exact audit of every step of the per-key "
        "aggregates (bounds, range, noisy sums, quantiles) against its stated share",
    )
    au.add_argument(
        "--trials", type=number(int, 1, 10**7), default=50_000, help="samples per input (statistical audits)"
    )
    au.add_argument("--seed", type=SEED, default=None, help="seed the audit's sampling (reproducible runs)")
    au.set_defaults(func=cmd_audit)

"""``userdp plan``: the predicted error of a release from its public parameters, or the smallest epsilon
for a target (:mod:`userdp.plan`). Reads no data."""

from __future__ import annotations

import argparse

from .. import plan
from ..errors import ParameterError
from .common import DELTA, EPSILON, number, report
from .counts import bounds_pair


def cmd_plan(args: argparse.Namespace) -> int:
    conf = args.confidence
    if (args.epsilon is None) == (args.target is None):
        raise ParameterError("pass --epsilon (the error it gives) or --target (the epsilon it needs), not both")
    delta = args.delta or 0.0
    out: dict = {}
    if args.release == "counts":
        l0, linf = args.bounds
        kw = {"l0": l0, "linf": linf, "n_keys": args.keys, "noise": args.noise}
        eps = args.epsilon
        if args.target is not None:
            eps = plan.key_counts_epsilon(args.target, conf, delta, **kw)
            out["smallest epsilon"] = eps
        p = plan.key_counts(eps, delta, confidence=conf, **kw)
        out.update({
            "at epsilon": eps,
            "median error": p.median,
            f"error at confidence {conf:g}": p.quantiles[conf],
            "in words": f"at epsilon {eps:.3g}: {p.sentence(conf)}",
            "basis": p.basis + "; records beyond the bounds are dropped too (a bias the data decide)",
        })  # fmt: skip
    else:
        kw = {"max_items": args.max_items, "noise": args.noise, "count_fraction": args.count_fraction}
        if not delta:
            raise ParameterError("a vocabulary needs --delta (e.g. 1e-6)")
        eps = args.epsilon
        if args.target is not None:
            eps = plan.vocabulary_epsilon(int(args.target), conf, delta, **kw)
            out["smallest epsilon"] = eps
        p = plan.vocabulary(eps, delta, persons=args.persons, confidence=conf, **kw)
        need = p.extra["weight needed"]
        new = p.extra["new item released at most"]
        held = {}
        if args.persons:
            held[f"an item held by {args.persons} persons"] = (
                f"released with probability {p.extra['release probability']:.3g}"
            )
        out.update({
            "at epsilon": eps,
            "released with probability 1/2": f"an item held by {need[0.5]:.3g} persons (one item each)",
            f"released with probability {conf:g}": f"an item held by {need[conf]:.3g} persons (one item each)",
            "an item only one person holds": f"released with probability at most {new:.3g}",
            **held,
            **({f"count error at confidence {conf:g}": p.quantiles[conf]} if p.quantiles else {}),
            "basis": p.basis,
        })  # fmt: skip
    report(args, f"plan: {args.release} (predicted from public parameters; no data read)", out)
    return 0


def add_parser(sub) -> None:
    pl = sub.add_parser(
        "plan",
        help="the predicted error of a release, or the epsilon a target needs (reads no data)",
        epilog="examples:\n  userdp plan counts --epsilon 1 --bounds 8,4 --keys 251\n"
        "  userdp plan counts --target 50 --confidence 0.9 --bounds 8,4\n"
        "  userdp plan vocabulary --epsilon 1 --delta 1e-6 --persons 40",
    )
    pl.add_argument("release", choices=["counts", "vocabulary"], help="which release")
    pl.add_argument("--epsilon", type=EPSILON, default=None, help="the epsilon to predict the error at")
    pl.add_argument("--target", type=number(float, 1e-9, 1e12), default=None,
                    help="counts: an error in records; vocabulary: a number of persons (one item each)")  # fmt: skip
    pl.add_argument("--confidence", type=number(float, 0.01, 0.999999), default=0.9, help="the confidence")
    pl.add_argument("--delta", type=DELTA, default=None, help="delta (vocabulary; Gaussian counts)")
    pl.add_argument("--noise", choices=["laplace", "gaussian"], default=None, help="the noise")
    pl.add_argument("--bounds", type=bounds_pair, default=(8, 4), help="counts: L0,LINF")
    pl.add_argument("--keys", type=number(int, 1, 10**9), default=1, help="counts: the number of keys released")
    pl.add_argument("--max-items", type=number(int, 1, 10_000), default=100, help="vocabulary: items per person")
    pl.add_argument("--count-fraction", type=number(float, 0.0, 0.99), default=0.5, help="vocabulary")
    pl.add_argument("--persons", type=number(int, 1, 10**9), default=None,
                    help="vocabulary: the release probability of an item held by this many persons")  # fmt: skip
    pl.add_argument("--json", action="store_true", help="print JSON")
    pl.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.noise is None:
        args.noise = "laplace" if args.release == "counts" else "gaussian"
    return cmd_plan(args)

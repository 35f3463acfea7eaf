"""``userdp distinct``: person-level DP lower bound on the number of distinct items
(:func:`userdp.releases.distinct`)."""

from __future__ import annotations

import argparse

from .. import releases
from .common import (
    EPSILON,
    PROBABILITY,
    add_input,
    add_release_options,
    charge,
    engine_of,
    number,
    report,
    source_of,
    warn_seed,
)


def cmd_distinct(args: argparse.Namespace) -> int:
    rel = releases.distinct(
        source_of(args),
        args.epsilon,
        user=args.user,
        item=args.item,
        tokenize=args.tokenize,
        beta=args.beta,
        l_max=args.max_bound,
        method=args.method,
        n_buckets=args.buckets,
        selection=args.selection,
        engine=engine_of(args),
        rng=args.seed,
    )
    charge(args, rel)  # before anything is printed
    out = {
        "lower_bound": rel.value,
        "bound": int(rel.extras["bound"]),
        "epsilon": args.epsilon,
        "beta": args.beta,
        "method": rel.params["method"],
        **({"buckets": args.buckets} if rel.params["method"] == "bucketed" else {}),
        "selection": rel.params["selection"],
        "engine": args.engine,
        "guarantee": rel.guarantee.describe(),
        "confidence": rel.error.description,
    }
    warn_seed(args, out)
    report(args, "person-level DP distinct count (Knop & Steinke, Algorithm 1)", out)
    return 0


def add_parser(sub) -> None:
    di = sub.add_parser(
        "distinct",
        help="person-level DP lower bound on the number of distinct items",
        epilog="example:\n  userdp distinct reviews.csv --user reviewer --item text --tokenize --epsilon 1",
    )
    add_input(di)
    di.add_argument("--user", required=True, help="person column")
    di.add_argument("--item", required=True, help="element column (or text, with --tokenize)")
    di.add_argument("--tokenize", action="store_true", help="split the item column into lower-cased words")
    di.add_argument("--epsilon", type=EPSILON, required=True, help="the privacy parameter (add or remove one person)")
    di.add_argument(
        "--beta",
        type=PROBABILITY,
        default=0.05,
        help="the bound holds with probability at least 1 - beta",
    )
    di.add_argument(
        "--max-bound", type=number(int, 1, 10**6), default=100, help="l_max: the largest contribution bound tried"
    )
    di.add_argument(
        "--method",
        choices=["matching", "greedy", "sampling", "bucketed"],
        default=None,
        help="how DC(D; l) is counted: exact matching, greedy (Algorithm 2), random sampling, or exact matching "
        "within public buckets of elements, counted on the executors on Spark (default: bucketed on Spark, "
        "matching on the other engines)",
    )
    di.add_argument(
        "--buckets", type=number(int, 1, 2**20), default=16, help="the number of buckets of --method bucketed"
    )
    di.add_argument(
        "--selection",
        choices=["exponential", "permute-and-flip"],
        default="exponential",
        help="how the contribution bound is drawn from GEM's scores: the exponential mechanism (the paper's) or "
        "permute-and-flip (same epsilon, never worse in expected score; its running time depends on the scores)",
    )
    add_release_options(di)
    di.set_defaults(func=cmd_distinct)

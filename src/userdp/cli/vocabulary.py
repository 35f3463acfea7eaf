"""``userdp vocabulary``: person-level DP set of the items many persons hold, with noisy person counts
(:func:`userdp.releases.vocabulary`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import releases
from ..errors import ParameterError
from .common import (
    DELTA,
    EPSILON,
    MAX_ITEMS,
    add_input,
    add_release_options,
    charge_and_write_csv,
    engine_of,
    number,
    probe_writable,
    report,
    source_of,
    warn_seed,
)


def _check_out(args: argparse.Namespace) -> Path | None:
    if args.out is None:
        return None
    out = Path(args.out)
    if not out.name or out.name in (".", "..") or out.is_dir():
        raise ParameterError(f"--out needs a CSV file name, got {args.out!r}")
    if out.suffix.lower() != ".csv":
        raise ParameterError(f"--out {out.name} needs the suffix .csv")
    if out.exists() and not args.force:
        raise ParameterError(f"{out} already exists; pass --force to overwrite, or another --out")
    probe_writable(out)
    return out


def cmd_vocabulary(args: argparse.Namespace) -> int:
    out = _check_out(args)  # before the data is read: a bad --out spends nothing
    rel = releases.vocabulary(
        source_of(args),
        args.epsilon,
        args.delta,
        user=args.user,
        item=args.item,
        tokenize=args.tokenize,
        max_items=args.max_items,
        noise=args.noise,
        policy=args.policy,
        count_fraction=args.count_fraction,
        algorithm=args.algorithm,
        rounds=args.rounds,
        ratio=args.ratio,
        engine=engine_of(args),
        rng=args.seed,
    )
    items, counts = rel.value["items"], rel.value["counts"]
    header = ["item", "count"] if counts is not None else ["item"]
    rows = ([label, f"{counts[i]:.6g}"] if counts is not None else [label] for i, label in enumerate(items))
    charge_and_write_csv(args, rel, out, header, rows)  # written under a temporary name, charged, moved
    shown = min(len(items), args.show)
    how = args.algorithm or ("policy" if args.policy else "weighted")
    result = {
        "items_released": int(len(items)),
        "epsilon": args.epsilon,
        "delta": args.delta,
        "max_items": rel.params["max_items"],
        **(
            {
                "max_items chosen": f"privately from the data (epsilon {rel.params['epsilon_bound']:.4g} of "
                f"{args.epsilon:g})"
            }
            if rel.params["max_items_chosen"]
            else {}
        ),
        "noise": args.noise,
        "selection": how,
        "engine": args.engine,
        "guarantee": rel.guarantee.describe(),
        "error": rel.error.description,
        (f"top {shown} items by released count" if counts is not None else f"first {shown} items"): [
            str(items[i]) + ("" if counts is None else f" ({counts[i]:.0f})") for i in _by_count(counts, shown)
        ],
        **({"written": str(out)} if out is not None else {}),
    }
    warn_seed(args, result)
    what = {
        "sips": "DP-SIPS, Swanberg et al. 2023",
        "policy-greedy": "policy greedy set union, Carvalho, Wang & Gondara 2022",
    }.get(how, f"{how} set union, Gopi et al. 2020")
    report(args, f"person-level DP vocabulary ({what})", result)
    return 0


def _by_count(counts, shown: int) -> list[int]:
    """The positions of the ``shown`` largest released counts (ties in the items' order), or the first
    ``shown`` items where no counts were released."""
    if counts is None:
        return list(range(shown))
    import numpy as np

    return np.argsort(-np.asarray(counts, dtype=np.float64), kind="stable")[:shown].tolist()


def add_parser(sub) -> None:
    vo = sub.add_parser(
        "vocabulary",
        help="person-level DP set of the items many persons hold, with noisy counts",
        epilog="example:\n  userdp vocabulary reviews.csv --user reviewer --item text --tokenize --epsilon 1 "
        "--delta 1e-6 --out words.csv",
    )
    add_input(vo)
    vo.add_argument("--user", required=True, help="person column")
    vo.add_argument("--item", required=True, help="item column (or text, with --tokenize)")
    vo.add_argument("--tokenize", action="store_true", help="split the item column into lower-cased words")
    vo.add_argument("--epsilon", type=EPSILON, required=True, help="the privacy parameter (add or remove one person)")
    vo.add_argument(
        "--delta",
        type=DELTA,
        required=True,
        help="probability bound for an item only one person holds (e.g. 1e-6; less than 1; above 1e-3 it warns)",
    )
    vo.add_argument(
        "--max-items",
        type=MAX_ITEMS,
        default="auto",
        help="the most items one person contributes: auto (default) chooses it privately from the data, a "
        "quantile of the persons' numbers of distinct items (90%% with Gaussian noise, 10%% with Laplace noise: "
        "--noise laplace, --policy, --algorithm policy-greedy) on the grid 1, 2, 4, ..., 8192, spending 2%% of "
        "epsilon and no delta (the rest goes to the set and the counts); or a whole number in [1, 10000]",
    )
    vo.add_argument("--noise", choices=["gaussian", "laplace"], default="gaussian", help="the noise of both steps")
    vo.add_argument(
        "--policy",
        action="store_true",
        help="select with the policy Laplace histogram (with --noise laplace): persons stop adding weight to "
        "items that have enough",
    )
    vo.add_argument(
        "--algorithm",
        choices=["weighted", "policy", "policy-greedy", "sips"],
        default=None,
        help="the selection: weighted (default) set union; policy (as --policy); policy-greedy: each person fills "
        "their items up to the cutoff, most records first (Carvalho, Wang & Gondara 2022; --noise laplace); "
        "sips: DP-SIPS, rounds of the weighted Gaussian union, each on the items not released yet, every round "
        "with the --max-items bound (chosen once, before the rounds, under auto; Gaussian noise only)",
    )
    vo.add_argument("--rounds", type=number(int, 1, 10), default=None, help="DP-SIPS: the number of rounds (default 3)")
    vo.add_argument(
        "--ratio",
        type=number(float, 0.1, 10.0),
        default=None,
        help="DP-SIPS: round i gets ratio^(i-1) / sum_j ratio^(j-1) of the set's budget (default 4)",
    )
    vo.add_argument(
        "--count-fraction",
        type=number(float, 0.0, 0.99),
        default=0.5,
        help="share of the budget spent on the items' noisy counts (0: the set alone)",
    )
    vo.add_argument("--show", type=number(int, 0, 10**6), default=20, help="how many items to print")
    vo.add_argument("--out", default=None, help="write every released item (and count) to this CSV file")
    vo.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    add_release_options(vo)
    vo.set_defaults(func=cmd_vocabulary)

"""``userdp aggregate``: per-key count, users, sum, mean, variance and quantiles of a numeric column, with the
keys, the contribution bounds and the value range chosen privately by default
(:func:`userdp.releases.aggregate`)."""

from __future__ import annotations

import argparse

from .. import releases
from .common import (
    DELTA,
    EPSILON,
    MAX_ITEMS,
    add_input,
    add_release_options,
    charge_and_write_csv,
    engine_of,
    number,
    report,
    source_of,
    warn_seed,
)
from .counts import _bounds, _public_keys
from .vocabulary import _check_out


def range_pair(text: str) -> tuple[float, float]:
    """``LO,HI`` as two numbers, for argparse (a negative ``LO``: ``--range=-5,5``)."""
    try:
        lo, hi = (float(p) for p in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LO,HI (e.g. 1,5), got {text!r}") from None
    return lo, hi


def domain_arg(text: str) -> tuple[float, float] | str:
    """``LO,HI`` or ``geometric``, for argparse."""
    return "geometric" if text.strip().lower() == "geometric" else range_pair(text)


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def cmd_aggregate(args: argparse.Namespace) -> int:
    out = _check_out(args)  # before the data is read: a bad --out spends nothing
    keys = _public_keys(args.keys)
    stats = args.stat or ["mean"]
    rel = releases.aggregate(
        source_of(args),
        args.epsilon,
        args.delta or 0.0,
        user=args.user,
        key=args.key,
        value=args.value,
        stats=stats,
        keys=keys,
        value_range="auto" if args.range is None else args.range,
        value_domain=args.domain,
        bounds=args.bounds,
        max_keys=args.max_keys,
        engine=engine_of(args),
        rng=args.seed,
    )
    v = rel.value
    labels = v["keys"]
    names = [n for n in ("count", "users", "sum", "mean", "variance") if n in v]
    qs = sorted(v.get("quantiles", {}))
    header = ["key", *names, *[f"quantile_{q:g}" for q in qs]]

    def row(i: int) -> list[str]:
        return [str(labels[i]), *[_fmt(v[n][i]) for n in names], *[_fmt(v["quantiles"][q][i]) for q in qs]]

    charge_and_write_csv(args, rel, out, header, (row(i) for i in range(len(labels))))
    shown = min(len(labels), args.show)
    p = rel.params
    how = {"given": "given", "unused": "not used: count and users read no value"}
    how = how.get(p["value_range"], "chosen privately")
    result = {
        "keys_released": int(len(labels)),
        "keys": p["keys"],
        "statistics": ", ".join(p["stats"]),
        "bounds": f"L0 = {v['l0']} keys per person, Linf = {v['linf']} records per key ({p['bounds']})",
        "value range": f"[{_fmt(v['lo'])}, {_fmt(v['hi'])}] ({how}), lattice step {p['resolution']:g}",
        "budget split": {
            **({"keys": p["epsilon_keys"]} if p["epsilon_keys"] else {}),
            **({"bounds": p["epsilon_select"]} if p["epsilon_select"] else {}),
            **({"value range": p["epsilon_range"]} if p["epsilon_range"] else {}),
            **{f"noisy {q}": p["epsilon_quantity"] for q in p["quantities"]},
        },
        "epsilon": args.epsilon,
        "delta": args.delta or 0.0,
        "engine": args.engine,
        "guarantee": rel.guarantee.describe(),
        "error": rel.error.description,
        f"first {shown} keys": [" ".join(row(i)) for i in range(shown)],
        **({"written": str(out)} if out is not None else {}),
    }
    warn_seed(args, result)
    report(args, "person-level DP per-key aggregates", result)
    return 0


def add_parser(sub) -> None:
    ag = sub.add_parser(
        "aggregate",
        help="per-key count, users, sum, mean, variance and quantiles of a numeric column",
        epilog="example:\n  userdp aggregate reviews.csv --user reviewer --key product --value rating --stat mean "
        "--stat quantile:0.5 --epsilon 1 --keys products.txt --out means.csv",
    )
    add_input(ag)
    ag.add_argument("--user", required=True, help="person column")
    ag.add_argument("--key", required=True, help="key column (product, venue, category)")
    ag.add_argument("--value", required=True, help="numeric value column")
    ag.add_argument(
        "--stat",
        action="append",
        default=None,
        help="a statistic per key: count, users, sum, mean, variance or quantile:Q (Q in (0, 1), e.g. quantile:0.5); "
        "repeat for several (default: mean)",
    )
    ag.add_argument("--epsilon", type=EPSILON, required=True, help="the privacy parameter (add or remove one person)")
    ag.add_argument(
        "--delta",
        type=DELTA,
        default=None,
        help="needed when the keys come from the data (no --keys; e.g. 1e-6; less than 1; above 1e-3 it warns)",
    )
    ag.add_argument(
        "--keys", default=None, help="a text file of the PUBLIC keys, one per line (else: selected privately)"
    )
    ag.add_argument(
        "--range",
        type=range_pair,
        default=None,
        help="a PUBLIC value range LO,HI (values clipped to it; nothing spent on choosing it; a negative LO as "
        "--range=-5,5). Default: chosen privately (over --domain, or the default grid)",
    )
    ag.add_argument(
        "--domain",
        type=domain_arg,
        default=None,
        help="optional, without --range: a PUBLIC domain LO,HI whose 65 evenly spaced points are the private "
        "range's candidates. Default: the grid 0 and +-{1, 1.25, 1.5, 1.75} 2^j, j in [-10, 40] ('geometric' "
        "names it), each end placed where the noise a wider range adds balances the clipping it removes",
    )
    ag.add_argument(
        "--bounds",
        type=_bounds,
        default="auto",
        help="'auto' (GEM over L0, Linf in 1, 2, 4, ..., 256) or L0,LINF: keys per person, records per key",
    )
    ag.add_argument(
        "--max-keys",
        type=MAX_ITEMS,
        default="auto",
        help="without --keys: the most keys one person contributes to the key selection (auto: chosen privately)",
    )
    ag.add_argument("--show", type=number(int, 0, 10**6), default=20, help="how many keys to print")
    ag.add_argument("--out", default=None, help="write every key and its statistics to this CSV file")
    ag.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    add_release_options(ag)
    ag.set_defaults(func=cmd_aggregate)

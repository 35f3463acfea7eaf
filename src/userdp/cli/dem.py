"""``userdp linear``, ``userdp itemwise`` and ``userdp freq``: the d_EM-DP releases
(:mod:`userdp.releases.dem`) on a CSV/Parquet/JSONL file.

``--alpha A [--delta D] [--samples S --r-discrete R]`` is the request; the output carries what was
``requested`` and what is ``delivered`` (:mod:`userdp.releases.request`). A delivered guarantee weaker than the
request is refused (exit 2, nothing released or charged) unless ``--allow-weaker``.
"""

from __future__ import annotations

import argparse

import numpy as np

from .. import releases
from ..errors import ParameterError
from ..metrics import EuclideanMetric, GreatCircleMetric
from .common import (
    BBOX_FORM,
    DELTA,
    EPSILON,
    PROBABILITY,
    add_bbox,
    add_input,
    add_release_options,
    charge,
    console,
    engine_of,
    floats,
    number,
    parse_bbox,
    print_json,
    shown,
    source_of,
    warn_seed,
)


def _request(args: argparse.Namespace) -> dict:
    """The request and the keyword arguments every d_EM release takes."""
    return {
        "delta": args.delta,
        "model": args.model,
        "samples": args.samples,
        "r": 0.05 if args.r_discrete is None else args.r_discrete,
        "allow_weaker": args.allow_weaker,
        "engine": engine_of(args),
        "rng": args.seed,
        "user": args.user,
    }


def _refuse_unused(unused: dict[str, str | None]) -> None:
    """Refuse options given explicitly that do nothing in this combination (a silent no-op misleads):
    ``unused`` maps each option to the reason it does not apply, or None where it does."""
    for name, reason in unused.items():
        if reason:
            raise ParameterError(f"{name} does not apply to {reason}; leave it out")


def _without_samples(args: argparse.Namespace) -> str | None:
    return "a release without --samples" if args.samples is None and args.r_discrete is not None else None


def _point_space(args: argparse.Namespace):
    """The metric of ``--metric greatcircle|euclidean`` and the coordinate columns; options that belong to the
    other metric or query are refused."""
    euclidean, greatcircle = args.metric == "euclidean", args.metric == "greatcircle"
    _refuse_unused(
        {
            "--bbox": "--metric euclidean" if euclidean and args.bbox is not None else None,
            "--diameter": "--metric greatcircle" if greatcircle and args.diameter is not None else None,
            "--point": "--query mean" if args.query == "mean" and args.point is not None else None,
            "--r-discrete": _without_samples(args),
        }
    )
    cols = tuple(c.strip() for c in args.items.split(","))
    if args.metric == "greatcircle":
        if not args.bbox:
            raise ParameterError(f"--metric greatcircle needs --bbox {BBOX_FORM} (public)")
        if len(cols) != 2:
            raise ParameterError("--metric greatcircle needs --items LAT,LON (two coordinate columns)")
        return GreatCircleMetric(parse_bbox(args.bbox)), cols
    if args.diameter is None:
        raise ParameterError("--metric euclidean needs --diameter D (public)")
    return EuclideanMetric(len(cols), args.diameter), cols


def _clustered(args: argparse.Namespace):
    """The public metric and domain of ``--domain`` (read and checked before any data): a clustered metric
    from ``item,cluster``, or any finite metric from a distance matrix (``--metric matrix``)."""
    _refuse_unused({"--r-discrete": _without_samples(args),
                    "--r": "--metric matrix" if args.metric == "matrix" and args.r is not None else None})  # fmt: skip
    if not 0 < args.beta < 1:
        raise ParameterError(f"--beta must lie in (0, 1), got {args.beta:g}")
    if args.metric == "matrix":
        return releases.metric_domain_from_table(args.domain)
    space, domain, _ = releases.clustered_domain_from_table(args.domain, 0.1 if args.r is None else args.r)
    return space, domain


def cmd_linear(args: argparse.Namespace) -> int:
    space, cols = _point_space(args)
    if args.query == "distance":
        if not args.point:
            raise ParameterError("--query distance needs --point X,Y (lat,lon for greatcircle)")
        query, ell, unit_scale = releases.distance_query(space, floats(args.point, space.dim, "point"))
    else:
        query, ell, unit_scale = releases.mean_query(space)
    if args.drop_outside and (args.model == "central" or args.samples is not None):
        raise ParameterError(
            "--drop-outside applies to --model local without --samples: the bounded releases keep every user's "
            "public number of points, so every point must lie inside the public domain"
        )
    rel = releases.linear(source_of(args, "file"), query, ell, args.alpha, points=cols, **_request(args))
    est = (np.asarray(rel.value) * unit_scale).tolist()
    extra = {"unit": getattr(space, "unit", ""), "noise_scale": rel.params["noise_scale"] * unit_scale,
             **({"outside": rel.params["outside"]} if "outside" in rel.params else {})}  # fmt: skip
    return _emit(args, rel, est, extra)


def _top(rel, domain, k: int) -> tuple[dict, list[dict]]:
    """Every item's unbiased estimate, and the ``k`` largest with their simultaneous intervals (clipped to
    [0, 1], where every true share lies)."""
    H = np.asarray(rel.extras["unbiased"], dtype=np.float64)
    w = rel.extras.get("interval_halfwidth")  # (GKRR's; the exponential randomizer states no intervals)
    labels = [str(x) for x in domain.labels]
    order = np.argsort(-H, kind="stable")[:k]
    top = [
        {"item": labels[i], "unbiased": float(H[i])}
        | (
            {"low": float(max(H[i] - w, 0.0)), "high": float(min(H[i] + w, 1.0)),
             "distinguishable_from_zero": bool(H[i] - w > 0)}
            if w is not None else {}
        )
        for i in order
    ]  # fmt: skip
    return {labels[i]: float(v) for i, v in enumerate(H)}, top


def _scale(space) -> dict:
    """A distance matrix's normalization, said next to the guarantee (its d_EM is in units of the largest)."""
    from ..metrics import FiniteMetric

    if not isinstance(space, FiniteMetric):
        return {}
    return {"distance_unit": f"the file's largest distance, {space.scale:g}: d_EM = d means d times it"}


def cmd_itemwise(args: argparse.Namespace) -> int:
    space, domain = _clustered(args)
    src = source_of(args, "file")  # checked before any data is read
    rel = releases.itemwise(src, space, domain, args.alpha, item=args.item, beta=args.beta, **_request(args))
    unbiased, top = _top(rel, domain, args.top)
    released = {str(domain.labels[i]): float(v) for i, v in enumerate(rel.value)}
    extra = {"alpha0": rel.params["alpha0"], "route": rel.params["route"], "m": rel.params["m"], **_scale(space),
             "outside": rel.params["outside"]}  # fmt: skip
    return _emit(args, rel, unbiased, {**extra, "unbiased": unbiased, "released_histogram": released}, top)


def cmd_freq(args: argparse.Namespace) -> int:
    space, domain = _clustered(args)
    src = source_of(args, "file")  # checked before any data is read
    rel = releases.frequency(src, space, domain, args.alpha, item=args.item, beta=args.beta, **_request(args))
    unbiased, top = _top(rel, domain, args.top)
    est = {str(domain.labels[i]): float(v) for i, v in enumerate(rel.value)}
    extra = {"alpha0": rel.params["alpha0"], "route": rel.params["route"], "unbiased": unbiased, **_scale(space),
             "outside": rel.params["outside"]}  # fmt: skip
    return _emit(args, rel, est, extra, top)


_FIELDS = ("requested", "delivered", "inner_alpha", "inner_delta", "inner_delta_prime", "guarantee_warning")


def _emit(args: argparse.Namespace, rel, estimate, extra: dict, top: list[dict] | None = None) -> int:
    charge(args, rel)  # before anything is shown: if refused, nothing is
    fields = {k: rel.extras[k] for k in _FIELDS if k in rel.extras}
    extra = {**extra, "engine": args.engine, **fields}
    out = {"mechanism": rel.mechanism, "guarantee": rel.guarantee.describe(), "estimate": estimate, **extra}
    w = rel.extras.get("interval_halfwidth")  # GKRR's simultaneous intervals (the exponential randomizer: none)
    if top is not None:
        out.update(top=top, error=rel.error.description)
        if w is not None:
            out.update(interval_halfwidth=w, interval_confidence=rel.extras["interval_confidence"],
                       informative=bool(w < 0.5))  # fmt: skip
    if args.json:
        warn_seed(args, out)
        print_json(out)
        return 0
    from rich.table import Table

    con = console()
    warn_seed(args)
    if "guarantee_warning" in extra:
        con.print(f"[bold red]warning:[/] {extra['guarantee_warning']}")
    con.print(f"[bold]{rel.mechanism}[/]")
    requested = {k: v for k, v in extra["requested"].items() if k != "r" or args.samples is not None}
    # the request's r is --r-discrete (the reduction's), never the clustered metric's --r: named so
    con.print("requested: " + ", ".join(f"{'r_discrete' if k == 'r' else k} = {v:.6g}" for k, v in requested.items()))
    con.print(f"delivered: {rel.guarantee.describe()}")
    t = Table(show_header=False)
    for k, v in extra.items():
        if k not in ("requested", "delivered", "guarantee_warning", "released_histogram", "unbiased"):
            t.add_row(k, shown(v))
    con.print(t)
    if top is None:
        con.print(f"estimate: {shown(estimate)}" + (f" {extra['unit']}" if extra.get("unit") else ""))
        return 0
    if w is None:
        et = Table("item", "share (unbiased estimate)")
        for row in top:
            et.add_row(row["item"], f"{row['unbiased']:.4f}")
        con.print(et)
        con.print(f"The {len(top)} largest of {len(estimate)} items by the unbiased estimate. {rel.error.description}.")
        return 0
    conf = rel.extras["interval_confidence"]
    et = Table("item", "share (unbiased estimate)", f"{conf:.0%} interval (all items at once)", "")
    for row in top:
        note = "" if row["distinguishable_from_zero"] else "could be 0: noise"
        # a share lies in [0, 1]; the unbiased estimate can leave it (noise), shown clipped like its interval
        share = min(max(row["unbiased"], 0.0), 1.0)
        mark = "" if share == row["unbiased"] else f" (unclipped {row['unbiased']:.3g})"
        et.add_row(row["item"], f"{share:.4f}{mark}", f"[{row['low']:.4f}, {row['high']:.4f}]", note)
    con.print(et)
    if w >= 0.5:
        con.print(
            f"[bold yellow]note:[/] at these parameters the noise (±{w:.3g} on a share) exceeds any share: this "
            "release says almost nothing about single items. Raise --alpha, use more users, or --samples with "
            "fewer samples per user (fewer randomized items, each with a larger alpha_0), or --model central."
        )
    con.print(
        f"The {len(top)} largest of {len(estimate)} items by the unbiased estimate. Every estimate carries noise "
        f"from the randomized response: with probability {conf:.0%}, every item's true share lies within "
        f"±{rel.extras['interval_halfwidth']:.4f} of its estimate. An item whose interval reaches 0 may not occur "
        "at all; `--json` gives every item."
    )
    return 0


def add_parser(sub) -> None:
    def request(p: argparse.ArgumentParser) -> None:
        add_input(p, "file", ", one record per item")
        p.add_argument("--user", required=True, help="user column")
        p.add_argument("--alpha", type=EPSILON, required=True, help="the requested alpha of the d_EM-DP guarantee")
        p.add_argument(
            "--delta",
            type=DELTA,
            default=None,
            help="the requested delta (default 0: a pure guarantee); required with --samples; less than 1, above 1e-3 "
            "it warns",
        )
        p.add_argument(
            "--model",
            choices=["local", "central"],
            default="local",
            help="local: every user randomizes their own data; central: one trusted curator (or a shuffler)",
        )
        p.add_argument(
            "--samples",
            type=number(int, 1, 10**6),
            default=None,
            help="BoundedEMDReduction: S samples per user; the guarantee is then (alpha r, delta, r)-discrete",
        )
        p.add_argument(
            "--r-discrete",
            type=number(float, 1e-9, 1.0),
            default=None,
            help="with --samples: r of the discrete guarantee (default 0.05)",
        )
        p.add_argument(
            "--allow-weaker",
            action="store_true",
            help="release even if the delivered guarantee is weaker than requested (it is reported and charged)",
        )
        add_release_options(p)

    li = sub.add_parser(
        "linear",
        help="PrivEMDLinear: a Lipschitz linear query under d_EM-DP",
        epilog="example:\n  userdp linear checkins.csv --user user --items lat,lon --metric greatcircle \\\n"
        "      --bbox 40.5,-74.3,41,-73.65 --point 40.758,-73.9855 --alpha 25",
    )
    request(li)
    li.add_argument("--items", required=True, help="comma-separated coordinate columns (lat,lon for greatcircle)")
    li.add_argument(
        "--metric",
        required=True,
        choices=["greatcircle", "euclidean"],
        help="the metric between points: greatcircle (lat/lon, km; needs --bbox) or euclidean (needs --diameter)",
    )
    add_bbox(li, required=False, purpose="greatcircle: ")
    li.add_argument(
        "--diameter",
        type=number(float, 0.0, 1e300, low_open=True),
        default=None,
        help="euclidean: the public diameter of the ball, centred at the origin, that holds every point "
        "(centre your coordinates first)",
    )
    li.add_argument(
        "--query",
        choices=["mean", "distance"],
        default="distance",
        help="distance: mean distance to --point; mean: the mean point (euclidean)",
    )
    li.add_argument("--point", default=None, help="--query distance: the public point (lat,lon or x,y)")
    li.add_argument(
        "--drop-outside",
        action="store_true",
        help="say it explicitly: with --model local (no --samples) points outside the public box or ball are "
        "always dropped, user by user (a refusal when one lies outside would depend on the data; how many is not "
        "reported); the bounded releases (--model central, --samples) need every point inside and refuse it",
    )
    li.set_defaults(func=cmd_linear)

    def clustered(p: argparse.ArgumentParser) -> None:
        request(p)
        p.add_argument("--item", required=True, help="item column (its values are labels of the --domain file)")
        p.add_argument(
            "--domain",
            required=True,
            help="public domain file: clustered, columns item,cluster, every cluster the same number of items "
            "(pad a small cluster with placeholder items that never occur); matrix, a column item and one "
            "column of distances per item, in the same order",
        )
        p.add_argument(
            "--metric",
            choices=["clustered", "matrix"],
            default="clustered",
            help="clustered: 0 for the same item, r within a cluster, 1 across clusters (GKRR); matrix: the "
            "distances of the --domain file, normalized by the largest (the exponential randomizer)",
        )
        p.add_argument(
            "--r",
            type=number(float, 0.0, 1.0, low_open=True),
            default=None,
            help="clustered: the distance between items of one cluster (default 0.1)",
        )
        p.add_argument(
            "--top", type=number(int, 1, 10**6), default=10, help="print the K items with the largest estimates"
        )
        p.add_argument(
            "--beta",
            type=PROBABILITY,
            default=0.05,
            help="the intervals hold for all items at once with probability 1-beta",
        )

    it = sub.add_parser(
        "itemwise",
        help="PrivEMDItemWise (GKRR on a clustered metric, the exponential randomizer on a distance matrix): "
        "every item randomized, the top items estimated",
        epilog="example:\n  userdp itemwise data.csv --user user --item item --domain domain.csv \\\n"
        "      --alpha 20 --delta 1e-6 --model central",
    )
    clustered(it)
    it.set_defaults(func=cmd_itemwise)
    fr = sub.add_parser(
        "freq",
        help="frequency estimation (FreqEstLocal: GKRR on a clustered metric, top items with intervals; the "
        "exponential randomizer on any distance matrix)",
        epilog="example:\n  userdp freq data.csv --user user --item item --domain domain.csv \\\n"
        "      --alpha 20 --delta 1e-6 --samples 50\n"
        "  userdp freq data.csv --user user --item item --metric matrix --domain distances.csv \\\n"
        "      --alpha 100 --delta 1e-6 --samples 50",
    )
    clustered(fr)
    fr.set_defaults(func=cmd_freq)

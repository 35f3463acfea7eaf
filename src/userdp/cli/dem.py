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
from .common import BBOX_FORM, add_bbox, add_release_options, charge, console, floats, parse_bbox, print_json, warn_seed


def _request(args: argparse.Namespace) -> dict:
    """The request and the keyword arguments every d_EM release takes."""
    return {
        "delta": args.delta,
        "model": args.model,
        "samples": args.samples,
        "r": args.r_discrete,
        "allow_weaker": args.allow_weaker,
        "engine": args.engine,
        "rng": args.seed,
        "user": args.user,
    }


def _point_space(args: argparse.Namespace):
    """The metric of ``--metric greatcircle|euclidean`` and the coordinate columns."""
    if args.metric == "clustered":
        if not args.domain:
            raise ParameterError("--metric clustered needs --domain FILE (public columns item, cluster)")
        raise ParameterError(
            "userdp linear supports --metric greatcircle or euclidean; for a query on a finite domain use "
            "userdp.releases.linear with item= and a query on item codes"
        )
    if args.items is None:
        raise ParameterError(f"--metric {args.metric} needs --items COL1,COL2 (point coordinates)")
    cols = tuple(args.items.split(","))
    if args.metric == "greatcircle":
        if not args.bbox:
            raise ParameterError(f"--metric greatcircle needs --bbox {BBOX_FORM} (public)")
        return GreatCircleMetric(parse_bbox(args.bbox)), cols
    if args.metric == "euclidean":
        if not args.diameter:
            raise ParameterError("--metric euclidean needs --diameter D (public)")
        return EuclideanMetric(len(cols), args.diameter), cols
    raise ParameterError("userdp linear supports --metric greatcircle or euclidean")


def _clustered(args: argparse.Namespace, command: str):
    if args.metric != "clustered":
        raise ParameterError(f"userdp {command} supports --metric clustered")
    if not args.domain:
        raise ParameterError("--metric clustered needs --domain FILE (public columns item, cluster)")
    if args.item is None:
        raise ParameterError("--metric clustered needs --item COLUMN")
    space, domain, _ = releases.clustered_domain_from_table(args.domain, args.r)
    return space, domain


def cmd_linear(args: argparse.Namespace) -> int:
    space, cols = _point_space(args)
    if args.query == "distance":
        if not args.point:
            raise ParameterError("--query distance needs --point X,Y (lat,lon for greatcircle)")
        query, ell, unit_scale = releases.distance_query(space, floats(args.point, space.dim, "point"))
    else:
        query, ell, unit_scale = releases.mean_query(space)
    rel = releases.linear(args.file, query, ell, args.alpha, points=cols, **_request(args))
    est = (np.asarray(rel.value) * unit_scale).tolist()
    extra = {"unit": getattr(space, "unit", ""), "noise_scale": rel.params["noise_scale"] * unit_scale}
    return _emit(args, rel, est, extra)


def cmd_itemwise(args: argparse.Namespace) -> int:
    space, domain = _clustered(args, "itemwise")
    rel = releases.itemwise(args.file, space, domain, args.alpha, item=args.item, **_request(args))
    est = {str(domain.labels[i]): float(v) for i, v in enumerate(rel.value)}
    return _emit(args, rel, est, {"alpha0": rel.params["alpha0"], "route": rel.params["route"], "m": rel.params["m"]})


def cmd_freq(args: argparse.Namespace) -> int:
    space, domain = _clustered(args, "freq")
    rel = releases.frequency(args.file, space, domain, args.alpha, item=args.item, **_request(args))
    est = {str(domain.labels[i]): float(v) for i, v in enumerate(rel.value)}
    return _emit(args, rel, est, {"alpha0": rel.params["alpha0"], "route": rel.params["route"]})


_FIELDS = ("requested", "delivered", "inner_alpha", "inner_delta", "inner_delta_prime", "guarantee_warning")


def _emit(args: argparse.Namespace, rel, estimate, extra: dict) -> int:
    charge(args, rel)  # before anything is shown: if refused, nothing is
    fields = {k: rel.extras[k] for k in _FIELDS if k in rel.extras}
    extra = {**extra, "engine": args.engine, **fields}
    out = {"mechanism": rel.mechanism, "guarantee": rel.guarantee.describe(), "estimate": estimate, **extra}
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
    con.print("requested: " + ", ".join(f"{k} = {v:.6g}" for k, v in extra["requested"].items()))
    con.print(f"delivered: {rel.guarantee.describe()}")
    t = Table(show_header=False)
    for k, v in extra.items():
        if k not in ("requested", "delivered", "guarantee_warning"):
            t.add_row(k, str(v))
    con.print(t)
    if isinstance(estimate, dict):
        et = Table("item", "estimate")
        for k, v in list(estimate.items())[:40]:
            et.add_row(str(k), f"{v:.5f}")
        con.print(et)
    else:
        con.print(f"estimate: {estimate}")
    return 0


def add_parser(sub) -> None:
    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("file", help="CSV, Parquet or JSON-lines file, one record per item")
        p.add_argument("--user", required=True, help="user column")
        p.add_argument("--item", default=None, help="item id column (finite domains)")
        p.add_argument("--items", default=None, help="comma-separated coordinate columns (points)")
        p.add_argument(
            "--metric",
            required=True,
            choices=["clustered", "greatcircle", "euclidean"],
            help="the metric between items: clustered (a public domain file), greatcircle (lat/lon) or euclidean",
        )
        p.add_argument("--domain", default=None, help="clustered: public domain file with columns item,cluster")
        p.add_argument("--r", type=float, default=0.1, help="clustered: within-cluster distance (default 0.1)")
        add_bbox(p, required=False, purpose="greatcircle: ")
        p.add_argument("--diameter", type=float, default=None, help="euclidean: public diameter")
        p.add_argument("--alpha", type=float, required=True, help="the requested alpha of the d_EM-DP guarantee")
        p.add_argument(
            "--delta",
            type=float,
            default=None,
            help="the requested delta (default 0: a pure guarantee); required with --samples",
        )
        p.add_argument(
            "--model",
            choices=["local", "central"],
            default="local",
            help="local: every user randomizes their own data; central: one trusted curator (or a shuffler)",
        )
        p.add_argument(
            "--samples",
            type=int,
            default=None,
            help="BoundedEMDReduction: S samples per user; the guarantee is then (alpha r, delta, r)-discrete",
        )
        p.add_argument("--r-discrete", type=float, default=0.05, help="with --samples: r of the discrete guarantee")
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
    common(li)
    li.add_argument(
        "--query",
        choices=["mean", "distance"],
        default="distance",
        help="distance: mean distance to --point; mean: the mean point (euclidean)",
    )
    li.add_argument("--point", default=None, help="--query distance: the public point (lat,lon or x,y)")
    li.set_defaults(func=cmd_linear)
    it = sub.add_parser(
        "itemwise",
        help="PrivEMDItemWise with GKRR on a clustered metric",
        epilog="example:\n  userdp itemwise data.csv --user user --item item --metric clustered \\\n"
        "      --domain domain.csv --alpha 20 --delta 1e-6 --model central",
    )
    common(it)
    it.set_defaults(func=cmd_itemwise)
    fr = sub.add_parser(
        "freq",
        help="frequency estimation (FreqEstLocal + GKRR) on a clustered metric",
        epilog="example:\n  userdp freq data.csv --user user --item item --metric clustered \\\n"
        "      --domain domain.csv --alpha 20 --delta 1e-6 --samples 50",
    )
    common(fr)
    fr.set_defaults(func=cmd_freq)

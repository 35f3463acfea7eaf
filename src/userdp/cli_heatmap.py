"""``userdp heatmap``: a DP heatmap of user locations from a file. Only noisy, released quantities are
written: the image and grid of the DP estimate; never the number of users or points or the true heatmap."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from .data import BoxDomain, UserDataset
from .errors import ParameterError


def cmd_heatmap(args: argparse.Namespace) -> int:
    from .heatmaps import dense_emd_agg, dp_sparse_emd_agg, gaussian_heatmap, laplace_heatmap, render, user_grid_sum
    from .noise import resolve_rng

    try:
        la0, lo0, la1, lo1 = (float(x) for x in args.bbox.split(","))
    except ValueError:
        raise ParameterError("--bbox needs MINLAT,MINLON,MAXLAT,MAXLON") from None
    box = BoxDomain.latlon(la0, la1, lo0, lo1)
    if args.engine == "spark":
        from .engines.spark import SparkEngine

        eng = SparkEngine()
        s = eng.grid_sum(eng.read(args.input), args.user, args.lat, args.lon, box, args.resolution, args.drop_outside)
    else:
        ds = UserDataset.from_file(args.input, user=args.user, items=[args.lat, args.lon], domain=None)
        s = user_grid_sum(ds, args.resolution, box, drop_outside=args.drop_outside)
    rng = resolve_rng(args.seed)
    if args.algorithm == "sparse":
        rel = dp_sparse_emd_agg(s, args.epsilon, w=args.w, rng=rng)
    elif args.algorithm == "laplace":
        rel = laplace_heatmap(s, args.epsilon, rng=rng)
    elif args.algorithm == "threshold":
        rel = laplace_heatmap(s, args.epsilon, top_percent=args.top_percent, rng=rng)
    else:
        rel = dense_emd_agg(s, args.epsilon, args.dense_side or max(1, args.resolution // 8), rng=rng)
    from . import cli_ledger

    cli_ledger.charge(args, rel.guarantee, rel.mechanism)  # before any file is written
    sigma = args.sigma if args.sigma is not None else args.resolution / 128
    out = Path(args.out)
    grid_path = out.with_suffix(".npy")
    np.save(grid_path, rel.value)
    render({f"{rel.mechanism}\neps = {args.epsilon:g}": gaussian_heatmap(rel.value, sigma)}, out, box)
    result = {
        "epsilon": args.epsilon,
        "algorithm": args.algorithm,
        "resolution": args.resolution,
        "engine": args.engine,
        "sigma_cells": sigma,
        "guarantee": rel.guarantee.describe(),
        "image": str(out),
        "grid": str(grid_path),
    }
    if args.seed is not None:
        result["warning"] = "seeded noise: for demonstrations only, no privacy"
    if args.json:
        print(json.dumps(result))
    else:
        from rich.console import Console

        Console().print(f"{rel.mechanism}: {rel.guarantee.describe()}\nwrote {out} and {grid_path}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("heatmap", help="a DP heatmap of user locations (sparse EMD aggregation or baselines)")
    p.add_argument("input", help="CSV, Parquet or JSON-lines file, one record per point")
    p.add_argument("--user", required=True)
    p.add_argument("--lat", required=True)
    p.add_argument("--lon", required=True)
    p.add_argument("--bbox", required=True, help="public box MINLAT,MINLON,MAXLAT,MAXLON")
    p.add_argument("--resolution", type=int, default=256, help="cells per side (a power of two)")
    p.add_argument("--epsilon", type=float, required=True)
    p.add_argument("--algorithm", choices=["sparse", "dense", "laplace", "threshold"], default="sparse")
    p.add_argument("--w", type=int, default=20, help="sparse: cells kept per level")
    p.add_argument("--top-percent", type=float, default=1.0, help="threshold: percent of cells kept")
    p.add_argument("--dense-side", type=int, default=None, help="dense: public coarse grid side")
    p.add_argument("--sigma", type=float, default=None, help="Gaussian filter in cells (default resolution/128)")
    p.add_argument("--drop-outside", action="store_true", help="drop points outside the box (count not reported)")
    p.add_argument("--engine", choices=["local", "spark"], default="local", help="where the data plane runs")
    p.add_argument("--out", default="heatmap.png")
    p.add_argument("--seed", type=int, default=None, help="seed the noise (demonstrations only)")
    p.add_argument("--json", action="store_true")
    from . import cli_ledger

    cli_ledger.add_option(p)
    p.set_defaults(func=cmd_heatmap)

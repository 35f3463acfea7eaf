"""``userdp heatmap``: a DP heatmap of user locations from a file (:func:`userdp.releases.heatmap`). Only
noisy, released quantities are written: the image and grid of the DP estimate; never the number of users or
points or the true heatmap."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

import numpy as np

from .. import releases
from ..data import BoxDomain
from ..engines.base import MAX_SIDE
from ..errors import ParameterError
from .common import (
    EPSILON,
    OutOfRange,
    add_bbox,
    add_input,
    add_release_options,
    charge,
    console,
    engine_of,
    number,
    parse_bbox,
    print_json,
    probe_writable,
    source_of,
    warn,
    warn_seed,
)

DEFAULT_RESOLUTION = 256
_ONLY = {
    "--w": ("w", ("sparse",)),
    "--top-percent": ("top_percent", ("threshold",)),
    "--dense-side": ("dense_side", ("dense",)),
    "--users": ("users", ("auto", "adaptive-grid")),
}


def _check_applicable(args: argparse.Namespace) -> None:
    """An algorithm's own option given with another algorithm does nothing: refuse it rather than ignore it."""
    for flag, (dest, algorithms) in _ONLY.items():
        if getattr(args, dest) is not None and args.algorithm not in algorithms:
            raise ParameterError(
                f"{flag} applies to --algorithm {' or '.join(algorithms)} only, not {args.algorithm}; leave it out"
            )
    if args.grid is not None and args.resolution is not None:
        raise ParameterError("--grid and --resolution both set the grid; give one of them")
    side = args.dense_side
    if side is not None:
        top = 2 ** math.ceil(math.log2(max(args.grid or (args.resolution or DEFAULT_RESOLUTION,))))
        if side & (side - 1) or side > top:
            raise ParameterError(
                f"--dense-side must be a power of two no larger than the grid's longer side rounded up to one "
                f"({top}), got {side}"
            )


def _grid(text: str) -> tuple[int, int]:
    """``ROWSxCOLS`` (e.g. ``300x200``): rows along latitude, columns along longitude."""
    parts = text.lower().replace(" ", "").split("x")
    try:
        rows, cols = (int(x) for x in parts)
    except ValueError:
        raise OutOfRange(f"must be ROWSxCOLS such as 300x200, got {text!r}") from None
    if not (1 <= rows <= MAX_SIDE and 1 <= cols <= MAX_SIDE):
        raise OutOfRange(f"sides must lie in [1, {MAX_SIDE}], got {text!r}")
    return rows, cols


def _image_kinds() -> list[str]:
    """The image formats matplotlib writes (``png``, ``pdf``, ``svg``, ...)."""
    from matplotlib.backend_bases import FigureCanvasBase

    return sorted(k for k in FigureCanvasBase.get_supported_filetypes() if k != "npy")


def cmd_heatmap(args: argparse.Namespace) -> int:
    from ..heatmaps import gaussian_heatmap
    from ..report.maps import MapPanel, left_out_label, render_maps

    _check_applicable(args)
    box = parse_bbox(args.bbox)
    if args.check_box:
        return _check_box(args, box)
    out = Path(args.out)
    if not out.name or out.name in (".", ".."):
        raise ParameterError(f"--out needs an image file name, got {args.out!r}")
    kinds = _image_kinds()
    if out.suffix.lower().lstrip(".") not in kinds:
        raise ParameterError(f"--out {out.name} needs an image suffix, one of {', '.join('.' + k for k in kinds)}")
    grid_path = out.with_suffix(".npy")
    if out.is_dir() or grid_path.is_dir():
        raise ParameterError(f"--out {out} names a folder; give the image's file name")
    existing = [str(p) for p in (out, grid_path) if p.exists()]
    if existing and not args.force:  # checked before any data is read
        raise ParameterError(f"{' and '.join(existing)} already exist(s); pass --force to overwrite, or another --out")
    probe_writable(out, grid_path)  # a folder that cannot be written: refused before any data is read
    rel = releases.heatmap(
        source_of(args),
        box,
        args.grid or (args.resolution or DEFAULT_RESOLUTION),
        args.epsilon,
        args.algorithm,
        user=args.user,
        lat=args.lat,
        lon=args.lon,
        w=20 if args.w is None else args.w,
        top_percent=1.0 if args.top_percent is None else args.top_percent,
        coarse_side=args.dense_side,
        n_public=args.users,
        engine=engine_of(args),
        rng=args.seed,
    )
    rows, cols = rel.params["shape"]
    grid_box = BoxDomain(tuple(rel.params["box"]["low"]), tuple(rel.params["box"]["high"]), box.names)
    sigma = args.sigma if args.sigma is not None else max(rows, cols) / 128
    # charge, then write both files under temporary names and move them into place: the folder was probed
    # before the data were read, and a write that fails now (a full disk, its size set by the release) is
    # charged and says so; a refused charge writes nothing
    charge(args, rel)
    staged = [(grid_path, grid_path.with_name(f".{grid_path.stem}.userdp-tmp.npy"))]
    staged.append((out, out.with_name(f".{out.stem}.userdp-tmp{out.suffix}")))
    try:
        try:
            np.save(staged[0][1], rel.value)
            panel = MapPanel(
                gaussian_heatmap(rel.value, sigma),
                f"{rows} x {cols} cells, Gaussian filter σ = {sigma:g} cells",
                left_out=left_out_label(args.algorithm, args.top_percent),
            )
            relation = getattr(rel.guarantee, "neighbours", None)
            who = f" ({relation.value})" if relation is not None else ""
            render_maps([panel], staged[1][1], grid_box, title=f"{rel.mechanism}, ε = {args.epsilon:g}{who}")
            for final, tmp in staged:
                os.replace(tmp, final)
        except OSError as exc:
            raise ParameterError(
                f"the release was charged to the ledger but {out} could not be written "
                f"({exc.strerror or type(exc).__name__})"
            ) from None
    finally:
        for _, tmp in staged:
            try:
                tmp.unlink(missing_ok=True)
            except OSError:  # its folder cannot hold it (then it was never written)
                pass
    result = {
        "epsilon": args.epsilon,
        "algorithm": args.algorithm,
        **({"branch": rel.params["branch"]} if args.algorithm == "auto" else {}),
        **({"n_estimate_dp": rel.params["n_estimate"]} if args.algorithm == "auto" and args.users is None else {}),
        "resolution": max(rows, cols),
        "shape": [rows, cols],
        "box": rel.params["box"],
        "engine": args.engine,
        "sigma_cells": sigma,
        "guarantee": rel.guarantee.describe(),
        "outside": rel.params["outside"],
        **({"box_check": rel.params["box_check"]} if "box_check" in rel.params else {}),
        "image": str(out),
        "grid": str(grid_path),
    }
    note = rel.params["outside"]
    return _emit(args, result, rel.params.get("box_check"),
                 f"{rel.mechanism}: {rel.guarantee.describe()}\n{note}\nwrote {out} and {grid_path}")  # fmt: skip


def _emit(args: argparse.Namespace, result: dict, box_check: str | None, text: str) -> int:
    """The box check's warning on stderr (loudly, whatever the output format), then the result as JSON or
    ``text``, with the seed warning."""
    if box_check:
        warn(box_check)
    if args.json:
        warn_seed(args, result)
        print_json(result)
    else:
        warn_seed(args)
        console().print(text)
    return 0


def _check_box(args: argparse.Namespace, box) -> int:
    """``--check-box``: only the DP count of the users with a point inside the box, with ``--epsilon``
    (charged like any release); no map is made or written."""
    rel = releases.users_inside(source_of(args), box, args.epsilon, user=args.user, lat=args.lat, lon=args.lon,
                                engine=engine_of(args), rng=args.seed)  # fmt: skip
    charge(args, rel)
    result = {"users_inside_dp": rel.value, "interval_90": rel.error.bound, "epsilon": args.epsilon,
              "guarantee": rel.guarantee.describe(), "box_check": rel.params["box_check"]}  # fmt: skip
    return _emit(args, result, rel.params["box_check"],
                 f"users with a point inside the box (DP estimate): {rel.value:.0f} ± {rel.error.bound:.2g} (90%); "
                 f"{rel.guarantee.describe()}; no map was made")  # fmt: skip


def add_parser(sub) -> None:
    p = sub.add_parser(
        "heatmap",
        help="a DP heatmap of user locations (userdp's auto algorithm, the paper's sparse EMD aggregation or "
        "baselines)",
        epilog="example:\n  userdp heatmap checkins.csv --user user --lat lat --lon lon \\\n"
        "      --bbox 40.745,-73.999,40.770,-73.965 --epsilon 1 --out midtown.png",
    )
    add_input(p, what=", one record per point")
    p.add_argument("--user", required=True, help="user column")
    p.add_argument("--lat", required=True, help="latitude column")
    p.add_argument("--lon", required=True, help="longitude column")
    add_bbox(p, required=True)
    p.add_argument(
        "--resolution",
        type=number(int, 1, MAX_SIDE),
        default=None,
        help=f"cells along the box's longer side, square on the ground (default {DEFAULT_RESOLUTION}); the box "
        "is widened along its shorter side to whole cells",
    )
    p.add_argument(
        "--grid",
        type=_grid,
        default=None,
        metavar="ROWSxCOLS",
        help="an exact grid over the box as given instead (e.g. 300x200; cells square only if the box is)",
    )
    p.add_argument("--epsilon", type=EPSILON, required=True, help="the privacy parameter (add or remove one user)")
    p.add_argument(
        "--algorithm",
        choices=list(releases.ALGORITHMS),
        default="auto",
        help="auto (default: appendix D's coarse grid, post-processed, when epsilon x users < 40, else userdp's "
        "PrivTree-EMD), the paper's sparse EMD aggregation (Ghazi et al.), dense (appendix D), laplace, "
        "threshold, privtree, privtree-emd, adaptive-grid or hierarchy",
    )
    p.add_argument(
        "--users",
        type=number(float, 0.0, 1e12),
        default=None,
        help="auto and adaptive-grid only: a PUBLIC estimate of the number of users (not read from the data); "
        "without it 5%% of epsilon buys a noisy count",
    )
    p.add_argument(
        "--w", type=number(int, 1, 10**6), default=None, help="sparse only: cells kept per level (default 20)"
    )
    p.add_argument(
        "--top-percent",
        type=number(float, 0.0, 100.0, low_open=True),
        default=None,
        help="threshold only: percent of cells kept (default 1)",
    )
    p.add_argument(
        "--dense-side",
        type=number(int, 1, 8192),
        default=None,
        help="dense only: public coarse grid side, a power of two (default an eighth of the longer side rounded "
        "up to a power of two)",
    )
    p.add_argument(
        "--sigma",
        type=number(float, 0.0, 256.0),
        default=None,
        help="Gaussian filter of the image in cells (default the longer side/128)",
    )
    p.add_argument(
        "--drop-outside",
        action="store_true",
        help="kept for old command lines: points outside the box are always dropped, user by user (a refusal "
        "when one lies outside would depend on the data); how many is not reported",
    )
    p.add_argument("--out", default="heatmap.png", help="the image; the grid is written next to it as .npy")
    p.add_argument(
        "--check-box",
        action="store_true",
        help="spend --epsilon on one question only: the DP count of users with a point inside --bbox (a small "
        "epsilon such as 0.05 tells a box over the wrong place, or --lat/--lon swapped); no map is made",
    )
    p.add_argument("--force", action="store_true", help="overwrite --out (and its .npy grid) if they exist")
    add_release_options(p)
    p.set_defaults(func=cmd_heatmap)

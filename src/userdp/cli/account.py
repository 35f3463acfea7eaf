"""``userdp account``: the d_EM-DP accountant for PrivEMDItemWise (Theorem 4.4, the numerical bound, the
calibration of ``alpha_0``) and BoundedEMDReduction (Theorem 5.3 / 1.3)."""

from __future__ import annotations

import argparse
import json

from .common import DELTA, EPSILON, console, number, report


def cmd_account_shuffle(args: argparse.Namespace) -> int:
    from ..privacy.accounting import numerical_shuffle_guarantee, shuffle_guarantee

    if args.plot is not None:  # an image name matplotlib can write, checked before anything is computed
        from pathlib import Path

        from ..errors import ParameterError
        from .heatmap import _image_kinds

        kinds = _image_kinds()
        if Path(args.plot).suffix.lower().lstrip(".") not in kinds:
            raise ParameterError(
                f"--plot {Path(args.plot).name} needs an image suffix, one of {', '.join('.' + k for k in kinds)}"
            )
    if args.numerical:
        nb = numerical_shuffle_guarantee(args.alpha0, args.m, args.delta, n=args.n, model=args.model)
        g = nb.guarantee()
        if not report(args, "numerical amplification bound: PrivEMDItemWise", nb.as_dict()):
            console().print(g.describe())
        return 0
    b = shuffle_guarantee(args.alpha0, args.m, args.delta, n=args.n, model=args.model)
    g = b.guarantee()  # a vacuous bound is refused before anything is printed
    out = b.as_dict()
    if args.plot:
        from ..report.plots import plot_privacy_curve

        out["plot"] = str(plot_privacy_curve(b, args.plot))
    if not report(args, "Theorem 4.4: PrivEMDItemWise", out):
        console().print(g.describe())
    return 0


def cmd_account_calibrate(args: argparse.Namespace) -> int:
    from ..privacy.accounting import calibrate

    cal = calibrate(
        args.alpha, args.delta, args.m, n=args.n, model=args.model, route=args.route, numerical=args.numerical
    )
    out = cal.as_dict()
    if args.json:
        print(json.dumps(out))
        return 0
    from rich.table import Table

    t = Table(
        title=f"alpha_0 for ({args.alpha:g}, {args.delta:g})-bounded {cal.model.value} d_EM-DP, m = {args.m}"
        + (f", n = {args.n}" if args.n else "")
    )
    for c in ("route", "valid", "alpha_0", "inner delta", "alpha", "delta'", "note"):
        t.add_column(c)

    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.4g}"

    for r in cal.routes.values():
        mark = " (chosen)" if r.route == cal.route else ""
        t.add_row(r.route + mark, str(r.valid), f(r.alpha0), f(r.delta), f(r.alpha), f(r.delta_prime), r.reason)
    con = console()
    con.print(t)
    con.print(cal.note())
    return 0


def cmd_account_reduction(args: argparse.Namespace) -> int:
    from ..privacy.accounting import min_samples, reduction_alpha, reduction_guarantee

    s = args.s or min_samples(args.r, args.delta)
    out = {
        "epsilon": args.epsilon,
        "r": args.r,
        "delta": args.delta,
        "s": s,
        "alpha": reduction_alpha(args.epsilon, args.r, s, args.delta),
        "guarantee": reduction_guarantee(args.epsilon, args.r, args.delta).describe(),
        "min_samples": min_samples(args.r, args.delta),
    }
    report(args, "Theorem 5.3: BoundedEMDReduction", out)
    return 0


def _population_args(p: argparse.ArgumentParser) -> None:
    """``--m``, ``--n`` and ``--model`` of the accountant's subcommands."""
    p.add_argument("--m", type=number(int, 1, 10**9), required=True, help="items per user")
    p.add_argument("--n", type=number(int, 1, 10**12), default=None, help="users (central model; omit for local)")
    p.add_argument("--model", choices=["local", "central"], default=None, help="default: central iff --n is given")


def add_parser(sub) -> None:
    acc = sub.add_parser("account", help="d_EM-DP accounting for PrivEMDItemWise and BoundedEMDReduction")
    asub = acc.add_subparsers(dest="account_command", required=True)
    sh = asub.add_parser(
        "shuffle",
        help="Theorem 4.4: (alpha, delta') from alpha_0",
        epilog="example:\n  userdp account shuffle --alpha0 2 --m 10 --n 10000 --delta 1e-6",
    )
    sh.add_argument("--alpha0", type=EPSILON, required=True, help="the item-level parameter of each randomized item")
    _population_args(sh)
    sh.add_argument("--delta", type=DELTA, required=True, help="the delta inside Theorem 4.4's h")
    sh.add_argument("--plot", default=None, help="write the per-distance curve to this PNG")
    sh.add_argument("--numerical", action="store_true", help="the numerical amplification bound (tighter)")
    sh.add_argument("--json", action="store_true", help="print the result as one JSON object")
    sh.set_defaults(func=cmd_account_shuffle)
    ca = asub.add_parser(
        "calibrate",
        help="largest alpha_0 for a target (alpha, delta')",
        epilog="example:\n  userdp account calibrate --alpha 20 --m 10 --n 10000 --delta 1e-6",
    )
    ca.add_argument("--alpha", type=EPSILON, required=True, help="the target alpha of the user-level d_EM guarantee")
    _population_args(ca)
    ca.add_argument("--delta", type=DELTA, required=True, help="the target delta'")
    ca.add_argument(
        "--route", default="best", help="best (default), theorem 4.4, eq. (6), eq. (7), composition, numerical"
    )
    ca.add_argument("--numerical", action="store_true", help="also try the numerical bound (takes seconds)")
    ca.add_argument("--json", action="store_true", help="print the result as one JSON object")
    ca.set_defaults(func=cmd_account_calibrate)
    rd = asub.add_parser(
        "reduction",
        help="Theorem 5.3 / 1.3 for BoundedEMDReduction",
        epilog="example:\n  userdp account reduction --epsilon 1 --r 0.05 --delta 1e-6",
    )
    rd.add_argument("--epsilon", type=EPSILON, required=True, help="the discrete epsilon of the guarantee")
    rd.add_argument(
        "--r", type=number(float, 1e-9, 1.0), required=True, help="r of the discrete guarantee (distances below r)"
    )
    rd.add_argument("--delta", type=DELTA, required=True, help="the delta of the discrete guarantee")
    rd.add_argument(
        "--s", type=number(int, 1, 10**9), default=None, help="samples per user (default: the smallest, Theorem 1.3)"
    )
    rd.add_argument("--json", action="store_true", help="print the result as one JSON object")
    rd.set_defaults(func=cmd_account_reduction)

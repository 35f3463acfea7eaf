"""The ``userdp`` command line."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from . import __version__


def _console():
    from rich.console import Console

    return Console()


def cmd_datasets(args: argparse.Namespace) -> int:
    from rich.table import Table

    from . import datasets as D

    con = _console()
    t = Table(title="Bundled datasets")
    for c in ("name", "users", "items", "kind", "source"):
        t.add_column(c)
    fs = D.foursquare_nyc()
    am = D.amazon_fashion()
    t.add_row(
        "foursquare_nyc",
        str(fs.n_users),
        str(fs.n_items),
        "(lat, lon) check-ins",
        D.ATTRIBUTION["foursquare_nyc"],
    )
    t.add_row(
        "amazon_fashion",
        str(am.n_users),
        str(am.n_items),
        "person-word pairs",
        D.ATTRIBUTION["amazon_fashion"],
    )
    con.print(t)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Every release userdp makes, on the bundled real data (see :mod:`userdp.demo`)."""
    from .demo import run_demo

    run_demo(args.out, args.seed, _console())
    return 0


def _print_kv(title: str, rows: dict) -> None:
    from rich.table import Table

    t = Table(title=title, show_header=False)
    t.add_column("", style="bold")
    t.add_column("")
    for k, v in rows.items():
        t.add_row(k, f"{v:.6g}" if isinstance(v, float) else str(v))
    _console().print(t)


def _report(args: argparse.Namespace, title: str, out: dict) -> bool:
    """Print ``out`` as JSON with ``--json`` (returns True), else as a titled table (returns False)."""
    if args.json:
        print(json.dumps(out))
        return True
    _print_kv(title, out)
    return False


def cmd_account_shuffle(args: argparse.Namespace) -> int:
    from .privacy.accounting import numerical_shuffle_guarantee, shuffle_guarantee

    if args.numerical:
        nb = numerical_shuffle_guarantee(args.alpha0, args.m, args.delta, n=args.n, model=args.model)
        if not _report(args, "numerical amplification bound: PrivEMDItemWise", nb.as_dict()):
            _console().print(nb.guarantee().describe())
        return 0
    b = shuffle_guarantee(args.alpha0, args.m, args.delta, n=args.n, model=args.model)
    out = b.as_dict()
    if args.plot:
        from .plots import plot_privacy_curve

        out["plot"] = str(plot_privacy_curve(b, args.plot))
    if not _report(args, "Theorem 4.4: PrivEMDItemWise", out):
        _console().print(b.guarantee().describe())
    return 0


def cmd_account_calibrate(args: argparse.Namespace) -> int:
    from .privacy.accounting import calibrate

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
    con = _console()
    con.print(t)
    con.print(cal.note())
    return 0


def cmd_account_reduction(args: argparse.Namespace) -> int:
    from .privacy.accounting import min_samples, reduction_alpha, reduction_guarantee

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
    _report(args, "Theorem 5.3: BoundedEMDReduction", out)
    return 0


def cmd_distinct(args: argparse.Namespace) -> int:
    from .data import read_table
    from .datasets import words_dataset
    from .distinct import distinct_count
    from .errors import DataError
    from .noise import resolve_rng

    if args.engine == "spark":
        from pyspark.sql import functions as F

        from .engines.spark import SparkEngine

        eng = SparkEngine()
        df = eng.read(args.input)
        if args.tokenize:
            SparkEngine._check(df, [args.user, args.item])
            tok = F.explode(F.split(F.lower(F.col(args.item)), r"(?U)\W+"))  # Unicode \w, as in Python
            df = df.select(args.user, tok.alias(args.item)).filter(F.col(args.item) != "")
        data = eng.edges(df, args.user, args.item)
    else:
        table = read_table(args.input, columns=[args.user, args.item])
        # no rows is a dataset of no persons: under add/remove-one-person neighbours it is released like any other
        users = table.column(args.user).to_pylist()
        items = table.column(args.item).to_pylist()
        if any(u is None for u in users) or any(i is None for i in items):
            raise DataError("the user and item columns must not have missing values")
        import pyarrow as pa

        itype = table.column(args.item).type
        text = pa.types.is_string(itype) or pa.types.is_large_string(itype) or pa.types.is_integer(itype)
        if table.num_rows and not text:  # a column with no rows has no type to check (a header-only CSV)
            raise DataError(f"item column {args.item!r} has type {itype}; items must be strings or integers")
        if args.tokenize:
            data = words_dataset(users, [str(x) for x in items])
        else:
            from .data import UserDataset

            data = UserDataset.from_arrays(np.asarray(users), np.asarray([str(x) for x in items], dtype=str))
    if args.seed is not None:
        from rich.console import Console

        Console(stderr=True).print("[bold yellow]warning:[/] seeded noise is for demonstrations only")
    rel = distinct_count(data, args.epsilon, args.beta, args.max_bound, args.method, rng=resolve_rng(args.seed))
    from . import cli_ledger

    cli_ledger.charge(args, rel.guarantee, rel.mechanism)  # before anything is printed
    out = {
        "lower_bound": rel.value,
        "bound": int(rel.extras["bound"]),
        "epsilon": args.epsilon,
        "beta": args.beta,
        "method": args.method,
        "guarantee": rel.guarantee.describe(),
        "confidence": rel.error.description,
    }
    _report(args, "person-level DP distinct count (Knop & Steinke, Algorithm 1)", out)
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    """Audit one of userdp's mechanisms: claimed vs measured privacy. Statistical audits also print their
    detection limit (the smallest delta their samples could refute)."""
    from .audit import audit_randomizer, audit_samples
    from .metrics import ClusteredMetric
    from .noise import RandomSource, calibrate_gaussian, gaussian_mechanism, laplace_mechanism

    src = RandomSource(args.seed) if args.seed is not None else RandomSource()
    n = args.trials
    space = ClusteredMetric(3, 3, 0.2)
    if args.mechanism == "gkrr":
        from .dem import GKRR

        res = audit_randomizer(GKRR(space, 1.5).transition_matrix(), space.full_matrix(), 1.5, "GKRR alpha_0 = 1.5")
    elif args.mechanism == "exponential":
        from .dem import ExponentialRandomizer

        e = ExponentialRandomizer(space, 1.5)
        res = audit_randomizer(e.transition_matrix(), space.full_matrix(), 1.5, "exponential randomizer alpha_0 = 1.5")
    elif args.mechanism == "itemwise":
        from .audit import audit_itemwise
        from .dem import GKRR

        # the library's own mechanism: priv_emd_itemwise's returned guarantee against GKRR's own table
        res = audit_itemwise(
            GKRR(ClusteredMetric(2, 2, 0.5), 0.7),
            3,
            name="PrivEMDItemWise (GKRR alpha_0 = 0.7 on 2 clusters of 2, m = 3, local)",
        )
    elif args.mechanism == "laplace":
        a = laplace_mechanism(np.zeros(n), 1.0, 1.0, src)
        b = laplace_mechanism(np.ones(n), 1.0, 1.0, src)
        res = audit_samples(a, b, 1.0, 0.0, name="lattice Laplace, sensitivity 1")
    elif args.mechanism == "gaussian":
        a = gaussian_mechanism(np.zeros(n), 1.0, 1.0, 1e-3, src)
        b = gaussian_mechanism(np.ones(n), 1.0, 1.0, 1e-3, src)
        sigma = calibrate_gaussian(1.0, 1.0, 1e-3).sigma
        res = audit_samples(a, b, 1.0, 1e-3, name=f"lattice Gaussian, sigma {sigma:.3f}")
    elif args.mechanism == "lattice":
        from .audit import audit_lattice_gaussian, audit_lattice_l1, audit_lattice_l2, audit_lattice_laplace

        results = [audit_lattice_laplace(), audit_lattice_gaussian(), audit_lattice_l1(), audit_lattice_l2()]
        for r in results:
            _console().print(str(r))
        return 0 if all(r.passed for r in results) else 1
    elif args.mechanism == "distinct":
        from itertools import combinations, combinations_with_replacement

        from .audit import audit_distinct_count

        types = [set(c) for r in (0, 1, 2, 3) for c in combinations(range(3), r)]  # r = 0: a person with nothing
        tiny = [list(c) for k in (1, 2, 3) for c in combinations_with_replacement(types, k)]
        res = audit_distinct_count(tiny, 1.0, beta=0.1, l_max=3, name="distinct count (Algorithm 1), epsilon 1")
    else:  # linear: worst-case search over one user's point datasets
        from .audit import audit_search, point_neighbours
        from .data import UserDataset
        from .dem import priv_emd_linear

        def sample(x, k):
            ds = UserDataset.from_lists([[tuple(p) for p in x]] * k)
            return priv_emd_linear(ds, 1.0, 2.0, f_points=lambda v: v, rng=src).extras["per_user"]

        pairs = point_neighbours(np.array([[0.0, 0.0], [0.5, -0.5], [-0.5, 0.25]]), 0.5, -1.0, 1.0)
        res = audit_search(
            sample, pairs, lambda d: (2.0 * d, 0.0), n=n, name="PrivEMDLinear (l2, alpha 2), one user's 3 points"
        )
    _console().print(str(res))
    return 0 if res.passed else 1


def _population_args(p: argparse.ArgumentParser) -> None:
    """``--m``, ``--n`` and ``--model`` of the accountant's subcommands."""
    p.add_argument("--m", type=int, required=True, help="items per user")
    p.add_argument("--n", type=int, default=None, help="users (central model; omit for local)")
    p.add_argument("--model", choices=["local", "central"], default=None, help="default: central iff --n is given")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="userdp", description="User-level differential privacy.")
    p.add_argument("--version", action="version", version=f"userdp {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run the releases on the bundled real data")
    d.add_argument("--out", default="userdp-demo", help="output directory (default: ./userdp-demo)")
    d.add_argument("--seed", type=int, default=None, help="seed the noise (demonstrations only: no privacy)")
    d.set_defaults(func=cmd_demo)
    acc = sub.add_parser("account", help="d_EM-DP accounting for PrivEMDItemWise and BoundedEMDReduction")
    asub = acc.add_subparsers(dest="account_command", required=True)
    sh = asub.add_parser("shuffle", help="Theorem 4.4: (alpha, delta') from alpha_0")
    sh.add_argument("--alpha0", type=float, required=True)
    _population_args(sh)
    sh.add_argument("--delta", type=float, required=True, help="the delta inside Theorem 4.4's h")
    sh.add_argument("--plot", default=None, help="write the per-distance curve to this PNG")
    sh.add_argument("--numerical", action="store_true", help="the numerical amplification bound (tighter)")
    sh.add_argument("--json", action="store_true")
    sh.set_defaults(func=cmd_account_shuffle)
    ca = asub.add_parser("calibrate", help="largest alpha_0 for a target (alpha, delta')")
    ca.add_argument("--alpha", type=float, required=True)
    _population_args(ca)
    ca.add_argument("--delta", type=float, required=True, help="the target delta'")
    ca.add_argument(
        "--route", default="best", help="best (default), theorem 4.4, eq. (6), eq. (7), composition, numerical"
    )
    ca.add_argument("--numerical", action="store_true", help="also try the numerical bound (takes seconds)")
    ca.add_argument("--json", action="store_true")
    ca.set_defaults(func=cmd_account_calibrate)
    rd = asub.add_parser("reduction", help="Theorem 5.3 / 1.3 for BoundedEMDReduction")
    rd.add_argument("--epsilon", type=float, required=True)
    rd.add_argument("--r", type=float, required=True)
    rd.add_argument("--delta", type=float, required=True)
    rd.add_argument("--s", type=int, default=None, help="samples per user (default: the smallest, Theorem 1.3)")
    rd.add_argument("--json", action="store_true")
    rd.set_defaults(func=cmd_account_reduction)
    au = sub.add_parser("audit", help="check a mechanism's claimed guarantee against its outputs")
    au.add_argument(
        "mechanism",
        choices=["gkrr", "exponential", "itemwise", "distinct", "laplace", "gaussian", "linear", "lattice"],
        help="lattice: the exact support-and-loss audits of the lattice samplers (Laplace, Gaussian, l1, l2)",
    )
    au.add_argument("--trials", type=int, default=50_000, help="samples per input (statistical audits)")
    au.add_argument("--seed", type=int, default=None)
    au.set_defaults(func=cmd_audit)
    di = sub.add_parser("distinct", help="person-level DP lower bound on the number of distinct items")
    di.add_argument("input", help="CSV, Parquet or JSON-lines file")
    di.add_argument("--user", required=True, help="person column")
    di.add_argument("--item", required=True, help="element column (or text, with --tokenize)")
    di.add_argument("--tokenize", action="store_true", help="split the item column into lower-cased words")
    di.add_argument("--epsilon", type=float, required=True)
    di.add_argument("--beta", type=float, default=0.05)
    di.add_argument("--max-bound", type=int, default=100, help="l_max: the largest contribution bound tried")
    di.add_argument("--method", choices=["matching", "greedy", "sampling"], default="matching")
    di.add_argument("--engine", choices=["local", "spark"], default="local", help="where the data plane runs")
    di.add_argument("--seed", type=int, default=None, help="seed the noise (demonstrations only)")
    di.add_argument("--json", action="store_true")
    di.set_defaults(func=cmd_distinct)
    from . import cli_ledger
    from .cli_dem import add_parsers
    from .cli_heatmap import add_parser as add_heatmap

    cli_ledger.add_option(di)
    add_parsers(sub)
    add_heatmap(sub)
    cli_ledger.add_parser(sub)
    s = sub.add_parser("datasets", help="list the bundled datasets")
    s.set_defaults(func=cmd_datasets)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        from . import cli_ledger

        cli_ledger.check(args)  # a missing or invalid --ledger fails before any data is read
        return int(args.func(args) or 0)
    except Exception as exc:  # noqa: BLE001 - the CLI reports every error without a traceback
        from .errors import UserDPError

        if isinstance(exc, UserDPError):
            print(f"userdp: error: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())

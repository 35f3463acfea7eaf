"""``userdp linear``, ``userdp itemwise`` and ``userdp freq``: d_EM-DP releases on a CSV/Parquet/JSONL file.

What the user asks for and what is delivered
--------------------------------------------
``--alpha A [--delta D]`` is the request (``D`` defaults to 0: a pure guarantee).

* Without ``--samples`` (every user holds the same number of items, or ``linear --model local``): the
  release is ``(alpha, delta)``-d_EM-DP with ``alpha <= A`` and ``delta <= D``. ``itemwise``/``freq`` use the
  best amplification route whose ``delta'`` meets ``D`` (composition when ``D = 0``); ``linear`` uses the
  Gaussian variant when ``D > 0``, pure noise otherwise.
* With ``--samples S`` (BoundedEMDReduction, Theorem 5.3): the request is ``A``-d_EM-DP at resolution
  ``r = --r-discrete``, i.e. ``(A r, D, r)``-discrete d_EM-DP. ``D > 0`` is required (Lemma 5.2's projection
  fails with probability ``D/2``; the inner release gets the other ``D/2``, or all of ``D`` when Lemma 5.2's
  distance ``c`` is at least 1 and the projection needs none). The inner bounded release gets
  ``alpha = A r / min(c, 1)``, and the delivered guarantee is computed from the inner release's *realized*
  ``(alpha, delta')`` (:func:`userdp.privacy.accounting.reduction_guarantee_of`): its delta is the delta used.

The output carries ``requested`` and ``delivered`` (JSON) or both lines (text). A delivered guarantee weaker
than the request -- alpha or epsilon above it by more than ``REQUEST_RTOL`` (1e-9, relative), or any delta
above it -- is refused (exit 2, nothing released or charged) unless ``--allow-weaker``; then the weaker
guarantee is the one reported and charged, with a warning.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass

import numpy as np

from .data import BoxDomain, FiniteDomain, UserDataset, read_table
from .errors import DataError, ParameterError
from .metrics import ClusteredMetric, EuclideanMetric, GreatCircleMetric, haversine_km
from .privacy.accounting import REQUEST_RTOL, reduction_alpha, reduction_distance, reduction_guarantee_of
from .privacy.budget import guarantee_to_dict
from .privacy.guarantees import EMDMetricDP, Guarantee


def _floats(text: str, n: int, name: str) -> list[float]:
    try:
        vals = [float(x) for x in text.split(",")]
    except ValueError:
        raise ParameterError(f"--{name} needs {n} comma-separated numbers, got {text!r}") from None
    if len(vals) != n:
        raise ParameterError(f"--{name} needs {n} comma-separated numbers, got {text!r}")
    return vals


def clustered_from_file(path: str, r: float) -> tuple[ClusteredMetric, FiniteDomain, np.ndarray]:
    """A public domain file with columns ``item, cluster``; every cluster must have the same size. Item codes
    are ``cluster_index * t + position`` in file order. Returns the metric, the domain and the cluster
    labels."""
    t = read_table(path, columns=["item", "cluster"])
    items = [str(x) for x in t.column("item").to_pylist()]
    clusters = [str(x) for x in t.column("cluster").to_pylist()]
    order: dict[str, list[str]] = {}
    for it, c in zip(items, clusters, strict=True):
        order.setdefault(c, []).append(it)
    sizes = {len(v) for v in order.values()}
    if len(sizes) != 1:
        raise DataError(f"the clustered metric needs clusters of equal size; the domain file has sizes {sorted(sizes)}")
    labels = [it for c in order for it in order[c]]
    space = ClusteredMetric(len(order), sizes.pop(), r)
    return space, FiniteDomain(np.array(labels, dtype=object)), np.array(list(order), dtype=object)


def _load(args: argparse.Namespace) -> tuple[UserDataset, object]:
    if args.metric == "clustered":
        if not args.domain:
            raise ParameterError("--metric clustered needs --domain FILE (public columns item, cluster)")
        space, dom, _ = clustered_from_file(args.domain, args.r)
        table = read_table(args.file)
        if args.item is None:
            raise ParameterError("--metric clustered needs --item COLUMN")
        missing = [c for c in (args.user, args.item) if c not in table.column_names]
        if missing:
            raise DataError(f"column(s) {missing} not found; the table has columns {table.column_names}")
        cols = table.select([args.user, args.item])
        t2 = {
            args.user: cols.column(args.user).to_numpy(zero_copy_only=False),
            args.item: np.array([str(x) for x in cols.column(args.item).to_pylist()], dtype=object),
        }
        ds = UserDataset.from_table(t2, user=args.user, item=args.item, domain=dom)
        return ds, space
    if args.items is None:
        raise ParameterError(f"--metric {args.metric} needs --items COL1,COL2 (point coordinates)")
    cols = args.items.split(",")
    if args.metric == "greatcircle":
        if not args.box:
            raise ParameterError("--metric greatcircle needs --box LAT0,LAT1,LON0,LON1 (public)")
        la0, la1, lo0, lo1 = _floats(args.box, 4, "box")
        box = BoxDomain.latlon(la0, la1, lo0, lo1)
        ds = UserDataset.from_file(args.file, user=args.user, items=cols, domain=box)
        return ds, GreatCircleMetric(box)
    if args.metric == "euclidean":
        if not args.diameter:
            raise ParameterError("--metric euclidean needs --diameter D (public)")
        ds = UserDataset.from_file(args.file, user=args.user, items=cols)
        space = EuclideanMetric(len(cols), args.diameter)
        space.check_points(ds.items)
        return ds, space
    raise ParameterError(f"unknown metric {args.metric!r}")


def _spark_input(args: argparse.Namespace, rng, need_equal_sizes: bool):
    """Spark path: the DataFrame (sampled with replacement per user when --samples), the per-user size m,
    the number of users n and whether it was projected. Per-user sampling is keyed by a driver-drawn seed."""

    from .engines.spark import SparkEngine

    eng = SparkEngine()
    df = eng.read(args.file)
    cols = [args.item] if args.item else args.items.split(",")
    eng._check(df, [args.user, *cols])
    projected = bool(args.samples)
    if projected:
        df = eng.sample_with_replacement(df, args.user, cols, args.samples, rng=rng)
    sizes = eng.user_sizes(df, args.user)
    if args.model == "central" or need_equal_sizes:
        eng.require_equal_sizes(df, args.user, sizes)
    return eng, df, sizes[0], sizes[2], projected


def _bounded(ds: UserDataset, args: argparse.Namespace, rng) -> tuple[UserDataset, bool]:
    if args.samples is not None:
        return ds.sample(args.samples, replace=True, rng=rng), True
    if ds.n_users == 0:
        ds.require_equal_sizes()  # refuses with the bounded model's reason (no count read off the data)
    c = ds.counts()
    if c.min() != c.max():
        raise DataError(
            "users hold different numbers of items; pass --samples S to apply BoundedEMDReduction "
            "(S samples with replacement per user, Theorem 5.3)"
        )
    return ds, False


@dataclass(frozen=True)
class Request:
    """The guarantee a command line asks for, and the inner release planned to deliver it (module docstring).

    ``alpha``, ``delta``: ``--alpha``, ``--delta`` (0 if absent). With ``--samples``: ``samples``, ``r`` and
    the projection's delta ``projection_delta`` (Lemma 5.2). ``inner_alpha`` and ``inner_delta`` are the
    target of the bounded release on the (projected) data.
    """

    alpha: float
    delta: float
    samples: int | None = None
    r: float | None = None
    projection_delta: float = 0.0
    inner_alpha: float = 0.0
    inner_delta: float = 0.0

    @property
    def epsilon(self) -> float | None:
        """With ``--samples``: the requested discrete epsilon ``alpha r``."""
        return None if self.samples is None else self.alpha * self.r

    def as_dict(self) -> dict:
        out = {"alpha": self.alpha, "delta": self.delta}
        if self.samples is not None:
            out.update({"r": self.r, "epsilon": self.epsilon})
        return out

    def describe(self) -> str:
        if self.samples is None:
            return f"(alpha = {self.alpha:.6g}, delta = {self.delta:.3g})-d_EM-DP"
        return (
            f"alpha = {self.alpha:.6g} at resolution r = {self.r:.4g}: ({self.epsilon:.6g}, {self.delta:.3g}, "
            f"r={self.r:.4g})-discrete d_EM-DP"
        )


def request(args: argparse.Namespace) -> Request:
    """Read and check ``--alpha``, ``--delta``, ``--samples``, ``--r-discrete``; plan the inner release."""
    alpha = float(args.alpha)
    if not (math.isfinite(alpha) and alpha > 0):
        raise ParameterError(f"--alpha must be positive and finite, got {args.alpha!r}")
    delta = 0.0 if args.delta is None else float(args.delta)
    if not 0 <= delta < 1:
        raise ParameterError(f"--delta must lie in [0, 1), got {args.delta!r}")
    if args.samples is None:
        return Request(alpha, delta, inner_alpha=alpha, inner_delta=delta)
    s = int(args.samples)
    if s < 1:
        raise ParameterError(f"--samples must be a positive integer, got {args.samples!r}")
    if delta == 0:
        raise ParameterError(
            "--samples S (BoundedEMDReduction, Theorem 5.3) needs --delta > 0: the projection's distance bound "
            "(Lemma 5.2) fails with probability delta; pass e.g. --delta 1e-6"
        )
    r = float(args.r_discrete)
    projection_delta = delta / 2
    c = reduction_distance(r, s, projection_delta)  # also checks r in (0, 1]
    inner_alpha = reduction_alpha(alpha * r, r, s, projection_delta)
    inner_delta = delta if c >= 1 else delta - projection_delta  # c >= 1: the projection needs no delta
    return Request(alpha, delta, s, r, projection_delta, inner_alpha, inner_delta)


def deliver(args: argparse.Namespace, req: Request, inner: Guarantee) -> tuple[Guarantee, dict]:
    """The guarantee delivered around the inner release's realized guarantee, checked against the request.

    Returns the guarantee and the output fields (``requested``, ``delivered``, ``inner_alpha``,
    ``inner_delta``, ``inner_delta_prime``, and ``guarantee_warning`` when a weaker release was allowed)."""
    if req.samples is None:
        g, realized, asked = inner, inner.alpha, req.alpha
    else:
        if not isinstance(inner, EMDMetricDP):
            raise ParameterError("BoundedEMDReduction needs an inner release with a bounded d_EM-DP guarantee")
        g = reduction_guarantee_of(inner, req.r, req.samples, req.projection_delta)
        realized, asked = g.epsilon, req.epsilon
    name = "alpha" if req.samples is None else "epsilon (alpha r)"
    problems = []
    if realized > asked * (1 + REQUEST_RTOL):
        problems.append(
            f"its {name} {realized:.6g} exceeds the requested {asked:.6g}: lower --alpha "
            f"(about {req.alpha * asked / realized:.6g})"
        )
    if g.delta > req.delta:
        problems.append(f"its delta {g.delta:.3g} exceeds the requested {req.delta:.3g}: raise --delta")
    fields = {
        "requested": req.as_dict(),
        "delivered": guarantee_to_dict(g),
        "inner_alpha": req.inner_alpha,
        "inner_delta": req.inner_delta,
        "inner_delta_prime": float(getattr(inner, "delta", 0.0)),
    }
    if problems:
        text = f"the release would be weaker than requested ({req.describe()}): " + "; ".join(problems)
        if not args.allow_weaker:
            raise ParameterError(text + "; or pass --allow-weaker to release the weaker guarantee")
        fields["guarantee_warning"] = text + " (released because of --allow-weaker)"
    return g, fields


def _emit(args: argparse.Namespace, mechanism: str, guarantee, estimate, extra: dict) -> int:
    from . import cli_ledger

    cli_ledger.charge(args, guarantee, mechanism)  # before anything is shown: if refused, nothing is
    out = {"mechanism": mechanism, "guarantee": guarantee.describe(), "estimate": estimate, **extra}
    if args.seed is not None:
        out["warning"] = "seeded noise: for demonstrations only, no privacy"
    if args.json:
        print(json.dumps(out, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))
        return 0
    from rich.console import Console
    from rich.table import Table

    con = Console()
    if args.seed is not None:
        con.print("[bold yellow]warning:[/] seeded noise is for demonstrations only")
    if "guarantee_warning" in extra:
        con.print(f"[bold red]warning:[/] {extra['guarantee_warning']}")
    con.print(f"[bold]{mechanism}[/]")
    if "requested" in extra:
        con.print("requested: " + ", ".join(f"{k} = {v:.6g}" for k, v in extra["requested"].items()))
    con.print(f"delivered: {guarantee.describe()}")
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


def cmd_linear(args: argparse.Namespace) -> int:
    from .dem import priv_emd_linear
    from .noise import resolve_rng

    req = request(args)
    rng = resolve_rng(args.seed)
    if args.engine == "spark":
        return _linear_spark(args, req, rng)
    ds, space = _load(args)
    if args.model == "central" or req.samples is not None:
        ds, _ = _bounded(ds, args, rng)
    if args.query == "distance":
        if not args.point:
            raise ParameterError("--query distance needs --point X,Y (lat,lon for greatcircle)")
        c = np.array(_floats(args.point, ds.dim, "point"))
        if isinstance(space, GreatCircleMetric):

            def f(x):
                return haversine_km(x[:, 0], x[:, 1], c[0], c[1]) / space.scale
        else:

            def f(x):
                return np.linalg.norm(x - c, axis=1) / space.scale

        ell, unit_scale = 1.0, space.scale  # 1-Lipschitz by the triangle inequality; report raw units
    elif args.query == "mean":
        if isinstance(space, GreatCircleMetric):
            raise ParameterError("--query mean needs a euclidean metric (lat/lon degrees are not a norm space)")

        def f(x):
            return x

        ell, unit_scale = space.scale, 1.0
    else:
        raise ParameterError(f"unknown query {args.query!r}")
    delta = req.inner_delta or None  # a delta selects the Gaussian variant
    rel = priv_emd_linear(ds, ell, req.inner_alpha, f_points=f, model=args.model, delta=delta, rng=rng)
    g, fields = deliver(args, req, rel.guarantee)
    est = (np.asarray(rel.value) * unit_scale).tolist()
    extra = {"unit": getattr(space, "unit", ""), "noise_scale": rel.params["noise_scale"] * unit_scale}
    return _emit(args, rel.mechanism, g, est, {**extra, **fields})


def _clustered_input(args: argparse.Namespace, command: str):
    from .noise import resolve_rng

    rng = resolve_rng(args.seed)
    if args.metric != "clustered":
        raise ParameterError(f"userdp {command} supports --metric clustered")
    ds, space = _load(args)
    ds, _ = _bounded(ds, args, rng)
    return rng, ds, space


def _linear_spark(args: argparse.Namespace, req: Request, rng) -> int:
    """PrivEMDLinear with the per-user means computed on Spark (distance to a public point)."""
    import math as _m

    from pyspark.sql import functions as F

    from . import releases

    if args.metric != "greatcircle" or args.query != "distance":
        raise ParameterError("--engine spark supports --metric greatcircle --query distance")
    if not args.box or not args.point or not args.items:
        raise ParameterError("--engine spark needs --items, --box and --point")
    la0, la1, lo0, lo1 = _floats(args.box, 4, "box")
    box = BoxDomain.latlon(la0, la1, lo0, lo1)
    space = GreatCircleMetric(box)
    lat, lon = args.items.split(",")
    eng, df, m, n, _ = _spark_input(args, rng, need_equal_sizes=False)
    inside = (F.col(lat) >= la0) & (F.col(lat) <= la1) & (F.col(lon) >= lo0) & (F.col(lon) <= lo1)
    if df.filter(~inside).limit(1).count():
        raise DataError("some points lie outside the declared box")
    c0, c1 = (_m.radians(v) for v in _floats(args.point, 2, "point"))
    p0, p1 = F.radians(F.col(lat)), F.radians(F.col(lon))
    a = F.sin((F.lit(c0) - p0) / 2) ** 2 + F.cos(p0) * _m.cos(c0) * F.sin((F.lit(c1) - p1) / 2) ** 2
    df = df.withColumn("_d", 2 * 6371.0088 * F.asin(F.sqrt(a)) / space.scale)
    delta = req.inner_delta or None  # a delta selects the Gaussian variant
    rel = releases.linear_mean(
        df, ["_d"], 1.0, req.inner_alpha, model=args.model, user=args.user, delta=delta, engine=eng, rng=rng
    )
    g, fields = deliver(args, req, rel.guarantee)
    est = (np.asarray(rel.value) * space.scale).tolist()
    extra = {"unit": "km", "engine": "spark", "noise_scale": rel.params["noise_scale"] * space.scale}
    return _emit(args, rel.mechanism, g, est, {**extra, **fields})


def _freq_spark(args: argparse.Namespace, req: Request, rng, release_histogram: bool) -> int:
    """GKRR item randomization on the executors (keyed by a driver-drawn seed), aggregation there, the
    estimate on the driver."""
    from .dem import GKRR
    from .dem.frequency import project_simplex
    from .dem.itemwise import itemwise_guarantee
    from .privacy.accounting import calibrate

    if args.metric != "clustered" or not args.domain or not args.item:
        raise ParameterError("--engine spark supports --metric clustered with --domain and --item")
    space, dom, _ = clustered_from_file(args.domain, args.r)
    eng, df, m, n, _ = _spark_input(args, rng, need_equal_sizes=True)
    central = args.model == "central"
    cal = calibrate(req.inner_alpha, req.inner_delta, m, n=n if central else None)
    gk = GKRR(space, min(cal.alpha0, 40.0))
    labels = dom.labels
    released = eng.randomize_items(df, args.user, args.item, gk, labels, rng=rng)
    counts = eng.histogram_sum(released, args.user, args.item, labels, normalize=False)
    v = counts / counts.sum()
    inner, route = itemwise_guarantee(
        gk.realized_alpha0, m, req.inner_delta, n if central else None, inner_delta=cal.best.delta or None
    )
    g, fields = deliver(args, req, inner)
    est_vec = v if release_histogram else project_simplex(gk.unbiased_estimate(v))
    est = {str(labels[i]): float(x) for i, x in enumerate(est_vec)}
    name = "PrivEMDItemWise (Algorithm 2)" if release_histogram else "FreqEstLocal + GKRR (Algorithm 4)"
    extra = {"alpha0": gk.realized_alpha0, "route": route, "engine": "spark"}
    return _emit(args, name + " on Spark", g, est, {**extra, **fields})


def cmd_itemwise(args: argparse.Namespace) -> int:
    from .dem import GKRR, priv_emd_itemwise
    from .privacy.accounting import calibrate

    req = request(args)
    if args.engine == "spark":
        from .noise import resolve_rng

        return _freq_spark(args, req, resolve_rng(args.seed), release_histogram=True)
    rng, ds, space = _clustered_input(args, "itemwise")
    m = int(ds.counts()[0])
    n = ds.n_users if args.model == "central" else None
    cal = calibrate(req.inner_alpha, req.inner_delta, m, n=n)
    gk = GKRR(space, min(cal.alpha0, 40.0))
    rel = priv_emd_itemwise(ds, gk, args.model, req.inner_delta, rng=rng, inner_delta=cal.best.delta or None)
    g, fields = deliver(args, req, rel.guarantee)
    labels = ds.domain.labels
    est = {str(labels[i]): float(v) for i, v in enumerate(rel.extras["histogram"])}
    extra = {"alpha0": rel.params["alpha0"], "route": rel.params["route"], "m": m}
    return _emit(args, rel.mechanism, g, est, {**extra, **fields})


def cmd_freq(args: argparse.Namespace) -> int:
    from .dem import freq_est_gkrr

    req = request(args)
    if args.engine == "spark":
        from .noise import resolve_rng

        return _freq_spark(args, req, resolve_rng(args.seed), release_histogram=False)
    rng, ds, space = _clustered_input(args, "freq")
    # the CLI compares the delivered guarantee with the request itself (deliver), with CLI wording
    rel = freq_est_gkrr(ds, space, req.inner_alpha, req.inner_delta, model=args.model, rng=rng, allow_weaker=True)
    g, fields = deliver(args, req, rel.guarantee)
    labels = ds.domain.labels
    est = {str(labels[i]): float(v) for i, v in enumerate(rel.value)}
    extra = {"alpha0": rel.extras["alpha0"], "route": rel.params["route"]}
    return _emit(args, rel.mechanism, g, est, {**extra, **fields})


def add_parsers(sub) -> None:
    from . import cli_ledger

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("file", help="CSV, Parquet or JSON-lines file, one record per item")
        p.add_argument("--user", required=True, help="user column")
        p.add_argument("--item", default=None, help="item id column (finite domains)")
        p.add_argument("--items", default=None, help="comma-separated coordinate columns (points)")
        p.add_argument("--metric", required=True, choices=["clustered", "greatcircle", "euclidean"])
        p.add_argument("--domain", default=None, help="clustered: public domain file with columns item,cluster")
        p.add_argument("--r", type=float, default=0.1, help="clustered: within-cluster distance (default 0.1)")
        p.add_argument("--box", default=None, help="greatcircle: public box LAT0,LAT1,LON0,LON1")
        p.add_argument("--diameter", type=float, default=None, help="euclidean: public diameter")
        p.add_argument("--alpha", type=float, required=True, help="the requested alpha of the d_EM-DP guarantee")
        p.add_argument(
            "--delta",
            type=float,
            default=None,
            help="the requested delta (default 0: a pure guarantee); required with --samples",
        )
        p.add_argument("--model", choices=["local", "central"], default="local")
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
        p.add_argument("--seed", type=int, default=None, help="seed the noise (demonstrations only)")
        p.add_argument("--engine", choices=["local", "spark"], default="local", help="where the data plane runs")
        p.add_argument("--json", action="store_true")
        cli_ledger.add_option(p)

    li = sub.add_parser("linear", help="PrivEMDLinear: a Lipschitz linear query under d_EM-DP")
    common(li)
    li.add_argument("--query", choices=["mean", "distance"], default="distance")
    li.add_argument("--point", default=None, help="--query distance: the public point (lat,lon or x,y)")
    li.set_defaults(func=cmd_linear)
    it = sub.add_parser("itemwise", help="PrivEMDItemWise with GKRR on a clustered metric")
    common(it)
    it.set_defaults(func=cmd_itemwise)
    fr = sub.add_parser("freq", help="frequency estimation (FreqEstLocal + GKRR) on a clustered metric")
    common(fr)
    fr.set_defaults(func=cmd_freq)

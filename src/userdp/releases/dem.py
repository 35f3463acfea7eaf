"""The d_EM-DP releases (Imola, Roy Chowdhury & Chaudhuri, CCS 2024) on a table of (user, item) records:
PrivEMDLinear (Algorithm 1), PrivEMDItemWise with GKRR (Algorithm 2) and frequency estimation
(FreqEstLocal, Algorithm 4), each optionally behind BoundedEMDReduction (Algorithm 3, ``samples=S``).

Every release plans its inner target from the request (:mod:`userdp.releases.request`), asks the engine for
the aggregates (per-user means; the keyed per-user sampling and randomization, then the count histogram),
runs the mechanism's step on the driver, and returns the delivered guarantee -- refusing one weaker than
asked unless ``allow_weaker``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from ..data import OUTSIDE_DOMAIN, FiniteDomain, table_of
from ..dem import GKRR, itemwise_guarantee, linear_release, project_simplex
from ..dem.frequency import check_randomizer, frequency_randomizer, gkrr_interval_halfwidth, unbiased_estimate
from ..dem.linear import _check_linear
from ..engines import Columns, Engine, get_engine, requested_engine
from ..errors import DataError, ParameterError
from ..metrics import ClusteredMetric, FiniteMetric, FiniteSpace, GreatCircleMetric, haversine_km
from ..noise import KeyedStreams, RngLike, resolve_rng
from ..privacy.guarantees import Model
from ..privacy.result import ErrorStatement, Release
from .request import deliver, plan_request

__all__ = [
    "PointQuery",
    "clustered_domain_from_table",
    "metric_domain_from_table",
    "distance_query",
    "frequency",
    "itemwise",
    "linear",
    "mean_query",
]


def distance_query(space: Any, point: Any) -> tuple[Callable[[np.ndarray], np.ndarray], float, float]:
    """The query ``f(x) = d(x, point) / scale`` of a metric space with a public scale (great-circle km or
    euclidean), its Lipschitz bound (1, by the triangle inequality) and the unit scale to report raw units."""
    c = np.asarray(point, dtype=np.float64).reshape(-1)
    if c.size != space.dim:
        raise ParameterError(
            f"the point needs {space.dim} coordinates" + (" (lat,lon)" if isinstance(space, GreatCircleMetric) else "")
        )
    if not np.all(np.isfinite(c)):
        raise ParameterError("the point's coordinates must be finite numbers (no NaN or inf)")
    return PointQuery(space, "distance", c), 1.0, float(space.scale)


def mean_query(space: Any) -> tuple[Callable[[np.ndarray], np.ndarray], float, float]:
    """The query ``f(x) = x`` (the mean point) of a euclidean space: Lipschitz bound ``scale`` in l2."""
    if isinstance(space, GreatCircleMetric):
        raise ParameterError("the mean query needs a euclidean metric (lat/lon degrees are not a norm space)")
    return PointQuery(space, "mean"), float(space.scale), 1.0


#: What the local PrivEMDLinear release does with points outside the space's public domain.
OUTSIDE_POINTS = (
    "points outside the public domain are dropped, user by user (a user with none inside sends no report); "
    "how many were dropped is not reported"
)


class PointQuery:
    """A picklable query on points of a metric ``space`` (it runs on Spark executors too): ``"distance"`` to a
    public point ``c`` over the space's scale, or ``"mean"`` (the point itself). Points are checked against
    the space's public domain first (:meth:`~userdp.metrics.MetricSpace.check_points`); with
    ``drops_outside`` a point outside it gets the value NaN instead, which the per-user mean skips
    (:func:`userdp.engines.memory.per_user_mean`): the point is dropped, user by user."""

    def __init__(self, space: Any, kind: str, c: np.ndarray | None = None, drops_outside: bool = False):
        self.space, self.kind, self.c, self.drops_outside = space, kind, c, bool(drops_outside)

    def dropping_outside(self) -> PointQuery:
        """This query, with points outside the space's domain dropped instead of refused."""
        return PointQuery(self.space, self.kind, self.c, drops_outside=True)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.drops_outside:
            x = self.space._as_points(x)
            keep = self.space.inside(x)
            x = np.where(keep[:, None], x, np.nan)  # (inside points only: values of NaN are dropped)
        else:
            x = self.space.check_points(x)
        if self.kind == "mean":
            return x
        if isinstance(self.space, GreatCircleMetric):
            return haversine_km(x[:, 0], x[:, 1], self.c[0], self.c[1]) / self.space.scale
        return np.linalg.norm(x - self.c, axis=1) / self.space.scale


def clustered_domain_from_table(source: Any, r: float) -> tuple[ClusteredMetric, FiniteDomain, np.ndarray]:
    """A public domain table (a path or a table) with columns ``item, cluster``; every cluster must have the
    same size. Item codes are ``cluster_index * t + position`` in table order. Returns the metric, the domain
    and the cluster labels."""
    t = table_of(source, ["item", "cluster"])
    items = [str(x) for x in t.column("item").to_pylist()]
    clusters = [str(x) for x in t.column("cluster").to_pylist()]
    order: dict[str, list[str]] = {}
    for it, c in zip(items, clusters, strict=True):
        order.setdefault(c, []).append(it)
    sizes = {len(v) for v in order.values()}
    if len(sizes) != 1:
        raise DataError(
            f"the clustered metric needs clusters of equal size; the public domain file has cluster sizes "
            f"{sorted(sizes)}: pad the smaller clusters with placeholder items that never occur"
        )
    labels = [it for c in order for it in order[c]]
    space = ClusteredMetric(len(order), sizes.pop(), r)
    return space, FiniteDomain(np.array(labels, dtype=object)), np.array(list(order), dtype=object)


def metric_domain_from_table(source: Any) -> tuple[FiniteMetric, FiniteDomain]:
    """A public distance matrix (a path or a table): a column ``item`` of labels and one column per label,
    in the same order, holding the distances (any unit; normalized by the largest). Returns the metric
    (checked: symmetric, zero diagonal, positive elsewhere, triangle inequality) and the domain."""
    t = table_of(source)
    if "item" not in t.column_names:
        raise DataError("the distance matrix needs a column 'item' of labels, then one column per label")
    names = list(t.column_names)
    if names.count("item") != 1:
        raise DataError("the distance matrix needs one column 'item' of labels, then one column per label")
    labels = [str(x) for x in t.column(names.index("item")).to_pylist()]
    others = [j for j, c in enumerate(names) if c != "item"]
    if [str(names[j]) for j in others] != labels:
        raise DataError("the distance matrix's columns must be the labels of its 'item' column, in that order")
    if len(set(labels)) != len(labels):
        raise DataError("the distance matrix's labels must be unique")
    cols = [t.column(j) for j in others]  # by position: a repeated name cannot select the wrong column
    if any(not (pa.types.is_integer(c.type) or pa.types.is_floating(c.type)) for c in cols):
        raise DataError("the distance matrix must hold numbers")
    D = np.column_stack([np.asarray(c.to_numpy(zero_copy_only=False), dtype=np.float64) for c in cols])
    return FiniteMetric(D), FiniteDomain(np.array(labels, dtype=object))


def linear(
    source: Any,
    query: Callable[[np.ndarray], np.ndarray],
    lipschitz: float,
    alpha: float,
    *,
    user: str = "user",
    item: str | None = None,
    points: tuple[str, ...] = (),
    domain: FiniteDomain | None = None,
    delta: float | None = None,
    model: Model | str = Model.LOCAL,
    norm: str = "l2",
    samples: int | None = None,
    r: float = 0.05,
    allow_weaker: bool = False,
    engine: Engine | str | None = None,
    rng: RngLike = None,
) -> Release:
    """PrivEMDLinear (Algorithm 1) of ``q_f``, the average over users of their mean ``query(x)``.

    Parameters
    ----------
    query:
        ``f`` on an ``(N, dim)`` point array (``points`` columns) or ``N`` item codes (``item`` column, public
        ``domain``), ``lipschitz``-Lipschitz in ``norm`` w.r.t. the metric (e.g. :func:`distance_query`). It
        must be picklable (it runs where the data are).
    alpha, delta, samples, r, allow_weaker:
        The request (:mod:`userdp.releases.request`): ``delta > 0`` selects the Gaussian variant; ``samples``
        applies BoundedEMDReduction first.
    model:
        ``"local"`` (each user's noisy mean; users may hold different numbers of items) or ``"central"``
        (bounded: every user holds the same public number of items, or ``samples`` makes them).
    engine, rng:
        As in :func:`userdp.releases.heatmap`.

    Returns
    -------
    Release
        ``value``: the estimate of ``q_f``; ``extras``: ``requested``, ``delivered``, the inner target, and
        ``per_user`` (local model).
    """
    req = plan_request(alpha, delta, samples, r, warn=True)
    _check_linear(lipschitz, req.inner_alpha, norm, req.inner_delta or None)
    if item is not None and not (isinstance(domain, FiniteDomain) and domain.public):
        # codes read off the data would make one user's f-values depend on the other users' items
        raise DataError("a query on item codes needs the public item domain (domain=FiniteDomain(labels))")
    mdl = _model(model)
    if req.samples is not None and mdl is Model.LOCAL:  # (refused before the data is read, not after the noise)
        raise ParameterError(
            "--samples S (samples=S, BoundedEMDReduction) wraps a bounded release: use --model central "
            "(model='central') with it, or leave it out: the local PrivEMDLinear release already holds for users "
            "holding any numbers of items"
        )
    # local model, no sampling: points outside the space's public domain are dropped, user by user (a refusal
    # when one lies outside would depend on the data); the bounded releases keep every user's public number of
    # points, so there a point outside is refused (--model local drops it)
    drops = isinstance(query, PointQuery) and mdl is Model.LOCAL and req.samples is None
    if drops:
        query = query.dropping_outside()
    eng = get_engine(engine, source)
    data = eng.load(source, Columns(user, item, points), domain)
    src = resolve_rng(rng)
    if req.samples is not None:
        data = eng.sample_keyed(data, req.samples, KeyedStreams.from_rng(src))
    if mdl is Model.CENTRAL or req.samples is not None:
        eng.user_sizes(data).equal()
    per_user = eng.per_user_mean(data, query)
    if drops:  # a user with no point inside sends no report
        per_user = per_user[np.isfinite(np.asarray(per_user).reshape(len(per_user), -1)).all(axis=1)]
    rel = linear_release(per_user, lipschitz, req.inner_alpha, mdl, norm, req.inner_delta or None, src)
    g, fields = deliver(req, rel.guarantee, allow_weaker)
    params = {**rel.params, "engine": requested_engine(engine),
              **({"outside": OUTSIDE_DOMAIN} if item is not None else {}),
              **({"outside": OUTSIDE_POINTS} if drops else {})}  # fmt: skip
    return Release(rel.value, g, rel.mechanism, params, rel.error, {**rel.extras, **fields})


def _randomized_counts(
    source: Any,
    space: FiniteSpace,
    domain: FiniteDomain,
    alpha: float,
    delta: float | None,
    model: Model | str,
    samples: int | None,
    r: float,
    allow_weaker: bool,
    user: str,
    item: str,
    engine: Engine | str | None,
    rng: RngLike,
    randomizer: str = "auto",
):
    """The shared data path of PrivEMDItemWise and frequency estimation: the keyed randomization of every item
    (GKRR on a clustered metric, else the exponential randomizer: :func:`userdp.dem.frequency.frequency_randomizer`)
    and the count histogram of the released multisets, with the delivered guarantee.

    Items outside the public ``domain`` are dropped, person by person, as every engine drops them
    (``params["outside"]``): d_EM-DP's guarantee is stated for persons holding items of the domain (an item
    outside it is at no finite distance from any other), and its equal-sizes check then reads the sizes that
    its neighbouring datasets share; a refusal of the value itself would depend on one person's data."""
    req = plan_request(alpha, delta, samples, r, warn=True)
    mdl = _model(model)
    if not isinstance(domain, FiniteDomain) or not domain.public:
        raise DataError("this release needs the public item domain (FiniteDomain(labels))")
    if len(domain) != space.size:
        raise ParameterError(f"the domain has {len(domain)} items but the metric has {space.size}")
    check_randomizer(space, randomizer)  # the metric and the randomizer, before any data
    eng = get_engine(engine, source)
    data = eng.load(source, Columns(user, item), domain)
    src = resolve_rng(rng)
    streams = KeyedStreams.from_rng(src)
    if req.samples is not None:
        data = eng.sample_keyed(data, req.samples, streams)
    sizes = eng.user_sizes(data)
    m = sizes.equal()
    n = sizes.users if mdl is Model.CENTRAL else None
    gk, cal = frequency_randomizer(space, req.inner_alpha, req.inner_delta, m, n, randomizer)
    counts = eng.histogram_sum(eng.randomize_keyed(data, gk, streams, m=m), normalize=False)
    if counts.sum() != m * sizes.users:  # the source changed between passes (a re-read file or stream)
        raise DataError("the input changed while it was read; nothing was released")
    a0, h_delta = gk.guarantee.alpha, cal.best.delta or None
    inner, route = itemwise_guarantee(a0, m, req.inner_delta, n, metric=gk.guarantee.metric, inner_delta=h_delta)
    g, fields = deliver(req, inner, allow_weaker)
    params = {"alpha0": a0, "m": m, "model": mdl.value, "route": route, "h_delta": h_delta,
              "engine": requested_engine(engine),
              "outside": OUTSIDE_DOMAIN}  # fmt: skip
    return gk, counts, g, params, fields


def itemwise(
    source: Any,
    space: FiniteSpace,
    domain: FiniteDomain,
    alpha: float,
    *,
    user: str = "user",
    item: str = "item",
    delta: float | None = None,
    model: Model | str = Model.LOCAL,
    samples: int | None = None,
    r: float = 0.05,
    allow_weaker: bool = False,
    engine: Engine | str | None = None,
    rng: RngLike = None,
    beta: float = 0.05,
    randomizer: str = "auto",
) -> Release:
    """PrivEMDItemWise (Algorithm 2) on the finite metric ``space`` over the public ``domain``: GKRR on a
    clustered metric, the exponential randomizer on any other (``randomizer``: ``"auto"``, ``"gkrr"`` or
    ``"exponential"``; :func:`userdp.dem.frequency.frequency_randomizer`).

    Every user's items are randomized with the user's keyed stream; the value is the histogram of all released
    items (normalized), which is the released multisets' content. ``alpha_0`` is the accountant's best
    calibration for the inner target (local, or the shuffle model with ``model="central"``). Other parameters
    as in :func:`linear`; every user must hold the same number of items unless ``samples`` is given.

    The value is the released items' histogram, pulled toward uniform within clusters by the noise; the
    extras carry, as post-processing of it, the ``unbiased`` estimate of the true histogram and the
    ``interval_halfwidth`` of its simultaneous ``1 - beta`` confidence intervals
    (:func:`~userdp.dem.frequency.gkrr_interval_halfwidth`).
    """
    _check_beta(beta)
    gk, counts, g, params, fields = _randomized_counts(
        source, space, domain, alpha, delta, model, samples, r, allow_weaker, user, item, engine, rng, randomizer
    )
    hist = counts / counts.sum()
    err, ci = _intervals(gk, counts, samples, beta)
    H, info = unbiased_estimate(gk, hist)
    params.update(info)
    extras = {"counts": counts, "unbiased": H, **ci, **fields}
    return Release(hist, g, "PrivEMDItemWise (Algorithm 2)", params, err, extras)


def _model(model: Model | str) -> Model:
    try:
        return Model(model)
    except ValueError:
        raise ParameterError(f"model must be 'local' or 'central', got {model!r}") from None


def _check_beta(beta: float) -> None:
    if not (isinstance(beta, (int, float)) and 0 < beta < 1):
        raise ParameterError(f"beta (the intervals' failure probability) must lie in (0, 1), got {beta!r}")


def _intervals(rz: Any, counts: np.ndarray, samples: int | None, beta: float):
    """The error statement and the interval extras of a GKRR histogram of ``counts.sum()`` randomized items
    (public under d_EM-DP, whose neighbouring datasets have the same users and sizes); other randomizers state
    their noise law without intervals."""
    if not isinstance(rz, GKRR):
        return ErrorStatement(
            f"The exponential randomizer's exact law at alpha_0 = {rz.realized_alpha0:.4g} on every item; no "
            "simultaneous intervals (their Bernstein bound is derived for GKRR)"
        ), {}
    gk = rz
    w = gkrr_interval_halfwidth(gk, int(counts.sum()), beta, sampled=samples is not None)
    target = "users' average item shares" if samples is not None else "histogram of all items"
    err = ErrorStatement(
        f"with probability >= {1 - beta:g}, every item's unbiased estimate lies within ±{w:.4g} of the true "
        f"{target} (simultaneous intervals from GKRR's noise law, Bernstein's inequality)",
        bound=w,
        confidence=1 - beta,
    )
    return err, {"interval_halfwidth": w, "interval_confidence": 1 - beta}


def frequency(
    source: Any,
    space: FiniteSpace,
    domain: FiniteDomain,
    alpha: float,
    *,
    user: str = "user",
    item: str = "item",
    delta: float | None = None,
    model: Model | str = Model.LOCAL,
    samples: int | None = None,
    r: float = 0.05,
    allow_weaker: bool = False,
    engine: Engine | str | None = None,
    rng: RngLike = None,
    beta: float = 0.05,
    randomizer: str = "auto",
) -> Release:
    """Frequency estimation (FreqEstLocal, Algorithm 4; central: Corollary 6.8) with GKRR or, on any finite
    metric, the exponential randomizer: the unbiased estimate ``H = v B`` (``B`` a right inverse of the
    transition matrix: GKRR's closed form, else exact when well conditioned and a truncated SVD otherwise,
    ``params["inverse"]``) of the released histogram ``v``, projected onto the simplex (Theorems 6.5-6.6 and
    Corollary 6.8 bound its d_EM error). The extras carry ``unbiased`` (``H`` before the projection) and the
    ``interval_halfwidth`` of simultaneous ``1 - beta`` confidence intervals around it. Parameters as in
    :func:`itemwise`."""
    _check_beta(beta)
    gk, counts, g, params, fields = _randomized_counts(
        source, space, domain, alpha, delta, model, samples, r, allow_weaker, user, item, engine, rng, randomizer
    )
    H, info = unbiased_estimate(gk, counts / counts.sum())
    params.update(info)
    central = Model(model) is Model.CENTRAL
    kind = "GKRR" if isinstance(gk, GKRR) else "exponential randomizer"
    name = f"FreqEst{' (central, Corollary 6.8)' if central else 'Local'} + {kind} (Algorithm 4)"
    err, ci = _intervals(gk, counts, samples, beta)
    return Release(project_simplex(H), g, name, params, err, {"unbiased": H, **ci, **fields})

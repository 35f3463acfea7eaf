"""The user-level DP histogram release: a table of (user, item) records over a public finite domain ->
the estimated average distribution ``(1/n) sum_i K~_i`` (:func:`userdp.dem.laplace_histogram`)."""

from __future__ import annotations

from typing import Any

from ..data import OUTSIDE_DOMAIN, FiniteDomain
from ..dem import laplace_histogram
from ..engines import Columns, Engine, get_engine
from ..errors import DataError, ParameterError
from ..noise import RngLike, calibrate_laplace, resolve_rng
from ..privacy.guarantees import Neighbours
from ..privacy.result import Release

__all__ = ["histogram"]


def histogram(
    source: Any,
    domain: FiniteDomain,
    epsilon: float,
    *,
    user: str = "user",
    item: str = "item",
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE_USER,
    engine: Engine | str | None = None,
    rng: RngLike = None,
) -> Release:
    """``sum_i K~_i`` over the public ``domain`` with Laplace noise (sensitivity 1 under add/remove one user,
    2 under replace one user); users with no items contribute nothing, and items outside ``domain`` are
    dropped, person by person (``params["outside"]`` says so). ``engine``, ``rng`` as in
    :func:`userdp.releases.heatmap`."""
    if not isinstance(domain, FiniteDomain) or not domain.public:
        raise DataError("the histogram needs the public item domain (FiniteDomain(labels))")
    try:
        nb = Neighbours(neighbours)
    except ValueError:
        raise ParameterError(f"unknown neighbour relation {neighbours!r}") from None
    if nb not in (Neighbours.ADD_REMOVE_USER, Neighbours.REPLACE_USER):
        raise ParameterError("a central histogram protects add/remove or replace-one-user neighbours")
    # the calibration (public: epsilon, the relation's sensitivity, the domain's size) before any data is read
    calibrate_laplace(1.0 if nb is Neighbours.ADD_REMOVE_USER else 2.0, epsilon, dim=len(domain))
    eng = get_engine(engine, source)
    total = eng.histogram_sum(eng.load(source, Columns(user, item), domain), normalize=True)
    rel = laplace_histogram(total, epsilon, nb, resolve_rng(rng))
    rel.params.update(outside=OUTSIDE_DOMAIN)
    return rel

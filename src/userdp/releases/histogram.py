"""The user-level DP histogram release: a table of (user, item) records over a public finite domain ->
the estimated average distribution ``(1/n) sum_i K~_i`` (:func:`userdp.dem.laplace_histogram`)."""

from __future__ import annotations

from typing import Any

from ..data import FiniteDomain
from ..dem import laplace_histogram
from ..engines import Columns, Engine, get_engine
from ..errors import DataError
from ..noise import RngLike, resolve_rng
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
    2 under replace one user); users with no items contribute nothing. ``engine``, ``rng`` as in
    :func:`userdp.releases.heatmap`."""
    if not isinstance(domain, FiniteDomain) or not domain.public:
        raise DataError("the histogram needs the public item domain (FiniteDomain(labels))")
    eng = get_engine(engine)
    total = eng.histogram_sum(eng.load(source, Columns(user, item), domain), normalize=True)
    return laplace_histogram(total, epsilon, Neighbours(neighbours), resolve_rng(rng))

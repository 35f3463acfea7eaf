"""PrivEMDItemWise (Imola et al., section 4.2, Algorithm 2) and BoundedEMDReduction (section 5,
Algorithm 3).

PrivEMDItemWise applies an item-level ``alpha_0``-``d_X``-DP randomizer to every item and releases the
outputs as an unordered multiset. userdp releases each multiset *sorted* (equivalently, its histogram):
a sorted list is a function of the multiset, so it is the same release as the shuffled list of
Algorithm 2. The guarantee comes from the accountant (:mod:`userdp.privacy.accounting`): Theorem 4.4
when ``alpha_0`` is inside Theorem 4.3's range (or the numerical bound, on request), otherwise plain
composition ``(m alpha_0, 0)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..data import UserDataset
from ..errors import ParameterError
from ..noise import RngLike, resolve_rng
from ..privacy.accounting import (
    Calibration,
    calibrate,
    numerical_shuffle_guarantee,
    reduction_alpha,
    shuffle_guarantee,
    validity_limit,
)
from ..privacy.guarantees import DiscreteEMDDP, EMDMetricDP, Model
from ..release import Release
from .randomizers import ItemRandomizer

__all__ = ["priv_emd_itemwise", "itemwise_guarantee", "BoundedEMDReduction", "calibrated_alpha0"]


def itemwise_guarantee(
    alpha0: float, m: int, delta: float, n: int | None = None, numerical: bool = False, metric: str = ""
) -> tuple[EMDMetricDP, str]:
    """The best available ``(alpha, delta')`` guarantee for PrivEMDItemWise and the route that gave it."""
    M = m * (n or 1)
    model = Model.CENTRAL if n is not None else Model.LOCAL
    best: tuple[EMDMetricDP, str] = (EMDMetricDP(m * alpha0, 0.0, model, True, metric), "composition")
    if alpha0 < validity_limit(M, delta):
        b = shuffle_guarantee(alpha0, m, delta, n=n)
        if b.delta_prime < 1 and b.alpha < best[0].alpha:
            best = (b.guarantee(metric), "theorem 4.4")
    if numerical:
        nb = numerical_shuffle_guarantee(alpha0, m, delta, n=n)
        if nb.delta_prime < 1 and nb.alpha < best[0].alpha:
            best = (nb.guarantee(metric), nb.source)
    return best


def priv_emd_itemwise(
    ds: UserDataset,
    randomizer: ItemRandomizer,
    model: Model | str = Model.LOCAL,
    delta: float = 1e-9,
    numerical: bool = False,
    rng: RngLike = None,
) -> Release:
    """PrivEMDItemWise (Algorithm 2) in the local model (each user randomizes and shuffles their own ``m``
    items) or the bounded central / shuffle model (all ``m n`` items, one shuffle).

    Returns
    -------
    Release
        ``value``: a :class:`UserDataset` of the released multisets (sorted within each user; in the central
        model one pseudo-user holding all ``m n`` outputs). ``extras["histogram"]``: the average normalized
        histogram of the outputs (finite domains). The guarantee's ``delta'`` comes from the inner ``delta``.
    """
    mdl = Model(model)
    m = ds.require_equal_sizes()
    n = ds.n_users
    a0 = randomizer.guarantee.alpha
    src = resolve_rng(rng)
    out = randomizer.randomize(ds.items, src)
    if mdl is Model.LOCAL:
        if out.ndim == 1:  # finite domain: sort by the single key user * k + item
            k = int(out.max()) + 1 if out.size else 1
            out = np.sort(np.repeat(np.arange(n, dtype=np.int64) * k, m) + out) % k
        else:
            order = np.lexsort(
                tuple(out[:, j] for j in range(out.shape[1] - 1, -1, -1)) + (np.repeat(np.arange(n), m),)
            )
            out = out[order]
        released = UserDataset(ds.offsets, out, np.arange(n), ds.domain)
        g, route = itemwise_guarantee(a0, m, delta, None, numerical, metric=randomizer.guarantee.metric)
    else:
        out = np.sort(out) if out.ndim == 1 else out[np.lexsort(out.T[::-1])]
        released = UserDataset(np.array([0, out.shape[0]]), out, np.array([0]), ds.domain)
        g, route = itemwise_guarantee(a0, m, delta, n, numerical, metric=randomizer.guarantee.metric)
    extras = {"route": route, "alpha0": a0}
    if not released.is_points and released.domain is not None:
        extras["histogram"] = np.bincount(out, minlength=released.domain_size) / out.size
    params = {"alpha0": a0, "m": m, "n": n, "model": mdl.value, "delta": delta, "route": route}
    return Release(released, g, "PrivEMDItemWise (Algorithm 2)", params, None, extras)


class BoundedEMDReduction:
    """BoundedEMDReduction (Algorithm 3): sample ``s`` items with replacement from each user (any size >= 1),
    then run a bounded d_EM-DP mechanism on the result.

    Theorem 5.3: if the bounded mechanism is ``(alpha, delta)``-bounded d_EM-DP with
    ``alpha <= epsilon / ((1 + sqrt 2) r + (3/s) ln(1/delta))`` (:attr:`required_alpha`), the whole is
    ``(epsilon, 2 delta, r)``-discrete d_EM-DP (local or central, as the inner mechanism).
    """

    def __init__(self, s: int, epsilon: float, r: float, delta: float):
        self.s = int(s)
        self.epsilon, self.r, self.delta = float(epsilon), float(r), float(delta)
        self.required_alpha = reduction_alpha(epsilon, r, s, delta)

    def project(self, ds: UserDataset, rng: RngLike = None) -> UserDataset:
        """The smooth projection: every user -> ``s`` samples with replacement."""
        ds.require_items()
        return ds.sample(self.s, replace=True, rng=rng)

    def run(self, ds: UserDataset, mechanism: Callable[[UserDataset, float], Release], rng: RngLike = None) -> Release:
        """Project, then call ``mechanism(projected, required_alpha)``; it must return a bounded d_EM-DP
        release with ``alpha <= required_alpha`` and ``delta <= self.delta``, else nothing is released."""
        projected = self.project(ds, rng)
        inner = mechanism(projected, self.required_alpha)
        g = inner.guarantee
        if not isinstance(g, EMDMetricDP) or not g.bounded:
            raise ParameterError("the inner mechanism must return a bounded d_EM-DP guarantee")
        if g.alpha > self.required_alpha * (1 + 1e-9) or g.delta > self.delta * (1 + 1e-9):
            raise ParameterError(
                f"the inner mechanism gives ({g.alpha:.4g}, {g.delta:.3g}); Theorem 5.3 needs alpha <= "
                f"{self.required_alpha:.4g} and delta <= {self.delta:.3g}"
            )
        out = DiscreteEMDDP(self.epsilon, 2 * self.delta, self.r, g.model, g.metric)
        params = dict(inner.params)
        params.update({"s": self.s, "r": self.r, "epsilon": self.epsilon, "inner_alpha": g.alpha})
        return Release(
            inner.value,
            out,
            f"BoundedEMDReduction (Algorithm 3) + {inner.mechanism}",
            params,
            inner.error,
            dict(inner.extras),
        )


def calibrated_alpha0(
    alpha: float, delta_prime: float, m: int, n: int | None = None, numerical: bool = False
) -> Calibration:
    """The accountant's calibration (best route) of ``alpha_0`` for a target ``(alpha, delta')``."""
    return calibrate(alpha, delta_prime, m, n=n, numerical=numerical)

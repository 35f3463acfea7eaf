"""PrivEMDItemWise (Imola et al., section 4.2, Algorithm 2) and BoundedEMDReduction (section 5,
Algorithm 3).

PrivEMDItemWise applies an item-level ``alpha_0``-``d_X``-DP randomizer to every item and releases the
outputs as an unordered multiset. userdp releases each multiset *sorted* (equivalently, its histogram):
a sorted list is a function of the multiset, so it is the same release as the shuffled list of
Algorithm 2. The guarantee comes from the accountant (:func:`userdp.privacy.accounting.itemwise_bound`)
for a *target* ``delta'`` (the delta of the returned guarantee; 0, the default, asks for a pure guarantee):
the smallest alpha among Theorem 4.4 (and the numerical bound, on request) at the largest inner delta whose
``delta'`` meets the target, and plain composition ``(m alpha_0, 0)``, which always does.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..data import UserDataset
from ..errors import ParameterError
from ..noise import RngLike, resolve_rng
from ..privacy.accounting import (
    REQUEST_RTOL,
    Calibration,
    calibrate,
    itemwise_bound,
    reduction_alpha,
    reduction_guarantee_of,
)
from ..privacy.guarantees import EMDMetricDP, Model
from ..privacy.result import Release
from .randomizers import ItemRandomizer

__all__ = ["priv_emd_itemwise", "itemwise_guarantee", "BoundedEMDReduction", "calibrated_alpha0"]


def itemwise_guarantee(
    alpha0: float,
    m: int,
    delta_prime: float,
    n: int | None = None,
    numerical: bool = False,
    metric: str = "",
    inner_delta: float | None = None,
) -> tuple[EMDMetricDP, str]:
    """The best ``(alpha, delta')`` guarantee of PrivEMDItemWise with ``delta' <= delta_prime``, and its route.

    Parameters
    ----------
    alpha0:
        Level of the item randomizer.
    m:
        Items per user.
    delta_prime:
        The target: the largest delta the guarantee may have. ``0`` asks for a pure guarantee (composition).
    n:
        Number of users for the central (shuffle) model; ``None`` for the local model.
    numerical:
        Also consider the numerical amplification bound (seconds instead of milliseconds).
    inner_delta:
        The delta inside Theorem 4.4's ``h`` (as calibrated by :func:`userdp.privacy.accounting.calibrate`).
        By default the largest one whose ``delta'`` meets the target is derived.

    Returns
    -------
    tuple
        The guarantee and the route (``"theorem 4.4"``, ``"numerical"`` or ``"composition"``).
    """
    b = itemwise_bound(alpha0, m, delta_prime, n=n, numerical=numerical, inner_delta=inner_delta)
    return b.guarantee(metric), b.route


def priv_emd_itemwise(
    ds: UserDataset,
    randomizer: ItemRandomizer,
    model: Model | str = Model.LOCAL,
    delta_prime: float | None = None,
    numerical: bool = False,
    rng: RngLike = None,
    *,
    inner_delta: float | None = None,
    delta: float | None = None,
) -> Release:
    """PrivEMDItemWise (Algorithm 2) in the local model (each user randomizes and shuffles their own ``m``
    items) or the bounded central / shuffle model (all ``m n`` items, one shuffle).

    Parameters
    ----------
    delta_prime:
        The largest delta the returned guarantee may have (default 0: pure, i.e. composition). The route with
        the smallest alpha among those meeting it is chosen (:func:`itemwise_guarantee`).
    inner_delta:
        The delta inside Theorem 4.4's ``h`` (derived from ``delta_prime`` by default).
    delta:
        The former name of ``delta_prime`` (kept for callers of the old signature; it is the target delta' of
        the guarantee, never an inner parameter). Pass one of the two, not both.

    Returns
    -------
    Release
        ``value``: a :class:`UserDataset` of the released multisets (sorted within each user; in the central
        model one pseudo-user holding all ``m n`` outputs). ``extras["histogram"]``: the average normalized
        histogram of the outputs (finite domains). ``params["inner_delta"]``: the inner delta used (0 for
        composition).
    """
    if delta is not None and delta_prime is not None:
        raise ParameterError("pass the target delta' as delta_prime or as delta, not both")
    target = delta_prime if delta_prime is not None else (delta if delta is not None else 0.0)
    mdl = Model(model)
    m = ds.require_equal_sizes()
    n = ds.n_users
    a0 = randomizer.guarantee.alpha
    bound = itemwise_bound(a0, m, target, None if mdl is Model.LOCAL else n, numerical, inner_delta)
    g, route = bound.guarantee(randomizer.guarantee.metric), bound.route
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
    else:
        out = np.sort(out) if out.ndim == 1 else out[np.lexsort(out.T[::-1])]
        released = UserDataset(np.array([0, out.shape[0]]), out, np.array([0]), ds.domain)
    extras = {"route": route, "alpha0": a0}
    if not released.is_points and released.domain is not None:
        extras["histogram"] = np.bincount(out, minlength=released.domain_size) / out.size
    params = {
        "alpha0": a0,
        "m": m,
        "n": n,
        "model": mdl.value,
        "delta_prime": float(target),
        "inner_delta": bound.inner_delta,
        "route": route,
    }
    return Release(released, g, "PrivEMDItemWise (Algorithm 2)", params, None, extras)


class BoundedEMDReduction:
    """BoundedEMDReduction (Algorithm 3): sample ``s`` items with replacement from each user (any size >= 1),
    then run a bounded d_EM-DP mechanism on the result.

    Theorem 5.3: if the bounded mechanism is ``(alpha, delta_in)``-bounded d_EM-DP with
    ``alpha <= epsilon / c`` (:attr:`required_alpha`; ``c = (1 + sqrt 2) r + (3/s) ln(1/delta)`` is Lemma
    5.2's distance, replaced by 1 when larger) and ``delta_in <= delta``, the whole is
    ``(alpha c, delta_in + delta, r)``-discrete d_EM-DP (local or central, as the inner mechanism): at most
    the requested ``(epsilon, 2 delta, r)``, and reported as realized (:func:`reduction_guarantee_of`).
    """

    def __init__(self, s: int, epsilon: float, r: float, delta: float):
        self.s = int(s)
        self.epsilon, self.r, self.delta = float(epsilon), float(r), float(delta)
        self.required_alpha = reduction_alpha(epsilon, r, s, delta)

    def project(self, ds: UserDataset, rng: RngLike = None) -> UserDataset:
        """The smooth projection: every user -> ``s`` samples with replacement."""
        ds.require_items()
        return ds.sample(self.s, replace=True, rng=rng)

    def run(
        self,
        ds: UserDataset,
        mechanism: Callable[[UserDataset, float], Release],
        rng: RngLike = None,
        allow_weaker: bool = False,
    ) -> Release:
        """Project, then call ``mechanism(projected, required_alpha)``; it must return a bounded d_EM-DP
        release with ``alpha <= required_alpha`` (up to :data:`~userdp.privacy.accounting.REQUEST_RTOL`) and
        ``delta <= self.delta``, else nothing is released -- unless ``allow_weaker``, and then the weaker
        guarantee it gives is the one reported (``params["weaker_than_requested"]``)."""
        projected = self.project(ds, rng)
        inner = mechanism(projected, self.required_alpha)
        g = inner.guarantee
        if not isinstance(g, EMDMetricDP) or not g.bounded:
            raise ParameterError("the inner mechanism must return a bounded d_EM-DP guarantee")
        weaker = g.alpha > self.required_alpha * (1 + REQUEST_RTOL) or g.delta > self.delta
        if weaker and not allow_weaker:
            raise ParameterError(
                f"the inner mechanism gives ({g.alpha:.6g}, {g.delta:.3g}); Theorem 5.3 needs alpha <= "
                f"{self.required_alpha:.6g} and delta <= {self.delta:.3g} for the requested epsilon = "
                f"{self.epsilon:.4g}: lower the inner mechanism's alpha (or delta), or pass allow_weaker=True to "
                "release the weaker guarantee"
            )
        out = reduction_guarantee_of(g, self.r, self.s, self.delta)
        params = dict(inner.params)
        params.update(
            {
                "s": self.s,
                "r": self.r,
                "epsilon": self.epsilon,
                "inner_alpha": g.alpha,
                "inner_delta_prime": g.delta,
                "weaker_than_requested": weaker,
            }
        )
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

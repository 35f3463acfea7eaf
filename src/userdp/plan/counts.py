"""Plans of the records per key (:func:`userdp.releases.key_counts`) and of the private vocabulary
(:func:`userdp.releases.vocabulary`)."""

from __future__ import annotations

import math

from ..errors import ParameterError
from ..noise import calibrate_gaussian, calibrate_laplace
from ..privacy.params import check_delta
from .common import (
    Prediction,
    confidences,
    laplace_abs_quantile,
    normal_abs_quantile,
    smallest_epsilon,
    smallest_reaching,
)

__all__ = ["histogram", "key_counts", "key_counts_epsilon", "vocabulary", "vocabulary_epsilon"]


def key_counts(
    epsilon: float,
    delta: float = 0.0,
    *,
    l0: int,
    linf: int,
    n_keys: int = 1,
    noise: str = "laplace",
    confidence: float = 0.9,
) -> Prediction:
    """The noise of one released count of :func:`userdp.releases.key_counts` with the public bounds
    ``(l0, linf)`` and its whole budget on the counts (public keys, given bounds): lattice Laplace of l1
    sensitivity ``l0 linf`` or lattice Gaussian of l2 sensitivity ``sqrt(l0) linf``. The dropped records
    (bias) are not included: they depend on the data."""
    cs = confidences(confidence)
    delta = check_delta(delta, "delta (--delta)")  # refused outside [0, 1) whatever the noise
    if int(l0) < 1 or int(linf) < 1:
        raise ParameterError("the bounds must be whole numbers >= 1")
    if noise == "laplace":
        cal = calibrate_laplace(float(l0 * linf), epsilon, dim=max(1, int(n_keys)))
        qs = {c: laplace_abs_quantile(cal.t, cal.granularity, c) for c in cs}
        basis = f"the lattice Laplace's law (scale {cal.scale:.4g}): exact"
        exact = True
    elif noise == "gaussian":
        cal = calibrate_gaussian(math.sqrt(l0) * linf, epsilon, delta, dim=max(1, int(n_keys)))
        qs = {c: normal_abs_quantile(cal.sigma, c) for c in cs}
        basis = f"the lattice Gaussian's width (sigma {cal.sigma:.4g}), as a normal law: within one lattice step"
        exact = False
    else:
        raise ParameterError(f"the noise must be laplace or gaussian, got {noise!r}")
    return Prediction("key counts", "|noise| of one count (records)", qs, exact, basis)


def histogram(
    epsilon: float, *, domain_size: int, neighbours: str = "add or remove one user", confidence: float = 0.9
) -> Prediction:
    """The noise of one cell of :func:`userdp.releases.histogram`'s noisy sum of the users' distributions
    (``extras["noisy_sum"]``): lattice Laplace of l1 sensitivity 1 (add/remove one user) or 2 (replace one
    user) over ``domain_size`` public cells; exact."""
    from ..privacy.guarantees import Neighbours

    cs = confidences(confidence)
    nb = Neighbours(neighbours)
    if nb not in (Neighbours.ADD_REMOVE_USER, Neighbours.REPLACE_USER):
        raise ParameterError("a central histogram protects add/remove or replace-one-user neighbours")
    if int(domain_size) < 1:
        raise ParameterError("the domain needs at least one cell")
    cal = calibrate_laplace(1.0 if nb is Neighbours.ADD_REMOVE_USER else 2.0, epsilon, dim=int(domain_size))
    qs = {c: laplace_abs_quantile(cal.t, cal.granularity, c) for c in cs}
    basis = f"the lattice Laplace's law (scale {cal.scale:.4g}): exact"
    return Prediction("histogram", "|noise| of one cell of the noisy sum (users)", qs, True, basis)


def key_counts_epsilon(
    target: float, confidence: float = 0.9, delta: float = 0.0, *, l0: int, linf: int, n_keys: int = 1,
    noise: str = "laplace",
) -> float:  # fmt: skip
    """The smallest epsilon (to 1%) at which one count's noise is at most ``target`` records with
    probability ``confidence`` (:func:`key_counts`)."""
    kw = {"delta": delta, "l0": l0, "linf": linf, "n_keys": n_keys, "noise": noise}
    return smallest_reaching(key_counts, target, confidence, 1e-3, 50.0, **kw)


def _release_probability(cal, weight_steps: int) -> float:
    """``P[h + Z >= T]`` for an item of weight ``h`` (lattice steps), under the calibration's noise."""
    m = cal.threshold - int(weight_steps)
    if cal.noise == "laplace":
        q = math.exp(-1.0 / cal.scale)
        return q**m / (1 + q) if m >= 1 else 1 - q ** (1 - m) / (1 + q)
    from scipy.special import ndtr

    return float(ndtr(-(m - 0.5) / cal.scale))


def vocabulary(
    epsilon: float,
    delta: float,
    *,
    max_items: int | str = "auto",
    noise: str = "gaussian",
    count_fraction: float = 0.5,
    persons: int | None = None,
    items_each: int = 1,
    confidence: float = 0.9,
) -> Prediction:
    """What :func:`userdp.releases.vocabulary` (weighted union) will release: the weight (in persons who
    keep one item each) an item needs to be released with probability 1/2 and ``confidence``; with
    ``persons``, the probability that an item held by that many persons, each keeping ``items_each`` items,
    is released; and the quantiles of its count's noise.

    With ``max_items="auto"`` (the release's default) the bound is chosen from the data, so no plan can know
    it: the figures are those of the grid's largest candidate (8192) with the selection's 2% of epsilon
    taken out. The threshold and the counts' noise grow with the bound, so they bound the chosen one's from
    above (the counts' noise by far: pass the bound you expect to plan it closer)."""
    from ..vocabulary import person_weights, plan_vocabulary

    confidences(confidence)
    plan = plan_vocabulary(epsilon, delta, max_items, noise, False, count_fraction)
    cal = plan["calibration"]
    unit = cal.unit
    need = {}
    for p in (0.5, float(confidence)):
        lo, hi = 0, cal.threshold + 64 * cal.scale
        while hi - lo > 1:  # smallest weight with release probability >= p
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if _release_probability(cal, mid) >= p else (mid, hi)
        need[p] = hi / unit
    extra = {"weight needed": need, "threshold": cal.threshold / unit, "new item released at most": cal.delta_new}
    if plan["auto"]:
        extra["max_items"] = (f"auto: chosen from the data (2% of epsilon); these figures are for the largest "
                              f"candidate, {plan['max_items']}, and bound the chosen bound's from above")  # fmt: skip
    if persons is not None:
        w = int(person_weights(max(1, min(int(items_each), plan["max_items"])), noise, unit))
        extra["release probability"] = _release_probability(cal, int(persons) * w)
    qs: dict[float, float] = {}
    if plan["count_fraction"] > 0:  # one person adds 1 to at most max_items counts: the key counts' noise
        qs = key_counts(plan["epsilon_counts"], plan["delta_counts"], l0=plan["max_items"], linf=1, noise=noise,
                        confidence=confidence).quantiles  # fmt: skip
    return Prediction(
        "vocabulary",
        "|noise| of one released item's person count",
        qs,
        noise == "laplace",
        "the threshold and the noise of userdp.vocabulary.calibrate_union; the counts' lattice noise"
        + (f" (max_items auto: at the largest candidate, {plan['max_items']})" if plan["auto"] else ""),
        extra,
    )


def vocabulary_epsilon(
    persons: int,
    probability: float = 0.9,
    delta: float = 1e-6,
    *,
    max_items: int | str = "auto",
    items_each: int = 1,
    noise: str = "gaussian",
    count_fraction: float = 0.5,
) -> float:
    """The smallest epsilon (to 1%) at which an item held by ``persons`` persons, each keeping
    ``items_each`` items, is released with at least ``probability`` (:func:`vocabulary`)."""
    if int(persons) < 1:
        raise ParameterError("persons must be at least 1")
    return smallest_epsilon(
        lambda e: vocabulary(e, delta, max_items=max_items, noise=noise, count_fraction=count_fraction,
                             persons=persons, items_each=items_each).extra["release probability"] >= probability,
        lo=1e-2,
    )  # fmt: skip

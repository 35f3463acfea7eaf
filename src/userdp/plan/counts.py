"""Plans of the records per key (:func:`userdp.releases.key_counts`) and of the private vocabulary
(:func:`userdp.releases.vocabulary`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

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

__all__ = [
    "VOCABULARY_MODELS",
    "SelectionModel",
    "histogram",
    "key_counts",
    "key_counts_epsilon",
    "vocabulary",
    "vocabulary_epsilon",
    "vocabulary_model",
]


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


@dataclass(frozen=True)
class SelectionModel:
    """What :func:`vocabulary` predicts for one selection algorithm, from the library's own plan of it.

    Attributes
    ----------
    plan:
        The library's plan of the release (:func:`userdp.vocabulary.plan_vocabulary` or
        :func:`userdp.vocabulary.plan_sips_vocabulary`): the budget split, ``"calibration"``, ``"max_items"``.
    rounds:
        The :class:`~userdp.vocabulary.UnionCalibration` of each round of the selection (one for a one-round
        union): an item of weight ``h`` is missed by round ``i`` with probability ``1 - P[h + Z_i >= T_i]``,
        independently (each round draws its own noise).
    cap:
        The most weight the modelled item can get (the policy's cutoff ``Gamma``), or ``None``.
    modelled:
        The basis's sentence: what the probability is, and what it leaves out.
    """

    plan: dict
    rounds: tuple
    cap: int | None
    modelled: str

    def release_probability(self, weight_steps: int) -> float:
        """The probability that an item whose holders give it ``weight_steps`` lattice steps in every round
        is released by some round (capped at :attr:`cap`)."""
        h = int(weight_steps) if self.cap is None else min(int(weight_steps), self.cap)
        missed = 1.0
        for cal in self.rounds:
            missed *= 1.0 - _release_probability(cal, h)
        return 1.0 - missed


def _weighted_model(epsilon, delta, max_items, noise, count_fraction, rounds, ratio) -> SelectionModel:
    from ..vocabulary import plan_vocabulary

    pl = plan_vocabulary(epsilon, delta, max_items, noise, False, count_fraction)
    return SelectionModel(pl, (pl["calibration"],), None,
                          "P(h + noise >= T) for an item of weight h: its holders each give it their weight's "
                          "share (1/k Laplace, 1/sqrt(k) Gaussian, k kept items), exact on the lattice")  # fmt: skip


def _policy_model(epsilon, delta, max_items, noise, count_fraction, rounds, ratio) -> SelectionModel:
    from ..vocabulary import plan_vocabulary

    pl = plan_vocabulary(epsilon, delta, max_items, noise, True, count_fraction)
    cal = pl["calibration"]
    return SelectionModel(pl, (cal,), int(cal.cutoff),
                          "P(h + noise >= T) with the policy's threshold and noise, for h the weight every holder "
                          "gives the item at least (1/k of their unit, k kept items) capped at the cutoff "
                          f"{cal.cutoff / cal.unit:.4g}; not modelled: the weight holders move to it from their "
                          "other items already at the cutoff (the policy's gain over the weighted union), so "
                          "the probability is a lower bound, exact when those items stay below the cutoff")  # fmt: skip


def _sips_model(epsilon, delta, max_items, noise, count_fraction, rounds, ratio) -> SelectionModel:
    from ..vocabulary import plan_sips_vocabulary

    sched = {k: v for k, v in (("rounds", rounds), ("ratio", ratio)) if v is not None}
    pl = plan_sips_vocabulary(epsilon, delta, max_items, noise, count_fraction, **sched)
    cal = pl["calibration"]
    return SelectionModel(pl, tuple(cal.rounds), None,
                          f"the probability that an item of weight h is released by some round of DP-SIPS's "
                          f"{len(cal.rounds)} (1 - prod_i (1 - P(h + noise_i >= T_i)), each round's threshold "
                          f"and noise: calibrate_sips, ratio {pl['ratio']:g}), h its holders' weight in every round "
                          "(1/sqrt(k), k kept items); the holders' other items released in earlier rounds raise "
                          "their weight later (not modelled), so the probability is a lower bound, exact when "
                          "they hold one item each or their other items are not released first")  # fmt: skip


def _greedy_model(epsilon, delta, max_items, noise, count_fraction, rounds, ratio) -> SelectionModel:
    from ..vocabulary import plan_vocabulary

    pl = plan_vocabulary(epsilon, delta, max_items, noise, False, count_fraction, greedy=True)  # as the release
    cal = pl["calibration"]
    greedy_cap = int(cal.cutoff)  # no holder raises an item past the cutoff
    basis = ("P(h + noise >= T) with the policy greedy union's threshold and noise, for h the weight holders "
             f"give the item on average, capped at the cutoff {cal.cutoff / cal.unit:.4g}: a holder puts their "
             "whole unit on their first item below the cutoff, and each of k kept items of equal local counts is "
             "first with probability 1/k; exact for persons keeping one item each, an average otherwise (not a "
             "bound: an item last in every holder's order gets nothing, one first in every order gets more)")
    return SelectionModel(pl, (cal,), greedy_cap, basis)


VOCABULARY_MODELS = {"weighted": _weighted_model, "policy": _policy_model, "sips": _sips_model,
                     "policy-greedy": _greedy_model}  # fmt: skip
"""One model per selection algorithm of the vocabulary release (``algorithm=``), each built from the
library's own plan and calibration: a new algorithm is one more entry."""


def vocabulary_model(
    epsilon: float,
    delta: float,
    *,
    algorithm: str | None = None,
    rounds: int | None = None,
    ratio: float | None = None,
    max_items: int | str = "auto",
    noise: str = "gaussian",
    count_fraction: float = 0.5,
) -> SelectionModel:
    """The :class:`SelectionModel` of the vocabulary release with these parameters (checked as the release
    checks them: :func:`userdp.vocabulary.vocabulary_algorithm`, then the algorithm's own plan)."""
    from ..vocabulary.union import vocabulary_algorithm

    algo = vocabulary_algorithm(algorithm, False, rounds, ratio)
    if algo not in VOCABULARY_MODELS:
        raise ParameterError(f"no plan for the vocabulary's algorithm {algo!r} yet")
    return VOCABULARY_MODELS[algo](epsilon, delta, max_items, noise, count_fraction, rounds, ratio)


def vocabulary(
    epsilon: float,
    delta: float,
    *,
    algorithm: str | None = None,
    rounds: int | None = None,
    ratio: float | None = None,
    max_items: int | str = "auto",
    noise: str = "gaussian",
    count_fraction: float = 0.5,
    persons: int | None = None,
    items_each: int = 1,
    confidence: float = 0.9,
) -> Prediction:
    """What :func:`userdp.releases.vocabulary` will release with the selection ``algorithm`` (``"weighted"``,
    the release's default, ``"policy"`` with Laplace noise, or ``"sips"``, DP-SIPS with ``rounds`` and
    ``ratio``): the weight (in persons who keep one item each) an item needs to be released with probability
    1/2 and ``confidence`` (``inf`` where no weight reaches it: the policy caps an item's weight at its cutoff);
    with ``persons``, the probability that an item held by that many persons, each
    keeping ``items_each`` items (at most ``max_items`` of them kept), is released; and the quantiles of its
    count's noise. Every figure comes from the algorithm's own plan and calibration
    (:func:`userdp.vocabulary.plan_vocabulary`, :func:`userdp.vocabulary.plan_sips_vocabulary`:
    threshold, noise, DP-SIPS's rounds, the budget split); the basis says what each probability is.

    With ``max_items="auto"`` (the release's default) the bound is chosen from the data, so no plan can know
    it: the figures are those of the grid's largest candidate (8192) with the selection's 2% of epsilon
    taken out. The threshold and the counts' noise grow with the bound, so they bound the chosen one's from
    above (the counts' noise by far: pass the bound you expect to plan it closer)."""
    from ..vocabulary import person_weights

    confidences(confidence)
    model = vocabulary_model(epsilon, delta, algorithm=algorithm, rounds=rounds, ratio=ratio, max_items=max_items,
                             noise=noise, count_fraction=count_fraction)  # fmt: skip
    plan = model.plan
    cal = plan["calibration"]
    unit = cal.unit
    need = {}
    top = max(c.threshold + 64 * c.scale for c in model.rounds)
    for p in (0.5, float(confidence)):
        if model.release_probability(top) < p:  # no weight reaches p (the policy's cutoff caps an item's weight)
            need[p] = math.inf
            continue
        lo, hi = 0, top
        while hi - lo > 1:  # smallest weight with release probability >= p
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if model.release_probability(mid) >= p else (mid, hi)
        need[p] = hi / unit
    thresholds = tuple(c.threshold / unit for c in model.rounds)
    extra = {
        "algorithm": plan["algorithm"],
        "weight needed": need,
        "threshold": thresholds[0] if len(thresholds) == 1 else thresholds,
        "new item released at most": cal.delta_new,
    }
    if plan["algorithm"] == "sips":
        sds = tuple(c.noise_sd_in_persons for c in model.rounds)
        extra.update(rounds=plan["rounds"], ratio=plan["ratio"], noise_sd=sds)
    if plan["auto"]:
        extra["max_items"] = (f"auto: chosen from the data (2% of epsilon); these figures are for the largest "
                              f"candidate, {plan['max_items']}, and bound the chosen bound's from above")  # fmt: skip
    if persons is not None:
        w = int(person_weights(max(1, min(int(items_each), plan["max_items"])), cal.noise, unit))
        extra["release probability"] = model.release_probability(int(persons) * w)
    qs: dict[float, float] = {}
    if plan["count_fraction"] > 0:  # one person adds 1 to at most max_items counts: the key counts' noise
        qs = key_counts(plan["epsilon_counts"], plan["delta_counts"], l0=plan["max_items"], linf=1, noise=noise,
                        confidence=confidence).quantiles  # fmt: skip
    return Prediction(
        "vocabulary",
        "|noise| of one released item's person count",
        qs,
        noise == "laplace",
        f"{plan['algorithm']}: {model.modelled}; the counts' lattice noise"
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
    algorithm: str | None = None,
    rounds: int | None = None,
    ratio: float | None = None,
) -> float:
    """The smallest epsilon (to 1%) at which an item held by ``persons`` persons, each keeping
    ``items_each`` items, is released with at least ``probability`` (:func:`vocabulary`, with the same
    ``algorithm``, ``rounds`` and ``ratio``)."""
    if int(persons) < 1:
        raise ParameterError("persons must be at least 1")
    kw = {"max_items": max_items, "noise": noise, "count_fraction": count_fraction, "algorithm": algorithm,
          "rounds": rounds, "ratio": ratio}  # fmt: skip
    vocabulary_model(1.0, delta, **kw)  # every refusal of the parameters before the search
    return smallest_epsilon(
        lambda e: vocabulary(e, delta, persons=persons, items_each=items_each, **kw).extra["release probability"]
        >= probability,
        lo=1e-2,
    )

"""Tight composition across releases (issue 19): privacy loss distributions (PLDs) from Google's
``dp-accounting`` package, where a release's loss is known.

Basic composition adds the epsilons and the deltas. That is tight for one release but not for several: the
privacy losses of independent releases add as random variables, and their sum concentrates. A PLD is the
distribution of that loss; composing releases convolves their PLDs, and the smallest epsilon for a stated
delta is read off the result (Meiser & Mohammadi 2018; Koskela et al. 2020; Doroshenko et al. 2022; the
``dp_accounting.pld`` package implements it with a pessimistic discretization, so every figure it returns
is an upper bound).

A release states its loss as a tuple of :class:`PrivacyLoss` parts (composed sequentially):

* :class:`DPLoss` ``(epsilon, delta)``: any ``(epsilon, delta)``-DP mechanism. Its PLD is the worst case over
  all such mechanisms (a randomized response with a delta atom), so composing these is the optimal
  composition of ``(epsilon_i, delta_i)``-DP mechanisms (Kairouz, Oh & Viswanath 2015; Murtagh & Vadhan
  2016): never worse than basic composition.
* :class:`DiscreteLaplaceLoss` ``(scale_steps, sensitivity_steps)``: userdp's lattice Laplace on a scalar
  (``P[x] ∝ exp(-|x| / t)`` on the lattice, a query that moves by at most ``s`` steps after rounding). Its
  exact PLD.
* :class:`LaplaceLoss`, :class:`GaussianLoss`, :class:`DiscreteGaussianLoss` and
  :class:`RandomizedResponseLoss`: the continuous Laplace and Gaussian mechanisms, the discrete Gaussian on
  the integers and k-ary randomized response, each with its exact PLD from ``dp-accounting``, for callers
  stating their own mechanisms. The exponential mechanism has no PLD independent of its scores; it is
  stated as the :class:`DPLoss` ``(epsilon, 0)`` it guarantees.

* :class:`ZCDPLoss` ``(rho, delta, tv, epsilon)``: a release within total variation ``tv`` of a mechanism
  that is ``delta``-approximately ``rho``-zCDP (Bun & Steinke 2016, Definition 8.1): userdp's Gaussian
  releases, whose discrete Gaussian is ``rho``-zCDP exactly (Canonne, Kamath & Steinke 2020, Proposition 5
  and Theorem 14) and whose sampler cuts its tails at ``32 sigma`` (the ``tv``). It has no PLD; zCDP
  composes by adding ``rho`` (and ``delta`` and ``tv``), and :func:`zcdp_epsilon` converts the sum.

The ledger (:class:`~userdp.privacy.Session`) charges :func:`tight_epsilon`: every entry is composed as the
:class:`DPLoss` of its cost unless the release states its loss more exactly (``Session.charge(...,
losses=...)``, :attr:`userdp.privacy.result.Release.losses`). Most of userdp's releases are stated by their
``(epsilon, delta)`` alone: several choose their noise from the data through a private selection (the distinct count's
Laplace scale follows GEM's ``l``), so no one fixed discrete-Laplace PLD dominates them, which the PLD
composition theorem needs; and the discrete Gaussian on userdp's fine lattice (about ``2^54`` steps per
standard deviation) has no PLD ``dp-accounting`` can enumerate, while the continuous Gaussian's does not
bound it exactly. The Gaussian vocabulary release and the Gaussian per-key counts state a :class:`ZCDPLoss`.

**How the total is computed (and why it never understates the loss).** The losses are split into a zCDP
group (the :class:`ZCDPLoss` parts; with them the pure parts, ``epsilon``-DP being ``epsilon^2 / 2``-zCDP,
Bun & Steinke 2016, Proposition 1.4, where that helps) and a PLD group (the rest). The PLD group is composed
by ``dp-accounting`` with its *pessimistic* estimates: every PLD is built with ``pessimistic_estimate=True``
(the default of its constructors; losses are rounded *up* to the value discretization interval ``1e-4``,
and the mass cut from the tails is counted as an infinite loss), so the epsilon it reads off at a delta is
an upper bound on the true one. The zCDP group's ``rho`` add (Bun & Steinke 2016, Lemma 2.3 and section 8,
adaptively) and are converted by Canonne, Kamath & Steinke (2020), Corollary 13, minimized over the Renyi
orders numerically (every order gives a valid bound, so the minimization can only loosen it). The two groups are
combined by basic composition at the best of a fixed grid of splits of ``delta``: the releases of the two
groups interleave, and concurrent composition is no worse than sequential composition (Vadhan & Wang 2021;
Lyu 2022; Vadhan & Zhang 2023). The result is the smallest of these candidates and of basic composition
(every candidate is an upper bound, so their minimum is one).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np

from ..errors import ParameterError
from .params import check_delta

__all__ = [
    "DPLoss",
    "DiscreteGaussianLoss",
    "DiscreteLaplaceLoss",
    "GaussianLoss",
    "LaplaceLoss",
    "RandomizedResponseLoss",
    "PrivacyLoss",
    "ZCDPLoss",
    "basic_epsilon",
    "loss_from_dict",
    "tight_epsilon",
    "zcdp_delta_bound",
    "zcdp_epsilon",
]

_INTERVAL = 1e-4  # dp-accounting's default value discretization (pessimistic: rounds losses up)


@dataclass(frozen=True)
class PrivacyLoss:
    """One part of a release's privacy loss (see the module)."""

    def epsilon_delta(self) -> tuple[float, float]:  # pragma: no cover - abstract
        raise NotImplementedError

    def to_dict(self) -> dict:
        return {"kind": type(self).__name__, **asdict(self)}


@dataclass(frozen=True)
class DPLoss(PrivacyLoss):
    """Any ``(epsilon, delta)``-DP mechanism."""

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.epsilon) and self.epsilon >= 0):
            raise ParameterError(f"a DP loss needs epsilon >= 0, got {self}")
        check_delta(self.delta, f"the delta of {self}")

    def epsilon_delta(self) -> tuple[float, float]:
        return float(self.epsilon), float(self.delta)


@dataclass(frozen=True)
class DiscreteLaplaceLoss(PrivacyLoss):
    """userdp's lattice Laplace on a scalar: noise ``P[x] ∝ exp(-|x| / scale_steps)`` on the lattice, a query
    that moves by at most ``sensitivity_steps`` lattice steps between neighbours (rounding included)."""

    scale_steps: int
    sensitivity_steps: int

    def __post_init__(self) -> None:
        if self.scale_steps < 1 or self.sensitivity_steps < 0:
            raise ParameterError(f"a discrete Laplace loss needs a scale >= 1 and a sensitivity >= 0, got {self}")

    def epsilon_delta(self) -> tuple[float, float]:
        return self.sensitivity_steps / self.scale_steps, 0.0


@dataclass(frozen=True)
class LaplaceLoss(PrivacyLoss):
    """The continuous Laplace mechanism of scale ``scale`` on a query of l1 sensitivity ``sensitivity``."""

    scale: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        if not (self.scale > 0 and math.isfinite(self.scale)) or not self.sensitivity >= 0:
            raise ParameterError(f"a Laplace loss needs a scale > 0 and a sensitivity >= 0, got {self}")

    def epsilon_delta(self) -> tuple[float, float]:
        return self.sensitivity / self.scale, 0.0


def _gaussian_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    """The Gaussian mechanism's exact delta at epsilon (Balle & Wang 2018, Theorem 8)."""
    from scipy.special import ndtr

    if sensitivity == 0:
        return 0.0
    a = sensitivity / (2 * sigma)
    b = epsilon * sigma / sensitivity
    return float(ndtr(a - b) - math.exp(epsilon) * ndtr(-a - b))


@dataclass(frozen=True)
class GaussianLoss(PrivacyLoss):
    """The continuous Gaussian mechanism of standard deviation ``sigma`` on a query of l2 sensitivity
    ``sensitivity``. Basic composition charges it at ``epsilon`` with its exact delta there."""

    sigma: float
    sensitivity: float = 1.0
    epsilon: float = 1.0

    def __post_init__(self) -> None:
        if not (self.sigma > 0 and math.isfinite(self.sigma)) or not self.sensitivity >= 0 or not self.epsilon >= 0:
            raise ParameterError(f"a Gaussian loss needs sigma > 0, a sensitivity >= 0 and epsilon >= 0, got {self}")

    def epsilon_delta(self) -> tuple[float, float]:
        return float(self.epsilon), _gaussian_delta(self.sigma, self.sensitivity, self.epsilon)


@dataclass(frozen=True)
class DiscreteGaussianLoss(PrivacyLoss):
    """The discrete Gaussian on the integers, ``P[x] ∝ exp(-x^2 / (2 sigma^2))``, on a query that moves by at
    most ``sensitivity`` integer steps (Canonne, Kamath & Steinke 2020). ``dp-accounting`` enumerates its PLD
    (truncated at ``truncation_bound``, default ``ceil(11.6 sigma)``, the tail mass counted in delta), so
    ``sigma`` must be moderate (at most 10^6). Basic composition charges it at ``epsilon`` with the delta
    its own PLD gives there. It is for mechanisms callers state; userdp's own lattice Gaussian runs at about
    2^54 steps per sigma, beyond enumeration."""

    sigma: float
    sensitivity: int = 1
    epsilon: float = 1.0

    def __post_init__(self) -> None:
        if not (0 < self.sigma <= 1e6) or self.sensitivity < 0 or not self.epsilon >= 0:
            raise ParameterError(f"a discrete Gaussian loss needs 0 < sigma <= 1e6, sensitivity >= 0, got {self}")

    def epsilon_delta(self) -> tuple[float, float]:
        eps = float(self.epsilon)
        pld = _pld(self)  # its own PLD's delta at epsilon (an upper bound, pessimistic discretization)
        return eps, float(pld.get_delta_for_epsilon(eps))


@dataclass(frozen=True)
class RandomizedResponseLoss(PrivacyLoss):
    """k-ary randomized response: the true value with probability ``1 - noise``, else a uniform draw among
    the ``buckets`` values (neighbours replace one value); ``epsilon = ln(1 + (1 - noise) buckets / noise)``."""

    noise: float
    buckets: int

    def __post_init__(self) -> None:
        if not 0 < self.noise <= 1 or int(self.buckets) < 2:
            raise ParameterError(f"randomized response needs noise in (0, 1] and at least 2 buckets, got {self}")

    def epsilon_delta(self) -> tuple[float, float]:
        return math.log1p((1 - self.noise) * self.buckets / self.noise), 0.0


# Renyi orders alpha = 1 + e^u for the zCDP conversions: any order gives a valid bound (a fixed grid only loosens it)
_U = np.linspace(-16.0, 16.0, 6401)
_ORDERS = 1.0 + np.exp(_U)
_LOG_ORDERS = np.log(_ORDERS)
_LOG1M_INV = np.log1p(-1.0 / _ORDERS)


def zcdp_delta_bound(rho: float, epsilon: float) -> float:
    """An upper bound on the delta at ``epsilon`` of a ``rho``-zCDP mechanism: Canonne, Kamath & Steinke (2020),
    Corollary 13, ``delta = exp((a - 1)(a rho - epsilon)) (a - 1)^(a-1) / a^a`` minimized over the Renyi orders
    ``a > 1`` (:func:`userdp.noise.zcdp_delta`, the conversion userdp's Gaussian calibrations use; each order
    gives a valid bound, so a numerical minimum can only be looser)."""
    from ..noise import zcdp_delta

    return float(zcdp_delta(float(rho), float(epsilon)))


def zcdp_epsilon(rho: float, delta: float, refine: bool = True) -> float:
    """An upper bound on the smallest epsilon at which a ``rho``-zCDP mechanism is ``(epsilon, delta)``-DP:
    Canonne, Kamath & Steinke (2020), Corollary 13 solved for epsilon,
    ``epsilon = a rho + (ln(1 / delta) - ln a) / (a - 1) + ln(1 - 1 / a)``, minimized over a fixed grid of
    Renyi orders ``a > 1`` and then refined between the grid's neighbours of the best one (each order gives a
    valid epsilon, so the minimization can only loosen it). ``inf`` for ``delta <= 0`` and ``rho > 0``."""
    from scipy.optimize import minimize_scalar

    rho, delta = float(rho), float(delta)
    if rho <= 0:
        return 0.0
    if not delta > 0:
        return math.inf
    if delta >= 1:
        return 0.0
    log_inv = math.log(1.0 / delta)
    a = _ORDERS
    eps = a * rho + (log_inv - _LOG_ORDERS) / (a - 1) + _LOG1M_INV
    k = int(np.argmin(eps))
    best = float(eps[k])
    if not refine:
        return max(best, 0.0)

    def at(u: float) -> float:  # a = 1 + e^u
        b = 1.0 + math.exp(u)
        return b * rho + (log_inv - math.log(b)) / (b - 1) + math.log1p(-1.0 / b)

    lo, hi = _U[max(k - 1, 0)], _U[min(k + 1, _U.size - 1)]
    res = minimize_scalar(at, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12})
    return max(min(best, float(at(float(res.x)))), 0.0)


@dataclass(frozen=True)
class ZCDPLoss(PrivacyLoss):
    """A release within total variation ``tv`` of a mechanism that is ``delta``-approximately ``rho``-zCDP
    (Bun & Steinke 2016, Definition 8.1: outside events of probability at most ``delta``, its Renyi
    divergences of order ``a`` are at most ``a rho``). For every ``e >= 0`` it is
    ``(e, delta + zcdp_delta(rho, e) + (1 + e^e) tv)``-DP; basic composition charges it at ``epsilon``.
    The three parameters add under composition, adaptively."""

    rho: float
    delta: float = 0.0
    tv: float = 0.0
    epsilon: float = 1.0

    def __post_init__(self) -> None:
        for name in ("rho", "tv", "epsilon"):
            v = float(getattr(self, name))
            if not (math.isfinite(v) and v >= 0):
                raise ParameterError(f"a zCDP loss needs a finite {name} >= 0, got {self}")
        check_delta(self.delta, f"the delta of {self}")

    def delta_at(self, epsilon: float) -> float:
        """The delta at ``epsilon`` this loss implies (an upper bound)."""
        e = float(epsilon)
        return self.delta + zcdp_delta_bound(self.rho, e) + (1 + math.exp(min(e, 700.0))) * self.tv

    def epsilon_delta(self) -> tuple[float, float]:
        return float(self.epsilon), min(self.delta_at(self.epsilon), 1.0)


_KINDS = {
    c.__name__: c
    for c in (
        DPLoss, DiscreteLaplaceLoss, LaplaceLoss, GaussianLoss, DiscreteGaussianLoss, RandomizedResponseLoss, ZCDPLoss
    )
}


def loss_from_dict(d: dict) -> PrivacyLoss:
    """Inverse of :meth:`PrivacyLoss.to_dict`."""
    d = dict(d)
    kind = _KINDS.get(d.pop("kind", None))
    if kind is None:
        raise ParameterError("unknown privacy loss in the ledger")
    return kind(**d)


_PESSIMISTIC = True  # dp-accounting's pessimistic estimates: every PLD is an upper bound on the true loss


def _dp_pld(epsilon: float, delta: float):
    """The worst-case PLD of an ``(epsilon, delta)``-DP mechanism (Kairouz, Oh & Viswanath 2015; dp-accounting's
    ``from_privacy_parameters``, section 3.5 of its supplement): loss ``+inf`` with probability ``delta``,
    ``epsilon`` with ``(1 - delta) / (1 + e^-epsilon)``, ``-epsilon`` with ``(1 - delta) / (1 + e^epsilon)``, each
    loss rounded *up* to the discretization interval (pessimistic)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    pmf: dict[int, float] = {}
    up = math.ceil(epsilon / _INTERVAL)
    down = math.ceil(-epsilon / _INTERVAL)
    pmf[up] = (1 - delta) / (1 + math.exp(-epsilon))
    pmf[down] = pmf.get(down, 0.0) + (1 - delta) / (1 + math.exp(epsilon))
    return pld.PrivacyLossDistribution.create_from_rounded_probability(pmf, delta, _INTERVAL)


@lru_cache(maxsize=256)
def _pld(loss: PrivacyLoss):
    from dp_accounting.pld import privacy_loss_distribution as pld

    kw = {"pessimistic_estimate": _PESSIMISTIC, "value_discretization_interval": _INTERVAL}
    if isinstance(loss, DiscreteLaplaceLoss):
        if loss.sensitivity_steps == 0:
            return _dp_pld(0.0, 0.0)
        return pld.from_discrete_laplace_mechanism(
            parameter=1.0 / loss.scale_steps, sensitivity=int(loss.sensitivity_steps), **kw
        )
    if isinstance(loss, LaplaceLoss):
        return pld.from_laplace_mechanism(loss.scale, sensitivity=loss.sensitivity, **kw)
    if isinstance(loss, GaussianLoss):
        return pld.from_gaussian_mechanism(loss.sigma, sensitivity=loss.sensitivity, **kw)
    if isinstance(loss, DiscreteGaussianLoss):
        return pld.from_discrete_gaussian_mechanism(loss.sigma, sensitivity=int(loss.sensitivity), **kw)
    if isinstance(loss, RandomizedResponseLoss):
        return pld.from_randomized_response(loss.noise, int(loss.buckets), **kw)
    if isinstance(loss, ZCDPLoss):
        raise ParameterError("a zCDP loss has no privacy loss distribution (compose it by rho)")
    eps, delta = loss.epsilon_delta()
    return _dp_pld(eps, delta)


def basic_epsilon(losses: Iterable[PrivacyLoss]) -> tuple[float, float]:
    """Basic composition: the epsilons and the deltas add."""
    eps = delta = 0.0
    for loss in losses:
        e, d = loss.epsilon_delta()
        eps, delta = eps + e, delta + d
    return eps, delta


def _pure_epsilon(loss: PrivacyLoss) -> float | None:
    """The epsilon of a pure-DP part (``None`` if the part is not pure)."""
    if isinstance(loss, DPLoss | DiscreteLaplaceLoss | LaplaceLoss | RandomizedResponseLoss):
        eps, delta = loss.epsilon_delta()
        return eps if delta == 0 else None
    return None


def _composed_pld(losses: list[PrivacyLoss]):
    """The pessimistic PLD composition of ``losses`` (identical parts composed together by ``self_compose``);
    ``None`` for no loss."""
    counts: dict[PrivacyLoss, int] = {}
    for loss in losses:
        counts[loss] = counts.get(loss, 0) + 1
    total = None
    for loss, k in counts.items():
        part = _pld(loss) if k == 1 else _pld(loss).self_compose(k)
        total = part if total is None else total.compose(part)
    return total


def _pld_epsilon(losses: list[PrivacyLoss], delta: float) -> float:
    """The epsilon at ``delta`` of the pessimistic PLD composition of ``losses``; 0 for no loss."""
    total = _composed_pld(losses)
    return 0.0 if total is None else float(total.get_epsilon_for_delta(delta))


def _zcdp_group_epsilon(rho: float, delta_parts: float, tv: float, delta: float, refine: bool = True) -> float:
    """An epsilon at ``delta`` for a ``delta_parts``-approximately ``rho``-zCDP composition within total variation
    ``tv`` (:class:`ZCDPLoss`): ``zcdp_epsilon(rho, delta - delta_parts - (1 + e^e) tv)``, the ``tv`` term taken
    at an ``e`` the result must not exceed."""
    room = delta - delta_parts
    if not room > 0:
        return math.inf
    if tv == 0:
        return zcdp_epsilon(rho, room, refine)
    e0 = zcdp_epsilon(rho, room, refine)
    cap = e0 + 1.0
    e1 = zcdp_epsilon(rho, room - (1 + math.exp(min(cap, 700.0))) * tv, refine)
    return e1 if e1 <= cap else math.inf


_SPLITS = tuple(np.concatenate([np.geomspace(1e-4, 0.5, 13), 1 - np.geomspace(1e-4, 0.5, 13)[::-1][1:]]))


def tight_epsilon(losses: Iterable[PrivacyLoss], delta: float) -> float:
    """The smallest epsilon (an upper bound: see the module for how it is computed) for which the sequential
    composition of ``losses`` is ``(epsilon, delta)``-DP; ``inf`` when ``delta`` is below what the parts' own
    deltas allow. Never more than basic composition's epsilon when ``delta`` is at least the deltas' sum.

    Candidates (each an upper bound; the smallest is returned): the PLD composition with every
    :class:`ZCDPLoss` stated by its ``(epsilon, delta)``; the zCDP group (the :class:`ZCDPLoss` parts, and the
    pure parts as ``epsilon^2 / 2``-zCDP or left in the PLD group) and the PLD group composed by basic composition
    at each of a fixed grid of splits of ``delta``; basic composition."""
    losses = list(losses)
    delta = check_delta(delta)
    if not losses:
        return 0.0
    zc = [x for x in losses if isinstance(x, ZCDPLoss)]
    rest = [x for x in losses if not isinstance(x, ZCDPLoss)]
    as_dp = rest + [DPLoss(*x.epsilon_delta()) for x in zc]
    eps = _pld_epsilon(as_dp, delta)
    if zc:
        rho = sum(x.rho for x in zc)
        dparts = sum(x.delta for x in zc)
        tv = sum(x.tv for x in zc)
        pure = [x for x in rest if _pure_epsilon(x) is not None]
        groups = [(rest, rho)]
        if pure:  # the pure parts join the zCDP group as epsilon^2 / 2
            others = [x for x in rest if _pure_epsilon(x) is None]
            groups.append((others, rho + sum(_pure_epsilon(x) ** 2 / 2 for x in pure)))
        for pld_part, r in groups:
            if not pld_part:
                eps = min(eps, _zcdp_group_epsilon(r, dparts, tv, delta))
                continue
            composed = _composed_pld(pld_part)
            best, best_dz = math.inf, None
            for f in _SPLITS:  # the grid of orders alone (valid), then the best split refined
                dz = delta * f
                pld_eps = float(composed.get_epsilon_for_delta(delta - dz))
                total = _zcdp_group_epsilon(r, dparts, tv, dz, False) + pld_eps
                if total < best:
                    best, best_dz = total, dz
            eps = min(eps, best)
            if best_dz is not None and math.isfinite(best):
                dz = best_dz
                refined = _zcdp_group_epsilon(r, dparts, tv, dz) + float(composed.get_epsilon_for_delta(delta - dz))
                eps = min(eps, refined)
    basic, basic_delta = basic_epsilon(losses)
    if delta >= basic_delta:  # basic composition holds too: report the better of the two
        eps = min(eps, basic)
    return max(eps, 0.0)

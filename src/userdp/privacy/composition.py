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

The ledger (:class:`~userdp.privacy.Session`) composes every entry as the :class:`DPLoss` of its cost
unless the caller states its loss more exactly (``Session.charge(..., losses=...)``). userdp's own releases
are stated as :class:`DPLoss`: several choose their noise from the data through a private selection (the
distinct count's Laplace scale follows GEM's ``l``), so no one fixed discrete-Laplace PLD dominates them,
which the PLD composition theorem needs; and the discrete Gaussian on userdp's fine lattice (about ``2^54``
steps per standard deviation) has no PLD ``dp-accounting`` can enumerate, while the continuous Gaussian's
does not bound it exactly.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from functools import lru_cache

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
    "basic_epsilon",
    "loss_from_dict",
    "tight_epsilon",
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


_KINDS = {
    c.__name__: c
    for c in (DPLoss, DiscreteLaplaceLoss, LaplaceLoss, GaussianLoss, DiscreteGaussianLoss, RandomizedResponseLoss)
}


def loss_from_dict(d: dict) -> PrivacyLoss:
    """Inverse of :meth:`PrivacyLoss.to_dict`."""
    d = dict(d)
    kind = _KINDS.get(d.pop("kind", None))
    if kind is None:
        raise ParameterError("unknown privacy loss in the ledger")
    return kind(**d)


@lru_cache(maxsize=256)
def _pld(loss: PrivacyLoss):
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld

    if isinstance(loss, DiscreteLaplaceLoss):
        if loss.sensitivity_steps == 0:
            return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(0.0, 0.0), _INTERVAL)
        return pld.from_discrete_laplace_mechanism(
            parameter=1.0 / loss.scale_steps,
            sensitivity=int(loss.sensitivity_steps),
            value_discretization_interval=_INTERVAL,
        )
    if isinstance(loss, LaplaceLoss):
        return pld.from_laplace_mechanism(
            loss.scale, sensitivity=loss.sensitivity, value_discretization_interval=_INTERVAL
        )
    if isinstance(loss, GaussianLoss):
        return pld.from_gaussian_mechanism(loss.sigma, sensitivity=loss.sensitivity,
                                           value_discretization_interval=_INTERVAL)  # fmt: skip
    if isinstance(loss, DiscreteGaussianLoss):
        return pld.from_discrete_gaussian_mechanism(loss.sigma, sensitivity=int(loss.sensitivity),
                                                    value_discretization_interval=_INTERVAL)  # fmt: skip
    if isinstance(loss, RandomizedResponseLoss):
        return pld.from_randomized_response(loss.noise, int(loss.buckets), value_discretization_interval=_INTERVAL)
    eps, delta = loss.epsilon_delta()
    return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, delta), _INTERVAL)


def basic_epsilon(losses: Iterable[PrivacyLoss]) -> tuple[float, float]:
    """Basic composition: the epsilons and the deltas add."""
    eps = delta = 0.0
    for loss in losses:
        e, d = loss.epsilon_delta()
        eps, delta = eps + e, delta + d
    return eps, delta


def tight_epsilon(losses: Iterable[PrivacyLoss], delta: float) -> float:
    """The smallest epsilon (an upper bound, from the pessimistic PLDs) for which the sequential composition
    of ``losses`` is ``(epsilon, delta)``-DP; ``inf`` when ``delta`` is below what the parts' own deltas
    allow. Never more than basic composition's epsilon when ``delta`` is at least the deltas' sum."""
    losses = list(losses)
    delta = check_delta(delta)
    if not losses:
        return 0.0
    total = _pld(losses[0])
    for loss in losses[1:]:
        total = total.compose(_pld(loss))
    eps = float(total.get_epsilon_for_delta(delta))
    basic, basic_delta = basic_epsilon(losses)
    if delta >= basic_delta:  # basic composition holds too: report the better of the two
        eps = min(eps, basic)
    return max(eps, 0.0)

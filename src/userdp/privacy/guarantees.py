"""Typed privacy guarantees (Imola et al., CCS 2024, Table 1) and the conversions between them.

Every mechanism in userdp returns one of these objects with its result. Each states its
*neighbour relation* explicitly, because sensitivities follow from it:

* ``ADD_REMOVE_USER`` -- two datasets differ by adding or removing one user's whole data
  (unbounded central DP; Knop & Steinke's "person-level"; Ghazi et al.'s heatmaps);
* ``REPLACE_USER`` -- one user's data is replaced by arbitrary other data (Imola et al.,
  Definition 2.2; for the bounded central model with ``|K_i| = m`` fixed);
* ``ANY_TWO_INPUTS`` -- the local model: the mechanism runs on one user's data and any two inputs
  are neighbours (Definitions 2.1, 3.1, 5.1).

For metric guarantees the neighbour relation is weighted by ``d_EM`` between the changed user's
normalized histograms (Definitions 3.1, 3.2, 5.1, 5.2).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from ..errors import ParameterError

__all__ = [
    "Neighbours",
    "Model",
    "Guarantee",
    "PureDP",
    "ApproxDP",
    "ItemMetricDP",
    "EMDMetricDP",
    "DiscreteEMDDP",
    "group_privacy",
    "alpha_from_targets",
    "metric_from_dp",
    "compose",
]


class Neighbours(StrEnum):
    """Which pairs of datasets a guarantee protects."""

    ADD_REMOVE_USER = "add or remove one user"
    REPLACE_USER = "replace one user's data"
    ANY_TWO_INPUTS = "any two inputs of one user (local model)"
    ITEM = "change one item (item level)"


class Model(StrEnum):
    """Local model (each user randomizes their own data) or central model (a trusted curator)."""

    LOCAL = "local"
    CENTRAL = "central"


def _pos(x: float, name: str) -> float:
    x = float(x)
    if not (math.isfinite(x) and x > 0):
        raise ParameterError(f"{name} must be a positive finite number, got {x!r}")
    return x


def _delta(x: float) -> float:
    x = float(x)
    if not 0 <= x < 1:
        raise ParameterError(f"delta must lie in [0, 1), got {x!r}")
    return x


class Guarantee:
    """Base class of all guarantees."""

    def describe(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def budget_key(self) -> tuple:
        """Guarantees with equal keys compose with each other and are charged to the same budget."""
        raise NotImplementedError

    def compose(self, other: Guarantee) -> Guarantee:
        """Basic (sequential) composition with another guarantee of the same kind."""
        raise NotImplementedError

    def fits_within(self, budget: Guarantee, rtol: float = 1e-12) -> bool:
        """True if this guarantee is at least as strong as ``budget`` (same kind)."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.describe()


def _le(a: float, b: float, rtol: float) -> bool:
    return a <= b * (1 + rtol) + 1e-300


@dataclass(frozen=True)
class ApproxDP(Guarantee):
    """``(epsilon, delta)``-DP under a stated neighbour relation (Definitions 2.1 / 2.2)."""

    epsilon: float
    delta: float = 0.0
    neighbours: Neighbours = Neighbours.ADD_REMOVE_USER

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _pos(self.epsilon, "epsilon"))
        object.__setattr__(self, "delta", _delta(self.delta))
        object.__setattr__(self, "neighbours", Neighbours(self.neighbours))

    @property
    def pure(self) -> bool:
        return self.delta == 0

    def describe(self) -> str:
        head = f"{self.epsilon:.4g}-DP" if self.delta == 0 else f"({self.epsilon:.4g}, {self.delta:.3g})-DP"
        return (
            f"{head} for {self.neighbours.value}: the output distribution changes by at "
            f"most a factor e^{self.epsilon:.4g}" + (f" plus {self.delta:.3g}" if self.delta else "")
        )

    def budget_key(self) -> tuple:
        return ("dp", self.neighbours)

    def compose(self, other: Guarantee) -> ApproxDP:
        if not isinstance(other, ApproxDP) or other.neighbours != self.neighbours:
            raise TypeError(f"cannot compose {self!r} with {other!r}")
        cls = PureDP if (self.pure and other.pure) else ApproxDP
        if cls is PureDP:
            return PureDP(self.epsilon + other.epsilon, neighbours=self.neighbours)
        return ApproxDP(self.epsilon + other.epsilon, min(self.delta + other.delta, 1 - 1e-300), self.neighbours)

    def fits_within(self, budget: Guarantee, rtol: float = 1e-12) -> bool:
        return (
            isinstance(budget, ApproxDP)
            and budget.neighbours == self.neighbours
            and _le(self.epsilon, budget.epsilon, rtol)
            and _le(self.delta, budget.delta, rtol)
        )

    def group(self, k: int) -> ApproxDP:
        """Group privacy for ``k`` users (see :func:`group_privacy`)."""
        e, d = group_privacy(self.epsilon, self.delta, k)
        return ApproxDP(e, d, self.neighbours) if d else PureDP(e, neighbours=self.neighbours)


@dataclass(frozen=True)
class PureDP(ApproxDP):
    """``epsilon``-DP (``delta = 0``)."""

    def __init__(self, epsilon: float, neighbours: Neighbours = Neighbours.ADD_REMOVE_USER):
        super().__init__(epsilon, 0.0, neighbours)

    def __repr__(self) -> str:
        return f"PureDP(epsilon={self.epsilon!r}, neighbours={self.neighbours.name})"


@dataclass(frozen=True)
class ItemMetricDP(Guarantee):
    """Item-level local ``(alpha, delta)``-``d_X``-DP (Definition 2.3): for items ``x, x'`` and any
    output set, ``P[A(x) in O] <= e^(alpha d(x,x')) P[A(x') in O] + delta``."""

    alpha: float
    delta: float = 0.0
    metric: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", _pos(self.alpha, "alpha"))
        object.__setattr__(self, "delta", _delta(self.delta))

    def describe(self) -> str:
        return (
            f"item-level {self.alpha:.4g}-d_X-DP{' (' + self.metric + ')' if self.metric else ''}: two items at "
            f"distance d give outputs indistinguishable up to e^({self.alpha:.4g} d)"
            + (f" plus {self.delta:.3g}" if self.delta else "")
        )

    def budget_key(self) -> tuple:
        return ("item-dx", self.metric)

    def compose(self, other: Guarantee) -> ItemMetricDP:
        if not isinstance(other, ItemMetricDP) or other.metric != self.metric:
            raise TypeError(f"cannot compose {self!r} with {other!r}")
        return ItemMetricDP(self.alpha + other.alpha, self.delta + other.delta, self.metric)

    def fits_within(self, budget: Guarantee, rtol: float = 1e-12) -> bool:
        return (
            isinstance(budget, ItemMetricDP)
            and budget.metric == self.metric
            and _le(self.alpha, budget.alpha, rtol)
            and _le(self.delta, budget.delta, rtol)
        )


@dataclass(frozen=True)
class EMDMetricDP(Guarantee):
    """``(alpha, delta)``-``d_EM``-DP (Imola et al., Definitions 3.1 and 3.2).

    Local model: any two datasets ``K, K'`` of one user (equal sizes if ``bounded``) give outputs
    indistinguishable up to ``exp(alpha d_EM(K~, K~'))`` plus ``delta``. Central model (bounded):
    changing one user's dataset ``K_i`` to ``K'_i`` of the same public size ``m`` costs
    ``exp(alpha d_EM(K~_i, K~'_i))`` plus ``delta``.

    ``curve`` optionally gives a tighter per-distance guarantee ``d -> (eps(d), delta(d))`` (for example
    from the shuffling accountant); without it the per-distance guarantee is ``(alpha d, delta)``.
    """

    alpha: float
    delta: float = 0.0
    model: Model = Model.LOCAL
    bounded: bool = True
    metric: str = ""
    curve: Callable[[float], tuple[float, float]] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", _pos(self.alpha, "alpha"))
        object.__setattr__(self, "delta", _delta(self.delta))
        object.__setattr__(self, "model", Model(self.model))
        if self.model is Model.CENTRAL and not self.bounded:
            raise ParameterError(
                "unbounded central d_EM-DP is not defined (Imola et al., section 3); use BoundedEMDReduction, "
                "which gives discrete central d_EM-DP"
            )

    def at_distance(self, d: float) -> tuple[float, float]:
        """``(epsilon, delta)`` protecting two datasets at ``d_EM = d`` (per-distance guarantee)."""
        d = float(d)
        if not 0 <= d <= 1:
            raise ParameterError("d_EM lies in [0, 1] in normalized units")
        if self.curve is not None:
            return self.curve(d)
        return self.alpha * d, self.delta

    def user_level_dp(self, d_max: float = 1.0) -> ApproxDP:
        """The implied user-level DP: ``(alpha d_max, delta)`` with ``d_max`` the largest ``d_EM`` (section 8)."""
        eps, delta = self.at_distance(d_max)
        nb = Neighbours.ANY_TWO_INPUTS if self.model is Model.LOCAL else Neighbours.REPLACE_USER
        return ApproxDP(eps, delta, nb) if delta else PureDP(eps, neighbours=nb)

    def describe(self) -> str:
        who = "two datasets of one user" if self.model is Model.LOCAL else "two global datasets that differ in one user"
        size = " of equal size" if self.bounded else ""
        return (
            f"({self.alpha:.4g}, {self.delta:.3g})-{'bounded' if self.bounded else 'unbounded'} {self.model.value} "
            f"d_EM-DP: any {who}{size} whose data differ by d_EM = d are indistinguishable up to "
            f"e^({self.alpha:.4g} d)" + (f" plus {self.delta:.3g}" if self.delta else "")
        )

    def budget_key(self) -> tuple:
        return ("emd", self.model, self.bounded, self.metric)

    def compose(self, other: Guarantee) -> EMDMetricDP:
        if not isinstance(other, EMDMetricDP) or other.budget_key() != self.budget_key():
            raise TypeError(f"cannot compose {self!r} with {other!r}")
        return EMDMetricDP(self.alpha + other.alpha, self.delta + other.delta, self.model, self.bounded, self.metric)

    def fits_within(self, budget: Guarantee, rtol: float = 1e-12) -> bool:
        return (
            isinstance(budget, EMDMetricDP)
            and budget.budget_key() == self.budget_key()
            and _le(self.alpha, budget.alpha, rtol)
            and _le(self.delta, budget.delta, rtol)
        )


@dataclass(frozen=True)
class DiscreteEMDDP(Guarantee):
    """``(epsilon, delta, r)``-discrete ``d_EM``-DP (Definitions 5.1 and 5.2): datasets (of any sizes)
    at ``d_EM <= r`` are ``(epsilon, delta)``-indistinguishable; farther pairs by group privacy
    (Fact 5.1, see :meth:`at_distance`)."""

    epsilon: float
    delta: float
    r: float
    model: Model = Model.LOCAL
    metric: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _pos(self.epsilon, "epsilon"))
        object.__setattr__(self, "delta", _delta(self.delta))
        r = float(self.r)
        if not 0 < r <= 1:
            raise ParameterError(f"r must lie in (0, 1], got {self.r!r}")
        object.__setattr__(self, "r", r)
        object.__setattr__(self, "model", Model(self.model))

    def at_distance(self, d: float) -> tuple[float, float]:
        """Fact 5.1 (group privacy over ``k = ceil(d / r)`` steps of ``d_EM <= r``).

        The paper states ``delta * exp(k)`` for the delta term; the group-privacy bound is
        ``delta * (e^(k eps) - 1) / (e^eps - 1)``, which is below the paper's only when
        ``eps <= 1``. userdp uses the correct bound (see :func:`group_privacy`).
        """
        d = float(d)
        if not 0 <= d <= 1:
            raise ParameterError("d_EM lies in [0, 1] in normalized units")
        k = max(1, math.ceil(d / self.r - 1e-12))
        return group_privacy(self.epsilon, self.delta, k)

    def describe(self) -> str:
        who = "one user's datasets" if self.model is Model.LOCAL else "global datasets that differ in one user"
        return (
            f"({self.epsilon:.4g}, {self.delta:.3g}, r={self.r:.4g})-discrete {self.model.value} d_EM-DP: "
            f"{who} (of any sizes) at d_EM <= {self.r:.4g} are indistinguishable up to e^{self.epsilon:.4g}"
            + (f" plus {self.delta:.3g}" if self.delta else "")
            + "; at d_EM = d, use k = ceil(d/r) steps of group privacy"
        )

    def budget_key(self) -> tuple:
        return ("discrete-emd", self.model, self.r, self.metric)

    def compose(self, other: Guarantee) -> DiscreteEMDDP:
        if not isinstance(other, DiscreteEMDDP) or other.budget_key() != self.budget_key():
            raise TypeError(f"cannot compose {self!r} with {other!r}")
        return DiscreteEMDDP(self.epsilon + other.epsilon, self.delta + other.delta, self.r, self.model, self.metric)

    def fits_within(self, budget: Guarantee, rtol: float = 1e-12) -> bool:
        return (
            isinstance(budget, DiscreteEMDDP)
            and budget.budget_key() == self.budget_key()
            and _le(self.epsilon, budget.epsilon, rtol)
            and _le(self.delta, budget.delta, rtol)
        )


# --------------------------------------------------------------------------------------------
# Conversions
# --------------------------------------------------------------------------------------------


def group_privacy(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """``(epsilon, delta)``-DP for neighbours implies ``(k eps, delta (e^(k eps) - 1)/(e^eps - 1))`` for
    datasets ``k`` steps apart (Dwork & Roth 2014, section 2.3, in its tight geometric-sum form)."""
    k = int(k)
    if k < 1:
        raise ParameterError("k must be at least 1")
    e = float(epsilon)
    if delta == 0:
        return k * e, 0.0
    d = delta * math.expm1(k * e) / math.expm1(e)
    return k * e, min(d, 1.0)


def alpha_from_targets(targets: Iterable[tuple[float, float, float]]) -> tuple[float, int]:
    """Choose ``alpha`` from protection targets (Imola et al., section 3, "Setting the privacy parameters").

    Each target ``(epsilon, q, tau)`` says: "a change of a ``tau`` fraction of a user's data by average
    distance ``q`` must be protected at level ``epsilon``". Such a change has ``d_EM <= q tau``, so
    ``alpha = min epsilon / (q tau)`` protects every target. Returns ``(alpha, index of the binding target)``.

    Example: the paper's ``[(0.2, 0.08, 1/30), (0.2, 0.008, 1)]`` gives ``alpha = 25``.
    """
    best, arg = math.inf, -1
    for i, (eps, q, tau) in enumerate(targets):
        eps = _pos(eps, "epsilon")
        if not (0 < q <= 1 and 0 < tau <= 1):
            raise ParameterError(f"target {i}: q and tau must lie in (0, 1], got q={q}, tau={tau}")
        a = eps / (q * tau)
        if a < best:
            best, arg = a, i
    if arg < 0:
        raise ParameterError("at least one protection target is needed")
    return best, arg


def metric_from_dp(guarantee: ApproxDP, d_min: float) -> tuple[float, float]:
    """Section 8: an ``(epsilon, delta)``-DP mechanism is ``(epsilon / d_min, delta)``-metric DP, where
    ``d_min`` is the smallest distance between distinct inputs. Returns ``(alpha, delta)``."""
    d_min = _pos(d_min, "d_min")
    return guarantee.epsilon / d_min, guarantee.delta


def compose(guarantees: Iterable[Guarantee]) -> Guarantee:
    """Basic composition of a sequence of guarantees of one kind."""
    it = iter(guarantees)
    try:
        total = next(it)
    except StopIteration:
        raise ParameterError("nothing to compose") from None
    for g in it:
        total = total.compose(g)
    return total

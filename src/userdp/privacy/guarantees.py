"""Typed privacy guarantees (Imola et al., CCS 2024, Table 1) and the conversions between them.

Every mechanism in userdp returns one of these objects with its result. Each states its
*neighbour relation* explicitly, because sensitivities follow from it:

* ``ADD_REMOVE_USER`` -- two datasets differ by adding or removing one user's whole data
  (unbounded central DP; Knop & Steinke's "person-level"; Ghazi et al.'s heatmaps);
* ``REPLACE_USER`` -- one user's data is replaced by arbitrary other data (Imola et al.,
  Definition 2.2);
* ``REPLACE_USER_SAME_SIZE`` -- one user's data is replaced by other data of the same size (the bounded
  central model, ``|K_i| = m`` fixed and public: Definition 3.2's bounded d_EM-DP read at ``d_EM = 1``);
* ``ANY_TWO_INPUTS`` -- the local model: the mechanism runs on one user's data and any two inputs
  are neighbours (Definitions 2.1, 3.1, 5.1);
* ``TWO_INPUTS_SAME_SIZE`` -- the local model restricted to two inputs of the same size (bounded local
  d_EM-DP, Definition 3.1, read at ``d_EM = 1``).

A same-size relation protects fewer pairs than its unqualified one, so a release under it is never charged
to a budget for the unqualified relation (:func:`convert_to_budget`).

For metric guarantees the neighbour relation is weighted by ``d_EM`` between the changed user's
normalized histograms (Definitions 3.1, 3.2, 5.1, 5.2).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from ..errors import BudgetExceededError, ParameterError
from .params import check_delta

__all__ = [
    "Neighbours",
    "Model",
    "Guarantee",
    "PureDP",
    "ApproxDP",
    "ShuffleDP",
    "ItemMetricDP",
    "EMDMetricDP",
    "DiscreteEMDDP",
    "ZCDP",
    "ZCDP_TV_ALLOWANCE",
    "group_privacy",
    "alpha_from_targets",
    "metric_from_dp",
    "compose",
    "convert_to_budget",
    "guarantee_kind",
]


class Neighbours(StrEnum):
    """Which pairs of datasets a guarantee protects."""

    ADD_REMOVE_USER = "add or remove one user"
    REPLACE_USER = "replace one user's data"
    REPLACE_USER_SAME_SIZE = "replace one user's data by data of the same size"
    ANY_TWO_INPUTS = "any two inputs of one user (local model)"
    TWO_INPUTS_SAME_SIZE = "any two inputs of one user of the same size (local model)"
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
    return check_delta(x)


class Guarantee:
    """Base class of all guarantees."""

    def describe(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def budget_key(self) -> tuple:
        """Guarantees with equal keys compose with each other and are charged to the same budget."""
        raise NotImplementedError

    def compose(self, other: Guarantee) -> Guarantee:
        """Basic (sequential) composition with another guarantee of the same kind: the main parameters
        (epsilons or alphas) add, the deltas add. Raises :class:`BudgetExceededError` if the deltas sum to
        1 or more (such a composition protects nothing), and ``TypeError`` for another kind."""
        raise NotImplementedError

    def fits_within(self, budget: Guarantee, rtol: float = 1e-12) -> bool:
        """True if this guarantee is at least as strong as ``budget`` (same kind)."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.describe()


def _le(a: float, b: float, rtol: float) -> bool:
    return a <= b * (1 + rtol) + 1e-300


def _composed_delta(a: Guarantee, b: Guarantee) -> float:
    """``delta_a + delta_b`` for basic composition, refused once it reaches 1.

    A composition whose deltas sum to 1 or more protects nothing: ``delta >= 1`` holds for every
    mechanism. No budget (``delta < 1``) can pay for it, so this is a :class:`BudgetExceededError`,
    not a guarantee with ``delta`` rounded to just below 1 (which would claim more than was proven).
    """
    total = a.delta + b.delta  # type: ignore[attr-defined]
    if not total < 1.0:
        raise BudgetExceededError(
            f"composing {_headline(a)} with {_headline(b)} gives delta = {total:.3g} >= 1, which protects "
            "nothing; no budget can pay for it"
        )
    return total


def _headline(g: Guarantee) -> str:
    """The first clause of ``g.describe()`` (for example ``(1, 1e-06)-DP for replace one user's data``)."""
    return g.describe().split(":")[0]


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
        if self.pure and other.pure:
            return PureDP(self.epsilon + other.epsilon, neighbours=self.neighbours)
        return ApproxDP(self.epsilon + other.epsilon, _composed_delta(self, other), self.neighbours)

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
class ShuffleDP(ApproxDP):
    """``(epsilon, delta)``-DP of the *analyzer's view* in the shuffle model: ``parties`` users each send
    ``messages_per_coordinate`` shares in ``Z_modulus`` of every one of ``coordinates`` integer coordinates
    (values scaled by ``scaling``), a trusted shuffler permutes all messages, and the guarantee holds for the
    multiset the analyzer receives (Balle, Bell, Gascón & Nissim, CCS 2020; Ghazi et al., AAAI 2023,
    appendix F).

    ``epsilon`` is that of the central mechanism the sums simulate (the distributed noise adds up to its
    discrete Laplace noise exactly); ``delta`` is what the split-and-mix summation adds: the analyzer's view
    is within ``delta / (1 + e^epsilon)`` in total variation of a function of the noisy sums alone (the bound
    proven in :mod:`userdp.heatmaps.shuffle`, summed over the ``coordinates``). Composes and is charged as
    :class:`ApproxDP` with the same neighbour relation."""

    parties: int = 0
    messages_per_coordinate: int = 0
    modulus: int = 0
    coordinates: int = 0
    scaling: int = 0

    def describe(self) -> str:
        return (
            f"({self.epsilon:.4g}, {self.delta:.3g})-DP for {self.neighbours.value} in the shuffle model: the "
            f"analyzer's view of the shuffled messages ({self.parties} parties, {self.messages_per_coordinate} "
            f"shares in Z_{self.modulus} per coordinate, {self.coordinates} coordinates, scaling "
            f"{self.scaling}) changes by at most a factor e^{self.epsilon:.4g} plus {self.delta:.3g}"
        )


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
        return ItemMetricDP(self.alpha + other.alpha, _composed_delta(self, other), self.metric)

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
                "unbounded central d_EM-DP is not defined (Imola et al., section 3); use BoundedEMDReduction "
                "(--samples S; samples=S), which gives discrete central d_EM-DP"
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
        """The implied user-level DP: ``(alpha d_max, delta)`` with ``d_max`` the largest ``d_EM`` (section 8),
        for any two inputs of one user (local model) or for replacing one user's data (central), by data of the
        same size when the guarantee is bounded (the qualifier is kept: a bounded guarantee says nothing of
        two datasets of different sizes)."""
        eps, delta = self.at_distance(d_max)
        if self.model is Model.LOCAL:
            nb = Neighbours.TWO_INPUTS_SAME_SIZE if self.bounded else Neighbours.ANY_TWO_INPUTS
        else:
            nb = Neighbours.REPLACE_USER_SAME_SIZE  # the central model is bounded (EMDMetricDP refuses otherwise)
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
        return EMDMetricDP(
            self.alpha + other.alpha, _composed_delta(self, other), self.model, self.bounded, self.metric
        )

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
        return DiscreteEMDDP(
            self.epsilon + other.epsilon, _composed_delta(self, other), self.r, self.model, self.metric
        )

    def fits_within(self, budget: Guarantee, rtol: float = 1e-12) -> bool:
        return (
            isinstance(budget, DiscreteEMDDP)
            and budget.budget_key() == self.budget_key()
            and _le(self.epsilon, budget.epsilon, rtol)
            and _le(self.delta, budget.delta, rtol)
        )


ZCDP_TV_ALLOWANCE = 1e-150
"""The total variation a zCDP budget tolerates (:class:`ZCDP`): userdp's lattice Gaussian cuts its tails at
``32 sigma``, so a Gaussian release is ``rho``-zCDP only up to a total variation of about ``1e-204`` per
release; a budget of ``1e-150`` leaves room for ``10^54`` of them."""


@dataclass(frozen=True)
class ZCDP(Guarantee):
    """``delta``-approximately ``rho``-zCDP under a stated neighbour relation (Bun & Steinke 2016, Definitions
    1.1 and 8.1; ``delta = 0`` is plain zCDP): outside events of probability at most ``delta``, the Renyi
    divergence of order ``a`` between the outputs on two neighbours is at most ``a rho``; and the mechanism is
    within total variation ``tv`` of one that is (its samplers' cut tails). Composition adds all three,
    adaptively (Bun & Steinke 2016, Lemma 2.3 and section 8). It implies ``(e, delta + delta_rho(e) + (1 +
    e^e) tv)``-DP for every ``e`` (Canonne, Kamath & Steinke 2020, Corollary 13:
    :func:`userdp.privacy.composition.zcdp_epsilon`).

    A ``Session`` with a zCDP budget charges the zCDP guarantee a release *states* (its
    :class:`~userdp.privacy.composition.ZCDPLoss` parts, ``Release.losses``): an ``(epsilon, delta)``-DP
    guarantee implies no zCDP guarantee."""

    rho: float
    delta: float = 0.0
    neighbours: Neighbours = Neighbours.ADD_REMOVE_USER
    tv: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", _pos(self.rho, "rho"))
        object.__setattr__(self, "delta", _delta(self.delta))
        object.__setattr__(self, "neighbours", Neighbours(self.neighbours))
        tv = float(self.tv)
        if not (math.isfinite(tv) and 0 <= tv < 1e-100):
            raise ParameterError(f"a zCDP guarantee's total variation must lie in [0, 1e-100), got {self.tv!r}")
        object.__setattr__(self, "tv", tv)

    def describe(self) -> str:
        head = f"{self.rho:.4g}-zCDP" if self.delta == 0 else f"{self.delta:.3g}-approximately {self.rho:.4g}-zCDP"
        return (
            f"{head} for {self.neighbours.value}: the Renyi divergence of order a between the outputs is at most "
            f"{self.rho:.4g} a" + (f" outside events of probability {self.delta:.3g}" if self.delta else "")
            + (f", up to a total variation of {self.tv:.3g}" if self.tv else "")
        )

    def budget_key(self) -> tuple:
        return ("zcdp", self.neighbours)

    def compose(self, other: Guarantee) -> ZCDP:
        if not isinstance(other, ZCDP) or other.neighbours != self.neighbours:
            raise TypeError(f"cannot compose {self!r} with {other!r}")
        return ZCDP(self.rho + other.rho, _composed_delta(self, other), self.neighbours, self.tv + other.tv)

    def fits_within(self, budget: Guarantee, rtol: float = 1e-12) -> bool:
        return (
            isinstance(budget, ZCDP)
            and budget.neighbours == self.neighbours
            and _le(self.rho, budget.rho, rtol)
            and _le(self.delta, budget.delta, rtol)
            and self.tv <= budget.tv
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
    """Basic composition of a sequence of guarantees of one kind (see :meth:`Guarantee.compose`; raises
    :class:`BudgetExceededError` if the deltas sum to 1 or more)."""
    it = iter(guarantees)
    try:
        total = next(it)
    except StopIteration:
        raise ParameterError("nothing to compose") from None
    for g in it:
        total = total.compose(g)
    return total


# --------------------------------------------------------------------------------------------
# Charging a release to a budget of one kind
# --------------------------------------------------------------------------------------------

_AR, _REPLACE, _LOCAL = Neighbours.ADD_REMOVE_USER, Neighbours.REPLACE_USER, Neighbours.ANY_TWO_INPUTS
_REPLACE_SAME, _LOCAL_SAME = Neighbours.REPLACE_USER_SAME_SIZE, Neighbours.TWO_INPUTS_SAME_SIZE
_SAME_SIZE = (
    "it protects only two datasets in which the user holds the same number of items (a bounded guarantee: the "
    "sizes are public), and a budget for this relation protects all of them; charge it to a budget for "
    f"{_REPLACE_SAME.value} (`--budget replace-same-size:EPSILON[:DELTA]`)"
)
_CENTRAL = "a central guarantee does not protect a user's data from the curator who computes the release"

# Why a user-level guarantee under one relation implies nothing under another (see convert_to_budget).
_NO_IMPLICATION = {
    (_REPLACE, _AR): (
        "a replace-one-user guarantee does not bound adding or removing a user (a mechanism may publish the "
        "exact number of users and still be 0-DP for replacing one)"
    ),
    (_LOCAL, _AR): (
        "a local-model guarantee protects what a user's report says, not whether the user took part (the number "
        "of reports may be exact)"
    ),
    (_AR, _LOCAL): _CENTRAL,
    (_REPLACE, _LOCAL): _CENTRAL,
    (_REPLACE_SAME, _AR): (
        "a replace-one-user guarantee does not bound adding or removing a user (a mechanism may publish the "
        "exact number of users and still be 0-DP for replacing one)"
    ),
    (_LOCAL_SAME, _AR): (
        "a local-model guarantee protects what a user's report says, not whether the user took part (the number "
        "of reports may be exact)"
    ),
    (_REPLACE_SAME, _REPLACE): _SAME_SIZE,
    (_LOCAL_SAME, _REPLACE): _SAME_SIZE,
    (_LOCAL_SAME, _LOCAL): _SAME_SIZE,
    (_REPLACE_SAME, _LOCAL): _CENTRAL,
    (_REPLACE_SAME, _LOCAL_SAME): _CENTRAL,
    (_REPLACE, _LOCAL_SAME): _CENTRAL,
    (_AR, _LOCAL_SAME): _CENTRAL,
}

# (release's relation, budget's relation) -> how many steps of the release's relation make one of the budget's
# (1: the budget's pairs are among the release's; 2: replacing a user is removing it, then adding it back)
_IMPLIES = {
    (_LOCAL, _REPLACE): 1,
    (_LOCAL, _REPLACE_SAME): 1,
    (_LOCAL, _LOCAL_SAME): 1,
    (_LOCAL_SAME, _REPLACE_SAME): 1,
    (_REPLACE, _REPLACE_SAME): 1,
    (_AR, _REPLACE): 2,
    (_AR, _REPLACE_SAME): 2,
}


def guarantee_kind(g: Guarantee) -> str:
    """The kind of guarantee ``g`` is, in words: what a budget of this kind protects (for example
    ``user-level DP for replace one user's data``)."""
    metric = f" (metric {g.metric})" if getattr(g, "metric", "") else ""
    if isinstance(g, ApproxDP):
        if g.neighbours is Neighbours.ITEM:
            return "item-level DP (change one item)"
        return f"user-level DP for {g.neighbours.value}"
    if isinstance(g, ZCDP):
        return f"user-level zCDP for {g.neighbours.value}"
    if isinstance(g, EMDMetricDP):
        return f"{'bounded' if g.bounded else 'unbounded'} {g.model.value} d_EM-DP{metric}"
    if isinstance(g, DiscreteEMDDP):
        return f"discrete {g.model.value} d_EM-DP with r = {g.r:.4g}{metric}"
    if isinstance(g, ItemMetricDP):
        return f"item-level d_X-DP{metric}"
    return type(g).__name__


def _dp(epsilon: float, delta: float, neighbours: Neighbours) -> ApproxDP:
    return ApproxDP(epsilon, delta, neighbours) if delta else PureDP(epsilon, neighbours=neighbours)


def _refuse(g: Guarantee, budget: Guarantee, reason: str, implied: Guarantee | None = None) -> BudgetExceededError:
    via = f" (which implies {_headline(implied)})" if implied is not None and implied is not g else ""
    return BudgetExceededError(
        f"a release with {_headline(g)}{via} cannot be charged to a budget of {guarantee_kind(budget)}: {reason}"
    )


def _user_level(g: Guarantee, budget: Guarantee) -> ApproxDP:
    """A user-level guarantee implied by ``g``: itself, or a d_EM-DP guarantee at the largest distance."""
    if isinstance(g, ApproxDP):
        if g.neighbours is Neighbours.ITEM:
            raise _refuse(g, budget, "an item-level guarantee protects one item, not a user's data")
        return g
    if isinstance(g, EMDMetricDP):
        return g.user_level_dp(1.0)
    if isinstance(g, DiscreteEMDDP):
        eps, delta = g.at_distance(1.0)
        if not delta < 1.0:
            raise _refuse(
                g, budget, f"at d_EM = 1 ({math.ceil(1 / g.r - 1e-12)} steps of group privacy) its delta reaches 1"
            )
        return _dp(eps, delta, _LOCAL if g.model is Model.LOCAL else _REPLACE)
    if isinstance(g, ItemMetricDP):
        raise _refuse(g, budget, "an item-level guarantee protects one item, not a user's data")
    raise _refuse(g, budget, f"no conversion is known for {type(g).__name__}")


def _to_relation(g: Guarantee, budget: ApproxDP) -> ApproxDP:
    target = budget.neighbours
    if target is Neighbours.ITEM:
        if isinstance(g, ApproxDP) and g.neighbours is Neighbours.ITEM:
            return g
        raise _refuse(g, budget, "only item-level (epsilon, delta)-DP releases can be charged to it")
    ul = _user_level(g, budget)
    source = ul.neighbours
    if source is target:
        return ul
    steps = _IMPLIES.get((source, target))
    if steps == 1:
        return _dp(ul.epsilon, ul.delta, target)
    if steps == 2:  # replacing a user (by any data, or by data of the same size): remove it, then add it
        eps, delta = group_privacy(ul.epsilon, ul.delta, 2)
        if not delta < 1.0:
            raise _refuse(g, budget, "replacing a user is two add/remove steps, and then its delta reaches 1")
        return _dp(eps, delta, target)
    hint = (
        " A budget for replace one user's data accepts every user-level release of unbounded data; one for "
        "replacing it by data of the same size accepts every user-level release."
    )
    raise _refuse(g, budget, _NO_IMPLICATION[(source, target)] + "." + hint, implied=ul)


def _same_metric(g: Guarantee, budget: Guarantee) -> None:
    if g.metric != budget.metric:  # type: ignore[attr-defined]
        raise _refuse(g, budget, "its metric differs from the budget's (alpha is per unit of the metric)")


def _to_emd(g: Guarantee, budget: EMDMetricDP) -> EMDMetricDP:
    if not isinstance(g, EMDMetricDP):
        raise _refuse(
            g,
            budget,
            "only d_EM-DP releases can be charged to it (user-level and discrete d_EM-DP guarantees bound datasets "
            "at a small d_EM by a fixed epsilon > 0, not by alpha d_EM)",
        )
    _same_metric(g, budget)
    if g.model is Model.CENTRAL and budget.model is Model.LOCAL:
        raise _refuse(g, budget, _NO_IMPLICATION[(_REPLACE, _LOCAL)])
    if g.bounded is False or budget.bounded is True:  # unbounded covers bounded pairs; bounded covers only bounded
        return EMDMetricDP(g.alpha, g.delta, budget.model, budget.bounded, budget.metric)
    raise _refuse(g, budget, "a bounded guarantee covers only datasets of equal size")


def _to_discrete(g: Guarantee, budget: DiscreteEMDDP) -> DiscreteEMDDP:
    if isinstance(g, DiscreteEMDDP):
        eps, delta = g.at_distance(budget.r)
    elif isinstance(g, EMDMetricDP) and not g.bounded:
        eps, delta = g.alpha * budget.r, g.delta  # the headline alpha: valid at every distance
    else:
        raise _refuse(
            g,
            budget,
            "only discrete d_EM-DP and unbounded d_EM-DP releases can be charged to it (discrete d_EM-DP covers "
            "datasets of any sizes)",
        )
    _same_metric(g, budget)
    if g.model is Model.CENTRAL and budget.model is Model.LOCAL:
        raise _refuse(g, budget, _NO_IMPLICATION[(_REPLACE, _LOCAL)])
    if not delta < 1.0:
        raise _refuse(g, budget, f"at d_EM <= {budget.r:.4g} its delta reaches 1")
    return DiscreteEMDDP(eps, delta, budget.r, budget.model, budget.metric)


def convert_to_budget(guarantee: Guarantee, budget: Guarantee) -> Guarantee:
    """What a release with ``guarantee`` costs in a budget of the kind of ``budget``.

    A :class:`~userdp.privacy.Session` (and a ``--ledger`` file) protects ONE kind of guarantee, for
    example ``(epsilon, delta)``-DP for replace one user's data. Every release is charged by this
    function: it returns a guarantee of the budget's kind that ``guarantee`` implies, or refuses.
    This is the only place where userdp converts between kinds.

    **User-level budgets** (:class:`ApproxDP` under one neighbour relation). A d_EM-DP guarantee is
    first read at the largest distance ``d_EM = 1`` (normalized units; Imola et al., section 8):
    :meth:`EMDMetricDP.user_level_dp` for ``(alpha, delta)``-d_EM-DP, and
    :meth:`DiscreteEMDDP.at_distance` (``ceil(1/r)`` steps of group privacy) for discrete d_EM-DP.
    The local model then gives "any two inputs of one user", the central model "replace one user's
    data". The user-level ``(eps, delta)`` is then charged as

    ::

        release is DP for        budget add/remove   budget replace                budget local
        add or remove one user   (eps, delta)        (2 eps, (1 + e^eps) delta)    refused
        replace one user         refused             (eps, delta)                  refused
        local (any two inputs)   refused             (eps, delta)                  (eps, delta)

    Derivations:

    * add/remove -> replace. Replacing user ``i``'s data ``D_i`` by ``D_i'`` is two add/remove steps
      (remove ``D_i``, then add ``D_i'``). Group privacy for ``k = 2`` (:func:`group_privacy`):
      ``P[M(D) in S] <= e^eps (e^eps P[M(D') in S] + delta) + delta``, that is
      ``(2 eps, delta (e^(2 eps) - 1) / (e^eps - 1)) = (2 eps, (1 + e^eps) delta)``. Both parts are tight
      (tested exactly).
    * local -> replace. A local-model release applies a randomizer to each user's data separately
      and publishes (a post-processing of) the reports. Replacing one user's data changes the input of
      one randomizer, whose outputs for any two inputs are ``(eps, delta)``-indistinguishable; the other
      reports keep their law and are independent of it. So the release is ``(eps, delta)``-DP for
      replace-one-user.
    * replace -> add/remove is refused: a replace-one-user guarantee says nothing about whether a
      user took part (publishing the exact number of users is 0-DP for replace).
    * local -> add/remove is refused for the same reason: the reports show how many users took part.
    * add/remove or replace -> local is refused: a central guarantee does not protect a user's data
      from the curator who computes the release.
    * item-level guarantees (:class:`ItemMetricDP`, or DP for ``Neighbours.ITEM``) are refused: they
      protect one item, not a user's data.

    So a budget for replace one user's data accepts every user-level release; add/remove and local
    budgets accept only their own relation (and d_EM-DP releases that imply it).

    **d_EM-DP budgets** (:class:`EMDMetricDP` of one model, boundedness and metric): ``(alpha, delta)``
    charges as is when

    * it is of the budget's kind;
    * it is local and the budget central (bounded): per distance, the local -> replace argument above;
    * it is unbounded and the budget bounded: equal-size pairs are some of all pairs.

    Refused: central -> local (as above), bounded -> unbounded (equal sizes only), another metric
    (``alpha`` is per unit of the metric), and user-level or discrete d_EM-DP guarantees (they bound
    datasets at a small ``d_EM`` by a fixed ``epsilon > 0``, not by ``alpha d_EM -> 0``).

    **Discrete d_EM-DP budgets** (:class:`DiscreteEMDDP` of one model, radius ``r`` and metric):

    * discrete ``(eps', delta', r')``: pairs at ``d_EM <= r`` are ``ceil(r / r')`` steps of at most
      ``r'`` (Fact 5.1), so the cost is :meth:`DiscreteEMDDP.at_distance` ``(r)`` (``(eps', delta')`` if
      ``r' >= r``);
    * unbounded ``(alpha, delta)``-d_EM-DP: pairs at ``d_EM <= r`` cost at most ``(alpha r, delta)``
      (the headline ``alpha``; a per-distance curve is not used);
    * local -> central as above; refused: central -> local, bounded d_EM-DP (discrete d_EM-DP covers
      datasets of any sizes), another metric, user-level DP.

    **Item-level budgets** accept only their own kind (same metric).

    Parameters
    ----------
    guarantee : Guarantee
        What a release delivers.
    budget : Guarantee
        The budget (only its kind matters: relation, model, metric, ``r``).

    Returns
    -------
    Guarantee
        The cost, of the budget's kind (``guarantee`` itself when it is already of that kind).

    Raises
    ------
    BudgetExceededError
        If ``guarantee`` implies nothing of the budget's kind (the message says why), or if the
        converted delta reaches 1.

    Examples
    --------
    >>> from userdp.privacy import PureDP, Neighbours, convert_to_budget
    >>> convert_to_budget(PureDP(1.0), PureDP(4.0, neighbours=Neighbours.REPLACE_USER))
    PureDP(epsilon=2.0, neighbours=REPLACE_USER)
    """
    if isinstance(budget, ApproxDP):
        return _to_relation(guarantee, budget)
    if isinstance(budget, EMDMetricDP):
        return _to_emd(guarantee, budget)
    if isinstance(budget, DiscreteEMDDP):
        return _to_discrete(guarantee, budget)
    if isinstance(budget, ZCDP):
        raise _refuse(
            guarantee,
            budget,
            "a zCDP budget is charged by the zCDP guarantee a release states (its privacy losses), and an "
            "(epsilon, delta)-DP guarantee implies none",
        )
    if isinstance(budget, ItemMetricDP):
        if isinstance(guarantee, ItemMetricDP):
            _same_metric(guarantee, budget)
            return guarantee
        raise _refuse(guarantee, budget, "only item-level d_X-DP releases can be charged to it")
    raise ParameterError(f"a budget must be a privacy guarantee, got {budget!r}")

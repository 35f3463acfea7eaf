"""Accounting for d_EM-DP: generalized amplification by shuffling and the unbounded reduction.

Imola, Roy Chowdhury & Chaudhuri (CCS 2024):

* **Theorem 4.3** (:func:`theorem_4_3`) -- shuffling the outputs of an item-level ``alpha_0``-``d_X``-DP
  randomizer over ``M`` items: changing the items by a distance vector ``v`` costs
  ``alpha <= ||v||_0 ln(1 + tanh(alpha_0 ||v||_1 / (2 ||v||_0)) C)`` with
  ``C = 8 sqrt(e^alpha_0 ln(4 ||v||_0 / delta) / M) + 8 e^alpha_0 / M``, and delta-term ``delta e^alpha``;
  valid only for ``alpha_0 < ln(M / (16 ln(4 M / delta)))``.
  (``(e^a - 1)/(e^a + 1) = tanh(a/2)``.)
* **Theorem 4.4** (:func:`shuffle_guarantee`) -- PrivEMDItemWise is ``(alpha, delta')``-bounded d_EM-DP
  with ``alpha = sup_w h(M; m, m w) / w`` and ``delta' = delta e^{h(M; m, m)}``; ``M = m`` (local) or
  ``m n`` (central). Because ``h`` is concave in ``w`` with ``h(0) = 0`` (appendix B.3), ``h(w)/w`` is
  non-increasing and the supremum is the limit ``w -> 0``:

      alpha = h'(0) = m alpha_0 C / 2,   C = 8 sqrt(e^alpha_0 ln(4 m / delta) / M) + 8 e^alpha_0 / M,

  a closed form (checked numerically in the tests).
* **The per-distance curve** ``eps(d) = h(M; m, m d)`` (with delta-term ``delta e^{eps(d)}``) is what a
  change of ``d_EM = d`` actually costs; it is below ``alpha d`` for every ``d > 0``.
* **Calibration** (:func:`calibrate`) -- the largest ``alpha_0`` meeting a target ``(alpha, delta')``,
  solving for the inner ``delta`` and ``alpha_0`` together, over three routes: Theorem 4.4, the
  asymptotic Eq. (6)/(7) (certified by Theorem 4.4), and plain composition (``alpha_0 = alpha / m``,
  ``delta = 0``, always valid).
* **Targets** -- :func:`itemwise_bound` is the guarantee of PrivEMDItemWise for a given ``alpha_0`` and a
  target ``delta'``: the smallest alpha among the routes whose ``delta'`` meets the target (Theorem 4.4
  and the numerical bound with the largest inner delta that does, :func:`shuffle_guarantee_for_target`,
  :func:`numerical_guarantee_for_target`), else composition ``(m alpha_0, 0)``.
* **Section 5** -- Theorem 5.3 (:func:`reduction_alpha`, read forwards from a realized inner guarantee by
  :func:`reduction_guarantee_of`), Theorem 1.3 (:func:`min_samples`), and Fact 5.1 through
  :meth:`userdp.privacy.DiscreteEMDDP.at_distance`.

Claims are never rounded in their favour: a route meets a target ``(alpha, delta')`` only if its alpha and
delta' are at most the target *exactly*. :data:`REQUEST_RTOL` is the one documented tolerance, used by the
releases to compare a realized alpha or epsilon with the one requested (floating-point rounding of
products such as ``m (alpha / m)``); deltas get none.

A note on the paper. Theorem 4.4's ``delta'`` can be many orders of magnitude larger than the ``delta``
inside ``h`` (the paper's central example leaves ``delta'`` unstated; it is about ``1e-5`` for
``delta = 1e-12``). userdp always reports ``delta'`` and calibrates to a target ``delta'``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import ParameterError
from .guarantees import DiscreteEMDDP, EMDMetricDP, Model
from .params import check_delta

__all__ = [
    "REQUEST_RTOL",
    "ItemwiseBound",
    "itemwise_bound",
    "numerical_shuffle_guarantee",
    "NumericalShuffleBound",
    "validity_limit",
    "shuffle_constant",
    "h_bound",
    "theorem_4_3",
    "ShuffleBound",
    "shuffle_guarantee",
    "shuffle_guarantee_for_target",
    "numerical_guarantee_for_target",
    "composition_alpha",
    "asymptotic_alpha0",
    "RouteResult",
    "Calibration",
    "calibrate",
    "reduction_alpha",
    "reduction_distance",
    "reduction_epsilon",
    "reduction_guarantee",
    "reduction_guarantee_of",
    "min_samples",
    "REDUCTION_NEEDS_BOUNDED",
]


REQUEST_RTOL = 1e-9
"""Relative tolerance when a release compares a realized alpha (or epsilon) with the requested one: above
``requested * (1 + REQUEST_RTOL)`` the release is refused (or, on explicit opt-in, reported as weaker). A
realized delta may never exceed the requested delta."""

REDUCTION_NEEDS_BOUNDED = (
    "BoundedEMDReduction (--samples S; samples=S) wraps a release with a bounded d_EM-DP guarantee, and this one's "
    "is not bounded: use --model central (model='central') with --samples, or leave out --samples"
)
"""The refusal of a reduction around an inner release that is not bounded d_EM-DP (its flags and keywords)."""

# --------------------------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------------------------


def _check_delta(delta: float, name: str = "delta") -> float:
    return check_delta(delta, name, allow_zero=False)


def _check_delta_target(delta_prime: float, name: str = "delta' (the target delta of the guarantee)") -> float:
    return check_delta(delta_prime, name)


def _delta_prime(delta: float, h1: float) -> float:
    """``delta e^{h(M; m, m)}`` capped at 1: Theorem 4.4's delta' (the one formula every route reports)."""
    return min(delta * math.exp(min(h1, 700.0)), 1.0)


def _check_m(m: int, name: str = "m") -> int:
    if isinstance(m, bool) or int(m) != m or int(m) < 1:
        raise ParameterError(f"{name} must be a positive integer, got {m!r}")
    return int(m)


def _shuffled(m: int, n: int | None, model: Model | str | None) -> tuple[int, Model]:
    m = _check_m(m)
    mdl = Model(model) if model is not None else (Model.LOCAL if n is None else Model.CENTRAL)
    if mdl is Model.CENTRAL:
        if n is None:
            raise ParameterError("the central model needs n, the number of users: --n N (n=N)")
        return m * _check_m(n, "n"), mdl
    if n is not None and n != 1:
        raise ParameterError(
            "the local model shuffles one user's m items: leave out --n (n), or use --model central (model='central')"
        )
    return m, mdl


def validity_limit(M: int, delta: float) -> float:
    """Theorem 4.3's bound on ``alpha_0``: ``ln(M / (16 ln(4 M / delta)))`` (``-inf`` if ``M`` is too small)."""
    M = _check_m(M, "M")
    delta = _check_delta(delta)
    ratio = M / (16 * (math.log(4 * M) - math.log(delta)))  # no overflow of 4 M / delta for a tiny delta
    return math.log(ratio) if ratio > 0 else -math.inf


def _require_valid(alpha0: float, M: int, delta: float) -> None:
    a0 = float(alpha0)
    if not (math.isfinite(a0) and a0 > 0):
        raise ParameterError(f"alpha_0 must be positive and finite, got {alpha0!r}")
    lim = validity_limit(M, delta)
    if not a0 < lim:
        raise ParameterError(
            f"Theorem 4.3 needs alpha_0 < ln(M / (16 ln(4M/delta))) = {lim:.4g} for M = {M} shuffled items and "
            f"delta = {delta:.3g}; got alpha_0 = {a0:.4g}. Use more items (--m, --n), a larger delta (--delta), a "
            "smaller alpha_0 (--alpha0), or plain composition (always valid)."
        )


# --------------------------------------------------------------------------------------------
# The bound
# --------------------------------------------------------------------------------------------


def shuffle_constant(alpha0, x0, M: int, delta):
    """``C = 8 sqrt(e^alpha_0 ln(4 x0 / delta) / M) + 8 e^alpha_0 / M`` (vectorized)."""
    a0 = np.asarray(alpha0, dtype=np.float64)
    L = np.log(4.0 * np.asarray(x0, dtype=np.float64)) - np.log(np.asarray(delta, dtype=np.float64))
    return 8.0 * np.sqrt(np.exp(a0) * L / M) + 8.0 * np.exp(a0) / M


def h_bound(M: int, x0, x1, alpha0, delta):
    """``h(M; x0, x1) = x0 ln(1 + tanh(alpha_0 x1 / (2 x0)) C(x0))`` of Theorem 4.4 (log1p-stable, vectorized)."""
    x0 = np.asarray(x0, dtype=np.float64)
    x1 = np.asarray(x1, dtype=np.float64)
    C = shuffle_constant(alpha0, x0, M, delta)
    return x0 * np.log1p(np.tanh(np.asarray(alpha0) * x1 / (2.0 * x0)) * C)


def theorem_4_3(v_l0: int, v_l1: float, alpha0: float, delta: float, M: int) -> tuple[float, float]:
    """Theorem 4.3 for one pair of item vectors: returns ``(alpha, delta e^alpha)``.

    ``v_l0 = ||v||_0`` (items that change), ``v_l1 = ||v||_1`` (total distance moved, each at most 1),
    ``M`` the number of shuffled items. Refuses ``alpha_0`` outside the theorem's validity range.
    """
    M = _check_m(M, "M")
    delta = _check_delta(delta)
    _require_valid(alpha0, M, delta)
    k = int(v_l0)
    if k == 0:
        if v_l1 != 0:
            raise ParameterError("||v||_1 must be 0 when ||v||_0 is 0")
        return 0.0, 0.0
    if not 1 <= k <= M:
        raise ParameterError(f"||v||_0 must lie in [1, M], got {v_l0}")
    if not 0 <= v_l1 <= k:
        raise ParameterError(f"||v||_1 must lie in [0, ||v||_0] (distances are at most 1), got {v_l1}")
    a = float(h_bound(M, k, v_l1, alpha0, delta))
    return a, min(delta * math.exp(min(a, 700.0)), 1.0)


@dataclass(frozen=True)
class _AmplifiedBound:
    """Fields shared by the shuffle guarantees: ``(alpha, delta')``-bounded d_EM-DP for PrivEMDItemWise with
    item randomizer level ``alpha0``, inner ``delta``, over ``M`` shuffled items (``m`` local, ``m n``
    central)."""

    alpha0: float
    m: int
    n: int | None
    delta: float
    model: Model
    M: int
    alpha: float
    delta_prime: float

    @property
    def route(self) -> str:
        return "theorem 4.4"

    def as_dict(self) -> dict:
        return {
            "alpha": self.alpha,
            "alpha0": self.alpha0,
            "delta": self.delta,
            "delta_prime": self.delta_prime,
            "m": self.m,
            "n": self.n,
            "M": self.M,
            "model": self.model.value,
            "route": self.route,
        }


@dataclass(frozen=True)
class ShuffleBound(_AmplifiedBound):
    """Theorem 4.4 for PrivEMDItemWise with item randomizer of level ``alpha0``."""

    def curve(self, d: float | np.ndarray) -> tuple:
        """Per-distance guarantee: a change of ``d_EM = d`` costs ``(h(M; m, m d), delta e^{h(M; m, m d)})``."""
        d_arr = np.asarray(d, dtype=np.float64)
        if np.any(d_arr < 0) or np.any(d_arr > 1):
            raise ParameterError("d_EM lies in [0, 1]")
        eps = h_bound(self.M, self.m, self.m * d_arr, self.alpha0, self.delta)
        dl = np.minimum(self.delta * np.exp(np.minimum(eps, 700.0)), 1.0)
        if np.ndim(d) == 0:
            return float(eps), float(dl)
        return eps, dl

    def guarantee(self, metric: str = "") -> EMDMetricDP:
        """The typed guarantee, carrying the per-distance curve."""

        def curve(d: float) -> tuple[float, float]:
            return self.curve(d)

        return EMDMetricDP(
            self.alpha, _proper_delta(self.delta_prime), self.model, bounded=True, metric=metric, curve=curve
        )


def _proper_delta(delta_prime: float) -> float:
    """A bound with ``delta' >= 1`` protects nothing: refuse to turn it into a guarantee (capping it just
    below 1 would claim more than was proven)."""
    if not delta_prime < 1:
        raise ParameterError(
            "this amplification bound is vacuous (its delta' = delta e^h reaches 1): use a smaller delta (--delta) "
            "or alpha_0 (--alpha0), or plain composition (m alpha_0, always valid)"
        )
    return float(delta_prime)


def _alpha_44(alpha0, m: int, M: int, delta):
    return 0.5 * m * np.asarray(alpha0) * shuffle_constant(alpha0, m, M, delta)


def _h1(alpha0, m: int, M: int, delta):
    return h_bound(M, m, m, alpha0, delta)


def shuffle_guarantee(
    alpha0: float, m: int, delta: float, n: int | None = None, model: Model | str | None = None
) -> ShuffleBound:
    """Theorem 4.4: the ``(alpha, delta')``-bounded d_EM-DP of PrivEMDItemWise.

    Parameters
    ----------
    alpha0:
        Level of the item randomizer (``alpha_0``-``d_X``-DP).
    m:
        Items per user (public, fixed: bounded setting).
    delta:
        The ``delta`` inside ``h`` (the output ``delta'`` is ``delta e^{h(M; m, m)}``).
    n:
        Number of users, for the central model (shuffle of all ``m n`` items).
    """
    M, mdl = _shuffled(m, n, model)
    delta = _check_delta(delta)
    _require_valid(alpha0, M, delta)
    a = float(_alpha_44(alpha0, int(m), M, delta))
    h1 = float(_h1(alpha0, int(m), M, delta))
    return ShuffleBound(
        float(alpha0),
        int(m),
        None if mdl is Model.LOCAL else int(n),
        delta,
        mdl,
        M,
        a,
        _delta_prime(delta, h1),
    )


def composition_alpha(alpha0: float, m: int) -> float:
    """Plain composition (group privacy over the ``m`` items of a user): PrivEMDItemWise with an
    ``alpha_0``-``d_X``-DP randomizer is ``(m alpha_0, 0)``-bounded d_EM-DP, in either model."""
    return _check_m(m) * float(alpha0)


def shuffle_guarantee_for_target(
    alpha0: float, m: int, delta_prime: float, n: int | None = None, model: Model | str | None = None
) -> ShuffleBound | None:
    """Theorem 4.4 at the largest inner ``delta`` whose ``delta' = delta e^{h(M; m, m)}`` meets the target.

    For a fixed ``alpha_0`` a larger inner delta gives a smaller alpha and a wider validity range, so the
    largest feasible one is the best. Returns ``None`` when no inner delta gives ``delta' <= delta_prime``
    with ``alpha_0`` inside Theorem 4.3's range.
    """
    M, mdl = _shuffled(m, n, model)
    dp = _check_delta_target(delta_prime)
    a0 = float(alpha0)
    if not (math.isfinite(a0) and a0 > 0):
        raise ParameterError(f"alpha_0 must be positive and finite, got {alpha0!r}")
    if dp == 0:
        return None
    got = _largest_inner_delta(lambda d: np.full(np.shape(d), a0) if np.ndim(d) else a0, int(m), M, math.log(dp))
    if got is None or not a0 < validity_limit(M, got[0]):
        return None
    b = shuffle_guarantee(a0, m, got[0], n=None if mdl is Model.LOCAL else n, model=mdl)
    return b if b.delta_prime <= dp else None


def asymptotic_alpha0(alpha: float, m: int, delta: float, n: int | None = None) -> float | None:
    """Eq. (6) (local, ``n = None``) or Eq. (7) (central): the paper's asymptotic choice of ``alpha_0``.

    Returns ``None`` outside the formula's range (``alpha >= m`` resp. ``alpha sqrt(n) >= m sqrt(n)``).
    """
    m = _check_m(m)
    a = float(alpha)
    s = math.sqrt(m * (math.log(4 * m / delta) + a))  # sqrt(m ln(4 m e^alpha / delta)), log-stable
    x = a if n is None else a * math.sqrt(n)
    upper = m if n is None else m * math.sqrt(n)
    if x <= 32 * s:
        return x / (32 * s)
    if x < upper:
        return 2 * math.log(x / (16 * s))
    return None


# --------------------------------------------------------------------------------------------
# Calibration
# --------------------------------------------------------------------------------------------

_LOG_DELTA_GRID = np.linspace(math.log(1e-300), math.log(0.999), 700)


def _h1_scalar(a0: float, m: int, M: int, delta: float) -> float:
    C = 8.0 * math.sqrt(math.exp(a0) * math.log(4.0 * m / delta) / M) + 8.0 * math.exp(a0) / M
    return m * math.log1p(math.tanh(0.5 * a0) * C)


def _largest_inner_delta(alpha0_of: Callable, m: int, M: int, log_target: float) -> tuple[float, float] | None:
    """Largest inner delta with ``delta e^{h(M; m, m)} <= delta'`` (``alpha_0`` may depend on delta).

    ``delta e^{h}`` need not be monotone in delta (in the local model it can decrease), and a larger inner
    delta is always better (smaller alpha, looser validity), so scan a log grid for the last feasible
    point and refine by bisection. Returns ``(delta, alpha0)`` or ``None``.
    """
    ld = _LOG_DELTA_GRID
    d = np.exp(ld)
    a0 = alpha0_of(d)
    with np.errstate(invalid="ignore", over="ignore"):
        F = ld + _h1(a0, m, M, d) - log_target
    ok = np.isfinite(F) & (F <= 0) & np.isfinite(a0) & (a0 > 0)
    if not ok.any():
        return None
    i = int(np.flatnonzero(ok)[-1])
    lo, hi = ld[i], (ld[i + 1] if i + 1 < ld.size else ld[i])
    for _ in range(45):
        mid = 0.5 * (lo + hi)
        dm = math.exp(mid)
        a = float(alpha0_of(dm))
        f = mid + _h1_scalar(a, m, M, dm) - log_target if a > 0 else math.inf
        if f <= 0:
            lo = mid
        else:
            hi = mid
    # The search is in log space; the reported delta' is delta * e^{h} in floating point, which may round
    # above the target by an ulp. Step down until the reported value itself meets the target.
    target = math.exp(log_target)
    dl = math.exp(lo)
    for _ in range(60):
        a = float(alpha0_of(dl))
        if a > 0 and _delta_prime(dl, float(_h1(a, m, M, dl))) <= target:
            return dl, a
        dl *= 1 - 1e-9
    return None  # pragma: no cover - a few steps always suffice


@dataclass(frozen=True)
class RouteResult:
    """One calibration route: its ``alpha_0``, inner ``delta``, achieved ``(alpha, delta')``, or why it failed."""

    route: str
    valid: bool
    alpha0: float | None = None
    delta: float | None = None
    alpha: float | None = None
    delta_prime: float | None = None
    reason: str = ""


@dataclass(frozen=True)
class Calibration:
    """The result of :func:`calibrate`: the chosen route and all routes considered."""

    alpha_target: float
    delta_prime_target: float
    m: int
    n: int | None
    model: Model
    best: RouteResult
    routes: dict[str, RouteResult] = field(default_factory=dict)

    @property
    def alpha0(self) -> float:
        return float(self.best.alpha0)

    @property
    def route(self) -> str:
        return self.best.route

    @property
    def shuffle_beats_composition(self) -> bool:
        return self.best.route != "composition"

    def note(self) -> str:
        comp = self.routes["composition"].alpha0
        if not self.shuffle_beats_composition:
            return (
                f"the shuffle bound does not beat plain composition here: alpha_0 = alpha/m = {comp:.4g} with delta = 0"
            )
        return (
            f"{self.best.route} allows alpha_0 = {self.best.alpha0:.4g}, {self.best.alpha0 / comp:.3g}x the "
            f"composition value {comp:.4g}, at delta' = {self.best.delta_prime:.3g}"
        )

    def as_dict(self) -> dict:
        b = self.best
        return {
            "alpha": b.alpha,
            "alpha0": b.alpha0,
            "delta": b.delta,
            "delta_prime": b.delta_prime,
            "route": b.route,
            "model": self.model.value,
            "m": self.m,
            "n": self.n,
            "alpha_target": self.alpha_target,
            "delta_prime_target": self.delta_prime_target,
            "note": self.note(),
            "routes": {k: vars(v) for k, v in self.routes.items()},
        }


def _route_theorem_44(alpha: float, dp: float, m: int, M: int) -> RouteResult:
    """Largest alpha_0 by Theorem 4.4: bisection on alpha_0; for each, the largest inner delta."""
    log_t = math.log(dp)

    def feasible(a0: float) -> tuple[float, float] | None:
        got = _largest_inner_delta(lambda d: np.full(np.shape(d), a0) if np.ndim(d) else a0, m, M, log_t)
        if got is None:
            return None
        delta, _ = got
        if not a0 < validity_limit(M, delta):
            return None
        if float(_alpha_44(a0, m, M, delta)) > alpha:
            return None
        return got

    # The inner delta is at most delta', so alpha_0 < validity_limit(M, delta') is necessary.
    hi = validity_limit(M, dp)
    if hi <= 0:
        return RouteResult("theorem 4.4", False, reason=f"Theorem 4.3's range is empty for M = {M} shuffled items")
    lo = 0.0
    best = None
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        got = feasible(mid)
        if got is not None:
            lo, best = mid, got
        else:
            hi = mid
        if hi - lo < 1e-10 * max(hi, 1e-12):
            break
    if best is None or lo <= 0:
        return RouteResult("theorem 4.4", False, reason="no alpha_0 > 0 meets the target within Theorem 4.3's range")
    delta = best[0]
    a = float(_alpha_44(lo, m, M, delta))
    return RouteResult("theorem 4.4", True, lo, delta, a, _delta_prime(delta, float(_h1(lo, m, M, delta))))


def _route_asymptotic(alpha: float, dp: float, m: int, n: int | None, M: int) -> RouteResult:
    name = "eq. (7)" if n is not None else "eq. (6)"

    def a0_of(d):
        if np.ndim(d) == 0:
            return asymptotic_alpha0(alpha, m, float(d), n) or -1.0
        return np.array([asymptotic_alpha0(alpha, m, float(x), n) or -1.0 for x in d])

    got = _largest_inner_delta(a0_of, m, M, math.log(dp))
    if got is None:
        return RouteResult(name, False, reason="the formula gives no alpha_0 whose delta' meets the target")
    delta, a0 = got
    if not a0 < validity_limit(M, delta):
        return RouteResult(name, False, a0, delta, reason="alpha_0 is outside Theorem 4.3's validity range")
    a = float(_alpha_44(a0, m, M, delta))
    if a > alpha:
        return RouteResult(name, False, a0, delta, a, reason=f"Theorem 4.4 certifies only alpha = {a:.4g} > target")
    return RouteResult(name, True, a0, delta, a, _delta_prime(delta, float(_h1(a0, m, M, delta))))


def calibrate(
    alpha: float,
    delta_prime: float,
    m: int,
    n: int | None = None,
    model: Model | str | None = None,
    route: str = "best",
    numerical: bool = False,
) -> Calibration:
    """Largest item-level ``alpha_0`` such that PrivEMDItemWise is ``(alpha, delta')``-bounded d_EM-DP.

    Routes: ``"theorem 4.4"``, ``"eq. (6)"`` / ``"eq. (7)"`` (the asymptotic formula, kept only if Theorem
    4.4 certifies it) and ``"composition"`` (``alpha_0 = alpha / m``, ``delta = 0``; always valid). With
    ``numerical=True`` (or ``route="numerical"``) the numerical bound of :func:`numerical_shuffle_guarantee`
    is a fourth route (seconds instead of milliseconds). With ``route="best"`` (default) the valid route
    with the largest ``alpha_0`` wins. ``delta_prime = 0`` is a pure target: composition.
    """
    a = float(alpha)
    if not (math.isfinite(a) and a > 0):
        raise ParameterError(f"alpha must be positive and finite, got {alpha!r}")
    dp = _check_delta_target(delta_prime)
    M, mdl = _shuffled(m, n, model)
    m = int(m)
    nn = None if mdl is Model.LOCAL else int(n)
    asymptotic = "eq. (7)" if nn is not None else "eq. (6)"
    if dp == 0:  # a pure target: composition is the only route with delta' = 0
        pure = "a pure target (delta' = 0): only composition has delta' = 0"
        routes = {
            "theorem 4.4": RouteResult("theorem 4.4", False, reason=pure),
            asymptotic: RouteResult(asymptotic, False, reason=pure),
            "composition": RouteResult("composition", True, a / m, 0.0, a, 0.0),
        }
        numerical = False
        if route == "numerical":
            raise ParameterError(f"route 'numerical' is not valid here: {pure}")
    else:
        routes = {
            "theorem 4.4": _route_theorem_44(a, dp, m, M),
            asymptotic: _route_asymptotic(a, dp, m, nn, M),
            "composition": RouteResult("composition", True, a / m, 0.0, a, 0.0),
        }
    if numerical or route == "numerical":
        th = routes["theorem 4.4"]
        routes["numerical"] = _route_numerical(a, dp, m, nn, M, th.alpha0 if th.valid else None)
    if route == "best":
        best = max((r for r in routes.values() if r.valid), key=lambda r: r.alpha0)
    else:
        key = {"eq6": "eq. (6)", "eq7": "eq. (7)", "theorem": "theorem 4.4"}.get(route, route)
        if key not in routes:
            raise ParameterError(f"unknown route {route!r}; --route (route=) must be one of: best, {', '.join(routes)}")
        best = routes[key]
        if not best.valid:
            raise ParameterError(
                f"route {key!r} is not valid here: {best.reason}; --route best (route='best') picks the best valid one"
            )
    return Calibration(a, dp, m, nn, mdl, best, routes)


# --------------------------------------------------------------------------------------------
# Section 5: the unbounded reduction
# --------------------------------------------------------------------------------------------


def reduction_distance(r: float, s: int, delta: float) -> float:
    """Lemma 5.2: with probability at least ``1 - delta`` the projections of two datasets at ``d_EM <= r``
    are within ``c = (1 + sqrt 2) r + (3/s) ln(1/delta)`` of each other.

    (Lemma 5.2 as printed has ``3/8 ln(1/delta)``; its proof, and Theorem 5.3, use ``(3/s) ln(1/delta)``.)
    """
    if not 0 < r <= 1:
        raise ParameterError(f"r must lie in (0, 1], got {r}")
    s = _check_m(s, "s")
    delta = _check_delta(delta)
    return (1 + math.sqrt(2)) * r + 3.0 / s * math.log(1 / delta)


def reduction_alpha(epsilon: float, r: float, s: int, delta: float) -> float:
    """Theorem 5.3: BoundedEMDReduction with ``s`` samples per user is ``(epsilon, 2 delta, r)``-discrete
    d_EM-DP when the bounded mechanism is ``(alpha, delta)``-d_EM-DP with ``alpha = epsilon / c``,
    ``c`` = :func:`reduction_distance`.

    When ``c >= 1`` the lemma says nothing (``d_EM <= 1`` always), and ``alpha = epsilon`` suffices: every
    pair of projections is within the inner guarantee's ``(alpha, delta)`` (see :func:`reduction_epsilon`).
    """
    eps = float(epsilon)
    if not (math.isfinite(eps) and eps > 0):
        raise ParameterError("epsilon must be positive and finite")
    return eps / min(reduction_distance(r, s, delta), 1.0)


def reduction_epsilon(alpha: float, r: float, s: int, delta: float) -> float:
    """Theorem 5.3 read forwards: an ``(alpha, delta_in)``-bounded inner mechanism makes BoundedEMDReduction
    ``(alpha min(c, 1), delta_in + delta, r)``-discrete d_EM-DP (``c`` = :func:`reduction_distance` at the
    projection's ``delta``; when ``c >= 1`` the projection's delta is not needed)."""
    a = float(alpha)
    if not (math.isfinite(a) and a > 0):
        raise ParameterError(f"alpha must be positive and finite, got {alpha!r}")
    return a * min(reduction_distance(r, s, delta), 1.0)


def reduction_guarantee_of(inner: EMDMetricDP, r: float, s: int, delta: float) -> DiscreteEMDDP:
    """The discrete guarantee BoundedEMDReduction delivers around a *realized* inner guarantee.

    The proof of Theorem 5.3 (appendix C.2) bounds the divergence by ``delta_in Pr[A] + Pr[not A]``, where
    ``A`` is Lemma 5.2's event (probability ``>= 1 - delta``): the result is ``(alpha c, delta_in + delta,
    r)`` with the inner ``(alpha, delta_in)`` -- the deltas actually used, not the paper's ``2 delta``. When
    ``c >= 1``, ``A`` always holds: ``(alpha, delta_in, r)``.
    """
    if not isinstance(inner, EMDMetricDP) or not inner.bounded:
        raise ParameterError(REDUCTION_NEEDS_BOUNDED)
    c = reduction_distance(r, s, delta)
    eps = inner.alpha * min(c, 1.0)
    total = inner.delta + (delta if c < 1 else 0.0)
    if not total < 1:
        raise ParameterError(f"the reduction's delta {total:.3g} is not below 1; use a smaller --delta")
    return DiscreteEMDDP(eps, total, r, inner.model, inner.metric)


def reduction_guarantee(epsilon: float, r: float, delta: float, model: Model | str = Model.LOCAL) -> DiscreteEMDDP:
    """The ``(epsilon, 2 delta, r)``-discrete d_EM-DP guarantee Theorem 5.3 gives."""
    d = _check_delta(delta)
    if not 2 * d < 1:
        raise ParameterError(
            f"Theorem 5.3's guarantee has delta 2 delta = {2 * d:.3g}, not below 1: it promises nothing; use a "
            "smaller delta (--delta)"
        )
    return DiscreteEMDDP(epsilon, 2 * d, r, Model(model))


def min_samples(r: float, delta: float) -> int:
    """Theorem 1.3: the reduction's guarantee holds for every ``r >= 2 ln(1/delta) / s``, so the smallest
    number of samples per user for a given ``r`` is ``ceil(2 ln(1/delta) / r)``."""
    if not 0 < r <= 1:
        raise ParameterError(f"r must lie in (0, 1], got {r}")
    return math.ceil(2 * math.log(1 / _check_delta(delta)) / r)


# --------------------------------------------------------------------------------------------
# Beyond the paper: a numerical amplification bound for d_X-DP randomizers
# --------------------------------------------------------------------------------------------
#
# One step of the hybrid argument of appendix B.3 changes one item x0 -> x1 (distance d) among M shuffled
# items. Generalizing Feldman, McMillan & Talwar (FOCS 2021) as in Lemma B.1:
#  * every other item x_j is within distance 1 of x0 and x1, so A(x_j) >= e^{-alpha0} max(A(x0), A(x1))
#    and A(x_j) = p (A(x0) + A(x1)) / 2 + (1 - p) LO_j with p = e^{-alpha0}: with probability p it is a
#    "clone";
#  * A(x0), A(x1) are (alpha0 d)-DP, so (Kairouz, Oh & Viswanath) A(x0) = q Q0 + (1-q) Q1 and
#    A(x1) = (1-q) Q0 + q Q1 with q = e^{alpha0 d} / (1 + e^{alpha0 d}).
# The shuffled output is then a post-processing of the counts of Q0 and Q1 draws: with C ~ Bin(M-1, p)
# clones, A | C ~ Bin(C, 1/2) and Delta ~ Bern(q) (x0) or Bern(1-q) (x1), the counts are
# (A + Delta, C + 1 - A - Delta). Its hockey-stick divergence HS_c(t), given C = c, has a closed form in
# binomial tails, and HS_c is non-increasing in c (c + 1 clones is c clones plus an independent coin:
# post-processing), so summing over buckets of c with the value at each bucket's start is an upper bound.
# Per step this gives (eps(d), delta_s); the hybrid over the ||v||_0 <= m changed items (Lemma A.2) gives
# total loss sum_i eps(d_i) <= L ||v||_1 = L m d_EM with L = sup_d eps(d)/d, and delta-term
# e^{sum eps(d_i)} m delta_s.


class _CloneModel:
    """Bucketed law of the number of clones C ~ Bin(M - 1, e^{-alpha0}).

    Below the first bucket (probability at most ``tail``) the divergence is bounded by 1.
    """

    def __init__(self, M: int, alpha0: float, tail: float, buckets: int = 150):
        from scipy.stats import binom

        self._binom = binom
        N, p = M - 1, math.exp(-alpha0)
        if N == 0:
            self.starts = np.array([0.0])
            self.weights = np.array([1.0])
            self.low_tail = 0.0
            return
        lo = max(int(binom.ppf(tail, N, p)) - 1, 0)
        hi = max(int(binom.isf(1e-300, N, p)), lo + 1)
        starts = np.unique(np.linspace(lo, hi, min(buckets, hi - lo + 1)).astype(np.int64))
        ends = np.append(starts[1:] - 1, N)
        self.starts = starts.astype(np.float64)
        self.weights = np.maximum(binom.cdf(ends, N, p) - binom.cdf(starts - 1, N, p), 0.0)
        self.low_tail = float(binom.cdf(lo - 1, N, p))

    def hockey_stick(self, t: float, eps_pair: float) -> float:
        """Upper bound on D_{e^t}(P0 || P1) for one item changed with pair parameter ``eps_pair``.

        Given C = c the privacy loss increases with a' = A + Delta, so the divergence is the tail
        ``a' >= T``: ``HS_c = A_t pmf(T - 1) - expm1(t) P(X >= T)`` with ``X ~ Bin(c, 1/2)`` and
        ``A_t = q - e^t (1 - q) = e^t expm1(eps - t) / (1 + e^eps)`` (written without cancellation).
        """
        if t >= eps_pair:
            return 0.0
        den = 1.0 + math.exp(eps_pair)
        A = math.exp(t) * math.expm1(eps_pair - t) / den
        rs = (math.expm1(t + eps_pair) / den) / A  # threshold on a'/(c - a' + 1)
        c = self.starts
        T = np.floor(rs * (c + 1) / (1 + rs)) + 1
        hc = A * self._binom.pmf(T - 1, c, 0.5) - math.expm1(t) * self._binom.sf(T - 1, c, 0.5)
        return float(np.dot(self.weights, np.maximum(hc, 0.0))) + self.low_tail

    def eps(self, eps_pair: float, delta_s: float, rtol: float = 1e-3) -> float:
        """Smallest t (rounded up) with hockey_stick(t) <= delta_s; 0 if already at t = 0."""
        if self.hockey_stick(0.0, eps_pair) <= delta_s:
            return 0.0
        lo, hi = 0.0, eps_pair
        while hi - lo > rtol * hi:
            mid = 0.5 * (lo + hi)
            if self.hockey_stick(mid, eps_pair) > delta_s:
                lo = mid
            else:
                hi = mid
        return hi


def _lipschitz_bound(model: _CloneModel, alpha0: float, delta_s: float, rtol: float = 0.01) -> tuple[float, float]:
    """Rigorous ``L >= sup_d eps(d)/d`` over (0, 1] by adaptive refinement (eps is non-decreasing in d),
    and ``eps(1)``."""

    def e(d: float) -> float:
        return model.eps(alpha0 * d, delta_s)

    # On (0, d0] use eps(d) <= eps(d0) when that is 0, else eps(d) <= alpha0 d (the pair alone is
    # (alpha0 d)-DP, shuffling or not): the ratio there is at most alpha0.
    d0 = 1e-3
    while e(d0) > 0 and d0 > 1e-16:
        d0 /= 4
    floor = alpha0 if e(d0) > 0 else 0.0
    grid = list(np.geomspace(d0, 1.0, 40))
    vals = [e(d) for d in grid]
    for _ in range(12):
        lower = max(v / d for v, d in zip(vals, grid, strict=True))
        upper = [vals[k + 1] / grid[k] for k in range(len(grid) - 1)]
        bad = [k for k, u in enumerate(upper) if u > lower * (1 + rtol)]
        if not bad:
            break
        for k in reversed(bad):
            mid = math.sqrt(grid[k] * grid[k + 1])
            grid.insert(k + 1, mid)
            vals.insert(k + 1, e(mid))
    upper = max(vals[k + 1] / grid[k] for k in range(len(grid) - 1))
    return max(upper, floor), vals[-1]


@dataclass(frozen=True)
class NumericalShuffleBound(_AmplifiedBound):
    """A numerically computed ``(alpha, delta')``-bounded d_EM-DP guarantee for PrivEMDItemWise."""

    source: str = "numerical"  # "numerical" or "theorem 4.4" (whichever was tighter)

    @property
    def route(self) -> str:
        return self.source

    def guarantee(self, metric: str = "") -> EMDMetricDP:
        return EMDMetricDP(self.alpha, _proper_delta(self.delta_prime), self.model, bounded=True, metric=metric)


def numerical_shuffle_guarantee(
    alpha0: float,
    m: int,
    delta: float,
    n: int | None = None,
    model: Model | str | None = None,
    rtol: float = 0.01,
) -> NumericalShuffleBound:
    """A numerical ``(alpha, delta')`` for PrivEMDItemWise, never looser than Theorem 4.4.

    Same structure as Theorem 4.4 -- per-step delta ``delta / m``, ``delta' = delta e^{total loss}`` --
    with each step's loss computed numerically (see the comment above this function) instead of by
    Lemma B.1's closed form. No validity range is needed. Where Theorem 4.4 applies and is tighter, its
    values are returned (``source`` says which). Takes 0.2-3 s (150 clone-count buckets, per-step
    losses to 0.1%, ``sup eps(d)/d`` bounded within ``rtol``; the bound is rigorous for any ``rtol``).
    """
    M, mdl = _shuffled(m, n, model)
    delta = _check_delta(delta)
    a0 = float(alpha0)
    if not (math.isfinite(a0) and a0 > 0):
        raise ParameterError(f"alpha_0 must be positive and finite, got {alpha0!r}")
    m = int(m)
    delta_s = delta / m
    cm = _CloneModel(M, a0, tail=1e-3 * delta_s)
    L, eps1 = _lipschitz_bound(cm, a0, delta_s, rtol=rtol)
    alpha = float(m * L)
    delta_prime = min(delta * math.exp(min(m * eps1, 700.0)), 1.0)
    nn = None if mdl is Model.LOCAL else int(n)
    out = NumericalShuffleBound(a0, m, nn, delta, mdl, M, alpha, delta_prime, "numerical")
    if a0 < validity_limit(M, delta):
        th = shuffle_guarantee(a0, m, delta, n=nn, model=mdl)
        if th.alpha < alpha:
            return NumericalShuffleBound(a0, m, nn, delta, mdl, M, th.alpha, th.delta_prime, "theorem 4.4")
    return out


def _route_numerical(alpha: float, dp: float, m: int, n: int | None, M: int, start: float | None) -> RouteResult:
    """Largest alpha_0 whose numerical guarantee meets the target (inner delta ``delta' e^{-alpha}``, so
    ``delta e^{m eps(1)} <= delta'`` whenever ``alpha <= target``; scaled down by ``1 - 1e-9`` so that
    floating-point rounding of ``delta e^{m eps(1)}`` cannot land above the target). A bound is accepted
    only if its alpha and delta' are at most the target exactly. ``alpha(alpha_0)`` increases with
    alpha_0: bracket from the composition value ``alpha / m`` (always feasible) or ``start``, then
    bisect in log alpha_0. Each step is one numerical bound at 3% resolution."""
    delta = dp * math.exp(-alpha) * (1 - 1e-9)

    def evaluate(a0: float) -> NumericalShuffleBound | None:
        try:
            b = numerical_shuffle_guarantee(a0, m, delta, n=n, rtol=0.03)
        except (OverflowError, ValueError):
            return None
        return b if (b.alpha <= alpha and b.delta_prime <= dp) else None

    lo, blo = alpha / m, evaluate(alpha / m)
    if blo is None:
        return RouteResult("numerical", False, reason="the numerical bound does not reach the composition value")
    hi = max(start or 0.0, lo) * 1.5
    while True:
        b = evaluate(hi)
        if b is None:
            break
        lo, blo, hi = hi, b, hi * 1.5
        if hi > math.log(M) + 5:
            break
    for _ in range(7):
        mid = math.sqrt(lo * hi)
        b = evaluate(mid)
        if b is not None:
            lo, blo = mid, b
        else:
            hi = mid
    return RouteResult("numerical", True, blo.alpha0, blo.delta, float(blo.alpha), float(blo.delta_prime))


def numerical_guarantee_for_target(
    alpha0: float,
    m: int,
    delta_prime: float,
    n: int | None = None,
    model: Model | str | None = None,
    rtol: float = 0.01,
) -> NumericalShuffleBound | None:
    """:func:`numerical_shuffle_guarantee` with an inner delta whose ``delta'`` meets the target.

    ``delta' = delta e^{m eps(1)}`` and ``eps(1) <= alpha_0`` (the changed pair alone is ``alpha_0``-DP), so
    ``delta_1 = delta_prime e^{-m alpha_0}`` always meets it; ``delta_2 = delta_prime e^{-m eps_1(1)}`` (with
    ``eps_1`` computed at ``delta_1``) does too in exact arithmetic, because ``eps(1)`` only shrinks as delta
    grows, and gives a smaller alpha. Two bounds are computed (each rounded up to the bound's resolution, so
    neither is trusted blindly): the best whose ``delta'`` is at most the target, exactly, is returned.
    Returns ``None`` if neither meets it (or the target is 0).
    """
    M, mdl = _shuffled(m, n, model)
    dp = _check_delta_target(delta_prime)
    a0 = float(alpha0)
    if not (math.isfinite(a0) and a0 > 0):
        raise ParameterError(f"alpha_0 must be positive and finite, got {alpha0!r}")
    if dp == 0:
        return None
    nn = None if mdl is Model.LOCAL else n
    m = int(m)
    shrink = 1 - 1e-9  # keeps delta e^{m eps(1)} below the target under floating-point rounding
    best = None
    delta = dp * math.exp(-min(m * a0, 700.0)) * shrink
    for _ in range(2):
        if not delta > 0:
            break
        b = numerical_shuffle_guarantee(a0, m, delta, n=nn, model=mdl, rtol=rtol)
        if b.delta_prime <= dp and (best is None or b.alpha < best.alpha):
            best = b
        eps1 = math.log(b.delta_prime / b.delta) / m if b.delta_prime < 1 else a0
        delta = dp * math.exp(-min(m * eps1, 700.0)) * shrink
    return best


@dataclass(frozen=True)
class ItemwiseBound:
    """The guarantee of PrivEMDItemWise for one ``alpha_0`` and a target ``delta'``: the chosen route, its
    ``(alpha, delta')``, the inner delta (0 for composition) and the amplification bound behind it."""

    route: str
    alpha: float
    delta_prime: float
    inner_delta: float
    model: Model
    bound: _AmplifiedBound | None = None

    def guarantee(self, metric: str = "") -> EMDMetricDP:
        """The typed guarantee (Theorem 4.4's carries its per-distance curve)."""
        if isinstance(self.bound, ShuffleBound):
            return self.bound.guarantee(metric)
        return EMDMetricDP(self.alpha, _proper_delta(self.delta_prime), self.model, bounded=True, metric=metric)


def itemwise_bound(
    alpha0: float,
    m: int,
    delta_prime: float,
    n: int | None = None,
    numerical: bool = False,
    inner_delta: float | None = None,
) -> ItemwiseBound:
    """The best guarantee of PrivEMDItemWise whose ``delta'`` is at most the target ``delta_prime``.

    Candidates: composition ``(m alpha_0, 0)`` (always), Theorem 4.4 and, with ``numerical``, the numerical
    bound. Without ``inner_delta`` each amplified route uses the largest inner delta that meets the target
    (:func:`shuffle_guarantee_for_target`, :func:`numerical_guarantee_for_target`); with it, that inner
    delta, and the route counts only if its delta' meets the target. The smallest alpha wins (composition
    on ties). ``delta_prime = 0`` asks for a pure guarantee: composition.
    """
    m = _check_m(m)
    dp = _check_delta_target(delta_prime)
    a0 = float(alpha0)
    if not (math.isfinite(a0) and a0 > 0):
        raise ParameterError(f"alpha_0 must be positive and finite, got {alpha0!r}")
    mdl = Model.LOCAL if n is None else Model.CENTRAL
    M = m * (n or 1)
    best = ItemwiseBound("composition", composition_alpha(a0, m), 0.0, 0.0, mdl)
    if dp == 0:
        return best
    candidates: list[_AmplifiedBound | None] = []
    if inner_delta is None:
        candidates.append(shuffle_guarantee_for_target(a0, m, dp, n=n))
        if numerical:
            candidates.append(numerical_guarantee_for_target(a0, m, dp, n=n))
    else:
        d = _check_delta(inner_delta, "the inner delta")
        if a0 < validity_limit(M, d):
            candidates.append(shuffle_guarantee(a0, m, d, n=n))
        if numerical:
            candidates.append(numerical_shuffle_guarantee(a0, m, d, n=n))
    for b in candidates:
        if b is not None and b.delta_prime <= dp and b.alpha < best.alpha:
            best = ItemwiseBound(b.route, b.alpha, b.delta_prime, b.delta, mdl, b)
    return best

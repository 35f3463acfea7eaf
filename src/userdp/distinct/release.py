"""Algorithm 1 of Knop & Steinke (NeurIPS 2023): a person-level ``epsilon``-DP lower bound on the number of
distinct elements, via the generalized exponential mechanism (GEM) and a shifted Laplace release.

Neighbours: add or remove one person (with all their elements).

1. ``q_l = DC(D; l) - (l / eps_count) ln(1 / (2 beta))`` for ``l = 1..l_max`` (each has sensitivity
   ``Delta_l = l``);
2. ``l_hat`` by GEM with budget ``eps_select`` (Raskhodnikova & Smith 2015; the paper's Theorem 3.4):
   ``t = 2 ln(l_max / beta) / eps_select``, normalized scores
   ``s_l = min_j ((q_l - t Delta_l) - (q_j - t Delta_j)) / (Delta_l + Delta_j)`` (sensitivity 1), and
   ``l`` drawn with probability ``∝ exp(eps_select s_l / 2)`` by the exact exponential mechanism;
3. release ``DC(D; l_hat) + Z - shift`` with ``Z`` Laplace noise of scale ``l_hat / eps_count`` (the lattice
   discrete Laplace of :mod:`userdp.noise`) and ``shift`` its exact ``(1 - beta)``-quantile, so that
   ``P[release > DC(D)] <= beta`` (``DC(D; l) <= DC(D)`` for every ``l``). The paper's budget split is
   ``eps_select = eps_count = eps / 2``.

For Laplace noise of scale ``b`` the shift is ``b ln(1/(2 beta))``; userdp computes the exact quantile of
the discrete noise it draws, which is within one lattice step of that. (A public reference implementation
subtracts only half of the shift, which breaks the ``1 - beta`` guarantee; the tests show it.)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..data import UserDataset
from ..errors import ParameterError
from ..noise import (
    LaplaceCalibration,
    RngLike,
    calibrate_laplace,
    discrete_laplace,
    exponential_mechanism,
    permute_and_flip,
    resolve_rng,
)
from ..privacy.guarantees import Neighbours, PureDP
from ..privacy.result import ErrorStatement, Release
from .counting import PersonElementGraph, dc_bucketed, dc_greedy, dc_matching, dc_sampling, person_element_graph

__all__ = [
    "gem_scores",
    "gem_scores_quadratic",
    "gem_select",
    "gem_threshold",
    "laplace_lower_bound",
    "ReleasePlan",
    "release_plan",
    "distinct_count",
]


def gem_scores_quadratic(q: np.ndarray, sens: np.ndarray, t: float) -> np.ndarray:
    """GEM's normalized scores by the ``O(m^2)`` definition."""
    a = np.asarray(q, dtype=np.float64) - t * np.asarray(sens, dtype=np.float64)
    d = np.asarray(sens, dtype=np.float64)
    return ((a[:, None] - a[None, :]) / (d[:, None] + d[None, :])).min(axis=1)


def gem_scores(q: np.ndarray, sens: np.ndarray, t: float) -> np.ndarray:
    """GEM's normalized scores in ``O(m log m)`` (Knop & Steinke, appendix B).

    With ``a_j = q_j - t Delta_j``: ``s_i = min_j (a_i - a_j)/(Delta_i + Delta_j)`` is the largest ``s`` with
    ``a_i - s Delta_i >= g(s) := max_j (a_j + s Delta_j)``. ``g`` is the upper envelope of lines of slope
    ``Delta_j > 0`` (convex, increasing); the left side decreases in ``s``, so ``s_i`` is their crossing
    (``s_i <= 0``, from ``j = i``). Build the envelope once (sort by slope, convex-hull trick), then find
    each crossing by binary search over the envelope's breakpoints.
    """
    a = np.asarray(q, dtype=np.float64) - t * np.asarray(sens, dtype=np.float64)
    d = np.asarray(sens, dtype=np.float64)
    if np.any(d <= 0):
        raise ParameterError("sensitivities must be positive")
    m = a.size
    # envelope of lines y = a_j + s d_j for s in (-inf, 0]; sort by slope, keep the max intercept per slope
    order = np.lexsort((a, d))
    hull_d: list[float] = []
    hull_a: list[float] = []
    for j in order:
        dj, aj = d[j], a[j]
        if hull_d and hull_d[-1] == dj:
            hull_d.pop()
            hull_a.pop()
        while len(hull_d) >= 2:
            # line 2 (top) is useless if line 1 and the new line meet at or left of where 1 and 2 meet
            d1, a1, d2, a2 = hull_d[-2], hull_a[-2], hull_d[-1], hull_a[-1]
            if (a1 - aj) * (d2 - d1) <= (a1 - a2) * (dj - d1):
                hull_d.pop()
                hull_a.pop()
            else:
                break
        hull_d.append(dj)
        hull_a.append(aj)
    H = len(hull_d)
    hd = np.array(hull_d)
    ha = np.array(hull_a)
    # breakpoints x_k where line k and k+1 of the hull meet (increasing); line k is the max on [x_{k-1}, x_k]
    bx = (ha[:-1] - ha[1:]) / (hd[1:] - hd[:-1]) if H > 1 else np.empty(0)
    out = np.empty(m)
    for i in range(m):
        # phi(s) = a_i - s d_i - g(s) decreases; at breakpoint bx[k] the envelope is line k (= line k+1).
        # The root lies on the first segment k whose right breakpoint has phi(bx[k]) < 0 (or the last).
        lo, hi = 0, H - 1
        while lo < hi:
            mid = (lo + hi) // 2
            x = bx[mid]
            if a[i] - x * d[i] - (ha[mid] + x * hd[mid]) >= 0:
                lo = mid + 1
            else:
                hi = mid
        out[i] = (a[i] - ha[lo]) / (d[i] + hd[lo])
    return out


def gem_threshold(m: int, beta: float, epsilon: float) -> float:
    """GEM's margin ``t = 2 ln(m / beta) / epsilon`` for ``m`` candidates (Knop & Steinke, Theorem 3.4)."""
    return 2 * math.log(m / beta) / epsilon


def gem_select(
    q: np.ndarray, sens: np.ndarray, epsilon: float, beta: float, rng: RngLike = None
) -> tuple[int, np.ndarray]:
    """The generalized exponential mechanism: returns ``(index, normalized scores)``; ``epsilon``-DP when
    each ``q_i`` has sensitivity ``sens_i``."""
    s = gem_scores(q, sens, gem_threshold(len(q), beta, epsilon))
    return exponential_mechanism(s, 1.0, epsilon, rng), s


def _shift_quantile(t: int, beta: float) -> int:
    """Smallest integer x with P[DLap(t) > x] <= beta: P[Z > x] = e^{-(x+1)/t} / (1 + e^{-1/t})."""
    x = math.ceil(-t * math.log(beta * (1 + math.exp(-1.0 / t)))) - 1
    return max(x, 0)


def _lower_bound_terms(
    value: float, sensitivity: float, epsilon: float, beta: float, shift_factor: float = 1.0
) -> tuple[LaplaceCalibration, int, int]:
    """``(calibration, k, shift_units)``: the release is ``(k + Z - shift_units) g`` with ``Z ~ DLap(t)``."""
    cal = calibrate_laplace(sensitivity, epsilon, dim=1)
    x = _shift_quantile(cal.t, beta)
    return cal, round(value / cal.granularity), math.ceil(x * shift_factor)


def laplace_lower_bound(
    value: float, sensitivity: float, epsilon: float, beta: float, rng: RngLike = None, shift_factor: float = 1.0
) -> tuple[float, float, float]:
    """Release ``value + Z - shift`` with ``Z`` lattice Laplace for ``sensitivity``/``epsilon`` and ``shift``
    the exact ``(1 - beta)``-quantile of ``Z``: then ``P[release > value] <= beta``. Returns
    ``(release, scale, shift)``. ``shift_factor`` exists only so tests can show a halved shift fails."""
    cal, k, shift_units = _lower_bound_terms(value, sensitivity, epsilon, beta, shift_factor)
    z = int(discrete_laplace(cal.t, 1, rng)[0])
    g = cal.granularity
    return float((k + z - shift_units) * g), cal.scale, shift_units * g


@dataclass(frozen=True)
class ReleasePlan:
    """Everything Algorithm 1 computes before it draws randomness; the release's law is a function of it.

    ``l_hat = i + 1`` is drawn with probability ``∝ exp(epsilon_select scores[i] / 2)``; the value is then
    ``(lattice[i] + Z - shift_units[i]) * calibrations[i].granularity`` with ``Z ~ DLap(calibrations[i].t)``.
    :func:`userdp.audit.audit_distinct_count` computes the exact privacy loss from it.
    """

    counts: np.ndarray
    scores: np.ndarray
    epsilon_select: float
    epsilon_count: float
    calibrations: list[LaplaceCalibration]
    lattice: np.ndarray
    shift_units: np.ndarray


_METHODS: dict[str, Callable] = {"matching": dc_matching, "greedy": dc_greedy}
METHODS = ("matching", "greedy", "sampling", "bucketed")
#: GEM's selection over the normalized scores (sensitivity 1): the exponential mechanism (the paper's) or
#: permute-and-flip (McKenna & Sheldon 2020), epsilon-DP for the same scores and never worse in expected score;
#: its running time depends on the scores (how many candidates it visits), a timing channel the exponential
#: mechanism's exact sampler does not have.
SELECTIONS = ("exponential", "permute-and-flip")


def release_plan(
    graph: PersonElementGraph,
    epsilon: float,
    beta: float,
    l_max: int,
    method: str = "matching",
    select_fraction: float = 0.5,
    rng: RngLike = None,
    n_buckets: int = 16,
    counts: np.ndarray | None = None,
) -> ReleasePlan:
    """Steps 1-2 of Algorithm 1 up to the random draws: ``DC(D; l)`` for ``l = 1..l_max``, the shifted
    ``q_l``, GEM's normalized scores (sensitivity 1) and, per ``l``, the lattice Laplace calibration for
    sensitivity ``l``, the rounded count and the exact ``(1 - beta)`` shift. ``rng`` is used only by the
    sampling method."""
    if counts is not None:  # DC(D; l) counted elsewhere (the Spark engine's buckets, on the executors)
        counts = np.asarray(counts, dtype=np.int64)
        if counts.shape != (l_max,):
            raise ParameterError("one count per l = 1..l_max is needed")
    elif method == "sampling":
        counts = dc_sampling(graph, l_max, resolve_rng(rng))
    elif method == "bucketed":
        counts = dc_bucketed(graph, l_max, n_buckets)
    else:
        counts = _METHODS[method](graph, l_max)
    e_sel = epsilon * select_fraction
    e_cnt = epsilon - e_sel
    ls = np.arange(1, l_max + 1, dtype=np.float64)
    q = counts - ls / e_cnt * math.log(1 / (2 * beta))
    scores = gem_scores(q, ls, gem_threshold(l_max, beta, e_sel))
    terms = [_lower_bound_terms(float(c), float(l), e_cnt, beta) for c, l in zip(counts, ls, strict=True)]
    return ReleasePlan(
        np.asarray(counts),
        scores,
        e_sel,
        e_cnt,
        [c for c, _, _ in terms],
        np.array([k for _, k, _ in terms], dtype=object),  # Python ints: DC / g exceeds 2^63 at large counts
        np.array([x for _, _, x in terms], dtype=np.int64),
    )


def check_parameters(
    epsilon: float,
    beta: float = 0.05,
    l_max: int = 100,
    method: str = "matching",
    select_fraction: float = 0.5,
    n_buckets: int = 16,
    selection: str = "exponential",
) -> None:
    """Refuse bad public parameters of :func:`distinct_count` (before any data is read)."""
    eps = float(epsilon)
    if not (math.isfinite(eps) and eps > 0):
        raise ParameterError(f"epsilon must be positive and finite, got {epsilon!r}")
    if not 0 < beta < 0.5:
        raise ParameterError(f"beta must lie in (0, 1/2), got {beta!r}")
    if isinstance(l_max, bool) or int(l_max) != l_max or l_max < 1:
        raise ParameterError(f"the maximum bound l_max must be a positive integer, got {l_max!r}")
    if not 0 < select_fraction < 1:
        raise ParameterError("select_fraction must lie in (0, 1)")
    if method not in METHODS:
        raise ParameterError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if isinstance(n_buckets, bool) or int(n_buckets) != n_buckets or not 1 <= n_buckets <= 2**20:
        raise ParameterError(f"the number of buckets must be an integer from 1 to 2^20, got {n_buckets!r}")
    if selection not in SELECTIONS:
        raise ParameterError(f"selection must be one of {', '.join(SELECTIONS)}, got {selection!r}")


def distinct_count(
    ds: UserDataset | PersonElementGraph | None,
    epsilon: float,
    beta: float = 0.05,
    l_max: int = 100,
    method: str = "matching",
    select_fraction: float = 0.5,
    rng: RngLike = None,
    n_buckets: int = 16,
    counts: np.ndarray | None = None,
    selection: str = "exponential",
) -> Release:
    """Person-level ``epsilon``-DP lower bound on the number of distinct elements (Algorithm 1).

    Parameters
    ----------
    method:
        ``"matching"`` (exact ``DC(D; l)``), ``"greedy"`` (Algorithm 2), ``"sampling"`` (each person keeps
        ``l`` random elements) or ``"bucketed"`` (the exact count within each of ``n_buckets`` public
        buckets of elements, each person's ``l`` shared out over the buckets: :func:`dc_bucketed`, what the
        Spark engine computes on its executors). All have sensitivity ``l`` and never exceed the true count.
    n_buckets:
        The number of buckets of ``"bucketed"``.
    counts:
        ``DC(D; l)`` for ``l = 1..l_max`` already counted by ``method`` (then ``ds`` is not read).
    select_fraction:
        The share of ``epsilon`` spent on choosing ``l`` (the paper's 1/2).
    selection:
        How GEM draws ``l`` from its normalized scores (sensitivity 1): ``"exponential"`` (the paper's
        exponential mechanism, the default) or ``"permute-and-flip"`` (:data:`SELECTIONS`); both are
        ``epsilon_select``-DP.

    Returns
    -------
    Release
        ``value``: the released lower bound (holds with probability at least ``1 - beta``);
        ``extras["bound"]``: the chosen ``l_hat``.
    """
    check_parameters(epsilon, beta, l_max, method, select_fraction, n_buckets, selection)
    eps = float(epsilon)
    src = resolve_rng(rng)
    if counts is None:
        graph = ds if isinstance(ds, PersonElementGraph) else person_element_graph(ds)
    else:
        graph = None
    plan = release_plan(graph, eps, beta, int(l_max), method, select_fraction, src, int(n_buckets), counts)
    select = exponential_mechanism if selection == "exponential" else permute_and_flip
    idx = select(plan.scores, 1.0, plan.epsilon_select, src)  # GEM's scores have sensitivity 1
    l_hat = idx + 1
    cal = plan.calibrations[idx]
    z = int(discrete_laplace(cal.t, 1, src)[0])
    value = float((int(plan.lattice[idx]) + z - int(plan.shift_units[idx])) * cal.granularity)
    scale, shift = cal.scale, float(plan.shift_units[idx] * cal.granularity)
    e_sel, e_cnt = plan.epsilon_select, plan.epsilon_count
    l_max = int(l_max)
    return Release(
        value=value,
        guarantee=PureDP(eps, neighbours=Neighbours.ADD_REMOVE_USER),
        mechanism=f"person-level DP distinct count (Knop & Steinke Algorithm 1, {method})",
        params={
            "epsilon": eps,
            "beta": beta,
            "l_max": l_max,
            "method": method,
            **({"n_buckets": int(n_buckets)} if method == "bucketed" else {}),
            "selection": selection,
            "epsilon_select": e_sel,
            "epsilon_count": e_cnt,
        },
        error=ErrorStatement(
            f"a lower bound on the number of distinct elements with probability at least {1 - beta:g} "
            f"(Laplace scale {scale:.4g}, shift {shift:.4g})",
            bound=None,
            confidence=1 - beta,
        ),
        # (GEM's scores stay inside: they are exact functions of DC(D; l), so publishing them would reveal
        # the data; only l_hat, the noise's scale and the public shift go out)
        extras={"bound": l_hat, "scale": scale, "shift": shift},
    )

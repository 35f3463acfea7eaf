"""The two baselines of Knop & Steinke's Table 2 for the person-level DP distinct count: R2T (Dong, Fang, Yi,
Tao, Machanavajjhala, SIGMOD 2022) and the (approximate) shifted inverse mechanism (Fang, Dong, Yi, CCS 2022).

Neighbours: add or remove one person (with all their elements), as in :mod:`userdp.distinct.release`.
Both are pure functions over the person-element graph; both return a :class:`~userdp.privacy.result.Release`
whose guarantee is :class:`~userdp.privacy.guarantees.PureDP`.

**R2T** (race to the top, Dong et al. 2022, Section 5 / Algorithm 1). For a public bound ``GS`` on a person's
contribution, ``J = ceil(log2 GS)`` truncation thresholds ``tau_j = 2^j`` (``j = 1..J``). For a distinct count
the truncated query ``Q(D, tau)`` (R2T's LP: each person's join results carry weight at most ``tau`` in all,
each element at most 1) is a max flow with integral optimum, i.e. exactly Knop & Steinke's ``DC(D; tau)``;
it is computed here by userdp's exact count :func:`~userdp.distinct.counting.dc_matching`, not by an LP.
``DC(D; tau)`` has sensitivity ``tau``; each threshold gets ``epsilon / J`` (basic composition), and the
release is R2T's

    max( max_j DC(D; tau_j) + Lap(J tau_j / eps) - J tau_j ln(J / beta) / eps,  Q(D, 0) = 0 ).

The maximum is post-processing of the ``J`` noisy values, which are ``epsilon``-DP together. The Laplace noise
is userdp's lattice Laplace (:func:`~userdp.noise.calibrate_laplace` for sensitivity ``tau_j`` and
``epsilon / J``; its scale is at least ``J tau_j / eps``); the shift uses the paper's formula with that scale.
(The authors' code uses base 5.5 instead of 2 for the thresholds and takes the max from ``j = 1``; the paper's
base 2 is used here.)

**Shifted inverse** (Fang, Dong, Yi 2022, Section 4; the "approx" variant of their Section 6 for distinct
counts). The answer is sought on a public grid of ``log10`` values ``y_i = i * error_level``,
``i = 0..M``, ``M = ceil(log10(upper_bound) / error_level)``. For ``k = 0..2 tau`` with
``tau = ceil(2 / eps * ln((M + 1) / beta))``, ``F_k`` is the grid index of ``DC(D) - R_k(D)``, where ``R_k`` is
the LP relaxation of "the most elements that removing ``k`` persons removes" (maximise ``sum_v w_v`` subject to
``w_v <= w_u`` for every owner ``u`` of ``v``, ``sum_u w_u <= k``, ``0 <= w <= 1``). ``F_k`` is non-increasing
in ``k``, and for a neighbour ``D' = D + one person`` the LP gives ``F_k(D') >= F_k(D) >= F_{k+1}(D')`` (restrict
a solution of ``D'``; extend one of ``D`` by removing the new person too). Hence the *inverse*
``g(D, i) = min{k <= 2 tau : F_k <= i}`` (``2 tau + 1`` if none) has sensitivity 1, and the mechanism draws
grid index ``i`` with probability ``∝ exp(-eps |g(D, i) - tau| / 2)`` (the exponential mechanism with a
sensitivity-1 score): ``epsilon``-DP. The released value is ``10^(y_i)``.

Where it is not exact: the LP optima come from HiGHS (SciPy's ``linprog``) in floating point, and the grid
index ``ceil(log10(v) / error_level)`` is computed in floating point; the sensitivity argument holds for the
exact LP optima, so a solver error that moves a value across a grid boundary could break it (the LP values
are rounded to 1e-6 before the grid index is taken to make that unlikely, not impossible). The draw itself is
exact: runs of grid points with the same loss are drawn by userdp's exact exponential mechanism with integer
multiplicities (:func:`~userdp.noise.exponential_mechanism`), then a point uniformly within the run.
(The authors' code weighs the grid point ``F_tau`` as one point against the other runs' lengths in
``log10`` units, i.e. ``1 / error_level`` points, and a public reimplementation multiplies the loss by the
run length instead of the weight; neither is the paper's mechanism.)
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError
from ..noise import RngLike, calibrate_laplace, discrete_laplace, exponential_mechanism, resolve_rng
from ..privacy.guarantees import Neighbours, PureDP
from ..privacy.result import ErrorStatement, Release
from .counting import PersonElementGraph, dc_matching

__all__ = [
    "r2t_thresholds",
    "r2t_distinct_count",
    "shifted_inverse_grid",
    "shifted_inverse_removals",
    "shifted_inverse_law",
    "shifted_inverse_distinct_count",
]


def _check_eps_beta(epsilon: float, beta: float) -> float:
    eps = float(epsilon)
    if not (math.isfinite(eps) and eps > 0):
        raise ParameterError(f"epsilon must be positive and finite, got {epsilon!r}")
    if not 0 < beta < 1:
        raise ParameterError(f"beta must lie in (0, 1), got {beta!r}")
    return eps


def _check_int(x: int, name: str, low: int) -> int:
    if isinstance(x, bool) or int(x) != x or int(x) < low:
        raise ParameterError(f"{name} must be an integer of at least {low}, got {x!r}")
    return int(x)


# --------------------------------------------------------------------------------------------
# R2T
# --------------------------------------------------------------------------------------------


def r2t_thresholds(global_sensitivity: int) -> list[int]:
    """R2T's truncation thresholds ``tau_j = 2^j``, ``j = 1..J``, ``J = max(1, ceil(log2 GS))``."""
    gs = _check_int(global_sensitivity, "the global sensitivity GS", 2)
    n = max(1, math.ceil(math.log2(gs)))
    return [2**j for j in range(1, n + 1)]


def _dc_at(graph: PersonElementGraph, taus: list[int], counts: np.ndarray | None) -> np.ndarray:
    """``DC(D; tau)`` for each threshold (``DC(D; l)`` is constant once ``l`` reaches the largest degree)."""
    if counts is None:
        deg = graph.degrees()
        top = int(deg.max()) if deg.size else 0
        if top == 0:
            return np.zeros(len(taus), dtype=np.int64)
        counts = dc_matching(graph, min(top, taus[-1]))
    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim != 1 or counts.size == 0:
        raise ParameterError("counts must hold DC(D; l) for l = 1..L")
    return np.array([counts[min(t, counts.size) - 1] for t in taus], dtype=np.int64)


def r2t_distinct_count(
    graph: PersonElementGraph | None,
    epsilon: float,
    beta: float = 0.1,
    global_sensitivity: int = 10_000,
    rng: RngLike = None,
    counts: np.ndarray | None = None,
) -> Release:
    """R2T (Dong et al., SIGMOD 2022) for the person-level distinct count: ``epsilon``-DP.

    Parameters
    ----------
    graph:
        The person-element graph (not read when ``counts`` is given).
    global_sensitivity:
        The public bound ``GS`` on the number of distinct elements one person holds (R2T's ``GS_Q``); the
        thresholds are ``2, 4, ..., 2^J`` with ``J = ceil(log2 GS)``.
    beta:
        R2T's failure probability: each noisy value lies below its ``DC(D; tau_j)`` with probability at
        least ``1 - beta / (2 J)``, so the release is a lower bound on ``DC(D)`` with probability at least
        ``1 - beta / 2``.
    counts:
        ``DC(D; l)`` for ``l = 1..L`` already computed by :func:`dc_matching` (values past ``L`` repeat the
        last one, which is right when ``L`` is at least the largest degree).

    Returns
    -------
    Release
        ``value``: the maximum of the shifted noisy values and 0; ``extras["noisy"]``: the ``J`` shifted
        noisy values (covered by the same guarantee), ``extras["scales"]``, ``extras["shifts"]``,
        ``extras["thresholds"]``.
    """
    eps = _check_eps_beta(epsilon, beta)
    taus = r2t_thresholds(global_sensitivity)
    n = len(taus)
    src = resolve_rng(rng)
    dc = _dc_at(graph, taus, counts)
    noisy, scales, shifts = [], [], []
    for tau, value in zip(taus, dc, strict=True):
        cal = calibrate_laplace(float(tau), eps / n)  # sensitivity tau, an equal share of epsilon
        z = int(discrete_laplace(cal.t, 1, src)[0])
        shift = cal.scale * math.log(n / beta)
        noisy.append(float(int(value) + z * cal.granularity - shift))
        scales.append(cal.scale)
        shifts.append(shift)
    value = max(max(noisy), 0.0)
    return Release(
        value=value,
        guarantee=PureDP(eps, neighbours=Neighbours.ADD_REMOVE_USER),
        mechanism="person-level DP distinct count (R2T, Dong et al. 2022)",
        params={"epsilon": eps, "beta": beta, "global_sensitivity": int(global_sensitivity), "thresholds": n},
        error=ErrorStatement(
            f"a lower bound on the number of distinct elements with probability at least {1 - beta / 2:g} "
            f"({n} thresholds up to {taus[-1]}, each with epsilon {eps / n:.4g})",
            bound=None,
            confidence=1 - beta / 2,
        ),
        extras={"noisy": noisy, "scales": scales, "shifts": shifts, "thresholds": taus},
    )


# --------------------------------------------------------------------------------------------
# Shifted inverse
# --------------------------------------------------------------------------------------------


def shifted_inverse_grid(upper_bound: int, error_level: float, epsilon: float, beta: float) -> tuple[int, int]:
    """``(M, tau)``: the grid ``y_i = i * error_level``, ``i = 0..M``, ``M = ceil(log10(D) / error_level)``,
    and the shift ``tau = ceil(2 / eps * ln((M + 1) / beta))`` (Fang et al. 2022, Theorem 4.1)."""
    eps = _check_eps_beta(epsilon, beta)
    d = _check_int(upper_bound, "the upper bound D", 2)
    el = float(error_level)
    if not (math.isfinite(el) and 0 < el <= 1):
        raise ParameterError(f"error_level must lie in (0, 1], got {error_level!r}")
    m = math.ceil(round(math.log10(d) / el, 9))
    tau = math.ceil(2 / eps * math.log((m + 1) / beta))
    return m, tau


def _grid_index(values: np.ndarray, error_level: float, m: int) -> np.ndarray:
    """Grid index ``ceil(log10(v) / error_level)`` of each value (0 for ``v <= 1``), at most ``M``;
    non-decreasing in ``v``."""
    v = np.round(np.asarray(values, dtype=np.float64), 6)
    with np.errstate(divide="ignore"):
        idx = np.ceil(np.round(np.log10(np.maximum(v, 1.0)) / error_level, 9))
    return np.minimum(idx, m).astype(np.int64)


def shifted_inverse_removals(graph: PersonElementGraph, k_max: int, k_min: int = 1) -> np.ndarray:
    """``R_k`` for ``k = 0..k_max``: the LP relaxation of the most elements removed by removing ``k`` persons
    (only ``k >= k_min`` is solved, the rest left 0, to split the work).

    maximise ``sum_v w_v`` s.t. ``w_v <= w_u`` (``u`` an owner of ``v``), ``sum_u w_u <= k``, ``0 <= w <= 1``.
    Elements with the same owners are one variable weighted by their number, and an element with a single
    owner folds into its owner's variable (``w_v = w_u`` at an optimum). Solved by HiGHS (SciPy), in
    floating point.
    """
    from scipy import optimize, sparse

    k_max = _check_int(k_max, "k_max", 0)
    n = graph.n_persons
    out = np.zeros(k_max + 1)
    if graph.n_edges == 0 or k_max == 0:
        return out
    person = np.repeat(np.arange(n, dtype=np.int64), graph.degrees())
    elem = graph.adj.astype(np.int64)
    order = np.lexsort((person, elem))
    elem, person = elem[order], person[order]
    starts = np.flatnonzero(np.r_[True, elem[1:] != elem[:-1]])
    ends = np.r_[starts[1:], elem.size]
    single = ends - starts == 1
    obj_person = np.bincount(person[starts[single]], minlength=n).astype(np.float64)
    groups: dict[tuple[int, ...], int] = {}
    for s, e in zip(starts[~single], ends[~single], strict=True):
        key = tuple(person[s:e].tolist())
        groups[key] = groups.get(key, 0) + 1
    g = len(groups)
    rows, cols = [], []
    for r, key in enumerate(groups):
        rows.extend([r] * len(key))
        cols.extend(key)
    # one row per (group, owner) pair: w_group - w_owner <= 0; the last row: sum_u w_u <= k
    nnz = len(rows)
    pair = np.arange(nnz)
    a_rows = np.r_[pair, pair, np.full(n, nnz)]
    a_cols = np.r_[n + np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64), np.arange(n)]
    a_vals = np.r_[np.ones(nnz), -np.ones(nnz), np.ones(n)]
    a = sparse.csr_matrix((a_vals, (a_rows, a_cols)), shape=(nnz + 1, n + g))
    c = -np.r_[obj_person, np.array(list(groups.values()), dtype=np.float64)]
    for k in range(max(1, int(k_min)), k_max + 1):
        if k >= n:
            out[k] = float(np.unique(graph.adj).size)
            continue
        b = np.r_[np.zeros(nnz), float(k)]
        res = optimize.linprog(c, A_ub=a, b_ub=b, bounds=(0, 1), method="highs")
        if res.status != 0:  # pragma: no cover - the LP is always feasible and bounded
            raise RuntimeError(f"the shifted inverse LP failed: {res.message}")
        out[k] = -res.fun
    return out


def shifted_inverse_law(
    graph: PersonElementGraph | None,
    epsilon: float,
    beta: float = 0.1,
    upper_bound: int = 10**7,
    error_level: float = 0.001,
    removals: np.ndarray | None = None,
    distinct: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The runs the mechanism draws from: ``(start, length, loss)``, one row per maximal run of grid
    indices ``start .. start + length - 1`` sharing the loss ``|g(D, i) - tau|``; run ``r`` is drawn with
    probability ``∝ length_r exp(-eps loss_r / 2)`` and a point uniformly inside it."""
    eps = _check_eps_beta(epsilon, beta)
    m, tau = shifted_inverse_grid(upper_bound, error_level, eps, beta)
    k_max = 2 * tau
    if removals is None:
        removals = shifted_inverse_removals(graph, k_max)
    removals = np.asarray(removals, dtype=np.float64)
    if removals.shape[0] < k_max + 1:
        raise ParameterError(f"removals must hold R_k for k = 0..{k_max}")
    total = float(np.unique(graph.adj).size) if distinct is None else float(distinct)
    f = _grid_index(total - removals[: k_max + 1], error_level, m)
    f = np.minimum.accumulate(f)  # non-increasing in k (the exact LP is; guard the solver's last digits)
    # g(i) = min{k : F_k <= i} (2 tau + 1 if none): constant on [F_k, F_{k-1}) with F_{-1} = M + 1
    uppers = np.r_[m + 1, f]  # run k covers [f[k], uppers[k]) ; run 2tau+1 covers [0, f[2tau])
    starts, lengths, losses = [], [], []
    for k in range(k_max + 1):
        lo, hi = int(f[k]), int(uppers[k])
        if hi > lo:
            starts.append(lo)
            lengths.append(hi - lo)
            losses.append(abs(k - tau))
    if f[k_max] > 0:
        starts.append(0)
        lengths.append(int(f[k_max]))
        losses.append(tau + 1)
    return np.array(starts, dtype=np.int64), np.array(lengths, dtype=np.int64), np.array(losses, dtype=np.int64)


def shifted_inverse_distinct_count(
    graph: PersonElementGraph | None,
    epsilon: float,
    beta: float = 0.1,
    upper_bound: int = 10**7,
    error_level: float = 0.001,
    rng: RngLike = None,
    removals: np.ndarray | None = None,
    distinct: int | None = None,
) -> Release:
    """The (approximate) shifted inverse mechanism (Fang, Dong, Yi, CCS 2022) for the person-level distinct
    count: ``epsilon``-DP (for exact LP optima; see the module's notes on floating point).

    Parameters
    ----------
    upper_bound:
        The public bound ``D`` on the distinct count (the grid runs over ``log10`` values ``0..log10 D``).
    error_level:
        The grid step in ``log10`` (the paper's 0.001: a relative resolution of 0.23%).
    beta:
        The failure probability behind ``tau`` (the paper's 0.1).
    removals, distinct:
        ``R_k`` for ``k = 0..2 tau`` from :func:`shifted_inverse_removals` and the true distinct count, when
        already computed (then ``graph`` is not read).

    Returns
    -------
    Release
        ``value``: ``10^(i * error_level)`` for the drawn grid index ``i``; ``extras["log10"]``: ``i *
        error_level``; ``extras["tau"]``.
    """
    eps = _check_eps_beta(epsilon, beta)
    m, tau = shifted_inverse_grid(upper_bound, error_level, eps, beta)
    src = resolve_rng(rng)
    starts, lengths, losses = shifted_inverse_law(graph, eps, beta, upper_bound, error_level, removals, distinct)
    r = exponential_mechanism(-losses.astype(np.float64), 1.0, eps, src, multiplicities=lengths)  # sensitivity 1
    i = int(starts[r]) + int(src.randbelow(int(lengths[r])))
    y = i * float(error_level)
    return Release(
        value=float(10.0**y),
        guarantee=PureDP(eps, neighbours=Neighbours.ADD_REMOVE_USER),
        mechanism="person-level DP distinct count (shifted inverse, Fang, Dong, Yi 2022; LP relaxation)",
        params={"epsilon": eps, "beta": beta, "upper_bound": int(upper_bound), "error_level": float(error_level)},
        error=ErrorStatement(
            f"within the counts left by removing 0 and {2 * tau} persons with probability at least {1 - beta:g} "
            f"(grid of {m + 1} log10 values, tau {tau})",
            bound=None,
            confidence=1 - beta,
        ),
        extras={"log10": y, "tau": tau, "grid_index": i},
    )

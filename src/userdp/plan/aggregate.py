"""The plan of the per-key aggregates (:func:`userdp.releases.aggregate`): each statistic's noise per key from
public sizes only, with the budget split, the contribution bounds and the value range the prediction assumes.

Everything comes from the library's own plan of the release (:func:`userdp.vocabulary.aggregates.plan_aggregate`:
every refusal, each step's share of ``epsilon``, the noisy quantities the statistics need) and from the
release's sensitivities and calibration (``docs/reference/aggregates.md``): with the bounds ``(L0, Linf)`` and
the lattice ``(r, k_lo, k_hi)`` of the range ``[lo, hi]`` (:func:`~userdp.vocabulary.aggregates.lattice_of`,
``W = k_hi - k_lo``), each noisy quantity gets the lattice Laplace of :func:`userdp.noise.calibrate_laplace`
at the share ``epsilon_quantity`` over the ``n_keys`` keys, of l1 sensitivity ``L0 Linf`` (``N``), ``L0``
(``U``), ``L0 Linf W`` (``S1``) and ``L0 Linf W^2`` (``S2``). Its variance is the discrete Laplace's,
``g^2 2 q / (1 - q)^2``, ``q = e^(-1/t)`` (granularity ``g``, integer scale ``t``): exact.

The statistics (the release's estimators, :func:`~userdp.vocabulary.aggregates.aggregate_estimates`), with
``mid = (k_lo + k_hi) r / 2``, half steps of ``h = r / 2``, a key's kept records ``N`` and the centred first
and second moments ``m1 = (mu - mid) / h`` and ``m2 = (sigma^2 + (mu - mid)^2) / h^2`` of its values (in half
steps):

* ``count`` = ``N~``: ``Var = V_N`` (exact law: the quantiles are the lattice Laplace's);
* ``users`` = ``U~``: ``Var = V_U`` (exact law);
* ``sum`` = ``mid N~ + h S1~``: ``Var = mid^2 V_N + h^2 V_S1`` (exact: linear);
* ``mean`` = ``mid + h S1~ / N~``: by the delta method, ``Var ~ (h^2 V_S1 + (mu - mid)^2 V_N) / N^2``;
* ``variance`` = ``h^2 (S2~ / N~ - (S1~ / N~)^2)``: by the delta method,
  ``Var ~ h^4 (V_S2 + 4 m1^2 V_S1 + (2 m1^2 - m2)^2 V_N) / N^2``;

(the delta method holds when the count's noise is small against ``N``: :attr:`AggregatePrediction.valid`);
the quantiles of ``|error|`` of sum, mean and variance come from the exact noise law pushed through the
release's own estimators (clamps included), seeded, public. A quantile's error is in *ranks*: the exponential
mechanism over the key's ``G`` candidates (:func:`~userdp.vocabulary.aggregates.quantile_grid`: at most 259,
the finest grid; a coarser one chosen privately has fewer), score sensitivity
``Linf`` at ``epsilon_quantile / L0`` (each level's share less the grid's), releases with probability at least
``1 - beta`` a candidate within ``2 L0 Linf (ln G + ln(1 / beta)) / epsilon_quantile`` records of a
``q``-quantile beyond the records between the nearest candidate and it (the exponential mechanism's
utility theorem); the error in value units is that many records' spread, which the data decide, plus the
candidates' spacing ``(hi - lo) / 256``.

**Not predicted:** the bias of the bounds and of the range (records dropped beyond ``(L0, Linf)``, values
clipped to ``[lo, hi]``). With a given ``value_range`` and given ``bounds`` that keep every person whole the
error *is* the noise; otherwise the release's error also holds a bias the data decide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ParameterError
from ..noise import calibrate_laplace, discrete_laplace
from ..vocabulary.aggregates import (
    aggregate_estimates,
    lattice_of,
    plan_aggregate,
    quantile_grid,
    quantity_sensitivities,
)
from .common import Prediction, confidences, laplace_abs_quantile, simulated_quantile

__all__ = ["AggregatePrediction", "aggregate"]

DELTA_METHOD_LIMIT = 0.2  # the delta method is stated valid while the count's noise sd is at most 20% of N
SIMULATED = 4000  # draws of the exact noise law through the estimators, for the quantiles of |error|


@dataclass(frozen=True)
class AggregatePrediction:
    """What :func:`aggregate` predicts for one key of the aggregates release.

    Attributes
    ----------
    stats:
        ``{statistic: Prediction}``: ``count``, ``users``, ``sum``, ``mean``, ``variance`` (``|noise|`` of one
        key's released value, ``extra["sd"]`` its standard deviation; for sum, mean and variance also
        ``extra["simulated rmse"]``, the root mean squared error of the simulated draws) and ``quantile:q`` (the
        rank error, in records).
    noise_sd:
        The noise standard deviation of each noisy quantity (``N``, ``U`` in records and persons; ``S1``,
        ``S2`` in the lattice's half steps and their squares).
    budget:
        Each step's share of ``epsilon`` (the release's own split) and ``delta``.
    bounds, value_range:
        The ``(L0, Linf)`` and ``[lo, hi]`` the prediction is made at, with ``bounds_basis`` and
        ``range_basis`` saying where they come from.
    records:
        A key's kept records ``N`` (``persons`` times the records each keeps on it).
    valid:
        Whether the count's noise sd is at most :data:`DELTA_METHOD_LIMIT` of ``N`` (the delta method's
        ``mean`` and ``variance`` hold; below it the release's clamps dominate and the simulated quantiles
        are the better guide).
    notes:
        What is not predicted.
    """

    stats: dict[str, Prediction]
    noise_sd: dict[str, float]
    budget: dict[str, float]
    bounds: tuple[int, int]
    bounds_basis: str
    value_range: tuple[float, float]
    range_basis: str
    records: float
    valid: bool
    notes: list[str] = field(default_factory=list)

    def sd(self, stat: str) -> float:
        """The predicted noise standard deviation of one key's ``stat``."""
        return float(self.stats[stat].extra["sd"])


def _variance_of(cal) -> float:
    """The variance of ``g DLap(t)``: ``g^2 2 q / (1 - q)^2``, ``q = e^(-1/t)``."""
    one_minus_q = -math.expm1(-1.0 / cal.t)
    q = 1.0 - one_minus_q
    return cal.granularity**2 * 2.0 * q / one_minus_q**2


def _smallest_at_least(grid: tuple[int, ...], x: float) -> int:
    above = [int(g) for g in grid if g >= x]
    return min(above) if above else max(int(g) for g in grid)


def aggregate(
    epsilon: float,
    delta: float = 0.0,
    *,
    persons: float,
    records_per_person: float = 1.0,
    keys_per_person: float = 1.0,
    stats: Any = ("mean",),
    n_keys: int = 1,
    public_keys: bool = True,
    value_range: Any = None,
    value_domain: Any = None,
    bounds: Any = "auto",
    value_mean: float | None = None,
    value_sd: float | None = None,
    range_fraction: float = 0.25,
    select_fraction: float = 0.2,
    key_fraction: float = 0.5,
    max_keys: int | str = "auto",
    beta: float = 0.1,
    confidence: float = 0.9,
    seed: int = 0,
) -> AggregatePrediction:
    """The noise of one key's statistics in :func:`userdp.releases.aggregate`, from public sizes only.

    Parameters
    ----------
    epsilon, delta, stats, public_keys, bounds, range_fraction, select_fraction, key_fraction, max_keys:
        As the release takes them (``public_keys``: whether the keys are given; ``False`` selects them, which
        needs ``delta``); checked by the release's own plan
        (:func:`~userdp.vocabulary.aggregates.plan_aggregate`), which refuses what the release would.
    persons:
        The persons holding a typical key (a public estimate).
    records_per_person:
        The records a typical person holds on such a key; the key keeps ``min(records_per_person, Linf)`` of
        each person's.
    keys_per_person:
        The keys a typical person holds; with ``bounds="auto"`` the prediction is made at the bounds that keep
        such a person whole (the grid's smallest ``L0 >= keys_per_person``, ``Linf >= records_per_person``).
    n_keys:
        The keys released (the calibration covers them all).
    value_range, value_domain:
        A public range ``(lo, hi)`` (nothing spent on it), or a public domain ``(LO, HI)`` searched privately:
        the prediction is then made at the domain's whole width, the widest range the search can return (an
        upper bound of the noise for every statistic but ``sum``, whose ``mid N~`` term follows the range's
        midpoint). ``"geometric"`` cannot be planned: it has no width.
    value_mean, value_sd:
        The typical mean and standard deviation of a key's values (public guesses; the mean's and the
        variance's noise depend on them through the delta method). Default: the range's midpoint and
        ``(hi - lo) / sqrt(12)``, a key whose values spread evenly over the range.
    beta:
        The quantiles' failure probability in the rank bound.
    confidence:
        The higher quantile of ``|error|`` stated beside the median.
    seed:
        The simulated draws' seed (public: nothing here reads data).

    Returns
    -------
    AggregatePrediction
    """
    cs = confidences(confidence)
    if not 0.0 < float(beta) < 1.0:
        raise ParameterError(f"beta must lie in (0, 1), got {beta!r}")
    for name, v, least in (("persons", persons, 1.0), ("records_per_person", records_per_person, 1.0),
                           ("keys_per_person", keys_per_person, 1.0), ("n_keys", n_keys, 1.0)):  # fmt: skip
        try:
            ok = math.isfinite(float(v)) and float(v) >= least
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ParameterError(f"{name} must be a number >= {least:g}, got {v!r}")
    if value_range is None and value_domain is None:
        raise ParameterError("plan the aggregates at a public value range (--range LO,HI) or domain (--domain LO,HI)")
    if isinstance(value_domain, str) and value_range is None:
        raise ParameterError("the geometric domain has no width to plan at: give --range LO,HI or --domain LO,HI")
    plan = plan_aggregate(epsilon, delta, stats=stats, public_keys=public_keys,
                          value_range="auto" if value_range is None else value_range, value_domain=value_domain,
                          bounds=bounds, range_fraction=range_fraction, select_fraction=select_fraction,
                          key_fraction=key_fraction, max_keys=max_keys)  # fmt: skip
    if plan.get("noise", "laplace") != "laplace":
        raise ParameterError(f"no plan for the aggregates with {plan['noise']} noise yet")
    if plan["auto"]:
        l0 = _smallest_at_least(plan["l0s"], float(keys_per_person))
        linf = _smallest_at_least(plan["linfs"], float(records_per_person))
        bounds_basis = (f"auto: chosen privately from the data (GEM); predicted at ({l0}, {linf}), the smallest "
                        f"candidates keeping a typical person ({keys_per_person:g} keys, {records_per_person:g} "
                        "records per key) whole: GEM may pick smaller ones (less noise, records dropped)")  # fmt: skip
    else:
        l0, linf = int(plan["l0s"][0]), int(plan["linfs"][0])
        bounds_basis = "given"
    if plan["range_fixed"]:
        lo, hi = plan["value_range"]
        range_basis = "given"
    else:
        lo, hi = float(plan["grid"][0]), float(plan["grid"][-1])
        range_basis = (f"chosen privately within the domain [{lo:g}, {hi:g}]; predicted at the whole domain, the "
                       "widest range the search can return")  # fmt: skip
    r, klo, khi = lattice_of(lo, hi)
    w = khi - klo
    mid, half = (klo + khi) * r / 2, r / 2
    n = float(persons) * min(float(records_per_person), float(linf))
    mu = mid if value_mean is None else min(max(float(value_mean), lo), hi)
    sd_v = (hi - lo) / math.sqrt(12.0) if value_sd is None else float(value_sd)
    if not (math.isfinite(sd_v) and 0.0 <= sd_v <= hi - lo):
        raise ParameterError(f"value_sd must lie in [0, hi - lo], got {value_sd!r}")
    m1 = (mu - mid) / half
    m2 = (sd_v**2 + (mu - mid) ** 2) / half**2
    eps_q = plan["epsilon_quantity"]
    sens = quantity_sensitivities(l0, linf, w)
    cals = {q: calibrate_laplace(float(sens[q]), eps_q, dim=int(n_keys)) for q in plan["quantities"] if q in sens}
    var = {q: _variance_of(c) for q, c in cals.items()}
    wanted = [name for name, _ in plan["stats"]]

    # the exact noise law through the release's own estimators (clamps included): the quantiles of |error|
    rng = np.random.default_rng(seed)
    exact = {"N": n, "U": float(persons), "S1": n * m1, "S2": n * m2}
    noisy = {q: exact[q] + discrete_laplace(c.t, SIMULATED, rng).astype(np.float64) * c.granularity
             for q, c in cals.items()}  # fmt: skip
    truth = aggregate_estimates({q: np.array([exact[q]]) for q in cals}, lo, hi)
    est = aggregate_estimates(noisy, lo, hi, math.sqrt(var["N"]) if "N" in var else 0.0)  # the release's floor

    out: dict[str, Prediction] = {}
    for name in wanted:
        if name in ("count", "users"):
            q = "N" if name == "count" else "U"
            c = cals[q]
            qs = {x: laplace_abs_quantile(c.t, c.granularity, x) for x in cs}
            out[name] = Prediction("aggregate", f"|noise| of one key's {name}", qs, True,
                                   f"the lattice Laplace's law (sensitivity {sens[q]}, epsilon {eps_q:.4g}): exact",
                                   {"sd": math.sqrt(var[q])})  # fmt: skip
            continue
        if name == "quantile":
            continue
        if name == "sum":
            sd = math.sqrt(mid**2 * var["N"] + half**2 * var["S1"])
            basis = "mid N~ + (r/2) S1~: the sd exact (linear in the two lattice Laplaces)"
        elif name == "mean":
            sd = math.sqrt(half**2 * var["S1"] + (mu - mid) ** 2 * var["N"]) / n
            basis = "mid + (r/2) S1~ / N~: the sd by the delta method in N~ and S1~"
        else:  # variance
            sd = half**2 * math.sqrt(var["S2"] + 4 * m1**2 * var["S1"] + (2 * m1**2 - m2) ** 2 * var["N"]) / n
            basis = "(r/2)^2 (S2~ / N~ - (S1~ / N~)^2): the sd by the delta method in N~, S1~ and S2~"
        err = np.abs(est[name] - truth[name][0])
        qs = {x: simulated_quantile(err, x) for x in cs}
        out[name] = Prediction("aggregate", f"|noise| of one key's {name}", qs, False,
                               basis + f"; the quantiles from {SIMULATED} draws of the exact noise law through the "
                               "release's estimators (clamps included)",
                               {"sd": sd, "simulated rmse": float(np.sqrt(np.mean(err**2)))})  # fmt: skip
    grid_size = int(quantile_grid(lo, hi).size)
    for name, levels in plan["stats"]:
        if name != "quantile":
            continue
        eps_level = plan["epsilon_quantile"]  # each level's per-key draws (the grid's share is apart)
        rank = 2.0 * l0 * linf * (math.log(grid_size) + math.log(1.0 / float(beta))) / eps_level
        for level in levels:
            out[f"quantile:{level!r}"] = Prediction(
                "aggregate", f"records between one key's released {level:g}-quantile and a true one",
                {1.0 - float(beta): rank}, False,
                f"the exponential mechanism's utility theorem: at most {grid_size} candidates (the finest grid), "
                f"score sensitivity {linf} at epsilon {eps_level:.4g} / {l0} keys; beyond the records between the "
                "nearest candidate (spacing "
                f"{(hi - lo) / max(grid_size - 1, 1):.4g}) and the quantile. In value units: that many records' "
                "spread around the quantile, which the data decide (not predicted)",
                {"rank fraction": rank / n, "spacing": (hi - lo) / max(grid_size - 1, 1)},
            )  # fmt: skip
    budget = {
        "epsilon": plan["epsilon"],
        "delta": plan["delta"],
        "keys": plan["epsilon_keys"],
        "bounds": plan["epsilon_select"],
        "value range": plan["epsilon_range"],
        **{f"noisy {q}": eps_q for q in plan["quantities"]},
    }
    notes = []
    if plan["auto"] or float(keys_per_person) > l0 or float(records_per_person) > linf:
        notes.append("records beyond the bounds (L0, Linf) are dropped: a bias the data decide, not predicted")
    if not plan["range_fixed"]:
        notes.append("values outside the privately chosen range are clipped: a bias the data decide, not predicted")
    else:
        notes.append("values outside the given range are clipped: a bias the data decide (none if the range holds "
                     "them all), not predicted")  # fmt: skip
    if not public_keys:
        notes.append("keys selected privately: a key held by few persons may not be released at all")
    return AggregatePrediction(
        out, {q: math.sqrt(v) for q, v in var.items()}, budget, (l0, linf), bounds_basis, (float(lo), float(hi)),
        range_basis, n, math.sqrt(var.get("N", 0.0)) <= DELTA_METHOD_LIMIT * n, notes,
    )  # fmt: skip

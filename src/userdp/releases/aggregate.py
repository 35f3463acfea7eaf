"""The per-key aggregates release: a table of ``(person, key, value)`` records -> per key, any of ``count``,
``users``, ``sum``, ``mean``, ``variance`` and ``quantile:q`` of the values, under person-level DP, with the
keys (unless public), the contribution bounds ``(L0, Linf)`` and the value range chosen privately by default
(:mod:`userdp.vocabulary.aggregates`).

Every per-person step runs where the data are, on batches of whole persons
(:meth:`~userdp.engines.Engine.key_value_sums`): the key selection's bounded keys, the bounds' kept records,
the range's counts of kept values beyond each grid point, the quantiles' per-person grid levels and the
per-key sums. One row per key (or per candidate) reaches the driver, which selects, chooses and adds the
noise. Engines: memory, DuckDB (and ``"chunked"``) and Spark, equal values on the same seed.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np

from ..engines import Engine, get_engine
from ..engines.base import KeyValues, bounded_item_sums_of, key_records_from_triples
from ..errors import ParameterError
from ..noise import RngLike, exponential_mechanism, resolve_rng
from ..noise.trace import step as draw_step
from ..privacy.guarantees import ApproxDP, Neighbours, PureDP
from ..privacy.params import warn_large_delta
from ..privacy.result import ErrorStatement, Release
from ..vocabulary import BOUND_GRID, choose_bounds_from_kept, kept_grid_part, select_counted_keys
from ..vocabulary.aggregates import (
    aggregate_estimates,
    choose_resolution,
    choose_value_range,
    count_noise_sd,
    integer_laplace,
    lattice_of,
    plan_aggregate,
    quantile_counts_part,
    quantile_grid,
    quantile_scores,
    quantity_sensitivities,
    range_counts_part,
    range_threshold,
    resolution_counts_part,
    resolution_levels,
    stat_sums_part,
)

__all__ = ["aggregate"]


def _sets_of(batch: KeyValues):
    """A batch's persons as the per-key counts read them: each person's keys and records per key."""
    return key_records_from_triples(np.asarray(batch.users), np.asarray(batch.keys, dtype=object),
                                    np.ones(len(batch.keys), dtype=np.int64))  # fmt: skip


def _records_part(batch: KeyValues, fn: Any):
    sets, mult = _sets_of(batch)
    lab, rows = fn(sets, mult)
    return lab, np.asarray(rows, dtype=np.int64)


def _items_part(batch: KeyValues, cap: int, keep: Any, weights: Any):
    sets, _ = _sets_of(batch)
    return bounded_item_sums_of(sets, cap, keep, weights)


def _check_engine(engine: Any, source: Any) -> Engine:
    eng = get_engine(engine, source)
    if not eng.supports_key_values:
        raise ParameterError(f"per-key aggregates run on the memory, DuckDB and Spark engines, not {eng.name}")
    return eng


def aggregate(
    source: Any,
    epsilon: float,
    delta: float = 0.0,
    *,
    user: str = "user",
    key: str = "key",
    value: str = "value",
    stats: Any = ("mean",),
    keys: Any = None,
    value_range: Any = "auto",
    value_domain: Any = None,
    bounds: Any = "auto",
    range_fraction: float = 0.25,
    select_fraction: float = 0.2,
    key_fraction: float = 0.5,
    max_keys: int | str = "auto",
    l0s: tuple[int, ...] = BOUND_GRID,
    linfs: tuple[int, ...] = BOUND_GRID,
    engine: Engine | str | None = None,
    rng: RngLike = None,
) -> Release:
    """Per-key statistics of the ``value`` column, ``(epsilon, delta)``-DP for adding or removing one person
    with all of their records (pure with public keys).

    Parameters
    ----------
    source:
        A path, a :class:`~userdp.data.FileSource`, an Arrow table, a pandas or polars frame, a Spark DataFrame
        (``engine="spark"``).
    user, key, value:
        The person column, the key column (text or whole numbers, compared as text) and the numeric value column.
    stats:
        Any of ``"count"`` (records per key, ``N``), ``"users"`` (distinct persons per key, ``U``), ``"sum"``,
        ``"mean"``, ``"variance"`` and ``"quantile:q"`` (``q`` in ``(0, 1)``; ``"quantile:0.1,0.9"`` for
        several), of each key's kept values (see :mod:`userdp.vocabulary.aggregates`).
    keys:
        The public keys (a list of labels; listed keys without data get noise like the others), or ``None``
        to select them privately (needs ``delta > 0``), as :func:`userdp.releases.key_counts` does.
    value_range:
        ``"auto"`` (the default): ``[lo, hi]`` chosen privately (:func:`userdp.vocabulary.aggregates.
        choose_value_range`, ``range_fraction`` of the budget left after the keys and the bounds); or a public
        pair ``(lo, hi)``, which spends nothing.
    value_domain:
        With ``value_range="auto"``: ``None`` (the default) searches the default grid
        :data:`~userdp.vocabulary.aggregates.VALUE_GRID` (0 and ``±{1, 1.25, 1.5, 1.75} 2^j``, ``j`` in
        ``[-10, 40]``; ``"geometric"`` names it), no domain needed; a public pair ``(LO, HI)`` searches its 65
        evenly spaced points instead. Each end is the grid point past which ``min(max(T, R), N / 2)`` kept
        values lie, rounded outward (tie-aware: a tied value is kept whole), ``T`` the public target that
        balances the noise against the clipping (:func:`~userdp.vocabulary.aggregates.range_threshold`) and
        ``R`` the mechanism's resolution; sensitivity ``L0 Linf`` (:func:`~userdp.vocabulary.aggregates.
        choose_value_range`).
    bounds, select_fraction, key_fraction, max_keys, l0s, linfs:
        As in :func:`userdp.releases.key_counts`.
    engine, rng:
        ``"memory"``, ``"duckdb"``, ``"chunked"``, ``"spark"`` or ``"auto"``/``None``; ``rng`` as in
        :func:`userdp.releases.heatmap`.

    Returns
    -------
    Release
        ``value``: ``{"keys": labels (sorted), <stat>: array per key, ..., "quantiles": {q: array}, "lo", "hi",
        "l0", "linf"}``; ``params`` states every share of ``epsilon``; ``extras["composed_of"]`` each step's
        guarantee.
    """
    public = None if keys is None else np.asarray([str(k) for k in keys], dtype=object)
    if public is not None and public.size == 0:
        raise ParameterError("keys is empty: list at least one public key (or None to select them)")
    plan = plan_aggregate(epsilon, delta, stats=stats, public_keys=public is not None, value_range=value_range,
                          value_domain=value_domain, bounds=bounds, range_fraction=range_fraction,
                          select_fraction=select_fraction, key_fraction=key_fraction, max_keys=max_keys,
                          l0s=l0s, linfs=linfs)  # fmt: skip  # every refusal before the data are read
    for name in (user, key, value):
        if not isinstance(name, str) or not name:
            raise ParameterError(f"column names must be non-empty text, got {name!r}")
    if len({user, key, value}) != 3:
        raise ParameterError("the user, key and value columns must be three different columns")
    eng = _check_engine(engine, source)
    warn_large_delta(delta)
    data = eng.load_key_values(source, user, key, value)
    return aggregate_from_sums(partial(eng.key_value_sums, data), plan, public_keys=public, rng=resolve_rng(rng))


def aggregate_from_sums(value_sums: Any, plan: dict, *, public_keys: np.ndarray | None = None,
                        rng: RngLike = None) -> Release:  # fmt: skip
    """The release from ``value_sums(fn, width)`` (:meth:`userdp.engines.Engine.key_value_sums` of the loaded
    records) and :func:`~userdp.vocabulary.aggregates.plan_aggregate`'s plan."""
    src = resolve_rng(rng)

    def record_sums(fn, width):
        return value_sums(partial(_records_part, fn=fn), width)

    def item_sums(cap, keep, weights):
        return value_sums(partial(_items_part, cap=cap, keep=keep, weights=weights), 2)

    sel = select_counted_keys(item_sums, record_sums, plan, public_keys, src)
    counted = sel["keys"]
    n_keys = counted.size
    eps_q = plan["epsilon_quantity"]
    if plan["auto"]:  # the bounds: GEM over the grid, scores from the kept records (the counts')
        width = len(plan["l0s"]) * len(plan["linfs"])
        _, kept = record_sums(partial(kept_grid_part, counted=counted, l0s=plan["l0s"], linfs=plan["linfs"]), width)
        kept = np.asarray(kept, dtype=np.int64).reshape(-1, width)
        kept = kept[0] if kept.shape[0] else np.zeros(width, dtype=np.int64)
        with draw_step("bounds"):
            l0, linf, _ = choose_bounds_from_kept(kept, n_keys, plan["epsilon_select"], eps_q, 0.0, "laplace",
                                                  plan["l0s"], plan["linfs"], rng=src)  # fmt: skip
    else:
        l0, linf = plan["l0s"][0], plan["linfs"][0]
    l0, linf = int(l0), int(linf)
    threshold = None
    if plan["range_fixed"]:
        lo, hi = plan["value_range"]
    else:  # the range: the kept values beyond each grid point, ranked on the public grid (tie-aware)
        grid = plan["grid"]
        _, rows = value_sums(partial(range_counts_part, counted=counted, l0=l0, linf=linf, grid=grid),
                             1 + 2 * grid.size)  # fmt: skip
        row = rows[0] if len(rows) else np.zeros(1 + 2 * grid.size, dtype=np.int64)
        threshold = range_threshold(n_keys, count_noise_sd(plan, l0, linf, n_keys))
        with draw_step("range"):
            lo, hi, _ = choose_value_range(row, grid, plan["epsilon_range"], threshold, l0 * linf, src)
    r, klo, khi = lattice_of(lo, hi)
    w = khi - klo
    sens = quantity_sensitivities(l0, linf, w)
    sums = np.zeros((n_keys, 4), dtype=np.int64)
    got, rows = value_sums(partial(stat_sums_part, counted=counted, l0=l0, linf=linf, lo=lo, hi=hi), 4)
    if len(got):
        sums[np.searchsorted(counted, np.array([str(x) for x in got], dtype=object))] = rows
    noisy, sds = {}, {}
    column = {"N": 0, "U": 1, "S1": 2, "S2": 3}
    for q in plan["quantities"]:
        if q in column:
            with draw_step(q):
                noisy[q], sds[q] = integer_laplace(sums[:, column[q]], sens[q], eps_q, src)
    out: dict[str, Any] = {"keys": counted}
    est = aggregate_estimates(noisy, lo, hi, sds.get("N", 0.0))
    wanted = [n for n, _ in plan["stats"]]
    for n in wanted:
        if n in est:
            out[n] = est[n]
    levels = [q for n, qs in plan["stats"] if n == "quantile" for q in qs]
    level = None
    if levels:  # the grid (one choice for every level), then per key the exponential mechanism on it
        res = resolution_levels(lo, hi)
        _, rrows = value_sums(partial(resolution_counts_part, counted=counted, l0=l0, linf=linf, lo=lo, hi=hi),
                              1 + res.size)  # fmt: skip
        rrow = rrows[0] if len(rrows) else np.zeros(1 + res.size, dtype=np.int64)
        with draw_step("quantile_resolution"):  # sensitivity 1: one level per person
            level, _ = choose_resolution(rrow, res, plan["epsilon_resolution"], rng=src)
        cand = quantile_grid(lo, hi, level)
        g = cand.size
        got, rows = value_sums(partial(quantile_counts_part, counted=counted, l0=l0, linf=linf, lo=lo, hi=hi,
                                       level=level), 2 * g + 1)  # fmt: skip
        table = np.zeros((n_keys, 2 * g + 1), dtype=np.int64)
        if len(got):
            table[np.searchsorted(counted, np.array([str(x) for x in got], dtype=object))] = rows
        out["quantiles"] = {}
        for q in levels:
            picks = np.zeros(n_keys, dtype=np.int64)
            with draw_step(f"Q{q!r}"):
                for i in range(n_keys):  # a person holds at most Linf values of a key, on at most L0 keys
                    scores = quantile_scores(table[i, :g], table[i, g:-1], int(table[i, -1]), q)
                    picks[i] = exponential_mechanism(scores, float(linf), plan["epsilon_quantile"] / l0, src)
            out["quantiles"][q] = cand[picks].astype(np.float64) * r if n_keys else np.zeros(0)
    out.update({"lo": float(lo), "hi": float(hi), "l0": l0, "linf": linf})
    eps, dlt = plan["epsilon"], plan["delta"]
    user = Neighbours.ADD_REMOVE_USER
    guarantee = PureDP(eps, user) if plan["delta_keys"] == 0 else ApproxDP(eps, dlt, user)
    parts: dict = {}
    if sel["epsilon_max_keys"] > 0:
        parts["max_keys"] = PureDP(sel["epsilon_max_keys"], user)
    if sel["key_plan"] is not None:
        parts["keys"] = ApproxDP(sel["key_plan"]["epsilon_set"], sel["key_plan"]["delta_set"], user)
    if plan["epsilon_select"] > 0:
        parts["bounds"] = PureDP(plan["epsilon_select"], user)
    if plan["epsilon_range"] > 0:
        parts["range_lo"] = PureDP(plan["epsilon_range"] / 2, user)
        parts["range_hi"] = PureDP(plan["epsilon_range"] / 2, user)
    if levels:
        parts["quantile_resolution"] = PureDP(plan["epsilon_resolution"], user)
    for q in plan["quantities"]:
        parts[q] = PureDP(plan["epsilon_quantile"] if q.startswith("Q") else eps_q, user)
    params = {
        "epsilon": eps,
        "delta": dlt,
        "stats": [n if not qs else f"{n}:{','.join(repr(x) for x in qs)}" for n, qs in plan["stats"]],
        "keys": sel["how"],
        "max_keys": sel["max_keys"],
        "epsilon_keys": plan["epsilon_keys"],
        "delta_keys": plan["delta_keys"],
        "epsilon_max_keys": sel["epsilon_max_keys"],
        "bounds": "auto" if plan["auto"] else "given",
        "epsilon_select": plan["epsilon_select"],
        "l0": l0,
        "linf": linf,
        "value_range": "unused" if plan["range_unused"] else "given" if plan["range_fixed"] else "auto",
        "value_domain": plan["value_domain"],
        "range_threshold": threshold,
        "epsilon_range": plan["epsilon_range"],
        "lo": float(lo),
        "hi": float(hi),
        "resolution": r,
        "quantities": list(plan["quantities"]),
        "epsilon_quantity": eps_q,
        "epsilon_resolution": plan["epsilon_resolution"] if levels else 0.0,
        "epsilon_quantile": plan["epsilon_quantile"] if levels else 0.0,
        "quantile_step": math.ldexp(r, level) if level is not None else None,
        "sensitivity": {q: sens[q] for q in plan["quantities"] if q in sens}
        | {q: f"{linf} per key, {l0} keys" for q in plan["quantities"] if q not in sens}
        | ({"quantile_resolution": 1} if levels else {}),
        "noise_sd": sds,
    }
    error = ErrorStatement(
        ("no value read (count and users only: no range chosen, nothing spent on one); " if plan["range_unused"]
         else f"values clipped to [{lo:.6g}, {hi:.6g}] ({'given' if plan['range_fixed'] else 'chosen privately'}) "
              f"on a lattice of step {r:.3g}; ")
        + f"each person's {l0} keys of most records and at most {linf} records on each "
        f"({'chosen by GEM' if plan['auto'] else 'given'}); " + "; ".join(f"{q} noise sd {sds[q]:.3g}" for q in sds)
        + (f"; the range was chosen privately over "
           f"{'the default grid (0 and +-{1, 1.25, 1.5, 1.75} 2^j)' if plan['value_domain'] is None else 'the domain'}"
           f": each end the grid point past which min({threshold:.3g}, half the kept values) lie, rounded outward "
           "(the target that balances the noise a wider range adds against the clipping it removes); with few "
           "persons for the budget an end can land far from the data, which a public value_range (--range) avoids"
           if not plan["range_fixed"] else "")
    )  # fmt: skip
    mechanism = (
        "per-key aggregates: "
        + ", ".join(params["stats"])
        + f" (Laplace on the integer lattice; bounds {params['bounds']}, range {params['value_range']})"
    )
    return Release(out, guarantee, mechanism, params, error, {"composed_of": parts})

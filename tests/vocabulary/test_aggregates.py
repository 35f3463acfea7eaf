"""The per-key aggregates' mechanisms (:mod:`userdp.vocabulary.aggregates`): the bounding against its
definition, every per-person sum's sensitivity over remove-one-person neighbours (and the range's rank
scores' sensitivity 1, which a per-record variant breaks), the lattice, the integer Laplace noise's scale
(30% off rejected) and every refusal made from the parameters alone."""

from __future__ import annotations

import math

import numpy as np
import pytest

from userdp.engines.base import KeyValues
from userdp.errors import ParameterError
from userdp.vocabulary.aggregates import (
    VALUE_GRID,
    bounded_rows,
    choose_resolution,
    integer_laplace,
    lattice_of,
    plan_aggregate,
    quantile_counts_part,
    quantile_grid,
    range_counts_part,
    range_scores,
    resolution_counts_part,
    resolution_levels,
    stat_sums_part,
)


def _persons(rng, n_persons=12, n_keys=4, max_rows=6):
    """``(users, keys, values)`` records: each person some keys, some records on each, values in [-3, 9]."""
    users, keys, values = [], [], []
    for u in range(n_persons):
        for k in rng.choice(n_keys, int(rng.integers(1, n_keys + 1)), replace=False):
            for _ in range(int(rng.integers(1, max_rows + 1))):
                users.append(f"p{u}")
                keys.append(f"k{k}")
                values.append(float(rng.uniform(-3, 9)))
    return np.array(users, dtype=object), np.array(keys, dtype=object), np.array(values)


def _without(batch, u):
    keep = batch.users != u
    return KeyValues(batch.users[keep], batch.keys[keep], batch.values[keep])


def _brute_keep(users, keys, values, l0, linf):
    """The kept (user, key, value) multiset by the definition, person by person."""
    out = []
    for u in sorted(set(users)):
        mine = [(k, v) for uu, k, v in zip(users, keys, values, strict=True) if uu == u]
        per = {}
        for k, v in mine:
            per.setdefault(k, []).append(v)
        ranked = sorted(per, key=lambda k: (-len(per[k]), k))[:l0]
        for k in ranked:
            vs = sorted(per[k])
            m = len(vs)
            idx = range(m) if m <= linf else [((2 * i + 1) * m) // (2 * linf) for i in range(linf)]
            out += [(u, k, vs[i]) for i in idx]
    return sorted(out)


def test_bounding_keeps_each_person_s_l0_keys_of_most_records_and_spread_order_statistics():
    rng = np.random.default_rng(1)
    for _ in range(20):
        users, keys, values = _persons(rng)
        counted = np.array(sorted(set(keys)), dtype=object)
        from userdp.vocabulary.aggregates import _restricted_rows

        person, code, vals = _restricted_rows(KeyValues(users, keys, values), counted)
        names = np.array(sorted(set(users)), dtype=object)
        for l0, linf in [(1, 1), (2, 3), (3, 2), (8, 8)]:
            keep = bounded_rows(person, code, vals, l0, linf)
            got = sorted(zip(names[person[keep]], counted[code[keep]], vals[keep], strict=True))
            assert got == _brute_keep(users, keys, values, l0, linf)


@pytest.mark.parametrize(("l0", "linf"), [(1, 1), (2, 3), (4, 2)])
def test_one_person_moves_each_sum_by_at_most_its_sensitivity(l0, linf):
    """Over every remove-one-person neighbour: records ``N`` by ``L0 Linf`` (l1 over keys), persons ``U`` by
    ``L0``, ``S1`` by ``L0 Linf W``, ``S2`` by ``L0 Linf W^2``; and some neighbour moves ``N`` by more than
    ``Linf`` when ``L0 > 1`` (so ``Linf`` alone would not do)."""
    rng = np.random.default_rng(2)
    lo, hi = -1.0, 5.0
    _, klo, khi = lattice_of(lo, hi)
    w = khi - klo
    sens = np.array([l0 * linf, l0, l0 * linf * w, l0 * linf * w * w])
    worst = np.zeros(4)
    for _ in range(15):
        batch = KeyValues(*_persons(rng))
        counted = np.array(sorted(set(batch.keys)), dtype=object)

        def table(b, counted=counted):
            lab, rows = stat_sums_part(b, counted, l0, linf, lo, hi)
            out = np.zeros((counted.size, 4), dtype=np.int64)
            out[np.searchsorted(counted, lab)] = rows
            return out

        here = table(batch)
        for u in sorted(set(batch.users)):
            worst = np.maximum(worst, np.abs(here - table(_without(batch, u))).sum(axis=0))
    assert np.all(worst <= sens), (worst, sens)
    if l0 > 1:
        assert worst[0] > linf


def _range_sensitivity(part, datasets, threshold) -> float:
    """The largest move of the range's rank scores (both ends, every candidate, the target ``min(T, N / 2)``
    moving with ``N``) over remove-one-person neighbours, with ``part`` computing the counts."""
    worst = 0.0
    g = VALUE_GRID.size
    for batch in datasets:
        counted = np.array(sorted(set(batch.keys)), dtype=object)

        def scores(b, counted=counted):
            row = part(b, counted)[1][0]
            m = min(threshold, row[0] / 2)
            below, above = row[1 : 1 + g], row[1 + g :]
            return np.r_[range_scores(below[:-1], below[1:], m), range_scores(above[1:], above[:-1], m)]

        here = scores(batch)
        for u in sorted(set(batch.users)):
            worst = max(worst, float(np.max(np.abs(here - scores(_without(batch, u))))))
    return worst


def _unbounded_part(batch, counted):
    """A broken variant: every record of the person ranked (not only the ``L0 Linf`` they keep)."""
    g = VALUE_GRID
    v = np.sort(np.asarray(batch.values))
    row = np.r_[v.size, np.searchsorted(v, g, side="left"), v.size - np.searchsorted(v, g, side="right")]
    return np.array([""], dtype=object), row.reshape(1, -1).astype(np.int64)


def test_the_range_scores_move_by_at_most_l0_linf_and_an_unbounded_variant_is_caught():
    rng = np.random.default_rng(3)
    data = [KeyValues(*_persons(rng, n_persons=10)) for _ in range(10)]
    for threshold in (3.0, 1e9):  # the target at T, and at N / 2
        ok = _range_sensitivity(lambda b, c: range_counts_part(b, c, 2, 2, VALUE_GRID), data, threshold)
        assert 1.5 < ok <= 4.0
        assert _range_sensitivity(_unbounded_part, data, threshold) > 6.0  # the check catches the broken variant


def test_range_scores_are_zero_exactly_on_the_cell_past_which_the_target_lies():
    """Values 5 (tied) and the grid ..., 4, 5, 6, ...: with ``m`` values above, ``hi = 5`` scores 0 and every
    candidate past it ``-m``; ``lo`` likewise on the values rounded down."""
    grid = np.array([3.0, 4.0, 5.0, 6.0, 7.0])
    above = np.array([10, 10, 0, 0, 0])  # ten values of 5
    s = range_scores(above[1:], np.r_[np.inf, above[1:-1]], 2.0)  # hi's candidates above lo = 3
    assert list(s) == [-8.0, 0.0, -2.0, -2.0]
    below = np.array([0, 0, 0, 10, 10])  # ten values of 5 below 6
    assert list(range_scores(below[:-1], below[1:], 2.0)) == [-2.0, -2.0, 0.0, -8.0]
    assert grid[1 + int(np.argmax(s))] == 5.0


def test_quantile_counts_move_by_at_most_linf_per_key_on_at_most_l0_keys():
    rng = np.random.default_rng(4)
    l0, linf = 2, 3
    for _ in range(10):
        batch = KeyValues(*_persons(rng))
        counted = np.array(sorted(set(batch.keys)), dtype=object)

        def table(b, counted=counted):
            lab, rows = quantile_counts_part(b, counted, l0, linf, -1.0, 5.0)
            out = np.zeros((counted.size, rows.shape[1] if rows.size else 2 * 257 + 1), dtype=np.int64)
            out[np.searchsorted(counted, lab)] = rows
            return out

        here = table(batch)
        for u in sorted(set(batch.users)):
            d = np.abs(here - table(_without(batch, u)))
            assert d.max() <= linf and np.count_nonzero(d.max(axis=1)) <= l0


def test_the_lattice_keeps_rounded_values_in_the_range():
    for lo, hi in [(1.0, 5.0), (-3.3, 7.1), (0.0, 1e-3), (-1e9, 2.5e9), (1.5, 1.5000001)]:
        r, klo, khi = lattice_of(lo, hi)
        assert math.log2(r).is_integer() and 0 < khi - klo <= 4096
        assert lo <= klo * r and khi * r <= hi and (khi - klo + 2) * r >= hi - lo
        rng = np.random.default_rng(5)
        batch = KeyValues(np.array(["a"] * 50, dtype=object), np.array(["k"] * 50, dtype=object),
                          rng.uniform(lo - (hi - lo), hi + (hi - lo), 50))  # fmt: skip
        _, rows = stat_sums_part(batch, np.array(["k"], dtype=object), 1, 50, lo, hi)
        assert rows[0, 0] == 50 and rows[0, 3] <= 50 * (khi - klo) ** 2


def test_integer_laplace_has_the_stated_scale_and_stays_on_its_lattice():
    sens, eps = 6, 0.5
    out, sd = integer_laplace(np.full(20000, 123, dtype=np.int64), sens, eps, np.random.default_rng(6))
    want = math.sqrt(2) * sens / eps
    assert sd == pytest.approx(want, rel=1e-6)
    est = float(np.sqrt(np.mean((out - 123) ** 2)))
    assert abs(est / want - 1) < 0.05 and abs(est / (1.3 * want) - 1) > 0.15 and abs(est / (0.7 * want) - 1) > 0.2
    big, _ = integer_laplace(np.array([2**40 + 1, -(2**50) - 3]), 2**44, 0.3, np.random.default_rng(7))
    assert np.all(np.isfinite(big))


def test_every_refusal_comes_from_the_parameters_alone():
    with pytest.raises(ParameterError, match="unknown statistic"):
        plan_aggregate(1.0, stats=["median"])
    with pytest.raises(ParameterError, match="quantile"):
        plan_aggregate(1.0, stats=["quantile:1.5"])
    with pytest.raises(ParameterError, match="quantile"):
        plan_aggregate(1.0, stats=["quantile"])
    with pytest.raises(ParameterError, match="at least one"):
        plan_aggregate(1.0, stats=[])
    with pytest.raises(ParameterError, match="value_range"):
        plan_aggregate(1.0, value_range=(5, 1))
    with pytest.raises(ParameterError, match="value_range"):
        plan_aggregate(1.0, value_range="wide")
    with pytest.raises(ParameterError, match="not both"):
        plan_aggregate(1.0, value_range=(0, 1), value_domain=(0, 1))
    with pytest.raises(ParameterError, match="value_domain"):
        plan_aggregate(1.0, value_domain=(0, float("inf")))
    with pytest.raises(ParameterError, match="range_fraction"):
        plan_aggregate(1.0, range_fraction=1.0)
    with pytest.raises(ParameterError, match="delta > 0"):
        plan_aggregate(1.0, public_keys=False)
    with pytest.raises(ParameterError, match="too small"):
        plan_aggregate(1e-6, stats=["variance"])
    p = plan_aggregate(1.0, stats=["mean", "count", "variance", "quantile:0.5", "quantile:0.9,0.5"],
                       value_domain="geometric")
    assert p["quantities"] == ["N", "S1", "S2", "Q0.5", "Q0.9"]
    assert p["epsilon_select"] == pytest.approx(0.2) and p["epsilon_range"] == pytest.approx(0.2)
    assert p["epsilon_quantity"] * 5 + p["epsilon_range"] + p["epsilon_select"] <= 1.0
    fixed = plan_aggregate(1.0, value_range=(1, 5), bounds=(2, 2))
    assert fixed["epsilon_range"] == 0.0 and fixed["epsilon_select"] == 0.0
    assert fixed["epsilon_quantity"] == pytest.approx(0.5)


# --------------------------------------------------------------------------------------------
# The quantiles' grid: the persons' resolution (sensitivity 1), the candidates, the split
# --------------------------------------------------------------------------------------------


def _resolution_row(batch, l0=2, linf=3, lo=-1.0, hi=5.0):
    counted = np.array(sorted(set(batch.keys)), dtype=object)
    _, rows = resolution_counts_part(batch, counted, l0, linf, lo, hi)
    return rows[0]


def test_the_resolution_counts_move_by_at_most_one_per_person():
    """Each person is one level ``v_p``: removing one moves ``n`` by 1 and every ``#{v_p <= j}`` by at most 1
    (so the tie-aware rank score moves by at most ``max(q, 1 - q)``: sensitivity 1)."""
    rng = np.random.default_rng(21)
    for _ in range(10):
        users, keys, values = _persons(rng)
        values = np.where(rng.random(values.size) < 0.7, np.round(values * rng.choice([1, 2, 4])) / 4, values)
        batch = KeyValues(users, keys, values)
        here = _resolution_row(batch)
        assert np.all(np.diff(here[1:]) >= 0) and here[-1] == here[0]  # a CDF over the levels, ending at n
        for u in sorted(set(users)):
            d = here - _resolution_row(_without(batch, u))
            assert d[0] == 1 and d.min() >= 0 and d.max() <= 1


def test_the_resolution_finds_the_grid_the_values_lie_on():
    """Integer values on [1, 5] (lattice step 2^-10): the persons' level is 10 (a step of 1), half-integers 9,
    and the choice at a generous epsilon is that level; the candidates are the multiples and the ends."""
    rng = np.random.default_rng(22)
    n = 300
    users = np.repeat([f"p{i}" for i in range(n)], 3)
    keys = np.tile(["a", "b", "c"], n).astype(object)
    for values, want in [(rng.integers(1, 6, users.size).astype(float), 1.0),
                         (rng.integers(2, 11, users.size) / 2.0, 0.5),
                         (rng.uniform(1, 5, users.size), None)]:  # fmt: skip
        row = _resolution_row(KeyValues(users, keys, values), l0=3, linf=1, lo=1.0, hi=5.0)
        levels = resolution_levels(1.0, 5.0)
        level, info = choose_resolution(row, levels, 2.0, rng=np.random.default_rng(1))
        r, klo, khi = lattice_of(1.0, 5.0)
        if want is None:  # continuous values: the finest grid, at most 257 points and the ends
            assert level == levels[0] and quantile_grid(1.0, 5.0, level).size <= 259
        else:
            assert math.ldexp(r, level) == want, (want, info)
            assert np.array_equal(quantile_grid(1.0, 5.0, level) * r, np.arange(1.0, 5.0 + want / 2, want))
    grid = quantile_grid(0.3, 7.9, levels[-1])
    r, klo, khi = lattice_of(0.3, 7.9)
    assert grid[0] == klo and grid[-1] == khi and np.all(grid[1:-1] % (1 << int(levels[-1])) == 0)


def test_the_quantiles_grid_and_levels_share_their_budget():
    p = plan_aggregate(1.0, stats=["mean", "quantile:0.5,0.9"], value_range=(1, 5), bounds=(2, 2))
    assert p["epsilon_resolution"] == pytest.approx(0.1 * 2 * p["epsilon_quantity"])
    assert p["epsilon_resolution"] + 2 * p["epsilon_quantile"] <= 2 * p["epsilon_quantity"]
    assert p["epsilon_quantile"] == pytest.approx(0.9 * p["epsilon_quantity"])
    q = plan_aggregate(1.0, stats=["mean"], value_range=(1, 5), bounds=(2, 2))
    assert q["epsilon_resolution"] == 0.0

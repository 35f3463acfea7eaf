"""The policy greedy set union (Carvalho, Wang & Gondara, AAAI 2022) on the lattice: the update rule, its l1
non-expansiveness checked exhaustively on small lattices (and the same check refuting the histogram-ordered
greedy and an update that overfills past the cutoff), the new-item bound, an exact audit of the output law
through the library's default path with broken calibrations caught, the sampler path against that law, the
release and its local counts, Spark against memory, and the CLI."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math

import numpy as np
import pytest

from userdp.errors import ParameterError
from userdp.vocabulary import calibrate_union, greedy_delta_new, policy_greedy_union, private_vocabulary
from userdp.vocabulary.greedy import _greedy_fill, greedy_histogram_in_order, kept_counts, local_counts


def _update(h, mine, counts, cutoff, unit, priority):
    """One person's update F(h), through the library's kernel."""
    out = np.array(h, dtype=np.int64)
    _greedy_fill(np.array([0, len(mine)], dtype=np.int64), np.array(mine, dtype=np.int64),
                 np.array(counts, dtype=np.int64), np.zeros(1, dtype=np.int64), np.asarray(priority, dtype=np.int64),
                 np.int64(cutoff), np.int64(unit), out)  # fmt: skip
    return out


def test_the_update_fills_items_to_the_cutoff_most_held_first():
    # counts (1, 3, 2): item 1 first (gap 6), then item 2 (gap 4 of 10 - 6 = 4 left), item 0 nothing
    assert list(_update([0, 4, 6], [0, 1, 2], [1, 3, 2], 10, 10, [0, 1, 2])) == [0, 10, 10]
    # the budget runs out in the middle of an item
    assert list(_update([0, 4, 6], [0, 1, 2], [1, 3, 2], 10, 8, [0, 1, 2])) == [0, 10, 8]
    # equal counts: the priority decides (item 2 first)
    assert list(_update([0, 0, 0], [0, 1, 2], [1, 1, 1], 10, 5, [2, 1, 0])) == [0, 0, 5]
    # items at or past the cutoff are skipped, not raised; items outside the person's set untouched
    assert list(_update([10, 12, 3, 1], [0, 1, 2], [9, 8, 1], 10, 4, [0, 1, 2, 3])) == [10, 12, 7, 1]
    # everything fills: the leftover budget is not spent elsewhere
    assert list(_update([9, 9, 0], [0, 1], [1, 1], 10, 100, [0, 1, 2])) == [10, 10, 0]
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 7))
        h = rng.integers(0, 30, n)
        mine = sorted(rng.choice(n, int(rng.integers(1, n + 1)), replace=False))
        cutoff, unit = int(rng.integers(1, 30)), int(rng.integers(1, 40))
        out = _update(h, mine, rng.integers(1, 4, len(mine)), cutoff, unit, rng.permutation(n))
        gap = np.maximum(cutoff - h[mine], 0)
        assert (out - h).sum() == min(unit, gap.sum()) and np.all(out[mine] <= np.maximum(h[mine], cutoff))
        assert np.sum(((out - h)[mine] > 0) & (out[mine] < cutoff)) <= 1  # at most one item partly filled


def _greedy_by_histogram(h, mine, counts, cutoff, unit, priority):
    """The greedy of the current histogram (fill first the items nearest the cutoff, ties by priority):
    Gopi et al.'s non-contractive greedy, the rule the paper's local order replaces."""
    out = np.array(h, dtype=np.int64)
    left = unit
    for i in sorted(mine, key=lambda i: (max(cutoff - out[i], 0), priority[i])):
        step = min(max(cutoff - out[i], 0), left)
        out[i] += step
        left -= step
    return out


def _overfilling(h, mine, counts, cutoff, unit, priority):
    """The local greedy that skips items at the cutoff but raises the others by the whole budget left."""
    out = np.array(h, dtype=np.int64)
    left = unit
    for i in sorted(mine, key=lambda i: (-counts[mine.index(i)], priority[i])):
        if out[i] < cutoff and left:
            out[i] += left
            left = 0
    return out


def _worst_unit_step(update, n_items=3):
    """The largest ``||F(h + e_j) - F(h)||_1`` over every histogram with levels ``0 .. cutoff + 1`` on
    ``n_items`` items (higher levels act as ``cutoff + 1``), every unit step ``e_j``, every person's set, every
    order of the person's items (every priority; local counts 1 and 2 in turn), cutoffs ``1 .. 4`` and budgets
    ``1 .. 5``: exhaustive. Non-expansive on unit steps means at most 1 (and then on every pair, along a path
    of unit steps)."""
    worst, where = 0, None
    prios = list(itertools.permutations(range(n_items)))
    sets = [list(s) for r in range(1, n_items + 1) for s in itertools.combinations(range(n_items), r)]
    for cutoff, unit in itertools.product(range(1, 5), range(1, 6)):
        for mine in sets:
            for counts in ([1] * len(mine), [1 + (k % 2) for k in range(len(mine))]):
                for prio in prios:
                    for h in itertools.product(range(cutoff + 2), repeat=n_items):
                        f = update(h, mine, counts, cutoff, unit, prio)
                        for j in range(n_items):
                            g = list(h)
                            g[j] += 1
                            d = int(np.abs(update(g, mine, counts, cutoff, unit, prio) - f).sum())
                            if d > worst:
                                worst, where = d, (h, j, mine, counts, cutoff, unit, prio)
    return worst, where


def test_the_update_is_l1_non_expansive_on_small_lattices_exhaustively():
    """Every unit step of the input moves the library's update by at most one step: the contraction the
    guarantee rests on (with the triangle inequality, ``||F(h) - F(g)||_1 <= ||h - g||_1``)."""
    worst, where = _worst_unit_step(_update)
    assert worst <= 1, where


def test_the_same_check_refutes_the_histogram_greedy_and_overfilling():
    """The exhaustive check can fail: ordering by the current histogram (the items nearest the cutoff first)
    moves the output by 3 steps for one step in (levels (2, 3), cutoff 4, one step: item 1 fills; at (3, 3)
    the tie goes to item 0), and so does raising an item past the cutoff by the budget left."""
    assert np.abs(_greedy_by_histogram([2, 3], [0, 1], [1, 1], 4, 1, [0, 1])
                  - _greedy_by_histogram([3, 3], [0, 1], [1, 1], 4, 1, [0, 1])).sum() == 3  # fmt: skip
    lib = _update([2, 3], [0, 1], [1, 1], 4, 1, [0, 1]) - _update([3, 3], [0, 1], [1, 1], 4, 1, [0, 1])
    assert np.abs(lib).sum() <= 1
    assert _worst_unit_step(_greedy_by_histogram, 2)[0] > 1
    assert _worst_unit_step(_overfilling, 2)[0] > 1


def test_a_person_s_new_items_get_one_unit_on_one_item_at_most():
    """A person's k items no one else holds start at 0: greedy gives at most one of them any weight, at most
    the unit (water-filling's ceil(unit / k) would be wrong here), whatever the person's other items."""
    rng = np.random.default_rng(2)
    whole = 0
    for _ in range(500):
        n_old, k = int(rng.integers(0, 5)), int(rng.integers(1, 6))
        unit = int(rng.integers(1, 50))
        cutoff = unit + int(rng.integers(1, 40))  # the cutoff is above the threshold, which is above the unit
        h = np.r_[rng.integers(0, cutoff + 1, n_old), np.zeros(k, dtype=np.int64)]
        n = n_old + k
        out = _update(h, list(range(n)), rng.integers(1, 4, n), cutoff, unit, rng.permutation(n))
        new = out[n_old:]
        assert np.sum(new > 0) <= 1 and new.sum() <= unit
        whole += int(k > 1 and new.max() == unit)
    assert whole > 50  # the whole unit on one new item does happen


def test_the_threshold_bounds_one_new_item_at_the_unit_and_the_others_at_zero():
    """greedy_delta_new is P[Z >= T - unit] + (max_items - 1) P[Z >= T] (discrete Laplace, exact tails), at most
    the delta it was calibrated for, and T is the smallest such integer."""
    for eps, delta, m in ((1.0, 1e-5, 100), (4.0, 1e-2, 2), (0.5, 1e-8, 7)):
        cal = calibrate_union(eps, delta, m, "laplace", greedy=True)
        assert cal.policy and cal.greedy and cal.cutoff >= cal.threshold > cal.unit
        q = math.exp(-1.0 / cal.scale)

        def exact(t, q=q, cal=cal, m=m):
            return (q ** (t - cal.unit) + (m - 1) * q**t) / (1 + q)

        assert exact(cal.threshold) <= delta < exact(cal.threshold - 1) * (1 + 1e-6)
        assert greedy_delta_new(cal.threshold, cal.scale, m, cal.unit) == pytest.approx(exact(cal.threshold))
        assert cal.delta_new == pytest.approx(exact(cal.threshold))
        pol = calibrate_union(eps, delta, m, "laplace", policy=True)
        assert cal.threshold >= pol.threshold  # greedy's new items weigh more


GREEDY_TINY = [[[0]], [[0, 1]], [[0, 1], [1, 2]], [[0], [0, 1], [0, 2, 3]], [[0, 1], [0, 1], [2]],
               [[0, 0, 1], [1, 2, 2]], [[0], [0], [0, 1, 1], [1, 2]], [[0, 1, 2], [0], [2, 2, 1]]]  # fmt: skip


@pytest.mark.parametrize(("eps", "delta", "margin"), [(1.0, 1e-2, 3.0), (4.0, 1e-2, 0.0), (2.0, 1e-3, 0.5)])
def test_exact_audit_of_the_greedy_output_law(eps, delta, margin):
    """Every kept subset, every order of the persons, every priority of the items, local counts from repeats,
    the exact Laplace tails, through the library's calibration and kernel: delta at epsilon within the claim.
    A threshold one step lower, or the policy Laplace's threshold (new items bounded by ceil(unit / k)), or
    persons spending two units, are refuted."""
    from userdp.audit import audit_set_union

    res = audit_set_union(GREEDY_TINY, eps, delta, 2, "laplace", greedy=True, cutoff_margin=margin)
    assert res.passed, str(res)
    assert "greedy" in res.mechanism
    cal = calibrate_union(eps, delta, 2, "laplace", unit=16, greedy=True, cutoff_margin=margin)
    pol = calibrate_union(eps, delta, 2, "laplace", unit=16, policy=True, cutoff_margin=margin)
    broken = [dataclasses.replace(cal, threshold=cal.threshold - 1), dataclasses.replace(cal, unit=2 * cal.unit)]
    if pol.threshold < cal.threshold:
        broken.append(dataclasses.replace(cal, threshold=pol.threshold))
    for b in broken:
        assert not audit_set_union(GREEDY_TINY, eps, delta, 2, "laplace", calibration=b).passed, b
    assert len(broken) == 3 or margin == 0.0  # (at epsilon 4 the two bounds give one threshold)


def test_the_greedy_sampler_path_releases_items_at_the_law_s_rates(monkeypatch):
    """policy_greedy_union (random order, random priorities, exact noise, integer threshold) releases each item
    at the marginal rate of the exact law over orders and priorities; repeats in ``items`` are local counts."""
    import functools

    import userdp.vocabulary.union as union

    monkeypatch.setattr(union, "calibrate_union", functools.lru_cache(union.calibrate_union))
    persons = [[0, 0, 1]] * 5 + [[1, 2, 2]] * 2 + [[2]]
    offsets = np.r_[0, np.cumsum([len(p) for p in persons])]
    items = np.array([i for p in persons for i in p])
    eps, delta = 2.0, 1e-2
    cal = calibrate_union(eps, delta, 2, "laplace", greedy=True, cutoff_margin=0.5)
    # the exact law: the kinds' distinct arrangements (8! / (5! 2!)), every priority
    hist_law: dict = {}
    for two in itertools.combinations(range(8), 2):
        for one in (i for i in range(8) if i not in two):
            arr = [[1, 2] if i in two else [2] if i == one else [0, 1] for i in range(8)]
            cnt = [[1, 2] if i in two else [1] if i == one else [2, 1] for i in range(8)]
            off = np.r_[0, np.cumsum([len(p) for p in arr])]
            its = np.array([i for p in arr for i in p])
            c = np.array([x for p in cnt for x in p])
            for prio in itertools.permutations(range(3)):
                h = tuple(greedy_histogram_in_order(off, its, c, 3, cal.cutoff, cal.unit, np.arange(8), prio))
                hist_law[h] = hist_law.get(h, 0) + 1
    total = sum(hist_law.values())
    q = math.exp(-1.0 / cal.scale)
    marg = np.zeros(3)
    for h, w in hist_law.items():
        for i in range(3):
            m = cal.threshold - h[i]
            marg[i] += w / total * (q**m / (1 + q) if m >= 1 else 1 - q ** (1 - m) / (1 + q))
    runs = 2000
    hits = np.zeros(3)
    for seed in range(runs):
        chosen, noisy, c2 = policy_greedy_union(offsets, items, 3, eps, delta, max_items=2, cutoff_margin=0.5,
                                                rng=seed)  # fmt: skip
        assert c2 == cal and np.all(noisy >= cal.threshold)
        hits[chosen] += 1
    for i in range(3):
        p = marg[i]
        assert abs(hits[i] / runs - p) <= 4 * math.sqrt(p * (1 - p) / runs) + 2e-3, (i, hits[i] / runs, p)
    assert any(0.05 < hits[i] / runs < 0.95 for i in range(3))  # a real test of a rate


def test_local_counts_and_kept_counts():
    off, its, cnt = local_counts(np.array([0, 4, 6]), np.array([3, 1, 3, 3, 2, 2]))
    assert off.tolist() == [0, 2, 3] and its.tolist() == [3, 1, 2] and cnt.tolist() == [3, 1, 2]
    off, its, cnt = local_counts(np.array([0, 3]), np.array([5, 4, 5]), np.array([2, 7, 4]))
    assert its.tolist() == [5, 4] and cnt.tolist() == [6, 7]
    assert kept_counts([0, 3, 5], [7, 8, 9, 1, 2], [1, 2, 3, 4, 5], [0, 2, 3], [7, 9, 2]).tolist() == [1, 3, 5]


def test_the_release_orders_by_records_and_states_the_greedy(monkeypatch):
    """releases.vocabulary(algorithm="policy-greedy") hands the histogram each person's kept items with their
    numbers of records (the engine's key records), and the release says what it ran."""
    import pyarrow as pa

    import userdp.vocabulary.union as union
    from userdp import releases

    seen = {}
    real = union.greedy_histogram

    def spy(offsets, items, counts, *args, **kw):
        seen["pairs"] = sorted(zip(np.asarray(items).tolist(), np.asarray(counts).tolist(), strict=True))
        return real(offsets, items, counts, *args, **kw)

    monkeypatch.setattr(union, "greedy_histogram", spy)
    table = pa.table({"user": [1, 1, 1, 2, 2], "item": ["a", "b", "a", "b", "b"]})
    rel = releases.vocabulary(table, 4.0, 1e-3, max_items=2, noise="laplace", algorithm="policy-greedy", rng=5)
    assert seen["pairs"] == [(0, 2), (1, 1), (1, 2)]  # person 1: a twice, b once; person 2: b twice
    assert rel.params["greedy"] and not rel.params["policy"] and rel.params["cutoff"] is not None
    assert "greedy" in rel.mechanism and "most held first" in rel.error.description
    assert rel.guarantee.epsilon == 4.0 and rel.guarantee.delta == 1e-3


def test_the_greedy_release_bounds_each_person_before_the_histogram(monkeypatch):
    """Each person reaches the greedy histogram with at most max_items distinct items (the new-item bound
    counts on it), their local counts summed over repeats."""
    import userdp.vocabulary.union as union

    seen = {}
    real = union.greedy_histogram

    def spy(offsets, items, counts, *args, **kw):
        seen["deg"], seen["counts"] = np.diff(offsets).tolist(), np.asarray(counts).tolist()
        return real(offsets, items, counts, *args, **kw)

    monkeypatch.setattr(union, "greedy_histogram", spy)
    offsets = np.array([0, 6, 7])
    items = np.array([0, 1, 2, 3, 3, 3, 0])  # person 0: four distinct items, item 3 three times
    private_vocabulary(offsets, items, np.array(list("abcd")), 1.0, 1e-3, max_items=2, noise="laplace",
                       greedy=True, rng=3)  # fmt: skip
    assert seen["deg"] == [2, 1] and len(seen["counts"]) == 3 and seen["counts"][-1] == 1
    assert set(seen["counts"][:2]) <= {1, 3}


def test_greedy_refusals_before_the_data():
    from userdp import releases

    with pytest.raises(ParameterError, match="Laplace noise only"):
        calibrate_union(1.0, 1e-6, 10, "gaussian", greedy=True)
    with pytest.raises(ParameterError, match="Laplace noise only"):
        releases.vocabulary("/nonexistent.csv", 1.0, 1e-6, noise="gaussian", algorithm="policy-greedy")
    with pytest.raises(ParameterError, match="policy"):
        releases.vocabulary("/nonexistent.csv", 1.0, 1e-6, noise="laplace", policy=True, algorithm="policy-greedy")
    with pytest.raises(ParameterError, match="not both"):
        private_vocabulary(np.array([0, 1]), np.array([0]), np.array(["a"]), 1.0, 1e-6, noise="laplace",
                           policy=True, greedy=True)  # fmt: skip


def test_cli_policy_greedy(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from userdp.cli import main

    users, items = [], []
    for u in range(400):
        users += [u, u]
        items += ["common", "common"]
        if u % 2:
            users.append(u), items.append("half")
    users.append(0), items.append("rare")
    path = tmp_path / "r.csv"
    pacsv.write_csv(pa.table({"person": users, "item": items}), path)
    argv = ["vocabulary", str(path), "--user", "person", "--item", "item", "--epsilon", "1", "--delta", "1e-6",
            "--json", "--noise", "laplace", "--algorithm", "policy-greedy", "--max-items", "2",
            "--seed", "3"]  # fmt: skip
    assert main(argv) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["selection"] == "policy-greedy" and got["items_released"] == 2 and "most held first" in got["error"]
    assert main([a for a in argv if a not in ("--noise", "laplace")]) == 2  # Gaussian noise (the default): refused
    assert "Laplace noise only" in capsys.readouterr().err


@pytest.mark.slow  # a Spark session of its own
def test_spark_greedy_vocabulary_equals_memory(spark_engine):
    """The same records on Spark (spread over 4 partitions) and in memory, the same seed: the same release."""
    import pandas as pd

    from userdp import releases

    rng = np.random.default_rng(0)
    users = np.repeat(np.arange(300), rng.integers(1, 12, 300))
    items = np.array([f"w{i}" for i in range(60)])[np.minimum(rng.geometric(0.08, users.size) - 1, 59)]
    pdf = pd.DataFrame({"user": users, "item": items})
    df = spark_engine.spark.createDataFrame(pdf).repartition(4)
    kw = dict(noise="laplace", algorithm="policy-greedy", rng=7)
    mem = releases.vocabulary(pdf, 2.0, 1e-4, **kw)
    spk = releases.vocabulary(df, 2.0, 1e-4, engine=spark_engine, **kw)
    assert mem.value["items"].tolist() == spk.value["items"].tolist() and len(mem.value["items"]) > 5
    assert np.array_equal(mem.value["counts"], spk.value["counts"])

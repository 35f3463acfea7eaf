"""The policy Laplace set union (Gopi et al. 2020, Algorithm 7) on the lattice: the update rule, its exact l1
contraction (and a counterexample for the rounded rule it replaces), the new-item bound, an exact audit of
the output law with broken variants caught, and the sampler path against that law."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from userdp.errors import ParameterError
from userdp.vocabulary import calibrate_union, new_item_weight, policy_histogram, policy_laplace_union
from userdp.vocabulary.policy import _fill, policy_histogram_in_order


def _update(h, mine, cutoff, unit, priority):
    """One person's update F(h), through the library's kernel."""
    out = np.array(h, dtype=np.int64)
    _fill(np.array([0, len(mine)], dtype=np.int64), np.array(mine, dtype=np.int64), np.zeros(1, dtype=np.int64),
          np.asarray(priority, dtype=np.int64), np.int64(cutoff), np.int64(unit), out)  # fmt: skip
    return out


def test_the_update_is_the_papers_l1_descent_on_the_lattice():
    """Every open item rises by the same increment c (or to the cutoff), the budget is spent exactly, and the
    remainder goes to the open items of lowest priority."""
    # gaps 2, 10, 10, 10 with 20 steps: the first fills (2), c = 6 on the others (18), 0 left
    assert list(_update([8, 0, 0, 0], [0, 1, 2, 3], 10, 20, [0, 1, 2, 3])) == [10, 6, 6, 6]
    # 21 steps: one step more, to the open item of lowest priority (item 2)
    assert list(_update([8, 0, 0, 0], [0, 1, 2, 3], 10, 21, [3, 2, 0, 1])) == [10, 6, 7, 6]
    # items already at the cutoff take nothing; items outside the person's set are untouched
    assert list(_update([10, 3, 5, 1], [0, 1], 10, 4, [0, 1, 2, 3])) == [10, 7, 5, 1]
    # everything fills: the leftover budget is not spent elsewhere
    assert list(_update([9, 9, 0], [0, 1], 10, 100, [0, 1, 2])) == [10, 10, 0]
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 7))
        h = rng.integers(0, 30, n)
        mine = sorted(rng.choice(n, int(rng.integers(1, n + 1)), replace=False))
        cutoff, unit = int(rng.integers(1, 30)), int(rng.integers(1, 40))
        out = _update(h, mine, cutoff, unit, rng.permutation(n))
        gap = np.maximum(cutoff - h[mine], 0)
        assert (out - h).sum() == min(unit, gap.sum())  # the whole budget, or every gap
        inc = (out - h)[mine]
        open_ = gap > inc  # items left below the cutoff got the common increment c or c + 1
        if open_.any():
            assert inc[open_].max() - inc[open_].min() <= 1 and np.all(inc[~open_] <= inc[open_].max())


def test_the_update_is_l1_non_expansive_on_the_lattice_exactly():
    """||F(h) - F(g)||_1 <= ||h - g||_1 for integer histograms: the contraction the guarantee rests on."""
    rng = np.random.default_rng(1)
    for _ in range(4000):
        n = int(rng.integers(1, 6))
        mine = sorted(rng.choice(n, int(rng.integers(1, n + 1)), replace=False))
        cutoff, unit = int(rng.integers(1, 25)), int(rng.integers(1, 30))
        prio = rng.permutation(n)
        h = rng.integers(0, cutoff + 3, n)
        g = np.maximum(h + rng.integers(-3, 4, n), 0)
        d_in = np.abs(h - g).sum()
        d_out = np.abs(_update(h, mine, cutoff, unit, prio) - _update(g, mine, cutoff, unit, prio)).sum()
        assert d_out <= d_in, (h, g, mine, cutoff, unit, prio)


def test_rounding_the_increment_down_would_not_be_non_expansive():
    """Why the remainder is handed out: c rounded down, remainder dropped, is expansive (two items, gaps
    (2, 2) -> c = 1 under 3 steps; one step more on item 0 lets c = 2 fill both)."""

    def floor_rule(h, cutoff, unit):
        gap = np.maximum(cutoff - np.asarray(h), 0)
        c = max(c for c in range(unit + 1) if np.minimum(gap, c).sum() <= unit)
        return np.asarray(h) + np.minimum(gap, c)

    h, g = [0, 0], [1, 0]
    assert np.abs(floor_rule(h, 2, 3) - floor_rule(g, 2, 3)).sum() == 2 > 1
    assert np.abs(_update(h, [0, 1], 2, 3, [0, 1]) - _update(g, [0, 1], 2, 3, [0, 1])).sum() <= 1


def test_a_new_item_gets_at_most_its_share_rounded_up():
    """A person's k items that no one else holds start at 0 and get at most ceil(unit / k) each, whatever the
    person's other items: the weight the threshold is calibrated for."""
    rng = np.random.default_rng(2)
    for _ in range(500):
        n_old, k = int(rng.integers(0, 5)), int(rng.integers(1, 6))
        unit, cutoff = int(rng.integers(1, 50)), int(rng.integers(1, 80))
        h = np.r_[rng.integers(0, cutoff + 1, n_old), np.zeros(k, dtype=np.int64)]
        out = _update(h, list(range(n_old + k)), cutoff, unit, rng.permutation(n_old + k))
        assert out[n_old:].max() <= new_item_weight(np.array([k]), "laplace", unit, policy=True)[0]


POLICY_TINY = [[[0]], [[0, 1]], [[0, 1], [1, 2]], [[0], [0, 1], [0, 2, 3]], [[0, 1], [0, 1], [2]],
               [[0], [0], [0, 1], [1, 2]], [[0, 1, 2], [0], [0], [1]], [[0]] * 4 + [[0, 1]]]  # fmt: skip


@pytest.mark.parametrize(("eps", "delta", "margin"), [(1.0, 1e-2, 3.0), (4.0, 1e-2, 0.0), (2.0, 1e-3, 0.5)])
def test_exact_audit_of_the_policy_output_law(eps, delta, margin):
    """Every kept subset, every order of the persons, every priority of the items, the exact Laplace tails:
    delta at epsilon within the claim (cutoffs low enough that persons fill items and move on); a threshold
    lowered by twice the noise scale, a scale a third too small, or persons spending two units, are refuted."""
    from userdp.audit import audit_set_union

    cal = calibrate_union(eps, delta, 2, "laplace", unit=16, policy=True, cutoff_margin=margin)
    res = audit_set_union(POLICY_TINY, eps, delta, 2, "laplace", calibration=cal)
    assert res.passed, str(res)
    assert "policy" in res.mechanism
    for broken in (
        dataclasses.replace(cal, threshold=cal.threshold - 2 * cal.scale),
        dataclasses.replace(cal, scale=cal.scale * 2 // 3),
        dataclasses.replace(cal, unit=2 * cal.unit),
    ):
        assert not audit_set_union(POLICY_TINY, eps, delta, 2, "laplace", calibration=broken).passed


def test_the_policy_sampler_path_releases_items_at_the_law_s_rates(monkeypatch):
    """policy_laplace_union (random order, random priorities, exact noise, integer threshold) releases each
    item at the marginal rate of the exact law over orders and priorities. The law's scale is ``ceil(U / eps)``
    and its cutoff ``Gamma = T + ceil(alpha t)`` (``alpha = 0.5``), as the paper defines them; ``T`` is the
    threshold calibrated (and tested) on its own. (The calibration, a deterministic function of the public
    parameters, is memoized over the 3,000 runs.)"""
    import functools

    import userdp.vocabulary.union as union

    monkeypatch.setattr(union, "calibrate_union", functools.lru_cache(union.calibrate_union))
    persons = [[0, 1]] * 9 + [[1, 2]] * 3 + [[0, 2]]
    offsets = np.r_[0, np.cumsum([len(p) for p in persons])]
    items = np.array([i for p in persons for i in p])
    eps, delta = 2.0, 1e-2
    cal = calibrate_union(eps, delta, 2, "laplace", policy=True, cutoff_margin=0.5)
    t = math.ceil((1 << 20) / eps)
    assert cal.unit == 1 << 20 and cal.scale == t and cal.cutoff == cal.threshold + math.ceil(0.5 * t)
    # the exact law, the persons' order enumerated over the kinds' distinct arrangements (13!/(9! 3!) of them)
    arrangements = []
    for three in itertools.combinations(range(13), 3):
        for one in (i for i in range(13) if i not in three):
            arr = [(1, 2) if i in three else (0, 2) if i == one else (0, 1) for i in range(13)]
            arrangements.append(arr)
    marg = np.zeros(3)
    hist_law: dict = {}
    for arr in arrangements:
        off = np.r_[0, np.cumsum([len(p) for p in arr])]
        its = np.array([i for p in arr for i in p])
        for prio in itertools.permutations(range(3)):
            h = tuple(policy_histogram_in_order(off, its, 3, cal.cutoff, cal.unit, np.arange(len(arr)), prio))
            hist_law[h] = hist_law.get(h, 0) + 1
    total = sum(hist_law.values())
    q = math.exp(-1.0 / cal.scale)
    for h, w in hist_law.items():
        for i in range(3):
            m = cal.threshold - h[i]
            marg[i] += w / total * (q**m / (1 + q) if m >= 1 else 1 - q ** (1 - m) / (1 + q))
    runs = 3000
    hits = np.zeros(3)
    for seed in range(runs):
        chosen, noisy, c2 = policy_laplace_union(offsets, items, 3, eps, delta, max_items=2, cutoff_margin=0.5,
                                                 rng=seed)  # fmt: skip
        assert c2 == cal and np.all(noisy >= cal.threshold)
        hits[chosen] += 1
    for i in range(3):
        p = marg[i]
        assert abs(hits[i] / runs - p) <= 4 * math.sqrt(p * (1 - p) / runs) + 2e-3, (i, hits[i] / runs, p)
    assert 0.05 < hits[1] / runs < 0.95 or 0.05 < hits[2] / runs < 0.95  # a real test of a rate


def test_policy_histogram_is_reproducible_and_spends_each_person_once():
    offsets = np.array([0, 2, 3, 6])
    items = np.array([0, 1, 1, 0, 2, 3])
    a = policy_histogram(offsets, items, 4, cutoff=10**9, unit=1 << 20, rng=5)
    b = policy_histogram(offsets, items, 4, cutoff=10**9, unit=1 << 20, rng=5)
    assert np.array_equal(a, b) and a.sum() == 3 * (1 << 20)  # nothing reaches a far cutoff: 3 full units


def test_policy_refusals():
    with pytest.raises(ParameterError, match="Laplace noise only"):
        calibrate_union(1.0, 1e-6, 10, "gaussian", policy=True)
    with pytest.raises(ParameterError, match="cutoff_margin"):
        calibrate_union(1.0, 1e-6, 10, "laplace", policy=True, cutoff_margin=-1)


def test_exact_audit_with_three_kept_items():
    """Three kept items and 16 steps: a person's new items get 6, 5 and 5 (the remainder by priority); the
    exact law over orders and priorities stays within the claim. (Calibrating for floor(16 / 3) gives the
    same threshold here; test_a_new_item_gets_at_most_its_share_rounded_up is the test that catches it.)"""
    from userdp.audit import audit_set_union

    data = [[[0, 1, 2]], [[0, 1, 2], [0]], [[0], [0, 1, 2]]]
    res = audit_set_union(data, 4.0, 1e-2, 3, "laplace", policy=True, cutoff_margin=0.0)
    assert res.passed, str(res)

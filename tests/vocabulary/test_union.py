"""Person-level DP set union: exact weights, thresholds from the samplers' real tails, an exact audit of the
output law on small instances (with broken variants caught), and the sampler path against that law."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from userdp.errors import ParameterError
from userdp.vocabulary import (
    UNIT,
    bound_contributions,
    calibrate_union,
    person_weights,
    union_histogram,
    weighted_gaussian_union,
    weighted_laplace_union,
)


def test_person_weights_are_exact_and_bounded():
    k = np.arange(1, 5001)
    lap, gau = person_weights(k, "laplace"), person_weights(k, "gaussian")
    assert np.array_equal(lap, UNIT // k)
    assert np.array_equal(gau, [math.isqrt(UNIT * UNIT // int(j)) for j in k])
    assert np.all(k * lap <= UNIT) and np.all(k * gau * gau <= UNIT * UNIT)  # l1 / l2 norm at most one unit
    assert np.all(k * (lap + 1) > UNIT) and np.all(k * (gau + 1) ** 2 > UNIT * UNIT)  # and as large as allowed


def _tail(noise: str, scale: int) -> callable:
    """Exact P[Z >= m] of the sampler: closed form (Laplace) or summed over the kept support (Gaussian)."""
    if noise == "laplace":
        q = math.exp(-1.0 / scale)

        def lap(m: int) -> float:
            return q**m / (1 + q) if m >= 1 else 1.0 - q ** (1 - m) / (1 + q)

        return lap
    x = np.arange(-32 * scale, 32 * scale + 1)
    p = np.exp(-(x.astype(float) ** 2) / (2.0 * scale * scale))
    cum = np.cumsum(p[::-1])[::-1] / p.sum()  # cum[i] = P[Z >= x[i]]

    def gau(m: int) -> float:
        i = m + 32 * scale
        return 1.0 if i <= 0 else (0.0 if i >= x.size else float(cum[i]))

    return gau


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
@pytest.mark.parametrize(("eps", "delta", "max_items"), [(1.0, 1e-3, 1), (1.0, 1e-3, 3), (0.5, 1e-2, 2)])
def test_threshold_is_the_smallest_that_bounds_a_new_item_by_the_real_tails(noise, eps, delta, max_items):
    """A person's k <= max_items new items, each of weight floor(U / k) or floor(U / sqrt(k)), are released
    together with probability at most k P[Z >= T - a_k] (the samplers' exact tails, computed here) <= the
    threshold's share of delta (all of it with Laplace noise, half with Gaussian noise): a bound for one item
    instead of k, or the Gaussian threshold taking the whole delta, is caught; and T is the smallest such."""
    unit = 16  # a coarse lattice, so that the Gaussian's exact tails can be summed
    cal = calibrate_union(eps, delta, max_items, noise, unit=unit)
    tail = _tail(noise, cal.scale)
    target = delta / 2 if noise == "gaussian" else delta  # the paper's split: half to the Gaussian histogram
    assert cal.delta_gaussian == delta - target

    ks = range(1, max_items + 1)
    weights = [unit // k if noise == "laplace" else math.isqrt(unit * unit // k) for k in ks]

    def worst(T):
        return max(k * tail(T - a) for k, a in zip(ks, weights, strict=True))

    assert worst(cal.threshold) <= cal.delta_new <= target  # the stated bound covers the sampler's true tail
    if noise == "laplace":  # the tail is exact: one step lower would break the target
        assert worst(cal.threshold - 1) > target
    else:  # the bound (the normal tail one step out) is the smallest threshold it allows
        from userdp.vocabulary.union import _delta_new

        assert _delta_new(cal.threshold - 1, noise, cal.scale, max_items, unit) > target


TINY = [[[0]], [[0, 1]], [[0, 1], [1, 2]], [[0], [0, 1], [0, 2, 3]], [[0, 1], [0, 1], [2]], [[0]] * 6 + [[0, 1]]]


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_exact_audit_of_the_output_law(noise):
    """The auditor's exact laws (every kept subset, the integer histogram, the samplers' exact tails) over
    remove-one-person neighbours: delta at epsilon within the claim, and a new item's release probability
    within the threshold's share; a threshold lowered by twice the noise scale or by a few steps, a
    calibration for twice delta, or a Laplace scale a third too small, is refuted. (On this coarse lattice
    the Gaussian's tail bound is one step conservative: its threshold one step lower is still within.)"""
    from userdp.audit import audit_set_union

    eps, delta, max_items = 1.0, 1e-2, 2  # max_items = 2 < 3: a person's subset is drawn
    res = audit_set_union(TINY, eps, delta, max_items, noise)
    assert res.passed, str(res)
    cal = calibrate_union(eps, delta, max_items, noise, unit=16)
    low = dataclasses.replace(cal, threshold=cal.threshold - 2 * cal.scale)
    assert not audit_set_union(TINY, eps, delta, max_items, noise, calibration=low).passed
    # the threshold's share on its own: a few steps low, or calibrated for twice delta, is refuted
    for steps in (5,) if noise == "gaussian" else (1, 5):
        low = dataclasses.replace(cal, threshold=cal.threshold - steps)
        assert not audit_set_union(TINY, eps, delta, max_items, noise, calibration=low).passed
    twice = calibrate_union(eps, 2 * delta, max_items, noise, unit=16)
    assert not audit_set_union(TINY, eps, delta, max_items, noise, calibration=twice).passed
    if noise == "laplace":
        narrow = dataclasses.replace(cal, scale=cal.scale * 2 // 3)
        assert not audit_set_union(TINY, eps, delta, max_items, noise, calibration=narrow).passed


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_the_sampler_path_releases_items_at_the_computed_rates(noise, monkeypatch):
    """The real mechanism (bounding, histogram, exact noise, integer threshold) releases each item at the rate
    the law predicts: many persons hold item 0, a few item 1, one item 2. The items' weights are computed here
    from the definition (``U`` per one-item person, ``floor(U / 2)`` or ``floor(U / sqrt(2))`` per two-item
    person), the Laplace scale is ``ceil(U / epsilon)``; the threshold and the Gaussian width are the
    calibration's (tested on their own above). (The calibration, a deterministic function of the public
    parameters, is memoized for the 3,000 runs: the Gaussian's zCDP search otherwise takes 20 of 21 s.)"""
    import functools

    import userdp.vocabulary.union as union

    monkeypatch.setattr(union, "calibrate_union", functools.lru_cache(union.calibrate_union))
    persons = [[0]] * 40 + [[0, 1]] * 14 + [[1, 2]]
    offsets = np.r_[0, np.cumsum([len(p) for p in persons])]
    items = np.array([i for p in persons for i in p])
    fn = weighted_laplace_union if noise == "laplace" else weighted_gaussian_union
    runs = 3000
    hits = np.zeros(3)
    for seed in range(runs):
        chosen, noisy, cal = fn(offsets, items, 3, 1.0, 1e-3, max_items=2, rng=seed)
        hits[chosen] += 1
        assert np.all(noisy >= cal.threshold)
    half = UNIT // 2 if noise == "laplace" else math.isqrt(UNIT * UNIT // 2)
    hist = [40 * UNIT + 14 * half, 15 * half, half]
    assert np.array_equal(union_histogram(offsets, items, 3, noise), hist)
    if noise == "laplace":
        assert cal.scale == math.ceil(UNIT / 1.0)
    q = math.exp(-1.0 / cal.scale)
    for i in range(3):
        m = cal.threshold - int(hist[i])
        if noise == "laplace":
            p = q**m / (1 + q) if m >= 1 else 1 - q ** (1 - m) / (1 + q)
        else:
            from scipy.stats import norm

            p = float(norm.sf((m - 0.5) / cal.scale))  # continuity-corrected: w is about 5 million steps
        assert abs(hits[i] / runs - p) <= 4 * math.sqrt(p * (1 - p) / runs) + 2e-3, (i, hits[i] / runs, p)
    assert 0.05 < hits[1] / runs < 0.95  # the middle item is a real test of the rate


def test_bound_contributions_keeps_a_uniform_subset_of_the_heavy_persons_only():
    offsets = np.array([0, 2, 7])
    items = np.array([5, 6, 0, 1, 2, 3, 4])
    counts = np.zeros(5)
    for seed in range(2000):
        off, its = bound_contributions(offsets, items, 2, rng=seed)
        assert np.array_equal(off, [0, 2, 4]) and np.array_equal(its[:2], [5, 6])
        assert len(set(its[2:])) == 2 and set(its[2:]) <= {0, 1, 2, 3, 4}
        counts[its[2:]] += 1
    assert np.all(np.abs(counts / 2000 - 0.4) < 0.05)  # each of 5 items kept with probability 2/5


def test_refusals():
    with pytest.raises(ParameterError, match="delta"):
        calibrate_union(1.0, 0.0, 5)
    with pytest.raises(ParameterError, match="max_items"):
        calibrate_union(1.0, 1e-6, 0)
    with pytest.raises(ParameterError, match="noise"):
        calibrate_union(1.0, 1e-6, 5, "uniform")
    with pytest.raises(ParameterError, match="epsilon"):
        calibrate_union(-1.0, 1e-6, 5)


def _one_item_persons(n_items: int, per_item: int) -> tuple[np.ndarray, np.ndarray]:
    items = np.repeat(np.arange(n_items), per_item)
    return np.arange(items.size + 1), items


@pytest.mark.parametrize("max_items", [1, 4])
@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_private_vocabulary_counts_have_the_stated_noise(noise, max_items):
    """Every item held by 300 one-item persons is released; its count's noise has the stated standard
    deviation, the one its sensitivity (max_items in l1, sqrt(max_items) in l2) calls for (a 30% wrong scale
    is rejected), and the release states only public parameters."""
    from userdp.privacy.guarantees import ApproxDP
    from userdp.vocabulary import private_vocabulary

    offsets, items = _one_item_persons(3000, 300)
    labels = np.array([f"w{i:04d}" for i in range(3000)], dtype=object)
    rel = private_vocabulary(offsets, items, labels, 2.0, 1e-6, max_items=max_items, noise=noise, rng=7)
    assert rel.guarantee == ApproxDP(2.0, 1e-6)
    assert np.array_equal(rel.value["items"], labels)  # sorted labels, all released
    resid = rel.value["counts"] - 300
    if noise == "laplace":  # the scale the sensitivity calls for (not the one the release states)
        sd = math.sqrt(2) * max_items / 1.0
    else:
        from userdp.noise import calibrate_gaussian

        sd = calibrate_gaussian(math.sqrt(max_items), 1.0, 5e-7).sigma
    est = float(np.sqrt(np.mean(resid**2)))
    assert abs(est / sd - 1) < 0.08 and abs(est / (1.3 * sd) - 1) > 0.15 and abs(est / (0.7 * sd) - 1) > 0.2
    assert rel.params["count_sd"] == pytest.approx(sd, rel=1e-3)  # and the release states it
    assert set(rel.params) == {
        "epsilon", "delta", "max_items", "noise", "policy", "greedy", "cutoff", "count_fraction", "epsilon_set",
        "delta_set", "epsilon_counts", "delta_counts", "threshold", "noise_sd", "count_sd", "max_items_chosen",
        "epsilon_bound", "max_items_quantile",
    }  # fmt: skip
    assert rel.params["epsilon_set"] + rel.params["epsilon_counts"] == 2.0  # (the samplers' own split:
    assert rel.params["delta_set"] + rel.params["delta_counts"] == 1e-6  # tests/releases/test_vocabulary.py)


def test_private_vocabulary_of_no_one_releases_nothing_and_rare_items_stay_private():
    from userdp.vocabulary import private_vocabulary

    rel = private_vocabulary(np.array([0]), np.array([], dtype=np.int64), np.array([], dtype=object), 1.0, 1e-6)
    assert rel.value["items"].size == 0 and rel.value["counts"].size == 0
    offsets, items = _one_item_persons(500, 1)  # 500 items, each held by one person
    for seed in range(20):
        rel = private_vocabulary(offsets, items, np.arange(500).astype(str), 5.0, 1e-6, count_fraction=0, rng=seed)
        assert rel.value["items"].size == 0 and rel.value["counts"] is None
    with pytest.raises(ParameterError, match="count_fraction"):
        private_vocabulary(offsets, items, np.arange(500).astype(str), 1.0, 1e-6, count_fraction=1.0)


def test_userdp_audit_vocabulary_passes(capsys):
    from userdp.cli import main

    assert main(["audit", "vocabulary"]) == 0
    out = capsys.readouterr().out
    assert out.count("[PASS]") == 6 and "laplace" in out and "gaussian" in out and "policy" in out
    assert "DP-SIPS" in out and "policy greedy" in out
    assert "max_items chosen privately (auto)" in out


def test_a_person_listing_an_item_many_times_holds_it_once():
    """Repeats within a person are dropped before the weights: one person listing an item 1000 times gives
    it the weight of one person (else the Gaussian's l2 bound fails: sqrt(1000) persons' weight)."""
    from userdp.vocabulary import distinct_per_person, private_vocabulary

    off, its = distinct_per_person(np.array([0, 1000, 1003]), np.r_[np.zeros(1000, int), [1, 2, 1]])
    assert list(off) == [0, 1, 3] and list(its) == [0, 1, 2]
    offsets, items = np.array([0, 1000]), np.zeros(1000, dtype=np.int64)
    for seed in range(30):
        chosen, _, _ = weighted_gaussian_union(offsets, items, 1, 1.0, 1e-6, max_items=1000, rng=seed)
        assert chosen.size == 0
        rel = private_vocabulary(offsets, items, np.array(["secret"]), 2.0, 1e-6, max_items=1000, rng=seed)
        assert rel.value["items"].size == 0
    with pytest.raises(ParameterError, match="item codes"):
        weighted_laplace_union(np.array([0, 1]), np.array([5]), 3, 1.0, 1e-6)


def test_the_threshold_test_is_at_least_t_exactly(monkeypatch):
    """With the noise stubbed to zero, the library's selection keeps weight T and drops T - 1 (one lattice
    step below the threshold)."""
    import userdp.vocabulary.union as union

    cal = calibrate_union(1.0, 1e-6, 1, "laplace")
    monkeypatch.setattr(union, "discrete_laplace", lambda scale, n, src: np.zeros(n, dtype=np.int64))
    hist = np.array([cal.threshold - 1, cal.threshold, 0, cal.threshold + 5], dtype=np.int64)
    chosen, noisy = union._select(hist, cal, 0)
    assert list(chosen) == [1, 3] and list(noisy) == [cal.threshold, cal.threshold + 5]


@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-6), (0.1, 1e-9), (8.0, 1e-3)])
def test_gaussian_scale_meets_half_of_delta_by_zcdp_and_is_the_smallest(eps, delta):
    """The discrete Gaussian's width w: rho = U^2 / (2 w^2) zCDP gives at most delta / 2 at epsilon, and
    w - 1 does not (so neither the whole delta nor a width sqrt(2) too small passes)."""
    from userdp.noise import zcdp_delta

    cal = calibrate_union(eps, delta, 10, "gaussian")
    assert cal.delta_gaussian == delta / 2
    assert zcdp_delta(UNIT * UNIT / (2.0 * cal.scale**2), eps) <= delta / 2
    assert zcdp_delta(UNIT * UNIT / (2.0 * (cal.scale - 1) ** 2), eps) > delta / 2 * (1 - 1e-6)


def test_every_refusal_comes_from_the_parameters_alone():
    """Budgets too small for the counts, deltas too small for the calibration: refused by the plan, before
    any data, whatever the selection would release; the budget split never exceeds epsilon."""
    from userdp.vocabulary import plan_vocabulary

    with pytest.raises(ParameterError, match="counts' share"):
        plan_vocabulary(1.0, 1e-6, 1, "laplace", count_fraction=1e-15)
    with pytest.raises(ParameterError, match="counts' share"):
        plan_vocabulary(1.0, 1e-16, 10, "gaussian", count_fraction=0.5)
    with pytest.raises(ParameterError, match="delta"):
        plan_vocabulary(1.0, 1e-250, 10, "gaussian", count_fraction=0.0)
    for eps in (49.975, 0.3, 7.1):
        for frac in (0.2, 0.1, 0.7, 0.33):
            p = plan_vocabulary(eps, 1e-6, 10, "gaussian", count_fraction=frac)
            assert p["epsilon_set"] + p["epsilon_counts"] <= eps


def test_keyed_bounding_is_uniform_per_person_and_the_same_in_every_engine():
    """The release path's bounding: each person keeps a uniformly random subset from their own keyed stream
    (the same subset wherever the person is processed; another purpose, user or master gives another stream),
    and each engine's per-item sums (in memory, and read in more than five chunks) equal a direct sum over
    those subsets computed here."""
    from functools import partial

    import pyarrow as pa

    from userdp.engines import ChunkedEngine, Columns, MemoryEngine
    from userdp.noise import KeyedStreams, keyed_keep
    from userdp.vocabulary import vocabulary_sum_columns

    streams = KeyedStreams(4)
    hits = np.zeros(5)
    for user in range(3000):
        kept = keyed_keep(streams, user, 5, 2)
        assert kept.size == 2 and np.all(np.diff(kept) > 0)
        hits[kept] += 1
    assert np.all(np.abs(hits / 3000 - 0.4) < 0.04)  # each of 5 positions kept with probability 2/5
    assert np.array_equal(keyed_keep(streams, 7, 5, 2), keyed_keep(KeyedStreams(4), 7, 5, 2))
    # the bounding's stream is its own: another purpose, another user or another master gives other words
    from userdp.noise.keyed import BOUND_PURPOSE, RANDOMIZE_PURPOSE, SAMPLE_PURPOSE

    assert len({BOUND_PURPOSE, SAMPLE_PURPOSE, RANDOMIZE_PURPOSE}) == 3
    mine = streams.source(7, BOUND_PURPOSE).words(4).tolist()
    for other in (streams.source(7, SAMPLE_PURPOSE), streams.source(7, RANDOMIZE_PURPOSE),
                  streams.source(8, BOUND_PURPOSE), streams.source("7", BOUND_PURPOSE),
                  KeyedStreams(5).source(7, BOUND_PURPOSE)):  # fmt: skip
        assert other.words(4).tolist() != mine

    rng = np.random.default_rng(8)
    users = np.repeat(np.arange(40), rng.integers(1, 9, 40))
    words = np.array([f"w{i}" for i in rng.integers(0, 12, users.size)], dtype=object)
    table = pa.table({"user": users, "item": words})
    keep = partial(keyed_keep, streams, cap=3)
    weights = partial(vocabulary_sum_columns, noise="laplace")
    eng = MemoryEngine()
    labels, sums = eng.bounded_item_sums(eng.load(table, Columns("user", "item")), 3, keep, weights)
    expect: dict = {}
    for u in range(40):
        mine = sorted(set(words[users == u]))
        if len(mine) > 3:
            mine = [mine[j] for j in keep(u, len(mine))]
        for w in mine:
            a, b = expect.get(w, (0, 0))
            expect[w] = (a + (UNIT // len(mine)), b + 1)
    assert list(labels) == sorted(expect) and [tuple(r) for r in sums] == [expect[w] for w in sorted(expect)]
    ch = ChunkedEngine(rows_per_chunk=17)
    assert sum(1 for _ in ch.chunks(ch.load(table, Columns("user", "item")))) > 5  # persons over many chunks
    labels2, sums2 = ch.bounded_item_sums(ch.load(table, Columns("user", "item")), 3, keep, weights)
    assert list(labels2) == sorted(expect) and [tuple(r) for r in sums2] == [expect[w] for w in sorted(expect)]

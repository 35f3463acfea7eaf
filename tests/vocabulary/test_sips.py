"""DP-SIPS (rounds of the weighted Gaussian union on the items not yet released): the calibration's zCDP
composition and thresholds, an exact audit of the output law with broken schedules caught, the sampler path's
noise scale, the removal of released items, and the refusals."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from userdp.errors import ParameterError
from userdp.noise import zcdp_delta
from userdp.vocabulary import UNIT, calibrate_sips, calibrate_union, sips_fractions, sips_union
from userdp.vocabulary.union import _TRUNCATION, _delta_new


def test_the_schedule_is_geometric_and_sums_to_one():
    assert sips_fractions(3, 4.0) == pytest.approx((1 / 21, 4 / 21, 16 / 21), rel=1e-15)
    assert sips_fractions(2, 1.0) == (0.5, 0.5)
    assert math.fsum(sips_fractions(4, 2.0)) == pytest.approx(1.0, abs=1e-15)


def test_one_round_is_the_weighted_gaussian_union():
    """With one round, DP-SIPS is today's weighted Gaussian union: the same width and threshold."""
    for eps, delta, m in ((1.0, 1e-5, 100), (4.0, 1e-8, 10), (0.5, 1e-3, 1)):
        one, sips = calibrate_union(eps, delta, m, "gaussian"), calibrate_sips(eps, delta, m, 1)
        assert (sips.rounds[0].scale, sips.rounds[0].threshold) == (one.scale, one.threshold)


@pytest.mark.parametrize(("eps", "delta", "max_items", "rounds", "ratio"),
                         [(1.0, 1e-5, 100, 3, 4.0), (4.0, 1e-5, 10, 2, 1.0), (0.5, 1e-8, 300, 4, 2.0)])  # fmt: skip
def test_the_rounds_compose_to_half_of_delta_in_zcdp_and_split_the_rest(eps, delta, max_items, rounds, ratio):
    """The widths w_i = ceil(c / sqrt(f_i)): the rounds' rho = sum U^2 / (2 w_i^2) together give at most
    delta / 2 at epsilon (zCDP composes by adding rho), and c - 1 does not (the smallest); each round's
    threshold bounds a new item by its share f_i of the other half and is the smallest that does."""
    cal = calibrate_sips(eps, delta, max_items, rounds, ratio)
    fr = sips_fractions(rounds, ratio)
    assert cal.delta_gaussian == delta / 2 and cal.fractions == fr and len(cal.rounds) == rounds
    ws = [c.scale for c in cal.rounds]
    rho = math.fsum(UNIT * UNIT / (2.0 * w * w) for w in ws)
    assert cal.rho == rho and zcdp_delta(rho, eps) * _TRUNCATION**rounds <= delta / 2
    c = round(ws[0] * math.sqrt(fr[0]))  # the common constant: w_i = ceil(c / sqrt(f_i))
    c = next(x for x in (c - 1, c, c + 1) if [math.ceil(x / math.sqrt(f)) for f in fr] == ws)
    smaller = [math.ceil((c - 1) / math.sqrt(f)) for f in fr]
    assert zcdp_delta(math.fsum(UNIT * UNIT / (2.0 * w * w) for w in smaller), eps) > delta / 2 * (1 - 1e-6)
    total = 0.0
    for f, rc in zip(fr, cal.rounds, strict=True):
        share = f * (delta - delta / 2)
        assert rc.delta_new == _delta_new(rc.threshold, "gaussian", rc.scale, max_items, UNIT) <= share
        assert _delta_new(rc.threshold - 1, "gaussian", rc.scale, max_items, UNIT) > share * (1 - 1e-6)
        total += rc.delta_new
    assert cal.delta_new == pytest.approx(total, rel=1e-12) and total <= delta / 2


TINY = [[[0]], [[0, 1]], [[0, 1], [1, 2]], [[0], [0, 1], [0, 2, 3]], [[0, 1], [0, 1], [2]], [[0]] * 6 + [[0, 1]]]


def test_exact_audit_of_the_rounds_with_broken_schedules_caught():
    """The exact law of the rounds (every kept subset in every round, released items removed, the sampler's
    exact tails) over remove-one-person neighbours: within (epsilon, delta); rounds whose thresholds each take
    the whole new-item share of delta (the shares not split over the rounds), or the lowest threshold of all
    rounds in each, are refuted."""
    from userdp.audit import audit_sips
    from userdp.vocabulary.union import _threshold

    eps, delta, m = 1.0, 1e-2, 2
    for rounds, ratio in ((2, 1.0), (3, 4.0)):
        res = audit_sips(TINY, eps, delta, m, rounds=rounds, ratio=ratio)
        assert res.passed, str(res)
    cal = calibrate_sips(eps, delta, m, 2, 1.0, unit=16)
    whole = dataclasses.replace(cal, rounds=tuple(
        dataclasses.replace(c, threshold=_threshold("gaussian", c.scale, m, 16, (delta / 2) * (1 - 1e-9)))
        for c in cal.rounds))  # fmt: skip
    assert not audit_sips(TINY, eps, delta, m, calibration=whole).passed
    low = dataclasses.replace(cal, rounds=tuple(dataclasses.replace(c, threshold=c.threshold - 12) for c in cal.rounds))
    assert not audit_sips(TINY, eps, delta, m, calibration=low).passed


def test_exact_audit_refutes_rounds_each_calibrated_for_the_whole_rho():
    """Shared items near the threshold (n one-item persons, n around T): the library's three rounds pass the
    exact audit at (2, 0.01), and rounds each given the one-round width (the rounds' rho not added up, each
    threshold recomputed for its share of delta_N) are refuted: the Gaussian part spends 3 rho."""
    from userdp.audit import audit_sips
    from userdp.vocabulary.union import _threshold

    eps, delta, m, unit = 2.0, 1e-2, 1, 16
    cal = calibrate_sips(eps, delta, m, 3, 1.0, unit=unit)
    t = cal.rounds[0].threshold // unit
    near = [[[0]] * n for n in range(t - 6, t + 6)] + [[[0]] * n + [[1]] * n for n in range(t - 3, t + 3)]
    assert audit_sips(near, eps, delta, m, calibration=cal).passed
    w = calibrate_union(eps, delta, m, "gaussian", unit=unit).scale
    each = tuple(
        dataclasses.replace(c, scale=w, threshold=_threshold("gaussian", w, m, unit, c.delta_new)) for c in cal.rounds
    )
    res = audit_sips(near, eps, delta, m, calibration=dataclasses.replace(cal, rounds=each))
    assert not res.passed, str(res)


def _hist_rounds(monkeypatch):
    """Record every round's histogram (the real one, from the real bounding)."""
    import userdp.vocabulary.sips as sips

    seen = []
    real = sips.union_histogram

    def spy(*args, **kwargs):
        h = real(*args, **kwargs)
        seen.append(h.copy())
        return h

    monkeypatch.setattr(sips, "union_histogram", spy)
    return seen


def test_each_round_removes_the_items_released_before_bounding(monkeypatch):
    """Item 0 is held by 2,000 persons (released in round 1); three persons hold items 0 and 1 and keep one
    of them (max_items 1). In round 2 item 0 is gone from their sets, so they all keep item 1: its weight is
    3 U (in round 1 it got U per person who happened to keep it)."""
    seen = _hist_rounds(monkeypatch)
    persons = [[0]] * 2000 + [[0, 1]] * 3
    offsets = np.r_[0, np.cumsum([len(p) for p in persons])]
    items = np.array([i for p in persons for i in p])
    checked = 0
    for seed in range(20):
        seen.clear()
        codes, _, cal = sips_union(offsets, items, 2, 4.0, 1e-5, max_items=1, rounds=2, ratio=1.0, rng=seed)
        r1, r2 = seen
        assert r1[0] >= 2000 * UNIT and r1[1] in (0, UNIT, 2 * UNIT, 3 * UNIT) and r1[0] + r1[1] == 2003 * UNIT
        if 0 in codes and r1[1] + 0 < cal.rounds[0].threshold and r2[0] == 0:
            assert r2[1] == 3 * UNIT or 1 in codes and r2[1] == 0
            checked += r2[1] == 3 * UNIT
    assert checked >= 10


def test_the_sampler_path_has_the_stated_noise_in_every_round():
    """Two groups of 3,000 items, each item held by h persons who hold nothing else (weight h U in every round
    until released), h chosen so that about 15% and 85% of a group are released: each group's share released
    matches 1 - prod_i P[Z_i < T_i - h U] with the calibration's widths and thresholds (the discrete Gaussian
    through the continuity-corrected normal) within 4 standard errors; widths 30% smaller or larger in every
    round predict shares more than 8 standard errors away (4 beyond the band), so they are rejected."""
    from scipy.stats import norm

    eps, delta, m, n = 1.0, 1e-5, 10, 3000
    cal = calibrate_sips(eps, delta, m)

    def share(h, scale=1.0):
        keep_out = 1.0
        for rc in cal.rounds:
            keep_out *= norm.cdf((rc.threshold - h * UNIT - 0.5) / (rc.scale * scale))
        return 1.0 - keep_out

    hs = [min(range(1, 400), key=lambda x, t=t: abs(share(x) - t)) for t in (0.15, 0.85)]
    offsets = np.arange(n * sum(hs) + 1)
    items = np.r_[np.repeat(np.arange(n), hs[0]), np.repeat(np.arange(n, 2 * n), hs[1])]
    codes, _, _ = sips_union(offsets, items, 2 * n, eps, delta, max_items=m, rng=3)
    for g, h in enumerate(hs):
        p = share(h)
        se = math.sqrt(p * (1 - p) / n)
        got = np.count_nonzero((codes >= g * n) & (codes < (g + 1) * n)) / n
        assert abs(got - p) <= 4 * se, (h, got, p)
        for wrong in (0.7, 1.3):
            assert abs(share(h, wrong) - p) > 8 * se, (h, wrong)  # outside the band by 4 SE


def test_refusals():
    from userdp.vocabulary import plan_sips_vocabulary, sips_vocabulary, vocabulary_algorithm

    with pytest.raises(ParameterError, match="rounds"):
        calibrate_sips(1.0, 1e-5, 10, 0)
    with pytest.raises(ParameterError, match="rounds"):
        calibrate_sips(1.0, 1e-5, 10, 11)
    with pytest.raises(ParameterError, match="rounds"):
        calibrate_sips(1.0, 1e-5, 10, True)
    for ratio in (0.05, 11.0, float("nan"), "x"):
        with pytest.raises(ParameterError, match="ratio"):
            calibrate_sips(1.0, 1e-5, 10, 3, ratio)
    with pytest.raises(ParameterError, match="Gaussian"):
        plan_sips_vocabulary(1.0, 1e-5, 10, "laplace")
    with pytest.raises(ParameterError, match="count_fraction"):
        plan_sips_vocabulary(1.0, 1e-5, 10, count_fraction=1.0)
    with pytest.raises(ParameterError, match="rounds"):
        plan_sips_vocabulary(1.0, 1e-5, 10, rounds=0)
    with pytest.raises(ParameterError, match="policy"):
        vocabulary_algorithm("sips", True)
    with pytest.raises(ParameterError, match="algorithm"):
        vocabulary_algorithm("mad", False)
    with pytest.raises(ParameterError, match="DP-SIPS"):
        vocabulary_algorithm(None, False, rounds=3)
    assert vocabulary_algorithm(None, True) == "policy" and vocabulary_algorithm(None, False) == "weighted"
    with pytest.raises(ParameterError, match="delta"):
        calibrate_sips(1.0, 1e-200, 10)
    with pytest.raises(ParameterError, match="item codes"):
        sips_vocabulary(np.array([0, 1]), np.array([5]), np.array(["a"]), 1.0, 1e-5)


def test_private_vocabulary_with_sips_counts_the_first_round_s_kept_items():
    """The release: items from the rounds, counts of the persons holding each among their first round's
    kept items (at most max_items per person), the guarantee the whole (epsilon, delta)."""
    from userdp.privacy.guarantees import ApproxDP, Neighbours
    from userdp.vocabulary import sips_vocabulary

    persons = [[0, 1, 2]] * 300 + [[3]] * 40 + [[4]]
    offsets = np.r_[0, np.cumsum([len(p) for p in persons])]
    items = np.array([i for p in persons for i in p])
    labels = np.array(list("abcde"))
    rel = sips_vocabulary(offsets, items, labels, 4.0, 1e-6, max_items=1, rng=2)
    assert rel.guarantee == ApproxDP(4.0, 1e-6, Neighbours.ADD_REMOVE_USER)
    assert rel.params["algorithm"] == "sips" and rel.params["rounds"] == 3 and "DP-SIPS" in rel.mechanism
    got = dict(zip(rel.value["items"].tolist(), rel.value["counts"].tolist(), strict=True))
    assert "e" not in got and {"a", "b", "c", "d"} <= set(got)
    assert sum(got[x] for x in "abc") == pytest.approx(300, abs=6 * 3 * rel.params["count_sd"])  # 1 kept each


def test_each_round_bounds_each_person_to_max_items_of_what_is_left(monkeypatch):
    """One person holding 1,000 items (and a crowd holding item 0, released in round 1): in every round the
    person's vector has at most max_items = 10 entries of weight floor(U / sqrt(k)), l2 norm at most U."""
    from userdp.vocabulary import person_weights

    seen = _hist_rounds(monkeypatch)
    persons = [list(range(1000))] + [[0]] * 500
    offsets = np.r_[0, np.cumsum([len(p) for p in persons])]
    items = np.array([i for p in persons for i in p])
    sips_union(offsets, items, 1000, 1.0, 1e-5, max_items=10, rng=1)
    assert len(seen) == 3
    a = int(person_weights(np.array([10]), "gaussian")[0])
    for h in seen:
        mine = h[1:]  # the person alone holds items 1..999
        assert np.count_nonzero(mine) <= 10 and set(mine[mine > 0].tolist()) <= {a}
        assert int((mine.astype(np.int64) ** 2).sum()) <= UNIT * UNIT


def _spied(monkeypatch):
    """The epsilon of every exponential mechanism the union module draws (the bound's choice), the calibration
    of every round's selection, and the bound every round's bounding used."""
    import userdp.vocabulary.sips as sips
    import userdp.vocabulary.union as union

    seen = {"em": [], "cal": [], "bound": []}
    em, select, bound = union.exponential_mechanism, sips._select, sips.bound_contributions

    def em_spy(scores, sensitivity, epsilon, rng=None):
        seen["em"].append((sensitivity, epsilon))
        return em(scores, sensitivity, epsilon, rng)

    def select_spy(hist, cal, rng, held=None):
        seen["cal"].append(cal)
        return select(hist, cal, rng, held)

    def bound_spy(offsets, items, max_items, rng=None):
        seen["bound"].append(max_items)
        return bound(offsets, items, max_items, rng)

    import importlib

    release = importlib.import_module("userdp.releases.vocabulary")  # (the package's `vocabulary` is the function)
    round_sums = release._sips_round_sums

    def round_spy(eng, data, streams, round_, cap, released):  # the release's rounds: bounded by the engine
        seen["bound"].append(cap)
        return round_sums(eng, data, streams, round_, cap, released)

    monkeypatch.setattr(union, "exponential_mechanism", em_spy)
    monkeypatch.setattr(sips, "_select", select_spy)
    monkeypatch.setattr(sips, "bound_contributions", bound_spy)
    monkeypatch.setattr(release, "_sips_round_sums", round_spy)
    return seen


@pytest.mark.parametrize("path", ["release", "memory"])
@pytest.mark.parametrize("fraction", [0.0, 0.5])
def test_the_default_bound_is_chosen_first_and_every_round_uses_it(monkeypatch, path, fraction):
    """``max_items="auto"`` (the default) with DP-SIPS: the bound is drawn once, by the exponential mechanism
    at 2% of epsilon (sensitivity 1), before the rounds; every round bounds each person by it and is calibrated
    (its width and threshold) for it at the rest of the budget (times ``1 - count_fraction``), as
    :func:`calibrate_sips` calibrates a fixed bound; the parts compose to the stated guarantee, which the
    ledger charges."""
    import pyarrow as pa

    from userdp import releases
    from userdp.privacy.guarantees import ApproxDP, PureDP
    from userdp.vocabulary import AUTO_FRACTION, MAX_ITEMS_GRID, sips_vocabulary

    rng = np.random.default_rng(1)
    persons = [rng.choice(300, size=30, replace=False).tolist() for _ in range(150)] + [[0, 1, 2]] * 50
    offsets = np.r_[0, np.cumsum([len(p) for p in persons])].astype(np.int64)
    items = np.array([i for p in persons for i in p], dtype=np.int64)
    labels = np.array([f"w{i:03d}" for i in range(300)], dtype=object)
    seen = _spied(monkeypatch)
    eps, delta = 2.0, 1e-5
    if path == "release":
        user = np.repeat(np.arange(len(persons)), np.diff(offsets))
        table = pa.table({"user": user, "item": labels[items].astype(str)})
        rel = releases.vocabulary(table, eps, delta, algorithm="sips", count_fraction=fraction, rng=3)
    else:
        rel = sips_vocabulary(offsets, items, labels, eps, delta, count_fraction=fraction, rng=3)
    assert seen["em"] == [(1.0, eps * AUTO_FRACTION)]
    chosen = rel.params["max_items"]
    assert chosen in MAX_ITEMS_GRID and rel.params["max_items_chosen"] and chosen >= 16  # most persons hold 30
    assert seen["bound"] == [chosen] * 3 and [c.max_items for c in seen["cal"]] == [chosen] * 3
    eps_set = eps * (1 - AUTO_FRACTION) * (1 - fraction)
    assert (
        rel.params["epsilon_set"] == pytest.approx(eps_set, rel=1e-12)
        and rel.params["epsilon_bound"] == eps * AUTO_FRACTION
    )
    delta_set = delta / 2 if fraction else delta
    want = calibrate_sips(rel.params["epsilon_set"], delta_set, chosen)
    assert [(c.scale, c.threshold) for c in seen["cal"]] == [(c.scale, c.threshold) for c in want.rounds]
    assert "chosen privately" in rel.mechanism and "DP-SIPS" in rel.mechanism
    parts = rel.extras["composed_of"]
    assert parts["max_items"] == PureDP(eps * AUTO_FRACTION) and parts["set"] == ApproxDP(
        rel.params["epsilon_set"], delta_set
    )
    total = parts["max_items"]
    for step in [s for s in parts if s != "max_items"]:
        total = total.compose(parts[step])
    assert total.fits_within(rel.guarantee) and rel.guarantee == ApproxDP(eps, delta)
    assert total.epsilon == pytest.approx(eps, rel=1e-12) and total.epsilon <= eps


def test_a_fixed_bound_spends_nothing_on_a_choice(monkeypatch):
    from userdp.vocabulary import sips_vocabulary

    seen = _spied(monkeypatch)
    persons = [[0, 1, 2]] * 100
    offsets = np.r_[0, np.cumsum([len(p) for p in persons])]
    items = np.array([i for p in persons for i in p])
    rel = sips_vocabulary(offsets, items, np.array(list("abc")), 1.0, 1e-5, max_items=2, rng=1)
    assert seen["em"] == [] and seen["bound"] == [2] * 3 and not rel.params["max_items_chosen"]
    assert rel.params["epsilon_bound"] == 0 and "max_items" not in rel.extras["composed_of"]
    assert rel.params["epsilon_set"] == pytest.approx(0.5)


def test_auto_with_sips_plans_every_candidate_and_refuses_before_the_data():
    """``"auto"`` with DP-SIPS checks every calibration at the grid's largest candidate: whatever bound the data
    choose, its rounds' plan exists with the same budget split; bad bounds and forged choices are refused
    before the data are read."""
    from userdp import releases
    from userdp.vocabulary import AUTO_FRACTION, MAX_ITEMS_GRID, BoundChoice, plan_sips_vocabulary

    eps, delta = 0.5, 1e-7
    auto = plan_sips_vocabulary(eps, delta, "auto", rounds=2, ratio=2.0)
    assert auto["max_items"] == max(MAX_ITEMS_GRID) and auto["auto"] and auto["epsilon_bound"] == eps * AUTO_FRACTION
    last = []
    for g in MAX_ITEMS_GRID:
        p = plan_sips_vocabulary(eps, delta, BoundChoice(g, eps * AUTO_FRACTION), rounds=2, ratio=2.0)
        assert p["epsilon_set"] == auto["epsilon_set"] and p["calibration"].max_items == g and not p["auto"]
        last.append(p["calibration"].rounds[-1].threshold)
    assert last == sorted(last) and last[-1] == auto["calibration"].rounds[-1].threshold

    class Unreadable:
        def __getattr__(self, name):
            raise AssertionError("the data were read")

    for bad in ("Auto", 0, 10_001, 2.5, True, None, BoundChoice(64, 0.0), BoundChoice(100, eps * AUTO_FRACTION)):
        with pytest.raises(ParameterError, match="max_items"):
            releases.vocabulary(Unreadable(), eps, delta, max_items=bad, algorithm="sips")


# --- the release's path: every round bounded and summed by the engine (where the data are) ---------------------


def _engine_rounds(monkeypatch):
    """Every round's call of the memory engine's per-item sums, as the release makes it: ``(exclude, labels,
    sums)``."""
    from userdp.engines import MemoryEngine

    seen = []
    real = MemoryEngine.bounded_item_sums

    def spy(self, data, cap, keep, weights, exclude=None):
        out = real(self, data, cap, keep, weights, exclude)
        seen.append((exclude, *out))
        return out

    monkeypatch.setattr(MemoryEngine, "bounded_item_sums", spy)
    return seen


def _table_of(persons):
    import pyarrow as pa

    users = np.repeat(np.arange(len(persons)), [len(p) for p in persons])
    return pa.table({"user": users, "item": [str(x) for p in persons for x in p]})


def test_the_release_s_rounds_remove_the_items_released_before_bounding(monkeypatch):
    """The release (memory engine): item ``a`` is held by 2,000 persons (released in round 1); three persons
    hold ``a`` and ``b`` and keep one (max_items 1). Round 2 hands the engine the released ``a`` to remove, so
    the three keep ``b``: its weight is 3 U (in round 1, U per person who happened to keep it)."""
    from userdp import releases

    seen = _engine_rounds(monkeypatch)
    table = _table_of([["a"]] * 2000 + [["a", "b"]] * 3)
    checked = 0
    for seed in range(6):
        seen.clear()
        rel = releases.vocabulary(table, 4.0, 1e-5, max_items=1, algorithm="sips", rounds=2, ratio=1.0, rng=seed)
        (ex1, lab1, s1), (ex2, lab2, s2) = seen
        r1 = dict(zip(lab1.tolist(), s1[:, 0].tolist(), strict=True))
        assert len(ex1) == 0 and r1["a"] >= 2000 * UNIT and r1["a"] + r1.get("b", 0) == 2003 * UNIT
        assert "a" in rel.value["items"].tolist() and "a" in ex2.tolist()
        if "b" not in ex2.tolist():
            assert lab2.tolist() == ["b"] and s2.tolist() == [[3 * UNIT, 3]]
            checked += 1
    assert checked >= 4


def test_the_release_s_rounds_keep_fresh_uniform_subsets(monkeypatch):
    """Each round keeps a uniformly random subset of what a person has left, drawn afresh (Algorithm 1): 2,000
    persons hold three items each (nobody else holds them: nothing is released) and keep one (max_items 1).
    In every round each of a person's items is kept by about a third of the persons, and two rounds keep the
    same item for about a third of them (within 5 standard errors): rounds reading one keyed stream would
    keep the same item every time."""
    from userdp import releases

    seen = _engine_rounds(monkeypatch)
    n = 2000
    table = _table_of([[f"p{p:04d}-{j}" for j in range(3)] for p in range(n)])
    releases.vocabulary(table, 1.0, 1e-5, max_items=1, algorithm="sips", count_fraction=0.0, rng=4)
    kept = []
    for ex, lab, sums in seen:
        assert len(ex) == 0 and lab.size == n and (sums[:, 1] == 1).all()  # one item a person, none released
        kept.append(np.array([int(x[-1]) for x in lab.tolist()]))
    assert len(kept) == 3
    se = math.sqrt(2 / 9 / n)
    for k in kept:
        assert all(abs(np.mean(k == j) - 1 / 3) <= 5 * se for j in range(3))
    for a in range(3):
        for b in range(a + 1, 3):
            assert abs(np.mean(kept[a] == kept[b]) - 1 / 3) <= 5 * se, (a, b)


def test_the_release_path_has_the_stated_noise_in_every_round():
    """:func:`test_the_sampler_path_has_the_stated_noise_in_every_round` on the release (memory engine, the
    per-item sums from the engine): two groups of 3,000 items, each held by h persons holding nothing else,
    h chosen for about 15% and 85% released; each group's share released matches the calibration's widths and
    thresholds within 4 standard errors, and widths 30% off in every round are rejected."""
    from scipy.stats import norm

    from userdp import releases

    eps, delta, m, n = 1.0, 1e-5, 10, 3000
    cal = calibrate_sips(eps, delta, m)

    def share(h, scale=1.0):
        keep_out = 1.0
        for rc in cal.rounds:
            keep_out *= norm.cdf((rc.threshold - h * UNIT - 0.5) / (rc.scale * scale))
        return 1.0 - keep_out

    hs = [min(range(1, 400), key=lambda x, t=t: abs(share(x) - t)) for t in (0.15, 0.85)]
    items = np.r_[np.repeat(np.arange(n), hs[0]), np.repeat(np.arange(n, 2 * n), hs[1])]
    table = _table_of([[f"i{x:05d}"] for x in items])
    rel = releases.vocabulary(table, eps, delta, max_items=m, algorithm="sips", count_fraction=0.0, rng=3)
    assert rel.params["thresholds"] == list(cal.thresholds) and rel.params["noise_sds"] == list(cal.noise_sds)
    codes = np.array([int(x[1:]) for x in rel.value["items"].tolist()])
    for g, h in enumerate(hs):
        p = share(h)
        se = math.sqrt(p * (1 - p) / n)
        got = np.count_nonzero((codes >= g * n) & (codes < (g + 1) * n)) / n
        assert abs(got - p) <= 4 * se, (h, got, p)
        for wrong in (0.7, 1.3):
            assert abs(share(h, wrong) - p) > 8 * se, (h, wrong)


def test_the_release_counts_the_first_round_s_kept_items():
    """The release (memory engine): items from the rounds, counts of the persons holding each among their first
    round's kept items (one per person here, max_items 1), as :func:`sips_vocabulary` counts them."""
    from userdp import releases
    from userdp.privacy.guarantees import ApproxDP, Neighbours

    table = _table_of([["a", "b", "c"]] * 300 + [["d"]] * 40 + [["e"]])
    rel = releases.vocabulary(table, 4.0, 1e-6, max_items=1, algorithm="sips", rng=2)
    assert rel.guarantee == ApproxDP(4.0, 1e-6, Neighbours.ADD_REMOVE_USER) and rel.params["max_items"] == 1
    got = dict(zip(rel.value["items"].tolist(), rel.value["counts"].tolist(), strict=True))
    assert "e" not in got and {"a", "b", "c", "d"} <= set(got)
    assert sum(got[x] for x in "abc") == pytest.approx(300, abs=6 * 3 * rel.params["count_sd"])
    assert got["d"] == pytest.approx(40, abs=6 * rel.params["count_sd"])

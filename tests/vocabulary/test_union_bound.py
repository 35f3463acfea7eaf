"""``max_items="auto"``, the vocabulary's default: the contribution bound chosen privately (a quantile of the
persons' distinct-item counts, 90% for the Gaussian unions and 10% for the Laplace ones, by the exponential
mechanism over a public grid, 2% of epsilon, no delta)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from userdp import releases
from userdp.errors import ParameterError
from userdp.privacy.guarantees import ApproxDP, PureDP
from userdp.vocabulary import (
    AUTO_FRACTION,
    AUTO_QUANTILE,
    AUTO_QUANTILES,
    MAX_ITEMS_GRID,
    BoundChoice,
    calibrate_union,
    choose_max_items,
    max_items_scores,
    persons_within,
    plan_vocabulary,
    private_vocabulary,
)
from userdp.vocabulary import union as union_mod


def _persons(ks, n_items=600, seed=0):
    """CSR persons holding ``ks[i]`` distinct items each (random items of ``n_items``), and labels."""
    rng = np.random.default_rng(seed)
    items = [rng.choice(n_items, size=k, replace=False) for k in ks]
    offsets = np.r_[0, np.cumsum([len(x) for x in items])].astype(np.int64)
    flat = np.concatenate(items).astype(np.int64) if items else np.empty(0, dtype=np.int64)
    return offsets, flat, np.array([f"w{i:04d}" for i in range(n_items)], dtype=object)


def test_persons_within_counts_the_persons_each_bound_keeps_whole():
    k = np.array([0, 1, 1, 2, 3, 4, 5, 8, 9, 100, 9000])
    got = persons_within(k)
    want = [sum(1 <= x <= g for x in k) for g in MAX_ITEMS_GRID] + [int((k >= 1).sum())]
    assert got.tolist() == want
    assert MAX_ITEMS_GRID == tuple(2**j for j in range(14)) and max(MAX_ITEMS_GRID) <= 10_000


def test_the_choice_is_the_exponential_mechanism_of_the_rank_scores():
    """The chosen bound's law, measured on 3,000 draws, is ``∝ exp(eps s_g / 2)`` with
    ``s_g = -|W_g - 0.9 n|`` (a chi-square test at level 1e-4): a choice with sensitivity 1/2 (scores
    doubled, concentrating on the mode) or with the scores ignored is rejected."""
    from scipy.stats import chisquare

    within = persons_within(np.r_[np.full(5, 1), np.full(6, 3), np.full(5, 20), np.full(4, 300)])
    eps = 0.4
    s = -np.abs(within[:-1] - AUTO_QUANTILE * within[-1])
    p = np.exp(eps * (s - s.max()) / 2)
    p /= p.sum()
    src = np.random.default_rng(7)
    draws = Counter(choose_max_items(within, eps, rng=src).value for _ in range(3000))
    obs = np.array([draws.get(g, 0) for g in MAX_ITEMS_GRID])
    assert chisquare(obs, 3000 * p).pvalue > 1e-4
    for wrong in (np.exp(eps * (s - s.max())), np.ones_like(s)):  # sensitivity 1/2; no scores at all
        assert chisquare(obs, 3000 * wrong / wrong.sum()).pvalue < 1e-4


# tiny datasets (persons' item counts); the first three put the 90% rank between two candidates below a heavy
# person's count, so that removing that person moves two scores by +0.9 and -0.9: the loss nears 0.8 epsilon
DATASETS = [[1] * 17 + [4] * 2 + [9000], [1] * 8 + [2] * 9 + [16] * 2 + [300], [1] * 26 + [8] * 3 + [5000],
            [1], [300], [1] * 9 + [40], [2, 2, 2, 5000], [3] * 19 + [1]]  # fmt: skip


@pytest.mark.parametrize("quantile", sorted(set(AUTO_QUANTILES.values())))
@pytest.mark.parametrize("eps", [0.02, 0.5, 2.0])
def test_exact_audit_of_the_choice_and_broken_variants_caught(eps, quantile):
    """The exact law of the choice on neighbouring datasets, at each noise's quantile: within its share of
    epsilon; scores of sensitivity 2 (doubled), or the choice's epsilon not charged (claimed 0), are caught."""
    from userdp.audit import audit_max_items_choice

    res = audit_max_items_choice(DATASETS, eps, quantile=quantile)
    assert res.passed and float(res.measured.split("= ")[1]) > 0.6 * eps, res  # passes, and not vacuously
    doubled = audit_max_items_choice(DATASETS, eps, scores=lambda w: 2 * max_items_scores(w, quantile))
    assert not doubled.passed
    assert not audit_max_items_choice(DATASETS, eps, claimed_epsilon=0.0, quantile=quantile).passed


def _recorded(monkeypatch):
    """The epsilon of every exponential mechanism the union module draws, and every set calibration used."""
    seen = {"em": [], "cal": []}
    em, select = union_mod.exponential_mechanism, union_mod._select

    def em_spy(scores, sensitivity, epsilon, rng=None):
        seen["em"].append((sensitivity, epsilon))
        return em(scores, sensitivity, epsilon, rng)

    def select_spy(hist, cal, rng, held=None):
        seen["cal"].append(cal)
        return select(hist, cal, rng, held)

    monkeypatch.setattr(union_mod, "exponential_mechanism", em_spy)
    monkeypatch.setattr(union_mod, "_select", select_spy)
    return seen


@pytest.mark.parametrize("engine", ["memory", "chunked", "policy"])
@pytest.mark.parametrize("fraction", [0.0, 0.5])
def test_the_default_chooses_the_bound_and_charges_its_share(monkeypatch, engine, fraction):
    """By default (no ``max_items``) the release draws the bound by the exponential mechanism at 2% of
    epsilon (sensitivity 1), bounds every person by it, and calibrates the set at the rest (times
    ``1 - count_fraction``) for the chosen bound; the parts' composition is the stated guarantee."""
    import pyarrow as pa

    ks = [30] * 150 + [3] * 50
    offsets, items, labels = _persons(ks, seed=1)
    user = np.repeat(np.arange(len(ks)), np.diff(offsets))
    table = pa.table({"user": user, "item": labels[items].astype(str)})
    seen = _recorded(monkeypatch)
    eps, delta = 2.0, 1e-5
    policy = engine == "policy"
    rel = releases.vocabulary(table, eps, delta, engine="memory" if policy else engine, count_fraction=fraction,
                              noise="laplace" if policy else "gaussian", policy=policy, rng=3)  # fmt: skip
    assert seen["em"] == [(1.0, eps * AUTO_FRACTION)]
    (cal,) = seen["cal"]
    chosen = rel.params["max_items"]
    assert chosen in MAX_ITEMS_GRID and rel.params["max_items_chosen"] and cal.max_items == chosen
    eps_set = eps * (1 - AUTO_FRACTION) * (1 - fraction)
    assert cal.epsilon == pytest.approx(eps_set, rel=1e-12) and rel.params["epsilon_set"] == cal.epsilon
    delta_set = delta / 2 if (fraction and not policy) else delta
    want = calibrate_union(cal.epsilon, delta_set, chosen, cal.noise, policy=policy)
    assert (cal.threshold, cal.scale) == (want.threshold, want.scale)
    parts = rel.extras["composed_of"]
    assert parts["max_items"] == PureDP(eps * AUTO_FRACTION)
    total = parts["max_items"]
    for step in [s for s in parts if s != "max_items"]:
        total = total.compose(parts[step])
    assert total.fits_within(rel.guarantee) and rel.guarantee == ApproxDP(eps, delta)
    assert total.epsilon == pytest.approx(eps, rel=1e-12) and total.epsilon <= eps


def test_the_bound_follows_the_persons_counts():
    """Persons holding ~30 items get a bound of 32; persons holding ~300, 512 (a 90% quantile rounded up the
    grid), in nearly every draw at epsilon 4."""
    for k, want in ((30, 32), (300, 512)):
        offsets, items, labels = _persons([k] * 300, n_items=2000, seed=2)
        got = Counter(
            private_vocabulary(offsets, items, labels, 4.0, 1e-5, count_fraction=0, rng=s).params["max_items"]
            for s in range(5)
        )
        assert got.most_common(1)[0][0] == want, got


# persons' distinct-item counts spread over the grid (100 each of 1, 2, 4, ..., 256): the 10% quantile is 1 and
# the 90% quantile 128, each ahead of every other candidate by 100 persons in score (e^8 in odds at epsilon 8)
SPREAD = np.repeat([2**j for j in range(9)], 100)


@pytest.mark.parametrize("algorithm", ["weighted", "policy", "policy-greedy"])
def test_the_laplace_unions_default_chooses_the_laplace_quantile(algorithm):
    """Every Laplace union (weighted, policy, policy greedy) chooses its default bound at the Laplace quantile
    (:data:`AUTO_QUANTILES`, 0.1: a person's weight per item is ``1 / k``, small bounds release more), the
    weighted Gaussian at 0.9; each release states its quantile. Persons holding 1 to 256 items (100 of each):
    1 with Laplace noise, 128 with Gaussian, in every draw (the other candidates are e^-8 less likely)."""
    assert AUTO_QUANTILES == {"gaussian": 0.9, "laplace": 0.1} and AUTO_QUANTILE == AUTO_QUANTILES["gaussian"]
    offsets, items, labels = _persons(SPREAD, n_items=300, seed=4)
    kw = {"policy": algorithm == "policy", "greedy": algorithm == "policy-greedy"}
    for seed in range(3):
        lap = private_vocabulary(offsets, items, labels, 8.0, 1e-5, noise="laplace", count_fraction=0, rng=seed, **kw)
        assert lap.params["max_items"] == 1 and lap.params["max_items_quantile"] == 0.1, lap.params
        assert "a 10% quantile" in lap.mechanism and "a 10% quantile" in lap.error.description
    gau = private_vocabulary(offsets, items, labels, 8.0, 1e-5, count_fraction=0, rng=0)
    assert gau.params["max_items"] == 128 and gau.params["max_items_quantile"] == 0.9
    assert "a 90% quantile" in gau.mechanism
    import pyarrow as pa  # the release layer (its weighted path: choose_max_items_with, where the data are)

    user = np.repeat(np.arange(SPREAD.size), np.diff(offsets))
    table = pa.table({"user": user, "item": labels[items].astype(str)})
    for engine in ("memory", "duckdb"):
        rel = releases.vocabulary(table, 8.0, 1e-5, noise="laplace", algorithm=algorithm, count_fraction=0, rng=1,
                                  engine=engine)  # fmt: skip
        assert rel.params["max_items"] == 1 and rel.params["max_items_quantile"] == 0.1, (engine, rel.params)


def test_the_engines_choice_follows_the_noise():
    """:func:`choose_max_items_with` (the engines' path: one row of per-person sums) chooses at the noise's
    quantile: 1 for Laplace, 128 for Gaussian (the default) on the spread persons; an unknown noise is refused
    before any sum is asked for."""
    from userdp.vocabulary import choose_max_items_with, max_items_grid_part

    class Sets:
        offsets = np.r_[0, np.cumsum(SPREAD)]

    def record_sums(fn, width):
        return fn(Sets, None)

    for seed in range(3):
        lap = choose_max_items_with(record_sums, 8.0, np.random.default_rng(seed), noise="laplace")
        assert (lap.value, lap.quantile) == (1, 0.1)
        gau = choose_max_items_with(record_sums, 8.0, np.random.default_rng(seed))
        assert (gau.value, gau.quantile) == (128, 0.9)
    assert max_items_grid_part(Sets, None)[1].sum() > 0

    def unread(fn, width):
        raise AssertionError("the data were read")

    with pytest.raises(ParameterError, match="noise"):
        choose_max_items_with(unread, 8.0, noise="Laplace")


def test_the_counts_key_selection_keeps_the_gaussian_quantile():
    """Per-key counts select their keys with the weighted Gaussian union whatever the counts' noise: ``max_keys``
    is chosen at the Gaussian quantile (128 on the spread persons), with Laplace counts too."""
    from userdp.vocabulary import private_key_counts

    offsets, items, labels = _persons(SPREAD, n_items=300, seed=4)
    mult = np.ones(items.size, dtype=np.int64)
    for noise in ("laplace", "gaussian"):
        rel = private_key_counts(offsets, items, mult, labels, 8.0, 1e-5, noise=noise, bounds=(1, 1), rng=2)
        assert rel.params["max_keys"] == 128, (noise, rel.params)


def test_the_scores_sensitivity_is_at_most_one_at_every_quantile():
    """Adding one person moves every score ``-|W_g - q n|`` by at most ``max(q, 1 - q) <= 1`` (exhaustively
    over small datasets and every added count), and the bound is reached."""
    worst = {}
    for q in (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0):
        for D in DATASETS:
            base = max_items_scores(persons_within(np.asarray(D)), q)
            for k in (0, 1, 2, 3, 5, 300, 9000):
                moved = np.abs(max_items_scores(persons_within(np.asarray(D + [k])), q) - base).max()
                worst[q] = max(worst.get(q, 0.0), float(moved))
        assert worst[q] <= max(q, 1 - q) + 1e-12 and worst[q] == pytest.approx(max(q, 1 - q)), (q, worst[q])


def test_a_fixed_bound_spends_nothing_on_a_choice(monkeypatch):
    seen = _recorded(monkeypatch)
    offsets, items, labels = _persons([5] * 40)
    rel = private_vocabulary(offsets, items, labels, 1.0, 1e-5, max_items=7, rng=1)
    assert seen["em"] == [] and rel.params["max_items"] == 7 and not rel.params["max_items_chosen"]
    assert rel.params["epsilon_bound"] == 0 and "max_items" not in rel.extras["composed_of"]
    assert rel.params["epsilon_set"] == pytest.approx(0.5)


@pytest.mark.parametrize("bad", ["Auto", "", "100", 0, 10_001, 2.5, True, None, [8]])
def test_bad_max_items_are_refused_before_the_data_are_read(bad):
    class Unreadable:
        def __getattr__(self, name):
            raise AssertionError("the data were read")

    with pytest.raises(ParameterError, match="max_items"):
        releases.vocabulary(Unreadable(), 1.0, 1e-6, max_items=bad)


def test_a_forged_choice_is_refused():
    """A :class:`BoundChoice` must carry the share ``"auto"`` spends and a bound of the grid: a choice claiming
    no epsilon (the selection not charged), or a bound off the grid, is refused."""
    eps = 1.0
    plan_vocabulary(eps, 1e-6, BoundChoice(64, eps * AUTO_FRACTION))
    for forged in (BoundChoice(64, 0.0), BoundChoice(100, eps * AUTO_FRACTION), BoundChoice(64, 0.5 * eps)):
        with pytest.raises(ParameterError, match="chosen max_items"):
            plan_vocabulary(eps, 1e-6, forged)
    offsets, items, labels = _persons([5] * 10)
    from userdp.vocabulary import private_vocabulary_from_sums

    with pytest.raises(ParameterError, match="auto"):
        private_vocabulary_from_sums(labels, np.zeros((labels.size, 2)), eps, 1e-6, max_items="auto")


def test_auto_plans_every_candidate():
    """``"auto"`` checks the calibrations at the grid's largest candidate: whatever bound the data choose, its
    plan exists (no refusal after the data are read), and the threshold grows with the bound."""
    for eps, delta, frac in ((0.05, 1e-8, 0.5), (1.0, 1e-6, 0.0), (8.0, 1e-5, 0.9)):
        auto = plan_vocabulary(eps, delta, "auto", count_fraction=frac)
        assert auto["max_items"] == max(MAX_ITEMS_GRID) and auto["epsilon_bound"] == eps * AUTO_FRACTION
        thresholds = []
        for g in MAX_ITEMS_GRID:
            p = plan_vocabulary(eps, delta, BoundChoice(g, eps * AUTO_FRACTION), count_fraction=frac)
            assert p["epsilon_set"] == auto["epsilon_set"] and p["max_items"] == g
            thresholds.append(p["calibration"].threshold)
        assert thresholds == sorted(thresholds) and thresholds[-1] == auto["calibration"].threshold
        assert math.isclose(auto["epsilon_set"] + auto["epsilon_counts"] + auto["epsilon_bound"], eps, rel_tol=1e-12)

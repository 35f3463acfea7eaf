"""``max_items="auto"``, the vocabulary's default: the contribution bound chosen privately (a 90% quantile of the
persons' distinct-item counts by the exponential mechanism over a public grid, 2% of epsilon, no delta)."""

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


@pytest.mark.parametrize("eps", [0.02, 0.5, 2.0])
def test_exact_audit_of_the_choice_and_broken_variants_caught(eps):
    """The exact law of the choice on neighbouring datasets: within its share of epsilon; scores of
    sensitivity 2 (doubled), or the choice's epsilon not charged (claimed 0), are caught."""
    from userdp.audit import audit_max_items_choice

    res = audit_max_items_choice(DATASETS, eps)
    assert res.passed and float(res.measured.split("= ")[1]) > 0.6 * eps, res  # passes, and not vacuously
    doubled = audit_max_items_choice(DATASETS, eps, scores=lambda w: 2 * max_items_scores(w))
    assert not doubled.passed
    assert not audit_max_items_choice(DATASETS, eps, claimed_epsilon=0.0).passed


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

"""``userdp.plan.vocabulary`` for each selection algorithm (``algorithm="weighted" | "policy" | "sips"``): the
predicted release probability against the release rate of the library's own release on an item held by
``n`` one-item persons (where each model is exact), so that a plan built on another algorithm's calibration
(DP-SIPS planned with the one-round threshold, only its last round, the policy without its cutoff) fails."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from userdp import plan
from userdp.errors import ParameterError
from userdp.vocabulary import (
    calibrate_sips,
    calibrate_union,
    plan_sips_vocabulary,
    plan_vocabulary,
    private_vocabulary,
    sips_fractions,
    sips_vocabulary,
)

RUNS = 1500


def _rate(release, n: int, runs: int = RUNS) -> float:
    """How often the real release (``release(offsets, items, labels, rng)``) releases the one item that ``n``
    persons hold (one item each)."""
    offsets = np.arange(n + 1)
    items = np.zeros(n, dtype=np.int64)
    labels = np.array(["w"], dtype=object)
    return sum(release(offsets, items, labels, s).value["items"].size for s in range(runs)) / runs


def _close(rate: float, p: float, runs: int = RUNS) -> bool:
    return abs(rate - p) < 4 * np.sqrt(p * (1 - p) / runs) + 0.005


@pytest.fixture
def memoized(monkeypatch):
    """The calibrations are deterministic functions of the public parameters: memoized across the runs."""
    import userdp.vocabulary.sips as sips
    import userdp.vocabulary.union as union

    monkeypatch.setattr(sips, "calibrate_sips", functools.lru_cache(sips.calibrate_sips))
    monkeypatch.setattr(union, "calibrate_union", functools.lru_cache(union.calibrate_union))


@pytest.mark.parametrize(("ratio", "n"), [(None, 27), (1.0, 36)])
def test_sips_plan_matches_the_release_rate_of_dp_sips(memoized, ratio, n):
    """DP-SIPS (3 rounds; the default ratio 4, and equal rounds): the predicted probability that an item held
    by ``n`` one-item persons is released by some round is mid-range and matches ``sips_vocabulary``'s rate
    over 1,500 releases. Planned with the one-round weighted union's threshold (0.75 at n = 27 against 0.47),
    or from the last round alone (0.2 against 0.5 with equal rounds), it does not."""
    sched = {} if ratio is None else {"ratio": ratio}
    pred = plan.vocabulary(1.0, 1e-6, algorithm="sips", max_items=1, persons=n, count_fraction=0, **sched)
    p = pred.extra["release probability"]
    assert 0.3 < p < 0.7 and pred.extra["algorithm"] == "sips" and pred.extra["rounds"] == 3

    def release(offsets, items, labels, s):
        return sips_vocabulary(offsets, items, labels, 1.0, 1e-6, max_items=1, count_fraction=0, rng=s, **sched)

    rate = _rate(release, n)
    assert _close(rate, p), (rate, p)
    one_round = plan.vocabulary(1.0, 1e-6, max_items=1, persons=n, count_fraction=0).extra["release probability"]
    assert not _close(rate, one_round), (rate, one_round)
    # the plan's rounds are calibrate_sips's, split by the schedule, and the last round alone misses the rate
    cal = calibrate_sips(1.0, 1e-6, 1, **sched)
    model = plan.vocabulary_model(1.0, 1e-6, algorithm="sips", max_items=1, count_fraction=0, **sched)
    assert [(c.threshold, c.scale) for c in model.rounds] == [(c.threshold, c.scale) for c in cal.rounds]
    assert cal.fractions == sips_fractions(3, ratio or 4.0)
    last = plan.SelectionModel(model.plan, model.rounds[-1:], None, "").release_probability(n * cal.unit)
    if ratio == 1.0:
        assert not _close(rate, last), (rate, last)


def test_policy_plan_matches_the_release_rate_and_its_cutoff(memoized):
    """The policy Laplace union: an item held by 6 one-item persons (mid-range) and by 60 (its weight stops at
    the cutoff Gamma = T + 3t, so it is released with probability ``1 - exp(-3) / 2``-ish, never near 1):
    the prediction matches ``private_vocabulary(policy=True)``'s rate in both; without the cap it would say
    1 for 60 persons."""
    for n in (6, 60):
        pred = plan.vocabulary(1.0, 1e-6, algorithm="policy", noise="laplace", max_items=1, persons=n, count_fraction=0,
                               confidence=0.99)  # fmt: skip
        p = pred.extra["release probability"]
        assert pred.extra["algorithm"] == "policy"

        def release(offsets, items, labels, s):
            return private_vocabulary(offsets, items, labels, 1.0, 1e-6, max_items=1, noise="laplace", policy=True,
                                      count_fraction=0, rng=s)  # fmt: skip

        rate = _rate(release, n)
        assert _close(rate, p), (n, rate, p)
    assert 0.96 < p < 0.99 and pred.extra["weight needed"][0.99] == float("inf")


def test_greedy_plan_matches_the_release_rate_and_its_threshold(memoized):
    """The policy greedy union planned from its own calibration (its threshold covers a new item at the full
    unit, above the policy Laplace's for k >= 2): for one-item persons each holder's whole unit goes to the
    item, so the prediction is exact and matches ``private_vocabulary(greedy=True)``'s rate, mid-range and at
    the cutoff."""
    for n in (6, 60):
        pred = plan.vocabulary(1.0, 1e-6, algorithm="policy-greedy", noise="laplace", max_items=1, persons=n,
                               count_fraction=0, confidence=0.99)  # fmt: skip
        p = pred.extra["release probability"]
        assert pred.extra["algorithm"] == "policy-greedy"

        def release(offsets, items, labels, s):
            return private_vocabulary(offsets, items, labels, 1.0, 1e-6, max_items=1, noise="laplace", greedy=True,
                                      count_fraction=0, rng=s)  # fmt: skip

        rate = _rate(release, n)
        assert _close(rate, p), (n, rate, p)
    ref = plan_vocabulary(2.0, 1e-6, 50, "laplace", False, greedy=True)
    g = plan.vocabulary(2.0, 1e-6, algorithm="policy-greedy", noise="laplace", max_items=50)
    assert g.extra["threshold"] == ref["calibration"].threshold_in_persons
    assert g.extra["new item released at most"] == ref["calibration"].delta_new
    pol = plan.vocabulary(2.0, 1e-6, algorithm="policy", noise="laplace", max_items=50)
    assert g.extra["threshold"] > pol.extra["threshold"]  # the greedy's new-item bound, not the water-filling's


def test_each_algorithm_plans_from_its_own_calibration():
    """The threshold, noise and budget split each plan states are the library's plan of that algorithm:
    ``plan_vocabulary`` (weighted, policy) and ``plan_sips_vocabulary`` (DP-SIPS: every round's threshold), under
    a fixed bound and under ``max_items="auto"`` (at the largest candidate, the choice's 2% taken out)."""
    for max_items in (50, "auto"):
        w = plan.vocabulary(2.0, 1e-6, max_items=max_items)
        ref = plan_vocabulary(2.0, 1e-6, max_items)
        assert w.extra["threshold"] == ref["calibration"].threshold_in_persons and w.extra["algorithm"] == "weighted"
        pol = plan.vocabulary(2.0, 1e-6, algorithm="policy", noise="laplace", max_items=max_items)
        ref = plan_vocabulary(2.0, 1e-6, max_items, "laplace", True)
        assert pol.extra["threshold"] == ref["calibration"].threshold_in_persons
        assert "cutoff" in pol.basis and "not modelled" in pol.basis
        s = plan.vocabulary(2.0, 1e-6, algorithm="sips", rounds=4, ratio=2.0, max_items=max_items)
        ref = plan_sips_vocabulary(2.0, 1e-6, max_items, rounds=4, ratio=2.0)
        assert s.extra["threshold"] == ref["calibration"].thresholds and len(s.extra["threshold"]) == 4
        assert s.extra["new item released at most"] == ref["calibration"].delta_new
        assert (max_items == "auto") == ("largest candidate" in s.basis) == ("max_items" in s.extra)
        assert "by some round" in s.basis and "lower bound" in s.basis
        # the thresholds are not the one-round union's at the set's share
        single = calibrate_union(ref["epsilon_set"], ref["delta_set"], ref["max_items"])
        assert single.threshold_in_persons not in s.extra["threshold"]
    assert plan.vocabulary(1.0, 1e-6).extra["algorithm"] == "weighted"  # the release's default


def test_vocabulary_epsilon_per_algorithm():
    for kw in ({"algorithm": "sips"}, {"algorithm": "policy", "noise": "laplace"}, {}):
        eps = plan.vocabulary_epsilon(40, 0.9, 1e-6, max_items=4, **kw)
        assert plan.vocabulary(eps, 1e-6, max_items=4, persons=40, **kw).extra["release probability"] >= 0.9
        assert plan.vocabulary(eps / 1.02, 1e-6, max_items=4, persons=40, **kw).extra["release probability"] < 0.9


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"algorithm": "greedy"}, "algorithm must be one of"),
        ({"algorithm": "weighted", "rounds": 3}, "rounds and ratio"),
        ({"algorithm": "sips", "rounds": 0}, "rounds"),
        ({"algorithm": "sips", "ratio": 20.0}, "ratio"),
        ({"algorithm": "sips", "noise": "laplace"}, "Gaussian"),
        ({"algorithm": "policy"}, "Laplace"),
    ],
)
def test_refusals(kw, message):
    with pytest.raises(ParameterError, match=message):
        plan.vocabulary(1.0, 1e-6, **kw)
    with pytest.raises(ParameterError, match=message):
        plan.vocabulary_epsilon(40, 0.9, 1e-6, **kw)

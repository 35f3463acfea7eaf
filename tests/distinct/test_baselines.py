"""R2T and the shifted inverse mechanism (the baselines of Knop & Steinke's Table 2): their output laws on
tiny instances against what the library really draws, their noise scales, and broken variants caught."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from userdp.distinct import (
    PersonElementGraph,
    r2t_distinct_count,
    r2t_thresholds,
    shifted_inverse_distinct_count,
    shifted_inverse_grid,
    shifted_inverse_law,
    shifted_inverse_removals,
)
from userdp.errors import ParameterError
from userdp.noise import RandomSource, exponential_mechanism
from userdp.privacy.guarantees import PureDP


def graph_of(sets: list[set[int]]) -> PersonElementGraph:
    labels = sorted(set().union(*sets)) if sets else []
    code = {x: i for i, x in enumerate(labels)}
    adj = [sorted(code[x] for x in s) for s in sets]
    offsets = np.r_[0, np.cumsum([len(a) for a in adj])].astype(np.int64)
    flat = np.array([x for a in adj for x in a], dtype=np.int64)
    return PersonElementGraph(offsets, flat, len(labels), np.array(labels))


# --------------------------------------------------------------------------------------------
# shifted inverse: the law, by brute force from the paper's definitions
# --------------------------------------------------------------------------------------------

TINY = [{1, 2, 3, 4}, {5, 6}, {7}, {1, 8}]  # element 1 shared: removing A alone does not remove it
EPS, BETA, UPPER, STEP = 2.0, 0.2, 100, 0.25


def brute_removals(sets: list[set[int]], k_max: int) -> list[int]:
    """Most elements removed by removing k persons (integral; the LP is integral on the tiny instances)."""
    n = len(sets)
    total = set().union(*sets) if sets else set()
    out = []
    for k in range(k_max + 1):
        best = 0
        for drop in itertools.combinations(range(n), min(k, n)):
            kept = set().union(*(sets[u] for u in range(n) if u not in drop)) if n - len(drop) else set()
            best = max(best, len(total) - len(kept))
        out.append(best)
    return out


def brute_law(sets: list[set[int]], eps: float, beta: float, upper: int, step: float) -> np.ndarray:
    """P[grid index i] from Fang et al.'s definitions: F_k the grid index of DC after removing k persons,
    g(i) = min{k <= 2 tau : F_k <= i} (2 tau + 1 if none), P[i] ∝ exp(-eps |g(i) - tau| / 2)."""
    m = math.ceil(math.log10(upper) / step - 1e-9)
    tau = math.ceil(2 / eps * math.log((m + 1) / beta))
    dc = len(set().union(*sets)) if sets else 0
    rem = brute_removals(sets, 2 * tau)
    f = [0 if dc - r <= 1 else min(m, math.ceil(math.log10(dc - r) / step - 1e-9)) for r in rem]
    w = []
    for i in range(m + 1):
        g = next((k for k in range(2 * tau + 1) if f[k] <= i), 2 * tau + 1)
        w.append(math.exp(-eps * abs(g - tau) / 2))
    w = np.array(w)
    return w / w.sum()


def draws(sets, eps, n, seed, upper=UPPER, step=STEP, beta=BETA, default_path=False) -> np.ndarray:
    """Grid indices the library draws. ``default_path``: every call solves its LPs itself (slow); otherwise the
    library's own LP values are computed once and handed to the same release function."""
    g = graph_of(sets)
    src = RandomSource(seed)
    m, tau = shifted_inverse_grid(upper, step, eps, beta)
    kw = {} if default_path else dict(removals=shifted_inverse_removals(g, 2 * tau))
    idx = [shifted_inverse_distinct_count(g, eps, beta, upper, step, src, **kw).extras["grid_index"] for _ in range(n)]
    return np.bincount(idx, minlength=m + 1)


def chi2_p(counts: np.ndarray, p: np.ndarray) -> float:
    keep = p * counts.sum() >= 5
    obs = np.r_[counts[keep], counts[~keep].sum()]
    exp = np.r_[p[keep], p[~keep].sum()] * counts.sum()
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return float(stats.chisquare(obs, exp).pvalue)


def test_the_lp_removals_match_brute_force_on_the_tiny_instance():
    assert shifted_inverse_removals(graph_of(TINY), 6) == pytest.approx(brute_removals(TINY, 6), abs=1e-7)


def test_the_library_law_is_the_papers():
    starts, lengths, losses = shifted_inverse_law(graph_of(TINY), EPS, BETA, UPPER, STEP)
    m, tau = shifted_inverse_grid(UPPER, STEP, EPS, BETA)
    w = np.zeros(m + 1)
    for s, n, loss in zip(starts, lengths, losses, strict=True):
        w[s : s + n] = math.exp(-EPS * loss / 2)
    assert lengths.sum() == m + 1
    assert w / w.sum() == pytest.approx(brute_law(TINY, EPS, BETA, UPPER, STEP))


MANY = [{i, 100 + i} for i in range(14)]  # 2 tau = 8 removals leave 12 elements: grid points below F_{2 tau}


@pytest.mark.parametrize("sets", [TINY, pytest.param([{1, 2}, {2, 3}, {4, 5, 6, 7, 8, 9}, {10}, {10, 11}],
                                               marks=pytest.mark.slow),
                                  pytest.param(MANY, marks=pytest.mark.slow)])  # fmt: skip
def test_the_shifted_inverse_draws_follow_the_exact_law(sets):
    p = brute_law(sets, EPS, BETA, UPPER, STEP)
    counts = draws(sets, EPS, 4000, seed=36)
    assert chi2_p(counts, p) > 1e-3


@pytest.mark.slow  # a large statistical audit; the exact laws of the draws are checked on small instances above
def test_the_default_path_draws_follow_the_exact_law():
    counts = draws(TINY, EPS, 800, seed=11, default_path=True)
    assert chi2_p(counts, brute_law(TINY, EPS, BETA, UPPER, STEP)) > 1e-3


@pytest.mark.slow  # a statistical audit; the exact neighbour checks below catch a wrong epsilon too
def test_the_chi_square_check_rejects_a_mechanism_with_the_wrong_epsilon():
    p = brute_law(TINY, EPS, BETA, UPPER, STEP)
    counts = draws(TINY, 1.3 * EPS, 4000, seed=36)  # a sampler 30% too confident
    assert chi2_p(counts, p) < 1e-6


def neighbours(sets):
    for u in range(len(sets)):
        yield sets[:u] + sets[u + 1 :]


@pytest.mark.parametrize("seed", range(6))
def test_the_shifted_inverse_law_is_epsilon_dp_between_neighbours(seed):
    rng = np.random.default_rng(seed)
    sets = [set(rng.choice(12, size=rng.integers(1, 6), replace=False).tolist()) for _ in range(4)]
    p = brute_law(sets, EPS, BETA, UPPER, STEP)
    for other in neighbours(sets):
        q = brute_law(other, EPS, BETA, UPPER, STEP)
        assert np.max(np.abs(np.log(p / q))) <= EPS + 1e-9


def test_a_broken_inverse_without_clipping_is_caught_by_the_neighbour_check():
    """The loss of grid points below F_{2 tau} must be clipped (tau + 1): a loss that jumps there (here 2 tau,
    i.e. the unclipped inverse's distance) breaks the sensitivity-1 argument and the neighbour check sees it."""
    sets = [{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}]
    m, tau = shifted_inverse_grid(UPPER, STEP, EPS, BETA)

    def law(ss, clip):
        dc = len(set().union(*ss)) if ss else 0
        top = 0 if dc <= 1 else math.ceil(math.log10(dc) / STEP - 1e-9)
        loss = np.array([tau if i >= top else (tau + 1 if clip else 2 * tau) for i in range(m + 1)], float)
        w = np.exp(-EPS * loss / 2)
        return w / w.sum()

    worst = lambda clip: max(np.max(np.abs(np.log(law(sets, clip) / law(o, clip)))) for o in neighbours(sets))  # noqa: E731
    assert worst(True) <= EPS + 1e-9 < worst(False)


def test_the_shifted_inverse_release_carries_its_guarantee_and_refuses_bad_parameters():
    r = shifted_inverse_distinct_count(graph_of(TINY), 1.0, 0.1, 100, 0.01, RandomSource(1))
    assert r.guarantee == PureDP(1.0)
    assert r.value == pytest.approx(10 ** r.extras["log10"])
    for bad in (dict(epsilon=0.0), dict(beta=1.0), dict(upper_bound=1), dict(error_level=0.0)):
        kw = dict(graph=None, epsilon=1.0, beta=0.1, upper_bound=100, error_level=0.01) | bad
        with pytest.raises(ParameterError):
            shifted_inverse_distinct_count(**kw)


def test_exponential_mechanism_multiplicities_are_exact():
    scores, mult = np.array([0.0, -1.0, -2.0]), np.array([1, 5, 2])
    p = mult * np.exp(scores / 2)
    p /= p.sum()
    src = RandomSource(7)
    got = np.bincount(
        [exponential_mechanism(scores, 1.0, 1.0, src, multiplicities=mult) for _ in range(4000)], minlength=3
    )
    assert stats.chisquare(got, p * got.sum()).pvalue > 1e-3
    flat = np.exp(scores / 2) / np.exp(scores / 2).sum()  # the law without multiplicities is rejected
    assert stats.chisquare(got, flat * got.sum()).pvalue < 1e-6


# --------------------------------------------------------------------------------------------
# R2T
# --------------------------------------------------------------------------------------------


def wide_graph(n_persons: int = 60, each: int = 10) -> PersonElementGraph:
    return graph_of([set(range(u * each, (u + 1) * each)) for u in range(n_persons)])


def r2t_draws(graph, eps, beta, gs, n, seed):
    src = RandomSource(seed)
    return [r2t_distinct_count(graph, eps, beta, gs, src) for _ in range(n)]


def test_r2t_thresholds_follow_the_paper():
    assert r2t_thresholds(2) == [2]
    assert r2t_thresholds(1000) == [2**j for j in range(1, 11)]
    with pytest.raises(ParameterError):
        r2t_thresholds(1)


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_r2t_noise_has_scale_j_tau_over_epsilon_and_a_30_percent_error_is_rejected(eps):
    g = wide_graph()
    beta, gs = 0.4, 4  # J = 2 thresholds: 2 and 4, each with epsilon / 2
    rel = r2t_draws(g, eps, beta, gs, 6000, seed=5)
    dc = {2: 120.0, 4: 240.0}  # DC(D; tau): 60 persons with 10 elements of their own
    J = 2
    for j, tau in enumerate((2, 4)):
        z = np.array([r.extras["noisy"][j] for r in rel]) - dc[tau] + J * tau / eps * math.log(J / beta)
        b = J * tau / eps
        assert stats.kstest(z, stats.laplace(scale=b).cdf).pvalue > 1e-3
        assert stats.kstest(z, stats.laplace(scale=1.3 * b).cdf).pvalue < 1e-5
        assert stats.kstest(z, stats.laplace(scale=b / 1.3).cdf).pvalue < 1e-5


def test_r2t_noisy_values_exceed_their_truncated_count_with_probability_beta_over_2j():
    g = wide_graph()
    eps, beta, gs = 1.0, 0.4, 4
    rel = r2t_draws(g, eps, beta, gs, 3000, seed=9)
    above = np.mean([r.extras["noisy"][0] > 120.0 for r in rel])
    assert above == pytest.approx(beta / 4, abs=0.02)  # P[Lap(b) > b ln(J / beta)] = beta / (2 J)


def test_r2t_release_is_the_max_of_its_noisy_values_and_zero():
    rel = r2t_draws(wide_graph(3, 2), 1.0, 0.1, 1000, 50, seed=3)  # huge shifts: the release is 0
    assert all(r.value == max(max(r.extras["noisy"]), 0.0) for r in rel)
    assert any(r.value == 0.0 for r in rel)
    r = rel[0]
    assert r.guarantee == PureDP(1.0) and r.params["thresholds"] == 10


def test_r2t_refuses_bad_parameters_before_reading_data():
    for bad in (dict(epsilon=-1.0), dict(beta=0.0), dict(global_sensitivity=1), dict(global_sensitivity=2.5)):
        kw = dict(graph=None, epsilon=1.0, beta=0.1, global_sensitivity=16) | bad
        with pytest.raises(ParameterError):
            r2t_distinct_count(**kw)

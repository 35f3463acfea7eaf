"""Distinct count: exact incremental matching vs scipy max-flow, the greedy's sensitivity and
approximation (exhaustive on small data), sampling, GEM's fast scores, and the 1 - beta lower bound."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import maximum_flow

from userdp.data import FiniteDomain, UserDataset
from userdp.distinct import (
    dc_greedy,
    dc_matching,
    dc_sampling,
    distinct_count,
    gem_scores,
    gem_scores_quadratic,
    laplace_lower_bound,
    person_element_graph,
)
from userdp.distinct.counting import PersonElementGraph, _dc_all, dc_bucketed, element_buckets
from userdp.errors import DataError, ParameterError


def _graph(sets: list[set[int]], k: int) -> PersonElementGraph:
    ds = UserDataset.from_lists([sorted(s) for s in sets], domain=FiniteDomain(np.arange(k)))
    return person_element_graph(ds)


def scipy_dc(sets: list[set[int]], k: int, l: int) -> int:
    n = len(sets)
    S, T = 0, n + k + 1
    rows, cols, caps = [], [], []
    for u, s in enumerate(sets):
        rows.append(S), cols.append(1 + u), caps.append(l)
        for e in s:
            rows.append(1 + u), cols.append(1 + n + e), caps.append(1)
    for e in range(k):
        rows.append(1 + n + e), cols.append(T), caps.append(1)
    G = sp.csr_matrix((np.array(caps, dtype=np.int32), (rows, cols)), shape=(T + 1, T + 1))
    return int(maximum_flow(G, S, T).flow_value)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matching_searches_from_both_sides_and_equals_maxflow(seed):
    """A skewed graph like a vocabulary (Zipf element popularity, varied person sizes): the exact count
    searches from the persons while l is small and from the free elements once l is large (both kinds of
    phase run), and every DC(D; l) equals SciPy's max flow."""
    rng = np.random.default_rng(seed)
    k = 1500
    pop = 1.0 / np.arange(1, k + 1) ** 1.1
    pop /= pop.sum()
    sets = [set(rng.choice(k, size=int(rng.integers(5, 200)), p=pop).tolist()) for _ in range(120)]
    g = _graph(sets, k)
    lmax = 40
    none = np.zeros(0, np.int64)
    out, phases = _dc_all(g.offsets, g.adj.astype(np.int32), g.n_elements, lmax, none, none)
    assert out.tolist() == dc_matching(g, lmax).tolist()
    assert phases[0] > 0 and phases[1] > 0
    for l in (1, 2, 3, 5, 8, 13, 21, 34, 40):
        assert out[l - 1] == scipy_dc(sets, k, l)


def _random_sets(rng, n, k, p):
    return [set(np.flatnonzero(rng.random(k) < p).tolist()) or {int(rng.integers(k))} for _ in range(n)]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**9), st.integers(1, 25), st.integers(1, 40), st.floats(0.02, 0.6))
def test_matching_equals_scipy_maxflow(seed, n, k, p):
    rng = np.random.default_rng(seed)
    sets = _random_sets(rng, n, k, p)
    g = _graph(sets, k)
    lmax = max(len(s) for s in sets) + 1
    dc = dc_matching(g, lmax)
    for l in range(1, lmax + 1):
        assert dc[l - 1] == scipy_dc(sets, k, l)
    assert np.all(np.diff(dc) >= 0)  # monotone
    assert np.all(np.diff(dc, 2) <= 0)  # concave
    assert dc[-1] == g.distinct_count()  # l >= max degree: the true distinct count


def _csr(sets: list[set[int]], k: int) -> PersonElementGraph:
    """The graph :func:`person_element_graph` builds for persons over the elements ``0..k-1`` (whose codes are
    their ranks), built directly: 8x faster for the exhaustive loops below."""
    offsets = np.r_[0, np.cumsum([len(s) for s in sets])].astype(np.int64)
    return PersonElementGraph(offsets, np.array([e for s in sets for e in sorted(s)], dtype=np.int64), k)


def test_greedy_sensitivity_and_approximation_exhaustive():
    """Every dataset of 3 persons over 4 elements (person sets non-empty), every person added or removed:
    the greedy value after round l moves by at most l, and DC(D; l) / 2 <= greedy <= DC(D; l)."""
    k, lmax = 4, 4
    subsets = [set(c) for r in range(1, k + 1) for c in itertools.combinations(range(k), r)]
    rng = np.random.default_rng(0)
    sets = [subsets[i] for i in rng.integers(0, len(subsets), 3)]
    g = _graph(sets, k)
    assert np.array_equal(g.offsets, _csr(sets, k).offsets) and np.array_equal(g.adj, _csr(sets, k).adj)
    for _ in range(400):
        sets = [subsets[i] for i in rng.integers(0, len(subsets), 3)]
        g = dc_greedy(_csr(sets, k), lmax)
        exact = dc_matching(_csr(sets, k), lmax)
        assert np.all(g <= exact) and np.all(2 * g >= exact)
        for pos in range(4):  # add a person at any position of the fixed order
            for extra in subsets:
                g2 = dc_greedy(_csr(sets[:pos] + [extra] + sets[pos:], k), lmax)
                assert np.all(np.abs(g2 - g) <= np.arange(1, lmax + 1))
        for rm in range(3):
            g3 = dc_greedy(_csr(sets[:rm] + sets[rm + 1 :], k), lmax)
            assert np.all(np.abs(g3 - g) <= np.arange(1, lmax + 1))


def test_greedy_rule_matters():
    """A greedy that lets persons take their *last* untaken element (breaking the fixed-order rule) can
    be fooled; ours follows the paper's rule: round 1 on {0,1},{0} gives person 0 element 0, person 1 none."""
    g = dc_greedy(_graph([{0, 1}, {0}], 2), 2)
    assert list(g) == [1, 2]


def test_sampling_baseline(rng):
    sets = [{0, 1, 2}, {2, 3}, {4}]
    g = _graph(sets, 5)
    s = dc_sampling(g, 4, rng)
    assert s[-1] == 5 and s[0] <= 3 and np.all(np.diff(s) >= 0)
    exact = dc_matching(g, 4)
    assert np.all(s <= exact)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10**9), st.integers(1, 60))
def test_gem_fast_scores_equal_quadratic(seed, m):
    rng = np.random.default_rng(seed)
    q = np.cumsum(rng.random(m) * 10)  # concave-ish utilities like DC(D; l)
    q = q - rng.random() * np.arange(1, m + 1) * 3
    if seed % 3 == 0:
        q = rng.normal(size=m) * 5  # arbitrary scores too
    sens = np.arange(1, m + 1, dtype=float)
    t = 2 * math.log(m / 0.05) / 0.5
    assert np.allclose(gem_scores(q, sens, t), gem_scores_quadratic(q, sens, t), atol=1e-9)
    assert np.all(gem_scores(q, sens, t) <= 1e-12)


def test_lower_bound_holds_with_probability_beta(rng):
    """Pr[release > true count] <= beta over many runs of the full Algorithm 1 (max degree 3, so the
    chosen l often reaches the true count); the same release with the shift halved fails."""
    data_rng = np.random.default_rng(1)
    sets = _random_sets(data_rng, 60, 80, 0.02)
    g = _graph(sets, 80)
    true = g.distinct_count()
    beta, runs = 0.1, 1500
    over = sum(distinct_count(g, 2.0, beta, l_max=3, rng=rng).value > true for _ in range(runs))
    assert over / runs <= beta + 3 * math.sqrt(beta * (1 - beta) / runs)
    # the release step at the true count, with the paper's shift and with half of it
    full = sum(laplace_lower_bound(true, 3.0, 1.0, beta, rng)[0] > true for _ in range(runs))
    half = sum(laplace_lower_bound(true, 3.0, 1.0, beta, rng, shift_factor=0.5)[0] > true for _ in range(runs))
    sd = math.sqrt(beta * (1 - beta) / runs)
    assert full / runs <= beta + 3 * sd
    assert half / runs > beta + 3 * sd  # P = 0.5 e^{-ln(1/(2 beta))/2} = 0.22 for beta = 0.1


def test_release_object_and_refusals(rng):
    ds = UserDataset.from_lists([["a", "b"], ["b", "c"], ["d"]])
    rel = distinct_count(ds, 1.0, 0.05, l_max=5, rng=rng)
    assert rel.guarantee.epsilon == 1.0 and rel.extras["bound"] in range(1, 6)
    assert rel.error.confidence == pytest.approx(0.95)
    for kw in (
        dict(epsilon=0.0),
        dict(epsilon=1.0, beta=0.5),
        dict(epsilon=1.0, l_max=0),
        dict(epsilon=1.0, method="x"),
    ):
        with pytest.raises(ParameterError):
            distinct_count(ds, **kw)
    with pytest.raises(DataError):
        person_element_graph(UserDataset.from_lists([[(0.1, 0.2)]]))
    with pytest.raises(ParameterError):
        dc_matching(person_element_graph(ds), 0)


@pytest.mark.parametrize("method", ["matching", "greedy", "sampling"])
def test_no_persons_and_empty_persons_are_released(method, rng):
    """Person-level DP protects adding or removing a person: the dataset of no persons, and persons with no
    elements, are inputs like any other (DC = 0 for them) and are released, never refused."""
    for ds in (
        UserDataset.from_lists([], domain=FiniteDomain(["a", "b"])),
        UserDataset.from_table({"user": [], "item": []}, "user", "item"),  # a domain read off nothing
        UserDataset.from_lists([[], []], domain=FiniteDomain(["a"])),
    ):
        g = person_element_graph(ds)
        assert g.distinct_count() == 0 and np.all(dc_matching(g, 4) == 0) and np.all(dc_greedy(g, 4) == 0)
        rel = distinct_count(ds, 1.0, 0.05, l_max=4, method=method, rng=rng)
        assert math.isfinite(rel.value) and rel.guarantee.epsilon == 1.0
    # persons with no elements change nothing: with the same noise, the same release
    from userdp.noise import RandomSource

    dom = FiniteDomain(["a", "b", "c"])
    sets = [["a", "b"], ["c"]]
    base = distinct_count(UserDataset.from_lists(sets, domain=dom), 1.0, method=method, rng=RandomSource(5))
    padded = distinct_count(UserDataset.from_lists(sets + [[]], domain=dom), 1.0, method=method, rng=RandomSource(5))
    assert padded.value == base.value


# --------------------------------------------------------------------------------------------
# Exact audit of Algorithm 1 (GEM + lattice discrete Laplace) on tiny datasets
# --------------------------------------------------------------------------------------------


def _tiny_datasets() -> list[list[set[int]]]:
    """Every dataset of 1-3 persons over 3 elements, a person with no elements included (164 datasets); the
    audit adds their remove-one-person neighbours, the empty dataset among them."""
    types = [set(c) for r in (0, 1, 2, 3) for c in itertools.combinations(range(3), r)]
    return [list(c) for k in (1, 2, 3) for c in itertools.combinations_with_replacement(types, k)]


@pytest.mark.parametrize("method", ["matching", "greedy"])
@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_exact_audit_of_algorithm_1(method, eps):
    from userdp.audit import audit_distinct_count

    res = audit_distinct_count(_tiny_datasets(), eps, beta=0.1, l_max=3, method=method)
    assert res.passed, str(res)


class _FirstUniform:
    """Builds seeded sources whose first ``randbelow(2^256)`` (the exponential mechanism's uniform) is ``u``."""

    TOP = 1 << 256

    @staticmethod
    def source(u: int):
        from userdp.noise import RandomSource

        class Source(RandomSource):
            def randbelow(self, n):
                nonlocal u
                if n == _FirstUniform.TOP and u is not None:
                    v, u = u, None
                    return v
                return super().randbelow(n)

        return Source(0)


def test_the_audit_s_law_is_the_law_the_release_draws():
    """The exact audit computes the law of ``l_hat`` from the release's plan; here the real ``distinct_count``
    is run with its uniform swept, and the cells in which it returns each ``l`` (bisection to ``2^-34``) are
    the audit's probabilities to 1e-9, on 6 of the audited datasets and both methods. (A draw made with half
    GEM's sensitivity is caught here, not by the audit.)"""
    import userdp.distinct.release as R
    from userdp.audit import _exp_mech_log_probs

    top = _FirstUniform.TOP
    data = _tiny_datasets()[::28]
    assert len(data) == 6
    for method in ("matching", "greedy"):
        for D in data:
            g = _graph(D, 3)
            plan = R.release_plan(g, 1.0, 0.1, 3, method)
            cdf = np.cumsum(np.exp(_exp_mech_log_probs(plan.scores, plan.epsilon_select)))[:-1]

            def bound(u, g=g, method=method):
                return distinct_count(g, 1.0, 0.1, 3, method, rng=_FirstUniform.source(u)).extras["bound"]

            for i, want in enumerate(cdf, start=1):
                lo, hi = 0, top - 1
                if bound(lo) > i:
                    assert want < 1e-9
                    continue
                while hi - lo > top >> 34:
                    mid = (lo + hi) // 2
                    lo, hi = (lo, mid) if bound(mid) > i else (mid, hi)
                assert abs(hi / top - want) < 1e-9, (D, method, i, hi / top, want)


def test_exact_audit_catches_broken_distinct_count(monkeypatch):
    """Half the noise (sensitivity l/2), a count with twice the sensitivity, and the shift halved are all
    flagged by the exact audit."""
    import userdp.distinct.release as R
    from userdp.audit import audit_distinct_count

    ds = _tiny_datasets()
    cal = R.calibrate_laplace
    with monkeypatch.context() as m:
        m.setattr(R, "calibrate_laplace", lambda s, e, dim=1: cal(s / 2, e, dim))
        assert not audit_distinct_count(ds, 1.0, 0.1, 3).passed
    with monkeypatch.context() as m:
        m.setitem(R._METHODS, "matching", lambda g, l: 2 * dc_matching(g, l))
        assert not audit_distinct_count(ds, 1.0, 0.1, 3).passed
    quantile = R._shift_quantile
    with monkeypatch.context() as m:
        m.setattr(R, "_shift_quantile", lambda t, b: quantile(t, b) // 2)
        res = audit_distinct_count(ds, 1.0, 0.1, 3)
        assert not res.passed and "coverage = 0.7" in res.measured


def test_exact_audit_includes_the_empty_neighbour(monkeypatch):
    """One-person datasets have exactly one neighbour, the empty dataset: the audit checks that pair (it
    used to skip it), so on one-person datasets alone it still catches half the noise."""
    import userdp.distinct.release as R
    from userdp.audit import audit_distinct_count

    singles = [[set(c)] for r in (1, 2, 3) for c in itertools.combinations(range(3), r)]
    res = audit_distinct_count(singles, 1.0, 0.1, 3)
    assert res.passed and "dataset [{0, 1, 2}] minus person 0" in res.detail, str(res)
    cal = R.calibrate_laplace
    monkeypatch.setattr(R, "calibrate_laplace", lambda s, e, dim=1: cal(s / 2, e, dim))
    assert not audit_distinct_count(singles, 1.0, 0.1, 3).passed


# --------------------------------------------------------------------------------------------
# The bucketed count (the distributed path)
# --------------------------------------------------------------------------------------------


def test_bucketed_with_one_bucket_is_the_exact_count():
    rng = np.random.default_rng(5)
    g = _graph(_random_sets(rng, 40, 60, 0.2), 60)
    assert dc_bucketed(g, 20, 1).tolist() == dc_matching(g, 20).tolist()


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**9), st.integers(2, 14), st.integers(2, 30), st.floats(0.05, 0.6), st.integers(1, 5))
def test_bucketed_sensitivity_and_lower_bound_exhaustive(seed, n, k, p, n_buckets):
    """Removing any one person changes sum_b DC_b(l) by at most l (and never raises it), for every l; and the
    bucketed count never exceeds the exact DC(D; l)."""
    rng = np.random.default_rng(seed)
    sets = _random_sets(rng, n, k, p)
    labels = np.array([f"e{j}" for j in range(k)], dtype=object)
    buckets = element_buckets(labels, n_buckets)
    lmax = max(len(s) for s in sets) + 1

    def count(ss):
        g = _graph(ss, k)
        return dc_bucketed(g, lmax, n_buckets, buckets)

    full = count(sets)
    assert np.all(full <= dc_matching(_graph(sets, k), lmax))
    ls = np.arange(1, lmax + 1)
    for i in range(n):
        less = count(sets[:i] + sets[i + 1 :])
        assert np.all(less <= full) and np.all(full - less <= ls)


def test_bucketed_count_is_below_the_exact_count_and_moves_by_at_most_l():
    """Fixed graphs, 3 public buckets: the bucketed count never exceeds ``DC(D; l)`` (SciPy's max flow), and
    removing any one person lowers it by at most ``l``, for every ``l`` (a fast, deterministic companion of the
    property test below: a bucket that counts a person with all of their ``l`` units is caught at once)."""
    rng = np.random.default_rng(11)
    labels = np.array([f"e{j}" for j in range(12)], dtype=object)
    buckets = element_buckets(labels, 3)
    assert len(set(buckets.tolist())) == 3
    for _ in range(6):
        sets = _random_sets(rng, 6, 12, 0.45)
        lmax = max(len(s) for s in sets)
        full = dc_bucketed(_graph(sets, 12), lmax, 3, buckets)
        assert all(full[l - 1] <= scipy_dc(sets, 12, l) for l in range(1, lmax + 1))
        for i in range(len(sets)):
            less = dc_bucketed(_graph(sets[:i] + sets[i + 1 :], 12), lmax, 3, buckets)
            assert np.all(less <= full) and np.all(full - less <= np.arange(1, lmax + 1))


def test_bucketed_shares_are_house_monotone_and_within_degree():
    from userdp.distinct.counting import _dhondt_units

    offsets = np.array([0, 7, 10], dtype=np.int64)
    edge_bucket = np.array([0, 0, 0, 0, 1, 1, 2, 3, 3, 3], dtype=np.int64)
    person, bucket, level = _dhondt_units(offsets, edge_bucket, 4, 5)
    assert person.tolist() == [0] * 5 + [1] * 3 and level.tolist() == [1, 2, 3, 4, 5, 1, 2, 3]
    # D'Hondt on degrees (4, 2, 1): quotients 4 | 2 = 2 (tie: lower bucket) | 2 | 4/3 | 1 = 1 = 1 (tie)
    assert bucket[:5].tolist() == [0, 0, 1, 0, 0]
    assert bucket[5:].tolist() == [3, 3, 3]  # never more units in a bucket than elements there


def test_bucketed_refuses_a_graph_without_labels():
    g = PersonElementGraph(np.array([0, 1]), np.array([0]), 1)
    with pytest.raises(DataError, match="labels"):
        dc_bucketed(g, 3, 2)


@pytest.mark.parametrize("method", ["matching", "bucketed"])
def test_release_publishes_nothing_read_off_the_data_but_the_value(method):
    """Besides the noisy value, a release carries only functions of the public parameters and of the chosen
    l: on two neighbouring datasets that choose the same l, everything else is equal (GEM's scores, exact
    functions of DC(D; l), once leaked through ``extras``)."""
    users, items = [0, 0, 1, 1], ["a", "b", "b", "c"]
    d1 = UserDataset.from_arrays(np.array(users), np.array(items, dtype=object))
    d2 = UserDataset.from_arrays(np.array(users + [2] * 3), np.array(items + ["x", "y", "z"], dtype=object))
    compared = 0
    for seed in range(30):
        r1 = distinct_count(d1, 1.0, l_max=3, method=method, n_buckets=2, rng=seed)
        r2 = distinct_count(d2, 1.0, l_max=3, method=method, n_buckets=2, rng=seed)
        if r1.extras["bound"] == r2.extras["bound"]:
            compared += 1
            assert set(r1.extras) == set(r2.extras)
            for k in r1.extras:
                assert np.array_equal(np.asarray(r1.extras[k]), np.asarray(r2.extras[k])), k
            assert r1.params == r2.params and r1.error.description == r2.error.description
    assert compared > 0


def test_large_counts_release_instead_of_overflowing():
    """Review 20: the lattice value DC / g passed 2^63 once a count reached about l * 9.6 M at epsilon 1 (or a
    thousand persons at epsilon 10^4), and the release crashed with an OverflowError that depended on the
    data. The lattice values are Python integers now; the release stays a lower bound at the right scale."""
    from userdp import plan
    from userdp.distinct.release import distinct_count

    for eps, count in ((1.0, 2**24), (1.0, 10**12), (10_000.0, 1024)):
        rel = distinct_count(None, eps, 0.05, 100, counts=np.full(100, count), rng=1)
        assert count - 50_000 / eps < rel.value <= count + 1e-6 * count
    assert plan.distinct(1.0, curve=np.full(100, 10**12)).median < 10_000

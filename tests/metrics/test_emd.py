"""EMD against POT's exact solver on random small cases, closed forms, Lemma 2.1 and the EMD norm."""

from __future__ import annotations

import numpy as np
import ot
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from userdp.errors import DataError
from userdp.metrics import (
    ClusteredMetric,
    EuclideanMetric,
    FiniteMetric,
    GridL1,
    LineMetric,
    emd,
    emd_assignment,
    emd_datasets,
    emd_norm,
    grid_emd,
    histogram,
)

SEEDS = st.integers(0, 2**32 - 1)


def _hist(rng, k, sparse=False):
    h = rng.random(k) ** 3
    if sparse:
        h[rng.random(k) < 0.6] = 0
        if h.sum() == 0:
            h[0] = 1
    return h / h.sum()


@settings(max_examples=60, deadline=None)
@given(SEEDS, st.integers(1, 4), st.integers(1, 5), st.floats(0.01, 1.0), st.booleans())
def test_clustered_closed_form_matches_pot(seed, s, t, r, sparse):
    rng = np.random.default_rng(seed)
    space = ClusteredMetric(s, t, r)
    p, q = _hist(rng, space.size, sparse), _hist(rng, space.size, sparse)
    assert emd(p, q, space) == pytest.approx(ot.emd2(p, q, space.full_matrix()), abs=1e-10)


@settings(max_examples=60, deadline=None)
@given(SEEDS, st.integers(1, 7), st.booleans())
def test_grid_flow_matches_pot(seed, side, sparse):
    rng = np.random.default_rng(seed)
    space = GridL1(side)
    p, q = _hist(rng, space.size, sparse), _hist(rng, space.size, sparse)
    assert emd(p, q, space) == pytest.approx(ot.emd2(p, q, space.full_matrix()), abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(SEEDS, st.integers(1, 6), st.floats(0.1, 3.0))
def test_unequal_mass_is_emd_norm(seed, side, factor):
    """With unequal masses, grid flow, the clustered closed form and POT with a bank node agree."""
    rng = np.random.default_rng(seed)
    space = GridL1(side)
    p, q = _hist(rng, space.size), _hist(rng, space.size) * factor
    generic = FiniteMetric(space.full_matrix(), scale=1.0, check=False)
    assert emd(p, q, space) == pytest.approx(emd(p, q, generic), abs=1e-9)
    cl = ClusteredMetric(2, 3, 0.3)
    a, b = _hist(rng, 6), _hist(rng, 6) * factor
    assert emd(a, b, cl) == pytest.approx(emd(a, b, FiniteMetric(cl.full_matrix(), scale=1.0)), abs=1e-10)


@settings(max_examples=40, deadline=None)
@given(SEEDS, st.integers(1, 12), st.integers(1, 12))
def test_line_closed_form_matches_pot(seed, m, n):
    rng = np.random.default_rng(seed)
    space = LineMetric(-2.0, 3.0)
    x, y = rng.uniform(-2, 3, m), rng.uniform(-2, 3, n)
    C = np.abs(x[:, None] - y[None, :]) / 5.0
    assert emd(x, y, space) == pytest.approx(ot.emd2(np.ones(m) / m, np.ones(n) / n, C), abs=1e-10)


@settings(max_examples=40, deadline=None)
@given(SEEDS, st.integers(1, 15))
def test_lemma_2_1_assignment_matches_pot(seed, m):
    rng = np.random.default_rng(seed)
    space = ClusteredMetric(3, 4, 0.25)
    K, Kp = rng.integers(0, 12, m), rng.integers(0, 12, m)
    val, perm = emd_assignment(K, Kp, space)
    assert sorted(perm) == list(range(m))
    assert val == pytest.approx(np.mean(space.pairwise(K, Kp[perm])), abs=1e-12)
    assert val == pytest.approx(emd_datasets(K, Kp, space), abs=1e-10)
    pts = EuclideanMetric(2, 4.0)
    X, Y = rng.uniform(-1, 1, (m, 2)), rng.uniform(-1, 1, (m, 2))
    assert emd_assignment(X, Y, pts)[0] == pytest.approx(emd(X, Y, pts), abs=1e-10)


def test_emd_is_a_metric_and_bounded():
    rng = np.random.default_rng(3)
    space = GridL1(5)
    hs = [_hist(rng, 25) for _ in range(6)]
    for a in hs:
        assert emd(a, a, space) == pytest.approx(0, abs=1e-12)
        for b in hs:
            assert 0 <= emd(a, b, space) <= 1
            assert emd(a, b, space) == pytest.approx(emd(b, a, space), abs=1e-10)
            for c in hs:
                assert emd(a, c, space) <= emd(a, b, space) + emd(b, c, space) + 1e-9


def test_emd_norm_values():
    space = GridL1(4)
    e = np.zeros(16)
    e[5] = 1.0
    assert emd_norm(e, space) == pytest.approx(1.0)  # an unmatched unit of mass costs the diameter
    assert emd_norm(np.zeros(16), space) == 0.0
    w = np.zeros(16)
    w[0], w[15] = 1.0, -1.0
    assert emd_norm(w, space) == pytest.approx(6 / 4 / 2)  # 6 steps of 1/4 on [0,1)^2, normalized by 2


def test_grid_emd_raw_units_and_errors():
    p = np.zeros((8, 8))
    q = np.zeros((8, 8))
    p[0, 0] = q[0, 3] = 1.0
    assert grid_emd(p, q, raw=True) == pytest.approx(3 / 8)
    assert grid_emd(p, q) == pytest.approx(3 / 16)
    assert grid_emd(np.zeros((3, 4)), np.zeros((3, 4))) == 0.0  # any rows x cols grid (issue 16)
    with pytest.raises(DataError):
        grid_emd(np.zeros((3, 4)), np.zeros((4, 3)))
    with pytest.raises(DataError):
        emd(-p.reshape(-1), q.reshape(-1), GridL1(8))
    with pytest.raises(DataError):
        emd(np.full(64, np.nan), q.reshape(-1), GridL1(8))
    with pytest.raises(DataError):
        emd(np.ones(3), np.ones(3), GridL1(8))


def test_larger_grid_exact_vs_pot():
    rng = np.random.default_rng(0)
    space = GridL1(16)
    p, q = _hist(rng, 256, True), _hist(rng, 256, True)
    assert emd(p, q, space) == pytest.approx(ot.emd2(p, q, space.full_matrix()), abs=1e-10)


def test_histogram_helper():
    space = ClusteredMetric(2, 2, 0.5)
    assert np.allclose(histogram([0, 0, 3], space), [2 / 3, 0, 0, 1 / 3])
    with pytest.raises(DataError):
        histogram([], space)
    with pytest.raises(DataError):
        histogram([4], space)
    with pytest.raises(DataError):
        emd_assignment([0, 1], [0], space)

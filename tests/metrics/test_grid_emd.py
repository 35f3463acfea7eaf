"""The exact grid EMD (multi-scale primal-dual, userdp.metrics.grid_flow): agreement with the previous
LEMON network-simplex solver and with POT, rectangular grids and units, optimality certificates, edge
cases."""

from __future__ import annotations

import importlib
import zlib

import numpy as np
import ot
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from userdp.errors import DataError
from userdp.metrics import GridL1, emd, grid_emd
from userdp.metrics.grid_flow import GridFlow, _certify, solve_grid_flow

E = importlib.import_module("userdp.metrics.emd")  # the module (the package attribute is the function)

SEEDS = st.integers(0, 2**32 - 1)


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


def _dense(rng, shape):
    """The benchmark's worst case: every cell non-zero, heavy-tailed."""
    p, q = rng.random(shape) ** 8, rng.random(shape) ** 8
    return p / p.sum(), q / q.sum()


def _sparse(rng, shape, keep=0.05):
    p = rng.random(shape) * (rng.random(shape) < keep)
    q = rng.random(shape) * (rng.random(shape) < keep)
    p.flat[0] += 1e-3
    q.flat[-1] += 1e-3
    return p / p.sum(), q / q.sum()


def _points(rng, shape):
    p, q = np.zeros(shape), np.zeros(shape)
    for h in (p, q):
        for _ in range(3):
            h[rng.integers(shape[0]), rng.integers(shape[1])] += rng.random()
    return p / p.sum(), q / q.sum()


def _checkins(rng, shape, n=3000, clusters=8, noise=0.2):
    """Check-in-like: points around a few centres, against a noisy (Laplace, clipped) release."""
    H, W = shape
    centres = rng.random((clusters, 2)) * [H, W]
    widths = rng.uniform(0.5, 0.08 * max(H, W), clusters)
    k = rng.integers(clusters, size=n)
    pts = centres[k] + rng.normal(size=(n, 2)) * widths[k, None]
    r = np.clip(pts[:, 0].astype(int), 0, H - 1)
    c = np.clip(pts[:, 1].astype(int), 0, W - 1)
    truth = np.bincount(r * W + c, minlength=H * W).reshape(H, W) / n
    release = np.maximum(truth + rng.laplace(scale=noise / (H * W), size=shape), 0)
    return truth, release / release.sum()


def _inputs(kind, rng, shape):
    if kind == "dense":
        return _dense(rng, shape)
    if kind == "sparse":
        return _sparse(rng, shape)
    if kind == "points":
        return _points(rng, shape)
    if kind == "checkins":
        return _checkins(rng, shape)
    if kind == "unequal":  # EMD norm: the bank takes 40% extra mass
        p, q = _dense(rng, shape)
        return p, 1.4 * q
    if kind == "unequal-sparse":
        p, q = _sparse(rng, shape)
        return 0.7 * p, q
    raise ValueError(kind)


def _split(p, q):
    """(pos, neg, balanced) exactly as grid_emd prepares them."""
    w = p.ravel() - q.ravel()
    pos, neg = np.maximum(w, 0), np.maximum(-w, 0)
    mp, mn = pos.sum(), neg.sum()
    if E._balanced(p.sum(), q.sum()):
        mn = mp
    return pos, neg, E._balanced(mp, mn)


def _pot_raw(p, q):
    """POT's exact OT with an explicit raw L1 cost matrix on the H x W grid, plus a bank at the L1
    diameter alpha = (H + W) / max(H, W) when the masses differ (the EMD norm)."""
    H, W = p.shape
    r, c = np.divmod(np.arange(H * W), W)
    C = (np.abs(r[:, None] - r[None, :]) + np.abs(c[:, None] - c[None, :])) / max(H, W)
    a, b = p.ravel().astype(float), q.ravel().astype(float)
    ma, mb = a.sum(), b.sum()
    if abs(ma - mb) <= 1e-12 * max(ma, mb):
        b = b * (ma / mb)
    else:
        alpha = (H + W) / max(H, W)
        a, b = np.append(a, mb), np.append(b, ma)
        C = np.block([[C, np.full((H * W, 1), alpha)], [np.full((1, H * W), alpha), np.zeros((1, 1))]])
    return float(ot.emd2(a, b, np.ascontiguousarray(C), numItermax=10_000_000))


# --------------------------------------------------------------------------------------------
# Independent optimality certificate (numpy, not the solver's own check)
# --------------------------------------------------------------------------------------------


def _check_certificate(sup: np.ndarray, f: GridFlow) -> None:
    """Primal feasibility, dual feasibility on every arc of the full problem (both directions of every
    grid edge and of every bank arc), complementary slackness and equal primal / dual objectives:
    together a proof that ``f`` is an optimal flow (LP duality)."""
    H, W = sup.shape
    A = H + W
    assert f.bank_cost == A
    right, down, bank, pi, pib = f.right, f.down, f.bank, f.potentials, f.bank_potential
    assert right.shape == (H, W - 1) and down.shape == (H - 1, W) and bank.shape == (H, W)
    out = bank.copy()
    out[:, :-1] += right
    out[:, 1:] -= right
    out[:-1, :] += down
    out[1:, :] -= down
    np.testing.assert_array_equal(out, sup)  # conservation at every cell
    assert bank.sum() == sup.sum()  # ... and at the bank
    if sup.sum() == 0:
        assert not bank.any()
    for F, d, c in ((right, pi[:, 1:] - pi[:, :-1], 1), (down, pi[1:, :] - pi[:-1, :], 1), (bank, pib - pi, A)):
        assert np.all(np.abs(d) <= c)  # reduced costs >= 0 in both directions
        assert np.all(d[F > 0] == c) and np.all(d[F < 0] == -c)  # tight where flow moves
    primal = int(np.abs(right).sum() + np.abs(down).sum() + A * np.abs(bank).sum())
    dual = int(-(pi * sup).sum() + pib * sup.sum())
    assert primal == dual == f.cost


def _lemon_cost(sup: np.ndarray) -> int:
    """The previous solver (LEMON network simplex via pylmcf) on the same integer problem."""
    import pylmcf

    H, W = sup.shape
    bank = int(sup.sum()) != 0
    src, dst, cost = E._grid_arcs((H, W), bank)
    s = sup.ravel().astype(np.int64)
    if bank:
        s = np.append(s, -int(sup.sum()))
    g = pylmcf.Graph(s.size, src, dst)
    g.set_node_supply(s)
    g.set_edge_capacities(np.full(src.size, int(np.abs(s).sum()), dtype=np.int64))
    g.set_edge_costs(cost)
    g.set_pivot_rule("candidate_list")
    g.solve()
    return int(g.total_cost())


# --------------------------------------------------------------------------------------------
# Agreement with the previous (LEMON) solver
# --------------------------------------------------------------------------------------------

KINDS = ["dense", "sparse", "points", "checkins", "unequal", "unequal-sparse"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", [(8, 8), (33, 33), (64, 64), (50, 77), (128, 128)])
def test_matches_lemon_solver(kind, shape):
    rng = np.random.default_rng(zlib.crc32(f"{kind}{shape}".encode()))
    p, q = _inputs(kind, rng, shape)
    pos, neg, balanced = _split(p, q)
    new = E._grid_flow(pos, neg, shape, balanced)
    old = E._grid_flow_lemon(pos, neg, shape, balanced)
    assert new == pytest.approx(old, rel=1e-9, abs=0)
    if shape[0] == shape[1]:
        assert grid_emd(p, q) == pytest.approx(old, rel=1e-9, abs=0)


@pytest.mark.parametrize("kind", KINDS)
def test_matches_lemon_solver_256(kind):
    rng = np.random.default_rng(256)
    p, q = _inputs(kind, rng, (256, 256))
    pos, neg, balanced = _split(p, q)
    assert E._grid_flow(pos, neg, 256, balanced) == pytest.approx(
        E._grid_flow_lemon(pos, neg, 256, balanced), rel=1e-9, abs=0
    )


@pytest.mark.parametrize(
    "shape", [(1, 200), (200, 1), (2, 99), (3, 150), (97, 33), (40, 129), (65, 65), (31, 33), (100, 17)]
)
@pytest.mark.parametrize("total", [0, 1, -1])
def test_integer_costs_equal_lemon_and_certified(shape, total):
    """Same integer problem, same optimal integer cost; odd and thin shapes exercise the coarsening."""
    rng = np.random.default_rng(shape[0] * 1000 + shape[1] + 7 * total)
    sup = (rng.random(shape) ** 6 * 1e9).astype(np.int64) - (rng.random(shape) ** 6 * 1e9).astype(np.int64)
    sup[rng.random(shape) < 0.3] = 0
    sup.flat[0] -= int(sup.sum())  # balanced ...
    sup.flat[-1] += total * 123_456_789  # ... or not (bank)
    f = solve_grid_flow(sup)
    _check_certificate(sup, f)
    assert f.cost == _lemon_cost(sup)


@settings(max_examples=150, deadline=None)
@given(SEEDS, st.integers(1, 9), st.integers(1, 9), st.integers(0, 3))
def test_small_integer_problems_match_lemon(seed, H, W, mode):
    rng = np.random.default_rng(seed)
    sup = rng.integers(-50, 51, (H, W))
    if mode == 1:
        sup[rng.random((H, W)) < 0.7] = 0
    if mode < 2:
        sup.flat[0] -= int(sup.sum())
    if mode == 3:
        sup = np.zeros((H, W), np.int64)
        sup[rng.integers(H), rng.integers(W)] = 5
        sup[rng.integers(H), rng.integers(W)] -= int(rng.integers(0, 11))
    f = solve_grid_flow(sup)
    _check_certificate(sup, f)
    assert f.cost == _lemon_cost(sup)


# --------------------------------------------------------------------------------------------
# Rectangular grids against POT with an explicit cost matrix
# --------------------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(SEEDS, st.integers(1, 6), st.integers(1, 7), st.sampled_from([1.0, 1.0, 0.4, 2.5]), st.booleans())
def test_rectangular_matches_pot(seed, H, W, factor, sparse):
    rng = np.random.default_rng(seed)
    p, q = rng.random((H, W)) ** 3, rng.random((H, W)) ** 3
    if sparse:
        p[rng.random((H, W)) < 0.5] = 0
        q[rng.random((H, W)) < 0.5] = 0
        p.flat[0] += 0.1
        q.flat[-1] += 0.1
    p, q = p / p.sum(), factor * q / q.sum()
    raw = _pot_raw(p, q)
    assert grid_emd(p, q, raw=True) == pytest.approx(raw, abs=1e-9)
    assert grid_emd(p, q) == pytest.approx(raw / ((H + W) / max(H, W)), abs=1e-9)


@pytest.mark.parametrize("shape", [(12, 30), (30, 12), (17, 23), (1, 40)])
@pytest.mark.parametrize("factor", [1.0, 1.7])
def test_rectangular_matches_pot_larger(shape, factor):
    rng = np.random.default_rng(shape[0] * shape[1])
    p, q = _dense(rng, shape)
    assert grid_emd(p, factor * q, raw=True) == pytest.approx(_pot_raw(p, factor * q), abs=1e-9)


def test_square_units_unchanged():
    """For a square grid the definitions are today's: alpha = 2, the same value as emd(., GridL1)."""
    rng = np.random.default_rng(5)
    for factor in (1.0, 1.3):
        p, q = _dense(rng, (20, 20))
        q = factor * q
        v = grid_emd(p, q)
        assert v == emd(p.ravel(), q.ravel(), GridL1(20))
        assert grid_emd(p, q, raw=True) == pytest.approx(2 * v, rel=1e-15)


def test_rectangular_units():
    p, q = np.zeros((4, 10)), np.zeros((4, 10))
    p[0, 0] = q[3, 9] = 1.0
    assert grid_emd(p, q, raw=True) == pytest.approx(12 / 10)  # 12 steps of 1/max(H, W)
    assert grid_emd(p, q) == pytest.approx(12 / 14)  # normalized by alpha = (4 + 10) / 10
    q2 = np.zeros((4, 10))
    assert grid_emd(p, q2, raw=True) == pytest.approx(14 / 10)  # unmatched mass: the L1 diameter
    assert grid_emd(p, q2) == pytest.approx(1.0)
    assert grid_emd(p.T, q.T, raw=True) == pytest.approx(12 / 10)


# --------------------------------------------------------------------------------------------
# Optimality certificates
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", [(96, 96), (45, 130)])
def test_certificate_on_realistic_inputs(kind, shape):
    rng = np.random.default_rng(zlib.crc32(f"{kind}{shape}".encode()))
    p, q = _inputs(kind, rng, shape)
    pos, neg, balanced = _split(p, q)
    sup, _ = E._grid_supply(pos, neg, shape, balanced)
    sup = sup.reshape(shape)
    f = solve_grid_flow(sup)
    _check_certificate(sup, f)
    f_neg = solve_grid_flow(-sup)  # the opposite sign: the bank gives instead of takes
    _check_certificate(-sup, f_neg)
    assert f_neg.cost == f.cost


def test_certificate_rejects_a_broken_solution():
    rng = np.random.default_rng(1)
    sup = rng.integers(-100, 101, (9, 11))
    sup[0, 0] -= sup.sum() - 7  # unbalanced: the bank is used
    f = solve_grid_flow(sup)
    args = (f.right, f.down, f.bank, f.potentials, np.int64(f.bank_potential), np.int64(f.bank_cost))
    assert _certify(sup, *args) == f.cost
    moved = f.right.copy()
    moved[2, 3] += 1  # breaks conservation
    assert _certify(sup, moved, *args[1:]) == -1
    pot = f.potentials.copy()
    pot[4, 5] += 2  # breaks dual feasibility
    assert _certify(sup, f.right, f.down, f.bank, pot, *args[4:]) == -1
    # a feasible but suboptimal flow (an extra circulation around a square) is rejected too
    r, d = f.right.copy(), f.down.copy()
    r[0, 0] += 5
    d[0, 1] += 5
    r[1, 0] -= 5
    d[0, 0] -= 5
    assert _certify(sup, r, d, *args[2:]) == -1


# --------------------------------------------------------------------------------------------
# Edge cases
# --------------------------------------------------------------------------------------------


def test_one_cell():
    assert grid_emd(np.ones((1, 1)), np.ones((1, 1))) == 0.0
    assert grid_emd([[1.0]], [[0.25]]) == pytest.approx(0.75)  # unmatched mass costs alpha (1 normalized)
    assert grid_emd([[1.0]], [[0.25]], raw=True) == pytest.approx(1.5)  # alpha = (1 + 1) / 1


@pytest.mark.parametrize("W", [1, 2, 5, 64, 1000])
def test_one_row_is_the_1d_distance(W):
    rng = np.random.default_rng(W)
    p, q = rng.random(W), rng.random(W)
    p, q = p / p.sum(), q / q.sum()
    expected = np.abs(np.cumsum(p - q)).sum() / W  # raw: cell side 1/W
    assert grid_emd(p[None, :], q[None, :], raw=True) == pytest.approx(expected, abs=1e-12)
    assert grid_emd(p[:, None], q[:, None], raw=True) == pytest.approx(expected, abs=1e-12)


def test_zero_vectors():
    z = np.zeros((7, 3))
    assert grid_emd(z, z) == 0.0
    assert grid_emd(np.zeros((256, 256)), np.zeros((256, 256)), raw=True) == 0.0
    f = solve_grid_flow(np.zeros((4, 5), np.int64))
    assert f.cost == 0 and not f.right.any() and not f.bank.any()


def test_all_mass_in_one_cell():
    H, W = 30, 50
    p = np.zeros((H, W))
    p[7, 41] = 1.0
    q = np.full((H, W), 1.0 / (H * W))
    r, c = np.indices((H, W))
    expected = (np.abs(r - 7) + np.abs(c - 41)).mean() / max(H, W)
    assert grid_emd(p, q, raw=True) == pytest.approx(expected, abs=1e-12)
    assert grid_emd(q, p, raw=True) == pytest.approx(expected, abs=1e-12)
    same = grid_emd(p, p)
    assert same == 0.0
    assert grid_emd(p, 3 * p) == pytest.approx(2.0)  # two extra units to the bank


def test_corner_to_corner_512():
    p, q = np.zeros((512, 300)), np.zeros((512, 300))
    p[0, 0] = q[-1, -1] = 1.0
    assert grid_emd(p, q, raw=True) == pytest.approx((511 + 299) / 512)


def test_errors():
    with pytest.raises(DataError):
        grid_emd(np.zeros((3, 4)), np.zeros((4, 3)))
    with pytest.raises(DataError):
        grid_emd(np.zeros(5), np.zeros(5))
    with pytest.raises(DataError):
        grid_emd(np.zeros((0, 3)), np.zeros((0, 3)))
    with pytest.raises(DataError):
        grid_emd(-np.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(DataError):
        grid_emd(np.full((2, 2), np.nan), np.ones((2, 2)))
    with pytest.raises(ValueError):
        solve_grid_flow(np.zeros(3, np.int64))

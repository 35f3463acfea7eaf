"""The three published 2-D baselines (PrivTree, adaptive grids, Hay et al.'s hierarchy with consistency):
shapes and mass, refusals, reproducibility, speed, Hay's consistency, the budget splits, PrivTree's
fractional-user bound, and statistical privacy audits of the real mechanisms and of deliberately broken
variants of the library (monkeypatched calibrations), plus audit_heatmap on the existing mechanisms."""

from __future__ import annotations

import functools
import math
import time

import numpy as np
import pytest

import userdp.heatmaps.adaptive_grid as ag
import userdp.heatmaps.hierarchy as hier
import userdp.heatmaps.privtree as pt
from userdp.audit import audit_heatmap
from userdp.errors import DataError, ParameterError
from userdp.heatmaps import dense_emd_agg, dp_sparse_emd_agg, laplace_heatmap
from userdp.heatmaps.adaptive_grid import adaptive_grid_heatmap, ag_first_level_size, ag_second_level_size
from userdp.heatmaps.hierarchy import hay_consistency, hierarchical_heatmap, quadtree_levels
from userdp.heatmaps.privtree import (
    _plan,
    privtree_certificate,
    privtree_emd_heatmap,
    privtree_heatmap,
    privtree_lambda,
    privtree_path_sum,
    split_partitions,
    tree_emd_projection,
)
from userdp.privacy.guarantees import Neighbours, PureDP

from .spies import NoiseSpy, assert_laplace_scale, assert_law, block_sums, padded_pyramid, privtree_paper_lambda

MECHANISMS = [privtree_heatmap, adaptive_grid_heatmap, hierarchical_heatmap, privtree_emd_heatmap]
IDS = ["privtree", "adaptive_grid", "hierarchy", "privtree_emd"]


def _users_sum(shape, n_users, seed):
    """The sum of ``n_users`` random distributions (Dirichlet over a few random cells each)."""
    gen = np.random.default_rng(seed)
    s = np.zeros(shape)
    for _ in range(n_users):
        k = int(gen.integers(1, 4))
        cells = gen.integers(0, shape[0] * shape[1], k)
        np.add.at(s.reshape(-1), cells, gen.dirichlet(np.ones(k)))
    return s


# --------------------------------------------------------------------------------------------
# Output shape and mass, refusals, reproducibility, speed
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mech", MECHANISMS, ids=IDS)
@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (7, 1), (5, 3), (2, 2), (300, 200)])
def test_shapes_mass_and_claim(mech, shape, rng):
    s = _users_sum(shape, 50, seed=shape[0] * 31 + shape[1])
    rel = mech(s, 1.0, rng=rng)
    v = rel.value
    assert v.shape == shape and v.dtype == np.float64
    assert v.min() >= 0 and v.sum() == pytest.approx(1.0, abs=1e-12)
    assert rel.guarantee == PureDP(1.0, neighbours=Neighbours.ADD_REMOVE_USER)
    assert rel.params["epsilon"] == 1.0


@pytest.mark.parametrize("mech", MECHANISMS, ids=IDS)
def test_empty_input_and_uniform_fallback(mech):
    """No users at all: every release is a valid heatmap; when no mass survives the clipping (or nothing was
    split), it is exactly uniform. A 1 x 1 grid is always [[1]]."""
    uniform = 0
    for seed in range(40):
        v = mech(np.zeros((2, 2)), 1.0, rng=seed).value
        assert v.shape == (2, 2) and v.min() >= 0 and v.sum() == pytest.approx(1.0)
        uniform += bool(np.all(v == 0.25))
    assert uniform > 0
    assert mech(np.zeros((1, 1)), 0.5, rng=1).value.tolist() == [[1.0]]
    assert mech(np.zeros((3, 9)), 0.5, rng=1).value.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("mech", MECHANISMS, ids=IDS)
def test_seeded_reproducibility(mech):
    s = _users_sum((9, 6), 40, seed=3)
    a, b, c = mech(s, 1.0, rng=11), mech(s, 1.0, rng=11), mech(s, 1.0, rng=12)
    assert np.array_equal(a.value, b.value)
    assert not np.array_equal(a.value, c.value)


@pytest.mark.parametrize("mech", MECHANISMS, ids=IDS)
def test_refusals_never_quote_the_data(mech):
    bad = np.zeros((3, 3))
    bad[1, 1] = -123.456
    with pytest.raises(DataError) as e:
        mech(bad, 1.0)
    assert "123" not in str(e.value)
    for arr in (np.zeros(4), np.zeros((0, 3)), np.array([[np.nan, 1.0]]), np.array([["a", "b"]]), np.zeros((2, 2, 2))):
        with pytest.raises(DataError):
            mech(arr, 1.0)
    for eps in (0.0, -1.0, math.inf, math.nan, "x"):
        with pytest.raises(ParameterError):
            mech(np.ones((2, 2)), eps)


def test_parameter_refusals():
    s = np.ones((4, 4))
    with pytest.raises(ParameterError):
        privtree_heatmap(s, 1.0, tree_fraction=1.0)
    with pytest.raises(ParameterError):
        privtree_heatmap(s, 1.0, beta=1)
    with pytest.raises(ParameterError):
        privtree_heatmap(s, 1.0, theta=math.nan)
    with pytest.raises(ParameterError):
        privtree_heatmap(s, 1.0, theta=1e300)  # beyond 2^50 lattice steps of the split noise
    with pytest.raises(ParameterError):
        adaptive_grid_heatmap(s, 1.0, alpha=0.0)
    with pytest.raises(ParameterError):
        adaptive_grid_heatmap(s, 1.0, c=-1)
    with pytest.raises(DataError):
        adaptive_grid_heatmap(s, 1.0, n_public=-5)


def test_hierarchy_is_fast_at_512():
    s = _users_sum((512, 512), 2000, seed=5)
    hierarchical_heatmap(s, 1.0, rng=1)  # warm up the samplers
    t = time.process_time()  # CPU time (a seeded release runs on one thread): other processes' load is not counted
    rel = hierarchical_heatmap(s, 1.0, rng=2)
    elapsed = time.process_time() - t
    assert rel.value.shape == (512, 512) and rel.params["levels"] == 10
    assert elapsed < 1.0, f"{elapsed:.2f} s"


# --------------------------------------------------------------------------------------------
# Hay et al.'s consistency
# --------------------------------------------------------------------------------------------


def _child_sum(x):
    return x[0::2, 0::2] + x[0::2, 1::2] + x[1::2, 0::2] + x[1::2, 1::2]


def test_consistent_tree_sums_and_least_squares():
    """After the two passes every node equals the sum of its children, and the leaves are the least-squares
    solution (brute force over all nodes); an exact tree comes back unchanged."""
    gen = np.random.default_rng(4)
    levels = quadtree_levels(gen.random((5, 7)))  # padded to 8 x 8, h = 4
    assert [x.shape for x in levels] == [(1, 1), (2, 2), (4, 4), (8, 8)]
    assert np.all(levels[-1][5:, :] == 0) and np.all(levels[-1][:, 7:] == 0)
    for a, b in zip(hay_consistency(levels), levels, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)
    noisy = [x + gen.laplace(scale=2.0, size=x.shape) for x in levels]
    cons = hay_consistency(noisy)
    for lvl in range(len(cons) - 1):
        np.testing.assert_allclose(cons[lvl], _child_sum(cons[lvl + 1]), atol=1e-10)
    side = 8
    rows, y = [], []
    for lvl, x in enumerate(noisy):
        span = side // 2**lvl
        for i in range(2**lvl):
            for j in range(2**lvl):
                m = np.zeros((side, side))
                m[i * span : (i + 1) * span, j * span : (j + 1) * span] = 1.0
                rows.append(m.reshape(-1))
                y.append(x[i, j])
    lsq = np.linalg.lstsq(np.array(rows), np.array(y), rcond=None)[0].reshape(side, side)
    np.testing.assert_allclose(cons[-1], lsq, atol=1e-9)
    # the consistent tree is the least-squares fit: moving any leaf (and its ancestors) costs more
    cost = sum(((c - x) ** 2).sum() for c, x in zip(cons, noisy, strict=True))
    bumped = [c.copy() for c in cons]
    for lvl in range(len(bumped)):
        bumped[lvl][0, 0] += 0.01
    assert sum(((c - x) ** 2).sum() for c, x in zip(bumped, noisy, strict=True)) > cost


def test_hierarchy_without_noise_is_the_truth():
    for shape in [(5, 3), (16, 16), (1, 9)]:
        s = _users_sum(shape, 30, seed=shape[0])
        v = hierarchical_heatmap(s, 1e9, rng=1).value
        np.testing.assert_allclose(v, s / s.sum(), atol=1e-6)


# --------------------------------------------------------------------------------------------
# Budget splits (read from the releases)
# --------------------------------------------------------------------------------------------


def test_budget_splits_add_up_to_epsilon(monkeypatch):
    """What each mechanism's draws spend (read from the sampler: 1 / scale for a count of l1 sensitivity 1,
    (2 beta - 1) / ((beta - 1) lambda) for PrivTree's decisions) adds up to epsilon, and the params report it."""
    s = _users_sum((12, 10), 80, seed=7)
    spy = NoiseSpy(monkeypatch)
    privtree_heatmap(s, 0.9, rng=1)
    *decisions, leaves = spy.take()
    assert 7 / (3 * decisions[0].scale) + 1 / leaves.scale == pytest.approx(0.9, rel=1e-6)
    adaptive_grid_heatmap(s, 1.7, rng=1)
    assert sum(1 / d.scale for d in spy.take()) == pytest.approx(1.7, rel=1e-6)
    adaptive_grid_heatmap(s, 1.7, rng=1, n_public=80)
    assert sum(1 / d.scale for d in spy.take()) == pytest.approx(1.7, rel=1e-6)  # nothing drawn for the count
    hierarchical_heatmap(s, 1.7, rng=1)
    (tree,) = spy.take()
    assert 5 / tree.scale == pytest.approx(1.7, rel=1e-6)  # 16 x 16 padded: 5 levels, each a partition
    p = privtree_heatmap(s, 1.7, rng=1, tree_fraction=0.3).params
    assert p["epsilon_tree"] + p["epsilon_counts"] == pytest.approx(1.7) and p["epsilon_tree"] == pytest.approx(0.51)
    assert p["delta"] == pytest.approx(p["lambda"] * math.log(4))
    p = adaptive_grid_heatmap(s, 1.7, rng=1).params
    assert p["epsilon_total"] == pytest.approx(0.05 * 1.7)
    assert p["epsilon_total"] + p["epsilon_level1"] + p["epsilon_level2"] == pytest.approx(1.7)
    assert p["epsilon_level1"] == pytest.approx(p["epsilon_level2"])  # alpha = 0.5
    p = adaptive_grid_heatmap(s, 1.7, rng=1, n_public=80, alpha=0.25).params
    assert p["epsilon_total"] == 0 and p["n_public"] == 80
    assert p["epsilon_level1"] + p["epsilon_level2"] == pytest.approx(1.7)
    assert p["epsilon_level1"] == pytest.approx(0.425)
    p = hierarchical_heatmap(s, 1.7, rng=1).params
    assert sum(p["level_epsilons"]) == pytest.approx(1.7) and len(p["level_epsilons"]) == p["levels"] == 5


# --------------------------------------------------------------------------------------------
# Adaptive grids
# --------------------------------------------------------------------------------------------


def test_ag_grid_sizes_and_noise_free_recovery():
    assert ag_first_level_size(0, 1.0) == 10
    assert ag_first_level_size(1e6, 1.0) == math.ceil(math.ceil(math.sqrt(1e5)) / 4) == 80
    assert ag_second_level_size(-3.0, 0.5) == 1
    assert ag_second_level_size(1000.0, 0.5) == math.ceil(math.sqrt(1000 * 0.5 / 5)) == 10
    s = _users_sum((37, 23), 3000, seed=9)
    rel = adaptive_grid_heatmap(s, 1e7, rng=1, n_public=1e5)
    assert rel.params["first_level_shape"] == (37, 23)  # m1 capped by the grid
    np.testing.assert_allclose(rel.value, s / s.sum(), atol=1e-6)
    # a dense cell is split finer than an empty one; the noisy total is an extra released by-product
    s = np.zeros((40, 40))
    s[:4, :4] = 500.0
    rel = adaptive_grid_heatmap(s, 1.0, rng=2, n_public=8000)
    assert rel.params["m1"] == 10 and rel.extras["second_level_cells"] > 100
    assert rel.value[:4, :4].sum() > 0.9


# --------------------------------------------------------------------------------------------
# PrivTree: the splitting rule and the fractional-user bound
# --------------------------------------------------------------------------------------------


def test_privtree_splitting_rule():
    rows, cols = split_partitions((5, 3))
    assert [r.tolist() for r in rows] == [[0], [0, 3], [0, 2, 3, 4], [0, 1, 2, 3, 4]]
    assert [c.tolist() for c in cols] == [[0], [0, 2], [0, 1, 2], [0, 1, 2]]
    rows, cols = split_partitions((1, 7))
    assert all(r.tolist() == [0] for r in rows) and cols[-1].tolist() == list(range(7))
    # a huge epsilon on a sparse input splits down to the occupied cells and recovers them
    s = np.zeros((64, 64))
    s[3, 5], s[40, 41] = 300.0, 100.0
    rel = privtree_heatmap(s, 1e5, rng=3)
    np.testing.assert_allclose(rel.value, s / s.sum(), atol=1e-4)
    assert rel.extras["leaves"] < 64 * 64 / 4


def test_privtree_lambda_is_certified_on_the_lattice():
    """lambda is the paper's (2 beta - 1) / ((beta - 1) eps_tree) where the fractional bound certifies it, a
    larger provably safe one above; the decomposition's proven epsilon on the lattice actually used,
    S(g t) / (g t) + H W / t, never exceeds eps_tree."""
    for e in (0.01, 0.3, 1.0, 1.17):
        assert privtree_lambda(e) == pytest.approx(7 / (3 * e))
    for e, lo, hi in ((1.5, 1.01, 1.05), (3.0, 1.15, 1.19), (10.0, 1.6, 1.7)):
        assert lo < privtree_lambda(e) / (7 / (3 * e)) < hi
    for e in (0.05, 0.5, 1.0, 1.19, 2.0, 5.0, 40.0):
        for cells in (1, 16, 512 * 512):
            cal = pt._tree_calibration(privtree_lambda(e), e, cells)
            assert privtree_certificate(cal) <= e
    assert privtree_path_sum(1e6) == pytest.approx(2 + sum(1 / (2 * 4**i - 1) for i in range(1, 40)), rel=1e-5)


def test_privtree_certificate_holds_for_the_law_the_release_really_draws(monkeypatch):
    """The certificate on the lattice law the release hands the sampler for its split decisions (read from the
    sampler: granularity g and DLap(t)), not on a calibration recomputed here: S(g t) / (g t) + H W / t is at
    most eps_tree = eps / 2, at every epsilon (the paper's lambda below 1.178, the certified one above)."""
    from userdp.noise.mechanisms import LaplaceCalibration

    spy = NoiseSpy(monkeypatch)
    for shape in ((1, 2), (16, 16), (37, 23)):
        s = _users_sum(shape, 400, seed=shape[0])
        for eps in (0.1, 1.0, 2.4, 6.0, 80.0):
            privtree_heatmap(s, eps, rng=1)
            *decisions, _ = spy.take()
            assert decisions
            for d in decisions:
                law = LaplaceCalibration(eps / 2, d.scale * eps / 2, shape[0] * shape[1], d.granularity, d.t)
                assert privtree_certificate(law) <= eps / 2


def test_privtree_path_bound_holds_on_random_fractional_paths():
    """The proof's key inequality with continuous Laplace noise: along one root-to-leaf path, with counts
    non-increasing in depth on D and a user whose mass on the path's nodes is non-increasing in depth and at
    most 1, the split nodes' loss sum ln F(b'(v)) - ln F(b(v)) is at most S(lambda) / lambda."""
    gen = np.random.default_rng(8)

    def log_f(x, lam, theta):  # ln P[x + Lap(lam) > theta]
        z = (x - theta) / lam
        return np.where(z < 0, z - math.log(2), np.log1p(-0.5 * np.exp(-np.abs(z))))

    for eps_tree in (0.3, 1.0, 3.0, 10.0):
        lam = privtree_lambda(eps_tree)
        delta = lam * math.log(4)
        bound = privtree_path_sum(lam) / lam
        worst = 0.0
        for _ in range(3000):
            depth = int(gen.integers(1, 25))
            theta = float(gen.normal(0, 3))
            drops = gen.exponential(gen.choice([0.05, 0.5, 3.0]), depth)
            c = float(gen.uniform(0, 40)) - np.concatenate([[0.0], np.cumsum(drops)[:-1]])
            c = np.maximum(c, 0.0)
            p = np.minimum(1.0, np.sort(gen.uniform(0, 1, depth))[::-1] * gen.uniform(0.05, 1.5))
            d = np.arange(depth)
            b = np.maximum(theta - delta, c - d * delta)
            b2 = np.maximum(theta - delta, c + p - d * delta)
            worst = max(worst, float(np.sum(log_f(b2, lam, theta) - log_f(b, lam, theta))))
        assert worst <= bound, (eps_tree, worst, bound)
        assert bound <= eps_tree * (1 + 1e-9)


# --------------------------------------------------------------------------------------------
# Privacy audits: the real mechanisms pass, broken library variants are refuted
# --------------------------------------------------------------------------------------------


def _audit(mech, eps, **kw):
    kw.setdefault("shape", (2, 2))
    kw.setdefault("n", 3000)
    kw.setdefault("n_pilot", 400)
    return audit_heatmap(mech, eps, rng=kw.pop("seed", 2024), **kw)


@pytest.mark.slow  # a large statistical audit; the exact laws of the draws are checked in the default tier
def test_audit_hierarchy_real_and_broken(monkeypatch):
    ok = _audit(hierarchical_heatmap, 2.0)
    assert ok.passed, str(ok)
    true_level = hier._level_epsilon
    monkeypatch.setattr(hier, "_level_epsilon", lambda e, h: 3 * true_level(e, h))  # 3x too optimistic
    bad = _audit(hierarchical_heatmap, 2.0)
    assert not bad.passed, str(bad)


@pytest.mark.slow  # a large statistical audit; the exact laws of the draws are checked in the default tier
def test_audit_adaptive_grid_real_and_broken(monkeypatch):
    ok = _audit(adaptive_grid_heatmap, 2.0, n=2000, n_pilot=250)
    assert ok.passed, str(ok)
    true_split = ag._budget_split
    monkeypatch.setattr(ag, "_budget_split", lambda *a: tuple(3 * x for x in true_split(*a)))
    bad = _audit(adaptive_grid_heatmap, 2.0, n=2000, n_pilot=250)
    assert not bad.passed, str(bad)


@pytest.mark.slow  # a large statistical audit; the exact laws of the draws are checked in the default tier
def test_audit_privtree_real_and_broken_budget(monkeypatch):
    ok = _audit(privtree_heatmap, 2.0, n=2500, n_pilot=300)
    assert ok.passed, str(ok)
    true_split = pt._budget_split
    monkeypatch.setattr(pt, "_budget_split", lambda *a: tuple(3 * x for x in true_split(*a)))
    bad = _audit(privtree_heatmap, 2.0, n=2500, n_pilot=300)
    assert not bad.passed, str(bad)


@pytest.mark.slow  # a large statistical audit; the exact laws of the draws are checked in the default tier
def test_audit_privtree_emd_real_and_broken_budget(monkeypatch):
    """userdp's PrivTree-EMD (tree projection and floor: post-processing) keeps PrivTree's guarantee, and the
    audit still sees a budget split 3x too optimistic through the projection and the floor."""
    ok = _audit(privtree_emd_heatmap, 2.0, n=2500, n_pilot=300)
    assert ok.passed, str(ok)
    true_split = pt._budget_split
    monkeypatch.setattr(pt, "_budget_split", lambda *a: tuple(3 * x for x in true_split(*a)))
    bad = _audit(privtree_emd_heatmap, 2.0, n=2500, n_pilot=300)
    assert not bad.passed, str(bad)


def test_tree_emd_projection_cancels_at_the_lowest_common_ancestor():
    """On the 4 x 4 grid split to single cells: a negative cell cancels its sibling's positive mass first, and
    only what is left moves up to cancel mass in another quadrant; the total left is max(P - N, 0); a
    non-negative input is unchanged."""
    plan = _plan(4, 4)
    r, c = np.divmod(np.arange(16), 4)
    leaves = [(0, np.zeros(0, np.int64), np.zeros(0, np.int64))] * 2 + [(2, r, c)]
    v = np.zeros(16)
    v[0], v[1], v[15] = 3.0, -1.0, 2.0  # cells (0,0), (0,1) share a parent; (3,3) is in another quadrant
    out = tree_emd_projection(leaves, v, plan)
    assert out[0] == pytest.approx(2.0) and out[15] == pytest.approx(2.0) and out.sum() == pytest.approx(4.0)
    v[1] = -4.0  # more than the sibling holds: 1 unit left moves up to the root and cancels half of (3,3)
    out = tree_emd_projection(leaves, v, plan)
    assert out[0] == pytest.approx(0.0) and out[15] == pytest.approx(1.0)
    gen = np.random.default_rng(0)
    for _ in range(20):
        x = gen.normal(size=16)
        out = tree_emd_projection(leaves, x, plan)
        assert out.min() >= 0 and out.sum() == pytest.approx(max(np.maximum(x, 0).sum() - np.maximum(-x, 0).sum(), 0))
    x = np.abs(gen.normal(size=16))
    assert np.array_equal(tree_emd_projection(leaves, x, plan), x)


def _projection_by_sorting(leaves, values, plan):
    """The first implementation of the tree-EMD projection (ancestors by binary search, nodes grouped by
    sorting): the faster one must give the same bits."""
    depth = np.concatenate([np.full(r.size, d, dtype=np.int64) for d, r, _ in leaves])
    anc_r = np.concatenate([r for _, r, _ in leaves]).astype(np.int64)
    anc_c = np.concatenate([c for _, _, c in leaves]).astype(np.int64)
    pos, neg, cur = np.maximum(values, 0.0), np.maximum(-values, 0.0), depth.copy()
    for d in range(int(depth.max(initial=0)), -1, -1):
        up = cur > d
        if up.any():
            anc_r[up] = np.searchsorted(plan.rows[d], plan.rows[d + 1][anc_r[up]], side="right") - 1
            anc_c[up] = np.searchsorted(plan.cols[d], plan.cols[d + 1][anc_c[up]], side="right") - 1
            cur[up] = d
        act = depth >= d
        _, inv = np.unique(anc_r[act] * plan.cols[d].size + anc_c[act], return_inverse=True)
        P, N = np.bincount(inv, pos[act]), np.bincount(inv, neg[act])
        cancel = np.minimum(P, N)
        pos[act] *= (1.0 - np.divide(cancel, P, out=np.zeros_like(P), where=P > 0))[inv]
        neg[act] *= (1.0 - np.divide(cancel, N, out=np.zeros_like(N), where=N > 0))[inv]
    return pos


def test_level_counts_and_projection_are_bit_for_bit_the_first_implementation():
    """Node counts (every depth summed from the one below by np.add.reduceat, the cells themselves at the
    deepest) and the tree-EMD projection over random shapes, data and decompositions: the same bits as the
    first implementation, so seeded releases did not change when these were made faster."""
    gen = np.random.default_rng(5)
    for trial in range(60):
        H, W = (int(x) for x in gen.integers(1, 200, 2)) if trial % 3 else (2 ** int(gen.integers(0, 9)),) * 2
        s = np.zeros((H, W))
        m = int(gen.integers(1, 3000))
        np.add.at(s, (gen.integers(0, H, m), gen.integers(0, W, m)), gen.random(m))
        s[0, 0] = -0.0 if trial % 5 == 0 else s[0, 0]
        plan = _plan(H, W)
        counts = pt._level_counts(s, plan)
        x = np.add.reduceat(np.add.reduceat(s, plan.rows[-1], axis=0), plan.cols[-1], axis=1)
        for d in range(len(plan.rows) - 1, -1, -1):
            if d < len(plan.rows) - 1:
                x = np.add.reduceat(np.add.reduceat(x, plan.row_first[d], axis=0), plan.col_first[d], axis=1)
            assert np.array_equal(counts[d].view(np.int64), x.view(np.int64)), (trial, d)
        eps = float(gen.choice([0.1, 1.0, 10.0]))
        lam = privtree_lambda(0.3 * eps, 4.0)
        leaves = pt._decompose(
            counts, plan, 0.0, lam * math.log(4.0), pt._tree_calibration(lam, 0.3 * eps, H * W), trial
        )
        k = sum(r.size for _, r, _ in leaves)
        values = gen.laplace(size=k) * float(gen.choice([0.1, 1.0, 10.0])) + gen.random(k)
        got = tree_emd_projection(leaves, values, plan)
        assert np.array_equal(got.view(np.int64), _projection_by_sorting(leaves, values, plan).view(np.int64))


@pytest.mark.slow  # a large statistical audit; the exact laws of the draws are checked in the default tier
def test_audit_privtree_split_decision_and_broken_lambda(monkeypatch):
    """The split decision alone: a 1 x 2 grid (one decision, at the root), 99 users on cell (0, 0) and
    theta = 100, so adding a user moves the biased count from theta - 1 to theta, where a split is most
    sensitive; 97% of the budget on the tree; the output read as its partition (split or not). lambda 3x
    too small (the paper's lambda / 3) is refuted; the real lambda passes."""
    one = np.zeros((1, 2))
    one[0, 0] = 1.0
    mech = functools.partial(privtree_heatmap, theta=100.0, tree_fraction=0.97)
    kw = dict(shape=(1, 2), users=[one] * 99, projections=("pieces",))
    ok = _audit(mech, 1.0, n=2000, n_pilot=300, **kw)
    assert ok.passed, str(ok)
    true_lambda = pt.privtree_lambda
    monkeypatch.setattr(pt, "privtree_lambda", lambda e, beta=4: true_lambda(e, beta) / 3)
    bad = _audit(mech, 1.0, n=4000, n_pilot=400, **kw)
    assert not bad.passed, str(bad)


@pytest.mark.slow  # statistical audits; the laws of these mechanisms' draws are checked in the default tier
def test_audit_heatmap_on_the_existing_mechanisms():
    """audit_heatmap runs any mechanism(s, epsilon, rng=...) -> Release: the Laplace baseline with a real
    sample size, and the LP-based ones (slow per call) with a small one; all sound, all pass."""
    lap = _audit(lambda s, e, rng: laplace_heatmap(s, e, rng=rng), 1.0, n=3000)
    assert lap.passed and lap.detection_limit < 0.02, str(lap)
    one = np.zeros((2, 2))
    one[0, 0] = 1.0
    small = dict(users=[one], n=80, n_pilot=20)
    assert _audit(dp_sparse_emd_agg, 1.0, **small).passed
    assert _audit(functools.partial(dense_emd_agg, coarse_side=2), 1.0, **small).passed


def test_audit_heatmap_refuses_what_it_cannot_audit():
    with pytest.raises(ParameterError):
        audit_heatmap(laplace_heatmap, 1.0, n=100, n_pilot=100)
    with pytest.raises(ParameterError):
        audit_heatmap(laplace_heatmap, 1.0, n=100, n_pilot=10, projections=("mean",))
    with pytest.raises(DataError):
        audit_heatmap(laplace_heatmap, 1.0, n=100, n_pilot=10, users=[np.ones((2, 2))])  # mass 4 > 1


# --------------------------------------------------------------------------------------------
# The laws of what each mechanism really draws (NoiseSpy), against the papers' definitions
# --------------------------------------------------------------------------------------------


def _blocky(seed: int) -> np.ndarray:
    """16 x 16: every 2 x 2 block empty or holding 40 to 80 (so every non-empty node of depth <= 3 has a count
    above its floor, and nodes at the floor are empty: their subtrees are all alike)."""
    gen = np.random.default_rng(seed)
    mask = gen.random((8, 8)) < 0.45
    return np.kron(mask, np.ones((2, 2))) * gen.uniform(10.0, 20.0, (16, 16))


@pytest.mark.parametrize(("mech", "tree_fraction"), [(privtree_heatmap, 0.5), (privtree_emd_heatmap, 0.3)],
                         ids=["privtree", "privtree_emd"])  # fmt: skip
def test_privtree_decisions_and_leaf_counts_follow_the_paper(monkeypatch, mech, tree_fraction):
    """PrivTree as the release runs it, replayed from the sampler's draws: starting at the root, every visited
    node v of depth d gets the biased count b(v) = max(theta - delta, c(v) - d delta) (theta = 0, delta = lambda
    ln 4, lambda = 7 / (3 eps_tree), the paper's, computed here), noised by Lap(lambda) and split iff the noisy
    value exceeds theta (its four quadrants visited next); the leaves' true counts are then drawn once with
    Lap(1 / eps_counts), eps_counts = eps - eps_tree; the noise actually added has those scales. Catches: delta
    from another fanout, the depth bias applied once, lambda from the whole epsilon, the decisions noised with
    a unit sensitivity, the counts given the whole epsilon.
    (tree_fraction 0.5 for PrivTree, 0.3 for userdp's PrivTree-EMD: their documented defaults.)"""
    spy = NoiseSpy(monkeypatch)
    eps, theta = 1.0, 0.0
    lam = privtree_paper_lambda(tree_fraction * eps)
    delta = lam * math.log(4)
    noise = {"decisions": [], "leaves": []}
    for seed in range(16):
        s = _blocky(seed)

        def count(node, s=s):
            d, r, c = node
            n = 16 >> d
            return s[r * n : (r + 1) * n, c * n : (c + 1) * n].sum()

        mech(s, eps, rng=seed)
        *decisions, leaf_draw = spy.take()
        assert_law(decisions, lam)
        assert_law([leaf_draw], 1 / ((1 - tree_fraction) * eps))
        visit, leaves = [(0, 0, 0)], []
        for depth, draw in enumerate(decisions):
            assert visit and all(v[0] == depth < 4 for v in visit)
            want = np.array([max(theta - delta, count(v) - depth * delta) for v in visit])
            mine, theirs = np.argsort(want, kind="stable"), np.argsort(draw.values, kind="stable")
            np.testing.assert_allclose(draw.values[theirs], want[mine], rtol=0, atol=1e-9)
            split = np.zeros(len(visit), dtype=bool)
            split[mine] = draw.out[theirs] > theta  # ties (empty nodes, at the floor) have alike subtrees
            leaves += [v for v, sp in zip(visit, split, strict=True) if not sp]
            visit = [(d + 1, 2 * r + a, 2 * c + b) for (d, r, c), sp in zip(visit, split, strict=True) if sp
                     for a in (0, 1) for b in (0, 1)]  # fmt: skip
        assert all(v[0] == 4 for v in visit)  # what is left are single cells: leaves without a decision
        leaves += visit
        want_counts = np.sort([count(v) for v in leaves])
        np.testing.assert_allclose(np.sort(leaf_draw.values), want_counts, rtol=0, atol=1e-9)
        noise["decisions"] += [d.noise for d in decisions]
        noise["leaves"].append(leaf_draw.noise)
    assert_laplace_scale(np.concatenate(noise["decisions"]), lam)
    assert_laplace_scale(np.concatenate(noise["leaves"]), 1 / ((1 - tree_fraction) * eps))


def _edges(n: int, m: int) -> np.ndarray:
    m = max(1, min(m, n))
    return np.array([i * n // m for i in range(m + 1)])


def _ag_m1(n_hat: float, eps_grid: float) -> int:
    """Qardaji et al., section V: m1 = max(10, ceil(ceil(sqrt(N eps / c)) / 4)), c = 10."""
    return max(10, math.ceil(math.ceil(math.sqrt(max(n_hat, 0.0) * eps_grid / 10)) / 4))


def test_adaptive_grid_levels_follow_the_paper_and_read_only_released_counts(monkeypatch):
    """Adaptive grids as the release runs them (no public n, alpha = 0.5, c = 10), replayed from the sampler's
    draws: the count sum(s) + Lap(1 / (0.05 eps)); the first level, m1 from that noisy count, its cells' sums with
    Lap(1 / (alpha eps_g)), eps_g = 0.95 eps; the second level splitting every first-level cell into m2 x m2 with
    m2 = ceil(sqrt(N' (1 - alpha) eps_g / 5)) on the RELEASED count N' (index ranges again), its sums with
    Lap(1 / ((1 - alpha) eps_g)); the noise actually added has those scales. Catches: the second level given
    the rest of the budget, the first level the whole grid budget, m2 read on the true counts."""
    spy = NoiseSpy(monkeypatch)
    eps = 1.0
    eps_g = 0.95 * eps
    gen = np.random.default_rng(11)
    s = gen.gamma(0.5, 4.0, (64, 64))  # first-level cells of 20 to 200: m2 from 2 to 5, many near a step
    noise = {"first": [], "second": []}
    for seed in range(10):
        adaptive_grid_heatmap(s, eps, rng=seed)
        count, first, second = spy.take()
        assert count.values.tolist() == [pytest.approx(s.sum(), rel=1e-12)]
        assert_law([count], 1 / (0.05 * eps))
        m1 = _ag_m1(float(count.out[0]), eps_g)
        re, ce = _edges(64, m1), _edges(64, m1)
        np.testing.assert_allclose(first.values, block_sums(s, re, ce).reshape(-1), atol=1e-9)
        assert_law([first], 1 / (0.5 * eps_g))
        v = first.out.reshape(len(re) - 1, len(ce) - 1)
        want = []
        for i in range(v.shape[0]):
            for j in range(v.shape[1]):
                m2 = max(1, math.ceil(math.sqrt(max(v[i, j], 0.0) * 0.5 * eps_g / 5)))
                h, w = re[i + 1] - re[i], ce[j + 1] - ce[j]
                sub = block_sums(s[re[i] : re[i + 1], ce[j] : ce[j + 1]], _edges(h, m2), _edges(w, m2))
                want.append(sub.reshape(-1))
        np.testing.assert_allclose(second.values, np.concatenate(want), atol=1e-9)
        assert_law([second], 1 / (0.5 * eps_g))
        noise["first"].append(first.noise)
        noise["second"].append(second.noise)
    assert_laplace_scale(np.concatenate(noise["first"]), 1 / (0.5 * eps_g))
    assert_laplace_scale(np.concatenate(noise["second"]), 1 / (0.5 * eps_g))


def test_adaptive_grid_sizes_its_first_level_from_the_noisy_count_only(monkeypatch):
    """16842 users at eps = 1: from the true count m1 = 10 (N eps_g / c = 1599.99 < 40^2), while the count's noise
    Lap(20) puts the noisy count above 16842.1 (m1 = 11) about half the time. Over 12 default releases the first
    level is always m1(noisy count) on a side, and both sizes occur. Catches m1 sized on the true count."""
    spy = NoiseSpy(monkeypatch)
    s = np.full((16, 16), 16842 // 256, dtype=np.float64)
    s.reshape(-1)[: 16842 % 256] += 1  # integers: the total is exactly 16842
    assert s.sum() == 16842
    sizes = set()
    for seed in range(12):
        adaptive_grid_heatmap(s, 1.0, rng=seed)
        count, first, _ = spy.take()
        m1 = _ag_m1(float(count.out[0]), 0.95)
        assert first.values.size == m1 * m1
        sizes.add(m1)
    assert sizes == {10, 11}


def test_hierarchy_draws_every_node_with_eps_over_h_and_releases_the_least_squares_tree(monkeypatch):
    """Hay et al.'s hierarchy as the release runs it, from the sampler: one draw over every node of the padded
    quadtree (5 x 7 pads to 8 x 8: h = 4 levels, 85 nodes, root first), each node's true count with
    Lap(h / eps) (each level a partition: l1 sensitivity 1 per level, eps / h each); the noise actually added
    has that scale; and the map is the least-squares consistent tree of THOSE noisy counts (the paper's
    Theorem 3, solved here by brute force), cropped, clipped at 0 and normalized: post-processing of the draw
    alone. Catches a per-level budget off by one level, and consistency run on anything but the noisy tree."""
    spy = NoiseSpy(monkeypatch)
    s = _users_sum((5, 7), 60, seed=13)
    eps = 1.3
    levels = padded_pyramid(s)
    assert len(levels) == 4
    rows = []
    for lvl in range(4):
        span = 8 // 2**lvl
        for i in range(2**lvl):
            for j in range(2**lvl):
                m = np.zeros((8, 8))
                m[i * span : (i + 1) * span, j * span : (j + 1) * span] = 1.0
                rows.append(m.reshape(-1))
    lsq = np.linalg.pinv(np.array(rows))  # leaves of the least-squares tree = lsq @ noisy node counts
    noise = []
    for seed in range(40):
        rel = hierarchical_heatmap(s, eps, rng=seed)
        (d,) = spy.take()
        np.testing.assert_allclose(d.values, np.concatenate([x.reshape(-1) for x in levels]), atol=1e-9)
        assert_law([d], 4 / eps)
        leaves = np.maximum((lsq @ d.out).reshape(8, 8)[:5, :7], 0.0)
        want = leaves / leaves.sum() if leaves.sum() > 0 else np.full((5, 7), 1 / 35)
        np.testing.assert_allclose(rel.value, want, rtol=0, atol=1e-9)
        noise.append(d.noise)
    assert_laplace_scale(np.concatenate(noise), 4 / eps)

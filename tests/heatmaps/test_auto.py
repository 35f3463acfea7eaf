"""userdp's default heatmap (auto_heatmap: a post-processed appendix-D grid at small epsilon n, PrivTree-EMD
above) and the post-processing it uses: the switch reads only public or released numbers, the budget adds up,
the post-processing keeps what it promises, and statistical audits catch a broken budget in both branches."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

import userdp.heatmaps.auto as auto
from userdp.audit import audit_heatmap
from userdp.errors import DataError, ParameterError
from userdp.heatmaps import auto_heatmap, dense_emd_agg, dense_emd_heatmap, privtree_emd_heatmap
from userdp.heatmaps.postprocess import (
    add_floor,
    gaussian_blur,
    smooth_within_parts,
    smoothing_scales,
    soft_threshold,
)
from userdp.privacy.guarantees import Neighbours, PureDP

from .test_published_baselines import _users_sum  # random users' distributions

ALWAYS_DENSE = functools.partial(auto_heatmap, switch=math.inf)
ALWAYS_TREE = functools.partial(auto_heatmap, switch=0.0)
MECHANISMS = [auto_heatmap, ALWAYS_DENSE, ALWAYS_TREE, functools.partial(dense_emd_heatmap, coarse_side=1)]
IDS = ["auto", "auto-dense", "auto-tree", "dense_emd_heatmap"]


# --------------------------------------------------------------------------------------------
# Post-processing
# --------------------------------------------------------------------------------------------


def test_smooth_within_parts_keeps_every_part_total_and_moves_mass_towards_heavier_parts():
    H, W = 16, 32
    parts = (np.arange(W)[None, :] // 8 + 4 * (np.arange(H)[:, None] // 8)).astype(np.int64)  # 8 blocks
    gen = np.random.default_rng(0)
    totals = gen.exponential(size=8)
    totals[1] = 0.0  # an empty part stays empty
    v = totals[parts] / 64.0
    out = smooth_within_parts(v, parts, smoothing_scales(4.0))
    assert out.min() >= 0
    np.testing.assert_allclose(np.bincount(parts.ravel(), out.ravel(), minlength=8), totals, rtol=1e-12, atol=1e-15)
    assert np.all(out[parts == 1] == 0)
    # two parts side by side, the left one heavy: inside the right one, mass leans to the shared edge
    two = np.zeros((8, 16), dtype=np.int64)
    two[:, 8:] = 1
    w = np.where(two == 0, 10.0, 1.0)
    sm = smooth_within_parts(w, two, (2.0, 1.0))
    assert sm[:, 8].sum() > sm[:, 15].sum()
    assert sm[:, 8:].sum() == pytest.approx(w[:, 8:].sum())


@pytest.mark.parametrize("sigma", [1.0, 6.0, 6.2, 16.0, 64.0])
def test_gaussian_blur_is_scipys_gaussian_filter(sigma):
    """Wide kernels go through FFT: the same values as SciPy's direct filter (zero outside the grid, 4-sigma
    truncation) to 1e-13 of the largest, and never negative."""
    from scipy.ndimage import gaussian_filter

    rng = np.random.default_rng(int(sigma * 10))
    v = rng.random((200, 300)) * (rng.random((200, 300)) < 0.05)
    ref = gaussian_filter(v, sigma, mode="constant")
    got = gaussian_blur(v, sigma)
    assert np.abs(got - ref).max() <= 1e-13 * ref.max() and got.min() >= 0.0
    spikes = np.zeros((200, 300))
    spikes[5, 7], spikes[150, 250] = 1.0, 1e3  # far from the mass, FFT round-off dips below zero
    assert gaussian_blur(spikes, sigma).min() >= 0.0


def test_soft_threshold_and_floor():
    np.testing.assert_array_equal(soft_threshold(np.array([-1.0, 0.2, 3.0]), 0.5), [0.0, 0.0, 2.5])
    f = add_floor(np.array([[0.0, 2.0], [0.0, 0.0]]), 0.1)
    assert f.sum() == pytest.approx(1.0) and f.min() == pytest.approx(0.025)
    assert np.all(add_floor(np.zeros((2, 2)), 0.1) == pytest.approx(0.25))
    for bad in (-0.1, math.nan):
        with pytest.raises(ParameterError):
            soft_threshold(np.ones(2), bad)
    for bad in (1.0, -0.1, math.nan):
        with pytest.raises(ParameterError):
            add_floor(np.ones(2), bad)
    assert smoothing_scales(16.0) == (16.0, 8.0, 4.0, 2.0, 1.0)
    assert smoothing_scales(0.5) == (0.5,)


# --------------------------------------------------------------------------------------------
# The release: shapes, claim, refusals, the switch
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mech", MECHANISMS, ids=IDS)
@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (5, 3), (2, 2), (300, 200)])
def test_shapes_mass_and_claim(mech, shape):
    s = _users_sum(shape, 60, seed=shape[0] * 31 + shape[1])
    rel = mech(s, 1.0, rng=7)
    assert rel.value.shape == shape and rel.value.min() > 0  # the 1% floor: every cell positive
    assert rel.value.sum() == pytest.approx(1.0, abs=1e-12)
    assert rel.guarantee == PureDP(1.0, neighbours=Neighbours.ADD_REMOVE_USER)
    assert rel.params["epsilon"] == 1.0


@pytest.mark.parametrize("mech", MECHANISMS, ids=IDS)
def test_empty_input_seeded_reproducibility_and_refusals(mech):
    for seed in range(5):
        v = mech(np.zeros((3, 4)), 0.5, rng=seed).value
        assert v.min() > 0 and v.sum() == pytest.approx(1.0)
    s = _users_sum((9, 6), 40, seed=3)
    assert np.array_equal(mech(s, 1.0, rng=11).value, mech(s, 1.0, rng=11).value)
    bad = np.zeros((3, 3))
    bad[1, 1] = -123.456
    with pytest.raises(DataError) as e:
        mech(bad, 1.0)
    assert "123" not in str(e.value)
    for eps in (0.0, -1.0, math.inf, math.nan, "x"):
        with pytest.raises(ParameterError):
            mech(np.ones((2, 2)), eps)


def test_parameter_refusals():
    s = np.ones((4, 4))
    for kw in ({"switch": -1.0}, {"switch": math.nan}, {"switch": "x"}, {"total_fraction": 1.0}):
        with pytest.raises(ParameterError):
            auto_heatmap(s, 1.0, **kw)
    for n in (-1.0, math.nan, math.inf, "many"):
        with pytest.raises(DataError):
            auto_heatmap(s, 1.0, n_public=n)
    with pytest.raises(ParameterError):
        dense_emd_heatmap(s, 1.0, 3)  # not a power of two
    with pytest.raises(ParameterError):
        dense_emd_heatmap(s, 1.0, 2, shrink=-1.0)
    with pytest.raises(ParameterError):
        dense_emd_heatmap(s, 1.0, 2, floor=1.0)


def test_switch_reads_the_public_estimate_only_and_spends_nothing_on_it():
    """With a public n the whole budget goes to the map, and the branch and the output are a function of
    (epsilon, n_public) and the noise: two datasets of very different sizes take the same branch, and the tree
    branch equals PrivTree-EMD called directly with the same seed."""
    small, large = _users_sum((32, 32), 5, seed=1), _users_sum((32, 32), 2000, seed=2)
    for s in (small, large):
        lo = auto_heatmap(s, 1.0, n_public=10, rng=3)  # epsilon n = 10 < 40
        hi = auto_heatmap(s, 1.0, n_public=1000, rng=3)  # 1000 >= 40
        assert lo.params["branch"] == "dense" and hi.params["branch"] == "privtree-emd"
        assert lo.params["epsilon_total"] == 0.0 and lo.params["epsilon_map"] == 1.0
        assert lo.params["dense_coarse_side"] == 4  # 2^round(log2 sqrt(10))
        np.testing.assert_array_equal(hi.value, privtree_emd_heatmap(s, 1.0, rng=3).value)
        np.testing.assert_array_equal(lo.value, dense_emd_heatmap(s, 1.0, 4, rng=3).value)


def test_noisy_count_budget_and_branch():
    s = _users_sum((16, 16), 300, seed=4)
    branches = set()
    for seed in range(30):
        rel = auto_heatmap(s, 0.2, rng=seed)  # epsilon' n ~ 57 on average, noise Lap(100): both branches
        p = rel.params
        assert p["epsilon_total"] == pytest.approx(0.01) and p["epsilon_map"] == pytest.approx(0.19)
        assert p["epsilon_total"] + p["epsilon_map"] == pytest.approx(0.2, abs=1e-15)
        assert p["n_public"] is None
        assert p["branch"] == ("dense" if p["epsilon_map"] * p["n_estimate"] < 40 else "privtree-emd")
        branches.add(p["branch"])
    assert branches == {"dense", "privtree-emd"}


def test_dense_branch_is_appendix_d_plus_post_processing():
    """Without shrinkage, smoothing and floor, dense_emd_heatmap is exactly appendix D's release: the same
    noise, the same projection."""
    s = _users_sum((16, 16), 100, seed=5)
    mine = dense_emd_heatmap(s, 1.0, 4, shrink=0.0, smooth=False, floor=0.0, rng=9).value
    np.testing.assert_allclose(mine, dense_emd_agg(s, 1.0, 4, rng=9).value, rtol=0, atol=1e-15)


# --------------------------------------------------------------------------------------------
# Privacy audits: both branches, and a broken budget caught in each
# --------------------------------------------------------------------------------------------


def _audit(mech, eps, **kw):
    kw.setdefault("shape", (2, 2))
    return audit_heatmap(mech, eps, rng=kw.pop("seed", 2025), **kw)


@pytest.mark.parametrize(
    ("mech", "n", "n_pilot"),
    [(auto_heatmap, 2500, 300), (ALWAYS_TREE, 2500, 300), (ALWAYS_DENSE, 600, 100)],
    ids=["noisy-count", "tree", "dense"],
)
def test_audit_real_and_broken_budget(monkeypatch, mech, n, n_pilot):
    ok = _audit(mech, 2.0, n=n, n_pilot=n_pilot)
    assert ok.passed, str(ok)
    true_budget = auto._budget
    monkeypatch.setattr(auto, "_budget", lambda *a: tuple(3 * x for x in true_budget(*a)))  # 3x too optimistic
    bad = _audit(mech, 2.0, n=n, n_pilot=n_pilot)
    assert not bad.passed, str(bad)


def test_switch_extremes_hold_even_for_a_negative_noisy_count():
    """switch = 0 always takes the tree and switch = inf always the grid, whatever the noisy count (which can
    be negative on an empty or small dataset)."""
    empty = np.zeros((4, 4))
    assert {auto_heatmap(empty, 1.0, switch=0.0, rng=k).params["branch"] for k in range(40)} == {"privtree-emd"}
    assert {auto_heatmap(empty, 1.0, switch=math.inf, rng=k).params["branch"] for k in range(40)} == {"dense"}
    assert auto_heatmap(empty, 1.0, n_public=1e300, switch=math.inf, rng=1).params["branch"] == "dense"


def test_noisy_count_has_the_stated_scale():
    """The count the switch reads is Lap(1 / epsilon_total): over 2000 releases, the variance of
    n^ - sum(s) is 2 / epsilon_total^2 within 15% (a scale 30% off moves it by 50% or more)."""
    s = _users_sum((2, 2), 20, seed=8)
    d = np.array([auto_heatmap(s, 2.0, rng=k).params["n_estimate"] - s.sum() for k in range(2000)])
    assert np.var(d) == pytest.approx(2.0 / 0.1**2, rel=0.15)
    assert abs(np.mean(d)) < 4 * math.sqrt(2.0 / 0.1**2 / 2000)


def test_post_processing_reads_only_released_values(monkeypatch):
    """With the noisy step fixed (the library's noise function replaced by a constant), two very different
    datasets give the same map: shrinkage, smoothing, floor and fallbacks read nothing but the released
    counts and the public or released partition. Both branches."""
    import userdp.heatmaps.privtree as pt

    a, b = _users_sum((16, 12), 50, seed=1), _users_sum((16, 12), 900, seed=2)
    proj = np.arange(12.0).reshape(4, 3)  # the 16 x 12 grid pads to 16 x 16: 4 x 3 coarse cells of span 4
    monkeypatch.setattr(auto, "dense_projected_counts", lambda s, eps, side, rng: (proj.copy(), 4))
    np.testing.assert_array_equal(dense_emd_heatmap(a, 1.0, 4).value, dense_emd_heatmap(b, 1.0, 4).value)

    leaves = [
        (0, np.zeros(0, np.int64), np.zeros(0, np.int64)),
        (1, np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])),
    ]
    monkeypatch.setattr(pt, "_decompose", lambda *args: leaves)
    monkeypatch.setattr(pt, "add_laplace", lambda x, cal, src: np.array([40.0, -3.0, 7.0, 1.0])[: x.size])
    va, vb = privtree_emd_heatmap(a, 1.0).value, privtree_emd_heatmap(b, 1.0).value
    np.testing.assert_array_equal(va, vb)
    assert va.shape == (16, 12) and va.sum() == pytest.approx(1.0)


def test_privtree_post_processing_options_and_release_refusals():
    import userdp.releases as releases
    from userdp.data import BoxDomain

    s = _users_sum((8, 8), 100, seed=6)
    rel = privtree_emd_heatmap(s, 1.0, rng=2)
    assert rel.params["shrink"] == 0.5 and rel.params["smooth"] is True and rel.params["floor"] == 0.01
    from userdp.heatmaps import privtree_heatmap

    for bad in (-0.5, math.inf, "x", True):
        with pytest.raises(ParameterError):
            privtree_heatmap(s, 1.0, shrink=bad)
    box = BoxDomain((0.0, 0.0), (1.0, 1.0))
    with pytest.raises(ParameterError, match="n_public applies"):
        releases.heatmap([[(0.5, 0.5)]], box, 8, 1.0, "sparse", n_public=10)


def test_audit_dense_branch_with_smoothing_active():
    """A 4 x 4 grid with a 2 x 2 coarse grid: the smoothing inside coarse cells runs (span 2), and the audit
    still passes; with the library's budget 3x too optimistic it fails (below, through auto)."""
    mech = functools.partial(dense_emd_heatmap, coarse_side=2)
    ok = _audit(mech, 2.0, shape=(4, 4), n=600, n_pilot=100)
    assert ok.passed, str(ok)


def test_leaves_painted_in_one_pass_equal_the_depth_by_depth_expansion():
    """PrivTree's leaf values and labels are painted onto the grid by one compiled pass; they equal, byte for
    byte, expanding every depth's coarse grid to the fine grid and adding the depths up (the former code),
    -0.0 leaf values included."""
    from userdp.heatmaps import privtree as pt
    from userdp.noise import RandomSource

    def expanded(leaves, values, plan, shape):
        out, labels, start = np.zeros(shape), np.zeros(shape, dtype=np.int64), 0
        for d, r, c in leaves:
            if r.size == 0:
                continue
            grid = np.zeros((plan.rows[d].size, plan.cols[d].size))
            grid[r, c] = values[start : start + r.size] / (plan.row_len[d][r] * plan.col_len[d][c])
            out += grid[plan.row_of[d]][:, plan.col_of[d]]
            ids = np.full(grid.shape, -1, dtype=np.int64)
            ids[r, c] = np.arange(start, start + r.size)
            fine = ids[plan.row_of[d]][:, plan.col_of[d]]
            labels = np.where(fine >= 0, fine, labels)
            start += r.size
        return out, labels

    rng = np.random.default_rng(5)
    for trial in range(60):
        shape = (int(rng.integers(1, 50)), int(rng.integers(1, 50)))
        plan = pt._plan(*shape)
        counts = pt._level_counts(rng.poisson(rng.uniform(0.1, 40), shape).astype(float), plan)
        cal = pt._tree_calibration(pt.privtree_lambda(0.5), 0.5, shape[0] * shape[1])
        leaves = pt._decompose(counts, plan, float(rng.uniform(0, 20)), 1.0, cal, RandomSource(trial))
        k = sum(r.size for _, r, _ in leaves)
        values = rng.normal(size=k) * 1e3
        values[::5] = -0.0
        want, want_labels = expanded(leaves, values, plan, shape)
        assert pt._spread_leaves(leaves, values, plan, shape).tobytes() == want.tobytes()
        assert np.array_equal(pt._leaf_labels(leaves, plan, shape), want_labels)

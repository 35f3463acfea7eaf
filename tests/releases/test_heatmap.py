"""The heatmap release (:func:`userdp.releases.heatmap`) on its default path: what the engine hands the mechanism
(each user's points inside the box as one distribution of mass 1; a user with no point inside, nothing), points
outside the box dropped user by user (never a refusal), and what the default release (auto, a noisy user
count) really draws and spends, read from the sampler rather than from the release's params."""

from __future__ import annotations

import importlib

import numpy as np
import pyarrow as pa
import pytest

from tests.heatmaps.spies import NoiseSpy, assert_law, privtree_paper_lambda
from userdp import releases
from userdp.data import BoxDomain
from userdp.engines import ChunkedEngine, Columns
from userdp.errors import ParameterError
from userdp.privacy.guarantees import Neighbours, PureDP

release_module = importlib.import_module("userdp.releases.heatmap")  # (userdp.releases.heatmap is also the function)
BOX = BoxDomain((0.0, 0.0), (1.0, 1.0))


def _at(r: int, c: int) -> tuple[float, float]:
    """The centre of cell (r, c) of the 4 x 4 grid over BOX."""
    return ((r + 0.5) / 4, (c + 0.5) / 4)


OUTSIDE = (1.5, 0.5)
USERS = {  # user -> points; the expected grid sum (each user's points inside the box as a distribution)
    "u0": [_at(0, 0)] * 4,
    "u1": [_at(1, 2), _at(3, 3)],
    "u2": [_at(2, 1), OUTSIDE, _at(2, 1)],  # one point outside: its mass goes to the points inside
    "u3": [OUTSIDE, OUTSIDE],  # no point inside: adds nothing
    "u4": [_at(0, 0)],
    "u5": [_at(3, 0)] * 3 + [_at(0, 3)] * 2,
}
EXPECTED = np.zeros((4, 4))
EXPECTED[0, 0] = 2.0
EXPECTED[1, 2] = EXPECTED[3, 3] = 0.5
EXPECTED[2, 1] = 1.0
EXPECTED[3, 0], EXPECTED[0, 3] = 0.6, 0.4


def _table(users: dict) -> pa.Table:
    rows = [(u, p[0], p[1]) for u, pts in users.items() for p in pts]  # grouped by user, as a file sorted by user
    return pa.table({"user": [r[0] for r in rows], "lat": [r[1] for r in rows], "lon": [r[2] for r in rows]})


@pytest.fixture
def grid_sums(monkeypatch):
    """The grid sums the release hands its mechanism step (and the algorithm it asks for)."""
    seen: list[tuple[np.ndarray, str]] = []
    real = release_module.heatmap_of_grid

    def spy(s, epsilon, algorithm="auto", **kw):
        seen.append((np.array(s, dtype=np.float64), algorithm))
        return real(s, epsilon, algorithm, **kw)

    monkeypatch.setattr(release_module, "heatmap_of_grid", spy)
    return seen


@pytest.mark.parametrize("engine", ["memory", "chunked"])
def test_each_user_is_one_unit_of_mass_and_a_user_with_no_point_inside_adds_nothing(grid_sums, engine):
    """The default release (auto) of six users with 1 to 5 points each, some outside the box (drop_outside):
    the sum handed to the mechanism is, exactly, each user's points inside the box as a distribution of mass 1
    (4 points on one cell weigh 1, not 4; a user's points outside move its mass to its points inside), and a
    user with no point inside adds nothing. On the chunked engine with 2 rows a chunk, users' rows straddle
    chunk boundaries (whole users are carried over). Catches the per-user normalization forgotten or done per
    chunk (a user weighing its number of points)."""
    eng = "memory" if engine == "memory" else ChunkedEngine(2)
    if engine == "chunked":  # six chunks of one user each, not one chunk holding everyone
        data = eng.load(_table(USERS), Columns("user", points=("lat", "lon")))
        assert [ds.n_users for ds in eng.chunks(data)] == [1] * 6
    rel = releases.heatmap(_table(USERS), BOX, (4, 4), 1.0, drop_outside=True, engine=eng, rng=1)
    ((s, algorithm),) = grid_sums
    assert algorithm == "auto"
    np.testing.assert_allclose(s, EXPECTED, rtol=0, atol=1e-12)
    assert rel.guarantee == PureDP(1.0, neighbours=Neighbours.ADD_REMOVE_USER)


@pytest.mark.parametrize("engine", ["memory", "chunked"])
def test_points_outside_the_box_are_dropped_by_default_and_the_release_says_so(grid_sums, engine):
    """With every default, a table with points outside the box is released (a refusal would depend on the data:
    adding one person with one point outside would turn a release into a refusal): each user's points outside
    are dropped, a user with none inside adds nothing, and the release states it (without a count). The map is
    bit for bit the release of the table without those points. Catches a refusal by default, and a silent
    drop."""
    eng = "memory" if engine == "memory" else ChunkedEngine(2)
    rel = releases.heatmap(_table(USERS), BOX, (4, 4), 1.0, engine=eng, rng=1)
    np.testing.assert_allclose(grid_sums[0][0], EXPECTED, rtol=0, atol=1e-12)
    assert rel.params["outside"].startswith("points outside the public box are dropped, user by user")
    assert not any(ch.isdigit() for ch in rel.params["outside"])  # no count of what was dropped
    inside = {u: [p for p in pts if p != OUTSIDE] for u, pts in USERS.items()}
    again = releases.heatmap(_table(inside), BOX, (4, 4), 1.0, engine=eng, rng=1)
    assert np.array_equal(rel.value, again.value)
    with pytest.raises(ParameterError, match="depend on the data"):  # the refusing variant is no longer offered
        releases.heatmap(_table(inside), BOX, (4, 4), 1.0, drop_outside=False, engine=eng, rng=1)


@pytest.mark.parametrize("n_users", [8, 100, 3000])
def test_the_default_release_draws_a_noisy_count_and_a_map_that_spend_exactly_epsilon(monkeypatch, n_users):
    """heatmap(source, box, 16, eps) with every default (square cells, algorithm auto, no public n), read from the
    sampler: the first draw is the number of users (each of mass 1) with Lap(1 / (0.05 eps)); the map is the
    coarse grid (one draw, Lap(1 / (0.95 eps))) when 0.95 eps n^ < 40 on that noisy count, else the tree (split
    decisions with the paper's lambda, then the leaf counts); what the draws spend adds up to eps exactly
    (1 / scale per count of sensitivity 1, (2 beta - 1) / ((beta - 1) lambda) for PrivTree's decisions), and the
    release claims eps for adding or removing one user. Catches a share of the budget counted twice."""
    spy = NoiseSpy(monkeypatch)
    gen = np.random.default_rng(n_users)
    users = {f"u{i:05d}": [tuple(p) for p in gen.random((int(gen.integers(1, 6)), 2))] for i in range(n_users)}
    eps = 1.5
    for seed in range(4):
        rel = releases.heatmap(_table(users), BOX, 16, eps, rng=seed)
        count, *rest = spy.take()
        assert count.values.tolist() == [pytest.approx(n_users, rel=1e-12)]
        assert_law([count], 1 / (0.05 * eps))
        if 0.95 * eps * max(float(count.out[0]), 0.0) < 40:  # the coarse grid: its counts
            (grid,) = rest
            assert_law([grid], 1 / (0.95 * eps))
            spent = 1 / count.scale + 1 / grid.scale
        else:  # the tree: decisions, then the leaf counts
            *decisions, leaves = rest
            assert_law(decisions, privtree_paper_lambda(0.3 * 0.95 * eps))
            spent = 1 / count.scale + 7 / (3 * decisions[0].scale) + 1 / leaves.scale
        assert spent == pytest.approx(eps, rel=1e-6)
        assert rel.guarantee == PureDP(eps, neighbours=Neighbours.ADD_REMOVE_USER)
        assert rel.value.shape == (16, 16) and rel.value.sum() == pytest.approx(1.0)


def test_users_inside_counts_users_not_points_with_laplace_one_over_epsilon():
    """``releases.users_inside`` (``userdp heatmap --check-box``): the number of users with a point inside the
    box (45 here: 40 inside, 5 with points on both sides; 25 only outside; several points each), plus Laplace
    noise of scale ``1 / epsilon`` -- measured over 600 releases (mean |noise| within 12% of the scale: a scale
    30% off is rejected), centred -- and the guarantee ``epsilon``-DP under add/remove one user; its warning
    fires for a box the data miss and not here. Catches a count of points, a sensitivity or scale off."""
    rng = np.random.default_rng(4)
    rows = []
    for u in range(70):
        inside = u < 45
        for j in range(int(rng.integers(1, 6))):
            lat = 40.70 + 0.01 * rng.random() if (inside and not (u >= 40 and j == 0)) else 45.0 + rng.random()
            rows.append((u, lat, -74.0 + 0.01 * rng.random()))
    rows += [(u, 40.701, -73.995) for u in range(40, 45)]  # the five with points on both sides: one inside each
    table = pa.table({"user": [r[0] for r in rows], "lat": [r[1] for r in rows], "lon": [r[2] for r in rows]})
    box = BoxDomain.latlon(40.69, 40.72, -74.01, -73.98)
    eps = 0.5
    rels = [releases.users_inside(table, box, eps, rng=i) for i in range(600)]
    noise = np.array([r.value for r in rels]) - 45
    assert abs(np.mean(np.abs(noise)) - 1 / eps) < 0.12 / eps and abs(np.mean(noise)) < 0.25 / eps
    assert rels[0].guarantee == PureDP(eps, neighbours=Neighbours.ADD_REMOVE_USER)
    assert rels[0].params["box_check"] is None
    far = releases.users_inside(table, BoxDomain.latlon(51.4, 51.6, -0.3, 0.1), 1.0, rng=1)
    assert "too few to tell this box from an empty one" in far.params["box_check"]
    with pytest.raises(ParameterError, match="epsilon"):  # before any read: the source does not exist
        releases.users_inside("/no/such/file.csv", box, -1.0)

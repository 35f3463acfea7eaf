"""PrivEMDLinear (local) drops points outside the space's public domain user by user, on every engine: the
release on a table with such points is the release on the table without them (a user left with none sends no
report), never a refusal that would depend on the data (issue 34)."""

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pytest

from userdp import releases
from userdp.data import BoxDomain
from userdp.errors import DataError
from userdp.metrics import EuclideanMetric, GreatCircleMetric
from userdp.noise import RandomSource

BOX = BoxDomain.latlon(40.6, 40.9, -74.1, -73.7)


def _tables():
    rng = np.random.default_rng(4)
    n = 60
    user = np.repeat(np.arange(n), 3)
    lat = rng.uniform(40.62, 40.88, user.size)
    lon = rng.uniform(-74.08, -73.72, user.size)
    inside = pa.table({"user": user, "lat": lat, "lon": lon})
    # user 7 gets a point in London; users 100 and 101 hold only outside points (100 in Paris, 101 off the box)
    extra = pa.table({"user": np.array([7, 100, 101, 101]), "lat": np.array([51.5, 48.85, 40.95, 40.5]),
                      "lon": np.array([-0.12, 2.35, -73.9, -73.9])})  # fmt: skip
    return inside, pa.concat_tables([inside, extra])


@pytest.mark.parametrize("engine", ["memory", "duckdb", "chunked"])
def test_outside_points_dropped_user_by_user(engine, tmp_path):
    inside, with_outside = _tables()
    paths = []
    for name, t in (("in", inside), ("out", with_outside)):
        paths.append(tmp_path / f"{name}.csv")
        pcsv.write_csv(t, paths[-1])
    space = GreatCircleMetric(BOX)
    f, ell, _ = releases.distance_query(space, (40.758, -73.9855))
    kw = dict(points=("lat", "lon"), model="local", engine=engine)
    a = releases.linear(str(paths[0]), f, ell, 25.0, rng=RandomSource(9), **kw)
    b = releases.linear(str(paths[1]), f, ell, 25.0, rng=RandomSource(9), **kw)
    assert np.array_equal(np.asarray(a.value), np.asarray(b.value))
    assert "dropped, user by user" in b.params["outside"]


def test_per_user_means_skip_outside_points():
    """The per-user means against their definition: a user's mean over its points inside; NaN for none."""
    from userdp.data import UserDataset
    from userdp.engines.memory import per_user_mean

    space = EuclideanMetric(1, 2.0)  # the ball [-1, 1]
    ds = UserDataset.from_lists([[[0.5], [3.0]], [[5.0]], [[-0.25], [0.75]]])
    q = releases.mean_query(space)[0]
    with pytest.raises(DataError):
        per_user_mean(ds, q)  # the query itself refuses (the bounded releases keep this)
    m = per_user_mean(ds, q.dropping_outside())
    assert m[0, 0] == 0.5 and np.isnan(m[1, 0]) and m[2, 0] == 0.25

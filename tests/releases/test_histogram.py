"""The user-level histogram release (:func:`userdp.releases.histogram`) on its default path: a table of
(user, item) records, each user's items normalized to mass 1, Laplace noise of the sensitivity of the neighbour
relation -- checked against the sum and the scale computed here from the definitions."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from scipy import stats

from userdp import releases
from userdp.data import FiniteDomain, UserDataset
from userdp.noise import RandomSource, add_laplace, calibrate_laplace
from userdp.privacy import Neighbours, PureDP

LABELS = ["a", "b", "c", "d", "e"]
DOMAIN = FiniteDomain(np.array(LABELS, dtype=object))


def _table(seed: int = 0):
    """40 users of very different sizes (1 to 60 records; one user holds 200 copies of "a") as a table and as a
    dataset, and ``sum_i K~_i`` computed here, each user's records counted and divided by the user's own number
    of records."""
    rng = np.random.default_rng(seed)
    lists = [list(rng.integers(0, 5, int(k))) for k in rng.integers(1, 61, 39)] + [[0] * 200]
    users = [f"u{i}" for i, u in enumerate(lists) for _ in u]
    items = [LABELS[j] for u in lists for j in u]
    truth = sum(np.bincount(u, minlength=5) / len(u) for u in lists)
    ds = UserDataset.from_lists([[LABELS[j] for j in u] for u in lists], domain=DOMAIN)
    return pa.table({"user": users, "item": items}), ds, truth


@pytest.mark.parametrize("neighbours,sens", [(None, 1.0), (Neighbours.REPLACE_USER, 2.0)])
def test_histogram_is_laplace_noise_on_the_normalized_sum(neighbours, sens):
    """The default (add/remove one user: sensitivity 1) and replace one user (2): the release is the lattice
    Laplace mechanism on ``sum_i K~_i`` -- every user normalized by its own size, so the user holding 200 records
    weighs as much as one holding 1 -- for that sensitivity, bit for bit, and 600 releases' noise has mean
    absolute value within 10% of ``sensitivity / epsilon`` (3,000 draws: 5 standard errors), so counting
    records instead of users' shares, the add/remove scale under replacement, or any scale 30% off, is
    rejected."""
    eps = 0.5
    table, ds, truth = _table()
    kw = {} if neighbours is None else {"neighbours": neighbours}
    rel = releases.histogram(table, DOMAIN, eps, rng=RandomSource(4), **kw)
    expected = add_laplace(truth, calibrate_laplace(sens, eps, dim=5), RandomSource(4))
    np.testing.assert_allclose(rel.extras["noisy_sum"], expected, rtol=0, atol=1e-12)
    assert rel.guarantee == PureDP(eps, neighbours=neighbours or Neighbours.ADD_REMOVE_USER)
    est = np.maximum(rel.extras["noisy_sum"], 0)
    assert np.allclose(rel.value, est / est.sum())
    noise = np.concatenate([releases.histogram(ds, DOMAIN, eps, rng=s, **kw).extras["noisy_sum"] - truth
                            for s in range(600)])  # fmt: skip
    scale = sens / eps
    assert stats.kstest(noise, stats.laplace(scale=scale).cdf).pvalue > 1e-3
    assert abs(np.abs(noise).mean() / scale - 1) < 0.1

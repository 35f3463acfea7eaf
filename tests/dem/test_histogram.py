"""The user-level Laplace histogram: sensitivity under each neighbour relation, noise scale, refusals."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from userdp.data import FiniteDomain, UserDataset
from userdp.dem import user_histogram
from userdp.errors import DataError
from userdp.privacy import Neighbours, PureDP


def _sum(lists, k):
    return UserDataset.from_lists(lists, domain=FiniteDomain(list(range(k)))).histograms().sum(axis=0).A1


def test_sensitivity_exhaustive():
    """Adding/removing a user moves sum_i K~_i by exactly 1 in l1; replacing a user by at most 2."""
    k = 3
    users = [list(u) for n in (1, 2, 3) for u in itertools.combinations_with_replacement(range(k), n)]
    base = [[0, 1], [2]]
    worst_replace = 0.0
    for u in users:
        assert np.abs(_sum(base + [u], k) - _sum(base, k)).sum() == pytest.approx(1.0)
        for v in users:
            worst_replace = max(worst_replace, np.abs(_sum(base + [u], k) - _sum(base + [v], k)).sum())
    assert worst_replace == pytest.approx(2.0)


@pytest.mark.parametrize("nb,sens", [(Neighbours.ADD_REMOVE_USER, 1.0), (Neighbours.REPLACE_USER, 2.0)])
def test_release_and_noise_scale(rng, nb, sens):
    """The noise on ``sum_i K~_i``, read off 1,000 releases' noisy sums against the sum computed here, is
    Laplace of scale ``sensitivity / epsilon``: 1 under add/remove one user, 2 under replace one user (see
    test_sensitivity_exhaustive). Its mean absolute value is within 10% of that scale (3,000 draws, 5 standard
    errors), so a scale 30% off -- or the add/remove calibration under replacement -- is rejected."""
    lists = [[0, 1], [1], [2, 2, 0]] * 10
    ds = UserDataset.from_lists(lists, domain=FiniteDomain([0, 1, 2]))
    rel = user_histogram(ds, 0.5, nb, rng=rng)
    assert rel.guarantee == PureDP(0.5, neighbours=nb) and rel.value.sum() == pytest.approx(1.0)
    truth = sum(np.bincount(u, minlength=3) / len(u) for u in lists)
    noise = np.concatenate([user_histogram(ds, 0.5, nb, rng=rng).extras["noisy_sum"] - truth for _ in range(1000)])
    scale = sens / 0.5
    assert stats.kstest(noise, stats.laplace(scale=scale).cdf).pvalue > 1e-3
    assert abs(np.abs(noise).mean() / scale - 1) < 0.1


def test_refusals():
    inferred = UserDataset.from_lists([["a"], ["b"]])
    with pytest.raises(DataError, match="read off the data"):
        user_histogram(inferred, 1.0)
    ok = UserDataset.from_lists([["a"]], domain=FiniteDomain(["a"]))
    with pytest.raises(ValueError):
        user_histogram(ok, 1.0, neighbours=Neighbours.ITEM)


@pytest.mark.parametrize("nb", [Neighbours.ADD_REMOVE_USER, Neighbours.REPLACE_USER])
def test_empty_users_and_no_users_contribute_nothing(nb):
    """Adding an empty user is an add/remove neighbour that must not turn the release into an error (the
    error would reveal the empty user): it contributes the zero vector, so with the same noise the release
    is identical. A dataset of no users releases the noise alone."""
    from userdp.noise import RandomSource

    dom = FiniteDomain(["a", "b", "c"])
    users = [["a"], ["b", "a"]]
    base = user_histogram(UserDataset.from_lists(users, domain=dom), 1.0, nb, rng=RandomSource(3))
    padded = UserDataset.from_lists(users + [[], []], domain=dom)
    rel = user_histogram(padded, 1.0, nb, rng=RandomSource(3))
    assert np.array_equal(rel.extras["noisy_sum"], base.extras["noisy_sum"]) and rel.guarantee == base.guarantee
    none = user_histogram(UserDataset.from_lists([], domain=dom), 1.0, nb, rng=RandomSource(3))
    noise = base.extras["noisy_sum"] - np.array([1.5, 0.5, 0.0])
    assert np.allclose(none.extras["noisy_sum"], noise) and np.isclose(none.value.sum(), 1.0)


@pytest.mark.slow  # large statistical audit; both relations' noise law is tested fast: test_release_and_noise_scale
@pytest.mark.parametrize("nb", [Neighbours.ADD_REMOVE_USER, Neighbours.REPLACE_USER])
def test_audit_user_histogram(nb, rng):
    """Worst-case search over removing each user, adding a full user and replacing a user by it: the noisy
    sum is (eps, 0)-DP under the stated relation; the add/remove calibration used for replacement (half
    the sensitivity) is refuted."""
    from userdp.audit import audit_search, user_neighbours

    eps, dom = 1.0, FiniteDomain(list(range(4)))
    base = [[0, 1], [1, 2], [3]]
    pairs = [p for p in user_neighbours(base, [0, 0, 0]) if ("replace" in p.label) == (nb is Neighbours.REPLACE_USER)]

    def sampler(relation):
        def sample(users, k):
            ds = UserDataset.from_lists(users, domain=dom)
            return np.array([user_histogram(ds, eps, relation, rng=rng).extras["noisy_sum"] for _ in range(k)])

        return sample

    assert audit_search(sampler(nb), pairs, lambda d: (eps, 0.0), n=8_000, n_pilot=800).passed
    if nb is Neighbours.REPLACE_USER:
        broken = sampler(Neighbours.ADD_REMOVE_USER)
        assert not audit_search(broken, pairs, lambda d: (eps, 0.0), n=8_000, n_pilot=800).passed

"""FreqEstLocal (Algorithm 4) on any finite metric with the exponential randomizer: the right inverse (exact or
truncated), unbiasedness, the exact privacy audit of what it releases (with a broken variant caught), and the
central/shuffle version."""

from __future__ import annotations

import numpy as np
import pytest

from userdp.audit import audit_frequency
from userdp.data import FiniteDomain, UserDataset
from userdp.dem import ExponentialRandomizer, freq_est_gkrr, freq_est_local
from userdp.dem.frequency import demd_error, right_inverse_estimate
from userdp.errors import ParameterError
from userdp.metrics import ClusteredMetric, FiniteMetric


def _line(k: int) -> FiniteMetric:
    x = np.arange(k, dtype=np.float64)
    return FiniteMetric(np.abs(x[:, None] - x[None, :]))


def _data(k: int, n: int, m: int, seed: int = 0) -> tuple[UserDataset, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(k))
    items = rng.choice(k, size=n * m, p=p)
    ds = UserDataset(np.arange(n + 1) * m, items, np.arange(n), FiniteDomain(np.arange(k)))
    return ds, np.bincount(items, minlength=k) / items.size


def test_the_right_inverse_is_exact_when_well_conditioned_and_truncated_otherwise():
    space = _line(6)
    h = np.array([0.1, 0.3, 0.0, 0.2, 0.25, 0.15])
    A = ExponentialRandomizer(space, 8.0).transition_matrix()
    H, info = right_inverse_estimate(A, h @ A)
    assert info["inverse"] == "exact" and np.allclose(H, h, atol=1e-12)  # B A = I: E[v] B = h exactly
    A_flat = ExponentialRandomizer(space, 1e-10).transition_matrix()  # rows almost equal: cond ~ 1e12
    H, info = right_inverse_estimate(A_flat, h @ A_flat)
    assert info["inverse"] == "truncated SVD" and info["rank"] < 6 and np.all(np.isfinite(H))
    assert abs(H.sum() - 1) < 1e-9  # the all-ones direction (the total mass) is always kept


def test_the_estimate_is_unbiased_on_a_line_metric():
    """The mean of 300 unprojected estimates lies within 4 standard errors of the true histogram in every
    coordinate, while the released items' own histogram (pulled toward the neighbours) is refuted by the
    same test: it is not vacuous."""
    space = _line(5)
    ds, truth = _data(5, 40, 10)
    ests = np.array([freq_est_local(ds, space, 30.0, 1e-6, rng=s).extras["unbiased"] for s in range(300)])
    se = ests.std(axis=0) / np.sqrt(len(ests)) + 1e-12
    assert np.all(np.abs(ests.mean(axis=0) - truth) < 4 * se)
    from userdp.dem import priv_emd_itemwise
    from userdp.dem.frequency import frequency_randomizer

    rz, cal = frequency_randomizer(space, 30.0, 1e-6, 10, None)
    raw = np.array([priv_emd_itemwise(ds, rz, "local", cal.delta_prime_target, rng=s).extras["histogram"]
                    for s in range(300)])  # fmt: skip
    assert np.any(np.abs(raw.mean(axis=0) - truth) > 4 * (raw.std(axis=0) / np.sqrt(300) + 1e-12))
    rel = freq_est_local(ds, space, 30.0, 1e-6, rng=1)
    assert rel.params["randomizer"] == "ExponentialRandomizer" and rel.params["inverse"] in ("exact", "truncated SVD")
    assert abs(rel.value.sum() - 1) < 1e-12 and np.all(rel.value >= 0)
    assert demd_error(rel.value, truth, space) < 0.5


def test_gkrr_on_the_clustered_metric_is_the_same_release():
    """On a clustered metric the general function with GKRR is freq_est_gkrr, bit for bit (same seed)."""
    space = ClusteredMetric(3, 2, 0.2)
    ds, _ = _data(6, 30, 8)
    a = freq_est_gkrr(ds, space, 20.0, 1e-6, rng=4)
    b = freq_est_local(ds, space, 20.0, 1e-6, rng=4)
    assert np.array_equal(a.value, b.value) and a.guarantee == b.guarantee
    c = freq_est_local(ds, space, 20.0, 1e-6, randomizer="exponential", rng=4)
    assert c.params["randomizer"] == "ExponentialRandomizer"
    with pytest.raises(ParameterError):
        freq_est_local(ds, _line(6), 20.0, 1e-6, randomizer="gkrr")


@pytest.mark.parametrize("n", [None, 2])
def test_exact_audit_of_what_it_releases(n):
    """Local and central (shuffle) models on a 3-point line metric, m = 2 items: the exact law of the released
    multisets meets the guarantee the release returns at every pair of datasets."""
    res = audit_frequency(_line(3), 4.0, 1e-3, 2, n, randomizer="exponential")
    assert res.passed, res


@pytest.mark.parametrize("model", ["local", "central"])
def test_exact_audit_of_the_randomizer_the_release_ran(model, monkeypatch):
    """freq_est_local itself (not a randomizer rebuilt from its calibration): the exponential randomizer it ran
    is read off its call of ``frequency_randomizer``, its exact law off its sampler (:func:`exponential_law`),
    and the guarantee the release returned holds for every pair of one user's 2-item datasets on a 3-point line
    (central: with the other user's 2 items shuffled in, item 0 both)."""
    import userdp.dem.frequency as F
    from tests.dem.exact_laws import Spy, exponential_law
    from userdp.audit import audit_shuffled

    spy = Spy(F.frequency_randomizer)
    monkeypatch.setattr(F, "frequency_randomizer", spy)
    ds = UserDataset(np.array([0, 2, 4]), np.array([0, 2, 1, 1]), np.arange(2), FiniteDomain(np.arange(3)))
    rel = freq_est_local(ds, _line(3), 4.0, 1e-3, model, randomizer="exponential", rng=0)
    rz = spy.calls[0][2][0]
    P = exponential_law(rz)
    bg = () if model == "local" else (0, 0)
    D = _line(3).full_matrix()
    assert audit_shuffled(P, D, 2, rel.guarantee.at_distance, background=bg).passed
    a = rel.guarantee.alpha
    assert not audit_shuffled(P, D, 2, lambda d: (0.8 * a * d, 0.0), background=bg).passed  # 20% less: refuted


def test_exact_audit_on_the_theorem_4_4_route_states_the_release_s_own_claim():
    """Central (shuffle) model with 500 users, where the accountant takes Theorem 4.4: the audit's claim is the
    release's guarantee (same target and inner delta), and the exact law of the shuffled outputs (the other
    users' counts multinomial, in closed form) meets it."""
    space = FiniteMetric(np.abs(np.array([0.0, 0.3, 1.0])[:, None] - np.array([0.0, 0.3, 1.0])[None, :]))
    ds = UserDataset(np.arange(501) * 2, np.zeros(1000, dtype=np.int64), np.arange(500), FiniteDomain(np.arange(3)))
    rel = freq_est_local(ds, space, 2.0, 1e-4, "central", randomizer="exponential", rng=0)
    assert rel.params["route"] == "theorem 4.4"
    res = audit_frequency(space, 2.0, 1e-4, 2, 500, randomizer="exponential")
    assert res.passed and "theorem 4.4" in res.mechanism, res
    assert rel.guarantee.describe() in res.claimed


def test_the_shuffled_law_in_closed_form_is_the_enumerated_one():
    from userdp.audit import shuffled_counts_law, shuffled_output_distribution

    P = np.array([[0.5, 0.3, 0.2], [0.2, 0.5, 0.3], [0.1, 0.2, 0.7]])
    law = shuffled_counts_law(P, [1, 2], 0, 5)
    for counts, p in shuffled_output_distribution(P, [0] * 5 + [1, 2]).items():
        assert abs(law[counts[1], counts[2]] - p) < 1e-15
    assert abs(law.sum() - 1) < 1e-12


def test_a_broken_randomizer_is_caught(monkeypatch):
    """If the randomizer under-reports its alpha_0 (its table is twice as revealing as claimed), the audit
    of the release fails."""
    real = ExponentialRandomizer._realized
    monkeypatch.setattr(ExponentialRandomizer, "_realized", lambda self, W: real(self, W) / 2.5)
    res = audit_frequency(_line(3), 4.0, 1e-3, 2, None, randomizer="exponential")
    assert not res.passed


def test_the_closed_form_law_with_an_impossible_output():
    """Review 21: a background item that never yields output 0 made the closed form NaN."""
    from userdp.audit import shuffled_counts_law, shuffled_output_distribution

    P = np.array([[0.0, 0.6, 0.4], [0.3, 0.3, 0.4], [0.2, 0.2, 0.6]])
    law = shuffled_counts_law(P, [1], 0, 4)
    assert np.all(np.isfinite(law)) and abs(law.sum() - 1) < 1e-12
    for counts, p in shuffled_output_distribution(P, [0] * 4 + [1]).items():
        assert abs(law[counts[1], counts[2]] - p) < 1e-15

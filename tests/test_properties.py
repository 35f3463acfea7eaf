"""Property-based tests (hypothesis) of the data model and the accountant."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from userdp.data import FiniteDomain, UserDataset
from userdp.privacy.accounting import calibrate, shuffle_guarantee, validity_limit

records = st.lists(st.tuples(st.integers(0, 20), st.sampled_from(list("abcdefg"))), min_size=1, max_size=80)


@settings(max_examples=60, deadline=None)
@given(records)
def test_dataset_roundtrip_and_invariants(recs):
    users = np.array([u for u, _ in recs])
    items = np.array([i for _, i in recs])
    dom = FiniteDomain(list("abcdefg"))
    ds = UserDataset.from_arrays(users, items, domain=dom)
    assert ds.n_items == len(recs) and ds.n_users == len(set(users.tolist()))
    assert np.allclose(ds.histograms().sum(axis=1).A1, 1.0)
    assert np.isclose(ds.global_histogram().sum(), 1.0)
    back = UserDataset.from_table(ds.to_arrow(), user="user", item="item", domain=dom)
    assert np.array_equal(back.offsets, ds.offsets) and np.array_equal(np.sort(back.items), np.sort(ds.items))
    d = ds.dedupe()
    assert np.array_equal(d.dedupe().items, d.items)
    assert d.n_items == len(set(recs))
    s = ds.sample(3, replace=True, rng=1)
    assert np.all(s.counts() == 3)
    for i in range(ds.n_users):
        assert set(s.user_items(i)) <= set(ds.user_items(i))


@settings(max_examples=60, deadline=None)
@given(st.integers(500, 5000), st.integers(1, 50), st.floats(1e-12, 1e-3), st.floats(0.05, 0.95))
def test_accountant_properties(m, n, delta, frac):
    M = m * n
    lim = validity_limit(M, delta)
    if lim <= 0.02:
        return
    a0 = frac * lim
    b = shuffle_guarantee(a0, m, delta, n=n if n > 1 else None)
    assert b.delta_prime >= delta
    d = np.linspace(0.01, 1, 50)
    eps, _ = b.curve(d)
    assert np.all(eps <= b.alpha * d * (1 + 1e-9))  # the curve is below alpha d
    b2 = shuffle_guarantee(a0 * 0.9, m, delta, n=n if n > 1 else None)
    assert b2.alpha < b.alpha  # monotone in alpha_0


@settings(max_examples=25, deadline=None)
@given(st.floats(0.5, 50), st.floats(1e-9, 1e-3), st.integers(200, 3000), st.sampled_from([None, 10, 1000]))
def test_calibration_meets_every_target(alpha, dp, m, n):
    """The calibrated alpha_0 meets the target by the paper's formulas computed here, not only by the route's
    report of itself: composition is ``alpha / m``; Theorem 4.4 at the route's inner delta gives
    ``m alpha_0 C / 2 <= alpha`` and ``delta e^{h(M; m, m)} <= delta'``, inside Theorem 4.3's range."""
    cal = calibrate(alpha, dp, m, n=n)
    assert cal.best.alpha <= alpha * (1 + 1e-9) and cal.best.delta_prime <= dp * (1 + 1e-9)
    assert cal.alpha0 >= alpha / m * (1 - 1e-12)  # never worse than composition
    a0, delta, M = cal.alpha0, cal.best.delta, m * (n or 1)
    if cal.route == "composition":
        assert a0 == alpha / m and delta == 0.0
        return
    C = 8 * math.sqrt(math.exp(a0) * math.log(4 * m / delta) / M) + 8 * math.exp(a0) / M
    assert a0 < math.log(M / (16 * math.log(4 * M / delta)))
    assert m * a0 * C / 2 <= alpha * (1 + 1e-9)
    assert delta * math.exp(m * math.log1p(math.tanh(a0 / 2) * C)) <= dp * (1 + 1e-9)

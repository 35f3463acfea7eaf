"""Planning (issue 19, first part): each prediction against the error the library's own release measures,
and each inverse against its forward prediction."""

from __future__ import annotations

import numpy as np
import pytest

from userdp import plan
from userdp.errors import ParameterError
from userdp.vocabulary import private_key_counts, private_vocabulary


def _public_counts(noise: str, runs: int = 12):
    keys = np.repeat(np.arange(300), 50)
    offsets = np.arange(keys.size + 1)
    labels = np.array([f"k{i:03d}" for i in range(300)], dtype=object)
    errs = []
    for r in range(runs):
        rel = private_key_counts(offsets, keys, np.ones(keys.size, dtype=np.int64), labels, 1.0,
                                 1e-6 if noise == "gaussian" else 0.0, public_keys=labels, bounds=(8, 4),
                                 noise=noise, rng=r)  # fmt: skip
        errs.append(np.abs(rel.value["counts"] - 50))
    return np.concatenate(errs)


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_key_counts_prediction_matches_the_measured_noise(noise):
    """Median and 90% quantile of |noise| within 10% of 3,600 measured counts (the issue asks for 2x); a
    scale 30% off would not be."""
    pred = plan.key_counts(1.0, 1e-6 if noise == "gaussian" else 0.0, l0=8, linf=4, n_keys=300, noise=noise)
    err = _public_counts(noise)
    for c in (0.5, 0.9):
        measured = float(np.quantile(err, c))
        assert abs(pred.quantiles[c] / measured - 1) < 0.1, (c, pred.quantiles[c], measured)
        assert abs(1.3 * pred.quantiles[c] / measured - 1) > 0.15
    assert pred.exact == (noise == "laplace") and "|noise|" in pred.sentence(0.9)


def test_key_counts_inverse_is_the_smallest_epsilon_that_meets_the_target():
    eps = plan.key_counts_epsilon(20.0, 0.9, l0=8, linf=4, n_keys=300)
    assert plan.key_counts(eps, l0=8, linf=4, n_keys=300).quantiles[0.9] <= 20.0
    assert plan.key_counts(eps / 1.02, l0=8, linf=4, n_keys=300).quantiles[0.9] > 20.0
    with pytest.raises(ParameterError, match="no epsilon"):
        plan.key_counts_epsilon(1e-9, 0.9, l0=8, linf=4)


@pytest.mark.slow  # 2,000 releases, about 33 s: the README test command stays under 5 minutes
def test_vocabulary_prediction_matches_the_release_rate_and_its_inverse(monkeypatch):
    """An item held by 45 one-item persons: the predicted release probability against 2,000 releases. (The
    Gaussian calibrations, deterministic functions of the public parameters, are memoized: the zCDP searches
    took 57 ms of each release's 57.3.)"""
    import functools

    import userdp.noise.mechanisms as mechanisms
    import userdp.vocabulary.union as union

    cached = functools.lru_cache(mechanisms.calibrate_gaussian)
    monkeypatch.setattr(mechanisms, "calibrate_gaussian", cached)
    monkeypatch.setattr(union, "calibrate_gaussian", cached)
    monkeypatch.setattr(union, "calibrate_union", functools.lru_cache(union.calibrate_union))
    pred = plan.vocabulary(1.0, 1e-6, max_items=1, persons=45, count_fraction=0.5)
    p = pred.extra["release probability"]
    assert 0.2 < p < 0.9
    offsets = np.arange(46)
    items = np.zeros(45, dtype=np.int64)
    runs = 2000
    hits = sum(private_vocabulary(offsets, items, np.array(["w"]), 1.0, 1e-6, max_items=1, rng=s).value["items"].size
               for s in range(runs))  # fmt: skip
    assert abs(hits / runs - p) < 4 * np.sqrt(p * (1 - p) / runs) + 0.005, (hits / runs, p)
    need = pred.extra["weight needed"]
    assert need[0.5] <= need[0.9] and need[0.5] == pytest.approx(pred.extra["threshold"], abs=1e-3)
    eps = plan.vocabulary_epsilon(45, 0.9, 1e-6, max_items=1)
    assert plan.vocabulary(eps, 1e-6, max_items=1, persons=45).extra["release probability"] >= 0.9
    assert plan.vocabulary(eps / 1.02, 1e-6, max_items=1, persons=45).extra["release probability"] < 0.9


def test_plans_refuse_bad_parameters():
    with pytest.raises(ParameterError, match="confidence"):
        plan.key_counts(1.0, l0=1, linf=1, confidence=1.0)
    with pytest.raises(ParameterError, match="bounds"):
        plan.key_counts(1.0, l0=0, linf=1)
    with pytest.raises(ParameterError, match="noise"):
        plan.key_counts(1.0, l0=1, linf=1, noise="uniform")
    for delta in (1.0, 1.5, -0.1, float("nan")):  # the one delta rule, whatever the noise (issue 34, item 10)
        for noise in ("laplace", "gaussian"):
            with pytest.raises(ParameterError, match=r"delta \(--delta\) must lie in \[0, 1\)"):
                plan.key_counts(1.0, delta, l0=1, linf=1, noise=noise)


@pytest.mark.parametrize("neighbours", ["add or remove one user", "replace one user's data"])
def test_histogram_prediction_matches_the_release_s_noise(neighbours):
    """The user-level histogram's noisy sum: the exact law's median and 90% quantile within 8% of 40 releases
    of 50 cells (2,000 cells); at 1.3 epsilon the prediction is refuted."""
    from userdp.data import FiniteDomain, UserDataset
    from userdp.releases import histogram

    rng = np.random.default_rng(0)
    ds = UserDataset(np.arange(0, 601, 3), rng.integers(0, 50, 600), np.arange(200), FiniteDomain(np.arange(50)))
    total = np.bincount(ds.items, minlength=50) / 3.0
    noise = np.concatenate([histogram(ds, ds.domain, 1.0, neighbours=neighbours, rng=s).extras["noisy_sum"] - total
                            for s in range(40)])  # fmt: skip
    p = plan.histogram(1.0, domain_size=50, neighbours=neighbours)
    for c in (0.5, 0.9):
        assert abs(p.quantiles[c] / np.quantile(np.abs(noise), c) - 1) < 0.08
    assert abs(plan.histogram(1.3, domain_size=50, neighbours=neighbours).median / np.median(np.abs(noise)) - 1) > 0.15

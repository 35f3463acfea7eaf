"""The auditor passes userdp's mechanisms and catches deliberately broken variants."""

from __future__ import annotations

import math

import numpy as np
import pytest

from userdp.audit import audit_randomizer, audit_samples, audit_shuffled
from userdp.dem import GKRR, ExponentialRandomizer
from userdp.metrics import ClusteredMetric, FiniteMetric
from userdp.noise import gaussian_noise, laplace_noise


def test_exact_randomizer_audit_and_doubled_alpha0():
    space = ClusteredMetric(3, 3, 0.2)
    g = GKRR(space, 1.5)
    assert audit_randomizer(g.transition_matrix(), space.full_matrix(), 1.5).passed
    doubled = GKRR(space, 3.0)  # built with 2 alpha_0 but claiming alpha_0
    assert not audit_randomizer(doubled.transition_matrix(), space.full_matrix(), 1.5).passed
    e = ExponentialRandomizer(FiniteMetric(np.array([[0, 0.4, 1.0], [0.4, 0, 0.7], [1.0, 0.7, 0]])), 2.0)
    assert audit_randomizer(e.transition_matrix(), e.space.full_matrix(), 2.0).passed


def test_exact_shuffled_audit_composition_and_halved_alpha():
    """Shuffled binary randomized response with m = 4 items: composition's (m alpha_0 d, 0) holds exactly
    over all pairs of datasets; claiming half of it fails."""
    a0, m = 0.7, 4
    p = math.exp(a0) / (1 + math.exp(a0))
    P = np.array([[p, 1 - p], [1 - p, p]])
    D = np.array([[0.0, 1.0], [1.0, 0.0]])
    ok = audit_shuffled(P, D, m, lambda d: (m * a0 * d, 0.0))
    assert ok.passed
    assert not audit_shuffled(P, D, m, lambda d: (m * a0 * d / 2, 0.0)).passed


def test_statistical_audit_laplace(rng):
    """Laplace mechanism on neighbouring values 0 and 1 (sensitivity 1): the correct scale passes (0, eps)
    with delta = 0; half the noise scale and a sensitivity off by 2x are refuted."""
    n, eps = 60_000, 1.0
    p = laplace_noise(1.0 / eps, n, rng)
    q = 1.0 + laplace_noise(1.0 / eps, n, rng)
    assert audit_samples(p, q, eps, 0.0).passed
    half = (laplace_noise(0.5 / eps, n, rng), 1.0 + laplace_noise(0.5 / eps, n, rng))
    assert not audit_samples(*half, eps, 0.0).passed
    sens2 = (laplace_noise(1.0 / eps, n, rng), 2.0 + laplace_noise(1.0 / eps, n, rng))  # true sensitivity 2
    assert not audit_samples(*sens2, eps, 0.0).passed


def test_statistical_audit_priv_emd_linear(rng):
    """PrivEMDLinear (1-D, l = 1) on two one-item datasets at d_EM = 1: (alpha, 0) holds; a variant with half
    the noise is refuted."""
    from userdp.data import UserDataset
    from userdp.dem import priv_emd_linear

    alpha, n = 2.0, 40_000
    K = UserDataset.from_lists([[(0.0,)]] * n)
    Kp = UserDataset.from_lists([[(1.0,)]] * n)
    p = priv_emd_linear(K, 1.0, alpha, f_points=lambda x: x, rng=rng).extras["per_user"][:, 0]
    q = priv_emd_linear(Kp, 1.0, alpha, f_points=lambda x: x, rng=rng).extras["per_user"][:, 0]
    assert audit_samples(p, q, alpha * 1.0, 0.0).passed
    p2 = priv_emd_linear(K, 0.5, alpha, f_points=lambda x: x, rng=rng).extras["per_user"][:, 0]  # l claimed 0.5
    q2 = priv_emd_linear(Kp, 0.5, alpha, f_points=lambda x: x, rng=rng).extras["per_user"][:, 0]
    assert not audit_samples(p2, q2, alpha * 1.0, 0.0).passed


def test_statistical_audit_gaussian_delta(rng):
    from userdp.noise import analytic_gaussian_sigma

    eps, delta, n = 1.0, 1e-3, 60_000
    s = analytic_gaussian_sigma(1.0, eps, delta)
    assert audit_samples(gaussian_noise(s, n, rng), 1.0 + gaussian_noise(s, n, rng), eps, delta).passed
    assert not audit_samples(gaussian_noise(s / 2, n, rng), 1.0 + gaussian_noise(s / 2, n, rng), eps, delta).passed


@pytest.mark.parametrize("mechanism", ["gkrr", "exponential", "itemwise", "distinct", "laplace", "gaussian", "linear"])
def test_audit_cli(mechanism, capsys):
    from userdp.cli import main

    assert main(["audit", mechanism, "--trials", "20000", "--seed", "5"]) == 0
    assert "[PASS]" in capsys.readouterr().out

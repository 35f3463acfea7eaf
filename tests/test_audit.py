"""The auditor passes userdp's mechanisms and catches deliberately broken variants."""

from __future__ import annotations

import math

import numpy as np
import pytest

from userdp.audit import audit_itemwise, audit_randomizer, audit_samples, audit_shuffled, detection_limit
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


def _halve_composition(monkeypatch):
    """The broken variant, in the library: the item-wise accountant's composition route (``itemwise_bound``,
    which ``priv_emd_itemwise`` and ``itemwise_guarantee`` both use) claims half its alpha."""
    import dataclasses

    import userdp.dem.itemwise as itemwise

    true_bound = itemwise.itemwise_bound

    class Halved:
        def __init__(self, bound):
            self._bound = bound

        def __getattr__(self, name):
            return getattr(self._bound, name)

        def guarantee(self, metric: str = ""):
            g = self._bound.guarantee(metric)
            return dataclasses.replace(g, alpha=g.alpha / 2)

    def halved(*args, **kwargs):
        b = true_bound(*args, **kwargs)
        return Halved(b) if b.route == "composition" else b

    monkeypatch.setattr(itemwise, "itemwise_bound", halved)


@pytest.mark.parametrize("n", [None, 2])
def test_exact_shuffled_audit_composition_and_halved_alpha(n, monkeypatch):
    """PrivEMDItemWise as the library runs it: the guarantee priv_emd_itemwise returns (composition's
    (m alpha_0, 0) here, from itemwise_guarantee) against GKRR's own integer table, exactly over all pairs of
    3-item (local) or 2-item (central, with a second user) datasets. Halving the composition claim inside
    itemwise_guarantee is caught."""
    g = GKRR(ClusteredMetric(2, 2, 0.5), 0.7)
    m = 3 if n is None else 2
    ok = audit_itemwise(g, m, n)
    assert ok.passed, str(ok)
    assert "as returned by priv_emd_itemwise" in ok.claimed and f"({m * g.guarantee.alpha:.4g}, 0)" in ok.claimed
    _halve_composition(monkeypatch)
    assert not audit_itemwise(g, m, n).passed


def test_shuffled_audit_on_a_table():
    """audit_shuffled itself on binary randomized response, m = 4: (m alpha_0 d, 0) holds; half fails."""
    a0, m = 0.7, 4
    p = math.exp(a0) / (1 + math.exp(a0))
    P = np.array([[p, 1 - p], [1 - p, p]])
    D = np.array([[0.0, 1.0], [1.0, 0.0]])
    assert audit_shuffled(P, D, m, lambda d: (m * a0 * d, 0.0)).passed
    assert not audit_shuffled(P, D, m, lambda d: (m * a0 * d / 2, 0.0)).passed


def test_audit_cli_itemwise_runs_the_library(monkeypatch, capsys):
    """`userdp audit itemwise` audits priv_emd_itemwise's own guarantee: the halved composition claim in the
    library makes it exit 1."""
    from userdp.cli import main

    _halve_composition(monkeypatch)
    assert main(["audit", "itemwise"]) == 1
    assert "[FAIL]" in capsys.readouterr().out


def test_detection_limit_is_what_the_test_can_see():
    """The statistical audit cannot see a delta below its detection limit (about 1e-3 with 5e4 samples per
    input): a mechanism that leaks half the limit passes, one that leaks twice the limit is refuted.
    Outputs on 10 values plus one value only P reaches, with the leak's probability."""
    n, eps = 50_000, 1.0
    limit = detection_limit(n, n, eps, 0.0, bins=11)
    assert 5e-4 < limit < 2e-3
    gen = np.random.default_rng(11)

    def leaky(mass):
        p = gen.integers(0, 10, n).astype(float)
        p[gen.random(n) < mass] = 10.0  # a value Q never outputs: the divergence at any eps is `mass`
        return p, gen.integers(0, 10, n).astype(float)

    small = audit_samples(*leaky(limit / 2), eps, 0.0)
    assert small.passed and small.detection_limit == pytest.approx(limit)
    assert f"cannot refute delta below {limit:.2g}" in str(small)
    assert not audit_samples(*leaky(2 * limit), eps, 0.0).passed
    # more samples, a lower limit; a claimed delta raises it by about that delta
    assert detection_limit(10 * n, 10 * n, eps, 0.0, 11) < limit / 5
    assert detection_limit(n, n, eps, 1e-3, 11) == pytest.approx(limit + 1e-3, rel=0.2)


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


# nine statistical audits (about 10 s): the default tier checks the command's wiring
# (test_audit_cli_heatmap_audits_every_algorithm) and tests/heatmaps audits each algorithm
@pytest.mark.slow
def test_audit_cli_heatmap(capsys):
    """`userdp audit heatmap` audits every heatmap algorithm of `userdp heatmap`; all pass."""
    from userdp.cli import main

    assert main(["audit", "heatmap", "--trials", "4000", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert out.count("[PASS]") == 9 and "[FAIL]" not in out
    names = ("auto (userdp's default", "coarse-grid branch", "PrivTree-EMD", "adaptive grid", "hierarchy")
    for name in (*names, "sparse EMD", "dense EMD"):
        assert name in out


def test_audit_cli_heatmap_audits_every_algorithm(monkeypatch, capsys):
    """`userdp audit heatmap` runs ``audit_heatmap`` on each of the nine heatmap algorithms (each mechanism
    called, at epsilon 2 on a 2 x 2 grid), prints every result and exits 1 when any one fails. (``audit_heatmap``
    is replaced where the command's audit, :func:`userdp.audit.audit_every_heatmap`, looks it up.)"""
    import userdp.audit.mechanisms as audit_module
    from userdp.audit import AuditResult
    from userdp.cli import main

    calls = []

    def fake(mechanism, epsilon, *, shape, n, n_pilot, name, rng):
        calls.append(name)
        rel = mechanism(np.ones(shape), epsilon, rng=rng)
        assert np.asarray(rel.value).shape == shape and (epsilon, shape) == (2.0, (2, 2)) and 0 < n_pilot < n
        return AuditResult(name, "claim", "measured", not name.startswith("PrivTree ") and name != "PrivTree")

    monkeypatch.setattr(audit_module, "audit_heatmap", fake)
    assert main(["audit", "heatmap", "--trials", "2000", "--seed", "5"]) == 1
    out = capsys.readouterr().out
    assert len(calls) == 9 and out.count("[PASS]") == 8 and out.count("[FAIL]") == 1
    names = ("auto (userdp's default", "coarse-grid branch", "PrivTree-EMD", "adaptive grid", "hierarchy")
    for name in (*names, "sparse EMD", "dense EMD", "Laplace per cell"):
        assert any(name in c for c in calls), name


def test_hockey_stick_is_the_larger_of_both_directions():
    """``hockey_stick`` is ``max(D_{e^eps}(P||Q), D_{e^eps}(Q||P))``, each the definition's supremum over
    output sets ``sup_S P(S) - e^eps Q(S)`` (brute force over every subset here): a divergence only the reverse
    direction shows (a value Q reaches and P never does) is not missed."""
    from itertools import product

    from userdp.audit import hockey_stick

    P, Q = np.array([0.5, 0.5, 0.0]), np.array([0.5, 0.3, 0.2])
    for eps in (0.0, math.log(2), 1.5):
        sup = 0.0
        for mask in product((0, 1), repeat=3):
            S = np.array(mask, dtype=bool)
            sup = max(sup, P[S].sum() - math.exp(eps) * Q[S].sum(), Q[S].sum() - math.exp(eps) * P[S].sum())
        assert hockey_stick(P, Q, eps) == pytest.approx(sup, abs=1e-15)
    assert hockey_stick(P, Q, math.log(2)) == pytest.approx(0.2)  # only Q -> P: the third value


# --------------------------------------------------------------------------------------------
# Per-key aggregates: the exact step-by-step audit of the default path, and broken variants caught
# --------------------------------------------------------------------------------------------

AGG_TINY = [
    [[("a", 0.0), ("b", 2.0)], [("a", 2.0), ("b", 0.5)], [("a", 1.0), ("b", 1.0)]],
    [[("a", 0.25)] * 4 + [("b", 1.5)] * 4, [("a", 2.0), ("b", 0.0)]],
    [[("a", 0.3), ("a", 1.0)], [("b", 0.75)]],
]


def _agg_audit(given: bool):
    from userdp.audit import audit_aggregate

    if given:  # the range given: the quantiles' grid and draws see the values
        return audit_aggregate(AGG_TINY, 1.0, stats=("count", "mean", "quantile:0.1,0.9"), value_domain=None,
                               value_range=(0.0, 2.0), l0s=(1, 2), linfs=(1, 4), seeds=(0,))  # fmt: skip
    return audit_aggregate(AGG_TINY, 1.0, stats=("users", "variance"), value_domain=(0.0, 2.0), l0s=(1, 2),
                           linfs=(1, 4), seeds=(0,))  # fmt: skip


def _by_step(results):
    return {r.mechanism.split(": ", 1)[1]: r for r in results}


def test_the_aggregates_audit_passes_every_step_of_the_default_path(monkeypatch):
    """``userdp audit aggregate``: every step (GEM's bounds, the range, N, U, S1, S2, the quantiles' grid and each
    level's per-key draws) within its stated share, exactly, and the shares adding up to the guarantee."""
    import userdp.audit as audit
    from userdp.cli.main import main

    got: list = []
    real = audit.audit_aggregate_release
    monkeypatch.setattr(audit, "audit_aggregate_release", lambda: got.extend(real()) or list(got))
    assert main(["audit", "aggregate"]) == 0  # the command runs this audit and exits 0 when every step passes
    results = got
    assert all(r.passed for r in results), "\n".join(map(str, results))
    steps = [r.mechanism.split(": ", 1)[1] for r in results]
    for s in ("bounds", "range", "N", "U", "S1", "S2", "quantile_resolution", "Q0.1", "Q0.9", "the shares"):
        assert s in steps
    # the audit is tight where the mechanism is: the noisy sums' exact loss is their share
    n = _by_step(results[:10])["N"]
    assert "epsilon = 0.1 (exact law)" in n.measured


def _halve_arg(monkeypatch, module, name, position):
    real = getattr(module, name)

    def halved(*args, **kw):
        args = list(args)
        args[position] = args[position] / 2
        return real(*args, **kw)

    monkeypatch.setattr(module, name, halved)


@pytest.mark.parametrize("variant", ["quantile", "laplace", "range", "resolution", "bounds"])
def test_the_aggregates_audit_catches_a_halved_sensitivity(monkeypatch, variant):
    """A halved sensitivity monkeypatched into the library -- each key's quantile draw, the noisy sums' Laplace,
    the range's scores, the quantiles' grid's scores, GEM's normalized scores (a halved sensitivity is a doubled
    score) -- fails that step's audit and only that step's."""
    import importlib

    agg = importlib.import_module("userdp.releases.aggregate")
    mech = importlib.import_module("userdp.vocabulary.aggregates")
    gem = importlib.import_module("userdp.distinct.release")
    if variant == "quantile":
        _halve_arg(monkeypatch, agg, "exponential_mechanism", 1)
    elif variant == "laplace":
        _halve_arg(monkeypatch, agg, "integer_laplace", 1)
    else:
        module, name = {"range": (mech, "range_scores"), "resolution": (mech, "quantile_scores"),
                        "bounds": (gem, "gem_scores")}[variant]  # fmt: skip
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, real=real: 2 * real(*a))
    if variant == "range":  # a public target held fixed (so not N / 2, which halves how far the scores move on
        # a few persons): the scores then move by a person's whole L0 Linf kept values, and doubled, by twice that
        monkeypatch.setattr(agg, "range_threshold", lambda *a: 0.5)
        monkeypatch.setattr(mech, "range_resolution", lambda *a: 0.5)
    failed = {k for k, r in _by_step(_agg_audit(given=variant in ("quantile", "resolution"))).items() if not r.passed}
    want = {"quantile": {"Q0.1", "Q0.9"}, "laplace": {"N", "U", "S1", "S2"}, "range": {"range"},
            "resolution": {"quantile_resolution"}, "bounds": {"bounds"}}[variant]  # fmt: skip
    assert failed == want, failed


def test_the_aggregates_audit_catches_a_doubled_share(monkeypatch):
    """Each quantile level given twice its share (stated and spent, as a plan that over-splits would): every step
    is within what it states, but the shares add up to more than the guarantee."""
    import importlib

    agg = importlib.import_module("userdp.releases.aggregate")
    real = agg.plan_aggregate

    def doubled(*a, **k):
        plan = real(*a, **k)
        return {**plan, "epsilon_quantile": 2 * plan["epsilon_quantile"]}

    monkeypatch.setattr(agg, "plan_aggregate", doubled)
    results = _by_step(_agg_audit(given=True))
    assert results["Q0.9"].passed and not results["the shares"].passed

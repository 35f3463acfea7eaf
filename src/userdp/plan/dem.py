"""Plans of the d_EM-DP releases (Imola et al.): PrivEMDLinear (:func:`userdp.releases.linear`) and frequency
estimation with GKRR (:func:`userdp.releases.frequency`).

* :func:`linear` -- the noise of the released average query. Its law is the release's own: the K-norm
  noise of Lemma 4.2's scale ``lipschitz / alpha`` (central: ``lipschitz / (n alpha)``), or the Gaussian
  variant's ``sigma``, on the lattice the sampler draws. Central: the quantiles of the noise's norm,
  estimated from 200,000 draws of the library's own sampler (seeded). Local: the average of ``n`` users'
  noise, simulated exactly (400 averages of ``n`` draws) up to ``n = 5,000`` and by the normal law of the
  average above (the central limit theorem; its per-coordinate variance from the sampler's draws).
  The error of the query itself (none: PrivEMDLinear is unbiased) and of BoundedEMDReduction's sampling
  (data-dependent) are not included.
* :func:`frequency` -- the d_EM error of FreqEstLocal's estimate (Algorithm 4; central: Corollary 6.8).
  Theorem 6.6's Eq. (9) (central: Corollary 6.8) bounds its expectation at the calibrated ``alpha_0``; the
  prediction is the calibrated simulation: a public (or uniform) histogram of ``n m`` items, each item
  randomized by the exact GKRR law userdp draws (multinomial counts per true item), estimated and
  projected as the release does, and measured by the same ``d_EM`` (:func:`userdp.dem.demd_error`).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError
from .common import Prediction, confidences, simulated_quantile, smallest_reaching

__all__ = ["frequency", "frequency_alpha", "linear", "linear_alpha"]

_DRAWS = 200_000
#: The Zipf exponents of the stand-in histograms a frequency plan cycles through when none is given (0: the
#: uniform one): the real histogram is not public, and the error at a small alpha grows with its
#: concentration (on Foursquare's check-in regions the uniform stand-in alone was exceeded in 40% of releases at
#: alpha 25 and 50).
STAND_IN_ZIPF = (0.0, 1.0, 1.5)
#: What the stand-in histograms cannot show: the real check-in regions' 90% quantile lay up to 1.05x above
#: the mixture's (alpha 25-100, 40 releases each); the quantiles above the median of a plan without a given
#: histogram are stated this many times the simulated ones.
MARGIN = 1.15
_REPS = 400
_EXACT_LOCAL = 5_000


def _linear_noise(alpha: float, lipschitz: float, persons: int, dim: int, norm: str, model: str,
                  delta: float | None, seed: int) -> tuple[np.ndarray, str, bool]:  # fmt: skip
    """Samples of the released average's error norm (l2 in ``dim`` dimensions)."""
    from ..noise import calibrate_gaussian_metric, calibrate_knorm, lattice_knorm_noise

    central = model == "central"
    sens = lipschitz / persons if central else lipschitz
    rng = np.random.default_rng(seed)
    if delta is not None:
        sigma = calibrate_gaussian_metric(sens, alpha, delta, dim=dim).sigma
        if not central:
            sigma /= math.sqrt(persons)
        draws = sigma * np.linalg.norm(rng.standard_normal((_DRAWS, dim)), axis=1)
        return draws, f"the lattice Gaussian's width (sigma {sigma:.4g}) as a normal law", False
    cal = calibrate_knorm(sens, alpha, norm, dim)
    g = cal.granularity  # (randomized rounding to the lattice adds at most one step g more)
    z = g * np.asarray(lattice_knorm_noise(cal, _DRAWS, rng=seed), dtype=np.float64).reshape(_DRAWS, dim)
    if central:
        return np.linalg.norm(z, axis=1), f"200,000 draws of the lattice K-norm sampler (scale {cal.scale:.4g})", True
    if persons <= _EXACT_LOCAL:
        m = g * np.asarray(lattice_knorm_noise(cal, _REPS * persons, rng=seed + 1), dtype=np.float64)
        means = m.reshape(_REPS, persons, dim).mean(axis=1)
        return np.linalg.norm(means, axis=1), f"{_REPS} averages of {persons} users' lattice K-norm noise", True
    sd = z.std(axis=0) / math.sqrt(persons)
    draws = np.linalg.norm(rng.standard_normal((_DRAWS, dim)) * sd, axis=1)
    return draws, f"the normal law of the average of {persons} users' K-norm noise (scale {cal.scale:.4g})", False


def linear(
    alpha: float,
    *,
    persons: int,
    lipschitz: float = 1.0,
    dim: int = 1,
    norm: str = "l2",
    model: str = "local",
    delta: float | None = None,
    samples: int | None = None,
    r: float = 0.05,
    confidence: float = 0.9,
    seed: int = 0,
) -> Prediction:
    """The predicted error ``||released - q_f||_2`` of :func:`userdp.releases.linear` (PrivEMDLinear, Algorithm
    1) in the query's units, from public sizes: ``persons`` users, a ``dim``-dimensional query with the given
    Lipschitz bound. ``samples`` and ``r`` are BoundedEMDReduction's (the noise is then calibrated for the
    inner target, as the release does; the sampling error is not included)."""
    from ..dem.linear import _check_linear
    from ..releases.request import plan_request

    cs = confidences(confidence)
    n, d = int(persons), int(dim)
    if n < 1 or d < 1:
        raise ParameterError("persons and dim must be at least 1")
    if model not in ("local", "central"):
        raise ParameterError(f"model must be local or central, got {model!r}")
    req = plan_request(alpha, delta, samples, r)
    inner_delta = req.inner_delta or None
    _check_linear(lipschitz, req.inner_alpha, norm, inner_delta)
    draws, basis, exact = _linear_noise(req.inner_alpha, float(lipschitz), n, d, norm, model, inner_delta, seed)
    qs = {c: float(np.quantile(draws, c)) for c in cs}
    extra = {"mean": float(draws.mean()), "inner alpha": req.inner_alpha}
    quantity = "||released average - true average||"
    return Prediction("PrivEMDLinear", quantity, qs, exact, basis + " (Lemma 4.2's scale)", extra)


def linear_alpha(target: float, confidence: float = 0.9, **kwargs) -> float:
    """The smallest alpha (to 1%) at which :func:`linear`'s error is at most ``target`` with probability
    ``confidence``."""
    return smallest_reaching(linear, target, confidence, 1e-3, 1e6, **kwargs)


def frequency(
    alpha: float,
    *,
    persons: int,
    items_per_person: int,
    clusters: int | None = None,
    cluster_size: int | None = None,
    r: float | None = None,
    space: object | None = None,
    randomizer: str = "auto",
    delta: float | None = None,
    model: str = "local",
    truth: np.ndarray | None = None,
    confidence: float = 0.9,
    reps: int = 100,
    seed: int = 0,
) -> Prediction:
    """The predicted ``d_EM`` error of :func:`userdp.releases.frequency` (FreqEstLocal, Algorithm 4) for
    ``persons`` users holding ``items_per_person`` items each (public under bounded d_EM-DP), on the
    clustered metric of ``clusters`` clusters of ``cluster_size`` items at distance ``r`` within a cluster,
    or on any finite metric ``space``; ``randomizer`` as in the release (GKRR on a clustered metric, the
    exponential randomizer on others).

    Each simulated release randomizes every item of a public stand-in histogram ``truth`` (default: the
    uniform histogram and concentrated ones, Zipf weights of exponent 1 and 1.5 in a seeded order, in turn:
    :data:`STAND_IN_ZIPF`) by the randomizer's exact transition law (multinomial counts per true item), with
    the randomizer and calibration the release uses (:func:`userdp.dem.frequency.frequency_randomizer`), then estimates
    (:func:`userdp.dem.frequency.unbiased_estimate`) and projects as the release does. ``extra["theorem"]``
    is Theorem 6.6's Eq. (9) at the calibrated ``alpha_0`` (central: Corollary 6.8) for GKRR, and None for
    the exponential randomizer (the paper bounds no other randomizer in closed form); ``extra["theorem
    eq8"]`` is Theorem 6.5's Eq. (8) computed from the randomizer's own transition matrix
    (:func:`userdp.dem.frequency.theorem_6_5_bound`) for any randomizer on a clustered metric (None on
    other metrics, where the theorem does not apply)."""
    from ..dem.frequency import (
        demd_error,
        frequency_randomizer,
        project_simplex,
        theorem_6_5_bound,
        unbiased_estimate,
    )
    from ..dem.randomizers import GKRR
    from ..metrics import ClusteredMetric

    cs = confidences(confidence)
    n, m = int(persons), int(items_per_person)
    if min(n, m) < 1:
        raise ParameterError("persons and items_per_person must be at least 1")
    if model not in ("local", "central"):
        raise ParameterError(f"model must be local or central, got {model!r}")
    if space is None:
        if clusters is None or cluster_size is None or r is None:
            raise ParameterError("give the metric: space=, or clusters, cluster_size and r of a clustered metric")
        space = ClusteredMetric(int(clusters), int(cluster_size), float(r))
    rz, cal = frequency_randomizer(space, float(alpha), float(delta or 0.0), m, n if model == "central" else None,
                                   randomizer)  # fmt: skip
    k = space.size
    if truth is not None:
        given = np.asarray(truth, dtype=np.float64)
        if given.shape != (k,) or np.any(given < 0) or not given.sum() > 0:
            raise ParameterError(f"the stand-in histogram needs {k} non-negative weights")
    a = rz.transition_matrix()
    a = a / a.sum(axis=1, keepdims=True)  # (float rounding of the rows)
    rng = np.random.default_rng(seed)
    errs = np.empty(int(reps))
    for i in range(int(reps)):
        if truth is not None:
            p = given
        else:  # in turn: uniform, and Zipf weights of exponent 1 and 1.5 on the items in a seeded order
            p = np.empty(k)
            p[rng.permutation(k)] = 1.0 / np.arange(1, k + 1) ** STAND_IN_ZIPF[i % len(STAND_IN_ZIPF)]
        counts = np.floor(p / p.sum() * n * m).astype(np.int64)
        counts[: n * m - int(counts.sum())] += 1  # n m items in all
        true_hist = counts / counts.sum()
        v = np.zeros(k)
        for x in np.flatnonzero(counts):
            v += rng.multinomial(counts[x], a[x])
        errs[i] = demd_error(project_simplex(unbiased_estimate(rz, v / v.sum())[0]), true_hist, space)
    margin = MARGIN if truth is None else 1.0
    qs = {c: simulated_quantile(errs, c) * (margin if c > 0.5 else 1.0) for c in cs}
    a0 = rz.realized_alpha0
    bound = None
    if isinstance(rz, GKRR):  # Theorem 6.6, Eq. (9), at the calibrated alpha_0 (central: Corollary 6.8)
        s_, t_, r_ = space.n_clusters, space.cluster_size, space.r
        e0, e1 = math.exp(a0), math.exp((1 - r_) * a0)
        bound = r_ * math.sqrt(s_ * t_**3 / (m * n)) * (e0 + s_) / (e0 - e1) + math.sqrt(
            s_**2 * t_**2 / (m * n)
        ) * (math.sqrt(s_ + 2 * (e0 - 1)) / (e0 + (t_ - 1) * e1 - t_))
    name = "GKRR" if isinstance(rz, GKRR) else "the exponential randomizer"
    # Theorem 6.5's Eq. (8) for whichever randomizer the release uses, on a clustered metric
    eq8 = theorem_6_5_bound(rz.transition_matrix(), space, m * n) if isinstance(space, ClusteredMetric) else None
    extra = {"alpha0": a0, "route": cal.route, "theorem": bound, "theorem eq8": eq8, "mean": float(errs.mean())}
    stand_in = "a given histogram" if truth is not None else "uniform and concentrated (Zipf 1, 1.5) histograms in turn"
    basis = (
        f"{int(reps)} simulated releases: {n * m} items of {stand_in} through {name}'s exact law "
        f"(alpha_0 = {a0:.4g}), estimated and projected as the release does"
        + (f"; quantiles above the median times {margin:g}, the stand-ins' measured shortfall" if margin > 1 else "")
    )
    return Prediction(f"frequency ({name})", "d_EM(estimate, true histogram)", qs, False, basis, extra)


def frequency_alpha(target: float, confidence: float = 0.9, **kwargs) -> float:
    """The smallest alpha (to 1%) at which :func:`frequency`'s d_EM error is at most ``target`` with
    probability ``confidence`` (40 simulated releases per alpha unless ``reps`` is given)."""
    return smallest_reaching(frequency, target, confidence, 1e-2, 1e4, **{"reps": 40, **kwargs})

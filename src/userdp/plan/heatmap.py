"""Plan of the DP heatmap (Ghazi et al., AAAI 2023; :func:`userdp.releases.heatmap`).

Theorem 3.1 states the order of the sparse EMD aggregation's error only: with probability 0.99 a
``(lambda, O(sqrt(k) / (lambda eps n)))``-approximation for ``k``-sparse inputs, constants unstated. A
number a user can read needs more, so :func:`heatmap` is a calibrated simulation: synthetic users of the
same public sizes (``persons``, points per person, the grid), their locations drawn from a public stand-in
density (a previous year's map, a population grid, or a previous DP release: all public), or by default
from a seeded mixture of ``clusters`` blobs; every simulated release runs the release's own mechanism step
(:func:`userdp.releases.heatmap_of_grid`) and is measured by the exact grid EMD between the normalized true
and released heatmaps (:func:`userdp.heatmaps.heatmap_emd`), the paper's error.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError
from .common import Prediction, confidences, simulated_quantile, smallest_reaching

__all__ = ["heatmap", "heatmap_epsilon", "synthetic_grid_sum"]

#: The stand-in shapes a plan mixes over when the data's are not given: ``(clusters, places)`` pairs, from
#: a few hot spots and users who keep to one place to many hot spots and users who roam. On Foursquare's
#: Midtown at 256 cells the real check-ins (5,340 occupied cells for 1,008 users) lie between 20 blobs with
#: 3 places (EMD 0.026, the old single stand-in, whose 90% bound the release exceeded in most runs) and 80
#: blobs with 10 places (0.028).
STAND_INS = tuple((c, p) for c in (5, 20, 80) for p in (1, 3, 10))

#: What the stand-ins cannot show: at a large epsilon the real check-ins' EMD lies above every stand-in's (on
#: Foursquare at epsilon 4, up to 1.1x the mixture's 90% quantile, at 64 and 256 cells). The quantiles above the
#: median are stated this many times the simulated ones.
MARGIN = 1.25


def _blobs(shape: tuple[int, int], clusters: int, rng: np.random.Generator) -> np.ndarray:
    """A seeded density on the grid: ``clusters`` Gaussian blobs with Zipf weights and widths of 1-5% of the
    longer side, over a 5% uniform floor."""
    rows, cols = shape
    y, x = np.mgrid[0:rows, 0:cols]
    dens = np.full(shape, 0.05 / (rows * cols))
    side = max(rows, cols)
    weights = 1.0 / np.arange(1, clusters + 1)
    weights *= 0.95 / weights.sum()
    for wgt in weights:
        cy, cx = rng.uniform(0, rows), rng.uniform(0, cols)
        sd = rng.uniform(0.01, 0.05) * side
        blob = np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / (2 * sd**2))
        dens += wgt * blob / blob.sum()
    return dens / dens.sum()


def synthetic_grid_sum(
    shape: tuple[int, int],
    persons: int,
    points_per_person: float,
    density: np.ndarray | None = None,
    places: int = 3,
    clusters: int = 20,
    seed: int = 0,
) -> np.ndarray:
    """The grid sum ``s = sum_i p_i`` of ``persons`` synthetic users, each with a lognormal number of points
    (mean ``points_per_person``, sigma 1, at least 1) spread evenly at random over ``places`` cells drawn
    from ``density`` (default: :func:`_blobs` of ``clusters`` blobs). ``p_i`` is user ``i``'s points as a
    distribution, as the engines compute it."""
    rows, cols = int(shape[0]), int(shape[1])
    n, m = int(persons), float(points_per_person)
    if n < 1 or not m >= 1 or int(places) < 1:
        raise ParameterError("persons, points_per_person and places must be at least 1")
    rng = np.random.default_rng(seed)
    dens = _blobs((rows, cols), int(clusters), rng) if density is None else np.asarray(density, dtype=np.float64)
    if dens.shape != (rows, cols) or np.any(dens < 0) or not dens.sum() > 0:
        raise ParameterError(f"the stand-in density needs shape {(rows, cols)} and non-negative weights")
    prob = (dens / dens.sum()).reshape(-1)
    pts = np.maximum(1, np.round(rng.lognormal(math.log(m) - 0.5, 1.0, n))).astype(np.int64)
    spots = rng.choice(prob.size, size=(n, int(places)), p=prob)
    which = rng.integers(0, int(places), size=int(pts.sum()))
    owner = np.repeat(np.arange(n), pts)
    cells = spots[owner, which]
    s = np.bincount(cells, weights=1.0 / pts[owner], minlength=prob.size)
    return s.reshape(rows, cols)


def heatmap(
    epsilon: float,
    *,
    shape: tuple[int, int],
    persons: int,
    points_per_person: float,
    algorithm: str = "auto",
    density: np.ndarray | None = None,
    places: int | None = None,
    w: int = 20,
    n_public: float | None = None,
    confidence: float = 0.9,
    reps: int = 18,
    seed: int = 0,
    clusters: int | None = None,
) -> Prediction:
    """The predicted EMD between the normalized true and released heatmaps of :func:`userdp.releases.heatmap`
    on a ``shape`` grid, for ``persons`` users with ``points_per_person`` points on average (public
    estimates), by ``reps`` simulated releases (:func:`synthetic_grid_sum`, then the release's mechanism).
    ``extra["theorem order"]`` is Theorem 3.1's ``sqrt(w) / (eps n)`` (constants unstated in the paper).

    The data's shape is uncertain, and the error moves with it by up to 2x, so the simulated releases cycle
    through stand-ins (:data:`STAND_INS`): ``clusters`` blobs (or the public ``density``) and users keeping
    to ``places`` cells each. Give ``clusters`` (about the number of hot spots of the map: 5 for a few
    landmarks, 80 for a dense city) and ``places`` (the cells a typical user visits: 1 for a home location, 10
    for someone who roams) when public knowledge tells them; each one given narrows the mixture."""
    from ..heatmaps import heatmap_emd
    from ..releases.heatmap import ALGORITHMS, heatmap_of_grid

    cs = confidences(confidence)
    eps = float(epsilon)
    if not (math.isfinite(eps) and eps > 0):
        raise ParameterError(f"epsilon must be positive and finite, got {epsilon!r}")
    if algorithm not in ALGORITHMS:
        raise ParameterError(f"unknown heatmap algorithm {algorithm!r}; use one of {', '.join(ALGORITHMS)}")
    if int(reps) < 2:
        raise ParameterError("at least 2 simulated releases are needed")
    for name, v in (("clusters", clusters), ("places", places)):
        if v is not None and not 1 <= int(v) <= 10**6:
            raise ParameterError(f"{name} must be a whole number >= 1, got {v!r}")
    mix = list(dict.fromkeys(
        (c if clusters is None else int(clusters), p if places is None else int(places)) for c, p in STAND_INS
    ))  # fmt: skip
    if density is not None:  # a public density: only the places are uncertain
        mix = list(dict.fromkeys((0, p) for _, p in mix))
    errs = np.empty(int(reps))
    for i in range(int(reps)):
        k, pl = mix[i % len(mix)]
        s = synthetic_grid_sum(shape, persons, points_per_person, density, pl, clusters=max(1, k), seed=seed + i)
        rel = heatmap_of_grid(s, eps, algorithm, w=w, n_public=n_public, rng=seed + 10_000 + i)
        errs[i] = heatmap_emd(s, rel.value)
    qs = {c: simulated_quantile(errs, c) * (MARGIN if c > 0.5 else 1.0) for c in cs}
    extra = {"mean": float(errs.mean()), "theorem order": math.sqrt(w) / (eps * int(persons))}
    shapes = "; ".join(f"{k} blobs, {pl} places" if k else f"{pl} places" for k, pl in mix)
    stand_in = "the given density" if density is not None else "seeded mixtures of blobs"
    basis = (f"{int(reps)} simulated releases ({algorithm}) of {persons} synthetic users on {stand_in}, cycling "
             f"through {len(mix)} stand-in shapes ({shapes}), measured by the exact grid EMD; quantiles above the "
             f"median times {MARGIN:g}, the stand-ins' measured shortfall")  # fmt: skip
    return Prediction("heatmap", "EMD(true heatmap, released heatmap), both normalized", qs, False, basis, extra)


def heatmap_epsilon(target: float, confidence: float = 0.9, **kwargs) -> float:
    """The smallest epsilon (to 1%) at which :func:`heatmap`'s EMD is at most ``target`` with probability
    ``confidence`` (18 simulated releases per epsilon, one or two per stand-in, unless ``reps`` is given)."""
    return smallest_reaching(heatmap, target, confidence, 1e-2, 100.0, **{"reps": 18, **kwargs})

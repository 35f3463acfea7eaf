"""Exact laws read off the library's own samplers, and privacy profiles computed from the definitions, for the
d_EM tests (:mod:`tests.dem`, :mod:`tests.releases.test_dem`).

The samplers draw their uniform numbers from a :class:`~userdp.noise.RandomSource`; the sources here hand them
chosen values instead. A sweep of the real sampler over an even grid of its uniform draw locates every output's
interval of draws, and bisection finds each interval's ends exactly, so the law is the sampler's own, exactly
(:func:`law_of_uniform`), and a test compares it, not a table or a parameter the library reports, with the
paper's definition.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

from userdp.noise import RandomSource

GRID = 1 << 16
"""Points of the uniform grid that locates a sampler's pieces (each piece is then measured exactly)."""


def _grid(high, size: int) -> np.ndarray:
    """``size`` evenly spaced integers in ``[0, high)`` (one per grid cell, at the cell's middle)."""
    i = np.arange(size, dtype=np.float64)
    return np.floor((i + 0.5) / size * np.asarray(high, dtype=np.float64)).astype(np.int64)


class GridWords(RandomSource):
    """A source whose first :meth:`words` call returns ``values`` (then zeros): a sampler that reads one word
    per item and accepts it (GKRR, below its total) maps ``values[i]`` to item ``i``'s output."""

    def __init__(self, values: np.ndarray) -> None:
        super().__init__(0)
        self._values: np.ndarray | None = np.asarray(values, dtype=np.uint64)

    def words(self, n: int) -> np.ndarray:
        out = np.zeros(int(n), dtype=np.uint64)
        if self._values is not None:
            v, self._values = self._values[: int(n)], None
            out[: v.size] = v
        return out


class FixedIntegers(RandomSource):
    """A source whose :meth:`integers` returns the given values once: the uniform draws of an inverse-CDF
    sampler (:func:`userdp.noise.sample_cumulative`), one per item."""

    def __init__(self, values: np.ndarray) -> None:
        super().__init__(0)
        self._values = np.asarray(values, dtype=np.int64)

    def integers(self, high, size=None):
        return self._values


def law_of_uniform(sample, total: int, k: int, grid: int = GRID) -> np.ndarray:
    """The exact law of ``sample(u)`` (outputs in ``0..k-1``) for ``u`` uniform on ``[0, total)``, where
    ``sample`` maps an array of ``u`` to the sampler's outputs and is piecewise constant in ``u``.

    The outputs on an even grid of ``grid`` points locate every change; each change is then found exactly by
    bisection between its two grid points, and the law is the lengths of the pieces over ``total``: exact as
    long as every piece is longer than ``total / grid`` (a shorter one met between two grid points is an
    error, not a silent mistake, unless the same output comes back on both sides of it)."""
    u = np.unique(np.concatenate([_grid(total, grid), [0, total - 1]]))
    out = np.asarray(sample(u))
    gaps = np.flatnonzero(out[1:] != out[:-1])
    lo, hi = u[gaps], u[gaps + 1]  # out(lo) != out(hi): the change lies in (lo, hi]
    left = out[gaps]
    while np.any(hi - lo > 1):
        mid = lo + (hi - lo) // 2  # (no overflow near 2^63)
        same = np.asarray(sample(mid)) == left
        lo, hi = np.where(same, mid, lo), np.where(same, hi, mid)
    if not np.array_equal(np.asarray(sample(hi)), out[gaps + 1]):
        raise AssertionError("an output's interval is shorter than a grid step: use a finer grid")
    cuts = np.concatenate([[0], hi, [total]])
    pieces = np.concatenate([out[gaps], [out[-1]]])
    law = np.zeros(k)
    np.add.at(law, pieces, np.diff(cuts).astype(np.float64))
    return law / total


def gkrr_law(gk, grid: int = GRID) -> np.ndarray:
    """``P[x, y]`` of :meth:`userdp.dem.GKRR.randomize` as it samples (:func:`law_of_uniform` of its one accepted
    word per item, ``0 <= w < total``)."""
    k = gk.space.size

    def sampler(x: int):
        return lambda w: gk.randomize(np.full(w.size, x), GridWords(w.astype(np.uint64)))

    return np.array([law_of_uniform(sampler(x), gk.total, k, grid) for x in range(k)])


def exponential_law(rz, grid: int = GRID) -> np.ndarray:
    """``P[x, y]`` of :meth:`userdp.dem.ExponentialRandomizer.randomize` as it samples (:func:`law_of_uniform` of
    its one uniform draw per item, below the row's total weight)."""
    k = rz.space.size
    totals = rz._cum[:, -1]  # (the range of its uniform draw)

    def sampler(x: int):
        return lambda u: rz.randomize(np.full(u.size, x), FixedIntegers(u))

    return np.array([law_of_uniform(sampler(x), int(totals[x]), k, grid) for x in range(k)])


def paper_gkrr_law(s: int, t: int, r: float, alpha0: float) -> np.ndarray:
    """Section 6.2's GKRR on ``s`` clusters of ``t`` items: ``P(x -> x) ∝ e^alpha0``, ``P(x -> x') ∝
    e^((1 - r) alpha0)`` in x's cluster, ``∝ 1`` elsewhere."""
    k = s * t
    cl = np.arange(k) // t
    W = np.where(cl[:, None] == cl[None, :], math.exp((1 - r) * alpha0), 1.0)
    W[np.diag_indices(k)] = math.exp(alpha0)
    return W / W.sum(axis=1, keepdims=True)


def exact_loss(P: np.ndarray, D: np.ndarray) -> float:
    """``max_{x != x', y} ln(P[x, y] / P[x', y]) / d(x, x')`` (inf where an output is impossible from one input
    only)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        logP = np.log(P)
        diff = logP[:, None, :] - logP[None, :, :]
    diff = np.where(np.isnan(diff), -np.inf, diff)  # (both impossible: no loss)
    loss = diff.max(axis=2)
    mask = D > 0
    return float((loss[mask] / D[mask]).max())


def gaussian_delta(sigma: float, distance: float, epsilon: float) -> float:
    """The exact ``delta(epsilon)`` of the Gaussian mechanism of standard deviation ``sigma`` on two inputs at
    l2 distance ``distance`` (Balle & Wang 2018, Theorem 8): any claim below it is false."""
    if distance <= 0:
        return 0.0
    a, b = distance / (2 * sigma), epsilon * sigma / distance
    return float(norm.cdf(a - b) - math.exp(epsilon) * norm.cdf(-a - b))


def zcdp_to_delta(rho: float, epsilon: float) -> float:
    """``delta`` at ``epsilon`` of a ``rho``-zCDP mechanism: ``min_a exp((a-1)(a rho - eps)) (a-1)^(a-1) / a^a``
    (Canonne, Kamath & Steinke 2020, Proposition 12) over a dense grid of orders ``a`` (every order is a valid
    bound)."""
    if rho <= 0:
        return 0.0
    a = 1 + np.exp(np.linspace(-25.0, 60.0, 20_001))
    with np.errstate(over="ignore", invalid="ignore"):
        ld = (a - 1) * (a * rho - epsilon) + (a - 1) * np.log1p(-1 / a) - np.log(a)
    return float(min(1.0, math.exp(np.nanmin(ld))))


class Spy:
    """Wraps a library function (``monkeypatch.setattr(module, name, Spy(real))``): calls it unchanged and keeps
    every call's arguments and result, so a test reads what a release handed its sampler."""

    def __init__(self, fn) -> None:
        self.fn, self.calls = fn, []

    def __call__(self, *args, **kwargs):
        out = self.fn(*args, **kwargs)
        self.calls.append((args, kwargs, out))
        return out

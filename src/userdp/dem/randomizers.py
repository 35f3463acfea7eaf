"""Item-level ``alpha_0``-``d_X``-DP randomizers (the mechanism ``A`` of Algorithm 2, Imola et al.).

Each randomizer states its guarantee (:class:`userdp.privacy.ItemMetricDP`, Definition 2.3:
``P[A(x) = y] <= e^{alpha_0 d(x, x')} P[A(x') = y]``).

Finite randomizers sample from **integer weight tables**, so their privacy loss is a property of a
table of integers that the code computes exactly (``realized_alpha0``) and the tests check; the
requested ``alpha_0`` is never exceeded. Randomizers on points (planar Laplace, K-norm on embeddings)
release ``g (randomized_round(x / g) + Z)`` with ``Z`` exact lattice K-norm noise
(:func:`userdp.noise.knorm_release`): every lattice point is a possible output from every input, and the
log-ratio for two points at distance ``d`` is at most ``alpha_0 d`` at every distance (the realized
``alpha_0``, slightly below the requested one, is what the guarantee states).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np
from numba import njit

from ..errors import DataError, ParameterError
from ..metrics.spaces import ClusteredMetric, EuclideanMetric, FiniteSpace
from ..noise import KeyedBatch, RngLike, calibrate_knorm, knorm_release, resolve_rng, sample_cumulative
from ..privacy.guarantees import ItemMetricDP

__all__ = ["ItemRandomizer", "GKRR", "ExponentialRandomizer", "PlanarLaplace", "KNormRandomizer"]

_TOP = 1 << 62


def _check_alpha0(alpha0: float) -> float:
    a = float(alpha0)
    if not (math.isfinite(a) and a > 0):
        raise ParameterError(f"alpha_0 must be positive and finite, got {alpha0!r}")
    if a > 40:
        raise ParameterError(f"alpha_0 = {a} is too large for an item randomizer (at most 40)")
    return a


class ItemRandomizer(ABC):
    """An item-level metric-DP randomizer."""

    alpha0: float

    @property
    @abstractmethod
    def guarantee(self) -> ItemMetricDP:
        """Its item-level guarantee."""

    @abstractmethod
    def randomize(self, items: np.ndarray, rng: RngLike = None) -> np.ndarray:
        """Apply the randomizer independently to every item."""


# --------------------------------------------------------------------------------------------
# GKRR on the clustered metric
# --------------------------------------------------------------------------------------------


@njit(cache=True)
def _gkrr_kernel(words, codes, t, k, Ws, Wi, Wo, T, mask, out):
    pos = 0
    nw = words.size
    band_in = Ws + (t - 1) * Wi
    for i in range(codes.size):
        while True:
            if pos >= nw:
                return -1
            w = np.int64(words[pos] & mask)
            pos += 1
            if w < T:
                break
        x = codes[i]
        if w < Ws:
            out[i] = x
        elif w < band_in:
            b = x // t
            c = x - b * t
            j = (w - Ws) // Wi
            if j >= c:
                j += 1
            out[i] = b * t + j
        else:
            j = (w - band_in) // Wo
            start = (x // t) * t
            if j >= start:
                j += t
            out[i] = j
    return pos


_GKRR_MASK = (1 << 62) - 1  # GKRR reads 62 bits of each word
_GKRR_CHUNK = 1 << 20  # items per kernel call (the first batch of words is sized for it)


def _first_batch(n_items):
    """The words GKRR first draws for ``n_items`` items (an int or an array): an eighth more, plus 64. The
    per-user and the all-users paths must draw the same first batch to give the same output."""
    return n_items + n_items // 8 + 64


@njit(cache=True)
def _gkrr_users(words, word_offsets, codes, offsets, t, k, Ws, Wi, Wo, T, mask, out):
    """:func:`_gkrr_kernel` over every user's codes and first batch of words; ``done[i]`` is False where user
    ``i`` has items but its batch is empty (too many items) or ran out."""
    n = offsets.size - 1
    done = np.ones(n, dtype=np.bool_)
    for i in range(n):
        a, b = offsets[i], offsets[i + 1]
        if b == a:
            continue
        w0, w1 = word_offsets[i], word_offsets[i + 1]
        if w1 == w0 or _gkrr_kernel(words[w0:w1], codes[a:b], t, k, Ws, Wi, Wo, T, mask, out[a:b]) < 0:
            done[i] = False
    return done


class GKRR(ItemRandomizer):
    """Generalized k-randomized response on the clustered metric ``B x C`` (Imola et al., section 6.2).

    ``P[(b,c) -> (b,c)] ∝ e^{alpha_0}``, ``P[(b,c) -> (b,c')] ∝ e^{(1-r) alpha_0}`` (same cluster),
    ``P[(b,c) -> (b',c')] ∝ 1`` (other clusters). Every row has the same normalizer, so ratios of
    probabilities are ratios of weights; the weights are integers ``W_same >= W_in >= W_out`` scaled to a
    total just below ``2^62`` (one 64-bit word per item, almost never rejected), rounded so that
    ``W_same / W_in <= e^{r alpha_0}``, ``W_same / W_out <= e^{alpha_0}``, ``W_in / W_out <= e^{alpha_0}``.
    """

    def __init__(self, space: ClusteredMetric, alpha0: float):
        if not isinstance(space, ClusteredMetric):
            raise ParameterError("GKRR needs a ClusteredMetric")
        a0 = _check_alpha0(alpha0)
        self.space, self.alpha0 = space, a0
        s, t, r = space.n_clusters, space.cluster_size, space.r
        k = s * t
        tau = math.exp(a0) + (t - 1) * math.exp((1 - r) * a0) + (k - t)
        scale = (_TOP - 4 * k) / tau
        Wo = max(int(math.floor(scale)), 1)
        Wi = int(math.floor(Wo * math.exp((1 - r) * a0) * (1 - 1e-12)))
        Ws = int(math.floor(min(Wi * math.exp(r * a0), Wo * math.exp(a0)) * (1 - 1e-12)))
        if t == 1:
            Wi = Ws  # no same-cluster alternatives; keep the formulas uniform
        self.W_same, self.W_in, self.W_out = Ws, Wi, Wo
        self.total = Ws + (t - 1) * Wi + (k - t) * Wo
        if self.total > _TOP:
            raise ParameterError("GKRR weights overflow; the domain is too large")

    @property
    def realized_alpha0(self) -> float:
        """The exact item-level parameter of the integer table (at most ``alpha0``)."""
        r = self.space.r
        vals = [math.log(self.W_same / self.W_out)]
        if self.space.cluster_size > 1:
            vals += [math.log(self.W_same / self.W_in) / r, math.log(self.W_in / self.W_out)]
        return max(vals)

    @property
    def guarantee(self) -> ItemMetricDP:
        return ItemMetricDP(self.realized_alpha0, 0.0, metric=repr(self.space))

    def probabilities(self) -> tuple[float, float, float]:
        """``(p_same, p_in, p_out)``: probability of the true item, of each other item in its cluster, and of
        each item in another cluster."""
        T = self.total
        return self.W_same / T, self.W_in / T, self.W_out / T

    def transition_matrix(self) -> np.ndarray:
        """The dense ``k x k`` matrix ``A[x, y] = P[GKRR(x) = y]`` (for tests and small ``k``)."""
        ps, pi, po = self.probabilities()
        same_b = self.space.cost_matrix(np.arange(self.space.size), np.arange(self.space.size))
        return np.where(same_b == 0, ps, np.where(same_b < 1, pi, po))

    def randomize(self, items: np.ndarray, rng: RngLike = None) -> np.ndarray:
        codes = np.ascontiguousarray(self.space.check_codes(items), dtype=np.int64)
        src = resolve_rng(rng)
        out = np.empty_like(codes)
        t, k = self.space.cluster_size, self.space.size
        mask = np.uint64(_GKRR_MASK)
        for s0 in range(0, codes.size, _GKRR_CHUNK):
            c = codes[s0 : s0 + _GKRR_CHUNK]
            o = out[s0 : s0 + _GKRR_CHUNK]
            budget = _first_batch(c.size)
            while _gkrr_kernel(src.words(budget), c, t, k, self.W_same, self.W_in, self.W_out, self.total, mask, o) < 0:
                budget *= 2
        return out

    def randomize_users(self, codes: np.ndarray, offsets: np.ndarray, batch: KeyedBatch) -> np.ndarray:
        """Every user's items, each user on its own keyed stream, at once: the same output, bit for bit, as
        ``self.randomize(codes[offsets[i]:offsets[i + 1]], batch.source(i))`` for every user ``i``,
        concatenated.

        Every user's first batch of words (the one :meth:`randomize` draws first) comes out of one AES call
        for all users, and one compiled pass runs the kernel over all of them. A user whose first batch runs
        out (rare: the batch holds an eighth more words than items, plus 64, and almost every word is accepted)
        or who holds more than 2^20 items is redone by :meth:`randomize` on its own stream, which draws that
        first batch again and continues.
        """
        codes = np.ascontiguousarray(self.space.check_codes(codes), dtype=np.int64)
        offsets = np.asarray(offsets)
        if (
            offsets.ndim != 1
            or offsets.dtype.kind not in "iu"
            or offsets.size != len(batch) + 1
            or offsets[0] != 0
            or offsets[-1] != codes.size
            or np.any(np.diff(offsets) < 0)
        ):
            raise ParameterError("offsets must run from 0 to the number of codes, one user per stream, not decreasing")
        offsets = offsets.astype(np.int64)
        sizes = np.diff(offsets)
        budgets = np.where((sizes > 0) & (sizes <= _GKRR_CHUNK), _first_batch(sizes), 0)
        words = batch.words(budgets)
        word_offsets = np.concatenate([[0], np.cumsum(budgets)]).astype(np.int64)
        out = np.empty_like(codes)
        t, k = self.space.cluster_size, self.space.size
        done = _gkrr_users(words, word_offsets, codes, offsets, t, k, self.W_same, self.W_in, self.W_out, self.total,
                           np.uint64(_GKRR_MASK), out)
        for i in np.flatnonzero(~done):
            a, b = offsets[i], offsets[i + 1]
            out[a:b] = self.randomize(codes[a:b], batch.source(int(i)))
        return out

    def unbiased_estimate(self, v: np.ndarray) -> np.ndarray:
        """The unbiased estimator ``H = v A^{-1}`` of Algorithm 4 in closed form, ``O(k)``.

        ``A = a I + b (I_s ⊗ J_t) + c J_k`` with ``a = p_same - p_in``, ``b = p_in - p_out``, ``c = p_out``.
        Writing ``S(.)`` for cluster sums, ``v = a H + b S(H) ⊗ 1_t + c (ΣH) 1`` gives
        ``ΣH = Σv`` (rows of ``A`` sum to 1), ``S(H) = (S(v) - c t ΣH) / (a + b t)`` and
        ``H = (v - b S(H) ⊗ 1_t - c ΣH) / a``.
        """
        v = np.asarray(v, dtype=np.float64)
        s, t = self.space.n_clusters, self.space.cluster_size
        if v.shape != (s * t,):
            raise DataError(f"expected a histogram of length {s * t}")
        ps, pi, po = self.probabilities()
        total = v.sum()
        if t == 1:  # plain k-RR: A = (p_same - p_out) I + p_out J, no within-cluster term
            return (v - po * total) / (ps - po)
        a, b, c = ps - pi, pi - po, po
        Sv = v.reshape(s, t).sum(axis=1)
        SH = (Sv - c * t * total) / (a + b * t)
        H = (v.reshape(s, t) - b * SH[:, None] - c * total) / a
        return H.reshape(-1)


# --------------------------------------------------------------------------------------------
# Exponential mechanism on any finite metric
# --------------------------------------------------------------------------------------------


#: The smallest positive distance the exponential randomizer takes: its float error bound (``1e-12`` on a
#: log-ratio) divided by the distance must stay small against any alpha_0.
MIN_DISTANCE = 1e-10


def check_exponential_metric(D: np.ndarray) -> None:
    """Refuse a distance matrix the exponential randomizer cannot serve (public, before any data): the
    accountant (Theorems 4.3-4.4) assumes ``d_X <= 1`` (an unnormalized metric would make the randomizer
    ``alpha_0 d_max``-LDP, not ``alpha_0``-LDP), and distances below :data:`MIN_DISTANCE` leave no room for
    the table's float error bound."""
    D = np.asarray(D, dtype=np.float64)
    if not np.all(np.isfinite(D)) or np.any(D < 0) or np.any(np.diag(D) != 0) or D.max() > 1.0:
        raise ParameterError(
            "the exponential randomizer needs a normalized metric: distances in [0, 1], zero on the diagonal"
        )
    positive = D[D > 0]
    if positive.size and positive.min() < MIN_DISTANCE:
        raise ParameterError(
            f"the exponential randomizer needs every nonzero distance to be at least {MIN_DISTANCE:g} of the "
            "largest (two items closer than that cannot be told apart within its float error bound: merge them)"
        )


class ExponentialRandomizer(ItemRandomizer):
    """``P(y | x) ∝ exp(-alpha_0 d(x, y) / 2)`` on a finite metric space: ``alpha_0``-``d_X``-DP (the weight
    ratio is at most ``e^{alpha_0 d/2}`` by the triangle inequality, and so is the normalizer ratio).

    Weights are integers (largest ``2^52`` per row), sampled exactly; ``realized_alpha0`` bounds the exact
    parameter of the integer table from above, computed over all pairs (``O(k^3)``, so ``k <= 2000``). The
    kernel's rate is tuned so that the table uses the budget: first lowered until the table is within
    ``alpha_0``, then raised by secant steps while it stays within (a rate of ``alpha_0`` alone used about
    60% of it on small metrics). The metric must be normalized (distances at most 1).
    """

    def __init__(self, space: FiniteSpace, alpha0: float, max_size: int = 2000):
        a0 = _check_alpha0(alpha0)
        if space.size > min(int(max_size), 2047):  # (2047 weights below 2^52 keep a row's sum below 2^63)
            raise ParameterError(f"the exponential randomizer stores a k x k table; k = {space.size} > {max_size}")
        self.space, self.alpha0 = space, a0
        D = space.full_matrix()
        check_exponential_metric(D)
        self._D = D
        inner, best = a0, None
        for _ in range(12):  # the kernel's rate, lowered until the table is within alpha_0 ...
            table = self._table(inner)
            real = self._realized(table[0])
            if real <= a0:
                best = (table, real)
                break
            inner *= a0 / real * (1 - 1e-9)
        if best is None:  # (distances of at least MIN_DISTANCE leave room: not met in the tests)
            raise ParameterError("could not build an integer table within alpha_0 for this metric")
        for _ in range(4):  # ... then raised (secant steps) while it stays within: the whole budget is used
            if best[1] >= a0 * 0.995 or best[1] <= 0:
                break
            inner *= a0 / best[1] * (1 - 1e-6)
            table = self._table(inner)
            real = self._realized(table[0])
            if real > a0:
                break
            best = (table, real)
        (self._W, self._cum), self.realized = best[0], best[1]

    def _table(self, rate: float) -> tuple[np.ndarray, np.ndarray]:
        """The integer weights ``floor(2^52 exp(-rate d / 2))`` (at least 1) and their row-wise running sums."""
        W = np.maximum(np.floor(np.exp(-rate * self._D / 2) * 2.0**52).astype(np.int64), 1)
        return W, np.cumsum(W, axis=1)

    #: An absolute bound on the float error of a log-ratio of the table's probabilities (four logarithms of
    #: integers below 2^63, each within a few ulps of 50): the realized alpha_0 adds it before dividing by d.
    _LOG_ERROR = 1e-12

    def _realized(self, W: np.ndarray) -> float:
        """An upper bound of the table's exact parameter ``max_{x,x',y} ln(P(y|x)/P(y|x')) / d(x,x')``: the
        float log-ratios plus :data:`_LOG_ERROR` (so rounding can only raise it)."""
        logP = np.log(W) - np.log(W.sum(axis=1, keepdims=True))
        if not np.all(np.isfinite(logP)):
            raise ParameterError("the exponential randomizer's table overflowed")
        k = logP.shape[0]
        worst = 0.0
        for s0 in range(0, k, 64):
            diff = logP[s0 : s0 + 64, None, :] - logP[None, :, :]  # (chunk, k, k): log P(y|x) - log P(y|x')
            loss = diff.max(axis=2) + self._LOG_ERROR
            d = self._D[s0 : s0 + 64]
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(d > 0, loss / np.where(d > 0, d, 1), 0.0)
            worst = max(worst, float(ratio.max()))
        return worst

    @property
    def realized_alpha0(self) -> float:
        return self.realized

    @property
    def guarantee(self) -> ItemMetricDP:
        return ItemMetricDP(self.realized, 0.0, metric=repr(self.space))

    def transition_matrix(self) -> np.ndarray:
        return self._W / self._W.sum(axis=1, keepdims=True)

    def randomize(self, items: np.ndarray, rng: RngLike = None) -> np.ndarray:
        codes = self.space.check_codes(items)
        return sample_cumulative(self._cum, codes, rng)


# --------------------------------------------------------------------------------------------
# Continuous randomizers
# --------------------------------------------------------------------------------------------


class KNormRandomizer(ItemRandomizer):
    """Metric DP for vectors (e.g. word embeddings) under the Euclidean metric normalized by the public
    ``diameter``: the l2 K-norm mechanism of scale ``diameter / alpha_0`` (density ``∝ exp(-alpha_0 |z| /
    diameter)``, Gamma(dim) radius) on a lattice (:class:`userdp.noise.L2LatticeLaw`; one dimension:
    discrete Laplace), with randomized rounding of the input (:func:`userdp.noise.knorm_release`)."""

    def __init__(self, space: EuclideanMetric, alpha0: float):
        if not isinstance(space, EuclideanMetric):
            raise ParameterError("KNormRandomizer needs a EuclideanMetric")
        self.space, self.alpha0 = space, _check_alpha0(alpha0)
        self.calibration = calibrate_knorm(space.scale, self.alpha0, "l2", space.dim)

    @property
    def realized_alpha0(self) -> float:
        """The proven item-level parameter (at most ``alpha0``; within 0.2% of it)."""
        return self.calibration.epsilon_realized

    @property
    def guarantee(self) -> ItemMetricDP:
        return ItemMetricDP(self.realized_alpha0, 0.0, metric=repr(self.space))

    def randomize(self, items: np.ndarray, rng: RngLike = None) -> np.ndarray:
        x = self.space.check_points(items)
        return knorm_release(x, self.calibration, rng)


class PlanarLaplace(KNormRandomizer):
    """Geo-indistinguishability (Andres et al., CCS 2013): the planar Laplace mechanism on 2-D points (for
    locations: a public local projection in km, see :meth:`from_latlon`), optionally remapped to the
    nearest of a public set of points (grid cell centres or venues) -- post-processing, so the guarantee
    is unchanged. Radius ``Gamma(2, diameter/alpha_0)``, uniform angle, on the lattice of
    :class:`KNormRandomizer`."""

    def __init__(self, space: EuclideanMetric, alpha0: float, remap_to: np.ndarray | None = None):
        if space.dim != 2:
            raise ParameterError("planar Laplace needs a 2-D space")
        super().__init__(space, alpha0)
        self.remap_to = None if remap_to is None else np.asarray(remap_to, dtype=np.float64).reshape(-1, 2)

    @staticmethod
    def latlon_to_km(latlon: np.ndarray, origin: tuple[float, float]) -> np.ndarray:
        """Equirectangular projection (km) around a public ``origin`` (lat, lon); accurate to about 0.1%
        over a city-sized box."""
        p = np.asarray(latlon, dtype=np.float64).reshape(-1, 2)
        lat0 = math.radians(origin[0])
        R = 6371.0088
        y = np.radians(p[:, 0] - origin[0]) * R
        x = np.radians(p[:, 1] - origin[1]) * R * math.cos(lat0)
        return np.column_stack([y, x])

    def randomize(self, items: np.ndarray, rng: RngLike = None) -> np.ndarray:
        out = super().randomize(items, rng)
        if self.remap_to is None:
            return out
        from scipy.spatial import cKDTree

        _, idx = cKDTree(self.remap_to).query(out)
        return self.remap_to[idx]

"""What every plan shares: :class:`Prediction`, the exact quantiles of the samplers' laws, and the search for
the smallest epsilon that meets a target."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import ParameterError

__all__ = ["Prediction"]


@dataclass(frozen=True)
class Prediction:
    """A predicted error: its quantiles at the stated confidences, and where they come from.

    Attributes
    ----------
    release, quantity:
        The release and what the error measures (for example ``|noise| of one count, records``).
    quantiles:
        ``{confidence: bound}``: the error is at most ``bound`` with probability ``confidence``.
    exact:
        True when the quantiles come from the sampler's own law.
    basis:
        Where the prediction comes from.
    extra:
        Other predicted figures (for the vocabulary: the weight needed for each release probability).
    """

    release: str
    quantity: str
    quantiles: dict[float, float]
    exact: bool
    basis: str
    extra: dict = field(default_factory=dict)

    @property
    def median(self) -> float:
        return self.quantiles[0.5]

    def sentence(self, confidence: float) -> str:
        q = self.quantiles[confidence]
        return f"{self.quantity} is at most {q:.4g} with probability {confidence:g}"


def confidences(confidence: float) -> tuple[float, ...]:
    c = float(confidence)
    if not 0.0 < c < 1.0:
        raise ParameterError(f"the confidence must lie in (0, 1), got {confidence!r}")
    return tuple(sorted({0.5, c}))


def laplace_abs_quantile(t: int, g: float, c: float) -> float:
    """Smallest ``x`` (on the lattice ``g``) with ``P[|Z| <= x] >= c`` for ``Z ~ g DLap(t)``:
    ``P[|Z| > m] = 2 q^(m+1) / (1 + q)``, ``q = e^(-1/t)``."""
    q = math.exp(-1.0 / t)
    # 2 q^(m+1) / (1+q) <= 1 - c  <=>  m >= log((1-c)(1+q)/2) / log(q) - 1
    m = max(0, math.ceil(math.log((1 - c) * (1 + q) / 2) / math.log(q) - 1 - 1e-12))
    return m * g


def normal_abs_quantile(sigma: float, c: float) -> float:
    from scipy.special import ndtri

    return float(sigma * ndtri(0.5 + c / 2))


def simulated_quantile(errs: np.ndarray, c: float, confidence: float = 0.9) -> float:
    """A quantile ``c`` of the error from simulated releases, stated so that the sample's size is not a
    second source of under-coverage: the median is the sample's, a higher quantile the smallest order
    statistic that is at least the law's ``c``-quantile with probability ``confidence`` (the binomial
    bound; the largest draw when the sample is too small for it)."""
    from scipy.stats import binom

    x = np.sort(np.asarray(errs, dtype=np.float64))
    if c <= 0.5:
        return float(np.quantile(x, c))
    n = x.size
    # P[X_(k) >= q_c] = P[Binomial(n, c) <= k - 1]: the smallest k with that at least `confidence`
    k = int(binom.ppf(confidence, n, c)) + 1
    return float(x[min(n, max(k, 1)) - 1])


def smallest_epsilon(meets, lo: float = 1e-3, hi: float = 50.0) -> float:
    """The smallest epsilon in [lo, hi] (to 1%) with ``meets(epsilon)``; error when even ``hi`` fails."""
    if not meets(hi):
        raise ParameterError(f"no epsilon up to {hi:g} reaches the target")
    if meets(lo):
        return lo
    while hi / lo > 1.01:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if meets(mid) else (mid, hi)
    return hi


def smallest_reaching(forward, target: float, confidence: float, lo: float, hi: float, **kwargs) -> float:
    """The smallest parameter in ``[lo, hi]`` (to 1%) at which ``forward(parameter, confidence=confidence,
    **kwargs)`` predicts an error of at most ``target`` with probability ``confidence``."""
    if not target > 0:
        raise ParameterError(f"the target error must be positive, got {target!r}")
    c = float(confidence)
    return smallest_epsilon(lambda x: forward(x, confidence=c, **kwargs).quantiles[c] <= target, lo=lo, hi=hi)

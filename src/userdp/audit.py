"""Checking claimed privacy guarantees against actual output distributions.

* **Exact mode** (finite outputs): compute the output distributions on neighbouring inputs and the exact
  privacy loss. For item-level metric DP, ``max_y ln P(y|x)/P(y|x') / d(x, x')`` over all pairs
  (:func:`audit_randomizer`); for shuffled item-wise releases on small domains, the exact law of the
  released multiset (a distribution over compositions of ``m`` into the output alphabet) and the
  hockey-stick divergence at the claimed ``alpha d_EM`` (:func:`audit_shuffled`).
* **Statistical mode** (continuous outputs): sample the mechanism on two neighbouring inputs, bin the
  outputs, and bound the hockey-stick divergence ``D_{e^eps}(P || Q)`` from below with a confidence
  level (Clopper-Pearson per bin, union bound), in the spirit of DP-Auditorium's histogram testers
  (:func:`audit_samples`). A claim is *refuted* when the lower confidence bound exceeds its delta; a
  sound mechanism is never refuted except with probability at most ``1 - confidence``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations_with_replacement

import numpy as np
from scipy.stats import beta as beta_dist

__all__ = [
    "AuditResult",
    "hockey_stick",
    "audit_randomizer",
    "shuffled_output_distribution",
    "audit_shuffled",
    "audit_samples",
]


@dataclass(frozen=True)
class AuditResult:
    """Claimed vs measured privacy: ``passed`` is False when the measurement refutes the claim."""

    mechanism: str
    claimed: str
    measured: str
    passed: bool
    detail: str = ""

    def __str__(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return f"[{verdict}] {self.mechanism}: claimed {self.claimed}; measured {self.measured}. {self.detail}"


def hockey_stick(P: np.ndarray, Q: np.ndarray, eps: float) -> float:
    """``max(D_{e^eps}(P||Q), D_{e^eps}(Q||P))`` for two distributions on one finite support."""
    e = math.exp(eps)
    return float(max(np.maximum(P - e * Q, 0).sum(), np.maximum(Q - e * P, 0).sum()))


def audit_randomizer(P: np.ndarray, D: np.ndarray, claimed_alpha: float, name: str = "randomizer") -> AuditResult:
    """Exact item-level metric-DP audit of a finite randomizer with transition matrix ``P[x, y]`` over a
    metric ``D``: the measured alpha is ``max ln(P[x,y]/P[x',y]) / d(x,x')``."""
    P = np.asarray(P, dtype=np.float64)
    with np.errstate(divide="ignore"):
        logP = np.log(P)
    loss = (logP[:, None, :] - logP[None, :, :]).max(axis=2)
    mask = D > 0
    measured = float((loss[mask] / D[mask]).max())
    return AuditResult(
        name,
        f"alpha_0 = {claimed_alpha:.6g}",
        f"alpha_0 = {measured:.6g}",
        measured <= claimed_alpha * (1 + 1e-9),
        "exact over all input pairs and outputs",
    )


def shuffled_output_distribution(P: np.ndarray, items: list[int]) -> dict[tuple[int, ...], float]:
    """Exact law of the shuffled outputs (a multiset = counts per output symbol) when every item ``x`` in
    ``items`` is randomized independently by ``P[x, :]``."""
    k_out = P.shape[1]
    dist: dict[tuple[int, ...], float] = {tuple([0] * k_out): 1.0}
    for x in items:
        nxt: dict[tuple[int, ...], float] = {}
        for counts, pr in dist.items():
            for y in range(k_out):
                if P[x, y] == 0:
                    continue
                c = list(counts)
                c[y] += 1
                key = tuple(c)
                nxt[key] = nxt.get(key, 0.0) + pr * P[x, y]
        dist = nxt
    return dist


def audit_shuffled(
    P: np.ndarray,
    D: np.ndarray,
    m: int,
    claim: Callable[[float], tuple[float, float]],
    name: str = "PrivEMDItemWise",
    max_pairs: int = 400,
) -> AuditResult:
    """Exact audit of a shuffled item-wise release over *all* pairs of size-``m`` multisets of a small
    domain (up to ``max_pairs`` pairs): the hockey-stick divergence at ``claim(d_EM)[0]`` must not exceed
    ``claim(d_EM)[1]``. ``d_EM`` is computed exactly (Lemma 2.1, optimal assignment)."""
    from scipy.optimize import linear_sum_assignment

    k = P.shape[0]
    sets = list(combinations_with_replacement(range(k), m))
    dists = {s: shuffled_output_distribution(P, list(s)) for s in sets}
    worst_ratio, worst = -math.inf, None
    checked = 0
    for i, a in enumerate(sets):
        for b in sets[i + 1 :]:
            C = D[np.ix_(a, b)]
            r, c = linear_sum_assignment(C)
            d = float(C[r, c].mean())
            if d == 0:
                continue
            eps, delta = claim(d)
            keys = set(dists[a]) | set(dists[b])
            Pa = np.array([dists[a].get(x, 0.0) for x in keys])
            Pb = np.array([dists[b].get(x, 0.0) for x in keys])
            hs = hockey_stick(Pa, Pb, eps)
            excess = hs - delta
            if excess > worst_ratio:
                worst_ratio, worst = excess, (a, b, d, eps, delta, hs)
            checked += 1
            if checked >= max_pairs:
                break
        if checked >= max_pairs:
            break
    a, b, d, eps, delta, hs = worst
    return AuditResult(
        name,
        f"(eps(d), delta(d)) from the accountant, e.g. ({eps:.4g}, {delta:.3g}) at d_EM = {d:.3g}",
        f"hockey-stick {hs:.3g} at that eps (worst pair {a} vs {b})",
        hs <= delta + 1e-12,
        f"exact over {checked} pairs of {m}-item datasets",
    )


def _cp_lower(k: int, n: int, conf: float) -> float:
    return 0.0 if k == 0 else float(beta_dist.ppf(1 - conf, k, n - k + 1))


def _cp_upper(k: int, n: int, conf: float) -> float:
    return 1.0 if k == n else float(beta_dist.ppf(conf, k + 1, n - k))


def audit_samples(
    sample_p: np.ndarray,
    sample_q: np.ndarray,
    eps: float,
    delta: float,
    bins: int = 40,
    confidence: float = 0.99,
    name: str = "mechanism",
) -> AuditResult:
    """Statistical audit: lower confidence bound on ``D_{e^eps}(P || Q)`` (and the reverse) from samples.

    Outputs are binned on quantiles of the pooled sample (1-D, or the first coordinate's norm for vectors);
    for each bin, Clopper-Pearson bounds at level ``1 - (1 - confidence) / (2 bins)`` give
    ``sum_b max(lower_P(b) - e^eps upper_Q(b), 0)``, a lower bound on the divergence of the binned
    (post-processed) outputs, hence on the mechanism's.
    """
    p = np.asarray(sample_p, dtype=np.float64)
    q = np.asarray(sample_q, dtype=np.float64)
    if p.ndim > 1:
        p, q = p[:, 0], q[:, 0]
    edges = np.unique(np.quantile(np.concatenate([p, q]), np.linspace(0, 1, bins + 1)))
    edges[0], edges[-1] = -np.inf, np.inf
    cp = np.histogram(p, edges)[0]
    cq = np.histogram(q, edges)[0]
    level = 1 - (1 - confidence) / (2 * len(cp))
    e = math.exp(eps)
    lb = 0.0
    for a, b, na, nb in ((cp, cq, p.size, q.size), (cq, cp, q.size, p.size)):
        s = sum(
            max(_cp_lower(int(x), na, level) - e * _cp_upper(int(y), nb, level), 0.0) for x, y in zip(a, b, strict=True)
        )
        lb = max(lb, s)
    return AuditResult(
        name,
        f"({eps:.4g}, {delta:.3g})",
        f"hockey-stick >= {lb:.3g} (confidence {confidence})",
        lb <= delta,
        f"{p.size} samples per input, {len(cp)} bins",
    )

"""Statistical audits (continuous outputs): sample the mechanism on two neighbouring inputs, bin the outputs and
bound the hockey-stick divergence ``D_{e^eps}(P || Q)`` from below with a confidence level (Clopper-Pearson per
bin, union bound; :func:`audit_samples`). A claim is *refuted* when the lower confidence bound exceeds its delta;
a finite sample cannot see a small delta, and every result states its detection limit (:func:`detection_limit`).

* :func:`audit_search`: a pilot run on every candidate pair (:mod:`userdp.audit.neighbours`), then the full test
  with fresh samples on the pair (and 1-D projection) the pilot found worst.
* :func:`audit_heatmap`: any DP heatmap mechanism under add/remove-one-user neighbours, by :func:`audit_search`
  over a few users' distributions on a tiny grid.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.stats import beta as beta_dist

from .exact import hockey_stick
from .neighbours import NeighbourPair
from .result import AuditResult

__all__ = ["detection_limit", "audit_samples", "audit_search", "audit_heatmap"]


def _edges(p: np.ndarray, q: np.ndarray, bins: int) -> np.ndarray:
    """Bin edges: one bin per value when there are at most ``bins`` distinct outputs (a selection, a
    count), else quantiles of the pooled sample."""
    values = np.unique(np.concatenate([p, q]))
    if values.size <= bins:
        return np.concatenate([[-np.inf], (values[:-1] + values[1:]) / 2, [np.inf]])
    edges = np.unique(np.quantile(np.concatenate([p, q]), np.linspace(0, 1, bins + 1)))
    edges[0], edges[-1] = -np.inf, np.inf
    return edges


def _cp_lower(k: int, n: int, conf: float) -> float:
    return 0.0 if k == 0 else float(beta_dist.ppf(1 - conf, k, n - k + 1))


def _cp_upper(k: int, n: int, conf: float) -> float:
    return 1.0 if k == n else float(beta_dist.ppf(conf, k + 1, n - k))


def detection_limit(
    n_p: int, n_q: int, eps: float, delta: float = 0.0, bins: int = 40, confidence: float = 0.99
) -> float:
    """The smallest true divergence :func:`audit_samples` can refute a claimed ``(eps, delta)`` with, for
    ``n_p`` and ``n_q`` samples per input in ``bins`` bins.

    The most favourable case for the test is a divergence concentrated in one bin that the other input
    never reaches (spreading it over bins only adds the other bins' ``e^eps`` upper bounds). With ``n_p``
    samples of which a fraction ``x`` falls in that bin (and none of ``n_q``), the lower bound is
    ``CP_lower(x n_p) - e^eps CP_upper(0, n_q)``; the limit is the smallest ``x`` for which it exceeds
    ``delta`` at the expected count. A true divergence below it passes unseen (at about even odds at the
    limit itself), whatever the claim: the test "cannot refute delta below" this value. With 5e4 samples
    per input, 40 bins, ``eps = 1`` and 99% confidence it is about 1e-3.
    """
    level = 1 - (1 - confidence) / (2 * bins)  # audit_samples's per-bin level
    floor = math.exp(eps) * _cp_upper(0, int(n_q), level) + float(delta)
    if _cp_lower(int(n_p), int(n_p), level) <= floor:
        return 1.0
    lo, hi = 0, int(n_p)  # _cp_lower(lo) <= floor < _cp_lower(hi); it increases in k
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _cp_lower(mid, int(n_p), level) > floor:
            hi = mid
        else:
            lo = mid
    return hi / int(n_p)


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

    Outputs are binned on quantiles of the pooled sample (1-D, or the first coordinate for vectors; one bin
    per value when there are at most ``bins`` distinct outputs);
    for each bin, Clopper-Pearson bounds at level ``1 - (1 - confidence) / (2 bins)`` give
    ``sum_b max(lower_P(b) - e^eps upper_Q(b), 0)``, a lower bound on the divergence of the binned
    (post-processed) outputs, hence on the mechanism's.
    """
    p = np.asarray(sample_p, dtype=np.float64)
    q = np.asarray(sample_q, dtype=np.float64)
    if p.ndim > 1:
        p, q = p[:, 0], q[:, 0]
    edges = _edges(p, q, bins)
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
        detection_limit(p.size, q.size, eps, delta, len(cp), confidence),
    )


# --------------------------------------------------------------------------------------------
# Worst-case neighbour search (candidate pairs: userdp.audit.neighbours)
# --------------------------------------------------------------------------------------------


def _divergence_estimate(p: np.ndarray, q: np.ndarray, eps: float, bins: int) -> float:
    """Plug-in (point) estimate of the binned hockey-stick divergence, used only to rank pairs."""
    edges = _edges(p, q, bins)
    hp = np.histogram(p, edges)[0] / p.size
    hq = np.histogram(q, edges)[0] / q.size
    return hockey_stick(hp, hq, eps)


def audit_search(
    sample: Callable[[Any, int], np.ndarray],
    pairs: list[NeighbourPair],
    claim: Callable[[float], tuple[float, float]],
    n: int = 40_000,
    n_pilot: int = 4_000,
    bins: int = 40,
    confidence: float = 0.99,
    name: str = "mechanism",
) -> AuditResult:
    """Statistical audit over a search for the worst neighbouring pair.

    ``sample(x, k)`` draws ``k`` outputs of the mechanism on input ``x`` (shape ``(k,)`` or ``(k, dim)``);
    ``claim(distance)`` gives the claimed ``(epsilon, delta)`` for a pair at that distance. For each pair a
    pilot of ``n_pilot`` samples per input picks a projection (the mean-difference direction for vector
    outputs) and estimates the divergence in excess of the claimed delta; the worst pair is then tested
    with ``n`` fresh samples by :func:`audit_samples`. The projection and the pair are chosen from pilot
    samples only, so the final test is a post-processing of fresh samples and keeps its confidence level.
    """
    if not pairs:
        raise ValueError("no neighbouring pairs to search")

    def project(x: np.ndarray, v: np.ndarray | None) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        return x if x.ndim == 1 else x.reshape(x.shape[0], -1) @ v

    best = None
    for pair in pairs:
        eps, delta = claim(pair.distance)
        pa, pb = np.asarray(sample(pair.a, n_pilot)), np.asarray(sample(pair.b, n_pilot))
        v = None
        if pa.ndim > 1:
            diff = pb.reshape(n_pilot, -1).mean(axis=0) - pa.reshape(n_pilot, -1).mean(axis=0)
            norm = np.linalg.norm(diff)
            v = diff / norm if norm > 0 else np.eye(diff.size)[0]
        excess = _divergence_estimate(project(pa, v), project(pb, v), eps, bins) - delta
        if best is None or excess > best[0]:
            best = (excess, pair, v, eps, delta)
    _, pair, v, eps, delta = best
    res = audit_samples(
        project(sample(pair.a, n), v), project(sample(pair.b, n), v), eps, delta, bins, confidence, name
    )
    return AuditResult(
        res.mechanism,
        res.claimed + f" at distance {pair.distance:.4g}",
        res.measured,
        res.passed,
        res.detail + f"; worst of {len(pairs)} candidate pairs: {pair.label}",
        res.detection_limit,
    )


# --------------------------------------------------------------------------------------------
# DP heatmaps (statistical mode, user-level add/remove neighbours)
# --------------------------------------------------------------------------------------------


def _heatmap_users(shape: tuple[int, int], crowd: int = 10) -> list[np.ndarray]:
    """The default small dataset: a user concentrated on cell (0, 0), a user spread evenly over the grid, a
    user split between the two right-hand corners, and ``crowd`` users on the corner cell (H-1, W-1) (so that
    the total, which a heatmap normalizes away, is large and the other cells are read cleanly)."""
    H, W = shape
    at = np.zeros(shape)
    at[0, 0] = 1.0
    even = np.full(shape, 1.0 / (H * W))
    two = np.zeros(shape)
    two[H - 1, W - 1] += 0.5
    two[0, W - 1] += 0.5
    corner = np.zeros(shape)
    corner[H - 1, W - 1] = 1.0
    return [at, even, two] + [corner] * crowd


_HEATMAP_PROJECTIONS = {
    "vector": "the pilot's mean-difference direction",
    "cell": "the mass of the most changed cell",
    "pieces": "the number of distinct cell values (the partition a tree mechanism released)",
}


def audit_heatmap(
    mechanism: Callable[..., Any],
    epsilon: float,
    *,
    shape: tuple[int, int] = (4, 4),
    n: int = 20_000,
    n_pilot: int | None = None,
    users: list[np.ndarray] | None = None,
    projections: tuple[str, ...] = ("vector", "cell", "pieces"),
    bins: int = 10,
    confidence: float = 0.99,
    name: str | None = None,
    rng: Any = None,
) -> AuditResult:
    """Statistical audit of a DP heatmap mechanism under add/remove-one-user neighbours.

    ``mechanism(s, epsilon, rng=rng)`` must return a :class:`~userdp.privacy.result.Release` whose ``value``
    is an ``H x W`` heatmap and whose ``guarantee`` (the claim audited, e.g. ``PureDP(epsilon)``) protects
    :attr:`~userdp.privacy.guarantees.Neighbours.ADD_REMOVE_USER`; ``s`` is the sum of the users'
    distributions. For a mechanism with other required arguments pass a closure or
    ``functools.partial`` (e.g. ``partial(dense_emd_agg, coarse_side=2)``).

    The dataset is a few users on a tiny grid of ``shape`` (``users``: ``H x W`` non-negative arrays of mass
    at most 1; by default one user on cell (0, 0), one spread evenly, one split between the right-hand corners
    and ten on the corner (H-1, W-1), so that the total a heatmap normalizes away is large). The candidate
    neighbouring pairs, each a user added or removed:

    * every distinct user removed;
    * a user concentrated on cell (0, 0) (where a user already is) added, and one on cell (H-1, 0);
    * a user spread evenly over the grid added;
    * no users against one user on cell (0, 0).

    Each pair is tried with (by default) three ``projections`` of the output to a scalar: ``"vector"``, the
    pilot's mean-difference direction (as :func:`audit_search` does for vectors); ``"cell"``, the mass of the
    cell whose sum changed most; ``"pieces"``, the number of distinct cell values (the partition a tree or grid
    mechanism released: whether a node was split or kept). :func:`audit_search`
    picks the worst (pair, projection) on pilot samples (``n_pilot`` per dataset, shared by the projections
    and pairs of that dataset) and tests it with ``n`` fresh samples per input. ``rng`` (a seed for
    reproducible audits) drives the mechanism's noise. Returns the :class:`AuditResult` of the final test.
    """
    from ..errors import DataError, ParameterError
    from ..noise import resolve_rng
    from ..privacy.guarantees import Neighbours

    try:
        H, W = (int(x) for x in shape)
    except (TypeError, ValueError):
        raise ParameterError("shape must be a pair of positive integers") from None
    if H < 1 or W < 1:
        raise ParameterError("shape must be a pair of positive integers")
    n = int(n)
    n_pilot = max(200, n // 8) if n_pilot is None else int(n_pilot)
    if not 0 < n_pilot < n:
        raise ParameterError("need 0 < n_pilot < n (the final test must use fresh samples)")
    if users is None:
        users = _heatmap_users((H, W))
    users = [np.asarray(u, dtype=np.float64) for u in users]
    for u in users:
        if u.shape != (H, W) or not np.all(np.isfinite(u)) or np.any(u < 0) or u.sum() > 1 + 1e-9:
            raise DataError("every user must be a non-negative H x W array of mass at most 1")
    unknown = set(projections) - set(_HEATMAP_PROJECTIONS)
    if not projections or unknown:
        raise ParameterError(f"projections must be a non-empty subset of {sorted(_HEATMAP_PROJECTIONS)}")
    src = resolve_rng(rng)

    def total(us: list[np.ndarray]) -> np.ndarray:
        return np.sum(us, axis=0) if us else np.zeros((H, W))

    at0 = np.zeros((H, W))
    at0[0, 0] = 1.0
    far = np.zeros((H, W))
    far[H - 1, 0] = 1.0
    datasets = {"the dataset": total(users)}
    pairs = []
    seen: set[bytes] = set()
    for i, u in enumerate(users):
        if u.tobytes() in seen:  # identical users give the same neighbour
            continue
        seen.add(u.tobytes())
        label = f"the dataset without user {i}"
        datasets[label] = total(users[:i] + users[i + 1 :])
        pairs.append(("the dataset", label))
    for label, extra in (
        ("the dataset plus a user on cell (0, 0)", at0),
        (f"the dataset plus a user on cell ({H - 1}, 0)", far),
        ("the dataset plus a user spread evenly", np.full((H, W), 1.0 / (H * W))),
    ):
        datasets[label] = total(users + [extra])
        pairs.append(("the dataset", label))
    datasets["no users"] = np.zeros((H, W))
    datasets["one user on cell (0, 0)"] = at0
    pairs.append(("no users", "one user on cell (0, 0)"))

    rel = mechanism(datasets["the dataset"], epsilon, rng=src)
    g = rel.guarantee
    if getattr(g, "neighbours", None) != Neighbours.ADD_REMOVE_USER or not hasattr(g, "epsilon"):
        raise ParameterError("audit_heatmap checks (epsilon, delta)-DP claims for adding or removing one user")
    claim_eps, claim_delta = float(g.epsilon), float(getattr(g, "delta", 0.0))
    if np.asarray(rel.value).size != H * W:
        raise ParameterError("the mechanism must return an H x W heatmap")

    pilots: dict[bytes, np.ndarray] = {}  # by content: datasets with equal sums share their pilot samples

    def outputs(label: str, k: int) -> np.ndarray:
        s = datasets[label]
        key = s.tobytes()
        if k == n_pilot and key in pilots:
            return pilots[key]
        out = np.empty((k, H * W))
        for j in range(k):
            out[j] = np.asarray(mechanism(s, epsilon, rng=src).value, dtype=np.float64).reshape(-1)
        if k == n_pilot:
            pilots[key] = out
        return out

    def sample(x: tuple[str, str, int], k: int) -> np.ndarray:
        label, proj, cell = x
        out = outputs(label, k)
        if proj == "vector":
            return out
        if proj == "cell":
            return out[:, cell]
        return np.array([np.unique(np.round(row, 12)).size for row in out], dtype=np.float64)

    candidates = []
    for a, b in pairs:
        cell = int(np.argmax(np.abs(datasets[b] - datasets[a]).reshape(-1)))
        for proj in projections:
            what = _HEATMAP_PROJECTIONS[proj]
            candidates.append(NeighbourPair(f"{a} vs {b}, projected on {what}", (a, proj, cell), (b, proj, cell)))
    res = audit_search(
        sample,
        candidates,
        lambda d: (claim_eps, claim_delta),
        n=n,
        n_pilot=n_pilot,
        bins=bins,
        confidence=confidence,
        name=name or getattr(rel, "mechanism", "heatmap mechanism"),
    )
    return AuditResult(
        res.mechanism,
        f"{g.describe()} (as returned by the mechanism); " + res.claimed,
        res.measured,
        res.passed,
        res.detail + f"; {len(users)} users on a {H} x {W} grid, {n_pilot} pilot samples per dataset",
        res.detection_limit,
    )

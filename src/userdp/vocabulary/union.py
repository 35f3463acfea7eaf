"""Person-level DP set union (private partition selection): release a set of items from an unknown domain.

Each person holds a set of items. A person keeps at most ``max_items`` of them (``Delta_0``; a uniformly
random subset, drawn from the person's own randomness), spreads one unit of weight over the kept items, and
an item is released when its total weight plus noise reaches a threshold ``T``. These are the *weighted*
mechanisms of Gopi, Gulhane, Kulkarni, Shen, Shokouhi & Yekhanin (ICML 2020, section 3), the baselines that
Privacy on Beam and PipelineDP build on:

* ``weighted_laplace_union``: weight ``1/k`` to each of ``k`` kept items (l1 norm at most 1), discrete Laplace
  noise; ``(epsilon, delta)``-DP;
* ``weighted_gaussian_union``: weight ``1/sqrt(k)`` (l2 norm at most 1), discrete Gaussian noise.

and two *policies*, whose persons visit the histogram one after another and stop at a cutoff: the policy
Laplace union (:func:`policy_laplace_union`, :mod:`userdp.vocabulary.policy`) and the policy greedy union of
Carvalho, Wang & Gondara (AAAI 2022; :func:`policy_greedy_union`, :mod:`userdp.vocabulary.greedy`).

**Exact and floating-point safe.** Weights live on the integer lattice ``Z / U`` with ``U = 2^20`` units per
person: ``floor(U / k)`` and ``floor(U / sqrt(k)) = isqrt(U^2 // k)``, so a person's vector has l1 (or l2)
norm at most ``U`` exactly, the histogram is integer, the noise is an exact integer sample
(:func:`~userdp.noise.discrete_laplace`, :func:`~userdp.noise.discrete_gaussian`), and the threshold test
``H + Z >= T`` compares integers. No float decides an output.

**Privacy (add or remove one person p).** Let ``S`` be the items of the smaller dataset and ``N`` the items
only p holds. On ``S`` the released set is post-processing of a noisy histogram whose sensitivity is p's
vector: ``epsilon``-DP (Laplace, ``t >= U / epsilon``) or ``(epsilon, delta_G)``-DP (Gaussian, zCDP of the
discrete Gaussian, Canonne, Kamath & Steinke 2020). An item of ``N`` can appear only in the larger
dataset's output, with probability at most ``delta_N`` whatever p's kept subset, the threshold's job.
Write ``x = P[S' in E_0]`` for the shared part of the larger dataset's output (``E_0``: the outputs of ``E``
with no item of ``N``). Then ``P[M(D') in E] >= (1 - delta_N) x`` and ``P[M(D) in E] <= min(1, e^eps x +
delta_G)``, so ``P[M(D) in E] - e^eps P[M(D') in E] <= max_x min(1, e^eps x + delta_G) - e^eps x (1 -
delta_N) <= delta_G + delta_N``; the other direction is ``P[M(D') in E] <= e^eps P[M(D) in E] + delta_G +
delta_N`` directly. So ``delta_N + delta_G <= delta`` suffices, the paper's split (section 3): Gaussian noise
gives half of ``delta`` to each; Laplace noise all of it to ``delta_N``.

``delta_N`` is computed from the actual samplers' tails. A person with ``k`` kept items gives each weight
``a_k``, and ``delta_N = max_k k P[Z >= T - a_k]``:

* discrete Laplace, ``P[x] ∝ q^|x|`` with ``q = exp(-1/t)``: ``P[Z >= m] = q^m / (1 + q)`` for ``m >= 1``,
  exactly;
* discrete Gaussian of variance ``w^2``: ``P[Z >= m] <= P[N(0, w^2) >= m - 1]`` for ``m >= 1`` (its
  normalizer is at least ``sqrt(2 pi) w`` by Poisson summation, and ``exp(-x^2 / 2w^2)`` is at most its
  integral over ``[x - 1, x]``), times ``1 / (1 - 2 exp(-480))`` for the sampler's cut at ``32 w``.

The threshold is the smallest integer for which this bound, with a relative margin of ``1e-9``, is at most
the target.

**The bound chosen from the data** (``max_items="auto"``, the vocabulary release's default;
:func:`choose_max_items`): the exponential mechanism picks ``max_items`` from the public grid ``1, 2, 4, ...,
8192`` with the rank scores ``-|W_g - q n|`` (``W_g`` persons holding between 1 and ``g`` distinct items,
``n`` persons holding any; sensitivity ``max(q, 1 - q) <= 1``; the quantile ``q`` depends on the noise alone, a
public parameter: 0.9 for the Gaussian unions, 0.1 for the Laplace ones, :data:`AUTO_QUANTILES`), with
``AUTO_FRACTION`` of epsilon and no delta. The union then runs at the rest of the budget for the chosen bound;
by sequential (adaptive) composition the whole is ``(epsilon, delta)``-DP. Every calibration is checked at the
largest candidate before the data are read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..errors import ParameterError
from ..noise import (
    RngLike,
    calibrate_gaussian,
    calibrate_laplace,
    discrete_gaussian,
    discrete_laplace,
    exponential_mechanism,
    gaussian_mechanism,
    laplace_mechanism,
    resolve_rng,
    zcdp_delta,
)
from ..privacy.guarantees import ApproxDP, Neighbours, PureDP
from ..privacy.params import check_delta
from ..privacy.result import ErrorStatement, Release
from .greedy import greedy_histogram, kept_counts, local_counts
from .policy import policy_histogram

__all__ = [
    "AUTO_FRACTION",
    "AUTO_QUANTILE",
    "MAX_ITEMS_GRID",
    "UNIT",
    "BoundChoice",
    "UnionCalibration",
    "auto_bound_epsilon",
    "choose_max_items",
    "choose_max_items_with",
    "max_items_grid_part",
    "max_items_scores",
    "persons_within",
    "bound_contributions",
    "calibrate_union",
    "distinct_per_person",
    "greedy_delta_new",
    "new_item_weight",
    "person_weights",
    "plan_vocabulary",
    "policy_greedy_union",
    "policy_laplace_union",
    "private_vocabulary",
    "private_vocabulary_from_sums",
    "union_histogram",
    "vocabulary_sum_columns",
    "weighted_gaussian_union",
    "weighted_laplace_union",
]

UNIT_BITS = 20
UNIT = 1 << UNIT_BITS  # one person's unit of weight, in lattice steps
_MARGIN = 1e-9
_TRUNCATION = 1.0 / (1.0 - 2.0 * math.exp(-480.0))
NOISES = ("laplace", "gaussian")
ALGORITHMS = ("weighted", "policy", "policy-greedy", "sips")


@dataclass(frozen=True)
class UnionCalibration:
    """The public parameters of a weighted set union: noise law, scale, threshold (all in lattice steps of
    ``1 / unit``), and the split of ``delta``.

    Attributes
    ----------
    noise:
        ``"laplace"`` (scale ``scale = t``: ``P[x] ∝ exp(-|x| / t)``) or ``"gaussian"`` (``scale = w``: variance
        ``w^2``).
    threshold:
        ``T``: an item is released when its weight plus noise is at least ``T``.
    delta_gaussian, delta_new:
        The ``delta`` of the noisy histogram on shared items (0 for Laplace) and the bound on the probability
        that any item only the added person holds is released.
    policy, cutoff:
        ``True`` for the policy Laplace histogram (:mod:`userdp.vocabulary.policy`), whose persons raise
        items only up to ``cutoff`` (``Gamma``, in lattice steps); ``cutoff`` is 0 for a weighted union.
    greedy:
        ``True`` (with ``policy``) for the policy greedy histogram (:mod:`userdp.vocabulary.greedy`), whose
        threshold bounds a person's new items by one at ``unit`` and the others at 0.
    """

    noise: str
    epsilon: float
    delta: float
    max_items: int
    unit: int
    scale: int
    threshold: int
    delta_gaussian: float
    delta_new: float
    policy: bool = False
    cutoff: int = 0
    greedy: bool = False

    @property
    def threshold_in_persons(self) -> float:
        """``T / unit``: the threshold in persons' weight (a person holding one item gives it weight 1)."""
        return self.threshold / self.unit

    @property
    def noise_sd_in_persons(self) -> float:
        """The noise's standard deviation in persons' weight."""
        if self.noise == "laplace":
            q = math.exp(-1.0 / self.scale)
            return math.sqrt(2 * q) / (1 - q) / self.unit
        return self.scale / self.unit


def person_weights(k: np.ndarray, noise: str, unit: int = UNIT) -> np.ndarray:
    """The integer weight ``floor(unit / k)`` (Laplace) or ``floor(unit / sqrt(k)) = isqrt(unit^2 // k)``
    (Gaussian) a person with ``k >= 1`` kept items gives each of them."""
    k = np.asarray(k, dtype=np.int64)
    if noise == "laplace":
        return unit // k
    sq = (unit * unit) // k
    r = np.floor(np.sqrt(sq.astype(np.float64))).astype(np.int64)
    r -= (r * r > sq).astype(np.int64)  # exact integer square root: correct the float's last step
    r += ((r + 1) * (r + 1) <= sq).astype(np.int64)
    return r


def _log_tail_laplace(m: np.ndarray, t: int) -> np.ndarray:
    """``log P[Z >= m]`` for the discrete Laplace of scale ``t`` and ``m >= 1``: ``-m/t - log(1 + q)``."""
    return -np.asarray(m, dtype=np.float64) / t - math.log1p(math.exp(-1.0 / t))


def _log_tail_gaussian(m: np.ndarray, w: int) -> np.ndarray:
    """An upper bound on ``log P[Z >= m]`` for the (truncated) discrete Gaussian of variance ``w^2``,
    ``m >= 1``: ``log P[N(0, w^2) >= m - 1]``, plus the truncation factor."""
    from scipy.special import log_ndtr

    return log_ndtr(-(np.asarray(m, dtype=np.float64) - 1) / w) + math.log(_TRUNCATION)


def new_item_weight(k: np.ndarray, noise: str, unit: int = UNIT, policy: bool = False) -> np.ndarray:
    """The most weight each of ``k`` items only one person holds can get: :func:`person_weights` for a
    weighted union, ``ceil(unit / k)`` for the policy Laplace histogram (its water-filling gives the person's
    ``k`` new items, all at level 0, equal shares up to one lattice step)."""
    k = np.asarray(k, dtype=np.int64)
    if policy:
        return -(-unit // k)
    return person_weights(k, noise, unit)


def greedy_delta_new(threshold: int, scale: int, max_items: int, unit: int) -> float:
    """The policy greedy union's bound on releasing any of one person's ``k <= max_items`` new items,
    ``max_k P[Z >= T - unit] + (k - 1) P[Z >= T]`` (discrete Laplace of scale ``t``; with the relative margin):
    greedy may give one new item the whole unit and leaves the others at 0 (candidates still), and the sum of
    the convex tails over weights summing to at most ``unit`` is largest there (:mod:`userdp.vocabulary.greedy`).
    """
    ks = np.arange(1, max_items + 1, dtype=np.float64)
    one = np.exp(_log_tail_laplace(np.array([threshold - unit]), scale))[0]
    rest = np.exp(_log_tail_laplace(np.array([threshold]), scale))[0]
    return float(np.max(one + (ks - 1) * rest)) * (1 + _MARGIN)


def _delta_new(
    threshold: int, noise: str, scale: int, max_items: int, unit: int, policy: bool = False, greedy: bool = False
) -> float:
    """``max_k k P[Z >= T - a_k]`` over ``k = 1 .. max_items`` (with the relative margin); the policy greedy
    union's :func:`greedy_delta_new` with ``greedy``."""
    if greedy:
        return greedy_delta_new(threshold, scale, max_items, unit)
    ks = np.arange(1, max_items + 1, dtype=np.int64)
    tail = _log_tail_laplace if noise == "laplace" else _log_tail_gaussian
    worst = float(np.max(np.log(ks) + tail(threshold - new_item_weight(ks, noise, unit, policy), scale)))
    return math.exp(worst) * (1 + _MARGIN)


def check_noise_budget(noise: str, epsilon: float, delta: float) -> tuple[float, float]:
    """The checks every release of this package shares: the noise is ``laplace`` or ``gaussian``, epsilon a
    number in ``[1e-6, 50]``, delta in ``[0, 1)`` (:func:`userdp.privacy.check_delta`; a smallest positive
    delta is each release's own)."""
    if noise not in NOISES:
        raise ParameterError(f"the noise must be one of {', '.join(NOISES)}, got {noise!r}")
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise ParameterError("epsilon must be a number") from None
    dlt = check_delta(delta)
    if not (math.isfinite(eps) and 1e-6 <= eps <= 50):
        raise ParameterError(f"epsilon must lie in [1e-6, 50], got {epsilon!r}")
    return eps, dlt


def _check(epsilon: float, delta: float, max_items: int, noise: str) -> tuple[float, float, int]:
    eps, dlt = check_noise_budget(noise, epsilon, delta)
    if not 1e-100 <= dlt:
        raise ParameterError(f"a set union needs delta >= 1e-100 (no pure guarantee): an item only one person "
                             f"holds must be released with probability at most delta, got {delta!r}")  # fmt: skip
    if isinstance(max_items, bool) or not isinstance(max_items, int | np.integer) or not 1 <= max_items <= 10_000:
        raise ParameterError(f"max_items must be a whole number in [1, 10000], got {max_items!r}")
    return eps, dlt, int(max_items)


def calibrate_union(
    epsilon: float,
    delta: float,
    max_items: int,
    noise: str = "gaussian",
    unit: int = UNIT,
    *,
    policy: bool = False,
    cutoff_margin: float = 3.0,
    greedy: bool = False,
) -> UnionCalibration:
    """The noise scale and the threshold of a set union that is ``(epsilon, delta)``-DP for adding or
    removing one person (see the module's notes). For Gaussian noise half of ``delta`` goes to the noisy
    histogram, half to the threshold.

    With ``policy=True`` (Laplace noise only) the calibration is the policy Laplace histogram's
    (:mod:`userdp.vocabulary.policy`): the same scale, a threshold that bounds a new item's weight by
    ``ceil(unit / k)``, and the cutoff ``Gamma = T + cutoff_margin * t`` (Gopi et al.'s ``rho + alpha / epsilon``
    with ``alpha = cutoff_margin``; a public tuning constant).

    With ``greedy=True`` (Laplace noise only; implies ``policy``) it is the policy greedy histogram's
    (:mod:`userdp.vocabulary.greedy`): the same scale and cutoff rule, and a threshold whose new-item bound is
    :func:`greedy_delta_new` (one new item at ``unit``, the others at 0)."""
    policy = bool(policy or greedy)
    eps, dlt, max_items = _check(epsilon, delta, max_items, noise)
    try:
        margin = float(cutoff_margin)
    except (TypeError, ValueError):
        raise ParameterError(f"cutoff_margin must be a number in [0, 100], got {cutoff_margin!r}") from None
    if not 0.0 <= margin <= 100.0:
        raise ParameterError(f"cutoff_margin must lie in [0, 100], got {cutoff_margin!r}")
    if policy and noise != "laplace":
        raise ParameterError(
            "the policy histogram runs with Laplace noise only: policy Gaussian's l2 descent has no exact "
            "lattice form (its rounding breaks the contraction its guarantee rests on), and the l1 policy with "
            "Gaussian noise releases fewer items than the weighted Gaussian; use --noise laplace with --policy "
            "(noise='laplace', policy=True), or --noise gaussian without it"
        )
    if noise == "laplace":
        scale = math.ceil(unit / eps)  # l1 sensitivity unit: epsilon-DP exactly (unit / t <= epsilon)
        delta_g = 0.0
    else:
        delta_g = dlt / 2
        goal = delta_g * (1 - _MARGIN)

        def ok(w: int) -> bool:  # l2 sensitivity unit; zCDP of the discrete Gaussian, rho = unit^2 / (2 w^2)
            return zcdp_delta(unit * unit / (2.0 * w * w), eps) * _TRUNCATION + 2 * math.exp(-480) <= goal

        lo, hi = 1, unit
        while not ok(hi):
            lo, hi = hi, 2 * hi
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if ok(mid) else (mid, hi)
        scale = hi
    target = (dlt - delta_g) * (1 - _MARGIN)
    t_hi = _threshold(noise, int(scale), max_items, unit, target, policy, greedy)
    d_new = _delta_new(t_hi, noise, scale, max_items, unit, policy, greedy)
    cutoff = int(t_hi) + math.ceil(margin * scale) if policy else 0
    return UnionCalibration(
        noise, eps, dlt, max_items, unit, int(scale), int(t_hi), delta_g, d_new, policy, cutoff, bool(greedy)
    )


def _threshold(
    noise: str, scale: int, max_items: int, unit: int, target: float, policy: bool = False, greedy: bool = False
) -> int:
    """The smallest integer threshold ``T > unit`` whose :func:`_delta_new` is at most ``target``."""
    lo = unit  # T - a >= 1 for every weight a <= unit
    if _delta_new(lo + 1, noise, scale, max_items, unit, policy, greedy) <= target:
        return lo + 1
    t_hi = lo + scale
    while _delta_new(t_hi, noise, scale, max_items, unit, policy, greedy) > target:
        lo, t_hi = t_hi, t_hi + 2 * (t_hi - unit)
    while t_hi - lo > 1:
        mid = (lo + t_hi) // 2
        ok_mid = _delta_new(mid, noise, scale, max_items, unit, policy, greedy) <= target
        lo, t_hi = (lo, mid) if ok_mid else (mid, t_hi)
    return t_hi


def bound_contributions(
    offsets: np.ndarray, items: np.ndarray, max_items: int, rng: RngLike = None
) -> tuple[np.ndarray, np.ndarray]:
    """Keep at most ``max_items`` of each person's distinct items (repeats of an item within a person are
    dropped first, :func:`distinct_per_person`): a uniformly random subset for a person holding more (each
    item gets an independent random 64-bit key; the smallest keys stay, in one compiled pass over the
    persons). The choice reads only the person's own items and fresh randomness, so it leaves
    every person's contribution bounded without touching the guarantee. Returns the new
    ``(offsets, items)``, items in their original order."""
    offsets, items = distinct_per_person(offsets, items)
    deg = np.diff(offsets)
    if deg.size == 0 or deg.max(initial=0) <= max_items:
        return offsets, items
    heavy_edges = np.repeat(deg > max_items, deg)
    keys = np.zeros(items.size, dtype=np.uint64)
    keys[heavy_edges] = resolve_rng(rng).words(int(heavy_edges.sum()))
    keep = np.empty(items.size, dtype=np.bool_)
    _keep_smallest_keys(offsets, keys, np.int64(max_items), keep)
    new_deg = np.minimum(deg, max_items)
    return np.r_[0, np.cumsum(new_deg)].astype(np.int64), items[keep]


def distinct_per_person(offsets: np.ndarray, items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop repeats of an item within a person (keeping the first), in one compiled pass. The weights and
    the counts are per *distinct* item: a person listing an item twice must not give it twice the weight."""
    offsets = np.asarray(offsets, dtype=np.int64)
    items = np.asarray(items, dtype=np.int64)
    if items.size == 0:
        return offsets, items
    if items.min() < 0:
        raise ParameterError("item codes must be non-negative")
    keep = np.empty(items.size, dtype=np.bool_)
    n_new = np.empty(offsets.size - 1, dtype=np.int64)
    if _mark_first(offsets, items, np.full(int(items.max()) + 1, -1, dtype=np.int64), keep, n_new):
        return offsets, items
    return np.r_[0, np.cumsum(n_new)].astype(np.int64), items[keep]


@njit(cache=True)
def _mark_first(offsets, items, stamp, keep, n_new):
    """``keep`` the first occurrence of each item within each person (``stamp[i]`` = the last person seen
    with item ``i``); returns True when nothing repeats."""
    clean = True
    for u in range(offsets.size - 1):
        c = 0
        for e in range(offsets[u], offsets[u + 1]):
            i = items[e]
            if stamp[i] == u:
                keep[e] = False
                clean = False
            else:
                stamp[i] = u
                keep[e] = True
                c += 1
        n_new[u] = c
    return clean


@njit(cache=True)
def _keep_smallest_keys(offsets, keys, max_items, keep):
    """``keep`` marks, for every person, all items (at most ``max_items``) or those with the ``max_items``
    smallest random keys."""
    for u in range(offsets.size - 1):
        lo, hi = offsets[u], offsets[u + 1]
        if hi - lo <= max_items:
            keep[lo:hi] = True
            continue
        keep[lo:hi] = False
        order = np.argsort(keys[lo:hi])
        for j in range(max_items):
            keep[lo + order[j]] = True


def union_histogram(offsets: np.ndarray, items: np.ndarray, n_items: int, noise: str, unit: int = UNIT) -> np.ndarray:
    """The integer weight of every item (``int64``): the sum over persons holding it of
    :func:`person_weights` of the person's number of items."""
    deg = np.diff(np.asarray(offsets, dtype=np.int64))
    held = deg > 0
    w = np.zeros(deg.size, dtype=np.int64)
    w[held] = person_weights(deg[held], noise, unit)
    per_item = np.repeat(w, deg)
    # summed exactly in int64 (a float bincount is exact only below 2^53, and a refusal there would depend on
    # the data: how many persons hold an item)
    hist = np.zeros(int(n_items), dtype=np.int64)
    np.add.at(hist, np.asarray(items, dtype=np.int64), per_item)
    return hist


def _check_codes(items: np.ndarray, n_items: int) -> None:
    items = np.asarray(items)
    if items.size and (items.min() < 0 or items.max() >= n_items):
        raise ParameterError("item codes must lie in [0, n_items) (one code per label)")


def _bounded(offsets: np.ndarray, items: np.ndarray, cal: UnionCalibration, rng: RngLike, mult=None):
    """Each person's kept items (:func:`bound_contributions`) and, for the policy greedy union, their local
    counts (records per item, from repeats of an item in ``items`` or ``mult``; None otherwise)."""
    if cal.greedy:
        off_d, its_d, cnt = local_counts(offsets, items, mult)
        off, its = bound_contributions(off_d, its_d, cal.max_items, rng)
        return off, its, kept_counts(off_d, its_d, cnt, off, its)
    off, its = bound_contributions(offsets, items, cal.max_items, rng)
    return off, its, None


def _histogram(offsets: np.ndarray, items: np.ndarray, n_items: int, cal: UnionCalibration, rng: RngLike, counts=None):
    """The union's integer histogram and its candidates (items some person kept)."""
    if cal.greedy:
        hist = greedy_histogram(offsets, items, counts, n_items, cal.cutoff, cal.unit, rng)
        return hist, np.bincount(np.asarray(items, dtype=np.int64), minlength=int(n_items)) > 0
    if cal.policy:
        hist = policy_histogram(offsets, items, n_items, cal.cutoff, cal.unit, rng)
        return hist, np.bincount(np.asarray(items, dtype=np.int64), minlength=int(n_items)) > 0
    hist = union_histogram(offsets, items, n_items, cal.noise, cal.unit)
    return hist, hist > 0


def _select(hist: np.ndarray, cal: UnionCalibration, rng: RngLike, held: np.ndarray | None = None):
    src = resolve_rng(rng)
    present = np.flatnonzero(hist > 0 if held is None else held)  # items no one holds are never candidates
    if cal.noise == "laplace":
        z = discrete_laplace(cal.scale, present.size, src)
    else:
        z = discrete_gaussian(cal.scale * cal.scale, present.size, src)
    noisy = hist[present] + z
    chosen = noisy >= cal.threshold
    return present[chosen], noisy[chosen]


def _union(
    offsets, items, n_items, epsilon, delta, max_items, noise, rng, policy=False, cutoff_margin=3.0, greedy=False
):
    cal = calibrate_union(epsilon, delta, max_items, noise, policy=policy, cutoff_margin=cutoff_margin, greedy=greedy)
    _check_codes(items, n_items)
    src = resolve_rng(rng)
    off, its, cnt = _bounded(offsets, items, cal, src)
    hist, held = _histogram(off, its, n_items, cal, src, cnt)
    chosen, noisy = _select(hist, cal, src, held)
    return chosen, noisy, cal


def weighted_laplace_union(
    offsets: np.ndarray,
    items: np.ndarray,
    n_items: int,
    epsilon: float,
    delta: float,
    max_items: int = 100,
    rng: RngLike = None,
) -> tuple[np.ndarray, np.ndarray, UnionCalibration]:
    """Weighted Laplace set union (Gopi et al. 2020, section 3, with discrete Laplace noise).

    Parameters
    ----------
    offsets, items:
        Persons in CSR form: ``items[offsets[u]:offsets[u+1]]`` are person ``u``'s distinct item codes in
        ``[0, n_items)``.
    epsilon, delta:
        ``(epsilon, delta)``-DP for adding or removing one person.
    max_items:
        ``Delta_0``, the most items one person contributes (a public bound).

    Returns
    -------
    (codes, noisy weights, calibration)
        The released item codes (ascending), their noisy weights in lattice steps (``/ calibration.unit``
        for persons' weight; post-processing of the same noise), and the calibration. Publish the codes'
        *labels*, not the codes, unless the codes were assigned without looking at the data: codes numbered
        from the data's own items (as the engines do, by sorted label) shift when a person with a new item
        joins, and so reveal that person.
    """
    return _union(offsets, items, n_items, epsilon, delta, max_items, "laplace", rng)


def weighted_gaussian_union(
    offsets: np.ndarray,
    items: np.ndarray,
    n_items: int,
    epsilon: float,
    delta: float,
    max_items: int = 100,
    rng: RngLike = None,
) -> tuple[np.ndarray, np.ndarray, UnionCalibration]:
    """Weighted Gaussian set union (Gopi et al. 2020, section 3; the baseline of Privacy on Beam and
    PipelineDP), with discrete Gaussian noise. Parameters and returns as :func:`weighted_laplace_union`."""
    return _union(offsets, items, n_items, epsilon, delta, max_items, "gaussian", rng)


def policy_laplace_union(
    offsets: np.ndarray,
    items: np.ndarray,
    n_items: int,
    epsilon: float,
    delta: float,
    max_items: int = 100,
    cutoff_margin: float = 3.0,
    rng: RngLike = None,
) -> tuple[np.ndarray, np.ndarray, UnionCalibration]:
    """Policy Laplace set union (Gopi et al. 2020, section 4, Algorithm 7 with the threshold of their
    Theorem 4.2's proof), exact on the lattice (:mod:`userdp.vocabulary.policy`), with discrete Laplace
    noise. ``cutoff_margin`` is the paper's ``alpha``: persons stop raising an item at
    ``Gamma = T + alpha t`` (``t`` the noise scale; the paper uses 3). Other parameters and returns as
    :func:`weighted_laplace_union`."""
    return _union(offsets, items, n_items, epsilon, delta, max_items, "laplace", rng, True, cutoff_margin)


def policy_greedy_union(
    offsets: np.ndarray,
    items: np.ndarray,
    n_items: int,
    epsilon: float,
    delta: float,
    max_items: int = 100,
    cutoff_margin: float = 3.0,
    rng: RngLike = None,
) -> tuple[np.ndarray, np.ndarray, UnionCalibration]:
    """Policy greedy set union (Carvalho, Wang & Gondara, AAAI 2022: the greedy policy in the order of each
    person's local item counts), exact on the lattice (:mod:`userdp.vocabulary.greedy`), with discrete Laplace
    noise and the threshold of :func:`greedy_delta_new`. A person listing an item several times in ``items``
    holds it that many times (its local count; the weight is per distinct item). ``cutoff_margin``: the cutoff
    ``Gamma = T + alpha t``, as in :func:`policy_laplace_union`. Other parameters and returns as
    :func:`weighted_laplace_union`."""
    return _union(offsets, items, n_items, epsilon, delta, max_items, "laplace", rng, True, cutoff_margin, True)


# --------------------------------------------------------------------------------------------
# max_items="auto": the contribution bound chosen privately from the data
# --------------------------------------------------------------------------------------------

MAX_ITEMS_GRID = tuple(1 << j for j in range(14))  # the public candidates: 1, 2, 4, ..., 8192
AUTO_QUANTILES = {"gaussian": 0.9, "laplace": 0.1}  # per noise: the share of persons the bound keeps whole
AUTO_QUANTILE = AUTO_QUANTILES["gaussian"]  # (the Gaussian unions' quantile, the default's)
AUTO_FRACTION = 0.02  # the share of epsilon spent on choosing it (no delta)


@dataclass(frozen=True)
class BoundChoice:
    """A contribution bound ``max_items`` chosen privately (:func:`choose_max_items`): the chosen ``value``,
    the ``epsilon`` its choice spent (pure DP), and the public grid and quantile it was chosen with."""

    value: int
    epsilon: float
    grid: tuple[int, ...] = MAX_ITEMS_GRID
    quantile: float = AUTO_QUANTILE


def auto_quantile(noise: str) -> float:
    """The quantile ``max_items="auto"`` chooses for a union with ``noise`` (:data:`AUTO_QUANTILES`)."""
    if noise not in AUTO_QUANTILES:
        raise ParameterError(f"noise must be 'laplace' or 'gaussian', got {noise!r}")
    return AUTO_QUANTILES[noise]


def persons_within(k: np.ndarray, grid: tuple[int, ...] = MAX_ITEMS_GRID) -> np.ndarray:
    """``[#{persons with 1 <= k_i <= g} for g in grid] + [#{persons with k_i >= 1}]`` (``int64``): from each
    person's number ``k_i`` of distinct items, how many a bound ``g`` keeps whole, and how many persons hold
    any item. Sums over disjoint sets of persons add up."""
    k = np.asarray(k, dtype=np.int64)
    k = k[k >= 1]
    within = np.searchsorted(np.sort(k), np.asarray(grid, dtype=np.int64), side="right")
    return np.r_[within, k.size].astype(np.int64)


def max_items_grid_part(sets, mult: np.ndarray, grid: tuple[int, ...] = MAX_ITEMS_GRID):
    """One batch of whole persons' share of :func:`persons_within`, as one row (label ``""``) for
    :meth:`userdp.engines.Engine.key_record_sums` (``sets``: each item once per person; ``mult`` unused):
    the per-person distinct counts are computed where the data are, and only the row's sums leave."""
    k = np.diff(np.asarray(sets.offsets, dtype=np.int64))
    return np.array([""], dtype=object), persons_within(k, grid).reshape(1, -1)


def max_items_scores(within: np.ndarray, quantile: float = AUTO_QUANTILE) -> np.ndarray:
    """The rank scores ``s_g = -|W_g - quantile * n|`` of the candidates (``within = [W_g..., n]``,
    :func:`persons_within`), for any ``quantile`` ``q`` in ``[0, 1]`` (:data:`AUTO_QUANTILES`: 0.9 for the
    Gaussian unions, the Laplace unions' own).

    Sensitivity at most 1, whatever ``q``: adding (or removing) one person with ``k`` distinct items changes
    ``n`` by 1 (if ``k >= 1``; else nothing) and each ``W_g`` by 1 (``g >= k``) or 0 (``g < k``), so
    ``W_g - q n`` moves by ``1 - q`` or ``-q`` and, by the triangle inequality, ``s_g`` by at most
    ``max(q, 1 - q) <= 1`` (0.9 at ``q = 0.9`` or ``0.1``, 0.5 at the median)."""
    within = np.asarray(within, dtype=np.float64).reshape(-1)
    return -np.abs(within[:-1] - quantile * within[-1])


def choose_max_items(
    within: np.ndarray,
    epsilon_select: float,
    grid: tuple[int, ...] = MAX_ITEMS_GRID,
    quantile: float = AUTO_QUANTILE,
    rng: RngLike = None,
) -> BoundChoice:
    """The bound ``max_items`` by the exponential mechanism over the public ``grid`` with the rank scores of
    :func:`max_items_scores` (sensitivity 1): ``epsilon_select``-DP, a private ``quantile``-quantile of the
    persons' distinct-item counts rounded to the grid.

    ``quantile``: the library's callers pass :func:`auto_quantile` of the union's noise, a public parameter.

    Why a quantile, and these constants (measured, :file:`experiments/vocabulary_bound.py`): the items a
    weighted union releases rise steeply with the bound up to about the 90-98% quantile of the persons'
    counts ``k_i`` and fall slowly beyond it (a larger bound only raises the threshold's ``log max_items``
    term); at ``quantile = 0.9`` on the doubling grid the release is within 2-5% of the best fixed bound on
    IMDB (best 362-384 items per person) and the Reddit sample (best 91-96), 5% on Foursquare venues at
    epsilon 4 (best 128-181). A rank score has sensitivity 1 whatever the candidate, so 2% of epsilon suffices
    where thousands of persons vote; a score of the items released (GEM over the candidates' expected
    releases) has sensitivity about ``sqrt(max_items) / sigma`` items, needs a histogram per candidate (one
    pass over the data each), and spends more of the budget for the same precision.

    Why a lower quantile for Laplace noise (:data:`AUTO_QUANTILES`): a person's weight per item is ``1 / k``
    there (``1 / sqrt(k)`` with Gaussian noise), so a larger bound spreads the same unit of weight thinner and
    the best fixed bounds are small (1-3 items on IMDB, the Reddit sample and Amazon Fashion). Measured with the
    weighted Laplace union, the set alone, epsilon 1 and 4, delta 1e-5, the worst expected auto / best fixed
    ratio over those and Foursquare venues is 0.50 at ``q = 0.1`` against 0.18, 0.17, 0.07 and 0.03 at
    0.25, 0.5, 0.75 and 0.9 (IMDB at epsilon 1: 487 items against 452 at 0.9; the best bound, 1, gives 640).
    The Gaussian unions keep 0.9 (worst ratio 0.86, against 0.83 at 0.75 and 0.10-0.72 below)."""
    if not 0.0 <= float(quantile) <= 1.0:
        raise ParameterError(f"the quantile must lie in [0, 1], got {quantile!r}")
    s = max_items_scores(within, quantile)
    i = exponential_mechanism(s, 1.0, epsilon_select, rng)
    return BoundChoice(int(grid[i]), float(epsilon_select), tuple(grid), float(quantile))


def auto_bound_epsilon(epsilon: float) -> float:
    """The selection's share of ``epsilon`` under ``max_items="auto"``: ``AUTO_FRACTION * epsilon``."""
    return float(epsilon) * AUTO_FRACTION


def choose_max_items_with(record_sums, epsilon: float, rng: RngLike = None, noise: str = "gaussian") -> BoundChoice:
    """:func:`choose_max_items` from an engine's :meth:`~userdp.engines.Engine.key_record_sums` (``record_sums(fn,
    width)``): :func:`max_items_grid_part` runs on batches of whole persons where the data are (on Spark's
    executors too); one row of sums reaches this function. ``epsilon`` is the release's total; the selection
    spends :func:`auto_bound_epsilon` of it, at the quantile :func:`auto_quantile` of the union's ``noise``."""
    q = auto_quantile(noise)  # (checked before the data are read)
    from functools import partial

    width = len(MAX_ITEMS_GRID) + 1
    _, rows = record_sums(partial(max_items_grid_part, grid=MAX_ITEMS_GRID), width)
    rows = np.asarray(rows, dtype=np.int64).reshape(-1, width)
    within = rows.sum(axis=0) if rows.shape[0] else np.zeros(width, dtype=np.int64)
    return choose_max_items(within, auto_bound_epsilon(epsilon), quantile=q, rng=rng)


_MAX_RELEASED = 1 << 31  # a public bound on how many counts one release holds (their calibration's dim)


def _bound_of(max_items, eps: float) -> tuple[int | None, float, BoundChoice | None]:
    """``(the bound to calibrate for, the selection's epsilon, the choice)`` of a ``max_items`` parameter:
    ``"auto"`` (the grid's largest candidate, so that every refusal covers every choice; its share of epsilon),
    a :class:`BoundChoice` (checked: its value on the grid, its epsilon the share ``"auto"`` spends, its
    quantile one of :data:`AUTO_QUANTILES`; any of them is a sensitivity-1 choice, and the release states the
    one used), or a whole number (no selection)."""
    if isinstance(max_items, str):
        if max_items != "auto":
            raise ParameterError(f"max_items must be 'auto' or a whole number in [1, 10000], got {max_items!r}")
        return max(MAX_ITEMS_GRID), auto_bound_epsilon(eps), None
    if isinstance(max_items, BoundChoice):
        if (
            max_items.grid != MAX_ITEMS_GRID
            or max_items.quantile not in AUTO_QUANTILES.values()
            or max_items.value not in MAX_ITEMS_GRID
            or max_items.epsilon != auto_bound_epsilon(eps)
        ):
            raise ParameterError("a chosen max_items must come from choose_max_items with this epsilon's share")
        return max_items.value, max_items.epsilon, max_items
    return max_items, 0.0, None


def plan_vocabulary(
    epsilon: float,
    delta: float,
    max_items: int | str | BoundChoice = "auto",
    noise: str = "gaussian",
    policy: bool = False,
    count_fraction: float = 0.5,
    cutoff_margin: float = 3.0,
    greedy: bool = False,
) -> dict:
    """Check every parameter of :func:`private_vocabulary` and split its budget, before any data is read:
    every refusal depends on the parameters alone (the counts' calibration is checked for a public bound of
    ``2^31`` released items, so that how many items the selection released cannot decide a refusal).

    With ``max_items="auto"`` the bound's choice (:func:`choose_max_items`) takes ``AUTO_FRACTION`` of
    ``epsilon`` and no delta; the set and the counts split the rest as ``count_fraction`` says. Every
    calibration is checked at the grid's largest candidate (the hardest), so no choice can be refused later;
    ``"calibration"`` is then that candidate's, and the release calibrates again for the chosen bound
    (a :class:`BoundChoice` as ``max_items``)."""

    def calibrate(eps_set: float, delta_set: float, m: int) -> UnionCalibration:
        return calibrate_union(eps_set, delta_set, m, noise, policy=policy, cutoff_margin=cutoff_margin, greedy=greedy)

    plan = budget_plan(epsilon, delta, max_items, noise, count_fraction, calibrate)
    plan["algorithm"] = "policy-greedy" if greedy else "policy" if policy else "weighted"
    return plan


def budget_plan(
    epsilon: float, delta: float, max_items: int | str | BoundChoice, noise: str, count_fraction: float, calibrate
) -> dict:
    """The budget split of a vocabulary release (the bound's choice under ``max_items="auto"``, the set's
    share, the counts' share) and the checks every selection shares; ``calibrate(epsilon_set, delta_set,
    max_items)`` calibrates the selection (before the counts' check, so that a selection's refusal comes
    first), at the grid's largest candidate under ``"auto"``."""
    eps0, _ = check_noise_budget(noise, epsilon, delta)
    cap, eps_bound, choice = _bound_of(max_items, eps0)
    eps, dlt, cap = _check(epsilon, delta, cap, noise)
    try:
        frac = float(count_fraction)
    except (TypeError, ValueError):
        raise ParameterError(f"count_fraction must be a number in [0, 1), got {count_fraction!r}") from None
    if not 0.0 <= frac < 1.0:
        raise ParameterError(f"count_fraction must lie in [0, 1) (the set needs some budget), got {count_fraction!r}")
    eps_rest = eps - eps_bound
    eps_count = eps_rest * frac
    eps_set = eps_rest - eps_count
    while eps_bound + eps_set + eps_count > eps:  # the parts never add up to more than epsilon, to the last bit
        eps_set = math.nextafter(eps_set, 0.0)
    delta_count = dlt / 2 if (noise == "gaussian" and frac > 0) else 0.0
    delta_set = dlt - delta_count
    cal = calibrate(eps_set, delta_set, cap)
    if frac > 0:
        try:
            if noise == "laplace":
                calibrate_laplace(float(cap), eps_count, dim=_MAX_RELEASED)
            else:
                calibrate_gaussian(math.sqrt(cap), eps_count, delta_count, dim=_MAX_RELEASED)
        except ParameterError as exc:
            raise ParameterError(f"the counts' share of the budget is too small ({exc}); raise count_fraction "
                                 "or pass 0 to release the set alone") from None  # fmt: skip
    return {
        "epsilon": eps,
        "delta": dlt,
        "max_items": cap,
        "auto": eps_bound > 0 and choice is None,
        "choice": choice,
        "epsilon_bound": eps_bound,
        "count_fraction": frac,
        "epsilon_set": eps_set,
        "delta_set": delta_set,
        "epsilon_counts": eps_count,
        "delta_counts": delta_count,
        "calibration": cal,
    }


def vocabulary_algorithm(algorithm: str | None, policy: bool, rounds=None, ratio=None) -> str:
    """The selection algorithm of a vocabulary release: ``algorithm`` (one of :data:`ALGORITHMS`), or
    ``"policy"``/``"weighted"`` from the ``policy`` flag; ``rounds`` and ``ratio`` only with ``"sips"``."""
    if algorithm is None:
        algo = "policy" if policy else "weighted"
    elif algorithm not in ALGORITHMS:
        raise ParameterError(f"the algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    else:
        algo = algorithm
    if policy and algo != "policy":  # (the policy greedy union is algorithm="policy-greedy" alone)
        raise ParameterError(f"policy=True (--policy) is the policy algorithm; it cannot be combined with {algo!r}")
    if algo != "sips" and (rounds is not None or ratio is not None):
        raise ParameterError("rounds and ratio are DP-SIPS's schedule (algorithm 'sips')")
    return algo


def private_vocabulary(
    offsets: np.ndarray,
    items: np.ndarray,
    labels: np.ndarray,
    epsilon: float,
    delta: float,
    *,
    max_items: int | str | BoundChoice = "auto",
    noise: str = "gaussian",
    policy: bool = False,
    count_fraction: float = 0.5,
    cutoff_margin: float = 3.0,
    greedy: bool = False,
    multiplicity: np.ndarray | None = None,
    rng: RngLike = None,
) -> Release:
    """Which items, and how many persons hold each: a weighted set union, then a noisy person count of every
    item it released.

    Parameters
    ----------
    offsets, items:
        Persons in CSR form over item codes ``[0, len(labels))`` (each person's items distinct).
    labels:
        The items' labels in code order. They are read off the data: only the selected ones are released.
    epsilon, delta:
        ``(epsilon, delta)``-DP for adding or removing one person, in total.
    max_items:
        ``Delta_0``: the most items one person contributes. ``"auto"`` (the default): chosen privately from
        the persons' numbers of distinct items, with ``AUTO_FRACTION`` (2%) of ``epsilon`` and no delta
        (:func:`choose_max_items`: the exponential mechanism over the public grid ``1, 2, 4, ..., 8192``, a
        private quantile, :func:`auto_quantile` of ``noise``: 90% with Gaussian noise, 10% with Laplace
        noise, for every Laplace union); the rest of the budget goes to the set (and the counts). A whole number in
        ``[1, 10000]``: that public bound, and the whole budget to the set (and the counts).
    noise:
        ``"gaussian"`` (default) or ``"laplace"``, for both steps.
    policy:
        Select with the policy Laplace histogram (:func:`policy_laplace_union`; ``noise="laplace"`` only)
        rather than the weighted one.
    count_fraction:
        Share of ``epsilon`` (and, with Gaussian noise, of ``delta``) spent on the counts; ``0`` releases the
        set alone.
    cutoff_margin:
        The policy's ``alpha`` (:func:`policy_laplace_union`).
    greedy:
        Select with the policy greedy histogram (:func:`policy_greedy_union`; ``noise="laplace"`` only): each
        person fills their items to the cutoff in the order of their local counts, most records first.
    multiplicity:
        With ``greedy``: the records each entry of ``items`` stands for (an engine's
        :meth:`~userdp.engines.Engine.key_records`); by default each entry is one record, and a person listing
        an item ``c`` times holds it ``c`` times. The local counts order the person's items only.

    Returns
    -------
    Release
        ``value``: ``{"items": labels released (sorted), "counts": noisy person counts or None}``. Each count
        is the number of persons holding the item among those persons' kept items (at most ``max_items``
        each), plus lattice noise of the stated standard deviation. Guarantee: ``ApproxDP(epsilon, delta)``,
        add/remove one person (sequential composition of the steps: the bound's choice, the set, the
        counts; ``params`` states each one's share).
    """
    if greedy and policy:
        raise ParameterError("policy=True is the policy Laplace union; greedy=True the policy greedy union: not both")
    if multiplicity is not None and np.asarray(multiplicity).shape != np.asarray(items).shape:
        raise ParameterError("multiplicity needs one number per entry of items")
    plan = plan_vocabulary(epsilon, delta, max_items, noise, policy, count_fraction, cutoff_margin, greedy)
    src = resolve_rng(rng)
    labels = np.asarray(labels)
    _check_codes(items, labels.size)
    if plan["auto"]:  # the bound first, from the persons' distinct-item counts (its own share of epsilon)
        k = np.diff(distinct_per_person(offsets, items)[0])
        choice = choose_max_items(persons_within(k), plan["epsilon_bound"], quantile=auto_quantile(noise), rng=src)
        plan = plan_vocabulary(epsilon, delta, choice, noise, policy, count_fraction, cutoff_margin, greedy)
    cal = plan["calibration"]
    off, its, cnt = _bounded(offsets, items, cal, src, multiplicity)
    hist, held_any = _histogram(off, its, labels.size, cal, src, cnt)
    holders = np.bincount(its, minlength=labels.size)
    return _vocabulary_release(labels, hist, holders, held_any, plan, cal.policy, src)


def vocabulary_sum_columns(k: np.ndarray, noise: str) -> np.ndarray:
    """The per-person rows of a weighted union for :meth:`userdp.engines.Engine.bounded_item_sums`: the
    weight :func:`person_weights` of ``k`` kept items, and 1 (the person holds the item)."""
    k = np.asarray(k, dtype=np.int64)
    return np.column_stack([person_weights(k, noise), np.ones(k.size, dtype=np.int64)])


def private_vocabulary_from_sums(
    labels: np.ndarray,
    sums: np.ndarray,
    epsilon: float,
    delta: float,
    *,
    max_items: int | BoundChoice = 100,
    noise: str = "gaussian",
    count_fraction: float = 0.5,
    rng: RngLike = None,
) -> Release:
    """:func:`private_vocabulary` (weighted) from per-item sums already bounded and aggregated (by an engine,
    :meth:`userdp.engines.Engine.bounded_item_sums` with :func:`vocabulary_sum_columns`, possibly on Spark's
    executors): ``sums[:, 0]`` the items' weights, ``sums[:, 1]`` their holders among the kept items.
    ``max_items`` is the bound the sums were bounded with: a whole number, or the :class:`BoundChoice` made
    before (:func:`choose_max_items_with`), whose share of epsilon the release accounts."""
    if isinstance(max_items, str):
        raise ParameterError("sums bounded already need the bound they were bounded with, not 'auto': choose it "
                             "first (choose_max_items_with) and pass the choice")  # fmt: skip
    plan = plan_vocabulary(epsilon, delta, max_items, noise, False, count_fraction)
    labels = np.asarray(labels)
    sums = np.asarray(sums, dtype=np.int64).reshape(-1, 2)
    holders = sums[:, 1]
    return _vocabulary_release(labels, sums[:, 0], holders, holders > 0, plan, False, resolve_rng(rng))


def _vocabulary_release(labels, hist, holders, held_any, plan, policy, src, chosen=None) -> Release:
    eps, dlt, max_items, frac = plan["epsilon"], plan["delta"], plan["max_items"], plan["count_fraction"]
    eps_set, delta_set = plan["epsilon_set"], plan["delta_set"]
    eps_count, delta_count = plan["epsilon_counts"], plan["delta_counts"]
    cal = plan["calibration"]
    noise = cal.noise
    sips = plan.get("algorithm") == "sips"
    greedy = bool(getattr(cal, "greedy", False))
    if chosen is None:
        chosen, _ = _select(hist, cal, src, held_any)
    counts = None
    count_sd = None
    if frac > 0:
        # persons per released item, among the kept items: one person adds 1 to at most max_items of them
        held = np.asarray(holders)[chosen].astype(np.float64)
        if noise == "laplace":
            counts = laplace_mechanism(held, float(max_items), eps_count, src) if held.size else held
            count_sd = math.sqrt(2.0) * max_items / eps_count
        else:
            sens = math.sqrt(max_items)
            counts = gaussian_mechanism(held, sens, eps_count, delta_count, src) if held.size else held
            count_sd = calibrate_gaussian(sens, eps_count, delta_count, dim=max(1, held.size)).sigma
    guarantee = ApproxDP(eps, dlt, Neighbours.ADD_REMOVE_USER)
    order = np.argsort(labels[chosen], kind="stable")
    how = (
        f"a person spends weight 1 on their kept items, most held first, each up to {cal.cutoff / cal.unit:.4g}"
        if greedy
        else f"a person spends weight 1 on their kept items in equal shares, none past {cal.cutoff / cal.unit:.4g}"
        if policy
        else f"a person with k kept items gives each {'1/k' if noise == 'laplace' else '1/sqrt(k)'}"
    )
    if sips:
        sel = (
            f"in each of {len(cal.rounds)} rounds, on the items not released yet, an item held by persons of total "
            f"weight h ({how}, k among the items left) is released with probability P(h + noise >= T), T = "
            + ", ".join(f"{t:.4g}" for t in cal.thresholds)
            + ", noise sd "
            + ", ".join(f"{x:.3g}" for x in cal.noise_sds)
        )
    else:
        sel = (
            f"an item held by persons of total weight h ({how}) is released with probability "
            f"P(h + noise >= {cal.threshold_in_persons:.4g}), noise sd {cal.noise_sd_in_persons:.3g}"
        )
    error = ErrorStatement(
        f"{sel}; an item only one person holds, with probability at most {cal.delta_new:.3g}"
        + (
            f"; each person keeps at most {max_items} items (chosen privately, a "
            f"{100 * plan['choice'].quantile:g}% quantile of the persons' item counts)"
            if plan["choice"] is not None
            else ""
        )
        + (f"; each count has noise sd {count_sd:.3g} and counts at most {max_items} items per person" if frac else "")
    )
    return Release(
        {"items": labels[chosen][order], "counts": None if counts is None else np.asarray(counts)[order]},
        guarantee,
        (
            f"max_items chosen privately (exponential mechanism, a {100 * plan['choice'].quantile:g}% quantile of "
            "the persons' item counts) + "
            if plan["choice"] is not None
            else ""
        )
        + (
            f"DP-SIPS, {len(cal.rounds)} rounds of the weighted gaussian set union (Swanberg et al. 2023)"
            if sips
            else "policy greedy laplace set union (Carvalho, Wang & Gondara 2022)"
            if greedy
            else f"{'policy' if policy else 'weighted'} {noise} set union (Gopi et al. 2020)"
        )
        + (" + noisy person counts" if frac else ""),
        {
            "epsilon": eps,
            "delta": dlt,
            "max_items": max_items,
            "max_items_chosen": plan["choice"] is not None,
            "max_items_quantile": plan["choice"].quantile if plan["choice"] is not None else None,
            "epsilon_bound": plan["epsilon_bound"],
            "noise": noise,
            "policy": bool(policy) and not greedy,
            "greedy": greedy,
            "cutoff": cal.cutoff / cal.unit if policy else None,
            "count_fraction": frac,
            "epsilon_set": eps_set,
            "delta_set": delta_set,
            "epsilon_counts": eps_count,
            "delta_counts": delta_count,
            "threshold": cal.threshold_in_persons,
            "noise_sd": cal.noise_sd_in_persons,
            "count_sd": count_sd,
            **(
                {
                    "algorithm": "sips",
                    "rounds": len(cal.rounds),
                    "ratio": plan["ratio"],
                    "thresholds": list(cal.thresholds),
                    "noise_sds": list(cal.noise_sds),
                }
                if sips
                else {}
            ),  # fmt: skip
        },
        error,
        {"composed_of": _parts(plan)},
        stated_losses(plan),
    )


_TAIL_TV = 2.0 * 10_000 * 2.0 * math.exp(-480.0)  # see stated_losses


def gaussian_rho_bound(epsilon: float, delta: float) -> float:
    """An upper bound on the ``rho = (D + rounding)^2 / (2 sigma^2)`` of every lattice Gaussian that
    :func:`userdp.noise.calibrate_gaussian` calibrates to ``(epsilon, delta)``, whatever its dimension: the
    calibration makes :func:`~userdp.noise.zcdp_delta` of that ``rho`` at most ``delta (1 - 1e-9)``, and
    ``zcdp_delta`` increases with ``rho``, so it is below the ``rho`` at which ``zcdp_delta`` first exceeds
    ``delta (1 - 1e-9)`` (found by bisection to a relative ``1e-13``, the upper end kept), plus a relative
    ``1e-11`` for the numerical minimization inside ``zcdp_delta``. At that ``rho`` the conversion still gives
    at most ``delta`` (tested)."""
    eps, goal = float(epsilon), float(delta) * (1 - 1e-9)
    lo, hi = 0.0, 1.0
    while zcdp_delta(hi, eps) <= goal:
        lo, hi = hi, 2 * hi
    for _ in range(400):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if zcdp_delta(mid, eps) <= goal else (lo, mid)
        if hi - lo <= 1e-13 * hi:
            break
    return hi * (1 + 1e-11)


def stated_losses(plan: dict) -> tuple:
    """The zCDP guarantee a Gaussian weighted vocabulary release states (``Release.losses``), from its public
    plan alone: one :class:`~userdp.privacy.composition.ZCDPLoss` for adding or removing one person.

    * the bound's choice (``max_items="auto"``): the exponential mechanism is ``epsilon_bound``-DP, hence
      ``epsilon_bound^2 / 2``-zCDP (Bun & Steinke 2016, Proposition 1.4);
    * the set: the discrete Gaussian histogram of variance ``w^2`` on the items the smaller dataset holds, to
      which the person adds a vector of l2 norm at most ``unit``: ``unit^2 / (2 w^2)``-zCDP (Canonne, Kamath &
      Steinke 2020, Proposition 5 and Theorem 14; ``w`` does not depend on ``max_items``); an item only the
      person holds is released with probability at most the threshold's share ``delta_set - delta_gaussian``,
      outside which event the output is a post-processing of that histogram: approximate zCDP with that
      ``delta`` (Bun & Steinke 2016, Definition 8.1);
    * the counts: :func:`gaussian_rho_bound` of their ``(epsilon, delta)`` (their dimension, the number of
      released items, is not known before the data are read; the bound holds for every dimension);
    * the samplers cut the noise at ``32 sigma`` (mass at most ``2 e^-480`` per coordinate): for two neighbours
      only the coordinates the person moves (at most ``max_items <= 10,000`` in the set and as many counts)
      need their exact law, so the release is within total variation ``2 * 10,000 * 2 e^-480`` of one that is
      approximately zCDP as above.

    zCDP composes adaptively by adding ``rho`` and ``delta`` (Bun & Steinke 2016, Lemma 2.3 and section 8).
    Nothing is stated for Laplace noise, the policy unions or DP-SIPS (their ``(epsilon, delta)`` is charged),
    nor where the stated loss would not imply the release's guarantee at its ``epsilon``."""
    from ..privacy.composition import ZCDPLoss

    cal = plan["calibration"]
    if cal.noise != "gaussian" or plan.get("algorithm") != "weighted":
        return ()
    rho = plan["epsilon_bound"] ** 2 / 2 + cal.unit**2 / (2.0 * cal.scale**2)
    if plan["count_fraction"] > 0:
        rho += gaussian_rho_bound(plan["epsilon_counts"], plan["delta_counts"])
    loss = ZCDPLoss(rho, plan["delta_set"] - cal.delta_gaussian, _TAIL_TV, plan["epsilon"])
    eps, dlt = loss.epsilon_delta()
    if eps > plan["epsilon"] or dlt > plan["delta"]:
        return ()
    return (loss,)


def _parts(plan: dict) -> dict:
    """Each step's typed guarantee (add/remove one person); their sequential composition is the release's."""
    user = Neighbours.ADD_REMOVE_USER
    parts = {}
    if plan["epsilon_bound"] > 0:
        parts["max_items"] = PureDP(plan["epsilon_bound"], user)
    parts["set"] = ApproxDP(plan["epsilon_set"], plan["delta_set"], user)
    if plan["count_fraction"] > 0:
        parts["counts"] = ApproxDP(plan["epsilon_counts"], plan["delta_counts"], user)
    return parts

"""DP-SIPS (Swanberg, Desfontaines & Haney 2023, "DP-SIPS: a simpler, more scalable mechanism for
differentially private partition selection"): rounds of the weighted Gaussian set union, each round run on
what the earlier rounds left.

**The mechanism.** A schedule splits the budget over ``r`` rounds with fractions ``f_1, ..., f_r`` (summing
to 1; geometric, ``f_i ∝ ratio^(i-1)``, so that later rounds, which see only the items still unreleased,
get more). Let ``S_0`` be empty. Round ``i``:

1. every person removes from their set the items of ``S_{i-1}`` (released so far), then keeps at most
   ``max_items`` of what remains (a uniformly random subset, fresh randomness each round) and gives each of
   their ``k`` kept items the weight ``floor(U / sqrt(k))`` (:func:`~userdp.vocabulary.person_weights`, l2
   norm at most ``U``: the weighted Gaussian union of :mod:`userdp.vocabulary.union`);
2. every item some person kept this round gets discrete Gaussian noise of variance ``w_i^2`` and is released
   when its weight plus noise is at least ``T_i``: ``S_i = S_{i-1} ∪ {released}``.

The output is ``S_r``. A person whose items were released early spends their whole unit on the rest in
later rounds (their ``k`` shrinks, each weight grows): this is where DP-SIPS gains over one round.

**Calibration.** ``delta = delta_G + delta_N`` with ``delta_G = delta / 2`` (as the one-round union). The
widths are ``w_i = ceil(c / sqrt(f_i))`` for the smallest integer ``c`` with
``zcdp_delta(sum_i U^2 / (2 w_i^2), epsilon) * K^r + 2 r exp(-480) <= delta_G`` (``K = 1 / (1 - 2
exp(-480))`` and ``2 exp(-480)``: the sampler's cut at ``32 w``, counted once per round as the one-round
union counts it once); with one round this is :func:`~userdp.vocabulary.calibrate_union`'s width. Round
``i``'s threshold ``T_i`` is the smallest integer whose new-item bound ``delta_N,i = max_k k P[Z_i >= T_i -
a_k]`` (the sampler's tail, :mod:`userdp.vocabulary.union`) is at most ``f_i delta_N``, so
``sum_i delta_N,i <= delta_N``.

**Privacy: (epsilon, delta)-DP for adding or removing one person p.** Let ``D`` be the smaller dataset and
``D' = D + p``. Fix every person's bounding randomness (the proof holds for each fixed value, hence for the
mixture). In round ``i`` of a run on ``D'`` call an item *new* when p kept it and no person of ``D`` did.

1. *The auxiliary mechanism.* Let ``M'`` run on ``D'`` as ``M`` does, except that new items are never
   released (their noise is drawn and ignored). Couple ``M(D')`` and ``M'(D')`` on the same randomness:
   they agree until the first round in which a new item passes its threshold; call ``B`` that event.
2. *Each round of* ``M'(D')`` *against* ``M(D)`` *is a Gaussian mechanism.* Given the history ``S_{i-1}``
   (the same in both runs), the persons of ``D`` keep the same items in both, so the candidates of ``M(D)``
   (items a person of ``D`` kept) are exactly the candidates ``M'(D')`` may release, and the two noisy
   histograms on them differ by p's vector restricted to them, of l2 norm at most ``U``. The discrete
   Gaussian of variance ``w_i^2`` is ``rho_i = U^2 / (2 w_i^2)``-zCDP for that (Canonne, Kamath & Steinke
   2020, Theorem 14), and the round's output is post-processing of it.
3. *Composition.* zCDP composes adaptively by adding ``rho`` (Bun & Steinke 2016, Lemma 2.3), so ``M(D)``
   and ``M'(D')`` are ``rho = sum_i rho_i``-zCDP apart in both directions, hence ``(epsilon, delta_G)``
   indistinguishable (Canonne, Kamath & Steinke 2020, Corollary 13; the truncation factors as above). For
   Gaussian rounds adding the ``rho_i`` loses nothing: ``r`` Gaussians of widths ``w_i`` are one Gaussian
   of ``1 / w^2 = sum_i 1 / w_i^2``, whose ``rho`` is ``sum_i rho_i``, so the rounds cost exactly what one
   round of that width costs under the same accounting. The conversion from zCDP to ``(epsilon, delta)`` is
   the one-round union's and has its slack (a PLD accountant would be tighter, for one round as for ``r``,
   but it needs the discrete Gaussian's own privacy profile, which can exceed the continuous Gaussian's;
   userdp keeps zCDP here as the one-round union does). The threshold's part is not a Gaussian's and is
   counted separately (step 4).
4. *The new items.* Given the whole trajectory of ``M'(D')``, a new item of round ``i`` passes with
   probability at most ``delta_N,i`` whatever p's ``k <= max_items`` kept items are (its weight is
   ``a_k``; the noise of new items is independent of the trajectory), so ``P[B | trajectory] <= sum_i
   delta_N,i <= delta_N`` by the union bound.
5. *Assembly* (the one-round argument of :mod:`userdp.vocabulary.union`, with ``x = P[M'(D') in E]``): by
   steps 1 and 4, ``(1 - delta_N) x <= P[M(D') in E] <= x + delta_N``; by step 3, ``P[M(D) in E] <= min(1,
   e^eps x + delta_G)`` and ``x <= e^eps P[M(D) in E] + delta_G``. Hence ``P[M(D) in E] - e^eps P[M(D')
   in E] <= max_x min(1, e^eps x + delta_G) - e^eps x (1 - delta_N) <= delta_G + delta_N`` and ``P[M(D')
   in E] <= e^eps P[M(D) in E] + delta_G + delta_N``.

**The bound chosen from the data** (``max_items="auto"``, the default of :func:`sips_vocabulary` and of the
vocabulary release): first :func:`~userdp.vocabulary.choose_max_items` picks ``max_items`` from the public
grid ``1, 2, ..., 8192`` (a private 90% quantile of the persons' numbers of distinct items, the exponential
mechanism, ``AUTO_FRACTION`` = 2% of epsilon, no delta), exactly as for the one-round union; then the rounds
run with that bound in every round, calibrated for the rest of the budget (the set's and the counts' shares
of ``epsilon - epsilon_bound``). The choice is ``epsilon_bound``-DP and the rounds with the counts are
``(epsilon - epsilon_bound, delta)``-DP for every fixed bound, so by sequential (adaptive) composition the
whole is ``(epsilon, delta)``-DP. Every refusal is decided before the data are read, at the grid's largest
candidate (the hardest to calibrate), so no chosen bound can be refused. The persons' counts are those of
their whole sets (before any round), as the one-round union counts them.

Removing released items is what makes the mechanism adaptive; it is covered by step 2 (the history is
public to both runs). Skipping it would be private too (and release less). The exact auditor
(:func:`userdp.audit.audit_sips`) checks the guarantee on small instances, and catches rounds calibrated
each for the whole ``rho`` or each for the whole ``delta_N``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from ..noise import RngLike, resolve_rng, zcdp_delta
from ..privacy.result import Release
from .union import (
    _MARGIN,
    _TRUNCATION,
    UNIT,
    BoundChoice,
    UnionCalibration,
    _check,
    _check_codes,
    _delta_new,
    _select,
    _threshold,
    _vocabulary_release,
    bound_contributions,
    budget_plan,
    check_noise_budget,
    choose_max_items,
    distinct_per_person,
    persons_within,
    union_histogram,
)

__all__ = [
    "SIPS_RATIO",
    "SIPS_ROUNDS",
    "SipsCalibration",
    "calibrate_sips",
    "plan_sips_vocabulary",
    "sips_fractions",
    "sips_rounds",
    "sips_rounds_from_sums",
    "sips_union",
    "sips_vocabulary",
    "sips_vocabulary_from_sums",
]

SIPS_ROUNDS = 3
SIPS_RATIO = 4.0


@dataclass(frozen=True)
class SipsCalibration:
    """The public parameters of DP-SIPS: one :class:`~userdp.vocabulary.UnionCalibration` per round (its
    ``scale`` the round's width ``w_i``, its ``threshold`` ``T_i``, its ``delta_new`` the round's
    ``delta_N,i``; its ``delta_gaussian`` the whole release's ``delta_G``), the budget fractions, and the
    totals.

    Attributes
    ----------
    rho:
        ``sum_i U^2 / (2 w_i^2)``: the rounds' zCDP parameter together (in units of one person's weight).
    delta_gaussian, delta_new:
        ``delta_G`` and ``sum_i delta_N,i``; their sum is at most ``delta``.
    """

    epsilon: float
    delta: float
    max_items: int
    unit: int
    fractions: tuple[float, ...]
    rounds: tuple[UnionCalibration, ...]
    rho: float
    delta_gaussian: float
    delta_new: float
    noise: str = "gaussian"
    policy: bool = False
    cutoff: int = 0

    @property
    def threshold_in_persons(self) -> float:
        """The last round's threshold in persons' weight (the rounds' thresholds: :attr:`thresholds`)."""
        return self.rounds[-1].threshold_in_persons

    @property
    def noise_sd_in_persons(self) -> float:
        """The last round's noise standard deviation in persons' weight."""
        return self.rounds[-1].noise_sd_in_persons

    @property
    def thresholds(self) -> tuple[float, ...]:
        """Each round's threshold in persons' weight."""
        return tuple(c.threshold_in_persons for c in self.rounds)

    @property
    def noise_sds(self) -> tuple[float, ...]:
        """Each round's noise standard deviation in persons' weight."""
        return tuple(c.noise_sd_in_persons for c in self.rounds)


def _check_schedule(rounds: int, ratio: float) -> tuple[int, float]:
    if isinstance(rounds, bool) or not isinstance(rounds, int | np.integer) or not 1 <= rounds <= 10:
        raise ParameterError(f"rounds must be a whole number in [1, 10], got {rounds!r}")
    try:
        q = float(ratio)
    except (TypeError, ValueError):
        raise ParameterError(f"ratio must be a number in [0.1, 10], got {ratio!r}") from None
    if not (math.isfinite(q) and 0.1 <= q <= 10.0):
        raise ParameterError(f"ratio must lie in [0.1, 10], got {ratio!r}")
    return int(rounds), q


def sips_fractions(rounds: int = SIPS_ROUNDS, ratio: float = SIPS_RATIO) -> tuple[float, ...]:
    """The budget schedule: round ``i`` (from 1) gets ``ratio^(i-1) / sum_j ratio^(j-1)`` of ``rho`` and of
    ``delta_N``. The fractions are floats; the calibration checks the sums it relies on, not the fractions."""
    r, q = _check_schedule(rounds, ratio)
    raw = [q**i for i in range(r)]
    total = math.fsum(raw)
    return tuple(x / total for x in raw)


def calibrate_sips(
    epsilon: float,
    delta: float,
    max_items: int,
    rounds: int = SIPS_ROUNDS,
    ratio: float = SIPS_RATIO,
    unit: int = UNIT,
) -> SipsCalibration:
    """The widths and thresholds of DP-SIPS's rounds for ``(epsilon, delta)``-DP, add or remove one person
    (see the module's proof): half of ``delta`` to the rounds' Gaussian histograms together (zCDP, exact
    composition), half to the new items, split over the rounds by the schedule."""
    eps, dlt, max_items = _check(epsilon, delta, max_items, "gaussian")
    r, q = _check_schedule(rounds, ratio)
    fr = sips_fractions(r, q)
    delta_g = dlt / 2
    goal = delta_g * (1 - _MARGIN)
    uu = float(unit) * float(unit)

    def widths(c: int) -> list[int]:
        return [max(1, math.ceil(c / math.sqrt(f))) for f in fr]

    def rho_of(ws: list[int]) -> float:
        return math.fsum(uu / (2.0 * w * w) for w in ws)

    def ok(c: int) -> bool:  # the rounds' Gaussians together, each sampler's cut counted as in one round
        return zcdp_delta(rho_of(widths(c)), eps) * _TRUNCATION**r + 2 * r * math.exp(-480) <= goal

    lo, hi = 1, unit
    while not ok(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    ws = widths(hi)
    delta_n = dlt - delta_g
    cals = []
    for f, w in zip(fr, ws, strict=True):
        t = _threshold("gaussian", w, max_items, unit, f * delta_n * (1 - _MARGIN))
        d_new = _delta_new(t, "gaussian", w, max_items, unit)
        cals.append(UnionCalibration("gaussian", eps, dlt, max_items, unit, int(w), int(t), delta_g, d_new))
    d_new_total = math.fsum(c.delta_new for c in cals)
    if d_new_total > delta_n:  # pragma: no cover - each round is at most its share (1 - 1e-9), shares sum to 1
        raise ParameterError("the rounds' thresholds exceed the new items' share of delta")
    return SipsCalibration(eps, dlt, max_items, unit, fr, tuple(cals), rho_of(ws), delta_g, d_new_total)


def sips_rounds(
    offsets: np.ndarray, items: np.ndarray, n_items: int, cal: SipsCalibration, rng: RngLike = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Run the rounds on persons in CSR form (each person's items distinct, codes in ``[0, n_items)``).

    Returns
    -------
    (codes, rounds, noisy, first_kept)
        The released codes (ascending), the round (from 1) that released each, its noisy weight in that
        round's lattice steps, and the items every person kept in round 1 (their codes, for the counts: one
        person holds at most ``max_items`` of them).
    """
    src = resolve_rng(rng)
    offsets = np.asarray(offsets, dtype=np.int64)
    items = np.asarray(items, dtype=np.int64)
    person = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    released = np.zeros(int(n_items), dtype=bool)
    codes, when, values = [], [], []
    first_kept = np.empty(0, dtype=np.int64)
    for i, rc in enumerate(cal.rounds):
        left = ~released[items]  # each person removes the items released so far
        deg = np.bincount(person[left], minlength=offsets.size - 1)
        off = np.r_[0, np.cumsum(deg)].astype(np.int64)
        off, its = bound_contributions(off, items[left], cal.max_items, src)
        if i == 0:
            first_kept = its
        hist = union_histogram(off, its, n_items, "gaussian", cal.unit)
        chosen, noisy = _select(hist, rc, src)
        released[chosen] = True
        codes.append(chosen)
        when.append(np.full(chosen.size, i + 1, dtype=np.int64))
        values.append(noisy)
    c = np.concatenate(codes)
    order = np.argsort(c, kind="stable")
    return c[order], np.concatenate(when)[order], np.concatenate(values)[order], first_kept


RoundSums = Callable[[int, int, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""``item_sums(round, cap, released)``: one round's per-item sums, computed where the data are (an engine's
:meth:`~userdp.engines.Engine.bounded_item_sums` with :func:`~userdp.vocabulary.vocabulary_sum_columns`): every
person's distinct items less the labels ``released`` (text, sorted), at most ``cap`` of them kept (a uniformly
random subset, fresh for the round: :func:`userdp.noise.keyed_keep` with :func:`userdp.noise.sips_round_purpose`),
a person keeping ``k`` adding ``(floor(U / sqrt(k)), 1)`` to each. Returns the labels (text, sorted) that
received anything and their ``(n, 2)`` integer sums."""


def sips_rounds_from_sums(
    item_sums: RoundSums, cal: SipsCalibration, rng: RngLike = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`sips_rounds` (Swanberg et al. 2023, Algorithm 1) from each round's per-item sums, computed where
    the data are: round ``i`` asks ``item_sums(i, max_items, S_{i-1})`` for the weights of the items the
    persons kept of what the earlier rounds left them, and releases the items whose weight plus the round's
    noise reaches its threshold. Only per-item sums and the released labels cross between the data and the
    rounds; the law is :func:`sips_rounds`'s (the same bounding law, the same histogram, candidates and noise).

    Returns
    -------
    (labels, rounds, noisy, first_labels, first_holders)
        The released labels (text, sorted), the round (from 1) that released each, its noisy weight in that
        round's lattice steps, and the labels kept by some person in round 1 with their numbers of holders
        (for the counts: one person holds at most ``max_items`` of them).
    """
    src = resolve_rng(rng)
    released = np.empty(0, dtype=object)
    got, when, values = [], [], []
    first_labels, first_holders = np.empty(0, dtype=object), np.empty(0, dtype=np.int64)
    for i, rc in enumerate(cal.rounds):
        labels, sums = item_sums(i + 1, cal.max_items, released)  # the items released so far removed first
        labels = np.asarray(labels, dtype=object)
        sums = np.asarray(sums, dtype=np.int64).reshape(-1, 2)
        if i == 0:
            first_labels, first_holders = labels, sums[:, 1]
        chosen, noisy = _select(sums[:, 0], rc, src)
        released = np.sort(np.r_[released, labels[chosen]].astype(str)).astype(object)
        got.append(labels[chosen])
        when.append(np.full(chosen.size, i + 1, dtype=np.int64))
        values.append(noisy)
    lab = np.concatenate(got).astype(str)
    order = np.argsort(lab, kind="stable")
    rounds_, noisy = np.concatenate(when)[order], np.concatenate(values)[order]
    return lab[order].astype(object), rounds_, noisy, first_labels, first_holders


def sips_union(
    offsets: np.ndarray,
    items: np.ndarray,
    n_items: int,
    epsilon: float,
    delta: float,
    max_items: int = 100,
    rounds: int = SIPS_ROUNDS,
    ratio: float = SIPS_RATIO,
    rng: RngLike = None,
) -> tuple[np.ndarray, np.ndarray, SipsCalibration]:
    """DP-SIPS set union (see the module): ``rounds`` rounds of the weighted Gaussian union, each on the
    items not yet released, with the geometric schedule ``ratio``.

    Parameters and returns as :func:`~userdp.vocabulary.weighted_gaussian_union`; the noisy weights are in
    the lattice steps of the round that released each item (:func:`sips_rounds` also says which)."""
    cal = calibrate_sips(epsilon, delta, max_items, rounds, ratio)
    _check_codes(items, n_items)
    off, its = distinct_per_person(offsets, items)
    codes, _, noisy, _ = sips_rounds(off, its, n_items, cal, rng)
    return codes, noisy, cal


def plan_sips_vocabulary(
    epsilon: float,
    delta: float,
    max_items: int | str | BoundChoice = "auto",
    noise: str = "gaussian",
    count_fraction: float = 0.5,
    rounds: int = SIPS_ROUNDS,
    ratio: float = SIPS_RATIO,
) -> dict:
    """:func:`~userdp.vocabulary.plan_vocabulary` for DP-SIPS: every parameter checked and the budget split
    (the set's share to :func:`calibrate_sips`, the counts' as in the one-round release) before any data is
    read. The rounds are Gaussian: ``noise`` must be ``"gaussian"`` (it is the counts' noise too). With
    ``max_items="auto"`` the bound's choice takes its share of ``epsilon`` first and every calibration is
    checked at the grid's largest candidate (:func:`~userdp.vocabulary.plan_vocabulary`); the release plans
    again with the :class:`~userdp.vocabulary.BoundChoice` it made."""
    check_noise_budget(noise, epsilon, delta)
    if noise != "gaussian":
        raise ParameterError("DP-SIPS runs rounds of the weighted Gaussian union: use the Gaussian noise")
    r, q = _check_schedule(rounds, ratio)
    plan = budget_plan(epsilon, delta, max_items, noise, count_fraction, lambda e, d, m: calibrate_sips(e, d, m, r, q))
    plan.update(algorithm="sips", rounds=r, ratio=q)
    return plan


def sips_vocabulary(
    offsets: np.ndarray,
    items: np.ndarray,
    labels: np.ndarray,
    epsilon: float,
    delta: float,
    *,
    max_items: int | str | BoundChoice = "auto",
    noise: str = "gaussian",
    count_fraction: float = 0.5,
    rounds: int = SIPS_ROUNDS,
    ratio: float = SIPS_RATIO,
    rng: RngLike = None,
) -> Release:
    """:func:`~userdp.vocabulary.private_vocabulary` with DP-SIPS as the selection: the items of the rounds,
    then (``count_fraction > 0``) a noisy count of the persons holding each released item among their kept
    items of the first round (at most ``max_items`` per person: sensitivity ``sqrt(max_items)``).
    ``max_items="auto"`` (the default): the bound is chosen first, privately, from the persons' numbers of
    distinct items with 2% of ``epsilon`` (:func:`~userdp.vocabulary.choose_max_items`), and every round
    uses it; the rest of the budget goes to the rounds and the counts. Guarantee: ``ApproxDP(epsilon,
    delta)``, add/remove one person (the set's share by the module's proof, sequential composition of the
    bound's choice, the set and the counts; ``composed_of`` in the release's extras states each part)."""
    plan = plan_sips_vocabulary(epsilon, delta, max_items, noise, count_fraction, rounds, ratio)
    src = resolve_rng(rng)
    labels = np.asarray(labels)
    _check_codes(items, labels.size)
    off, its = distinct_per_person(offsets, items)
    if plan["auto"]:  # the bound first, from the persons' distinct-item counts (its own share of epsilon)
        choice = choose_max_items(persons_within(np.diff(off)), plan["epsilon_bound"], rng=src)
        plan = plan_sips_vocabulary(epsilon, delta, choice, noise, count_fraction, plan["rounds"], plan["ratio"])
    chosen, _, _, first_kept = sips_rounds(off, its, labels.size, plan["calibration"], src)
    holders = np.bincount(first_kept, minlength=labels.size)  # at most max_items per person
    return _vocabulary_release(labels, None, holders, None, plan, False, src, chosen)


def sips_vocabulary_from_sums(
    item_sums: RoundSums,
    epsilon: float,
    delta: float,
    *,
    max_items: int | BoundChoice = 100,
    noise: str = "gaussian",
    count_fraction: float = 0.5,
    rounds: int = SIPS_ROUNDS,
    ratio: float = SIPS_RATIO,
    rng: RngLike = None,
) -> Release:
    """:func:`sips_vocabulary` from each round's per-item sums computed where the data are
    (:func:`sips_rounds_from_sums`; ``item_sums`` as :data:`RoundSums`): the items of the rounds, then a noisy
    count of the persons holding each released item among their kept items of the first round. ``max_items``
    is a whole number or the :class:`~userdp.vocabulary.BoundChoice` made before
    (:func:`~userdp.vocabulary.choose_max_items_with`, whose share of epsilon the release accounts). Guarantee:
    ``ApproxDP(epsilon, delta)``, add/remove one person, as :func:`sips_vocabulary`."""
    if isinstance(max_items, str):
        raise ParameterError("sums bounded already need the bound they were bounded with, not 'auto': choose it "
                             "first (choose_max_items_with) and pass the choice")  # fmt: skip
    plan = plan_sips_vocabulary(epsilon, delta, max_items, noise, count_fraction, rounds, ratio)
    src = resolve_rng(rng)
    released, _, _, first, holders = sips_rounds_from_sums(item_sums, plan["calibration"], src)
    labels = np.union1d(np.asarray(first).astype(str), released.astype(str)).astype(object)
    held = np.zeros(labels.size, dtype=np.int64)  # an item released later may have been kept by no one in round 1
    held[np.searchsorted(labels.astype(str), np.asarray(first).astype(str))] = holders
    chosen = np.searchsorted(labels.astype(str), released.astype(str))
    return _vocabulary_release(labels, None, held, None, plan, False, src, chosen)

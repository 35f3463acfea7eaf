"""Exact audits (finite outputs): the output laws on neighbouring inputs, computed exactly, and the exact privacy
loss or hockey-stick divergence (:func:`hockey_stick`) against the claim.

* Item-level metric DP of a finite randomizer: ``max_y ln P(y|x)/P(y|x') / d(x, x')`` over all pairs
  (:func:`audit_randomizer`).
* Shuffled item-wise releases on small domains: the exact law of the released multiset and the hockey-stick
  divergence at the claimed ``alpha d_EM`` (:func:`audit_shuffled`; the library's own release,
  :func:`audit_itemwise` and :func:`audit_frequency`; BoundedEMDReduction, :func:`audit_sampled`).
* The distinct count (:func:`audit_distinct_count`) and the set unions (:func:`audit_set_union`) over the
  add/remove-one-person pairs of tiny datasets.
* The lattice mechanisms of :mod:`userdp.noise` on small lattices: support and privacy loss
  (:func:`audit_lattice_laplace`, :func:`audit_lattice_gaussian`, :func:`audit_lattice_l1`,
  :func:`audit_lattice_l2`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import combinations_with_replacement
from typing import Any

import numpy as np

from .result import AuditResult

__all__ = [
    "hockey_stick",
    "audit_randomizer",
    "shuffled_output_distribution",
    "shuffled_counts_law",
    "audit_shuffled",
    "audit_itemwise",
    "audit_frequency",
    "audit_sampled",
    "audit_distinct_count",
    "audit_aggregate",
    "set_union_law",
    "audit_set_union",
    "sips_law",
    "audit_sips",
    "audit_max_items_choice",
    "l2_lattice_table",
    "l2_lattice_moment",
    "randomized_rounding_law",
    "LATTICE_PAIRS_2D",
    "audit_lattice_l2",
    "audit_lattice_l1",
    "audit_lattice_laplace",
    "audit_lattice_gaussian",
]


def hockey_stick(P: np.ndarray, Q: np.ndarray, eps: float) -> float:
    """``max(D_{e^eps}(P||Q), D_{e^eps}(Q||P))`` for two distributions on one finite support."""
    e = math.exp(eps)
    return float(max(np.maximum(P - e * Q, 0).sum(), np.maximum(Q - e * P, 0).sum()))


def _hockey_stick_laws(a: dict, b: dict, eps: float) -> float:
    """:func:`hockey_stick` for two laws given as ``{outcome: probability}`` (missing outcomes have 0)."""
    keys = list(set(a) | set(b))
    return hockey_stick(np.array([a.get(x, 0.0) for x in keys]), np.array([b.get(x, 0.0) for x in keys]), eps)


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


def shuffled_counts_law(P: np.ndarray, items: list[int], background: int, n_background: int) -> np.ndarray:
    """The exact law of the shuffled outputs' counts, as a dense array over the counts of outputs ``1..k-1``
    (output 0's count is implied), when ``n_background`` copies of item ``background`` and then ``items`` are
    randomized independently by ``P``: the background's counts are multinomial (closed form, in logs), each
    further item shifts the law by one output. For the shuffle model's many identical other users."""
    from scipy.special import gammaln

    P = np.asarray(P, dtype=np.float64)
    k_out, B, total = P.shape[1], int(n_background), int(n_background) + len(items)
    grids = np.meshgrid(*([np.arange(total + 1)] * (k_out - 1)), indexing="ij", sparse=True)
    rest = B - sum(grids)
    ok = rest >= 0
    for g in grids:
        ok = ok & (g <= B)
    p = P[int(background)]
    with np.errstate(divide="ignore", invalid="ignore"):
        logp = np.log(p)
        r0 = np.where(ok, rest, 0)
        lg = gammaln(B + 1) - gammaln(r0 + 1) + np.where(r0 > 0, r0 * logp[0], 0.0)
        for j, g in enumerate(grids, start=1):
            gg = np.where(ok, g, 0)
            lg = lg - gammaln(gg + 1) + np.where(gg > 0, gg * logp[j], 0.0)
    law = np.exp(np.where(ok, lg, -np.inf))
    for x in items:
        nxt = P[x, 0] * law
        for j in range(1, k_out):
            nxt = nxt + P[x, j] * np.roll(law, 1, axis=j - 1)  # (the last slot is empty: no wrap-around mass)
        law = nxt
    return law


def audit_shuffled(
    P: np.ndarray,
    D: np.ndarray,
    m: int,
    claim: Callable[[float], tuple[float, float]],
    name: str = "PrivEMDItemWise",
    max_pairs: int = 400,
    background: tuple[int, ...] = (),
) -> AuditResult:
    """Exact audit of a shuffled item-wise release over *all* pairs of size-``m`` multisets of a small
    domain (up to ``max_pairs`` pairs): the hockey-stick divergence at ``claim(d_EM)[0]`` must not exceed
    ``claim(d_EM)[1]``. ``d_EM`` is computed exactly (Lemma 2.1, optimal assignment).

    ``background`` items (the other users' data in the central/shuffle model) are randomized and shuffled
    together with both datasets; ``d_EM`` is that of the changed user's ``m`` items."""
    from scipy.optimize import linear_sum_assignment

    k = P.shape[0]
    sets = list(combinations_with_replacement(range(k), m))
    # (the closed form's float error grows with the background: it is used up to 20,000 other items)
    same = len(set(background)) == 1 and len(background) <= 20_000
    same = same and (len(background) + m + 1) ** (P.shape[1] - 1) <= 4_000_000
    if same:  # many identical other users (the shuffle model): their counts are multinomial, in closed form
        dense = {s: shuffled_counts_law(P, list(s), background[0], len(background)) for s in sets}
    else:
        dists = {s: shuffled_output_distribution(P, list(background) + list(s)) for s in sets}
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
            hs = hockey_stick(dense[a], dense[b], eps) if same else _hockey_stick_laws(dists[a], dists[b], eps)
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


def audit_itemwise(
    randomizer: Any,
    m: int,
    n: int | None = None,
    delta: float = 1e-9,
    max_pairs: int = 400,
    name: str | None = None,
    inner_delta: float | None = None,
) -> AuditResult:
    """Exact audit of :func:`userdp.dem.priv_emd_itemwise` as the library runs it.

    The claim is the guarantee that ``priv_emd_itemwise`` itself returns for ``m`` items per user (local
    model when ``n`` is None, else the central/shuffle model with ``n`` users; its accountant is
    :func:`userdp.dem.itemwise.itemwise_guarantee`), and the law is that of the randomizer's own transition
    table (``randomizer.transition_matrix()``, e.g. :class:`userdp.dem.GKRR`'s integer weights). Every pair
    of ``m``-item datasets of one user is checked by :func:`audit_shuffled` at the claimed
    ``guarantee.at_distance(d_EM)``; in the central model the other ``n - 1`` users hold item 0 and are
    randomized and shuffled with them.
    """
    from ..data import FiniteDomain, UserDataset
    from ..dem.itemwise import priv_emd_itemwise
    from ..errors import ParameterError

    if not hasattr(randomizer, "transition_matrix"):
        raise ParameterError("the exact itemwise audit needs a randomizer with a finite transition table")
    space = randomizer.space
    k, users = space.size, (1 if n is None else int(n))
    ds = UserDataset(
        np.arange(users + 1, dtype=np.int64) * int(m),
        np.zeros(users * int(m), dtype=np.int64),
        None,
        FiniteDomain(np.arange(k)),
    )
    rel = priv_emd_itemwise(ds, randomizer, "local" if n is None else "central", delta, inner_delta=inner_delta)
    g = rel.guarantee
    res = audit_shuffled(
        randomizer.transition_matrix(),
        space.full_matrix(),
        int(m),
        g.at_distance,
        name or f"PrivEMDItemWise ({type(randomizer).__name__}, m = {m}, {g.model.value})",
        max_pairs,
        background=(0,) * (int(m) * (users - 1)),
    )
    return AuditResult(
        res.mechanism,
        f"{g.describe()} (as returned by priv_emd_itemwise); " + res.claimed,
        res.measured,
        res.passed,
        res.detail,
    )


def audit_frequency(
    space: Any, alpha: float, delta_prime: float, m: int, n: int | None = None, randomizer: str = "auto",
    max_pairs: int = 400,
) -> AuditResult:  # fmt: skip
    """Exact audit of :func:`userdp.dem.freq_est_local` on a small finite metric: the randomizer and its
    calibration are the release's own (:func:`userdp.dem.frequency.frequency_randomizer`), the released
    multisets are audited by :func:`audit_itemwise` against the guarantee the release returns (the estimate
    is post-processing of them)."""
    from ..dem.frequency import frequency_randomizer

    rz, cal = frequency_randomizer(space, alpha, delta_prime, int(m), n, randomizer)
    name = f"FreqEstLocal ({type(rz).__name__}, m = {m}, {'local' if n is None else 'central'}, {cal.route})"
    # the claim exactly as freq_est_local states it: the accountant's target and inner delta
    return audit_itemwise(rz, int(m), n, cal.delta_prime_target, max_pairs, name=name,
                          inner_delta=cal.best.delta or None)  # fmt: skip


def audit_sampled(
    P: np.ndarray,
    space,
    s: int,
    datasets: list[tuple[int, ...]],
    claim: Callable[[float], tuple[float, float]],
    name: str = "BoundedEMDReduction",
) -> AuditResult:
    """Exact audit of BoundedEMDReduction (Algorithm 3) with a shuffled item-wise inner mechanism.

    Each dataset (a multiset of item codes, of any size) is projected to ``s`` samples with replacement,
    which are randomized by ``P`` and shuffled. The output law is the mixture, over the multinomial law of
    the sample, of the shuffled laws. For every pair of datasets, the hockey-stick divergence at
    ``claim(d_EM)[0]`` must not exceed ``claim(d_EM)[1]``. Here ``d_EM`` is the EMD between the normalized
    histograms on ``space``, so the datasets may differ in size (discrete d_EM-DP, Definition 5.1).
    """
    from math import factorial

    from ..metrics import emd

    k = P.shape[0]
    samples = list(combinations_with_replacement(range(k), s))
    shuffled = {t: shuffled_output_distribution(P, list(t)) for t in samples}

    def law(K: tuple[int, ...]) -> tuple[dict, np.ndarray]:
        h = np.bincount(np.asarray(K), minlength=k) / len(K)
        out: dict[tuple[int, ...], float] = {}
        for t in samples:
            c = np.bincount(np.asarray(t), minlength=k)
            pr = factorial(s) / np.prod([factorial(int(x)) for x in c]) * float(np.prod(h**c))
            if pr == 0:
                continue
            for y, q in shuffled[t].items():
                out[y] = out.get(y, 0.0) + pr * q
        return out, h

    laws = {K: law(K) for K in datasets}
    worst, checked = None, 0
    for i, a in enumerate(datasets):
        for b in datasets[i + 1 :]:
            (la, ha), (lb, hb) = laws[a], laws[b]
            d = float(emd(ha, hb, space))
            if d <= 1e-12:
                continue
            eps, delta = claim(d)
            hs = _hockey_stick_laws(la, lb, eps)
            checked += 1
            if worst is None or hs - delta > worst[0]:
                worst = (hs - delta, a, b, d, eps, delta, hs)
    _, a, b, d, eps, delta, hs = worst
    return AuditResult(
        name,
        f"(eps(d), delta(d)) from the guarantee, e.g. ({eps:.4g}, {delta:.3g}) at d_EM = {d:.3g}",
        f"hockey-stick {hs:.3g} at that eps (worst pair {a} vs {b})",
        hs <= delta + 1e-12,
        f"exact over {checked} pairs of datasets of sizes {sorted({len(x) for x in datasets})}, s = {s}",
    )


# --------------------------------------------------------------------------------------------
# Distinct count (exact)
# --------------------------------------------------------------------------------------------


def _exp_mech_log_probs(scores: np.ndarray, epsilon: float, sensitivity: float = 1.0) -> np.ndarray:
    """Log-probabilities of :func:`userdp.noise.exponential_mechanism` (``∝ exp(eps s / (2 Delta))``)."""
    z = epsilon * np.asarray(scores, dtype=np.float64) / (2 * sensitivity)
    z -= z.max()
    return z - math.log(np.exp(z).sum())


def _selection_log_probs(scores: np.ndarray, epsilon: float, selection: str) -> np.ndarray:
    """Log-probabilities of GEM's draw over its sensitivity-1 scores: the exponential mechanism's, or
    permute-and-flip's (:func:`userdp.noise.permute_and_flip_probabilities`)."""
    if selection == "exponential":
        return _exp_mech_log_probs(scores, epsilon)
    if selection == "permute-and-flip":
        from ..noise import permute_and_flip_probabilities

        return np.log(permute_and_flip_probabilities(scores, 1.0, epsilon))
    raise ValueError(f"unknown selection {selection!r}")


def _worst_removal(datasets, law_of, epsilon: float) -> tuple[float, tuple | None]:
    """The largest hockey-stick divergence at ``epsilon`` (both directions) between ``law_of(D)`` and the law
    with one person removed, over every dataset ``D`` and person ``u``: ``(delta, (D, u))``."""
    worst, where = 0.0, None
    for D in datasets:
        law = law_of(D)
        for u in range(len(D)):
            d = _hockey_stick_laws(law, law_of(D[:u] + D[u + 1 :]), float(epsilon))
            if d > worst:
                worst, where = d, (D, u)
    return worst, where


def _dlap_tail(t: int, x: int) -> float:
    """``P[DLap(t) > x]`` for an integer ``x``."""
    den = 1.0 + math.exp(-1.0 / t)  # exp of the exponent directly: r**x loses ~t * 1e-16 relative accuracy
    if x >= 0:
        return math.exp(-(x + 1) / t) / den
    return 1.0 - math.exp(x / t) / den


def audit_distinct_count(
    datasets: list[list[set]],
    epsilon: float,
    beta: float = 0.1,
    l_max: int = 3,
    method: str = "matching",
    name: str = "distinct count (Algorithm 1)",
    selection: str = "exponential",
) -> AuditResult:
    """Exact audit of :func:`userdp.distinct.distinct_count` over add/remove-one-person neighbours.

    ``datasets`` are tiny datasets (one set of elements per person; a set may be empty). For every dataset
    ``D`` and every ``D' = D`` minus one person (a one-person ``D`` against the empty dataset, too), the
    release's law is computed exactly from the
    implementation's own plan (:func:`userdp.distinct.release.release_plan`): ``l_hat`` with the exact
    exponential-mechanism probabilities over the GEM scores, then ``(k_l + Z - shift_l) g_l`` with
    ``Z ~ DLap(t_l)`` (with ``selection="permute-and-flip"``, ``l_hat``'s law is permute-and-flip's,
    :func:`userdp.noise.permute_and_flip_probabilities`). The privacy loss of output ``(l, v)`` is
    ``ln P_D(l)/P_D'(l) + (|v - k'_l| - |v - k_l|)/t_l``, whose supremum over ``v`` is
    ``ln P_D(l)/P_D'(l) + |k_l - k'_l| / t_l``; the measured epsilon is the maximum over ``l``, both
    directions and all pairs. Also reported: the exact coverage ``min_D P[release <= DC(D)]`` over the
    datasets and their neighbours, which must be at least ``1 - beta``.
    """
    from ..data import FiniteDomain, UserDataset
    from ..distinct.counting import person_element_graph
    from ..distinct.release import release_plan

    universe = sorted({e for D in datasets for s in D for e in s})
    domain = FiniteDomain(np.asarray(universe))

    def plan(D: list[set]):
        g = person_element_graph(UserDataset.from_lists([sorted(s) for s in D], domain=domain))
        return release_plan(g, epsilon, beta, l_max, method), g.distinct_count()

    cache: dict[tuple, Any] = {}
    coverage = 1.0

    def get(D: list[set]):
        nonlocal coverage
        key = tuple(tuple(sorted(s)) for s in D)
        if key not in cache:
            p, dc = plan(D)
            logp = _selection_log_probs(p.scores, p.epsilon_select, selection)
            miss = sum(
                math.exp(lp)
                * _dlap_tail(cal.t, int(p.shift_units[i]) + math.floor(dc / cal.granularity) - int(p.lattice[i]))
                for i, (lp, cal) in enumerate(zip(logp, p.calibrations, strict=True))
            )
            coverage = min(coverage, 1.0 - miss)
            cache[key] = p, logp
        return cache[key]

    worst, worst_pair = 0.0, None
    for D in datasets:
        p, logp = get(D)
        for u in range(len(D)):  # every person removed; a one-person dataset's neighbour is the empty one
            p2, logq = get(D[:u] + D[u + 1 :])
            for i, cal in enumerate(p.calibrations):
                assert cal.t == p2.calibrations[i].t and cal.granularity == p2.calibrations[i].granularity
                count_loss = abs(p.lattice[i] - p2.lattice[i]) / cal.t
                loss = abs(logp[i] - logq[i]) + count_loss
                if loss > worst:
                    worst, worst_pair = loss, (D, u, i + 1)
    eps = float(epsilon)
    ok = worst <= eps * (1 + 1e-9) and coverage >= 1 - beta - 1e-12
    return AuditResult(
        name,
        f"{eps:.4g}-DP (add/remove one person); lower bound with probability >= {1 - beta:g}",
        f"epsilon = {worst:.6g}; coverage = {coverage:.6g}",
        ok,
        f"exact over {len(datasets)} datasets and their remove-one-person neighbours (a one-person dataset's "
        f"is the empty dataset; {method}, {selection}); "
        f"worst: dataset {worst_pair[0] if worst_pair else None} minus person {worst_pair[1] if worst_pair else None}"
        f" at l = {worst_pair[2] if worst_pair else None}",
    )


def _tail_law(noise: str, scale: int):
    """Exact ``P[Z >= m]`` of the sampler the set union uses: the discrete Laplace's closed form, or the
    discrete Gaussian of variance ``scale^2`` summed over the support its sampler keeps (``|x| <= 32 scale``)."""
    if noise == "laplace":
        return lambda m: _dlap_tail(scale, m - 1)
    x = np.arange(-32 * scale, 32 * scale + 1)
    p = np.exp(-(x.astype(np.float64) ** 2) / (2.0 * scale * scale))
    cum = np.cumsum(p[::-1])[::-1] / p.sum()  # cum[i] = P[Z >= x[i]]

    def tail(m: int) -> float:
        i = m + 32 * scale
        return 1.0 if i <= 0 else (0.0 if i >= x.size else float(cum[i]))

    return tail


def set_union_law(persons: list[list[int]], calibration, n_items: int) -> dict:
    """The exact output law ``{frozenset of items: probability}`` of a set union
    (:mod:`userdp.vocabulary.union`) under ``calibration``: every choice of the kept subsets (uniform per
    person holding more than ``max_items``), the implementation's integer histogram
    (:func:`~userdp.vocabulary.union_histogram`, or for a policy calibration
    :func:`~userdp.vocabulary.policy.policy_histogram_in_order` over every order of the persons and every
    priority of the items, each equally likely; for a greedy calibration
    :func:`~userdp.vocabulary.greedy.greedy_histogram_in_order`, the same way, with each person's local count
    of an item the number of times the person lists it) and threshold test ``H + Z >= T``, items independent
    given the histogram."""
    from collections import Counter
    from itertools import combinations, permutations, product

    from ..vocabulary import union_histogram
    from ..vocabulary.greedy import greedy_histogram_in_order
    from ..vocabulary.policy import policy_histogram_in_order

    cal = calibration
    greedy = bool(getattr(cal, "greedy", False))
    tail = _tail_law(cal.noise, cal.scale)
    local = [Counter(p) for p in persons]
    if greedy:
        persons = [sorted(c) for c in local]
    options = [list(combinations(sorted(p), min(len(p), cal.max_items))) for p in persons]
    hists: dict = {}  # (histogram, candidates) -> probability
    for pick in product(*options):
        weight = math.prod(1.0 / len(o) for o in options)
        offsets = np.r_[0, np.cumsum([len(c) for c in pick])].astype(np.int64)
        items = np.array([i for c in pick for i in c], dtype=np.int64)
        held = tuple(bool(b) for b in np.bincount(items, minlength=n_items) > 0)
        if not cal.policy:
            hist = union_histogram(offsets, items, n_items, cal.noise, cal.unit)
            key = (tuple(int(h) for h in hist), tuple(h > 0 for h in hist))
            hists[key] = hists.get(key, 0.0) + weight
            continue
        orders = list(permutations(range(len(pick))))
        priorities = list(permutations(range(n_items)))
        share = weight / (len(orders) * len(priorities))
        counts = np.array([local[u][i] for u, c in enumerate(pick) for i in c], dtype=np.int64)
        for order in orders:
            for prio in priorities:
                if greedy:
                    hist = greedy_histogram_in_order(offsets, items, counts, n_items, cal.cutoff, cal.unit, order, prio)
                else:
                    hist = policy_histogram_in_order(offsets, items, n_items, cal.cutoff, cal.unit, order, prio)
                key = (tuple(int(h) for h in hist), held)
                hists[key] = hists.get(key, 0.0) + share
    law: dict = {}
    for (hist, cand), weight in hists.items():
        ps = [tail(cal.threshold - h) if c else 0.0 for h, c in zip(hist, cand, strict=True)]
        for bits in product((0, 1), repeat=n_items):
            pr = weight
            for b, q in zip(bits, ps, strict=True):
                pr *= q if b else 1.0 - q
            if pr:
                key = frozenset(i for i, b in enumerate(bits) if b)
                law[key] = law.get(key, 0.0) + pr
    return law


def audit_set_union(
    datasets: list[list[list[int]]],
    epsilon: float,
    delta: float,
    max_items: int,
    noise: str = "gaussian",
    *,
    unit: int = 16,
    calibration=None,
    name: str | None = None,
    policy: bool = False,
    cutoff_margin: float = 3.0,
    greedy: bool = False,
) -> AuditResult:
    """Exact audit of the weighted set union over add/remove-one-person neighbours.

    ``datasets`` are tiny datasets (one list of item codes per person). For every dataset and every
    neighbour without one of its persons, the exact output laws (:func:`set_union_law`) are compared by the
    hockey-stick divergence at ``epsilon``; the measured delta is the largest. The calibration is the
    library's (:func:`userdp.vocabulary.calibrate_union`) on a coarse lattice of ``unit`` steps per person,
    so that the discrete Gaussian's law can be summed; pass ``calibration`` to audit another one (a broken
    variant). ``policy=True`` audits the policy Laplace union (every order of the persons and priority of
    the items; ``cutoff_margin`` its cutoff); ``greedy=True`` the policy greedy union the same way (a person
    listing an item ``c`` times holds ``c`` records of it: its local count)."""
    from ..vocabulary import calibrate_union

    cal = calibration or calibrate_union(
        epsilon, delta, max_items, noise, unit=unit, policy=policy, cutoff_margin=cutoff_margin, greedy=greedy
    )
    kind = "policy greedy" if getattr(cal, "greedy", False) else "policy" if cal.policy else "weighted"
    name = name or f"{kind} set union"
    n_items = 1 + max((i for D in datasets for p in D for i in p), default=0)
    worst, where = _worst_removal(datasets, lambda D: set_union_law(D, cal, n_items), epsilon)
    # the threshold's share on its own: one person's k new items (k <= max_items), exactly
    new = 0.0
    for k in range(1, cal.max_items + 1):
        law = set_union_law([list(range(k))], cal, k)
        new = max(new, 1.0 - law.get(frozenset(), 0.0))
    ok = worst <= float(delta) * (1 + 1e-9) and new <= (float(delta) - cal.delta_gaussian) * (1 + 1e-9)
    return AuditResult(
        name,
        f"({epsilon:g}, {delta:g})-DP (add/remove one person)",
        f"delta at epsilon = {worst:.4g}; a new item released with probability {new:.4g} (of "
        f"{float(delta) - cal.delta_gaussian:.4g})",
        ok,
        f"exact over {len(datasets)} datasets and their remove-one-person neighbours ({cal.noise} noise, "
        f"{cal.unit} lattice steps per person, threshold {cal.threshold}, scale {cal.scale}); worst: dataset "
        f"{where[0] if where else None} minus person {where[1] if where else None}",
    )


def sips_law(persons: list[list[int]], calibration, n_items: int) -> dict:
    """The exact output law ``{frozenset of items: probability}`` of DP-SIPS (:mod:`userdp.vocabulary.sips`)
    under ``calibration``: round by round, every person removes the items released so far, then
    :func:`set_union_law` of the round's calibration on what is left (every kept subset, the integer
    histogram, the sampler's exact tails), the released sets of the rounds joined."""
    law: dict = {frozenset(): 1.0}
    for rc in calibration.rounds:
        nxt: dict = {}
        for done, p in law.items():
            left = [[i for i in person if i not in done] for person in persons]
            for got, q in set_union_law(left, rc, n_items).items():
                key = done | got
                nxt[key] = nxt.get(key, 0.0) + p * q
        law = nxt
    return law


def audit_sips(
    datasets: list[list[list[int]]],
    epsilon: float,
    delta: float,
    max_items: int,
    *,
    rounds: int = 2,
    ratio: float = 2.0,
    unit: int = 16,
    calibration=None,
    name: str | None = None,
) -> AuditResult:
    """Exact audit of DP-SIPS over add/remove-one-person neighbours, as :func:`audit_set_union` audits one
    round: the exact laws (:func:`sips_law`) of every dataset and of its neighbours without one person are
    compared by the hockey-stick divergence at ``epsilon``, and one person's ``k <= max_items`` new items
    must be released, over all the rounds, with probability at most the threshold's share of ``delta``. The
    calibration is the library's (:func:`userdp.vocabulary.calibrate_sips`) on a coarse lattice of ``unit``
    steps per person; pass ``calibration`` to audit a broken variant."""
    from ..vocabulary import calibrate_sips

    cal = calibration or calibrate_sips(epsilon, delta, max_items, rounds, ratio, unit=unit)
    name = name or f"DP-SIPS, {len(cal.rounds)} rounds"
    n_items = 1 + max((i for D in datasets for p in D for i in p), default=0)
    worst, where = _worst_removal(datasets, lambda D: sips_law(D, cal, n_items), epsilon)
    new = 0.0
    for k in range(1, cal.max_items + 1):
        new = max(new, 1.0 - sips_law([list(range(k))], cal, k).get(frozenset(), 0.0))
    share = float(delta) - cal.delta_gaussian
    ok = worst <= float(delta) * (1 + 1e-9) and new <= share * (1 + 1e-9)
    return AuditResult(
        name,
        f"({epsilon:g}, {delta:g})-DP (add/remove one person)",
        f"delta at epsilon = {worst:.4g}; a new item released with probability {new:.4g} (of {share:.4g})",
        ok,
        f"exact over {len(datasets)} datasets and their remove-one-person neighbours ({cal.unit} lattice steps "
        f"per person, thresholds {[c.threshold for c in cal.rounds]}, widths {[c.scale for c in cal.rounds]}); "
        f"worst: dataset {where[0] if where else None} minus person {where[1] if where else None}",
    )


def audit_max_items_choice(
    datasets: list[list[int]],
    epsilon: float,
    *,
    claimed_epsilon: float | None = None,
    scores=None,
    quantile: float | None = None,
    name: str = "max_items chosen privately",
) -> AuditResult:
    """Exact audit of the vocabulary's private choice of ``max_items`` (:func:`userdp.vocabulary.choose_max_items`)
    over add/remove-one-person neighbours.

    ``datasets`` are datasets given by their persons' numbers of distinct items ``k_i`` (all the choice reads).
    For every dataset and every neighbour without one of its persons (a one-person dataset against the empty
    one, too), the law of the chosen bound is computed exactly from the implementation's counts
    (:func:`~userdp.vocabulary.persons_within`) and scores (:func:`~userdp.vocabulary.max_items_scores`, or
    ``scores(within)`` for a broken variant), at ``quantile`` (the Gaussian unions' by default; each noise's,
    :data:`~userdp.vocabulary.AUTO_QUANTILES`), as the exponential mechanism at ``epsilon`` with sensitivity 1
    draws it; the measured epsilon is the largest ``|ln P_D(g) / P_D'(g)|``. It passes when that is at most
    ``claimed_epsilon`` (the plan's share, ``epsilon`` unless given)."""
    from ..vocabulary import AUTO_QUANTILE, max_items_scores, persons_within

    q = AUTO_QUANTILE if quantile is None else float(quantile)
    score = scores or (lambda within: max_items_scores(within, q))
    claimed = float(epsilon if claimed_epsilon is None else claimed_epsilon)

    def law(ks: list[int]) -> np.ndarray:
        return _exp_mech_log_probs(score(persons_within(np.asarray(ks, dtype=np.int64))), float(epsilon))

    worst, where = 0.0, None
    for D in datasets:
        here = law(D)
        for u in range(len(D)):
            loss = float(np.max(np.abs(here - law(D[:u] + D[u + 1 :]))))
            if loss > worst:
                worst, where = loss, (D, u)
    return AuditResult(
        name,
        f"{claimed:g}-DP (add/remove one person)",
        f"epsilon = {worst:.6g}",
        worst <= claimed * (1 + 1e-9) + _FLOAT_SLACK,
        f"exact over {len(datasets)} datasets of persons' item counts and their remove-one-person neighbours; "
        f"worst: dataset {where[0] if where else None} minus person {where[1] if where else None}",
    )


# --------------------------------------------------------------------------------------------
# Exact audits of the lattice mechanisms (userdp.noise): support and privacy loss on small lattices
# --------------------------------------------------------------------------------------------


def l2_lattice_table(law, radius: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact (unnormalised) law of :meth:`userdp.noise.L2LatticeLaw.sample` on the box
    ``[-radius, radius]^dim``, built from the sampler's own steps: its accepted pairs have
    ``P(j, z) ∝ exp(-j / tau) psi_j 1[rho(z) <= j]`` with ``psi_j = (w_j sqrt(2 pi) / Theta_32(w_j))^dim``
    (``w_j`` its discrete-Gaussian width, ``Theta_32`` that distribution's normaliser on ``|x| < 32 w``), so
    ``P(z) ∝ G(rho(z))`` with ``G(r) = sum_{j >= r} e^{-j / tau} psi_j``. Returns the box's points and
    their probabilities up to one common factor (``G(j_min) = 1``)."""
    axes = [np.arange(-radius, radius + 1)] * law.dim
    pts = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, law.dim)
    rho = _l2_rho(law, pts)
    j_hi = int(rho.max()) + law.tau * (law.dim + 45)
    js = np.arange(law.j_min, j_hi + 1)
    terms = np.exp(-(js - law.j_min) / law.tau) * _l2_psi(law, js)
    G = np.cumsum(terms[::-1])[::-1]
    return pts, G[rho - law.j_min]


def _l2_rho(law, pts: np.ndarray) -> np.ndarray:
    """``ceil(s sqrt(|z|^2 + c^2))`` for small integer points, exactly (float root, integer correction)."""
    n = law.s**2 * ((pts.astype(np.int64) ** 2).sum(axis=1) + law.c**2)
    r = np.floor(np.sqrt(n.astype(float))).astype(np.int64)
    r -= r * r > n
    r += (r + 1) * (r + 1) <= n
    return r + (r * r < n)


def _l2_psi(law, js: np.ndarray) -> np.ndarray:
    ws = -(-js // law.A)
    theta = {}
    for w in np.unique(ws):
        k = np.arange(-32 * int(w) + 1, 32 * int(w))
        theta[int(w)] = np.exp(-(k.astype(float) ** 2) / (2.0 * float(w) ** 2)).sum()
    return np.array([(w * math.sqrt(2 * math.pi) / theta[int(w)]) ** law.dim for w in ws])


def l2_lattice_moment(law, power: int = 0) -> float:
    """``sum_z |z|^(2 power) G(rho(z))`` over all of ``Z^dim`` (scaled as :func:`l2_lattice_table`; power 0 is
    the total mass): ``sum_j e^{-(j - j_min)/tau} psi_j S(Q_j)`` with ``S(Q)`` the sum over lattice points with
    ``|z|^2 <= Q``, counted exactly by convolving squares; the Gamma(dim) tail beyond is below e^-40."""
    j_hi = law.j_min + law.tau * (law.dim + 45)
    q_max = law.ball(j_hi)
    r = math.isqrt(q_max)
    sq = np.arange(-r, r + 1) ** 2
    one = np.zeros(q_max + 1)
    np.add.at(one, sq, 1.0)
    counts = one.copy()
    for _ in range(law.dim - 1):
        nxt = np.zeros(q_max + 1)
        for a2, mult in zip(*np.unique(sq, return_counts=True), strict=True):
            nxt[a2:] += mult * counts[: q_max + 1 - a2]
        counts = nxt
    cum = np.cumsum(counts * np.arange(q_max + 1, dtype=float) ** power)
    js = np.arange(law.j_min, j_hi + 1)
    Q = js * js // (law.s * law.s) - law.c * law.c
    w = np.exp(-(js - law.j_min) / law.tau) * _l2_psi(law, js)
    return float((w * cum[np.maximum(Q, 0)] * (Q >= 0)).sum())


def randomized_rounding_law(table: dict, dim: int, x: np.ndarray, box: int) -> dict:
    """Exact output law of ``randomized_round(x) + Z`` for lattice noise ``Z`` with law ``table``
    (point -> probability): the multilinear interpolation of the noise law over the unit cube at ``x``,
    restricted to outputs in ``[-box, box]^dim``."""
    a = np.floor(x).astype(np.int64)
    f = x - a
    out: dict = {}
    for bits in range(2**dim):
        b = np.array([(bits >> i) & 1 for i in range(dim)])
        wb = float(np.prod(np.where(b == 1, f, 1 - f)))
        if wb == 0:
            continue
        shift = a + b
        for z, p in table.items():
            y = tuple(np.add(z, shift).tolist())
            if max(abs(v) for v in y) <= box:
                out[y] = out.get(y, 0.0) + wb * p
    return out


# Float evaluation of two laws 1e-9 apart leaves ~1e-14 of absolute error in their log-ratio.
_FLOAT_SLACK = 1e-12


def _max_log_ratio(P: dict, Q: dict) -> tuple[float, int]:
    zero = sum(1 for k in set(P) | set(Q) if P.get(k, 0.0) == 0.0 or Q.get(k, 0.0) == 0.0)
    keys = set(P) & set(Q)
    return max(abs(math.log(P[k]) - math.log(Q[k])) for k in keys), zero


LATTICE_PAIRS_2D = [
    ((0.5, 0.5), (0.5 + 1e-6, 0.5 + 1e-6)),
    ((0.0, 0.0), (1e-6, 1e-6)),
    ((0.999999, 0.0), (1.000001, 0.0)),
    ((0.3, -0.2), (0.8, 0.6)),
    ((0.0, 0.0), (3.0, 0.0)),
    ((2.5, 2.5), (2.5, 7.5)),
]


def audit_lattice_l2(law=None, pairs=LATTICE_PAIRS_2D, box: int = 10) -> AuditResult:
    """Exact audit of randomized rounding + the l2 lattice law (:func:`userdp.noise.knorm_release`) on a
    small lattice: every output in the box must be reachable from both inputs of each pair, and the exact
    log-ratio must stay within the law's claim ``kappa |x - x'| / T`` (distances in lattice steps, down to
    1.4e-6). ``law`` defaults to ``L2LatticeLaw(2, 12, s=8, c=2)``."""
    from ..noise import L2LatticeLaw

    law = law or L2LatticeLaw(2, 12, s=8, c=2)
    shift = max(int(np.ceil(np.abs(np.array(p)).max())) for pair in pairs for p in pair) + 1
    pts, p = l2_lattice_table(law, box + shift)
    table = {tuple(q.tolist()): v for q, v in zip(pts, p, strict=True)}
    worst, zeros = 0.0, 0
    for x, xp in pairs:
        x, xp = np.asarray(x, float), np.asarray(xp, float)
        loss, zero = _max_log_ratio(
            randomized_rounding_law(table, law.dim, x, box), randomized_rounding_law(table, law.dim, xp, box)
        )
        zeros += zero
        claim = law.kappa() * float(np.linalg.norm(x - xp)) / law.T
        worst = max(worst, (loss - _FLOAT_SLACK) / claim)
    return AuditResult(
        f"l2 lattice K-norm ({law})",
        f"loss <= kappa |x - x'| / T, kappa = {law.kappa():.6g}",
        f"worst exact loss = {worst:.6g} x the claim; {zeros} unreachable outputs",
        worst <= 1.0 and zeros == 0,
        f"exact over {len(pairs)} pairs (distances 1.4e-6 to 5 lattice steps) and all outputs in [-{box}, {box}]^2",
    )


def audit_lattice_l1(t: int = 4, pairs=((0.5, 0.5 + 1e-9), (0.0, 1e-7), (0.9999, 1.0001), (0.2, 0.7), (0.0, 5.0))):
    """Exact audit of randomized rounding + the discrete Laplace of scale ``t`` (the l1 K-norm, and every
    one-dimensional K-norm): the claim is :attr:`userdp.noise.KNormCalibration.loss_per_unit` (``expm1(1/t)``
    per lattice step) times the distance, at every distance."""
    from ..noise import KNormCalibration

    per_step = KNormCalibration(1.0, 1.0, "l1", 1, 1.0, int(t)).loss_per_unit
    ys = np.arange(-40 * t, 40 * t + 1)
    table = {(int(y),): math.exp(-abs(int(y)) / t) for y in ys}
    worst, zeros = 0.0, 0
    box = 30 * t
    for x, xp in pairs:
        P = randomized_rounding_law(table, 1, np.array([x]), box)
        loss, zero = _max_log_ratio(P, randomized_rounding_law(table, 1, np.array([xp]), box))
        zeros += zero
        worst = max(worst, (loss - _FLOAT_SLACK) / (per_step * abs(x - xp)))
    return AuditResult(
        f"l1 lattice K-norm (discrete Laplace, t = {t})",
        "loss <= expm1(1/t) |x - x'|",
        f"worst exact loss = {worst:.6g} x the claim; {zeros} unreachable outputs",
        worst <= 1.0 and zeros == 0,
        f"exact over {len(pairs)} pairs (distances 1e-9 to 5 lattice steps)",
    )


def audit_lattice_laplace(sensitivity: float = 1.0, epsilon: float = 1.0, dim: int = 3) -> AuditResult:
    """Exact audit of :func:`userdp.noise.laplace_mechanism` at its real parameters (deterministic rounding,
    ``t`` about ``2^40``): for inputs at l1 distance ``sensitivity`` placed to straddle rounding boundaries
    in every coordinate, the discrete Laplace's supremum log-ratio ``|k - k'|_1 / t`` (attained, every lattice
    point reachable) must be at most epsilon. Computed with exact rationals."""
    from fractions import Fraction

    from ..noise import calibrate_laplace

    cal = calibrate_laplace(sensitivity, epsilon, dim)
    g = cal.granularity
    worst = Fraction(0)
    for eta in (1e-6, 1e-3, 0.25):
        # every coordinate just below a rounding boundary; x' crosses it in coordinates 2.. (2 eta g each) and
        # spends the rest of the l1 budget on coordinate 1, which then crosses as many boundaries as it can
        x = np.full(dim, (0.5 - eta) * g)
        step = np.full(dim, 2 * eta * g)
        step[0] = sensitivity - 2 * eta * g * (dim - 1)
        k, kp = np.rint(x / g).astype(np.int64), np.rint((x + step) / g).astype(np.int64)
        worst = max(worst, Fraction(int(np.abs(k - kp).sum()), cal.t))
    return AuditResult(
        "lattice Laplace mechanism",
        f"epsilon = {epsilon:.6g} for l1 sensitivity {sensitivity:.6g}",
        f"epsilon = {float(worst):.12g} (exact, worst rounding positions)",
        worst <= Fraction(epsilon),
        f"t = {cal.t}, lattice step {g:.3g}; the discrete Laplace is positive on every lattice point",
    )


def _discrete_gaussian_law(w: int) -> tuple[np.ndarray, np.ndarray]:
    k = np.arange(-32 * w + 1, 32 * w)
    p = np.exp(-(k.astype(float) ** 2) / (2.0 * w * w))
    return k, p / p.sum()


def audit_lattice_gaussian(lattice_bits: int = 3, epsilons=(1e-9, 0.05, 0.2, 0.5)) -> AuditResult:
    """Exact audit of the lattice Gaussian mechanism's accounting on a coarse lattice (sigma about
    ``2^lattice_bits`` steps; the real lattice is ``2^54`` steps): two inputs ``2e-9`` apart that straddle a
    rounding boundary are released one lattice step apart; the exact hockey-stick of the (truncated)
    discrete Gaussian at each ``epsilon`` must be within :meth:`GaussianCalibration.delta_at`."""
    from ..noise import calibrate_gaussian

    cal = calibrate_gaussian(1.0, 1.0, 1e-3, dim=1, lattice_bits=lattice_bits)
    k, p = _discrete_gaussian_law(cal.w)
    P = dict(zip(k.tolist(), p, strict=True))
    Q = {v + 1: pr for v, pr in P.items()}
    worst = 0.0
    for eps in epsilons:
        exact = _hockey_stick_laws(P, Q, eps)
        worst = max(worst, exact / cal.delta_at(2e-9, eps))
    return AuditResult(
        "lattice Gaussian mechanism (coarse lattice)",
        "delta_at(distance, epsilon) (zCDP of the discrete Gaussian, rounding included)",
        f"worst exact delta = {worst:.6g} x the claim",
        worst <= 1.0,
        f"sigma = {cal.w} lattice steps; inputs 2e-9 apart one step apart after rounding",
    )


# --------------------------------------------------------------------------------------------
# Per-key aggregates (exact, step by step, from what the release hands its samplers)
# --------------------------------------------------------------------------------------------


def _draw_log_law(d: dict) -> np.ndarray:
    """The exact log-law of a recorded exponential mechanism (:func:`userdp.noise.exponential_mechanism`):
    ``P(i) ∝ m_i exp(eps s_i / (c Delta))``, ``c = 1`` when monotone, else 2, from the scores, sensitivity,
    epsilon and multiplicities it was handed."""
    c = 1.0 if d["monotone"] else 2.0
    z = float(d["epsilon"]) * np.asarray(d["scores"], dtype=np.float64) / (c * float(d["sensitivity"]))
    z = z + np.log(np.asarray(d["multiplicities"], dtype=np.float64))
    z -= z.max()
    return z - math.log(np.exp(z).sum())


def _draw_loss(a: dict, b: dict) -> tuple[float, float, float]:
    """Two recorded draws of one step on neighbouring inputs (under the same earlier choices): ``(exact, bound,
    handed)``.
    ``exact`` is the worst privacy loss between their exact laws: an exponential mechanism's ``max_i |ln P(i) -
    ln P'(i)|``; the lattice Laplace's ``sup_v ln P(v) / P'(v) = sum_j |k_j - k'_j| / t`` (each coordinate ``g (k_j
    + Z_j)``, ``Z_j ~ DLap(t)``, whose ratio ``exp((|v - k'| - |v - k|) / t)`` reaches its bound beyond both
    centres). ``bound`` is what the draw's own guarantee allows at these inputs: for an exponential mechanism
    ``epsilon max_i |s_i - s'_i| / Delta`` (its epsilon times how far the scores really moved in units of the
    sensitivity it was handed: above its epsilon exactly when the stated sensitivity is too small), for the
    Laplace the exact loss. ``handed`` is the epsilon the draw was handed when its inputs moved at all (0
    otherwise): summed over a step, what its draws claim for this neighbour (a person's ``L0`` keys' quantile
    draws at ``epsilon / L0`` each). A draw whose kind, size or calibration differs between the two is an error (the
    release's steps must not depend on who is in the data)."""
    if a["kind"] != b["kind"]:
        raise AssertionError(f"step {a['step']!r}: draws of kinds {a['kind']} and {b['kind']}")
    if a["kind"] == "exponential":
        same = (len(a["scores"]), a["sensitivity"], a["epsilon"], a["monotone"]) == (
            len(b["scores"]), b["sensitivity"], b["epsilon"], b["monotone"])  # fmt: skip
        if not same or not np.array_equal(a["multiplicities"], b["multiplicities"]):
            raise AssertionError(f"step {a['step']!r}: the exponential mechanism's inputs depend on the data")
        exact = float(np.max(np.abs(_draw_log_law(a) - _draw_log_law(b))))
        moved = float(np.max(np.abs(np.asarray(a["scores"]) - np.asarray(b["scores"]))))
        return exact, float(a["epsilon"]) * moved / float(a["sensitivity"]), float(a["epsilon"]) * (moved > 0)
    if a["kind"] == "laplace":
        if (a["t"], a["granularity"], len(a["lattice"])) != (b["t"], b["granularity"], len(b["lattice"])):
            raise AssertionError(f"step {a['step']!r}: the noise's calibration depends on the data")
        exact = sum(abs(int(x) - int(y)) for x, y in zip(a["lattice"], b["lattice"], strict=True)) / a["t"]
        return exact, exact, float(a["epsilon"]) * (exact > 0)
    raise AssertionError(f"step {a['step']!r}: no exact law for draws of kind {a['kind']!r}")


def _step_share(parts: dict, step: str) -> float | None:
    """A step's stated share of epsilon: the part of that name, or the sum of the parts ``step_*`` (the range's
    two ends)."""
    if step in parts:
        return float(parts[step].epsilon)
    sub = [float(g.epsilon) for k, g in parts.items() if k.startswith(step + "_")]
    return sum(sub) if sub else None


def audit_aggregate(
    datasets: list[list[list[tuple[str, float]]]],
    epsilon: float = 1.0,
    *,
    stats: tuple[str, ...] = ("count", "users", "sum", "mean", "variance", "quantile:0.5"),
    keys: tuple[str, ...] = ("a", "b"),
    value_domain: Any = (0.0, 4.0),
    seeds: tuple[int, ...] = (0, 1),
    name: str = "per-key aggregates",
    **options: Any,
) -> list[AuditResult]:
    """Exact audit of :func:`userdp.releases.aggregate` at its defaults (bounds by GEM, the range chosen over
    ``value_domain``), public ``keys``, step by step, over add/remove-one-person neighbours.

    ``datasets`` are tiny datasets (per person a list of ``(key, value)`` records). For every dataset ``D``, every
    ``D'`` = ``D`` less one person (a one-person dataset against the empty one) and every seed, the release runs
    on ``D`` and on ``D'`` inside :func:`userdp.noise.trace.recording`, which keeps what each randomized step
    hands its sampler -- the scores, sensitivity and epsilon of each exponential mechanism (GEM's bounds, the range's
    ends, the quantiles' grid, each key's quantile), the integer sums and the discrete Laplace's ``t`` and
    granularity of each noisy quantity ``N``, ``U``, ``S1``, ``S2`` -- as the library computes them. The second run
    replays the first's choices (sequential composition conditions each step on the earlier ones); both orders
    are run. Each step's exact worst loss, its draws' bound at the inputs seen and the epsilon handed to the draws the
    person moved (:func:`_draw_loss`, summed over the step's draws: the keys' draws are independent) are checked
    against its stated share in ``extras["composed_of"]`` (the range's two ends
    together), and the shares' total against the release's guarantee; a step drawing without a stated share, or a
    stated share whose draws the auditor cannot see, fails. ``options`` go to the release.

    Returns
    -------
    list of AuditResult
        One per step (in the release's order), then the shares' total.
    """
    import pyarrow as pa

    from ..noise.trace import recording
    from ..releases import aggregate

    def table(D):
        return pa.table({
            "user": pa.array([f"p{u}" for u, p in enumerate(D) for _ in p], pa.string()),
            "key": pa.array([k for p in D for k, _ in p], pa.string()),
            "value": pa.array([float(v) for p in D for _, v in p], pa.float64()),
        })  # fmt: skip

    def traced(D, seed, replay=None):
        with recording(replay) as log:
            rel = aggregate(table(D), epsilon, stats=list(stats), keys=list(keys), value_domain=value_domain,
                            engine="memory", rng=seed, **options)  # fmt: skip
        return rel, log

    worst: dict[str, tuple[float, Any]] = {}
    shares: dict[str, float | None] = {}
    problems: list[str] = []
    total, guarantee = 0.0, float(epsilon)
    for D in datasets:
        for u in range(len(D)):
            pair = (D, D[:u] + D[u + 1 :])
            for first, second in (pair, pair[::-1]):
                for seed in seeds:
                    rel, log = traced(first, seed)
                    _, log2 = traced(second, seed, log.picks())
                    parts = rel.extras["composed_of"]
                    total, guarantee = sum(float(g.epsilon) for g in parts.values()), float(rel.guarantee.epsilon)
                    if [(d["step"], d["kind"]) for d in log.draws] != [(d["step"], d["kind"]) for d in log2.draws]:
                        problems.append(f"the steps drawn differ between {first} and {second}")
                        continue
                    loss: dict[str, np.ndarray] = {}
                    for a, b in zip(log.draws, log2.draws, strict=True):
                        loss[a["step"]] = loss.get(a["step"], np.zeros(3)) + np.array(_draw_loss(a, b))
                    for step, x in loss.items():
                        shares[step] = _step_share(parts, step)
                        old = worst.get(step, (np.zeros(3) - 1, None, None))
                        worst[step] = (np.maximum(old[0], x), (first, second, seed) if x[1] > old[0][1] else old[1],
                                       (first, second, seed) if x[0] > old[0][0] else old[2])  # fmt: skip
                    seen = set(loss)
                    for k in parts:
                        if k not in seen and not any(k.startswith(s + "_") for s in seen):
                            problems.append(f"stated share {k!r} drew nothing the auditor can read")
    results = []
    for step, (x, where, where_exact) in worst.items():
        share = shares[step]
        ok = share is not None and max(x) <= share * (1 + 1e-9)
        results.append(AuditResult(
            f"{name}: {step}",
            f"{share:.6g}-DP (its stated share)" if share is not None else "no stated share",
            f"epsilon = {x[0]:.6g} (exact law); {x[1]:.6g} (the draws' epsilon at how far their inputs moved); "
            f"{x[2]:.6g} (the epsilon handed to the draws the person moved)",
            ok,
            f"exact over {len(datasets)} datasets, their remove-one-person neighbours and seeds {list(seeds)} "
            f"(earlier choices replayed); worst: {where[0]} against {where[1]}, seed {where[2]} (exact law: "
            f"{where_exact[0]} against {where_exact[1]})",
        ))  # fmt: skip
    ok = total <= guarantee * (1 + 1e-12) and not problems and bool(worst)
    results.append(AuditResult(
        f"{name}: the shares",
        f"{guarantee:.6g}-DP (add/remove one person) in all",
        f"the stated shares add up to {total:.6g}",
        ok,
        "; ".join(dict.fromkeys(problems)) or f"every draw belongs to a stated share ({', '.join(worst)})",
    ))  # fmt: skip
    return results

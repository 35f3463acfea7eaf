"""The policy Gaussian's l2 step with its rounding accounted (issue 35, item 1c): a numerical check of the
argument in docs/reference/vocabulary.md ("The policy Gaussian: why it is not shipped").

Two steps for a person with open items (below the cutoff ``Gamma``), gaps ``g = Gamma - h`` on them:

* ``line``: Gopi et al. (ICML 2020) section 4, Algorithm 8 (l2 descent): ``u = g min(1, 1 / ||g||_2)``, the
  items straight toward ``Gamma``. Non-expansive (``I - P`` of the unit ball) and monotone.
* ``fill``: water-filling ``u_i = min(g_i, c)`` with ``||u||_2 = 1`` (or every gap filled), the l1 policy's
  rule carried to l2. Not non-expansive: the exact check below finds the counterexamples.

Weights are integers at the grid ``2^-G`` (one unit of l2 norm is ``U = 2^G`` steps). Three computed forms:
``floor`` rounds down exactly on integers (``line``: ``isqrt(g_i^2 U^2 // Q)``, ``Q = sum g^2``; ``fill``:
``c = isqrt((U^2 - S_j) // q)``), so each item is 0 to 1 step low and ``eta < sqrt(q) / U``; ``float`` takes the
one square root in float64 from the exact integer sums (``eta < 1.5 sqrt(q) / U`` for ``G <= 50``); ``naive``
is all float64 (shown, not bounded). The reference is the exact step in mpmath at 60 digits.

Measured, on random and crafted weights (items near the cutoff and at breakpoints) and on orders chosen
greedily to maximise the coupled drift: the per-step ``eta`` against its bound; the exact steps'
non-expansiveness; the rounded ``line`` step's excess over non-expansive and its monotonicity; the drift of
coupled runs (with and without one person) against ``||u_p|| + 2 sum eta_t`` and ``1 + 2 eta N``, and its growth
with ``N``; the first-``N_max`` truncation's drift against ``sqrt((1 + 2 eta N)^2 + 1)``. Then the cost of
sensitivity ``sqrt(2)`` and ``2`` against ``1``: the weighted Gaussian union's noise scale and threshold at
epsilon 1, delta 1e-5, and the expected items released (float64 l2 descent) on Amazon Fashion and IMDB. The
private helpers ``userdp.vocabulary.union._threshold`` and ``_MARGIN`` are read, not changed.

Run: python experiments/policy_gaussian_rounding.py [--quick] [--imdb PATH]
"""

from __future__ import annotations

import argparse
import csv
import math
import random
from math import isqrt
from pathlib import Path

import mpmath as mp
import numpy as np

from userdp.noise.mechanisms import analytic_gaussian_sigma
from userdp.vocabulary import calibrate_union
from userdp.vocabulary import union as _union

OUT = Path(__file__).parent / "results"
mp.mp.dps = 60


# ---------------------------------------------------------------------------------------------- the steps
def _open_sorted(h, items, gam, cap):
    """(capped gap, item) for the person's open items, smallest gap first; a gap >= U never fills (c <= U)."""
    return sorted((min(gam - h[i], cap), i) for i in items if h[i] < gam)


def _breakpoint(gaps, uu):
    """``(j, S_j)``: the first ``j`` gaps fill (``S_j + q g_j^2 > U^2`` fails for them), exact integers."""
    m, s, j = len(gaps), 0, 0
    while j < m:
        g = gaps[j][0]
        if s + (m - j) * g * g > uu:
            break
        s += g * g
        j += 1
    return j, s


def step_int(h, items, gam, U, mode="floor", rule="line"):
    """The computed step ``u`` (dict item -> int steps) at integer weights ``h``; ``rule`` is ``line`` (Gopi et
    al.'s Algorithm 8: straight toward ``Gamma``) or ``fill`` (``min(gap, c)``, ``||u||_2 = 1``)."""
    if rule == "line":
        return _step_line(h, items, gam, U, mode)
    gaps = _open_sorted(h, items, gam, U)
    uu = U * U
    if mode == "naive":
        return _step_naive(gaps, gam, U)
    j, s = _breakpoint(gaps, uu)
    u = {i: g for g, i in gaps[:j]}
    q = len(gaps) - j
    if q:
        a = uu - s
        c = isqrt(a // q) if mode == "floor" else math.floor(math.sqrt(a / q))
        for g, i in gaps[j:]:
            u[i] = min(g, c)
    return u


def _step_line(h, items, gam, U, mode):
    """``u_i = g_i min(1, U / ||g||)``: ``floor`` exactly (``isqrt(g_i^2 U^2 // Q)``, ``Q = sum g^2``), ``float``
    from the exact integer ``Q`` in float64, ``naive`` all in float64 (gaps in units)."""
    gaps = [(gam - h[i], i) for i in items if h[i] < gam]
    qq = sum(g * g for g, _ in gaps)
    if qq <= U * U:
        return {i: g for g, i in gaps}
    if mode == "floor":
        return {i: isqrt(g * g * U * U // qq) for g, i in gaps}
    if mode == "float":
        r = math.sqrt(qq)
        return {i: min(g, math.floor(g * U / r)) for g, i in gaps}
    gf = [g / U for g, _ in gaps]
    z = math.sqrt(sum(x * x for x in gf))
    return {i: min(g, math.floor(x / z * U)) for (g, i), x in zip(gaps, gf, strict=True)}


def _step_naive(gaps, gam, U):
    gf = [g / U for g, _ in gaps]
    m, s, j = len(gf), 0.0, 0
    while j < m:
        if s + (m - j) * gf[j] * gf[j] > 1.0:
            break
        s += gf[j] * gf[j]
        j += 1
    u = {i: g for g, i in gaps[:j]}
    if j < m:
        c = math.sqrt(max(1.0 - s, 0.0) / (m - j))
        for g, i in gaps[j:]:
            u[i] = min(g, math.floor(c * U))
    return u


def step_exact(h, items, gam, rule="line"):
    """The exact step (mpmath) at real weights ``h`` (units): dict item -> mpf."""
    if rule == "line":
        gaps = [(gam - h[i], i) for i in items if h[i] < gam]
        z = mp.sqrt(sum(g * g for g, _ in gaps)) if gaps else mp.mpf(0)
        f = mp.mpf(1) if z <= 1 else 1 / z
        return {i: g * f for g, i in gaps}
    gaps = sorted((min(gam - h[i], mp.mpf(1)), i) for i in items if h[i] < gam)
    m, s, j = len(gaps), mp.mpf(0), 0
    while j < m:
        g = gaps[j][0]
        if s + (m - j) * g * g > 1:
            break
        s += g * g
        j += 1
    u = {i: g for g, i in gaps[:j]}
    if j < m:
        c = mp.sqrt((1 - s) / (m - j))
        for g, i in gaps[j:]:
            u[i] = min(g, c)
    return u


def eta_of(h, items, gam, U, mode, rule="line"):
    """``||u~(h) - u(h)||_2`` in units, and the number of items the rounding touches (``q``)."""
    ui = step_int(h, items, gam, U, mode, rule)
    ue = step_exact({i: mp.mpf(h[i]) / U for i in items}, items, mp.mpf(gam) / U, rule)
    err = mp.sqrt(sum((mp.mpf(ui.get(i, 0)) / U - ue.get(i, 0)) ** 2 for i in items))
    if rule == "line":
        gaps = [gam - h[i] for i in items if h[i] < gam]
        q = len(gaps) if sum(g * g for g in gaps) > U * U else 0
    else:
        gaps = _open_sorted(h, items, gam, U)
        q = len(gaps) - _breakpoint(gaps, U * U)[0]
    return float(err), q


def apply(h, u):
    for i, v in u.items():
        h[i] += v


def l2(a, b, n, U):
    return math.sqrt(sum((a[i] - b[i]) ** 2 for i in range(n))) / U


# ------------------------------------------------------------------------------------------- instances
def random_person(rng, n_items, kmax):
    return rng.sample(range(n_items), rng.randint(1, min(kmax, n_items)))


def crafted_h(rng, n_items, gam, U):
    """Weights near the cutoff and near a breakpoint: gaps 0..3 steps, or around U / sqrt(q) (ties)."""
    h = []
    for _ in range(n_items):
        r = rng.random()
        if r < 0.3:
            h.append(gam - rng.randint(0, 3))
        elif r < 0.7:
            q = rng.randint(1, 6)
            h.append(max(0, gam - isqrt(U * U // q) - rng.randint(-2, 2)))
        else:
            h.append(rng.randint(0, gam))
    return h


def run_coupled(persons, p, n_items, gam, U, mode, rule, start):
    """Runs from the shared weights ``start`` with ``p`` first and without it, the others in the given order:
    (final drift, ||u~_p|| plus the etas observed at both runs' states, drift of the exact runs)."""
    ha, hb = list(start), list(start)
    up = step_int(ha, p, gam, U, mode, rule)
    apply(ha, up)
    obs = math.sqrt(sum(v * v for v in up.values())) / U
    for x in persons:
        obs += eta_of(ha, x, gam, U, mode, rule)[0] + eta_of(hb, x, gam, U, mode, rule)[0]
        apply(ha, step_int(ha, x, gam, U, mode, rule))
        apply(hb, step_int(hb, x, gam, U, mode, rule))
    ga = mp.mpf(gam) / U
    ea = {i: mp.mpf(start[i]) / U for i in range(n_items)}
    eb = dict(ea)
    for i, v in step_exact(ea, p, ga, rule).items():
        ea[i] += v
    for x in persons:
        for i, v in step_exact(ea, x, ga, rule).items():
            ea[i] += v
        for i, v in step_exact(eb, x, ga, rule).items():
            eb[i] += v
    d_exact = float(mp.sqrt(sum((ea[i] - eb[i]) ** 2 for i in range(n_items))))
    return l2(ha, hb, n_items, U), obs, d_exact


def greedy_order(pool, p, n_items, gam, U, rule, n_steps, start):
    """Persons chosen one at a time (with repetition) from ``pool`` to maximise the next coupled drift of the
    rounded (``floor``) runs (ties: the person with most items where the runs differ)."""
    ha, hb = list(start), list(start)
    apply(ha, step_int(ha, p, gam, U, "floor", rule))
    order = []
    for _ in range(n_steps):
        best, best_d = None, (-1.0, 0)
        for x in pool:
            a, b = list(ha), list(hb)
            apply(a, step_int(a, x, gam, U, "floor", rule))
            apply(b, step_int(b, x, gam, U, "floor", rule))
            d = (l2(a, b, n_items, U), sum(ha[i] != hb[i] for i in x))
            if d > best_d:
                best, best_d = x, d
        order.append(best)
        apply(ha, step_int(ha, best, gam, U, "floor", rule))
        apply(hb, step_int(hb, best, gam, U, "floor", rule))
    return order


# ------------------------------------------------------------------------------------------- the checks
def _row(check, rule, mode, G, trials, observed, ratio, bound, holds, **extra):
    return dict(check=check, rule=rule, mode=mode, G=G, trials=trials, observed=observed, ratio=ratio,
                bound=bound, holds=holds, **extra)  # fmt: skip


def check_eta(rng, rows, trials, rule):
    """Per-step eta against ``sqrt(q) / U`` (``floor``) and ``1.5 sqrt(q) / U`` (``float``), on random and
    crafted weights, G from 4 to 50; ``ratio`` is the worst ``eta / (sqrt(q) / U)``."""
    for G in (4, 8, 20, 40, 50):
        U = 1 << G
        for mode in ("floor", "float", "naive"):
            worst_ratio, worst_eta = 0.0, 0.0
            for t in range(trials):
                n_items = rng.randint(1, 40)
                gam = U * rng.randint(1, 4) + rng.randint(0, U)
                h = crafted_h(rng, n_items, gam, U) if t % 2 else [rng.randint(0, gam) for _ in range(n_items)]
                items = random_person(rng, n_items, 40)
                e, q = eta_of(h, items, gam, U, mode, rule)
                worst_eta = max(worst_eta, e)
                if q:
                    worst_ratio = max(worst_ratio, e / (math.sqrt(q) / U))
                elif e > 0:
                    worst_ratio = float("inf")
            bound = {"floor": 1.0, "float": 1.5}.get(mode, float("nan"))
            holds = (worst_ratio <= bound) if mode != "naive" else ""
            rows.append(_row("eta", rule, mode, G, trials, worst_eta, worst_ratio, bound, holds))


def check_exact_nonexpansive(rng, rows, trials):
    """``||F(h) - F(g)|| <= ||h - g||`` for the exact steps (mpmath) on random real pairs near the cutoff."""
    for rule in ("line", "fill"):
        worst, example = -1.0, None
        for _ in range(trials):
            n_items = rng.randint(1, 8)
            gam = mp.mpf(rng.choice([0.5, 1, 2, 3]))
            items = random_person(rng, n_items, 8)
            h = {i: gam * mp.mpf(rng.random()) ** 0.3 for i in range(n_items)}
            g = {i: min(gam, max(mp.mpf(0), h[i] + mp.mpf(rng.gauss(0, 0.3)))) for i in range(n_items)}
            fh, fg = dict(h), dict(g)
            for i, v in step_exact(h, items, gam, rule).items():
                fh[i] += v
            for i, v in step_exact(g, items, gam, rule).items():
                fg[i] += v
            d0 = mp.sqrt(sum((h[i] - g[i]) ** 2 for i in range(n_items)))
            d1 = mp.sqrt(sum((fh[i] - fg[i]) ** 2 for i in range(n_items)))
            if float(d1 - d0) > worst:
                worst = float(d1 - d0)
                example = (float(gam), [float(h[i]) for i in items], [float(g[i]) for i in items])
        rows.append(_row("exact_nonexpansive", rule, "exact", "", trials, worst, "", 0.0, worst <= 1e-40,
                         example=example if worst > 1e-40 else ""))  # fmt: skip


def check_rounded_expansion(rng, rows, trials):
    """The rounded ``line`` step is not non-expansive: largest ``||F~(h) - F~(g)|| - ||h - g||`` (``observed``,
    in grid steps) and its largest ratio to the two etas at ``h`` and ``g``."""
    for G in (3, 6, 10):
        U = 1 << G
        worst, worst_ratio = -1e9, -1e9
        for _ in range(trials):
            n_items = rng.randint(1, 6)
            gam = U * rng.randint(1, 2) + rng.randint(0, U)
            h = crafted_h(rng, n_items, gam, U)
            g = list(h)
            for _ in range(rng.randint(1, 3)):  # a nearby lattice point
                i = rng.randrange(n_items)
                g[i] = min(gam, max(0, g[i] + rng.choice([-1, 1]) * rng.randint(1, 2)))
            items = random_person(rng, n_items, 6)
            d0 = l2(h, g, n_items, U)
            a, b = list(h), list(g)
            apply(a, step_int(a, items, gam, U))
            apply(b, step_int(b, items, gam, U))
            excess = l2(a, b, n_items, U) - d0
            two_eta = eta_of(h, items, gam, U, "floor")[0] + eta_of(g, items, gam, U, "floor")[0]
            worst = max(worst, excess)
            if two_eta > 0:
                worst_ratio = max(worst_ratio, excess / two_eta)
            elif excess > 1e-12:
                worst_ratio = float("inf")
        rows.append(_row("rounded_excess", "line", "floor", G, trials, worst * U, worst_ratio, 1.0,
                         worst_ratio <= 1 + 1e-12))  # fmt: skip


def check_monotone(rng, rows, trials):
    """The rounded ``line`` step is monotone: ``h <= h'`` gives ``F~(h) <= F~(h')`` (the truncation bound)."""
    bad = 0
    for _ in range(trials):
        G = rng.choice((3, 5, 8))
        U = 1 << G
        n_items = rng.randint(1, 6)
        gam = U * rng.randint(1, 2) + rng.randint(0, U)
        h = crafted_h(rng, n_items, gam, U)
        h2 = [min(gam, x + rng.randint(0, 3)) for x in h]
        items = random_person(rng, n_items, 6)
        a, b = list(h), list(h2)
        apply(a, step_int(a, items, gam, U))
        apply(b, step_int(b, items, gam, U))
        bad += any(x > y for x, y in zip(a, b, strict=True))
    rows.append(_row("floor_monotone", "line", "floor", "3,5,8", trials, bad, "", 0, bad == 0))


def check_drift(rng, rows, trials, n_persons, greedy_trials, rule):
    """Coupled runs (with and without one person ``p``) from zero or from crafted shared weights (items near the
    cutoff and at breakpoints), on random and greedy orders, coarse grids: ``observed`` the largest drift,
    ``ratio`` the largest drift over ``||u~_p|| + 2 sum eta_t`` (observed etas), ``bound`` the largest drift over
    ``1 + 2 N sqrt(k) / U``; the exact runs' largest drift and the largest rounded drift above 1 alongside."""
    for G in (3, 4, 6, 10):
        U = 1 << G
        for kind in ("random", "greedy"):
            n_t = trials if kind == "random" else greedy_trials
            worst_d, worst_obs, worst_b, worst_ex = 0.0, 0.0, 0.0, 0.0
            for t in range(n_t):
                n_items = rng.randint(2, 12)
                kmax = rng.randint(1, n_items)
                gam = U * rng.randint(1, 12) + rng.randint(0, U)
                start = crafted_h(rng, n_items, gam, U) if t % 2 else [0] * n_items
                p = random_person(rng, n_items, kmax)
                if kind == "random":
                    persons = [random_person(rng, n_items, kmax) for _ in range(n_persons)]
                else:
                    pool = [random_person(rng, n_items, kmax) for _ in range(12)]
                    persons = greedy_order(pool, p, n_items, gam, U, rule, n_persons, start)
                d, obs, d_ex = run_coupled(persons, p, n_items, gam, U, "floor", rule, start)
                worst_d = max(worst_d, d)
                worst_obs = max(worst_obs, d / obs if obs > 0 else (0.0 if d == 0 else float("inf")))
                worst_b = max(worst_b, d / (1 + 2 * len(persons) * math.sqrt(kmax) / U))
                worst_ex = max(worst_ex, d_ex)
            holds = worst_obs <= 1 + 1e-12 and worst_b <= 1 + 1e-12 and worst_ex <= 1 + 1e-30
            rows.append(_row(f"drift_{kind}", rule, "floor", G, n_t, worst_d, worst_obs, worst_b, holds,
                             exact_drift=worst_ex, n_persons=n_persons))  # fmt: skip


def check_growth(rng, rows, trials):
    """The rounded drift's growth with the number of later persons N (greedy orders, G = 4 and 6): largest
    drift above 1 (``observed``) against ``2 N sqrt(k) / U`` (``bound``: the largest ratio)."""
    for G in (4, 6):
        U = 1 << G
        for n in (10, 20, 40, 80):
            worst, worst_ratio = 0.0, 0.0
            for t in range(trials):
                n_items = rng.randint(3, 10)
                kmax = rng.randint(2, n_items)
                gam = U * rng.randint(4, 12)
                start = crafted_h(rng, n_items, gam, U) if t % 2 else [0] * n_items
                p = random_person(rng, n_items, kmax)
                pool = [random_person(rng, n_items, kmax) for _ in range(12)]
                persons = greedy_order(pool, p, n_items, gam, U, "line", n, start)
                d = run_coupled(persons, p, n_items, gam, U, "floor", "line", start)[0]
                worst = max(worst, d - 1)
                worst_ratio = max(worst_ratio, (d - 1) / (2 * n * math.sqrt(kmax) / U))
            rows.append(_row("drift_growth", "line", "floor", G, trials, worst, "", worst_ratio, worst_ratio <= 1,
                             n_persons=n))  # fmt: skip


def check_truncation(rng, rows, trials):
    """Processing only the first N_max persons (``line``, ``floor``): neighbours at n = N_max and N_max + 1, p
    among the first N_max of the larger one's order, the pushed-out person processed last in the smaller one;
    the drift (``observed``) against ``sqrt((1 + 2 eta N)^2 + 1)`` (``bound``: the largest ratio)."""
    for G in (3, 6):
        U = 1 << G
        worst, worst_ratio = 0.0, 0.0
        for _ in range(trials):
            n_items = rng.randint(2, 6)
            kmax = rng.randint(1, n_items)
            gam = U * rng.randint(1, 3) + rng.randint(0, U)
            n_max = rng.randint(1, 12)
            others = [random_person(rng, n_items, kmax) for _ in range(n_max)]  # D: n = N_max persons
            p = random_person(rng, n_items, kmax)
            pos = rng.randint(0, n_max - 1)  # p's place in D''s order, within the first N_max
            big = others[:pos] + [p] + others[pos:]  # D': N_max + 1 persons, the last one pushed out
            ha, hb = [0] * n_items, [0] * n_items
            for x in big[:n_max]:
                apply(ha, step_int(ha, x, gam, U))
            for x in others:
                apply(hb, step_int(hb, x, gam, U))
            d = l2(ha, hb, n_items, U)
            later = n_max - 1 - pos
            bound = math.sqrt((1 + 2 * math.sqrt(kmax) / U * later) ** 2 + 1)
            worst = max(worst, d)
            worst_ratio = max(worst_ratio, d / bound)
        rows.append(_row("truncation", "line", "floor", G, trials, worst, "", worst_ratio, worst_ratio <= 1 + 1e-12))


def cost_rows(rows):
    """Noise scale (``observed``) and threshold (``ratio``), in units of one person's weight, of the weighted
    Gaussian union's calibration at l2 sensitivity s (1, sqrt(2) (1 + 1e-3), 2), epsilon 1, delta 1e-5, a new
    item's weight ``1/sqrt(k)`` in every case (``G`` holds k); ``bound`` the threshold over s = 1's; the analytic
    Gaussian sigma at delta / 2 alongside."""
    eps, delta = 1.0, 1e-5
    unit = _union.UNIT
    for k in (1, 10, 100):
        base = calibrate_union(eps, delta, k, "gaussian")
        for s in (1.0, math.sqrt(2) * (1 + 1e-3), 2.0):
            scaled = calibrate_union(eps, delta, k, "gaussian", unit=int(round(s * unit)))  # its scale: s units
            target = (delta - scaled.delta_gaussian) * (1 - _union._MARGIN)
            t = _union._threshold("gaussian", scaled.scale, k, unit, target)  # new items still at unit/sqrt(k)
            rows.append(_row("cost", "", f"s={s:.4f}", k, "", scaled.scale / unit, t / unit, t / base.threshold,
                             "", exact_drift=analytic_gaussian_sigma(s, eps, delta / 2)))  # fmt: skip


def _policy_line_float(offsets, items, n_items, cutoff, order):
    """Gopi et al.'s l2 descent in float64 (an estimate of its weights, not the rounded step above)."""
    h = np.zeros(n_items)
    for pi in order:
        mine = items[offsets[pi] : offsets[pi + 1]]
        if mine.size == 0:
            continue
        v = np.maximum(cutoff - h[mine], 0.0)
        z = math.sqrt(float(v @ v))
        if z > 0:
            h[mine] += v * min(1.0, 1.0 / z)
    return h


def released_rows(rows, seeds, name="Amazon Fashion (words)", ds=None, ks=(10, 100)):
    """Expected items released on a dataset (Amazon Fashion's words by default) at epsilon 1, delta 1e-5:
    ``sum_i P[w_i + Z >= T]`` with the weighted Gaussian's weights, and with the float64 l2 descent's at
    sensitivity 1 (Gopi et al.; not shippable), sqrt(2) (1 + 1e-3) and 2 (the truncated variant's), its cutoff
    ``T + 3 sigma``; ``G`` holds max_items, ``observed`` the mean over seeds of the expected count."""
    from scipy.special import ndtr

    from userdp.datasets import amazon_fashion
    from userdp.vocabulary.union import bound_contributions, union_histogram

    ds = amazon_fashion() if ds is None else ds
    n_items = len(ds.domain)
    eps, delta = 1.0, 1e-5
    unit = _union.UNIT
    for k in ks:
        got: dict[str, list[float]] = {}
        cals = {}
        for s in (1.0, math.sqrt(2) * (1 + 1e-3), 2.0):
            scaled = calibrate_union(eps, delta, k, "gaussian", unit=int(round(s * unit)))
            target = (delta - scaled.delta_gaussian) * (1 - _union._MARGIN)
            cals[s] = (scaled.scale / unit, _union._threshold("gaussian", scaled.scale, k, unit, target) / unit)
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            off, its = bound_contributions(ds.offsets, ds.items, k, rng=seed)
            sigma, t = cals[1.0]
            w = union_histogram(off, its, n_items, "gaussian") / unit
            held = np.zeros(n_items, dtype=bool)
            held[its] = True
            got.setdefault("weighted gaussian (s=1)", []).append(float(ndtr((w[held] - t) / sigma).sum()))
            order = rng.permutation(off.size - 1)
            for s, (sigma, t) in cals.items():
                h = _policy_line_float(off, its, n_items, t + 3 * sigma, order)
                got.setdefault(f"policy gaussian (s={s:.4f})", []).append(float(ndtr((h[held] - t) / sigma).sum()))
        for label, v in got.items():
            rows.append(_row("released", name, label, k, seeds, float(np.mean(v)), "", "", ""))


FIELDS = ["check", "rule", "mode", "G", "trials", "observed", "ratio", "bound", "holds", "exact_drift",
          "n_persons", "example"]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    imdb = Path(__file__).resolve().parents[2] / "shared/datasets/imdb_reviews.jsonl.xz"
    ap.add_argument("--imdb", default=str(imdb), help="IMDB reviews for the items estimate; skipped when absent")
    args = ap.parse_args()
    rng = random.Random(2026)
    f = 0.2 if args.quick else 1.0
    rows: list[dict] = []
    for rule in ("line", "fill"):
        check_eta(rng, rows, int(400 * f), rule)
    check_exact_nonexpansive(rng, rows, int(3000 * f))
    check_rounded_expansion(rng, rows, int(4000 * f))
    check_monotone(rng, rows, int(4000 * f))
    check_drift(rng, rows, int(150 * f), 40, int(20 * f), "line")
    check_growth(rng, rows, int(8 * f) or 1)
    check_truncation(rng, rows, int(2000 * f))
    cost_rows(rows)
    released_rows(rows, 3)
    if not args.quick and Path(args.imdb).exists():
        from userdp.datasets import imdb_reviews

        released_rows(rows, 1, "IMDB reviews (words)", imdb_reviews(args.imdb), (100,))
    OUT.mkdir(exist_ok=True)
    with open(OUT / "policy_gaussian_rounding.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    for r in rows:
        print({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in r.items()})


if __name__ == "__main__":
    main()

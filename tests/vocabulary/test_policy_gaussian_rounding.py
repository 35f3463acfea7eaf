"""The policy Gaussian's rounding argument (issue 35 item 1c; docs/reference/vocabulary.md, "The policy
Gaussian: why it is not shipped"), checked on the tiny steps defined here (userdp ships no policy Gaussian):
water-filling in l2 is not non-expansive, Gopi et al.'s straight line (Algorithm 8) is; its exact integer
rounding is within one grid step per item, monotone, and coupled runs stay within ``1 + 2 eta N`` (and the
first-N_max truncation within ``sqrt((1 + 2 eta N)^2 + 1)``, reached at ``sqrt(2)``)."""

from __future__ import annotations

import math
import random
from math import isqrt

import mpmath as mp


def _fill_step(h, items, gam):
    """Water-filling in l2 (floats): ``u_i = min(gam - h_i, c)`` with ``||u||_2 = 1`` or every gap filled."""
    gaps = sorted((gam - h[i], i) for i in items if h[i] < gam)
    m, s, j = len(gaps), 0.0, 0
    while j < m and s + (m - j) * gaps[j][0] ** 2 <= 1.0:
        s += gaps[j][0] ** 2
        j += 1
    out = list(h)
    for g, i in gaps[:j]:
        out[i] += g
    if j < m:
        c = math.sqrt((1.0 - s) / (m - j))
        for g, i in gaps[j:]:
            out[i] += min(g, c)
    return out


def _line_step(h, items, gam):
    """Gopi et al.'s l2 descent (reals): open items move straight toward ``gam`` by ``min(1, ||gap||)``."""
    gaps = [(gam - h[i], i) for i in items if h[i] < gam]
    z = math.sqrt(sum(g * g for g, _ in gaps)) if gaps else 0.0
    out = list(h)
    for g, i in gaps:
        out[i] += g if z <= 1 else g / z
    return out


def _line_floor(h, items, gam, unit):
    """The straight line on integers at grid ``1/unit``, rounded down exactly: ``isqrt(g^2 U^2 // Q)``."""
    gaps = [(gam - h[i], i) for i in items if h[i] < gam]
    q = sum(g * g for g, _ in gaps)
    out = list(h)
    for g, i in gaps:
        out[i] += g if q <= unit * unit else isqrt(g * g * unit * unit // q)
    return out


def _dist(a, b):
    return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b, strict=True)))


def _person(rng, n, k):
    return rng.sample(range(n), rng.randint(1, k))


def test_water_filling_in_l2_expands_and_the_straight_line_does_not():
    h, g = [0.0, 1.25], [1.0, 1.75]
    assert _dist(_fill_step(h, [0, 1], 2.0), _fill_step(g, [0, 1], 2.0)) > _dist(h, g) + 0.14
    rng = random.Random(1)
    for _ in range(3000):
        n = rng.randint(1, 6)
        gam = rng.choice([0.5, 1.0, 2.0, 3.0])
        h = [gam * rng.random() ** 0.3 for _ in range(n)]
        g = [min(gam, max(0.0, x + rng.gauss(0, 0.3))) for x in h]
        items = _person(rng, n, n)
        assert _dist(_line_step(h, items, gam), _line_step(g, items, gam)) <= _dist(h, g) + 1e-12


def test_the_exact_integer_rounding_is_below_one_step_per_item_and_monotone():
    mp.mp.dps = 50
    rng = random.Random(2)
    for _ in range(1500):
        unit = 1 << rng.choice((3, 8, 30, 50))
        n = rng.randint(1, 12)
        gam = unit * rng.randint(1, 4) + rng.randint(0, unit)
        h = [rng.randint(max(0, gam - 2 * unit), gam) for _ in range(n)]
        items = _person(rng, n, n)
        got = _line_floor(h, items, gam, unit)
        gaps = [gam - h[i] for i in items if h[i] < gam]
        q = sum(x * x for x in gaps)
        f = 1 if q <= unit * unit else unit / mp.sqrt(q)  # the branch decided on integers
        err = [mp.mpf(gam - h[i]) / unit * f - mp.mpf(got[i] - h[i]) / unit for i in items if h[i] < gam]
        # rounded down, by less than one step (-1e-40: mpmath's last digit where g U / sqrt(Q) is an integer)
        assert all(-1e-40 <= e < mp.mpf(1) / unit for e in err)
        assert mp.sqrt(sum(e * e for e in err)) < math.sqrt(len(items)) / unit  # eta < sqrt(m) 2^-G
        h2 = [min(gam, x + rng.randint(0, 3)) for x in h]
        assert all(a <= b for a, b in zip(got, _line_floor(h2, items, gam, unit), strict=True))  # monotone


def _greedy_drift(rng, unit, n_persons):
    """A coupled pair of rounded runs (with and without p first), each next person chosen from a pool to
    maximise the drift; returns (drift, 1 + 2 N sqrt(k) / U)."""
    n = rng.randint(2, 10)
    k = rng.randint(1, n)
    gam = unit * rng.randint(1, 12) + rng.randint(0, unit)
    p = _person(rng, n, k)
    pool = [_person(rng, n, k) for _ in range(12)]
    a, b = _line_floor([0] * n, p, gam, unit), [0] * n
    for _ in range(n_persons):
        x = max(pool, key=lambda y: _dist(_line_floor(a, y, gam, unit), _line_floor(b, y, gam, unit)))
        a, b = _line_floor(a, x, gam, unit), _line_floor(b, x, gam, unit)
    return _dist(a, b) / unit, 1 + 2 * n_persons * math.sqrt(k) / unit


def test_coupled_rounded_runs_drift_past_one_but_within_the_bound():
    rng = random.Random(3)
    drifts = []
    for _ in range(12):
        d, bound = _greedy_drift(rng, 1 << 3, 30)
        assert d <= bound
        drifts.append(d)
    assert max(drifts) > 1.05  # the rounded step really expands: the slack is needed


def test_first_n_max_truncation_stays_within_sqrt2_and_reaches_it():
    rng = random.Random(4)
    unit, worst = 1 << 3, 0.0
    for _ in range(1500):
        n = rng.randint(2, 6)
        k = rng.randint(1, n)
        gam = unit * rng.randint(1, 3) + rng.randint(0, unit)
        n_max = rng.randint(1, 10)
        others = [_person(rng, n, k) for _ in range(n_max)]  # D: N_max persons, all processed
        p = _person(rng, n, k)
        pos = rng.randint(0, n_max - 1)
        big = others[:pos] + [p] + others[pos:]  # D': p within the first N_max, the last one pushed out
        a, b = [0] * n, [0] * n
        for x in big[:n_max]:
            a = _line_floor(a, x, gam, unit)
        for x in others:
            b = _line_floor(b, x, gam, unit)
        later = n_max - 1 - pos
        d = _dist(a, b) / unit
        assert d <= math.sqrt((1 + 2 * later * math.sqrt(k) / unit) ** 2 + 1) + 1e-12
        worst = max(worst, d)
    assert worst > 1.4  # sqrt(2) is reached: the truncation's second unit is real (but not 2)

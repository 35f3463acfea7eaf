"""Per-key counts with privately chosen bounds through :func:`userdp.releases.key_counts` with its defaults
(``bounds="auto"``; keys selected from the data unless listed): the law of the bounds ``(L0, Linf)`` the real
sampler draws (GEM's uniform swept, its cells read off) against GEM's law computed here from the definitions
(kept records by brute force, ``E|noise| = L0 Linf / epsilon_counts``, normalized scores of sensitivity 1);
the counts' noise at the chosen bounds against the scale ``L0 Linf`` (l1) or ``sqrt(L0) Linf`` (l2) and the
three-way budget split call for; what the key selection sees (each person's ``max_keys`` kept keys, never
every key a person holds); and the split the samplers are handed."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pyarrow as pa
import pytest

import userdp.vocabulary.union as union
from userdp import releases
from userdp.noise import RandomSource, calibrate_gaussian
from userdp.privacy import LargeDeltaWarning

counts_module = importlib.import_module("userdp.vocabulary.counts")
TOP = 1 << 256  # the exponential mechanism's first uniform is randbelow(2^256)
GRID = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # the release's default candidates for L0 and for Linf
SMALL = (1, 2, 4)  # candidates for the Gaussian tests: the default grid's 81 Gaussian calibrations take 2 s


class FirstUniform(RandomSource):
    """A seeded source whose first ``randbelow(2^256)``, the exponential mechanism's uniform ``U``, is ``u``;
    every other draw is the seeded stream's."""

    def __init__(self, u: int, seed: int = 0) -> None:
        super().__init__(seed)
        self.u = u

    def randbelow(self, n: int) -> int:
        if n == TOP and self.u is not None:
            u, self.u = self.u, None
            return u
        return super().randbelow(n)


def _records(persons: list[dict[str, int]]) -> pa.Table:
    """One row per record: person ``u`` holds ``m`` records of key ``k`` for each ``k: m`` of ``persons[u]``."""
    users = [u for u, p in enumerate(persons) for k, m in p.items() for _ in range(m)]
    keys = [k for p in persons for k, m in p.items() for _ in range(m)]
    return pa.table({"user": users, "key": keys})


def _small_persons() -> list[dict[str, int]]:
    rng = np.random.default_rng(7)
    out = []
    for _ in range(40):
        ks = rng.choice(5, int(rng.integers(1, 5)), replace=False)
        out.append({f"k{j}": int(m) for j, m in zip(ks, rng.integers(1, 7, ks.size), strict=True)})
    return out


def _kept(persons: list[dict[str, int]], l0: int, linf: int) -> int:
    """The records the bounds keep: each person's ``l0`` keys of most records, at most ``linf`` on each."""
    return sum(sum(min(m, linf) for m in sorted(p.values(), reverse=True)[:l0]) for p in persons)


def _gem_law(persons, n_keys: int, epsilon: float, grid, beta: float = 0.1) -> dict:
    """GEM's law of the bounds with public keys: ``eps_select = 0.2 eps``, ``eps_counts = 0.8 eps``,
    ``q_b = kept_b - K L0 Linf / eps_counts`` with sensitivity ``L0 Linf``, ``t = 2 ln(m / beta) / eps_select``
    (``beta = 0.1``, the release's), normalized scores, ``P[b] ∝ exp(eps_select s_b / 2)``."""
    e_sel, e_cnt = 0.2 * epsilon, 0.8 * epsilon
    q = np.array([_kept(persons, a, b) - n_keys * a * b / e_cnt for a, b in grid], dtype=np.float64)
    d = np.array([a * b for a, b in grid], dtype=np.float64)
    x = q - 2 * math.log(len(grid) / beta) / e_sel * d
    s = ((x[:, None] - x[None, :]) / (d[:, None] + d[None, :])).min(axis=1)
    w = np.exp(e_sel * (s - s.max()) / 2)
    return dict(zip(grid, w / w.sum(), strict=True))


def _swept_law(draw) -> dict:
    """The law of ``draw(u)`` over a uniform ``u`` in ``[0, 2^256)``, read off the real sampler: its value
    changes at finitely many points (the exponential mechanism inverts its CDF), found by bisection to
    ``2^-34``; each value's probability is the length of its cell."""
    step = TOP >> 34
    changes = []

    def walk(lo, hi, a, b):
        if a == b:
            return
        if hi - lo <= step:
            changes.append((hi, b))
            return
        mid = (lo + hi) // 2
        m = draw(mid)
        walk(lo, mid, a, m)
        walk(mid, hi, m, b)

    first, last = draw(0), draw(TOP - 1)
    walk(0, TOP - 1, first, last)
    law, pos, cur = {}, 0, first
    for at, nxt in sorted(changes):
        law[cur] = law.get(cur, 0.0) + (at - pos) / TOP
        pos, cur = at, nxt
    law[cur] = law.get(cur, 0.0) + (TOP - pos) / TOP
    return law


def test_the_release_draws_the_bounds_with_gem_s_law_exactly():
    """Public keys, candidates ``{1, 2, 4}^2``: the cells in which the real release returns each ``(L0, Linf)``
    are GEM's probabilities from the definitions, to 1e-9 (the nine spread from 0.04 to 0.2). A choice made
    with sensitivity ``Linf`` (or ``L0``) alone, a threshold without its factor 2, or noise costs computed
    with another share of epsilon move them."""
    persons = _small_persons()
    table = _records(persons)
    keys = [f"k{j}" for j in range(5)]
    grid = tuple((a, b) for a in (1, 2, 4) for b in (1, 2, 4))

    def draw(u):
        v = releases.key_counts(table, 2.0, keys=keys, l0s=(1, 2, 4), linfs=(1, 2, 4), rng=FirstUniform(u)).value
        return v["l0"], v["linf"]

    got = _swept_law(draw)
    want = _gem_law(persons, 5, 2.0, grid)
    assert set(got) == set(want) and min(want.values()) > 0.03
    for b in grid:
        assert abs(got[b] - want[b]) < 1e-9, (b, got[b], want[b])


def test_the_release_with_its_defaults_draws_the_bounds_with_gem_s_law():
    """The default candidates (``{1, 2, ..., 256}^2``, 81 of them): on 48 uniforms spread over ``[0, 1)`` the
    real release returns the bounds whose cell of GEM's law (from the definitions, in the release's candidate
    order ``L0``-major) holds the uniform; the law spreads over eight candidates or more."""
    persons = _small_persons()
    table = _records(persons)
    keys = [f"k{j}" for j in range(5)]
    grid = [(a, b) for a in GRID for b in GRID]
    law = _gem_law(persons, 5, 2.0, grid)
    cdf = np.cumsum([law[b] for b in grid])
    assert np.sum(np.array(list(law.values())) > 0.01) >= 8
    for j in range(48):
        u = (2 * j + 1) * (TOP // 96)
        x = u / TOP
        if np.min(np.abs(cdf - x)) < 1e-9:
            continue
        want = grid[int(np.searchsorted(cdf, x, side="right"))]
        v = releases.key_counts(table, 2.0, keys=keys, rng=FirstUniform(u)).value
        assert (v["l0"], v["linf"]) == want, (x, want)


def _two_keys_two_records(n_keys: int, holders: int) -> pa.Table:
    """``n_keys`` keys each held by ``holders`` persons; every person holds 2 keys with 2 records each."""
    n = n_keys * holders // 2
    first = np.arange(n) % n_keys
    second = (first + 1 + np.arange(n) // n_keys) % n_keys
    users = np.repeat(np.arange(n), 4)
    keys = np.column_stack([first, first, second, second]).ravel()
    return pa.table({"user": users, "key": np.array([f"k{k:04d}" for k in keys])})


def test_counts_with_auto_bounds_have_the_noise_of_the_chosen_bounds():
    """The default ``bounds="auto"`` with public keys: 3,000 keys each held by 10 persons, every person holding 2
    keys of 2 records. GEM picks ``(2, 2)`` (which keeps everything at the least noise), and the counts' noise
    has standard deviation ``sqrt(2) L0 Linf / eps_counts`` with ``eps_counts = 0.8 eps`` (the selection's 20%
    deducted), measured within 8%: the count noise calibrated with the selection's share added back (0.8x), or
    for sensitivity ``Linf`` alone (0.5x), is caught, and a scale 30% off is rejected."""
    n_keys, holders, eps = 3000, 10, 2.0
    table = _two_keys_two_records(n_keys, holders)
    keys = [f"k{k:04d}" for k in range(n_keys)]
    rel = releases.key_counts(table, eps, keys=keys, rng=3)
    v = rel.value
    assert (v["l0"], v["linf"]) == (2, 2) and list(v["keys"]) == keys
    sd = math.sqrt(2) * v["l0"] * v["linf"] / (0.8 * eps)
    est = float(np.sqrt(np.mean((v["counts"] - 2 * holders) ** 2)))
    assert abs(est / sd - 1) < 0.08 and abs(est / (1.3 * sd) - 1) > 0.15 and abs(est / (0.7 * sd) - 1) > 0.2, est


def test_gaussian_counts_of_selected_keys_with_auto_bounds_have_the_stated_noise():
    """All defaults but Gaussian noise (keys selected from the data, bounds by GEM): 1,000 keys each held by 30
    persons holding 2 keys of 2 records. Every key is selected, GEM picks ``(2, 2)``, and the counts' noise is
    the lattice Gaussian's for l2 sensitivity ``sqrt(L0) Linf`` at ``eps_counts = 0.5 x 0.8 eps`` and half of
    delta, measured within 8% (sensitivity ``Linf`` without ``sqrt(L0)`` is 0.71x). (Candidates ``{1, 2, 4}^2``:
    the default grid is the Laplace tests'.)"""
    n_keys, holders, eps, delta = 1000, 30, 8.0, 1e-5
    table = _two_keys_two_records(n_keys, holders)
    rel = releases.key_counts(table, eps, delta, noise="gaussian", l0s=SMALL, linfs=SMALL, rng=4)
    v = rel.value
    assert v["keys"].size == n_keys and (v["l0"], v["linf"]) == (2, 2)
    sd = calibrate_gaussian(math.sqrt(v["l0"]) * v["linf"], 0.5 * 0.8 * eps, delta / 2).sigma
    est = float(np.sqrt(np.mean((v["counts"] - 2 * holders) ** 2)))
    assert abs(est / sd - 1) < 0.08 and abs(est / (1.3 * sd) - 1) > 0.15 and abs(est / (0.7 * sd) - 1) > 0.2, est


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_the_key_selection_sees_each_person_s_kept_keys_only(monkeypatch, engine):
    """One person holds 20,000 keys no one else holds; 300 persons hold "common". With the default selection
    (``max_keys`` bounds each person where the data are, before the set union), the per-key sums the union is
    built from count the heavy person on at most ``max_keys = 5`` keys (each held once), and none of them is
    released in 3 releases (their 5 kept keys pass with probability at most delta = 1% in all); selecting
    from every key a person holds releases some 15 of them per release."""
    from userdp.engines import get_engine

    heavy = 20_000
    users = np.r_[np.zeros(heavy, dtype=np.int64), np.arange(1, 301)]
    keys = np.r_[np.array([f"h{j:05d}" for j in range(heavy)]), np.full(300, "common")]
    table = pa.table({"user": users, "key": keys})
    eng = get_engine(engine)
    seen = []
    real = type(eng).bounded_item_sums

    def item_sums(self, data, cap, keep, weights):
        labels, sums = real(self, data, cap, keep, weights)
        heavy_rows = np.array([str(x).startswith("h") for x in labels], dtype=bool)
        seen.append((cap, int(heavy_rows.sum()), int(sums[heavy_rows, 1].sum()), int(sums[~heavy_rows, 1].sum())))
        return labels, sums

    monkeypatch.setattr(type(eng), "bounded_item_sums", item_sums)
    for seed in range(3):
        with pytest.warns(LargeDeltaWarning):  # delta = 1% makes the heavy person's 5 keys likely to show
            rel = releases.key_counts(table, 1.0, 1e-2, max_keys=5, engine=eng, rng=seed)
        assert list(rel.value["keys"]) == ["common"]
    assert seen == [(5, 5, 5, 300)] * 3  # 5 of the heavy person's keys, each held once; "common" by 300


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_the_samplers_get_the_three_way_split(monkeypatch, noise):
    """What the samplers are handed with the defaults (keys selected, bounds by GEM): the key selection
    ``eps / 2`` and half of delta (Gaussian counts) or all of it (Laplace counts), ``max_keys`` per person;
    GEM ``0.2`` of the rest; the counts ``0.8`` of the rest, the other half of delta, and sensitivity
    ``L0 Linf`` (l1) or ``sqrt(L0) Linf`` (l2). The counts' delta counted whole (1.5 delta spent) is caught."""
    table = _two_keys_two_records(50, 40)
    cals, gems, mechs = [], [], []
    real_select, real_choose = union._select, counts_module.choose_bounds_from_kept

    def select(hist, cal, rng, held=None):
        cals.append(cal)
        return real_select(hist, cal, rng, held)

    def choose(*args, **kw):
        gems.append(args[2:5])  # (kept, n_keys, epsilon_select, epsilon_counts, delta_counts, ...)
        return real_choose(*args, **kw)

    def record(name):
        real = getattr(counts_module, name)

        def mech(values, *args):
            mechs.append((name, *args[:-1]))
            return real(values, *args)

        return mech

    monkeypatch.setattr(union, "_select", select)
    monkeypatch.setattr(counts_module, "choose_bounds_from_kept", choose)
    monkeypatch.setattr(counts_module, "gaussian_mechanism", record("gaussian_mechanism"))
    monkeypatch.setattr(counts_module, "laplace_mechanism", record("laplace_mechanism"))
    eps, delta = 4.0, 1e-4
    rel = releases.key_counts(table, eps, delta, noise=noise, max_keys=7, l0s=SMALL, linfs=SMALL, rng=6)
    v = rel.value
    assert v["keys"].size > 0
    (cal,) = cals
    assert cal.epsilon == pytest.approx(eps / 2, rel=1e-12) and cal.max_items == 7
    assert cal.delta == pytest.approx(delta / 2 if noise == "gaussian" else delta, rel=1e-12)
    ((e_sel, e_cnt, d_cnt),) = gems
    assert e_sel == pytest.approx(0.2 * eps / 2) and e_cnt == pytest.approx(0.8 * eps / 2)
    ((name, *args),) = mechs
    assert args[1] == pytest.approx(0.8 * eps / 2)
    if noise == "gaussian":
        assert d_cnt == pytest.approx(delta / 2) and name == "gaussian_mechanism"
        assert args[0] == pytest.approx(math.sqrt(v["l0"]) * v["linf"]) and args[2] == pytest.approx(delta / 2)
    else:
        assert d_cnt == 0 and name == "laplace_mechanism" and args[0] == v["l0"] * v["linf"]
    assert cal.epsilon + e_sel + args[1] <= eps


def _spied_key_selection(monkeypatch):
    """The (sensitivity, epsilon) of every exponential mechanism the union module draws (the choice of
    ``max_keys``; GEM draws elsewhere) and every calibration the key selection's threshold uses."""
    seen = {"em": [], "cal": []}
    em, select = union.exponential_mechanism, union._select

    def em_spy(scores, sensitivity, epsilon, rng=None):
        seen["em"].append((sensitivity, epsilon))
        return em(scores, sensitivity, epsilon, rng)

    def select_spy(hist, cal, rng, held=None):
        seen["cal"].append(cal)
        return select(hist, cal, rng, held)

    monkeypatch.setattr(union, "exponential_mechanism", em_spy)
    monkeypatch.setattr(union, "_select", select_spy)
    return seen


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_the_default_max_keys_is_chosen_privately_and_charged(monkeypatch, engine, noise):
    """Keys selected from the data with every default (``max_keys="auto"``): the bound is drawn first by the
    exponential mechanism (sensitivity 1) at 2% of the key selection's share ``eps / 2``; the set union is
    calibrated at the rest for the chosen bound (its threshold and scale those of ``calibrate_union`` there)
    and bounds each person to it; the params and ``composed_of`` state the choice, and the parts (choice,
    key set, GEM, counts) compose to exactly the stated guarantee. A choice drawn but not charged (the set
    calibrated at the whole ``eps / 2``), or charged but drawn at another epsilon, is caught."""
    seen = _spied_key_selection(monkeypatch)
    table = _two_keys_two_records(50, 40)
    eps, delta = 4.0, 1e-4
    rel = releases.key_counts(table, eps, delta, noise=noise, l0s=SMALL, linfs=SMALL, engine=engine, rng=6)
    eps_keys = eps / 2
    delta_keys = delta / 2 if noise == "gaussian" else delta
    assert seen["em"] == [(1.0, eps_keys * union.AUTO_FRACTION)]
    (cal,) = seen["cal"]
    p = rel.params
    assert p["max_keys"] in union.MAX_ITEMS_GRID and p["max_keys_chosen"] and cal.max_items == p["max_keys"]
    assert p["epsilon_max_keys"] == eps_keys * union.AUTO_FRACTION
    assert cal.epsilon == pytest.approx(eps_keys * (1 - union.AUTO_FRACTION), rel=1e-12)
    assert p["epsilon_key_set"] == cal.epsilon and cal.delta == pytest.approx(delta_keys, rel=1e-12)
    want = union.calibrate_union(cal.epsilon, delta_keys, p["max_keys"], "gaussian")
    assert (cal.threshold, cal.scale) == (want.threshold, want.scale)
    assert rel.value["keys"].size > 0 and "chosen privately" in rel.mechanism
    parts = rel.extras["composed_of"]
    assert list(parts) == ["max_keys", "keys", "bounds", "counts"]
    assert parts["max_keys"] == union.PureDP(eps_keys * union.AUTO_FRACTION)
    total = parts["max_keys"]
    for step in ("keys", "bounds", "counts"):
        total = total.compose(parts[step])
    assert total.fits_within(rel.guarantee) and total.epsilon == pytest.approx(eps, rel=1e-12)
    spent = p["epsilon_max_keys"] + cal.epsilon + p["epsilon_select"] + p["epsilon_counts"]
    assert spent <= eps and spent == pytest.approx(eps, rel=1e-12)


def test_a_fixed_max_keys_spends_nothing_on_a_choice(monkeypatch):
    """``max_keys=7``: no exponential mechanism drawn, the set union calibrated at the whole ``eps / 2`` for 7
    keys per person, and the params and ``composed_of`` say no choice was made."""
    seen = _spied_key_selection(monkeypatch)
    rel = releases.key_counts(_two_keys_two_records(50, 40), 4.0, 1e-4, max_keys=7, l0s=SMALL, linfs=SMALL, rng=6)
    (cal,) = seen["cal"]
    assert seen["em"] == [] and cal.max_items == 7 and cal.epsilon == pytest.approx(2.0, rel=1e-12)
    p = rel.params
    assert (p["max_keys"], p["max_keys_chosen"], p["epsilon_max_keys"]) == (7, False, 0.0)
    assert list(rel.extras["composed_of"]) == ["keys", "bounds", "counts"]
    assert "chosen privately" not in rel.mechanism


def test_public_keys_spend_nothing_on_max_keys(monkeypatch):
    seen = _spied_key_selection(monkeypatch)
    rel = releases.key_counts(_two_keys_two_records(10, 4), 1.0, keys=[f"k{k:04d}" for k in range(10)], rng=1)
    assert seen == {"em": [], "cal": []} and rel.params["max_keys"] is None and not rel.params["max_keys_chosen"]
    assert list(rel.extras["composed_of"]) == ["bounds", "counts"] and rel.guarantee == union.PureDP(1.0)


@pytest.mark.parametrize("bad", ["Auto", "", "100", 0, 10_001, 2.5, True, None])
@pytest.mark.parametrize("public", [False, True])
def test_bad_max_keys_are_refused_before_the_data_are_read(bad, public):
    from userdp.errors import ParameterError

    class Unreadable:
        def __getattr__(self, name):
            raise AssertionError("the data were read")

    with pytest.raises(ParameterError, match="max_(keys|items)"):
        releases.key_counts(Unreadable(), 1.0, 1e-6, keys=["a"] if public else None, max_keys=bad)


def test_auto_max_keys_checks_every_candidate_before_the_data_are_read():
    """Under ``"auto"`` the selection is planned, before the data are read, at the grid's largest candidate
    (8192 keys per person, the hardest calibration), with the choice's 2% of the selection's share; a fixed
    bound plans no choice."""
    from userdp.vocabulary import plan_key_counts

    plan = plan_key_counts(1.0, 1e-6, public_keys=False)
    key_plan = plan["key_plan"]
    assert plan["max_keys"] == "auto" and key_plan["auto"] and key_plan["max_items"] == max(union.MAX_ITEMS_GRID)
    assert key_plan["calibration"].max_items == max(union.MAX_ITEMS_GRID)
    assert plan["epsilon_max_keys"] == key_plan["epsilon_bound"] == 0.5 * union.AUTO_FRACTION
    fixed = plan_key_counts(1.0, 1e-6, public_keys=False, max_keys=4)
    assert fixed["epsilon_max_keys"] == 0.0 and fixed["key_plan"]["calibration"].max_items == 4


def test_memory_and_duckdb_choose_the_same_max_keys_and_release_the_same():
    """The default (``max_keys="auto"``, keys selected): memory and DuckDB, same seed, release the same keys,
    counts, bounds and chosen ``max_keys`` (the persons' distinct keys are counted in each engine's own way:
    DuckDB streams whole persons to :func:`userdp.vocabulary.max_items_grid_part`)."""
    from userdp.engines.duckdb import DuckDBEngine

    rng = np.random.default_rng(3)
    persons = [{f"k{j:03d}": int(rng.integers(1, 4)) for j in rng.choice(60, int(rng.integers(1, 40)), replace=False)}
               for _ in range(400)]  # fmt: skip
    table = _records(persons)
    a = releases.key_counts(table, 4.0, 1e-4, engine="memory", rng=11)
    b = releases.key_counts(table, 4.0, 1e-4, engine=DuckDBEngine(batch_rows=500), rng=11)
    assert a.params == b.params and a.params["max_keys_chosen"] and a.value["keys"].size > 0
    assert a.value["keys"].tolist() == b.value["keys"].tolist() and np.array_equal(a.value["counts"], b.value["counts"])

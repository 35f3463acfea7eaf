"""Per-key aggregates through :func:`userdp.releases.aggregate` with its defaults (bounds and value range
chosen privately): the exact privacy loss of every step over remove-one-person neighbours of tiny datasets,
read off what the samplers are handed (the noisy sums' integer inputs and the discrete Laplace's ``t``; the
exponential mechanisms' scores, sensitivity and epsilon), earlier choices held fixed as sequential
composition conditions on them; the noise's scale against the sensitivities and the budget split the
definitions call for (30% off rejected); memory and DuckDB equal; refusals before any data is read."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from userdp import releases
from userdp.audit.exact import _exp_mech_log_probs
from userdp.errors import ParameterError
from userdp.noise import calibrate_laplace
from userdp.privacy import PureDP

agg = importlib.import_module("userdp.releases.aggregate")
mech = importlib.import_module("userdp.vocabulary.aggregates")
ALL = ["count", "users", "sum", "mean", "variance", "quantile:0.5,0.9"]


def _table(persons: list[list[tuple[str, float]]]) -> pa.Table:
    users = [f"p{u}" for u, p in enumerate(persons) for _ in p]
    keys = [k for p in persons for k, _ in p]
    values = [float(v) for p in persons for _, v in p]
    return pa.table({"user": pa.array(users, pa.string()), "key": pa.array(keys, pa.string()),
                     "value": pa.array(values, pa.float64())})  # fmt: skip


TINY = [
    [[("a", 0.0), ("a", 9.0), ("b", 2.5)], [("a", 4.0)], [("b", 5.0), ("b", 1.0), ("c", 3.0)]],
    [[("a", 1.0), ("b", 1.0), ("c", 1.0)], [("a", 5.0), ("a", 5.0), ("a", 5.0)], [("c", -7.0)]],
    [[("b", 3.25), ("b", 3.5), ("a", 12.0), ("c", 0.5)], [("a", 2.0), ("c", 4.5)]],
]


def _spied(monkeypatch, bounds=(2, 2), value_range=(1.0, 5.0), pick=None):
    """Hold the bounds and the range fixed (the later steps' law is conditioned on them) and record what
    every sampler is handed."""
    log: dict = {"laplace": [], "t": [], "em": []}
    if bounds is not None:
        monkeypatch.setattr(agg, "choose_bounds_from_kept", lambda *a, **k: (bounds[0], bounds[1], {}))
    if value_range is not None:
        monkeypatch.setattr(agg, "choose_value_range", lambda *a, **k: (value_range[0], value_range[1], {}))
    real_il, real_dl, real_em = agg.integer_laplace, mech.discrete_laplace, agg.exponential_mechanism

    def il(sums, sensitivity, epsilon, rng=None):
        log["laplace"].append((np.array(sums, dtype=np.int64), sensitivity, epsilon))
        return real_il(sums, sensitivity, epsilon, rng)

    def dl(t, size, rng=None):
        log["t"].append(int(t))
        return real_dl(t, size, rng)

    def em(scores, sensitivity, epsilon, rng=None, monotone=False):
        log["em"].append((np.array(scores, dtype=np.float64), float(sensitivity), float(epsilon)))
        return real_em(scores, sensitivity, epsilon, rng) if pick is None else pick(len(log["em"]), scores)

    monkeypatch.setattr(agg, "integer_laplace", il)
    monkeypatch.setattr(mech, "discrete_laplace", dl)
    monkeypatch.setattr(agg, "exponential_mechanism", em)
    monkeypatch.setattr(mech, "exponential_mechanism", em)
    return log


def _run(persons, log, **kw):
    for v in log.values():
        v.clear()
    rel = releases.aggregate(_table(persons), 1.0, stats=ALL, keys=["a", "b", "c", "d"], engine="memory", rng=1,
                             **kw)  # fmt: skip
    return rel, {k: list(v) for k, v in log.items()}


@pytest.mark.parametrize("bounds", [(2, 2), (1, 3), (3, 1)])
def test_the_statistics_exact_privacy_loss_is_within_their_shares(monkeypatch, bounds):
    """For every tiny dataset and every person removed: each noisy quantity's exact loss ``|Delta sums|_1 /
    (g t)`` (lattice Laplace on integer sums) is at most its share, and the quantiles' (the exponential
    mechanism's log-probability ratios summed over the keys) too; the shares add up to what is left after
    the bounds' and the range's shares."""
    log = _spied(monkeypatch, bounds=bounds)
    for persons in TINY:
        rel, here = _run(persons, log)
        eps_q = rel.params["epsilon_quantity"]
        assert len(rel.params["quantities"]) == 6
        assert eps_q * 6 + rel.params["epsilon_select"] + rel.params["epsilon_range"] <= 1.0
        assert rel.params["epsilon_select"] > 0 and rel.params["epsilon_range"] > 0  # the defaults' path
        for u in range(len(persons)):
            _, there = _run(persons[:u] + persons[u + 1 :], log)
            assert here["t"] == there["t"]
            for (s1, sens, e), (s2, sens2, _), t in zip(here["laplace"], there["laplace"], here["t"], strict=True):
                assert sens == sens2 and e == pytest.approx(eps_q)
                g = calibrate_laplace(float(sens), e, dim=s1.size).granularity
                assert np.abs(s1 - s2).sum() / (g * t) <= eps_q * (1 + 1e-9), (persons, u)
            loss = 0.0
            for (a, sa, ea), (b, sb, eb) in zip(here["em"], there["em"], strict=True):
                assert (sa, ea) == (sb, eb)
                loss += float(np.max(np.abs(_exp_mech_log_probs(a, ea, sa) - _exp_mech_log_probs(b, eb, sb))))
            assert loss <= eps_q * (1 + 1e-9), (persons, u, loss)


def test_the_range_choice_exact_privacy_loss_is_within_its_share(monkeypatch):
    """The range's two exponential mechanisms on the default grid, with no domain given (the first end held at
    a fixed candidate, as composition conditions on it): the exact log-probability ratios over
    remove-one-person neighbours stay within half of the range's share each, at the sensitivity ``L0 Linf``
    the scores have (a person holds at most that many kept values; the target ``min(T, N / 2)`` moves with
    ``N``). The broken variants (half the sensitivity, every record ranked unbounded) are the mutants
    agg-range-sensitivity-half and agg-range-ranks-unbounded-records, which this test kills."""
    grid = mech.VALUE_GRID
    fixed_lo = int(np.flatnonzero(grid == 0.5)[0])

    def pick(call, scores):
        return fixed_lo if call == 1 else 0

    for bounds in [(2, 2), (1, 3)]:
        log = _spied(monkeypatch, bounds=bounds, value_range=None, pick=pick)
        worst = 0.0
        for persons in TINY:
            rel, here = _run(persons, log, value_range="auto")
            half = rel.params["epsilon_range"] / 2
            assert rel.params["value_domain"] is None  # the default path: no domain
            for u in range(len(persons)):
                _, there = _run(persons[:u] + persons[u + 1 :], log, value_range="auto")
                for (a, sa, ea), (b, sb, eb) in list(zip(here["em"], there["em"], strict=True))[:2]:
                    assert sa == sb == bounds[0] * bounds[1] and ea == eb == pytest.approx(half)
                    loss = float(np.max(np.abs(_exp_mech_log_probs(a, ea, sa) - _exp_mech_log_probs(b, eb, sb))))
                    assert loss <= half * (1 + 1e-9)
                    worst = max(worst, loss)
        assert worst > 0.05 * half  # the check sees the scores move


def test_tied_values_put_the_range_on_their_grid_points_without_a_domain():
    """Ratings 1-5 given by 3,000 persons, most of them 4 and 5 (5% of 1s), at epsilon 2 and no domain: the tie-aware
    scores put the ends on the tied values' own grid points (the persons' kept values rounded outward), where the
    earlier scores (every candidate past the data scoring alike) returned ``hi`` anywhere up to 1e12."""
    rng = np.random.default_rng(21)
    n = 3000
    users = np.repeat(np.arange(n), 2)
    values = rng.choice([1.0, 2.0, 3.0, 4.0, 5.0], users.size, p=[0.05, 0.05, 0.1, 0.3, 0.5])
    keys = rng.choice(["a", "b", "c"], users.size)
    t = pa.table({"user": users.astype(str), "key": keys, "value": values})
    his, los = [], []
    for seed in range(8):
        rel = releases.aggregate(t, 2.0, stats=["mean"], keys=["a", "b", "c"], engine="memory", rng=seed)
        los.append(rel.value["lo"])
        his.append(rel.value["hi"])
    assert all(h == 5.0 for h in his), his
    assert all(1.0 <= lo <= 4.0 for lo in los), los  # the clipped low ratings within the target's count


def test_the_noise_has_the_scale_the_sensitivities_and_the_split_call_for(monkeypatch):
    """3,000 public keys, each held by one person with one value 3 (and one listed key without data): with the
    defaults the bounds come out (1, 1); the records' noise has sd ``sqrt(2) L0 Linf / eps_q`` and the
    centred sum's ``sqrt(2) L0 Linf W / eps_q`` with ``eps_q = 0.8 * 0.75 / 2`` (bounds 20%, range 25% of the
    rest, two quantities): 30% off is rejected. A key without data is released with noise like the others."""
    n = 3000
    keys = [f"k{i:04d}" for i in range(n)]
    t = pa.table({"user": [f"u{i}" for i in range(n)], "key": keys, "value": [3.0] * n})
    rel = releases.aggregate(t, 1.0, stats=["mean", "sum"], keys=[*keys, "nobody"], engine="memory", rng=11)
    v = rel.value
    assert (v["l0"], v["linf"]) == (1, 1) and rel.guarantee == PureDP(1.0)
    assert v["keys"][-1] == "nobody" and v["keys"].size == n + 1
    eps_q = 0.8 * 0.75 / 2
    r, klo, khi = mech.lattice_of(v["lo"], v["hi"])
    mid, half, w = (klo + khi) * r / 2, r / 2, khi - klo
    y = 2 * int(math.floor(3.0 / r + 0.5)) - (klo + khi)
    assert rel.params["epsilon_quantity"] == pytest.approx(eps_q)
    sd_n, sd_s = math.sqrt(2) / eps_q, math.sqrt(2) * w / eps_q
    assert rel.params["noise_sd"]["N"] == pytest.approx(sd_n, rel=1e-6)
    assert rel.params["noise_sd"]["S1"] == pytest.approx(sd_s, rel=1e-6)
    # the noisy quantities themselves, from the release's own noise draws (seeded again: the same draws)
    log: dict = {}
    real = agg.integer_laplace

    def il(sums, sensitivity, epsilon, rng=None):
        out = real(sums, sensitivity, epsilon, rng)
        log[len(log)] = (np.asarray(sums, dtype=np.float64), out[0])
        return out

    monkeypatch.setattr(agg, "integer_laplace", il)
    releases.aggregate(t, 1.0, stats=["mean", "sum"], keys=[*keys, "nobody"], engine="memory", rng=11)
    (true_n, noisy_n), (true_s, noisy_s) = log[0], log[1]
    assert np.all(true_n[:-1] == 1) and true_n[-1] == 0 and np.all(true_s[:-1] == y)
    for (true, noisy), sd in [((true_n, noisy_n), sd_n), ((true_s, noisy_s), sd_s)]:
        est = float(np.sqrt(np.mean((noisy - true) ** 2)))
        assert abs(est / sd - 1) < 0.08 and abs(est / (1.3 * sd) - 1) > 0.15 and abs(est / (0.7 * sd) - 1) > 0.2
    assert np.allclose(v["sum"], mid * noisy_n + half * noisy_s)


def test_a_large_table_gets_close_means_and_medians():
    rng = np.random.default_rng(12)
    n = 20000
    users = np.repeat(np.arange(n), 3)
    keys = rng.choice(["a", "b", "c", "d"], users.size)
    shift = {"a": 0.0, "b": 1.0, "c": 2.0, "d": 3.0}
    values = rng.normal(2, 1, users.size) + np.array([shift[k] for k in keys])
    t = pa.table({"user": users, "key": keys, "value": values})
    rel = releases.aggregate(t, 1.0, stats=["mean", "quantile:0.5", "variance"], keys=list("abcd"), rng=13)
    assert np.allclose(rel.value["mean"], [2, 3, 4, 5], atol=0.15), rel.value
    assert np.allclose(rel.value["quantiles"][0.5], [2, 3, 4, 5], atol=0.3), rel.value
    assert np.all(rel.value["variance"] < 2.0) and np.all(rel.value["variance"] > 0.3)


def _values_csv(tmp_path):
    rng = np.random.default_rng(14)
    n = 700
    users = np.repeat(np.arange(n), 4)
    keys = rng.choice([f"k{i}" for i in range(6)], users.size)
    values = np.round(rng.normal(10, 4, users.size), 3)
    path = tmp_path / "v.csv"
    pacsv.write_csv(pa.table({"user": users, "key": keys, "value": values}), path)
    return path


def _same(a, b):
    assert list(a["keys"]) == list(b["keys"])
    for k in ("count", "users", "sum", "mean", "variance"):
        assert np.array_equal(a[k], b[k]), k
    assert np.array_equal(a["quantiles"][0.5], b["quantiles"][0.5])
    assert (a["lo"], a["hi"], a["l0"], a["linf"]) == (b["lo"], b["hi"], b["l0"], b["linf"])


@pytest.mark.slow  # Spark's matrix runs in the slow tier
def test_spark_releases_what_memory_releases(tmp_path, spark_engine):
    """On Spark (4 partitions: persons spread over tasks, their records grouped on the executors) the same
    seed gives the same release as in memory, keys selected privately and every statistic."""
    path = _values_csv(tmp_path)
    a = releases.aggregate(str(path), 1.0, 1e-6, stats=ALL, engine="memory", rng=15).value
    b = releases.aggregate(str(path), 1.0, 1e-6, stats=ALL, engine=spark_engine, rng=15).value
    assert a["keys"].size >= 1
    _same(a, b)


def test_every_engine_refuses_a_bad_value_column(tmp_path, spark_engine):
    from userdp.errors import DataError

    cases = {"text": (["good", "bad"], "numeric"), "missing": (["1.5", ""], "missing"),
             "nan": (["1.5", "nan"], "NaN")}  # fmt: skip
    for name, (values, message) in cases.items():
        path = tmp_path / f"{name}.csv"
        path.write_text("user,key,value\n" + "".join(f"u{i},k,{v}\n" for i, v in enumerate(values)))
        for eng in ("memory", "duckdb", spark_engine):
            with pytest.raises(DataError, match=message):
                releases.aggregate(str(path), 1.0, keys=["k"], engine=eng)


@pytest.mark.parametrize("public", [True, False])
def test_memory_and_duckdb_release_the_same(tmp_path, public):
    path = _values_csv(tmp_path)
    kw = {"keys": [f"k{i}" for i in range(7)]} if public else {}
    a = releases.aggregate(str(path), 1.0, 1e-6, stats=ALL, engine="memory", rng=15, **kw).value
    b = releases.aggregate(str(path), 1.0, 1e-6, stats=ALL, engine="duckdb", rng=15, **kw).value
    assert a["keys"].size >= (7 if public else 1)
    _same(a, b)


def test_refusals_come_before_the_data_are_read():
    missing = "/nonexistent/values.csv"
    with pytest.raises(ParameterError, match="unknown statistic"):
        releases.aggregate(missing, 1.0, keys=["a"], stats=["mode"])
    with pytest.raises(ParameterError, match="delta > 0"):
        releases.aggregate(missing, 1.0)
    with pytest.raises(ParameterError, match="three different"):
        releases.aggregate(missing, 1.0, keys=["a"], user="x", key="x")
    with pytest.raises(ParameterError, match="keys is empty"):
        releases.aggregate(missing, 1.0, keys=[])


def test_a_range_whose_lattice_would_not_fit_is_refused_before_the_data_are_read():
    """A public range (or domain) far from 0 for its width puts the lattice coordinates ``k`` past int64
    (``2k`` overflowed after the data were read: a traceback, not a refusal); one too narrow makes the
    lattice step 0. Both are refused from the parameters; the widest ratio allowed (``2^40`` widths) releases,
    with every value on the range's lattice."""
    missing = "/nonexistent/values.csv"
    for kw in ({"value_range": (2e15, 2e15 + 1)}, {"value_range": (-(2.0**41) - 1, -(2.0**41))},
               {"value_range": (0.0, 5e-324)}, {"value_domain": (2e15, 2e15 + 64)},
               {"value_domain": (2.0**40, 2.0**40 + 32)}):  # fmt: skip
        with pytest.raises(ParameterError, match="lattice"):
            releases.aggregate(missing, 1.0, keys=["a"], **kw)
    hi = 2.0**40
    rel = releases.aggregate(_table([[("a", hi - 0.5)], [("a", hi - 0.25), ("b", hi)]]), 1.0, keys=["a", "b"],
                             stats=["mean", "variance"], value_range=(hi - 1, hi), bounds=(1, 1), engine="memory",
                             rng=1)  # fmt: skip
    assert np.all((rel.value["mean"] >= hi - 1) & (rel.value["mean"] <= hi))
    rel = releases.aggregate(_table([[("a", hi - 1)]]), 1.0, keys=["a"], value_domain=(hi - 64, hi),
                             bounds=(1, 1), engine="memory", rng=1)  # fmt: skip
    assert hi - 64 <= rel.value["lo"] < rel.value["hi"] <= hi


def test_the_default_grid_needs_no_domain_and_says_how_the_range_was_chosen():
    """No value_range and no value_domain: the range is chosen privately over the default grid (no refusal);
    the error statement names the grid and the threshold, from public numbers alone."""
    rel = releases.aggregate(_table([[("a", 5.0)], [("a", 5.0)], [("a", 4.0)]]), 4.0, keys=["a"], bounds=(1, 1),
                             engine="memory", rng=1)  # fmt: skip
    text = rel.error.description
    assert "the default grid" in text and f"min({rel.params['range_threshold']:.3g}, half the kept values)" in text
    assert rel.params["value_range"] == "auto" and rel.params["value_domain"] is None
    # T = K sd_N / 2: half the keys' count noise (one key here), the point where a wider range's noise balances
    # the clipping it removes (the mutant agg-range-target-tau-large)
    assert rel.params["range_threshold"] == pytest.approx(0.5 * math.sqrt(2) *
                                                          calibrate_laplace(1.0, rel.params["epsilon_quantity"]).scale)


def test_tied_ratings_get_their_exact_quantiles():
    """Ratings 1..5 (tied), 400 persons with one rating on each of 3 products: at epsilon 2 the per-key
    medians and 0.9-quantiles come out exactly the true ratings in most keys and runs (the grid of the
    ratings is chosen; no candidate stands for an empty gap between two ratings)."""
    rng = np.random.default_rng(31)
    n = 400
    users = np.repeat(np.arange(n), 3)
    keys = np.tile(["a", "b", "c"], n)
    probs = {"a": [0.05, 0.05, 0.1, 0.2, 0.6], "b": [0.1, 0.1, 0.5, 0.2, 0.1], "c": [0.3, 0.4, 0.1, 0.1, 0.1]}
    values = np.array([rng.choice(5, p=probs[k]) + 1.0 for k in keys])
    t = pa.table({"user": users, "key": keys, "value": values})
    true = {q: [np.quantile(values[keys == k], q, method="inverted_cdf") for k in "abc"] for q in (0.5, 0.9)}
    hits = []
    for seed in range(6):
        rel = releases.aggregate(t, 2.0, stats=["quantile:0.5,0.9"], keys=list("abc"), value_range=(1.0, 5.0),
                                 bounds=(3, 1), rng=seed)
        hits += [np.mean(rel.value["quantiles"][q] == true[q]) for q in (0.5, 0.9)]
    assert np.mean(hits) >= 0.8, hits


def test_the_mean_divides_by_at_least_two_sds_of_the_count_noise(monkeypatch):
    """The release's own path with the noise held fixed (the sampler monkeypatched to add nothing and to state
    an sd of 5): a key with 1 record of the top value gets ``mid + half * S1 / max(N~, 2 sd)`` = 5 + 5/10 on the
    range [0, 10] (shrunk towards the middle, not thrown to 10); a key with 40 records of 10 gets exactly 10.
    The floor is the public sd the release states (mutants agg-mean-count-floor-dropped, -not-passed)."""
    monkeypatch.setattr(agg, "integer_laplace", lambda sums, sens, eps, src: (np.asarray(sums, np.float64), 5.0))
    persons = [[("a", 10.0)]] + [[("b", 10.0)] for _ in range(40)]
    rel = releases.aggregate(_table(persons), 1.0, keys=["a", "b"], bounds=(1, 1), value_range=(0.0, 10.0),
                             stats=["mean", "variance"], engine="memory", rng=1)  # fmt: skip
    assert rel.params["noise_sd"]["N"] == 5.0
    assert rel.value["mean"][0] == pytest.approx(5.0 + 5.0 / 10) and rel.value["mean"][1] == pytest.approx(10.0)
    assert rel.value["variance"][1] == pytest.approx(0.0, abs=1e-9)


def test_count_and_users_choose_no_range_and_spend_nothing_on_one():
    """``count`` and ``users`` read no value: with the range left to its default nothing is spent on choosing
    one, the statistics get the whole of what is left after the bounds, and the error statement says so (the
    mutant agg-count-spends-on-a-range)."""
    t = _table([[("a", 1.0), ("b", 2.0)], [("a", 3.0)]])
    rel = releases.aggregate(t, 1.0, keys=["a", "b"], stats=["count", "users"], engine="memory", rng=1)
    assert rel.params["value_range"] == "unused" and rel.params["epsilon_range"] == 0.0
    assert "range_lo" not in rel.extras["composed_of"]
    assert rel.params["epsilon_quantity"] == pytest.approx(1.0 * 0.8 / 2)  # bounds 20%, then N and U
    assert "no value read" in rel.error.description
    mean = releases.aggregate(t, 1.0, keys=["a", "b"], stats=["count", "mean"], engine="memory", rng=1)
    assert mean.params["value_range"] == "auto" and mean.params["epsilon_range"] > 0

"""The private vocabulary release (Gopi et al., ICML 2020: weighted and policy set union, then noisy person
counts) through :func:`userdp.releases.vocabulary` with its defaults: what a person contributes to the
selection and to the counts (at most ``max_items`` items, weight ``1/k`` or ``1/sqrt(k)`` each), in memory and
on a table read in many chunks; the counts' noise against the scale their sensitivity calls for; the budget
split the samplers are given; and the policy histogram's cutoff ``Gamma = T + alpha t`` through the rate at
which saturated items pass. Every expected value is computed here from the definitions."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pyarrow as pa
import pytest

import userdp.vocabulary.union as union
from userdp import releases
from userdp.engines import ChunkedEngine, Columns
from userdp.noise import calibrate_gaussian

release_module = importlib.import_module("userdp.releases.vocabulary")  # (the package exports the function)
U = 1 << 20  # one person's unit of weight, in lattice steps (the paper's weight 1)


def _weight(k: int, noise: str) -> int:
    """A person keeping ``k`` items gives each ``1/k`` (l1 norm 1, Laplace) or ``1/sqrt(k)`` (l2 norm 1,
    Gaussian), rounded down on the lattice of ``U`` steps."""
    return U // k if noise == "laplace" else math.isqrt(U * U // k)


def _six_of_twelve(n: int = 600, seed: int = 0) -> tuple[pa.Table, np.ndarray]:
    """``n`` persons, each holding 6 distinct items of 12 (rows shuffled within each person)."""
    rng = np.random.default_rng(seed)
    held = np.array([rng.choice(12, 6, replace=False) for _ in range(n)])
    table = pa.table({"user": np.repeat(np.arange(n), 6), "item": np.array([f"w{i:02d}" for i in held.ravel()])})
    return table, np.bincount(held.ravel(), minlength=12)


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
@pytest.mark.parametrize("engine", ["memory", "chunked"])
def test_a_person_counts_toward_at_most_max_items_items(monkeypatch, noise, engine):
    """600 persons each hold 6 of 12 items and ``max_items = 3``: the per-item sums the selection and the counts
    are computed from hold exactly 3 x 600 holders, each of weight ``1/3`` (Laplace) or ``1/sqrt(3)``
    (Gaussian) on the lattice, every item's holders a subset of its real ones; and the released counts add up to
    1,800 within their noise. A release layer passing twice ``max_items`` to the engine's bounding (1,800 more
    holders: twice the sensitivity the threshold and the noise are calibrated for), or Gaussian weights for a
    Laplace union, is caught. The chunked engine reads the table in more than one chunk."""
    table, holders = _six_of_twelve()
    eng = ChunkedEngine(rows_per_chunk=500) if engine == "chunked" else None
    if eng is not None:
        assert sum(1 for _ in eng.chunks(eng.load(table, Columns("user", "item")))) >= 3  # a multi-chunk read
    seen = []
    real = release_module.private_vocabulary_from_sums

    def spy(labels, sums, *args, **kw):
        seen.append(np.array(sums))
        return real(labels, sums, *args, **kw)

    monkeypatch.setattr(release_module, "private_vocabulary_from_sums", spy)
    rel = releases.vocabulary(table, 4.0, 1e-3, max_items=3, noise=noise, engine=eng, rng=1)
    (sums,) = seen
    assert sums.shape == (12, 2) and sums[:, 1].sum() == 600 * 3
    assert np.all(sums[:, 1] <= holders) and np.all(sums[:, 1] > 0)
    assert np.array_equal(sums[:, 0], sums[:, 1] * _weight(3, noise))
    assert rel.value["items"].size == 12  # every item is held by some 150 kept persons: far above the threshold
    sd = math.sqrt(2) * 3 / 2.0 if noise == "laplace" else calibrate_gaussian(math.sqrt(3), 2.0, 5e-4).sigma
    assert abs(rel.value["counts"].sum() - 1800) < 5 * sd * math.sqrt(12)


def test_the_kept_subsets_come_from_the_release_s_own_random_streams(monkeypatch):
    """Each release draws its keyed streams' master from its own randomness: the same seed keeps the same
    subsets (every engine replays them), another seed other subsets (never one fixed key for every release),
    and in memory and in chunks the same seed keeps the same subsets."""
    table, _ = _six_of_twelve(300)
    seen = []
    real = release_module.private_vocabulary_from_sums

    def spy(labels, sums, *args, **kw):
        seen.append(np.array(sums[:, 1]))
        return real(labels, sums, *args, **kw)

    monkeypatch.setattr(release_module, "private_vocabulary_from_sums", spy)
    for seed, eng in ((1, None), (1, ChunkedEngine(rows_per_chunk=250)), (2, None)):
        releases.vocabulary(table, 4.0, 1e-3, max_items=3, noise="laplace", engine=eng, rng=seed)
    same, chunked, other = seen
    assert np.array_equal(same, chunked) and not np.array_equal(same, other)
    assert same.sum() == other.sum() == 900


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_the_release_s_counts_have_the_noise_their_sensitivity_calls_for(noise):
    """2,000 items, each held by 80 persons holding one item, ``max_items = 4``: one person adds 1 to at most 4
    counts, so the counts' noise (``count_fraction = 1/2`` of epsilon 2: epsilon 1, half of delta) has
    standard deviation ``sqrt(2) 4`` (Laplace, l1 sensitivity 4) or the lattice Gaussian's for l2 sensitivity
    ``sqrt(4)``, measured within 8% (a scale 30% off is rejected; sensitivity ``sqrt(max_items)`` for the
    Laplace counts, or 1 for the Gaussian ones, is 2x off)."""
    n_items, per = 2000, 80
    users = np.arange(n_items * per)
    table = pa.table({"user": users, "item": np.array([f"k{i:04d}" for i in users // per])})
    rel = releases.vocabulary(table, 2.0, 1e-6, max_items=4, noise=noise, rng=3)
    assert rel.value["items"].size == n_items
    sd = math.sqrt(2) * 4 / 1.0 if noise == "laplace" else calibrate_gaussian(2.0, 1.0, 5e-7).sigma
    est = float(np.sqrt(np.mean((rel.value["counts"] - per) ** 2)))
    tol = 0.1 if noise == "laplace" else 0.08
    assert abs(est / sd - 1) < tol and abs(est / (1.3 * sd) - 1) > 0.15 and abs(est / (0.7 * sd) - 1) > 0.2, est
    assert rel.params["count_sd"] == pytest.approx(sd, rel=1e-6)  # and the release states that scale


@pytest.mark.parametrize(("noise", "fraction"), [("gaussian", 0.3), ("laplace", 0.5)])
def test_the_samplers_get_the_budget_split(monkeypatch, noise, fraction):
    """What the samplers are handed: the selection's calibration epsilon ``(1 - count_fraction) eps`` and, with
    Gaussian noise, half of delta (all of it with Laplace); the counts' mechanism ``count_fraction eps``, the
    other half of delta, and sensitivity ``max_items`` (l1) or ``sqrt(max_items)`` (l2). A set step keeping the
    whole delta while the counts take half (1.5 delta spent) is caught."""
    table, _ = _six_of_twelve(200)
    cals, mechs = [], []
    real_select = union._select

    def select(hist, cal, rng, held=None):
        cals.append(cal)
        return real_select(hist, cal, rng, held)

    def record(name):
        real = getattr(union, name)

        def mech(values, *args):
            mechs.append((name, *args[:-1]))
            return real(values, *args)

        return mech

    monkeypatch.setattr(union, "_select", select)
    monkeypatch.setattr(union, "gaussian_mechanism", record("gaussian_mechanism"))
    monkeypatch.setattr(union, "laplace_mechanism", record("laplace_mechanism"))
    eps, delta = 3.0, 1e-4
    rel = releases.vocabulary(table, eps, delta, max_items=5, noise=noise, count_fraction=fraction, rng=2)
    assert rel.value["items"].size > 0
    (cal,) = cals
    assert cal.epsilon == pytest.approx(eps * (1 - fraction), rel=1e-12) and cal.max_items == 5
    assert cal.delta == pytest.approx(delta / 2 if noise == "gaussian" else delta, rel=1e-12)
    ((name, *args),) = mechs
    if noise == "gaussian":
        assert name == "gaussian_mechanism" and args[0] == pytest.approx(math.sqrt(5))
        assert args[1] == pytest.approx(eps * fraction) and args[2] == pytest.approx(delta / 2)
    else:
        assert name == "laplace_mechanism" and args[0] == 5 and args[1] == pytest.approx(eps * fraction)
    assert cal.epsilon + args[1] <= eps


def test_the_policy_release_bounds_each_person_before_the_histogram_and_the_counts(monkeypatch):
    """The policy histogram (``policy=True``; the persons visited on the driver) sees each person's items cut
    to ``max_items = 2`` of their own, and the counts count each person for at most 2 items: 300 persons
    holding 5 of 6 items give exactly 600 holders. The histogram built from the unbounded persons, or the
    holders counted before bounding (1,500), is caught."""
    rng = np.random.default_rng(4)
    held = np.array([rng.choice(6, 5, replace=False) for _ in range(300)])
    table = pa.table({"user": np.repeat(np.arange(300), 5), "item": np.array([f"p{i}" for i in held.ravel()])})
    fills, releases_seen = [], []
    real_fill, real_release = union.policy_histogram, union._vocabulary_release

    def fill(offsets, items, *args, **kw):
        fills.append((np.array(offsets), np.array(items)))
        return real_fill(offsets, items, *args, **kw)

    def release(labels, hist, holders, *args):
        releases_seen.append((np.asarray(labels), np.array(holders)))
        return real_release(labels, hist, holders, *args)

    monkeypatch.setattr(union, "policy_histogram", fill)
    monkeypatch.setattr(union, "_vocabulary_release", release)
    rel = releases.vocabulary(table, 4.0, 1e-3, max_items=2, noise="laplace", policy=True, rng=5)
    ((offsets, items),) = fills
    ((labels, holders),) = releases_seen
    assert np.array_equal(np.diff(offsets), np.full(300, 2))
    code = {str(x): j for j, x in enumerate(labels)}
    for u in range(300):  # each person's kept items are among their own
        mine = {code[f"p{i}"] for i in held[u]}
        assert set(items[offsets[u] : offsets[u + 1]].tolist()) <= mine
    assert holders.sum() == 600
    assert rel.value["items"].size > 0
    assert np.all(rel.value["counts"] < 300 * 5 / 6 * 2 / 5 + 60)  # about 100 kept holders each, not 250


def test_the_policy_release_passes_saturated_items_at_the_cutoff_s_rate():
    """Persons stop raising an item at ``Gamma = T + alpha t`` (Gopi et al.'s ``rho + alpha / epsilon``; the
    release's ``alpha = 3``): an item held by 200 persons saturates there, so it passes ``Gamma + Z >= T`` with
    probability ``P[Z >= -ceil(3 t)] = 1 - q^(ceil(3 t) + 1) / (1 + q)`` (0.975), ``t = ceil(U / epsilon)``. Over
    150 releases of 4 such items the rate is within 4 standard errors; a cutoff of ``alpha t`` without the
    threshold (no item ever passes), or of ``alpha`` persons' weight (0.999), is caught."""
    n_items, per, eps, runs = 4, 200, 2.0, 150
    users = np.arange(n_items * per)
    table = pa.table({"user": users, "item": np.array([f"i{j}" for j in users // per])})
    passed = 0
    for seed in range(runs):
        rel = releases.vocabulary(table, eps, 1e-6, max_items=1, noise="laplace", policy=True, count_fraction=0,
                                  rng=seed)  # fmt: skip
        passed += rel.value["items"].size
    t = math.ceil(U / eps)
    q = math.exp(-1.0 / t)
    p = 1 - q ** (math.ceil(3 * t) + 1) / (1 + q)
    n = n_items * runs
    assert abs(passed / n - p) < 4 * math.sqrt(p * (1 - p) / n), (passed / n, p)


@pytest.mark.slow  # a Spark job (30 s on a cold session); in memory and in chunks the same guarantee is above
def test_on_spark_a_person_spread_over_partitions_counts_toward_at_most_max_items_items(spark_engine, monkeypatch):
    """On the Spark engine, with every person's rows spread over 4 partitions (checked: not one partition, and
    persons really split), the per-item sums the selection sees still hold exactly ``max_items`` holders per
    person, each of weight ``floor(U / sqrt(3))``: the bounding gathers a person's rows before keeping 3 of 6
    (bounding per partition would let a person count toward up to 6 items)."""
    from pyspark.sql import functions as F

    table, holders = _six_of_twelve(200)
    df = spark_engine.spark.createDataFrame(table.to_pandas()).repartition(4)
    per = df.withColumn("_p", F.spark_partition_id()).groupBy("user").agg(F.countDistinct("_p").alias("parts"))
    split = per.filter("parts > 1").count()
    assert df.rdd.getNumPartitions() == 4 and split > 150  # most persons' rows lie in several partitions
    seen = []
    real = release_module.private_vocabulary_from_sums

    def spy(labels, sums, *args, **kw):
        seen.append(np.array(sums))
        return real(labels, sums, *args, **kw)

    monkeypatch.setattr(release_module, "private_vocabulary_from_sums", spy)
    releases.vocabulary(df, 4.0, 1e-3, max_items=3, engine=spark_engine, rng=1)
    (sums,) = seen
    assert sums[:, 1].sum() == 200 * 3 and np.all(sums[:, 1] <= holders)
    assert np.array_equal(sums[:, 0], sums[:, 1] * _weight(3, "gaussian"))


def test_the_sips_release_runs_the_rounds_and_states_them():
    """``algorithm="sips"``: DP-SIPS's rounds (not the one-round union), its guarantee the whole budget, its
    thresholds and widths stated; a Laplace noise or the policy flag with it is refused before the data."""
    import pyarrow as pa

    from userdp import releases
    from userdp.errors import ParameterError
    from userdp.privacy.guarantees import ApproxDP, Neighbours

    users = np.repeat(np.arange(400), 3)
    items = np.tile(["a", "b", "c"], 400)
    table = pa.table({"user": users, "item": items})
    rel = releases.vocabulary(table, 4.0, 1e-6, max_items=2, algorithm="sips", count_fraction=0.0, rng=1)
    assert rel.guarantee == ApproxDP(4.0, 1e-6, Neighbours.ADD_REMOVE_USER)
    assert "DP-SIPS" in rel.mechanism and rel.params["rounds"] == 3 and len(rel.params["thresholds"]) == 3
    assert sorted(rel.value["items"].tolist()) == ["a", "b", "c"]
    for bad in ({"noise": "laplace"}, {"policy": True}, {"rounds": 0}):
        with pytest.raises(ParameterError):
            releases.vocabulary("/nonexistent.csv", 4.0, 1e-6, algorithm="sips", **bad)

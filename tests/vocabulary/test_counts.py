"""Per-key counts with privately chosen contribution bounds: the bounding and its sensitivity, the kept
records of every candidate, GEM's normalized scores (sensitivity 1 over remove-one-person neighbours), the
count noise, public and selected keys, and refusals before any data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from userdp.errors import DataError, ParameterError
from userdp.privacy.guarantees import ApproxDP, PureDP
from userdp.vocabulary import bounded_key_counts, choose_bounds, kept_records, plan_key_counts, private_key_counts


def _random_persons(rng, n_persons, n_keys, max_hold=5, max_mult=6):
    offsets, keys, mult = [0], [], []
    for _ in range(n_persons):
        k = int(rng.integers(0, max_hold + 1))
        mine = rng.choice(n_keys, min(k, n_keys), replace=False)
        keys += list(mine)
        mult += list(rng.integers(1, max_mult + 1, mine.size))
        offsets.append(len(keys))
    return np.array(offsets), np.array(keys, dtype=np.int64), np.array(mult, dtype=np.int64)


def _brute(offsets, keys, mult, n_keys, l0, linf):
    out = np.zeros(n_keys, dtype=np.int64)
    for u in range(offsets.size - 1):
        ks, ms = keys[offsets[u] : offsets[u + 1]], mult[offsets[u] : offsets[u + 1]]
        order = sorted(range(ks.size), key=lambda j: (-ms[j], j))[:l0]
        for j in order:
            out[ks[j]] += min(ms[j], linf)
    return out


def _drop(offsets, keys, mult, u):
    lo, hi = offsets[u], offsets[u + 1]
    off = np.r_[offsets[: u + 1], offsets[u + 2 :] - (hi - lo)]
    return off, np.r_[keys[:lo], keys[hi:]], np.r_[mult[:lo], mult[hi:]]


def test_bounding_and_kept_records_match_a_direct_count():
    rng = np.random.default_rng(0)
    for _ in range(60):
        offsets, keys, mult = _random_persons(rng, 12, 7)
        l0s, linfs = [4, 1, 2, 8], [1, 3, 16]
        kept = kept_records(offsets, mult, l0s, linfs)
        for a, l0 in enumerate(l0s):
            for b, linf in enumerate(linfs):
                direct = _brute(offsets, keys, mult, 7, l0, linf)
                assert np.array_equal(bounded_key_counts(offsets, keys, mult, 7, l0, linf), direct)
                assert kept[a, b] == direct.sum()


def test_one_person_moves_at_most_l0_counts_by_at_most_linf_and_kept_by_l0_linf():
    """The sensitivities the release and the choice rest on, over remove-one-person neighbours."""
    rng = np.random.default_rng(1)
    for _ in range(40):
        offsets, keys, mult = _random_persons(rng, 8, 6, max_hold=6, max_mult=9)
        for u in range(8):
            o2, k2, m2 = _drop(offsets, keys, mult, u)
            for l0, linf in [(1, 1), (2, 3), (4, 2), (8, 8)]:
                d = bounded_key_counts(offsets, keys, mult, 6, l0, linf) - bounded_key_counts(o2, k2, m2, 6, l0, linf)
                assert np.all(d >= 0) and d.max(initial=0) <= linf and np.count_nonzero(d) <= l0
            dk = kept_records(offsets, mult, [1, 2, 4, 8], [1, 3, 8]) - kept_records(o2, m2, [1, 2, 4, 8], [1, 3, 8])
            assert np.all(dk >= 0) and np.all(dk <= np.outer([1, 2, 4, 8], [1, 3, 8]))


def test_gem_scores_of_the_bounds_have_sensitivity_one():
    """GEM's normalized scores move by at most 1 when one person leaves: its epsilon-DP rests on that (a
    score sensitivity of L0 alone, or of Linf alone, would break it and is caught here)."""
    rng = np.random.default_rng(2)
    worst = 0.0
    for _ in range(30):
        offsets, keys, mult = _random_persons(rng, 10, 6, max_hold=6, max_mult=20)
        _, _, det = choose_bounds(offsets, mult, 6, 1.0, 1.0, l0s=(1, 2, 4, 8), linfs=(1, 4, 16), rng=0)
        for u in range(10):
            o2, _, m2 = _drop(offsets, keys, mult, u)
            _, _, det2 = choose_bounds(o2, m2, 6, 1.0, 1.0, l0s=(1, 2, 4, 8), linfs=(1, 4, 16), rng=0)
            worst = max(worst, float(np.abs(det["scores"] - det2["scores"]).max()))
    assert worst <= 1.0 + 1e-9 and worst > 0.3  # tight enough to catch a wrong sensitivity


def test_gem_picks_the_bounds_that_minimize_the_error_when_the_data_speak_clearly():
    """2,000 persons, each with 3 keys of 4 records: (L0, Linf) = (4, 4) keeps everything at the least noise
    of the candidates that keep everything; GEM at a large budget picks it."""
    n = 2000
    offsets = np.arange(0, 3 * n + 1, 3)
    mult = np.full(3 * n, 4)
    picks = [choose_bounds(offsets, mult, 3, 5.0, 1.0, rng=s)[:2] for s in range(20)]
    assert sum(p == (4, 4) for p in picks) >= 16, picks


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_counts_of_public_keys_have_the_stated_noise(noise):
    """3,000 public keys held by 300 one-record persons each (and one key nobody holds): every count's noise
    has the stated standard deviation, the one sensitivity L0 Linf (l1) or sqrt(L0) Linf (l2) calls for
    (30% off is rejected); keys outside the public list are dropped; Laplace with public keys is pure. (Given
    bounds; the default, bounds chosen by GEM, is tests/releases/test_counts.py's.)"""
    n_keys, per = 3000, 300
    keys = np.repeat(np.arange(n_keys), per)
    offsets = np.arange(keys.size + 1)
    mult = np.ones(keys.size, dtype=np.int64)
    labels = np.array([f"k{i:04d}" for i in range(n_keys)], dtype=object)
    public = np.r_[labels[:-1], ["nobody"]]  # the last data key is not public; "nobody" is not in the data
    delta = 1e-6 if noise == "gaussian" else 0.0
    rel = private_key_counts(offsets, keys, mult, labels, 2.0, delta, public_keys=public, bounds=(2, 3),
                             noise=noise, rng=4)  # fmt: skip
    assert rel.guarantee == (PureDP(2.0) if noise == "laplace" else ApproxDP(2.0, 1e-6))
    assert list(rel.value["keys"][-2:]) == ["k2998", "nobody"] and rel.value["keys"].size == n_keys
    counts = rel.value["counts"]
    resid = counts[:-1] - per
    if noise == "laplace":  # the scale the sensitivity calls for (not the one the release states)
        sd = math.sqrt(2) * 6 / 2.0
    else:
        from userdp.noise import calibrate_gaussian

        sd = calibrate_gaussian(math.sqrt(2) * 3, 2.0, 1e-6).sigma
    est = float(np.sqrt(np.mean(resid**2)))
    assert abs(est / sd - 1) < 0.08 and abs(est / (1.3 * sd) - 1) > 0.15 and abs(est / (0.7 * sd) - 1) > 0.2
    assert rel.params["count_sd"] == pytest.approx(sd, rel=1e-3)  # and the release states it


def test_selected_keys_and_the_budget_split():
    rng = np.random.default_rng(3)
    n = 3000
    keys = np.concatenate([[0, 1] if rng.random() < 0.9 else [2] for _ in range(n)])
    sizes = np.array([2 if k == 0 else 1 for k in keys if k != 1])
    offsets = np.r_[0, np.cumsum(sizes)]
    mult = rng.integers(1, 5, keys.size)
    labels = np.array(["a", "b", "c"], dtype=object)
    rel = private_key_counts(offsets, keys, mult, labels, 2.0, 1e-6, rng=5)
    assert list(rel.value["keys"]) == ["a", "b", "c"]
    p = rel.params  # (what the release states; what its samplers are handed: tests/releases/test_counts.py)
    assert p["epsilon_keys"] + p["epsilon_select"] + p["epsilon_counts"] <= 2.0
    assert p["delta_keys"] + p["delta_counts"] <= 1e-6 and rel.guarantee == ApproxDP(2.0, 1e-6)
    assert "rare" not in rel.error.description and str(n) not in rel.error.description


def test_every_refusal_comes_from_the_parameters_alone():
    with pytest.raises(ParameterError, match="delta > 0"):
        plan_key_counts(1.0, 0.0, public_keys=False)
    with pytest.raises(ParameterError, match="delta > 0"):
        plan_key_counts(1.0, 0.0, noise="gaussian")
    with pytest.raises(ParameterError, match="bounds"):
        plan_key_counts(1.0, bounds=(0, 3))
    with pytest.raises(ParameterError, match="bounds must be"):
        plan_key_counts(1.0, bounds="max")
    with pytest.raises(ParameterError, match="select_fraction"):
        plan_key_counts(1.0, select_fraction=1.0)
    assert plan_key_counts(1.0)["delta_counts"] == 0.0
    with pytest.raises(ParameterError, match="key codes"):
        private_key_counts(np.array([0, 1]), np.array([4]), np.array([1]), np.array(["a"]), 1.0,
                           public_keys=np.array(["a"]))  # fmt: skip


def test_review_fixes_labels_alike_equal_bounds_empty_keys_and_text_matching():
    """Labels that print alike are one key with one entry per person (else one key could take L0 Linf);
    equal bounds are accepted; an empty key list is refused whatever the data; public keys match as text."""
    from userdp.data import FiniteDomain, UserDataset
    from userdp.engines import MemoryEngine

    with pytest.raises(DataError, match="as text"):  # a public domain's values match its labels as text
        FiniteDomain(np.array([1, "1"], dtype=object))
    domain = FiniteDomain(np.array([1, "1"], dtype=object), public=False)  # as read off the data
    ds = UserDataset(np.array([0, 3]), np.array([0, 1, 1]), np.array([9]), domain)
    sets, mult = MemoryEngine().key_records(ds)
    assert sets.items.size == 1 and list(mult) == [3]
    offsets, keys, mult = np.array([0, 1]), np.array([0]), np.array([5])
    rel = private_key_counts(offsets, keys, mult, np.array([7]), 1.0, public_keys=["7"], bounds=(8, 8), rng=1)
    assert list(rel.value["keys"]) == ["7"] and rel.value["l0"] == rel.value["linf"] == 8
    for data in ((np.array([0]), keys[:0], mult[:0]), (offsets, keys, mult)):
        with pytest.raises(ParameterError, match="empty"):
            private_key_counts(*data, np.array(["7"]), 1.0, public_keys=[])


def test_gaussian_counts_of_selected_keys_split_delta_in_halves():
    p = plan_key_counts(1.0, 1e-6, noise="gaussian", public_keys=False)
    assert p["delta_keys"] == p["delta_counts"] == 5e-7
    assert plan_key_counts(1.0, 1e-6, noise="laplace", public_keys=False)["delta_keys"] == 1e-6


def test_a_batch_restricted_to_the_counted_keys_in_text_order_for_any_key_list():
    """``_restricted`` (every batch's persons restricted to the counted keys, each person's entries in the text
    order of the labels, the tie order of the bounding) keeps one lookup per domain and key list: a second key
    list over the same domain, or a domain whose codes are not in text order, is looked up again. Catches a
    lookup reused for another key list (a person's records counted on keys not asked for)."""
    from userdp.data import FiniteDomain, UserDataset
    from userdp.vocabulary.counts import _restricted

    domain = FiniteDomain(np.array(["b", "a", "d", "c", "e"], dtype=object), public=False)  # codes not in text order
    sets = UserDataset(np.array([0, 3, 3, 5]), np.array([0, 1, 4, 2, 3]), None, domain)
    mult = np.array([5, 6, 7, 8, 9])
    for counted in (np.array(["a", "b", "c"], dtype=object), np.array(["b", "d", "e"], dtype=object)):
        offsets, codes, m = _restricted(sets, mult, counted)
        want = [[], [], []]
        for u in range(3):
            held = [(str(domain.labels[sets.items[j]]), mult[j]) for j in range(sets.offsets[u], sets.offsets[u + 1])]
            want[u] = [(list(counted).index(t), k) for t, k in sorted(held) if t in set(counted)]
        got = [list(zip(codes[offsets[u] : offsets[u + 1]].tolist(), m[offsets[u] : offsets[u + 1]].tolist(),
                        strict=True)) for u in range(3)]  # fmt: skip
        assert got == want, counted


def test_the_batch_lookup_sees_a_key_list_changed_in_place_and_is_not_kept_after_a_release():
    """A key list changed in place after a batch was restricted with it is looked up again (not a stale
    lookup), and a release does not keep the lookup (key text read off the data) past its passes."""
    from userdp.data import FiniteDomain, UserDataset
    from userdp.vocabulary import counts
    from userdp.vocabulary.counts import _restricted

    domain = FiniteDomain(np.array(["a", "b", "c"], dtype=object), public=False)
    sets = UserDataset(np.array([0, 3]), np.array([0, 1, 2]), None, domain)
    counted = np.array(["a", "b"], dtype=object)
    assert _restricted(sets, np.array([1, 2, 3]), counted)[2].tolist() == [1, 2]
    counted[:] = ["b", "c"]
    assert _restricted(sets, np.array([1, 2, 3]), counted)[2].tolist() == [2, 3]
    private_key_counts(np.array([0, 2]), np.array([0, 1]), np.array([1, 1]), np.array(["a", "b"]), 1.0,
                       public_keys=np.array(["a"]), rng=1)  # fmt: skip
    assert counts._LOOKUP[0] is None

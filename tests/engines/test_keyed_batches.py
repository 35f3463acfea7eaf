"""The in-memory engine's keyed transformations run all users at once (one AES call for every user's first
batch of words, one compiled GKRR pass); they must equal the per-user reference functions of
``userdp.noise`` (``keyed_randomize``, ``keyed_sample_indices``), which define what every engine draws."""

from __future__ import annotations

import numpy as np
import pytest

from userdp.data import FiniteDomain, UserDataset
from userdp.dem import GKRR
from userdp.dem import randomizers as rz
from userdp.dem.randomizers import ExponentialRandomizer
from userdp.engines import memory
from userdp.metrics import ClusteredMetric, FiniteMetric
from userdp.noise import KeyedStreams, keyed_randomize, keyed_sample_indices


def _dataset(sizes, k, ids, seed=1):
    rng = np.random.default_rng(seed)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return UserDataset(offsets, rng.integers(0, k, offsets[-1]), ids, FiniteDomain(np.arange(k)))


def _reference(ds, randomizer, streams):
    o = ds.offsets
    parts = [keyed_randomize(streams, ds.user_ids[i], ds.items[o[i] : o[i + 1]], randomizer) for i in range(ds.n_users)]
    return np.concatenate(parts)


@pytest.mark.parametrize("ids", ["text", "int", "mixed"])
def test_batched_gkrr_equals_the_per_user_reference(ids):
    sizes = np.random.default_rng(0).integers(0, 60, 400)
    sizes[:3] = [0, 1, 2]
    keys = {
        "text": np.array([f"u{i}" for i in range(400)], dtype=object),
        "int": np.arange(400, dtype=np.int64) * 7 - 1000,
        "mixed": np.array([i if i % 2 else f"{i}" for i in range(400)], dtype=object),
    }[ids]
    ds = _dataset(sizes, 20, keys)
    gk, streams = GKRR(ClusteredMetric(4, 5, 0.2), 3.0), KeyedStreams(4)
    got = memory.randomize_keyed(ds, gk, streams)
    assert np.array_equal(got.items, _reference(ds, gk, streams))
    assert np.array_equal(got.offsets, ds.offsets)


def test_users_whose_first_batch_runs_out_or_is_too_large_are_redone_on_their_own_stream(monkeypatch):
    """A user with more than the kernel's chunk of items, and users whose first batch of words runs out (forced
    here by a kernel that gives up on every third user), go to ``GKRR.randomize`` on the user's stream."""
    monkeypatch.setattr(rz, "_GKRR_CHUNK", 64)  # users above 64 items take the per-user path
    sizes = np.array([10, 200, 0, 64, 65, 30, 1] * 5)
    ds = _dataset(sizes, 20, np.arange(sizes.size))
    gk, streams = GKRR(ClusteredMetric(4, 5, 0.2), 2.0), KeyedStreams(8)
    want = _reference(ds, gk, streams)
    assert np.array_equal(memory.randomize_keyed(ds, gk, streams).items, want)
    real = rz._gkrr_users

    def gives_up(words, word_offsets, codes, offsets, *rest):
        done = real(words, word_offsets, codes, offsets, *rest)
        done[::3] = False  # their output is overwritten by the per-user path
        return done

    monkeypatch.setattr(rz, "_gkrr_users", gives_up)
    assert np.array_equal(memory.randomize_keyed(ds, gk, streams).items, want)


def test_other_randomizers_and_sampling_equal_the_per_user_reference():
    ds = _dataset(np.random.default_rng(2).integers(1, 30, 150), 6, np.array([f"p{i}" for i in range(150)]))
    space = FiniteMetric(np.abs(np.subtract.outer(np.arange(6), np.arange(6))), scale=5.0)
    ex, streams = ExponentialRandomizer(space, 2.0), KeyedStreams(3)
    assert np.array_equal(memory.randomize_keyed(ds, ex, streams).items, _reference(ds, ex, streams))
    got = memory.sample_keyed(ds, 7, streams)
    o = ds.offsets
    want = np.concatenate(
        [np.sort(ds.items[o[i] : o[i + 1]])[keyed_sample_indices(streams, ds.user_ids[i], o[i + 1] - o[i], 7)]
         for i in range(ds.n_users)]
    )
    assert np.array_equal(got.items, want)


class _StreamWords:
    """A "randomizer" that returns the first words of the stream it is given (mod ``k``): it shows which stream
    an engine hands a person's randomization."""

    def __init__(self, k: int) -> None:
        self.k = k

    def randomize(self, codes, source):
        return (source.words(len(codes)) % np.uint64(self.k)).astype(np.int64)


def test_each_keyed_step_reads_the_person_s_own_stream_for_its_own_purpose():
    """The three keyed purposes are different strings, and the engines read them: a person's randomization gets
    the person's stream for the randomization purpose -- not the sampling stream (sampling then randomizing the
    same words would correlate the two steps), not another person's, not one keyed by the person's position in
    a chunk -- and its samples come from its sampling stream; in memory and in chunks of every size."""
    import pyarrow as pa

    from tests.engines import brute
    from userdp.engines import ChunkedEngine, Columns
    from userdp.noise.keyed import BOUND_PURPOSE, RANDOMIZE_PURPOSE, SAMPLE_PURPOSE

    assert brute.purposes_are_distinct()
    k = 1 << 20  # words mod 2^20: two different streams give the same output with probability ~ 2^-20 per item
    dom = FiniteDomain(np.arange(k))
    users = np.repeat(np.array([3, 8, 15, 16, 42]), [4, 1, 3, 2, 5])
    items = np.arange(users.size) % 7
    streams = KeyedStreams(17)
    table = pa.table({"user": users, "item": items})

    def words(person, purpose, n):
        return sorted((streams.source(person, purpose).words(n) % np.uint64(k)).astype(np.int64).tolist())

    def persons(parts):
        """(person, items) of every person of the datasets ``parts``."""
        return [(p, ds.user_items(i).tolist()) for ds in parts for i, p in enumerate(ds.user_ids.tolist())]

    groups = brute.by_person(users, items)
    whole = UserDataset.from_arrays(users, items, dom)
    runs = {"memory": ([memory.randomize_keyed(whole, _StreamWords(k), streams)],
                       [memory.sample_keyed(whole, 6, streams)])}  # fmt: skip
    for rows in (1, 4):
        eng = ChunkedEngine(rows)
        data = eng.load(table, Columns("user", "item"), dom)
        runs[rows] = (list(eng.chunks(eng.randomize_keyed(data, _StreamWords(k), streams))),
                      list(eng.chunks(eng.sample_keyed(data, 6, streams))))  # fmt: skip
    for randomized, samples in runs.values():
        assert sorted(p for p, _ in persons(randomized)) == sorted(groups)
        for person, got in persons(randomized):
            n = len(groups[person])
            assert got == words(person, RANDOMIZE_PURPOSE, n)
            assert got != words(person, SAMPLE_PURPOSE, n) and got != words(person, BOUND_PURPOSE, n)
        for person, got in persons(samples):
            assert got == brute.sampled(streams, person, groups[person], 6)


def test_a_bounded_randomization_refuses_persons_of_another_size_than_m():
    """With ``m`` (a bounded release's public size), every person must hold exactly m items, in memory and in
    every chunk: persons holding more (or fewer) are refused, not randomized under m's guarantee."""
    import pyarrow as pa

    from userdp.engines import ChunkedEngine, Columns
    from userdp.errors import DataError

    gk, streams = GKRR(ClusteredMetric(2, 2, 0.3), 2.0), KeyedStreams(2)
    dom = FiniteDomain(np.arange(4))
    for size in (3, 1):
        users = np.repeat(np.arange(6), size)
        with pytest.raises(DataError, match="public number of items"):
            memory.randomize_keyed(UserDataset.from_arrays(users, users % 4, dom), gk, streams, m=2)
        eng = ChunkedEngine(4)
        data = eng.randomize_keyed(eng.load(pa.table({"u": users, "x": users % 4}), Columns("u", "x"), dom), gk,
                                   streams, m=2)  # fmt: skip
        with pytest.raises(DataError, match="public number of items"):
            list(eng.chunks(data))
    ok = memory.randomize_keyed(UserDataset.from_arrays(np.repeat(np.arange(6), 2), np.arange(12) % 4, dom), gk,
                                streams, m=2)  # fmt: skip
    assert list(ok.counts()) == [2] * 6
